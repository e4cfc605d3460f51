/* kernels/elem.c - #52's kernel tests, part of test_kernels: elementwise kernels (activations, casts
 * and logic, trig and Mod, Pow). Each fast path against a reference written here, bit for bit or
 * within a stated bound. */
#include "kernels.h"

/* #52 elemfast: the activations as typed loops over the whole tensor, and Dropout of ratio 0 a copy */

/* What ONNX and PyTorch define each activation as, in double, with the default attributes (Clip
 * given [-1.5, 6] as inputs): the reference the kernels must match bit for bit. */
static double act_ref(const char *op, double v)
{
	const double selu_a = 1.67326319217681884765625, selu_g = 1.05070102214813232421875;
	double sp = v > 0 ? v + log1p(exp(-v)) : log1p(exp(v));
	if (!strcmp(op, "Clip"))
		return v < -1.5 ? -1.5 : v > 6 ? 6 : v;
	if (!strcmp(op, "HardSigmoid"))
		return isnan(v) ? v : fmax(0, fmin(1, (double)0.2f * v + 0.5));
	if (!strcmp(op, "HardSwish"))
		return v * fmax(0, fmin(1, v / 6 + 0.5));
	if (!strcmp(op, "LeakyRelu"))
		return v >= 0 ? v : (double)0.01f * v;
	if (!strcmp(op, "Elu") || !strcmp(op, "Celu"))
		return v > 0 ? v : expm1(v);
	if (!strcmp(op, "Selu"))
		return selu_g * (v > 0 ? v : selu_a * expm1(v));
	if (!strcmp(op, "Softplus"))
		return sp;
	if (!strcmp(op, "Softsign"))
		return v / (1 + fabs(v));
	if (!strcmp(op, "Shrink"))
		return v < -0.5 ? v : v > 0.5 ? v : 0;
	if (!strcmp(op, "ThresholdedRelu"))
		return v > 1 ? v : 0;
	if (!strcmp(op, "Mish"))
		return v * tanh(sp);
	if (!strcmp(op, "Relu")) /* float64 only below, as Tanh and Sigmoid */
		return v > 0 || isnan(v) ? v : 0;
	if (!strcmp(op, "Tanh"))
		return tanh(v);
	if (!strcmp(op, "Sigmoid"))
		return v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
	return 0.5 * v * (1 + erf(v * 0.7071067811865476)); /* Gelu */
}

/* Whether op's float32 kernel is vmath's approximation (#52 actfast), held to an ulp bound in
 * vmath/activations_within_their_ulp_bounds instead */
static int smooth(const char *op)
{
	static const char *const ops[] = {"Elu", "Selu", "Celu", "Softplus", "Mish", "Gelu", NULL};
	for (const char *const *o = ops; *o; o++)
		if (!strcmp(op, *o))
			return 1;
	return 0;
}

/* Every activation of activation.c on float32 and float64 (Relu, Tanh, Sigmoid and the smooth
 * ones: float64, whose loops compute in double; float32's use vmath's approximations), NaN, infinities, signed zeros,
 * subnormals, the breakpoints and a sweep, over more elements than one kernel piece (vector tails
 * and piece edges), each output the reference's bits (NaN kept, its payload too). */
Test(exec, activations_match_their_definitions_bit_for_bit)
{
	static const char *const ops[] = {"Clip", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu", "Celu",
					  "Softplus", "Softsign", "Shrink", "ThresholdedRelu", "Mish", "Gelu", "Relu", "Tanh",
					  "Sigmoid", NULL};
	static const double special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-40, 1e-310, -1e-310,
					 -1.5, 6, -3, 3, -2.5, 2.5, 0.5, -0.5, 1, -1, 1e30, -1e30, 88.7, -88.7, 1e-8};
	enum { N = 3 * 8192 + 5, NS = sizeof special / sizeof *special };
	/* p64, p32: the inputs; v64, v32: the buffers a run is given, which it may reuse for its output */
	static double p64[N], v64[N];
	static float p32[N], v32[N];
	uint32_t s = 12345;
	for (int i = 0; i < N; i++) {
		s = s * 1664525u + 1013904223u;
		p64[i] = i < NS ? special[i] : ((double)(s >> 8) / (1 << 24) - 0.5) * 24;
		p32[i] = (float)p64[i];
	}
	for (const char *const *op = ops; *op; op++)
		for (int f64 = !strcmp(*op, "Relu") || !strcmp(*op, "Tanh") || !strcmp(*op, "Sigmoid") || smooth(*op); f64 < 2;
		     f64++) {
			const char *dt = f64 ? "float64" : "float32";
			char text[800];
			memcpy(v64, p64, sizeof v64);
			memcpy(v32, p32, sizeof v32);
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%d]}]\n"
				 "params: [{name: lo, dtype: %s, shape: [], data: [-1.5]}, {name: hi, dtype: %s, shape: [], "
				 "data: [6]}]\nnodes:\n  - {op: %s, inputs: [x%s], outputs: [y]}\noutputs: [{name: y}]\n",
				 dt, N, dt, dt, *op, strcmp(*op, "Clip") ? "" : ", lo, hi");
			struct graph *g = load_text("act_bits.yaml", text);
			struct rtensor t = {.dtype = f64 ? DT_DOUBLE : DT_FLOAT, .ndim = 1, .dims = {N}, .numel = N,
					    .data = f64 ? (void *)v64 : (void *)v32, .nbytes = f64 ? sizeof v64 : sizeof v32,
					    .known = 1};
			const char *name = "x";
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
			struct exec *x = exec_run(g, &o, NULL, &e);
			cr_assert(x, "%s %s: %s", *op, dt, e.msg);
			const struct rtensor *y = exec_value(x, g->outputs[0]);
			int64_t wrong = 0, first = -1;
			for (int i = 0; i < N; i++) {
				double r = act_ref(*op, f64 ? p64[i] : (double)p32[i]);
				int same;
				if (f64) {
					same = !memcmp(&((const double *)y->data)[i], &r, sizeof r);
				} else {
					float rf = (float)r;
					same = !memcmp(&((const float *)y->data)[i], &rf, sizeof rf);
				}
				if (!same && !wrong++)
					first = i;
			}
			cr_expect_eq(wrong, 0, "%s %s: %lld outputs differ from the definition, the first at x = %.17g: %.17g",
				     *op, dt, (long long)wrong, first < 0 ? 0 : p64[first], first < 0 ? 0 : rt_get(y, first));
			exec_free(x);
			graph_free(g);
		}
}

/* Dropout of ratio 0 in training keeps every element scaled by 1: its output is its input bit for
 * bit, a signalling NaN's payload included (a product, even by 1, would quiet it: only a copy that
 * draws and scales nothing keeps it), and its mask is all true; so too on float64. */
Test(exec, dropout_of_ratio_zero_copies_its_input)
{
	enum { N = 2 * 8192 + 3 };
	static float v32[N];
	static double v64[N];
	const uint32_t snan32 = 0x7f800001u;
	const uint64_t snan64 = 0x7ff0000000000001ull;
	for (int i = 0; i < N; i++) {
		v32[i] = (float)(i % 13) * 0.37f - 2.0f;
		v64[i] = (double)v32[i] / 3;
	}
	memcpy(&v32[5], &snan32, sizeof snan32);
	memcpy(&v64[5], &snan64, sizeof snan64);
	v32[6] = -0.0f;
	v64[6] = -0.0;
	v32[7] = 1e-41f;
	static uint8_t want[sizeof v64]; /* the inputs' bits, apart from the buffers the run is given */
	for (int f64 = 0; f64 < 2; f64++) {
		const char *dt = f64 ? "float64" : "float32";
		char text[600];
		memcpy(want, f64 ? (void *)v64 : (void *)v32, f64 ? sizeof v64 : sizeof v32);
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%d]}]\n"
			 "params: [{name: r, dtype: float32, shape: [], data: [0]}, {name: t, dtype: bool, shape: [], data: [true]}]\n"
			 "nodes:\n  - {op: Dropout, inputs: [x, r, t], outputs: [y, m], attrs: {seed: 3}}\n"
			 "outputs: [{name: y}, {name: m}]\n", dt, N);
		struct graph *g = load_text("drop0.yaml", text);
		struct rtensor t = {.dtype = f64 ? DT_DOUBLE : DT_FLOAT, .ndim = 1, .dims = {N}, .numel = N,
				    .data = f64 ? (void *)v64 : (void *)v32, .nbytes = f64 ? sizeof v64 : sizeof v32, .known = 1};
		const char *name = "x";
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s: %s", dt, e.msg);
		const struct rtensor *y = exec_value(x, g->outputs[0]), *m = exec_value(x, g->outputs[1]);
		cr_assert_eq(y->nbytes, t.nbytes);
		int64_t diff = 0, dropped = 0;
		for (int i = 0; i < N; i++) {
			diff += memcmp((const char *)y->data + (size_t)i * (f64 ? 8 : 4), want + (size_t)i * (f64 ? 8 : 4), f64 ? 8 : 4) != 0;
			dropped += !((const uint8_t *)m->data)[i];
		}
		cr_expect_eq(diff, 0, "%s: %lld outputs are not their input's bits (element 5, a signalling NaN: %s)", dt,
			     (long long)diff,
			     memcmp((const char *)y->data + (f64 ? 40 : 20), want + (f64 ? 40 : 20), f64 ? 8 : 4)
				     ? "quieted" : "kept");
		cr_expect_eq(dropped, 0, "%s: the mask drops %lld elements", dt, (long long)dropped);
		exec_free(x);
		graph_free(g);
	}
}

/* #52 actfast: float32's smooth activations on vmath's approximations, held to measured ulp bounds */

/* The definitions in double (Celu with alpha 2, the others with their defaults). */
static double smooth_ref(const char *op, double v)
{
	const double selu_a = 1.67326319217681884765625, selu_g = 1.05070102214813232421875;
	double sp = v > 0 ? v + log1p(exp(-v)) : log1p(exp(v));
	if (!strcmp(op, "Elu"))
		return v > 0 ? v : expm1(v);
	if (!strcmp(op, "Celu"))
		return v > 0 ? v : 2 * expm1(v / 2);
	if (!strcmp(op, "Selu"))
		return selu_g * (v > 0 ? v : selu_a * expm1(v));
	if (!strcmp(op, "Softplus"))
		return sp;
	if (!strcmp(op, "Mish"))
		return v * tanh(sp);
	if (!strcmp(op, "GeluTanh"))
		return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
	return 0.5 * v * (1 + erf(v * 0.7071067811865476)); /* Gelu */
}

/* |y - r| in units of the float spacing at max(|r|, floor) (2^-149 below FLT_MIN: subnormal results
 * are held to their absolute spacing); NaN must stay NaN and infinities must be exact. */
static double ulps_above(float y, double r, double floor)
{
	if (isnan(r) || isinf((float)r)) /* (float)r: what rounding r to float gives, infinity from 2^128 on */
		return (isnan(r) && isnan(y)) || y == (float)r ? 0 : INFINITY;
	float a = (float)fmax(fabs(r), floor);
	double u = a < 1.17549435e-38f ? 0x1p-149 : isinf(a) ? 0x1p104 : (double)(nextafterf(a, INFINITY) - a);
	return fabs((double)y - r) / u;
}

/* Every 2048th float (each exponent of both signs, subnormals, infinities and NaNs: the bit
 * patterns i 2^11 + a hash of i), 2^21 evenly spaced in [-25, 25], and the special values; each
 * op's worst error against its definition in double, and vm_expm1f's against expm1 (its header's
 * bounds, measured on 2^24 inputs). The Gelus' errors are in ulps of max(|y|, |x| / 2): 1 + erf
 * (and 1 + tanh) cancel for x < 0, where float's erf near -1, PyTorch's (Sleef) and
 * onnxruntime's included, is worth an absolute 2^-24 or so; the others in ulps of y. */
Test(vmath, activations_within_their_ulp_bounds, .timeout = 120)
{
	static const struct { const char *op, *attrs; double floor, most; } ops[] = {
		{"Elu", "", 0, 2}, {"Selu", "", 0, 3}, {"Celu", ", attrs: {alpha: 2.0}", 0, 3},
		{"Softplus", "", 0, 3}, {"Mish", "", 0, 4}, {"Gelu", "", 0.5, 3},
		{"GeluTanh", ", attrs: {approximate: tanh}", 0.5, 3},
	};
	static const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f,
					1.17549435e-38f, -1.17549435e-38f, 3.4028235e38f, -3.4028235e38f, 88.72f, -88.72f,
					-87.4f, -103.9f, -104.5f, 20, -20, 30, -30, 1e-8f, -1e-8f, 0.5f, -0.5f, 1, -1};
	enum { NSP = sizeof special / sizeof *special, NB = 1 << 21, N = NSP + 2 * NB };
	float *in = xmalloc(N * sizeof *in), *buf = xmalloc(N * sizeof *buf);
	cr_assert(in && buf);
	memcpy(in, special, sizeof special);
	for (uint32_t i = 0; i < NB; i++) {
		uint32_t u = i << 11 | ((i * 2654435761u) >> 21);
		memcpy(&in[NSP + i], &u, sizeof u);
		in[NSP + NB + i] = -25.0f + 50.0f * (float)i / (float)NB;
	}
	double worst = 0;
	float at = 0;
	for (int i = 0; i < N; i++) {
		double e = ulps_above(vm_expm1f(in[i]), expm1((double)in[i]), 0);
		if (e > worst)
			worst = e, at = in[i];
	}
	cr_expect_leq(worst, 2, "vm_expm1f: %.2f ulp at %a", worst, at);
	worst = 0;
	for (int i = 0; i < N; i++) {
		float v = fabsf(in[i]); /* and the negative ones: NaN */
		double e = fmax(ulps_above(vm_logf(v), log((double)v), 0), ulps_above(vm_logf(-v), v ? log(-(double)v) : -INFINITY, 0));
		if (e > worst)
			worst = e, at = v;
	}
	cr_expect_leq(worst, 2, "vm_logf: %.2f ulp at %a", worst, at);
	for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
		char text[600];
		const char *op = strncmp(ops[k].op, "Gelu", 4) ? ops[k].op : "Gelu";
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 20\ninputs: [{name: x, dtype: float32, shape: [%d]}]\n"
			 "nodes:\n  - {op: %s, inputs: [x], outputs: [y]%s}\noutputs: [{name: y}]\n", N, op, ops[k].attrs);
		struct graph *g = load_text("act_ulps.yaml", text);
		memcpy(buf, in, N * sizeof *buf);
		struct rtensor t = {.dtype = DT_FLOAT, .ndim = 1, .dims = {N}, .numel = N, .data = buf,
				    .nbytes = N * sizeof *buf, .known = 1};
		const char *name = "x";
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s: %s", ops[k].op, e.msg);
		const float *y = exec_value(x, g->outputs[0])->data;
		worst = 0;
		at = 0;
		for (int i = 0; i < N; i++) {
			double r = smooth_ref(ops[k].op, in[i]), err = ulps_above(y[i], r, ops[k].floor * fabsf(in[i]));
			if (err > worst)
				worst = err, at = in[i];
		}
		cr_expect_leq(worst, ops[k].most, "%s: %.2f ulp at x = %a (%.9g)", ops[k].op, worst, at, at);
		exec_free(x);
		graph_free(g);
	}
	xfree(in);
	xfree(buf);
}

/* Differentiates sum(op(w) v) for w = (i mod 17) / 2 - 1 (in [-1, 7]: Clip's bounds 0 and 6 among
 * them) and runs the training graph on a random v: *g the graph, *x the run, its stats in *st. */
static void grad_of_w(const char *node, const char *params, struct graph **g, struct exec **x, struct exec_stats *st)
{
	enum { N = 1000 };
	static char text[16384];
	int len = snprintf(text, sizeof text,
			   "graphdiet: 1\nopset: 17\ninputs: [{name: v, dtype: float32, shape: [%d]}]\n"
			   "params: [%s{name: w, dtype: float32, shape: [%d], data: [", N, params, N);
	for (int i = 0; i < N; i++)
		len += snprintf(text + len, sizeof text - (size_t)len, "%s%g", i ? ", " : "", (i % 17) * 0.5 - 1);
	snprintf(text + len, sizeof text - (size_t)len,
		 "]}]\nnodes:\n  - %s\n  - {op: Mul, inputs: [y, v], outputs: [p]}\n"
		 "  - {op: ReduceSum, inputs: [p], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n", node);
	*g = load_text("grad_of_w.yaml", text);
	const char *want[] = {"w"};
	struct autodiff_opts ao = {.params = want, .n_params = 1};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert(!autodiff(*g, &ao, &res, &e), "%s", e.msg);
	struct exec_opts o = {.random_inputs = 1, .seed = 5};
	memset(st, 0, sizeof *st);
	*x = exec_run(*g, &o, st, &e);
	cr_assert(*x, "%s", e.msg);
}

/* The graph's nodes of op, and w's gradient (dw) with v's values (v) */
static int count_op(const struct graph *g, enum op_id op)
{
	int c = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		c += g->nodes[i]->op == op;
	return c;
}

static void dw_and_v(const struct graph *g, const struct exec *x, const float **dw, const float **v)
{
	*dw = *v = NULL;
	for (uint32_t k = 0; k < g->n_outputs; k++)
		if (!strcmp(g->outputs[k]->name, "w_grad"))
			*dw = exec_value(x, g->outputs[k])->data;
	for (uint32_t k = 0; k < g->n_inputs; k++)
		if (!strcmp(g->inputs[k]->name, "v"))
			*v = exec_value(x, g->inputs[k])->data;
	cr_assert(*dw && *v);
}

/* The piecewise activations' gradients are one fused chain over y and g, no Greater Where Less
 * Where: Clip's (and HardSigmoid's) as g sign(y - lo) sign(hi - y), g strictly inside the bounds
 * and 0 on them and beyond; LeakyRelu's, Elu's (and Selu's, Celu's) as s hi + (1 - s) lo,
 * s = sign(relu(y)), the same bits as the Where they replace (Elu's low side: g (y + 1), y the
 * float Elu of w). */
Test(exec, piecewise_activation_gradients_are_one_fused_chain)
{
	static const struct { const char *node, *params; int op; } cases[] = {
		{"{op: Clip, inputs: [w, lo, hi], outputs: [y]}",
		 "{name: lo, dtype: float32, shape: [], data: [0]}, {name: hi, dtype: float32, shape: [], data: [6]}, ", 0},
		{"{op: LeakyRelu, inputs: [w], outputs: [y]}", "", 1},
		{"{op: Elu, inputs: [w], outputs: [y]}", "", 2},
	};
	for (int c = 0; c < 3; c++) {
		struct graph *g;
		struct exec *x;
		struct exec_stats st;
		grad_of_w(cases[c].node, cases[c].params, &g, &x, &st);
		cr_expect_eq(count_op(g, OP_WHERE) + count_op(g, OP_GREATER) + count_op(g, OP_LESS), 0,
			     "%s: the gradient has Where, Greater or Less nodes", cases[c].node);
		cr_expect_geq(st.chain_nodes, 6, "%s: %llu nodes in chains", cases[c].node, (unsigned long long)st.chain_nodes);
		const float *dw, *v;
		dw_and_v(g, x, &dw, &v);
		for (int i = 0; i < 1000; i++) {
			float w = (float)((i % 17) * 0.5 - 1), want;
			if (cases[c].op == 0)
				want = w > 0 && w < 6 ? v[i] : 0.0f;
			else if (cases[c].op == 1)
				want = w > 0 ? v[i] : v[i] * 0.01f;
			else /* the kernel's y: Elu's float32 approximation */
				want = w > 0 ? v[i] : v[i] * (vm_expm1f(w) + 1.0f);
			cr_expect_eq(dw[i], want, "%s: w = %g: dw %.9g, want %.9g", cases[c].node, w, dw[i], want);
		}
		exec_free(x);
		graph_free(g);
	}
}

/* Dropout of ratio 0 in training: its gradient is g itself, no Cast Mul Div of the mask; nothing
 * reads the mask, so the forward Dropout runs as a no-op. */
Test(exec, dropout_of_ratio_zero_passes_its_gradient_through)
{
	struct graph *g;
	struct exec *x;
	struct exec_stats st;
	grad_of_w("{op: Dropout, inputs: [w, r, t], outputs: [y]}",
		  "{name: r, dtype: float32, shape: [], data: [0]}, {name: t, dtype: bool, shape: [], data: [true]}, ", &g, &x,
		  &st);
	cr_expect_eq(count_op(g, OP_CAST) + count_op(g, OP_DIV), 0, "the gradient reads the mask");
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]->op == OP_DROPOUT)
			cr_expect(g->nodes[i]->n_out < 2 || !g->nodes[i]->out[1], "Dropout's mask is made");
	const float *dw, *v;
	dw_and_v(g, x, &dw, &v);
	cr_expect(!memcmp(dw, v, 1000 * sizeof *dw), "dw is not g's bits");
	exec_free(x);
	graph_free(g);
}

/* #52 castfast: Cast's typed loops (and IsNaN, IsInf, Not, And, Or, Xor on whole tensors) against
 * the rule of the per-element rt_get/rt_set loop they replace, bit for bit. */

/* A one-node graph run: node's input x of dtype dt, n elements at data; input x2: x reversed. y is its output. */
struct cf_run {
	struct graph *g;
	struct exec *x;
	void *copy[2]; /* the inputs given, which the run may reuse */
	const struct rtensor *y;
};

static void cf_run(struct cf_run *r, const char *node, int dt, int64_t n, const void *data)
{
	char text[600];
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%lld]}, {name: x2, dtype: %s, shape: [%lld]}]\n"
		 "nodes:\n  - %s\noutputs: [{name: y}]\n",
		 dtype_name(dt), (long long)n, dtype_name(dt), (long long)n, node);
	r->g = load_text("castfast.yaml", text);
	size_t es = dtype_size(dt);
	struct rtensor t[2];
	for (int k = 0; k < 2; k++) {
		r->copy[k] = xmalloc(n * es + 1);
		for (int64_t i = 0; i < n; i++)
			memcpy((char *)r->copy[k] + i * es, (const char *)data + (k ? n - 1 - i : i) * es, es);
		t[k] = (struct rtensor){.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = r->copy[k], .nbytes = n * es, .known = 1};
	}
	const char *names[2] = {"x", "x2"};
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
	r->x = exec_run(r->g, &o, NULL, &e);
	cr_assert(r->x, "%s: %s", node, e.msg);
	r->y = exec_value(r->x, r->g->outputs[0]);
}

static void cf_done(struct cf_run *r)
{
	exec_free(r->x);
	graph_free(r->g);
	free(r->copy[0]);
	free(r->copy[1]);
}

/* Cast and CastLike between float32, float64, float16, bfloat16, bool, int32 and int64, over 0, 1,
 * 7 and 65536 + 8195 elements (every float16 and bfloat16 pattern, vector tails and kernel
 * pieces): a copy to the same dtype, else the rule of the rt_get/rt_set loop (int -> int: rt_get_i/rt_set_i, -> bool: != 0, bool
 * -> float32/float64: nonzero is 1, else rt_set(rt_get)), byte for byte. */
Test(exec, cast_matches_the_per_element_rule_bit_for_bit)
{
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16, DT_BOOL, DT_INT32, DT_INT64};
	static const int64_t ns[] = {0, 1, 7, 65536 + 8195};
	for (int a = 0; a < 7; a++)
		for (int b = 0; b < 7; b++)
			for (int k = 0; k < 4; k++) {
				int from = dts[a], to = dts[b];
				int64_t n = ns[k];
				void *data = xmalloc(n * 8 + 1), *ref = xmalloc(n * 8 + 1);
				cf_fill(from, data, n, (uint64_t)(a * 7 + b) * 1000 + (uint64_t)k);
				struct rtensor src = {.dtype = from, .ndim = 1, .dims = {n}, .numel = n, .data = data};
				struct rtensor r = {.dtype = to, .ndim = 1, .dims = {n}, .numel = n, .data = ref};
				for (int64_t i = 0; i < n; i++)
					if (from == to) /* a copy */
						memcpy((char *)ref + i * dtype_size(to), (const char *)data + i * dtype_size(to), dtype_size(to));
					else if (!dtype_is_float(from) && !dtype_is_float(to))
						rt_set_i(&r, i, rt_get_i(&src, i));
					else if (to == DT_BOOL)
						rt_set(&r, i, rt_get(&src, i) != 0);
					else if (from == DT_BOOL && (to == DT_FLOAT || to == DT_DOUBLE))
						rt_set(&r, i, ((const uint8_t *)data)[i] != 0);
					else
						rt_set(&r, i, rt_get(&src, i));
				char node[200];
				/* CastLike to float16, like x's own Cast to it */
				if (to == DT_FLOAT16 && k == 3)
					snprintf(node, sizeof node, "{op: Cast, inputs: [x], outputs: [h], attrs: {to: 10}}\n"
						 "  - {op: CastLike, inputs: [x, h], outputs: [y]}");
				else
					snprintf(node, sizeof node, "{op: Cast, inputs: [x], outputs: [y], attrs: {to: %d}}", to);
				struct cf_run run;
				cf_run(&run, node, from, n, data);
				const struct rtensor *y = run.y;
				cr_assert_eq(y->dtype, to);
				size_t es = dtype_size(to);
				int64_t wrong = 0, first = -1;
				for (int64_t i = 0; i < n; i++)
					if (memcmp((const char *)y->data + i * es, (const char *)ref + i * es, es) && !wrong++)
						first = i;
				uint64_t got = 0, want = 0, in = 0;
				if (first >= 0) {
					memcpy(&got, (const char *)y->data + first * es, es);
					memcpy(&want, (const char *)ref + first * es, es);
					memcpy(&in, (const char *)data + first * dtype_size(from), dtype_size(from));
				}
				cr_expect_eq(wrong, 0, "%s -> %s, %lld elements: %lld differ, the first #%lld (bits %llx): %llx, not %llx",
					     dtype_name(from), dtype_name(to), (long long)n, (long long)wrong, (long long)first,
					     (unsigned long long)in, (unsigned long long)got, (unsigned long long)want);
				cf_done(&run);
				free(data);
				free(ref);
			}
}

/* IsNaN, IsInf (each detect_positive/detect_negative pair) on float32, float64, float16 and
 * bfloat16 (these two widened to float32 by the executor), and Not, And, Or, Xor on bool (any nonzero byte true; And's second operand x
 * reversed), over 0, 1, 7 and 73731 elements: the per-element rule (isnan and isinf of rt_get,
 * !, &&, ||) bit for bit. */
Test(exec, is_nan_is_inf_and_logic_match_the_per_element_rule)
{
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16, DT_BOOL};
	static const int64_t ns[] = {0, 1, 7, 65536 + 8195};
	static const char *const ops[] = {"IsNaN", "IsInf", "IsInf 0 1", "IsInf 1 0", "IsInf 0 0", "Not", "And", "Or", "Xor"};
	for (int d = 0; d < 5; d++)
		for (int k = 0; k < 4; k++)
			for (int op = 0; op < 9; op++) {
				int dt = dts[d];
				if ((dt == DT_BOOL) != (op >= 5))
					continue;
				int64_t n = ns[k];
				void *data = xmalloc(n * 8 + 1);
				cf_fill(dt, data, n, (uint64_t)(d * 9 + op) * 100 + (uint64_t)k);
				struct rtensor src = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = data};
				const uint8_t *b = data;
				char node[200];
				int pos = op != 2 && op != 4, neg = op != 3 && op != 4;
				if (op >= 1 && op <= 4)
					snprintf(node, sizeof node, "{op: IsInf, inputs: [x], outputs: [y], attrs: {detect_positive: %d, detect_negative: %d}}",
						 pos, neg);
				else
					snprintf(node, sizeof node, "{op: %s, inputs: [x%s], outputs: [y]}", ops[op], op >= 6 ? ", x2" : "");
				struct cf_run run;
				cf_run(&run, node, dt, n, data);
				cr_assert_eq(run.y->dtype, DT_BOOL);
				int64_t wrong = 0, first = -1;
				for (int64_t i = 0; i < n; i++) {
					double v = dt == DT_BOOL ? 0 : rt_get(&src, i);
					int p = b[i] != 0, q = b[n - 1 - i] != 0;
					uint8_t r = op == 0 ? isnan(v) : op <= 4 ? isinf(v) && (v > 0 ? pos : neg)
						  : op == 5 ? !b[i] : op == 6 ? p && q : op == 7 ? p || q : p != q;
					if (((const uint8_t *)run.y->data)[i] != r && !wrong++)
						first = i;
				}
				cr_expect_eq(wrong, 0, "%s %s, %lld elements: %lld differ, the first #%lld", ops[op], dtype_name(dt),
					     (long long)n, (long long)wrong, (long long)first);
				cf_done(&run);
				free(data);
			}
}

/* Sum, Mean, Max and Min of x, x reversed, x and a broadcast scalar constant (3 and 4 inputs) on
 * float32 and float64, over 0, 1, 7 and 73731 elements: left to right from +0 (Sum, Mean; Mean's
 * quotient in double, rounded once to the dtype) or from the first input (Max, Min: a NaN wins),
 * bit for bit. */
Test(exec, variadic_sum_mean_max_min_match_their_definition_bit_for_bit)
{
	static const char *const ops[] = {"Sum", "Mean", "Max", "Min"};
	static const int64_t ns[] = {0, 1, 7, 65536 + 8195};
	for (int f64 = 0; f64 < 2; f64++)
		for (int k = 0; k < 4; k++)
			for (int op = 0; op < 4; op++)
				for (int sc = 0; sc < 2; sc++) {
					int dt = f64 ? DT_DOUBLE : DT_FLOAT;
					int64_t n = ns[k];
					void *data = xmalloc(n * 8 + 1);
					cf_fill(dt, data, n, (uint64_t)(f64 * 4 + op) * 10 + (uint64_t)k);
					char node[400];
					snprintf(node, sizeof node,
						 "{op: Constant, inputs: [], outputs: [c32], attrs: {value_float: -2.5}}\n"
						 "  - {op: Cast, inputs: [c32], outputs: [c], attrs: {to: %d}}\n"
						 "  - {op: %s, inputs: [x, x2, x%s], outputs: [y]}",
						 dt, ops[op], sc ? ", c" : "");
					struct cf_run run;
					cf_run(&run, node, dt, n, data);
					int64_t wrong = 0, first = -1;
					for (int64_t i = 0; i < n; i++) {
						double v[4], acc = 0;
						int nv = sc ? 4 : 3, same;
						for (int m = 0; m < 4; m++) {
							int64_t at = m == 1 ? n - 1 - i : i;
							v[m] = m == 3 ? -2.5 : f64 ? ((const double *)data)[at] : ((const float *)data)[at];
						}
						if (f64) {
							double a = op <= 1 ? 0 : v[0];
							for (int m = 0; m < nv; m++)
								if (op <= 1)
									a = m ? a + v[m] : 0.0 + v[m];
								else if (m && (v[m] != v[m] || (op == 2 ? v[m] > a : v[m] < a)))
									a = v[m];
							acc = op == 1 ? a / nv : a;
							same = !memcmp(&acc, &((const double *)run.y->data)[i], 8);
						} else {
							float a = op <= 1 ? 0 : ((const float *)data)[i];
							for (int m = 0; m < nv; m++) { /* read as float32: a signalling NaN kept */
								float u = m == 3 ? -2.5f : ((const float *)data)[m == 1 ? n - 1 - i : i];
								if (op <= 1)
									a = m ? a + u : 0.0f + u;
								else if (m && (u != u || (op == 2 ? u > a : u < a)))
									a = u;
							}
							float r = op == 1 ? (float)((double)a / nv) : a;
							same = !memcmp(&r, &((const float *)run.y->data)[i], 4);
						}
						if (!same && !wrong++)
							first = i;
					}
					cr_expect_eq(wrong, 0, "%s %s%s, %lld elements: %lld differ, the first #%lld", ops[op], dtype_name(dt),
						     sc ? " with a scalar" : "", (long long)n, (long long)wrong, (long long)first);
					cf_done(&run);
					free(data);
				}
}

/* Sqrt on float32 (its own loop: sqrtf's bits without the errno path) and float64 over 0, 1, 7 and
 * 73731 elements of every kind (negatives: the default NaN; -0 stays -0; NaN quieted): sqrtf's and
 * sqrt's bits. */
Test(exec, sqrt_matches_libm_bit_for_bit)
{
	static const int64_t ns[] = {0, 1, 7, 65536 + 8195};
	for (int f64 = 0; f64 < 2; f64++)
		for (int k = 0; k < 4; k++) {
			int dt = f64 ? DT_DOUBLE : DT_FLOAT;
			int64_t n = ns[k];
			void *data = xmalloc(n * 8 + 1);
			cf_fill(dt, data, n, 77 + (uint64_t)k);
			struct cf_run run;
			cf_run(&run, "{op: Sqrt, inputs: [x], outputs: [y]}", dt, n, data);
			int64_t wrong = 0, first = -1;
			for (int64_t i = 0; i < n; i++) {
				int same;
				if (f64) {
					double r = sqrt(((const double *)data)[i]);
					same = !memcmp(&r, &((const double *)run.y->data)[i], 8);
				} else {
					float r = sqrtf(((const float *)data)[i]);
					same = !memcmp(&r, &((const float *)run.y->data)[i], 4);
				}
				if (!same && !wrong++)
					first = i;
			}
			cr_expect_eq(wrong, 0, "Sqrt %s, %lld elements: %lld differ, the first #%lld", dtype_name(dt), (long long)n,
				     (long long)wrong, (long long)first);
			cf_done(&run);
			free(data);
		}
}

/* #52 trig: float32 Sin ... Atanh by vmath.h's vectorised functions, float64 by libm */
static const struct { const char *op; double (*ref)(double); } trig_ops[] = {
	{"Sin", sin}, {"Cos", cos}, {"Tan", tan}, {"Asin", asin}, {"Acos", acos}, {"Atan", atan},
	{"Sinh", sinh}, {"Cosh", cosh}, {"Asinh", asinh}, {"Acosh", acosh}, {"Atanh", atanh},
};

/* Every 2048th float (each exponent of both signs, subnormals, infinities, NaNs: sin, cos and tan
 * beyond 2^18 go to libm), 2^21 evenly spaced in [-25, 25], 2^20 in [-1.25, 1.25] (the inverse
 * functions' domains) and the special values, through each op's float32 kernel: within 1 ulp of
 * libm in double (vmath.h's bound), NaN where the function is NaN, infinities exact. */
Test(vmath, trig_within_their_ulp_bounds, .timeout = 240)
{
	static const float special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f,
					1.17549435e-38f, -1.17549435e-38f, 3.4028235e38f, -3.4028235e38f, 1, -1,
					0x1.000002p0f, -0x1.000002p0f, 0x1.fffffep-1f, -0x1.fffffep-1f, 0.125f, -0.125f,
					0.5f, -0.5f, 0.41421357f, 2.4142137f, 88.7f, 89.4f, 89.5f, -89.5f, 100, 1e10f,
					262144.0f, 262144.03f, -262144.0f, -262144.03f, 1e5f, 205887.4f, 1.5707964f,
					3.1415927f, 6.2831855f, 1e30f, -1e30f, 0x1.921fb6p+17f, 0x1.921fb6p+18f, 0x1.921fb6p+19f};
	enum { NSP = sizeof special / sizeof *special, NB = 1 << 21, N = NSP + 2 * NB + NB / 2 };
	float *in = xmalloc(N * sizeof *in);
	cr_assert(in);
	memcpy(in, special, sizeof special);
	for (uint32_t i = 0; i < NB; i++) {
		uint32_t u = i << 11 | ((i * 2654435761u) >> 21);
		memcpy(&in[NSP + i], &u, sizeof u);
		in[NSP + NB + i] = -25.0f + 50.0f * (float)i / (float)NB;
		if (i < NB / 2)
			in[NSP + 2 * NB + i] = -1.25f + 2.5f * (float)i / (float)(NB / 2);
	}
	for (size_t k = 0; k < sizeof trig_ops / sizeof *trig_ops; k++) {
		char node[96];
		snprintf(node, sizeof node, "{op: %s, inputs: [x], outputs: [y]}", trig_ops[k].op);
		struct cf_run run;
		cf_run(&run, node, DT_FLOAT, N, in);
		const float *y = run.y->data;
		double worst = 0;
		float at = 0;
		for (int i = 0; i < N; i++) {
			double e = ulps_above(y[i], trig_ops[k].ref(in[i]), 0);
			if (!(e <= worst))
				worst = e, at = in[i];
		}
		cr_expect_leq(worst, 1, "%s: %.3g ulp at x = %a (%.9g)", trig_ops[k].op, worst, at, at);
		cf_done(&run);
	}
	/* the signs of zeros and the ends of the domains, exactly */
	cr_expect(signbit(vm_sinf(-0.0f)) && signbit(vm_tanf(-0.0f)) && signbit(vm_atanf(-0.0f)) && signbit(vm_asinf(-0.0f)));
	cr_expect(signbit(vm_sinhf(-0.0f)) && signbit(vm_asinhf(-0.0f)) && signbit(vm_atanhf(-0.0f)));
	cr_expect(vm_cosf(-0.0f) == 1 && vm_coshf(-0.0f) == 1 && vm_acoshf(1) == 0);
	cr_expect(vm_acosf(1) == 0 && !signbit(vm_acosf(1)));
	cr_expect(vm_atanhf(1) == INFINITY && vm_atanhf(-1) == -INFINITY && isnan(vm_atanhf(1.0000001f)));
	cr_expect(isnan(vm_asinf(1.0000001f)) && isnan(vm_acosf(-1.0000001f)) && isnan(vm_acoshf(0.99999994f)));
	cr_expect(vm_sinhf(-INFINITY) == -INFINITY && vm_coshf(-INFINITY) == INFINITY && vm_asinhf(-INFINITY) == -INFINITY);
	cr_expect(isnan(vm_sinhf(NAN)) && isnan(vm_coshf(NAN)) && isnan(vm_atanf(NAN)) && isnan(vm_acoshf(NAN)));
	xfree(in);
}

/* 0, 1, 7 and 73731 elements (vector tails, several kernel pieces) of cf_fill's values: float64
 * bit for bit libm's double function, float32 within 1 ulp of it */
Test(exec, trig_tails_float32_and_float64)
{
	static const int64_t ns[] = {0, 1, 7, 65536 + 8195};
	for (size_t k = 0; k < sizeof trig_ops / sizeof *trig_ops; k++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int c = 0; c < 4; c++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT;
				int64_t n = ns[c], wrong = 0, first = -1;
				void *data = xmalloc(n * 8 + 1);
				cf_fill(dt, data, n, 91 + (uint64_t)c);
				char node[96];
				snprintf(node, sizeof node, "{op: %s, inputs: [x], outputs: [y]}", trig_ops[k].op);
				struct cf_run run;
				cf_run(&run, node, dt, n, data);
				for (int64_t i = 0; i < n; i++) {
					int ok;
					if (f64) {
						double r = trig_ops[k].ref(((const double *)data)[i]), y = ((const double *)run.y->data)[i];
						ok = !memcmp(&r, &y, 8) || (isnan(r) && isnan(y));
					} else {
						float v = ((const float *)data)[i];
						ok = ulps_above(((const float *)run.y->data)[i], trig_ops[k].ref(v), 0) <= 1;
					}
					if (!ok && !wrong++)
						first = i;
				}
				cr_expect_eq(wrong, 0, "%s %s, %lld elements: %lld wrong, the first #%lld", trig_ops[k].op,
					     dtype_name(dt), (long long)n, (long long)wrong, (long long)first);
				cf_done(&run);
				free(data);
			}
}

/* #52 trig: Mod (fmod 1) on float32 and float64 and BitShift on uint8 ... uint64 as typed loops:
 * 0, 1, 7 and 73731 elements, the operands whole and one a scalar; Mod bit for bit fmod in double
 * (exact: float32's result is fmodf's), NaN for NaN; BitShift u << v or u >> v in the width, 0 for a
 * shift of the width or more. */
Test(exec, mod_and_bitshift_match_their_rule_bit_for_bit)
{
	static const int64_t ns[] = {0, 1, 7, 65536 + 8195};
	for (int f64 = 0; f64 < 2; f64++)
		for (int k = 0; k < 4; k++) {
			int dt = f64 ? DT_DOUBLE : DT_FLOAT;
			int64_t n = ns[k], wrong = 0, first = -1;
			void *data = xmalloc(n * 8 + 1);
			cf_fill(dt, data, n, 5 + (uint64_t)k);
			struct cf_run run;
			cf_run(&run, "{op: Mod, inputs: [x, x2], outputs: [y], attrs: {fmod: 1}}", dt, n, data);
			for (int64_t i = 0; i < n; i++) {
				int ok;
				if (f64) {
					const double *d = data, y = ((const double *)run.y->data)[i], r = fmod(d[i], d[n - 1 - i]);
					ok = !memcmp(&r, &y, 8) || (isnan(r) && isnan(y));
				} else {
					const float *f = data, y = ((const float *)run.y->data)[i], r = fmodf(f[i], f[n - 1 - i]);
					ok = !memcmp(&r, &y, 4) || (isnan(r) && isnan(y));
				}
				if (!ok && !wrong++)
					first = i;
			}
			cr_expect_eq(wrong, 0, "Mod %s, %lld elements: %lld wrong, the first #%lld", dtype_name(dt), (long long)n,
				     (long long)wrong, (long long)first);
			cf_done(&run);
			free(data);
		}
	static const int dts[] = {DT_UINT8, DT_UINT16, DT_UINT32, DT_UINT64};
	for (int d = 0; d < 4; d++)
		for (int left = 0; left < 2; left++)
			for (int k = 0; k < 4; k++)
				for (int sc = 0; sc < 2; sc++) { /* sc: the shift a scalar */
					int dt = dts[d], width = 8 << d;
					int64_t n = ns[k], wrong = 0, first = -1;
					size_t es = dtype_size(dt);
					char text[512];
					uint64_t *a = xmalloc((size_t)n * 8 + 8), *b = xmalloc((size_t)n * 8 + 8), seed = 11 + (uint64_t)k;
					char *ab = (char *)a, *bb = (char *)b;
					for (int64_t i = 0; i < n; i++) {
						seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
						uint64_t u = seed ^ seed >> 29, v = (uint64_t)(i % (width + 3));
						v += i % 11 == 5 ? (uint64_t)1 << (width - 1) : 0; /* huge shifts */
						memcpy(ab + i * es, &u, es);
						memcpy(bb + i * es, &v, es);
					}
					uint64_t sv = 3;
					if (sc)
						memcpy(bb, &sv, es);
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 18\ninputs: [{name: a, dtype: %s, shape: [%lld]}, "
						 "{name: b, dtype: %s, shape: [%lld]}]\nnodes:\n  - {op: BitShift, inputs: [a, b], "
						 "outputs: [y], attrs: {direction: %s}}\noutputs: [{name: y}]\n",
						 dtype_name(dt), (long long)n, dtype_name(dt), (long long)(sc ? 1 : n), left ? "LEFT" : "RIGHT");
					struct graph *g = load_text("bitshift.yaml", text);
					struct rtensor t[2] = {
						{.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = a, .nbytes = n * es, .known = 1},
						{.dtype = dt, .ndim = 1, .dims = {sc ? 1 : n}, .numel = sc ? 1 : n, .data = b,
						 .nbytes = (sc ? 1 : n) * es, .known = 1}};
					const char *names[2] = {"a", "b"};
					struct gd_err e = {0};
					struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
					struct exec *x = exec_run(g, &o, NULL, &e);
					cr_assert(x, "BitShift: %s", e.msg);
					const char *y = exec_value(x, g->outputs[0])->data;
					for (int64_t i = 0; i < n; i++) {
						uint64_t u = 0, v = 0, r = 0, mask = width == 64 ? ~0ULL : (1ULL << width) - 1;
						memcpy(&u, ab + i * es, es);
						memcpy(&v, bb + (sc ? 0 : i) * es, es);
						memcpy(&r, y + i * es, es);
						uint64_t want = v >= (uint64_t)width ? 0 : (left ? u << v : u >> v) & mask;
						if (r != want && !wrong++)
							first = i;
					}
					cr_expect_eq(wrong, 0, "BitShift %s %s%s, %lld elements: %lld wrong, the first #%lld",
						     left ? "LEFT" : "RIGHT", dtype_name(dt), sc ? " by a scalar" : "", (long long)n,
						     (long long)wrong, (long long)first);
					exec_free(x);
					graph_free(g);
					xfree(a);
					xfree(b);
				}
}

/* #52 trig: PRelu on float32 and float64 as typed rows (the slope per channel, whole, a scalar, along
 * the last axis, and per channel over W only): x >= 0 ? x : x slope in the dtype, bit for bit, over
 * cf_fill's values (NaN, infinities, -0, subnormals) and odd shapes, 0 and 1 elements among them;
 * any NaN for a NaN (a NaN x times a NaN slope keeps either: the operand order is the compiler's). */
Test(exec, prelu_matches_its_rule_bit_for_bit)
{
	static const struct { int nd; int64_t x[4]; int sd; int64_t s[4]; } cases[] = {
		{4, {2, 3, 5, 7}, 3, {3, 1, 1}}, {4, {2, 3, 5, 7}, 4, {2, 3, 5, 7}}, {4, {2, 3, 5, 7}, 1, {1}},
		{4, {2, 3, 5, 7}, 1, {7}}, {3, {3, 5, 7}, 2, {5, 1}}, {4, {1, 1, 1, 1}, 3, {1, 1, 1}},
		{4, {0, 3, 2, 2}, 3, {3, 1, 1}}, {2, {3, 24579}, 2, {3, 1}}, {4, {2, 64, 23, 29}, 3, {64, 1, 1}},
		{2, {3, 24579}, 2, {3, 24579}},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int f64 = 0; f64 < 2; f64++) {
			int dt = f64 ? DT_DOUBLE : DT_FLOAT;
			size_t es = dtype_size(dt);
			int64_t nx = 1, ns = 1;
			char xs[64] = "", ss[64] = "";
			for (int i = 0; i < cases[c].nd; i++) {
				nx *= cases[c].x[i];
				snprintf(xs + strlen(xs), sizeof xs - strlen(xs), "%s%lld", i ? ", " : "", (long long)cases[c].x[i]);
			}
			for (int i = 0; i < cases[c].sd; i++) {
				ns *= cases[c].s[i];
				snprintf(ss + strlen(ss), sizeof ss - strlen(ss), "%s%lld", i ? ", " : "", (long long)cases[c].s[i]);
			}
			void *xd = xmalloc((size_t)nx * 8 + 8), *sdat = xmalloc((size_t)ns * 8 + 8);
			cf_fill(dt, xd, nx, 3 + c);
			cf_fill(dt, sdat, ns, 300 + c);
			char text[512];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%s]}, {name: s, dtype: %s, shape: [%s]}]\n"
				 "nodes:\n  - {op: PRelu, inputs: [x, s], outputs: [y]}\noutputs: [{name: y}]\n",
				 dtype_name(dt), xs, dtype_name(dt), ss);
			struct graph *g = load_text("prelu.yaml", text);
			struct rtensor t[2] = {{.dtype = dt, .ndim = cases[c].nd, .numel = nx, .data = xd, .nbytes = nx * es, .known = 1},
					       {.dtype = dt, .ndim = cases[c].sd, .numel = ns, .data = sdat, .nbytes = ns * es, .known = 1}};
			memcpy(t[0].dims, cases[c].x, sizeof cases[c].x);
			memcpy(t[1].dims, cases[c].s, sizeof cases[c].s);
			const char *names[2] = {"x", "s"};
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
			struct exec *x = exec_run(g, &o, NULL, &e);
			cr_assert(x, "PRelu: %s", e.msg);
			const char *y = exec_value(x, g->outputs[0])->data;
			int64_t wrong = 0, first = -1;
			for (int64_t i = 0; i < nx; i++) {
				int64_t at = 0, r = i, step = 1; /* the slope's element: its dims aligned right */
				for (int k = cases[c].nd - 1, q = cases[c].sd - 1; k >= 0; r /= cases[c].x[k--], q--)
					if (q >= 0) {
						at += cases[c].s[q] == 1 ? 0 : r % cases[c].x[k] * step;
						step *= cases[c].s[q];
					}
				int ok;
				if (f64) {
					double v = ((const double *)xd)[i], w = v >= 0 ? v : v * ((const double *)sdat)[at];
					double u;
					memcpy(&u, y + i * 8, 8);
					ok = !memcmp(&w, &u, 8) || (isnan(w) && isnan(u));
				} else {
					float v = ((const float *)xd)[i], w = v >= 0 ? v : v * ((const float *)sdat)[at];
					float u;
					memcpy(&u, y + i * 4, 4);
					ok = !memcmp(&w, &u, 4) || (isnan(w) && isnan(u));
				}
				if (!ok && !wrong++)
					first = i;
			}
			cr_expect_eq(wrong, 0, "PRelu %s x [%s] slope [%s]: %lld wrong, the first #%lld", dtype_name(dt), xs, ss,
				     (long long)wrong, (long long)first);
			exec_free(x);
			graph_free(g);
			xfree(xd);
			xfree(sdat);
		}
}

/* #52 trig: float32 Mod's fast fmod (vmath.h's vm_fmodf, in double) on pairs whose quotient is up
 * to 2^40 (the fast range ends at 2^29): b of every exponent and sign, a = b k or one or two ulps
 * off it (the exact multiples give +-0, the near ones the quotient's rounding cases), through the
 * kernel: fmodf's bits. */
Test(exec, mod_float32_fast_fmod_matches_fmodf)
{
	enum { N = 1 << 20 };
	float *ab = xmalloc(N * sizeof *ab);
	uint64_t seed = 17;
	for (int i = 0; i < N / 2; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed ^ seed >> 29;
		float b = ldexpf(1.0f + (float)(r & 0x7fffff) / 0x1p23f, (int)(r >> 23 & 255) - 150) * (r >> 40 & 1 ? -1 : 1);
		float k = (float)(r >> 24 & ((1ULL << (1 + (r >> 58) % 40)) - 1)), a = b * k * (r >> 59 & 1 ? -1 : 1);
		for (uint64_t s = r >> 61 & 3; s; s--)
			a = nextafterf(a, r >> 63 ? INFINITY : -INFINITY);
		ab[i] = a;
		ab[N - 1 - i] = b;
	}
	struct cf_run run;
	cf_run(&run, "{op: Mod, inputs: [x, x2], outputs: [y], attrs: {fmod: 1}}", DT_FLOAT, N, ab);
	const float *y = run.y->data;
	int64_t wrong = 0, first = -1, fast = 0;
	for (int i = 0; i < N; i++) {
		float a = ab[i], b = ab[N - 1 - i], r = fmodf(a, b);
		fast += vm_fmodf_fast(a, b);
		if (memcmp(&r, &y[i], 4) && !(isnan(r) && isnan(y[i])) && !wrong++)
			first = i;
	}
	int64_t f = first < 0 ? 0 : first;
	cr_expect_eq(wrong, 0, "%lld wrong, the first #%lld: fmodf(%a, %a) = %a, not %a", (long long)wrong, (long long)first,
		     ab[f], ab[N - 1 - f], fmodf(ab[f], ab[N - 1 - f]), y[f]);
	cr_expect_gt(fast, N / 2, "the fast path took %lld of %d", (long long)fast, N);
	cf_done(&run);
	xfree(ab);
}

/* #52 trigrow: float32 Sin, Cos and Tan a tile of 2048 at a time, libm's sinf, cosf and tanf for
 * the tile's lanes beyond 2^18 (and infinities, NaN) found by a vectorised check instead of a scalar
 * second pass over the block. Few such lanes, placed at the tiles' first and last elements, the
 * block's last and in tiles of their own, among values in [-20, 20] (those of a real model: angles,
 * positions times frequencies), at lengths 0, 1, a tile less one, a tile, a tile and one, 3 tiles and
 * 5 (odd vector tails), at 1 and 3 threads (pieces that start inside tiles): the far lanes bit for
 * bit libm's float function, the others within 1 ulp of the double one. */
Test(exec, trig_far_lanes_are_libms_in_every_tile)
{
	static const int64_t ns[] = {0, 1, 2047, 2048, 2049, 3 * 2048 + 5};
	static const struct { const char *op; float (*far)(float); double (*ref)(double); } ops[] = {
		{"Sin", sinf, sin}, {"Cos", cosf, cos}, {"Tan", tanf, tan}};
	static const float far[] = {3e5f, -1e30f, INFINITY, NAN, 262144.03f, -3.4028235e38f, -INFINITY};
	for (int th = 1; th <= 3; th += 2)
		for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
			for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
				int64_t n = ns[c], wrong = 0, first = -1, n_far = 0;
				float *x = xmalloc(n * sizeof *x + 1);
				for (int64_t i = 0; i < n; i++) {
					int edge = i == 0 || i % 2048 == 2047 || i == n - 1 || i == 4100;
					x[i] = edge ? far[(i + (int64_t)c) % 7] : (float)(i % 4001) / 100.0f - 20.0f;
					n_far += edge;
				}
				pool_set_threads(th);
				char node[64];
				snprintf(node, sizeof node, "{op: %s, inputs: [x], outputs: [y]}", ops[k].op);
				struct cf_run run;
				cf_run(&run, node, DT_FLOAT, n, x);
				const float *y = run.y->data;
				for (int64_t i = 0; i < n; i++) {
					int ok;
					if (!(fabsf(x[i]) <= 262144.0f)) {
						float r = ops[k].far(x[i]);
						ok = !memcmp(&r, &y[i], 4) || (isnan(r) && isnan(y[i]));
					} else {
						ok = ulps_above(y[i], ops[k].ref(x[i]), 0) <= 1;
					}
					if (!ok && !wrong++)
						first = i;
				}
				cr_expect_eq(wrong, 0, "%s, %lld elements (%lld far), %d threads: %lld wrong, the first #%lld (x %g)",
					     ops[k].op, (long long)n, (long long)n_far, th, (long long)wrong, (long long)first,
					     first >= 0 ? x[first] : 0.0);
				cf_done(&run);
				free(x);
			}
	pool_set_threads(1);
}

/* #52 pow: float32 Pow's vectorised path (vmath.h's vm_powf_settled in double, libm's pow for the
 * lanes it leaves) against the rule the kernel computed before, (float)pow((double)x, (double)y),
 * bit for bit (NaN payloads included): every 4096th float (both signs, NaNs, infinities, subnormals)
 * to a grid of exponents (odd and even integers, halves, thirds, huge, +-inf, NaN, +-0, subnormals)
 * as a scalar exponent, contiguous pairs, a scalar base, row and column broadcasts, lengths 0, 1 and
 * around the 256-lane blocks, at 1 and 3 threads; and LRN with betas the roots do not cover
 * against its float64 definition. */
static const float pw_ys[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 3.0f, -3.0f, 4.0f, 5.0f, -7.0f, 0.5f, -0.5f,
			      1.5f, -1.5f, 2.5f, 0.25f, 1.0f / 3, -1.0f / 3, 0.75f, 7.7f, -7.7f, 33.0f, 100.0f, -100.0f,
			      127.5f, -149.5f, 1e10f, -1e10f, 16777216.0f, 16777218.0f, 8388609.0f, -8388609.0f,
			      3.40282347e38f, -3.40282347e38f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f,
			      1.17549435e-38f, 1e-30f, 1.0000001f, 0.99999994f};

/* the float at bits i * 4096 + off */
static float pw_float(int64_t i, uint32_t off)
{
	uint32_t u = (uint32_t)i * 4096u + off;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* Pow over x (xnd dims xd) and r (rnd dims rd), given copies of xv and rv (the run may write over
 * them), at th threads: the output's elements unlike the rule (the first at *first). A scalar
 * exponent 1 or 2 is x or x x (binary's exact cases, which keep a signalling NaN): any NaN for a NaN. */
static int64_t pw_check(const float *xv, int xnd, const int64_t *xd, const float *rv, int rnd, const int64_t *rd, int th,
			int64_t *first)
{
	int exact = rnd == 0 && (rv[0] == 1.0f || rv[0] == 2.0f);
	struct rtensor ts[2] = {shape_tensor(DT_FLOAT, xnd, xd, NULL), shape_tensor(DT_FLOAT, rnd, rd, NULL)};
	const float *src[2] = {xv, rv};
	for (int k = 0; k < 2; k++) {
		ts[k].data = xmalloc((size_t)ts[k].nbytes + 1);
		memcpy(ts[k].data, src[k], (size_t)ts[k].nbytes);
	}
	struct shape_run s;
	shape_run(&s, "{op: Pow, inputs: [x, r], outputs: [y]}", ts, 2, th);
	int nd = xnd > rnd ? xnd : rnd;
	cr_assert_eq(s.y->ndim, nd);
	int64_t wrong = 0, idx[RT_MAX_DIMS];
	*first = -1;
	for (int64_t i = 0; i < s.y->numel; i++) {
		int64_t t = i, oa = 0, ob = 0, sa = 1, sb = 1;
		for (int d = nd - 1; d >= 0; d--)
			idx[d] = t % s.y->dims[d], t /= s.y->dims[d];
		for (int d = nd - 1; d >= 0; d--) { /* dims aligned right, 1s broadcast */
			int da = d - (nd - xnd), db = d - (nd - rnd);
			if (da >= 0) {
				oa += (xd[da] == 1 ? 0 : idx[d]) * sa;
				sa *= xd[da];
			}
			if (db >= 0) {
				ob += (rd[db] == 1 ? 0 : idx[d]) * sb;
				sb *= rd[db];
			}
		}
		float want = (float)pow((double)xv[oa], (double)rv[ob]), got = ((const float *)s.y->data)[i];
		if (memcmp(&want, &got, 4) && !(exact && isnan(want) && isnan(got)) && !wrong++)
			*first = i;
	}
	shape_done(&s);
	xfree(ts[0].data);
	xfree(ts[1].data);
	return wrong;
}

Test(exec, pow_float32_matches_libm_bit_for_bit)
{
	enum { NX = 1 << 20 };
	const int ny = (int)(sizeof pw_ys / sizeof *pw_ys);
	float *xv = xmalloc(NX * sizeof *xv), *rv = xmalloc(NX * sizeof *rv);
	int64_t first, wrong, dx[2] = {NX}, one[1] = {1};
	/* every 4096th float to each exponent of the grid, a scalar (a different offset in the 4096 each) */
	int64_t settled = 0, lanes = 0;
	for (int k = 0; k < ny; k++) {
		for (int64_t i = 0; i < NX; i++) {
			float v;
			xv[i] = pw_float(i, (uint32_t)k * 89u);
			lanes++;
			settled += vm_powf_settled(xv[i], pw_ys[k], NAN, &v);
		}
		wrong = pw_check(xv, 1, dx, &pw_ys[k], 0, one, k % 2 ? 3 : 1, &first);
		cr_expect_eq(wrong, 0, "x^%a: %lld wrong, the first x = %a", (double)pw_ys[k], (long long)wrong,
			     first < 0 ? 0.0 : (double)xv[first]);
	}
	/* the vectorised path settles the finite lanes (the grid's finite half of floats): not all left to libm */
	cr_expect_gt(settled, lanes / 3, "vm_powf_settled settled %lld of %lld", (long long)settled, (long long)lanes);
	/* contiguous pairs: floats to the grid's exponents and to random ones in [-40, 40] and
	 * random floats, at 1 and 3 threads */
	uint64_t seed = 52;
	for (int64_t i = 0; i < NX; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint32_t r = (uint32_t)(seed >> 32);
		xv[i] = r % 3 ? (float)((double)(r >> 8) / 16777216.0 * 8.0 - 4.0) : pw_float(i, r & 4095);
		rv[i] = r % 5 == 0 ? pw_ys[(r >> 4) % (uint32_t)ny] : r % 5 == 1 ? pw_float(r >> 12, r & 4095)
							      : (float)((double)(seed >> 8 & 0xffffff) / 16777216.0 * 80.0 - 40.0);
	}
	for (int th = 1; th <= 3; th += 2) {
		wrong = pw_check(xv, 1, dx, rv, 1, dx, th, &first);
		cr_expect_eq(wrong, 0, "pairs at %d threads: %lld wrong, the first %a ^ %a", th, (long long)wrong,
			     first < 0 ? 0.0 : (double)xv[first], first < 0 ? 0.0 : (double)rv[first]);
	}
	/* a scalar base to every 4096th float */
	static const float bases[] = {2.0f, -2.0f, 0.5f, -0.5f, 10.0f, 2.7182817f, 1.0f, -1.0f, 0.0f, -0.0f,
				      INFINITY, -INFINITY, NAN, 1e-45f, -3.0f, 1.0000001f};
	for (int64_t i = 0; i < NX; i++)
		rv[i] = pw_float(i, 7);
	for (size_t b = 0; b < sizeof bases / sizeof *bases; b++) {
		wrong = pw_check(&bases[b], 0, one, rv, 1, dx, 1, &first);
		cr_expect_eq(wrong, 0, "%a^y: %lld wrong, the first y = %a", (double)bases[b], (long long)wrong,
			     first < 0 ? 0.0 : (double)rv[first]);
	}
	/* rows against a row of exponents, a column of bases against a row of exponents, a row of
	 * bases against a column of exponents; odd lengths around the 256-lane blocks, 0 and 1 */
	static const int64_t shapes[][4] = {{37, 1001, 1, 1001}, {37, 1, 1, 1001}, {1, 513, 29, 1},
					    {3, 257, 3, 257},   {1, 255, 1, 255}, {1, 1, 1, 1},
					    {0, 5, 1, 5},       {1, 0, 1, 0},     {2, 17, 2, 1}};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (int th = 1; th <= 3; th += 2) {
			int64_t a2[2] = {shapes[c][0], shapes[c][1]}, b2[2] = {shapes[c][2], shapes[c][3]};
			for (int64_t i = 0; i < a2[0] * a2[1]; i++)
				xv[i] = i % 7 ? (float)(i % 101) * 0.037f - 1.5f : pw_float(i * 613, (uint32_t)c);
			for (int64_t i = 0; i < b2[0] * b2[1]; i++)
				rv[i] = i % 5 ? (float)(i % 23) * 0.5f - 5.0f : pw_ys[i % ny];
			wrong = pw_check(xv, 2, a2, rv, 2, b2, th, &first);
			cr_expect_eq(wrong, 0, "[%lld, %lld] ^ [%lld, %lld] at %d threads: %lld wrong, the first #%lld",
				     (long long)a2[0], (long long)a2[1], (long long)b2[0], (long long)b2[1], th, (long long)wrong,
				     (long long)first);
		}
	xfree(xv);
	xfree(rv);
}

/* LRN with betas the roots (0.5, 0.75, 1) do not cover, float32 through vm_pow_d and float64 by pow,
 * against y = x / (bias + alpha / size sum(x^2))^beta written here (the window's squares summed in
 * double from 0 in channel order, pow in double, rounded once): bit for bit, at 1 and 3 threads, over
 * values in [-3, 3] with zeros, NaN, infinities, subnormals and huge ones (d^beta past 2^150: libm's) */
Test(exec, lrn_general_beta_matches_its_definition)
{
	static const struct {
		int64_t dims[4], size;
		float alpha, beta, bias;
	} cases[] = {{{2, 16, 7, 41}, 5, 1e-4f, 0.6f, 1.0f}, {{2, 16, 7, 41}, 3, 0.02f, 1.3f, 2.0f},
		     {{1, 9, 1, 300}, 4, 0.5f, -0.4f, 0.5f}, {{3, 5, 1, 1}, 5, 0.02f, 0.6f, 0.0f},
		     {{1, 7, 1, 257}, 2, 0.1f, 2.0f, 1.0f}, {{1, 64, 48, 48}, 5, 1e-4f, 0.6f, 1.0f}};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int th = 1; th <= 3; th += 2) {
				const int64_t *d = cases[c].dims, N = d[0], C = d[1], inner = d[2] * d[3], n = N * C * inner;
				double *v = xmalloc((size_t)n * sizeof *v);
				void *data = xmalloc((size_t)n * 8);
				uint64_t seed = 977 + c;
				for (int64_t i = 0; i < n; i++) {
					seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
					uint32_t r = (uint32_t)(seed >> 32);
					static const double sp[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 1e-40, 3e30, -2e25};
					double x = r % 61 == 0 ? sp[r / 61 % 8] : r % 17 == 0 ? 0.0 : (double)(r >> 8) / 16777216.0 * 6.0 - 3.0;
					if (f64)
						((double *)data)[i] = v[i] = x;
					else
						((float *)data)[i] = (float)x, v[i] = (double)(float)x;
				}
				struct rtensor t = shape_tensor(f64 ? DT_DOUBLE : DT_FLOAT, 4, d, data);
				char node[300];
				snprintf(node, sizeof node,
					 "{op: LRN, inputs: [x], outputs: [y], attrs: {size: %lld, alpha: %.9g, beta: %.9g, bias: %.9g}}",
					 (long long)cases[c].size, (double)cases[c].alpha, (double)cases[c].beta, (double)cases[c].bias);
				struct shape_run s;
				shape_run(&s, node, &t, 1, th);
				int64_t wrong = 0, first = -1, lo = (cases[c].size - 1) / 2, hi = cases[c].size / 2;
				double as = (double)cases[c].alpha / (double)cases[c].size;
				for (int64_t i = 0; i < n; i++) {
					int64_t ch = i / inner % C, at = i - ch * inner;
					double sum = 0;
					for (int64_t k = ch - lo > 0 ? ch - lo : 0; k <= ch + hi && k < C; k++)
						sum += v[at + k * inner] * v[at + k * inner];
					double want = v[i] / pow((double)cases[c].bias + as * sum, (double)cases[c].beta);
					int same;
					if (f64)
						same = !memcmp(&want, (const double *)s.y->data + i, 8) || (isnan(want) && isnan(((const double *)s.y->data)[i]));
					else {
						float w = (float)want;
						same = !memcmp(&w, (const float *)s.y->data + i, 4) || (isnan(w) && isnan(((const float *)s.y->data)[i]));
					}
					if (!same && !wrong++)
						first = i;
				}
				cr_expect_eq(wrong, 0, "LRN case %zu %s at %d threads: %lld of %lld wrong, the first #%lld", c,
					     f64 ? "float64" : "float32", th, (long long)wrong, (long long)n, (long long)first);
				shape_done(&s);
				xfree(v);
				xfree(data);
			}
}

/* Sin, Cos, Tan and float32 Mod (fmod 1) written over their input (OPF_REUSES: Neg's output dies at
 * them, so the executor gives theirs its buffer): the lanes libm takes (|x| past 2^18, infinities,
 * NaN; a quotient past 2^29) still get libm's value of the input, not of the fast pass's output. */
Test(exec, fixed_up_lanes_read_the_input_when_the_output_is_written_over_it)
{
	enum { N = 2100 }; /* one whole tile of 2048 and part of another */
	static float x[N], b[N];
	for (int i = 0; i < N; i++) {
		x[i] = (float)sin(0.37 * i) * 3;
		b[i] = 0.75f + (float)(i % 7);
	}
	const int far[] = {0, 5, 2047, 2048, 2099};
	const float farv[] = {-3e5f, -INFINITY, -1e30f, NAN, -7e8f};
	for (int k = 0; k < 5; k++)
		x[far[k]] = farv[k];
	static const char *ops[] = {"Sin", "Cos", "Tan", "Mod"};
	for (int k = 0; k < 4; k++) {
		int mod = k == 3;
		char text[700];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [%d]}, {name: b, dtype: float32, "
			 "shape: [%d]}]\nnodes:\n  - {op: Neg, inputs: [x], outputs: [t]}\n"
			 "  - {op: %s, inputs: [t%s], outputs: [y]%s}\noutputs: [{name: y}]\n",
			 N, N, ops[k], mod ? ", b" : "", mod ? ", attrs: {fmod: 1}" : "");
		struct graph *g = load_text("reuse.yaml", text);
		struct rtensor t[2] = {
			{.dtype = DT_FLOAT, .ndim = 1, .dims = {N}, .numel = N, .data = x, .nbytes = sizeof x, .known = 1},
			{.dtype = DT_FLOAT, .ndim = 1, .dims = {N}, .numel = N, .data = b, .nbytes = sizeof b, .known = 1}};
		const char *names[2] = {"x", "b"};
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
		struct exec *ex = exec_run(g, &o, NULL, &e);
		cr_assert(ex, "%s: %s", ops[k], e.msg);
		const float *y = exec_value(ex, g->outputs[0])->data;
		for (int q = 0; q < 5; q++) {
			float v = -x[far[q]];
			float want = k == 0 ? sinf(v) : k == 1 ? cosf(v) : k == 2 ? tanf(v) : fmodf(v, b[far[q]]);
			cr_expect(isnan(want) ? isnan(y[far[q]]) : memcmp(&want, &y[far[q]], 4) == 0,
				  "%s(%g), element %d: %a, not libm's %a", ops[k], (double)v, far[q], (double)y[far[q]],
				  (double)want);
		}
		exec_free(ex);
		graph_free(g);
	}
}

/* #52 powadam: Philox's AVX-512 blocks (philox.c) and DietAdam's factored update without divisions
 * (diet.c's upd_fac_avx512, a lane kept only where every nearby y quantizes alike). */

/* The uniforms of philox_uniforms, every first offset mod 4 and length around the 32-uniform blocks
 * and the 4 blocks side by side, counters across 2^32 (the counter's high word), and seeds with
 * high words: each the scalar philox4x32's word, (w >> 8) 2^-24, computed here. */
Test(exec, powadam_philox_uniforms_match_the_scalar_rounds)
{
	static const uint64_t seeds[] = {0, 1, 0x9e3779b97f4a7c15ull, ~0ull};
	static const uint64_t firsts[] = {0, 1, 2, 3, 4 * 0xffffffffull - 130, 4 * 0xffffffffull + 5};
	enum { NMAX = 600 };
	float out[NMAX];
	int64_t bad = 0;
	for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++)
		for (size_t f = 0; f < sizeof firsts / sizeof *firsts; f++)
			for (int n = 0; n <= NMAX; n += n < 40 ? 1 : 37) {
				philox_uniforms(seeds[s], firsts[f], n, out);
				for (int j = 0; j < n; j++) {
					uint64_t i = firsts[f] + (uint64_t)j, ctr = i / 4;
					/* Philox4x32-10 (Salmon et al. 2011), written out */
					uint32_t c[4] = {(uint32_t)ctr, (uint32_t)(ctr >> 32), 0, 0};
					uint32_t k0 = (uint32_t)seeds[s], k1 = (uint32_t)(seeds[s] >> 32);
					for (int r = 0; r < 10; r++) {
						uint64_t p0 = 0xD2511F53ull * c[0], p1 = 0xCD9E8D57ull * c[2];
						uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
						c[0] = n0, c[1] = (uint32_t)p1, c[2] = n2, c[3] = (uint32_t)p0;
						k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
					}
					float want = (float)(c[i % 4] >> 8) / 16777216.0f;
					if (memcmp(&want, &out[j], sizeof want) && bad++ < 5)
						cr_expect(0, "seed %#llx, first %llu, n %d: uniform %d is %a, not %a",
							  (unsigned long long)seeds[s], (unsigned long long)firsts[f], n, j,
							  (double)out[j], (double)want);
				}
			}
	cr_expect_eq(bad, 0, "%lld uniforms differ", (long long)bad);
}

/* DietAdam's factored update, no momentum, against the divisions written here (diet.h's formulas in
 * float64, float32 moments), nearest and stochastic, at 1 and 3 threads, on 5 x 1043 (a chunk of
 * 1024 and one of 19: 16 lanes and a tail of 3) and 3 x 7 (only a tail):
 *   case 0: ordinary g, lr 0.01 (the fast lanes, almost all settled);
 *   case 1: g tiny (r = c = mean(c) = 1 exactly, eps 1), lr 2^54, scale 2^-7, so y = q - g 2^61 is
 *           exact: halves (nearest's ties to even), and |y| + U exactly an integer (U from a first
 *           run's key): lanes on a rounding boundary, which must go to the divisions;
 *   case 2: edges: NaN, +-inf, -0, subnormal and huge g (clamps), which turn the fast path off (a
 *           column's c infinite or NaN) or leave lanes to the divisions. */
static double pa_moment(const float *p, int n, int st, double b2, double bc, double eps)
{
	double s = 0;
	for (int k = 0; k < n; k++)
		s += (double)p[k * st] * p[k * st];
	return sqrt((double)(float)((1 - b2) * s / n) / bc) + eps; /* vr, vc 0 before: b2 0 + ... */
}

Test(exec, powadam_diet_adam_factored_matches_the_divisions)
{
	enum { RM = 5, CM = 1043 };
	static const int shapes[2][2] = {{RM, CM}, {3, 7}};
	static int16_t q[RM * CM], got[2][RM * CM];
	static float g[RM * CM];
	static double rr[RM], cc[CM];
	const double b2 = 0.98, bc = 1 - b2;
	for (int cs = 0; cs < 3; cs++)
		for (int sh = 0; sh < 2; sh++)
			for (int st = 0; st < 2; st++) {
				int R = shapes[sh][0], C = shapes[sh][1];
				double lr = cs == 1 ? 0x1p54 : 0.01, scale = cs == 1 ? 0x1p-7 : 10.0 / 32767, eps = cs == 1 ? 1 : 1e-10;
				struct graph *gr = diet_graph(R, C, eps, lr, scale, st);
				uint64_t key = 0;
				for (int k = 0; k < R * C; k++) {
					q[k] = (int16_t)((k * 7919) % 2001 - 1000);
					g[k] = (float)((double)((k * 104729) % 1999 - 999) * 0.0012345);
				}
				for (int pass = 0; pass < 2; pass++) {
					if (cs == 1) /* y = q - g 2^61: halves, and (pass 1) |y| + U integers */
						for (int k = 0; k < R * C; k++) {
							double want = (k % 3 ? q[k] - ((k * 31) % 41 - 20) * 0.5 : q[k] - 0.25 * (k % 7));
							if (pass && st && k % 3 == 0) { /* |y| = n - U */
								double u = philox_uniform(key, (uint64_t)k);
								want = q[k] >= 0 ? (q[k] + 1 - u) : -(-q[k] + 1 - u);
							}
							g[k] = (float)((q[k] - want) * 0x1p-61);
						}
					if (cs == 2) {
						static const float edges[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-41f, 3e38f, -3e38f, 0.0f};
						for (int k = 0; k < R * C; k += 97)
							g[k] = edges[(k / 97) % 8];
					}
					for (int th = 0; th < 2; th++)
						diet_run(gr, q, g, R, C, th ? 3 : 1, got[th], &key);
					if (cs != 1 || !st || pass) /* case 1's second pass needs the key */
						break;
				}
				double cmean = 0;
				for (int i = 0; i < R; i++)
					rr[i] = pa_moment(g + i * C, C, 1, b2, bc, eps);
				for (int j = 0; j < C; j++) {
					cc[j] = pa_moment(g + j, R, C, b2, bc, eps);
					cmean += cc[j];
				}
				cmean /= C;
				int64_t bad = 0;
				for (int k = 0; k < R * C; k++) {
					double denom = rr[k / C] * cc[k % C] / cmean;
					int16_t want = ref_quantize(q[k] * scale - lr * (double)g[k] / denom, scale,
								   st ? philox_uniform(key, (uint64_t)k) : -1);
					if (got[0][k] != want && bad++ < 5)
						cr_expect(0, "case %d, %dx%d, %s: q'[%d] %d, not %d (g %a)", cs, R, C,
							  st ? "stochastic" : "nearest", k, got[0][k], want, (double)g[k]);
				}
				cr_expect_eq(bad, 0, "case %d, %dx%d, %s: %lld differ", cs, R, C, st ? "stochastic" : "nearest",
					     (long long)bad);
				cr_expect(!memcmp(got[0], got[1], sizeof(int16_t) * (size_t)(R * C)),
					  "case %d, %dx%d: 1 and 3 threads differ", cs, R, C);
				graph_free(gr);
			}
}

/* #52 gelupool: MaxPool without its Indices output (pool.c: one max a window element on AVX-512,
 * no offsets kept) against its definition (rf_max), bit for bit with NaN payloads, float32 and
 * float64, at strides 1 and 2, widths around the 16- and 8-lane vectors and the 256-output runs, at
 * 1 and 3 threads. */
Test(exec, gelupool_max_pool_without_indices_matches_its_definition)
{
	static const int64_t cases[][5] = {/* h, w, k, stride, pad */
					   {48, 48, 3, 2, 1}, {9, 41, 3, 2, 1}, {7, 37, 3, 1, 1}, {5, 17, 2, 2, 0},
					   {4, 600, 3, 2, 1}, {3, 530, 2, 1, 0}, {6, 33, 3, 2, 0}, {1, 1, 1, 1, 0}};
	enum { NC = 6, MAXN = NC * 4 * 600 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			int64_t h = cases[c][0], w = cases[c][1], k = cases[c][2], s = cases[c][3], pad = cases[c][4];
			int64_t dims[4] = {2, NC / 2, h, w}, sp = h * w;
			cr_assert(NC * sp <= MAXN);
			uint32_t seed = (uint32_t)c * 17 + 3;
			for (int64_t i = 0; i < NC * sp; i++) {
				p64[i] = rf_value(&seed, i, w);
				p32[i] = (float)p64[i];
				v[i] = f64 ? p64[i] : (double)p32[i];
			}
			char node[300];
			snprintf(node, sizeof node,
				 "{op: MaxPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [%lld, %lld], strides: [%lld, %lld], "
				 "pads: [%lld, %lld, %lld, %lld]}}",
				 (long long)k, (long long)k, (long long)s, (long long)s, (long long)pad, (long long)pad, (long long)pad,
				 (long long)pad);
			void *bits[2] = {NULL, NULL};
			for (int th = 0; th < 2; th++) {
				pool_set_threads(th ? 3 : 1);
				struct graph *g;
				const struct rtensor *y;
				struct exec *x = rf_run(node, "", f64, 4, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
				int64_t oh = y->dims[2], ow = y->dims[3], wrong = 0, first = -1;
				for (int64_t nc = 0; nc < NC; nc++)
					for (int64_t oy = 0; oy < oh; oy++)
						for (int64_t ox = 0; ox < ow; ox++) {
							int64_t o = (nc * oh + oy) * ow + ox;
							const int64_t kk[2] = {k, k}, ss[2] = {s, s}, one[2] = {1, 1}, pp[2] = {pad, pad};
							double r = rf_max(v + nc * sp, h, w, kk, ss, one, pp, oy, ox, NULL);
							if (!rf_same_nan(y, o, r, f64, 0) && !wrong++)
								first = o;
						}
				cr_expect_eq(wrong, 0, "%s case %zu at %d threads: %lld of %lld outputs differ, the first %lld",
					     f64 ? "float64" : "float32", c, th ? 3 : 1, (long long)wrong, (long long)y->numel,
					     (long long)first);
				bits[th] = malloc(y->nbytes);
				cr_assert(bits[th]);
				memcpy(bits[th], y->data, y->nbytes);
				if (th)
					cr_expect(!memcmp(bits[0], bits[1], y->nbytes), "%s case %zu: 1 and 3 threads differ",
						  f64 ? "float64" : "float32", c);
				exec_free(x);
				graph_free(g);
			}
			free(bits[0]);
			free(bits[1]);
			pool_set_threads(1);
		}
}

/* #52 lrnpow: LRN's float32 roots on AVX-512 (norm_stat.c's lrn_roots_avx512: vrsqrt14pd and two
 * Newton steps, the settled test on q's bits, d's range on d's bits) at the edges of those tests,
 * against y = x / pow(bias + alpha / size x^2, beta) written here (one channel, window 1; alpha 0
 * makes d the bias itself), rounded once to float; bit for bit, any NaN for a NaN, at 1 and 3
 * threads alike. Where the processor has no AVX-512 the same inputs check the plain path. The
 * edges: quotients near float's overflow threshold (bias 1/4: x up to 3.4e38 times 2^1.5) and in
 * and below the smallest binade (q crossing 2^-126 into the subnormals, where the bits' test gives
 * the lanes to pow), d at 2^-100 (taken), just below 2^100 (taken) and at 2^100 (given to pow),
 * exact zeros of both signs, infinities, NaNs, and a window of 5 over 33 channels with 4099 pixels
 * (a last group of 3 lanes) whose quotients fall within 2^-40 of a float's rounding midpoint
 * (counted: the lanes given to pow). */
static void lrnpow_fill(float *x, int64_t n, uint64_t seed, double lg0, double lg1)
{
	static const float sp[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY};
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint32_t r = (uint32_t)(seed >> 32);
		double v = exp2(lg0 + (lg1 - lg0) * (double)(r >> 9) / 8388608.0);
		x[i] = r % 97 == 0 ? sp[r / 97 % 6] : (float)(r & 1 ? -v : v);
	}
}

Test(exec, lrnpow_lrn_roots_at_the_bit_tests_edges_match_pow_at_1_and_3_threads)
{
	static const struct {
		int64_t C, inner, size;
		float alpha, bias;
		double lg0, lg1; /* |x| log-uniform over [2^lg0, 2^lg1] */
	} cases[] = {
		{1, 4099, 1, 0.0f, 0.25f, 124, 128},         /* q near FLT_MAX and past it */
		{1, 4099, 1, 0.0f, 0x1p-100f, -130, -20},     /* d = 2^-100, q = x 2^75 */
		{1, 4099, 1, 0.0f, 0x1.fffffep99f, -80, 127}, /* d just below 2^100, q from 2^-155 */
		{1, 515, 1, 0.0f, 0x1p100f, -80, 127},        /* d = 2^100 */
		{1, 4099, 1, 1e-4f, 1.0f, -150, -120},        /* q crossing 2^-126, subnormal x */
		{1, 1027, 1, 0.0f, 0.0f, -3, 3},             /* d = 0 */
		{33, 4099, 5, 0.05f, 1.0f, -3, 2},           /* windows, midpoints within reach */
	};
	static const double betas[] = {0.75, 0.5, 1.0};
	int64_t near = 0;
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int b = 0; b < 3; b++) {
			int64_t C = cases[c].C, inner = cases[c].inner, n = C * inner, dims[4] = {1, C, 1, inner};
			int64_t lo = (cases[c].size - 1) / 2, hi = cases[c].size / 2;
			double as = (double)cases[c].alpha / (double)cases[c].size, bias = cases[c].bias, beta = betas[b];
			float *x = xmalloc((size_t)n * sizeof *x), *y1 = xmalloc((size_t)n * sizeof *y1);
			lrnpow_fill(x, n, 7919 * c + (uint64_t)b, cases[c].lg0, cases[c].lg1);
			for (int th = 1; th <= 3; th += 2) {
				struct rtensor t = shape_tensor(DT_FLOAT, 4, dims, x);
				struct shape_run s;
				lrn_shape_run(&s, &t, cases[c].size, (double)cases[c].alpha, beta, bias, th);
				const float *y = s.y->data;
				int64_t wrong = 0, first = -1, differ = 0;
				for (int64_t i = 0; i < n; i++) {
					int64_t ch = i / inner, at = i % inner;
					double sum = 0;
					for (int64_t k = ch - lo > 0 ? ch - lo : 0; k <= ch + hi && k < C; k++)
						sum += (double)x[at + k * inner] * x[at + k * inner];
					double q = x[i] / pow(bias + as * sum, beta), e = fabs(q) * 0x1p-40;
					float want = (float)q;
					near += th == 1 && fabs(q) < INFINITY && (float)(q - e) != (float)(q + e);
					if (memcmp(&want, y + i, 4) && !(isnan(want) && isnan(y[i])) && !wrong++)
						first = i;
					differ += th == 3 && memcmp(y1 + i, y + i, 4);
				}
				cr_expect_eq(wrong, 0, "LRN case %zu beta %g at %d threads: %lld of %lld wrong, the first #%lld: %a (x %a)",
					     c, beta, th, (long long)wrong, (long long)n, (long long)first,
					     first < 0 ? 0.0 : (double)y[first], first < 0 ? 0.0 : (double)x[first]);
				cr_expect_eq(differ, 0, "LRN case %zu beta %g: %lld outputs differ between 1 and 3 threads", c, beta,
					     (long long)differ);
				if (th == 1)
					memcpy(y1, y, (size_t)n * sizeof *y);
				shape_done(&s);
			}
			xfree(x);
			xfree(y1);
		}
	cr_expect_gt(near, 0, "no quotient near a rounding midpoint: the lanes given to pow are not covered");
}
