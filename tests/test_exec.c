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
