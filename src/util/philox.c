/* philox.c - Philox4x32-10; see philox.h. Constants from the paper's reference table. */
#include "philox.h"

#include <math.h>

void philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4])
{
	uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
	uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
	for (int r = 0; r < 10; r++) {
		uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
		c1 = (uint32_t)p1;
		c3 = (uint32_t)p0;
		c0 = n0;
		c2 = n2;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	out[0] = c0;
	out[1] = c1;
	out[2] = c2;
	out[3] = c3;
}

float philox_uniform(uint64_t seed, uint64_t i)
{
	uint32_t r[4];
	philox4x32(seed, i / 4, r);
	return (float)(r[i % 4] >> 8) * (1.0f / 16777216.0f);
}

double philox_normal(uint64_t seed, uint64_t i)
{
	uint32_t r[4];
	philox4x32(seed, i, r);
	double u1 = ((double)r[0] + 1.0) / 4294967297.0; /* (0, 1]: log is finite */
	double u2 = (double)r[1] / 4294967296.0;
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
