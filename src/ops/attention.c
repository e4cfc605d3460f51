/* attention.c - the transformer ops of opset 23: Attention and RotaryEmbedding.
 *
 * Attention (ONNX opset 23): Q (B, Hq, L, D), K (B, Hkv, T, D), V (B, Hkv, T, Dv), or the same
 * 3-D, (B, L, Hq D) with q_num_heads and kv_num_heads given; grouped-query when Hkv < Hq (query head
 * h reads key/value head h / (Hq / Hkv)). Per head,
 *   S = Q K^T scale (scale 1/sqrt(D) by default),  S = softcap tanh(S / softcap) when softcap > 0,
 *   S += attn_mask (float: added; bool: false is -inf) + causal (-inf above the diagonal, aligned at
 *   the top left, j > i),  Y = softmax(S) V.
 * The softcap comes before the masks, as onnxruntime 1.30 computes it (a masked -inf stays -inf).
 * past_key/past_value and the present/qk outputs are refused: a training graph has no cache.
 * The kernel computes float32 a head a time over the threads, as blocks of query rows, two GEMMs
 * each with the softmax between (its sums in double; under is_causal only the keys up to the
 * block's last row), other types each row in double. The gradient recomputes softmax(S) in standard
 * ops (MatMul, Softmax, ...) from Q, K, V: the backward pass keeps Q, K and V, never S.
 *
 * RotaryEmbedding (opset 23): X (B, H, S, D) or (B, S, H D) with num_heads; the first
 * rotary_embedding_dim (0: D) elements of each head rotated in pairs, (x1, x2) -> (x1 cos - x2 sin,
 * x2 cos + x1 sin), pairs being (j, j + rd/2) or, interleaved, (2j, 2j + 1); cos and sin from
 * cos_cache[position_ids[b, s]] (2-D caches) or cos_cache[b, s] (3-D, no position_ids). The
 * gradient is the inverse rotation: RotaryEmbedding of dY with -sin. */
#include "../autodiff/ad.h"
#include "../util/pool.h"
#include "../util/xalloc.h"
#include "blas.h"
#include "kernel.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

/* A 4-D (B, H, S, D) view of a 3-D (B, S, H D) or 4-D tensor: the offset of (b, h, s, d). */
struct heads {
	const struct rtensor *t;
	int64_t B, H, S, D;
	int three;
};

static int heads_of(struct exec *x, const struct rtensor *t, int64_t h, const char *what, struct heads *v)
{
	if (t->ndim != 3 && t->ndim != 4)
		return exec_fail(x, "%s must be 3-D or 4-D, not of rank %d", what, t->ndim);
	v->t = t;
	v->three = t->ndim == 3;
	v->B = t->dims[0];
	if (v->three) {
		if (h <= 0 || t->dims[2] % h)
			return exec_fail(x, "3-D %s needs a head count (attribute) that divides its %lld features", what,
					 (long long)t->dims[2]);
		v->H = h, v->S = t->dims[1], v->D = t->dims[2] / h;
	} else {
		v->H = t->dims[1], v->S = t->dims[2], v->D = t->dims[3];
	}
	return 0;
}

static int64_t heads_at(const struct heads *v, int64_t b, int64_t h, int64_t s, int64_t d)
{
	return v->three ? (b * v->S + s) * v->H * v->D + h * v->D + d : ((b * v->H + h) * v->S + s) * v->D + d;
}

/* The element of mask (numpy-broadcast to (B, H, L, T)) at (b, h, i, j). */
static double mask_at(const struct rtensor *m, int64_t b, int64_t h, int64_t i, int64_t j)
{
	int64_t idx[4] = {b, h, i, j}, off = 0, st = 1;
	for (int k = m->ndim - 1, d = 3; k >= 0; k--, d--) {
		off += (m->dims[k] == 1 ? 0 : idx[d]) * st;
		st *= m->dims[k];
	}
	return rt_get(m, off);
}

/* What a float32 run needs beside the views: the attributes, the mask, the blocks of query rows and
 * the threads' scratches (rows x T for S, D x T for K_h turned). */
struct attn {
	const struct heads *q, *k, *v, *y;
	const struct rtensor *mask;
	double scale, cap;
	int causal, bmask;
	int64_t rows;         /* query rows a block */
	float *s;             /* pool_threads() scratches of (rows + D) x T */
};

/* Query rows a float32 Attention computes at a time: its scratch is (ATTN_ROWS + D) x T floats a
 * thread (576 KiB at T 1024, D 64), a temporary no plan counts, against L x T for a whole head.
 * Under is_causal, with T up to ATTN_CAUSAL_KEYS, blocks of ATTN_CAUSAL_ROWS: the rows i0.. read
 * only the keys before the block's end, so the products skip the masked triangle but for half a
 * block's square on the diagonal (at L = T = 128, 56% of the full products' work, 100% in blocks
 * of 128). Their sums are main's (blocks of 128), bit for bit, at (T, D) = (128, 64) and
 * (256, 128). Beyond, smaller blocks change the bits of 11-38% of the outputs (by an ulp: OpenBLAS's
 * packed kernels, which then take the products, cut k = T where the blocks decide) and measured no
 * faster, so the blocks stay of 128 rows there. Best of 3 or 10, 1 thread, causal, ms:
 *   rows                           16     32     64    128
 *   BERT 8 x 6 heads, 128 x 64     1.70   1.93   1.98   2.47   (not causal: the same, 2.7)
 *   LLaMA 32 / 8 heads, 256 x 128  37     36.5   34.7   42
 *   LLaMA 32 / 8 heads, 512 x 128         28-43         31-79
 *   LLaMA 32 / 8 heads, 1024 x 128 624    545    472    483 */
#define ATTN_ROWS 128
#define ATTN_CAUSAL_ROWS 16
#define ATTN_CAUSAL_KEYS 256

/* r[t] += the mask's row (b, h, i) for t < n, as the definition adds it (float: in float32; bool:
 * 0 where true, -inf where false), the row read with typed loops when the mask's last dimension is
 * contiguous or broadcast. */
static inline void add_mask(const struct rtensor *m, int bmask, int64_t b, int64_t h, int64_t i, float *restrict r,
			    int64_t n)
{
	int64_t idx[3] = {b, h, i}, off = 0, st = 1;
	for (int k = m->ndim - 2, d = 2; k >= 0; k--, d--) {
		st *= m->dims[k + 1];
		off += (m->dims[k] == 1 ? 0 : idx[d]) * st;
	}
	int64_t js = m->ndim && m->dims[m->ndim - 1] != 1; /* j's stride: 0 where broadcast */
	if (m->dtype == DT_FLOAT) {
		const float *restrict p = (const float *)m->data + off;
		if (js)
			for (int64_t t = 0; t < n; t++)
				r[t] += p[t];
		else
			for (int64_t t = 0; t < n; t++)
				r[t] += p[0];
	} else if (bmask) {
		const uint8_t *restrict p = (const uint8_t *)m->data + off;
		for (int64_t t = 0; t < n; t++)
			r[t] += p[t * js] ? 0.0f : -INFINITY;
	} else {
		for (int64_t t = 0; t < n; t++)
			r[t] += (float)mask_at(m, b, h, i, t);
	}
}

/* A row of n scores softmaxed in place: its max by run_extreme (in vectors; a NaN, which makes the
 * row NaN, as the walk d > m does), the exponentials by vm_expf, their sum in run_sum's lanes
 * (double), all NaN when every score is -inf. */
static inline void softmax_row(float *restrict r, int64_t n)
{
	struct rtensor row = {.dtype = DT_FLOAT, .data = r};
	float m = (float)run_extreme(&row, 0, n, 0);
	int64_t t;
	if (m == -INFINITY) {
		for (t = 0; t < n; t++)
			r[t] = NAN;
		return;
	}
	for (t = 0; t < n; t++)
		r[t] = vm_expf(r[t] - m);
	float iz = (float)(1 / run_sum(&row, 0, n, 0, 0));
	for (t = 0; t < n; t++)
		r[t] *= iz;
}

/* float32, one block of query rows i0.. of one (b, h): S = scale Q_h K_h^T and Y_h = P V_h as GEMMs
 * over the heads' strided rows (a 3-D tensor's head is a matrix of leading dimension H D), the
 * softcap and masks per row of S in between, then softmax_row over the keys the row reads (under
 * is_causal the first i + 1, the rest of the block's keys zero). s holds rows x T; kt, where not
 * NULL, K_h turned (D x T), which the first product reads as it is. */
VM_CLONES static void attention_block(const struct attn *j, int64_t b, int64_t h, int64_t i0, float *s, const float *kt)
{
	const struct heads *q = j->q, *k = j->k, *v = j->v, *y = j->y;
	int64_t L = q->S, T = k->S, grp = q->H / k->H;
	int lq = (int)(q->three ? q->H * q->D : q->D), lk = (int)(k->three ? k->H * k->D : k->D);
	int lv = (int)(v->three ? v->H * v->D : v->D), ly = (int)(y->three ? y->H * y->D : y->D);
	int64_t rows = L - i0 < j->rows ? L - i0 : j->rows;
	int64_t tk = j->causal && i0 + rows < T ? i0 + rows : T; /* the keys any row reads */
	const float *qp = (const float *)q->t->data + heads_at(q, b, h, i0, 0);
	const float *kp = (const float *)k->t->data + heads_at(k, b, h / grp, 0, 0);
	const float *vp = (const float *)v->t->data + heads_at(v, b, h / grp, 0, 0);
	float *yp = (float *)y->t->data + heads_at(y, b, h, i0, 0);
	if (kt)
		blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)tk, (int)q->D, (float)j->scale, qp, lq, kt,
			   (int)T, 0, s, (int)tk);
	else
		blas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)tk, (int)q->D, (float)j->scale, qp, lq, kp,
			   lk, 0, s, (int)tk);
	for (int64_t r0 = 0; r0 < rows; r0++) {
		int64_t i = i0 + r0, end = j->causal && i + 1 < tk ? i + 1 : tk; /* -inf after: exp 0 */
		float *r = s + r0 * tk;
		if (j->cap > 0)
			for (int64_t t = 0; t < end; t++)
				r[t] = (float)(j->cap * tanh(r[t] / j->cap));
		if (j->mask)
			add_mask(j->mask, j->bmask, b, h, i, r, end);
		softmax_row(r, end);
		memset(r + end, 0, (size_t)(tk - end) * sizeof *r);
	}
	blas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)v->D, (int)tk, 1, s, (int)tk, vp, lv, 0, yp, ly);
}

/* Heads [lo, hi) of all (b, h) in order, block after block: a piece of kernel_for, each thread on
 * its own scratch. With 4-D K, K_h is turned once for the head's blocks (else each block's product
 * would turn the keys it reads again). blas_sgemm cuts a block's products by their shape alone (the
 * pieces run one after another in a thread of the pool), so every element is the same sum whatever
 * --threads is; with one head, or one thread, the products run outside the pool and take it. */
static void attention_heads(void *arg, int64_t lo, int64_t hi)
{
	const struct attn *j = arg;
	const struct heads *k = j->k;
	float *s = j->s + (size_t)pool_self() * (size_t)((j->rows + k->D) * k->S), *kt = s + j->rows * k->S;
	for (int64_t it = lo; it < hi; it++) {
		int64_t b = it / j->q->H, h = it % j->q->H;
		if (!k->three)
			transpose2((const float *)k->t->data + heads_at(k, b, h / (j->q->H / k->H), 0, 0), 1, k->S, k->D,
				   sizeof *kt, kt);
		for (int64_t i0 = 0; i0 < j->q->S; i0 += j->rows)
			attention_block(j, b, h, i0, s, k->three ? NULL : kt);
	}
}

static int attention_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *mask = n->n_in > 3 && n->in[3] ? in[3] : NULL;
	if ((n->n_in > 4 && n->in[4]) || (n->n_in > 5 && n->in[5]))
		return exec_fail(x, "past_key and past_value (a key/value cache) are not supported in training");
	for (uint32_t k = 1; k < n->n_out; k++)
		if (n->out[k])
			return exec_fail(x, "output %u (present_key, present_value, qk_matmul_output) is not supported", k);
	if (want_float(x, in[0], "Q") || want_float(x, in[1], "K") || want_float(x, in[2], "V"))
		return exec_status(x);
	struct heads q = {0}, k = {0}, v = {0};
	if (heads_of(x, in[0], attr_int(n, "q_num_heads", 0), "Q", &q) ||
	    heads_of(x, in[1], attr_int(n, "kv_num_heads", 0), "K", &k) ||
	    heads_of(x, in[2], attr_int(n, "kv_num_heads", 0), "V", &v))
		return exec_status(x);
	if (q.three != k.three || q.three != v.three)
		return exec_fail(x, "Q, K and V must all be 3-D or all 4-D");
	if (k.B != q.B || v.B != q.B || k.D != q.D || v.H != k.H || v.S != k.S || !k.H || q.H % k.H)
		return exec_fail(x, "Q (%lld heads of %lld), K (%lld of %lld) and V (%lld) do not fit: batches, key and "
				 "value lengths and head sizes must agree, and K's heads divide Q's", (long long)q.H,
				 (long long)q.D, (long long)k.H, (long long)k.D, (long long)v.H);
	int64_t L = q.S, T = k.S, Dv = v.D, grp = q.H / k.H, yd[4];
	if (mask) {
		int64_t full[4] = {q.B, q.H, L, T};
		if (mask->ndim > 4)
			return exec_fail(x, "attn_mask must have rank at most 4");
		for (int i = 0; i < mask->ndim; i++)
			if (mask->dims[i] != 1 && mask->dims[i] != full[4 - mask->ndim + i])
				return exec_fail(x, "attn_mask must broadcast to (B, q_num_heads, %lld, %lld)", (long long)L,
						 (long long)T);
	}
	if (q.three)
		yd[0] = q.B, yd[1] = L, yd[2] = q.H * Dv;
	else
		yd[0] = q.B, yd[1] = q.H, yd[2] = L, yd[3] = Dv;
	if (!exec_alloc(x, out[0], in[0]->dtype, q.three ? 3 : 4, yd))
		return exec_status(x);
	struct heads y = {out[0], q.B, q.H, L, Dv, q.three};
	double scale = attr_float(n, "scale", 0), cap = attr_float(n, "softcap", 0);
	scale = scale != 0 ? scale : 1 / sqrt((double)q.D);
	int causal = attr_int(n, "is_causal", 0) != 0, bmask = mask && mask->dtype == DT_BOOL;
	if (in[0]->dtype == DT_FLOAT && in[1]->dtype == DT_FLOAT && in[2]->dtype == DT_FLOAT && T < INT32_MAX / ATTN_ROWS) {
		int64_t rows = causal && T <= ATTN_CAUSAL_KEYS ? ATTN_CAUSAL_ROWS : ATTN_ROWS;
		struct attn j = {&q, &k, &v, &y, mask, scale, cap, causal, bmask, rows, NULL};
		j.s = xmalloc((size_t)pool_threads() * (size_t)((rows + q.D) * T + 1) * sizeof *j.s);
		if (!j.s)
			return exec_fail(x, "out of memory");
		kernel_for(q.B * q.H, 1, attention_heads, &j);
		xfree(j.s);
		return 0;
	}
	double *s = xmalloc((size_t)(T + 1) * sizeof *s);
	if (!s)
		return exec_fail(x, "out of memory");
	for (int64_t b = 0; b < q.B; b++)
		for (int64_t h = 0; h < q.H; h++)
			for (int64_t i = 0; i < L; i++) {
				double m = -INFINITY, z = 0;
				for (int64_t j = 0; j < T; j++) {
					double d = 0;
					for (int64_t e = 0; e < q.D; e++)
						d += rt_get(q.t, heads_at(&q, b, h, i, e)) * rt_get(k.t, heads_at(&k, b, h / grp, j, e));
					d *= scale;
					if (cap > 0)
						d = cap * tanh(d / cap);
					if (mask)
						d += bmask ? (mask_at(mask, b, h, i, j) != 0 ? 0 : -INFINITY) : mask_at(mask, b, h, i, j);
					if (causal && j > i)
						d = -INFINITY;
					s[j] = d;
					m = fmax(m, d);
				}
				for (int64_t j = 0; j < T; j++)
					z += s[j] = exp(s[j] - m);
				for (int64_t e = 0; e < Dv; e++) {
					double acc = 0;
					for (int64_t j = 0; j < T; j++)
						acc += s[j] * rt_get(v.t, heads_at(&v, b, h / grp, j, e));
					rt_set(out[0], heads_at(&y, b, h, i, e), acc / z);
				}
			}
	xfree(s);
	return 0;
}

/* ---- Attention's gradient, in standard ops ---- */

static struct value *transpose(struct ad *a, struct value *v, int64_t p0, int64_t p1, int64_t p2, int64_t p3)
{
	int64_t perm[4] = {p0, p1, p2, p3};
	struct value *t = ad_op1(a, "Transpose", v);
	return t && !ad_set_ints(a, ad_producer(t), "perm", perm, 4) ? t : NULL;
}

/* (B, S, H D) -> (B, H, S, D); 4-D as it is. */
static struct value *to_heads(struct ad *a, struct value *v, int three, int64_t h)
{
	int64_t shape[4] = {0, 0, h, -1};
	return three ? transpose(a, ad_op2(a, "Reshape", v, ad_ints(a, shape, 4)), 0, 2, 1, 3) : v;
}

static struct value *from_heads(struct ad *a, struct value *v, int three)
{
	int64_t shape[3] = {0, 0, -1};
	return three ? ad_op2(a, "Reshape", transpose(a, v, 0, 2, 1, 3), ad_ints(a, shape, 3)) : v;
}

/* (B, Hkv, T, D) -> (B, Hkv grp, T, D), each head repeated grp times in a row; and back, summed. */
static struct value *repeat_heads(struct ad *a, struct value *v, int64_t grp, int64_t hq, int64_t d)
{
	int64_t five[5] = {0, 0, 1, -1, d}, ex[5] = {1, 1, grp, 1, 1}, four[4] = {0, hq, -1, d};
	if (grp == 1)
		return v;
	struct value *e = ad_op2(a, "Expand", ad_op2(a, "Reshape", v, ad_ints(a, five, 5)), ad_ints(a, ex, 5));
	return ad_op2(a, "Reshape", e, ad_ints(a, four, 4));
}

static struct value *sum_heads(struct ad *a, struct value *v, int64_t grp, int64_t hkv, int64_t d)
{
	int64_t five[5] = {0, hkv, grp, -1, d}, ax = 2;
	return grp == 1 ? v : ad_reduce(a, "ReduceSum", ad_op2(a, "Reshape", v, ad_ints(a, five, 5)), &ax, 1, 0);
}

/* The causal mask as a bias of S's last two dimensions (L, T): 0 where j <= i, -inf above. A constant
 * for known lengths; for symbolic ones made in the graph from Shape(S), as Where(Trilu(ones), 0,
 * -inf), so the training graph works at every length. */
static struct value *causal_bias(struct ad *a, struct value *s, int64_t L, int64_t T, int dt)
{
	if (ad_dim_symbolic(a, L) || ad_dim_symbolic(a, T)) {
		int64_t st = -2, en = INT64_MAX;
		struct value *sl[3] = {ad_op1(a, "Shape", s), ad_ints(a, &st, 1), ad_ints(a, &en, 1)};
		struct value *ones = ad_op2(a, "Add", ad_op1(a, "ConstantOfShape", ad_op(a, "Slice", sl, 3)),
					    ad_scalar(a, DT_FLOAT, 1));
		struct value *tri = ad_op1(a, "Trilu", ones);
		if (!tri || ad_set_int(a, ad_producer(tri), "upper", 0))
			return NULL;
		struct value *w[3] = {ad_cast(a, tri, DT_BOOL), ad_scalar(a, dt, 0), ad_scalar(a, dt, -INFINITY)};
		return ad_op(a, "Where", w, 3);
	}
	double *c = xcalloc((size_t)(L * T + 1), sizeof *c);
	if (!c) {
		ad_fail(a, "out of memory");
		return NULL;
	}
	for (int64_t i = 0; i < L; i++)
		for (int64_t j = i + 1; j < T; j++)
			c[i * T + j] = -INFINITY;
	int64_t cd[2] = {L, T};
	struct value *b = ad_tensor(a, dt, 2, cd, c);
	xfree(c);
	return b;
}

/* With P = softmax(S) and Y = P V (per head):
 *   dV = P^T dY,  dP = dY V^T,  dS = P (dP - sum_j(dP P)) (= the float mask's gradient),
 *   through the softcap dS (1 - tanh^2),  dQ = dS K scale,  dK = dS^T Q scale. */
static int attention_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *qs = ad_shape(a, n->in[0]), *ks = ad_shape(a, n->in[1]), *vs = ad_shape(a, n->in[2]);
	int three = qs->ndim == 3, dt = qs->dtype;
	int64_t hq = three ? attr_int(n, "q_num_heads", 0) : qs->dims[1], hkv = three ? attr_int(n, "kv_num_heads", 0) : ks->dims[1];
	if (hq <= 0 || hkv <= 0)
		return ad_fail(a, "head counts must be known");
	int64_t d = three ? qs->dims[2] / hq : qs->dims[3], dv = three ? vs->dims[2] / hkv : vs->dims[3], grp = hq / hkv;
	int64_t L = qs->dims[three ? 1 : 2], T = ks->dims[three ? 1 : 2], last = 3;
	double scale = attr_float(n, "scale", 0), cap = attr_float(n, "softcap", 0);
	scale = scale != 0 ? scale : 1 / sqrt((double)d);
	struct value *mask = n->n_in > 3 ? n->in[3] : NULL;
	struct value *q = to_heads(a, n->in[0], three, hq);
	struct value *k = repeat_heads(a, to_heads(a, n->in[1], three, hkv), grp, hq, d);
	struct value *v = repeat_heads(a, to_heads(a, n->in[2], three, hkv), grp, hq, dv);
	struct value *s = ad_op2(a, "Mul", ad_op2(a, "MatMul", q, transpose(a, k, 0, 1, 3, 2)), ad_scalar(a, dt, scale)), *th = NULL;
	if (cap > 0) {
		th = ad_op1(a, "Tanh", ad_op2(a, "Div", s, ad_scalar(a, dt, cap)));
		s = ad_op2(a, "Mul", th, ad_scalar(a, dt, cap));
	}
	if (mask) {
		int bmask = ad_shape(a, mask)->dtype == DT_BOOL;
		struct value *w[3] = {mask, ad_scalar(a, dt, 0), ad_scalar(a, dt, -INFINITY)};
		s = ad_op2(a, "Add", s, bmask ? ad_op(a, "Where", w, 3) : mask);
	}
	if (attr_int(n, "is_causal", 0))
		s = ad_op2(a, "Add", s, causal_bias(a, s, L, T, dt));
	struct value *p = ad_op1(a, "Softmax", s);
	if (!p || ad_set_int(a, ad_producer(p), "axis", -1))
		return -1;
	struct value *g = to_heads(a, ad_dy(a, n->out[0]), three, hq);
	if (ad_wants(a, n->in[2]) &&
	    ad_give(a, n->in[2], from_heads(a, sum_heads(a, ad_op2(a, "MatMul", transpose(a, p, 0, 1, 3, 2), g), grp, hkv, dv), three)))
		return -1;
	struct value *dp = ad_op2(a, "MatMul", g, transpose(a, v, 0, 1, 3, 2));
	struct value *ds = ad_op2(a, "Mul", p, ad_op2(a, "Sub", dp, ad_reduce(a, "ReduceSum", ad_op2(a, "Mul", dp, p), &last, 1, 1)));
	if (mask && ad_wants(a, mask)) {
		struct rtensor full = {.dtype = dt, .ndim = 4, .dims = {qs->dims[0], hq, L, T}};
		full.numel = full.dims[0] * hq * L * T;
		if (ad_give(a, mask, ad_unbroadcast(a, ds, mask, &full)))
			return -1;
	}
	if (cap > 0)
		ds = ad_op2(a, "Mul", ds, ad_op2(a, "Sub", ad_scalar(a, dt, 1), ad_op2(a, "Mul", th, th)));
	ds = ad_op2(a, "Mul", ds, ad_scalar(a, dt, scale));
	if (ad_wants(a, n->in[0]) && ad_give(a, n->in[0], from_heads(a, ad_op2(a, "MatMul", ds, k), three)))
		return -1;
	if (ad_wants(a, n->in[1]) &&
	    ad_give(a, n->in[1], from_heads(a, sum_heads(a, ad_op2(a, "MatMul", transpose(a, ds, 0, 1, 3, 2), q), grp, hkv, d), three)))
		return -1;
	return 0;
}

/* 2 B Hq L T (D + Dv) for the two products (each query element meets T keys, each output element
 * sums T products), 5 per score for the softmax; under is_causal the keys a query row meets are
 * min(i + 1, T), not T: the triangle the kernel computes (but for its blocks' diagonals), not the
 * whole square, so that a roofline reads the useful work. */
static void attention_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			   uint64_t *bytes)
{
	(void)bytes;
	const struct rtensor *q = in[0], *k = in[1];
	int three = q->ndim == 3;
	int64_t hq = three ? attr_int(n, "q_num_heads", 1) : 1, d = q->dims[q->ndim - 1] / (hq > 0 ? hq : 1);
	uint64_t T = (uint64_t)k->dims[three ? 1 : 2], L = (uint64_t)q->dims[three ? 1 : 2];
	uint64_t rows = (uint64_t)(q->numel / (d > 0 ? d : 1)), keys = rows * T; /* scores */
	if (!rows || !L) {
		*flops = 0;
		return;
	}
	if (attr_int(n, "is_causal", 0))
		keys = rows / L * (L <= T ? L * (L + 1) / 2 : T * (T + 1) / 2 + (L - T) * T);
	*flops = 2 * keys * (uint64_t)(q->numel + out[0]->numel) / rows + 5 * keys;
}

/* ---- RotaryEmbedding ---- */

/* float32/float64 X with caches of its dtype: rows of the head dimension (contiguous in either
 * layout) over the pool, each row's cache row looked up once (crow, per (b, s)); the rule's double
 * arithmetic (float products are exact in double, the sum rounded in double, then to float). */
struct rot_job {
	const struct heads *v;
	const struct rtensor *cs, *sn;
	struct rtensor *y;
	const int64_t *crow; /* B S cache rows */
	int64_t rd, half;
	int il;
};

#define ROT_ROW(T)                                                                                              \
	static inline __attribute__((always_inline)) void rot_plain_##T(const T *restrict x1, const T *restrict x2, \
									const T *restrict c, const T *restrict s,   \
									T *restrict y1, T *restrict y2, int64_t n)  \
	{                                                                                                       \
		for (int64_t j = 0; j < n; j++) {                                                               \
			y1[j] = (T)((double)x1[j] * c[j] - (double)x2[j] * s[j]);                               \
			y2[j] = (T)((double)x2[j] * c[j] + (double)x1[j] * s[j]);                               \
		}                                                                                               \
	}                                                                                                       \
	static inline __attribute__((always_inline)) void rot_inter_##T(const T *restrict x, const T *restrict c,  \
									const T *restrict s, T *restrict y,         \
									int64_t n)                                  \
	{                                                                                                       \
		for (int64_t j = 0; j < n; j++) {                                                               \
			double a = x[2 * j], b = x[2 * j + 1];                                                  \
			y[2 * j] = (T)(a * c[j] - b * s[j]);                                                    \
			y[2 * j + 1] = (T)(b * c[j] + a * s[j]);                                                \
		}                                                                                               \
	}                                                                                                       \
	static void rot_rows_##T(const struct rot_job *j, int64_t lo, int64_t hi)                               \
	{                                                                                                       \
		const struct heads *v = j->v;                                                                   \
		const T *xd = v->t->data, *cd = j->cs->data, *sd = j->sn->data;                                \
		T *yd = j->y->data;                                                                             \
		for (int64_t r = lo; r < hi; r++) { /* r over (b, h, s) or (b, s, h), as X lies */              \
			int64_t bs = v->three ? r / v->H : r / (v->H * v->S) * v->S + r % v->S;                 \
			const T *x = xd + r * v->D, *c = cd + j->crow[bs] * j->half, *s = sd + j->crow[bs] * j->half; \
			T *y = yd + r * v->D;                                                                   \
			if (j->il)                                                                              \
				rot_inter_##T(x, c, s, y, j->half);                                             \
			else                                                                                    \
				rot_plain_##T(x, x + j->half, c, s, y, y + j->half, j->half);                   \
			for (int64_t e = j->rd; e < v->D; e++)                                                  \
				y[e] = x[e];                                                                    \
		}                                                                                               \
	}
ROT_ROW(float)
ROT_ROW(double)
#undef ROT_ROW

VM_CLONES static void rot_range(void *arg, int64_t lo, int64_t hi)
{
	(((const struct rot_job *)arg)->y->dtype == DT_FLOAT ? rot_rows_float : rot_rows_double)(arg, lo, hi);
}

static int rotary_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *cs = in[1], *sn = in[2], *pos = n->n_in > 3 && n->in[3] ? in[3] : NULL;
	struct heads v = {0};
	if (want_float(x, in[0], "X") || heads_of(x, in[0], attr_int(n, "num_heads", 0), "X", &v))
		return exec_status(x);
	int64_t rd = attr_int(n, "rotary_embedding_dim", 0), half;
	rd = rd ? rd : v.D;
	half = rd / 2;
	int il = attr_int(n, "interleaved", 0) != 0;
	if (rd > v.D || rd % 2)
		return exec_fail(x, "rotary_embedding_dim %lld must be even and at most the head size %lld", (long long)rd,
				 (long long)v.D);
	if (pos ? cs->ndim != 2 || pos->ndim != 2 || pos->dims[0] != v.B || pos->dims[1] != v.S
		: cs->ndim != 3 || cs->dims[0] != v.B || cs->dims[1] != v.S)
		return exec_fail(x, "cos_cache must be (max_position, %lld) with position_ids (B, S), or (B, S, %lld) without",
				 (long long)half, (long long)half);
	if (cs->dims[cs->ndim - 1] != half || sn->ndim != cs->ndim || memcmp(sn->dims, cs->dims, sizeof *cs->dims * (size_t)cs->ndim))
		return exec_fail(x, "cos_cache and sin_cache must be alike, their last dimension rotary_embedding_dim / 2 = %lld",
				 (long long)half);
	if (!exec_alloc(x, out[0], in[0]->dtype, in[0]->ndim, in[0]->dims))
		return exec_status(x);
	int typed = (in[0]->dtype == DT_FLOAT || in[0]->dtype == DT_DOUBLE) && cs->dtype == in[0]->dtype &&
		    sn->dtype == in[0]->dtype;
	if (typed) {
		int64_t *crow = xmalloc(sizeof *crow * (size_t)(v.B * v.S + 1));
		for (int64_t bs = 0; bs < v.B * v.S; bs++) {
			crow[bs] = pos ? rt_get_i(pos, bs) : bs;
			if (pos && (crow[bs] < 0 || crow[bs] >= cs->dims[0])) {
				xfree(crow);
				return exec_fail(x, "position_ids[%lld, %lld] = %lld is outside the caches' %lld positions",
						 (long long)(bs / v.S), (long long)(bs % v.S), (long long)rt_get_i(pos, bs),
						 (long long)cs->dims[0]);
			}
		}
		struct rot_job j = {.v = &v, .cs = cs, .sn = sn, .y = out[0], .crow = crow, .rd = rd, .half = half, .il = il};
		int64_t rows = v.B * v.H * v.S;
		if (rows && v.D)
			kernel_for(rows, KERNEL_GRAIN / v.D + 1, rot_range, &j);
		xfree(crow);
		return 0;
	}
	struct heads y = v;
	y.t = out[0];
	for (int64_t b = 0; b < v.B; b++)
		for (int64_t s = 0; s < v.S; s++) {
			int64_t row = b * v.S + s;
			if (pos) {
				row = rt_get_i(pos, b * v.S + s);
				if (row < 0 || row >= cs->dims[0])
					return exec_fail(x, "position_ids[%lld, %lld] = %lld is outside the caches' %lld positions",
							 (long long)b, (long long)s, (long long)row, (long long)cs->dims[0]);
			}
			for (int64_t h = 0; h < v.H; h++) {
				for (int64_t j = 0; j < half; j++) {
					int64_t i1 = il ? 2 * j : j, i2 = il ? 2 * j + 1 : j + half;
					double c = rt_get(cs, row * half + j), sv = rt_get(sn, row * half + j);
					double x1 = rt_get(v.t, heads_at(&v, b, h, s, i1)), x2 = rt_get(v.t, heads_at(&v, b, h, s, i2));
					rt_set(out[0], heads_at(&y, b, h, s, i1), x1 * c - x2 * sv);
					rt_set(out[0], heads_at(&y, b, h, s, i2), x2 * c + x1 * sv);
				}
				for (int64_t e = rd; e < v.D; e++)
					rt_set(out[0], heads_at(&y, b, h, s, e), rt_get(v.t, heads_at(&v, b, h, s, e)));
			}
		}
	return 0;
}

/* The rotation's transpose is the rotation by -theta: RotaryEmbedding of dY with -sin. */
static int rotary_grad(struct ad *a, const struct node *n)
{
	struct value *ins[4] = {ad_dy(a, n->out[0]), n->in[1], ad_op1(a, "Neg", n->in[2]), n->n_in > 3 ? n->in[3] : NULL};
	if (ad_need_opset(a, 23, "RotaryEmbedding's gradient (a RotaryEmbedding)"))
		return -1;
	struct node *r = ad_node(a, "RotaryEmbedding", ins, 4, 1);
	if (!r)
		return -1;
	static const char *const attrs[] = {"interleaved", "num_heads", "rotary_embedding_dim"};
	for (int i = 0; i < 3; i++)
		if (node_attr(n, attrs[i]) && ad_set_int(a, r, attrs[i], attr_int(n, attrs[i], 0)))
			return -1;
	return ad_give(a, n->in[0], r->out[0]);
}

const struct op_impl op_attention = {.run = attention_run, .grad = attention_grad, .cost = attention_cost,
				     .recompute = RC_EXPENSIVE, .nodiff = 1u << 4 | 1u << 5};
const struct op_impl op_rotary = {.run = rotary_run, .grad = rotary_grad, .recompute = RC_CHEAP,
				  .nodiff = 1u << 1 | 1u << 2 | 1u << 3};
