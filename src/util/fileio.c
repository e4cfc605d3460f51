/* fileio.c - whole-file input and atomic output; see fileio.h. */
#include "fileio.h"
#include "xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int read_all(struct filebuf *fb, int fd, struct gd_err *e)
{
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = xmalloc(cap);
	if (!buf)
		return err_oom(e);
	for (;;) {
		if (len == cap) {
			uint8_t *nb = cap < SIZE_MAX / 2 ? xrealloc(buf, cap * 2) : NULL;
			if (!nb) {
				xfree(buf);
				return err_oom(e);
			}
			buf = nb;
			cap *= 2;
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
	}
	fb->data = buf;
	fb->len = len;
	fb->mapped = 0;
	return 0;
}

int filebuf_open(struct filebuf *fb, const char *path, struct gd_err *e)
{
	memset(fb, 0, sizeof *fb);
	if (strcmp(path, "-") == 0)
		return read_all(fb, 0, e);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(e, GD_EINPUT, "cannot open: %s", strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int err = errno;
		close(fd);
		return err_set(e, GD_EINPUT, "cannot stat: %s", strerror(err));
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return err_set(e, GD_EINPUT, "is a directory");
	}
	int rc;
	if (S_ISREG(st.st_mode) && st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			rc = read_all(fb, fd, e);
		} else {
			fb->data = p;
			fb->len = (size_t)st.st_size;
			fb->mapped = 1;
			rc = 0;
		}
	} else {
		rc = read_all(fb, fd, e);
	}
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

int outfile_open(struct outfile *o, const char *path, struct gd_err *e)
{
	memset(o, 0, sizeof *o);
	if (strcmp(path, "-") == 0) {
		o->f = stdout;
		return 0;
	}
	char *dir = path_dirname(path);
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	size_t n = strlen(dir) + strlen(base) + 32;
	o->tmp = xmalloc(n);
	o->path = strdup(path);
	if (!dir || !o->tmp || !o->path) {
		free(dir);
		outfile_abort(o);
		return err_oom(e);
	}
	snprintf(o->tmp, n, "%s/.%s.tmpXXXXXX", dir, base);
	free(dir);
	int fd = mkstemp(o->tmp);
	if (fd < 0) {
		int err = errno;
		xfree(o->tmp);
		o->tmp = NULL;
		outfile_abort(o);
		return err_set(e, GD_EINPUT, "cannot create output %s: %s", path, strerror(err));
	}
	/* mkstemp makes 0600; give the result the mode a plain creat() would. */
	mode_t um = umask(0);
	umask(um);
	fchmod(fd, 0666 & ~um);
	o->f = fdopen(fd, "wb");
	if (!o->f) {
		close(fd);
		outfile_abort(o);
		return err_oom(e);
	}
	setvbuf(o->f, NULL, _IOFBF, 1 << 20);
	return 0;
}

int outfile_commit(struct outfile *o, struct gd_err *e)
{
	int rc = 0;
	if (!o->tmp) {
		if (fflush(o->f) != 0 || ferror(o->f))
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
		xfree(o->tmp);
	}
	free(o->path);
	memset(o, 0, sizeof *o);
}
