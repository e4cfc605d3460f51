/* ctrl.c - see ctrl.h. */
#include "ctrl.h"
#include "../exec/exec.h"
#include "../ir/dtype.h"
#include "../util/xalloc.h"
#include "fold.h"

#include <stdio.h>
#include <string.h>

int ctrl_parse(const char *s, enum ctrl_mode *m)
{
	static const char *const names[] = {"metadata", "order", "data"};
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*m = (enum ctrl_mode)i;
			return 0;
		}
	return -1;
}

static int first_float(const struct exec *x, struct value *const *v, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		if (v[k] && dtype_is_float(exec_value(x, v[k])->dtype))
			return (int)k;
	return -1;
}

/* x' = Sub(x, Mul(Abs(ReduceMax(y)), 0)): x, once y is made. The new nodes go to g's end. */
static struct value *wait_for(struct graph *g, const struct exec *x, struct node *n, struct value *in, struct value *y,
			      struct gd_err *e)
{
	char base[600];
	snprintf(base, sizeof base, "%s_after", n->name ? n->name : "node");
	struct node *mx = graph_add_op(g, base, "ReduceMax", &y, 1, base, e);
	if (node_add_int(g, mx, "keepdims", 0))
		return NULL;
	struct node *ab = graph_add_op(g, base, "Abs", &mx->out[0], 1, base, e);
	const struct rtensor *yt = exec_value(x, y);
	struct node *zero = ab ? graph_add_scalar(g, base, yt->dtype, 0, e) : NULL;
	if (!zero)
		return NULL;
	struct value *mi[2] = {ab->out[0], zero->out[0]};
	struct node *mul = graph_add_op(g, base, "Mul", mi, 2, base, e);
	if (!mul)
		return NULL;
	struct value *zv = mul->out[0];
	if (exec_value(x, in)->dtype != yt->dtype) {
		struct node *cast = graph_add_op(g, base, "Cast", &zv, 1, base, e);
		if (node_add_int(g, cast, "to", exec_value(x, in)->dtype))
			return NULL;
		zv = cast->out[0];
	}
	struct value *si[2] = {in, zv};
	struct node *sub = graph_add_op(g, base, "Sub", si, 2, base, e);
	return sub ? sub->out[0] : NULL;
}

int ctrl_encode(struct graph *g, enum ctrl_mode mode, uint32_t *n_data, struct gd_err *e)
{
	*n_data = 0;
	if (mode == CTRL_METADATA)
		return 0;
	if (mode == CTRL_ORDER) {
		for (uint32_t i = 0; i < g->n_nodes; i++)
			g->nodes[i]->n_ctrl = 0;
		return 0;
	}
	/* dtypes, whatever the dimensions: a shapes-only run with stand-ins for unbound ones */
	struct exec_opts so = {.shapes_only = 1, .probe_unbound = 1};
	struct exec *x = exec_run(g, &so, NULL, e);
	if (!x)
		return e->code;
	uint32_t n0 = g->n_nodes;
	uint32_t *made = xmalloc(sizeof *made * ((size_t)n0 + 1)); /* node i's new nodes start at made[i] */
	int rc = 0;
	if (!made) {
		exec_free(x);
		return err_oom(e);
	}
	for (uint32_t i = 0; i < n0 && !rc; i++) {
		struct node *n = g->nodes[i];
		uint32_t kept = 0;
		int k = first_float(x, n->in, n->n_in);
		made[i] = g->n_nodes;
		for (uint32_t c = 0; c < n->n_ctrl && !rc; c++) {
			struct node *d = n->ctrl[c];
			int o = first_float(x, d->out, d->n_out);
			struct value *w = k >= 0 && o >= 0 ? wait_for(g, x, n, n->in[k], d->out[o], e) : NULL;
			if (w) {
				n->in[k] = w;
				(*n_data)++;
			} else if (k >= 0 && o >= 0) {
				rc = e->code ? e->code : err_oom(e);
			} else {
				n->ctrl[kept++] = d; /* no floating value to carry it: stays metadata */
			}
		}
		n->n_ctrl = kept;
		for (uint32_t j = made[i]; j < g->n_nodes; j++) /* part of n */
			g->nodes[j]->tags = n->tags;
	}
	made[n0] = g->n_nodes;
	struct node **order = rc ? NULL : xmalloc(sizeof *order * ((size_t)g->n_nodes + 1));
	if (!rc && !order)
		rc = err_oom(e);
	if (!rc) { /* each node's new nodes run right before it */
		uint32_t n_order = 0;
		for (uint32_t i = 0; i < n0; i++) {
			for (uint32_t j = made[i]; j < made[i + 1]; j++)
				order[n_order++] = g->nodes[j];
			order[n_order++] = g->nodes[i];
		}
		memcpy(g->nodes, order, sizeof *order * n_order);
		for (uint32_t i = 0; i < n_order; i++)
			g->nodes[i]->index = i;
	}
	xfree(made);
	xfree(order);
	exec_free(x);
	return rc;
}
