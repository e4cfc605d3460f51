/* xalloc.c - allocation hook with failure injection; see xalloc.h. */
#include "xalloc.h"

#include <stdint.h>
#include <stdlib.h>

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
	return should_fail() ? NULL : malloc(n ? n : 1);
}

void *xcalloc(size_t n, size_t size)
{
	return should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void *xrealloc(void *p, size_t n)
{
	return should_fail() ? NULL : realloc(p, n ? n : 1);
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
