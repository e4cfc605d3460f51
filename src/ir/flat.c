/* flat.c - see flat.h. */
#include "flat.h"
#include "../util/xalloc.h"

#include <string.h>

int flat_build(const struct graph *g, struct flat *f)
{
	memset(f, 0, sizeof *f);
	size_t n_in = 0, n_out = 0, nv = g->n_values ? g->n_values : 1;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		n_in += g->nodes[i]->n_in;
		n_out += g->nodes[i]->n_out;
	}
	f->n_nodes = g->n_nodes;
	f->n_values = g->n_values;
	f->in_off = xmalloc(sizeof *f->in_off * ((size_t)g->n_nodes + 1));
	f->out_off = xmalloc(sizeof *f->out_off * ((size_t)g->n_nodes + 1));
	f->in = xmalloc(sizeof *f->in * (n_in ? n_in : 1));
	f->out = xmalloc(sizeof *f->out * (n_out ? n_out : 1));
	f->nflags = xcalloc(g->n_nodes ? g->n_nodes : 1, 1);
	f->vflags = xcalloc(nv, 1);
	f->producer = xmalloc(sizeof *f->producer * nv);
	if (!f->in_off || !f->out_off || !f->in || !f->out || !f->nflags || !f->vflags || !f->producer) {
		flat_free(f);
		return -1;
	}
	for (uint32_t v = 0; v < g->n_values; v++) {
		const struct value *val = g->values[v];
		f->producer[v] = FLAT_NONE;
		f->vflags[v] = (uint8_t)((value_is_activation(val) ? FLAT_ACTIVATION : 0) |
					 (value_is_activation(val) && !(val->flags & VALUE_OUTPUT) ? FLAT_DROPPABLE : 0) |
					 (val->init ? FLAT_PINNED : 0) |
					 (val->flags & VALUE_STATE ? FLAT_STATE : val->init ? FLAT_PARAM : 0) |
					 (val->producer && (val->producer->tags & TAG_BACKWARD) ? FLAT_GRAD : 0) |
					 (val->flags & VALUE_PARAM_GRAD ? FLAT_PARAM_GRAD : 0));
	}
	for (uint32_t i = 0; i < g->n_inputs; i++)
		f->vflags[g->inputs[i]->id] |= FLAT_PINNED;
	/* a state's next value (update_binding) counts as the state does */
	for (size_t t = 0; g->model && t < g->model->n_ti; t++)
		for (size_t k = 0; k < g->model->ti[t].n_update_bind; k++) {
			const struct kv *b = &g->model->ti[t].update_bind[k];
			const struct value *key = strmap_get(&g->names, b->key), *next = strmap_get(&g->names, b->value);
			if (key && next && next->id < nv)
				f->vflags[next->id] = (uint8_t)((f->vflags[next->id] & ~FLAT_GRAD) |
								(f->vflags[key->id] & (FLAT_STATE | FLAT_PARAM)));
		}
	flat_unpin_state(g, f->vflags, FLAT_PINNED);
	for (uint32_t i = 0; i < g->n_outputs; i++)
		f->vflags[g->outputs[i]->id] |= FLAT_PINNED;
	/* what backward nodes make from parameter gradients alone is one too */
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		int pg = 0, other = 0;
		for (uint32_t k = 0; (n->tags & TAG_BACKWARD) && k < n->n_in; k++)
			if (n->in[k]) {
				pg |= f->vflags[n->in[k]->id] & FLAT_PARAM_GRAD;
				other |= (f->vflags[n->in[k]->id] & (FLAT_GRAD | FLAT_PARAM_GRAD)) == FLAT_GRAD;
			}
		for (uint32_t k = 0; pg && !other && k < n->n_out; k++)
			if (n->out[k] && !(f->vflags[n->out[k]->id] & (FLAT_STATE | FLAT_PARAM)))
				f->vflags[n->out[k]->id] |= FLAT_PARAM_GRAD;
		/* and state is what they make from state and constants alone (a moment times beta,
		 * written over the moment: still the optimizer's state) */
		int st = 0, rest = 0;
		for (uint32_t k = 0; (n->tags & TAG_BACKWARD) && k < n->n_in; k++)
			if (n->in[k]) {
				const struct node *c = n->in[k]->producer;
				st |= (f->vflags[n->in[k]->id] & FLAT_STATE) != 0;
				rest |= !(f->vflags[n->in[k]->id] & FLAT_STATE) && !(c && c->op == OP_CONSTANT) &&
					!(n->in[k]->flags & VALUE_CONST);
			}
		for (uint32_t k = 0; st && !rest && k < n->n_out; k++)
			if (n->out[k] && !(f->vflags[n->out[k]->id] & FLAT_PARAM))
				f->vflags[n->out[k]->id] |= FLAT_STATE;
	}
	uint32_t a = 0, b = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		int t = op_taken_input(op_table[n->op].flags, n->n_in);
		f->nflags[i] = (uint8_t)(((n->tags & TAG_BACKWARD) ? FLAT_BACKWARD : 0) | (node_is_forward(n) ? FLAT_FORWARD : 0) |
					 (t >= 0 ? FLAT_TAKES : 0) | (t > 0 ? FLAT_TAKES_LAST : 0) |
					 (op_table[n->op].flags & OPF_REUSES && n->n_out ? FLAT_REUSES : 0));
		int fixed = node_is_forward(n) && n->op != OP_UNKNOWN &&
			    !(op_table[n->op].flags & (OPF_RANDOM | OPF_SUBGRAPH | OPF_AMP_LOW));
		for (uint32_t k = 0; fixed && k < n->n_in; k++) /* g is sorted: inputs are flagged already */
			fixed = !n->in[k] || (n->in[k]->init && !(n->in[k]->flags & VALUE_STATE)) ||
				(n->in[k]->flags & VALUE_CONST) || (f->vflags[n->in[k]->id] & FLAT_FIXED);
		f->in_off[i] = a;
		f->out_off[i] = b;
		for (uint32_t k = 0; k < n->n_in; k++)
			f->in[a++] = n->in[k] ? n->in[k]->id : FLAT_NONE;
		for (uint32_t k = 0; k < n->n_out; k++) {
			f->out[b++] = n->out[k] ? n->out[k]->id : FLAT_NONE;
			if (n->out[k])
				f->producer[n->out[k]->id] = i;
			if (n->out[k] && fixed && (f->vflags[n->out[k]->id] & FLAT_DROPPABLE))
				f->vflags[n->out[k]->id] |= FLAT_FIXED;
		}
	}
	f->in_off[g->n_nodes] = a;
	f->out_off[g->n_nodes] = b;
	return 0;
}

void flat_unpin_state(const struct graph *g, uint8_t *pinned, uint8_t bit)
{
	for (size_t t = 0; g->model && t < g->model->n_ti; t++)
		for (size_t k = 0; k < g->model->ti[t].n_update_bind; k++) {
			const struct value *key = strmap_get(&g->names, g->model->ti[t].update_bind[k].key);
			if (key && key->id < g->n_values && !(key->flags & VALUE_OUTPUT))
				pinned[key->id] &= (uint8_t)~bit;
		}
}

void flat_free(struct flat *f)
{
	xfree(f->in_off);
	xfree(f->out_off);
	xfree(f->in);
	xfree(f->out);
	xfree(f->nflags);
	xfree(f->vflags);
	xfree(f->producer);
	memset(f, 0, sizeof *f);
}
