/* test_rewrite.c - graph rewrites: dimension binding and constant folding, appended losses. */
#include "exec/exec.h"
#include "helpers.h"
#include "rewrite/fold.h"

#include <criterion/criterion.h>
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
