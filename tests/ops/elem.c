/* tests/ops/elem.c - forward values of the elem op family against numbers computed apart from graphdiet
 * (numpy, PyTorch or ONNX's backend test data), run as part of test_ops.
 *
 * The cases are testdata/ops_elem.h, which testdata/ops_elem.py writes from NumPy: one node per
 * case, its inputs as data, the output's dtype, shape and values. Floats must agree to 1e-6
 * relative (float32: libm's and NumPy's float functions may differ in the last bits), NaN with NaN;
 * integers and bools exactly. */
#include "helpers.h"
#include "autodiff/ad.h"
#include "io/yaml.h"
#include "ir/dtype.h"
#include "ops/ops.h"
#include "rewrite/autocast.h"
#include "util/err.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

struct elem_case {
	const char *name;
	int opset;
	const char *params, *nodes, *dtype;
	int ndim;
	int64_t dims[4];
	const double *want;    /* float outputs */
	const int64_t *want_i; /* integer and bool outputs (uint64: the bits) */
};

#include "../../testdata/ops_elem.h"

/* The one-node graph of params and nodes, run; NULL with e set when it fails. */
static struct exec *run_nodes(int opset, const char *params, const char *nodes, struct graph **g, struct gd_err *e)
{
	char text[8192];
	snprintf(text, sizeof text, "graphdiet: 1\nopset: %d\nparams:\n%snodes:\n%soutputs: [{name: y}]\n", opset, params,
		 nodes);
	*g = yaml_read((const uint8_t *)text, strlen(text), "elem.yaml", ".", e);
	cr_assert(*g, "%s\n%s", e->msg, text);
	cr_assert_eq(graph_check(*g, e), 0, "%s", e->msg);
	cr_assert_eq(graph_toposort(*g, e), 0, "%s", e->msg);
	struct exec_opts o = {0};
	return exec_run(*g, &o, NULL, e);
}

static void check_case(const struct elem_case *c)
{
	struct graph *g;
	struct gd_err e = {0};
	struct exec *x = run_nodes(c->opset, c->params, c->nodes, &g, &e);
	cr_assert(x, "%s: %s", c->name, e.msg);
	const struct rtensor *y = exec_value(x, strmap_get(&g->names, "y"));
	cr_assert(y && y->data, "%s: no output", c->name);
	cr_expect_eq(y->dtype, dtype_from_name(c->dtype), "%s: dtype %s, want %s", c->name, dtype_name(y->dtype), c->dtype);
	cr_assert_eq(y->ndim, c->ndim, "%s: rank %d, want %d", c->name, y->ndim, c->ndim);
	for (int i = 0; i < c->ndim; i++)
		cr_assert_eq(y->dims[i], c->dims[i], "%s: dimension %d is %lld", c->name, i, (long long)y->dims[i]);
	for (int64_t i = 0; i < y->numel; i++) {
		if (c->want_i) {
			int64_t got = rt_get_i(y, i);
			cr_expect_eq(got, c->want_i[i], "%s: element %lld is %lld, want %lld", c->name, (long long)i,
				     (long long)got, (long long)c->want_i[i]);
			continue;
		}
		double got = rt_get(y, i), w = c->want[i];
		int ok = isnan(w) ? isnan(got) : got == w || fabs(got - w) <= 1e-6 * fabs(w) + 1e-12;
		cr_expect(ok, "%s: element %lld is %.17g, want %.17g", c->name, (long long)i, got, w);
	}
	exec_free(x);
	graph_free(g);
}

Test(elem, every_case_against_numpy)
{
	for (size_t i = 0; i < sizeof elem_cases / sizeof *elem_cases; i++)
		check_case(&elem_cases[i]);
}

/* Bad input is refused with the node named and a reason, never a crash or a wrong value. */
static void refused(const char *params, const char *nodes, const char *want)
{
	struct graph *g;
	struct gd_err e = {0};
	struct exec *x = run_nodes(20, params, nodes, &g, &e);
	cr_expect_null(x, "%s ran", nodes);
	cr_expect_eq(e.code, GD_EINPUT, "%s: code %d", nodes, e.code);
	cr_expect(strstr(e.msg, want), "%s: '%s' does not say '%s'", nodes, e.msg, want);
	exec_free(x);
	graph_free(g);
}

Test(elem, bad_inputs_are_refused)
{
	const char *ints = "  - {name: a, dtype: int32, shape: [2], data: [7, 1]}\n"
			   "  - {name: b, dtype: int32, shape: [2], data: [0, 1]}\n";
	const char *floats = "  - {name: a, dtype: float32, shape: [2], data: [7, 1]}\n"
			     "  - {name: b, dtype: float32, shape: [2], data: [0, 1]}\n";
	refused(ints, "  - {op: Mod, inputs: [a, b], outputs: [y]}\n", "division by zero");
	refused(ints, "  - {op: BitShift, inputs: [a, b], outputs: [y], attrs: {direction: \"LEFT\"}}\n", "unsigned");
	refused(floats, "  - {op: And, inputs: [a, b], outputs: [y]}\n", "bool");
	refused(floats, "  - {op: Mod, inputs: [a, b], outputs: [y], attrs: {fmod: 2}}\n", "fmod");
	refused(floats, "  - {op: Mod, inputs: [a, b], outputs: [y]}\n", "fmod must be 1 for float32");
	refused(ints, "  - {op: Sin, inputs: [a], outputs: [y]}\n", "float");
	refused("  - {name: a, dtype: int32, shape: [2], data: [7, 1]}\n  - {name: b, dtype: int64, shape: [2], data: [0, 1]}\n",
		"  - {op: Max, inputs: [a, b], outputs: [y]}\n", "same dtype");
	refused("  - {name: a, dtype: int8, shape: [2], data: [7, 1]}\n  - {name: b, dtype: int8, shape: [2], data: [0, 1]}\n",
		"  - {op: Clip, inputs: [a, b], outputs: [y]}\n", "scalar");
}

/* Mixed precision: after a 16-bit product, Sin and Gelu compute in their input's 16 bits, while Tan
 * and Reciprocal (float32 in PyTorch's autocast, ops.def's OPF_AMP_FP32) read float32; CastLike keeps
 * its target's dtype (float64 here) whatever autocast does around it. */
Test(elem, mixed_precision_keeps_the_precision_sensitive_ones_in_float32)
{
	struct graph *g = load_text("amp.yaml", "graphdiet: 1\nopset: 20\n"
						"params:\n"
						"  - {name: x, dtype: float32, shape: [4, 4], init: {dist: normal, seed: 1}}\n"
						"  - {name: w, dtype: float32, shape: [4, 4], init: {dist: normal, seed: 2}}\n"
						"  - {name: d, dtype: float64, shape: [1], data: [0]}\n"
						"nodes:\n"
						"  - {op: MatMul, inputs: [x, w], outputs: [m]}\n"
						"  - {op: Sin, inputs: [m], outputs: [s]}\n"
						"  - {op: Gelu, inputs: [s], outputs: [ge]}\n"
						"  - {op: Tan, inputs: [ge], outputs: [t]}\n"
						"  - {op: Reciprocal, inputs: [m], outputs: [r]}\n"
						"  - {op: CastLike, inputs: [m, d], outputs: [c]}\n"
						"  - {op: Add, inputs: [t, r], outputs: [tr]}\n"
						"  - {op: ReduceSum, inputs: [tr], outputs: [y], attrs: {keepdims: 0}}\n"
						"  - {op: ReduceSum, inputs: [c], outputs: [y2], attrs: {keepdims: 0}}\n"
						"outputs: [{name: y}, {name: y2}]\n");
	struct gd_err e = {0};
	size_t low;
	cr_assert_eq(autocast(g, &(struct autocast_opts){.dtype = DT_FLOAT16}, &low, &e), 0, "%s", e.msg);
	struct exec *x = exec_run(g, &(struct exec_opts){.shapes_only = 1}, NULL, &e);
	cr_assert(x, "%s", e.msg);
	int seen = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		int want = n->op == OP_SIN || n->op == OP_GELU ? DT_FLOAT16 : n->op == OP_TAN || n->op == OP_RECIPROCAL ? DT_FLOAT
			   : n->op == OP_CAST_LIKE ? DT_DOUBLE : 0;
		const struct value *v = n->op == OP_CAST_LIKE ? n->out[0] : n->in[0];
		if (!want)
			continue;
		seen++;
		cr_expect_eq(exec_value(x, v)->dtype, want, "%s's %s is %s, want %s", op_table[n->op].op_type,
			     n->op == OP_CAST_LIKE ? "output" : "input", dtype_name(exec_value(x, v)->dtype), dtype_name(want));
	}
	cr_expect_eq(seen, 5);
	exec_free(x);
	graph_free(g);
}

/* Gelu and Mish keep only x for the backward pass, as PyTorch's fused backward does: with a loss
 * that is their output's sum, no backward node reads their output. */
Test(elem, gelu_and_mish_gradients_read_only_x)
{
	static const char *const nodes[] = {
		"  - {op: Gelu, inputs: [a], outputs: [y]}\n",
		"  - {op: Gelu, inputs: [a], outputs: [y], attrs: {approximate: \"tanh\"}}\n",
		"  - {op: Mish, inputs: [a], outputs: [y]}\n",
	};
	for (size_t c = 0; c < sizeof nodes / sizeof *nodes; c++) {
		char text[1024];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 20\nparams:\n"
			 "  - {name: a, dtype: float32, shape: [3, 4], init: {dist: normal, seed: 1}}\n"
			 "nodes:\n%s  - {op: ReduceSum, inputs: [y], outputs: [loss], attrs: {keepdims: 0}}\n"
			 "outputs: [{name: loss}]\n",
			 nodes[c]);
		struct graph *g = load_text("fused.yaml", text);
		struct autodiff_result res;
		struct gd_err e = {0};
		cr_assert_eq(autodiff(g, &(struct autodiff_opts){0}, &res, &e), 0, "%s", e.msg);
		cr_expect_eq(res.n_grads, 1, "%s", nodes[c]);
		int reads_x = 0;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			for (uint32_t k = 0; !node_is_forward(n) && k < n->n_in; k++) {
				const char *name = n->in[k] ? n->in[k]->name : "";
				cr_expect(strcmp(name, "y"), "%sbackward node '%s' (%s) reads y", nodes[c], n->name, n->op_type);
				reads_x |= !strcmp(name, "a");
			}
		}
		cr_expect(reads_x, "%sthe gradient reads x", nodes[c]);
		graph_free(g);
	}
}
