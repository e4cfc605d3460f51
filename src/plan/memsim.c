/* memsim.c - the memory model; see memsim.h. O(values + node inputs). */
#include "memsim.h"
#include "../ops/ops.h"
#include "../util/xalloc.h"

#include <string.h>

enum cat { CAT_PARAM, CAT_GRAD, CAT_ACT };

static enum cat category(const struct value *v)
{
	if (v->init)
		return CAT_PARAM;
	if (v->producer && (v->producer->tags & TAG_BACKWARD))
		return CAT_GRAD;
	return CAT_ACT;
}

/* Value ids: v->id for a value of g, n_values + v->id for its recomputed copy. */
static uint32_t in_id(const struct graph *g, const uint8_t *keep, const struct rc_step *s, uint32_t k)
{
	return s->n->in[k]->id + (rc_reads_copy(keep, s, k) ? g->n_values : 0);
}

int memsim_schedule(const struct graph *g, const struct exec *shapes, const uint8_t *keep, const struct rc_step *steps,
		    uint32_t n_steps, struct mem_result *r, struct gd_err *e)
{
	memset(r, 0, sizeof *r);
	size_t nv = 2 * (size_t)g->n_values + 1;
	uint32_t *left = xcalloc(nv, sizeof *left);
	uint8_t *pinned = xcalloc(nv, 1);
	r->live = xcalloc(n_steps ? n_steps : 1, sizeof *r->live);
	if (!left || !pinned || !r->live) {
		xfree(left);
		xfree(pinned);
		memsim_free(r);
		return err_oom(e);
	}
	r->n_live = n_steps;
	uint64_t cat[3] = {0, 0, 0};
#define BYTES(v) ((uint64_t)exec_value(shapes, (v))->nbytes)
	for (uint32_t i = 0; i < n_steps; i++)
		for (uint32_t k = 0; k < steps[i].n->n_in; k++)
			if (steps[i].n->in[k])
				left[in_id(g, keep, &steps[i], k)]++;
	for (uint32_t i = 0; i < g->n_outputs; i++)
		pinned[g->outputs[i]->id] = 1;
	for (uint32_t i = 0; i < g->n_inits; i++) {
		pinned[g->inits[i]->id] = 1;
		cat[CAT_PARAM] += BYTES(g->inits[i]);
	}
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		pinned[g->inputs[i]->id] = 1;
		if (!g->inputs[i]->init)
			cat[CAT_ACT] += BYTES(g->inputs[i]);
	}
	uint64_t live = cat[0] + cat[1] + cat[2];
	r->peak = live;
	r->peak_node = -1;
	r->at_peak = (struct mem_breakdown){cat[CAT_PARAM], 0, cat[CAT_GRAD], cat[CAT_ACT]};
	for (uint32_t i = 0; i < n_steps; i++) {
		const struct node *n = steps[i].n;
		uint32_t shift = steps[i].clone ? g->n_values : 0;
		/* a recomputed copy counts as the activation it copies */
		for (uint32_t k = 0; k < n->n_out; k++)
			if (n->out[k]) {
				live += BYTES(n->out[k]);
				cat[category(n->out[k])] += BYTES(n->out[k]);
			}
		r->live[i] = live;
		if (live > r->peak) {
			r->peak = live;
			r->peak_node = i;
			r->at_peak = (struct mem_breakdown){cat[CAT_PARAM], 0, cat[CAT_GRAD], cat[CAT_ACT]};
		}
		for (uint32_t k = 0; k < n->n_out; k++) {
			const struct value *v = n->out[k];
			if (v && !pinned[v->id + shift] && left[v->id + shift] == 0) { /* nobody reads it */
				live -= BYTES(v);
				cat[category(v)] -= BYTES(v);
			}
		}
		for (uint32_t k = 0; k < n->n_in; k++) {
			const struct value *v = n->in[k];
			if (!v)
				continue;
			uint32_t id = in_id(g, keep, &steps[i], k);
			if (left[id] == 0)
				continue;
			if (--left[id] == 0 && !pinned[id]) {
				live -= BYTES(v);
				cat[category(v)] -= BYTES(v);
			}
		}
	}
#undef BYTES
	xfree(left);
	xfree(pinned);
	return 0;
}

int memsim(const struct graph *g, const struct exec *shapes, struct mem_result *r, struct gd_err *e)
{
	struct rc_step *steps = xmalloc(sizeof *steps * (g->n_nodes + 1));
	if (!steps)
		return err_oom(e);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		steps[i] = (struct rc_step){g->nodes[i], 0};
	int rc = memsim_schedule(g, shapes, NULL, steps, g->n_nodes, r, e);
	xfree(steps);
	return rc;
}

void memsim_free(struct mem_result *r)
{
	xfree(r->live);
	r->live = NULL;
}

uint64_t node_flops(const struct node *n, const struct exec *shapes)
{
	struct rtensor *in[64], *out[64];
	static struct rtensor none;
	if (n->n_in > 64 || n->n_out > 64)
		return 0;
	for (uint32_t k = 0; k < n->n_in; k++)
		in[k] = n->in[k] ? (struct rtensor *)exec_value(shapes, n->in[k]) : &none;
	for (uint32_t k = 0; k < n->n_out; k++)
		out[k] = n->out[k] ? (struct rtensor *)exec_value(shapes, n->out[k]) : &none;
	uint64_t f, b;
	op_cost(n, in, out, &f, &b);
	return f;
}
