/* arena.h - bump allocator that owns everything a graph allocates.
 *
 * Memory is carved from chunks that only grow; nothing is freed one by one. arena_free releases
 * every chunk at once. Allocation failure is reported (NULL), never fatal, so readers can turn
 * it into an error status. */
#ifndef GD_ARENA_H
#define GD_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
	struct arena_chunk *head;
	char *cur, *end;
	size_t total;      /* bytes obtained from the system */
	char *scur, *send; /* strings: packed, unaligned, in chunks of their own */
	size_t ssize;      /* the size of the newest string chunk */
};

void arena_init(struct arena *a);
void arena_free(struct arena *a);
/* Empties the arena for reuse, keeping its newest chunk (scratch memory reused per message). */
void arena_reset(struct arena *a);
void *arena_alloc(struct arena *a, size_t n);         /* 16-byte aligned, uninitialised */
/* Strings (strdup, strndup, printf) are packed with no alignment, in chunks of their own. */
void *arena_zalloc(struct arena *a, size_t n);        /* zeroed */
void *arena_array(struct arena *a, size_t n, size_t size); /* zeroed, overflow-checked */
char *arena_strdup(struct arena *a, const char *s);
char *arena_strndup(struct arena *a, const char *s, size_t n);
void *arena_memdup(struct arena *a, const void *p, size_t n);
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
