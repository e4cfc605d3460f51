/* conv.c - 1-D and 2-D Conv and ConvTranspose, and the window geometry pooling shares (its kernels:
 * pool.c; other ranks, integer MaxPool and MaxPool's storage_order: conv_nd.c).
 *
 * float32 Conv with one group and 16 output channels or more, and such a ConvTranspose at stride 1,
 * run on the direct kernel where the CPU has AVX-512 (conv_direct.c); grouped ones with few
 * channels a group (depthwise), their ConvTransposes and grouped weight gradients' Convs on
 * conv_group.c's (float64 too). Otherwise Conv is im2col + GEMM per image and group:
 * col (Cg*kh*kw, OH*OW) gathers the input patches and
 * Y_g (Mg, OH*OW) = W_g (Mg, Cg*kh*kw) * col. ConvTranspose is its adjoint: col = W_g^T * X_g, then
 * col2im adds the patches back. Output sizes, padding and auto_pad follow the ONNX operator docs:
 *   OH = floor((H + pad_top + pad_bottom - dilation*(kh-1) - 1) / stride) + 1   (ceil for ceil_mode)
*/
#include "../autodiff/ad.h"
#include "conv.h"
#include "kernel.h"
#include "vmath.h"
#include "../util/pool.h"

#include "blas.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>


/* A (H, W) attribute: two entries, or for a 1-D node one (W's; H takes the default). */
static int ints2(const struct node *n, const char *name, int64_t dflt, int one_d, int64_t *a, int64_t *b)
{
	size_t k;
	const int64_t *v = attr_ints(n, name, &k);
	if (!v) {
		*a = *b = dflt;
		return 0;
	}
	if (k != (one_d ? 1u : 2u))
		return -1;
	*a = one_d ? dflt : v[0];
	*b = v[k - 1];
	return 0;
}

/* pads: (top, left, bottom, right), or for a 1-D node (begin, end) */
static int pads_of(const struct node *n, struct conv_geom *g)
{
	size_t np;
	const int64_t *p = attr_ints(n, "pads", &np);
	g->pt = g->pl = g->pb = g->pr = 0;
	if (p && np != (g->one_d ? 2u : 4u))
		return -1;
	if (p && g->one_d)
		g->pl = p[0], g->pr = p[1];
	else if (p)
		g->pt = p[0], g->pl = p[1], g->pb = p[2], g->pr = p[3];
	return 0;
}

int conv_out_dims(const struct conv_geom *g, int64_t ch, int64_t *dims)
{
	dims[0] = g->n, dims[1] = ch;
	if (g->one_d) {
		dims[2] = g->ow;
		return 3;
	}
	dims[2] = g->oh, dims[3] = g->ow;
	return 4;
}

/* Kernel, strides, dilations, pads (explicit or auto_pad) and the output size of a pooling or
 * convolution window over g->h x g->w; `transpose` computes a ConvTranspose output instead. */
/* Window arithmetic in 128 bits: a file's strides, dilations and pads reach 2^63, and their
 * products must be refused, not wrap (signed overflow is undefined). */
__extension__ typedef __int128 wide;

static int fits(wide v)
{
	return v >= INT64_MIN && v <= INT64_MAX;
}

static int window(struct exec *x, const struct node *n, struct conv_geom *g, int ceil_mode, int transpose)
{
	int dims = g->one_d ? 1 : 2;
	if (ints2(n, "strides", 1, g->one_d, &g->sh, &g->sw) || ints2(n, "dilations", 1, g->one_d, &g->dh, &g->dw))
		return exec_fail(x, "strides and dilations must have %d entr%s", dims, dims == 1 ? "y" : "ies");
	if (pads_of(n, g))
		return exec_fail(x, "pads must have %d entries", 2 * dims);
	if (g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->kh < 1 || g->kw < 1 || g->pt < 0 || g->pl < 0 ||
	    g->pb < 0 || g->pr < 0)
		return exec_fail(x, "kernel, strides and dilations must be positive and pads not negative");
	int same_upper = attr_str_is(n, "auto_pad", "SAME_UPPER", 0), same_lower = attr_str_is(n, "auto_pad", "SAME_LOWER", 0);
	wide ekh = (wide)g->dh * (g->kh - 1) + 1, ekw = (wide)g->dw * (g->kw - 1) + 1;
	wide oh, ow, th, tw;
	if (transpose) {
		int64_t oph = 0, opw = 0;
		if (ints2(n, "output_padding", 0, g->one_d, &oph, &opw))
			return exec_fail(x, "output_padding must have %d entr%s", g->one_d ? 1 : 2, g->one_d ? "y" : "ies");
		size_t no;
		const int64_t *os = attr_ints(n, "output_shape", &no);
		wide full_h = (wide)g->sh * (g->h - 1) + oph + ekh, full_w = (wide)g->sw * (g->w - 1) + opw + ekw;
		if (os || same_upper || same_lower) {
			oh = os && !g->one_d ? os[no - 2] : (wide)g->h * g->sh;
			ow = os ? os[no - 1] : (wide)g->w * g->sw;
			th = full_h - oh, tw = full_w - ow;
			if (!fits(oh) || !fits(ow) || !fits(th) || !fits(tw))
				return exec_fail(x, "the output's size does not fit in 64 bits");
			/* the larger half at the start but for SAME_UPPER (the spec's output_shape rule);
			 * a negative total padding: the output runs past the taps, zeros at the end (as
			 * output_padding's; ONNX's convtranspose_output_shape) */
			int upper = same_upper;
			g->pt = th < 0 ? 0 : (int64_t)(upper ? th / 2 : th - th / 2), g->pb = (int64_t)th - g->pt;
			g->pl = tw < 0 ? 0 : (int64_t)(upper ? tw / 2 : tw - tw / 2), g->pr = (int64_t)tw - g->pl;
		} else {
			oh = full_h - g->pt - g->pb;
			ow = full_w - g->pl - g->pr;
		}
		if (oh < 1 || ow < 1)
			return exec_fail(x, "the output would be empty");
		if (!fits(oh) || !fits(ow))
			return exec_fail(x, "the output's size does not fit in 64 bits");
		g->oh = (int64_t)oh, g->ow = (int64_t)ow;
		return 0;
	}
	if (same_upper || same_lower) {
		g->oh = (int64_t)(((wide)g->h + g->sh - 1) / g->sh);
		g->ow = (int64_t)(((wide)g->w + g->sw - 1) / g->sw);
		th = (wide)(g->oh - 1) * g->sh + ekh - g->h, tw = (wide)(g->ow - 1) * g->sw + ekw - g->w;
		th = th > 0 ? th : 0;
		tw = tw > 0 ? tw : 0;
		if (!fits(th) || !fits(tw))
			return exec_fail(x, "the padding does not fit in 64 bits");
		g->pt = (int64_t)(same_upper ? th / 2 : th - th / 2), g->pb = (int64_t)th - g->pt;
		g->pl = (int64_t)(same_upper ? tw / 2 : tw - tw / 2), g->pr = (int64_t)tw - g->pl;
		return 0;
	}
	if (attr_str_is(n, "auto_pad", "VALID", 0))
		g->pt = g->pl = g->pb = g->pr = 0;
	wide sh = (wide)g->h + g->pt + g->pb - ekh, sw = (wide)g->w + g->pl + g->pr - ekw;
	if (sh < 0 || sw < 0)
		return exec_fail(x, "the window is larger than the padded input");
	oh = (ceil_mode ? (sh + g->sh - 1) / g->sh : sh / g->sh) + 1;
	ow = (ceil_mode ? (sw + g->sw - 1) / g->sw : sw / g->sw) + 1;
	if (!fits(oh) || !fits(ow))
		return exec_fail(x, "the output's size does not fit in 64 bits");
	g->oh = (int64_t)oh, g->ow = (int64_t)ow;
	return 0;
}

/* Any float width: a device backend's kernels read 16-bit floats themselves (the CPU's widen
 * them first, exec/cpu.c). */
static int input4(struct exec *x, const struct rtensor *a, struct conv_geom *g)
{
	if (!dtype_is_float(a->dtype))
		return exec_fail(x, "X must be a floating-point tensor, not %s", dtype_name(a->dtype));
	if (a->ndim != 4 && a->ndim != 3)
		return exec_fail(x, "only 1-D and 2-D windows ((N, C, L) and (N, C, H, W) inputs) are supported, not rank %d",
				 a->ndim);
	g->one_d = a->ndim == 3;
	g->n = a->dims[0], g->c = a->dims[1], g->h = g->one_d ? 1 : a->dims[2], g->w = a->dims[a->ndim - 1];
	return 0;
}

int pool_pads_check(struct exec *x, const struct node *n, const int64_t *k, size_t r)
{
	size_t np;
	const int64_t *p = attr_ints(n, "pads", &np);
	if (!p || np != 2 * r || attr_str_is(n, "auto_pad", "SAME_UPPER", 0) || attr_str_is(n, "auto_pad", "SAME_LOWER", 0) ||
	    attr_str_is(n, "auto_pad", "VALID", 0))
		return 0;
	for (size_t i = 0; i < 2 * r; i++)
		if (p[i] >= k[i % r])
			return exec_fail(x, "pads[%zu] = %lld is not smaller than kernel_shape[%zu] = %lld (a window "
					 "wholly in the padding)", i, (long long)p[i], i % r, (long long)k[i % r]);
	return 0;
}

int conv_geometry(struct exec *x, const struct node *n, struct rtensor *const *in, enum conv_kind kind,
		  struct conv_geom *g)
{
	const struct rtensor *a = in[0], *w = kind == CONV_POOL ? NULL : in[1];
	const struct rtensor *b = kind != CONV_POOL && n->n_in > 2 ? in[2] : NULL;
	memset(g, 0, sizeof *g);
	if (input4(x, a, g))
		return exec_status(x);
	size_t nk;
	const int64_t *ks = attr_ints(n, "kernel_shape", &nk);
	size_t want = g->one_d ? 1 : 2;
	if (kind == CONV_POOL) {
		if (!ks || nk != want)
			return exec_fail(x, "kernel_shape must have %zu entr%s", want, want == 1 ? "y" : "ies");
		g->kh = g->one_d ? 1 : ks[0], g->kw = ks[nk - 1];
		if (attr_int(n, "storage_order", 0))
			return exec_fail(x, "storage_order 1 is not supported");
		if (pool_pads_check(x, n, ks, nk))
			return exec_status(x);
		return window(x, n, g, attr_int(n, "ceil_mode", 0) != 0, 0);
	}
	g->group = attr_int(n, "group", 1);
	if (kind == CONV_FORWARD) {
		if (w->ndim != a->ndim || w->dtype != a->dtype || g->group < 1 || g->c % g->group || w->dims[0] % g->group ||
		    w->dims[1] * g->group != g->c)
			return exec_fail(x, "W must be (M, C/group, %s) with M and C divisible by group", g->one_d ? "k" : "kh, kw");
		g->m = w->dims[0];
	} else {
		if (w->ndim != a->ndim || w->dtype != a->dtype || g->group < 1 || g->c % g->group || w->dims[0] != g->c)
			return exec_fail(x, "W must be (C, M/group, %s)", g->one_d ? "k" : "kh, kw");
		g->m = w->dims[1] * g->group;
	}
	g->kh = g->one_d ? 1 : w->dims[2], g->kw = w->dims[w->ndim - 1];
	if (ks && (nk != want || (!g->one_d && ks[0] != g->kh) || ks[nk - 1] != g->kw))
		return exec_fail(x, "kernel_shape disagrees with W");
	if (b && (b->numel != g->m || b->dtype != a->dtype))
		return exec_fail(x, "B must have the %lld output channels", (long long)g->m);
	return window(x, n, g, 0, kind == CONV_TRANSPOSE);
}

/* col[(c*kh + i)*kw + j][(oy-oy0)*ow + ox] = x[c][oy*sh - pt + i*dh][ox*sw - pl + j*dw], 0 outside,
 * for the band of output rows [oy0, oy1). For each row the valid ox form one range, computed once;
 * with unit stride it is one copy. */
#define IM2COL(T)                                                                                              \
	static void im2col_##T(const T *x, const struct conv_geom *g, int64_t cg, int64_t oy0, int64_t oy1, T *col) \
	{                                                                                                      \
		int64_t band = (oy1 - oy0) * g->ow;                                                            \
		for (int64_t c = 0; c < cg; c++)                                                               \
			for (int64_t i = 0; i < g->kh; i++)                                                    \
				for (int64_t j = 0; j < g->kw; j++) {                                          \
					T *row = col + ((c * g->kh + i) * g->kw + j) * band - oy0 * g->ow;     \
					int64_t off = j * g->dw - g->pl; /* ix = ox*sw + off */                \
					int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;                \
					int64_t hi = g->w - off <= 0 ? 0 : (g->w - off + g->sw - 1) / g->sw;   \
					if (hi > g->ow)                                                        \
						hi = g->ow;                                                    \
					if (lo > hi)                                                           \
						lo = hi;                                                       \
					if (g->sh == 1 && g->sw == 1 && g->ow == g->w) {                       \
						/* rows oy read input rows oy - pt + i*dh: the valid ones are \
						 * one contiguous run of the image, shifted by off */          \
						int64_t y0 = g->pt - i * g->dh, a0 = oy0 > y0 ? oy0 : y0;      \
						int64_t a1 = g->h + y0 < oy1 ? g->h + y0 : oy1;                \
						T *r0 = row + oy0 * g->ow;                                     \
						if (a1 <= a0) {                                                \
							memset(r0, 0, (size_t)((oy1 - oy0) * g->ow) * sizeof(T)); \
							continue;                                              \
						}                                                              \
						memset(r0, 0, (size_t)((a0 - oy0) * g->ow) * sizeof(T));       \
						T *ra = row + a0 * g->ow;                                      \
						const T *sa = x + (c * g->h + a0 - y0) * g->w;                 \
						/* (a kernel wider than the image leaves no run: s1 = s0) */   \
						int64_t n = (a1 - a0) * g->ow, s0 = off > 0 ? 0 : -off < n ? -off : n; \
						int64_t s1 = off > 0 ? (n > off ? n - off : 0) : n;            \
						memcpy(ra + s0, sa + s0 + off, (size_t)(s1 - s0) * sizeof(T)); \
						for (int64_t oy = a0; oy < a1; oy++) { /* the edges */         \
							T *r = row + oy * g->ow;                               \
							for (int64_t ox = 0; ox < lo; ox++)                    \
								r[ox] = 0;                                     \
							for (int64_t ox = hi; ox < g->ow; ox++)                \
								r[ox] = 0;                                     \
						}                                                              \
						memset(row + a1 * g->ow, 0, (size_t)((oy1 - a1) * g->ow) * sizeof(T)); \
						continue;                                                      \
					}                                                                      \
					for (int64_t oy = oy0; oy < oy1; oy++) {                               \
						int64_t iy = oy * g->sh - g->pt + i * g->dh;                   \
						T *r = row + oy * g->ow;                                       \
						if (iy < 0 || iy >= g->h) {                                    \
							memset(r, 0, (size_t)g->ow * sizeof(T));               \
							continue;                                              \
						}                                                              \
						const T *src = x + (c * g->h + iy) * g->w + off;               \
						if (g->ow <= 16) { /* narrow rows: calls would cost more */    \
							for (int64_t ox = 0; ox < g->ow; ox++)                 \
								r[ox] = ox >= lo && ox < hi ? src[ox * g->sw] : 0; \
							continue;                                              \
						}                                                              \
						memset(r, 0, (size_t)lo * sizeof(T));                          \
						if (g->sw == 1)                                                \
							memcpy(r + lo, src + lo, (size_t)(hi - lo) * sizeof(T)); \
						else                                                           \
							for (int64_t ox = lo; ox < hi; ox++)                   \
								r[ox] = src[ox * g->sw];                       \
						memset(r + hi, 0, (size_t)(g->ow - hi) * sizeof(T));           \
					}                                                                      \
				}                                                                              \
	}                                                                                                      \
	static void col2im_##T(const T *col, int64_t ld, const struct conv_geom *g, int64_t cg, T *x)              \
	{                                                                                                      \
		for (int64_t c = 0; c < cg; c++)                                                               \
			for (int64_t i = 0; i < g->kh; i++)                                                    \
				for (int64_t j = 0; j < g->kw; j++) {                                          \
					const T *row = col + ((c * g->kh + i) * g->kw + j) * ld;               \
					int64_t off = j * g->dw - g->pl; /* ix = ox*sw + off, in [0, w) for ox in [lo, hi) */ \
					int64_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;                \
					int64_t hi = g->w - off <= 0 ? 0 : (g->w - off + g->sw - 1) / g->sw;   \
					hi = hi < g->ow ? hi : g->ow;                                          \
					for (int64_t oy = 0; lo < hi && oy < g->oh; oy++) {                    \
						int64_t iy = oy * g->sh - g->pt + i * g->dh;                   \
						if (iy < 0 || iy >= g->h)                                      \
							continue;                                              \
						T *dst = x + (c * g->h + iy) * g->w + off;                     \
						const T *src = row + oy * g->ow;                               \
						if (g->sw == 1)                                                \
							for (int64_t ox = lo; ox < hi; ox++)                   \
								dst[ox] += src[ox];                            \
						else                                                           \
							for (int64_t ox = lo; ox < hi; ox++)                   \
								dst[ox * g->sw] += src[ox];                    \
					}                                                                      \
				}                                                                              \
	}
IM2COL(float)
IM2COL(double)

/* y (n, m, plane) += b[m] */
static void add_bias(struct rtensor *y, const struct rtensor *b, int64_t n, int64_t m, int64_t plane)
{
	for (int64_t i = 0; i < n; i++)
		for (int64_t c = 0; c < m; c++) {
			int64_t base = (i * m + c) * plane;
			if (y->dtype == DT_FLOAT) {
				float v = ((const float *)b->data)[c], *p = (float *)y->data + base;
				for (int64_t k = 0; k < plane; k++)
					p[k] += v;
			} else {
				double v = ((const double *)b->data)[c], *p = (double *)y->data + base;
				for (int64_t k = 0; k < plane; k++)
					p[k] += v;
			}
		}
}

void conv_gemm(int dt, int ta, int64_t m, int64_t n, int64_t k, const void *a, const void *b, void *c)
{
	if (dt == DT_FLOAT)
		blas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
			    ta ? (int)m : (int)k, b, (int)n, 0.0f, c, (int)n);
	else
		blas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a,
			    ta ? (int)m : (int)k, b, (int)n, 0.0, c, (int)n);
}

/* float32, unit stride and dilation, one group: no im2col. Each image is padded once to
 * (C, Hp, Wp); for kernel offset (i, j) the input seen by every output pixel is the padded image
 * shifted by i*Wp + j, a (C, OH*Wp) matrix with rows Hp*Wp apart, so
 *   Yw (M, OH*Wp) = sum_ij W_ij (M, C) * Xpad[:, i*Wp + j ...]
 * is kh*kw GEMMs accumulating into a wide output whose last kw-1 columns per row are dropped. */
struct shifted {
	const struct rtensor *a;
	const struct conv_geom *g;
	const float *pack;
	float *y, *buf; /* each thread's padded image and wide output, `per` floats */
	size_t per;
};

static void shifted_images(void *arg, int64_t i0, int64_t i1)
{
	const struct shifted *j = arg;
	const struct conv_geom *g = j->g;
	int64_t hp = g->h + g->pt + g->pb, wp = g->w + g->pl + g->pr, kk = g->kh * g->kw;
	float *pad = j->buf + pool_self() * j->per, *wide = pad + g->c * hp * wp + wp;
	for (int64_t i = i0; i < i1; i++) {
		const float *xi = (const float *)j->a->data + i * g->c * g->h * g->w;
		for (int64_t c = 0; c < g->c; c++)
			for (int64_t r = 0; r < hp; r++) {
				float *dst = pad + (c * hp + r) * wp;
				int64_t iy = r - g->pt;
				if (iy < 0 || iy >= g->h) {
					memset(dst, 0, (size_t)wp * 4);
					continue;
				}
				memset(dst, 0, (size_t)g->pl * 4);
				memcpy(dst + g->pl, xi + (c * g->h + iy) * g->w, (size_t)g->w * 4);
				memset(dst + g->pl + g->w, 0, (size_t)g->pr * 4);
			}
		for (int64_t t = 0; t < kk; t++) {
			int64_t di = t / g->kw, dj = t % g->kw;
			blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, (int)(g->oh * wp), (int)g->c, 1.0f,
				   j->pack + t * g->m * g->c, (int)g->c, pad + di * wp + dj, (int)(hp * wp), t ? 1.0f : 0.0f,
				   wide, (int)(g->oh * wp));
		}
		float *yi = j->y + i * g->m * g->oh * g->ow;
		for (int64_t m = 0; m < g->m; m++)
			for (int64_t oy = 0; oy < g->oh; oy++)
				memcpy(yi + (m * g->oh + oy) * g->ow, wide + (m * g->oh + oy) * wp, (size_t)g->ow * 4);
	}
}

static int conv_shifted(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct conv_geom *g,
			float *y)
{
	int64_t hp = g->h + g->pt + g->pb, wp = g->w + g->pl + g->pr, kk = g->kh * g->kw;
	size_t per = (size_t)(g->c * hp * wp + wp + g->m * g->oh * wp), bufb = per * 4 * (size_t)pool_threads();
	size_t packb = (size_t)(kk * g->m * g->c) * 4;
	float *buf = exec_scratch(x, bufb), *pack = buf ? exec_scratch(x, packb) : NULL;
	if (!pack) {
		exec_scratch_free(x, buf, bufb);
		return exec_status(x);
	}
	const float *wd = w->data;
	for (int64_t t = 0; t < kk; t++) /* W (M, C, kh, kw) -> W_ij (kh*kw, M, C) */
		for (int64_t m = 0; m < g->m; m++)
			for (int64_t c = 0; c < g->c; c++)
				pack[(t * g->m + m) * g->c + c] = wd[(m * g->c + c) * kk + t];
	struct shifted j = {a, g, pack, y, buf, per};
	kernel_for(g->n, 1, shifted_images, &j);
	exec_scratch_free(x, pack, packb);
	exec_scratch_free(x, buf, bufb);
	return 0;
}

/* Patch rows [r0, r1) of conv_positions, row r = b np' + pos - p0 of (n np', K), np' positions
 * from p0: P[(b, pos)][(c, i, j)] = X[b, c, oy sh + i dh - pt, ox sw + j dw - pl], 0 outside. */
struct gather {
	const struct conv_geom *g;
	const float *src;
	float *p;
	int64_t p0, np, K;
};

static void gather_patches(void *arg, int64_t r0, int64_t r1)
{
	const struct gather *j = arg;
	const struct conv_geom *g = j->g;
	for (int64_t r = r0; r < r1; r++) {
		int64_t b = r / j->np, pos = j->p0 + r % j->np, oy = pos / g->ow, ox = pos % g->ow, x0 = ox * g->sw - g->pl;
		/* the kernel columns that land inside the image: j in [jlo, jhi) */
		int64_t jlo, jhi;
		conv_inside(x0, g->dw, g->w, g->kw, &jlo, &jhi);
		float *prow = j->p + r * j->K;
		for (int64_t c = 0; c < g->c; c++)
			for (int64_t i = 0; i < g->kh; i++) {
				float *row = prow + (c * g->kh + i) * g->kw;
				int64_t iy = oy * g->sh + i * g->dh - g->pt;
				if (iy < 0 || iy >= g->h) {
					memset(row, 0, (size_t)g->kw * 4);
					continue;
				}
				const float *s = j->src + ((b * g->c + c) * g->h + iy) * g->w + x0;
				for (int64_t k = 0; k < jlo; k++)
					row[k] = 0;
				if (g->dw == 1 && g->kw > 16)
					memcpy(row + jlo, s + jlo, (size_t)(jhi - jlo) * 4);
				else if (g->dw == 1) /* short rows: a call would cost more */
					for (int64_t k = jlo; k < jhi; k++)
						row[k] = s[k];
				else
					for (int64_t k = jlo; k < jhi; k++)
						row[k] = s[k * g->dw];
				for (int64_t k = jhi; k < g->kw; k++)
					row[k] = 0;
			}
	}
}

/* Few output positions (a weight's gradient, the Conv of X^T with dY^T whose kernel is about as
 * large as the image, or a forward Conv on a 2x2 or 4x4 map): every image's patch at every
 * position gathered, P (n np, K) with K = c kh kw, and Y' (n np, m) = P W^T, one GEMM with a long
 * K for as many positions as about 16 MiB of patches hold, instead of im2col's n GEMMs of np
 * columns each. With `swapped` (the output may be written with its first two axes exchanged:
 * a weight gradient's, which a Transpose turns back) and all positions in one GEMM, Y (m, n np) =
 * W P^T is written, the weight gradient's own layout (as the GEMM gives it, or Y' transposed),
 * and *swapped set. -1 when out of memory. */
static int conv_positions(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct conv_geom *g,
			  float *y, int *swapped)
{
	int64_t K = g->c * g->kh * g->kw, np = g->oh * g->ow;
	int64_t per = (int64_t)((16u << 20) / ((size_t)(g->n * K) * 4 + 1)); /* positions a GEMM */
	per = per < 1 ? 1 : per > np ? np : per;
	/* with m < 256 rows, W P^T runs slower in OpenBLAS than P W^T and a transpose of that */
	int direct = swapped && per == np && g->m >= 256;
	size_t pb = (size_t)(per * g->n * K) * 4, ob = direct ? 0 : (size_t)(per * g->n * g->m) * 4;
	float *p = exec_scratch_raw(x, pb), *o = p && !direct ? exec_scratch_raw(x, ob) : NULL; /* written in full */
	if (!p || (!direct && !o)) {
		exec_scratch_free(x, p, pb);
		return -1;
	}
	const float *src = a->data;
	for (int64_t p0 = 0; p0 < np; p0 += per) {
		int64_t p1 = p0 + per < np ? p0 + per : np;
		struct gather j = {g, src, p, p0, p1 - p0, K};
		kernel_for(g->n * (p1 - p0), KERNEL_GRAIN / (K + 1) + 1, gather_patches, &j); /* K 0: no channels */
		if (direct) {
			blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g->m, (int)(g->n * np), (int)K, 1.0f,
				   (const float *)w->data, (int)K, p, (int)K, 0.0f, y, (int)(g->n * np));
			*swapped = 1;
			break;
		}
		blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(g->n * (p1 - p0)), (int)g->m, (int)K, 1.0f, p,
			   (int)K, (const float *)w->data, (int)K, 0.0f, o, (int)g->m);
		if (swapped && per == np) {
			transpose2(o, 1, g->n * np, g->m, 4, y);
			*swapped = 1;
			break;
		}
		for (int64_t b = 0; b < g->n; b++) /* o read in order; y written np apart */
			for (int64_t pos = p0; pos < p1; pos++) {
				const float *orow = o + (b * (p1 - p0) + pos - p0) * g->m;
				float *ycol = y + b * g->m * np + pos;
				for (int64_t m = 0; m < g->m; m++)
					ycol[m * np] = orow[m];
			}
	}
	exec_scratch_free(x, o, ob);
	exec_scratch_free(x, p, pb);
	return 0;
}

/* conv_positions at unit stride and dilation, without gathering patches: with the input padded to
 * (n, c, Hp, Wp) (and a tail) and the kernel widened to the same frame with zeros, (c', i, j) ->
 * k = (c' Hp + i) Wp + j, the patch at (oy, ox) is the padded image itself from k = oy Wp + ox on,
 * so Y[:, :, oy, ox] (n, m) = Xpad[:, oy Wp + ox ...] (n, K, rows Kp apart) Wwide^T (K, m) is one
 * GEMM per position on a shifted pointer. The terms outside the kernel meet zeros of Wwide. -1 when
 * out of memory. */
struct positions {
	const struct conv_geom *g;
	const float *xp, *ww;
	float *o, *y; /* o: each thread's (n, m) */
	int64_t K, kp;
};

/* Positions [p0, p1) of conv_positions_shifted: a piece of kernel_for. */
static void shifted_positions(void *arg, int64_t p0, int64_t p1)
{
	const struct positions *j = arg;
	const struct conv_geom *g = j->g;
	int64_t wp = g->w + g->pl + g->pr, np = g->oh * g->ow;
	float *o = j->o + pool_self() * g->n * g->m;
	for (int64_t pos = p0; pos < p1; pos++) {
		int64_t oy = pos / g->ow, ox = pos % g->ow;
		blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g->n, (int)g->m, (int)j->K, 1.0f, j->xp + oy * wp + ox,
			   (int)j->kp, j->ww, (int)j->K, 0.0f, o, (int)g->m);
		for (int64_t b = 0; b < g->n; b++)
			for (int64_t m = 0; m < g->m; m++)
				j->y[(b * g->m + m) * np + pos] = o[b * g->m + m];
	}
}

static int conv_positions_shifted(struct exec *x, const struct rtensor *a, const struct rtensor *w,
				  const struct conv_geom *g, float *y)
{
	int64_t hp = g->h + g->pt + g->pb, wp = g->w + g->pl + g->pr, K = g->c * hp * wp, np = g->oh * g->ow;
	int64_t kp = K + (g->oh - 1) * wp + g->ow; /* a row of Xpad with the tail the last shift reads */
	size_t xb = (size_t)(g->n * kp) * 4, wb = (size_t)(g->m * K) * 4, ob = (size_t)(g->n * g->m) * 4 * (size_t)pool_threads();
	float *xp = exec_scratch(x, xb), *ww = xp ? exec_scratch(x, wb) : NULL, *o = ww ? exec_scratch_raw(x, ob) : NULL;
	if (!o) {
		exec_scratch_free(x, ww, wb);
		exec_scratch_free(x, xp, xb);
		return -1;
	}
	const float *src = a->data, *wd = w->data; /* scratch is zeroed: only the image and the kernel are copied */
	for (int64_t b = 0; b < g->n; b++)
		for (int64_t c = 0; c < g->c; c++)
			for (int64_t r = 0; r < g->h; r++)
				memcpy(xp + b * kp + (c * hp + r + g->pt) * wp + g->pl, src + ((b * g->c + c) * g->h + r) * g->w,
				       (size_t)g->w * 4);
	for (int64_t m = 0; m < g->m; m++)
		for (int64_t c = 0; c < g->c; c++)
			for (int64_t i = 0; i < g->kh; i++)
				memcpy(ww + m * K + (c * hp + i) * wp, wd + ((m * g->c + c) * g->kh + i) * g->kw,
				       (size_t)g->kw * 4);
	struct positions j = {g, xp, ww, o, y, K, kp};
	kernel_for(np, 1, shifted_positions, &j);
	exec_scratch_free(x, o, ob);
	exec_scratch_free(x, ww, wb);
	exec_scratch_free(x, xp, xb);
	return 0;
}

/* Images [i0, i1) of a Conv by im2col and GEMM, in bands of n output rows: a piece of
 * kernel_for, each thread gathering patches into its own colb bytes of col. (A ConvTranspose's
 * images, col2im_images, take the same job, n there the columns' leading dimension.) */
struct conv_job {
	const struct conv_geom *g;
	const struct rtensor *a, *w;
	void *col, *y;
	size_t colb;
	int64_t n;
};

static void im2col_images(void *arg, int64_t i0, int64_t i1)
{
	const struct conv_job *j = arg;
	const struct conv_geom *g = j->g;
	const struct rtensor *a = j->a, *w = j->w;
	int64_t cg = g->c / g->group, mg = g->m / g->group, kk = cg * g->kh * g->kw, np = g->oh * g->ow;
	size_t es = dtype_size(a->dtype);
	uint8_t *col = (uint8_t *)j->col + pool_self() * j->colb;
	for (int64_t i = i0; i < i1; i++)
		for (int64_t gi = 0; gi < g->group; gi++) {
			const uint8_t *xi = (const uint8_t *)a->data + ((i * g->c + gi * cg) * g->h * g->w) * es;
			for (int64_t oy0 = 0; oy0 < g->oh; oy0 += j->n) {
				int64_t oy1 = oy0 + j->n < g->oh ? oy0 + j->n : g->oh, band = (oy1 - oy0) * g->ow;
				if (a->dtype == DT_FLOAT)
					im2col_float((const float *)xi, g, cg, oy0, oy1, (float *)col);
				else
					im2col_double((const double *)xi, g, cg, oy0, oy1, (double *)col);
				/* Y_g[:, band] (mg, band) = W_g (mg, kk) * col (kk, band), Y_g's rows np apart */
				if (a->dtype == DT_FLOAT)
					blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mg, (int)band, (int)kk, 1.0f,
						   (const float *)w->data + gi * mg * kk, (int)kk, (const float *)col, (int)band,
						   0.0f, (float *)j->y + (i * g->m + gi * mg) * np + oy0 * g->ow, (int)np);
				else
					blas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mg, (int)band, (int)kk, 1.0,
						   (const double *)w->data + gi * mg * kk, (int)kk, (const double *)col, (int)band,
						   0.0, (double *)j->y + (i * g->m + gi * mg) * np + oy0 * g->ow, (int)np);
			}
		}
}

/* Whether t is a view (a folded Transpose) of a row-major tensor with its first two axes
 * exchanged, which conv_direct reads as it is. */
static int swapped_view(const struct rtensor *t)
{
	int64_t inner = 1;
	for (int d = t->ndim - 1; d >= 2; d--) {
		if (t->vst[d] != inner)
			return 0;
		inner *= t->dims[d];
	}
	return t->ndim >= 3 && t->vst[0] == inner && t->vst[1] == t->dims[0] * inner;
}

static int conv_paths(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct rtensor *b,
		      const struct conv_geom *gp, uint8_t *y, int *swapped, struct rtensor *out);

/* The input or the kernel may be a view (exec.c's folded Transposes: a weight gradient's X^T and
 * dY^T): the direct kernel reads one that exchanges the first two axes in place, saving the
 * Transposes' copies; the other paths read copies. */
static int conv_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	if (in[0]->ndim > 4)
		return conv_nd_run(x, n, in, out, CONV_FORWARD);
	const struct rtensor *a = in[0], *w = in[1], *b = n->n_in > 2 ? in[2] : NULL;
	struct conv_geom g;
	if (conv_geometry(x, n, in, CONV_FORWARD, &g))
		return exec_status(x);
	int64_t dims[4];
	uint8_t *y = exec_alloc(x, out[0], a->dtype, conv_out_dims(&g, g.m, dims), dims);
	if (!y)
		return exec_status(x);
	int *swapped = a->dtype == DT_FLOAT && !b && exec_swap_ok(x, n->out[0]) ? &out[0]->swapped : NULL;
	struct rtensor copy[2];
	int rc = 0, direct = 1;
	for (int k = 0; k < 2 && !rc; k++) /* the views conv_direct cannot read, copied */
		if (in[k]->view && (a->dtype != DT_FLOAT || !swapped_view(in[k])) &&
		    !(rc = exec_materialize(x, in[k], &copy[k])))
			*(k ? &w : &a) = &copy[k];
	if (!rc && g.group > 1) { /* conv_group.c reads the views */
		direct = conv_group(x, a, w, &g, 0, y);
		rc = direct < 0 ? exec_status(x) : 0;
		if (!direct && b)
			add_bias(out[0], b, g.n, g.m, g.oh * g.ow);
	}
	if (!rc && direct > 0 && a->dtype == DT_FLOAT) {
		direct = conv_direct(x, a->data, w->data, (a->view ? CONV_A_SWAPPED : 0) | (w->view ? CONV_W_SWAPPED : 0),
				     &g, (float *)y, swapped);
		rc = direct < 0 ? exec_status(x) : 0;
		if (!direct && b)
			add_bias(out[0], b, g.n, g.m, g.oh * g.ow);
	}
	if (!rc && direct > 0 && a->dtype == DT_DOUBLE && !b) { /* float64: a weight gradient as one product */
		direct = conv_wgrad(x, a, w, &g, y, swapped);
		rc = direct < 0 ? exec_status(x) : 0;
	}
	for (int k = 0; k < 2 && !rc && direct > 0; k++) /* the rest, for the GEMM paths */
		if (in[k]->view && (k ? w : a) == in[k] && !(rc = exec_materialize(x, in[k], &copy[k])))
			*(k ? &w : &a) = &copy[k];
	rc = rc || direct <= 0 ? rc : conv_paths(x, a, w, b, &g, y, swapped, out[0]);
	if (a == &copy[0])
		exec_scratch_free(x, copy[0].data, copy[0].nbytes);
	if (w == &copy[1])
		exec_scratch_free(x, copy[1].data, copy[1].nbytes);
	return rc;
}

/* conv_run's GEMM paths, on row-major a and w. */
static int conv_paths(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct rtensor *b,
		      const struct conv_geom *gp, uint8_t *y, int *swapped, struct rtensor *out)
{
	struct conv_geom g = *gp;
	int64_t cg = g.c / g.group, kk = cg * g.kh * g.kw, np = g.oh * g.ow;
	size_t es = dtype_size(a->dtype);
	/* a weight's gradient (a kernel about as large as the image: a quarter of it or more; up to
	 * 8 x 8 positions for a kernel of 64 or more, the 7 x 7 stem's), or a forward Conv on a small
	 * map with enough channels for a long K: few positions */
	if (a->dtype == DT_FLOAT && g.group == 1 && (np <= 16 || (np <= 64 && g.kh * g.kw >= 64)) &&
	    (g.kh * g.kw >= 64 || 4 * g.kh * g.kw >= g.h * g.w || g.c * g.kh * g.kw >= 256)) {
		/* the padded image's frame costs (hp wp) / (kh kw) the FLOPs: worth it when that is near 1 */
		int64_t frame = (g.h + g.pt + g.pb) * (g.w + g.pl + g.pr);
		int unit = g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && 4 * frame <= 5 * g.kh * g.kw;
		if (unit ? conv_positions_shifted(x, a, w, &g, (float *)y)
			 : conv_positions(x, a, w, &g, (float *)y, swapped))
			return exec_status(x);
		if (b)
			add_bias(out, b, g.n, g.m, np);
		return 0;
	}
	if (a->dtype == DT_FLOAT && g.group == 1 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.kh * g.kw > 1 &&
	    g.c >= 16) { /* below 16 channels the K = C GEMMs are too thin: im2col is faster */
		if (conv_shifted(x, a, w, &g, (float *)y))
			return exec_status(x);
		if (b)
			add_bias(out, b, g.n, g.m, np);
		return 0;
	}
	/* bands of output rows whose patch matrix (about 2 MiB) stays in cache for the GEMM */
	int64_t rows = (int64_t)((2048u << 10) / ((size_t)kk * (size_t)g.ow * es + 1));
	rows = rows < 1 ? 1 : rows > g.oh ? g.oh : rows;
	size_t colb = (size_t)(kk * rows * g.ow) * es;
	uint8_t *col = exec_scratch_raw(x, colb * (size_t)pool_threads()); /* im2col writes it all */
	if (!col)
		return exec_status(x);
	struct conv_job j = {&g, a, w, col, y, colb, rows};
	kernel_for(g.n, 1, im2col_images, &j);
	colb *= (size_t)pool_threads();
	exec_scratch_free(x, col, colb);
	if (b)
		add_bias(out, b, g.n, g.m, np);
	return 0;
}

/* Images [i0, i1) of a ConvTranspose (g in col2im's terms: the output image is its input): with a
 * the ConvTranspose's input, each thread makes the image's columns W_g^T X_g in its own colb bytes
 * of col; without, the float32 columns are already in col, image i's from column i np on, n (the
 * leading dimension) apart. A piece of kernel_for. */
static void col2im_images(void *arg, int64_t i0, int64_t i1)
{
	const struct conv_job *j = arg;
	const struct conv_geom *g = j->g;
	int64_t cg = g->c / g->group, mg = g->m / g->group, kk = mg * g->kh * g->kw, np = g->oh * g->ow, plane = g->h * g->w;
	if (!j->a) {
		for (int64_t i = i0; i < i1; i++)
			col2im_float((const float *)j->col + i * np, j->n, g, mg, (float *)j->y + i * g->m * plane);
		return;
	}
	size_t es = dtype_size(j->a->dtype);
	uint8_t *col = (uint8_t *)j->col + pool_self() * j->colb;
	for (int64_t i = i0; i < i1; i++)
		for (int64_t gi = 0; gi < g->group; gi++) {
			/* col (Mg*kh*kw, H*W) = W_g^T, W_g stored (Cg, Mg*kh*kw), times X_g (Cg, H*W) */
			conv_gemm(j->a->dtype, 1, kk, np, cg, (const uint8_t *)j->w->data + gi * cg * kk * es,
				(const uint8_t *)j->a->data + ((i * g->c + gi * cg) * np) * es, col);
			uint8_t *yi = (uint8_t *)j->y + ((i * g->m + gi * mg) * plane) * es;
			if (j->a->dtype == DT_FLOAT)
				col2im_float((const float *)col, np, g, mg, (float *)yi);
			else
				col2im_double((const double *)col, np, g, mg, (double *)yi);
		}
}

static int conv_transpose_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			      struct rtensor *const *out)
{
	if (in[0]->ndim > 4)
		return conv_nd_run(x, n, in, out, CONV_TRANSPOSE);
	const struct rtensor *a = in[0], *w = in[1], *b = n->n_in > 2 ? in[2] : NULL;
	struct conv_geom g; /* g.h, g.w: the *output* image, which col2im fills; ih, iw: the input */
	if (conv_geometry(x, n, in, CONV_TRANSPOSE, &g))
		return exec_status(x);
	int64_t mg = g.m / g.group;
	int64_t ih = g.h, iw = g.w, dims[4];
	uint8_t *y = exec_alloc_zero(x, out[0], a->dtype, conv_out_dims(&g, g.m, dims), dims); /* col2im accumulates */
	if (!y)
		return exec_status(x);
	/* in col2im terms the output image is the "input" and the ConvTranspose input the "patches" */
	struct conv_geom cg2 = g;
	cg2.h = g.oh, cg2.w = g.ow, cg2.oh = ih, cg2.ow = iw;
	int64_t kk = mg * g.kh * g.kw, np = ih * iw;
	size_t es = dtype_size(a->dtype), colb = (size_t)(kk * np) * es;
	int r = g.group > 1 ? conv_group(x, a, w, &g, 1, y) : 1;
	if (r <= 0) {
		if (!r && b)
			add_bias(out[0], b, g.n, g.m, g.oh * g.ow);
		return r ? exec_status(x) : 0;
	}
	if (a->dtype == DT_FLOAT && g.sh == 1 && g.sw == 1) {
		/* at stride 1, the Conv of the input with the kernel flipped and its channel axes
		 * exchanged, padded so that every tap that meets the input counts */
		struct conv_geom d = g;
		d.h = ih, d.w = iw, d.oh = g.oh, d.ow = g.ow;
		d.pt = g.dh * (g.kh - 1) - g.pt, d.pl = g.dw * (g.kw - 1) - g.pl;
		r = conv_direct(x, a->data, w->data, CONV_FLIP, &d, (float *)y, NULL);
		if (r < 0)
			return exec_status(x);
		if (!r) {
			if (b)
				add_bias(out[0], b, g.n, g.m, g.oh * g.ow);
			return 0;
		}
	}
	if (a->dtype == DT_FLOAT && g.group == 1 && np < 64 && g.n > 1 && colb * (size_t)g.n <= (16u << 20)) {
		/* small maps: every image's columns made by one GEMM, col (kk, n np) = W^T (kk, c) X^T,
		 * X regrouped as (c, n np); then col2im per image from its block of columns */
		size_t xtb = (size_t)(g.c * g.n * np) * 4, allb = colb * (size_t)g.n;
		float *xt = exec_scratch(x, xtb), *all = xt ? exec_scratch(x, allb) : NULL;
		if (!all) {
			exec_scratch_free(x, xt, xtb);
			return exec_status(x);
		}
		for (int64_t i = 0; i < g.n; i++)
			for (int64_t c = 0; c < g.c; c++)
				memcpy(xt + (c * g.n + i) * np, (const float *)a->data + (i * g.c + c) * np, (size_t)np * 4);
		blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)kk, (int)(g.n * np), (int)g.c, 1.0f, w->data,
			   (int)kk, xt, (int)(g.n * np), 0.0f, all, (int)(g.n * np));
		struct conv_job j = {&cg2, NULL, NULL, all, y, 0, g.n * np};
		kernel_for(g.n, 1, col2im_images, &j);
		exec_scratch_free(x, all, allb);
		exec_scratch_free(x, xt, xtb);
		if (b)
			add_bias(out[0], b, g.n, g.m, g.oh * g.ow);
		return 0;
	}
	uint8_t *col = exec_scratch(x, colb * (size_t)pool_threads());
	if (!col)
		return exec_status(x);
	struct conv_job j = {&cg2, a, w, col, y, colb, np};
	kernel_for(g.n, 1, col2im_images, &j);
	colb *= (size_t)pool_threads();
	exec_scratch_free(x, col, colb);
	if (b)
		add_bias(out[0], b, g.n, g.m, g.oh * g.ow);
	return 0;
}

/* ---- gradient rules ---- */
int conv_geom_of(struct ad *a, const struct node *n, int transpose, struct conv_geom *g)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]), *ys = ad_shape(a, n->out[0]);
	if (xs->ndim != 4 && xs->ndim != 3)
		return ad_fail(a, "X must be (N, C, spatial...)");
	memset(g, 0, sizeof *g);
	g->one_d = xs->ndim == 3;
	g->n = xs->dims[0], g->c = xs->dims[1], g->h = g->one_d ? 1 : xs->dims[2], g->w = xs->dims[xs->ndim - 1];
	if (n->op == OP_CONV || n->op == OP_CONV_TRANSPOSE) {
		const struct rtensor *ws = ad_shape(a, n->in[1]);
		g->kh = g->one_d ? 1 : ws->dims[2], g->kw = ws->dims[ws->ndim - 1];
	} else {
		size_t k;
		const int64_t *ks = attr_ints(n, "kernel_shape", &k);
		g->kh = g->one_d ? 1 : ks[0], g->kw = ks[k - 1];
	}
	if (ints2(n, "strides", 1, g->one_d, &g->sh, &g->sw) || ints2(n, "dilations", 1, g->one_d, &g->dh, &g->dw) ||
	    pads_of(n, g))
		return ad_fail(a, "bad strides, dilations or pads");
	g->oh = g->one_d ? 1 : ys->dims[2], g->ow = ys->dims[ys->ndim - 1];
	g->group = attr_int(n, "group", 1);
	size_t no;
	if (transpose && attr_ints(n, "output_shape", &no)) {
		/* the pads window() chose; an output past the taps (negative total) is cut by the
		 * floor of the Conv that differentiates it, while less than a stride */
		int64_t oph = 0, opw = 0;
		ints2(n, "output_padding", 0, g->one_d, &oph, &opw);
		int64_t th = g->sh * (g->h - 1) + oph + g->dh * (g->kh - 1) + 1 - g->oh;
		int64_t tw = g->sw * (g->w - 1) + opw + g->dw * (g->kw - 1) + 1 - g->ow;
		if (oph - th >= g->sh || opw - tw >= g->sw) /* output_padding is length past the taps too */
			return ad_fail(a, "output_shape reaches a stride or more past the input's taps");
		int upper = attr_str_is(n, "auto_pad", "SAME_UPPER", 0);
		g->pt = th < 0 ? 0 : upper ? th / 2 : th - th / 2, g->pb = th < 0 ? 0 : th - g->pt;
		g->pl = tw < 0 ? 0 : upper ? tw / 2 : tw - tw / 2, g->pr = tw < 0 ? 0 : tw - g->pl;
		return 0;
	}
	if (!attr_str_is(n, "auto_pad", "NOTSET", 1) || transpose) {
		/* recover the pads the kernel chose: run its rule again on the inferred sizes */
		struct conv_geom t = *g;
		(void)t;
		if (!attr_str_is(n, "auto_pad", "NOTSET", 1)) {
			int64_t ekh = g->dh * (g->kh - 1) + 1, ekw = g->dw * (g->kw - 1) + 1;
			int64_t th = transpose ? g->sh * (g->h - 1) + ekh - g->oh : (g->oh - 1) * g->sh + ekh - g->h;
			int64_t tw = transpose ? g->sw * (g->w - 1) + ekw - g->ow : (g->ow - 1) * g->sw + ekw - g->w;
			th = th > 0 ? th : 0;
			tw = tw > 0 ? tw : 0;
			int lower = attr_str_is(n, "auto_pad", "SAME_LOWER", 0);
			if (attr_str_is(n, "auto_pad", "VALID", 0))
				th = tw = 0;
			g->pt = lower ? th - th / 2 : th / 2, g->pb = th - g->pt;
			g->pl = lower ? tw - tw / 2 : tw / 2, g->pr = tw - g->pl;
		}
	}
	int64_t oph = 0, opw = 0;
	/* output_padding past the pads is length past the input's taps: cut by the floor of the Conv
	 * that differentiates it only while less than a stride */
	if (transpose && !ints2(n, "output_padding", 0, g->one_d, &oph, &opw) &&
	    (oph - g->pt - g->pb >= g->sh || opw - g->pl - g->pr >= g->sw))
		return ad_fail(a, "output_padding reaches a stride or more past the input's taps");
	return 0;
}

int conv_set_window(struct ad *a, struct node *c, const struct conv_geom *g, int64_t sh, int64_t sw, int64_t dh,
		    int64_t dw, int64_t group)
{
	/* dilations of 1 are every window op's default, and AveragePool takes none before opset 19 */
	int64_t pads[4] = {g->pt, g->pl, g->pb, g->pr}, st[2] = {sh, sw}, dl[2] = {dh, dw};
	return ad_set_ints(a, c, "pads", pads, 4) || ad_set_ints(a, c, "strides", st, 2) ||
	       ((dh != 1 || dw != 1) && ad_set_ints(a, c, "dilations", dl, 2)) ||
	       (group != 1 && ad_set_int(a, c, "group", group));
}

static struct value *transpose01(struct ad *a, struct value *v)
{
	static const int64_t perm[4] = {1, 0, 2, 3};
	struct value *t = ad_op1(a, "Transpose", v);
	return t && !ad_set_ints(a, ad_producer(t), "perm", perm, 4) ? t : NULL;
}

/* The leading kh x kw window of a (., ., kh', kw') result. */
static struct value *crop_kernel(struct ad *a, struct value *v, int64_t kh, int64_t kw)
{
	int64_t st[2] = {0, 0}, en[2] = {kh, kw}, ax[2] = {2, 3};
	struct value *ins[4] = {v, ad_ints(a, st, 2), ad_ints(a, en, 2), ad_ints(a, ax, 2)};
	return ins[1] && ins[2] && ins[3] ? ad_op(a, "Slice", ins, 4) : NULL;
}

/* The window of dW's Conv (weight_grad): g's, but where a stride leaves the padded input longer
 * than the kernel's reach, the Conv's output would be kh' x kw', larger than the kernel. The end
 * pads are cut by the extra rows and columns they cover, so that the Conv computes none of them
 * (a stride-2 3 x 3 conv on an even map: 16/9 of the work, and its output cropped by a copy);
 * what they do not cover (an input row no window reads) is left to crop_kernel. *exact: the
 * output is then kh x kw (sizes known, none symbolic). */
static void grad_window(struct ad *a, const struct conv_geom *g, struct conv_geom *t, int *exact)
{
	*t = *g;
	*exact = 0;
	if (ad_dim_symbolic(a, g->h) || ad_dim_symbolic(a, g->w) || ad_dim_symbolic(a, g->oh) ||
	    ad_dim_symbolic(a, g->ow))
		return;
	int64_t kh = (g->h + g->pt + g->pb - (g->sh * (g->oh - 1) + 1)) / g->dh + 1;
	int64_t kw = (g->w + g->pl + g->pr - (g->sw * (g->ow - 1) + 1)) / g->dw + 1;
	int64_t rh = kh - g->kh < g->pb / g->dh ? kh - g->kh : g->pb / g->dh;
	int64_t rw = kw - g->kw < g->pr / g->dw ? kw - g->kw : g->pr / g->dw;
	t->pb -= rh > 0 ? rh * g->dh : 0;
	t->pr -= rw > 0 ? rw * g->dw : 0;
	*exact = kh - (rh > 0 ? rh : 0) == g->kh && kw - (rw > 0 ? rw : 0) == g->kw;
}

/* dW of a window op with group 1: a convolution of one operand by the other, batch as channels.
 * Conv: dW (M,C,i,j) = sum_n,oy,ox g[n,m,oy,ox] x[n,c,oy*s+i*d-p]: Conv(x^T, g^T, stride d,
 * dilation s) transposed. ConvTranspose is the same with x and g swapped. */
static struct value *weight_grad(struct ad *a, struct value *in, struct value *kernel, const struct conv_geom *g)
{
	struct conv_geom w, sub = *g;
	int exact;
	if (g->kh == 1 && g->kw == 1 && !g->pt && !g->pl && !g->pb && !g->pr && (g->sh > 1 || g->sw > 1)) {
		/* a strided 1 x 1 window (a downsampling shortcut) reads every sh-th row only: the input
		 * subsampled, (OH, OW) = (ceil(H / sh), ceil(W / sw)), at stride 1; else the Conv would
		 * compute sh sw outputs a weight and crop_kernel keep one (4x the work at stride 2) */
		int64_t st[2] = {0, 0}, en[2] = {INT64_MAX, INT64_MAX}, ax[2] = {2, 3}, sp[2] = {g->sh, g->sw};
		struct value *si[5] = {in, ad_ints(a, st, 2), ad_ints(a, en, 2), ad_ints(a, ax, 2), ad_ints(a, sp, 2)};
		in = si[1] && si[2] && si[3] && si[4] ? ad_op(a, "Slice", si, 5) : NULL;
		sub.h = g->oh, sub.w = g->ow, sub.sh = sub.sw = 1;
		g = &sub;
	}
	struct value *ins[2] = {in ? transpose01(a, in) : NULL, transpose01(a, kernel)};
	struct value *c = ins[0] && ins[1] ? ad_op(a, "Conv", ins, 2) : NULL;
	grad_window(a, g, &w, &exact);
	if (!c || conv_set_window(a, ad_producer(c), &w, g->dh, g->dw, g->sh, g->sw, 1))
		return NULL;
	/* a Slice of everything would copy the whole weight gradient */
	struct value *t = transpose01(a, c);
	return exact ? t : crop_kernel(a, t, g->kh, g->kw);
}

static struct value *reshape_to(struct ad *a, struct value *v, const int64_t *dims, size_t n)
{
	return ad_op2(a, "Reshape", v, ad_ints(a, dims, n));
}

static struct value *transpose_perm(struct ad *a, struct value *v, const int64_t *perm, size_t n)
{
	struct value *t = ad_op1(a, "Transpose", v);
	return t && !ad_set_ints(a, ad_producer(t), "perm", perm, n) ? t : NULL;
}

/* Grouped weight gradients in one Conv, whatever the group count G. `in` holds the image-side
 * channels (in_ch = G ci; g->h x g->w), `k` the kernel-side ones (k_ch = G co; g->oh x g->ow); the result is (G co, ci, kh, kw),
 * group g's kernels being weight_grad of its own channels. Batch becomes channels, as in
 * weight_grad: the image (1, G ci N, H, W) ordered (g, c, n), and a kernel per (g, c, j), the
 * kernel side's channel g co + j over the batch (repeated for each c: Expand), in G ci groups. The
 * result (1, G ci co, kh', kw') ordered (g, c, j) is reordered to (g, j, c). Reshapes use -1 for
 * the batch, so a symbolic batch needs no Shape arithmetic. */
static struct value *grouped_weight_grad(struct ad *a, struct value *in, int64_t in_ch, struct value *k, int64_t k_ch,
					 const struct conv_geom *g)
{
	int64_t G = g->group, ci = in_ch / G, co = k_ch / G;
	int64_t xd[4] = {1, -1, g->h, g->w};
	struct value *x = reshape_to(a, transpose01(a, in), xd, 4);
	struct value *w = transpose01(a, k); /* (G co, N, OH, OW) */
	if (ci > 1) {
		int64_t wd[6] = {G, 1, co, -1, g->oh, g->ow}, rep[6] = {1, ci, 1, 1, 1, 1};
		int64_t flat[4] = {G * ci * co, -1, g->oh, g->ow};
		w = reshape_to(a, ad_op2(a, "Expand", reshape_to(a, w, wd, 6), ad_ints(a, rep, 6)), flat, 4);
	}
	struct value *ins[2] = {x, w};
	struct value *c = x && w ? ad_op(a, "Conv", ins, 2) : NULL;
	struct conv_geom win;
	int exact;
	grad_window(a, g, &win, &exact);
	if (!c || conv_set_window(a, ad_producer(c), &win, g->dh, g->dw, g->sh, g->sw, G * ci))
		return NULL;
	/* (1, G ci co, kh', kw') -> (G, ci, co, kh', kw') -> (G, co, ci, kh', kw') -> (G co, ci, kh', kw') */
	int64_t kh = (g->h + win.pt + win.pb - (g->sh * (g->oh - 1) + 1)) / g->dh + 1;
	int64_t kw = (g->w + win.pl + win.pr - (g->sw * (g->ow - 1) + 1)) / g->dw + 1;
	int64_t d5[5] = {G, ci, co, kh, kw}, p5[5] = {0, 2, 1, 3, 4}, d4[4] = {G * co, ci, kh, kw};
	struct value *r = ci > 1 ? transpose_perm(a, reshape_to(a, c, d5, 5), p5, 5) : c;
	r = reshape_to(a, r, d4, 4);
	return exact ? r : crop_kernel(a, r, g->kh, g->kw);
}

struct value *conv_lift(struct ad *a, struct value *v, const struct conv_geom *g)
{
	int64_t ax = 2;
	return g->one_d && v ? ad_op2(a, "Unsqueeze", v, ad_ints(a, &ax, 1)) : v;
}

struct value *conv_drop(struct ad *a, struct value *v, const struct conv_geom *g)
{
	int64_t ax = 2;
	return g->one_d && v ? ad_op2(a, "Squeeze", v, ad_ints(a, &ax, 1)) : v;
}

static int give_bias(struct ad *a, const struct node *n, struct value *gy)
{
	if (n->n_in < 3 || !ad_wants(a, n->in[2]))
		return 0;
	static const int64_t axes[3] = {0, 2, 3};
	return ad_give(a, n->in[2], ad_reduce(a, "ReduceSum", gy, axes, 3, 0));
}

/* Conv: dX = ConvTranspose(g, W) with the output padding that restores X's size */
static int conv_grad(struct ad *a, const struct node *n)
{
	if (ad_shape(a, n->in[0])->ndim > 4)
		return conv_nd_grad(a, n);
	struct conv_geom g;
	if (conv_geom_of(a, n, 0, &g))
		return -1;
	struct value *gy = conv_lift(a, ad_dy(a, n->out[0]), &g);
	if (ad_wants(a, n->in[0])) {
		int64_t full_h = g.sh * (g.oh - 1) + g.dh * (g.kh - 1) + 1 - g.pt - g.pb;
		int64_t full_w = g.sw * (g.ow - 1) + g.dw * (g.kw - 1) + 1 - g.pl - g.pr;
		int64_t op[2] = {g.h - full_h, g.w - full_w};
		struct value *ins[2] = {gy, conv_lift(a, n->in[1], &g)};
		struct value *dx = ad_op(a, "ConvTranspose", ins, 2);
		if (!dx || conv_set_window(a, ad_producer(dx), &g, g.sh, g.sw, g.dh, g.dw, g.group) ||
		    ((op[0] || op[1]) && ad_set_ints(a, ad_producer(dx), "output_padding", op, 2)) ||
		    ad_give(a, n->in[0], conv_drop(a, dx, &g)))
			return -1;
	}
	struct value *x = ad_wants(a, n->in[1]) ? conv_lift(a, n->in[0], &g) : NULL;
	if (x && ad_give(a, n->in[1], conv_drop(a, g.group == 1 ? weight_grad(a, x, gy, &g)
						     : grouped_weight_grad(a, x, g.c, gy, ad_shape(a, n->out[0])->dims[1], &g),
				       &g)))
		return -1;
	return give_bias(a, n, gy);
}

/* ConvTranspose: dX = Conv(g, W) (its adjoint); dW as for Conv with the operands swapped */
static int conv_transpose_grad(struct ad *a, const struct node *n)
{
	if (ad_shape(a, n->in[0])->ndim > 4)
		return conv_nd_grad(a, n);
	struct conv_geom g;
	if (conv_geom_of(a, n, 1, &g))
		return -1;
	struct value *gy = conv_lift(a, ad_dy(a, n->out[0]), &g);
	if (ad_wants(a, n->in[0])) {
		struct value *ins[2] = {gy, conv_lift(a, n->in[1], &g)};
		struct value *dx = ad_op(a, "Conv", ins, 2);
		if (!dx || conv_set_window(a, ad_producer(dx), &g, g.sh, g.sw, g.dh, g.dw, g.group) ||
		    ad_give(a, n->in[0], conv_drop(a, dx, &g)))
			return -1;
	}
	if (ad_wants(a, n->in[1])) {
		/* the image side is g (the larger output), the kernel side x */
		struct conv_geom gt = g;
		gt.h = g.oh, gt.w = g.ow, gt.oh = g.h, gt.ow = g.w;
		int64_t m = ad_shape(a, n->out[0])->dims[1];
		struct value *x = conv_lift(a, n->in[0], &g);
		if (ad_give(a, n->in[1], conv_drop(a, g.group == 1 ? weight_grad(a, gy, x, &gt)
							   : grouped_weight_grad(a, gy, m, x, g.c, &gt),
					      &g)))
			return -1;
	}
	return give_bias(a, n, gy);
}

/* Conv: 2 * (output elements) * (C/group) * kh * kw; ConvTranspose: 2 * (input elements) * (M/group)
 * * kh * kw. */
static void conv_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		      uint64_t *bytes)
{
	(void)n;
	(void)bytes;
	const struct rtensor *w = in[1];
	*flops = 2 * (uint64_t)out[0]->numel * (uint64_t)(w->numel / (w->dims[0] ? w->dims[0] : 1));
}

static void conv_transpose_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
				uint64_t *flops, uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	const struct rtensor *w = in[1];
	*flops = 2 * (uint64_t)in[0]->numel * (uint64_t)(w->numel / (w->dims[0] ? w->dims[0] : 1));
}

const struct op_impl op_conv = {.run = conv_run, .cost = conv_cost, .grad = conv_grad, .recompute = RC_EXPENSIVE, .bf16_since = 22};
const struct op_impl op_conv_transpose = {.run = conv_transpose_run, .cost = conv_transpose_cost, .grad = conv_transpose_grad, .recompute = RC_EXPENSIVE, .bf16_since = 22};
