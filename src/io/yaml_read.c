/* yaml_read.c - YAML text -> IR (graphdiet-yaml(5)).
 *
 * libyaml loads the document tree; the IR's strings point into it, and the document is freed with
 * the graph. The reader is strict: an unknown key is an error naming its line, because a typo in a
 * hand-written graph ("atrs:") must not be silently ignored. */
#include "../util/base64.h"
#include "../util/xalloc.h"
#include "tensor.h"
#include "yaml.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

struct yr {
	yaml_document_t *doc;
	struct graph *root;
	struct arena *a;
	struct gd_err *e;
	const char *base_dir;
	int depth;      /* graph nesting, limited to GRAPH_MAX_DEPTH */
	int node_named; /* the error already names its (innermost) node */
};

typedef yaml_node_t ynode;

static int fail(struct yr *r, const ynode *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct yr *r, const ynode *n, const char *fmt, ...)
{
	char line[32];
	if (n)
		snprintf(line, sizeof line, "line %zu", n->start_mark.line + 1);
	va_list ap;
	va_start(ap, fmt);
	int rc = err_vat(r->e, n ? line : NULL, fmt, ap);
	va_end(ap);
	return rc;
}

static ynode *node_at(struct yr *r, int id)
{
	return yaml_document_get_node(r->doc, id);
}

static const char *kind(const ynode *n)
{
	return n->type == YAML_SCALAR_NODE ? "a scalar" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a mapping";
}

static int want(struct yr *r, const ynode *n, yaml_node_type_t t, const char *what)
{
	if (n->type == t)
		return 0;
	return fail(r, n, "%s must be %s, not %s", what,
		    t == YAML_SCALAR_NODE ? "a scalar" : t == YAML_SEQUENCE_NODE ? "a list" : "a mapping", kind(n));
}

static const char *scalar(const ynode *n)
{
	return (const char *)n->data.scalar.value;
}

static int is_null(const ynode *n)
{
	const char *s = scalar(n);
	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0);
}

/* Mapping iteration with a check that every key is one of `keys` (NULL-terminated). */
static int check_keys(struct yr *r, const ynode *map, const char *what, const char *const *keys)
{
	if (want(r, map, YAML_MAPPING_NODE, what))
		return -1;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		ynode *k = node_at(r, p->key);
		if (k->type != YAML_SCALAR_NODE)
			return fail(r, k, "%s: keys must be scalars", what);
		int ok = 0;
		for (const char *const *q = keys; *q && !ok; q++)
			ok = strcmp(*q, scalar(k)) == 0;
		if (!ok)
			return fail(r, k, "unknown key '%s' in %s", scalar(k), what);
	}
	return 0;
}

static ynode *get(struct yr *r, const ynode *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		ynode *k = node_at(r, p->key);
		if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), key) == 0)
			return node_at(r, p->value);
	}
	return NULL;
}

static int get_str(struct yr *r, const ynode *map, const char *key, const char **out)
{
	ynode *n = get(r, map, key);
	if (!n || is_null(n))
		return 0;
	if (want(r, n, YAML_SCALAR_NODE, key))
		return -1;
	*out = scalar(n);
	return 0;
}

static int parse_i64(struct yr *r, const ynode *n, const char *what, int64_t *out)
{
	if (want(r, n, YAML_SCALAR_NODE, what))
		return -1;
	const char *s = scalar(n);
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno)
		return fail(r, n, "%s: '%s' is not a 64-bit integer", what, s);
	*out = v;
	return 0;
}

static int parse_u64(struct yr *r, const ynode *n, const char *what, uint64_t *out)
{
	if (want(r, n, YAML_SCALAR_NODE, what))
		return -1;
	const char *s = scalar(n);
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || errno || *s == '-')
		return fail(r, n, "%s: '%s' is not an unsigned 64-bit integer", what, s);
	*out = v;
	return 0;
}

static int float_text(const char *s, double *out)
{
	if (!strcasecmp(s, ".nan") || !strcasecmp(s, "nan")) {
		*out = NAN;
		return 1;
	}
	if (!strcasecmp(s, ".inf") || !strcasecmp(s, "+.inf") || !strcasecmp(s, "inf")) {
		*out = INFINITY;
		return 1;
	}
	if (!strcasecmp(s, "-.inf") || !strcasecmp(s, "-inf")) {
		*out = -INFINITY;
		return 1;
	}
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	return *s && !*end && errno != ERANGE;
}

static int parse_f64(struct yr *r, const ynode *n, const char *what, double *out)
{
	if (want(r, n, YAML_SCALAR_NODE, what))
		return -1;
	if (!float_text(scalar(n), out))
		return fail(r, n, "%s: '%s' is not a number", what, scalar(n));
	return 0;
}

static int get_i64(struct yr *r, const ynode *map, const char *key, int64_t *out, bool *has)
{
	ynode *n = get(r, map, key);
	if (!n)
		return 0;
	if (has)
		*has = true;
	return parse_i64(r, n, key, out);
}

static int get_bool(struct yr *r, const ynode *map, const char *key, bool *out)
{
	ynode *n = get(r, map, key);
	if (!n)
		return 0;
	if (want(r, n, YAML_SCALAR_NODE, key))
		return -1;
	const char *s = scalar(n);
	if (!strcmp(s, "true") || !strcmp(s, "True"))
		*out = true;
	else if (!strcmp(s, "false") || !strcmp(s, "False"))
		*out = false;
	else
		return fail(r, n, "%s: '%s' is not true or false", key, s);
	return 1;
}

static int decode_b64(struct yr *r, const ynode *n, const char *what, struct bytes *out)
{
	if (want(r, n, YAML_SCALAR_NODE, what))
		return -1;
	size_t len = n->data.scalar.length;
	uint8_t *buf = arena_alloc(r->a, base64_max_decoded(len));
	if (!buf)
		return err_oom(r->e);
	long long k = base64_decode(buf, scalar(n), len);
	if (k < 0)
		return fail(r, n, "%s: invalid base64", what);
	*out = (struct bytes){buf, (size_t)k};
	return 0;
}

static int extras_in(struct yr *r, const ynode *map, const char *key, struct extras *x)
{
	static const char *const keys[] = {"field", "wire", "data", NULL};
	ynode *l = get(r, map, key);
	if (!l)
		return 0;
	if (want(r, l, YAML_SEQUENCE_NODE, key))
		return -1;
	x->n = (size_t)(l->data.sequence.items.top - l->data.sequence.items.start);
	x->f = arena_array(r->a, x->n, sizeof *x->f);
	if (!x->f)
		return err_oom(r->e);
	for (size_t i = 0; i < x->n; i++) {
		ynode *it = node_at(r, l->data.sequence.items.start[i]);
		int64_t field = 0, wire = 0;
		struct bytes b = {0};
		ynode *d;
		if (check_keys(r, it, key, keys) || get_i64(r, it, "field", &field, NULL) ||
		    get_i64(r, it, "wire", &wire, NULL) || !(d = get(r, it, "data")) || decode_b64(r, d, "data", &b))
			return r->e->code ? -1 : fail(r, it, "%s: entry needs field, wire and data", key);
		if (field <= 0 || field > 536870911 || wire < 0 || wire > 5)
			return fail(r, it, "%s: bad field number or wire type", key);
		x->f[i] = (struct extra_field){(uint32_t)field, (uint8_t)wire, b.n, b.p};
	}
	return 0;
}

static int kvs_in(struct yr *r, const ynode *map, const char *key, struct kv **out, size_t *n)
{
	static const char *const keys[] = {"key", "value", "unknown", NULL};
	ynode *l = get(r, map, key);
	if (!l)
		return 0;
	if (want(r, l, YAML_SEQUENCE_NODE, key))
		return -1;
	*n = (size_t)(l->data.sequence.items.top - l->data.sequence.items.start);
	*out = arena_array(r->a, *n, sizeof **out);
	if (!*out)
		return err_oom(r->e);
	for (size_t i = 0; i < *n; i++) {
		ynode *it = node_at(r, l->data.sequence.items.start[i]);
		struct kv *kv = &(*out)[i];
		if (check_keys(r, it, key, keys) || get_str(r, it, "key", &kv->key) ||
		    get_str(r, it, "value", &kv->value) || extras_in(r, it, "unknown", &kv->x))
			return -1;
	}
	return 0;
}

static size_t seq_len(const ynode *n)
{
	return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

static int dtype_in(struct yr *r, const ynode *n, int *out)
{
	if (want(r, n, YAML_SCALAR_NODE, "dtype"))
		return -1;
	int dt = dtype_from_name(scalar(n));
	if (dt < 0) {
		int64_t v;
		char *end;
		v = strtoll(scalar(n), &end, 10);
		if (!*scalar(n) || *end)
			return fail(r, n, "unknown dtype '%s'", scalar(n));
		if (v < INT32_MIN || v > INT32_MAX)
			return fail(r, n, "unknown dtype %s", scalar(n));
		dt = (int)v; /* kept as a number: graph_check names it */
	}
	*out = dt;
	return 0;
}

static int dim_in(struct yr *r, const ynode *n, struct dim *d)
{
	static const char *const keys[] = {"dim", "denotation", "unknown", NULL};
	if (n->type == YAML_MAPPING_NODE) {
		ynode *v = get(r, n, "dim");
		if (check_keys(r, n, "dimension", keys) || get_str(r, n, "denotation", &d->denotation) ||
		    extras_in(r, n, "unknown", &d->x))
			return -1;
		if (!v)
			return fail(r, n, "dimension needs 'dim'");
		n = v;
	}
	if (want(r, n, YAML_SCALAR_NODE, "dimension"))
		return -1;
	if (is_null(n)) {
		d->kind = DIM_NONE;
		return 0;
	}
	const char *s = scalar(n);
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && *s && !*end) {
		if (errno)
			return fail(r, n, "dimension '%s' does not fit in 64 bits", s);
		d->kind = DIM_VALUE;
		d->value = v;
	} else {
		d->kind = DIM_PARAM;
		d->param = s;
	}
	return 0;
}

static int value_in(struct yr *r, struct graph *g, const ynode *n, struct value **out)
{
	static const char *const keys[] = {"name", "dtype", "shape", "doc", "denotation", "tensor_type", "type",
					   "unknown", "type_unknown", "tensor_unknown", "shape_unknown", NULL};
	const char *name = NULL;
	if (check_keys(r, n, "value", keys) || get_str(r, n, "name", &name))
		return -1;
	if (!name)
		return fail(r, n, "value entry has no name");
	struct value *v = graph_value(g, name, r->e);
	if (!v)
		return -1;
	*out = v;
	if (v->type.has_type || v->ext)
		return 0; /* the first listing of a value describes it */
	struct ttype *t = &v->type;
	ynode *dt = get(r, n, "dtype"), *sh = get(r, n, "shape");
	bool tensor = dt || sh, typed = true;
	if (get_bool(r, n, "tensor_type", &tensor) < 0 || get_bool(r, n, "type", &typed) < 0)
		return -1;
	t->has_type = typed;
	t->has_tensor = typed && tensor;
	t->has_dtype = dt != NULL;
	if (dt && dtype_in(r, dt, &t->dtype))
		return -1;
	if (sh) {
		if (want(r, sh, YAML_SEQUENCE_NODE, "shape"))
			return -1;
		t->has_shape = true;
		t->ndim = (uint32_t)seq_len(sh);
		t->dims = arena_array(r->a, t->ndim ? t->ndim : 1, sizeof *t->dims);
		if (!t->dims)
			return err_oom(r->e);
		for (uint32_t i = 0; i < t->ndim; i++)
			if (dim_in(r, node_at(r, sh->data.sequence.items.start[i]), &t->dims[i]))
				return -1;
	}
	struct value_ext x = {0};
	if (get_str(r, n, "doc", &x.doc) || get_str(r, n, "denotation", &x.denotation) ||
	    extras_in(r, n, "unknown", &x.x) || extras_in(r, n, "type_unknown", &x.type_x) ||
	    extras_in(r, n, "tensor_unknown", &x.tensor_x) || extras_in(r, n, "shape_unknown", &x.shape_x))
		return -1;
	return value_set_ext(g, v, &x) ? err_oom(r->e) : 0;
}

/* Inline numbers -> element bytes, range-checked against the dtype. */
static int data_in(struct yr *r, struct tensor *t, const ynode *l)
{
	if (want(r, l, YAML_SEQUENCE_NODE, "data"))
		return -1;
	size_t n = seq_len(l), es = dtype_size(t->dtype);
	if (!es || t->dtype == DT_FLOAT16 || t->dtype == DT_BFLOAT16 || t->dtype >= DT_FLOAT8E4M3FN ||
	    t->dtype == DT_COMPLEX64 || t->dtype == DT_COMPLEX128)
		return fail(r, l, "tensor '%s': inline data is not supported for %s; use raw:", t->name,
			    dtype_name(t->dtype));
	uint8_t *p = arena_array(r->a, n, es);
	if (!p)
		return err_oom(r->e);
	for (size_t i = 0; i < n; i++) {
		ynode *it = node_at(r, l->data.sequence.items.start[i]);
		if (t->dtype == DT_FLOAT || t->dtype == DT_DOUBLE) {
			double v;
			if (parse_f64(r, it, "data", &v))
				return -1;
			if (t->dtype == DT_FLOAT) {
				float f = (float)v;
				memcpy(p + 4 * i, &f, 4);
			} else {
				memcpy(p + 8 * i, &v, 8);
			}
			continue;
		}
		int64_t v = 0;
		uint64_t u = 0;
		int is_unsigned = t->dtype == DT_UINT64;
		if (t->dtype == DT_BOOL && it->type == YAML_SCALAR_NODE &&
		    (!strcmp(scalar(it), "true") || !strcmp(scalar(it), "false")))
			v = !strcmp(scalar(it), "true");
		else if (is_unsigned ? parse_u64(r, it, "data", &u) : parse_i64(r, it, "data", &v))
			return -1;
		int64_t lo, hi;
		switch (t->dtype) {
		case DT_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
		case DT_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
		case DT_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
		case DT_UINT8: lo = 0; hi = UINT8_MAX; break;
		case DT_UINT16: lo = 0; hi = UINT16_MAX; break;
		case DT_UINT32: lo = 0; hi = UINT32_MAX; break;
		case DT_BOOL: lo = 0; hi = 1; break;
		default: lo = INT64_MIN; hi = INT64_MAX; break;
		}
		if (!is_unsigned && (v < lo || v > hi))
			return fail(r, it, "tensor '%s': %" PRId64 " is out of range for %s", t->name, v,
				    dtype_name(t->dtype));
		if (is_unsigned)
			memcpy(p + 8 * i, &u, 8);
		else
			memcpy(p + es * i, &v, es); /* little-endian: the low bytes */
	}
	t->src = TSRC_BYTES;
	t->bytes = (struct bytes){p, n * es};
	return 0;
}

static int init_in(struct yr *r, struct tensor *t, const ynode *n)
{
	static const char *const keys[] = {"dist", "mean", "std", "low", "high", "value", "seed", NULL};
	t->src = TSRC_RANDOM;
	t->rnd = (struct rnd_init){RND_CONSTANT, 0, 0, 0};
	if (n->type == YAML_SCALAR_NODE) {
		if (!strcmp(scalar(n), "zeros"))
			return 0;
		if (!strcmp(scalar(n), "ones")) {
			t->rnd.a = 1;
			return 0;
		}
		return fail(r, n, "init: '%s' is not zeros, ones or a mapping", scalar(n));
	}
	const char *dist = NULL;
	if (check_keys(r, n, "init", keys) || get_str(r, n, "dist", &dist))
		return -1;
	ynode *x;
	uint64_t seed = 0;
	if ((x = get(r, n, "seed")) && parse_u64(r, x, "seed", &seed))
		return -1;
	t->rnd.seed = seed;
	const char *ka, *kb;
	double da = 0, db = 0;
	if (!dist || !strcmp(dist, "normal")) {
		t->rnd.dist = RND_NORMAL;
		ka = "mean", kb = "std", db = 1;
	} else if (!strcmp(dist, "uniform")) {
		t->rnd.dist = RND_UNIFORM;
		ka = "low", kb = "high", db = 1;
	} else if (!strcmp(dist, "constant")) {
		ka = "value", kb = NULL;
	} else {
		return fail(r, n, "init: unknown dist '%s' (normal, uniform or constant)", dist);
	}
	t->rnd.a = da;
	t->rnd.b = db;
	if (((x = get(r, n, ka)) && parse_f64(r, x, ka, &t->rnd.a)) ||
	    (kb && (x = get(r, n, kb)) && parse_f64(r, x, kb, &t->rnd.b)))
		return -1;
	return 0;
}

/* A tensor's keys (params entries and tensor attributes). */
static struct tensor *tensor_in(struct yr *r, const ynode *n, int named)
{
	static const char *const keys[] = {"name", "dtype", "shape", "doc", "data_location", "external", "typed",
					   "data", "raw", "strings", "npy", "init", "unknown", NULL};
	struct tensor *t = arena_zalloc(r->a, sizeof *t);
	if (!t) {
		err_oom(r->e);
		return NULL;
	}
	t->base_dir = r->base_dir;
	if (check_keys(r, n, "tensor", keys) || get_str(r, n, "name", &t->name) || get_str(r, n, "doc", &t->doc))
		return NULL;
	if (named && !t->name) {
		fail(r, n, "params entry has no name");
		return NULL;
	}
	const char *nm = t->name ? t->name : "";
	ynode *dt = get(r, n, "dtype"), *sh = get(r, n, "shape");
	if (!dt) {
		fail(r, n, "tensor '%s' has no dtype", nm);
		return NULL;
	}
	if (dtype_in(r, dt, &t->dtype))
		return NULL;
	if (!dtype_valid(t->dtype)) {
		fail(r, dt, "tensor '%s': unknown dtype %d", nm, t->dtype);
		return NULL;
	}
	if (sh) {
		if (want(r, sh, YAML_SEQUENCE_NODE, "shape"))
			return NULL;
		t->ndim = (uint32_t)seq_len(sh);
		t->dims = arena_array(r->a, t->ndim ? t->ndim : 1, sizeof *t->dims);
		if (!t->dims) {
			err_oom(r->e);
			return NULL;
		}
		for (uint32_t i = 0; i < t->ndim; i++)
			if (parse_i64(r, node_at(r, sh->data.sequence.items.start[i]), "shape", &t->dims[i]))
				return NULL;
	}
	int64_t loc = 0;
	bool typed = false;
	if (get_i64(r, n, "data_location", &loc, &t->has_location) ||
	    kvs_in(r, n, "external", &t->external, &t->n_external) || get_bool(r, n, "typed", &typed) < 0 ||
	    extras_in(r, n, "unknown", &t->x))
		return NULL;
	t->location = (int32_t)loc;
	t->field = typed ? TFIELD_TYPED : TFIELD_RAW;
	int sources = 0;
	ynode *x;
	if ((x = get(r, n, "data")) && (++sources, data_in(r, t, x)))
		return NULL;
	if ((x = get(r, n, "raw"))) {
		sources++;
		if (decode_b64(r, x, "raw", &t->bytes))
			return NULL;
		t->src = TSRC_BYTES;
	}
	if ((x = get(r, n, "strings"))) {
		sources++;
		if (want(r, x, YAML_SEQUENCE_NODE, "strings"))
			return NULL;
		t->src = TSRC_STRINGS;
		t->field = TFIELD_TYPED;
		t->n_strings = seq_len(x);
		t->strings = arena_array(r->a, t->n_strings, sizeof *t->strings);
		if (!t->strings) {
			err_oom(r->e);
			return NULL;
		}
		for (size_t i = 0; i < t->n_strings; i++) {
			ynode *s = node_at(r, x->data.sequence.items.start[i]);
			if (s->type == YAML_MAPPING_NODE && get(r, s, "base64")) {
				if (decode_b64(r, get(r, s, "base64"), "base64", &t->strings[i]))
					return NULL;
			} else if (want(r, s, YAML_SCALAR_NODE, "strings")) {
				return NULL;
			} else {
				t->strings[i] = (struct bytes){(const uint8_t *)scalar(s), s->data.scalar.length};
			}
		}
	}
	if ((x = get(r, n, "npy"))) {
		sources++;
		if (get_str(r, n, "npy", &t->path))
			return NULL;
		t->src = TSRC_NPY;
	}
	if ((x = get(r, n, "init")) && (++sources, init_in(r, t, x)))
		return NULL;
	if (t->has_location && t->location == 1) {
		sources++;
		t->src = TSRC_EXTERNAL;
	}
	if (sources > 1) {
		fail(r, n, "tensor '%s' has more than one of data, raw, strings, npy, init and external data", nm);
		return NULL;
	}
	if (tensor_check_source(t, r->e)) {
		err_prefix(r->e, "line %zu", n->start_mark.line + 1);
		return NULL;
	}
	return t;
}

static int graph_in(struct yr *r, struct graph *g, const ynode *n, int top);

static struct graph *subgraph_in(struct yr *r, struct graph *parent, const ynode *n)
{
	if (r->depth >= GRAPH_MAX_DEPTH) {
		fail(r, n, "subgraphs are nested more than %d deep", GRAPH_MAX_DEPTH);
		return NULL;
	}
	struct graph *s = graph_new_sub(parent);
	if (!s) {
		err_oom(r->e);
		return NULL;
	}
	r->depth++;
	int rc = graph_in(r, s, n, 0);
	r->depth--;
	return rc ? NULL : s;
}

static const char *attr_type_names[] = {"undefined", "float", "int", "string", "tensor", "graph", "floats",
					"ints", "strings", "tensors", "graphs", "sparse_tensor", "sparse_tensors",
					"type_proto", "type_protos"};

/* A scalar attribute value: its type from how it is written. */
static int scalar_kind(const ynode *n)
{
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return ATTR_STRING;
	const char *s = scalar(n);
	char *end;
	errno = 0;
	strtoll(s, &end, 10);
	if (*s && !*end && !errno)
		return ATTR_INT;
	double d;
	return float_text(s, &d) ? ATTR_FLOAT : ATTR_STRING;
}

static int bytes_in(struct yr *r, const ynode *n, struct bytes *out)
{
	if (n->type == YAML_MAPPING_NODE && get(r, n, "base64"))
		return decode_b64(r, get(r, n, "base64"), "base64", out);
	if (want(r, n, YAML_SCALAR_NODE, "string"))
		return -1;
	*out = (struct bytes){(const uint8_t *)scalar(n), n->data.scalar.length};
	return 0;
}

static int attr_value(struct yr *r, struct graph *g, struct attr *a, const ynode *v)
{
	switch (a->type) {
	case ATTR_FLOAT: {
		double d;
		if (parse_f64(r, v, a->name, &d))
			return -1;
		a->f = (float)d;
		return 0;
	}
	case ATTR_INT:
		return parse_i64(r, v, a->name, &a->i);
	case ATTR_STRING:
		return bytes_in(r, v, &a->s);
	case ATTR_TENSOR:
		return (a->t = tensor_in(r, v, 0)) ? 0 : -1;
	case ATTR_GRAPH:
		return (a->g = subgraph_in(r, g, v)) ? 0 : -1;
	default:
		break;
	}
	if (want(r, v, YAML_SEQUENCE_NODE, a->name))
		return -1;
	a->n = seq_len(v);
	size_t size = a->type == ATTR_FLOATS ? sizeof(float) : a->type == ATTR_INTS ? sizeof(int64_t)
		    : a->type == ATTR_STRINGS ? sizeof(struct bytes) : sizeof(void *);
	void *arr = arena_array(r->a, a->n ? a->n : 1, size);
	if (!arr)
		return err_oom(r->e);
	for (size_t i = 0; i < a->n; i++) {
		ynode *it = node_at(r, v->data.sequence.items.start[i]);
		double d;
		switch (a->type) {
		case ATTR_FLOATS:
			if (parse_f64(r, it, a->name, &d))
				return -1;
			((float *)arr)[i] = (float)d;
			break;
		case ATTR_INTS:
			if (parse_i64(r, it, a->name, &((int64_t *)arr)[i]))
				return -1;
			break;
		case ATTR_STRINGS:
			if (bytes_in(r, it, &((struct bytes *)arr)[i]))
				return -1;
			break;
		case ATTR_TENSORS:
			if (!(((struct tensor **)arr)[i] = tensor_in(r, it, 0)))
				return -1;
			break;
		case ATTR_GRAPHS:
			if (!(((struct graph **)arr)[i] = subgraph_in(r, g, it)))
				return -1;
			break;
		default:
			return fail(r, v, "attribute '%s': values of type %d cannot be given in YAML", a->name, a->type);
		}
	}
	a->floats = arr;
	a->ints = arr;
	a->strings = arr;
	a->tensors = arr;
	a->graphs = arr;
	return 0;
}

/* A number written without a point is an int in YAML's short form; where the op registry types the
 * attribute float (or floats) and never int, it is read as one (`alpha: 1`), as ONNX requires. */
static int short_form_type(enum op_id op, const char *name, int type)
{
	int k, fl = 0, in = 0;
	const struct op_attr *row = op_attr_rows(op, name, &k);
	for (int i = 0; row && i < k; i++) {
		fl |= row[i].type == (type == ATTR_INT ? ATTR_FLOAT : ATTR_FLOATS);
		in |= row[i].type == type;
	}
	return fl && !in ? (type == ATTR_INT ? ATTR_FLOAT : ATTR_FLOATS) : type;
}

static int attr_in(struct yr *r, struct graph *g, enum op_id op, struct attr *a, const ynode *k, const ynode *v)
{
	static const char *const keys[] = {"type", "value", "has_type", "doc", "ref", "unknown", "base64", NULL};
	a->name = scalar(k);
	a->has_type = true;
	if (v->type == YAML_MAPPING_NODE && get(r, v, "base64") && !get(r, v, "type")) {
		a->type = ATTR_STRING;
		return bytes_in(r, v, &a->s);
	}
	if (v->type == YAML_MAPPING_NODE) { /* explicit form */
		ynode *t = get(r, v, "type"), *val = get(r, v, "value");
		if (check_keys(r, v, "attribute", keys) || get_str(r, v, "doc", &a->doc) ||
		    get_str(r, v, "ref", &a->ref) || get_bool(r, v, "has_type", &a->has_type) < 0 ||
		    extras_in(r, v, "unknown", &a->x))
			return -1;
		if (!t || want(r, t, YAML_SCALAR_NODE, "type"))
			return r->e->code ? -1 : fail(r, v, "attribute '%s' needs a type", a->name);
		a->type = -1;
		for (int i = 0; i <= ATTR_TYPE_PROTOS; i++)
			if (!strcmp(scalar(t), attr_type_names[i]))
				a->type = i;
		if (a->type < 0) {
			int64_t num;
			if (parse_i64(r, t, "type", &num))
				return -1;
			a->type = (int)num;
		}
		if (!val)
			return a->type >= ATTR_FLOAT && a->type <= ATTR_GRAPHS && a->type != ATTR_FLOATS &&
					       a->type != ATTR_INTS && a->type != ATTR_STRINGS &&
					       a->type != ATTR_TENSORS && a->type != ATTR_GRAPHS
				       ? fail(r, v, "attribute '%s' needs a value", a->name)
				       : 0;
		return attr_value(r, g, a, val);
	}
	if (v->type == YAML_SCALAR_NODE) {
		a->type = scalar_kind(v);
		if (a->type == ATTR_INT)
			a->type = short_form_type(op, a->name, ATTR_INT);
		return attr_value(r, g, a, v);
	}
	/* a list: ints if every item is an int, floats if every item is a number, else strings */
	size_t n = seq_len(v);
	if (!n)
		return fail(r, v, "attribute '%s': an empty list needs the explicit form {type: ints, value: []}",
			    a->name);
	int all_int = 1, all_num = 1;
	for (size_t i = 0; i < n; i++) {
		ynode *it = node_at(r, v->data.sequence.items.start[i]);
		int k = it->type == YAML_SCALAR_NODE ? scalar_kind(it) : ATTR_STRING;
		all_int &= k == ATTR_INT;
		all_num &= k == ATTR_INT || k == ATTR_FLOAT;
	}
	a->type = all_int ? short_form_type(op, a->name, ATTR_INTS) : all_num ? ATTR_FLOATS : ATTR_STRINGS;
	return attr_value(r, g, a, v);
}

static int names_in(struct yr *r, const ynode *l, const char *what, uint32_t *n)
{
	if (!l) {
		*n = 0;
		return 0;
	}
	if (want(r, l, YAML_SEQUENCE_NODE, what))
		return -1;
	for (size_t i = 0; i < seq_len(l); i++)
		if (want(r, node_at(r, l->data.sequence.items.start[i]), YAML_SCALAR_NODE, what))
			return -1;
	*n = (uint32_t)seq_len(l);
	return 0;
}

static const char *item(struct yr *r, const ynode *l, uint32_t i)
{
	return scalar(node_at(r, l->data.sequence.items.start[i]));
}

static int node_in(struct yr *r, struct graph *g, const ynode *y)
{
	static const char *const keys[] = {"name", "op", "domain", "overload", "inputs", "outputs", "attrs",
					   "after", "tags", "doc", "meta", "unknown", NULL};
	struct node *n = graph_add_node(g, r->e);
	if (!n || want(r, y, YAML_MAPPING_NODE, "node") || get_str(r, y, "name", &n->name) ||
	    get_str(r, y, "op", &n->op_type))
		return -1;
	if (!n->op_type)
		return fail(r, y, "node '%s' has no op", n->name ? n->name : "");
	char d[300];
	struct node_ext x = {0};
	if (check_keys(r, y, "node", keys) || get_str(r, y, "domain", &n->domain) ||
	    get_str(r, y, "overload", &x.overload) || get_str(r, y, "doc", &x.doc))
		goto prefixed;
	n->op = op_lookup(n->domain, n->op_type);
	ynode *ins = get(r, y, "inputs"), *outs = get(r, y, "outputs"), *attrs = get(r, y, "attrs");
	if (names_in(r, ins, "inputs", &n->n_in) || names_in(r, outs, "outputs", &n->n_out))
		goto prefixed;
	n->in = arena_array(r->a, n->n_in + n->n_out, sizeof *n->in);
	if (!n->in)
		return err_oom(r->e);
	n->out = n->in + n->n_in;
	for (uint32_t i = 0; i < n->n_in; i++)
		if (*item(r, ins, i) && !(n->in[i] = graph_value(g, item(r, ins, i), r->e)))
			return -1;
	for (uint32_t i = 0; i < n->n_out; i++)
		if (graph_set_output(g, n, i, item(r, outs, i), r->e)) {
			err_prefix(r->e, "line %zu", y->start_mark.line + 1);
			return -1;
		}
	if (attrs) {
		if (want(r, attrs, YAML_MAPPING_NODE, "attrs"))
			goto prefixed;
		n->n_attr = (uint32_t)(attrs->data.mapping.pairs.top - attrs->data.mapping.pairs.start);
		n->attr = arena_array(r->a, n->n_attr, sizeof *n->attr);
		if (!n->attr)
			return err_oom(r->e);
		for (uint32_t i = 0; i < n->n_attr; i++) {
			yaml_node_pair_t *p = &attrs->data.mapping.pairs.start[i];
			ynode *k = node_at(r, p->key);
			if (want(r, k, YAML_SCALAR_NODE, "attribute name") ||
			    attr_in(r, g, n->op, &n->attr[i], k, node_at(r, p->value)))
				goto prefixed;
		}
	}
	ynode *tags = get(r, y, "tags");
	uint32_t nt = 0;
	if (tags && names_in(r, tags, "tags", &nt))
		goto prefixed;
	for (uint32_t i = 0; i < nt; i++) {
		uint32_t tag;
		if (node_tag_parse(item(r, tags, i), strlen(item(r, tags, i)), &tag)) {
			fail(r, tags, "unknown tag '%s' (forward, backward, recompute, loss_scale, diet or comm)", item(r, tags, i));
			goto prefixed;
		}
		n->tags |= tag;
	}
	if (kvs_in(r, y, "meta", &x.meta, &(size_t){0}) || extras_in(r, y, "unknown", &x.x))
		goto prefixed;
	ynode *m = get(r, y, "meta");
	x.n_meta = m && m->type == YAML_SEQUENCE_NODE ? (uint32_t)seq_len(m) : 0;
	return node_set_ext(g, n, &x) ? err_oom(r->e) : 0;
prefixed:
	if (r->e->code == GD_EINPUT && !r->node_named) {
		r->node_named = 1;
		/* "line N: msg" -> "line N: node 'x' (Op): msg" */
		char rest[sizeof r->e->msg];
		const char *colon = strncmp(r->e->msg, "line ", 5) == 0 ? strstr(r->e->msg, ": ") : NULL;
		if (colon) {
			size_t head = (size_t)(colon - r->e->msg);
			snprintf(rest, sizeof rest, "%s", colon + 2);
			snprintf(r->e->msg + head, sizeof r->e->msg - head, ": %s: %s", node_desc(n, d, sizeof d), rest);
		} else {
			err_prefix(r->e, "%s", node_desc(n, d, sizeof d));
		}
	}
	return -1;
}

static int after_in(struct yr *r, struct graph *g, const ynode *nodes)
{
	struct strmap by_name;
	int rc = 0, built = 0;
	strmap_init(&by_name);
	for (uint32_t i = 0; i < g->n_nodes && !rc; i++) {
		ynode *y = node_at(r, nodes->data.sequence.items.start[i]);
		ynode *l = get(r, y, "after");
		struct node *n = g->nodes[i];
		char d[300];
		if (!l)
			continue;
		if (!built) {
			for (uint32_t j = 0; j < g->n_nodes && !rc; j++) {
				struct node *o = g->nodes[j];
				if (!o->name)
					continue;
				/* a name used twice maps to the graph itself, meaning "ambiguous" */
				if (strmap_put(&by_name, o->name, strmap_get(&by_name, o->name) ? (void *)g : o))
					rc = err_oom(r->e);
			}
			built = 1;
		}
		if (rc)
			break;
		if (names_in(r, l, "after", &n->n_ctrl)) {
			rc = -1;
			break;
		}
		n->ctrl = arena_array(r->a, n->n_ctrl, sizeof *n->ctrl);
		if (!n->ctrl) {
			rc = err_oom(r->e);
			break;
		}
		for (uint32_t k = 0; k < n->n_ctrl && !rc; k++) {
			void *dep = strmap_get(&by_name, item(r, l, k));
			if (!dep)
				rc = fail(r, l, "%s: 'after' names unknown node '%s'", node_desc(n, d, sizeof d),
					  item(r, l, k));
			else if (dep == g)
				rc = fail(r, l, "%s: 'after' names '%s', which several nodes are called",
					  node_desc(n, d, sizeof d), item(r, l, k));
			else
				n->ctrl[k] = dep;
		}
	}
	strmap_free(&by_name);
	return rc ? -1 : 0;
}

static int values_in(struct yr *r, struct graph *g, const ynode *map, const char *key,
		     int (*add)(struct graph *, struct value *, struct gd_err *))
{
	ynode *l = get(r, map, key);
	if (!l)
		return 0;
	if (want(r, l, YAML_SEQUENCE_NODE, key))
		return -1;
	for (size_t i = 0; i < seq_len(l); i++) {
		ynode *it = node_at(r, l->data.sequence.items.start[i]);
		struct value *v = NULL;
		if (value_in(r, g, it, &v))
			return -1;
		if (add(g, v, r->e)) {
			err_prefix(r->e, "line %zu", it->start_mark.line + 1);
			return -1;
		}
	}
	return 0;
}

static const char *const graph_keys[] = {"name", "doc", "inputs", "params", "nodes", "outputs", "values",
					 "unknown", NULL};
static const char *const top_keys[] = {"name", "doc", "inputs", "params", "nodes", "outputs", "values",
				       "unknown", "graphdiet", "ir_version", "opset", "opsets", "producer_name",
				       "producer_version", "domain", "model_version", "model_doc", "metadata",
				       "model_unknown", "training_info", NULL};

static int graph_in(struct yr *r, struct graph *g, const ynode *n, int top)
{
	if (check_keys(r, n, top ? "graph" : "subgraph", top ? top_keys : graph_keys) ||
	    get_str(r, n, "name", &g->name) || get_str(r, n, "doc", &g->doc) || extras_in(r, n, "unknown", &g->x) ||
	    values_in(r, g, n, "inputs", graph_add_input))
		return -1;
	ynode *params = get(r, n, "params"), *nodes = get(r, n, "nodes");
	if (params) {
		if (want(r, params, YAML_SEQUENCE_NODE, "params"))
			return -1;
		for (size_t i = 0; i < seq_len(params); i++) {
			ynode *it = node_at(r, params->data.sequence.items.start[i]);
			struct tensor *t = tensor_in(r, it, 1);
			struct value *v = t ? graph_value(g, t->name, r->e) : NULL;
			if (!v)
				return -1;
			if (graph_add_init(g, v, t, r->e)) {
				err_prefix(r->e, "line %zu", it->start_mark.line + 1);
				return -1;
			}
		}
	}
	if (nodes) {
		if (want(r, nodes, YAML_SEQUENCE_NODE, "nodes"))
			return -1;
		for (size_t i = 0; i < seq_len(nodes); i++)
			if (node_in(r, g, node_at(r, nodes->data.sequence.items.start[i])))
				return -1;
		if (after_in(r, g, nodes))
			return -1;
	}
	return values_in(r, g, n, "outputs", graph_add_output) || values_in(r, g, n, "values", graph_add_info) ? -1
														: 0;
}

static int opsets_in(struct yr *r, struct model *m, const ynode *top)
{
	static const char *const keys[] = {"domain", "version", "unknown", NULL};
	ynode *one = get(r, top, "opset"), *l = get(r, top, "opsets");
	if (one && l)
		return fail(r, one, "give either opset or opsets, not both");
	if (one) {
		m->n_opsets = 1;
		m->opsets = arena_zalloc(r->a, sizeof *m->opsets);
		if (!m->opsets)
			return err_oom(r->e);
		m->opsets[0].has_version = true; /* no domain field: the default domain */
		return parse_i64(r, one, "opset", &m->opsets[0].version);
	}
	if (!l)
		return 0;
	if (want(r, l, YAML_SEQUENCE_NODE, "opsets"))
		return -1;
	m->n_opsets = seq_len(l);
	m->opsets = arena_array(r->a, m->n_opsets, sizeof *m->opsets);
	if (!m->opsets)
		return err_oom(r->e);
	for (size_t i = 0; i < m->n_opsets; i++) {
		ynode *it = node_at(r, l->data.sequence.items.start[i]);
		struct opset *o = &m->opsets[i];
		if (check_keys(r, it, "opsets", keys) || get_str(r, it, "domain", &o->domain) ||
		    get_i64(r, it, "version", &o->version, &o->has_version) || extras_in(r, it, "unknown", &o->x))
			return -1;
	}
	return 0;
}

static int training_in(struct yr *r, struct model *m, const ynode *top)
{
	static const char *const keys[] = {"initialization", "algorithm", "initialization_binding",
					   "update_binding", "unknown", NULL};
	ynode *l = get(r, top, "training_info");
	if (!l)
		return 0;
	if (want(r, l, YAML_SEQUENCE_NODE, "training_info"))
		return -1;
	m->n_ti = seq_len(l);
	m->ti = arena_array(r->a, m->n_ti, sizeof *m->ti);
	if (!m->ti)
		return err_oom(r->e);
	for (size_t i = 0; i < m->n_ti; i++) {
		ynode *it = node_at(r, l->data.sequence.items.start[i]), *x;
		struct training_info *t = &m->ti[i];
		if (check_keys(r, it, "training_info", keys) ||
		    ((x = get(r, it, "initialization")) && !(t->init = subgraph_in(r, r->root, x))) ||
		    ((x = get(r, it, "algorithm")) && !(t->algo = subgraph_in(r, r->root, x))) ||
		    kvs_in(r, it, "initialization_binding", &t->init_bind, &t->n_init_bind) ||
		    kvs_in(r, it, "update_binding", &t->update_bind, &t->n_update_bind) ||
		    extras_in(r, it, "unknown", &t->x))
			return -1;
	}
	return 0;
}

static int model_in(struct yr *r, const ynode *top)
{
	struct model *m = r->root->model;
	ynode *ver;
	if (want(r, top, YAML_MAPPING_NODE, "a graphdiet YAML document"))
		return -1;
	if ((ver = get(r, top, "graphdiet"))) {
		int64_t v = 0;
		if (parse_i64(r, ver, "graphdiet", &v))
			return -1;
		if (v != YAML_FORMAT_VERSION)
			return fail(r, ver, "graphdiet YAML format version %" PRId64 " is not supported (this is %d)", v,
				    YAML_FORMAT_VERSION);
	}
	if (get_i64(r, top, "ir_version", &m->ir_version, &m->has_ir_version) ||
	    get_i64(r, top, "model_version", &m->model_version, &m->has_model_version) ||
	    get_str(r, top, "producer_name", &m->producer_name) ||
	    get_str(r, top, "producer_version", &m->producer_version) || get_str(r, top, "domain", &m->domain) ||
	    get_str(r, top, "model_doc", &m->doc) || kvs_in(r, top, "metadata", &m->meta, &m->n_meta) ||
	    extras_in(r, top, "model_unknown", &m->x) || opsets_in(r, m, top))
		return -1;
	if (!m->has_ir_version) {
		/* A hand-written graph need not say: take the IR version that goes with its opset. */
		int64_t opset = 0;
		for (size_t i = 0; i < m->n_opsets; i++)
			if (op_domain_is_default(m->opsets[i].domain) && m->opsets[i].version > opset)
				opset = m->opsets[i].version;
		m->has_ir_version = true;
		m->ir_version = opset >= 21 ? 10 : opset >= 19 ? 9 : 8;
	}
	return graph_in(r, r->root, top, 1) || training_in(r, m, top) ? -1 : 0;
}

/* ---- budgets, checked before reading ---- */

/* libyaml's scanner does work proportional to the flow nesting ([ and {) at every token, so
 * 200 KB of '[' took 81 s: the nesting is counted here first, skipping comments and quoted
 * scalars (a bracket inside a plain scalar of block context only makes the count larger). */
#define FLOW_DEPTH_MAX 512

static int flow_depth_ok(const uint8_t *p, size_t n, struct gd_err *e)
{
	int depth = 0;
	size_t line = 1;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];
		if (c == '\n') {
			line++;
		} else if (c == '#' && (i == 0 || p[i - 1] == ' ' || p[i - 1] == '\t' || p[i - 1] == '\n')) {
			while (i + 1 < n && p[i + 1] != '\n')
				i++;
		} else if (c == '"' || c == '\'') {
			for (i++; i < n && p[i] != c; i++) {
				line += p[i] == '\n';
				if (c == '"' && p[i] == '\\' && i + 1 < n)
					line += p[++i] == '\n';
			}
		} else if (c == '[' || c == '{') {
			if (++depth > FLOW_DEPTH_MAX)
				return err_set(e, GD_EINPUT, "line %zu: lists and mappings nested more than %d deep", line,
					       FLOW_DEPTH_MAX);
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return 0;
}

/* libyaml's loader makes an alias a second reference to its anchor's node, and this reader walks
 * the tree, so an aliased subtree is walked once per reference: 30 levels of two aliases each are
 * 2^30 walks (6.5 KB that exhausted memory). The nodes aliases add are counted first, per node
 * once (memoized, saturating), within ALIAS_ADDS_MAX; an alias inside its own anchor is refused.
 * The same walk refuses duplicate keys (the first one won, silently). */
#define ALIAS_ADDS_MAX (UINT64_C(1) << 20)
#define BLOCK_DEPTH_MAX 10000

struct doc_walk {
	struct yr *r;
	uint64_t *size; /* expanded size per node, 0: not yet counted */
	uint8_t *busy;  /* on the current path */
};

static int cmp_key(const void *a, const void *b)
{
	const ynode *x = *(ynode *const *)a, *y = *(ynode *const *)b;
	int c = strcmp(scalar(x), scalar(y));
	return c ? c : (x->start_mark.line > y->start_mark.line) - (x->start_mark.line < y->start_mark.line);
}

static int unique_keys(struct yr *r, const ynode *map)
{
	size_t k = 0, n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
	if (n < 2)
		return 0;
	ynode **keys = xmalloc(n * sizeof *keys);
	if (!keys)
		return err_oom(r->e);
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		ynode *key = node_at(r, p->key);
		if (key && key->type == YAML_SCALAR_NODE)
			keys[k++] = key;
	}
	qsort(keys, k, sizeof *keys, cmp_key);
	int rc = 0;
	for (size_t i = 1; i < k && !rc; i++)
		if (!strcmp(scalar(keys[i - 1]), scalar(keys[i])))
			rc = fail(r, keys[i], "duplicate key '%s' (also on line %zu)", scalar(keys[i]),
				  keys[i - 1]->start_mark.line + 1);
	xfree(keys);
	return rc;
}

static int walk_node(struct doc_walk *w, int id, int depth, uint64_t *out)
{
	struct yr *r = w->r;
	ynode *n = node_at(r, id);
	size_t i = (size_t)(id - 1);
	if (!n)
		return fail(r, NULL, "invalid YAML node reference");
	if (w->busy[i])
		return fail(r, n, "an alias refers to a node that contains it");
	if (w->size[i]) {
		*out = w->size[i];
		return 0;
	}
	if (depth > BLOCK_DEPTH_MAX)
		return fail(r, n, "nested more than %d deep", BLOCK_DEPTH_MAX);
	uint64_t size = 1, sub;
	w->busy[i] = 1;
	int rc = n->type == YAML_MAPPING_NODE ? unique_keys(r, n) : 0;
	if (n->type == YAML_SEQUENCE_NODE)
		for (yaml_node_item_t *it = n->data.sequence.items.start; !rc && it < n->data.sequence.items.top; it++)
			if (!(rc = walk_node(w, *it, depth + 1, &sub)))
				size = sub > UINT64_MAX / 4 - size ? UINT64_MAX / 4 : size + sub;
	if (n->type == YAML_MAPPING_NODE)
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start; !rc && p < n->data.mapping.pairs.top; p++) {
			uint64_t sk;
			if (!(rc = walk_node(w, p->key, depth + 1, &sk)) && !(rc = walk_node(w, p->value, depth + 1, &sub)))
				size = sub + sk > UINT64_MAX / 4 - size ? UINT64_MAX / 4 : size + sub + sk;
		}
	w->busy[i] = 0;
	w->size[i] = size;
	*out = size;
	return rc;
}

static int doc_ok(struct yr *r)
{
	size_t n = (size_t)(r->doc->nodes.top - r->doc->nodes.start);
	struct doc_walk w = {r, xcalloc(n + 1, sizeof *w.size), xcalloc(n + 1, 1)};
	uint64_t total = 0;
	int rc = !w.size || !w.busy ? err_oom(r->e) : walk_node(&w, 1, 0, &total);
	if (!rc && total > n + ALIAS_ADDS_MAX)
		rc = fail(r, NULL, "aliases expand the document to %s%" PRIu64 " nodes (%zu written): more than %" PRIu64
				   " added is refused",
			  total >= UINT64_MAX / 4 ? "over " : "", total, n, ALIAS_ADDS_MAX);
	xfree(w.size);
	xfree(w.busy);
	return rc;
}

static void free_doc(void *d)
{
	yaml_document_delete(d);
	xfree(d);
}

struct graph *yaml_read(const uint8_t *buf, size_t len, const char *path, const char *base_dir, struct gd_err *e)
{
	struct graph *g = graph_new(path);
	yaml_document_t *doc = xmalloc(sizeof *doc);
	if (!g || !doc) {
		graph_free(g);
		xfree(doc);
		err_oom(e);
		return NULL;
	}
	yaml_parser_t p;
	if (flow_depth_ok(buf, len, e)) {
		graph_free(g);
		xfree(doc);
		return NULL;
	}
	if (!yaml_parser_initialize(&p)) {
		graph_free(g);
		xfree(doc);
		err_oom(e);
		return NULL;
	}
	yaml_parser_set_input_string(&p, buf, len);
	if (!yaml_parser_load(&p, doc)) {
		if (p.error == YAML_MEMORY_ERROR)
			err_oom(e);
		else
			err_set(e, GD_EINPUT, "line %zu: invalid YAML: %s", p.problem_mark.line + 1,
				p.problem ? p.problem : "syntax error");
		yaml_parser_delete(&p);
		graph_free(g);
		xfree(doc);
		return NULL;
	}
	yaml_parser_delete(&p);
	if (graph_on_free(g, free_doc, doc)) {
		graph_free(g);
		err_oom(e);
		return NULL;
	}
	struct yr r = {doc, g, g->arena, e, base_dir ? arena_strdup(g->arena, base_dir) : NULL, 0, 0};
	ynode *top = yaml_document_get_root_node(doc);
	if (!top) {
		err_set(e, GD_EINPUT, "empty YAML document");
		graph_free(g);
		return NULL;
	}
	if (doc_ok(&r) || model_in(&r, top)) {
		if (!e->code)
			err_oom(e);
		graph_free(g);
		return NULL;
	}
	return g;
}
