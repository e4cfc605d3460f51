/* resize.c - Resize (nn.Upsample, F.interpolate): nearest, linear and cubic, with the coordinate
 * transformations exporters write (half_pixel, pytorch_half_pixel, align_corners, asymmetric,
 * tf_half_pixel_for_nn) and every nearest_mode. ONNX Resize (opset 11+): inputs X, roi, scales,
 * sizes; an output dimension is sizes[i], or floor(X's dimension x scales[i]).
 *
 * Resize is separable and linear: along each axis, output index o reads up to four input indices
 * with weights (nearest: one; linear: two; cubic: four, Keys' kernel with cubic_coeff_a, indices
 * clamped to the edge as ONNX and PyTorch do). One rule, axis_map, gives them to the kernel and to
 * the gradient, where the axis's map becomes its matrix A (out x in): dX = A_h^T g A_w, two MatMuls
 * with constant matrices, exact in every mode. */
#include "../autodiff/ad.h"
#include "../util/xalloc.h"
#include "kernel.h"

#include <math.h>
#include <string.h>

struct resize_mode {
	int linear, cubic;
	double a; /* cubic_coeff_a */
	int coord; /* enum below */
	int nearest; /* enum below */
};

enum { CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_HALF_PIXEL_NN };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL };

/* The node's mode; -1 (and *why) for what graphdiet does not do. */
static int resize_mode(const struct node *n, struct resize_mode *m, const char **why)
{
	static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
					     "tf_half_pixel_for_nn"};
	static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
	memset(m, 0, sizeof *m);
	if (!attr_str_is(n, "mode", "nearest", 1)) {
		m->linear = attr_str_is(n, "mode", "linear", 0);
		m->cubic = attr_str_is(n, "mode", "cubic", 0);
		if (!m->linear && !m->cubic)
			return *why = "mode must be nearest, linear or cubic", -1;
		m->a = attr_float(n, "cubic_coeff_a", -0.75f);
	}
	m->coord = -1;
	for (int i = 0; i < 5; i++)
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
	if (attr_int(n, "exclude_outside", 0) || node_attr(n, "antialias") || node_attr(n, "axes"))
		return *why = "exclude_outside, antialias and axes are not supported", -1;
	return 0;
}

/* What output index o of an axis of `in` elements reads (at scale s, `out` outputs): taps. */
struct taps {
	int n;
	int64_t i[4];
	double w[4];
};

static void axis_map(const struct resize_mode *m, int64_t in, int64_t out, double s, int64_t o, struct taps *t)
{
	double x;
	switch (m->coord) {
	case CT_HALF_PIXEL: x = ((double)o + 0.5) / s - 0.5; break;
	case CT_PYTORCH_HALF_PIXEL: x = out > 1 ? ((double)o + 0.5) / s - 0.5 : 0; break;
	case CT_ALIGN_CORNERS: x = out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0; break;
	case CT_ASYMMETRIC: x = (double)o / s; break;
	default: x = ((double)o + 0.5) / s; break;
	}
	if (m->cubic) { /* Keys: |d| <= 1: (a+2)|d|^3 - (a+3)|d|^2 + 1; 1 < |d| < 2: a|d|^3 - 5a|d|^2 + 8a|d| - 4a */
		double f = floor(x), a = m->a;
		t->n = 4;
		for (int k = 0; k < 4; k++) {
			double d = fabs(x - (f - 1 + k));
			int64_t i = (int64_t)f - 1 + k;
			t->i[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
			t->w[k] = d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
		}
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

/* The output shape and per-axis scales from scales or sizes. */
static int resize_shape(struct exec *x, const struct node *n, struct rtensor *const *in, int64_t *dims, double *sc)
{
	const struct rtensor *a = in[0];
	const struct rtensor *scales = n->n_in > 2 && in[2] && in[2]->numel ? in[2] : NULL;
	const struct rtensor *sizes = n->n_in > 3 && in[3] && in[3]->numel ? in[3] : NULL;
	if (!scales == !sizes)
		return exec_fail(x, "exactly one of scales and sizes must be given");
	const struct rtensor *t = scales ? scales : sizes;
	if (t->numel != a->ndim)
		return exec_fail(x, "%s has %lld elements for %d dimensions", scales ? "scales" : "sizes",
				 (long long)t->numel, a->ndim);
	if (!t->data)
		return exec_fail(x, "%s must be known (bind the symbolic dimensions with --dim)", scales ? "scales" : "sizes");
	for (int i = 0; i < a->ndim; i++) {
		double v = rt_get(t, i);
		if (!(v > 0) || v > 1e6)
			return exec_fail(x, "%s[%d] = %g is out of range", scales ? "scales" : "sizes", i, v);
		dims[i] = scales ? (int64_t)floor((double)a->dims[i] * v) : (int64_t)v;
		sc[i] = scales ? v : (double)dims[i] / (double)(a->dims[i] ? a->dims[i] : 1);
	}
	return 0;
}

static int resize_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	struct resize_mode m;
	const char *why;
	int64_t dims[RT_MAX_DIMS];
	double sc[RT_MAX_DIMS];
	if (resize_mode(n, &m, &why))
		return exec_fail(x, "%s", why);
	if (want_float(x, a, "X") || resize_shape(x, n, in, dims, sc))
		return exec_status(x);
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, dims))
		return exec_status(x);
	const struct rtensor *y = out[0];
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
			axis_map(&m, a->dims[i], dims[i], sc[i], o, &tp[off[i] + o]);
	int64_t st[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	c_strides(a->ndim, a->dims, st);
	for (int64_t e = 0; e < y->numel; e++) {
		/* the sum over every combination of the axes' taps (a mixed-radix counter) */
		const struct taps *ax[RT_MAX_DIMS];
		int c[RT_MAX_DIMS] = {0};
		for (int i = 0; i < a->ndim; i++)
			ax[i] = &tp[off[i] + idx[i]];
		double v = 0;
		for (;;) {
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

/* The (out x in) matrix of axis k, or its transpose, as a constant of dtype. */
static struct value *axis_matrix(struct ad *a, const struct resize_mode *m, int64_t in, int64_t out, double s, int dt,
				 int transposed)
{
	double *v = xcalloc((size_t)(in * out) + 1, sizeof *v);
	if (!v)
		return ad_fail(a, "out of memory"), NULL;
	for (int64_t o = 0; o < out; o++) {
		struct taps t;
		axis_map(m, in, out, s, o, &t);
		for (int k = 0; k < t.n; k++)
			v[transposed ? t.i[k] * out + o : o * in + t.i[k]] += t.w[k];
	}
	int64_t dims[2] = {transposed ? in : out, transposed ? out : in};
	struct value *c = ad_tensor(a, dt, 2, dims, v);
	xfree(v);
	return c;
}

static int resize_grad(struct ad *a, const struct node *n)
{
	struct resize_mode m;
	const char *why;
	if (resize_mode(n, &m, &why))
		return ad_fail(a, "%s", why);
	const struct rtensor *xs = ad_shape(a, n->in[0]), *ys = ad_shape(a, n->out[0]);
	const struct rtensor *scales = n->n_in > 2 && n->in[2] ? ad_shape(a, n->in[2]) : NULL;
	int r = xs->ndim;
	struct value *g = ad_dy(a, n->out[0]);
	for (int i = 0; i < r; i++) {
		int64_t in = xs->dims[i], out = ys->dims[i];
		double s = scales && scales->numel == r && scales->data ? rt_get(scales, i) : (double)out / (double)in;
		if (in == out && s == 1)
			continue;
		if (i < r - 2)
			return ad_fail(a, "gradients of Resize along other than the last two dimensions are not supported");
		if (ad_dim_symbolic(a, in) || ad_dim_symbolic(a, out))
			return ad_fail(a, "cannot differentiate a Resize along a symbolic dimension");
		/* last axis: g (.., out) A (out x in); the one before: A^T (in x out) g (.., out, W) */
		struct value *mat = axis_matrix(a, &m, in, out, s, xs->dtype, i == r - 2);
		g = i == r - 1 ? ad_op2(a, "MatMul", g, mat) : ad_op2(a, "MatMul", mat, g);
		if (!g)
			return -1;
	}
	return ad_give(a, n->in[0], g);
}

/* each output element reads up to 4 inputs along each resized axis */
static void resize_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			uint64_t *bytes)
{
	(void)n;
	(void)bytes;
	*flops = (uint64_t)out[0]->numel * 2u * (in[0]->ndim > 2 ? 16u : 4u); /* up to 4 taps on 2 axes */
}

const struct op_impl op_resize = {.run = resize_run, .cost = resize_cost, .grad = resize_grad, .recompute = RC_CHEAP,
				  .nodiff = ~1u};
