/* grid_sample.c - GridSample (F.grid_sample, the sampler of a spatial transformer) and its
 * gradient, GridSampleGrad (graphdiet domain).
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
 * The gradient: dX[idx] += prod_a w_a dY (a scatter), and dgrid[.., k] = sum over c and taps of dY
 * X[idx] dw_a/dc prod_(b != a) w_b dc/dg, a = r - 1 - k. In standard ONNX that is a graph of Floor,
 * Mod, GatherElements and ScatterElements per corner and padding mode, so it is one op of graphdiet's
 * own domain instead, GridSampleGrad(dY, X, grid) -> (dX, dgrid), with GridSample's attributes (its
 * schema is in graphdiet-train(1)). Nearest's dgrid is zero, as in PyTorch. */
#include "../autodiff/ad.h"
#include "kernel.h"

#include <math.h>
#include <string.h>

enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

struct gs_mode {
	int interp, pad, align;
};

static const char *const gs_interp_names[] = {"nearest", "linear", "cubic"};
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

struct gs_job {
	struct gs_mode m;
	const struct rtensor *x, *grid;
	struct rtensor *y;
	int r;
	int64_t points, spatial; /* grid points per batch element; X's spatial size */
};

static void gs_init_point(const struct gs_job *j, struct gs_point *pt)
{
	pt->r = j->r;
	c_strides(j->r, j->x->dims + 2, pt->st);
}

static void gs_forward_range(void *arg, int64_t lo, int64_t hi)
{
	const struct gs_job *j = arg;
	int64_t C = j->x->dims[1];
	struct gs_point pt;
	gs_init_point(j, &pt);
	for (int64_t p = lo; p < hi; p++) {
		int64_t n = p / j->points, o = p % j->points;
		gs_point_taps(&j->m, j->x, j->grid, p, &pt);
		for (int64_t ch = 0; ch < C; ch++) {
			int c[RT_MAX_DIMS] = {0};
			c[j->r - 1] = -1;
			int64_t at, base = (n * C + ch) * j->spatial;
			double w, v = 0;
			while (gs_next(&pt, c, &at, &w))
				if (at >= 0 && w != 0)
					v += w * rt_get(j->x, base + at);
			rt_set(j->y, (n * C + ch) * j->points + o, v);
		}
	}
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

/* GridSampleGrad(dY, X, grid) -> (dX, dgrid) */
static int grid_sample_grad_run(struct exec *x, const struct node *n, struct rtensor *const *in,
				struct rtensor *const *out)
{
	struct gs_job j;
	int64_t odims[RT_MAX_DIMS];
	if (gs_job_init(x, n, in + 1, &j, odims))
		return exec_status(x);
	const struct rtensor *dy = in[0], *X = in[1], *grid = in[2];
	if (dy->ndim != X->ndim || memcmp(dy->dims, odims, sizeof *odims * (size_t)X->ndim))
		return exec_fail(x, "dY must have GridSample's output shape");
	void *dx = exec_alloc_zero(x, out[0], X->dtype, X->ndim, X->dims);
	void *dg = dx ? exec_alloc_zero(x, out[1], grid->dtype, grid->ndim, grid->dims) : NULL;
	if (!dg)
		return exec_status(x);
	int64_t C = X->dims[1];
	struct gs_point pt;
	gs_init_point(&j, &pt);
	for (int64_t p = 0; p < X->dims[0] * j.points; p++) {
		int64_t nb = p / j.points, o = p % j.points;
		gs_point_taps(&j.m, X, grid, p, &pt);
		double dc[RT_MAX_DIMS] = {0};
		int c[RT_MAX_DIMS] = {0};
		c[j.r - 1] = -1;
		int64_t at;
		double w;
		while (gs_next(&pt, c, &at, &w)) {
			if (at < 0)
				continue;
			/* sum over channels of dY X at this tap, and the scatter of w dY */
			double s = 0;
			for (int64_t ch = 0; ch < C; ch++) {
				int64_t xi = (nb * C + ch) * j.spatial + at;
				double g = rt_get(dy, (nb * C + ch) * j.points + o);
				s += g * rt_get(X, xi);
				if (w != 0)
					rt_set(out[0], xi, rt_get(out[0], xi) + w * g);
			}
			for (int a = 0; a < j.r; a++) {
				double d = pt.t[a].dw[c[a]];
				for (int b = 0; b < j.r && d != 0; b++)
					if (b != a)
						d *= pt.t[b].w[c[b]];
				dc[a] += s * d;
			}
		}
		for (int a = 0; a < j.r; a++)
			rt_set(out[1], p * j.r + (j.r - 1 - a), dc[a] * pt.t[a].dc);
	}
	return 0;
}

static int grid_sample_grad(struct ad *a, const struct node *n)
{
	struct gs_mode m;
	const char *why;
	if (gs_mode(n, &m, &why))
		return ad_fail(a, "%s", why);
	struct value *ins[3] = {ad_dy(a, n->out[0]), n->in[0], n->in[1]};
	struct node *g = ad_domain_node(a, "graphdiet", "GridSampleGrad", ins, 3, 2);
	if (!g || ad_set_str(a, g, "mode", gs_interp_names[m.interp]) ||
	    ad_set_str(a, g, "padding_mode", gs_pad_names[m.pad]) || ad_set_int(a, g, "align_corners", m.align))
		return -1;
	if (ad_wants(a, n->in[0]) && ad_give(a, n->in[0], g->out[0]))
		return -1;
	return ad_wants(a, n->in[1]) ? ad_give(a, n->in[1], g->out[1]) : 0;
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

/* twice the forward's: the scatter into dX and the products for dgrid */
static void grid_sample_grad_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
				  uint64_t *flops, uint64_t *bytes)
{
	(void)bytes;
	(void)out;
	*flops = (uint64_t)in[0]->numel * 4u * gs_taps_per_point(n, in[1]->ndim - 2);
}

const struct op_impl op_grid_sample = {.run = grid_sample_run, .grad = grid_sample_grad, .cost = grid_sample_cost,
				       .recompute = RC_CHEAP};
const struct op_impl op_grid_sample_grad = {.run = grid_sample_grad_run, .cost = grid_sample_grad_cost,
					    .recompute = RC_CHEAP};
