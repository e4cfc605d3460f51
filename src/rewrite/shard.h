/* shard.h - sharding data-parallel training over the replicas, as DeepSpeed's ZeRO (Rajbhandari et
 * al. 2020) and PyTorch's FSDP: each of N replicas holds a slice of what every replica would hold
 * whole, 1/N of it (ops/comm.c: a tensor flattened, zero-padded to N k elements, k = ceil(numel /
 * N), replica r holding elements [r k, r k + k)).
 *
 *   optimizer (stage 1)   the gradients are summed whole (AllReduce, as without sharding); each
 *                         replica updates its slice of each parameter, Shard(P), from its slice of
 *                         the sum, Shard(P_grad), with optimizer state of its slice's size, and the
 *                         new parameter is every replica's updated slice, AllGather'd
 *   gradients (stage 2)   the gradients are summed into slices (ReduceScatter, in the same buckets
 *                         and at the same places the all-reduces were), so no replica holds a
 *                         summed gradient whole; the update as in stage 1
 *   parameters (stage 3)  each parameter P is stored as a slice under its own name (1-D, k
 *                         elements: what the optimizer updates, its state alike); the forward pass
 *                         reads P_gathered = AllGather(P), made just before its first reader; the
 *                         gather is a value made from stored values alone, so the backward pass
 *                         reads a recomputed gather, made just before its first backward reader
 *                         (recompute.h: every checkpointing strategy, `none` too, and what a
 *                         recomputed segment needs is gathered with it), and freed after its last;
 *                         the gradient of the gather is ReduceScatter (autodiff, where the
 *                         gradient is complete), so P_grad is this replica's slice of the sum
 *
 * Only trainable float32 and float64 parameters are sharded: diet variables (--diet) stay whole,
 * 16-bit and updated from the whole sum, as do parameters of other dtypes. The slices' padding
 * stays zero: its gradient is zero, and so are SGD's and Adam's updates of it. The finite check
 * and clipping's norm sum over slices and then over the replicas (an AllReduce of one number).
 * A stage-3 graph starts each slice from the model's weights by its TrainingInfoProto
 * initialization graph, Shard(<the weights>), which each replica runs for its own slice (analysis
 * reads no weight: step_opts.sized). */
#ifndef GD_SHARD_H
#define GD_SHARD_H

#include "step.h"

/* "optimizer", "gradients" or "parameters" (also 1, 2, 3): the stage, or -1. */
int shard_parse(const char *arg);
const char *shard_name(enum shard_stage s);

/* Stage 3, before autodiff: every parameter autodiff will train (ao's --params and --freeze), but
 * diet variables, becomes its slice, read through an AllGather. */
struct autodiff_opts;
int shard_parameters(struct graph *g, const struct step_opts *o, const struct autodiff_opts *ao, struct gd_err *e);

/* m[v] (by value id, xcalloc'd; NULL out of memory): v is a stage-3 parameter slice, which a
 * forward AllGather reads. */
uint8_t *shard_slices(const struct graph *g);

/* The elements stage 3's slices leave out of g's parameters: each sliced parameter's whole count
 * less its slice's (what a replica's bytes per parameter are counted over: the model's). */
uint64_t shard_unsliced(const struct graph *g);

/* Stages 1 and 2, in the step: this replica's slice of v (Shard), and a whole tensor of v's slice
 * `slice` gathered from every replica's (AllGather, of v's dims), tagged backward. */
struct value *shard_slice(struct graph *g, int reps, struct value *v, struct gd_err *e);
struct value *shard_gather(struct graph *g, int reps, struct value *slice, const struct tensor *like, uint32_t tags,
			   struct gd_err *e);

#endif
