/* check.c - graph validation: everything a reader cannot see until the whole graph is read.
 *
 * Each check names the node and op (or the value) it concerns. Order matters only for which
 * error is reported first: types and shapes, then initializer data, then references, then arity,
 * then subgraphs. Runs in O(values + node inputs). */
#include "graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Where a value is defined, to name it in messages. */
static const char *where(const struct value *v, char *buf, size_t n)
{
	char d[300];
	if (v->producer)
		snprintf(buf, n, "%s: output '%s'", node_desc(v->producer, d, sizeof d), v->name);
	else if (v->init)
		snprintf(buf, n, "initializer '%s'", v->name);
	else
		snprintf(buf, n, "value '%s'", v->name);
	return buf;
}

static int check_type(const struct value *v, struct gd_err *e)
{
	char w[400], s[256];
	const struct ttype *t = &v->type;
	if (t->has_dtype && t->dtype != DT_UNDEFINED && !dtype_valid(t->dtype))
		return err_set(e, GD_EINPUT, "%s: unknown dtype %d", where(v, w, sizeof w), t->dtype);
	for (uint32_t i = 0; i < t->ndim; i++)
		if (t->dims[i].kind == DIM_VALUE && t->dims[i].value < 0) {
			ttype_shape_str(t, s, sizeof s);
			return err_set(e, GD_EINPUT, "%s: negative dimension in shape %s", where(v, w, sizeof w), s);
		}
	int64_t n = ttype_numel(t);
	size_t es = dtype_valid(t->dtype) ? dtype_size(t->dtype) : 0;
	if (n == -2 || (n > 0 && es && n > INT64_MAX / (int64_t)es)) {
		ttype_shape_str(t, s, sizeof s);
		return err_set(e, GD_EINPUT, "%s: shape %s has more elements than fit in 64 bits",
			       where(v, w, sizeof w), s);
	}
	return 0;
}

static int check_tensor(const char *what, const struct tensor *t, struct gd_err *e)
{
	const char *name = t->name ? t->name : "";
	if (!dtype_valid(t->dtype))
		return err_set(e, GD_EINPUT, "%s '%s': unknown dtype %d", what, name, t->dtype);
	for (uint32_t i = 0; i < t->ndim; i++)
		if (t->dims[i] < 0)
			return err_set(e, GD_EINPUT, "%s '%s': negative dimension %" PRId64, what, name, t->dims[i]);
	int64_t n = tensor_numel(t);
	size_t es = dtype_size(t->dtype);
	if (n == -2 || (es && n > INT64_MAX / (int64_t)es))
		return err_set(e, GD_EINPUT, "%s '%s': shape has more elements than fit in 64 bits", what, name);
	if (t->src == TSRC_BYTES && es && t->bytes.n != (uint64_t)n * es)
		return err_set(e, GD_EINPUT,
			       "%s '%s': has %zu bytes of data but %" PRId64 " elements of %s need %" PRId64, what,
			       name, t->bytes.n, n, dtype_name(t->dtype), n * (int64_t)es);
	if (t->src == TSRC_STRINGS && t->n_strings != (uint64_t)n)
		return err_set(e, GD_EINPUT, "%s '%s': has %zu strings but its shape has %" PRId64 " elements", what,
			       name, t->n_strings, n);
	if (t->src == TSRC_NONE && n > 0 && !t->has_location)
		return err_set(e, GD_EINPUT, "%s '%s': has no data for its %" PRId64 " elements", what, name, n);
	return 0;
}

static int defined_here(const struct value *v)
{
	return v->producer || (v->flags & VALUE_INPUT) || v->init;
}

/* Binds v to the nearest enclosing graph's value of the same name. */
static int resolve_outer(struct graph *g, struct value *v)
{
	for (struct graph *p = g->parent; p; p = p->parent) {
		struct value *o = strmap_get(&p->names, v->name);
		if (o && defined_here(o)) {
			v->outer = o;
			return 1;
		}
	}
	return 0;
}

static int check_graph(struct graph *g, struct gd_err *e);

static int check_attrs(struct node *n, struct gd_err *e)
{
	char d[300];
	for (uint32_t i = 0; i < n->n_attr; i++) {
		struct attr *a = &n->attr[i];
		int rc = 0;
		if (a->type == ATTR_GRAPH && a->g)
			rc = check_graph(a->g, e);
		if (a->type == ATTR_GRAPHS)
			for (size_t k = 0; k < a->n && !rc; k++)
				rc = check_graph(a->graphs[k], e);
		if (a->type == ATTR_TENSOR && a->t)
			rc = check_tensor("tensor attribute", a->t, e);
		if (a->type == ATTR_TENSORS)
			for (size_t k = 0; k < a->n && !rc; k++)
				rc = check_tensor("tensor attribute", a->tensors[k], e);
		if (rc) {
			err_prefix(e, "%s: attribute '%s'", node_desc(n, d, sizeof d), a->name);
			return rc;
		}
	}
	return 0;
}

static int check_arity(const struct node *n, struct gd_err *e)
{
	char d[300];
	if (n->op == OP_UNKNOWN)
		return 0;
	const struct op_info *o = &op_table[n->op];
	if ((int)n->n_in < o->min_in || (o->max_in >= 0 && (int)n->n_in > o->max_in)) {
		if (o->min_in == o->max_in)
			return err_set(e, GD_EINPUT, "%s: takes %d input%s, got %u", node_desc(n, d, sizeof d),
				       o->min_in, o->min_in == 1 ? "" : "s", n->n_in);
		return err_set(e, GD_EINPUT, "%s: takes %d to %d inputs, got %u", node_desc(n, d, sizeof d),
			       o->min_in, o->max_in, n->n_in);
	}
	if ((int)n->n_out < o->min_out || (o->max_out >= 0 && (int)n->n_out > o->max_out))
		return err_set(e, GD_EINPUT, "%s: produces %d to %d outputs, got %u", node_desc(n, d, sizeof d),
			       o->min_out, o->max_out < 0 ? 1 << 30 : o->max_out, n->n_out);
	return 0;
}

static int check_graph(struct graph *g, struct gd_err *e)
{
	char d[300];
	int rc;
	for (uint32_t i = 0; i < g->n_values; i++)
		if ((rc = check_type(g->values[i], e)))
			return rc;
	for (uint32_t i = 0; i < g->n_inits; i++)
		if ((rc = check_tensor("initializer", g->inits[i]->init, e)))
			return rc;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		struct node *n = g->nodes[i];
		for (uint32_t k = 0; k < n->n_in; k++) {
			struct value *v = n->in[k];
			if (v && !defined_here(v) && !v->outer && !resolve_outer(g, v))
				return err_set(e, GD_EINPUT,
					       "%s: input '%s' is not produced by any node, graph input or initializer",
					       node_desc(n, d, sizeof d), v->name);
		}
		if ((rc = check_arity(n, e)) || (rc = check_attrs(n, e)))
			return rc;
	}
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		struct value *v = g->outputs[i];
		if (!defined_here(v) && !v->outer && !resolve_outer(g, v))
			return err_set(e, GD_EINPUT, "graph output '%s' is not produced by any node, input or initializer",
				       v->name);
	}
	return 0;
}

int graph_check(struct graph *g, struct gd_err *e)
{
	int rc = check_graph(g, e);
	if (rc || !g->model)
		return rc;
	for (size_t i = 0; i < g->model->n_ti; i++) {
		struct training_info *t = &g->model->ti[i];
		if ((t->init && (rc = check_graph(t->init, e))) || (t->algo && (rc = check_graph(t->algo, e)))) {
			err_prefix(e, "training_info %zu", i);
			return rc;
		}
	}
	return 0;
}
