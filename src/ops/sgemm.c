/* sgemm.c - see sgemm.h.
 *
 * The loops are the packed GEMM of Goto and van de Geijn ("Anatomy of high-performance matrix
 * multiplication", TOMS 2008), with the roles of the caches chosen for a tile that is wide in n:
 *   for each block of NC columns of C (jc)
 *     for each block of KC of k (pc): pack op(B)'s KC x NC block into panels of 64 columns,
 *         k-major, zeros past the block's last column to a whole vector (the block stays in L2)
 *       for each 6 rows of C (ic): pack op(A)'s 6 x KC micro-panel, k-major (it stays in L1)
 *         for each panel of 64 columns (jr): the tile, 6 x 64 of C in 24 accumulators of 16 lanes:
 *             per k one broadcast from each of the 6 rows, four vectors of B, 24 FMAs.
 * Each block of k sums from zero and adds alpha times its sums to C (the first to beta C, or to
 * nothing when beta is 0, C unread), as OpenBLAS's kernels do: an element's rounding error grows
 * with KC plus the blocks, not with k (one chain over a Conv weight gradient's 16384 pixels put
 * replicas' gradients 1.2e-6 from one batch's). The blocks start at fixed k, so the tiles' edges
 * never change a sum, and neither does which rows or columns a call is given.
 * Edges are tiles of fewer rows (the tile is compiled for each of 1 to 6) and of fewer vectors,
 * the last one masked on C.
 *
 * On this project's Zen 5 machine the FMA units run 512-bit vectors at twice the rate of 256-bit
 * ones (264 against 131 GFLOP/s a core), while OpenBLAS 0.3.21 runs its Haswell kernels there
 * (it predates the CPU; OPENBLAS_CORETYPE says so): 94-104 GFLOP/s on the products of a training
 * step. bench_gemm measures this kernel against one OpenBLAS call on the same shapes. */
#include "sgemm.h"
#include "simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef SIMD_X86

#define MR SGEMM_MR
#define NR 64  /* columns of C a tile: four vectors */
#define KC SGEMM_KC /* A's micro-panel, 6 KiB, in L1 */
#define NC 512 /* columns a block: B's block, KC x NC floats (512 KiB), in L2 */
#define TARGET SIMD_TARGET

enum from { FROM_ZERO, FROM_C, FROM_BETA_C }; /* what a block's sums are added to */

/* The tile: C's mr rows by nv vectors (the last masked by last) get alpha times the sums of A's
 * micro-panel ap (kc x mr) times B's panel bp (kc x nv 16), added to 0, C or beta C. mr and nv
 * are constants where it is inlined, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) TARGET void tile(const int mr, const int nv, int64_t kc, const float *ap,
							   const float *bp, float *c, int64_t ldc, __mmask16 last,
							   enum from from, float alpha, float beta)
{
	__m512 acc[MR][4];
#pragma GCC unroll 6
	for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++)
			acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
	for (int64_t k = 0; k < kc; k++, ap += mr, bp += nv * 16) {
		__m512 w[4];
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++)
			w[v] = _mm512_load_ps(bp + 16 * v);
#pragma GCC unroll 6
		for (int r = 0; r < mr; r++) {
			__m512 s = _mm512_set1_ps(ap[r]);
#pragma GCC unroll 4
			for (int v = 0; v < nv; v++)
				acc[r][v] = _mm512_fmadd_ps(s, w[v], acc[r][v]);
		}
	}
	__m512 al = _mm512_set1_ps(alpha), be = _mm512_set1_ps(beta);
#pragma GCC unroll 6
	for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++) {
			__mmask16 mk = v == nv - 1 ? last : 0xffff;
			float *at = c + r * ldc + 16 * v;
			__m512 y;
			if (from == FROM_ZERO)
				y = _mm512_mul_ps(al, acc[r][v]);
			else if (from == FROM_C)
				y = _mm512_fmadd_ps(al, acc[r][v], _mm512_maskz_loadu_ps(mk, at));
			else
				y = _mm512_fmadd_ps(al, acc[r][v], _mm512_mul_ps(be, _mm512_maskz_loadu_ps(mk, at)));
			_mm512_mask_storeu_ps(at, mk, y);
		}
}

#define TILE(R, V)                                                                                                     \
	case (R) * 8 + (V):                                                                                            \
		tile(R, V, kc, ap, bp, c, ldc, last, from, alpha, beta);                                                      \
		break;
#define TILES(R) TILE(R, 1) TILE(R, 2) TILE(R, 3) TILE(R, 4)

static TARGET void any_tile(int mr, int nv, int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc,
			    __mmask16 last, enum from from, float alpha, float beta)
{
	switch (mr * 8 + nv) {
		TILES(1) TILES(2) TILES(3) TILES(4) TILES(5) TILES(6)
	}
}

static inline __mmask16 lanes(int64_t n)
{
	return n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
}

/* op(B)'s block, rows [p0, p0 + kc) and columns [j0, j0 + nc), into panels of NR columns at
 * bp + panel kc NR, each kc x (its width rounded up to a vector), zeros past the block. B^T's are
 * turned 16 x 16 in registers. */
static TARGET void pack_b(int tb, const float *b, int64_t ldb, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
			  float *bp)
{
	for (int64_t jp = 0; jp < nc; jp += NR) {
		int64_t w = nc - jp < NR ? nc - jp : NR, nv = (w + 15) / 16;
		float *dst = bp + jp * kc;
		if (!tb) {
			for (int64_t k = 0; k < kc; k++) {
				const float *src = b + (p0 + k) * ldb + j0 + jp;
				for (int64_t v = 0; v < nv; v++)
					_mm512_store_ps(dst + (k * nv + v) * 16,
							_mm512_maskz_loadu_ps(lanes(w - 16 * v), src + 16 * v));
			}
			continue;
		}
		for (int64_t v = 0; v < nv; v++)
			for (int64_t k0 = 0; k0 < kc; k0 += 16) {
				__m512 t[16];
				__mmask16 km = lanes(kc - k0);
				for (int64_t j = 0; j < 16; j++)
					t[j] = 16 * v + j < w ? _mm512_maskz_loadu_ps(km, b + (j0 + jp + 16 * v + j) * ldb + p0 + k0)
							      : _mm512_setzero_ps();
				simd_transpose16(t);
				for (int64_t k = 0; k < 16 && k0 + k < kc; k++)
					_mm512_store_ps(dst + ((k0 + k) * nv + v) * 16, t[k]);
			}
	}
}

/* op(A)'s rows [i0, i0 + mr) by k [p0, p0 + kc) into ap as kc x mr. */
static void pack_a(int ta, const float *a, int64_t lda, int64_t i0, int mr, int64_t p0, int64_t kc, float *ap)
{
	if (ta) {
		for (int64_t k = 0; k < kc; k++)
			for (int r = 0; r < mr; r++)
				ap[k * mr + r] = a[(p0 + k) * lda + i0 + r];
		return;
	}
	for (int r = 0; r < mr; r++) {
		const float *src = a + (i0 + r) * lda + p0;
		for (int64_t k = 0; k < kc; k++)
			ap[k * mr + r] = src[k];
	}
}

static TARGET void run(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
		       const float *b, int64_t ldb, float beta, float *c, int64_t ldc, float *bp, float *ap)
{
	for (int64_t jc = 0; jc < n; jc += NC) {
		int64_t nc = n - jc < NC ? n - jc : NC;
		for (int64_t pc = 0; pc < k; pc += KC) {
			int64_t kc = k - pc < KC ? k - pc : KC;
			enum from from = pc ? FROM_C : beta == 0 ? FROM_ZERO : beta == 1 ? FROM_C : FROM_BETA_C;
			pack_b(tb, b, ldb, pc, kc, jc, nc, bp);
			for (int64_t ic = 0; ic < m; ic += MR) {
				int mr = m - ic < MR ? (int)(m - ic) : MR;
				pack_a(ta, a, lda, ic, mr, pc, kc, ap);
				for (int64_t jp = 0; jp < nc; jp += NR) {
					int64_t w = nc - jp < NR ? nc - jp : NR;
					int nv = (int)((w + 15) / 16);
					any_tile(mr, nv, kc, ap, bp + jp * kc, c + ic * ldc + jc + jp, ldc,
						 lanes(w - 16 * (nv - 1)), from, alpha, beta);
				}
			}
		}
	}
}

int sgemm_usable(void)
{
	return simd_avx512();
}

void sgemm_run(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
	       const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
	if (m <= 0 || n <= 0)
		return;
	if (k <= 0 || alpha == 0) { /* C = beta C */
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++)
				c[i * ldc + j] = beta == 0 ? 0 : c[i * ldc + j] * beta;
		return;
	}
	int64_t kc = k < KC ? k : KC, nc = n < NC ? (n + 15) / 16 * 16 : NC;
	float *bp = aligned_alloc(64, (size_t)(kc * nc + MR * kc + 16) * sizeof(float));
	if (!bp) { /* a few hundred KiB: the same sums, one element at a time */
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++) {
				float y = c[i * ldc + j];
				for (int64_t p0 = 0; p0 < k; p0 += KC) {
					float s = 0;
					for (int64_t p = p0; p < k && p < p0 + KC; p++)
						s = fmaf(a[ta ? p * lda + i : i * lda + p], b[tb ? j * ldb + p : p * ldb + j], s);
					y = p0 ? fmaf(alpha, s, y) : beta == 0 ? alpha * s : fmaf(alpha, s, beta == 1 ? y : beta * y);
				}
				c[i * ldc + j] = y;
			}
		return;
	}
	run(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bp, bp + kc * nc);
	free(bp);
}

#else

int sgemm_usable(void)
{
	return 0;
}

void sgemm_run(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
	       const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
	(void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta;
	(void)c, (void)ldc;
}

#endif
