/* nodewire.h - a node as a serialized ONNX NodeProto, written straight from the IR.
 *
 * Saving a million-node training graph through protobuf-c builds a message per node, measures it
 * and packs it, walking every string three times; this writes the same bytes in one pass. Nodes
 * carrying what only protobuf-c's general path writes (tensor or graph attributes, undecoded
 * fields) are left to it: nodewire_fits says which. Reading is the mirror image (nodewire_get). */
#ifndef GD_NODEWIRE_H
#define GD_NODEWIRE_H

#include "../ir/graph.h"
#include "proto/onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>

/* metadata_props keys graphdiet writes itself */
#define NODEWIRE_CTRL_KEY "graphdiet.after" /* control inputs, names one per line */
#define NODEWIRE_TAGS_KEY "graphdiet.tags"  /* node tags: forward, backward, recompute, ... comma-separated */

/* 1 if n has only plain attributes (numbers, strings and lists of them) and no undecoded fields. */
int nodewire_fits(const struct node *n);
/* Writes n as a length-delimited field (GraphProto's `node`, field 1) at o, before end; returns the
 * end of what it wrote, or NULL if it needs more room than end - o. */
uint8_t *nodewire_put(uint8_t *o, uint8_t *end, uint32_t field, const struct node *n);
/* Before nodewire_put of nodes[i], for a walk over nodes[0, n) in order: starts loading what the
 * puts of the next few nodes read (each node, its input and output lists, their values, names and
 * control inputs), so that a million-node walk does not wait on memory at every pointer. */
void nodewire_prefetch(struct node *const *nodes, uint32_t i, uint32_t n);

/* A plain tensor (raw bytes in memory, no undecoded fields, no external data) and a ValueInfo with
 * no undecoded fields, written as protobuf-c packs them: the rest of a saved graph's main messages.
 * A tensor's raw data is not copied: the bytes written end with its raw_data key and length, at
 * *raw_at, and go on after where the raw bytes belong. NULL when o..end has too little room. */
int nodewire_tensor_fits(const struct tensor *t);
/* With pad > 0 the data_type varint is written pad bytes longer than it need be (at most 10 in all,
 * which every protobuf reader takes), to move the raw bytes onto an aligned file offset. */
uint8_t *nodewire_tensor_put(uint8_t *o, uint8_t *end, uint32_t field, const struct tensor *t, unsigned pad,
			     size_t *raw_at);
int nodewire_vinfo_fits(const struct value *v);
uint8_t *nodewire_vinfo_put(uint8_t *o, uint8_t *end, uint32_t field, const struct value *v);

/* Reading: a serialized NodeProto decoded into the protobuf-c message that onnx__node__unpack
 * would make, in the scratch arena `a`, without its thousands of small allocations; NULL when the
 * node has what only protobuf-c's general path decodes (tensor, graph or type attributes, unknown
 * fields), is malformed, or `a` runs out: protobuf-c then decodes it, or reports the error. */
Onnx__Node *nodewire_get(const uint8_t *p, size_t n, struct arena *a);

#endif
