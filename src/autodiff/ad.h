/* ad.h - reverse-mode autodiff: the engine's entry point, and the builder API that gradient rules
 * (one per op, in the op's family file) use to add backward nodes.
 *
 * A rule reads the gradient of its node's outputs (ad_dy), adds standard ONNX nodes computing the
 * inputs' gradients, and hands each to the engine (ad_give), which sums what several consumers
 * give. Rules never run kernels; they may read forward values' shapes (ad_shape) to decide ranks
 * and broadcasting, but sizes that depend on symbolic dimensions are computed in the graph (Shape
 * nodes), so the training graph works for every batch size. */
#ifndef GD_AD_H
#define GD_AD_H

#include "../exec/exec.h"
#include "../ir/graph.h"

struct autodiff_opts {
	const char *loss;              /* output to differentiate; NULL: the only scalar output */
	const char *const *params;     /* trainable parameters; NULL: every float initializer... */
	size_t n_params;
	const char *const *freeze;     /* ...but these */
	size_t n_freeze;
	double loss_scale;             /* > 0 and not 1: backprop starts from this dL/dL instead of 1
					* (the loss multiplied by it), and each <param>_grad is
					* multiplied by its inverse (fixed loss scaling) */
	const char *loss_scale_value;  /* or: the float32 scalar graph value (dynamic loss scaling's
					* state) that backprop starts from and the gradients are divided by */
	double loss_weight;            /* > 0 and not 1: the gradients are those of this times the loss
					* (dL/dL starts at it and is not divided out): data-parallel
					* replicas' 1/N (rewrite/replicas.h) */
	int fused_rnn;                 /* LSTM, GRU and RNN differentiate as one RecurrentGrad node
					* (domain graphdiet) instead of the unrolled recurrence in
					* standard ops */
};

struct autodiff_result {
	const struct value *loss;
	size_t n_grads;     /* <param>_grad outputs added */
	uint64_t n_elems;   /* their parameters' elements */
	size_t n_unconnected;
	/* initializers that are no parameters: buffers (no path to the loss through inputs that take
	 * a gradient: a causal mask read only through a comparison) and integer constants */
	size_t n_buffers;
	uint64_t buffer_bytes;
};

/* Appends the backward pass to g (checked and sorted) and adds a <param>_grad output per trainable
 * parameter the loss depends on; flags the loss VALUE_LOSS. g stays sorted. */
int autodiff(struct graph *g, const struct autodiff_opts *o, struct autodiff_result *r, struct gd_err *e);

/* Whether --params and --freeze (o's) leave the floating-point initializer `name` trainable. */
int autodiff_chosen(const struct autodiff_opts *o, const char *name);

/* The parameter whose gradient output v is (<param>_grad, with <param> an initializer), or NULL. */
struct value *autodiff_param_of(const struct graph *g, const struct value *v);

/* ---- for gradient rules ---- */
struct ad;

/* The gradient flowing into forward value y, or NULL when none does. */
struct value *ad_dy(struct ad *a, const struct value *y);
/* Whether forward value x needs a gradient (it lies between a parameter and the loss). */
int ad_wants(const struct ad *a, const struct value *x);
/* Adds g to x's gradient: a second and later g is added at once (an Add node), so each is freed
 * once added. Returns 0 or a status. */
int ad_give(struct ad *a, const struct value *x, struct value *g);
/* Fails the rule with an input error naming the node. */
int ad_fail(struct ad *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The inferred shape of a forward value. */
const struct rtensor *ad_shape(const struct ad *a, const struct value *v);
/* Whether any dimension in the graph is symbolic (sizes must then be computed in the graph). */
int ad_symbolic(const struct ad *a);
/* Whether an inferred dimension derives from a symbolic one (its size is only known at run time). */
int ad_dim_symbolic(const struct ad *a, int64_t d);
int ad_opset(const struct ad *a);
/* autodiff_opts.fused_rnn */
int ad_fused_rnn(const struct ad *a);

/* Adds a backward node `op` reading ins (NULL entries are omitted inputs) and writing n_out fresh
 * values; returns it (NULL with the error set). */
struct node *ad_node(struct ad *a, const char *op, struct value *const *ins, int n_in, int n_out);
/* ad_node with one output, returned. */
struct value *ad_op(struct ad *a, const char *op, struct value *const *ins, int n_in);
struct value *ad_op1(struct ad *a, const char *op, struct value *x);
struct value *ad_op2(struct ad *a, const char *op, struct value *x, struct value *y);
int ad_set_int(struct ad *a, struct node *n, const char *name, int64_t v);
int ad_set_float(struct ad *a, struct node *n, const char *name, float v);
int ad_set_ints(struct ad *a, struct node *n, const char *name, const int64_t *v, size_t count);
int ad_set_str(struct ad *a, struct node *n, const char *name, const char *s); /* s is copied */
/* Cast(v) to dtype; NULL with the error set. */
struct value *ad_cast(struct ad *a, struct value *v, int dtype);
/* The node that produced v (for setting attributes after ad_op). */
struct node *ad_producer(struct value *v);
/* For rules that recognize the exporter's decompositions: v's producer when it is a forward node
 * of op, else NULL; and whether v is a scalar known without the data (a Constant, or an
 * initializer that takes no gradient and no input overrides), its value in *out. */
const struct node *ad_made_by(const struct value *v, enum op_id op);
int ad_known_scalar(const struct ad *a, const struct value *v, double *out);

/* Constants, as Constant nodes: a scalar of dtype, and a 1-D int64 vector. */
struct value *ad_scalar(struct ad *a, int dtype, double v);
struct value *ad_ints(struct ad *a, const int64_t *v, size_t n);
/* A constant tensor of dtype and shape dims, its elements v (C order) converted to dtype. */
struct value *ad_tensor(struct ad *a, int dtype, int ndim, const int64_t *dims, const double *v);

/* A reduction (ReduceSum, ReduceMean, ReduceMax, ReduceProd) of v over axes (all when na is 0), in
 * the form the model's opset wants: axes as an input from opset 13 (ReduceSum) or 18 (the others),
 * as an attribute before. */
struct value *ad_reduce(struct ad *a, const char *op, struct value *v, const int64_t *axes, int na, int keepdims);
/* Fails unless the model's opset is at least `opset` (for ops whose needed form is that recent). */
int ad_need_opset(struct ad *a, int opset, const char *what);

/* Common gradient shapes. */
/* g summed over the dimensions along which x was broadcast to g's shape, reshaped to x's shape. */
struct value *ad_unbroadcast(struct ad *a, struct value *g, const struct value *x, const struct rtensor *gshape);
/* Zeros of x's shape and dtype (ConstantOfShape). */
struct value *ad_zeros_like(struct ad *a, const struct value *x);
/* Zeros of dtype as a 1-D tensor of x's element count (made flat, not reshaped). */
struct value *ad_zeros_flat(struct ad *a, const struct value *x, int dtype);
/* Gives forward node n an extra output (such as MaxPool's Indices or Dropout's mask, which the
 * backward pass reads); returns it. */
struct value *ad_add_output(struct ad *a, const struct node *n, uint32_t slot);
/* x's shape as a value: a constant when no dimension is symbolic, else Shape(x). */
struct value *ad_shape_of(struct ad *a, const struct value *x);
/* The number of elements of x over `axes` (all when n_axes is 0) as a scalar of dtype: a constant
 * when the graph has no symbolic dimensions, else computed from Shape(x). */
struct value *ad_count(struct ad *a, const struct value *x, const int *axes, int n_axes, int dtype);

#endif
