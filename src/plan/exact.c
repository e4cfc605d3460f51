/* exact.c - see exact.h. */
#include "exact.h"
#include "../util/xalloc.h"
#include "auto.h"

#include <stdlib.h>
#include <string.h>

/* A search node: the drop set (bit i: the i-th candidate of the search's order) and the fewest
 * FLOPs any plan of its subtree that fits can have (flops_bound). A node is weighed when taken
 * from the queue the first time, and put back with its own FLOPs and peak, then expanded when
 * taken again: children whose bound rules them out are never weighed. Before it is weighed,
 * flops and peak are its parent's and cloned holds its parent's cloned candidates' producers
 * and its own. */
struct qent {
	uint64_t lb, flops, peak, mask;
	uint64_t cloned; /* bit i: candidate i's producer is cloned */
	int weighed;
};

static int before(const struct qent *a, const struct qent *b)
{
	if (a->lb != b->lb)
		return a->lb < b->lb;
	if (a->weighed != b->weighed) /* weighing one may find a plan that fits at this bound */
		return a->weighed < b->weighed;
	if (a->flops != b->flops)
		return a->flops < b->flops;
	if (a->peak != b->peak)
		return a->peak < b->peak;
	return a->mask < b->mask; /* the same order on every run */
}

struct heap {
	struct qent *q;
	size_t n, cap;
};

static int heap_push(struct heap *h, struct qent x)
{
	if (xgrow((void **)&h->q, h->n, &h->cap, sizeof *h->q))
		return -1;
	size_t i = h->n++;
	while (i && before(&x, &h->q[(i - 1) / 2])) {
		h->q[i] = h->q[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->q[i] = x;
	return 0;
}

static struct qent heap_pop(struct heap *h)
{
	struct qent top = h->q[0], x = h->q[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && before(&h->q[c + 1], &h->q[c]))
			c++;
		if (!before(&h->q[c], &x))
			break;
		h->q[i] = h->q[c];
		i = c;
	}
	if (h->n)
		h->q[i] = x;
	return top;
}

struct search {
	struct memmodel *m;
	const uint64_t *flops;
	uint8_t *keep;
	uint32_t n;                /* candidates searched */
	uint32_t *val;             /* their value ids, the last made first */
	uint8_t *always;           /* per candidate: a backward node reads it, or (g not sorted) a
				    * forward reader makes a candidate later in the order */
	uint32_t *rd_off, *rd;     /* per candidate: the values its forward readers make (CSR) */
	uint32_t max_weighs, n_weighed;
	/* the bounds (peak_bound, flops_bound) */
	uint32_t n_seg;
	uint64_t *seg_base, *seg_kept; /* per segment: the most bytes live in every plan; the candidates
					* live there when kept (bit i: candidate i) */
	uint64_t *cbytes;              /* per candidate */
	double *ratio;                 /* per candidate: the FLOPs of dropping it, per byte of its gap */
	uint32_t *by_ratio;            /* the candidates with a gap, cheapest per byte first */
	uint32_t n_by_ratio;
	int levels;                    /* the entry plan has backward checkpoints */
	uint64_t *same;                /* per candidate: the candidates its producer makes */
	/* for held_inputs */
	const uint8_t *entry;          /* the plan on entry */
	uint32_t *cidx;                /* per value: its candidate index, UINT32_MAX for none */
	uint32_t *readers, *first_bwd; /* per value: nodes that read it; its first backward reader + 1 */
	double *pratio;                /* per candidate that is a private input: its drop_ratio */
};

static int by_producer_desc(const void *a, const void *b, void *ctx)
{
	const uint32_t *producer = ctx, x = producer[*(const uint32_t *)a], y = producer[*(const uint32_t *)b];
	return x > y ? -1 : x < y;
}

/* The plan of drop set `mask` into s->keep, weighed. */
static int weigh_mask(struct search *s, uint64_t mask, struct qent *out, struct gd_err *e)
{
	for (uint32_t i = 0; i < s->n; i++)
		s->keep[s->val[i]] = (mask >> i) & 1 ? RC_DROP : RC_KEPT;
	out->mask = mask;
	out->weighed = 1;
	s->n_weighed++;
	if (ckpt_weigh(s->m, s->keep, s->flops, &out->peak, &out->flops, NULL, e))
		return e->code;
	out->cloned = 0;
	for (uint32_t i = 0; i < s->n; i++)
		if (s->m->rc.times[s->m->f.producer[s->val[i]]])
			out->cloned |= (uint64_t)1 << i;
	return 0;
}

/* Whether dropping candidate i, with s->keep holding a drop set of candidates before it only, can
 * change the schedule: a backward node reads it, or a forward reader of it makes a dropped value
 * (whose recompute may read it). */
static int reachable(const struct search *s, uint32_t i)
{
	if (s->always[i])
		return 1;
	for (uint32_t k = s->rd_off[i]; k < s->rd_off[i + 1]; k++)
		if (rc_dropped(&s->m->f, s->keep, s->rd[k]))
			return 1;
	return 0;
}

/* The candidates whose keep flag is read, in reverse topological order, with their readers. */
static int search_init(struct search *s, const uint32_t *cand, uint32_t n_cand)
{
	const struct flat *f = &s->m->f;
	uint32_t *idx = xmalloc(sizeof *idx * (f->n_values ? f->n_values : 1));
	s->val = xmalloc(sizeof *s->val * (n_cand ? n_cand : 1));
	s->always = xcalloc(n_cand ? n_cand : 1, 1);
	s->rd_off = xcalloc((size_t)n_cand + 1, sizeof *s->rd_off);
	if (!idx || !s->val || !s->always || !s->rd_off) {
		xfree(idx);
		return -1;
	}
	for (uint32_t v = 0; v < f->n_values; v++)
		idx[v] = UINT32_MAX;
	s->n = 0;
	for (uint32_t i = 0; i < n_cand; i++) {
		uint32_t v = cand[i];
		if (v < f->n_values && idx[v] == UINT32_MAX && (f->vflags[v] & FLAT_DROPPABLE) && !rc_forced(f, v) &&
		    f->producer[v] != FLAT_NONE) {
			idx[v] = 0;
			s->val[s->n++] = v;
		}
	}
	qsort_r(s->val, s->n, sizeof *s->val, by_producer_desc, f->producer);
	for (uint32_t i = 0; i < s->n; i++)
		idx[s->val[i]] = i;
	/* two sweeps over the forward readers: count, then fill */
	size_t n_rd = 0;
	for (int fill = 0; fill < 2; fill++) {
		for (uint32_t p = 0; p < f->n_nodes; p++)
			for (uint32_t k = f->in_off[p]; k < f->in_off[p + 1]; k++) {
				uint32_t v = f->in[k], i = v == FLAT_NONE ? UINT32_MAX : idx[v];
				if (i == UINT32_MAX)
					continue;
				if (f->nflags[p] & FLAT_BACKWARD) {
					s->always[i] = 1;
					continue;
				}
				if (!(f->nflags[p] & FLAT_FORWARD))
					continue;
				for (uint32_t o = f->out_off[p]; o < f->out_off[p + 1]; o++) {
					uint32_t w = f->out[o];
					if (w == FLAT_NONE)
						continue;
					if (!fill)
						s->rd_off[i + 1]++;
					else
						s->rd[s->rd_off[i + 1]++] = w;
				}
			}
		if (!fill) {
			for (uint32_t i = 0; i < s->n; i++)
				s->rd_off[i + 1] += s->rd_off[i];
			n_rd = s->rd_off[s->n];
			if (!(s->rd = xmalloc(sizeof *s->rd * (n_rd ? n_rd : 1)))) {
				xfree(idx);
				return -1;
			}
			memmove(s->rd_off + 1, s->rd_off, sizeof *s->rd_off * s->n); /* starts, filled up */
			s->rd_off[0] = 0;
		}
	}
	for (uint32_t i = 0; i < s->n; i++)
		for (uint32_t k = s->rd_off[i]; k < s->rd_off[i + 1]; k++)
			s->always[i] |= idx[s->rd[k]] != UINT32_MAX && idx[s->rd[k]] > i;
	xfree(idx);
	return 0;
}

/* A lower bound on the peak of every plan that keeps the candidates of `kept` (and drops any of the
 * others): before each step of g's order, the values live in every such plan are live (a step's
 * peak is at least what is live before it: its outputs are allocated before its inputs are freed,
 * and a buffer taken over is at most the output's). Those are the resident ones, the backward
 * pass's own, each forward value up to its last reader that reads the original whatever the plan
 * (not a backward node), and a value a backward node reads from its first backward reader to its
 * last: the original if kept, else its recomputed copy, made just before the first and kept to
 * the last (without levels; with them a copy may go and come back, so then only a kept value
 * counts there). What keeping a candidate adds is the gap between: its kept interval. In the
 * segments between the ends of those intervals the set of kept intervals is one, so the bound is
 * a maximum over segments. */
static uint64_t peak_bound(const struct search *s, uint64_t kept)
{
	uint64_t lb = 0;
	for (uint32_t j = 0; j < s->n_seg; j++) {
		uint64_t b = s->seg_base[j];
		for (uint64_t k = s->seg_kept[j] & kept; k; k &= k - 1)
			b += s->cbytes[__builtin_ctzll(k)];
		lb = b > lb ? b : lb;
	}
	return lb;
}

/* Whether node p's input w is private to it: an activation no backward node reads and no other
 * node, made by a node that makes nothing else. When p is cloned, w is then kept past its forward
 * reader only for p's clone, or dropped and made by a clone of its own producer. */
static int private_input(const struct flat *f, uint32_t w, const uint32_t *readers, const uint32_t *first_bwd)
{
	return w != FLAT_NONE && f->producer[w] != FLAT_NONE &&
	       (f->vflags[w] & (FLAT_DROPPABLE | FLAT_PINNED | FLAT_FIXED)) == FLAT_DROPPABLE && !first_bwd[w] &&
	       readers[w] == 1 && f->out_off[f->producer[w] + 1] - f->out_off[f->producer[w]] == 1;
}

/* Input slot k of node p holds a value no earlier slot of p holds (Concat(a, a) reads a once). */
static int first_read(const struct flat *f, uint32_t p, uint32_t k)
{
	for (uint32_t q = f->in_off[p]; q < k; q++)
		if (f->in[q] == f->in[k])
			return 0;
	return 1;
}

/* The least, over the ways to provide node p's private inputs to its clone, of FLOPs + lambda x the
 * bytes kept for it: each is kept (its bytes), or dropped (its producer's FLOPs, and its own
 * private inputs the same way). Past a depth of 64, nothing (a lower bound still). */
static double private_cost(const struct search *s, uint32_t p, double lambda, const uint32_t *readers,
			   const uint32_t *first_bwd, int depth)
{
	const struct flat *f = &s->m->f;
	double sum = 0;
	for (uint32_t k = f->in_off[p]; depth < 64 && k < f->in_off[p + 1]; k++) {
		uint32_t w = f->in[k];
		if (!private_input(f, w, readers, first_bwd) || !first_read(f, p, k))
			continue;
		double keep = lambda * (double)s->m->bytes[w];
		double drop = (double)s->flops[f->producer[w]] + private_cost(s, f->producer[w], lambda, readers, first_bwd, depth + 1);
		sum += keep < drop ? keep : drop;
	}
	return sum;
}

/* The fewest FLOPs per byte that dropping candidate u (its gap: `bytes`; its producer's FLOPs:
 * `cost`) can cost, its gap being what it frees at most. Its clone reads its
 * producer's inputs; a private one (private_input) that is kept lives over u's whole gap, so frees
 * less, and one dropped costs its producer's FLOPs more. The least ratio of FLOPs to bytes freed
 * over those ways (that free some bytes) is the least lambda with lambda x bytes > cost +
 * private_cost(lambda), which holds from there on: found by bisection, the lower end returned.
 * The other inputs are taken as free, which only lowers the bound. */
static double drop_ratio(const struct search *s, uint32_t u, uint64_t bytes, double cost, const uint32_t *readers,
			 const uint32_t *first_bwd)
{
	uint32_t p = s->m->f.producer[u];
#define SHORT(lambda) ((lambda) * (double)bytes <= cost + private_cost(s, p, (lambda), readers, first_bwd, 0))
	double lo = 0, hi = (cost + 1) / (double)bytes;
	for (int i = 0; i < 64 && SHORT(hi); i++)
		lo = hi, hi *= 2;
	for (int i = 0; i < 50; i++) {
		double mid = (lo + hi) / 2;
		*(SHORT(mid) ? &lo : &hi) = mid;
	}
#undef SHORT
	return lo;
}

/* The fewest FLOPs a plan that fits can have in the subtree of drop set `mask` whose last
 * candidate is `last` (-1: the root), when its plan recomputes at least `flops` and clones the
 * producers of the candidates in `cloned`; UINT64_MAX when none fits. Dropping more never unclones a node (exact.h), and dropping a candidate a backward
 * node reads clones its producer: so on top of `flops`, each segment whose peak bound exceeds the
 * budget with the candidates after `last` kept needs some of them dropped, at least the bytes of
 * the excess, each at its producer's FLOPs (shared among the candidates it makes) unless the
 * producer is cloned already. The cheapest such cover, by the bytes and FLOPs of a fractional
 * knapsack, bounds each segment's; their maximum is the bound. Without levels only: with them
 * the FLOPs bound is `flops` (or none fits). */
/* What a dropped candidate's clone holds: its producer's private inputs (private_input) that are
 * kept are held over the candidate's whole gap (their last forward reader is its producer), those
 * dropped are made just in time and hold their own private inputs the same way. Bytes certainly
 * held (kept in every plan of the subtree) go to *certain; a later candidate, which the subtree may
 * keep or drop, becomes an item of the cover (its bytes, dropped at its drop_ratio). */
struct held {
	uint64_t bytes, owner; /* owner: the dropped candidate whose gap it is held over (bit) */
	double ratio;
};
#define HELD_ITEMS 64

static void held_inputs(const struct search *s, uint32_t v, uint64_t mask, uint64_t fixed, uint64_t cloned, uint64_t owner,
			uint64_t *certain, struct held *items, uint32_t *n_items, int depth)
{
	const struct flat *f = &s->m->f;
	uint32_t p = f->producer[v];
	for (uint32_t k = f->in_off[p]; depth < 64 && k < f->in_off[p + 1]; k++) {
		uint32_t w = f->in[k], i;
		if (!private_input(f, w, s->readers, s->first_bwd) || !first_read(f, p, k))
			continue;
		i = s->cidx[w];
		if (i == UINT32_MAX ? rc_dropped(f, s->entry, w) : (mask >> i) & 1)
			held_inputs(s, w, mask, fixed, cloned, owner, certain, items, n_items, depth + 1);
		else if (i == UINT32_MAX || (fixed >> i) & 1)
			*certain += s->m->bytes[w];
		else if (*n_items < HELD_ITEMS) /* else left out: a lower bound still */
			items[(*n_items)++] = (struct held){s->m->bytes[w], owner, (cloned >> i) & 1 ? 0 : s->pratio[i]};
	}
}

/* Whether dropped candidate u is recomputed at its first backward reader in every plan of the
 * subtree of drop set `mask` (u in it): no value its forward readers make is dropped, whose
 * recompute could make u earlier. Those values are candidates before u, decided in the subtree, or
 * others, as on entry (a later candidate: not known). */
static int on_time(const struct search *s, uint32_t u, uint64_t mask)
{
	for (uint32_t k = s->rd_off[u]; k < s->rd_off[u + 1]; k++) {
		uint32_t z = s->rd[k], i = s->cidx[z];
		if (i == UINT32_MAX ? rc_dropped(&s->m->f, s->entry, z) : i > u || ((mask >> i) & 1))
			return 0;
	}
	return 1;
}

static uint64_t flops_bound(const struct search *s, uint64_t mask, int last, uint64_t flops, uint64_t cloned_in,
			   uint64_t budget)
{
	const uint64_t all = s->n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << s->n) - 1;
	const uint64_t below = last < 0 ? 0 : last >= 63 ? ~(uint64_t)0 : ((uint64_t)1 << (last + 1)) - 1;
	const uint64_t rem = all & ~below, fixed = (below >> 1) & ~mask & all;
	uint64_t certain[64] = {0};
	struct held items[HELD_ITEMS];
	uint32_t n_items = 0;
	for (uint64_t k = s->levels ? 0 : mask; k; k &= k - 1) {
		uint32_t u = (uint32_t)__builtin_ctzll(k);
		if (s->cbytes[u] && !(s->same[u] & ~((uint64_t)1 << u)) && on_time(s, u, mask))
			held_inputs(s, s->val[u], mask, fixed, cloned_in, (uint64_t)1 << u, &certain[u], items, &n_items, 0);
	}
	for (uint32_t a = 1; a < n_items; a++) /* by ratio */
		for (uint32_t b = a; b > 0 && items[b].ratio < items[b - 1].ratio; b--) {
			struct held t = items[b];
			items[b] = items[b - 1];
			items[b - 1] = t;
		}
	double worst = 0;
	for (uint32_t j = 0; j < s->n_seg; j++) {
		uint64_t load = s->seg_base[j], cloned = s->seg_kept[j] & rem & cloned_in;
		for (uint64_t k = s->seg_kept[j] & (fixed | rem); k; k &= k - 1)
			load += s->cbytes[__builtin_ctzll(k)];
		for (uint64_t k = s->seg_kept[j] & mask; k; k &= k - 1)
			load += certain[__builtin_ctzll(k)];
		for (uint32_t h = 0; h < n_items; h++) /* held unless dropped too */
			load += items[h].owner & s->seg_kept[j] ? items[h].bytes : 0;
		if (load <= budget)
			continue;
		uint64_t excess = load - budget;
		for (uint64_t k = cloned; k && excess; k &= k - 1) { /* free: cloned already */
			uint32_t i = (uint32_t)__builtin_ctzll(k);
			excess -= excess < s->cbytes[i] ? excess : s->cbytes[i];
		}
		double cost = 0;
		for (uint32_t q = 0, h = 0; (q < s->n_by_ratio || h < n_items) && excess;) {
			uint64_t bytes;
			double ratio;
			if (h < n_items && (q == s->n_by_ratio || items[h].ratio <= s->ratio[s->by_ratio[q]])) {
				bytes = items[h].owner & s->seg_kept[j] ? items[h].bytes : 0;
				ratio = items[h++].ratio;
			} else {
				uint32_t i = s->by_ratio[q++];
				bytes = (s->seg_kept[j] & rem & ~cloned) >> i & 1 ? s->cbytes[i] : 0;
				ratio = s->ratio[i];
			}
			uint64_t take = excess < bytes ? excess : bytes;
			cost += (double)take * ratio;
			excess -= take;
		}
		if (excess)
			return UINT64_MAX;
		worst = cost > worst ? cost : worst;
	}
	if (s->levels)
		return flops;
	worst *= 1 - 1e-9; /* below the real number, whatever the rounding */
	return worst >= (double)(UINT64_MAX - flops) ? UINT64_MAX - 1 : flops + (uint64_t)worst;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int by_ratio_asc(const void *a, const void *b, void *ctx)
{
	const double *ratio = ctx, x = ratio[*(const uint32_t *)a], y = ratio[*(const uint32_t *)b];
	return x < y ? -1 : x > y;
}

/* Value v lives before steps [from, to) of g's order in every plan: into diff. */
static void live_over(int64_t *diff, uint32_t from, uint32_t to, uint64_t bytes)
{
	if (to > from) {
		diff[from] += (int64_t)bytes;
		diff[to] -= (int64_t)bytes;
	}
}

/* The segments of peak_bound for the candidates s->val and, for the other values, the plan
 * `entry`; `levels`: the plan has backward checkpoints. */
static int bound_init(struct search *s, const uint8_t *entry, int levels)
{
	const struct flat *f = &s->m->f;
	const uint32_t T = f->n_nodes, nv = f->n_values ? f->n_values : 1;
	/* per value: the last reader that is no backward node, the first and last backward readers
	 * (node index + 1, 0: none) */
	uint32_t *last_any = xcalloc(nv, sizeof *last_any), *first_bwd = s->first_bwd = xcalloc(nv, sizeof *first_bwd);
	uint32_t *last_bwd = xcalloc(nv, sizeof *last_bwd), *cidx = s->cidx = xmalloc(sizeof *cidx * nv);
	uint32_t *readers = s->readers = xcalloc(nv, sizeof *readers), *seen = xcalloc(nv, sizeof *seen);
	uint32_t *gap = xcalloc(2 * (size_t)s->n + 1, sizeof *gap); /* per candidate: its kept interval */
	uint32_t *ends = xmalloc(sizeof *ends * (2 * (size_t)s->n + 2));
	int64_t *diff = xcalloc((size_t)T + 2, sizeof *diff);
	s->cbytes = xcalloc(s->n ? s->n : 1, sizeof *s->cbytes);
	int rc = -1;
	if (!last_any || !first_bwd || !last_bwd || !cidx || !readers || !seen || !gap || !ends || !diff || !s->cbytes)
		goto out;
	for (uint32_t v = 0; v < f->n_values; v++)
		cidx[v] = UINT32_MAX;
	for (uint32_t i = 0; i < s->n; i++)
		cidx[s->val[i]] = i;
	for (uint32_t i = 0; i < T; i++)
		for (uint32_t k = f->in_off[i]; k < f->in_off[i + 1]; k++) {
			uint32_t v = f->in[k];
			if (v == FLAT_NONE)
				continue;
			if (seen[v] != i + 1) {
				seen[v] = i + 1;
				readers[v]++;
			}
			if (!(f->nflags[i] & FLAT_BACKWARD))
				last_any[v] = i + 1;
			else if (!first_bwd[v])
				first_bwd[v] = last_bwd[v] = i + 1;
			else
				last_bwd[v] = i + 1;
		}
	/* live before step t: made before t, read at t or after */
	uint64_t resident = 0;
	for (uint32_t v = 0; v < f->n_values; v++) {
		uint32_t p = f->producer[v], i = cidx[v];
		uint64_t bytes = s->m->bytes[v];
		if (p == FLAT_NONE) {
			resident += f->vflags[v] & FLAT_PINNED ? bytes : 0;
			continue;
		}
		uint32_t from = p + 1, fwd = last_any[v] > from ? last_any[v] : from; /* up to fwd: always */
		if (f->vflags[v] & FLAT_PINNED) {
			live_over(diff, from, T, bytes);
		} else if (!first_bwd[v] || (i == UINT32_MAX && !rc_dropped(f, entry, v))) {
			live_over(diff, from, last_bwd[v] > fwd ? last_bwd[v] : fwd, bytes);
		} else if (first_bwd[v] - 1 < fwd) { /* read backward before its last other reader */
			live_over(diff, from, last_bwd[v] > fwd ? last_bwd[v] : fwd, bytes);
		} else {
			uint32_t copy = levels ? last_bwd[v] : first_bwd[v] - 1; /* the copy lives from here */
			live_over(diff, from, fwd, bytes);
			live_over(diff, copy, last_bwd[v], bytes);
			if (i != UINT32_MAX && copy > fwd) {
				s->cbytes[i] = bytes;
				gap[2 * i] = fwd;
				gap[2 * i + 1] = copy;
			}
		}
	}
	uint32_t n_ends = 0;
	ends[n_ends++] = 0;
	ends[n_ends++] = T;
	for (uint32_t i = 0; i < s->n; i++)
		if (s->cbytes[i]) {
			ends[n_ends++] = gap[2 * i];
			ends[n_ends++] = gap[2 * i + 1];
		}
	qsort(ends, n_ends, sizeof *ends, cmp_u32);
	s->seg_base = xcalloc(n_ends, sizeof *s->seg_base);
	s->seg_kept = xcalloc(n_ends, sizeof *s->seg_kept);
	if (!s->seg_base || !s->seg_kept)
		goto out;
	int64_t live = 0;
	uint32_t t = 0;
	for (uint32_t j = 0; j + 1 < n_ends; j++) {
		if (ends[j] == ends[j + 1])
			continue;
		uint64_t most = 0, in = 0;
		for (; t < ends[j + 1]; t++) {
			live += diff[t];
			/* the step's outputs are allocated beside what lives before it; one may take over
			 * a buffer of its bytes (memsim: TAKES, REUSES) */
			uint64_t made = 0;
			for (uint32_t k = f->out_off[t]; k < f->out_off[t + 1]; k++)
				made += f->out[k] != FLAT_NONE ? s->m->bytes[f->out[k]] : 0;
			if (f->nflags[t] & (FLAT_TAKES | FLAT_REUSES))
				made -= f->out[f->out_off[t]] != FLAT_NONE ? s->m->bytes[f->out[f->out_off[t]]] : 0;
			most = (uint64_t)live + made > most ? (uint64_t)live + made : most;
		}
		for (uint32_t i = 0; i < s->n; i++)
			if (s->cbytes[i] && gap[2 * i] <= ends[j] && ends[j + 1] <= gap[2 * i + 1])
				in |= (uint64_t)1 << i;
		s->seg_base[s->n_seg] = resident + most;
		s->seg_kept[s->n_seg++] = in;
	}
	/* each candidate's FLOPs when dropped, per byte it frees (drop_ratio) */
	s->ratio = xcalloc(s->n ? s->n : 1, sizeof *s->ratio);
	s->by_ratio = xmalloc(sizeof *s->by_ratio * (s->n ? s->n : 1));
	if (!s->ratio || !s->by_ratio)
		goto out;
	for (uint32_t i = 0; i < s->n; i++) {
		if (!s->cbytes[i])
			continue;
		/* a producer that makes several candidates: its FLOPs over all the bytes they free */
		uint32_t p = f->producer[s->val[i]], share = 0;
		uint64_t freed = 0;
		for (uint32_t k = 0; k < s->n; k++)
			if (f->producer[s->val[k]] == p) {
				share++;
				freed += s->cbytes[k];
			}
		s->ratio[i] = share > 1 ? (double)s->flops[p] / (double)freed
					: drop_ratio(s, s->val[i], s->cbytes[i], (double)s->flops[p], readers, first_bwd);
		s->by_ratio[s->n_by_ratio++] = i;
	}
	qsort_r(s->by_ratio, s->n_by_ratio, sizeof *s->by_ratio, by_ratio_asc, s->ratio);
	if (!(s->pratio = xcalloc(s->n ? s->n : 1, sizeof *s->pratio)))
		goto out;
	for (uint32_t i = 0; i < s->n; i++)
		if (private_input(f, s->val[i], readers, first_bwd))
			s->pratio[i] = drop_ratio(s, s->val[i], s->m->bytes[s->val[i]], (double)s->flops[f->producer[s->val[i]]],
						  readers, first_bwd);
	if (!(s->same = xcalloc(s->n ? s->n : 1, sizeof *s->same)))
		goto out;
	for (uint32_t i = 0; i < s->n; i++)
		for (uint32_t k = 0; k < s->n; k++)
			if (f->producer[s->val[k]] == f->producer[s->val[i]])
				s->same[i] |= (uint64_t)1 << k;
	s->levels = levels;
	s->entry = entry;
	rc = 0;
out:
	xfree(last_any);
	xfree(last_bwd);
	xfree(seen);
	xfree(gap);
	xfree(ends);
	xfree(diff);
	return rc;
}

static void search_free(struct search *s)
{
	xfree(s->val);
	xfree(s->always);
	xfree(s->rd_off);
	xfree(s->rd);
	xfree(s->seg_base);
	xfree(s->seg_kept);
	xfree(s->cbytes);
	xfree(s->ratio);
	xfree(s->by_ratio);
	xfree(s->same);
	xfree(s->cidx);
	xfree(s->readers);
	xfree(s->first_bwd);
	xfree(s->pratio);
}

int exact_kept_sets(struct memmodel *m, const uint64_t *flops, const uint32_t *cand, uint32_t n_cand,
		    uint64_t budget, uint32_t max_weighs, uint8_t *keep, struct exact_result *r, struct gd_err *e)
{
	return exact_kept_sets_below(m, flops, cand, n_cand, budget, UINT64_MAX, max_weighs, keep, r, e);
}

int exact_kept_sets_below(struct memmodel *m, const uint64_t *flops, const uint32_t *cand, uint32_t n_cand,
			  uint64_t budget, uint64_t known, uint32_t max_weighs, uint8_t *keep, struct exact_result *r,
			  struct gd_err *e)
{
	memset(r, 0, sizeof *r);
	if (n_cand > EXACT_CAND)
		return 0;
	const struct flat *f = &m->f;
	struct search s = {.m = m, .flops = flops, .keep = keep, .max_weighs = max_weighs ? max_weighs : EXACT_WEIGHS};
	struct heap h = {0};
	uint8_t *entry = xmalloc(f->n_values ? f->n_values : 1);
	int rc = 0;
	if (!entry)
		goto oom;
	memcpy(entry, keep, f->n_values);
	/* an entry plan with levels: FLOPs may not be monotone in D, so nothing is pruned by them */
	for (uint32_t v = 0; v < f->n_values; v++)
		r->exhaustive |= (f->vflags[v] & FLAT_DROPPABLE) && keep[v] && !(keep[v] & 1);
	if (search_init(&s, cand, n_cand) || bound_init(&s, entry, r->exhaustive))
		goto oom;
	r->n_cand = s.n;
	if (peak_bound(&s, 0) > budget) { /* nothing fits, whatever is dropped */
		r->done = 1;
		goto out;
	}
	struct qent best = {.flops = known, .peak = UINT64_MAX}, root; /* .weighed: found */
	if ((rc = weigh_mask(&s, 0, &root, e)))
		goto out;
	root.lb = flops_bound(&s, 0, -1, root.flops, root.cloned, budget);
	if (root.peak <= budget && root.flops <= known)
		best = root;
	if ((r->exhaustive || root.peak > budget) && root.lb != UINT64_MAX && heap_push(&h, root))
		goto oom;
	int stopped = 0; /* by the limits */
	while (h.n && !stopped) {
		struct qent x = heap_pop(&h);
		if (!r->exhaustive && x.lb >= best.flops)
			break; /* no plan left that fits has fewer FLOPs than the best that fits */
		int last = x.mask ? 63 - __builtin_clzll(x.mask) : -1;
		if (!x.weighed) {
			if (s.n_weighed >= s.max_weighs) {
				stopped = 1;
				break;
			}
			struct qent c;
			uint64_t parent = x.flops;
			if ((rc = weigh_mask(&s, x.mask, &c, e)))
				goto out;
			r->n_falls += c.flops < parent;
			c.lb = flops_bound(&s, c.mask, last, c.flops, c.cloned, budget);
			if (c.lb != UINT64_MAX && c.lb < x.lb) /* both bound the same subtree */
				c.lb = x.lb;
			if (c.peak <= budget && (c.flops < best.flops || (c.flops == best.flops && c.peak < best.peak)))
				best = c;
			if (c.lb != UINT64_MAX && (r->exhaustive || c.lb < best.flops) && heap_push(&h, c))
				goto oom;
			continue;
		}
		for (uint32_t i = (uint32_t)(last + 1); i < s.n; i++) {
			/* s.keep as x's plan for the reachability test, which reads candidates before i */
			for (uint32_t k = 0; k < i; k++)
				keep[s.val[k]] = (x.mask >> k) & 1 ? RC_DROP : RC_KEPT;
			if (!reachable(&s, i))
				continue;
			/* the subtree keeps the candidates before i that x does not drop; the bound only
			 * grows with i */
			if (peak_bound(&s, (((uint64_t)1 << i) - 1) & ~x.mask) > budget) {
				r->n_bounded++;
				break;
			}
			if (h.n >= EXACT_QUEUE) {
				stopped = 1;
				break;
			}
			/* dropping i clones its producer when a backward node reads it */
			struct qent c = {.flops = x.flops, .peak = x.peak, .mask = x.mask | (uint64_t)1 << i, .cloned = x.cloned};
			if (s.cbytes[i] && !((x.cloned >> i) & 1)) {
				c.flops += s.flops[f->producer[s.val[i]]];
				c.cloned |= s.same[i];
			}
			c.lb = flops_bound(&s, c.mask, (int)i, c.flops, c.cloned, budget);
			c.flops = x.flops; /* the parent's, until weighed */
			if (c.lb != UINT64_MAX && (r->exhaustive || c.lb < best.flops) && heap_push(&h, c))
				goto oom;
		}
	}
	r->done = !stopped && (!r->n_falls || r->exhaustive);
	r->found = best.weighed;
	if (r->found) {
		for (uint32_t i = 0; i < s.n; i++)
			keep[s.val[i]] = (best.mask >> i) & 1 ? RC_DROP : RC_KEPT;
		r->peak = best.peak;
		r->flops = best.flops;
	} else {
		memcpy(keep, entry, f->n_values);
	}
	goto out;
oom:
	rc = err_oom(e);
out:
	if (rc && entry)
		memcpy(keep, entry, f->n_values);
	r->n_weighed = s.n_weighed;
	xfree(entry);
	xfree(h.q);
	search_free(&s);
	return rc;
}
