/* pbwire.c - see pbwire.h. Two passes per message: measure the stripped length (which the
 * enclosing length prefix needs), then emit. Only the model, graph and initializer levels are
 * walked; every other field is skipped over or copied whole. Truncated or malformed input is
 * reported with its byte offset. */
#include "pbwire.h"
#include "../ir/graph.h"
#include "../util/xalloc.h"

#include <string.h>

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };
enum { MODEL_GRAPH = 7, GRAPH_NODE = 1, GRAPH_INITIALIZER = 5, TENSOR_RAW_DATA = 9, MODEL_TRAINING_INFO = 20,
       TRAINING_INITIALIZATION = 1 };

struct rd {
	const uint8_t *base;
	struct gd_err *e;
};

struct field {
	uint32_t num, wire;
	const uint8_t *start; /* the key */
	const uint8_t *val;   /* payload (after the length prefix for WIRE_LEN) */
	size_t len;           /* payload length for WIRE_LEN */
	const uint8_t *end;   /* one past the field */
};

const uint8_t *pbwire_get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 64 && p < end; shift += 7) {
		uint8_t b = *p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return p;
		}
	}
	return NULL;
}

size_t pbwire_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

uint8_t *pbwire_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Reads the field at p; returns 0, or an error for truncated or malformed input. */
static int next_field(struct rd *r, const uint8_t *p, const uint8_t *end, struct field *f)
{
	uint64_t key, n;
	f->start = p;
	p = pbwire_get_varint(p, end, &key);
	if (!p)
		goto trunc;
	f->num = (uint32_t)(key >> 3);
	f->wire = (uint32_t)(key & 7);
	if (f->num == 0 || key >> 32)
		return err_set(r->e, GD_EINPUT, "not an ONNX model: invalid protobuf field at byte %zu",
			       (size_t)(f->start - r->base));
	switch (f->wire) {
	case WIRE_VARINT:
		p = pbwire_get_varint(p, end, &n);
		if (!p)
			goto trunc;
		break;
	case WIRE_I64:
	case WIRE_I32: {
		size_t w = f->wire == WIRE_I64 ? 8 : 4;
		if ((size_t)(end - p) < w)
			goto trunc;
		p += w;
		break;
	}
	case WIRE_LEN:
		p = pbwire_get_varint(p, end, &n);
		if (!p || n > (uint64_t)(end - p))
			goto trunc;
		f->val = p;
		f->len = (size_t)n;
		p += n;
		break;
	default:
		return err_set(r->e, GD_EINPUT, "not an ONNX model: unsupported protobuf wire type %u at byte %zu",
			       f->wire, (size_t)(f->start - r->base));
	}
	f->end = p;
	return 0;
trunc:
	return err_set(r->e, GD_EINPUT, "truncated or corrupt ONNX file: field at byte %zu runs past the end",
		       (size_t)(f->start - r->base));
}

static int is(const struct field *f, uint32_t num)
{
	return f->num == num && f->wire == WIRE_LEN;
}

/* Length of a tensor without its raw_data fields. */
static int tensor_len(struct rd *r, const uint8_t *p, size_t n, size_t *out)
{
	const uint8_t *end = p + n;
	size_t len = n;
	struct field f;
	while (p < end) {
		if (next_field(r, p, end, &f))
			return -1;
		if (is(&f, TENSOR_RAW_DATA))
			len -= (size_t)(f.end - f.start);
		p = f.end;
	}
	*out = len;
	return 0;
}

size_t pbwire_field_len(uint32_t num, size_t payload)
{
	return pbwire_varint_len((uint64_t)num << 3 | WIRE_LEN) + pbwire_varint_len(payload) + payload;
}

/* What pbwire_strip_raw splits off: from the main graph its initializers' raw_data and its nodes;
 * from a TrainingInfoProto its initialization graph's initializers' raw_data. */
enum strip { STRIP_MAIN, STRIP_INIT, STRIP_TRAINING };

/* Whether f, a field of a message of kind k, holds what is split off. */
static int strips(const struct field *f, enum strip k)
{
	return k == STRIP_TRAINING ? is(f, TRAINING_INITIALIZATION) : is(f, GRAPH_INITIALIZER);
}

/* Length of a graph or TrainingInfoProto (k) without what is split off. */
static int stripped_len(struct rd *r, const uint8_t *p, size_t n, enum strip k, size_t *out)
{
	const uint8_t *end = p + n;
	size_t len = n, sub;
	struct field f;
	while (p < end) {
		if (next_field(r, p, end, &f))
			return -1;
		if (strips(&f, k)) {
			if (k == STRIP_TRAINING ? stripped_len(r, f.val, f.len, STRIP_INIT, &sub)
						: tensor_len(r, f.val, f.len, &sub))
				return -1;
			len = len - (size_t)(f.end - f.start) + pbwire_field_len(f.num, sub);
		} else if (k == STRIP_MAIN && is(&f, GRAPH_NODE)) {
			len -= (size_t)(f.end - f.start);
		}
		p = f.end;
	}
	*out = len;
	return 0;
}

uint8_t *pbwire_put_key_len(uint8_t *o, uint32_t num, size_t len)
{
	o = pbwire_put_varint(o, (uint64_t)num << 3 | WIRE_LEN);
	return pbwire_put_varint(o, len);
}

struct emit {
	struct rd *r;
	uint8_t *o;
	struct pb_stripped *s;
	size_t cap_raw, cap_node, cap_init_raw;
};

static int push_span(struct emit *E, struct pb_raw **arr, size_t *n, size_t *cap, struct pb_raw span)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct pb_raw *na = xreallocarray(*arr, nc, sizeof *na);
		if (!na)
			return err_oom(E->r->e);
		*arr = na;
		*cap = nc;
	}
	(*arr)[(*n)++] = span;
	return 0;
}

static int emit_tensor(struct emit *E, const uint8_t *p, size_t n, int main)
{
	const uint8_t *end = p + n;
	struct pb_raw raw = {NULL, 0};
	struct field f;
	while (p < end) {
		next_field(E->r, p, end, &f); /* already validated by the measuring pass */
		if (is(&f, TENSOR_RAW_DATA)) {
			raw.p = f.val; /* the last occurrence wins, as protobuf decoding has it */
			raw.n = f.len;
		} else {
			memcpy(E->o, f.start, (size_t)(f.end - f.start));
			E->o += f.end - f.start;
		}
		p = f.end;
	}
	return main ? push_span(E, &E->s->raw, &E->s->n_raw, &E->cap_raw, raw)
		    : push_span(E, &E->s->init_raw, &E->s->n_init_raw, &E->cap_init_raw, raw);
}

/* A graph or TrainingInfoProto (k) without what is split off (measured by stripped_len). */
static int emit_msg(struct emit *E, const uint8_t *p, size_t n, enum strip k)
{
	const uint8_t *end = p + n;
	struct field f;
	size_t sub = 0;
	while (p < end) {
		next_field(E->r, p, end, &f);
		if (strips(&f, k)) {
			if (k == STRIP_TRAINING)
				stripped_len(E->r, f.val, f.len, STRIP_INIT, &sub);
			else
				tensor_len(E->r, f.val, f.len, &sub);
			E->o = pbwire_put_key_len(E->o, f.num, sub);
			if (k == STRIP_TRAINING ? emit_msg(E, f.val, f.len, STRIP_INIT)
						: emit_tensor(E, f.val, f.len, k == STRIP_MAIN))
				return -1;
		} else if (k == STRIP_MAIN && is(&f, GRAPH_NODE)) {
			if (push_span(E, &E->s->node, &E->s->n_node, &E->cap_node, (struct pb_raw){f.val, f.len}))
				return -1;
		} else {
			memcpy(E->o, f.start, (size_t)(f.end - f.start));
			E->o += f.end - f.start;
		}
		p = f.end;
	}
	return 0;
}

/* The fields that lead from one message kind to graphs, and the kind each leads to. */
static int child_kind(enum pb_kind k, uint32_t field, enum pb_kind *child)
{
	switch (k) {
	case PB_MODEL:
		if (field == 25) /* a local function */
			return *child = PB_FUNCTION, 1;
		return field == 20 ? (*child = PB_TRAINING, 1) : 0; /* training_info; the main graph is split off */
	case PB_FUNCTION:
		return field == 7 ? (*child = PB_NODE, 1) : 0;
	case PB_TRAINING:
		return field == 1 || field == 2 ? (*child = PB_GRAPH, 1) : 0;
	case PB_GRAPH:
		return field == 1 ? (*child = PB_NODE, 1) : 0;
	case PB_NODE:
		return field == 5 ? (*child = PB_ATTR, 1) : 0;
	case PB_ATTR:
		return field == 6 || field == 11 ? (*child = PB_GRAPH, 1) : 0;
	}
	return 0;
}

static int depth(struct rd *r, const uint8_t *p, size_t n, enum pb_kind k, int graphs)
{
	const uint8_t *end = p + n;
	struct field f;
	enum pb_kind child;
	if (graphs > GRAPH_MAX_DEPTH)
		return err_set(r->e, GD_EINPUT, "subgraphs are nested more than %d deep", GRAPH_MAX_DEPTH);
	while (p < end) {
		if (next_field(r, p, end, &f))
			return -1;
		if (f.wire == WIRE_LEN && child_kind(k, f.num, &child) &&
		    depth(r, f.val, f.len, child, graphs + (child == PB_GRAPH)))
			return -1;
		p = f.end;
	}
	return 0;
}

int pbwire_check_depth(const uint8_t *p, size_t n, enum pb_kind what, struct gd_err *e)
{
	struct rd r = {p, e};
	/* a main-graph node sits at depth 1 */
	return depth(&r, p, n, what, what == PB_NODE) ? e->code : 0;
}

int pbwire_strip_raw(const uint8_t *buf, size_t len, struct pb_stripped *out, struct gd_err *e)
{
	struct rd r = {buf, e};
	memset(out, 0, sizeof *out);
	out->buf = xmalloc(len ? len : 1);
	if (!out->buf)
		return err_oom(e);
	struct emit E = {&r, out->buf, out, 0, 0, 0};
	const uint8_t *p = buf, *end = buf + len;
	struct field f;
	size_t gl;
	while (p < end) {
		if (next_field(&r, p, end, &f))
			goto fail;
		if (is(&f, MODEL_GRAPH) || is(&f, MODEL_TRAINING_INFO)) {
			enum strip k = f.num == MODEL_GRAPH ? STRIP_MAIN : STRIP_TRAINING;
			if (stripped_len(&r, f.val, f.len, k, &gl))
				goto fail;
			E.o = pbwire_put_key_len(E.o, f.num, gl);
			if (emit_msg(&E, f.val, f.len, k))
				goto fail;
		} else {
			memcpy(E.o, f.start, (size_t)(f.end - f.start));
			E.o += f.end - f.start;
		}
		p = f.end;
	}
	out->len = (size_t)(E.o - out->buf);
	return 0;
fail:
	pbwire_free(out);
	return e->code;
}

void pbwire_free(struct pb_stripped *s)
{
	xfree(s->buf);
	xfree(s->raw);
	xfree(s->node);
	xfree(s->init_raw);
	memset(s, 0, sizeof *s);
}
