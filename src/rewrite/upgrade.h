/* upgrade.h - a model of an older opset rewritten in the forms of a newer one, for training.
 *
 * The backward pass is written in opset-13 forms (axes and sizes as inputs), so a model exported at
 * opset 7 to 12 is first brought to 13: each node whose form changed is rewritten to the form that
 * computes the same (Squeeze, Unsqueeze, ReduceSum and Split read their axes or sizes from an
 * input; Slice, Pad, Clip, TopK and Dropout theirs; Softmax, LogSoftmax and Hardmax, which
 * flattened their input to 2-D around `axis` before 13, keep doing so in a Flatten and a Reshape
 * unless the axis is the last; Upsample and Resize-10 become Resize-13 with the asymmetric
 * coordinates they used; Scatter becomes ScatterElements; BatchNormalization's `spatial`,
 * `is_test` and `consumed_inputs` go where they said what 13 does anyway). Models older than
 * opset 7 are taken where their forms say what later ones do (`consumed_inputs` and a Gemm's
 * `broadcast` dropped, Reshape's shape attribute an input); arithmetic broadcasting at an axis is
 * refused. The model's default-domain opset is then 13, the lowest that holds the backward pass,
 * or 14 when a BatchNormalization has its running statistics as outputs (training mode before 14,
 * which opset 13 models can have too): it becomes 14's training_mode = 1. */
#ifndef GD_UPGRADE_H
#define GD_UPGRADE_H

#include "../ir/graph.h"

/* The opset training graphs are written at when the model's is older. */
#define UPGRADE_OPSET 13

/* The model's default-domain opset (17 when it names none). */
int model_opset(const struct graph *g);

/* Rewrites g (sorted) from its opset to UPGRADE_OPSET (or 14) when it is older; 0 and nothing done
 * when it is not. *from is the model's opset. Fails, naming the node, on a form no opset-13 node computes
 * (BatchNormalization with spatial = 0). g stays sorted. */
int opset_upgrade(struct graph *g, int *from, struct gd_err *e);

#endif
