/* exporter.c - exporters' meaning in standard ops; see exporter.h. */
#include "exporter.h"
#include "../ops/kernel.h"
#include "fold.h"

#include <string.h>

static int made_by_pytorch(const struct graph *g)
{
	const char *p = g->model ? g->model->producer_name : NULL;
	return p && !strcmp(p, "pytorch");
}

/* A Cast of v to dtype, named <n>/sizes (apart from n's own name: onnxruntime refuses two nodes of
 * one name; graph_add_op makes it fresh among the values). */
static struct value *cast(struct graph *g, const struct node *n, struct value *v, int dtype, struct gd_err *e)
{
	const char *nm = arena_printf(g->arena, "%s/sizes", node_base_name(n));
	struct node *c = nm ? graph_add_op(g, nm, "Cast", &v, 1, nm, e) : NULL;
	return c && !node_add_int(g, c, "to", dtype) ? c->out[0] : NULL;
}

static int resize_sizes(struct graph *g, struct node *n, struct gd_err *e)
{
	struct value *x = n->in[0], *scales = n->in[2];
	const char *nm = arena_printf(g->arena, "%s/sizes", node_base_name(n));
	if (!nm)
		return err_oom(e);
	struct node *s = graph_add_op(g, nm, "Shape", &x, 1, nm, e);
	struct value *a = s ? cast(g, n, s->out[0], DT_DOUBLE, e) : NULL, *b = a ? cast(g, n, scales, DT_DOUBLE, e) : NULL;
	struct value *ab[2] = {a, b};
	struct node *m = b ? graph_add_op(g, nm, "Mul", ab, 2, nm, e) : NULL;
	struct value *sizes = m ? cast(g, n, m->out[0], DT_INT64, e) : NULL;
	struct value **in = sizes ? arena_array(g->arena, 4, sizeof *in) : NULL;
	if (!in)
		return e->code ? e->code : err_oom(e);
	in[0] = x;
	in[1] = n->in[1];
	in[2] = NULL;
	in[3] = sizes;
	n->in = in;
	n->n_in = 4;
	return 0;
}

int exporter_semantics(struct graph *g, size_t *n_done, struct gd_err *e)
{
	*n_done = 0;
	if (!made_by_pytorch(g))
		return 0;
	uint32_t n_nodes = g->n_nodes;
	for (uint32_t i = 0; i < n_nodes; i++) {
		struct node *n = g->nodes[i];
		if (n->op != OP_RESIZE || n->n_in < 3 || !n->in[2] || (n->n_in > 3 && n->in[3]) ||
		    !attr_str_is(n, "coordinate_transformation_mode", "align_corners", 0))
			continue;
		if (resize_sizes(g, n, e))
			return e->code;
		++*n_done;
	}
	return *n_done ? graph_toposort(g, e) : 0;
}
