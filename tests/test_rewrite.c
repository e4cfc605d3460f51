/* test_rewrite.c - graph rewrites: dimension binding and constant folding, appended losses. */
#include "exec/exec.h"
#include "helpers.h"
#include "autodiff/ad.h"
#include "rewrite/autocast.h"
#include "rewrite/ctrl.h"
#include "rewrite/fold.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

static int count_op(const struct graph *g, const char *op)
{
	int n = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		n += !strcmp(g->nodes[i]->op_type, op);
	return n;
}

static double loss_of(struct graph *g)
{
	struct exec_opts o = {.random_inputs = 1, .seed = 5};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	double l = rt_get(exec_value(x, g->outputs[0]), 0);
	exec_free(x);
	return l;
}

Test(fold, shape_chains_become_constants)
{
	struct graph *g = load_ok(TESTDATA "/transformer.onnx");
	double before = loss_of(g);
	cr_assert_eq(count_op(g, "Unsqueeze"), 30, "the export builds reshape targets from constants");
	size_t removed;
	struct gd_err e = {0};
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_assert_gt(removed, 50);
	cr_assert_eq(count_op(g, "Unsqueeze"), 0);
	cr_assert_eq(count_op(g, "Concat"), 0);
	cr_assert_eq(count_op(g, "MatMul"), 13, "no computation on parameters is folded");
	cr_assert_eq(loss_of(g), before, "the same loss, to the bit");
	cr_assert_eq(graph_toposort(g, &e), 0);
	graph_free(g);
}

/* Folding is skipped where nothing can fold (no node reads only constants or only shapes), but
 * nodes nothing reads are still swept; a node on constants alone still folds. */
Test(fold, dead_nodes_go_with_or_without_anything_to_fold)
{
	const char *head = "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [2, 3]}]\n"
			   "params: [{name: c, dtype: int64, shape: [2], data: [-3, -2]}]\nnodes:\n"
			   "  - {op: Relu, inputs: [x], outputs: [y]}\n  - {op: Neg, inputs: [x], outputs: [dead]}\n";
	for (int constant = 0; constant < 2; constant++) {
		char text[1024];
		snprintf(text, sizeof text, "%s%soutputs: [{name: y}%s]\n", head,
			 constant ? "  - {op: Neg, inputs: [c], outputs: [nc]}\n  - {op: Reshape, inputs: [y, nc], outputs: [r]}\n" : "",
			 constant ? ", {name: r}" : "");
		struct graph *g = load_text("fold_dead.yaml", text);
		size_t removed;
		struct gd_err e = {0};
		cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
		cr_expect_eq(count_op(g, "Relu"), 1);
		cr_expect_eq(removed, 1, "the unread Neg goes (constant %d)", constant);
		if (constant) {
			cr_expect_eq(count_op(g, "Neg"), 0, "Neg of a constant became a Constant");
			cr_expect_eq(count_op(g, "Constant"), 1);
		} else {
			cr_expect_eq(count_op(g, "Neg"), 0);
		}
		graph_free(g);
	}
}

/* The sweep is one pass from the end: a dead chain goes whole, however long; a node that another
 * waits on (a control input) stays though nothing reads its output, and so does one whose output
 * only a subgraph reads. */
Test(fold, dead_chains_go_and_control_inputs_stay)
{
	char text[1 << 16];
	int len = snprintf(text, sizeof text,
			   "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [2, 3]}]\nnodes:\n"
			   "  - {op: Sigmoid, name: waited, inputs: [x], outputs: [s]}\n"
			   "  - {op: Relu, inputs: [x], outputs: [y], after: [waited]}\n"
			   "  - {op: Neg, inputs: [x], outputs: [d0]}\n");
	for (int i = 1; i < 500; i++)
		len += snprintf(text + len, sizeof text - (size_t)len, "  - {op: Abs, inputs: [d%d], outputs: [d%d]}\n", i - 1, i);
	snprintf(text + len, sizeof text - (size_t)len, "outputs: [{name: y}]\n");
	struct graph *g = load_text("fold_chain.yaml", text);
	size_t removed;
	struct gd_err e = {0};
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_assert_eq(removed, 500, "the Neg and its 499 Abs go: %zu removed", removed);
	cr_assert_eq(g->n_nodes, 2);
	cr_assert_eq(count_op(g, "Sigmoid"), 1, "the node Relu waits on stays");
	cr_assert_eq(g->nodes[1]->ctrl[0], g->nodes[0]);
	cr_assert_eq(g->nodes[1]->index, 1);
	graph_free(g);
	/* the Exp's output is read only inside the If's branches */
	g = load_ok(TESTDATA "/yaml/if_branch.yaml");
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_assert_eq(removed, 0);
	cr_assert_eq(count_op(g, "Exp"), 1, "a value read by a subgraph is read");
	graph_free(g);
}

Test(fold, symbolic_graphs_keep_their_shape_computations)
{
	struct graph *g = load_ok(TESTDATA "/rnn.onnx");
	uint32_t n = g->n_nodes;
	size_t removed;
	struct gd_err e = {0};
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_assert_eq(removed, 0);
	cr_assert_eq(g->n_nodes, n);
	struct exec_binding b = {"batch", 3};
	cr_assert_eq(graph_bind_dims(g, &b, 1, &e), 0, "%s", e.msg);
	cr_assert_eq(g->inputs[0]->type.dims[0].kind, DIM_VALUE);
	cr_assert_eq(g->inputs[0]->type.dims[0].value, 3);
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_assert_gt(removed, 0, "once bound, the batch size is a constant");
	cr_assert_eq(count_op(g, "Shape"), 0);
	graph_free(g);
}

Test(fold, unknown_binding_is_an_error)
{
	struct graph *g = load_ok(TESTDATA "/rnn.onnx");
	struct exec_binding b = {"seq", 3};
	struct gd_err e = {0};
	cr_assert_eq(graph_bind_dims(g, &b, 1, &e), GD_EINPUT);
	cr_assert_str_eq(e.msg, "--dim seq: no dimension of the graph is called 'seq'");
	graph_free(g);
}

/* --control-deps data: the control edge becomes a data edge (the waiting node reads a value
 * computed from its dependency's output) that leaves values bit for bit; an infinite dependency
 * value turns the waiting node's output NaN, as documented. */
static const char waits_yaml[] =
	"graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4]}, {name: y, dtype: float32, shape: [4]}]\n"
	"nodes:\n  - {name: d, op: Neg, inputs: [y], outputs: [dy]}\n"
	"  - {name: n, op: Tanh, inputs: [x], outputs: [t], after: [d]}\noutputs: [{name: t}, {name: dy}]\n";

static struct exec *run_waits(struct graph *g, float yv)
{
	static float xs[4] = {-0.0f, 0.5f, -2.0f, 0.0f}, ys[4];
	for (int i = 0; i < 4; i++)
		ys[i] = i ? 1.0f : yv;
	int64_t dims[1] = {4};
	struct rtensor in[2] = {{.dtype = DT_FLOAT, .ndim = 1, .numel = 4, .data = xs, .nbytes = 16},
				{.dtype = DT_FLOAT, .ndim = 1, .numel = 4, .data = ys, .nbytes = 16}};
	memcpy(in[0].dims, dims, sizeof dims);
	memcpy(in[1].dims, dims, sizeof dims);
	const char *names[2] = {"x", "y"};
	struct exec_opts o = {.inputs = in, .input_names = names, .n_inputs = 2};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	return x;
}

Test(control_deps, data_edges_preserve_values_and_poison_on_inf)
{
	struct graph *plain = load_text("waits.yaml", waits_yaml), *g = load_text("waits2.yaml", waits_yaml);
	uint32_t n_data = 0;
	struct gd_err e = {0};
	cr_assert_eq(ctrl_encode(g, CTRL_DATA, &n_data, &e), 0, "%s", e.msg);
	cr_assert_eq(n_data, 1);
	cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);
	const struct node *n = g->nodes[g->n_nodes - 1];
	cr_assert_str_eq(n->name, "n");
	cr_assert_eq(n->n_ctrl, 0, "the edge is data now");
	cr_assert_str_eq(n->in[0]->producer->op_type, "Sub");
	struct exec *a = run_waits(plain, 3.0f), *b = run_waits(g, 3.0f);
	const struct rtensor *ta = exec_value(a, plain->outputs[0]), *tb = exec_value(b, g->outputs[0]);
	cr_expect(!memcmp(ta->data, tb->data, 16), "values bit for bit, -0.0 included");
	cr_expect(signbit(((float *)tb->data)[0]), "tanh(-0) stays -0");
	exec_free(b);
	b = run_waits(g, -INFINITY); /* dy = +inf */
	for (int i = 0; i < 4; i++)
		cr_expect(isnan(((float *)exec_value(b, g->outputs[0])->data)[i]), "an infinite dependency poisons the output");
	exec_free(a);
	exec_free(b);
	graph_free(plain);
	graph_free(g);
	/* order drops the edges; metadata keeps them */
	g = load_text("waits3.yaml", waits_yaml);
	cr_assert_eq(ctrl_encode(g, CTRL_METADATA, &n_data, &e), 0);
	cr_expect_eq(g->nodes[1]->n_ctrl, 1);
	cr_assert_eq(ctrl_encode(g, CTRL_ORDER, &n_data, &e), 0);
	cr_expect_eq(g->nodes[1]->n_ctrl, 0);
	graph_free(g);
}

/* Autocast on the 12-layer Gemm+Tanh chain: each Gemm reads only 16-bit floats, the Tanhs between
 * them stay 16-bit (no cast back and forth), each parameter is cast once, the loss is float32, and
 * after autodiff every gradient output is float32 like its parameter. */
Test(autocast, products_and_what_lies_between_them_are_16_bit)
{
	static const int dts[] = {DT_FLOAT16, DT_BFLOAT16};
	for (int d = 0; d < 2; d++) {
		struct graph *g = load_ok(TESTDATA "/tanh_chain.onnx");
		uint32_t params = 0;
		for (uint32_t i = 0; i < g->n_values; i++)
			params += g->values[i]->init != NULL;
		struct autocast_opts o = {.dtype = dts[d]};
		size_t low;
		struct gd_err e = {0};
		cr_assert_eq(autocast(g, &o, &low, &e), 0, "%s", e.msg);
		cr_assert_eq(low, 12 + 12, "the 12 Gemms and the 12 Tanhs after them: %zu", low);
		cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);
		struct exec_binding b = {"batch", 4};
		struct exec_opts so = {.shapes_only = 1, .dims = &b, .n_dims = 1};
		struct exec *x = exec_run(g, &so, NULL, &e);
		cr_assert(x, "%s", e.msg);
		uint32_t casts = 0, param_casts = 0;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			if (n->op == OP_GEMM || n->op == OP_TANH)
				for (uint32_t k = 0; k < n->n_in + n->n_out; k++)
					cr_assert_eq(exec_value(x, k < n->n_in ? n->in[k] : n->out[k - n->n_in])->dtype, dts[d],
						     "%s reads and writes 16 bits", n->name);
			if (n->op == OP_CAST) {
				casts++;
				param_casts += n->in[0]->init != NULL;
			}
		}
		cr_assert_eq(param_casts, params, "each parameter cast once");
		cr_assert_eq(casts, params + 2, "and besides: the input down, the last Tanh up");
		cr_assert_eq(exec_value(x, strmap_get(&g->names, "loss"))->dtype, DT_FLOAT);
		exec_free(x);
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
		x = exec_run(g, &so, NULL, &e);
		cr_assert(x, "%s", e.msg);
		for (uint32_t i = 0; i < g->n_outputs; i++)
			cr_assert_eq(exec_value(x, g->outputs[i])->dtype, DT_FLOAT, "%s", g->outputs[i]->name);
		exec_free(x);
		graph_free(g);
	}
}

/* A product's result that is also a graph output keeps its name and float32 dtype (a cast of the
 * 16-bit value takes the name), and the float32 op reading it casts the 16-bit value too, not the
 * float32 copy: no Cast converts float32 to float32. */
Test(autocast, an_output_read_in_float32_is_cast_from_16_bits)
{
	struct graph *g = load_text("amp_out.yaml",
		"graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4, 8]}]\n"
		"params: [{name: w, dtype: float32, shape: [8, 3], init: zeros}]\nnodes:\n"
		"  - {op: MatMul, inputs: [x, w], outputs: [y]}\n"
		"  - {op: ReduceSum, inputs: [y], outputs: [loss], attrs: {keepdims: 0}}\n"
		"outputs: [{name: y}, {name: loss}]\n");
	struct autocast_opts o = {.dtype = DT_FLOAT16};
	size_t low;
	struct gd_err e = {0};
	cr_assert_eq(autocast(g, &o, &low, &e), 0, "%s", e.msg);
	struct exec_opts so = {.shapes_only = 1};
	struct exec *x = exec_run(g, &so, NULL, &e);
	cr_assert(x, "%s", e.msg);
	struct value *y = strmap_get(&g->names, "y");
	cr_assert(y && y->producer && y->producer->op == OP_CAST);
	cr_assert_eq(exec_value(x, y)->dtype, DT_FLOAT);
	uint32_t casts = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]->op == OP_CAST) {
			casts++;
			cr_assert_neq(exec_value(x, g->nodes[i]->in[0])->dtype, exec_value(x, g->nodes[i]->out[0])->dtype,
				      "%s converts nothing", g->nodes[i]->name);
		}
	cr_assert_eq(casts, 4, "x and w down, y's 16-bit value up twice (the output, the reduction's input)");
	exec_free(x);
	graph_free(g);
}
