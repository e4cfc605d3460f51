/* exec.h - the reference executor: runs a graph in node order on the CPU.
 *
 * One loop serves three uses. Running (`graphdiet run`, `verify`) computes every value. Shape
 * inference runs the same kernels in shape-only mode: each kernel derives its output shapes first
 * and computes data only when asked, and the executor asks only for small nodes whose inputs are
 * all known, which is constant folding (Shape -> Gather -> Concat -> Reshape chains resolve this
 * way). There is one rule per op, so inference and execution cannot disagree.
 *
 * Memory: every tensor goes through one allocator that counts live and peak bytes. A value is
 * freed after its last consumer runs; initializers, graph inputs and graph outputs stay for the
 * whole run, as DESIGN.md's memory model has it. Deterministic: fixed loop orders, and random ops
 * draw from Philox keyed by (seed, node, element). */
#ifndef GD_EXEC_H
#define GD_EXEC_H

#include "../ir/graph.h"

#define RT_MAX_DIMS 8

struct backend;

/* One a value in every run, shapes-only runs of million-node training graphs included: 152 bytes
 * (flags as bytes, a view's strides as int32). */
struct rtensor {
	int dtype;
	int ndim;
	int64_t dims[RT_MAX_DIMS];
	int64_t numel;
	void *data;    /* NULL when only the shape is known */
	size_t nbytes; /* numel * element size */
	void *dev;     /* on a device backend: the tensor in device memory (data is then NULL or a
			* host copy: small integer tensors keep one, for shape arguments) */
	uint32_t vsrc;
	int32_t vst[RT_MAX_DIMS]; /* a view's strides, in elements: views are made only where they
				   * fit (RT_VIEW_STRIDE_MAX) */
	unsigned char owned; /* data was allocated by the executor (else it borrows initializer bytes) */
	unsigned char known; /* the shape is known (the value has been produced) */
	unsigned char view;  /* a Transpose folded into the products that read it (exec.c): data is
			      * its input's bytes (value vsrc's, or a copy of them), element
			      * (i_0 .. i_r-1) at sum i_k vst[k]; only MatMul and Gemm (A and B) are
			      * given views */
	unsigned char ghost; /* an intermediate of a fused chain (exec.c): counted live as if it
			      * were written, but never is (data NULL) */
	unsigned char given; /* its buffer went to the output of the node that read it last
			      * (OPF_REUSES): data still points there for that node's kernel, and
			      * its bytes are the output's now (release counts and frees nothing) */
	int swapped;   /* data holds the tensor with its first two axes exchanged: written so by a
			* kernel for the one Transpose that reads it and exchanges them back
			* (exec_swap_ok), which then copies it in order; reset by exec_shape */
};
#define RT_VIEW_STRIDE_MAX INT32_MAX
_Static_assert(sizeof(void *) != 8 || sizeof(struct rtensor) <= 152,
	       "an rtensor a value: a shapes-only run of a 1M-node chain's training graph holds 4M");

/* A view's strides (rtensor.vst) as int64. */
static inline void rt_view_strides(const struct rtensor *t, int64_t *st)
{
	for (int i = 0; i < RT_MAX_DIMS; i++)
		st[i] = t->vst[i];
}

struct exec;

struct exec_binding { /* --dim NAME=VALUE */
	const char *name;
	int64_t value;
};

struct exec_opts {
	int shapes_only;               /* infer shapes (and fold constants) instead of running */
	const struct exec_binding *dims;
	size_t n_dims;
	int probe_unbound;             /* give unbound symbolic dims distinct large stand-in values */
	int64_t default_dim;           /* or, when > 0, this value */
	uint64_t seed;                 /* for random ops and random inputs */
	uint64_t step;                 /* the training step (run --steps counts from 0): Dropout draws a
					* fresh mask each step; step 0's is the one seed alone gives */
	int random_inputs;             /* inputs without data get seeded random values */
	const struct rtensor *inputs;  /* data for graph inputs, matched by input_names */
	const char *const *input_names;
	size_t n_inputs;
	struct exec_profile *profile;  /* when set, per-op time is added to it */
	int keep_values;               /* keep every value to the end (for folding) instead of freeing it */
	int copy_transposes;           /* no Transpose folded into the products (exec.c): every one a
					* copy, as on a device backend, for bitwise comparisons with one */
	uint64_t *node_flops;          /* when set: node i's FLOPs (op_cost) go to node_flops[i] */
	int no_chains;                 /* every node runs its own kernel: no elementwise chains fused
					* (exec.c), for comparisons with the fused run */
	/* Data parallelism (rewrite/replicas.h). The batch inputs are the graph inputs that are no
	 * initializers (data, labels): with shard_inputs, they hold the whole batch of comm's replicas
	 * and this run takes its rank's slice of axis 0 (random ones: that slice of the whole batch's
	 * numbers, and Dropout draws its slice's too); batch_times > 1 gives random batch inputs that
	 * many times their axis 0 instead (the whole batch, for verify's reference). Rank-0 inputs go
	 * whole to every replica. */
	struct comm *comm;             /* AllReduce's transport (exec/comm.h); NULL: one replica */
	int shard_inputs;
	int64_t batch_times;
	const struct backend *backend; /* where the nodes run (exec/backend.h); NULL: the CPU. Not
					* for shapes-only runs */
	struct exec *parent;           /* a subgraph's run (exec_subgraph): the run of the node whose
					* body it is, whose values its outer references read */
};

/* Time and calls per op, when asked for (exec_opts.profile). */
struct exec_profile {
	double seconds[OP_COUNT];
	uint64_t calls[OP_COUNT], flops[OP_COUNT];
	double tag_seconds[8]; /* time of the nodes tagged 1 << k (TAG_LOSS_SCALE: the finite check...) */
};

struct exec_stats {
	size_t peak_bytes, final_bytes; /* tensors, per the memory model */
	size_t scratch_peak_bytes;      /* kernels' workspace, on top */
	double seconds;              /* running the nodes (inputs already bound) */
	uint64_t flops, bytes_moved; /* summed op costs (op_cost) */
	uint64_t comm_calls, comm_bytes; /* AllReduce over a comm: nodes run, and their input bytes */
	double comm_seconds;             /* ... and their time (within seconds), waits for the other
					  * replicas included */
	/* On a device backend: the peak of its tensor memory (equal to peak_bytes, by construction),
	 * and the nodes it had no kernel for, which ran on the CPU, with the copies that took. */
	size_t device_peak_bytes;
	uint64_t host_nodes, copies, copy_bytes;
	uint64_t chain_nodes;        /* nodes run in fused elementwise chains (exec.c) */
};

/* Runs g (already checked and sorted). On success the caller owns the executor and reads values
 * with exec_value; exec_free releases everything. */
struct exec *exec_run(struct graph *g, const struct exec_opts *o, struct exec_stats *st, struct gd_err *e);
const struct rtensor *exec_value(const struct exec *x, const struct value *v);
/* In a shapes-only run, gives `copy`, a value added to the graph after the run, the shape of `of`
 * (a recomputed copy has its original's), so the run stays valid across the checkpoint rewrite
 * without running again. -1 when out of memory. */
int exec_alias(struct exec *x, const struct value *copy, const struct value *of);
void exec_free(struct exec *x);


/* ---- for backends (exec/backend.h) ---- */

/* Sets t's dtype and shape (checked); nonzero with the node failed when they are bad. */
int exec_shape(struct exec *x, struct rtensor *t, int dtype, int ndim, const int64_t *dims);
/* While on, the outputs kernels allocate are float32 workspace, for the CPU's 16-bit widening. */
void exec_set_widening(struct exec *x, int on);
/* Runs n's CPU kernel into outputs whose shapes and host memory are already set: the kernel's own
 * results are workspace, copied into them (a device backend over host memory, for tests). */
int exec_run_cpu_into(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out);
/* Workspace in the backend's memory, counted as scratch; NULL with the error set when out of memory. */
void *exec_dev_scratch(struct exec *x, size_t bytes);
void exec_dev_scratch_free(struct exec *x, void *p, size_t bytes);
const struct backend *exec_backend(const struct exec *x);

/* ---- for kernels (src/ops/) ---- */

/* Gives out its dtype and shape and, when the node is being computed, uninitialised data the
 * kernel must fill entirely. Returns the data, or NULL when only shapes are wanted or on failure:
 * the kernel then returns exec_status(x). */
void *exec_alloc(struct exec *x, struct rtensor *out, int dtype, int ndim, const int64_t *dims);
/* Output 0 of a view (OPF_VIEW), or of an update in place (OPF_INPLACE, OPF_ADDS_TO, when computing
 * data): when in, the node's input that op_taken_input names, dies at this node (its last reader,
 * not an input, initializer or graph output), out gets in's buffer under the shape given and in
 * keeps only its shape; 1 then (the kernel then updates out), 0 when out must be a new buffer, -1
 * on a bad shape. */
int exec_take(struct exec *x, struct rtensor *in, struct rtensor *out, int ndim, const int64_t *dims);
/* The same with the data zeroed, for kernels that accumulate into their output. */
void *exec_alloc_zero(struct exec *x, struct rtensor *out, int dtype, int ndim, const int64_t *dims);
int exec_status(const struct exec *x);
/* Frees a tensor a kernel allocated for itself (a temporary the allocator counted). */
void exec_drop(struct exec *x, struct rtensor *t);
/* A kernel's temporary tensor, counted as workspace (not in the memory model's peak). */
void *exec_alloc_temp(struct exec *x, struct rtensor *t, int dtype, int ndim, const int64_t *dims);
void exec_free_temp(struct exec *x, struct rtensor *t);
/* Counted zeroed scratch memory for a kernel; NULL with the error set when out of memory. */
void *exec_scratch(struct exec *x, size_t bytes);
/* The same, not zeroed: for workspace the kernel writes in full before it reads it. */
void *exec_scratch_raw(struct exec *x, size_t bytes);
void exec_scratch_free(struct exec *x, void *p, size_t bytes);
/* Fails the current node: "node 'n' (Op): <msg>". Returns GD_EINPUT. */
int exec_fail(struct exec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int exec_opset(const struct exec *x); /* the default-domain opset version */
/* The key of a random op's numbers: its `seed` attribute, else the run's seed and the node's name;
 * a recompute clone gets the key of the node it clones, so it draws the same numbers. */
uint64_t exec_node_seed(const struct exec *x, const struct node *n);
uint64_t exec_step(const struct exec *x); /* exec_opts.step */
struct graph *exec_graph(const struct exec *x); /* for reading attribute tensors' data */
/* Whether a shapes-only run gave symbolic dimensions stand-in values. */
int exec_probed(const struct exec *x);
/* Whether value v may be written with its first two axes exchanged (rtensor.swapped): its one
 * reader is a Transpose that exchanges them (perm [1, 0, 2, ...]), it is kept by no one, the run
 * is on the CPU and the kernel writes it, not a float32 stand-in for it (a weight gradient's Conv
 * then writes it as the GEMM gives it, and the Transpose copies it in order). */
int exec_swap_ok(const struct exec *x, const struct value *v);
/* A copy of view v (rtensor.view: made by a folded Transpose) in workspace, in order, for a
 * kernel that cannot read it; freed with exec_scratch_free(x, copy->data, copy->nbytes). 0, or
 * the run's error code (out of memory). */
int exec_materialize(struct exec *x, const struct rtensor *v, struct rtensor *copy);
/* Whether dimension d (of an inferred shape) derives from a symbolic dimension: stand-ins are
 * distinct primes above 10000, so such dimensions are multiples of one. */
int exec_dim_symbolic(const struct exec *x, int64_t d);
/* Such a dimension as an expression over the symbols (ir/symdim.h): 1, or 0 when it is none. */
struct symdim;
int exec_dim_expr(const struct exec *x, int64_t d, struct symdim *out);
/* For a shape rule that gives a symbolic length d where it reads buffer, which holds only limit
 * (a Slice of a fixed-size buffer by a symbolic end, rather than clamping it): records in the
 * graph's metadata the assumption d <= limit, with the current node and the buffer (symdim.h).
 * 0, or the run's error code. */
int exec_assume(struct exec *x, int64_t d, int64_t limit, const struct value *buffer);
/* Records in g's metadata the assumptions that a shapes-only run of g with every symbolic dim
 * unbound makes, so that they can be checked against bindings before those are made part of the
 * graph (graph_bind_dims). 0, or -1 when out of memory. */
int exec_record_assumptions(struct graph *g);
/* exec_record_assumptions, then checks them against the bindings b (--dim): 0, or GD_EINPUT
 * naming the node and the buffer of an assumption they break (symdim_check). */
int exec_check_bindings(struct graph *g, const struct exec_binding *b, size_t n, struct gd_err *e);

/* Runs body, a subgraph of the current node (If's branches, Loop's and Scan's bodies: ops/control.c),
 * as a run of its own: its graph inputs bound to in[0 .. body->n_inputs), its references to
 * enclosing values (ONNX's lexical scoping) to the enclosing runs' tensors, in the same mode (a
 * shapes-only run infers its shapes, computing what it can). Its outputs go to out[0 ..
 * body->n_outputs): dtype and shape, and data (NULL when only the shape is known) in workspace the
 * caller frees with exec_free_temp. 0, or the run's error code with the error said at the inner
 * node, prefixed by the outer one. */
int exec_subgraph(struct exec *x, struct graph *body, const struct rtensor *in, struct rtensor *out);
/* Whether the run only infers shapes (exec_opts.shapes_only). */
int exec_shapes_only(const struct exec *x);

/* The run's comm (NULL: one replica), for AllReduce. */
struct comm *exec_comm(const struct exec *x);
/* Where a random op's numbers for a tensor of numel elements start: its slice of the whole batch's
 * (rank x numel) when the run is a shard, else 0. */
uint64_t exec_shard_offset(const struct exec *x, int64_t numel);

/* Element access in double, for kernels that are not on a hot path.
 *
 * A float stored into an integer tensor (Cast, and every kernel that computes integers in double)
 * truncates toward zero and saturates: NaN is 0, and what is past the type's range (3e38, inf)
 * is its minimum or maximum. C leaves that conversion undefined; x86 and NumPy give INT_MIN for
 * any of them (cvttss2si's "indefinite integer"), while CUDA's conversions (the CUDA backend's
 * Cast) and ARM's saturate with NaN as 0, so both backends agree. Integers stored into narrower
 * integers wrap, as NumPy's and two's complement do (rt_set_i). */
double rt_get(const struct rtensor *t, int64_t i);
void rt_set(struct rtensor *t, int64_t i, double v);
/* rt_get and rt_set with float32 and float64 inline (the same values, without the call and its
 * switch): for kernels' element loops whose fast paths are typed but whose rest reads any dtype. */
static inline double rt_load(const struct rtensor *t, int64_t i)
{
	return t->dtype == DT_FLOAT ? ((const float *)t->data)[i] : t->dtype == DT_DOUBLE ? ((const double *)t->data)[i]
										: rt_get(t, i);
}
static inline void rt_store(struct rtensor *t, int64_t i, double v)
{
	if (t->dtype == DT_FLOAT)
		((float *)t->data)[i] = (float)v;
	else if (t->dtype == DT_DOUBLE)
		((double *)t->data)[i] = v;
	else
		rt_set(t, i, v);
}
/* Stores integer v as element i, wrapped to t's width (uint64: its bits); a float t gets (double)v. */
void rt_set_i(struct rtensor *t, int64_t i, int64_t v);
/* t's shape as "[2, 3]", into buf; returns buf. */
const char *rt_shape_str(const struct rtensor *t, char *buf, size_t n);
/* Element i as int64: exact for integers (uint64: its bits), a float truncated toward zero and
 * saturated, NaN 0 (rt_set's rule). */
int64_t rt_get_i(const struct rtensor *t, int64_t i);
/* The int64 values of a small 1-D (or scalar) tensor; fails when it has no data. */
int rt_ints(struct exec *x, const struct rtensor *t, const char *what, int64_t *out, int max, int *n);

#endif
