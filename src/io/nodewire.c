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

/* One pass of the encoder: with o == NULL it only counts. */
struct out {
	uint8_t *o;
	size_t n;
};

static void put_key(struct out *w, uint32_t field, uint32_t wire)
{
	uint64_t key = (uint64_t)field << 3 | wire;
	if (w->o)
		w->o = pbwire_put_varint(w->o, key);
	w->n += pbwire_varint_len(key);
}

static void put_varint(struct out *w, uint32_t field, uint64_t v)
{
	put_key(w, field, WIRE_VARINT);
	if (w->o)
		w->o = pbwire_put_varint(w->o, v);
	w->n += pbwire_varint_len(v);
}

static void put_float(struct out *w, uint32_t field, float f)
{
	put_key(w, field, WIRE_FIXED32);
	if (w->o) {
		uint32_t u;
		memcpy(&u, &f, 4);
		for (int i = 0; i < 4; i++)
			*w->o++ = (uint8_t)(u >> (8 * i));
	}
	w->n += 4;
}

static void put_bytes(struct out *w, uint32_t field, const void *p, size_t len)
{
	if (w->o) {
		w->o = pbwire_put_key_len(w->o, field, len);
		if (len) /* p may be NULL then (an empty bytes attribute) */
			memcpy(w->o, p, len);
		w->o += len;
	}
	w->n += pbwire_field_len(field, len);
}

static void put_str(struct out *w, uint32_t field, const char *s)
{
	if (s)
		put_bytes(w, field, s, strlen(s));
}

/* A nested message: its size first (a counting pass), then its bytes. */
typedef void (*msg_fn)(struct out *w, const void *arg);
static void put_msg(struct out *w, uint32_t field, msg_fn fn, const void *arg)
{
	struct out c = {NULL, 0};
	fn(&c, arg);
	if (w->o)
		w->o = pbwire_put_key_len(w->o, field, c.n);
	w->n += pbwire_field_len(field, c.n);
	if (w->o) {
		struct out b = {w->o, 0};
		fn(&b, arg);
		w->o = b.o;
	}
}

static void attr_msg(struct out *w, const void *arg)
{
	const struct attr *a = arg;
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
}

struct kv_arg {
	const char *key, *value;
};

static void kv_msg(struct out *w, const void *arg)
{
	const struct kv_arg *kv = arg;
	put_str(w, 1, kv->key);
	put_str(w, 2, kv->value);
}

/* The control inputs' names, one per line, as a KeyValue value. */
static void ctrl_msg(struct out *w, const void *arg)
{
	const struct node *n = arg;
	put_str(w, 1, NODEWIRE_CTRL_KEY);
	size_t len = 0;
	for (uint32_t i = 0; i < n->n_ctrl; i++)
		len += strlen(n->ctrl[i]->name ? n->ctrl[i]->name : "") + (i + 1 < n->n_ctrl);
	if (w->o) {
		w->o = pbwire_put_key_len(w->o, 2, len);
		for (uint32_t i = 0; i < n->n_ctrl; i++) {
			const char *nm = n->ctrl[i]->name ? n->ctrl[i]->name : "";
			size_t l = strlen(nm);
			memcpy(w->o, nm, l);
			w->o += l;
			if (i + 1 < n->n_ctrl)
				*w->o++ = '\n';
		}
	}
	w->n += pbwire_field_len(2, len);
}

int nodewire_fits(const struct node *n)
{
	if (n->x.n)
		return 0;
	for (uint32_t i = 0; i < n->n_attr; i++) {
		const struct attr *a = &n->attr[i];
		int t = a->type;
		if (a->x.n || !(t == ATTR_FLOAT || t == ATTR_INT || t == ATTR_STRING || t == ATTR_FLOATS || t == ATTR_INTS ||
				t == ATTR_STRINGS))
			return 0;
	}
	for (uint32_t i = 0; i < n->n_meta; i++)
		if (n->meta[i].x.n)
			return 0;
	return 1;
}

static void node_msg(struct out *w, const struct node *n)
{
	for (uint32_t i = 0; i < n->n_in; i++)
		put_str(w, 1, n->in[i] ? n->in[i]->name : "");
	for (uint32_t i = 0; i < n->n_out; i++)
		put_str(w, 2, n->out[i] ? n->out[i]->name : "");
	put_str(w, 3, n->name);
	put_str(w, 4, n->op_type);
	for (uint32_t i = 0; i < n->n_attr; i++)
		put_msg(w, 5, attr_msg, &n->attr[i]);
	put_str(w, 6, n->doc);
	put_str(w, 7, n->domain);
	put_str(w, 8, n->overload);
	for (uint32_t i = 0; i < n->n_meta; i++)
		put_msg(w, 9, kv_msg, &(struct kv_arg){n->meta[i].key, n->meta[i].value});
	if (n->tags) {
		char buf[128];
		put_msg(w, 9, kv_msg, &(struct kv_arg){NODEWIRE_TAGS_KEY, node_tags_str(n->tags, buf, sizeof buf)});
	}
	if (n->n_ctrl)
		put_msg(w, 9, ctrl_msg, n);
}

size_t nodewire_size(const struct node *n)
{
	struct out w = {NULL, 0};
	node_msg(&w, n);
	return w.n;
}

uint8_t *nodewire_put(uint8_t *o, const struct node *n)
{
	struct out w = {o, 0};
	node_msg(&w, n);
	return w.o;
}
