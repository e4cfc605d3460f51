/* nodewire.c - see nodewire.h.
 *
 * The bytes are those protobuf-c packs for the Onnx__Node that onnx.c's node_out builds: fields in
 * number order (input 1, output 2, name 3, op_type 4, attribute 5, doc_string 6, domain 7,
 * overload 8, metadata_props 9), absent strings left out, repeated scalars unpacked (as the ONNX
 * schema declares them), int64 and int32 as two's-complement varints. A test re-packs written
 * models with protobuf-c and requires the same bytes. */
#include "nodewire.h"
#include "pbwire.h"

#include <string.h>

enum { WIRE_VARINT = 0, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

/* The encoder writes each length-delimited field's payload where it goes after a one-byte length
 * prefix, then writes the prefix, moving a payload of 128 bytes or more up by the prefix's extra
 * bytes: one pass, each string measured once. Every write checks the room left; `full` says it
 * ran out, and the caller gives more and writes the node again. */
struct out {
	uint8_t *o, *end;
	int full;
};

static int room(struct out *w, size_t n)
{
	if (w->full || (size_t)(w->end - w->o) < n) {
		w->full = 1;
		return 0;
	}
	return 1;
}

static void put_varint(struct out *w, uint32_t field, uint64_t v)
{
	if (room(w, 20))
		w->o = pbwire_put_varint(pbwire_put_varint(w->o, (uint64_t)field << 3 | WIRE_VARINT), v);
}

static void put_float(struct out *w, uint32_t field, float f)
{
	if (!room(w, 10))
		return;
	w->o = pbwire_put_varint(w->o, (uint64_t)field << 3 | WIRE_FIXED32);
	uint32_t u;
	memcpy(&u, &f, 4);
	for (int i = 0; i < 4; i++)
		*w->o++ = (uint8_t)(u >> (8 * i));
}

static void put_bytes(struct out *w, uint32_t field, const void *p, size_t len)
{
	if (!room(w, 20 + len))
		return;
	w->o = pbwire_put_key_len(w->o, field, len);
	if (len) /* p may be NULL then (an empty bytes attribute) */
		memcpy(w->o, p, len);
	w->o += len;
}

static void put_str(struct out *w, uint32_t field, const char *s)
{
	if (s)
		put_bytes(w, field, s, strlen(s));
}

/* A nested message: the key and a one-byte length now; msg_end fixes the length. */
static uint8_t *msg_begin(struct out *w, uint32_t field)
{
	if (!room(w, 6))
		return NULL;
	w->o = pbwire_put_varint(w->o, (uint64_t)field << 3 | WIRE_LEN) + 1;
	return w->o;
}

static void msg_end(struct out *w, uint8_t *payload)
{
	if (w->full)
		return;
	size_t len = (size_t)(w->o - payload), extra = pbwire_varint_len(len) - 1;
	if (extra) {
		if (!room(w, extra))
			return;
		memmove(payload + extra, payload, len);
		w->o += extra;
	}
	pbwire_put_varint(payload - 1, len);
}

static void attr_msg(struct out *w, const struct attr *a)
{
	uint8_t *m = msg_begin(w, 5);
	put_str(w, 1, a->name);
	switch (a->type) {
	case ATTR_FLOAT:
		put_float(w, 2, a->f);
		break;
	case ATTR_INT:
		put_varint(w, 3, (uint64_t)a->i);
		break;
	case ATTR_STRING:
		put_bytes(w, 4, a->s.p, a->s.n);
		break;
	case ATTR_FLOATS:
		for (size_t i = 0; i < a->n; i++)
			put_float(w, 7, a->floats[i]);
		break;
	case ATTR_INTS:
		for (size_t i = 0; i < a->n; i++)
			put_varint(w, 8, (uint64_t)a->ints[i]);
		break;
	default: /* ATTR_STRINGS: nodewire_fits lets no other type through */
		for (size_t i = 0; i < a->n; i++)
			put_bytes(w, 9, a->strings[i].p, a->strings[i].n);
		break;
	}
	put_str(w, 13, a->doc);
	if (a->has_type)
		put_varint(w, 20, (uint64_t)(int64_t)a->type);
	put_str(w, 21, a->ref);
	msg_end(w, m);
}

static void kv_msg(struct out *w, const char *key, const char *value)
{
	uint8_t *m = msg_begin(w, 9);
	put_str(w, 1, key);
	put_str(w, 2, value);
	msg_end(w, m);
}

/* The control inputs' names, one per line, as a KeyValue value. */
static void ctrl_msg(struct out *w, const struct node *n)
{
	uint8_t *m = msg_begin(w, 9);
	put_str(w, 1, NODEWIRE_CTRL_KEY);
	uint8_t *v = msg_begin(w, 2);
	for (uint32_t i = 0; i < n->n_ctrl; i++) {
		const char *nm = n->ctrl[i]->name ? n->ctrl[i]->name : "";
		size_t l = strlen(nm);
		if (!room(w, l + 1))
			return;
		memcpy(w->o, nm, l);
		w->o += l;
		if (i + 1 < n->n_ctrl)
			*w->o++ = '\n';
	}
	msg_end(w, v);
	msg_end(w, m);
}

int nodewire_fits(const struct node *n)
{
	const struct node_ext *nx = node_ext(n);
	if (nx->x.n)
		return 0;
	for (uint32_t i = 0; i < n->n_attr; i++) {
		const struct attr *a = &n->attr[i];
		int t = a->type;
		if (a->x.n || !(t == ATTR_FLOAT || t == ATTR_INT || t == ATTR_STRING || t == ATTR_FLOATS || t == ATTR_INTS ||
				t == ATTR_STRINGS))
			return 0;
	}
	for (uint32_t i = 0; i < nx->n_meta; i++)
		if (nx->meta[i].x.n)
			return 0;
	return 1;
}

uint8_t *nodewire_put(uint8_t *o, uint8_t *end, uint32_t field, const struct node *n)
{
	const struct node_ext *nx = node_ext(n);
	struct out b = {o, end, 0}, *w = &b;
	uint8_t *m = msg_begin(w, field);
	for (uint32_t i = 0; i < n->n_in; i++)
		put_str(w, 1, n->in[i] ? n->in[i]->name : "");
	for (uint32_t i = 0; i < n->n_out; i++)
		put_str(w, 2, n->out[i] ? n->out[i]->name : "");
	put_str(w, 3, n->name);
	put_str(w, 4, n->op_type);
	for (uint32_t i = 0; i < n->n_attr; i++)
		attr_msg(w, &n->attr[i]);
	put_str(w, 6, nx->doc);
	put_str(w, 7, n->domain);
	put_str(w, 8, nx->overload);
	for (uint32_t i = 0; i < nx->n_meta; i++)
		kv_msg(w, nx->meta[i].key, nx->meta[i].value);
	if (n->tags) {
		char buf[128];
		kv_msg(w, NODEWIRE_TAGS_KEY, node_tags_str(n->tags, buf, sizeof buf));
	}
	if (n->n_ctrl)
		ctrl_msg(w, n);
	msg_end(w, m);
	return w->full ? NULL : w->o;
}

/* Four stages, each a few nodes ahead of the next, so that what a stage reads was loaded by the
 * one before it: the node, then its lists, then the values and control nodes, then their names. */
void nodewire_prefetch(struct node *const *nodes, uint32_t i, uint32_t n)
{
	if (i + 16 < n) {
		__builtin_prefetch(nodes[i + 16]);
		__builtin_prefetch((const char *)nodes[i + 16] + 64);
	}
	if (i + 8 < n) {
		const struct node *b = nodes[i + 8];
		__builtin_prefetch(b->in);
		__builtin_prefetch(b->out);
		__builtin_prefetch(b->name);
		__builtin_prefetch(b->ctrl);
	}
	if (i + 4 < n) {
		const struct node *c = nodes[i + 4];
		for (uint32_t k = 0; k < c->n_in; k++)
			__builtin_prefetch(c->in[k]);
		for (uint32_t k = 0; k < c->n_out; k++)
			__builtin_prefetch(c->out[k]);
		for (uint32_t k = 0; k < c->n_ctrl; k++)
			__builtin_prefetch(c->ctrl[k]);
	}
	if (i + 2 < n) {
		const struct node *d = nodes[i + 2];
		for (uint32_t k = 0; k < d->n_in; k++)
			if (d->in[k])
				__builtin_prefetch(d->in[k]->name);
		for (uint32_t k = 0; k < d->n_out; k++)
			if (d->out[k])
				__builtin_prefetch(d->out[k]->name);
		for (uint32_t k = 0; k < d->n_ctrl; k++)
			__builtin_prefetch(d->ctrl[k]->name);
	}
}

/* ---------------------------------------------------------------- tensors and ValueInfos */

int nodewire_tensor_fits(const struct tensor *t)
{
	return t->src == TSRC_BYTES && t->field == TFIELD_RAW && !t->x.n && !t->n_external && !t->has_location;
}

uint8_t *nodewire_tensor_put(uint8_t *o, uint8_t *end, uint32_t field, const struct tensor *t, unsigned pad,
			     size_t *raw_at)
{
	/* dims, data_type and name, then doc_string, written 32 bytes in: room for the field's key and
	 * length and raw_data's, which are known only once the rest is measured */
	if (end - o < 32)
		return NULL;
	struct out b = {o + 32, end, 0};
	for (uint32_t i = 0; i < t->ndim; i++)
		put_varint(&b, 1, (uint64_t)t->dims[i]);
	if (!pad || t->dtype < 0 || pbwire_varint_len((uint64_t)t->dtype) + pad > 10) {
		put_varint(&b, 2, (uint64_t)(int64_t)(int32_t)t->dtype);
	} else if (room(&b, 20)) { /* overlong: zero 7-bit groups after the value's */
		uint8_t *q = pbwire_put_varint(pbwire_put_varint(b.o, 2 << 3 | WIRE_VARINT), (uint64_t)t->dtype);
		q[-1] |= 0x80;
		memset(q, 0x80, pad - 1);
		q[pad - 1] = 0;
		b.o = q + pad;
	}
	put_str(&b, 8, t->name);
	uint8_t *body_end = b.o;
	put_str(&b, 12, t->doc);
	if (b.full)
		return NULL;
	size_t blen = (size_t)(body_end - (o + 32)), plen = (size_t)(b.o - body_end), n = t->bytes.n;
	size_t payload = blen + pbwire_field_len(9, n) + plen;
	uint8_t head[32];
	size_t hl = (size_t)(pbwire_put_key_len(head, field, payload) - head);
	memmove(o + hl, o + 32, blen);
	memcpy(o, head, hl);
	uint8_t *r = pbwire_put_key_len(o + hl + blen, 9, n); /* then the raw bytes go here */
	memmove(r, body_end, plen);
	*raw_at = (size_t)(r - o);
	return r + plen;
}

int nodewire_vinfo_fits(const struct value *v)
{
	const struct value_ext *x = value_ext(v);
	if (x->x.n || x->type_x.n || x->tensor_x.n || x->shape_x.n)
		return 0;
	for (uint32_t i = 0; v->type.has_shape && i < v->type.ndim; i++)
		if (v->type.dims[i].x.n)
			return 0;
	return 1;
}

uint8_t *nodewire_vinfo_put(uint8_t *o, uint8_t *end, uint32_t field, const struct value *v)
{
	struct out b = {o, end, 0}, *w = &b;
	const struct ttype *t = &v->type;
	const struct value_ext *x = value_ext(v);
	uint8_t *m = msg_begin(w, field);
	put_str(w, 1, v->name);
	if (t->has_type) {
		uint8_t *ty = msg_begin(w, 2);
		if (t->has_tensor) {
			uint8_t *tt = msg_begin(w, 1);
			if (t->has_dtype)
				put_varint(w, 1, (uint64_t)(int64_t)(int32_t)t->dtype);
			if (t->has_shape) {
				uint8_t *sh = msg_begin(w, 2);
				for (uint32_t i = 0; i < t->ndim; i++) {
					const struct dim *d = &t->dims[i];
					uint8_t *dm = msg_begin(w, 1);
					if (d->kind == DIM_VALUE)
						put_varint(w, 1, (uint64_t)d->value);
					if (d->kind == DIM_PARAM)
						put_str(w, 2, d->param);
					put_str(w, 3, d->denotation);
					msg_end(w, dm);
				}
				msg_end(w, sh);
			}
			msg_end(w, tt);
		}
		put_str(w, 6, x->denotation);
		msg_end(w, ty);
	}
	put_str(w, 3, x->doc);
	msg_end(w, m);
	return w->full ? NULL : w->o;
}

/* ---------------------------------------------------------------- reading */

/* One field: its number and wire type, a scalar's value or a length-delimited payload. */
struct fld {
	uint32_t num, wire;
	uint64_t v;
	const uint8_t *p;
	size_t n;
};

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The field at *pp, advancing past it; 0 if it is malformed or truncated. */
static int get_field(const uint8_t **pp, const uint8_t *end, struct fld *f)
{
	uint64_t key;
	const uint8_t *p = pbwire_get_varint(*pp, end, &key);
	if (!p || key >> 32 || !(key >> 3))
		return 0;
	f->num = (uint32_t)(key >> 3);
	f->wire = (uint32_t)(key & 7);
	switch (f->wire) {
	case WIRE_VARINT:
		p = pbwire_get_varint(p, end, &f->v);
		break;
	case WIRE_FIXED32:
		if (end - p < 4)
			return 0;
		f->v = le32(p);
		p += 4;
		break;
	case WIRE_LEN:
		p = pbwire_get_varint(p, end, &f->v);
		if (!p || f->v > (uint64_t)(end - p))
			return 0;
		f->p = p;
		f->n = (size_t)f->v;
		p += f->n;
		break;
	default: /* 64-bit scalars and groups occur in no field the fast path takes */
		return 0;
	}
	if (!p)
		return 0;
	*pp = p;
	return 1;
}

/* A message's fields, one by one: next_field gives 1 and the field, or 0 at the end; `bad` says the
 * end came early, at a malformed or truncated field. */
struct wire_rd {
	const uint8_t *p, *end;
	int bad;
};

static int next_field(struct wire_rd *r, struct fld *f)
{
	if (r->p >= r->end)
		return 0;
	r->bad = !get_field(&r->p, r->end, f);
	return !r->bad;
}

static char *sdup(struct arena *a, const struct fld *f)
{
	return arena_strndup(a, (const char *)f->p, f->n);
}

/* bytes as protobuf-c decodes them: NULL data when empty */
static ProtobufCBinaryData bdup(struct arena *a, const struct fld *f, int *bad)
{
	ProtobufCBinaryData b = {f->n, NULL};
	if (f->n && !(b.data = arena_memdup(a, f->p, f->n)))
		*bad = 1;
	return b;
}

/* The varints of a packed payload: their count, and them into out (when not NULL). */
static size_t packed_varints(const struct fld *f, int64_t *out, int *bad)
{
	size_t k = 0;
	for (const uint8_t *p = f->p, *end = f->p + f->n; p < end; k++) {
		uint64_t v;
		if (!(p = pbwire_get_varint(p, end, &v))) {
			*bad = 1;
			return 0;
		}
		if (out)
			out[k] = (int64_t)v;
	}
	return k;
}

/* An AttributeProto with number, string and list fields only; NULL for anything else. */
static Onnx__Attribute *attr_get(const struct fld *m, struct arena *a)
{
	size_t nf = 0, ni = 0, ns = 0;
	int bad = 0;
	struct fld f;
	struct wire_rd r = {m->p, m->p + m->n, 0};
	while (next_field(&r, &f)) {
		switch (f.num) {
		case 1: case 4: case 13: case 21: bad |= f.wire != WIRE_LEN; break;
		case 2: bad |= f.wire != WIRE_FIXED32; break;
		case 3: case 20: bad |= f.wire != WIRE_VARINT; break;
		case 7: nf += f.wire == WIRE_FIXED32 ? 1 : f.wire == WIRE_LEN && !(f.n % 4) ? f.n / 4 : (bad = 1, 0); break;
		case 8: ni += f.wire == WIRE_VARINT ? 1 : f.wire == WIRE_LEN ? packed_varints(&f, NULL, &bad) : (bad = 1, 0); break;
		case 9: ns++; bad |= f.wire != WIRE_LEN; break;
		default: bad = 1; /* tensors, graphs, type protos, unknown fields */
		}
		if (bad)
			return NULL;
	}
	if (r.bad)
		return NULL;
	Onnx__Attribute *at = arena_alloc(a, sizeof *at);
	float *floats = arena_alloc(a, nf * sizeof *floats);
	int64_t *ints = arena_alloc(a, ni * sizeof *ints);
	ProtobufCBinaryData *strings = arena_alloc(a, ns * sizeof *strings);
	if (!at || !floats || !ints || !strings)
		return NULL;
	*at = (Onnx__Attribute)ONNX__ATTRIBUTE__INIT;
	at->floats = nf ? floats : NULL;
	at->ints = ni ? ints : NULL;
	at->strings = ns ? strings : NULL;
	for (r = (struct wire_rd){m->p, m->p + m->n, 0}; next_field(&r, &f);) {
		switch (f.num) {
		case 1: bad |= !(at->name = sdup(a, &f)); break;
		case 2: at->has_f = 1; memcpy(&at->f, &(uint32_t){(uint32_t)f.v}, 4); break;
		case 3: at->has_i = 1; at->i = (int64_t)f.v; break;
		case 4: at->has_s = 1; at->s = bdup(a, &f, &bad); break;
		case 7:
			if (f.wire == WIRE_FIXED32)
				memcpy(&at->floats[at->n_floats++], &(uint32_t){(uint32_t)f.v}, 4);
			else
				for (size_t i = 0; i < f.n / 4; i++)
					memcpy(&at->floats[at->n_floats++], &(uint32_t){le32(f.p + 4 * i)}, 4);
			break;
		case 8:
			if (f.wire == WIRE_VARINT)
				at->ints[at->n_ints++] = (int64_t)f.v;
			else
				at->n_ints += packed_varints(&f, at->ints ? at->ints + at->n_ints : NULL, &bad); /* none: empty */
			break;
		case 9: at->strings[at->n_strings++] = bdup(a, &f, &bad); break;
		case 13: bad |= !(at->doc_string = sdup(a, &f)); break;
		case 20: at->has_type = 1; at->type = (int32_t)(uint32_t)f.v; break;
		default: bad |= !(at->ref_attr_name = sdup(a, &f)); break; /* 21 */
		}
	}
	return bad ? NULL : at;
}

static Onnx__KeyValue *kv_get(const struct fld *m, struct arena *a)
{
	Onnx__KeyValue *kv = arena_alloc(a, sizeof *kv);
	if (!kv)
		return NULL;
	*kv = (Onnx__KeyValue)ONNX__KEY_VALUE__INIT;
	struct fld f;
	struct wire_rd r = {m->p, m->p + m->n, 0};
	while (next_field(&r, &f)) {
		char **dst = f.num == 1 ? &kv->key : f.num == 2 ? &kv->value : NULL;
		if (!dst || f.wire != WIRE_LEN || !(*dst = sdup(a, &f)))
			return NULL;
	}
	return r.bad ? NULL : kv;
}

Onnx__Node *nodewire_get(const uint8_t *p, size_t n, struct arena *a)
{
	size_t count[10] = {0};
	struct fld f;
	struct wire_rd r = {p, p + n, 0};
	while (next_field(&r, &f)) {
		if (f.num > 9 || f.wire != WIRE_LEN)
			return NULL;
		count[f.num]++;
	}
	if (r.bad)
		return NULL;
	Onnx__Node *pn = arena_alloc(a, sizeof *pn);
	char **in = arena_alloc(a, (count[1] + count[2]) * sizeof *in);
	Onnx__Attribute **at = arena_alloc(a, count[5] * sizeof *at);
	Onnx__KeyValue **kv = arena_alloc(a, count[9] * sizeof *kv);
	if (!pn || !in || !at || !kv)
		return NULL;
	*pn = (Onnx__Node)ONNX__NODE__INIT;
	pn->input = in;
	pn->output = in + count[1];
	pn->attribute = at;
	pn->metadata_props = kv;
	for (r = (struct wire_rd){p, p + n, 0}; next_field(&r, &f);) {
		void *got;
		switch (f.num) {
		case 1: got = pn->input[pn->n_input++] = sdup(a, &f); break;
		case 2: got = pn->output[pn->n_output++] = sdup(a, &f); break;
		case 3: got = pn->name = sdup(a, &f); break;
		case 4: got = pn->op_type = sdup(a, &f); break;
		case 5: got = pn->attribute[pn->n_attribute++] = attr_get(&f, a); break;
		case 6: got = pn->doc_string = sdup(a, &f); break;
		case 7: got = pn->domain = sdup(a, &f); break;
		case 8: got = pn->overload = sdup(a, &f); break;
		default: got = pn->metadata_props[pn->n_metadata_props++] = kv_get(&f, a); break; /* 9 */
		}
		if (!got)
			return NULL;
	}
	return pn;
}
