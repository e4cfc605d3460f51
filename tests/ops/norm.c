/* tests/ops/norm.c - forward values of the norm op family against numbers computed apart from graphdiet
 * (numpy, PyTorch or ONNX's backend test data), run as part of test_ops. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs g on the inputs dir/<input name>.npy and compares each output with dir/<output name>.npy:
 * shape, and values within rtol 1e-4, atol 1e-5 (the conformance suite's tolerance). */
static void run_against(struct graph *g, const char *dir, const char *what)
{
	struct rtensor ins[8];
	const char *names[8];
	size_t n = 0;
	char path[1200];
	for (uint32_t i = 0; i < g->n_inputs && n < 8; i++) {
		if (g->inputs[i]->init)
			continue;
		snprintf(path, sizeof path, "%s/%s.npy", dir, g->inputs[i]->name);
		cr_assert(npy_load(path, &ins[n]), "%s: no %s", what, path);
		names[n++] = g->inputs[i]->name;
	}
	struct exec_opts o = {.inputs = ins, .input_names = names, .n_inputs = n};
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &o, NULL, &e);
	cr_assert(x, "%s: %s", what, e.msg);
	for (uint32_t k = 0; k < g->n_outputs; k++) {
		struct rtensor want;
		snprintf(path, sizeof path, "%s/%s.npy", dir, g->outputs[k]->name);
		cr_assert(npy_load(path, &want), "%s: no %s", what, path);
		const struct rtensor *got = exec_value(x, g->outputs[k]);
		cr_assert_eq(got->ndim, want.ndim, "%s: %s's rank", what, g->outputs[k]->name);
		for (int d = 0; d < got->ndim; d++)
			cr_assert_eq(got->dims[d], want.dims[d], "%s: %s's dimension %d", what, g->outputs[k]->name, d);
		for (int64_t i = 0; i < got->numel; i++) {
			double a = rt_get(got, i), b = rt_get(&want, i);
			cr_expect(fabs(a - b) <= 1e-5 + 1e-4 * fabs(b), "%s: %s[%lld] %.9g, expected %.9g", what,
				  g->outputs[k]->name, (long long)i, a, b);
		}
		free(want.data);
	}
	exec_free(x);
	for (size_t i = 0; i < n; i++)
		free(ins[i].data);
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
