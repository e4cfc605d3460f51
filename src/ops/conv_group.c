/* conv_group.c - grouped convolutions with few channels a group (depthwise: one), by direct kernels.
 *
 * A depthwise Conv through im2col is a GEMM of one row (M/group) by K = kh kw per image and group:
 * a few FLOPs for each byte the patch matrix is written and read. Here each output plane is summed
 * straight from its group's input planes, in three shapes of one idea (an output row, or a dot, as
 * a sum of weighted runs of padded input rows):
 *
 *   - Conv (forward): output row oy of plane (n, m) is sum over (ci, i, j) of w[m, ci, i, j] times
 *     the input row oy sh + i dh - pt read from column ox sw + j dw - pl. The group's input planes
 *     are copied once per (image, group) into a buffer of the thread's, padded left by pl with
 *     zeros and split into sw phases (column c of the padded row at phase c % sw, place c / sw),
 *     so that every term is a contiguous run, offset (j dw) / sw in phase (j dw) % sw: a stride-2
 *     conv reads no more than a stride-1 one. Taps whose row lies in the padding are left out.
 *   - ConvTranspose (the input gradient of a grouped Conv): output row y, columns of phase p
 *     (x = p + sw v), is sum over the input rows iy with iy sh = y + pt - i dh and the taps j with
 *     (p + pl - j dw) divisible by sw of w[ci, mo, i, j] times the input row from column
 *     v + (p + pl - j dw) / sw: again contiguous runs, of the input padded left and right; the
 *     phases are written out interleaved. Nothing is scattered, so no output is added to twice.
 *   - A Conv whose kernel is larger than its output (grouped_weight_grad's, conv.c: the batch as
 *     channels, dY's planes the kernel, the taps the output): each output (i', j') is a dot of the
 *     kernel's rows with runs of input rows, vectorised along the kernel's columns (input phases by
 *     the dilation, the Conv's step along them); a row of outputs keeps its accumulators in
 *     registers across the group's channels and the kernel's rows.
 *
 * Work is cut by (image, group) or (image, output channel); each output element is summed by one
 * thread in a fixed order (terms in (ci, i, j) order, two alternating partial sums per lane; dots
 * lane-wise, then the lanes in a fixed tree): the bits are the same for any --threads. float32
 * runs on AVX-512 (else 1: the GEMM paths), float64 in plain C. */
#include "conv.h"
#include "kernel.h"
#include "simd.h"
#include "../util/pool.h"

#include <string.h>

#define MAXT 512     /* terms of an output row: (C/group) kh kw */
#define MAXCG 8      /* channels a group, at most, for the row kernels */
#define MAXDOT 8     /* outputs a row, at most, for the dot kernel */

enum group_kind { GK_ROWS, GK_TRANSPOSE, GK_DOTS };

struct gjob {
	const struct conv_geom *g;
	const struct rtensor *a, *w;
	uint8_t *y, *buf;
	size_t bufb;     /* bytes of each thread's buffer */
	size_t es;
	int64_t pw;      /* a padded phase row's elements */
	int64_t padl;    /* zeros before column 0 of a padded row */
	int64_t ph;      /* phases a plane is split into */
	int64_t planes;  /* padded planes a work item holds */
	int64_t tap[64]; /* GK_ROWS: tap column j's run in a padded plane, less its row's;
			  * GK_TRANSPOSE: output phase p's tap j's in the input's row, or -1 */
};

/* Element offset of plane (i0, i1) of t, whose planes are `plane` elements: t may be a view that
 * exchanges its first two axes (a folded Transpose). */
static int64_t plane_at(const struct rtensor *t, int64_t i0, int64_t i1, int64_t plane)
{
	return t->view ? i0 * t->vst[0] + i1 * t->vst[1] : (i0 * t->dims[1] + i1) * plane;
}

/* src (h, w) -> dst (ph, h, pw): dst[(p h + r) pw + k] = src[r][k ph + p - padl], zero outside. */
static void pad_plane(const uint8_t *src, int64_t h, int64_t w, int64_t padl, int64_t ph, int64_t pw, size_t es,
		      uint8_t *dst)
{
	for (int64_t p = 0; p < ph; p++) {
		/* place k holds column k ph + p - padl: inside for k in [k0, k1) */
		int64_t k0 = padl <= p ? 0 : (padl - p + ph - 1) / ph, last = w - 1 - p + padl;
		int64_t k1 = last < 0 ? 0 : last / ph + 1;
		k1 = k1 < pw ? k1 : pw, k0 = k0 < k1 ? k0 : k1;
		for (int64_t r = 0; r < h; r++) {
			uint8_t *d = dst + (size_t)((p * h + r) * pw) * es;
			const uint8_t *s = src + (size_t)(r * w + k0 * ph + p - padl) * es;
			memset(d, 0, (size_t)k0 * es);
			memset(d + (size_t)k1 * es, 0, (size_t)(pw - k1) * es);
			if (ph == 1)
				memcpy(d + (size_t)k0 * es, s, (size_t)(k1 - k0) * es);
			else if (es == 4)
				for (int64_t k = k0; k < k1; k++)
					((uint32_t *)d)[k] = ((const uint32_t *)s)[(k - k0) * ph];
			else
				for (int64_t k = k0; k < k1; k++)
					((uint64_t *)d)[k] = ((const uint64_t *)s)[(k - k0) * ph];
		}
	}
}

/* dst[u] = sum_t wt[t] src[t][u], u < len, float64: one sum a lane, terms in order. */
static void rows_double(double *dst, int64_t len, const void *const *src, const double *wt, int nt)
{
	for (int64_t u = 0; u < len; u++)
		dst[u] = 0;
	for (int t = 0; t < nt; t++) {
		const double *s = src[t];
		double v = wt[t];
		for (int64_t u = 0; u < len; u++)
			dst[u] += v * s[u];
	}
}

#ifdef SIMD_X86
#define TARGET SIMD_TARGET

/* rows_double's sum in float32, nv vectors of 16 at a time: the even terms and the odd ones in two
 * accumulators a lane (the FMAs' latency), added at the end. */
static inline __attribute__((always_inline)) TARGET void rows_nv(const int nv, float *dst, int64_t len,
								 const void *const *src, const float *wt, int nt)
{
	for (int64_t u = 0; u < len; u += 16 * nv) {
		__mmask16 mk[4];
		__m512 a[4], b[4];
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++) {
			mk[v] = len - u - 16 * v > 0 ? simd_lanes(len - u - 16 * v) : 0;
			a[v] = b[v] = _mm512_setzero_ps();
		}
		int t = 0;
		for (; t + 1 < nt; t += 2) {
			const float *s0 = (const float *)src[t] + u, *s1 = (const float *)src[t + 1] + u;
			__m512 w0 = _mm512_set1_ps(wt[t]), w1 = _mm512_set1_ps(wt[t + 1]);
#pragma GCC unroll 4
			for (int v = 0; v < nv; v++) {
				a[v] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mk[v], s0 + 16 * v), a[v]);
				b[v] = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(mk[v], s1 + 16 * v), b[v]);
			}
		}
		if (t < nt) {
			const float *s0 = (const float *)src[t] + u;
			__m512 w0 = _mm512_set1_ps(wt[t]);
#pragma GCC unroll 4
			for (int v = 0; v < nv; v++)
				a[v] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(mk[v], s0 + 16 * v), a[v]);
		}
#pragma GCC unroll 4
		for (int v = 0; v < nv; v++)
			_mm512_mask_storeu_ps(dst + u + 16 * v, mk[v], _mm512_add_ps(a[v], b[v]));
	}
}

static TARGET void group_rows_float(float *dst, int64_t len, const void *const *src, const float *wt, int nt)
{
	switch (len > 48 ? 4 : (len + 15) / 16) {
	case 1:
		rows_nv(1, dst, len, src, wt, nt);
		break;
	case 2:
		rows_nv(2, dst, len, src, wt, nt);
		break;
	case 3:
		rows_nv(3, dst, len, src, wt, nt);
		break;
	default:
		rows_nv(4, dst, len, src, wt, nt);
	}
}

/* row[p + sw v] = ph[p][v], the phases nph apart, for the row's n elements; float32 at stride 2
 * by two permutes a 32 outputs. */
static TARGET void interleave_float2(float *row, const float *ph, int64_t nph, int64_t n)
{
	const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
	for (int64_t v = 0; 2 * v < n; v += 16) {
		__mmask16 me = simd_lanes(nph - v), mo = n / 2 > v ? simd_lanes(n / 2 - v) : 0;
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
	int64_t cg = g->c / g->group, kw = g->kw, h = g->h, planef = jb->ph * h * jb->pw;
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
static void group_rows_float(float *dst, int64_t len, const void *const *src, const float *wt, int nt)
{
	(void)dst, (void)len, (void)src, (void)wt, (void)nt;
}

static void group_dots_float(const struct gjob *jb, const float *bufp, const float *const *kp, int64_t i1, float *out)
{
	(void)jb, (void)bufp, (void)kp, (void)i1, (void)out;
}
#endif

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

/* dst = the row's terms (src, and their weights taken from w at element wat[t]), either dtype. */
static void rows_any(const struct gjob *jb, void *dst, int64_t len, const void *const *src, const int64_t *wat, int nt)
{
	if (jb->es == 4) {
		float wt[MAXT];
		for (int t = 0; t < nt; t++)
			wt[t] = ((const float *)jb->w->data)[wat[t]];
		group_rows_float(dst, len, src, wt, nt);
	} else {
		double wt[MAXT];
		for (int t = 0; t < nt; t++)
			wt[t] = ((const double *)jb->w->data)[wat[t]];
		rows_double(dst, len, src, wt, nt);
	}
}

/* The item's input planes (image n, the group's channels from c0) padded into the thread's buffer;
 * returns it. */
static uint8_t *pad_group(const struct gjob *jb, int64_t n, int64_t c0)
{
	const struct conv_geom *g = jb->g;
	uint8_t *buf = jb->buf + pool_self() * jb->bufb;
	int64_t plane = g->h * g->w;
	for (int64_t ci = 0; ci < jb->planes; ci++)
		pad_plane((const uint8_t *)jb->a->data + (size_t)plane_at(jb->a, n, c0 + ci, plane) * jb->es, g->h, g->w,
			  jb->padl, jb->ph, jb->pw, jb->es, buf + (size_t)(ci * jb->ph * g->h * jb->pw) * jb->es);
	return buf;
}

/* Conv items [i0, i1): (image, group), its M/group output planes. */
static void group_rows(void *arg, int64_t i0, int64_t i1)
{
	const struct gjob *jb = arg;
	const struct conv_geom *g = jb->g;
	int64_t cg = g->c / g->group, mg = g->m / g->group, kk = g->kh * g->kw, np = g->oh * g->ow;
	int64_t planeb = jb->ph * g->h * jb->pw;
	const void *src[MAXT];
	int64_t wat[MAXT];
	for (int64_t it = i0; it < i1; it++) {
		int64_t n = it / g->group, gi = it % g->group;
		const uint8_t *buf = pad_group(jb, n, gi * cg);
		for (int64_t mo = 0; mo < mg; mo++) {
			int64_t m = gi * mg + mo;
			uint8_t *yp = jb->y + (size_t)((n * g->m + m) * np) * jb->es;
			for (int64_t oy = 0; oy < g->oh; oy++) {
				int nt = 0;
				for (int64_t ci = 0; ci < cg; ci++)
					for (int64_t i = 0, w0 = plane_at(jb->w, m, ci, kk); i < g->kh; i++) {
						int64_t iy = oy * g->sh + i * g->dh - g->pt;
						if (iy < 0 || iy >= g->h)
							continue;
						for (int64_t j = 0; j < g->kw; j++, nt++) {
							src[nt] = buf + (size_t)(ci * planeb + iy * jb->pw + jb->tap[j]) * jb->es;
							wat[nt] = w0 + i * g->kw + j;
						}
					}
				rows_any(jb, yp + (size_t)(oy * g->ow) * jb->es, g->ow, src, wat, nt);
			}
		}
	}
}

/* ConvTranspose items [i0, i1): (image, group), its M/group output planes (g in ConvTranspose
 * terms: (h, w) its input, (oh, ow) its output); phases of a strided output row go through tmp. */
static void group_transpose_rows(void *arg, int64_t i0, int64_t i1)
{
	const struct gjob *jb = arg;
	const struct conv_geom *g = jb->g;
	int64_t cg = g->c / g->group, mg = g->m / g->group, kk = g->kh * g->kw, np = g->oh * g->ow;
	int64_t planeb = g->h * jb->pw, sw = g->sw, nph = (g->ow + sw - 1) / sw, rows[64];
	const void *src[MAXT];
	int64_t wat[MAXT];
	for (int64_t it = i0; it < i1; it++) {
		int64_t n = it / g->group, gi = it % g->group;
		uint8_t *buf = pad_group(jb, n, gi * cg), *tmp = buf + (size_t)(cg * planeb) * jb->es;
		for (int64_t mo = 0; mo < mg; mo++) {
			uint8_t *yp = jb->y + (size_t)((n * g->m + gi * mg + mo) * np) * jb->es;
			for (int64_t y = 0; y < g->oh; y++) {
				for (int64_t i = 0; i < g->kh; i++) { /* the input row tap row i reads, or -1 */
					int64_t t = y + g->pt - i * g->dh;
					rows[i] = t < 0 || t % g->sh || t / g->sh >= g->h ? -1 : t / g->sh;
				}
				uint8_t *row = yp + (size_t)(y * g->ow) * jb->es;
				for (int64_t p = 0; p < sw && p < g->ow; p++) {
					int nt = 0;
					for (int64_t ci = 0; ci < cg; ci++)
						for (int64_t i = 0, w0 = plane_at(jb->w, gi * cg + ci, mo, kk); i < g->kh; i++)
							for (int64_t j = 0; rows[i] >= 0 && j < g->kw; j++)
								if (jb->tap[p * g->kw + j] >= 0) {
									src[nt] = buf + (size_t)(ci * planeb + rows[i] * jb->pw +
												 jb->tap[p * g->kw + j]) * jb->es;
									wat[nt++] = w0 + i * g->kw + j;
								}
					rows_any(jb, sw == 1 ? row : tmp + (size_t)(p * nph) * jb->es, (g->ow - p + sw - 1) / sw, src,
						 wat, nt);
				}
				if (sw > 1)
					interleave(row, tmp, nph, sw, g->ow, jb->es);
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
	int64_t planeb = jb->ph * g->h * jb->pw;
	for (int64_t it = i0; it < i1; it++) {
		int64_t n = it / g->m, m = it % g->m;
		const uint8_t *buf = pad_group(jb, n, m / mg * cg);
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

int conv_group(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct conv_geom *g, int transpose,
	       void *y)
{
	int64_t cg = g->c / g->group, kk = g->kh * g->kw;
	size_t es = dtype_size(a->dtype);
	if (g->group < 2 || (a->dtype != DT_FLOAT && a->dtype != DT_DOUBLE) || g->n < 1 || g->oh < 1 || g->ow < 1 ||
	    g->pt < 0 || g->pl < 0)
		return 1;
#ifdef SIMD_X86
	if (a->dtype == DT_FLOAT && !simd_avx512())
		return 1;
#else
	if (a->dtype == DT_FLOAT)
		return 1;
#endif
	/* a kernel at least as large as its output (a weight gradient's): dots; else rows, where a
	 * group's channels are few (with many, the GEMM's reuse of each input across M/group outputs
	 * wins) */
	enum group_kind kind = transpose ? GK_TRANSPOSE
			     : kk >= g->oh * g->ow && g->ow <= MAXDOT && g->oh * g->ow <= 64 && cg <= MAXT ? GK_DOTS
												       : GK_ROWS;
	if (kind != GK_DOTS && (cg > MAXCG || cg * kk > MAXT))
		return 1;
	struct gjob jb = {.g = g, .a = a, .w = w, .y = y, .es = es, .planes = cg, .ph = 1};
	int64_t tmp = 0;
	if (kind == GK_ROWS) { /* runs from column ox sw + j dw of the padded row, in phases of sw */
		int64_t last = (g->ow - 1) * g->sw + (g->kw - 1) * g->dw, end = g->pl + g->w - 1;
		jb.ph = g->sw, jb.padl = g->pl;
		jb.pw = (last > end ? last : end) / g->sw + 1;
		if (g->kw > 64)
			return 1;
		for (int64_t j = 0; j < g->kw; j++)
			jb.tap[j] = j * g->dw % g->sw * g->h * jb.pw + j * g->dw / g->sw;
	} else if (kind == GK_TRANSPOSE) { /* runs from input column v + floor((p + pl - j dw) / sw) */
		int64_t reach = (g->sw - 1 + g->pl) / g->sw + (g->ow - 1) / g->sw + 1;
		jb.padl = ((g->kw - 1) * g->dw + g->sw - 1) / g->sw;
		jb.pw = jb.padl + (reach > g->w ? reach : g->w) + 1;
		tmp = g->ow + g->sw;
		if (g->sw * g->kw > 64 || g->kh > 64)
			return 1;
		for (int64_t p = 0; p < g->sw; p++) /* phase p's tap j: its run's first column, or -1 */
			for (int64_t j = 0; j < g->kw; j++) {
				int64_t q = p + g->pl - j * g->dw, off = (q >= 0 ? q : q - g->sw + 1) / g->sw; /* floor */
				jb.tap[p * g->kw + j] = q - off * g->sw ? -1 : jb.padl + off;
			}
	} else { /* runs from column j sw + u dw, in phases of dw */
		int64_t last = (g->ow - 1) * g->sw + (g->kw - 1) * g->dw, end = g->pl + g->w - 1;
		jb.ph = g->dw, jb.padl = g->pl;
		jb.pw = (last > end ? last : end) / g->dw + 1;
	}
	jb.bufb = (size_t)(cg * jb.ph * g->h * jb.pw + tmp) * es;
	size_t all = jb.bufb * (size_t)pool_threads();
	jb.buf = exec_scratch_raw(x, all);
	if (!jb.buf)
		return -1;
	if (kind == GK_DOTS)
		kernel_for(g->n * g->m, 1, group_dots, &jb);
	else
		kernel_for(g->n * g->group, 1, kind == GK_ROWS ? group_rows : group_transpose_rows, &jb);
	exec_scratch_free(x, jb.buf, all);
	return 0;
}
