/* widen.h - a float64 copy of a float32 graph, for finite differences (verify --gradcheck). */
#ifndef GD_WIDEN_H
#define GD_WIDEN_H

#include "../ir/graph.h"

/* Makes every float32 of g float64, in place: value types, initializers and tensor attributes
 * (their data converted exactly), and the float32 that Cast, the random ops and EyeLike name as
 * their output dtype; subgraphs too. The graph computes what it did, in float64. */
int graph_widen_f64(struct graph *g, struct gd_err *e);

#endif
