/* test_oom.c - out-of-memory on every allocation of a read-check-sort-write cycle.
 *
 * As SQLite's malloc tests do: make allocation N fail, for every N until a run gets through, and
 * require a clean "out of memory" status each time. Run under LeakSanitizer (CI's sanitizer
 * build), this also proves that no error path leaks. */
#include "helpers.h"
#include "io/onnx.h"
#include "io/yaml.h"
#include "plan/plan.h"
#include "util/xalloc.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cycle(const uint8_t *buf, size_t len, int yaml, struct gd_err *e)
{
	struct graph *g = yaml ? yaml_read(buf, len, "mem", TESTDATA "/yaml", e)
			       : onnx_read(buf, len, "mem", NULL, NULL, NULL, e);
	if (!g)
		return e->code;
	int rc = graph_check(g, e);
	if (!rc)
		rc = graph_toposort(g, e);
	if (!rc) {
		FILE *f = fopen("/dev/null", "w");
		rc = yaml ? onnx_write(g, f, e) : yaml_write(g, f, 16, e);
		fclose(f);
	}
	graph_free(g);
	return rc;
}

static int cycle(const uint8_t *buf, size_t len, int yaml, struct gd_err *e);
static int plan_cycle(const uint8_t *buf, size_t len, int yaml, struct gd_err *e);

static void every_failure_of(int (*run)(const uint8_t *, size_t, int, struct gd_err *), const char *path, int yaml)
{
	size_t len;
	uint8_t *buf = slurp(path, &len);
	long n;
	for (n = 0;; n++) {
		struct gd_err e = {0};
		xalloc_fail_after(n);
		int rc = run(buf, len, yaml, &e);
		xalloc_fail_after(-1);
		if (rc == 0)
			break;
		cr_assert_eq(rc, GD_EINTERNAL, "%s, allocation %ld failing: status %d (%s)", path, n, rc, e.msg);
		cr_assert_str_eq(e.msg, "out of memory", "%s, allocation %ld", path, n);
	}
	cr_assert_gt(n, 3, "the cycle allocates: the injection reached it");
	free(buf);
}

static void every_failure(const char *path, int yaml)
{
	every_failure_of(cycle, path, yaml);
}

Test(oom, plan_with_recompute)
{
	every_failure_of(plan_cycle, TESTDATA "/yaml/tiny_mlp.yaml", 1);
}

Test(oom, onnx_cycle)
{
	every_failure(TESTDATA "/rescnn.onnx", 0);
}

Test(oom, yaml_cycle)
{
	every_failure(TESTDATA "/yaml/if_branch.yaml", 1);
	every_failure(TESTDATA "/yaml/tiny_mlp.yaml", 1);
}

/* The planner: build the training graph, find bottlenecks, rewrite with recompute, simulate. */
static int plan_cycle(const uint8_t *buf, size_t len, int yaml, struct gd_err *e)
{
	(void)yaml;
	struct graph *g = yaml_read(buf, len, "mem", TESTDATA "/yaml", e);
	if (!g)
		return e->code;
	int rc = graph_check(g, e);
	if (!rc)
		rc = graph_toposort(g, e);
	struct exec_binding b = {"batch", 2};
	struct plan_opts po = {.dims = &b, .n_dims = 1, .ckpt = {CKPT_MEMORY, NULL}};
	struct plan_report r;
	if (!rc)
		rc = plan_memory(g, &po, &r, e);
	graph_free(g);
	return rc;
}
