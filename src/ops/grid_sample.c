/* grid_sample.c - GridSample (F.grid_sample, the sampler of a spatial transformer): CPU kernel,
 * shape rule, cost and gradient rule.
 *
 * X is (N, C, D1 .. Dr), grid (N, O1 .. Or, r), Y (N, C, O1 .. Or): Y[n, c, o] samples X[n, c] at
 * the normalized point grid[n, o] in [-1, 1]^r, whose component k is the coordinate along spatial
 * axis r - 1 - k (x is the width). Opset 16 has r = 2 and modes bilinear, nearest, bicubic; opset
 * 20 names them linear, nearest, cubic and allows any r: both spellings are read at any opset.
 *
 * The semantics are PyTorch's (aten/src/ATen/native/GridSampler.h), which ONNX's spec and test data
 * follow. Along each axis of size S the point is unnormalized, c = (g + 1)(S - 1) / 2 with
 * align_corners, else ((g + 1) S - 1) / 2; linear and nearest then pad the coordinate (border: clip
 * to [0, S - 1]; reflection: reflect about the edges, -0.5 and S - 0.5 without align_corners, 0 and
 * S - 1 with it, then clip), and read the taps around it (nearest: round half to even), a tap
 * outside X reading zero. Cubic (Keys, A = -0.75) reads the 4 taps around the unpadded coordinate,
 * each tap's index padded by itself. So every axis gives up to 4 taps (index, weight w(c), dw/dc)
 * and dc/dg (the unnormalize scale times the padding's 0 or +-1), and a point reads the product of
 * its axes' taps: Y = sum over tap combinations of prod_a w_a X[idx].
 *
 * The gradient is that sum differentiated, in standard ONNX ops (see grid_sample_grad): dX scatters
 * prod_a w_a dY to the taps (ScatterND, reduction add, into X turned channels-last), and dgrid sums
 * dY X[idx] dw_a/dc prod_(b != a) w_b dc/dg over the channels and taps (GatherND). Nearest's dgrid is zero, as
 * in PyTorch. The kernel computes in double whatever the float dtype. */
#include "../autodiff/ad.h"
#include "../util/xalloc.h"
#include "kernel.h"
#include "simd.h"

#include <math.h>
#include <string.h>

enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

struct gs_mode {
	int interp, pad, align;
};

static const char *const gs_pad_names[] = {"zeros", "border", "reflection"};

static int gs_mode(const struct node *n, struct gs_mode *m, const char **why)
{
	m->interp = attr_str_is(n, "mode", "nearest", 0)                                       ? GS_NEAREST
		    : attr_str_is(n, "mode", "bilinear", 1) || attr_str_is(n, "mode", "linear", 0) ? GS_LINEAR
		    : attr_str_is(n, "mode", "bicubic", 0) || attr_str_is(n, "mode", "cubic", 0)  ? GS_CUBIC
												    : -1;
	m->pad = -1;
	for (int i = 0; i < 3; i++)
		if (attr_str_is(n, "padding_mode", gs_pad_names[i], i == GS_ZEROS))
			m->pad = i;
	m->align = attr_int(n, "align_corners", 0) != 0;
	if (m->interp < 0)
		return *why = "mode must be bilinear, nearest or bicubic (linear, nearest or cubic)", -1;
	if (m->pad < 0)
		return *why = "padding_mode must be zeros, border or reflection", -1;
	return 0;
}

/* c clipped to [0, size - 1]; *d: its derivative (0 where clipped, as PyTorch's). */
static double gs_clip(double c, int64_t size, double *d)
{
	double hi = (double)(size - 1);
	*d = c > 0 && c < hi ? 1 : 0;
	return c <= 0 ? 0 : c >= hi ? hi : c;
}

/* c reflected into [lo2 / 2, hi2 / 2] (twice the bounds, as PyTorch's reflect_coordinates); *d: +-1. */
static double gs_reflect(double c, double lo2, double hi2, double *d)
{
	*d = 0;
	if (lo2 == hi2)
		return 0;
	double lo = lo2 / 2, span = (hi2 - lo2) / 2, s = 1;
	c -= lo;
	if (c < 0) {
		s = -1;
		c = -c;
	}
	double extra = fmod(c, span);
	int odd = fmod(floor(c / span), 2) != 0;
	*d = odd ? -s : s;
	return odd ? span - extra + lo : extra + lo;
}

/* The padded coordinate of c along an axis of size (border, reflection), its derivative in *d. */
static double gs_pad(const struct gs_mode *m, double c, int64_t size, double *d)
{
	*d = 1;
	if (m->pad == GS_ZEROS)
		return c;
	double dr = 1, dc;
	if (m->pad == GS_REFLECTION)
		c = m->align ? gs_reflect(c, 0, 2 * (double)(size - 1), &dr) : gs_reflect(c, -1, 2 * (double)size - 1, &dr);
	c = gs_clip(c, size, &dc);
	*d = dr * dc;
	return c;
}

/* What one axis of a point reads: taps (index, or -1 for a zero; weight; weight's derivative in
 * the coordinate) and the coordinate's derivative in the grid value. */
struct gs_taps {
	int n;
	int64_t i[4];
	double w[4], dw[4];
	double dc;
};

/* Keys' cubic convolution weights for a point t in [0, 1) past the second of 4 taps, A = -0.75:
 * |x| <= 1: ((A + 2)|x| - (A + 3))x^2 + 1; 1 < |x| < 2: ((A|x| - 5A)|x| + 8A)|x| - 4A. */
static void gs_cubic(double t, double *w, double *dw)
{
	const double A = -0.75;
#define GS_K1(x) (((A + 2) * (x) - (A + 3)) * (x) * (x) + 1)
#define GS_K1D(x) ((3 * (A + 2) * (x) - 2 * (A + 3)) * (x))
#define GS_K2(x) ((((A * (x)) - 5 * A) * (x) + 8 * A) * (x) - 4 * A)
#define GS_K2D(x) ((3 * A * (x) - 10 * A) * (x) + 8 * A)
	w[0] = GS_K2(t + 1);
	w[1] = GS_K1(t);
	w[2] = GS_K1(1 - t);
	w[3] = GS_K2(2 - t);
	dw[0] = GS_K2D(t + 1);
	dw[1] = GS_K1D(t);
	dw[2] = -GS_K1D(1 - t);
	dw[3] = -GS_K2D(2 - t);
#undef GS_K1
#undef GS_K1D
#undef GS_K2
#undef GS_K2D
}

static void gs_axis(const struct gs_mode *m, double g, int64_t size, struct gs_taps *t)
{
	double c = m->align ? (g + 1) / 2 * (double)(size - 1) : ((g + 1) * (double)size - 1) / 2;
	t->dc = m->align ? (double)(size - 1) / 2 : (double)size / 2;
	if (m->interp == GS_CUBIC) {
		double f = floor(c), d;
		gs_cubic(c - f, t->w, t->dw);
		t->n = 4;
		for (int k = 0; k < 4; k++) {
			double at = gs_pad(m, f - 1 + k, size, &d);
			t->i[k] = at >= 0 && at < (double)size ? (int64_t)at : -1;
		}
		return;
	}
	double d;
	c = gs_pad(m, c, size, &d);
	t->dc *= d;
	if (m->interp == GS_NEAREST) {
		double r = nearbyint(c);
		t->n = 1;
		t->i[0] = r >= 0 && r < (double)size ? (int64_t)r : -1;
		t->w[0] = 1;
		t->dw[0] = 0;
		return;
	}
	double f = floor(c);
	t->n = 2;
	for (int k = 0; k < 2; k++) {
		double at = f + k;
		t->i[k] = at >= 0 && at < (double)size ? (int64_t)at : -1;
	}
	t->w[1] = c - f;
	t->w[0] = 1 - t->w[1];
	t->dw[0] = -1;
	t->dw[1] = 1;
}

/* The shapes: r spatial axes; the output's dims into odims. */
static int gs_shape(struct exec *x, const struct rtensor *xs, const struct rtensor *gs, int *r, int64_t *odims)
{
	if (want_float(x, xs, "X") || want_float(x, gs, "grid"))
		return exec_status(x);
	*r = xs->ndim - 2;
	if (*r < 1)
		return exec_fail(x, "X must be (N, C, D1 .. Dr), not of rank %d", xs->ndim);
	if (gs->ndim != xs->ndim || gs->dims[gs->ndim - 1] != *r || gs->dims[0] != xs->dims[0])
		return exec_fail(x, "grid must be (N, O1 .. O%d, %d) with X's N = %lld", *r, *r, (long long)xs->dims[0]);
	odims[0] = xs->dims[0];
	odims[1] = xs->dims[1];
	for (int i = 0; i < *r; i++)
		odims[2 + i] = gs->dims[1 + i];
	return 0;
}

/* The walk over one point's tap combinations, shared by the kernel and the gradient. */
struct gs_point {
	int r;
	struct gs_taps t[RT_MAX_DIMS];
	int64_t st[RT_MAX_DIMS]; /* X's spatial strides */
};

/* Point p (n, o) of the grid: its taps along each axis. */
static void gs_point_taps(const struct gs_mode *m, const struct rtensor *xs, const struct rtensor *grid, int64_t p,
			  struct gs_point *pt)
{
	for (int a = 0; a < pt->r; a++)
		gs_axis(m, rt_get(grid, p * pt->r + (pt->r - 1 - a)), xs->dims[2 + a], &pt->t[a]);
}

/* The next tap combination (a mixed-radix counter c): its spatial offset in *at (-1: a zero tap)
 * and weight; 0 after the last. */
static int gs_next(const struct gs_point *pt, int *c, int64_t *at, double *w)
{
	int a = pt->r - 1;
	while (a >= 0 && ++c[a] == pt->t[a].n)
		c[a--] = 0;
	if (a < 0)
		return 0;
	*at = 0;
	*w = 1;
	for (a = 0; a < pt->r; a++) {
		int64_t i = pt->t[a].i[c[a]];
		*w *= pt->t[a].w[c[a]];
		*at = i < 0 || *at < 0 ? -1 : *at + i * pt->st[a];
	}
	return 1;
}

/* A 2-D point's nonzero taps inside X (offsets a, weights w) in gs_next's order, their count: its
 * walk written out (its weight 1 wy wx is wy wx), a fifth of GridSample 8 x 64 x 24 x 24's time
 * once the channels took vectors */
static int gs_list2(const struct gs_point *pt, int64_t *a, double *w)
{
	int k = 0;
	for (int u = 0; u < pt->t[0].n; u++)
		for (int v = 0; v < pt->t[1].n; v++) {
			int64_t iy = pt->t[0].i[u], ix = pt->t[1].i[v];
			double wt = pt->t[0].w[u] * pt->t[1].w[v];
			if (iy >= 0 && ix >= 0 && wt != 0) {
				a[k] = iy * pt->st[0] + ix * pt->st[1];
				w[k++] = wt;
			}
		}
	return k;
}

/* A point's tap combinations at most: 4^3, 3-D cubic (ONNX and PyTorch define cubic in 2-D only) */
enum { GS_MAX_TAPS = 64 };

struct gs_job {
	struct gs_mode m;
	const struct rtensor *x, *grid;
	struct rtensor *y;
	int r;
	int64_t points, spatial; /* grid points per batch element; X's spatial size */
	int64_t taps;            /* tap combinations a point at most */
};

static void gs_init_point(const struct gs_job *j, struct gs_point *pt)
{
	pt->r = j->r;
	c_strides(j->r, j->x->dims + 2, pt->st);
}

/* Channel ch's sample from the point's K nonzero taps (offsets at, weights w), any dtype */
static double gs_sample(const struct rtensor *x, int64_t base, const int64_t *at, const double *w, int K)
{
	double v = 0;
	for (int k = 0; k < K; k++)
		v += w[k] * rt_get(x, base + at[k]);
	return v;
}

/* One channel's samples of m points (tap lists of `taps` slots each, K[i] of them used) from plane p
 * into y, float32 or float64: the sums of gs_sample in its order, in double, rounded once. */
#define GS_ROWS(T)                                                                                               \
	static void gs_rows_##T(const T *restrict p, T *restrict y, const int64_t *restrict at,                 \
				const double *restrict w, const int *restrict K, int64_t m, int64_t taps)       \
	{                                                                                                        \
		for (int64_t i = 0; i < m; i++) {                                                                \
			const int64_t *a = at + i * taps;                                                        \
			const double *ww = w + i * taps;                                                         \
			double v = 0;                                                                            \
			if (K[i] == 4) { /* 2-D linear inside X: unrolled */                                     \
				v += ww[0] * p[a[0]];                                                            \
				v += ww[1] * p[a[1]];                                                            \
				v += ww[2] * p[a[2]];                                                            \
				v += ww[3] * p[a[3]];                                                            \
			} else                                                                                   \
				for (int k = 0; k < K[i]; k++)                                                   \
					v += ww[k] * p[a[k]];                                                    \
			y[i] = (T)v;                                                                             \
		}                                                                                                \
	}
GS_ROWS(float)
GS_ROWS(double)
#undef GS_ROWS

/* Four float32 channels' rows at once (planes p + c ps, rows y + c ys), each output as gs_rows
 * makes it (the sums of gs_sample in its order, in double, rounded once). A point's tap offsets and
 * weights are loaded once for the four, and the four sums are independent chains: the one-row loop
 * spent 8 of an output's about 25 instructions on them, its 4 adds one chain (perf: 5.4 cycles an
 * output, 1.48 ns). 8 x 64 x 24 x 24 bilinear (bench_roofline, 1 thread, load 3 to 10 on 2 cores,
 * interleaved, best of 15): 0.436-0.443 -> 0.396-0.402 ms. One vector lane per point was slower
 * (last session), and so was the old loop compiled as VM_CLONES' AVX-512 clone (no gathers; 0.44 ->
 * 0.47-0.49 ms). With AVX-512 and 16 channels or more the channels take the lanes instead
 * (gs_points_avx512); these rows are the rest's, and the baseline's. */
enum { GS_PLANES = 4 };
static void gs_rows4_float(const float *restrict p, int64_t ps, float *restrict y, int64_t ys, const int64_t *restrict at,
			   const double *restrict w, const int *restrict K, int64_t m, int64_t taps)
{
	for (int64_t i = 0; i < m; i++) {
		const int64_t *a = at + i * taps;
		const double *ww = w + i * taps;
		double v0 = 0, v1 = 0, v2 = 0, v3 = 0;
		for (int k = 0; k < K[i]; k++) {
			int64_t ak = a[k];
			double wk = ww[k];
			v0 += wk * p[ak];
			v1 += wk * p[ps + ak];
			v2 += wk * p[2 * ps + ak];
			v3 += wk * p[3 * ps + ak];
		}
		y[i] = (float)v0;
		y[ys + i] = (float)v1;
		y[2 * ys + i] = (float)v2;
		y[3 * ys + i] = (float)v3;
	}
}

/* Points a block at most: their tap lists stay in L1 while every channel reads them */
enum { GS_BLOCK = 64 };

#ifdef SIMD_X86
/* float32 with AVX-512, 16 channels or more: channels the vectors' lanes. An image's X is turned
 * channels-last once (xt, spatial x C), so a tap of a point is C contiguous floats; each point's
 * channels are then 16 lanes at a time 0 + w0 x0 + w1 x1 + ... over its tap list in order (the
 * weight broadcast, each float widened to double; no fused multiply-add: the target is avx512f and
 * C11 does not contract), rounded once: gs_rows' sums, its bits. The block's outputs, point by
 * channel, are turned into the channels' rows of Y. With gs_list2, 8 x 64 x 24 x 24 bilinear
 * (bench_roofline, 1 thread, interleaved x5, best of 9, load 4 on 2 cores): 0.393-0.403 -> 0.249-0.261
 * ms. Gathering 16 points' taps instead (one lane a point, vgatherdps, masked where a point has
 * fewer taps) ran 1.9 times slower than the scalar rows on Zen 4 (0.40 -> 0.75 ms). A NaN from two
 * NaN operands may carry the other's payload than in gs_rows (the adds' operand order is the
 * compiler's in both). */
enum { GS_LANES = 16 };

/* The m points' C channels from xt (spatial x C) into o (m x C) */
SIMD_TARGET static void gs_points_avx512(const float *restrict xt, float *restrict o, int64_t C,
					 const int64_t *restrict at, const double *restrict w, const int *restrict K, int64_t m,
					 int64_t taps)
{
	for (int64_t i = 0; i < m; i++) {
		const int64_t *a = at + i * taps;
		const double *ww = w + i * taps;
		for (int64_t c = 0; c < C; c += GS_LANES) {
			__mmask16 on = (__mmask16)(C - c >= GS_LANES ? 0xffff : (1u << (C - c)) - 1);
			__m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
			for (int k = 0; k < K[i]; k++) {
				__m512 v = _mm512_maskz_loadu_ps(on, xt + a[k] * C + c);
				__m512d wk = _mm512_set1_pd(ww[k]);
				__m256 vh = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
				lo = _mm512_add_pd(lo, _mm512_mul_pd(wk, _mm512_cvtps_pd(_mm512_castps512_ps256(v))));
				hi = _mm512_add_pd(hi, _mm512_mul_pd(wk, _mm512_cvtps_pd(vh)));
			}
			__m512d r = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm512_cvtpd_ps(lo))),
						       _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1);
			_mm512_mask_storeu_ps(o + i * C + c, on, _mm512_castpd_ps(r));
		}
	}
}
#endif

/* Each point's tap combinations are listed once (the nonzero ones inside X, in the walk's order),
 * then read for every channel: 4.2x faster than walking them per channel (16 x 32 x 64 x 64
 * bilinear, 228 -> 55 ms). float32/float64 take blocks of points of one batch element, each
 * channel's outputs then a contiguous row. */
static void gs_forward_range(void *arg, int64_t lo, int64_t hi)
{
	const struct gs_job *j = arg;
	int64_t C = j->x->dims[1], T = j->taps;
	int64_t *at = xmalloc(sizeof *at * (size_t)(GS_BLOCK * T));
	double *w = xmalloc(sizeof *w * (size_t)(GS_BLOCK * T));
	int K[GS_BLOCK];
	int typed = j->x->dtype == DT_FLOAT || j->x->dtype == DT_DOUBLE;
	struct gs_point pt;
	gs_init_point(j, &pt);
#ifdef SIMD_X86
	/* channels-last: an image's X turned once for its points (at most 8 X elements an output
	 * point, and 2^22 a thread) */
	float *xt = NULL, *ob = NULL;
	int64_t xn = -1;
	if (j->x->dtype == DT_FLOAT && j->m.interp != GS_CUBIC && C >= GS_LANES && j->spatial <= 8 * j->points &&
	    C * j->spatial <= (1 << 22) && simd_avx512()) {
		xt = xmalloc(sizeof *xt * (size_t)(C * j->spatial));
		ob = xmalloc(sizeof *ob * (size_t)(C * GS_BLOCK));
		if (!xt || !ob) { /* out of memory: the rows below, the same bits */
			xfree(xt);
			xfree(ob);
			xt = ob = NULL;
		}
	}
#endif
	for (int64_t p0 = lo; p0 < hi;) {
		int64_t n = p0 / j->points, o0 = p0 % j->points, m = hi - p0;
		m = m < GS_BLOCK ? m : GS_BLOCK;
		m = m < j->points - o0 ? m : j->points - o0;
		for (int64_t i = 0; i < m; i++) {
			int c[RT_MAX_DIMS] = {0}, k = 0;
			int64_t *a = at + i * T;
			double *ww = w + i * T;
			gs_point_taps(&j->m, j->x, j->grid, p0 + i, &pt);
			if (j->r == 2) {
				K[i] = gs_list2(&pt, a, ww);
				continue;
			}
			c[j->r - 1] = -1;
			while (gs_next(&pt, c, &a[k], &ww[k]))
				if (a[k] >= 0 && ww[k] != 0)
					k++;
			K[i] = k;
		}
		int64_t ch = 0;
#ifdef SIMD_X86
		if (xt) {
			if (xn != n)
				transpose_f32_avx512((const float *)j->x->data + n * C * j->spatial, j->spatial, xt, C, j->spatial, C);
			xn = n;
			gs_points_avx512(xt, ob, C, at, w, K, m, T);
			transpose_f32_avx512(ob, C, (float *)j->y->data + n * C * j->points + o0, j->points, C, m);
			ch = C;
		}
#endif
		if (j->x->dtype == DT_FLOAT)
			for (; ch + GS_PLANES <= C; ch += GS_PLANES)
				gs_rows4_float((const float *)j->x->data + (n * C + ch) * j->spatial, j->spatial,
					       (float *)j->y->data + (n * C + ch) * j->points + o0, j->points, at, w, K, m, T);
		for (; ch < C; ch++) {
			int64_t xb = (n * C + ch) * j->spatial, yb = (n * C + ch) * j->points + o0;
			if (!typed)
				for (int64_t i = 0; i < m; i++)
					rt_set(j->y, yb + i, gs_sample(j->x, xb, at + i * T, w + i * T, K[i]));
			else if (j->x->dtype == DT_FLOAT)
				gs_rows_float((const float *)j->x->data + xb, (float *)j->y->data + yb, at, w, K, m, T);
			else
				gs_rows_double((const double *)j->x->data + xb, (double *)j->y->data + yb, at, w, K, m, T);
		}
		p0 += m;
	}
	xfree(at);
	xfree(w);
#ifdef SIMD_X86
	xfree(xt);
	xfree(ob);
#endif
}

static int gs_job_init(struct exec *x, const struct node *n, struct rtensor *const *in, struct gs_job *j,
		       int64_t *odims)
{
	const char *why;
	memset(j, 0, sizeof *j);
	if (gs_mode(n, &j->m, &why))
		return exec_fail(x, "%s", why);
	if (gs_shape(x, in[0], in[1], &j->r, odims))
		return exec_status(x);
	uint64_t taps = 1;
	for (int i = 0; i < j->r && taps <= GS_MAX_TAPS; i++)
		taps *= j->m.interp == GS_NEAREST ? 1u : j->m.interp == GS_LINEAR ? 2u : 4u;
	if (taps > GS_MAX_TAPS)
		return exec_fail(x, "%s over %d spatial dimensions is not supported", j->m.interp == GS_CUBIC ? "cubic" : "linear",
				 j->m.interp == GS_CUBIC ? 3 : 6);
	j->taps = (int64_t)taps;
	j->x = in[0];
	j->grid = in[1];
	j->points = j->spatial = 1;
	for (int i = 0; i < j->r; i++) {
		j->points *= in[1]->dims[1 + i];
		j->spatial *= in[0]->dims[2 + i];
	}
	return 0;
}

static int grid_sample_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct gs_job j;
	int64_t odims[RT_MAX_DIMS];
	if (gs_job_init(x, n, in, &j, odims))
		return exec_status(x);
	if (!exec_alloc(x, out[0], in[0]->dtype, in[0]->ndim, odims))
		return exec_status(x);
	j.y = out[0];
	kernel_for(in[0]->dims[0] * j.points, 64, gs_forward_range, &j);
	return 0;
}

/* ---- the gradient, in standard ONNX ops ----
 *
 * Shapes: X (N, C, S1 .. Sr) viewed as (N, C, S), S the spatial size; the grid as (N, P, r), P
 * points; each axis a has T taps (1, 2 or 4) and the point K = T^r tap combinations. Per axis, from
 * the grid's component c (N, P, 1): the taps' indices I_a (N, P, T), clipped into X, their weights
 * W_a and weights' derivatives dW_a (a tap outside X, under zeros, weighs 0), and dc_a (N, P, 1),
 * the coordinate's derivative in the grid value. Broadcast over the axes (axis a's T at position
 * 2 + a), the combinations' flat indices and weights prod_a W_a are (N, P, K); with Xt = X as
 * (N, S, C) and dYt = dY as (N, P, C),
 *   dX = Transpose(ScatterND(zeros (N, S, C), (n, idx), dYt W, add)), (N, P K) slices of C
 *   dgrid[.., k] = dc_a sum_K (sum_C dYt GatherND(Xt, idx, batch_dims 1)) dW_a prod_(b != a) W_b,
 * a = r - 1 - k, the sum over C taken over (N, C, P K) as before. Every output element takes its
 * terms in the order it did through ScatterElements and GatherElements over (N, C, P K) (the same
 * bits), without the C copies of the indices those needed: the 8 x 64 x 24 x 24 gradient's nodes
 * held 22.6 MB at the peak, now 13.2 MB, and take 2.1x less time against the forward kernel's.
 * floor(c) is Cast to int64 and back (truncation), less 1 where that exceeds c: the registry has no
 * Floor. Nearest's dgrid is zero. */
struct gs_ad {
	struct ad *a;
	int dt;
	int64_t N, P, r;
};

static struct value *gs_c(struct gs_ad *s, double v)
{
	return ad_scalar(s->a, s->dt, v);
}

static struct value *gs_vec(struct gs_ad *s, const double *v, int64_t n)
{
	return ad_tensor(s->a, s->dt, 1, &n, v);
}

/* Cast(v, dtype) */
static struct value *gs_cast(struct gs_ad *s, struct value *v, int dtype)
{
	return v ? ad_cast(s->a, v, dtype) : NULL;
}

/* trunc(v) = Cast(Cast(v, int64), dtype): floor for v >= 0 */
static struct value *gs_trunc(struct gs_ad *s, struct value *v)
{
	return gs_cast(s, gs_cast(s, v, DT_INT64), s->dt);
}

static struct value *gs_floor(struct gs_ad *s, struct value *v)
{
	struct value *t = gs_trunc(s, v);
	return ad_op2(s->a, "Sub", t, gs_cast(s, ad_op2(s->a, "Less", v, t), s->dt));
}

/* 1 where lo < v < hi, else 0 (the clip's derivative, as PyTorch's clip_coordinates_set_grad) */
static struct value *gs_inside(struct gs_ad *s, struct value *v, double lo, double hi)
{
	return ad_op2(s->a, "Mul", gs_cast(s, ad_op2(s->a, "Greater", v, gs_c(s, lo)), s->dt),
		      gs_cast(s, ad_op2(s->a, "Less", v, gs_c(s, hi)), s->dt));
}

static struct value *gs_clip_ad(struct gs_ad *s, struct value *v, double lo, double hi)
{
	struct value *ins[3] = {v, gs_c(s, lo), gs_c(s, hi)};
	return v ? ad_op(s->a, "Clip", ins, 3) : NULL;
}

/* v padded along an axis of `size` (border, reflection; gs_pad), its derivative into *d when d */
static struct value *gs_pad_ad(struct gs_ad *s, const struct gs_mode *m, struct value *v, int64_t size, struct value **d)
{
	struct ad *a = s->a;
	double hi = (double)(size - 1);
	struct value *dr = NULL;
	if (m->pad == GS_REFLECTION) {
		double lo2 = m->align ? 0 : -1, hi2 = m->align ? 2 * hi : 2 * (double)size - 1;
		if (lo2 == hi2) { /* one element with align_corners: always 0, derivative 0 */
			if (d)
				*d = ad_op2(a, "Mul", v, gs_c(s, 0));
			return ad_op2(a, "Mul", v, gs_c(s, 0));
		}
		double lo = lo2 / 2, span = (hi2 - lo2) / 2;
		/* u = v - lo; q = floor(|u| / span), extra = |u| - q span, odd = q mod 2:
		 * lo + extra + odd (span - 2 extra), derivative sign(u) (1 - 2 odd) */
		struct value *u = ad_op2(a, "Sub", v, gs_c(s, lo)), *au = ad_op1(a, "Abs", u);
		struct value *q = gs_trunc(s, ad_op2(a, "Div", au, gs_c(s, span)));
		struct value *extra = ad_op2(a, "Sub", au, ad_op2(a, "Mul", q, gs_c(s, span)));
		struct value *odd = ad_op2(a, "Sub", q, ad_op2(a, "Mul", gs_trunc(s, ad_op2(a, "Mul", q, gs_c(s, 0.5))), gs_c(s, 2)));
		struct value *flip = ad_op2(a, "Sub", gs_c(s, 1), ad_op2(a, "Mul", odd, gs_c(s, 2)));
		/* extra + odd (span - 2 extra) = odd span + extra (1 - 2 odd) */
		v = ad_op2(a, "Add", ad_op2(a, "Add", ad_op2(a, "Mul", odd, gs_c(s, span)), ad_op2(a, "Mul", extra, flip)),
			   gs_c(s, lo));
		if (d) {
			struct value *neg = gs_cast(s, ad_op2(a, "Less", u, gs_c(s, 0)), s->dt);
			dr = ad_op2(a, "Mul", flip, ad_op2(a, "Sub", gs_c(s, 1), ad_op2(a, "Mul", neg, gs_c(s, 2))));
		}
	}
	if (d) {
		struct value *in = gs_inside(s, v, 0, hi);
		*d = dr ? ad_op2(a, "Mul", dr, in) : in;
	}
	return gs_clip_ad(s, v, 0, hi);
}

/* What axis a of the point reads (see above): I (clipped, as float), W, dW (NULL for nearest),
 * dc; T the taps. */
struct gs_axis_ad {
	struct value *I, *W, *dW, *dc;
	int T;
};

static int gs_axis_ad(struct gs_ad *s, const struct gs_mode *m, struct value *grid, int64_t k, int64_t size,
		      struct gs_axis_ad *o)
{
	struct ad *a = s->a;
	double hi = (double)(size - 1), A = m->align ? hi / 2 : (double)size / 2;
	struct value *g = ad_op2(a, "Gather", grid, ad_ints(a, &k, 1));
	struct node *gn = ad_producer(g);
	if (!gn || ad_set_int(a, gn, "axis", 2))
		return -1;
	struct value *c = ad_op2(a, "Add", ad_op2(a, "Mul", g, gs_c(s, A)), gs_c(s, hi / 2)), *d = NULL, *I;
	o->dc = gs_c(s, A);
	o->W = o->dW = NULL;
	if (m->interp != GS_CUBIC && m->pad != GS_ZEROS) {
		c = gs_pad_ad(s, m, c, size, &d);
		o->dc = ad_op2(a, "Mul", d, o->dc);
	}
	int check = m->pad == GS_ZEROS || m->interp == GS_LINEAR;
	if (m->interp == GS_NEAREST) {
		o->T = 1;
		I = ad_op1(a, "Round", c);
	} else {
		static const double lin_off[2] = {0, 1}, lin_dw[2] = {-1, 1}, cub_off[4] = {-1, 0, 1, 2};
		int cub = m->interp == GS_CUBIC;
		o->T = cub ? 4 : 2;
		/* far outside X under zeros every tap weighs 0: clipped so that the int64 Cast holds */
		if (m->pad == GS_ZEROS)
			c = gs_clip_ad(s, c, -4, (double)size + 3);
		struct value *f = gs_floor(s, c), *t = ad_op2(a, "Sub", c, f);
		struct value *off = gs_vec(s, cub ? cub_off : lin_off, o->T);
		I = ad_op2(a, "Add", f, off);
		/* |t - off|: linear's 1 - t and t; cubic's t + 1, t, 1 - t, 2 - t */
		struct value *dist = ad_op1(a, "Abs", ad_op2(a, "Sub", t, off));
		if (!cub) {
			o->W = ad_op2(a, "Sub", gs_c(s, 1), dist);
			o->dW = gs_vec(s, lin_dw, 2);
		} else {
			/* inner taps K1(d) = ((A+2)d - (A+3))d^2 + 1, outer K2(d) = ((Ad - 5A)d + 8A)d - 4A;
			 * the derivatives in c: sign(t - off) K'(d) */
			const double ka = -0.75;
			static const double inner[4] = {0, 1, 1, 0}, outer[4] = {1, 0, 0, 1}, dinner[4] = {0, 1, -1, 0},
					    douter[4] = {1, 0, 0, -1};
			struct value *d2 = ad_op2(a, "Mul", dist, dist);
			struct value *k1 = ad_op2(a, "Add", ad_op2(a, "Mul", ad_op2(a, "Sub", ad_op2(a, "Mul", dist, gs_c(s, ka + 2)),
										    gs_c(s, ka + 3)), d2), gs_c(s, 1));
			struct value *k2 = ad_op2(a, "Sub", ad_op2(a, "Mul", ad_op2(a, "Add", ad_op2(a, "Mul", ad_op2(a, "Sub",
							ad_op2(a, "Mul", dist, gs_c(s, ka)), gs_c(s, 5 * ka)), dist), gs_c(s, 8 * ka)), dist),
						  gs_c(s, 4 * ka));
			struct value *k1d = ad_op2(a, "Mul", ad_op2(a, "Sub", ad_op2(a, "Mul", dist, gs_c(s, 3 * (ka + 2))),
								    gs_c(s, 2 * (ka + 3))), dist);
			struct value *k2d = ad_op2(a, "Add", ad_op2(a, "Mul", ad_op2(a, "Sub", ad_op2(a, "Mul", dist, gs_c(s, 3 * ka)),
								    gs_c(s, 10 * ka)), dist), gs_c(s, 8 * ka));
			o->W = ad_op2(a, "Add", ad_op2(a, "Mul", k1, gs_vec(s, inner, 4)), ad_op2(a, "Mul", k2, gs_vec(s, outer, 4)));
			o->dW = ad_op2(a, "Add", ad_op2(a, "Mul", k1d, gs_vec(s, dinner, 4)), ad_op2(a, "Mul", k2d, gs_vec(s, douter, 4)));
			if (m->pad != GS_ZEROS)
				I = gs_pad_ad(s, m, I, size, NULL);
		}
	}
	if (check) { /* |I - (S - 1)/2| < S/2: inside X */
		struct value *v = gs_cast(s, ad_op2(a, "Less", ad_op1(a, "Abs", ad_op2(a, "Sub", I, gs_c(s, hi / 2))),
						   gs_c(s, (double)size / 2)), s->dt);
		o->W = o->W ? ad_op2(a, "Mul", o->W, v) : v;
		o->dW = o->dW ? ad_op2(a, "Mul", o->dW, v) : NULL;
		I = gs_clip_ad(s, I, 0, hi);
	}
	o->I = I; /* W stays NULL for nearest taps always inside X: weight 1 */
	return I && o->dc && (m->interp == GS_NEAREST || (o->W && o->dW)) ? 0 : -1;
}

/* v (N, P, T) as (N, P, 1 .. T .. 1), T at position 2 + a of 2 + r */
static struct value *gs_spread(struct gs_ad *s, struct value *v, int a, int T)
{
	int64_t dims[RT_MAX_DIMS];
	dims[0] = s->N;
	dims[1] = s->P;
	for (int i = 0; i < s->r; i++)
		dims[2 + i] = i == a ? T : 1;
	return ad_op2(s->a, "Reshape", v, ad_ints(s->a, dims, (size_t)(2 + s->r)));
}

static struct value *gs_reshape(struct gs_ad *s, struct value *v, int nd, const int64_t *dims)
{
	return ad_op2(s->a, "Reshape", v, ad_ints(s->a, dims, (size_t)nd));
}

/* v (B, R, C) as (B, C, R) */
static struct value *gs_turn(struct gs_ad *s, struct value *v)
{
	static const int64_t perm[3] = {0, 2, 1};
	struct value *t = v ? ad_op1(s->a, "Transpose", v) : NULL;
	struct node *p = ad_producer(t);
	return p && !ad_set_ints(s->a, p, "perm", perm, 3) ? t : NULL;
}

static int grid_sample_grad(struct ad *a, const struct node *n)
{
	struct gs_mode m;
	const char *why;
	if (gs_mode(n, &m, &why))
		return ad_fail(a, "%s", why);
	const struct rtensor *xs = ad_shape(a, n->in[0]), *gsh = ad_shape(a, n->in[1]);
	for (int i = 0; i < xs->ndim; i++)
		if (ad_dim_symbolic(a, xs->dims[i]))
			return ad_fail(a, "cannot differentiate a GridSample of symbolic dimensions");
	for (int i = 0; i < gsh->ndim; i++)
		if (ad_dim_symbolic(a, gsh->dims[i]))
			return ad_fail(a, "cannot differentiate a GridSample of symbolic dimensions");
	if (gsh->dtype != xs->dtype)
		return ad_fail(a, "cannot differentiate a GridSample whose grid's dtype is not X's");
	if (xs->ndim < 3 || xs->ndim > RT_MAX_DIMS - 1)
		return ad_fail(a, "cannot differentiate a GridSample of rank %d", xs->ndim);
	if (ad_need_opset(a, 16, "the GridSample gradient (ScatterND with reduction)"))
		return -1;
	struct gs_ad s = {a, xs->dtype, xs->dims[0], 1, xs->ndim - 2};
	int64_t C = xs->dims[1], S = 1, K = 1, st[RT_MAX_DIMS];
	for (int i = 0; i < s.r; i++) {
		s.P *= gsh->dims[1 + i];
		S *= xs->dims[2 + i];
	}
	c_strides((int)s.r, xs->dims + 2, st);
	int64_t g3[3] = {s.N, s.P, s.r};
	struct value *grid = gs_reshape(&s, n->in[1], 3, g3);
	struct gs_axis_ad ax[RT_MAX_DIMS];
	struct value *idx = NULL, *W = NULL;
	for (int i = 0; i < s.r; i++) {
		if (gs_axis_ad(&s, &m, grid, s.r - 1 - i, xs->dims[2 + i], &ax[i]))
			return -1;
		K *= ax[i].T;
		struct value *ii = ad_op2(a, "Mul", gs_cast(&s, ax[i].I, DT_INT64), ad_ints(a, &st[i], 1));
		ii = gs_spread(&s, ii, i, ax[i].T);
		idx = idx ? ad_op2(a, "Add", idx, ii) : ii;
		if (ax[i].W) {
			struct value *w = gs_spread(&s, ax[i].W, i, ax[i].T);
			W = W ? ad_op2(a, "Mul", W, w) : w;
		}
	}
	/* X as (N, S, C) (Xt), so that a tap's channels are one slice: the taps' offsets (N, P K, 1)
	 * index it in place of (N, C, P K) copies; dY's products with the weights (N, P K, C) are
	 * ScatterND's updates, each output element taking them in the (p, k) order as before */
	int64_t npk1[3] = {s.N, s.P * K, 1}, npkc[3] = {s.N, s.P * K, C}, np1c[4] = {s.N, s.P, 1, C},
		npk1b[4] = {s.N, s.P, K, 1}, npkc4[4] = {s.N, s.P, K, C}, ncp[3] = {s.N, C, s.P}, ncs[3] = {s.N, C, S},
		nsc[3] = {s.N, S, C};
	idx = gs_reshape(&s, idx, 3, npk1);
	struct value *dyt = gs_reshape(&s, gs_turn(&s, gs_reshape(&s, ad_dy(a, n->out[0]), 3, ncp)), 4, np1c);
	if (ad_wants(a, n->in[0])) {
		struct value *upd = gs_reshape(&s, W ? ad_op2(a, "Mul", dyt, gs_reshape(&s, W, 4, npk1b)) : dyt, 3, npkc);
		int64_t *bn = xmalloc(sizeof *bn * (size_t)s.N), n11[3] = {s.N, 1, 1};
		for (int64_t i = 0; i < s.N; i++)
			bn[i] = i;
		struct value *bv = gs_reshape(&s, ad_ints(a, bn, (size_t)s.N), 3, n11);
		xfree(bn);
		struct value *both[2] = {ad_op2(a, "Expand", bv, ad_ints(a, npk1, 3)), idx};
		struct value *at = both[0] ? ad_op(a, "Concat", both, 2) : NULL;
		struct node *cn = ad_producer(at);
		if (!cn || ad_set_int(a, cn, "axis", 2))
			return -1;
		struct value *ins[3] = {gs_reshape(&s, ad_zeros_flat(a, n->in[0], s.dt), 3, nsc), at, upd};
		struct value *dxt = ins[0] && ins[2] ? ad_op(a, "ScatterND", ins, 3) : NULL;
		struct node *p = ad_producer(dxt);
		if (!p || ad_set_str(a, p, "reduction", "add") ||
		    ad_give(a, n->in[0], ad_op2(a, "Reshape", gs_turn(&s, dxt), ad_shape_of(a, n->in[0]))))
			return -1;
	}
	if (!ad_wants(a, n->in[1]))
		return 0;
	if (m.interp == GS_NEAREST)
		return ad_give(a, n->in[1], ad_zeros_like(a, n->in[1]));
	/* sum_C dY X[idx], as (N, P, K): the products with the taps' slices of Xt (rows of C), turned to
	 * (N, C, P K) to be summed over C as before */
	struct value *xg = ad_op2(a, "GatherND", gs_turn(&s, gs_reshape(&s, n->in[0], 3, ncs)), idx);
	struct node *p = ad_producer(xg);
	if (!p || ad_set_int(a, p, "batch_dims", 1))
		return -1;
	struct value *prod = gs_turn(&s, gs_reshape(&s, ad_op2(a, "Mul", dyt, gs_reshape(&s, xg, 4, npkc4)), 3, npkc));
	int64_t one = 1, npk[3] = {s.N, s.P, K}, two = 2;
	struct value *gx = prod ? gs_reshape(&s, ad_reduce(a, "ReduceSum", prod, &one, 1, 0), 3, npk) : NULL;
	struct value *comp[RT_MAX_DIMS];
	for (int i = 0; i < s.r; i++) {
		struct value *d = gs_spread(&s, ax[i].dW, i, ax[i].T);
		for (int j = 0; j < s.r; j++)
			if (j != i)
				d = ad_op2(a, "Mul", d, gs_spread(&s, ax[j].W, j, ax[j].T));
		d = ad_op2(a, "Mul", gx, gs_reshape(&s, d, 3, npk));
		comp[s.r - 1 - i] = d ? ad_op2(a, "Mul", ad_reduce(a, "ReduceSum", d, &two, 1, 1), ax[i].dc) : NULL;
		if (!comp[s.r - 1 - i])
			return -1;
	}
	struct value *dg = s.r == 1 ? comp[0] : ad_op(a, "Concat", comp, (int)s.r);
	struct node *cn = s.r == 1 ? NULL : ad_producer(dg);
	if (cn && ad_set_int(a, cn, "axis", 2))
		return -1;
	return ad_give(a, n->in[1], ad_op2(a, "Reshape", dg, ad_shape_of(a, n->in[1])));
}

/* per output element, 2 FLOPs a tap: 2^r (linear), 4^r (cubic) or 1 */
static uint64_t gs_taps_per_point(const struct node *n, int r)
{
	struct gs_mode m;
	const char *why;
	uint64_t k = 1, per = 2;
	if (!gs_mode(n, &m, &why))
		per = m.interp == GS_NEAREST ? 1 : m.interp == GS_LINEAR ? 2 : 4;
	for (int i = 0; i < r; i++)
		k *= per;
	return k;
}

static void grid_sample_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
			     uint64_t *flops, uint64_t *bytes)
{
	(void)bytes;
	*flops = (uint64_t)out[0]->numel * 2u * gs_taps_per_point(n, in[0]->ndim - 2);
}

const struct op_impl op_grid_sample = {.run = grid_sample_run, .grad = grid_sample_grad, .cost = grid_sample_cost,
				       .recompute = RC_CHEAP};
