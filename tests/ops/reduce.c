/* tests/ops/reduce.c - forward values of the reduce op family against numbers computed apart from graphdiet
 * (numpy, PyTorch or ONNX's backend test data), run as part of test_ops.
 *
 * ONNX's own backend tests (Debian's libonnx-testdata, ONNX 1.12) give inputs and expected outputs
 * for every op of the family: each folder whose name matches a family's pattern is converted to
 * .npy by Debian's python3 and run through the executor, every output compared (floats within
 * rtol 1e-4 and atol 1e-5, NaN equal; integers exactly; dtype and shape equal). The rest are
 * cases the data does not cover, with numbers from numpy or the ONNX spec's text. */
#include "helpers.h"
#include "io/format.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ONNX_NODE_TESTS "/usr/share/libonnx-testdata/data/node"

static const char convert_py[] =
	"import glob, os, re, sys\n"
	"import numpy as np, onnx\n"
	"from onnx import numpy_helper\n"
	"out, pat = sys.argv[1].split('|', 1)\n"
	"names = []\n"
	"for d in sorted(glob.glob('" ONNX_NODE_TESTS "/test_*')):\n"
	"    name = os.path.basename(d)\n"
	"    if not re.fullmatch(pat, name):\n"
	"        continue\n"
	"    os.makedirs(os.path.join(out, name), exist_ok=True)\n"
	"    for f in glob.glob(os.path.join(d, 'test_data_set_0', '*.pb')):\n"
	"        t = onnx.TensorProto()\n"
	"        t.ParseFromString(open(f, 'rb').read())\n"
	"        k = os.path.basename(f)[:-3]\n"
	"        np.save(os.path.join(out, name, k + '.npy'), numpy_helper.to_array(t))\n"
	"    names.append(name)\n"
	"open(os.path.join(out, 'list.txt'), 'w').write(''.join(n + '\\n' for n in names))\n";

/* got within the backend tests' tolerance of want */
static void expect_close(const struct rtensor *got, const struct rtensor *want, const char *what)
{
	expect_tensor_close(got, want, 1e-4, 1e-5, what);
}

/* <dir>/<test>/input_<k>.npy and output_<k>.npy (the converted data set 0) */
struct converted {
	const char *dir, *test;
};
static void converted_npy(const void *ctx, int is_output, size_t k, const char *name, char *buf, size_t n)
{
	const struct converted *c = ctx;
	(void)name;
	snprintf(buf, n, "%s/%s/%s_%zu.npy", c->dir, c->test, is_output ? "output" : "input", k);
}

/* Runs every backend test whose folder name fully matches `pattern`; returns how many ran. */
static int backend_tests(const char *pattern)
{
	char dir[512], arg[1024], path[1024];
	snprintf(dir, sizeof dir, "%s/onnx_%08x", tmpdir(), (unsigned)(rand() ^ (int)strlen(pattern) << 20));
	snprintf(arg, sizeof arg, "%s|%s", dir, pattern);
	python_ok(convert_py, arg, "converting ONNX's backend tests");
	snprintf(path, sizeof path, "%s/list.txt", dir);
	size_t len;
	char *list = (char *)slurp(path, &len), *save = NULL;
	int ran = 0;
	for (char *name = strtok_r(list, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
		snprintf(path, sizeof path, "%s/%s/model.onnx", ONNX_NODE_TESTS, name);
		struct graph *g = load_ok(path);
		struct converted c = {dir, name};
		expect_run_matches_npy(g, converted_npy, &c, 1e-4, 1e-5, name);
		graph_free(g);
		ran++;
	}
	free(list);
	return ran;
}

Test(reduce_ops, new_reductions_match_onnx_backend_tests)
{
	cr_expect_eq(backend_tests("test_reduce_(l1|sum_square|log_sum|log_sum_exp|log_sum_asc|log_sum_desc)_.*"), 28);
}

Test(reduce_ops, arg_extremes_match_onnx_backend_tests)
{
	cr_expect_eq(backend_tests("test_arg(max|min)_.*"), 32);
}

Test(reduce_ops, selection_ops_match_onnx_backend_tests)
{
	cr_expect_eq(backend_tests("test_(top_k|hardmax|nonzero|unique)_?.*"), 16);
}

Test(reduce_ops, indexing_ops_match_onnx_backend_tests)
{
	cr_expect_eq(backend_tests("test_(gathernd|compress|onehot|eyelike|reversesequence|size|scatter_with_axis|scatter_without_axis)_?.*"),
		     20);
}

/* output `name` of a YAML graph's run */
static struct exec *run_text(const char *text, struct graph **g)
{
	*g = load_text("case.yaml", text);
	struct exec_opts o = {0};
	struct gd_err e = {0};
	struct exec *x = exec_run(*g, &o, NULL, &e);
	cr_assert(x, "%s\n%s", e.msg, text);
	return x;
}

static void expect_values(struct exec *x, struct graph *g, uint32_t k, const double *want, int64_t n)
{
	const struct rtensor *t = exec_value(x, g->outputs[k]);
	cr_assert_eq(t->numel, n, "output %u has %lld elements, want %lld", k, (long long)t->numel, (long long)n);
	for (int64_t i = 0; i < n; i++)
		cr_expect(rt_get(t, i) == want[i] || fabs(rt_get(t, i) - want[i]) <= 1e-12 * fabs(want[i]),
			  "output %u [%lld]: %.17g, want %.17g", k, (long long)i, rt_get(t, i), want[i]);
}

/* torch.logsumexp: 1000 + log(e^0 + e^1) does not overflow as exp(1000) would */
Test(reduce_ops, log_sum_exp_of_large_values_is_finite)
{
	struct graph *g;
	struct exec *x = run_text("graphdiet: 1\nopset: 17\nparams:\n"
				  "  - {name: a, dtype: float64, shape: [2, 2], data: [1000, 1001, -1, 2]}\n"
				  "nodes:\n  - {op: ReduceLogSumExp, inputs: [a], outputs: [y], attrs: {axes: [1], keepdims: 0}}\n"
				  "outputs: [{name: y}]\n", &g);
	expect_values(x, g, 0, (const double[]){1001.3132616875182, 2.048587351573742}, 2); /* torch.logsumexp */
	exec_free(x);
	graph_free(g);
}

/* ONNX 18: a reduction over an empty set is its identity */
Test(reduce_ops, reductions_over_an_empty_set)
{
	struct graph *g;
	struct exec *x = run_text("graphdiet: 1\nopset: 18\nparams:\n"
				  "  - {name: a, dtype: float32, shape: [2, 0], data: []}\n"
				  "  - {name: ax, dtype: int64, shape: [1], data: [1]}\n"
				  "nodes:\n  - {op: ReduceMax, inputs: [a, ax], outputs: [mx], attrs: {keepdims: 0}}\n"
				  "  - {op: ReduceMin, inputs: [a, ax], outputs: [mn], attrs: {keepdims: 0}}\n"
				  "  - {op: ReduceLogSum, inputs: [a, ax], outputs: [ls], attrs: {keepdims: 0}}\n"
				  "  - {op: ReduceLogSumExp, inputs: [a, ax], outputs: [lse], attrs: {keepdims: 0}}\n"
				  "  - {op: ReduceSumSquare, inputs: [a, ax], outputs: [ss], attrs: {keepdims: 0}}\n"
				  "  - {op: ReduceL1, inputs: [a, ax], outputs: [l1], attrs: {keepdims: 0}}\n"
				  "outputs: [{name: mx}, {name: mn}, {name: ls}, {name: lse}, {name: ss}, {name: l1}]\n", &g);
	expect_values(x, g, 0, (const double[]){-INFINITY, -INFINITY}, 2);
	expect_values(x, g, 1, (const double[]){INFINITY, INFINITY}, 2);
	expect_values(x, g, 2, (const double[]){-INFINITY, -INFINITY}, 2);
	expect_values(x, g, 3, (const double[]){-INFINITY, -INFINITY}, 2);
	expect_values(x, g, 4, (const double[]){0, 0}, 2);
	expect_values(x, g, 5, (const double[]){0, 0}, 2);
	exec_free(x);
	graph_free(g);
}

/* noop_with_empty_axes (opset 18): each element reduced alone, as ONNX's reference (x^2, |x|) */
Test(reduce_ops, empty_axes_with_noop_reduce_each_element_alone)
{
	struct graph *g;
	struct exec *x = run_text("graphdiet: 1\nopset: 18\nparams:\n"
				  "  - {name: a, dtype: float32, shape: [3], data: [-2, 0.5, 3]}\n"
				  "  - {name: ax, dtype: int64, shape: [0], data: []}\n"
				  "nodes:\n  - {op: ReduceSumSquare, inputs: [a, ax], outputs: [ss], attrs: {noop_with_empty_axes: 1}}\n"
				  "  - {op: ReduceL1, inputs: [a, ax], outputs: [l1], attrs: {noop_with_empty_axes: 1}}\n"
				  "  - {op: ReduceLogSumExp, inputs: [a, ax], outputs: [lse], attrs: {noop_with_empty_axes: 1}}\n"
				  "  - {op: ReduceL2, inputs: [a, ax], outputs: [l2], attrs: {noop_with_empty_axes: 1}}\n"
				  "outputs: [{name: ss}, {name: l1}, {name: lse}, {name: l2}]\n", &g);
	expect_values(x, g, 0, (const double[]){4, 0.25, 9}, 3);
	expect_values(x, g, 1, (const double[]){2, 0.5, 3}, 3);
	expect_values(x, g, 2, (const double[]){-2, 0.5, 3}, 3);
	expect_values(x, g, 3, (const double[]){2, 0.5, 3}, 3);
	exec_free(x);
	graph_free(g);
}

/* ... and their gradients, each element's own: verify --gradcheck of the training graph */
Test(reduce_ops, empty_axes_with_noop_differentiate_per_element)
{
	char m[600], t[600];
	train_text(m, t, sizeof m, "noop_reduce",
		   "graphdiet: 1\nopset: 18\nparams:\n"
		   "  - {name: w, dtype: float64, shape: [3], data: [-0.8, 1.5, -2.2]}\n"
		   "  - {name: p, dtype: float64, shape: [3], data: [0.7, 1.3, 2.1]}\n"
		   "  - {name: ax, dtype: int64, shape: [0], data: []}\n"
		   "nodes:\n  - {op: ReduceL1, inputs: [w, ax], outputs: [a], attrs: {noop_with_empty_axes: 1}}\n"
		   "  - {op: ReduceL2, inputs: [w, ax], outputs: [b], attrs: {noop_with_empty_axes: 1}}\n"
		   "  - {op: ReduceSumSquare, inputs: [w, ax], outputs: [c], attrs: {noop_with_empty_axes: 1}}\n"
		   "  - {op: ReduceLogSumExp, inputs: [w, ax], outputs: [d], attrs: {noop_with_empty_axes: 1}}\n"
		   "  - {op: ReduceLogSum, inputs: [p, ax], outputs: [e], attrs: {noop_with_empty_axes: 1}}\n"
		   "  - {op: Sum, inputs: [a, b, c, d, e], outputs: [s]}\n  - {op: Mul, inputs: [s, s], outputs: [q]}\n"
		   "  - {op: ReduceSum, inputs: [q], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n");
	char *argv[] = {GD_BINARY, "verify", "--gradcheck", m, t, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_expect(strstr(r.out, "match: 3 outputs compared") != NULL, "%s", r.out);
	run_free(&r);
}

/* the spec: of equal elements the one with the lower index comes first (PyTorch's order differs);
 * opset 1's k is an attribute */
Test(reduce_ops, top_k_ties_go_to_the_lower_index)
{
	struct graph *g;
	struct exec *x = run_text("graphdiet: 1\nopset: 11\nparams:\n"
				  "  - {name: a, dtype: float32, shape: [5], data: [3, 1, 3, 2, 3]}\n"
				  "  - {name: k, dtype: int64, shape: [1], data: [2]}\n"
				  "nodes:\n  - {op: TopK, inputs: [a, k], outputs: [v, i]}\n"
				  "  - {op: TopK, inputs: [a, k], outputs: [sv, si], attrs: {largest: 0}}\n"
				  "outputs: [{name: v}, {name: i}, {name: sv}, {name: si}]\n", &g);
	expect_values(x, g, 0, (const double[]){3, 3}, 2);
	expect_values(x, g, 1, (const double[]){0, 2}, 2);
	expect_values(x, g, 2, (const double[]){1, 2}, 2);
	expect_values(x, g, 3, (const double[]){1, 3}, 2);
	exec_free(x);
	graph_free(g);
	x = run_text("graphdiet: 1\nopset: 9\nparams:\n"
		     "  - {name: a, dtype: float32, shape: [2, 3], data: [1, 5, 2, 9, 8, 7]}\n"
		     "nodes:\n  - {op: TopK, inputs: [a], outputs: [v, i], attrs: {k: 1}}\n"
		     "outputs: [{name: v}, {name: i}]\n", &g);
	expect_values(x, g, 0, (const double[]){5, 9}, 2);
	expect_values(x, g, 1, (const double[]){1, 0}, 2);
	exec_free(x);
	graph_free(g);
}

/* a language model's top-k: lanes of 3000 values rounded to a tenth (ties everywhere), k = 20
 * (the insertion path) and k = 1000 (the sort), against numpy's stable argsort; ArgMax and
 * ArgMin's first index, and ReduceMax and ReduceLogSumExp over the lanes (kept, and not, last) */
Test(reduce_ops, long_lanes_match_numpy)
{
	char dir[512], path[600];
	snprintf(dir, sizeof dir, "%s/long_lanes", tmpdir());
	python_ok("import os, sys, numpy as np\n"
		  "d = sys.argv[1]; os.makedirs(d, exist_ok=True)\n"
		  "x = np.round(np.random.default_rng(7).normal(size=(4, 3000)), 1).astype(np.float32)\n"
		  "np.save(d + '/x.npy', x)\n"
		  "for k in (20, 1000):\n"
		  "    for name, o in (('hi', np.argsort(-x, axis=1, kind='stable')), ('lo', np.argsort(x, axis=1, kind='stable'))):\n"
		  "        np.save(d + '/%s%d_i.npy' % (name, k), o[:, :k].astype(np.int64))\n"
		  "        np.save(d + '/%s%d_v.npy' % (name, k), np.take_along_axis(x, o[:, :k], 1))\n"
		  "np.save(d + '/amax.npy', np.argmax(x, 1)); np.save(d + '/amin.npy', np.argmin(x, 0))\n"
		  "np.save(d + '/rmax.npy', x.max(0))\n"
		  "m = x.max(1, keepdims=True); np.save(d + '/lse.npy', (m + np.log(np.exp(x - m).sum(1, keepdims=True))).astype(np.float32))\n",
		  dir, "numpy's top-k");
	struct graph *g = load_text("lanes.yaml",
				    "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4, 3000]}]\nparams:\n"
				    "  - {name: k20, dtype: int64, shape: [1], data: [20]}\n  - {name: k1000, dtype: int64, shape: [1], data: [1000]}\n"
				    "nodes:\n  - {op: TopK, inputs: [x, k20], outputs: [hi20_v, hi20_i]}\n"
				    "  - {op: TopK, inputs: [x, k20], outputs: [lo20_v, lo20_i], attrs: {largest: 0}}\n"
				    "  - {op: TopK, inputs: [x, k1000], outputs: [hi1000_v, hi1000_i]}\n"
				    "  - {op: TopK, inputs: [x, k1000], outputs: [lo1000_v, lo1000_i], attrs: {largest: 0}}\n"
				    "  - {op: ArgMax, inputs: [x], outputs: [amax], attrs: {axis: 1, keepdims: 0}}\n"
				    "  - {op: ArgMin, inputs: [x], outputs: [amin], attrs: {axis: 0, keepdims: 0}}\n"
				    "  - {op: ReduceMax, inputs: [x], outputs: [rmax], attrs: {axes: [0], keepdims: 0}}\n"
				    "  - {op: ReduceLogSumExp, inputs: [x], outputs: [lse], attrs: {axes: [1]}}\n"
				    "outputs: [{name: hi20_v}, {name: hi20_i}, {name: lo20_v}, {name: lo20_i}, {name: hi1000_v},"
				    " {name: hi1000_i}, {name: lo1000_v}, {name: lo1000_i}, {name: amax}, {name: amin}, {name: rmax}, {name: lse}]\n");
	struct rtensor in;
	snprintf(path, sizeof path, "%s/x.npy", dir);
	cr_assert(npy_load(path, &in));
	const char *names[] = {"x"};
	struct exec_opts o = {.inputs = &in, .input_names = names, .n_inputs = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	for (uint32_t k = 0; k < g->n_outputs; k++) {
		struct rtensor want;
		snprintf(path, sizeof path, "%s/%s.npy", dir, g->outputs[k]->name);
		cr_assert(npy_load(path, &want), "%s", path);
		expect_close(exec_value(x, g->outputs[k]), &want, g->outputs[k]->name);
		free(want.data);
	}
	exec_free(x);
	graph_free(g);
	free(in.data);
}

/* numpy.unique(a, axis=0, return_index, return_inverse, return_counts); unsorted: first occurrence */
Test(reduce_ops, unique_rows_sorted_and_in_order_of_occurrence)
{
	static const char rows[] = "  - {name: a, dtype: float32, shape: [5, 2], data: [1, 0, 0, 1, 1, 0, 0, 1, 2, 2]}\n";
	char text[1024];
	for (int sorted = 0; sorted < 2; sorted++) {
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 11\nparams:\n%snodes:\n"
			 "  - {op: Unique, inputs: [a], outputs: [y, i, inv, c], attrs: {axis: 0, sorted: %d}}\n"
			 "outputs: [{name: y}, {name: i}, {name: inv}, {name: c}]\n",
			 rows, sorted);
		struct graph *g;
		struct exec *x = run_text(text, &g);
		if (sorted) {
			expect_values(x, g, 0, (const double[]){0, 1, 1, 0, 2, 2}, 6);
			expect_values(x, g, 1, (const double[]){1, 0, 4}, 3);
			expect_values(x, g, 2, (const double[]){1, 0, 1, 0, 2}, 5);
		} else {
			expect_values(x, g, 0, (const double[]){1, 0, 0, 1, 2, 2}, 6);
			expect_values(x, g, 1, (const double[]){0, 1, 4}, 3);
			expect_values(x, g, 2, (const double[]){0, 1, 0, 1, 2}, 5);
		}
		expect_values(x, g, 3, (const double[]){2, 2, 1}, 3);
		exec_free(x);
		graph_free(g);
	}
}

/* before opset 13 Hardmax works on the input coerced to 2-D at axis: rows of 4 here */
Test(reduce_ops, hardmax_before_opset_13_coerces_to_2d)
{
	struct graph *g;
	struct exec *x = run_text("graphdiet: 1\nopset: 11\nparams:\n"
				  "  - {name: a, dtype: float64, shape: [2, 2, 2], data: [1, 5, 3, 2, 0, 0, 7, 7]}\n"
				  "nodes:\n  - {op: Hardmax, inputs: [a], outputs: [y]}\n"
				  "  - {op: Softmax, inputs: [a], outputs: [s]}\n"
				  "outputs: [{name: y}, {name: s}]\n", &g);
	expect_values(x, g, 0, (const double[]){0, 1, 0, 0, 0, 0, 1, 0}, 8);
	/* softmax over each row of 4 (numpy) */
	expect_values(x, g, 1,
		      (const double[]){0.01521942886415593, 0.8309526605439514, 0.11245721367093255, 0.04137069692096015,
				       0.0004555255972003227, 0.0004555255972003227, 0.4995444744027997, 0.4995444744027997},
		      8);
	exec_free(x);
	graph_free(g);
}

/* a NonZero or Compress whose input is only known when run: a clear error (exit 2), no crash */
Test(reduce_ops, data_dependent_lengths_need_data_to_train)
{
	char model[512], train[512];
	write_text(model, sizeof model, "nonzero.yaml",
		   "graphdiet: 1\nopset: 17\ninputs: [{name: c, dtype: bool, shape: [4]}]\nparams:\n"
		   "  - {name: w, dtype: float32, shape: [4], init: {dist: normal, seed: 1}}\n"
		   "nodes:\n  - {op: Compress, inputs: [w, c], outputs: [k], attrs: {axis: 0}}\n"
		   "  - {op: ReduceSum, inputs: [k], outputs: [loss], attrs: {keepdims: 0}}\n"
		   "outputs: [{name: loss}]\n");
	snprintf(train, sizeof train, "%s/nonzero_train.onnx", tmpdir());
	char *argv[] = {GD_BINARY, "train", model, "-o", train, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "Compress") != NULL, "%s", r.err);
	run_free(&r);
}
