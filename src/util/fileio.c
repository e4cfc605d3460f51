/* fileio.c - whole-file input and atomic output; see fileio.h. */
#include "fileio.h"
#include "xalloc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *file_kind(mode_t m)
{
	return S_ISREG(m) ? "regular file" : S_ISDIR(m) ? "directory" : S_ISFIFO(m) ? "FIFO" : S_ISLNK(m) ? "symlink"
		: S_ISCHR(m) || S_ISBLK(m) ? "device" : S_ISSOCK(m) ? "socket" : "special file";
}

/* max: an input that holds more is refused once max + 1 bytes were read, so standard input that
 * never ends (or claims gigabytes) costs at most that much memory. */
static int read_all(struct filebuf *fb, int fd, size_t max, const char *limit, struct gd_err *e)
{
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = xmalloc(cap);
	if (!buf)
		return err_oom(e);
	for (;;) {
		if (len == cap) { /* twice as much, but no more than max + 1 (len <= max here) */
			size_t grow = cap < SIZE_MAX / 2 ? cap * 2 : SIZE_MAX;
			grow = max < grow - 1 ? max + 1 : grow;
			uint8_t *nb = grow > cap ? xrealloc(buf, grow) : NULL;
			if (!nb) {
				xfree(buf);
				return err_oom(e);
			}
			buf = nb;
			cap = grow;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;
			xfree(buf);
			return err_set(e, GD_EINPUT, "cannot read: %s", strerror(err));
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			xfree(buf);
			return err_set(e, GD_EINPUT, "holds more than %zu bytes, %s", max, limit);
		}
	}
	fb->data = buf;
	fb->len = len;
	fb->mapped = 0;
	return 0;
}

int filebuf_open(struct filebuf *fb, const char *path, struct gd_err *e)
{
	return filebuf_open_max(fb, path, SIZE_MAX, NULL, e);
}

/* O_NONBLOCK: opening a FIFO for reading waits for a writer; this open returns at once, and fstat
 * then refuses it (on a regular file the flag does nothing). */
int filebuf_open_max(struct filebuf *fb, const char *path, size_t max, const char *limit, struct gd_err *e)
{
	memset(fb, 0, sizeof *fb);
	struct stat st;
	int in = strcmp(path, "-") == 0; /* standard input: a regular file at its start (< FILE) is mapped
					  * as a named one is; anything else (a pipe) read to its end */
	if (in && (fstat(0, &st) || !S_ISREG(st.st_mode) || lseek(0, 0, SEEK_CUR) != 0))
		return read_all(fb, 0, max, limit, e);
	int fd = in ? 0 : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return err_set(e, GD_EINPUT, "cannot open: %s", strerror(errno));
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = err_set(e, GD_EINPUT, "cannot stat: %s", strerror(errno));
	else if (!S_ISREG(st.st_mode))
		rc = err_set(e, GD_EINPUT, "is a %s, not a regular file", file_kind(st.st_mode));
	else if ((uint64_t)st.st_size > max)
		rc = err_set(e, GD_EINPUT, "is %jd bytes, %s", (intmax_t)st.st_size, limit);
	if (rc) {
		if (!in)
			close(fd);
		return rc;
	}
	if (st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			rc = read_all(fb, fd, max, limit, e);
		} else {
			fb->data = p;
			fb->len = (size_t)st.st_size;
			fb->mapped = 1;
		}
	} else {
		rc = read_all(fb, fd, max, limit, e);
	}
	if (!in)
		close(fd);
	return rc;
}

void filebuf_close(struct filebuf *fb)
{
	if (fb->mapped)
		munmap((void *)fb->data, fb->len);
	else
		xfree((void *)fb->data);
	memset(fb, 0, sizeof *fb);
}

char *path_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

const char *path_ext(const char *path, char *buf, size_t n)
{
	const char *slash = strrchr(path, '/');
	const char *dot = strrchr(slash ? slash + 1 : path, '.');
	size_t i = 0;
	if (dot)
		for (dot++; *dot && i + 1 < n; dot++)
			buf[i++] = (char)tolower((unsigned char)*dot);
	buf[i] = 0;
	return buf;
}

/* ---- temporary files ----
 *
 * A temporary file is named .NAME.graphdiet-PID.XXXXXX beside its destination. SIGINT, SIGTERM
 * and SIGHUP remove the ones being written before the signal ends the process as it would have
 * (a handler only where the signal was not ignored: nohup keeps its meaning); SIGKILL cannot be
 * caught, so a later write of NAME finds a file whose process is gone and says so. */
#define MAX_LIVE 64
static _Atomic(char *) live[MAX_LIVE];
static atomic_flag handlers_set = ATOMIC_FLAG_INIT;

static void remove_live(int sig)
{
	for (int i = 0; i < MAX_LIVE; i++) {
		char *p = atomic_load(&live[i]);
		if (p)
			unlink(p);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void track(char *tmp)
{
	if (!atomic_flag_test_and_set(&handlers_set)) {
		static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
		for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
			struct sigaction old, sa = {.sa_handler = remove_live};
			sigemptyset(&sa.sa_mask);
			if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
				sigaction(sigs[i], &sa, NULL);
		}
	}
	for (int i = 0; i < MAX_LIVE; i++) {
		char *none = NULL;
		if (atomic_compare_exchange_strong(&live[i], &none, tmp))
			return;
	}
}

static void untrack(const char *tmp)
{
	for (int i = 0; i < MAX_LIVE; i++) {
		char *p = (char *)tmp;
		if (atomic_compare_exchange_strong(&live[i], &p, NULL))
			return;
	}
}

/* Says which temporary files of base in dir were left by a graphdiet that is gone (killed with
 * SIGKILL, or a machine that went down): they are not removed, since a user may want them. */
static void note_stale(const char *dir, const char *base)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	size_t bl = strlen(base);
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		long pid;
		char *end;
		if (n[0] != '.' || strncmp(n + 1, base, bl) || strncmp(n + 1 + bl, ".graphdiet-", 11))
			continue;
		pid = strtol(n + 12 + bl, &end, 10);
		if (pid <= 0 || *end != '.' || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue; /* not ours, or its process is alive (EPERM: another user's) */
		fprintf(stderr, "graphdiet: note: %s/%s was left by an interrupted graphdiet (process %ld is gone); "
				"remove it\n", dir, n, pid);
	}
	closedir(d);
}

/* The file a write to path replaces: path itself, or, for a symlink, the file it points to (the
 * link stays a link). "" when path does not exist or is a dangling link (the write creates it). */
static int destination(const char *path, char *real, struct stat *st)
{
	real[0] = 0;
	if (stat(path, st) != 0)
		return errno == ENOENT ? 0 : -1;
	return realpath(path, real) ? 0 : -1;
}

/* A temporary file beside target, to be renamed over it; old: target's stat, whose mode the new file
 * keeps (NULL: target is new). mkstemp's O_EXCL creates it and never follows a link. */
static int open_tmp(struct outfile *o, const char *path, const char *target, const struct stat *old,
		    struct gd_err *e)
{
	char *dir = path_dirname(target);
	const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	size_t n = (dir ? strlen(dir) : 0) + strlen(base) + 64;
	o->tmp = xmalloc(n);
	o->path = strdup(target);
	if (!dir || !o->tmp || !o->path) {
		free(dir);
		outfile_abort(o);
		return err_oom(e);
	}
	note_stale(dir, base);
	snprintf(o->tmp, n, "%s/.%s.graphdiet-%ld.XXXXXX", dir, base, (long)getpid());
	free(dir);
	int fd = mkstemp(o->tmp);
	if (fd < 0) {
		int err = errno;
		xfree(o->tmp);
		o->tmp = NULL;
		outfile_abort(o);
		return err_set(e, GD_EINPUT, "cannot create output %s: %s", path, strerror(err));
	}
	track(o->tmp);
	/* mkstemp makes 0600: the file replaced keeps its mode, a new one gets creat()'s */
	mode_t um = umask(0);
	umask(um);
	fchmod(fd, old ? old->st_mode & 07777 : 0666 & ~um);
	o->f = fdopen(fd, "wb");
	if (!o->f) {
		close(fd);
		outfile_abort(o);
		return err_oom(e);
	}
	setvbuf(o->f, NULL, _IOFBF, 1 << 20);
	return 0;
}

int outfile_open(struct outfile *o, const char *path, struct gd_err *e)
{
	memset(o, 0, sizeof *o);
	if (strcmp(path, "-") == 0 || strcmp(path, "/dev/stdout") == 0) {
		o->f = stdout;
		return 0;
	}
	char real[PATH_MAX];
	struct stat st;
	if (destination(path, real, &st))
		return err_set(e, GD_EINPUT, "cannot write %s: %s", path, strerror(errno));
	if (real[0] && !S_ISREG(st.st_mode)) {
		/* a device, a FIFO, a terminal: written in place, as a shell's > would (never replaced) */
		if (S_ISDIR(st.st_mode))
			return err_set(e, GD_EINPUT, "cannot write %s: it is a directory", path);
		int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
			int err = errno;
			if (fd >= 0)
				close(fd);
			return err_set(e, GD_EINPUT, "cannot write %s: %s", path, strerror(err));
		}
		return 0;
	}
	return open_tmp(o, path, real[0] ? real : path, real[0] ? &st : NULL, e);
}

int outfile_open_entry(struct outfile *o, const char *path, struct gd_err *e)
{
	memset(o, 0, sizeof *o);
	struct stat st;
	int have = lstat(path, &st) == 0;
	if (!have && errno != ENOENT)
		return err_set(e, GD_EINPUT, "cannot write %s: %s", path, strerror(errno));
	if (have && !S_ISREG(st.st_mode))
		return err_set(e, GD_EINPUT, "cannot write %s: it is a %s, not a regular file, and is not replaced", path,
			       file_kind(st.st_mode));
	return open_tmp(o, path, path, have ? &st : NULL, e);
}

int outfile_commit(struct outfile *o, struct gd_err *e)
{
	int rc = 0;
	if (!o->tmp) { /* stdout, or a device or FIFO written in place */
		if (fflush(o->f) != 0 || ferror(o->f))
			rc = err_set(e, GD_EINPUT, "cannot write output: %s", strerror(errno));
		if (o->f != stdout && fclose(o->f) != 0 && !rc)
			rc = err_set(e, GD_EINPUT, "cannot write output: %s", strerror(errno));
		memset(o, 0, sizeof *o);
		return rc;
	}
	if (fflush(o->f) != 0 || ferror(o->f))
		rc = err_set(e, GD_EINPUT, "cannot write %s: %s", o->path, strerror(errno));
	if (fclose(o->f) != 0 && !rc)
		rc = err_set(e, GD_EINPUT, "cannot write %s: %s", o->path, strerror(errno));
	o->f = NULL;
	if (!rc && rename(o->tmp, o->path) != 0)
		rc = err_set(e, GD_EINPUT, "cannot write %s: %s", o->path, strerror(errno));
	if (rc)
		unlink(o->tmp);
	untrack(o->tmp);
	xfree(o->tmp);
	free(o->path);
	memset(o, 0, sizeof *o);
	return rc;
}

void outfile_abort(struct outfile *o)
{
	if (o->f && o->f != stdout)
		fclose(o->f);
	else if (o->f)
		fflush(o->f);
	if (o->tmp) {
		unlink(o->tmp);
		untrack(o->tmp);
		xfree(o->tmp);
	}
	free(o->path);
	memset(o, 0, sizeof *o);
}
