/* arena.c - bump allocator; see arena.h.
 *
 * Chunks double in size up to 64 MiB so a million-node graph needs few system calls. A request
 * larger than half a chunk gets a chunk of its own, so big arrays never waste a chunk's tail. */
#include "arena.h"
#include "xalloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct arena_chunk {
	struct arena_chunk *next;
	size_t size;
	max_align_t data[];
};

#define ARENA_MIN (64u * 1024u)
#define ARENA_MAX (64u * 1024u * 1024u)

void arena_init(struct arena *a)
{
	memset(a, 0, sizeof *a);
}

void arena_free(struct arena *a)
{
	struct arena_chunk *c = a->head;
	while (c) {
		struct arena_chunk *next = c->next;
		xfree(c);
		c = next;
	}
	memset(a, 0, sizeof *a);
}

static struct arena_chunk *chunk_new(struct arena *a, size_t size)
{
	struct arena_chunk *c = xmalloc(sizeof *c + size);
	if (!c)
		return NULL;
	c->size = size;
	a->total += size;
	return c;
}

void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n == 0)
		n = 16;
	if ((size_t)(a->end - a->cur) >= n) {
		void *p = a->cur;
		a->cur += n;
		return p;
	}
	size_t want = a->head ? a->head->size * 2 : ARENA_MIN;
	if (want > ARENA_MAX)
		want = ARENA_MAX;
	if (n > want / 2) {
		/* A big block gets its own chunk, linked behind the current one. */
		if (n > SIZE_MAX - sizeof(struct arena_chunk))
			return NULL;
		struct arena_chunk *c = chunk_new(a, n);
		if (!c)
			return NULL;
		if (a->head) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = NULL;
			a->head = c;
			a->cur = a->end = (char *)c->data + n;
		}
		return c->data;
	}
	struct arena_chunk *c = chunk_new(a, want);
	if (!c)
		return NULL;
	c->next = a->head;
	a->head = c;
	a->cur = (char *)c->data + n;
	a->end = (char *)c->data + want;
	return c->data;
}

/* Strings need no alignment: packed into chunks of their own, a million short names do not each
 * round up to 16 bytes. */
static char *str_alloc(struct arena *a, size_t n)
{
	if ((size_t)(a->send - a->scur) < n) {
		size_t want = a->ssize ? a->ssize * 2 : ARENA_MIN;
		if (want > ARENA_MAX)
			want = ARENA_MAX;
		if (n > want / 2)
			return arena_alloc(a, n);
		struct arena_chunk *c = chunk_new(a, want);
		if (!c)
			return NULL;
		if (a->head) { /* behind the current chunk, as big blocks go */
			c->next = a->head->next;
			a->head->next = c;
		} else { /* cur == end: arena_alloc starts a chunk of its own */
			c->next = NULL;
			a->head = c;
		}
		a->ssize = want;
		a->scur = (char *)c->data;
		a->send = a->scur + want;
	}
	char *p = a->scur;
	a->scur += n;
	return p;
}

void arena_reset(struct arena *a)
{
	struct arena_chunk *h = a->head;
	if (!h)
		return;
	for (struct arena_chunk *c = h->next, *next; c; c = next) {
		next = c->next;
		a->total -= c->size;
		xfree(c);
	}
	h->next = NULL;
	a->cur = (char *)h->data;
	a->end = a->cur + h->size;
	a->scur = a->send = NULL;
	a->ssize = 0;
}

void *arena_zalloc(struct arena *a, size_t n)
{
	void *p = arena_alloc(a, n);
	if (p)
		memset(p, 0, n);
	return p;
}

void *arena_array(struct arena *a, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return arena_zalloc(a, n * size);
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = n < SIZE_MAX ? str_alloc(a, n + 1) : NULL;
	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return s ? arena_strndup(a, s, strlen(s)) : NULL;
}

void *arena_memdup(struct arena *a, const void *p, size_t n)
{
	void *q = arena_alloc(a, n);
	if (q && n)
		memcpy(q, p, n);
	return q;
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	char *p = str_alloc(a, (size_t)n + 1);
	if (!p)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}
