/* pool.c - see pool.h. Work is handed out an index at a time from an atomic counter, so a slow
 * piece does not hold up the others; a generation number wakes the workers for each call. A
 * worker spins a while (SPIN checks) before it sleeps, and so does the caller waiting for the
 * workers: callers make calls in quick succession (one per segment length, one per search step),
 * and waking a sleeping thread costs more than such a call's work. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static struct {
	int threads;   /* 0: not set yet (the cores online) */
	int started;   /* workers running */
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	atomic_ulong gen;      /* bumped for each call */
	atomic_int busy;       /* workers still in the current call */
	uint32_t n;
	void (*fn)(void *, uint32_t, uint32_t);
	void *arg;
	atomic_uint next;      /* the next index to hand out */
	atomic_int active;     /* a pool_for is running */
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

int pool_threads(void)
{
	if (!P.threads) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		P.threads = c < 1 ? 1 : c > POOL_MAX ? POOL_MAX : (int)c;
	}
	return P.threads;
}

void pool_set_threads(int n)
{
	P.threads = n < 1 ? 1 : n > POOL_MAX ? POOL_MAX : n;
}

#define SPIN 20000

static _Thread_local uint32_t self; /* the thread's w */

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void drain(uint32_t w)
{
	for (uint32_t i; (i = atomic_fetch_add(&P.next, 1)) < P.n;)
		P.fn(P.arg, i, w);
}

static void *worker(void *arg)
{
	uint32_t w = (uint32_t)(uintptr_t)arg;
	unsigned long seen = 0;
	self = w;
	for (;;) {
		for (int k = 0; k < SPIN && atomic_load(&P.gen) == seen; k++)
			relax();
		if (atomic_load(&P.gen) == seen) {
			pthread_mutex_lock(&P.mu);
			while (atomic_load(&P.gen) == seen)
				pthread_cond_wait(&P.go, &P.mu);
			pthread_mutex_unlock(&P.mu);
		}
		seen = atomic_load(&P.gen);
		drain(w);
		if (atomic_fetch_sub(&P.busy, 1) == 1) {
			pthread_mutex_lock(&P.mu);
			pthread_cond_signal(&P.done);
			pthread_mutex_unlock(&P.mu);
		}
	}
	return NULL;
}

/* Starts the workers once; the number that run (0 when none could start). */
static int start(void)
{
	if (P.started)
		return P.started;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	for (int w = 1; w < pool_threads(); w++) {
		pthread_t t;
		if (pthread_create(&t, &a, worker, (void *)(uintptr_t)w))
			break;
		P.started++;
	}
	pthread_attr_destroy(&a);
	return P.started;
}

void pool_for(uint32_t n, void (*fn)(void *arg, uint32_t i, uint32_t w), void *arg)
{
	int idle = 0;
	if (n < 2 || pool_threads() < 2 || !atomic_compare_exchange_strong(&P.active, &idle, 1)) {
		for (uint32_t i = 0; i < n; i++)
			fn(arg, i, self);
		return;
	}
	pthread_mutex_lock(&P.mu);
	int workers = start();
	P.n = n;
	P.fn = fn;
	P.arg = arg;
	atomic_store(&P.next, 0);
	atomic_store(&P.busy, workers);
	atomic_fetch_add(&P.gen, 1);
	pthread_cond_broadcast(&P.go);
	pthread_mutex_unlock(&P.mu);
	drain(0);
	for (int k = 0; k < SPIN && atomic_load(&P.busy); k++)
		relax();
	if (atomic_load(&P.busy)) {
		pthread_mutex_lock(&P.mu);
		while (atomic_load(&P.busy))
			pthread_cond_wait(&P.done, &P.mu);
		pthread_mutex_unlock(&P.mu);
	}
	atomic_store(&P.active, 0);
}
