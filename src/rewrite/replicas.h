/* replicas.h - data parallelism: N replicas each run the training graph on their own slice of the
 * batch, and sum their gradients, as PyTorch's DistributedDataParallel and TensorFlow's
 * DistributionStrategy do.
 *
 * The loss: a mean over the batch (ReduceMean, or a loss op with reduction "mean") is weighted by
 * 1/N, so the sum of the replicas' gradients is the gradient of the mean over the whole batch; a
 * sum is left alone. The reduction is read from the node that makes the loss, through Mul/Div by
 * constants, Add/Sub of losses that agree, Cast, Identity, Reshape, Squeeze and Unsqueeze;
 * --loss-reduction says it where that walk cannot tell.
 *
 * The gradients: each <param>_grad output becomes the sum over the replicas, an AllReduce
 * (domain graphdiet, ops/comm.c) of the replica's own gradient, now <param>_grad_local. Only the
 * gradients autodiff made are summed: a parameter that does not affect the loss has none. With
 * bucket_bytes, gradients are taken in the order backprop completes them and fused into
 * AllReduce nodes of at most about that many bytes each (one dtype each; a larger gradient goes
 * alone). The training step (step.h) then reads the sums: the finite check, clipping, the
 * optimizer and DietAdam see the same gradients on every replica, so all skip an overflowed step
 * together and the parameters stay identical. Loss-scale and optimizer state are never summed.
 * The output <loss>_global is the loss over the whole batch (the replicas' mean for a mean, their
 * sum for a sum).
 *
 * BatchNormalization in training mode normalises, by default, with each replica's own batch
 * statistics, as PyTorch's DistributedDataParallel does: the gradients are summed as any other, so
 * N replicas train as N batches of a per-replica size normalised apart, not as one batch. Its
 * running statistics are then each replica's own (replica 0's are what DDP keeps: DDP broadcasts
 * rank 0's buffers to the others before each forward pass, broadcast_buffers=True, so every rank
 * evaluates with rank 0's; save replica 0's). The metadata key graphdiet.batch_norm says
 * "replica"; verify refuses to compare such a graph with the whole batch, which it does not equal.
 * With sync_bn (--sync-batchnorm, PyTorch's SyncBatchNorm) the statistics are those of all the
 * replicas' batch (syncbn.c: standard ops and AllReduce nodes before autodiff), so N replicas on
 * slices train as one on the whole batch, running statistics included; graphdiet.batch_norm says
 * "sync". */
#ifndef GD_REPLICAS_H
#define GD_REPLICAS_H

#include "../ir/graph.h"

#include <stddef.h>

enum loss_reduction { LOSS_REDUCTION_AUTO, LOSS_REDUCTION_MEAN, LOSS_REDUCTION_SUM };

/* What the replicas shard (ZeRO's stages 1, 2 and 3; shard.h): nothing, the optimizer state, the
 * gradients too, the parameters too. */
enum shard_stage { SHARD_NONE, SHARD_OPTIMIZER, SHARD_GRADIENTS, SHARD_PARAMETERS };

struct replicas {
	int n;                         /* 0: no replicas (nothing to do); else how many */
	size_t bucket_bytes;           /* 0: one AllReduce per gradient */
	enum loss_reduction reduction; /* AUTO: read it from the graph */
	int sync_bn;                   /* --sync-batchnorm: batch statistics over all the replicas */
	enum shard_stage shard;        /* --shard */
};

/* Model metadata keys the rewrite records: the replicas (decimal) and the loss's reduction. */
#define REPLICAS_KEY "graphdiet.replicas"
#define REPLICAS_REDUCTION_KEY "graphdiet.loss_reduction"
/* "replica" or "sync": how training-mode BatchNormalization's statistics were taken (N > 1) */
#define REPLICAS_BATCH_NORM_KEY "graphdiet.batch_norm"
/* "optimizer", "gradients" or "parameters": what the replicas shard (absent: nothing) */
#define REPLICAS_SHARD_KEY "graphdiet.shard"

/* Before autodiff: synchronises batch statistics when asked (replicas_sync_batch_norm), finds the loss (`loss`, else the only float scalar
 * output) and its reduction, and sets *weight (1/N for a mean, else 1). */
int replicas_begin(struct graph *g, const struct replicas *r, const char *loss, double *weight, struct gd_err *e);

/* After autodiff: the all-reduces (with r->shard from gradients on, reduce-scatters: each
 * <param>_grad is then this replica's slice of the sum, 1-D, except for the parameters whole(param,
 * ctx) keeps whole (whole may be NULL)), and <loss>_global. */
int replicas_build(struct graph *g, const struct replicas *r, int (*whole)(const struct value *, const void *),
		   const void *ctx, struct gd_err *e);

/* An AllReduce(sum) node over ins for reps replicas, with these tags, its outputs <in>_sum, itself
 * <its first output>/AllReduce. */
struct node *replicas_all_reduce(struct graph *g, int reps, struct value *const *ins, uint32_t n_in, uint32_t tags,
				 struct gd_err *e);
/* The same for any of the collectives (ops/comm.c: OP_ALL_REDUCE, OP_REDUCE_SCATTER, OP_ALL_GATHER,
 * OP_SHARD): its outputs outs (values no node makes), or when outs is NULL new ones <in><suffix>;
 * attribute replicas, and reduction "sum" for a sum; an AllGather's shape is the caller's to add
 * (room is made for it). */
struct node *replicas_collective(struct graph *g, int op, int reps, struct value *const *ins, struct value *const *outs,
				 uint32_t n_in, const char *suffix, uint32_t tags, struct gd_err *e);
/* syncbn.c: every training-mode BatchNormalization of g becomes standard ops whose statistics are
 * AllReduce'd over reps replicas (g stays sorted). */
int replicas_sync_batch_norm(struct graph *g, int reps, struct gd_err *e);
/* The running statistic (an initializer) that n updates when n is such an update, else NULL: the
 * step binds it as state (rewrite/step.c), as it does a BatchNormalization's running statistics. */
struct value *replicas_running_stat(const struct node *n);

#endif
