/* unroll.h - control flow made plain before differentiation (ops/control.c runs it otherwise). */
#ifndef GD_UNROLL_H
#define GD_UNROLL_H

#include "../ir/graph.h"

/* In the main graph, after constant folding: each If whose condition is a constant becomes its
 * taken branch's nodes, and each Loop whose trip count is a constant (at most UNROLL_MAX_TRIPS)
 * and whose conditions are constant true (no cond input or a true constant; the body's an
 * Identity or Cast of its own cond input, or a true constant) becomes its body's nodes once per
 * iteration: the iteration number a Constant, the loop-carried values chained, each scan output
 * the iterations' values Unsqueezed on axis 0 and Concatenated. The node's outputs keep their
 * names. So autodiff sees standard ops only, and differentiates through them. Bodies with
 * initializers or subgraphs of their own stay as they are, as do models below opset 13 (which
 * train refuses). *n counts the nodes unrolled. */
#define UNROLL_MAX_TRIPS 4096
int graph_unroll_control(struct graph *g, size_t *n, struct gd_err *e);

#endif
