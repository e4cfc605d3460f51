/* bench_exact.c - the exact kept-set search (plan/exact.h) against auto on small DAGs: at budgets of
 * 99 to 20% of none's peak, each one's recompute FLOPs, the search's weighs and both times. The
 * models are planned as `graphdiet plan M --loss-fn mse` plans them (constants folded, an MSE loss
 * appended, the training graph built), so auto's column is what `plan --checkpoint auto --budget B
 * --format json` reports as recompute_flops (run_exact.sh checks that).
 *
 *     /usr/bin/python3 tests/bench/gen_exact_dags.py /tmp/exb
 *     build/tests/bench/bench_exact [--dense] [--weighs N] [--long N] [--plans DIR] /tmp/exb/{resmlp,unet3,transformer2}.onnx
 *
 * --dense: every budget from 99% down to 20% in steps of 1%, not thirteen of them.
 *
 * No exact search covers plans with backward checkpoints on these DAGs, so the last columns compare
 * auto with a long annealing sweep (anneal.h) from everything kept, alone: --long N new plans weighed
 * (default 16,000 a candidate: 8 to 40 times what auto weighs on these DAGs), the best it found that fits.
 *
 * --plans DIR writes each plan exact finds as DIR/<model>_<percent>.yaml, the list of kept values
 * `plan --checkpoint-file` reads, so that graphdiet itself re-weighs it (run_exact.sh). */
#include "autodiff/ad.h"
#include "io/format.h"
#include "plan/anneal.h"
#include "plan/auto.h"
#include "plan/exact.h"
#include "plan/strategy.h"
#include "rewrite/fold.h"
#include "rewrite/loss.h"

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

static void fail(const char *path, const struct gd_err *e)
{
	fprintf(stderr, "bench_exact: %s: %s\n", path, e->msg);
	exit(2);
}

/* The kept forward values of plan `keep` as a YAML list (plan --checkpoint-file F) into
 * dir/<name without its extension>_<pct>.yaml. */
static void write_plan(const char *dir, const char *name, int pct, const struct graph *g, const struct memmodel *m,
		       const uint8_t *keep)
{
	char file[1024];
	const char *dot = strrchr(name, '.');
	snprintf(file, sizeof file, "%s/%.*s_%d.yaml", dir, (int)(dot ? (size_t)(dot - name) : strlen(name)), name, pct);
	FILE *f = fopen(file, "w");
	if (!f) {
		fprintf(stderr, "bench_exact: %s: cannot write\n", file);
		exit(2);
	}
	for (uint32_t v = 0; v < g->n_values; v++)
		if ((m->f.vflags[v] & FLAT_DROPPABLE) && (keep[v] & 1))
			fprintf(f, "- \"%s\"\n", g->values[v]->name);
	fclose(f);
}

static void bench(const char *path, uint32_t max_weighs, uint32_t long_weighs, int dense, const char *plans)
{
	struct gd_err e = {0};
	struct graph *g = model_load(path, FMT_AUTO, &e);
	size_t folded;
	if (!g || graph_fold_constants(g, &folded, &e) || loss_append(g, LOSS_MSE, NULL, "target", &e))
		fail(path, &e);
	struct autodiff_opts ao = {.loss = loss_name(g)};
	struct autodiff_result res;
	struct bottlenecks bn;
	struct exec_opts so = {.shapes_only = 1};
	struct exec *x = NULL;
	struct memmodel m;
	const uint64_t *nflops;
	if (autodiff(g, &ao, &res, &e) || find_bottlenecks(g, res.loss, &bn, &e) || !(x = exec_run(g, &so, NULL, &e)) ||
	    memmodel_build(g, x, &m, &e) || !(nflops = memmodel_flops(&m, g, &e)))
		fail(path, &e);
	/* auto's candidates: forward values that may be dropped and are not fixed */
	uint32_t *cand = malloc(sizeof *cand * g->n_values), nc = 0;
	for (uint32_t v = 0; v < g->n_values; v++)
		if ((m.f.vflags[v] & (FLAT_DROPPABLE | FLAT_FIXED)) == FLAT_DROPPABLE)
			cand[nc++] = v;
	struct ckpt none = {.kind = CKPT_NONE}, au = {.kind = CKPT_AUTO};
	uint8_t *keep = NULL, *all = malloc(g->n_values);
	uint64_t none_peak, none_flops;
	if (ckpt_choose(g, &m, &bn, &none, &keep, NULL, &e) || ckpt_weigh(&m, keep, nflops, &none_peak, &none_flops, NULL, &e))
		fail(path, &e);
	free(keep);
	/* the reference: the annealing sweep from everything kept, with long_weighs (8-40x auto's here) */
	struct auto_result low;
	au.budget = 1;
	if (ckpt_choose(g, &m, &bn, &au, &keep, &low, &e))
		fail(path, &e);
	free(keep);
	memset(all, RC_KEPT, g->n_values);
	struct anneal_plan seed = {none_peak, none_flops, all}, *front;
	size_t n_front;
	uint32_t long_weighed;
	double t_long = now();
	if (anneal_sweep(&m, nflops, cand, nc, &seed, 1, low.lower_bound, long_weighs ? long_weighs : 16000 * nc, &front,
			 &n_front, &long_weighed, &e))
		fail(path, &e);
	t_long = now() - t_long;
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	printf("\n%s: %u nodes, %u candidates (%u the search's), none's peak %llu B; the long sweep weighed %u plans "
	       "in %.1f s\n\n", name, g->n_nodes, nc, EXACT_CAND, (unsigned long long)none_peak, long_weighed, t_long);
	printf("| budget | bytes | auto FLOPs | exact FLOPs | auto / exact | exact: weighs, proved | auto s | exact s | below auto's: FLOPs, weighs, proved, s | long sweep FLOPs | auto / long |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
	static const int coarse[] = {99, 97, 95, 90, 85, 80, 70, 60, 55, 52, 50, 30, 20};
	int pct[80];
	size_t n_pct = dense ? 80 : sizeof coarse / sizeof *coarse;
	for (size_t i = 0; i < n_pct; i++)
		pct[i] = dense ? 99 - (int)i : coarse[i];
	for (size_t i = 0; i < n_pct; i++) {
		uint64_t budget = none_peak * (uint64_t)pct[i] / 100;
		struct auto_result ar;
		au.budget = budget;
		double t0 = now();
		if (ckpt_choose(g, &m, &bn, &au, &keep, &ar, &e))
			fail(path, &e);
		double ta = now() - t0;
		free(keep);
		memset(all, RC_KEPT, g->n_values);
		struct exact_result r;
		t0 = now();
		if (exact_kept_sets(&m, nflops, cand, nc, budget, max_weighs, all, &r, &e))
			fail(path, &e);
		double tx = now() - t0;
		if (plans && r.found)
			write_plan(plans, name, pct[i], g, &m, all);
		/* the search given auto's plan: only fewer FLOPs sought */
		struct exact_result rb;
		memset(all, RC_KEPT, g->n_values);
		t0 = now();
		if (exact_kept_sets_below(&m, nflops, cand, nc, budget, ar.fits ? ar.flops : UINT64_MAX, max_weighs, all, &rb, &e))
			fail(path, &e);
		double tb = now() - t0;
		char af[48], xf[48], ratio[32], bf[48];
		snprintf(bf, sizeof bf, rb.found ? "%llu" : ar.fits && rb.done ? "auto's" : "-", (unsigned long long)rb.flops);
		snprintf(af, sizeof af, ar.fits ? "%llu" : "%llu (no fit)", (unsigned long long)ar.flops);
		snprintf(xf, sizeof xf, r.found ? "%llu" : "none found", (unsigned long long)r.flops);
		snprintf(ratio, sizeof ratio, !ar.fits || !r.found ? "-" : r.flops ? "%.2f" : ar.flops ? "inf" : "1.00",
			 r.flops ? (double)ar.flops / (double)r.flops : 0.0);
		const struct anneal_plan *lp = NULL; /* the long sweep's fewest FLOPs that fit */
		for (size_t k = 0; k < n_front; k++)
			if (front[k].peak <= budget && (!lp || front[k].flops < lp->flops))
				lp = &front[k];
		char lf[48], lr[32];
		snprintf(lf, sizeof lf, lp ? "%llu" : "none found", lp ? (unsigned long long)lp->flops : 0ull);
		snprintf(lr, sizeof lr, !ar.fits || !lp ? "-" : lp->flops ? "%.3f" : ar.flops ? "inf" : "1.000",
			 lp && lp->flops ? (double)ar.flops / (double)lp->flops : 0.0);
		printf("| %d%% | %llu | %s | %s | %s | %u, %s | %.3f | %.3f | %s, %u, %s, %.3f | %s | %s |\n", pct[i],
		       (unsigned long long)budget, af, xf, ratio, r.n_weighed,
		       r.done ? "yes" : nc > EXACT_CAND ? "no (too many candidates)" : "no (limit)", ta, tx, bf, rb.n_weighed,
		       rb.done ? "yes" : "no", tb, lf, lr);
	}
	anneal_free(front, n_front);
	free(all);
	free(cand);
	memmodel_free(&m);
	exec_free(x);
	graph_free(g);
}

int main(int argc, char **argv)
{
	uint32_t max_weighs = 0, long_weighs = 0;
	const char *plans = NULL;
	int i = 1, dense = 0;
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2)
		if (!strcmp(argv[i], "--dense"))
			dense = 1, i--;
		else if (!strcmp(argv[i], "--weighs"))
			max_weighs = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--long"))
			long_weighs = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--plans"))
			plans = argv[i + 1];
		else
			break;
	if (i >= argc || argv[i][0] == '-') {
		fprintf(stderr, "usage: bench_exact [--dense] [--weighs N] [--long N] [--plans DIR] MODEL.onnx...\n");
		return 2;
	}
	for (; i < argc; i++)
		bench(argv[i], max_weighs, long_weighs, dense, plans);
	return 0;
}
