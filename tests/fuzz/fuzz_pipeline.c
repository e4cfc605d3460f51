/* fuzz_pipeline.c - libFuzzer target past the readers: a YAML graph that reads and checks goes
 * through shape inference, constant folding, autodiff and checkpoint planning (plan --checkpoint
 * memory), and, when it is small, the executor on random inputs, then its training graph too.
 * Every failure must be a clean error (a code and a message); a crash, a sanitizer report or a
 * trap is a bug. Small: at most 64 nodes, 1 MB of initializers, and 1 MB of tensors as the
 * shapes-only run finds them before anything is computed. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "io/tensor.h"
#include "io/yaml.h"
#include "plan/plan.h"
#include "rewrite/fold.h"

#include <string.h>

enum { MAX_NODES = 64, MAX_BYTES = 1 << 20 };

static void clean(const struct gd_err *e)
{
	if (!e->code || !e->msg[0])
		__builtin_trap(); /* a failure without a message */
}

/* Whether every value's shape is known and the whole fits MAX_BYTES, after a shapes-only run. */
static int small(struct graph *g, const struct exec_opts *o)
{
	for (uint32_t i = 0; i < g->n_inits; i++) {
		const struct tensor *t = g->inits[i]->init;
		int64_t n = t ? tensor_numel(t) : 0;
		if (n < 0 || (uint64_t)n * dtype_size(t->dtype) > MAX_BYTES)
			return 0;
	}
	struct exec_opts so = *o;
	so.shapes_only = 1;
	so.random_inputs = 0;
	struct gd_err e = {0};
	struct exec *x = exec_run(g, &so, NULL, &e);
	if (!x) {
		clean(&e);
		return 0;
	}
	uint64_t total = 0;
	for (uint32_t i = 0; i < g->n_values; i++) {
		const struct rtensor *t = exec_value(x, g->values[i]);
		if (t && t->known)
			total += t->nbytes;
	}
	exec_free(x);
	return total <= MAX_BYTES;
}

static void execute(struct graph *g, const struct exec_opts *o)
{
	if (!small(g, o))
		return;
	struct gd_err e = {0};
	struct exec *x = exec_run(g, o, NULL, &e);
	if (!x)
		clean(&e);
	exec_free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gd_err e = {0};
	struct graph *g = yaml_read(data, size, "fuzz", "/nonexistent", &e);
	if (!g) {
		clean(&e);
		return 0;
	}
	size_t folded;
	struct exec_opts o = {.default_dim = 2, .random_inputs = 1, .seed = 1};
	if (g->n_nodes > MAX_NODES || graph_check(g, &e) || graph_toposort(g, &e)) {
		if (g->n_nodes <= MAX_NODES)
			clean(&e);
		graph_free(g);
		return 0;
	}
	execute(g, &o);
	/* what train does before differentiating, then the plan, which builds the training graph */
	struct plan_report r;
	struct plan_opts po = {.report_only = 1};
	po.ckpt.kind = CKPT_MEMORY;
	if (graph_fold_constants(g, &folded, &e) || plan_memory(g, &po, &r, &e))
		clean(&e);
	graph_free(g);
	/* the training graph itself, run */
	memset(&e, 0, sizeof e);
	g = yaml_read(data, size, "fuzz", "/nonexistent", &e);
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	if (g && !graph_check(g, &e) && !graph_toposort(g, &e) && !graph_fold_constants(g, &folded, &e)) {
		if (autodiff(g, &ao, &res, &e))
			clean(&e);
		else
			execute(g, &o);
	}
	graph_free(g);
	return 0;
}
