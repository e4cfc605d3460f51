/* resize.c - Resize (nn.Upsample, F.interpolate) and Upsample (opsets 7-9, deprecated): nearest,
 * linear and cubic, with every coordinate transformation (half_pixel, pytorch_half_pixel,
 * align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize over roi) and nearest_mode,
 * cubic_coeff_a and exclude_outside. ONNX Resize (opset 11+): inputs X, roi, scales, sizes; an
 * output dimension is sizes[i], or floor(X's dimension x scales[i]) (x (roi end - start) for
 * tf_crop_and_resize). Resize-10 (X, scales) and Upsample (scales an input from opset 9, an
 * attribute before) are the asymmetric transformation with nearest_mode floor.
 *
 * Where scales are given, the transformations read the axis's resized length as the unrounded
 * X's dimension x scale, as the spec's formulas (and ONNX's reference) do: align_corners at
 * scale 0.6 over 4 elements divides by 2.4 - 1, not by the 2 outputs less 1.
 *
 * Resize is separable and linear: along each axis, output index o reads up to four input indices
 * with weights (nearest: one; linear: two; cubic: four, Keys' kernel with cubic_coeff_a, indices
 * clamped to the edge as ONNX and PyTorch do). One rule, axis_map, gives them to the kernel and to
 * the gradient, where the axis's map becomes its matrix A (out x in): dX = A_h^T g A_w, two MatMuls
 * with constant matrices, exact in every mode. */
#include "../autodiff/ad.h"
#include "../util/pool.h"
#include "../util/xalloc.h"
#include "kernel.h"
#include "simd.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

struct resize_mode {
	int linear, cubic;
	double a; /* cubic_coeff_a */
	int coord; /* enum below */
	int nearest; /* enum below */
	int exclude; /* exclude_outside: cubic taps outside the input weigh 0, the rest renormalised */
	double extrapolation; /* tf_crop_and_resize's value where the roi reaches outside the input */
	int old; /* Upsample or Resize-10: scales as input 1 (or Upsample-7's attribute), no roi */
};

enum { CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_HALF_PIXEL_NN, CT_TF_CROP };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL };

/* The node's mode (opset: the model's default-domain one); -1 (and *why) for what graphdiet does
 * not do. */
static int resize_mode(const struct node *n, int opset, struct resize_mode *m, const char **why)
{
	static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
					     "tf_half_pixel_for_nn", "tf_crop_and_resize"};
	static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
	memset(m, 0, sizeof *m);
	m->old = n->op == OP_UPSAMPLE || opset < 11;
	if (!attr_str_is(n, "mode", "nearest", 1)) {
		m->linear = attr_str_is(n, "mode", "linear", 0) || (m->old && attr_str_is(n, "mode", "bilinear", 0));
		m->cubic = !m->old && attr_str_is(n, "mode", "cubic", 0);
		if (!m->linear && !m->cubic)
			return *why = m->old ? "mode must be nearest or linear" : "mode must be nearest, linear or cubic", -1;
		m->a = attr_float(n, "cubic_coeff_a", -0.75f);
	}
	if (m->old) {
		m->coord = CT_ASYMMETRIC, m->nearest = NM_FLOOR;
		return 0;
	}
	m->coord = -1;
	for (int i = 0; i < 6; i++)
		if (attr_str_is(n, "coordinate_transformation_mode", coords[i], i == CT_HALF_PIXEL))
			m->coord = i;
	m->nearest = -1;
	for (int i = 0; i < 4; i++)
		if (attr_str_is(n, "nearest_mode", nearest[i], i == NM_ROUND_PREFER_FLOOR))
			m->nearest = i;
	if (m->coord < 0)
		return *why = "unsupported coordinate_transformation_mode", -1;
	if (m->nearest < 0)
		return *why = "unsupported nearest_mode", -1;
	m->exclude = attr_int(n, "exclude_outside", 0) != 0;
	m->extrapolation = attr_float(n, "extrapolation_value", 0);
	if (attr_int(n, "antialias", 0) || !attr_str_is(n, "keep_aspect_ratio_policy", "stretch", 1))
		return *why = "antialias and keep_aspect_ratio_policy other than stretch are not supported", -1;
	return 0;
}

/* One axis: `in` elements resized to `out`, at scale s; len is the resized length the coordinate
 * transformations read (in x s where scales are given, else out); [r0, r1] the roi's part. */
struct axis {
	int64_t in, out;
	double s, len, r0, r1;
};

/* What output index o of an axis reads: taps; outside when tf_crop_and_resize's coordinate falls
 * off the input (the output is then the extrapolation value). */
struct taps {
	int n, outside;
	int64_t i[4];
	double w[4];
};

static void axis_map(const struct resize_mode *m, const struct axis *ax, int64_t o, struct taps *t)
{
	double x, s = ax->s, len = ax->len;
	int64_t in = ax->in;
	switch (m->coord) {
	case CT_HALF_PIXEL: x = ((double)o + 0.5) / s - 0.5; break;
	case CT_PYTORCH_HALF_PIXEL: x = len > 1 ? ((double)o + 0.5) / s - 0.5 : 0; break;
	case CT_ALIGN_CORNERS: x = len > 1 ? (double)o * (double)(in - 1) / (len - 1) : 0; break;
	case CT_ASYMMETRIC: x = (double)o / s; break;
	case CT_TF_CROP:
		x = len > 1 ? ax->r0 * (double)(in - 1) + (double)o * (ax->r1 - ax->r0) * (double)(in - 1) / (len - 1)
			    : 0.5 * (ax->r0 + ax->r1) * (double)(in - 1);
		break;
	default: x = ((double)o + 0.5) / s; break;
	}
	t->outside = m->coord == CT_TF_CROP && (x < 0 || x > (double)(in - 1));
	/* a coordinate far off the input (a roi of 1e300, NaN) reads its edge either way: kept to
	 * where the taps are integers (the cubic weights sum to 1 wherever x is) */
	x = !(x > -8) ? -8 : x > (double)in + 8 ? (double)in + 8 : x;
	if (m->cubic) { /* Keys: |d| <= 1: (a+2)|d|^3 - (a+3)|d|^2 + 1; 1 < |d| < 2: a|d|^3 - 5a|d|^2 + 8a|d| - 4a */
		double f = floor(x), a = m->a, sum = 0;
		t->n = 4;
		for (int k = 0; k < 4; k++) {
			double d = fabs(x - (f - 1 + k));
			int64_t i = (int64_t)f - 1 + k;
			t->i[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
			t->w[k] = d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
			if (m->exclude && (i < 0 || i >= in))
				t->w[k] = 0;
			sum += t->w[k];
		}
		for (int k = 0; m->exclude && sum != 0 && k < 4; k++)
			t->w[k] /= sum;
		return;
	}
	t->n = 1;
	t->w[0] = 1;
	if (!m->linear) {
		double f = floor(x), fr = x - f;
		int64_t k = m->nearest == NM_FLOOR ? (int64_t)f
			    : m->nearest == NM_CEIL ? (int64_t)ceil(x)
			    : fr == 0.5 ? (int64_t)(m->nearest == NM_ROUND_PREFER_FLOOR ? f : f + 1)
					: (int64_t)floor(x + 0.5);
		t->i[0] = k < 0 ? 0 : k >= in ? in - 1 : k;
		return;
	}
	if (x < 0)
		x = 0;
	int64_t k = (int64_t)floor(x);
	if (k >= in - 1) {
		t->i[0] = in - 1;
		return;
	}
	t->n = 2;
	t->i[0] = k;
	t->i[1] = k + 1;
	t->w[1] = x - (double)k;
	t->w[0] = 1 - t->w[1];
}

/* The axes of a node over its inputs in[] (run-time tensors, or autodiff's shapes with constant
 * data), r of them: from sizes, or from scales (an input, or Upsample-7's attribute), and the roi,
 * which hold an entry (roi two) per axis, or per axis of the `axes` attribute (opset 18; the others
 * kept as they are). -1 and *why when they are bad. */
static int resize_axes(const struct node *n, const struct resize_mode *m, const struct rtensor *const *in, int r,
		       const int64_t *xd, struct axis *ax, const char **why)
{
	const struct rtensor *got = NULL, *roi = NULL, *scales = NULL, *sizes = NULL;
#define GIVEN(k) (n->n_in > (k) && in[k] && in[k]->numel ? in[k] : NULL)
	if (m->old) {
		scales = GIVEN(1);
	} else {
		roi = GIVEN(1), scales = GIVEN(2), sizes = GIVEN(3);
	}
#undef GIVEN
	const struct attr *sa = m->old && !scales ? node_attr(n, "scales") : NULL;
	if (sa && (sa->type != ATTR_FLOATS || sa->n != (size_t)r))
		return *why = "the scales attribute must have a float for every dimension", -1;
	if (!sa && !scales == !sizes)
		return *why = m->old ? "scales must be given" : "exactly one of scales and sizes must be given", -1;
	got = scales ? scales : sizes;
	size_t na;
	const int64_t *axv = m->old ? NULL : attr_ints(n, "axes", &na);
	int nk = axv ? (int)na : r, at[RT_MAX_DIMS]; /* axis i's entry, or -1 */
	for (int i = 0; i < r; i++)
		at[i] = axv ? -1 : i;
	for (int k = 0; axv && k < nk; k++) {
		int64_t i = axv[k] < 0 ? axv[k] + r : axv[k];
		if (i < 0 || i >= r || at[i] >= 0)
			return *why = "axes must be distinct axes of X", -1;
		at[i] = k;
	}
	if (got && got->numel != nk)
		return *why = "scales or sizes must have an element for every axis resized", -1;
	if (got && !got->data)
		return *why = "scales or sizes must be known (bind the symbolic dimensions with --dim)", -1;
	int crop = m->coord == CT_TF_CROP;
	if (crop && roi && (roi->numel != 2 * nk || !roi->data))
		return *why = "roi must be known and have 2 elements for every axis resized", -1;
	for (int i = 0; i < r; i++) {
		int k = at[i];
		double v = k < 0 ? (sizes ? (double)xd[i] : 1) : sa ? sa->floats[k] : rt_get(got, k);
		if (!(v > 0) || v > 1e6)
			return *why = "scales and sizes must be positive", -1;
		ax[i].in = xd[i];
		ax[i].r0 = crop && roi && k >= 0 ? rt_get(roi, k) : 0;
		ax[i].r1 = crop && roi && k >= 0 ? rt_get(roi, k + nk) : 1;
		double o = sizes ? v : floor((double)xd[i] * v * (ax[i].r1 - ax[i].r0));
		if (!isfinite(o) || o > 0x1p62)
			return *why = "the roi makes an output size that is not a number below 2^62", -1;
		ax[i].out = (int64_t)o;
		ax[i].s = sizes ? (double)ax[i].out / (double)(xd[i] ? xd[i] : 1) : v;
		ax[i].len = sizes ? (double)ax[i].out : (double)xd[i] * v;
		if (ax[i].out < 0)
			return *why = "the roi makes an empty output", -1;
	}
	return 0;
}

/* ---- the typed fast path ----
 * float32 and float64 where every axis but the last two reads one tap of weight 1, any others of
 * weight 0 (the batch and channel axes, kept or resized by nearest): the output is then, plane by
 * plane, the last two axes' sum of the generic loop, term for term in its order (rows' taps outer,
 * columns' inner), each weight the product wh x ww of the same doubles (1 x .. x 1 x wh x ww is
 * wh x ww exactly), a term of weight 0 left out (added as +0, which changes no sum that starts at
 * +0: it is never -0), in double, rounded once to the dtype. The columns' taps are laid out once
 * per call, padded with taps of weight 0 to the most any column reads, their indices in 32 bits
 * (which GCC gathers: 64-bit indices of float32 rows left the loop scalar). Per row, a block of
 * RS_BLOCK outputs is summed tap by tap (vectorised across the outputs), or a row of 2 x 2 taps (or
 * 1 x 2) in one pass: float32 on AVX-512 its taps permuted out of 16 inputs loaded at a time
 * (rs_perm_f32, with the next row when it reads the same input rows) where 16 outputs read no
 * more, else over its two input rows' column taps widened once (rs_wide_rows); nearest copies a
 * row whose source row is the row above's. bench_roofline, 8x64x24x24 x2, 1 thread: nearest 36 ->
 * 0.30 ms, bilinear 309 -> 1.4 -> 1.13 (widened) -> 0.97 (permuted) -> 0.80 ms (two rows a pass). */
#define RS_BLOCK 256

struct rs_job {
	const void *x;
	void *y;
	int f64;
	int64_t in_h, in_w, out_h, out_w, nw; /* nw: taps per column (1, 2 or 4) */
	int64_t outer_r, outer_dims[RT_MAX_DIMS], outer_st[RT_MAX_DIMS];
	const struct taps *outer_tp[RT_MAX_DIMS], *rows; /* rows: out_h taps (one of weight 1 when rank 1) */
	const int32_t *ci; /* [k][out_w] column indices (the rows are under 2^31 long) */
	const double *cw;  /* [k][out_w] column weights */
	int nearest;       /* every tap one of weight 1: each output is +0 + its one input */
	double *wide;      /* 4 out_w doubles a thread (rs_wide_rows), or NULL: the tap loop */
	int32_t *base;     /* float32 on AVX-512: per 16 outputs, the first of the 16 inputs their taps read (rs_perm_f32) */
};

/* acc[o] += wh ww_k[o] x row[ci_k[o]] for the outputs of one row (a term of weight 0 adds +0) */
VM_CLONES static void rs_terms_f32(double *restrict acc, const float *restrict row, const int32_t *restrict ci,
				    const double *restrict cw, double wh, int64_t n)
{
	for (int64_t o = 0; o < n; o++) {
		double w = wh * cw[o], t = w * (double)row[ci[o]];
		acc[o] += w != 0 ? t : 0.0;
	}
}

VM_CLONES static void rs_terms_f64(double *restrict acc, const double *restrict row, const int32_t *restrict ci,
				    const double *restrict cw, double wh, int64_t n)
{
	for (int64_t o = 0; o < n; o++) {
		double w = wh * cw[o], t = w * row[ci[o]];
		acc[o] += w != 0 ? t : 0.0;
	}
}

/* A row of linear or bilinear outputs (two column taps each; rows of one tap: h1 0 and e1 = e0):
 * the four terms of an output in the generic loop's order, (row 0, col 0), (0, 1), (1, 0), (1, 1),
 * from +0, in one pass, over the rows' column taps widened once (rs_widen: e[o] and e[ow + o] the
 * input row's elements that output o's two column taps read, in double, which is exact), so each
 * output row reads contiguous doubles rather than gathering its four elements (an input row of an
 * upscale x2 serves about two output rows). */
#define RS_BILINEAR(name, T)                                                                                        \
	VM_CLONES static void name(T *restrict y, const double *restrict e00, const double *restrict e01,           \
				   const double *restrict e10, const double *restrict e11, const double *restrict w0,    \
				   const double *restrict w1, double h0, double h1, int64_t n)                           \
	{                                                                                                            \
		for (int64_t o = 0; o < n; o++) {                                                                    \
			double a = h0 * w0[o], b = h0 * w1[o], c = h1 * w0[o], d = h1 * w1[o], s = 0;                \
			double ta = a * e00[o], tb = b * e01[o], tc = c * e10[o], td = d * e11[o];                    \
			s += a != 0 ? ta : 0.0;                                                                       \
			s += b != 0 ? tb : 0.0;                                                                       \
			s += c != 0 ? tc : 0.0;                                                                       \
			s += d != 0 ? td : 0.0;                                                                       \
			y[o] = (T)s;                                                                                  \
		}                                                                                                    \
	}
RS_BILINEAR(rs_bilinear_f32, float)
RS_BILINEAR(rs_bilinear_f64, double)
#undef RS_BILINEAR

#ifdef SIMD_X86
/* RS_BILINEAR's float32 rows on AVX-512 where each 16 outputs' column taps read 16 inputs from
 * base[b] on: those loaded once per pair of input rows and each tap's elements permuted out of
 * them (no gather, no widened copy), for `rows` output rows (1 or 2, ys apart) that read the same
 * two input rows with weights h[2 q], h[2 q + 1]; the four terms as RS_BILINEAR has them, 8
 * outputs a vector (the weights' products and the sum in double; a term of weight 0 left out,
 * which is RS_BILINEAR's "+ 0.0": a sum from +0 is never -0). */
static SIMD_TARGET void rs_perm_f32(float *y, int64_t ys, int rows, const double *h, const float *r0, const float *r1,
				    const int32_t *c0, const int32_t *c1, const int32_t *base, const double *w0,
				    const double *w1, int64_t n, int64_t in_w)
{
	const __m512d zero = _mm512_setzero_pd();
	for (int64_t o0 = 0, b = 0; o0 < n; o0 += 16, b++) {
		int64_t m = n - o0 < 16 ? n - o0 : 16;
		__mmask16 lm = simd_lanes(m), ld = simd_lanes(in_w - base[b]);
		__m512i at = _mm512_set1_epi32(base[b]);
		__m512i i0 = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(lm, c0 + o0), at);
		__m512i i1 = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(lm, c1 + o0), at);
		__m512 x0 = _mm512_maskz_loadu_ps(ld, r0 + base[b]), x1 = _mm512_maskz_loadu_ps(ld, r1 + base[b]);
		__m512 e[4] = {_mm512_permutexvar_ps(i0, x0), _mm512_permutexvar_ps(i1, x0), _mm512_permutexvar_ps(i0, x1),
			       _mm512_permutexvar_ps(i1, x1)};
		__m256 half[2][2];
		for (int hf = 0; hf < 2; hf++) {
			__mmask8 wm = (__mmask8)(lm >> (8 * hf));
			__m512d wv0 = _mm512_maskz_loadu_pd(wm, w0 + o0 + 8 * hf), wv1 = _mm512_maskz_loadu_pd(wm, w1 + o0 + 8 * hf), ev[4];
			for (int k = 0; k < 4; k++)
				ev[k] = _mm512_cvtps_pd(hf ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e[k]), 1))
							   : _mm512_castps512_ps256(e[k]));
			for (int q = 0; q < rows; q++) {
				__m512d vh0 = _mm512_set1_pd(h[2 * q]), vh1 = _mm512_set1_pd(h[2 * q + 1]);
				__m512d w[4] = {_mm512_mul_pd(vh0, wv0), _mm512_mul_pd(vh0, wv1), _mm512_mul_pd(vh1, wv0),
						_mm512_mul_pd(vh1, wv1)};
				__m512d sum = zero;
				for (int k = 0; k < 4; k++)
					sum = _mm512_mask_add_pd(sum, _mm512_cmp_pd_mask(w[k], zero, _CMP_NEQ_UQ), sum,
								 _mm512_mul_pd(w[k], ev[k]));
				half[q][hf] = _mm512_cvtpd_ps(sum);
			}
		}
		for (int q = 0; q < rows; q++) {
			__m512d f = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(half[q][0])), _mm256_castps_pd(half[q][1]), 1);
			_mm512_mask_storeu_ps(y + q * ys + o0, lm, _mm512_castpd_ps(f));
		}
	}
}

/* rs_perm_f32's base (ow / 16 rounded up of them, from ci's two taps of ow columns), or NULL where a
 * block's taps span more than 16 inputs, the processor lacks AVX-512 or memory is short */
static int32_t *rs_perm_base(const int32_t *ci, int64_t ow)
{
	if (!simd_avx512())
		return NULL;
	int32_t *base = xmalloc((size_t)((ow + 15) / 16 + 1) * sizeof *base);
	for (int64_t o0 = 0; base && o0 < ow; o0 += 16) {
		int32_t lo = INT32_MAX, hi = 0;
		for (int64_t o = o0; o < ow && o < o0 + 16; o++)
			for (int k = 0; k < 2; k++) {
				int32_t c = ci[k * ow + o];
				lo = c < lo ? c : lo;
				hi = c > hi ? c : hi;
			}
		if (hi - lo >= 16) {
			xfree(base);
			return NULL;
		}
		base[o0 / 16] = lo;
	}
	return base;
}
#endif

/* e[o] = row[ci[o]] in double, o < n */
VM_CLONES static void rs_widen_f32(double *restrict e, const float *restrict row, const int32_t *restrict ci, int64_t n)
{
	for (int64_t o = 0; o < n; o++)
		e[o] = (double)row[ci[o]];
}

VM_CLONES static void rs_widen_f64(double *restrict e, const double *restrict row, const int32_t *restrict ci, int64_t n)
{
	for (int64_t o = 0; o < n; o++)
		e[o] = row[ci[o]];
}

/* The widened column taps of input rows i0 and i1 of plane xp in *e0 and *e1: two slots of 2 ow
 * doubles at wide, slot[k] the row slot k holds (-1: none), a row widened when no slot holds it,
 * into the slot the other row does not need. */
static void rs_wide_rows(const struct rs_job *j, const uint8_t *xp, double *wide, int64_t *slot, int64_t i0, int64_t i1,
			 const double **e0, const double **e1)
{
	int64_t ow = j->out_w, want[2] = {i0, i1}, es = j->f64 ? 8 : 4;
	int at[2];
	for (int k = 0; k < 2; k++)
		at[k] = slot[0] == want[k] ? 0 : slot[1] == want[k] ? 1 : -1;
	for (int k = 0; k < 2; k++) {
		if (at[k] >= 0)
			continue;
		at[k] = at[1 - k] == 0 ? 1 : 0;
		slot[at[k]] = want[k];
		double *e = wide + at[k] * 2 * ow;
		const uint8_t *row = xp + want[k] * j->in_w * es;
		for (int c = 0; c < 2; c++)
			if (j->f64)
				rs_widen_f64(e + c * ow, (const double *)row, j->ci + c * ow, ow);
			else
				rs_widen_f32(e + c * ow, (const float *)row, j->ci + c * ow, ow);
		if (i0 == i1)
			at[1] = at[0];
	}
	*e0 = wide + at[0] * 2 * ow;
	*e1 = wide + at[1] * 2 * ow;
}

VM_CLONES static void rs_row_f32(float *restrict y, const float *restrict row, const int32_t *restrict ci, int64_t n)
{
	for (int64_t o = 0; o < n; o++)
		y[o] = 0.0f + row[ci[o]];
}

VM_CLONES static void rs_row_f64(double *restrict y, const double *restrict row, const int32_t *restrict ci, int64_t n)
{
	for (int64_t o = 0; o < n; o++)
		y[o] = 0.0 + row[ci[o]];
}

/* The one input a tap set reads: a tap of weight 1 among taps of weight 0 (whose terms the generic
 * loop leaves out: their product with the other axes' weights is 0); -1 when it is no such set. */
static int64_t rs_one_tap(const struct taps *t)
{
	int64_t at = -1;
	for (int k = 0; k < t->n; k++) {
		if (t->w[k] == 1 && at < 0)
			at = t->i[k];
		else if (t->w[k] != 0)
			return -1;
	}
	return at;
}

static void rs_planes(void *arg, int64_t p0, int64_t p1)
{
	const struct rs_job *j = arg;
	int64_t oh = j->out_h, ow = j->out_w, es = j->f64 ? 8 : 4;
	double acc[RS_BLOCK], *wide = j->wide ? j->wide + pool_self() * 4 * ow : NULL;
	for (int64_t p = p0; p < p1; p++) {
		int64_t src = 0, rest = p, slot[2] = {-1, -1};
		for (int i = (int)j->outer_r - 1; i >= 0; i--) {
			src += rs_one_tap(&j->outer_tp[i][rest % j->outer_dims[i]]) * j->outer_st[i];
			rest /= j->outer_dims[i];
		}
		const uint8_t *xp = (const uint8_t *)j->x + src * es;
		uint8_t *yp = (uint8_t *)j->y + p * oh * ow * es;
		for (int64_t r = 0; r < oh; r++) {
			const struct taps *t = &j->rows[r];
			uint8_t *yr = yp + r * ow * es;
			if (j->nearest) {
				if (r && t->i[0] == j->rows[r - 1].i[0]) { /* the row above's source: its bits */
					memcpy(yr, yr - ow * es, (size_t)(ow * es));
					continue;
				}
				const uint8_t *xr = xp + t->i[0] * j->in_w * es;
				if (j->f64)
					rs_row_f64((double *)yr, (const double *)xr, j->ci, ow);
				else
					rs_row_f32((float *)yr, (const float *)xr, j->ci, ow);
				continue;
			}
#ifdef SIMD_X86
			if (t->n <= 2 && j->nw == 2 && j->base) { /* with the next row where it reads the same rows */
				const struct taps *u = r + 1 < oh ? t + 1 : NULL;
				int rows = u && u->n == t->n && u->i[0] == t->i[0] && u->i[u->n - 1] == t->i[t->n - 1] ? 2 : 1;
				double h[4] = {t->w[0], t->n == 2 ? t->w[1] : 0, u ? u->w[0] : 0, u && u->n == 2 ? u->w[1] : 0};
				const float *x0 = (const float *)xp + t->i[0] * j->in_w, *x1 = (const float *)xp + t->i[t->n - 1] * j->in_w;
				rs_perm_f32((float *)yr, ow, rows, h, x0, x1, j->ci, j->ci + ow, j->base, j->cw, j->cw + ow, ow, j->in_w);
				r += rows - 1;
				continue;
			}
#endif
			if (t->n <= 2 && j->nw == 2 && wide) { /* a row of one tap: its terms and +0s */
				const double *e0, *e1;
				double h1 = t->n == 2 ? t->w[1] : 0;
				rs_wide_rows(j, xp, wide, slot, t->i[0], t->i[t->n - 1], &e0, &e1);
				if (j->f64)
					rs_bilinear_f64((double *)yr, e0, e0 + ow, e1, e1 + ow, j->cw, j->cw + ow, t->w[0], h1, ow);
				else
					rs_bilinear_f32((float *)yr, e0, e0 + ow, e1, e1 + ow, j->cw, j->cw + ow, t->w[0], h1, ow);
				continue;
			}
			for (int64_t o0 = 0; o0 < ow; o0 += RS_BLOCK) {
				int64_t nb = ow - o0 < RS_BLOCK ? ow - o0 : RS_BLOCK;
				for (int64_t o = 0; o < nb; o++)
					acc[o] = 0;
				for (int kh = 0; kh < t->n; kh++) {
					const uint8_t *xr = xp + t->i[kh] * j->in_w * es;
					for (int64_t k = 0; k < j->nw; k++) {
						const int32_t *ci = j->ci + k * ow + o0;
						const double *cw = j->cw + k * ow + o0;
						if (j->f64)
							rs_terms_f64(acc, (const double *)xr, ci, cw, t->w[kh], nb);
						else
							rs_terms_f32(acc, (const float *)xr, ci, cw, t->w[kh], nb);
					}
				}
				if (j->f64)
					memcpy(yr + o0 * es, acc, (size_t)nb * sizeof *acc);
				else
					for (int64_t o = 0; o < nb; o++)
						((float *)yr)[o0 + o] = (float)acc[o];
			}
		}
	}
}

/* The typed fast path over y (allocated) when the dtype and the taps allow it: 1 when it ran, 0
 * when the generic loop is to run, -1 out of memory. */
static int resize_fast(const struct rtensor *a, struct rtensor *y, const struct taps *tp, const int64_t *off)
{
	int r = a->ndim, f64 = a->dtype == DT_DOUBLE;
	if ((a->dtype != DT_FLOAT && !f64) || r < 1 || !y->numel || a->dims[r - 1] > INT32_MAX)
		return 0;
	struct rs_job j = {.x = a->data, .y = y->data, .f64 = f64, .outer_r = r > 2 ? r - 2 : 0, .nearest = 1};
	static const struct taps one = {.n = 1, .w = {1}};
	int64_t st[RT_MAX_DIMS], planes = 1;
	c_strides(r, a->dims, st);
	for (int i = 0; i < r; i++) {
		int last = i == r - 1, row = r >= 2 && i == r - 2;
		for (int64_t o = 0; o < y->dims[i]; o++) {
			const struct taps *t = &tp[off[i] + o];
			if (t->outside || (!last && !row && rs_one_tap(t) < 0))
				return 0;
			if (last && t->n > j.nw)
				j.nw = t->n;
			for (int k = 0; k < t->n; k++)
				j.nearest &= t->n == 1 && t->w[k] == 1;
		}
		if (!last && !row) {
			j.outer_dims[i] = y->dims[i], j.outer_st[i] = st[i], j.outer_tp[i] = &tp[off[i]];
			planes *= y->dims[i];
		}
	}
	j.in_w = a->dims[r - 1], j.out_w = y->dims[r - 1];
	j.in_h = r >= 2 ? a->dims[r - 2] : 1, j.out_h = r >= 2 ? y->dims[r - 2] : 1;
	j.rows = r >= 2 ? &tp[off[r - 2]] : &one;
	int32_t *ci = xcalloc((size_t)(j.nw * j.out_w) + 1, sizeof *ci);
	double *cw = xcalloc((size_t)(j.nw * j.out_w) + 1, sizeof *cw);
	if (!ci || !cw) {
		xfree(ci);
		xfree(cw);
		return -1;
	}
	for (int64_t o = 0; o < j.out_w; o++) { /* taps past a column's own: its first, weight 0 */
		const struct taps *t = &tp[off[r - 1] + o];
		for (int64_t k = 0; k < j.nw; k++) {
			ci[k * j.out_w + o] = (int32_t)t->i[k < t->n ? k : 0];
			cw[k * j.out_w + o] = k < t->n ? t->w[k] : 0;
		}
	}
	j.ci = ci, j.cw = cw;
#ifdef SIMD_X86
	if (!j.nearest && j.nw == 2 && !f64)
		j.base = rs_perm_base(ci, j.out_w);
#endif
	if (!j.nearest && j.nw == 2 && !j.base) /* none: the tap loop, the same sums */
		j.wide = xmalloc((size_t)pool_threads() * (size_t)(4 * j.out_w) * sizeof *j.wide);
	int64_t per = j.out_h * j.out_w;
	kernel_for(planes, per ? (KERNEL_GRAIN + per - 1) / per : planes, rs_planes, &j);
	xfree(ci);
	xfree(cw);
	xfree(j.wide);
	xfree(j.base);
	return 1;
}

static int resize_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	struct resize_mode m;
	const char *why;
	int64_t dims[RT_MAX_DIMS];
	struct axis axs[RT_MAX_DIMS];
	if (resize_mode(n, exec_opset(x), &m, &why))
		return exec_fail(x, "%s", why);
	if (want_float(x, a, "X"))
		return exec_status(x);
	if (resize_axes(n, &m, (const struct rtensor *const *)in, a->ndim, a->dims, axs, &why))
		return exec_fail(x, "%s", why);
	int64_t outs = 1;
	for (int i = 0; i < a->ndim; i++)
		dims[i] = axs[i].out, outs *= axs[i].out ? 1 : 0;
	if (!a->numel && outs) /* no element for the taps to read (they read outside X: garbage) */
		return exec_fail(x, "X is empty but the output is not: there is nothing to resize");
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, dims))
		return exec_status(x);
	const struct rtensor *y = out[0];
	if (!y->numel) /* nothing to compute; the taps' table, one entry per output index of each axis,
			* could still be huge (an axis of 0 beside one of 10^9: 13 GB, which fuzz_pipeline met) */
		return 0;
	/* per axis, each output index's taps */
	int64_t total = 0, off[RT_MAX_DIMS];
	for (int i = 0; i < a->ndim; i++) {
		off[i] = total;
		total += dims[i];
	}
	struct taps *tp = xcalloc((size_t)total + 1, sizeof *tp);
	if (!tp)
		return exec_fail(x, "out of memory");
	for (int i = 0; i < a->ndim; i++)
		for (int64_t o = 0; o < dims[i]; o++)
			axis_map(&m, &axs[i], o, &tp[off[i] + o]);
	int fast = resize_fast(a, out[0], tp, off);
	if (fast) {
		xfree(tp);
		return fast < 0 ? exec_fail(x, "out of memory") : 0;
	}
	int64_t st[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	c_strides(a->ndim, a->dims, st);
	for (int64_t e = 0; e < y->numel; e++) {
		/* the sum over every combination of the axes' taps (a mixed-radix counter) */
		const struct taps *ax[RT_MAX_DIMS];
		int c[RT_MAX_DIMS] = {0}, outside = 0;
		for (int i = 0; i < a->ndim; i++) {
			ax[i] = &tp[off[i] + idx[i]];
			outside |= ax[i]->outside;
		}
		double v = outside ? m.extrapolation : 0;
		while (!outside) {
			double cw = 1;
			int64_t at = 0;
			for (int i = 0; i < a->ndim; i++) {
				cw *= ax[i]->w[c[i]];
				at += ax[i]->i[c[i]] * st[i];
			}
			if (cw != 0)
				v += cw * rt_get(a, at);
			int i = a->ndim - 1;
			while (i >= 0 && ++c[i] == ax[i]->n)
				c[i--] = 0;
			if (i < 0)
				break;
		}
		rt_set(out[0], e, v);
		for (int i = a->ndim - 1; i >= 0 && ++idx[i] == dims[i]; i--)
			idx[i] = 0;
	}
	xfree(tp);
	return 0;
}

/* The (out x in) matrix of an axis, or its transpose, as a constant of dtype (a row of zeros where
 * the output is tf_crop_and_resize's extrapolation value, which X does not move). */
static struct value *axis_matrix(struct ad *a, const struct resize_mode *m, const struct axis *ax, int dt,
				 int transposed)
{
	int64_t in = ax->in, out = ax->out;
	double *v = xcalloc((size_t)(in * out) + 1, sizeof *v);
	if (!v)
		return ad_fail(a, "out of memory"), NULL;
	for (int64_t o = 0; o < out; o++) {
		struct taps t;
		axis_map(m, ax, o, &t);
		for (int k = 0; k < t.n && !t.outside; k++)
			v[transposed ? t.i[k] * out + o : o * in + t.i[k]] += t.w[k];
	}
	int64_t dims[2] = {transposed ? in : out, transposed ? out : in};
	struct value *c = ad_tensor(a, dt, 2, dims, v);
	xfree(v);
	return c;
}

/* dX = A_h^T g A_w. An output tf_crop_and_resize extrapolates on any axis is a constant: that
 * axis's matrix row is zero, so the product's term is zero too, exactly as in the kernel. */
static int resize_grad(struct ad *a, const struct node *n)
{
	struct resize_mode m;
	const char *why;
	if (resize_mode(n, ad_opset(a), &m, &why))
		return ad_fail(a, "%s", why);
	const struct rtensor *xs = ad_shape(a, n->in[0]), *ins[4] = {xs, NULL, NULL, NULL};
	for (uint32_t k = 1; k < n->n_in && k < 4; k++)
		ins[k] = n->in[k] ? ad_shape(a, n->in[k]) : NULL;
	int r = xs->ndim;
	struct axis axs[RT_MAX_DIMS];
	if (resize_axes(n, &m, ins, r, xs->dims, axs, &why))
		return ad_fail(a, "%s", why);
	struct value *g = ad_dy(a, n->out[0]);
	for (int i = 0; i < r; i++) {
		if (axs[i].in == axs[i].out && (m.coord == CT_TF_CROP ? axs[i].r0 == 0 && axs[i].r1 == 1 : axs[i].s == 1))
			continue; /* the identity */
		if (ad_dim_symbolic(a, axs[i].in) || ad_dim_symbolic(a, axs[i].out))
			return ad_fail(a, "cannot differentiate a Resize along a symbolic dimension");
		/* last axis: g (.., out) A (out x in); the one before: A^T (in x out) g (.., out, W);
		 * an earlier one (a volume's depth) exchanged with the last, as the last, and back */
		int64_t perm[RT_MAX_DIMS];
		for (int k = 0; k < r; k++)
			perm[k] = k == i ? r - 1 : k == r - 1 ? i : k;
		struct value *t = i < r - 2 ? ad_op1(a, "Transpose", g) : g;
		if (i < r - 2 && (!t || ad_set_ints(a, ad_producer(t), "perm", perm, (size_t)r)))
			return -1;
		struct value *mat = axis_matrix(a, &m, &axs[i], xs->dtype, i == r - 2);
		g = i != r - 2 ? ad_op2(a, "MatMul", t, mat) : ad_op2(a, "MatMul", mat, g);
		if (i < r - 2 && (!(g = ad_op1(a, "Transpose", g)) || ad_set_ints(a, ad_producer(g), "perm", perm, (size_t)r)))
			return -1;
		if (!g)
			return -1;
	}
	return ad_give(a, n->in[0], g);
}

/* Each output is the sum of T terms, T the product over the axes of the taps each reads (nearest
 * 1, linear 2, cubic 4; 1 on an axis kept at its size): 2 FLOPs a term (its weight, its product
 * added), none for nearest. Bytes: the output written, and the input read once, or only the
 * elements the taps reach when that is less (a downscale), plus roi, scales and sizes. */
static void resize_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			uint64_t *bytes)
{
	const struct rtensor *a = in[0], *y = out[0];
	uint64_t taps = attr_str_is(n, "mode", "cubic", 0) ? 4 : attr_str_is(n, "mode", "nearest", 1) ? 1 : 2, t = 1;
	for (int i = 0; i < a->ndim && i < y->ndim; i++)
		t *= a->dims[i] == y->dims[i] ? 1 : taps;
	uint64_t read = (uint64_t)y->numel * t * dtype_size(a->dtype);
	*flops = t > 1 ? 2 * t * (uint64_t)y->numel : 0;
	*bytes = (uint64_t)y->nbytes + (read < a->nbytes ? read : (uint64_t)a->nbytes);
	for (uint32_t k = 1; k < n->n_in; k++)
		*bytes += in[k] ? in[k]->nbytes : 0;
}

const struct op_impl op_resize = {.run = resize_run, .cost = resize_cost, .grad = resize_grad, .recompute = RC_CHEAP,
				  .nodiff = ~1u};
const struct op_impl op_upsample = {.run = resize_run, .cost = resize_cost, .grad = resize_grad, .recompute = RC_CHEAP,
				    .nodiff = ~1u};
