/* pool.h - a small fork-join pool of threads for work that splits into independent pieces.
 *
 * pool_for(n, fn, arg) calls fn(arg, i, w) once for each i in [0, n), spread over the pool's
 * threads and the caller, and returns when every call has returned. w (below pool_threads())
 * names the thread making the call, so a caller can give each thread its own scratch. The calls
 * must not depend on one another; a caller that writes each i's result to a slot of its own and
 * combines the slots in order afterwards gets the same answer for any number of threads.
 *
 * The number of threads is graphdiet's global --threads N (pool_set_threads), by default the
 * cores online; with 1, or n < 2, fn runs in the caller alone. Workers start on first use and
 * sleep between calls. One pool_for at a time: a call made while one runs (from inside fn, or
 * from another thread) runs in its caller alone, with the caller's w (0 outside the pool). */
#ifndef GD_POOL_H
#define GD_POOL_H

#include <stdint.h>

#define POOL_MAX 64 /* threads at most */

/* The threads pool_for uses, the caller included (1 to POOL_MAX). */
int pool_threads(void);
/* Sets them (clamped to 1 .. POOL_MAX); before the first pool_for. */
void pool_set_threads(int n);
void pool_for(uint32_t n, void (*fn)(void *arg, uint32_t i, uint32_t w), void *arg);
/* The calling thread's w: inside fn, the same as fn's; 0 outside the pool. */
uint32_t pool_self(void);

#endif
