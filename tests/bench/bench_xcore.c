/* bench_xcore.c - how long a cache line takes to go from one core to another and back.
 *
 *   bench_xcore [CPU_A CPU_B]
 *
 * Two threads, pinned to CPUs A and B (default 0 and 1), hand an atomic counter back and forth
 * 100,000 times; prints "roundtrip_ns N", the mean round trip. run_step.py runs it with each
 * round: a virtual machine's two vCPUs on cores that share a cache take about 60 ns, and about 330
 * ns when the host has put them on different dies, where every kernel cut over the threads pays
 * for its data's moves (an unrolled RNN's step at 2 threads doubles), so a row timed then is not
 * compared with one timed before. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TRIPS 100000

static _Alignas(64) atomic_long ball;

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	(void)sched_setaffinity(0, sizeof s, &s); /* unpinned where the CPU is not ours */
}

static void *partner(void *arg)
{
	pin((int)(long)arg);
	for (long i = 0; i < TRIPS; i++) {
		while (atomic_load(&ball) != 2 * i + 1)
			;
		atomic_store(&ball, 2 * i + 2);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t t;
	if (pthread_create(&t, NULL, partner, (void *)(long)b))
		return 2;
	pin(a);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < TRIPS; i++) {
		atomic_store(&ball, 2 * i + 1);
		while (atomic_load(&ball) != 2 * i + 2)
			;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_join(t, NULL);
	double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / TRIPS;
	printf("roundtrip_ns %.0f\n", ns);
	return 0;
}
