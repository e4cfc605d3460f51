/* recompute.c - see recompute.h. */
#include "recompute.h"
#include "../util/xalloc.h"

#include <stdio.h>
#include <string.h>

/* The schedule: g's nodes in order, with the clones each backward node needs first. */
struct sch {
	const uint8_t *keep;
	uint8_t *made;             /* value id -> its recompute is scheduled */
	const struct value **stack;
	struct rc_step *steps;
	uint32_t n;
};

/* Schedules the recompute of dropped value v after those of its producer's dropped inputs (a
 * depth-first walk with an explicit stack, so a long run of dropped values cannot overflow the C
 * stack). */
static void recompute(struct sch *s, const struct value *v)
{
	uint32_t top = 0;
	s->stack[top++] = v;
	while (top) {
		const struct value *u = s->stack[top - 1];
		if (s->made[u->id]) {
			top--;
			continue;
		}
		const struct node *p = u->producer;
		const struct value *missing = NULL;
		for (uint32_t k = 0; k < p->n_in && !missing; k++)
			if (rc_dropped(s->keep, p->in[k]) && !s->made[p->in[k]->id])
				missing = p->in[k];
		if (missing) {
			s->stack[top++] = missing;
			continue;
		}
		for (uint32_t k = 0; k < p->n_out; k++)
			if (p->out[k])
				s->made[p->out[k]->id] = 1;
		s->steps[s->n++] = (struct rc_step){p, 1};
		top--;
	}
}

int recompute_schedule(const struct graph *g, const uint8_t *keep, struct rc_step **steps, uint32_t *n_steps,
		       struct gd_err *e)
{
	struct sch s = {.keep = keep};
	s.made = xcalloc(g->n_values ? g->n_values : 1, 1);
	s.stack = xmalloc(sizeof *s.stack * (g->n_values + 1));
	s.steps = xmalloc(sizeof *s.steps * (2 * (size_t)g->n_nodes + 1));
	if (!s.made || !s.stack || !s.steps) {
		xfree(s.made);
		xfree(s.stack);
		xfree(s.steps);
		return err_oom(e);
	}
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		if (n->tags & TAG_BACKWARD)
			for (uint32_t k = 0; k < n->n_in; k++)
				if (rc_dropped(keep, n->in[k]) && !s.made[n->in[k]->id])
					recompute(&s, n->in[k]);
		s.steps[s.n++] = (struct rc_step){n, 0};
	}
	xfree(s.made);
	xfree(s.stack);
	*steps = s.steps;
	*n_steps = s.n;
	return 0;
}

/* The clone of p, whose inputs that need recomputing have their clones already. */
static struct node *clone_node(struct graph *g, const uint8_t *keep, struct value **clone, const struct node *p,
			       struct node *after, struct gd_err *e)
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
	snprintf(buf, sizeof buf, "%s_recompute", p->name ? p->name : "node");
	c->name = arena_strdup(g->arena, buf);
	snprintf(buf, sizeof buf, "recompute of %s", p->name ? p->name : "an unnamed node");
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
		if (rc_dropped(keep, u)) {
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
		snprintf(buf, sizeof buf, "%s_recompute", o->name);
		const char *nm = graph_fresh_name(g, buf, e);
		struct value *nv = nm ? graph_value(g, nm, e) : NULL;
		if (!nv || graph_set_output_value(c, k, nv, e))
			return NULL;
		nv->type = o->type;
		clone[o->id] = nv;
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

int recompute_rewrite(struct graph *g, const uint8_t *keep, struct recompute_stats *st, struct gd_err *e)
{
	memset(st, 0, sizeof *st);
	struct rc_step *steps;
	uint32_t n_steps;
	if (recompute_schedule(g, keep, &steps, &n_steps, e))
		return e->code;
	struct value **clone = xcalloc(g->n_values ? g->n_values : 1, sizeof *clone);
	struct node **order = xmalloc(sizeof *order * (n_steps + 1));
	if (!clone || !order) {
		xfree(steps);
		xfree(clone);
		xfree(order);
		return err_oom(e);
	}
	struct node *after = NULL; /* the backward node scheduled before the current step */
	int rc = 0;
	for (uint32_t i = 0; i < n_steps && !rc; i++) {
		struct node *n = (struct node *)steps[i].n;
		if (steps[i].clone) {
			if (!(n = clone_node(g, keep, clone, n, after, e)))
				rc = e->code;
			else
				st->n_clones++;
		} else if (n->tags & TAG_BACKWARD) {
			for (uint32_t k = 0; k < n->n_in; k++)
				if (rc_dropped(keep, n->in[k]))
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
	xfree(steps);
	xfree(clone);
	xfree(order);
	return rc;
}
