/* flat.h - a graph's connectivity as flat index arrays.
 *
 * For the passes that walk a large graph many times: the planner weighs dozens of kept sets over
 * millions of nodes, and following struct node and struct value pointers costs a cache miss per
 * edge where these arrays are read in order. Node inputs and outputs are value ids in CSR form
 * (FLAT_NONE for an omitted optional one); per node and per value, the few facts the checkpoint
 * schedule and the memory model ask. Built in O(nodes + edges); it does not follow later edits. */
#ifndef GD_FLAT_H
#define GD_FLAT_H

#include "graph.h"

#define FLAT_NONE UINT32_MAX

enum {
	FLAT_BACKWARD = 1, /* node: tagged backward */
	FLAT_FORWARD = 2,  /* node: neither backward nor recompute (node_is_forward) */
	FLAT_TAKES = 4,    /* node: output 0 may take an input's buffer (op_taken_input) */
	FLAT_TAKES_LAST = 8, /* node: ... its last input's (Gemm's C), not its first */
	FLAT_REUSES = 16,  /* node: output 0 may be written over a dying input (OPF_REUSES) */
};

enum {
	FLAT_DROPPABLE = 1, /* value: an activation that is not a graph output (value_is_activation) */
	FLAT_PINNED = 2,    /* value: an input, initializer or graph output, live the whole step; not
			     * state an update_binding replaces (flat_unpin_state) */
	FLAT_PARAM = 4,     /* value: a parameter (an initializer that is no state), or its next value */
	FLAT_GRAD = 8,      /* value: made by a backward node */
	FLAT_ACTIVATION = 16, /* value: made by a forward node (value_is_activation) */
	FLAT_STATE = 32,    /* value: optimizer state (VALUE_STATE), or its next value */
	FLAT_PARAM_GRAD = 64, /* value: a parameter's gradient (VALUE_PARAM_GRAD), or made from such
			       * and no other gradient by a backward node (unscaled, clipped, an
			       * update's temporaries): not state or a parameter */
	FLAT_FIXED = 128,     /* value: made by a forward node from initializers and constants alone
			       * (a weight's 16-bit Cast, its Transpose, a slice of a table), by no
			       * random or 16-bit-compute op: recomputed for the backward pass, never
			       * kept (rc_dropped) */
};

struct flat {
	uint32_t n_nodes, n_values;
	uint32_t *in_off, *in;   /* node i reads in[in_off[i] .. in_off[i + 1]) */
	uint32_t *out_off, *out; /* ... and writes out[out_off[i] .. out_off[i + 1]) */
	uint8_t *nflags, *vflags;
	uint32_t *producer;      /* value id -> node index, FLAT_NONE for none */
};

/* The index in f->in of the input whose buffer node i's output 0 may take (FLAT_TAKES). */
static inline uint32_t flat_taken(const struct flat *f, uint32_t i)
{
	return f->nflags[i] & FLAT_TAKES_LAST ? f->in_off[i + 1] - 1 : f->in_off[i];
}

/* Clears `bit` in pinned[id] (by value id) of each state value that an update_binding replaces:
 * the step's last reader of a parameter or a moment frees it, so that its next value can be
 * made in its buffer, as PyTorch's optimizers update in place (plan/memsim.h). */
void flat_unpin_state(const struct graph *g, uint8_t *pinned, uint8_t bit);

/* Fills f for g's node order; -1 when out of memory (f is then empty). */
int flat_build(const struct graph *g, struct flat *f);
void flat_free(struct flat *f);

#endif
