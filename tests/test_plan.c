/* test_plan.c - the memory model: the simulator's predicted peak equals the executor's measured
 * peak, to the byte; sizes as people write them. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "helpers.h"
#include "plan/memsim.h"
#include "util/size.h"

#include <criterion/criterion.h>
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

Test(memsim, predicted_peak_is_measured_peak, .timeout = 300)
{
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512], what[600];
		snprintf(path, sizeof path, "%s/%s", TESTDATA, *m);
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

Test(memsim, a_chain_by_hand)
{
	/* x (8 floats = 32 B) -> Relu -> Neg -> Tanh -> y: the input, a producer and its consumer's
	 * output are live at once: 96 B at the Neg step (index 1) and at the Tanh step */
	const char *text = "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [8]}]\n"
			   "nodes:\n  - {op: Relu, inputs: [x], outputs: [a]}\n  - {op: Neg, inputs: [a], outputs: [b]}\n"
			   "  - {op: Tanh, inputs: [b], outputs: [y]}\noutputs: [{name: y}]\n";
	char path[256];
	snprintf(path, sizeof path, "%s/chain.yaml", tmpdir());
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	struct graph *g = load_ok(path);
	struct exec_opts so = {.shapes_only = 1};
	struct gd_err e = {0};
	struct exec *shapes = exec_run(g, &so, NULL, &e);
	struct mem_result r;
	cr_assert_eq(memsim(g, shapes, &r, &e), 0);
	cr_assert_eq(r.peak, 96);
	cr_assert_eq(r.peak_node, 1);
	cr_assert_eq(r.live[0], 64);
	cr_assert_eq(r.live[2], 96);
	exec_free(shapes);
	memsim_free(&r);
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
