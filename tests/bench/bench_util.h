/* bench_util.h - what several benchmarks share: a monotonic clock, a double comparator for qsort,
 * and the streaming-copy roof (memcpy between two faulted-in buffers). */
#ifndef GD_BENCH_UTIL_H
#define GD_BENCH_UTIL_H

#include <stddef.h>

/* Seconds on the monotonic clock. */
double bench_now(void);
/* qsort comparator for doubles, ascending. */
int bench_by_value(const void *a, const void *b);
/* memcpy's GB/s (bytes read plus written) between two faulted-in buffers of `bytes` each: the
 * fastest of `repeat` copies after one to warm up (the roof: what a kernel streaming its bytes could
 * reach); 0 when out of memory. */
double bench_copy_gbs(size_t bytes, int repeat);

#endif
