/* recompute.h - activation checkpointing: the schedule and the rewrite.
 *
 * Given the forward values to keep, every other forward value that a backward node reads is
 * recomputed just in time: right before its first backward reader, a clone of each forward node
 * that made it (named <node>_recompute, doc "recompute of <node>", tagged recompute) is inserted,
 * fed from kept values, resident values (inputs, initializers, graph outputs) and other clones.
 * The backward readers then read the clones, so the forward originals die in the forward pass.
 * A clone that reads no other clone gets a control dependency on the backward node scheduled just
 * before it, so it cannot run before backprop reaches its segment. Each value is recomputed once
 * and the clone lives until its last backward reader. Clones run the same kernels on the same
 * inputs (a Dropout clone draws the mask of the node it clones), so gradients are bitwise equal.
 *
 * The schedule is computed apart from the rewrite, so that the planner can weigh a kept set
 * (memsim_schedule) without touching the graph. */
#ifndef GD_RECOMPUTE_H
#define GD_RECOMPUTE_H

#include "../ir/flat.h"

/* One step of a checkpointed schedule: node `node` of g, or (clone = 1) the recompute of that
 * forward node. */
struct rc_step {
	uint32_t node, clone;
};

/* Value v is a forward value that is neither kept nor resident: backward nodes read its
 * recomputed copy. */
static inline bool rc_dropped(const struct flat *f, const uint8_t *keep, uint32_t v)
{
	return keep && v != FLAT_NONE && v < f->n_values && (f->vflags[v] & FLAT_DROPPABLE) && !keep[v];
}

/* The name of p's recompute clone, <node_base_name>_recompute, in buf (n bytes); returns buf. */
const char *rc_clone_name(const struct node *p, char *buf, size_t n);

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
	uint32_t *stack;
	struct rc_step *steps;
};
int rc_scratch_init(struct rc_scratch *s, const struct flat *f); /* 0, or -1 out of memory */
void rc_scratch_free(struct rc_scratch *s);
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
