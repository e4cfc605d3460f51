/* ctrl.h - how control dependencies reach the output (--control-deps).
 *
 *   metadata  node order, plus each node's control inputs recorded in its metadata_props
 *             (graphdiet.after), which graphdiet reads back (the default)
 *   order     node order only: ONNX's topological order is the schedule
 *   data      the schedule pinned by data edges, for runtimes that pick their own order
 *             (onnxruntime's reverse depth-first walk runs parameter gradients last and recompute
 *             clones early): every node that runs waits for the node that runs before it, so
 *             the nodes form one chain and any runtime runs them in graphdiet's order. Nodes a
 *             runtime folds into constants and views (Reshape and its kind, Shape) stay out.
 *             Node n waits for node d through a value-preserving edge on its smallest input x:
 *                 s  = Slice(Reshape(y, [-1]), [0], [1])         one element of d's output y
 *                 x' = Reshape(x, Add(Shape(x), Cast(Greater(s, s), INT64)))
 *             Greater(s, s) is false whatever s holds, NaN included, so x' is x bit for bit; the
 *             nodes are O(1) and Reshape is a view in onnxruntime. A node with no input, or
 *             after a node with no output, to carry it keeps its control inputs as metadata.
 */
#ifndef GD_CTRL_H
#define GD_CTRL_H

#include "../ir/graph.h"

enum ctrl_mode { CTRL_METADATA, CTRL_ORDER, CTRL_DATA };

int ctrl_parse(const char *s, enum ctrl_mode *m);

/* Rewrites g's control edges for `mode`; g stays sorted. *n_data: edges made data edges. */
int ctrl_encode(struct graph *g, enum ctrl_mode mode, uint32_t *n_data, struct gd_err *e);

#endif
