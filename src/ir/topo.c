/* topo.c - stable topological sort.
 *
 * The sort is a depth-first post-order walk, started from each node in file order: a node is
 * placed right after everything it needs. When the file order is already topological the order is
 * unchanged; otherwise a node moves only as far up as its first consumer requires. Predecessors
 * are the producers of a node's inputs, the producers of the outer values its subgraphs read,
 * and its control inputs. The walk keeps an explicit stack (a million-node chain must not
 * overflow the C stack) and runs in O(nodes + edges). Meeting a node that is still on the stack
 * means a cycle, and the stack holds exactly the nodes on it, which the error lists. */
#include "graph.h"
#include "../util/xalloc.h"

#include <stdio.h>
#include <string.h>

static int owned(const struct graph *g, const struct node *n)
{
	return n && n->index < g->n_nodes && g->nodes[n->index] == n;
}

/* Calls fn for each producer in g of an outer value read anywhere inside subgraph s. */
static void outer_producers(const struct graph *g, const struct graph *s, void (*fn)(void *, struct node *),
			    void *ctx)
{
	for (uint32_t i = 0; i < s->n_values; i++) {
		const struct value *v = s->values[i];
		if (v->outer && owned(g, v->outer->producer))
			fn(ctx, v->outer->producer);
	}
	for (uint32_t i = 0; i < s->n_nodes; i++) {
		const struct node *n = s->nodes[i];
		for (uint32_t k = 0; k < n->n_attr; k++) {
			const struct attr *a = &n->attr[k];
			if (a->type == ATTR_GRAPH && a->g)
				outer_producers(g, a->g, fn, ctx);
			for (size_t j = 0; a->type == ATTR_GRAPHS && j < a->n; j++)
				outer_producers(g, a->graphs[j], fn, ctx);
		}
	}
}

struct preds {
	uint32_t *start; /* CSR: preds of node i are idx[start[i] .. start[i+1]) */
	uint32_t *idx;
	uint32_t len;
	int counting;
	uint32_t cur;  /* the node whose preds are being listed */
	int unsorted;  /* some pred comes at or after its node: the order is not topological yet */
};

static void add_pred(void *ctx, struct node *p)
{
	struct preds *P = ctx;
	if (!P->counting)
		P->idx[P->len] = p->index;
	P->unsorted |= p->index >= P->cur;
	P->len++;
}

static void each_pred(const struct graph *g, const struct node *n, struct preds *P)
{
	for (uint32_t k = 0; k < n->n_in; k++)
		if (n->in[k] && owned(g, n->in[k]->producer))
			add_pred(P, n->in[k]->producer);
	for (uint32_t k = 0; k < n->n_attr; k++) {
		const struct attr *a = &n->attr[k];
		if (a->type == ATTR_GRAPH && a->g)
			outer_producers(g, a->g, add_pred, P);
		for (size_t j = 0; a->type == ATTR_GRAPHS && j < a->n; j++)
			outer_producers(g, a->graphs[j], add_pred, P);
	}
	for (uint32_t k = 0; k < n->n_ctrl; k++)
		if (owned(g, n->ctrl[k]))
			add_pred(P, n->ctrl[k]);
}

static int cycle_error(const struct graph *g, const uint32_t *stack, uint32_t top, uint32_t at, struct gd_err *e)
{
	/* stack[j+1] feeds stack[j]; stack[at] feeds stack[top]. Print in data-flow order. */
	char msg[900], d[300];
	size_t k = 0;
	uint32_t len = top - at + 1, shown = 0;
	uint32_t order[10];
	order[shown++] = stack[at];
	for (uint32_t j = top; j > at && shown < 8; j--)
		order[shown++] = stack[j];
	for (uint32_t i = 0; i < shown && k < sizeof msg; i++)
		k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s", i ? " -> " : "",
				      node_desc(g->nodes[order[i]], d, sizeof d));
	if (k < sizeof msg) {
		if (shown < len)
			snprintf(msg + k, sizeof msg - k, " -> ... (%u nodes in all)", len);
		else
			snprintf(msg + k, sizeof msg - k, " -> %s", node_desc(g->nodes[stack[at]], d, sizeof d));
	}
	return err_set(e, GD_EINPUT, "cycle through %s", msg);
}

static int sort_one(struct graph *g, struct gd_err *e)
{
	uint32_t n = g->n_nodes;
	if (n == 0)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		g->nodes[i]->index = i;
	struct preds P = {0};
	P.counting = 1;
	P.start = xcalloc((size_t)n + 1, sizeof *P.start);
	if (!P.start)
		return err_oom(e);
	for (uint32_t i = 0; i < n; i++) {
		P.start[i] = P.len;
		P.cur = i;
		each_pred(g, g->nodes[i], &P);
	}
	P.start[n] = P.len;
	if (!P.unsorted) { /* already topological (as autodiff leaves a graph): the walk would keep it */
		xfree(P.start);
		return 0;
	}
	P.idx = xcalloc(P.len ? P.len : 1, sizeof *P.idx);
	uint8_t *state = xcalloc(n, 1); /* 0 unseen, 1 on stack, 2 placed */
	uint32_t *stack = xcalloc(n, sizeof *stack), *next = xcalloc(n, sizeof *next);
	struct node **order = xcalloc(n, sizeof *order);
	int rc = 0;
	if (!P.idx || !state || !stack || !next || !order) {
		rc = err_oom(e);
		goto out;
	}
	P.counting = 0;
	P.len = 0;
	for (uint32_t i = 0; i < n; i++)
		each_pred(g, g->nodes[i], &P);

	uint32_t placed = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		if (state[i])
			continue;
		uint32_t top = 0;
		stack[0] = i;
		next[i] = P.start[i];
		state[i] = 1;
		for (;;) {
			uint32_t u = stack[top];
			if (next[u] < P.start[u + 1]) {
				uint32_t p = P.idx[next[u]++];
				if (state[p] == 1) {
					uint32_t at = top;
					while (stack[at] != p)
						at--;
					rc = cycle_error(g, stack, top, at, e);
					break;
				}
				if (state[p] == 0) {
					state[p] = 1;
					next[p] = P.start[p];
					stack[++top] = p;
				}
				continue;
			}
			state[u] = 2;
			order[placed++] = g->nodes[u];
			if (top == 0)
				break;
			top--;
		}
	}
	if (!rc) {
		ASSERT(placed == n);
		for (uint32_t i = 0; i < n; i++) {
			g->nodes[i] = order[i];
			order[i]->index = i;
		}
	}
out:
	xfree(P.start);
	xfree(P.idx);
	xfree(state);
	xfree(stack);
	xfree(next);
	xfree(order);
	return rc;
}

int graph_toposort(struct graph *g, struct gd_err *e)
{
	int rc = sort_one(g, e);
	for (uint32_t i = 0; i < g->n_nodes && !rc; i++) {
		struct node *n = g->nodes[i];
		for (uint32_t k = 0; k < n->n_attr && !rc; k++) {
			struct attr *a = &n->attr[k];
			if (a->type == ATTR_GRAPH && a->g)
				rc = graph_toposort(a->g, e);
			for (size_t j = 0; a->type == ATTR_GRAPHS && j < a->n && !rc; j++)
				rc = graph_toposort(a->graphs[j], e);
		}
	}
	if (!rc && g->model)
		for (size_t i = 0; i < g->model->n_ti && !rc; i++) {
			struct training_info *t = &g->model->ti[i];
			if (t->init)
				rc = graph_toposort(t->init, e);
			if (!rc && t->algo)
				rc = graph_toposort(t->algo, e);
		}
	return rc;
}
