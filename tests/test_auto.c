/* test_auto.c - `--checkpoint auto`: against the exact optimum found another way (every kept set,
 * weighed exactly), monotone in the budget, and the schedule it weighs is the one the rewrite
 * makes. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "helpers.h"
#include "plan/auto.h"
#include "plan/memsim.h"
#include "plan/plan.h"
#include "util/xalloc.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct train {
	struct graph *g;
	struct exec *x;
	uint64_t *flops; /* per node */
	struct memmodel *m;
	uint64_t fixed_flops; /* of the forward nodes made from initializers alone that the backward
			       * pass reads: every plan recomputes them (recompute.h, rc_forced) */
};

static struct train prepare(struct graph *g)
{
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	struct gd_err e = {0};
	cr_assert_eq(autodiff(g, &ao, &res, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s", e.msg);
	struct exec_binding b = {"batch", 3};
	struct exec_opts so = {.shapes_only = 1, .dims = &b, .n_dims = 1};
	struct train t = {g, exec_run(g, &so, NULL, &e), NULL, calloc(1, sizeof *t.m), 0};
	cr_assert(t.x, "%s", e.msg);
	cr_assert_eq(memmodel_build(g, t.x, t.m, &e), 0, "%s", e.msg);
	t.flops = calloc(g->n_nodes, sizeof *t.flops);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		t.flops[i] = node_flops(g->nodes[i], t.x);
	uint8_t *fixed = calloc(g->n_values, 1), *read = calloc(g->n_values, 1);
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		int all = node_is_forward(n) && n->op != OP_DROPOUT && n->op != OP_MATMUL && n->op != OP_GEMM;
		for (uint32_t k = 0; k < n->n_in; k++)
			if (n->in[k]) {
				all &= n->in[k]->init != NULL || fixed[n->in[k]->id];
				read[n->in[k]->id] |= (n->tags & TAG_BACKWARD) != 0;
			}
		for (uint32_t k = 0; all && k < n->n_out; k++)
			if (n->out[k])
				fixed[n->out[k]->id] = 1;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_out; k++)
			if (g->nodes[i]->out[k] && fixed[g->nodes[i]->out[k]->id] && read[g->nodes[i]->out[k]->id]) {
				t.fixed_flops += t.flops[i];
				break;
			}
	free(fixed);
	free(read);
	return t;
}

static void train_free(struct train *t)
{
	exec_free(t->x);
	memmodel_free(t->m);
	free(t->m);
	free(t->flops);
	graph_free(t->g);
}

/* Weighs a kept set. The oracle below tries every kept set with it; that it weighs what the rewrite
 * makes is weighed_schedule_is_the_rewritten_one, and that the rewrite's peak is the executor's,
 * test_plan. */
static void weigh(const struct train *t, const uint8_t *keep, uint64_t *peak, uint64_t *flops)
{
	struct gd_err e = {0};
	cr_assert_eq(ckpt_weigh(t->m, keep, t->flops, peak, flops, NULL, &e), 0, "%s", e.msg);
}

/* A random DAG of `n` forward nodes over [batch, d] tensors, d in {4, 8, 16}: MatMul to change
 * width, Tanh, Add and Concat of earlier values of one width (skip connections, so there are
 * multi-tensor cuts), then ReduceSum to the loss. */
static struct graph *random_dag(unsigned seed, int n)
{
	srand(seed);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	static const int widths[] = {4, 8, 16};
	int width[64];
	fprintf(f, "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, 8]}]\nparams:\n");
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 3; b++)
			fprintf(f, "  - {name: w%d%d, dtype: float32, shape: [%d, %d], init: {dist: normal, std: 0.5, seed: %d}}\n", a,
				b, widths[a], widths[b], a * 3 + b);
	fprintf(f, "nodes:\n");
	width[0] = 8; /* v0 is x */
	for (int i = 1; i <= n; i++) {
		int r = rand() % 10, a = i - 1 - (rand() % 3 == 0 ? rand() % i : 0);
		int same = -1; /* another earlier value of a's width */
		for (int k = i - 2; k >= 0 && same < 0; k--)
			if (width[k] == width[a] && k != a && rand() % 2)
				same = k;
		char va[16], vb[16];
		snprintf(va, sizeof va, a ? "v%d" : "x", a);
		snprintf(vb, sizeof vb, same > 0 ? "v%d" : "x", same);
		if (r < 3 || i == 1) {
			int wa = width[a] == 4 ? 0 : width[a] == 8 ? 1 : 2, wb = rand() % 3;
			fprintf(f, "  - {op: MatMul, inputs: [%s, w%d%d], outputs: [v%d]}\n", va, wa, wb, i);
			width[i] = widths[wb];
		} else if (r < 6 || same < 0) {
			fprintf(f, "  - {op: Tanh, inputs: [%s], outputs: [v%d]}\n", va, i);
			width[i] = width[a];
		} else if (r < 8 || width[a] == 16) {
			fprintf(f, "  - {op: Mul, inputs: [%s, %s], outputs: [v%d]}\n", va, vb, i);
			width[i] = width[a];
		} else { /* widths 4 and 8 only, by the test above */
			fprintf(f, "  - {op: Concat, inputs: [%s, %s], outputs: [v%d], attrs: {axis: 1}}\n", va, vb, i);
			width[i] = 2 * width[a];
		}
	}
	/* the loss reads a parameter whatever the DAG */
	fprintf(f, "  - {op: MatMul, inputs: [v%d, w%d1], outputs: [head]}\n", n, width[n] == 4 ? 0 : width[n] == 8 ? 1 : 2);
	fprintf(f, "  - {op: ReduceSum, inputs: [head], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n");
	fclose(f);
	char name[64];
	snprintf(name, sizeof name, "dag%u.yaml", seed);
	struct graph *g = load_text(name, text);
	free(text);
	return g;
}

/* Every kept set over the candidates (forward activations that are not outputs), weighed; with
 * few candidates (at most LEVEL_CANDIDATES), every one dropped may also be a level-2 checkpoint of
 * the backward pass (recompute.h), so the optimum is over two levels too. */
#define LEVEL_CANDIDATES 8
struct point {
	uint64_t peak, flops;
};

/* ... with each dropped candidate also a checkpoint at levels 2 .. `deepest` (none below 2). */
static size_t enumerate_to(const struct train *t, struct point **out, uint32_t deepest)
{
	uint32_t cand[24], nc = 0;
	for (uint32_t v = 0; v < t->g->n_values; v++)
		if (value_is_activation(t->g->values[v]) && !(t->g->values[v]->flags & VALUE_OUTPUT)) {
			cr_assert_lt(nc, 24);
			cand[nc++] = v;
		}
	uint32_t base = deepest < 2 ? 2 : deepest + 1;
	size_t n = 1;
	for (uint32_t k = 0; k < nc; k++)
		n *= base;
	struct point *p = calloc(n, sizeof *p);
	uint8_t *keep = calloc(t->g->n_values, 1);
	for (size_t code = 0; code < n; code++) {
		size_t c = code;
		for (uint32_t k = 0; k < nc; k++, c /= base) {
			uint32_t s = (uint32_t)(c % base);
			keep[cand[k]] = s == 0 ? RC_DROP : s == 1 ? RC_KEPT : RC_AT_LEVEL(s);
		}
		weigh(t, keep, &p[code].peak, &p[code].flops);
	}
	free(keep);
	*out = p;
	return n;
}

static size_t enumerate(const struct train *t, struct point **out, int *levels)
{
	uint32_t nc = 0;
	for (uint32_t v = 0; v < t->g->n_values; v++)
		nc += value_is_activation(t->g->values[v]) && !(t->g->values[v]->flags & VALUE_OUTPUT);
	*levels = nc <= LEVEL_CANDIDATES;
	return enumerate_to(t, out, *levels ? 2 : 0);
}

static int by_peak(const void *a, const void *b)
{
	const struct point *x = a, *y = b;
	return x->peak < y->peak ? -1 : x->peak > y->peak;
}

/* The fewest FLOPs of the points p (sorted by peak) that fit budget (UINT64_MAX: none), and auto's
 * plan for that budget in keep, r, and weighed here into *peak and *flops, which must be what auto
 * reports. */
static uint64_t against_auto(const struct train *t, const struct point *p, size_t n, uint64_t budget, uint8_t *keep,
			     struct auto_result *r, uint64_t *peak, uint64_t *flops, unsigned seed)
{
	uint64_t opt = UINT64_MAX;
	for (size_t i = 0; i < n && p[i].peak <= budget; i++)
		if (p[i].flops < opt)
			opt = p[i].flops;
	struct gd_err e = {0};
	cr_assert_eq(ckpt_auto(t->g, t->m, budget, NULL, 0, keep, r, &e), 0, "%s", e.msg);
	weigh(t, keep, peak, flops);
	cr_expect(*peak == r->peak && *flops == r->flops, "seed %u: auto reports what its plan weighs", seed);
	return opt;
}

Test(auto_plan, within_two_percent_of_the_exhaustive_optimum)
{
	int cases = 0, exact = 0, within = 0, infeasible = 0, missed = 0, with_levels = 0, beyond = 0;
	double worst = 1, gap_sum = 0, gap_worst = 1;
	for (unsigned seed = 1; seed <= 120; seed++) {
		struct train t = prepare(random_dag(seed, 6 + (int)seed % 7));
		struct point *p;
		int levels;
		size_t n = enumerate(&t, &p, &levels);
		with_levels += levels;
		qsort(p, n, sizeof *p, by_peak);
		uint8_t *keep = calloc(t.g->n_values, 1);
		/* budgets: just under the lowest peak, then the peaks at eight quantiles */
		for (int q = -1; q < 8; q++) {
			uint64_t budget = q < 0 ? p[0].peak - 1 : p[(size_t)q * (n - 1) / 7].peak, peak, flops;
			struct auto_result r;
			uint64_t opt = against_auto(&t, p, n, budget, keep, &r, &peak, &flops, seed);
			cr_expect_leq(r.lower_bound, p[0].peak, "seed %u: the lower bound is one", seed);
			cr_expect_leq(r.lower_bound, r.peak, "seed %u: the lower bound is one", seed);
			if (q < 0) { /* how tight: the lowest enumerated peak over the bound */
				double gap = (double)p[0].peak / (double)r.lower_bound;
				gap_sum += gap;
				gap_worst = gap > gap_worst ? gap : gap_worst;
			}
			cases++;
			if (opt == UINT64_MAX) { /* only deeper levels than enumerated can fit */
				infeasible++;
				if (r.fits) {
					int deeper = 0;
					for (uint32_t v = 0; v < t.g->n_values; v++)
						deeper |= !(keep[v] & 1) && rc_level(keep, v) > (levels ? 2 : 1) && rc_level(keep, v) < RC_INNER;
					cr_expect(deeper && peak <= budget, "seed %u, budget %llu: nothing fits, auto says it does",
						  seed, (unsigned long long)budget);
					beyond++;
				}
				continue;
			}
			if (!r.fits) {
				missed++;
				continue;
			}
			cr_expect_leq(peak, budget);
			double ratio = opt ? (double)flops / (double)opt : flops ? 1e9 : 1;
			if (ratio > worst)
				worst = ratio;
			exact += flops == opt;
			within += flops <= opt + opt / 50;
			cr_expect_leq(flops, 2 * opt, "seed %u, budget %llu: auto %llu FLOPs, optimum %llu", seed,
				      (unsigned long long)budget, (unsigned long long)flops, (unsigned long long)opt);
		}
		free(keep);
		free(p);
		train_free(&t);
	}
	int feasible = cases - infeasible;
	fprintf(stderr,
		"auto vs exhaustive (%d of 120 DAGs with level-2 checkpoints enumerated too): %d cases, %d with no plan "
		"enumerated fitting (auto fits %d of them, with deeper levels); of the %d others auto fits %d, %d at the "
		"optimum, %d within 2%%, worst FLOPs ratio %.3f; the lowest enumerated peak over the lower bound: "
		"%.3f on average, %.3f at worst\n",
		with_levels, cases, infeasible, beyond, feasible, feasible - missed, exact, within, worst, gap_sum / 120,
		gap_worst);
	/* the target: within 2% of the optimum. The search is not exhaustive: over 400 seeds it finds
	 * the optimum in 3196 of 3200 cases, and the 4 others are budgets at the lowest peak of all,
	 * which it misses by 1-2%; so allow 1 in 200 */
	cr_expect_geq(within * 200, feasible * 199, "%d of %d within 2%% of the optimum", within, feasible);
}

/* As the budget falls, the peak of auto's plan never rises; every plan's peak is what the rewrite
 * measures (plan_memory rewrites and simulates the result). */
Test(auto_plan, peak_never_rises_as_the_budget_falls)
{
	for (const char *const *mdl = testdata_models; *mdl; mdl++) {
		char path[512];
		model_path(path, sizeof path, *mdl);
		struct train t = prepare(load_ok(path));
		uint8_t *keep = calloc(t.g->n_values, 1);
		struct gd_err e = {0};
		struct auto_result r, r0;
		cr_assert_eq(ckpt_auto(t.g, t.m, UINT64_MAX, NULL, 0, keep, &r0, &e), 0, "%s", e.msg);
		uint64_t prev = r0.peak, prev_flops = r0.flops;
		cr_expect_eq(prev_flops, t.fixed_flops, "%s: an unlimited budget recomputes only fixed values", *mdl);
		for (int k = 0; k <= 10; k++) {
			uint64_t budget = r0.peak - (r0.peak - r0.lower_bound) * (uint64_t)k / 10;
			cr_assert_eq(ckpt_auto(t.g, t.m, budget, NULL, 0, keep, &r, &e), 0, "%s", e.msg);
			cr_expect_leq(r.peak, prev, "%s: budget %llu: peak %llu, above %llu at a larger budget", *mdl,
				      (unsigned long long)budget, (unsigned long long)r.peak, (unsigned long long)prev);
			cr_expect_geq(r.flops, prev_flops, "%s: fewer FLOPs at a smaller budget", *mdl);
			cr_expect(r.fits == (r.peak <= budget), "%s", *mdl);
			cr_expect_geq(r.peak, r.lower_bound, "%s", *mdl);
			prev = r.peak;
			prev_flops = r.flops;
		}
		free(keep);
		train_free(&t);
	}
}

/* The schedule the planner weighs without rewriting is the one the rewrite makes: same peak. And
 * the shapes the rewrite carries over to the copies (exec_alias) are those a new run finds. */
Test(auto_plan, weighed_schedule_is_the_rewritten_one)
{
	for (const char *const *mdl = testdata_models; *mdl; mdl++) {
		char path[512];
		model_path(path, sizeof path, *mdl);
		for (int strategy = 0; strategy < 2; strategy++) {
			struct train t = prepare(load_ok(path));
			struct gd_err e = {0};
			uint8_t *keep = NULL;
			struct ckpt c = {.kind = strategy ? CKPT_SPEED : CKPT_AUTO, .budget = 0};
			cr_assert_eq(ckpt_choose(t.g, t.m, NULL, &c, &keep, NULL, &e), 0, "%s", e.msg);
			uint64_t peak, flops;
			weigh(&t, keep, &peak, &flops);
			/* the schedule's trace, which plan reports as the rewritten graph's */
			struct rc_step *steps;
			uint32_t n_steps;
			struct mem_result traced;
			cr_assert_eq(recompute_schedule(&t.m->f, keep, &steps, &n_steps, &e), 0, "%s", e.msg);
			cr_assert_eq(memsim_schedule(t.m, keep, steps, n_steps, 1, &traced, &e), 0, "%s", e.msg);
			xfree(steps);
			struct recompute_stats st;
			cr_assert_eq(recompute_rewrite(t.g, keep, t.x, &st, &e), 0, "%s", e.msg);
			struct exec_binding b = {"batch", 3};
			struct exec_opts so = {.shapes_only = 1, .dims = &b, .n_dims = 1};
			struct exec *x = exec_run(t.g, &so, NULL, &e);
			cr_assert(x, "%s", e.msg);
			struct mem_result m;
			cr_assert_eq(memsim(t.g, x, &m, &e), 0);
			cr_expect_eq(m.peak, peak, "%s, %s: weighed %llu, rewritten %llu", *mdl, strategy ? "speed" : "auto",
				     (unsigned long long)peak, (unsigned long long)m.peak);
			struct mem_result carried;
			cr_assert_eq(memsim(t.g, t.x, &carried, &e), 0);
			cr_expect_eq(carried.n_live, m.n_live);
			for (uint32_t i = 0; i < m.n_live && i < carried.n_live; i++)
				cr_expect_eq(carried.live[i], m.live[i], "%s: step %u: %llu with carried shapes, %llu run", *mdl, i,
					     (unsigned long long)carried.live[i], (unsigned long long)m.live[i]);
			memsim_free(&carried);
			cr_expect_eq(traced.n_live, m.n_live);
			for (uint32_t i = 0; i < m.n_live && i < traced.n_live; i++)
				cr_expect_eq(traced.live[i], m.live[i], "%s: step %u: %llu in the schedule, %llu rewritten", *mdl, i,
					     (unsigned long long)traced.live[i], (unsigned long long)m.live[i]);
			cr_expect_eq(traced.peak_node, m.peak_node, "%s", *mdl);
			cr_expect_eq(memcmp(&traced.at_peak, &m.at_peak, sizeof m.at_peak), 0, "%s: breakdown at the peak", *mdl);
			memsim_free(&traced);
			uint64_t f = 0;
			for (uint32_t i = 0; i < t.g->n_nodes; i++)
				if (t.g->nodes[i]->tags & TAG_RECOMPUTE)
					f += node_flops(t.g->nodes[i], x);
			cr_expect_eq(f, flops, "%s", *mdl);
			memsim_free(&m);
			exec_free(x);
			xfree(keep);
			train_free(&t);
		}
	}
}

/* On a uniform chain the best plan at the lowest peaks keeps evenly spaced activations; the DP's
 * model can miss it, so auto (as plan runs it, through ckpt_choose) weighs every spacing from half
 * to twice sqrt(N) as a seed too. Against every kept set of chains of 7 to 9 layers, from the
 * lowest peak of all up to the highest, auto is at the optimum. */
Test(auto_plan, spaced_seeds_reach_the_optimum_of_uniform_chains)
{
	for (int layers = 7; layers <= 9; layers++) {
		char text[4096];
		int k = snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [64, 32]}]\nparams:\n");
		for (int i = 0; i < layers; i++)
			k += snprintf(text + k, sizeof text - (size_t)k, "  - {name: w%d, dtype: float32, shape: [32, 32], init: zeros}\n", i);
		k += snprintf(text + k, sizeof text - (size_t)k, "nodes:\n");
		for (int i = 0; i < layers; i++) {
			char prev[16];
			snprintf(prev, sizeof prev, i ? "t%d" : "x", i - 1);
			k += snprintf(text + k, sizeof text - (size_t)k,
				      "  - {op: MatMul, inputs: [%s, w%d], outputs: [m%d]}\n  - {op: Tanh, inputs: [m%d], outputs: [t%d]}\n",
				      prev, i, i, i, i);
		}
		snprintf(text + k, sizeof text - (size_t)k,
			 "  - {op: ReduceSum, inputs: [t%d], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n", layers - 1);
		struct train t = prepare(load_text("uniform_chain.yaml", text));
		struct bottlenecks bn;
		struct gd_err e = {0};
		cr_assert_eq(find_bottlenecks(t.g, strmap_get(&t.g->names, "loss"), &bn, &e), 0, "%s", e.msg);
		struct point *p;
		int levels;
		size_t n = enumerate(&t, &p, &levels);
		qsort(p, n, sizeof *p, by_peak);
		for (int q = 0; q <= 5; q++) {
			uint64_t budget = p[0].peak + (p[n - 1].peak - p[0].peak) * (uint64_t)q / 5, opt = UINT64_MAX;
			for (size_t i = 0; i < n && p[i].peak <= budget; i++)
				opt = p[i].flops < opt ? p[i].flops : opt;
			struct ckpt c = {.kind = CKPT_AUTO, .budget = budget};
			struct auto_result r;
			uint8_t *keep = NULL;
			cr_assert_eq(ckpt_choose(t.g, t.m, &bn, &c, &keep, &r, &e), 0, "%s", e.msg);
			cr_expect(r.fits && r.flops <= opt, "%d layers, budget %llu (%d/5 up from the lowest peak): auto %s %llu FLOPs, optimum %llu",
				  layers, (unsigned long long)budget, q, r.fits ? "fits with" : "does not fit;", (unsigned long long)r.flops,
				  (unsigned long long)opt);
			xfree(keep);
		}
		free(p);
		train_free(&t);
	}
}

/* #49: a chain's plan is the exact DP's (chain.h), proved, and no worse than any plan with levels
 * that every assignment of kept, dropped and levels 2 .. 4 to its activations gives, at every
 * budget from the least such peak up; never "no plan" where one of those fits. */
Test(auto_plan, chains_are_optimal_over_every_level_assignment)
{
	/* shape 4 scales each layer by the negation of a parameter: a fixed value the backward pass
	 * reads, recomputed in every plan, so the schedules have more steps than the graph nodes */
	static const char *acts[] = {"Tanh", "Sigmoid", "Tanh", "Sigmoid", "Tanh"};
	static const int width[][5] = {{16, 16, 16, 16, 16}, {32, 8, 32, 8, 32}, {16, 16, 64, 16, 16}, {8, 32, 32, 32, 8},
				       {16, 16, 16}};
	for (int shape = 0; shape < 5; shape++) {
		int layers = shape < 2 ? 4 : shape < 4 ? 3 : 2, scaled = shape == 4;
		char text[4096];
		int k = snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, %d]}]\nparams:\n",
				 width[shape][0]);
		for (int i = 0; i < layers; i++)
			k += snprintf(text + k, sizeof text - (size_t)k,
				      "  - {name: w%d, dtype: float32, shape: [%d, %d], init: {dist: normal, std: 0.3, seed: %d}}\n"
				      "%s%d, dtype: float32, shape: [%d], init: {dist: normal, seed: %d}}\n", i, width[shape][i],
				      width[shape][i + 1], i + 1, scaled ? "  - {name: s" : "#", i, width[shape][i + 1], i + 9);
		k += snprintf(text + k, sizeof text - (size_t)k, "nodes:\n");
		for (int i = 0; i < layers; i++) {
			char prev[16];
			snprintf(prev, sizeof prev, i ? "t%d" : "x", i - 1);
			k += snprintf(text + k, sizeof text - (size_t)k, "  - {op: MatMul, inputs: [%s, w%d], outputs: [m%d]}\n", prev, i, i);
			if (scaled)
				k += snprintf(text + k, sizeof text - (size_t)k,
					      "  - {op: Neg, inputs: [s%d], outputs: [n%d]}\n  - {op: Mul, inputs: [m%d, n%d], outputs: [u%d]}\n",
					      i, i, i, i, i);
			k += snprintf(text + k, sizeof text - (size_t)k, "  - {op: %s, inputs: [%c%d], outputs: [t%d]}\n", acts[shape],
				      scaled ? 'u' : 'm', i, i);
		}
		snprintf(text + k, sizeof text - (size_t)k,
			 "  - {op: Mul, inputs: [t%d, t%d], outputs: [sq]}\n  - {op: ReduceSum, inputs: [sq], outputs: [loss], attrs: {keepdims: 0}}\n"
			 "outputs: [{name: loss}]\n", layers - 1, layers - 1);
		struct train t = prepare(load_text("level_chain.yaml", text));
		struct point *p;
		size_t n = enumerate_to(&t, &p, scaled ? 2 : layers == 4 ? 3 : 4);
		qsort(p, n, sizeof *p, by_peak);
		uint8_t *keep = calloc(t.g->n_values, 1);
		for (int q = 0; q <= 12; q++) {
			uint64_t budget = p[0].peak + (p[n - 1].peak - p[0].peak) * (uint64_t)q * q / 144, opt = UINT64_MAX;
			for (size_t i = 0; i < n && p[i].peak <= budget; i++)
				opt = p[i].flops < opt ? p[i].flops : opt;
			struct auto_result r;
			struct gd_err e = {0};
			cr_assert_eq(ckpt_auto(t.g, t.m, budget, NULL, 0, keep, &r, &e), 0, "%s", e.msg);
			uint64_t peak, flops;
			weigh(&t, keep, &peak, &flops);
			cr_expect(r.chain > 0, "shape %d: a chain (%s)", shape, r.no_chain ? r.no_chain : "");
			cr_expect(r.fits && peak <= budget && flops == r.flops,
				  "shape %d, budget %llu (%d/12): auto %s (peak %llu), where a plan fits", shape,
				  (unsigned long long)budget, q, r.fits ? "fits" : "finds no plan", (unsigned long long)peak);
			cr_expect(r.proved == AUTO_CHAIN && r.flops <= opt,
				  "shape %d, budget %llu (%d/12): auto %llu FLOPs (%s), every level assignment's optimum %llu",
				  shape, (unsigned long long)budget, q, (unsigned long long)r.flops, r.proved ? "proved" : "not proved",
				  (unsigned long long)opt);
		}
		/* below the least peak of the space: the DP proves that nothing fits */
		struct auto_result r;
		struct gd_err e = {0};
		cr_assert_eq(ckpt_auto(t.g, t.m, p[0].peak / 2, NULL, 0, keep, &r, &e), 0, "%s", e.msg);
		cr_expect(!r.fits && r.proved == AUTO_CHAIN && r.chain_least > p[0].peak / 2 && r.chain_least <= p[0].peak,
			  "shape %d: below every peak: fits %d, proved %d, least %llu (enumerated %llu)", shape, r.fits, r.proved,
			  (unsigned long long)r.chain_least, (unsigned long long)p[0].peak);
		free(keep);
		free(p);
		train_free(&t);
	}
}

/* #49: past the exact searches (a residual stack of 70 Tanh: no chain, more than EXACT_CAND
 * activations), an answer that recomputes no more than keeping everything is proved optimal over
 * every plan (AUTO_ALL); one below that budget is not proved. */
Test(auto_plan, an_answer_that_recomputes_nothing_extra_is_proved)
{
	char text[16384];
	int k = snprintf(text, sizeof text, "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [batch, 8]}]\n"
					    "params: [{name: w, dtype: float32, shape: [8, 8], init: {dist: normal, std: 0.3, seed: 1}}]\n"
					    "nodes:\n  - {op: MatMul, inputs: [x, w], outputs: [v0]}\n  - {op: Tanh, inputs: [v0], outputs: [v1]}\n");
	for (int i = 2; i < 72; i++)
		k += snprintf(text + k, sizeof text - (size_t)k, "  - {op: Tanh, inputs: [v%d], outputs: [h%d]}\n"
							      "  - {op: Add, inputs: [h%d, v%d], outputs: [v%d]}\n", i - 1, i, i, i - 2, i);
	snprintf(text + k, sizeof text - (size_t)k,
		 "  - {op: ReduceSum, inputs: [v71], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n");
	struct train t = prepare(load_text("residual_stack.yaml", text));
	uint8_t *keep = calloc(t.g->n_values, 1);
	memset(keep, RC_KEPT, t.g->n_values);
	uint64_t none_peak, none_flops;
	weigh(&t, keep, &none_peak, &none_flops);
	struct auto_result r;
	struct gd_err e = {0};
	cr_assert_eq(ckpt_auto(t.g, t.m, none_peak, NULL, 0, keep, &r, &e), 0, "%s", e.msg);
	cr_expect(r.fits && r.flops == none_flops && r.proved == AUTO_ALL && !r.chain && !r.kept_cands,
		  "at none's peak: fits %d, %llu FLOPs (none %llu), proved %d, chain %u, kept-set search on %u", r.fits,
		  (unsigned long long)r.flops, (unsigned long long)none_flops, r.proved, r.chain, r.kept_cands);
	cr_assert_eq(ckpt_auto(t.g, t.m, none_peak * 3 / 4, NULL, 0, keep, &r, &e), 0, "%s", e.msg);
	cr_expect(!r.fits || (r.flops > none_flops && !r.proved), "at 3/4 of it: fits %d, %llu FLOPs, proved %d", r.fits,
		  (unsigned long long)r.flops, r.proved);
	free(keep);
	train_free(&t);
}

/* #49: on DAGs small enough to enumerate every plan with backward checkpoints of levels 2 to 4 (up to
 * 6 candidates: 15,625 plans each), auto finds a plan wherever one of them fits, and its FLOPs are
 * within 2% of the best of them at the peaks of eight quantiles. Before the annealing sweep
 * (anneal.h), auto's local search left the levels its DP gave and missed such plans. */
Test(auto_plan, within_two_percent_of_every_plan_with_levels_on_small_dags)
{
	int dags = 0, cases = 0, within = 0, missed = 0;
	double worst = 1;
	for (unsigned seed = 1; dags < 24 && seed <= 200; seed++) {
		struct train t = prepare(random_dag(seed, 4 + (int)seed % 4));
		uint32_t nc = 0;
		for (uint32_t v = 0; v < t.g->n_values; v++)
			nc += value_is_activation(t.g->values[v]) && !(t.g->values[v]->flags & VALUE_OUTPUT);
		if (nc > 6) {
			train_free(&t);
			continue;
		}
		dags++;
		struct point *p;
		size_t n = enumerate_to(&t, &p, 4);
		qsort(p, n, sizeof *p, by_peak);
		uint8_t *keep = calloc(t.g->n_values, 1);
		for (int q = -1; q < 8; q++) {
			uint64_t budget = q < 0 ? p[0].peak : p[(size_t)q * (n - 1) / 7].peak, peak, flops;
			struct auto_result r;
			uint64_t opt = against_auto(&t, p, n, budget, keep, &r, &peak, &flops, seed);
			cases++;
			if (!r.fits || peak > budget) {
				missed++;
				cr_expect_fail("seed %u, budget %llu (%s): a plan with levels fits, auto says none does", seed,
					       (unsigned long long)budget, q < 0 ? "the least peak" : "a quantile");
				continue;
			}
			double ratio = opt ? (double)flops / (double)opt : flops ? 1e9 : 1;
			worst = ratio > worst ? ratio : worst;
			within += flops <= opt + opt / 50;
		}
		free(keep);
		free(p);
		train_free(&t);
	}
	fprintf(stderr, "auto vs every plan with levels 2-4 on %d small DAGs: %d cases, %d missed, %d within 2%%, worst FLOPs ratio %.3f\n",
		dags, cases, missed, within, worst);
	cr_expect_geq(dags, 12, "only %d DAGs had at most 6 candidates", dags);
	cr_expect_eq(within, cases, "%d of %d within 2%% of the best plan with levels", within, cases);
}

/* #49: residual MLPs (h + W2 relu(W1 h), 3 and 4 blocks) whose lowest peak needs kept tensors and
 * backward checkpoints of several levels inside the blocks: the plans below (found by annealing,
 * weighed here) peak at the lower bound itself, so no plan peaks lower, and auto must find a plan
 * that fits that budget with no more FLOPs. Before the annealing sweep auto's lowest peaks were
 * 49,672 and 57,864 bytes against 47,624 and 55,816, and it said no plan fits. */
static struct graph *residual_mlp(int blocks, int width, int hidden)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	fprintf(f, "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [64, %d]}]\nparams:\n", width);
	for (int b = 0; b < blocks; b++)
		fprintf(f, "  - {name: w1_%d, dtype: float32, shape: [%d, %d], init: {dist: normal, std: 0.3, seed: %d}}\n"
			   "  - {name: w2_%d, dtype: float32, shape: [%d, %d], init: {dist: normal, std: 0.3, seed: %d}}\n",
			b, width, hidden, 2 * b, b, hidden, width, 2 * b + 1);
	fprintf(f, "  - {name: wo, dtype: float32, shape: [%d, 4], init: {dist: normal, std: 0.3, seed: 99}}\nnodes:\n", width);
	for (int b = 0; b < blocks; b++) {
		char h[16] = "x";
		if (b)
			snprintf(h, sizeof h, "h%d", b - 1);
		fprintf(f, "  - {op: MatMul, inputs: [%s, w1_%d], outputs: [a%d]}\n  - {op: Relu, inputs: [a%d], outputs: [r%d]}\n"
			   "  - {op: MatMul, inputs: [r%d, w2_%d], outputs: [m%d]}\n  - {op: Add, inputs: [%s, m%d], outputs: [h%d]}\n",
			h, b, b, b, b, b, b, b, h, b, b);
	}
	fprintf(f, "  - {op: MatMul, inputs: [h%d, wo], outputs: [head]}\n"
		   "  - {op: ReduceSum, inputs: [head], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n",
		blocks - 1);
	fclose(f);
	struct graph *g = load_text("residual_mlp.yaml", text);
	free(text);
	return g;
}

Test(auto_plan, finds_the_lowest_peak_where_it_needs_levels_inside_blocks)
{
	static const struct {
		int blocks, width, hidden;
		const char *plan[12]; /* kept, or name@level; the rest dropped */
	} cases[] = {
		{3, 16, 32, {"h2", "r2", "h1", "h0@4", "a1@3", "r1@3"}},
		{4, 16, 32, {"h3", "r3", "h2", "h1", "m0@5", "h0@6", "a1@4", "r1@2"}},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		struct train t = prepare(residual_mlp(cases[c].blocks, cases[c].width, cases[c].hidden));
		uint8_t *keep = calloc(t.g->n_values, 1);
		for (uint32_t v = 0; v < t.g->n_values; v++)
			keep[v] = RC_DROP;
		for (int k = 0; k < 12 && cases[c].plan[k]; k++) {
			const char *at = strchr(cases[c].plan[k], '@');
			size_t n = at ? (size_t)(at - cases[c].plan[k]) : strlen(cases[c].plan[k]);
			int found = 0;
			for (uint32_t v = 0; v < t.g->n_values; v++)
				if (strlen(t.g->values[v]->name) == n && !strncmp(t.g->values[v]->name, cases[c].plan[k], n)) {
					keep[v] = at ? RC_AT_LEVEL(atoi(at + 1)) : RC_KEPT;
					found = 1;
				}
			cr_assert(found, "no value %s", cases[c].plan[k]);
		}
		uint64_t peak, flops;
		weigh(&t, keep, &peak, &flops);
		struct auto_result r;
		struct gd_err e = {0};
		cr_assert_eq(ckpt_auto(t.g, t.m, peak, NULL, 0, keep, &r, &e), 0, "%s", e.msg);
		cr_expect_eq(peak, r.lower_bound, "%d blocks: the plan peaks at %llu, the lower bound is %llu", cases[c].blocks,
			     (unsigned long long)peak, (unsigned long long)r.lower_bound);
		cr_expect(r.fits, "%d blocks: a plan peaks at %llu, auto's lowest is %llu", cases[c].blocks,
			  (unsigned long long)peak, (unsigned long long)r.peak);
		cr_expect_leq(r.flops, flops, "%d blocks", cases[c].blocks);
		free(keep);
		train_free(&t);
	}
}
