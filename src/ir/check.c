/* check.c - graph validation: everything a reader cannot see until the whole graph is read.
 *
 * Each check names the node and op (or the value) it concerns. Order matters only for which
 * error is reported first: types and shapes, then initializer data, then references, then arity,
 * then subgraphs. Runs in O(values + node inputs). */
#include "graph.h"

#include <inttypes.h>
#include <stddef.h>
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

/* A graph input that has an initializer (its default) and declares a type: the initializer must
 * be of it, or what a run feeds and what training updates differ in shape. A symbolic dimension
 * matches any size. */
static int check_declared(const struct value *v, struct gd_err *e)
{
	const struct ttype *t = &v->type;
	const struct tensor *init = v->init;
	if (!(v->flags & VALUE_INPUT) || !init)
		return 0;
	int same = !t->has_dtype || t->dtype == DT_UNDEFINED || t->dtype == init->dtype;
	if (t->has_shape) {
		same &= t->ndim == init->ndim;
		for (uint32_t i = 0; same && i < t->ndim; i++)
			same &= t->dims[i].kind != DIM_VALUE || t->dims[i].value == init->dims[i];
	}
	if (same)
		return 0;
	char s[256] = "", w[256];
	if (t->has_shape)
		ttype_shape_str(t, s, sizeof s);
	size_t m = 0;
	for (uint32_t i = 0; i < init->ndim && m + 24 < sizeof w; i++)
		m += (size_t)snprintf(w + m, sizeof w - m, "%s%" PRId64, i ? ", " : "[", init->dims[i]);
	snprintf(w + m, sizeof w - m, "%s", init->ndim ? "]" : "[]");
	return err_set(e, GD_EINPUT, "graph input '%s': declared %s%s%s, but its initializer is %s %s", v->name,
		       t->has_dtype ? dtype_name(t->dtype) : "", t->has_dtype && t->has_shape ? " " : "", s,
		       dtype_name(init->dtype), w);
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

/* An attribute's type and value against the registry's row (ops/attrs.def): ONNX's checker refuses
 * another type, and a kernel reading a mode it does not know would take its default silently. */
static int check_attr_row(const struct node *n, const struct attr *a, struct gd_err *e)
{
	static const char *const kinds[] = {"undefined", "a float", "an int", "a string", "a tensor", "a graph",
					    "floats", "ints", "strings", "tensors", "graphs", "a sparse tensor",
					    "sparse tensors", "a type", "types"};
	char d[300];
	int k, i = 0;
	const struct op_attr *row = op_attr_rows(n->op, a->name, &k);
	if (!row || (!a->has_type && a->type == ATTR_UNDEFINED)) /* an IR < 3 empty list: no type to tell */
		return 0;
	while (i < k && row[i].type != a->type)
		i++;
	if (i == k)
		return err_set(e, GD_EINPUT, "%s: attribute '%s' is %s, not %s", node_desc(n, d, sizeof d), a->name,
			       a->type >= 0 && a->type <= ATTR_TYPE_PROTOS ? kinds[a->type] : "of an unknown type",
			       kinds[row[0].type]);
	const char *vals = row[i].values;
	size_t ns = a->type == ATTR_STRING ? 1 : a->type == ATTR_STRINGS ? a->n : 0;
	for (size_t j = 0; vals && j < ns; j++) {
		const struct bytes *s = a->type == ATTR_STRING ? &a->s : &a->strings[j];
		const char *v = vals;
		for (size_t len; *v; v += len + (v[len] == '|')) {
			len = strcspn(v, "|");
			if (len == s->n && memcmp(v, s->p, len) == 0)
				break;
		}
		if (*v)
			continue;
		char shown[40], allowed[300];
		size_t m = 0;
		for (size_t c = 0; c < s->n && m + 4 < sizeof shown; c++)
			shown[m++] = s->p[c] >= 0x20 && s->p[c] < 0x7f ? (char)s->p[c] : '?';
		if (m < s->n)
			memcpy(shown + m, "...", 3), m += 3;
		shown[m] = 0;
		snprintf(allowed, sizeof allowed, "%s", vals);
		for (char *c = allowed; (c = strchr(c, '|'));)
			*c = '/';
		return err_set(e, GD_EINPUT, "%s: attribute '%s' is '%s', not one of %s", node_desc(n, d, sizeof d),
			       a->name, shown, allowed);
	}
	return 0;
}

/* The first name given twice among n items of `size` bytes whose first member is their name (an
 * attribute's, a binding's key): *twice, or NULL. Pairs for the usual handful, a hash for a file's
 * thousands. 0, or -1 when out of memory. */
static int name_twice(const void *items, size_t n, size_t size, const char **twice)
{
#define NAME(i) (*(const char *const *)((const char *)items + (i) * size))
	*twice = NULL;
	if (n <= 16) {
		for (size_t i = 1; i < n && !*twice; i++)
			for (size_t j = 0; j < i && !*twice; j++)
				if (NAME(i) && NAME(j) && strcmp(NAME(i), NAME(j)) == 0)
					*twice = NAME(i);
		return 0;
	}
	struct strmap seen;
	strmap_init(&seen);
	for (size_t i = 0; i < n && !*twice; i++) {
		struct strmap_slot *s = NAME(i) ? strmap_slot(&seen, NAME(i)) : NULL;
		if (NAME(i) && !s) {
			strmap_free(&seen);
			return -1;
		}
		if (s && s->key)
			*twice = NAME(i);
		else if (s)
			strmap_fill(&seen, s, NAME(i), NULL);
	}
	strmap_free(&seen);
	return 0;
#undef NAME
}

/* A name given twice: the readers keep both, and a kernel reads the first. */
static int check_attr_names(const struct node *n, struct gd_err *e)
{
	_Static_assert(offsetof(struct attr, name) == 0, "name_twice reads an attribute's name first");
	char d[300];
	const char *twice;
	if (name_twice(n->attr, n->n_attr, sizeof *n->attr, &twice))
		return err_oom(e);
	return twice ? err_set(e, GD_EINPUT, "%s: attribute '%s' is given twice", node_desc(n, d, sizeof d), twice)
		     : 0;
}

/* One state given two updates by one algorithm: which one lands is the reader's order. (Two
 * TrainingInfoProtos may update one state: they are consecutive steps.) */
static int check_bindings(const struct training_info *t, struct gd_err *e)
{
	_Static_assert(offsetof(struct kv, key) == 0, "name_twice reads a binding's key first");
	const char *twice;
	if (name_twice(t->update_bind, t->n_update_bind, sizeof *t->update_bind, &twice))
		return err_oom(e);
	return twice ? err_set(e, GD_EINPUT, "update_binding: state '%s' is bound twice", twice) : 0;
}

static int check_attrs(struct node *n, struct gd_err *e)
{
	char d[300];
	if (check_attr_names(n, e))
		return e->code;
	for (uint32_t i = 0; i < n->n_attr; i++) {
		struct attr *a = &n->attr[i];
		int rc = check_attr_row(n, a, e);
		if (rc)
			return rc;
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
	for (uint32_t i = 0; i < g->n_values; i++) {
		/* names graphdiet derives (<name>_grad, <name>_adam_m_new, ...) must fit its buffers: a cut
		 * one named another value, and a parameter's update missed it (it did not train) */
		size_t len = strlen(g->values[i]->name);
		if (len > GRAPH_NAME_MAX)
			return err_set(e, GD_EINPUT, "value '%.40s...' has a name of %zu bytes; graphdiet takes names of "
						     "at most %d", g->values[i]->name, len, GRAPH_NAME_MAX);
		if ((rc = check_type(g->values[i], e)))
			return rc;
	}
	for (uint32_t i = 0; i < g->n_inits; i++)
		if ((rc = check_tensor("initializer", g->inits[i]->init, e)) || (rc = check_declared(g->inits[i], e)))
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
		if ((t->init && (rc = check_graph(t->init, e))) || (t->algo && (rc = check_graph(t->algo, e))) ||
		    (rc = check_bindings(t, e))) {
			err_prefix(e, "training_info %zu", i);
			return rc;
		}
	}
	return 0;
}
