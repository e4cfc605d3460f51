/* recompute.h - activation checkpointing: the rewrite.
 *
 * Given the forward values to keep, every other forward value that a backward node reads is
 * recomputed just in time: right before its first backward reader, a clone of each forward node
 * that made it (named <node>_recompute, doc "recompute of <node>", tagged recompute) is inserted,
 * fed from kept values, resident values (inputs, initializers, graph outputs) and other clones.
 * The backward readers then read the clones, so the forward originals die in the forward pass.
 * A clone that reads no other clone gets a control dependency on the backward node scheduled just
 * before it, so it cannot run before backprop reaches its segment. Each value is recomputed once
 * and the clone lives until its last backward reader. Clones run the same kernels on the same
 * inputs (a Dropout clone draws the mask of the node it clones), so gradients are bitwise equal. */
#ifndef GD_RECOMPUTE_H
#define GD_RECOMPUTE_H

#include "../ir/graph.h"

struct recompute_stats {
	uint32_t n_clones;
};

/* keep[value id] marks the kept forward values. g is a sorted training graph (forward nodes, then
 * backward nodes, as autodiff makes it); it stays sorted. */
int recompute_rewrite(struct graph *g, const uint8_t *keep, struct recompute_stats *st, struct gd_err *e);

#endif
