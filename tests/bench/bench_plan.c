/* bench_plan.c - plan quality: peak memory and recompute overhead (% of forward FLOPs) of each
 * checkpointing strategy, and of auto at budgets that cut none's activation bytes at its peak to
 * 70, 50 and 30%. Also, on a 9-layer chain small enough to try every kept set, auto against that
 * exact optimum.
 *
 *     /usr/bin/python3 tests/bench/gen_plan_models.py /tmp/pm
 *     build/tests/bench/bench_plan /tmp/pm/{chain,transformer24,resnet50,unet,rnn}.onnx
 */
#include "autodiff/ad.h"
#include "io/format.h"
#include "plan/auto.h"
#include "plan/memsim.h" /* node_flops */
#include "plan/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static struct graph *load(const char *path)
{
	struct gd_err e = {0};
	struct graph *g = model_load(path, FMT_AUTO, &e);
	if (!g) {
		fprintf(stderr, "%s: %s\n", path, e.msg);
		exit(2);
	}
	return g;
}

static struct plan_report plan(const char *path, const char *strategy, uint64_t budget, double *secs)
{
	struct graph *g = load(path);
	struct plan_opts po = {.budget = budget, .has_budget = budget != 0};
	if (ckpt_parse(strategy, &po.ckpt)) {
		fprintf(stderr, "%s: not a strategy\n", strategy);
		exit(2);
	}
	po.ckpt.budget = budget;
	struct gd_err e = {0};
	struct plan_report r;
	double t0 = now();
	if (plan_memory(g, &po, &r, &e)) {
		fprintf(stderr, "%s: %s\n", path, e.msg);
		exit(2);
	}
	*secs = now() - t0;
	graph_free(g); /* r's arena strings are not used after this */
	return r;
}

static void row(const char *model, const char *what, const struct plan_report *r, uint64_t none, double secs)
{
	printf("| %s | %s | %.2f | %.0f%% | %.1f%% | %s | %.2f |\n", model, what, (double)r->peak_after / 1048576.0,
	       100.0 * (double)r->peak_after / (double)none,
	       r->forward_flops ? 100.0 * (double)r->recompute_flops / (double)r->forward_flops : 0.0,
	       r->strategy != CKPT_AUTO ? "" : r->auto_plan.fits ? "yes" : "no (infeasible)", secs);
}

/* auto against every kept set of a small chain */
static void exhaustive(void)
{
	const char *path = "/tmp/bench_plan_chain9.yaml";
	FILE *f = fopen(path, "w");
	fprintf(f, "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [64, 32]}]\nparams:\n");
	for (int i = 0; i < 9; i++)
		fprintf(f, "  - {name: w%d, dtype: float32, shape: [32, 32], init: {dist: normal, std: 0.2, seed: %d}}\n", i, i);
	fprintf(f, "nodes:\n");
	for (int i = 0; i < 9; i++) {
		char prev[16];
		snprintf(prev, sizeof prev, i ? "t%d" : "x", i - 1);
		fprintf(f, "  - {op: MatMul, inputs: [%s, w%d], outputs: [m%d]}\n  - {op: Tanh, inputs: [m%d], outputs: [t%d]}\n",
			prev, i, i, i, i);
	}
	fprintf(f, "  - {op: ReduceSum, inputs: [t8], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n");
	fclose(f);
	struct graph *g = load(path);
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	struct exec_opts so = {.shapes_only = 1};
	struct exec *x;
	struct bottlenecks bn;
	if (autodiff(g, &ao, &res, &e) || graph_toposort(g, &e) || find_bottlenecks(g, res.loss, &bn, &e) ||
	    !(x = exec_run(g, &so, NULL, &e))) {
		fprintf(stderr, "%s\n", e.msg);
		exit(3);
	}
	uint32_t cand[32], nc = 0;
	for (uint32_t v = 0; v < g->n_values; v++)
		if (value_is_activation(g->values[v]) && !(g->values[v]->flags & VALUE_OUTPUT))
			cand[nc++] = v;
	size_t n = (size_t)1 << nc;
	uint64_t *peak = calloc(n, sizeof *peak), *flops = calloc(n, sizeof *flops), *nf = calloc(g->n_nodes, sizeof *nf);
	uint8_t *keep = calloc(g->n_values, 1);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		nf[i] = node_flops(g->nodes[i], x);
	uint64_t lo = UINT64_MAX, hi = 0, fwd = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		fwd += node_is_forward(g->nodes[i]) ? nf[i] : 0;
	struct memmodel mm;
	if (memmodel_build(g, x, &mm, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		exit(3);
	}
	double t0 = now();
	for (size_t mask = 0; mask < n; mask++) {
		for (uint32_t k = 0; k < nc; k++)
			keep[cand[k]] = (uint8_t)(mask >> k & 1);
		if (ckpt_weigh(&mm, keep, nf, &peak[mask], &flops[mask], NULL, &e)) {
			fprintf(stderr, "%s\n", e.msg);
			exit(3);
		}
		lo = peak[mask] < lo ? peak[mask] : lo;
		hi = peak[mask] > hi ? peak[mask] : hi;
	}
	printf("\n9-layer MatMul+Tanh chain, %u candidate tensors: all %zu kept sets weighed in %.1f s\n\n", nc, n,
	       now() - t0);
	printf("| budget (between the lowest and highest peak) | optimum recompute %% | auto recompute %% | auto / optimum |\n");
	printf("|---|---|---|---|\n");
	for (int q = 0; q <= 10; q += 2) {
		uint64_t b = lo + (hi - lo) * (uint64_t)q / 10, opt = UINT64_MAX;
		for (size_t i = 0; i < n; i++)
			if (peak[i] <= b && flops[i] < opt)
				opt = flops[i];
		/* as plan runs it: with the speed and memory strategies' plans as seeds */
		struct auto_result r;
		struct ckpt c = {.kind = CKPT_AUTO, .budget = b};
		uint8_t *kept = NULL;
		if (ckpt_choose(g, &mm, &bn, &c, &kept, &r, &e)) {
			fprintf(stderr, "%s\n", e.msg);
			exit(3);
		}
		free(kept);
		if (opt == UINT64_MAX || !r.fits) {
			char why[96] = "fits";
			if (!r.fits)
				snprintf(why, sizeof why, "no plan found: its lowest peak is %llu B (+%.2f%%)",
					 (unsigned long long)r.peak, 100.0 * ((double)r.peak / (double)b - 1));
			printf("| %d%% (%llu B) | %s | %s |  |\n", q * 10, (unsigned long long)b, opt == UINT64_MAX ? "none fits" : "fits",
			       why);
			continue;
		}
		printf("| %d%% (%llu B) | %.1f%% | %.1f%% | %.3f |\n", q * 10, (unsigned long long)b, 100.0 * (double)opt / (double)fwd,
		       100.0 * (double)r.flops / (double)fwd, opt ? (double)r.flops / (double)opt : r.flops ? 1e9 : 1.0);
	}
	memmodel_free(&mm);
	free(peak);
	free(flops);
	free(nf);
	free(keep);
	exec_free(x);
	graph_free(g);
}

int main(int argc, char **argv)
{
	printf("| model | strategy | peak MiB | of none | recompute (%% of forward FLOPs) | fits | plan s |\n");
	printf("|---|---|---|---|---|---|---|\n");
	for (int i = 1; i < argc; i++) {
		const char *name = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
		double s;
		struct plan_report none = plan(argv[i], "none", 0, &s);
		row(name, "none", &none, none.peak_after, s);
		static const char *const fixed[] = {"speed", "memory"};
		for (int k = 0; k < 2; k++) {
			struct plan_report r = plan(argv[i], fixed[k], 0, &s);
			row(name, fixed[k], &r, none.peak_after, s);
		}
		static const int keep_pct[] = {70, 50, 30};
		for (int k = 0; k < 3; k++) {
			uint64_t b = none.peak_after - none.at_peak.activations * (uint64_t)(100 - keep_pct[k]) / 100;
			struct plan_report r = plan(argv[i], "auto", b, &s);
			char what[64];
			snprintf(what, sizeof what, "auto, budget %.2f MiB (%d%% act.)", (double)b / 1048576.0, keep_pct[k]);
			row(name, what, &r, none.peak_after, s);
		}
	}
	exhaustive();
	return 0;
}
