/* chain.c - see chain.h. */
#include "chain.h"
#include "../util/pool.h"
#include "../util/xalloc.h"

#include <string.h>

#define CHAIN_SET 4096 /* entries per Pareto set; more are thinned (r->capped) */
#define CHAIN_FIRST 16 /* ... in the first, quick solve, whose answer caps the FLOPs of the next */

/* One way to do a run: its modelled peak and FLOPs, the boundary it stores first (or keeps, at
 * the top), and its two parts' ways (indices in their sets). */
struct ent {
	uint64_t need, flops;
	uint32_t m, a, b;
};

/* Pareto sets, ascending in need and strictly falling in FLOPs, in one pool. */
struct sets {
	struct ent *pool;
	size_t n, cap;
	size_t *first;
	uint32_t *count;
};

struct chain {
	const struct flat *f;
	uint32_t L, F;
	uint32_t *b;       /* b[1 .. L]: the boundaries' value ids */
	uint32_t *stage;   /* per forward node: its stage, 1 .. L + 1 */
	uint64_t *x, *X;   /* x[k]: b_k's bytes; X[k]: x[1] + .. + x[k] */
	uint32_t *cut;     /* per i: the first cut after b_i (L + 1: none) */
	uint32_t *att, n_att; /* activations every plan keeps: side outputs only backward nodes read */
	uint32_t *side, n_side; /* activations inside stages: checkpoints the space leaves out */
	uint32_t *fr, *lr; /* per boundary: the first and last backward node that reads it */
	int64_t *fwd_h, *fwd_t; /* per stage 1 .. L + 1: forward pass, input kept or dying (absolute) */
	int64_t *s_h, *s_tr;    /* per stage 1 .. L: a recompute sweep's bytes, input held or dying */
	uint64_t *u, *U;        /* per stage 1 .. L: a sweep's FLOPs; U[k]: u[1] + .. + u[k] */
	int64_t *seg;           /* per k 1 .. L + 1: the backward nodes from b_k's first reader to b_(k-1)'s */
	int64_t *bclone;        /* per k 1 .. L: the bytes live at b_k's first reader, boundaries aside */
	uint64_t forced;        /* recompute FLOPs every plan has (fixed values) */
	uint64_t budget, fcap;  /* ways that need more bytes or FLOPs are left out */
	int one, capped;        /* one: keep only the least need per set */
	uint32_t set;           /* sets are thinned to this many (CHAIN_SET; fewer for a first plan) */
	struct sets rev, top;   /* rev: per (i, j) at i (L + 1) + j; top: per i */
	struct work {           /* one thread's buffers */
		struct ent *tmp, *acc, *old, *out;
		size_t ntmp, nacc, ctmp, cacc, cold, nout, cout;
		int oom, capped;
	} w[POOL_MAX];
	uint32_t len;           /* solve_pair's: the runs' length */
	uint8_t *by;            /* per i: the thread that did (i, i + len] */
};

static const struct ent unit = {0, 0, 0, 0, 0};

#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- the chain: boundaries, stages, readers ---- */

static int find_chain(struct chain *c, struct chain_result *r)
{
	const struct flat *f = c->f;
	uint32_t n = f->n_nodes, nv = f->n_values, F = 0;
	while (F < n && (f->nflags[F] & FLAT_FORWARD))
		F++;
	for (uint32_t i = F; i < n; i++)
		if (f->nflags[i] & FLAT_FORWARD) {
			r->why = "forward nodes come after backward ones";
			return 0;
		}

	c->F = F;
	int64_t *lfr = xmalloc(sizeof *lfr * (nv + 1));
	uint32_t *fb = xmalloc(sizeof *fb * (nv + 1)), *lb = xmalloc(sizeof *lb * (nv + 1));
	uint32_t *pos = xmalloc(sizeof *pos * (F + 2));
	c->b = xmalloc(sizeof *c->b * (F + 2));
	c->stage = xmalloc(sizeof *c->stage * (F + 1));
	c->side = xmalloc(sizeof *c->side * (nv + 1));
	if (!lfr || !fb || !lb || !pos || !c->b || !c->stage || !c->side) {
		xfree(lfr), xfree(fb), xfree(lb), xfree(pos);
		return -1;
	}
	for (uint32_t v = 0; v < nv; v++)
		lfr[v] = -1, fb[v] = UINT32_MAX, lb[v] = 0;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t k = f->in_off[i]; k < f->in_off[i + 1]; k++) {
			uint32_t v = f->in[k];
			if (v == FLAT_NONE)
				continue;
			if (i < F)
				lfr[v] = i;
			else {
				if (fb[v] == UINT32_MAX)
					fb[v] = i;
				lb[v] = i;
			}
		}
	/* modelled: an activation that may need holding (not one made of constants alone, which the
	 * schedule makes again wherever it needs it) */
	uint8_t *free_v = xcalloc(nv ? nv : 1, 1);
	if (!free_v) {
		xfree(lfr), xfree(fb), xfree(lb), xfree(pos);
		return -1;
	}
#define ACTIVATION(v) ((f->vflags[v] & FLAT_DROPPABLE) && !(f->vflags[v] & (FLAT_FIXED | FLAT_PINNED)) && \
		       f->producer[v] != FLAT_NONE && f->producer[v] < F)
#define MODELLED(v) (ACTIVATION(v) && !free_v[v])
	for (uint32_t p = 0; p < F; p++) {
		int made_of_some = 0; /* a Constant, or a shape made of them, is free */
		for (uint32_t k = f->in_off[p]; k < f->in_off[p + 1]; k++)
			made_of_some |= f->in[k] != FLAT_NONE && !free_v[f->in[k]] && !(f->vflags[f->in[k]] & FLAT_FIXED);
		for (uint32_t k = f->out_off[p]; k < f->out_off[p + 1] && !made_of_some; k++)
			if (f->out[k] != FLAT_NONE)
				free_v[f->out[k]] = 1;
	}
	/* single-tensor frontiers a backward node reads: the boundaries */
	uint32_t L = 0, cnt = 0, cut = UINT32_MAX;
	uint64_t sum = 0;
	for (uint32_t p = 0; p < F; p++) {
		for (uint32_t k = f->out_off[p]; k < f->out_off[p + 1]; k++) {
			uint32_t v = f->out[k];
			if (v != FLAT_NONE && MODELLED(v) && lfr[v] > (int64_t)p)
				cnt++, sum += v;
		}
		for (uint32_t k = f->in_off[p]; k < f->in_off[p + 1]; k++) {
			uint32_t v = f->in[k], dup = 0;
			for (uint32_t q = f->in_off[p]; q < k && !dup; q++)
				dup = f->in[q] == v;
			if (v != FLAT_NONE && !dup && MODELLED(v) && lfr[v] == (int64_t)p && f->producer[v] < p)
				cnt--, sum -= v;
		}
		if (cnt == 0 && L)
			cut = p; /* nothing to recompute crosses p: a cut, a boundary that costs nothing */
		if (cnt == 1 && fb[sum] != UINT32_MAX && (!L || c->b[L] != (uint32_t)sum)) {
			if (cut != UINT32_MAX) {
				c->b[++L] = FLAT_NONE;
				pos[L] = cut;
				cut = UINT32_MAX;
			}
			c->b[++L] = (uint32_t)sum;
			pos[L] = p;
		}
	}
	c->L = L;
	int ok = L >= 2;
	if (!ok)
		r->why = "fewer than two single-tensor frontiers that the backward pass reads";
	/* no other activation is read by a backward node */
	uint8_t *isb = ok ? xcalloc(nv, 1) : NULL;
	if (ok && !isb) {
		xfree(lfr), xfree(fb), xfree(lb), xfree(pos), xfree(free_v);
		return -1;
	}
	for (uint32_t k = 1; ok && k <= L; k++)
		if (c->b[k] != FLAT_NONE)
			isb[c->b[k]] = 1;
	/* side outputs no forward node reads (a Shape the backward pass reads) are kept: attached */
	c->att = ok ? xmalloc(sizeof *c->att * (nv + 1)) : NULL;
	if (ok && !c->att) {
		xfree(lfr), xfree(fb), xfree(lb), xfree(pos), xfree(isb), xfree(free_v);
		return -1;
	}
	for (uint32_t v = 0; ok && v < nv; v++)
		if (MODELLED(v) && fb[v] != UINT32_MAX && !isb[v]) {
			if (lfr[v] < 0) {
				c->att[c->n_att++] = v;
				continue;
			}
			ok = 0;
			r->why = "a backward node reads an activation inside a stage";
		} else if (MODELLED(v) && !isb[v]) {
			c->side[c->n_side++] = v; /* inside a stage: a checkpoint the space leaves out */
		}
#undef MODELLED
#undef ACTIVATION
	xfree(free_v);
	xfree(isb);
	/* read in reverse: b_j's readers all before b_(j-1)'s first */
	c->fr = ok ? xmalloc(sizeof *c->fr * (L + 1)) : NULL;
	c->lr = ok ? xmalloc(sizeof *c->lr * (L + 1)) : NULL;
	if (ok && (!c->fr || !c->lr)) {
		xfree(lfr), xfree(fb), xfree(lb), xfree(pos);
		return -1;
	}
	for (uint32_t k = 1; ok && k <= L; k++) {
		if (c->b[k] == FLAT_NONE) { /* a cut: no readers, an empty segment */
			c->fr[k] = c->lr[k] = c->fr[k - 1];
			continue;
		}
		c->fr[k] = fb[c->b[k]];
		c->lr[k] = lb[c->b[k]];
		if (k > 1 && !(c->fr[k] < c->fr[k - 1] && c->lr[k] < c->fr[k - 1])) {
			ok = 0;
			r->why = "the backward pass does not read the boundaries in reverse";
		}
	}
	if (ok) {
		uint32_t k = 1;
		for (uint32_t p = 0; p < F; p++) {
			c->stage[p] = k;
			if (k <= L && p == pos[k])
				k++;
		}
	}
	xfree(lfr), xfree(fb), xfree(lb), xfree(pos);
	return ok;
}

/* ---- the costs, from traced schedules ---- */

struct trace {
	struct rc_step *steps;
	uint32_t n;
	struct mem_result r;
};

static int run_trace(struct memmodel *m, const uint8_t *keep, struct trace *t, struct gd_err *e)
{
	memset(t, 0, sizeof *t);
	if (recompute_schedule(&m->f, keep, &t->steps, &t->n, e))
		return -1;
	if (memsim_schedule(m, keep, t->steps, t->n, 1, &t->r, e)) {
		xfree(t->steps);
		t->steps = NULL;
		return -1;
	}
	return 0;
}

static void trace_free(struct trace *t)
{
	xfree(t->steps);
	memsim_free(&t->r);
}

/* Per stage (whose boundary is no cut), the most live bytes of its steps in the first run of
 * recompute steps that has it, above the bytes live before that run, less the boundaries of its
 * part of the chain the run made before it when `held`; and its FLOPs there. 0 when some stage has
 * no such steps. */
static int sweep_costs(const struct chain *c, const struct trace *t, const uint64_t *flops, int held, int64_t *s,
		       uint64_t *u)
{
	uint32_t L = c->L, run = 0, *owner = xcalloc(L + 2, sizeof *owner), *from = xcalloc(L + 2, sizeof *from);
	if (!owner || !from) {
		xfree(owner), xfree(from);
		return -1;
	}
	for (uint32_t k = 1, v = 0; k <= L; k++) {
		from[k] = v; /* the cut (or 0) this part of the chain starts from */
		if (c->b[k] == FLAT_NONE)
			v = k;
		s[k] = INT64_MIN;
	}
	int64_t start = 0;
	for (uint32_t i = 0; i < t->n; i++) {
		if (!t->steps[i].clone)
			continue;
		if (i == 0 || !t->steps[i - 1].clone) {
			run++;
			start = i ? (int64_t)t->r.live_end[i - 1] : 0;
		}
		uint32_t node = t->steps[i].node, k = node < c->F ? c->stage[node] : 0;
		if (!k || k > L || (owner[k] && owner[k] != run))
			continue;
		owner[k] = run;
		int64_t v = (int64_t)t->r.live[i] - start - (held ? (int64_t)(c->X[k - 1] - c->X[from[k]]) : 0);
		s[k] = MAX(s[k], v);
		if (u)
			u[k] += flops[node];
	}
	int ok = 1;
	for (uint32_t k = 1; k <= L; k++)
		if (c->b[k] != FLAT_NONE && s[k] == INT64_MIN)
			ok = 0;
	xfree(owner), xfree(from);
	return ok;
}

static int measure(struct chain *c, struct memmodel *m, const uint64_t *flops, struct chain_result *r,
		   struct gd_err *e)
{
	const struct flat *f = c->f;
	uint32_t L = c->L, F = c->F, n = f->n_nodes;
	uint8_t *keep = xcalloc(f->n_values ? f->n_values : 1, 1);
	uint32_t *at = NULL; /* per step of the first trace */
	struct trace t = {0};
	int ok = 0;
	if (!keep)
		goto oom;
	int64_t R0 = (int64_t)(m->params + m->inputs + m->state);
	c->X[0] = c->x[0] = 0;
	for (uint32_t k = 1; k <= L; k++) {
		c->x[k] = c->b[k] == FLAT_NONE ? 0 : m->bytes[c->b[k]];
		c->X[k] = c->X[k - 1] + c->x[k];
	}
#define EACH_BOUNDARY(k) for (uint32_t k = 1; k <= L; k++) if (c->b[k] != FLAT_NONE)
	/* everything kept: the forward pass with inputs held, and the backward pass's own bytes */
	for (uint32_t a = 0; a < c->n_att; a++)
		keep[c->att[a]] = RC_KEPT;
	EACH_BOUNDARY(k)
		keep[c->b[k]] = RC_KEPT;
	if (run_trace(m, keep, &t, e))
		goto fail;
	if (!(at = xmalloc(sizeof *at * (t.n + 1)))) /* recomputes of fixed values make more steps than nodes */
		goto oom;
	for (uint32_t k = 1; k <= L + 1; k++)
		c->fwd_h[k] = c->fwd_t[k] = INT64_MIN;
	for (uint32_t k = 1; k <= L + 1; k++)
		c->seg[k] = INT64_MIN;
	c->forced = 0;
	/* each step's node: its own, or for a recompute the node it is made for */
	for (uint32_t i = t.n, next = n; i-- > 0;) {
		if (!t.steps[i].clone)
			next = t.steps[i].node;
		at[i] = next;
		if (t.steps[i].clone)
			c->forced += flops[t.steps[i].node];
	}
	for (uint32_t k = 1; k <= L; k++)
		c->bclone[k] = INT64_MIN;
	for (uint32_t i = 0, J = L; i < t.n; i++) {
		uint32_t b = at[i];
		if (b < F && !t.steps[i].clone) {
			uint32_t k = c->stage[b];
			c->fwd_h[k] = MAX(c->fwd_h[k], (int64_t)t.r.live[i] - R0 - (int64_t)c->X[k - 1]);
			continue;
		}
		if (b >= n)
			continue;
		while (J > 0 && c->fr[J] <= b)
			J--; /* pending: b_1 .. b_J */
		int64_t base = (int64_t)t.r.live[i] - (int64_t)c->X[J];
		c->seg[J + 1] = MAX(c->seg[J + 1], base);
		if (J < L && b == c->fr[J + 1] && c->bclone[J + 1] == INT64_MIN && i > 0)
			c->bclone[J + 1] = (int64_t)t.r.live_end[i - 1] - (int64_t)c->X[J + 1];
	}
	trace_free(&t);
	/* every boundary a level-2 checkpoint: one sweep per part keeps them all, each stage's input
	 * held */
	EACH_BOUNDARY(k)
		keep[c->b[k]] = RC_AT_LEVEL(2);
	if (run_trace(m, keep, &t, e))
		goto fail;
	if ((ok = sweep_costs(c, &t, flops, 1, c->s_h, NULL)) <= 0)
		goto no;
	trace_free(&t);
	/* every boundary dropped, the last of each part at a lower level: one sweep per part, each
	 * stage's input dying */
	EACH_BOUNDARY(k)
		keep[c->b[k]] = k == L || c->b[k + 1] == FLAT_NONE ? RC_AT_LEVEL(2) : RC_AT_LEVEL(3);
	if (run_trace(m, keep, &t, e))
		goto fail;
	memset(c->u, 0, sizeof *c->u * (L + 2));
	if ((ok = sweep_costs(c, &t, flops, 0, c->s_tr, c->u)) <= 0)
		goto no;
	ok = 0;
#undef EACH_BOUNDARY
	for (uint32_t i = 0; i < t.n; i++)
		if (!t.steps[i].clone && t.steps[i].node < F) {
			uint32_t k = c->stage[t.steps[i].node];
			c->fwd_t[k] = MAX(c->fwd_t[k], (int64_t)t.r.live[i] - R0);
		}
	for (uint32_t k = 1; k <= L + 1; k++) {
		int cut = k <= L && c->b[k] == FLAT_NONE;
		if (c->seg[k] == INT64_MIN)
			c->seg[k] = 0; /* no backward node there */
		if (k == L + 1 && c->fwd_h[k] == INT64_MIN && c->fwd_t[k] == INT64_MIN)
			c->fwd_h[k] = c->fwd_t[k] = 0; /* no tail */
		if (c->fwd_h[k] == INT64_MIN || c->fwd_t[k] == INT64_MIN || (k <= L && !cut && c->bclone[k] == INT64_MIN))
			goto no;
	}
	for (uint32_t k = 1; k <= L + 1; k++) { /* absolute: the forward pass's with R0 */
		c->fwd_h[k] += R0;
		c->fwd_t[k] += R0;
	}
	ok = 1;
	goto out;
no:
	if (ok < 0)
		goto oom;
	r->why = "a probe schedule does not sweep every stage";
	goto out;
oom:
	err_oom(e);
fail:
	ok = -1;
out:
	trace_free(&t);
	xfree(keep);
	xfree(at);
	return ok;
}

/* ---- the dynamic program ---- */

static int acc_push(struct work *c, struct ent en)
{
	if (c->nacc == c->cacc && xgrow((void **)&c->acc, c->nacc, &c->cacc, sizeof *c->acc))
		return -1;
	c->acc[c->nacc++] = en;
	return 0;
}

/* The ways of doing both parts, A shifted up by xa and B, beside `fixed` bytes and `flops` more:
 * the Pareto set of (max need, sum FLOPs), merged into c->acc. */
static int combine(const struct chain *ch, struct work *c, const struct ent *A, uint32_t na, uint64_t xa,
		   const struct ent *B, uint32_t nb, uint64_t fixed, uint64_t flops, uint32_t m, uint64_t limit)
{
	/* the combinations into tmp, then tmp merged with acc */
	c->ntmp = 0;
	if (flops + A[na - 1].flops + B[nb - 1].flops > ch->fcap)
		return 0;
	/* the first ways that can be within fcap with the other part's cheapest */
	uint32_t ia = 0, ib = 0;
	for (uint32_t lo = 0, hi = na - 1; lo < hi;) {
		uint32_t mid = (lo + hi) / 2;
		if (flops + A[mid].flops + B[nb - 1].flops <= ch->fcap)
			hi = mid;
		else
			lo = mid + 1;
		ia = lo;
	}
	for (uint32_t lo = 0, hi = nb - 1; lo < hi;) {
		uint32_t mid = (lo + hi) / 2;
		if (flops + A[na - 1].flops + B[mid].flops <= ch->fcap)
			hi = mid;
		else
			lo = mid + 1;
		ib = lo;
	}
	/* acc's cheapest way that needs no more than this one: where it costs no more than this
	 * choice's cheapest, nothing further on can be better */
	const uint64_t least = flops + A[na - 1].flops + B[nb - 1].flops;
	size_t q = 0;
	int have = 0;
	for (;;) {
		uint64_t need = MAX(fixed, MAX(A[ia].need + xa, B[ib].need));
		if (need > limit)
			break;
		while (q < c->nacc && c->acc[q].need <= need)
			q++, have = 1;
		if (have && c->acc[q - 1].flops <= least)
			break;
		uint64_t fl = flops + A[ia].flops + B[ib].flops;
		if (fl > ch->fcap || (have && c->acc[q - 1].flops <= fl))
			goto next;
		struct ent en = {need, fl, m, ia, ib};
		if (c->ntmp && c->tmp[c->ntmp - 1].need == need) {
			if (fl < c->tmp[c->ntmp - 1].flops)
				c->tmp[c->ntmp - 1] = en;
		} else if (!c->ntmp || fl < c->tmp[c->ntmp - 1].flops) {
			if (c->ntmp == c->ctmp && xgrow((void **)&c->tmp, c->ntmp, &c->ctmp, sizeof *c->tmp))
				return -1;
			c->tmp[c->ntmp++] = en;
		}
	next:;
		int more_a = ia + 1 < na, more_b = ib + 1 < nb;
		if (!more_a && !more_b)
			break;
		if (more_a && (!more_b || A[ia + 1].need + xa <= B[ib + 1].need))
			ia++;
		else
			ib++;
	}
	if (!c->ntmp)
		return 0;
	/* merge: acc and tmp are both ascending in need, strictly falling in FLOPs */
	size_t na0 = c->nacc;
	struct ent *old = c->acc;
	size_t cold = c->cacc;
	c->acc = c->old;
	c->cacc = c->cold;
	c->old = old;
	c->cold = cold;
	c->nacc = 0;
	size_t x = 0, y = 0;
	int rc = 0;
	while (!rc && (x < na0 || y < c->ntmp)) {
		const struct ent *p = x < na0 ? &old[x] : NULL, *q = y < c->ntmp ? &c->tmp[y] : NULL;
		const struct ent *en = !q || (p && (p->need < q->need || (p->need == q->need && p->flops <= q->flops))) ? p : q;
		if (en == p)
			x++;
		else
			y++;
		if (!c->nacc || en->flops < c->acc[c->nacc - 1].flops)
			rc = acc_push(c, *en);
	}
	return rc;
}

/* The set w->acc holds, thinned to c->set, or its first when c->one; its length. */
static size_t finish(const struct chain *c, struct work *w)
{
	size_t n = c->one && w->nacc > 1 ? 1 : w->nacc;
	if (n > c->set) { /* thin: evenly, the ends kept */
		size_t k = 0;
		for (size_t i = 0; i < n; i++)
			if (i == n - 1 || i == 0 || (i * c->set) / n != ((i + 1) * c->set) / n)
				w->acc[k++] = w->acc[i];
		n = k;
		w->capped = 1;
	}
	return n;
}

/* n entries at src appended to s's pool, as the set at `at`. */
static int put(struct sets *s, size_t at, const struct ent *src, size_t n)
{
	while (s->n + n > s->cap)
		if (xgrow((void **)&s->pool, s->cap, &s->cap, sizeof *s->pool))
			return -1;
	if (n)
		memcpy(s->pool + s->n, src, sizeof *src * n);
	s->first[at] = s->n;
	s->count[at] = (uint32_t)n;
	s->n += n;
	return 0;
}

#define REV(i, j) ((size_t)(i) * (c->L + 1) + (j))

/* One choice m: the ways of what follows it (set `at` of s, shifted up by xa, when `after`) with
 * those of the dropped run (i, last] (none when last <= i), beside fx bytes and `flops` more. */
static int choose(const struct chain *c, struct work *w, const struct sets *s, size_t at, int after, uint64_t xa,
		  uint32_t i, uint32_t last, int64_t fx, uint64_t flops, uint32_t m, uint64_t limit)
{
	uint64_t fixed = fx < 0 ? 0 : (uint64_t)fx;
	const struct ent *A = &unit, *B = &unit;
	uint32_t na = 1, nb = 1;
	if (fixed > limit)
		return 0;
	if (after) {
		if (!(na = s->count[at]))
			return 0;
		A = s->pool + s->first[at];
	} else {
		xa = 0;
	}
	if (last > i) {
		if (!(nb = c->rev.count[REV(i, last)]))
			return 0;
		B = c->rev.pool + c->rev.first[REV(i, last)];
	}
	return combine(c, w, A, na, xa, B, nb, fixed, flops, m, limit);
}

/* The ways of the dropped run (i, i + len], from the shorter runs', into thread w's out. */
static void solve_pair(void *arg, uint32_t i, uint32_t wi)
{
	struct chain *c = arg;
	struct work *w = &c->w[wi];
	uint32_t j = i + c->len;
	c->by[i] = (uint8_t)wi;
	c->rev.first[REV(i, j)] = w->nout;
	c->rev.count[REV(i, j)] = 0;
	if (w->oom || j >= c->cut[i] || c->U[j] - c->U[i] > c->fcap) /* a run never holds a cut */
		return;
	int64_t sweep = c->s_h[i + 1]; /* the sweep from b_i to b_m's bytes */
	uint64_t limit = c->budget - (c->budget >= c->x[i] ? c->x[i] : c->budget); /* b_i is held */
	w->nacc = 0;
	for (uint32_t m = i + 1; m <= j; m++) { /* the nearest first (the farthest first prunes less) */
		if (m > i + 1)
			sweep = MAX(sweep, c->s_tr[m]);
		uint64_t U = c->U[m] - c->U[i];
		if (choose(c, w, &c->rev, REV(m, j), m < j, c->x[m], i, m - 1, MAX(c->bclone[j] + sweep, c->seg[m]), U, m,
			   limit)) {
			w->oom = 1;
			return;
		}
	}
	size_t n = finish(c, w);
	while (w->nout + n > w->cout)
		if (xgrow((void **)&w->out, w->cout, &w->cout, sizeof *w->out)) {
			w->oom = 1;
			return;
		}
	if (n)
		memcpy(w->out + w->nout, w->acc, sizeof *w->acc * n);
	w->nout += n;
	c->rev.count[REV(i, j)] = (uint32_t)n;
}

/* Every run's ways, shortest first (each length's runs over the pool's threads), then the top
 * level's, from the last boundary back. */
static int solve(struct chain *c)
{
	uint32_t L = c->L;
	c->rev.n = c->top.n = 0;
	for (uint32_t len = 1; len <= L; len++) {
		c->len = len;
		for (int t = 0; t < POOL_MAX; t++)
			c->w[t].nout = 0;
		pool_for(L + 1 - len, solve_pair, c);
		size_t base[POOL_MAX];
		for (int t = 0; t < POOL_MAX; t++) {
			if (c->w[t].oom)
				return -1;
			base[t] = c->rev.n;
			while (c->rev.n + c->w[t].nout > c->rev.cap)
				if (xgrow((void **)&c->rev.pool, c->rev.cap, &c->rev.cap, sizeof *c->rev.pool))
					return -1;
			if (c->w[t].nout)
				memcpy(c->rev.pool + c->rev.n, c->w[t].out, sizeof *c->w[t].out * c->w[t].nout);
			c->rev.n += c->w[t].nout;
		}
		for (uint32_t i = 0; i + len <= L; i++)
			c->rev.first[REV(i, i + len)] += base[c->by[i]];
	}
	struct work *w = &c->w[0];
	for (uint32_t i = L + 1; i-- > 0;) {
		int64_t fwd = c->fwd_h[i + 1];
		uint64_t limit = c->budget - (c->budget >= c->x[i] ? c->x[i] : c->budget); /* b_i is kept */
		w->nacc = 0;
		for (uint32_t k = i + 1; k <= L + 1 && k <= c->cut[i]; k++) {
			if (k > i + 1)
				fwd = MAX(fwd, c->fwd_t[k]);
			if (choose(c, w, &c->top, k, k <= L, c->x[k], i, k - 1, MAX(fwd, c->seg[k]), 0, k, limit))
				return -1;
		}
		if (put(&c->top, i, w->acc, finish(c, w)))
			return -1;
	}
	for (int t = 0; t < POOL_MAX; t++)
		c->capped |= c->w[t].capped;
	return 0;
}

/* The plan of way e of the dropped run (i, j] at level lv into keep; the deepest level into *deep. */
static void plan_rev(const struct chain *c, uint32_t i, uint32_t j, const struct ent *e, uint32_t lv, uint8_t *keep,
		     uint32_t *deep)
{
	for (;;) {
		uint32_t m = e->m;
		keep[c->b[m]] = RC_AT_LEVEL(lv < RC_INNER ? lv : RC_INNER - 1);
		if (lv > *deep)
			*deep = lv;
		if (m - 1 > i)
			plan_rev(c, i, m - 1, c->rev.pool + c->rev.first[REV(i, m - 1)] + e->b, lv + 1, keep, deep);
		if (m == j)
			return;
		e = c->rev.pool + c->rev.first[REV(m, j)] + e->a; /* the same level: one sweep stores both */
		i = m;
	}
}

static int plan_of(const struct chain *c, uint32_t n_values, const struct ent *e, struct chain_plan *p)
{
	p->keep = xcalloc(n_values ? n_values : 1, 1);
	if (!p->keep)
		return -1;
	p->peak = e->need;
	p->flops = e->flops + c->forced;
	for (uint32_t a = 0; a < c->n_att; a++)
		p->keep[c->att[a]] = RC_KEPT;
	p->levels = 1;
	for (uint32_t i = 0;;) {
		uint32_t k = e->m;
		if (k - 1 > i)
			plan_rev(c, i, k - 1, c->rev.pool + c->rev.first[REV(i, k - 1)] + e->b, 2, p->keep, &p->levels);
		if (k > c->L)
			break;
		if (c->b[k] != FLAT_NONE)
			p->keep[c->b[k]] = RC_KEPT;
		e = c->top.pool + c->top.first[k] + e->a;
		i = k;
	}
	if (p->levels >= RC_INNER) { /* deeper than keep can say */
		xfree(p->keep);
		p->keep = NULL;
	}
	return 0;
}

static int sets_init(struct sets *s, size_t n)
{
	s->first = xcalloc(n, sizeof *s->first);
	s->count = xcalloc(n, sizeof *s->count);
	return s->first && s->count ? 0 : -1;
}

static void sets_free(struct sets *s)
{
	xfree(s->pool);
	xfree(s->first);
	xfree(s->count);
}

int chain_solve(struct memmodel *m, const uint64_t *flops, uint64_t budget,
		struct chain_plan *plans, uint32_t max, uint32_t *n, struct chain_result *r, struct gd_err *e)
{
	memset(r, 0, sizeof *r);
	*n = 0;
	struct chain ch = {.f = &m->f}, *c = &ch;
	int rc = find_chain(c, r);
	if (rc <= 0)
		goto out;
	rc = 0;
	if (c->L > CHAIN_MAX) {
		r->why = "more stages than the exact search takes";
		goto out;
	}
	uint32_t L = c->L;
	c->x = xmalloc(sizeof *c->x * (L + 2));
	c->X = xmalloc(sizeof *c->X * (L + 2));
	c->fwd_h = xmalloc(sizeof *c->fwd_h * (L + 2));
	c->fwd_t = xmalloc(sizeof *c->fwd_t * (L + 2));
	c->s_h = xmalloc(sizeof *c->s_h * (L + 2));
	c->s_tr = xmalloc(sizeof *c->s_tr * (L + 2));
	c->u = xmalloc(sizeof *c->u * (L + 2));
	c->seg = xmalloc(sizeof *c->seg * (L + 2));
	c->bclone = xmalloc(sizeof *c->bclone * (L + 2));
	c->cut = xmalloc(sizeof *c->cut * (L + 2));
	c->by = xmalloc(L + 2);
	if (!c->cut || !c->by)
		goto oom;
	c->cut[L] = c->cut[L + 1] = L + 1;
	for (uint32_t i = L; i-- > 0;)
		c->cut[i] = c->b[i + 1] == FLAT_NONE ? i + 1 : c->cut[i + 1];
	if (!c->x || !c->X || !c->fwd_h || !c->fwd_t || !c->s_h || !c->s_tr || !c->u || !c->seg || !c->bclone ||
	    sets_init(&c->rev, (size_t)(L + 1) * (L + 1)) || sets_init(&c->top, L + 2))
		goto oom;
	int ok = measure(c, m, flops, r, e);
	if (ok < 0) {
		rc = -1;
		goto out;
	}
	if (!ok)
		goto out;
	r->chain = 1;
	r->n_stages = L;
	for (uint32_t k = 0; k < c->n_side && !r->incomplete; k++) {
		uint32_t at = c->stage[m->f.producer[c->side[k]]]; /* smaller than its stage's boundary, */
		r->incomplete = at <= L && c->b[at] != FLAT_NONE && m->bytes[c->side[k]] < c->x[at]; /* it may do better */
	}
	if (!(c->U = xmalloc(sizeof *c->U * (L + 2))))
		goto oom;
	c->U[0] = 0;
	for (uint32_t k = 1; k <= L; k++)
		c->U[k] = c->U[k - 1] + c->u[k];
	c->fcap = UINT64_MAX;
	c->set = CHAIN_SET;
	/* the least peak of the space, and its plan */
	c->one = 1;
	c->budget = UINT64_MAX;
	if (solve(c))
		goto oom;
	struct chain_plan least = {0};
	uint64_t least_flops = UINT64_MAX;
	if (c->top.count[0]) { /* then, when that is the answer, fewer FLOPs at that peak (thinned sets:
				* only the peak is claimed when nothing fits) */
		r->least_peak = c->top.pool[c->top.first[0]].need;
		least_flops = c->top.pool[c->top.first[0]].flops;
		if (budget < r->least_peak) {
			c->one = 0;
			c->budget = r->least_peak;
			c->fcap = least_flops;
			c->set = CHAIN_FIRST;
			if (solve(c))
				goto oom;
			if (c->top.count[0])
				least_flops = c->top.pool[c->top.first[0] + c->top.count[0] - 1].flops;
			c->set = CHAIN_SET;
			c->capped = 0;
			for (int t = 0; t < POOL_MAX; t++)
				c->w[t].capped = 0;
		}
		if (c->top.count[0] && plan_of(c, m->f.n_values, c->top.pool + c->top.first[0] + c->top.count[0] - 1, &least))
			goto oom;
		r->capped |= !least.keep; /* deeper than keep can say (or thinned away) */
	}
	/* the Pareto set within the budget of the plans of at most fcap FLOPs, the cap from a first
	 * plan found with thinned sets (a cap leaves out only ways that cost more) */
	c->one = 0;
	c->budget = budget;
	c->set = CHAIN_FIRST;
	if (budget >= r->least_peak) {
		/* the first plan: under caps from 1/256 of the least-peak plan's FLOPs up */
		for (c->fcap = least_flops / 256 ? least_flops / 256 : 1;;
		     c->fcap = c->fcap > least_flops / 4 ? least_flops : 4 * c->fcap) {
			if (solve(c)) {
				xfree(least.keep);
				goto oom;
			}
			if (c->top.count[0] || c->fcap == least_flops)
				break;
		}
		if (c->top.count[0])
			c->fcap = c->top.pool[c->top.first[0] + c->top.count[0] - 1].flops;
		c->capped = 0;
		c->set = CHAIN_SET;
		for (int t = 0; t < POOL_MAX; t++)
			c->w[t].capped = 0;
		if (solve(c)) {
			xfree(least.keep);
			goto oom;
		}
	}
	if (budget >= r->least_peak && c->top.count[0]) {
		const struct ent *s = c->top.pool + c->top.first[0];
		for (uint32_t k = c->top.count[0]; k-- > 0 && *n + 1 < max;) {
			if (plan_of(c, m->f.n_values, s + k, &plans[*n])) {
				xfree(least.keep);
				goto oom;
			}
			if (plans[*n].keep)
				++*n;
			else if (k == c->top.count[0] - 1)
				r->capped = 1; /* the best needs levels keep cannot say: not proved */
		}
	}
	if (least.keep && *n < max)
		plans[(*n)++] = least;
	else
		xfree(least.keep);
	r->capped |= c->capped;
	goto out;
oom:
	rc = err_oom(e);
	for (uint32_t i = 0; i < *n; i++)
		xfree(plans[i].keep);
	*n = 0;
out:
	xfree(c->b), xfree(c->stage), xfree(c->x), xfree(c->X), xfree(c->fr), xfree(c->lr);
	xfree(c->fwd_h), xfree(c->fwd_t), xfree(c->s_h), xfree(c->s_tr), xfree(c->u), xfree(c->seg), xfree(c->bclone), xfree(c->cut), xfree(c->att), xfree(c->side);
	sets_free(&c->rev);
	sets_free(&c->top);
	for (int t = 0; t < POOL_MAX; t++) {
		xfree(c->w[t].tmp);
		xfree(c->w[t].acc);
		xfree(c->w[t].old);
		xfree(c->w[t].out);
	}
	xfree(c->U);
	xfree(c->by);
	return rc;
}
