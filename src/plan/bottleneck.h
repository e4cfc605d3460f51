/* bottleneck.h - articulation tensors: forward values that split the forward pass in two. Keep one
 * and the rest of the forward pass needs nothing computed before it, which is what a single-tensor
 * checkpoint needs.
 *
 * Graph inputs and initializers are resident for the whole step (the memory model), so reading one
 * never bypasses a bottleneck; otherwise the labels, read by the loss at the very end, would bypass
 * everything, as would any parameter. The paths that count carry activations: they start at a node
 * that reads a graph input and end at the loss. A tensor v on such a path is a bottleneck when
 * every such path that leaves the part of the schedule before v passes through v, that is: no
 * other activation made at or before v is read after it. Values that depend on parameters alone
 * can be recomputed from them anywhere, so they do not count either.
 *
 * Found in O(N+E) without dominator trees: lay the values and nodes on input-to-loss paths out in
 * schedule order. Such a vertex v is a bottleneck iff no edge (a, b) jumps over it,
 * pos(a) < pos(v) < pos(b): a path has to cross v's position somewhere, and only an edge that
 * starts or ends at v crosses it without jumping. One sweep with a running maximum of the
 * furthest edge seen so far answers every vertex; the edge that achieves the maximum is the
 * witness of why a candidate is rejected. */
#ifndef GD_BOTTLENECK_H
#define GD_BOTTLENECK_H

#include "../ir/graph.h"

/* Why a candidate is not a bottleneck: a path that avoids it, through this edge. */
struct bypass {
	const struct node *node;   /* the node the edge enters or leaves */
	const struct value *value; /* the value at the other end; NULL for an implicit (subgraph) read */
	int into_node;             /* 1: `node` reads `value`, produced before the candidate;
				      0: `node` also produces `value`, after the candidate */
};

struct bottlenecks {
	const struct value **v; /* the bottlenecks in schedule order, the inputs and the loss left out */
	uint32_t n;
	/* Every forward value on an input-to-loss path (the candidates), in schedule order, with
	 * the witness for the rejected ones (node NULL for the bottlenecks). */
	const struct value **cand;
	struct bypass *why;
	uint32_t n_cand;
};

/* Forward nodes are those not tagged backward or recompute; `loss` is a forward value. The arrays
 * live in g's arena. */
int find_bottlenecks(struct graph *g, const struct value *loss, struct bottlenecks *b, struct gd_err *e);

#endif
