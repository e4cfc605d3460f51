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
#include "../util/xalloc.h"
#include "pbwire.h"
#include "tensor.h"
#include "proto/onnx.pb-c.h"

#include <inttypes.h>
#include <string.h>

#define CTRL_KEY "graphdiet.after"

/* ---------------------------------------------------------------- reading */

struct rd {
	struct graph *root;
	struct arena *a;
	struct gd_err *e;
	const struct pb_raw *raw; /* main-graph initializer raw_data */
	size_t n_raw;
	const char *base_dir;
};

static int extras_in(struct rd *r, struct extras *x, const ProtobufCMessage *m)
{
	x->n = m->n_unknown_fields;
	if (!x->n)
		return 0;
	x->f = arena_array(r->a, x->n, sizeof *x->f);
	if (!x->f)
		return err_oom(r->e);
	for (size_t i = 0; i < x->n; i++) {
		const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
		x->f[i] = (struct extra_field){u->tag, (uint8_t)u->wire_type, u->len, u->data};
	}
	return 0;
}

static struct kv *kvs_in(struct rd *r, Onnx__KeyValue **in, size_t n)
{
	struct kv *kv = arena_array(r->a, n ? n : 1, sizeof *kv);
	if (!kv) {
		err_oom(r->e);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		kv[i].key = in[i]->key;
		kv[i].value = in[i]->value;
		if (extras_in(r, &kv[i].x, &in[i]->base))
			return NULL;
	}
	return kv;
}

static int type_in(struct rd *r, struct ttype *t, const Onnx__Type *pt)
{
	memset(t, 0, sizeof *t);
	if (!pt)
		return 0;
	t->has_type = true;
	t->denotation = pt->denotation;
	if (extras_in(r, &t->type_x, &pt->base))
		return -1;
	const Onnx__TensorType *tt = pt->tensor_type;
	if (!tt)
		return 0;
	t->has_tensor = true;
	t->has_dtype = tt->has_elem_type;
	t->dtype = tt->elem_type;
	if (extras_in(r, &t->tensor_x, &tt->base))
		return -1;
	if (!tt->shape)
		return 0;
	t->has_shape = true;
	if (extras_in(r, &t->shape_x, &tt->shape->base))
		return -1;
	t->ndim = (uint32_t)tt->shape->n_dim;
	t->dims = arena_array(r->a, t->ndim ? t->ndim : 1, sizeof *t->dims);
	if (!t->dims)
		return err_oom(r->e);
	for (uint32_t i = 0; i < t->ndim; i++) {
		const Onnx__Dim *d = tt->shape->dim[i];
		struct dim *o = &t->dims[i];
		o->kind = d->has_dim_value ? DIM_VALUE : d->dim_param ? DIM_PARAM : DIM_NONE;
		o->value = d->dim_value;
		o->param = d->dim_param;
		o->denotation = d->denotation;
		if (extras_in(r, &o->x, &d->base))
			return -1;
	}
	return 0;
}

static int vinfo_in(struct rd *r, struct value *v, const Onnx__ValueInfo *vi)
{
	if (v->type.has_type || v->doc || v->x.n)
		return 0; /* the first listing of a value describes it */
	v->doc = vi->doc_string;
	return extras_in(r, &v->x, &vi->base) ? -1 : type_in(r, &v->type, vi->type);
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
			t->strings[i] = (struct bytes){pt->string_data[i].data, pt->string_data[i].len};
		return 0;
	}
	size_t es = dtype_size(t->dtype), n = counts[have];
	if (t->dtype == DT_COMPLEX64 || t->dtype == DT_COMPLEX128) {
		es /= 2; /* real and imaginary parts are separate entries */
	}
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

static struct tensor *tensor_in(struct rd *r, const Onnx__Tensor *pt, const struct pb_raw *raw)
{
	struct tensor *t = arena_zalloc(r->a, sizeof *t);
	if (!t) {
		err_oom(r->e);
		return NULL;
	}
	t->name = pt->name;
	t->doc = pt->doc_string;
	t->dtype = pt->data_type;
	t->base_dir = r->base_dir;
	t->ndim = (uint32_t)pt->n_dims;
	t->dims = pt->dims;
	if (extras_in(r, &t->x, &pt->base))
		return NULL;
	if (raw && raw->p) {
		t->src = TSRC_BYTES;
		t->bytes = (struct bytes){raw->p, raw->n};
	} else if (pt->has_raw_data) {
		t->src = TSRC_BYTES;
		t->bytes = (struct bytes){pt->raw_data.data, pt->raw_data.len};
	}
	if (typed_in(r, t, pt))
		return NULL;
	t->has_location = pt->has_data_location;
	t->location = pt->data_location;
	if (pt->n_external_data) {
		t->n_external = pt->n_external_data;
		if (!(t->external = kvs_in(r, pt->external_data, pt->n_external_data)))
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

static int graph_in(struct rd *r, struct graph *g, const Onnx__Graph *pg, int top);

static struct graph *subgraph_in(struct rd *r, struct graph *parent, const Onnx__Graph *pg)
{
	struct graph *s = graph_new_sub(parent);
	if (!s) {
		err_oom(r->e);
		return NULL;
	}
	return graph_in(r, s, pg, 0) ? NULL : s;
}

static int attr_in(struct rd *r, struct graph *g, struct attr *a, const Onnx__Attribute *pa)
{
	a->name = pa->name ? pa->name : "";
	a->doc = pa->doc_string;
	a->ref = pa->ref_attr_name;
	a->has_type = pa->has_type;
	a->type = pa->type;
	if (!a->has_type) { /* IR < 3 files: infer from the populated field */
		a->type = pa->has_f ? ATTR_FLOAT : pa->has_i ? ATTR_INT : pa->has_s ? ATTR_STRING : pa->t ? ATTR_TENSOR
			: pa->g ? ATTR_GRAPH : pa->n_floats ? ATTR_FLOATS : pa->n_ints ? ATTR_INTS
			: pa->n_strings ? ATTR_STRINGS : pa->n_tensors ? ATTR_TENSORS : pa->n_graphs ? ATTR_GRAPHS
			: ATTR_UNDEFINED;
	}
	if (extras_in(r, &a->x, &pa->base))
		return -1;
	switch (a->type) {
	case ATTR_FLOAT:
		a->f = pa->f;
		break;
	case ATTR_INT:
		a->i = pa->i;
		break;
	case ATTR_STRING:
		a->s = (struct bytes){pa->s.data, pa->s.len};
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
		a->floats = pa->floats;
		break;
	case ATTR_INTS:
		a->n = pa->n_ints;
		a->ints = pa->ints;
		break;
	case ATTR_STRINGS:
		a->n = pa->n_strings;
		a->strings = arena_array(r->a, a->n, sizeof *a->strings);
		if (!a->strings)
			return err_oom(r->e);
		for (size_t i = 0; i < a->n; i++)
			a->strings[i] = (struct bytes){pa->strings[i].data, pa->strings[i].len};
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
	return 0;
}

static int node_in(struct rd *r, struct graph *g, const Onnx__Node *pn)
{
	struct node *n = graph_add_node(g, r->e);
	if (!n)
		return -1;
	n->name = pn->name;
	n->op_type = pn->op_type ? pn->op_type : "";
	n->domain = pn->domain;
	n->doc = pn->doc_string;
	n->overload = pn->overload;
	n->op = op_lookup(n->domain, n->op_type);
	n->n_in = (uint32_t)pn->n_input;
	n->n_out = (uint32_t)pn->n_output;
	n->n_attr = (uint32_t)pn->n_attribute;
	n->in = arena_array(r->a, n->n_in + n->n_out, sizeof *n->in);
	n->attr = arena_array(r->a, n->n_attr, sizeof *n->attr);
	if (!n->in || !n->attr || extras_in(r, &n->x, &pn->base))
		return err_oom(r->e);
	n->out = n->in + n->n_in;
	for (uint32_t i = 0; i < n->n_in; i++)
		if (*pn->input[i] && !(n->in[i] = graph_value(g, pn->input[i], r->e)))
			return -1;
	for (uint32_t i = 0; i < n->n_out; i++)
		if (graph_set_output(g, n, i, pn->output[i], r->e))
			return -1;
	for (uint32_t i = 0; i < n->n_attr; i++)
		if (attr_in(r, g, &n->attr[i], pn->attribute[i])) {
			char d[300];
			if (r->e->code == GD_EINPUT)
				err_prefix(r->e, "%s", node_desc(n, d, sizeof d));
			return -1;
		}
	/* metadata_props minus our control-dependency entry, which is resolved later */
	n->meta = arena_array(r->a, pn->n_metadata_props, sizeof *n->meta);
	if (!n->meta)
		return err_oom(r->e);
	for (size_t i = 0; i < pn->n_metadata_props; i++) {
		const Onnx__KeyValue *kv = pn->metadata_props[i];
		if (kv->key && strcmp(kv->key, CTRL_KEY) == 0)
			continue;
		struct kv *o = &n->meta[n->n_meta++];
		o->key = kv->key;
		o->value = kv->value;
		if (extras_in(r, &o->x, &kv->base))
			return -1;
	}
	return 0;
}

/* Turns each node's "graphdiet.after" names into control inputs. */
static int ctrl_in(struct rd *r, struct graph *g, const Onnx__Graph *pg)
{
	struct strmap by_name;
	strmap_init(&by_name);
	int rc = 0, built = 0;
	for (size_t i = 0; i < pg->n_node && !rc; i++) {
		const Onnx__Node *pn = pg->node[i];
		for (size_t k = 0; k < pn->n_metadata_props && !rc; k++) {
			const Onnx__KeyValue *kv = pn->metadata_props[k];
			if (!kv->key || strcmp(kv->key, CTRL_KEY) || !kv->value)
				continue;
			if (!built) {
				for (uint32_t j = 0; j < g->n_nodes && !rc; j++)
					if (g->nodes[j]->name && *g->nodes[j]->name &&
					    strmap_put(&by_name, g->nodes[j]->name, g->nodes[j]))
						rc = err_oom(r->e);
				built = 1;
			}
			struct node *n = g->nodes[i];
			size_t cnt = 1;
			for (const char *p = kv->value; *p; p++)
				cnt += *p == '\n';
			n->ctrl = arena_array(r->a, cnt, sizeof *n->ctrl);
			if (!n->ctrl) {
				rc = err_oom(r->e);
				break;
			}
			for (const char *p = kv->value; *p && !rc;) {
				const char *q = strchr(p, '\n');
				size_t len = q ? (size_t)(q - p) : strlen(p);
				char *name = arena_strndup(r->a, p, len);
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
	}
	strmap_free(&by_name);
	return rc;
}

static int graph_in(struct rd *r, struct graph *g, const Onnx__Graph *pg, int top)
{
	g->name = pg->name;
	g->doc = pg->doc_string;
	if (extras_in(r, &g->x, &pg->base) ||
	    strmap_reserve(&g->names, pg->n_input + pg->n_initializer + pg->n_node * 2))
		return err_oom(r->e);
	for (size_t i = 0; i < pg->n_input; i++) {
		const Onnx__ValueInfo *vi = pg->input[i];
		struct value *v = graph_value(g, vi->name ? vi->name : "", r->e);
		if (!v || vinfo_in(r, v, vi) || graph_add_input(g, v, r->e))
			return -1;
	}
	for (size_t i = 0; i < pg->n_initializer; i++) {
		const Onnx__Tensor *pt = pg->initializer[i];
		const struct pb_raw *raw = top && i < r->n_raw ? &r->raw[i] : NULL;
		struct tensor *t = tensor_in(r, pt, raw);
		if (!t)
			return -1;
		struct value *v = graph_value(g, t->name ? t->name : "", r->e);
		if (!v || graph_add_init(g, v, t, r->e))
			return -1;
	}
	for (size_t i = 0; i < pg->n_node; i++)
		if (node_in(r, g, pg->node[i]))
			return -1;
	for (size_t i = 0; i < pg->n_output; i++) {
		const Onnx__ValueInfo *vi = pg->output[i];
		struct value *v = graph_value(g, vi->name ? vi->name : "", r->e);
		if (!v || vinfo_in(r, v, vi) || graph_add_output(g, v, r->e))
			return -1;
	}
	for (size_t i = 0; i < pg->n_value_info; i++) {
		const Onnx__ValueInfo *vi = pg->value_info[i];
		struct value *v = graph_value(g, vi->name ? vi->name : "", r->e);
		if (!v || vinfo_in(r, v, vi) || graph_add_info(g, v, r->e))
			return -1;
	}
	return ctrl_in(r, g, pg);
}

static int model_in(struct rd *r, const Onnx__Model *pm)
{
	struct graph *g = r->root;
	struct model *m = g->model;
	m->has_ir_version = pm->has_ir_version;
	m->ir_version = pm->ir_version;
	m->has_model_version = pm->has_model_version;
	m->model_version = pm->model_version;
	m->producer_name = pm->producer_name;
	m->producer_version = pm->producer_version;
	m->domain = pm->domain;
	m->doc = pm->doc_string;
	if (extras_in(r, &m->x, &pm->base))
		return -1;
	m->n_opsets = pm->n_opset_import;
	m->opsets = arena_array(r->a, m->n_opsets, sizeof *m->opsets);
	if (!m->opsets)
		return err_oom(r->e);
	for (size_t i = 0; i < m->n_opsets; i++) {
		const Onnx__OpsetId *o = pm->opset_import[i];
		m->opsets[i] = (struct opset){o->domain, o->version, o->has_version, {0, NULL}};
		if (extras_in(r, &m->opsets[i].x, &o->base))
			return -1;
	}
	m->n_meta = pm->n_metadata_props;
	if (!(m->meta = kvs_in(r, pm->metadata_props, m->n_meta)))
		return -1;
	if (!pm->graph)
		return err_set(r->e, GD_EINPUT, "not an ONNX model: it has no graph");
	if (graph_in(r, g, pm->graph, 1))
		return -1;
	m->n_ti = pm->n_training_info;
	m->ti = arena_array(r->a, m->n_ti, sizeof *m->ti);
	if (!m->ti)
		return err_oom(r->e);
	for (size_t i = 0; i < m->n_ti; i++) {
		const Onnx__TrainingInfo *pt = pm->training_info[i];
		struct training_info *t = &m->ti[i];
		/* Training graphs read the main graph's initializers, so they resolve names in it. */
		if ((pt->initialization && !(t->init = subgraph_in(r, g, pt->initialization))) ||
		    (pt->algorithm && !(t->algo = subgraph_in(r, g, pt->algorithm))))
			return -1;
		t->n_init_bind = pt->n_initialization_binding;
		t->n_update_bind = pt->n_update_binding;
		if (!(t->init_bind = kvs_in(r, pt->initialization_binding, t->n_init_bind)) ||
		    !(t->update_bind = kvs_in(r, pt->update_binding, t->n_update_bind)) ||
		    extras_in(r, &t->x, &pt->base))
			return -1;
	}
	return 0;
}

static void free_model(void *m)
{
	onnx__model__free_unpacked(m, NULL);
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
	pb_oom = 0;
	Onnx__Model *pm = onnx__model__unpack(&pb_allocator, s.len, s.buf);
	xfree(s.buf);
	s.buf = NULL;
	if (!pm) {
		pbwire_free(&s);
		if (pb_oom)
			err_oom(e);
		else
			err_set(e, GD_EINPUT, "not an ONNX model: protobuf decoding failed (corrupt or not a ModelProto)");
		goto fail;
	}
	if (graph_on_free(g, free_model, pm)) {
		pbwire_free(&s);
		err_oom(e);
		goto fail;
	}
	struct rd r = {g, g->arena, e, s.raw, s.n_raw, base_dir ? arena_strdup(g->arena, base_dir) : NULL};
	int rc = model_in(&r, pm);
	pbwire_free(&s);
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

/* ---------------------------------------------------------------- writing */

struct wr {
	struct arena a;
	struct gd_err *e;
	struct graph *root;
};

#define NEW(w, T, init)                                                       \
	({                                                                    \
		T *p_ = arena_alloc(&(w)->a, sizeof(T));                      \
		if (p_)                                                       \
			*p_ = (T)init;                                        \
		p_;                                                           \
	})
#define ARR(w, n, T) ((T *)arena_array(&(w)->a, (n) ? (n) : 1, sizeof(T)))

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

static Onnx__Type *type_out(struct wr *w, const struct ttype *t)
{
	if (!t->has_type)
		return NULL;
	Onnx__Type *pt = NEW(w, Onnx__Type, ONNX__TYPE__INIT);
	if (!pt)
		return NULL;
	pt->denotation = (char *)t->denotation;
	extras_out(w, &pt->base, &t->type_x);
	if (!t->has_tensor)
		return pt;
	Onnx__TensorType *tt = NEW(w, Onnx__TensorType, ONNX__TENSOR_TYPE__INIT);
	if (!tt)
		return NULL;
	pt->tensor_type = tt;
	tt->has_elem_type = t->has_dtype;
	tt->elem_type = t->dtype;
	extras_out(w, &tt->base, &t->tensor_x);
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
	extras_out(w, &s->base, &t->shape_x);
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
	vi->doc_string = (char *)v->doc;
	extras_out(w, &vi->base, &v->x);
	if (v->type.has_type && !(vi->type = type_out(w, &v->type)))
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
	if (tensor_bytes(w->root, t, &b, w->e))
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
	Onnx__Node *pn = NEW(w, Onnx__Node, ONNX__NODE__INIT);
	if (!pn)
		return NULL;
	pn->name = (char *)n->name;
	pn->op_type = (char *)n->op_type;
	pn->domain = (char *)n->domain;
	pn->doc_string = (char *)n->doc;
	pn->overload = (char *)n->overload;
	extras_out(w, &pn->base, &n->x);
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
	pn->n_metadata_props = n->n_meta + (n->n_ctrl > 0);
	Onnx__KeyValue **meta = kvs_out(w, n->meta, n->n_meta);
	pn->metadata_props = ARR(w, pn->n_metadata_props, Onnx__KeyValue *);
	if (!meta || !pn->metadata_props)
		return NULL;
	memcpy(pn->metadata_props, meta, n->n_meta * sizeof *meta);
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
		pn->metadata_props[n->n_meta] = kv;
	}
	return pn;
}

static Onnx__ValueInfo **vinfos_out(struct wr *w, struct value **vs, uint32_t n)
{
	Onnx__ValueInfo **out = ARR(w, n, Onnx__ValueInfo *);
	for (uint32_t i = 0; out && i < n; i++)
		if (!(out[i] = vinfo_out(w, vs[i])))
			return NULL;
	return out;
}

static Onnx__Graph *graph_out(struct wr *w, struct graph *g)
{
	Onnx__Graph *pg = NEW(w, Onnx__Graph, ONNX__GRAPH__INIT);
	if (!pg)
		goto oom;
	pg->name = (char *)g->name;
	pg->doc_string = (char *)g->doc;
	extras_out(w, &pg->base, &g->x);
	pg->n_node = g->n_nodes;
	pg->node = ARR(w, g->n_nodes, Onnx__Node *);
	if (!pg->node)
		goto oom;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (!(pg->node[i] = node_out(w, g->nodes[i])))
			goto oom;
	pg->n_initializer = g->n_inits;
	pg->initializer = ARR(w, g->n_inits, Onnx__Tensor *);
	if (!pg->initializer)
		goto oom;
	for (uint32_t i = 0; i < g->n_inits; i++)
		if (!(pg->initializer[i] = tensor_out(w, g->inits[i]->init)))
			return NULL;
	pg->n_input = g->n_inputs;
	pg->n_output = g->n_outputs;
	pg->n_value_info = g->n_infos;
	if (!(pg->input = vinfos_out(w, g->inputs, g->n_inputs)) ||
	    !(pg->output = vinfos_out(w, g->outputs, g->n_outputs)) ||
	    !(pg->value_info = vinfos_out(w, g->infos, g->n_infos)))
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
		extras_out(w, &pt->base, &t->x);
	}
	return pm;
oom:
	err_oom(w->e);
	return NULL;
}

struct file_buffer {
	ProtobufCBuffer base;
	FILE *f;
};

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct file_buffer *fb = (struct file_buffer *)b;
	fwrite(data, 1, len, fb->f);
}

int onnx_write(struct graph *g, FILE *f, struct gd_err *e)
{
	struct wr w = {.e = e, .root = g};
	arena_init(&w.a);
	Onnx__Model *pm = model_out(&w, g);
	if (pm) {
		struct file_buffer fb = {{file_append}, f};
		protobuf_c_message_pack_to_buffer(&pm->base, &fb.base);
	}
	arena_free(&w.a);
	return pm ? 0 : (e->code ? e->code : err_oom(e));
}
