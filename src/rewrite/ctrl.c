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

/* Gives n (made by graph_add_op, without attributes) one integer attribute. */
static int int_attr(struct graph *g, struct node *n, const char *name, int64_t v)
{
	struct attr *a = n ? arena_zalloc(g->arena, sizeof *a) : NULL;
	if (!a)
		return -1;
	*a = (struct attr){.name = name, .type = ATTR_INT, .has_type = true, .i = v};
	n->attr = a;
	n->n_attr = 1;
	return 0;
}

/* x' = Sub(x, Mul(Abs(ReduceMax(y)), 0)): x, once y is made. The new nodes go to g's end. */
static struct value *wait_for(struct graph *g, const struct exec *x, struct node *n, struct value *in, struct value *y,
			      struct gd_err *e)
{
	char base[600];
	snprintf(base, sizeof base, "%s_after", n->name ? n->name : "node");
	struct node *mx = graph_add_op(g, base, "ReduceMax", &y, 1, base, e);
	if (int_attr(g, mx, "keepdims", 0))
		return NULL;
	struct node *ab = graph_add_op(g, base, "Abs", &mx->out[0], 1, base, e);
	struct node *zero = ab ? graph_add_op(g, base, "Constant", NULL, 0, base, e) : NULL;
	if (!zero)
		return NULL;
	const struct rtensor *yt = exec_value(x, y);
	uint64_t bits = 0; /* +0.0 in every floating format */
	struct rtensor z = {.dtype = yt->dtype, .ndim = 0, .numel = 1, .data = &bits, .nbytes = dtype_size(yt->dtype)};
	if (node_make_constant(g, &z, zero, e))
		return NULL;
	struct value *mi[2] = {ab->out[0], zero->out[0]};
	struct node *mul = graph_add_op(g, base, "Mul", mi, 2, base, e);
	if (!mul)
		return NULL;
	struct value *zv = mul->out[0];
	if (exec_value(x, in)->dtype != yt->dtype) {
		struct node *cast = graph_add_op(g, base, "Cast", &zv, 1, base, e);
		if (int_attr(g, cast, "to", exec_value(x, in)->dtype))
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
	struct node **order = xmalloc(sizeof *order * ((size_t)n0 * 8 + 1));
	uint32_t n_order = 0, cap = n0 * 8 + 1;
	int rc = 0;
	if (!order) {
		exec_free(x);
		return err_oom(e);
	}
	for (uint32_t i = 0; i < n0 && !rc; i++) {
		struct node *n = g->nodes[i];
		uint32_t start = g->n_nodes, kept = 0;
		int k = first_float(x, n->in, n->n_in);
		for (uint32_t c = 0; c < n->n_ctrl; c++) {
			struct node *d = n->ctrl[c];
			int o = first_float(x, d->out, d->n_out);
			struct value *w = k >= 0 && o >= 0 ? wait_for(g, x, n, n->in[k], d->out[o], e) : NULL;
			if (k >= 0 && o >= 0 && !w) {
				rc = e->code ? e->code : err_oom(e);
				break;
			}
			if (w) {
				n->in[k] = w;
				(*n_data)++;
			} else {
				n->ctrl[kept++] = d; /* no floating value to carry it: stays metadata */
			}
		}
		if (!rc)
			n->n_ctrl = kept;
		if (n_order + (g->n_nodes - start) + 1 > cap) {
			rc = err_set(e, GD_EINTERNAL, "--control-deps data: too many new nodes");
			break;
		}
		for (uint32_t j = start; j < g->n_nodes; j++) { /* the new nodes run right before n, as part of it */
			g->nodes[j]->tags = n->tags;
			order[n_order++] = g->nodes[j];
		}
		order[n_order++] = n;
	}
	if (!rc) {
		memcpy(g->nodes, order, sizeof *order * n_order);
		for (uint32_t i = 0; i < n_order; i++)
			g->nodes[i]->index = i;
	}
	xfree(order);
	exec_free(x);
	return rc;
}
