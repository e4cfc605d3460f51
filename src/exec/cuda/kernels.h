/* kernels.h - the CUDA backend's kernels (the .cu files beside it), as C functions that the
 * backend's op table (backend.c) calls with plain sizes, strides and device pointers.
 *
 * Every kernel runs on the default stream and returns a cudaError_t (0: launched). dtypes are
 * ONNX's numbers (ir/dtype.h): float32, float64, float16 and bfloat16 compute in float32 (float64
 * in float64) and round once when stored, as the CPU backend does. Sums are deterministic: a fixed
 * thread owns each output and adds in a fixed order (no atomics), so a run repeats bit for bit. */
#ifndef GD_CUDA_KERNELS_H
#define GD_CUDA_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CK_MAX_DIMS 8

/* An index space of nd dims and, for up to 4 operands, each one's element strides in it (0 along
 * broadcast dimensions) and its first element's offset. */
struct ck_walk {
	int nd;
	int64_t dims[CK_MAX_DIMS];
	int64_t st[4][CK_MAX_DIMS];
	int64_t off[4];
};

enum ck_binop { CK_ADD, CK_SUB, CK_MUL, CK_DIV, CK_POW, CK_EQ, CK_GT, CK_LT };
enum ck_unop { CK_NEG, CK_ABS, CK_SQRT, CK_EXP, CK_LOG, CK_ERF, CK_RELU, CK_TANH, CK_SIGMOID, CK_ISNAN, CK_NOT };
enum ck_redop { CK_RSUM, CK_RMEAN, CK_RMAX };

/* out = a op b over w (operands 0: a, 1: b); comparisons give bool. */
int ck_binary(enum ck_binop op, int dtype, int64_t n, const struct ck_walk *w, const void *a, const void *b, void *out);
/* out = cond ? a : b over w (0: cond, 1: a, 2: b). */
int ck_where(int dtype, int64_t n, const struct ck_walk *w, const uint8_t *cond, const void *a, const void *b, void *out);
int ck_unary(enum ck_unop op, int dtype, int64_t n, const void *in, void *out);
int ck_cast(int from, int to, int64_t n, const void *in, void *out);
/* dst[walk 0] = src[walk 1] for elements of esize bytes (1, 2, 4 or 8). */
int ck_copy(int esize, int64_t n, const struct ck_walk *w, void *dst, const void *src);
int ck_fill(int esize, int64_t n, void *dst, uint64_t bits);

/* out (kept) = op over the reduced elements: w0 walks the kept dims (its st[0]: the input's
 * strides), w1 the reduced ones. */
int ck_reduce(enum ck_redop op, int dtype, int64_t nout, const struct ck_walk *kept, int64_t nred,
	      const struct ck_walk *red, const void *in, void *out);
/* (Log)Softmax of (outer, len, inner) along len. */
int ck_softmax(int log, int dtype, int64_t outer, int64_t len, int64_t inner, const void *in, void *out);
/* y (rows, len) = (x - mean) * invstd * scale + bias; mean and invstd (rows) are float32, or NULL. */
int ck_layer_norm(int dtype, int64_t rows, int64_t len, double eps, const void *x, const void *scale,
		  const void *bias, void *y, float *mean, float *invstd);
/* Negative log-likelihood of log-probabilities lp (nb, c, inner) at int64 labels (nb, inner), with
 * optional class weights: reduction 0 none (out: nb * inner), 1 sum, 2 mean. work holds 2 * nb *
 * inner doubles. A label outside [0, c) that is not ignore_index sets *bad. */
int ck_nll(int dtype, int64_t nb, int64_t c, int64_t inner, const void *lp, const int64_t *labels,
	   const void *weights, int64_t ignore, int reduction, void *out, double *work, int *bad);

/* out (outer, nidx, inner) = data (outer, axis, inner) at int64 indices (negative ones count from
 * the end; others set *bad). */
int ck_gather(int esize, int64_t outer, int64_t axis, int64_t nidx, int64_t inner, const void *data,
	      const int64_t *idx, void *out, int *bad);
/* ScatterND into out (already a copy of data): m index tuples of q coordinates (into out's first q
 * dims, of sizes dims), each with a slice of `slice` elements of upd. add: += instead of =. */
int ck_scatter_nd(int dtype, int add, int64_t m, int q, const int64_t *dims, int64_t slice, const int64_t *idx,
		  const void *upd, void *out, int *bad);
/* ScatterElements into out (a copy of data) along an axis: upd and idx are (outer, ulen, inner),
 * out is (outer, olen, inner). */
int ck_scatter_elements(int dtype, int add, int64_t outer, int64_t ulen, int64_t inner, int64_t olen,
			const int64_t *idx, const void *upd, void *out, int *bad);

/* Convolution's columns: img (c, h, w) -> col (c * kh * kw, oh * ow), and back (summing). ph, pw:
 * the top and left pads (pb, pr: bottom and right), s: strides, d: dilations. */
struct ck_conv {
	int64_t c, h, w, kh, kw, oh, ow, ph, pw, pb, pr, sh, sw, dh, dw;
};
int ck_im2col(int dtype, const struct ck_conv *p, const void *img, void *col);
int ck_col2im(int dtype, const struct ck_conv *p, const void *col, void *img);
/* Max or average pooling of (nc, h, w) into (nc, oh, ow); max gives int64 indices into the input
 * (flattened, as ONNX's MaxPool) when idx is not NULL; average counts the pads when asked. */
int ck_pool(int max, int dtype, int64_t nc, const struct ck_conv *p, int count_pad, const void *in, void *out,
	    int64_t *idx);

const char *ck_error(int err);

#ifdef __cplusplus
}
#endif

#endif
