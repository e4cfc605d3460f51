/* recompute.h - activation checkpointing: the schedule and the rewrite.
 *
 * Given the forward values to keep, every other forward value that a backward node reads is
 * recomputed just in time: right before its first backward reader, a clone of each forward node
 * that made it (named <node>_recompute, doc "recompute of <node>", tagged recompute) is inserted,
 * fed from kept values, resident values (inputs, initializers, graph outputs) and other clones.
 * The backward readers then read the clones, so the forward originals die in the forward pass.
 * A clone that reads no other clone gets a control dependency on the backward node scheduled just
 * before it, so it cannot run before backprop reaches its segment. Without levels (below) each
 * value is recomputed once and the clone lives until its last backward reader. Clones run the
 * same kernels on the same inputs (a Dropout clone draws the mask of the node it clones), so gradients are bitwise equal.
 *
 * The schedule is computed apart from the rewrite, so that the planner can weigh a kept set
 * (memsim_schedule) without touching the graph. */
#ifndef GD_RECOMPUTE_H
#define GD_RECOMPUTE_H

#include "../ir/flat.h"

/* One step of a checkpointed schedule: node `node` of g, or (clone = k >= 1) the k-th recompute of
 * that forward node. */
struct rc_step {
	uint32_t node, clone;
};

/* keep[v], per forward value v: odd keeps it from the forward pass (RC_KEPT); even drops it, at
 * level keep[v] / 2 (2 .. RC_INNER - 1), or with 0 (RC_DROP) at RC_INNER, so flipping bit 0 keeps
 * or drops a value and leaves its level be. A dropped value is recomputed, from the values
 * available, right before its first backward reader needs it, in passes: each makes the missing
 * values of the lowest level on the way, with what they need, and keeps those; then the next
 * level's. So a level-2 value is a checkpoint of the backward pass: its segment is recomputed once
 * to reach it, and again, in pieces, for the backward nodes before it (Revolve's nested
 * checkpoints). Without levels one pass keeps all it made, and each value is recomputed once. */
#define RC_DROP 0
#define RC_KEPT 1
#define RC_INNER 128
#define RC_AT_LEVEL(k) ((uint8_t)(2 * (k))) /* keep[v] for a dropped value of level k (2 ..) */

/* Forward value v is recomputed whatever keep says: it is fixed (FLAT_FIXED: made from
 * initializers alone, such as a weight's 16-bit Cast or its Transpose, which the backward MatMul
 * reads). Its recompute reads only what lives anyway and costs an elementwise pass, while keeping
 * it would hold a copy from the forward pass to the backward pass. */
static inline bool rc_forced(const struct flat *f, uint32_t v)
{
	return f->vflags[v] & FLAT_FIXED;
}

/* Value v is a forward value that is neither kept nor resident: backward nodes read its
 * recomputed copy. */
static inline bool rc_dropped(const struct flat *f, const uint8_t *keep, uint32_t v)
{
	return keep && v != FLAT_NONE && v < f->n_values && (f->vflags[v] & FLAT_DROPPABLE) &&
	       (!(keep[v] & 1) || rc_forced(f, v));
}

/* The level of dropped value v (a forced one's, kept[v] odd: the innermost). */
static inline uint8_t rc_level(const uint8_t *keep, uint32_t v)
{
	return keep[v] && !(keep[v] & 1) ? keep[v] / 2 : RC_INNER;
}

/* Some backward node reads a value that keep drops (so, with every value kept, a forced one). */
bool rc_any_dropped(const struct flat *f, const uint8_t *keep);

/* The name of p's k-th recompute clone, <node_base_name>_recompute, and from the second on
 * <node_base_name>_recompute<k>, in buf (n bytes); returns buf. */
const char *rc_clone_name(const struct node *p, uint32_t k, char *buf, size_t n);

struct recompute_stats {
	uint32_t n_clones;
};

/* keep[value id] marks the kept forward values. f is the flat view of a sorted training graph
 * (forward nodes, then backward nodes, as autodiff makes it). The steps are xmalloc'd. */
int recompute_schedule(const struct flat *f, const uint8_t *keep, struct rc_step **steps, uint32_t *n_steps,
		       struct gd_err *e);

/* The same into buffers made once for many kept sets (weighing plans): the steps are s->steps,
 * valid until the next call; returns their count. */
struct rc_scratch {
	uint8_t *made;
	uint32_t *stack, *times; /* times: per node, its clones so far */
	uint32_t *walked;
	struct rc_step *steps;
	size_t cap;              /* of steps: more than 2 n_nodes only with levels */
};
int rc_scratch_init(struct rc_scratch *s, const struct flat *f); /* 0, or -1 out of memory */
void rc_scratch_free(struct rc_scratch *s);
/* UINT32_MAX when out of memory. */
uint32_t recompute_schedule_in(const struct flat *f, const uint8_t *keep, struct rc_scratch *s);

/* Rewrites g to that schedule (f, keep and steps as recompute_schedule had them); it stays sorted
 * and node i is step i. `shapes` (may be NULL), a shapes-only run of g, learns the copies' shapes
 * (exec_alias). */
struct exec;
int recompute_apply(struct graph *g, const struct flat *f, const uint8_t *keep, const struct rc_step *steps,
		    uint32_t n_steps, struct exec *shapes, struct recompute_stats *st, struct gd_err *e);
/* recompute_schedule and recompute_apply, from g's own flat view. */
int recompute_rewrite(struct graph *g, const uint8_t *keep, struct exec *shapes, struct recompute_stats *st,
		      struct gd_err *e);

#endif
