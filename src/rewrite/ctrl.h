/* ctrl.h - how control dependencies reach the output (--control-deps).
 *
 *   metadata  node order, plus each node's control inputs recorded in its metadata_props
 *             (graphdiet.after), which graphdiet reads back (the default)
 *   order     node order only: ONNX's topological order is the schedule
 *   data      each control edge becomes a data edge that leaves values unchanged, for runtimes
 *             that reorder nodes (the recompute_grad trick): for a node n that must wait for
 *             node d, one floating input x of n is replaced by
 *                 x' = Sub(x, Mul(Abs(ReduceMax(y)), 0))
 *             where y is d's first floating output, so n cannot start before d has finished.
 *             For finite y the Mul gives +0 and x - (+0) is x bit for bit, signed zeros
 *             included. NaN behaviour: if y holds an infinity (or a NaN that the runtime's
 *             ReduceMax propagates), 0 x inf is NaN and x' is NaN everywhere, so the recomputed
 *             segment and every gradient computed from it turn NaN. A run whose gradients
 *             overflow is lost either way; with loss scaling the step's finite check skips it.
 *             Edges whose node has no floating input, or whose dependency has no floating
 *             output, stay recorded as metadata. */
#ifndef GD_CTRL_H
#define GD_CTRL_H

#include "../ir/graph.h"

enum ctrl_mode { CTRL_METADATA, CTRL_ORDER, CTRL_DATA };

int ctrl_parse(const char *s, enum ctrl_mode *m);

/* Rewrites g's control edges for `mode`; g stays sorted. *n_data: edges made data edges. */
int ctrl_encode(struct graph *g, enum ctrl_mode mode, uint32_t *n_data, struct gd_err *e);

#endif
