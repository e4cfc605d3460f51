/* test_symbolic.c - symbolic dims (ir/symdim.h): expressions printed, parsed and evaluated; the
 * exports with dynamic axes in testdata/dynamic/ (gen_dynamic.py: nanoGPT's causal-mask buffer,
 * LLaMA's RoPE tables, BERT's position_ids, each sliced [:seq]) trained without --dim, their
 * gradients checked at two sequence lengths, and the assumption seq <= 64 kept and enforced. */
#include "helpers.h"
#include "io/npy.h"
#include "ir/symdim.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dynamic_models[] = {"gpt", "llama", "bert", NULL};

/* what each export's Slices assume, as train records them (node and buffer names are the
 * exporter's and the modules') */
static const char *const dynamic_assumes[] = {
	"seq <= 64; node /attn/Slice; buffer attn.bias\nseq <= 64; node /attn/Slice_1; buffer attn.bias",
	"seq <= 64; node /attn/rope/Slice; buffer rope.cos_cached\nseq <= 64; node /attn/rope/Slice_1; buffer "
	"rope.sin_cached\nseq <= 64; node /attn/rope_1/Slice; buffer rope.cos_cached\nseq <= 64; node "
	"/attn/rope_1/Slice_1; buffer rope.sin_cached\nseq <= 64; node /attn/Slice; buffer attn.bias\nseq <= 64; "
	"node /attn/Slice_1; buffer attn.bias",
	"seq <= 64; node /Slice; buffer position_ids",
};

static struct run_result gd(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5,
			    const char *a6, const char *a7, const char *a8)
{
	char *argv[] = {GD_BINARY, (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5, (char *)a6, (char *)a7,
			(char *)a8, NULL};
	return run_cmd(argv, NULL, 0);
}

static const char *trained(char *out, size_t n, const char *m)
{
	char in[512];
	snprintf(in, sizeof in, TESTDATA "/dynamic/%s.onnx", m);
	snprintf(out, n, "%s/sym_%s.onnx", tmpdir(), m);
	struct run_result r = gd("train", in, "-o", out, NULL, NULL, NULL, NULL);
	cr_assert_eq(r.status, 0, "train %s without --dim: exit %d: %s", m, r.status, r.err);
	run_free(&r);
	return out;
}

Test(symdim, prints_parses_and_evaluates)
{
	struct symdim d = {.c = 1, .n = 1, .t = {{.k = 1, .a = "seq"}}};
	char buf[64];
	cr_assert_str_eq(symdim_str(&d, buf, sizeof buf), "seq + 1");
	d = (struct symdim){.c = -3, .n = 2, .t = {{.k = 2, .a = "batch"}, {.k = -1, .a = "batch", .b = "seq"}}};
	cr_assert_str_eq(symdim_str(&d, buf, sizeof buf), "2*batch - batch*seq - 3");
	d = (struct symdim){.c = 7};
	cr_assert_str_eq(symdim_str(&d, buf, sizeof buf), "7");

	struct arena a;
	arena_init(&a);
	const char *names[] = {"batch", "seq"};
	const int64_t values[] = {4, 100};
	static const struct {
		const char *text;
		int64_t want;
	} ok[] = {{"seq", 100}, {"seq + 1", 101}, {"2*batch", 8}, {"batch*seq - 3", 397}, {"-seq + 1024", 924},
		  {"12", 12}, {"2*batch - batch*seq - 3", -395}};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		int64_t v = 0;
		const char *unbound = "none";
		cr_assert_eq(symdim_parse(&a, ok[i].text, strlen(ok[i].text), &d), 0, "%s", ok[i].text);
		cr_assert_eq(symdim_eval(&d, names, values, 2, &v, &unbound), 0, "%s", ok[i].text);
		cr_assert_eq(v, ok[i].want, "%s = %lld", ok[i].text, (long long)v);
		if (strcmp(ok[i].text, "-seq + 1024")) /* (printed as 1024 less seq: "-seq + 1024") */
			cr_assert_str_eq(symdim_str(&d, buf, sizeof buf), ok[i].text);
	}
	static const char *const bad[] = {"", "seq +", "* seq", "2 seq", "seq ++ 1", "0*seq", "3seq"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_expect_neq(symdim_parse(&a, bad[i], strlen(bad[i]), &d), 0, "'%s' parsed", bad[i]);
	int64_t v;
	const char *unbound = NULL;
	cr_assert_eq(symdim_parse(&a, "heads*seq", 9, &d), 0);
	cr_assert_neq(symdim_eval(&d, names, values, 2, &v, &unbound), 0);
	cr_assert_str_eq(unbound, "heads");
	arena_free(&a);
}

Test(symdim, assumptions_are_recorded_once_and_checked)
{
	struct graph *g = graph_new("m.onnx");
	cr_assert(g);
	const char *lines[] = {symdim_line(g->arena, "seq", 64, "/attn/Slice", "attn.bias"),
			       symdim_line(g->arena, "seq + 1", 1024, "s2", "pos"), symdim_line(g->arena, "2*seq", 9, "s3", "q")};
	cr_assert_eq(symdim_record(g, lines, 0), 0);
	cr_assert_null(model_meta(g, SYMDIM_META_KEY));
	cr_assert_eq(symdim_record(g, lines, 2), 0);
	cr_assert_str_eq(model_meta(g, SYMDIM_META_KEY),
			 "seq <= 64; node /attn/Slice; buffer attn.bias\nseq + 1 <= 1024; node s2; buffer pos");
	cr_assert_eq(symdim_record(g, lines + 2, 1), 0);
	cr_assert_str_eq(model_meta(g, SYMDIM_META_KEY), "seq <= 64; node /attn/Slice; buffer attn.bias\nseq + 1 <= 1024; "
							 "node s2; buffer pos\n2*seq <= 9; node s3; buffer q");
	const char *names[] = {"batch", "seq"};
	struct gd_err e = {0};
	cr_assert_eq(symdim_check(g, names, (int64_t[]){2, 4}, 2, &e), 0, "%s", e.msg);
	cr_assert_eq(symdim_check(g, names, (int64_t[]){2, 5}, 2, &e), GD_EINPUT);
	cr_assert(strstr(e.msg, "node 's3' (Slice): seq = 5 breaks the assumption 2*seq <= 9"), "%s", e.msg);
	e = (struct gd_err){0};
	cr_assert_eq(model_set_meta(g, SYMDIM_META_KEY, "seq <= 64; node /attn/Slice; buffer attn.bias\nseq + 1 <= 1024; node s2; buffer pos"), 0);
	cr_assert_eq(symdim_check(g, names, (int64_t[]){2, 64}, 2, &e), 0, "%s", e.msg);
	cr_assert_eq(symdim_check(g, names, (int64_t[]){2, 0}, 1, &e), 0, "an unbound seq is checked later");
	cr_assert_eq(symdim_check(g, names, (int64_t[]){2, 65}, 2, &e), GD_EINPUT);
	cr_assert_str_eq(e.msg, "node '/attn/Slice' (Slice): seq = 65 breaks the assumption seq <= 64: seq is the length "
				"of a slice of buffer 'attn.bias', which holds 64");
	e = (struct gd_err){0};
	cr_assert_eq(model_set_meta(g, SYMDIM_META_KEY, "seq < 64; node x; buffer y"), 0);
	cr_assert_eq(symdim_check(g, names, (int64_t[]){2, 3}, 2, &e), GD_EINPUT);
	cr_assert(strstr(e.msg, "is no assumption"), "%s", e.msg);
	/* the metadata is input: constants that overflow are malformed, not undefined behaviour */
	e = (struct gd_err){0};
	cr_assert_eq(model_set_meta(g, SYMDIM_META_KEY, "9000000000000000000 + 9000000000000000000 <= 1; node x; buffer y"), 0);
	cr_assert_eq(symdim_check(g, names, (int64_t[]){2, 3}, 2, &e), GD_EINPUT);
	cr_assert(strstr(e.msg, "is no assumption"), "%s", e.msg);
	/* each binding that breaks it is named once, a symbol whose name another's holds too */
	e = (struct gd_err){0};
	const char *names3[] = {"seq", "seq_len"};
	cr_assert_eq(model_set_meta(g, SYMDIM_META_KEY, "seq_len + seq <= 9; node x; buffer y"), 0);
	cr_assert_eq(symdim_check(g, names3, (int64_t[]){5, 6}, 2, &e), GD_EINPUT);
	cr_assert(strstr(e.msg, "seq_len = 6") && strstr(e.msg, "seq = 5"), "%s", e.msg);
	graph_free(g);
}

/* Shapes inferred with unbound symbols are named by their expressions: a Concat of x with itself
 * and one more element is 2*seq + 1 long, a Flatten of [batch, seq] is batch*seq, and an error
 * shows those, never the numbers that stood in for the symbols. */
Test(symdim, errors_and_inferred_dims_name_symbols)
{
	static const char yaml[] = "graphdiet: 1\nname: t\nopset: 17\n"
				   "inputs:\n  - {name: x, dtype: float32, shape: [seq]}\n"
				   "  - {name: m, dtype: float32, shape: [batch, seq]}\n"
				   "params:\n  - {name: w, dtype: float32, shape: [5], init: zeros}\n"
				   "  - {name: one, dtype: float32, shape: [1], init: zeros}\n"
				   "nodes:\n  - {name: cat, op: Concat, inputs: [x, x, one], outputs: [c], attrs: {axis: 0}}\n"
				   "  - {name: flat, op: Flatten, inputs: [m], outputs: [f], attrs: {axis: 0}}\n"
				   "  - {name: add, op: Add, inputs: [c, w], outputs: [y]}\n"
				   "  - {name: mean, op: ReduceMean, inputs: [y], outputs: [loss], attrs: {keepdims: 0}}\n"
				   "outputs:\n  - {name: loss, dtype: float32, shape: []}\n";
	char path[512];
	write_text(path, sizeof path, "standins.yaml", yaml);
	struct graph *g = load_ok(path);
	struct gd_err e = {0};
	struct exec_opts o = {.shapes_only = 1, .probe_unbound = 1};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert_null(x);
	cr_assert_str_eq(e.msg, "node 'add' (Add): shapes cannot be broadcast together (dimension 0: 2*seq + 1 vs 5)");
	graph_free(g);

	/* a size of the model's own stays a number, though it lies near a multiple of a stand-in
	 * (GPT-2's vocabulary, 50257 = 5 x 10007 + 222, read "5*seq + 222") */
	g = load_text("vocab.yaml", "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [seq]}]\n"
				    "params: [{name: w, dtype: float32, shape: [50257], init: zeros}]\n"
				    "nodes: [{name: add, op: Add, inputs: [x, w], outputs: [y]}]\noutputs: [{name: y}]\n");
	e = (struct gd_err){0};
	cr_assert_null(exec_run(g, &o, NULL, &e));
	cr_assert(strstr(e.msg, "seq vs 50257"), "%s", e.msg);
	graph_free(g);

	/* without the bad Add: the dims themselves */
	char ok[sizeof yaml];
	snprintf(ok, sizeof ok, "%s", yaml);
	char *add = strstr(ok, "  - {name: add");
	memcpy(add, "  - {name: add, op: Add, inputs: [c, c], outputs: [y]}", 55);
	write_text(path, sizeof path, "standins_ok.yaml", ok);
	g = load_ok(path);
	e = (struct gd_err){0};
	x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s", e.msg);
	struct symdim d;
	char buf[64];
	const struct rtensor *c = exec_value(x, strmap_get(&g->names, "c")), *f = exec_value(x, strmap_get(&g->names, "f"));
	cr_assert(exec_dim_expr(x, c->dims[0], &d));
	cr_assert_str_eq(symdim_str(&d, buf, sizeof buf), "2*seq + 1");
	cr_assert(exec_dim_expr(x, f->dims[1], &d));
	cr_assert_str_eq(symdim_str(&d, buf, sizeof buf), "batch*seq");
	cr_assert_not(exec_dim_expr(x, 5, &d), "a fixed dim is no expression");
	cr_assert_not(exec_dim_expr(x, INT64_MAX, &d), "nor the largest (rounding it overflowed: the fuzzer found it)");
	exec_free(x);
	graph_free(g);

	/* bound: every unbound symbol is named at once */
	struct run_result r = gd("plan", TESTDATA "/dynamic/gpt.onnx", NULL, NULL, NULL, NULL, NULL, NULL);
	cr_assert_eq(r.status, 2, "%s", r.err);
	cr_assert(strstr(r.err, "graph input 'tokens': symbolic dimensions 'batch', 'seq' are not bound; use --dim "
				"batch=N --dim seq=N"), "%s", r.err);
	run_free(&r);
}

Test(symbolic, dynamic_exports_train_without_dim_and_keep_their_symbols)
{
	for (int i = 0; dynamic_models[i]; i++) {
		char out[512];
		struct graph *g = load_ok(trained(out, sizeof out, dynamic_models[i]));
		for (uint32_t k = 0; k < g->n_inputs; k++) {
			const struct value *v = g->inputs[k];
			if (strcmp(v->name, "tokens") && strcmp(v->name, "targets"))
				continue;
			cr_assert_eq(v->type.ndim, 2);
			cr_assert(v->type.dims[0].kind == DIM_PARAM && !strcmp(v->type.dims[0].param, "batch"), "%s", v->name);
			cr_assert(v->type.dims[1].kind == DIM_PARAM && !strcmp(v->type.dims[1].param, "seq"), "%s", v->name);
		}
		const char *as = model_meta(g, SYMDIM_META_KEY);
		cr_assert(as, "%s: no assumptions recorded", dynamic_models[i]);
		cr_assert_str_eq(as, dynamic_assumes[i], "%s", dynamic_models[i]);
		graph_free(g);
		python_ok("import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]))", out, "onnx.checker");
	}
}

Test(symbolic, gradients_check_at_two_sequence_lengths)
{
	for (int i = 0; dynamic_models[i]; i++) {
		char in[512], out[512];
		snprintf(in, sizeof in, TESTDATA "/dynamic/%s.onnx", dynamic_models[i]);
		trained(out, sizeof out, dynamic_models[i]);
		static const char *const seqs[] = {"seq=8", "seq=13", "seq=64"};
		for (int s = 0; s < 3; s++) {
			struct run_result r = gd("verify", "--gradcheck", "--dim", seqs[s], "--dim", "batch=2", in, out);
			cr_assert_eq(r.status, 0, "%s at %s: %s%s", dynamic_models[i], seqs[s], r.out, r.err);
			run_free(&r);
		}
	}
}

/* A graph trained without --dim costs what one trained at the bound dims costs: a gradient that
 * needs a symbolic shape takes Shape(x) in the forward pass, so the backward pass keeps the shape
 * and not x (it kept each RMSNorm's x^2 and each attention projection's output: +13%, +24% and +9%
 * on these exports at seq 64, +8.7% at LLaMA-7B's shape at seq 2048, where it is now +0.003%).
 * Within 5% at these tiny sizes: the shape tensors remain, and a RoPE table sliced by a symbolic
 * length is no fixed value, so it is kept where the bound graph recomputes it. */
Test(symbolic, a_graph_trained_without_dims_costs_what_a_bound_one_costs)
{
	for (int i = 0; dynamic_models[i]; i++) {
		char in[512], sym[512], bound[600];
		snprintf(in, sizeof in, TESTDATA "/dynamic/%s.onnx", dynamic_models[i]);
		trained(sym, sizeof sym, dynamic_models[i]);
		snprintf(bound, sizeof bound, "%s/bound_%s.onnx", tmpdir(), dynamic_models[i]);
		char *ta[] = {GD_BINARY, "train", in, "--dim", "batch=2", "--dim", "seq=64", "-o", bound, NULL};
		struct run_result r = run_cmd(ta, NULL, 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
		run_free(&r);
		double peak[2];
		for (int b = 0; b < 2; b++) {
			char *pa[] = {GD_BINARY, "plan", b ? bound : sym, "--format", "json", "--dim", "batch=2", "--dim", "seq=64", NULL};
			if (b)
				pa[5] = NULL; /* the bound graph's dims are its own */
			r = run_cmd(pa, NULL, 0);
			cr_assert_eq(r.status, 0, "%s", r.err);
			const char *k = strstr(r.out, "\"peak_bytes_after\": ");
			cr_assert(k, "%s", r.out);
			peak[b] = strtod(k + 20, NULL);
			run_free(&r);
		}
		cr_expect_leq(peak[0], peak[1] * 1.05, "%s: %.0f bytes trained without --dim, %.0f with", dynamic_models[i],
			      peak[0], peak[1]);
	}
}

/* A square buffer sliced [:T, :T] on both axes and added to the scores, as LLaMA's float causal
 * mask is, so it gets a gradient: the Pad that puts dy back took the buffer's length off only the
 * leading pads' axes, so the gradient was (T + 8) x (T + 8) and not 8 x 8 (the exports above slice
 * one axis, whose gradient's first elements came out right; verify --gradcheck then read the wrong
 * elements of this one). */
Test(symbolic, a_buffer_sliced_on_two_axes_gets_its_own_shape_of_gradient)
{
	char m[600], t[600];
	train_text(m, t, sizeof m, "square_mask",
		   "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [seq, seq]}]\n"
		   "params:\n  - {name: mask, dtype: float32, shape: [8, 8], init: {dist: normal, seed: 4}}\n"
		   "  - {name: zero, dtype: int64, shape: [1], data: [0]}\n  - {name: zz, dtype: int64, shape: [2], data: [0, 0]}\n"
		   "  - {name: ax, dtype: int64, shape: [2], data: [0, 1]}\n"
		   "nodes:\n  - {op: Shape, inputs: [x], outputs: [s]}\n  - {op: Gather, inputs: [s, zero], outputs: [t]}\n"
		   "  - {op: Concat, inputs: [t, t], outputs: [ends], attrs: {axis: 0}}\n"
		   "  - {op: Slice, inputs: [mask, zz, ends, ax], outputs: [ms]}\n"
		   "  - {op: Add, inputs: [x, ms], outputs: [y]}\n  - {op: Mul, inputs: [y, y], outputs: [z]}\n"
		   "  - {op: ReduceSum, inputs: [z], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n");
	struct run_result r;
	static const char *const seqs[] = {"seq=3", "seq=8"};
	for (int s = 0; s < 2; s++) {
		r = gd("verify", "--gradcheck", "--dim", seqs[s], m, t, NULL, NULL);
		cr_expect_eq(r.status, 0, "%s: %s%s", seqs[s], r.out, r.err);
		run_free(&r);
	}
	char dir[600], path[700];
	snprintf(dir, sizeof dir, "%s/square_mask_out", tmpdir());
	r = gd("run", t, "--random-inputs", "--dim", "seq=3", "-o", dir, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	snprintf(path, sizeof path, "%s/mask_grad.npy", dir);
	size_t len;
	uint8_t *b = slurp(path, &len);
	cr_assert(b);
	struct npy n;
	struct gd_err e = {0};
	cr_assert_eq(npy_parse(b, len, &n, &e), 0, "%s", e.msg);
	cr_expect(n.ndim == 2 && n.dims[0] == 8 && n.dims[1] == 8, "mask_grad is %u-d, [%lld, %lld]", n.ndim,
		  (long long)n.dims[0], (long long)(n.ndim > 1 ? n.dims[1] : 0));
	free(b);
}

/* Binding seq past a buffer's length is an error naming the node and the buffer: train's --dim on
 * the model, and run, verify and plan on the training graph, which keeps the assumption. */
Test(symbolic, a_sequence_past_the_buffer_is_an_error)
{
	char out[512];
	trained(out, sizeof out, "gpt");
	const char *want = "node '/attn/Slice' (Slice): seq = 65 breaks the assumption seq <= 64: seq is the length of a "
			   "slice of buffer 'attn.bias', which holds 64";
	struct run_result rs[] = {
		gd("train", TESTDATA "/dynamic/gpt.onnx", "--dim", "seq=65", "-o", out, NULL, NULL),
		gd("run", out, "--dim", "seq=65", "--dim", "batch=2", "--random-inputs", NULL),
		gd("plan", out, "--dim", "seq=65", "--dim", "batch=2", NULL, NULL),
		gd("plan", TESTDATA "/dynamic/gpt.onnx", "--dim", "seq=65", "--dim", "batch=2", NULL, NULL),
		gd("verify", "--dim", "seq=65", "--dim", "batch=2", TESTDATA "/dynamic/gpt.onnx", out, NULL),
	};
	for (size_t i = 0; i < sizeof rs / sizeof *rs; i++) {
		cr_assert_eq(rs[i].status, 2, "case %zu: exit %d: %s", i, rs[i].status, rs[i].err);
		cr_assert(strstr(rs[i].err, want), "case %zu: %s", i, rs[i].err);
		run_free(&rs[i]);
	}
	/* bound by the inputs given: their shape [2, 70] says seq = 70 */
	char tok[512], arg[600];
	snprintf(tok, sizeof tok, "%s/sym_tok70.npy", tmpdir());
	python_ok("import numpy, sys; numpy.save(sys.argv[1], numpy.zeros((2, 70), dtype=numpy.int64))", tok, "numpy");
	snprintf(arg, sizeof arg, "tokens=%s", tok);
	char targ[600];
	snprintf(targ, sizeof targ, "targets=%s", tok);
	struct run_result ri = gd("run", out, "-i", arg, "-i", targ, NULL, NULL);
	cr_assert_eq(ri.status, 2, "%s", ri.err);
	cr_assert(strstr(ri.err, "node '/attn/Slice' (Slice): seq = 70 breaks the assumption seq <= 64"), "%s", ri.err);
	run_free(&ri);
	/* the training graph was left as it was (train writes atomically): it still runs at 64 */
	struct run_result r = gd("run", out, "--dim", "seq=64", "--dim", "batch=2", "--random-inputs", NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_free(&r);
	r = gd("plan", TESTDATA "/dynamic/llama.onnx", "--dim", "seq=100", "--dim", "batch=1", NULL, NULL);
	cr_assert_eq(r.status, 2, "%s", r.err);
	cr_assert(strstr(r.err, "node '/attn/rope/Slice' (Slice): seq = 100 breaks the assumption seq <= 64: seq is the "
				"length of a slice of buffer 'rope.cos_cached', which holds 64"), "%s", r.err);
	run_free(&r);
}
