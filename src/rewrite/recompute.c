/* recompute.c - see recompute.h. */
#include "recompute.h"
#include "../exec/exec.h"
#include "../util/join.h"
#include "../util/xalloc.h"

#include <stdio.h>
#include <string.h>

/* The schedule: g's nodes in order, with the clones each backward node needs first. */
struct sch {
	const struct flat *f;
	const uint8_t *keep;
	uint8_t *made;  /* value id -> its recompute is scheduled */
	uint32_t *stack;
	struct rc_step *steps;
	uint32_t n;
};

/* Schedules the recompute of dropped value v after those of its producer's dropped inputs (a
 * depth-first walk with an explicit stack, so a long run of dropped values cannot overflow the C
 * stack). */
static void recompute(struct sch *s, uint32_t v)
{
	const struct flat *f = s->f;
	uint32_t top = 0;
	s->stack[top++] = v;
	while (top) {
		uint32_t u = s->stack[top - 1];
		if (s->made[u]) {
			top--;
			continue;
		}
		uint32_t p = f->producer[u], missing = FLAT_NONE;
		for (uint32_t k = f->in_off[p]; k < f->in_off[p + 1] && missing == FLAT_NONE; k++)
			if (rc_dropped(f, s->keep, f->in[k]) && !s->made[f->in[k]])
				missing = f->in[k];
		if (missing != FLAT_NONE) {
			s->stack[top++] = missing;
			continue;
		}
		for (uint32_t k = f->out_off[p]; k < f->out_off[p + 1]; k++)
			if (f->out[k] != FLAT_NONE)
				s->made[f->out[k]] = 1;
		s->steps[s->n++] = (struct rc_step){p, 1};
		top--;
	}
}

int rc_scratch_init(struct rc_scratch *s, const struct flat *f)
{
	s->made = xmalloc(f->n_values ? f->n_values : 1);
	s->stack = xmalloc(sizeof *s->stack * (f->n_values + 1));
	s->steps = xmalloc(sizeof *s->steps * (2 * (size_t)f->n_nodes + 1));
	if (s->made && s->stack && s->steps)
		return 0;
	rc_scratch_free(s);
	return -1;
}

void rc_scratch_free(struct rc_scratch *s)
{
	xfree(s->made);
	xfree(s->stack);
	xfree(s->steps);
	memset(s, 0, sizeof *s);
}

uint32_t recompute_schedule_in(const struct flat *f, const uint8_t *keep, struct rc_scratch *r)
{
	struct sch s = {.f = f, .keep = keep, .made = r->made, .stack = r->stack, .steps = r->steps};
	memset(s.made, 0, f->n_values);
	for (uint32_t i = 0; i < f->n_nodes; i++) {
		if (f->nflags[i] & FLAT_BACKWARD)
			for (uint32_t k = f->in_off[i]; k < f->in_off[i + 1]; k++)
				if (rc_dropped(f, keep, f->in[k]) && !s.made[f->in[k]])
					recompute(&s, f->in[k]);
		s.steps[s.n++] = (struct rc_step){i, 0};
	}
	return s.n;
}

int recompute_schedule(const struct flat *f, const uint8_t *keep, struct rc_step **steps, uint32_t *n_steps,
		       struct gd_err *e)
{
	struct rc_scratch s;
	if (rc_scratch_init(&s, f))
		return err_oom(e);
	*n_steps = recompute_schedule_in(f, keep, &s);
	*steps = s.steps;
	s.steps = NULL;
	rc_scratch_free(&s);
	return 0;
}

const char *rc_clone_name(const struct node *p, char *buf, size_t n)
{
	JOIN(buf, n, node_base_name(p), RECOMPUTE_SUFFIX);
	return buf;
}

/* The clone of p, whose inputs that need recomputing have their clones already. */
static struct node *clone_node(struct graph *g, const struct flat *f, const uint8_t *keep, struct exec *shapes,
			       struct value **clone, const struct node *p, struct node *after, struct gd_err *e)
{
	struct node *c = graph_add_node(g, e);
	if (!c)
		return NULL;
	*c = *p; /* appended past the original nodes for now; the schedule has its place */
	c->tags = TAG_RECOMPUTE;
	c->ctrl = NULL;
	c->n_ctrl = 0;
	c->meta = NULL;
	c->n_meta = 0;
	char buf[600];
	c->name = arena_strdup(g->arena, rc_clone_name(p, buf, sizeof buf));
	if (p->name && *p->name)
		JOIN(buf, sizeof buf, "recompute of ", p->name);
	else
		JOIN(buf, sizeof buf, "recompute of the ", p->op_type, " making '", node_base_name(p), "'");
	c->doc = arena_strdup(g->arena, buf);
	c->in = arena_array(g->arena, (size_t)p->n_in + p->n_out + 1, sizeof *c->in);
	if (!c->name || !c->doc || !c->in) {
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
			if (!(n = clone_node(g, f, keep, shapes, clone, n, after, e)))
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
	int rc = recompute_schedule(&f, keep, &steps, &n_steps, e) ||
			 recompute_apply(g, &f, keep, steps, n_steps, shapes, st, e)
		     ? e->code
		     : 0;
	flat_free(&f);
	xfree(steps);
	return rc;
}
