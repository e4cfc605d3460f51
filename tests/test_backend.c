/* test_backend.c - backends (exec/backend.h) against the CPU, walking the op registry.
 *
 *  - backend/: a device backend whose memory is host memory under another name ("host-device":
 *    it computes every other op of the registry with the CPU's kernels, into the outputs the
 *    executor allocated, and leaves the rest to the CPU fallback). It proves the executor's device
 *    side on any machine: results equal the CPU's bit for bit, the device's peak is the memory
 *    model's, and the fallback's copies are counted.
 *  - cuda/: CPU-vs-CUDA parity on every op case (opcases.c: forward and backward graphs, so the
 *    gradient ops run too) in float32 at relative 1e-5, and in float16 and bfloat16 (mixed
 *    precision, rewrite/autocast.h) at 1e-2 and 4e-2 (a few units in their last place: a GPU
 *    product rounds once where the CPU's rounds once too, but sums associate differently); then
 *    every testdata model's training graph, with the device's peak equal to the planned one.
 *    Skipped, and reported as skipped (ctest: "Not Run"), where graphdiet was built without CUDA
 *    or the machine has no GPU.
 * A value passes when |b - a| <= rtol * (|a| + max|a|): relative, with the tensor's scale as the
 * floor for elements near zero. */
#include "autodiff/ad.h"
#include "exec/backend.h"
#include "exec/exec.h"
#include "helpers.h"
#include "opcases.h"
#include "ops/ops.h"
#include "plan/plan.h"
#include "rewrite/autocast.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the host-device backend ---- */

static int hd_supports_op(const struct node *n, struct rtensor *const *in)
{
	(void)in;
	return n->op % 2 == 0 && backend_cpu.supports_op(n, in);
}

static int hd_open(struct gd_err *e)
{
	(void)e;
	return 0;
}

static void *hd_alloc(size_t bytes)
{
	return malloc(bytes);
}

static int hd_copy(void *dst, const void *src, size_t bytes, enum backend_copy kind)
{
	(void)kind;
	memcpy(dst, src, bytes);
	return 0;
}

static int hd_sync(struct gd_err *e)
{
	(void)e;
	return 0;
}

static const struct backend host_device = {
	/* .name = */ "host-device",
	/* .host = */ 0,
	/* .open = */ hd_open,
	/* .supports_op = */ hd_supports_op,
	/* .alloc = */ hd_alloc,
	/* .free = */ free,
	/* .copy = */ hd_copy,
	/* .run_node = */ exec_run_cpu_into,
	/* .sync = */ hd_sync,
};

static const struct backend *hd(void)
{
	return &host_device;
}

/* ---- comparing two runs ---- */

struct cmp {
	const char *what;
	double rtol; /* 0: equal bits */
};

/* The largest magnitude of t. */
static double max_abs(const struct rtensor *t)
{
	double m = 0;
	for (int64_t k = 0; k < t->numel; k++)
		m = fmax(m, fabs(rt_get(t, k)));
	return m;
}

static void same_outputs(const struct cmp *c, struct graph *g, struct exec *a, struct exec *b)
{
	/* A float output whose every value is below float32's rounding of the largest output is rounding
	 * noise (the gradient of a bias ahead of a BatchNorm, 0 in exact arithmetic: rescnn's stem.bias_grad
	 * is 4e-9 on the CPU and 3e-9 on a GPU). It is compared at that largest output's scale. */
	double top = 0;
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		const struct rtensor *s = exec_value(a, g->outputs[i]);
		if (s->data && dtype_is_float(s->dtype))
			top = fmax(top, max_abs(s));
	}
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		const struct rtensor *s = exec_value(a, g->outputs[i]), *t = exec_value(b, g->outputs[i]);
		const char *name = g->outputs[i]->name;
		cr_assert(t->data && t->dtype == s->dtype && t->numel == s->numel, "%s: output %s: no data, or another shape",
			  c->what, name);
		if (c->rtol == 0) {
			cr_expect_eq(memcmp(s->data, t->data, s->nbytes), 0, "%s: output %s differs", c->what, name);
			continue;
		}
		double scale = max_abs(s);
		if (scale < 0x1p-23 * top)
			scale = top;
		for (int64_t k = 0; k < s->numel; k++) {
			double u = rt_get(s, k), v = rt_get(t, k);
			if (!(fabs(v - u) <= c->rtol * (fabs(u) + scale)) && !(isnan(u) && isnan(v))) {
				cr_expect(0, "%s: output %s[%lld]: cpu %.9g, other %.9g", c->what, name, (long long)k, u, v);
				break;
			}
		}
	}
}

static struct exec *run_on(struct graph *g, const struct backend *b, struct exec_stats *st)
{
	struct exec_binding batch = {"batch", 2};
	/* the CPU copies every Transpose as the device backends do, for the same bits */
	struct exec_opts o = {.random_inputs = 1, .seed = 5, .dims = &batch, .n_dims = 1, .default_dim = 2, .backend = b,
			      .copy_transposes = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, st, &e);
	cr_assert(x, "%s: %s", b ? b->name : "cpu", e.msg);
	return x;
}

/* The case's training graph (forward, autocast to dtype when 16-bit, and its gradients). */
static struct graph *case_train(const struct gcase *c, int dtype)
{
	struct graph *g = op_case_graph(c, "float32");
	struct gd_err e = {0};
	size_t n_low;
	struct autocast_opts co = {.dtype = dtype};
	if (dtype != DT_FLOAT)
		cr_assert_eq(autocast(g, &co, &n_low, &e), 0, "%s: %s", c->name, e.msg);
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s: %s", c->name, e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s: %s", c->name, e.msg);
	return g;
}

/* Every op case on b against the CPU; marks the ops the graphs ran. */
static void cases_on(const struct backend *b, int dtype, double rtol, int *seen)
{
	for (size_t i = 0; i < n_op_cases; i++) {
		const struct gcase *c = &op_cases[i];
		struct graph *g = case_train(c, dtype);
		for (uint32_t k = 0; k < g->n_nodes; k++)
			seen[g->nodes[k]->op] = 1;
		char what[256];
		snprintf(what, sizeof what, "%s (%s, %s)", c->name, b->name, dtype_name(dtype));
		struct exec *a = run_on(g, NULL, NULL), *x = run_on(g, b, NULL);
		struct cmp cm = {what, rtol};
		same_outputs(&cm, g, a, x);
		exec_free(a);
		exec_free(x);
		graph_free(g);
	}
}

/* The ops no case runs, each with why: their parity is the CPU fallback's. */
static int uncovered_ok(int op)
{
	return op == OP_IF || op == OP_LOOP           /* no kernel on any backend */
	       || op == OP_SCAN || op == OP_PT_ADAM || op == OP_PT_ADAGRAD || op == OP_PT_MOMENTUM ||
	       op == OP_PT_GRADIENT /* ctrl: control flow and the preview.training ops run on the CPU */
	       || op == OP_DIET_ADAM || op == OP_ALL_REDUCE || op == OP_REDUCE_SCATTER || op == OP_ALL_GATHER ||
	       op == OP_SHARD; /* training-step ops and collectives: CPU kernels only */
}

/* More cases for the ops that gradients do not produce (comparisons, IsNaN, ...). */
static const struct gcase extra[] = {
	{"Abs Equal Less IsNaN Not ReduceProd Shape ConstantOfShape Round",
	 "  - {name: a, dtype: float64, shape: [3, 4], init: {dist: normal, seed: %d}}\n"
	 "  - {name: b, dtype: float64, shape: [4], init: {dist: normal, seed: %d}}\n",
	 "  - {op: Abs, inputs: [a], outputs: [p]}\n"
	 "  - {op: Less, inputs: [a, b], outputs: [lt]}\n"
	 "  - {op: Equal, inputs: [p, a], outputs: [eq]}\n"
	 "  - {op: IsNaN, inputs: [a], outputs: [nan]}\n"
	 "  - {op: Not, inputs: [nan], outputs: [fin]}\n"
	 "  - {op: Where, inputs: [lt, p, b], outputs: [w1]}\n"
	 "  - {op: Where, inputs: [eq, w1, a], outputs: [w2]}\n"
	 "  - {op: Where, inputs: [fin, w2, b], outputs: [w3]}\n"
	 "  - {op: ReduceProd, inputs: [p], outputs: [rp], attrs: {axes: [1]}}\n"
	 "  - {op: Shape, inputs: [a], outputs: [sa]}\n"
	 "  - {op: ConstantOfShape, inputs: [sa], outputs: [half], attrs: {value: {type: tensor, value: {dtype: float64, shape: [1], data: [0.5]}}}}\n"
	 "  - {op: Add, inputs: [w3, rp], outputs: [y0]}\n"
	 "  - {op: Round, inputs: [y0], outputs: [r]}\n"
	 "  - {op: Mul, inputs: [r, half], outputs: [y]}\n"},
	/* Upsample, which training rewrites as Resize (rewrite/upgrade.h): run as the model has it */
	{"Upsample (opset 9)", "  - {name: a, dtype: float64, shape: [1, 2, 2, 3], init: {dist: normal, seed: %d}}\n"
	 "  - {name: sc, dtype: float32, shape: [4], data: [1, 1, 2, 3]}\n",
	 "  - {op: Upsample, inputs: [a, sc], outputs: [y]}\n"},
	/* opset 9's name for ScatterElements (onnxruntime refuses it at the cases' opset 17) */
	{"Scatter", "  - {name: a, dtype: float64, shape: [3, 4], init: {dist: normal, seed: %d}}\n"
	 "  - {name: i, dtype: int64, shape: [1, 4], data: [2, 0, 1, 2]}\n  - {name: u, dtype: float64, shape: [1, 4], data: [1, 2, 3, 4]}\n",
	 "  - {op: Scatter, inputs: [a, i, u], outputs: [y], attrs: {axis: 0}}\n"},
	/* signal: the forward-only signal ops (signal.c), each output flattened into y */
	{"DFT STFT MelWeightMatrix HannWindow HammingWindow BlackmanWindow",
	 "  - {name: a, dtype: float64, shape: [2, 16, 1], init: {dist: normal, seed: %d}}\n"
	 "  - {name: n, dtype: int64, shape: [], data: [8]}\n  - {name: st, dtype: int64, shape: [], data: [4]}\n"
	 "  - {name: nm, dtype: int64, shape: [], data: [3]}\n  - {name: sr, dtype: int64, shape: [], data: [8000]}\n"
	 "  - {name: lo, dtype: float32, shape: [], data: [0]}\n  - {name: hi, dtype: float32, shape: [], data: [4000]}\n",
	 "  - {op: HannWindow, inputs: [n], outputs: [wh]}\n"
	 "  - {op: HammingWindow, inputs: [n], outputs: [wm], attrs: {periodic: 0}}\n"
	 "  - {op: BlackmanWindow, inputs: [n], outputs: [wb]}\n"
	 "  - {op: STFT, inputs: [a, st, wh], outputs: [s]}\n"
	 "  - {op: DFT, inputs: [a], outputs: [d], attrs: {axis: 1}}\n"
	 "  - {op: MelWeightMatrix, inputs: [nm, n, sr, lo, hi], outputs: [m]}\n"
	 "  - {op: Flatten, inputs: [s], outputs: [fs], attrs: {axis: 0}}\n"
	 "  - {op: Flatten, inputs: [d], outputs: [fd], attrs: {axis: 0}}\n"
	 "  - {op: Flatten, inputs: [m], outputs: [fm], attrs: {axis: 0}}\n"
	 "  - {op: Flatten, inputs: [wm], outputs: [um], attrs: {axis: 0}}\n"
	 "  - {op: Flatten, inputs: [wb], outputs: [ub], attrs: {axis: 0}}\n"
	 "  - {op: Concat, inputs: [fs, fd, fm, um, ub], outputs: [y], attrs: {axis: 1}}\n"},
	/* #52 rnnback: the recurrent backward kernel (autodiff writes it with --fused-rnn), by hand */
	{"RecurrentGrad", "  - {name: a, dtype: float64, shape: [3, 2, 4], init: {dist: normal, seed: %d}}\n"
	 "  - {name: w, dtype: float64, shape: [1, 12, 4], init: {dist: normal, seed: 2}}\n"
	 "  - {name: r, dtype: float64, shape: [1, 12, 3], init: {dist: normal, seed: 3}}\n"
	 "  - {name: yv, dtype: float64, shape: [3, 1, 2, 3], init: {dist: normal, seed: 4}}\n"
	 "  - {name: dy, dtype: float64, shape: [3, 1, 2, 3], init: {dist: normal, seed: 5}}\n",
	 "  - {op: RecurrentGrad, domain: graphdiet, inputs: [a, w, r, \"\", \"\", \"\", \"\", \"\", yv, dy], outputs: [dx, dw, dr],"
	 " attrs: {cell: LSTM, hidden_size: 3}}\n"
	 "  - {op: Flatten, inputs: [dx], outputs: [fx], attrs: {axis: 0}}\n"
	 "  - {op: Flatten, inputs: [dw], outputs: [fw], attrs: {axis: 0}}\n"
	 "  - {op: Flatten, inputs: [dr], outputs: [fr], attrs: {axis: 0}}\n"
	 "  - {op: Concat, inputs: [fx, fw, fr], outputs: [y], attrs: {axis: 1}}\n"},
};

static void extra_on(const struct backend *b, double rtol, int *seen)
{
	for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
		struct graph *g = op_case_graph(&extra[i], "float32");
		for (uint32_t k = 0; k < g->n_nodes; k++)
			seen[g->nodes[k]->op] = 1;
		struct exec *a = run_on(g, NULL, NULL), *x = run_on(g, b, NULL);
		struct cmp cm = {extra[i].name, rtol};
		same_outputs(&cm, g, a, x);
		exec_free(a);
		exec_free(x);
		graph_free(g);
	}
}

static void every_op_covered(const int *seen)
{
	for (int op = 1; op < OP_COUNT; op++)
		cr_expect(seen[op] || uncovered_ok(op), "no parity case runs %s", op_table[op].op_type);
}

/* Every testdata model's training graph (checkpointed): b's outputs against the CPU's, and its
 * device peak against the memory model's. */
static void models_on(const struct backend *b, double rtol)
{
	for (const char *const *m = testdata_models; *m; m++) {
		struct plan_report r;
		struct graph *g = planned_ok(*m, "memory", 2, &r);
		struct exec_stats sa = {0}, sb = {0};
		struct exec *a = run_on(g, NULL, &sa), *x = run_on(g, b, &sb);
		char what[256];
		snprintf(what, sizeof what, "%s on %s", *m, b->name);
		struct cmp cm = {what, rtol};
		same_outputs(&cm, g, a, x);
		cr_expect_eq(sb.peak_bytes, sa.peak_bytes, "%s: the memory model's peak %zu, not the CPU's %zu", what,
			     sb.peak_bytes, sa.peak_bytes);
		cr_expect_eq(sb.device_peak_bytes, sa.peak_bytes, "%s: device peak %zu, planned %zu", what,
			     sb.device_peak_bytes, sa.peak_bytes);
		cr_expect_gt(sb.copies, 0, "%s: the inputs went to the device", what);
		printf("%-12s %-12s peak %10zu  device peak %10zu  host nodes %4llu  copies %5llu (%llu bytes)\n", *m,
		       b->name, sa.peak_bytes, sb.device_peak_bytes, (unsigned long long)sb.host_nodes,
		       (unsigned long long)sb.copies, (unsigned long long)sb.copy_bytes);
		exec_free(a);
		exec_free(x);
		graph_free(g);
	}
}

Test(backend, op_cases_match_the_cpu_bit_for_bit)
{
	int seen[OP_COUNT] = {0};
	cases_on(hd(), DT_FLOAT, 0, seen);
	cases_on(hd(), DT_FLOAT16, 0, seen);
	cases_on(hd(), DT_BFLOAT16, 0, seen);
	extra_on(hd(), 0, seen);
	every_op_covered(seen);
}

Test(backend, models_match_and_the_device_peak_is_the_planned_one)
{
	models_on(hd(), 0);
}

Test(backend, fallback_nodes_and_their_copies_are_counted)
{
	/* an op of odd id (the host-device lacks it) between two of even id (it has them): Relu and
	 * Tanh are neighbours in the registry, so one of them is each */
	const char *dev = OP_RELU % 2 == 0 ? "Relu" : "Tanh", *host = OP_RELU % 2 == 0 ? "Tanh" : "Relu";
	cr_assert(OP_TANH == OP_RELU + 1, "the test's premise: Relu and Tanh are neighbours in ops.def");
	char text[512];
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4]}]\nnodes:\n"
		 "  - {op: %s, inputs: [x], outputs: [a]}\n  - {op: %s, inputs: [a], outputs: [b]}\n"
		 "  - {op: %s, inputs: [b], outputs: [y]}\noutputs: [{name: y}]\n",
		 dev, host, dev);
	struct graph *g = load_text("fallback.yaml", text);
	struct exec_stats st = {0};
	struct exec *x = run_on(g, hd(), &st);
	/* x up; a down for the host's op; b up; y down at the end: 4 copies of 16 bytes */
	cr_expect_eq(st.host_nodes, 1);
	cr_expect_eq(st.copies, 4);
	cr_expect_eq(st.copy_bytes, 64);
	cr_expect_eq(st.device_peak_bytes, st.peak_bytes);
	exec_free(x);
	graph_free(g);
}

Test(backend, cuda_is_refused_with_a_message_where_it_cannot_run)
{
	struct gd_err e = {0};
	const struct backend *b = backend_find("cuda", &e);
	if (b)
		cr_skip_test("this machine has a usable GPU");
	cr_expect_eq(e.code, GD_EINPUT);
	cr_expect(strstr(e.msg, "cuda"), "%s", e.msg);
	char path[512];
	char *argv[] = {GD_BINARY, "run", (char *)model_path(path, sizeof path, "mlp"), "--random-inputs", "--dim",
			"batch=2", "--backend", "cuda", NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "graphdiet: error: --backend cuda: "), "%s", r.err);
	run_free(&r);
}

/* ---- CUDA ---- */

static const struct backend *cuda_or_skip(void)
{
	struct gd_err e = {0};
	const struct backend *b = backend_find("cuda", &e);
	if (!b)
		cr_skip_test("%s", e.msg);
	return b;
}

Test(cuda, op_cases_match_the_cpu)
{
	const struct backend *b = cuda_or_skip();
	int seen[OP_COUNT] = {0};
	cases_on(b, DT_FLOAT, 1e-5, seen);
	cases_on(b, DT_FLOAT16, 1e-2, seen);
	cases_on(b, DT_BFLOAT16, 4e-2, seen);
	extra_on(b, 1e-5, seen);
	every_op_covered(seen);
}

Test(cuda, models_match_and_the_device_peak_is_the_planned_one)
{
	models_on(cuda_or_skip(), 1e-5);
}

Test(cuda, verify_is_bitwise_on_the_gpu)
{
	cuda_or_skip();
	char path[512], train[512];
	snprintf(train, sizeof train, "%s/mlp_train.onnx", tmpdir());
	char *targv[] = {GD_BINARY, "train", (char *)model_path(path, sizeof path, "mlp"), "--dim", "batch=4",
			 "--checkpoint", "memory", "-o", train, NULL};
	struct run_result r = run_cmd(targv, NULL, 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	char *vargv[] = {GD_BINARY, "verify", path, train, "--backend", "cuda", "--rtol", "0", "--atol", "0", NULL};
	r = run_cmd(vargv, NULL, 0);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	run_free(&r);
}

/* ctest reports a run whose every test was skipped as skipped (exit 77), not as passed. */
static size_t n_tests, n_skipped;

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	n_tests = stats->nb_tests;
	n_skipped = stats->tests_skipped;
}

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests = criterion_initialize();
	int rc = 0;
	if (criterion_handle_args(argc, argv, true))
		rc = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	if (!rc && n_tests && n_skipped == n_tests)
		return 77;
	return rc;
}
