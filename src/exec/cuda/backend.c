/* backend.c - the CUDA backend (exec/backend.h): device memory from plain cudaMalloc, cuBLAS for
 * MatMul, Gemm and the convolutions' products, and kernels.h for the rest.
 *
 * The op table below maps registry ops to their CUDA kernels; an op without a row, or with inputs
 * a row does not take (its `takes` says which), runs on the CPU through the executor, as shape
 * arithmetic always does (exec.c).
 *
 * Inputs arrive as views whose data is device memory; what a node reads on the host (axes, perm,
 * the split sizes) is its attributes, or the executor's host copies of its small integer inputs,
 * reached through exec_value. fp32 products use CUBLAS_COMPUTE_32F without TF32, so they agree
 * with the CPU's sgemm to rounding; fp16 and bf16 products accumulate in fp32 and round once. */
#include "../backend.h"
#include "../exec.h"
#include "kernels.h"
#include "../../ops/conv.h"
#include "../../ops/kernel.h"
#include "../../ops/ops.h"
#include "../../util/err.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* one handle, used by one node at a time */
static cublasHandle_t blas;
/* cuBLAS is opened with --backend cuda only: linked, its 700 MB of libraries would be mapped by
 * every graphdiet process, GPU or not (0.1 s per start). */
static cublasStatus_t (*blas_create)(cublasHandle_t *);
static cublasStatus_t (*blas_gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
				   const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long,
				   const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t,
				   cublasGemmAlgo_t);
static int *bad;   /* device flag: an index or label out of range */
static int opened; /* 1: ready; -1: no device (the message below) */
static char why[256];

typedef int (*cu_fn)(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out);
typedef int (*cu_takes)(const struct node *n, struct rtensor *const *in);

static int check(struct exec *x, int err, const char *what)
{
	return err ? exec_fail(x, "CUDA %s: %s", what, ck_error(err)) : 0;
}

static int blas_check(struct exec *x, cublasStatus_t s)
{
	return s == CUBLAS_STATUS_SUCCESS ? 0 : exec_fail(x, "cuBLAS: status %d", (int)s);
}

/* The kernels that flag bad indices: clear before, read after (a synchronising copy). */
static int bad_clear(struct exec *x)
{
	return check(x, cudaMemsetAsync(bad, 0, sizeof *bad, 0), "memset");
}

static int bad_read(struct exec *x, const char *msg)
{
	int h = 0;
	if (check(x, cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost), "copy"))
		return exec_status(x);
	return h ? exec_fail(x, "%s", msg) : 0;
}

/* The host copy of input k (small integer tensors have one), for attributes given as inputs. */
static struct rtensor *const *host_inputs(struct exec *x, const struct node *n, struct rtensor **h)
{
	for (uint32_t k = 0; k < n->n_in && k < 64; k++)
		h[k] = n->in[k] ? (struct rtensor *)exec_value(x, n->in[k]) : NULL;
	return h;
}

static int is_cu_float(int dt)
{
	return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_FLOAT16 || dt == DT_BFLOAT16;
}

static void c_walk(struct ck_walk *w, int nd, const int64_t *dims)
{
	memset(w, 0, sizeof *w);
	w->nd = nd;
	memcpy(w->dims, dims, (size_t)nd * sizeof *dims);
}

/* ---- elementwise ---- */

static int takes_floats(const struct node *n, struct rtensor *const *in)
{
	for (uint32_t k = 0; k < n->n_in; k++)
		if (in[k] && (!is_cu_float(in[k]->dtype) || in[k]->dtype != in[0]->dtype))
			return 0;
	return 1;
}

static int binary(struct exec *x, struct rtensor *const *in, struct rtensor *const *out, enum ck_binop op)
{
	struct rtensor *o = out[0];
	struct ck_walk w;
	c_walk(&w, o->ndim, o->dims);
	bcast_strides(in[0], o->ndim, o->dims, w.st[0]);
	bcast_strides(in[1], o->ndim, o->dims, w.st[1]);
	if (!o->numel)
		return 0;
	return check(x, ck_binary(op, in[0]->dtype, o->numel, &w, in[0]->data, in[1]->data, o->data), "kernel");
}

#define BINARY(name, op)                                                                                      \
	static int name(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out) \
	{                                                                                                      \
		(void)n;                                                                                       \
		return binary(x, in, out, op);                                                                 \
	}
BINARY(cu_add, CK_ADD)
BINARY(cu_sub, CK_SUB)
BINARY(cu_mul, CK_MUL)
BINARY(cu_div, CK_DIV)
BINARY(cu_pow, CK_POW)
BINARY(cu_equal, CK_EQ)
BINARY(cu_greater, CK_GT)
BINARY(cu_less, CK_LT)

/* Sum: ((in0 + in1) + in2) + ..., as the CPU's running sum */
static int cu_sum(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct rtensor *o = out[0];
	struct ck_walk w;
	int esz = (int)dtype_size(o->dtype);
	if (!o->numel)
		return 0;
	c_walk(&w, o->ndim, o->dims);
	c_strides(o->ndim, o->dims, w.st[0]);
	bcast_strides(in[0], o->ndim, o->dims, w.st[1]);
	if (check(x, ck_copy(esz, o->numel, &w, o->data, in[0]->data), "kernel"))
		return exec_status(x);
	for (uint32_t k = 1; k < n->n_in; k++) {
		struct rtensor acc = *o;
		struct rtensor *pair[2] = {&acc, in[k]};
		if (binary(x, pair, out, CK_ADD))
			return exec_status(x);
	}
	return 0;
}

static int takes_where(const struct node *n, struct rtensor *const *in)
{
	(void)n;
	return in[0]->dtype == DT_BOOL && is_cu_float(in[1]->dtype) && in[2]->dtype == in[1]->dtype;
}

static int cu_where(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	struct rtensor *o = out[0];
	struct ck_walk w;
	c_walk(&w, o->ndim, o->dims);
	for (int k = 0; k < 3; k++)
		bcast_strides(in[k], o->ndim, o->dims, w.st[k]);
	if (!o->numel)
		return 0;
	return check(x, ck_where(in[1]->dtype, o->numel, &w, in[0]->data, in[1]->data, in[2]->data, o->data), "kernel");
}

static int unary(struct exec *x, struct rtensor *const *in, struct rtensor *const *out, enum ck_unop op)
{
	if (!out[0]->numel)
		return 0;
	return check(x, ck_unary(op, in[0]->dtype, out[0]->numel, in[0]->data, out[0]->data), "kernel");
}

#define UNARY(name, op)                                                                                       \
	static int name(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out) \
	{                                                                                                      \
		(void)n;                                                                                       \
		return unary(x, in, out, op);                                                                  \
	}
UNARY(cu_neg, CK_NEG)
UNARY(cu_abs, CK_ABS)
UNARY(cu_sqrt, CK_SQRT)
UNARY(cu_exp, CK_EXP)
UNARY(cu_log, CK_LOG)
UNARY(cu_erf, CK_ERF)
UNARY(cu_relu, CK_RELU)
UNARY(cu_tanh, CK_TANH)
UNARY(cu_sigmoid, CK_SIGMOID)
UNARY(cu_is_nan, CK_ISNAN)
UNARY(cu_not, CK_NOT)

static int takes_bool(const struct node *n, struct rtensor *const *in)
{
	(void)n;
	return in[0]->dtype == DT_BOOL;
}

static int castable(int dt)
{
	return is_cu_float(dt) || dt == DT_INT64 || dt == DT_INT32 || dt == DT_BOOL || dt == DT_UINT8;
}

static int takes_cast(const struct node *n, struct rtensor *const *in)
{
	return castable(in[0]->dtype) && castable((int)attr_int(n, "to", 0));
}

static int cu_cast(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	if (!out[0]->numel)
		return 0;
	return check(x, ck_cast(in[0]->dtype, out[0]->dtype, out[0]->numel, in[0]->data, out[0]->data), "kernel");
}

/* ---- layout ---- */

static int takes_any(const struct node *n, struct rtensor *const *in)
{
	(void)n;
	(void)in;
	return 1;
}

/* Identity, Reshape, Flatten, Squeeze, Unsqueeze: the same bytes */
static int cu_same_bytes(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	if (!out[0]->nbytes || out[0]->data == in[0]->data) /* in place (run_device) */
		return 0;
	return check(x, cudaMemcpyAsync(out[0]->data, in[0]->data, out[0]->nbytes, cudaMemcpyDeviceToDevice, 0), "copy");
}

static int copy_walk(struct exec *x, int64_t n, const struct ck_walk *w, void *dst, const void *src, int dtype)
{
	return n ? check(x, ck_copy((int)dtype_size(dtype), n, w, dst, src), "kernel") : 0;
}

static int cu_transpose(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	struct rtensor *o = out[0];
	int64_t ist[RT_MAX_DIMS];
	size_t np;
	const int64_t *perm = attr_ints(n, "perm", &np);
	struct ck_walk w;
	c_walk(&w, o->ndim, o->dims);
	c_strides(o->ndim, o->dims, w.st[0]);
	c_strides(a->ndim, a->dims, ist);
	for (int i = 0; i < o->ndim; i++) {
		int64_t p = perm && np == (size_t)a->ndim ? perm[i] : a->ndim - 1 - i;
		w.st[1][i] = ist[p < 0 ? p + a->ndim : p];
	}
	return copy_walk(x, o->numel, &w, o->data, a->data, a->dtype);
}

static int cu_expand(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	struct rtensor *o = out[0];
	struct ck_walk w;
	c_walk(&w, o->ndim, o->dims);
	c_strides(o->ndim, o->dims, w.st[0]);
	bcast_strides(in[0], o->ndim, o->dims, w.st[1]);
	return copy_walk(x, o->numel, &w, o->data, in[0]->data, o->dtype);
}

static int cu_concat(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct rtensor *o = out[0];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 0), o->ndim, &ax))
		return exec_status(x);
	int64_t ost[RT_MAX_DIMS], at = 0;
	c_strides(o->ndim, o->dims, ost);
	for (uint32_t k = 0; k < n->n_in; k++) {
		const struct rtensor *a = in[k];
		struct ck_walk w;
		c_walk(&w, a->ndim, a->dims);
		memcpy(w.st[0], ost, sizeof ost);
		c_strides(a->ndim, a->dims, w.st[1]);
		w.off[0] = at * ost[ax];
		if (copy_walk(x, a->numel, &w, o->data, a->data, a->dtype))
			return exec_status(x);
		at += a->dims[ax];
	}
	return 0;
}

static int cu_split(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 0), a->ndim, &ax))
		return exec_status(x);
	int64_t ist[RT_MAX_DIMS], at = 0;
	c_strides(a->ndim, a->dims, ist);
	for (uint32_t k = 0; k < n->n_out; k++) {
		struct rtensor *o = out[k];
		if (!o->known)
			continue;
		struct ck_walk w;
		c_walk(&w, o->ndim, o->dims);
		c_strides(o->ndim, o->dims, w.st[0]);
		memcpy(w.st[1], ist, sizeof ist);
		w.off[1] = at * ist[ax];
		if (copy_walk(x, o->numel, &w, o->data, a->data, a->dtype))
			return exec_status(x);
		at += o->dims[ax];
	}
	return 0;
}

static int takes_gather(const struct node *n, struct rtensor *const *in)
{
	(void)n;
	return in[1]->dtype == DT_INT64 && dtype_size(in[0]->dtype) > 0 && dtype_size(in[0]->dtype) <= 8;
}

static int cu_gather(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 0), a->ndim, &ax))
		return exec_status(x);
	int64_t outer = 1, inner = 1;
	for (int i = 0; i < a->ndim; i++) {
		if (i < ax)
			outer *= a->dims[i];
		if (i > ax)
			inner *= a->dims[i];
	}
	if (!out[0]->numel)
		return 0;
	if (bad_clear(x) || check(x, ck_gather((int)dtype_size(a->dtype), outer, a->dims[ax], in[1]->numel, inner, a->data,
					       in[1]->data, out[0]->data, bad), "kernel"))
		return exec_status(x);
	return bad_read(x, "an index is out of range");
}

static int takes_scatter(const struct node *n, struct rtensor *const *in)
{
	return is_cu_float(in[0]->dtype) && in[2]->dtype == in[0]->dtype && in[1]->dtype == DT_INT64 &&
	       (attr_str_is(n, "reduction", "none", 1) || attr_str_is(n, "reduction", "add", 0));
}

static int cu_scatter_nd(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *d = in[0], *idx = in[1], *u = in[2];
	int q = idx->ndim ? (int)idx->dims[idx->ndim - 1] : 0;
	if (q < 1 || q > d->ndim)
		return exec_fail(x, "the indices' last dimension must be in [1, %d]", d->ndim);
	int64_t slice = 1, m = q ? idx->numel / q : 0;
	for (int i = q; i < d->ndim; i++)
		slice *= d->dims[i];
	if (cu_same_bytes(x, n, in, out) || !m || !slice)
		return exec_status(x);
	if (bad_clear(x) || check(x, ck_scatter_nd(d->dtype, attr_str_is(n, "reduction", "add", 0), m, q, d->dims, slice,
						   idx->data, u->data, out[0]->data, bad), "kernel"))
		return exec_status(x);
	return bad_read(x, "an index is out of range");
}

static int takes_scatter_elements(const struct node *n, struct rtensor *const *in)
{
	if (!takes_scatter(n, in) || in[1]->ndim != in[0]->ndim)
		return 0;
	int ax = (int)attr_int(n, "axis", 0);
	ax = ax < 0 ? ax + in[0]->ndim : ax;
	for (int i = 0; i < in[0]->ndim; i++)
		if (i != ax && in[1]->dims[i] != in[0]->dims[i])
			return 0; /* indices narrower than the data off the axis: the CPU's */
	return 1;
}

static int cu_scatter_elements(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *d = in[0], *idx = in[1];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 0), d->ndim, &ax))
		return exec_status(x);
	int64_t outer = 1, inner = 1;
	for (int i = 0; i < d->ndim; i++) {
		if (i < ax)
			outer *= d->dims[i];
		if (i > ax)
			inner *= d->dims[i];
	}
	if (cu_same_bytes(x, n, in, out) || !idx->numel)
		return exec_status(x);
	if (bad_clear(x) || check(x, ck_scatter_elements(d->dtype, attr_str_is(n, "reduction", "add", 0), outer, idx->dims[ax],
							 inner, d->dims[ax], idx->data, in[2]->data, out[0]->data, bad), "kernel"))
		return exec_status(x);
	return bad_read(x, "an index is out of range");
}

/* ---- reductions and normalisation ---- */

static int takes_reduce(const struct node *n, struct rtensor *const *in)
{
	return is_cu_float(in[0]->dtype) && !attr_int(n, "noop_with_empty_axes", 0);
}

/* op over the axes marked in red (all of them when all) of a, into out */
static int reduce_axes(struct exec *x, enum ck_redop op, const struct rtensor *a, const int *red, int all,
		       struct rtensor *out)
{
	int64_t st[RT_MAX_DIMS], nred = 1;
	struct ck_walk kept = {0}, rw = {0};
	c_strides(a->ndim, a->dims, st);
	for (int i = 0; i < a->ndim; i++) {
		struct ck_walk *w = all || red[i] ? &rw : &kept;
		w->dims[w->nd] = a->dims[i];
		w->st[0][w->nd++] = st[i];
		nred *= all || red[i] ? a->dims[i] : 1;
	}
	if (!out->numel)
		return 0;
	return check(x, ck_reduce(op, a->dtype, out->numel, &kept, nred, &rw, a->data, out->data), "kernel");
}

static int reduce(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		  enum ck_redop op)
{
	struct rtensor *h[64];
	int64_t axes[RT_MAX_DIMS];
	int na, red[RT_MAX_DIMS] = {0};
	if (node_axes(x, n, host_inputs(x, n, h), axes, &na))
		return exec_status(x);
	for (int i = 0; i < na; i++) {
		int ax;
		if (norm_axis(x, axes[i], in[0]->ndim, &ax))
			return exec_status(x);
		red[ax] = 1;
	}
	return reduce_axes(x, op, in[0], red, na == 0, out[0]);
}

static int cu_reduce_sum(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, CK_RSUM);
}

static int cu_reduce_mean(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, CK_RMEAN);
}

static int cu_reduce_max(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, CK_RMAX);
}

static int cu_global_average_pool(struct exec *x, const struct node *n, struct rtensor *const *in,
				  struct rtensor *const *out)
{
	(void)n;
	int spatial[RT_MAX_DIMS] = {0, 0, 1, 1, 1, 1, 1, 1};
	return reduce_axes(x, CK_RMEAN, in[0], spatial, 0, out[0]);
}

static int softmax(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out, int log)
{
	const struct rtensor *a = in[0];
	int old = exec_opset(x) < 13, ax;
	if (norm_axis(x, attr_int(n, "axis", old ? 1 : -1), a->ndim, &ax))
		return exec_status(x);
	int64_t outer = 1, len = 1, inner = 1;
	for (int i = 0; i < a->ndim; i++) {
		if (i < ax)
			outer *= a->dims[i];
		else if (i == ax || old)
			len *= a->dims[i];
		else
			inner *= a->dims[i];
	}
	if (!a->numel)
		return 0;
	return check(x, ck_softmax(log, a->dtype, outer, len, inner, a->data, out[0]->data), "kernel");
}

static int cu_softmax(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return softmax(x, n, in, out, 0);
}

static int cu_log_softmax(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return softmax(x, n, in, out, 1);
}

/* float32 or float64 (16-bit inputs: autocast keeps LayerNormalization in float32) */
static int takes_layer_norm(const struct node *n, struct rtensor *const *in)
{
	return (in[0]->dtype == DT_FLOAT || in[0]->dtype == DT_DOUBLE) && takes_floats(n, in);
}

static int cu_layer_norm(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", -1), a->ndim, &ax))
		return exec_status(x);
	int64_t rows = 1, len = 1;
	for (int i = 0; i < a->ndim; i++)
		*(i < ax ? &rows : &len) *= a->dims[i];
	float *mean = n->n_out > 1 && out[1]->known ? out[1]->data : NULL;
	float *inv = n->n_out > 2 && out[2]->known ? out[2]->data : NULL;
	if ((mean && out[1]->dtype != DT_FLOAT) || (inv && out[2]->dtype != DT_FLOAT))
		return exec_fail(x, "Mean and InvStdDev must be float32 here");
	if (!a->numel)
		return 0;
	return check(x, ck_layer_norm(a->dtype, rows, len, attr_float(n, "epsilon", 1e-5f), a->data, in[1]->data,
				      n->n_in > 2 && in[2] ? in[2]->data : NULL, out[0]->data, mean, inv), "kernel");
}

/* ---- losses ---- */

static int takes_loss(const struct node *n, struct rtensor *const *in)
{
	return is_cu_float(in[0]->dtype) && in[0]->ndim >= 2 && in[1]->dtype == DT_INT64 &&
	       (n->n_in < 3 || !in[2] || in[2]->dtype == in[0]->dtype);
}

static int nll(struct exec *x, const struct node *n, struct rtensor *const *in, const void *lp, struct rtensor *o)
{
	const struct rtensor *s = in[0];
	int red = attr_str_is(n, "reduction", "none", 0) ? 0 : attr_str_is(n, "reduction", "sum", 0) ? 1 : 2;
	int64_t nb = s->dims[0], c = s->dims[1], inner = c && nb ? s->numel / (nb * c) : 0, np = nb * inner;
	size_t wb = (size_t)(np ? np : 1) * 2 * sizeof(double);
	double *work = red ? exec_dev_scratch(x, wb) : NULL;
	if (red && !work)
		return exec_status(x);
	int rc = bad_clear(x) || check(x, ck_nll(s->dtype, nb, c, inner, lp, in[1]->data, n->n_in > 2 && in[2] ? in[2]->data : NULL,
						 attr_int(n, "ignore_index", INT64_MIN), red, o->data, work, bad), "kernel");
	rc = rc ? rc : bad_read(x, "a label is not a class");
	exec_dev_scratch_free(x, work, wb);
	return rc ? exec_status(x) : 0;
}

static int cu_nll_loss(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return nll(x, n, in, in[0]->data, out[0]);
}

static int cu_softmax_ce_loss(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *s = in[0];
	int keep = n->n_out > 1 && out[1]->known;
	void *lp = keep ? out[1]->data : exec_dev_scratch(x, s->nbytes);
	if (!lp)
		return exec_status(x);
	int64_t nb = s->dims[0], c = s->dims[1], inner = c && nb ? s->numel / (nb * c) : 0;
	int rc = s->numel ? check(x, ck_softmax(1, s->dtype, nb, c, inner, s->data, lp), "kernel") : 0;
	rc = rc ? rc : nll(x, n, in, lp, out[0]);
	if (!keep)
		exec_dev_scratch_free(x, lp, s->nbytes);
	return rc;
}

/* ---- products (cuBLAS; row-major C = A B is column-major C^T = B^T A^T) ---- */

static int blas_type(int dt, cudaDataType_t *t, cublasComputeType_t *ct)
{
	switch (dt) {
	case DT_FLOAT: *t = CUDA_R_32F, *ct = CUBLAS_COMPUTE_32F; return 1;
	case DT_DOUBLE: *t = CUDA_R_64F, *ct = CUBLAS_COMPUTE_64F; return 1;
	case DT_FLOAT16: *t = CUDA_R_16F, *ct = CUBLAS_COMPUTE_32F; return 1;
	case DT_BFLOAT16: *t = CUDA_R_16BF, *ct = CUBLAS_COMPUTE_32F; return 1;
	default: return 0;
	}
}

/* column-major C (m, n) = alpha op(A) op(B) + beta C, batched with element strides (0: shared) */
static int gemm(struct exec *x, int dt, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
		int64_t lda, int64_t sa, const void *b, int64_t ldb, int64_t sb, double beta, void *c, int64_t ldc, int64_t sc,
		int64_t batch)
{
	cudaDataType_t t = CUDA_R_32F;
	cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
	if (!blas_type(dt, &t, &ct))
		return exec_fail(x, "cuBLAS has no %s products", dtype_name(dt));
	float af = (float)alpha, bf = (float)beta;
	const void *pa = dt == DT_DOUBLE ? (const void *)&alpha : &af, *pb = dt == DT_DOUBLE ? (const void *)&beta : &bf;
	if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX)
		return exec_fail(x, "a matrix product larger than cuBLAS takes");
	return blas_check(x, blas_gemm(blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
							(int)m, (int)n, (int)k, pa, a, t, (int)lda, sa, b, t, (int)ldb, sb, pb, c, t,
							(int)ldc, sc, (int)batch, ct, CUBLAS_GEMM_DEFAULT));
}

static int takes_matmul(const struct node *n, struct rtensor *const *in)
{
	return takes_floats(n, in) && in[0]->ndim >= 1 && in[1]->ndim >= 1;
}

/* A (..., m, k) B (..., k, n): batches that are whole or shared go to one strided call; other
 * broadcasts (2 x 1 against 1 x 3 batches) loop over B's batches. */
static int cu_matmul(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	const struct rtensor *a = in[0], *b = in[1];
	struct rtensor *o = out[0];
	int64_t m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1, k = a->dims[a->ndim - 1];
	int64_t nn = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
	if (!o->numel)
		return 0;
	if (!k)
		return check(x, cudaMemsetAsync(o->data, 0, o->nbytes, 0), "memset");
	int64_t batch = o->numel / (m * nn), ab = a->numel / (m * k), bb = b->numel / (k * nn);
	size_t es = dtype_size(a->dtype);
	if ((ab == batch || ab == 1) && (bb == batch || bb == 1))
		return gemm(x, a->dtype, 0, 0, nn, m, k, 1, b->data, nn, bb == 1 ? 0 : k * nn, a->data, k, ab == 1 ? 0 : m * k,
			    0, o->data, nn, m * nn, batch);
	/* general broadcast: the output's batch index space, with each operand's batch strides */
	int nd = o->ndim - 2;
	int64_t ast[RT_MAX_DIMS], bst[RT_MAX_DIMS], dims[RT_MAX_DIMS];
	struct rtensor av = *a, bv = *b;
	av.ndim = a->ndim - 2, bv.ndim = b->ndim - 2;
	memcpy(dims, o->dims, sizeof dims);
	bcast_strides(&av, nd, dims, ast);
	bcast_strides(&bv, nd, dims, bst);
	for (int64_t i = 0; i < batch; i++) {
		int64_t r = i, ao = 0, bo = 0;
		for (int d = nd - 1; d >= 0; d--) {
			ao += (r % dims[d]) * ast[d];
			bo += (r % dims[d]) * bst[d];
			r /= dims[d];
		}
		if (gemm(x, a->dtype, 0, 0, nn, m, k, 1, (const char *)b->data + (size_t)(bo * k * nn) * es, nn, 0,
			 (const char *)a->data + (size_t)(ao * m * k) * es, k, 0, 0, (char *)o->data + (size_t)(i * m * nn) * es,
			 nn, 0, 1))
			return exec_status(x);
	}
	return 0;
}

static int cu_gemm(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *b = in[1], *c = n->n_in > 2 ? in[2] : NULL;
	struct rtensor *o = out[0];
	int ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
	int64_t m = o->dims[0], nn = o->dims[1], k = ta ? a->dims[0] : a->dims[1];
	double beta = c ? attr_float(n, "beta", 1.0f) : 0;
	if (!o->numel)
		return 0;
	if (c) { /* Y = C broadcast, then Y = alpha AB + beta Y */
		struct ck_walk w;
		c_walk(&w, 2, o->dims);
		c_strides(2, o->dims, w.st[0]);
		bcast_strides(c, 2, o->dims, w.st[1]);
		if (copy_walk(x, o->numel, &w, o->data, c->data, o->dtype))
			return exec_status(x);
	}
	return gemm(x, a->dtype, tb, ta, nn, m, k, attr_float(n, "alpha", 1.0f), b->data, tb ? k : nn, 0, a->data,
		    ta ? m : k, 0, beta, o->data, nn, 0, 1);
}

static int takes_gemm(const struct node *n, struct rtensor *const *in)
{
	return takes_floats(n, in) && in[0]->ndim == 2 && in[1]->ndim == 2 && in[0]->dims[0] * in[0]->dims[1] > 0;
}

/* ---- convolution and pooling (2-D) ---- */

static void ck_geom(struct ck_conv *p, const struct conv_geom *g, int64_t c)
{
	*p = (struct ck_conv){.c = c, .h = g->h, .w = g->w, .kh = g->kh, .kw = g->kw, .oh = g->oh, .ow = g->ow,
			      .ph = g->pt, .pw = g->pl, .pb = g->pb, .pr = g->pr, .sh = g->sh, .sw = g->sw,
			      .dh = g->dh, .dw = g->dw};
}

static int add_bias(struct exec *x, struct rtensor *o, const struct rtensor *b)
{
	/* o (N, M, P) += b (M) */
	int64_t dims[3] = {o->dims[0], o->dims[1], o->dims[2] * o->dims[3]};
	struct ck_walk w;
	c_walk(&w, 3, dims);
	c_strides(3, dims, w.st[0]);
	w.st[1][1] = 1;
	return check(x, ck_binary(CK_ADD, o->dtype, o->numel, &w, o->data, b->data, o->data), "kernel");
}

/* Conv: per image and group, Y_g (mg, np) = W_g (mg, kk) col (kk, np) with col = im2col(X_g).
 * ConvTranspose, its adjoint: col (kk, np) = W_g^T (kk, cg) X_g (cg, np), W_g stored (cg, kk), then
 * col2im into Y_g, whose image is the output (mg, oh, ow) and whose patches sit at the input's
 * (h, w) positions. */
static int convolve(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		    enum conv_kind kind)
{
	struct rtensor *h[64], *o = out[0];
	struct conv_geom g;
	if (conv_geometry(x, n, host_inputs(x, n, h), kind, &g))
		return exec_status(x);
	const struct rtensor *a = in[0], *w = in[1], *b = n->n_in > 2 ? in[2] : NULL;
	int t = kind == CONV_TRANSPOSE;
	int64_t cg = g.c / g.group, mg = g.m / g.group, kk = (t ? mg : cg) * g.kh * g.kw;
	int64_t np = t ? g.h * g.w : g.oh * g.ow, ip = g.h * g.w, op = g.oh * g.ow;
	size_t es = dtype_size(a->dtype), colb = (size_t)(kk * np) * es;
	if (!o->numel)
		return 0;
	void *col = exec_dev_scratch(x, colb);
	if (!col)
		return exec_status(x);
	struct ck_conv p;
	ck_geom(&p, &g, t ? mg : cg);
	if (t)
		p.h = g.oh, p.w = g.ow, p.oh = g.h, p.ow = g.w;
	int rc = 0;
	for (int64_t i = 0; i < g.n && !rc; i++)
		for (int64_t gi = 0; gi < g.group && !rc; gi++) {
			const char *xg = (const char *)a->data + (size_t)((i * g.c + gi * cg) * ip) * es;
			const char *wg = (const char *)w->data + (size_t)(gi * (t ? cg : mg) * kk) * es;
			char *yg = (char *)o->data + (size_t)((i * g.m + gi * mg) * op) * es;
			if (t)
				rc = gemm(x, a->dtype, 0, 1, np, kk, cg, 1, xg, np, 0, wg, kk, 0, 0, col, np, 0, 1) ||
				     check(x, ck_col2im(a->dtype, &p, col, yg), "kernel");
			else
				rc = check(x, ck_im2col(a->dtype, &p, xg, col), "kernel") ||
				     gemm(x, a->dtype, 0, 0, np, mg, kk, 1, col, np, 0, wg, kk, 0, 0, yg, np, 0, 1);
		}
	exec_dev_scratch_free(x, col, colb);
	return rc || !b ? exec_status(x) : add_bias(x, o, b);
}

static int cu_conv(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return convolve(x, n, in, out, CONV_FORWARD);
}

static int cu_conv_transpose(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return convolve(x, n, in, out, CONV_TRANSPOSE);
}

static int takes_conv(const struct node *n, struct rtensor *const *in)
{
	return takes_floats(n, in) && in[0]->ndim == 4 && in[1]->ndim == 4;
}

static int pool(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out, int max)
{
	struct rtensor *h[64];
	struct conv_geom g;
	if (conv_geometry(x, n, host_inputs(x, n, h), CONV_POOL, &g))
		return exec_status(x);
	struct ck_conv p;
	ck_geom(&p, &g, 1);
	int64_t *idx = max && n->n_out > 1 && out[1]->known ? out[1]->data : NULL;
	if (!out[0]->numel)
		return 0;
	return check(x, ck_pool(max, in[0]->dtype, g.n * g.c, &p, attr_int(n, "count_include_pad", 0) != 0, in[0]->data,
				out[0]->data, idx), "kernel");
}

static int cu_max_pool(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return pool(x, n, in, out, 1);
}

static int cu_average_pool(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return pool(x, n, in, out, 0);
}

static int takes_4d(const struct node *n, struct rtensor *const *in)
{
	return takes_floats(n, in) && in[0]->ndim == 4;
}

/* ---- the table ---- */

static const struct {
	cu_fn run;
	cu_takes takes;
} kernels[OP_COUNT] = {
	[OP_GEMM] = {cu_gemm, takes_gemm},
	[OP_MATMUL] = {cu_matmul, takes_matmul},
	[OP_CONV] = {cu_conv, takes_conv},
	[OP_CONV_TRANSPOSE] = {cu_conv_transpose, takes_conv},
	[OP_MAX_POOL] = {cu_max_pool, takes_4d},
	[OP_AVERAGE_POOL] = {cu_average_pool, takes_4d},
	[OP_GLOBAL_AVERAGE_POOL] = {cu_global_average_pool, takes_floats},
	[OP_ADD] = {cu_add, takes_floats},
	[OP_SUB] = {cu_sub, takes_floats},
	[OP_MUL] = {cu_mul, takes_floats},
	[OP_DIV] = {cu_div, takes_floats},
	[OP_POW] = {cu_pow, takes_floats},
	[OP_NEG] = {cu_neg, takes_floats},
	[OP_ABS] = {cu_abs, takes_floats},
	[OP_SQRT] = {cu_sqrt, takes_floats},
	[OP_EXP] = {cu_exp, takes_floats},
	[OP_LOG] = {cu_log, takes_floats},
	[OP_ERF] = {cu_erf, takes_floats},
	[OP_WHERE] = {cu_where, takes_where},
	[OP_EQUAL] = {cu_equal, takes_floats},
	[OP_GREATER] = {cu_greater, takes_floats},
	[OP_LESS] = {cu_less, takes_floats},
	[OP_NOT] = {cu_not, takes_bool},
	[OP_IS_NAN] = {cu_is_nan, takes_floats},
	[OP_CAST] = {cu_cast, takes_cast},
	[OP_RELU] = {cu_relu, takes_floats},
	[OP_TANH] = {cu_tanh, takes_floats},
	[OP_SIGMOID] = {cu_sigmoid, takes_floats},
	[OP_SOFTMAX] = {cu_softmax, takes_floats},
	[OP_LOG_SOFTMAX] = {cu_log_softmax, takes_floats},
	[OP_LAYER_NORM] = {cu_layer_norm, takes_layer_norm},
	[OP_RESHAPE] = {cu_same_bytes, takes_any},
	[OP_FLATTEN] = {cu_same_bytes, takes_any},
	[OP_SQUEEZE] = {cu_same_bytes, takes_any},
	[OP_UNSQUEEZE] = {cu_same_bytes, takes_any},
	[OP_IDENTITY] = {cu_same_bytes, takes_any},
	[OP_TRANSPOSE] = {cu_transpose, takes_any},
	[OP_EXPAND] = {cu_expand, takes_any},
	[OP_CONCAT] = {cu_concat, takes_any},
	[OP_SPLIT] = {cu_split, takes_any},
	[OP_GATHER] = {cu_gather, takes_gather},
	[OP_REDUCE_SUM] = {cu_reduce_sum, takes_reduce},
	[OP_REDUCE_MEAN] = {cu_reduce_mean, takes_reduce},
	[OP_REDUCE_MAX] = {cu_reduce_max, takes_reduce},
	[OP_SOFTMAX_CE_LOSS] = {cu_softmax_ce_loss, takes_loss},
	[OP_NLL_LOSS] = {cu_nll_loss, takes_loss},
	[OP_SUM] = {cu_sum, takes_floats},
	[OP_SCATTER_ND] = {cu_scatter_nd, takes_scatter},
	[OP_SCATTER_ELEMENTS] = {cu_scatter_elements, takes_scatter_elements},
};

static int cuda_supports_op(const struct node *n, struct rtensor *const *in)
{
	if (!kernels[n->op].run || n->n_in == 0 || !in[0])
		return 0;
	for (uint32_t k = 0; k < n->n_in; k++)
		if (in[k] && dtype_is_float(in[k]->dtype) && !is_cu_float(in[k]->dtype))
			return 0;
	return kernels[n->op].takes(n, in);
}

static int cuda_run_node(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	pthread_mutex_lock(&lock);
	int rc = kernels[n->op].run(x, n, in, out); /* each launch checks itself (ck_launched) */
	pthread_mutex_unlock(&lock);
	return rc ? exec_status(x) : 0;
}

static int open_cublas(void)
{
	void *h = dlopen(GD_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen(GD_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	*(void **)&blas_create = dlsym(h, "cublasCreate_v2");
	*(void **)&blas_gemm = dlsym(h, "cublasGemmStridedBatchedEx");
	return !blas_create || !blas_gemm;
}

static int cuda_open(struct gd_err *e)
{
	pthread_mutex_lock(&lock);
	if (!opened) {
		int count = 0;
		cudaError_t err = cudaGetDeviceCount(&count);
		if (err || !count)
			snprintf(why, sizeof why, "--backend cuda: no CUDA device (%s)",
				 err ? cudaGetErrorString(err) : "the driver sees none");
		else if ((err = cudaSetDevice(0)) || (err = cudaMalloc((void **)&bad, sizeof *bad)))
			snprintf(why, sizeof why, "--backend cuda: the CUDA device cannot be used (%s)", cudaGetErrorString(err));
		else if (open_cublas())
			snprintf(why, sizeof why, "--backend cuda: cannot load cuBLAS (%s)", dlerror());
		else if (blas_create(&blas) != CUBLAS_STATUS_SUCCESS)
			snprintf(why, sizeof why, "--backend cuda: cuBLAS cannot start");
		opened = why[0] ? -1 : 1;
	}
	int rc = opened < 0 ? err_set(e, GD_EINPUT, "%s", why) : 0;
	pthread_mutex_unlock(&lock);
	return rc;
}

void cuda_describe(char *buf, size_t n)
{
	int rt = 0, count = 0;
	cudaRuntimeGetVersion(&rt);
	int len = snprintf(buf, n, "built, CUDA runtime %d.%d", rt / 1000, rt % 1000 / 10);
	if (len < 0 || (size_t)len >= n)
		return;
	struct cudaDeviceProp p;
	cudaError_t err = cudaGetDeviceCount(&count);
	if (err || !count)
		snprintf(buf + len, n - (size_t)len, "; no device (%s)", err ? cudaGetErrorString(err) : "the driver sees none");
	else if ((err = cudaGetDeviceProperties(&p, 0)))
		snprintf(buf + len, n - (size_t)len, "; device 0 of %d: %s", count, cudaGetErrorString(err));
	else
		snprintf(buf + len, n - (size_t)len, "; device 0 of %d: %s, compute capability %d.%d, %.1f GiB", count, p.name,
			 p.major, p.minor, (double)p.totalGlobalMem / (1 << 30));
}

static void *cuda_alloc(size_t bytes)
{
	void *p = NULL;
	return cudaMalloc(&p, bytes) == cudaSuccess ? p : NULL;
}

static void cuda_free(void *p)
{
	cudaFree(p);
}

static int cuda_copy(void *dst, const void *src, size_t bytes, enum backend_copy kind)
{
	enum cudaMemcpyKind k = kind == BACKEND_TO_DEVICE ? cudaMemcpyHostToDevice
				: kind == BACKEND_TO_HOST ? cudaMemcpyDeviceToHost
							  : cudaMemcpyDeviceToDevice;
	return cudaMemcpy(dst, src, bytes, k) != cudaSuccess;
}

static int cuda_sync(struct gd_err *e)
{
	cudaError_t err = cudaDeviceSynchronize();
	return err ? err_set(e, GD_EINTERNAL, "the CUDA device failed: %s", cudaGetErrorString(err)) : 0;
}

const struct backend backend_cuda = {
	/* .name = */ "cuda",
	/* .host = */ 0,
	/* .open = */ cuda_open,
	/* .supports_op = */ cuda_supports_op,
	/* .alloc = */ cuda_alloc,
	/* .free = */ cuda_free,
	/* .copy = */ cuda_copy,
	/* .run_node = */ cuda_run_node,
	/* .sync = */ cuda_sync,
};
