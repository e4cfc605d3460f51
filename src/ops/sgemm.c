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
 * An operand that packing would serve once or twice is read in place: A when C is one panel of
 * columns (a narrow product: n up to 64), B (not B^T) when C has two micro-panels of rows at most.
 * A narrow product's tile may have few accumulators (a Conv weight gradient's 16 x 8 from 17424
 * pixels: 6 rows by a half-empty vector), whose FMA chains would wait on each other, so it runs
 * several blocks of k at once in chains of their own, added to C in block order afterwards.
 *
 * On this project's Zen 5 machine the FMA units run 512-bit vectors at twice the rate of 256-bit
 * ones (264 against 131 GFLOP/s a core), while OpenBLAS 0.3.21 runs its Haswell kernels there
 * (it predates the CPU; OPENBLAS_CORETYPE says so): 94-104 GFLOP/s on the products of a training
 * step. bench_gemm measures this kernel against one OpenBLAS call on the same shapes. */
#include "sgemm.h"
#include "simd.h"
#include "../util/xalloc.h"

#include <math.h>
#include <stdint.h>

#ifdef SIMD_X86

#define MR SGEMM_MR
#define NR 64  /* columns of C a tile: four vectors */
#define KC SGEMM_KC /* A's micro-panel, 6 KiB, in L1 */
#define NC 512 /* columns a block: B's block, KC x NC floats (512 KiB), in L2 */
#define GROUPS 8 /* blocks of k a narrow tile sums side by side, at most */
#define SPAN (GROUPS * KC) /* k a narrow product packs of B at a time: SPAN x 64 floats, as KC x NC */
/* Blocks a narrow tile of R rows by V vectors runs at once: R V chains of FMAs, fewer than 12
 * keep the FMA units waiting on their latency, so as many blocks as make 24 chains (8 at most) */
#define TILE_GROUPS(R, V) ((R) * (V) > 12 ? 1 : 24 / ((R) * (V)) > GROUPS ? GROUPS : 24 / ((R) * (V)))
#define TARGET SIMD_TARGET

enum from { FROM_ZERO, FROM_C, FROM_BETA_C }; /* what a block's sums are added to */

/* The block of k from p on: the first adds to beta C (to nothing when beta is 0), the rest to C. */
static enum from block_from(int64_t p, float beta)
{
	return p ? FROM_C : beta == 0 ? FROM_ZERO : beta == 1 ? FROM_C : FROM_BETA_C;
}

/* The tile: C's mr rows by nv vectors (the last masked by last) get alpha times the sums over kc
 * of A's column times B's row, added to 0, C or beta C. A's element (r, k) is ap[k mr + r] in a
 * packed micro-panel, ap[k ak + r ar] read in place (direct); B's row k is at bp + k bk, whole
 * vectors but the last (packed: zeros past C's edge; in place: B's row ends there). mr, nv and
 * direct are constants where it is inlined, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) TARGET void tile(const int mr, const int nv, const int direct,
							   const int groups, int64_t kc, const float *ap, int64_t ak,
							   int64_t ar, const float *bp, int64_t bk, float *c, int64_t ldc,
							   __mmask16 last, enum from from, float alpha, float beta)
{
	if (!direct)
		ak = mr, ar = 1;
	__m512 acc[GROUPS][MR][4];
#pragma GCC unroll 8
	for (int g = 0; g < groups; g++)
#pragma GCC unroll 6
		for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
			for (int v = 0; v < nv; v++)
				acc[g][r][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
	for (int64_t k = 0; k < kc; k++, ap += ak, bp += bk)
#pragma GCC unroll 8
		for (int g = 0; g < groups; g++) {
			const float *ag = ap + g * KC * ak, *bg = bp + g * KC * bk;
			__m512 w[4];
#pragma GCC unroll 4
			for (int v = 0; v < nv; v++)
				w[v] = v == nv - 1 ? _mm512_maskz_loadu_ps(last, bg + 16 * v) : _mm512_loadu_ps(bg + 16 * v);
#pragma GCC unroll 6
			for (int r = 0; r < mr; r++) {
				__m512 s = _mm512_set1_ps(ag[r * ar]);
#pragma GCC unroll 4
				for (int v = 0; v < nv; v++)
					acc[g][r][v] = _mm512_fmadd_ps(s, w[v], acc[g][r][v]);
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
				y = _mm512_mul_ps(al, acc[0][r][v]);
			else if (from == FROM_C)
				y = _mm512_fmadd_ps(al, acc[0][r][v], _mm512_maskz_loadu_ps(mk, at));
			else
				y = _mm512_fmadd_ps(al, acc[0][r][v], _mm512_mul_ps(be, _mm512_maskz_loadu_ps(mk, at)));
#pragma GCC unroll 8
			for (int g = 1; g < groups; g++)
				y = _mm512_fmadd_ps(al, acc[g][r][v], y);
			_mm512_mask_storeu_ps(at, mk, y);
		}
}

#define TILE(R, V)                                                                                                     \
	case (R) * 8 + (V):                                                                                            \
		if (TILE_GROUPS(R, V) > 1 && groups > 1)                                                               \
			tile(R, V, 1, TILE_GROUPS(R, V), kc, ap, ak, ar, bp, bk, c, ldc, last, from, alpha, beta);    \
		else if (direct)                                                                                       \
			tile(R, V, 1, 1, kc, ap, ak, ar, bp, bk, c, ldc, last, from, alpha, beta);                     \
		else                                                                                                   \
			tile(R, V, 0, 1, kc, ap, ak, ar, bp, bk, c, ldc, last, from, alpha, beta);                     \
		break;
#define TILES(R) TILE(R, 1) TILE(R, 2) TILE(R, 3) TILE(R, 4)

/* A tile of mr x nv and groups blocks of k (1, or TILE_GROUPS(mr, nv), with A read in place). */
static TARGET void any_tile(int mr, int nv, int direct, int groups, int64_t kc, const float *ap, int64_t ak,
			    int64_t ar, const float *bp, int64_t bk, float *c, int64_t ldc, __mmask16 last,
			    enum from from, float alpha, float beta)
{
	switch (mr * 8 + nv) {
		TILES(1) TILES(2) TILES(3) TILES(4) TILES(5) TILES(6)
	}
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
							_mm512_maskz_loadu_ps(simd_lanes(w - 16 * v), src + 16 * v));
			}
			continue;
		}
		for (int64_t v = 0; v < nv; v++)
			for (int64_t k0 = 0; k0 < kc; k0 += 16) {
				__m512 t[16];
				__mmask16 km = simd_lanes(kc - k0);
				for (int64_t j = 0; j < 16; j++)
					t[j] = 16 * v + j < w ? _mm512_maskz_loadu_ps(km, b + (j0 + jp + 16 * v + j) * ldb + p0 + k0)
							      : _mm512_setzero_ps();
				simd_transpose16(t);
				for (int64_t k = 0; k < 16 && k0 + k < kc; k++)
					_mm512_store_ps(dst + ((k0 + k) * nv + v) * 16, t[k]);
			}
	}
}

/* op(A)'s rows [i0, i0 + mr) by k [p0, p0 + kc) into ap as kc x mr: A^T's a masked run of mr
 * a k; A's rows 16 k at a time, turned in registers (one float at a time, this was a tenth of a
 * transformer's step). */
static TARGET void pack_a(int ta, const float *a, int64_t lda, int64_t i0, int mr, int64_t p0, int64_t kc, float *ap)
{
	__mmask16 rows = simd_lanes(mr);
	if (ta) {
		for (int64_t k = 0; k < kc; k++)
			_mm512_mask_storeu_ps(ap + k * mr, rows, _mm512_maskz_loadu_ps(rows, a + (p0 + k) * lda + i0));
		return;
	}
	for (int64_t k0 = 0; k0 < kc; k0 += 16) {
		__m512 t[16];
		__mmask16 km = simd_lanes(kc - k0);
		for (int r = 0; r < 16; r++)
			t[r] = r < mr ? _mm512_maskz_loadu_ps(km, a + (i0 + r) * lda + p0 + k0) : _mm512_setzero_ps();
		simd_transpose16(t);
		for (int64_t k = 0; k < 16 && k0 + k < kc; k++)
			_mm512_mask_storeu_ps(ap + (k0 + k) * mr, rows, t[k]);
	}
}

/* Asks for the lines pack_a will read for rows [i0, i0 + mr), while the tiles of the rows before
 * them run: A comes from beyond L2 (a transformer's step spent a tenth of its time waiting in
 * pack_a). */
static void fetch_a(int ta, const float *a, int64_t lda, int64_t i0, int mr, int64_t p0, int64_t kc)
{
	if (ta)
		for (int64_t k = 0; k < kc; k++) {
			_mm_prefetch((const char *)(a + (p0 + k) * lda + i0), _MM_HINT_T0);
			_mm_prefetch((const char *)(a + (p0 + k) * lda + i0 + mr - 1), _MM_HINT_T0);
		}
	else
		for (int r = 0; r < mr; r++)
			for (int64_t k = 0; k < kc + 15; k += 16)
				_mm_prefetch((const char *)(a + (i0 + r) * lda + p0 + (k < kc ? k : kc - 1)), _MM_HINT_T0);
}

/* Where a packed operand would be read once or twice, it is read in place instead: A when C has
 * one panel of columns (a Conv weight gradient's 16 x 8 from 17424 pixels, whose A is read by one
 * tile a block), B (not B^T) when C has two micro-panels of rows at most (a Conv's per-tap
 * products, 8 x 4224 from 16 channels). unet's step at 1 thread: 5.3 -> 4.3 ms. */
static int direct_a(int64_t n)
{
	return n <= NR;
}

static int direct_b(int tb, int64_t m)
{
	return !tb && m <= 2 * MR;
}

/* A product whose C is one panel of columns (n up to 64), A read in place: spans of B packed (or
 * read in place), and each micro-panel's blocks of k summed TILE_GROUPS at a time. */
static TARGET void narrow(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
			  const float *b, int64_t ldb, float beta, float *c, int64_t ldc, float *bp)
{
	int nv = (int)((n + 15) / 16), db = direct_b(tb, m);
	__mmask16 last = simd_lanes(n - 16 * (nv - 1));
	for (int64_t pc = 0; pc < k; pc += SPAN) {
		int64_t span = k - pc < SPAN ? k - pc : SPAN;
		if (!db)
			pack_b(tb, b, ldb, pc, span, 0, n, bp);
		for (int64_t ic = 0; ic < m; ic += MR) {
			int mr = m - ic < MR ? (int)(m - ic) : MR, groups = TILE_GROUPS(mr, nv);
			for (int64_t q = 0; q < span;) {
				int64_t p = pc + q, kc = span - q < KC ? span - q : KC;
				enum from from = block_from(p, beta);
				int g = groups > 1 && span - q >= groups * KC ? groups : 1;
				any_tile(mr, nv, 1, g, kc, ta ? a + p * lda + ic : a + ic * lda + p, ta ? lda : 1, ta ? 1 : lda,
					 db ? b + p * ldb : bp + q * nv * 16, db ? ldb : nv * 16, c + ic * ldc, ldc, last, from,
					 alpha, beta);
				q += g * kc;
			}
		}
	}
}

static TARGET void run(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
		       const float *b, int64_t ldb, float beta, float *c, int64_t ldc, float *bp, float *ap)
{
	if (direct_a(n)) {
		narrow(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bp);
		return;
	}
	int db = direct_b(tb, m);
	for (int64_t jc = 0; jc < n; jc += NC) {
		int64_t nc = n - jc < NC ? n - jc : NC;
		for (int64_t pc = 0; pc < k; pc += KC) {
			int64_t kc = k - pc < KC ? k - pc : KC;
			enum from from = block_from(pc, beta);
			if (!db)
				pack_b(tb, b, ldb, pc, kc, jc, nc, bp);
			for (int64_t ic = 0; ic < m; ic += MR) {
				int mr = m - ic < MR ? (int)(m - ic) : MR;
				pack_a(ta, a, lda, ic, mr, pc, kc, ap);
				if (ic + MR < m)
					fetch_a(ta, a, lda, ic + MR, m - ic - MR < MR ? (int)(m - ic - MR) : MR, pc, kc);
				for (int64_t jp = 0; jp < nc; jp += NR) {
					int64_t w = nc - jp < NR ? nc - jp : NR;
					int nv = (int)((w + 15) / 16);
					any_tile(mr, nv, 0, 1, kc, ap, 0, 0, db ? b + pc * ldb + jc + jp : bp + jp * kc,
						 db ? ldb : nv * 16, c + ic * ldc + jc + jp, ldc, simd_lanes(w - 16 * (nv - 1)), from,
						 alpha, beta);
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
	/* B's packed block: KC x NC, or a narrow product's span (SPAN x 64 at most: as much) */
	int64_t kc = k < KC ? k : KC, nc = direct_b(tb, m) ? 0 : n < NC ? (n + 15) / 16 * 16 : NC;
	if (direct_a(n))
		kc = k < SPAN ? k : SPAN;
	char *raw = xmalloc((size_t)(kc * nc + MR * kc + 16) * sizeof(float) + 63);
	float *bp = (float *)(((uintptr_t)raw + 63) & ~(uintptr_t)63); /* the tiles load whole lines of it */
	if (!raw) { /* a few hundred KiB: the same sums, one element at a time */
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
	xfree(raw);
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
