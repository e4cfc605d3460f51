/* bottleneck.c - see bottleneck.h. */
#include "bottleneck.h"
#include "../util/xalloc.h"

#include <string.h>

/* A node whose subgraphs may read enclosing values: treated as reading every earlier value. */
static int has_subgraph(const struct node *n)
{
	for (uint32_t k = 0; k < n->n_attr; k++)
		if (n->attr[k].type == ATTR_GRAPH || n->attr[k].type == ATTR_GRAPHS)
			return 1;
	return 0;
}

enum { NONE = UINT32_MAX };

struct sweep {
	uint32_t *pos;   /* vertex -> position; NONE off every input-to-loss path */
	uint32_t *reach; /* position -> furthest position an edge from it enters */
	uint32_t *from, *to; /* position -> that edge, as vertices */
};

static void edge(struct sweep *s, uint32_t a, uint32_t b)
{
	uint32_t pa = s->pos[a], pb = s->pos[b];
	if (pa == NONE || pb == NONE || s->reach[pa] >= pb)
		return;
	s->reach[pa] = pb;
	s->from[pa] = a;
	s->to[pa] = b;
}

int find_bottlenecks(struct graph *g, const struct value *loss, struct bottlenecks *b, struct gd_err *e)
{
	memset(b, 0, sizeof *b);
	const uint32_t nv = g->n_values, nn = g->n_nodes, src = nv + nn, nvert = nv + nn + 1;
	uint8_t *fwd = xcalloc(nvert, 1), *bwd = xcalloc(nvert, 1);
	struct sweep s = {xmalloc(sizeof *s.pos * nvert), xcalloc(nvert, sizeof *s.reach), xmalloc(sizeof *s.from * nvert),
			  xmalloc(sizeof *s.to * nvert)};
	uint32_t *vert = xmalloc(sizeof *vert * nvert);
	uint32_t *fw = xmalloc(sizeof *fw * (nn ? nn : 1)), nf = 0; /* the forward nodes, walked four times */
	size_t nout = 1; /* the candidates are among their outputs */
	for (uint32_t i = 0; fw && i < nn; i++)
		if (node_is_forward(g->nodes[i])) {
			fw[nf++] = i;
			nout += g->nodes[i]->n_out;
		}
	b->cand = arena_alloc(g->arena, nout * sizeof *b->cand);
	b->why = arena_alloc(g->arena, nout * sizeof *b->why);
	b->v = arena_alloc(g->arena, nout * sizeof *b->v);
	int rc = 0;
	if (!fwd || !bwd || !s.pos || !s.reach || !s.from || !s.to || !vert || !fw || !b->cand || !b->why || !b->v) {
		rc = err_oom(e);
		goto out;
	}
	/* on a path from an input, and on a path to the loss */
	fwd[src] = bwd[src] = 1;
	for (uint32_t i = 0; i < g->n_inputs; i++)
		if (!g->inputs[i]->init)
			fwd[g->inputs[i]->id] = 1;
	for (uint32_t j = 0; j < nf; j++) {
		const uint32_t i = fw[j];
		const struct node *n = g->nodes[i];
		int on = has_subgraph(n);
		for (uint32_t k = 0; k < n->n_in && !on; k++)
			on = n->in[k] && fwd[n->in[k]->id];
		fwd[nv + i] = (uint8_t)on;
		for (uint32_t k = 0; k < n->n_out; k++)
			if (n->out[k] && on)
				fwd[n->out[k]->id] = 1;
	}
	bwd[loss->id] = 1;
	for (uint32_t j = nf; j-- > 0;) {
		const uint32_t i = fw[j];
		const struct node *n = g->nodes[i];
		for (uint32_t k = 0; k < n->n_out && !bwd[nv + i]; k++)
			bwd[nv + i] = n->out[k] && bwd[n->out[k]->id];
		for (uint32_t k = 0; k < n->n_in && bwd[nv + i]; k++)
			if (n->in[k])
				bwd[n->in[k]->id] = 1;
	}
	/* positions: the source, the inputs, then each node followed by its outputs */
	uint32_t np = 0;
	for (uint32_t v = 0; v < nvert; v++)
		s.pos[v] = NONE;
#define PLACE(x)                                                                                                       \
	do {                                                                                                           \
		uint32_t x_ = (x);                                                                                     \
		if (fwd[x_] && bwd[x_] && s.pos[x_] == NONE) {                                                         \
			s.pos[x_] = np;                                                                                \
			vert[np++] = x_;                                                                               \
		}                                                                                                      \
	} while (0)
	PLACE(src);
	for (uint32_t i = 0; i < g->n_inputs; i++)
		PLACE(g->inputs[i]->id);
	for (uint32_t j = 0; j < nf; j++) {
		const uint32_t i = fw[j];
		const struct node *n = g->nodes[i];
		PLACE(nv + i);
		for (uint32_t k = 0; k < n->n_out; k++)
			if (n->out[k])
				PLACE(n->out[k]->id);
	}
#undef PLACE
	/* the edges */
	for (uint32_t j = 0; j < nf; j++) {
		const uint32_t i = fw[j];
		const struct node *n = g->nodes[i];
		if (has_subgraph(n))
			edge(&s, src, nv + i);
		for (uint32_t k = 0; k < n->n_in; k++)
			if (n->in[k] && n->in[k]->producer) /* inputs and initializers are resident */
				edge(&s, n->in[k]->id, nv + i);
		for (uint32_t k = 0; k < n->n_out; k++)
			if (n->out[k])
				edge(&s, nv + i, n->out[k]->id);
	}
	/* the sweep */
	uint32_t best = 0; /* position whose edge reaches furthest so far */
	for (uint32_t p = 1; p < np; p++) {
		uint32_t v = vert[p];
		if (v < nv && g->values[v]->producer && v != loss->id) {
			struct bypass *w = &b->why[b->n_cand];
			*w = (struct bypass){NULL, NULL, 0}; /* a bottleneck's: nothing bypasses it */
			b->cand[b->n_cand++] = g->values[v];
			if (s.reach[best] > p) {
				uint32_t a = s.from[best], z = s.to[best];
				w->into_node = !(a >= nv && a < src); /* from a value or the source */
				w->node = g->nodes[(w->into_node ? z : a) - nv];
				uint32_t other = w->into_node ? a : z;
				w->value = other < nv ? g->values[other] : NULL;
			} else {
				b->v[b->n++] = g->values[v];
			}
		}
		if (s.reach[p] > s.reach[best])
			best = p;
	}
out:
	xfree(fwd);
	xfree(bwd);
	xfree(s.pos);
	xfree(s.reach);
	xfree(s.from);
	xfree(s.to);
	xfree(vert);
	xfree(fw);
	return rc;
}
