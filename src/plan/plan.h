/* plan.h - answering memory questions about training a model, without rewriting it.
 *
 * plan_memory takes a model (or a training graph), builds the training graph when the model has
 * no gradients yet, infers shapes with the given dimension bindings and simulates the memory model,
 * before and after rewriting g in memory with the checkpointing strategy (strategy.h). */
#ifndef GD_PLAN_H
#define GD_PLAN_H

#include "../exec/exec.h"
#include "../ir/graph.h"
#include "bottleneck.h"
#include "memsim.h"
#include "strategy.h"

struct step_opts;

struct plan_opts {
	const struct exec_binding *dims;
	size_t n_dims;
	const char *loss;    /* for building the training graph, */
	const char **params, **freeze; /* with these trainable parameters (autodiff_opts) */
	size_t n_params, n_freeze;
	uint64_t budget;     /* 0: none */
	int has_budget;
	struct ckpt ckpt;
	int report_only;     /* plan and check: report the checkpointing rewrite without applying it to g */
	int rewrite_only;    /* train without --explain: the rewrite and its peak, not the report's lists */
	const struct step_opts *step; /* building the training graph: the step's end (rewrite/step.h) */
};

/* A run of recompute nodes in the schedule: one segment rebuilt when backprop reaches it. */
struct segment {
	uint32_t first_step, n_nodes;
	uint64_t bytes, flops;       /* recomputed */
	const char *before;          /* "node 'x' (Op)": the backward node it runs for */
	const struct value **from;   /* the kept activations it reads */
	uint32_t n_from;
	uint64_t from_bytes;
};

/* What each replica sends per step, by the ring algorithm (Patarasuk & Yuan 2009; NCCL's
 * accounting), over the schedule's collectives, recompute clones included: AllReduce of B bytes
 * 2 (N-1)/N B (a reduce-scatter, then an all-gather), ReduceScatter (N-1) k_i es for each input
 * (k_i = ceil(numel/N) elements, its output), AllGather (N-1) k es (k: its input's elements),
 * Shard nothing. N is each node's `replicas` attribute. */
struct comm_traffic {
	uint64_t sent;               /* bytes, all collectives (saturating at 2^64 - 1) */
	uint64_t calls[COMM_OPS];    /* by enum comm_op: transport calls (a bucket is one) */
	uint64_t by_op[COMM_OPS];    /* ... and bytes sent */
};

struct plan_report {
	int built_training;          /* the model had no gradients: plan built them */
	uint64_t peak_before, peak_after;
	int64_t peak_before_node;
	const char *peak_before_desc; /* where, before checkpointing */
	int peak_in_recompute;       /* the peak is at a recompute node */
	int64_t peak_node;
	const char *peak_node_desc;  /* "node 'x' (Op)" in the arena */
	struct mem_breakdown at_peak;
	uint64_t forward_flops, recompute_flops;
	uint64_t budget;
	int has_budget, fits;
	const char **checkpoints;    /* forward values the backward pass reads, kept (arena) */
	uint32_t *checkpoint_steps;  /* where in the schedule each is made (arena) */
	size_t n_checkpoints;         /* the last n_inner of them checkpoints of the backward pass,
				      * "name@level" (recompute.h): made by a clone, kept while their
				      * segment's backward runs */
	size_t n_inner;
	uint64_t inner_bytes;
	uint32_t levels;              /* the deepest of those levels, 0 if none */
	uint32_t max_recomputes;      /* the most times one forward node is recomputed */
	uint32_t n_nodes;
	const struct value *loss;
	struct bottlenecks bn;       /* articulation tensors of the forward pass */
	uint32_t n_clones;           /* recompute nodes the strategy added */
	enum ckpt_kind strategy;
	struct auto_result auto_plan; /* --checkpoint auto */
	struct segment *segments;    /* in schedule order (arena) */
	uint32_t n_segments;
	uint64_t kept_bytes;         /* of the checkpoints */
	uint64_t saved_bytes;        /* what the backward pass reads from the forward: the checkpoints,
				      * and the inputs and parameters (PyTorch's saved tensors) */
	uint64_t *live_before, *live_after; /* live bytes per step, before and after (arena) */
	uint32_t *before_at;         /* per step before (node i of g), the step after that runs node i:
				      * ascending, the clones between (arena; NULL with rewrite_only) */
	uint32_t backward_step;      /* the step after the last forward node's (not a clone): backprop begins */
	/* bytes per parameter, when plan built the training graph: (resident parameters + optimizer
	 * state + the most parameter-gradient bytes live at once) / trainable elements */
	uint64_t n_param_elems;      /* 0: not known (a training graph read back) */
	uint64_t param_bytes, state_bytes, peak_param_grads;
	uint64_t buffer_bytes;       /* initializers that are no parameters (autodiff_result): resident,
				      * but neither in param_bytes nor in at_peak.params */
	uint32_t n_before, n_after;
	/* data parallelism: every figure above is one replica's */
	int replicas;                /* graphdiet.replicas, else the most any collective names; 0: none */
	const char *shard;           /* graphdiet.shard: "optimizer", "gradients" or "parameters" (ZeRO
				      * stages 1 to 3); NULL: not sharded */
	int shard_stage;             /* its stage (shard_parse), 0 when not sharded */
	struct comm_traffic traffic;
	struct mem_breakdown most;   /* per category, the most bytes live at once (most.params: at_peak's
				      * convention, buffers left out) */
};


int plan_memory(struct graph *g, const struct plan_opts *o, struct plan_report *r, struct gd_err *e);

/* Whether g is a training graph already (<param>_grad outputs, or a training step's bindings). */
int plan_is_training_graph(const struct graph *g);

#endif
