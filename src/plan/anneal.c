/* anneal.c - see anneal.h. */
#include "anneal.h"
#include "auto.h"
#include "../rewrite/recompute.h"
#include "../util/hash.h"
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

/* Plans weighed, by a hash of their candidates' flags: annealing proposes the same plan again
 * and again (most moves are undone), and a plan found here is not weighed twice. */
struct seen {
	uint64_t hash, peak, flops; /* hash 0: empty */
};

struct job {
	struct memmodel *m;
	const uint64_t *flops;
	const uint32_t *cand;
	uint32_t n_cand, per; /* per: weighs per target */
	uint64_t top, low;
	const struct anneal_plan *seeds;
	size_t n_seeds, nv;
	uint32_t n_weighed;
	struct seen *seen;
	size_t n_seen, cap_seen; /* cap_seen: a power of two */
	uint32_t *sibling;       /* per candidate: the next made by the same node (a cycle) */
};

/* Candidate i's share of a plan's hash with flag k (Zobrist hashing: a plan's hash is the xor of
 * its candidates' shares, so a move updates it in O(1)). */
static uint64_t share(uint32_t i, uint8_t k)
{
	return hash_u64(0, (uint64_t)i << 8 | k);
}

static uint64_t plan_hash(const struct job *j, const uint8_t *keep)
{
	uint64_t h = 0;
	for (uint32_t i = 0; i < j->n_cand; i++)
		h ^= share(i, keep[j->cand[i]]);
	return h ? h : 1;
}

/* The slot of hash h: its entry, or the empty one where it goes. */
static struct seen *seen_slot(const struct job *j, uint64_t h)
{
	size_t i = (size_t)h & (j->cap_seen - 1);
	while (j->seen[i].hash && j->seen[i].hash != h)
		i = (i + 1) & (j->cap_seen - 1);
	return &j->seen[i];
}

/* Plan cur (hash h) weighed: from the table, or by ckpt_weigh and then into the table (*fresh);
 * into the front fr either way. 0, or an error code with e set. */
static int weigh(struct job *j, struct front *fr, const uint8_t *cur, uint64_t h, uint64_t *peak, uint64_t *flops,
		 int *fresh, struct gd_err *e)
{
	struct seen *s = seen_slot(j, h);
	*fresh = !s->hash;
	if (!*fresh) { /* weighed already, maybe by another sweep: into this one's front too */
		*peak = s->peak;
		*flops = s->flops;
		return front_add(fr, *peak, *flops, cur, j->nv) ? err_oom(e) : 0;
	}
	if (ckpt_weigh(j->m, cur, j->flops, peak, flops, NULL, e))
		return e->code;
	j->n_weighed++;
	if (front_add(fr, *peak, *flops, cur, j->nv))
		return err_oom(e);
	if (2 * (j->n_seen + 1) > j->cap_seen)
		return 0; /* full enough: weighed again from here on */
	*s = (struct seen){h, *peak, *flops};
	j->n_seen++;
	return 0;
}

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

/* A move's change of one candidate, to undo it. */
struct change {
	uint32_t i;
	uint8_t old;
};

#define SIBLINGS 16 /* a node move sets at most this many of a node's outputs */

/* Sets candidate i's flag to k in cur, noting the change in mv[*n] and in hash *h. */
static void set_flag(const struct job *j, uint8_t *cur, uint32_t i, uint8_t k, struct change *mv, uint32_t *n, uint64_t *h)
{
	uint32_t v = j->cand[i];
	mv[(*n)++] = (struct change){i, cur[v]};
	*h ^= share(i, cur[v]) ^ share(i, k);
	cur[v] = k;
}

/* One annealing run at target t from plan cur (peak p, FLOPs f): until per new plans are weighed
 * (into fr), or 8 times that many proposed; it cools as it weighs. */
static int anneal_at(struct job *j, struct front *fr, uint8_t *cur, uint64_t p, uint64_t f, uint64_t t,
		     uint32_t per, uint64_t *seed, struct gd_err *e)
{
	int fitting = p <= t;
	uint32_t from = 0, weighed = 0, most = 8 * per;
	uint64_t h = plan_hash(j, cur);
	double t0 = fitting ? 0.05 * (double)f + 1 : 0.02 * (double)p + 1;
	for (uint32_t it = 0; it < most && weighed < per; it++) {
		double temp = t0 * pow(1e-4, (double)(weighed - from) / (double)(per - from));
		struct change mv[SIBLINGS + 2];
		uint32_t n = 0, ia = (uint32_t)(next(seed) % j->n_cand);
		uint64_t h2 = h;
		uint8_t k = other_state(seed, cur[j->cand[ia]]);
		set_flag(j, cur, ia, k, mv, &n, &h2);
		if (next(seed) % 2) /* the node's other outputs too: a node recomputed makes them all */
			for (uint32_t s = j->sibling[ia]; s != ia && n <= SIBLINGS; s = j->sibling[s])
				set_flag(j, cur, s, k, mv, &n, &h2);
		if (next(seed) % 3 == 0) {
			uint32_t ib = (uint32_t)(next(seed) % j->n_cand);
			set_flag(j, cur, ib, other_state(seed, cur[j->cand[ib]]), mv, &n, &h2);
		}
		h2 = h2 ? h2 : 1;
		uint64_t p2, f2;
		int fresh, rc = weigh(j, fr, cur, h2, &p2, &f2, &fresh, e);
		if (rc)
			return rc;
		weighed += (uint32_t)fresh;
		double worse = fitting ? (double)f2 - (double)f : (double)p2 - (double)p;
		int take = fitting ? p2 <= t && (worse <= 0 || uniform(seed) < exp(-worse / temp))
				   : worse < 0 || (worse == 0 && f2 <= f) || uniform(seed) < exp(-worse / temp);
		if (!take) {
			while (n--)
				cur[j->cand[mv[n].i]] = mv[n].old;
			continue;
		}
		p = p2;
		f = f2;
		h = h2;
		if (!fitting && p <= t) { /* fits: now the FLOPs, cooling anew */
			fitting = 1;
			from = weighed;
			t0 = 0.05 * (double)f + 1;
		}
	}
	return 0;
}

/* anneal_at from plan s (copied: s moves as the front grows). */
static int anneal_from(struct job *j, struct front *fr, uint8_t *cur, const struct anneal_plan *s, uint64_t t,
		       uint32_t per, uint64_t *seed, struct gd_err *e)
{
	memcpy(cur, s->keep, j->nv);
	return anneal_at(j, fr, cur, s->peak, s->flops, t, per, seed, e);
}

/* The sweep: at each target, annealing from the best plan for it so far. */
static int sweep(struct job *j, struct front *fr, uint64_t seed, struct gd_err *e)
{
	uint8_t *cur = xmalloc(j->nv);
	int rc = cur ? 0 : err_oom(e);
	for (size_t i = 0; i < j->n_seeds && !rc; i++)
		if (front_add(fr, j->seeds[i].peak, j->seeds[i].flops, j->seeds[i].keep, j->nv))
			rc = err_oom(e);
	uint64_t last = UINT64_MAX;
	for (uint32_t k = 1; k <= ANNEAL_TARGETS && fr->n && !rc; k++) {
		uint64_t t = j->top <= j->low ? j->low : j->top - (uint64_t)((double)(j->top - j->low) * k / ANNEAL_TARGETS);
		/* from the best plan for the last target, if it does not fit this one, for half the
		 * weighs: a cheap plan just above the target is often a few moves from a cheap one
		 * below it, which moves among the plans that fit cannot reach (a 3-layer
		 * transformer's 131,072-FLOP plan at 99% of none's peak); then from the best that fits */
		const struct anneal_plan *s = front_best(fr, t), *c = front_best(fr, last);
		uint32_t half = c != s && c->peak > t ? j->per / 2 : 0;
		if (half)
			rc = anneal_from(j, fr, cur, c, t, half, &seed, e);
		if (!rc)
			rc = anneal_from(j, fr, cur, front_best(fr, t), t, j->per - half, &seed, e);
		last = t;
	}
	/* then the lowest peak, longer: the targets near the bound are few, and a plan there is what
	 * decides whether the smallest budgets fit at all */
	if (!rc && fr->n)
		rc = anneal_from(j, fr, cur, front_best(fr, j->low), j->low, j->per * ANNEAL_LEAST, &seed, e);
	xfree(cur);
	return rc;
}

/* j->sibling: the candidates each node makes, linked in cycles. 0, or -1 when out of memory. */
static int siblings(struct job *j)
{
	const struct flat *f = &j->m->f;
	uint32_t *last = xmalloc(sizeof *last * (f->n_nodes + 1));
	if (!last || !(j->sibling = xmalloc(sizeof *j->sibling * j->n_cand))) {
		xfree(last);
		return -1;
	}
	for (uint32_t i = 0; i < f->n_nodes; i++)
		last[i] = UINT32_MAX;
	for (uint32_t i = 0; i < j->n_cand; i++) { /* insert i after the node's last: a cycle all along */
		uint32_t p = f->producer[j->cand[i]], l = last[p];
		j->sibling[i] = l == UINT32_MAX ? i : j->sibling[l];
		if (l != UINT32_MAX)
			j->sibling[l] = i;
		last[p] = i;
	}
	xfree(last);
	return 0;
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
			.n_seeds = n_seeds, .nv = m->f.n_values ? m->f.n_values : 1,
			.per = weighs / (ANNEAL_SWEEPS * (ANNEAL_TARGETS + ANNEAL_LEAST))};
	for (size_t i = 0; i < n_seeds; i++)
		if (seeds[i].peak > j.top)
			j.top = seeds[i].peak;
	for (j.cap_seen = 64; j.cap_seen < 2 * (size_t)weighs + 2; j.cap_seen *= 2)
		;
	int rc = 0;
	if (n_cand && n_seeds && j.per && (siblings(&j) || !(j.seen = xcalloc(j.cap_seen, sizeof *j.seen))))
		rc = err_oom(e);
	struct front all = {0};
	for (uint32_t c = 0; c < ANNEAL_SWEEPS && j.seen && !rc; c++) {
		struct front fr = {0};
		rc = sweep(&j, &fr, 0x9E3779B97F4A7C15ull * (c + 1), e);
		for (size_t i = 0; i < fr.n && !rc; i++)
			if (front_add(&all, fr.p[i].peak, fr.p[i].flops, fr.p[i].keep, j.nv))
				rc = err_oom(e);
		anneal_free(fr.p, fr.n);
	}
	/* the plans kept weighed again: one the table answered for could, by a hash that collides, carry
	 * another's figures, and auto reports what its plan weighs */
	for (size_t i = 0; i < all.n && !rc; i++)
		if (ckpt_weigh(m, all.p[i].keep, flops, &all.p[i].peak, &all.p[i].flops, NULL, e))
			rc = e->code;
	xfree(j.seen);
	xfree(j.sibling);
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
