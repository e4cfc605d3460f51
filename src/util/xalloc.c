/* xalloc.c - allocation hook with failure injection; see xalloc.h. */
#include "xalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Blocks this big (a million-node graph's tables and arenas) are backed by transparent huge pages
 * where the kernel offers them on request: a random probe into a table of hundreds of megabytes
 * then costs no TLB walk, and the block faults in 2 MiB at a time. Only a hint. */
#define HUGE_BLOCK ((size_t)8 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

static void *hint_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
	if (p && n >= HUGE_BLOCK) {
		uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
		uintptr_t hi = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
		if (hi > lo)
			madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
	}
#else
	(void)n;
#endif
	return p;
}

static long fail_after = -1;

static int should_fail(void)
{
	if (fail_after < 0)
		return 0;
	if (fail_after == 0)
		return 1;
	fail_after--;
	return 0;
}

void xalloc_fail_after(long n)
{
	fail_after = n;
}

void *xmalloc(size_t n)
{
	return should_fail() ? NULL : hint_huge(malloc(n ? n : 1), n);
}

void *xcalloc(size_t n, size_t size)
{
	return should_fail() ? NULL : hint_huge(calloc(n ? n : 1, size ? size : 1), n * size);
}

void *xrealloc(void *p, size_t n)
{
	return should_fail() ? NULL : hint_huge(realloc(p, n ? n : 1), n);
}

void *xreallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return xrealloc(p, n * size);
}

void xfree(void *p)
{
	free(p);
}

int xgrow(void **arr, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? 2 * *cap : 16;
	void *p = xreallocarray(*arr, nc, size);
	if (!p)
		return -1;
	*arr = p;
	*cap = nc;
	return 0;
}
