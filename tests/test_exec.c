/* test_exec.c - the reference executor: forward passes of the testdata models against PyTorch's
 * saved losses, shape inference with constant folding, the allocator's accounting. */
#include "exec/exec.h"
#include "helpers.h"
#include "io/npy.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include "ops/blas.h"
#include "ops/sgemm.h"
#include "ops/vmath.h"
#include "util/philox.h"
#include "util/pool.h"
#include "util/xalloc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* testdata/ref/<model>/<name>.npy */
static struct rtensor ref_npy(const char *model, const char *name)
{
	char path[512];
	struct rtensor t;
	cr_assert(npy_load(ref_path(path, sizeof path, model, name), &t), "%s", path);
	return t;
}

Test(exec, forward_losses_match_pytorch)
{
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512];
		model_path(path, sizeof path, *m);
		struct graph *g = load_ok(path);
		struct rtensor ins[8];
		const char *names[8];
		size_t n = ref_inputs(g, *m, ins, names);
		struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = n};
		struct exec_stats st;
		struct gd_err e = {0};
		struct exec *x = exec_run(g, &o, &st, &e);
		cr_assert(x, "%s: %s", *m, e.msg);
		const struct rtensor *loss = exec_value(x, g->outputs[0]);
		struct rtensor want = ref_npy(*m, "loss");
		double got = rt_get(loss, 0), ref = rt_get(&want, 0);
		cr_expect(fabs(got - ref) <= 1e-5 * fabs(ref), "%s: loss %.9g, PyTorch %.9g", *m, got, ref);
		cr_expect_gt(st.peak_bytes, 0);
		exec_free(x);
		graph_free(g);
		free(want.data);
		for (size_t i = 0; i < n; i++)
			free(ins[i].data);
	}
}

Test(exec, shape_inference_folds_shape_chains)
{
	/* The transformer computes its Reshape targets from Shape -> Gather -> Concat chains: shape
	 * inference must resolve them without any input data. */
	struct graph *g = load_ok(TESTDATA "/transformer.onnx");
	struct exec_opts o = {.shapes_only = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const struct rtensor *loss = exec_value(x, g->outputs[0]);
	cr_assert(loss->known);
	cr_assert_eq(loss->ndim, 0);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (!strcmp(g->nodes[i]->op_type, "Reshape")) {
			const struct rtensor *t = exec_value(x, g->nodes[i]->out[0]);
			cr_assert(t->known, "Reshape %s has a shape", g->nodes[i]->name);
		}
	exec_free(x);
	graph_free(g);
}

/* Shape inference binds an initializer's bytes only where they can matter: a node that folds, or an
 * input that takes no gradient (a Reshape target); a weight read by a node that cannot fold (its
 * other input has no data) stays unread, which is what keeps a million-weight model's inference
 * from copying every weight. */
Test(exec, shape_inference_reads_only_the_initializers_it_needs)
{
	struct graph *g = load_text("lazy.yaml", "graphdiet: 1\nopset: 17\n"
						 "inputs: [{name: x, dtype: float32, shape: [2, 3]}]\n"
						 "params:\n"
						 "  - {name: w, dtype: float32, shape: [3, 4], init: zeros}\n"
						 "  - {name: s, dtype: int64, shape: [2], data: [4, 2]}\n"
						 "  - {name: c, dtype: float32, shape: [2], data: [1, 2]}\n"
						 "nodes:\n"
						 "  - {op: MatMul, inputs: [x, w], outputs: [m]}\n"
						 "  - {op: Reshape, inputs: [m, s], outputs: [r]}\n"
						 "  - {op: Neg, inputs: [c], outputs: [nc]}\n"
						 "  - {op: Mul, inputs: [r, nc], outputs: [y]}\n"
						 "outputs: [{name: y}]\n");
	struct exec_opts o = {.shapes_only = 1, .keep_values = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const struct rtensor *y = exec_value(x, strmap_get(&g->names, "y"));
	cr_assert(y->known && y->ndim == 2 && y->dims[0] == 4 && y->dims[1] == 2, "y is 4x2 (the Reshape target was read)");
	cr_expect_null(exec_value(x, strmap_get(&g->names, "w"))->data, "the MatMul weight was not bound");
	cr_expect(exec_value(x, strmap_get(&g->names, "w"))->known, "but its shape is known");
	const struct rtensor *nc = exec_value(x, strmap_get(&g->names, "nc"));
	cr_assert(nc->data, "Neg of a constant folds");
	cr_expect_eq(rt_get(nc, 1), -2.0);
	exec_free(x);
	graph_free(g);
}

Test(exec, unbound_symbolic_dims_are_errors_or_probes)
{
	struct graph *g = load_ok(TESTDATA "/mlp.onnx");
	struct exec_opts o = {.shapes_only = 1};
	struct gd_err e = {0};
	cr_assert_null(exec_run(g, &o, NULL, &e));
	cr_assert_str_eq(e.msg, "graph input 'x': symbolic dimension 'batch' is not bound; use --dim batch=N");
	struct exec_binding b = {"batch", 3};
	struct exec_opts o2 = {.shapes_only = 1, .dims = &b, .n_dims = 1};
	struct gd_err e2 = {0};
	struct exec *x = exec_run(g, &o2, NULL, &e2);
	cr_assert(x, "%s", e2.msg);
	/* the first Gemm's output is (batch, 32) */
	const struct rtensor *h = exec_value(x, g->nodes[0]->out[0]);
	cr_assert_eq(h->ndim, 2);
	cr_assert_eq(h->dims[0], 3);
	cr_assert_eq(h->dims[1], 32);
	exec_free(x);
	struct exec_opts o3 = {.shapes_only = 1, .probe_unbound = 1};
	struct gd_err e3 = {0};
	x = exec_run(g, &o3, NULL, &e3);
	cr_assert(x, "%s", e3.msg);
	cr_assert_gt(exec_value(x, g->nodes[0]->out[0])->dims[0], 10000, "a stand-in far from 1");
	exec_free(x);
	graph_free(g);
}

Test(exec, peak_counts_what_is_live)
{
	/* x (8 floats) -> Relu -> Neg -> Tanh, only the last output kept: the input and one intermediate
	 * are live at once, as each node writes over the value it reads last (OPF_REUSES). */
	struct graph *g = load_text("chain.yaml", chain_yaml);
	struct exec_opts o = {.random_inputs = 1, .seed = 1};
	struct exec_stats st;
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, &st, &e);
	cr_assert(x, "%s", e.msg);
	cr_assert_eq(st.peak_bytes, 2 * 32, "input + one intermediate");
	cr_assert_eq(st.final_bytes, 2 * 32, "input and output stay");
	exec_free(x);
	graph_free(g);
}

Test(exec, runs_are_deterministic)
{
	/* the same inputs and seed give the same bits */
	struct graph *g = load_ok(TESTDATA "/transformer.onnx");
	struct exec_opts o = {.random_inputs = 1, .seed = 3};
	struct gd_err e = {0};
	struct exec *x1 = exec_run(g, &o, NULL, &e), *x2 = x1 ? exec_run(g, &o, NULL, &e) : NULL;
	cr_assert(x1 && x2, "%s", e.msg);
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		const struct rtensor *a = exec_value(x1, g->outputs[i]), *b = exec_value(x2, g->outputs[i]);
		cr_assert_eq(a->nbytes, b->nbytes);
		cr_assert_eq(memcmp(a->data, b->data, a->nbytes), 0, "output %s differs between runs", g->outputs[i]->name);
	}
	exec_free(x1);
	exec_free(x2);
	graph_free(g);
}

/* The run statistics of the model `text` (random inputs). */
static struct exec_stats stats_of(const char *name, const char *text)
{
	struct graph *g = load_text(name, text);
	struct exec_opts o = {.random_inputs = 1};
	struct exec_stats st;
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, &st, &e);
	cr_assert(x, "%s", e.msg);
	exec_free(x);
	graph_free(g);
	return st;
}

Test(exec, costs_follow_the_formulas)
{
	/* MatMul (2,3,4)x(4,5): 2*(2*3*5)*4 = 240 FLOPs; Conv (1,2,5,5) by (3,2,3,3), pads 1: output
	 * (1,3,5,5) = 75 elements, 2*75*(2*3*3) = 2700; Relu on it: one per element, 75;
	 * Reshape moves bytes only. Total 3015. */
	const char *text = "graphdiet: 1\nopset: 17\n"
			   "inputs: [{name: a, dtype: float32, shape: [2, 3, 4]}, {name: x, dtype: float32, shape: [1, 2, 5, 5]}]\n"
			   "params: [{name: b, dtype: float32, shape: [4, 5], init: ones},\n"
			   "         {name: w, dtype: float32, shape: [3, 2, 3, 3], init: ones},\n"
			   "         {name: s, dtype: int64, shape: [1], data: [-1]}]\n"
			   "nodes:\n  - {op: MatMul, inputs: [a, b], outputs: [m]}\n"
			   "  - {op: Conv, inputs: [x, w], outputs: [c], attrs: {pads: [1, 1, 1, 1]}}\n"
			   "  - {op: Relu, inputs: [c], outputs: [r]}\n  - {op: Reshape, inputs: [r, s], outputs: [y]}\n"
			   "outputs: [{name: m}, {name: y}]\n";
	struct exec_stats st = stats_of("cost.yaml", text);
	cr_assert_eq(st.flops, 3015);
	/* bytes: MatMul 96+80 in, 120 out; Conv 200+216 in, 300 out; Relu 300+300; Reshape 300+8+300 */
	cr_assert_eq(st.bytes_moved, 96 + 80 + 120 + 200 + 216 + 300 + 300 + 300 + 300 + 8 + 300);
}

/* float32 convolutions with 16+ channels take the shifted-GEMM path, float64 ones im2col: the two
 * must agree (to float32 rounding) over pads, batch and bias. */
Test(exec, shifted_conv_matches_im2col)
{
	const char *fmt = "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [2, 16, 7, 6]}]\n"
			  "params: [{name: w, dtype: %s, shape: [8, 16, 3, 3], init: {dist: normal, seed: 4}},\n"
			  "         {name: b, dtype: %s, shape: [8], init: {dist: normal, seed: 5}}]\n"
			  "nodes: [{op: Conv, inputs: [x, w, b], outputs: [y], attrs: {pads: [1, 0, 2, 1]}}]\n"
			  "outputs: [{name: y}]\n";
	double *ys[2] = {NULL, NULL};
	int64_t n = 0;
	for (int k = 0; k < 2; k++) {
		const char *dt = k ? "float64" : "float32";
		char text[1024], name[64];
		snprintf(text, sizeof text, fmt, dt, dt, dt);
		snprintf(name, sizeof name, "conv_%s.yaml", dt);
		struct graph *g = load_text(name, text);
		struct exec_opts o = {.random_inputs = 1, .seed = 2};
		struct gd_err e = {0};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s", e.msg);
		const struct rtensor *y = exec_value(x, g->outputs[0]);
		cr_assert_eq(y->dims[2], 8);
		cr_assert_eq(y->dims[3], 5);
		n = y->numel;
		ys[k] = malloc((size_t)n * sizeof(double));
		for (int64_t i = 0; i < n; i++)
			ys[k][i] = rt_get(y, i);
		exec_free(x);
		graph_free(g);
	}
	double scale = 0, worst = 0;
	for (int64_t i = 0; i < n; i++) {
		scale = fmax(scale, fabs(ys[1][i]));
		worst = fmax(worst, fabs(ys[0][i] - ys[1][i]));
	}
	cr_assert(worst <= 1e-5 * scale, "float32 shifted conv differs from float64 im2col by %g (scale %g)", worst, scale);
	free(ys[0]);
	free(ys[1]);
}

/* Any input of any op case given as the empty name ("", an omitted optional input) is an error or
 * works, never a crash: required ones are refused by the executor, optional ones each kernel
 * handles. (An empty required input crashed 60 of the 61 kernels.) Criterion runs each test in a
 * child, so a crash fails the test rather than the suite. */
#include "autodiff/ad.h"
#include "opcases.h"
Test(exec, empty_inputs_never_crash)
{
	size_t refused = 0, ran = 0;
	for (size_t i = 0; i < n_op_cases; i++) {
		struct graph *probe = op_case_graph(&op_cases[i], "float32");
		uint32_t nodes = probe->n_nodes;
		graph_free(probe);
		for (uint32_t j = 0; j < nodes; j++)
			for (uint32_t k = 0;; k++) {
				struct graph *g = op_case_graph(&op_cases[i], "float32");
				struct node *n = g->nodes[j];
				if (k >= n->n_in) {
					graph_free(g);
					break;
				}
				n->in[k] = NULL;
				struct gd_err e = {0};
				struct exec_opts o = {0};
				struct exec *x = exec_run(g, &o, NULL, &e);
				if (x)
					ran++;
				else
					refused++;
				exec_free(x);
				if (x) { /* and the gradient rules read what runs: an error or a graph */
					struct autodiff_opts ao = {0};
					struct autodiff_result res;
					struct gd_err e2 = {0};
					(void)autodiff(g, &ao, &res, &e2);
				}
				graph_free(g);
			}
	}
	cr_expect_gt(refused, 100, "%zu refused, %zu ran", refused, ran);
}

/* NaN goes through the activations as through PyTorch's, so all-NaN weights cannot give a finite
 * loss (Relu(NaN) was 0); their other values stay bit for bit. */
Test(exec, activations_keep_nan)
{
	static const char *const ops[] = {"Relu", "HardSigmoid", "HardSwish", "LeakyRelu", "Clip", "Elu", "Softplus", "Tanh",
					  "Sigmoid", NULL};
	for (const char *const *op = ops; *op; op++) {
		char text[600];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [3]}]\n"
			 "nodes:\n  - {op: %s, inputs: [x], outputs: [y]}\noutputs: [{name: y}]\n", *op);
		struct graph *g = load_text("nan.yaml", text);
		float v[3] = {NAN, -2.0f, 3.0f};
		struct rtensor t = {.dtype = DT_FLOAT, .ndim = 1, .dims = {3}, .numel = 3, .data = v, .nbytes = sizeof v,
				    .known = 1};
		const char *name = "x";
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s: %s", *op, e.msg);
		const float *y = exec_value(x, g->outputs[0])->data;
		cr_expect(isnan(y[0]), "%s(NaN) = %g", *op, y[0]);
		cr_expect(!isnan(y[1]) && !isnan(y[2]), "%s", *op);
		exec_free(x);
		graph_free(g);
	}
}

/* Softmax, LogSoftmax and SoftmaxCrossEntropyLoss subtract each row's maximum, found in lanes of
 * 32 and a tail: row r of 70 holds 100 at column r (e^100 overflows float32) and small values
 * elsewhere, so a maximum missed in any lane or in the tail makes the row's results infinite or
 * NaN. */
Test(exec, softmax_rows_find_their_maximum_in_every_lane)
{
	enum { N = 70 };
	static float v[N * N];
	static int64_t lab[N];
	for (int r = 0; r < N; r++) {
		lab[r] = r;
		for (int k = 0; k < N; k++)
			v[r * N + k] = k == r ? 100.0f : 0.01f * (float)((r + k) % 7);
	}
	struct graph *g = load_text("softmax.yaml",
				    "graphdiet: 1\nopset: 17\n"
				    "inputs: [{name: x, dtype: float32, shape: [70, 70]}, {name: l, dtype: int64, shape: [70]}]\n"
				    "nodes:\n  - {op: Softmax, inputs: [x], outputs: [sm]}\n"
				    "  - {op: LogSoftmax, inputs: [x], outputs: [ls]}\n"
				    "  - {op: SoftmaxCrossEntropyLoss, inputs: [x, l], outputs: [ce], attrs: {reduction: none}}\n"
				    "outputs: [{name: sm}, {name: ls}, {name: ce}]\n");
	struct rtensor t[2] = {{.dtype = DT_FLOAT, .ndim = 2, .dims = {N, N}, .numel = N * N, .data = v, .nbytes = sizeof v, .known = 1},
			       {.dtype = DT_INT64, .ndim = 1, .dims = {N}, .numel = N, .data = lab, .nbytes = sizeof lab, .known = 1}};
	const char *names[2] = {"x", "l"};
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const float *sm = exec_value(x, g->outputs[0])->data, *ls = exec_value(x, g->outputs[1])->data,
		    *ce = exec_value(x, g->outputs[2])->data;
	for (int r = 0; r < N; r++) {
		cr_expect(sm[r * N + r] > 0.999f && sm[r * N + (r + 1) % N] < 1e-30f, "Softmax row %d: %g at its maximum", r,
			  sm[r * N + r]);
		cr_expect(fabsf(ls[r * N + r]) < 1e-5f && fabsf(ls[r * N + (r + 1) % N] + 100) < 0.1f,
			  "LogSoftmax row %d: %g at its maximum", r, ls[r * N + r]);
		cr_expect(ce[r] >= 0 && ce[r] < 1e-5f, "SoftmaxCrossEntropyLoss row %d: %g", r, ce[r]);
	}
	exec_free(x);
	graph_free(g);
}

Test(exec, reductions_over_runs_match_a_plain_sum)
{
	/* runs of 35 (H x W under axes 0, 2, 3: partial sums and a tail) and of 7 (the last axis), and
	 * kept trailing axes (axis 0 alone), against sums in double written here */
	static const char text[] =
		"graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: float32, shape: [2, 3, 5, 7]}]\n"
		"params:\n  - {name: bn, dtype: int64, shape: [3], data: [0, 2, 3]}\n"
		"  - {name: last, dtype: int64, shape: [1], data: [-1]}\n  - {name: first, dtype: int64, shape: [1], data: [0]}\n"
		"nodes:\n  - {op: ReduceSum, inputs: [x, bn], outputs: [s], attrs: {keepdims: 0}}\n"
		"  - {op: ReduceL2, inputs: [x, bn], outputs: [l2], attrs: {keepdims: 0}}\n"
		"  - {op: ReduceMean, inputs: [x, last], outputs: [m], attrs: {keepdims: 0}}\n"
		"  - {op: ReduceSum, inputs: [x, first], outputs: [f], attrs: {keepdims: 0}}\n"
		"outputs: [{name: s}, {name: l2}, {name: m}, {name: f}]\n";
	struct graph *g = load_text("reduce.yaml", text);
	float v[210];
	for (int i = 0; i < 210; i++)
		v[i] = (float)sin(0.37 * i) * (i % 3 ? 1.0f : 100.0f);
	struct rtensor t = {.dtype = DT_FLOAT, .ndim = 4, .dims = {2, 3, 5, 7}, .numel = 210, .data = v, .nbytes = sizeof v,
			    .known = 1};
	const char *name = "x";
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const float *s = exec_value(x, g->outputs[0])->data, *l2 = exec_value(x, g->outputs[1])->data;
	const float *m = exec_value(x, g->outputs[2])->data, *f = exec_value(x, g->outputs[3])->data;
	for (int c = 0; c < 3; c++) {
		double ws = 0, wq = 0;
		for (int n = 0; n < 2; n++)
			for (int k = 0; k < 35; k++) {
				double a = v[(n * 3 + c) * 35 + k];
				ws += a;
				wq += a * a;
			}
		cr_expect_float_eq(s[c], (float)ws, 1e-5 * (1 + fabs(ws)), "channel %d: %g, not %g", c, s[c], ws);
		cr_expect_float_eq(l2[c], (float)sqrt(wq), 1e-5 * sqrt(wq), "channel %d: %g, not %g", c, l2[c], sqrt(wq));
	}
	for (int r = 0; r < 30; r++) {
		double w = 0;
		for (int k = 0; k < 7; k++)
			w += v[r * 7 + k];
		cr_expect_float_eq(m[r], (float)(w / 7), 1e-5 * (1 + fabs(w)), "row %d", r);
	}
	for (int k = 0; k < 105; k++)
		cr_expect_float_eq(f[k], (float)((double)v[k] + v[105 + k]), 1e-5 * (1 + fabs(v[k])), "element %d", k);
	exec_free(x);
	graph_free(g);
}

/* Ulps between y and the double-precision reference r, in units of r's float spacing. */
static double ulps(float y, double r)
{
	float a = fabsf((float)r);
	double u = a < 1.17549435e-38f ? 1.40129846e-45 : (double)(nextafterf(a, INFINITY) - a);
	return fabs((double)y - r) / u;
}

Test(vmath, accuracy_against_libm_in_double)
{
	/* 2^20 evenly spaced points per range; the header promises 2, 3 and 2 ulp (measured: 1.1, 2.5
	 * and 1.3 on 2^24 points) */
	struct { const char *name; float (*f)(float); double (*ref)(double); float lo, hi; double most; } cases[] = {
		{"exp", vm_expf, exp, -87.3f, 88.7f, 2}, {"exp near 0", vm_expf, exp, -1, 1, 2},
		{"erf", vm_erff, erf, -6, 6, 3}, {"erf near 0", vm_erff, erf, -1e-3f, 1e-3f, 3},
		{"tanh", vm_tanhf, tanh, -12, 12, 2}, {"tanh near 0", vm_tanhf, tanh, -0.7f, 0.7f, 2},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		double worst = 0;
		float at = 0;
		for (int i = 0; i <= 1 << 20; i++) {
			float x = cases[c].lo + (cases[c].hi - cases[c].lo) * (float)i / (float)(1 << 20);
			double r = cases[c].ref(x), e = fabs(r) > 1e-30 ? ulps(cases[c].f(x), r) : 0;
			if (e > worst)
				worst = e, at = x;
		}
		cr_expect_leq(worst, cases[c].most, "%s: %.2f ulp at %g", cases[c].name, worst, at);
	}
	/* IEEE's special values, which the finite checks of mixed precision rely on */
	cr_expect(isnan(vm_expf(NAN)) && isnan(vm_erff(NAN)) && isnan(vm_tanhf(NAN)));
	cr_expect(vm_expf(INFINITY) == INFINITY && vm_expf(89) == INFINITY && vm_expf(-INFINITY) == 0);
	cr_expect(vm_expf(-103) > 0 && vm_expf(-103) < 1.2e-38f, "gradual underflow");
	cr_expect(vm_erff(INFINITY) == 1 && vm_erff(-INFINITY) == -1 && vm_tanhf(-INFINITY) == -1);
	cr_expect(vm_tanhf(0) == 0 && vm_erff(0) == 0 && vm_expf(0) == 1);
}

/* sgemm.c's kernel keeps sgemm.h's promise to the bit: every element of C is its blocks' fmaf
 * chains over k in order, each added to beta C (0 with beta 0, C unread: it holds NaN) times
 * alpha, whatever the transposes, the edges of its tiles and blocks (k past one block and two;
 * m and n off whole tiles and vectors; narrow products, n up to 64, whose tiles sum up to 8
 * blocks side by side, past spans of 8), and the part of C a call is given: each product is also
 * run as three pieces, cut at rows and columns no tile or vector boundary falls on, and once with
 * no memory for its packed panels. The padding past each row of C is left as it was. */
static float sg_val(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((double)(*s >> 11) / 9007199254740992.0 * 4 - 2);
}

Test(sgemm, every_element_is_its_blocks_fma_chains)
{
	if (!sgemm_usable())
		cr_skip_test("this CPU has no AVX-512F: products run on OpenBLAS");
	static const int64_t shapes[][3] = {{1, 1, 1}, {6, 64, 256}, {7, 65, 257}, {13, 100, 3}, {300, 70, 600},
					    {5, 17, 1000}, {64, 513, 40}, {33, 16, 16}, {2, 1030, 5}, {3, 20, 0},
					    {16, 8, 4100}, {3, 30, 2100}};
	static const float scale[][2] = {{1, 0}, {0.5f, 1}, {1, 0.3f}, {-2, 1}, {-0.75f, 0}};
	uint64_t seed = 7;
	for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
		for (int tr = 0; tr < 4; tr++)
			for (size_t sc = 0; sc < sizeof scale / sizeof *scale; sc++) {
				int ta = tr & 1, tb = tr >> 1;
				int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
				int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
				float alpha = scale[sc][0], beta = scale[sc][1];
				size_t na = (size_t)((ta ? k : m) * lda), nb = (size_t)((tb ? n : k) * ldb), nc = (size_t)(m * ldc);
				float *a = malloc(na * 4), *b = malloc(nb * 4), *c0 = malloc(nc * 4), *c = malloc(nc * 4),
				      *cut = malloc(nc * 4);
				for (size_t i = 0; i < na; i++)
					a[i] = sg_val(&seed);
				for (size_t i = 0; i < nb; i++)
					b[i] = sg_val(&seed);
				for (size_t i = 0; i < nc; i++)
					c0[i] = beta == 0 && (int64_t)(i % (size_t)ldc) < n ? NAN : sg_val(&seed);
				memcpy(c, c0, nc * 4);
				memcpy(cut, c0, nc * 4);
				sgemm_run(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
				int64_t r0 = m / 3, q0 = n / 2 + 1 < n ? n / 2 + 1 : n; /* 100 rows: 33; 70 columns: 36 */
				sgemm_run(ta, tb, r0, q0, k, alpha, a, lda, b, ldb, beta, cut, ldc);
				sgemm_run(ta, tb, r0, n - q0, k, alpha, a, lda, tb ? b + q0 * ldb : b + q0, ldb, beta, cut + q0, ldc);
				sgemm_run(ta, tb, m - r0, n, k, alpha, ta ? a + r0 : a + r0 * lda, lda, b, ldb, beta, cut + r0 * ldc,
					  ldc);
				float *starved = malloc(nc * 4); /* no memory for the packed panels: the same sums */
				memcpy(starved, c0, nc * 4);
				xalloc_fail_after(0);
				sgemm_run(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, starved, ldc);
				xalloc_fail_after(-1);
				cr_expect(!memcmp(starved, c, nc * 4), "%lldx%lldx%lld without memory: the bits differ",
					  (long long)m, (long long)n, (long long)k);
				free(starved);
				int64_t wrong = 0, moved = 0;
				for (int64_t i = 0; i < m; i++)
					for (int64_t j = 0; j < ldc; j++) {
						float want = c0[i * ldc + j];
						for (int64_t p0 = 0; j < n && p0 < k; p0 += SGEMM_KC) {
							float sum = 0;
							for (int64_t p = p0; p < k && p < p0 + SGEMM_KC; p++)
								sum = fmaf(a[ta ? p * lda + i : i * lda + p],
									   b[tb ? j * ldb + p : p * ldb + j], sum);
							want = p0 ? fmaf(alpha, sum, want)
							     : beta == 0 ? alpha * sum
							     : fmaf(alpha, sum, beta == 1 ? want : beta * want);
						}
						if (j < n && !k)
							want = beta == 0 ? 0 : want * beta;
						wrong += memcmp(&c[i * ldc + j], &want, 4) != 0;
						moved += memcmp(&cut[i * ldc + j], &want, 4) != 0;
					}
				cr_expect(!wrong, "%s%s %lldx%lldx%lld alpha %g beta %g: %lld elements differ", ta ? "A^T " : "A ",
					  tb ? "B^T" : "B", (long long)m, (long long)n, (long long)k, alpha, beta, (long long)wrong);
				cr_expect(!moved, "%lldx%lldx%lld as three pieces: %lld elements differ", (long long)m, (long long)n,
					  (long long)k, (long long)moved);
				free(a), free(b), free(c0), free(c), free(cut);
			}
}

/* The same Conv in float32 and float64 on the same values (float64 always takes im2col). In
 * float32, few output positions take the per-position GEMMs: a 9x9 kernel over a 10x10 image,
 * pads 1, at stride 1 and 2 and with pads (1, 0, 2, 1) gathers patches (the padded frame would
 * cost 1.8x the FLOPs); over an 8x8 image, pads 1, it reads the padded image through shifted
 * pointers (1.2x); a 3x3 kernel over a 4x4 map of 32 channels is a forward Conv on a small map. */
struct conv_case {
	int c, h, k, m, stride, outs;
	const char *pads;
};
static const struct conv_case conv_cases[] = {
	{3, 10, 9, 4, 1, 16, "[1, 1, 1, 1]"}, {3, 10, 9, 4, 2, 4, "[1, 1, 1, 1]"}, {3, 10, 9, 4, 1, 15, "[1, 0, 2, 1]"},
	{3, 8, 9, 4, 1, 4, "[1, 1, 1, 1]"},   {32, 4, 3, 5, 1, 16, "[1, 1, 1, 1]"},
};

static void conv_in(int dtype, const struct conv_case *cc, double *got)
{
	char text[1024];
	const char *dt = dtype == DT_FLOAT ? "float32" : "float64";
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [2, %d, %d, %d]}, "
		 "{name: w, dtype: %s, shape: [%d, %d, %d, %d]}, {name: b, dtype: %s, shape: [%d]}]\n"
		 "nodes:\n  - {op: Conv, inputs: [x, w, b], outputs: [y], attrs: {pads: %s, strides: [%d, %d]}}\n"
		 "outputs: [{name: y}]\n",
		 dt, cc->c, cc->h, cc->h, dt, cc->m, cc->c, cc->k, cc->k, dt, cc->m, cc->pads, cc->stride, cc->stride);
	struct graph *g = load_text("conv.yaml", text);
	int64_t nx = 2 * cc->c * cc->h * cc->h, nw = cc->m * cc->c * cc->k * cc->k;
	int f = dtype == DT_FLOAT;
	size_t es = f ? 4 : 8;
	uint8_t *xb = malloc((size_t)nx * es), *wb = malloc((size_t)nw * es), *bb = malloc((size_t)cc->m * es);
	for (int64_t i = 0; i < nx + nw + cc->m; i++) {
		double v = i < nx ? sin(0.7 * (double)i) : i < nx + nw ? cos(0.3 * (double)(i - nx)) : (double)(i - nx - nw) - 1.5;
		uint8_t *to = i < nx ? xb + i * es : i < nx + nw ? wb + (i - nx) * es : bb + (i - nx - nw) * es;
		if (f) {
			float fv = (float)v;
			memcpy(to, &fv, 4);
		} else {
			memcpy(to, &v, 8);
		}
	}
	struct rtensor t[3] = {
		{.dtype = dtype, .ndim = 4, .dims = {2, cc->c, cc->h, cc->h}, .numel = nx, .data = xb, .nbytes = (size_t)nx * es, .known = 1},
		{.dtype = dtype, .ndim = 4, .dims = {cc->m, cc->c, cc->k, cc->k}, .numel = nw, .data = wb, .nbytes = (size_t)nw * es, .known = 1},
		{.dtype = dtype, .ndim = 1, .dims = {cc->m}, .numel = cc->m, .data = bb, .nbytes = (size_t)cc->m * es, .known = 1}};
	const char *names[3] = {"x", "w", "b"};
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 3};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const struct rtensor *y = exec_value(x, g->outputs[0]);
	cr_assert_eq(y->numel, 2 * cc->m * cc->outs);
	for (int64_t i = 0; i < y->numel; i++)
		got[i] = f ? ((const float *)y->data)[i] : ((const double *)y->data)[i];
	exec_free(x);
	graph_free(g);
	free(xb);
	free(wb);
	free(bb);
}

Test(exec, a_kernel_as_large_as_the_image_convolves_as_im2col_does)
{
	for (size_t c = 0; c < sizeof conv_cases / sizeof *conv_cases; c++) {
		double f32[256], f64[256];
		conv_in(DT_FLOAT, &conv_cases[c], f32);
		conv_in(DT_DOUBLE, &conv_cases[c], f64);
		for (int i = 0; i < 2 * conv_cases[c].m * conv_cases[c].outs; i++)
			cr_expect(fabs(f32[i] - f64[i]) <= 1e-4 * (1 + fabs(f64[i])), "case %zu, output %d: %g, not %g", c, i,
				  f32[i], f64[i]);
	}
}

/* float32 Conv and stride-1 ConvTranspose (on AVX-512, the direct kernel: conv_direct.c) against
 * the definition summed in double, and the same bits with 1 thread and 3: tiles of fewer than six
 * images, channels past a whole block and a whole vector (masked lanes), asymmetric pads, stride
 * 2, dilation 2 (a run a tap), kernels as large as the image or larger, more pixels than an item
 * takes, one channel (no NHWC copy), a 1-D Conv, ConvTranspose pads and dilation, a kernel too
 * long to pack (left to the GEMM paths), and two weight gradients' shapes. */
struct direct_case {
	int transpose, rank, n, c, h, w, m, kh, kw, s, d, pt, pl, pb, pr;
};

static double direct_definition(const struct direct_case *k, const float *x, const float *w, const float *b, int n,
				int m, int oy, int ox)
{
	double sum = b ? b[m] : 0;
	for (int c = 0; c < k->c; c++)
		for (int i = 0; i < k->kh; i++)
			for (int j = 0; j < k->kw; j++) {
				/* Conv reads x at oy s + i d - pt; a stride-1 ConvTranspose adds x at iy into
				 * iy + i d - pt, so it reads iy = oy + pt - i d */
				int iy = k->transpose ? oy + k->pt - i * k->d : oy * k->s + i * k->d - k->pt;
				int ix = k->transpose ? ox + k->pl - j * k->d : ox * k->s + j * k->d - k->pl;
				if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w)
					continue;
				double wv = k->transpose ? w[((c * k->m + m) * k->kh + i) * k->kw + j]
							 : w[((m * k->c + c) * k->kh + i) * k->kw + j];
				sum += (double)x[((n * k->c + c) * k->h + iy) * k->w + ix] * wv;
			}
	return sum;
}

Test(exec, direct_conv_against_the_definition)
{
	static const struct direct_case cases[] = {
		{0, 4, 7, 5, 9, 11, 21, 3, 3, 1, 1, 1, 1, 1, 1},   {0, 4, 13, 3, 12, 10, 70, 5, 3, 2, 1, 2, 1, 0, 2},
		{0, 4, 5, 4, 9, 9, 16, 3, 3, 1, 2, 2, 2, 2, 2},    {0, 4, 2, 6, 4, 4, 130, 3, 3, 1, 1, 1, 1, 1, 1},
		{0, 4, 16, 2, 20, 20, 8, 9, 9, 1, 1, 1, 1, 1, 1},  {0, 3, 3, 4, 1, 30, 10, 1, 5, 1, 1, 0, 2, 0, 2},
		{0, 4, 1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 0, 0},     {0, 4, 2, 3, 3, 3, 4, 5, 5, 1, 1, 2, 2, 2, 2},
		{1, 4, 6, 8, 5, 5, 12, 3, 3, 1, 1, 1, 1, 1, 1},    {1, 4, 3, 5, 4, 6, 20, 3, 2, 1, 2, 0, 1, 2, 0},
		{0, 4, 1, 16, 50, 50, 16, 48, 48, 1, 1, 0, 0, 0, 0}, /* a block of weights past 8 MiB: GEMM */
		/* weight gradients' Convs (X^T with dY^T, pads 1): 32 images dealt into items of 5 and 6,
		 * and 3 images by taps, one image a tile row */
		{0, 4, 32, 16, 16, 16, 32, 16, 16, 1, 1, 1, 1, 1, 1}, {0, 4, 3, 16, 32, 32, 32, 32, 32, 1, 1, 1, 1, 1, 1},
	};
	for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
		const struct direct_case *k = &cases[ci];
		int r = k->rank, wc = k->transpose ? k->m : k->c, wm = k->transpose ? k->c : k->m;
		int nx = k->n * k->c * k->h * k->w, nw = wm * wc * k->kh * k->kw;
		float *x = malloc((size_t)nx * 4), *w = malloc((size_t)nw * 4), b[130];
		for (int i = 0; i < nx; i++)
			x[i] = (float)sin(0.7 * i);
		for (int i = 0; i < nw; i++)
			w[i] = (float)cos(0.3 * i);
		for (int i = 0; i < k->m; i++)
			b[i] = 0.25f * (float)i - 3;
		char text[1024], xs[64], ws[64], attrs[256];
		if (r == 4) {
			snprintf(xs, sizeof xs, "%d, %d, %d, %d", k->n, k->c, k->h, k->w);
			snprintf(ws, sizeof ws, "%d, %d, %d, %d", wm, wc, k->kh, k->kw);
			snprintf(attrs, sizeof attrs, "pads: [%d, %d, %d, %d], strides: [%d, %d], dilations: [%d, %d]", k->pt,
				 k->pl, k->pb, k->pr, k->s, k->s, k->d, k->d);
		} else {
			snprintf(xs, sizeof xs, "%d, %d, %d", k->n, k->c, k->w);
			snprintf(ws, sizeof ws, "%d, %d, %d", wm, wc, k->kw);
			snprintf(attrs, sizeof attrs, "pads: [%d, %d], strides: [%d], dilations: [%d]", k->pl, k->pr, k->s, k->d);
		}
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [%s]}, {name: w, dtype: float32, "
			 "shape: [%s]}, {name: b, dtype: float32, shape: [%d]}]\n"
			 "nodes:\n  - {op: %s, inputs: [x, w, b], outputs: [y], attrs: {%s}}\noutputs: [{name: y}]\n",
			 xs, ws, k->m, k->transpose ? "ConvTranspose" : "Conv", attrs);
		struct graph *g = load_text("direct.yaml", text);
		struct rtensor t[3] = {{.dtype = DT_FLOAT, .ndim = r, .numel = nx, .data = x, .nbytes = (size_t)nx * 4, .known = 1},
				       {.dtype = DT_FLOAT, .ndim = r, .numel = nw, .data = w, .nbytes = (size_t)nw * 4, .known = 1},
				       {.dtype = DT_FLOAT, .ndim = 1, .dims = {k->m}, .numel = k->m, .data = b,
					.nbytes = (size_t)k->m * 4, .known = 1}};
		const int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {wm, wc, k->kh, k->kw};
		for (int i = 0; i < r; i++) {
			t[0].dims[i] = xd[r == 4 || i < 2 ? i : i + 1];
			t[1].dims[i] = wd[r == 4 || i < 2 ? i : i + 1];
		}
		int oh = k->transpose ? k->h - 1 + k->d * (k->kh - 1) + 1 - k->pt - k->pb
				      : (k->h + k->pt + k->pb - k->d * (k->kh - 1) - 1) / k->s + 1;
		int ow = k->transpose ? k->w - 1 + k->d * (k->kw - 1) + 1 - k->pl - k->pr
				      : (k->w + k->pl + k->pr - k->d * (k->kw - 1) - 1) / k->s + 1;
		const char *names[3] = {"x", "w", "b"};
		float *first = NULL;
		for (int th = 1; th <= 3; th += 2) {
			pool_set_threads(th);
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 3};
			struct exec *ex = exec_run(g, &o, NULL, &e);
			cr_assert(ex, "case %zu: %s", ci, e.msg);
			const struct rtensor *y = exec_value(ex, g->outputs[0]);
			cr_assert_eq(y->numel, (int64_t)k->n * k->m * oh * ow, "case %zu", ci);
			const float *yv = y->data;
			int64_t bad = 0;
			if (!first) {
				for (int64_t i = 0; i < y->numel; i++) {
					int ox = (int)(i % ow), oy = (int)(i / ow % oh), m = (int)(i / ow / oh % k->m);
					int n = (int)(i / ow / oh / k->m);
					double want = direct_definition(k, x, w, b, n, m, oy, ox);
					bad += !(fabs(yv[i] - want) <= 1e-5 * (1 + fabs(want)) * (k->c * k->kh * k->kw));
				}
				cr_expect_eq(bad, 0, "case %zu: %lld outputs off the definition", ci, (long long)bad);
				first = malloc(y->nbytes);
				memcpy(first, yv, y->nbytes);
			} else {
				cr_expect_eq(memcmp(first, yv, y->nbytes), 0, "case %zu: other bits with 3 threads", ci);
			}
			exec_free(ex);
		}
		pool_set_threads(1);
		free(first);
		graph_free(g);
		free(x);
		free(w);
	}
}

/* Pow by 2 and by 1 (an MSE loss and its gradient) take a product and a copy instead of pow():
 * still pow's float32 answer bit for bit, computed here by libm in double, on signed zeros,
 * subnormals, huge values whose square overflows, infinities and NaN; by 2.5, pow itself. */
Test(exec, pow_by_two_and_one_is_pow)
{
	static const float xs[12] = {0.0f, -0.0f, 1e-40f, -3e-39f, 1.5f, -2.75f, 3e19f, -2e20f, 1.7e38f, INFINITY,
				     -INFINITY, NAN};
	const double es[3] = {2.0, 1.0, 2.5};
	for (int k = 0; k < 3; k++) {
		char text[512];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [12]}]\n"
			 "params: [{name: e, dtype: float32, shape: [], data: [%g]}]\n"
			 "nodes:\n  - {op: Pow, inputs: [x, e], outputs: [y]}\noutputs: [{name: y}]\n",
			 es[k]);
		struct graph *g = load_text("pow.yaml", text);
		struct rtensor t = {.dtype = DT_FLOAT, .ndim = 1, .dims = {12}, .numel = 12, .data = (void *)xs,
				    .nbytes = sizeof xs, .known = 1};
		const char *names[1] = {"x"};
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = &t, .input_names = names, .n_inputs = 1};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s", e.msg);
		const float *y = exec_value(x, g->outputs[0])->data;
		for (int i = 0; i < 12; i++) {
			float want = (float)pow((double)xs[i], es[k]);
			uint32_t a, b;
			memcpy(&a, &y[i], 4);
			memcpy(&b, &want, 4);
			cr_expect(a == b || (isnan(y[i]) && isnan(want)), "pow(%g, %g): %a, not %a", xs[i], es[k], y[i], want);
		}
		exec_free(x);
		graph_free(g);
	}
}

/* ScatterElements on one float32 axis (MaxPool's gradient) against the definition: repeated and
 * negative indices, each reduction, in order; an index outside the axis is an error. */
Test(exec, flat_scatter_elements_against_the_definition)
{
	static const float d[6] = {0.5f, -1.25f, 3.0f, 1e-3f, 7.0f, -2.0f}, u[5] = {1.5f, 2.0f, -0.75f, 4.0f, 1e7f};
	static const int64_t ix[5] = {0, -1, 0, 3, 5};
	static const char *const reds[3] = {"none", "add", "mul"};
	for (int r = 0; r < 3; r++) {
		char text[1024];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 18\n"
			 "params: [{name: d, dtype: float32, shape: [6], data: [0.5, -1.25, 3.0, 0.001, 7.0, -2.0]},\n"
			 "         {name: i, dtype: int64, shape: [5], data: [0, -1, 0, 3, 5]},\n"
			 "         {name: u, dtype: float32, shape: [5], data: [1.5, 2.0, -0.75, 4.0, 1e7]}]\n"
			 "nodes:\n  - {op: ScatterElements, inputs: [d, i, u], outputs: [y], attrs: {reduction: %s}}\n"
			 "outputs: [{name: y}]\n",
			 reds[r]);
		struct graph *g = load_text("scatter.yaml", text);
		struct gd_err e = {0};
		struct exec_opts o = {0};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s", e.msg);
		float want[6];
		memcpy(want, d, sizeof want);
		for (int j = 0; j < 5; j++) {
			int64_t v = ix[j] < 0 ? ix[j] + 6 : ix[j];
			want[v] = r == 0 ? u[j] : r == 1 ? want[v] + u[j] : want[v] * u[j];
		}
		const float *y = exec_value(x, g->outputs[0])->data;
		for (int k = 0; k < 6; k++)
			cr_expect(y[k] == want[k], "%s: y[%d] = %g, not %g", reds[r], k, y[k], want[k]);
		exec_free(x);
		graph_free(g);
	}
	struct graph *g = load_text("scatter.yaml",
				    "graphdiet: 1\nopset: 18\n"
				    "params: [{name: d, dtype: float32, shape: [3], data: [1, 2, 3]},\n"
				    "         {name: i, dtype: int64, shape: [1], data: [3]}, {name: u, dtype: float32, shape: [1], data: [1]}]\n"
				    "nodes:\n  - {op: ScatterElements, inputs: [d, i, u], outputs: [y], attrs: {reduction: add}}\n"
				    "outputs: [{name: y}]\n");
	struct gd_err e = {0};
	struct exec_opts o = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_expect(!x && strstr(e.msg, "index out of range"), "an index past the axis: %s", e.msg);
	exec_free(x);
	graph_free(g);
}

/* A ConvTranspose on small maps (three images of 8 channels, 2x2 and 3x3) makes every image's
 * columns with one GEMM and folds each image's block of them back; float32 against float64 (the
 * per-image path), at stride 1 with pads 1 and at stride 2 without. */
Test(exec, a_conv_transpose_on_small_maps_folds_the_batch)
{
	static const int hs[2] = {2, 3}, strides[2] = {1, 2};
	static const char *const pads[2] = {"[1, 1, 1, 1]", "[0, 0, 0, 0]"};
	for (int c = 0; c < 2; c++) {
		double got[2][3 * 5 * 7 * 7];
		int64_t numel = 0;
		for (int f = 0; f < 2; f++) {
			int dtype = f ? DT_FLOAT : DT_DOUBLE;
			const char *dt = f ? "float32" : "float64";
			char text[1024];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [3, 8, %d, %d]}, "
				 "{name: w, dtype: %s, shape: [8, 5, 3, 3]}]\n"
				 "nodes:\n  - {op: ConvTranspose, inputs: [x, w], outputs: [y], attrs: {pads: %s, strides: [%d, %d]}}\n"
				 "outputs: [{name: y}]\n",
				 dt, hs[c], hs[c], dt, pads[c], strides[c], strides[c]);
			struct graph *g = load_text("convt.yaml", text);
			int64_t nx = 3 * 8 * hs[c] * hs[c], nw = 8 * 5 * 9;
			size_t es = f ? 4 : 8;
			uint8_t *xb = malloc((size_t)nx * es), *wb = malloc((size_t)nw * es);
			for (int64_t i = 0; i < nx + nw; i++) {
				double v = i < nx ? sin(0.7 * (double)i) : cos(0.3 * (double)(i - nx));
				uint8_t *to = i < nx ? xb + i * es : wb + (i - nx) * es;
				float fv = (float)v;
				memcpy(to, f ? (void *)&fv : (void *)&v, es);
			}
			struct rtensor t[2] = {
				{.dtype = dtype, .ndim = 4, .dims = {3, 8, hs[c], hs[c]}, .numel = nx, .data = xb, .nbytes = (size_t)nx * es, .known = 1},
				{.dtype = dtype, .ndim = 4, .dims = {8, 5, 3, 3}, .numel = nw, .data = wb, .nbytes = (size_t)nw * es, .known = 1}};
			const char *names[2] = {"x", "w"};
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
			struct exec *x = exec_run(g, &o, NULL, &e);
			cr_assert(x, "%s", e.msg);
			const struct rtensor *y = exec_value(x, g->outputs[0]);
			numel = y->numel;
			cr_assert_leq(numel, 3 * 5 * 7 * 7);
			for (int64_t i = 0; i < numel; i++)
				got[f][i] = f ? ((const float *)y->data)[i] : ((const double *)y->data)[i];
			exec_free(x);
			graph_free(g);
			free(xb);
			free(wb);
		}
		for (int64_t i = 0; i < numel; i++)
			cr_expect(fabs(got[1][i] - got[0][i]) <= 1e-5 * (1 + fabs(got[0][i])), "case %d, output %lld: %g, not %g",
				  c, (long long)i, got[1][i], got[0][i]);
	}
}

/* g run with t as its one input, x; asserts that it ran. */
static struct exec *run_on_x(struct graph *g, struct rtensor *t)
{
	const char *names[1] = {"x"};
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 1};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	return x;
}

/* Transpose by every permutation of a (3, 40, 1, 37) float32 tensor (tiles of 32, on AVX-512
 * blocks of 16, with remainders; a unit axis to drop, axes that stay adjacent and merge) and of a
 * float64 one, element for element against the index arithmetic of the definition; and of a (5,
 * 40, 3, 3) one, whose short kept runs (a kernel's 3 x 3 window, 36 and 72 bytes) are tiled as the
 * elements of a transpose of lower rank. */
Test(exec, transpose_by_every_permutation)
{
	enum { N = 3 * 40 * 37 };
	static const int64_t shapes[2][4] = {{3, 40, 1, 37}, {5, 40, 3, 3}};
	static float xf[N];
	static double xd[N];
	for (int i = 0; i < N; i++)
		xd[i] = xf[i] = (float)i;
	int perms = 0;
	for (int s = 0; s < 2; s++)
		for (int p0 = 0; p0 < 4; p0++)
			for (int p1 = 0; p1 < 4; p1++)
				for (int p2 = 0; p2 < 4; p2++) {
					int p3 = 6 - p0 - p1 - p2;
					if (p0 == p1 || p0 == p2 || p1 == p2 || p3 < 0 || p3 > 3 || p3 == p0 || p3 == p1 ||
					    p3 == p2)
						continue;
					const int pm[4] = {p0, p1, p2, p3};
					const int64_t *sh = shapes[s];
					int64_t numel = sh[0] * sh[1] * sh[2] * sh[3];
					perms++;
					for (int f = 0; f < 2; f++) {
						char text[512];
						snprintf(text, sizeof text,
							 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, "
							 "%lld, %lld]}]\nnodes:\n  - {op: Transpose, inputs: [x], outputs: [y], attrs: "
							 "{perm: [%d, %d, %d, %d]}}\noutputs: [{name: y}]\n",
							 f ? "float32" : "float64", (long long)sh[0], (long long)sh[1],
							 (long long)sh[2], (long long)sh[3], p0, p1, p2, p3);
						struct graph *g = load_text("transpose.yaml", text);
						struct rtensor t = {.dtype = f ? DT_FLOAT : DT_DOUBLE, .ndim = 4,
								    .dims = {sh[0], sh[1], sh[2], sh[3]}, .numel = numel,
								    .data = f ? (void *)xf : (void *)xd,
								    .nbytes = (size_t)numel * (f ? 4u : 8u), .known = 1};
						struct exec *x = run_on_x(g, &t);
						const struct rtensor *y = exec_value(x, g->outputs[0]);
						int64_t od[4], bad = 0;
						for (int k = 0; k < 4; k++)
							od[k] = sh[pm[k]];
						for (int64_t i = 0; i < numel; i++) {
							int64_t oi[4], rem = i, ii[4], src = 0;
							for (int k = 3; k >= 0; k--) {
								oi[k] = rem % od[k];
								rem /= od[k];
							}
							for (int k = 0; k < 4; k++)
								ii[pm[k]] = oi[k];
							for (int k = 0; k < 4; k++)
								src = src * sh[k] + ii[k];
							double v = f ? ((const float *)y->data)[i] : ((const double *)y->data)[i];
							bad += v != (double)src;
						}
						cr_expect_eq(bad, 0, "shape %d, perm [%d %d %d %d], %s: %lld elements wrong", s, p0,
							     p1, p2, p3, f ? "float32" : "float64", (long long)bad);
						exec_free(x);
						graph_free(g);
					}
				}
	cr_assert_eq(perms, 48);
}

/* Slice of a (4, 5, 6, 7) float32 tensor, element for element against the definition: a kernel's
 * 3 x 3 crop of the last two axes (short rows copied inline), reversed and strided last axes
 * (step -1 and -3), a reversed leading axis, a step past the end, a rank-1 input (planes of one
 * row), over 1 and 3 threads. */
Test(exec, slice_against_the_definition)
{
	enum { N = 4 * 5 * 6 * 7 };
	static const int64_t sh[4] = {4, 5, 6, 7};
	static const struct {
		int rank, n;
		int64_t st[4], en[4], ax[4], sp[4];
	} cases[] = {
		{4, 2, {0, 0}, {3, 3}, {2, 3}, {1, 1}},
		{4, 2, {-1, 5}, {-100, 0}, {3, 2}, {-1, -2}},
		{4, 3, {3, 1, 6}, {0, 4, -100}, {0, 1, 3}, {-2, 1, -3}},
		{4, 1, {1}, {100}, {1}, {100}},
		{1, 1, {2}, {-1}, {0}, {1}},
	};
	static float xf[N];
	for (int i = 0; i < N; i++)
		xf[i] = (float)i;
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int th = 1; th <= 3; th += 2) {
			pool_set_threads(th);
			char text[1024], st[64] = "", en[64] = "", ax[64] = "", sp[64] = "";
			for (int k = 0; k < cases[c].n; k++) {
				const char *sep = k ? ", " : "";
				snprintf(st + strlen(st), sizeof st - strlen(st), "%s%lld", sep, (long long)cases[c].st[k]);
				snprintf(en + strlen(en), sizeof en - strlen(en), "%s%lld", sep, (long long)cases[c].en[k]);
				snprintf(ax + strlen(ax), sizeof ax - strlen(ax), "%s%lld", sep, (long long)cases[c].ax[k]);
				snprintf(sp + strlen(sp), sizeof sp - strlen(sp), "%s%lld", sep, (long long)cases[c].sp[k]);
			}
			int r = cases[c].rank;
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [%s]}]\n"
				 "params:\n  - {name: st, dtype: int64, shape: [%d], data: [%s]}\n"
				 "  - {name: en, dtype: int64, shape: [%d], data: [%s]}\n"
				 "  - {name: ax, dtype: int64, shape: [%d], data: [%s]}\n"
				 "  - {name: sp, dtype: int64, shape: [%d], data: [%s]}\n"
				 "nodes:\n  - {op: Slice, inputs: [x, st, en, ax, sp], outputs: [y]}\noutputs: [{name: y}]\n",
				 r == 4 ? "4, 5, 6, 7" : "840", cases[c].n, st, cases[c].n, en, cases[c].n, ax, cases[c].n, sp);
			struct graph *g = load_text("slice.yaml", text);
			struct rtensor t = {.dtype = DT_FLOAT, .ndim = r, .numel = N, .data = xf, .nbytes = N * 4u, .known = 1};
			int64_t d[4], first[4], step[4];
			for (int k = 0; k < r; k++) {
				t.dims[k] = r == 4 ? sh[k] : N;
				first[k] = 0, step[k] = 1, d[k] = t.dims[k];
			}
			for (int k = 0; k < cases[c].n; k++) { /* the definition: clamped start, count by step */
				int64_t a = cases[c].ax[k], dim = t.dims[a], s = cases[c].sp[k];
				int64_t lo = cases[c].st[k] < 0 ? cases[c].st[k] + dim : cases[c].st[k];
				int64_t hi = cases[c].en[k] < 0 ? cases[c].en[k] + dim : cases[c].en[k];
				lo = s > 0 ? (lo < 0 ? 0 : lo > dim ? dim : lo) : (lo < -1 ? -1 : lo > dim - 1 ? dim - 1 : lo);
				hi = s > 0 ? (hi < 0 ? 0 : hi > dim ? dim : hi) : (hi < -1 ? -1 : hi > dim - 1 ? dim - 1 : hi);
				int64_t n = 0;
				for (int64_t v = lo; s > 0 ? v < hi : v > hi; v += s)
					n++;
				first[a] = lo, step[a] = s, d[a] = n;
			}
			struct exec *x = run_on_x(g, &t);
			const struct rtensor *y = exec_value(x, g->outputs[0]);
			int64_t numel = 1, bad = 0;
			for (int k = 0; k < r; k++) {
				cr_assert_eq(y->dims[k], d[k], "case %zu, axis %d", c, k);
				numel *= d[k];
			}
			cr_assert_eq(y->numel, numel);
			cr_assert_gt(numel, 1, "case %zu takes more than one element", c);
			for (int64_t i = 0; i < numel; i++) {
				int64_t rem = i, src = 0, mul = 1;
				for (int k = r - 1; k >= 0; k--) {
					src += (first[k] + rem % d[k] * step[k]) * mul;
					mul *= t.dims[k];
					rem /= d[k];
				}
				bad += ((const float *)y->data)[i] != (float)src;
			}
			cr_expect_eq(bad, 0, "case %zu, %d threads: %lld elements wrong", c, th, (long long)bad);
			exec_free(x);
			graph_free(g);
		}
	pool_set_threads(1);
}

/* The kernels that cut their work over the pool's threads (elementwise and Where, Dropout's values
 * and mask, transposes and copies, reductions, GlobalAveragePool (also the bits of ReduceMean), the
 * row-wise normalisations) give the same bits with 1 thread as with 3, on tensors large enough to
 * be cut; the products match a float64 product.
 * With 1 thread each kernel runs its whole range in one piece, so this also checks that a piece
 * starting mid-walk finds its place. On an AVX-512 CPU the float32 products run on sgemm.c's
 * kernel, in one piece a thread; what follows is OpenBLAS's (cut_with_kernels). A product cut by rows runs whole in one OpenBLAS call with 1
 * thread (g1: 300 rows, cut at 160 with the AVX-512 float32 kernels, at 192 with Haswell's, whose
 * sums change at a cut off a multiple of 12; mm, whose pieces are of the sizes the "direct" kernel
 * takes with beta 0). One cut by columns (g2, g3) runs whole too with the AVX-512 float32 kernels
 * and as its pieces with Haswell's; in float64 (g2d) as its pieces with both. k = 1000, which
 * OpenBLAS sums in blocks. sm1 and sm2, a little above the small-matrix kernels' reach, run as
 * pieces of rows they take with the AVX-512 kernels, whatever the threads. The t* products are
 * below it (a recurrent layer's), cut in columns with 3 threads and whole with 1: A B (tnn), A B^T
 * (tnt, tntb with a bias) whose pieces stay off the small-matrix kernels as the whole does, A^T B
 * (ttn) and A^T B^T (ttt); tsmall, A B^T whose 16-column pieces those kernels would take and the
 * whole not, must not be cut (it differs when it is). turn, turnb (with a bias) and turnv (B a
 * Transpose's view) are an A B^T that those kernels take as A B with B turned, by each piece (in
 * three pieces of 48, 48 and 32 columns with 3 threads). */

/* Runs text's graph on seeded float32 inputs of its declared shapes with 1 thread and with 3;
 * expects every output the same bits. The inputs stay in ts (freed by the caller). */
#define CUT_INPUTS 17

static struct graph *same_bits_over_threads(const char *text, struct rtensor *ts, struct exec **three)
{
	struct graph *g = load_text("cut.yaml", text);
	const char *names[CUT_INPUTS];
	cr_assert(g->n_inputs <= CUT_INPUTS);
	uint64_t s = 12345;
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		const struct ttype *t = &g->inputs[i]->type;
		names[i] = g->inputs[i]->name;
		memset(&ts[i], 0, sizeof ts[i]);
		ts[i].dtype = DT_FLOAT;
		ts[i].ndim = (int)t->ndim;
		ts[i].numel = 1;
		for (uint32_t d = 0; d < t->ndim; d++)
			ts[i].numel *= ts[i].dims[d] = t->dims[d].value;
		ts[i].nbytes = (size_t)ts[i].numel * 4;
		ts[i].known = 1;
		float *v = malloc(ts[i].nbytes);
		for (int64_t k = 0; k < ts[i].numel; k++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			v[k] = (float)((double)(s >> 11) / 9007199254740992.0 * 4 - 2);
		}
		ts[i].data = v;
	}
	struct exec *x[2];
	for (int k = 0; k < 2; k++) {
		pool_set_threads(k ? 3 : 1);
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = ts, .input_names = names, .n_inputs = g->n_inputs};
		x[k] = exec_run(g, &o, NULL, &e);
		cr_assert(x[k], "%s", e.msg);
	}
	for (uint32_t k = 0; k < g->n_outputs; k++) {
		const struct rtensor *a = exec_value(x[0], g->outputs[k]), *b = exec_value(x[1], g->outputs[k]);
		cr_assert(a && b && a->nbytes == b->nbytes);
		cr_expect(!memcmp(a->data, b->data, a->nbytes), "%s: 1 and 3 threads differ", g->outputs[k]->name);
	}
	exec_free(x[0]);
	*three = x[1];
	return g;
}

static void cut_done(struct graph *g, struct rtensor *ts, struct exec *three)
{
	exec_free(three);
	for (uint32_t i = 0; i < g->n_inputs; i++)
		free(ts[i].data);
	graph_free(g);
}

static void cut_kernels(void)
{
	static const char text[] =
		"graphdiet: 1\nopset: 17\n"
		"inputs: [{name: x, dtype: float32, shape: [48, 40, 64]}, {name: b, dtype: float32, shape: [64]},\n"
		"         {name: w, dtype: float32, shape: [64, 96]}, {name: p, dtype: float32, shape: [1000, 300]},\n"
		"         {name: q, dtype: float32, shape: [200, 1000]}, {name: pt, dtype: float32, shape: [300, 1000]},\n"
		"         {name: ba, dtype: float32, shape: [6, 5, 64, 48]}, {name: bb, dtype: float32, shape: [6, 1, 48, 64]},\n"
		"         {name: sa, dtype: float32, shape: [128, 128]}, {name: sb, dtype: float32, shape: [128, 64]},\n"
		"         {name: ra, dtype: float32, shape: [32, 128]}, {name: rx, dtype: float32, shape: [64, 128]},\n"
		"         {name: na, dtype: float32, shape: [40, 512]}, {name: nb, dtype: float32, shape: [48, 512]},\n"
		"         {name: ta, dtype: float32, shape: [64, 64]}, {name: tb, dtype: float32, shape: [96, 64]},\n"
		"         {name: rb, dtype: float32, shape: [128]}]\n"
		"params: [{name: ratio, dtype: float32, shape: [], data: [0.3]}, {name: train, dtype: bool, shape: [], data: [true]}]\n"
		"nodes:\n"
		"  - {op: MatMul, inputs: [ba, bb], outputs: [bmm]}\n"
		"  - {op: Dropout, inputs: [x, ratio, train], outputs: [dr, dm], attrs: {seed: 5}}\n"
		"  - {op: Add, inputs: [x, b], outputs: [add]}\n"
		"  - {op: Mul, inputs: [x, x], outputs: [mul]}\n"
		"  - {op: Erf, inputs: [x], outputs: [erf]}\n"
		"  - {op: Tanh, inputs: [x], outputs: [tanh]}\n"
		"  - {op: Transpose, inputs: [x], outputs: [t201], attrs: {perm: [2, 0, 1]}}\n"
		"  - {op: Transpose, inputs: [x], outputs: [t102], attrs: {perm: [1, 0, 2]}}\n"
		"  - {op: ReduceSum, inputs: [x], outputs: [s1], attrs: {axes: [1], keepdims: 0}}\n"
		"  - {op: ReduceSum, inputs: [x], outputs: [s2], attrs: {axes: [2], keepdims: 0}}\n"
		"  - {op: ReduceSum, inputs: [x], outputs: [s02], attrs: {axes: [0, 2], keepdims: 0}}\n"
		"  - {op: ReduceL2, inputs: [x], outputs: [l02], attrs: {axes: [0, 2], keepdims: 0}}\n"
		"  - {op: Softmax, inputs: [x], outputs: [sm], attrs: {axis: -1}}\n"
		"  - {op: LayerNormalization, inputs: [x, b, b], outputs: [ln], attrs: {axis: -1}}\n"
		"  - {op: MatMul, inputs: [x, w], outputs: [mm]}\n"
		"  - {op: Gemm, inputs: [p, q], outputs: [g1], attrs: {transA: 1, transB: 1}}\n"
		"  - {op: Gemm, inputs: [q, p], outputs: [g2]}\n"
		"  - {op: Gemm, inputs: [q, pt], outputs: [g3], attrs: {transB: 1}}\n"
		"  - {op: Cast, inputs: [q], outputs: [qd], attrs: {to: 11}}\n"
		"  - {op: Cast, inputs: [p], outputs: [pd], attrs: {to: 11}}\n"
		"  - {op: Gemm, inputs: [qd, pd], outputs: [g2d]}\n"
		"  - {op: Gemm, inputs: [sa, sb], outputs: [sm1]}\n"
		"  - {op: Gemm, inputs: [sa, sb], outputs: [sm2], attrs: {transA: 1}}\n"
		"  - {op: MatMul, inputs: [ra, sa], outputs: [tnn]}\n"
		"  - {op: Gemm, inputs: [rx, sa], outputs: [tnt], attrs: {transB: 1}}\n"
		"  - {op: Gemm, inputs: [rx, sa, rb], outputs: [tntb], attrs: {transB: 1}}\n"
		"  - {op: Gemm, inputs: [ra, ra], outputs: [ttn], attrs: {transA: 1}}\n"
		"  - {op: Gemm, inputs: [na, nb], outputs: [tsmall], attrs: {transB: 1}}\n"
		"  - {op: Gemm, inputs: [ta, tb], outputs: [ttt], attrs: {transA: 1, transB: 1}}\n"
		"  - {op: Gemm, inputs: [ra, sa], outputs: [turn], attrs: {transB: 1}}\n"
		"  - {op: Gemm, inputs: [ra, sa, rb], outputs: [turnb], attrs: {transB: 1}}\n"
		"  - {op: Transpose, inputs: [sa], outputs: [sat]}\n"
		"  - {op: MatMul, inputs: [ra, sat], outputs: [turnv]}\n"
		"  - {op: Greater, inputs: [x, b], outputs: [gt]}\n"
		"  - {op: Where, inputs: [gt, x, b], outputs: [wh]}\n"
		"  - {op: Transpose, inputs: [x], outputs: [tid], attrs: {perm: [0, 1, 2]}}\n"
		"  - {op: GlobalAveragePool, inputs: [x], outputs: [gap]}\n"
		"  - {op: ReduceMean, inputs: [x], outputs: [rm2], attrs: {axes: [2], keepdims: 1}}\n"
		"outputs: [{name: add}, {name: mul}, {name: erf}, {name: tanh}, {name: t201}, {name: t102}, {name: s1},\n"
		"          {name: s2}, {name: s02}, {name: l02}, {name: sm}, {name: ln}, {name: mm}, {name: g1},\n"
		"          {name: g2}, {name: g3}, {name: g2d}, {name: sm1}, {name: sm2}, {name: wh}, {name: tid},\n"
		"          {name: tnn}, {name: tnt}, {name: tntb}, {name: ttn}, {name: tsmall}, {name: ttt},\n"
		"          {name: turn}, {name: turnb}, {name: turnv}, {name: gap}, {name: rm2}, {name: dr}, {name: dm}, {name: bmm}]\n";
	struct rtensor ts[CUT_INPUTS];
	struct exec *three;
	struct graph *g = same_bits_over_threads(text, ts, &three);
	/* the products against float64 ones */
	struct {
		const char *out;
		int a, b, ta, tb;
	} prods[] = {{"mm", 0, 2, 0, 0}, {"g1", 3, 4, 1, 1}, {"g2", 4, 3, 0, 0}, {"g3", 4, 5, 0, 1},
		     {"sm1", 8, 9, 0, 0}, {"sm2", 8, 9, 1, 0}, {"tnn", 10, 8, 0, 0}, {"tnt", 11, 8, 0, 1},
		     {"ttn", 10, 10, 1, 0}, {"tsmall", 12, 13, 0, 1}, {"ttt", 14, 15, 1, 1}, {"turn", 10, 8, 0, 1}};
	for (int c = 0; c < (int)(sizeof prods / sizeof prods[0]); c++) {
		const struct rtensor *A = &ts[prods[c].a], *B = &ts[prods[c].b], *y = NULL;
		for (uint32_t k = 0; k < g->n_outputs; k++)
			if (!strcmp(g->outputs[k]->name, prods[c].out))
				y = exec_value(three, g->outputs[k]);
		int64_t K = B->dims[prods[c].tb ? 1 : 0], N = B->dims[prods[c].tb ? 0 : 1], M = A->numel / K, bad = 0;
		const float *a = A->data, *b = B->data, *o = y->data;
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++) {
				double r = 0;
				for (int64_t l = 0; l < K; l++)
					r += (double)a[prods[c].ta ? l * M + i : i * K + l] * b[prods[c].tb ? j * K + l : l * N + j];
				bad += fabs(o[i * N + j] - r) > 1e-4 * (1 + fabs(r));
			}
		cr_expect_eq(bad, 0, "%s: %lld of %lld elements off the float64 product", prods[c].out, (long long)bad,
			     (long long)(M * N));
	}
	/* B turned by the pieces: the same bits from a Gemm's transB as from a folded Transpose's view */
	const struct rtensor *turn = exec_value(three, g->outputs[g->n_outputs - 8]);
	const struct rtensor *turnv = exec_value(three, g->outputs[g->n_outputs - 6]);
	cr_expect(turn->nbytes == turnv->nbytes && !memcmp(turn->data, turnv->data, turn->nbytes),
		  "A B^T from transB and from a Transpose differ");
	/* GlobalAveragePool is ReduceMean over the spatial axes, bit for bit */
	const struct rtensor *gap = exec_value(three, g->outputs[g->n_outputs - 5]);
	const struct rtensor *rm2 = exec_value(three, g->outputs[g->n_outputs - 4]);
	cr_expect(gap->nbytes == rm2->nbytes && !memcmp(gap->data, rm2->data, gap->nbytes),
		  "GlobalAveragePool and ReduceMean over axis 2 differ");
	/* Dropout keeps about 70% of x, scaled by 1 / (1 - ratio), and zeroes the rest */
	const struct rtensor *dr = exec_value(three, g->outputs[g->n_outputs - 3]);
	const struct rtensor *dm = exec_value(three, g->outputs[g->n_outputs - 2]);
	const float *xv = ts[0].data, *dv = dr->data;
	const uint8_t *mv = dm->data;
	int64_t kept = 0, wrong = 0;
	for (int64_t i = 0; i < dr->numel; i++) {
		kept += mv[i];
		wrong += dv[i] != (mv[i] ? (float)((double)xv[i] * (1 / (1 - (double)0.3f))) : 0.0f);
	}
	cr_expect(kept > 0.68 * dr->numel && kept < 0.72 * dr->numel, "Dropout kept %lld of %lld", (long long)kept,
		  (long long)dr->numel);
	cr_expect_eq(wrong, 0, "%lld Dropout outputs are not x / 0.7 or 0 as the mask says", (long long)wrong);
	/* the batched one: (6, 5) batches of 64x48 times (6, 1) of 48x64, broadcast over the 5 */
	const struct rtensor *bmm = exec_value(three, g->outputs[g->n_outputs - 1]);
	const float *ba = ts[6].data, *bb = ts[7].data, *bo = bmm->data;
	int64_t bad = 0;
	for (int64_t i = 0; i < 6; i++)
		for (int64_t h = 0; h < 5; h++)
			for (int64_t r = 0; r < 64; r++)
				for (int64_t c = 0; c < 64; c++) {
					double v = 0;
					for (int64_t l = 0; l < 48; l++)
						v += (double)ba[((i * 5 + h) * 64 + r) * 48 + l] * bb[(i * 48 + l) * 64 + c];
					bad += fabs(bo[((i * 5 + h) * 64 + r) * 64 + c] - v) > 1e-4 * (1 + fabs(v));
				}
	cr_expect_eq(bad, 0, "bmm: %lld elements off the float64 product", (long long)bad);
	cut_done(g, ts, three);
}

/* The same for the image kernels: each Conv path (im2col below 16 channels, the shifted GEMMs at
 * 16 and more, few positions as in a weight's gradient, with and without unit stride), both
 * ConvTranspose paths, MaxPool and BatchNormalization in training. */
static void cut_images(void)
{
	static const char text[] =
		"graphdiet: 1\nopset: 17\n"
		"inputs: [{name: x, dtype: float32, shape: [8, 32, 20, 20]}, {name: x3, dtype: float32, shape: [8, 3, 20, 20]},\n"
		"         {name: w, dtype: float32, shape: [24, 32, 3, 3]}, {name: w3, dtype: float32, shape: [24, 3, 3, 3]},\n"
		"         {name: k, dtype: float32, shape: [16, 8, 19, 19]}, {name: s, dtype: float32, shape: [32]},\n"
		"         {name: t, dtype: float32, shape: [8, 32, 5, 5]}, {name: wt, dtype: float32, shape: [32, 24, 3, 3]}]\n"
		"nodes:\n"
		"  - {op: Conv, inputs: [x, w], outputs: [shifted], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Conv, inputs: [x3, w3], outputs: [im2col], attrs: {pads: [1, 1, 1, 1], strides: [2, 2]}}\n"
		"  - {op: Transpose, inputs: [x], outputs: [xt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [xt, k], outputs: [few], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Conv, inputs: [xt, k], outputs: [few2]}\n"
		"  - {op: ConvTranspose, inputs: [x, wt], outputs: [ct], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: ConvTranspose, inputs: [t, wt], outputs: [cts], attrs: {pads: [1, 1, 1, 1], strides: [2, 2]}}\n"
		"  - {op: MaxPool, inputs: [x], outputs: [mp, mi], attrs: {kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [2, 2]}}\n"
		"  - {op: BatchNormalization, inputs: [x, s, s, s, s], outputs: [bn, rm, rv], attrs: {training_mode: 1}}\n"
		"outputs: [{name: shifted}, {name: im2col}, {name: few}, {name: few2}, {name: ct}, {name: cts}, {name: mp},\n"
		"          {name: mi}, {name: bn}, {name: rm}, {name: rv}]\n";
	struct rtensor ts[CUT_INPUTS];
	struct exec *three;
	struct graph *g = same_bits_over_threads(text, ts, &three);
	cut_done(g, ts, three);
}

Test(exec, kernels_cut_over_threads_give_the_same_bits) { cut_kernels(); }
Test(exec, image_kernels_cut_over_threads_give_the_same_bits) { cut_images(); }

/* Float32 products run on sgemm.c's kernel where it measures faster than OpenBLAS's on an AVX-512
 * CPU (the tests above; exec/cuts_give_the_same_bits_with_graphdiets_sgemm forces it), on
 * OpenBLAS elsewhere or with GRAPHDIET_SGEMM=openblas. OpenBLAS picks its kernels by the CPU when
 * this process first opens it: SkylakeX's or Cooperlake's on AVX-512 CPUs, Haswell's on AVX2 ones,
 * each summing differently at a call's edges (ops/blas.c). The same cuts with each set forced
 * where the CPU can run it, float32 products on OpenBLAS too. */
static void cut_with_kernels(const char *core, int runs)
{
	if (!runs)
		cr_skip_test("this CPU cannot run OpenBLAS's %s kernels", core);
	setenv("OPENBLAS_CORETYPE", core, 1);
	setenv("GRAPHDIET_SGEMM", "openblas", 1);
	cut_kernels();
	cut_images();
}

#if defined(__x86_64__)
#define CPU_HAS(f) __builtin_cpu_supports(f)
#else
#define CPU_HAS(f) 0
#endif

Test(exec, cuts_give_the_same_bits_with_haswell_kernels)
{
	cut_with_kernels("Haswell", CPU_HAS("avx2") && CPU_HAS("fma"));
}

Test(exec, cuts_give_the_same_bits_with_skylakex_kernels)
{
	cut_with_kernels("SkylakeX", CPU_HAS("avx512f") && CPU_HAS("avx512bw") && CPU_HAS("avx512dq") && CPU_HAS("avx512vl"));
}

/* A weight gradient's Conv (of X^T with dY^T, as autodiff writes it) whose one reader is the
 * Transpose that turns it back is written with its first two axes exchanged, as the GEMM gives it
 * (256 or more output channels) or transposed once (fewer); the Transpose then copies it in order.
 * Results match the run that copies transposes (no exchange) and the same graph in float64, and
 * the peak is the same byte for byte. A Conv with a second reader, one with a bias and a dilated
 * one (a strided Conv's, cropped by a Slice) are among them. */
Test(exec, weight_gradients_written_swapped_match)
{
	static const char text[] =
		"graphdiet: 1\nopset: 17\n"
		"inputs: [{name: x, dtype: %1$s, shape: [4, 6, 5, 5]}, {name: ga, dtype: %1$s, shape: [4, 256, 5, 5]},\n"
		"         {name: gb, dtype: %1$s, shape: [4, 8, 5, 5]}, {name: gd, dtype: %1$s, shape: [4, 8, 3, 3]},\n"
		"         {name: bias, dtype: %1$s, shape: [8]}]\n"
		"params: [{name: st, dtype: int64, shape: [2], data: [0, 0]}, {name: en, dtype: int64, shape: [2], data: [2, 2]},\n"
		"         {name: ax, dtype: int64, shape: [2], data: [2, 3]}]\n"
		"nodes:\n"
		"  - {op: Transpose, inputs: [x], outputs: [xt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Transpose, inputs: [ga], outputs: [gat], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [xt, gat], outputs: [ca], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Transpose, inputs: [ca], outputs: [dwa], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Transpose, inputs: [gb], outputs: [gbt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [xt, gbt], outputs: [cb], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Transpose, inputs: [cb], outputs: [dwb], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [xt, gbt], outputs: [cr], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Transpose, inputs: [cr], outputs: [dwr], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Relu, inputs: [cr], outputs: [rr]}\n"
		"  - {op: Conv, inputs: [xt, gbt, bias], outputs: [cc], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Transpose, inputs: [cc], outputs: [dwc], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Transpose, inputs: [gd], outputs: [gdt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [xt, gdt], outputs: [cd], attrs: {pads: [1, 1, 1, 1], dilations: [2, 2]}}\n"
		"  - {op: Transpose, inputs: [cd], outputs: [dwd0], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Slice, inputs: [dwd0, st, en, ax], outputs: [dwd]}\n"
		"outputs: [{name: dwa}, {name: dwb}, {name: dwr}, {name: rr}, {name: dwc}, {name: dwd}]\n";
	char t32[4096], t64[4096];
	snprintf(t32, sizeof t32, text, "float32");
	snprintf(t64, sizeof t64, text, "float64");
	struct graph *g[2] = {load_text("wgrad.yaml", t32), load_text("wgrad64.yaml", t64)};
	struct exec *x[3];
	struct exec_stats st[2];
	for (int k = 0; k < 3; k++) { /* swapped, copied transposes (no exchange), float64 */
		struct gd_err e = {0};
		struct exec_opts o = {.random_inputs = 1, .seed = 5, .copy_transposes = k == 1};
		if (k < 2)
			memset(&st[k], 0, sizeof st[k]);
		x[k] = exec_run(g[k == 2], &o, k < 2 ? &st[k] : NULL, &e);
		cr_assert(x[k], "%s", e.msg);
	}
	cr_expect_eq(st[0].peak_bytes, st[1].peak_bytes, "swapped: peak %zu; copied: %zu", st[0].peak_bytes,
		     st[1].peak_bytes);
	for (uint32_t k = 0; k < g[0]->n_outputs; k++) {
		const struct rtensor *a = exec_value(x[0], g[0]->outputs[k]), *b = exec_value(x[1], g[0]->outputs[k]);
		const struct rtensor *d = exec_value(x[2], g[1]->outputs[k]);
		cr_assert(a && b && d && a->numel == b->numel && a->numel == d->numel && a->numel > 0);
		int64_t bad = 0, far = 0;
		for (int64_t i = 0; i < a->numel; i++) {
			double u = ((const float *)a->data)[i], v = ((const float *)b->data)[i], w = ((const double *)d->data)[i];
			bad += !(fabs(u - v) <= 1e-5 * (1 + fabs(v)));
			far += !(fabs(u - w) <= 1e-4 * (1 + fabs(w)));
		}
		cr_expect_eq(bad, 0, "%s: %lld elements differ from the copied run's", g[0]->outputs[k]->name, (long long)bad);
		cr_expect_eq(far, 0, "%s: %lld elements differ from float64's", g[0]->outputs[k]->name, (long long)far);
	}
	for (int k = 0; k < 3; k++)
		exec_free(x[k]);
	graph_free(g[0]);
	graph_free(g[1]);
}

/* Runs g twice, under o[0] and o[1]. */
static void run_both(struct graph *g, const struct exec_opts *o, struct exec **x, struct exec_stats *st)
{
	for (int k = 0; k < 2; k++) {
		struct gd_err e = {0};
		memset(&st[k], 0, sizeof st[k]);
		x[k] = exec_run(g, &o[k], &st[k], &e);
		cr_assert(x[k], "%s", e.msg);
	}
}

/* Runs text's float32 graph on seeded random inputs with its Transposes folded and copied: the
 * same peak, and every output the same within tol relative (0: the same bits). */
static void folded_like_copied(const char *file, const char *text, double tol)
{
	struct graph *g = load_text(file, text);
	struct exec *x[2];
	struct exec_stats st[2];
	run_both(g, (struct exec_opts[2]){{.random_inputs = 1, .seed = 3}, {.random_inputs = 1, .seed = 3, .copy_transposes = 1}},
		 x, st);
	cr_expect_eq(st[0].peak_bytes, st[1].peak_bytes, "folded: peak %zu; copied: %zu", st[0].peak_bytes,
		     st[1].peak_bytes);
	for (uint32_t k = 0; k < g->n_outputs; k++) {
		const struct rtensor *a = exec_value(x[0], g->outputs[k]), *b = exec_value(x[1], g->outputs[k]);
		cr_assert(a && b && a->numel == b->numel && !a->view);
		int64_t bad = 0;
		for (int64_t i = 0; i < a->numel; i++) {
			float u = ((const float *)a->data)[i], v = ((const float *)b->data)[i];
			bad += tol ? !(fabs((double)u - v) <= tol * (1 + fabs((double)v))) : memcmp(&u, &v, 4) != 0;
		}
		cr_expect_eq(bad, 0, "%s: %lld elements differ", g->outputs[k]->name, (long long)bad);
	}
	exec_free(x[0]);
	exec_free(x[1]);
	graph_free(g);
}

/* Transposes read by MatMul and Gemm are folded into them as views (exec.c): the results match
 * those of transposed copies, and the peak is the same, byte for byte (a view's bytes are counted
 * as the copy's would be). The graph has a weight's transpose (Gemm and a Linear MatMul), a batched
 * one read by a MatMul, a Relu and a Concat of ten inputs (each given a copy), an attention-like
 * head split, the transpose of a view (a view of the same bytes), an input whose buffer a Reshape
 * takes over while its view lives (the view takes a copy) and one freed while its view lives (the
 * view takes its bytes over); g1 takes s2's bytes over, g2 is a view of g1's, then takes them
 * over too, and a Relu reads a copy of it. */
Test(exec, folded_transposes_match_copies_and_count_the_same)
{
	static const char text[] =
		"graphdiet: 1\nopset: 17\n"
		"inputs: [{name: x, dtype: float32, shape: [6, 40, 48]}, {name: w, dtype: float32, shape: [32, 48]},\n"
		"         {name: s, dtype: float32, shape: [6, 40, 2, 24]}, {name: m, dtype: float32, shape: [40, 48]}]\n"
		"params: [{name: sh, dtype: int64, shape: [2], data: [240, 48]}]\n"
		"nodes:\n"
		"  - {op: Transpose, inputs: [w], outputs: [wt], attrs: {perm: [1, 0]}}\n"
		"  - {op: MatMul, inputs: [x, wt], outputs: [y1]}\n"
		"  - {op: Gemm, inputs: [m, wt], outputs: [y0]}\n"
		"  - {op: Transpose, inputs: [x], outputs: [xt], attrs: {perm: [0, 2, 1]}}\n"
		"  - {op: MatMul, inputs: [xt, x], outputs: [y2]}\n"
		"  - {op: Relu, inputs: [xt], outputs: [r]}\n"
		"  - {op: Concat, inputs: [xt, xt, xt, xt, xt, xt, xt, xt, xt, xt], outputs: [cat], attrs: {axis: 0}}\n"
		"  - {op: Transpose, inputs: [s], outputs: [h], attrs: {perm: [0, 2, 1, 3]}}\n"
		"  - {op: Transpose, inputs: [h], outputs: [ht], attrs: {perm: [0, 1, 3, 2]}}\n"
		"  - {op: MatMul, inputs: [h, ht], outputs: [y3]}\n"
		"  - {op: Add, inputs: [x, x], outputs: [a]}\n"
		"  - {op: Transpose, inputs: [a], outputs: [at], attrs: {perm: [0, 2, 1]}}\n"
		"  - {op: Reshape, inputs: [a, sh], outputs: [ar]}\n"
		"  - {op: Exp, inputs: [ar], outputs: [e]}\n"
		"  - {op: MatMul, inputs: [at, x], outputs: [y4]}\n"
		"  - {op: Mul, inputs: [x, x], outputs: [b]}\n"
		"  - {op: Transpose, inputs: [b], outputs: [bt], attrs: {perm: [0, 2, 1]}}\n"
		"  - {op: Sigmoid, inputs: [x], outputs: [later]}\n"
		"  - {op: MatMul, inputs: [bt, later], outputs: [y5]}\n"
		"  - {op: Mul, inputs: [s, s], outputs: [s2]}\n"
		"  - {op: Transpose, inputs: [s2], outputs: [g1], attrs: {perm: [0, 2, 1, 3]}}\n"
		"  - {op: Transpose, inputs: [g1], outputs: [g2], attrs: {perm: [0, 1, 3, 2]}}\n"
		"  - {op: MatMul, inputs: [g1, g2], outputs: [y6]}\n"
		"  - {op: Relu, inputs: [g2], outputs: [r2]}\n"
		"  - {op: MatMul, inputs: [g2, h], outputs: [y7]}\n"
		"outputs: [{name: y0}, {name: y1}, {name: y2}, {name: r}, {name: cat}, {name: y3}, {name: e}, {name: y4},\n"
		"          {name: y5}, {name: y6}, {name: r2}, {name: y7}]\n";
	folded_like_copied("fold.yaml", text, 1e-5);
}

/* Conv reads folded Transposes too: a weight gradient's Conv of X^T with dY^T reads both views in
 * place on the direct kernel (AVX-512); one with 4 output channels (no direct kernel) and one of
 * a view that exchanges other axes read copies, as does a Relu. Every output has the bits of the
 * run with the Transposes copied, and the peak is the same. */
Test(exec, convs_read_folded_transposes_with_the_bits_of_copies)
{
	static const char text[] =
		"graphdiet: 1\nopset: 17\n"
		"inputs: [{name: x, dtype: float32, shape: [8, 24, 10, 10]}, {name: dy, dtype: float32, shape: [8, 32, 10, 10]},\n"
		"         {name: d2, dtype: float32, shape: [8, 4, 10, 10]}, {name: w3, dtype: float32, shape: [16, 24, 3, 3]}]\n"
		"nodes:\n"
		"  - {op: Transpose, inputs: [x], outputs: [xt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Transpose, inputs: [dy], outputs: [dyt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [xt, dyt], outputs: [gw], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Transpose, inputs: [gw], outputs: [gwt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Transpose, inputs: [d2], outputs: [d2t], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [xt, d2t], outputs: [gw2], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Transpose, inputs: [x], outputs: [xs], attrs: {perm: [0, 1, 3, 2]}}\n"
		"  - {op: Conv, inputs: [xs, w3], outputs: [y3], attrs: {pads: [1, 1, 1, 1]}}\n"
		"  - {op: Relu, inputs: [xt], outputs: [r]}\n"
		"outputs: [{name: gwt}, {name: gw2}, {name: y3}, {name: r}]\n";
	folded_like_copied("convfold.yaml", text, 0);
}

/* Elementwise chains (exec.c) give the bits and the peak of the nodes run one by one: a chain
 * stops at an operand broadcast along axes that are not neighbours (z) and where the shape grows
 * (w4); what a later node or the caller reads is written (a3, a4, a2, a16), the rest never is;
 * operands broadcast as a bias (b), per row (r), per middle axis (c), a scalar (s), the same
 * value twice (a5), scalar Constants between the steps (k1 of shape [1, 1], k2 a value_float),
 * which do not end the chain, an output nobody reads (dead). Slices of 128 and pieces over the
 * threads cut the broadcast operands' runs anywhere: a slice inside one run of r or c reads its
 * one element, one across two has them copied out. */
Test(exec, fused_chains_give_the_bits_and_the_peak_of_single_nodes)
{
	static const char text[] =
		"graphdiet: 1\nopset: 17\n"
		"inputs: [{name: x, dtype: float32, shape: [8, 30, 280]}, {name: b, dtype: float32, shape: [280]},\n"
		"         {name: r, dtype: float32, shape: [8, 30, 1]}, {name: c, dtype: float32, shape: [30, 1]},\n"
		"         {name: z, dtype: float32, shape: [8, 1, 280]}, {name: w4, dtype: float32, shape: [3, 8, 30, 280]}]\n"
		"params: [{name: s, dtype: float32, shape: [1], data: [0.7]}, {name: ax, dtype: int64, shape: [1], data: [1]}]\n"
		"nodes:\n"
		"  - {op: Add, inputs: [x, b], outputs: [a1]}\n"
		"  - {op: Mul, inputs: [a1, s], outputs: [a2]}\n"
		"  - {op: Erf, inputs: [a2], outputs: [a3]}\n"
		"  - {op: Mul, inputs: [a3, r], outputs: [a4]}\n"
		"  - {op: Constant, outputs: [k1], attrs: {value: {type: tensor, value: {dtype: float32, shape: [1, 1], data: [1.5]}}}}\n"
		"  - {op: Sub, inputs: [a4, c], outputs: [a5]}\n"
		"  - {op: Constant, outputs: [k2], attrs: {value_float: {type: float, value: -0.25}}}\n"
		"  - {op: Mul, inputs: [a5, k1], outputs: [a5k]}\n"
		"  - {op: Add, inputs: [k2, a5k], outputs: [a5m]}\n"
		"  - {op: Mul, inputs: [a5m, a5], outputs: [a6]}\n"
		"  - {op: Tanh, inputs: [a6], outputs: [a7]}\n"
		"  - {op: Mul, inputs: [a7, z], outputs: [a8]}\n"
		"  - {op: Sigmoid, inputs: [a8], outputs: [a9]}\n"
		"  - {op: Div, inputs: [a9, a4], outputs: [a10]}\n"
		"  - {op: Neg, inputs: [a10], outputs: [a11]}\n"
		"  - {op: Abs, inputs: [a11], outputs: [a12]}\n"
		"  - {op: Sqrt, inputs: [a12], outputs: [a13]}\n"
		"  - {op: Log, inputs: [a13], outputs: [a14]}\n"
		"  - {op: Relu, inputs: [a14], outputs: [a15]}\n"
		"  - {op: Add, inputs: [a15, w4], outputs: [a16]}\n"
		"  - {op: Mul, inputs: [a16, a16], outputs: [a17]}\n"
		"  - {op: ReduceSum, inputs: [a17, ax], outputs: [rs]}\n"
		"  - {op: Exp, inputs: [a2], outputs: [e2]}\n"
		"  - {op: Mul, inputs: [e2, x], outputs: [a20]}\n"
		"  - {op: Relu, inputs: [a20], outputs: [dead]}\n"
		"outputs: [{name: a3}, {name: a8}, {name: a10}, {name: a16}, {name: rs}, {name: a20}]\n";
	struct graph *g = load_text("chains.yaml", text);
	struct exec *x[2];
	struct exec_stats st[2];
	run_both(g, (struct exec_opts[2]){{.random_inputs = 1, .seed = 11}, {.random_inputs = 1, .seed = 11, .no_chains = 1}}, x,
		 st);
	/* chains: a1-a7 (9 steps, 2 Constants among them), a9-a15, a16-a17, e2-dead */
	cr_expect_eq(st[0].chain_nodes, 21, "%llu nodes in chains", (unsigned long long)st[0].chain_nodes);
	cr_expect_eq(st[1].chain_nodes, 0);
	cr_expect_eq(st[0].peak_bytes, st[1].peak_bytes, "fused: peak %zu; single: %zu", st[0].peak_bytes,
		     st[1].peak_bytes);
	cr_expect_eq(st[0].final_bytes, st[1].final_bytes);
	for (uint32_t k = 0; k < g->n_outputs; k++) {
		const struct rtensor *a = exec_value(x[0], g->outputs[k]), *b = exec_value(x[1], g->outputs[k]);
		cr_assert(a && b && a->data && b->data && a->nbytes == b->nbytes);
		cr_expect(!memcmp(a->data, b->data, a->nbytes), "%s differs", g->outputs[k]->name);
	}
	exec_free(x[0]);
	exec_free(x[1]);
	graph_free(g);
}

/* SoftmaxCrossEntropyLoss without its log-probabilities output makes them a block of rows at a
 * time (4 MiB: 34 rows of 30000 classes here, so three blocks, the last one short) and keeps each
 * row's label's (a language model's logits took a temporary of their size that no plan counts,
 * 196 MiB for GPT-2's, wherever the loss runs without that output: the forward model verify runs).
 * The loss has the bits of the same node asked for its log-probabilities, which makes them whole,
 * and is a float64 log-sum-exp's within float32 rounding; labels ignored and weighted. */
Test(exec, cross_entropy_loss_in_blocks_of_rows)
{
	enum { N = 100, C = 30000 };
	static const char *const outs[] = {"outputs: [{name: loss}]\n", "outputs: [{name: loss}, {name: lp}]\n"};
	float *s = malloc(sizeof *s * N * C), *w = malloc(sizeof *w * C);
	int64_t t[N];
	cr_assert(s && w);
	for (int64_t i = 0; i < (int64_t)N * C; i++)
		s[i] = (float)(philox_normal(7, (uint64_t)i) * 3);
	for (int j = 0; j < C; j++)
		w[j] = 0.5f + (float)(j % 7) / 4;
	for (int i = 0; i < N; i++)
		t[i] = i % 10 == 3 ? 5 : (int64_t)(philox_uniform(8, (uint64_t)i) * C) % C;
	int64_t sd[2] = {N, C}, td[1] = {N}, wd[1] = {C};
	struct rtensor ins[3] = {rt_over(DT_FLOAT, 2, sd, s), rt_over(DT_INT64, 1, td, t), rt_over(DT_FLOAT, 1, wd, w)};
	const char *names[3] = {"s", "t", "w"};
	double loss[2];
	for (int k = 0; k < 2; k++) {
		char text[1024];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: s, dtype: float32, shape: [%d, %d]}, "
			 "{name: t, dtype: int64, shape: [%d]}, {name: w, dtype: float32, shape: [%d]}]\n"
			 "nodes:\n  - {op: SoftmaxCrossEntropyLoss, inputs: [s, t, w], outputs: [loss%s], "
			 "attrs: {ignore_index: 5}}\n%s", N, C, N, C, k ? ", lp" : "", outs[k]);
		struct graph *g = load_text(k ? "ce_lp.yaml" : "ce.yaml", text);
		struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = 3};
		struct gd_err e = {0};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s", e.msg);
		loss[k] = rt_get(exec_value(x, strmap_get(&g->names, "loss")), 0);
		exec_free(x);
		graph_free(g);
	}
	cr_expect_eq(memcmp(&loss[0], &loss[1], sizeof loss[0]), 0, "%.9g in blocks, %.9g whole", loss[0], loss[1]);
	double total = 0, wsum = 0;
	for (int i = 0; i < N; i++) {
		if (t[i] == 5)
			continue;
		const float *r = s + (int64_t)i * C;
		double m = -INFINITY, z = 0;
		for (int j = 0; j < C; j++)
			m = fmax(m, r[j]);
		for (int j = 0; j < C; j++)
			z += exp(r[j] - m);
		total += -w[t[i]] * (r[t[i]] - m - log(z));
		wsum += w[t[i]];
	}
	cr_expect(fabs(loss[0] - total / wsum) <= 1e-5 * fabs(total / wsum), "%.9g, float64 %.9g", loss[0], total / wsum);
	free(s);
	free(w);
}

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

/* #52 gemmpick: where the run-time pick (ops/blas.c) puts float32 products on OpenBLAS (this
 * project's Zen 4), the cuts above run there; the same cuts on sgemm.c's kernel, forced. */
Test(exec, cuts_give_the_same_bits_with_graphdiets_sgemm)
{
	if (!sgemm_usable())
		cr_skip_test("this CPU has no AVX-512F: products run on OpenBLAS");
	setenv("GRAPHDIET_SGEMM", "graphdiet", 1);
	cut_kernels();
	cut_images();
}

/* #52 dwconv: grouped Conv and ConvTranspose with few channels a group (conv_group.c's direct
 * kernels), float32 and float64, against the definition summed in double here, with bias; the
 * same bits with 1 thread and 3. Depthwise (group == C) and group == C/2 with two channels a group
 * and M/group 2; strides 1 and 2, dilation 2, 3 x 3 and 5 x 5, symmetric and uneven pads, odd
 * sizes, rows longer than four vectors, batch 1 and 3; ConvTransposes at the shapes a grouped
 * Conv's input gradient takes (output_padding included); planes large enough that a batch is cut
 * into blocks of images; and Convs whose kernel is at least their output, the shape
 * grouped_weight_grad (conv.c) gives a weight gradient. */
struct group_case { /* op: output_padding 0, 1 (both axes) or 2 (the width's) */
	int transpose, n, c, h, w, m, group, kh, kw, s, d, pt, pl, pb, pr, op;
};

/* Output (n, m, oy, ox) of the case, and in *mag the sum of its terms' magnitudes. */
static double group_definition(const struct group_case *k, const double *x, const double *w, const double *b, int n,
			       int m, int oy, int ox, double *mag)
{
	int cg = k->c / k->group, mg = k->m / k->group, gi = m / mg;
	double sum = b[m];
	*mag = fabs(b[m]);
	for (int ci = 0; ci < cg; ci++)
		for (int i = 0; i < k->kh; i++)
			for (int j = 0; j < k->kw; j++) {
				int iy, ix;
				double wv;
				if (k->transpose) { /* input (iy, ix) adds into iy s - pt + i d */
					int ty = oy + k->pt - i * k->d, tx = ox + k->pl - j * k->d;
					if (ty < 0 || tx < 0 || ty % k->s || tx % k->s)
						continue;
					iy = ty / k->s, ix = tx / k->s;
					wv = w[(((gi * cg + ci) * mg + m % mg) * k->kh + i) * k->kw + j];
				} else {
					iy = oy * k->s + i * k->d - k->pt, ix = ox * k->s + j * k->d - k->pl;
					wv = w[((m * cg + ci) * k->kh + i) * k->kw + j];
				}
				if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w)
					continue;
				double t = x[((n * k->c + gi * cg + ci) * k->h + iy) * k->w + ix] * wv;
				sum += t;
				*mag += fabs(t);
			}
	return sum;
}

static void group_case_run(const struct group_case *k, int dt)
{
	int cg = k->c / k->group, wr = k->transpose ? k->c : k->m, wc = k->transpose ? k->m / k->group : cg;
	int oh = k->transpose ? k->s * (k->h - 1) + (k->op == 1) + k->d * (k->kh - 1) + 1 - k->pt - k->pb
			      : (k->h + k->pt + k->pb - k->d * (k->kh - 1) - 1) / k->s + 1;
	int ow = k->transpose ? k->s * (k->w - 1) + (k->op != 0) + k->d * (k->kw - 1) + 1 - k->pl - k->pr
			      : (k->w + k->pl + k->pr - k->d * (k->kw - 1) - 1) / k->s + 1;
	int64_t nx = (int64_t)k->n * k->c * k->h * k->w, nw = (int64_t)wr * wc * k->kh * k->kw;
	size_t es = dt == DT_FLOAT ? 4 : 8;
	double *xd = malloc((size_t)nx * 8), *wd = malloc((size_t)nw * 8), bd[64];
	void *xv = malloc((size_t)nx * es), *wv = malloc((size_t)nw * es), *bv = malloc(64 * es);
	for (int64_t i = 0; i < nx + nw + 64; i++) { /* float32's values, so both dtypes' definitions agree */
		double v = (double)(float)sin(0.7 * (double)i + 0.3);
		double *d = i < nx ? xd + i : i < nx + nw ? wd + i - nx : bd + i - nx - nw;
		void *e = i < nx ? xv : i < nx + nw ? wv : bv;
		int64_t at = i < nx ? i : i < nx + nw ? i - nx : i - nx - nw;
		*d = v;
		if (dt == DT_FLOAT)
			((float *)e)[at] = (float)v;
		else
			((double *)e)[at] = v;
	}
	const char *ds = dt == DT_FLOAT ? "float32" : "float64";
	char text[1024];
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%d, %d, %d, %d]}, {name: w, dtype: %s, "
		 "shape: [%d, %d, %d, %d]}, {name: b, dtype: %s, shape: [%d]}]\n"
		 "nodes:\n  - {op: %s, inputs: [x, w, b], outputs: [y], attrs: {group: %d, pads: [%d, %d, %d, %d], "
		 "strides: [%d, %d], dilations: [%d, %d]%s}}\noutputs: [{name: y}]\n",
		 ds, k->n, k->c, k->h, k->w, ds, wr, wc, k->kh, k->kw, ds, k->m, k->transpose ? "ConvTranspose" : "Conv",
		 k->group, k->pt, k->pl, k->pb, k->pr, k->s, k->s, k->d, k->d,
		 k->op ? (k->op == 1 ? ", output_padding: [1, 1]" : ", output_padding: [0, 1]") : "");
	struct graph *g = load_text("group.yaml", text);
	struct rtensor t[3] = {
		{.dtype = dt, .ndim = 4, .dims = {k->n, k->c, k->h, k->w}, .numel = nx, .data = xv, .nbytes = (size_t)nx * es, .known = 1},
		{.dtype = dt, .ndim = 4, .dims = {wr, wc, k->kh, k->kw}, .numel = nw, .data = wv, .nbytes = (size_t)nw * es, .known = 1},
		{.dtype = dt, .ndim = 1, .dims = {k->m}, .numel = k->m, .data = bv, .nbytes = (size_t)k->m * es, .known = 1}};
	const char *names[3] = {"x", "w", "b"};
	void *first = NULL;
	for (int th = 1; th <= 3; th += 2) {
		pool_set_threads(th);
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 3};
		struct exec *ex = exec_run(g, &o, NULL, &e);
		cr_assert(ex, "%s", e.msg);
		const struct rtensor *y = exec_value(ex, g->outputs[0]);
		cr_assert_eq(y->numel, (int64_t)k->n * k->m * oh * ow, "%s", text);
		if (!first) {
			int64_t bad = 0;
			double worst = 0, tol = dt == DT_FLOAT ? 1e-6 : 1e-12;
			for (int64_t i = 0; i < y->numel; i++) {
				int ox = (int)(i % ow), oy = (int)(i / ow % oh), m = (int)(i / ow / oh % k->m);
				double mag, want = group_definition(k, xd, wd, bd, (int)(i / ow / oh / k->m), m, oy, ox, &mag);
				double got = dt == DT_FLOAT ? ((const float *)y->data)[i] : ((const double *)y->data)[i];
				double err = fabs(got - want) / (1 + mag);
				worst = err > worst ? err : worst;
				bad += !(err <= tol);
			}
			cr_expect_eq(bad, 0, "%s%s: %lld outputs off the definition (worst %g)", ds, text, (long long)bad, worst);
			first = malloc(y->nbytes);
			memcpy(first, y->data, y->nbytes);
		} else {
			cr_expect_eq(memcmp(first, y->data, y->nbytes), 0, "%s%s: other bits with 3 threads", ds, text);
		}
		exec_free(ex);
	}
	pool_set_threads(1);
	free(first);
	graph_free(g);
	free(xd), free(wd), free(xv), free(wv), free(bv);
}

Test(exec, grouped_convs_against_the_definition)
{
	static const struct group_case cases[] = {
		/* Conv: depthwise 3 x 3 stride 1 and 2, a multiplier of 2, 5 x 5, dilation 2 */
		{0, 3, 6, 9, 11, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 0},   {0, 3, 6, 13, 9, 12, 6, 3, 3, 2, 1, 1, 1, 1, 1, 0},
		{0, 1, 5, 12, 12, 5, 5, 5, 5, 2, 1, 2, 2, 2, 2, 0},  {0, 3, 4, 11, 10, 4, 4, 3, 3, 1, 2, 2, 2, 2, 2, 0},
		{0, 1, 3, 7, 70, 3, 3, 3, 3, 1, 1, 1, 0, 0, 1, 0},   {0, 3, 3, 6, 33, 3, 3, 5, 5, 2, 2, 4, 3, 4, 2, 0},
		/* group == C/2: two channels a group, M/group 2 */
		{0, 3, 8, 9, 7, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 0},    {0, 1, 8, 10, 9, 8, 4, 3, 3, 2, 1, 0, 1, 1, 0, 0},
		/* ConvTranspose: a depthwise Conv's input gradient at stride 1 and 2 (output_padding 1:
		 * an even map), of a multiplier 2, of two channels a group, dilation 2, uneven pads */
		{1, 3, 6, 9, 11, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 0},   {1, 3, 6, 5, 7, 6, 6, 3, 3, 2, 1, 1, 1, 1, 1, 1},
		{1, 1, 12, 6, 6, 6, 6, 3, 3, 2, 1, 1, 1, 1, 1, 1},   {1, 3, 8, 5, 6, 8, 4, 3, 3, 2, 1, 1, 1, 1, 1, 0},
		{1, 3, 4, 7, 9, 4, 4, 3, 3, 1, 2, 2, 2, 2, 2, 0},    {1, 1, 5, 6, 6, 5, 5, 5, 5, 2, 1, 2, 2, 2, 2, 2},
		{1, 3, 3, 4, 40, 3, 3, 3, 3, 2, 1, 0, 1, 1, 0, 0},
		/* planes too large for a whole batch a work item: blocks of 2 images and 1 */
		{0, 3, 2, 110, 110, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 0}, {1, 3, 2, 110, 108, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 0},
		/* weight gradients' Convs: the batch as channels (3 and 2 a group), dY's planes as the
		 * kernel; a stride-2 Conv's (stride 1 and dilation 2 here), a dilated one's */
		{0, 1, 18, 11, 11, 6, 6, 10, 10, 1, 1, 1, 1, 0, 0, 0}, {0, 1, 12, 13, 13, 6, 6, 7, 7, 1, 2, 1, 1, 1, 1, 0},
		{0, 1, 12, 9, 40, 12, 6, 9, 38, 1, 1, 1, 1, 1, 1, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		group_case_run(&cases[i], DT_FLOAT);
		group_case_run(&cases[i], DT_DOUBLE);
	}
}

/* #52 dwconv: conv_group.c reads the folded Transposes a grouped weight gradient's Conv takes (the
 * batch as channels: dY^T as the kernel, as grouped_weight_grad writes it, and here X^T too) and a
 * depthwise Conv's transposed input in place: the bits of transposed copies, through the dots (a
 * 12 x 12 kernel, 3 x 3 output) and the flat sums (3 x 3 kernel, stride 2). */
Test(exec, grouped_convs_read_folded_transposes_with_the_bits_of_copies)
{
	static const char text[] =
		"graphdiet: 1\nopset: 17\n"
		"inputs: [{name: xx, dtype: float32, shape: [3, 6, 14, 14]}, {name: dy, dtype: float32, shape: [3, 6, 12, 12]},\n"
		"         {name: x4, dtype: float32, shape: [18, 1, 14, 14]}, {name: x2, dtype: float32, shape: [6, 3, 11, 13]},\n"
		"         {name: w2, dtype: float32, shape: [6, 1, 3, 3]}]\n"
		"params: [{name: s, dtype: int64, shape: [4], data: [1, 18, 14, 14]}]\n"
		"nodes:\n"
		"  - {op: Transpose, inputs: [xx], outputs: [xxt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Reshape, inputs: [xxt, s], outputs: [xg]}\n"
		"  - {op: Transpose, inputs: [dy], outputs: [dyt], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [xg, dyt], outputs: [gw], attrs: {group: 6}}\n"
		"  - {op: Transpose, inputs: [x4], outputs: [x4t], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [x4t, dyt], outputs: [gw4], attrs: {group: 6, pads: [1, 0, 0, 1]}}\n"
		"  - {op: Transpose, inputs: [x2], outputs: [x2t], attrs: {perm: [1, 0, 2, 3]}}\n"
		"  - {op: Conv, inputs: [x2t, w2], outputs: [y2], attrs: {group: 6, pads: [1, 1, 1, 1], strides: [2, 2]}}\n"
		"outputs: [{name: gw}, {name: gw4}, {name: y2}]\n";
	folded_like_copied("groupfold.yaml", text, 0);
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

/* #52 roofline: a gather's cost is the bytes it moves */
Test(exec, gather_and_slice_cost_the_bytes_they_move)
{
	/* Gather of 2 rows of a 1000 x 8 float32 table: 2 x 64 bytes read and written, 16 of indices
	 * (not the 32,000-byte table); Slice of rows 0..2 of a 100 x 4 table: 2 x 32, 8 + 8 of starts
	 * and ends (not the 1,600-byte table) */
	static const struct {
		const char *inputs, *params, *node;
		uint64_t bytes;
	} cases[] = {
		{"[{name: t, dtype: float32, shape: [1000, 8]}]", "[{name: i, dtype: int64, shape: [2], data: [5, 7]}]",
		 "{op: Gather, inputs: [t, i], outputs: [y]}", 144},
		{"[{name: t, dtype: float32, shape: [100, 4]}]",
		 "[{name: b, dtype: int64, shape: [1], data: [0]}, {name: e, dtype: int64, shape: [1], data: [2]}]",
		 "{op: Slice, inputs: [t, b, e], outputs: [y]}", 80},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		char text[512];
		snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\ninputs: %s\nparams: %s\nnodes: [%s]\noutputs: [{name: y}]\n",
			 cases[k].inputs, cases[k].params, cases[k].node);
		struct exec_stats st = stats_of("gather_cost.yaml", text);
		cr_expect_eq(st.flops, 0);
		cr_expect_eq(st.bytes_moved, cases[k].bytes, "%s: bytes moved %llu", cases[k].node,
			     (unsigned long long)st.bytes_moved);
	}
}

/* #52 wgrad: a Conv's weight gradient at small planes (conv_wgrad.c: the weight_grad Conv as one
 * product) against its definition summed in float64 here, dW[m, c, i, j] = sum over n, oy, ox of
 * dY[n, m, oy, ox] x[n, c, oy s + i d - p, ox s + j d - p], with dY = r (loss sum(Conv(x, w) r)):
 * 1x1, 2x2 and 3x3 images with pad 1, stride 2 into 2x2, dilation 2, strided 1 x 1, batch 1 to
 * 512, channels 1 to 17, float32 and float64; and the same bits at 1 thread and 2. */
struct wgrad_case {
	int n, c, m, h, w, k, s, d, p;
};

static void wgrad_case_run(const struct wgrad_case *k, int f64)
{
	int oh = (k->h + 2 * k->p - k->d * (k->k - 1) - 1) / k->s + 1, ow = (k->w + 2 * k->p - k->d * (k->k - 1) - 1) / k->s + 1;
	int nx = k->n * k->c * k->h * k->w, nr = k->n * k->m * oh * ow, nw = k->m * k->c * k->k * k->k;
	const char *dt = f64 ? "float64" : "float32";
	size_t es = f64 ? 8 : 4;
	double *xv = malloc((size_t)nx * 8), *rv = malloc((size_t)nr * 8);
	void *xd = malloc((size_t)nx * es), *rd = malloc((size_t)nr * es);
	for (int i = 0; i < nx; i++) { /* values exact in float32 */
		xv[i] = (float)sin(0.37 * i + k->c);
		f64 ? (void)(((double *)xd)[i] = xv[i]) : (void)(((float *)xd)[i] = (float)xv[i]);
	}
	for (int i = 0; i < nr; i++) {
		rv[i] = (float)cos(0.91 * i - k->m);
		f64 ? (void)(((double *)rd)[i] = rv[i]) : (void)(((float *)rd)[i] = (float)rv[i]);
	}
	char text[1024];
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%d, %d, %d, %d]}, {name: r, dtype: %s, "
		 "shape: [%d, %d, %d, %d]}]\nparams: [{name: w, dtype: %s, shape: [%d, %d, %d, %d], init: {dist: normal, seed: 1}}]\n"
		 "nodes:\n  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {pads: [%d, %d, %d, %d], strides: [%d, %d], "
		 "dilations: [%d, %d]}}\n  - {op: Mul, inputs: [y, r], outputs: [z]}\n"
		 "  - {op: ReduceSum, inputs: [z], outputs: [l], attrs: {keepdims: 0}}\noutputs: [{name: l}]\n",
		 dt, k->n, k->c, k->h, k->w, dt, k->n, k->m, oh, ow, dt, k->m, k->c, k->k, k->k, k->p, k->p, k->p, k->p, k->s,
		 k->s, k->d, k->d);
	struct graph *g = load_text("wgrad_small.yaml", text);
	const char *params[] = {"w"};
	struct autodiff_opts ao = {.params = params, .n_params = 1};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert(!autodiff(g, &ao, &res, &e), "%s", e.msg);
	uint32_t gi = 0;
	while (gi < g->n_outputs && strcmp(g->outputs[gi]->name, "w_grad"))
		gi++;
	cr_assert(gi < g->n_outputs, "no w_grad output");
	int dtc = f64 ? DT_DOUBLE : DT_FLOAT;
	struct rtensor t[2] = {{.dtype = dtc, .ndim = 4, .dims = {k->n, k->c, k->h, k->w}, .numel = nx, .data = xd,
				.nbytes = (size_t)nx * es, .known = 1},
			       {.dtype = dtc, .ndim = 4, .dims = {k->n, k->m, oh, ow}, .numel = nr, .data = rd,
				.nbytes = (size_t)nr * es, .known = 1}};
	const char *names[2] = {"x", "r"};
	void *first = NULL;
	for (int th = 1; th <= 2; th++) {
		pool_set_threads(th);
		struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
		struct exec *ex = exec_run(g, &o, NULL, &e);
		cr_assert(ex, "%s", e.msg);
		const struct rtensor *y = exec_value(ex, g->outputs[gi]);
		cr_assert_eq(y->numel, (int64_t)nw);
		if (!first) {
			int64_t bad = 0;
			for (int m = 0; m < k->m; m++)
				for (int c = 0; c < k->c; c++)
					for (int i = 0; i < k->k; i++)
						for (int j = 0; j < k->k; j++) {
							double want = 0;
							for (int n = 0; n < k->n; n++)
								for (int oy = 0; oy < oh; oy++)
									for (int ox = 0; ox < ow; ox++) {
										int iy = oy * k->s + i * k->d - k->p, ix = ox * k->s + j * k->d - k->p;
										if (iy >= 0 && iy < k->h && ix >= 0 && ix < k->w)
											want += rv[((n * k->m + m) * oh + oy) * ow + ox] *
												xv[((n * k->c + c) * k->h + iy) * k->w + ix];
									}
							int at = ((m * k->c + c) * k->k + i) * k->k + j;
							double got = f64 ? ((const double *)y->data)[at] : ((const float *)y->data)[at];
							bad += !(fabs(got - want) <= (f64 ? 1e-12 : 1e-5) * (1 + fabs(want)) * k->n * oh * ow);
						}
			cr_expect_eq(bad, 0, "%s n%d c%d m%d %dx%d s%d d%d p%d: %lld of %d off the definition", dt, k->n, k->c,
				     k->m, k->h, k->w, k->s, k->d, k->p, (long long)bad, nw);
			first = malloc(y->nbytes);
			memcpy(first, y->data, y->nbytes);
		} else {
			cr_expect_eq(memcmp(first, y->data, y->nbytes), 0, "%s n%d c%d m%d %dx%d: other bits at 2 threads", dt,
				     k->n, k->c, k->m, k->h, k->w);
		}
		exec_free(ex);
	}
	pool_set_threads(1);
	free(first);
	graph_free(g);
	free(xv), free(rv), free(xd), free(rd);
}

Test(exec, weight_gradients_at_small_planes_match_the_definition)
{
	static const struct wgrad_case cases[] = {
		{1, 1, 1, 1, 1, 3, 1, 1, 1},   {3, 5, 7, 1, 1, 3, 1, 1, 1},   {1, 17, 3, 2, 2, 3, 1, 1, 1},
		{3, 16, 17, 2, 2, 3, 1, 1, 1}, {3, 9, 16, 3, 3, 3, 1, 1, 1},  {1, 2, 17, 3, 3, 3, 1, 1, 1},
		{3, 17, 16, 3, 3, 3, 2, 1, 1}, {1, 4, 5, 4, 4, 3, 2, 1, 1},   {3, 16, 16, 3, 3, 3, 1, 2, 2},
		{3, 7, 17, 4, 3, 3, 1, 2, 1},  {8, 17, 32, 3, 3, 3, 1, 1, 1}, {8, 32, 17, 6, 6, 3, 1, 1, 1},
		{3, 3, 16, 12, 12, 7, 2, 1, 3}, /* a stem's 7 x 7 / 2 */
		{3, 16, 17, 6, 6, 1, 2, 1, 0}, {1, 5, 3, 5, 7, 1, 2, 1, 0}, {2, 4, 16, 7, 5, 1, 3, 1, 0}, /* 1 x 1 / s */
		/* K = N OH OW of 512 and more, as conv_wgrad takes them (float64) */
		{64, 3, 5, 3, 3, 3, 1, 1, 1},  {128, 2, 17, 2, 2, 3, 1, 1, 1}, {512, 3, 5, 1, 1, 3, 1, 1, 1},
		{128, 5, 3, 3, 3, 3, 2, 1, 1}, {64, 4, 7, 3, 3, 3, 1, 2, 2},   {128, 3, 9, 4, 4, 1, 2, 1, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		for (int f64 = 0; f64 < 2; f64++)
			wgrad_case_run(&cases[i], f64);
}

/* A strided 1 x 1 Conv's weight gradient (a downsampling shortcut) reads the input subsampled by a
 * Slice with steps: its Conv computes the one tap a weight, not sh x sw of them cropped by a Slice. */
Test(exec, strided_1x1_weight_gradients_compute_no_extra_taps)
{
	struct graph *g = load_text("ds.yaml",
				    "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [2, 8, 6, 6]}]\n"
				    "params: [{name: w, dtype: float32, shape: [16, 8, 1, 1], init: {dist: normal, seed: 1}}]\n"
				    "nodes:\n  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {strides: [2, 2]}}\n"
				    "  - {op: ReduceSum, inputs: [y], outputs: [l], attrs: {keepdims: 0}}\noutputs: [{name: l}]\n");
	const char *params[] = {"w"};
	struct autodiff_opts ao = {.params = params, .n_params = 1};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert(!autodiff(g, &ao, &res, &e), "%s", e.msg);
	int crops = 0, convs = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		crops += !strcmp(n->op_type, "Slice") && n->n_in == 4;
		convs += !strcmp(n->op_type, "Conv");
	}
	cr_expect_eq(convs, 2, "%d Convs", convs);
	cr_expect_eq(crops, 0, "the weight gradient's Conv output is cropped by %d Slice(s)", crops);
	graph_free(g);
}

/* #52 redfast: the non-sum reductions over the last axis (ReduceMax, ReduceMin, ReduceL1,
 * ReduceProd, ReduceLogSumExp), GlobalMaxPool and AveragePool against serial walks written here,
 * bit for bit, float32 and float64, over NaNs of distinct payloads, signed zeros, infinities,
 * subnormals and huge values, at lengths around the kernels' lane counts. */

/* a one-node graph `node` over x of dtype dt and shape dims (data p), run; its output y */
static struct exec *rf_run(const char *node, const char *extra, int f64, int nd, const int64_t *dims, void *p,
			   struct graph **g, const struct rtensor **y)
{
	char shape[200] = "", text[1200];
	int64_t numel = 1;
	for (int i = 0; i < nd; i++) {
		snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? ", " : "", (long long)dims[i]);
		numel *= dims[i];
	}
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%s]}]\n%snodes:\n  - %s\noutputs: [{name: y}]\n",
		 f64 ? "float64" : "float32", shape, extra, node);
	*g = load_text("redfast.yaml", text);
	struct rtensor t = {.dtype = f64 ? DT_DOUBLE : DT_FLOAT, .ndim = nd, .numel = numel, .data = p,
			    .nbytes = (size_t)numel * (f64 ? 8 : 4), .known = 1};
	memcpy(t.dims, dims, (size_t)nd * sizeof *dims);
	const char *name = "x";
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s: %s", node, e.msg);
	*y = exec_value(x, (*g)->outputs[0]);
	return x;
}

/* test data: specials (NaNs with payloads 1..3 and both signs, zeros, infinities, subnormals,
 * huge) at random places among values of [-3, 3], some rows all zeros or all -inf, some rows
 * zeros among values of one sign, some rows finite values alone */
static double rf_value(uint32_t *s, int64_t i, int64_t row_len)
{
	static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, 1e-40, -1e-40, 1e-310, -1e-310, 3e38, -3e38, 1e300};
	*s = *s * 1664525u + 1013904223u;
	uint32_t k = *s >> 8;
	int64_t row = row_len ? i / row_len : 0;
	if (row % 7 == 3)
		return k & 1 ? 0.0 : -0.0;
	if (row % 7 == 5)
		return -INFINITY;
	if (row % 7 == 1) /* zeros of both signs the row's largest (or smallest: rows ReduceMin reads
			   * as negated) */
		return k % 8 == 0 ? (k & 16 ? 0.0 : -0.0) : (row & 8 ? 1 : -1) * (1 + (double)(k % 4096) / 4096);
	if (row % 7 == 6) /* finite values alone, over a range whose exponentials sum inexactly */
		return ((double)(k % 4096) / 4096 - 0.5) * 120 + (double)(k % 7) * 1e-5;
	if (k % 61 == 0) {
		uint64_t b = 0x7ff8000000000000ull | (k % 3 + 1) | (uint64_t)(k & 8) << 60;
		double d;
		memcpy(&d, &b, 8);
		return d;
	}
	if (k % 5 == 0)
		return special[k / 5 % (sizeof special / sizeof *special)];
	return ((double)(k % 4096) / 4096 - 0.5) * 6;
}

/* Whether y[i] has r's bits; with any_nan, any NaN for a NaN: which of two NaNs a sum or a
 * product keeps is the compiler's operand order (x86 keeps the first's payload), here and in the
 * kernel alike: the sanitizer build's -O1 made the reference's L1 and AveragePool sums keep the
 * other payload than -O2 had */
static int rf_same_nan(const struct rtensor *y, int64_t i, double r, int f64, int any_nan)
{
	if (any_nan && isnan(r))
		return f64 ? isnan(((const double *)y->data)[i]) : isnan(((const float *)y->data)[i]);
	if (f64)
		return !memcmp((const double *)y->data + i, &r, 8);
	float rf = (float)r;
	return !memcmp((const float *)y->data + i, &rf, 4);
}

/* the serial walks: m = v > m || isnan(v) ? v : m from -inf, its mirror, |x| and x summed, x
 * multiplied, and log sum exp(x - m) with float32's exponentials in float (vm_expf) */
static double rf_reduce(const char *op, const double *v, int64_t n, int f64)
{
	double m = strcmp(op, "ReduceMin") ? -INFINITY : INFINITY, s = strcmp(op, "ReduceProd") ? 0 : 1;
	for (int64_t r = 0; r < n; r++) {
		if (!strcmp(op, "ReduceMin"))
			m = v[r] < m || isnan(v[r]) ? v[r] : m;
		else
			m = v[r] > m || isnan(v[r]) ? v[r] : m;
		s = !strcmp(op, "ReduceProd") ? s * v[r] : s + fabs(v[r]);
	}
	if (!strcmp(op, "ReduceMax") || !strcmp(op, "ReduceMin"))
		return m;
	if (strcmp(op, "ReduceLogSumExp"))
		return s;
	if (isinf(m))
		return m;
	s = 0;
	for (int64_t r = 0; r < n; r++)
		s += f64 ? exp(v[r] - m) : (double)vm_expf((float)v[r] - (float)m);
	return m + log(s);
}

Test(exec, redfast_reductions_over_the_last_axis_match_the_serial_walk_bit_for_bit)
{
	static const char *const ops[] = {"ReduceMax", "ReduceMin", "ReduceL1", "ReduceProd", "ReduceLogSumExp"};
	static const int64_t lens[] = {0, 1, 5, 15, 16, 17, 33, 100, 257}, rows[] = {1, 3, 4, 9, 14, 19};
	enum { MAXN = 19 * 257 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (size_t op = 0; op < sizeof ops / sizeof *ops; op++)
		for (int f64 = 0; f64 < 2; f64++)
			for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
				for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
					int64_t len = lens[li], nr = rows[ri], dims[2] = {nr, len};
					uint32_t s = (uint32_t)(op * 7919 + li * 31 + ri);
					for (int64_t i = 0; i < nr * len; i++) {
						p64[i] = rf_value(&s, i, len);
						p32[i] = (float)p64[i];
						v[i] = f64 ? p64[i] : (double)p32[i];
					}
					char node[200];
					snprintf(node, sizeof node, "{op: %s, inputs: [x, ax], outputs: [y], attrs: {keepdims: %d}}",
						 ops[op], (int)(ri & 1));
					struct graph *g;
					const struct rtensor *y;
					struct exec *x = rf_run(node, "params: [{name: ax, dtype: int64, shape: [1], data: [-1]}]\n", f64,
								2, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
					int64_t wrong = 0, first = -1;
					for (int64_t r = 0; r < nr; r++)
						if (!rf_same_nan(y, r, rf_reduce(ops[op], v + r * len, len, f64), f64,
								 !strcmp(ops[op], "ReduceL1") || !strcmp(ops[op], "ReduceProd")) &&
						    !wrong++)
							first = r;
					cr_expect_eq(wrong, 0, "%s %s %lldx%lld: %lld outputs differ, the first row %lld", ops[op],
						     f64 ? "float64" : "float32", (long long)nr, (long long)len, (long long)wrong,
						     (long long)first);
					exec_free(x);
					graph_free(g);
				}
}

Test(exec, redfast_global_max_pool_matches_the_serial_walk_bit_for_bit)
{
	static const int64_t sizes[][2] = {{1, 1}, {3, 5}, {4, 4}, {5, 7}, {9, 13}};
	static double v[2 * 3 * 9 * 13], p64[2 * 3 * 9 * 13];
	static float p32[2 * 3 * 9 * 13];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
			int64_t sp = sizes[k][0] * sizes[k][1], dims[4] = {2, 3, sizes[k][0], sizes[k][1]};
			uint32_t s = (uint32_t)k * 101 + 7;
			for (int64_t i = 0; i < 6 * sp; i++) {
				p64[i] = rf_value(&s, i, sp);
				p32[i] = (float)p64[i];
				v[i] = f64 ? p64[i] : (double)p32[i];
			}
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = rf_run("{op: GlobalMaxPool, inputs: [x], outputs: [y]}", "", f64, 4, dims,
						f64 ? (void *)p64 : (void *)p32, &g, &y);
			for (int64_t nc = 0; nc < 6; nc++)
				cr_expect(rf_same_nan(y, nc, rf_reduce("ReduceMax", v + nc * sp, sp, f64), f64, 0), "%s %lldx%lld plane %lld",
					  f64 ? "float64" : "float32", (long long)dims[2], (long long)dims[3], (long long)nc);
			exec_free(x);
			graph_free(g);
		}
}

/* AveragePool by its definition: each window's elements inside the image summed in double from
 * +0 in row-major window order, over their count, or with count_include_pad over the window's
 * positions inside the padded image (the ceil_mode overhang beyond the pads not counted) */
static double rf_avg(const double *v, int64_t h, int64_t w, const int64_t *k, const int64_t *st, const int64_t *d,
		     const int64_t *pad, int incl, int64_t oy, int64_t ox)
{
	double s = 0;
	int64_t cnt = 0;
	for (int64_t i = 0; i < k[0]; i++)
		for (int64_t j = 0; j < k[1]; j++) {
			int64_t iy = oy * st[0] - pad[0] + i * d[0], ix = ox * st[1] - pad[1] + j * d[1];
			if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
				s += v[iy * w + ix];
				cnt++;
			} else if (incl && iy >= -pad[0] && iy < h + pad[2] && ix >= -pad[1] && ix < w + pad[3]) {
				cnt++;
			}
		}
	return cnt ? s / (double)cnt : 0;
}

Test(exec, redfast_average_pool_matches_its_definition_bit_for_bit)
{
	struct avg_case {
		int64_t h, w, k[2], s[2], d[2], pad[4];
		int ceil, incl;
	} cases[] = {
		{24, 24, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0},
		{9, 11, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0},
		{9, 11, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 1},
		{10, 10, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 0}, 1, 1},
		{10, 10, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 0}, 1, 0},
		{12, 37, {3, 2}, {1, 3}, {2, 2}, {2, 1, 0, 1}, 0, 1},
		{7, 300, {2, 5}, {1, 1}, {1, 2}, {1, 4, 1, 4}, 0, 0},
		{1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},
		{5, 5, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},
	};
	enum { MAXN = 2 * 3 * 7 * 300 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const struct avg_case *k = &cases[c];
			int64_t dims[4] = {2, 3, k->h, k->w}, sp = k->h * k->w;
			uint32_t s = (uint32_t)c * 17 + 3;
			for (int64_t i = 0; i < 6 * sp; i++) {
				p64[i] = rf_value(&s, i, k->w);
				p32[i] = (float)p64[i];
				v[i] = f64 ? p64[i] : (double)p32[i];
			}
			char node[400];
			snprintf(node, sizeof node,
				 "{op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [%lld, %lld], strides: [%lld, %lld], "
				 "dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld], ceil_mode: %d, count_include_pad: %d}}",
				 (long long)k->k[0], (long long)k->k[1], (long long)k->s[0], (long long)k->s[1], (long long)k->d[0],
				 (long long)k->d[1], (long long)k->pad[0], (long long)k->pad[1], (long long)k->pad[2],
				 (long long)k->pad[3], k->ceil, k->incl);
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = rf_run(node, "", f64, 4, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
			int64_t oh = y->dims[2], ow = y->dims[3], wrong = 0, first = -1;
			double want = 0;
			for (int64_t nc = 0; nc < 6; nc++)
				for (int64_t oy = 0; oy < oh; oy++)
					for (int64_t ox = 0; ox < ow; ox++) {
						double r = rf_avg(v + nc * sp, k->h, k->w, k->k, k->s, k->d, k->pad, k->incl, oy, ox);
						int64_t o = (nc * oh + oy) * ow + ox;
						if (!rf_same_nan(y, o, r, f64, 1) && !wrong++)
							first = o, want = r;
					}
			cr_expect_eq(wrong, 0, "%s case %zu: %lld of %lldx%lld outputs differ, the first %lld: %a, not %a",
				     f64 ? "float64" : "float32", c, (long long)wrong, (long long)oh, (long long)ow, (long long)first,
				     first < 0 ? 0 : rt_get(y, first), want);
			exec_free(x);
			graph_free(g);
		}
}

/* #52 optfast: the optimizer updates (training.c's Adam, Adagrad and Momentum, diet.c's DietAdam)
 * as typed loops over whole tensors cut over the pool: every element as the formulas in double,
 * rounded once on store, the same bits at 1 and 3 threads. */

/* Edge values: NaN, +-inf, +-0, subnormals (float32's and float64's), huge, ordinary. */
static const double opt_edges[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-45, -4.9e-324, 3e38, -1e300, -3.5, 0.25,
				   1.5, 7.0, -1e-40, 2.5e-39, 0.1};
#define OPT_NE (int)(sizeof opt_edges / sizeof *opt_edges)

/* a and b the same bits, or both NaN */
static int same_bits(double a, double b, int f64)
{
	if (isnan(a) && isnan(b))
		return 1;
	if (f64)
		return !memcmp(&a, &b, sizeof a);
	float fa = (float)a, fb = (float)b;
	return !memcmp(&fa, &fb, sizeof fa);
}

/* Adam, Adagrad, Momentum (standard, nesterov) over 4 tensors of one node: float32 and float64 of
 * 2 x 8192 + 37 elements, float32 of 1, float64 of 0; every input from the edge values. The
 * expected values are the schema's formulas, written here. */
Test(exec, training_optimizers_match_their_formulas_bit_for_bit)
{
	enum { N = 2 * 8192 + 37, G = 4 };
	static const int64_t len[G] = {N, N, 1, 0};
	static const int f64[G] = {0, 1, 0, 1};
	static const char *const ops[4] = {"Adam", "Adagrad", "Momentum", "Momentum"};
	static const char *const attrs[4] = {
		"{alpha: 0.75, beta: 0.875, epsilon: 9.5367431640625e-07, norm_coefficient: 0.0625, norm_coefficient_post: 0.03125}",
		"{decay_factor: 0.125, epsilon: 9.5367431640625e-07, norm_coefficient: 0.0625}",
		"{alpha: 0.75, beta: 0.5, mode: standard, norm_coefficient: 0.0625}",
		"{alpha: 0.75, beta: 0.5, mode: nesterov, norm_coefficient: 0.0625}"};
	const double r = 0.125, t = 3, nc = 0.0625, eps = 9.5367431640625e-07;
	static double buf[4][G][N]; /* X, G, S1, S2 of each group */
	struct rtensor ins[4 * G];
	char names_s[4 * G][16];
	const char *names[4 * G];
	for (int s = 0; s < 4; s++)
		for (int k = 0; k < G; k++) {
			for (int64_t e = 0; e < len[k]; e++) {
				double v = opt_edges[(e * (2 * s + 1) + 3 * s + k) % OPT_NE];
				if (s >= 2)
					v = fabs(v); /* the squares' sums */
				if (f64[k])
					buf[s][k][e] = v;
				else
					((float *)buf[s][k])[e] = (float)v;
			}
			ins[s * G + k] = rt_over(f64[k] ? DT_DOUBLE : DT_FLOAT, 1, &len[k], buf[s][k]);
			snprintf(names_s[s * G + k], sizeof names_s[0], "%c%d", "xgab"[s], k);
			names[s * G + k] = names_s[s * G + k];
		}
	for (int o = 0; o < 4; o++) {
		int per = o ? 3 : 4;
		char yaml[8192], decl[2048] = "", inl[256] = "[r, t", outl[256] = "", outd[512] = "";
		for (int s = 0; s < per; s++)
			for (int k = 0; k < G; k++) {
				size_t d = strlen(decl);
				snprintf(decl + d, sizeof decl - d, "%s{name: %s, dtype: %s, shape: [%lld]}", d ? ", " : "",
					 names[s * G + k], f64[k] ? "float64" : "float32", (long long)len[k]);
				d = strlen(inl);
				snprintf(inl + d, sizeof inl - d, ", %s", names[s * G + k]);
			}
		for (int s = 0; s < per - 1; s++) /* the new X (o0..), S1 (o4..), S2 (o8..) */
			for (int k = 0; k < G; k++) {
				size_t d = strlen(outl);
				snprintf(outl + d, sizeof outl - d, "%so%d", d ? ", " : "", s * G + k);
				d = strlen(outd);
				snprintf(outd + d, sizeof outd - d, "%s{name: o%d}", d ? ", " : "", s * G + k);
			}
		snprintf(yaml, sizeof yaml,
			 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: ai.onnx.preview.training, version: 1}]\n"
			 "inputs: [%s]\nparams:\n  - {name: r, dtype: float32, shape: [], data: [0.125]}\n"
			 "  - {name: t, dtype: int64, shape: [], data: [3]}\n"
			 "nodes:\n  - {name: up, op: %s, domain: ai.onnx.preview.training, inputs: %s], outputs: [%s], attrs: %s}\n"
			 "outputs: [%s]\n",
			 decl, ops[o], inl, outl, attrs[o], outd);
		struct graph *g = load_text("optimizer.yaml", yaml);
		for (int th = 1; th <= 3; th += 2) {
			pool_set_threads(th);
			struct exec_opts xo = {.inputs = ins, .input_names = names, .n_inputs = per * G};
			struct gd_err e = {0};
			struct exec *x = exec_run(g, &xo, NULL, &e);
			cr_assert(x, "%s: %s", ops[o], e.msg);
			double ra = o == 0 ? r * sqrt(1 - pow(0.875, t)) / (1 - pow(0.75, t)) : o == 1 ? r / (1 + t * 0.125) : r;
			int64_t bad = 0;
			for (int k = 0; k < G; k++) {
				char on[3][16];
				const struct rtensor *res[3] = {NULL, NULL, NULL};
				for (int s = 0; s < per - 1; s++) {
					snprintf(on[s], sizeof on[s], "o%d", s * G + k);
					res[s] = exec_value(x, strmap_get(&g->names, on[s]));
					cr_assert_eq(res[s]->numel, len[k]);
				}
				for (int64_t i = 0; i < len[k]; i++) {
					double in[4];
					for (int s = 0; s < 4; s++)
						in[s] = f64[k] ? buf[s][k][i] : ((const float *)buf[s][k])[i];
					double xv = in[0], gv = nc * xv + in[1], want[3];
					if (o == 0) {
						want[1] = 0.75 * in[2] + (1 - 0.75) * gv;
						want[2] = 0.875 * in[3] + (1 - 0.875) * gv * gv;
						want[0] = (1 - 0.03125) * (xv - ra * (want[1] / (sqrt(want[2]) + eps)));
					} else if (o == 1) {
						want[1] = in[2] + gv * gv;
						want[0] = xv - ra * gv / (sqrt(want[1]) + eps);
					} else {
						want[1] = 0.75 * in[2] + 0.5 * gv;
						want[0] = o == 3 ? xv - r * (gv + 0.75 * want[1]) : xv - r * want[1];
					}
					for (int s = 0; s < per - 1; s++) {
						int ok = same_bits(rt_get(res[s], i), want[s], f64[k]);
						bad += !ok;
						if (!ok && bad < 5)
							cr_expect(0, "%s, %d threads, group %d, output %d [%lld]: %.17g, not %.17g", ops[o], th,
								  k, s, (long long)i, rt_get(res[s], i), want[s]);
					}
				}
			}
			cr_expect_eq(bad, 0, "%s, %d threads: %lld values differ", ops[o], th, (long long)bad);
			exec_free(x);
		}
		pool_set_threads(1);
		graph_free(g);
	}
}

/* The reference DietAdam quantize (diet.h): x / scale to nearest, ties to even (u < 0), else
 * floor(|y| + u) with y's sign; NaN 0; clamped to +-32767. */
static int16_t ref_quantize(double x, double scale, double u)
{
	double y = x / scale;
	if (isnan(y))
		return 0;
	y = u < 0 ? nearbyint(y) : copysign(floor(fabs(y) + u), y);
	return (int16_t)(y > 32767 ? 32767 : y < -32767 ? -32767 : y);
}

/* DietAdam over a dense gradient: a full second moment (q of 2 x 8192 + 37, momentum on, edge
 * values in g, m and v) and a factored one (q 37 x 443, no momentum), each with g float32, float64,
 * float16 and bfloat16, rounded to nearest and stochastically, at 1 and 3 threads; the expected q',
 * m' and v' (vr', vc') from diet.h's formulas, written here, the uniforms Philox's k-th for
 * element k under the node's key. */
Test(exec, diet_adam_matches_its_formula_bit_for_bit)
{
	enum { N = 2 * 8192 + 37, R = 37, C = 443 }; /* R C <= N */
	static const int gdt[4] = {DT_FLOAT, DT_DOUBLE, DT_FLOAT16, DT_BFLOAT16};
	static const char *const gname[4] = {"float32", "float64", "float16", "bfloat16"};
	static int16_t q[N];
	static float m[N], v[N], vr[R], vc[C];
	static double gd[N], vrd[R], vcd[C];
	static uint16_t gh[N];
	static float gf[N];
	const double b1 = 0.875, b2 = 0.75, eps = 9.5367431640625e-07, lr = 0.5, scale = 0.0078125, t = 3;
	for (int i = 0; i < N; i++) {
		q[i] = (int16_t)(i % 7 == 0 ? 32767 : i % 7 == 1 ? -32767 : i % 7 == 2 ? 0 : (i * 37) % 2001 - 1000);
		m[i] = (float)opt_edges[(i * 3 + 1) % OPT_NE];
		v[i] = (float)fabs(opt_edges[(i * 5 + 2) % OPT_NE]);
	}
	for (int i = 0; i < R; i++)
		vrd[i] = vr[i] = (float)(i % 5) * 0.25f;
	for (int j = 0; j < C; j++)
		vcd[j] = vc[j] = j % 3 ? (float)(j % 11) * 0.125f : 0.0f;
	for (int fac = 0; fac < 3; fac++) /* full; factored with float32 moments; with float64 ones */
		for (int d = 0; d < 4; d++)
			for (int st = 0; st < 2; st++) {
				int64_t n = fac ? R * C : N;
				for (int64_t i = 0; i < n; i++) { /* the factored case: ordinary values, signed zeros, subnormals */
					double e = fac ? (i % 13 == 0 ? -0.0 : i % 13 == 1 ? 1e-41 : (double)((i * 7919) % 1999 - 999) * 0.0012345 + (double)i * 1e-9)
						       : opt_edges[(i * 7 + 5) % OPT_NE];
					gd[i] = e;
					gf[i] = (float)e;
				}
				struct rtensor gt = rt_over(gdt[d], fac ? 2 : 1, fac ? (const int64_t[]){R, C} : (const int64_t[]){N},
							    d == 0 ? (void *)gf : d == 1 ? (void *)gd : (void *)gh);
				for (int64_t i = 0; d >= 2 && i < n; i++)
					rt_set(&gt, i, gd[i]);
				char yaml[2048];
				snprintf(yaml, sizeof yaml,
					 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
					 "inputs: [{name: q, dtype: int16, shape: %s}, {name: g, dtype: %s, shape: %s}, %s]\n"
					 "params:\n  - {name: t, dtype: int64, shape: [], data: [3]}\n"
					 "nodes:\n  - {name: up, op: DietAdam, domain: graphdiet, inputs: %s, outputs: %s,\n"
					 "     attrs: {beta1: %s, beta2: 0.75, epsilon: 9.5367431640625e-07, lr: 0.5, schedule: none,"
					 " warmup: 2.0, scale: 0.0078125, round: %s}}\n"
					 "outputs: %s\n",
					 fac ? "[37, 443]" : "[16421]", gname[d], fac ? "[37, 443]" : "[16421]",
					 fac == 2 ? "{name: vr, dtype: float64, shape: [37]}, {name: vc, dtype: float64, shape: [443]}"
					 : fac ? "{name: vr, dtype: float32, shape: [37]}, {name: vc, dtype: float32, shape: [443]}"
					     : "{name: m, dtype: float32, shape: [16421]}, {name: v, dtype: float32, shape: [16421]}",
					 fac ? "[q, g, t, '', vr, vc]" : "[q, g, t, m, v]", fac ? "[qn, '', vrn, vcn]" : "[qn, mn, vn]",
					 fac ? "0.0" : "0.875", st ? "stochastic" : "nearest",
					 fac ? "[{name: qn}, {name: vrn}, {name: vcn}]" : "[{name: qn}, {name: mn}, {name: vn}]");
				struct graph *g = load_text("diet_adam.yaml", yaml);
				const int64_t dn[1] = {N}, dq[2] = {R, C}, dr[1] = {R}, dc[1] = {C};
				struct rtensor ins[4] = {rt_over(DT_INT16, fac ? 2 : 1, fac ? dq : dn, q), gt,
							 fac == 2 ? rt_over(DT_DOUBLE, 1, dr, vrd)
							 : fac	  ? rt_over(DT_FLOAT, 1, dr, vr)
								  : rt_over(DT_FLOAT, 1, dn, m),
							 fac == 2 ? rt_over(DT_DOUBLE, 1, dc, vcd)
							 : fac	  ? rt_over(DT_FLOAT, 1, dc, vc)
								  : rt_over(DT_FLOAT, 1, dn, v)};
				const char *names[2][4] = {{"q", "g", "m", "v"}, {"q", "g", "vr", "vc"}};
				/* the reference: g at float32 precision; the factored moments summed in order */
				static double gr[N], want_v[N], want_m[N], rr[R], cc[C];
				double cmean = 0;
				for (int64_t i = 0; i < n; i++)
					gr[i] = d == 0 ? gf[i] : d == 1 ? (double)(float)gd[i] : rt_get(&gt, i);
				if (fac) {
					for (int i = 0; i < R; i++) {
						double s = 0;
						for (int j = 0; j < C; j++)
							s += gr[i * C + j] * gr[i * C + j];
						rr[i] = b2 * vr[i] + (1 - b2) * s / C; /* stored float32, or float64 */
						rr[i] = fac == 2 ? rr[i] : (float)rr[i];
					}
					for (int j = 0; j < C; j++) {
						double s = 0;
						for (int i = 0; i < R; i++)
							s += gr[i * C + j] * gr[i * C + j];
						cc[j] = b2 * vc[j] + (1 - b2) * s / R;
						cc[j] = fac == 2 ? cc[j] : (float)cc[j];
					}
				}
				double bc = 1 - pow(b2, t), lrt = lr * fmin(t / 2.0, 1);
				for (int j = 0; fac && j < C; j++)
					cmean += sqrt(cc[j] / bc) + eps;
				cmean /= C;
				for (int th = 1; th <= 3; th += 2) {
					pool_set_threads(th);
					struct exec_opts xo = {.inputs = ins, .input_names = names[fac > 0], .n_inputs = 4};
					struct gd_err e = {0};
					struct exec *x = exec_run(g, &xo, NULL, &e);
					cr_assert(x, "%s: %s", gname[d], e.msg);
					const struct node *up = NULL;
					for (uint32_t k = 0; k < g->n_nodes; k++)
						if (g->nodes[k]->op == OP_DIET_ADAM)
							up = g->nodes[k];
					cr_assert(up);
					uint64_t key = exec_node_seed(x, up) ^ ((uint64_t)t * 0x9e3779b97f4a7c15ull);
					const struct rtensor *qn = exec_value(x, strmap_get(&g->names, "qn"));
					const struct rtensor *o1 = exec_value(x, strmap_get(&g->names, fac ? "vrn" : "mn"));
					const struct rtensor *o2 = exec_value(x, strmap_get(&g->names, fac ? "vcn" : "vn"));
					int64_t bad = 0;
					for (int64_t k = 0; k < n; k++) {
						double u = gr[k], denom;
						if (fac) {
							denom = (sqrt(rr[k / C] / bc) + eps) * (sqrt(cc[k % C] / bc) + eps) / cmean;
						} else {
							u = want_m[k] = b1 * m[k] + (1 - b1) * gr[k];
							want_v[k] = b2 * v[k] + (1 - b2) * gr[k] * gr[k];
							denom = sqrt(want_v[k] / bc) + eps;
							bad += !same_bits(rt_get(o1, k), want_m[k], 0) + !same_bits(rt_get(o2, k), want_v[k], 0);
						}
						int16_t want = ref_quantize(q[k] * scale - lrt * u / denom, scale,
									    st ? philox_uniform(key, (uint64_t)k) : -1);
						int16_t got = ((const int16_t *)qn->data)[k];
						if (got != want && bad++ < 5)
							cr_expect(0, "%s, %s, %s, %d threads: q'[%lld] %d, not %d", fac == 2 ? "factored float64" : fac ? "factored" : "full",
								  gname[d], st ? "stochastic" : "nearest", th, (long long)k, got, want);
					}
					for (int i = 0; fac && i < R + C; i++) {
						double got = rt_get(i < R ? o1 : o2, i < R ? i : i - R), want = i < R ? rr[i] : cc[i - R];
						if (!same_bits(got, want, fac == 2) && bad++ < 5)
							cr_expect(0, "%s, %s, %d threads: %s'[%d] %.9g, not %.9g", gname[d],
								  st ? "stochastic" : "nearest", th, i < R ? "vr" : "vc", i < R ? i : i - R,
								  got, want);
					}
					cr_expect_eq(bad, 0, "%s, %s, %s, %d threads: %lld values differ", fac == 2 ? "factored float64" : fac ? "factored" : "full",
						     gname[d], st ? "stochastic" : "nearest", th, (long long)bad);
					exec_free(x);
				}
				pool_set_threads(1);
				graph_free(g);
			}
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

/* n source elements of dtype dt: special values first, then random bits (NaN payloads, subnormals,
 * every float16 and bfloat16 pattern once their count allows) */
static void cf_fill(int dt, void *data, int64_t n, uint64_t seed)
{
	static const float sf[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 65504, 65519.99f, 65520,
				   -65520, 1e30f, 3e9f, -3e9f, 2.5f, -2.5f, 0x1p-25f, 0x1.8p-24f, 0x1p-24f, 0x1.ffcp-15f,
				   1.00048828125f, 1.00146484375f, 0x1.00018p0f, 0x1.00008p0f, 2147483648.0f, 1e20f, -1e20f};
	static const double sd[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, 1e-40, 0x1.000001p0, 0x1.0000010000001p0,
				    65519.999999, 65520, 9.3e18, -9.3e18, 2147483647.5, -2147483648.9, 2147483648.0, 1e300};
	static const int64_t si[] = {INT64_MIN, INT64_MAX, 0, 1, -1, 2147483648LL, -2147483649LL, (1LL << 53) + 1, 65505, 4294967295LL};
	size_t es = dtype_size(dt);
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed >> 11 ^ seed << 29;
		char *p = (char *)data + i * es;
		switch (dt) {
		case DT_FLOAT: {
			float f;
			uint32_t u = (uint32_t)r;
			memcpy(&f, &u, 4);
			if (i < (int64_t)(sizeof sf / sizeof *sf))
				f = sf[i];
			else if (i % 3 == 0) /* near float16's range, where its rounding cases are */
				f = ldexpf((float)(r & 0xffffff) / 0x1p24f, (int)(r >> 32) % 45 - 28) * (r >> 63 ? -1 : 1);
			memcpy(p, &f, 4);
			break;
		}
		case DT_DOUBLE: {
			double d;
			memcpy(&d, &r, 8);
			if (i < (int64_t)(sizeof sd / sizeof *sd))
				d = sd[i];
			else if (i % 3 == 0)
				d = ldexp((double)(r & 0xfffffffffffffULL) / 0x1p52, (int)(r >> 52) % 80 - 40);
			memcpy(p, &d, 8);
			break;
		}
		case DT_FLOAT16: case DT_BFLOAT16: {
			uint16_t h = (uint16_t)(n >= 65536 ? (uint64_t)i : r);
			memcpy(p, &h, 2);
			break;
		}
		case DT_BOOL: *(uint8_t *)p = (uint8_t)(i % 7 == 3 ? r : (uint64_t)(i % 2)); break; /* a few bytes not 0 or 1 */
		case DT_INT32: {
			int32_t v = i < (int64_t)(sizeof si / sizeof *si) ? (int32_t)si[i] : (int32_t)r;
			memcpy(p, &v, 4);
			break;
		}
		default: {
			int64_t v = i < (int64_t)(sizeof si / sizeof *si) ? si[i] : (int64_t)r >> (r & 31);
			memcpy(p, &v, 8);
			break;
		}
		}
	}
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

/* #52 rnnvec: the float32 LSTM cell's loops (vectorised: functions of their own with restrict
 * parameters) against the cell written out here element by element, bit for bit: the forward node's
 * Y, Y_h, Y_c over 5 steps of a batch of 3, H = 21 (not a multiple of any vector width), with
 * biases and peepholes. The products are the kernel's own calls (blas_sgemm, the same shapes), so
 * every bit that differs is the cell's. */
static float lv_sig(float v)
{
	float e = vm_expf(v < 0 ? v : -v), s = 1 / (1 + e);
	return v >= 0 ? s : e * s;
}

Test(exec, lstm_cell_loops_match_the_cell_bit_for_bit)
{
	enum { T = 5, B = 3, NI = 7, H = 21, G = 4 * H };
	static float x[T * B * NI], w[G * NI], r[G * H], bias[2 * G], p[3 * H];
	float *all[] = {x, w, r, bias, p};
	size_t len[] = {T * B * NI, G * NI, G * H, 2 * G, 3 * H};
	for (int a = 0; a < 5; a++)
		for (size_t i = 0; i < len[a]; i++)
			all[a][i] = (philox_uniform(52 + (uint64_t)a, i) * 2 - 1) * (a == 0 ? 3.0f : 0.5f);
	struct graph *g = load_text("lstm.yaml",
				    "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: float32, shape: [5, 3, 7]},\n"
				    "  {name: w, dtype: float32, shape: [1, 84, 7]}, {name: r, dtype: float32, shape: [1, 84, 21]},\n"
				    "  {name: b, dtype: float32, shape: [1, 168]}, {name: p, dtype: float32, shape: [1, 63]}]\n"
				    "nodes:\n  - {op: LSTM, inputs: [x, w, r, b, \"\", \"\", \"\", p], outputs: [y, yh, yc],"
				    " attrs: {hidden_size: 21}}\noutputs: [{name: y}, {name: yh}, {name: yc}]\n");
	struct rtensor t[5];
	const int64_t dims[5][3] = {{T, B, NI}, {1, G, NI}, {1, G, H}, {1, 2 * G}, {1, 3 * H}};
	const char *names[5] = {"x", "w", "r", "b", "p"};
	for (int a = 0; a < 5; a++) {
		int nd = a < 3 ? 3 : 2;
		t[a] = (struct rtensor){.dtype = DT_FLOAT, .ndim = nd, .numel = (int64_t)len[a], .data = all[a],
					.nbytes = (int64_t)len[a] * 4, .known = 1};
		memcpy(t[a].dims, dims[a], sizeof dims[a]);
	}
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 5};
	struct exec *ex = exec_run(g, &o, NULL, &e);
	cr_assert(ex, "%s", e.msg);
	/* the reference: X W^T + Wb + Rb for all steps, then per step H R^T and the cell */
	static float xw[T * B * G], q[B * G], h[B * H], c[B * H], y[T * B * H];
	blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T * B, G, NI, 1, x, NI, w, NI, 0, xw, G);
	for (int i = 0; i < T * B; i++)
		for (int j = 0; j < G; j++)
			xw[i * G + j] += bias[j] + bias[G + j];
	memset(h, 0, sizeof h);
	memset(c, 0, sizeof c);
	struct blas_panels pr; /* the kernel's step product: R turned into panels where they apply */
	float *buf = malloc(blas_panels_bytes(B, G, H) + 1);
	blas_panels_make(&pr, B, G, H, 1, r, H, buf);
	for (int st = 0; st < T; st++) {
		blas_panels_sgemm(&pr, h, H, q, G);
		for (int b = 0; b < B; b++)
			for (int k = 0; k < H; k++) {
				const float *gx = xw + (st * B + b) * G, *gq = q + b * G;
				float cp = c[b * H + k];
				float i = lv_sig(gx[k] + gq[k] + p[k] * cp);
				float f = lv_sig(gx[2 * H + k] + gq[2 * H + k] + p[2 * H + k] * cp);
				float cg = vm_tanhf(gx[3 * H + k] + gq[3 * H + k]), cn = f * cp + i * cg;
				float ov = lv_sig(gx[H + k] + gq[H + k] + p[H + k] * cn);
				c[b * H + k] = cn;
				h[b * H + k] = y[(st * B + b) * H + k] = ov * vm_tanhf(cn);
			}
	}
	const float *want[3] = {y, h, c};
	int64_t n[3] = {T * B * H, B * H, B * H};
	for (int k = 0; k < 3; k++) {
		const struct rtensor *got = exec_value(ex, g->outputs[k]);
		cr_assert_eq(got->numel, n[k]);
		int64_t wrong = 0;
		for (int64_t i = 0; i < n[k]; i++)
			wrong += memcmp(&want[k][i], &((const float *)got->data)[i], 4) != 0;
		cr_expect_eq(wrong, 0, "output %d: %lld of %lld elements differ", k, (long long)wrong, (long long)n[k]);
	}
	free(buf);
	exec_free(ex);
	graph_free(g);
}

/* blas.h's panels (a recurrence's step products): C = A op(B) against a float64 sum written here,
 * for B and B^T, a row stride over k, widths that leave a narrower last panel, 1 to 64 rows of A
 * and k up to 2048; the same bits at 1 and 2 threads. Where the panels do not apply (other
 * kernels, more rows) the products run as given: the same checks hold. */
Test(exec, blas_panels_products_are_the_product_at_any_threads)
{
	static const int shapes[][3] = {{16, 2048, 512}, {1, 200, 37}, {7, 130, 300}, {64, 96, 128}, {16, 512, 2048}, {65, 40, 30}};
	for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
		for (int tb = 0; tb < 2; tb++) {
			int m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2], ldb = (tb ? k : n) + 3;
			float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * (tb ? n : k) * ldb);
			float *c[2] = {malloc(sizeof(float) * m * n), malloc(sizeof(float) * m * n)};
			for (int i = 0; i < m * k; i++)
				a[i] = philox_uniform(7, (uint64_t)i) - 0.5f;
			for (int i = 0; i < (tb ? n : k) * ldb; i++)
				b[i] = philox_uniform(8, (uint64_t)i) - 0.5f;
			struct blas_panels p;
			float *buf = malloc(blas_panels_bytes(m, n, k) + 1);
			blas_panels_make(&p, m, n, k, tb, b, ldb, buf);
			for (int th = 0; th < 2; th++) {
				pool_set_threads(th + 1);
				blas_panels_sgemm(&p, a, k, c[th], n);
			}
			pool_set_threads(1);
			int64_t far = 0, differ = 0;
			for (int i = 0; i < m; i++)
				for (int j = 0; j < n; j++) {
					double want = 0, mag = 0;
					for (int q = 0; q < k; q++) {
						double t = (double)a[i * k + q] * (tb ? b[j * ldb + q] : b[q * ldb + j]);
						want += t;
						mag += fabs(t);
					}
					far += fabs(c[0][i * n + j] - want) > 1e-6 * mag + 1e-30;
					differ += memcmp(&c[0][i * n + j], &c[1][i * n + j], 4) != 0;
				}
			cr_expect_eq(far, 0, "%d x %d x %d, tb %d: %lld elements off the product", m, n, k, tb, (long long)far);
			cr_expect_eq(differ, 0, "%d x %d x %d, tb %d: %lld elements differ between 1 and 2 threads", m, n, k, tb,
				     (long long)differ);
			free(a), free(b), free(c[0]), free(c[1]), free(buf);
		}
}

/* #52 resize: Resize's typed planes (resize.c) and LpPool's (conv_nd.c) against their definitions
 * written here, bit for bit (any NaN for a NaN), float32 and float64, up and down, odd sizes, over
 * rf_value's NaNs, signed zeros, infinities, subnormals and huge values; and the costs of the
 * gathers, the scatter and NegativeLogLikelihoodLoss against bytes counted by hand. */

struct rs_case {
	int nd;
	int64_t in[4], out[4]; /* out: sizes, or with scaled the scales x 4 */
	int scaled;
	const char *mode, *coord, *nearest;
};

/* ONNX's coordinate of output o on an axis of `in` resized to `out` (scale s, resized length len) */
static double rs_coord(const char *coord, int64_t o, int64_t in, double s, double len)
{
	if (!strcmp(coord, "half_pixel"))
		return ((double)o + 0.5) / s - 0.5;
	if (!strcmp(coord, "pytorch_half_pixel"))
		return len > 1 ? ((double)o + 0.5) / s - 0.5 : 0;
	if (!strcmp(coord, "align_corners"))
		return len > 1 ? (double)o * (double)(in - 1) / (len - 1) : 0;
	if (!strcmp(coord, "asymmetric"))
		return (double)o / s;
	return ((double)o + 0.5) / s; /* tf_half_pixel_for_nn */
}

/* the taps of output o: their count, indices and weights (nearest, linear, cubic with a = -0.75) */
static int rs_taps(const struct rs_case *k, double x, int64_t in, int64_t *ix, double *w)
{
	if (!strcmp(k->mode, "nearest")) {
		double f = floor(x);
		int64_t i = !strcmp(k->nearest, "floor")  ? (int64_t)f
			    : !strcmp(k->nearest, "ceil") ? (int64_t)ceil(x)
			    : x - f == 0.5		   ? (int64_t)f + !strcmp(k->nearest, "round_prefer_ceil")
							   : (int64_t)floor(x + 0.5);
		ix[0] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
		w[0] = 1;
		return 1;
	}
	if (!strcmp(k->mode, "linear")) {
		x = x < 0 ? 0 : x;
		int64_t i = (int64_t)floor(x);
		if (i >= in - 1) {
			ix[0] = in - 1, w[0] = 1;
			return 1;
		}
		ix[0] = i, ix[1] = i + 1, w[1] = x - (double)i, w[0] = 1 - w[1];
		return 2;
	}
	double f = floor(x), a = -0.75;
	for (int t = 0; t < 4; t++) {
		int64_t i = (int64_t)f - 1 + t;
		double d = fabs(x - (f - 1 + t));
		ix[t] = i < 0 ? 0 : i > in - 1 ? in - 1 : i;
		w[t] = d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
	}
	return 4;
}

/* rf_value's data from seed: n elements in rows of row_len, as float32 (p32) or float64 (p64), and in
 * v as double */
static void rs_fill(uint32_t seed, int64_t n, int64_t row_len, int f64, double *v, float *p32, double *p64)
{
	for (int64_t i = 0; i < n; i++) {
		double d = rf_value(&seed, i, row_len);
		f64 ? (void)(p64[i] = d) : (void)(p32[i] = (float)d);
		v[i] = f64 ? d : (double)(float)d;
	}
}

Test(exec, resize_matches_its_definition_bit_for_bit)
{
	static const struct rs_case cases[] = {
		{4, {2, 3, 5, 7}, {2, 3, 11, 16}, 0, "nearest", "asymmetric", "floor"},
		{4, {2, 3, 5, 7}, {2, 3, 10, 14}, 1, "nearest", "asymmetric", "floor"}, /* x2 */
		{4, {2, 3, 9, 13}, {2, 3, 4, 5}, 0, "nearest", "half_pixel", "round_prefer_floor"},
		{4, {2, 3, 9, 13}, {2, 3, 4, 5}, 0, "nearest", "half_pixel", "round_prefer_ceil"},
		{4, {2, 3, 6, 6}, {2, 3, 9, 9}, 0, "nearest", "align_corners", "ceil"},
		{4, {2, 3, 6, 6}, {2, 3, 9, 9}, 0, "nearest", "tf_half_pixel_for_nn", "round_prefer_floor"},
		{4, {2, 3, 5, 300}, {2, 3, 12, 601}, 0, "nearest", "pytorch_half_pixel", "round_prefer_floor"},
		{4, {2, 3, 5, 7}, {3, 5, 8, 9}, 0, "nearest", "asymmetric", "round_prefer_floor"}, /* N and C too */
		{4, {2, 3, 5, 7}, {2, 3, 10, 14}, 1, "linear", "half_pixel", ""},
		{4, {2, 3, 5, 7}, {2, 3, 13, 3}, 0, "linear", "align_corners", ""},
		{4, {2, 3, 9, 300}, {2, 3, 4, 517}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 3, 1, 7}, {2, 3, 1, 19}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 3, 5, 7}, {2, 3, 11, 15}, 0, "linear", "asymmetric", ""},
		{4, {2, 3, 8, 8}, {2, 3, 8, 8}, 0, "linear", "half_pixel", ""},
		{4, {2, 3, 5, 7}, {2, 3, 12, 9}, 0, "cubic", "half_pixel", ""},
		{4, {2, 3, 9, 10}, {2, 3, 4, 3}, 0, "cubic", "align_corners", ""},
		{3, {3, 5, 7}, {5, 9, 4}, 0, "linear", "half_pixel", ""}, /* every axis linear: the generic loop */
		{2, {5, 7}, {11, 3}, 0, "linear", "align_corners", ""},
		{1, {37}, {80}, 0, "linear", "half_pixel", ""},
		{1, {37}, {1}, 0, "nearest", "asymmetric", "floor"},
		{4, {1, 1, 1, 1}, {1, 1, 1, 1}, 0, "cubic", "half_pixel", ""},
	};
	enum { MAXN = 2 * 3 * 9 * 300, MAXO = 3 * 5 * 12 * 601 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const struct rs_case *k = &cases[c];
			int r = k->nd;
			int64_t numel = 1, onum = 1, od[4];
			double s[4], len[4];
			for (int i = 0; i < r; i++) {
				numel *= k->in[i];
				od[i] = k->scaled ? k->in[i] * k->out[i] / 4 : k->out[i];
				s[i] = k->scaled ? (double)(float)(k->out[i] / 4.0) : (double)od[i] / (double)k->in[i];
				len[i] = k->scaled ? (double)k->in[i] * s[i] : (double)od[i];
				onum *= od[i];
			}
			cr_assert(numel <= MAXN && onum <= MAXO);
			rs_fill((uint32_t)c * 31 + 5, numel, k->in[r - 1], f64, v, p32, p64);
			char extra[300], node[400], list[100] = "";
			for (int i = 0; i < r; i++)
				snprintf(list + strlen(list), sizeof list - strlen(list), "%s%g", i ? ", " : "",
					 k->scaled ? k->out[i] / 4.0 : (double)k->out[i]);
			snprintf(extra, sizeof extra, "params: [{name: q, dtype: %s, shape: [%d], data: [%s]}]\n",
				 k->scaled ? "float32" : "int64", r, list);
			snprintf(node, sizeof node,
				 "{op: Resize, inputs: [x, \"\", %s], outputs: [y], attrs: {mode: %s, "
				 "coordinate_transformation_mode: %s%s%s}}",
				 k->scaled ? "q" : "\"\", q", k->mode, k->coord, *k->nearest ? ", nearest_mode: " : "", k->nearest);
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = rf_run(node, extra, f64, r, k->in, f64 ? (void *)p64 : (void *)p32, &g, &y);
			cr_assert_eq(y->numel, onum, "case %zu: %lld outputs", c, (long long)y->numel);
			int64_t wrong = 0, first = -1, o[4] = {0}, st[4];
			double want = 0;
			for (int i = r - 1; i >= 0; i--)
				st[i] = i == r - 1 ? 1 : st[i + 1] * k->in[i + 1];
			for (int64_t e = 0; e < onum; e++) {
				int64_t ix[4][4], cnt[4], t[4] = {0};
				double w[4][4], sum = 0;
				for (int i = 0; i < r; i++) {
					double xc = rs_coord(k->coord, o[i], k->in[i], s[i], len[i]);
					cnt[i] = rs_taps(k, xc, k->in[i], ix[i], w[i]);
				}
				for (;;) { /* every combination of the axes' taps, the last axis fastest */
					double cw = 1;
					int64_t at = 0;
					for (int i = 0; i < r; i++)
						cw *= w[i][t[i]], at += ix[i][t[i]] * st[i];
					if (cw != 0)
						sum += cw * v[at];
					int i = r - 1;
					while (i >= 0 && ++t[i] == cnt[i])
						t[i--] = 0;
					if (i < 0)
						break;
				}
				if (!rf_same_nan(y, e, sum, f64, 1) && !wrong++)
					first = e, want = sum;
				for (int i = r - 1; i >= 0 && ++o[i] == od[i]; i--)
					o[i] = 0;
			}
			cr_expect_eq(wrong, 0, "%s case %zu (%s %s %s): %lld of %lld outputs differ, the first #%lld: %a, not %a",
				     f64 ? "float64" : "float32", c, k->mode, k->coord, k->nearest, (long long)wrong, (long long)onum,
				     (long long)first, first < 0 ? 0 : rt_get(y, first), want);
			exec_free(x);
			graph_free(g);
		}
}

/* ", name: [v0, v1, ...]" of n values, appended to s */
static void rs_attr(char *s, size_t cap, const char *name, const int64_t *v, int n)
{
	snprintf(s + strlen(s), cap - strlen(s), ", %s: [", name);
	for (int i = 0; i < n; i++)
		snprintf(s + strlen(s), cap - strlen(s), "%s%lld", i ? ", " : "", (long long)v[i]);
	snprintf(s + strlen(s), cap - strlen(s), "]");
}

/* LpPool p = 1 and 2: the window's |x| or pow(|x|, 2) summed in double from +0 (rows outer), then
 * pow(sum, 1 / p), as the generic loop has it */
Test(exec, lp_pool_matches_its_definition_bit_for_bit)
{
	struct lp_case {
		int64_t h, w, k[2], s[2], d[2], pad[4], p, ceil;
	} cases[] = {
		{24, 24, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 2, 0}, {24, 24, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 0},
		{9, 11, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 2, 1},  {12, 37, {3, 2}, {1, 3}, {2, 2}, {2, 1, 0, 1}, 2, 0},
		{7, 300, {2, 5}, {1, 1}, {1, 2}, {1, 4, 1, 4}, 1, 0}, {1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 2, 0},
		{5, 5, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 2, 0},   {5, 5, {5, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1, 0},
	};
	enum { NC = 6, MAXN = NC * 7 * 300 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (size_t c = 0; c < 2 * sizeof cases / sizeof *cases; c++) {
		const struct lp_case *k = &cases[c / 2];
		int f64 = c & 1;
		int64_t dims[4] = {2, NC / 2, k->h, k->w}, sp = k->h * k->w;
		rs_fill((uint32_t)c * 13 + 1, NC * sp, k->w, f64, v, p32, p64);
		char node[400] = "{op: LpPool, inputs: [x], outputs: [y], attrs: {p: 1";
		node[strlen(node) - 1] = (char)('0' + k->p);
		rs_attr(node, sizeof node, "kernel_shape", k->k, 2);
		rs_attr(node, sizeof node, "strides", k->s, 2);
		rs_attr(node, sizeof node, "dilations", k->d, 2);
		rs_attr(node, sizeof node, "pads", k->pad, 4);
		snprintf(node + strlen(node), sizeof node - strlen(node), ", ceil_mode: %d}}", (int)k->ceil);
		struct graph *g;
		const struct rtensor *y;
		struct exec *x = rf_run(node, "", f64, 4, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
		int64_t oh = y->dims[2], ow = y->dims[3], wrong = 0, first = -1;
		double want = 0;
		for (int64_t o = 0; o < NC * oh * ow; o++) {
			int64_t nc = o / (oh * ow), oy = o / ow % oh, ox = o % ow;
			double acc = 0;
			for (int64_t t = 0; t < k->k[0] * k->k[1]; t++) {
				int64_t iy = oy * k->s[0] - k->pad[0] + t / k->k[1] * k->d[0];
				int64_t ix = ox * k->s[1] - k->pad[1] + t % k->k[1] * k->d[1];
				if (iy >= 0 && iy < k->h && ix >= 0 && ix < k->w)
					acc += pow(fabs(v[nc * sp + iy * k->w + ix]), (double)k->p);
			}
			double r = pow(acc, 1 / (double)k->p);
			if (!rf_same_nan(y, o, r, f64, 1) && !wrong++)
				first = o, want = r;
		}
		cr_expect_eq(wrong, 0, "%s: %s: %lld of %lld outputs differ, the first %lld: %a, not %a",
			     f64 ? "float64" : "float32", node, (long long)wrong, (long long)(NC * oh * ow), (long long)first,
			     first < 0 ? 0 : rt_get(y, first), want);
		exec_free(x);
		graph_free(g);
	}
}

/* The costs, counted by hand: GatherND of 2 rows of a 1000 x 8 float32 table (16 bytes of indices,
 * 2 x 64 read and written, not the 32,000-byte table); GatherElements of 4 of a 4 x 50 table (32 of
 * indices, 2 x 16); ScatterND of those 2 rows into the table (its copy 2 x 32,000, 16 of indices,
 * the 64 bytes of updates read and written, and read again under reduction add, 1 FLOP each of 16);
 * NegativeLogLikelihoodLoss of 4 labels over 10 classes (32 of labels, 4 scores of 4 bytes, 4 of
 * weights each with weights, a 4-byte mean; 2 FLOPs a label); Resize of 2 x 4 x 4 to 2 x 8 x 8 (512
 * written, the 128-byte input read once, 16 of scales; linear: 4 terms of 2 FLOPs an output) and
 * nearest of 8 x 8 to 2 x 2 (16 written, the 4 elements read, 32 of sizes). */
Test(exec, gathers_scatters_nll_and_resize_cost_what_they_move)
{
	static const struct {
		const char *inputs, *params, *node;
		uint64_t flops, bytes;
	} cases[] = {
		{"[{name: t, dtype: float32, shape: [1000, 8]}]", "[{name: i, dtype: int64, shape: [2, 1], data: [5, 7]}]",
		 "{op: GatherND, inputs: [t, i], outputs: [y]}", 0, 144},
		{"[{name: t, dtype: float32, shape: [4, 50]}]", "[{name: i, dtype: int64, shape: [4, 1], data: [1, 2, 3, 4]}]",
		 "{op: GatherElements, inputs: [t, i], outputs: [y], attrs: {axis: 1}}", 0, 64},
		{"[{name: t, dtype: float32, shape: [1000, 8]}, {name: u, dtype: float32, shape: [2, 8]}]",
		 "[{name: i, dtype: int64, shape: [2, 1], data: [5, 7]}]", "{op: ScatterND, inputs: [t, i, u], outputs: [y]}", 0,
		 64144},
		{"[{name: t, dtype: float32, shape: [1000, 8]}, {name: u, dtype: float32, shape: [2, 8]}]",
		 "[{name: i, dtype: int64, shape: [2, 1], data: [5, 7]}]",
		 "{op: ScatterND, inputs: [t, i, u], outputs: [y], attrs: {reduction: add}}", 16, 64208},
		{"[{name: s, dtype: float32, shape: [4, 10]}]", "[{name: l, dtype: int64, shape: [4], data: [1, 2, 3, 4]}]",
		 "{op: NegativeLogLikelihoodLoss, inputs: [s, l], outputs: [y]}", 8, 52},
		{"[{name: s, dtype: float32, shape: [4, 10]}, {name: w, dtype: float32, shape: [10]}]",
		 "[{name: l, dtype: int64, shape: [4], data: [1, 2, 3, 4]}]",
		 "{op: NegativeLogLikelihoodLoss, inputs: [s, l, w], outputs: [y]}", 8, 68},
		{"[{name: x, dtype: float32, shape: [1, 2, 4, 4]}]", "[{name: q, dtype: float32, shape: [4], data: [1, 1, 2, 2]}]",
		 "{op: Resize, inputs: [x, \"\", q], outputs: [y]}", 0, 656},
		{"[{name: x, dtype: float32, shape: [1, 2, 4, 4]}]", "[{name: q, dtype: float32, shape: [4], data: [1, 1, 2, 2]}]",
		 "{op: Resize, inputs: [x, \"\", q], outputs: [y], attrs: {mode: linear}}", 1024, 656},
		{"[{name: x, dtype: float32, shape: [1, 1, 8, 8]}]", "[{name: q, dtype: int64, shape: [4], data: [1, 1, 2, 2]}]",
		 "{op: Resize, inputs: [x, \"\", \"\", q], outputs: [y]}", 0, 64},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		char text[768];
		snprintf(text, sizeof text, "graphdiet: 1\nopset: 18\ninputs: %s\nparams: %s\nnodes: [%s]\noutputs: [{name: y}]\n",
			 cases[k].inputs, cases[k].params, cases[k].node);
		struct exec_stats st = stats_of("moved_cost.yaml", text);
		cr_expect_eq(st.flops, cases[k].flops, "%s: %llu FLOPs", cases[k].node, (unsigned long long)st.flops);
		cr_expect_eq(st.bytes_moved, cases[k].bytes, "%s: %llu bytes moved", cases[k].node,
			     (unsigned long long)st.bytes_moved);
	}
}

/* An empty X resized into a non-empty output: the taps would read outside X (they read garbage
 * before): a clear error instead. */
Test(exec, resize_of_an_empty_input_to_a_non_empty_output_fails)
{
	struct graph *g = load_text("resize_empty.yaml", "graphdiet: 1\nopset: 18\n"
							 "inputs: [{name: x, dtype: float32, shape: [1, 1, 0, 4]}]\n"
							 "params: [{name: q, dtype: int64, shape: [4], data: [1, 1, 2, 4]}]\n"
							 "nodes: [{op: Resize, inputs: [x, \"\", \"\", q], outputs: [y]}]\n"
							 "outputs: [{name: y}]\n");
	struct exec_opts o = {.random_inputs = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_expect(!x && strstr(e.msg, "X is empty but the output is not"), "%s", e.msg);
	exec_free(x);
	graph_free(g);
}

/* #52 einsum: Einsum's fast path (einsum.c: pairs contracted as batched GEMMs) against the sum
 * over every combination of label values written here in double: attention's two products, a
 * bilinear layer, batched products, transposes, diagonals, traces, one-operand sums, outer
 * products, ellipses, implicit outputs, sizes 1 and 0, outputs in another order than the product
 * gives; float32 within 1e-5 sqrt(K) of the sum of the terms' magnitudes, float64 within 1e-12. And
 * its cost: 2 FLOPs per combination of each pair's labels. */
struct es_case {
	const char *eq, *ref; /* ref: the equation explicit, ellipses spelled out (NULL: eq is) */
	int n;
	int64_t dims[3][4];
	int nd[3];
};

/* the sum over every combination of ref's label values (the equation explicit, letters only) of
 * ops' products, in double, into y and the magnitudes' sum into mag; the terms per element */
static int64_t es_reference(const char *ref, int n, const double *const *ops, const int64_t (*dims)[4], double *y,
			    double *mag, int64_t ny)
{
	char terms[4][16] = {{0}}, labels[32] = "";
	int64_t size[128] = {0};
	int k = 0, len = 0;
	for (const char *c = ref; *c; c++) {
		if (*c == ',' || *c == '-') {
			k++;
			len = 0;
			c += *c == '-';
			continue;
		}
		terms[k][len++] = *c;
		if (!strchr(labels, *c))
			labels[strlen(labels)] = *c;
	}
	cr_assert_eq(k, n, "%s", ref);
	for (int i = 0; i < n; i++)
		for (int d = 0; terms[i][d]; d++)
			size[(int)terms[i][d]] = dims[i][d];
	int nl = (int)strlen(labels);
	int64_t total = 1, inner = 1, idx[128] = {0};
	for (int l = 0; l < nl; l++) {
		total *= size[(int)labels[l]];
		inner *= strchr(terms[n], labels[l]) ? 1 : size[(int)labels[l]];
	}
	for (int64_t e = 0; e < ny; e++)
		y[e] = mag[e] = 0;
	for (int64_t e = 0; e < total; e++) {
		int64_t rem = e;
		for (int l = nl - 1; l >= 0; l--) {
			idx[(int)labels[l]] = rem % size[(int)labels[l]];
			rem /= size[(int)labels[l]];
		}
		double v = 1;
		for (int i = 0; i < n; i++) {
			int64_t at = 0;
			for (int d = 0; terms[i][d]; d++)
				at = at * size[(int)terms[i][d]] + idx[(int)terms[i][d]];
			v *= ops[i][at];
		}
		int64_t o = 0;
		for (int d = 0; terms[n][d]; d++)
			o = o * size[(int)terms[n][d]] + idx[(int)terms[n][d]];
		y[o] += v;
		mag[o] += fabs(v);
	}
	return inner;
}

static void es_check(const struct es_case *c, int f64)
{
	static const char *names[3] = {"a", "b", "c"};
	char text[1200], ins[600] = "", list[40] = "";
	struct rtensor t[3];
	double *val[3];
	uint64_t s = 0x9e3779b97f4a7c15ull;
	size_t es = f64 ? 8 : 4;
	for (int i = 0; i < c->n; i++) {
		int64_t numel = 1;
		char shape[100] = "";
		for (int d = 0; d < c->nd[i]; d++) {
			numel *= c->dims[i][d];
			snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "", (long long)c->dims[i][d]);
		}
		snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "%s{name: %s, dtype: %s, shape: [%s]}", i ? ", " : "",
			 names[i], f64 ? "float64" : "float32", shape);
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
		val[i] = xmalloc((size_t)(numel + 1) * sizeof(double));
		t[i] = (struct rtensor){.dtype = f64 ? DT_DOUBLE : DT_FLOAT, .ndim = c->nd[i], .numel = numel,
					.data = xmalloc((size_t)(numel + 1) * es), .nbytes = (size_t)numel * es, .known = 1};
		memcpy(t[i].dims, c->dims[i], sizeof c->dims[i]);
		for (int64_t e = 0; e < numel; e++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			float v = (float)((double)(s >> 40) / (double)(1 << 24) * 2 - 1);
			val[i][e] = v;
			if (f64)
				((double *)t[i].data)[e] = v;
			else
				((float *)t[i].data)[e] = v;
		}
	}
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [%s]\nnodes:\n  - {op: Einsum, inputs: [%s], outputs: [y], attrs: {equation: \"%s\"}}\n"
		 "outputs: [{name: y}]\n",
		 ins, list, c->eq);
	struct graph *g = load_text("einsum_fast.yaml", text);
	struct exec *x3 = NULL, *x = NULL;
	for (int th = 3; th >= 1; th -= 2) { /* the same bits at 1 thread as at 3 */
		struct gd_err e = {0};
		struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = (size_t)c->n};
		pool_set_threads(th);
		*(th == 3 ? &x3 : &x) = exec_run(g, &o, NULL, &e);
		cr_assert(th == 3 ? x3 : x, "%s: %s", c->eq, e.msg);
	}
	const struct rtensor *y = exec_value(x, g->outputs[0]), *y3 = exec_value(x3, g->outputs[0]);
	cr_expect(y->nbytes == y3->nbytes && !memcmp(y->data, y3->data, y->nbytes), "%s: 1 and 3 threads differ", c->eq);
	cr_assert_eq(y->dtype, t[0].dtype, "%s", c->eq);
	double *r = xmalloc((size_t)(y->numel + 1) * sizeof *r), *mag = xmalloc((size_t)(y->numel + 1) * sizeof *mag);
	const double *ops[3] = {val[0], val[1], val[2]};
	int64_t k = es_reference(c->ref ? c->ref : c->eq, c->n, ops, c->dims, r, mag, y->numel);
	double tol = f64 ? 1e-12 : 1e-5 * sqrt((double)(k > 1 ? k : 1));
	int bad = 0;
	for (int64_t i = 0; i < y->numel && bad < 3; i++) {
		double got = f64 ? ((const double *)y->data)[i] : ((const float *)y->data)[i];
		if (!(fabs(got - r[i]) <= tol * mag[i] + (f64 ? 1e-300 : 1e-30))) {
			cr_expect_fail("%s %s: element %lld is %.9g, the sum %.9g (magnitudes %.3g)", c->eq,
				       f64 ? "float64" : "float32", (long long)i, got, r[i], mag[i]);
			bad++;
		}
	}
	exec_free(x);
	exec_free(x3);
	graph_free(g);
	for (int i = 0; i < c->n; i++) {
		free(val[i]);
		free(t[i].data);
	}
	free(r);
	free(mag);
}

Test(exec, einsum_fast_path_against_the_sum_written_here)
{
	static const struct es_case cases[] = {
		{"bhqd,bhkd->bhqk", NULL, 2, {{2, 3, 5, 4}, {2, 3, 6, 4}}, {4, 4}},
		{"bhqk,bhkd->bhqd", NULL, 2, {{2, 3, 5, 6}, {2, 3, 6, 4}}, {4, 4}},
		{"bi,oij,bj->bo", NULL, 3, {{3, 4}, {5, 4, 6}, {3, 6}}, {2, 3, 2}},
		{"bij,bjk->bik", NULL, 2, {{2, 3, 4}, {2, 4, 5}}, {3, 3}},
		{"bjk,bij->bik", NULL, 2, {{2, 4, 5}, {2, 3, 4}}, {3, 3}},
		{"ij->ji", NULL, 1, {{3, 5}}, {2}},
		{"ii->i", NULL, 1, {{4, 4}}, {2}},
		{"bii->b", NULL, 1, {{3, 4, 4}}, {3}},
		{"ii", "ii->", 1, {{5, 5}}, {2}},
		{"ij->i", NULL, 1, {{5, 7}}, {2}},
		{"ij->j", NULL, 1, {{5, 7}}, {2}},
		{"ijk->", NULL, 1, {{3, 5, 7}}, {3}},
		{"i,j->ij", NULL, 2, {{5}, {7}}, {1, 1}},
		{"ij,ij->", NULL, 2, {{4, 5}, {4, 5}}, {2, 2}},
		{"ijk,k->i", NULL, 2, {{2, 3, 4}, {4}}, {3, 1}},
		{"ij,jk", "ij,jk->ik", 2, {{3, 4}, {4, 2}}, {2, 2}},
		{"...ij,...jk->...ik", "xyij,xyjk->xyik", 2, {{2, 3, 4, 5}, {2, 3, 5, 2}}, {4, 4}},
		{"b...d,b...d->b...", "bxd,bxd->bx", 2, {{3, 4, 5}, {3, 4, 5}}, {3, 3}},
		{"a...", "ax->xa", 1, {{3, 4}}, {2}},
		{"bij,bjk->kib", NULL, 2, {{2, 3, 4}, {2, 4, 5}}, {3, 3}},
		{"bhqd,bhkd->hkbq", NULL, 2, {{2, 3, 5, 4}, {2, 3, 6, 4}}, {4, 4}},
		{"ik,kj->ij", NULL, 2, {{7, 301}, {301, 9}}, {2, 2}},
		{"bhqd,bhkd->bhqk", NULL, 2, {{1, 3, 1, 4}, {1, 3, 6, 4}}, {4, 4}},
		{"ij,jk->ik", NULL, 2, {{1, 1}, {1, 1}}, {2, 2}},
		{"ij,jk->ik", NULL, 2, {{3, 0}, {0, 4}}, {2, 2}},
		{"ij,jk->ik", NULL, 2, {{0, 3}, {3, 4}}, {2, 2}},
		{"bij,bjk->bik", NULL, 2, {{0, 3, 4}, {0, 4, 5}}, {3, 3}},
		{"ij->i", NULL, 1, {{3, 0}}, {2}},
		{"iij,jk,kl->il", NULL, 3, {{3, 3, 4}, {4, 5}, {5, 2}}, {3, 2, 2}},
		/* big enough to be cut into pieces over 3 threads */
		{"ij->i", NULL, 1, {{300, 100}}, {2}},
		{"ij->j", NULL, 1, {{300, 100}}, {2}},
		{"i,j->ij", NULL, 2, {{300}, {100}}, {1, 1}},
		{"bij,bkj->bik", NULL, 2, {{128, 32, 32}, {128, 32, 32}}, {3, 3}},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
		for (int f64 = 0; f64 < 2; f64++)
			es_check(&cases[k], f64);
}

Test(exec, einsum_costs_two_flops_per_combination_of_each_pairs_labels)
{
	/* bhqd,bhkd->bhqk over (2,3,5,4) and (2,3,6,4): 2 x 2 3 5 6 4 = 1440 FLOPs; bytes 4 x (120 +
	 * 144 + 180) = 1776. bi,oij,bj->bo over (3,4), (5,4,6), (3,6): b i o j of the first pair, 2 x
	 * 3 4 5 6 = 720, then b o j, 2 x 3 5 6 = 180: 900; bytes 4 x (12 + 120 + 18 + 15) = 660. ii->i
	 * over (4,4): 4 additions (one per diagonal element read); bytes 4 x (16 + 4). */
	static const struct {
		const char *inputs, *node;
		uint64_t flops, bytes;
	} cases[] = {
		{"[{name: a, dtype: float32, shape: [2, 3, 5, 4]}, {name: b, dtype: float32, shape: [2, 3, 6, 4]}]",
		 "{op: Einsum, inputs: [a, b], outputs: [y], attrs: {equation: \"bhqd,bhkd->bhqk\"}}", 1440, 1776},
		{"[{name: a, dtype: float32, shape: [3, 4]}, {name: b, dtype: float32, shape: [5, 4, 6]}, "
		 "{name: c, dtype: float32, shape: [3, 6]}]",
		 "{op: Einsum, inputs: [a, b, c], outputs: [y], attrs: {equation: \"bi,oij,bj->bo\"}}", 900, 660},
		{"[{name: a, dtype: float32, shape: [4, 4]}]",
		 "{op: Einsum, inputs: [a], outputs: [y], attrs: {equation: \"ii->i\"}}", 4, 80},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		char text[600];
		snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\ninputs: %s\nnodes: [%s]\noutputs: [{name: y}]\n",
			 cases[k].inputs, cases[k].node);
		struct exec_stats st = stats_of("einsum_cost.yaml", text);
		cr_expect_eq(st.flops, cases[k].flops, "%s: %llu FLOPs", cases[k].node, (unsigned long long)st.flops);
		cr_expect_eq(st.bytes_moved, cases[k].bytes, "%s: %llu bytes", cases[k].node,
			     (unsigned long long)st.bytes_moved);
	}
}

/* #52 norms: InstanceNormalization, GroupNormalization, MeanVarianceNormalization,
 * LpNormalization and LRN on float32 and float64 (their typed loops, norm_stat.c) against the
 * walks written here as norm.c's per-element kernels compute them: statistics in double, each sum
 * serial from 0 in index order, the result rounded once to the dtype; bit for bit (a NaN for a
 * NaN), over rf_value's specials (NaN, +-inf, +-0, subnormals, huge), at 1 and 3 threads, at sizes
 * that leave remainders of the kernels' eight chains and 256-wide blocks, and of 0 and 1 elements. */

/* a plane's (n elements from v, step 1) mean and population variance about it, serially */
static double nm_moments(const double *v, int64_t n, double *var)
{
	double s = 0, q = 0;
	for (int64_t j = 0; j < n; j++)
		s += v[j];
	double m = s / (double)n;
	for (int64_t j = 0; j < n; j++)
		q += (v[j] - m) * (v[j] - m);
	*var = q / (double)n;
	return m;
}

/* the reference of one op over v (shape dims, nd axes) into r; attributes as the cases give them */
struct nm_case {
	const char *op;
	int nd;
	int64_t dims[4];
	int64_t k;         /* GroupNorm: groups; LpNorm: p; LRN: size */
	int64_t axis;      /* LpNorm's axis; LRN's beta and bias: nm_lrn[axis] */
	int per_channel;   /* GroupNorm's scale: per channel (C), else per group */
	const char *axes;  /* MVN's axes ("" default), as a YAML list */
	uint8_t red[4];    /* MVN: the reduced axes */
};

/* LRN's beta and bias: float32 results by the roots of beta 0.75, 0.5 and 1 (bias 0: d = 0 in
 * rows of zeros), the others by pow */
static const double nm_lrn[][2] = {{0.6, 1.5}, {0.75, 1.5}, {0.75, 0}, {0.5, 2}, {1, 1.5}};

static void nm_reference(const struct nm_case *c, const double *v, const double *sc, const double *bi, double *r)
{
	int64_t n = 1, N = c->dims[0], C = c->nd > 1 ? c->dims[1] : 1;
	for (int i = 0; i < c->nd; i++)
		n *= c->dims[i];
	int64_t inner = N * C != 0 ? n / (N * C) : 0;
	double eps = (double)1e-3f, alpha = (double)2e-2f, beta = (double)(float)nm_lrn[c->axis][0], bias = nm_lrn[c->axis][1];
	if (!strcmp(c->op, "InstanceNormalization") || !strcmp(c->op, "GroupNormalization")) {
		int64_t G = c->op[0] == 'I' ? C : c->k, len = C / G * inner;
		for (int64_t p = 0; len && p < N * G; p++) {
			double var, m = nm_moments(v + p * len, len, &var), inv = 1 / sqrt(var + eps);
			for (int64_t j = 0; j < len; j++) {
				int64_t e = c->op[0] == 'I' ? p % C : c->per_channel ? p % G * (C / G) + j / inner : p % G;
				r[p * len + j] = (v[p * len + j] - m) * inv * sc[e] + bi[e];
			}
		}
	} else if (!strcmp(c->op, "LpNormalization")) {
		int64_t len = c->dims[c->axis], in = 1;
		for (int i = (int)c->axis + 1; i < c->nd; i++)
			in *= c->dims[i];
		for (int64_t o = 0; len && o < n / (len * in); o++)
			for (int64_t t = 0; t < in; t++) {
				double z = 0;
				for (int64_t j = 0; j < len; j++)
					z += c->k == 1 ? fabs(v[(o * len + j) * in + t]) : v[(o * len + j) * in + t] * v[(o * len + j) * in + t];
				z = c->k == 1 ? z : sqrt(z);
				for (int64_t j = 0; j < len; j++)
					r[(o * len + j) * in + t] = v[(o * len + j) * in + t] / z;
			}
	} else if (!strcmp(c->op, "LRN")) {
		for (int64_t i = 0; i < n; i++) {
			int64_t ch = i / inner % C, at = i - ch * inner;
			double s = 0;
			for (int64_t k = ch - (c->k - 1) / 2; k <= ch + c->k / 2; k++)
				if (k >= 0 && k < C)
					s += v[at + k * inner] * v[at + k * inner];
			r[i] = v[i] / pow(bias + alpha / (double)c->k * s, beta);
		}
	} else { /* MVN: each sum over the elements whose kept indices match, in index order */
		int64_t cnt = 1, idx[4], jdx[4];
		for (int d = 0; d < c->nd; d++)
			cnt *= c->red[d] ? c->dims[d] : 1;
		for (int64_t i = 0; i < n; i++) {
			double s = 0, q = 0;
			for (int d = c->nd - 1, t = (int)i; d >= 0; d--)
				idx[d] = t % c->dims[d], t /= (int)c->dims[d];
			for (int64_t k = 0; k < n; k++) {
				int match = 1;
				for (int d = c->nd - 1, t = (int)k; d >= 0; d--)
					jdx[d] = t % c->dims[d], t /= (int)c->dims[d];
				for (int d = 0; d < c->nd; d++)
					match &= c->red[d] || jdx[d] == idx[d];
				if (match)
					s += v[k], q += v[k] * v[k];
			}
			double m = s / (double)cnt, var = q / (double)cnt - m * m;
			r[i] = (v[i] - m) / (sqrt(var > 0 ? var : 0) + 1e-9);
		}
	}
}

Test(exec, norms_match_the_serial_walks_bit_for_bit)
{
	static const struct nm_case cases[] = {
		{"InstanceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "", {0}},
		{"InstanceNormalization", 4, {3, 5, 4, 9}, 0, 0, 0, "", {0}},
		{"InstanceNormalization", 3, {2, 9, 1}, 0, 0, 0, "", {0}},
		{"InstanceNormalization", 3, {1, 17, 33}, 0, 0, 0, "", {0}},
		{"InstanceNormalization", 3, {0, 4, 5}, 0, 0, 0, "", {0}},
		{"GroupNormalization", 4, {2, 6, 5, 7}, 3, 0, 0, "", {0}},
		{"GroupNormalization", 4, {2, 6, 5, 7}, 3, 0, 1, "", {0}},
		{"GroupNormalization", 4, {4, 12, 3, 3}, 4, 0, 1, "", {0}},
		{"GroupNormalization", 3, {3, 6, 1}, 6, 0, 0, "", {0}},
		{"LpNormalization", 2, {9, 37}, 2, 1, 0, "", {0}},
		{"LpNormalization", 2, {17, 5}, 1, 1, 0, "", {0}},
		{"LpNormalization", 3, {3, 11, 2}, 2, 1, 0, "", {0}},
		{"LpNormalization", 3, {2, 5, 300}, 1, 1, 0, "", {0}},
		{"LpNormalization", 3, {2, 7, 259}, 2, 0, 0, "", {0}},
		{"LpNormalization", 2, {1, 1}, 2, 1, 0, "", {0}},
		{"LRN", 4, {2, 7, 5, 61}, 3, 0, 0, "", {0}},
		{"LRN", 4, {2, 7, 5, 61}, 4, 1, 0, "", {0}},
		{"LRN", 3, {1, 3, 300}, 1, 2, 0, "", {0}},
		{"LRN", 3, {2, 12, 1}, 9, 3, 0, "", {0}},
		{"LRN", 4, {2, 5, 3, 97}, 5, 4, 0, "", {0}},
		{"LRN", 4, {2, 5, 3, 97}, 5, 1, 0, "", {0}},
		{"LRN", 4, {1, 6, 16, 17}, 2, 2, 0, "", {0}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "", {1, 0, 1, 1}},
		{"MeanVarianceNormalization", 4, {3, 10, 4, 5}, 0, 0, 0, "", {1, 0, 1, 1}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "[2, 3]", {0, 0, 1, 1}},
		{"MeanVarianceNormalization", 4, {3, 9, 2, 5}, 0, 0, 0, "[-1]", {0, 0, 0, 1}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "[0, 1]", {1, 1, 0, 0}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "[1]", {0, 1, 0, 0}},
		{"MeanVarianceNormalization", 4, {2, 3, 5, 7}, 0, 0, 0, "[0, 2]", {1, 0, 1, 0}},
		{"MeanVarianceNormalization", 4, {1, 4, 1, 6}, 0, 0, 0, "[0, 1, 3]", {1, 1, 0, 1}},
		{"MeanVarianceNormalization", 4, {2, 3, 4, 5}, 0, 0, 0, "[0, 1, 2, 3]", {1, 1, 1, 1}},
		{"MeanVarianceNormalization", 4, {1, 1, 1, 1}, 0, 0, 0, "", {1, 0, 1, 1}},
	};
	enum { MAXN = 2 * 7 * 5 * 61 };
	static double v[MAXN], p64[MAXN], r[MAXN];
	static float p32[MAXN];
	for (int th = 1; th <= 3; th += 2) {
		pool_set_threads(th);
		for (int f64 = 0; f64 < 2; f64++)
			for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
				const struct nm_case *c = &cases[ci];
				int64_t n = 1, C = c->dims[1], ns = c->op[0] == 'G' && !c->per_channel ? c->k : c->op[0] == 'G' || c->op[0] == 'I' ? C : 0;
				for (int i = 0; i < c->nd; i++)
					n *= c->dims[i];
				uint32_t s = (uint32_t)ci * 31 + 7;
				for (int64_t i = 0; i < n; i++) {
					p64[i] = rf_value(&s, i, c->dims[c->nd - 1] * (ci % 2 ? c->dims[c->nd - 2] : 1));
					if (fabs(p64[i]) > 1e-3 && fabs(p64[i]) < 1e3) /* every mantissa bit used: sums inexact */
						p64[i] *= 1 + 0.01 * sin((double)i);
					p32[i] = (float)p64[i];
					v[i] = f64 ? p64[i] : (double)p32[i];
				}
				double sc[32], bi[32];
				char extra[1000] = "", list[2][400] = {"", ""}, node[400];
				for (int64_t e = 0; e < ns; e++) {
					sc[e] = 0.75 + 0.5 * (double)e, bi[e] = e % 3 ? -0.25 * (double)e : 0.0;
					if (!f64)
						sc[e] = (float)sc[e], bi[e] = (float)bi[e];
					snprintf(list[0] + strlen(list[0]), 400 - strlen(list[0]), "%s%.17g", e ? ", " : "", sc[e]);
					snprintf(list[1] + strlen(list[1]), 400 - strlen(list[1]), "%s%.17g", e ? ", " : "", bi[e]);
				}
				if (c->op[0] == 'I' || c->op[0] == 'G') {
					snprintf(extra, sizeof extra,
						 "params: [{name: s, dtype: %s, shape: [%lld], data: [%s]}, {name: b, dtype: %s, shape: [%lld], data: [%s]}]\n",
						 f64 ? "float64" : "float32", (long long)ns, list[0], f64 ? "float64" : "float32",
						 (long long)ns, list[1]);
					snprintf(node, sizeof node,
						 "{op: %s, inputs: [x, s, b], outputs: [y], attrs: {epsilon: 0.001%s%.0lld}}", c->op,
						 c->op[0] == 'G' ? ", num_groups: " : "", c->op[0] == 'G' ? (long long)c->k : 0LL);
				} else if (c->op[0] == 'L' && c->op[1] == 'p')
					snprintf(node, sizeof node, "{op: LpNormalization, inputs: [x], outputs: [y], attrs: {p: %lld, axis: %lld}}",
						 (long long)c->k, (long long)c->axis);
				else if (c->op[0] == 'L')
					snprintf(node, sizeof node,
						 "{op: LRN, inputs: [x], outputs: [y], attrs: {size: %lld, alpha: 0.02, beta: %g, bias: %g}}",
						 (long long)c->k, nm_lrn[c->axis][0], nm_lrn[c->axis][1]);
				else
					snprintf(node, sizeof node, "{op: MeanVarianceNormalization, inputs: [x], outputs: [y]%s%s%s}",
						 *c->axes ? ", attrs: {axes: " : "", c->axes, *c->axes ? "}" : "");
				struct graph *g;
				const struct rtensor *y;
				struct exec *x = rf_run(node, extra, f64, c->nd, c->dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
				nm_reference(c, v, sc, bi, r);
				int64_t wrong = 0, first = -1;
				for (int64_t i = 0; i < n; i++)
					if (!rf_same_nan(y, i, r[i], f64, 1) && !wrong++)
						first = i;
				cr_expect_eq(wrong, 0, "%s case %zu %s, %d threads: %lld of %lld differ, the first #%lld: %a, not %a",
					     c->op, ci, f64 ? "float64" : "float32", th, (long long)wrong, (long long)n, (long long)first,
					     first < 0 ? 0 : rt_get(y, first), first < 0 ? 0 : r[first]);
				exec_free(x);
				graph_free(g);
			}
	}
	pool_set_threads(1);
}

/* #52 pool: MaxPool's typed runs (pool.c: AVX-512 at strides 1 and 2, the compiled loop else),
 * ArgMax/ArgMin's typed lanes (select.c) and the tiled Transpose of large planes (layout.c)
 * against definitions written here, bit for bit (values, NaN payloads, signed zeros) and index
 * for index, float32 and float64, over sizes around the vector widths and tiles. */

/* graph text `yaml` run on x (dt, shape dims, data p); its graph in *g */
static struct exec *pl_run(const char *yaml, int dt, int nd, const int64_t *dims, void *p, struct graph **g)
{
	struct rtensor t = {.dtype = dt, .ndim = nd, .numel = 1, .data = p, .known = 1};
	for (int i = 0; i < nd; i++)
		t.numel *= t.dims[i] = dims[i];
	t.nbytes = (size_t)t.numel * dtype_size(dt);
	*g = load_text("pool.yaml", yaml);
	const char *name = "x";
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = &t, .input_names = &name, .n_inputs = 1};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s: %s", yaml, e.msg);
	return x;
}

/* MaxPool by its definition: the window's elements inside the image in row-major window order,
 * the first taken, then each strictly greater one (a NaN wins only as the first); its index
 * flattened over the whole input */
static double pl_max(const double *v, int64_t nc, int64_t h, int64_t w, const int64_t *k, const int64_t *st,
		     const int64_t *d, const int64_t *pad, int64_t oy, int64_t ox, int64_t *arg)
{
	double m = 0;
	*arg = -1;
	for (int64_t i = 0; i < k[0]; i++)
		for (int64_t j = 0; j < k[1]; j++) {
			int64_t iy = oy * st[0] - pad[0] + i * d[0], ix = ox * st[1] - pad[1] + j * d[1];
			if (iy < 0 || iy >= h || ix < 0 || ix >= w)
				continue;
			double x = v[(nc * h + iy) * w + ix];
			if (*arg < 0 || x > m) {
				m = x;
				*arg = (nc * h + iy) * w + ix;
			}
		}
	return m;
}

/* data with many ties: small integers and zeros of both signs, infinities and NaNs of distinct
 * payloads */
static double pl_value(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	uint32_t k = *s >> 8;
	if (k % 13 == 0) {
		uint64_t b = 0x7ff8000000000000ull | (k % 3 + 1) | (uint64_t)(k & 16) << 59;
		double d;
		memcpy(&d, &b, 8);
		return d;
	}
	static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, 1e-40, -1e-310};
	if (k % 7 == 0)
		return special[k / 7 % 6];
	return (double)(k % 5) - 2;
}

/* p32 and v (what the kernel reads, in double) from p64's n values */
static void pl_widen(int f64, int64_t n, const double *p64, float *p32, double *v)
{
	for (int64_t i = 0; i < n; i++) {
		p32[i] = (float)p64[i];
		v[i] = f64 ? p64[i] : (double)p32[i];
	}
}

Test(exec, pool_max_pool_matches_its_definition_bit_for_bit)
{
	struct mp_case {
		int64_t h, w, k[2], s[2], d[2], pad[4];
		int ceil;
	} cases[] = {
		{48, 48, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0}, /* ResNet's stem */
		{9, 41, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1},
		{11, 70, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0},
		{7, 37, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0},
		{6, 600, {2, 5}, {1, 2}, {1, 2}, {1, 4, 0, 4}, 0}, /* more than a run of 256 */
		{12, 37, {3, 2}, {1, 3}, {2, 2}, {2, 1, 0, 1}, 0}, /* stride 3: the compiled loop */
		{5, 17, {5, 3}, {1, 2}, {1, 1}, {0, 0, 0, 0}, 1},
		{1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0},
		{2, 2, {2, 2}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1},
	};
	enum { MAXN = 2 * 3 * 6 * 600 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++, pool_set_threads(f64 == 1 ? 3 : 1)) /* float64 cut over 3 threads */
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const struct mp_case *k = &cases[c];
			cr_assert(6 * k->h * k->w <= MAXN);
			int64_t dims[4] = {2, 3, k->h, k->w}, sp = k->h * k->w;
			uint32_t s = (uint32_t)c * 31 + 5;
			for (int64_t i = 0; i < 6 * sp; i++)
				p64[i] = c & 1 ? rf_value(&s, i, k->w) : pl_value(&s);
			pl_widen(f64, 6 * sp, p64, p32, v);
			char text[800];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [2, 3, %lld, %lld]}]\nnodes:\n"
				 "  - {op: MaxPool, inputs: [x], outputs: [y, i], attrs: {kernel_shape: [%lld, %lld], strides: [%lld, %lld], "
				 "dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld], ceil_mode: %d}}\noutputs: [{name: y}, {name: i}]\n",
				 f64 ? "float64" : "float32", (long long)k->h, (long long)k->w, (long long)k->k[0], (long long)k->k[1],
				 (long long)k->s[0], (long long)k->s[1], (long long)k->d[0], (long long)k->d[1], (long long)k->pad[0],
				 (long long)k->pad[1], (long long)k->pad[2], (long long)k->pad[3], k->ceil);
			struct graph *g;
			struct exec *x = pl_run(text, f64 ? DT_DOUBLE : DT_FLOAT, 4, dims, f64 ? (void *)p64 : (void *)p32, &g);
			const struct rtensor *y = exec_value(x, g->outputs[0]), *ix = exec_value(x, g->outputs[1]);
			cr_assert(ix->dtype == DT_INT64 && ix->numel == y->numel);
			int64_t oh = y->dims[2], ow = y->dims[3], wrong = 0, first = -1;
			for (int64_t nc = 0; nc < 6; nc++)
				for (int64_t oy = 0; oy < oh; oy++)
					for (int64_t ox = 0; ox < ow; ox++) {
						int64_t arg, o = (nc * oh + oy) * ow + ox;
						double r = pl_max(v, nc, k->h, k->w, k->k, k->s, k->d, k->pad, oy, ox, &arg);
						if ((!rf_same_nan(y, o, r, f64, 0) || ((const int64_t *)ix->data)[o] != arg) && !wrong++)
							first = o;
					}
			cr_expect_eq(wrong, 0, "%s case %zu: %lld of %lldx%lld outputs differ, the first %lld", f64 ? "float64" : "float32",
				     c, (long long)wrong, (long long)oh, (long long)ow, (long long)first);
			exec_free(x);
			graph_free(g);
		}
}

/* ArgMax (max 1) or ArgMin's answer for the lane of n elements step apart at v, by the walk the
 * operator documents: NaN larger than every number, the first of equal extremes (the last with
 * select_last_index), NaNs equal among themselves */
static int64_t pl_arg(const double *v, int64_t n, int64_t step, int max, int last)
{
	int64_t best = 0;
	for (int64_t r = 1; r < n; r++) {
		double a = v[r * step], b = v[best * step];
		int gt = isnan(a) ? !isnan(b) : !isnan(b) && a > b, lt = isnan(b) ? !isnan(a) : !isnan(a) && a < b;
		int same = a == b || (isnan(a) && isnan(b));
		if ((max ? gt : lt) || (last && same))
			best = r;
	}
	return best;
}

Test(exec, pool_argmax_argmin_match_the_walk)
{
	/* (outer, len, inner) lanes: the last axis (inner 1) around the vector widths and the 64-wide
	 * search blocks; other axes around ARG_RUN's 256 lanes */
	static const int64_t shapes[][3] = {{3, 1, 1},	 {4, 2, 1},   {5, 15, 1},  {9, 16, 1},   {7, 17, 1},  {3, 63, 1},
					    {3, 64, 1},	 {3, 65, 1},  {4, 130, 1}, {2, 1000, 1}, {0, 5, 1},   {1, 1, 7},
					    {2, 5, 15},	 {1, 33, 16}, {2, 3, 17},  {1, 4, 255},  {2, 2, 256}, {1, 3, 257},
					    {3, 6, 300}, {4, 1, 20}};
	enum { MAXN = 6000 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++, pool_set_threads(f64 == 1 ? 3 : 1)) /* float64 cut over 3 threads */
		for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
			for (int how = 0; how < 8; how++) { /* ArgMin/ArgMax x keepdims x select_last_index */
				int max = how & 1, keep = how >> 1 & 1, last = how >> 2;
				int64_t outer = shapes[c][0], len = shapes[c][1], inner = shapes[c][2], n = outer * len * inner;
				cr_assert(n <= MAXN);
				uint32_t s = (uint32_t)(c * 8 + (size_t)how) * 7 + 1;
				for (int64_t i = 0; i < n; i++) {
					int64_t lane = i / (len * inner) * inner + i % inner;
					p64[i] = how & 2 ? rf_value(&s, i, len * inner) : pl_value(&s);
					if (lane % 5 == 2) /* lanes all NaN, of two payloads */
						p64[i] = i & 1 ? NAN : -NAN;
					if (lane % 5 == 4 && i / inner % len == 0) /* a NaN first */
						p64[i] = NAN;
				}
				pl_widen(f64, n, p64, p32, v);
				char text[600];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld%s%.0lld]}]\nnodes:\n"
					 "  - {op: %s, inputs: [x], outputs: [y], attrs: {axis: %d, keepdims: %d, select_last_index: %d}}\n"
					 "outputs: [{name: y}]\n",
					 f64 ? "float64" : "float32", (long long)outer, (long long)len, inner > 1 ? ", " : "",
					 (long long)(inner > 1 ? inner : 0), max ? "ArgMax" : "ArgMin", inner > 1 ? 1 : -1, keep, last);
				int64_t dims[3] = {outer, len, inner};
				int rank = inner > 1 ? 3 : 2; /* a contiguous lane: the last axis, -1 */
				struct graph *g;
				struct exec *x = pl_run(text, f64 ? DT_DOUBLE : DT_FLOAT, rank, dims, f64 ? (void *)p64 : (void *)p32, &g);
				const struct rtensor *y = exec_value(x, g->outputs[0]);
				cr_assert(y->dtype == DT_INT64 && y->numel == outer * inner && y->ndim == rank - !keep);
				int64_t wrong = 0, first = -1;
				for (int64_t o = 0; o < outer; o++)
					for (int64_t i = 0; i < inner; i++)
						if (((const int64_t *)y->data)[o * inner + i] !=
							    pl_arg(v + o * len * inner + i, len, inner, max, last) &&
						    !wrong++)
							first = o * inner + i;
				cr_expect_eq(wrong, 0, "%s %s (%lld, %lld, %lld) keepdims %d select_last_index %d: %lld lanes differ, the first %lld",
					     max ? "ArgMax" : "ArgMin", f64 ? "float64" : "float32", (long long)outer, (long long)len,
					     (long long)inner, keep, last, (long long)wrong, (long long)first);
				exec_free(x);
				graph_free(g);
			}
}

Test(exec, pool_large_transposes_move_every_bit)
{
	/* planes of 256 or more both ways (the tiled path; 255 the banded one), tiles cut at the
	 * edges, batches of planes, 4- and 8-byte elements */
	static const struct {
		int64_t dims[3];
		const char *perm;
	} cases[] = {
		{{256, 256, 0}, "1, 0"},    {{300, 257, 0}, "1, 0"},	{{257, 1000, 0}, "1, 0"}, {{255, 700, 0}, "1, 0"},
		{{1030, 513, 0}, "1, 0"},   {{2, 260, 300}, "0, 2, 1"}, {{3, 256, 256}, "0, 2, 1"}, {{300, 2, 260}, "2, 1, 0"},
	};
	for (int f64 = 0; f64 < 2; f64++, pool_set_threads(f64 == 1 ? 3 : 1)) /* float64 cut over 3 threads */
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const int64_t *d = cases[c].dims;
			int r = d[2] ? 3 : 2;
			int64_t n = d[0] * d[1] * (r == 3 ? d[2] : 1);
			size_t es = f64 ? 8 : 4;
			uint8_t *p = xmalloc((size_t)n * es);
			uint32_t s = (uint32_t)c * 3 + 11;
			for (int64_t i = 0; i < n * (int64_t)es; i += 4) { /* any bits: NaNs of every payload */
				s = s * 1664525u + 1013904223u;
				memcpy(p + i, &s, 4);
			}
			char text[600];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld%s%.0lld]}]\nnodes:\n"
				 "  - {op: Transpose, inputs: [x], outputs: [y], attrs: {perm: [%s]}}\noutputs: [{name: y}]\n",
				 f64 ? "float64" : "float32", (long long)d[0], (long long)d[1], r == 3 ? ", " : "", (long long)d[2],
				 cases[c].perm);
			struct graph *g;
			struct exec *x = pl_run(text, f64 ? DT_DOUBLE : DT_FLOAT, r, d, p, &g);
			const struct rtensor *y = exec_value(x, g->outputs[0]);
			int perm[3];
			for (int i = 0; i < r; i++)
				perm[i] = cases[c].perm[3 * i] - '0';
			int64_t st[3] = {r == 3 ? d[1] * d[2] : d[1], r == 3 ? d[2] : 1, 1}, wrong = 0, first = -1;
			int64_t od[3] = {d[perm[0]], d[perm[1]], r == 3 ? d[perm[2]] : 1};
			for (int64_t i = 0; i < od[0]; i++)
				for (int64_t j = 0; j < od[1]; j++)
					for (int64_t k = 0; k < od[2]; k++) {
						int64_t at[3] = {0, 0, 0}, o = (i * od[1] + j) * od[2] + k;
						at[perm[0]] = i, at[perm[1]] = j;
						if (r == 3)
							at[perm[2]] = k;
						int64_t src = at[0] * st[0] + at[1] * st[1] + (r == 3 ? at[2] : 0);
						if (memcmp((const uint8_t *)y->data + o * (int64_t)es, p + src * (int64_t)es, es) && !wrong++)
							first = o;
					}
			cr_expect_eq(wrong, 0, "%s case %zu: %lld elements differ, the first %lld", f64 ? "float64" : "float32", c,
				     (long long)wrong, (long long)first);
			exec_free(x);
			graph_free(g);
			free(p);
		}
}

/* #52 quant: the integer products (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv) in
 * float64 GEMMs, QuantizeLinear/DequantizeLinear/DynamicQuantizeLinear as typed loops, and the
 * CPU backend's float16/bfloat16 widening in one typed loop per tensor: each against naive loops
 * written here, bit for bit. K reaches 4099 and 4608 with sums past 2^24, which a float32 sum
 * would round. */
struct qt_in {
	const char *name;
	int dt, nd;
	int64_t dims[4];
	void *data;
};

static uint64_t qt_seed = 12345;

static uint64_t qt_rand(void)
{
	qt_seed = qt_seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return qt_seed >> 17;
}

static int64_t qt_numel(const struct qt_in *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->nd; i++)
		n *= t->dims[i];
	return n;
}

/* a tensor of random integers of dt (uint8, int8, uint16, int16, int32: the low bits) */
static void *qt_ints(int dt, int64_t n)
{
	size_t es = dtype_size(dt);
	uint8_t *p = xmalloc((size_t)n * es + 1);
	for (int64_t i = 0; i < n; i++) {
		uint64_t r = qt_rand();
		memcpy(p + i * (int64_t)es, &r, es);
	}
	return p;
}

static int64_t qt_get(int dt, const void *p, int64_t i)
{
	switch (dt) {
	case DT_UINT8: return ((const uint8_t *)p)[i];
	case DT_INT8: return ((const int8_t *)p)[i];
	case DT_UINT16: return ((const uint16_t *)p)[i];
	case DT_INT16: return ((const int16_t *)p)[i];
	default: return ((const int32_t *)p)[i];
	}
}

/* big operands (uint8 at least 192, int8 64 to 127): sums of products that do not cancel */
static void qt_big(int dt, void *p, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		((uint8_t *)p)[i] = dt == DT_UINT8 ? ((uint8_t *)p)[i] | 0xc0 : (((uint8_t *)p)[i] & 0x3f) | 0x40;
}

/* runs one node (its YAML) on the inputs; the executor and graph in *x, *g; output k's tensor */
static const struct rtensor *qt_run(struct graph **g, struct exec **x, const char *node, const struct qt_in *in, int n_in,
				    const char *outs)
{
	char text[4096];
	int at = snprintf(text, sizeof text, "graphdiet: 1\nopset: 19\ninputs: [");
	struct rtensor t[12];
	const char *names[12];
	for (int k = 0; k < n_in; k++) {
		char shape[100] = "";
		for (int i = 0, o = 0; i < in[k].nd; i++)
			o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%lld", i ? ", " : "", (long long)in[k].dims[i]);
		at += snprintf(text + at, sizeof text - (size_t)at, "%s{name: %s, dtype: %s, shape: [%s]}", k ? ", " : "",
			       in[k].name, dtype_name(in[k].dt), shape);
		int64_t n = qt_numel(&in[k]);
		t[k] = (struct rtensor){.dtype = in[k].dt, .ndim = in[k].nd, .numel = n, .data = in[k].data,
					.nbytes = (size_t)n * dtype_size(in[k].dt), .known = 1};
		memcpy(t[k].dims, in[k].dims, sizeof in[k].dims);
		names[k] = in[k].name;
	}
	snprintf(text + at, sizeof text - (size_t)at, "]\nnodes:\n  - %s\noutputs: [%s]\n", node, outs ? outs : "{name: y}");
	*g = load_text("quant.yaml", text);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = n_in};
	*x = exec_run(*g, &o, NULL, &e);
	cr_assert(*x, "%s: %s", node, e.msg);
	return exec_value(*x, (*g)->outputs[0]);
}

/* the requantisation of an exact sum, as onnxruntime's float32 arithmetic does it */
static int64_t qt_requant(int64_t acc, float mult, float zy, double lo, double hi)
{
	float v = nearbyintf((float)acc * mult) + zy;
	if (v != v)
		return 0;
	return (int64_t)(v < lo ? lo : v > hi ? hi : v);
}

static void qt_range(int dt, double *lo, double *hi)
{
	*lo = dt == DT_UINT8 || dt == DT_UINT16 ? 0 : dt == DT_INT8 ? -128 : -32768;
	*hi = dt == DT_UINT8 ? 255 : dt == DT_INT8 ? 127 : dt == DT_UINT16 ? 65535 : 32767;
}

/* MatMulInteger and QLinearMatMul: A (2, 1, M, K) by B (3, K, N) (Y (2, 3, M, N)), and a 1-D A, over
 * uint8 and int8, zero points none, scalar or per row/column; M, K, N odd, and K 4099 */
Test(exec, quant_matmul_integer_matches_naive_loops)
{
	static const int64_t shapes[][3] = {{5, 7, 3}, {1, 1, 1}, {3, 4099, 9}, {17, 33, 65}, {9, 1, 11}};
	for (int s = 0; s < 5; s++)
		for (int dt = 0; dt < 2; dt++)
			for (int zpk = 0; zpk < 3; zpk++)
				for (int one_d = 0; one_d < 2; one_d++)
					for (int ql = 0; ql < 2; ql++) {
						int64_t M = one_d ? 1 : shapes[s][0], K = shapes[s][1], N = shapes[s][2];
						int adt = dt ? DT_INT8 : DT_UINT8, bdt = dt ? DT_UINT8 : DT_INT8, ydt = dt ? DT_INT8 : DT_UINT8;
						int64_t na = one_d ? 1 : 2, nbm = one_d ? 1 : 3;
						if (ql && !zpk)
							continue; /* QLinearMatMul's zero points are inputs */
						int64_t nza = zpk == 2 && !one_d ? M : 1, nzb = zpk == 2 ? N : 1;
						struct qt_in a = {"a", adt, one_d ? 1 : 4, {0}, qt_ints(adt, na * M * K)};
						if (one_d)
							a.dims[0] = K;
						else
							a.dims[0] = 2, a.dims[1] = 1, a.dims[2] = M, a.dims[3] = K;
						struct qt_in b = {"b", bdt, one_d ? 2 : 3, {0}, qt_ints(bdt, nbm * K * N)};
						if (one_d)
							b.dims[0] = K, b.dims[1] = N;
						else
							b.dims[0] = 3, b.dims[1] = K, b.dims[2] = N;
						if (K == 4099)
							qt_big(adt, a.data, na * M * K), qt_big(bdt, b.data, nbm * K * N);
						struct qt_in za = {"za", adt, zpk == 2 && !one_d, {nza}, qt_ints(adt, nza)};
						struct qt_in zb = {"zb", bdt, zpk == 2, {nzb}, qt_ints(bdt, nzb)};
						float sa = 0.0173f, sb = 0.0291f, sy = ql ? 0.37f * (float)K / 64 : 1;
						if (K == 1) /* the multiplier 1/2: an odd sum is a tie, rounded to even */
							sa = 0.5f, sb = 0.5f, sy = 0.5f;
						struct qt_in fa = {"sa", DT_FLOAT, 0, {0}, &sa}, fb = {"sb", DT_FLOAT, 0, {0}, &sb};
						struct qt_in fy = {"sy", DT_FLOAT, 0, {0}, &sy};
						struct qt_in zy = {"zy", ydt, 0, {0}, qt_ints(ydt, 1)};
						struct qt_in in[8];
						int n_in;
						const char *node;
						if (ql) {
							struct qt_in q[8] = {a, fa, za, b, fb, zb, fy, zy};
							memcpy(in, q, sizeof q);
							n_in = 8;
							node = "{op: QLinearMatMul, inputs: [a, sa, za, b, sb, zb, sy, zy], outputs: [y]}";
						} else {
							struct qt_in q[4] = {a, b, za, zb};
							memcpy(in, q, sizeof q);
							n_in = zpk ? 4 : 2;
							node = zpk ? "{op: MatMulInteger, inputs: [a, b, za, zb], outputs: [y]}"
								   : "{op: MatMulInteger, inputs: [a, b], outputs: [y]}";
						}
						struct graph *g;
						struct exec *x;
						const struct rtensor *y = qt_run(&g, &x, node, in, n_in, NULL);
						cr_assert_eq(y->numel, (one_d ? 1 : 6) * M * N);
						cr_assert_eq(y->dtype, ql ? ydt : DT_INT32);
						double lo, hi;
						qt_range(ydt, &lo, &hi);
						float mult = sa * sb / sy, fzy = (float)qt_get(ydt, zy.data, 0);
						int64_t wrong = 0, big = 0;
						for (int64_t t = 0; t < (one_d ? 1 : 6); t++)
							for (int64_t i = 0; i < M; i++)
								for (int64_t j = 0; j < N; j++) {
									int64_t ta = one_d ? 0 : t / 3, tb = one_d ? 0 : t % 3, acc = 0;
									int64_t zai = zpk ? qt_get(adt, za.data, nza > 1 ? i : 0) : 0;
									int64_t zbj = zpk ? qt_get(bdt, zb.data, nzb > 1 ? j : 0) : 0;
									for (int64_t l = 0; l < K; l++)
										acc += (qt_get(adt, a.data, (ta * M + i) * K + l) - zai) *
										       (qt_get(bdt, b.data, (tb * K + l) * N + j) - zbj);
									big += acc >= (1 << 24) || acc <= -(1 << 24);
									int64_t e = (t * M + i) * N + j, got;
									int64_t want = ql ? qt_requant(acc, mult, fzy, lo, hi) : (int32_t)acc;
									got = ql ? qt_get(ydt, y->data, e) : ((const int32_t *)y->data)[e];
									wrong += got != want;
								}
						cr_expect_eq(wrong, 0, "%s %s, M %lld K %lld N %lld, zero points %d, 1-D %d: %lld differ",
							     ql ? "QLinearMatMul" : "MatMulInteger", dtype_name(adt), (long long)M,
							     (long long)K, (long long)N, zpk, one_d, (long long)wrong);
						if (K == 4099 && !zpk && !ql)
							cr_expect_gt(big, 0, "no sum past 2^24");
						exec_free(x);
						graph_free(g);
						free(a.data), free(b.data), free(za.data), free(zb.data), free(zy.data);
					}
}

/* ConvInteger and QLinearConv: 2-D grouped, strided, dilated, padded unevenly; 1-D; and 512 input
 * channels by 3x3 (K 4608, sums past 2^24); uint8 and int8, the weight's zero point per channel or
 * one, QLinearConv with and without a bias */
Test(exec, quant_conv_integer_matches_naive_loops)
{
	struct qc {
		int64_t n, c, h, w, m, kh, kw, group, sh, sw, dh, dw, pt, pl, pb, pr;
		int one_d;
	} cs[] = {
		{2, 4, 9, 8, 6, 3, 2, 2, 2, 1, 1, 2, 1, 0, 2, 1, 0},
		{1, 3, 1, 11, 4, 1, 3, 1, 1, 2, 1, 1, 0, 1, 0, 1, 1},
		{1, 512, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},
		{2, 1, 5, 7, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},
	};
	for (int ci = 0; ci < 4; ci++)
		for (int dt = 0; dt < 2; dt++)
			for (int wzk = 0; wzk < 2; wzk++)
				for (int ql = 0; ql < 3; ql++) {
					const struct qc *c = &cs[ci];
					int xdt = dt ? DT_INT8 : DT_UINT8, wdt = dt ? DT_UINT8 : DT_INT8, ydt = dt ? DT_UINT8 : DT_INT8;
					int64_t cg = c->c / c->group, mg = c->m / c->group;
					int64_t oh = (c->h + c->pt + c->pb - (c->dh * (c->kh - 1) + 1)) / c->sh + 1;
					int64_t ow = (c->w + c->pl + c->pr - (c->dw * (c->kw - 1) + 1)) / c->sw + 1;
					struct qt_in xi = {"x", xdt, c->one_d ? 3 : 4, {c->n, c->c, c->h, c->w}, qt_ints(xdt, c->n * c->c * c->h * c->w)};
					struct qt_in wi = {"w", wdt, c->one_d ? 3 : 4, {c->m, cg, c->kh, c->kw}, qt_ints(wdt, c->m * cg * c->kh * c->kw)};
					if (c->one_d)
						xi.dims[2] = c->w, wi.dims[2] = c->kw;
					if (ci == 2)
						qt_big(xdt, xi.data, c->n * c->c * c->h * c->w), qt_big(wdt, wi.data, c->m * cg * c->kh * c->kw);
					int64_t nwz = wzk ? c->m : 1;
					struct qt_in xz = {"xz", xdt, 0, {0}, qt_ints(xdt, 1)}, wz = {"wz", wdt, wzk, {nwz}, qt_ints(wdt, nwz)};
					if (ci == 2 && !wzk) /* zero points 0: the sums do not cancel */
						*(uint8_t *)xz.data = 0, *(uint8_t *)wz.data = 0;
					float sx = 0.011f, sw = 0.023f, sy = 0.05f * (float)(cg * c->kh * c->kw);
					if (ci == 3) /* the multiplier 1/2: ties */
						sx = 0.5f, sw = 0.5f, sy = 0.5f;
					struct qt_in fx = {"sx", DT_FLOAT, 0, {0}, &sx}, fw = {"sw", DT_FLOAT, 0, {0}, &sw};
					struct qt_in fy = {"sy", DT_FLOAT, 0, {0}, &sy}, zy = {"zy", ydt, 0, {0}, qt_ints(ydt, 1)};
					struct qt_in bi = {"B", DT_INT32, 1, {c->m}, qt_ints(DT_INT32, c->m)};
					for (int64_t m = 0; m < c->m; m++) /* biases of the sums' size */
						((int32_t *)bi.data)[m] %= 1 << 20;
					char attrs[300], node[600];
					if (c->one_d)
						snprintf(attrs, sizeof attrs, "group: %lld, strides: [%lld], dilations: [%lld], pads: [%lld, %lld]",
							 (long long)c->group, (long long)c->sw, (long long)c->dw, (long long)c->pl, (long long)c->pr);
					else
						snprintf(attrs, sizeof attrs,
							 "group: %lld, strides: [%lld, %lld], dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld]",
							 (long long)c->group, (long long)c->sh, (long long)c->sw, (long long)c->dh, (long long)c->dw,
							 (long long)c->pt, (long long)c->pl, (long long)c->pb, (long long)c->pr);
					struct qt_in in[9];
					int n_in;
					if (ql) {
						struct qt_in q[9] = {xi, fx, xz, wi, fw, wz, fy, zy, bi};
						memcpy(in, q, sizeof q);
						n_in = ql == 2 ? 9 : 8;
						snprintf(node, sizeof node, "{op: QLinearConv, inputs: [x, sx, xz, w, sw, wz, sy, zy%s], outputs: [y], attrs: {%s}}",
							 ql == 2 ? ", B" : "", attrs);
					} else {
						struct qt_in q[4] = {xi, wi, xz, wz};
						memcpy(in, q, sizeof q);
						n_in = 4;
						snprintf(node, sizeof node, "{op: ConvInteger, inputs: [x, w, xz, wz], outputs: [y], attrs: {%s}}", attrs);
					}
					struct graph *g;
					struct exec *x;
					const struct rtensor *y = qt_run(&g, &x, node, in, n_in, NULL);
					cr_assert_eq(y->numel, c->n * c->m * oh * ow, "%s", node);
					double lo, hi;
					qt_range(ydt, &lo, &hi);
					float mult = sx * sw / sy, fzy = (float)qt_get(ydt, zy.data, 0);
					int64_t wrong = 0, big = 0, xzv = qt_get(xdt, xz.data, 0);
					for (int64_t i = 0; i < c->n; i++)
						for (int64_t m = 0; m < c->m; m++)
							for (int64_t oy = 0; oy < oh; oy++)
								for (int64_t ox = 0; ox < ow; ox++) {
									int64_t acc = 0, wzv = qt_get(wdt, wz.data, wzk ? m : 0);
									for (int64_t ch = 0; ch < cg; ch++)
										for (int64_t ky = 0; ky < c->kh; ky++)
											for (int64_t kx = 0; kx < c->kw; kx++) {
												int64_t iy = oy * c->sh - c->pt + ky * c->dh;
												int64_t ix = ox * c->sw - c->pl + kx * c->dw;
												if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w)
													continue;
												int64_t xv = qt_get(xdt, xi.data, ((i * c->c + m / mg * cg + ch) * c->h + iy) * c->w + ix);
												int64_t wv = qt_get(wdt, wi.data, ((m * cg + ch) * c->kh + ky) * c->kw + kx);
												acc += (xv - xzv) * (wv - wzv);
											}
									big += acc >= (1 << 24) || acc <= -(1 << 24);
									int64_t e = ((i * c->m + m) * oh + oy) * ow + ox;
									int64_t want = !ql ? (int32_t)acc
										     : qt_requant(acc + (ql == 2 ? ((const int32_t *)bi.data)[m] : 0), mult, fzy, lo, hi);
									int64_t got = ql ? qt_get(ydt, y->data, e) : ((const int32_t *)y->data)[e];
									wrong += got != want;
								}
					cr_expect_eq(wrong, 0, "%s: %lld of %lld differ", node, (long long)wrong, (long long)y->numel);
					if (ci == 2 && !ql && !wzk)
						cr_expect_gt(big, 0, "no sum past 2^24");
					exec_free(x);
					graph_free(g);
					free(xi.data), free(wi.data), free(xz.data), free(wz.data), free(zy.data), free(bi.data);
				}
}

/* the verdict of a Quantize/DequantizeLinear case, and its run and inputs freed */
static void qt_done(const char *op, int from, int to, int64_t n, int per_axis, int64_t wrong, int64_t first, struct exec *x,
		    struct graph *g, void *a, void *b)
{
	cr_expect_eq(wrong, 0, "%s %s -> %s, %lld elements%s: %lld differ, the first #%lld", op, dtype_name(from),
		     dtype_name(to), (long long)n, per_axis ? " per axis" : "", (long long)wrong, (long long)first);
	exec_free(x);
	graph_free(g);
	free(a), free(b);
}

/* float32 edge values for QuantizeLinear: NaN, infinities, signed zeros, subnormals, ties, huge */
static const float qt_edges[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 0.5f, 1.5f, 2.5f, -0.5f,
				 -2.5f, 127.5f, 128.5f, -128.5f, 255.5f, 3e38f, -3e38f, 65535.5f, 1e9f, 0x1p-149f};

/* QuantizeLinear of float32 and float64 to uint8, int8, uint16 and int16, per tensor over 0, 1, 7
 * and 73731 elements, and per axis (x (3, 5, 7), axis 1 and -1); scales include a subnormal */
Test(exec, quant_quantize_linear_matches_its_formula)
{
	static const int dts[] = {DT_UINT8, DT_INT8, DT_UINT16, DT_INT16};
	static const int64_t ns[] = {0, 1, 7, 73731, -1, -2};
	for (int f64 = 0; f64 < 2; f64++)
		for (int d = 0; d < 4; d++)
			for (int k = 0; k < 6; k++) {
				int src = f64 ? DT_DOUBLE : DT_FLOAT, ydt = dts[d];
				int per_axis = ns[k] < 0;
				int64_t n = per_axis ? 105 : ns[k], ax = ns[k] == -1 ? 1 : 2, nk = per_axis ? (ax == 1 ? 5 : 7) : 1;
				int64_t inner = ax == 1 ? 7 : 1;
				struct qt_in xi = {"x", src, per_axis ? 3 : 1, {n}, xmalloc((size_t)n * 8 + 1)};
				if (per_axis)
					xi.dims[0] = 3, xi.dims[1] = 5, xi.dims[2] = 7;
				for (int64_t i = 0; i < n; i++) {
					int64_t ne = (int64_t)(sizeof qt_edges / sizeof *qt_edges);
					float f = i < ne ? qt_edges[i] : ((float)(int64_t)(qt_rand() % 200000) - 100000) / 97.0f;
					double v = i < ne ? (double)f : (double)f + (double)(qt_rand() % 1000) * 1e-12;
					if (f64)
						((double *)xi.data)[i] = v;
					else
						((float *)xi.data)[i] = f;
				}
				float sc[7] = {1.0f, 0.05f, 0.3f, 1e-40f, 7.0f, 0.011f, 2.5f}; /* per tensor 1: ties */
				struct qt_in si = {"s", DT_FLOAT, per_axis, {nk}, sc};
				struct qt_in zi = {"z", ydt, per_axis, {nk}, qt_ints(ydt, nk)};
				struct qt_in in[3] = {xi, si, zi};
				char node[200];
				snprintf(node, sizeof node, "{op: QuantizeLinear, inputs: [x, s, z], outputs: [y], attrs: {axis: %d}}",
					 ax == 1 ? 1 : -1);
				struct graph *g;
				struct exec *x;
				const struct rtensor *y = qt_run(&g, &x, node, in, 3, NULL);
				cr_assert_eq(y->dtype, ydt);
				double lo, hi;
				qt_range(ydt, &lo, &hi);
				int64_t wrong = 0, first = -1;
				for (int64_t i = 0; i < n; i++) {
					int64_t kk = per_axis ? i / inner % nk : 0;
					float xv = f64 ? (float)((const double *)xi.data)[i] : ((const float *)xi.data)[i];
					float r = nearbyintf(xv / sc[kk]) + (float)qt_get(ydt, zi.data, kk);
					int64_t want = r != r ? 0 : (int64_t)(r < lo ? lo : r > hi ? hi : r);
					if (qt_get(ydt, y->data, i) != want && !wrong++)
						first = i;
				}
				qt_done("QuantizeLinear", src, ydt, n, per_axis, wrong, first, x, g, xi.data, zi.data);
			}
}

/* DequantizeLinear of uint8, int8, uint16, int16 and int32 to float32 and float64 (the scale's
 * dtype), per tensor over 0, 1, 7 and 73731 elements and per axis; scales NaN, inf, subnormal */
Test(exec, quant_dequantize_linear_matches_its_formula)
{
	static const int dts[] = {DT_UINT8, DT_INT8, DT_UINT16, DT_INT16, DT_INT32};
	static const int64_t ns[] = {0, 1, 7, 73731, -1};
	for (int f64 = 0; f64 < 2; f64++)
		for (int d = 0; d < 5; d++)
			for (int k = 0; k < 5; k++) {
				int xdt = dts[d], sdt = f64 ? DT_DOUBLE : DT_FLOAT;
				int per_axis = ns[k] < 0;
				int64_t n = per_axis ? 105 : ns[k], nk = per_axis ? 5 : 1;
				struct qt_in xi = {"x", xdt, per_axis ? 3 : 1, {n}, qt_ints(xdt, n)};
				if (per_axis)
					xi.dims[0] = 3, xi.dims[1] = 5, xi.dims[2] = 7;
				double sc[5] = {0.05, NAN, 1e-45, INFINITY, 0.1 + 1e-12};
				float scf[5];
				for (int i = 0; i < 5; i++)
					scf[i] = (float)sc[i];
				if (!per_axis) /* one finite scale */
					sc[0] = 0.0173, scf[0] = 0.0173f;
				struct qt_in si = {"s", sdt, per_axis, {nk}, f64 ? (void *)sc : (void *)scf};
				struct qt_in zi = {"z", xdt, per_axis, {nk}, qt_ints(xdt, nk)};
				struct qt_in in[3] = {xi, si, zi};
				struct graph *g;
				struct exec *x;
				const struct rtensor *y = qt_run(&g, &x, "{op: DequantizeLinear, inputs: [x, s, z], outputs: [y]}", in, 3, NULL);
				cr_assert_eq(y->dtype, sdt);
				int64_t wrong = 0, first = -1;
				for (int64_t i = 0; i < n; i++) {
					int64_t kk = per_axis ? i / 7 % 5 : 0;
					float r = (float)(qt_get(xdt, xi.data, i) - qt_get(xdt, zi.data, kk)) * (float)(f64 ? sc[kk] : scf[kk]);
					int same;
					if (f64) {
						double w = r;
						same = !memcmp(&w, &((const double *)y->data)[i], 8);
					} else {
						same = !memcmp(&r, &((const float *)y->data)[i], 4);
					}
					if (!same && !wrong++)
						first = i;
				}
				qt_done("DequantizeLinear", xdt, sdt, n, per_axis, wrong, first, x, g, xi.data, zi.data);
			}
}

/* DynamicQuantizeLinear over 0, 1, 7, 17 and 73731 elements: NaN, signed zeros, all positive, all
 * negative, the extremes anywhere (the tail, one of 16 lanes) */
Test(exec, quant_dynamic_quantize_linear_matches_its_formula)
{
	static const int64_t ns[] = {0, 1, 7, 17, 73731};
	for (int k = 0; k < 5; k++)
		for (int sign = 0; sign < 3; sign++) {
			int64_t n = ns[k];
			float *p = xmalloc((size_t)n * 4 + 4);
			for (int64_t i = 0; i < n; i++) {
				float v = ((float)(int64_t)(qt_rand() % 20001) - 10000) / 37.0f;
				p[i] = sign == 1 ? fabsf(v) + 1 : sign == 2 ? -fabsf(v) - 1 : v;
			}
			if (n >= 7 && sign == 0)
				p[3] = NAN, p[4] = -0.0f, p[5] = -NAN;
			if (n == 17)
				p[16] = sign == 2 ? -1000.0f : 1000.0f; /* the extreme in the tail */
			if (n == 73731)
				p[40001] = -3000.0f, p[n - 2] = 2000.5f;
			struct qt_in xi = {"x", DT_FLOAT, 1, {n}, p};
			struct graph *g;
			struct exec *x;
			const struct rtensor *y = qt_run(&g, &x, "{op: DynamicQuantizeLinear, inputs: [x], outputs: [y, s, z]}", &xi, 1,
							 "{name: y}, {name: s}, {name: z}");
			const struct rtensor *ys = exec_value(x, g->outputs[1]), *yz = exec_value(x, g->outputs[2]);
			float lo = 0, hi = 0;
			for (int64_t i = 0; i < n; i++) {
				lo = p[i] < lo ? p[i] : lo;
				hi = p[i] > hi ? p[i] : hi;
			}
			float s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
			float zr = nearbyintf(fminf(fmaxf(0.0f - lo / s, 0), 255));
			cr_expect(!memcmp(&s, ys->data, 4), "scale %a, not %a", (double)*(const float *)ys->data, (double)s);
			cr_expect_eq(*(const uint8_t *)yz->data, (uint8_t)zr);
			int64_t wrong = 0;
			for (int64_t i = 0; i < n; i++) {
				float r = nearbyintf(p[i] / s) + zr;
				int64_t want = r != r ? 0 : (int64_t)(r < 0 ? 0 : r > 255 ? 255 : r);
				wrong += ((const uint8_t *)y->data)[i] != want;
			}
			cr_expect_eq(wrong, 0, "DynamicQuantizeLinear of %lld elements (%d): %lld differ", (long long)n, sign,
				     (long long)wrong);
			exec_free(x);
			graph_free(g);
			free(p);
		}
}

/* float16 and bfloat16 inputs widened to float32 and the output narrowed back (exec/cpu.c): Neg
 * over every 16-bit pattern (NaN payloads, subnormals, infinities) and 0, 1, 7 elements, against
 * dtype.c's per-element rule f16_from_f32(-f32_from_f16(h)) */
Test(exec, quant_half_inputs_widen_and_narrow_by_the_per_element_rule)
{
	static const int64_t ns[] = {0, 1, 7, 65536 + 8195};
	for (int bf = 0; bf < 2; bf++)
		for (int k = 0; k < 4; k++) {
			int dt = bf ? DT_BFLOAT16 : DT_FLOAT16;
			int64_t n = ns[k];
			uint16_t *p = xmalloc((size_t)n * 2 + 2);
			for (int64_t i = 0; i < n; i++)
				p[i] = (uint16_t)(i < 65536 ? (uint64_t)(65535 - i) : qt_rand());
			struct qt_in xi = {"x", dt, 1, {n}, p};
			struct graph *g;
			struct exec *x;
			const struct rtensor *y = qt_run(&g, &x, "{op: Neg, inputs: [x], outputs: [y]}", &xi, 1, NULL);
			cr_assert_eq(y->dtype, dt);
			int64_t wrong = 0, first = -1;
			for (int64_t i = 0; i < n; i++) {
				float v = bf ? f32_from_bf16(p[i]) : f32_from_f16(p[i]);
				uint16_t want = bf ? bf16_from_f32(-v) : f16_from_f32(-v);
				if (((const uint16_t *)y->data)[i] != want && !wrong++)
					first = i;
			}
			cr_expect_eq(wrong, 0, "Neg %s, %lld elements: %lld differ, the first #%lld (%04x)", dtype_name(dt), (long long)n,
				     (long long)wrong, (long long)first, first >= 0 ? p[first] : 0);
			exec_free(x);
			graph_free(g);
			free(p);
		}
}

/* #52 attn: float32 Attention as blocks of query rows, each two GEMMs with the softmax between
 * (under is_causal blocks of 16 to 128 rows that read only the keys up to their last row), against the
 * definition computed here in double from the same inputs. */

struct at_case {
	const char *name;
	int three, B, hq, hkv, L, T, D, Dv, causal, dt;
	double scale, cap;
	int mask, mdims; /* mask: 0 none, 1 float32, 2 bool; its shape, right-aligned to (B, hq, L, T) */
	int64_t md[4];
};

/* The offset of (b, h, s, d) in a 4-D (B, H, S, D) or 3-D (B, S, H D) tensor. */
static int64_t at_off(int three, int64_t H, int64_t S, int64_t D, int64_t b, int64_t h, int64_t s, int64_t d)
{
	return three ? (b * S + s) * H * D + h * D + d : ((b * H + h) * S + s) * D + d;
}

/* a deterministic value in [-2, 2) */
static double at_val(uint64_t *seed)
{
	*seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(*seed >> 40) / (double)(1 << 22) - 2;
}

/* The definition in double at (b, h, i, e): softmax over j of (scale q_i . k_j, softcapped, plus the
 * mask, -inf where causal and j > i), times v; NaN where every key is masked. */
static double at_definition(const struct at_case *c, const double *q, const double *k, const double *v,
			    const double *m, int64_t b, int64_t h, int64_t i, int64_t e)
{
	int64_t hk = h / (c->hq / c->hkv);
	double scale = c->scale ? c->scale : 1 / sqrt((double)c->D), mx = -INFINITY, z = 0, acc = 0;
	double *s = malloc(sizeof *s * (size_t)(c->T + 1));
	for (int64_t j = 0; j < c->T; j++) {
		double d = 0;
		for (int64_t t = 0; t < c->D; t++)
			d += q[at_off(c->three, c->hq, c->L, c->D, b, h, i, t)] * k[at_off(c->three, c->hkv, c->T, c->D, b, hk, j, t)];
		d *= scale;
		if (c->cap > 0)
			d = c->cap * tanh(d / c->cap);
		if (c->mask) {
			int64_t idx[4] = {b, h, i, j}, off = 0, st = 1;
			for (int a = c->mdims - 1, x = 3; a >= 0; a--, x--) {
				off += (c->md[a] == 1 ? 0 : idx[x]) * st;
				st *= c->md[a];
			}
			d += c->mask == 2 ? (m[off] != 0 ? 0 : -INFINITY) : m[off];
		}
		if (c->causal && j > i)
			d = -INFINITY;
		s[j] = d;
		mx = d > mx ? d : mx;
	}
	for (int64_t j = 0; j < c->T; j++) {
		double p = mx == -INFINITY ? NAN : exp(s[j] - mx);
		z += p;
		acc += p * v[at_off(c->three, c->hkv, c->T, c->Dv, b, hk, j, e)];
	}
	free(s);
	return acc / z;
}

Test(exec, attention_matches_its_definition)
{
	static const struct at_case cases[] = {
		{"one query, one key", 0, 1, 1, 1, 1, 1, 3, 2, 0, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"one query, one key, causal", 0, 1, 1, 1, 1, 1, 3, 2, 1, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"37 x 37, three heads", 0, 2, 3, 3, 37, 37, 8, 5, 0, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"causal 70 x 70, grouped-query, float mask (L, T)", 0, 2, 4, 2, 70, 70, 16, 7, 1, DT_FLOAT, 0, 0, 1, 2, {70, 70}},
		{"causal L 45 > T 29, bool mask (B, 1, L, T)", 0, 2, 2, 1, 45, 29, 5, 3, 1, DT_FLOAT, 0, 0, 2, 4, {2, 1, 45, 29}},
		{"causal 3-D L 19 < T 53, float mask (L, 1), scale", 1, 2, 3, 3, 19, 53, 4, 4, 1, DT_FLOAT, 0.3, 0, 1, 2, {19, 1}},
		{"L 33, T 130, softcap, bool mask (T)", 0, 1, 2, 2, 33, 130, 6, 5, 0, DT_FLOAT, 0, 2.5, 2, 1, {130}},
		{"causal 130 x 130, one head", 0, 1, 1, 1, 130, 130, 9, 9, 1, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"causal 3-D 100 x 100, grouped-query, float mask (B, hq, L, T)", 1, 1, 4, 1, 100, 100, 8, 3, 1, DT_FLOAT, 0,
		 0, 1, 4, {1, 4, 100, 100}},
		{"causal 520 x 520 (blocks of 128), one head", 0, 1, 1, 1, 520, 520, 4, 3, 1, DT_FLOAT, 0, 0, 0, 0, {0}},
		{"causal L 300 < T 1030 (blocks of 128), bool mask (L, T)", 0, 1, 2, 1, 300, 1030, 4, 2, 1, DT_FLOAT, 0, 0, 2, 2,
		 {300, 1030}},
		{"float64: causal 70 x 70, grouped-query, float mask", 0, 2, 4, 2, 70, 70, 16, 7, 1, DT_DOUBLE, 0, 0, 1, 2, {70, 70}},
		{"float64: causal L 45 > T 29, bool mask", 0, 2, 2, 1, 45, 29, 5, 3, 1, DT_DOUBLE, 0, 0, 2, 4, {2, 1, 45, 29}},
	};
	for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
		const struct at_case *c = &cases[ci];
		int64_t nq = (int64_t)c->B * c->hq * c->L * c->D, nk = (int64_t)c->B * c->hkv * c->T * c->D;
		int64_t nv = (int64_t)c->B * c->hkv * c->T * c->Dv, ny = (int64_t)c->B * c->hq * c->L * c->Dv, nm = 1;
		for (int a = 0; a < c->mdims; a++)
			nm *= c->md[a];
		int64_t ns[4] = {nq, nk, nv, c->mask ? nm : 0};
		double *dv[4];
		struct rtensor t[4];
		uint64_t seed = 1234 + ci;
		for (int a = 0; a < 4; a++) {
			dv[a] = malloc(sizeof(double) * (size_t)(ns[a] + 1));
			int mdt = a < 3 ? c->dt : c->mask == 2 ? DT_BOOL : DT_FLOAT;
			t[a] = (struct rtensor){.dtype = mdt, .numel = ns[a], .nbytes = (size_t)ns[a] * dtype_size(mdt), .known = 1};
			t[a].data = malloc(t[a].nbytes + 8);
			for (int64_t i = 0; i < ns[a]; i++) {
				double x = at_val(&seed);
				if (a == 3 && c->mask == 2) /* false about one in four; all of query row 3 false */
					x = x > -1 && !(c->mdims >= 2 && c->md[c->mdims - 2] > 3 && i / c->md[c->mdims - 1] % c->md[c->mdims - 2] == 3);
				else if (a == 3 && x < -1.8) /* some -inf in a float mask */
					x = -INFINITY;
				else if (c->dt == DT_FLOAT || a == 3)
					x = (float)x;
				dv[a][i] = x;
				rt_set(&t[a], i, x);
			}
		}
		const int64_t *shapes[3];
		int64_t sq[4] = {c->B, c->hq, c->L, c->D}, sk[4] = {c->B, c->hkv, c->T, c->D}, sv[4] = {c->B, c->hkv, c->T, c->Dv};
		int64_t q3[3] = {c->B, c->L, (int64_t)c->hq * c->D}, k3[3] = {c->B, c->T, (int64_t)c->hkv * c->D};
		int64_t v3[3] = {c->B, c->T, (int64_t)c->hkv * c->Dv};
		shapes[0] = c->three ? q3 : sq, shapes[1] = c->three ? k3 : sk, shapes[2] = c->three ? v3 : sv;
		char text[1600], in[3][96], ms[96] = "", attrs[256] = "";
		for (int a = 0; a < 3; a++) {
			t[a].ndim = c->three ? 3 : 4;
			memcpy(t[a].dims, shapes[a], sizeof(int64_t) * (size_t)t[a].ndim);
			const int64_t *d = shapes[a];
			if (c->three)
				snprintf(in[a], sizeof in[a], "[%lld, %lld, %lld]", (long long)d[0], (long long)d[1], (long long)d[2]);
			else
				snprintf(in[a], sizeof in[a], "[%lld, %lld, %lld, %lld]", (long long)d[0], (long long)d[1],
					 (long long)d[2], (long long)d[3]);
		}
		t[3].ndim = c->mdims;
		memcpy(t[3].dims, c->md, sizeof c->md);
		if (c->mask) {
			int k = snprintf(ms, sizeof ms, ", {name: m, dtype: %s, shape: [", c->mask == 2 ? "bool" : "float32");
			for (int a = 0; a < c->mdims; a++)
				k += snprintf(ms + k, sizeof ms - (size_t)k, "%s%lld", a ? ", " : "", (long long)c->md[a]);
			snprintf(ms + k, sizeof ms - (size_t)k, "]}");
		}
		snprintf(attrs, sizeof attrs, "is_causal: %d, scale: %g, softcap: %g, q_num_heads: %d, kv_num_heads: %d", c->causal,
			 c->scale, c->cap, c->three ? c->hq : 0, c->three ? c->hkv : 0);
		const char *dn = dtype_name(c->dt);
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 23\ninputs: [{name: q, dtype: %s, shape: %s}, {name: k, dtype: %s, shape: %s}, "
			 "{name: v, dtype: %s, shape: %s}%s]\nnodes:\n  - {op: Attention, inputs: [q, k, v%s], outputs: [y], "
			 "attrs: {%s}}\noutputs: [{name: y}]\n",
			 dn, in[0], dn, in[1], dn, in[2], ms, c->mask ? ", m" : "", attrs);
		struct graph *g = load_text("attention.yaml", text);
		const char *names[4] = {"q", "k", "v", "m"};
		void *first = NULL;
		for (int th = 1; th <= 3; th += 2) {
			pool_set_threads(th);
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = c->mask ? 4 : 3};
			struct exec *ex = exec_run(g, &o, NULL, &e);
			cr_assert(ex, "%s: %s", c->name, e.msg);
			const struct rtensor *y = exec_value(ex, g->outputs[0]);
			cr_assert_eq(y->numel, ny, "%s", c->name);
			if (!first) {
				int64_t bad = 0, nans = 0, firstbad = -1;
				double got0 = 0, want0 = 0;
				for (int64_t b = 0; b < c->B; b++)
					for (int64_t h = 0; h < c->hq; h++)
						for (int64_t i = 0; i < c->L; i++)
							for (int64_t e2 = 0; e2 < c->Dv; e2++) {
								int64_t at = at_off(c->three, c->hq, c->L, c->Dv, b, h, i, e2);
								double want = at_definition(c, dv[0], dv[1], dv[2], dv[3], b, h, i, e2);
								double got = rt_get(y, at);
								/* outputs are under 2: float32's rounding of S, exp and the sums */
								double tol = c->dt == DT_FLOAT ? 4e-6 : 1e-13;
								int ok = isnan(want) ? isnan(got) : fabs(got - want) <= tol;
								nans += isnan(want);
								if (!ok && !bad++)
									firstbad = at, got0 = got, want0 = want;
							}
				cr_expect_eq(bad, 0, "%s: %lld of %lld outputs off the definition, the first #%lld: %.9g, not %.9g",
					     c->name, (long long)bad, (long long)ny, (long long)firstbad, got0, want0);
				cr_expect(c->mask != 2 || c->mdims < 2 || nans > 0, "%s: a row all masked is NaN", c->name);
				first = malloc(y->nbytes + 1);
				memcpy(first, y->data, y->nbytes);
			} else {
				cr_expect_eq(memcmp(first, y->data, y->nbytes), 0, "%s: other bits with 3 threads", c->name);
			}
			exec_free(ex);
		}
		pool_set_threads(1);
		free(first);
		graph_free(g);
		for (int a = 0; a < 4; a++) {
			free(dv[a]);
			free(t[a].data);
		}
	}
}

/* #52 attn: Attention's cost counts the scores it computes: all L x T, or under is_causal each
 * query row i's min(i + 1, T) keys. 1 batch, 2 heads, D 4, Dv 2, L 5, T 3: (2 (4 + 2) + 5) FLOPs a
 * score, 2 x 15 scores, causal 2 x (1 + 2 + 3 + 3 + 3); L 3, T 5, causal: 2 x (1 + 2 + 3). */
Test(exec, attention_costs_the_scores_it_computes)
{
	static const struct {
		int L, T, causal;
		uint64_t flops;
	} cases[] = {{5, 3, 0, 17 * 30}, {5, 3, 1, 17 * 24}, {3, 5, 1, 17 * 12}, {3, 5, 0, 17 * 30}};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		char text[600];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 23\ninputs: [{name: q, dtype: float32, shape: [1, 2, %d, 4]}, {name: k, dtype: "
			 "float32, shape: [1, 2, %d, 4]}, {name: v, dtype: float32, shape: [1, 2, %d, 2]}]\nnodes: [{op: "
			 "Attention, inputs: [q, k, v], outputs: [y], attrs: {is_causal: %d}}]\noutputs: [{name: y}]\n",
			 cases[c].L, cases[c].T, cases[c].T, cases[c].causal);
		struct exec_stats st = stats_of("attention_cost.yaml", text);
		cr_expect_eq(st.flops, cases[c].flops, "L %d, T %d, causal %d: %llu FLOPs, not %llu", cases[c].L, cases[c].T,
			     cases[c].causal, (unsigned long long)st.flops, (unsigned long long)cases[c].flops);
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

/* #52 seq: Range, Trilu and CumSum as typed loops over the pool, bit for bit against the rule each
 * kernel's rt_get/rt_set walk computed (written here): Range's start + i delta (integers exactly,
 * floats in double rounded once), Trilu's kept triangle, CumSum's running sum in double in index
 * order, over cf_fill's values (NaN, infinities, -0, subnormals, huge), odd shapes, 0 and 1
 * elements, every axis, reverse and exclusive. */
static struct exec *seq_run(struct graph **g, const char *text, struct rtensor *t, const char *const *names, int n)
{
	*g = load_text("seq.yaml", text);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = n};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s: %s", text, e.msg);
	return x;
}

/* runs text on x (dtype dt, shape d) and the int64 scalar named name (k, axis) */
static struct exec *seq_run_x(struct graph **g, const char *text, int dt, int nd, const int64_t *d, void *a, int64_t n,
			      const char *name, int64_t *v)
{
	struct rtensor t[2] = {{.dtype = dt, .ndim = nd, .numel = n, .data = a, .nbytes = n * (int64_t)dtype_size(dt), .known = 1},
			       {.dtype = DT_INT64, .ndim = 0, .numel = 1, .data = v, .nbytes = 8, .known = 1}};
	memcpy(t[0].dims, d, sizeof *d * (size_t)nd);
	const char *names[2] = {"x", name};
	return seq_run(g, text, t, names, 2);
}

static void seq_dims(char *s, size_t n, const int64_t *d, int nd)
{
	s[0] = 0;
	for (int i = 0; i < nd; i++)
		snprintf(s + strlen(s), n - strlen(s), "%s%lld", i ? ", " : "", (long long)d[i]);
}

/* equal bits, or both NaN (a sum's NaN keeps either operand's payload: the compiler's order) */
static int seq_same(int dt, const void *a, const void *b)
{
	if (dt == DT_FLOAT) {
		float u, v;
		memcpy(&u, a, 4);
		memcpy(&v, b, 4);
		return !memcmp(&u, &v, 4) || (isnan(u) && isnan(v));
	}
	if (dt == DT_DOUBLE) {
		double u, v;
		memcpy(&u, a, 8);
		memcpy(&v, b, 8);
		return !memcmp(&u, &v, 8) || (isnan(u) && isnan(v));
	}
	return !memcmp(a, b, dtype_size(dt));
}

Test(exec, range_matches_start_plus_i_delta_bit_for_bit)
{
	static const struct { int dt; double f[3]; int64_t i[3]; } cases[] = {
		{DT_INT64, {0}, {-5, 1000003, 7}}, {DT_INT64, {0}, {INT64_MAX - 3, INT64_MIN, -(1LL << 62)}},
		{DT_INT64, {0}, {INT64_MIN, INT64_MIN + 40000, 3}}, {DT_INT32, {0}, {10, -20000, -3}},
		{DT_INT32, {0}, {INT32_MAX - 30000, INT32_MAX, 1}}, {DT_INT16, {0}, {-32768, 32767, 1}},
		{DT_INT64, {0}, {5, 5, 1}}, {DT_INT64, {0}, {5, 6, 1}}, {DT_INT32, {0}, {5, 4, 1}},
		{DT_FLOAT, {0.1f, 100000, 0.7f}, {0}}, {DT_FLOAT, {-3e5f, 3e5f, 0.3f}, {0}}, {DT_FLOAT, {1, 2, 3}, {0}},
		{DT_DOUBLE, {-1e3, 1e3, 0.013}, {0}}, {DT_DOUBLE, {1e17, 1e17 + 30000, 3.3}, {0}}, {DT_DOUBLE, {2, 2, 1}, {0}},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		int dt = cases[c].dt, fl = dt == DT_FLOAT || dt == DT_DOUBLE;
		size_t es = dtype_size(dt);
		char v[3][8];
		for (int k = 0; k < 3; k++) {
			if (dt == DT_FLOAT) {
				float f = (float)cases[c].f[k];
				memcpy(v[k], &f, 4);
			} else if (dt == DT_DOUBLE)
				memcpy(v[k], &cases[c].f[k], 8);
			else if (dt == DT_INT64)
				memcpy(v[k], &cases[c].i[k], 8);
			else if (dt == DT_INT32) {
				int32_t i = (int32_t)cases[c].i[k];
				memcpy(v[k], &i, 4);
			} else {
				int16_t i = (int16_t)cases[c].i[k];
				memcpy(v[k], &i, 2);
			}
		}
		double st = dt == DT_FLOAT ? (double)(float)cases[c].f[0] : cases[c].f[0];
		double d = dt == DT_FLOAT ? (double)(float)cases[c].f[2] : cases[c].f[2];
		double lim = dt == DT_FLOAT ? (double)(float)cases[c].f[1] : cases[c].f[1];
		__int128 ist = cases[c].i[0], idl = cases[c].i[2], span = (__int128)cases[c].i[1] - ist, len = 0;
		if (fl)
			len = ceil((lim - st) / d) > 0 ? (__int128)ceil((lim - st) / d) : 0;
		else
			for (__int128 p = ist; idl > 0 ? p < ist + span : p > ist + span; p += idl)
				len++;
		char text[400];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 18\ninputs: [{name: a, dtype: %s, shape: []}, {name: b, dtype: %s, shape: []}, "
			 "{name: d, dtype: %s, shape: []}]\nnodes:\n  - {op: Range, inputs: [a, b, d], outputs: [y]}\noutputs: [{name: y}]\n",
			 dtype_name(dt), dtype_name(dt), dtype_name(dt));
		struct rtensor t[3];
		for (int k = 0; k < 3; k++)
			t[k] = (struct rtensor){.dtype = dt, .ndim = 0, .numel = 1, .data = v[k], .nbytes = (int64_t)es, .known = 1};
		const char *names[3] = {"a", "b", "d"};
		struct graph *g;
		struct exec *x = seq_run(&g, text, t, names, 3);
		const struct rtensor *y = exec_value(x, g->outputs[0]);
		cr_assert_eq(y->numel, (int64_t)len, "Range case %zu: %lld elements, not %lld", c, (long long)y->numel, (long long)len);
		int64_t wrong = 0, first = -1;
		for (int64_t i = 0; i < y->numel; i++) {
			char w[8];
			if (dt == DT_FLOAT) {
				float f = (float)(st + (double)i * d);
				memcpy(w, &f, 4);
			} else if (dt == DT_DOUBLE) {
				double f = st + (double)i * d;
				memcpy(w, &f, 8);
			} else {
				int64_t e = (int64_t)(ist + i * idl);
				int32_t e32 = (int32_t)e;
				int16_t e16 = (int16_t)e;
				memcpy(w, dt == DT_INT64 ? (void *)&e : dt == DT_INT32 ? (void *)&e32 : (void *)&e16, es);
			}
			if (memcmp(w, (const char *)y->data + i * (int64_t)es, es) && !wrong++)
				first = i;
		}
		cr_expect_eq(wrong, 0, "Range case %zu (%s): %lld wrong, the first #%lld", c, dtype_name(dt), (long long)wrong,
			     (long long)first);
		exec_free(x);
		graph_free(g);
	}
}

Test(exec, trilu_keeps_its_triangle_bit_for_bit)
{
	static const struct { int nd; int64_t d[4]; } shapes[] = {
		{4, {2, 3, 5, 7}}, {3, {3, 1, 1}}, {3, {4, 9, 4}}, {3, {1, 0, 5}}, {2, {0, 3}}, {4, {2, 2, 17, 19}}, {2, {1, 1}}, {2, {67, 131}},
	};
	static const int64_t ks[] = {INT64_MIN, -100, -3, -1, 0, 1, 2, 5, 100, INT64_MAX};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_UINT8, DT_INT64};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
			for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
				for (int up = 0; up < 2; up++) {
					int dt = dts[di], nd = shapes[c].nd;
					size_t es = dtype_size(dt);
					int64_t n = 1, rows = shapes[c].d[nd - 2], cols = shapes[c].d[nd - 1], k = ks[ki];
					for (int i = 0; i < nd; i++)
						n *= shapes[c].d[i];
					char *a = xmalloc((size_t)n * es + 8), ds[64], text[400];
					cf_fill(dt == DT_UINT8 || dt == DT_INT64 ? DT_INT64 : dt, a, n * (int64_t)es / (dt == DT_UINT8 ? 8 : (int64_t)es) + 1, 7 + c);
					seq_dims(ds, sizeof ds, shapes[c].d, nd);
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%s]}, {name: k, dtype: int64, shape: []}]\n"
						 "nodes:\n  - {op: Trilu, inputs: [x, k], outputs: [y], attrs: {upper: %d}}\noutputs: [{name: y}]\n",
						 dtype_name(dt), ds, up);
					struct graph *g;
					struct exec *x = seq_run_x(&g, text, dt, nd, shapes[c].d, a, n, "k", &k);
					const char *y = exec_value(x, g->outputs[0])->data;
					static const char zero[8];
					int64_t wrong = 0, first = -1;
					for (int64_t e = 0; e < n; e++) {
						int64_t j = e % cols, i = e / cols % rows;
						__int128 dk = (__int128)j - i;
						int keep = up ? dk >= k : dk <= k;
						if (memcmp(y + e * (int64_t)es, keep ? a + e * (int64_t)es : zero, es) && !wrong++)
							first = e;
					}
					cr_expect_eq(wrong, 0, "Trilu %s [%s] k %lld upper %d: %lld wrong, the first #%lld", dtype_name(dt), ds,
						     (long long)k, up, (long long)wrong, (long long)first);
					exec_free(x);
					graph_free(g);
					xfree(a);
				}
}

Test(exec, cumsum_matches_the_running_sum_in_double_bit_for_bit)
{
	static const struct { int nd; int64_t d[4]; } shapes[] = {
		{4, {2, 3, 5, 7}}, {3, {2, 3, 1100}}, {1, {1}}, {2, {0, 4}}, {2, {3, 0}}, {3, {3, 1031, 1}}, {2, {1, 1}}, {3, {2, 513, 3}},
	};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int ax = -1; ax < shapes[c].nd; ax++)
				for (int mode = 0; mode < 4; mode++) {
					int dt = f64 ? DT_DOUBLE : DT_FLOAT, nd = shapes[c].nd, rev = mode & 1, excl = mode >> 1;
					int a0 = ax < 0 ? nd - 1 : ax;
					size_t es = dtype_size(dt);
					int64_t n = 1, outer = 1, inner = 1, d = shapes[c].d[a0], axv = ax;
					for (int i = 0; i < nd; i++) {
						n *= shapes[c].d[i];
						outer *= i < a0 ? shapes[c].d[i] : 1;
						inner *= i > a0 ? shapes[c].d[i] : 1;
					}
					char *a = xmalloc((size_t)n * es + 8), *w = xmalloc((size_t)n * es + 8), ds[64], text[500];
					cf_fill(dt, a, n, 11 + c * 8 + (size_t)mode);
					if (mode == 3) /* mostly finite: the sums then carry */
						for (int64_t e = 40; e < n; e++) {
							if (f64)
								((double *)a)[e] = fmod(((double *)a)[e], 1e3);
							else
								((float *)a)[e] = fmodf(((float *)a)[e], 1e3f);
						}
					for (int64_t o = 0; o < outer; o++)
						for (int64_t i = 0; i < inner; i++) {
							double s = 0;
							for (int64_t t = 0; t < d; t++) {
								int64_t at = (o * d + (rev ? d - 1 - t : t)) * inner + i;
								double v = f64 ? ((double *)a)[at] : ((float *)a)[at];
								if (!excl)
									s += v;
								if (f64)
									((double *)w)[at] = s;
								else
									((float *)w)[at] = (float)s;
								if (excl)
									s += v;
							}
						}
					seq_dims(ds, sizeof ds, shapes[c].d, nd);
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [%s]}, {name: ax, dtype: int64, shape: []}]\n"
						 "nodes:\n  - {op: CumSum, inputs: [x, ax], outputs: [y], attrs: {reverse: %d, exclusive: %d}}\n"
						 "outputs: [{name: y}]\n",
						 dtype_name(dt), ds, rev, excl);
					struct graph *g;
					struct exec *x = seq_run_x(&g, text, dt, nd, shapes[c].d, a, n, "ax", &axv);
					const char *y = exec_value(x, g->outputs[0])->data;
					int64_t wrong = 0, first = -1;
					for (int64_t e = 0; e < n; e++)
						if (!seq_same(dt, y + e * (int64_t)es, w + e * (int64_t)es) && !wrong++)
							first = e;
					cr_expect_eq(wrong, 0, "CumSum %s [%s] axis %d reverse %d exclusive %d: %lld wrong, the first #%lld",
						     dtype_name(dt), ds, ax, rev, excl, (long long)wrong, (long long)first);
					exec_free(x);
					graph_free(g);
					xfree(a);
					xfree(w);
				}
}

/* #52 rotary: RotaryEmbedding on float32 and float64 as typed rows of the head dimension: the rule
 * (x1 c - x2 s, x2 c + x1 s in double, rounded once to the dtype) bit for bit, any NaN for a NaN,
 * over cf_fill's values (NaN, infinities, -0, subnormals, huge) in X and the caches; 3-D and 4-D X,
 * interleaved or not, a partial rotary_embedding_dim (odd halves), position_ids or 3-D caches, 0
 * and 1 rows, and more rows than one piece of the pool. */
Test(exec, rotary_embedding_matches_its_rule_bit_for_bit)
{
	static const struct { int three; int64_t B, H, S, D, rd, P; int il; } cases[] = {
		{0, 2, 3, 5, 10, 6, 7, 0}, {0, 2, 3, 5, 10, 6, 7, 1}, {1, 2, 3, 5, 10, 0, 0, 0}, {1, 2, 3, 5, 10, 4, 0, 1},
		{0, 1, 1, 1, 2, 0, 1, 0}, {0, 1, 1, 1, 2, 0, 1, 1}, {0, 0, 2, 3, 4, 0, 3, 0}, {1, 1, 2, 1, 6, 2, 0, 0},
		{0, 2, 3, 37, 130, 128, 41, 0}, {1, 2, 3, 37, 130, 126, 0, 1}, {0, 3, 2, 33, 64, 0, 50, 1},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int f64 = 0; f64 < 2; f64++) {
			int dt = f64 ? DT_DOUBLE : DT_FLOAT, three = cases[c].three, il = cases[c].il;
			int64_t B = cases[c].B, H = cases[c].H, S = cases[c].S, D = cases[c].D, P = cases[c].P;
			int64_t rd = cases[c].rd ? cases[c].rd : D, half = rd / 2, nx = B * H * S * D;
			int64_t nc = (P ? P : B * S) * half;
			size_t es = dtype_size(dt);
			void *xd = xmalloc((size_t)nx * 8 + 8), *cd = xmalloc((size_t)nc * 8 + 8), *sdat = xmalloc((size_t)nc * 8 + 8);
			int64_t *pd = xmalloc(sizeof *pd * (size_t)(B * S + 1));
			cf_fill(dt, xd, nx, 7 + c);
			cf_fill(dt, cd, nc, 70 + c);
			cf_fill(dt, sdat, nc, 700 + c);
			for (int64_t i = 0; i < B * S; i++)
				pd[i] = P ? (i * 7 + 3) % P : 0;
			char text[1024];
			const char *tn = dtype_name(dt);
			if (P)
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 23\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld, %lld]}, "
					 "{name: c, dtype: %s, shape: [%lld, %lld]}, {name: s, dtype: %s, shape: [%lld, %lld]}, "
					 "{name: p, dtype: int64, shape: [%lld, %lld]}]\nnodes:\n  - {op: RotaryEmbedding, inputs: [x, c, s, p], "
					 "outputs: [y], attrs: {interleaved: %d, rotary_embedding_dim: %lld}}\noutputs: [{name: y}]\n",
					 tn, (long long)B, (long long)H, (long long)S, (long long)D, tn, (long long)P, (long long)half, tn,
					 (long long)P, (long long)half, (long long)B, (long long)S, il, (long long)cases[c].rd);
			else
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 23\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld]}, "
					 "{name: c, dtype: %s, shape: [%lld, %lld, %lld]}, {name: s, dtype: %s, shape: [%lld, %lld, %lld]}]\n"
					 "nodes:\n  - {op: RotaryEmbedding, inputs: [x, c, s], outputs: [y], attrs: {interleaved: %d, "
					 "num_heads: %lld, rotary_embedding_dim: %lld}}\noutputs: [{name: y}]\n",
					 tn, (long long)B, (long long)S, (long long)(H * D), tn, (long long)B, (long long)S, (long long)half, tn,
					 (long long)B, (long long)S, (long long)half, il, (long long)H, (long long)cases[c].rd);
			struct graph *g = load_text("rotary.yaml", text);
			struct rtensor t[4] = {
				{.dtype = dt, .ndim = three ? 3 : 4, .numel = nx, .data = xd, .nbytes = nx * es, .known = 1},
				{.dtype = dt, .ndim = P ? 2 : 3, .numel = nc, .data = cd, .nbytes = nc * es, .known = 1},
				{.dtype = dt, .ndim = P ? 2 : 3, .numel = nc, .data = sdat, .nbytes = nc * es, .known = 1},
				{.dtype = DT_INT64, .ndim = 2, .dims = {B, S}, .numel = B * S, .data = pd, .nbytes = B * S * 8, .known = 1}};
			int64_t xd4[4] = {B, H, S, D}, xd3[3] = {B, S, H * D}, c2[2] = {P, half}, c3[3] = {B, S, half};
			memcpy(t[0].dims, three ? xd3 : xd4, sizeof(int64_t) * (three ? 3 : 4));
			memcpy(t[1].dims, P ? c2 : c3, sizeof(int64_t) * (P ? 2 : 3));
			memcpy(t[2].dims, t[1].dims, sizeof t[1].dims);
			const char *names[4] = {"x", "c", "s", "p"};
			struct gd_err e = {0};
			struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = P ? 4 : 3};
			struct exec *x = exec_run(g, &o, NULL, &e);
			cr_assert(x, "RotaryEmbedding: %s", e.msg);
			const char *y = exec_value(x, g->outputs[0])->data;
			int64_t wrong = 0, first = -1;
			for (int64_t b = 0; b < B; b++)
				for (int64_t h = 0; h < H; h++)
					for (int64_t s = 0; s < S; s++)
						for (int64_t d = 0; d < D; d++) {
							int64_t base = three ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D;
							int64_t crow = P ? pd[b * S + s] : b * S + s, j = il ? d / 2 : d % half;
							int second = il ? d % 2 : d >= half;
							int64_t i1 = il ? 2 * j : j, i2 = il ? 2 * j + 1 : j + half;
#define RGET(p, i) (f64 ? ((const double *)(p))[i] : (double)((const float *)(p))[i])
							double want;
							if (d >= rd)
								want = RGET(xd, base + d);
							else {
								double cv = RGET(cd, crow * half + j), sv = RGET(sdat, crow * half + j);
								double x1 = RGET(xd, base + i1), x2 = RGET(xd, base + i2);
								want = second ? x2 * cv + x1 * sv : x1 * cv - x2 * sv;
							}
#undef RGET
							int ok;
							if (f64) {
								double u;
								memcpy(&u, y + (base + d) * 8, 8);
								ok = !memcmp(&want, &u, 8) || (isnan(want) && isnan(u));
							} else {
								float w = (float)want, u;
								memcpy(&u, y + (base + d) * 4, 4);
								ok = !memcmp(&w, &u, 4) || (isnan(w) && isnan(u));
							}
							if (!ok && !wrong++)
								first = base + d;
						}
			cr_expect_eq(wrong, 0, "RotaryEmbedding %s case %zu: %lld wrong, the first #%lld", tn, c, (long long)wrong,
				     (long long)first);
			exec_free(x);
			graph_free(g);
			xfree(xd);
			xfree(cd);
			xfree(sdat);
			xfree(pd);
		}
}

/* #52 rotary: GridSample's float32/float64 channel rows (a block of points' taps listed once, each
 * channel's outputs a contiguous row): 2-D bilinear and nearest, zeros/border/reflection padding,
 * align_corners or not, against the rule written here (PyTorch's unnormalize, reflect and clip in
 * double; the taps y-major with weight wy wx, zero ones and those outside X skipped; the sum in
 * double, rounded once), bit for bit, any NaN for a NaN: cf_fill's X (NaN, infinities, -0,
 * subnormals, huge), grid values NaN, +-inf, +-0, +-1, on taps and random in [-1.3, 1.3]; 1 x 1
 * planes, odd sizes and more points than a block and a piece of the pool. */
static int gsr_axis(int nearest, int pad, int align, double g, int64_t S, int64_t *idx, double *w)
{
	double c = align ? (g + 1) / 2 * (double)(S - 1) : ((g + 1) * (double)S - 1) / 2, hi = (double)(S - 1);
	if (pad == 2) {
		double lo2 = align ? 0 : -1, hi2 = align ? 2 * hi : 2 * (double)S - 1;
		if (lo2 == hi2)
			c = 0;
		else {
			double lo = lo2 / 2, span = (hi2 - lo2) / 2, u = fabs(c - lo), extra = fmod(u, span);
			c = fmod(floor(u / span), 2) != 0 ? span - extra + lo : extra + lo;
		}
	}
	if (pad)
		c = c <= 0 ? 0 : c >= hi ? hi : c;
	if (nearest) {
		double r = nearbyint(c);
		idx[0] = r >= 0 && r < (double)S ? (int64_t)r : -1;
		w[0] = 1;
		return 1;
	}
	double f = floor(c);
	for (int k = 0; k < 2; k++)
		idx[k] = f + k >= 0 && f + k < (double)S ? (int64_t)(f + k) : -1;
	w[1] = c - f;
	w[0] = 1 - w[1];
	return 2;
}

Test(exec, grid_sample_matches_its_rule_bit_for_bit)
{
	static const int64_t shapes[][6] = {{2, 3, 5, 7, 4, 6}, {1, 1, 1, 1, 1, 1}, {1, 2, 1, 1, 3, 5}, {2, 5, 9, 11, 13, 17}};
	static const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1, -1, 1e30, -1e30, 1.5, -1.5, 0.5};
	for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
		for (int mode = 0; mode < 12; mode++)
			for (int f64 = 0; f64 < 2; f64++) {
				int nearest = mode % 2, pad = mode / 2 % 3, align = mode / 6, dt = f64 ? DT_DOUBLE : DT_FLOAT;
				int64_t N = shapes[sh][0], C = shapes[sh][1], H = shapes[sh][2], W = shapes[sh][3], OH = shapes[sh][4],
					OW = shapes[sh][5], nx = N * C * H * W, ng = N * OH * OW * 2;
				size_t es = dtype_size(dt);
				void *xd = xmalloc((size_t)nx * 8 + 8), *gd = xmalloc((size_t)ng * 8 + 8);
				cf_fill(dt, xd, nx, 5 + sh);
				uint64_t seed = 99 + sh;
				for (int64_t i = 0; i < ng; i++) {
					seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
					int64_t S = i % 2 ? H : W, k = (int64_t)(seed >> 40) % (S + 1);
					double v = i < (int64_t)(sizeof special / sizeof *special) ? special[i]
						   : i % 5 == 1 && S > 1		     ? 2.0 * (double)k / (double)(S - 1) - 1 /* on a tap */
						   : i % 5 == 3			     ? (2.0 * (double)k + 1) / (double)S - 1
										     : (double)(seed >> 11) / 0x1p53 * 2.6 - 1.3;
					if (f64)
						((double *)gd)[i] = v;
					else
						((float *)gd)[i] = (float)v;
				}
				static const char *const pads[] = {"zeros", "border", "reflection"};
				char text[1024];
				const char *tn = dtype_name(dt);
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 16\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld, %lld]}, "
					 "{name: g, dtype: %s, shape: [%lld, %lld, %lld, 2]}]\nnodes:\n  - {op: GridSample, inputs: [x, g], "
					 "outputs: [y], attrs: {mode: %s, padding_mode: %s, align_corners: %d}}\noutputs: [{name: y}]\n",
					 tn, (long long)N, (long long)C, (long long)H, (long long)W, tn, (long long)N, (long long)OH,
					 (long long)OW, nearest ? "nearest" : "bilinear", pads[pad], align);
				struct graph *g = load_text("gridsample.yaml", text);
				struct rtensor t[2] = {{.dtype = dt, .ndim = 4, .dims = {N, C, H, W}, .numel = nx, .data = xd, .nbytes = nx * es, .known = 1},
						       {.dtype = dt, .ndim = 4, .dims = {N, OH, OW, 2}, .numel = ng, .data = gd, .nbytes = ng * es, .known = 1}};
				const char *names[2] = {"x", "g"};
				struct gd_err e = {0};
				struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
				struct exec *x = exec_run(g, &o, NULL, &e);
				cr_assert(x, "GridSample: %s", e.msg);
				const char *y = exec_value(x, g->outputs[0])->data;
				int64_t wrong = 0, first = -1;
#define GGET(p, i) (f64 ? ((const double *)(p))[i] : (double)((const float *)(p))[i])
				for (int64_t n = 0; n < N; n++)
					for (int64_t pt = 0; pt < OH * OW; pt++) {
						int64_t iy[2], ix[2];
						double wy[2], wx[2];
						int ty = gsr_axis(nearest, pad, align, GGET(gd, (n * OH * OW + pt) * 2 + 1), H, iy, wy);
						int tx = gsr_axis(nearest, pad, align, GGET(gd, (n * OH * OW + pt) * 2), W, ix, wx);
						for (int64_t ch = 0; ch < C; ch++) {
							double v = 0;
							for (int a = 0; a < ty; a++)
								for (int b = 0; b < tx; b++) {
									double w = wy[a] * wx[b];
									if (iy[a] >= 0 && ix[b] >= 0 && w != 0)
										v += w * GGET(xd, ((n * C + ch) * H + iy[a]) * W + ix[b]);
								}
							int64_t at = (n * C + ch) * OH * OW + pt;
							int ok;
							if (f64) {
								double u;
								memcpy(&u, y + at * 8, 8);
								ok = !memcmp(&v, &u, 8) || (isnan(v) && isnan(u));
							} else {
								float wf = (float)v, u;
								memcpy(&u, y + at * 4, 4);
								ok = !memcmp(&wf, &u, 4) || (isnan(wf) && isnan(u));
							}
							if (!ok && !wrong++)
								first = at;
						}
					}
#undef GGET
				cr_expect_eq(wrong, 0, "GridSample %s %s %s align %d, shape #%zu: %lld wrong, the first #%lld", tn,
					     nearest ? "nearest" : "bilinear", pads[pad], align, sh, (long long)wrong, (long long)first);
				exec_free(x);
				graph_free(g);
				xfree(xd);
				xfree(gd);
			}
}

/* #52 select: TopK's lanes over the threads, Unique's one-element slices grouped by a hash, and
 * MaxUnpool's scatter at the default shape as typed loops, against their rules written here over
 * ties, NaN, +-0, infinities, subnormals and odd lengths (0 and 1 elements among them), float32 and
 * float64 (and int64 for Unique and MaxUnpool), bit for bit. */

/* a one-node graph over inputs (the given tensors, copied: a run may reuse them) */
static struct exec *sel_run(struct graph **g, const char *ins, const char *node, const char *outs, const struct rtensor *t,
			    const char **names, int n, void **copies)
{
	char text[1024];
	snprintf(text, sizeof text, "graphdiet: 1\nopset: 18\ninputs: [%s]\nnodes:\n  - %s\noutputs: [%s]\n", ins, node, outs);
	*g = load_text("select.yaml", text);
	struct rtensor c[4];
	for (int k = 0; k < n; k++) {
		c[k] = t[k];
		copies[k] = xmalloc((size_t)t[k].nbytes + 1);
		memcpy(copies[k], t[k].data, (size_t)t[k].nbytes);
		c[k].data = copies[k];
	}
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = c, .input_names = names, .n_inputs = n};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s: %s", node, e.msg);
	return x;
}

/* element i of a float32/float64/int64 array as rt_get reads it */
static double sel_at(int dt, const void *p, int64_t i)
{
	return dt == DT_FLOAT ? ((const float *)p)[i] : dt == DT_DOUBLE ? ((const double *)p)[i] : (double)((const int64_t *)p)[i];
}

/* a > b, NaN the largest: select.c's order */
static int sel_gt(double a, double b)
{
	return isnan(a) ? !isnan(b) : a > b;
}

/* n values of dt drawn from a few (ties), specials first, or from many (pool 0) */
static void sel_fill(int dt, void *p, int64_t n, uint64_t seed, int pool)
{
	static const double sp[] = {NAN, 0.0, -0.0, INFINITY, -INFINITY, 1e-310, -1e-40, 1.5, -2.5, 3e38, 7};
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed >> 17;
		double v = pool ? sp[r % (uint64_t)pool] : (double)(int64_t)(r % 1000003) / 7 - 70000;
		if (dt == DT_FLOAT)
			((float *)p)[i] = (float)v;
		else if (dt == DT_DOUBLE)
			((double *)p)[i] = v;
		else
			((int64_t *)p)[i] = isnan(v) ? INT64_MIN : fabs(v) > 1e18 ? (v > 0 ? INT64_MAX : -INT64_MAX) : (int64_t)(v * 3);
	}
}

Test(exec, select_topk_matches_its_rule)
{
	static const struct { int64_t r, len, k; int ax, pool; } cases[] = {
		{5, 2000, 10, 1, 11}, {7, 301, 3, 1, 0}, {3, 1, 1, 1, 11}, {4, 7, 7, 1, 5}, {6, 100, 0, 1, 11},
		{9, 80, 9, 0, 11}, {33, 50, 5, 0, 3}, {1, 9, 2, 1, 2}, {64, 513, 20, 1, 11},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int largest = 0; largest < 2; largest++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT;
				int64_t R = cases[c].r, len = cases[c].len, k = cases[c].k, ax = cases[c].ax;
				int64_t d0 = ax ? R : len, d1 = ax ? len : R, n = R * len;
				void *xd = xmalloc((size_t)n * 8 + 8);
				sel_fill(dt, xd, n, 11 + c, cases[c].pool);
				char ins[200], node[200];
				snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%lld, %lld]}, {name: k, dtype: int64, shape: [1]}",
					 dtype_name(dt), (long long)d0, (long long)d1);
				snprintf(node, sizeof node, "{op: TopK, inputs: [x, k], outputs: [y, i], attrs: {axis: %lld, largest: %d}}",
					 (long long)ax, largest);
				struct rtensor t[2] = {{.dtype = dt, .ndim = 2, .dims = {d0, d1}, .numel = n, .data = xd, .nbytes = n * (f64 ? 8 : 4), .known = 1},
						       {.dtype = DT_INT64, .ndim = 1, .dims = {1}, .numel = 1, .data = &k, .nbytes = 8, .known = 1}};
				const char *names[2] = {"x", "k"};
				for (int th = 1; th <= 3; th += 2) {
					pool_set_threads(th);
					struct graph *g;
					void *cp[2];
					struct exec *x = sel_run(&g, ins, node, "{name: y}, {name: i}", t, names, 2, cp);
					const struct rtensor *y = exec_value(x, g->outputs[0]), *iy = exec_value(x, g->outputs[1]);
					cr_assert_eq(y->numel, R * k);
					int64_t wrong = 0, first = -1;
					char *taken = xmalloc((size_t)len + 1);
					for (int64_t lane = 0; lane < R; lane++) {
						memset(taken, 0, (size_t)len + 1);
						for (int64_t j = 0; j < k; j++) {
							int64_t b = -1; /* the lowest untaken index that none untaken comes before */
							for (int64_t q = 0; q < len; q++) {
								if (taken[q])
									continue;
								double vq = sel_at(dt, xd, ax ? lane * len + q : q * R + lane);
								double vb = b < 0 ? 0 : sel_at(dt, xd, ax ? lane * len + b : b * R + lane);
								if (b < 0 || (largest ? sel_gt(vq, vb) : sel_gt(vb, vq)))
									b = q;
							}
							taken[b] = 1;
							int64_t at = ax ? lane * k + j : j * R + lane;
							double v = sel_at(dt, xd, ax ? lane * len + b : b * R + lane);
							int ok = ((const int64_t *)iy->data)[at] == b;
							if (f64) {
								double u = ((const double *)y->data)[at];
								ok &= !memcmp(&u, &v, 8) || (isnan(u) && isnan(v));
							} else {
								float u = ((const float *)y->data)[at], w = (float)v;
								ok &= !memcmp(&u, &w, 4) || (isnan(u) && isnan(w));
							}
							if (!ok && !wrong++)
								first = at;
						}
					}
					cr_expect_eq(wrong, 0, "TopK case %zu %s largest %d, %d threads: %lld wrong, the first #%lld", c,
						     dtype_name(dt), largest, th, (long long)wrong, (long long)first);
					free(taken);
					exec_free(x);
					graph_free(g);
					free(cp[0]);
					free(cp[1]);
				}
				pool_set_threads(1);
				xfree(xd);
			}
}

/* int64 compared as integers (#52 select2's, below) */
static int s2_lt(int dt, const void *p, int64_t i, int64_t j);
static int s2_eq(int dt, const void *p, int64_t i, int64_t j);

Test(exec, select_unique_matches_its_rule)
{
	static const struct { int64_t n; int pool, axis; } cases[] = {
		{0, 11, 0}, {1, 11, 0}, {7, 11, 0}, {1000, 11, 0}, {1001, 2, 0}, {777, 0, 0}, {20000, 0, 0}, {513, 11, 1}, {1, 3, 1},
	};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int d = 0; d < 3; d++)
			for (int sorted = 0; sorted < 2; sorted++) {
				int dt = dts[d];
				int64_t n = cases[c].n;
				size_t es = dtype_size(dt);
				void *xd = xmalloc((size_t)n * 8 + 8);
				sel_fill(dt, xd, n, 5 + c, cases[c].pool);
				char ins[200], node[200];
				/* with an axis: x is (1, n), whose slices along 1 are single elements */
				snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%s%lld]}", dtype_name(dt), cases[c].axis ? "1, " : "",
					 (long long)n);
				snprintf(node, sizeof node, "{op: Unique, inputs: [x], outputs: [y, i, v, c], attrs: {sorted: %d%s}}", sorted,
					 cases[c].axis ? ", axis: 1" : "");
				struct rtensor t = {.dtype = dt, .ndim = 1 + cases[c].axis, .numel = n, .data = xd, .nbytes = n * (int64_t)es, .known = 1};
				t.dims[0] = cases[c].axis ? 1 : n;
				t.dims[1] = n;
				const char *names[1] = {"x"};
				struct graph *g;
				void *cp[1];
				struct exec *x = sel_run(&g, ins, node, "{name: y}, {name: i}, {name: v}, {name: c}", &t, names, 1, cp);
				const struct rtensor *o[4];
				for (int k = 0; k < 4; k++)
					o[k] = exec_value(x, g->outputs[k]);
				/* the groups by first occurrence, then (sorted) by value: insertion sorts */
				int64_t *first = xmalloc((size_t)n * 8 + 8), *grp = xmalloc((size_t)n * 8 + 8), u = 0;
				int64_t *order = xmalloc((size_t)n * 8 + 8), *rank = xmalloc((size_t)n * 8 + 8);
				for (int64_t j = 0; j < n; j++) {
					int64_t g2 = u - 1;
					while (g2 >= 0 && !s2_eq(dt, xd, first[g2], j))
						g2--;
					if (g2 < 0)
						first[g2 = u++] = j;
					grp[j] = g2;
				}
				for (int64_t r = 0; r < u; r++) {
					int64_t s = r;
					for (; sorted && s > 0 && s2_lt(dt, xd, first[r], first[order[s - 1]]); s--)
						order[s] = order[s - 1];
					order[s] = r;
				}
				for (int64_t r = 0; r < u; r++)
					rank[order[r]] = r;
				cr_expect_eq(o[0]->numel, u, "Unique case %zu %s sorted %d: %lld groups, not %lld", c, dtype_name(dt), sorted,
					     (long long)o[0]->numel, (long long)u);
				int64_t wrong = 0;
				for (int64_t r = 0; r < u && o[0]->numel == u; r++) {
					int64_t j = first[order[r]], cnt = 0;
					for (int64_t q = 0; q < n; q++)
						cnt += grp[q] == order[r];
					wrong += memcmp((const char *)o[0]->data + r * (int64_t)es, (const char *)xd + j * (int64_t)es, es) != 0;
					wrong += ((const int64_t *)o[1]->data)[r] != j;
					wrong += ((const int64_t *)o[3]->data)[r] != cnt;
				}
				for (int64_t j = 0; j < n && o[0]->numel == u; j++)
					wrong += ((const int64_t *)o[2]->data)[j] != rank[grp[j]];
				cr_expect_eq(wrong, 0, "Unique case %zu %s sorted %d: %lld wrong", c, dtype_name(dt), sorted, (long long)wrong);
				exec_free(x);
				graph_free(g);
				free(cp[0]);
				xfree(xd);
				xfree(first);
				xfree(grp);
				xfree(order);
				xfree(rank);
			}
}

Test(exec, select_maxunpool_matches_its_rule)
{
	static const struct { int64_t n, c, h, w; } cases[] = {{2, 3, 4, 6}, {1, 1, 1, 1}, {8, 64, 5, 3}, {1, 5, 0, 4}, {3, 7, 9, 11}};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int d = 0; d < 3; d++) {
			int dt = dts[d];
			size_t es = dtype_size(dt);
			int64_t N = cases[c].n, C = cases[c].c, H = cases[c].h, W = cases[c].w, n = N * C * H * W;
			int64_t m = N * C * (2 * H) * (2 * W);
			void *xd = xmalloc((size_t)n * 8 + 8);
			int64_t *iv = xmalloc((size_t)n * 8 + 8);
			sel_fill(dt, xd, n, 7 + c, 11);
			uint64_t s = 99 + c;
			for (int64_t i = 0; i < n; i++) { /* anywhere in the output, repeats too (the later wins) */
				s = s * 6364136223846793005ULL + 1442695040888963407ULL;
				iv[i] = (int64_t)((s >> 20) % (uint64_t)m);
			}
			char ins[200];
			snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%lld, %lld, %lld, %lld]}, {name: ix, dtype: int64, shape: [%lld, %lld, %lld, %lld]}",
				 dtype_name(dt), (long long)N, (long long)C, (long long)H, (long long)W, (long long)N, (long long)C, (long long)H,
				 (long long)W);
			struct rtensor t[2] = {{.dtype = dt, .ndim = 4, .dims = {N, C, H, W}, .numel = n, .data = xd, .nbytes = n * (int64_t)es, .known = 1},
					       {.dtype = DT_INT64, .ndim = 4, .dims = {N, C, H, W}, .numel = n, .data = iv, .nbytes = n * 8, .known = 1}};
			const char *names[2] = {"x", "ix"};
			struct graph *g;
			void *cp[2];
			struct exec *x = sel_run(&g, ins, "{op: MaxUnpool, inputs: [x, ix], outputs: [y], attrs: {kernel_shape: [2, 2], strides: [2, 2]}}",
						 "{name: y}", t, names, 2, cp);
			const struct rtensor *y = exec_value(x, g->outputs[0]);
			cr_assert_eq(y->numel, m);
			char *want = xcalloc((size_t)m + 1, es);
			for (int64_t i = 0; i < n; i++)
				memcpy(want + iv[i] * (int64_t)es, (const char *)xd + i * (int64_t)es, es);
			cr_expect_eq(memcmp(want, y->data, (size_t)m * es), 0, "MaxUnpool case %zu %s: other bits", c, dtype_name(dt));
			exec_free(x);
			graph_free(g);
			free(cp[0]);
			free(cp[1]);
			free(want);
			/* an index past the output: an error naming it */
			if (n) {
				iv[n - 1] = m;
				struct gd_err e = {0};
				struct graph *g2 = load_text("select.yaml", "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: float32, shape: [1, 1, 1, 1]}, "
								    "{name: ix, dtype: int64, shape: [1, 1, 1, 1]}]\nnodes:\n  - {op: MaxUnpool, inputs: [x, ix], "
								    "outputs: [y], attrs: {kernel_shape: [2, 2], strides: [2, 2]}}\noutputs: [{name: y}]\n");
				int64_t bad = 4;
				float one = 1;
				struct rtensor b[2] = {{.dtype = DT_FLOAT, .ndim = 4, .dims = {1, 1, 1, 1}, .numel = 1, .data = &one, .nbytes = 4, .known = 1},
						       {.dtype = DT_INT64, .ndim = 4, .dims = {1, 1, 1, 1}, .numel = 1, .data = &bad, .nbytes = 8, .known = 1}};
				struct exec_opts o = {.inputs = b, .input_names = names, .n_inputs = 2};
				struct exec *x2 = exec_run(g2, &o, NULL, &e);
				cr_expect_null(x2);
				cr_expect(strstr(e.msg, "index 4 of I is outside the output"), "%s", e.msg);
				exec_free(x2);
				graph_free(g2);
			}
			xfree(xd);
			xfree(iv);
		}
}

/* #52 shape: Tile as copies of runs, DepthToSpace/SpaceToDepth as permuted_copy, OneHot as a fill
 * and one store per index, NonZero counted and written in chunks over the pool: each against its
 * element rule written here, over dtypes of 1, 2, 4 and 8 bytes, odd, empty and unit shapes, at 1
 * and 3 threads. */
struct shape_run {
	struct graph *g;
	struct exec *x;
	const struct rtensor *y;
};

/* node (YAML) over inputs named x, r, v (n of them) of ts, run with th threads */
static void shape_run(struct shape_run *s, const char *node, struct rtensor *ts, int n, int th)
{
	char text[1024], ins[512] = "";
	static const char *names[3] = {"x", "r", "v"};
	for (int i = 0; i < n; i++) {
		char dims[128] = "";
		for (int d = 0; d < ts[i].ndim; d++)
			snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? ", " : "", (long long)ts[i].dims[d]);
		snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "%s{name: %s, dtype: %s, shape: [%s]}", i ? ", " : "",
			 names[i], dtype_name(ts[i].dtype), dims);
	}
	snprintf(text, sizeof text, "graphdiet: 1\nopset: 18\ninputs: [%s]\nnodes:\n  - %s\noutputs: [{name: y}]\n", ins,
		 node);
	s->g = load_text("shape.yaml", text);
	pool_set_threads(th);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = ts, .input_names = names, .n_inputs = n};
	s->x = exec_run(s->g, &o, NULL, &e);
	pool_set_threads(1);
	cr_assert(s->x, "%s: %s", node, e.msg);
	s->y = exec_value(s->x, s->g->outputs[0]);
}

static void shape_done(struct shape_run *s)
{
	exec_free(s->x);
	graph_free(s->g);
}

static struct rtensor shape_tensor(int dt, int nd, const int64_t *dims, void *data)
{
	struct rtensor t = {.dtype = dt, .ndim = nd, .numel = 1, .data = data, .known = 1};
	for (int i = 0; i < nd; i++)
		t.numel *= t.dims[i] = dims[i];
	t.nbytes = (size_t)t.numel * dtype_size(dt);
	return t;
}

static void shape_bytes(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (uint8_t)(seed >> 56);
	}
}

Test(exec, tile_matches_its_rule_bit_for_bit)
{
	static const struct {
		int nd;
		int64_t d[4], r[4];
	} cases[] = {
		{4, {8, 6, 5, 7}, {1, 2, 1, 1}}, {4, {3, 5, 7, 9}, {2, 1, 3, 1}}, {4, {2, 3, 4, 5}, {1, 1, 1, 3}},
		{3, {5, 1, 7}, {3, 4, 2}},       {2, {17, 1}, {1, 5}},             {1, {13}, {4}},
		{1, {1}, {1}},                   {2, {3, 4}, {1, 1}},              {3, {2, 0, 3}, {2, 2, 2}},
		{3, {2, 3, 3}, {2, 0, 2}},       {2, {300, 41}, {3, 2}},           {4, {1, 1, 1, 1}, {3, 1, 2, 1}},
		{3, {1, 70, 5}, {1, 1, 3}},      {4, {2, 40, 3, 5}, {1, 2, 3, 4}},
	};
	static const int dts[] = {DT_UINT8, DT_INT16, DT_FLOAT, DT_DOUBLE}; /* (not float16: its NaNs' bits change on input) */
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (size_t t = 0; t < 4; t++)
			for (int th = 1; th <= 3; th += 2) {
				int nd = cases[c].nd, dt = dts[t];
				size_t es = dtype_size(dt);
				int64_t od[4], rd[1] = {nd}, on = 1, xn = 1;
				for (int i = 0; i < nd; i++) {
					od[i] = cases[c].d[i] * cases[c].r[i];
					on *= od[i];
					xn *= cases[c].d[i];
				}
				uint8_t *xd = xmalloc((size_t)xn * es + 1);
				shape_bytes(xd, (size_t)xn * es, c * 7 + t);
				int64_t rep[4];
				memcpy(rep, cases[c].r, sizeof rep);
				struct rtensor ts[2] = {shape_tensor(dt, nd, cases[c].d, xd), shape_tensor(DT_INT64, 1, rd, rep)};
				struct shape_run s;
				shape_run(&s, "{op: Tile, inputs: [x, r], outputs: [y]}", ts, 2, th);
				cr_assert_eq(s.y->numel, on, "case %zu", c);
				int64_t wrong = 0;
				for (int64_t e = 0; e < on; e++) {
					int64_t at = 0, q = e, st = 1;
					for (int i = nd - 1; i >= 0; q /= od[i], st *= cases[c].d[i--])
						at += q % od[i] % cases[c].d[i] * st;
					wrong += memcmp((const uint8_t *)s.y->data + e * es, xd + at * es, es) != 0;
				}
				cr_expect_eq(wrong, 0, "Tile case %zu %s at %d threads: %lld wrong", c, dtype_name(dt), th,
					     (long long)wrong);
				shape_done(&s);
				xfree(xd);
			}
}

Test(exec, depth_space_shuffles_match_their_rule)
{
	static const int64_t shapes[][5] = {/* N C H W block */
					    {2, 8, 3, 5, 2}, {1, 18, 7, 3, 3}, {3, 4, 4, 6, 2}, {1, 1, 1, 1, 1},
					    {2, 32, 9, 11, 4}, {0, 4, 2, 2, 2}, {2, 12, 1, 1, 2}};
	static const int dts[] = {DT_UINT8, DT_INT16, DT_FLOAT, DT_DOUBLE};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (int mode = 0; mode < 3; mode++) /* DCR, CRD, SpaceToDepth */
			for (size_t t = 0; t < 4; t++)
				for (int th = 1; th <= 3; th += 2) {
					int64_t n = shapes[c][0], ch = shapes[c][1], h = shapes[c][2], w = shapes[c][3], b = shapes[c][4];
					int64_t xd4[4] = {n, ch, h, w};
					if (mode == 2) { /* SpaceToDepth's input: the DepthToSpace output's shape */
						xd4[1] = ch / (b * b);
						xd4[2] = h * b;
						xd4[3] = w * b;
					}
					int dt = dts[t];
					size_t es = dtype_size(dt);
					int64_t xn = xd4[0] * xd4[1] * xd4[2] * xd4[3];
					uint8_t *xd = xmalloc((size_t)xn * es + 1);
					shape_bytes(xd, (size_t)xn * es, c * 31 + t * 3 + (uint64_t)mode);
					struct rtensor ts[1] = {shape_tensor(dt, 4, xd4, xd)};
					char node[160];
					snprintf(node, sizeof node, "{op: %s, inputs: [x], outputs: [y], attrs: {blocksize: %lld%s}}",
						 mode == 2 ? "SpaceToDepth" : "DepthToSpace", (long long)b, mode == 1 ? ", mode: CRD" : "");
					struct shape_run s;
					shape_run(&s, node, ts, 1, th);
					cr_assert_eq(s.y->numel, xn, "case %zu", c);
					/* (n, c, h b + i, w b + j) of the deep (n, C, h, w): channel (i b + j) C/b^2 + c in DCR
					 * and SpaceToDepth, c b^2 + i b + j in CRD */
					int64_t cc = ch / (b * b), wrong = 0;
					for (int64_t e = 0; e < xn; e++) {
						int64_t N = e / (cc * h * b * w * b), r = e % (cc * h * b * w * b), C = r / (h * b * w * b);
						int64_t Y = r / (w * b) % (h * b), X = r % (w * b), i = Y % b, j = X % b;
						int64_t deep = ((N * ch + (mode == 1 ? C * b * b + i * b + j : (i * b + j) * cc + C)) * h + Y / b) * w + X / b;
						const uint8_t *shallow = mode == 2 ? xd + e * es : (const uint8_t *)s.y->data + e * es;
						const uint8_t *d = mode == 2 ? (const uint8_t *)s.y->data + deep * es : xd + deep * es;
						wrong += memcmp(shallow, d, es) != 0;
					}
					cr_expect_eq(wrong, 0, "%s case %zu %s at %d threads: %lld wrong", node, c, dtype_name(dt), th,
						     (long long)wrong);
					shape_done(&s);
					xfree(xd);
				}
}

Test(exec, one_hot_matches_its_rule_bit_for_bit)
{
	static const struct {
		int dt;
		uint64_t off, on; /* the values' bits */
	} vals[] = {
		{DT_FLOAT, 0x80000000u, 0x7fc00001u},   /* -0, a NaN */
		{DT_DOUBLE, 0x3fe0000000000000u, 0xfff0000000000000u}, /* 0.5, -inf */
		{DT_INT64, (uint64_t)-3, 7},          {DT_INT32, 0x01010101u, 0}, /* off all one byte */
		{DT_UINT8, 0, 1},                     {DT_FLOAT16, 0x3c00, 0},    /* 1, 0 */
	};
	static const struct {
		int nd, axis;
		int64_t d[2], depth;
	} cases[] = {{2, 0, {5, 7}, 10}, {2, 1, {5, 7}, 3}, {2, -1, {5, 7}, 1}, {1, 0, {1}, 4},
		     {2, -1, {3, 0}, 5}, {1, -1, {3001}, 2000}, {1, 0, {777}, 13}};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (size_t v = 0; v < sizeof vals / sizeof *vals; v++)
			for (int th = 1; th <= 3; th += 2) {
				int64_t nx = cases[c].d[0] * (cases[c].nd > 1 ? cases[c].d[1] : 1), depth = cases[c].depth;
				int64_t *ix = xmalloc((size_t)nx * 8 + 8), one = 1, two = 2, vd[2];
				for (int64_t i = 0; i < nx; i++) /* in range, negative, -depth, depth, below -depth, huge */
					ix[i] = (int64_t[]){i % depth, -1 - i % depth, -depth, depth, -depth - 1, INT64_MAX / 3}[i % 6];
				size_t es = dtype_size(vals[v].dt);
				memcpy(&vd[0], &vals[v].off, es); /* (little-endian: the low bytes) */
				memcpy((uint8_t *)vd + es, &vals[v].on, es);
				struct rtensor ts[3] = {shape_tensor(DT_INT64, cases[c].nd, cases[c].d, ix),
							shape_tensor(DT_INT64, 1, &one, &depth), shape_tensor(vals[v].dt, 1, &two, vd)};
				char node[160];
				snprintf(node, sizeof node, "{op: OneHot, inputs: [x, r, v], outputs: [y], attrs: {axis: %d}}",
					 cases[c].axis);
				struct shape_run s;
				shape_run(&s, node, ts, 3, th);
				int ax = cases[c].axis < 0 ? cases[c].axis + cases[c].nd + 1 : cases[c].axis;
				int64_t outer = 1, inner = 1, wrong = 0;
				for (int i = 0; i < cases[c].nd; i++)
					*(i < ax ? &outer : &inner) *= cases[c].d[i];
				cr_assert_eq(s.y->numel, outer * depth * inner, "case %zu", c);
				cr_assert_eq(s.y->dtype, vals[v].dt);
				for (int64_t p = 0; p < outer; p++)
					for (int64_t j = 0; j < depth; j++)
						for (int64_t i = 0; i < inner; i++) {
							int64_t h = ix[p * inner + i], k = h < 0 ? h + depth : h;
							const void *want = k == j ? &vals[v].on : &vals[v].off;
							wrong += memcmp((const uint8_t *)s.y->data + ((p * depth + j) * inner + i) * es, want, es) != 0;
						}
				cr_expect_eq(wrong, 0, "OneHot case %zu %s at %d threads: %lld wrong", c, dtype_name(vals[v].dt), th,
					     (long long)wrong);
				shape_done(&s);
				xfree(ix);
			}
}

Test(exec, nonzero_matches_its_rule)
{
	static const int64_t shapes[][3] = {{3, 1, 40000}, {7, 5, 3}, {1, 1, 1}, {2, 0, 3}, {1, 1, 16384}, {1, 1, 16385}};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64, DT_INT16, DT_BOOL, DT_UINT8, DT_FLOAT16};
	for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
		for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
			for (int rank = 1; rank <= 3; rank += 2)
				for (int th = 1; th <= 3; th += 2) {
					int dt = dts[t];
					size_t es = dtype_size(dt);
					int64_t n = shapes[c][0] * shapes[c][1] * shapes[c][2], flat[1] = {n};
					uint8_t *xd = xmalloc((size_t)n * es + 1);
					shape_bytes(xd, (size_t)n * es, c * 11 + t);
					/* about half the elements zero; the rest random bits (NaNs, infinities, subnormals),
					 * and -0 among them */
					for (int64_t i = 0; i < n; i++)
						if (xd[i * es] & 1)
							memset(xd + i * es, 0, es);
						else if (!(xd[i * es] & 6) && dtype_is_float(dt))
							memset(xd + i * es, 0, es), xd[i * es + es - 1] = 0x80;
					struct rtensor ts[1] = {rank == 1 ? shape_tensor(dt, 1, flat, xd) : shape_tensor(dt, 3, shapes[c], xd)};
					struct shape_run s;
					shape_run(&s, "{op: NonZero, inputs: [x], outputs: [y]}", ts, 1, th);
					const int64_t *y = s.y->data;
					int64_t nnz = 0, wrong = 0;
					uint8_t *zero = xmalloc((size_t)n + 1);
					for (int64_t i = 0; i < n; i++) {
						if (dt == DT_FLOAT)
							zero[i] = ((const float *)xd)[i] == 0;
						else if (dt == DT_DOUBLE)
							zero[i] = ((const double *)xd)[i] == 0;
						else if (dt == DT_FLOAT16) /* +-0: no bits but the sign's */
							zero[i] = !(((const uint16_t *)xd)[i] & 0x7fff);
						else {
							uint64_t u = 0;
							memcpy(&u, xd + i * es, es);
							zero[i] = !u;
						}
						nnz += !zero[i];
					}
					cr_assert_eq(s.y->ndim, 2);
					cr_assert_eq(s.y->dims[0], rank);
					cr_assert_eq(s.y->dims[1], nnz, "case %zu %s: %lld nonzero, not %lld", c, dtype_name(dt),
						     (long long)nnz, (long long)s.y->dims[1]);
					for (int64_t i = 0, j = 0; i < n; i++) {
						if (zero[i])
							continue;
						if (rank == 1)
							wrong += y[j] != i;
						else
							wrong += y[j] != i / (shapes[c][1] * shapes[c][2]) ||
								 y[nnz + j] != i / shapes[c][2] % shapes[c][1] || y[2 * nnz + j] != i % shapes[c][2];
						j++;
					}
					xfree(zero);
					cr_expect_eq(wrong, 0, "NonZero case %zu %s rank %d at %d threads: %lld wrong", c, dtype_name(dt),
						     rank, th, (long long)wrong);
					shape_done(&s);
					xfree(xd);
				}
}

/* #52 select2: TopK's k best by insertion over keys (runs of 16 checked against the k-th at once)
 * and Unique's hash over keys, in the element's own type: against a stable sort per lane and a
 * grouping written here, over ties, NaN, +-0, infinities, subnormals, int64 past 2^53 (2^53 and
 * 2^53 + 1 are two values), odd lengths, 0 and 1 elements, float32, float64 and int64, k = 1, 5,
 * 10, 63 and the lane's length, largest and sorted 0/1, 1 and 3 threads; bit for bit. */

/* element i of p comes strictly before element j in select.c's ascending order (NaN the largest,
 * -0 = +0), int64 compared as integers */
static int s2_lt(int dt, const void *p, int64_t i, int64_t j)
{
	if (dt == DT_INT64)
		return ((const int64_t *)p)[i] < ((const int64_t *)p)[j];
	return sel_gt(sel_at(dt, p, j), sel_at(dt, p, i));
}

static int s2_eq(int dt, const void *p, int64_t i, int64_t j)
{
	return !s2_lt(dt, p, i, j) && !s2_lt(dt, p, j, i);
}

/* n values of dt: many distinct (pool 0, int64 over the whole range), or drawn from the first pool
 * of a few specials (ties); the int64 specials sit about 2^53 and the type's ends */
static void s2_fill(int dt, void *p, int64_t n, uint64_t seed, int pool)
{
	static const int64_t big[] = {(1ll << 53), (1ll << 53) + 1, -(1ll << 53) - 1, INT64_MAX, INT64_MIN, (1ll << 53) - 1,
				      -(1ll << 53), INT64_MAX - 1, 0, INT64_MIN + 1, 7};
	if (dt != DT_INT64) {
		sel_fill(dt, p, n, seed, pool);
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed ^ seed >> 29;
		((int64_t *)p)[i] = pool ? big[(r >> 17) % (uint64_t)pool] : (int64_t)r;
	}
}

/* qsort's context: one lane's values, a stride apart; the order largest first or smallest first,
 * ties by index */
static struct {
	int dt, largest;
	const void *p;
	int64_t base, stride;
} s2_lane;

static int s2_cmp(const void *a, const void *b)
{
	int64_t i = *(const int64_t *)a, j = *(const int64_t *)b, pi = s2_lane.base + i * s2_lane.stride,
		pj = s2_lane.base + j * s2_lane.stride;
	int before = s2_lane.largest ? s2_lt(s2_lane.dt, s2_lane.p, pj, pi) : s2_lt(s2_lane.dt, s2_lane.p, pi, pj);
	int after = s2_lane.largest ? s2_lt(s2_lane.dt, s2_lane.p, pi, pj) : s2_lt(s2_lane.dt, s2_lane.p, pj, pi);
	return before ? -1 : after ? 1 : (i > j) - (i < j);
}

/* a sel_run's graph, run and input copies freed */
static void s2_free(struct exec *x, struct graph *g, void **cp, int n)
{
	exec_free(x);
	graph_free(g);
	for (int k = 0; k < n; k++)
		free(cp[k]);
}

/* the same bits, or both NaN */
static int s2_same(int dt, const void *p, int64_t i, const void *q, int64_t j)
{
	size_t es = dtype_size(dt);
	if (dt != DT_INT64 && isnan(sel_at(dt, p, i)) && isnan(sel_at(dt, q, j)))
		return 1;
	return !memcmp((const char *)p + i * (int64_t)es, (const char *)q + j * (int64_t)es, es);
}

Test(exec, select2_topk_matches_a_stable_sort)
{
	/* (outer, len, inner) about axis 1, k, the pool */
	static const struct { int64_t o, len, in, k; int pool; } cases[] = {
		{1, 2000, 1, 10, 0}, {3, 2000, 1, 5, 11}, {2, 777, 3, 63, 11}, {4, 257, 1, 1, 3}, {2, 63, 2, 63, 11},
		{5, 1, 1, 1, 11},    {2, 0, 3, 0, 11},    {1, 100, 1, 10, 2}, {7, 301, 1, 37, 0}, {3, 50, 5, 10, 5},
		{2, 1001, 1, 1, 1},  {1, 33, 1, 4, 0},
	};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int d = 0; d < 3; d++)
			for (int largest = 0; largest < 2; largest++) {
				int dt = dts[d];
				int64_t O = cases[c].o, len = cases[c].len, In = cases[c].in, k = cases[c].k, n = O * len * In;
				size_t es = dtype_size(dt);
				void *xd = xmalloc((size_t)n * 8 + 8);
				s2_fill(dt, xd, n, 77 + c * 3 + (uint64_t)d, cases[c].pool);
				/* the reference: each lane's indices sorted, the first k */
				int64_t *ref = xmalloc((size_t)(O * In * len) * 8 + 8);
				for (int64_t o = 0; o < O; o++)
					for (int64_t i = 0; i < In; i++) {
						int64_t *r = ref + (o * In + i) * len;
						for (int64_t j = 0; j < len; j++)
							r[j] = j;
						s2_lane.dt = dt;
						s2_lane.largest = largest;
						s2_lane.p = xd;
						s2_lane.base = o * len * In + i;
						s2_lane.stride = In;
						qsort(r, (size_t)len, sizeof *r, s2_cmp);
					}
				char ins[240], node[240];
				snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%lld, %lld, %lld]}, {name: k, dtype: int64, shape: [1]}",
					 dtype_name(dt), (long long)O, (long long)len, (long long)In);
				struct rtensor t[2] = {{.dtype = dt, .ndim = 3, .dims = {O, len, In}, .numel = n, .data = xd, .nbytes = n * (int64_t)es, .known = 1},
						       {.dtype = DT_INT64, .ndim = 1, .dims = {1}, .numel = 1, .data = &k, .nbytes = 8, .known = 1}};
				const char *names[2] = {"x", "k"};
				for (int sorted = 0; sorted < 2; sorted++)
					for (int th = 1; th <= 3; th += 2) {
						snprintf(node, sizeof node,
							 "{op: TopK, inputs: [x, k], outputs: [y, i], attrs: {axis: 1, largest: %d, sorted: %d}}",
							 largest, sorted);
						pool_set_threads(th);
						struct graph *g;
						void *cp[2];
						struct exec *x = sel_run(&g, ins, node, "{name: y}, {name: i}", t, names, 2, cp);
						const struct rtensor *y = exec_value(x, g->outputs[0]), *iy = exec_value(x, g->outputs[1]);
						cr_assert_eq(y->numel, O * k * In);
						int64_t wrong = 0, first = -1;
						for (int64_t o = 0; o < O; o++)
							for (int64_t j = 0; j < k; j++)
								for (int64_t i = 0; i < In; i++) {
									int64_t at = (o * k + j) * In + i, b = ref[(o * In + i) * len + j];
									int ok = ((const int64_t *)iy->data)[at] == b &&
										 s2_same(dt, y->data, at, xd, (o * len + b) * In + i);
									if (!ok && !wrong++)
										first = at;
								}
						cr_expect_eq(wrong, 0, "TopK case %zu %s largest %d sorted %d, %d threads: %lld wrong, the first #%lld",
							     c, dtype_name(dt), largest, sorted, th, (long long)wrong, (long long)first);
						s2_free(x, g, cp, 2);
					}
				pool_set_threads(1);
				xfree(ref);
				xfree(xd);
			}
}

/* Unique over x (n elements; with an axis, x is (2, n) and its slices along 1 are pairs) with the
 * outputs named in outs (y, i, v, c by position; '' where one is not asked for), against the rule: slices equal where every element is (NaN = NaN, -0 =
 * +0, int64 as integers), ascending (sorted) or by first occurrence */
static void s2_unique(int dt, const void *xd, int64_t n, int sorted, int axis, const char *outs, const char *what)
{
	size_t es = dtype_size(dt);
	int64_t rows = axis ? 2 : 1, numel = rows * n;
	char ins[200], node[240];
	snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [%s%lld]}", dtype_name(dt), axis ? "2, " : "", (long long)n);
	snprintf(node, sizeof node, "{op: Unique, inputs: [x], outputs: [%s], attrs: {sorted: %d%s}}", outs, sorted,
		 axis ? ", axis: 1" : "");
	struct rtensor t = {.dtype = dt, .ndim = 1 + axis, .numel = numel, .data = (void *)xd, .nbytes = numel * (int64_t)es, .known = 1};
	t.dims[0] = axis ? 2 : n;
	t.dims[1] = n;
	const char *names[1] = {"x"};
	struct graph *g;
	void *cp[1];
	char outl[200] = "", tok[64];
	snprintf(tok, sizeof tok, "%s", outs);
	for (char *s = strtok(tok, ", "); s; s = strtok(NULL, ", "))
		if (strcmp(s, "''")) /* '': an output not asked for */
			snprintf(outl + strlen(outl), sizeof outl - strlen(outl), "%s{name: %s}", *outl ? ", " : "", s);
	struct exec *x = sel_run(&g, ins, node, outl, &t, names, 1, cp);
	/* slice j's elements are j and n + j (axis) */
	int64_t *first = xmalloc((size_t)n * 8 + 8), *grp = xmalloc((size_t)n * 8 + 8), u = 0;
	int64_t *order = xmalloc((size_t)n * 8 + 8), *rank = xmalloc((size_t)n * 8 + 8);
	for (int64_t j = 0; j < n; j++) {
		int64_t g2 = u - 1;
		for (; g2 >= 0; g2--)
			if (s2_eq(dt, xd, j, first[g2]) && (!axis || s2_eq(dt, xd, n + j, n + first[g2])))
				break;
		if (g2 < 0)
			first[g2 = u++] = j;
		grp[j] = g2;
	}
	for (int64_t r = 0; r < u; r++) {
		int64_t s = r;
		for (; sorted && s > 0; s--) {
			int64_t p = first[order[s - 1]], q = first[r];
			int later = s2_lt(dt, xd, q, p) || (axis && s2_eq(dt, xd, q, p) && s2_lt(dt, xd, n + q, n + p));
			if (!later)
				break;
			order[s] = order[s - 1];
		}
		order[s] = r;
	}
	for (int64_t r = 0; r < u; r++)
		rank[order[r]] = r;
	const struct rtensor *y = exec_value(x, g->outputs[0]);
	cr_assert_eq(y->numel, u * rows, "%s: %lld values, not %lld", what, (long long)y->numel, (long long)(u * rows));
	int64_t wrong = 0;
	for (int k = 1; k < (int)g->n_outputs; k++) {
		const char *nm = g->outputs[k]->name;
		const int64_t *o = exec_value(x, g->outputs[k])->data;
		for (int64_t r = 0; r < u && !strcmp(nm, "i"); r++)
			wrong += o[r] != first[order[r]];
		for (int64_t j = 0; j < n && !strcmp(nm, "v"); j++)
			wrong += o[j] != rank[grp[j]];
		for (int64_t r = 0; r < u && !strcmp(nm, "c"); r++) {
			int64_t cnt = 0;
			for (int64_t q = 0; q < n; q++)
				cnt += grp[q] == order[r];
			wrong += o[r] != cnt;
		}
	}
	for (int64_t r = 0; r < u; r++)
		for (int64_t row = 0; row < rows; row++)
			wrong += !s2_same(dt, y->data, row * u + r, xd, row * n + first[order[r]]);
	cr_expect_eq(wrong, 0, "%s: %lld wrong", what, (long long)wrong);
	s2_free(x, g, cp, 1);
	xfree(first);
	xfree(grp);
	xfree(order);
	xfree(rank);
}

Test(exec, select2_unique_int64_past_2_53)
{
	const int64_t x[3] = {1ll << 53, (1ll << 53) + 1, 1ll << 53};
	s2_unique(DT_INT64, x, 3, 1, 0, "y, i, v, c", "[2^53, 2^53 + 1, 2^53]");
	struct graph *g;
	void *cp[1];
	struct rtensor t = {.dtype = DT_INT64, .ndim = 1, .dims = {3}, .numel = 3, .data = (void *)x, .nbytes = 24, .known = 1};
	const char *names[1] = {"x"};
	struct exec *e = sel_run(&g, "{name: x, dtype: int64, shape: [3]}", "{op: Unique, inputs: [x], outputs: [y, i, v, c]}",
				 "{name: y}, {name: i}, {name: v}, {name: c}", &t, names, 1, cp);
	const struct rtensor *y = exec_value(e, g->outputs[0]), *c = exec_value(e, g->outputs[3]);
	cr_assert_eq(y->numel, 2);
	cr_expect_eq(((const int64_t *)y->data)[0], 1ll << 53);
	cr_expect_eq(((const int64_t *)y->data)[1], (1ll << 53) + 1);
	cr_expect_eq(((const int64_t *)c->data)[0], 2);
	cr_expect_eq(((const int64_t *)c->data)[1], 1);
	s2_free(e, g, cp, 1);
}

Test(exec, select2_unique_matches_its_rule)
{
	/* late: a few new values far in, after runs of the few first ones */
	static const struct { int64_t n; int pool, axis, late; } cases[] = {
		{0, 11, 0, 0},	  {1, 11, 0, 0}, {3, 2, 0, 0}, {1000, 11, 0, 0}, {4097, 3, 0, 0}, {777, 0, 0, 0}, {300, 11, 1, 0},
		{1, 3, 1, 0},	  {0, 3, 1, 0},	 {257, 2, 1, 0}, {3000, 5, 0, 1},  {1500, 1, 0, 1},
	};
	static const char *outs[] = {"y, i, v, c", "y", "y, '', '', c", "y, '', v", "y, i"};
	static const int dts[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
		for (int d = 0; d < 3; d++)
			for (int sorted = 0; sorted < 2; sorted++)
				for (size_t w = 0; w < sizeof outs / sizeof *outs; w++) {
					int64_t n = cases[c].n, numel = (cases[c].axis ? 2 : 1) * n;
					void *xd = xmalloc((size_t)numel * 8 + 8);
					s2_fill(dts[d], xd, numel, 31 + c, cases[c].pool);
					for (int64_t q = 0; cases[c].late && q < 9; q++) /* 9 more groups: past unique_few's 8 */
						s2_fill(dts[d], (char *)xd + (n / 3 + q * n / 15) * (int64_t)dtype_size(dts[d]), 1, 5 + (uint64_t)q, 0);
					char what[160];
					snprintf(what, sizeof what, "Unique case %zu %s sorted %d outputs [%s]", c, dtype_name(dts[d]), sorted, outs[w]);
					s2_unique(dts[d], xd, n, sorted, cases[c].axis, outs[w], what);
					xfree(xd);
				}
}

/* #52 argint: ArgMax and ArgMin over int64 and uint64 compare the integers, not their doubles
 * (2^53 + 1 rounds to 2^53, 2^63 + 1 to 2^63: as doubles, every element below ties) */
Test(exec, argmax_argmin_tell_64_bit_integers_apart)
{
	static const struct {
		const char *op, *dt, *attrs;
		int64_t want;
	} cases[] = {
		{"ArgMax", "int64", "{}", 1},  {"ArgMax", "int64", "{select_last_index: 1}", 2},
		{"ArgMin", "int64", "{}", 0},  {"ArgMin", "int64", "{select_last_index: 1}", 3},
		{"ArgMax", "uint64", "{}", 0}, {"ArgMax", "uint64", "{select_last_index: 1}", 3},
		{"ArgMin", "uint64", "{}", 1}, {"ArgMin", "uint64", "{select_last_index: 1}", 1},
	};
	const int64_t xi[4] = {1ll << 53, (1ll << 53) + 1, (1ll << 53) + 1, 1ll << 53};
	const uint64_t xu[4] = {(1ull << 63) + 1, 1ull << 63, (1ull << 63) + 1, (1ull << 63) + 1};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		int u = cases[c].dt[0] == 'u';
		struct rtensor t = {.dtype = u ? DT_UINT64 : DT_INT64, .ndim = 1, .dims = {4}, .numel = 4,
				    .data = u ? (void *)xu : (void *)xi, .nbytes = 32, .known = 1};
		const char *names[1] = {"x"};
		char ins[96], node[160];
		snprintf(ins, sizeof ins, "{name: x, dtype: %s, shape: [4]}", cases[c].dt);
		snprintf(node, sizeof node, "{op: %s, inputs: [x], outputs: [y], attrs: %s}", cases[c].op, cases[c].attrs);
		struct graph *g;
		void *cp[1];
		struct exec *e = sel_run(&g, ins, node, "{name: y}", &t, names, 1, cp);
		const struct rtensor *y = exec_value(e, g->outputs[0]);
		cr_expect_eq(((const int64_t *)y->data)[0], cases[c].want, "case %zu (%s %s %s): %lld", c, cases[c].op,
			     cases[c].dt, cases[c].attrs, (long long)((const int64_t *)y->data)[0]);
		s2_free(e, g, cp, 1);
	}
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

/* #52 linalg: Det's lanes and DFT/STFT's lanes of lines, against references written here. */

/* Runs text's graph on inputs t (names), with th threads: a copy of output out's data (its element
 * count in *numel). */
static void *la_run(const char *text, struct rtensor *t, const char **names, int n, int th, int out, int64_t *numel)
{
	struct graph *g = load_text("linalg.yaml", text);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = (uint32_t)n};
	pool_set_threads(th);
	struct exec *x = exec_run(g, &o, NULL, &e);
	pool_set_threads(1);
	cr_assert(x, "%s", e.msg);
	const struct rtensor *y = exec_value(x, g->outputs[out]);
	void *copy = xmalloc(y->nbytes + 1);
	memcpy(copy, y->data, y->nbytes);
	*numel = y->numel;
	exec_free(x);
	graph_free(g);
	return copy;
}

/* The determinant as Det's definition computes it (LU with partial pivoting, the first largest
 * |pivot|, in double, 0 at a zero pivot): the reference the lanes must match bit for bit. */
static double la_lu_det(double *a, int m)
{
	double *row[17], det = 1; /* rows through pointers: a swap exchanges two pointers */
	for (int r = 0; r < m; r++)
		row[r] = a + r * m;
	for (int k = 0; k < m; k++) {
		double *best = row[k];
		int at = k;
		for (int i = k + 1; i < m; i++)
			if (fabs(row[i][k]) > fabs(best[k]))
				best = row[i], at = i;
		if (best[k] == 0)
			return 0;
		row[at] = row[k];
		row[k] = best;
		det = at == k ? det : -det;
		det *= best[k];
		for (int i = k + 1; i < m; i++) {
			double l = row[i][k] / best[k];
			for (int j = k + 1; j < m; j++)
				row[i][j] -= l * best[j];
		}
	}
	return det;
}

/* count m x m matrices: cf_fill's edge values (NaN, infinities, +-0, subnormals, huge) in the first
 * ones, then small integers and thirds (ties for the pivot, inexact quotients), singular matrices
 * (a repeated row, a zero column) and random ones */
static void la_matrices(int dt, void *d, int64_t count, int m, uint64_t seed)
{
	int64_t mm = (int64_t)m * m, n = count * mm;
	cf_fill(dt, d, n, seed);
	struct rtensor t = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = d};
	static const double small[] = {1, -1, 2, -2, 3, 0, -0.0, 1.0 / 3, -2.0 / 3, 0.5};
	for (int64_t b = 2; b < count; b++)
		for (int64_t e = 0; e < mm; e++) {
			uint64_t r = (uint64_t)(b * 131 + e * 7 + (int64_t)seed) * 2654435761u >> 7;
			if (b % 4 == 1)
				continue; /* cf_fill's random bits */
			double v = b % 4 == 2 ? small[r % 10] : (double)(r % 2001) / 1000 - 1;
			if (b % 8 == 3 && m > 1 && e / m == 1)
				v = rt_get(&t, b * mm + e - m); /* row 1 repeats row 0 */
			if (b % 8 == 7 && e % m == m - 1)
				v = 0; /* a zero column */
			rt_set(&t, b * mm + e, v);
		}
}

/* Det of float32 and float64 matrices of every size the lanes take (1..16, m constant for 2..4)
 * and past them (17), batches not a multiple of the 8 lanes (1, 7, 9, 45) and 0, against
 * la_lu_det bit for bit, with 1 and 3 threads; any NaN for a NaN (of two NaN operands, which one
 * a product keeps is the compiler's operand order: a -O0 build keeps the other). Also within 1e-12 of the Leibniz sum for the
 * finite 2 x 2 to 4 x 4 float64 ones, a check of the reference itself. */
Test(exec, det_lanes_match_the_lu_definition_bit_for_bit)
{
	static const int ms[] = {1, 2, 3, 4, 5, 7, 16, 17};
	static const int64_t counts[] = {0, 1, 7, 9, 45};
	for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
		for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
			for (int f64 = 0; f64 < 2; f64++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, m = ms[mi];
				int64_t count = counts[ci], mm = (int64_t)m * m, n = count * mm;
				void *xd = xmalloc((size_t)n * 8 + 8);
				la_matrices(dt, xd, count, m, 11 + mi * 10 + ci);
				char text[512];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %d, %d]}]\n"
					 "nodes:\n  - {op: Det, inputs: [x], outputs: [y]}\noutputs: [{name: y}]\n",
					 dtype_name(dt), (long long)count, m, m);
				struct rtensor t = {.dtype = dt, .ndim = 3, .dims = {count, m, m}, .numel = n, .data = xd,
						    .nbytes = (size_t)n * dtype_size(dt), .known = 1};
				const char *names[] = {"x"};
				struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = xd};
				for (int th = 1; th <= 3; th += 2) {
					int64_t ny;
					void *y = la_run(text, &t, names, 1, th, 0, &ny);
					cr_assert_eq(ny, count);
					int64_t wrong = 0, first = -1;
					double a[17 * 17];
					for (int64_t b = 0; b < count; b++) {
						for (int64_t e = 0; e < mm; e++)
							a[e] = rt_get(&xt, b * mm + e);
						double d = la_lu_det(a, m);
						int ok;
						if (f64) {
							ok = !memcmp(&d, (double *)y + b, 8) || (isnan(d) && isnan(((double *)y)[b]));
						} else {
							float f = (float)d;
							ok = !memcmp(&f, (float *)y + b, 4) || (isnan(f) && isnan(((float *)y)[b]));
						}
						if (!ok && !wrong++)
							first = b;
						if (f64 && m >= 2 && m <= 4) {
							for (int64_t e = 0; e < mm; e++)
								a[e] = rt_get(&xt, b * mm + e);
							int fin = 1;
							for (int64_t e = 0; e < mm; e++)
								fin &= isfinite(a[e]) && fabs(a[e]) < 1e10;
							if (!fin)
								continue;
							double s = 0, mag = 0; /* Leibniz: the permutations of m */
							int perm[4] = {0, 1, 2, 3}, c[4] = {0}, sign = 1, i = 1;
							for (;;) {
								double p = sign;
								for (int r = 0; r < m; r++)
									p *= a[r * m + perm[r]];
								s += p;
								mag += fabs(p);
								while (i < m && c[i] >= i)
									c[i++] = 0;
								if (i >= m)
									break;
								int sw = i % 2 ? c[i] : 0, tmp = perm[sw];
								perm[sw] = perm[i];
								perm[i] = tmp;
								sign = -sign;
								c[i]++;
								i = 1;
							}
							cr_expect(fabs(((double *)y)[b] - s) <= 1e-12 * mag + 1e-300,
								  "Det %dx%d #%lld: %.17g, Leibniz %.17g", m, m, (long long)b, ((double *)y)[b], s);
						}
					}
					cr_expect_eq(wrong, 0, "Det %s %lld x %dx%d, %d threads: %lld wrong, the first #%lld",
						     dtype_name(dt), (long long)count, m, m, th, (long long)wrong, (long long)first);
					xfree(y);
				}
				xfree(xd);
			}
}

/* Det's gradient (the cofactors, Dets of the minors gathered in one Gather) of float32 and float64
 * matrices 1 x 1 to 5 x 5, times dY: gy[b] (-1)^(i+j) det(minor ij) in the dtype, the minor's
 * determinant la_lu_det's, bit for bit (any NaN for a NaN), with 1 and 3 threads. The matrix is
 * x + p, p a zero parameter whose gradient is the matrix's. */
Test(exec, det_gradient_is_the_cofactors_bit_for_bit)
{
	for (int m = 1; m <= 5; m++)
		for (int f64 = 0; f64 < 2; f64++) {
			int dt = f64 ? DT_DOUBLE : DT_FLOAT;
			int64_t count = 11, mm = (int64_t)m * m, n = count * mm;
			void *xd = xmalloc((size_t)n * 8), *gd = xmalloc((size_t)count * 8);
			la_matrices(dt, xd, count, m, 500 + m);
			cf_fill(dt, gd, count, 77);
			struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = xd};
			struct rtensor gt = {.dtype = dt, .ndim = 1, .dims = {count}, .numel = count, .data = gd};
			for (int64_t b = 0; b < 4; b++) /* dY finite: cf_fill's first are NaN and infinities */
				rt_set(&gt, b, 0.25 * (double)(b + 1));
			char text[1024];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %d, %d]}, {name: gy, dtype: %s, "
				 "shape: [%lld]}]\nparams: [{name: p, dtype: %s, shape: [%lld, %d, %d], init: zeros}]\n"
				 "nodes:\n  - {op: Add, inputs: [x, p], outputs: [z]}\n  - {op: Det, inputs: [z], outputs: [d]}\n"
				 "  - {op: Mul, inputs: [d, gy], outputs: [e]}\n"
				 "  - {op: ReduceSum, inputs: [e], outputs: [l], attrs: {keepdims: 0}}\noutputs: [{name: l}]\n",
				 dtype_name(dt), (long long)count, m, m, dtype_name(dt), (long long)count, dtype_name(dt),
				 (long long)count, m, m);
			struct graph *g = load_text("det_grad.yaml", text);
			const char *params[] = {"p"};
			struct autodiff_opts ao = {.params = params, .n_params = 1};
			struct autodiff_result res;
			struct gd_err e = {0};
			cr_assert(!autodiff(g, &ao, &res, &e), "%s", e.msg);
			uint32_t gi = 0;
			while (gi < g->n_outputs && strcmp(g->outputs[gi]->name, "p_grad"))
				gi++;
			cr_assert(gi < g->n_outputs, "no p_grad output");
			struct rtensor t[2] = {{.dtype = dt, .ndim = 3, .dims = {count, m, m}, .numel = n, .data = xd,
						.nbytes = (size_t)n * dtype_size(dt), .known = 1},
					       {.dtype = dt, .ndim = 1, .dims = {count}, .numel = count, .data = gd,
						.nbytes = (size_t)count * dtype_size(dt), .known = 1}};
			const char *names[] = {"x", "gy"};
			for (int th = 1; th <= 3; th += 2) {
				pool_set_threads(th);
				struct exec_opts o = {.inputs = t, .input_names = names, .n_inputs = 2};
				struct exec *x = exec_run(g, &o, NULL, &e);
				pool_set_threads(1);
				cr_assert(x, "%s", e.msg);
				const struct rtensor *y = exec_value(x, g->outputs[gi]);
				cr_assert_eq(y->numel, n);
				int64_t wrong = 0, first = -1;
				for (int64_t b = 0; b < count; b++)
					for (int i = 0; i < m; i++)
						for (int j = 0; j < m; j++) {
							double a[25], c;
							int k = 0;
							for (int r = 0; r < m; r++)
								for (int s = 0; s < m; s++)
									if (r != i && s != j)
										a[k++] = rt_get(&xt, b * mm + r * m + s) + 0.0;
							c = m == 1 ? 1 : la_lu_det(a, m - 1);
							double want, got = rt_get(y, b * mm + i * m + j), gb = rt_get(&gt, b);
							if (f64)
								want = gb * ((i + j) % 2 ? -c : c);
							else
								want = (float)gb * ((i + j) % 2 ? -(float)c : (float)c);
							if (m == 1)
								want = gb;
							int ok = !memcmp(&want, &got, 8) || (isnan(want) && isnan(got));
							if (!ok && !wrong++)
								first = b * mm + i * m + j;
						}
				cr_expect_eq(wrong, 0, "Det's gradient %s %dx%d, %d threads: %lld wrong, the first #%lld", dtype_name(dt), m,
					     m, th, (long long)wrong, (long long)first);
				exec_free(x);
			}
			graph_free(g);
			xfree(xd);
			xfree(gd);
		}
}

/* Gather, which Det's gradient runs on every minor, row by row: against out[o, j, i] = a[o, ix[j],
 * i] with negative int64 and int32 indices, along the first, a middle and the last axis of
 * (3, 5, 4) and (2, 7) tensors of 1-, 4- and 8-byte elements (rows of 1, 4, 8, 12, 16 and 20
 * bytes). */
Test(exec, gather_rows_match_the_definition)
{
	static const int dts[] = {DT_UINT8, DT_FLOAT, DT_DOUBLE};
	static const int64_t idx[] = {0, -1, 2, 2, -3, 1};
	for (size_t di = 0; di < 3; di++)
		for (int i32 = 0; i32 < 2; i32++)
			for (int shape = 0; shape < 2; shape++)
				for (int ax = 0; ax < (shape ? 2 : 3); ax++) {
					int dt = dts[di], nd = shape ? 2 : 3;
					int64_t dims[3] = {3, 5, 4}, outer = 1, inner = 1;
					if (shape)
						dims[0] = 2, dims[1] = 7;
					int64_t n = dims[0] * dims[1] * (nd == 3 ? dims[2] : 1), d = dims[ax];
					for (int k = 0; k < ax; k++)
						outer *= dims[k];
					for (int k = ax + 1; k < nd; k++)
						inner *= dims[k];
					size_t es = dtype_size(dt);
					char *ad = xmalloc((size_t)n * es), *id = xmalloc(6 * 8);
					for (size_t b = 0; b < (size_t)n * es; b++)
						ad[b] = (char)(b * 37 + 11);
					for (int j = 0; j < 6; j++) {
						int64_t v = idx[j] < -d || idx[j] >= d ? 0 : idx[j];
						if (i32)
							((int32_t *)id)[j] = (int32_t)v;
						else
							((int64_t *)id)[j] = v;
					}
					char text[512];
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 17\ninputs: [{name: a, dtype: %s, shape: [%lld, %lld%s]}, {name: i, "
						 "dtype: %s, shape: [2, 3]}]\nnodes:\n  - {op: Gather, inputs: [a, i], outputs: [y], attrs: "
						 "{axis: %d}}\noutputs: [{name: y}]\n",
						 dtype_name(dt), (long long)dims[0], (long long)dims[1], nd == 3 ? ", 4" : "",
						 i32 ? "int32" : "int64", ax);
					struct rtensor t[2] = {{.dtype = dt, .ndim = nd, .dims = {dims[0], dims[1], dims[2]}, .numel = n,
								.data = ad, .nbytes = (size_t)n * es, .known = 1},
							       {.dtype = i32 ? DT_INT32 : DT_INT64, .ndim = 2, .dims = {2, 3}, .numel = 6,
								.data = id, .nbytes = 6 * (i32 ? 4 : 8), .known = 1}};
					const char *names[] = {"a", "i"};
					int64_t ny;
					char *y = la_run(text, t, names, 2, 1, 0, &ny);
					cr_assert_eq(ny, outer * 6 * inner);
					int wrong = 0;
					for (int64_t o = 0; o < outer; o++)
						for (int j = 0; j < 6; j++) {
							int64_t v = i32 ? ((int32_t *)id)[j] : ((int64_t *)id)[j];
							v = v < 0 ? v + d : v;
							wrong += memcmp(y + ((o * 6 + j) * inner) * (int64_t)es,
									ad + ((o * d + v) * inner) * (int64_t)es, (size_t)inner * es) != 0;
						}
					cr_expect_eq(wrong, 0, "Gather %s axis %d of rank %d, %s indices: %d rows wrong", dtype_name(dt), ax,
						     nd, i32 ? "int32" : "int64", wrong);
					xfree(y);
					xfree(ad);
					xfree(id);
				}
}

/* The DFT of line x (n elements at stride st, re and im; im NULL: real), bin k, in long double
 * from the definition: sum_t x[t] e^(s 2 pi i k t / n), the exponent reduced mod n first, the
 * table tc, ts holding cos and sin of 2 pi j / n. */
static void la_dft_bin(const double *re, const double *im, int64_t st, int64_t n, int64_t k, int s, const long double *tc,
		       const long double *ts, long double *or, long double *oi)
{
	long double sr = 0, si = 0;
	for (int64_t t = 0, e = 0; t < n; t++, e = (e + k) % n) {
		long double c = tc[e], sn = s * ts[e], xr = re[t * st], xi = im ? im[t * st] : 0;
		sr += xr * c - xi * sn;
		si += xr * sn + xi * c;
	}
	*or = sr;
	*oi = si;
}

static void la_dft_table(int64_t n, long double **tc, long double **ts)
{
	*tc = xmalloc((size_t)n * sizeof **tc);
	*ts = xmalloc((size_t)n * sizeof **ts);
	for (int64_t j = 0; j < n; j++) {
		long double a = 2 * 3.14159265358979323846264338327950288L * (long double)j / (long double)n;
		(*tc)[j] = cosl(a);
		(*ts)[j] = sinl(a);
	}
}

/* Bound on an FFT's error, against la_dft_bin, relative to the line's L2 norm: 1e-5 for float32
 * (rounding to float32 alone is 6e-8 of |X[k]| <= sqrt(n) |x|, 2e-6 |x| at n = 1000), 1e-12 for
 * float64 (the FFT's double sums, Bluestein's through a 2n-1 < m <= 4n transform included, stay
 * under 1e-13 |x| to n = 40000); an inverse's outputs and bound are divided by n. */
static double la_fft_tol(int f64)
{
	return f64 ? 1e-12 : 1e-5;
}

/* Checks y's bins keep of each of lines lines (output element ((line * keep + k) * 2 + {0, 1})
 * against the definition over x's line values (xr, xi at stride xs: line l's at l * lstride):
 * the wrong ones counted. A line with a NaN must give NaN everywhere; one with an infinity is
 * skipped (its bins inf or NaN as the twiddles make them). */
static int64_t la_check_lines(const struct rtensor *y, int64_t lines, int64_t keep, const double *xr, const double *xi,
			      int64_t lstride, int64_t n, int inverse, int f64, int64_t kstep)
{
	int64_t wrong = 0;
	long double *tc, *ts;
	la_dft_table(n, &tc, &ts);
	for (int64_t l = 0; l < lines; l++) {
		const double *r = xr + l * lstride, *im = xi ? xi + l * lstride : NULL;
		long double norm = 0;
		int nan = 0, inf = 0;
		for (int64_t t = 0; t < n; t++) {
			double a = r[t], b = im ? im[t] : 0;
			nan |= isnan(a) || isnan(b);
			inf |= isinf(a) || isinf(b);
			norm += (long double)a * a + (long double)b * b;
		}
		if (inf && !nan)
			continue;
		double bound = la_fft_tol(f64) * (double)sqrtl(norm) / (inverse ? (double)n : 1);
		for (int64_t k = 0; k < keep; k += kstep) {
			double gr = rt_get(y, (l * keep + k) * 2), gi = rt_get(y, (l * keep + k) * 2 + 1);
			if (nan) { /* (n 1: the input itself, a real line's imaginary part 0) */
				wrong += !isnan(gr) && !isnan(gi);
				continue;
			}
			long double wr, wi;
			la_dft_bin(r, im, 1, n, k, inverse ? 1 : -1, tc, ts, &wr, &wi);
			if (inverse)
				wr /= n, wi /= n;
			wrong += !(fabsl(gr - wr) <= bound && fabsl(gi - wi) <= bound);
		}
	}
	xfree(tc);
	xfree(ts);
	return wrong;
}

/* float32/float64 line values in [-1, 1), with edge lines: 5 a NaN, 6 an infinity, 7 huge
 * (1e30 / 1e300 scale), 8 subnormal */
static void la_signal(int dt, void *d, int64_t lines, int64_t len, uint64_t seed)
{
	struct rtensor t = {.dtype = dt, .ndim = 1, .dims = {lines * len}, .numel = lines * len, .data = d};
	for (int64_t l = 0; l < lines; l++)
		for (int64_t i = 0; i < len; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			double v = (double)(seed >> 11) / 0x1p53 * 2 - 1;
			if (l == 7)
				v *= dt == DT_DOUBLE ? 1e300 : 1e30;
			if (l == 8)
				v *= dt == DT_DOUBLE ? 1e-310 : 1e-40;
			if (i == len / 2 && (l == 5 || l == 6))
				v = l == 5 ? NAN : -INFINITY;
			rt_set(&t, l * len + i, v);
		}
}

/* DFT (real, real onesided, complex, complex inverse) of 11 lines (8 lanes and 3) of every kind
 * of length (radix 2, mixed radix 2-5 and 7, Bluestein at 67; 40000 and the prime 16411 past the
 * lanes, one line at a time, 40 of their bins checked) against the definition within
 * la_fft_tol; the same bits with 1 and 3 threads, and for lines 1-10 transformed on their own
 * (each in another lane). */
Test(exec, dft_lanes_match_the_definition)
{
	static const int64_t ns[] = {1, 2, 3, 5, 7, 8, 12, 16, 67, 400, 512, 1000, 16411, 40000};
	for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
		for (int mode = 0; mode < 4; mode++)
			for (int f64 = 0; f64 < 2; f64++) {
				int64_t n = ns[ni], lines = n > 4096 ? 2 : 11, c = mode >= 2 ? 2 : 1;
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, onesided = mode == 1, inverse = mode == 3;
				int64_t keep = onesided ? n / 2 + 1 : n, nx = lines * n * c;
				void *xd = xmalloc((size_t)nx * 8);
				la_signal(dt, xd, lines * c, n, 900 + ni * 8 + (size_t)mode * 2 + (size_t)f64);
				/* the complex lines interleaved (real, imaginary): the generated line 2l the real
				 * parts, 2l + 1 the imaginary ones */
				double *vr = xmalloc((size_t)(lines * n) * 8), *vi = c == 2 ? xmalloc((size_t)(lines * n) * 8) : NULL;
				struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {nx}, .numel = nx, .data = xd};
				for (int64_t i = 0; i < lines * n; i++)
					vr[i] = rt_get(&xt, i);
				if (c == 2) {
					for (int64_t l = 0; l < lines; l++)
						for (int64_t t = 0; t < n; t++) {
							vr[l * n + t] = rt_get(&xt, (2 * l) * n + t);
							vi[l * n + t] = rt_get(&xt, (2 * l + 1) * n + t);
						}
					for (int64_t i = 0; i < lines * n; i++) {
						rt_set(&xt, 2 * i, vr[i]);
						rt_set(&xt, 2 * i + 1, vi[i]);
					}
				}
				void *first = NULL;
				for (int part = 0; part < 3; part++) { /* 1 thread, 3 threads, lines 1.. alone */
					int64_t from = part == 2 ? 1 : 0, nl = part == 2 && lines > 2 ? lines - 1 : lines;
					if (part == 2 && lines <= 2)
						break;
					char text[512];
					snprintf(text, sizeof text,
						 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld]}]\n"
						 "nodes:\n  - {op: DFT, inputs: [x], outputs: [y], attrs: {axis: 1, onesided: %d, inverse: %d}}\n"
						 "outputs: [{name: y}]\n",
						 dtype_name(dt), (long long)nl, (long long)n, (long long)c, onesided, inverse);
					struct rtensor t = {.dtype = dt, .ndim = 3, .dims = {nl, n, c}, .numel = nl * n * c,
							    .data = (char *)xd + from * n * c * (int64_t)dtype_size(dt),
							    .nbytes = (size_t)(nl * n * c) * dtype_size(dt), .known = 1};
					const char *names[] = {"x"};
					int64_t ny;
					void *y = la_run(text, &t, names, 1, part == 1 ? 3 : 1, 0, &ny);
					cr_assert_eq(ny, nl * keep * 2);
					size_t yb = (size_t)ny * dtype_size(dt), off = (size_t)(keep * 2) * dtype_size(dt);
					if (part == 0) {
						struct rtensor yt = {.dtype = dt, .ndim = 1, .dims = {ny}, .numel = ny, .data = y};
						int64_t wrong = la_check_lines(&yt, lines, keep, vr, vi, n, n, inverse, f64, n > 4096 ? n / 40 : 1);
						cr_expect_eq(wrong, 0, "DFT %s n %lld %s%s%s: %lld bins wrong", dtype_name(dt), (long long)n,
							     c == 2 ? "complex" : "real", onesided ? " onesided" : "", inverse ? " inverse" : "",
							     (long long)wrong);
						first = y;
						continue;
					}
					cr_expect_eq(memcmp(part == 1 ? first : (char *)first + off, y, part == 1 ? yb : yb), 0,
						     "DFT %s n %lld mode %d: other bits %s", dtype_name(dt), (long long)n, mode,
						     part == 1 ? "with 3 threads" : "for lines 1.. alone");
					xfree(y);
				}
				xfree(first);
				xfree(xd);
				xfree(vr);
				xfree(vi);
			}
}

/* STFT of 3 signals (real, onesided; complex, both sides) with and without a window, frame
 * lengths 1, 7, 16 and 400 at odd and even hops, float32 and float64: frame f of signal b is
 * signal[b, f step + t] w[t], t < n, checked against the definition within la_fft_tol (the
 * signals' edge lines NaN, inf, huge and subnormal among the frames), the same bits with 1 and 3
 * threads. */
Test(exec, stft_lanes_match_the_definition)
{
	static const struct { int64_t n, step, len; } cs[] = {{1, 7, 20}, {7, 3, 97}, {16, 1, 50}, {400, 161, 1200}, {400, 160, 1000}};
	for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
		for (int mode = 0; mode < 4; mode++)
			for (int f64 = 0; f64 < 2; f64++) {
				int dt = f64 ? DT_DOUBLE : DT_FLOAT, win = mode & 1, c = mode & 2 ? 2 : 1, onesided = c == 1;
				int64_t n = cs[ci].n, step = cs[ci].step, len = cs[ci].len, B = 3, nx = B * len * c;
				int64_t frames = (len - n) / step + 1, keep = onesided ? n / 2 + 1 : n;
				/* 9 generated lines of len (NaN, inf, huge, subnormal in 5-8): 3 signals' real and
				 * imaginary parts */
				void *gen = xmalloc((size_t)(9 * len) * 8), *xd = xmalloc((size_t)nx * 8), *wd = xmalloc((size_t)n * 8);
				la_signal(dt, gen, 9, len, 40 + ci * 8 + (size_t)mode * 2 + (size_t)f64);
				struct rtensor gt = {.dtype = dt, .ndim = 1, .dims = {9 * len}, .numel = 9 * len, .data = gen};
				struct rtensor xt = {.dtype = dt, .ndim = 1, .dims = {nx}, .numel = nx, .data = xd};
				struct rtensor wt = {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = wd};
				for (int64_t b = 0; b < B; b++)
					for (int64_t i = 0; i < len; i++)
						for (int64_t k = 0; k < c; k++) /* real parts lines 5-7, imaginary 8, 0, 1 */
							rt_set(&xt, (b * len + i) * c + k, rt_get(&gt, ((b + 5 + 3 * k) % 9) * len + i));
				for (int64_t t = 0; t < n; t++)
					rt_set(&wt, t, 0.5 + 0.5 * sin((double)t));
				/* the frames, windowed, as lines for la_check_lines */
				int64_t lines = B * frames;
				double *fr = xmalloc((size_t)(lines * n) * 8), *fi = c == 2 ? xmalloc((size_t)(lines * n) * 8) : NULL;
				for (int64_t b = 0; b < B; b++)
					for (int64_t f = 0; f < frames; f++)
						for (int64_t t = 0; t < n; t++) {
							double h = win ? rt_get(&wt, t) : 1;
							int64_t e = (b * len + f * step + t) * c;
							fr[(b * frames + f) * n + t] = rt_get(&xt, e) * h;
							if (c == 2)
								fi[(b * frames + f) * n + t] = rt_get(&xt, e + 1) * h;
						}
				char text[768];
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [%lld, %lld, %lld]}, "
					 "{name: w, dtype: %s, shape: [%lld]}]\nparams: [{name: st, dtype: int64, shape: [], data: [%lld]}, "
					 "{name: fl, dtype: int64, shape: [], data: [%lld]}]\nnodes:\n  - {op: STFT, inputs: [x, st, %s, fl], "
					 "outputs: [y], attrs: {onesided: %d}}\n  - {op: Identity, inputs: [w], outputs: [w2]}\n"
					 "outputs: [{name: y}, {name: w2}]\n",
					 dtype_name(dt), (long long)B, (long long)len, (long long)c, dtype_name(dt), (long long)n,
					 (long long)step, (long long)n, win ? "w" : "''", onesided);
				struct rtensor t[2] = {{.dtype = dt, .ndim = 3, .dims = {B, len, c}, .numel = nx, .data = xd,
							.nbytes = (size_t)nx * dtype_size(dt), .known = 1},
						       {.dtype = dt, .ndim = 1, .dims = {n}, .numel = n, .data = wd,
							.nbytes = (size_t)n * dtype_size(dt), .known = 1}};
				const char *names[] = {"x", "w"};
				int64_t ny, ny3;
				void *y = la_run(text, t, names, 2, 1, 0, &ny), *y3 = la_run(text, t, names, 2, 3, 0, &ny3);
				cr_assert_eq(ny, lines * keep * 2);
				struct rtensor yt = {.dtype = dt, .ndim = 1, .dims = {ny}, .numel = ny, .data = y};
				int64_t wrong = la_check_lines(&yt, lines, keep, fr, fi, n, n, 0, f64, 1);
				cr_expect_eq(wrong, 0, "STFT %s n %lld step %lld %s%s: %lld bins wrong", dtype_name(dt), (long long)n,
					     (long long)step, c == 2 ? "complex" : "real", win ? " windowed" : "", (long long)wrong);
				cr_expect_eq(memcmp(y, y3, (size_t)ny * dtype_size(dt)), 0, "STFT %s n %lld: other bits with 3 threads",
					     dtype_name(dt), (long long)n);
				xfree(y);
				xfree(y3);
				xfree(gen);
				xfree(xd);
				xfree(wd);
				xfree(fr);
				xfree(fi);
			}
}

/* #52 pool2: AveragePool's and LpPool's interior runs (pool_sum_run: AVX-512 lanes at strides 1
 * and 2, the compiled loop at others) and Resize's linear rows over widened column taps, against
 * their definitions written here, bit for bit (any NaN for a NaN), float32 and float64, over
 * NaNs, infinities, signed zeros, subnormals, huge values and doubles of full mantissas whose
 * sums round differently in another order; runs not a multiple of 16 long, longer than 256,
 * empty windows; and the same bits (NaN payloads too) with 1 thread and 3. */

/* values of many magnitudes, full mantissas, and specials one in 17 */
static double p2_value(uint32_t *s)
{
	static const double special[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-45, -1e-310, 3e38, -3e38, 1e300};
	*s = *s * 1664525u + 1013904223u;
	uint32_t k = *s >> 8;
	if (k % 17 == 0)
		return special[k / 17 % (sizeof special / sizeof *special)];
	*s = *s * 1664525u + 1013904223u;
	double m = (double)k / 16777216.0 + (double)(*s >> 4) * 0x1p-52;
	return (k & 1 ? -1 : 1) * ldexp(m, (int)(k % 29) - 14);
}

/* n values of seed as float32 (p32) or float64 (p64), and in v as the kernel reads them */
static void p2_fill(uint32_t seed, int64_t n, int f64, double *v, float *p32, double *p64)
{
	for (int64_t i = 0; i < n; i++) {
		double d = p2_value(&seed);
		f64 ? (void)(p64[i] = d) : (void)(p32[i] = (float)d);
		v[i] = f64 ? d : (double)p32[i];
	}
}

/* node run over x (dims, data p) with 1 thread and with 3: the same bytes; the 1-thread run */
static struct exec *p2_run(const char *node, const char *extra, int f64, int nd, const int64_t *dims, void *p,
			   struct graph **g, const struct rtensor **y)
{
	struct graph *g3;
	const struct rtensor *y3;
	pool_set_threads(3);
	struct exec *x3 = rf_run(node, extra, f64, nd, dims, p, &g3, &y3);
	pool_set_threads(1);
	struct exec *x = rf_run(node, extra, f64, nd, dims, p, g, y);
	cr_expect((*y)->nbytes == y3->nbytes && !memcmp((*y)->data, y3->data, y3->nbytes), "%s: 1 and 3 threads differ",
		  node);
	exec_free(x3);
	graph_free(g3);
	return x;
}

struct p2_pool {
	int64_t h, w, k[2], s[2], d[2], pad[4];
	int ceil, incl;
};

static const struct p2_pool p2_pools[] = {
	{24, 24, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0}, /* the bench's */
	{9, 41, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 1},  {9, 41, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 0},
	{7, 37, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 1},  {7, 37, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0},
	{4, 600, {2, 5}, {1, 2}, {1, 2}, {1, 4, 0, 4}, 0, 0}, /* runs past 256 */
	{4, 600, {2, 3}, {2, 1}, {1, 1}, {0, 1, 1, 1}, 1, 1},  {12, 37, {3, 2}, {1, 3}, {2, 2}, {2, 1, 0, 1}, 0, 1}, /* stride 3 */
	{5, 50, {2, 2}, {3, 3}, {1, 1}, {0, 0, 0, 0}, 1, 0},  {5, 17, {5, 3}, {1, 2}, {1, 1}, {0, 0, 0, 0}, 1, 0},
	{3, 31, {2, 3}, {2, 2}, {1, 1}, {0, 1, 0, 1}, 0, 0},  {3, 50, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0},
	{4, 33, {3, 2}, {2, 1}, {1, 1}, {2, 0, 2, 0}, 1, 1}, /* windows of one row, the rest pads */
	{4, 33, {3, 2}, {2, 1}, {1, 1}, {2, 0, 2, 0}, 1, 0},  {1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},
	{1, 2, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0},
};
#define P2_NC 48 /* planes: enough that 3 threads cut them */
#define P2_MAXN (P2_NC * 4 * 600)

/* AveragePool (lp 0) or LpPool of p = lp over p2_pools[c]: every output against rf_avg or the
 * window's pow(|x|, p) summed in double from +0 in row-major order, then pow(sum, 1 / p) */
static void p2_pool_case(size_t c, int f64, int lp)
{
	static double v[P2_MAXN], p64[P2_MAXN];
	static float p32[P2_MAXN];
	const struct p2_pool *k = &p2_pools[c];
	int64_t dims[4] = {2, P2_NC / 2, k->h, k->w}, sp = k->h * k->w;
	cr_assert(P2_NC * sp <= P2_MAXN);
	p2_fill((uint32_t)(c * 4 + (size_t)lp * 2 + (size_t)f64) * 7 + 1, P2_NC * sp, f64, v, p32, p64);
	char node[400];
	snprintf(node, sizeof node,
		 "{op: %s, inputs: [x], outputs: [y], attrs: {kernel_shape: [%lld, %lld], strides: [%lld, %lld], "
		 "dilations: [%lld, %lld], pads: [%lld, %lld, %lld, %lld], ceil_mode: %d, %s: %d}}",
		 lp ? "LpPool" : "AveragePool", (long long)k->k[0], (long long)k->k[1], (long long)k->s[0], (long long)k->s[1],
		 (long long)k->d[0], (long long)k->d[1], (long long)k->pad[0], (long long)k->pad[1], (long long)k->pad[2],
		 (long long)k->pad[3], k->ceil, lp ? "p" : "count_include_pad", lp ? lp : k->incl);
	int64_t wrong = 0, first = -1;
	double want = 0;
	struct graph *g;
	const struct rtensor *y;
	struct exec *x = p2_run(node, "", f64, 4, dims, f64 ? (void *)p64 : (void *)p32, &g, &y);
	int64_t oh = y->dims[2], ow = y->dims[3];
	for (int64_t o = 0; o < P2_NC * oh * ow; o++) {
		int64_t nc = o / (oh * ow), oy = o / ow % oh, ox = o % ow;
		double r = 0;
		if (!lp) {
			r = rf_avg(v + nc * sp, k->h, k->w, k->k, k->s, k->d, k->pad, k->incl, oy, ox);
		} else {
			for (int64_t t = 0; t < k->k[0] * k->k[1]; t++) {
				int64_t iy = oy * k->s[0] - k->pad[0] + t / k->k[1] * k->d[0];
				int64_t ix = ox * k->s[1] - k->pad[1] + t % k->k[1] * k->d[1];
				if (iy >= 0 && iy < k->h && ix >= 0 && ix < k->w)
					r += pow(fabs(v[nc * sp + iy * k->w + ix]), (double)lp);
			}
			r = pow(r, 1 / (double)lp);
		}
		if (!rf_same_nan(y, o, r, f64, 1) && !wrong++)
			first = o, want = r;
	}
	cr_expect_eq(wrong, 0, "%s: %s: %lld of %lld outputs differ, the first %lld: %a, not %a", f64 ? "float64" : "float32",
		     node, (long long)wrong, (long long)(P2_NC * oh * ow), (long long)first, first < 0 ? 0 : rt_get(y, first),
		     want);
	exec_free(x);
	graph_free(g);
}

Test(exec, pool2_average_pool_runs_match_the_definition_at_1_and_3_threads)
{
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof p2_pools / sizeof *p2_pools; c++)
			p2_pool_case(c, f64, 0);
}

Test(exec, pool2_lp_pool_runs_match_the_definition_at_1_and_3_threads)
{
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof p2_pools / sizeof *p2_pools; c++)
			for (int p = 1; p <= 3; p++)
				if (!p2_pools[c].incl) /* LpPool has no count_include_pad */
					p2_pool_case(c, f64, p);
}

/* Resize linear over the last two axes of (2, 24, h, w): each output's 2 x 2 taps (rs_coord,
 * rs_taps) in order, row tap outer, a term left out where its weight wh ww is 0 */
Test(exec, pool2_resize_linear_rows_match_the_definition_at_1_and_3_threads)
{
	static const struct rs_case cases[] = {
		{4, {2, 24, 24, 24}, {2, 24, 48, 48}, 0, "linear", "half_pixel", ""}, /* the bench's */
		{4, {2, 24, 7, 13}, {2, 24, 15, 29}, 0, "linear", "half_pixel", ""},
		{4, {2, 24, 7, 13}, {2, 24, 15, 29}, 0, "linear", "align_corners", ""},
		{4, {2, 24, 7, 13}, {2, 24, 15, 29}, 0, "linear", "asymmetric", ""},
		{4, {2, 24, 7, 13}, {2, 24, 15, 29}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 24, 9, 40}, {2, 24, 4, 17}, 0, "linear", "half_pixel", ""}, /* down: rows skipped */
		{4, {2, 24, 9, 40}, {2, 24, 5, 3}, 0, "linear", "align_corners", ""},
		{4, {2, 24, 5, 300}, {2, 24, 6, 601}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 24, 1, 5}, {2, 24, 3, 1}, 0, "linear", "pytorch_half_pixel", ""},
		{4, {2, 24, 6, 1}, {2, 24, 11, 7}, 0, "linear", "half_pixel", ""},
		{4, {2, 24, 5, 7}, {2, 24, 5, 7}, 0, "linear", "half_pixel", ""},
		{4, {2, 24, 5, 7}, {4, 4, 8, 6}, 1, "linear", "half_pixel", ""}, /* scales x 4 */
		{4, {2, 24, 5, 7}, {4, 4, 9, 5}, 1, "linear", "align_corners", ""},
	};
	enum { MAXN = 48 * 5 * 300, MAXO = 48 * 6 * 601 };
	static double v[MAXN], p64[MAXN];
	static float p32[MAXN];
	for (int f64 = 0; f64 < 2; f64++)
		for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
			const struct rs_case *k = &cases[c];
			int64_t od[4], numel = 1, onum = 1;
			double s[4], len[4];
			for (int i = 0; i < 4; i++) {
				od[i] = k->scaled ? k->in[i] * k->out[i] / 4 : k->out[i];
				s[i] = k->scaled ? (double)(float)(k->out[i] / 4.0) : (double)od[i] / (double)k->in[i];
				len[i] = k->scaled ? (double)k->in[i] * s[i] : (double)od[i];
				numel *= k->in[i], onum *= od[i];
			}
			cr_assert(numel <= MAXN && onum <= MAXO);
			p2_fill((uint32_t)c * 5 + (uint32_t)f64 + 3, numel, f64, v, p32, p64);
			char extra[300], node[400];
			snprintf(extra, sizeof extra, "params: [{name: q, dtype: %s, shape: [4], data: [%g, %g, %g, %g]}]\n",
				 k->scaled ? "float32" : "int64", k->scaled ? k->out[0] / 4.0 : (double)k->out[0],
				 k->scaled ? k->out[1] / 4.0 : (double)k->out[1], k->scaled ? k->out[2] / 4.0 : (double)k->out[2],
				 k->scaled ? k->out[3] / 4.0 : (double)k->out[3]);
			snprintf(node, sizeof node,
				 "{op: Resize, inputs: [x, \"\", %s], outputs: [y], attrs: {mode: linear, "
				 "coordinate_transformation_mode: %s}}",
				 k->scaled ? "q" : "\"\", q", k->coord);
			struct graph *g;
			const struct rtensor *y;
			struct exec *x = p2_run(node, extra, f64, 4, k->in, f64 ? (void *)p64 : (void *)p32, &g, &y);
			cr_assert_eq(y->numel, onum);
			int64_t h = k->in[2], w = k->in[3], oh = od[2], ow = od[3], wrong = 0, first = -1;
			double want = 0;
			for (int64_t o = 0; o < onum; o++) {
				int64_t plane = o / (oh * ow), ry[4], rx[4];
				double wy[4], wx[4], sum = 0;
				int ny = rs_taps(k, rs_coord(k->coord, o / ow % oh, h, s[2], len[2]), h, ry, wy);
				int nx = rs_taps(k, rs_coord(k->coord, o % ow, w, s[3], len[3]), w, rx, wx);
				for (int a = 0; a < ny; a++)
					for (int b = 0; b < nx; b++) {
						double cw = 1 * 1 * wy[a] * wx[b];
						if (cw != 0)
							sum += cw * v[(plane * h + ry[a]) * w + rx[b]];
					}
				if (!rf_same_nan(y, o, sum, f64, 1) && !wrong++)
					first = o, want = sum;
			}
			cr_expect_eq(wrong, 0, "%s case %zu (%s): %lld of %lld outputs differ, the first #%lld: %a, not %a",
				     f64 ? "float64" : "float32", c, k->coord, (long long)wrong, (long long)onum, (long long)first,
				     first < 0 ? 0 : rt_get(y, first), want);
			exec_free(x);
			graph_free(g);
		}
}

/* #52 grid: GatherElements' and ScatterElements' row walks (float32/float64 data, int64 and int32
 * indices, each row's indices checked first) against their element rules written here: axis first,
 * middle and last of ranks 1 to 4, indices shorter than the data off the axis, negative ones and
 * duplicates (every reduction: none, add, mul), odd and 0- and 1-element rows, data NaN, +-inf,
 * +-0, subnormals and huge, at 1 and 3 threads, bit for bit (any NaN for a NaN). */
struct gse_case {
	int nd, ax;
	int64_t d[4], i[4];
};

static const struct gse_case gse_cases[] = {
	{1, 0, {7}, {13}},
	{1, 0, {1}, {1}},
	{2, 1, {5, 9}, {4, 17}},
	{2, 0, {6, 3}, {11, 2}},
	{2, 1, {3, 4}, {3, 0}},
	{3, 1, {2, 5, 7}, {2, 9, 5}},
	{3, 2, {64, 3, 37}, {61, 3, 401}},  /* ax last over the pool's pieces */
	{3, 1, {3, 5, 4000}, {3, 7, 3001}}, /* ax middle, units of 7 rows */
	{3, 0, {9, 4, 5000}, {6, 4, 4999}}, /* ax first: one unit a row */
	{4, 2, {2, 3, 4, 5}, {2, 2, 6, 1}},
};

/* moderate values of many exponents (sums that depend on their order), specials now and then */
static void gse_fill(int dt, void *p, int64_t n, uint64_t seed)
{
	static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, 1e300, -1e300};
	static const float spf[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, 3e38f, -3e38f};
	for (int64_t k = 0; k < n; k++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = seed >> 11;
		double v = ldexp((double)(r & 0xfffff) / 0x1p20 + 0.5, (int)(r >> 20) % 24 - 12) * (r >> 50 & 1 ? -1 : 1);
		int s = k % 41 == 40 ? (int)(r >> 44) % 8 : -1;
		if (dt == DT_DOUBLE)
			((double *)p)[k] = s >= 0 ? sp[s] : v;
		else
			((float *)p)[k] = s >= 0 ? spf[s] : (float)v;
	}
}

static int gse_same(int dt, const void *a, const void *b, int64_t k)
{
	if (dt == DT_DOUBLE) {
		double x = ((const double *)a)[k], y = ((const double *)b)[k];
		return !memcmp(&x, &y, 8) || (isnan(x) && isnan(y));
	}
	float x = ((const float *)a)[k], y = ((const float *)b)[k];
	return !memcmp(&x, &y, 4) || (isnan(x) && isnan(y));
}

/* the data offset of index element k: its coordinates, the axis' one v */
static int64_t gse_at(const struct gse_case *c, int64_t k, int64_t v)
{
	int64_t at = 0, st = 1;
	for (int i = c->nd - 1; i >= 0; i--) {
		at += (i == c->ax ? v : k % c->i[i]) * st;
		k /= c->i[i];
		st *= c->d[i];
	}
	return at;
}

Test(exec, gather_scatter_elements_rows_match_their_rules)
{
	static const char *const reds[] = {"none", "add", "mul"};
	for (size_t ci = 0; ci < sizeof gse_cases / sizeof *gse_cases; ci++)
		for (int f64 = 0; f64 < 2; f64++)
			for (int i32 = 0; i32 < 2; i32++)
				for (int th = 1; th <= 3; th += 2) {
					const struct gse_case *c = &gse_cases[ci];
					int dt = f64 ? DT_DOUBLE : DT_FLOAT, idt = i32 ? DT_INT32 : DT_INT64;
					size_t es = dtype_size(dt);
					int64_t nd = 1, ni = 1, len = c->d[c->ax];
					for (int i = 0; i < c->nd; i++)
						nd *= c->d[i], ni *= c->i[i];
					void *dd = xmalloc((size_t)nd * es + 8), *ud = xmalloc((size_t)ni * es + 8),
					     *id = xmalloc((size_t)ni * 8 + 8), *want = xmalloc((size_t)(nd > ni ? nd : ni) * es + 8);
					int64_t *vs = xmalloc((size_t)ni * 8 + 8);
					cf_fill(dt, dd, nd, 3 + ci);
					gse_fill(dt, ud, ni, 7 + ci);
					uint64_t seed = 11 + ci;
					for (int64_t k = 0; k < ni; k++) { /* few distinct ones (duplicates), half negative */
						seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
						int64_t v = (int64_t)(seed >> 33) % (len < 5 ? len : 5);
						vs[k] = seed >> 62 & 1 ? v - len : v;
						if (i32)
							((int32_t *)id)[k] = (int32_t)vs[k];
						else
							((int64_t *)id)[k] = vs[k];
					}
					char node[256];
					struct rtensor ts[3] = {shape_tensor(dt, c->nd, c->d, dd), shape_tensor(idt, c->nd, c->i, id),
								shape_tensor(dt, c->nd, c->i, ud)};
					/* GatherElements */
					snprintf(node, sizeof node, "{op: GatherElements, inputs: [x, r], outputs: [y], attrs: {axis: %d}}",
						 c->ax - (ci % 2 ? c->nd : 0));
					struct shape_run s;
					shape_run(&s, node, ts, 2, th);
					int64_t wrong = 0, first = -1;
					for (int64_t k = 0; k < ni; k++) {
						int64_t at = gse_at(c, k, vs[k] < 0 ? vs[k] + len : vs[k]);
						memcpy((char *)want + k * es, (char *)dd + at * es, es);
						if (!gse_same(dt, want, s.y->data, k) && !wrong++)
							first = k;
					}
					cr_expect_eq(wrong, 0, "GatherElements case %zu %s %s, %d threads: %lld wrong, the first #%lld", ci,
						     dtype_name(dt), dtype_name(idt), th, (long long)wrong, (long long)first);
					shape_done(&s);
					/* ScatterElements, each reduction, on a copy of the data (the run may write it in place) */
					for (int red = 0; red < 3; red++) {
						void *dc = xmalloc((size_t)nd * es + 8);
						memcpy(dc, dd, (size_t)nd * es);
						ts[0].data = dc;
						memcpy(want, dd, (size_t)nd * es);
						for (int64_t k = 0; k < ni; k++) {
							int64_t at = gse_at(c, k, vs[k] < 0 ? vs[k] + len : vs[k]);
							if (f64) {
								double *o = (double *)want + at, u = ((const double *)ud)[k];
								*o = red == 1 ? *o + u : red == 2 ? *o * u : u;
							} else {
								float *o = (float *)want + at, u = ((const float *)ud)[k];
								*o = red == 1 ? (float)((double)*o + u) : red == 2 ? (float)((double)*o * u) : u;
							}
						}
						snprintf(node, sizeof node,
							 "{op: ScatterElements, inputs: [x, r, v], outputs: [y], attrs: {axis: %d, reduction: %s}}",
							 c->ax - (ci % 2 ? 0 : c->nd), reds[red]);
						shape_run(&s, node, ts, 3, th);
						wrong = 0, first = -1;
						for (int64_t k = 0; k < nd; k++)
							if (!gse_same(dt, want, s.y->data, k) && !wrong++)
								first = k;
						cr_expect_eq(wrong, 0, "ScatterElements %s case %zu %s %s, %d threads: %lld wrong, the first #%lld",
							     reds[red], ci, dtype_name(dt), dtype_name(idt), th, (long long)wrong, (long long)first);
						shape_done(&s);
						ts[0].data = dd;
						xfree(dc);
					}
					xfree(dd);
					xfree(ud);
					xfree(id);
					xfree(want);
					xfree(vs);
				}
}

/* the graph text run on inputs x, r, v (ts) at th threads: refused, the message holding msg */
static void gse_refused(const char *text, struct rtensor *ts, int th, const char *msg)
{
	static const char *names[3] = {"x", "r", "v"};
	struct graph *g = load_text("gse.yaml", text);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = ts, .input_names = names, .n_inputs = 3};
	pool_set_threads(th);
	struct exec *x = exec_run(g, &o, NULL, &e);
	pool_set_threads(1);
	cr_expect_null(x, "ran: %s", text);
	cr_expect(strstr(e.msg, msg), "%s: %s", text, e.msg);
	exec_free(x);
	graph_free(g);
}

/* an index out of range, and (ScatterElements) indices longer than the data off the axis: errors
 * naming them, no write past the data */
Test(exec, gather_scatter_elements_refuse_bad_indices)
{
	static const char *const nodes[] = {
		"{op: GatherElements, inputs: [x, r], outputs: [y], attrs: {axis: 1}}",
		"{op: ScatterElements, inputs: [x, r, v], outputs: [y], attrs: {axis: 1, reduction: add}}",
	};
	static const char *const msgs[] = {"index 3 is out of range for a dimension of 3", "index out of range"};
	char text[1024];
	for (int op = 0; op < 2; op++)
		for (int f64 = 0; f64 < 3; f64++) { /* float32, float64, int64 data */
			int dt = f64 == 2 ? DT_INT64 : f64 ? DT_DOUBLE : DT_FLOAT;
			int64_t dims[2] = {2, 3}, idims[2] = {2, 40}, ix[80] = {0}, xd[6] = {0}, ud[80] = {0};
			ix[77] = 3, ix[78] = INT64_MAX, ix[79] = INT64_MIN;
			struct rtensor ts[3] = {shape_tensor(dt, 2, dims, xd), shape_tensor(DT_INT64, 2, idims, ix),
						shape_tensor(dt, 2, idims, ud)};
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: %s, shape: [2, 3]}, {name: r, dtype: int64, "
				 "shape: [2, 40]}, {name: v, dtype: %s, shape: [2, 40]}]\nnodes:\n  - %s\noutputs: [{name: y}]\n",
				 dtype_name(dt), dtype_name(dt), nodes[op]);
			for (int th = 1; th <= 3; th += 2)
				gse_refused(text, ts, th, msgs[op]);
		}
	/* ScatterElements' indices 3 rows deep into a 2-row data: refused (they wrote past its end) */
	int64_t dims[2] = {2, 3}, idims[2] = {3, 3}, ix[9] = {0};
	float xd[6] = {0}, ud[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	struct rtensor ts[3] = {shape_tensor(DT_FLOAT, 2, dims, xd), shape_tensor(DT_INT64, 2, idims, ix),
				shape_tensor(DT_FLOAT, 2, idims, ud)};
	gse_refused("graphdiet: 1\nopset: 18\ninputs: [{name: x, dtype: float32, shape: [2, 3]}, {name: r, dtype: int64, "
		    "shape: [3, 3]}, {name: v, dtype: float32, shape: [3, 3]}]\nnodes:\n  - {op: ScatterElements, inputs: "
		    "[x, r, v], outputs: [y], attrs: {axis: 1}}\noutputs: [{name: y}]\n",
		    ts, 1, "indices' dimension 0 (3) exceeds the data's (2)");
}

/* GridSample's gradient indexes X turned channels-last (GatherND, ScatterND over (N, P K) slices of
 * C) rather than through GatherElements and ScatterElements over (N, C, P K), which needed the
 * taps' indices copied once per channel; its gradients the same bits at 1 and 3 threads. */
Test(exec, grid_sample_gradient_copies_no_index_per_channel)
{
	struct graph *g = load_text("gsgrad.yaml",
				    "graphdiet: 1\nopset: 17\ninputs: []\nparams:\n"
				    "  - {name: x, dtype: float32, shape: [2, 16, 5, 6], init: {dist: normal, seed: 1}}\n"
				    "  - {name: g, dtype: float32, shape: [2, 4, 7, 2], init: {dist: normal, seed: 2}}\n"
				    "nodes:\n  - {op: GridSample, inputs: [x, g], outputs: [y]}\n"
				    "  - {op: Mul, inputs: [y, y], outputs: [yy]}\n"
				    "  - {op: ReduceSum, inputs: [yy], outputs: [loss], attrs: {keepdims: 0}}\n"
				    "outputs: [{name: loss}]\n");
	const char *params[] = {"x", "g"};
	struct autodiff_opts ao = {.params = params, .n_params = 2};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert(!autodiff(g, &ao, &res, &e), "%s", e.msg);
	void *grads[2][2] = {{NULL}};
	for (int th = 1; th <= 3; th += 2) {
		struct exec_profile prof;
		memset(&prof, 0, sizeof prof);
		struct exec_opts o = {.profile = &prof};
		pool_set_threads(th);
		struct exec *x = exec_run(g, &o, NULL, &e);
		pool_set_threads(1);
		cr_assert(x, "%s", e.msg);
		cr_expect_eq(prof.calls[op_lookup("", "GatherElements")] + prof.calls[op_lookup("", "ScatterElements")], 0);
		cr_expect_eq(prof.calls[op_lookup("", "GatherND")], 1);
		cr_expect_eq(prof.calls[op_lookup("", "ScatterND")], 1);
		for (uint32_t i = 0, k = 0; i < g->n_outputs; i++) {
			if (strcmp(g->outputs[i]->name, "x_grad") && strcmp(g->outputs[i]->name, "g_grad"))
				continue;
			const struct rtensor *t = exec_value(x, g->outputs[i]);
			cr_assert(k < 2);
			grads[th / 2][k] = xmalloc(t->nbytes + 1);
			memcpy(grads[th / 2][k], t->data, t->nbytes);
			if (th == 3)
				cr_expect_eq(memcmp(grads[0][k], grads[1][k], t->nbytes), 0, "%s: other bits at 3 threads",
					     g->outputs[i]->name);
			k++;
		}
		exec_free(x);
	}
	for (int i = 0; i < 4; i++)
		xfree(grads[i / 2][i % 2]);
	graph_free(g);
}

/* #52 adam: DietAdam's factored moments (8-row tiles, column strips over the pool) and
 * ReduceLogSumExp over a strided axis (runs of outputs side by side), against references written
 * here. */

/* DietAdam, factored second moment (float32 and float64), dense float32 g, three steps (q', vr',
 * vc' fed back, t = 1, 2, 3) on 45 x 1027 (5 blocks of 8 rows and 5 rows more, 1027 columns: 4 strips of 256 and 3 columns
 * more) and 7 x 19 (no whole block) with edge values in g; stochastic rounding; at 1 thread (one
 * pass) and 3 (rows and strips over the pool): every q', vr' and vc' bit against the float64
 * formulas, each row's and column's sum of squares in index order. */
/* A factored moment: b2 prev + (1 - b2) mean of p[k st]^2 over k < n, the squares summed in index
 * order in double; stored float32 unless f64. */
static double ref_moment(const float *p, int n, int st, double prev, double b2, int f64)
{
	double s = 0;
	for (int k = 0; k < n; k++)
		s += (double)p[k * st] * p[k * st];
	double v = b2 * prev + (1 - b2) * s / n;
	return f64 ? v : (float)v;
}

/* The key of step t's uniforms: the run's seed of g's DietAdam node, mixed with t as diet.c does. */
static uint64_t diet_step_key(struct exec *x, const struct graph *g, int64_t t)
{
	const struct node *up = NULL;
	for (uint32_t k = 0; k < g->n_nodes; k++)
		if (g->nodes[k]->op == OP_DIET_ADAM)
			up = g->nodes[k];
	cr_assert(up);
	return exec_node_seed(x, up) ^ ((uint64_t)t * 0x9e3779b97f4a7c15ull);
}

Test(exec, adam_factored_diet_adam_steps_match_a_float64_reference)
{
	enum { RM = 45, CM = 1027 };
	static const int shapes[2][2] = {{RM, CM}, {7, 19}};
	static int16_t q[2][RM * CM];
	static float g[RM * CM];
	static double vr[2][RM], vc[2][CM]; /* float32 moments: float32 values */
	static double rr[RM], cc[CM];
	const double b2 = 0.75, eps = 9.5367431640625e-07, lr = 0.5, scale = 0.0078125;
	for (int sh = 0; sh < 4; sh++) {
		int R = shapes[sh % 2][0], C = shapes[sh % 2][1], f64 = sh >= 2;
		const char *mt = f64 ? "float64" : "float32";
		char yaml[2048];
		snprintf(yaml, sizeof yaml,
			 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
			 "inputs: [{name: q, dtype: int16, shape: [%d, %d]}, {name: g, dtype: float32, shape: [%d, %d]},"
			 " {name: t, dtype: int64, shape: []}, {name: vr, dtype: %s, shape: [%d]},"
			 " {name: vc, dtype: %s, shape: [%d]}]\n"
			 "nodes:\n  - {name: up, op: DietAdam, domain: graphdiet, inputs: [q, g, t, '', vr, vc],"
			 " outputs: [qn, '', vrn, vcn],\n     attrs: {beta2: 0.75, epsilon: 9.5367431640625e-07, lr: 0.5,"
			 " schedule: none, warmup: 2.0, scale: 0.0078125, round: stochastic}}\n"
			 "outputs: [{name: qn}, {name: vrn}, {name: vcn}]\n",
			 R, C, R, C, mt, R, mt, C);
		struct graph *gr = load_text("diet_steps.yaml", yaml);
		for (int th = 0; th < 2; th++) { /* the state at 1 and at 3 threads: q[th], vr[th], vc[th] */
			for (int k = 0; k < R * C; k++)
				q[th][k] = (int16_t)((k * 37) % 2001 - 1000);
			for (int i = 0; i < R; i++)
				vr[th][i] = (float)(i % 5) * 0.25f;
			for (int j = 0; j < C; j++)
				vc[th][j] = (float)(j % 11) * 0.125f;
		}
		for (int64_t t = 1; t <= 3; t++) {
			for (int k = 0; k < R * C; k++) /* ordinary values, signed zeros, subnormals; edges in the small one */
				g[k] = sh % 2 && k % 5 == 0 ? (float)opt_edges[(k / 5 + (int)t) % OPT_NE]
				       : k % 13 == 0	? -0.0f
				       : k % 13 == 1	? 1e-41f
							: (float)((double)((k * 7919 + (int)t * 101) % 1999 - 999) * 0.0012345);
			double bc = 1 - pow(b2, (double)t), lrt = lr * fmin((double)t / 2.0, 1), cmean = 0;
			for (int th = 0; th < 2; th++) {
				const int64_t dq[2] = {R, C}, dr[1] = {R}, dc[1] = {C};
				int64_t tv = t;
				static float vrf[RM], vcf[CM];
				for (int i = 0; i < R + C; i++)
					*(i < R ? &vrf[i] : &vcf[i - R]) = (float)(i < R ? vr[th][i] : vc[th][i - R]);
				struct rtensor ins[5] = {rt_over(DT_INT16, 2, dq, q[th]), rt_over(DT_FLOAT, 2, dq, g),
							 rt_over(DT_INT64, 0, dq, &tv),
							 f64 ? rt_over(DT_DOUBLE, 1, dr, vr[th]) : rt_over(DT_FLOAT, 1, dr, vrf),
							 f64 ? rt_over(DT_DOUBLE, 1, dc, vc[th]) : rt_over(DT_FLOAT, 1, dc, vcf)};
				const char *names[5] = {"q", "g", "t", "vr", "vc"};
				/* the reference from this thread count's state (the same as the other's if all agree) */
				for (int i = 0; i < R; i++)
					rr[i] = ref_moment(g + i * C, C, 1, vr[th][i], b2, f64);
				cmean = 0;
				for (int j = 0; j < C; j++) {
					cc[j] = ref_moment(g + j, R, C, vc[th][j], b2, f64);
					cmean += sqrt(cc[j] / bc) + eps;
				}
				cmean /= C;
				pool_set_threads(th ? 3 : 1);
				struct exec_opts xo = {.inputs = ins, .input_names = names, .n_inputs = 5};
				struct gd_err e = {0};
				struct exec *x = exec_run(gr, &xo, NULL, &e);
				cr_assert(x, "%s", e.msg);
				uint64_t key = diet_step_key(x, gr, t);
				const struct rtensor *qn = exec_value(x, strmap_get(&gr->names, "qn"));
				const struct rtensor *vrn = exec_value(x, strmap_get(&gr->names, "vrn"));
				const struct rtensor *vcn = exec_value(x, strmap_get(&gr->names, "vcn"));
				int64_t bad = 0;
				for (int k = 0; k < R * C; k++) {
					double denom = (sqrt(rr[k / C] / bc) + eps) * (sqrt(cc[k % C] / bc) + eps) / cmean;
					int16_t want = ref_quantize(q[th][k] * scale - lrt * (double)g[k] / denom, scale,
								    philox_uniform(key, (uint64_t)k));
					int16_t got = ((const int16_t *)qn->data)[k];
					if (got != want && bad++ < 5)
						cr_expect(0, "%dx%d %s step %lld, %d threads: q'[%d] %d, not %d", R, C, mt, (long long)t,
							  th ? 3 : 1, k, got, want);
				}
				for (int i = 0; i < R + C; i++) {
					double got = rt_get(i < R ? vrn : vcn, i < R ? i : i - R), want = i < R ? rr[i] : cc[i - R];
					if (!same_bits(got, want, f64) && bad++ < 5)
						cr_expect(0, "%dx%d %s step %lld, %d threads: %s'[%d] %.17g, not %.17g", R, C, mt, (long long)t,
							  th ? 3 : 1, i < R ? "vr" : "vc", i < R ? i : i - R, got, want);
				}
				cr_expect_eq(bad, 0, "%dx%d %s step %lld, %d threads: %lld values differ", R, C, mt, (long long)t, th ? 3 : 1,
					     (long long)bad);
				memcpy(q[th], qn->data, sizeof(int16_t) * (size_t)(R * C)); /* the next step's state */
				for (int i = 0; i < R + C; i++)
					*(i < R ? &vr[th][i] : &vc[th][i - R]) = rt_get(i < R ? vrn : vcn, i < R ? i : i - R);
				exec_free(x);
			}
			cr_expect(!memcmp(q[0], q[1], sizeof(int16_t) * (size_t)(R * C)) && !memcmp(vr[0], vr[1], sizeof(double) * (size_t)R) &&
				  !memcmp(vc[0], vc[1], sizeof(double) * (size_t)C),
				  "%dx%d %s step %lld: 1 and 3 threads differ", R, C, mt, (long long)t);
		}
		pool_set_threads(1);
		graph_free(gr);
	}
}

/* ReduceLogSumExp of x (3, 37, 300), float32 and float64, over axes [1] (strided, 300 outputs a
 * line: runs of 256 and 44), [0] (strided by 11,100), [2] (the last), [0, 1] and [1, 2], keepdims 0
 * and 1, at 1 and 3 threads, with lines all -inf (one -inf line, x[:, :, 5] and x[1, 2, :]), NaN,
 * +inf, and values near float32's largest. Each output bit for bit against the walk written here
 * (the maximum, then exp(x - m): vm_expf for float32, libm's exp for float64, summed in double in
 * index order; m + log(sum), m where m is infinite), and against the float64 definition
 * m + log(sum exp(x - m)) to 2 ulp + 2^-22 (float32: vm_expf's 1.1 ulp) or 1e-15 relative + 1e-15. */
Test(exec, adam_reduce_log_sum_exp_matches_its_definition)
{
	enum { A = 3, B = 37, C = 300, N = A * B * C };
	static float xf[N];
	static double xd[N];
	for (int e = 0; e < N; e++) {
		int a = e / (B * C), b = e / C % B, c = e % C;
		double v = (double)((e * 7919) % 2003 - 1001) * 0.01 + (c % 7) * 0.003;
		v = c == 5 || (a == 1 && b == 2) ? -INFINITY
		    : c == 7 && b == 3		 ? NAN
		    : c == 9 && b == 10		 ? INFINITY
		    : c % 17 == 11		 ? 3.0e38 - (double)(e % 97) * 1e36
		    : c % 17 == 12 && b == 4	 ? -INFINITY
						 : v;
		xd[e] = v;
		xf[e] = (float)v;
	}
	static const char *const axes[5] = {"[1]", "[0]", "[2]", "[0, 1]", "[1, 2]"};
	static const int red[5][3] = {{0, 1, 0}, {1, 0, 0}, {0, 0, 1}, {1, 1, 0}, {0, 1, 1}};
	const int64_t dims[3] = {A, B, C};
	for (int f64 = 0; f64 < 2; f64++)
		for (int ax = 0; ax < 5; ax++)
			for (int keep = 0; keep < 2; keep++) {
				char yaml[1024];
				snprintf(yaml, sizeof yaml,
					 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [3, 37, 300]}]\n"
					 "nodes:\n  - {op: ReduceLogSumExp, inputs: [x], outputs: [y], name: op,"
					 " attrs: {axes: %s, keepdims: %d}}\noutputs: [{name: y}]\n",
					 f64 ? "float64" : "float32", axes[ax], keep);
				struct graph *g = load_text("lse.yaml", yaml);
				struct rtensor in = rt_over(f64 ? DT_DOUBLE : DT_FLOAT, 3, dims, f64 ? (void *)xd : (void *)xf);
				const char *names[1] = {"x"};
				/* the outputs in index order of the kept dimensions; each output's elements in index order */
				int64_t kd[3], on = 1, len = 1;
				for (int d = 0; d < 3; d++) {
					kd[d] = red[ax][d] ? 1 : dims[d];
					on *= kd[d];
					len *= red[ax][d] ? dims[d] : 1;
				}
				for (int th = 1; th <= 3; th += 2) {
					pool_set_threads(th);
					struct exec_opts xo = {.inputs = &in, .input_names = names, .n_inputs = 1};
					struct gd_err e = {0};
					struct exec *x = exec_run(g, &xo, NULL, &e);
					cr_assert(x, "%s", e.msg);
					const struct rtensor *y = exec_value(x, strmap_get(&g->names, "y"));
					cr_assert_eq(y->numel, on);
					cr_assert_eq(y->ndim, keep ? 3 : 3 - (int)(red[ax][0] + red[ax][1] + red[ax][2]));
					int64_t bad = 0, far = 0;
					for (int64_t o = 0; o < on; o++) {
						int64_t oi[3] = {o / (kd[1] * kd[2]), o / kd[2] % kd[1], o % kd[2]}, ne = 0;
						static int64_t el[B * C];
						for (int64_t a = oi[0]; a < (red[ax][0] ? A : oi[0] + 1); a++) /* in index order */
							for (int64_t b = oi[1]; b < (red[ax][1] ? B : oi[1] + 1); b++)
								for (int64_t c = oi[2]; c < (red[ax][2] ? C : oi[2] + 1); c++)
									el[ne++] = (a * B + b) * C + c;
						cr_assert_eq(ne, len);
						double m = -INFINITY, s = 0, s64 = 0;
						for (int64_t k = 0; k < ne; k++) {
							double v = f64 ? xd[el[k]] : xf[el[k]];
							m = v > m || isnan(v) ? v : m;
						}
						for (int64_t k = 0; k < ne && !isinf(m); k++) {
							s += f64 ? exp(xd[el[k]] - m) : (double)vm_expf(xf[el[k]] - (float)m);
							s64 += exp((f64 ? xd[el[k]] : (double)xf[el[k]]) - m);
						}
						double want = isinf(m) ? m : m + log(s), def = isinf(m) ? m : m + log(s64);
						double got = rt_get(y, o);
						if (!same_bits(got, want, f64) && bad++ < 3)
							cr_expect(0, "%s axes %s keepdims %d, %d threads: y[%lld] %.17g, not %.17g",
								  f64 ? "float64" : "float32", axes[ax], keep, th, (long long)o, got, want);
						double tol = f64 ? 1e-15 * fabs(def) + 1e-15
								 : 2 * (nextafterf((float)fabs(def), INFINITY) - (float)fabs(def)) + 0x1p-22;
						if (isnan(def) ? !isnan(got) : isinf(def) ? got != def : !(fabs(got - def) <= tol))
							far++;
					}
					cr_expect_eq(bad, 0, "%s axes %s keepdims %d, %d threads: %lld outputs differ",
						     f64 ? "float64" : "float32", axes[ax], keep, th, (long long)bad);
					cr_expect_eq(far, 0, "%s axes %s keepdims %d, %d threads: %lld outputs off the definition",
						     f64 ? "float64" : "float32", axes[ax], keep, th, (long long)far);
					exec_free(x);
				}
				pool_set_threads(1);
				graph_free(g);
			}
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
/* #52 scatter max/min: ScatterElements and ScatterND with reduction max and min (opset 18), with
 * repeated indices and a NaN on either side (NumPy's maximum and minimum: the NaN wins) */
Test(exec, scatters_reduce_with_max_and_min)
{
	const double data[5] = {1, 5, -2, NAN, 0}, upd[6] = {3, 2, -7, 4, 1, NAN};
	const int64_t idx[6] = {0, 0, 2, 1, 3, 4};
	const double want_max[5] = {3, 5, -2, NAN, NAN}, want_min[5] = {1, 4, -7, NAN, NAN};
	for (int dbl = 0; dbl < 2; dbl++)
		for (int nd = 0; nd < 2; nd++)
			for (int mx = 0; mx < 2; mx++) {
				const char *dt = dbl ? "float64" : "float32";
				float df[5], uf[6];
				for (int i = 0; i < 6; i++) {
					uf[i] = (float)upd[i];
					if (i < 5)
						df[i] = (float)data[i];
				}
				struct rtensor t[3] = {
					{.dtype = dbl ? DT_DOUBLE : DT_FLOAT, .ndim = 1, .dims = {5}, .numel = 5,
					 .data = dbl ? (void *)data : (void *)df, .nbytes = dbl ? 40 : 20, .known = 1},
					{.dtype = DT_INT64, .ndim = nd ? 2 : 1, .dims = {6, 1}, .numel = 6, .data = (void *)idx,
					 .nbytes = 48, .known = 1},
					{.dtype = dbl ? DT_DOUBLE : DT_FLOAT, .ndim = 1, .dims = {6}, .numel = 6,
					 .data = dbl ? (void *)upd : (void *)uf, .nbytes = dbl ? 48 : 24, .known = 1}};
				const char *names[3] = {"d", "i", "u"};
				char ins[256], node[160];
				snprintf(ins, sizeof ins,
					 "{name: d, dtype: %s, shape: [5]}, {name: i, dtype: int64, shape: [%s]}, "
					 "{name: u, dtype: %s, shape: [6]}",
					 dt, nd ? "6, 1" : "6", dt);
				snprintf(node, sizeof node, "{op: %s, inputs: [d, i, u], outputs: [y], attrs: {reduction: %s}}",
					 nd ? "ScatterND" : "ScatterElements", mx ? "max" : "min");
				struct graph *g;
				void *cp[3];
				struct exec *e = sel_run(&g, ins, node, "{name: y}", t, names, 3, cp);
				const struct rtensor *y = exec_value(e, g->outputs[0]);
				for (int k = 0; k < 5; k++) {
					double got = dbl ? ((const double *)y->data)[k] : ((const float *)y->data)[k];
					double want = mx ? want_max[k] : want_min[k];
					cr_expect(isnan(want) ? isnan(got) : got == want, "%s %s %s element %d: %g, not %g",
						  nd ? "ScatterND" : "ScatterElements", mx ? "max" : "min", dt, k, got, want);
				}
				s2_free(e, g, cp, 3);
			}
}
