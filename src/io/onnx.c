/* onnx.c - ONNX binary <-> IR.
 *
 * Reading: pbwire strips initializer raw_data from the main graph so protobuf-c decodes only
 * the skeleton; the IR then points at the mapped weight bytes and at protobuf-c's decoded strings
 * (both kept alive until graph_free), so nothing large is copied. Unknown fields decoded by
 * protobuf-c become IR extras and are handed back to protobuf-c on writing.
 *
 * Writing: the IR is turned into protobuf-c messages allocated in a scratch arena, whose bytes
 * fields point at the IR's data, and packed straight into the output stream. Control inputs are
 * recorded in the node's metadata_props under "graphdiet.after" (names separated by newlines),
 * so graphdiet reads them back; ONNX itself orders nodes by their position. */
#include "onnx.h"
#include "../util/bgwrite.h"
#include "../util/xalloc.h"
#include "nodewire.h"
#include "pbwire.h"
#include "tensor.h"
#include "proto/onnx.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTRL_KEY NODEWIRE_CTRL_KEY
#define TAGS_KEY NODEWIRE_TAGS_KEY

/* ---------------------------------------------------------------- reading */

/* The reader copies what it keeps into the graph's arena and frees each decoded message as soon
 * as it is converted, so decoded protobuf-c structures never pile up. Helpers that only copy record
 * an allocation failure in r->oom instead of returning it; it is checked once per message. */
struct rd {
	struct graph *root;
	struct arena *a;
	struct gd_err *e;
	const struct pb_raw *raw; /* main-graph initializer raw_data */
	size_t n_raw;
	const char *base_dir;
	int oom;
	int node_named; /* the error already names its (innermost) node */
	struct arena scratch; /* one main-graph node decoded by nodewire_get */
	struct pending { /* control dependencies, resolved once their graph's nodes are all read */
		struct node *n;
		const char *names;
	} *pending;
	size_t n_pending, cap_pending;
	Onnx__Function **fns; /* the model's local functions, inlined where called (inline_call) */
	size_t n_fns;
	int fn_depth;     /* calls being inlined, nested */
	uint64_t fn_calls; /* calls inlined so far: unnamed callers' prefixes */
	const struct pb_raw *init_raw; /* the initialization graphs' initializer raw_data (pbwire) */
	size_t n_init_raw, init_at;    /* init_at: the first of init_pg's */
	const Onnx__Graph *init_pg;    /* the initialization graph being read */
};

static const char *str(struct rd *r, const char *s)
{
	if (!s)
		return NULL;
	char *c = arena_strdup(r->a, s);
	r->oom |= !c;
	return c;
}

static void *mem(struct rd *r, const void *p, size_t n)
{
	if (!n)
		return NULL;
	void *c = arena_memdup(r->a, p, n);
	r->oom |= !c;
	return c;
}

static int check_oom(struct rd *r)
{
	return r->oom ? err_oom(r->e) : 0;
}

static void extras_in(struct rd *r, struct extras *x, const ProtobufCMessage *m)
{
	x->n = m->n_unknown_fields;
	if (!x->n)
		return;
	x->f = arena_array(r->a, x->n, sizeof *x->f);
	if (!x->f) {
		r->oom = 1;
		x->n = 0;
		return;
	}
	for (size_t i = 0; i < x->n; i++) {
		const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
		x->f[i] = (struct extra_field){u->tag, (uint8_t)u->wire_type, u->len, mem(r, u->data, u->len)};
	}
}

static struct kv *kvs_in(struct rd *r, Onnx__KeyValue **in, size_t n)
{
	struct kv *kv = arena_array(r->a, n ? n : 1, sizeof *kv);
	if (!kv) {
		r->oom = 1;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		kv[i].key = str(r, in[i]->key);
		kv[i].value = str(r, in[i]->value);
		extras_in(r, &kv[i].x, &in[i]->base);
	}
	return kv;
}

static void type_in(struct rd *r, struct ttype *t, struct value_ext *x, const Onnx__Type *pt)
{
	memset(t, 0, sizeof *t);
	if (!pt)
		return;
	t->has_type = true;
	x->denotation = str(r, pt->denotation);
	extras_in(r, &x->type_x, &pt->base);
	const Onnx__TensorType *tt = pt->tensor_type;
	if (!tt)
		return;
	t->has_tensor = true;
	t->has_dtype = tt->has_elem_type;
	t->dtype = tt->elem_type;
	extras_in(r, &x->tensor_x, &tt->base);
	if (!tt->shape)
		return;
	t->has_shape = true;
	extras_in(r, &x->shape_x, &tt->shape->base);
	t->ndim = (uint32_t)tt->shape->n_dim;
	t->dims = arena_array(r->a, t->ndim ? t->ndim : 1, sizeof *t->dims);
	if (!t->dims) {
		r->oom = 1;
		t->ndim = 0;
		return;
	}
	for (uint32_t i = 0; i < t->ndim; i++) {
		const Onnx__Dim *d = tt->shape->dim[i];
		struct dim *o = &t->dims[i];
		o->kind = d->has_dim_value ? DIM_VALUE : d->dim_param ? DIM_PARAM : DIM_NONE;
		o->value = d->dim_value;
		o->param = str(r, d->dim_param);
		o->denotation = str(r, d->denotation);
		extras_in(r, &o->x, &d->base);
	}
}

static void vinfo_in(struct rd *r, struct value *v, const Onnx__ValueInfo *vi)
{
	if (v->type.has_type || v->ext)
		return; /* the first listing of a value describes it */
	struct value_ext x = {str(r, vi->doc_string), NULL, {0, NULL}, {0, NULL}, {0, NULL}, {0, NULL}};
	extras_in(r, &x.x, &vi->base);
	type_in(r, &v->type, &x, vi->type);
	r->oom |= value_set_ext(r->root, v, &x) != 0;
}

/* Which typed field holds the elements of each dtype, per the ONNX TensorProto rules. */
enum tfield { F_NONE, F_FLOAT, F_INT32, F_INT64, F_DOUBLE, F_UINT64, F_STRING };

static enum tfield typed_field(int dt)
{
	switch (dt) {
	case DT_FLOAT:
	case DT_COMPLEX64:
		return F_FLOAT;
	case DT_DOUBLE:
	case DT_COMPLEX128:
		return F_DOUBLE;
	case DT_INT64:
		return F_INT64;
	case DT_UINT32:
	case DT_UINT64:
		return F_UINT64;
	case DT_STRING:
		return F_STRING;
	default:
		return dtype_valid(dt) ? F_INT32 : F_NONE;
	}
}

static const char *field_names[] = {"none", "float_data", "int32_data", "int64_data", "double_data",
				    "uint64_data", "string_data"};

static int typed_in(struct rd *r, struct tensor *t, const Onnx__Tensor *pt)
{
	size_t counts[] = {0, pt->n_float_data, pt->n_int32_data, pt->n_int64_data, pt->n_double_data,
			   pt->n_uint64_data, pt->n_string_data};
	enum tfield have = F_NONE;
	for (int f = F_FLOAT; f <= F_STRING; f++)
		if (counts[f]) {
			if (have != F_NONE)
				return err_set(r->e, GD_EINPUT, "tensor '%s': data in both %s and %s",
					       t->name ? t->name : "", field_names[have], field_names[f]);
			have = (enum tfield)f;
		}
	if (have == F_NONE)
		return 0;
	if (have != typed_field(t->dtype))
		return err_set(r->e, GD_EINPUT, "tensor '%s': %s data stored in %s", t->name ? t->name : "",
			       dtype_name(t->dtype), field_names[have]);
	if (t->src != TSRC_NONE)
		return err_set(r->e, GD_EINPUT, "tensor '%s': has both raw_data and %s", t->name ? t->name : "",
			       field_names[have]);
	t->field = TFIELD_TYPED;
	if (have == F_STRING) {
		t->src = TSRC_STRINGS;
		t->n_strings = pt->n_string_data;
		t->strings = arena_array(r->a, t->n_strings, sizeof *t->strings);
		if (!t->strings)
			return err_oom(r->e);
		for (size_t i = 0; i < t->n_strings; i++)
			t->strings[i] = (struct bytes){mem(r, pt->string_data[i].data, pt->string_data[i].len),
						       pt->string_data[i].len};
		return check_oom(r);
	}
	size_t es = dtype_size(t->dtype), n = counts[have];
	if (t->dtype == DT_COMPLEX64 || t->dtype == DT_COMPLEX128)
		es /= 2; /* real and imaginary parts are separate entries */
	uint8_t *out = arena_array(r->a, n, es);
	if (!out)
		return err_oom(r->e);
	switch (have) {
	case F_FLOAT:
		memcpy(out, pt->float_data, n * 4);
		break;
	case F_DOUBLE:
		memcpy(out, pt->double_data, n * 8);
		break;
	case F_INT64:
		memcpy(out, pt->int64_data, n * 8);
		break;
	case F_UINT64:
		for (size_t i = 0; i < n; i++) {
			if (es == 4) {
				uint32_t v = (uint32_t)pt->uint64_data[i];
				memcpy(out + 4 * i, &v, 4);
			} else {
				memcpy(out + 8 * i, &pt->uint64_data[i], 8);
			}
		}
		break;
	default: /* narrow types widened into int32_data: keep the low bytes */
		for (size_t i = 0; i < n; i++) {
			uint32_t v = (uint32_t)pt->int32_data[i];
			memcpy(out + es * i, &v, es);
		}
		break;
	}
	t->src = TSRC_BYTES;
	t->bytes = (struct bytes){out, n * es};
	return 0;
}

/* raw, when given, is where the main graph's initializer bytes lie in the (mapped) file. */
static struct tensor *tensor_in(struct rd *r, const Onnx__Tensor *pt, const struct pb_raw *raw)
{
	struct tensor *t = arena_zalloc(r->a, sizeof *t);
	if (!t) {
		err_oom(r->e);
		return NULL;
	}
	t->name = str(r, pt->name);
	t->doc = str(r, pt->doc_string);
	t->dtype = pt->data_type;
	t->base_dir = r->base_dir;
	t->ndim = (uint32_t)pt->n_dims;
	t->dims = mem(r, pt->dims, pt->n_dims * sizeof *pt->dims);
	extras_in(r, &t->x, &pt->base);
	if (raw && raw->p) {
		t->src = TSRC_BYTES;
		t->bytes = (struct bytes){raw->p, raw->n};
	} else if (pt->has_raw_data) {
		t->src = TSRC_BYTES;
		t->bytes = (struct bytes){mem(r, pt->raw_data.data, pt->raw_data.len), pt->raw_data.len};
	}
	if (check_oom(r) || typed_in(r, t, pt))
		return NULL;
	t->has_location = pt->has_data_location;
	t->location = pt->data_location;
	if (pt->n_external_data) {
		t->n_external = pt->n_external_data;
		if (!(t->external = kvs_in(r, pt->external_data, pt->n_external_data)) || check_oom(r))
			return NULL;
	}
	if (t->has_location && t->location == 1) {
		if (t->src != TSRC_NONE) {
			err_set(r->e, GD_EINPUT, "tensor '%s': external data_location but data inline", t->name ? t->name : "");
			return NULL;
		}
		t->src = TSRC_EXTERNAL;
		if (tensor_check_source(t, r->e))
			return NULL;
	}
	return t;
}

static int graph_in(struct rd *r, struct graph *g, const Onnx__Graph *pg, const struct pb_stripped *nodes);

static struct graph *subgraph_in(struct rd *r, struct graph *parent, const Onnx__Graph *pg)
{
	struct graph *s = graph_new_sub(parent);
	if (!s) {
		err_oom(r->e);
		return NULL;
	}
	return graph_in(r, s, pg, NULL) ? NULL : s;
}

static int attr_in(struct rd *r, struct graph *g, struct attr *a, const Onnx__Attribute *pa)
{
	a->name = pa->name ? str(r, pa->name) : "";
	a->doc = str(r, pa->doc_string);
	a->ref = str(r, pa->ref_attr_name);
	a->has_type = pa->has_type;
	a->type = pa->type;
	if (!a->has_type) { /* IR < 3 files: infer from the populated field */
		a->type = pa->has_f ? ATTR_FLOAT : pa->has_i ? ATTR_INT : pa->has_s ? ATTR_STRING : pa->t ? ATTR_TENSOR
			: pa->g ? ATTR_GRAPH : pa->n_floats ? ATTR_FLOATS : pa->n_ints ? ATTR_INTS
			: pa->n_strings ? ATTR_STRINGS : pa->n_tensors ? ATTR_TENSORS : pa->n_graphs ? ATTR_GRAPHS
			: ATTR_UNDEFINED;
	}
	extras_in(r, &a->x, &pa->base);
	switch (a->type) {
	case ATTR_FLOAT:
		a->f = pa->f;
		break;
	case ATTR_INT:
		a->i = pa->i;
		break;
	case ATTR_STRING:
		a->s = (struct bytes){mem(r, pa->s.data, pa->s.len), pa->s.len};
		break;
	case ATTR_TENSOR:
		if (!pa->t)
			return err_set(r->e, GD_EINPUT, "attribute '%s' of type TENSOR has no tensor", a->name);
		return (a->t = tensor_in(r, pa->t, NULL)) ? 0 : -1;
	case ATTR_GRAPH:
		if (!pa->g)
			return err_set(r->e, GD_EINPUT, "attribute '%s' of type GRAPH has no graph", a->name);
		return (a->g = subgraph_in(r, g, pa->g)) ? 0 : -1;
	case ATTR_FLOATS:
		a->n = pa->n_floats;
		a->floats = mem(r, pa->floats, a->n * sizeof *a->floats);
		break;
	case ATTR_INTS:
		a->n = pa->n_ints;
		a->ints = mem(r, pa->ints, a->n * sizeof *a->ints);
		break;
	case ATTR_STRINGS:
		a->n = pa->n_strings;
		a->strings = arena_array(r->a, a->n, sizeof *a->strings);
		if (!a->strings)
			return err_oom(r->e);
		for (size_t i = 0; i < a->n; i++)
			a->strings[i] = (struct bytes){mem(r, pa->strings[i].data, pa->strings[i].len), pa->strings[i].len};
		break;
	case ATTR_TENSORS:
		a->n = pa->n_tensors;
		a->tensors = arena_array(r->a, a->n, sizeof *a->tensors);
		if (!a->tensors)
			return err_oom(r->e);
		for (size_t i = 0; i < a->n; i++)
			if (!(a->tensors[i] = tensor_in(r, pa->tensors[i], NULL)))
				return -1;
		break;
	case ATTR_GRAPHS:
		a->n = pa->n_graphs;
		a->graphs = arena_array(r->a, a->n, sizeof *a->graphs);
		if (!a->graphs)
			return err_oom(r->e);
		for (size_t i = 0; i < a->n; i++)
			if (!(a->graphs[i] = subgraph_in(r, g, pa->graphs[i])))
				return -1;
		break;
	default: /* sparse tensors and type protos ride along in extras */
		break;
	}
	return check_oom(r);
}

/* ---- local functions (ModelProto.functions), inlined on read ----
 *
 * A node whose (domain, op_type) names a local function becomes the function's nodes, read as if
 * the graph had them: the function's inputs and outputs renamed to the caller's (an omitted input
 * is ""), its other values to "<caller>/<name>" (the caller's name, else the function's and a call
 * count), and each attribute that refers to one of the function's (ref_attr_name) given the
 * caller's attribute of that name, else the function's default (attribute_proto), else dropped.
 * A call in a function's nodes is inlined in turn, at most GRAPH_MAX_DEPTH deep, so every later
 * stage sees only the ops the functions are made of. Names inside a function's subgraph attributes
 * are not renamed: such a body may read only the function's inputs and outputs, by their caller's
 * names. */

static int node_in(struct rd *r, struct graph *g, const Onnx__Node *pn);

static const Onnx__Function *local_function(const struct rd *r, const Onnx__Node *pn)
{
	const char *dom = pn->domain ? pn->domain : "";
	for (size_t i = 0; pn->op_type && i < r->n_fns; i++) {
		const Onnx__Function *f = r->fns[i];
		const char *fd = f->domain ? f->domain : "";
		if (f->name && !strcmp(f->name, pn->op_type) &&
		    (!strcmp(fd, dom) || (op_domain_is_default(fd) && op_domain_is_default(dom))))
			return f;
	}
	return NULL;
}

/* The caller's name for a name used inside function f called by pn. */
static const char *call_name(struct rd *r, const Onnx__Function *f, const Onnx__Node *pn, const char *prefix,
			     const char *name)
{
	if (!*name)
		return name;
	for (size_t i = 0; i < f->n_input; i++)
		if (!strcmp(f->input[i], name))
			return i < pn->n_input ? pn->input[i] : "";
	for (size_t i = 0; i < f->n_output; i++)
		if (!strcmp(f->output[i], name))
			return i < pn->n_output ? pn->output[i] : "";
	size_t n = strlen(prefix) + strlen(name) + 2;
	char *s = arena_alloc(r->a, n);
	if (s)
		snprintf(s, n, "%s/%s", prefix, name);
	return s;
}

static int inline_call(struct rd *r, struct graph *g, const Onnx__Function *f, const Onnx__Node *pn)
{
	if (r->fn_depth >= GRAPH_MAX_DEPTH)
		return err_set(r->e, GD_EINPUT, "local function '%s': calls nest deeper than %d (a recursive function?)",
			       f->name, GRAPH_MAX_DEPTH);
	if (pn->n_input > f->n_input || pn->n_output > f->n_output)
		return err_set(r->e, GD_EINPUT, "node '%s' (%s): %zu inputs and %zu outputs, but the local function takes %zu "
					       "and gives %zu", pn->name ? pn->name : "", f->name, pn->n_input, pn->n_output,
			       f->n_input, f->n_output);
	char num[64];
	const char *prefix = pn->name && *pn->name ? pn->name : num;
	snprintf(num, sizeof num, "%s_%" PRIu64, f->name, r->fn_calls++);
	if (prefix == num && !(prefix = arena_strdup(r->a, num)))
		return err_oom(r->e);
	r->fn_depth++;
	int rc = 0;
	for (size_t i = 0; i < f->n_node && !rc; i++) {
		const Onnx__Node *fn = f->node[i];
		Onnx__Node c = *fn;
		c.input = arena_array(r->a, fn->n_input + fn->n_output + 1, sizeof *c.input);
		c.attribute = arena_array(r->a, fn->n_attribute + 1, sizeof *c.attribute);
		if (!c.input || !c.attribute) {
			rc = err_oom(r->e);
			break;
		}
		c.output = c.input + fn->n_input;
		for (size_t k = 0; k < fn->n_input + fn->n_output && !rc; k++) {
			const char *name = k < fn->n_input ? fn->input[k] : fn->output[k - fn->n_input];
			if (!(c.input[k] = (char *)call_name(r, f, pn, prefix, name ? name : "")))
				rc = err_oom(r->e);
		}
		if (fn->name && *fn->name && !(c.name = (char *)call_name(r, f, pn, prefix, fn->name)))
			rc = err_oom(r->e);
		c.n_attribute = 0;
		for (size_t k = 0; k < fn->n_attribute && !rc; k++) {
			Onnx__Attribute *a = fn->attribute[k];
			if (!a->ref_attr_name || !*a->ref_attr_name) {
				c.attribute[c.n_attribute++] = a;
				continue;
			}
			const Onnx__Attribute *given = NULL; /* the caller's, else the function's default */
			for (size_t j = 0; j < pn->n_attribute && !given; j++)
				if (pn->attribute[j]->name && !strcmp(pn->attribute[j]->name, a->ref_attr_name))
					given = pn->attribute[j];
			for (size_t j = 0; j < f->n_attribute_proto && !given; j++)
				if (f->attribute_proto[j]->name && !strcmp(f->attribute_proto[j]->name, a->ref_attr_name))
					given = f->attribute_proto[j];
			Onnx__Attribute *ca = given ? arena_alloc(r->a, sizeof *ca) : NULL;
			if (given && !ca) {
				rc = err_oom(r->e);
				break;
			}
			if (ca) {
				*ca = *given;
				ca->name = a->name;
				c.attribute[c.n_attribute++] = ca;
			}
		}
		if (!rc)
			rc = node_in(r, g, &c);
	}
	r->fn_depth--;
	return rc;
}

static int node_in(struct rd *r, struct graph *g, const Onnx__Node *pn)
{
	const Onnx__Function *fun = r->n_fns && op_lookup(pn->domain, pn->op_type) == OP_UNKNOWN ? local_function(r, pn) : NULL;
	if (fun)
		return inline_call(r, g, fun, pn);
	struct node *n = graph_add_node(g, r->e);
	if (!n)
		return -1;
	n->name = str(r, pn->name);
	n->op_type = pn->op_type ? str(r, pn->op_type) : "";
	n->domain = str(r, pn->domain);
	struct node_ext x = {.doc = str(r, pn->doc_string), .overload = str(r, pn->overload)};
	n->op = op_lookup(n->domain, n->op_type);
	n->n_in = (uint32_t)pn->n_input;
	n->n_out = (uint32_t)pn->n_output;
	n->n_attr = (uint32_t)pn->n_attribute;
	n->in = arena_array(r->a, n->n_in + n->n_out, sizeof *n->in);
	n->attr = arena_array(r->a, n->n_attr, sizeof *n->attr);
	extras_in(r, &x.x, &pn->base);
	if (!n->in || !n->attr || check_oom(r))
		return err_oom(r->e);
	n->out = n->in + n->n_in;
	for (uint32_t i = 0; i < n->n_in; i++)
		if (*pn->input[i] && !(n->in[i] = graph_value_copy(g, pn->input[i], r->e)))
			return -1;
	for (uint32_t i = 0; i < n->n_out; i++) {
		struct value *v;
		if (*pn->output[i] &&
		    (!(v = graph_value_copy(g, pn->output[i], r->e)) || graph_set_output_value(n, i, v, r->e)))
			return -1;
	}
	for (uint32_t i = 0; i < n->n_attr; i++)
		if (attr_in(r, g, &n->attr[i], pn->attribute[i])) {
			char d[300];
			if (!r->node_named)
				err_prefix(r->e, "%s", node_desc(n, d, sizeof d));
			r->node_named = 1;
			return -1;
		}
	/* metadata_props, minus our control-dependency entry, which waits for all nodes */
	struct kv *meta = arena_array(r->a, pn->n_metadata_props, sizeof *meta);
	if (!meta)
		return err_oom(r->e);
	x.meta = meta;
	for (size_t i = 0; i < pn->n_metadata_props; i++) {
		const Onnx__KeyValue *kv = pn->metadata_props[i];
		if (kv->key && strcmp(kv->key, TAGS_KEY) == 0 && kv->value) {
			for (const char *q = kv->value; *q;) {
				size_t len = strcspn(q, ",");
				uint32_t tag;
				char d[300];
				if (node_tag_parse(q, len, &tag))
					return err_set(r->e, GD_EINPUT, "%s: unknown tag '%.*s' in %s", node_desc(n, d, sizeof d),
						       (int)len, q, TAGS_KEY);
				n->tags |= tag;
				q += len + (q[len] == ',');
			}
			continue;
		}
		if (kv->key && strcmp(kv->key, CTRL_KEY) == 0) {
			if (!kv->value)
				continue;
			if (r->n_pending == r->cap_pending) {
				size_t nc = r->cap_pending ? 2 * r->cap_pending : 16;
				struct pending *np = xreallocarray(r->pending, nc, sizeof *np);
				if (!np)
					return err_oom(r->e);
				r->pending = np;
				r->cap_pending = nc;
			}
			r->pending[r->n_pending++] = (struct pending){n, str(r, kv->value)};
			continue;
		}
		struct kv *o = &meta[x.n_meta++];
		o->key = str(r, kv->key);
		o->value = str(r, kv->value);
		extras_in(r, &o->x, &kv->base);
	}
	return node_set_ext(g, n, &x) ? err_oom(r->e) : check_oom(r);
}

/* Turns the "graphdiet.after" names of g's nodes (pending from `mark` on) into control inputs. */
static int ctrl_in(struct rd *r, struct graph *g, size_t mark)
{
	if (r->n_pending == mark)
		return 0;
	struct strmap by_name;
	strmap_init(&by_name);
	int rc = strmap_reserve(&by_name, g->n_nodes) ? err_oom(r->e) : 0;
	for (uint32_t j = 0; j < g->n_nodes && !rc; j++)
		if (g->nodes[j]->name && *g->nodes[j]->name && strmap_put(&by_name, g->nodes[j]->name, g->nodes[j]))
			rc = err_oom(r->e);
	for (size_t i = mark; i < r->n_pending && !rc; i++) {
		struct node *n = r->pending[i].n;
		const char *names = r->pending[i].names;
		size_t cnt = 1;
		for (const char *p = names; *p; p++)
			cnt += *p == '\n';
		n->ctrl = arena_array(r->a, cnt, sizeof *n->ctrl);
		if (!n->ctrl) {
			rc = err_oom(r->e);
			break;
		}
		for (const char *p = names; *p && !rc;) {
			const char *q = strchr(p, '\n');
			size_t len = q ? (size_t)(q - p) : strlen(p);
			char buf[512]; /* most names; longer ones are copied to the arena */
			char *name = len < sizeof buf ? memcpy(buf, p, len) : arena_strndup(r->a, p, len);
			if (name)
				name[len] = 0;
			struct node *dep = name ? strmap_get(&by_name, name) : NULL;
			char d[300];
			if (!name)
				rc = err_oom(r->e);
			else if (!dep)
				rc = err_set(r->e, GD_EINPUT, "%s: control dependency on unknown node '%s'",
					     node_desc(n, d, sizeof d), name);
			else
				n->ctrl[n->n_ctrl++] = dep;
			p += len + (q != NULL);
		}
	}
	strmap_free(&by_name);
	r->n_pending = mark;
	return rc;
}

static int value_list_in(struct rd *r, struct graph *g, Onnx__ValueInfo **vis, size_t n,
			 int (*add)(struct graph *, struct value *, struct gd_err *))
{
	for (size_t i = 0; i < n; i++) {
		struct value *v = graph_value_copy(g, vis[i]->name ? vis[i]->name : "", r->e);
		if (!v)
			return -1;
		vinfo_in(r, v, vis[i]);
		if (check_oom(r) || add(g, v, r->e))
			return -1;
	}
	return 0;
}

/* Decodes one serialized NodeProto of the main graph, converts it and frees it. */
static int streamed_node_in(struct rd *r, struct graph *g, struct pb_raw span);

static int graph_in(struct rd *r, struct graph *g, const Onnx__Graph *pg, const struct pb_stripped *nodes)
{
	size_t mark = r->n_pending, n_node = nodes ? nodes->n_node : pg->n_node;
	g->name = str(r, pg->name);
	g->doc = str(r, pg->doc_string);
	extras_in(r, &g->x, &pg->base);
	if (check_oom(r) || strmap_reserve(&g->names, pg->n_input + pg->n_initializer + n_node))
		return err_oom(r->e);
	if (value_list_in(r, g, pg->input, pg->n_input, graph_add_input))
		return -1;
	for (size_t i = 0; i < pg->n_initializer; i++) {
		const Onnx__Tensor *pt = pg->initializer[i];
		const struct pb_raw *raw = nodes && i < r->n_raw ? &r->raw[i]
					   : pg == r->init_pg && r->init_at + i < r->n_init_raw ? &r->init_raw[r->init_at + i]
					   : NULL;
		struct tensor *t = tensor_in(r, pt, raw);
		if (!t)
			return -1;
		struct value *v = graph_value(g, t->name ? t->name : "", r->e);
		if (!v || graph_add_init(g, v, t, r->e))
			return -1;
	}
	for (size_t i = 0; i < n_node; i++)
		if (nodes ? streamed_node_in(r, g, nodes->node[i]) : node_in(r, g, pg->node[i]))
			return -1;
	if (value_list_in(r, g, pg->output, pg->n_output, graph_add_output) ||
	    value_list_in(r, g, pg->value_info, pg->n_value_info, graph_add_info))
		return -1;
	return ctrl_in(r, g, mark);
}


/* State key, a graph input of a static shape that an initialization graph computes (diet storage,
 * quantized from the weights): described as zeros (TSRC_RANDOM), as train made it, so that analysis
 * counts it as state and reads no weight; a run computes it first (exec.c). */
static int computed_state(struct rd *r, struct graph *g, struct value *key)
{
	const struct ttype *ty = &key->type;
	if (!(key->flags & VALUE_INPUT) || !ty->has_type || !ty->has_dtype || !ty->has_shape)
		return 0;
	struct tensor *t = arena_zalloc(r->a, sizeof *t);
	int64_t *dims = arena_array(r->a, ty->ndim + 1, sizeof *dims);
	if (!t || !dims)
		return err_oom(r->e);
	for (uint32_t k = 0; k < ty->ndim; k++)
		if (ty->dims[k].kind != DIM_VALUE || (dims[k] = ty->dims[k].value) < 0)
			return 0;
	*t = (struct tensor){.name = key->name, .dtype = ty->dtype, .ndim = ty->ndim, .dims = dims, .src = TSRC_RANDOM,
			     .rnd = {.dist = RND_CONSTANT, .a = 0}};
	return graph_add_init(g, key, t, r->e) ? -1 : 0;
}

/* State key whose first value the initialization graph stores, as its initializer `out` that it
 * outputs (as the writer moves state out of the main graph: moved_state): key's initializer again,
 * the same tensor, so that runs and analysis see the graph as train made it. Not when out's type
 * differs from what key declares. */
static int stored_state(struct rd *r, struct graph *g, struct value *key, const struct value *out)
{
	const struct tensor *src = out->init;
	const struct ttype *ty = &key->type;
	if (!src || (ty->has_dtype && ty->dtype != src->dtype) || (ty->has_shape && ty->ndim != src->ndim))
		return 0;
	for (uint32_t k = 0; ty->has_shape && k < ty->ndim; k++)
		if (ty->dims[k].kind == DIM_VALUE && ty->dims[k].value != src->dims[k])
			return 0;
	struct tensor *t = arena_memdup(r->a, src, sizeof *t);
	if (!t)
		return err_oom(r->e);
	t->name = key->name;
	return graph_add_init(g, key, t, r->e) ? -1 : 0;
}

/* A state initialization_binding names (b), made by ConstantOfShape(<an initializer's dims>,
 * value=<one float>) in the initialization graph ig, as train writes optimizer state: given back
 * its description (a constant, TSRC_RANDOM), the initializer train did not store, so that runs and
 * analysis see the state as train made it. Anything else stays as it is. */
static int described_state(struct rd *r, struct graph *g, struct graph *ig, const struct kv *b)
{
	struct value *key = strmap_get(&g->names, b->key), *out = strmap_get(&ig->names, b->value);
	const struct node *n = out ? out->producer : NULL;
	if (!key || key->init || key->producer || !(key->flags & VALUE_INPUT) || !out)
		return 0; /* (only a graph input is made by the initialization) */
	if (!n)
		return stored_state(r, g, key, out);
	if (n->op != OP_CONSTANT_OF_SHAPE)
		return computed_state(r, g, key);
	if (n->n_in != 1 || !n->in[0] || !n->in[0]->init)
		return 0;
	const struct tensor *shape = n->in[0]->init;
	const struct attr *a = node_attr(n, "value");
	struct bytes sb, vb = {NULL, 0};
	if (shape->dtype != DT_INT64 || shape->ndim != 1 || tensor_bytes(g, shape, &sb, NULL) ||
	    sb.n != (size_t)shape->dims[0] * sizeof(int64_t) || (a && (a->type != ATTR_TENSOR || !a->t)) ||
	    (a && (tensor_bytes(g, a->t, &vb, NULL) || vb.n != dtype_size(a->t->dtype))))
		return 0;
	int dtype = a ? a->t->dtype : DT_FLOAT;
	double v = 0;
	if (dtype == DT_FLOAT && vb.n) {
		float f;
		memcpy(&f, vb.p, sizeof f);
		v = f;
	} else if (dtype == DT_DOUBLE && vb.n) {
		memcpy(&v, vb.p, sizeof v);
	} else if (dtype != DT_FLOAT) {
		return 0;
	}
	struct tensor *t = arena_zalloc(r->a, sizeof *t);
	int64_t *dims = arena_array(r->a, (size_t)shape->dims[0] + 1, sizeof *dims);
	if (!t || !dims)
		return err_oom(r->e);
	memcpy(dims, sb.p, sb.n);
	const struct ttype *ty = &key->type;
	if (ty->has_dtype && ty->dtype != dtype)
		return 0;
	if (ty->has_shape && ty->ndim != (uint32_t)shape->dims[0])
		return 0; /* what the input declares is not what the initialization makes: not ours */
	for (uint32_t k = 0; ty->has_shape && k < ty->ndim; k++)
		if (ty->dims[k].kind == DIM_VALUE && ty->dims[k].value != dims[k])
			return 0;
	*t = (struct tensor){.name = key->name, .dtype = dtype, .ndim = (uint32_t)shape->dims[0], .dims = dims,
			     .src = TSRC_RANDOM, .rnd = {.dist = RND_CONSTANT, .a = v}};
	return graph_add_init(g, key, t, r->e) ? -1 : 0;
}

static int model_in(struct rd *r, const Onnx__Model *pm, const struct pb_stripped *s)
{
	struct graph *g = r->root;
	struct model *m = g->model;
	m->has_ir_version = pm->has_ir_version;
	m->ir_version = pm->ir_version;
	m->has_model_version = pm->has_model_version;
	m->model_version = pm->model_version;
	m->producer_name = str(r, pm->producer_name);
	m->producer_version = str(r, pm->producer_version);
	m->domain = str(r, pm->domain);
	m->doc = str(r, pm->doc_string);
	extras_in(r, &m->x, &pm->base);
	m->n_opsets = pm->n_opset_import;
	m->opsets = arena_array(r->a, m->n_opsets, sizeof *m->opsets);
	if (!m->opsets)
		return err_oom(r->e);
	for (size_t i = 0; i < m->n_opsets; i++) {
		const Onnx__OpsetId *o = pm->opset_import[i];
		m->opsets[i] = (struct opset){str(r, o->domain), o->version, o->has_version, {0, NULL}};
		extras_in(r, &m->opsets[i].x, &o->base);
	}
	m->n_meta = pm->n_metadata_props;
	m->meta = kvs_in(r, pm->metadata_props, m->n_meta);
	if (check_oom(r))
		return -1;
	if (!pm->graph)
		return err_set(r->e, GD_EINPUT, "not an ONNX model: it has no graph");
	if (graph_in(r, g, pm->graph, s))
		return -1;
	m->n_ti = pm->n_training_info;
	m->ti = arena_array(r->a, m->n_ti, sizeof *m->ti);
	if (!m->ti)
		return err_oom(r->e);
	for (size_t i = 0; i < m->n_ti; i++) {
		const Onnx__TrainingInfo *pt = pm->training_info[i];
		struct training_info *t = &m->ti[i];
		/* Training graphs read the main graph's initializers, so they resolve names in it. */
		r->init_pg = pt->initialization;
		if ((pt->initialization && !(t->init = subgraph_in(r, g, pt->initialization))) ||
		    (pt->algorithm && !(t->algo = subgraph_in(r, g, pt->algorithm))))
			return -1;
		r->init_pg = NULL;
		r->init_at += pt->initialization ? pt->initialization->n_initializer : 0;
		t->n_init_bind = pt->n_initialization_binding;
		t->n_update_bind = pt->n_update_binding;
		t->init_bind = kvs_in(r, pt->initialization_binding, t->n_init_bind);
		t->update_bind = kvs_in(r, pt->update_binding, t->n_update_bind);
		extras_in(r, &t->x, &pt->base);
		if (check_oom(r))
			return -1;
		for (size_t k = 0; t->init && k < t->n_init_bind; k++)
			if (described_state(r, g, t->init, &t->init_bind[k]))
				return -1;
	}
	return 0;
}

static int pb_oom; /* protobuf-c reports a failed allocation as a decoding failure */

static void *pb_alloc(void *ud, size_t n)
{
	(void)ud;
	void *p = xmalloc(n);
	pb_oom |= !p;
	return p;
}

static void pb_free(void *ud, void *p)
{
	(void)ud;
	xfree(p);
}

static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

static int decode_error(struct gd_err *e, const char *what)
{
	if (pb_oom)
		return err_oom(e);
	return err_set(e, GD_EINPUT, "not an ONNX model: protobuf decoding of %s failed (corrupt file)", what);
}

static int streamed_node_in(struct rd *r, struct graph *g, struct pb_raw span)
{
	/* most nodes: decoded in the scratch arena, emptied for each */
	arena_reset(&r->scratch);
	const Onnx__Node *plain = nodewire_get(span.p, span.n, &r->scratch);
	if (plain)
		return node_in(r, g, plain);
	if (pbwire_check_depth(span.p, span.n, PB_NODE, r->e)) {
		err_prefix(r->e, "node #%u", g->n_nodes);
		return -1;
	}
	pb_oom = 0;
	Onnx__Node *pn = onnx__node__unpack(&pb_allocator, span.n, span.p);
	if (!pn) {
		decode_error(r->e, "a node");
		err_prefix(r->e, "node #%u", g->n_nodes);
		return -1;
	}
	int rc = node_in(r, g, pn);
	onnx__node__free_unpacked(pn, &pb_allocator);
	return rc;
}

struct graph *onnx_read(const uint8_t *buf, size_t len, const char *path, const char *base_dir,
			void (*keep)(void *), void *keep_arg, struct gd_err *e)
{
	struct graph *g = graph_new(path);
	if (!g) {
		if (keep)
			keep(keep_arg);
		err_oom(e);
		return NULL;
	}
	if (keep && graph_on_free(g, keep, keep_arg)) {
		graph_free(g);
		err_oom(e);
		return NULL;
	}
	struct pb_stripped s;
	if (len == 0) {
		err_set(e, GD_EINPUT, "empty file: not an ONNX model");
		goto fail;
	}
	if (pbwire_strip_raw(buf, len, &s, e))
		goto fail;
	if (pbwire_check_depth(s.buf, s.len, PB_MODEL, e)) {
		pbwire_free(&s);
		goto fail;
	}
	pb_oom = 0;
	Onnx__Model *pm = onnx__model__unpack(&pb_allocator, s.len, s.buf);
	xfree(s.buf);
	s.buf = NULL;
	if (!pm) {
		pbwire_free(&s);
		decode_error(e, "the model");
		goto fail;
	}
	struct rd r = {g, g->arena, e, s.raw, s.n_raw, base_dir ? arena_strdup(g->arena, base_dir) : NULL,
		       0, 0, {0}, NULL, 0, 0, pm->functions, pm->n_functions, 0, 0, s.init_raw, s.n_init_raw, 0, NULL};
	int rc = model_in(&r, pm, &s);
	arena_free(&r.scratch);
	onnx__model__free_unpacked(pm, &pb_allocator);
	pbwire_free(&s);
	xfree(r.pending);
	if (rc) {
		if (!e->code)
			err_oom(e);
		goto fail;
	}
	return g;
fail:
	graph_free(g);
	return NULL;
}

struct tensor *onnx_read_tensor(const uint8_t *buf, size_t len, struct arena *a, struct gd_err *e)
{
	if (len == 0) {
		err_set(e, GD_EINPUT, "empty file: not a TensorProto");
		return NULL;
	}
	pb_oom = 0; /* a TensorProto holds no graphs: no depth to check */
	Onnx__Tensor *pt = onnx__tensor__unpack(&pb_allocator, len, buf);
	if (!pt) {
		if (pb_oom)
			err_oom(e);
		else
			err_set(e, GD_EINPUT, "not a TensorProto: protobuf decoding failed (corrupt file)");
		return NULL;
	}
	struct rd r = {.a = a, .e = e};
	struct tensor *t = pt->has_data_location && pt->data_location == 1
				   ? (err_set(e, GD_EINPUT, "tensor '%s': external data is not read here",
					      pt->name ? pt->name : ""), NULL)
				   : tensor_in(&r, pt, NULL);
	onnx__tensor__free_unpacked(pt, &pb_allocator);
	return t;
}

/* ---------------------------------------------------------------- writing */

struct wr {
	struct arena a;
	struct gd_err *e;
	struct graph *root;
	int stream_nodes; /* leave the main graph's nodes out of its message: write_streamed packs them */
	uint8_t *bound;   /* by root value id: a graph input an initialization_binding makes (bound_inputs) */
	uint8_t *moved;   /* by root value id: state whose first value the initialization stores (moved_state) */
	uint64_t data;    /* tensor bytes this writer put in the message so far (at most ONNX_FILE_MAX) */
};

#define TOO_BIG_HINT                                                                                             \
	"more than the 2 GiB one ONNX (protobuf) file can hold: write YAML (--to yaml), or keep the weights in " \
	"external data (an ONNX model's external data stays external in an output written into its folder)"

/* Counts t's bytes before they are made (a 308-byte YAML asking for 3 GB of zeros spent 14.6 s
 * and 3 GB writing a file protobuf cannot load). */
static int data_fits(struct wr *w, const struct tensor *t)
{
	if (tensor_check_generated(t, w->e))
		return w->e->code;
	int64_t n = t->src == TSRC_BYTES ? (int64_t)t->bytes.n : tensor_numel(t);
	size_t es = t->src == TSRC_BYTES ? 1 : dtype_size(t->dtype);
	if (n >= 0 && es && (uint64_t)n <= (ONNX_FILE_MAX - w->data) / es) {
		w->data += (uint64_t)n * es;
		return 0;
	}
	return err_set(w->e, GD_EINPUT, "tensor '%s': the output's weights come to " TOO_BIG_HINT,
		       t->name ? t->name : "");
}

/* A message in the writer's arena, initialised from its protobuf-c INIT value. */
#define NEW(w, T, init) ((T *)new_msg(&(w)->a, &(T)init, sizeof(T)))
#define ARR(w, n, T) ((T *)arena_array(&(w)->a, (n) ? (n) : 1, sizeof(T)))

static void *new_msg(struct arena *a, const void *init, size_t size)
{
	void *p = arena_alloc(a, size);
	if (p)
		memcpy(p, init, size);
	return p;
}

static void extras_out(struct wr *w, ProtobufCMessage *m, const struct extras *x)
{
	(void)w;
	m->n_unknown_fields = (unsigned)x->n;
	/* protobuf-c only reads unknown fields when packing; the cast drops a const it never uses. */
	m->unknown_fields = (ProtobufCMessageUnknownField *)(void *)x->f;
}

_Static_assert(sizeof(ProtobufCMessageUnknownField) == sizeof(struct extra_field),
	       "struct extra_field mirrors ProtobufCMessageUnknownField");

static Onnx__KeyValue **kvs_out(struct wr *w, const struct kv *kv, size_t n)
{
	Onnx__KeyValue **out = ARR(w, n, Onnx__KeyValue *);
	for (size_t i = 0; out && i < n; i++) {
		out[i] = NEW(w, Onnx__KeyValue, ONNX__KEY_VALUE__INIT);
		if (!out[i])
			return NULL;
		out[i]->key = (char *)kv[i].key;
		out[i]->value = (char *)kv[i].value;
		extras_out(w, &out[i]->base, &kv[i].x);
	}
	return out;
}

static Onnx__Type *type_out(struct wr *w, const struct ttype *t, const struct value_ext *x)
{
	if (!t->has_type)
		return NULL;
	Onnx__Type *pt = NEW(w, Onnx__Type, ONNX__TYPE__INIT);
	if (!pt)
		return NULL;
	pt->denotation = (char *)x->denotation;
	extras_out(w, &pt->base, &x->type_x);
	if (!t->has_tensor)
		return pt;
	Onnx__TensorType *tt = NEW(w, Onnx__TensorType, ONNX__TENSOR_TYPE__INIT);
	if (!tt)
		return NULL;
	pt->tensor_type = tt;
	tt->has_elem_type = t->has_dtype;
	tt->elem_type = t->dtype;
	extras_out(w, &tt->base, &x->tensor_x);
	if (!t->has_shape)
		return pt;
	Onnx__Shape *s = NEW(w, Onnx__Shape, ONNX__SHAPE__INIT);
	Onnx__Dim **dims = ARR(w, t->ndim, Onnx__Dim *);
	Onnx__Dim *dv = ARR(w, t->ndim, Onnx__Dim);
	if (!s || !dims || !dv)
		return NULL;
	tt->shape = s;
	s->n_dim = t->ndim;
	s->dim = dims;
	extras_out(w, &s->base, &x->shape_x);
	for (uint32_t i = 0; i < t->ndim; i++) {
		Onnx__Dim *d = &dv[i];
		*d = (Onnx__Dim)ONNX__DIM__INIT;
		d->has_dim_value = t->dims[i].kind == DIM_VALUE;
		d->dim_value = t->dims[i].value;
		d->dim_param = t->dims[i].kind == DIM_PARAM ? (char *)t->dims[i].param : NULL;
		d->denotation = (char *)t->dims[i].denotation;
		extras_out(w, &d->base, &t->dims[i].x);
		dims[i] = d;
	}
	return pt;
}

static Onnx__ValueInfo *vinfo_out(struct wr *w, const struct value *v)
{
	Onnx__ValueInfo *vi = NEW(w, Onnx__ValueInfo, ONNX__VALUE_INFO__INIT);
	if (!vi)
		return NULL;
	vi->name = (char *)v->name;
	const struct value_ext *x = value_ext(v);
	vi->doc_string = (char *)x->doc;
	extras_out(w, &vi->base, &x->x);
	if (v->type.has_type && !(vi->type = type_out(w, &v->type, x)))
		return NULL;
	return vi;
}

static int typed_out(struct wr *w, Onnx__Tensor *pt, const struct tensor *t, struct bytes b)
{
	size_t es = dtype_size(t->dtype);
	if (t->dtype == DT_COMPLEX64 || t->dtype == DT_COMPLEX128)
		es /= 2;
	size_t n = es ? b.n / es : 0;
	void *arr = NULL;
	switch (typed_field(t->dtype)) {
	case F_FLOAT:
		pt->n_float_data = n;
		arr = pt->float_data = ARR(w, n, float);
		if (arr)
			memcpy(arr, b.p, n * 4);
		break;
	case F_DOUBLE:
		pt->n_double_data = n;
		arr = pt->double_data = ARR(w, n, double);
		if (arr)
			memcpy(arr, b.p, n * 8);
		break;
	case F_INT64:
		pt->n_int64_data = n;
		arr = pt->int64_data = ARR(w, n, int64_t);
		if (arr)
			memcpy(arr, b.p, n * 8);
		break;
	case F_UINT64:
		pt->n_uint64_data = n;
		arr = pt->uint64_data = ARR(w, n, uint64_t);
		for (size_t i = 0; arr && i < n; i++) {
			uint64_t v = 0;
			memcpy(&v, b.p + es * i, es);
			pt->uint64_data[i] = v;
		}
		break;
	default: {
		pt->n_int32_data = n;
		arr = pt->int32_data = ARR(w, n, int32_t);
		int sign = t->dtype == DT_INT8 || t->dtype == DT_INT16 || t->dtype == DT_INT32;
		for (size_t i = 0; arr && i < n; i++) {
			uint32_t v = 0;
			memcpy(&v, b.p + es * i, es);
			if (sign && es < 4 && (v >> (8 * es - 1)) & 1)
				v |= ~0u << (8 * es); /* sign-extend int8/int16 */
			pt->int32_data[i] = (int32_t)v;
		}
		break;
	}
	}
	return arr ? 0 : err_oom(w->e);
}

static Onnx__Tensor *tensor_out(struct wr *w, struct tensor *t)
{
	Onnx__Tensor *pt = NEW(w, Onnx__Tensor, ONNX__TENSOR__INIT);
	if (!pt) {
		err_oom(w->e);
		return NULL;
	}
	pt->name = (char *)t->name;
	pt->doc_string = (char *)t->doc;
	pt->has_data_type = 1;
	pt->data_type = t->dtype;
	pt->n_dims = t->ndim;
	pt->dims = t->dims;
	pt->has_data_location = t->has_location;
	pt->data_location = t->location;
	extras_out(w, &pt->base, &t->x);
	if (t->n_external && !(pt->external_data = kvs_out(w, t->external, t->n_external))) {
		err_oom(w->e);
		return NULL;
	}
	pt->n_external_data = t->n_external;
	switch (t->src) {
	case TSRC_NONE:
	case TSRC_EXTERNAL:
		return pt;
	case TSRC_STRINGS:
		pt->n_string_data = t->n_strings;
		pt->string_data = ARR(w, t->n_strings, ProtobufCBinaryData);
		if (!pt->string_data) {
			err_oom(w->e);
			return NULL;
		}
		for (size_t i = 0; i < t->n_strings; i++)
			pt->string_data[i] = (ProtobufCBinaryData){t->strings[i].n, (uint8_t *)t->strings[i].p};
		return pt;
	default:
		break;
	}
	struct bytes b;
	if (data_fits(w, t) || tensor_bytes(w->root, t, &b, w->e))
		return NULL;
	if (t->src == TSRC_BYTES && t->field == TFIELD_TYPED)
		return typed_out(w, pt, t, b) ? NULL : pt;
	pt->has_raw_data = 1;
	pt->raw_data = (ProtobufCBinaryData){b.n, (uint8_t *)b.p};
	return pt;
}

static Onnx__Graph *graph_out(struct wr *w, struct graph *g);

static Onnx__Attribute *attr_out(struct wr *w, const struct attr *a)
{
	Onnx__Attribute *pa = NEW(w, Onnx__Attribute, ONNX__ATTRIBUTE__INIT);
	if (!pa)
		return NULL;
	pa->name = (char *)a->name;
	pa->doc_string = (char *)a->doc;
	pa->ref_attr_name = (char *)a->ref;
	pa->has_type = a->has_type;
	pa->type = a->type;
	extras_out(w, &pa->base, &a->x);
	switch (a->type) {
	case ATTR_FLOAT:
		pa->has_f = 1;
		pa->f = a->f;
		break;
	case ATTR_INT:
		pa->has_i = 1;
		pa->i = a->i;
		break;
	case ATTR_STRING:
		pa->has_s = 1;
		pa->s = (ProtobufCBinaryData){a->s.n, (uint8_t *)a->s.p};
		break;
	case ATTR_TENSOR:
		return (pa->t = tensor_out(w, a->t)) ? pa : NULL;
	case ATTR_GRAPH:
		return (pa->g = graph_out(w, a->g)) ? pa : NULL;
	case ATTR_FLOATS:
		pa->n_floats = a->n;
		pa->floats = a->floats;
		break;
	case ATTR_INTS:
		pa->n_ints = a->n;
		pa->ints = a->ints;
		break;
	case ATTR_STRINGS:
		pa->n_strings = a->n;
		pa->strings = ARR(w, a->n, ProtobufCBinaryData);
		if (!pa->strings)
			return NULL;
		for (size_t i = 0; i < a->n; i++)
			pa->strings[i] = (ProtobufCBinaryData){a->strings[i].n, (uint8_t *)a->strings[i].p};
		break;
	case ATTR_TENSORS:
		pa->n_tensors = a->n;
		pa->tensors = ARR(w, a->n, Onnx__Tensor *);
		if (!pa->tensors)
			return NULL;
		for (size_t i = 0; i < a->n; i++)
			if (!(pa->tensors[i] = tensor_out(w, a->tensors[i])))
				return NULL;
		break;
	case ATTR_GRAPHS:
		pa->n_graphs = a->n;
		pa->graphs = ARR(w, a->n, Onnx__Graph *);
		if (!pa->graphs)
			return NULL;
		for (size_t i = 0; i < a->n; i++)
			if (!(pa->graphs[i] = graph_out(w, a->graphs[i])))
				return NULL;
		break;
	}
	return pa;
}

static Onnx__Node *node_out(struct wr *w, const struct node *n)
{
	const struct node_ext *nx = node_ext(n);
	Onnx__Node *pn = NEW(w, Onnx__Node, ONNX__NODE__INIT);
	if (!pn)
		return NULL;
	pn->name = (char *)n->name;
	pn->op_type = (char *)n->op_type;
	pn->domain = (char *)n->domain;
	pn->doc_string = (char *)nx->doc;
	pn->overload = (char *)nx->overload;
	extras_out(w, &pn->base, &nx->x);
	pn->n_input = n->n_in;
	pn->n_output = n->n_out;
	pn->input = ARR(w, n->n_in + n->n_out, char *);
	pn->n_attribute = n->n_attr;
	pn->attribute = ARR(w, n->n_attr, Onnx__Attribute *);
	if (!pn->input || !pn->attribute)
		return NULL;
	pn->output = pn->input + n->n_in;
	for (uint32_t i = 0; i < n->n_in; i++)
		pn->input[i] = n->in[i] ? (char *)n->in[i]->name : "";
	for (uint32_t i = 0; i < n->n_out; i++)
		pn->output[i] = n->out[i] ? (char *)n->out[i]->name : "";
	for (uint32_t i = 0; i < n->n_attr; i++)
		if (!(pn->attribute[i] = attr_out(w, &n->attr[i])))
			return NULL;
	pn->n_metadata_props = nx->n_meta + (n->n_ctrl > 0) + (n->tags != 0);
	Onnx__KeyValue **meta = kvs_out(w, nx->meta, nx->n_meta);
	pn->metadata_props = ARR(w, pn->n_metadata_props, Onnx__KeyValue *);
	if (!meta || !pn->metadata_props)
		return NULL;
	memcpy(pn->metadata_props, meta, nx->n_meta * sizeof *meta);
	if (n->tags) {
		char buf[128];
		Onnx__KeyValue *kv = NEW(w, Onnx__KeyValue, ONNX__KEY_VALUE__INIT);
		char *s = kv ? arena_strdup(&w->a, node_tags_str(n->tags, buf, sizeof buf)) : NULL;
		if (!s)
			return NULL;
		kv->key = TAGS_KEY;
		kv->value = s;
		pn->metadata_props[pn->n_metadata_props - 1 - (n->n_ctrl > 0)] = kv;
	}
	if (n->n_ctrl) {
		size_t len = 0;
		for (uint32_t i = 0; i < n->n_ctrl; i++)
			len += strlen(n->ctrl[i]->name ? n->ctrl[i]->name : "") + 1;
		char *s = arena_alloc(&w->a, len), *p = s;
		if (!s)
			return NULL;
		for (uint32_t i = 0; i < n->n_ctrl; i++) {
			const char *nm = n->ctrl[i]->name ? n->ctrl[i]->name : "";
			size_t l = strlen(nm);
			memcpy(p, nm, l);
			p += l;
			*p++ = i + 1 < n->n_ctrl ? '\n' : 0;
		}
		Onnx__KeyValue *kv = NEW(w, Onnx__KeyValue, ONNX__KEY_VALUE__INIT);
		if (!kv)
			return NULL;
		kv->key = CTRL_KEY;
		kv->value = s;
		pn->metadata_props[pn->n_metadata_props - 1] = kv;
	}
	return pn;
}

/* With `direct`, the ValueInfos nodewire writes are left NULL (write_streamed writes them). */
static Onnx__ValueInfo **vinfos_out(struct wr *w, struct value **vs, uint32_t n, int direct)
{
	Onnx__ValueInfo **out = ARR(w, n, Onnx__ValueInfo *);
	for (uint32_t i = 0; out && i < n; i++)
		if (!(direct && nodewire_vinfo_fits(vs[i])) && !(out[i] = vinfo_out(w, vs[i])))
			return NULL;
	return out;
}

/* v, an initializer of g, is made by a TrainingInfoProto's initialization graph instead
 * (initialization_binding): it is no stored initializer, only the graph input it is. */
/* The main graph's inputs that initialization_bindings make, marked once by value id (xcalloc'd;
 * NULL when there are none, or out of memory: initialized then compares names). */
static uint8_t *bound_inputs(const struct graph *g)
{
	uint8_t *b = NULL;
	for (size_t t = 0; g->model && t < g->model->n_ti; t++)
		for (size_t k = 0; g->model->ti[t].init && k < g->model->ti[t].n_init_bind; k++) {
			const struct value *v = strmap_get(&g->names, g->model->ti[t].init_bind[k].key);
			if (!v || !(v->flags & VALUE_INPUT))
				continue;
			if (!b && !(b = xcalloc(g->n_values ? g->n_values : 1, 1)))
				return NULL;
			b[v->id] = 1;
		}
	return b;
}

/* State (an update_binding key) that is both an initializer and an input of the main graph, as
 * train makes parameters, BatchNorm statistics and the loss scale under --optimizer, --diet or
 * --loss-scale dynamic, is written as a graph input only: its stored first value moves into the
 * first TrainingInfoProto's initialization graph (moved_out). A runtime feeds state as inputs from
 * step to step (an initializer that is no graph input is a constant to it), but onnxruntime warns
 * about every initializer that is also a graph input ("will not be treated as constant"), and ONNX
 * (IR >= 4) lets an input go without one; so all state is fed, its first values made by running
 * the initialization graph once, as for the optimizer state. The reader gives the initializers back
 * (stored_state). Marked by value id in *moved (xcalloc'd; NULL when there is none); -1 out of
 * memory. */
static int moved_state(const struct graph *g, const uint8_t *bound, uint8_t **moved)
{
	*moved = NULL;
	for (size_t t = 0; g->model && t < g->model->n_ti; t++)
		for (size_t k = 0; k < g->model->ti[t].n_update_bind; k++) {
			const struct value *v = strmap_get(&g->names, g->model->ti[t].update_bind[k].key);
			if (!v || !v->init || !(v->flags & VALUE_INPUT) || (bound && bound[v->id]))
				continue;
			if (!*moved && !(*moved = xcalloc(g->n_values ? g->n_values : 1, 1)))
				return -1;
			(*moved)[v->id] = 1;
		}
	return 0;
}

/* The name state v's first value has in the initialization graph ig: <v>_initial, or with a suffix
 * where the main graph, ig or another moved value has it. */
static const char *moved_name(struct wr *w, const struct graph *g, const struct graph *ig, struct strmap *taken,
			      const struct value *v)
{
	size_t len = strlen(v->name) + 32;
	char *s = arena_alloc(&w->a, len);
	for (unsigned k = 1; s; k++) {
		snprintf(s, len, k == 1 ? "%s_initial" : "%s_initial_%u", v->name, k);
		if (!strmap_get(&g->names, s) && !(ig && strmap_get(&ig->names, s)) && !strmap_get(taken, s))
			return strmap_put(taken, s, (void *)s) ? NULL : s;
	}
	return NULL;
}

/* Appends to pt the moved state of the main graph g (moved_state): each one's value as an
 * initializer of the initialization graph, which outputs it, bound to the state. */
static int moved_out(struct wr *w, struct graph *g, const struct training_info *t, Onnx__TrainingInfo *pt)
{
	size_t n = 0;
	for (uint32_t i = 0; i < g->n_inits; i++)
		n += w->moved[g->inits[i]->id];
	if (!n)
		return 0;
	Onnx__Graph *ig = pt->initialization;
	if (!ig) {
		if (!(ig = pt->initialization = NEW(w, Onnx__Graph, ONNX__GRAPH__INIT)))
			return err_oom(w->e);
		ig->name = "graphdiet_initialization";
		ig->doc_string = "The training state's first values, bound to the main graph's inputs they feed.";
	}
	Onnx__Tensor **inits = ARR(w, ig->n_initializer + n, Onnx__Tensor *);
	Onnx__ValueInfo **outs = ARR(w, ig->n_output + n, Onnx__ValueInfo *);
	Onnx__KeyValue **binds = ARR(w, pt->n_initialization_binding + n, Onnx__KeyValue *);
	if (!inits || !outs || !binds)
		return err_oom(w->e);
	if (ig->n_initializer) /* (memcpy from NULL is undefined even for 0 bytes) */
		memcpy(inits, ig->initializer, ig->n_initializer * sizeof *inits);
	if (ig->n_output)
		memcpy(outs, ig->output, ig->n_output * sizeof *outs);
	if (pt->n_initialization_binding)
		memcpy(binds, pt->initialization_binding, pt->n_initialization_binding * sizeof *binds);
	ig->initializer = inits;
	ig->output = outs;
	pt->initialization_binding = binds;
	struct strmap taken;
	strmap_init(&taken);
	int rc = 0;
	for (uint32_t i = 0; i < g->n_inits && !rc; i++) {
		const struct value *v = g->inits[i];
		if (!w->moved[v->id])
			continue;
		const char *name = moved_name(w, g, t->init, &taken, v);
		Onnx__Tensor *pv = name ? tensor_out(w, v->init) : NULL;
		Onnx__ValueInfo *vi = pv ? vinfo_out(w, v) : NULL;
		Onnx__KeyValue *b = vi ? NEW(w, Onnx__KeyValue, ONNX__KEY_VALUE__INIT) : NULL;
		if (!b) {
			rc = w->e->code ? w->e->code : err_oom(w->e);
			break;
		}
		pv->name = vi->name = (char *)name;
		vi->doc_string = NULL;
		b->key = (char *)v->name;
		b->value = (char *)name;
		inits[ig->n_initializer++] = pv;
		outs[ig->n_output++] = vi;
		binds[pt->n_initialization_binding++] = b;
	}
	strmap_free(&taken);
	return rc;
}

static int initialized(const struct wr *w, const struct graph *g, const struct value *v)
{
	if (g == w->root && w->moved && v->id < g->n_values && w->moved[v->id])
		return 1;
	if (g == w->root && (w->bound || !g->model || !g->model->n_ti))
		return w->bound && v->id < g->n_values && w->bound[v->id];
	for (size_t t = 0; g->model && t < g->model->n_ti; t++)
		for (size_t k = 0; g->model->ti[t].init && k < g->model->ti[t].n_init_bind; k++)
			if (!strcmp(g->model->ti[t].init_bind[k].key, v->name))
				return (v->flags & VALUE_INPUT) != 0;
	return 0;
}

static Onnx__Graph *graph_out(struct wr *w, struct graph *g)
{
	Onnx__Graph *pg = NEW(w, Onnx__Graph, ONNX__GRAPH__INIT);
	if (!pg)
		goto oom;
	pg->name = (char *)g->name;
	pg->doc_string = (char *)g->doc;
	extras_out(w, &pg->base, &g->x);
	const int direct = w->stream_nodes && g == w->root; /* see write_streamed */
	if (direct) {
		pg->n_node = 0; /* written one by one by write_streamed */
		goto rest;
	}
	pg->n_node = g->n_nodes;
	pg->node = ARR(w, g->n_nodes, Onnx__Node *);
	if (!pg->node)
		goto oom;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (!(pg->node[i] = node_out(w, g->nodes[i])))
			goto oom;
rest:
	pg->n_initializer = 0;
	pg->initializer = ARR(w, g->n_inits, Onnx__Tensor *);
	if (!pg->initializer)
		goto oom;
	for (uint32_t i = 0; i < g->n_inits; i++) {
		if (initialized(w, g, g->inits[i])) /* (then NULL in the direct form: graph_rest passes it over) */
			continue;
		uint32_t k = direct ? i : (uint32_t)pg->n_initializer++;
		if (!(direct && nodewire_tensor_fits(g->inits[i]->init)) &&
		    !(pg->initializer[k] = tensor_out(w, g->inits[i]->init)))
			return NULL;
	}
	if (direct)
		pg->n_initializer = g->n_inits;
	pg->n_input = g->n_inputs;
	pg->n_output = g->n_outputs;
	pg->n_value_info = g->n_infos;
	if (!(pg->input = vinfos_out(w, g->inputs, g->n_inputs, direct)) ||
	    !(pg->output = vinfos_out(w, g->outputs, g->n_outputs, direct)) ||
	    !(pg->value_info = vinfos_out(w, g->infos, g->n_infos, direct)))
		goto oom;
	return pg;
oom:
	err_oom(w->e);
	return NULL;
}

static Onnx__Model *model_out(struct wr *w, struct graph *g)
{
	const struct model *m = g->model;
	Onnx__Model *pm = NEW(w, Onnx__Model, ONNX__MODEL__INIT);
	if (!pm)
		goto oom;
	pm->has_ir_version = m->has_ir_version;
	pm->ir_version = m->ir_version;
	pm->has_model_version = m->has_model_version;
	pm->model_version = m->model_version;
	pm->producer_name = (char *)m->producer_name;
	pm->producer_version = (char *)m->producer_version;
	pm->domain = (char *)m->domain;
	pm->doc_string = (char *)m->doc;
	extras_out(w, &pm->base, &m->x);
	pm->n_opset_import = m->n_opsets;
	pm->opset_import = ARR(w, m->n_opsets, Onnx__OpsetId *);
	if (!pm->opset_import)
		goto oom;
	for (size_t i = 0; i < m->n_opsets; i++) {
		Onnx__OpsetId *o = pm->opset_import[i] = NEW(w, Onnx__OpsetId, ONNX__OPSET_ID__INIT);
		if (!o)
			goto oom;
		o->domain = (char *)m->opsets[i].domain;
		o->has_version = m->opsets[i].has_version;
		o->version = m->opsets[i].version;
		extras_out(w, &o->base, &m->opsets[i].x);
	}
	pm->n_metadata_props = m->n_meta;
	if (!(pm->metadata_props = kvs_out(w, m->meta, m->n_meta)))
		goto oom;
	if (!(pm->graph = graph_out(w, g)))
		return NULL;
	pm->n_training_info = m->n_ti;
	pm->training_info = ARR(w, m->n_ti, Onnx__TrainingInfo *);
	if (!pm->training_info)
		goto oom;
	for (size_t i = 0; i < m->n_ti; i++) {
		const struct training_info *t = &m->ti[i];
		Onnx__TrainingInfo *pt = pm->training_info[i] = NEW(w, Onnx__TrainingInfo, ONNX__TRAINING_INFO__INIT);
		if (!pt)
			goto oom;
		if ((t->init && !(pt->initialization = graph_out(w, t->init))) ||
		    (t->algo && !(pt->algorithm = graph_out(w, t->algo))))
			return NULL;
		pt->n_initialization_binding = t->n_init_bind;
		pt->n_update_binding = t->n_update_bind;
		if (!(pt->initialization_binding = kvs_out(w, t->init_bind, t->n_init_bind)) ||
		    !(pt->update_binding = kvs_out(w, t->update_bind, t->n_update_bind)))
			goto oom;
		if (i == 0 && w->moved && moved_out(w, g, t, pt))
			return NULL;
		extras_out(w, &pt->base, &t->x);
	}
	return pm;
oom:
	err_oom(w->e);
	return NULL;
}

/* Output through bgwrite's chunks: protobuf-c appends field by field, a few bytes at a time. */
struct out_buffer {
	ProtobufCBuffer base;
	struct bgwrite w;
	uint64_t pos;   /* the file offset the next byte goes to */
	unsigned align; /* initializers' raw bytes start at multiples of it (1: anywhere) */
};

static void out_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	bgwrite_put(&((struct out_buffer *)b)->w, data, len);
	((struct out_buffer *)b)->pos += len;
}

static void out_key_len(struct out_buffer *o, uint32_t field, size_t len)
{
	uint8_t tmp[20];
	out_append(&o->base, (size_t)(pbwire_put_key_len(tmp, field, len) - tmp), tmp);
}

/* The main graph's nodes, packed one at a time into one growing byte buffer. */
struct mem_buffer {
	ProtobufCBuffer base;
	uint8_t *p;
	size_t len, cap;
	int oom;
};

/* Room for len more bytes; 0 (and oom set) when there is none. */
static int mem_reserve(struct mem_buffer *m, size_t len)
{
	if (m->oom)
		return 0;
	if (len > m->cap - m->len) {
		size_t nc = m->cap ? m->cap : 1 << 16;
		while (nc - m->len < len)
			nc *= 2;
		uint8_t *np = xrealloc(m->p, nc);
		if (!np) {
			m->oom = 1;
			return 0;
		}
		m->p = np;
		m->cap = nc;
	}
	return 1;
}

static void mem_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct mem_buffer *m = (struct mem_buffer *)b;
	if (len && mem_reserve(m, len)) {
		memcpy(m->p + m->len, data, len);
		m->len += len;
	}
}

enum { MODEL_GRAPH_FIELD = 7, GRAPH_NODE_FIELD = 1 };

/* One of nodewire's writers at m's end, given more room until what it writes fits; returns the end
 * of what it wrote (m->len unchanged), or NULL out of memory. `at`: a tensor's raw-data offset. */
enum wire_obj { WIRE_NODE, WIRE_TENSOR, WIRE_VINFO };
static uint8_t *put_grown(struct mem_buffer *m, enum wire_obj k, uint32_t field, const void *obj, unsigned pad,
			  size_t *at)
{
	for (size_t want = 4096; mem_reserve(m, want); want = 2 * (m->cap - m->len)) {
		uint8_t *o = m->p + m->len, *end = m->p + m->cap;
		uint8_t *r = k == WIRE_NODE     ? nodewire_put(o, end, field, obj)
			     : k == WIRE_TENSOR ? nodewire_tensor_put(o, end, field, obj, pad, at)
						: nodewire_vinfo_put(o, end, field, obj);
		if (r)
			return r;
	}
	return NULL;
}

/* A length-delimited field holding message m: its bytes, written to o unless o is NULL. */
static size_t msg_field(struct out_buffer *o, uint32_t field, const ProtobufCMessage *m)
{
	size_t size = protobuf_c_message_get_packed_size(m);
	if (o) {
		out_key_len(o, field, size);
		protobuf_c_message_pack_to_buffer(m, &o->base);
	}
	return pbwire_field_len(field, size);
}

static size_t str_field(struct out_buffer *o, uint32_t field, const char *s)
{
	if (!s)
		return 0;
	size_t n = strlen(s);
	if (o) {
		out_key_len(o, field, n);
		out_append(&o->base, n, (const uint8_t *)s);
	}
	return pbwire_field_len(field, n);
}

/* Weights copied into the output from the mapped model file leave the process's memory (the page
 * cache keeps them): written whole, a model's weights would otherwise all become resident, 526 MB
 * of a 1M-node chain's. Only the file's pages: anything else would be zeroed. Neighbours in the
 * file are dropped together, in one call per 8 MB (*span: the pages not dropped yet); b {NULL, 0}
 * drops what is left. */
static void drop_pages(const struct graph *g, struct bytes b, uintptr_t span[2])
{
	uintptr_t lo = (uintptr_t)g->file.p, hi = lo + g->file.n, p = (uintptr_t)b.p;
	int in = b.n && p >= lo && p + b.n <= hi;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = p & ~(page - 1), z = (p + b.n + page - 1) & ~(page - 1);
	z = z < hi ? z : hi;
	if (in && span[1] > span[0] && a <= span[1] && z >= span[0] && span[1] - span[0] < (8u << 20)) {
		span[0] = a < span[0] ? a : span[0];
		span[1] = z > span[1] ? z : span[1];
		return;
	}
	if (span[1] > span[0])
		madvise((void *)span[0], span[1] - span[0], MADV_DONTNEED);
	span[0] = in ? a : 0;
	span[1] = in ? z : 0;
}

/* The main graph's fields after its nodes, as protobuf-c packs them (by field number, undecoded
 * fields last): name, initializers, doc_string, inputs, outputs, value_info. What graph_out left
 * NULL nodewire writes, weights going from where they lie straight to the output; the rest
 * protobuf-c packs. Measures only when o is NULL; scratch holds one message at a time. */
static size_t graph_rest(const struct wr *w, struct graph *g, const Onnx__Graph *pg, struct out_buffer *o,
			 struct mem_buffer *scratch)
{
	size_t len = str_field(o, 2, pg->name);
	uintptr_t span[2] = {0, 0};
	for (uint32_t i = 0; i < g->n_inits && !scratch->oom; i++) {
		if (initialized(w, g, g->inits[i]))
			continue;
		if (pg->initializer[i]) {
			len += msg_field(o, 5, &pg->initializer[i]->base);
			continue;
		}
		const struct tensor *t = g->inits[i]->init;
		size_t at = 0;
		uint8_t *end = put_grown(scratch, WIRE_TENSOR, 5, t, 0, &at);
		/* Moved onto an aligned offset by a longer data_type, a weight can be used where a reader
		 * maps the file (graphdiet run), not copied. A longer varint may lengthen the message's
		 * own length prefix, so the padding is found again until it holds. */
		unsigned pad = 0;
		for (int k = 0; o && o->align > 1 && end && k < 3 && (o->pos + at) % o->align; k++) {
			pad += (unsigned)(o->align - (o->pos + at) % o->align);
			end = put_grown(scratch, WIRE_TENSOR, 5, t, pad %= o->align, &at);
		}
		if (!end)
			break;
		size_t n = (size_t)(end - scratch->p);
		if (o) {
			out_append(&o->base, at, scratch->p);
			out_append(&o->base, t->bytes.n, t->bytes.p);
			out_append(&o->base, n - at, scratch->p + at);
			drop_pages(g, t->bytes, span);
		}
		len += n + t->bytes.n;
	}
	drop_pages(g, (struct bytes){NULL, 0}, span);
	len += str_field(o, 10, pg->doc_string);
	struct {
		uint32_t field, n;
		struct value **v;
		Onnx__ValueInfo **m;
	} lists[] = {{11, g->n_inputs, g->inputs, pg->input},
		     {12, g->n_outputs, g->outputs, pg->output},
		     {13, g->n_infos, g->infos, pg->value_info}};
	for (size_t l = 0; l < 3; l++)
		for (uint32_t i = 0; i < lists[l].n && !scratch->oom; i++) {
			if (lists[l].m[i]) {
				len += msg_field(o, lists[l].field, &lists[l].m[i]->base);
				continue;
			}
			uint8_t *end = put_grown(scratch, WIRE_VINFO, lists[l].field, lists[l].v[i], 0, NULL);
			if (!end)
				break;
			if (o)
				out_append(&o->base, (size_t)(end - scratch->p), scratch->p);
			len += (size_t)(end - scratch->p);
		}
	/* the undecoded fields: a message with nothing else packs to exactly them */
	Onnx__Graph unknown = ONNX__GRAPH__INIT;
	unknown.base.n_unknown_fields = pg->base.n_unknown_fields;
	unknown.base.unknown_fields = pg->base.unknown_fields;
	size_t un = protobuf_c_message_get_packed_size(&unknown.base);
	if (o)
		protobuf_c_message_pack_to_buffer(&unknown.base, &o->base);
	return len + un;
}

/* The main graph's nodes as `node` fields: their bytes, written to o unless o is NULL (then only
 * measured, in scratch, and with stride k only every k-th node). Most nodes are written straight
 * from the IR into o's chunk; those nodewire cannot write and those bigger than a chunk go through
 * scratch, one at a time. Stops early out of memory (scratch->oom, or o's error) or at an error
 * node_out reports (w->e). */
static size_t graph_nodes(struct wr *w, struct graph *g, struct out_buffer *o, struct mem_buffer *scratch,
			  uint32_t stride)
{
	size_t len = 0;
	struct wr nw = {.e = w->e, .root = w->root};
	for (uint32_t i = 0; i < g->n_nodes && !scratch->oom && !w->e->code; i += stride) {
		const struct node *n = g->nodes[i];
		if (stride == 1)
			nodewire_prefetch(g->nodes, i, g->n_nodes);
		scratch->len = 0;
		if (nodewire_fits(n)) {
			uint8_t *end, *at = o ? bgwrite_free(&o->w, &end) : NULL, *r = NULL;
			if (o && !at)
				break;
			if (at && !(r = nodewire_put(at, end, GRAPH_NODE_FIELD, n))) {
				bgwrite_flush(&o->w); /* retried in an empty chunk */
				if (!(at = bgwrite_free(&o->w, &end)))
					break;
				r = nodewire_put(at, end, GRAPH_NODE_FIELD, n);
			}
			if (r) {
				bgwrite_wrote(&o->w, (size_t)(r - at));
				o->pos += (size_t)(r - at);
				len += (size_t)(r - at);
				continue;
			}
			uint8_t *done = put_grown(scratch, WIRE_NODE, GRAPH_NODE_FIELD, n, 0, NULL);
			if (!done)
				break;
			scratch->len = (size_t)(done - scratch->p);
		} else {
			uint8_t key[20];
			arena_init(&nw.a);
			Onnx__Node *pn = node_out(&nw, n);
			if (pn) {
				size_t size = protobuf_c_message_get_packed_size(&pn->base);
				mem_append(&scratch->base, (size_t)(pbwire_put_key_len(key, GRAPH_NODE_FIELD, size) - key), key);
				protobuf_c_message_pack_to_buffer(&pn->base, &scratch->base);
			} else if (!w->e->code)
				scratch->oom = 1;
			arena_free(&nw.a);
		}
		if (o)
			out_append(&o->base, scratch->len, scratch->p);
		len += scratch->len;
	}
	scratch->len = 0; /* graph_rest writes at its start */
	return len;
}

/* The main graph's length, for its prefix: exact, or with `sample` estimated from every 64th node
 * (a graph's nodes are most of it; the rest is measured), which is 64 times cheaper. */
enum { LEN_SAMPLE = 64 };
static size_t graph_len(struct wr *w, struct graph *g, const Onnx__Graph *pg, struct mem_buffer *scratch, int sample)
{
	uint32_t stride = sample && g->n_nodes >= LEN_SAMPLE * LEN_SAMPLE ? LEN_SAMPLE : 1;
	size_t len = graph_nodes(w, g, NULL, scratch, stride);
	if (stride > 1)
		len = (size_t)((double)len * g->n_nodes / ((g->n_nodes + stride - 1) / stride));
	return w->e->code || scratch->oom ? 0 : len + graph_rest(w, g, pg, NULL, scratch);
}

/* Writes the model with the main graph's nodes streamed: ModelProto fields before `graph`, then the
 * graph (its nodes, then the rest of it), then the fields after it. protobuf-c packs fields in
 * field-number order, and `node` is GraphProto's first field, so the bytes are exactly those of
 * packing the whole message at once; but only one node message exists at a time, in a scratch
 * arena emptied after each. The graph's length prefix says `len`; *wrote is the length it has, and
 * *len_at where the prefix is, from the start. */
static int write_streamed(struct wr *w, struct graph *g, Onnx__Model *pm, struct out_buffer *o,
			  struct mem_buffer *scratch, size_t len, size_t *wrote, size_t *len_at)
{
	Onnx__Graph *pg = pm->graph;
	/* the model's fields before `graph` */
	Onnx__Model head = *pm;
	head.graph = NULL;
	head.n_opset_import = head.n_metadata_props = head.n_training_info = 0;
	head.base.n_unknown_fields = 0;
	*len_at = protobuf_c_message_pack_to_buffer(&head.base, &o->base) + 1;
	out_key_len(o, MODEL_GRAPH_FIELD, len);
	*wrote = graph_nodes(w, g, o, scratch, 1);
	if (!w->e->code && !scratch->oom && !o->w.err) {
		*wrote += graph_rest(w, g, pg, o, scratch);
		/* the model's fields after `graph` */
		Onnx__Model tail = ONNX__MODEL__INIT;
		tail.n_opset_import = pm->n_opset_import;
		tail.opset_import = pm->opset_import;
		tail.n_metadata_props = pm->n_metadata_props;
		tail.metadata_props = pm->metadata_props;
		tail.n_training_info = pm->n_training_info;
		tail.training_info = pm->training_info;
		tail.base.n_unknown_fields = pm->base.n_unknown_fields;
		tail.base.unknown_fields = pm->base.unknown_fields;
		protobuf_c_message_pack_to_buffer(&tail.base, &o->base);
	}
	return w->e->code ? w->e->code : scratch->oom ? err_oom(w->e) : 0;
}

/* Where in fd a length written earlier can be overwritten: its offset now, or -1 for pipes,
 * terminals and files opened to append (whose writes all go to the end). */
static off_t patchable(int fd)
{
	struct stat st;
	int fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_APPEND) || fstat(fd, &st) || !S_ISREG(st.st_mode))
		return -1;
	return lseek(fd, 0, SEEK_CUR);
}

/* The graph's length goes before its nodes. Into a regular file it is estimated, the file written
 * once and the length overwritten where it lies; when the estimate's varint has another width than
 * the length's (an estimate off across a power of 128, which is rare) the file is cut back and
 * written again, knowing the length. Elsewhere the nodes are measured first, then written: twice
 * the packing, which costs about as much as the write(2)s. */
int onnx_write(struct graph *g, FILE *f, struct gd_err *e)
{
	return onnx_write_aligned(g, f, 1, e);
}

/* Weights are aligned only where the length is patched: the padding depends on where each weight
 * lands, which the measuring pass does not know. A rewrite (the length's varint changed width)
 * moves everything after it, and so the padding: the length is patched again. */
int onnx_write_aligned(struct graph *g, FILE *f, unsigned align, struct gd_err *e)
{
	struct wr w = {.e = e, .root = g, .stream_nodes = 1, .bound = bound_inputs(g)};
	struct out_buffer o = {.base.append = out_append};
	struct mem_buffer scratch = {{mem_append}, NULL, 0, 0, 0};
	bgwrite_open(&o.w, f);
	arena_init(&w.a);
	int rc = moved_state(g, w.bound, &w.moved) ? err_oom(e) : 0;
	Onnx__Model *pm = rc ? NULL : model_out(&w, g);
	rc = pm ? 0 : e->code ? e->code : err_oom(e);
	off_t base = rc ? -1 : patchable(o.w.fd);
	o.pos = base >= 0 ? (uint64_t)base : 0;
	o.align = base >= 0 && align > 1 ? align : 1;
	size_t len = rc ? 0 : graph_len(&w, g, pm->graph, &scratch, base >= 0), wrote = len, at = 0;
	if (!rc && !(rc = e->code ? e->code : scratch.oom ? err_oom(e) : 0) && len > ONNX_FILE_MAX)
		rc = err_set(e, GD_EINPUT, "the output comes to %zu bytes, " TOO_BIG_HINT, len);
	if (!rc)
		rc = write_streamed(&w, g, pm, &o, &scratch, len, &wrote, &at);
	int werr = bgwrite_close(&o.w);
	for (int tries = 0; !rc && !werr && wrote != len && tries < 4; tries++) {
		if (pbwire_varint_len(wrote) == pbwire_varint_len(len)) {
			uint8_t buf[10];
			size_t n = (size_t)(pbwire_put_varint(buf, wrote) - buf);
			if (pwrite(o.w.fd, buf, n, base + (off_t)at) != (ssize_t)n)
				werr = errno ? errno : EIO;
			len = wrote;
			break;
		}
		if (ftruncate(o.w.fd, base) || lseek(o.w.fd, base, SEEK_SET) < 0) {
			werr = errno;
		} else {
			len = wrote;
			o.pos = (uint64_t)base;
			bgwrite_open(&o.w, f);
			rc = write_streamed(&w, g, pm, &o, &scratch, len, &wrote, &at);
			werr = bgwrite_close(&o.w);
		}
	}
	if (!rc && !werr && wrote != len)
		rc = err_set(e, GD_EINTERNAL, "the graph's length did not settle");
	if (!rc && !werr && wrote > ONNX_FILE_MAX) /* the estimate was under it */
		rc = err_set(e, GD_EINPUT, "the output comes to %zu bytes, " TOO_BIG_HINT, wrote);
	xfree(scratch.p);
	arena_free(&w.a);
	xfree(w.bound);
	xfree(w.moved);
	if (!rc && werr == ENOMEM)
		rc = err_oom(e);
	else if (!rc && werr)
		rc = err_set(e, GD_EINPUT, "cannot write output: %s", strerror(werr));
	return rc;
}
