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

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define PHILOX_AVX2 1

/* The 64-bit products m * v of v's eight 32-bit lanes: their low words in *lo, high in *hi. The
 * compiler does not vectorise philox4x32's widening products over counters (it ran scalar, 4 ns a
 * uniform); AVX2 multiplies the even lanes and the odd ones (shifted down) 32 x 32 -> 64, and the
 * halves are interleaved back. */
__attribute__((target("avx2"))) static inline void mul_wide(__m256i v, __m256i m, __m256i *lo, __m256i *hi)
{
	__m256i ev = _mm256_mul_epu32(v, m), od = _mm256_mul_epu32(_mm256_srli_epi64(v, 32), m);
	*lo = _mm256_blend_epi32(ev, _mm256_slli_epi64(od, 32), 0xAA);
	*hi = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA);
}

/* nb blocks of 32 uniforms (8 counters each, from c on, four words each) into out: philox4x32's
 * rounds and philox_uniform's conversion, eight counters a vector; the same integers, so the same
 * bits. Each round waits on the last one's products: nb blocks side by side keep the multipliers
 * busy. */
__attribute__((target("avx2"), always_inline)) static inline void blocks_avx2(int nb, uint64_t seed, uint64_t c,
									    float *out)
{
	const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
	__m256i c0[4], c1[4], c2[4], c3[4];
	for (int b = 0; b < nb; b++) {
		uint32_t lo[8], hi[8];
		for (int l = 0; l < 8; l++) {
			lo[l] = (uint32_t)(c + (uint64_t)(8 * b + l));
			hi[l] = (uint32_t)((c + (uint64_t)(8 * b + l)) >> 32);
		}
		c0[b] = _mm256_loadu_si256((const __m256i *)lo);
		c1[b] = _mm256_loadu_si256((const __m256i *)hi);
		c2[b] = c3[b] = _mm256_setzero_si256();
	}
	uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
	for (int r = 0; r < 10; r++) {
		__m256i kk0 = _mm256_set1_epi32((int)k0), kk1 = _mm256_set1_epi32((int)k1);
		for (int b = 0; b < nb; b++) {
			__m256i l0, h0, l1, h1;
			mul_wide(c0[b], m0, &l0, &h0);
			mul_wide(c2[b], m1, &l1, &h1);
			c0[b] = _mm256_xor_si256(_mm256_xor_si256(h1, c1[b]), kk0);
			c2[b] = _mm256_xor_si256(_mm256_xor_si256(h0, c3[b]), kk1);
			c1[b] = l1;
			c3[b] = l0;
		}
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f);
	for (int b = 0; b < nb; b++, out += 32) {
		/* words (w, l) -> out[4 l + w]: a 4 x 8 transpose */
		__m256i t0 = _mm256_unpacklo_epi32(c0[b], c1[b]), t1 = _mm256_unpackhi_epi32(c0[b], c1[b]);
		__m256i t2 = _mm256_unpacklo_epi32(c2[b], c3[b]), t3 = _mm256_unpackhi_epi32(c2[b], c3[b]);
		__m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
		__m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
		__m256i o[4] = {_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u2, u3, 0x20),
				_mm256_permute2x128_si256(u0, u1, 0x31), _mm256_permute2x128_si256(u2, u3, 0x31)};
		for (int k = 0; k < 4; k++)
			_mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(o[k], 8)), unit));
	}
}

/* AVX-512: one counter in each 64-bit lane, its four words in the lanes' low halves (the high halves
 * carry what _mm512_mul_epu32 ignores and the xors pass along), eight counters a vector. A round is
 * then two multiplies, two shifts and two three-way xors (vpternlogq), none of mul_wide's
 * interleaving; the words are paired back into 32-bit lanes once, at the end. The same integers as
 * philox4x32, so the same bits. */
__attribute__((target("avx512f"), always_inline)) static inline void blocks_avx512(int nb, uint64_t seed, uint64_t c,
										  float *out)
{
	const __m512i m0 = _mm512_set1_epi64(0xD2511F53), m1 = _mm512_set1_epi64(0xCD9E8D57);
	const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
	__m512i c0[4], c1[4], c2[4], c3[4];
	for (int b = 0; b < nb; b++) {
		c0[b] = _mm512_add_epi64(_mm512_set1_epi64((long long)(c + 8 * (uint64_t)b)), lane);
		c1[b] = _mm512_srli_epi64(c0[b], 32);
		c2[b] = c3[b] = _mm512_setzero_si512();
	}
	uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
	for (int r = 0; r < 10; r++) {
		__m512i kk0 = _mm512_set1_epi64(k0), kk1 = _mm512_set1_epi64(k1);
		for (int b = 0; b < nb; b++) {
			__m512i p0 = _mm512_mul_epu32(c0[b], m0), p1 = _mm512_mul_epu32(c2[b], m1);
			c0[b] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1[b], kk0, 0x96); /* a ^ b ^ c */
			c2[b] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3[b], kk1, 0x96);
			c1[b] = p1;
			c3[b] = p0;
		}
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	const __m512 unit = _mm512_set1_ps(1.0f / 16777216.0f);
	const __m512i lo4 = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), hi4 = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
	for (int b = 0; b < nb; b++, out += 32) {
		/* words 0 and 1 (2 and 3) of counter l in 32-bit lanes 2l and 2l + 1, as floats; then
		 * their pairs interleaved: out[4 l + w] */
		__m512i w01 = _mm512_mask_blend_epi32(0xAAAA, c0[b], _mm512_slli_epi64(c1[b], 32));
		__m512i w23 = _mm512_mask_blend_epi32(0xAAAA, c2[b], _mm512_slli_epi64(c3[b], 32));
		__m512d f01 = _mm512_castps_pd(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w01, 8)), unit));
		__m512d f23 = _mm512_castps_pd(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w23, 8)), unit));
		_mm512_storeu_pd(out, _mm512_permutex2var_pd(f01, lo4, f23));
		_mm512_storeu_pd(out + 16, _mm512_permutex2var_pd(f01, hi4, f23));
	}
}

/* nb: as many blocks side by side as keep the multipliers busy and fit the registers (2 of 16 ymm;
 * 4 of 32 zmm: 16M uniforms in 6.2 ms, 6.5 with 6 or 8, 7.4 with 2; the AVX2 path with 4 blocks of
 * ymm took 9.6) */
#define UNIFORMS_BODY(BLOCKS, nb)                                                                              \
	int64_t b = 0;                                                                                         \
	for (; b + (nb) <= blocks; b += (nb))                                                                  \
		BLOCKS((nb), seed, c + 8 * (uint64_t)b, out + 32 * b);                                         \
	for (; b < blocks; b++)                                                                                \
		BLOCKS(1, seed, c + 8 * (uint64_t)b, out + 32 * b);

__attribute__((target("avx2"))) static void uniforms_avx2(uint64_t seed, uint64_t c, int64_t blocks, float *out)
{
	UNIFORMS_BODY(blocks_avx2, 2)
}

__attribute__((target("avx512f"))) static void uniforms_avx512(uint64_t seed, uint64_t c, int64_t blocks, float *out)
{
	UNIFORMS_BODY(blocks_avx512, 4)
}
#endif

void philox_uniforms(uint64_t seed, uint64_t first, int64_t n, float *out)
{
	int64_t j = 0;
	for (; j < n && (first + (uint64_t)j) % 4; j++)
		out[j] = philox_uniform(seed, first + (uint64_t)j);
#ifdef PHILOX_AVX2
	if (n - j >= 32 && __builtin_cpu_supports("avx2")) {
		int64_t blocks = (n - j) / 32;
		(__builtin_cpu_supports("avx512f") ? uniforms_avx512 : uniforms_avx2)(seed, (first + (uint64_t)j) / 4, blocks, out + j);
		j += 32 * blocks;
	}
#endif
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
