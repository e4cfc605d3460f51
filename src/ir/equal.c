/* equal.c - structural equality of two graphs, used by round-trip tests and `convert --check`.
 *
 * Compares what the formats carry: names, order of nodes and graph lists, attributes, types and
 * shapes, initializer bytes (by content, wherever they are stored), control inputs, extras and
 * model data. Values are matched by name. */
#include "graph.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

struct cmp {
	char *why;
	size_t n;
};

#define DIFF(c, ...) (snprintf((c)->why, (c)->n, __VA_ARGS__), 0)

static int streq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static int byteseq(struct bytes a, struct bytes b)
{
	return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

static int extras_eq(struct cmp *c, const char *what, const struct extras *a, const struct extras *b)
{
	if (a->n != b->n)
		return DIFF(c, "%s: %zu vs %zu unknown fields", what, a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct extra_field *x = &a->f[i], *y = &b->f[i];
		if (x->field != y->field || x->wire != y->wire || x->len != y->len ||
		    (x->len && memcmp(x->data, y->data, x->len)))
			return DIFF(c, "%s: unknown field %u differs", what, x->field);
	}
	return 1;
}

static int kvs_eq(struct cmp *c, const char *what, const struct kv *a, size_t na, const struct kv *b, size_t nb)
{
	if (na != nb)
		return DIFF(c, "%s: %zu vs %zu entries", what, na, nb);
	for (size_t i = 0; i < na; i++)
		if (!streq(a[i].key, b[i].key) || !streq(a[i].value, b[i].value) ||
		    !extras_eq(c, what, &a[i].x, &b[i].x))
			return c->why[0] ? 0 : DIFF(c, "%s: entry %zu differs", what, i);
	return 1;
}

static int ttype_eq(struct cmp *c, const char *name, const struct ttype *a, const struct ttype *b)
{
	if (a->dtype != b->dtype || a->has_type != b->has_type || a->has_tensor != b->has_tensor ||
	    a->has_dtype != b->has_dtype || a->has_shape != b->has_shape || a->ndim != b->ndim)
		return DIFF(c, "value '%s': type differs", name);
	for (uint32_t i = 0; i < a->ndim; i++) {
		const struct dim *x = &a->dims[i], *y = &b->dims[i];
		if (x->kind != y->kind || (x->kind == DIM_VALUE && x->value != y->value) ||
		    (x->kind == DIM_PARAM && !streq(x->param, y->param)) || !streq(x->denotation, y->denotation))
			return DIFF(c, "value '%s': dimension %u differs", name, i);
		if (!extras_eq(c, name, &x->x, &y->x))
			return 0;
	}
	return 1;
}

static int ext_eq(struct cmp *c, const char *name, const struct value_ext *a, const struct value_ext *b)
{
	if (!streq(a->doc, b->doc) || !streq(a->denotation, b->denotation))
		return DIFF(c, "value '%s': doc or type denotation differs", name);
	return extras_eq(c, name, &a->x, &b->x) && extras_eq(c, name, &a->type_x, &b->type_x) &&
	       extras_eq(c, name, &a->tensor_x, &b->tensor_x) && extras_eq(c, name, &a->shape_x, &b->shape_x);
}

static int tensor_eq(struct cmp *c, const struct tensor *a, const struct tensor *b)
{
	const char *nm = a->name ? a->name : "";
	if (!streq(a->name, b->name) || !streq(a->doc, b->doc) || a->dtype != b->dtype || a->ndim != b->ndim)
		return DIFF(c, "tensor '%s': header differs", nm);
	if (a->ndim && memcmp(a->dims, b->dims, a->ndim * sizeof *a->dims))
		return DIFF(c, "tensor '%s': dims differ", nm);
	if (a->src != b->src || a->has_location != b->has_location || a->location != b->location)
		return DIFF(c, "tensor '%s': data storage differs", nm);
	switch (a->src) {
	case TSRC_BYTES:
		if (a->field != b->field || !byteseq(a->bytes, b->bytes))
			return DIFF(c, "tensor '%s': data bytes differ", nm);
		break;
	case TSRC_STRINGS:
		if (a->n_strings != b->n_strings)
			return DIFF(c, "tensor '%s': string count differs", nm);
		for (size_t i = 0; i < a->n_strings; i++)
			if (!byteseq(a->strings[i], b->strings[i]))
				return DIFF(c, "tensor '%s': string %zu differs", nm, i);
		break;
	case TSRC_NPY:
		if (!streq(a->path, b->path))
			return DIFF(c, "tensor '%s': npy path differs", nm);
		break;
	case TSRC_RANDOM:
		if (a->rnd.dist != b->rnd.dist || a->rnd.a != b->rnd.a || a->rnd.b != b->rnd.b ||
		    a->rnd.seed != b->rnd.seed)
			return DIFF(c, "tensor '%s': random init differs", nm);
		break;
	default:
		break;
	}
	return kvs_eq(c, nm, a->external, a->n_external, b->external, b->n_external) &&
	       extras_eq(c, nm, &a->x, &b->x);
}

static int graph_eq(struct cmp *c, const struct graph *a, const struct graph *b);

static int attr_eq(struct cmp *c, const char *node, const struct attr *a, const struct attr *b)
{
	if (!streq(a->name, b->name) || a->type != b->type || a->has_type != b->has_type ||
	    !streq(a->doc, b->doc) || !streq(a->ref, b->ref) || a->n != b->n)
		return DIFF(c, "node '%s': attribute '%s' differs", node, a->name);
	int ok = 1;
	switch (a->type) {
	case ATTR_FLOAT:
		ok = memcmp(&a->f, &b->f, sizeof a->f) == 0;
		break;
	case ATTR_INT:
		ok = a->i == b->i;
		break;
	case ATTR_STRING:
		ok = byteseq(a->s, b->s);
		break;
	case ATTR_TENSOR:
		return tensor_eq(c, a->t, b->t) && extras_eq(c, node, &a->x, &b->x);
	case ATTR_GRAPH:
		return graph_eq(c, a->g, b->g) && extras_eq(c, node, &a->x, &b->x);
	case ATTR_FLOATS:
		ok = a->n == 0 || memcmp(a->floats, b->floats, a->n * sizeof *a->floats) == 0;
		break;
	case ATTR_INTS:
		ok = a->n == 0 || memcmp(a->ints, b->ints, a->n * sizeof *a->ints) == 0;
		break;
	case ATTR_STRINGS:
		for (size_t i = 0; i < a->n && ok; i++)
			ok = byteseq(a->strings[i], b->strings[i]);
		break;
	case ATTR_TENSORS:
		for (size_t i = 0; i < a->n; i++)
			if (!tensor_eq(c, a->tensors[i], b->tensors[i]))
				return 0;
		break;
	case ATTR_GRAPHS:
		for (size_t i = 0; i < a->n; i++)
			if (!graph_eq(c, a->graphs[i], b->graphs[i]))
				return 0;
		break;
	}
	if (!ok)
		return DIFF(c, "node '%s': attribute '%s' value differs", node, a->name);
	return extras_eq(c, node, &a->x, &b->x);
}

static int vname_eq(const struct value *a, const struct value *b)
{
	return (!a && !b) || (a && b && strcmp(a->name, b->name) == 0);
}

static int node_eq(struct cmp *c, const struct node *a, const struct node *b)
{
	char d[300];
	node_desc(a, d, sizeof d);
	const struct node_ext *ax = node_ext(a), *bx = node_ext(b);
	if (!streq(a->name, b->name) || !streq(a->op_type, b->op_type) || !streq(a->domain, b->domain) ||
	    !streq(ax->doc, bx->doc) || !streq(ax->overload, bx->overload) || a->n_in != b->n_in ||
	    a->n_out != b->n_out || a->n_attr != b->n_attr || a->n_ctrl != b->n_ctrl || a->tags != b->tags)
		return DIFF(c, "%s differs", d);
	for (uint32_t i = 0; i < a->n_in; i++)
		if (!vname_eq(a->in[i], b->in[i]))
			return DIFF(c, "%s: input %u differs", d, i);
	for (uint32_t i = 0; i < a->n_out; i++)
		if (!vname_eq(a->out[i], b->out[i]))
			return DIFF(c, "%s: output %u differs", d, i);
	for (uint32_t i = 0; i < a->n_ctrl; i++)
		if (!streq(a->ctrl[i]->name, b->ctrl[i]->name))
			return DIFF(c, "%s: control input %u differs", d, i);
	for (uint32_t i = 0; i < a->n_attr; i++)
		if (!attr_eq(c, d, &a->attr[i], &b->attr[i]))
			return 0;
	return kvs_eq(c, d, ax->meta, ax->n_meta, bx->meta, bx->n_meta) && extras_eq(c, d, &ax->x, &bx->x);
}

static int list_eq(struct cmp *c, const char *what, struct value *const *a, uint32_t na, struct value *const *b,
		   uint32_t nb)
{
	if (na != nb)
		return DIFF(c, "graph %s: %u vs %u entries", what, na, nb);
	for (uint32_t i = 0; i < na; i++)
		if (strcmp(a[i]->name, b[i]->name))
			return DIFF(c, "graph %s %u: '%s' vs '%s'", what, i, a[i]->name, b[i]->name);
	return 1;
}

static int graph_eq(struct cmp *c, const struct graph *a, const struct graph *b)
{
	if (!a || !b)
		return a == b ? 1 : DIFF(c, "one graph is missing");
	if (!streq(a->name, b->name) || !streq(a->doc, b->doc))
		return DIFF(c, "graph '%s': name or doc differs", a->name ? a->name : "");
	if (a->n_nodes != b->n_nodes)
		return DIFF(c, "graph '%s': %u vs %u nodes", a->name ? a->name : "", a->n_nodes, b->n_nodes);
	if (!list_eq(c, "inputs", a->inputs, a->n_inputs, b->inputs, b->n_inputs) ||
	    !list_eq(c, "outputs", a->outputs, a->n_outputs, b->outputs, b->n_outputs) ||
	    !list_eq(c, "value_info", a->infos, a->n_infos, b->infos, b->n_infos) ||
	    !list_eq(c, "initializers", a->inits, a->n_inits, b->inits, b->n_inits))
		return 0;
	for (uint32_t i = 0; i < a->n_nodes; i++)
		if (!node_eq(c, a->nodes[i], b->nodes[i]))
			return 0;
	for (uint32_t i = 0; i < a->n_values; i++) {
		const struct value *v = a->values[i], *w = strmap_get(&b->names, v->name);
		if (!w)
			return DIFF(c, "value '%s' is missing", v->name);
		if (v->flags != w->flags)
			return DIFF(c, "value '%s': flags differ", v->name);
		if (!ttype_eq(c, v->name, &v->type, &w->type) || !ext_eq(c, v->name, value_ext(v), value_ext(w)))
			return 0;
		if ((v->init != NULL) != (w->init != NULL) || (v->init && !tensor_eq(c, v->init, w->init)))
			return c->why[0] ? 0 : DIFF(c, "value '%s': initializer differs", v->name);
	}
	if (a->n_values != b->n_values)
		return DIFF(c, "graph '%s': %u vs %u values", a->name ? a->name : "", a->n_values, b->n_values);
	return extras_eq(c, "graph", &a->x, &b->x);
}

static int model_eq(struct cmp *c, const struct model *a, const struct model *b)
{
	if (!a || !b)
		return a == b ? 1 : DIFF(c, "model data is missing");
	if (a->has_ir_version != b->has_ir_version || a->ir_version != b->ir_version ||
	    a->has_model_version != b->has_model_version || a->model_version != b->model_version ||
	    !streq(a->producer_name, b->producer_name) || !streq(a->producer_version, b->producer_version) ||
	    !streq(a->domain, b->domain) || !streq(a->doc, b->doc))
		return DIFF(c, "model header differs");
	if (a->n_opsets != b->n_opsets)
		return DIFF(c, "opset imports differ");
	for (size_t i = 0; i < a->n_opsets; i++)
		if (!streq(a->opsets[i].domain, b->opsets[i].domain) || a->opsets[i].version != b->opsets[i].version ||
		    a->opsets[i].has_version != b->opsets[i].has_version ||
		    !extras_eq(c, "opset", &a->opsets[i].x, &b->opsets[i].x))
			return c->why[0] ? 0 : DIFF(c, "opset import %zu differs", i);
	if (!kvs_eq(c, "metadata", a->meta, a->n_meta, b->meta, b->n_meta))
		return 0;
	if (a->n_ti != b->n_ti)
		return DIFF(c, "training_info differs");
	for (size_t i = 0; i < a->n_ti; i++) {
		const struct training_info *x = &a->ti[i], *y = &b->ti[i];
		if (!graph_eq(c, x->init, y->init) || !graph_eq(c, x->algo, y->algo) ||
		    !kvs_eq(c, "initialization_binding", x->init_bind, x->n_init_bind, y->init_bind, y->n_init_bind) ||
		    !kvs_eq(c, "update_binding", x->update_bind, x->n_update_bind, y->update_bind, y->n_update_bind) ||
		    !extras_eq(c, "training_info", &x->x, &y->x))
			return 0;
	}
	return extras_eq(c, "model", &a->x, &b->x);
}

int graph_equal(const struct graph *a, const struct graph *b, char *why, size_t n)
{
	struct cmp c = {why, n};
	why[0] = 0;
	return model_eq(&c, a->model, b->model) && graph_eq(&c, a, b);
}
