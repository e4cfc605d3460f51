/* test_plan.c - the memory model: the simulator's predicted peak equals the executor's measured
 * peak, to the byte; sizes as people write them. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "helpers.h"
#include "plan/memsim.h"
#include "plan/plan.h"
#include "rewrite/autocast.h"
#include "rewrite/ctrl.h"
#include "rewrite/step.h"
#include "util/size.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void predicted_equals_measured(struct graph *g, const char *what)
{
	struct exec_binding b = {"batch", 3};
	struct exec_opts so = {.shapes_only = 1, .dims = &b, .n_dims = 1};
	struct gd_err e = {0};
	struct exec *shapes = exec_run(g, &so, NULL, &e);
	cr_assert(shapes, "%s: %s", what, e.msg);
	struct mem_result r;
	cr_assert_eq(memsim(g, shapes, &r, &e), 0, "%s", e.msg);
	struct exec_opts ro = {.random_inputs = 1, .seed = 1, .dims = &b, .n_dims = 1};
	struct exec_stats st;
	struct exec *x = exec_run(g, &ro, &st, &e);
	cr_assert(x, "%s: %s", what, e.msg);
	cr_expect_eq(r.peak, st.peak_bytes, "%s: predicted %llu bytes, measured %zu", what, (unsigned long long)r.peak,
		     st.peak_bytes);
	cr_expect_eq(r.at_peak.params + r.at_peak.grads + r.at_peak.activations + r.at_peak.opt_state, r.peak,
		     "%s: the breakdown adds up", what);
	cr_expect_eq(r.live[g->n_nodes - 1] >= st.final_bytes, 1, "%s", what);
	exec_free(x);
	exec_free(shapes);
	memsim_free(&r);
}

Test(memsim, predicted_peak_is_measured_peak)
{
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512], what[600];
		model_path(path, sizeof path, *m);
		struct graph *g = load_ok(path);
		snprintf(what, sizeof what, "%s forward", *m);
		predicted_equals_measured(g, what);
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		struct gd_err e = {0};
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
		cr_assert_eq(graph_toposort(g, &e), 0);
		snprintf(what, sizeof what, "%s training", *m);
		predicted_equals_measured(g, what);
		graph_free(g);
	}
}

/* The same under mixed precision: 16-bit tensors are counted at 2 bytes, and the float32 copies
 * the executor computes 16-bit ops on are workspace, not live memory. */
Test(memsim, predicted_peak_is_measured_peak_in_mixed_precision)
{
	static const int dts[] = {DT_FLOAT16, DT_BFLOAT16};
	for (const char *const *m = testdata_models; *m; m++)
		for (int d = 0; d < 2; d++) {
			char path[512], what[600];
			struct graph *g = load_ok(model_path(path, sizeof path, *m));
			struct autocast_opts ac = {.dtype = dts[d]};
			size_t low;
			struct gd_err e = {0};
			cr_assert_eq(autocast(g, &ac, &low, &e), 0, "%s", e.msg);
			/* (a convolution net at opset 17 has no bfloat16 op: Conv lacks the type until 22) */
			cr_assert(low > 0 || dts[d] == DT_BFLOAT16, "%s: something computes in 16 bits", *m);
			struct autodiff_opts ao = {0};
			struct autodiff_result res;
			cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", *m, e.msg);
			cr_assert_eq(graph_toposort(g, &e), 0);
			snprintf(what, sizeof what, "%s training, %s", *m, dtype_name(dts[d]));
			predicted_equals_measured(g, what);
			graph_free(g);
		}
}

/* plan builds the model in two halves so that the shapes run (an rtensor a value: 608 MB of a 1M-node
 * chain's 2.3 GB peak) is freed before the model's connectivity and scratch are made: measure keeps
 * only bytes and the reuse table beside the run, finish reads nothing of it (ASan catches a read of
 * the freed run), and the model so made predicts the executor's measured peak, in float32 and in
 * float16 (whose Gemms and scatters take no buffer). */
Test(memsim, the_model_is_finished_after_the_shapes_run_is_freed)
{
	for (const char *const *m = testdata_models; *m; m++)
		for (int half = 0; half < 2; half++) {
			char path[512];
			struct graph *g = load_ok(model_path(path, sizeof path, *m));
			struct gd_err e = {0};
			size_t low;
			struct autocast_opts ac = {.dtype = DT_FLOAT16};
			cr_assert_eq(half ? autocast(g, &ac, &low, &e) : 0, 0, "%s", e.msg);
			struct autodiff_opts ao = {0};
			struct autodiff_result res;
			cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", *m, e.msg);
			cr_assert_eq(graph_toposort(g, &e), 0);
			struct exec_binding b = {"batch", 3};
			struct exec_opts so = {.shapes_only = 1, .dims = &b, .n_dims = 1};
			struct exec *x = exec_run(g, &so, NULL, &e);
			cr_assert(x, "%s", e.msg);
			struct memmodel mm;
			cr_assert_eq(memmodel_measure(g, x, &mm, &e), 0, "%s", e.msg);
			cr_expect(!mm.f.in_off && !mm.f.in && !mm.left && !mm.copy,
				  "%s: nothing but bytes and the reuse table is made beside the run", *m);
			exec_free(x);
			mm.shapes = NULL;
			struct mem_result r;
			cr_assert_eq(memmodel_finish(g, &mm, &e), 0, "%s", e.msg);
			cr_assert_eq(memsim_model(&mm, &r, &e), 0, "%s", e.msg);
			struct exec_opts ro = {.random_inputs = 1, .seed = 1, .dims = &b, .n_dims = 1};
			struct exec_stats st;
			cr_assert((x = exec_run(g, &ro, &st, &e)), "%s", e.msg);
			cr_expect_eq(r.peak, st.peak_bytes, "%s (%s): predicted %llu bytes, measured %zu", *m,
				     half ? "float16" : "float32", (unsigned long long)r.peak, st.peak_bytes);
			exec_free(x);
			memsim_free(&r);
			memmodel_free(&mm);
			graph_free(g);
		}
}

/* And for whole training steps (fp16 with dynamic scaling, clipping and Adam): the optimizer's
 * moments, the scale and the counters count as optimizer state, the parameters' next values as
 * parameters. */
Test(memsim, predicted_peak_is_measured_peak_for_training_steps)
{
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512], what[600], why[256];
		struct graph *g = load_ok(model_path(path, sizeof path, *m));
		struct autocast_opts ac = {.dtype = DT_FLOAT16};
		struct step_opts so = {.clip_norm = 1};
		size_t low;
		struct gd_err e = {0};
		cr_assert_eq(loss_scaling_parse("dynamic", &so.ls, why, sizeof why), 0);
		cr_assert_eq(optimizer_parse("adam", &so.opt, why, sizeof why), 0);
		cr_assert_eq(autocast(g, &ac, &low, &e), 0, "%s", e.msg);
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		cr_assert_eq(step_begin(g, &so, &ao, &e), 0, "%s", e.msg);
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", *m, e.msg);
		cr_assert_eq(step_build(g, &so, NULL, &e), 0, "%s: %s", *m, e.msg);
		snprintf(what, sizeof what, "%s training step", *m);
		predicted_equals_measured(g, what);
		/* at the start, before any node: parameters, and two float32 moments per parameter element
		 * plus the scale (4 bytes) and two int64 counters */
		struct exec_opts xo = {.shapes_only = 1, .default_dim = 4};
		struct exec *x = exec_run(g, &xo, NULL, &e);
		cr_assert(x, "%s", e.msg);
		struct mem_result r;
		cr_assert_eq(memsim(g, x, &r, &e), 0);
		uint64_t params = 0; /* those Adam updates (BatchNorm's running statistics are state too) */
		for (uint32_t i = 0; i < g->n_inits; i++) {
			char moment[600];
			snprintf(moment, sizeof moment, "%s_adam_m", g->inits[i]->name);
			if (!(g->inits[i]->flags & VALUE_STATE) && strmap_get(&g->names, moment))
				params += exec_value(x, g->inits[i])->nbytes;
		}
		cr_expect_gt(r.at_peak.opt_state, 2 * params, "%s: optimizer state %llu for %llu bytes of parameters", *m,
			     (unsigned long long)r.at_peak.opt_state, (unsigned long long)params);
		memsim_free(&r);
		exec_free(x);
		graph_free(g);
	}
}

/* memsim of g's own order on its shapes; r->live is set. */
static void simulate(struct graph *g, struct mem_result *r)
{
	struct exec_opts so = {.shapes_only = 1};
	struct gd_err e = {0};
	struct exec *shapes = exec_run(g, &so, NULL, &e);
	cr_assert(shapes, "%s", e.msg);
	cr_assert_eq(memsim(g, shapes, r, &e), 0, "%s", e.msg);
	exec_free(shapes);
}

/* A parameter-bound MLP: L layers of [W] x [W] weights and [W] biases, batch 1, a squared-error
 * loss; its trainable elements in *n_params, its largest parameter's in *largest. */
static struct graph *param_bound_mlp(int layers, int width, uint64_t *n_params, uint64_t *largest)
{
	char text[8192];
	size_t k = (size_t)snprintf(text, sizeof text,
				    "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [1, %d]}, "
				    "{name: t, dtype: float32, shape: [1, %d]}]\nparams:\n  - {name: two, dtype: float32, "
				    "shape: [], data: [2.0]}\n", width, width);
	for (int l = 0; l < layers; l++)
		k += (size_t)snprintf(text + k, sizeof text - k,
				      "  - {name: w%d, dtype: float32, shape: [%d, %d], init: {dist: normal, std: 0.1, seed: %d}}\n"
				      "  - {name: b%d, dtype: float32, shape: [%d], init: {dist: normal, std: 0.1, seed: %d}}\n",
				      l, width, width, 2 * l + 1, l, width, 2 * l + 2);
	k += (size_t)snprintf(text + k, sizeof text - k, "nodes:\n");
	for (int l = 0; l < layers; l++) {
		char in[16];
		snprintf(in, sizeof in, l ? "h%d" : "x", l - 1);
		k += (size_t)snprintf(text + k, sizeof text - k,
				      "  - {op: MatMul, inputs: [%s, w%d], outputs: [m%d]}\n"
				      "  - {op: Add, inputs: [m%d, b%d], outputs: [a%d]}\n"
				      "  - {op: Relu, inputs: [a%d], outputs: [h%d]}\n",
				      in, l, l, l, l, l, l, l);
	}
	snprintf(text + k, sizeof text - k,
		 "  - {op: Sub, inputs: [h%d, t], outputs: [d]}\n  - {op: Pow, inputs: [d, two], outputs: [d2]}\n"
		 "  - {op: ReduceMean, inputs: [d2], outputs: [loss], attrs: {keepdims: 0}}\n"
		 "outputs: [{name: loss, dtype: float32, shape: []}]\n", layers - 1);
	*n_params = (uint64_t)layers * (uint64_t)(width * width + width);
	*largest = (uint64_t)width * (uint64_t)width;
	return load_text("param_bound_mlp.yaml", text);
}

/* The optimizer step in place (as PyTorch's fused optimizers): a parameter and its moments are
 * updated in their own buffers, the update's temporaries written over what dies. When a step
 * waits for every gradient (a finite check: dynamic loss scaling), its peak holds parameters,
 * gradients and state, plus a parameter's worth of temporaries where a value is read twice
 * (the finite check's gradient; Adam's gradient, momentum's new buffer): Adam 16 bytes per
 * parameter plus two such buckets, SGD 8 plus one, momentum 12 plus two; the batch (eight [1, 64] tensors at most:
 * inputs, activations) and the scalars aside. Otherwise each update runs as soon as its gradient
 * is made, so the gradients are never all live: under 16 and 8. bfloat16 autocast holds what
 * PyTorch AMP holds: float32 master parameters, gradients and moments. Predicted equals measured. */
Test(memsim, the_optimizer_step_is_made_in_place)
{
	static const struct {
		const char *opt;
		int dtype, dynamic, per_param, buckets;
	} cases[] = {{"adam", 0, 1, 16, 2},           {"sgd", 0, 1, 8, 1},   {"sgd:momentum=0.9", 0, 1, 12, 2},
		     {"adam", DT_BFLOAT16, 1, 16, 2}, {"adam", 0, 0, 15, 0}, {"sgd", 0, 0, 6, 0},
		     {"sgd:momentum=0.9", 0, 0, 10, 0}, {"adam", DT_BFLOAT16, 0, 15, 0}};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		uint64_t n, largest;
		struct graph *g = param_bound_mlp(8, 64, &n, &largest);
		char why[256], what[128];
		struct step_opts so = {0};
		struct gd_err e = {0};
		cr_assert_eq(optimizer_parse(cases[c].opt, &so.opt, why, sizeof why), 0);
		if (cases[c].dynamic)
			cr_assert_eq(loss_scaling_parse("dynamic", &so.ls, why, sizeof why), 0);
		if (cases[c].dtype) {
			struct autocast_opts ac = {.dtype = cases[c].dtype};
			size_t low;
			cr_assert_eq(autocast(g, &ac, &low, &e), 0, "%s", e.msg);
		}
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		cr_assert_eq(step_begin(g, &so, &ao, &e), 0, "%s", e.msg);
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
		cr_assert_eq(step_build(g, &so, NULL, &e), 0, "%s", e.msg);
		snprintf(what, sizeof what, "%s%s%s", cases[c].opt, cases[c].dtype ? ", bfloat16" : "",
			 cases[c].dynamic ? ", dynamic scale" : ", inline");
		predicted_equals_measured(g, what);
		struct mem_result r;
		simulate(g, &r);
		uint64_t bound = (uint64_t)cases[c].per_param * n + (uint64_t)cases[c].buckets * 4 * largest + 8 * 64 * 4;
		cr_expect_leq(r.peak, bound, "%s: peak %llu bytes, %.3f per parameter", what, (unsigned long long)r.peak,
			      (double)r.peak / (double)n);
		if (!strcmp(cases[c].opt, "adam") && !cases[c].dynamic)
			cr_expect_leq(r.peak, 17 * n, "%s: %.3f bytes per parameter", what, (double)r.peak / (double)n);
		memsim_free(&r);
		graph_free(g);
	}
}

/* Each elementwise node writes over the first input of its dtype and size that dies at it: x (an
 * input, 32 B) is kept; Mul(a, a) takes a (read twice, both here), Exp(b) cannot (b is read
 * again), Add(c, b) takes c. 64, 64, 96, 96, 68 B live (64, 64, 96, 128, 68 if each copied). */
Test(memsim, elementwise_nodes_write_over_inputs_that_die_there)
{
	static const char text[] =
		"graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [8]}]\n"
		"nodes:\n  - {op: Relu, inputs: [x], outputs: [a]}\n  - {op: Mul, inputs: [a, a], outputs: [b]}\n"
		"  - {op: Exp, inputs: [b], outputs: [c]}\n  - {op: Add, inputs: [c, b], outputs: [d]}\n"
		"  - {op: ReduceSum, inputs: [d], outputs: [y], attrs: {keepdims: 0}}\noutputs: [{name: y}]\n";
	struct graph *g = load_text("reuse.yaml", text);
	struct mem_result r;
	simulate(g, &r);
	static const uint64_t live[] = {64, 64, 96, 96, 68};
	for (int i = 0; i < 5; i++)
		cr_expect_eq(r.live[i], live[i], "after node %d: %llu B", i, (unsigned long long)r.live[i]);
	cr_expect_eq(r.peak, 96);
	memsim_free(&r);
	predicted_equals_measured(g, "reuse.yaml");
	graph_free(g);
}


Test(memsim, a_chain_by_hand)
{
	/* x (8 floats = 32 B) -> Relu -> Neg -> Tanh -> y: the input and one value are live at once,
	 * each node writing over the one it reads last: 64 B from the Relu step (index 0) on */
	struct graph *g = load_text("chain.yaml", chain_yaml);
	struct mem_result r;
	simulate(g, &r);
	cr_assert_eq(r.peak, 64);
	cr_assert_eq(r.peak_node, 0);
	cr_assert_eq(r.live[0], 64);
	cr_assert_eq(r.live[2], 64);
	memsim_free(&r);
	graph_free(g);
}

/* zeros (8 floats = 32 B) take a's values by ScatterElements, the result is reshaped and summed;
 * the inputs and parameters hold 120 B. */
static const char take_yaml[] =
	"graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [8]}]\n"
	"params:\n  - {name: n8, dtype: int64, shape: [1], data: [8]}\n"
	"  - {name: idx, dtype: int64, shape: [8], data: [7, 6, 5, 4, 3, 2, 1, 0]}\n"
	"  - {name: shp, dtype: int64, shape: [2], data: [2, 4]}\n"
	"nodes:\n  - {op: ConstantOfShape, inputs: [n8], outputs: [z]}\n  - {op: Relu, inputs: [x], outputs: [a]}\n"
	"  - {op: ScatterElements, inputs: [z, idx, a], outputs: [s], attrs: {reduction: add}}\n"
	"  - {op: Reshape, inputs: [s, shp], outputs: [b]}\n  - {op: ReduceSum, inputs: [b], outputs: [y], attrs: {keepdims: 0}}\n"
	"%s\noutputs: [{name: y}%s]\n";

Test(memsim, views_and_scatters_take_the_buffer_their_input_dies_in)
{
	/* 152 B once z is made, 184 B with a: the scatter updates z in place and the Reshape takes the
	 * scatter's buffer, so neither adds 32 B (216 B and 184 B if they copied); the executor agrees */
	char text[2048];
	snprintf(text, sizeof text, take_yaml, "", "");
	struct graph *g = load_text("take.yaml", text);
	struct mem_result r;
	simulate(g, &r);
	cr_expect_eq(r.live[0], 152);
	cr_expect_eq(r.live[2], 184, "the scatter adds nothing: %llu", (unsigned long long)r.live[2]);
	cr_expect_eq(r.live[3], 152, "nor does the Reshape: %llu", (unsigned long long)r.live[3]);
	cr_expect_eq(r.peak, 184);
	memsim_free(&r);
	predicted_equals_measured(g, "take.yaml");
	graph_free(g);
	/* read again after them (a Neg of z and of s) or kept as graph outputs, their inputs stay:
	 * the results are copies */
	snprintf(text, sizeof text, take_yaml,
		 "  - {op: Neg, inputs: [z], outputs: [nz]}\n  - {op: Neg, inputs: [s], outputs: [ns]}", ", {name: nz}, {name: ns}");
	g = load_text("take2.yaml", text);
	simulate(g, &r);
	cr_expect_eq(r.live[2], 216, "the scatter copies z: %llu", (unsigned long long)r.live[2]);
	cr_expect_eq(r.live[3], 216, "the Reshape copies s (a freed): %llu", (unsigned long long)r.live[3]);
	memsim_free(&r);
	predicted_equals_measured(g, "take2.yaml");
	graph_free(g);
}

Test(size, parse_and_format)
{
	uint64_t v;
	cr_assert(!size_parse("8GiB", &v) && v == 8ull << 30);
	cr_assert(!size_parse("500MB", &v) && v == 500000000);
	cr_assert(!size_parse("1.5 GiB", &v) && v == 1610612736);
	cr_assert(!size_parse("1048576", &v) && v == 1048576);
	cr_assert(!size_parse("2kib", &v) && v == 2048);
	cr_assert_eq(size_parse("eight", &v), -1);
	cr_assert_eq(size_parse("8 parsecs", &v), -1);
	cr_assert_eq(size_parse("-1", &v), -1);
	cr_assert_eq(size_parse("99999999TiB", &v), -1);
	char buf[32];
	cr_assert_str_eq(size_format(1536, buf, sizeof buf), "1.50 KiB");
	cr_assert_str_eq(size_format(1000, buf, sizeof buf), "1000 B");
	cr_assert_str_eq(size_format(8ull << 30, buf, sizeof buf), "8.00 GiB");
}

#include "io/format.h"
#include "plan/plan.h"

/* A training graph written to disk and read back plans exactly as its model: node tags survive. */
Test(plan, training_graph_file_plans_like_its_model)
{
	struct graph *g = load_ok(TESTDATA "/rescnn.onnx");
	struct exec_binding b = {"batch", 2};
	struct plan_opts po = {.dims = &b, .n_dims = 1};
	struct plan_report r1, r2;
	struct gd_err e = {0};
	cr_assert_eq(plan_memory(g, &po, &r1, &e), 0, "%s", e.msg);
	cr_assert(r1.built_training);
	char path[256];
	snprintf(path, sizeof path, "%s/rescnn_train.onnx", tmpdir());
	struct save_opts so = SAVE_OPTS_DEFAULT;
	cr_assert_eq(model_save(g, path, FMT_ONNX, &so, &e), 0, "%s", e.msg);
	struct graph *t = load_ok(path);
	cr_assert_eq(plan_memory(t, &po, &r2, &e), 0, "%s", e.msg);
	cr_assert_not(r2.built_training, "the file is recognised as a training graph");
	cr_assert_eq(r2.peak_after, r1.peak_after);
	cr_assert_eq(r2.at_peak.grads, r1.at_peak.grads, "gradients are told apart by their nodes' tags");
	cr_assert_eq(r2.at_peak.activations, r1.at_peak.activations);
	cr_assert_eq(r2.n_checkpoints, r1.n_checkpoints);
	cr_assert_eq(r2.forward_flops, r1.forward_flops);
	graph_free(t);
	graph_free(g);
}

/* plan reports the rewrite without applying it: every figure, name and position of its report is
 * the one the rewritten graph itself gives (train's report, made the same way, is checked against
 * the graph it rewrote). */
/* plan's report without the rewrite (plan, check) describes the graph the rewrite makes (train). */
static void report_is_rewrite(const char *path, const char *strategy)
{
	struct graph *g1 = load_ok(path), *g2 = load_ok(path);
	struct exec_binding b = {"batch", 2};
	struct plan_opts po = {.dims = &b, .n_dims = 1};
	cr_assert_eq(ckpt_parse(strategy, &po.ckpt), 0);
	struct plan_report r1, r2;
	struct gd_err e = {0};
	if (po.ckpt.kind == CKPT_AUTO) { /* a budget halfway down from keeping everything */
		cr_assert_eq(plan_memory(g1, &po, &r1, &e), 0, "%s", e.msg);
		po.budget = po.ckpt.budget = r1.peak_before - r1.at_peak.activations / 2;
		po.has_budget = 1;
		graph_free(g1);
		g1 = load_ok(path);
	}
	cr_assert_eq(plan_memory(g1, &po, &r1, &e), 0, "%s %s: %s", path, strategy, e.msg);
	po.report_only = 1;
	cr_assert_eq(plan_memory(g2, &po, &r2, &e), 0, "%s %s: %s", path, strategy, e.msg);
	for (uint32_t i = 0; i < g2->n_nodes; i++)
		cr_assert_not(g2->nodes[i]->tags & TAG_RECOMPUTE, "%s %s: report_only rewrote", path, strategy);
	/* r1 against its rewritten graph */
	cr_assert_eq(r1.n_nodes, g1->n_nodes);
	if (r1.peak_node >= 0) {
		char d[300];
		cr_assert_str_eq(r1.peak_node_desc, node_desc(g1->nodes[r1.peak_node], d, sizeof d));
		cr_assert_eq(r1.peak_in_recompute, !!(g1->nodes[r1.peak_node]->tags & TAG_RECOMPUTE));
	}
	uint32_t clones = 0;
	for (uint32_t i = 0; i < g1->n_nodes; i++)
		clones += !!(g1->nodes[i]->tags & TAG_RECOMPUTE);
	cr_assert_eq(r1.n_clones, clones, "%s %s", path, strategy);
	for (size_t i = 0; i < r1.n_checkpoints; i++) {
		char name[512]; /* name@level: made by a clone */
		snprintf(name, sizeof name, "%s", r1.checkpoints[i]);
		int inner = i >= r1.n_checkpoints - r1.n_inner;
		cr_assert_eq(!!strchr(name, '@'), inner, "%s %s: %s", path, strategy, name);
		if (inner)
			*strchr(name, '@') = 0;
		const struct value *v = strmap_get(&g1->names, name);
		cr_assert(v && value_is_activation(v));
		const struct node *at = g1->nodes[r1.checkpoint_steps[i]];
		cr_assert_eq(!!(at->tags & TAG_RECOMPUTE), inner, "%s %s: %s", path, strategy, name);
		cr_assert(inner || at == v->producer, "%s %s: %s", path, strategy, name);
	}
	size_t levels = 0; /* the list's name@level entries */
	for (const char *c = strategy; *c; c++)
		levels += *c == '@';
	cr_assert(po.ckpt.kind != CKPT_LIST || r1.n_inner == levels, "%s %s", path, strategy);
	for (uint32_t i = 0; i < r1.n_segments; i++) {
		const struct segment *sg = &r1.segments[i];
		for (uint32_t k = 0; k < sg->n_nodes; k++)
			cr_assert(g1->nodes[sg->first_step + k]->tags & TAG_RECOMPUTE);
		char d[300];
		if (sg->first_step + sg->n_nodes < g1->n_nodes)
			cr_assert_str_eq(sg->before, node_desc(g1->nodes[sg->first_step + sg->n_nodes], d, sizeof d));
	}
	/* and r2 is r1 */
	cr_assert_eq(r2.peak_after, r1.peak_after);
	cr_assert_eq(r2.n_nodes, r1.n_nodes);
	cr_assert_eq(r2.peak_node, r1.peak_node);
	cr_assert_str_eq(r2.peak_node_desc, r1.peak_node_desc);
	cr_assert_eq(r2.peak_in_recompute, r1.peak_in_recompute);
	cr_assert_eq(r2.n_clones, r1.n_clones);
	cr_assert_eq(r2.forward_flops, r1.forward_flops);
	cr_assert_eq(r2.recompute_flops, r1.recompute_flops);
	cr_assert_eq(r2.kept_bytes, r1.kept_bytes);
	cr_assert_eq(r2.n_checkpoints, r1.n_checkpoints, "%s %s", path, strategy);
	for (size_t i = 0; i < r1.n_checkpoints; i++) {
		cr_assert_str_eq(r2.checkpoints[i], r1.checkpoints[i]);
		cr_assert_eq(r2.checkpoint_steps[i], r1.checkpoint_steps[i]);
	}
	cr_assert_eq(r2.n_segments, r1.n_segments);
	for (uint32_t i = 0; i < r1.n_segments; i++) {
		const struct segment *a = &r1.segments[i], *c = &r2.segments[i];
		cr_assert(a->first_step == c->first_step && a->n_nodes == c->n_nodes && a->bytes == c->bytes &&
			  a->flops == c->flops && a->n_from == c->n_from && a->from_bytes == c->from_bytes);
		cr_assert_str_eq(a->before, c->before);
		for (uint32_t k = 0; k < a->n_from; k++)
			cr_assert_str_eq(a->from[k]->name, c->from[k]->name);
	}
	graph_free(g1);
	graph_free(g2);
}

Test(plan, the_report_without_the_rewrite_is_the_rewritten_graphs)
{
	const char *strategies[] = {"none", "speed", "memory", "auto"};
	char chain[512]; /* unnamed nodes, which node_desc numbers by position */
	write_text(chain, sizeof chain, "unnamed_chain.yaml",
		   "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, 16]}]\n"
		   "params:\n  - {name: w, dtype: float32, shape: [16, 16], init: zeros}\nnodes:\n"
		   "  - {op: MatMul, inputs: [x, w], outputs: [m0]}\n  - {op: Tanh, inputs: [m0], outputs: [t0]}\n"
		   "  - {op: MatMul, inputs: [t0, w], outputs: [m1]}\n  - {op: Tanh, inputs: [m1], outputs: [t1]}\n"
		   "  - {op: MatMul, inputs: [t1, w], outputs: [m2]}\n  - {op: Tanh, inputs: [m2], outputs: [t2]}\n"
		   "  - {op: ReduceSum, inputs: [t2], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n");
	for (const char *const *m = testdata_models; *m; m++)
		for (size_t s = 0; s < sizeof strategies / sizeof *strategies; s++) {
			char path[512];
			model_path(path, sizeof path, *m);
			report_is_rewrite(path, strategies[s]);
		}
	for (size_t s = 0; s < sizeof strategies / sizeof *strategies; s++)
		report_is_rewrite(chain, strategies[s]);
	/* checkpoints of the backward pass: values recomputed twice, clones of clones */
	report_is_rewrite(chain, "list:t1@2");
	report_is_rewrite(chain, "list:t0@2,m2@3");
}

/* The report's FLOPs (taken from the schedule) are the rewritten graph's, summed node by node. */
Test(plan, reported_flops_are_the_rewritten_graphs)
{
	for (const char *const *m = testdata_models; *m; m++) {
		struct plan_report r;
		struct graph *g = planned_ok(*m, "memory", 2, &r);
		struct exec_binding b = {"batch", 2};
		struct gd_err e = {0};
		struct exec_opts so = {.shapes_only = 1, .dims = &b, .n_dims = 1};
		struct exec *x = exec_run(g, &so, NULL, &e);
		cr_assert(x, "%s: %s", *m, e.msg);
		uint64_t fwd = 0, rc = 0;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			if (n->tags & TAG_RECOMPUTE)
				rc += node_flops(n, x);
			else if (node_is_forward(n))
				fwd += node_flops(n, x);
		}
		cr_assert_eq(r.forward_flops, fwd, "%s", *m);
		cr_assert_eq(r.recompute_flops, rc, "%s", *m);
		cr_assert_gt(rc, 0, "%s: something is recomputed", *m);
		exec_free(x);
		graph_free(g);
	}
}

/* ---- checkpointing: every strategy gives the plain gradients bitwise, and the measured peak of the
 * rewritten graph is the one predicted ---- */
static struct exec *run_train(struct graph *g, struct exec_stats *st)
{
	struct exec_binding b = {"batch", 3};
	struct exec_opts ro = {.random_inputs = 1, .seed = 5, .dims = &b, .n_dims = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &ro, st, &e);
	cr_assert(x, "%s", e.msg);
	return x;
}

static void strategy_is_exact_as(const char *path, const char *strategy, enum ctrl_mode mode)
{
	struct graph *plain = load_ok(path), *ck = load_ok(path);
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(autodiff(plain, &ao, &res, &e), 0, "%s", e.msg);
	struct exec_binding b = {"batch", 3};
	struct plan_opts po = {.dims = &b, .n_dims = 1};
	cr_assert_eq(ckpt_parse(strategy, &po.ckpt), 0);
	struct plan_report r;
	cr_assert_eq(plan_memory(ck, &po, &r, &e), 0, "%s %s: %s", path, strategy, e.msg);
	uint32_t n_data;
	cr_assert_eq(ctrl_encode(ck, mode, &n_data, &e), 0, "%s %s: %s", path, strategy, e.msg);
	cr_assert(mode != CTRL_DATA || n_data > 0, "%s %s: control edges became data edges", path, strategy);
	cr_assert_eq(graph_check(ck, &e), 0, "%s %s: %s", path, strategy, e.msg);
	struct exec_stats s1, s2;
	struct exec *x1 = run_train(plain, &s1), *x2 = run_train(ck, &s2);
	if (mode == CTRL_METADATA) /* data edges add nodes the plan did not weigh */
		cr_expect_eq(s2.peak_bytes, r.peak_after, "%s %s: measured %zu, predicted %llu", path, strategy,
			     s2.peak_bytes, (unsigned long long)r.peak_after);
	cr_expect_leq(r.peak_after, r.peak_before, "%s %s", path, strategy);
	size_t n = 0;
	for (uint32_t i = 0; i < plain->n_outputs; i++) {
		const struct value *v = plain->outputs[i], *w = strmap_get(&ck->names, v->name);
		cr_assert(w, "%s %s: output '%s' is gone", path, strategy, v->name);
		const struct rtensor *a = exec_value(x1, v), *c = exec_value(x2, w);
		cr_assert(a->data && c->data && a->nbytes == c->nbytes);
		cr_expect(!memcmp(a->data, c->data, a->nbytes), "%s %s: '%s' differs", path, strategy, v->name);
		n++;
	}
	cr_assert_gt(n, 1);
	exec_free(x1);
	exec_free(x2);
	graph_free(plain);
	graph_free(ck);
}

static void strategy_is_exact(const char *path, const char *strategy)
{
	strategy_is_exact_as(path, strategy, CTRL_METADATA);
}

Test(checkpoint, every_strategy_gives_the_plain_gradients_bitwise)
{
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512];
		model_path(path, sizeof path, *m);
		strategy_is_exact(path, "speed");
		strategy_is_exact(path, "memory");
		strategy_is_exact(path, "auto"); /* budget 0: the lowest-peak plan, the most recompute */
		strategy_is_exact_as(path, "memory", CTRL_DATA); /* --control-deps data keeps them too */
	}
	strategy_is_exact(TESTDATA "/unet.onnx", "list:/Concat_output_0");
	/* checkpoints of the backward pass (levels 2 and 3): segments recomputed twice and three times */
	strategy_is_exact(TESTDATA "/tanh_chain.onnx", "list:/Tanh_5_output_0,/Tanh_2_output_0@2,/Tanh_8_output_0@2");
	strategy_is_exact(TESTDATA "/tanh_chain.onnx", "list:/Tanh_2_output_0@2,/Tanh_5_output_0@3,/Tanh_8_output_0@2");
	strategy_is_exact(TESTDATA "/unet.onnx", "list:/Concat_output_0@2");
	strategy_is_exact_as(TESTDATA "/tanh_chain.onnx", "list:/Tanh_2_output_0@2,/Tanh_5_output_0@3", CTRL_DATA);
}

Test(checkpoint, dropout_recomputes_the_same_mask)
{
	char path[512];
	write_text(path, sizeof path, "dropout.yaml",
		   "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, 16]}]\n"
		   "params:\n  - {name: w, dtype: float32, shape: [16, 16], init: {dist: normal, std: 0.5, seed: 1}}\n"
		   "  - {name: ratio, dtype: float32, shape: [], data: [0.5]}\n"
		   "  - {name: train, dtype: bool, shape: [], data: [true]}\n"
		   "nodes:\n  - {op: MatMul, inputs: [x, w], outputs: [h]}\n"
		   "  - {name: drop, op: Dropout, inputs: [h, ratio, train], outputs: [d, mask]}\n"
		   "  - {op: Tanh, inputs: [d], outputs: [t]}\n  - {op: MatMul, inputs: [t, w], outputs: [y]}\n"
		   "  - {op: ReduceSum, inputs: [y], outputs: [loss], attrs: {keepdims: 0}}\n"
		   "outputs: [{name: loss}]\n");
	strategy_is_exact(path, "list:h");
	strategy_is_exact(path, "speed");
	strategy_is_exact(path, "list:d@2"); /* the mask is drawn a third time, by Dropout_recompute2 */
	/* an unnamed Dropout: its clone must draw what it drew, though neither has a name to key on */
	write_text(path, sizeof path, "dropout_unnamed.yaml",
		   "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, 16]}]\n"
		   "params:\n  - {name: w, dtype: float32, shape: [16, 16], init: {dist: normal, std: 0.5, seed: 1}}\n"
		   "  - {name: ratio, dtype: float32, shape: [], data: [0.5]}\n"
		   "  - {name: train, dtype: bool, shape: [], data: [true]}\n"
		   "nodes:\n  - {op: MatMul, inputs: [x, w], outputs: [h]}\n"
		   "  - {op: Dropout, inputs: [h, ratio, train], outputs: [d, mask]}\n"
		   "  - {op: Tanh, inputs: [d], outputs: [t]}\n  - {op: MatMul, inputs: [t, w], outputs: [y]}\n"
		   "  - {op: ReduceSum, inputs: [y], outputs: [loss], attrs: {keepdims: 0}}\n"
		   "outputs: [{name: loss}]\n");
	strategy_is_exact(path, "list:h");
}

/* The memory strategy on MatMul+Tanh chains of 16, 64 and 256 layers: the activation bytes at the
 * peak grow like sqrt(N) (a least-squares slope of log bytes on log N near 1/2), where keeping
 * everything grows like N. */
static double chain_activations(int layers, const char *strategy)
{
	char path[512];
	snprintf(path, sizeof path, "%s/chain%d.yaml", tmpdir(), layers);
	FILE *f = fopen(path, "w");
	fprintf(f, "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [256, 16]}]\nparams:\n");
	for (int i = 0; i < layers; i++)
		fprintf(f, "  - {name: w%d, dtype: float32, shape: [16, 16], init: zeros}\n", i);
	fprintf(f, "nodes:\n");
	for (int i = 0; i < layers; i++) {
		char prev[16];
		snprintf(prev, sizeof prev, i ? "t%d" : "x", i - 1);
		fprintf(f, "  - {op: MatMul, inputs: [%s, w%d], outputs: [m%d]}\n  - {op: Tanh, inputs: [m%d], outputs: [t%d]}\n",
			prev, i, i, i, i);
	}
	fprintf(f, "  - {op: ReduceSum, inputs: [t%d], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n",
		layers - 1);
	fclose(f);
	struct graph *g = load_ok(path);
	struct plan_opts po = {0};
	cr_assert_eq(ckpt_parse(strategy, &po.ckpt), 0);
	struct plan_report r;
	struct gd_err e = {0};
	cr_assert_eq(plan_memory(g, &po, &r, &e), 0, "%s", e.msg);
	double a = (double)r.at_peak.activations;
	graph_free(g);
	return a;
}

static double slope(const char *strategy)
{
	const int n[] = {16, 64, 256};
	double sx = 0, sy = 0, sxx = 0, sxy = 0;
	for (int i = 0; i < 3; i++) {
		double x = log((double)n[i]), y = log(chain_activations(n[i], strategy));
		sx += x, sy += y, sxx += x * x, sxy += x * y;
	}
	return (3 * sxy - sx * sy) / (3 * sxx - sx * sx);
}

Test(checkpoint, memory_peak_grows_like_sqrt_n)
{
	double none = slope("none"), memory = slope("memory");
	cr_expect(none > 0.9 && none < 1.1, "none: activation bytes at the peak ~ N^%.3f, expected about N^1", none);
	cr_expect(memory > 0.4 && memory < 0.6, "memory: activation bytes at the peak ~ N^%.3f, expected about N^0.5", memory);
}

/* ---- recast: under --precision fp16/bf16 a weight's 16-bit Cast (a value made from initializers
 * alone) is recomputed right before its backward reader in every strategy, `none` included, rather
 * than kept from the forward pass: the gradients are the same bits, plan equals run, and the peak
 * drops by the copies no longer held ---- */
#define RECAST_D 256
static const char recast_model[] =
	"graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, 256]}]\nparams:\n"
	"  - {name: w1, dtype: float32, shape: [256, 256], init: {dist: normal, std: 0.05, seed: 1}}\n"
	"  - {name: w2, dtype: float32, shape: [256, 256], init: {dist: normal, std: 0.05, seed: 2}}\n"
	"  - {name: w3, dtype: float32, shape: [256, 256], init: {dist: normal, std: 0.05, seed: 3}}\n"
	"nodes:\n  - {op: MatMul, inputs: [x, w1], outputs: [h1]}\n  - {op: Tanh, inputs: [h1], outputs: [t1]}\n"
	"  - {op: MatMul, inputs: [t1, w2], outputs: [h2]}\n  - {op: Tanh, inputs: [h2], outputs: [t2]}\n"
	"  - {op: MatMul, inputs: [t2, w3], outputs: [h3]}\n"
	"  - {op: ReduceSum, inputs: [h3], outputs: [loss], attrs: {keepdims: 0}}\n"
	"outputs: [{name: loss}]\n";

static struct graph *recast_load(const char *path, int dtype)
{
	struct graph *g = load_ok(path);
	struct autocast_opts ac = {.dtype = dtype};
	size_t low;
	struct gd_err e = {0};
	cr_assert_eq(autocast(g, &ac, &low, &e), 0, "%s", e.msg);
	cr_assert_gt(low, 0, "the MatMuls compute in 16 bits");
	return g;
}

Test(checkpoint, a_weights_16_bit_copy_is_recast_not_kept)
{
	static const int dts[] = {DT_FLOAT16, DT_BFLOAT16};
	static const char *const strategies[] = {"none", "speed", "memory"};
	char path[512];
	write_text(path, sizeof path, "recast.yaml", recast_model);
	for (int d = 0; d < 2; d++)
		for (int s = 0; s < 3; s++) {
			const char *what = strategies[s];
			struct graph *plain = recast_load(path, dts[d]), *ck = recast_load(path, dts[d]);
			struct autodiff_opts ao = {0};
			struct autodiff_result res;
			struct gd_err e = {0};
			cr_assert_eq(autodiff(plain, &ao, &res, &e), 0, "%s", e.msg);
			cr_assert_eq(graph_toposort(plain, &e), 0);
			struct exec_binding b = {"batch", 3};
			struct plan_opts po = {.dims = &b, .n_dims = 1};
			cr_assert_eq(ckpt_parse(what, &po.ckpt), 0);
			struct plan_report r;
			cr_assert_eq(plan_memory(ck, &po, &r, &e), 0, "%s: %s", what, e.msg);
			cr_assert_eq(graph_check(ck, &e), 0, "%s: %s", what, e.msg);
			/* (a) no backward node reads a forward Cast of a parameter: it reads a recompute clone */
			uint32_t clones = 0;
			for (uint32_t i = 0; i < ck->n_nodes; i++) {
				const struct node *n = ck->nodes[i];
				for (uint32_t k = 0; (n->tags & TAG_BACKWARD) && k < n->n_in; k++) {
					const struct node *p = n->in[k] ? n->in[k]->producer : NULL;
					if (!p || p->op != OP_CAST || !p->in[0]->init)
						continue;
					cr_expect(p->tags & TAG_RECOMPUTE, "%s: '%s' reads the forward cast '%s'", what,
						  node_base_name(n), n->in[k]->name);
					clones += !!(p->tags & TAG_RECOMPUTE);
				}
			}
			cr_expect_geq(clones, 2, "%s: dX of layers 2 and 3 read recast copies of w2 and w3", what);
			/* (b) plan equals run; (c) the same bits */
			struct exec_stats s1, s2;
			struct exec *x1 = run_train(plain, &s1), *x2 = run_train(ck, &s2);
			cr_expect_eq(s2.peak_bytes, r.peak_after, "%s: measured %zu, predicted %llu", what, s2.peak_bytes,
				     (unsigned long long)r.peak_after);
			for (uint32_t i = 0; i < plain->n_outputs; i++) {
				const struct value *v = plain->outputs[i], *w = strmap_get(&ck->names, v->name);
				cr_assert(w, "%s: output '%s' is gone", what, v->name);
				const struct rtensor *a = exec_value(x1, v), *c = exec_value(x2, w);
				cr_assert(a->data && c->data && a->nbytes == c->nbytes);
				cr_expect(!memcmp(a->data, c->data, a->nbytes), "%s: '%s' differs", what, v->name);
			}
			/* (d) before, the 16-bit copies of w2 and w3 lived from the forward pass into the
			 * backward pass (w1's dies in the forward pass: x takes no gradient); now none does,
			 * so the bytes live when the forward pass ends (its last node: clones come after it)
			 * drop by both; the recompute is one cast of w2 and of w3, and of x (an input,
			 * [3, 256], read by w1's gradient; Tanh computes in 16 bits), an element each */
			if (s == 0) {
				uint32_t last = 0;
				for (uint32_t i = 0; i < ck->n_nodes; i++)
					if (node_is_forward(ck->nodes[i]))
						last = i;
				uint64_t copies = 2 * (uint64_t)RECAST_D * RECAST_D * 2;
				cr_expect_geq(r.live_before[last], r.live_after[last] + copies, "%s: %llu live before, %llu after",
					      what, (unsigned long long)r.live_before[last], (unsigned long long)r.live_after[last]);
				cr_expect_eq(r.recompute_flops, 2 * (uint64_t)RECAST_D * RECAST_D + 3 * RECAST_D,
					     "%s: %llu", what, (unsigned long long)r.recompute_flops);
			}
			exec_free(x1);
			exec_free(x2);
			graph_free(plain);
			graph_free(ck);
		}
}

/* Under `none`, the 16-bit Cast of a float32 Softmax's output that the backward Softmax reads
 * itself (F.softmax(scores.float()).type_as(q)) is recast from it rather than kept beside it. */
Test(checkpoint, a_cast_of_a_value_the_backward_pass_reads_is_recast)
{
	char path[512];
	write_text(path, sizeof path, "recast_softmax.yaml",
		   "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, 16]}]\nparams:\n"
		   "  - {name: w, dtype: float32, shape: [16, 16], init: {dist: normal, std: 0.5, seed: 1}}\n"
		   "  - {name: v, dtype: float32, shape: [16, 16], init: {dist: normal, std: 0.5, seed: 2}}\n"
		   "nodes:\n  - {op: MatMul, inputs: [x, w], outputs: [h]}\n  - {op: Softmax, inputs: [h], outputs: [s]}\n"
		   "  - {op: Cast, inputs: [v], outputs: [v16], attrs: {to: 10}}\n"
		   "  - {op: Cast, inputs: [s], outputs: [c], attrs: {to: 10}}\n"
		   "  - {op: MatMul, inputs: [c, v16], outputs: [y]}\n  - {op: Cast, inputs: [y], outputs: [y32], attrs: {to: 1}}\n"
		   "  - {op: ReduceSum, inputs: [y32], outputs: [loss], attrs: {keepdims: 0}}\n"
		   "outputs: [{name: loss}]\n");
	strategy_is_exact(path, "none"); /* the same bits, and plan equals run */
	struct graph *g = load_ok(path);
	struct exec_binding b = {"batch", 3};
	struct plan_opts po = {.dims = &b, .n_dims = 1};
	cr_assert_eq(ckpt_parse("none", &po.ckpt), 0);
	struct plan_report r;
	struct gd_err e = {0};
	cr_assert_eq(plan_memory(g, &po, &r, &e), 0, "%s", e.msg);
	int recast = 0, kept = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		for (uint32_t k = 0; (g->nodes[i]->tags & TAG_BACKWARD) && k < g->nodes[i]->n_in; k++) {
			const struct value *u = g->nodes[i]->in[k];
			recast |= u && u->producer && u->producer->op == OP_CAST && (u->producer->tags & TAG_RECOMPUTE);
			kept |= u && !strcmp(u->name, "c");
			cr_expect(!u || strcmp(u->name, "c"), "'%s' reads the kept cast", node_base_name(g->nodes[i]));
		}
	cr_expect(recast && !kept, "v's gradient reads a recast of s");
	/* the recompute: one cast of s ([3, 16]) and one of v ([16, 16], fixed), an element each */
	cr_expect_eq(r.recompute_flops, 3 * 16 + 16 * 16, "%llu", (unsigned long long)r.recompute_flops);
	graph_free(g);
}
