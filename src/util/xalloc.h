/* xalloc.h - the one allocation hook.
 *
 * Every heap allocation in graphdiet goes through these, so tests can make the Nth allocation
 * fail (xalloc_fail_after) and check that each error path reports out-of-memory without leaking,
 * as SQLite's and Lua's test harnesses do. They never abort: callers handle NULL. */
#ifndef GD_XALLOC_H
#define GD_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
void *xreallocarray(void *p, size_t n, size_t size);
void xfree(void *p);
/* Doubles *arr (elements of `size` bytes, *cap of them; at least 16) when *n == *cap. */
int xgrow(void **arr, size_t n, size_t *cap, size_t size);

/* Hands the free memory between live blocks back to the system (glibc's malloc_trim): a stage's
 * freed tables otherwise stay resident beside the next stage's, which the executor's allocator
 * settings (no trimming below 512 MB) keep off the heap's top. */
void xalloc_release(void);

/* After `n` more successful allocations, every further one fails; -1 disables. */
void xalloc_fail_after(long n);

#endif
