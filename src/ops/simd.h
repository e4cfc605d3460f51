/* simd.h - AVX-512 pieces the float32 kernels share, for x86-64 with GCC or Clang (SIMD_X86).
 *
 * A kernel that uses them is compiled for the baseline, its AVX-512 functions marked SIMD_TARGET,
 * and calls them only where simd_avx512() says the processor has the instructions. */
#ifndef GD_SIMD_H
#define GD_SIMD_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SIMD_X86 1
#include <immintrin.h>
#include <stdint.h>

#define SIMD_TARGET __attribute__((target("avx512f")))

static inline int simd_avx512(void)
{
	static int known = -1;
	if (known < 0)
		known = __builtin_cpu_supports("avx512f") != 0;
	return known;
}

/* The first n lanes of 16 (n from 1; all of them from 16 on). */
static inline __mmask16 simd_lanes(int64_t n)
{
	return n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
}

/* a[i] (i < 16) becomes the vector of every a's element i: 32-bit, then 64-bit interleaves
 * within 128-bit lanes, then two rounds of lane shuffles. */
static inline __attribute__((always_inline)) SIMD_TARGET void simd_transpose16(__m512 a[16])
{
	__m512 t[16], u[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
	}
	for (int g = 0; g < 16; g += 4) { /* u[g + q], lane k: rows g..g+3 at element 4k + q */
		__m512d t0 = _mm512_castps_pd(t[g]), t1 = _mm512_castps_pd(t[g + 1]);
		__m512d t2 = _mm512_castps_pd(t[g + 2]), t3 = _mm512_castps_pd(t[g + 3]);
		u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
		u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
		u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
		u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
	}
	for (int q = 0; q < 4; q++) {
		__m512 x0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x44), x1 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xee);
		__m512 y0 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x44), y1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xee);
		a[q] = _mm512_shuffle_f32x4(x0, y0, 0x88);
		a[4 + q] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
		a[8 + q] = _mm512_shuffle_f32x4(x1, y1, 0x88);
		a[12 + q] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
	}
}

#endif
#endif
