/* test_yaml.c - the YAML form: lossless round trips both ways, attribute typing, inits. */
#include "helpers.h"
#include "io/format.h"
#include "io/onnx.h"
#include "io/tensor.h"
#include "io/yaml.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct graph *yaml_mem(const uint8_t *buf, size_t len)
{
	struct gd_err e = {0};
	struct graph *g = yaml_read(buf, len, "mem", TESTDATA "/yaml", &e);
	cr_assert(g, "%s", e.msg);
	cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s", e.msg);
	return g;
}

static struct graph *yaml_text(const char *text)
{
	return yaml_mem((const uint8_t *)text, strlen(text));
}

static int yaml_error(const char *text, struct gd_err *e)
{
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "mem", NULL, e);
	if (g && !graph_check(g, e) && !graph_toposort(g, e)) {
		graph_free(g);
		return 0;
	}
	graph_free(g);
	return e->code;
}

Test(yaml, onnx_to_yaml_to_onnx_is_byte_exact)
{
	for (const char *const *m = testdata_models; *m; m++) {
		char path[512];
		model_path(path, sizeof path, *m);
		size_t len, ylen, len2;
		uint8_t *orig = slurp(path, &len);
		struct graph *g = load_ok(path);
		uint8_t *y = write_mem(g, 1, &ylen);
		struct graph *g2 = yaml_mem(y, ylen);
		char why[256];
		cr_assert(graph_equal(g, g2, why, sizeof why), "%s: %s", *m, why);
		uint8_t *back = write_mem(g2, 0, &len2);
		cr_assert_eq(len2, len, "%s", *m);
		cr_assert_eq(memcmp(back, orig, len), 0, "%s: bytes differ after YAML", *m);
		graph_free(g2);
		graph_free(g);
		free(orig);
		free(y);
		free(back);
	}
}

Test(yaml, hand_written_graphs_round_trip)
{
	for (const char *const *m = testdata_yaml; *m; m++) {
		char path[512];
		snprintf(path, sizeof path, "%s/%s", TESTDATA, *m);
		struct graph *g = load_ok(path);
		size_t ylen, y2len;
		uint8_t *y = write_mem(g, 1, &ylen);
		struct graph *g2 = yaml_mem(y, ylen);
		char why[256];
		cr_assert(graph_equal(g, g2, why, sizeof why), "%s: %s", *m, why);
		uint8_t *y2 = write_mem(g2, 1, &y2len);
		cr_assert_eq(ylen, y2len, "%s: YAML output is a fixed point", *m);
		cr_assert_eq(memcmp(y, y2, ylen), 0, "%s", *m);
		graph_free(g2);
		graph_free(g);
		free(y);
		free(y2);
	}
}

Test(yaml, attribute_types_follow_how_they_are_written)
{
	struct graph *g = load_ok(TESTDATA "/yaml/npy_param.yaml");
	const struct node *n = g->nodes[2];
	cr_assert_str_eq(n->op_type, "MyOp");
	cr_assert_eq(n->op, OP_UNKNOWN);
	const struct attr *a;
	cr_assert((a = node_attr(n, "alpha")) && a->type == ATTR_FLOAT && a->f == 0.5f);
	cr_assert((a = node_attr(n, "count")) && a->type == ATTR_INT && a->i == 3);
	cr_assert((a = node_attr(n, "mode")) && a->type == ATTR_STRING && a->s.n == 4 && !memcmp(a->s.p, "fast", 4));
	cr_assert((a = node_attr(n, "ratios")) && a->type == ATTR_FLOATS && a->n == 2 && a->floats[1] == 0.5f);
	cr_assert((a = node_attr(n, "sizes")) && a->type == ATTR_INTS && a->n == 3 && a->ints[2] == 3);
	cr_assert((a = node_attr(n, "tags")) && a->type == ATTR_STRINGS && a->n == 2);
	cr_assert((a = node_attr(n, "empty")) && a->type == ATTR_INTS && a->n == 0);
	graph_free(g);
}

Test(yaml, floats_survive_to_the_bit)
{
	/* Awkward float32 values through inline data: denormals, extremes, values near ties. */
	const float vals[] = {0.1f, -0.0f, 1e-45f, 3.4028235e38f, 1.17549435e-38f, 16777217.0f, 0.3333333f, 2.5f};
	size_t n = sizeof vals / sizeof *vals;
	char text[2048];
	int k = snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\nparams:\n  - {name: w, dtype: float32, shape: [%zu], data: [", n);
	for (size_t i = 0; i < n; i++)
		k += snprintf(text + k, sizeof text - (size_t)k, "%s%.9g", i ? ", " : "", (double)vals[i]);
	snprintf(text + k, sizeof text - (size_t)k, "]}\nnodes:\n  - {op: Relu, inputs: [w], outputs: [y]}\noutputs: [{name: y}]\n");
	struct graph *g = yaml_text(text);
	size_t ylen;
	uint8_t *y = write_mem(g, 1, &ylen);
	struct graph *g2 = yaml_mem(y, ylen);
	cr_assert_eq(memcmp(g2->inits[0]->init->bytes.p, vals, sizeof vals), 0);
	cr_assert(strstr((char *)y, "data: [0.1, -0.0, 1e-45, 3.4028235e+38"), "%s", y);
	graph_free(g2);
	graph_free(g);
	free(y);
}

Test(yaml, nan_payloads_use_bytes)
{
	struct graph *g = yaml_text("graphdiet: 1\nopset: 17\nparams:\n  - {name: w, dtype: float32, shape: [1], raw: \"AQDAfw==\"}\n"
				    "nodes:\n  - {op: Relu, inputs: [w], outputs: [y]}\noutputs: [{name: y}]\n");
	size_t ylen;
	uint8_t *y = write_mem(g, 1, &ylen);
	cr_assert(strstr((char *)y, "raw: AQDAfw=="), "a NaN with a payload is written as bytes: %s", y);
	free(y);
	graph_free(g);
}

Test(yaml, random_init_is_deterministic_and_distributed)
{
	const char *text = "graphdiet: 1\nopset: 17\nparams:\n"
			   "  - {name: w, dtype: float32, shape: [100, 100], init: {dist: normal, mean: 1.0, std: 0.5, seed: 7}}\n"
			   "  - {name: u, dtype: float64, shape: [10000], init: {dist: uniform, low: -2, high: 2, seed: 7}}\n"
			   "nodes:\n  - {op: Add, inputs: [w, w], outputs: [y]}\n  - {op: Neg, inputs: [u], outputs: [z]}\n"
			   "outputs: [{name: y}, {name: z}]\n";
	struct graph *g1 = yaml_text(text), *g2 = yaml_text(text);
	struct bytes b1, b2, bu;
	struct gd_err e = {0};
	cr_assert_eq(tensor_bytes(g1, g1->inits[0]->init, &b1, &e), 0);
	cr_assert_eq(tensor_bytes(g2, g2->inits[0]->init, &b2, &e), 0);
	cr_assert_eq(b1.n, 40000);
	cr_assert_eq(memcmp(b1.p, b2.p, b1.n), 0, "same seed, same bits");
	double sum = 0, sq = 0;
	for (int i = 0; i < 10000; i++) {
		float v;
		memcpy(&v, b1.p + 4 * i, 4);
		sum += v;
		sq += (v - 1.0) * (v - 1.0);
	}
	cr_assert(fabs(sum / 10000 - 1.0) < 0.02, "mean %g", sum / 10000);
	cr_assert(fabs(sqrt(sq / 10000) - 0.5) < 0.02, "std %g", sqrt(sq / 10000));
	cr_assert_eq(tensor_bytes(g1, g1->inits[1]->init, &bu, &e), 0);
	for (int i = 0; i < 10000; i++) {
		double v;
		memcpy(&v, bu.p + 8 * i, 8);
		cr_assert(v >= -2 && v < 2);
	}
	graph_free(g1);
	graph_free(g2);
}

Test(yaml, npy_params_load_and_materialise_in_onnx)
{
	struct graph *g = load_ok(TESTDATA "/yaml/npy_param.yaml");
	struct tensor *t = g->inits[0]->init;
	cr_assert_eq(t->src, TSRC_NPY);
	size_t len;
	uint8_t *buf = write_mem(g, 0, &len);
	struct gd_err e = {0};
	struct graph *g2 = onnx_read(buf, len, "mem", NULL, NULL, NULL, &e);
	cr_assert(g2, "%s", e.msg);
	const struct tensor *w = g2->inits[0]->init;
	cr_assert_eq(w->src, TSRC_BYTES);
	float f[6];
	cr_assert_eq(w->bytes.n, sizeof f);
	memcpy(f, w->bytes.p, sizeof f);
	for (int i = 0; i < 6; i++)
		cr_assert_float_eq(f[i], i / 10.0f, 1e-7, "np.arange(6)/10 saved by the testdata script");
	graph_free(g2);
	graph_free(g);
	free(buf);
}

Test(yaml, strict_errors_name_the_line)
{
	struct gd_err e = {0};
	cr_assert_eq(yaml_error("graphdiet: 2\n", &e), GD_EINPUT);
	cr_assert_str_eq(e.msg, "line 1: graphdiet YAML format version 2 is not supported (this is 1)");
	struct gd_err e2 = {0};
	cr_assert_eq(yaml_error("graphdiet: 1\nnodes:\n  - {op: Relu, inputs: [x], outputs: [y], attrs: {k: []}}\n", &e2),
		     GD_EINPUT);
	cr_assert(strstr(e2.msg, "line 3: node #0 (Relu): attribute 'k': an empty list needs the explicit form"), "%s",
		  e2.msg);
	struct gd_err e3 = {0};
	cr_assert_eq(yaml_error("- just\n- a list\n", &e3), GD_EINPUT);
	cr_assert(strstr(e3.msg, "must be a mapping"), "%s", e3.msg);
	struct gd_err e4 = {0};
	cr_assert_eq(yaml_error("graphdiet: 1\nparams:\n  - {name: w, dtype: float32, shape: [2], data: [1, 2], init: zeros}\n", &e4),
		     GD_EINPUT);
	cr_assert(strstr(e4.msg, "more than one of data"), "%s", e4.msg);
}

Test(yaml, names_that_need_quotes)
{
	const char *text = "graphdiet: 1\nopset: 17\ninputs: [{name: \"a: b\", dtype: float32, shape: [2]}]\n"
			   "nodes:\n  - {name: \"yes\", op: Relu, inputs: [\"a: b\"], outputs: [\"1.5\"]}\n"
			   "  - {name: \"tab\\there\", op: Neg, inputs: [\"1.5\"], outputs: [\"#out\"]}\n"
			   "outputs: [{name: \"#out\"}]\n";
	struct graph *g = yaml_text(text);
	size_t ylen;
	uint8_t *y = write_mem(g, 1, &ylen);
	struct graph *g2 = yaml_mem(y, ylen);
	char why[256];
	cr_assert(graph_equal(g, g2, why, sizeof why), "%s\n%s", why, y);
	cr_assert_str_eq(g2->nodes[1]->name, "tab\there");
	graph_free(g2);
	graph_free(g);
	free(y);
}
