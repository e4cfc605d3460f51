/* tests/ops/norm.c - forward values of the norm op family against numbers computed apart from graphdiet
 * (numpy, PyTorch or ONNX's backend test data), run as part of test_ops. */
#include "helpers.h"
#include "ops/ops.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* dir/<name>.npy, for expect_run_matches_npy */
static void npy_by_name(const void *dir, int is_output, size_t k, const char *name, char *buf, size_t n)
{
	(void)is_output;
	(void)k;
	snprintf(buf, n, "%s/%s.npy", (const char *)dir, name);
}

/* Runs g on the inputs dir/<input name>.npy and compares each output with dir/<output name>.npy:
 * shape, and values within rtol 1e-4, atol 1e-5 (the conformance suite's tolerance). */
static void run_against(struct graph *g, const char *dir, const char *what)
{
	expect_run_matches_npy(g, npy_by_name, dir, 1e-4, 1e-5, what);
}

/* An ONNX backend test (Debian's libonnx-testdata): its model on test_data_set_0's inputs. */
static void onnx_backend_case(const char *test)
{
	char dir[512], model[600], out[600];
	snprintf(dir, sizeof dir, "/usr/share/libonnx-testdata/data/node/%s", test);
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	if (access(model, R_OK))
		cr_skip_test("no %s (Debian's libonnx-testdata)", model);
	snprintf(out, sizeof out, "%s/%s", tmpdir(), test);
	char code[2600];
	snprintf(code, sizeof code,
		 "import sys, os, onnx, numpy\nfrom onnx import numpy_helper\n"
		 "m = onnx.load('%s')\nos.makedirs(sys.argv[1], exist_ok=True)\n"
		 "for vs, kind in ((m.graph.input, 'input'), (m.graph.output, 'output')):\n"
		 "    for k, v in enumerate(vs):\n"
		 "        t = onnx.TensorProto()\n"
		 "        t.ParseFromString(open('%s/test_data_set_0/%%s_%%d.pb' %% (kind, k), 'rb').read())\n"
		 "        numpy.save(sys.argv[1] + '/' + v.name + '.npy', numpy_helper.to_array(t))\n",
		 model, dir);
	python_ok(code, out, test);
	struct graph *g = load_ok(model);
	run_against(g, out, test);
	graph_free(g);
}

/* A YAML graph on inputs numpy makes: `py` sets the dict `ins` (name -> array) and the expected
 * output `y`, from numpy's formula (the spec's), never from graphdiet. */
static void numpy_case(const char *name, const char *yaml, const char *py)
{
	char out[600], code[4096];
	snprintf(out, sizeof out, "%s/%s", tmpdir(), name);
	snprintf(code, sizeof code,
		 "import sys, os, numpy as np\nrng = np.random.default_rng(7)\nos.makedirs(sys.argv[1], exist_ok=True)\n"
		 "%s\nfor k, v in ins.items():\n    np.save(sys.argv[1] + '/' + k + '.npy', v.astype(np.float32))\n"
		 "np.save(sys.argv[1] + '/y.npy', y.astype(np.float32))\n",
		 py);
	python_ok(code, out, name);
	char file[300];
	snprintf(file, sizeof file, "%s.yaml", name);
	struct graph *g = load_text(file, yaml);
	run_against(g, out, name);
	graph_free(g);
}

Test(norm, lrn_matches_onnx_backend_tests)
{
	onnx_backend_case("test_lrn");
	onnx_backend_case("test_lrn_default");
}

Test(norm, mean_variance_normalization_matches_onnx_backend_test)
{
	onnx_backend_case("test_mvn");
}

Test(norm, rms_normalization_matches_numpy)
{
	numpy_case("rms", "graphdiet: 1\nopset: 23\ninputs:\n  - {name: x, dtype: float32, shape: [2, 3, 4]}\n"
			  "  - {name: s, dtype: float32, shape: [3, 4]}\n"
			  "nodes:\n  - {op: RMSNormalization, inputs: [x, s], outputs: [y], attrs: {axis: -2, epsilon: 0.1}}\n"
			  "outputs:\n  - {name: y}\n",
		   "x = rng.standard_normal((2, 3, 4)); s = rng.standard_normal((3, 4))\nins = {'x': x, 's': s}\n"
		   "y = x / np.sqrt((x * x).mean(axis=(1, 2), keepdims=True) + 0.1) * s\n");
}

Test(norm, group_normalization_per_channel_and_per_group_match_numpy)
{
	static const char py[] = "x = rng.standard_normal((2, 6, 3, 2)); s = rng.standard_normal(%d); b = rng.standard_normal(%d)\n"
				 "ins = {'x': x, 's': s, 'b': b}\nr = x.reshape(2, 3, -1)\n"
				 "h = ((r - r.mean(-1, keepdims=True)) / np.sqrt(r.var(-1, keepdims=True) + 1e-3)).reshape(x.shape)\n"
				 "y = h * %s + %s\n";
	static const char yaml[] = "graphdiet: 1\nopset: %d\ninputs:\n  - {name: x, dtype: float32, shape: [2, 6, 3, 2]}\n"
				   "  - {name: s, dtype: float32, shape: [%d]}\n  - {name: b, dtype: float32, shape: [%d]}\n"
				   "nodes:\n  - {op: GroupNormalization, inputs: [x, s, b], outputs: [y], attrs: {num_groups: 3, "
				   "epsilon: 0.001}}\noutputs:\n  - {name: y}\n";
	char p[1024], y[1024];
	snprintf(p, sizeof p, py, 6, 6, "s.reshape(1, 6, 1, 1)", "b.reshape(1, 6, 1, 1)");
	snprintf(y, sizeof y, yaml, 21, 6, 6);
	numpy_case("group_c", y, p);
	snprintf(p, sizeof p, py, 3, 3, "np.repeat(s, 2).reshape(1, 6, 1, 1)", "np.repeat(b, 2).reshape(1, 6, 1, 1)");
	snprintf(y, sizeof y, yaml, 18, 3, 3);
	numpy_case("group_g", y, p);
}

Test(norm, lp_normalization_matches_numpy)
{
	numpy_case("lp2", "graphdiet: 1\nopset: 17\ninputs:\n  - {name: x, dtype: float32, shape: [3, 4, 2]}\n"
			  "nodes:\n  - {op: LpNormalization, inputs: [x], outputs: [y], attrs: {axis: 1}}\noutputs:\n  - {name: y}\n",
		   "x = rng.standard_normal((3, 4, 2))\nins = {'x': x}\ny = x / np.sqrt((x * x).sum(1, keepdims=True))\n");
	numpy_case("lp1", "graphdiet: 1\nopset: 17\ninputs:\n  - {name: x, dtype: float32, shape: [3, 4]}\n"
			  "nodes:\n  - {op: LpNormalization, inputs: [x], outputs: [y], attrs: {p: 1}}\noutputs:\n  - {name: y}\n",
		   "x = rng.standard_normal((3, 4))\nins = {'x': x}\ny = x / np.abs(x).sum(-1, keepdims=True)\n");
}

Test(norm, bad_group_count_is_an_input_error)
{
	struct graph *g = load_text("gbad.yaml", "graphdiet: 1\nopset: 21\ninputs:\n  - {name: x, dtype: float32, shape: [1, 4, 2]}\n"
					    "  - {name: s, dtype: float32, shape: [4]}\n  - {name: b, dtype: float32, shape: [4]}\n"
					    "nodes:\n  - {op: GroupNormalization, inputs: [x, s, b], outputs: [y], attrs: {num_groups: 3}}\n"
					    "outputs:\n  - {name: y}\n");
	struct exec_opts o = {.random_inputs = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert_null(x);
	cr_expect_eq(e.code, GD_EINPUT);
	cr_expect(strstr(e.msg, "GroupNormalization") && strstr(e.msg, "num_groups"), "%s", e.msg);
	graph_free(g);
}

/* ---- Attention and RotaryEmbedding (opset 23): numpy from the spec, which onnxruntime 1.30 gives to
 * 1e-7 on the same cases (the softcap before the masks, the causal mask aligned at the top left) ---- */

static const char attention_py[] =
	"def attention(Q, K, V, mask=None, causal=0, scale=None, cap=0.0, qh=0, kvh=0):\n"
	"    three = Q.ndim == 3\n"
	"    if three:\n"
	"        B, L = Q.shape[:2]\n"
	"        Q = Q.reshape(B, L, qh, -1).transpose(0, 2, 1, 3)\n"
	"        K = K.reshape(B, K.shape[1], kvh, -1).transpose(0, 2, 1, 3)\n"
	"        V = V.reshape(B, V.shape[1], kvh, -1).transpose(0, 2, 1, 3)\n"
	"    g = Q.shape[1] // K.shape[1]\n"
	"    K = np.repeat(K, g, axis=1); V = np.repeat(V, g, axis=1)\n"
	"    s = Q @ K.swapaxes(-1, -2) * (scale if scale else 1 / np.sqrt(Q.shape[-1]))\n"
	"    if cap > 0: s = cap * np.tanh(s / cap)\n"
	"    L, T = s.shape[-2:]\n"
	"    if mask is not None: s = s + (np.where(mask, 0, -np.inf) if mask.dtype == bool else mask)\n"
	"    if causal: s = s + np.where(np.tril(np.ones((L, T), bool)), 0, -np.inf)\n"
	"    p = np.exp(s - s.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)\n"
	"    y = p @ V\n"
	"    return y.transpose(0, 2, 1, 3).reshape(y.shape[0], L, -1) if three else y\n";

Test(norm, attention_matches_numpy)
{
	char py[4096];
	snprintf(py, sizeof py,
		 "%sq = rng.standard_normal((2, 4, 3, 8)); k = rng.standard_normal((2, 2, 5, 8)); v = rng.standard_normal((2, 2, 5, 6))\n"
		 "m = rng.standard_normal((3, 5))\nins = {'q': q, 'k': k, 'v': v, 'm': m}\n"
		 "y = attention(q, k, v, m, causal=1, cap=2.0, scale=0.4)\n",
		 attention_py);
	numpy_case("attn4", "graphdiet: 1\nopset: 23\ninputs:\n  - {name: q, dtype: float32, shape: [2, 4, 3, 8]}\n"
			    "  - {name: k, dtype: float32, shape: [2, 2, 5, 8]}\n  - {name: v, dtype: float32, shape: [2, 2, 5, 6]}\n"
			    "  - {name: m, dtype: float32, shape: [3, 5]}\nnodes:\n"
			    "  - {op: Attention, inputs: [q, k, v, m], outputs: [y], attrs: {is_causal: 1, softcap: 2.0, scale: 0.4}}\n"
			    "outputs:\n  - {name: y}\n",
		   py);
	snprintf(py, sizeof py,
		 "%sq = rng.standard_normal((2, 3, 32)); k = rng.standard_normal((2, 5, 16)); v = rng.standard_normal((2, 5, 12))\n"
		 "ins = {'q': q, 'k': k, 'v': v}\ny = attention(q, k, v, qh=4, kvh=2)\n",
		 attention_py);
	numpy_case("attn3", "graphdiet: 1\nopset: 23\ninputs:\n  - {name: q, dtype: float32, shape: [2, 3, 32]}\n"
			    "  - {name: k, dtype: float32, shape: [2, 5, 16]}\n  - {name: v, dtype: float32, shape: [2, 5, 12]}\nnodes:\n"
			    "  - {op: Attention, inputs: [q, k, v], outputs: [y], attrs: {q_num_heads: 4, kv_num_heads: 2}}\n"
			    "outputs:\n  - {name: y}\n",
		   py);
	/* more query rows than the float32 kernel takes at a time (128), causal: blocks that read fewer keys */
	snprintf(py, sizeof py,
		 "%sq = rng.standard_normal((1, 2, 300, 8)); k = rng.standard_normal((1, 1, 320, 8)); v = rng.standard_normal((1, 1, 320, 4))\n"
		 "m = rng.standard_normal((300, 320))\nins = {'q': q, 'k': k, 'v': v, 'm': m}\ny = attention(q, k, v, m, causal=1)\n",
		 attention_py);
	numpy_case("attn_rows", "graphdiet: 1\nopset: 23\ninputs:\n  - {name: q, dtype: float32, shape: [1, 2, 300, 8]}\n"
				"  - {name: k, dtype: float32, shape: [1, 1, 320, 8]}\n  - {name: v, dtype: float32, shape: [1, 1, 320, 4]}\n"
				"  - {name: m, dtype: float32, shape: [300, 320]}\nnodes:\n"
				"  - {op: Attention, inputs: [q, k, v, m], outputs: [y], attrs: {is_causal: 1}}\noutputs:\n  - {name: y}\n",
		   py);
}

Test(norm, attention_bool_mask_matches_numpy)
{
	char py[4096];
	snprintf(py, sizeof py,
		 "%sq = rng.standard_normal((2, 2, 3, 4)); k = rng.standard_normal((2, 2, 4, 4)); v = rng.standard_normal((2, 2, 4, 4))\n"
		 "m = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 0, 1]], bool)\n"
		 "ins = {'q': q, 'k': k, 'v': v}\ny = attention(q, k, v, m)\n",
		 attention_py);
	numpy_case("attnb", "graphdiet: 1\nopset: 23\ninputs:\n  - {name: q, dtype: float32, shape: [2, 2, 3, 4]}\n"
			    "  - {name: k, dtype: float32, shape: [2, 2, 4, 4]}\n  - {name: v, dtype: float32, shape: [2, 2, 4, 4]}\n"
			    "params:\n  - {name: m, dtype: bool, shape: [3, 4], data: [1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1]}\nnodes:\n"
			    "  - {op: Attention, inputs: [q, k, v, m], outputs: [y]}\noutputs:\n  - {name: y}\n",
		   py);
}

Test(norm, attention_refuses_a_key_value_cache)
{
	struct graph *g = load_text("attn_past.yaml", "graphdiet: 1\nopset: 23\ninputs:\n"
						    "  - {name: q, dtype: float32, shape: [1, 1, 2, 4]}\n"
						    "  - {name: p, dtype: float32, shape: [1, 1, 3, 4]}\nnodes:\n"
						    "  - {op: Attention, inputs: [q, q, q, \"\", p, p], outputs: [y]}\n"
						    "outputs:\n  - {name: y}\n");
	struct exec_opts o = {.random_inputs = 1};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert_null(x);
	cr_expect_eq(e.code, GD_EINPUT);
	cr_expect(strstr(e.msg, "Attention") && strstr(e.msg, "past_key"), "%s", e.msg);
	graph_free(g);
}

static const char rotary_py[] =
	"def rotary(X, cos, sin, pos=None, il=0, nh=0, rd=0):\n"
	"    three = X.ndim == 3\n"
	"    if three:\n"
	"        B, S = X.shape[:2]; X = X.reshape(B, S, nh, -1).transpose(0, 2, 1, 3)\n"
	"    rd = rd or X.shape[-1]\n"
	"    if pos is not None: cos = cos[pos]; sin = sin[pos]\n"
	"    cos = cos[:, None]; sin = sin[:, None]\n"
	"    xr, xp = X[..., :rd], X[..., rd:]\n"
	"    x1, x2 = (xr[..., 0::2], xr[..., 1::2]) if il else (xr[..., :rd // 2], xr[..., rd // 2:])\n"
	"    o1 = x1 * cos - x2 * sin; o2 = x2 * cos + x1 * sin\n"
	"    o = np.stack([o1, o2], -1).reshape(xr.shape) if il else np.concatenate([o1, o2], -1)\n"
	"    y = np.concatenate([o, xp], -1)\n"
	"    return y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1) if three else y\n";

Test(norm, rotary_embedding_matches_numpy)
{
	char py[4096];
	snprintf(py, sizeof py,
		 "%sx = rng.standard_normal((2, 3, 4, 8)); c = rng.standard_normal((10, 4)); s = rng.standard_normal((10, 4))\n"
		 "p = np.array([[0, 3, 9, 2], [1, 1, 5, 7]])\nins = {'x': x, 'c': c, 's': s}\ny = rotary(x, c, s, p)\n",
		 rotary_py);
	numpy_case("rope4", "graphdiet: 1\nopset: 23\ninputs:\n  - {name: x, dtype: float32, shape: [2, 3, 4, 8]}\n"
			    "  - {name: c, dtype: float32, shape: [10, 4]}\n  - {name: s, dtype: float32, shape: [10, 4]}\n"
			    "params:\n  - {name: p, dtype: int64, shape: [2, 4], data: [0, 3, 9, 2, 1, 1, 5, 7]}\nnodes:\n"
			    "  - {op: RotaryEmbedding, inputs: [x, c, s, p], outputs: [y]}\noutputs:\n  - {name: y}\n",
		   py);
	snprintf(py, sizeof py,
		 "%sx = rng.standard_normal((2, 4, 24)); c = rng.standard_normal((2, 4, 2)); s = rng.standard_normal((2, 4, 2))\n"
		 "ins = {'x': x, 'c': c, 's': s}\ny = rotary(x, c, s, il=1, nh=3, rd=4)\n",
		 rotary_py);
	numpy_case("rope3", "graphdiet: 1\nopset: 23\ninputs:\n  - {name: x, dtype: float32, shape: [2, 4, 24]}\n"
			    "  - {name: c, dtype: float32, shape: [2, 4, 2]}\n  - {name: s, dtype: float32, shape: [2, 4, 2]}\nnodes:\n"
			    "  - {op: RotaryEmbedding, inputs: [x, c, s], outputs: [y], attrs: {num_heads: 3, interleaved: 1, "
			    "rotary_embedding_dim: 4}}\noutputs:\n  - {name: y}\n",
		   py);
}

/* ---- models of the opset 18-23 ops (testdata/gen_opset23.py) train ---- */

static const char *const opset23_models[] = {"opset23_groupnorm", "opset23_rmsnorm", "opset23_rotary", "opset23_attention",
				      "opset23_block", "opset23_gelu", "opset23_mish", NULL};

/* train --loss-fn mse of each, and verify --gradcheck of that training graph's gradients against
 * finite differences of the model's loss (the same --loss-fn appended) in float64 */
Test(norm, opset23_models_train_and_pass_gradcheck)
{
	size_t ran = 0;
	for (const char *const *m = opset23_models; *m; m++) {
		char in[600], t[600];
		snprintf(in, sizeof in, "%s/opset23/%s.onnx", TESTDATA, *m);
		snprintf(t, sizeof t, "%s/%s_train.onnx", tmpdir(), *m);
		char *ta[] = {GD_BINARY, "train", in, "--loss-fn", "mse", "-o", t, NULL};
		struct run_result r = run_cmd(ta, NULL, 0);
		cr_assert_eq(r.status, 0, "%s: %s", *m, r.err);
		run_free(&r);
		char *va[] = {GD_BINARY, "verify", "--gradcheck", "--loss-fn", "mse", in, t, NULL};
		r = run_cmd(va, NULL, 0);
		cr_expect_eq(r.status, 0, "%s: %s%s", *m, r.out, r.err);
		cr_expect(strstr(r.out, "match: 3 outputs compared"), "%s: %s", *m, r.out);
		run_free(&r);
		ran++;
	}
	cr_expect_eq(ran, 7);
}

/* BatchNormalization in training mode updates its running variance with the batch's population
 * variance (the spec; PyTorch's unbiased rule is the training step's, for PyTorch exports only) */
Test(norm, batch_normalization_training_mode_matches_onnx_backend_tests)
{
	onnx_backend_case("test_batchnorm_example_training_mode");
	onnx_backend_case("test_batchnorm_epsilon_training_mode");
}

/* is_causal with a symbolic sequence length: the gradient's mask is made in the graph (Trilu), so a
 * graph trained without --dim passes gradcheck at two lengths */
Test(norm, attention_causal_gradient_at_symbolic_lengths)
{
	char m[600], t[600];
	train_text(m, t, sizeof m, "attn_sym",
		   "graphdiet: 1\nopset: 23\ninputs:\n  - {name: x, dtype: float32, shape: [2, seq, 8]}\nparams:\n"
		   "  - {name: wq, dtype: float32, shape: [8, 8], init: {dist: normal, seed: 1}}\n"
		   "  - {name: wk, dtype: float32, shape: [8, 4], init: {dist: normal, seed: 2}}\n"
		   "  - {name: wv, dtype: float32, shape: [8, 4], init: {dist: normal, seed: 3}}\nnodes:\n"
		   "  - {op: MatMul, inputs: [x, wq], outputs: [q]}\n  - {op: MatMul, inputs: [x, wk], outputs: [k]}\n"
		   "  - {op: MatMul, inputs: [x, wv], outputs: [v]}\n"
		   "  - {op: Attention, inputs: [q, k, v], outputs: [a], attrs: {q_num_heads: 2, kv_num_heads: 1, is_causal: 1}}\n"
		   "  - {op: Mul, inputs: [a, a], outputs: [a2]}\n"
		   "  - {op: ReduceSum, inputs: [a2], outputs: [loss], attrs: {keepdims: 0}}\n"
		   "outputs: [{name: loss, dtype: float32, shape: []}]\n");
	const char *dims[] = {"--dim=seq=3", "--dim=seq=7"};
	for (int i = 0; i < 2; i++) {
		char *va[] = {GD_BINARY, "verify", "--gradcheck", m, t, (char *)dims[i], NULL};
		struct run_result r = run_cmd(va, NULL, 0);
		cr_expect_eq(r.status, 0, "%s: %s%s", dims[i], r.out, r.err);
		run_free(&r);
	}
}
