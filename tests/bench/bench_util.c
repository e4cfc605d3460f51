/* bench_util.c - see bench_util.h. */
#include "bench_util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int bench_by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double bench_copy_gbs(size_t n, int repeat)
{
	char *a = malloc(n), *b = malloc(n);
	double best = 0;
	if (!a || !b || n < 64) {
		free(a);
		free(b);
		return 0;
	}
	memset(a, 1, n);
	memset(b, 2, n);
	memcpy(b, a, n);
	for (int r = 0; r < repeat; r++) {
		double t0 = bench_now();
		memcpy(b, a, n);
		double t = bench_now() - t0;
		a[r % 64] = b[n - 1 - (size_t)(r % 64)]; /* keeps the copies */
		if (t > 0 && 2.0 * (double)n / t / 1e9 > best)
			best = 2.0 * (double)n / t / 1e9;
	}
	free(a);
	free(b);
	return best;
}
