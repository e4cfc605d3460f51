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

struct filebuf {
	const uint8_t *data;
	size_t len;
	int mapped;
};

int filebuf_open(struct filebuf *fb, const char *path, struct gd_err *e);
void filebuf_close(struct filebuf *fb);

struct outfile {
	FILE *f;
	char *tmp;  /* NULL when writing stdout, or in place */
	char *path;
};

int outfile_open(struct outfile *o, const char *path, struct gd_err *e);
/* Flushes, checks for write errors and renames into place. Closes in every case. */
int outfile_commit(struct outfile *o, struct gd_err *e);
/* Drops the output: the temporary file is removed and the destination left untouched. */
void outfile_abort(struct outfile *o);

/* Directory part of a path ("." when none), allocated with xmalloc. */
char *path_dirname(const char *path);
/* Extension after the last '.', lower-cased into buf; "" when none. */
const char *path_ext(const char *path, char *buf, size_t n);

#endif
