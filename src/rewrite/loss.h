/* loss.h - appending a loss to a model that has none. */
#ifndef GD_LOSS_H
#define GD_LOSS_H

#include "../ir/graph.h"

enum loss_fn { LOSS_MSE, LOSS_CROSS_ENTROPY };

/* Adds graph input `target` and output `loss`, the mean squared error between `pred` (the only
 * output when NULL) and the target, or the softmax cross-entropy of pred's (N, C, ...) scores
 * against (N, ...) int64 class labels. g stays checked and sorted. The loss is g's last output,
 * named `loss` unless the model has a value of that name (then loss_1, ...): loss_name(g). */
int loss_append(struct graph *g, enum loss_fn fn, const char *pred, const char *target, struct gd_err *e);
static inline const char *loss_name(const struct graph *g)
{
	return g->n_outputs ? g->outputs[g->n_outputs - 1]->name : "loss";
}

#endif
