/* conv_direct.c - float32 convolution as an implicit GEMM on AVX-512, without the padding's taps.
 *
 * The input is turned to NHWC, so that in every kernel row the patch of an output pixel is one run
 * of (kw, c) in memory (of c per tap when dilated across). The outputs go in classes: the pixels
 * whose windows meet the image in the same taps (the interior, each edge, each corner), in every
 * image, so a class runs exactly its valid taps: the zero padding is never read, nor multiplied (a
 * third of the work on a 4 x 4 map with a 3 x 3 kernel, more than half on 2 x 2). A tile is up to
 * 6 outputs (image, pixel) of a class by a block of up to 64 output channels, 24 accumulators of
 * 16 lanes: per K step one broadcast from each output's window, four weight vectors, 24 FMAs.
 *
 * A work item is a block of channels and up to 384 outputs of a class; the threads take them one
 * at a time, as each finishes its last (they differ in size: an edge's, a corner's). Its thread
 * packs the block's weights, (kh, kw, c, 64), into a buffer of its own (once for the items of one
 * block that it runs in a row), where the tiles find them in cache. With no more blocks than
 * threads, each thread would pack every block: then the threads pack them together, a piece of
 * input channels each, into one buffer before the items run (a weight gradient's one block, 2 MiB
 * for a first layer's, was packed by each thread, as long as its tiles took). The item's results
 * gather in a small buffer, written out as runs of pixels in NCHW (or in (m, n, oh, ow) for a
 * caller that takes the output swapped). No pass over the whole output is made besides.
 *
 * The same pass covers a weight's gradient, the Conv of X^T with dY^T (a kernel as large as the
 * image, a 3 x 3 output: the classes are the taps, the images the input channels), and a
 * stride-1 ConvTranspose, a Conv with the kernel flipped and its two channel axes exchanged.
 *
 * Every output is one sum over its valid taps in (i, j, c) order, whichever tile or thread takes
 * it: the bits are the same for any --threads. */
#include "conv.h"
#include "kernel.h"
#include "simd.h"
#include "../util/pool.h"

#include <string.h>

#ifdef SIMD_X86

#define MR 6          /* outputs a tile */
#define NB 64         /* output channels a block: four vectors */
#define CH (MR * 64)  /* outputs an item */
#define DIRECT_PACK (8 << 20) /* bytes of a thread's block of weights, at most */
#define TARGET SIMD_TARGET

/* The taps that land in the image: rows [i0, i1), columns [j0, j1). */
struct taps {
	int64_t i0, i1, j0, j1;
};

/* A class: the pixels [oy0, oy1) x [ox0, ox1), whose windows meet the image in the same taps, in
 * every image: (b, oy, ox) in that order. */
struct klass {
	int64_t oy0, oy1, ox0, ox1;
	struct taps t;
};

/* Item: a block of channels and, on a large map, outputs [q0, q1) of class cls (over all the
 * images); on a small one (64 pixels or fewer), every class's outputs in images [b0, b1), whose
 * pixels then go out in runs of whole images. */
struct item {
	int64_t blk, cls, q0, q1, b0, b1;
};

struct direct {
	const struct conv_geom *g;
	const float *a;  /* (n, h, w, c) */
	const float *w;  /* as given: (m, c, kh, kw), or (c, m, kh, kw) flipped or swapped */
	int flip, wswap;
	const struct klass *cls;
	int64_t ncls;
	const struct item *items;
	float *packs;    /* each thread's block of weights, K NB floats; shared: every block's */
	int shared;      /* packs holds every block, packed before the items */
	int64_t pc;      /* shared: input channels a piece of the packing */
	float *outs;     /* each thread's results, CH NB floats */
	int64_t packed[POOL_MAX]; /* the block in each thread's packs; -1 none */
	float *y;
	int64_t sn, sm;  /* y's strides of an image and a channel (a pixel's: 1) */
	int64_t K;
};

/* One tile: images off[0..mr) (their pixel's element in a, less the tap's), channels of a block
 * nc vectors wide (lanes past m meet zero weights), into o at so[]. mr and nc are
 * constants where it is inlined, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) TARGET void tile(const int mr, const int nc, const struct direct *d,
							   const struct taps *t, const int64_t *off, const float *wb,
							   float *o, const int64_t *so)
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
			_mm512_storeu_ps(o + so[r] + 16 * v, acc[r][v]);
}

#define TILE(R, V)                                                                                                     \
	case (R) * 8 + (V):                                                                                            \
		tile(R, V, d, t, off, wb, o, so);                                                                      \
		break;
#define TILES(R) TILE(R, 1) TILE(R, 2) TILE(R, 3) TILE(R, 4)

static TARGET void any_tile(int mr, int nc, const struct direct *d, const struct taps *t, const int64_t *off,
			    const float *wb, float *o, const int64_t *so)
{
	switch (mr * 8 + nc) {
		TILES(1) TILES(2) TILES(3) TILES(4) TILES(5) TILES(6)
	}
}

/* Block blk's weights, input channels [clo, chi), into p as (tap, c, lane), the width rounded up
 * to whole vectors with zeros past it: 16 channels' runs of 16 taps read (each source row in
 * order, 16 rows at a time), turned in registers and written as 16 whole vectors. (The packing
 * was once scalar, through a tile in the stack: as long as the tiles' work in a weight gradient,
 * whose kernel is an image.) */
static TARGET void pack_block(const struct direct *d, int64_t blk, float *p, int64_t clo, int64_t chi)
{
	const struct conv_geom *g = d->g;
	int64_t kk = g->kh * g->kw, mb = blk * NB, width = g->m - mb < NB ? g->m - mb : NB, lanes = (width + 15) / 16 * 16;
	const __m512i down = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	for (int64_t l0 = 0; l0 < width; l0 += 16)
		for (int64_t c = clo; c < chi; c++)
			for (int64_t t0 = 0; t0 < kk; t0 += 16) {
				int64_t n = kk - t0 < 16 ? kk - t0 : 16;
				__mmask16 mask = simd_lanes(n);
				__m512 v[16];
				for (int i = 0; i < 16; i++) {
					int64_t l = mb + l0 + i;
					if (l0 + i >= width)
						v[i] = _mm512_setzero_ps();
					else if (d->flip) { /* (c, m, kh, kw) with the taps reversed: r[-t] */
						const float *r = d->w + (c * g->m + l) * kk + kk - t0 - n;
						v[i] = _mm512_permutexvar_ps(_mm512_add_epi32(down, _mm512_set1_epi32((int)n - 16)),
									    _mm512_maskz_loadu_ps(mask, r));
					} else
						v[i] = _mm512_maskz_loadu_ps(mask, d->w + (d->wswap ? c * g->m + l : l * g->c + c) * kk + t0);
				}
				simd_transpose16(v);
				for (int64_t t = 0; t < n; t++)
					_mm512_storeu_ps(p + ((t0 + t) * g->c + c) * lanes + l0, v[t]);
			}
}

/* Slots [s0, s0 + ns) (ns <= 16) of o, channels [mb, mb + width), out to y: 16 channels at a time
 * turned in registers into each channel's 16 slots, each run of neighbouring pixels among them
 * (one, or two where a class's row ends) one masked store. (One float at a time, the results'
 * way out took as long as a third of a first layer's tiles.) */
static TARGET void write_slots(const struct direct *d, const float *o, const int64_t *at, int64_t s0, int64_t ns,
			       int64_t mb, int64_t width)
{
	for (int64_t l0 = 0; l0 < width; l0 += 16) {
		__m512 v[16];
		for (int i = 0; i < 16; i++)
			v[i] = i < ns ? _mm512_loadu_ps(o + (s0 + i) * NB + l0) : _mm512_setzero_ps();
		simd_transpose16(v);
		for (int64_t i0 = 0, i1; i0 < ns; i0 = i1) {
			for (i1 = i0 + 1; i1 < ns && at[s0 + i1] == at[s0 + i0] + (i1 - i0); i1++)
				;
			__mmask16 run = (__mmask16)(((1u << i1) - 1) & ~((1u << i0) - 1));
			float *y = d->y + mb * d->sm + at[s0 + i0] - i0; /* slot s0 + i at lane i */
			for (int64_t j = 0; j < 16 && l0 + j < width; j++)
				_mm512_mask_storeu_ps(y + (l0 + j) * d->sm, run, v[j]);
		}
	}
}

/* Work items [w0, w1). */
static TARGET void direct_items(void *arg, int64_t w0, int64_t w1)
{
	struct direct *d = arg;
	const struct conv_geom *g = d->g;
	uint32_t self = pool_self();
	float *wb = d->packs + (size_t)self * (size_t)(d->K * NB), *o = d->outs + (size_t)self * CH * NB;
	int64_t np = g->oh * g->ow, at[CH]; /* the item's outputs' places in y, less the channel's */
	for (int64_t it = w0; it < w1; it++) {
		const struct item *m = &d->items[it];
		if (d->shared)
			wb = d->packs + m->blk * d->K * NB;
		else if (d->packed[self] != m->blk) {
			pack_block(d, m->blk, wb, 0, d->g->c);
			d->packed[self] = m->blk;
		}
		int64_t mb = m->blk * NB, width = g->m - mb < NB ? g->m - mb : NB, slots = 0;
		int nc = (int)((width + 15) / 16);
		for (int64_t c = m->cls < 0 ? 0 : m->cls; c < (m->cls < 0 ? d->ncls : m->cls + 1); c++) {
			const struct klass *k = &d->cls[c];
			int64_t cols = k->ox1 - k->ox0, plane = (k->oy1 - k->oy0) * cols;
			int64_t q0 = m->cls < 0 ? 0 : m->q0, q1 = m->cls < 0 ? (m->b1 - m->b0) * plane : m->q1;
			/* output q0's image and pixel, then each next one's by counting on (no division) */
			int64_t b = m->b0 + q0 / plane, oy = k->oy0 + q0 % plane / cols, ox = k->ox0 + q0 % cols;
			for (int64_t t0 = q0; t0 < q1; t0 += MR) {
				int64_t t1 = t0 + MR < q1 ? t0 + MR : q1, off[MR], so[MR];
				for (int64_t q = t0; q < t1; q++) {
					/* a slot of its own: by pixel in whole images, else in class order */
					int64_t s = m->cls < 0 ? (b - m->b0) * np + oy * g->ow + ox : q - q0;
					off[q - t0] = ((b * g->h + oy * g->sh - g->pt) * g->w + ox * g->sw - g->pl) * g->c;
					so[q - t0] = s * NB;
					at[s] = b * d->sn + oy * g->ow + ox;
					if (++ox == k->ox1) {
						ox = k->ox0;
						if (++oy == k->oy1)
							oy = k->oy0, b++;
					}
				}
				any_tile((int)(t1 - t0), nc, d, &k->t, off, wb, o, so);
			}
			slots += q1 - q0;
		}
		for (int64_t s0 = 0; s0 < slots; s0 += 16)
			write_slots(d, o, at, s0, slots - s0 < 16 ? slots - s0 : 16, mb, width);
	}
}

/* Shared packing's piece i: block i / pieces, its input channels in piece i % pieces. */
static void pack_piece(void *arg, uint32_t i, uint32_t w)
{
	(void)w;
	const struct direct *d = arg;
	int64_t pieces = (d->g->c + d->pc - 1) / d->pc, blk = i / pieces, c0 = i % pieces * d->pc;
	pack_block(d, blk, d->packs + blk * d->K * NB, c0, c0 + d->pc < d->g->c ? c0 + d->pc : d->g->c);
}

static void direct_item(void *arg, uint32_t i, uint32_t w)
{
	(void)w;
	direct_items(arg, i, (int64_t)i + 1);
}

/* The runs of output rows (or columns) whose windows meet the image in the same taps: run r is
 * [start[r], start[r + 1]) with taps [lo[r], hi[r]). As the output moves on, both bounds only fall,
 * so equal ones are neighbours. Returns the number of runs. */
static int64_t tap_runs(int64_t out, int64_t stride, int64_t pad, int64_t dil, int64_t size, int64_t k,
			int64_t *start, int64_t *lo, int64_t *hi)
{
	int64_t runs = 0;
	for (int64_t o = 0; o < out; o++) {
		int64_t l, h;
		conv_inside(o * stride - pad, dil, size, k, &l, &h);
		if (!runs || l != lo[runs - 1] || h != hi[runs - 1]) {
			start[runs] = o, lo[runs] = l, hi[runs] = h;
			runs++;
		}
	}
	start[runs] = out;
	return runs;
}

int conv_direct(struct exec *x, const float *a, const float *w, int how, const struct conv_geom *g, float *y,
		int *swapped)
{
	/* below 16 output channels a tile's vector is part empty, and a GEMM does as well; a block
	 * of weights over DIRECT_PACK (a large image's weight gradient, whose kernel is the image)
	 * would take each thread that much memory: the GEMM paths bound theirs. A 1 x 1 kernel is a
	 * GEMM as it is, and a first layer's (K = 27 for 3 x 3 x 3) has too short a K for the tiles
	 * to outweigh writing the output, plane by plane, 16 slots at a time: both run 2.5-3.5 times
	 * as fast on sgemm.c's kernel (a downsample's [16,64,16,16] by [128,64,1,1]: 1.1 -> 0.31 ms;
	 * a stem's [16,3,32,32] by [32,3,3,3]: 1.26 -> 0.90 ms in rescnn32's step, 1 thread). */
	int64_t hw = g->h * g->w, np = g->oh * g->ow, K = g->kh * g->kw * g->c, th = pool_threads();
	if (!simd_avx512() || g->group != 1 || g->n < 1 || g->c < 1 || g->m < 16 || g->oh < 1 || g->ow < 1 ||
	    K > DIRECT_PACK / (NB * 4) || g->kh * g->kw == 1 || K < 64)
		return 1;
	int64_t nblk = (g->m + NB - 1) / NB, oh = g->oh, ow = g->ow;
	/* the classes: runs of rows by runs of columns; the items: each class's outputs in CH's */
	size_t rb = (size_t)(3 * (oh + ow + 2)) * sizeof(int64_t), cb = (size_t)(oh * ow) * sizeof(struct klass);
	int64_t *runs = exec_scratch_raw(x, rb);
	struct klass *cls = runs ? exec_scratch_raw(x, cb) : NULL;
	if (!cls) {
		exec_scratch_free(x, runs, rb);
		return -1;
	}
	int64_t *rs = runs, *rl = rs + oh + 1, *rh = rl + oh + 1, *cs = rh + oh + 1, *cl = cs + ow + 1, *chh = cl + ow + 1;
	int64_t nr = tap_runs(oh, g->sh, g->pt, g->dh, g->h, g->kh, rs, rl, rh);
	int64_t ncol = tap_runs(ow, g->sw, g->pl, g->dw, g->w, g->kw, cs, cl, chh), ncls = 0, nitem = 0;
	/* items of up to CH outputs, fewer when that leaves less than four items a thread */
	int64_t per = (g->n * np + 4 * th * nblk - 1) / (4 * th * nblk);
	per = per < MR ? MR : (per + MR - 1) / MR * MR;
	per = per < CH ? per : CH;
	for (int64_t r = 0; r < nr; r++)
		for (int64_t c = 0; c < ncol; c++) {
			struct klass *k = &cls[ncls++];
			k->oy0 = rs[r], k->oy1 = rs[r + 1], k->ox0 = cs[c], k->ox1 = cs[c + 1];
			k->t = (struct taps){rl[r], rh[r], cl[c], chh[c]};
			nitem += (g->n * (k->oy1 - k->oy0) * (k->ox1 - k->ox0) + per - 1) / per;
		}
	/* a small map of many images: whole images an item, as many as fill one (fewer likewise, but
	 * not below a tile's MR, where a one-pixel class, a corner or a weight gradient's tap, would
	 * run part-empty tiles; then by classes, if that leaves threads idle); the images dealt
	 * evenly, as many items to each thread where they stay MR images */
	int64_t imgs = np <= CH / MR && g->n >= 2 * MR ? CH / np : 0;
	while (imgs > MR && nblk * ((g->n + imgs - 1) / imgs) < 4 * th)
		imgs = (imgs + 1) / 2 > MR ? (imgs + 1) / 2 : MR;
	if (imgs && nblk * ((g->n + imgs - 1) / imgs) < 2 * th)
		imgs = 0;
	if (imgs) {
		nitem = (g->n + imgs - 1) / imgs;
		while (nblk * nitem % th && g->n / (nitem + 1) >= MR)
			nitem++;
	}
	size_t ib = (size_t)(nblk * nitem) * sizeof(struct item);
	int aswap = (how & CONV_A_SWAPPED) && g->c > 1 && g->n > 1; /* else the same bytes as (n, c, h, w) */
	size_t ab = (hw > 1 || aswap) && g->c > 1 ? (size_t)(g->n * g->c * hw) * 4 : 0, wb = (size_t)(th * K * NB) * 4;
	size_t ob = (size_t)(th * CH * NB) * 4;
	struct item *items = exec_scratch_raw(x, ib);
	float *an = items && ab ? exec_scratch_raw(x, ab) : NULL, *wp = items ? exec_scratch_raw(x, wb) : NULL;
	float *op = wp ? exec_scratch_raw(x, ob) : NULL;
	int ok = op && (!ab || an);
	if (ok) {
		for (int64_t blk = 0, i = 0; blk < nblk; blk++) /* a block's items together: one pack each */
			if (imgs)
				for (int64_t k = 0; k < nitem; k++)
					items[i++] = (struct item){blk, -1, 0, 0, k * g->n / nitem, (k + 1) * g->n / nitem};
			else
				for (int64_t c = 0; c < ncls; c++) {
					int64_t n = g->n * (cls[c].oy1 - cls[c].oy0) * (cls[c].ox1 - cls[c].ox0);
					for (int64_t q = 0; q < n; q += per)
						items[i++] = (struct item){blk, c, q, q + per < n ? q + per : n, 0, g->n};
				}
		if (an && aswap) /* (c, n hw) -> (n hw, c) */
			transpose2(a, 1, g->c, g->n * hw, 4, an);
		else if (an) /* (n, c, hw) -> (n, hw, c); with one channel or one pixel they are the same bytes */
			transpose2(a, g->n, g->c, hw, 4, an);
		struct direct d = {.g = g, .a = an ? an : a, .w = w, .flip = how & CONV_FLIP,
				   .wswap = (how & CONV_W_SWAPPED) && g->c > 1 && g->m > 1, .cls = cls, .ncls = ncls, .items = items, .packs = wp,
				   .outs = op, .y = y, .sn = swapped ? np : g->m * np, .sm = swapped ? g->n * np : np, .K = K};
		for (int i = 0; i < POOL_MAX; i++)
			d.packed[i] = -1;
		if (th > 1 && nblk <= th) { /* else each thread packs each block it meets */
			d.shared = 1;
			d.pc = (g->c + 4 * th - 1) / (4 * th);
			pool_for((uint32_t)(nblk * ((g->c + d.pc - 1) / d.pc)), pack_piece, &d);
		}
		pool_for((uint32_t)(nblk * nitem), direct_item, &d); /* an item is a piece: they vary in size */
		if (swapped)
			*swapped = 1;
	}
	exec_scratch_free(x, op, ob);
	exec_scratch_free(x, wp, wb);
	exec_scratch_free(x, an, ab);
	exec_scratch_free(x, items, ib);
	exec_scratch_free(x, cls, cb);
	exec_scratch_free(x, runs, rb);
	return ok ? 0 : -1;
}

#else

int conv_direct(struct exec *x, const float *a, const float *w, int how, const struct conv_geom *g, float *y,
		int *swapped)
{
	(void)x, (void)a, (void)w, (void)how, (void)g, (void)y, (void)swapped;
	return 1;
}

#endif
