/* bgwrite.h - output in large chunks, written by a second thread.
 *
 * Serializing a big model and the kernel's copying its bytes into the page cache take about as long
 * as each other (a million-node training graph: ~1 GB, a second or so each). With the write(2)s on
 * a thread of their own they overlap: the caller fills one chunk while the thread writes the other,
 * and waits only when the thread is a whole chunk behind. The thread starts with the first full
 * chunk, so small outputs never make one.
 *
 * A stream without a file descriptor (open_memstream) is written with fwrite on the caller's
 * thread, and so is everything when the thread cannot be started. The stream's own buffer is
 * flushed first, and nothing may be written to it until bgwrite_close. */
#ifndef GD_BGWRITE_H
#define GD_BGWRITE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { BGWRITE_CHUNK = 4 << 20 };

struct bgwrite {
	FILE *f;
	int fd;             /* f's descriptor, written with write(2); -1: fwrite */
	uint8_t *chunk[2];  /* the one being filled is chunk[cur] */
	int cur;
	size_t len;         /* bytes in chunk[cur] */
	int err;            /* errno of the first failure, ENOMEM for out of memory; then nothing more is written */
	int threaded;
	/* shared with the thread, under mu */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const uint8_t *todo; /* the chunk the thread is to write (or is writing); NULL: idle */
	size_t todo_len;
	int stop, werr;
};

/* Starts writing to f. Allocates nothing yet; cannot fail. */
void bgwrite_open(struct bgwrite *w, FILE *f);
/* The free part of the current chunk, [returned, *end); NULL (after setting err) out of memory. */
uint8_t *bgwrite_free(struct bgwrite *w, uint8_t **end);
/* n bytes were put at the start of what bgwrite_free returned. */
void bgwrite_wrote(struct bgwrite *w, size_t n);
/* Hands the current chunk over (to the thread, or to fwrite) and starts an empty one. */
void bgwrite_flush(struct bgwrite *w);
/* Appends a copy of p[0, n). */
void bgwrite_put(struct bgwrite *w, const void *p, size_t n);
/* Writes what is left, stops the thread and frees the chunks: 0, or the errno of the first failure
 * (ENOMEM when a chunk could not be allocated). */
int bgwrite_close(struct bgwrite *w);

#endif
