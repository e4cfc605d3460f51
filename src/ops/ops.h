/* ops.h - the op registry, generated from ops.def (an X-macro, as jq's opcode_list.h).
 *
 * The enum, the name table and the arity table all come from the one file, so nothing is kept in
 * sync by hand. Ops not in the table are OP_UNKNOWN: they stay opaque, so info/convert/dot still
 * work, and only stages that need semantics refuse them. */
#ifndef GD_OPS_H
#define GD_OPS_H

#include <stddef.h>
#include <stdint.h>

enum op_flag {
	OPF_DIFF = 1u << 0,     /* has a gradient rule */
	OPF_ELEMWISE = 1u << 1, /* elementwise with broadcasting */
	OPF_RANDOM = 1u << 2,   /* draws random numbers: recompute with the same seed */
	OPF_SUBGRAPH = 1u << 3, /* carries graph attributes */
	OPF_META = 1u << 4,     /* reads only its inputs' shapes: computed even in shape inference */
	OPF_AMP_LOW = 1u << 5,  /* mixed precision: computes in 16 bits (rewrite/autocast.h) */
	OPF_AMP_FP32 = 1u << 6, /* mixed precision: computes in float32 (precision-sensitive) */
	OPF_VIEW = 1u << 7,     /* output 0 is input 0's elements under another shape: when that input
				 * dies at the node, its buffer becomes the output (plan/memsim.h) */
	OPF_INPLACE = 1u << 8,  /* output 0 is an updated copy of input 0 (a scatter's): when that input
				 * dies at the node, the update is made in its buffer (plan/memsim.h) */
	OPF_ADDS_TO = 1u << 9,  /* output 0 is a product added to the last input when there are 3
				 * (Gemm's C): when that input dies at the node with output 0's bytes,
				 * the product is added in its buffer (plan/memsim.h) */
	OPF_REUSES = 1u << 10,  /* elementwise, each output element written after the inputs' elements
				 * at its index are read: output 0 may be written over an input of its
				 * dtype and element count (not 16-bit) that dies at the node, the
				 * first such (plan/memsim.h) */
	OPF_COMM = 1u << 11,    /* a collective over the replicas (AllReduce, AllGather, ReduceScatter):
				 * every replica runs it at once; the executor counts its bytes and time */
};

/* The input whose buffer output 0 of a node of an op with these flags and n_in inputs may take
 * when it dies there: 0 for a view or an update in place, 2 for a Gemm's C; -1 for none. */
static inline int op_taken_input(uint32_t flags, uint32_t n_in)
{
	if (flags & (OPF_VIEW | OPF_INPLACE))
		return n_in ? 0 : -1;
	return (flags & OPF_ADDS_TO) && n_in == 3 ? 2 : -1;
}

enum op_id {
	OP_UNKNOWN = 0,
#define OP(id, name, domain, min_in, max_in, min_out, max_out, flags, impl) OP_##id,
#include "ops.def"
#undef OP
	OP_COUNT
};

struct exec;
struct rtensor;
struct ad;
struct node;

/* How a value is best rematerialised when activation checkpointing drops it. */
enum recompute_class {
	RC_CHEAP,     /* elementwise and layout: recompute rather than keep */
	RC_EXPENSIVE, /* matmul, convolution: keep if possible */
	RC_RANDOM,    /* recompute only with the same seed */
	RC_NEVER,     /* has side effects or no kernel */
};

/* What an op does, defined in its family file (see ops.def). */
struct op_impl {
	/* Derives output shapes and dtypes (exec_alloc) and computes them when asked. */
	int (*run)(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out);
	/* Adds the nodes computing the inputs' gradients from the outputs' (NULL: not differentiable). */
	int (*grad)(struct ad *a, const struct node *n);
	/* FLOPs and bytes moved, given the shapes of a run. */
	void (*cost)(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		     uint64_t *bytes);
	enum recompute_class recompute;
	/* Inputs (bit i: input i) that take no gradient: shapes, axes, indices, labels, running stats.
	 * A parameter read only there is a buffer, not trainable. */
	uint32_t nodiff;
	/* The default-domain opset from which ONNX types the op for bfloat16 (0: every opset graphdiet
	 * trains); below it, bfloat16 mixed precision computes the op in float32. */
	int bf16_since;
	/* Mixed precision: inputs (bit i) and outputs (bit 16 + i) that keep their own float width when
	 * the op computes in 16 bits (BatchNormalization's statistics and affine parameters, which ONNX
	 * types apart from X from opset `own_width_since`; below it the op computes in float32). Such
	 * an op's kernel reads and writes 16-bit tensors itself: the executor does not widen them. */
	uint32_t own_width;
	int own_width_since;
	/* Exporter no-ops (rewrite/fold.h folds them before autodiff): the input k whose tensor output
	 * 0 is, bit for bit, whenever output 0 has input k's dtype and shape (the caller checks that,
	 * with every symbolic dimension at two sets of values), or -1. in[] and out[] come from a
	 * shapes-only run: only inputs known without parameters and graph inputs carry data, and an
	 * omitted input is NULL. NULL: the op is never a no-op. */
	int (*noop)(const struct node *n, struct rtensor *const *in, struct rtensor *const *out);
	/* Where the op's derivative jumps, for verify --gradcheck (which judges only the steps that keep
	 * every decision MODEL takes): KINK_BREAKS, at the points in input 0 `breaks` writes (at most
	 * 2, in order; in[] as a shapes run has them: Clip's bounds) and returns the count of;
	 * KINK_PICK, which input an elementwise Max or Min takes; KINK_PICK_REDUCED, which element a
	 * reduction takes; KINK_STEP, its output (piecewise constant: Floor, Sign). Integer and bool
	 * outputs (indices, comparisons) are decisions of every op. */
	enum { KINK_NONE, KINK_BREAKS, KINK_PICK, KINK_PICK_REDUCED, KINK_STEP } kink;
	int (*breaks)(const struct node *n, struct rtensor *const *in, double *br);
};

/* KINK_BREAKS at 0 alone (Relu, Abs, LeakyRelu, ...). */
int op_breaks_at_zero(const struct node *n, struct rtensor *const *in, double *br);

#define OP(id, name, domain, min_in, max_in, min_out, max_out, flags, impl) extern const struct op_impl op_##impl;
#include "ops.def"
#undef OP
extern const struct op_impl op_opaque;

/* Greater or Less of a value with itself: false everywhere whatever the value (NaN included), so
 * shape inference computes it without the data (rewrite/ctrl.c's data edges rely on it). */
int op_self_compare(const struct node *n);

struct op_info {
	const char *op_type, *domain;
	int min_in, max_in, min_out, max_out;
	uint32_t flags;
	const struct op_impl *impl;
};

extern const struct op_info op_table[OP_COUNT];

/* The op for (domain, op_type); "" and "ai.onnx" are the same domain. */
enum op_id op_lookup(const char *domain, const char *op_type);
/* FLOPs and bytes moved by node n, given the shapes of its inputs and outputs: the op's own cost
 * rule, or one operation per output element and every input and output byte moved. */
void op_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
	     uint64_t *bytes);

/* op_impl.noop for ops that change nothing when their output has input 0's dtype and shape
 * (Identity, Cast, Reshape, Expand, Flatten, Squeeze, Tile): 0. */
int op_noop_same_shape(const struct node *n, struct rtensor *const *in, struct rtensor *const *out);
/* Whether t has data and every element is v (for v == 0, a zero whose sign is that of v, or an
 * integer zero). */
int op_all_equal(const struct rtensor *t, double v);

/* 1 if input k of n takes a gradient: the op has a gradient rule and k is not in its nodiff. */
int op_input_differentiable(const struct node *n, uint32_t k);

/* One row of attrs.def: the type an attribute of an op has, and for a string (or each string of
 * a strings) attribute that names a mode, its allowed values separated by '|' (else NULL). */
struct op_attr {
	enum op_id op;
	const char *name;
	int type; /* enum attr_type (ir/graph.h) */
	const char *values;
};
/* The rows for attribute `name` of op, *count of them (an attribute ONNX typed two ways over its
 * opsets has two); NULL and 0 when the registry does not list it. */
const struct op_attr *op_attr_rows(enum op_id op, const char *name, int *count);
extern const struct op_attr op_attrs[];
extern const size_t op_attrs_count;

/* 1 if `domain` names the default ONNX domain. */
int op_domain_is_default(const char *domain);

#endif
