/* activation.c - the piecewise and smooth activations of the stock modules: Clip (ReLU6, hardtanh),
 * HardSigmoid, HardSwish (MobileNetV3), LeakyRelu, Softplus, Elu, Selu, Celu, PRelu, Softsign,
 * Shrink (hard and soft), ThresholdedRelu, Mish (opset 18), Gelu (opset 20).
 *
 * Kernels compute in double and round once on store (float64, float32's piecewise ones; 16-bit
 * tensors arrive widened), exact; float32's smooth ones (Elu, Selu, Celu, Softplus, Mish, Gelu) run
 * in float on vmath.h's vectorised approximations, within a few ulp (act_f). Gradients follow
 * PyTorch's backward formulas, in standard ONNX ops:
 *  - Clip, HardSigmoid, LeakyRelu read only their output, as Relu does: y lies strictly inside the
 *    clamp exactly where the input did (hardtanh's strict inequalities at the bounds); Clip's and
 *    HardSigmoid's as g sign(y - lo) sign(hi - y), one fused chain (pass_inside);
 *  - HardSwish reads its input: d/dx x relu6(x + 3)/6 = 0 below -3, 1 above 3, x/3 + 1/2 between;
 *  - Softplus reads its input: dy/dx = sigmoid(x);
 *  - Elu, Selu, Celu read their output: below 0 the derivative is y + alpha (Elu), y + gamma alpha
 *    (Selu), y / alpha + 1 (Celu), as PyTorch's backward computes it from the result; theirs and
 *    LeakyRelu's choose between the two sides by arithmetic that fuses (select_above_zero);
 *  - PRelu (a slope per channel, broadcast) gives the slope sum(g x) where x <= 0;
 *  - Softsign reads its input: dy/dx = 1 / (1 + |x|)^2; Shrink and ThresholdedRelu pass g where
 *    |x| > lambd, x > alpha (PyTorch's hardshrink and softshrink, threshold);
 *  - Mish and Gelu read x alone, as PyTorch's fused backward does (the slope of the products
 *    below, which their exported forms are).
 * Clip takes its bounds from the min and max attributes up to opset 6 (inputs from 11), and runs on
 * integers too (exactly, in int64). Opset-6 forms (Clip's attributes, PRelu's per-channel slope) are
 * run as they are; training rewrites the model to opset 13 first (rewrite/upgrade.h), so the
 * gradient rules see only the newer forms. */
#include "../autodiff/ad.h"
#include "kernel.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

enum act {
	A_CLIP, A_HARD_SIGMOID, A_HARD_SWISH, A_LEAKY_RELU, A_SOFTPLUS, A_ELU, A_SELU, A_CELU, A_SOFTSIGN, A_SHRINK,
	A_THRESHOLDED_RELU, A_MISH, A_GELU, A_COUNT
};

struct act_params {
	double lo, hi;      /* Clip's bounds (infinite when absent) */
	double alpha, beta; /* HardSigmoid's slope and offset; LeakyRelu's slope; Elu's, Selu's (beta: gamma),
			     * Celu's, ThresholdedRelu's alpha; Shrink's lambd and bias; Gelu: alpha 1 for
			     * its tanh form */
};

static double softplus_d(double v)
{
	return v > 0 ? v + log1p(exp(-v)) : log1p(exp(v));
}

/* inlined with op a constant into each of act_elems's loops */
static inline __attribute__((always_inline)) double act_d(enum act op, const struct act_params *p, double v)
{
	switch (op) {
	case A_CLIP: return v < p->lo ? p->lo : v > p->hi ? p->hi : v;
	/* fmax(0, fmin(1, t)) as compares the compiler vectorises: fmin(1, t) is t < 1 ? t : 1 (1 for a
	 * NaN t), and glibc's fmax(0, m) for a number m is m < 0 ? 0 : m (m itself when m is -0) */
	case A_HARD_SIGMOID: { /* fmin drops NaN: a NaN v stays */
		double t = p->alpha * v + p->beta;
		t = t < 1 ? t : 1;
		return isnan(v) ? v : t < 0 ? 0 : t;
	}
	case A_HARD_SWISH: {
		double t = v / 6 + 0.5;
		t = t < 1 ? t : 1;
		return v * (t < 0 ? 0 : t);
	}
	case A_LEAKY_RELU: return v >= 0 ? v : p->alpha * v;
	case A_ELU: return v > 0 ? v : p->alpha * expm1(v);
	case A_SELU: return p->beta * (v > 0 ? v : p->alpha * expm1(v));
	case A_CELU: return v > 0 ? v : p->alpha * expm1(v / p->alpha);
	case A_SOFTSIGN: return v / (1 + fabs(v));
	case A_SHRINK: return v < -p->alpha ? v + p->beta : v > p->alpha ? v - p->beta : 0;
	case A_THRESHOLDED_RELU: return v > p->alpha ? v : 0;
	case A_MISH: return v * tanh(softplus_d(v));
	case A_GELU:
		if (p->alpha) /* sqrt(2 / pi) */
			return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
		return 0.5 * v * (1 + erf(v * 0.7071067811865476));
	default: return softplus_d(v);
	}
}

/* float32's smooth activations, on vmath's approximations (its header and the test vmath/
 * activations_within_their_ulp_bounds give the accuracy): computed in double through libm they ran
 * at 4-15% of memory bandwidth. a: alpha as a float (Elu, Celu; Selu: alpha gamma), b: Selu's gamma.
 *  - Mish: x tanh(log(1 + e^x)) = x n q, n = e^x, q = (n + 2) / (n (n + 2) + 2); x itself from 20
 *    on, where n q is 1 in float, and (x h) h, h = e^(x/2), below -16, where q is 1: x h stays
 *    normal as long as the result is not 0, so the tail x < -87 keeps its bits instead of a
 *    subnormal e^x's.
 *  - Gelu's tanh form: 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), without 1 + tanh's cancellation;
 *    e^(-2u) by vm_expf_in, vm_expf's bits up to -2u = 88.37 and +inf beyond (x / inf: -0, and NaN
 *    at x = -inf as the definition gives), where vm_expf's is up to 3.4e38 (x / (1 + e^(-2u)) below
 *    4e-38). Its erf form is vm_geluf. */
static inline __attribute__((always_inline)) float act_f(enum act op, float a, float b, int tanh_gelu, float v)
{
	switch (op) {
	case A_ELU: return v > 0 ? v : a * vm_expm1f(v);
	case A_SELU: return v > 0 ? b * v : a * vm_expm1f(v);
	case A_CELU: return v > 0 ? v : a * vm_expm1f(v / a);
	case A_MISH: {
		float c = v < 20.0f ? v : 20.0f, n = vm_expf(c), h = vm_expf(0.5f * c); /* NaN passes */
		float q = (n + 2.0f) / fmaf(n, n + 2.0f, 2.0f);
		return v >= 20.0f ? v : v > -16.0f ? v * n * q : v * h * h; /* NaN: v n q */
	}
	case A_GELU:
		if (tanh_gelu) { /* -2u = x (-2k - 2k c x^2), k = sqrt(2 / pi), c = 0.044715 */
			float w = v * fmaf(v * v, -0.0713548162726f, -1.5957691216057308f);
			return v / (1.0f + vm_expf_in(w < -88.0f ? -88.0f : w > 89.0f ? 89.0f : w)); /* NaN passes */
		}
		return vm_geluf(v);
	default: return vm_softplusf(v);
	}
}

/* Clip on integers: the bounds (inputs of the input's dtype) and the clamp in int64, exact */
static int clip_int(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	if (a->dtype == DT_BOOL || a->dtype == DT_STRING || !dtype_size(a->dtype))
		return exec_fail(x, "the input must be a number, not %s", dtype_name(a->dtype));
	for (uint32_t k = 1; k < 3 && k < n->n_in; k++)
		if (in[k] && (in[k]->numel != 1 || in[k]->dtype != a->dtype))
			return exec_fail(x, "Clip's %s must be a scalar of the input's dtype", k == 1 ? "min" : "max");
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	int64_t lo = n->n_in > 1 && in[1] ? rt_get_i(in[1], 0) : INT64_MIN, hi = n->n_in > 2 && in[2] ? rt_get_i(in[2], 0) : INT64_MAX;
	for (int64_t i = 0; i < a->numel; i++) {
		int64_t v = rt_get_i(a, i);
		v = v < lo ? lo : v > hi ? hi : v;
		if (a->dtype == DT_INT64 || a->dtype == DT_UINT64)
			((int64_t *)out[0]->data)[i] = v;
		else
			rt_set(out[0], i, (double)v);
	}
	return 0;
}

/* An activation's elements [lo, hi) of float32 or float64 a into o: a piece of kernel_for. */
struct act_job {
	enum act op;
	struct act_params p;
	const void *a;
	void *o;
	int f64;
};

/* float64, and float32's piecewise ones (Clip, LeakyRelu, HardSwish, ...), compute in double and
 * round once on store, as rt_get and rt_set did element by element (exact); float32's smooth ones
 * go through act_f. With op a constant, all are loops the compiler vectorises. */
static inline __attribute__((always_inline)) void act_span(enum act op, const struct act_job *j, int64_t lo, int64_t hi)
{
	const struct act_params p = j->p;
	if (j->f64) {
		const double *a = j->a;
		double *o = j->o;
		for (int64_t i = lo; i < hi; i++)
			o[i] = act_d(op, &p, a[i]);
		return;
	}
	const float *a = j->a;
	float *o = j->o;
	if (op == A_ELU || op == A_SELU || op == A_CELU || op == A_SOFTPLUS || op == A_MISH || op == A_GELU) {
		const float fa = op == A_SELU ? (float)(p.alpha * p.beta) : (float)p.alpha, fb = (float)p.beta;
		const int tg = op == A_GELU && p.alpha;
		for (int64_t i = lo; i < hi; i++)
			o[i] = act_f(op, fa, fb, tg, a[i]);
		return;
	}
	for (int64_t i = lo; i < hi; i++)
		o[i] = (float)act_d(op, &p, (double)a[i]);
}

VM_CLONES static void act_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct act_job *j = arg;
	switch (j->op) {
#define SPAN(op)                                                                                               \
	case op: act_span(op, j, lo, hi); return;
	SPAN(A_CLIP) SPAN(A_HARD_SIGMOID) SPAN(A_HARD_SWISH) SPAN(A_LEAKY_RELU) SPAN(A_SOFTPLUS) SPAN(A_ELU)
	SPAN(A_SELU) SPAN(A_CELU) SPAN(A_SOFTSIGN) SPAN(A_SHRINK) SPAN(A_THRESHOLDED_RELU) SPAN(A_MISH) SPAN(A_GELU)
#undef SPAN
	default: return;
	}
}

static int act_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		   enum act op)
{
	const struct rtensor *a = in[0];
	static const float alpha0[A_COUNT] = {[A_HARD_SIGMOID] = 0.2f, [A_LEAKY_RELU] = 0.01f, [A_ELU] = 1.0f,
				       [A_SELU] = 1.67326319217681884765625f, [A_CELU] = 1.0f,
				       [A_THRESHOLDED_RELU] = 1.0f};
	struct act_params p = {attr_float(n, "min", -INFINITY), attr_float(n, "max", INFINITY), /* Clip-6 */
			       attr_float(n, "alpha", alpha0[op]),
			       op == A_SELU ? attr_float(n, "gamma", 1.05070102214813232421875f) : attr_float(n, "beta", 0.5f)};
	if (op == A_SHRINK) {
		p.alpha = attr_float(n, "lambd", 0.5f);
		p.beta = attr_float(n, "bias", 0.0f);
	}
	if (op == A_GELU) {
		p.alpha = attr_str_is(n, "approximate", "tanh", 0);
		if (!p.alpha && !attr_str_is(n, "approximate", "none", 1))
			return exec_fail(x, "approximate must be \"none\" or \"tanh\"");
	}
	if (op == A_CELU && !(p.alpha > 0)) /* it divides by alpha */
		return exec_fail(x, "alpha must be positive");
	if (op == A_CLIP && !is_float(a))
		return clip_int(x, n, in, out);
	if (want_float(x, a, "the input"))
		return exec_status(x);
	for (uint32_t k = 1; op == A_CLIP && k < 3 && k < n->n_in; k++)
		if (in[k] && in[k]->numel != 1)
			return exec_fail(x, "Clip's %s must be a scalar", k == 1 ? "min" : "max");
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	/* computing: every input has data */
	for (uint32_t k = 1; op == A_CLIP && k < 3 && k < n->n_in; k++)
		if (in[k])
			*(k == 1 ? &p.lo : &p.hi) = rt_get(in[k], 0);
	struct act_job j = {op, p, a->data, out[0]->data, a->dtype == DT_DOUBLE};
	kernel_for(a->numel, KERNEL_GRAIN, act_elems, &j);
	return 0;
}

#define ACT(name, op)                                                                                          \
	static int name##_run(struct exec *x, const struct node *n, struct rtensor *const *in,                 \
			      struct rtensor *const *out)                                                      \
	{                                                                                                      \
		return act_run(x, n, in, out, op);                                                             \
	}
ACT(clip, A_CLIP)
ACT(hard_sigmoid, A_HARD_SIGMOID)
ACT(hard_swish, A_HARD_SWISH)
ACT(leaky_relu, A_LEAKY_RELU)
ACT(softplus, A_SOFTPLUS)
ACT(elu, A_ELU)
ACT(selu, A_SELU)
ACT(celu, A_CELU)
ACT(softsign, A_SOFTSIGN)
ACT(shrink, A_SHRINK)
ACT(thresholded_relu, A_THRESHOLDED_RELU)
ACT(mish, A_MISH)
ACT(gelu, A_GELU)

/* g where lo < y < hi (either bound absent: NULL), else 0, for y = clamp(x, lo, hi): as
 * g sign(y - lo) sign(hi - y), each sign 1 inside and 0 at its bound (y never passes it), so that
 * the nodes are one elementwise chain (exec.c), one pass over y and g: Greater Where Less Where
 * read and wrote 28 bytes an element, 2.3 times the 12 of the chain. Where a bound holds y, the
 * product is g 0: -0 for a negative g, and NaN for an infinite or NaN g (Where gave +0), as for a
 * NaN y (Where gave 0). */
static struct value *pass_inside(struct ad *a, struct value *g, struct value *y, struct value *lo, struct value *hi)
{
	if (lo) {
		struct value *s = ad_op1(a, "Sign", ad_op2(a, "Sub", y, lo));
		g = s ? ad_op2(a, "Mul", g, s) : NULL;
	}
	if (hi && g) {
		struct value *s = ad_op1(a, "Sign", ad_op2(a, "Sub", hi, y));
		g = s ? ad_op2(a, "Mul", g, s) : NULL;
	}
	return g;
}

static int clip_grad(struct ad *a, const struct node *n)
{
	struct value *lo = n->n_in > 1 ? n->in[1] : NULL, *hi = n->n_in > 2 ? n->in[2] : NULL;
	return ad_give(a, n->in[0], pass_inside(a, ad_dy(a, n->out[0]), n->out[0], lo, hi));
}

static int hard_sigmoid_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *g = ad_op2(a, "Mul", ad_dy(a, n->out[0]), ad_scalar(a, dt, attr_float(n, "alpha", 0.2f)));
	return ad_give(a, n->in[0], pass_inside(a, g, n->out[0], ad_scalar(a, dt, 0), ad_scalar(a, dt, 1)));
}

static int hard_swish_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *x = n->in[0];
	struct value *mid = ad_op2(a, "Add", ad_op2(a, "Div", x, ad_scalar(a, dt, 3)), ad_scalar(a, dt, 0.5));
	struct value *hi[3] = {ad_op2(a, "Greater", x, ad_scalar(a, dt, 3)), ad_scalar(a, dt, 1), mid};
	struct value *lo[3] = {ad_op2(a, "Less", x, ad_scalar(a, dt, -3)), ad_scalar(a, dt, 0), ad_op(a, "Where", hi, 3)};
	return ad_give(a, x, ad_op2(a, "Mul", ad_dy(a, n->out[0]), ad_op(a, "Where", lo, 3)));
}

/* Where(y > 0, hi, lo) as s hi + (1 - s) lo, s = sign(relu(y)) (1 above 0, 0 at or below), whose
 * nodes join those computing hi and lo into one elementwise chain (exec.c): one pass over y and g
 * where Greater and Where read and wrote 18 bytes an element beside the branches' own. Each
 * branch's value is kept to the bit (its zero may change sign), when the other is finite: the
 * callers make it so for a finite g. A NaN y gives NaN (Where gave lo). */
static struct value *select_above_zero(struct ad *a, struct value *y, struct value *hi, struct value *lo, int dt)
{
	struct value *s = ad_op1(a, "Sign", ad_op1(a, "Relu", y));
	struct value *keep_lo = ad_op2(a, "Mul", ad_op2(a, "Sub", ad_scalar(a, dt, 1), s), lo);
	return ad_op2(a, "Add", ad_op2(a, "Mul", s, hi), keep_lo);
}

static int leaky_relu_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *g = ad_dy(a, n->out[0]);
	struct value *lo = ad_op2(a, "Mul", g, ad_scalar(a, dt, attr_float(n, "alpha", 0.01f)));
	return ad_give(a, n->in[0], select_above_zero(a, n->out[0], g, lo, dt));
}

static int softplus_grad(struct ad *a, const struct node *n)
{
	return ad_give(a, n->in[0], ad_op2(a, "Mul", ad_dy(a, n->out[0]), ad_op1(a, "Sigmoid", n->in[0])));
}

/* below 0, g (scale y + shift); above, g above (gamma for Selu). The low branch reads min(y, 0)
 * (-relu(-y)), finite where y is +inf, for select_above_zero. */
static int exp_linear_grad(struct ad *a, const struct node *n, double above, double scale, double shift)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *g = ad_dy(a, n->out[0]), *y = n->out[0];
	struct value *m = ad_op1(a, "Neg", ad_op1(a, "Relu", ad_op1(a, "Neg", y)));
	struct value *low = ad_op2(a, "Mul", g, ad_op2(a, "Add", ad_op2(a, "Mul", m, ad_scalar(a, dt, scale)), ad_scalar(a, dt, shift)));
	struct value *high = above == 1 ? g : ad_op2(a, "Mul", g, ad_scalar(a, dt, above));
	return ad_give(a, n->in[0], select_above_zero(a, y, high, low, dt));
}

static int elu_grad(struct ad *a, const struct node *n)
{
	return exp_linear_grad(a, n, 1, 1, attr_float(n, "alpha", 1.0f));
}

static int selu_grad(struct ad *a, const struct node *n)
{
	double al = attr_float(n, "alpha", 1.67326319217681884765625f), ga = attr_float(n, "gamma", 1.05070102214813232421875f);
	return exp_linear_grad(a, n, ga, 1, al * ga);
}

static int celu_grad(struct ad *a, const struct node *n)
{
	return exp_linear_grad(a, n, 1, 1 / attr_float(n, "alpha", 1.0f), 1);
}

/* Whether PRelu's slope is opset 6's per-channel form: before opset 7 (no NumPy broadcasting), a
 * 1-D slope of C elements for X (N, C, ...) of rank 3 or more applies along axis 1. */
static int prelu_per_channel(int opset, const struct rtensor *a, const struct rtensor *sl)
{
	return opset < 7 && sl->ndim == 1 && sl->numel > 1 && a->ndim >= 3 && sl->dims[0] == a->dims[1];
}

/* PRelu on float32 or float64 X and slope of its dtype: rows of X over which the slope's offset
 * moves by a constant step (0: one slope, per channel; 1: contiguous), the trailing dimensions merged;
 * x >= 0 ? x : x slope in the dtype, the bits of the double rule (the product of two floats is
 * exact in double, so rounding it to float is float's product). */
struct prelu_job {
	const struct rtensor *a, *sl;
	struct rtensor *o;
	int m; /* outer dimensions */
	int64_t dims[RT_MAX_DIMS], st[RT_MAX_DIMS], row, rs;
};

#define PRELU_ROW(T)                                                                                           \
	static inline __attribute__((always_inline)) void prelu_row_##T(const T *restrict x, const T *restrict s, \
									  int64_t rs, T *restrict o, int64_t n) \
	{                                                                                                      \
		if (rs == 0) {                                                                                 \
			T sv = s[0];                                                                           \
			for (int64_t j = 0; j < n; j++)                                                        \
				o[j] = x[j] >= 0 ? x[j] : x[j] * sv;                                           \
		} else if (rs == 1) {                                                                          \
			for (int64_t j = 0; j < n; j++)                                                        \
				o[j] = x[j] >= 0 ? x[j] : x[j] * s[j];                                         \
		} else {                                                                                       \
			for (int64_t j = 0; j < n; j++)                                                        \
				o[j] = x[j] >= 0 ? x[j] : x[j] * s[j * rs];                                    \
		}                                                                                              \
	}
PRELU_ROW(float)
PRELU_ROW(double)
#undef PRELU_ROW

VM_CLONES static void prelu_elems(void *arg, int64_t e0, int64_t e1)
{
	const struct prelu_job *j = arg;
	for (int64_t i = e0; i < e1;) {
		int64_t r = i / j->row, c = i % j->row, len = j->row - c < e1 - i ? j->row - c : e1 - i, at = 0;
		for (int k = j->m - 1; k >= 0; r /= j->dims[k--])
			at += r % j->dims[k] * j->st[k];
		at += c * j->rs;
		if (j->a->dtype == DT_FLOAT)
			prelu_row_float((const float *)j->a->data + i, (const float *)j->sl->data + at, j->rs,
					(float *)j->o->data + i, len);
		else
			prelu_row_double((const double *)j->a->data + i, (const double *)j->sl->data + at, j->rs,
					 (double *)j->o->data + i, len);
		i += len;
	}
}

static void prelu_typed(const struct rtensor *a, const struct rtensor *sl, struct rtensor *o, int nd,
			const int64_t *dims, const int64_t *st)
{
	struct prelu_job j = {.a = a, .sl = sl, .o = o, .m = nd, .row = 1, .rs = 0};
	memcpy(j.dims, dims, sizeof *dims * (size_t)nd);
	memcpy(j.st, st, sizeof *st * (size_t)nd);
	if (nd) { /* the last dimension, and those before it while the slope's step stays regular */
		j.m = nd - 1;
		j.row = dims[nd - 1];
		j.rs = st[nd - 1];
		while (j.m > 0 && st[j.m - 1] == j.rs * j.row)
			j.row *= dims[--j.m];
	}
	if (a->numel)
		kernel_for(a->numel, KERNEL_GRAIN, prelu_elems, &j);
}

/* PRelu(x, slope): slope broadcast to x (unidirectionally), or per channel (opset 6) */
static int prelu_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	const struct rtensor *a = in[0], *sl = in[1];
	if (want_float(x, a, "X") || want_float(x, sl, "slope"))
		return exec_status(x);
	int nd = a->ndim, legacy = prelu_per_channel(exec_opset(x), a, sl);
	int64_t dims[RT_MAX_DIMS], st[RT_MAX_DIMS] = {0}, idx[RT_MAX_DIMS] = {0};
	if (!legacy && bcast_shape(x, in, 2, &nd, dims))
		return exec_status(x);
	if (!legacy && (nd != a->ndim || memcmp(dims, a->dims, sizeof *dims * (size_t)nd)))
		return exec_fail(x, "slope must broadcast to X's shape");
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	memcpy(dims, a->dims, sizeof *dims * (size_t)nd);
	if (legacy)
		st[1] = 1;
	else
		bcast_strides(sl, nd, dims, st);
	if (a->dtype == sl->dtype) {
		prelu_typed(a, sl, out[0], nd, dims, st);
		return 0;
	}
	for (int64_t e = 0; e < a->numel; e++) {
		int64_t at = 0;
		for (int i = 0; i < nd; i++)
			at += idx[i] * st[i];
		double v = rt_get(a, e);
		rt_set(out[0], e, v >= 0 ? v : v * rt_get(sl, at));
		for (int i = nd - 1; i >= 0 && ++idx[i] == dims[i]; i--)
			idx[i] = 0;
	}
	return 0;
}

/* Training reads opset 13 forms (rewrite/upgrade.h): no opset-6 slope reaches this rule. */
static int prelu_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *x = n->in[0], *g = ad_dy(a, n->out[0]), *zero = ad_scalar(a, dt, 0);
	struct value *pos = ad_op2(a, "Greater", x, zero);
	if (ad_wants(a, x)) {
		struct value *ins[3] = {pos, g, ad_op2(a, "Mul", g, n->in[1])};
		if (ad_give(a, x, ad_op(a, "Where", ins, 3)))
			return -1;
	}
	if (!ad_wants(a, n->in[1]))
		return 0;
	struct value *ins[3] = {pos, zero, ad_op2(a, "Mul", g, x)};
	return ad_give(a, n->in[1], ad_unbroadcast(a, ad_op(a, "Where", ins, 3), n->in[1], ad_shape(a, n->out[0])));
}

/* ---- where the activations' derivatives jump (op_impl.breaks) ---- */

/* Elu: continuously differentiable when alpha is 1 */
static int elu_breaks(const struct node *n, struct rtensor *const *in, double *br)
{
	(void)in;
	br[0] = 0;
	return attr_float(n, "alpha", 1) != 1;
}

static int thresholded_relu_breaks(const struct node *n, struct rtensor *const *in, double *br)
{
	(void)in;
	br[0] = attr_float(n, "alpha", 1);
	return 1;
}

static int shrink_breaks(const struct node *n, struct rtensor *const *in, double *br)
{
	(void)in;
	br[1] = attr_float(n, "lambd", 0.5f);
	br[0] = -br[1];
	return 2;
}

/* max(0, min(1, alpha x + beta)) */
static int hard_sigmoid_breaks(const struct node *n, struct rtensor *const *in, double *br)
{
	(void)in;
	double a = attr_float(n, "alpha", 0.2f), b = attr_float(n, "beta", 0.5f);
	br[0] = fmin(-b / a, (1 - b) / a);
	br[1] = fmax(-b / a, (1 - b) / a);
	return a != 0 ? 2 : 0;
}

static int hard_swish_breaks(const struct node *n, struct rtensor *const *in, double *br)
{
	(void)n;
	(void)in;
	br[0] = -3;
	br[1] = 3;
	return 2;
}

/* Clip: its bounds as inputs (opset 11) or attributes (before) */
static int clip_breaks(const struct node *n, struct rtensor *const *in, double *br)
{
	const struct rtensor *lo = n->n_in > 1 ? in[1] : NULL, *hi = n->n_in > 2 ? in[2] : NULL;
	br[0] = lo && lo->data && lo->numel ? rt_get(lo, 0) : attr_float(n, "min", -INFINITY);
	br[1] = hi && hi->data && hi->numel ? rt_get(hi, 0) : attr_float(n, "max", INFINITY);
	return 2;
}

const struct op_impl op_clip = {.run = clip_run, .grad = clip_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1 | 1u << 2,
				.kink = KINK_BREAKS, .breaks = clip_breaks};
const struct op_impl op_hard_sigmoid = {.run = hard_sigmoid_run, .grad = hard_sigmoid_grad, .recompute = RC_CHEAP,
					.kink = KINK_BREAKS, .breaks = hard_sigmoid_breaks};
const struct op_impl op_hard_swish = {.run = hard_swish_run, .grad = hard_swish_grad, .recompute = RC_CHEAP,
				      .kink = KINK_BREAKS, .breaks = hard_swish_breaks};
const struct op_impl op_leaky_relu = {.run = leaky_relu_run, .grad = leaky_relu_grad, .recompute = RC_CHEAP,
				      .kink = KINK_BREAKS, .breaks = op_breaks_at_zero};
const struct op_impl op_softplus = {.run = softplus_run, .grad = softplus_grad, .recompute = RC_CHEAP};
const struct op_impl op_elu = {.run = elu_run, .grad = elu_grad, .recompute = RC_CHEAP, .kink = KINK_BREAKS,
			       .breaks = elu_breaks};
const struct op_impl op_selu = {.run = selu_run, .grad = selu_grad, .recompute = RC_CHEAP, .kink = KINK_BREAKS,
				.breaks = op_breaks_at_zero};
const struct op_impl op_celu = {.run = celu_run, .grad = celu_grad, .recompute = RC_CHEAP};
const struct op_impl op_prelu = {.run = prelu_run, .grad = prelu_grad, .recompute = RC_CHEAP, .kink = KINK_BREAKS,
				 .breaks = op_breaks_at_zero};

/* ---- activations exported as products: x u(x) ----
 *
 * The exporter writes GELU, SiLU and Mish as x times a function of x (Erf-GELU as
 * x (1 + erf(x / sqrt 2)), then times 1/2; SiLU as x sigmoid(x); Mish as x tanh(softplus(x))).
 * Differentiated op by op, their backward pass keeps every intermediate (x / sqrt 2, 1 + erf, ...),
 * each as large as x. Recognized at the product, the gradient is computed from x alone, as
 * PyTorch's fused backward does: d/dx [c x u(x)] = c (u + x u'), u and u' recomputed from x with at
 * most two temporaries as large as x live at once. The intermediates then get no gradient (their
 * nodes' own rules do not run), so nothing reads them and they are freed as the forward pass goes;
 * when something else reads them, their rules pass on that reader's gradient as usual. */

enum product_kind { P_SILU, P_GELU_ERF, P_GELU_TANH, P_MISH };

struct product {
	enum product_kind kind;
	struct value *x;
	double scale; /* the product is scale x u(x) */
	double k;     /* Erf-GELU: u = 1 + erf(k x); tanh-GELU: u = 1 + tanh(k (x + c x^3)) */
	double c;
};

/* Whether v is x times a known scalar (Mul either way round, or Div by one): *c the factor. */
static int times_const(const struct ad *a, const struct value *v, const struct value *x, double *c)
{
	const struct node *p;
	double d;
	if ((p = ad_made_by(v, OP_MUL)))
		for (int i = 0; i < 2; i++)
			if (p->in[i] == x && ad_known_scalar(a, p->in[1 - i], c))
				return 1;
	if ((p = ad_made_by(v, OP_DIV)) && p->in[0] == x && ad_known_scalar(a, p->in[1], &d) && d != 0) {
		*c = 1 / d;
		return 1;
	}
	return 0;
}

/* The operand of a commutative binary node besides a known scalar equal to want: NULL if none. */
static struct value *plus_const(const struct ad *a, const struct value *v, double want)
{
	const struct node *p = ad_made_by(v, OP_ADD);
	double c;
	for (int i = 0; p && i < 2; i++)
		if (ad_known_scalar(a, p->in[1 - i], &c) && c == want)
			return p->in[i];
	return NULL;
}

/* Whether v is x^3: Pow(x, 3), or x (x x) in either order. */
static int cube_of(const struct ad *a, const struct value *v, const struct value *x)
{
	const struct node *p;
	double e;
	if ((p = ad_made_by(v, OP_POW)))
		return p->in[0] == x && ad_known_scalar(a, p->in[1], &e) && e == 3;
	if (!(p = ad_made_by(v, OP_MUL)))
		return 0;
	for (int i = 0; i < 2; i++) {
		const struct node *sq = ad_made_by(p->in[1 - i], OP_MUL);
		if (p->in[i] == x && sq && sq->in[0] == x && sq->in[1] == x)
			return 1;
	}
	return 0;
}

/* Whether h = u(x) for one of the known u. */
static int match_u(const struct ad *a, const struct value *h, struct value *x, struct product *m)
{
	const struct node *p, *q;
	if ((p = ad_made_by(h, OP_SIGMOID)) && p->in[0] == x) {
		m->kind = P_SILU;
		return 1;
	}
	if ((p = ad_made_by(h, OP_TANH)) && (q = ad_made_by(p->in[0], OP_SOFTPLUS)) && q->in[0] == x) {
		m->kind = P_MISH;
		return 1;
	}
	const struct value *e = plus_const(a, h, 1);
	if ((p = ad_made_by(e, OP_ERF)) && times_const(a, p->in[0], x, &m->k)) {
		m->kind = P_GELU_ERF;
		return 1;
	}
	/* tanh(k (x + c x^3)): the sum's terms in either order, c x^3 as a product either way round */
	if (!(p = ad_made_by(e, OP_TANH)) || !(q = ad_made_by(p->in[0], OP_MUL)))
		return 0;
	for (int i = 0; i < 2; i++) {
		const struct node *s = ad_made_by(q->in[i], OP_ADD);
		if (!s || !ad_known_scalar(a, q->in[1 - i], &m->k))
			continue;
		for (int j = 0; j < 2; j++) {
			const struct node *t = ad_made_by(s->in[1 - j], OP_MUL);
			if (s->in[j] != x || !t)
				continue;
			for (int l = 0; l < 2; l++)
				if (ad_known_scalar(a, t->in[1 - l], &m->c) && cube_of(a, t->in[l], x)) {
					m->kind = P_GELU_TANH;
					return 1;
				}
		}
	}
	return 0;
}

/* Whether Mul node n is scale x u(x): one operand x or x times a scalar, the other u(x). */
static int match_product(const struct ad *a, const struct node *n, struct product *m)
{
	for (int i = 0; i < 2; i++) {
		struct value *p = n->in[i];
		const struct node *s = ad_made_by(p, OP_MUL);
		m->scale = 1;
		m->x = p;
		if (match_u(a, n->in[1 - i], p, m))
			return 1;
		for (int j = 0; s && j < 2; j++) {
			m->x = s->in[j];
			if (ad_known_scalar(a, s->in[1 - j], &m->scale) && match_u(a, n->in[1 - i], s->in[j], m))
				return 1;
		}
	}
	return 0;
}

/* u + x u' for the matched u, from x alone (dt: x's type). */
static struct value *product_slope(struct ad *a, const struct product *m, int dt)
{
	struct value *x = m->x;
#define K(v) ad_scalar(a, dt, (v))
	switch (m->kind) {
	case P_SILU: { /* s (1 + x (1 - s)) */
		struct value *s = ad_op1(a, "Sigmoid", x);
		return ad_op2(a, "Mul", s, ad_op2(a, "Add", ad_op2(a, "Mul", x, ad_op2(a, "Sub", K(1), s)), K(1)));
	}
	case P_MISH: { /* t + x (1 - t^2) sigmoid(x) */
		struct value *t = ad_op1(a, "Tanh", ad_op1(a, "Softplus", x));
		struct value *dt2 = ad_op2(a, "Sub", K(1), ad_op2(a, "Mul", t, t));
		return ad_op2(a, "Add", t, ad_op2(a, "Mul", ad_op2(a, "Mul", x, dt2), ad_op1(a, "Sigmoid", x)));
	}
	case P_GELU_ERF: { /* x (2 k / sqrt(pi)) exp(-k^2 x^2) first, then + 1 + erf(k x) */
		struct value *pdf = ad_op1(a, "Exp", ad_op2(a, "Mul", ad_op2(a, "Mul", x, x), K(-m->k * m->k)));
		struct value *xp = ad_op2(a, "Mul", x, ad_op2(a, "Mul", pdf, K(1.1283791670955126 * m->k)));
		struct value *cdf = ad_op2(a, "Add", ad_op1(a, "Erf", ad_op2(a, "Mul", x, K(m->k))), K(1));
		return ad_op2(a, "Add", cdf, xp);
	}
	case P_GELU_TANH: { /* 1 + t + x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3)) */
		struct value *sq = ad_op2(a, "Mul", x, x);
		struct value *in = ad_op2(a, "Add", ad_op2(a, "Mul", ad_op2(a, "Mul", sq, K(m->c)), x), x);
		struct value *t = ad_op1(a, "Tanh", ad_op2(a, "Mul", in, K(m->k)));
		struct value *du = ad_op2(a, "Mul", ad_op2(a, "Add", ad_op2(a, "Mul", sq, K(3 * m->c * m->k)), K(m->k)),
					  ad_op2(a, "Sub", K(1), ad_op2(a, "Mul", t, t)));
		return ad_op2(a, "Add", ad_op2(a, "Add", t, K(1)), ad_op2(a, "Mul", x, du));
	}
	}
#undef K
	return NULL;
}

int activation_product_grad(struct ad *a, const struct node *n)
{
	struct product m;
	if (!match_product(a, n, &m))
		return 0;
	if (!ad_wants(a, m.x))
		return 1;
	int dt = ad_shape(a, m.x)->dtype;
	struct value *g = ad_dy(a, n->out[0]);
	if (m.scale != 1)
		g = ad_op2(a, "Mul", g, ad_scalar(a, dt, m.scale));
	struct value *d = product_slope(a, &m, dt);
	/* a scalar constant of higher rank may have broadcast the product beyond x's shape */
	return d && !ad_give(a, m.x, ad_unbroadcast(a, ad_op2(a, "Mul", g, d), m.x, ad_shape(a, n->out[0]))) ? 1 : -1;
}

/* ---- activations that are ops of their own ---- */

/* Softsign: g / (1 + |x|)^2 */
static int softsign_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *d = ad_op2(a, "Add", ad_op1(a, "Abs", n->in[0]), ad_scalar(a, dt, 1));
	return ad_give(a, n->in[0], ad_op2(a, "Div", ad_dy(a, n->out[0]), ad_op2(a, "Mul", d, d)));
}

/* g where v > t, else 0 */
static int pass_above(struct ad *a, const struct node *n, struct value *v, double t)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *ins[3] = {ad_op2(a, "Greater", v, ad_scalar(a, dt, t)), ad_dy(a, n->out[0]), ad_scalar(a, dt, 0)};
	return ins[0] ? ad_give(a, n->in[0], ad_op(a, "Where", ins, 3)) : -1;
}

static int shrink_grad(struct ad *a, const struct node *n)
{
	return pass_above(a, n, ad_op1(a, "Abs", n->in[0]), attr_float(n, "lambd", 0.5f));
}

static int thresholded_relu_grad(struct ad *a, const struct node *n)
{
	return pass_above(a, n, n->in[0], attr_float(n, "alpha", 1.0f));
}

/* Mish and Gelu: g scale (u + x u'), the product scale x u(x)'s slope (product_slope) */
static int own_product_grad(struct ad *a, const struct node *n, const struct product *m)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *d = product_slope(a, m, dt);
	if (d && m->scale != 1)
		d = ad_op2(a, "Mul", d, ad_scalar(a, dt, m->scale));
	return d ? ad_give(a, n->in[0], ad_op2(a, "Mul", ad_dy(a, n->out[0]), d)) : -1;
}

static int mish_grad(struct ad *a, const struct node *n)
{
	struct product m = {.kind = P_MISH, .x = n->in[0], .scale = 1};
	return own_product_grad(a, n, &m);
}

/* Gelu: 0.5 x (1 + erf(x / sqrt 2)), or 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
static int gelu_grad(struct ad *a, const struct node *n)
{
	int tanh_form = attr_str_is(n, "approximate", "tanh", 0);
	struct product m = {.kind = tanh_form ? P_GELU_TANH : P_GELU_ERF, .x = n->in[0], .scale = 0.5,
			    .k = tanh_form ? 0.7978845608028654 : 0.7071067811865476, .c = 0.044715};
	return own_product_grad(a, n, &m);
}

const struct op_impl op_softsign = {.run = softsign_run, .grad = softsign_grad, .recompute = RC_CHEAP};
const struct op_impl op_shrink = {.run = shrink_run, .grad = shrink_grad, .recompute = RC_CHEAP, .kink = KINK_BREAKS,
				  .breaks = shrink_breaks};
const struct op_impl op_thresholded_relu = {.run = thresholded_relu_run, .grad = thresholded_relu_grad,
					    .recompute = RC_CHEAP, .kink = KINK_BREAKS, .breaks = thresholded_relu_breaks};
const struct op_impl op_mish = {.run = mish_run, .grad = mish_grad, .recompute = RC_CHEAP};
const struct op_impl op_gelu = {.run = gelu_run, .grad = gelu_grad, .recompute = RC_CHEAP};
