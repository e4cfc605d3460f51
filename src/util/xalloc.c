/* xalloc.c - allocation hook with failure injection; see xalloc.h. */
#include "xalloc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/mman.h>

/* Blocks this big (a million-node graph's tables and arenas) are backed by transparent huge pages
 * where the kernel offers them on request: a random probe into a table of hundreds of megabytes
 * then costs no TLB walk, and the block faults in 2 MiB at a time. Only a hint.
 *
 * Fresh ones (not a grown array's, whose new half may stay unused) are also faulted in ahead, by a
 * helper thread: the kernel's zeroing of fresh pages is about a fifth of a big run's time, and on a
 * machine with a second core it need not be on the main thread. The helper asks the kernel to populate each new block (MADV_POPULATE_WRITE), which maps
 * pages without changing what they hold, so it may race with the block's use, its freeing and its
 * reuse. The queue is small and a request that finds it full is dropped: it is only a hint too. */
#define HUGE_BLOCK ((size_t)8 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

#ifdef MADV_POPULATE_WRITE
enum { PREFAULT_QUEUE = 64 };
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int started, failed;
	unsigned head, n;
	struct {
		uintptr_t lo, hi;
	} q[PREFAULT_QUEUE];
} pf = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, {{0, 0}}};

static void *prefaulter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pf.mu);
	for (;;) {
		while (!pf.n)
			pthread_cond_wait(&pf.cv, &pf.mu);
		uintptr_t lo = pf.q[pf.head].lo, hi = pf.q[pf.head].hi;
		pf.head = (pf.head + 1) % PREFAULT_QUEUE;
		pf.n--;
		pthread_mutex_unlock(&pf.mu);
		/* a huge page at a time, so a block's first pages are ready soonest; a range freed
		 * meanwhile fails (ENOMEM, EFAULT), harmlessly */
		for (uintptr_t p = lo; p < hi; p += HUGE_PAGE)
			if (madvise((void *)p, hi - p < HUGE_PAGE ? hi - p : HUGE_PAGE, MADV_POPULATE_WRITE))
				break;
		pthread_mutex_lock(&pf.mu);
	}
	return NULL;
}

static void prefault(uintptr_t lo, uintptr_t hi)
{
	pthread_mutex_lock(&pf.mu);
	if (!pf.started && !pf.failed) {
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pf.started = !pthread_create(&t, &at, prefaulter, NULL);
		pf.failed = !pf.started;
		pthread_attr_destroy(&at);
	}
	if (pf.started && pf.n < PREFAULT_QUEUE) {
		unsigned i = (pf.head + pf.n++) % PREFAULT_QUEUE;
		pf.q[i].lo = lo;
		pf.q[i].hi = hi;
		pthread_cond_signal(&pf.cv);
	}
	pthread_mutex_unlock(&pf.mu);
}
#else
static void prefault(uintptr_t lo, uintptr_t hi)
{
	(void)lo;
	(void)hi;
}
#endif

static void *hint_huge(void *p, size_t n, int fresh)
{
#ifdef MADV_HUGEPAGE
	if (p && n >= HUGE_BLOCK) {
		uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
		uintptr_t hi = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
		if (hi > lo) {
			madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
			if (fresh)
				prefault(lo, hi);
		}
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

void xalloc_release(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

void xalloc_fail_after(long n)
{
	fail_after = n;
}

void *xmalloc(size_t n)
{
	return should_fail() ? NULL : hint_huge(malloc(n ? n : 1), n, 1);
}

void *xcalloc(size_t n, size_t size)
{
	return should_fail() ? NULL : hint_huge(calloc(n ? n : 1, size ? size : 1), n * size, 1);
}

void *xrealloc(void *p, size_t n)
{
	return should_fail() ? NULL : hint_huge(realloc(p, n ? n : 1), n, 0);
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
