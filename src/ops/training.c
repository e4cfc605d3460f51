/* training.c - the ai.onnx.preview.training domain's optimizers: Adam, Adagrad and Momentum, run as
 * the operator documents define them (ONNX ai.onnx.preview.training opset 1), one update of n
 * tensors per node. Gradient (a graph's derivatives computed by the runtime) is not run: train
 * builds backward passes itself, in standard ops.
 *
 * Inputs: R (learning rate, scalar), T (step count, int64 scalar), then n X, n G (gradients) and
 * the state: Adam's n V and n H, Adagrad's n H, Momentum's n V. Outputs: the n new X, then the new
 * state, in the same order. Every tensor of one group has the shape of its X; float32 or float64.
 *   Adam:     g' = nc x + g; v' = a v + (1 - a) g'; h' = b h + (1 - b) g'^2;
 *             r' = r sqrt(1 - b^t) / (1 - a^t) for t > 0, else r;
 *             x' = (1 - ncp) (x - r' v' / (sqrt(h') + eps))
 *   Adagrad:  r' = r / (1 + t decay); g' = nc x + g; h' = h + g'^2; x' = x - r' g' / (sqrt(h') + eps)
 *   Momentum: g' = nc x + g; v' = a v + (t > 0 ? b : 1) g';
 *             x' = x - r v' (standard), x - r (g' + a v') (nesterov) */
#include "kernel.h"
#include "vmath.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

enum optimizer { OPT_ADAM, OPT_ADAGRAD, OPT_MOMENTUM };

struct opt_params {
	double r, t, nc, ncp, alpha, beta, eps, decay;
	int nesterov;
};

/* Checks the inputs (R, T, n groups of `per` tensors, each of its X's shape) and gives the outputs
 * their shapes: n, or -1 with the node failed. */
static int opt_shapes(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		      int per, struct opt_params *p)
{
	if (n->n_in < 2 + (uint32_t)per || (n->n_in - 2) % (uint32_t)per)
		return exec_fail(x, "takes R, T and %d tensors per updated tensor (X, G and its state), not %u inputs", per,
				 n->n_in), -1;
	int cnt = (int)((n->n_in - 2) / (uint32_t)per);
	if (n->n_out != (uint32_t)(cnt * (per - 1)))
		return exec_fail(x, "gives the %d new tensors and their new state (%d outputs), not %u", cnt,
				 cnt * (per - 1), n->n_out), -1;
	for (uint32_t k = 0; k < n->n_in; k++)
		if (!in[k])
			return exec_fail(x, "input %u is required", k), -1;
	if (in[0]->numel != 1 || in[1]->numel != 1 || !is_float(in[0]) || in[1]->dtype != DT_INT64)
		return exec_fail(x, "R must be one float and T one int64"), -1;
	for (int i = 0; i < cnt; i++)
		for (int j = 0; j < per; j++) {
			const struct rtensor *a = in[2 + i], *b = in[2 + j * cnt + i];
			int same = a->ndim == b->ndim && a->dtype == b->dtype;
			for (int d = 0; same && d < a->ndim; d++)
				same = a->dims[d] == b->dims[d];
			if (!same || !is_float(a)) {
				char s1[128], s2[128];
				return exec_fail(x, "input %d is %s %s but its X (input %d) is %s %s: each group is one float shape",
						 2 + j * cnt + i, dtype_name(b->dtype), rt_shape_str(b, s2, sizeof s2), 2 + i,
						 dtype_name(a->dtype), rt_shape_str(a, s1, sizeof s1)), -1;
			}
		}
	for (uint32_t k = 0; k < n->n_out; k++) {
		const struct rtensor *a = in[2 + k % (uint32_t)cnt];
		if (exec_shape(x, out[k], a->dtype, a->ndim, a->dims))
			return -1;
	}
	p->r = in[0]->data ? rt_get(in[0], 0) : 0;
	p->t = in[1]->data ? (double)rt_get_i(in[1], 0) : 0;
	return cnt;
}

/* One tensor's update over elements [lo, hi): a piece of kernel_for. Each element in double, rounded
 * once on store (float32 or float64, the group's dtype), as the op's formulas above. */
struct opt_job {
	enum optimizer o;
	struct opt_params p;
	double ra, bm; /* the step's rate (Adam's corrected, Adagrad's decayed) and Momentum's factor of g' */
	int f64;
	const void *x, *g, *s1, *s2;
	void *xn, *s1n, *s2n;
};

static inline __attribute__((always_inline)) double opt_ld(const void *p, int f64, int64_t e)
{
	return f64 ? ((const double *)p)[e] : ((const float *)p)[e];
}

static inline __attribute__((always_inline)) void opt_st(void *p, int f64, int64_t e, double v)
{
	if (f64)
		((double *)p)[e] = v;
	else
		((float *)p)[e] = (float)v;
}

/* the tensors restrict-qualified: distinct buffers, so the loop needs no run-time alias checks */
static inline __attribute__((always_inline)) void
opt_span(enum optimizer o, int f64, const struct opt_job *j, const void *restrict X, const void *restrict G,
	 const void *restrict S1, const void *restrict S2, void *restrict Xn, void *restrict S1n, void *restrict S2n,
	 int64_t lo, int64_t hi)
{
	const struct opt_params p = j->p;
	const double ra = j->ra, bm = j->bm;
	for (int64_t e = lo; e < hi; e++) {
		double xv = opt_ld(X, f64, e), g = p.nc * xv + opt_ld(G, f64, e), s1 = opt_ld(S1, f64, e), xn, s1n;
		if (o == OPT_ADAM) {
			s1n = p.alpha * s1 + (1 - p.alpha) * g;
			double s2n = p.beta * opt_ld(S2, f64, e) + (1 - p.beta) * g * g;
			xn = (1 - p.ncp) * (xv - ra * (s1n / (sqrt(s2n) + p.eps)));
			opt_st(S2n, f64, e, s2n);
		} else if (o == OPT_ADAGRAD) {
			s1n = s1 + g * g;
			xn = xv - ra * g / (sqrt(s1n) + p.eps);
		} else {
			s1n = p.alpha * s1 + bm * g;
			xn = p.nesterov ? xv - p.r * (g + p.alpha * s1n) : xv - p.r * s1n;
		}
		opt_st(Xn, f64, e, xn);
		opt_st(S1n, f64, e, s1n);
	}
}

VM_CLONES static void opt_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct opt_job *j = arg;
#define SPAN(o)                                                                                                \
	case o:                                                                                                \
		if (j->f64)                                                                                    \
			opt_span(o, 1, j, j->x, j->g, j->s1, j->s2, j->xn, j->s1n, j->s2n, lo, hi);            \
		else                                                                                           \
			opt_span(o, 0, j, j->x, j->g, j->s1, j->s2, j->xn, j->s1n, j->s2n, lo, hi);            \
		return;
	switch (j->o) {
	SPAN(OPT_ADAM) SPAN(OPT_ADAGRAD) SPAN(OPT_MOMENTUM)
	}
#undef SPAN
}

static int opt_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		   enum optimizer o)
{
	int per = o == OPT_ADAM ? 4 : 3;
	struct opt_params p = {
		.nc = attr_float(n, "norm_coefficient", 0),
		.ncp = attr_float(n, "norm_coefficient_post", 0),
		.alpha = attr_float(n, "alpha", o == OPT_ADAM ? 0.9f : 0),
		.beta = attr_float(n, "beta", o == OPT_ADAM ? 0.999f : 0),
		.eps = attr_float(n, "epsilon", o == OPT_MOMENTUM ? 0 : 1e-6f), /* the schemas' defaults */
		.decay = attr_float(n, "decay_factor", 0),
		.nesterov = attr_str_is(n, "mode", "nesterov", 0),
	};
	if (o == OPT_MOMENTUM && (!node_attr(n, "alpha") || !node_attr(n, "beta") || !node_attr(n, "mode") ||
				  !node_attr(n, "norm_coefficient")))
		return exec_fail(x, "Momentum needs the attributes alpha, beta, mode and norm_coefficient");
	if (o == OPT_MOMENTUM && !p.nesterov && !attr_str_is(n, "mode", "standard", 0))
		return exec_fail(x, "mode must be \"standard\" or \"nesterov\"");
	int cnt = opt_shapes(x, n, in, out, per, &p);
	if (cnt < 0)
		return exec_status(x);
	double ra = p.r;
	if (o == OPT_ADAM && p.t > 0)
		ra = p.r * sqrt(1 - pow(p.beta, p.t)) / (1 - pow(p.alpha, p.t));
	if (o == OPT_ADAGRAD)
		ra = p.r / (1 + p.t * p.decay);
	double bm = p.t > 0 ? p.beta : 1;
	for (int i = 0; i < cnt; i++) {
		const struct rtensor *X = in[2 + i];
		struct rtensor *Xn = out[i], *S1n = out[cnt + i], *S2n = o == OPT_ADAM ? out[2 * cnt + i] : NULL;
		if (!exec_alloc(x, Xn, X->dtype, X->ndim, X->dims) || !exec_alloc(x, S1n, X->dtype, X->ndim, X->dims) ||
		    (S2n && !exec_alloc(x, S2n, X->dtype, X->ndim, X->dims)))
			return exec_status(x);
		struct opt_job j = {o, p, ra, bm, X->dtype == DT_DOUBLE, X->data, in[2 + cnt + i]->data,
				    in[2 + 2 * cnt + i]->data, o == OPT_ADAM ? in[2 + 3 * cnt + i]->data : NULL,
				    Xn->data, S1n->data, S2n ? S2n->data : NULL};
		kernel_for(X->numel, KERNEL_GRAIN, opt_elems, &j);
	}
	return 0;
}

static int adam_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return opt_run(x, n, in, out, OPT_ADAM);
}

static int adagrad_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return opt_run(x, n, in, out, OPT_ADAGRAD);
}

static int momentum_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return opt_run(x, n, in, out, OPT_MOMENTUM);
}

static int gradient_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n, (void)in, (void)out;
	return exec_fail(x, "the Gradient op (derivatives the runtime computes) is not run: 'graphdiet train' writes the "
			    "backward pass in standard ops instead");
}

const struct op_impl op_pt_adam = {.run = adam_run, .recompute = RC_NEVER, .nodiff = ~0u};
const struct op_impl op_pt_adagrad = {.run = adagrad_run, .recompute = RC_NEVER, .nodiff = ~0u};
const struct op_impl op_pt_momentum = {.run = momentum_run, .recompute = RC_NEVER, .nodiff = ~0u};
const struct op_impl op_pt_gradient = {.run = gradient_run, .recompute = RC_NEVER, .nodiff = ~0u};
