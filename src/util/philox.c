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

/* philox4x32 of counters c .. c + 7 side by side (word w of counter c + l in out[w][l]): the same
 * rounds over arrays, which the compiler vectorises; compiled for AVX2 too (integer arithmetic:
 * the same bits), picked at load time. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define PHILOX_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PHILOX_CLONES
#endif

static inline void philox8(uint64_t seed, uint64_t c, uint32_t out[4][8])
{
	uint32_t c0[8], c1[8], c2[8] = {0}, c3[8] = {0};
	for (int l = 0; l < 8; l++) {
		c0[l] = (uint32_t)(c + (uint64_t)l);
		c1[l] = (uint32_t)((c + (uint64_t)l) >> 32);
	}
	uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
	for (int r = 0; r < 10; r++) {
		for (int l = 0; l < 8; l++) {
			uint64_t p0 = (uint64_t)0xD2511F53u * c0[l], p1 = (uint64_t)0xCD9E8D57u * c2[l];
			uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
			c1[l] = (uint32_t)p1;
			c3[l] = (uint32_t)p0;
			c0[l] = n0;
			c2[l] = n2;
		}
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	for (int l = 0; l < 8; l++) {
		out[0][l] = c0[l];
		out[1][l] = c1[l];
		out[2][l] = c2[l];
		out[3][l] = c3[l];
	}
}

PHILOX_CLONES void philox_uniforms(uint64_t seed, uint64_t first, int64_t n, float *out)
{
	int64_t j = 0;
	for (; j < n && (first + (uint64_t)j) % 4; j++)
		out[j] = philox_uniform(seed, first + (uint64_t)j);
	for (; j + 32 <= n; j += 32) { /* eight whole blocks */
		uint32_t r[4][8];
		philox8(seed, (first + (uint64_t)j) / 4, r);
		for (int l = 0; l < 8; l++)
			for (int k = 0; k < 4; k++)
				out[j + 4 * l + k] = (float)(r[k][l] >> 8) * (1.0f / 16777216.0f);
	}
	for (; j + 4 <= n; j += 4) { /* a whole block: all four words used */
		uint32_t r[4];
		philox4x32(seed, (first + (uint64_t)j) / 4, r);
		for (int k = 0; k < 4; k++)
			out[j + k] = (float)(r[k] >> 8) * (1.0f / 16777216.0f);
	}
	for (; j < n; j++)
		out[j] = philox_uniform(seed, first + (uint64_t)j);
}

double philox_normal(uint64_t seed, uint64_t i)
{
	uint32_t r[4];
	philox4x32(seed, i, r);
	double u1 = ((double)r[0] + 1.0) / 4294967297.0; /* (0, 1]: log is finite */
	double u2 = (double)r[1] / 4294967296.0;
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
