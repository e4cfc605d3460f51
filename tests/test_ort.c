/* test_ort.c - onnxruntime runs graphdiet's training graphs and gets graphdiet's gradients.
 *
 * Built only when onnxruntime-node is installed (see tests/CMakeLists.txt); .ci/run installs it and
 * fails if this test did not run. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "helpers.h"
#include "opcases.h"
#include "io/format.h"
#include "io/npy.h"
#include "plan/strategy.h"
#include "rewrite/ctrl.h"
#include "rewrite/recompute.h"
#include "util/strmap.h"
#include "util/xalloc.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends NAME=PATH for each of g's inputs PyTorch saved for `model` to argv (argc entries), with
 * the strings in args; ins and names get the inputs themselves. Returns how many inputs. */
static size_t ref_args(const struct graph *g, const char *model, char **argv, int argc, char args[][1400],
		       struct rtensor *ins, const char **names)
{
	char path[1100];
	size_t n = ref_inputs(g, model, ins, names);
	for (size_t i = 0; i < n; i++) {
		snprintf(args[i], sizeof args[i], "%s=%s", names[i], ref_path(path, sizeof path, model, names[i]));
		argv[argc++] = args[i];
	}
	argv[argc] = NULL;
	return n;
}

/* Runs `file` (g, written) in onnxruntime and in graphdiet's executor on PyTorch's inputs for
 * `model`, and expects every output of g to agree within rtol of its largest magnitude plus atol.
 * Returns how many outputs were gradients (VALUE_GRAD). */
static size_t matches_onnxruntime(struct graph *g, const char *model, const char *file, double rtol, double atol)
{
	char path[1100], outdir[512], args[8][1400];
	snprintf(outdir, sizeof outdir, "%s/ort_out_%s", tmpdir(), model);
	char *argv[16] = {GD_NODE, GD_SOURCE_DIR "/tests/ort/run_ort.cjs", (char *)file, outdir}, init[1100];
	struct rtensor ins[8];
	const char *names[8];
	int argc = 4;
	if (g->model->n_ti && g->model->ti[0].n_init_bind) { /* optimizer state: its initialization graph */
		snprintf(init, sizeof init, "--init=%s.init.onnx", file);
		python_ok("import sys, onnx\n"
			  "m = onnx.load(sys.argv[1])\n"
			  "ti = m.training_info[0]\n"
			  "g = onnx.GraphProto()\n"
			  "g.CopyFrom(ti.initialization)\n"
			  "del g.output[:]\n"
			  "t = {o.name: o.type for o in ti.initialization.output}\n"
			  "for b in ti.initialization_binding:\n"
			  "    g.node.append(onnx.helper.make_node('Identity', [b.value], [b.key]))\n"
			  "    g.output.append(onnx.helper.make_value_info(b.key, t[b.value]))\n"
			  "onnx.save(onnx.helper.make_model(g, opset_imports=m.opset_import), sys.argv[1] + '.init.onnx')\n",
			  file, "the initialization graph");
		argv[argc++] = init;
	}
	size_t n = ref_args(g, model, argv, argc, args, ins, names);
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_assert_eq(r.status, 0, "%s: onnxruntime failed: %s%s", model, r.out, r.err);
	run_free(&r);
	struct gd_err e = {0};
	struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = n};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	size_t grads = 0;
	for (uint32_t k = 0; k < g->n_outputs; k++) {
		const struct value *v = g->outputs[k];
		struct rtensor theirs;
		snprintf(path, sizeof path, "%s/%s.npy", outdir, v->name);
		cr_assert(npy_load(path, &theirs), "%s: onnxruntime wrote no %s", model, v->name);
		const struct rtensor *ours = exec_value(x, v);
		cr_assert_eq(ours->numel, theirs.numel);
		double scale = 0, worst = 0;
		for (int64_t i = 0; i < ours->numel; i++)
			scale = fmax(scale, fabs(rt_get(ours, i)));
		for (int64_t i = 0; i < ours->numel; i++)
			worst = fmax(worst, fabs(rt_get(ours, i) - rt_get(&theirs, i)));
		cr_expect(worst <= rtol * scale + atol, "%s: %s: onnxruntime and graphdiet differ by %g (scale %g)", model,
			  v->name, worst, scale);
		free(theirs.data);
		grads += (v->flags & VALUE_GRAD) != 0;
	}
	exec_free(x);
	for (size_t i = 0; i < n; i++)
		free(ins[i].data);
	return grads;
}

/* Each testdata model's training graph, plain and with `speed` checkpointing (recompute clones and
 * control dependencies), runs in onnxruntime on PyTorch's inputs and gives graphdiet's outputs. */
static void runs_in_onnxruntime(const char *strategy, enum ctrl_mode mode)
{
	setenv("NODE_PATH", GD_ORT_DIR, 1);
	for (const char *const *m = testdata_models; *m; m++) {
		char path[1100], train[512];
		model_path(path, sizeof path, *m);
		snprintf(train, sizeof train, "%s/%s_train.onnx", tmpdir(), *m);
		struct graph *g = load_ok(path);
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		struct gd_err e = {0};
		struct save_opts so = SAVE_OPTS_DEFAULT;
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
		cr_assert_eq(graph_toposort(g, &e), 0);
		struct ckpt c;
		uint8_t *keep = NULL;
		struct recompute_stats st;
		cr_assert_eq(ckpt_parse(strategy, &c), 0);
		cr_assert_eq(ckpt_choose(g, NULL, NULL, &c, &keep, NULL, &e), 0, "%s", e.msg);
		if (c.kind != CKPT_NONE)
			cr_assert_eq(recompute_rewrite(g, keep, NULL, &st, &e), 0, "%s", e.msg);
		xfree(keep);
		uint32_t n_data;
		cr_assert_eq(ctrl_encode(g, mode, &n_data, &e), 0, "%s", e.msg);
		cr_assert_eq(model_save(g, train, FMT_ONNX, &so, &e), 0, "%s", e.msg);
		cr_assert_eq(matches_onnxruntime(g, *m, train, 1e-5, 1e-7), res.n_grads);
		graph_free(g);
	}
}

Test(ort, training_graphs_run_in_onnxruntime)
{
	runs_in_onnxruntime("none", CTRL_METADATA);
}

Test(ort, checkpointed_training_graphs_run_in_onnxruntime)
{
	runs_in_onnxruntime("speed", CTRL_METADATA);
}

/* --control-deps data: the value-preserving data edges run there too, with the same outputs */
Test(ort, data_control_edges_run_in_onnxruntime)
{
	runs_in_onnxruntime("speed", CTRL_DATA);
}

/* How often onnxruntime, at its default options, runs a node of `file` (g) before one that precedes
 * it in g's order (nodes it made itself, by fusing or inlining, are not g's and are skipped, and so
 * are views, which --control-deps data leaves free). */
static int descents_in_onnxruntime(const struct graph *g, const char *model, const char *file)
{
	char args[8][1400];
	char *argv[16] = {GD_NODE, GD_SOURCE_DIR "/tests/ort/order_ort.cjs", (char *)file};
	struct rtensor ins[8];
	const char *names[8];
	size_t n = ref_args(g, model, argv, 3, args, ins, names);
	for (size_t i = 0; i < n; i++)
		free(ins[i].data);
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_assert_eq(r.status, 0, "%s: onnxruntime failed: %s", model, r.err);
	struct strmap pos = {0};
	for (uint32_t i = 0; i < g->n_nodes; i++) { /* views (Reshape and its kind, Shape) run when they like */
		const struct node *nd = g->nodes[i];
		int view = nd->op == OP_SHAPE || nd->op == OP_RESHAPE || nd->op == OP_FLATTEN || nd->op == OP_SQUEEZE ||
			   nd->op == OP_UNSQUEEZE || nd->op == OP_IDENTITY;
		if (nd->name && !view)
			cr_assert_eq(strmap_put(&pos, nd->name, (void *)(uintptr_t)(i + 1)), 0);
	}
	int descents = 0, ran = 0;
	uintptr_t last = 0;
	for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
		uintptr_t at = (uintptr_t)strmap_get(&pos, line);
		descents += at && at < last;
		ran += at != 0;
		last = at ? at : last;
	}
	cr_assert_gt(ran, (int)g->n_nodes / 3, "%s: onnxruntime ran %d of the graph's nodes", model, ran);
	strmap_free(&pos);
	run_free(&r);
	return descents;
}

/* --control-deps data pins the whole schedule: onnxruntime runs every node in graphdiet's order,
 * recompute clones just before the gradients that need them and every parameter gradient where the
 * plan put it. With the edges in metadata only, it runs in its own order (a reverse depth-first walk
 * from the graph's ends), which is why the mode exists. */
Test(ort, data_control_edges_pin_the_schedule)
{
	setenv("NODE_PATH", GD_ORT_DIR, 1);
	int unpinned = 0;
	for (const char *const *m = testdata_models; *m; m++) {
		char path[1100], train[512];
		model_path(path, sizeof path, *m);
		for (int data = 0; data < 2; data++) {
			snprintf(train, sizeof train, "%s/%s_order_%d.onnx", tmpdir(), *m, data);
			char *argv[] = {GD_BINARY, "train", path, "--checkpoint", "speed", "--control-deps",
					data ? "data" : "metadata", "-o", train, NULL};
			struct run_result r = run_cmd(argv, NULL, 0);
			cr_assert_eq(r.status, 0, "%s: %s", *m, r.err);
			run_free(&r);
			struct graph *g = load_ok(train);
			int d = descents_in_onnxruntime(g, *m, train);
			if (data)
				cr_expect_eq(d, 0, "%s: onnxruntime ran %d nodes before nodes scheduled ahead of them", *m, d);
			else
				unpinned += d;
			graph_free(g);
		}
	}
	cr_expect_gt(unpinned, 0, "without the edges onnxruntime keeps graphdiet's order anyway");
}

/* A whole training step (dynamic loss scaling, the finite check, clipping, the optimizer, the
 * state's next values) runs in onnxruntime too, with graphdiet's numbers. Adam runs with eps 1e-3:
 * at its default 1e-8, a parameter whose true gradient is 0 (a convolution's bias before
 * BatchNorm) gets a gradient of rounding noise near 1e-9, and lr * g / (|g| + 1e-8) turns that
 * noise into a third of lr, different in every runtime; that is Adam's conditioning, not the graph's. */
static void steps_run_in_onnxruntime(const char *optimizer)
{
	setenv("NODE_PATH", GD_ORT_DIR, 1);
	for (const char *const *m = testdata_models; *m; m++) {
		char path[1100], step[512];
		model_path(path, sizeof path, *m);
		snprintf(step, sizeof step, "%s/%s_step.onnx", tmpdir(), *m);
		char *train[] = {GD_BINARY, "train", path, "--loss-scale", "dynamic", "--clip-grad-norm", "1",
				 "--optimizer", (char *)optimizer, "-o", step, NULL};
		struct run_result r = run_cmd(train, NULL, 0);
		cr_assert_eq(r.status, 0, "%s: %s", *m, r.err);
		run_free(&r);
		struct graph *g = load_ok(step);
		cr_expect_eq(matches_onnxruntime(g, *m, step, 1e-5, 1e-7), 0, "%s: the step outputs no gradient", *m);
		cr_expect_gt(g->n_outputs, 4, "%s: the step's state", *m);
		graph_free(g);
	}
}

Test(ort, training_steps_run_in_onnxruntime)
{
	steps_run_in_onnxruntime("adam:eps=1e-3");
	steps_run_in_onnxruntime("sgd:lr=0.1,momentum=0.9");
}

/* fp16 training graphs (16-bit casts, BatchNormalization on a 16-bit X with float32 statistics,
 * MaxPool's gradient summed in float32) run there too. The runtimes round 16-bit results at
 * different points (onnxruntime computes some fp16 kernels in fp16), so they agree to float16's
 * precision: 1% of each output's largest magnitude, plus 1e-4 for a gradient that is rounding
 * noise about 0 (a convolution's bias before BatchNorm). Measured: at most 0.23%. */
Test(ort, fp16_training_graphs_run_in_onnxruntime)
{
	setenv("NODE_PATH", GD_ORT_DIR, 1);
	for (const char *const *m = testdata_models; *m; m++) {
		char path[1100], train[512];
		model_path(path, sizeof path, *m);
		snprintf(train, sizeof train, "%s/%s_fp16.onnx", tmpdir(), *m);
		char *argv[] = {GD_BINARY, "train", path, "--precision", "fp16", "-o", train, NULL};
		struct run_result r = run_cmd(argv, NULL, 0);
		cr_assert_eq(r.status, 0, "%s: %s", *m, r.err);
		run_free(&r);
		struct graph *g = load_ok(train);
		matches_onnxruntime(g, *m, train, 1e-2, 1e-4);
		cr_expect_gt(g->n_outputs, 1, "%s: the loss and the gradients compared", *m);
		graph_free(g);
	}
}

/* Every op case's training graph (tests/opcases.c, in float32) runs in onnxruntime with graphdiet's
 * numbers: each gradient rule's standard ONNX ops are ones a stock runtime executes as graphdiet
 * does. The inputs are O(1), so 1e-5 absolute: a gradient that cancels down to 5e-4 (BatchNorm's)
 * differs by that much between float32 sums (onnxruntime's) and double ones (graphdiet's). Dropout
 * is left to test_zoo, which gives onnxruntime graphdiet's masks; onnxruntime's Conv refuses SAME
 * padding with dilations in the forward op itself. */
Test(ort, every_op_cases_training_graph_runs_in_onnxruntime)
{
	setenv("NODE_PATH", GD_ORT_DIR, 1);
	size_t ran = 0;
	for (size_t i = 0; i < n_op_cases; i++) {
		const struct gcase *c = &op_cases[i];
		if (strstr(c->nodes, "op: Dropout") || (strstr(c->nodes, "auto_pad: \"SAME") && strstr(c->nodes, "dilations")) ||
		    strstr(c->name, "LRN even size")) /* onnxruntime's LRN refuses an even size (lrn.h) */
			continue;
		/* onnxruntime runs no recurrent node of layout 1 ("Batchwise recurrent operations (layout
		 * == 1) are not supported", rnn.h, lstm_base.h, deep_cpu_gru.h) */
		if (strstr(c->nodes, "layout: 1"))
			continue;
		if (strstr(c->nodes, "domain: graphdiet")) /* graphdiet's own ops (AllReduce) */
			continue;
		/* forms of other opsets than the cases' 17 (Upsample and Pad's attributes older, Resize's
		 * axes newer), which onnxruntime refuses there; and MaxUnpool to a larger output_shape,
		 * where onnxruntime puts an element at its flat index in the larger tensor and ONNX's
		 * reference (its backend test maxunpool_export_with_output_shape, which graphdiet
		 * follows) keeps its coordinates */
		if (strstr(c->nodes, "op: Upsample") || strstr(c->nodes, "op: Pad, inputs: [x],") ||
		    (strstr(c->nodes, "op: Resize") && strstr(c->nodes, "axes:")) || strstr(c->nodes, "op: MaxUnpool, inputs: [x, i, s]"))
			continue;
		struct graph *g = op_case_graph(c, "float32");
		struct autodiff_opts ao = {0};
		struct autodiff_result res;
		struct gd_err e = {0};
		struct save_opts so = SAVE_OPTS_DEFAULT;
		char file[600];
		cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", c->name, e.msg);
		snprintf(file, sizeof file, "%s/case%zu.onnx", tmpdir(), i);
		cr_assert_eq(model_save(g, file, FMT_ONNX, &so, &e), 0, "%s: %s", c->name, e.msg);
		cr_expect_eq(matches_onnxruntime(g, c->name, file, 1e-4, 1e-5), res.n_grads, "%s", c->name);
		graph_free(g);
		ran++;
	}
	cr_expect_gt(ran, 100);
}

/* train --diet's initialization graph, the INT16 storage quantized from the float32 weights in
 * standard ops (Cast, Div, Round, Clip, Equal, Where), runs in onnxruntime and makes NumPy's values
 * to the bit (the INT16 outputs as int32: run_ort's .npy writer has no int16). */
Test(ort, diet_initialization_runs_in_onnxruntime)
{
	setenv("NODE_PATH", GD_ORT_DIR, 1);
	char path[1100], train[600], init[700], outdir[700];
	model_path(path, sizeof path, "transformer");
	snprintf(train, sizeof train, "%s/transformer_diet.onnx", tmpdir());
	char *argv[] = {GD_BINARY, "train", path, "--diet", "-o", train, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	snprintf(init, sizeof init, "%s.init.onnx", train);
	snprintf(outdir, sizeof outdir, "%s/ort_out_diet_init", tmpdir());
	python_ok("import sys, onnx, numpy as np\nfrom onnx import numpy_helper\n"
		  "m = onnx.load(sys.argv[1])\n"
		  "ti = m.training_info[0]\n"
		  "w = {i.name: numpy_helper.to_array(i) for i in ti.initialization.initializer}\n"
		  "g = onnx.GraphProto()\n"
		  "g.CopyFrom(ti.initialization)\n"
		  "del g.output[:]\n"
		  "n = 0\n"
		  "for b in ti.initialization_binding:\n"
		  "    if b.key + '_float' not in w:\n"
		  "        continue\n"
		  "    y = np.rint(w[b.key + '_float'].astype(np.float64) / np.float64(np.float32(10 / 32767)))\n"
		  "    np.save(sys.argv[1] + '.' + b.key + '.npy', np.where(np.isnan(y), 0, np.clip(y, -32767, 32767)).astype(np.int32))\n"
		  "    g.node.append(onnx.helper.make_node('Cast', [b.value], [b.key], to=onnx.TensorProto.INT32))\n"
		  "    g.output.append(onnx.helper.make_tensor_value_info(b.key, onnx.TensorProto.INT32, None))\n"
		  "    n += 1\n"
		  "assert n == 11, n\n"
		  "onnx.save(onnx.helper.make_model(g, opset_imports=m.opset_import), sys.argv[1] + '.init.onnx')\n",
		  train, "the initialization graph");
	char *ort[] = {GD_NODE, GD_SOURCE_DIR "/tests/ort/run_ort.cjs", init, outdir, NULL};
	r = run_cmd(ort, NULL, 0);
	cr_assert_eq(r.status, 0, "onnxruntime failed: %s%s", r.out, r.err);
	run_free(&r);
	char arg[1500];
	snprintf(arg, sizeof arg, "%s:%s", train, outdir);
	python_ok("import sys, glob, os, numpy as np\n"
		  "train, out = sys.argv[1].split(':')\n"
		  "n = 0\n"
		  "for f in glob.glob(train + '.*.npy'):\n"
		  "    key = f[len(train) + 1:-4]\n"
		  "    q, want = np.load(out + '/' + key + '.npy'), np.load(f)\n"
		  "    assert q.dtype == np.int32 and np.array_equal(q, want), key\n"
		  "    n += 1\n"
		  "assert n == 11, n\n",
		  arg, "onnxruntime's INT16 storage");
}

/* The opset 18-23 models (testdata/gen_opset23.py: GroupNormalization, RMSNormalization,
 * RotaryEmbedding, Attention, a LLaMA-style block, Gelu-20 and Mish-18):
 * onnxruntime 1.30 runs each forward model and its train --loss-fn mse training graph to graphdiet's
 * numbers (the output, the loss and every gradient). */
Test(ort, opset23_models_match_onnxruntime)
{
	static const char *const models[] = {"opset23_groupnorm", "opset23_rmsnorm", "opset23_rotary", "opset23_attention",
					     "opset23_block", "opset23_gelu", "opset23_mish", NULL};
	setenv("NODE_PATH", GD_ORT_DIR, 1);
	size_t ran = 0;
	for (const char *const *m = models; *m; m++) {
		char path[1100], train[600];
		snprintf(path, sizeof path, "%s/opset23/%s.onnx", TESTDATA, *m);
		struct graph *g = load_ok(path);
		matches_onnxruntime(g, *m, path, 1e-4, 1e-5);
		graph_free(g);
		snprintf(train, sizeof train, "%s/%s_train.onnx", tmpdir(), *m);
		char *argv[] = {GD_BINARY, "train", path, "--loss-fn", "mse", "-o", train, NULL};
		struct run_result r = run_cmd(argv, NULL, 0);
		cr_assert_eq(r.status, 0, "%s: %s", *m, r.err);
		run_free(&r);
		g = load_ok(train);
		matches_onnxruntime(g, *m, train, 1e-4, 1e-5);
		cr_expect_gt(g->n_outputs, 2, "%s: the loss and the gradients compared", *m);
		graph_free(g);
		ran++;
	}
	cr_expect_eq(ran, 7);
}
