/* exact.c - see exact.h. */
#include "exact.h"
#include "../util/xalloc.h"
#include "auto.h"

#include <stdlib.h>
#include <string.h>

/* A search node: the drop set (bit i: the i-th candidate of the search's order), weighed. */
struct qent {
	uint64_t flops, peak, mask;
};

static int before(const struct qent *a, const struct qent *b)
{
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
	/* the peak bound (struct bound) */
	uint32_t n_seg;
	uint64_t *seg_base, *seg_kept; /* per segment: the most bytes live in every plan; the candidates
					* live there when kept (bit i: candidate i) */
	uint64_t *cbytes;              /* per candidate */
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
	s->n_weighed++;
	return ckpt_weigh(s->m, s->keep, s->flops, &out->peak, &out->flops, NULL, e);
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

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
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
	uint32_t *last_any = xcalloc(nv, sizeof *last_any), *first_bwd = xcalloc(nv, sizeof *first_bwd);
	uint32_t *last_bwd = xcalloc(nv, sizeof *last_bwd), *cidx = xmalloc(sizeof *cidx * nv);
	uint32_t *gap = xcalloc(2 * (size_t)s->n + 1, sizeof *gap); /* per candidate: its kept interval */
	uint32_t *ends = xmalloc(sizeof *ends * (2 * (size_t)s->n + 2));
	int64_t *diff = xcalloc((size_t)T + 2, sizeof *diff);
	s->cbytes = xcalloc(s->n ? s->n : 1, sizeof *s->cbytes);
	int rc = -1;
	if (!last_any || !first_bwd || !last_bwd || !cidx || !gap || !ends || !diff || !s->cbytes)
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
			most = (uint64_t)live > most ? (uint64_t)live : most;
		}
		for (uint32_t i = 0; i < s->n; i++)
			if (s->cbytes[i] && gap[2 * i] <= ends[j] && ends[j + 1] <= gap[2 * i + 1])
				in |= (uint64_t)1 << i;
		s->seg_base[s->n_seg] = resident + most;
		s->seg_kept[s->n_seg++] = in;
	}
	rc = 0;
out:
	xfree(last_any);
	xfree(first_bwd);
	xfree(last_bwd);
	xfree(cidx);
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
}

int exact_kept_sets(struct memmodel *m, const uint64_t *flops, const uint32_t *cand, uint32_t n_cand,
		    uint64_t budget, uint32_t max_weighs, uint8_t *keep, struct exact_result *r, struct gd_err *e)
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
	struct qent best = {UINT64_MAX, UINT64_MAX, 0}, root;
	if ((rc = weigh_mask(&s, 0, &root, e)))
		goto out;
	if (root.peak <= budget)
		best = root;
	if ((r->exhaustive || root.peak > budget) && heap_push(&h, root))
		goto oom;
	int stopped = 0; /* by the limits */
	while (h.n && !stopped) {
		struct qent x = heap_pop(&h);
		if (!r->exhaustive && x.flops >= best.flops)
			break; /* every set left has as many FLOPs as the best that fits, or more */
		uint32_t first = x.mask ? 64 - (uint32_t)__builtin_clzll(x.mask) : 0;
		for (uint32_t i = first; i < s.n; i++) {
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
			if (s.n_weighed >= s.max_weighs || h.n >= EXACT_QUEUE) {
				stopped = 1;
				break;
			}
			struct qent c;
			if ((rc = weigh_mask(&s, x.mask | (uint64_t)1 << i, &c, e)))
				goto out;
			r->n_falls += c.flops < x.flops;
			if (c.peak <= budget && (c.flops < best.flops || (c.flops == best.flops && c.peak < best.peak)))
				best = c;
			if ((r->exhaustive || c.flops < best.flops) && heap_push(&h, c))
				goto oom;
		}
	}
	r->done = !stopped && (!r->n_falls || r->exhaustive);
	r->found = best.flops != UINT64_MAX;
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
