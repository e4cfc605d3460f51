/* yaml_write.c - IR -> YAML text (graphdiet-yaml(5)).
 *
 * Written by hand rather than through libyaml's event emitter: the output is regular, and the
 * scalar rules are few. Names are plain when they cannot be mistaken for anything else and
 * double-quoted otherwise; attribute strings are always quoted, floats always carry a '.', 'e' or
 * a YAML special (.nan, .inf), so every attribute reads back with its type. Floats are printed
 * with the fewest digits that read back to the same bits. */
#include "../util/base64.h"
#include "../util/utf8.h"
#include "tensor.h"
#include "yaml.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct yw {
	FILE *f;
	struct graph *root;
	size_t inline_max;
	struct gd_err *e;
};

static int plain_ok(const char *s)
{
	static const char *reserved[] = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"};
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' || *s == '/'))
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      *p == '.' || *p == '/' || *p == '-'))
			return 0;
	for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
		if (strcasecmp(s, reserved[i]) == 0)
			return 0;
	return 1;
}

static void quoted(FILE *f, const uint8_t *p, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* A name or other identifier: plain when safe. */
static int str(struct yw *w, const char *s)
{
	if (!utf8_valid((const uint8_t *)s, strlen(s)))
		return err_set(w->e, GD_EINPUT, "string '%s' is not valid UTF-8 and has no YAML form", s);
	if (plain_ok(s))
		fputs(s, w->f);
	else
		quoted(w->f, (const uint8_t *)s, strlen(s));
	return 0;
}

/* A byte string attribute: quoted, or base64 when not UTF-8. */
static void bytes_val(struct yw *w, struct bytes b)
{
	if (!b.n || (utf8_valid(b.p, b.n) && !memchr(b.p, 0, b.n))) { /* b.p may be NULL when empty */
		quoted(w->f, b.p, b.n);
	} else {
		fputs("{base64: \"", w->f);
		base64_write(w->f, b.p, b.n);
		fputs("\"}", w->f);
	}
}

static void float_val(FILE *f, double v, int is_double)
{
	if (isnan(v)) {
		fputs(".nan", f);
		return;
	}
	if (isinf(v)) {
		fputs(v < 0 ? "-.inf" : ".inf", f);
		return;
	}
	char buf[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, v);
		if (is_double ? strtod(buf, NULL) == v : strtof(buf, NULL) == (float)v)
			break;
	}
	fputs(buf, f);
	if (!strpbrk(buf, ".en"))
		fputs(".0", f);
}

static void indent(struct yw *w, int n)
{
	fprintf(w->f, "%*s", n, "");
}

/* Unknown protobuf fields: [{field: N, wire: W, data: base64}, ...] */
static void extras_flow(struct yw *w, const struct extras *x)
{
	fputc('[', w->f);
	for (size_t i = 0; i < x->n; i++) {
		fprintf(w->f, "%s{field: %u, wire: %u, data: \"", i ? ", " : "", x->f[i].field, x->f[i].wire);
		base64_write(w->f, x->f[i].data, x->f[i].len);
		fputs("\"}", w->f);
	}
	fputc(']', w->f);
}

static void extras_out(struct yw *w, int ind, const char *key, const struct extras *x)
{
	if (!x->n)
		return;
	indent(w, ind);
	fprintf(w->f, "%s: ", key);
	extras_flow(w, x);
	fputc('\n', w->f);
}

static int kv_list(struct yw *w, int ind, const char *key, const struct kv *kv, size_t n)
{
	if (!n)
		return 0;
	indent(w, ind);
	fprintf(w->f, "%s:\n", key);
	for (size_t i = 0; i < n; i++) {
		indent(w, ind + 2);
		fputs("- key: ", w->f);
		if (kv[i].key ? str(w, kv[i].key) : (fputs("null", w->f), 0))
			return -1;
		fputc('\n', w->f);
		indent(w, ind + 4);
		fputs("value: ", w->f);
		if (kv[i].value ? str(w, kv[i].value) : (fputs("null", w->f), 0))
			return -1;
		fputc('\n', w->f);
		extras_out(w, ind + 4, "unknown", &kv[i].x);
	}
	return 0;
}

static int opt_str(struct yw *w, int ind, const char *key, const char *s)
{
	if (!s)
		return 0;
	indent(w, ind);
	fprintf(w->f, "%s: ", key);
	if (str(w, s))
		return -1;
	fputc('\n', w->f);
	return 0;
}

static void dtype_val(FILE *f, int dt)
{
	if (dtype_valid(dt))
		fputs(dtype_name(dt), f);
	else
		fprintf(f, "%d", dt);
}

static int dims_val(struct yw *w, const struct ttype *t)
{
	fputc('[', w->f);
	for (uint32_t i = 0; i < t->ndim; i++) {
		const struct dim *d = &t->dims[i];
		if (i)
			fputs(", ", w->f);
		int wrap = d->denotation || d->x.n;
		if (wrap)
			fputs("{dim: ", w->f);
		if (d->kind == DIM_VALUE)
			fprintf(w->f, "%" PRId64, d->value);
		else if (d->kind == DIM_PARAM) {
			if (plain_ok(d->param))
				fputs(d->param, w->f);
			else
				quoted(w->f, (const uint8_t *)d->param, strlen(d->param));
		} else
			fputs("null", w->f);
		if (d->denotation) {
			fputs(", denotation: ", w->f);
			if (str(w, d->denotation))
				return -1;
		}
		if (d->x.n) {
			fputs(", unknown: ", w->f);
			extras_flow(w, &d->x);
		}
		if (wrap)
			fputc('}', w->f);
	}
	fputc(']', w->f);
	return 0;
}

/* One inputs/outputs/values entry. */
static int value_entry(struct yw *w, int ind, const struct value *v)
{
	const struct ttype *t = &v->type;
	indent(w, ind);
	fputs("- name: ", w->f);
	if (str(w, v->name))
		return -1;
	fputc('\n', w->f);
	if (t->has_type && !t->has_tensor) {
		indent(w, ind + 2);
		fputs("tensor_type: false\n", w->f);
	} else if (t->has_tensor && !t->has_dtype && !t->has_shape) {
		indent(w, ind + 2);
		fputs("tensor_type: true\n", w->f);
	} else if (!t->has_type) {
		indent(w, ind + 2);
		fputs("type: false\n", w->f);
	}
	if (t->has_dtype) {
		indent(w, ind + 2);
		fputs("dtype: ", w->f);
		dtype_val(w->f, t->dtype);
		fputc('\n', w->f);
	}
	if (t->has_shape) {
		indent(w, ind + 2);
		fputs("shape: ", w->f);
		if (dims_val(w, t))
			return -1;
		fputc('\n', w->f);
	}
	const struct value_ext *x = value_ext(v);
	if (opt_str(w, ind + 2, "denotation", x->denotation) || opt_str(w, ind + 2, "doc", x->doc))
		return -1;
	extras_out(w, ind + 2, "unknown", &x->x);
	extras_out(w, ind + 2, "type_unknown", &x->type_x);
	extras_out(w, ind + 2, "tensor_unknown", &x->tensor_x);
	extras_out(w, ind + 2, "shape_unknown", &x->shape_x);
	return 0;
}

static int inline_ok(const struct tensor *t, struct bytes b, size_t max)
{
	size_t es = dtype_size(t->dtype), n = es ? b.n / es : 0;
	if (n > max)
		return 0;
	switch (t->dtype) {
	case DT_FLOAT:
	case DT_DOUBLE:
		for (size_t i = 0; i < n; i++) {
			double v;
			if (t->dtype == DT_FLOAT) {
				float f;
				memcpy(&f, b.p + 4 * i, 4);
				v = f;
			} else {
				memcpy(&v, b.p + 8 * i, 8);
			}
			if (!isfinite(v))
				return 0; /* NaN payloads only survive as bytes */
		}
		return 1;
	case DT_INT8: case DT_INT16: case DT_INT32: case DT_INT64:
	case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64: case DT_BOOL:
		return 1;
	default:
		return 0;
	}
}

static void number_at(FILE *f, int dt, const uint8_t *p)
{
	union {
		float f;
		double d;
		int8_t i8;
		int16_t i16;
		int32_t i32;
		int64_t i64;
		uint8_t u8;
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;
	} u;
	memcpy(&u, p, dtype_size(dt));
	switch (dt) {
	case DT_FLOAT: float_val(f, u.f, 0); break;
	case DT_DOUBLE: float_val(f, u.d, 1); break;
	case DT_INT8: fprintf(f, "%d", u.i8); break;
	case DT_INT16: fprintf(f, "%d", u.i16); break;
	case DT_INT32: fprintf(f, "%" PRId32, u.i32); break;
	case DT_INT64: fprintf(f, "%" PRId64, u.i64); break;
	case DT_UINT8: case DT_BOOL: fprintf(f, "%u", u.u8); break;
	case DT_UINT16: fprintf(f, "%u", u.u16); break;
	case DT_UINT32: fprintf(f, "%" PRIu32, u.u32); break;
	default: fprintf(f, "%" PRIu64, u.u64); break;
	}
}

/* The keys of a tensor (after its name), at indent ind. */
static int tensor_body(struct yw *w, int ind, const struct tensor *t)
{
	indent(w, ind);
	fputs("dtype: ", w->f);
	dtype_val(w->f, t->dtype);
	fputc('\n', w->f);
	indent(w, ind);
	fputs("shape: [", w->f);
	for (uint32_t i = 0; i < t->ndim; i++)
		fprintf(w->f, "%s%" PRId64, i ? ", " : "", t->dims[i]);
	fputs("]\n", w->f);
	if (opt_str(w, ind, "doc", t->doc))
		return -1;
	if (t->has_location) {
		indent(w, ind);
		fprintf(w->f, "data_location: %d\n", t->location);
	}
	if (kv_list(w, ind, "external", t->external, t->n_external))
		return -1;
	switch (t->src) {
	case TSRC_BYTES: {
		if (t->field == TFIELD_TYPED) {
			indent(w, ind);
			fputs("typed: true\n", w->f);
		}
		indent(w, ind);
		if (inline_ok(t, t->bytes, w->inline_max)) {
			size_t es = dtype_size(t->dtype);
			fputs("data: [", w->f);
			for (size_t i = 0; i * es < t->bytes.n; i++) {
				if (i)
					fputs(", ", w->f);
				number_at(w->f, t->dtype, t->bytes.p + i * es);
			}
			fputs("]\n", w->f);
		} else {
			fputs("raw: ", w->f);
			base64_write(w->f, t->bytes.p, t->bytes.n);
			fputc('\n', w->f);
		}
		break;
	}
	case TSRC_STRINGS:
		indent(w, ind);
		fputs("strings: [", w->f);
		for (size_t i = 0; i < t->n_strings; i++) {
			if (i)
				fputs(", ", w->f);
			bytes_val(w, t->strings[i]);
		}
		fputs("]\n", w->f);
		break;
	case TSRC_NPY:
		if (opt_str(w, ind, "npy", t->path))
			return -1;
		break;
	case TSRC_RANDOM:
		indent(w, ind);
		if (t->rnd.dist == RND_NORMAL) {
			fputs("init: {dist: normal, mean: ", w->f);
			float_val(w->f, t->rnd.a, 1);
			fputs(", std: ", w->f);
			float_val(w->f, t->rnd.b, 1);
		} else if (t->rnd.dist == RND_UNIFORM) {
			fputs("init: {dist: uniform, low: ", w->f);
			float_val(w->f, t->rnd.a, 1);
			fputs(", high: ", w->f);
			float_val(w->f, t->rnd.b, 1);
		} else {
			fputs("init: {dist: constant, value: ", w->f);
			float_val(w->f, t->rnd.a, 1);
		}
		fprintf(w->f, ", seed: %" PRIu64 "}\n", t->rnd.seed);
		break;
	default:
		break;
	}
	extras_out(w, ind, "unknown", &t->x);
	return 0;
}

static int tensor_entry(struct yw *w, int ind, const struct tensor *t)
{
	indent(w, ind);
	fputs("- name: ", w->f);
	if (t->name ? str(w, t->name) : (fputs("null", w->f), 0))
		return -1;
	fputc('\n', w->f);
	return tensor_body(w, ind + 2, t);
}

static int graph_body(struct yw *w, int ind, struct graph *g);

static const char *attr_type_names[] = {"undefined", "float", "int", "string", "tensor", "graph", "floats",
					"ints", "strings", "tensors", "graphs", "sparse_tensor", "sparse_tensors",
					"type_proto", "type_protos"};

static int attr_val(struct yw *w, int ind, const struct attr *a)
{
	/* The explicit form {type: ..., value: ...} is used whenever the short one would lose something. */
	int list = a->type == ATTR_FLOATS || a->type == ATTR_INTS || a->type == ATTR_STRINGS;
	int simple = a->type == ATTR_FLOAT || a->type == ATTR_INT || a->type == ATTR_STRING || (list && a->n);
	int explicit_ = !simple || a->doc || a->ref || !a->has_type || a->x.n;
	if (a->type == ATTR_TENSOR || a->type == ATTR_GRAPH || a->type == ATTR_TENSORS || a->type == ATTR_GRAPHS)
		explicit_ = 1;
	if (explicit_) {
		fputc('\n', w->f);
		indent(w, ind);
		fputs("type: ", w->f);
		if (a->type >= 0 && a->type <= ATTR_TYPE_PROTOS)
			fputs(attr_type_names[a->type], w->f);
		else
			fprintf(w->f, "%d", a->type);
		fputc('\n', w->f);
		if (!a->has_type) {
			indent(w, ind);
			fputs("has_type: false\n", w->f);
		}
		if (opt_str(w, ind, "doc", a->doc) || opt_str(w, ind, "ref", a->ref))
			return -1;
		extras_out(w, ind, "unknown", &a->x);
		if (a->type == ATTR_TENSOR)
			return indent(w, ind), fputs("value:\n", w->f), tensor_body(w, ind + 2, a->t);
		if (a->type == ATTR_GRAPH)
			return indent(w, ind), fputs("value:\n", w->f), graph_body(w, ind + 2, a->g);
		if (a->type == ATTR_TENSORS || a->type == ATTR_GRAPHS) {
			indent(w, ind);
			fputs(a->n ? "value:\n" : "value: []\n", w->f);
			for (size_t i = 0; i < a->n; i++) {
				indent(w, ind + 2);
				fputs("-\n", w->f);
				if (a->type == ATTR_TENSORS ? tensor_body(w, ind + 4, a->tensors[i])
							    : graph_body(w, ind + 4, a->graphs[i]))
					return -1;
			}
			return 0;
		}
		if (a->type < ATTR_FLOAT || a->type > ATTR_STRINGS)
			return 0;
		indent(w, ind);
		fputs("value: ", w->f);
	}
	switch (a->type) {
	case ATTR_FLOAT:
		float_val(w->f, a->f, 0);
		break;
	case ATTR_INT:
		fprintf(w->f, "%" PRId64, a->i);
		break;
	case ATTR_STRING:
		bytes_val(w, a->s);
		break;
	default:
		fputc('[', w->f);
		for (size_t i = 0; i < a->n; i++) {
			if (i)
				fputs(", ", w->f);
			if (a->type == ATTR_FLOATS)
				float_val(w->f, a->floats[i], 0);
			else if (a->type == ATTR_INTS)
				fprintf(w->f, "%" PRId64, a->ints[i]);
			else
				bytes_val(w, a->strings[i]);
		}
		fputc(']', w->f);
	}
	fputc('\n', w->f);
	return 0;
}

static int name_list(struct yw *w, struct value *const *vs, uint32_t n)
{
	fputc('[', w->f);
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", w->f);
		if (!vs[i])
			fputs("\"\"", w->f);
		else if (str(w, vs[i]->name))
			return -1;
	}
	fputs("]\n", w->f);
	return 0;
}

static int node_entry(struct yw *w, int ind, const struct node *n)
{
	indent(w, ind);
	fputs("- ", w->f);
	if (n->name) {
		fputs("name: ", w->f);
		if (str(w, n->name))
			return -1;
		fputc('\n', w->f);
		indent(w, ind + 2);
	}
	fputs("op: ", w->f);
	if (str(w, n->op_type))
		return -1;
	fputc('\n', w->f);
	if (opt_str(w, ind + 2, "domain", n->domain) || opt_str(w, ind + 2, "overload", node_ext(n)->overload))
		return -1;
	indent(w, ind + 2);
	fputs("inputs: ", w->f);
	if (name_list(w, n->in, n->n_in))
		return -1;
	indent(w, ind + 2);
	fputs("outputs: ", w->f);
	if (name_list(w, n->out, n->n_out))
		return -1;
	if (n->n_attr) {
		indent(w, ind + 2);
		fputs("attrs:\n", w->f);
		for (uint32_t i = 0; i < n->n_attr; i++) {
			indent(w, ind + 4);
			if (str(w, n->attr[i].name))
				return -1;
			fputs(": ", w->f);
			if (attr_val(w, ind + 6, &n->attr[i]))
				return -1;
		}
	}
	if (n->n_ctrl) {
		indent(w, ind + 2);
		fputs("after: [", w->f);
		for (uint32_t i = 0; i < n->n_ctrl; i++) {
			if (i)
				fputs(", ", w->f);
			if (str(w, n->ctrl[i]->name ? n->ctrl[i]->name : ""))
				return -1;
		}
		fputs("]\n", w->f);
	}
	if (n->tags) {
		char buf[128];
		indent(w, ind + 2);
		fprintf(w->f, "tags: [%s]\n", node_tags_str(n->tags, buf, sizeof buf));
	}
	if (opt_str(w, ind + 2, "doc", node_ext(n)->doc) || kv_list(w, ind + 2, "meta", node_ext(n)->meta, node_ext(n)->n_meta))
		return -1;
	extras_out(w, ind + 2, "unknown", &node_ext(n)->x);
	return 0;
}

static int value_list(struct yw *w, int ind, const char *key, struct value **vs, uint32_t n)
{
	if (!n)
		return 0;
	indent(w, ind);
	fprintf(w->f, "%s:\n", key);
	for (uint32_t i = 0; i < n; i++)
		if (value_entry(w, ind + 2, vs[i]))
			return -1;
	return 0;
}

static int graph_body(struct yw *w, int ind, struct graph *g)
{
	if (opt_str(w, ind, "name", g->name) || opt_str(w, ind, "doc", g->doc) ||
	    value_list(w, ind, "inputs", g->inputs, g->n_inputs))
		return -1;
	if (g->n_inits) {
		indent(w, ind);
		fputs("params:\n", w->f);
		for (uint32_t i = 0; i < g->n_inits; i++)
			if (tensor_entry(w, ind + 2, g->inits[i]->init))
				return -1;
	}
	if (g->n_nodes) {
		indent(w, ind);
		fputs("nodes:\n", w->f);
		for (uint32_t i = 0; i < g->n_nodes; i++)
			if (node_entry(w, ind + 2, g->nodes[i]))
				return -1;
	}
	if (value_list(w, ind, "outputs", g->outputs, g->n_outputs) ||
	    value_list(w, ind, "values", g->infos, g->n_infos))
		return -1;
	extras_out(w, ind, "unknown", &g->x);
	return 0;
}

static int model_head(struct yw *w, const struct model *m)
{
	fprintf(w->f, "graphdiet: %d\n", YAML_FORMAT_VERSION);
	if (m->has_ir_version)
		fprintf(w->f, "ir_version: %" PRId64 "\n", m->ir_version);
	/* The short form is what PyTorch writes: one default-domain opset with no domain field. */
	if (m->n_opsets == 1 && !m->opsets[0].domain && m->opsets[0].has_version && !m->opsets[0].x.n) {
		fprintf(w->f, "opset: %" PRId64 "\n", m->opsets[0].version);
	} else if (m->n_opsets) {
		fputs("opsets:\n", w->f);
		for (size_t i = 0; i < m->n_opsets; i++) {
			const struct opset *o = &m->opsets[i];
			fputs("  - {", w->f);
			if (o->domain) {
				fputs("domain: ", w->f);
				quoted(w->f, (const uint8_t *)o->domain, strlen(o->domain));
			}
			if (o->has_version)
				fprintf(w->f, "%sversion: %" PRId64, o->domain ? ", " : "", o->version);
			if (o->x.n) { /* not reached by any known producer */
				fputs(o->domain || o->has_version ? ", unknown: " : "unknown: ", w->f);
				extras_flow(w, &o->x);
			}
			fputs("}\n", w->f);
		}
	}
	if (opt_str(w, 0, "producer_name", m->producer_name) || opt_str(w, 0, "producer_version", m->producer_version) ||
	    opt_str(w, 0, "domain", m->domain))
		return -1;
	if (m->has_model_version)
		fprintf(w->f, "model_version: %" PRId64 "\n", m->model_version);
	if (opt_str(w, 0, "model_doc", m->doc) || kv_list(w, 0, "metadata", m->meta, m->n_meta))
		return -1;
	extras_out(w, 0, "model_unknown", &m->x);
	return 0;
}

static int training_info(struct yw *w, const struct model *m)
{
	if (!m->n_ti)
		return 0;
	fputs("training_info:\n", w->f);
	for (size_t i = 0; i < m->n_ti; i++) {
		const struct training_info *t = &m->ti[i];
		fputs("  -\n", w->f);
		if (t->init) {
			fputs("    initialization:\n", w->f);
			if (graph_body(w, 6, t->init))
				return -1;
		}
		if (t->algo) {
			fputs("    algorithm:\n", w->f);
			if (graph_body(w, 6, t->algo))
				return -1;
		}
		if (kv_list(w, 4, "initialization_binding", t->init_bind, t->n_init_bind) ||
		    kv_list(w, 4, "update_binding", t->update_bind, t->n_update_bind))
			return -1;
		extras_out(w, 4, "unknown", &t->x);
	}
	return 0;
}

int yaml_write(struct graph *g, FILE *f, size_t inline_max, struct gd_err *e)
{
	struct yw w = {f, g, inline_max, e};
	if (model_head(&w, g->model) || graph_body(&w, 0, g) || training_info(&w, g->model))
		return e->code ? e->code : GD_EINTERNAL;
	return 0;
}
