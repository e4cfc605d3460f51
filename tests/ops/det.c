/* tests/ops/det.c - forward values of Det (linalg.c) and of the recurrent forms issue 47 added to
 * rnn.c (layout 1, LSTM peepholes, sequence_lens), run as part of test_ops.
 *
 * The cases are testdata/ops_rnnform.h, which testdata/ops_rnnform.py writes: Det's expected values
 * from numpy.linalg.det (a singular matrix, one singular only by roundoff, 1 x 1, a row swap,
 * batches), the recurrent ones from a NumPy transcription of the ONNX spec's equations. float64
 * must agree to 1e-9 relative (1e-12 absolute: a matrix singular by roundoff has a determinant of
 * roundoff's size, which LU orders differently); float32 to 1e-5. */
#include "helpers.h"
#include "io/yaml.h"
#include "util/err.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rnnform_case {
	const char *name, *params, *nodes;
	int ndim;
	int64_t dims[4];
	const double *want;
};

#include "../../testdata/ops_rnnform.h"

static void expect_case(const struct rnnform_case *c)
{
	static char text[1 << 16];
	int len = snprintf(text, sizeof text, "graphdiet: 1\nopset: 14\nparams:\n%snodes:\n%soutputs: [{name: y}]\n",
			   c->params, c->nodes);
	cr_assert_lt(len, (int)sizeof text, "%s: text too long", c->name);
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, (size_t)len, "rnnform.yaml", ".", &e);
	cr_assert(g, "%s: %s", c->name, e.msg);
	cr_assert_eq(graph_check(g, &e) || graph_toposort(g, &e), 0, "%s: %s", c->name, e.msg);
	struct exec *x = exec_run(g, &(struct exec_opts){0}, NULL, &e);
	cr_assert(x, "%s: %s", c->name, e.msg);
	const struct rtensor *y = exec_value(x, strmap_get(&g->names, "y"));
	cr_assert(y && y->data, "%s: no output", c->name);
	cr_assert_eq(y->ndim, c->ndim, "%s: rank %d, want %d", c->name, y->ndim, c->ndim);
	for (int i = 0; i < c->ndim; i++)
		cr_assert_eq(y->dims[i], c->dims[i], "%s: dimension %d is %lld", c->name, i, (long long)y->dims[i]);
	double rtol = y->dtype == DT_FLOAT ? 1e-5 : 1e-9;
	for (int64_t i = 0; i < y->numel; i++) {
		double got = rt_get(y, i), w = c->want[i];
		cr_expect(fabs(got - w) <= rtol * fabs(w) + 1e-12, "%s: element %lld is %.17g, want %.17g", c->name,
			  (long long)i, got, w);
	}
	exec_free(x);
	graph_free(g);
}

static void expect_prefix(const char *prefix, size_t at_least)
{
	size_t ran = 0;
	for (size_t i = 0; i < sizeof rnnform_cases / sizeof *rnnform_cases; i++)
		if (!strncmp(rnnform_cases[i].name, prefix, strlen(prefix))) {
			expect_case(&rnnform_cases[i]);
			ran++;
		}
	cr_expect_geq(ran, at_least, "%zu %s cases", ran, prefix);
}

Test(det, against_numpy)
{
	expect_prefix("Det ", 7);
}

Test(det, recurrent_layout_1_peepholes_and_sequence_lens_against_numpy)
{
	expect_prefix("LSTM ", 2);
	expect_prefix("GRU ", 2);
	expect_prefix("RNN ", 2);
}

/* Bad shapes are refused with a reason, never a crash. */
Test(det, non_square_and_bad_sequence_lens_are_refused)
{
	static const struct {
		const char *params, *nodes, *want;
	} bad[] = {
		{"  - {name: x, dtype: float64, shape: [2, 3], data: [1, 2, 3, 4, 5, 6]}\n",
		 "  - {op: Det, inputs: [x], outputs: [y]}\n", "square"},
		{"  - {name: x, dtype: float64, shape: [3], data: [1, 2, 3]}\n", "  - {op: Det, inputs: [x], outputs: [y]}\n",
		 "square"},
		{"  - {name: x, dtype: float64, shape: [2, 1, 1], data: [1, 2]}\n"
		 "  - {name: w, dtype: float64, shape: [1, 1, 1], data: [1]}\n"
		 "  - {name: r, dtype: float64, shape: [1, 1, 1], data: [1]}\n"
		 "  - {name: sl, dtype: int32, shape: [1], data: [3]}\n",
		 "  - {op: RNN, inputs: [x, w, r, \"\", sl], outputs: [y], attrs: {hidden_size: 1}}\n", "sequence_lens[0] is 3"},
		{"  - {name: x, dtype: float64, shape: [2, 1, 1], data: [1, 2]}\n"
		 "  - {name: w, dtype: float64, shape: [1, 1, 1], data: [1]}\n"
		 "  - {name: r, dtype: float64, shape: [1, 1, 1], data: [1]}\n",
		 "  - {op: RNN, inputs: [x, w, r], outputs: [y], attrs: {hidden_size: 1, layout: 2}}\n", "layout"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char text[4096];
		snprintf(text, sizeof text, "graphdiet: 1\nopset: 14\nparams:\n%snodes:\n%soutputs: [{name: y}]\n",
			 bad[i].params, bad[i].nodes);
		struct gd_err e = {0};
		struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "bad.yaml", ".", &e);
		cr_assert(g, "%s", e.msg);
		struct exec *x = graph_check(g, &e) || graph_toposort(g, &e) ? NULL : exec_run(g, &(struct exec_opts){0}, NULL, &e);
		cr_expect_null(x, "%s ran", bad[i].nodes);
		cr_expect_eq(e.code, GD_EINPUT, "%s: code %d (%s)", bad[i].nodes, e.code, e.msg);
		cr_expect(strstr(e.msg, bad[i].want), "%s: '%s' does not say '%s'", bad[i].nodes, e.msg, bad[i].want);
		exec_free(x);
		graph_free(g);
	}
}
