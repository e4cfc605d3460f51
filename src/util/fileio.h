/* fileio.h - reading whole inputs and writing outputs atomically.
 *
 * Inputs: regular files are memory-mapped, so weight bytes stay on disk until a stage touches
 * them (plan/check on a 10 GB model never reads its weights); stdin and pipes are read into
 * memory. "-" means stdin.
 *
 * Outputs: written to a temporary file in the destination's directory and renamed over the
 * destination only once everything was written and flushed, so a failure never leaves a
 * partial file. A symlink's target is replaced, not the link. A destination that exists and is
 * not a regular file (a device, a FIFO) is written in place, never replaced. "-" and
 * /dev/stdout mean stdout; these cannot be atomic, and their write errors are still reported.
 * Temporary files are removed on SIGINT, SIGTERM and SIGHUP. */
#ifndef GD_FILEIO_H
#define GD_FILEIO_H

#include "err.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct filebuf {
	const uint8_t *data;
	size_t len;
	int mapped;
};

/* Refuses what is not a regular file (a FIFO would hang the reader, /dev/zero fill memory), "-"
 * aside. */
int filebuf_open(struct filebuf *fb, const char *path, struct gd_err *e);
/* The same, refusing a file of more than max bytes before reading it (standard input: once it gave
 * more); the message is "is N bytes, LIMIT", so limit says what the most is and why. */
int filebuf_open_max(struct filebuf *fb, const char *path, size_t max, const char *limit, struct gd_err *e);
/* What a file of mode m is, for messages: "FIFO", "directory", "device", "symlink", ... */
const char *file_kind(mode_t m);
void filebuf_close(struct filebuf *fb);

struct outfile {
	FILE *f;
	char *tmp;  /* NULL when writing stdout, or in place */
	char *path;
};

int outfile_open(struct outfile *o, const char *path, struct gd_err *e);
/* For a name the model chose (run -o DIR writes DIR/<output>.npy): the entry is replaced only when
 * it is absent or a regular file. A symlink there (which would send the write out of DIR), a FIFO
 * (which would block), a directory or a device is refused; rename never follows a link. */
int outfile_open_entry(struct outfile *o, const char *path, struct gd_err *e);
/* Flushes, checks for write errors and renames into place. Closes in every case. */
int outfile_commit(struct outfile *o, struct gd_err *e);
/* Drops the output: the temporary file is removed and the destination left untouched. */
void outfile_abort(struct outfile *o);

/* Directory part of a path ("." when none), allocated with xmalloc. */
char *path_dirname(const char *path);
/* Extension after the last '.', lower-cased into buf; "" when none. */
const char *path_ext(const char *path, char *buf, size_t n);

#endif
