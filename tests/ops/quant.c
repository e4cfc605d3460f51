/* tests/ops/quant.c - forward values of the quant op family (QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv) against numbers
 * computed apart from graphdiet, run as part of test_ops.
 *
 * Two sources, both checked through `graphdiet verify --against DATA_SET MODEL` (integers exactly,
 * floats within rtol 1e-4 atol 1e-5): ONNX's own backend tests of these ops (Debian's
 * libonnx-testdata, ONNX 1.12: 17 folders), and testdata/gen_quant_cases.py, which writes the forms
 * those do not cover (int8 and int16 outputs, ties to even, other axes, blocked scales, per-row and
 * per-column parameters, batches, groups, strides, dilations, bias) with expected outputs from the
 * spec's formulas in numpy, and inputs graphdiet must refuse with exit 2. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ONNX_NODE_TESTS "/usr/share/libonnx-testdata/data/node"

/* verify of case dir (model.onnx, test_data_set_0/) */
static struct run_result verify_case(const char *dir)
{
	char model[1024], data[1024];
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	snprintf(data, sizeof data, "%s/test_data_set_0", dir);
	char *argv[] = {GD_BINARY, "verify", "--against", data, model, NULL};
	return run_cmd(argv, NULL, 0);
}

static int is_quant_test(const char *name)
{
	return !strncmp(name, "test_", 5) &&
	       (strstr(name, "quantizelinear") || strstr(name, "qlinear") || strstr(name, "integer"));
}

Test(quant, onnx_backend_tests_match)
{
	DIR *d = opendir(ONNX_NODE_TESTS);
	if (!d)
		cr_skip_test("libonnx-testdata is not installed");
	int ran = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (!is_quant_test(e->d_name))
			continue;
		char dir[600];
		snprintf(dir, sizeof dir, "%s/%s", ONNX_NODE_TESTS, e->d_name);
		struct run_result r = verify_case(dir);
		cr_expect_eq(r.status, 0, "%s: exit %d: %s%s", e->d_name, r.status, r.out, r.err);
		run_free(&r);
		ran++;
	}
	closedir(d);
	/* convinteger x3, dequantizelinear x2, dynamicquantizelinear x6 (3 expanded into standard ops),
	 * matmulinteger, qlinearconv, qlinearmatmul x2, quantizelinear x2 */
	cr_expect_eq(ran, 17);
}

Test(quant, spec_cases_match_and_bad_inputs_are_refused)
{
	char out[512], path[600];
	snprintf(out, sizeof out, "%s/quant_cases", tmpdir());
	python_ok("import runpy; runpy.run_path('" GD_SOURCE_DIR "/testdata/gen_quant_cases.py', run_name='__main__')", out,
		  "generating the quantization cases");
	snprintf(path, sizeof path, "%s/list.txt", out);
	size_t len;
	char *list = (char *)slurp(path, &len), *save = NULL;
	int good = 0, bad = 0;
	for (char *name = strtok_r(list, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
		snprintf(path, sizeof path, "%s/%s", out, name);
		struct run_result r = verify_case(path);
		if (strncmp(name, "bad_", 4)) {
			cr_expect_eq(r.status, 0, "%s: exit %d: %s%s", name, r.status, r.out, r.err);
			cr_expect(strstr(r.out, "match:"), "%s: %s", name, r.out);
			good++;
		} else {
			/* a one-line error naming the file, the node and its op */
			cr_expect_eq(r.status, 2, "%s: exit %d: %s%s", name, r.status, r.out, r.err);
			cr_expect(strstr(r.err, "graphdiet: error: ") && strstr(r.err, "model.onnx: node") &&
					  (strstr(r.err, "(QuantizeLinear)") || strstr(r.err, "(MatMulInteger)")),
				  "%s: %s", name, r.err);
			bad++;
		}
		run_free(&r);
	}
	free(list);
	cr_expect_eq(good, 15);
	cr_expect_eq(bad, 3);
}

/* The quantization ops take no gradient: a weight read only through QuantizeLinear ->
 * DequantizeLinear is a buffer, so a loss that reads no other parameter has nothing to train
 * (exit 2), and a weight before them in the graph gets no gradient, as before any op without a
 * gradient rule (Floor). */
static const char qat_py[] =
	"import sys, numpy as np, onnx\n"
	"from onnx import helper, numpy_helper, TensorProto as T\n"
	"out, first = sys.argv[1].split('|')\n"
	"inits = [numpy_helper.from_array(np.ones((3, 3), np.float32), 'W1'),\n"
	"         numpy_helper.from_array(np.ones((3, 2), np.float32), 'W2'),\n"
	"         numpy_helper.from_array(np.float32(0.1), 's')]\n"
	"nodes = [helper.make_node('QuantizeLinear', ['h', 's'], ['q']),\n"
	"         helper.make_node('DequantizeLinear', ['q', 's'], ['dq']),\n"
	"         helper.make_node('MatMul', ['dq', 'W2'], ['y']),\n"
	"         helper.make_node('ReduceSum', ['y'], ['loss'], keepdims=0)]\n"
	"if first == 'weight':\n"
	"    nodes[0].input[0] = 'W2'\n"
	"    nodes[2].input[:] = ['x', 'dq']\n"
	"else:\n"
	"    nodes.insert(0, helper.make_node('MatMul', ['x', 'W1'], ['h']))\n"
	"g = helper.make_graph(nodes, 'qat', [helper.make_tensor_value_info('x', T.FLOAT, [4, 3])],\n"
	"                      [helper.make_tensor_value_info('loss', T.FLOAT, [])], inits)\n"
	"m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])\n"
	"m.ir_version = 8\n"
	"onnx.save(m, out)\n";

Test(quant, train_takes_no_gradient_through_quantization)
{
	char model[512], arg[600], train[512];
	snprintf(model, sizeof model, "%s/qat_weight.onnx", tmpdir());
	snprintf(arg, sizeof arg, "%s|weight", model);
	python_ok(qat_py, arg, "writing a model quantizing its weight");
	snprintf(train, sizeof train, "%s/qat_weight_train.onnx", tmpdir());
	char *argv[] = {GD_BINARY, "train", model, "-o", train, NULL};
	struct run_result r = run_cmd(argv, NULL, 0);
	cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, "does not depend on any trainable parameter"), "%s", r.err);
	run_free(&r);

	snprintf(model, sizeof model, "%s/qat_act.onnx", tmpdir());
	snprintf(arg, sizeof arg, "%s|activation", model);
	python_ok(qat_py, arg, "writing a model quantizing an activation");
	snprintf(train, sizeof train, "%s/qat_act_train.onnx", tmpdir());
	char *argv2[] = {GD_BINARY, "train", model, "-o", train, NULL};
	r = run_cmd(argv2, NULL, 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	struct graph *g = load_ok(train);
	int w1 = 0, w2 = 0;
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		w1 |= !strcmp(g->outputs[i]->name, "W1_grad");
		w2 |= !strcmp(g->outputs[i]->name, "W2_grad");
	}
	cr_expect(!w1 && w2, "W1_grad %d (want none), W2_grad %d (want one)", w1, w2);
	graph_free(g);
}
