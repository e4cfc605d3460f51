/* test_diet.c - diet variables on a tied weight (ops/diet.c's DietAdam over a product and row
 * updates at once, rewrite/step.c's diet_narrow): testdata/tied_gpt.onnx, a tiny nanoGPT-style
 * GPT-2 whose head is its token embedding (testdata/gen_tied.py), and the op on its own; the INT16
 * storage made by TrainingInfoProto.initialization (train --diet reads no weight), and its Round. */
#include "exec/exec.h"
#include "helpers.h"
#include "util/xalloc.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* DietAdam over a tied weight's pieces is the update over the gradient standard ops make of them:
 * (0) [q, dY, t, m, vr, vc, idx, X, rows] over Add(Gemm(dY, X, transA=1), ScatterND(zeros,
 * Unsqueeze(idx), rows, reduction=add)), a head and an embedding; (1) with a second embedding's
 * (idx2, rows2) after them, over Add(Add(product, scatter), scatter2); (2) two embeddings and no
 * product, [q, rows, t, m, vr, vc, idx, '', '', idx2, rows2], over Add(scatter, scatter2). 40 rows
 * of 4,096 columns are three blocks of the product (16, 16, 8), each made twice; the indices
 * repeat a row (summed in index order), count one from the end, and leave most rows to the
 * product alone. Three widths: all float32; a float16 product widened to float32 beside float32
 * rows (--precision fp16's tied GPT-2); all float16, the sums in float16. q' agrees to the bit,
 * the moments to float32 rounding, and most of q moves. Rows without their indices and factors,
 * and a second term without its rows, are refused. */
Test(diet_tied, an_update_over_products_and_rows_equals_it_over_their_sum)
{
	enum { R = 40, C = 4096, K = 3, N = 6 };
	static int16_t q[R * C];
	static float a[K * R], b[K * C], rows[2 * N * C], m[R * C], vr[R], vc[C];
	static int64_t idx[2 * N] = {3, 17, 3, -1, 0, 22, 5, 3, 39, 5, 11, 5};
	diet_factor_data(q, m, a, b, vr, vc, R, C, K);
	for (int i = 0; i < 2 * N * C; i++)
		rows[i] = (float)((i * 7 % 17) - 8) * 2.1e-3f;
	const int64_t dq[2] = {R, C}, da[2] = {K, R}, db[2] = {K, C}, dw[2] = {N, C}, di[1] = {N}, dr[1] = {R},
		      dc[1] = {C};
	struct rtensor in[10] = {rt_over(DT_INT16, 2, dq, q),       rt_over(DT_FLOAT, 2, da, a),
				 rt_over(DT_FLOAT, 2, db, b),       rt_over(DT_FLOAT, 2, dw, rows),
				 rt_over(DT_INT64, 1, di, idx),     rt_over(DT_FLOAT, 2, dq, m),
				 rt_over(DT_FLOAT, 1, dr, vr),      rt_over(DT_FLOAT, 1, dc, vc),
				 rt_over(DT_FLOAT, 2, dw, rows + N * C), rt_over(DT_INT64, 1, di, idx + N)};
	const char *names[10] = {"q", "a", "b", "w", "idx", "m", "vr", "vc", "w2", "idx2"};
	/* fa, fb: the factors; fw, fw2: the rows; prod: the product as the Add reads it */
	static const char *const widths[3] = {
		"  - {op: Identity, inputs: [a], outputs: [fa]}\n  - {op: Identity, inputs: [b], outputs: [fb]}\n"
		"  - {op: Identity, inputs: [w], outputs: [fw]}\n  - {op: Identity, inputs: [w2], outputs: [fw2]}\n"
		"  - {op: Identity, inputs: [p], outputs: [prod]}\n  - {op: Identity, inputs: [z], outputs: [zeros]}\n",
		"  - {op: Cast, inputs: [a], outputs: [fa], attrs: {to: 10}}\n"
		"  - {op: Cast, inputs: [b], outputs: [fb], attrs: {to: 10}}\n"
		"  - {op: Identity, inputs: [w], outputs: [fw]}\n  - {op: Identity, inputs: [w2], outputs: [fw2]}\n"
		"  - {op: Cast, inputs: [p], outputs: [prod], attrs: {to: 1}}\n  - {op: Identity, inputs: [z], outputs: [zeros]}\n",
		"  - {op: Cast, inputs: [a], outputs: [fa], attrs: {to: 10}}\n"
		"  - {op: Cast, inputs: [b], outputs: [fb], attrs: {to: 10}}\n"
		"  - {op: Cast, inputs: [w], outputs: [fw], attrs: {to: 10}}\n"
		"  - {op: Cast, inputs: [w2], outputs: [fw2], attrs: {to: 10}}\n"
		"  - {op: Identity, inputs: [p], outputs: [prod]}\n  - {op: Cast, inputs: [z], outputs: [zeros], attrs: {to: 10}}\n"};
	static const char *const sum[3] = {"s1", "s2", "s3"}; /* the dense gradient of each case */
	static const char *const up[3][2] = {
		{"[q, fa, t, m, vr, vc, ui, fb, fw]", "[q, fa, t, m, vr, vc, ui, '', fw]"},
		{"[q, fa, t, m, vr, vc, ui, fb, fw, ui2, fw2]", "[q, fa, t, m, vr, vc, ui, fb, fw, ui2]"},
		{"[q, fw, t, m, vr, vc, ui, '', '', ui2, fw2]", "[q, fw, t, m, vr, vc, '', '', '', ui2, fw2]"}};
	for (int c = 0; c < 3; c++)
		for (int h = 0; h < 3; h++) {
			struct exec *x[3] = {NULL, NULL, NULL};
			struct graph *g[3] = {NULL, NULL, NULL};
			for (int s = 0; s < 3; s++) {
				char text[4096], ups[64];
				snprintf(ups, sizeof ups, "[q, %s, t, m, vr, vc]", sum[c]);
				snprintf(text, sizeof text,
					 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
					 "inputs: [{name: q, dtype: int16, shape: [%d, %d]}, {name: a, dtype: float32, shape: [%d, %d]},\n"
					 "  {name: b, dtype: float32, shape: [%d, %d]}, {name: w, dtype: float32, shape: [%d, %d]},\n"
					 "  {name: idx, dtype: int64, shape: [%d]}, {name: m, dtype: float32, shape: [%d, %d]},\n"
					 "  {name: vr, dtype: float32, shape: [%d]}, {name: vc, dtype: float32, shape: [%d]},\n"
					 "  {name: w2, dtype: float32, shape: [%d, %d]}, {name: idx2, dtype: int64, shape: [%d]}]\n"
					 "params:\n  - {name: t, dtype: int64, shape: [], data: [4]}\n"
					 "  - {name: shape, dtype: int64, shape: [2], data: [%d, %d]}\n"
					 "  - {name: axis, dtype: int64, shape: [1], data: [-1]}\n"
					 "nodes:\n  - {op: ConstantOfShape, inputs: [shape], outputs: [z]}\n%s"
					 "  - {op: Gemm, inputs: [fa, fb], outputs: [p], attrs: {transA: 1}}\n"
					 "  - {op: Unsqueeze, inputs: [idx, axis], outputs: [ui]}\n"
					 "  - {op: Unsqueeze, inputs: [idx2, axis], outputs: [ui2]}\n"
					 "  - {op: ScatterND, inputs: [zeros, ui, fw], outputs: [sc], attrs: {reduction: add}}\n"
					 "  - {op: ScatterND, inputs: [zeros, ui2, fw2], outputs: [sc2], attrs: {reduction: add}}\n"
					 "  - {op: Add, inputs: [prod, sc], outputs: [s1]}\n  - {op: Add, inputs: [s1, sc2], outputs: [s2]}\n"
					 "  - {op: Add, inputs: [sc, sc2], outputs: [s3]}\n"
					 "  - {name: up, op: DietAdam, domain: graphdiet, inputs: %s, outputs: [qn, mn, vrn, vcn],\n"
					 "     attrs: {beta1: 0.9, lr: 0.01, schedule: none, warmup: 1.0, round: nearest}}\n"
					 "outputs: [{name: qn}, {name: mn}, {name: vrn}, {name: vcn}, {name: s1}, {name: s2}, {name: s3}]\n",
					 R, C, K, R, K, C, N, C, N, R, C, R, C, N, C, N, R, C, widths[h], s ? up[c][s - 1] : ups);
				g[s] = load_text("diet_tied.yaml", text);
				struct exec_opts xo = {.inputs = in, .input_names = names, .n_inputs = 10};
				struct gd_err e = {0};
				x[s] = exec_run(g[s], &xo, NULL, &e);
				if (s == 2) {
					cr_expect_null(x[s]);
					cr_expect(strstr(e.msg, c ? "pairs of indices and rows" : "need the indices, the factors and the rows") &&
							  strstr(e.msg, "'up'"),
						  "%d, %d: %s", c, h, e.msg);
				} else {
					cr_assert(x[s], "case %d, %d, %d: %s", c, h, s, e.msg);
				}
			}
			diet_expect_same_update(x, g, q, R * C, 0, 10 * c + h);
			for (int s = 0; s < 3; s++) {
				exec_free(x[s]);
				graph_free(g[s]);
			}
		}
}

/* Runs graphdiet with argv, asserting exit 0; returns plan's peak_param_gradient_bytes when
 * asked (`json`). */
static long gd_ok(char *const *argv, int json)
{
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_assert_eq(r.status, 0, "%s: %s", argv[1], r.err);
	long b = json ? (long)json_num(r.out, "peak_param_gradient_bytes") : 0;
	run_free(&r);
	return b;
}

/* The tied models: tied_gpt (a GPT-2 whose head is its token embedding) and tied_shared (one
 * block of it whose embedding is also read for a second token stream): their inputs besides the
 * weights, the float32 elements of the parameters left off the diet (1-D), and the tied weight's
 * update's inputs with --diet (9: dY, the indices, X, the rows; 11: a second (indices, rows)). */
static const struct tied_model {
	const char *name, *inputs[3];
	int off_diet, n_up;
} tied_models[] = {{"tied_gpt", {"idx", "targets"}, 448, 9}, {"tied_shared", {"idx", "ctx", "targets"}, 240, 11}};

/* The tied weight's gradient is formed once, inside its update: with --diet (float32, and fp16)
 * the update of transformer.wte.weight (80 x 16) reads the head's factors (the logits' gradient
 * and ln_f's output), the token indices and each embedding's row gradients; no ScatterND, no Gemm
 * and no Add makes a table-sized gradient. plan's most parameter-gradient bytes live at once are
 * then the float32 gradients of the parameters left off the diet (graph outputs) and the position
 * embedding's row updates (8 x 16, summed over the batch): tied_gpt 2,304 bytes, under the tied
 * weight's own float32 gradient (5,120); the three of the sum (scatter, product and their Add)
 * made it 17,152 (tied_shared: 1,472, was 16,320). */
Test(diet_tied, the_gradient_is_formed_once)
{
	for (size_t t = 0; t < sizeof tied_models / sizeof *tied_models; t++) {
		const struct tied_model *tm = &tied_models[t];
		char in[512], d[512], out[600], arg[620];
		model_path(in, sizeof in, tm->name);
		char *p32[] = {GD_BINARY, "plan", in, "--diet", "--format", "json", NULL};
		char *p16[] = {GD_BINARY, "plan", in, "--diet", "--precision", "fp16", "--format", "json", NULL};
		long g32 = gd_ok(p32, 1), g16 = gd_ok(p16, 1);
		cr_expect(g32 > 0 && g32 <= 4 * (tm->off_diet + 8 * 16), "%s: float32: %ld gradient bytes", tm->name, g32);
		cr_expect(g16 > 0 && g16 <= g32, "%s: fp16: %ld gradient bytes, float32 %ld", tm->name, g16, g32);
		snprintf(d, sizeof d, "%s/%s", tmpdir(), tm->name);
		cr_assert_eq(mkdir(d, 0777), 0);
		static const char *const prec[2] = {"fp32", "fp16"};
		for (int k = 0; k < 2; k++) {
			snprintf(out, sizeof out, "%s/%s.onnx", d, prec[k]);
			char *argv[] = {GD_BINARY, "train", in, "--diet", "--precision", (char *)prec[k], "-o", out, NULL};
			gd_ok(argv, 0);
			snprintf(arg, sizeof arg, "%s:%d", out, tm->n_up);
			python_ok("import sys, onnx\n"
				  "path, n_up = sys.argv[1].rsplit(':', 1)\n"
				  "m = onnx.load(path)\n"
				  "made = {o: n for n in m.graph.node for o in n.output}\n"
				  "u = [n for n in m.graph.node if n.op_type == 'DietAdam' and n.input[0] == 'transformer.wte.weight']\n"
				  "assert len(u) == 1 and len(u[0].input) == int(n_up), u\n"
				  "dy, x = made[u[0].input[1]], made[u[0].input[7]]\n"
				  "assert dy.op_type == 'Reshape' and x.op_type == 'Reshape', (dy, x)\n"
				  "idx = [made[u[0].input[i]] for i in [6] + list(range(9, len(u[0].input), 2))]\n"
				  "assert {i.input[0] for i in idx} == ({'idx', 'ctx'} if len(idx) > 1 else {'idx'}), idx\n"
				  "assert all(i.op_type == 'Unsqueeze' for i in idx), idx\n"
				  "rows = [made[u[0].input[i]] for i in [8] + list(range(10, len(u[0].input), 2))]\n"
				  "assert not [r for r in rows if r.op_type in ('ScatterND', 'Gemm', 'Cast')], rows\n"
				  "assert not [n.name for n in m.graph.node if n.op_type == 'ScatterND'], 'a dense table gradient'\n"
				  "assert 'transformer.wte.weight_grad' not in made, 'the sum is made'\n"
				  "ins = {i for n in m.graph.node if n.op_type == 'DietAdam' for i in n.input}\n"
				  "assert not [n.name for n in m.graph.node if n.op_type == 'Gemm' and n.output[0] in ins], 'a weight gradient'\n",
				  arg, prec[k]);
		}
	}
}

/* The tied weight trains as before: two steps of --diet (lr 0.01, no schedule, rounding to nearest)
 * on each tied model, from PyTorch's seeded batch, leave it as gen_tied.py's float64 factored Adam
 * leaves it from PyTorch's gradients (every 2-D parameter INT16, quantized from the float32 weight by
 * the initialization graph, and updated each step): within one
 * step of the grid everywhere and equal in at least 99% of the elements, most of which moved; the
 * first step's loss is PyTorch's at the quantized weights. */
Test(diet_tied, two_steps_match_pytorch)
{
	for (size_t t = 0; t < sizeof tied_models / sizeof *tied_models; t++) {
		const struct tied_model *tm = &tied_models[t];
		char in[512], d[512], step[600], arg[1200], ins[3][700], p[600];
		model_path(in, sizeof in, tm->name);
		snprintf(d, sizeof d, "%s/%s_steps", tmpdir(), tm->name);
		cr_assert_eq(mkdir(d, 0777), 0);
		snprintf(step, sizeof step, "%s/step.onnx", d);
		char *train[] = {GD_BINARY, "train", in, "--diet:lr=0.01,schedule=none,warmup=1,round=nearest", "-o", step, NULL};
		gd_ok(train, 0);
		char *run[16] = {GD_BINARY, "run", step, "--steps", NULL, "-o", NULL};
		int argc = 7;
		for (int i = 0; i < 3 && tm->inputs[i]; i++) {
			snprintf(ins[i], sizeof ins[i], "%s=%s", tm->inputs[i], ref_path(p, sizeof p, tm->name, tm->inputs[i]));
			run[argc++] = "-i";
			run[argc++] = ins[i];
		}
		for (int k = 1; k <= 2; k++) {
			char outdir[700], steps[16];
			snprintf(outdir, sizeof outdir, "%s/out%d", d, k);
			snprintf(steps, sizeof steps, "%d", k);
			run[4] = steps;
			run[6] = outdir;
			gd_ok(run, 0);
		}
		snprintf(arg, sizeof arg, "%s:%s/ref/%s", d, TESTDATA, tm->name);
		python_ok("import sys, onnx, numpy as np\nfrom onnx import numpy_helper\n"
			  "d, ref = sys.argv[1].split(':')\n"
			  "m = onnx.load(d + '/step.onnx')\n"
			  "assert not [i for i in m.graph.initializer if i.name == 'transformer.wte.weight']\n"
			  "w = [numpy_helper.to_array(i) for i in m.training_info[0].initialization.initializer\n"
			  "     if i.name == 'transformer.wte.weight_float'][0]\n"
			  "q0 = np.clip(np.rint(w.astype(np.float64) / np.float64(np.float32(10 / 32767))), -32767, 32767)\n"
			  "for k in (1, 2):\n"
			  "    q = np.load(d + '/out%d/transformer.wte.weight_new.npy' % k).astype(np.int64)\n"
			  "    r = np.load(ref + '/tied_diet_step%d.npy' % k).astype(np.int64)\n"
			  "    assert np.abs(q - r).max() <= 1 and (q != r).mean() <= 0.01, (k, np.abs(q - r).max(), (q != r).sum())\n"
			  "    assert (r != q0).mean() > 0.9, (k, (r != q0).mean())\n"
			  "loss = float(np.load(d + '/out1/loss.npy'))\n"
			  "assert abs(loss - float(np.load(ref + '/loss.npy'))) < 1e-5 * abs(loss), loss\n",
			  arg, tm->name);
	}
}

/* A tied weight's update that finds no memory, at each of its allocations in turn (and the run's
 * around it), fails with "out of memory" and frees what it took (LeakSanitizer, in the sanitizer
 * build); float16 factors take the widened copy too. */
Test(diet_tied, every_allocation_failing_is_out_of_memory)
{
	enum { R = 12, C = 8, K = 3, N = 4 };
	static int16_t q[R * C];
	static float a[K * R], b[K * C], rows[N * C], m[R * C], vr[R], vc[C];
	static int64_t idx[N] = {3, 7, 3, -1};
	diet_factor_data(q, m, a, b, vr, vc, R, C, K);
	for (int i = 0; i < N * C; i++)
		rows[i] = (float)(i % 5) * 0.1f;
	const int64_t dq[2] = {R, C}, da[2] = {K, R}, db[2] = {K, C}, dw[2] = {N, C}, di[2] = {N, 1};
	struct rtensor in[5] = {rt_over(DT_INT16, 2, dq, q), rt_over(DT_FLOAT, 2, da, a), rt_over(DT_FLOAT, 2, db, b),
				rt_over(DT_FLOAT, 2, dw, rows), rt_over(DT_INT64, 2, di, idx)};
	const char *names[5] = {"q", "a", "b", "w", "idx"};
	for (int h = 0; h < 2; h++) {
		char text[2048];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopsets: [{domain: '', version: 17}, {domain: graphdiet, version: 1}]\n"
			 "inputs: [{name: q, dtype: int16, shape: [%d, %d]}, {name: a, dtype: float32, shape: [%d, %d]},\n"
			 "         {name: b, dtype: float32, shape: [%d, %d]}, {name: w, dtype: float32, shape: [%d, %d]},\n"
			 "         {name: idx, dtype: int64, shape: [%d, 1]}]\n"
			 "params:\n  - {name: t, dtype: int64, shape: [], data: [1]}\n"
			 "  - {name: vr, dtype: float32, shape: [%d], data: [%s]}\n"
			 "  - {name: vc, dtype: float32, shape: [%d], data: [0, 0, 0, 0, 0, 0, 0, 0]}\n"
			 "nodes:\n  - {op: Cast, inputs: [a], outputs: [fa], attrs: {to: %d}}\n"
			 "  - {op: Cast, inputs: [b], outputs: [fb], attrs: {to: %d}}\n"
			 "  - {name: up, op: DietAdam, domain: graphdiet, inputs: [q, fa, t, '', vr, vc, idx, fb, w],\n"
			 "     outputs: [qn, '', vrn, vcn]}\n"
			 "outputs: [{name: qn}, {name: vrn}, {name: vcn}]\n",
			 R, C, K, R, K, C, N, C, N, R, "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0", C, h ? DT_FLOAT16 : DT_FLOAT,
			 h ? DT_FLOAT16 : DT_FLOAT);
		struct graph *g = load_text("diet_tied_oom.yaml", text);
		struct exec_opts xo = {.inputs = in, .input_names = names, .n_inputs = 5};
		long n;
		for (n = 0;; n++) {
			struct gd_err e = {0};
			xalloc_fail_after(n);
			struct exec *x = exec_run(g, &xo, NULL, &e);
			xalloc_fail_after(-1);
			if (x) {
				exec_free(x);
				break;
			}
			cr_assert(strstr(e.msg, "out of memory"), "%d, allocation %ld failing: %s", h, n, e.msg);
		}
		cr_expect_gt(n, 5, "%d: the injection reached the update", h);
		graph_free(g);
	}
}

/* train --diet reads no weight: with every weight's bytes in an empty external file it writes the
 * training graph (the INT16 storage made by TrainingInfoProto.initialization from the float32
 * weight, which stays external), and only a run reads them (exit 2 naming the file). With the real
 * bytes put in that file afterwards, two steps of the graph equal, to the bit, those of its twin
 * trained with the weights present; its first loss is NumPy's at the weights quantized here (to
 * nearest, ties to even, clamped to +-32767, NaN to 0); the graph passes onnx.checker. */
Test(diet_init, train_reads_no_weight_and_the_graph_runs_on_the_real_ones)
{
	const char *yaml = "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4, 8]}]\n"
			   "params:\n  - {name: w, dtype: float32, shape: [8, 6], data_location: 1,\n"
			   "      external: [{key: location, value: %s}, {key: length, value: '192'}]}\n"
			   "nodes:\n  - {op: MatMul, inputs: [x, w], outputs: [h]}\n"
			   "  - {op: Mul, inputs: [h, h], outputs: [s]}\n"
			   "  - {op: ReduceSum, inputs: [s], outputs: [loss], attrs: {keepdims: 0}}\n"
			   "outputs: [{name: loss, dtype: float32, shape: []}]\n";
	char text[1024], bin[600], m[600], twin[600], t[700], tt[700], x[700], arg[2200];
	write_text(bin, sizeof bin, "unread_w.bin", "");
	snprintf(text, sizeof text, yaml, "unread_w.bin");
	write_text(m, sizeof m, "unread_diet.yaml", text);
	snprintf(text, sizeof text, yaml, "twin_w.bin");
	write_text(twin, sizeof twin, "twin_diet.yaml", text);
	snprintf(t, sizeof t, "%s/unread_diet_train.onnx", tmpdir());
	snprintf(tt, sizeof tt, "%s/twin_diet_train.onnx", tmpdir());
	snprintf(x, sizeof x, "x=%s/unread_x.npy", tmpdir());
	char *diet = "--diet:lr=0.01,schedule=none,warmup=1";
	char *train[] = {GD_BINARY, "train", m, diet, "-o", t, NULL};
	gd_ok(train, 0);
	char out[3][800];
	snprintf(out[0], sizeof out[0], "%s/unread_out0", tmpdir());
	char *run[] = {GD_BINARY, "run", t, "--steps", "2", "-i", x, "-o", out[0], NULL};
	char *unread[] = {GD_BINARY, "run", t, "--random-inputs", NULL};
	struct run_result r = run_cmd(unread, NULL, 0);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "unread_w.bin"), "%s", r.err);
	run_free(&r);
	/* the weights (beyond the grid, a NaN, ties) and the batch, in both files */
	snprintf(arg, sizeof arg, "%s", tmpdir());
	python_ok("import sys, numpy as np\n"
		  "d = sys.argv[1]\n"
		  "s = np.float32(10 / 32767)\n"
		  "w = np.random.default_rng(3).normal(0, 2, (8, 6)).astype(np.float32)\n"
		  "w[0, 0], w[0, 1], w[1, 1], w[2, 2], w[2, 3] = 25, -30, np.nan, s * np.float32(0.5), s * np.float32(-2.5)\n"
		  "for f in ('unread_w.bin', 'twin_w.bin'):\n"
		  "    w.tofile(d + '/' + f)\n"
		  "np.save(d + '/unread_x.npy', np.random.default_rng(4).normal(0, 1, (4, 8)).astype(np.float32))\n",
		  arg, "the weights");
	char *twin_train[] = {GD_BINARY, "train", twin, diet, "-o", tt, NULL};
	gd_ok(twin_train, 0);
	for (int k = 0; k < 3; k++) {
		snprintf(out[k], sizeof out[k], "%s/unread_out%d", tmpdir(), k);
		run[2] = k == 1 ? tt : t;
		run[4] = k == 2 ? "1" : "2";
		run[8] = out[k];
		gd_ok(run, 0);
	}
	python_ok("import sys, os, onnx, numpy as np\n"
		  "d = sys.argv[1]\n"
		  "g = onnx.load(d + '/unread_diet_train.onnx')\n"
		  "g.graph.name = g.graph.name or 'unread'  # the YAML model names none\n"
		  "onnx.checker.check_model(g)\n"
		  "a, b = sorted(os.listdir(d + '/unread_out0')), sorted(os.listdir(d + '/unread_out1'))\n"
		  "assert a == b and 'w_new.npy' in a, (a, b)\n"
		  "for f in a:\n"
		  "    p, q = np.load(d + '/unread_out0/' + f), np.load(d + '/unread_out1/' + f)\n"
		  "    assert p.dtype == q.dtype and p.tobytes() == q.tobytes(), f\n"
		  "s = np.float32(10 / 32767)\n"
		  "w = np.fromfile(d + '/twin_w.bin', np.float32).reshape(8, 6)\n"
		  "y = np.rint(w.astype(np.float64) / np.float64(s))\n"
		  "q0 = np.where(np.isnan(y), 0, np.clip(y, -32767, 32767))\n"
		  "assert q0[0, 0] == 32767 and q0[0, 1] == -32767 and q0[1, 1] == 0 and q0[2, 2] == 0 and q0[2, 3] == -2\n"
		  "x = np.load(d + '/unread_x.npy').astype(np.float64)\n"
		  "want = float(((x @ (q0.astype(np.float32) * s).astype(np.float64)) ** 2).sum())\n"
		  "loss = float(np.load(d + '/unread_out2/loss.npy'))\n"
		  "assert abs(loss - want) <= 1e-5 * abs(want), (loss, want)\n"
		  "q1 = np.load(d + '/unread_out0/w_new.npy')\n"
		  "assert q1.dtype == np.int16 and (q1 != q0).mean() > 0.5, (q1, q0)\n"
		  "np.save(d + '/unread_q0.npy', q0.astype(np.int16))\n"
		  "ti = g.training_info[0]\n"  /* the initialization graph as a model of its own */
		  "i = onnx.GraphProto()\n"
		  "i.CopyFrom(ti.initialization)\n"
		  "i.name = 'init'\n"
		  "del i.output[:]\n"
		  "for b in ti.initialization_binding:\n"
		  "    i.node.append(onnx.helper.make_node('Identity', [b.value], [b.key]))\n"
		  "    i.output.append(onnx.helper.make_tensor_value_info(b.key, onnx.TensorProto.INT16, None))\n"
		  "onnx.save(onnx.helper.make_model(i, opset_imports=g.opset_import), d + '/unread_init.onnx')\n",
		  arg, "the runs");
	/* the storage it makes is NumPy's, to the bit */
	char init[800];
	snprintf(init, sizeof init, "%s/unread_init.onnx", tmpdir());
	snprintf(out[2], sizeof out[2], "%s/unread_out3", tmpdir());
	char *run_init[] = {GD_BINARY, "run", init, "-o", out[2], NULL};
	gd_ok(run_init, 0);
	python_ok("import sys, numpy as np\n"
		  "q, want = np.load(sys.argv[1] + '/unread_out3/w.npy'), np.load(sys.argv[1] + '/unread_q0.npy')\n"
		  "assert q.dtype == np.int16 and np.array_equal(q, want), (q, want)\n",
		  arg, "the INT16 storage");
}

/* Round, which the initialization graph quantizes with: to the nearest integer, halves to the even
 * one (ONNX's), in float32 (the kernel), float64 and float16; infinities, NaN and integers stay as
 * they are. */
Test(diet_init, round_takes_halves_to_even)
{
	enum { N = 12 };
	static const double in[N] = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.498046875, 2.501953125, -INFINITY, NAN, 60000.0, 7.0};
	static const double want[N] = {-2, -2, -0.0, 0, 2, 2, 2, 3, -INFINITY, NAN, 60000, 7};
	float f[N];
	double d[N];
	for (int i = 0; i < N; i++) {
		f[i] = (float)in[i];
		d[i] = in[i];
	}
	uint16_t h[N];
	struct rtensor th = rt_over(DT_FLOAT16, 1, (const int64_t[]){N}, h);
	for (int i = 0; i < N; i++)
		rt_set(&th, i, in[i]);
	struct rtensor ins[3] = {rt_over(DT_FLOAT, 1, (const int64_t[]){N}, f), rt_over(DT_DOUBLE, 1, (const int64_t[]){N}, d),
				 th};
	const char *names[3] = {"f", "d", "h"};
	struct graph *g = load_text("round.yaml",
				    "graphdiet: 1\nopset: 17\ninputs: [{name: f, dtype: float32, shape: [12]},\n"
				    "  {name: d, dtype: float64, shape: [12]}, {name: h, dtype: float16, shape: [12]}]\n"
				    "nodes:\n  - {op: Round, inputs: [f], outputs: [rf]}\n  - {op: Round, inputs: [d], outputs: [rd]}\n"
				    "  - {op: Round, inputs: [h], outputs: [rh]}\n"
				    "outputs: [{name: rf}, {name: rd}, {name: rh}]\n");
	struct exec_opts xo = {.inputs = ins, .input_names = names, .n_inputs = 3};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &xo, NULL, &e);
	cr_assert(x, "%s", e.msg);
	const char *outs[3] = {"rf", "rd", "rh"};
	for (int k = 0; k < 3; k++) {
		const struct rtensor *r = exec_value(x, strmap_get(&g->names, outs[k]));
		cr_assert_eq(r->dtype, ins[k].dtype);
		for (int i = 0; i < N; i++) {
			double v = rt_get(r, i);
			cr_expect(isnan(want[i]) ? isnan(v) : v == want[i] && signbit(v) == signbit(want[i]), "%s[%d]: %g, not %g",
				  outs[k], i, v, want[i]);
		}
	}
	exec_free(x);
	graph_free(g);
}
