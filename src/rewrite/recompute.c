/* recompute.c - see recompute.h. */
#include "recompute.h"
#include "../exec/exec.h"
#include "../util/join.h"
#include "../util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The schedule: g's nodes in order, with the clones each backward node needs first. */
struct sch {
	const struct flat *f;
	const uint8_t *keep;
	struct rc_scratch *r; /* made: value id -> its recompute is available; steps */
	uint32_t n;
	int oom;
};

static void add_step(struct sch *s, uint32_t node, uint32_t clone)
{
	if (s->n == s->r->cap && xgrow((void **)&s->r->steps, s->n, &s->r->cap, sizeof *s->r->steps)) {
		s->oom = 1;
		return;
	}
	s->r->steps[s->n++] = (struct rc_step){node, clone};
}

/* One pass: schedules the recompute of dropped value v after those of its producer's missing
 * dropped inputs (a depth-first walk with an explicit stack, so a long run of dropped values
 * cannot overflow the C stack). */
static void pass(struct sch *s, uint32_t v)
{
	const struct flat *f = s->f;
	uint8_t *made = s->r->made;
	uint32_t *stack = s->r->stack, top = 0;
	stack[top++] = v;
	while (top && !s->oom) {
		uint32_t u = stack[top - 1];
		if (made[u]) {
			top--;
			continue;
		}
		uint32_t p = f->producer[u], missing = FLAT_NONE;
		for (uint32_t k = f->in_off[p]; k < f->in_off[p + 1] && missing == FLAT_NONE; k++)
			if (rc_dropped(f, s->keep, f->in[k]) && !made[f->in[k]])
				missing = f->in[k];
		if (missing != FLAT_NONE) {
			stack[top++] = missing;
			continue;
		}
		for (uint32_t k = f->out_off[p]; k < f->out_off[p + 1]; k++)
			if (f->out[k] != FLAT_NONE && !made[f->out[k]])
				made[f->out[k]] = 2; /* new in this pass */
		add_step(s, p, ++s->r->times[p]);
		top--;
	}
}

/* The dropped values missing on the way to v, v first, into s->r->walked; returns their count. */
static uint32_t missing(struct sch *s, uint32_t v)
{
	const struct flat *f = s->f;
	uint8_t *made = s->r->made;
	uint32_t *stack = s->r->stack, top = 0, n = 0;
	made[v] = 3; /* walked, cleared below */
	stack[top++] = v;
	while (top) {
		uint32_t u = stack[--top], p = f->producer[u];
		s->r->walked[n++] = u;
		for (uint32_t k = f->in_off[p]; k < f->in_off[p + 1]; k++)
			if (rc_dropped(f, s->keep, f->in[k]) && !made[f->in[k]]) {
				made[f->in[k]] = 3;
				stack[top++] = f->in[k];
			}
	}
	for (uint32_t i = 0; i < n; i++)
		made[s->r->walked[i]] = 0;
	return n;
}

/* Passes until v is available. Each makes the missing values of the lowest level on the way to v,
 * with what they need, and keeps those of that level: so a level-2 value is a checkpoint the
 * backward pass makes before the values past it, and every pass makes one more available. */
static void recompute(struct sch *s, uint32_t v)
{
	const struct flat *f = s->f;
	uint8_t *made = s->r->made;
	while (!made[v] && !s->oom) {
		uint32_t first = s->n, n = missing(s, v);
		uint8_t low = RC_INNER;
		for (uint32_t i = 0; i < n; i++)
			if (rc_level(s->keep, s->r->walked[i]) < low)
				low = rc_level(s->keep, s->r->walked[i]);
		if (rc_level(s->keep, v) == low)
			pass(s, v);
		else /* the values of that level, those nearer the inputs first */
			for (uint32_t i = n; i-- > 0 && !s->oom;)
				if (rc_level(s->keep, s->r->walked[i]) == low && !made[s->r->walked[i]])
					pass(s, s->r->walked[i]);
		for (uint32_t i = first; i < s->n; i++)
			for (uint32_t k = f->out_off[s->r->steps[i].node]; k < f->out_off[s->r->steps[i].node + 1]; k++) {
				uint32_t u = f->out[k];
				if (u != FLAT_NONE && made[u] == 2) /* new: kept if of that level, or not dropped */
					made[u] = rc_dropped(f, s->keep, u) && rc_level(s->keep, u) > low ? 0 : 1;
			}
	}
}

int rc_scratch_init(struct rc_scratch *s, const struct flat *f)
{
	memset(s, 0, sizeof *s);
	s->made = xmalloc(f->n_values ? f->n_values : 1);
	s->stack = xmalloc(sizeof *s->stack * (f->n_values + 1));
	s->times = xmalloc(sizeof *s->times * (f->n_nodes + 1));
	s->walked = xmalloc(sizeof *s->walked * (f->n_values + 1));
	s->cap = 2 * (size_t)f->n_nodes + 1;
	s->steps = xmalloc(sizeof *s->steps * s->cap);
	if (s->made && s->stack && s->times && s->walked && s->steps)
		return 0;
	rc_scratch_free(s);
	return -1;
}

void rc_scratch_free(struct rc_scratch *s)
{
	xfree(s->made);
	xfree(s->stack);
	xfree(s->times);
	xfree(s->walked);
	xfree(s->steps);
	memset(s, 0, sizeof *s);
}

uint32_t recompute_schedule_in(const struct flat *f, const uint8_t *keep, struct rc_scratch *r)
{
	struct sch s = {.f = f, .keep = keep, .r = r};
	memset(r->made, 0, f->n_values);
	memset(r->times, 0, sizeof *r->times * f->n_nodes);
	for (uint32_t i = 0; i < f->n_nodes && !s.oom; i++) {
		if (f->nflags[i] & FLAT_BACKWARD)
			for (uint32_t k = f->in_off[i]; k < f->in_off[i + 1]; k++)
				if (rc_dropped(f, keep, f->in[k]) && !r->made[f->in[k]])
					recompute(&s, f->in[k]);
		add_step(&s, i, 0);
	}
	return s.oom || s.n == UINT32_MAX ? UINT32_MAX : s.n;
}

bool rc_any_dropped(const struct flat *f, const uint8_t *keep)
{
	for (uint32_t i = 0; i < f->n_nodes; i++)
		for (uint32_t k = f->in_off[i]; (f->nflags[i] & FLAT_BACKWARD) && k < f->in_off[i + 1]; k++)
			if (rc_dropped(f, keep, f->in[k]))
				return true;
	return false;
}

int recompute_schedule(const struct flat *f, const uint8_t *keep, struct rc_step **steps, uint32_t *n_steps,
		       struct gd_err *e)
{
	struct rc_scratch s;
	if (rc_scratch_init(&s, f))
		return err_oom(e);
	*n_steps = recompute_schedule_in(f, keep, &s);
	if (*n_steps == UINT32_MAX) {
		rc_scratch_free(&s);
		return err_oom(e);
	}
	*steps = s.steps;
	s.steps = NULL;
	rc_scratch_free(&s);
	return 0;
}

const char *rc_clone_name(const struct node *p, uint32_t k, char *buf, size_t n)
{
	char nth[16] = "";
	if (k > 1)
		snprintf(nth, sizeof nth, "%" PRIu32, k);
	JOIN(buf, n, node_base_name(p), RECOMPUTE_SUFFIX, nth);
	return buf;
}

/* The clone of p, whose inputs that need recomputing have their clones already. */
static struct node *clone_node(struct graph *g, const struct flat *f, const uint8_t *keep, struct exec *shapes,
			       struct value **clone, const struct node *p, uint32_t nth, struct node *after,
			       struct gd_err *e)
{
	struct node *c = graph_add_node(g, e);
	if (!c)
		return NULL;
	*c = *p; /* appended past the original nodes for now; the schedule has its place */
	c->tags = TAG_RECOMPUTE;
	c->ctrl = NULL;
	c->n_ctrl = 0;
	struct node_ext x = *node_ext(p);
	x.meta = NULL;
	x.n_meta = 0;
	char buf[600];
	c->name = arena_strdup(g->arena, rc_clone_name(p, nth, buf, sizeof buf));
	if (p->name && *p->name)
		JOIN(buf, sizeof buf, "recompute of ", p->name);
	else
		JOIN(buf, sizeof buf, "recompute of the ", p->op_type, " making '", node_base_name(p), "'");
	x.doc = arena_strdup(g->arena, buf);
	c->in = arena_array(g->arena, (size_t)p->n_in + p->n_out + 1, sizeof *c->in);
	if (!c->name || !x.doc || !c->in || node_set_ext(g, c, &x)) {
		err_oom(e);
		return NULL;
	}
	c->out = c->in + p->n_in;
	int reads_clone = 0;
	for (uint32_t k = 0; k < p->n_in; k++) {
		struct value *u = p->in[k];
		if (u && rc_dropped(f, keep, u->id)) {
			u = clone[u->id];
			reads_clone = 1;
		}
		c->in[k] = u;
	}
	for (uint32_t k = 0; k < p->n_out; k++) {
		struct value *o = p->out[k];
		c->out[k] = NULL;
		if (!o)
			continue;
		JOIN(buf, sizeof buf, o->name, RECOMPUTE_SUFFIX);
		struct value *nv = graph_new_value(g, buf, e);
		if (!nv || graph_set_output_value(c, k, nv, e))
			return NULL;
		nv->type = o->type;
		clone[o->id] = nv;
		if (shapes && exec_alias(shapes, nv, o)) {
			err_oom(e);
			return NULL;
		}
	}
	if (!reads_clone && after) {
		c->ctrl = arena_array(g->arena, 1, sizeof *c->ctrl);
		if (!c->ctrl) {
			err_oom(e);
			return NULL;
		}
		c->ctrl[0] = after;
		c->n_ctrl = 1;
	}
	return c;
}

int recompute_apply(struct graph *g, const struct flat *f, const uint8_t *keep, const struct rc_step *steps,
		    uint32_t n_steps, struct exec *shapes, struct recompute_stats *st, struct gd_err *e)
{
	memset(st, 0, sizeof *st);
	struct value **clone = xcalloc(g->n_values ? g->n_values : 1, sizeof *clone);
	struct node **order = xmalloc(sizeof *order * (n_steps + 1));
	if (!clone || !order) {
		xfree(clone);
		xfree(order);
		return err_oom(e);
	}
	struct node *after = NULL; /* the backward node scheduled before the current step */
	int rc = 0;
	for (uint32_t i = 0; i < n_steps && !rc; i++) {
		struct node *n = g->nodes[steps[i].node];
		if (steps[i].clone) {
			if (!(n = clone_node(g, f, keep, shapes, clone, n, steps[i].clone, after, e)))
				rc = e->code;
			else
				st->n_clones++;
		} else if (n->tags & TAG_BACKWARD) {
			for (uint32_t k = 0; k < n->n_in; k++)
				if (n->in[k] && rc_dropped(f, keep, n->in[k]->id))
					n->in[k] = clone[n->in[k]->id];
			after = n;
		}
		if (n) {
			n->index = i;
			order[i] = n;
		}
	}
	if (!rc) /* the clones sit past the original nodes: n_nodes is the new total */
		memcpy(g->nodes, order, sizeof *g->nodes * n_steps);
	xfree(clone);
	xfree(order);
	return rc;
}

int recompute_rewrite(struct graph *g, const uint8_t *keep, struct exec *shapes, struct recompute_stats *st,
		      struct gd_err *e)
{
	struct rc_step *steps = NULL;
	uint32_t n_steps = 0;
	struct flat f;
	if (flat_build(g, &f))
		return err_oom(e);
	if (!rc_any_dropped(&f, keep)) { /* nothing to recompute: g stays as it is */
		memset(st, 0, sizeof *st);
		flat_free(&f);
		return 0;
	}
	int rc = recompute_schedule(&f, keep, &steps, &n_steps, e) ||
			 recompute_apply(g, &f, keep, steps, n_steps, shapes, st, e)
		     ? e->code
		     : 0;
	flat_free(&f);
	xfree(steps);
	return rc;
}
