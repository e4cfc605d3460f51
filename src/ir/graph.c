/* graph.c - IR construction and small queries; see graph.h for the invariants.
 *
 * Readers build a graph by name: graph_value() creates a value on first mention, so nodes may
 * arrive in any order; graph_check() then resolves what is still undefined against enclosing
 * graphs and reports what cannot be resolved. Growing arrays are heap-allocated (and freed by
 * graph_free) rather than arena-allocated, so doubling does not waste arena space. */
#include "graph.h"
#include "../util/join.h"
#include "../util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct graph *graph_new(const char *path)
{
	struct arena *a = xcalloc(1, sizeof *a);
	if (!a)
		return NULL;
	arena_init(a);
	struct graph *g = arena_zalloc(a, sizeof *g);
	struct model *m = g ? arena_zalloc(a, sizeof *m) : NULL;
	if (!g || !m) {
		arena_free(a);
		xfree(a);
		return NULL;
	}
	g->arena = a;
	g->model = m;
	g->path = path ? arena_strdup(a, path) : NULL;
	return g;
}

static struct graph *root_of(struct graph *g)
{
	while (g->parent)
		g = g->parent;
	return g;
}

#define GROW(g, arr, n, cap)                                                           \
	((n) < (cap) ? 0                                                               \
		     : grow_array((void **)&(arr), &(cap), sizeof *(arr)))

static int grow_array(void **arr, uint32_t *cap, size_t size)
{
	uint32_t nc = *cap ? *cap * 2 : 8;
	if (nc < *cap)
		return -1;
	void *p = xreallocarray(*arr, nc, size);
	if (!p)
		return -1;
	*arr = p;
	*cap = nc;
	return 0;
}

struct graph *graph_new_sub(struct graph *parent)
{
	struct graph *root = root_of(parent);
	struct graph *g = arena_zalloc(parent->arena, sizeof *g);
	if (!g || GROW(root, root->subgraphs, root->n_subgraphs, root->cap_subgraphs))
		return NULL;
	g->arena = parent->arena;
	g->parent = parent;
	g->path = root->path;
	root->subgraphs[root->n_subgraphs++] = g;
	return g;
}

static void free_arrays(struct graph *g)
{
	xfree(g->nodes);
	xfree(g->values);
	xfree(g->inputs);
	xfree(g->outputs);
	xfree(g->infos);
	xfree(g->inits);
	strmap_free(&g->names);
}

void graph_free(struct graph *g)
{
	if (!g)
		return;
	ASSERT(!g->parent);
	for (uint32_t i = 0; i < g->n_subgraphs; i++)
		free_arrays(g->subgraphs[i]);
	free_arrays(g);
	strmap_free(&g->fresh);
	xfree(g->subgraphs);
	for (uint32_t i = g->n_cleanups; i-- > 0;)
		g->cleanups[i].fn(g->cleanups[i].arg);
	xfree(g->cleanups);
	struct arena *a = g->arena;
	arena_free(a);
	xfree(a);
}

int graph_on_free(struct graph *g, graph_cleanup_fn fn, void *arg)
{
	g = root_of(g);
	struct graph_cleanup *c = xreallocarray(g->cleanups, g->n_cleanups + 1, sizeof *c);
	if (!c) {
		fn(arg);
		return -1;
	}
	g->cleanups = c;
	c[g->n_cleanups++] = (struct graph_cleanup){fn, arg};
	return 0;
}

/* A new value called name in the empty slot s of g->names (s NULL: out of memory). */
static struct value *add_value(struct graph *g, struct strmap_slot *s, const char *name, int copy, struct gd_err *e)
{
	struct value *v = s ? arena_zalloc(g->arena, sizeof *v) : NULL;
	if (v && copy)
		name = arena_strdup(g->arena, name);
	if (!v || !name || GROW(g, g->values, g->n_values, g->cap_values)) {
		err_oom(e);
		return NULL;
	}
	strmap_fill(&g->names, s, name, v);
	v->name = name;
	v->id = g->n_values;
	g->values[g->n_values++] = v;
	return v;
}

static struct value *get_value(struct graph *g, const char *name, int copy, struct gd_err *e)
{
	struct strmap_slot *s = strmap_slot(&g->names, name);
	return s && s->key ? s->val : add_value(g, s, name, copy, e);
}

struct value *graph_value(struct graph *g, const char *name, struct gd_err *e)
{
	return get_value(g, name, 0, e);
}

struct value *graph_value_copy(struct graph *g, const char *name, struct gd_err *e)
{
	return get_value(g, name, 1, e);
}

struct node *graph_add_node(struct graph *g, struct gd_err *e)
{
	struct node *n = arena_zalloc(g->arena, sizeof *n);
	if (!n || GROW(g, g->nodes, g->n_nodes, g->cap_nodes)) {
		err_oom(e);
		return NULL;
	}
	n->index = g->n_nodes;
	g->nodes[g->n_nodes++] = n;
	return n;
}

const struct node_ext node_ext_none;

int node_set_ext(struct graph *g, struct node *n, const struct node_ext *x)
{
	if (!x->doc && !x->overload && !x->n_meta && !x->x.n) {
		n->ext = NULL;
		return 0;
	}
	return (n->ext = arena_memdup(g->arena, x, sizeof *x)) ? 0 : -1;
}

const struct value_ext value_ext_none;

int value_set_ext(struct graph *g, struct value *v, const struct value_ext *x)
{
	if (!x->doc && !x->denotation && !x->x.n && !x->type_x.n && !x->tensor_x.n && !x->shape_x.n)
		return 0;
	return (v->ext = arena_memdup(g->arena, x, sizeof *x)) ? 0 : -1;
}

int graph_rename_value(struct graph *g, struct value *v, const char *name, struct gd_err *e)
{
	if (strmap_get(&g->names, name))
		return err_set(e, GD_EINPUT, "value name '%s' is already used", name);
	strmap_del(&g->names, v->name);
	if (strmap_put(&g->names, name, v))
		return err_oom(e);
	v->name = name;
	return 0;
}

/* Writes "_k" and the terminator at s (at most 22 bytes), without printf: autodiff names millions. */
static void put_suffix(char *s, uint64_t k)
{
	*s = '_';
	u64_dec(s + 1, k);
}

/* name_fresh for a base that is taken: base_k for the first k from next's record that is free. */
static const char *name_suffixed(struct arena *a, const struct strmap *taken, struct strmap *next, const char *base,
				 struct gd_err *e)
{
	struct strmap_slot *slot = strmap_slot(next, base);
	if (!slot) {
		err_oom(e);
		return NULL;
	}
	if (!slot->key) {
		char *key = arena_strdup(a, base);
		if (!key) {
			err_oom(e);
			return NULL;
		}
		strmap_fill(next, slot, key, (void *)(uintptr_t)1);
	}
	size_t len = strlen(base);
	char *s = arena_alloc(a, len + 22); /* base, then put_suffix's */
	if (!s) {
		err_oom(e);
		return NULL;
	}
	memcpy(s, base, len);
	for (uintptr_t k = (uintptr_t)slot->val;; k++) {
		put_suffix(s + len, k);
		if (!strmap_get(taken, s)) {
			slot->val = (void *)(k + 1);
			return s;
		}
	}
}

const char *name_fresh(struct arena *a, const struct strmap *taken, struct strmap *next, const char *base,
		       struct gd_err *e)
{
	if (strmap_get(taken, base))
		return name_suffixed(a, taken, next, base, e);
	char *s = arena_strdup(a, base);
	if (!s)
		err_oom(e);
	return s;
}

const char *graph_fresh_name(struct graph *g, const char *base, struct gd_err *e)
{
	return name_fresh(g->arena, &g->names, &root_of(g)->fresh, base, e);
}

int graph_rename_fresh(struct graph *g, struct value *v, const char *base, struct gd_err *e)
{
	strmap_del(&g->names, v->name);
	struct strmap_slot *s = strmap_slot(&g->names, base);
	const char *name = NULL;
	if (s && !s->key)
		name = arena_strdup(g->arena, base);
	else if (s && (name = name_suffixed(g->arena, &g->names, &root_of(g)->fresh, base, e)))
		s = strmap_slot(&g->names, name);
	if (!s || !name)
		return e->code ? e->code : err_oom(e);
	strmap_fill(&g->names, s, name, v);
	v->name = name;
	return 0;
}

struct value *graph_new_value_nth(struct graph *g, const char *base, uint64_t k, struct gd_err *e)
{
	char buf[600];
	const char *name = base;
	int direct = 1; /* base_k tried in one lookup, unless too long for buf */
	if (k) {
		size_t len = strlen(base);
		direct = len + 22 <= sizeof buf;
		if (direct) {
			memcpy(buf, base, len);
			put_suffix(buf + len, k);
			name = buf;
		}
	}
	struct strmap_slot *s = direct ? strmap_slot(&g->names, name) : NULL;
	if (direct && (!s || !s->key))
		return add_value(g, s, name, 1, e);
	const char *fresh = name_suffixed(g->arena, &g->names, &root_of(g)->fresh, base, e);
	return fresh ? add_value(g, strmap_slot(&g->names, fresh), fresh, 0, e) : NULL;
}

struct value *graph_new_value(struct graph *g, const char *base, struct gd_err *e)
{
	return graph_new_value_nth(g, base, 0, e);
}

static const char *const tag_names[] = {"forward", "backward", "recompute", "loss_scale", "diet", "comm"};

const char *node_tags_str(uint32_t tags, char *buf, size_t n)
{
	size_t k = 0; /* without printf: every node of a saved graph has its tags written */
	for (int i = 0; i < 6; i++) {
		size_t len = strlen(tag_names[i]);
		if (!(tags & (1u << i)) || k + (k > 0) + len >= n)
			continue;
		if (k)
			buf[k++] = ',';
		memcpy(buf + k, tag_names[i], len);
		k += len;
	}
	if (n)
		buf[k < n ? k : n - 1] = 0;
	return buf;
}

int node_tag_parse(const char *name, size_t len, uint32_t *tag)
{
	for (int i = 0; i < 6; i++)
		if (strlen(tag_names[i]) == len && !strncmp(tag_names[i], name, len)) {
			*tag = 1u << i;
			return 0;
		}
	return -1;
}

const char *node_desc(const struct node *n, char *buf, size_t size)
{
	const char *op = n->op_type ? n->op_type : "?";
	if (n->name && *n->name)
		snprintf(buf, size, "node '%s' (%s)", n->name, op);
	else
		snprintf(buf, size, "node #%u (%s)", n->index, op);
	return buf;
}

static const char *origin(const struct value *v)
{
	return v->flags & VALUE_INPUT ? "a graph input" : "an initializer";
}

int graph_set_output(struct graph *g, struct node *n, uint32_t i, const char *name, struct gd_err *e)
{
	if (!*name) { /* an omitted optional output */
		n->out[i] = NULL;
		return 0;
	}
	struct value *v = graph_value(g, name, e);
	return v ? graph_set_output_value(n, i, v, e) : GD_EINTERNAL;
}

int graph_set_output_value(struct node *n, uint32_t i, struct value *v, struct gd_err *e)
{
	char d1[300], d2[300];
	const char *name = v->name;
	if (v->producer)
		return err_set(e, GD_EINPUT, "%s: output '%s' is also produced by %s", node_desc(n, d1, sizeof d1),
			       name, node_desc(v->producer, d2, sizeof d2));
	if (v->flags & (VALUE_INPUT | VALUE_PARAM | VALUE_CONST))
		return err_set(e, GD_EINPUT, "%s: output '%s' is also %s", node_desc(n, d1, sizeof d1), name,
			       origin(v));
	v->producer = n;
	v->slot = i;
	n->out[i] = v;
	return 0;
}

static int push(struct value ***arr, uint32_t *n, uint32_t *cap, struct value *v, struct gd_err *e)
{
	if (*n == *cap && grow_array((void **)arr, cap, sizeof **arr))
		return err_oom(e);
	(*arr)[(*n)++] = v;
	return 0;
}

int graph_add_input(struct graph *g, struct value *v, struct gd_err *e)
{
	if (v->flags & VALUE_INPUT)
		return err_set(e, GD_EINPUT, "graph input '%s' is listed twice", v->name);
	v->flags |= VALUE_INPUT;
	return push(&g->inputs, &g->n_inputs, &g->cap_inputs, v, e);
}

int graph_add_output(struct graph *g, struct value *v, struct gd_err *e)
{
	v->flags |= VALUE_OUTPUT;
	return push(&g->outputs, &g->n_outputs, &g->cap_outputs, v, e);
}

int graph_add_info(struct graph *g, struct value *v, struct gd_err *e)
{
	v->flags |= VALUE_INFO;
	return push(&g->infos, &g->n_infos, &g->cap_infos, v, e);
}

int graph_add_init(struct graph *g, struct value *v, struct tensor *t, struct gd_err *e)
{
	if (v->init)
		return err_set(e, GD_EINPUT, "initializer '%s' is defined twice", v->name);
	v->init = t;
	v->flags |= dtype_is_float(t->dtype) ? VALUE_PARAM : VALUE_CONST;
	return push(&g->inits, &g->n_inits, &g->cap_inits, v, e);
}

int node_wait_for(struct graph *g, struct node *n, struct node *u)
{
	struct node **c = arena_array(g->arena, n->n_ctrl + 1, sizeof *c);
	if (!c)
		return -1;
	if (n->n_ctrl)
		memcpy(c, n->ctrl, n->n_ctrl * sizeof *c);
	c[n->n_ctrl] = u;
	n->ctrl = c;
	n->n_ctrl++;
	return 0;
}

void graph_unstore(struct graph *g, struct value *v)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < g->n_inits; i++)
		if (g->inits[i] != v)
			g->inits[k++] = g->inits[i];
	g->n_inits = k;
	k = 0;
	for (uint32_t i = 0; i < g->n_inputs; i++)
		if (g->inputs[i] != v)
			g->inputs[k++] = g->inputs[i];
	g->n_inputs = k;
	v->init = NULL;
	v->flags &= ~(VALUE_PARAM | VALUE_CONST | VALUE_INPUT);
}

const struct attr *node_attr(const struct node *n, const char *name)
{
	for (uint32_t i = 0; i < n->n_attr; i++)
		if (strcmp(n->attr[i].name, name) == 0)
			return &n->attr[i];
	return NULL;
}

/* -1: a dim is unknown or negative; -2: the count overflows. A 0 anywhere makes 0, whatever the
 * order of the dims. */
static int64_t numel(uint32_t ndim, const int64_t *dims, const struct dim *sdims)
{
	int zero = 0;
	for (uint32_t i = 0; i < ndim; i++) {
		if (sdims && sdims[i].kind != DIM_VALUE)
			return -1;
		int64_t d = sdims ? sdims[i].value : dims[i];
		if (d < 0)
			return -1;
		zero |= d == 0;
	}
	int64_t n = 1;
	for (uint32_t i = 0; i < ndim && !zero; i++) {
		int64_t d = sdims ? sdims[i].value : dims[i];
		if (n > INT64_MAX / d)
			return -2;
		n *= d;
	}
	return zero ? 0 : n;
}

const char *ttype_shape_str(const struct ttype *t, char *buf, size_t n)
{
	size_t k = (size_t)snprintf(buf, n, "[");
	for (uint32_t i = 0; i < t->ndim && k < n; i++) {
		const struct dim *d = &t->dims[i];
		if (d->kind == DIM_VALUE)
			k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, i ? ", " : "", d->value);
		else
			k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", d->kind == DIM_PARAM ? d->param : "?");
	}
	if (k < n)
		snprintf(buf + k, n - k, "]");
	return buf;
}

int64_t ttype_numel(const struct ttype *t)
{
	return t->has_shape ? numel(t->ndim, NULL, t->dims) : -1;
}

int64_t tensor_numel(const struct tensor *t)
{
	return numel(t->ndim, t->dims, NULL);
}

void graph_mark_resident(const struct graph *g, uint8_t *mark)
{
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		if (!node_is_forward(n))
			continue;
		uint8_t d = 1;
		for (uint32_t k = 0; k < n->n_in && d; k++)
			if (n->in[k])
				d = !mark[n->in[k]->id] ? 0 : mark[n->in[k]->id] > d ? mark[n->in[k]->id] : d;
		for (uint32_t k = 0; k < n->n_out; k++)
			if (n->out[k])
				mark[n->out[k]->id] = d;
	}
}

int graph_need_domain(struct graph *g, const char *domain)
{
	struct model *m = g->model;
	for (size_t i = 0; i < m->n_opsets; i++)
		if (m->opsets[i].domain && !strcmp(m->opsets[i].domain, domain))
			return 0;
	struct opset *o = arena_array(g->arena, m->n_opsets + 1, sizeof *o);
	if (!o)
		return -1;
	if (m->n_opsets)
		memcpy(o, m->opsets, m->n_opsets * sizeof *o);
	o[m->n_opsets] = (struct opset){.domain = domain, .version = 1, .has_version = true};
	m->opsets = o;
	m->n_opsets++;
	return 0;
}

const char *model_meta(const struct graph *g, const char *key)
{
	for (size_t i = 0; g->model && i < g->model->n_meta; i++)
		if (!strcmp(g->model->meta[i].key, key))
			return g->model->meta[i].value;
	return NULL;
}

int model_set_meta(struct graph *g, const char *key, const char *value)
{
	struct model *m = g->model;
	const char *v = arena_strdup(g->arena, value);
	if (!v)
		return -1;
	size_t i = 0;
	while (i < m->n_meta && strcmp(m->meta[i].key, key))
		i++;
	if (i == m->n_meta) {
		const char *k = arena_strdup(g->arena, key);
		struct kv *meta = k ? arena_array(g->arena, m->n_meta + 1, sizeof *meta) : NULL;
		if (!meta)
			return -1;
		if (m->n_meta)
			memcpy(meta, m->meta, m->n_meta * sizeof *meta);
		meta[m->n_meta] = (struct kv){.key = k};
		m->meta = meta;
		m->n_meta++;
	}
	m->meta[i].value = v;
	return 0;
}
