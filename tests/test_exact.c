/* test_exact.c - the exact kept-set search (plan/exact.h): against every drop set weighed here, on
 * random DAGs at budgets from below the lowest peak to the highest; the FLOPs order it relies on;
 * a U-Net with a zero-FLOP plan under none's peak; its limits. */
#include "autodiff/ad.h"
#include "helpers.h"
#include "plan/auto.h"
#include "plan/exact.h"
#include "plan/memsim.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A training graph and its memory model, as plan builds them (without a bottleneck search). */
struct tg {
	struct graph *g;
	struct exec *shapes;
	struct memmodel m;
	const uint64_t *flops;
	uint32_t cand[64], n_cand; /* forward activations that are no graph outputs, in value order */
};

static void tg_build(struct tg *t, struct graph *g, const struct exec_binding *dims, size_t n_dims)
{
	struct gd_err e = {0};
	struct autodiff_opts ao = {0};
	struct autodiff_result ar;
	memset(t, 0, sizeof *t);
	t->g = g;
	cr_assert_eq(autodiff(g, &ao, &ar, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s", e.msg);
	struct exec_opts so = {.shapes_only = 1, .dims = dims, .n_dims = n_dims};
	cr_assert(t->shapes = exec_run(g, &so, NULL, &e), "%s", e.msg);
	cr_assert_eq(memmodel_build(g, t->shapes, &t->m, &e), 0, "%s", e.msg);
	cr_assert(t->flops = memmodel_flops(&t->m, g, &e), "%s", e.msg);
	for (uint32_t v = 0; v < g->n_values; v++)
		if (value_is_activation(g->values[v]) && !(g->values[v]->flags & VALUE_OUTPUT) && t->n_cand < 64)
			t->cand[t->n_cand++] = v;
}

static void tg_free(struct tg *t)
{
	memmodel_free(&t->m);
	exec_free(t->shapes);
	graph_free(t->g);
}

/* keep: `base` (NULL: every value kept), but the candidates in `mask` (bit i: cand[i]) dropped. */
static void plan_of(const struct tg *t, const uint8_t *base, uint64_t mask, uint8_t *keep)
{
	if (base)
		memcpy(keep, base, t->g->n_values);
	else
		memset(keep, RC_KEPT, t->g->n_values);
	for (uint32_t i = 0; i < t->n_cand; i++)
		if ((mask >> i) & 1)
			keep[t->cand[i]] = RC_DROP;
}

static void weigh(struct tg *t, const uint8_t *keep, uint64_t *peak, uint64_t *flops)
{
	struct gd_err e = {0};
	cr_assert_eq(ckpt_weigh(&t->m, keep, t->flops, peak, flops, NULL, &e), 0, "%s", e.msg);
}

/* A random DAG of n forward nodes over [4, w] tensors (w 4, 8, 12 or 16): MatMuls between widths,
 * Relu, Sigmoid, Add of two values of one width, Concat of two narrow values, and Reshape views
 * (which cost no FLOPs); an input is the last value, or now and then one made long before (skip
 * connections). The loss sums a head MatMul of the last value and every value nothing reads. */
static struct graph *dag(unsigned seed, int n)
{
	srand(seed * 7919u + 11u);
	char *nodes = NULL, *params = NULL, *text = NULL;
	size_t ln = 0, lp = 0, lt = 0;
	FILE *fn = open_memstream(&nodes, &ln), *fp = open_memstream(&params, &lp);
	int w[40] = {8}, read[40] = {0}, mats = 0, views = 0;
	for (int i = 1; i <= n; i++) {
		int a = rand() % 4 ? i - 1 : rand() % i, b = -1, kind = rand() % 6;
		for (int k = 0; k < i && b < 0; k++) /* another value of a's width: one nothing reads, far back first */
			if (k != a && w[k] == w[a] && !read[k])
				b = k;
		for (int k = 0; k < i && b < 0; k++)
			if (k != a && w[k] == w[a] && rand() % 3)
				b = k;
		read[a] = 1;
		if (kind == 0 || i == 1) {
			int to = 4 * (1 + rand() % 4);
			fprintf(fp, "  - {name: p%d, dtype: float32, shape: [%d, %d], init: {dist: normal, std: 0.3, seed: %d}}\n",
				mats, w[a], to, (int)seed + mats);
			fprintf(fn, "  - {op: MatMul, inputs: [v%d, p%d], outputs: [v%d]}\n", a, mats++, i);
			w[i] = to;
		} else if (kind == 1 || kind == 2 || (kind == 3 && b < 0)) {
			fprintf(fn, "  - {op: %s, inputs: [v%d], outputs: [v%d]}\n", kind == 1 ? "Relu" : "Sigmoid", a, i);
			w[i] = w[a];
		} else if (kind == 3) {
			fprintf(fn, "  - {op: Add, inputs: [v%d, v%d], outputs: [v%d]}\n", a, b, i);
			w[i] = w[a];
			read[b] = 1;
		} else if (kind == 4 && w[a] + w[i - 1] <= 16) {
			fprintf(fn, "  - {op: Concat, inputs: [v%d, v%d], outputs: [v%d], attrs: {axis: 1}}\n", a, i - 1, i);
			w[i] = w[a] + w[i - 1];
			read[i - 1] = 1;
		} else {
			fprintf(fp, "  - {name: s%d, dtype: int64, shape: [2], data: [4, -1]}\n", views);
			fprintf(fn, "  - {op: Reshape, inputs: [v%d, s%d], outputs: [v%d]}\n", a, views++, i);
			w[i] = w[a];
		}
	}
	fprintf(fp, "  - {name: head, dtype: float32, shape: [%d, 2], init: {dist: normal, seed: 99}}\n", w[n]);
	fprintf(fn, "  - {op: MatMul, inputs: [v%d, head], outputs: [h]}\n  - {op: ReduceSum, inputs: [h], outputs: [l%d], attrs: {keepdims: 0}}\n",
		n, n);
	int sum = n;
	for (int k = 1; k < n; k++)
		if (!read[k]) {
			fprintf(fn, "  - {op: ReduceSum, inputs: [v%d], outputs: [r%d], attrs: {keepdims: 0}}\n", k, k);
			fprintf(fn, "  - {op: Add, inputs: [l%d, r%d], outputs: [l%d]}\n", sum, k, k);
			sum = k;
		}
	fprintf(fn, "  - {op: Identity, inputs: [l%d], outputs: [loss]}\n", sum);
	fclose(fn);
	fclose(fp);
	FILE *f = open_memstream(&text, &lt);
	fprintf(f, "graphdiet: 1\nopset: 17\ninputs: [{name: v0, dtype: float32, shape: [4, 8]}]\nparams:\n%s", params);
	fprintf(f, "nodes:\n%soutputs: [{name: loss}]\n", nodes);
	fclose(f);
	char name[64];
	snprintf(name, sizeof name, "exact_dag%u.yaml", seed);
	struct graph *g = load_text(name, text);
	free(nodes);
	free(params);
	free(text);
	return g;
}

/* Every drop set of the candidates, the others as in `base`, weighed: peak[mask], flops[mask]. */
static void every_set(struct tg *t, const uint8_t *base, uint64_t **peak, uint64_t **flops)
{
	size_t n = (size_t)1 << t->n_cand;
	*peak = calloc(n, sizeof **peak);
	*flops = calloc(n, sizeof **flops);
	uint8_t *keep = malloc(t->g->n_values);
	for (size_t mask = 0; mask < n; mask++) {
		plan_of(t, base, mask, keep);
		weigh(t, keep, &(*peak)[mask], &(*flops)[mask]);
	}
	free(keep);
}

/* The fewest FLOPs of the n drop sets whose peak fits, UINT64_MAX for none. */
static uint64_t optimum(const uint64_t *peak, const uint64_t *flops, size_t n, uint64_t budget)
{
	uint64_t opt = UINT64_MAX;
	for (size_t mask = 0; mask < n; mask++)
		if (peak[mask] <= budget && flops[mask] < opt)
			opt = flops[mask];
	return opt;
}

/* exact_kept_sets from `base` (NULL: every value kept) into keep, asserting that it ran. */
static struct exact_result search(struct tg *t, const uint8_t *base, uint64_t budget, uint32_t max_weighs, uint8_t *keep)
{
	struct exact_result r;
	struct gd_err e = {0};
	if (base)
		memcpy(keep, base, t->g->n_values);
	else
		memset(keep, RC_KEPT, t->g->n_values);
	cr_assert_eq(exact_kept_sets(&t->m, t->flops, t->cand, t->n_cand, budget, max_weighs, keep, &r, &e), 0, "%s", e.msg);
	return r;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#define DAGS 40
#define BUDGETS 40 /* per DAG, at distinct peaks from the lowest to the highest */

Test(exact, equals_every_drop_set_weighed)
{
	uint64_t weighed = 0, enumerated = 0;
	int cases = 0, fitting = 0;
	for (unsigned seed = 1; seed <= DAGS; seed++) {
		struct tg t;
		tg_build(&t, dag(seed, 5 + (int)seed % 7), NULL, 0);
		cr_assert_leq(t.n_cand, 18, "seed %u: %u candidates", seed, t.n_cand);
		uint64_t *peak, *flops;
		every_set(&t, NULL, &peak, &flops);
		size_t n = (size_t)1 << t.n_cand;
		uint64_t *sorted = malloc(n * sizeof *sorted);
		memcpy(sorted, peak, n * sizeof *sorted);
		qsort(sorted, n, sizeof *sorted, cmp_u64);
		uint8_t *keep = malloc(t.g->n_values), *all = malloc(t.g->n_values);
		memset(all, RC_KEPT, t.g->n_values);
		size_t n_peaks = 0; /* the distinct peaks */
		for (size_t k = 0; k < n; k++)
			if (!k || sorted[k] != sorted[k - 1])
				sorted[n_peaks++] = sorted[k];
		for (int q = -1; q < BUDGETS; q++) { /* below the lowest peak, then up to the highest */
			uint64_t budget = q < 0 ? sorted[0] - 1 : sorted[(n_peaks - 1) * (size_t)q / (BUDGETS - 1)];
			uint64_t opt = optimum(peak, flops, n, budget);
			struct exact_result r = search(&t, all, budget, 1u << 19, keep);
			struct gd_err e = {0};
			cases++;
			weighed += r.n_weighed;
			enumerated += n;
			cr_expect(r.done, "seed %u, budget %llu: the search did not finish", seed, (unsigned long long)budget);
			cr_expect_eq(r.n_falls, 0, "seed %u", seed);
			cr_expect_eq(r.found, opt != UINT64_MAX, "seed %u, budget %llu: found %d, a plan fits: %d", seed,
				     (unsigned long long)budget, r.found, opt != UINT64_MAX);
			if (opt == UINT64_MAX) {
				cr_expect_eq(memcmp(keep, all, t.g->n_values), 0, "seed %u: keep changed with nothing found", seed);
				continue;
			}
			fitting++;
			uint64_t p, fl;
			weigh(&t, keep, &p, &fl);
			cr_expect(fl == opt && p <= budget, "seed %u, budget %llu: exact's plan: %llu FLOPs, peak %llu; optimum %llu FLOPs",
				  seed, (unsigned long long)budget, (unsigned long long)fl, (unsigned long long)p,
				  (unsigned long long)opt);
			cr_expect(r.flops == fl && r.peak == p, "seed %u: exact reports what its plan weighs", seed);
			/* given a plan with the optimum's FLOPs, none with fewer; given one more, the optimum */
			for (uint64_t known = opt; known <= opt + 1; known++) {
				memcpy(keep, all, t.g->n_values);
				cr_assert_eq(exact_kept_sets_below(&t.m, t.flops, t.cand, t.n_cand, budget, known, 1u << 19, keep, &r, &e), 0,
					     "%s", e.msg);
				cr_expect(r.done && (known == opt ? !r.found || r.flops == opt : r.found && r.flops == opt),
					  "seed %u, budget %llu, known %llu: done %d, found %d with %llu FLOPs; optimum %llu", seed,
					  (unsigned long long)budget, (unsigned long long)known, r.done, r.found,
					  (unsigned long long)r.flops, (unsigned long long)opt);
			}
		}
		free(keep);
		free(all);
		free(sorted);
		free(peak);
		free(flops);
		tg_free(&t);
	}
	fprintf(stderr, "exact vs every drop set: %d budgets on %d DAGs (%d with a plan that fits), %llu plans weighed by the search, %llu enumerated\n",
		cases, DAGS, fitting, (unsigned long long)weighed, (unsigned long long)enumerated);
}

/* The search's proof: without levels, dropping one more value never recomputes less. Checked for
 * every drop set D and every u not in D, on the same DAGs. */
Test(exact, flops_never_fall_as_the_drop_set_grows)
{
	uint64_t pairs = 0, rises = 0;
	for (unsigned seed = 1; seed <= DAGS; seed++) {
		struct tg t;
		tg_build(&t, dag(seed, 5 + (int)seed % 7), NULL, 0);
		uint64_t *peak, *flops;
		every_set(&t, NULL, &peak, &flops);
		int falls = 0;
		for (uint64_t mask = 0; mask < (uint64_t)1 << t.n_cand; mask++)
			for (uint32_t u = 0; u < t.n_cand; u++)
				if (!((mask >> u) & 1)) {
					uint64_t more = mask | (uint64_t)1 << u;
					cr_expect_geq(flops[more], flops[mask], "seed %u: dropping %s too: %llu FLOPs, %llu before", seed,
						      t.g->values[t.cand[u]]->name, (unsigned long long)flops[more],
						      (unsigned long long)flops[mask]);
					falls += flops[more] < flops[mask];
					rises += peak[more] > peak[mask];
					pairs++;
				}
		cr_expect_eq(falls, 0, "seed %u", seed);
		free(peak);
		free(flops);
		tg_free(&t);
	}
	cr_expect_gt(pairs, 100000, "%llu pairs", (unsigned long long)pairs);
	/* and the peak is no bound: it rises with the drop set as often as this */
	fprintf(stderr, "drop sets grown by one value: %llu, the peak rose in %llu\n", (unsigned long long)pairs,
		(unsigned long long)rises);
}

/* The U-Net of testdata (two levels, a Concat skip): at 99 to 70% of the peak with everything kept,
 * exact's answer is the optimum of every drop set. */
Test(exact, unet_at_the_optimum_of_every_drop_set)
{
	char path[512];
	struct exec_binding b = {"batch", 2};
	struct tg t;
	tg_build(&t, load_ok(model_path(path, sizeof path, "unet")), &b, 1);
	uint64_t *peak, *flops;
	every_set(&t, NULL, &peak, &flops);
	uint8_t *keep = malloc(t.g->n_values);
	static const int pct[] = {99, 97, 95, 90, 80, 70};
	for (size_t q = 0; q < sizeof pct / sizeof *pct; q++) {
		uint64_t budget = peak[0] * (uint64_t)pct[q] / 100, opt = optimum(peak, flops, (size_t)1 << t.n_cand, budget);
		struct exact_result r = search(&t, NULL, budget, 0, keep);
		cr_expect(r.done && r.found == (opt != UINT64_MAX), "%d%%", pct[q]);
		if (!r.found)
			continue;
		uint64_t p, fl;
		weigh(&t, keep, &p, &fl);
		cr_expect(fl == opt && p <= budget, "%d%%: exact's plan: %llu FLOPs, peak %llu; optimum %llu FLOPs", pct[q],
			  (unsigned long long)fl, (unsigned long long)p, (unsigned long long)opt);
	}
	free(keep);
	free(peak);
	free(flops);
	tg_free(&t);
}

/* The U-Net with long Concat skips of testdata/gen_exact.py: at 99 and 97% of its peak with
 * everything kept, plans that recompute nothing fit (the one exact finds is weighed here), and
 * the search finds one in a few weighs; at 95 and 90%, no more FLOPs than auto's. */
Test(exact, unet_with_long_skips_fits_under_its_peak_recomputing_nothing)
{
	char path[512];
	snprintf(path, sizeof path, "%s/exact/unet3.onnx", TESTDATA);
	struct tg t;
	tg_build(&t, load_ok(path), NULL, 0);
	uint8_t *keep = malloc(t.g->n_values);
	memset(keep, RC_KEPT, t.g->n_values);
	uint64_t all_peak, all_flops; /* every value kept: the fewest FLOPs of all */
	weigh(&t, keep, &all_peak, &all_flops);
	static const int pct[] = {99, 97, 95, 90};
	for (size_t q = 0; q < sizeof pct / sizeof *pct; q++) {
		uint64_t budget = all_peak * (uint64_t)pct[q] / 100;
		struct exact_result r = search(&t, NULL, budget, 0, keep);
		struct gd_err e = {0};
		uint64_t p, fl;
		weigh(&t, keep, &p, &fl);
		struct auto_result ar;
		uint8_t *ak = calloc(t.g->n_values, 1);
		cr_assert_eq(ckpt_auto(t.g, &t.m, budget, NULL, 0, ak, &ar, &e), 0, "%s", e.msg);
		free(ak);
		fprintf(stderr, "unet3, %d%% of %llu B: exact %llu FLOPs in %u weighs (done %d), auto %llu%s\n", pct[q],
			(unsigned long long)all_peak, (unsigned long long)fl, r.n_weighed, r.done, (unsigned long long)ar.flops,
			ar.fits ? "" : " (no fit)");
		cr_expect(r.found && r.done && p <= budget, "%d%%: found %d, done %d, peak %llu", pct[q], r.found, r.done,
			  (unsigned long long)p);
		if (pct[q] >= 97) {
			cr_expect_eq(fl, all_flops, "%d%%: exact's plan recomputes %llu FLOPs", pct[q], (unsigned long long)(fl - all_flops));
			cr_expect_leq(r.n_weighed, 50, "%d%%", pct[q]);
		} else {
			cr_expect_leq(fl, ar.flops, "%d%%", pct[q]);
		}
	}
	free(keep);
	tg_free(&t);
}

/* Past max_weighs the search stops unfinished (done 0), with a plan that fits when it has one; past
 * EXACT_CAND candidates it does not start. Both leave keep as it was unless a plan was found. */
Test(exact, limits_leave_the_search_unfinished)
{
	char path[512];
	struct exec_binding b = {"batch", 2};
	struct tg t;
	tg_build(&t, load_ok(model_path(path, sizeof path, "unet")), &b, 1);
	uint8_t *keep = malloc(t.g->n_values), *all = malloc(t.g->n_values);
	memset(all, RC_KEPT, t.g->n_values);
	uint64_t all_peak, all_flops;
	weigh(&t, all, &all_peak, &all_flops);
	uint64_t budget = all_peak * 90 / 100;
	struct exact_result r = search(&t, all, budget, 0, keep);
	struct gd_err e = {0};
	cr_assert(r.done && r.found && r.n_weighed > 5, "the full search: done %d, %u weighs", r.done, r.n_weighed);
	for (uint32_t limit = 1; limit <= 5; limit++) {
		r = search(&t, all, budget, limit, keep);
		cr_expect(!r.done && r.n_weighed <= limit, "max_weighs %u: done %d after %u weighs", limit, r.done, r.n_weighed);
		uint64_t p, fl;
		weigh(&t, keep, &p, &fl);
		if (r.found)
			cr_expect(p <= budget && p == r.peak && fl == r.flops, "max_weighs %u", limit);
		else
			cr_expect_eq(memcmp(keep, all, t.g->n_values), 0, "max_weighs %u: keep changed with nothing found", limit);
	}
	uint32_t many[EXACT_CAND + 1];
	for (uint32_t i = 0; i <= EXACT_CAND; i++)
		many[i] = t.cand[i % t.n_cand];
	memcpy(keep, all, t.g->n_values);
	cr_assert_eq(exact_kept_sets(&t.m, t.flops, many, EXACT_CAND + 1, UINT64_MAX, 0, keep, &r, &e), 0, "%s", e.msg);
	cr_expect(!r.done && !r.found && !r.n_weighed, "%u candidates: done %d, found %d", EXACT_CAND + 1, r.done, r.found);
	cr_expect_eq(memcmp(keep, all, t.g->n_values), 0);
	free(keep);
	free(all);
	tg_free(&t);
}

/* An entry plan with a backward checkpoint (level 2) on a value that is no candidate: the search
 * prunes nothing by FLOPs (they may fall as the drop set grows) and still finds the optimum of every
 * drop set of the others, the checkpoint kept as it is. */
Test(exact, entry_plan_with_levels_is_searched_exhaustively)
{
	int cases = 0, levelled = 0;
	uint64_t falls = 0;
	for (unsigned seed = 1; seed <= DAGS; seed += 3) {
		struct tg t;
		tg_build(&t, dag(seed, 5 + (int)seed % 7), NULL, 0);
		/* the first candidate a backward node reads becomes a level-2 checkpoint, out of the search */
		uint32_t c = UINT32_MAX;
		for (uint32_t i = 0; i < t.g->n_nodes; i++)
			for (uint32_t k = 0; (t.g->nodes[i]->tags & TAG_BACKWARD) && k < t.g->nodes[i]->n_in; k++)
				for (uint32_t j = 0; t.g->nodes[i]->in[k] && j < t.n_cand && c == UINT32_MAX; j++)
					if (t.cand[j] == t.g->nodes[i]->in[k]->id)
						c = j;
		if (c == UINT32_MAX) {
			tg_free(&t);
			continue;
		}
		uint8_t *base = malloc(t.g->n_values), *keep = malloc(t.g->n_values);
		memset(base, RC_KEPT, t.g->n_values);
		uint32_t ck = t.cand[c];
		base[ck] = RC_AT_LEVEL(2);
		t.cand[c] = t.cand[--t.n_cand];
		uint64_t *peak, *flops;
		every_set(&t, base, &peak, &flops);
		size_t n = (size_t)1 << t.n_cand;
		for (size_t mask = 0; mask < n; mask++) /* how often FLOPs fall as a drop set grows, here */
			for (uint32_t u = 0; u < t.n_cand; u++)
				falls += !((mask >> u) & 1) && flops[mask | (size_t)1 << u] < flops[mask];
		for (int q = 0; q < 8; q++) {
			uint64_t budget = peak[(size_t)rand() % n] + (uint64_t)q, opt = optimum(peak, flops, n, budget);
			struct exact_result r = search(&t, base, budget, 1u << 19, keep);
			cr_expect(r.exhaustive && r.done && r.found, "seed %u: exhaustive %d, done %d, found %d", seed, r.exhaustive,
				  r.done, r.found);
			uint64_t p, fl;
			weigh(&t, keep, &p, &fl);
			cr_expect(fl == opt && p <= budget && keep[ck] == RC_AT_LEVEL(2), "seed %u, budget %llu: %llu FLOPs, optimum %llu",
				  seed, (unsigned long long)budget, (unsigned long long)fl, (unsigned long long)opt);
			cases++;
		}
		levelled++;
		free(peak);
		free(flops);
		free(base);
		free(keep);
		tg_free(&t);
	}
	cr_expect_gt(levelled, 5, "%d DAGs with a checkpoint", levelled);
	fprintf(stderr, "entry plans with a level-2 checkpoint: %d budgets on %d DAGs; FLOPs fell in %llu of the drop sets grown by one\n",
		cases, levelled, (unsigned long long)falls);
}
