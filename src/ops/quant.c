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
 * (to nearest, ties to even), then clamped to the output type. Sums of integer products are exact
 * (int64, stored as int32). DynamicQuantizeLinear of an all-zero x takes scale 1, as onnxruntime
 * does, where the formula would divide 0 by 0.
 *
 * Outputs are uint8, int8, uint16 or int16; float8 and 4-bit types are refused. None of these ops is
 * differentiable (no gradient rule, every input nodiff): `train` through them refuses as for any op
 * without OPF_DIFF. The matrix products broadcast their batch dimensions as MatMul; the
 * convolutions take Conv's attributes and 1-D and 2-D windows (conv_geometry). */
#include "conv.h"
#include "kernel.h"

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
	for (int64_t e = 0; e < a->numel; e++) {
		int64_t k = qmap_at(&m, e), q = rt_get_i(a, e) - (zp ? rt_get_i(zp, k) : 0);
		rt_set(out[0], e, (double)((float)q * (float)rt_get(s, k)));
	}
	return 0;
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
	const float *p = a->data;
	float lo = 0, hi = 0;
	for (int64_t e = 0; e < a->numel; e++) {
		lo = p[e] < lo ? p[e] : lo;
		hi = p[e] > hi ? p[e] : hi;
	}
	*s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
	double zp = saturate(nearbyintf(saturate(0.0f - lo / *s, 0, 255)), 0, 255);
	if (z)
		*z = (uint8_t)zp;
	for (int64_t e = 0; e < a->numel; e++)
		((uint8_t *)y)[e] = (uint8_t)quantize1(p[e], *s, zp, 0, 255);
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

/* acc (batches, M, N) = sum_k (a - za)(b - zb), exact */
static void qmm_acc(const struct qmm *q, const struct rtensor *a, const struct rtensor *za, const struct rtensor *b,
		    const struct rtensor *zb, int64_t *acc)
{
	int64_t idx[RT_MAX_DIMS] = {0};
	for (int64_t t = 0; t < q->batches; t++) {
		int64_t ia = 0, ib = 0;
		for (int i = 0; i < q->bnd; i++)
			ia += idx[i] * q->sa[i], ib += idx[i] * q->sb[i];
		for (int64_t i = 0; i < q->m; i++) {
			int64_t zai = (int64_t)qmm_param(za, q->m, ia, i);
			for (int64_t j = 0; j < q->n; j++) {
				int64_t zbj = (int64_t)qmm_param(zb, q->n, ib, j), s = 0;
				for (int64_t l = 0; l < q->k; l++)
					s += (rt_get_i(a, (ia * q->m + i) * q->k + l) - zai) *
					     (rt_get_i(b, (ib * q->k + l) * q->n + j) - zbj);
				acc[(t * q->m + i) * q->n + j] = s;
			}
		}
		for (int i = q->bnd - 1; i >= 0 && ++idx[i] == q->bdims[i]; i--)
			idx[i] = 0;
	}
}

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
	int64_t *acc = exec_scratch_raw(x, (size_t)out[0]->numel * sizeof *acc);
	if (!acc)
		return exec_status(x);
	qmm_acc(&q, in[0], za, in[1], zb, acc);
	for (int64_t e = 0; e < out[0]->numel; e++)
		y[e] = (int32_t)acc[e];
	exec_scratch_free(x, acc, (size_t)out[0]->numel * sizeof *acc);
	return 0;
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
	int64_t *acc = exec_scratch_raw(x, (size_t)out[0]->numel * sizeof *acc);
	if (!acc)
		return exec_status(x);
	qmm_acc(&q, a, za, b, zb, acc);
	float fys = (float)rt_get(ys, 0);
	double yzp = rt_get(zy, 0);
	int64_t idx[RT_MAX_DIMS] = {0};
	for (int64_t t = 0; t < q.batches; t++) {
		int64_t ia = 0, ib = 0;
		for (int i = 0; i < q.bnd; i++)
			ia += idx[i] * q.sa[i], ib += idx[i] * q.sb[i];
		for (int64_t i = 0; i < q.m; i++)
			for (int64_t j = 0; j < q.n; j++) {
				float mult = (float)qmm_param(as, q.m, ia, i) * (float)qmm_param(bs, q.n, ib, j) / fys;
				int64_t e = (t * q.m + i) * q.n + j;
				rt_set(out[0], e, saturate(nearbyintf((float)acc[e] * mult) + (float)yzp, lo, hi));
			}
		for (int i = q.bnd - 1; i >= 0 && ++idx[i] == q.bdims[i]; i--)
			idx[i] = 0;
	}
	exec_scratch_free(x, acc, (size_t)out[0]->numel * sizeof *acc);
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

/* acc (N, M, oh, ow) = Conv(x - xz, w - wz[m]) over g, exact; wz one value or one per output channel */
static void qconv_acc(const struct conv_geom *g, const struct rtensor *a, const struct rtensor *xz,
		      const struct rtensor *w, const struct rtensor *wz, int64_t *acc)
{
	int64_t cg = g->c / g->group, mg = g->m / g->group;
	int64_t xzv = xz ? rt_get_i(xz, 0) : 0;
	for (int64_t i = 0; i < g->n; i++)
		for (int64_t m = 0; m < g->m; m++) {
			int64_t wzv = wz ? rt_get_i(wz, wz->numel == 1 ? 0 : m) : 0, c0 = m / mg * cg;
			for (int64_t oy = 0; oy < g->oh; oy++)
				for (int64_t ox = 0; ox < g->ow; ox++) {
					int64_t s = 0;
					for (int64_t c = 0; c < cg; c++)
						for (int64_t ky = 0; ky < g->kh; ky++) {
							int64_t iy = oy * g->sh - g->pt + ky * g->dh;
							for (int64_t kx = 0; kx < g->kw && iy >= 0 && iy < g->h; kx++) {
								int64_t ix = ox * g->sw - g->pl + kx * g->dw;
								if (ix < 0 || ix >= g->w)
									continue;
								int64_t xv = rt_get_i(a, ((i * g->c + c0 + c) * g->h + iy) * g->w + ix);
								int64_t wv = rt_get_i(w, ((m * cg + c) * g->kh + ky) * g->kw + kx);
								s += (xv - xzv) * (wv - wzv);
							}
						}
					acc[((i * g->m + m) * g->oh + oy) * g->ow + ox] = s;
				}
		}
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
	int64_t *acc = y ? exec_scratch_raw(x, (size_t)out[0]->numel * sizeof *acc) : NULL;
	if (!acc)
		return exec_status(x);
	qconv_acc(&g, in[0], xz, in[1], wz, acc);
	for (int64_t e = 0; e < out[0]->numel; e++)
		y[e] = (int32_t)acc[e];
	exec_scratch_free(x, acc, (size_t)out[0]->numel * sizeof *acc);
	return 0;
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
	int64_t *acc = y ? exec_scratch_raw(x, (size_t)out[0]->numel * sizeof *acc) : NULL;
	if (!acc)
		return exec_status(x);
	qconv_acc(&g, in[0], xz, in[3], wz, acc);
	int64_t plane = g.oh * g.ow;
	float fxs = (float)rt_get(xs, 0), fys = (float)rt_get(ys, 0), yzp = (float)rt_get(zy, 0);
	for (int64_t e = 0; e < out[0]->numel; e++) {
		int64_t m = e / plane % g.m;
		float mult = fxs * (float)rt_get(ws, ws->numel == 1 ? 0 : m) / fys;
		int64_t v = acc[e] + (bias ? rt_get_i(bias, m) : 0);
		rt_set(out[0], e, saturate(nearbyintf((float)v * mult) + yzp, lo, hi));
	}
	exec_scratch_free(x, acc, (size_t)out[0]->numel * sizeof *acc);
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
