/* pbwire.h - protobuf wire-format pass that splits a model before protobuf-c decodes it.
 *
 * protobuf-c copies every bytes field it decodes, so decoding a model as it is would hold its
 * weights twice; and decoding a million nodes at once holds a million decoded messages.
 * pbwire_strip_raw copies a serialized ModelProto without the raw_data of the main graph's
 * initializers (field 7 -> 5 -> 9) and of its training graphs' initialization graphs' initializers
 * (20 -> 1 -> 5 -> 9: the weights of a graph train wrote with state), and without the main graph's
 * nodes (7 -> 1), and returns where each of those lies in the original buffer instead. The reader then decodes the nodes one at a
 * time, and the weights stay memory-mapped and untouched until a stage needs them. Everything else
 * is copied byte for byte, so unknown fields and field order are preserved. */
#ifndef GD_PBWIRE_H
#define GD_PBWIRE_H

#include "../util/err.h"

#include <stddef.h>
#include <stdint.h>

struct pb_raw {
	const uint8_t *p; /* NULL when the initializer has no raw_data */
	size_t n;
};

struct pb_stripped {
	uint8_t *buf; /* xmalloc'd skeleton */
	size_t len;
	struct pb_raw *raw; /* one per main-graph initializer, in order; xmalloc'd */
	size_t n_raw;
	struct pb_raw *node; /* the main graph's serialized NodeProtos, in order; xmalloc'd */
	size_t n_node;
	struct pb_raw *init_raw; /* one per initializer of each TrainingInfoProto.initialization, in order */
	size_t n_init_raw;
};

/* A varint: its length, and writing it (at most 10 bytes); returns the end. */
size_t pbwire_varint_len(uint64_t v);
uint8_t *pbwire_put_varint(uint8_t *p, uint64_t v);
/* Reads a varint at p (before end); returns the byte after it, or NULL if it is truncated or over
 * ten bytes long. */
const uint8_t *pbwire_get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v);
/* Writes the key and length prefix of a length-delimited field; returns the end (at most 20 bytes). */
uint8_t *pbwire_put_key_len(uint8_t *o, uint32_t field, size_t len);
/* Bytes a whole length-delimited field of `payload` bytes takes. */
size_t pbwire_field_len(uint32_t field, size_t payload);

/* Refuses messages whose graphs nest deeper than GRAPH_MAX_DEPTH: a NodeProto (what = PB_NODE)
 * or a ModelProto's training graphs (PB_MODEL). Walks only the fields that lead to graphs. */
enum pb_kind { PB_MODEL, PB_TRAINING, PB_GRAPH, PB_NODE, PB_ATTR, PB_FUNCTION };
int pbwire_check_depth(const uint8_t *p, size_t n, enum pb_kind what, struct gd_err *e);

int pbwire_strip_raw(const uint8_t *buf, size_t len, struct pb_stripped *out, struct gd_err *e);
void pbwire_free(struct pb_stripped *s);

#endif
