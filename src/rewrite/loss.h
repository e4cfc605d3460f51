/* loss.h - appending a loss to a model that has none. */
#ifndef GD_LOSS_H
#define GD_LOSS_H

#include "../ir/graph.h"

enum loss_fn { LOSS_MSE, LOSS_CROSS_ENTROPY };

/* Adds graph input `target` and output `loss`, the mean squared error between `pred` (the only
 * output when NULL) and the target, or the softmax cross-entropy of pred's (N, C, ...) scores
 * against (N, ...) int64 class labels. g stays checked and sorted. */
int loss_append(struct graph *g, enum loss_fn fn, const char *pred, const char *target, struct gd_err *e);

#endif
