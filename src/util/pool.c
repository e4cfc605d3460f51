/* pool.c - see pool.h. Each call deals its indices out in runs, one run a thread (thread w gets
 * [n w / T, n (w + 1) / T)), which each takes from the front of its own run and, once that is done,
 * from the back of the others' runs: a slow piece or a late thread holds up no one, and a kernel's
 * piece i lands on the same core call after call, where the piece before it left its data (one
 * counter for all, pieces went to whichever thread came first, and half a tensor moved between
 * the cores at each op: on this project's virtual machine, whose two vCPUs sit on different dies
 * at times, a cache line's trip takes 480 ns, and rescnn32's step took as long on two threads as
 * on one). A generation number wakes the workers for each call. A worker spins a while (SPIN
 * checks) before it sleeps: callers make calls in quick succession (one per segment length, one
 * per search step, one per kernel), and waking a sleeping thread costs more than such a call's
 * work. A worker joins a call only while it is open: the caller closes it once every index is
 * handed out and then waits for the workers that joined, never for one still waking up (which
 * finds the call closed and goes back to waiting). */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

static struct {
	int threads;   /* 0: not set yet (the cores online) */
	int started;   /* workers running */
	pthread_mutex_t mu;
	pthread_cond_t go;
	atomic_ulong gen;      /* bumped for each call */
	atomic_uint ctl;       /* CLOSED, plus the workers in the current call */
	void (*fn)(void *, uint32_t, uint32_t);
	void *arg;
	uint32_t parts;        /* the runs the indices are dealt in: the threads */
	atomic_int active;     /* a pool_for is running */
	struct {
		_Alignas(64) atomic_ullong lohi; /* a run: its next index in the low 32 bits, its end in the high */
	} run[POOL_MAX];
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .ctl = 0x80000000u};

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
#define CLOSED 0x80000000u

static _Thread_local uint32_t self; /* the thread's w */

uint32_t pool_self(void)
{
	return self;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* The next index for thread w, from the front of its run, else from the back of another's. */
static int take(uint32_t w, uint32_t *i)
{
	for (uint32_t k = 0; k < P.parts; k++) {
		atomic_ullong *r = &P.run[(w + k) % P.parts].lohi;
		unsigned long long v = atomic_load(r);
		while ((uint32_t)v < (uint32_t)(v >> 32)) {
			unsigned long long to = k ? v - (1ull << 32) : v + 1;
			if (atomic_compare_exchange_weak(r, &v, to)) {
				*i = k ? (uint32_t)(v >> 32) - 1 : (uint32_t)v;
				return 1;
			}
		}
	}
	return 0;
}

static void drain(uint32_t w)
{
	for (uint32_t i; take(w, &i);)
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
		unsigned c = atomic_load(&P.ctl);
		while (!(c & CLOSED) && !atomic_compare_exchange_weak(&P.ctl, &c, c + 1))
			;
		if (c & CLOSED)
			continue;
		drain(w);
		atomic_fetch_sub(&P.ctl, 1);
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
	start();
	P.fn = fn;
	P.arg = arg;
	P.parts = (uint32_t)pool_threads();
	for (uint32_t w = 0; w < P.parts; w++)
		atomic_store(&P.run[w].lohi, (unsigned long long)((uint64_t)n * w / P.parts) |
						 (unsigned long long)((uint64_t)n * (w + 1) / P.parts) << 32);
	atomic_store(&P.ctl, 0);
	atomic_fetch_add(&P.gen, 1);
	pthread_cond_broadcast(&P.go);
	pthread_mutex_unlock(&P.mu);
	drain(0);
	atomic_fetch_or(&P.ctl, CLOSED);
	for (int k = 0; atomic_load(&P.ctl) != CLOSED; k++) /* the workers that joined finish their last index */
		if (k < SPIN)
			relax();
		else
			sched_yield();
	atomic_store(&P.active, 0);
}
