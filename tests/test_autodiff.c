/* test_autodiff.c - the backward pass, proven two ways:
 *  - every differentiable op in the registry against central finite differences in float64, over
 *    shapes with broadcasting and every attribute variant the rules distinguish; an op without a
 *    case fails the test;
 *  - every testdata model's gradients against PyTorch's, saved by testdata/gen_models.py. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "helpers.h"
#include "io/npy.h"
#include "io/tensor.h"
#include "io/yaml.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gcase {
	const char *name;
	const char *params; /* YAML list entries for params: (float64, random) and constants */
	const char *nodes;  /* YAML list entries producing float64 `y` */
};

#define P(name, shape) "  - {name: " name ", dtype: float64, shape: " shape ", init: {dist: normal, seed: %d}}\n"
#define POS(name, shape) "  - {name: " name ", dtype: float64, shape: " shape ", init: {dist: uniform, low: 0.5, high: 2, seed: %d}}\n"

static const struct gcase cases[] = {
	{"Add broadcast", P("a", "[2, 3, 4]") P("b", "[3, 1]"), "  - {op: Add, inputs: [a, b], outputs: [y]}\n"},
	{"Sub broadcast", P("a", "[4]") P("b", "[2, 3, 4]"), "  - {op: Sub, inputs: [a, b], outputs: [y]}\n"},
	{"Mul broadcast", P("a", "[2, 1, 4]") P("b", "[3, 1]"), "  - {op: Mul, inputs: [a, b], outputs: [y]}\n"},
	{"Div", P("a", "[2, 3]") POS("b", "[3]"), "  - {op: Div, inputs: [a, b], outputs: [y]}\n"},
	{"Pow both", POS("a", "[2, 3]") P("b", "[3]"), "  - {op: Pow, inputs: [a, b], outputs: [y]}\n"},
	{"Pow constant exponent", P("a", "[5]"),
	 "  - {op: Constant, outputs: [two], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [2.0]}}}}\n"
	 "  - {op: Pow, inputs: [a, two], outputs: [y]}\n"},
	{"Neg", P("a", "[6]"), "  - {op: Neg, inputs: [a], outputs: [y]}\n"},
	{"Sqrt", POS("a", "[6]"), "  - {op: Sqrt, inputs: [a], outputs: [y]}\n"},
	{"Exp", P("a", "[6]"), "  - {op: Exp, inputs: [a], outputs: [y]}\n"},
	{"Log", POS("a", "[6]"), "  - {op: Log, inputs: [a], outputs: [y]}\n"},
	{"Erf", P("a", "[6]"), "  - {op: Erf, inputs: [a], outputs: [y]}\n"},
	{"Relu", P("a", "[3, 4]"), "  - {op: Relu, inputs: [a], outputs: [y]}\n"},
	{"Tanh", P("a", "[3, 4]"), "  - {op: Tanh, inputs: [a], outputs: [y]}\n"},
	{"Sigmoid", P("a", "[3, 4]"), "  - {op: Sigmoid, inputs: [a], outputs: [y]}\n"},
	{"Identity", P("a", "[3]"), "  - {op: Identity, inputs: [a], outputs: [y]}\n"},
	{"Cast", P("a", "[3]"), "  - {op: Cast, inputs: [a], outputs: [y], attrs: {to: 11}}\n"},
	{"Sum of three", P("a", "[2, 3]") P("b", "[3]") P("c", "[2, 1]"), "  - {op: Sum, inputs: [a, b, c], outputs: [y]}\n"},
	{"Where", P("a", "[2, 3]") P("b", "[3]") "  - {name: c, dtype: bool, shape: [2, 3], data: [1, 0, 1, 0, 0, 1]}\n",
	 "  - {op: Where, inputs: [c, a, b], outputs: [y]}\n"},
	{"Gemm", P("a", "[3, 4]") P("b", "[4, 2]") P("c", "[2]"),
	 "  - {op: Gemm, inputs: [a, b, c], outputs: [y], attrs: {alpha: 0.5, beta: 2.0}}\n"},
	{"Gemm transposed", P("a", "[4, 3]") P("b", "[2, 4]") P("c", "[3, 1]"),
	 "  - {op: Gemm, inputs: [a, b, c], outputs: [y], attrs: {transA: 1, transB: 1}}\n"},
	{"MatMul batched broadcast", P("a", "[2, 3, 4]") P("b", "[4, 5]"), "  - {op: MatMul, inputs: [a, b], outputs: [y]}\n"},
	{"MatMul broadcast both", P("a", "[2, 1, 3, 4]") P("b", "[3, 4, 2]"), "  - {op: MatMul, inputs: [a, b], outputs: [y]}\n"},
	/* PyTorch's Linear on batched input: MatMul(x, Transpose(W)); the rule gives W its gradient */
	{"MatMul of a transposed weight", P("a", "[2, 3, 4]") P("w", "[5, 4]"),
	 "  - {op: Transpose, inputs: [w], outputs: [wt], attrs: {perm: [1, 0]}}\n"
	 "  - {op: MatMul, inputs: [a, wt], outputs: [y]}\n"},
	{"MatMul 2-D of a transposed weight read twice", P("a", "[3, 4]") P("w", "[5, 4]") P("c", "[4, 5]"),
	 "  - {op: Transpose, inputs: [w], outputs: [wt]}\n"
	 "  - {op: MatMul, inputs: [a, wt], outputs: [t]}\n"
	 "  - {op: Mul, inputs: [wt, c], outputs: [u]}\n"
	 "  - {op: MatMul, inputs: [a, u], outputs: [z]}\n"
	 "  - {op: Mul, inputs: [t, z], outputs: [y]}\n"},
	{"Conv", P("x", "[2, 3, 5, 5]") P("w", "[4, 3, 3, 3]") P("b", "[4]"),
	 "  - {op: Conv, inputs: [x, w, b], outputs: [y], attrs: {pads: [1, 1, 1, 1]}}\n"},
	{"Conv strided dilated", P("x", "[1, 2, 7, 6]") P("w", "[3, 2, 2, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {strides: [2, 2], dilations: [2, 1], pads: [0, 1, 1, 0]}}\n"},
	{"Conv grouped", P("x", "[1, 4, 5, 5]") P("w", "[6, 2, 3, 3]") P("b", "[6]"),
	 "  - {op: Conv, inputs: [x, w, b], outputs: [y], attrs: {group: 2, pads: [1, 0, 1, 0]}}\n"},
	{"ConvTranspose grouped", P("x", "[1, 4, 3, 3]") P("w", "[4, 3, 2, 2]"),
	 "  - {op: ConvTranspose, inputs: [x, w], outputs: [y], attrs: {group: 2, strides: [2, 1]}}\n"},
	{"Conv SAME_UPPER", P("x", "[1, 2, 5, 5]") P("w", "[2, 2, 3, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {auto_pad: \"SAME_UPPER\", strides: [2, 2]}}\n"},
	{"ConvTranspose", P("x", "[2, 3, 3, 3]") P("w", "[3, 2, 3, 3]") P("b", "[2]"),
	 "  - {op: ConvTranspose, inputs: [x, w, b], outputs: [y], attrs: {strides: [2, 2], pads: [1, 1, 1, 1], output_padding: [1, 0]}}\n"},
	{"MaxPool", P("x", "[2, 2, 5, 5]"),
	 "  - {op: MaxPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]}}\n"},
	{"AveragePool", P("x", "[1, 2, 5, 5]"),
	 "  - {op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3, 2], strides: [2, 1], pads: [1, 0, 1, 1]}}\n"},
	{"AveragePool count_include_pad", P("x", "[1, 2, 4, 4]"),
	 "  - {op: AveragePool, inputs: [x], outputs: [y], attrs: {kernel_shape: [3, 3], pads: [1, 1, 1, 1], count_include_pad: 1}}\n"},
	{"GlobalAveragePool", P("x", "[2, 3, 4, 5]"), "  - {op: GlobalAveragePool, inputs: [x], outputs: [y]}\n"},
	{"BatchNormalization training", P("x", "[3, 2, 2, 3]") P("s", "[2]") P("b", "[2]")
	 "  - {name: m, dtype: float64, shape: [2], data: [0.1, -0.2]}\n  - {name: v, dtype: float64, shape: [2], data: [1.5, 0.5]}\n",
	 "  - {op: BatchNormalization, inputs: [x, s, b, m, v], outputs: [y, rm, rv], attrs: {training_mode: 1}}\n"},
	{"BatchNormalization inference", P("x", "[3, 2, 4]") P("s", "[2]") P("b", "[2]")
	 "  - {name: m, dtype: float64, shape: [2], data: [0.1, -0.2]}\n  - {name: v, dtype: float64, shape: [2], data: [1.5, 0.5]}\n",
	 "  - {op: BatchNormalization, inputs: [x, s, b, m, v], outputs: [y]}\n"},
	{"LayerNormalization", P("x", "[2, 3, 4]") P("s", "[4]") P("b", "[4]"),
	 "  - {op: LayerNormalization, inputs: [x, s, b], outputs: [y], attrs: {epsilon: 0.001}}\n"},
	{"LayerNormalization two axes", P("x", "[2, 3, 4]") P("s", "[3, 4]"),
	 "  - {op: LayerNormalization, inputs: [x, s], outputs: [y], attrs: {axis: 1}}\n"},
	{"Softmax", P("x", "[2, 3, 4]"), "  - {op: Softmax, inputs: [x], outputs: [y], attrs: {axis: 1}}\n"},
	{"LogSoftmax", P("x", "[2, 5]"), "  - {op: LogSoftmax, inputs: [x], outputs: [y]}\n"},
	{"Dropout training", P("x", "[4, 5]") "  - {name: r, dtype: float64, shape: [], data: [0.3]}\n  - {name: t, dtype: bool, shape: [], data: [1]}\n",
	 "  - {op: Dropout, inputs: [x, r, t], outputs: [y], attrs: {seed: 7}}\n"},
	{"Reshape", P("x", "[2, 3, 4]") "  - {name: s, dtype: int64, shape: [2], data: [4, -1]}\n",
	 "  - {op: Reshape, inputs: [x, s], outputs: [y]}\n"},
	{"Flatten", P("x", "[2, 3, 4]"), "  - {op: Flatten, inputs: [x], outputs: [y], attrs: {axis: 2}}\n"},
	{"Squeeze", P("x", "[2, 1, 3]") "  - {name: ax, dtype: int64, shape: [1], data: [1]}\n",
	 "  - {op: Squeeze, inputs: [x, ax], outputs: [y]}\n"},
	{"Unsqueeze", P("x", "[2, 3]") "  - {name: ax, dtype: int64, shape: [2], data: [0, 3]}\n",
	 "  - {op: Unsqueeze, inputs: [x, ax], outputs: [y]}\n"},
	{"Transpose", P("x", "[2, 3, 4]"), "  - {op: Transpose, inputs: [x], outputs: [y], attrs: {perm: [2, 0, 1]}}\n"},
	{"Concat", P("a", "[2, 1, 3]") P("b", "[2, 4, 3]"), "  - {op: Concat, inputs: [a, b], outputs: [y], attrs: {axis: 1}}\n"},
	{"Split", P("x", "[2, 5]") "  - {name: s, dtype: int64, shape: [2], data: [2, 3]}\n",
	 "  - {op: Split, inputs: [x, s], outputs: [p, q], attrs: {axis: 1}}\n  - {op: Mul, inputs: [q, q], outputs: [y]}\n"},
	{"Slice", P("x", "[4, 5]") "  - {name: st, dtype: int64, shape: [2], data: [1, -4]}\n"
	 "  - {name: en, dtype: int64, shape: [2], data: [3, 100]}\n",
	 "  - {op: Slice, inputs: [x, st, en], outputs: [y]}\n"},
	{"Pad", P("x", "[2, 3]") "  - {name: p, dtype: int64, shape: [4], data: [1, 0, 0, 2]}\n",
	 "  - {op: Pad, inputs: [x, p], outputs: [y]}\n"},
	{"Gather embedding", P("e", "[5, 3]") "  - {name: i, dtype: int64, shape: [2, 3], data: [0, 4, 4, 1, 0, 2]}\n",
	 "  - {op: Gather, inputs: [e, i], outputs: [y]}\n"},
	{"Expand", P("x", "[3, 1]") "  - {name: s, dtype: int64, shape: [3], data: [2, 3, 4]}\n",
	 "  - {op: Expand, inputs: [x, s], outputs: [y]}\n"},
	{"ReduceSum", P("x", "[2, 3, 4]") "  - {name: ax, dtype: int64, shape: [2], data: [0, 2]}\n",
	 "  - {op: ReduceSum, inputs: [x, ax], outputs: [y], attrs: {keepdims: 0}}\n"},
	{"ReduceMean", P("x", "[2, 3, 4]"), "  - {op: ReduceMean, inputs: [x], outputs: [y], attrs: {axes: [-1]}}\n"},
	{"ReduceMax", P("x", "[3, 4]"), "  - {op: ReduceMax, inputs: [x], outputs: [y], attrs: {axes: [1], keepdims: 0}}\n"},
	{"SoftmaxCrossEntropyLoss mean", P("s", "[3, 4]") "  - {name: l, dtype: int64, shape: [3], data: [1, 0, 3]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l], outputs: [y]}\n"},
	{"SoftmaxCrossEntropyLoss weighted, ignore, spatial", P("s", "[2, 3, 2]") POS("w", "[3]")
	 "  - {name: l, dtype: int64, shape: [2, 2], data: [2, -1, 0, 1]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l, w], outputs: [y], attrs: {ignore_index: -1}}\n"},
	{"SoftmaxCrossEntropyLoss none", P("s", "[3, 4]") "  - {name: l, dtype: int64, shape: [3], data: [1, 0, 3]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l], outputs: [y, lp], attrs: {reduction: \"none\"}}\n"},
	{"NegativeLogLikelihoodLoss sum", P("s", "[3, 4]") "  - {name: l, dtype: int64, shape: [3], data: [1, 0, 3]}\n",
	 "  - {op: NegativeLogLikelihoodLoss, inputs: [s, l], outputs: [y], attrs: {reduction: \"sum\"}}\n"},
	{"NegativeLogLikelihoodLoss weighted, ignore", P("s", "[4, 3]") POS("w", "[3]")
	 "  - {name: l, dtype: int64, shape: [4], data: [2, 0, 5, 1]}\n",
	 "  - {op: NegativeLogLikelihoodLoss, inputs: [s, l, w], outputs: [y], attrs: {ignore_index: 5}}\n"},
	{"SoftmaxCrossEntropyLoss sum", P("s", "[3, 4]") "  - {name: l, dtype: int64, shape: [3], data: [3, 3, 0]}\n",
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [s, l], outputs: [y], attrs: {reduction: \"sum\"}}\n"},
	{"Conv SAME_LOWER dilated", P("x", "[1, 2, 6, 5]") P("w", "[2, 2, 2, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], attrs: {auto_pad: \"SAME_LOWER\", dilations: [2, 1]}}\n"},
	{"MaxPool dilated, no pads", P("x", "[1, 1, 6, 6]"),
	 "  - {op: MaxPool, inputs: [x], outputs: [y], attrs: {kernel_shape: [2, 2], dilations: [2, 2]}}\n"},
	{"Softmax default axis", P("x", "[2, 3, 4]"), "  - {op: Softmax, inputs: [x], outputs: [y]}\n"},
	{"LogSoftmax axis 0", P("x", "[3, 4]"), "  - {op: LogSoftmax, inputs: [x], outputs: [y], attrs: {axis: 0}}\n"},
	{"ReduceMax keepdims", P("x", "[3, 4]"), "  - {op: ReduceMax, inputs: [x], outputs: [y], attrs: {axes: [0]}}\n"},
	{"ReduceSum all axes", P("x", "[2, 3]"), "  - {op: ReduceSum, inputs: [x], outputs: [y]}\n"},
	{"ReduceMean two axes", P("x", "[2, 3, 4]"), "  - {op: ReduceMean, inputs: [x], outputs: [y], attrs: {axes: [0, 2], keepdims: 0}}\n"},
	{"Gemm scalar C", P("a", "[2, 3]") P("b", "[3, 4]") P("c", "[]"), "  - {op: Gemm, inputs: [a, b, c], outputs: [y]}\n"},
	{"Slice axes and negative start", P("x", "[3, 4, 5]") "  - {name: st, dtype: int64, shape: [1], data: [-3]}\n"
	 "  - {name: en, dtype: int64, shape: [1], data: [5]}\n  - {name: ax, dtype: int64, shape: [1], data: [2]}\n",
	 "  - {op: Slice, inputs: [x, st, en, ax], outputs: [y]}\n"},
	{"Split equal parts, first used", P("x", "[6, 2]"),
	 "  - {op: Split, inputs: [x], outputs: [y, q, r]}\n"},
	{"Gather negative indices", P("e", "[4, 2]") "  - {name: i, dtype: int64, shape: [3], data: [-1, 0, -1]}\n",
	 "  - {op: Gather, inputs: [e, i], outputs: [y]}\n"},
	{"Expand to a higher rank", P("x", "[3]") "  - {name: s, dtype: int64, shape: [3], data: [2, 1, 3]}\n",
	 "  - {op: Expand, inputs: [x, s], outputs: [y]}\n"},
	{"BatchNormalization training 2-D", P("x", "[5, 3]") P("s", "[3]") P("b", "[3]")
	 "  - {name: m, dtype: float64, shape: [3], data: [0, 0, 0]}\n  - {name: v, dtype: float64, shape: [3], data: [1, 1, 1]}\n",
	 "  - {op: BatchNormalization, inputs: [x, s, b, m, v], outputs: [y, rm, rv], attrs: {training_mode: 1}}\n"},
};

/* loss = sum(y*y)/2 + sum(y): dL/dy = y + 1 is different at every element */
static const char loss_nodes[] =
	"  - {op: Mul, inputs: [y, y], outputs: [yy]}\n"
	"  - {op: ReduceSum, inputs: [yy], outputs: [s1], attrs: {keepdims: 0}}\n"
	"  - {op: ReduceSum, inputs: [y], outputs: [s2], attrs: {keepdims: 0}}\n"
	"  - {name: half, op: Constant, outputs: [h], attrs: {value: {type: tensor, value: {dtype: float64, shape: [], data: [0.5]}}}}\n"
	"  - {op: Mul, inputs: [s1, h], outputs: [s3]}\n"
	"  - {op: Add, inputs: [s3, s2], outputs: [loss]}\n";

static struct graph *build(const struct gcase *c)
{
	char params[4096], text[8192];
	/* give each random parameter its own seed */
	snprintf(params, sizeof params, c->params, 11, 12, 13, 14, 15);
	snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\nparams:\n%snodes:\n%s%soutputs: [{name: loss}]\n", params,
		 c->nodes, loss_nodes);
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), c->name, ".", &e);
	cr_assert(g, "%s: %s\n%s", c->name, e.msg, text);
	cr_assert_eq(graph_check(g, &e), 0, "%s: %s", c->name, e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s: %s", c->name, e.msg);
	/* materialise random parameters as bytes we can perturb in place */
	for (uint32_t i = 0; i < g->n_inits; i++) {
		struct tensor *t = g->inits[i]->init;
		struct bytes b;
		cr_assert_eq(tensor_bytes(g, t, &b, &e), 0);
		t->bytes = (struct bytes){arena_memdup(g->arena, b.p, b.n), b.n};
		t->src = TSRC_BYTES;
	}
	return g;
}

static double run_loss(struct graph *g, struct exec **keep)
{
	struct exec_opts o = {0};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	double l = rt_get(exec_value(x, g->outputs[0]), 0);
	if (keep)
		*keep = x;
	else
		exec_free(x);
	return l;
}

static void gradcheck(const struct gcase *c)
{
	struct graph *g = build(c);
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", c->name, e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s: %s", c->name, e.msg);
	cr_assert_gt(res.n_grads, 0, "%s", c->name);
	struct exec *x;
	run_loss(g, &x);
	for (uint32_t k = 1; k < g->n_outputs; k++) {
		const struct value *gv = g->outputs[k];
		char pname[256];
		snprintf(pname, sizeof pname, "%.*s", (int)(strlen(gv->name) - 5), gv->name);
		struct value *p = strmap_get(&g->names, pname);
		cr_assert(p && p->init, "%s: %s has no parameter", c->name, gv->name);
		const struct rtensor *an = exec_value(x, gv);
		struct tensor *t = p->init;
		cr_assert_eq(an->numel * 8, (int64_t)t->bytes.n, "%s: %s has the parameter's size", c->name, gv->name);
		double *w = (double *)t->bytes.p;
		for (int64_t i = 0; i < an->numel; i++) {
			const double h = 1e-6, w0 = w[i];
			w[i] = w0 + h;
			double lp = run_loss(g, NULL);
			w[i] = w0 - h;
			double lm = run_loss(g, NULL);
			w[i] = w0;
			double num = (lp - lm) / (2 * h), ana = rt_get(an, i);
			cr_expect(fabs(num - ana) <= 1e-6 * fmax(1, fabs(num)), "%s: d loss / d %s[%lld]: analytic %.10g, numeric %.10g",
				  c->name, pname, (long long)i, ana, num);
		}
	}
	exec_free(x);
	graph_free(g);
}

Test(gradcheck, every_case)
{
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		gradcheck(&cases[i]);
}

Test(gradcheck, every_differentiable_op_has_a_rule_and_a_case)
{
	for (int op = 1; op < OP_COUNT; op++) {
		if (!(op_table[op].flags & OPF_DIFF))
			continue;
		cr_expect(op_table[op].impl && op_table[op].impl->grad, "%s has no gradient rule", op_table[op].op_type);
		char needle[64];
		snprintf(needle, sizeof needle, "op: %s,", op_table[op].op_type);
		int found = 0;
		for (size_t i = 0; i < sizeof cases / sizeof *cases && !found; i++)
			found = strstr(cases[i].nodes, needle) != NULL;
		cr_expect(found, "%s has no finite-difference case", op_table[op].op_type);
	}
}

/* ---- PyTorch ---- */

Test(pytorch, gradients_of_every_testdata_model)
{
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512];
		model_path(path, sizeof path, *m);
		struct graph *g = load_ok(path);
		struct rtensor ins[8];
		const char *names[8];
		size_t n = ref_inputs(g, *m, ins, names);
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		struct gd_err e = {0};
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", *m, e.msg);
		/* autodiff leaves g sorted (plan and train do not sort it again): every node after the
		 * producers of its inputs, and each node's index its position */
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *nd = g->nodes[i];
			cr_assert_eq(nd->index, i, "%s", *m);
			for (uint32_t k = 0; k < nd->n_in; k++)
				cr_assert(!nd->in[k] || !nd->in[k]->producer || nd->in[k]->producer->index < i,
					  "%s: node %u reads '%s' before it is made", *m, i, nd->in[k]->name);
		}
		struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = n};
		struct exec *x = exec_run(g, &o, NULL, &e);
		cr_assert(x, "%s: %s", *m, e.msg);
		size_t compared = 0;
		for (uint32_t k = 0; k < g->n_outputs; k++) {
			const struct value *v = g->outputs[k];
			if (!(v->flags & VALUE_GRAD))
				continue;
			ref_path(path, sizeof path, *m, v->name);
			struct rtensor ref;
			cr_assert(npy_load(path, &ref), "%s: PyTorch has no gradient %s", *m, v->name);
			const struct rtensor *got = exec_value(x, v);
			cr_assert_eq(got->numel, ref.numel, "%s: %s", *m, v->name);
			double scale = 0, worst = 0;
			for (int64_t i = 0; i < ref.numel; i++)
				scale = fmax(scale, fabs(rt_get(&ref, i)));
			for (int64_t i = 0; i < ref.numel; i++)
				worst = fmax(worst, fabs(rt_get(got, i) - rt_get(&ref, i)));
			/* relative 1e-5 of the gradient's scale; 1e-7 absolute for gradients that are exactly
			 * zero in theory (a conv bias before a training-mode BatchNorm) */
			cr_expect(worst <= 1e-5 * scale + 1e-7, "%s: %s differs from PyTorch by %g (scale %g)", *m, v->name,
				  worst, scale);
			free(ref.data);
			compared++;
		}
		/* and no PyTorch parameter was missed */
		size_t expected = 0;
		for (uint32_t i = 0; i < g->n_inits; i++) {
			char p[600], grad[512];
			snprintf(grad, sizeof grad, "%s_grad", g->inits[i]->name);
			FILE *f = fopen(ref_path(p, sizeof p, *m, grad), "rb");
			if (f) {
				expected++;
				fclose(f);
			}
		}
		cr_expect_eq(compared, expected, "%s: %zu gradients compared, PyTorch has %zu", *m, compared, expected);
		exec_free(x);
		graph_free(g);
		for (size_t i = 0; i < n; i++)
			free(ins[i].data);
	}
}

/* --loss-fn mse: loss = mean((y - t)^2) and dL/dW = (2 / numel) x^T (y - t), computed here from
 * the run's own inputs, independently of the graph. */
#include "rewrite/loss.h"

Test(loss_fn, mse_value_and_gradient)
{
	const char *text = "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float64, shape: [batch, 4]}]\n"
			   "params: [{name: w, dtype: float64, shape: [4, 3], init: {dist: normal, seed: 3}}]\n"
			   "nodes: [{op: MatMul, inputs: [x, w], outputs: [y]}]\n"
			   "outputs: [{name: y, dtype: float64, shape: [batch, 3]}]\n";
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "mse", ".", &e);
	cr_assert(g && !graph_check(g, &e) && !graph_toposort(g, &e), "%s", e.msg);
	cr_assert_eq(loss_append(g, LOSS_MSE, NULL, "target", &e), 0, "%s", e.msg);
	struct autodiff_opts ao = {.loss = "loss"};
	struct autodiff_result res;
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0);
	struct exec_binding b = {"batch", 5};
	struct exec_opts o = {.random_inputs = 1, .seed = 9, .dims = &b, .n_dims = 1};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const struct rtensor *xv = exec_value(x, strmap_get(&g->names, "x")), *tv = exec_value(x, strmap_get(&g->names, "target"));
	const struct rtensor *yv = exec_value(x, strmap_get(&g->names, "y")), *lv = exec_value(x, strmap_get(&g->names, "loss"));
	const struct rtensor *gw = exec_value(x, strmap_get(&g->names, "w_grad"));
	double loss = 0, d[5][3];
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 3; j++) {
			d[i][j] = rt_get(yv, i * 3 + j) - rt_get(tv, i * 3 + j);
			loss += d[i][j] * d[i][j] / 15;
		}
	cr_assert_float_eq(rt_get(lv, 0), loss, 1e-12);
	for (int k = 0; k < 4; k++)
		for (int j = 0; j < 3; j++) {
			double want = 0;
			for (int i = 0; i < 5; i++)
				want += 2.0 / 15 * rt_get(xv, i * 4 + k) * d[i][j];
			cr_assert_float_eq(rt_get(gw, k * 3 + j), want, 1e-12, "w_grad[%d][%d]", k, j);
		}
	/* a product of matrices backprops through one Gemm per operand, with no transposed copy */
	const struct node *p = ((const struct value *)strmap_get(&g->names, "w_grad"))->producer;
	cr_expect_str_eq(p->op_type, "Gemm");
	cr_expect(node_attr(p, "transA") && node_attr(p, "transA")->i == 1);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		cr_expect_str_neq(g->nodes[i]->op_type, "Transpose");
	exec_free(x);
	graph_free(g);
}
