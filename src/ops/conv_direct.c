/* conv_direct.c - float32 convolution as an implicit GEMM on AVX-512, without the padding's taps.
 *
 * The input is turned to NHWC, so that in every kernel row the patch of an output pixel is one run
 * of (kw, c) in memory (of c per tap when dilated across). The output pixels go in classes: all
 * the images at one (oy, ox) read the same taps inside the image, so a class runs exactly its
 * valid taps (the zero padding is never read, nor multiplied: a third of the work on a 4 x 4 map
 * with a 3 x 3 kernel, more than half on 2 x 2). A tile is up to 6 images of a class by a block
 * of up to 64 output channels, 24 accumulators of 16 lanes: per K step one broadcast from each
 * image, four weight vectors, 24 FMAs.
 *
 * A work item is a block of channels, a tile's images and up to 64 pixels. Its thread packs the
 * block's weights, (kh, kw, c, 64), into a buffer of its own (once for the items of one block that
 * it runs in a row), where the tiles find them in cache; the item's results gather in a small
 * buffer, written out as runs of pixels in NCHW (or in (m, n, oh, ow) for a caller that takes the
 * output swapped). No pass over the whole weight or output is made besides.
 *
 * The same pass covers a weight's gradient, the Conv of X^T with dY^T (a kernel as large as the
 * image, a 3 x 3 output: the classes are the taps, the images the input channels), and a
 * stride-1 ConvTranspose, a Conv with the kernel flipped and its two channel axes exchanged.
 *
 * Every output is one sum over its valid taps in (i, j, c) order, whichever tile or thread takes
 * it: the bits are the same for any --threads. */
#include "conv.h"
#include "kernel.h"
#include "../util/pool.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define MR 6     /* images a tile */
#define NB 64    /* output channels a block: four vectors */
#define PIX 64   /* pixels an item */
#define TARGET __attribute__((target("avx512f")))

struct direct {
	const struct conv_geom *g;
	const float *a;  /* (n, h, w, c) */
	const float *w;  /* as given: (m, c, kh, kw), or flipped (c, m, kh, kw) */
	int flip;
	float *packs;    /* each thread's block of weights, K NB floats */
	float *outs;     /* each thread's results, MR PIX NB floats */
	int64_t packed[POOL_MAX]; /* the block in each thread's packs; -1 none */
	float *y;
	int64_t sn, sm;  /* y's strides of an image and a channel (a pixel's: 1) */
	int64_t K, nblk, ntile, nchunk;
};

/* The taps of class (oy, ox) that land in the image: rows [i0, i1), columns [j0, j1). */
struct taps {
	int64_t i0, i1, j0, j1;
};

static int64_t first_inside(int64_t at, int64_t step) /* the first k >= 0 with at + k step >= 0 */
{
	return at >= 0 ? 0 : (-at + step - 1) / step;
}

static int64_t past_inside(int64_t at, int64_t step, int64_t size, int64_t k) /* k's first past */
{
	int64_t e = size - at <= 0 ? 0 : (size - at + step - 1) / step;
	return e < k ? e : k;
}

/* One tile: images off[0..mr) (their pixel's element in a, less the tap's), channels of a block
 * nc vectors wide (the last masked), into o, the images NB PIX floats apart. mr and nc are
 * constants where it is inlined, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) TARGET void tile(const int mr, const int nc, const struct direct *d,
							   const struct taps *t, const int64_t *off, const float *wb,
							   float *o)
{
	const struct conv_geom *g = d->g;
	__m512 acc[MR][4];
#pragma GCC unroll 8
	for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
		for (int v = 0; v < nc; v++)
			acc[i][v] = _mm512_setzero_ps();
	int64_t run = g->dw == 1 ? t->j1 - t->j0 : 1; /* taps a run of memory */
	for (int64_t i = t->i0; i < t->i1; i++)
		for (int64_t j = t->j0; j < t->j1; j += run) {
			const float *w = wb + (i * g->kw + j) * g->c * nc * 16, *ap[MR];
			int64_t at = (i * g->dh * g->w + j * g->dw) * g->c, len = run * g->c;
#pragma GCC unroll 8
			for (int r = 0; r < mr; r++)
				ap[r] = d->a + (off[r] + at);
			for (int64_t k = 0; k < len; k++, w += nc * 16) {
				__m512 wv[4];
#pragma GCC unroll 4
				for (int v = 0; v < nc; v++)
					wv[v] = _mm512_loadu_ps(w + 16 * v);
#pragma GCC unroll 8
				for (int r = 0; r < mr; r++) {
					__m512 b = _mm512_set1_ps(ap[r][k]);
#pragma GCC unroll 4
					for (int v = 0; v < nc; v++)
						acc[r][v] = _mm512_fmadd_ps(b, wv[v], acc[r][v]);
				}
			}
		}
#pragma GCC unroll 8
	for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
		for (int v = 0; v < nc; v++)
			_mm512_storeu_ps(o + r * PIX * NB + 16 * v, acc[r][v]);
}

#define TILE(R, V)                                                                                                     \
	case (R) * 8 + (V):                                                                                            \
		tile(R, V, d, t, off, wb, o);                                                                          \
		break;
#define TILES(R) TILE(R, 1) TILE(R, 2) TILE(R, 3) TILE(R, 4)

static TARGET void any_tile(int mr, int nc, const struct direct *d, const struct taps *t, const int64_t *off,
			    const float *wb, float *o)
{
	switch (mr * 8 + nc) {
		TILES(1) TILES(2) TILES(3) TILES(4) TILES(5) TILES(6)
	}
}

/* Block blk's weights into p, (tap, c, lane) with the width rounded up to whole vectors and zeros
 * past it: piece by piece, each source row's run of taps read in order into a small tile that goes
 * out as (tap, c) runs. (Read straight across the 64 rows, a kernel's rows a power of two apart
 * would keep evicting each other from the cache.) */
#define PACK_TILE 64 /* (tap, channel) pairs a piece */

static void pack_block(const struct direct *d, int64_t blk, float *p)
{
	const struct conv_geom *g = d->g;
	int64_t kk = g->kh * g->kw, pt = kk < 16 ? kk : 16, pc = PACK_TILE / pt;
	int64_t mb = blk * NB, width = g->m - mb < NB ? g->m - mb : NB, lanes = (width + 15) / 16 * 16;
	float tile[PACK_TILE][NB];
	for (int64_t c0 = 0; c0 < g->c; c0 += pc)
		for (int64_t t0 = 0; t0 < kk; t0 += pt) {
			int64_t t1 = t0 + pt < kk ? t0 + pt : kk, c1 = c0 + pc < g->c ? c0 + pc : g->c;
			if (d->flip) /* (c, m, kh, kw): rows of taps, the block's channels neighbours */
				for (int64_t c = c0; c < c1; c++)
					for (int64_t l = 0; l < width; l++) {
						const float *r = d->w + (c * g->m + mb + l) * kk + kk - 1;
						for (int64_t t = t0; t < t1; t++)
							tile[(t - t0) * pc + c - c0][l] = r[-t];
					}
			else
				for (int64_t l = 0; l < width; l++)
					for (int64_t c = c0; c < c1; c++) {
						const float *r = d->w + ((mb + l) * g->c + c) * kk;
						for (int64_t t = t0; t < t1; t++)
							tile[(t - t0) * pc + c - c0][l] = r[t];
					}
			for (int64_t t = t0; t < t1; t++)
				for (int64_t c = c0; c < c1; c++) {
					float *q = p + (t * g->c + c) * lanes;
					memcpy(q, tile[(t - t0) * pc + c - c0], (size_t)width * 4);
					memset(q + width, 0, (size_t)(lanes - width) * 4);
				}
		}
}

/* Work items [w0, w1), item = (block, tile of images, chunk of pixels): a piece of kernel_for. */
static TARGET void direct_items(void *arg, int64_t w0, int64_t w1)
{
	struct direct *d = arg;
	const struct conv_geom *g = d->g;
	uint32_t self = pool_self();
	float *wb = d->packs + (size_t)self * (size_t)(d->K * NB), *o = d->outs + (size_t)self * MR * PIX * NB;
	int64_t np = g->oh * g->ow;
	for (int64_t it = w0; it < w1; it++) {
		int64_t ch = it % d->nchunk, tl = it / d->nchunk % d->ntile, blk = it / d->nchunk / d->ntile;
		if (d->packed[self] != blk) {
			pack_block(d, blk, wb);
			d->packed[self] = blk;
		}
		int64_t mb = blk * NB, width = g->m - mb < NB ? g->m - mb : NB;
		int nc = (int)((width + 15) / 16);
		int64_t b0 = g->n * tl / d->ntile, b1 = g->n * (tl + 1) / d->ntile, off[MR];
		int64_t p0 = ch * PIX, p1 = p0 + PIX < np ? p0 + PIX : np;
		for (int64_t p = p0; p < p1; p++) {
			int64_t oy = p / g->ow, ox = p % g->ow, y0 = oy * g->sh - g->pt, x0 = ox * g->sw - g->pl;
			struct taps t;
			t.i0 = first_inside(y0, g->dh), t.i1 = past_inside(y0, g->dh, g->h, g->kh);
			t.j0 = first_inside(x0, g->dw), t.j1 = past_inside(x0, g->dw, g->w, g->kw);
			t.i0 = t.i0 < t.i1 ? t.i0 : t.i1;
			t.j0 = t.j0 < t.j1 ? t.j0 : t.j1;
			for (int64_t b = b0; b < b1; b++)
				off[b - b0] = ((b * g->h + y0) * g->w + x0) * g->c;
			any_tile((int)(b1 - b0), nc, d, &t, off, wb, o + (p - p0) * NB);
		}
		for (int64_t b = b0; b < b1; b++) /* runs of pixels */
			for (int64_t l = 0; l < width; l++) {
				float *yr = d->y + b * d->sn + (mb + l) * d->sm;
				const float *q = o + (b - b0) * PIX * NB + l;
				for (int64_t p = p0; p < p1; p++)
					yr[p] = q[(p - p0) * NB];
			}
	}
}

static int have_avx512(void)
{
	static int known = -1;
	if (known < 0)
		known = __builtin_cpu_supports("avx512f") != 0;
	return known;
}

int conv_direct(struct exec *x, const float *a, const float *w, int flip, const struct conv_geom *g, float *y,
		int *swapped)
{
	if (!have_avx512() || g->group != 1 || g->n < 1 || g->c < 1 || g->m < 1)
		return 1;
	int64_t hw = g->h * g->w, np = g->oh * g->ow, K = g->kh * g->kw * g->c, th = pool_threads();
	size_t ab = hw > 1 && g->c > 1 ? (size_t)(g->n * g->c * hw) * 4 : 0, wb = (size_t)(th * K * NB) * 4;
	size_t ob = (size_t)(th * MR * PIX * NB) * 4;
	float *an = ab ? exec_scratch_raw(x, ab) : NULL, *wp = exec_scratch_raw(x, wb), *op = wp ? exec_scratch_raw(x, ob) : NULL;
	if (!op || (ab && !an)) {
		exec_scratch_free(x, op, ob);
		exec_scratch_free(x, wp, wb);
		exec_scratch_free(x, an, ab);
		return -1;
	}
	if (an) /* (n, c, hw) -> (n, hw, c); with one channel or one pixel they are the same bytes */
		transpose2(a, g->n, g->c, hw, 4, an);
	struct direct d = {.g = g, .a = an ? an : a, .w = w, .flip = flip, .packs = wp, .outs = op, .y = y,
			   .sn = swapped ? np : g->m * np, .sm = swapped ? g->n * np : np, .K = K,
			   .nblk = (g->m + NB - 1) / NB, .ntile = (g->n + MR - 1) / MR, .nchunk = (np + PIX - 1) / PIX};
	for (int i = 0; i < POOL_MAX; i++)
		d.packed[i] = -1;
	if (np)
		kernel_for(d.nblk * d.ntile * d.nchunk, 1, direct_items, &d);
	if (swapped)
		*swapped = 1;
	exec_scratch_free(x, op, ob);
	exec_scratch_free(x, wp, wb);
	exec_scratch_free(x, an, ab);
	return 0;
}

#else

int conv_direct(struct exec *x, const float *a, const float *w, int flip, const struct conv_geom *g, float *y,
		int *swapped)
{
	(void)x, (void)a, (void)w, (void)flip, (void)g, (void)y, (void)swapped;
	return 1;
}

#endif
