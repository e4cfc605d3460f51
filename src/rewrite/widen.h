/* widen.h - a float64 copy of a float32 or 16-bit graph, for finite differences (verify --gradcheck). */
#ifndef GD_WIDEN_H
#define GD_WIDEN_H

#include "../ir/graph.h"

/* Makes every float32, float16 and bfloat16 of g float64, in place: value types, initializers and
 * tensor attributes (their data converted exactly), and the dtype Cast, the random ops and EyeLike
 * name as their output's; subgraphs too. The graph computes what it did, in float64 (without the
 * rounding to 16 bits a 16-bit graph's stores and Casts did). */
int graph_widen_f64(struct graph *g, struct gd_err *e);

#endif
