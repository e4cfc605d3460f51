/* test_rewrite.c - graph rewrites: dimension binding and constant folding, appended losses. */
#include "exec/exec.h"
#include "helpers.h"
#include "io/tensor.h"
#include "autodiff/ad.h"
#include "rewrite/autocast.h"
#include "rewrite/ctrl.h"
#include "rewrite/fold.h"
#include "rewrite/step.h"
#include "ops/diet.h"
#include "plan/plan.h"
#include "util/philox.h"

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
	cr_assert_eq(graph_bind_dims(g, &b, 1, 1, &e), 0, "%s", e.msg);
	cr_assert_eq(g->inputs[0]->type.dims[0].kind, DIM_VALUE);
	cr_assert_eq(g->inputs[0]->type.dims[0].value, 3);
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_assert_gt(removed, 0, "once bound, the batch size is a constant");
	cr_assert_eq(count_op(g, "Shape"), 0);
	graph_free(g);
}

/* g folded (or not) and planned as plan plans it: the training graph built, no checkpointing. */
static uint64_t peak_of(const char *path, int fold_it)
{
	struct graph *g = load_ok(path);
	struct gd_err e = {0};
	size_t removed;
	if (fold_it)
		cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s: %s", path, e.msg);
	struct plan_opts po = {0};
	struct plan_report r;
	cr_assert_eq(ckpt_parse("none", &po.ckpt), 0);
	cr_assert_eq(plan_memory(g, &po, &r, &e), 0, "%s: %s", path, e.msg);
	graph_free(g);
	return r.peak_after;
}

/* g's loss and its <param>_grad outputs, after autodiff, run on seeded random inputs. */
static struct exec *gradients_of(struct graph *g)
{
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	struct exec_opts o = {.random_inputs = 1, .seed = 3};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	return x;
}

static const struct rtensor *output_named(const struct graph *g, const struct exec *x, const char *name)
{
	for (uint32_t i = 0; i < g->n_outputs; i++)
		if (!strcmp(g->outputs[i]->name, name))
			return exec_value(x, g->outputs[i]);
	cr_assert_fail("no output %s", name);
	return NULL;
}

/* Every exporter no-op of noops.yaml goes: its nodes and the Constants only they read. The loss,
 * an Identity of the mean, keeps its name on the mean itself; the plan is that of noops_plain.yaml,
 * the same model written without them, to the byte; the loss and gradients are the unfolded
 * model's, to the bit. */
Test(fold, exporter_noops_go_and_cost_nothing)
{
	static const char *const gone[] = {"Cast", "Identity", "Reshape", "Expand", "Flatten", "Transpose", "Concat", "Sum",
					   "Tile", "Slice", "Dropout", "Div", "Pow", "Add", "Sub", "Constant"};
	struct graph *g = load_ok(TESTDATA "/yaml/noops.yaml"), *ref = load_ok(TESTDATA "/yaml/noops.yaml");
	size_t removed;
	struct gd_err e = {0};
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < sizeof gone / sizeof *gone; i++)
		cr_expect_eq(count_op(g, gone[i]), 0, "a %s is left", gone[i]);
	cr_expect_eq(count_op(g, "Mul"), 1, "y * y stays, Mul by 1 goes");
	cr_assert_eq(g->n_nodes, 5, "MatMul, Tanh, MatMul, Mul, ReduceMean: %u nodes", g->n_nodes);
	cr_assert_str_eq(g->outputs[0]->name, "loss");
	cr_assert(g->outputs[0]->producer && g->outputs[0]->producer->op == OP_REDUCE_MEAN);
	cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);

	uint64_t plain = peak_of(TESTDATA "/yaml/noops_plain.yaml", 1);
	cr_expect_eq(peak_of(TESTDATA "/yaml/noops.yaml", 1), plain, "no-ops folded cost nothing");
	cr_expect_gt(peak_of(TESTDATA "/yaml/noops.yaml", 0), plain, "unfolded, they cost");

	struct exec *x = gradients_of(g), *xr = gradients_of(ref);
	static const char *const outs[] = {"loss", "w1_grad", "w2_grad"};
	for (size_t i = 0; i < 3; i++) {
		const struct rtensor *a = output_named(g, x, outs[i]), *b = output_named(ref, xr, outs[i]);
		cr_assert_eq(a->nbytes, b->nbytes);
		cr_expect(!memcmp(a->data, b->data, a->nbytes), "%s differs from the unfolded model's", outs[i]);
	}
	exec_free(x);
	exec_free(xr);
	graph_free(g);
	graph_free(ref);
}

/* What only looks like a no-op stays: a Mul by ones that broadcasts the output larger, Add of +0.0
 * (-0 + 0 is +0) and Sub of -0.0, a Transpose of a square matrix, a Mul by a parameter that is 1
 * (it trains), a Cast to another dtype, a Reshape to another shape, Dropout of ratio 0 whose mask
 * is read, an Identity another node waits on, a Slice of everything whose start is a parameter's
 * (0 now, not at every step), and an Identity of a graph input into a graph output. Each but the
 * last is read by a Neg, so that it could go. */
Test(fold, look_alikes_stay)
{
	static const char *const looks[] = {
		"{op: Mul, inputs: [x, ones], outputs: [a]}", "{op: Add, inputs: [x, zero], outputs: [a]}",
		"{op: Sub, inputs: [x, negzero], outputs: [a]}", "{op: Transpose, inputs: [x], outputs: [a], attrs: {perm: [1, 0]}}",
		"{op: Mul, inputs: [x, pone], outputs: [a]}", "{op: Cast, inputs: [x], outputs: [a], attrs: {to: 10}}",
		"{op: Reshape, inputs: [x, shape], outputs: [a]}",
		"{op: Dropout, inputs: [x, ratio, on], outputs: [a, mask]}\n  - {op: Cast, inputs: [mask], outputs: [k], attrs: {to: 1}}",
		"{op: Identity, name: waited, inputs: [x], outputs: [a]}\n  - {op: Abs, inputs: [x], outputs: [k], after: [waited]}",
		"{op: Slice, inputs: [c4, st, big, ax0], outputs: [a]}\n  - {op: Cast, inputs: [pz], outputs: [st], attrs: {to: 7}}",
		"{op: Identity, inputs: [x], outputs: [b]}"};
	for (size_t i = 0; i < sizeof looks / sizeof *looks; i++) {
		char text[4096];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4, 4]}]\n"
			 "params: [{name: pone, dtype: float32, shape: [], data: [1.0]}, {name: pz, dtype: float32, shape: [1], data: [0.0]}]\n"
			 "nodes:\n"
			 "  - {op: Constant, outputs: [c4], attrs: {value: {type: tensor, value: {dtype: float32, shape: [2, 2], data: [1, 2, 3, 4]}}}}\n"
			 "  - {op: Constant, outputs: [big], attrs: {value: {type: tensor, value: {dtype: int64, shape: [1], data: [100]}}}}\n"
			 "  - {op: Constant, outputs: [ax0], attrs: {value: {type: tensor, value: {dtype: int64, shape: [1], data: [0]}}}}\n"
			 "  - {op: Constant, outputs: [ones], attrs: {value: {type: tensor, value: {dtype: float32, shape: [2, 1, 1], data: [1, 1]}}}}\n"
			 "  - {op: Constant, outputs: [zero], attrs: {value: {type: tensor, value: {dtype: float32, shape: [], data: [0.0]}}}}\n"
			 "  - {op: Constant, outputs: [negzero], attrs: {value: {type: tensor, value: {dtype: float32, shape: [], data: [-0.0]}}}}\n"
			 "  - {op: Constant, outputs: [ratio], attrs: {value: {type: tensor, value: {dtype: float32, shape: [], data: [0.0]}}}}\n"
			 "  - {op: Constant, outputs: [on], attrs: {value: {type: tensor, value: {dtype: bool, shape: [], data: [1]}}}}\n"
			 "  - {op: Constant, outputs: [shape], attrs: {value: {type: tensor, value: {dtype: int64, shape: [2], data: [2, 8]}}}}\n"
			 "  - %s\n  - {op: Neg, inputs: [%s], outputs: [y]}\n  - {op: Neg, inputs: [%s], outputs: [z]}\n"
			 "outputs: [{name: y}, {name: z}%s]\n",
			 looks[i], strstr(looks[i], "[a") ? "a" : "x", strstr(looks[i], "[k]") ? "k" : "x",
			 strstr(looks[i], "[b]") ? ", {name: b}" : "");
		struct graph *g = load_text("look_alike.yaml", text);
		size_t removed;
		struct gd_err e = {0};
		cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
		char op[32] = "";
		sscanf(looks[i], "{op: %31[A-Za-z]", op);
		cr_expect_eq(count_op(g, op), 1 + (!strcmp(op, "Cast") && strstr(looks[i], "mask")), "%s went", looks[i]);
		graph_free(g);
	}
}

/* With symbolic dimensions, a no-op must be one whatever they are: Cast, a Reshape to Shape(x) and
 * Mul by 1 go without --dim, but a Slice to a fixed 10009 columns stays, though at exec.c's first
 * stand-ins (batch 10007, seq 10009) it takes every column. */
Test(fold, symbolic_noops_go_only_when_they_are_at_every_size)
{
	const char *text =
		"graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, seq]}]\nnodes:\n"
		"  - {op: Constant, outputs: [one], attrs: {value: {type: tensor, value: {dtype: float32, shape: [], data: [1.0]}}}}\n"
		"  - {op: Constant, outputs: [starts], attrs: {value: {type: tensor, value: {dtype: int64, shape: [1], data: [0]}}}}\n"
		"  - {op: Constant, outputs: [ends], attrs: {value: {type: tensor, value: {dtype: int64, shape: [1], data: [10009]}}}}\n"
		"  - {op: Constant, outputs: [axes], attrs: {value: {type: tensor, value: {dtype: int64, shape: [1], data: [1]}}}}\n"
		"  - {op: Cast, inputs: [x], outputs: [a], attrs: {to: 1}}\n"
		"  - {op: Shape, inputs: [a], outputs: [s]}\n"
		"  - {op: Reshape, inputs: [a, s], outputs: [b]}\n"
		"  - {op: Mul, inputs: [b, one], outputs: [c]}\n"
		"  - {op: Slice, inputs: [c, starts, ends, axes], outputs: [d]}\n"
		"  - {op: Tanh, inputs: [d], outputs: [y]}\n"
		"outputs: [{name: y}]\n";
	struct graph *g = load_text("symbolic_noops.yaml", text);
	size_t removed;
	struct gd_err e = {0};
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_expect_eq(count_op(g, "Cast") + count_op(g, "Reshape") + count_op(g, "Mul") + count_op(g, "Shape"), 0);
	cr_assert_eq(count_op(g, "Slice"), 1, "a Slice of a fixed length is no no-op");
	cr_expect_eq(count_op(g, "Constant"), 3, "the Slice's bounds stay, Mul's 1 goes");
	cr_expect_eq(removed, 5, "Cast, Shape, Reshape, Mul and its 1: %zu", removed);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]->op == OP_SLICE)
			cr_expect_str_eq(g->nodes[i]->in[0]->name, "x");
	cr_assert_eq(g->inputs[0]->type.dims[1].kind, DIM_PARAM, "the graph stays symbolic");
	graph_free(g);
}

/* PyTorch writes softmax(h, dim=-1, dtype=torch.float32) of a float32 h as Softmax and a Cast to
 * float32 (testdata/gen_fold.py): folded, it changes no peak; kept, its backward copy costs. */
Test(fold, pytorch_softmax_cast_changes_no_peak)
{
	struct graph *g = load_ok(TESTDATA "/fold/softmax_cast.onnx");
	cr_assert_eq(count_op(g, "Cast"), 1, "the export has its Cast");
	size_t removed;
	struct gd_err e = {0};
	cr_assert_eq(graph_fold_constants(g, &removed, &e), 0, "%s", e.msg);
	cr_expect_eq(count_op(g, "Cast"), 0);
	graph_free(g);
	uint64_t plain = peak_of(TESTDATA "/fold/softmax_plain.onnx", 1);
	cr_expect_eq(peak_of(TESTDATA "/fold/softmax_cast.onnx", 1), plain);
	cr_expect_gt(peak_of(TESTDATA "/fold/softmax_cast.onnx", 0), plain, "unfolded, it costs");
}

Test(fold, unknown_binding_is_an_error)
{
	struct graph *g = load_ok(TESTDATA "/rnn.onnx");
	struct exec_binding b = {"seq", 3};
	struct gd_err e = {0};
	cr_assert_eq(graph_bind_dims(g, &b, 1, 1, &e), GD_EINPUT);
	cr_assert_str_eq(e.msg, "--dim seq: no dimension of the graph is called 'seq'");
	graph_free(g);
}

/* --control-deps data: the control edge becomes a data edge (the waiting node reads its input
 * through a Reshape whose shape is computed from one element of its dependency's output) that
 * leaves values bit for bit, whatever the dependency holds: an infinity or a NaN there changes
 * nothing. */
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

Test(control_deps, data_edges_preserve_values_whatever_they_wait_for)
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
	cr_assert_str_eq(n->in[0]->producer->op_type, "Reshape");
	struct exec *a = run_waits(plain, 3.0f), *b = run_waits(g, 3.0f);
	const struct rtensor *ta = exec_value(a, plain->outputs[0]), *tb = exec_value(b, g->outputs[0]);
	cr_expect(!memcmp(ta->data, tb->data, 16), "values bit for bit, -0.0 included");
	cr_expect(signbit(((float *)tb->data)[0]), "tanh(-0) stays -0");
	for (int k = 0; k < 2; k++) {
		exec_free(b);
		b = run_waits(g, k ? NAN : -INFINITY); /* dy = +inf, then NaN */
		tb = exec_value(b, g->outputs[0]);
		cr_expect(!memcmp(ta->data, tb->data, 16), "an infinite or NaN dependency changes nothing");
	}
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

/* A Linear's bias and a constant such as GELU's 0.5 join the 16-bit math (cast down once, as
 * PyTorch's F.linear casts its bias), so a product's result is not cast up and kept twice; a
 * constant float16 would overflow (1e6) or flush to zero (1e-6) keeps the op in float32, and so
 * does an activation in float32 (the residual stream). */
Test(autocast, fixed_operands_join_16_bit_math_unless_they_do_not_fit)
{
#define CONST(name, v) "  - {op: Constant, outputs: [" name "], attrs: {value: {type: tensor, value: {dtype: float32, shape: [], data: [" v "]}}}}\n"
	struct graph *g = load_text("amp_fixed.yaml",
		"graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4, 8]}]\n"
		"params:\n  - {name: w, dtype: float32, shape: [8, 8], init: {dist: normal, std: 1, seed: 1}}\n"
		"  - {name: b, dtype: float32, shape: [8], init: zeros}\nnodes:\n"
		CONST("half", "0.5") CONST("big", "1.0e6") CONST("tiny", "1.0e-6")
		"  - {op: MatMul, inputs: [x, w], outputs: [h]}\n"
		"  - {op: Add, inputs: [h, b], outputs: [hb]}\n"
		"  - {op: Mul, inputs: [hb, half], outputs: [g]}\n"
		"  - {op: Mul, inputs: [g, big], outputs: [o1]}\n"
		"  - {op: Mul, inputs: [g, tiny], outputs: [o2]}\n"
		"  - {op: Add, inputs: [g, x], outputs: [r]}\n"
		"  - {op: Add, inputs: [o1, o2], outputs: [s]}\n"
		"  - {op: Add, inputs: [s, r], outputs: [t]}\n"
		"  - {op: ReduceSum, inputs: [t], outputs: [loss], attrs: {keepdims: 0}}\n"
		"outputs: [{name: loss}]\n");
#undef CONST
	struct autocast_opts o = {.dtype = DT_FLOAT16};
	size_t low;
	struct gd_err e = {0};
	cr_assert_eq(autocast(g, &o, &low, &e), 0, "%s", e.msg);
	cr_assert_eq(low, 3, "MatMul, the bias Add and the Mul by 0.5: %zu", low);
	struct exec_opts so = {.shapes_only = 1};
	struct exec *x = exec_run(g, &so, NULL, &e);
	cr_assert(x, "%s", e.msg);
	static const struct {
		const char *name;
		int dtype;
	} want[] = {{"h", DT_FLOAT16}, {"hb", DT_FLOAT16}, {"g", DT_FLOAT16}, {"o1", DT_FLOAT},
		    {"o2", DT_FLOAT}, {"r", DT_FLOAT}, {"b_fp16", DT_FLOAT16}, {"half_fp16", DT_FLOAT16}};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		struct value *v = strmap_get(&g->names, want[i].name);
		cr_assert(v, "%s exists", want[i].name);
		cr_expect_eq(exec_value(x, v)->dtype, want[i].dtype, "%s", want[i].name);
	}
	cr_expect_null(strmap_get(&g->names, "h_fp32"), "the product is not cast up for its bias");
	cr_expect_null(strmap_get(&g->names, "big_fp16"));
	cr_expect_null(strmap_get(&g->names, "tiny_fp16"));
	exec_free(x);
	graph_free(g);
}

/* BatchNormalization reads a 16-bit X with its float32 scale, bias and running statistics (ONNX
 * types them apart from opset 15): Y is 16-bit, the running statistics stay float32, and nothing
 * is cast up. Its gradients, computed in float32 from the 16-bit X, match the float32 graph's
 * within float16's rounding. At opset 14 it computes in float32. */
Test(autocast, batch_norm_reads_16_bits_with_float32_statistics)
{
	static const char yaml[] =
		"graphdiet: 1\nopset: %d\ninputs: [{name: x, dtype: float32, shape: [4, 3, 5, 2]}]\n"
		"params:\n  - {name: w, dtype: float32, shape: [3, 3, 1, 1], init: {dist: normal, std: 1, seed: 2}}\n"
		"  - {name: s, dtype: float32, shape: [3], init: {dist: normal, std: 1, seed: 3}}\n"
		"  - {name: bb, dtype: float32, shape: [3], init: {dist: normal, std: 1, seed: 4}}\n"
		"  - {name: rm, dtype: float32, shape: [3], init: zeros}\n"
		"  - {name: rv, dtype: float32, shape: [3], init: ones}\nnodes:\n"
		"  - {op: Conv, inputs: [x, w], outputs: [c]}\n"
		"  - {op: BatchNormalization, inputs: [c, s, bb, rm, rv], outputs: [y, m, v], attrs: {training_mode: 1}}\n"
		"  - {op: Tanh, inputs: [y], outputs: [t]}\n"
		"  - {op: ReduceSum, inputs: [t], outputs: [loss], attrs: {keepdims: 0}}\n"
		"outputs: [{name: loss}, {name: m}, {name: v}]\n";
	char text[2048];
	float data[120];
	for (int i = 0; i < 120; i++)
		data[i] = (float)sin(0.7 * i) * 2;
	struct rtensor in = {.dtype = DT_FLOAT, .ndim = 4, .dims = {4, 3, 5, 2}, .numel = 120, .data = data, .nbytes = sizeof data};
	const char *names[1] = {"x"};
	struct exec_opts ro = {.inputs = &in, .input_names = names, .n_inputs = 1};
	struct exec *xs[2];
	struct graph *gs[2];
	for (int amp = 0; amp < 2; amp++) {
		snprintf(text, sizeof text, yaml, 17);
		struct graph *g = gs[amp] = load_text("amp_bn.yaml", text);
		struct gd_err e = {0};
		size_t low;
		struct autocast_opts o = {.dtype = DT_FLOAT16};
		if (amp) {
			cr_assert_eq(autocast(g, &o, &low, &e), 0, "%s", e.msg);
			cr_assert_eq(low, 3, "Conv, BatchNormalization, Tanh: %zu", low);
			struct exec_opts so = {.shapes_only = 1};
			struct exec *x = exec_run(g, &so, NULL, &e);
			cr_assert(x, "%s", e.msg);
			const struct node *bn = strmap_get(&g->names, "y") ? ((struct value *)strmap_get(&g->names, "y"))->producer : NULL;
			cr_assert(bn && bn->op == OP_BATCH_NORM);
			cr_expect_eq(exec_value(x, bn->in[0])->dtype, DT_FLOAT16);
			for (int k = 1; k < 5; k++)
				cr_expect_eq(bn->in[k]->init ? DT_FLOAT : -1, DT_FLOAT, "input %d is the float32 parameter itself", k);
			cr_expect_eq(exec_value(x, bn->out[0])->dtype, DT_FLOAT16);
			cr_expect_eq(exec_value(x, bn->out[1])->dtype, DT_FLOAT, "running mean");
			cr_expect_eq(exec_value(x, bn->out[2])->dtype, DT_FLOAT, "running variance");
			exec_free(x);
		}
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
		cr_assert_eq(graph_toposort(g, &e), 0);
		xs[amp] = exec_run(g, &ro, NULL, &e);
		cr_assert(xs[amp], "%s", e.msg);
	}
	static const char *const grads[] = {"w_grad", "s_grad", "bb_grad", "m", "v"};
	for (int i = 0; i < 5; i++) {
		const struct rtensor *a = exec_value(xs[0], strmap_get(&gs[0]->names, grads[i]));
		const struct rtensor *b = exec_value(xs[1], strmap_get(&gs[1]->names, grads[i]));
		cr_assert_eq(b->dtype, DT_FLOAT, "%s", grads[i]);
		double worst = 0, scale = 0;
		for (int64_t k = 0; k < a->numel; k++) {
			worst = fmax(worst, fabs(rt_get(a, k) - rt_get(b, k)));
			scale = fmax(scale, fabs(rt_get(a, k)));
		}
		cr_expect(worst <= 1e-2 * scale + 1e-3, "%s: fp16 differs by %g (scale %g)", grads[i], worst, scale);
		cr_expect(scale > 0, "%s is not all zero", grads[i]);
	}
	for (int amp = 0; amp < 2; amp++) {
		exec_free(xs[amp]);
		graph_free(gs[amp]);
	}
	snprintf(text, sizeof text, yaml, 14);
	struct graph *g = load_text("amp_bn14.yaml", text);
	struct autocast_opts o = {.dtype = DT_FLOAT16};
	size_t low;
	struct gd_err e = {0};
	cr_assert_eq(autocast(g, &o, &low, &e), 0, "%s", e.msg);
	cr_expect_eq(low, 1, "only the Conv: %zu", low);
	cr_expect(strmap_get(&g->names, "c_fp32"), "X is cast up for opset 14's BatchNormalization");
	graph_free(g);
}

/* ---- the training step (rewrite/step) ---- */

/* loss = ReduceSum(w0*x0 + w1*x1 + w2*x2 + w3*x3): each w_i's gradient is x_i, so a test puts any
 * value into any gradient by feeding it. */
static const char four_yaml[] =
	"graphdiet: 1\nopset: 17\ninputs:\n"
	"  - {name: x0, dtype: float32, shape: [3]}\n  - {name: x1, dtype: float32, shape: [3]}\n"
	"  - {name: x2, dtype: float32, shape: [3]}\n  - {name: x3, dtype: float32, shape: [3]}\n"
	"params:\n"
	"  - {name: w0, dtype: float32, shape: [3], init: {dist: normal, std: 1, seed: 1}}\n"
	"  - {name: w1, dtype: float32, shape: [3], init: {dist: normal, std: 1, seed: 2}}\n"
	"  - {name: w2, dtype: float32, shape: [3], init: {dist: normal, std: 1, seed: 3}}\n"
	"  - {name: w3, dtype: float32, shape: [3], init: {dist: normal, std: 1, seed: 4}}\n"
	"nodes:\n"
	"  - {op: Mul, inputs: [w0, x0], outputs: [p0]}\n  - {op: Mul, inputs: [w1, x1], outputs: [p1]}\n"
	"  - {op: Mul, inputs: [w2, x2], outputs: [p2]}\n  - {op: Mul, inputs: [w3, x3], outputs: [p3]}\n"
	"  - {op: Sum, inputs: [p0, p1, p2, p3], outputs: [s]}\n"
	"  - {op: ReduceSum, inputs: [s], outputs: [loss], attrs: {keepdims: 0}}\n"
	"outputs:\n  - {name: loss, dtype: float32, shape: []}\n";

static struct graph *stepped(const char *yaml, const char *loss_scale, const char *optimizer, double clip)
{
	struct step_opts so = {.clip_norm = clip};
	char why[256];
	if (loss_scale)
		cr_assert_eq(loss_scaling_parse(loss_scale, &so.ls, why, sizeof why), 0, "%s", why);
	if (optimizer)
		cr_assert_eq(optimizer_parse(optimizer, &so.opt, why, sizeof why), 0, "%s", why);
	struct graph *g = load_text("step.yaml", yaml);
	struct gd_err e = {0};
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	cr_assert_eq(step_begin(g, &so, &ao, &e), 0, "%s", e.msg);
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	cr_assert_eq(step_build(g, &so, NULL, &e), 0, "%s", e.msg);
	return g;
}

/* One step of four_yaml's graph: x_i all `v` but x[k][2] = bad; state given by name (NULL: the
 * initializers'). */
struct fed {
	float x[4][3];
	float scale;
	int64_t good, hyst;
	int give_scale, give_good, give_hyst;
};

static struct exec *four_step(struct graph *g, struct fed *f)
{
	struct rtensor ts[7];
	const char *names[7];
	size_t n = 0;
	static const char *const xs[] = {"x0", "x1", "x2", "x3"};
	for (int i = 0; i < 4; i++) {
		ts[n] = (struct rtensor){.dtype = DT_FLOAT, .ndim = 1, .dims = {3}, .numel = 3, .data = f->x[i], .nbytes = 12};
		names[n++] = xs[i];
	}
	if (f->give_scale) {
		ts[n] = (struct rtensor){.dtype = DT_FLOAT, .numel = 1, .data = &f->scale, .nbytes = 4};
		names[n++] = "loss_scale";
	}
	if (f->give_good) {
		ts[n] = (struct rtensor){.dtype = DT_INT64, .numel = 1, .data = &f->good, .nbytes = 8};
		names[n++] = "loss_scale_good_steps";
	}
	if (f->give_hyst) {
		ts[n] = (struct rtensor){.dtype = DT_INT64, .numel = 1, .data = &f->hyst, .nbytes = 8};
		names[n++] = "loss_scale_hysteresis";
	}
	struct exec_opts o = {.inputs = ts, .input_names = names, .n_inputs = n};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	return x;
}

static const struct rtensor *out_of(const struct exec *x, struct graph *g, const char *name)
{
	struct value *v = strmap_get(&g->names, name);
	cr_assert(v && (v->flags & VALUE_OUTPUT), "no output %s", name);
	return exec_value(x, v);
}

static void fill_x(struct fed *f, float v)
{
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 3; j++)
			f->x[i][j] = v;
}

/* NaN, +Inf and -Inf are found in any gradient, the last one and the last element included; finite
 * gradients, however large, are not flagged. */
Test(step, every_gradient_is_checked_for_nan_and_inf)
{
	struct graph *g = stepped(four_yaml, "dynamic:init=1", NULL, 0);
	const float bad[] = {NAN, INFINITY, -INFINITY};
	struct fed f = {0};
	fill_x(&f, 3e38f); /* finite: the check must not overflow on large values */
	struct exec *x = four_step(g, &f);
	cr_expect_eq(rt_get(out_of(x, g, "found_inf"), 0), 0);
	exec_free(x);
	for (int k = 0; k < 4; k++)
		for (int b = 0; b < 3; b++)
			for (int j = 0; j < 3; j += 2) {
				fill_x(&f, 0.5f);
				f.x[k][j] = bad[b];
				x = four_step(g, &f);
				cr_expect_eq(rt_get(out_of(x, g, "found_inf"), 0), 1, "w%d_grad[%d] = %g was not found", k, j,
					     (double)bad[b]);
				exec_free(x);
			}
	graph_free(g);
}

/* The scale's state machine, one step at a time, the state fed as inputs. */
static void expect_scale(struct graph *g, float xval, float scale, int64_t good, int64_t hyst, float want_scale,
			 int64_t want_good, int64_t want_hyst, const char *what)
{
	struct fed f = {.scale = scale, .good = good, .hyst = hyst, .give_scale = 1, .give_good = 1,
			.give_hyst = want_hyst >= 0};
	fill_x(&f, xval);
	struct exec *x = four_step(g, &f);
	float s = *(const float *)out_of(x, g, "loss_scale_new")->data;
	int64_t gd = *(const int64_t *)out_of(x, g, "loss_scale_good_steps_new")->data;
	cr_expect_eq(s, want_scale, "%s: scale %.9g, wanted %.9g", what, (double)s, (double)want_scale);
	cr_expect_eq(gd, want_good, "%s: good steps %ld, wanted %ld", what, (long)gd, (long)want_good);
	if (want_hyst >= 0) {
		int64_t h = *(const int64_t *)out_of(x, g, "loss_scale_hysteresis_new")->data;
		cr_expect_eq(h, want_hyst, "%s: hysteresis %ld, wanted %ld", what, (long)h, (long)want_hyst);
	}
	exec_free(x);
}

Test(step, the_scale_grows_at_interval_backs_off_to_min_and_never_passes_max)
{
	struct graph *g = stepped(four_yaml, "dynamic:init=8,interval=3,min=1,max=64", NULL, 0);
	expect_scale(g, 1e-3f, 8, 0, -1, 8, 1, -1, "finite, first good step");
	expect_scale(g, 1e-3f, 8, 1, -1, 8, 2, -1, "finite, one before interval");
	expect_scale(g, 1e-3f, 8, 2, -1, 16, 0, -1, "finite, at interval: grows");
	expect_scale(g, 1e-3f, 64, 2, -1, 64, 0, -1, "at interval but at max: no growth");
	expect_scale(g, 1e-3f, 48, 2, -1, 48, 0, -1, "growth would pass max: none");
	expect_scale(g, NAN, 8, 2, -1, 4, 0, -1, "non-finite: backs off, counter reset");
	expect_scale(g, INFINITY, 1.5f, 1, -1, 1, 0, -1, "backoff floored at min");
	expect_scale(g, INFINITY, 1, 0, -1, 1, 0, -1, "at min it stays");
	graph_free(g);
	/* growth that would overflow float32 is refused even when max allows it */
	g = stepped(four_yaml, "dynamic:init=1,interval=1,max=3.4028234e38", NULL, 0);
	expect_scale(g, 1e-30f, 0x1p126f, 0, -1, 0x1p127f, 0, -1, "grows to 2^127");
	expect_scale(g, 1e-30f, 0x1p127f, 0, -1, 0x1p127f, 0, -1, "2^128 overflows: no growth");
	graph_free(g);
	/* hysteresis 2: the first non-finite step in a row only uses up the tolerance */
	g = stepped(four_yaml, "dynamic:init=8,interval=2,hysteresis=2", NULL, 0);
	expect_scale(g, NAN, 8, 1, 2, 8, 0, 1, "tolerated");
	expect_scale(g, NAN, 8, 0, 1, 4, 0, 1, "then backs off");
	expect_scale(g, 1e-3f, 4, 1, 1, 8, 0, 2, "growth restores the tolerance");
	graph_free(g);
}

/* A non-finite step leaves every parameter and optimizer state bit for bit as it was, and does not
 * count as a step; a finite one moves them. */
Test(step, a_skipped_step_changes_nothing_but_the_scale)
{
	static const char *const opts[] = {"adam:lr=0.1", "sgd:lr=0.1,momentum=0.9", "sgd:lr=0.1"};
	for (int o = 0; o < 3; o++) {
		struct graph *g = stepped(four_yaml, "dynamic", opts[o], 1.0);
		for (int finite = 0; finite < 2; finite++) {
			struct fed f = {0};
			fill_x(&f, 0.25f);
			f.x[3][2] = finite ? 0.25f : INFINITY;
			struct exec *x = four_step(g, &f);
			cr_expect_eq(rt_get(out_of(x, g, "found_inf"), 0), !finite);
			const struct model *m = g->model;
			cr_assert_eq(m->n_ti, 1);
			size_t moved = 0;
			for (size_t i = 0; i < m->ti[0].n_update_bind; i++) {
				const struct kv *b = &m->ti[0].update_bind[i];
				struct value *k = strmap_get(&g->names, b->key);
				if (strstr(b->key, "loss_scale"))
					continue;
				/* (the run updated k in its buffer: its value before is its initializer's) */
				struct bytes was;
				const struct rtensor *now = out_of(x, g, b->value);
				cr_assert_eq(tensor_bytes(g, k->init, &was, NULL), 0);
				moved += !(now->nbytes == was.n && !memcmp(now->data, was.p, was.n));
			}
			/* finite: 4 parameters, their state (adam 8, momentum 4) and the step counter move */
			size_t want = !finite ? 0 : 5 + (o == 0 ? 8 : o == 1 ? 4 : 0);
			cr_expect_eq(moved, want, "%s, %s step: %zu states moved, not %zu", opts[o],
				     finite ? "finite" : "skipped", moved, want);
			cr_expect_eq(rt_get(out_of(x, g, "loss_scale_new"), 0), finite ? 65536 : 32768);
			exec_free(x);
		}
		graph_free(g);
	}
}

/* Clipping sees the unscaled gradients: the norm is ||x|| whatever the scale (bitwise, for a power of
 * two), and the clipped gradients are x * X / (norm + 1e-6). */
Test(step, clipping_sees_unscaled_gradients)
{
	struct fed f = {0};
	double sq = 0;
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 3; j++) {
			f.x[i][j] = (float)(i * 3 + j + 1) / 4;
			sq += (double)f.x[i][j] * f.x[i][j];
		}
	float norm[2];
	for (int scaled = 0; scaled < 2; scaled++) {
		struct graph *g = stepped(four_yaml, scaled ? "dynamic" : NULL, NULL, 2.0);
		struct exec *x = four_step(g, &f);
		norm[scaled] = *(const float *)out_of(x, g, "grad_norm")->data;
		cr_expect(fabs(norm[scaled] - sqrt(sq)) <= 1e-6 * sqrt(sq), "norm %g, not %g", (double)norm[scaled], sqrt(sq));
		double coef = 2.0 / ((double)norm[scaled] + 1e-6);
		static const char *const gs[] = {"w0_grad", "w1_grad", "w2_grad", "w3_grad"};
		double got = 0;
		for (int i = 0; i < 4; i++) {
			const struct rtensor *t = out_of(x, g, gs[i]);
			for (int j = 0; j < 3; j++) {
				cr_expect(fabs(rt_get(t, j) - f.x[i][j] * coef) <= 1e-6 * fabs(f.x[i][j]), "%s[%d]", gs[i], j);
				got += rt_get(t, j) * rt_get(t, j);
			}
		}
		cr_expect(fabs(sqrt(got) - 2.0) < 1e-5, "clipped norm %g", sqrt(got));
		exec_free(x);
		graph_free(g);
	}
	cr_expect_eq(norm[0], norm[1], "the scale changed the norm: %.9g and %.9g", (double)norm[0], (double)norm[1]);
}

Test(step, options_parse_with_defaults_and_refuse_nonsense)
{
	struct loss_scaling ls;
	struct optimizer o;
	char why[256];
	cr_assert_eq(loss_scaling_parse("dynamic", &ls, why, sizeof why), 0);
	cr_expect(ls.kind == LOSS_SCALE_DYNAMIC && ls.init == 65536 && ls.growth == 2 && ls.backoff == 0.5 &&
		  ls.interval == 2000 && ls.min == 1 && ls.max == 16777216 && ls.hysteresis == 1);
	cr_assert_eq(loss_scaling_parse("dynamic:interval=10,init=1024", &ls, why, sizeof why), 0);
	cr_expect(ls.interval == 10 && ls.init == 1024 && ls.growth == 2);
	static const char *const bad[] = {"dynamic:growth=1", "dynamic:backoff=1", "dynamic:interval=0.5", "dynamic:x=1",
					  "dynamic:init=", "dynamic:min=8,max=4", "fixed:0", "static", "dynamic:init=1e39"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_expect_neq(loss_scaling_parse(bad[i], &ls, why, sizeof why), 0, "%s accepted", bad[i]);
	cr_assert_eq(optimizer_parse("adam", &o, why, sizeof why), 0);
	cr_expect(o.kind == OPTIMIZER_ADAM && o.lr == 0.001 && o.beta1 == 0.9 && o.beta2 == 0.999 && o.eps == 1e-8);
	cr_assert_eq(optimizer_parse("sgd:lr=0.5,momentum=0.9", &o, why, sizeof why), 0);
	cr_expect(o.kind == OPTIMIZER_SGD && o.lr == 0.5 && o.momentum == 0.9);
	static const char *const badopt[] = {"adamw", "sgd:lr=-1", "adam:beta1=1", "sgd:beta1=0.9", "adam:lr=x"};
	for (size_t i = 0; i < sizeof badopt / sizeof *badopt; i++)
		cr_expect_neq(optimizer_parse(badopt[i], &o, why, sizeof why), 0, "%s accepted", badopt[i]);
}

/* ---- diet variables (DietAdam, ops/diet.h) ---- */

/* loss = ReduceSum(w * x) + ReduceSum(u * y): w's gradient is x, u's is y, so a test feeds any
 * gradient. w is 2-D (a factored second moment), u 3-D (a full one). */
static const char diet_yaml[] =
	"graphdiet: 1\nopset: 17\ninputs:\n"
	"  - {name: x, dtype: float32, shape: [3, 4]}\n  - {name: y, dtype: float32, shape: [2, 2, 2]}\n"
	"params:\n"
	"  - {name: w, dtype: float32, shape: [3, 4], data: [0.5, -1.25, 2, 0.001, -3, 0.75, 1, -0.5, 0.25, 4, -2, 1.5]}\n"
	"  - {name: u, dtype: float32, shape: [2, 2, 2], data: [1, -1, 0.5, -0.5, 2, -2, 0.125, 3]}\n"
	"nodes:\n"
	"  - {op: Mul, inputs: [w, x], outputs: [a]}\n  - {op: ReduceSum, inputs: [a], outputs: [la], attrs: {keepdims: 0}}\n"
	"  - {op: Mul, inputs: [u, y], outputs: [c]}\n  - {op: ReduceSum, inputs: [c], outputs: [lc], attrs: {keepdims: 0}}\n"
	"  - {op: Add, inputs: [la, lc], outputs: [loss]}\n"
	"outputs: [{name: loss}]\n";

/* The formulas of the issue, in float64, independently of the kernel: one parameter's step t with
 * gradient g. State is kept in float32 as the graph keeps it, and the hyperparameters are float32
 * as ONNX attributes are. */
struct diet_ref {
	int16_t q[12];
	float m[12], vr[3], vc[4], v[12];
};

static void diet_ref_step(struct diet_ref *s, const float *g, int rows, int cols, int factored, double t,
			  const struct diet *d)
{
	struct diet f = {.beta1 = (float)d->beta1, .beta2 = (float)d->beta2, .eps = (float)d->eps, .lr = (float)d->lr,
			 .warmup = (float)d->warmup, .scale = (float)d->scale};
	d = &f;
	int n = rows * cols;
	double bc = 1 - pow(d->beta2, t), lr = d->lr * fmin(t / d->warmup, 1), cm = 0;
	if (factored) {
		for (int i = 0; i < rows; i++) {
			double a = 0;
			for (int j = 0; j < cols; j++)
				a += (double)g[i * cols + j] * g[i * cols + j] / cols;
			s->vr[i] = (float)(d->beta2 * s->vr[i] + (1 - d->beta2) * a);
		}
		for (int j = 0; j < cols; j++) {
			double a = 0;
			for (int i = 0; i < rows; i++)
				a += (double)g[i * cols + j] * g[i * cols + j] / rows;
			s->vc[j] = (float)(d->beta2 * s->vc[j] + (1 - d->beta2) * a);
			cm += (sqrt(s->vc[j] / bc) + d->eps) / cols;
		}
	}
	for (int k = 0; k < n; k++) {
		double u = g[k], denom;
		if (d->beta1 != 0)
			u = s->m[k] = (float)(d->beta1 * s->m[k] + (1 - d->beta1) * g[k]);
		if (factored) {
			denom = (sqrt(s->vr[k / cols] / bc) + d->eps) * (sqrt(s->vc[k % cols] / bc) + d->eps) / cm;
		} else {
			s->v[k] = (float)(d->beta2 * s->v[k] + (1 - d->beta2) * (double)g[k] * g[k]);
			denom = sqrt(s->v[k] / bc) + d->eps;
		}
		double x = s->q[k] * d->scale - lr * u / denom, r = nearbyint(x / d->scale);
		s->q[k] = (int16_t)fmax(-32767, fmin(32767, r));
	}
}


/* Five steps of DietAdam (round=nearest, momentum on, linear warmup over 2 steps) on a 2-D and a
 * 3-D diet parameter, each step's state fed back, against diet_ref_step: the moments agree to
 * float32 rounding and the stored INT16 values exactly. The gradients are not outputs, and the
 * update count diet_step is 5. */
Test(diet, steps_match_a_float64_reference)
{
	struct graph *g = load_text("diet.yaml", diet_yaml);
	static const char *const names[] = {"w", "u"};
	struct step_opts so = {0};
	char why[256];
	cr_assert_eq(diet_parse("beta1=0.9,beta2=0.95,eps=1e-6,lr=0.05,schedule=none,warmup=2,round=nearest", &so.diet,
				why, sizeof why), 0, "%s", why);
	so.diet.params = names;
	so.diet.n_params = 2;
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	cr_assert_eq(step_build(g, &so, NULL, &e), 0, "%s", e.msg);
	for (uint32_t i = 0; i < g->n_outputs; i++)
		cr_assert_null(strstr(g->outputs[i]->name, "_grad"), "%s: no gradient output", g->outputs[i]->name);
	struct diet_ref rw = {0}, ru = {0};
	static const float w0[12] = {0.5f, -1.25f, 2, 0.001f, -3, 0.75f, 1, -0.5f, 0.25f, 4, -2, 1.5f};
	static const float u0[8] = {1, -1, 0.5f, -0.5f, 2, -2, 0.125f, 3};
	for (int k = 0; k < 12; k++)
		rw.q[k] = (int16_t)nearbyint(w0[k] / (float)so.diet.scale);
	for (int k = 0; k < 8; k++)
		ru.q[k] = (int16_t)nearbyint(u0[k] / (float)so.diet.scale);
	int16_t qw[12], qu[8];
	float mw[12] = {0}, vr[3] = {0}, vc[4] = {0}, mu[8] = {0}, vu[8] = {0};
	int64_t step = 0;
	memcpy(qw, rw.q, sizeof qw);
	memcpy(qu, ru.q, sizeof qu);
	const int64_t d34[2] = {3, 4}, d222[3] = {2, 2, 2}, d3[1] = {3}, d4[1] = {4};
	for (int t = 1; t <= 5; t++) {
		float x[12], y[8];
		for (int k = 0; k < 12; k++)
			x[k] = (float)(sin(1.3 * k + t) * pow(10, (k % 3) - 1));
		for (int k = 0; k < 8; k++)
			y[k] = (float)cos(0.7 * k * t) * 0.3f;
		struct rtensor in[10] = {
			rt_over(DT_FLOAT, 2, d34, x),  rt_over(DT_FLOAT, 3, d222, y), rt_over(DT_INT16, 2, d34, qw),
			rt_over(DT_INT16, 3, d222, qu), rt_over(DT_FLOAT, 2, d34, mw), rt_over(DT_FLOAT, 1, d3, vr),
			rt_over(DT_FLOAT, 1, d4, vc),  rt_over(DT_FLOAT, 3, d222, mu), rt_over(DT_FLOAT, 3, d222, vu),
			rt_over(DT_INT64, 0, NULL, &step)};
		const char *in_names[10] = {"x", "y", "w", "u", "w_diet_m", "w_diet_vr", "w_diet_vc", "u_diet_m", "u_diet_v",
					    "diet_step"};
		struct exec_opts xo = {.inputs = in, .input_names = in_names, .n_inputs = 10};
		struct exec *ex = exec_run(g, &xo, NULL, &e);
		cr_assert(ex, "step %d: %s", t, e.msg);
		diet_ref_step(&rw, x, 3, 4, 1, t, &so.diet);
		diet_ref_step(&ru, y, 1, 8, 0, t, &so.diet);
		struct {
			const char *name;
			void *into;
			size_t n;
		} outs[] = {{"w_new", qw, sizeof qw}, {"u_new", qu, sizeof qu}, {"w_diet_m_new", mw, sizeof mw},
			    {"w_diet_vr_new", vr, sizeof vr}, {"w_diet_vc_new", vc, sizeof vc}, {"u_diet_m_new", mu, sizeof mu},
			    {"u_diet_v_new", vu, sizeof vu}, {"diet_step_new", &step, sizeof step}};
		for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
			const struct value *v = strmap_get(&g->names, outs[i].name);
			cr_assert(v && (v->flags & VALUE_OUTPUT), "%s is an output", outs[i].name);
			const struct rtensor *r = exec_value(ex, v);
			cr_assert_eq(r->nbytes, outs[i].n, "%s", outs[i].name);
			memcpy(outs[i].into, r->data, outs[i].n);
		}
		exec_free(ex);
		for (int k = 0; k < 12; k++) {
			cr_expect_eq(qw[k], rw.q[k], "step %d: w[%d] = %d, reference %d", t, k, qw[k], rw.q[k]);
			cr_expect(fabsf(mw[k] - rw.m[k]) <= 1e-6f * fabsf(rw.m[k]) + 1e-12f, "step %d: m[%d]", t, k);
		}
		for (int k = 0; k < 8; k++) {
			cr_expect_eq(qu[k], ru.q[k], "step %d: u[%d] = %d, reference %d", t, k, qu[k], ru.q[k]);
			cr_expect(fabsf(vu[k] - ru.v[k]) <= 1e-6f * fabsf(ru.v[k]) + 1e-12f, "step %d: v[%d]", t, k);
		}
		for (int k = 0; k < 3; k++)
			cr_expect(fabsf(vr[k] - rw.vr[k]) <= 1e-6f * fabsf(rw.vr[k]), "step %d: vr[%d]", t, k);
		for (int k = 0; k < 4; k++)
			cr_expect(fabsf(vc[k] - rw.vc[k]) <= 1e-6f * fabsf(rw.vc[k]), "step %d: vc[%d]", t, k);
		cr_expect_eq(step, t, "the update runs once per step");
	}
	int moved = 0;
	for (int k = 0; k < 12; k++)
		moved += qw[k] != (int16_t)nearbyint(w0[k] / (float)so.diet.scale);
	cr_expect_gt(moved, 8, "the parameters moved");
	graph_free(g);
}

/* Quantization: multiples of scale round-trip; stochastic rounding is unbiased (the mean of 20000
 * draws of x = 0.3 units is 0.3 units within 1%) and nearest is deterministic; both clamp to
 * +-32767; the learning-rate schedules. */
Test(diet, quantization_and_schedules)
{
	const double s = 10.0 / 32767;
	for (int q = -32767; q <= 32767; q += 127)
		cr_assert_eq(diet_quantize(q * s, s, -1), q, "%d round-trips", q);
	for (int u = 0; u < 4; u++)
		cr_assert_eq(diet_quantize(1234 * s, s, u / 4.0), 1234, "a multiple stays put stochastically");
	double sum = 0, sum_neg = 0;
	for (int i = 0; i < 20000; i++) {
		sum += diet_quantize(0.3 * s, s, philox_uniform(7, (uint64_t)i));
		sum_neg += diet_quantize(-5.3 * s, s, philox_uniform(8, (uint64_t)i));
	}
	cr_expect(fabs(sum / 20000 - 0.3) < 0.01, "mean %g, not 0.3", sum / 20000);
	cr_expect(fabs(sum_neg / 20000 + 5.3) < 0.01, "mean %g, not -5.3", sum_neg / 20000);
	cr_expect_eq(diet_quantize(0.3 * s, s, -1), 0);
	cr_expect_eq(diet_quantize(0.7 * s, s, -1), 1);
	cr_expect_eq(diet_quantize(1e9, s, -1), 32767);
	cr_expect_eq(diet_quantize(-1e9, s, 0.99), -32767);
	cr_expect_eq(diet_quantize(32767.4 * s, s, 0.9), 32767, "clamped, not wrapped");
	cr_expect_eq(diet_quantize(NAN, s, -1), 0);
	/* noam: lr min(t w^-1.5, t^-0.5); at t = w the two agree; after it, t^-0.5 */
	cr_expect_float_eq(diet_lr(2, 1, 100, 1), 2 * pow(100, -1.5), 1e-15);
	cr_expect_float_eq(diet_lr(2, 1, 100, 100), 2 * 0.1, 1e-15);
	cr_expect_float_eq(diet_lr(2, 1, 100, 400), 2 * 0.05, 1e-15);
	cr_expect_float_eq(diet_lr(2, 0, 100, 1), 0.02, 1e-15);
	cr_expect_float_eq(diet_lr(2, 0, 100, 400), 2, 1e-15);
}

/* Two DietAdam nodes on the same 2-D q and gradient, one factored (vr, vc), one with a full v: at
 * t = 1 with g = a b^T and |b| constant, g^2 is rank 1 and the factored denominator is the full
 * one, so both give the same q' (and, bias-corrected at t = 1, each weight moves by lr sign(g):
 * v' / (1 - beta2) = g^2). With unequal |b| the factored one differs, as its formula says (by
 * sqrt(mean b^2) / mean |b| before epsilon). */
Test(diet, factored_equals_full_for_rank_one_squares_and_t1_moves_by_lr)
{
	static const char yaml[] =
		"graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
		"inputs: [{name: g, dtype: float32, shape: [3, 4]}]\n"
		"params:\n  - {name: q, dtype: int16, shape: [3, 4], data: [100, -200, 300, 0, 5, -5, 7000, -7000, 1, 2, 3, 4]}\n"
		"  - {name: t, dtype: int64, shape: [], data: [1]}\n"
		"  - {name: vr, dtype: float32, shape: [3], data: [0, 0, 0]}\n  - {name: vc, dtype: float32, shape: [4], data: [0, 0, 0, 0]}\n"
		"  - {name: v, dtype: float32, shape: [3, 4], data: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}\n"
		"nodes:\n"
		"  - {op: DietAdam, domain: graphdiet, inputs: [q, g, t, '', vr, vc], outputs: [qf, '', vrf, vcf],\n"
		"     attrs: {beta2: 0.98, epsilon: 1.0e-10, lr: 0.01, schedule: none, warmup: 1.0, round: nearest}}\n"
		"  - {op: DietAdam, domain: graphdiet, inputs: [q, g, t, '', v], outputs: [qv, '', vf],\n"
		"     attrs: {beta2: 0.98, epsilon: 1.0e-10, lr: 0.01, schedule: none, warmup: 1.0, round: nearest}}\n"
		"outputs: [{name: qf}, {name: qv}]\n";
	struct graph *g = load_text("diet_rank1.yaml", yaml);
	static const float a[3] = {0.5f, -2, 3}, bs[2][4] = {{1, -1, 1, -1}, {1, -4, 0.5f, 2}};
	static const int16_t q0[12] = {100, -200, 300, 0, 5, -5, 7000, -7000, 1, 2, 3, 4};
	const int64_t d34[2] = {3, 4};
	for (int c = 0; c < 2; c++) {
		float gv[12];
		for (int i = 0; i < 12; i++)
			gv[i] = a[i / 4] * bs[c][i % 4] * 1e-3f;
		struct rtensor in = rt_over(DT_FLOAT, 2, d34, gv);
		const char *names[1] = {"g"};
		struct exec_opts xo = {.inputs = &in, .input_names = names, .n_inputs = 1};
		struct gd_err e = {0};
		struct exec *x = exec_run(g, &xo, NULL, &e);
		cr_assert(x, "%s", e.msg);
		const int16_t *qf = exec_value(x, strmap_get(&g->names, "qf"))->data;
		const int16_t *qv = exec_value(x, strmap_get(&g->names, "qv"))->data;
		int differ = 0;
		for (int i = 0; i < 12; i++) {
			differ += qf[i] != qv[i];
			const double s = 10.0f / 32767; /* the scale as the attribute holds it */
			int16_t moved = (int16_t)nearbyint((q0[i] * s - 0.01f * (gv[i] > 0 ? 1 : -1)) / s);
			cr_expect_eq(qv[i], moved, "full v, t = 1: q[%d] moves by lr sign(g): %d, not %d", i, qv[i], moved);
		}
		if (c == 0)
			cr_expect_eq(differ, 0, "rank-1 g^2 with |b| constant: factored == full");
		else
			cr_expect_gt(differ, 0, "unequal |b|: the factored estimate differs");
		exec_free(x);
	}
	graph_free(g);
}

/* What an inline update reads in place of a gradient (step.c's diet_narrow) is the same update:
 * DietAdam over rows and their indices equals it over ScatterND(zeros, indices, rows, add), Gather's
 * gradient (repeated and negative indices summed in order, untouched rows decaying, momentum on);
 * over a 16-bit or a float64 gradient it equals it over the gradient's Cast to float32 (read at
 * float32 precision); bit for bit, stochastic rounding included (the same node name draws the same
 * numbers). An index out of range is refused. */
Test(diet, row_updates_and_16_bit_gradients_equal_the_dense_update)
{
	static const char *const head =
		"graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
		"inputs: [{name: rows, dtype: float32, shape: [5, 4]}, {name: idx, dtype: int64, shape: [5, 1]},\n"
		"         {name: h, dtype: float16, shape: [6, 4]}, {name: d, dtype: float64, shape: [6, 4]}]\n"
		"params:\n  - {name: q, dtype: int16, shape: [6, 4], data: [100, -200, 300, 0, 5, -5, 7000, -7000, 1, 2, 3, 4,\n"
		"     9, 8, 7, 6, -5, -4, -3, -2, 30000, -30000, 11, 12]}\n"
		"  - {name: t, dtype: int64, shape: [], data: [3]}\n"
		"  - {name: m, dtype: float32, shape: [6, 4], data: [1e-3, 0, 0, 0, 0, -2e-3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,\n"
		"     0, 0, 0, 5e-4, 0, 0, 0, 0]}\n"
		"  - {name: vr, dtype: float32, shape: [6], data: [1e-6, 2e-6, 0, 0, 3e-6, 1e-7]}\n"
		"  - {name: vc, dtype: float32, shape: [4], data: [1e-6, 0, 2e-6, 4e-7]}\n"
		"  - {name: shape, dtype: int64, shape: [2], data: [6, 4]}\n"
		"nodes:\n"
		"  - {op: Cast, inputs: [h], outputs: [wide], attrs: {to: 1}}\n"
		"  - {op: Cast, inputs: [d], outputs: [narrow], attrs: {to: 1}}\n";
	static const char *const scatter = /* not in the last case, which ScatterND would refuse first */
		"  - {op: ConstantOfShape, inputs: [shape], outputs: [zeros]}\n"
		"  - {op: ScatterND, inputs: [zeros, idx, rows], outputs: [dense], attrs: {reduction: add}}\n";
	static const char *const up[][2] = {
		{"[q, dense, t, m, vr, vc]", "[q, rows, t, m, vr, vc, idx]"},
		{"[q, wide, t, m, vr, vc]", "[q, h, t, m, vr, vc]"},
		{"[q, narrow, t, m, vr, vc]", "[q, d, t, m, vr, vc]"},
	};
	float rows[20];
	uint16_t h[24];
	double dv[24];
	int64_t idx[5] = {4, 1, -2, 1, 0}; /* row 1 twice, -2 is row 4 again: rows 2, 3 and 5 untouched */
	for (int i = 0; i < 20; i++)
		rows[i] = (float)((i * 7 % 11) - 5) * 1.37e-3f;
	for (int i = 0; i < 24; i++)
		h[i] = f16_from_f32((float)((i * 5 % 13) - 6) * 2.1e-3f);
	for (int i = 0; i < 24; i++) /* not float32 values: the Cast rounds them */
		dv[i] = ((i * 3 % 7) - 3) * 1.234567891234e-3 + 1e-12;
	const int64_t d54[2] = {5, 4}, d51[2] = {5, 1}, d64[2] = {6, 4};
	struct rtensor in[4] = {rt_over(DT_FLOAT, 2, d54, rows), rt_over(DT_INT64, 2, d51, idx),
				rt_over(DT_FLOAT16, 2, d64, h), rt_over(DT_DOUBLE, 2, d64, dv)};
	const char *names[4] = {"rows", "idx", "h", "d"};
	const int bad = 3; /* the last case: an index out of range */
	static const char *const outs[4] = {"qn", "mn", "vrn", "vcn"};
	for (int c = 0; c <= bad; c++) {
		struct exec *x[2] = {NULL, NULL};
		struct graph *g[2] = {NULL, NULL};
		for (int s = 0; s < 2; s++) {
			char text[2048];
			snprintf(text, sizeof text,
				 "%s%s  - {name: up, op: DietAdam, domain: graphdiet, inputs: %s, outputs: [qn, mn, vrn, vcn],\n"
				 "     attrs: {beta1: 0.9, lr: 0.01, schedule: none, warmup: 1.0}}\n"
				 "outputs: [{name: qn}, {name: mn}, {name: vrn}, {name: vcn}]\n",
				 head, c == bad ? "" : scatter, c == bad ? "[q, rows, t, m, vr, vc, idx]" : up[c][s]);
			g[s] = load_text("diet_rows.yaml", text);
			if (c == bad)
				idx[3] = 6; /* one row past the end */
			struct exec_opts xo = {.inputs = in, .input_names = names, .n_inputs = 4};
			struct gd_err e = {0};
			x[s] = exec_run(g[s], &xo, NULL, &e);
			if (c == bad) {
				cr_expect_null(x[s]);
				cr_expect(strstr(e.msg, "out of range") && strstr(e.msg, "'up'"), "%s", e.msg);
			} else {
				cr_assert(x[s], "case %d, %d: %s", c, s, e.msg);
			}
		}
		for (int k = 0; c < bad && k < 4; k++) {
			const struct rtensor *a = exec_value(x[0], strmap_get(&g[0]->names, outs[k]));
			const struct rtensor *b = exec_value(x[1], strmap_get(&g[1]->names, outs[k]));
			cr_expect(a->nbytes == b->nbytes && !memcmp(a->data, b->data, a->nbytes), "case %d: %s differs", c,
				  outs[k]);
		}
		if (c < bad) { /* and the update moved something: the comparison is not of two copies of q */
			const int16_t *qn = exec_value(x[0], strmap_get(&g[0]->names, "qn"))->data;
			static const int16_t q0[24] = {100, -200, 300, 0, 5, -5, 7000, -7000, 1, 2, 3, 4,
						       9,   8,    7,   6, -5, -4, -3,   -2,    30000, -30000, 11, 12};
			int moved = 0;
			for (int i = 0; i < 24; i++)
				moved += qn[i] != q0[i];
			cr_expect_gt(moved, 8, "case %d: %d of 24 moved", c, moved);
		}
		for (int s = 0; s < 2; s++) {
			exec_free(x[s]);
			graph_free(g[s]);
		}
	}
}

/* DietAdam over factors g (K, R) and b (K, C) is the update over their product Gemm(g, b,
 * transA=1), a Linear layer's weight gradient, made in blocks of rows without the R x C matrix:
 * at 2,048 columns a block is 8 rows, so 20 rows take three blocks (8, 8, 4), each made twice
 * (the moments, then the update). Float32 factors, and float16 ones whose product is rounded
 * to float16 as the Gemm's is. Momentum on, stochastic rounding. The products may round apart in
 * the last bit (OpenBLAS over 8 rows or over 20), so q' agrees within one step of the grid and
 * the moments to float32 rounding; most of q moves. Factors of another shape are refused. */
Test(diet, an_update_over_factors_equals_it_over_their_product)
{
	enum { R = 20, C = 2048, K = 3 };
	static int16_t q[R * C];
	static float a[K * R], b[K * C], m[R * C], vr[R], vc[C];
	diet_factor_data(q, m, a, b, vr, vc, R, C, K);
	const int64_t dq[2] = {R, C}, da[2] = {K, R}, db[2] = {K, C}, dr[1] = {R}, dc[1] = {C};
	struct rtensor in[6] = {rt_over(DT_INT16, 2, dq, q),    rt_over(DT_FLOAT, 2, da, a),
				rt_over(DT_FLOAT, 2, db, b),    rt_over(DT_FLOAT, 2, dq, m),
				rt_over(DT_FLOAT, 1, dr, vr),   rt_over(DT_FLOAT, 1, dc, vc)};
	const char *names[6] = {"q", "a", "b", "m", "vr", "vc"};
	/* float32 factors, then float16 ones (a Gemm of float16 and its Cast to float32) */
	static const char *const cast[2] = {"  - {op: Identity, inputs: [a], outputs: [fa]}\n"
					    "  - {op: Identity, inputs: [b], outputs: [fb]}\n"
					    "  - {op: Identity, inputs: [p], outputs: [prod]}\n",
					    "  - {op: Cast, inputs: [a], outputs: [fa], attrs: {to: 10}}\n"
					    "  - {op: Cast, inputs: [b], outputs: [fb], attrs: {to: 10}}\n"
					    "  - {op: Cast, inputs: [p], outputs: [prod], attrs: {to: 1}}\n"};
	static const char *const up[] = {"[q, prod, t, m, vr, vc]", "[q, fa, t, m, vr, vc, '', fb]",
					 "[q, fb, t, m, vr, vc, '', fa]"};
	for (int h = 0; h < 2; h++) {
		struct exec *x[3] = {NULL, NULL, NULL};
		struct graph *g[3] = {NULL, NULL, NULL};
		for (int s = 0; s < 3; s++) {
			char text[2048];
			snprintf(text, sizeof text,
				 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
				 "inputs: [{name: q, dtype: int16, shape: [%d, %d]}, {name: a, dtype: float32, shape: [%d, %d]},\n"
				 "         {name: b, dtype: float32, shape: [%d, %d]}, {name: m, dtype: float32, shape: [%d, %d]},\n"
				 "         {name: vr, dtype: float32, shape: [%d]}, {name: vc, dtype: float32, shape: [%d]}]\n"
				 "params:\n  - {name: t, dtype: int64, shape: [], data: [4]}\n"
				 "nodes:\n%s  - {op: Gemm, inputs: [fa, fb], outputs: [p], attrs: {transA: 1}}\n"
				 "  - {name: up, op: DietAdam, domain: graphdiet, inputs: %s, outputs: [qn, mn, vrn, vcn],\n"
				 "     attrs: {beta1: 0.9, lr: 0.01, schedule: none, warmup: 1.0}}\n"
				 "outputs: [{name: qn}, {name: mn}, {name: vrn}, {name: vcn}, {name: prod}]\n",
				 R, C, K, R, K, C, R, C, R, C, cast[h], up[s]);
			g[s] = load_text("diet_factors.yaml", text);
			struct exec_opts xo = {.inputs = in, .input_names = names, .n_inputs = 6};
			struct gd_err e = {0};
			x[s] = exec_run(g[s], &xo, NULL, &e);
			if (s == 2) {
				cr_expect_null(x[s]);
				cr_expect(strstr(e.msg, "g (K, R) and b (K, C)") && strstr(e.msg, "'up'"), "%s", e.msg);
			} else {
				cr_assert(x[s], "case %d, %d: %s", h, s, e.msg);
			}
		}
		diet_expect_same_update(x, g, q, R * C, 1, h);
		for (int s = 0; s < 3; s++) {
			exec_free(x[s]);
			graph_free(g[s]);
		}
	}
}

/* A DietAdam a model brings along is checked: an unknown schedule or rounding, an updated slot
 * that is not an output, and a float parameter are one-line errors naming the node. */
Test(diet, bad_nodes_are_refused)
{
	static const char *const bad[][2] = {
		{"[q, g, t, '', v]", "[qv, '', vf], attrs: {schedule: linear}"},
		{"[q, g, t, '', v]", "[qv, '', vf], attrs: {round: up}"},
		{"[q, g, t, '', v]", "[qv, '', '']"},
		{"[g, g, t, '', v]", "[qv, '', vf]"},
	};
	static const char *const why[] = {"schedule must be noam or none", "round must be stochastic or nearest",
					  "must be outputs", "the parameter must be int16"};
	for (int i = 0; i < 4; i++) {
		char text[1024];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
			 "inputs: [{name: g, dtype: float32, shape: [2]}]\n"
			 "params:\n  - {name: q, dtype: int16, shape: [2], data: [1, 2]}\n"
			 "  - {name: t, dtype: int64, shape: [], data: [1]}\n  - {name: v, dtype: float32, shape: [2], data: [0, 0]}\n"
			 "nodes:\n  - {name: up, op: DietAdam, domain: graphdiet, inputs: %s, outputs: %s}\n"
			 "outputs: [{name: qv}]\n",
			 bad[i][0], bad[i][1]);
		struct graph *g = load_text("diet_bad.yaml", text);
		float gv[2] = {1, -1};
		const int64_t d2[1] = {2};
		struct rtensor in = rt_over(DT_FLOAT, 1, d2, gv);
		const char *names[1] = {"g"};
		struct exec_opts xo = {.inputs = &in, .input_names = names, .n_inputs = 1};
		struct gd_err e = {0};
		struct exec *x = exec_run(g, &xo, NULL, &e);
		cr_expect_null(x, "case %d runs", i);
		cr_expect(strstr(e.msg, why[i]) && strstr(e.msg, "'up'"), "case %d: %s", i, e.msg);
		exec_free(x);
		graph_free(g);
	}
}
