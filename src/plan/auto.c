/* auto.c - see auto.h. */
#include "auto.h"
#include "anneal.h"
#include "../rewrite/recompute.h"
#include "../util/pool.h"
#include "../util/progress.h"
#include "../util/xalloc.h"
#include "chain.h"
#include "exact.h"
#include "memsim.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define MAX_CUTS 128      /* candidate cut positions on larger graphs */
#define THIN 32           /* Pareto set size per cut on larger graphs */
#define EXACT_SET 100000  /* ... and the bound on it when nothing is thinned */
#define BUCKETS 256       /* bands of kept bytes on larger graphs */

/* The group model: prefix sums over (group of the producer, group of the last forward reader). */
struct gmodel {
	uint32_t M;               /* cuts 1..M at forward positions cut[1..M]; cut[0] = 0, cut[M] = F */
	uint32_t *gp, *gl;        /* per value: group made in, group of its last forward reader (0: none) */
	uint64_t *all, *nonbwd;   /* P[y][x]: bytes of values with gp <= y, gl <= x ((M+1)^2) */
	uint64_t *flops;          /* nodes recomputed: with gp <= y and an output with gl <= x */
	uint32_t cap;             /* Pareto set bound */
	int bucketed;             /* larger graphs: one entry per band of kept bytes (BUCKETS) */
};

#define AT(P, y, x) ((P)[(size_t)(y) * (m->M + 1) + (x)])
#define BOX(P, i, j, x) (AT(P, j, x) - AT(P, i, x)) /* producers in (i, j], readers' group <= x */

struct entry {
	uint64_t K, C;   /* kept bytes so far, recompute FLOPs so far */
	uint64_t R;      /* the least budget the plan so far fits: with a recompute's bytes live */
	int64_t prev;    /* pool index, -1 at the start */
	uint32_t from;   /* the previous cut */
	uint32_t stored; /* the group (from, this cut] keeps everything */
	uint32_t nest;   /* recomputed: how (struct nests' pool) */
};

/* The ways to recompute the groups (i, j] in the backward pass, given the kept frontier at cut i:
 * all at once, or Revolve-style, making the frontier at a cut s first and keeping it while the
 * backward pass of (s, j] runs (recomputed the same ways), then (i, s] again. Per segment, the
 * Pareto set of (bytes live, FLOPs), in ascending bytes, at most NEST_CAP ways, from splits at
 * about NEST_SPLITS cuts, evenly spaced from i + 1, and always at j - 1 (splitting off the last
 * group, level by level, is how the fewest bytes are reached: one group live at a time). */
#define NEST_CAP 12
#define NEST_SPLITS 16

struct nest {
	uint64_t mem, flops;
	uint32_t split; /* 0: all at once; else the cut s */
	uint32_t a, b;  /* split: the ways of (s, j] and of (i, s] (pool indices) */
};

struct nests {
	struct nest *pool;
	size_t n, cap;
	uint32_t *first, *count; /* per segment, at (i, j) of an (M + 1)^2 table */
};

struct dp {
	struct entry *pool;
	size_t n, cap;
	void *tmp; /* pareto_merge's */
	size_t cap_tmp;
	size_t *first, *count; /* per cut: its Pareto set in the pool */
};

static int push(struct dp *d, struct entry en)
{
	if (xgrow((void **)&d->pool, d->n, &d->cap, sizeof *d->pool))
		return -1;
	d->pool[d->n++] = en;
	return 0;
}

/* Merges two Pareto sets of `size`-byte elements that begin with their two costs (uint64_t: bytes,
 * then FLOPs), each in ascending bytes and strictly falling FLOPs: a[start, run) and a[run, *n),
 * into one at start, through tmp (*cap elements, grown); on a tie the first set's element stays.
 * -1 when out of memory. */
static inline int pareto_merge(void *a, size_t size, size_t start, size_t run, size_t *n, void **tmp, size_t *cap)
{
	if (start == run || run == *n)
		return 0;
	/* the set's elements that come before the run's first stay where they are */
	uint8_t *p = a;
	uint64_t k0 = ((const uint64_t *)(p + run * size))[0], c0 = ((const uint64_t *)(p + run * size))[1], last = 0;
	int kept = 0; /* an element before: last is its FLOPs */
	for (const uint64_t *u; start < run && ((u = (const uint64_t *)(p + start * size))[0] < k0 ||
						(u[0] == k0 && u[1] <= c0));
	     start++)
		last = u[1], kept = 1;
	while (*cap < *n - start)
		if (xgrow(tmp, *cap, cap, size))
			return -1;
	uint8_t *out = *tmp;
	size_t x = start, y = run, k = 0;
	while (x < run || y < *n) {
		const uint64_t *u = x < run ? (const uint64_t *)(p + x * size) : NULL;
		const uint64_t *v = y < *n ? (const uint64_t *)(p + y * size) : NULL;
		const uint64_t *e = !v || (u && (u[0] < v[0] || (u[0] == v[0] && u[1] <= v[1]))) ? u : v;
		if (e == u)
			x++;
		else
			y++;
		if (!(k || kept) || e[1] < last) {
			memcpy(out + k++ * size, e, size);
			last = e[1];
		}
	}
	memcpy(p + start * size, out, k * size);
	*n = start + k;
	return 0;
}

/* One thread's room for a segment's ways: the candidates, pareto_merge's buffer, and the ways
 * kept per segment of the current length (NEST_CAP each, at its i), appended in order after. */
struct nest_buf {
	struct nest *c;
	void *tmp;
	size_t cc, ctmp;
};

struct nest_job {
	const struct gmodel *m;
	struct nests *ns;
	uint32_t len;
	struct nest *out;  /* NEST_CAP per i */
	uint32_t *n_out;   /* per i */
	int oom;
	struct nest_buf buf[POOL_MAX];
};

/* The ways of the segment (i, i + len], into out[i NEST_CAP ..] and n_out[i], from the shorter
 * segments' ways; -1 when out of memory. */
static int nest_segment(const struct gmodel *m, const struct nests *ns, uint32_t i, uint32_t len, struct nest_buf *bf,
			struct nest *out, uint32_t *n_out)
{
	size_t side = (size_t)m->M + 1, nc = 0;
	uint32_t j = i + len, step = (len - 1) / NEST_SPLITS + 1;
	if (xgrow((void **)&bf->c, nc, &bf->cc, sizeof *bf->c))
		return -1;
	struct nest *c = bf->c;
	c[nc++] = (struct nest){BOX(m->all, i, j, j), BOX(m->flops, i, j, j), 0, 0, 0};
	for (uint32_t sp = i + 1; sp < j; sp = sp + step < j || sp + 1 == j ? sp + step : j - 1) {
		/* every step-th cut, then j - 1 */
		uint64_t front = BOX(m->all, i, sp, j) - BOX(m->all, i, sp, sp), f1 = BOX(m->flops, i, sp, j);
		size_t a0 = ns->first[sp * side + j], na = ns->count[sp * side + j];
		size_t b0 = ns->first[i * side + sp], nb = ns->count[i * side + sp];
		/* the cheapest pairs: for each way of one side, the cheapest of the other that
		 * needs no more bytes */
		for (int side_a = 0; side_a < 2; side_a++) {
			size_t n1 = side_a ? na : nb, n2 = side_a ? nb : na, q = 0, run = nc, p = 0;
			uint64_t least = UINT64_MAX; /* a run in ascending bytes: only falling FLOPs count */
			for (size_t t = 0; t < n1; t++) {
				const struct nest *x = &ns->pool[(side_a ? a0 : b0) + t];
				uint64_t mem = side_a ? front + x->mem : x->mem;
				while (q < n2 && (side_a ? ns->pool[b0 + q].mem : front + ns->pool[a0 + q].mem) <= mem)
					q++;
				if (!q)
					continue;
				const struct nest *y = &ns->pool[(side_a ? b0 : a0) + q - 1];
				if (f1 + x->flops + y->flops >= least)
					continue;
				/* nor what the set so far holds with no more bytes and FLOPs */
				while (p < run && c[p].mem <= mem)
					p++;
				if (p && c[p - 1].flops <= f1 + x->flops + y->flops)
					continue;
				least = f1 + x->flops + y->flops;
				if (xgrow((void **)&bf->c, nc, &bf->cc, sizeof *c))
					return -1;
				c = bf->c;
				c[nc++] = (struct nest){mem, f1 + x->flops + y->flops, sp,
							(uint32_t)(side_a ? a0 + t : a0 + q - 1),
							(uint32_t)(side_a ? b0 + q - 1 : b0 + t)};
			}
			/* a run in ascending bytes and falling FLOPs: merged into the set so far */
			if (pareto_merge(c, sizeof *c, 0, run, &nc, &bf->tmp, &bf->ctmp))
				return -1;
		}
	}
	size_t k = nc;
	if (k > NEST_CAP) { /* thinned evenly, both ends kept */
		for (size_t t = 0; t < NEST_CAP; t++)
			c[t] = c[t * (k - 1) / (NEST_CAP - 1)];
		k = NEST_CAP;
	}
	memcpy(out, c, k * sizeof *c);
	*n_out = (uint32_t)k;
	return 0;
}

static void nest_one(void *arg, uint32_t i, uint32_t w)
{
	struct nest_job *jb = arg;
	if (nest_segment(jb->m, jb->ns, i, jb->len, &jb->buf[w], jb->out + (size_t)i * NEST_CAP, jb->n_out + i))
		jb->oom = 1;
}

/* The ways of every segment, shortest first, the segments of one length over the pool's threads:
 * O(M^2 NEST_SPLITS NEST_CAP). */
static int nests_build(const struct gmodel *m, struct nests *ns)
{
	size_t side = (size_t)m->M + 1;
	struct nest_job *jb = xcalloc(1, sizeof *jb);
	ns->first = xcalloc(side * side, sizeof *ns->first);
	ns->count = xcalloc(side * side, sizeof *ns->count);
	int rc = !jb || !ns->first || !ns->count ? -1 : 0;
	if (!rc) {
		*jb = (struct nest_job){.m = m, .ns = ns, .out = xmalloc(side * NEST_CAP * sizeof *jb->out),
					.n_out = xmalloc(side * sizeof *jb->n_out)};
		rc = !jb->out || !jb->n_out ? -1 : 0;
	}
	for (uint32_t len = 1; !rc && len <= m->M; len++) {
		jb->len = len;
		pool_for(m->M - len + 1, nest_one, jb);
		rc = jb->oom ? -1 : 0;
		for (uint32_t i = 0; !rc && i + len <= m->M; i++) { /* appended in order of i */
			ns->first[i * side + i + len] = (uint32_t)ns->n;
			ns->count[i * side + i + len] = jb->n_out[i];
			for (uint32_t t = 0; !rc && t < jb->n_out[i]; t++)
				if (xgrow((void **)&ns->pool, ns->n, &ns->cap, sizeof *ns->pool))
					rc = -1;
				else
					ns->pool[ns->n++] = jb->out[(size_t)i * NEST_CAP + t];
		}
	}
	for (int w = 0; jb && w < POOL_MAX; w++) {
		xfree(jb->buf[w].c);
		xfree(jb->buf[w].tmp);
	}
	if (jb) {
		xfree(jb->out);
		xfree(jb->n_out);
	}
	xfree(jb);
	return rc;
}

/* The levels of a way of recomputing (i, j]: a split's frontier, read in (s, j], is kept at level
 * L by the backward pass; both halves nest one level deeper. */
static void nest_levels(const struct gmodel *m, const struct nests *ns, uint32_t nv, uint32_t i, uint32_t j,
			uint32_t way, uint32_t L, uint8_t *keep)
{
	const struct nest *w = &ns->pool[way];
	if (!w->split)
		return;
	for (uint32_t v = 0; v < nv; v++)
		if (m->gp[v] > i && m->gp[v] <= w->split && m->gl[v] > w->split && m->gl[v] <= j && keep[v] == RC_DROP)
			keep[v] = L < RC_INNER ? RC_AT_LEVEL(L) : RC_DROP;
	nest_levels(m, ns, nv, w->split, j, w->a, L + 1, keep);
	nest_levels(m, ns, nv, i, w->split, w->b, L + 1, keep);
}

/* The DP for activation budget A; returns the pool index of the best plan at the last cut, -1 if
 * none fits A, -2 on allocation failure. */
static int64_t solve(const struct gmodel *m, const struct nests *ns, uint64_t A, struct dp *d)
{
	d->n = 0;
	if (push(d, (struct entry){0, 0, 0, -1, 0, 0, 0}))
		return -2;
	d->first[0] = 0;
	d->count[0] = 1;
	struct entry bucket[BUCKETS];
	for (uint32_t j = 1; j <= m->M; j++) {
		size_t start = d->n;
		for (uint32_t b = 0; b < BUCKETS; b++)
			bucket[b].prev = -1;
		for (uint32_t i = 0; i < j; i++) {
			uint64_t drop = BOX(m->all, i, j, j), all = BOX(m->all, i, j, m->M);
			uint64_t keep = all - drop, stored = all - BOX(m->nonbwd, i, j, j);
			/* recomputed (the way that fits, if one does), or stored: each a run in ascending kept
			 * bytes, as i's set is */
			size_t at = (size_t)i * (m->M + 1) + j;
			const struct nest *ways = ns->pool + ns->first[at];
			for (int o = 0; o < 2 - (stored == keep + drop); o++) {
				size_t run = d->n, fit = ns->count[at]; /* ways[0, fit) may fit the room left */
				size_t p = start;                        /* j's set so far, up to the entry's bytes */
				for (size_t t = 0; t < d->count[i]; t++) {
					size_t ix = d->first[i] + t;
					uint64_t K = d->pool[ix].K, C = d->pool[ix].C;
					if (K + (o ? stored : keep) > A)
						break; /* and so do the rest: i's set ascends in kept bytes */
					/* the way that fits: the cheapest whose bytes fit, fewer as the room shrinks */
					while (!o && fit && ways[fit - 1].mem > A - K - keep)
						fit--;
					if (!o && !fit)
						break;
					uint32_t way = o ? 0 : (uint32_t)(ns->first[at] + fit - 1);
					uint64_t R = o ? K + stored : K + keep + ns->pool[way].mem;
					R = R > d->pool[ix].R ? R : d->pool[ix].R;
					struct entry en = o ? (struct entry){K + stored, C, R, (int64_t)ix, i, 1, 0}
							    : (struct entry){K + keep, C + ns->pool[way].flops, R, (int64_t)ix, i, 0, way};
					if (!m->bucketed) { /* what j's set or the run holds with no more bytes and FLOPs goes */
						while (p < run && d->pool[p].K <= en.K)
							p++;
						if ((p > start && d->pool[p - 1].C <= en.C) ||
						    (d->n > run && en.C >= d->pool[d->n - 1].C))
							continue;
						if (push(d, en))
							return -2;
						continue;
					}
					/* larger graphs: the fewest FLOPs per band of kept bytes */
					struct entry *b = &bucket[(size_t)((double)en.K / ((double)A + 1) * BUCKETS)];
					if (b->prev < 0 || en.C < b->C || (en.C == b->C && en.K < b->K))
						*b = en;
				}
				if (!m->bucketed && pareto_merge(d->pool, sizeof *d->pool, start, run, &d->n, &d->tmp, &d->cap_tmp))
					return -2;
			}
		}
		for (uint32_t b = 0; m->bucketed && b < BUCKETS; b++)
			if (bucket[b].prev >= 0 && push(d, bucket[b]))
				return -2;
		/* the Pareto set: ascending kept bytes, strictly falling FLOPs */
		struct entry *c = d->pool + start;
		size_t n = d->n - start, k = 0;
		for (size_t t = 0; t < n; t++)
			if (!k || c[t].C < c[k - 1].C)
				c[k++] = c[t];
		if (k > m->cap) { /* thinned evenly, both ends kept */
			for (size_t t = 0; t < m->cap; t++)
				c[t] = c[t * (k - 1) / (m->cap - 1)];
			k = m->cap;
		}
		d->first[j] = start;
		d->count[j] = k;
		d->n = start + k;
	}
	return d->count[m->M] ? (int64_t)(d->first[m->M] + d->count[m->M] - 1) : -1;
}

/* Levels of the ladder solved side by side, each into a DP of its own. */
struct ladder_job {
	const struct gmodel *m;
	const struct nests *ns;
	struct level {
		double a;      /* the activation budget */
		struct dp *d;
		int64_t ix;    /* solve's answer */
	} lv[2];
};

static void solve_level(void *arg, uint32_t i, uint32_t w)
{
	(void)w;
	struct ladder_job *j = arg;
	j->lv[i].ix = solve(j->m, j->ns, (uint64_t)j->lv[i].a, j->lv[i].d);
}

/* The kept set of a DP answer: per group, the cut that ends its segment and whether it is stored. */
static int plan_keep(const struct graph *g, const struct gmodel *m, const struct nests *ns, const struct dp *d,
		     int64_t ix, uint8_t *keep)
{
	uint32_t *end = xcalloc((size_t)m->M + 1, sizeof *end);
	uint8_t *stored = xcalloc((size_t)m->M + 1, 1);
	if (!end || !stored) {
		xfree(end);
		xfree(stored);
		return -1;
	}
	int64_t ix0 = ix;
	for (uint32_t j = m->M; ix >= 0 && d->pool[ix].prev >= 0; ix = d->pool[ix].prev) {
		const struct entry *en = &d->pool[ix];
		for (uint32_t q = en->from + 1; q <= j; q++) {
			end[q] = j;
			stored[q] = (uint8_t)en->stored;
		}
		j = en->from;
	}
	for (uint32_t v = 0; v < g->n_values; v++)
		keep[v] = m->gp[v] && (stored[m->gp[v]] || m->gl[v] > end[m->gp[v]]);
	for (uint32_t j = m->M; ix0 >= 0 && d->pool[ix0].prev >= 0; ix0 = d->pool[ix0].prev) {
		const struct entry *en = &d->pool[ix0];
		if (!en->stored)
			nest_levels(m, ns, g->n_values, en->from, j, en->nest, 2, keep);
		j = en->from;
	}
	xfree(end);
	xfree(stored);
	return 0;
}

int ckpt_weigh(struct memmodel *m, const uint8_t *keep, const uint64_t *flops, uint64_t *peak, uint64_t *rflops,
	       uint64_t *area, struct gd_err *e)
{
	if (!m->rc.steps && rc_scratch_init(&m->rc, &m->f))
		return err_oom(e);
	uint32_t n = recompute_schedule_in(&m->f, keep, &m->rc);
	const struct rc_step *steps = m->rc.steps;
	if (n == UINT32_MAX)
		return err_oom(e);
	struct mem_result r;
	int rc = memsim_schedule(m, keep, steps, n, 0, &r, e);
	if (!rc) {
		*peak = r.peak;
		*rflops = 0;
		if (area)
			*area = r.area; /* live bytes over the steps, for breaking ties in peak */
		for (uint32_t i = 0; i < n; i++)
			if (steps[i].clone)
				*rflops += flops[steps[i].node];
	}
	return rc;
}

/* No plan's peak is below the resident bytes plus the largest step (a node's distinct
 * non-resident inputs and outputs), nor below everything resident at the end. Nor below what a
 * backward node holds in every plan: checkpointing changes only which forward values live and
 * when, so the backward pass's own values live as they do in g's order (each from its node to its
 * last reader, graph outputs to the end), and beside them the node's forward inputs and the
 * forward pass's graph outputs. */
static uint64_t lower_bound(const struct graph *g, const struct memmodel *mm, const uint8_t *resident)
{
	const struct flat *f = &mm->f;
	uint64_t base = 0, outs = 0, fwd_outs = 0, step = 0, live = 0; /* live: backward values */
	uint32_t *left = xcalloc(f->n_values ? f->n_values : 1, sizeof *left);
	for (uint32_t i = 0; i < f->n_values; i++)
		if (resident[i] == 1)
			base += mm->bytes[i];
	for (uint32_t i = 0; i < g->n_outputs; i++)
		if (resident[g->outputs[i]->id] == 2) {
			uint32_t v = g->outputs[i]->id, p = f->producer[v];
			outs += mm->bytes[v];
			if (p != FLAT_NONE && (f->nflags[p] & FLAT_FORWARD))
				fwd_outs += mm->bytes[v];
		}
#define MADE_BACKWARD(v) (f->producer[v] != FLAT_NONE && !(f->nflags[f->producer[v]] & FLAT_FORWARD))
	for (uint32_t i = 0; left && i < f->n_nodes; i++)
		for (uint32_t k = f->in_off[i]; k < f->in_off[i + 1]; k++)
			if (f->in[k] != FLAT_NONE && MADE_BACKWARD(f->in[k]))
				left[f->in[k]]++;
	for (uint32_t i = 0; i < f->n_nodes; i++) {
		int bwd = left && !(f->nflags[i] & FLAT_FORWARD);
		uint64_t s = 0, made = 0;
		for (uint32_t k = f->in_off[i]; k < f->in_off[i + 1]; k++) {
			uint32_t v = f->in[k];
			int dup = v == FLAT_NONE || resident[v] == 1 || (bwd && (MADE_BACKWARD(v) || resident[v] == 2));
			for (uint32_t q = f->in_off[i]; q < k && !dup; q++)
				dup = f->in[q] == v;
			if (!dup)
				s += mm->bytes[v];
		}
		for (uint32_t k = f->out_off[i]; k < f->out_off[i + 1]; k++)
			if (f->out[k] != FLAT_NONE)
				made += mm->bytes[f->out[k]];
		s += made + (bwd ? live + fwd_outs : 0);
		/* a view, scatter or Gemm may take an input's buffer (memsim): then the two are one */
		if (f->nflags[i] & FLAT_TAKES) { /* (such ops have an input and an output) */
			uint32_t v0 = f->in[flat_taken(f, i)], o0 = f->out[f->out_off[i]];
			if (v0 != FLAT_NONE && o0 != FLAT_NONE && !(f->vflags[v0] & FLAT_PINNED) && mm->bytes[v0] == mm->bytes[o0])
				s -= mm->bytes[o0];
		} else if (f->nflags[i] & FLAT_REUSES) { /* as may an elementwise node's, of one that fits */
			uint32_t k = f->in_off[i];
			while (k < f->in_off[i + 1] && !(mm->fits[k] && !(f->vflags[f->in[k]] & FLAT_PINNED)))
				k++;
			if (k < f->in_off[i + 1])
				s -= mm->bytes[f->out[f->out_off[i]]];
		}
		if (s > step)
			step = s;
		if (!bwd)
			continue;
		for (uint32_t k = f->out_off[i]; k < f->out_off[i + 1]; k++) /* kept for a reader, or pinned */
			if (f->out[k] != FLAT_NONE && (left[f->out[k]] || (f->vflags[f->out[k]] & FLAT_PINNED)))
				live += mm->bytes[f->out[k]];
		for (uint32_t k = f->in_off[i]; k < f->in_off[i + 1]; k++) {
			uint32_t v = f->in[k];
			if (v != FLAT_NONE && MADE_BACKWARD(v) && !--left[v] && !(f->vflags[v] & FLAT_PINNED))
				live -= mm->bytes[v];
		}
	}
#undef MADE_BACKWARD
	xfree(left);
	return base + (outs > step ? outs : step);
}

static int build_model(const struct memmodel *mm, const uint64_t *nflops, struct gmodel *m, uint32_t F)
{
	const struct flat *f = &mm->f;
	size_t nv = f->n_values ? f->n_values : 1;
	uint32_t *pos = xcalloc(nv, sizeof *pos), *last = xcalloc(nv, sizeof *last);
	uint8_t *bwd = xcalloc(nv, 1);
	uint32_t *group = xcalloc((size_t)F + 1, sizeof *group); /* forward position -> group */
	m->gp = xcalloc(nv, sizeof *m->gp);
	m->gl = xcalloc(nv, sizeof *m->gl);
	int rc = -1;
	if (!pos || !last || !bwd || !group || !m->gp || !m->gl)
		goto out;
	uint32_t t = 0;
	for (uint32_t i = 0; i < f->n_nodes; i++) {
		int fwd = !!(f->nflags[i] & FLAT_FORWARD);
		t += fwd;
		for (uint32_t k = f->in_off[i]; k < f->in_off[i + 1]; k++)
			if (f->in[k] != FLAT_NONE && (f->vflags[f->in[k]] & FLAT_ACTIVATION)) {
				if (fwd)
					last[f->in[k]] = t;
				else
					bwd[f->in[k]] = 1;
			}
		if (fwd)
			for (uint32_t k = f->out_off[i]; k < f->out_off[i + 1]; k++)
				if (f->out[k] != FLAT_NONE)
					pos[f->out[k]] = t;
	}
	/* the cuts: every position, or on larger graphs the position whose frontier has the fewest
	 * bytes in each of MAX_CUTS windows of equal length */
	m->M = F <= AUTO_EXACT_NODES ? F : MAX_CUTS;
	m->cap = F <= AUTO_EXACT_NODES ? EXACT_SET : THIN;
	m->bucketed = F > AUTO_EXACT_NODES;
	uint64_t *front = xcalloc((size_t)F + 2, sizeof *front);
	if (!front)
		goto out;
	/* a value counts in the model when a forward node makes it, it is not a graph output, and it
	 * may be kept: a fixed value never is (rc_forced), in any plan */
#define MODELLED(v) ((f->vflags[v] & (FLAT_DROPPABLE | FLAT_FIXED)) == FLAT_DROPPABLE)
	for (uint32_t v = 0; v < f->n_values; v++)
		if (MODELLED(v) && last[v] > pos[v]) {
			front[pos[v]] += mm->bytes[v];
			front[last[v]] -= mm->bytes[v];
		}
	for (uint32_t p = 1; p <= F; p++)
		front[p] += front[p - 1];
	uint32_t prev = 0;
	for (uint32_t j = 1; j <= m->M; j++) {
		uint32_t end = (uint32_t)((uint64_t)F * j / m->M), best = end;
		for (uint32_t p = end; p > prev && j < m->M; p--)
			if (front[p] < front[best])
				best = p;
		for (uint32_t p = prev + 1; p <= best; p++)
			group[p] = j;
		prev = best;
	}
	xfree(front);
	size_t side = (size_t)m->M + 1;
	m->all = xcalloc(side * side, sizeof *m->all);
	m->nonbwd = xcalloc(side * side, sizeof *m->nonbwd);
	m->flops = xcalloc(side * side, sizeof *m->flops);
	if (!m->all || !m->nonbwd || !m->flops)
		goto out;
	for (uint32_t v = 0; v < f->n_values; v++) {
		if (!MODELLED(v))
			continue;
#undef MODELLED
		m->gp[v] = group[pos[v]];
		m->gl[v] = last[v] ? group[last[v]] : 0;
		AT(m->all, m->gp[v], m->gl[v]) += mm->bytes[v];
		if (!bwd[v])
			AT(m->nonbwd, m->gp[v], m->gl[v]) += mm->bytes[v];
	}
	/* a node is recomputed in group (i, j] when one of its outputs is not read after j */
	for (uint32_t i = 0; i < f->n_nodes; i++) {
		uint32_t gmin = UINT32_MAX, gpn = 0;
		for (uint32_t k = f->out_off[i]; k < f->out_off[i + 1]; k++)
			if (f->out[k] != FLAT_NONE && m->gp[f->out[k]]) {
				gpn = m->gp[f->out[k]];
				if (m->gl[f->out[k]] < gmin)
					gmin = m->gl[f->out[k]];
			}
		if (gpn)
			AT(m->flops, gpn, gmin) += nflops[i];
	}
	uint64_t *P[3] = {m->all, m->nonbwd, m->flops};
	for (int q = 0; q < 3; q++) /* 2-D prefix sums */
		for (uint32_t y = 0; y <= m->M; y++)
			for (uint32_t xx = 0; xx <= m->M; xx++)
				AT(P[q], y, xx) += (xx ? AT(P[q], y, xx - 1) : 0) + (y ? AT(P[q], y - 1, xx) : 0) -
						   (xx && y ? AT(P[q], y - 1, xx - 1) : 0);
	rc = 0;
out:
	xfree(pos);
	xfree(last);
	xfree(bwd);
	xfree(group);
	return rc;
}

static void model_free(struct gmodel *m)
{
	xfree(m->gp);
	xfree(m->gl);
	xfree(m->all);
	xfree(m->nonbwd);
	xfree(m->flops);
}

/* The plans weighed: kept sets (levels included) with their exact peak and FLOPs. */
struct plans {
	struct plan {
		uint64_t peak, flops;
		uint8_t *keep;
		uint32_t levels;
	} *p;
	size_t n, cap;
};

static int plans_add(struct plans *ps, const uint8_t *keep, uint32_t nv, uint64_t peak, uint64_t flops)
{
	if (xgrow((void **)&ps->p, ps->n, &ps->cap, sizeof *ps->p))
		return -1;
	uint8_t *k = xmalloc(nv ? nv : 1);
	if (!k)
		return -1;
	memcpy(k, keep, nv);
	uint32_t lv = 1;
	for (uint32_t v = 0; v < nv; v++)
		if (keep[v] && !(keep[v] & 1) && keep[v] / 2u > lv)
			lv = keep[v] / 2u;
	ps->p[ps->n++] = (struct plan){peak, flops, k, lv};
	return 0;
}

static void plans_get(const struct plans *ps, size_t i, uint8_t *keep, uint32_t nv)
{
	memcpy(keep, ps->p[i].keep, nv);
}

/* Local search with exact weighing, within an allowance of node-steps simulated. Pairs of flips
 * are tried nearest first (candidates in value order, about the schedule's): on the frontier at
 * most PAIR_SPAN apart at first, farther once no frontier plan is left unexplored at the span; in
 * a descent, on small graphs (the short allowance) only that near. The flips of one batch are
 * weighed over the pool's threads (each with a twin of the model and a copy of the plan) and
 * judged in order afterwards, so the search goes as it would in one thread. */
#define PAIR_SPAN 4
#define NO_FLIP UINT32_MAX

/* A plan's flip of value b, with value a unless a is NO_FLIP, and what it weighs. */
struct flip {
	uint32_t a, b;
	uint64_t peak, flops, area;
};

struct search {
	const struct graph *g;
	struct memmodel *m;
	const uint64_t *nflops;
	const uint32_t *cand; /* the values a plan may keep or drop */
	uint32_t n_cand;
	int64_t allowance;
	uint32_t span; /* a descent's pairs: at most so far apart */
	struct flip *flips; /* a batch: n_cand at most */
	/* per thread: a twin of m (thread 0 weighs on m), the plan flipped and whether it is this
	 * batch's, and a failure */
	struct memmodel twin[POOL_MAX];
	uint8_t *kb[POOL_MAX];
	unsigned long kb_batch[POOL_MAX], batch;
	const uint8_t *keep;
	struct gd_err err[POOL_MAX];
	int failed[POOL_MAX];
};

static void search_free(struct search *s)
{
	for (int w = 0; w < POOL_MAX; w++) {
		if (w && s->twin[w].bytes)
			memmodel_twin_free(&s->twin[w]);
		xfree(s->kb[w]);
	}
	xfree(s->flips);
}

static void weigh_one(void *arg, uint32_t i, uint32_t w)
{
	struct search *s = arg;
	struct flip *f = &s->flips[i];
	size_t nv = s->g->n_values ? s->g->n_values : 1;
	struct memmodel *m = w ? &s->twin[w] : s->m;
	if (s->failed[w])
		return;
	if ((w && !m->bytes && memmodel_twin(s->m, m)) || (!s->kb[w] && !(s->kb[w] = xmalloc(nv)))) {
		s->failed[w] = err_oom(&s->err[w]);
		return;
	}
	uint8_t *keep = s->kb[w];
	if (s->kb_batch[w] != s->batch) {
		memcpy(keep, s->keep, s->g->n_values);
		s->kb_batch[w] = s->batch;
	}
	if (f->a != NO_FLIP)
		keep[f->a] ^= 1;
	keep[f->b] ^= 1;
	if (ckpt_weigh(m, keep, s->nflops, &f->peak, &f->flops, &f->area, &s->err[w]))
		s->failed[w] = s->err[w].code ? s->err[w].code : -1;
	keep[f->b] ^= 1;
	if (f->a != NO_FLIP)
		keep[f->a] ^= 1;
}

/* Weighs the first flips of s->flips[0, n) on the plan `keep` that the allowance pays for, each
 * 2 node-steps a node, and returns how many; UINT32_MAX with e set on failure. */
static uint32_t weigh_batch(struct search *s, const uint8_t *keep, uint32_t n, struct gd_err *e)
{
	int64_t cost = 2 * (int64_t)s->g->n_nodes, k = s->allowance <= 0 ? 0 : (s->allowance + cost - 1) / (cost ? cost : 1);
	k = cost ? (k < n ? k : n) : n;
	s->allowance -= k * cost;
	s->keep = keep;
	s->batch++;
	pool_for((uint32_t)k, weigh_one, s);
	for (int w = 0; w < POOL_MAX; w++)
		if (s->failed[w]) {
			*e = s->err[w];
			if (!e->code)
				err_oom(e);
			return UINT32_MAX;
		}
	return (uint32_t)k;
}

/* From plan i: the single flip that lowers the peak most, repeatedly, adding each plan on the way.
 * Where the peak is reached at several steps no single flip lowers it, so with `plateaus` a flip
 * that keeps the peak and lowers the live bytes summed over the schedule is a step down too. */
static int descend(struct search *s, struct plans *ps, size_t i, int plateaus, uint8_t *keep, struct gd_err *e)
{
	uint64_t peak = ps->p[i].peak, area, f0;
	plans_get(ps, i, keep, s->g->n_values);
	if (ckpt_weigh(s->m, keep, s->nflops, &peak, &f0, &area, e))
		return e->code;
	for (;;) {
		uint64_t bp = peak, ba = area, bf = 0;
		uint32_t best = NO_FLIP, second = NO_FLIP;
		for (uint32_t c = 0; c < s->n_cand; c++)
			s->flips[c] = (struct flip){.a = NO_FLIP, .b = s->cand[c]};
		uint32_t k = weigh_batch(s, keep, s->n_cand, e);
		if (k == UINT32_MAX)
			return e->code;
		for (uint32_t c = 0; c < k; c++) {
			const struct flip *f = &s->flips[c];
			if (f->peak < bp || (f->peak == bp && (plateaus ? f->area < ba : best != NO_FLIP && f->flops < bf)))
				bp = f->peak, ba = f->area, bf = f->flops, best = f->b;
		}
		/* no single flip helps: on small graphs, pairs of nearby candidates (moving a checkpoint) */
		for (uint32_t dd = 1; best == NO_FLIP && s->n_cand <= AUTO_EXACT_NODES && dd <= s->span && dd < s->n_cand;
		     dd++) {
			for (uint32_t c = 0; c + dd < s->n_cand; c++)
				s->flips[c] = (struct flip){.a = s->cand[c], .b = s->cand[c + dd]};
			if ((k = weigh_batch(s, keep, s->n_cand - dd, e)) == UINT32_MAX)
				return e->code;
			for (uint32_t c = 0; c < k; c++) {
				const struct flip *f = &s->flips[c];
				if (f->peak < bp ||
				    (f->peak == bp && (plateaus ? f->area < ba : second != NO_FLIP && f->flops < bf)))
					bp = f->peak, ba = f->area, bf = f->flops, second = f->a, best = f->b;
			}
		}
		if (best == NO_FLIP || s->allowance <= 0)
			return 0;
		if (second != NO_FLIP)
			keep[second] ^= 1;
		keep[best] ^= 1;
		peak = bp;
		area = ba;
		if (plans_add(ps, keep, s->g->n_values, bp, bf))
			return err_oom(e);
	}
}

/* descend from plans [first, end), the last first, without and then with plateaus, while the
 * allowance lasts. */
static int descend_from(struct search *s, struct plans *ps, size_t first, size_t end, uint8_t *keep, struct gd_err *e)
{
	for (size_t i = 0; i < 2 * (end - first) && s->allowance > 0; i++) {
		int rc = descend(s, ps, end - 1 - i / 2, (int)(i % 2), keep, e);
		if (rc)
			return rc;
	}
	return 0;
}

/* Whether some plan has at most this peak and these FLOPs. */
static int dominated(const struct plans *ps, uint64_t peak, uint64_t flops)
{
	for (size_t j = 0; j < ps->n; j++)
		if (ps->p[j].peak <= peak && ps->p[j].flops <= flops)
			return 1;
	return 0;
}

/* Pareto local search: the single flips of each plan on the (peak, FLOPs) frontier, and on small
 * graphs the pairs too, added when no plan dominates them, until no frontier plan is left
 * unexplored or the allowance is spent. So the plans that trade a higher peak for fewer FLOPs are
 * found as well as those better in both. */
static int frontier(struct search *s, struct plans *ps, uint8_t *keep, struct gd_err *e)
{
	uint32_t *reach = NULL; /* per plan: the flips tried, up to pairs reach - 1 apart */
	size_t cap = 0;
	int rc = 0;
	uint32_t dmax = s->n_cand <= AUTO_EXACT_NODES ? s->n_cand : 1, span = PAIR_SPAN;
	for (int more = 1; (more || span + 1 < dmax) && s->allowance > 0 && !rc;) {
		if (!more) /* nothing new at this span: farther pairs */
			span = 2 * span + 1;
		more = 0;
		uint32_t upto = span + 1 < dmax ? span + 1 : dmax;
		if (ps->n > cap) {
			uint32_t *grown = xreallocarray(reach, ps->n, sizeof *reach);
			if (!grown) {
				rc = err_oom(e);
				break;
			}
			memset(grown + cap, 0, (ps->n - cap) * sizeof *grown);
			reach = grown;
			cap = ps->n;
		}
		for (size_t i = 0; i < cap && s->allowance > 0 && !rc; i++) {
			if (reach[i] >= upto)
				continue;
			uint32_t from = reach[i];
			reach[i] = upto;
			int front = 1; /* not strictly dominated by another plan */
			for (size_t j = 0; j < ps->n && front; j++)
				front = !(ps->p[j].peak <= ps->p[i].peak && ps->p[j].flops <= ps->p[i].flops &&
					  (ps->p[j].peak < ps->p[i].peak || ps->p[j].flops < ps->p[i].flops));
			if (!front)
				continue;
			plans_get(ps, i, keep, s->g->n_values);
			/* single flips (dd = 0), then on small graphs pairs dd apart, nearest first */
			for (uint32_t dd = from; dd < upto && s->allowance > 0 && !rc; dd++) {
				uint32_t n = 0;
				for (uint32_t c0 = 0; c0 + dd < s->n_cand; c0++)
					s->flips[n++] = (struct flip){.a = dd ? s->cand[c0] : NO_FLIP, .b = s->cand[c0 + dd]};
				uint32_t k = weigh_batch(s, keep, n, e);
				if (k == UINT32_MAX) {
					rc = e->code;
					break;
				}
				for (uint32_t t = 0; t < k && !rc; t++) {
					const struct flip *f = &s->flips[t];
					if (dominated(ps, f->peak, f->flops))
						continue;
					if (f->a != NO_FLIP)
						keep[f->a] ^= 1;
					keep[f->b] ^= 1;
					if (plans_add(ps, keep, s->g->n_values, f->peak, f->flops))
						rc = err_oom(e);
					keep[f->b] ^= 1;
					if (f->a != NO_FLIP)
						keep[f->a] ^= 1;
					more = 1;
				}
			}
		}
	}
	xfree(reach);
	return rc;
}

/* Kept sets, weighed and added to the plans. */
static int weigh_sets(const struct graph *g, struct memmodel *mm, const uint8_t *const *seeds, size_t n,
		       const uint64_t *nflops, struct plans *ps, struct gd_err *e)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t peak = 0, f = 0;
		if (ckpt_weigh(mm, seeds[i], nflops, &peak, &f, NULL, e))
			return e->code;
		if (plans_add(ps, seeds[i], g->n_values, peak, f))
			return err_oom(e);
	}
	return 0;
}

/* A DP answer's kept set, weighed and added to the plans. */
static int weigh_level(const struct graph *g, struct memmodel *mm, const struct gmodel *m, const struct nests *ns,
		       const struct dp *d, int64_t ix, const uint64_t *nflops, uint8_t *keep, struct plans *ps,
		       struct gd_err *e)
{
	if (plan_keep(g, m, ns, d, ix, keep))
		return err_oom(e);
	return weigh_sets(g, mm, (const uint8_t *const *)&keep, 1, nflops, ps, e);
}

/* The chain DP's plans (chain.h), weighed, into ps, the best first. *done: the best fits the budget
 * and weighs what the DP modelled, so it is the optimum of the chain space and nothing else need be
 * tried; or no plan of the space fits and the least-peak plan weighs what was modelled. */
#define CHAIN_PLANS 8
static int chain_plans(const struct graph *g, struct memmodel *mm, const uint64_t *nflops, uint64_t budget,
		       struct plans *ps, struct auto_result *r, int *done, struct gd_err *e)
{
	struct chain_plan cp[CHAIN_PLANS];
	struct chain_result cr;
	uint32_t n = 0;
	*done = 0;
	if (chain_solve(mm, nflops, budget, cp, CHAIN_PLANS, &n, &cr, e))
		return e->code ? e->code : err_oom(e);
	r->chain = cr.chain ? cr.n_stages : 0;
	r->no_chain = cr.why;
	r->chain_least = cr.least_peak;
	int rc = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!rc)
			rc = weigh_sets(g, mm, (const uint8_t *const *)&cp[i].keep, 1, nflops, ps, e);
		if (!rc && i == 0) {
			const struct plan *p = &ps->p[ps->n - 1];
			int exact = p->peak == cp[i].peak && p->flops == cp[i].flops;
			*done = exact && !cr.capped && !cr.incomplete && (p->peak <= budget || (n == 1 && cr.least_peak > budget));
			r->proved = *done ? AUTO_CHAIN : 0;
			r->no_chain = *done ? NULL
				      : !exact ? "the chain DP's plan did not weigh what it modelled"
				      : cr.capped ? "the chain DP's sets were thinned, or its plan needs levels past 127"
				      : "the chain's space leaves out a checkpoint smaller than a boundary";
		}
		xfree(cp[i].keep);
	}
	return rc;
}

#define LARGE_LEVELS 200 /* the ladder's length on large graphs: 0.97^200 is 0.2% */
#define LARGE_GUESSES 4  /* levels guessed from the last weighed peak before bisecting */

/* The node-steps of exact weighing that local search may spend: about 0.2 s, and a tenth of that on
 * training graphs of up to SMALL_STEPS steps, whose planning should cost next to nothing (there the
 * ladder steps 5% too; a twentieth left a 16-layer chain's lowest peak at 1.3x the FLOPs). */
#define SEARCH_ALLOWANCE 10000000
#define SMALL_STEPS 400

/* The answer: the fewest FLOPs that fit, ties to the lower peak (*best, SIZE_MAX: none fits); and
 * the lowest peak, ties to the fewer FLOPs (*low). */
static void pick(const struct plans *ps, uint64_t budget, size_t *best, size_t *low)
{
	*best = SIZE_MAX;
	*low = 0;
	for (size_t i = 0; i < ps->n; i++) {
		const struct plan *p = &ps->p[i];
		if (p->peak <= budget && (*best == SIZE_MAX || p->flops < ps->p[*best].flops ||
					  (p->flops == ps->p[*best].flops && p->peak < ps->p[*best].peak)))
			*best = i;
		if (p->peak < ps->p[*low].peak || (p->peak == ps->p[*low].peak && p->flops < ps->p[*low].flops))
			*low = i;
	}
}

/* The values the exact search and the annealing sweep may set: every droppable one but fixed ones
 * (recomputed whatever their flag), into cand (n_values slots); returns their count. */
static uint32_t free_values(const struct flat *f, uint32_t *cand)
{
	uint32_t n = 0;
	for (uint32_t v = 0; v < f->n_values; v++)
		if ((f->vflags[v] & (FLAT_DROPPABLE | FLAT_FIXED)) == FLAT_DROPPABLE)
			cand[n++] = v;
	return n;
}

/* The annealing sweep (anneal.h) over every droppable value but fixed ones, seeded with plans
 * ps[first ..) (those that do not depend on the budget, so neither does the sweep), for at most
 * ANNEAL_PER_CAND new plans a candidate, or 100 n with n candidates (the moves a plan needs grow
 * with them: a residual MLP of 19 needed 36,000 for its lowest peak), within ANNEAL_ALLOWANCE
 * node-steps, about 0.5 s (with a quarter of that, a 3-layer transformer's plans needed up to
 * 1.75x the FLOPs of a 20x longer sweep's at 99% of none's peak, and a 2-layer one's up to 10% more
 * near its lowest peak, as the seeds fell); the plans it keeps join ps. */
#define ANNEAL_PER_CAND 800
#define ANNEAL_ALLOWANCE (4 * SEARCH_ALLOWANCE)
#define ANNEAL_MIN_PER 10 /* weighs a target at least: the sweep runs on graphs of up to about 9,000 steps */
static int anneal_plans(struct memmodel *mm, const uint64_t *nflops, uint64_t low, struct plans *ps, size_t first,
			uint32_t *weighed, struct gd_err *e)
{
	const struct flat *f = &mm->f;
	uint32_t *cand = xmalloc(sizeof *cand * (f->n_values + 1)), n = 0;
	struct anneal_plan *seeds = xcalloc(ps->n - first + 1, sizeof *seeds), *out = NULL;
	size_t n_out = 0;
	int rc = 0;
	if (!cand || !seeds) {
		rc = err_oom(e);
		goto out;
	}
	n = free_values(f, cand);
	for (size_t i = first; i < ps->n; i++)
		seeds[i - first] = (struct anneal_plan){ps->p[i].peak, ps->p[i].flops, ps->p[i].keep};
	uint64_t w = ANNEAL_ALLOWANCE / (2 * (uint64_t)f->n_nodes + 1);
	uint64_t most = (uint64_t)n * (100 * n > ANNEAL_PER_CAND ? 100 * n : ANNEAL_PER_CAND);
	if (w < ANNEAL_MIN_PER * ANNEAL_SWEEPS * (ANNEAL_TARGETS + ANNEAL_LEAST)) /* too few a target to anneal */
		goto out;
	double t = progress_begin();
	rc = anneal_sweep(mm, nflops, cand, n, seeds, ps->n - first, low, (uint32_t)(w < most ? w : most), &out, &n_out,
			  weighed, e);
	for (size_t i = 0; i < n_out && !rc; i++)
		if (!dominated(ps, out[i].peak, out[i].flops) && plans_add(ps, out[i].keep, f->n_values, out[i].peak, out[i].flops))
			rc = err_oom(e);
	progress_end(t, "auto: anneal", "%" PRIu32 " plans weighed, %zu kept, %" PRIu32 " candidates", *weighed, n_out, n);
out:
	anneal_free(out, n_out);
	xfree(seeds);
	xfree(cand);
	return rc;
}

/* On graphs of up to EXACT_CAND candidates (every droppable value but fixed ones) and
 * AUTO_EXACT_STEPS steps, the best-first search over kept sets (exact.h) for a plan with fewer
 * FLOPs than `known`, the best found so far; its plan joins ps. When it finishes, the answer is the
 * optimum over kept sets (r->proved = AUTO_KEPT), or no kept set fits (r->no_kept_set). */
#define AUTO_EXACT_STEPS 4000
static int exact_plans(struct memmodel *mm, const uint64_t *nflops, uint64_t budget, struct plans *ps,
		       struct auto_result *r, uint64_t known, struct gd_err *e)
{
	const struct flat *f = &mm->f;
	if (f->n_nodes > AUTO_EXACT_STEPS)
		return 0;
	uint32_t *cand = xmalloc(sizeof *cand * (f->n_values + 1)), n = 0;
	uint8_t *keep = xmalloc(f->n_values + 1);
	int rc = 0;
	if (!cand || !keep) {
		rc = err_oom(e);
		goto out;
	}
	if ((n = free_values(f, cand)) > EXACT_CAND)
		goto out;
	memset(keep, RC_KEPT, f->n_values);
	struct exact_result x;
	if ((rc = exact_kept_sets_below(mm, nflops, cand, n, budget, known, 0, keep, &x, e)))
		goto out;
	r->kept_cands = n;
	if (x.found && plans_add(ps, keep, f->n_values, x.peak, x.flops)) {
		rc = err_oom(e);
		goto out;
	}
	if (x.done && (x.found || known != UINT64_MAX))
		r->proved = AUTO_KEPT;
	r->no_kept_set = x.done && !x.found && known == UINT64_MAX;
out:
	xfree(cand);
	xfree(keep);
	return rc;
}

int ckpt_auto(const struct graph *g, struct memmodel *mm, uint64_t budget, const uint8_t *const *seeds,
	      size_t n_seeds, uint8_t *keep, struct auto_result *r, struct gd_err *e)
{
	memset(r, 0, sizeof *r);
	size_t nv = g->n_values ? g->n_values : 1;
	uint32_t F = 0;
	const uint64_t *nflops = memmodel_flops(mm, g, e);
	uint8_t *resident = xcalloc(nv, 1); /* 1: input or initializer, 2: other graph output */
	uint32_t *cand = xcalloc(nv, sizeof *cand);
	struct gmodel mod = {0}, *m = &mod;
	struct dp d = {0}, d2 = {0}; /* d2: the level solved ahead */
	struct nests ns = {0};
	struct plans ps = {0};
	struct search *se = NULL;
	int rc = 0, done = 0;
	size_t n_chain = 0;
	if (!nflops || !resident || !cand)
		goto oom;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		F += node_is_forward(g->nodes[i]);
	for (uint32_t i = 0; i < g->n_inits; i++)
		resident[g->inits[i]->id] = 1;
	for (uint32_t i = 0; i < g->n_inputs; i++)
		resident[g->inputs[i]->id] = 1;
	for (uint32_t i = 0; i < g->n_outputs; i++)
		if (!resident[g->outputs[i]->id])
			resident[g->outputs[i]->id] = 2;
	double t = progress_begin();
	r->lower_bound = lower_bound(g, mm, resident);
	/* a chain: the exact DP's plans, weighed; its best, when the weighing agrees, is the answer */
	if ((rc = chain_plans(g, mm, nflops, budget, &ps, r, &done, e)))
		goto out;
	n_chain = ps.n; /* the plans after these do not depend on the budget */
	progress_end(t, "auto: chain", "%" PRIu32 " stages", r->chain);
	if (done)
		goto answer;
	t = progress_begin();
	if (build_model(mm, nflops, m, F))
		goto oom;
	if (nests_build(m, &ns))
		goto oom;
	progress_end(t, "auto: model", "%" PRIu32 " cuts, %zu ways to recompute", m->M, ns.n);
	t = progress_begin();
	r->n_cuts = m->M;
	d.first = xcalloc((size_t)m->M + 1, sizeof *d.first);
	d.count = xcalloc((size_t)m->M + 1, sizeof *d.count);
	d2.first = xcalloc((size_t)m->M + 1, sizeof *d2.first);
	d2.count = xcalloc((size_t)m->M + 1, sizeof *d2.count);
	if (!d.first || !d.count || !d2.first || !d2.count)
		goto oom;
	/* the ladder of activation budgets, from everything kept down until nothing fits the model */
	const int large = g->n_nodes > AUTO_LARGE_STEPS, small = g->n_nodes <= SMALL_STEPS;
	const double ratio = small ? 0.95 : 0.97;
	uint64_t top = AT(m->all, m->M, m->M) - AT(m->nonbwd, m->M, m->M) + 1;
	if (!large) {
		/* with threads, the level below is solved beside each level the ladder needs: it is the
		 * next one needed unless the plan fits it too, which is rare */
		uint64_t last_c = UINT64_MAX, last_k = UINT64_MAX;
		int ahead = pool_threads() > 1, pending = 0;
		struct ladder_job lj = {m, &ns, {{0, &d, 0}, {0, &d2, 0}}};
		for (double a = (double)top; a >= 1;) {
			struct dp *dc = &d;
			int64_t ix;
			if (pending && lj.lv[1].a == a) {
				ix = lj.lv[1].ix;
				dc = lj.lv[1].d;
				pending = 0;
			} else {
				lj.lv[0].a = a;
				lj.lv[1].a = a * ratio;
				pending = ahead && lj.lv[1].a >= 1;
				pool_for(1 + (uint32_t)pending, solve_level, &lj);
				ix = lj.lv[0].ix;
			}
			if (ix == -2)
				goto oom;
			if (ix < 0)
				break;
			/* the plan fits every level down to its least budget, and is the best there too:
			 * the next level solved is the first below that */
			do
				a *= ratio;
			while (a >= 1 && (uint64_t)a >= dc->pool[ix].R);
			if (dc->pool[ix].C == last_c && dc->pool[ix].K == last_k)
				continue; /* the plan of the level above */
			last_c = dc->pool[ix].C;
			last_k = dc->pool[ix].K;
			if ((rc = weigh_level(g, mm, m, &ns, dc, ix, nflops, keep, &ps, e)))
				goto out;
		}
	} else {
		/* on large graphs weighing is what costs: the last level the model can meet, then a
		 * search for the first level that fits, assuming the weighed peak falls down the ladder
		 * as the modelled one does */
		int64_t lo = 0, hi = LARGE_LEVELS - 1, feasible = -1;
		while (lo <= hi) {
			int64_t mid = (lo + hi) / 2;
			int64_t ix = solve(m, &ns, (uint64_t)((double)top * pow(ratio, (double)mid)), &d);
			if (ix == -2)
				goto oom;
			if (ix >= 0)
				feasible = mid, lo = mid + 1;
			else
				hi = mid - 1;
		}
		/* a weighed level says how far the weighed peak lies above the level's budget (parameters,
		 * gradients, transients the model leaves out): at first the top level, whose plan keeps
		 * everything and so peaks where g's own order does; the next level tried is the one the
		 * last offset predicts to fit just, for a few guesses, then the midpoint */
		lo = 0;
		hi = feasible;
		double offset = (double)mm->peak_all - (double)top;
		int guesses = 0;
		while (lo <= hi) {
			int64_t mid = (lo + hi) / 2;
			if ((ps.n || mm->peak_all) && guesses < LARGE_GUESSES) {
				double A = (double)budget - offset;
				double L = A <= 0 ? (double)hi : ceil(log(A / (double)top) / log(ratio));
				mid = L < (double)lo ? lo : L > (double)hi ? hi : (int64_t)L;
				guesses++;
			}
			double level = (double)top * pow(ratio, (double)mid);
			int64_t ix = solve(m, &ns, (uint64_t)level, &d);
			if (ix < 0)
				goto oom; /* the model met a lower level, so only allocation fails here */
			if ((rc = weigh_level(g, mm, m, &ns, &d, ix, nflops, keep, &ps, e)))
				goto out;
			offset = (double)ps.p[ps.n - 1].peak - level;
			if (ps.p[ps.n - 1].peak <= budget)
				hi = mid - 1;
			else
				lo = mid + 1;
		}
	}
	progress_end(t, "auto: ladder", "%zu plans weighed", ps.n);
	t = progress_begin();
	if ((rc = weigh_sets(g, mm, seeds, n_seeds < AUTO_SEARCH_SEEDS ? n_seeds : AUTO_SEARCH_SEEDS, nflops, &ps, e)))
		goto out;
	if (!ps.n) { /* not even the top level fits the model: keep everything */
		memset(keep, 1, g->n_values);
		if ((rc = weigh_sets(g, mm, (const uint8_t *const *)&keep, 1, nflops, &ps, e)))
			goto out;
	}
	/* local search, while the allowance lasts: down in peak from the lowest-peak plan, then out
	 * along the (peak, FLOPs) frontier */
	if (!(se = xcalloc(1, sizeof *se)) || !(se->flips = xmalloc(sizeof *se->flips * nv)))
		goto oom;
	*se = (struct search){.g = g, .m = mm, .nflops = nflops, .cand = cand, .flips = se->flips,
			      .allowance = large ? 0 : small ? SEARCH_ALLOWANCE / 10 : SEARCH_ALLOWANCE,
			      .span = small ? PAIR_SPAN : UINT32_MAX};
	for (uint32_t v = 0; v < g->n_values; v++)
		if (m->gp[v])
			cand[se->n_cand++] = v;
	if ((rc = descend_from(se, &ps, 0, ps.n, keep, e)))
		goto out;
	if ((rc = frontier(se, &ps, keep, e)))
		goto out;
	/* the other seeds, and a descent from each while the allowance lasts */
	size_t n1 = ps.n;
	if (n_seeds > AUTO_SEARCH_SEEDS &&
	    (rc = weigh_sets(g, mm, seeds + AUTO_SEARCH_SEEDS, n_seeds - AUTO_SEARCH_SEEDS, nflops, &ps, e)))
		goto out;
	if ((rc = descend_from(se, &ps, n1, ps.n, keep, e)))
		goto out;
	progress_end(t, "auto: seeds and local search", "%zu plans weighed in all", ps.n);
	r->searched = !large;
answer:;
	size_t best = SIZE_MAX, low = 0;
	pick(&ps, budget, &best, &low);
	/* a small graph: plans with levels the searches above cannot make, unless keeping everything
	 * recomputes no less than the answer already does */
	uint64_t peak0, flops0;
	memset(keep, RC_KEPT, g->n_values);
	if ((rc = ckpt_weigh(mm, keep, nflops, &peak0, &flops0, NULL, e)))
		goto out;
	if (!done && g->n_nodes <= AUTO_LARGE_STEPS && (best == SIZE_MAX || ps.p[best].flops > flops0) &&
	    (rc = anneal_plans(mm, nflops, r->lower_bound, &ps, n_chain, &r->annealed, e)))
		goto out;
	pick(&ps, budget, &best, &low);
	/* a small graph: the best-first search over kept sets, for fewer FLOPs than the answer's */
	if (!done && (rc = exact_plans(mm, nflops, budget, &ps, r, best == SIZE_MAX ? UINT64_MAX : ps.p[best].flops, e)))
		goto out;
	pick(&ps, budget, &best, &low);
	r->n_plans = (uint32_t)ps.n;
	r->fits = best != SIZE_MAX;
	if (!r->fits)
		best = low;
	r->peak = ps.p[best].peak;
	r->flops = ps.p[best].flops;
	r->levels = ps.p[best].levels;
	if (r->proved == AUTO_CHAIN && (best != 0 || !r->fits))
		r->proved = !r->fits && r->chain_least > budget && best == 0 ? AUTO_CHAIN : 0; /* none fits: by the DP */
	if (r->fits && !r->proved) /* no plan recomputes less than keeping everything (fixed values) */
		r->proved = r->flops <= flops0 ? AUTO_ALL : 0;
	if (r->chain && !r->proved && r->fits && !r->no_chain)
		r->no_chain = "another plan beat the chain DP's";
	plans_get(&ps, best, keep, g->n_values);
	goto out;
oom:
	rc = err_oom(e);
out:
	if (se)
		search_free(se);
	xfree(se);
	for (size_t i = 0; i < ps.n; i++)
		xfree(ps.p[i].keep);
	xfree(ps.p);
	xfree(resident);
	xfree(cand);
	for (struct dp *p = &d; p; p = p == &d ? &d2 : NULL) {
		xfree(p->pool);
		xfree(p->tmp);
		xfree(p->first);
		xfree(p->count);
	}
	model_free(m);
	xfree(ns.pool);
	xfree(ns.first);
	xfree(ns.count);
	return rc;
}
