/* transpose.c - the copy that Transpose (layout.c), transpose2 and permuted_copy make: the output
 * walked in the order of its dimensions, merged where the input has them adjacent too; a run
 * contiguous in the input becomes a transpose of planes (16 x 16 register blocks on AVX-512: 32-row
 * bands, or 256 x 256 tiles for planes that large), else rows gathered at a stride. Moves only:
 * every bit, NaNs' too. */
#include "kernel.h"
#include "simd.h"

#include <string.h>

/* A transpose as a walk over the output: R dimensions D, the input's strides S for them and the
 * output's OS; q, when not -1, the one dimension left out of the outer walk (the tiled path's). */
struct tjob {
	int R, q;
	size_t es;
	int64_t D[RT_MAX_DIMS], S[RT_MAX_DIMS], OS[RT_MAX_DIMS], bands;
	const void *in;
	void *out;
};

/* The input and output offsets of outer index k: dimensions 0 .. R-2 but q, in C order. */
static void tjob_seek(const struct tjob *j, int64_t k, int64_t *src, int64_t *dst)
{
	*src = *dst = 0;
	for (int d = j->R - 2; d >= 0; d--) {
		if (d == j->q)
			continue;
		*src += k % j->D[d] * j->S[d];
		*dst += k % j->D[d] * j->OS[d];
		k /= j->D[d];
	}
}

#ifdef SIMD_X86
/* a[i] (i < 8) becomes the vector of every a's element i: pairs interleaved, then 128-bit and
 * 256-bit halves gathered by two-source permutes. */
static inline __attribute__((always_inline)) SIMD_TARGET void turn8(__m512d a[8])
{
	const __m512i lo2 = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0), hi2 = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
	const __m512i lo4 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0), hi4 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
	__m512d t[8], u[8];
	for (int i = 0; i < 8; i += 2) { /* t[i]: elements 0 2 4 6 of rows i, i+1; t[i+1]: 1 3 5 7 */
		t[i] = _mm512_unpacklo_pd(a[i], a[i + 1]);
		t[i + 1] = _mm512_unpackhi_pd(a[i], a[i + 1]);
	}
	for (int g = 0; g < 8; g += 4) { /* u[g + e]: rows g..g+3 at elements (0 4), (2 6), (1 5), (3 7) */
		u[g] = _mm512_permutex2var_pd(t[g], lo2, t[g + 2]);
		u[g + 1] = _mm512_permutex2var_pd(t[g], hi2, t[g + 2]);
		u[g + 2] = _mm512_permutex2var_pd(t[g + 1], lo2, t[g + 3]);
		u[g + 3] = _mm512_permutex2var_pd(t[g + 1], hi2, t[g + 3]);
	}
	static const int at[4][2] = {{0, 4}, {2, 6}, {1, 5}, {3, 7}};
	for (int e = 0; e < 4; e++) {
		a[at[e][0]] = _mm512_permutex2var_pd(u[e], lo4, u[4 + e]);
		a[at[e][1]] = _mm512_permutex2var_pd(u[e], hi4, u[4 + e]);
	}
}

/* out[i oq + c] = in[i + c sb] for i < na, c < nc: L x L blocks turned in registers (16 x 16
 * float32, 8 x 8 64-bit elements: their bits moved, NaNs' too), each read as L runs of L and
 * written as L, masked at the edges (a 128 x 128 float32 transpose: 10.8 us in the 32 x 32 tiles'
 * scalar loop, 2.2 us; 1024 x 256: 88, 43). */
#define TURN(T, VT, S, MT, L, turn, name)                                                                  \
	static SIMD_TARGET void name(const T *in, int64_t sb, T *out, int64_t oq, int64_t na, int64_t nc)  \
	{                                                                                                  \
		for (int64_t i0 = 0; i0 < na; i0 += L) {                                                   \
			int64_t ni = na - i0 < L ? na - i0 : L;                                            \
			MT mi = (MT)simd_lanes(ni);                                                        \
			for (int64_t c0 = 0; c0 < nc; c0 += L) {                                           \
				int64_t m = nc - c0 < L ? nc - c0 : L;                                     \
				MT mc = (MT)simd_lanes(m);                                                 \
				VT v[L];                                                                   \
				for (int64_t k = 0; k < L; k++)                                            \
					v[k] = k < m ? _mm512_maskz_loadu_##S(mi, in + i0 + (c0 + k) * sb) \
						     : _mm512_setzero_##S();                               \
				turn(v);                                                                   \
				for (int64_t i = 0; i < ni; i++)                                           \
					_mm512_mask_storeu_##S(out + (i0 + i) * oq + c0, mc, v[i]);        \
			}                                                                                  \
		}                                                                                          \
	}
TURN(float, __m512, ps, __mmask16, 16, simd_transpose16, turn_avx512)
TURN(double, __m512d, pd, __mmask8, 8, turn8, turn64_avx512)

/* turn_avx512 for callers inside a kernel_for piece of their own (GridSample's channels-last X): one
 * thread, AVX-512 (they check simd_avx512) */
void transpose_f32_avx512(const float *in, int64_t sb, float *out, int64_t oq, int64_t na, int64_t nc)
{
	turn_avx512(in, sb, out, oq, na, nc);
}

/* Planes TURN_TILE or more both ways, of 4- or 8-byte elements: pieces [p0, p1), piece p the
 * TURN_TILE output columns (input rows) p % tiles of plane p / tiles, in square tiles down the
 * output's rows. A tile's input and output rows touch TURN_TILE pages each, which the TLB holds;
 * transpose_bands' 32-row bands across a 4096-wide plane touched 4096 pages a band. */
#define TURN_TILE 256
static void transpose_tiles(void *arg, int64_t p0, int64_t p1)
{
	const struct tjob *j = arg;
	int64_t A = j->D[j->q], B = j->D[j->R - 1], sb = j->S[j->R - 1], oq = j->OS[j->q];
	int64_t tiles = (B + TURN_TILE - 1) / TURN_TILE;
	for (int64_t p = p0; p < p1; p++) {
		int64_t src, dst, c0 = p % tiles * TURN_TILE, nc = B - c0 < TURN_TILE ? B - c0 : TURN_TILE;
		tjob_seek(j, p / tiles, &src, &dst);
		for (int64_t a0 = 0; a0 < A; a0 += TURN_TILE) {
			int64_t na = A - a0 < TURN_TILE ? A - a0 : TURN_TILE, s = src + a0 + c0 * sb, d = dst + a0 * oq + c0;
			if (j->es == 4)
				turn_avx512((const float *)j->in + s, sb, (float *)j->out + d, oq, na, nc);
			else
				turn64_avx512((const double *)j->in + s, sb, (double *)j->out + d, oq, na, nc);
		}
	}
}
#endif

/* Bands [b0, b1): band b is rows 32 (b % bands) .. of plane b / bands. */
static void transpose_bands(void *arg, int64_t b0, int64_t b1)
{
	const struct tjob *j = arg;
	const uint32_t *in32 = j->in;
	uint32_t *out32 = j->out;
	const uint8_t *in8 = j->in;
	uint8_t *out8 = j->out;
	size_t es = j->es;
	int64_t A = j->D[j->q], B = j->D[j->R - 1], sb = j->S[j->R - 1], oq = j->OS[j->q];
	for (int64_t b = b0; b < b1; b++) {
		int64_t src, dst, a0 = b % j->bands * 32, a1 = a0 + 32 < A ? a0 + 32 : A;
		tjob_seek(j, b / j->bands, &src, &dst);
#ifdef SIMD_X86
		if (es == 4 && simd_avx512()) { /* moves and shuffles: the bits of any float, NaNs' too */
			turn_avx512((const float *)j->in + src + a0, sb, (float *)j->out + dst + a0 * oq, oq, a1 - a0, B);
			continue;
		}
#endif
		for (int64_t b0_ = 0; b0_ < B; b0_ += 32) {
			int64_t e = b0_ + 32 < B ? b0_ + 32 : B;
			if (es == 4) {
				/* the tile's input rows copied whole first: rows a power of two apart share a
				 * few cache sets, and read a column at a time they would evict each other */
				uint32_t t[32][32];
				for (int64_t c = b0_; c < e; c++)
					memcpy(t[c - b0_], in32 + src + a0 + c * sb, (size_t)(a1 - a0) * 4);
				for (int64_t i = a0; i < a1; i++)
					for (int64_t c = b0_; c < e; c++)
						out32[dst + i * oq + c] = t[c - b0_][i - a0];
				continue;
			}
			for (int64_t i = a0; i < a1; i++)
				if (es % 4 == 0) /* runs of words: a call per run would cost more */
					for (int64_t c = b0_; c < e; c++) {
						uint32_t *d = (uint32_t *)(out8 + (size_t)(dst + i * oq + c) * es);
						const uint32_t *s = (const uint32_t *)(in8 + (size_t)(src + i + c * sb) * es);
						for (size_t k = 0; k < es / 4; k++)
							d[k] = s[k];
					}
				else
					for (int64_t c = b0_; c < e; c++)
						memcpy(out8 + (size_t)(dst + i * oq + c) * es, in8 + (size_t)(src + i + c * sb) * es, es);
		}
	}
}

/* Output rows [r0, r1) (the innermost dimension, read at input stride S[R-1]). */
static void transpose_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct tjob *j = arg;
	size_t es = j->es;
	int64_t row = j->D[j->R - 1], ps = j->S[j->R - 1];
	for (int64_t r = r0; r < r1; r++) {
		int64_t src, dst;
		tjob_seek(j, r, &src, &dst);
		uint8_t *o = (uint8_t *)j->out + dst * es;
		const uint8_t *p = (const uint8_t *)j->in + src * es;
		if (ps == 1) {
			memcpy(o, p, (size_t)row * es);
		} else if (es == 4) {
			for (int64_t c = 0; c < row; c++)
				((uint32_t *)o)[c] = ((const uint32_t *)p)[c * ps];
		} else if (es == 8) {
			for (int64_t c = 0; c < row; c++)
				((uint64_t *)o)[c] = ((const uint64_t *)p)[c * ps];
		} else {
			for (int64_t c = 0; c < row; c++)
				memcpy(o + c * es, p + c * ps * es, es);
		}
	}
}

/* Elements [e0, e1) copied as they are: a piece of kernel_for. */
static void copy_elems(void *arg, int64_t e0, int64_t e1)
{
	const struct tjob *j = arg;
	memcpy((uint8_t *)j->out + (size_t)e0 * j->es, (const uint8_t *)j->in + (size_t)e0 * j->es, (size_t)(e1 - e0) * j->es);
}

/* The copy of a transpose: the output's R dimensions D (merged, none of 1) read at the input's
 * strides S, units elements of es bytes in all. */
static void transpose_walk(int R, int64_t *D, int64_t *S, size_t es, int64_t units, const void *in, void *o)
{
	if (R >= 3 && S[R - 1] == 1 && (size_t)D[R - 1] * es <= 256) {
		/* short runs kept whole (the (M, C, 3, 3) kernel's C <-> M swap): the runs are the
		 * elements of a transpose of one rank less, tiled below instead of walked row by row
		 * with each row a stride away (every other stride is a multiple of the run) */
		es *= (size_t)D[--R];
		units /= D[R];
		for (int i = 0; i < R; i++)
			S[i] /= D[R];
	}
	int64_t grain = (int64_t)((size_t)KERNEL_GRAIN * 4 / es) + 1; /* in elements */
	struct tjob j = {.R = R, .q = -1, .es = es, .in = in, .out = o};
	memcpy(j.D, D, (size_t)R * sizeof *D);
	memcpy(j.S, S, (size_t)R * sizeof *S);
	c_strides(R, D, j.OS);
	if (R == 1 && S[0] == 1) { /* the same order (the exchanged axes of a swapped input put back) */
		kernel_for(units, grain, copy_elems, &j);
		return;
	}
	for (int i = 0; i + 1 < R; i++) /* the output dimension the input's contiguous one went to */
		if (S[i] == 1)
			j.q = i;
	if (S[R - 1] != 1 && j.q >= 0 && (es == 4 || es >= 8)) {
		/* a transpose of the (q, R-1) planes: 32 x 32 tiles, each read and written in short runs;
		 * the pieces are bands of 32 rows of a plane */
#ifdef SIMD_X86
		if ((es == 4 || es == 8) && D[j.q] >= TURN_TILE && D[R - 1] >= TURN_TILE && simd_avx512()) {
			int64_t tiles = (D[R - 1] + TURN_TILE - 1) / TURN_TILE;
			kernel_for(units / (D[j.q] * D[R - 1]) * tiles, 1, transpose_tiles, &j);
			return;
		}
#endif
		j.bands = (D[j.q] + 31) / 32;
		kernel_for(units / (D[j.q] * D[R - 1]) * j.bands, (grain + 32 * D[R - 1] - 1) / (32 * D[R - 1]),
			   transpose_bands, &j);
		return;
	}
	j.q = -1;
	kernel_for(units / D[R - 1], (grain + D[R - 1] - 1) / D[R - 1], transpose_rows, &j);
}

void transpose2(const void *a, int64_t n, int64_t rows, int64_t cols, size_t es, void *b)
{
	if (rows < 2 || cols < 2 || n < 1) { /* rows or columns: the same bytes */
		memcpy(b, a, (size_t)(n * rows * cols) * es);
		return;
	}
	int64_t D[RT_MAX_DIMS] = {n, cols, rows}, S[RT_MAX_DIMS] = {rows * cols, 1, cols};
	if (n == 1)
		transpose_walk(2, D + 1, S + 1, es, rows * cols, a, b);
	else
		transpose_walk(3, D, S, es, n * rows * cols, a, b);
}

void permuted_copy(const void *in, int r, const int64_t *dims, const int64_t *st, size_t es, void *o)
{
	/* the walk: output dimensions that are adjacent in the input in the same order merged (NCHW
	 * -> CNHW moves rows of H W, not of W) */
	int64_t D[RT_MAX_DIMS], S[RT_MAX_DIMS], units = 1;
	for (int i = 0; i < r; i++)
		units *= dims[i];
	int R = merge_axes(r, dims, st, D, S);
	if (!units)
		return;
	if (!R) { /* one element */
		memcpy(o, in, es);
		return;
	}
	transpose_walk(R, D, S, es, units, in, o);
}
