/* memsim.c - the memory model; see memsim.h. O(values + node inputs). */
#include "memsim.h"
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

int memsim(const struct graph *g, const struct exec *shapes, struct mem_result *r, struct gd_err *e)
{
	memset(r, 0, sizeof *r);
	uint32_t *left = xcalloc(g->n_values ? g->n_values : 1, sizeof *left);
	uint8_t *pinned = xcalloc(g->n_values ? g->n_values : 1, 1);
	r->live = xcalloc(g->n_nodes ? g->n_nodes : 1, sizeof *r->live);
	if (!left || !pinned || !r->live) {
		xfree(left);
		xfree(pinned);
		memsim_free(r);
		return err_oom(e);
	}
	r->n_live = g->n_nodes;
	uint64_t cat[3] = {0, 0, 0};
#define BYTES(v) ((uint64_t)exec_value(shapes, (v))->nbytes)
	for (uint32_t i = 0; i < g->n_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
			if (g->nodes[i]->in[k])
				left[g->nodes[i]->in[k]->id]++;
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
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
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
			if (v && !pinned[v->id] && left[v->id] == 0) { /* nobody reads it */
				live -= BYTES(v);
				cat[category(v)] -= BYTES(v);
			}
		}
		for (uint32_t k = 0; k < n->n_in; k++) {
			const struct value *v = n->in[k];
			if (!v || left[v->id] == 0)
				continue;
			if (--left[v->id] == 0 && !pinned[v->id]) {
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

void memsim_free(struct mem_result *r)
{
	xfree(r->live);
	r->live = NULL;
}
