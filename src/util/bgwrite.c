/* bgwrite.c - output in large chunks, written by a second thread.
 *
 * Two chunks and one slot: bgwrite_flush waits until the thread has taken nothing (todo NULL),
 * leaves the full chunk in todo and goes on filling the other. The thread writes todo, clears it
 * and wakes the caller; one condition variable serves both directions. */
#include "bgwrite.h"

#include "xalloc.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? errno : EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void *writer(void *arg)
{
	struct bgwrite *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->todo && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->todo)
			break;
		const uint8_t *p = w->todo;
		size_t n = w->todo_len;
		int failed = w->werr;
		pthread_mutex_unlock(&w->mu);
		int r = failed ? 0 : write_all(w->fd, p, n);
		pthread_mutex_lock(&w->mu);
		if (r && !w->werr)
			w->werr = r;
		w->todo = NULL;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

void bgwrite_open(struct bgwrite *w, FILE *f)
{
	memset(w, 0, sizeof *w);
	w->f = f;
	w->err = fflush(f) ? errno : 0;
	w->fd = fileno(f);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
}

/* Waits until the thread has nothing in hand; takes over its error. */
static void drain(struct bgwrite *w)
{
	pthread_mutex_lock(&w->mu);
	while (w->todo)
		pthread_cond_wait(&w->cv, &w->mu);
	if (w->werr && !w->err)
		w->err = w->werr;
	pthread_mutex_unlock(&w->mu);
}

/* Hands the current chunk over; `last`: none will follow, so no thread is started for it. */
static void hand_over(struct bgwrite *w, int last)
{
	if (!w->len || w->err) {
		w->len = 0;
		return;
	}
	const uint8_t *p = w->chunk[w->cur];
	size_t n = w->len;
	w->len = 0;
	if (w->fd < 0) {
		errno = 0;
		if (fwrite(p, 1, n, w->f) != n)
			w->err = errno ? errno : EIO;
		return;
	}
	if (!w->threaded && !last && !pthread_create(&w->th, NULL, writer, w))
		w->threaded = 1;
	if (!w->threaded) {
		w->err = write_all(w->fd, p, n);
		return;
	}
	drain(w);
	if (w->err)
		return;
	pthread_mutex_lock(&w->mu);
	w->todo = p;
	w->todo_len = n;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	w->cur ^= 1;
}

void bgwrite_flush(struct bgwrite *w)
{
	hand_over(w, 0);
}

uint8_t *bgwrite_free(struct bgwrite *w, uint8_t **end)
{
	if (w->len == BGWRITE_CHUNK)
		bgwrite_flush(w);
	if (w->err)
		return NULL;
	if (!w->chunk[w->cur] && !(w->chunk[w->cur] = xmalloc(BGWRITE_CHUNK))) {
		w->err = ENOMEM;
		return NULL;
	}
	*end = w->chunk[w->cur] + BGWRITE_CHUNK;
	return w->chunk[w->cur] + w->len;
}

void bgwrite_wrote(struct bgwrite *w, size_t n)
{
	w->len += n;
}

void bgwrite_put(struct bgwrite *w, const void *p, size_t n)
{
	const uint8_t *s = p;
	while (n) {
		uint8_t *end, *o = bgwrite_free(w, &end);
		if (!o)
			return;
		size_t k = (size_t)(end - o) < n ? (size_t)(end - o) : n;
		memcpy(o, s, k);
		w->len += k;
		s += k;
		n -= k;
	}
}

int bgwrite_close(struct bgwrite *w)
{
	hand_over(w, 1);
	if (w->threaded) {
		pthread_mutex_lock(&w->mu);
		w->stop = 1;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->th, NULL);
		if (w->werr && !w->err)
			w->err = w->werr;
	}
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	xfree(w->chunk[0]);
	xfree(w->chunk[1]);
	w->chunk[0] = w->chunk[1] = NULL;
	return w->err;
}
