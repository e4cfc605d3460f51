/* kernel.h - what op families share: attribute access, axis normalisation, broadcasting.
 *
 * Shapes are stated as in the ONNX operator documents; element loops run in C order. */
#ifndef GD_KERNEL_H
#define GD_KERNEL_H

#include "../exec/exec.h"
#include "../ir/graph.h"

int64_t attr_int(const struct node *n, const char *name, int64_t dflt);
float attr_float(const struct node *n, const char *name, float dflt);
/* The ints of an INTS attribute; NULL (and *count 0) when absent. */
const int64_t *attr_ints(const struct node *n, const char *name, size_t *count);
/* A STRING attribute compared to s; dflt when absent. */
int attr_str_is(const struct node *n, const char *name, const char *s, int dflt);

/* A node's axes: from its second input (the newer opsets' form) or its `axes` attribute; none
 * (count 0) when neither is given. */
int node_axes(struct exec *x, const struct node *n, struct rtensor *const *in, int64_t *axes, int *count);
/* axis in [-rank, rank) -> [0, rank); fails the node otherwise. */
int norm_axis(struct exec *x, int64_t axis, int rank, int *out);

/* NumPy broadcasting of up to 3 shapes into out (rank = the largest). Shapes that do not
 * broadcast fail the node, or with x NULL just return nonzero. */
int bcast_shape(struct exec *x, struct rtensor *const *ts, int n, int *ndim, int64_t *dims);
/* Element strides of t viewed in a broadcast output of rank ndim: 0 along broadcast dimensions. */
void bcast_strides(const struct rtensor *t, int ndim, const int64_t *dims, int64_t *strides);

/* b (n, cols, rows) = a (n, rows, cols), n matrices transposed, elements of es bytes: tiled, over
 * the threads. */
void transpose2(const void *a, int64_t n, int64_t rows, int64_t cols, size_t es, void *b);
/* out[i oq + c] = in[i + c sb] for i < na, c < nc, float32, on the calling thread; AVX-512 only
 * (x86-64: callers check simd_avx512) */
void transpose_f32_avx512(const float *in, int64_t sb, float *out, int64_t oq, int64_t na, int64_t nc);

/* o (dims, rank r, C order) = the elements of in read at strides st (elements of es bytes), st a
 * permutation of a C-order tensor's strides: a Transpose, or the copy of a folded one's view. */
void permuted_copy(const void *in, int r, const int64_t *dims, const int64_t *st, size_t es, void *o);

/* A walk over dims (nd axes) reading at strides st, as few axes as walk the same elements: unit
 * axes dropped, neighbours merged where the outer one steps over the inner one whole (st[i-1] ==
 * st[i] dims[i]; broadcast ones, both 0, too). Its R axes in D and S; R is 0 for one element. */
int merge_axes(int nd, const int64_t *dims, const int64_t *st, int64_t *D, int64_t *S);

/* C-order strides of a shape, in elements. */
void c_strides(int ndim, const int64_t *dims, int64_t *strides);

int is_float(const struct rtensor *t);
/* The kernel's dtype check: fails unless t is float32 or float64. */
int want_float(struct exec *x, const struct rtensor *t, const char *what);

/* Softmax (logsm 0) or LogSoftmax (1) of each of rows float32 rows of len elements, a into y, over
 * the threads (norm.c): the ops' kernel for their last axis, and SoftmaxCrossEntropyLoss's
 * log-probabilities (reduce.c). */
void softmax_last(const float *a, float *y, int64_t rows, int64_t len, int logsm);
/* picked[o] = LogSoftmax(row o)[col[o]] of rows float32 rows of len elements (softmax_last's
 * float, widened), or 0 where col[o] < 0; work holds rows x len floats, of which it uses some. */
void log_softmax_pick(const float *a, float *work, const int64_t *col, double *picked, int64_t rows, int64_t len);

/* A Mul node's gradient when it is an activation exported as x u(x) (GELU, SiLU, Mish): computed
 * from x alone (activation.c). 1: given; 0: not such a product; -1: failed. */
struct ad;
int activation_product_grad(struct ad *a, const struct node *n);
/* A Div node's gradient when it is LayerNorm as exported before opset 17, (x - mean) / sqrt(var +
 * eps): computed from its output and the divisor (norm.c). 1, 0 or -1 likewise. */
int layer_norm_chain_grad(struct ad *a, const struct node *n);

/* The sum of n contiguous elements of a (float32 or float64) from element at, less c, or of those
 * differences' squares, in double: eight partial sums in a fixed order, which the compiler
 * vectorises and every run repeats bit for bit (reductions, LayerNormalization's moments). */
double run_sum(const struct rtensor *a, int64_t at, int64_t n, int squares, double c);
/* The largest (lo 0) or smallest (lo 1) of n contiguous float32 or float64 elements of a from
 * element at, as the walk m = v > m || isnan(v) ? v : m from -inf takes it: the last NaN, else the
 * first of equal extremes (-0 or +0); -inf (+inf) when n is 0 (ReduceMax, GlobalMaxPool). */
double run_extreme(const struct rtensor *a, int64_t at, int64_t n, int lo);

/* Calls fn(arg, lo, hi) for pieces [lo, hi) that cover [0, n), each (but a lone one) at least
 * grain long, spread over the pool's threads (--threads). For work each of whose elements comes
 * out the same however the range is cut: the caller's answer is then the same for any number of
 * threads. Elementwise kernels cut at KERNEL_GRAIN elements: 2^13, as a recurrent layer's 128 x
 * 128 weight gradient (2^14), whose product is cut in halves too (blas.c), is summed fastest in
 * halves as well (an rnn's step at 2 threads 0.83 -> 0.79 ms; at 2^15 it ran on one core). */
#define KERNEL_GRAIN (1 << 13)
void kernel_for(int64_t n, int64_t grain, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg);

/* ScatterElements' float32/float64 walk (index.c): updates u into o (the data's copy) along axis
 * ax, red 0 none, 1 add, 2 mul, in the updates' order per element; 1 done, 0 not these dtypes, -1
 * an index out of range. */
int scatter_elements_rows(struct rtensor *o, const struct rtensor *ix, const struct rtensor *u, int ax, int red);

/* A chain of elementwise float32 nodes fused by the executor (exec.c): steps over one shape of
 * numel elements, run a slice at a time, so that the intermediates stay in cache and only the
 * results wanted outside the chain are written. Each element is the same float arithmetic as in
 * the op's own kernel, so the bits are too. chain_op: 2 for a binary op that can be a step (Add Sub
 * Mul Div), 1 for a unary one (Neg Abs Sqrt Exp Log Erf Relu Tanh Sigmoid), else 0. */
#define CHAIN_MAX 16
struct chain_arg {
	int step;       /* >= 0: that step's result; else the tensor at p, element e at p[(e / q) % r] */
	const float *p;
	int64_t q, r;
};
struct chain_step {
	int op;
	struct chain_arg a, b;
	float *out; /* where the result goes too; NULL: nowhere */
};
struct chain {
	int n;
	int64_t numel;
	struct chain_step s[CHAIN_MAX];
};
int chain_op(int op);
void chain_run(const struct chain *c);

#endif
