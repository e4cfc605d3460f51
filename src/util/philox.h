/* philox.h - Philox4x32-10 counter-based random numbers (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC 2011). Element i of a stream depends only on (seed, i), so any part of
 * a tensor, or a recomputed Dropout mask, can be regenerated bit for bit. */
#ifndef GD_PHILOX_H
#define GD_PHILOX_H

#include <stdint.h>

void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* The i-th uniform in [0, 1) of stream `seed`, with 24 bits of resolution. */
float philox_uniform(uint64_t seed, uint64_t i);
/* out[j] = philox_uniform(seed, first + j) for j < n, one block of four per four. */
void philox_uniforms(uint64_t seed, uint64_t first, int64_t n, float *out);
/* The i-th standard normal of stream `seed` (Box-Muller over two uniforms). */
double philox_normal(uint64_t seed, uint64_t i);

#endif
