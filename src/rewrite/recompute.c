/* recompute.c - see recompute.h. */
#include "recompute.h"
#include "../util/xalloc.h"

#include <stdio.h>
#include <string.h>

struct rc {
	struct graph *g;
	const uint8_t *keep;
	struct value **clone;  /* value id -> its recomputed value */
	struct value **stack;  /* for recomputed()'s walk */
	struct node **order;   /* the new schedule */
	uint32_t n_order;
	struct node *after;    /* the backward node scheduled before the current one */
	uint32_t n_clones;
	struct gd_err *e;
};

static int is_fwd_activation(const struct rc *r, const struct value *v)
{
	return value_is_activation(v) && !r->keep[v->id] && !(v->flags & VALUE_OUTPUT);
}

/* The clone of p, whose inputs that need recomputing have their clones already. */
static int clone_node(struct rc *r, const struct node *p)
{
	struct graph *g = r->g;
	struct node *c = graph_add_node(g, r->e);
	if (!c)
		return r->e->code;
	*c = *p; /* appended past the original nodes for now; r->order has its place */
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
	if (!c->name || !c->doc || !c->in)
		return err_oom(r->e);
	c->out = c->in + p->n_in;
	int reads_clone = 0;
	for (uint32_t k = 0; k < p->n_in; k++) {
		struct value *u = p->in[k];
		if (is_fwd_activation(r, u)) {
			u = r->clone[u->id];
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
		const char *nm = graph_fresh_name(g, buf, r->e);
		struct value *nv = nm ? graph_value(g, nm, r->e) : NULL;
		if (!nv || graph_set_output_value(c, k, nv, r->e))
			return r->e->code;
		nv->type = o->type;
		r->clone[o->id] = nv;
	}
	if (!reads_clone && r->after) {
		c->ctrl = arena_array(g->arena, 1, sizeof *c->ctrl);
		if (!c->ctrl)
			return err_oom(r->e);
		c->ctrl[0] = r->after;
		c->n_ctrl = 1;
	}
	c->index = r->n_order;
	r->order[r->n_order++] = c;
	r->n_clones++;
	return 0;
}

/* The recomputed form of forward activation v: its producer's clone, made after those of its
 * inputs that need recomputing (a depth-first walk with an explicit stack, so a long run of
 * dropped values cannot overflow the C stack). */
static struct value *recomputed(struct rc *r, struct value *v)
{
	uint32_t top = 0;
	r->stack[top++] = v;
	while (top && !r->clone[v->id]) {
		struct value *u = r->stack[top - 1];
		if (r->clone[u->id]) {
			top--;
			continue;
		}
		const struct node *p = u->producer;
		struct value *missing = NULL;
		for (uint32_t k = 0; k < p->n_in && !missing; k++)
			if (is_fwd_activation(r, p->in[k]) && !r->clone[p->in[k]->id])
				missing = p->in[k];
		if (missing) {
			r->stack[top++] = missing;
		} else {
			if (clone_node(r, p))
				return NULL;
			top--;
		}
	}
	return r->clone[v->id];
}

int recompute_rewrite(struct graph *g, const uint8_t *keep, struct recompute_stats *st, struct gd_err *e)
{
	memset(st, 0, sizeof *st);
	uint32_t n0 = g->n_nodes;
	struct rc r = {.g = g, .keep = keep, .e = e};
	r.clone = xcalloc(g->n_values ? g->n_values : 1, sizeof *r.clone);
	r.order = xmalloc(sizeof *r.order * (2 * (size_t)n0 + 1));
	r.stack = xmalloc(sizeof *r.stack * (n0 + 1));
	if (!r.clone || !r.order || !r.stack) {
		xfree(r.clone);
		xfree(r.order);
		xfree(r.stack);
		return err_oom(e);
	}
	int rc = 0;
	for (uint32_t i = 0; i < n0 && !rc; i++) {
		struct node *n = g->nodes[i];
		if (n->tags & TAG_BACKWARD) {
			for (uint32_t k = 0; k < n->n_in && !rc; k++)
				if (is_fwd_activation(&r, n->in[k])) {
					struct value *c = recomputed(&r, n->in[k]);
					if (c)
						n->in[k] = c;
					else
						rc = e->code;
				}
			r.after = n;
		}
		n->index = r.n_order;
		r.order[r.n_order++] = n;
	}
	if (!rc) { /* the clones sit past the original nodes: n_nodes is the new total */
		memcpy(g->nodes, r.order, sizeof *g->nodes * r.n_order);
		st->n_clones = r.n_clones;
	}
	xfree(r.clone);
	xfree(r.order);
	xfree(r.stack);
	return rc;
}
