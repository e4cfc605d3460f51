/* quant.c - the linear quantization ops, forward only: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv.
 *
 * ONNX's formulas (operator documents, opsets 10-21):
 *   QuantizeLinear       y = saturate(round(x / scale) + zero_point)      round half to even
 *   DequantizeLinear     y = (x - zero_point) * scale
 *   DynamicQuantizeLinear  lo = min(0, min x), hi = max(0, max x), scale = (hi - lo) / 255,
 *                        zero_point = saturate(round(-lo / scale)), y = QuantizeLinear(x, ...)
 *   MatMulInteger / ConvInteger   int32 y = sum (a - a_zero_point)(b - b_zero_point)
 *   QLinearMatMul / QLinearConv   y = saturate(round((acc [+ bias]) a_scale b_scale / y_scale) + y_zero_point)
 * A scale and its zero point are per tensor (one element), per axis (1-D along `axis`, default 1)
 * or, from opset 21, blocked (x's rank, `block_size` elements of x's axis to each). The arithmetic is
 * onnxruntime's: the division, the product with the scale and the requantizing multiplier in float32
 * (the multiplier a_scale b_scale / y_scale computed once), nearbyintf under the default rounding mode
 * (to nearest, ties to even), then clamped to the output type. Sums of integer products are exact:
 * the operands less their zero points are widened to float64 and multiplied by blas_dgemm (a
 * convolution after im2col); each product of two 8-bit differences is below 2^16 in magnitude, so
 * every partial sum of K of them is an integer below 2^53 while K < 2^37, whatever the order or
 * FMA: the int64 sum the scalar loop made, stored as int32 (wrapped). Quantize and Dequantize of
 * float32/float64 and 8/16-bit data per tensor or per axis run as typed loops over the pool;
 * blocked scales and other dtypes through rt_get/rt_set. DynamicQuantizeLinear of an all-zero x
 * takes scale 1, as onnxruntime does, where the formula would divide 0 by 0.
 *
 * Outputs are uint8, int8, uint16 or int16; float8 and 4-bit types are refused. None of these ops is
 * differentiable (no gradient rule, every input nodiff): `train` through them refuses as for any op
 * without OPF_DIFF. The matrix products broadcast their batch dimensions as MatMul; the
 * convolutions take Conv's attributes and 1-D and 2-D windows (conv_geometry). */
#include "blas.h"
#include "conv.h"
#include "kernel.h"
#include "vmath.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* The saturation range of a quantized type; fails the node for any other type. */
static int qrange(struct exec *x, int dt, double *lo, double *hi)
{
	switch (dt) {
	case DT_UINT8: *lo = 0, *hi = 255; return 0;
	case DT_INT8: *lo = -128, *hi = 127; return 0;
	case DT_UINT16: *lo = 0, *hi = 65535; return 0;
	case DT_INT16: *lo = -32768, *hi = 32767; return 0;
	default: return exec_fail(x, "quantized type %s is not supported (uint8, int8, uint16, int16)", dtype_name(dt));
	}
}

/* Where element e of x (dims, rank r) reads its scale and zero point: per tensor (*per 0), per axis
 * (coordinate along axis) or blocked (x's index with the axis coordinate divided by block). */
struct qmap {
	int per;               /* 0 tensor, 1 axis, 2 blocked */
	int64_t inner, d, db, block;
};

static int qmap_init(struct exec *x, const struct node *n, const struct rtensor *xt, const struct rtensor *s,
		     struct qmap *m)
{
	*m = (struct qmap){0};
	int64_t block = attr_int(n, "block_size", 0);
	if (s->numel == 1 && s->ndim <= 1 && block <= 0)
		return 0;
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 1), xt->ndim, &ax))
		return exec_status(x);
	m->inner = 1;
	for (int i = ax + 1; i < xt->ndim; i++)
		m->inner *= xt->dims[i];
	m->d = xt->dims[ax];
	if (block <= 0) {
		if (s->ndim != 1 || s->dims[0] != m->d)
			return exec_fail(x, "a per-axis scale must be 1-D of %lld elements (x's axis %d)", (long long)m->d, ax);
		m->per = 1;
		return 0;
	}
	m->per = 2, m->block = block, m->db = (m->d + block - 1) / block;
	int ok = s->ndim == xt->ndim;
	for (int i = 0; ok && i < xt->ndim; i++)
		ok = s->dims[i] == (i == ax ? m->db : xt->dims[i]);
	if (!ok)
		return exec_fail(x, "a blocked scale must have x's shape with %lld along axis %d (block_size %lld)",
				 (long long)m->db, ax, (long long)block);
	return 0;
}

static inline int64_t qmap_at(const struct qmap *m, int64_t e)
{
	if (!m->per)
		return 0;
	int64_t a = e / m->inner % m->d;
	if (m->per == 1)
		return a;
	return ((e / m->inner / m->d) * m->db + a / m->block) * m->inner + e % m->inner;
}

/* The zero point (input k, optional) has the scale's shape. */
static int zero_point_of(struct exec *x, struct rtensor *const *in, int n_in, int k, const struct rtensor *s,
			 const struct rtensor **zp)
{
	*zp = n_in > k ? in[k] : NULL;
	if (!*zp)
		return 0;
	int same = (*zp)->numel == s->numel && ((*zp)->ndim == s->ndim || s->numel == 1);
	for (int i = 0; same && i < s->ndim && s->numel != 1; i++)
		same = (*zp)->dims[i] == s->dims[i];
	return same ? 0 : exec_fail(x, "the zero point's shape differs from the scale's");
}

static inline double saturate(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* round(v / s) + zp, clamped, in float32 as onnxruntime's MlasQuantizeLinear */
static inline double quantize1(double v, float s, double zp, double lo, double hi)
{
	return saturate((double)(nearbyintf((float)v / s) + (float)zp), lo, hi);
}

/* The typed loops of QuantizeLinear (x float32/float64 to an 8/16-bit y) and DequantizeLinear (an
 * 8/16-bit or int32 x to a float32/float64 y), per tensor or per axis: element e takes the scale
 * and zero point k = e / inner % d (d 1 per tensor), read once as float32 (zf; DequantizeLinear's
 * zero point as an integer, zi). quantize1's and the rt_set loop's arithmetic: round(x / s) + zp in
 * float32, clamped, NaN stored as 0 (rt_set's rule); (float)(q - zp) * s in float32. */
struct qlin_job {
	const void *a;
	void *y;
	int src, dst;
	const float *s, *zf;
	const int64_t *zi;
	int64_t inner, d;
	float lo, hi;
};

#define QL_QUANT(ST, DT)                                                                                       \
	static inline __attribute__((always_inline)) void ql_##ST##_##DT(const ST *restrict a, DT *restrict y, \
									int64_t n, float s, float z, float lo, float hi) \
	{                                                                                                      \
		for (int64_t i = 0; i < n; i++) {                                                              \
			float r = nearbyintf((float)a[i] / s) + z;                                             \
			r = r < lo ? lo : r > hi ? hi : r;                                                     \
			y[i] = r != r ? 0 : (DT)r;                                                             \
		}                                                                                              \
	}
QL_QUANT(float, uint8_t)
QL_QUANT(float, int8_t)
QL_QUANT(float, uint16_t)
QL_QUANT(float, int16_t)
QL_QUANT(double, uint8_t)
QL_QUANT(double, int8_t)
QL_QUANT(double, uint16_t)
QL_QUANT(double, int16_t)
#undef QL_QUANT

/* WT: a type that holds x - zp exactly */
#define QL_DEQUANT(ST, WT, DT)                                                                                 \
	static inline __attribute__((always_inline)) void dq_##ST##_##DT(const ST *restrict a, DT *restrict y, \
									int64_t n, int64_t z, float s)   \
	{                                                                                                      \
		for (int64_t i = 0; i < n; i++)                                                                \
			y[i] = (DT)((float)((WT)a[i] - (WT)z) * s);                                             \
	}
QL_DEQUANT(uint8_t, int32_t, float)
QL_DEQUANT(int8_t, int32_t, float)
QL_DEQUANT(uint16_t, int32_t, float)
QL_DEQUANT(int16_t, int32_t, float)
QL_DEQUANT(int32_t, int64_t, float)
QL_DEQUANT(uint8_t, int32_t, double)
QL_DEQUANT(int8_t, int32_t, double)
QL_DEQUANT(uint16_t, int32_t, double)
QL_DEQUANT(int16_t, int32_t, double)
QL_DEQUANT(int32_t, int64_t, double)
#undef QL_DEQUANT

/* elements [e, e + n) of one scale */
static inline __attribute__((always_inline)) void ql_run(const struct qlin_job *j, int64_t e, int64_t n, int64_t k)
{
	const void *a = j->a;
	void *y = j->y;
	float s = j->s[k], z = j->zf ? j->zf[k] : 0, lo = j->lo, hi = j->hi;
	int64_t zi = j->zi ? j->zi[k] : 0;
#define Q(ST, DT) ql_##ST##_##DT((const ST *)a + e, (DT *)y + e, n, s, z, lo, hi)
#define QDST(ST)                                                                                               \
	switch (j->dst) {                                                                                      \
	case DT_UINT8: Q(ST, uint8_t); break;                                                                  \
	case DT_INT8: Q(ST, int8_t); break;                                                                    \
	case DT_UINT16: Q(ST, uint16_t); break;                                                                \
	default: Q(ST, int16_t); break;                                                                        \
	}
#define D(ST, DT) dq_##ST##_##DT((const ST *)a + e, (DT *)y + e, n, zi, s)
#define DSRC(DT)                                                                                               \
	switch (j->src) {                                                                                      \
	case DT_UINT8: D(uint8_t, DT); break;                                                                  \
	case DT_INT8: D(int8_t, DT); break;                                                                    \
	case DT_UINT16: D(uint16_t, DT); break;                                                                \
	case DT_INT16: D(int16_t, DT); break;                                                                  \
	default: D(int32_t, DT); break;                                                                        \
	}
	if (j->src == DT_FLOAT)
		QDST(float)
	else if (j->src == DT_DOUBLE)
		QDST(double)
	else if (j->dst == DT_FLOAT)
		DSRC(float)
	else
		DSRC(double)
#undef DSRC
#undef D
#undef QDST
#undef Q
}

VM_CLONES static void ql_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct qlin_job *j = arg;
	for (int64_t e = lo; e < hi;) {
		int64_t r = e / j->inner, end = (r + 1) * j->inner;
		end = end < hi ? end : hi;
		ql_run(j, e, end - e, r % j->d);
		e = end;
	}
}

/* Whether the typed loops take x (dtype src) to y (dst) under m */
static int ql_typed(const struct qmap *m, int src, int dst)
{
	int small = dst == DT_UINT8 || dst == DT_INT8 || dst == DT_UINT16 || dst == DT_INT16;
	if (m->per == 2)
		return 0;
	if (src == DT_FLOAT || src == DT_DOUBLE)
		return small;
	return (dst == DT_FLOAT || dst == DT_DOUBLE) &&
	       (src == DT_UINT8 || src == DT_INT8 || src == DT_UINT16 || src == DT_INT16 || src == DT_INT32);
}

/* Runs the typed loop of a (x) into y over m: the scales s and zero points zp (NULL: 0) read once */
static int ql_go(struct exec *x, const struct qmap *m, const struct rtensor *a, const struct rtensor *s,
		 const struct rtensor *zp, struct rtensor *y, double lo, double hi)
{
	int64_t nk = m->per ? m->d : 1;
	size_t bytes = (size_t)nk * (2 * sizeof(float) + sizeof(int64_t)) + 1;
	float *fs = exec_scratch_raw(x, bytes);
	if (!fs)
		return exec_status(x);
	float *zf = fs + nk;
	int64_t *zi = (int64_t *)(zf + nk);
	for (int64_t k = 0; k < nk; k++) {
		fs[k] = (float)rt_get(s, k);
		zf[k] = zp ? (float)rt_get(zp, k) : 0;
		zi[k] = zp ? rt_get_i(zp, k) : 0;
	}
	struct qlin_job j = {a->data, y->data, a->dtype, y->dtype, fs, zf, zi, m->per ? m->inner : a->numel, nk,
			     (float)lo, (float)hi};
	if (j.inner < 1)
		j.inner = 1;
	kernel_for(a->numel, KERNEL_GRAIN, ql_elems, &j);
	exec_scratch_free(x, fs, bytes);
	return 0;
}

/* QuantizeLinear(x, y_scale, y_zero_point?): y has x's shape and the zero point's type (else
 * output_dtype, else uint8) */
static int quantize_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *s = in[1], *zp;
	struct qmap m;
	if (zero_point_of(x, in, n->n_in, 2, s, &zp) || qmap_init(x, n, a, s, &m))
		return exec_status(x);
	int dt = zp ? zp->dtype : (int)attr_int(n, "output_dtype", DT_UINT8);
	double lo = 0, hi = 0;
	if (!dtype_is_float(s->dtype) || (!dtype_is_float(a->dtype) && a->dtype != DT_INT32))
		return exec_fail(x, "x must be floating-point or int32 and y_scale floating-point, not %s and %s",
				 dtype_name(a->dtype), dtype_name(s->dtype));
	if (qrange(x, dt, &lo, &hi) || !exec_alloc(x, out[0], dt, a->ndim, a->dims))
		return exec_status(x);
	if (ql_typed(&m, a->dtype, dt))
		return ql_go(x, &m, a, s, zp, out[0], lo, hi);
	for (int64_t e = 0; e < a->numel; e++) {
		int64_t k = qmap_at(&m, e);
		rt_set(out[0], e, quantize1(rt_get(a, e), (float)rt_get(s, k), zp ? rt_get(zp, k) : 0, lo, hi));
	}
	return 0;
}

/* DequantizeLinear(x, x_scale, x_zero_point?): y (x's shape, the scale's type) */
static int dequantize_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *s = in[1], *zp;
	struct qmap m;
	if (zero_point_of(x, in, n->n_in, 2, s, &zp) || qmap_init(x, n, a, s, &m))
		return exec_status(x);
	double lo = 0, hi = 0;
	if (a->dtype != DT_INT32 && qrange(x, a->dtype, &lo, &hi))
		return exec_status(x);
	if (!dtype_is_float(s->dtype))
		return exec_fail(x, "x_scale must be floating-point, not %s", dtype_name(s->dtype));
	int dt = (int)attr_int(n, "output_dtype", 0);
	if (!exec_alloc(x, out[0], dt ? dt : s->dtype, a->ndim, a->dims))
		return exec_status(x);
	if (ql_typed(&m, a->dtype, out[0]->dtype) && (!zp || zp->dtype == a->dtype))
		return ql_go(x, &m, a, s, zp, out[0], 0, 0);
	for (int64_t e = 0; e < a->numel; e++) {
		int64_t k = qmap_at(&m, e), q = rt_get_i(a, e) - (zp ? rt_get_i(zp, k) : 0);
		rt_set(out[0], e, (double)((float)q * (float)rt_get(s, k)));
	}
	return 0;
}

/* *lo = min(0, min p), *hi = max(0, max p) over n floats, NaN skipped, as the walk lo = p < lo ?
 * p : lo from +0 takes it: 16 lanes in vectors (GCC vectorises no such walk without
 * -ffinite-math-only), then the lanes and the tail in the same rule. The same answer in any order:
 * lo never becomes -0 (nothing is below +0 that equals it) and a NaN is never taken. */
typedef float dq_v16 __attribute__((vector_size(64)));
typedef int32_t dq_i16 __attribute__((vector_size(64)));

VM_CLONES static void dq_extremes(const float *p, int64_t n, float *lo, float *hi)
{
	dq_v16 l = {0}, h = {0};
	int64_t e = 0;
	for (; e + 16 <= n; e += 16) {
		dq_v16 v;
		memcpy(&v, p + e, sizeof v);
		dq_i16 below = v < l, above = v > h; /* all ones where taken */
		l = (dq_v16)((below & (dq_i16)v) | (~below & (dq_i16)l));
		h = (dq_v16)((above & (dq_i16)v) | (~above & (dq_i16)h));
	}
	float a = 0, b = 0;
	for (int i = 0; i < 16; i++) {
		a = l[i] < a ? l[i] : a;
		b = h[i] > b ? h[i] : b;
	}
	for (; e < n; e++) {
		a = p[e] < a ? p[e] : a;
		b = p[e] > b ? p[e] : b;
	}
	*lo = a, *hi = b;
}

/* DynamicQuantizeLinear(x float32) -> y uint8 (x's shape), y_scale float32 (), y_zero_point uint8 () */
static int dynamic_quantize_run(struct exec *x, const struct node *n, struct rtensor *const *in,
				struct rtensor *const *out)
{
	(void)n;
	const struct rtensor *a = in[0];
	if (a->dtype != DT_FLOAT)
		return exec_fail(x, "x must be float32, not %s", dtype_name(a->dtype));
	void *y = exec_alloc(x, out[0], DT_UINT8, a->ndim, a->dims);
	float *s = exec_alloc(x, out[1], DT_FLOAT, 0, NULL);
	uint8_t *z = n->n_out > 2 ? exec_alloc(x, out[2], DT_UINT8, 0, NULL) : NULL;
	if (!y || !s || (n->n_out > 2 && !z))
		return exec_status(x);
	float lo = 0, hi = 0;
	dq_extremes(a->data, a->numel, &lo, &hi);
	*s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
	double zp = saturate(nearbyintf(saturate(0.0f - lo / *s, 0, 255)), 0, 255);
	if (z)
		*z = (uint8_t)zp;
	float fz = (float)zp;
	struct qlin_job j = {a->data, y, DT_FLOAT, DT_UINT8, s, &fz, NULL, a->numel > 1 ? a->numel : 1, 1, 0, 255};
	kernel_for(a->numel, KERNEL_GRAIN, ql_elems, &j);
	return 0;
}

/* ---- integer matrix products ---- */

/* A (.., M, K) times B (.., K, N) with broadcast batches, as MatMul (a 1-D A is (1, K), a 1-D B
 * (K, 1), their unit axis dropped from Y). A row parameter (A's zero point or scale) is one value,
 * M values, or one per row of A's matrices; a column one (B's) one, N, or one per column of B's. */
struct qmm {
	int64_t m, k, n, batches;
	int nd;                     /* output rank */
	int64_t dims[RT_MAX_DIMS];   /* output shape */
	int bnd;                     /* batch rank */
	int64_t bdims[RT_MAX_DIMS], sa[RT_MAX_DIMS], sb[RT_MAX_DIMS]; /* batch shape, A's and B's matrix strides */
	int64_t na, nb;              /* A's and B's matrices */
};

static int qmm_shape(struct exec *x, const struct rtensor *a, const struct rtensor *b, struct qmm *q)
{
	if (a->ndim < 1 || b->ndim < 1)
		return exec_fail(x, "A and B must have rank 1 or more");
	struct rtensor ba = {0}, bb = {0}, *ts[2] = {&ba, &bb};
	ba.ndim = a->ndim > 2 ? a->ndim - 2 : 0;
	bb.ndim = b->ndim > 2 ? b->ndim - 2 : 0;
	memcpy(ba.dims, a->dims, (size_t)ba.ndim * sizeof *a->dims);
	memcpy(bb.dims, b->dims, (size_t)bb.ndim * sizeof *b->dims);
	q->m = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
	q->k = a->dims[a->ndim - 1];
	q->n = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
	int64_t kb = b->dims[b->ndim == 1 ? 0 : b->ndim - 2];
	if (kb != q->k)
		return exec_fail(x, "A's K (%lld) differs from B's (%lld)", (long long)q->k, (long long)kb);
	if (bcast_shape(x, (struct rtensor *const *)ts, 2, &q->bnd, q->bdims))
		return exec_status(x);
	ba.numel = bb.numel = 1;
	for (int i = 0; i < ba.ndim; i++)
		ba.numel *= ba.dims[i];
	for (int i = 0; i < bb.ndim; i++)
		bb.numel *= bb.dims[i];
	q->na = ba.numel, q->nb = bb.numel;
	bcast_strides(&ba, q->bnd, q->bdims, q->sa);
	bcast_strides(&bb, q->bnd, q->bdims, q->sb);
	q->batches = 1;
	q->nd = 0;
	for (int i = 0; i < q->bnd; i++)
		q->batches *= q->dims[q->nd++] = q->bdims[i];
	if (a->ndim > 1)
		q->dims[q->nd++] = q->m;
	if (b->ndim > 1)
		q->dims[q->nd++] = q->n;
	return 0;
}

/* Which of a row (col 0) or column (col 1) parameter's values goes with row/column i of matrix j */
static int qmm_param_ok(struct exec *x, const struct qmm *q, const struct rtensor *p, int col, const char *what)
{
	int64_t per = col ? q->n : q->m, mats = col ? q->nb : q->na;
	if (p && p->numel != 1 && p->numel != per && p->numel != per * mats)
		return exec_fail(x, "%s must have 1, %lld or %lld elements, not %lld", what, (long long)per,
				 (long long)(per * mats), (long long)p->numel);
	return 0;
}

static inline double qmm_param(const struct rtensor *p, int64_t per, int64_t mat, int64_t i)
{
	if (!p)
		return 0;
	return rt_get(p, p->numel == 1 ? 0 : p->numel == per ? i : mat * per + i);
}

/* o[i] = t's elements [at, at + n) less the zero point z (zc: one per element, else z), in float64:
 * the exact differences (t uint8 or int8) */
static inline __attribute__((always_inline)) void w8_u(const uint8_t *restrict p, double *restrict o, int64_t n,
							  double z, const double *restrict zc)
{
	for (int64_t i = 0; i < n; i++)
		o[i] = (double)p[i] - (zc ? zc[i] : z);
}

static inline __attribute__((always_inline)) void w8_s(const int8_t *restrict p, double *restrict o, int64_t n,
							  double z, const double *restrict zc)
{
	for (int64_t i = 0; i < n; i++)
		o[i] = (double)p[i] - (zc ? zc[i] : z);
}

VM_CLONES static void widen8(const struct rtensor *t, int64_t at, int64_t n, double z, const double *zc, double *o)
{
	if (t->dtype == DT_UINT8)
		w8_u((const uint8_t *)t->data + at, o, n, z, zc);
	else
		w8_s((const int8_t *)t->data + at, o, n, z, zc);
}

/* A zero point as the scalar loop took it: its value truncated to an integer */
static inline double zp_value(const struct rtensor *p, int64_t per, int64_t mat, int64_t i)
{
	return (double)(int64_t)qmm_param(p, per, mat, i);
}

/* C (m, n) = A (m, k) B (k, n), float64 row-major: zeros when k is 0 */
static void dgemm_nn(int64_t m, int64_t n, int64_t k, const double *a, const double *b, double *c)
{
	if (!m || !n)
		return;
	if (!k) {
		memset(c, 0, (size_t)(m * n) * sizeof *c);
		return;
	}
	blas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a, (int)k, b, (int)n, 0.0, c,
		   (int)n);
}

static int fits_int(struct exec *x, int64_t a, int64_t b, int64_t c)
{
	if (a > INT_MAX || b > INT_MAX || c > INT_MAX)
		return exec_fail(x, "a product of %lld x %lld x %lld is too large (each at most %d)", (long long)a,
				 (long long)b, (long long)c, INT_MAX);
	return 0;
}

/* acc (batches, M, N) = sum_k (a - za)(b - zb), exact (see the top): A's na matrices and B's nb
 * widened once less their zero points, then one blas_dgemm per output matrix. */
static int qmm_acc(struct exec *x, const struct qmm *q, const struct rtensor *a, const struct rtensor *za,
		   const struct rtensor *b, const struct rtensor *zb, double *acc)
{
	if (fits_int(x, q->m, q->n, q->k))
		return exec_status(x);
	size_t bytes = (size_t)(q->na * q->m * q->k + q->nb * q->k * q->n + q->n) * sizeof(double);
	double *fa = exec_scratch_raw(x, bytes ? bytes : 1);
	if (!fa)
		return exec_status(x);
	double *fb = fa + q->na * q->m * q->k, *zc = fb + q->nb * q->k * q->n;
	for (int64_t t = 0; t < q->na; t++)
		for (int64_t i = 0; i < q->m; i++)
			widen8(a, (t * q->m + i) * q->k, q->k, zp_value(za, q->m, t, i), NULL, fa + (t * q->m + i) * q->k);
	for (int64_t t = 0; t < q->nb; t++) {
		for (int64_t j = 0; j < q->n; j++)
			zc[j] = zp_value(zb, q->n, t, j);
		for (int64_t l = 0; l < q->k; l++)
			widen8(b, (t * q->k + l) * q->n, q->n, 0, zc, fb + (t * q->k + l) * q->n);
	}
	int64_t idx[RT_MAX_DIMS] = {0};
	for (int64_t t = 0; t < q->batches; t++) {
		int64_t ia = 0, ib = 0;
		for (int i = 0; i < q->bnd; i++)
			ia += idx[i] * q->sa[i], ib += idx[i] * q->sb[i];
		dgemm_nn(q->m, q->n, q->k, fa + ia * q->m * q->k, fb + ib * q->k * q->n, acc + t * q->m * q->n);
		for (int i = q->bnd - 1; i >= 0 && ++idx[i] == q->bdims[i]; i--)
			idx[i] = 0;
	}
	exec_scratch_free(x, fa, bytes ? bytes : 1);
	return 0;
}

/* y = the exact integer sums acc, as int32 (wrapped, as the int64 sums were stored) */
static void acc_to_int32(const double *acc, int32_t *y, int64_t n)
{
	for (int64_t e = 0; e < n; e++)
		y[e] = (int32_t)(int64_t)acc[e];
}

/* The requantisation of n exact sums into y (an 8/16-bit dtype): y[j] = saturate(round((acc[j] +
 * add) (ra cb[j]) / ys) + zy), cb NULL: c for every j; in float32 as the top says, NaN stored as 0
 * (rt_set's rule). */
struct requant {
	float ys, zy, lo, hi;
	int dt;
	size_t es;
};

#define RQ_ROW(DT)                                                                                             \
	for (int64_t j = 0; j < n; j++) {                                                                      \
		float mult = ra * (cb ? cb[j] : c) / r->ys;                                                    \
		float v = nearbyintf((float)(acc[j] + add) * mult) + r->zy;                                    \
		v = v < r->lo ? r->lo : v > r->hi ? r->hi : v;                                                 \
		((DT *)y)[j] = v != v ? 0 : (DT)v;                                                             \
	}                                                                                                      \
	break

VM_CLONES static void requant_row(const struct requant *r, const double *restrict acc, double add, float ra,
				  const float *restrict cb, float c, void *restrict y, int64_t n)
{
	switch (r->dt) {
	case DT_UINT8: RQ_ROW(uint8_t);
	case DT_INT8: RQ_ROW(int8_t);
	case DT_UINT16: RQ_ROW(uint16_t);
	default: RQ_ROW(int16_t);
	}
}
#undef RQ_ROW

static int want_int8(struct exec *x, const struct rtensor *t, const char *what)
{
	if (t && t->dtype != DT_UINT8 && t->dtype != DT_INT8)
		return exec_fail(x, "%s must be uint8 or int8, not %s", what, dtype_name(t->dtype));
	return 0;
}

/* MatMulInteger(A, B, a_zero_point?, b_zero_point?): int32 Y */
static int matmul_integer_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			      struct rtensor *const *out)
{
	const struct rtensor *za = n->n_in > 2 ? in[2] : NULL, *zb = n->n_in > 3 ? in[3] : NULL;
	struct qmm q;
	if (want_int8(x, in[0], "A") || want_int8(x, in[1], "B") || want_int8(x, za, "a_zero_point") ||
	    want_int8(x, zb, "b_zero_point") || qmm_shape(x, in[0], in[1], &q) ||
	    qmm_param_ok(x, &q, za, 0, "a_zero_point") || qmm_param_ok(x, &q, zb, 1, "b_zero_point"))
		return exec_status(x);
	int32_t *y = exec_alloc(x, out[0], DT_INT32, q.nd, q.dims);
	if (!y)
		return exec_status(x);
	size_t ab = (size_t)out[0]->numel * sizeof(double) + 1;
	double *acc = exec_scratch_raw(x, ab);
	if (!acc)
		return exec_status(x);
	if (!qmm_acc(x, &q, in[0], za, in[1], zb, acc))
		acc_to_int32(acc, y, out[0]->numel);
	exec_scratch_free(x, acc, ab);
	return exec_status(x);
}

/* QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point): Y of
 * y_zero_point's type */
static int qlinear_matmul_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			      struct rtensor *const *out)
{
	(void)n;
	const struct rtensor *a = in[0], *as = in[1], *za = in[2], *b = in[3], *bs = in[4], *zb = in[5];
	const struct rtensor *ys = in[6], *zy = in[7];
	struct qmm q;
	double lo = 0, hi = 0;
	if (want_int8(x, a, "a") || want_int8(x, b, "b") || qmm_shape(x, a, b, &q) ||
	    qmm_param_ok(x, &q, as, 0, "a_scale") || qmm_param_ok(x, &q, za, 0, "a_zero_point") ||
	    qmm_param_ok(x, &q, bs, 1, "b_scale") || qmm_param_ok(x, &q, zb, 1, "b_zero_point") ||
	    qrange(x, zy->dtype, &lo, &hi))
		return exec_status(x);
	if (ys->numel != 1 || zy->numel != 1)
		return exec_fail(x, "y_scale and y_zero_point must have one element");
	void *y = exec_alloc(x, out[0], zy->dtype, q.nd, q.dims);
	if (!y)
		return exec_status(x);
	size_t ab = (size_t)out[0]->numel * sizeof(double) + 1;
	double *acc = exec_scratch_raw(x, ab);
	if (!acc)
		return exec_status(x);
	if (qmm_acc(x, &q, a, za, b, zb, acc)) {
		exec_scratch_free(x, acc, ab);
		return exec_status(x);
	}
	struct requant rq = {(float)rt_get(ys, 0), (float)rt_get(zy, 0), (float)lo, (float)hi, zy->dtype,
			     dtype_size(zy->dtype)};
	size_t fbb = (size_t)q.n * sizeof(float) + 1;
	float *fb = exec_scratch_raw(x, fbb); /* B's scales of the matrix at hand */
	if (!fb) {
		exec_scratch_free(x, acc, ab);
		return exec_status(x);
	}
	int64_t idx[RT_MAX_DIMS] = {0};
	for (int64_t t = 0; t < q.batches; t++) {
		int64_t ia = 0, ib = 0;
		for (int i = 0; i < q.bnd; i++)
			ia += idx[i] * q.sa[i], ib += idx[i] * q.sb[i];
		for (int64_t j = 0; j < q.n; j++)
			fb[j] = (float)qmm_param(bs, q.n, ib, j);
		for (int64_t i = 0; i < q.m; i++) {
			int64_t e = (t * q.m + i) * q.n;
			requant_row(&rq, acc + e, 0, (float)qmm_param(as, q.m, ia, i), fb, 0, (char *)y + e * (int64_t)rq.es, q.n);
		}
		for (int i = q.bnd - 1; i >= 0 && ++idx[i] == q.bdims[i]; i--)
			idx[i] = 0;
	}
	exec_scratch_free(x, fb, fbb);
	exec_scratch_free(x, acc, ab);
	return 0;
}

static void qmm_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		     uint64_t *bytes)
{
	(void)bytes;
	int ib = n->op == OP_QLINEAR_MATMUL ? 3 : 1;
	*flops = 2 * (uint64_t)out[0]->numel * (uint64_t)in[ib]->dims[in[ib]->ndim == 1 ? 0 : in[ib]->ndim - 2];
}

/* ---- integer convolutions ---- */

/* col (cg kh kw, oh ow) = the patches of img (cg, h, w), float64, 0 outside the image (where the
 * scalar loop added nothing) */
static void qconv_im2col(const double *img, const struct conv_geom *g, int64_t cg, double *col)
{
	int64_t np = g->oh * g->ow;
	for (int64_t c = 0; c < cg; c++)
		for (int64_t ky = 0; ky < g->kh; ky++)
			for (int64_t kx = 0; kx < g->kw; kx++) {
				double *row = col + ((c * g->kh + ky) * g->kw + kx) * np;
				int64_t off = kx * g->dw - g->pl, lo, hi;
				conv_inside(off, g->sw, g->w, g->ow, &lo, &hi);
				for (int64_t oy = 0; oy < g->oh; oy++) {
					double *r = row + oy * g->ow;
					int64_t iy = oy * g->sh - g->pt + ky * g->dh;
					if (iy < 0 || iy >= g->h) {
						memset(r, 0, (size_t)g->ow * sizeof *r);
						continue;
					}
					const double *src = img + (c * g->h + iy) * g->w + off;
					memset(r, 0, (size_t)lo * sizeof *r);
					for (int64_t ox = lo; ox < hi; ox++)
						r[ox] = src[ox * g->sw];
					memset(r + hi, 0, (size_t)(g->ow - hi) * sizeof *r);
				}
			}
}

/* acc (N, M, oh, ow) = Conv(x - xz, w - wz[m]) over g, exact (see the top): w less its zero points
 * in float64 once, then per image and group its channels less xz, im2col, and one blas_dgemm of
 * (M/group, cg kh kw) by (cg kh kw, oh ow). wz one value or one per output channel. */
static int qconv_acc(struct exec *x, const struct conv_geom *g, const struct rtensor *a, const struct rtensor *xz,
		     const struct rtensor *w, const struct rtensor *wz, double *acc)
{
	int64_t cg = g->c / g->group, mg = g->m / g->group, kk = cg * g->kh * g->kw, np = g->oh * g->ow;
	if (fits_int(x, mg, np, kk))
		return exec_status(x);
	size_t bytes = (size_t)(g->m * kk + cg * g->h * g->w + kk * np) * sizeof(double) + 1;
	double *fw = exec_scratch_raw(x, bytes);
	if (!fw)
		return exec_status(x);
	double *img = fw + g->m * kk, *col = img + cg * g->h * g->w;
	double xzv = xz ? (double)rt_get_i(xz, 0) : 0;
	for (int64_t m = 0; m < g->m; m++)
		widen8(w, m * kk, kk, wz ? (double)rt_get_i(wz, wz->numel == 1 ? 0 : m) : 0, NULL, fw + m * kk);
	for (int64_t i = 0; i < g->n; i++)
		for (int64_t gi = 0; gi < g->group; gi++) {
			widen8(a, (i * g->c + gi * cg) * g->h * g->w, cg * g->h * g->w, xzv, NULL, img);
			qconv_im2col(img, g, cg, col);
			dgemm_nn(mg, np, kk, fw + gi * mg * kk, col, acc + (i * g->m + gi * mg) * np);
		}
	exec_scratch_free(x, fw, bytes);
	return 0;
}

/* The geometry of a convolution of x (uint8/int8) by w (input k): Conv's attributes, checked by
 * conv_geometry on float stand-ins of the two shapes (no bias). Y's shape in dims, rank *nd. */
static int qconv_geometry(struct exec *x, const struct node *n, struct rtensor *const *in, int k,
			  struct conv_geom *g, int64_t *dims, int *nd)
{
	if (want_int8(x, in[0], "x") || want_int8(x, in[k], "w"))
		return exec_status(x);
	struct rtensor a = *in[0], w = *in[k];
	a.dtype = w.dtype = DT_FLOAT;
	struct rtensor *ins[3] = {&a, &w, NULL};
	if (conv_geometry(x, n, ins, CONV_FORWARD, g))
		return exec_status(x);
	*nd = in[0]->ndim;
	dims[0] = g->n, dims[1] = g->m;
	if (g->one_d)
		dims[2] = g->ow;
	else
		dims[2] = g->oh, dims[3] = g->ow;
	return 0;
}

static int wz_ok(struct exec *x, const struct conv_geom *g, const struct rtensor *xz, const struct rtensor *wz)
{
	if (xz && xz->numel != 1)
		return exec_fail(x, "the input's zero point must have one element");
	if (wz && wz->numel != 1 && wz->numel != g->m)
		return exec_fail(x, "the weight's zero point must have 1 or %lld elements", (long long)g->m);
	return 0;
}

/* ConvInteger(x, w, x_zero_point?, w_zero_point?): int32 Y */
static int conv_integer_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			    struct rtensor *const *out)
{
	const struct rtensor *xz = n->n_in > 2 ? in[2] : NULL, *wz = n->n_in > 3 ? in[3] : NULL;
	struct conv_geom g;
	int64_t dims[4];
	int nd = 0;
	if (qconv_geometry(x, n, in, 1, &g, dims, &nd) || wz_ok(x, &g, xz, wz))
		return exec_status(x);
	int32_t *y = exec_alloc(x, out[0], DT_INT32, nd, dims);
	size_t ab = y ? (size_t)out[0]->numel * sizeof(double) + 1 : 0;
	double *acc = y ? exec_scratch_raw(x, ab) : NULL;
	if (!acc)
		return exec_status(x);
	if (!qconv_acc(x, &g, in[0], xz, in[1], wz, acc))
		acc_to_int32(acc, y, out[0]->numel);
	exec_scratch_free(x, acc, ab);
	return exec_status(x);
}

/* QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B?):
 * B int32 (M), added to the sum before requantizing; Y of y_zero_point's type */
static int qlinear_conv_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			    struct rtensor *const *out)
{
	const struct rtensor *xs = in[1], *xz = in[2], *ws = in[4], *wz = in[5], *ys = in[6], *zy = in[7];
	const struct rtensor *bias = n->n_in > 8 ? in[8] : NULL;
	struct conv_geom g;
	int64_t dims[4];
	int nd = 0;
	double lo = 0, hi = 0;
	if (qconv_geometry(x, n, in, 3, &g, dims, &nd) || wz_ok(x, &g, xz, wz) || qrange(x, zy->dtype, &lo, &hi))
		return exec_status(x);
	if (xs->numel != 1 || ys->numel != 1 || zy->numel != 1 || (ws->numel != 1 && ws->numel != g.m))
		return exec_fail(x, "x_scale, y_scale and y_zero_point must have one element, w_scale 1 or %lld",
				 (long long)g.m);
	if (bias && (bias->dtype != DT_INT32 || bias->numel != g.m))
		return exec_fail(x, "B must be int32 with %lld elements", (long long)g.m);
	void *y = exec_alloc(x, out[0], zy->dtype, nd, dims);
	size_t ab = y ? (size_t)out[0]->numel * sizeof(double) + 1 : 0;
	double *acc = y ? exec_scratch_raw(x, ab) : NULL;
	if (!acc)
		return exec_status(x);
	if (qconv_acc(x, &g, in[0], xz, in[3], wz, acc)) {
		exec_scratch_free(x, acc, ab);
		return exec_status(x);
	}
	int64_t plane = g.oh * g.ow;
	struct requant rq = {(float)rt_get(ys, 0), (float)rt_get(zy, 0), (float)lo, (float)hi, zy->dtype,
			     dtype_size(zy->dtype)};
	float fxs = (float)rt_get(xs, 0);
	for (int64_t r = 0; r < g.n * g.m; r++) {
		int64_t m = r % g.m;
		/* the sum and the bias: integers below 2^53, exact in double */
		requant_row(&rq, acc + r * plane, bias ? (double)rt_get_i(bias, m) : 0, fxs,
			    NULL, (float)rt_get(ws, ws->numel == 1 ? 0 : m), (char *)y + r * plane * (int64_t)rq.es, plane);
	}
	exec_scratch_free(x, acc, ab);
	return 0;
}

/* 2 operations per multiply-add: N M oh ow (C/group) kh kw */
static void qconv_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		       uint64_t *bytes)
{
	(void)bytes;
	const struct rtensor *w = in[n->op == OP_QLINEAR_CONV ? 3 : 1];
	uint64_t k = 1;
	for (int i = 1; i < w->ndim; i++)
		k *= (uint64_t)w->dims[i];
	*flops = 2 * (uint64_t)out[0]->numel * k;
}

const struct op_impl op_quantize_linear = {.run = quantize_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_dequantize_linear = {.run = dequantize_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_dynamic_quantize_linear = {.run = dynamic_quantize_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_matmul_integer = {.run = matmul_integer_run, .cost = qmm_cost, .recompute = RC_EXPENSIVE,
					  .nodiff = ~0u};
const struct op_impl op_qlinear_matmul = {.run = qlinear_matmul_run, .cost = qmm_cost, .recompute = RC_EXPENSIVE,
					  .nodiff = ~0u};
const struct op_impl op_conv_integer = {.run = conv_integer_run, .cost = qconv_cost, .recompute = RC_EXPENSIVE,
					.nodiff = ~0u};
const struct op_impl op_qlinear_conv = {.run = qlinear_conv_run, .cost = qconv_cost, .recompute = RC_EXPENSIVE,
					.nodiff = ~0u};
