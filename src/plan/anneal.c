/* anneal.c - see anneal.h. */
#include "anneal.h"
#include "auto.h"
#include "../rewrite/recompute.h"
#include "../util/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Plans no other in the set beats in both peak and FLOPs. */
struct front {
	struct anneal_plan *p;
	size_t n, cap;
};

/* Adds plan (peak, flops, keep) unless one in f is as good in both; drops those it beats. 0, or -1
 * when out of memory. */
static int front_add(struct front *f, uint64_t peak, uint64_t flops, const uint8_t *keep, size_t nv)
{
	size_t j = 0;
	for (size_t i = 0; i < f->n; i++)
		if (f->p[i].peak <= peak && f->p[i].flops <= flops)
			return 0;
	for (size_t i = 0; i < f->n; i++)
		if (peak <= f->p[i].peak && flops <= f->p[i].flops)
			xfree(f->p[i].keep);
		else
			f->p[j++] = f->p[i];
	f->n = j;
	uint8_t *k = xmalloc(nv);
	if (!k || xgrow((void **)&f->p, f->n, &f->cap, sizeof *f->p)) {
		xfree(k);
		return -1;
	}
	memcpy(k, keep, nv);
	f->p[f->n++] = (struct anneal_plan){peak, flops, k};
	return 0;
}

/* The plan of f to start from for target t: the fewest FLOPs that fit (ties to the lower peak),
 * else the lowest peak. */
static const struct anneal_plan *front_best(const struct front *f, uint64_t t)
{
	const struct anneal_plan *b = NULL;
	for (size_t i = 0; i < f->n; i++) {
		const struct anneal_plan *p = &f->p[i];
		int fit = p->peak <= t, bfit = b && b->peak <= t;
		if (!b || (fit && (!bfit || p->flops < b->flops || (p->flops == b->flops && p->peak < b->peak))) ||
		    (!fit && !bfit && p->peak < b->peak))
			b = p;
	}
	return b;
}

struct job {
	struct memmodel *m;
	const uint64_t *flops;
	const uint32_t *cand;
	uint32_t n_cand, per; /* per: weighs per target */
	uint64_t top, low;
	const struct anneal_plan *seeds;
	size_t n_seeds, nv;
	struct front front;
	uint32_t n_weighed;
};

static uint64_t next(uint64_t *s) /* xorshift64 */
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double uniform(uint64_t *s)
{
	return (double)(next(s) >> 11) * 0x1p-53;
}

/* A state other than keep flag k's: kept, the innermost level, or a level 2 .. ANNEAL_LEVELS (a
 * flag of a deeper level, from a seed, is changed like the innermost level's). */
static uint8_t other_state(uint64_t *s, uint8_t k)
{
	uint32_t now = k & 1 ? 0 : k && k / 2u <= ANNEAL_LEVELS ? k / 2u : 1u;
	uint32_t pick = (uint32_t)(next(s) % ANNEAL_LEVELS); /* 0 .. ANNEAL_LEVELS - 1 */
	if (pick >= now)
		pick++; /* 0 .. ANNEAL_LEVELS, skipping the current state */
	return pick == 0 ? RC_KEPT : pick == 1 ? RC_DROP : RC_AT_LEVEL(pick);
}

/* One annealing run at target t from plan cur (peak p, FLOPs f), every plan weighed into fr. */
static int anneal_at(struct job *j, struct front *fr, uint8_t *cur, uint64_t p, uint64_t f, uint64_t t,
		     uint64_t *seed, struct gd_err *e)
{
	int fitting = p <= t;
	uint32_t from = 0;
	double t0 = fitting ? 0.05 * (double)f + 1 : 0.02 * (double)p + 1;
	for (uint32_t it = 0; it < j->per; it++) {
		double temp = t0 * pow(1e-4, (double)(it - from) / (double)(j->per - from));
		uint32_t a = j->cand[next(seed) % j->n_cand], b = a;
		uint8_t ka = cur[a], kb = 0;
		cur[a] = other_state(seed, ka);
		if (next(seed) % 3 == 0) {
			b = j->cand[next(seed) % j->n_cand];
			kb = cur[b];
			cur[b] = other_state(seed, kb);
		}
		uint64_t p2, f2;
		if (ckpt_weigh(j->m, cur, j->flops, &p2, &f2, NULL, e))
			return e->code;
		j->n_weighed++;
		if (front_add(fr, p2, f2, cur, j->nv))
			return err_oom(e);
		double worse = fitting ? (double)f2 - (double)f : (double)p2 - (double)p;
		int take = fitting ? p2 <= t && (worse <= 0 || uniform(seed) < exp(-worse / temp))
				   : worse < 0 || (worse == 0 && f2 <= f) || uniform(seed) < exp(-worse / temp);
		if (!take) {
			if (b != a)
				cur[b] = kb;
			cur[a] = ka;
			continue;
		}
		p = p2;
		f = f2;
		if (!fitting && p <= t) { /* fits: now the FLOPs, cooling anew */
			fitting = 1;
			from = it + 1;
			t0 = 0.05 * (double)f + 1;
		}
	}
	return 0;
}

/* The sweep: at each target, annealing from the best plan for it so far. */
static int sweep(struct job *j, struct gd_err *e)
{
	struct front *fr = &j->front;
	uint8_t *cur = xmalloc(j->nv);
	int rc = cur ? 0 : err_oom(e);
	for (size_t i = 0; i < j->n_seeds && !rc; i++)
		if (front_add(fr, j->seeds[i].peak, j->seeds[i].flops, j->seeds[i].keep, j->nv))
			rc = err_oom(e);
	uint64_t seed = 0x9E3779B97F4A7C15ull;
	for (uint32_t k = 1; k <= ANNEAL_TARGETS && fr->n && !rc; k++) {
		uint64_t t = j->top <= j->low ? j->low : j->top - (uint64_t)((double)(j->top - j->low) * k / ANNEAL_TARGETS);
		const struct anneal_plan *s = front_best(fr, t);
		memcpy(cur, s->keep, j->nv); /* s moves as the front grows */
		rc = anneal_at(j, fr, cur, s->peak, s->flops, t, &seed, e);
	}
	/* then the lowest peak, longer: the targets near the bound are few, and a plan there is what
	 * decides whether the smallest budgets fit at all */
	j->per *= ANNEAL_LEAST;
	if (!rc && fr->n) {
		const struct anneal_plan *s = front_best(fr, j->low);
		memcpy(cur, s->keep, j->nv);
		rc = anneal_at(j, fr, cur, s->peak, s->flops, j->low, &seed, e);
	}
	xfree(cur);
	return rc;
}

static int by_peak(const void *a, const void *b)
{
	const struct anneal_plan *x = a, *y = b;
	return x->peak < y->peak ? -1 : x->peak > y->peak;
}

void anneal_free(struct anneal_plan *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		xfree(p[i].keep);
	xfree(p);
}

int anneal_sweep(struct memmodel *m, const uint64_t *flops, const uint32_t *cand, uint32_t n_cand,
		 const struct anneal_plan *seeds, size_t n_seeds, uint64_t low, uint32_t weighs,
		 struct anneal_plan **out, size_t *n_out, uint32_t *n_weighed, struct gd_err *e)
{
	struct job j = {.m = m, .flops = flops, .cand = cand, .n_cand = n_cand, .low = low, .seeds = seeds,
			.n_seeds = n_seeds, .nv = m->f.n_values ? m->f.n_values : 1, .per = weighs / (ANNEAL_TARGETS + ANNEAL_LEAST)};
	for (size_t i = 0; i < n_seeds; i++)
		if (seeds[i].peak > j.top)
			j.top = seeds[i].peak;
	int rc = n_cand && n_seeds && j.per ? sweep(&j, e) : 0;
	struct front all = j.front;
	*out = NULL;
	*n_out = 0;
	*n_weighed = j.n_weighed;
	if (rc) {
		anneal_free(all.p, all.n);
		return rc;
	}
	qsort(all.p, all.n, sizeof *all.p, by_peak);
	*out = all.p;
	*n_out = all.n;
	return 0;
}
