/* conv_group.c - grouped convolutions with few channels a group (depthwise: one), by direct kernels.
 *
 * A depthwise Conv through im2col is a GEMM of one row (M/group) by K = kh kw per image and group:
 * a few FLOPs for each byte the patch matrix is written and read. Here each output plane is summed
 * straight from its group's input planes, which a work item first copies into a buffer of its
 * thread's, padded with zeros on every side and split into phases by the stride (row R, column C
 * of the padded plane in sub-plane (R % sh, C % sw) at (R / sh, C / sw), the sub-planes pw apart
 * a row). Then every tap is one run of the buffer:
 *
 *   - Conv: output (oy, ox) reads padded (oy sh + i dh, ox sw + j dw), in sub-plane
 *     ((i dh) % sh, (j dw) % sw) at (oy + (i dh) / sh, ox + (j dw) / sw). With the output laid out
 *     pw apart a row too, the plane is one flat sum over q = oy pw + ox of (C/group) kh kw runs
 *     base + off[t] + q weighted by w: a long run whatever the plane's width (a 3 x 3 plane is one
 *     vector, not three), the columns past ow computed and dropped when the rows are copied out. A
 *     stride-2 Conv reads no more than a stride-1 one.
 *   - ConvTranspose (a grouped Conv's input gradient): output (y, x) = (py + sh v, px + sw u) in
 *     output phase (py, px) takes the taps with py + pt - i dh = sh (dy) and px + pl - j dw =
 *     sw (dx) exact, from input (v + dy, u + dx): each phase a flat sum of runs of the padded input
 *     as above; the phases are interleaved into the output rows. Nothing is scattered, so no output
 *     is added to twice.
 *   - A Conv whose kernel is larger than its output (grouped_weight_grad's, conv.c: the batch as
 *     channels, dY's planes the kernel, the taps the output), where a kernel row fills more of a
 *     vector than the output's flat run would: each output (i', j') is a dot of the
 *     kernel's rows with runs of input rows, vectorised along the kernel's columns (input phases by
 *     the dilation, the Conv's step along them); a row of outputs keeps its accumulators in
 *     registers across the group's channels and the kernel's rows.
 *
 * A work item of the flat sums is a group and a block of images (all of a batch where their padded
 * planes fit in 32K elements): the images' planes lie rh pw apart, so one flat sum covers the block,
 * and the per-plane overheads (the weights, the runs, a call) are paid once a block (a 3 x 3 plane
 * alone fills 13 lanes of one vector; eight of them, 13 vectors).
 *
 * Each output element is summed by one thread in a fixed order (runs in (ci, i, j) order, the even
 * and odd ones in two partial sums a lane; dots lane-wise, then the lanes in a fixed tree): the
 * bits are the same for any --threads. float32 runs on AVX-512 (else 1: the GEMM paths), float64
 * in plain C. */
#include "conv.h"
#include "kernel.h"
#include "simd.h"
#include "../util/pool.h"

#include <string.h>

#define MAXT 512     /* runs of a flat sum: (C/group) kh kw */
#define MAXCG 8      /* channels a group, at most, for the flat sums */
#define MAXDOT 8     /* outputs a row, at most, for the dot kernel */

enum group_kind { GK_ROWS, GK_TRANSPOSE, GK_DOTS };

struct gjob {
	const struct conv_geom *g;
	const struct rtensor *a, *w;
	uint8_t *y, *buf;
	size_t bufb;       /* bytes of each thread's buffer: the padded planes, then the flat sums */
	size_t es;
	int64_t phr, phc;  /* the padded planes' phases: rows, columns */
	int64_t rh, pw;    /* a sub-plane's rows and row pitch */
	int64_t padt, padl;/* zeros before row 0 and column 0 of the padded plane */
	int64_t flat;      /* elements of a flat sum's buffer (one output phase's) */
	int64_t nb, nblk;  /* images a work item, and items a group (flat sums) */
	int64_t sub;       /* elements of a phase: nb images' (rh, pw) planes */
	int64_t nph;       /* output phases: 1, or sh sw for a ConvTranspose */
	int64_t *off, *tix;/* runs: buffer offset and weight (ci << 16 | i kw + j), by output phase */
	int nrun[16], run0[16];
};

/* Element offset of plane (i0, i1) of t, whose planes are `plane` elements: t may be a view that
 * exchanges its first two axes (a folded Transpose). */
static int64_t plane_at(const struct rtensor *t, int64_t i0, int64_t i1, int64_t plane)
{
	return t->view ? i0 * t->vst[0] + i1 * t->vst[1] : (i0 * t->dims[1] + i1) * plane;
}

#ifdef SIMD_X86
/* even[v] = s[2 v], odd[v] = s[2 v + 1] for the n elements of s: 32 at a time, two permutes. */
static SIMD_TARGET void deinterleave2(float *even, float *odd, const float *s, int64_t n)
{
	const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
	for (int64_t c = 0; c < n; c += 32) {
		__mmask16 m0 = simd_lanes(n - c), m1 = n - c > 16 ? simd_lanes(n - c - 16) : 0;
		__m512 a = _mm512_maskz_loadu_ps(m0, s + c), b = _mm512_maskz_loadu_ps(m1, s + c + 16);
		int64_t ne = (n - c + 1) / 2, no = (n - c) / 2;
		_mm512_mask_storeu_ps(even + c / 2, simd_lanes(ne), _mm512_permutex2var_ps(a, ie, b));
		if (no > 0)
			_mm512_mask_storeu_ps(odd + c / 2, simd_lanes(no), _mm512_permutex2var_ps(a, io, b));
	}
}
#endif

/* src (h, w) -> dst (phr, phc, rh, pw): sub-plane (pr, pc) at (k, l) holds src[k phr + pr - padt]
 * [l phc + pc - padl], zero outside. A row's phases: its elements l phc + pc - padl for l in
 * [k0[pc], k1[pc]); two of float32 split by permutes (deinterleave2). */
static void pad_plane(const struct gjob *jb, const uint8_t *src, uint8_t *dst)
{
	int64_t h = jb->g->h, w = jb->g->w, ph = jb->phc, pw = jb->pw, k0[16], k1[16];
	size_t es = jb->es;
	for (int64_t p = 0; p < ph; p++) {
		int64_t last = w - 1 - p + jb->padl;
		k0[p] = jb->padl <= p ? 0 : (jb->padl - p + ph - 1) / ph;
		k1[p] = last < 0 ? 0 : last / ph + 1;
		k0[p] = k0[p] < k1[p] ? k0[p] : k1[p];
	}
	for (int64_t r = 0, pr = jb->padt % jb->phr, kr = jb->padt / jb->phr; r < h; r++) {
		const uint8_t *s = src + (size_t)(r * w) * es;
		size_t sub = (size_t)jb->sub * es;
		uint8_t *d = dst + (size_t)(pr * ph) * sub + (size_t)(kr * pw) * es; /* sub-plane (pr, 0)'s row */
		if (ph == 1)
			memcpy(d + (size_t)k0[0] * es, s + (size_t)(k0[0] - jb->padl) * es, (size_t)(k1[0] - k0[0]) * es);
#ifdef SIMD_X86
		else if (es == 4 && ph == 2 && k1[0] > k0[0] && k1[1] > k0[1]) {
			/* phase pc's first element is column c0 = k0 2 + pc - padl: 0 or 1 */
			int64_t c0 = 2 * k0[0] - jb->padl, e = c0 ? 1 : 0;
			deinterleave2((float *)(d + (size_t)k0[e] * 4 + e * sub), (float *)(d + (size_t)k0[1 - e] * 4 + (1 - e) * sub),
				      (const float *)s, w);
		}
#endif
		else
			for (int64_t p = 0; p < ph; p++) {
				const uint8_t *sp = s + (size_t)(k0[p] * ph + p - jb->padl) * es;
				uint8_t *dp = d + (size_t)p * sub;
				for (int64_t k = k0[p]; k < k1[p]; k++)
					if (es == 4)
						((uint32_t *)dp)[k] = ((const uint32_t *)sp)[(k - k0[p]) * ph];
					else
						((uint64_t *)dp)[k] = ((const uint64_t *)sp)[(k - k0[p]) * ph];
			}
		if (++pr == jb->phr)
			pr = 0, kr++;
	}
}

/* dst[q] = sum_t wt[t] base[off[t] + q], q < len, float64: one sum a lane, runs in order. */
static void flat_double(double *dst, int64_t len, const double *base, const int64_t *off, const double *wt, int nt)
{
	for (int64_t q = 0; q < len; q++)
		dst[q] = 0;
	for (int t = 0; t < nt; t++) {
		const double *s = base + off[t];
		for (int64_t q = 0; q < len; q++)
			dst[q] += wt[t] * s[q];
	}
}

#ifdef SIMD_X86
#define TARGET SIMD_TARGET

/* flat_double's sum in float32, nv vectors of 16 at a time: the even runs and the odd ones in two
 * accumulators a lane (the FMAs' latency), added at the end. */
static inline __attribute__((always_inline)) TARGET void flat_nv(const int nv, float *dst, int64_t len, const float *base,
								 const int64_t *off, const float *wt, int nt)
{
	for (int64_t q = 0; q < len; q += 16 * nv) {
		__mmask16 mk[4];
		__m512 a[4], b[4];
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++) {
			mk[v] = len - q - 16 * v > 0 ? simd_lanes(len - q - 16 * v) : 0;
			a[v] = b[v] = _mm512_setzero_ps();
		}
		int t = 0;
		for (; t + 1 < nt; t += 2) {
			const float *s0 = base + off[t] + q, *s1 = base + off[t + 1] + q;
			__m512 w0 = _mm512_set1_ps(wt[t]), w1 = _mm512_set1_ps(wt[t + 1]);
#pragma GCC unroll 4
			for (int v = 0; v < nv; v++) {
				a[v] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mk[v], s0 + 16 * v), a[v]);
				b[v] = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(mk[v], s1 + 16 * v), b[v]);
			}
		}
		if (t < nt) {
			const float *s0 = base + off[t] + q;
			__m512 w0 = _mm512_set1_ps(wt[t]);
#pragma GCC unroll 4
			for (int v = 0; v < nv; v++)
				a[v] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mk[v], s0 + 16 * v), a[v]);
		}
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++)
			_mm512_mask_storeu_ps(dst + q + 16 * v, mk[v], _mm512_add_ps(a[v], b[v]));
	}
}

static TARGET void flat_float(float *dst, int64_t len, const float *base, const int64_t *off, const float *wt, int nt)
{
	switch (len > 48 ? 4 : (len + 15) / 16) {
	case 1:
		flat_nv(1, dst, len, base, off, wt, nt);
		break;
	case 2:
		flat_nv(2, dst, len, base, off, wt, nt);
		break;
	case 3:
		flat_nv(3, dst, len, base, off, wt, nt);
		break;
	default:
		flat_nv(4, dst, len, base, off, wt, nt);
	}
}

/* row[p + sw v] = ph[p][v], the phases nph apart, for the row's n elements; float32 at stride 2
 * by two permutes a 32 outputs. */
static TARGET void interleave_float2(float *row, const float *ph, int64_t nph, int64_t n)
{
	const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
	for (int64_t v = 0; 2 * v < n; v += 16) {
		__mmask16 me = simd_lanes((n + 1) / 2 - v), mo = n / 2 > v ? simd_lanes(n / 2 - v) : 0;
		__m512 e = _mm512_maskz_loadu_ps(me, ph + v), o = _mm512_maskz_loadu_ps(mo, ph + nph + v);
		_mm512_mask_storeu_ps(row + 2 * v, simd_lanes(n - 2 * v), _mm512_permutex2var_ps(e, lo, o));
		if (n - 2 * v > 16)
			_mm512_mask_storeu_ps(row + 2 * v + 16, simd_lanes(n - 2 * v - 16), _mm512_permutex2var_ps(e, hi, o));
	}
}

/* Output row i' of a dot Conv (GK_DOTS), nj outputs: out[j] = sum over the group's channels ci
 * and kernel rows r (those whose input row is inside) of the kernel row k[r] (kw long) dotted with
 * the padded input run for (i', r, j); two accumulators a lane and output, by halves of 32. */
static inline __attribute__((always_inline)) TARGET void dot_row(const int nj, const struct gjob *jb, const float *bufp,
								 const float *const *kp, int64_t i1, float *out)
{
	const struct conv_geom *g = jb->g;
	int64_t cg = g->c / g->group, kw = g->kw, h = g->h, planef = jb->phc * h * jb->pw;
	__m512 a[MAXDOT], b[MAXDOT];
#pragma GCC unroll 8
	for (int j = 0; j < nj; j++)
		a[j] = b[j] = _mm512_setzero_ps();
	for (int64_t ci = 0; ci < cg; ci++)
		for (int64_t r = 0; r < g->kh; r++) {
			int64_t iy = i1 * g->sh + r * g->dh - g->pt;
			if (iy < 0 || iy >= h)
				continue;
			const float *k = kp[ci] + r * kw, *p[MAXDOT];
#pragma GCC unroll 8
			for (int j = 0; j < nj; j++) {
				int64_t c = j * g->sw; /* padded column of the run's first element */
				p[j] = bufp + ci * planef + (c % g->dw * h + iy) * jb->pw + c / g->dw;
			}
			int64_t u = 0;
			for (; u + 32 <= kw; u += 32) {
				__m512 k0 = _mm512_loadu_ps(k + u), k1 = _mm512_loadu_ps(k + u + 16);
#pragma GCC unroll 8
				for (int j = 0; j < nj; j++) {
					a[j] = _mm512_fmadd_ps(k0, _mm512_loadu_ps(p[j] + u), a[j]);
					b[j] = _mm512_fmadd_ps(k1, _mm512_loadu_ps(p[j] + u + 16), b[j]);
				}
			}
			for (; u < kw; u += 16) {
				__mmask16 m = simd_lanes(kw - u);
				__m512 k0 = _mm512_maskz_loadu_ps(m, k + u);
#pragma GCC unroll 8
				for (int j = 0; j < nj; j++)
					a[j] = _mm512_fmadd_ps(k0, _mm512_maskz_loadu_ps(m, p[j] + u), a[j]);
			}
		}
#pragma GCC unroll 8
	for (int j = 0; j < nj; j++)
		out[j] = _mm512_reduce_add_ps(_mm512_add_ps(a[j], b[j]));
}

static TARGET void group_dots_float(const struct gjob *jb, const float *bufp, const float *const *kp, int64_t i1,
				 float *out)
{
	switch (jb->g->ow) {
#define DOT(J)                                                                                                         \
	case J:                                                                                                        \
		dot_row(J, jb, bufp, kp, i1, out);                                                                     \
		break;
		DOT(1) DOT(2) DOT(3) DOT(4) DOT(5) DOT(6) DOT(7) DOT(8)
#undef DOT
	}
}
#else
static void flat_float(float *dst, int64_t len, const float *base, const int64_t *off, const float *wt, int nt)
{
	(void)dst, (void)len, (void)base, (void)off, (void)wt, (void)nt;
}

static void group_dots_float(const struct gjob *jb, const float *bufp, const float *const *kp, int64_t i1, float *out)
{
	(void)jb, (void)bufp, (void)kp, (void)i1, (void)out;
}
#endif

/* row[p + sw v] = ph[p nph + v] for the row's n elements */
static void interleave(uint8_t *row, const uint8_t *ph, int64_t nph, int64_t sw, int64_t n, size_t es)
{
#ifdef SIMD_X86
	if (es == 4 && sw == 2) {
		interleave_float2((float *)row, (const float *)ph, nph, n);
		return;
	}
#endif
	for (int64_t x = 0; x < n; x++)
		if (es == 4)
			((uint32_t *)row)[x] = ((const uint32_t *)ph)[x % sw * nph + x / sw];
		else
			((uint64_t *)row)[x] = ((const uint64_t *)ph)[x % sw * nph + x / sw];
}

/* The item's input planes (images [n, n + nb), the group's channels from c0, cg of them) padded
 * into the thread's buffer, (ci, phase, image, rh, pw); returns it. */
static uint8_t *pad_group(const struct gjob *jb, int64_t n, int64_t nb, int64_t c0, int64_t cg)
{
	const struct conv_geom *g = jb->g;
	uint8_t *buf = jb->buf + pool_self() * jb->bufb;
	int64_t plane = g->h * g->w, padded = jb->phr * jb->phc * jb->sub;
	memset(buf, 0, (size_t)(cg * padded) * jb->es);
	for (int64_t ci = 0; ci < cg; ci++)
		for (int64_t b = 0; b < nb; b++)
			pad_plane(jb, (const uint8_t *)jb->a->data + (size_t)plane_at(jb->a, n + b, c0 + ci, plane) * jb->es,
				  buf + (size_t)(ci * padded + b * jb->rh * jb->pw) * jb->es);
	return buf;
}

/* Output phase o's flat sum (rows pw apart) for output channel m's weights, the runs' ci-th kernel
 * plane being plane_at(w, wr + ci, wc) (Conv: wr = m, wc = 0 with ci in the column; ConvTranspose:
 * wr = the group's first input channel, wc = m's place in its group). */
static void flat_sum(const struct gjob *jb, int o, const uint8_t *buf, int64_t wr, int64_t wc, int transpose,
		     int64_t len, uint8_t *dst)
{
	int64_t kk = jb->g->kh * jb->g->kw, n = jb->nrun[o], *off = jb->off + jb->run0[o], at[MAXCG];
	const int64_t *tix = jb->tix + jb->run0[o];
	for (int64_t ci = 0; ci < jb->g->c / jb->g->group; ci++)
		at[ci] = transpose ? plane_at(jb->w, wr + ci, wc, kk) : plane_at(jb->w, wr, ci, kk);
	if (jb->es == 4) {
		float wt[MAXT];
		for (int64_t t = 0; t < n; t++)
			wt[t] = ((const float *)jb->w->data)[at[tix[t] >> 16] + (tix[t] & 0xffff)];
		flat_float((float *)dst, len, (const float *)buf, off, wt, (int)n);
	} else {
		double wt[MAXT];
		for (int64_t t = 0; t < n; t++)
			wt[t] = ((const double *)jb->w->data)[at[tix[t] >> 16] + (tix[t] & 0xffff)];
		flat_double((double *)dst, len, (const double *)buf, off, wt, (int)n);
	}
}

/* Conv items [i0, i1): (group, block of images), its M/group output channels, each one flat sum
 * over the block's images (rh pw apart) copied out by rows. */
static void group_rows(void *arg, int64_t i0, int64_t i1)
{
	const struct gjob *jb = arg;
	const struct conv_geom *g = jb->g;
	int64_t cg = g->c / g->group, mg = g->m / g->group, np = g->oh * g->ow, img = jb->rh * jb->pw;
	int64_t padded = cg * jb->phr * jb->phc * jb->sub;
	for (int64_t it = i0; it < i1; it++) {
		int64_t gi = it / jb->nblk, n = it % jb->nblk * jb->nb, nb = g->n - n < jb->nb ? g->n - n : jb->nb;
		uint8_t *buf = pad_group(jb, n, nb, gi * cg, cg), *sum = buf + (size_t)padded * jb->es;
		for (int64_t mo = 0; mo < mg; mo++) {
			int64_t m = gi * mg + mo;
			flat_sum(jb, 0, buf, m, 0, 0, (nb - 1) * img + (g->oh - 1) * jb->pw + g->ow, sum);
			for (int64_t b = 0; b < nb; b++) {
				uint8_t *yp = jb->y + (size_t)(((n + b) * g->m + m) * np) * jb->es;
				for (int64_t oy = 0; oy < g->oh; oy++)
					memcpy(yp + (size_t)(oy * g->ow) * jb->es, sum + (size_t)(b * img + oy * jb->pw) * jb->es,
					       (size_t)g->ow * jb->es);
			}
		}
	}
}

/* ConvTranspose items [i0, i1): (group, block of images), its M/group output channels (g in
 * ConvTranspose terms: (h, w) its input, (oh, ow) its output): for each row phase py, the sw column
 * phases' flat sums over the block's images, then each output row of the phase interleaved from
 * them. */
static void group_transpose_rows(void *arg, int64_t i0, int64_t i1)
{
	const struct gjob *jb = arg;
	const struct conv_geom *g = jb->g;
	int64_t cg = g->c / g->group, mg = g->m / g->group, np = g->oh * g->ow, sh = g->sh, sw = g->sw;
	int64_t padded = cg * jb->sub, img = jb->rh * jb->pw;
	for (int64_t it = i0; it < i1; it++) {
		int64_t gi = it / jb->nblk, n = it % jb->nblk * jb->nb, nb = g->n - n < jb->nb ? g->n - n : jb->nb;
		uint8_t *buf = pad_group(jb, n, nb, gi * cg, cg), *sum = buf + (size_t)padded * jb->es;
		for (int64_t mo = 0; mo < mg; mo++)
			for (int64_t py = 0; py < sh && py < g->oh; py++) {
				int64_t rows = (g->oh - py + sh - 1) / sh;
				for (int64_t px = 0; px < sw && px < g->ow; px++)
					flat_sum(jb, (int)(py * sw + px), buf, gi * cg, mo, 1,
						 (nb - 1) * img + (rows - 1) * jb->pw + (g->ow - px + sw - 1) / sw,
						 sum + (size_t)(px * jb->flat) * jb->es);
				for (int64_t b = 0; b < nb; b++)
					for (int64_t v = 0; v < rows; v++) {
						uint8_t *row = jb->y + (size_t)(((n + b) * g->m + gi * mg + mo) * np +
										(py + v * sh) * g->ow) * jb->es;
						const uint8_t *from = sum + (size_t)(b * img + v * jb->pw) * jb->es;
						if (sw == 1)
							memcpy(row, from, (size_t)g->ow * jb->es);
						else
							interleave(row, from, jb->flat, sw, g->ow, jb->es);
					}
			}
	}
}

/* Dot Conv items [i0, i1): (image, output channel). */
static void group_dots(void *arg, int64_t i0, int64_t i1)
{
	const struct gjob *jb = arg;
	const struct conv_geom *g = jb->g;
	int64_t cg = g->c / g->group, mg = g->m / g->group, kk = g->kh * g->kw, np = g->oh * g->ow;
	int64_t planeb = jb->phc * g->h * jb->pw;
	for (int64_t it = i0; it < i1; it++) {
		int64_t n = it / g->m, m = it % g->m;
		const uint8_t *buf = pad_group(jb, n, 1, m / mg * cg, cg);
		uint8_t *yp = jb->y + (size_t)((n * g->m + m) * np) * jb->es;
		const void *kp[MAXT];
		for (int64_t ci = 0; ci < cg; ci++)
			kp[ci] = (const uint8_t *)jb->w->data + (size_t)plane_at(jb->w, m, ci, kk) * jb->es;
		for (int64_t i1 = 0; i1 < g->oh; i1++) {
			if (jb->es == 4) {
				group_dots_float(jb, (const float *)buf, (const float *const *)kp, i1, (float *)yp + i1 * g->ow);
				continue;
			}
			double *out = (double *)yp + i1 * g->ow;
			for (int64_t j = 0; j < g->ow; j++)
				out[j] = 0;
			for (int64_t ci = 0; ci < cg; ci++)
				for (int64_t r = 0; r < g->kh; r++) {
					int64_t iy = i1 * g->sh + r * g->dh - g->pt;
					if (iy < 0 || iy >= g->h)
						continue;
					const double *k = (const double *)kp[ci] + r * g->kw;
					for (int64_t j = 0; j < g->ow; j++) {
						int64_t c = j * g->sw;
						const double *s = (const double *)buf + ci * planeb + (c % g->dw * g->h + iy) * jb->pw +
								  c / g->dw;
						double sum = 0;
						for (int64_t u = 0; u < g->kw; u++)
							sum += k[u] * s[u];
						out[j] += sum;
					}
				}
		}
	}
}

/* The runs of every output phase: off and tix, from run0[o], nrun[o] of them. */
static void runs_of(struct gjob *jb, int transpose)
{
	const struct conv_geom *g = jb->g;
	int64_t cg = g->c / g->group, sub = jb->sub, padded = jb->phr * jb->phc * sub;
	int nt = 0;
	for (int64_t o = 0; o < jb->nph; o++) {
		int64_t py = o / g->sw, px = o % g->sw;
		jb->run0[o] = nt;
		for (int64_t ci = 0; ci < cg; ci++)
			for (int64_t i = 0; i < g->kh; i++)
				for (int64_t j = 0; j < g->kw; j++) {
					int64_t at;
					if (transpose) { /* input (v + dy, u + dx) where py + pt - i dh = sh dy */
						int64_t qy = py + g->pt - i * g->dh, qx = px + g->pl - j * g->dw;
						int64_t dy = (qy >= 0 ? qy : qy - g->sh + 1) / g->sh;
						int64_t dx = (qx >= 0 ? qx : qx - g->sw + 1) / g->sw;
						if (qy != dy * g->sh || qx != dx * g->sw)
							continue;
						at = (dy + jb->padt) * jb->pw + dx + jb->padl;
					} else {
						int64_t r = i * g->dh, c = j * g->dw;
						at = (r % g->sh * g->sw + c % g->sw) * sub + r / g->sh * jb->pw + c / g->sw;
					}
					jb->off[nt] = ci * padded + at;
					jb->tix[nt++] = ci << 16 | (i * g->kw + j);
				}
		jb->nrun[o] = nt - jb->run0[o];
	}
}

int conv_group(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct conv_geom *g, int transpose,
	       void *y)
{
	int64_t cg = g->c / g->group, kk = g->kh * g->kw;
	size_t es = dtype_size(a->dtype);
	if (g->group < 2 || (a->dtype != DT_FLOAT && a->dtype != DT_DOUBLE) || g->n < 1 || g->oh < 1 || g->ow < 1 ||
	    g->pt < 0 || g->pl < 0 || g->pb < 0 || g->pr < 0)
		return 1;
#ifdef SIMD_X86
	if (a->dtype == DT_FLOAT && !simd_avx512())
		return 1;
#else
	if (a->dtype == DT_FLOAT)
		return 1;
#endif
	/* flat sums where a group's channels are few (with many, the GEMM's reuse of each input
	 * across M/group outputs wins); dots for a kernel larger than its output (a weight
	 * gradient's), where they use more of each vector's lanes: kw of 16 a kernel row against
	 * oh ow outputs in a flat run of (oh - 1) pw + ow (a 48 x 48 kernel's 3 x 3 output: 9 of
	 * 103; a 3 x 3 kernel's on a 3 x 3 map, 9 of 13 against dots' 3 of 16) */
	int flat_ok = cg <= MAXCG && cg * kk <= MAXT && g->sh * g->sw <= 16;
	int dots_ok = !transpose && kk > 1 && g->ow <= MAXDOT && g->oh * g->ow <= 64 && cg <= MAXT;
	int64_t run = (g->oh - 1) * (g->ow + (g->kw - 1) * g->dw / g->sw) + g->ow;
	double lanes_dots = (double)g->kw / (double)((g->kw + 15) / 16 * 16);
	double lanes_flat = (double)(g->oh * g->ow) / (double)((run + 15) / 16 * 16);
	enum group_kind kind = transpose ? GK_TRANSPOSE : dots_ok && (!flat_ok || lanes_dots > lanes_flat) ? GK_DOTS : GK_ROWS;
	if (kind != GK_DOTS && !flat_ok)
		return 1;
	struct gjob jb = {.g = g, .a = a, .w = w, .y = y, .es = es, .phr = 1, .phc = 1, .nph = 1};
	if (kind == GK_ROWS) { /* padded (oy sh + i dh, ox sw + j dw), in phases of the stride */
		int64_t rows = (g->pt + g->h - 1) / g->sh + 1, cols = (g->pl + g->w - 1) / g->sw + 1;
		int64_t reach = g->oh + (g->kh - 1) * g->dh / g->sh, wide = g->ow + (g->kw - 1) * g->dw / g->sw;
		jb.phr = g->sh, jb.phc = g->sw, jb.padt = g->pt, jb.padl = g->pl;
		jb.rh = rows > reach ? rows : reach;
		jb.pw = cols > wide ? cols : wide;
	} else if (kind == GK_TRANSPOSE) { /* input (v + dy, u + dx), dy from -padt to (sh - 1 + pt) / sh */
		int64_t rows = (g->oh + g->sh - 1) / g->sh, cols = (g->ow + g->sw - 1) / g->sw;
		jb.padt = ((g->kh - 1) * g->dh + g->sh - 1) / g->sh, jb.padl = ((g->kw - 1) * g->dw + g->sw - 1) / g->sw;
		rows += (g->sh - 1 + g->pt) / g->sh, cols += (g->sw - 1 + g->pl) / g->sw;
		jb.rh = jb.padt + (rows > g->h ? rows : g->h);
		jb.pw = jb.padl + (cols > g->w ? cols : g->w);
		jb.nph = g->sh * g->sw;
	} else { /* runs from column j sw + u dw, in phases of dw; rows unpadded */
		int64_t last = (g->ow - 1) * g->sw + (g->kw - 1) * g->dw, end = g->pl + g->w - 1;
		jb.phc = g->dw, jb.padl = g->pl, jb.rh = g->h;
		jb.pw = (last > end ? last : end) / g->dw + 1;
	}
	/* flat sums run over blocks of images, as many as keep a block's planes within 32K elements
	 * (a 3 x 3 plane is 13 lanes of one vector; 8 images' are 13 vectors) */
	int64_t per = cg * jb.phr * jb.phc * jb.rh * jb.pw;
	jb.nb = kind == GK_DOTS ? 1 : per * g->n <= 32768 ? g->n : 32768 / per > 1 ? 32768 / per : 1;
	jb.nblk = (g->n + jb.nb - 1) / jb.nb;
	jb.sub = jb.nb * jb.rh * jb.pw, jb.flat = jb.sub;
	size_t tb = kind == GK_DOTS ? 0 : (size_t)(jb.nph * cg * kk) * 2 * sizeof(int64_t);
	jb.bufb = (size_t)(cg * jb.phr * jb.phc * jb.sub + (kind == GK_TRANSPOSE ? g->sw : kind == GK_ROWS) * jb.flat) * es;
	size_t all = jb.bufb * (size_t)pool_threads();
	jb.buf = exec_scratch_raw(x, all);
	jb.off = jb.buf && tb ? exec_scratch_raw(x, tb) : NULL;
	if (!jb.buf || (tb && !jb.off)) {
		exec_scratch_free(x, jb.buf, all);
		return -1;
	}
	if (kind == GK_DOTS)
		kernel_for(g->n * g->m, 1, group_dots, &jb);
	else {
		jb.tix = jb.off + jb.nph * cg * kk;
		runs_of(&jb, kind == GK_TRANSPOSE);
		kernel_for(g->group * jb.nblk, 1, kind == GK_ROWS ? group_rows : group_transpose_rows, &jb);
	}
	exec_scratch_free(x, jb.off, tb);
	exec_scratch_free(x, jb.buf, all);
	return 0;
}
