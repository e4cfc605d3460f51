/* tests/ops/ctrl.c - forward values of the ctrl op family against numbers computed apart from graphdiet
 * (numpy, PyTorch or ONNX's backend test data), run as part of test_ops. */
#include "helpers.h"

#include <criterion/criterion.h>

#include "util/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTRL TESTDATA "/ctrl/"

/* testdata/ctrl/<model>.in.<input>.npy and <model>.out.<output>.npy, for expect_run_matches_npy */
static void ctrl_npy(const void *model, int is_output, size_t k, const char *name, char *buf, size_t n)
{
	(void)k;
	snprintf(buf, n, CTRL "%s.%s.%s.npy", (const char *)model, is_output ? "out" : "in", name);
}

/* Runs testdata/ctrl/<name>.onnx on its <name>.in.<input>.npy files and compares every output with
 * <name>.out.<output>.npy, which testdata/gen_ctrl.py computed with numpy or PyTorch: dtype and
 * shape exactly, values within 1e-5 relative (float) or exactly (integers). */
static void expect_outputs(const char *name)
{
	char path[512];
	snprintf(path, sizeof path, CTRL "%s.onnx", name);
	struct graph *g = load_ok(path);
	expect_run_matches_npy(g, ctrl_npy, name, 1e-5, 1e-6, name);
	graph_free(g);
}

/* If runs the branch its condition picks; both read x from the enclosing graph. */
Test(ctrl, if_runs_the_branch_its_condition_picks)
{
	expect_outputs("if_true");
	expect_outputs("if_false");
}

/* Loop with a trip count: a loop-carried sum, a scan output stacked on axis 0, and an If nested in
 * the body that reads a value two graphs up. */
Test(ctrl, loop_carries_values_and_stacks_scan_outputs)
{
	expect_outputs("loop");
}

/* Loop with no trip count, ended by its body's condition. */
Test(ctrl, loop_without_a_count_ends_on_its_condition)
{
	expect_outputs("loop_while");
}

/* Scan-9 reading its sequence backwards along axis 1 and writing along axis 1. */
Test(ctrl, scan_follows_its_axes_and_directions)
{
	expect_outputs("scan");
}

/* nn.EmbeddingBag(mode="mean") as PyTorch exports it (a Loop over Slices by offsets): PyTorch's bags. */
Test(ctrl, embedding_bag_export_gives_pytorchs_bags)
{
	expect_outputs("embedding_bag");
}

/* Local functions are inlined on read: attribute references take the caller's value, else the
 * function's default (attribute_proto), else the op's own, and a function calling another is
 * inlined in turn. */
Test(ctrl, local_functions_are_inlined_on_read)
{
	expect_outputs("functions");
	expect_outputs("function_default");
	struct graph *g = load_ok(CTRL "functions.onnx");
	int leaky = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		cr_expect_neq(g->nodes[i]->op, OP_UNKNOWN, "node %u (%s) was not inlined", i, g->nodes[i]->op_type);
		leaky += g->nodes[i]->op == OP_LEAKY_RELU;
	}
	cr_expect_eq(leaky, 3, "three calls of F1, one through F2");
	graph_free(g);
}

/* Slice before opset 10 takes starts, ends and axes as attributes. */
Test(ctrl, slice_1_reads_its_attributes)
{
	expect_outputs("slice1");
}

/* The ai.onnx.preview.training optimizers, by the operator documents' formulas. */
Test(ctrl, preview_training_optimizers_update_as_the_spec_says)
{
	expect_outputs("adam");
	expect_outputs("adagrad");
	expect_outputs("momentum_standard");
	expect_outputs("momentum_nesterov");
}

/* Shape inference cannot run a Loop whose condition comes from data: refused with the reason. */
Test(ctrl, a_loop_counted_by_data_is_refused_in_shape_inference)
{
	struct graph *g = load_ok(CTRL "loop_while.onnx");
	struct exec_opts o = {.shapes_only = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert_null(x);
	cr_expect_eq(e.code, GD_EINPUT);
	cr_expect(strstr(e.msg, "Loop") && strstr(e.msg, "known only when the graph runs"), "%s", e.msg);
	graph_free(g);
}

/* In shape inference without its condition, If gives the shapes both branches agree on. */
Test(ctrl, if_without_its_condition_infers_the_shapes_both_branches_give)
{
	struct graph *g = load_ok(CTRL "if_true.onnx");
	struct exec_opts o = {.shapes_only = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert_not_null(x, "%s", e.msg);
	const struct rtensor *y = exec_value(x, g->outputs[0]);
	cr_expect(y->known && y->ndim == 2 && y->dims[0] == 2 && y->dims[1] == 3 && !y->data);
	exec_free(x);
	graph_free(g);
}

static struct run_result gd(const char *a1, const char *a2, const char *a3, const char *a4)
{
	char *argv[] = {GD_BINARY, (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
	return run_cmd(argv, NULL, 0);
}

/* A loss that a parameter reaches through a Loop that stays one (and directly too): train refuses
 * it, saying that control flow takes no gradient (exit 2), rather than give the parameter the
 * direct path's gradient alone. */
Test(ctrl, train_refuses_a_parameter_reaching_the_loss_through_control_flow)
{
	char out[512];
	snprintf(out, sizeof out, "%s/loss_through_loop_train.onnx", tmpdir());
	struct run_result r = gd("train", CTRL "loss_through_loop.onnx", "-o", out);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "(Loop)") && strstr(r.err, "not differentiated"), "%s", r.err);
	run_free(&r);
}

/* The Gradient op of ai.onnx.preview.training is refused when run (exit 2, with the reason). */
Test(ctrl, the_gradient_op_is_refused_with_its_reason)
{
	struct run_result r = gd("run", CTRL "gradient_op.onnx", "--random-inputs", NULL);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "(Gradient)") && strstr(r.err, "not run"), "%s", r.err);
	run_free(&r);
}

/* A Loop of constant count with a plain body and an If whose condition is a constant are inlined
 * before autodiff: train differentiates through them (finite differences agree, verify
 * --gradcheck) and writes no control flow. */
Test(ctrl, a_constant_loop_and_if_train_through_their_unrolled_bodies)
{
	char out[512];
	snprintf(out, sizeof out, "%s/loop_train_train.onnx", tmpdir());
	struct run_result r = gd("train", CTRL "loop_train.onnx", "-o", out);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	r = gd("verify", "--gradcheck", CTRL "loop_train.onnx", out);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	run_free(&r);
	struct graph *g = load_ok(out);
	int grads = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		cr_expect(!(op_table[g->nodes[i]->op].flags & OPF_SUBGRAPH), "node %u is %s", i, g->nodes[i]->op_type);
	for (uint32_t i = 0; i < g->n_outputs; i++)
		grads += !strcmp(g->outputs[i]->name, "wp_grad") || !strcmp(g->outputs[i]->name, "wq_grad");
	cr_expect_eq(grads, 2, "wp (read in the Loop's body) and wq (in the If's branch) get gradients");
	graph_free(g);
}

/* Malformed control flow and functions: exit 2 with the node (or function) and what is wrong, no
 * crash; plan (shape inference) says the same. */
Test(ctrl, malformed_bodies_and_functions_are_refused_clearly)
{
	static const struct {
		const char *file, *says;
	} cases[] = {
		{"bad_loop_arity", "(Loop): the body takes 2 inputs"},
		{"bad_if_outputs", "(If): then_branch has 2 outputs, but the node has 1"},
		{"bad_scan_lengths", "(Scan): scan inputs differ in length (3 and 4)"},
		{"bad_recursive_function", "local function 'R': calls nest deeper than"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char path[512];
		snprintf(path, sizeof path, CTRL "%s.onnx", cases[i].file);
		const char *cmds[2] = {"run", "plan"};
		for (int c = 0; c < 2; c++) {
			struct run_result r = gd(cmds[c], path, c ? NULL : "--random-inputs", NULL);
			cr_expect_eq(r.status, 2, "%s %s: %s", cmds[c], cases[i].file, r.err);
			cr_expect(strstr(r.err, cases[i].says) != NULL, "%s %s: %s", cmds[c], cases[i].file, r.err);
			run_free(&r);
		}
	}
}
