/* memsim.h - the memory model (DESIGN.md): how many bytes a schedule needs at its peak.
 *
 * bytes(value) = elements x element size. Initializers and graph inputs are live for the whole step,
 * as are graph outputs once produced; every other value lives from its producer's step until its last
 * consumer's. At node i the outputs are allocated while its inputs are still live, then the inputs
 * it read last and the outputs nobody reads are freed; a view (Reshape, Flatten, Squeeze, Unsqueeze:
 * OPF_VIEW) whose data input dies at its step takes that input's buffer instead, so its output adds
 * no bytes, as in runtimes that alias views; so do a scatter's data (OPF_INPLACE) and a Gemm's C of
 * its output's bytes (OPF_ADDS_TO: a gradient's running sum), and an elementwise node's output
 * (OPF_REUSES) is written over the first of its inputs, of its dtype and element count, that dies
 * there. State that an update_binding replaces (parameters, moments) is not live the whole step:
 * it dies at its last reader, so an optimizer updates it in its own buffer (Sub(p, lr*delta) over
 * p, Mul(m, beta1) over m), as PyTorch's fused optimizers do. This is the executor's allocator's
 * rule, so the predicted peak equals the peak `graphdiet run` measures, to the byte (a test).
 *
 * Communication buffers are the outputs of the replicas' collectives (AllReduce, ReduceScatter,
 * AllGather, Shard: ops/comm.c) that are neither a parameter, its next value, optimizer state nor
 * a gradient (a backward AllReduce's or ReduceScatter's: a summed bucket, a gradient shard; a
 * Shard of a gradient): a parameter AllGathered from its shards for the forward pass (ZeRO stage
 * 3; again by its recompute clone before the backward pass), a slice Shard takes of a parameter
 * for its update, SyncBatchNorm's summed statistics. */
#ifndef GD_MEMSIM_H
#define GD_MEMSIM_H

#include "../exec/exec.h"
#include "../ir/graph.h"
#include "../rewrite/recompute.h"

struct mem_breakdown {
	uint64_t params;      /* initializers */
	uint64_t opt_state;   /* optimizer state (VALUE_STATE: moments, loss scale, counters) */
	uint64_t grads;       /* values backward nodes produce */
	uint64_t activations; /* graph inputs and values forward nodes produce */
	uint64_t param_grads; /* of grads: parameters' gradients and what is made of them alone
			       * (FLAT_PARAM_GRAD) */
	uint64_t comm;        /* communication buffers (see above) */
};

/* The replicas' collectives (ops/comm.c). */
enum comm_op { COMM_NONE, COMM_ALL_REDUCE, COMM_REDUCE_SCATTER, COMM_ALL_GATHER, COMM_SHARD, COMM_OPS };
enum comm_op memsim_comm_op(const struct node *n);

struct mem_result {
	uint64_t peak;
	int64_t peak_node;         /* index of the node at whose step the peak occurs; -1: before any */
	struct mem_breakdown at_peak;
	uint64_t *live;            /* live bytes after each node's outputs are allocated (xmalloc'd) */
	uint64_t *live_end;        /* ... and at the end of each step, its dying values freed */
	uint32_t n_live;           /* 0, and live, live_end NULL, when memsim_schedule was not asked to trace */
	uint64_t area;             /* the sum of those over the steps, in units of 256 bytes */
	uint64_t peak_param_grads; /* the most parameter-gradient bytes live at once, anywhere */
	struct mem_breakdown most; /* per category, the most bytes live at once, anywhere (with trace;
				    * else the bytes before the first node) */
};

/* Simulates g's node order with the shapes of `shapes` (a shapes-only run of g). */
int memsim(const struct graph *g, const struct exec *shapes, struct mem_result *r, struct gd_err *e);

/* The model of one graph, built once to weigh many schedules of it: its flat view and each value's
 * bytes. */
struct memmodel {
	struct flat f;
	const struct exec *shapes;
	uint64_t *bytes;
	uint64_t params, state, inputs; /* initializer bytes (parameters', state's), and the other graph inputs' */
	uint8_t *cat;            /* per value, the category of the breakdown it counts in (memsim.c) */
	uint32_t *left;          /* scratch: reads left per value and recomputed copy (n_left) */
	uint32_t *copy;          /* scratch: per value, the number of its latest recomputed copy */
	uint8_t *fits;           /* per flat input slot of an OPF_REUSES node: the input has output 0's
				  * dtype (not 16-bit) and element count */
	uint8_t *half_taken;     /* per node, between memmodel_measure and memmodel_finish: its taken
				  * input is 16-bit (or absent), so it takes no buffer */
	size_t n_left;
	struct rc_scratch rc;    /* scratch for weighing kept sets (ckpt_weigh), made on first use */
	uint64_t *flops;         /* per node, by node_flops: memmodel_flops makes it on first use */
	uint64_t peak_all;       /* the peak of g's own order, everything kept (memsim_model); 0 before */
};

int memmodel_build(const struct graph *g, const struct exec *shapes, struct memmodel *m, struct gd_err *e);
/* memmodel_build in two halves: measure reads all the model needs of the shapes run (each value's
 * bytes, which inputs an output may be written over), so that the run can be freed before finish
 * builds the connectivity and the scratch, which never read shapes (m->shapes is the caller's to
 * clear). plan's peak is at the shapes run: this keeps the model's flat arrays off it. On failure
 * m is freed. */
int memmodel_measure(const struct graph *g, const struct exec *shapes, struct memmodel *m, struct gd_err *e);
int memmodel_finish(const struct graph *g, struct memmodel *m, struct gd_err *e);
void memmodel_free(struct memmodel *m);
/* A twin of m for another thread: m's model (shared, read only while both weigh) with scratch of
 * its own; 0, or -1 when out of memory. Freed by memmodel_twin_free, never memmodel_free. */
int memmodel_twin(const struct memmodel *m, struct memmodel *t);
void memmodel_twin_free(struct memmodel *t);
/* Each node's FLOPs (g is the graph the model was built from); NULL when out of memory. */
const uint64_t *memmodel_flops(struct memmodel *m, const struct graph *g, struct gd_err *e);
/* memsim on a model: g's node order, nothing recomputed. */
int memsim_model(struct memmodel *m, struct mem_result *r, struct gd_err *e);

/* Simulates the checkpointed schedule for the kept set (recompute_schedule) as if g had been
 * rewritten to it: a recomputed copy has its original's bytes; peak_node indexes the steps; live
 * bytes per step only when `trace`. The model's scratch is used, so one model weighs one schedule
 * at a time. */
int memsim_schedule(struct memmodel *m, const uint8_t *keep, const struct rc_step *steps, uint32_t n_steps,
		    int trace, struct mem_result *r, struct gd_err *e);
void memsim_free(struct mem_result *r);

/* FLOPs of node n by its op's cost rule, at the shapes of `shapes`. */
uint64_t node_flops(const struct node *n, const struct exec *shapes);

#endif
