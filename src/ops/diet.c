/* diet.c - the DietAdam op; see diet.h. */
#include "diet.h"
#include "../util/philox.h"
#include "../util/pool.h"
#include "kernel.h"
#include "ops.h"
#include "simd.h"
#include "vmath.h"

#include "blas.h"
#include <math.h>
#include <string.h>

double diet_lr(double lr, int noam, double warmup, double t)
{
	if (noam)
		return lr * fmin(t * pow(warmup, -1.5), 1 / sqrt(t));
	return lr * fmin(t / warmup, 1);
}

/* diet_quantize with stoch for u >= 0, as selects that the compiler vectorises (upd_f32) */
static inline __attribute__((always_inline)) int16_t quantize(double x, double scale, double u, int stoch)
{
	double y = x / scale, z = stoch ? copysign(floor(fabs(y) + u), y) : nearbyint(y);
	z = z > DIET_QMAX ? DIET_QMAX : z < -DIET_QMAX ? -DIET_QMAX : z;
	return (int16_t)(isnan(y) ? 0 : z);
}

int16_t diet_quantize(double x, double scale, double u)
{
	return quantize(x, scale, u, !(u < 0));
}

/* Element k of a dense gradient at float32 precision, as a Cast to float32 leaves it. */
static inline double grad_at(const struct rtensor *g, int64_t k)
{
	return g->dtype == DT_FLOAT ? ((const float *)g->data)[k] : (float)rt_load(g, k);
}

/* The gradient row by row: dense (g of q's shape), or the rows of the product g^T b made a block
 * of rows at a time, and/or the rows ScatterND(zeros, idx_k, upd_k, add) would make, each summed
 * as it sums them (in the updates' dtype, in index order) and added to the sum so far as an Add
 * adds it (a tied weight: a head's product and one embedding's rows or more); without the dense
 * matrix but in the first. */
struct grad_rows {
	const struct rtensor *g;
	int64_t cols;
	int n_terms;                    /* row updates: each term's rows, and its links */
	const struct rtensor **upd;
	int64_t **head, **next;         /* each row's first update, and each update's next for its row (-1 ends) */
	int dt;                         /* the updates' dtype */
	struct rtensor racc;            /* one row of a term, summed as ScatterND sums it: float32 for 16 bits */
	struct rtensor acc;             /* product: the block of rows made, float32 */
	const float *a, *b;             /* product: g (k x rows) at float32 and b (k x cols), float32 */
	int64_t k, rows, lo, n, block;  /* product: the rows lo .. lo + n - 1 are in acc, block of them a time */
	int narrow;                     /* product: g's 16-bit dtype, which the product is rounded to (as Gemm's), or 0 */
};

/* The rows of a product made at once: a block of about DIET_BLOCK float32 elements. */
#define DIET_BLOCK 65536
static int64_t block_rows(int64_t cols)
{
	return cols > 0 && DIET_BLOCK / cols > 1 ? DIET_BLOCK / cols : 1;
}

static float round_to(int dt, float f)
{
	return dt == DT_FLOAT16 ? f32_from_f16(f16_from_f32(f)) : dt == DT_BFLOAT16 ? f32_from_bf16(bf16_from_f32(f)) : f;
}

static void grad_row(struct grad_rows *r, int64_t i, double *out)
{
	int have = 0; /* out holds the sum so far */
	if (r->b) {
		if (i < r->lo || i >= r->lo + r->n) { /* the block from i on: g[:, i..]^T b, as Gemm(transA=1) makes it */
			r->lo = i;
			r->n = r->rows - i < r->block ? r->rows - i : r->block;
			if (r->k < 1 || r->cols < 1)
				memset(r->acc.data, 0, r->acc.nbytes);
			else
				blas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r->n, (int)r->cols, (int)r->k, 1.0f,
					    r->a + i, (int)r->rows, r->b, (int)r->cols, 0.0f, r->acc.data, (int)r->cols);
			float *p = r->acc.data;
			for (int64_t j = 0; r->narrow && j < r->n * r->cols; j++)
				p[j] = round_to(r->narrow, p[j]);
		}
		const float *p = (const float *)r->acc.data + (i - r->lo) * r->cols;
		for (int64_t j = 0; j < r->cols; j++)
			out[j] = p[j];
		have = 1;
	}
	for (int k = 0; k < r->n_terms; k++) {
		if (have && r->head[k][i] < 0)
			continue; /* adds 0 */
		memset(r->racc.data, 0, r->racc.nbytes);
		for (int64_t u = r->head[k][i]; u >= 0; u = r->next[k][u])
			for (int64_t j = 0; j < r->cols; j++)
				rt_set(&r->racc, j, rt_get(&r->racc, j) + rt_get(r->upd[k], u * r->cols + j));
		for (int64_t j = 0; j < r->cols; j++) { /* in float32, stored in the updates' dtype */
			float v = round_to(r->dt, (float)rt_get(&r->racc, j));
			out[j] = have ? round_to(r->dt, (float)out[j] + v) : v;
		}
		have = 1;
	}
	for (int64_t j = 0; !have && j < r->cols; j++) /* at float32 precision, as a Cast to float32 leaves it */
		out[j] = grad_at(r->g, i * r->cols + j);
}

/* Links the updates of each row (in index order) into head (rows) and next (idx's count); fails on
 * an index out of range. */
static int grad_rows_link(struct exec *x, int64_t *head, int64_t *next, const struct rtensor *idx, int64_t rows)
{
	for (int64_t i = 0; i < rows; i++)
		head[i] = -1;
	for (int64_t u = idx->numel; u-- > 0;) { /* built backwards: the last update first, then prepended */
		int64_t i = rt_get_i(idx, u);
		if (i < 0)
			i += rows;
		if (i < 0 || i >= rows)
			return exec_fail(x, "index %lld is out of range for %lld rows", (long long)rt_get_i(idx, u),
					 (long long)rows);
		next[u] = head[i];
		head[i] = u;
	}
	return 0;
}

/* Term k of the row updates: its indices (input 6, then 9, 11, ...) and rows (8, or g without a
 * product; then 10, 12, ...). */
static const struct rtensor *term_idx(struct rtensor *const *in, int k)
{
	return in[k ? 7 + 2 * k : 6];
}

static const struct rtensor *term_upd(struct rtensor *const *in, int k, int product)
{
	return k ? in[8 + 2 * k] : product ? in[8] : in[1];
}

/* The row-update terms' indices, rows and dtype, checked; the count, or -1 (failed). */
static int row_terms(struct exec *x, const struct node *n, struct rtensor *const *in, int64_t cols)
{
	const struct rtensor *idx = n->n_in > 6 ? in[6] : NULL, *b = n->n_in > 7 ? in[7] : NULL;
	if ((n->n_in > 8 && in[8]) ? !b || !idx : b && idx)
		return exec_fail(x, "row updates beside a product need the indices, the factors and the rows"), -1;
	if (n->n_in > 9 && (!idx || (n->n_in - 9) % 2))
		return exec_fail(x, "more row updates come as pairs of indices and rows, after the first"), -1;
	int terms = idx ? 1 + (int)(n->n_in > 9 ? (n->n_in - 9) / 2 : 0) : 0;
	for (int k = 0; k < terms; k++) {
		const struct rtensor *ik = term_idx(in, k), *uk = term_upd(in, k, b != NULL);
		if (!ik || !uk || ik->ndim < 1 || ik->dims[ik->ndim - 1] != 1 || uk->numel != ik->numel * cols ||
		    (ik->dtype != DT_INT64 && ik->dtype != DT_INT32) || (!is_float(uk) && !dtype_is_half(uk->dtype)) ||
		    uk->dtype != term_upd(in, 0, b != NULL)->dtype)
			return exec_fail(x, "row updates need a 2-D parameter, indices (..., 1) of int64 or int32 "
					    "and a float gradient of (..., columns), all of one dtype"), -1;
	}
	return terms;
}

/* The update of elements [lo, hi) of q (element k is row k / cols, column k % cols): a piece of
 * kernel_for over a dense gradient, or one row of the gradient grad_row made (row, element k at
 * row[k - row_at]). Element k's uniform is the generator's k-th however the range is cut. */
struct upd_job {
	const int16_t *q;
	int16_t *qo;
	const struct rtensor *g, *m, *v1, *vr; /* vr: vr' when factored, else NULL */
	struct rtensor *mo, *v1o;
	const double *row, *c;                 /* c: the columns' c[j] when factored */
	const double *ic;                      /* 1 / c[j] where upd_fac_avx512 may run (see there), else NULL */
	const float *icf;                      /* ic[j] at float32 where fac16f may run (see there), else NULL */
	int64_t row_at, cols;
	double b1, b2, bc, eps, lr, scale, cmean, iscale; /* iscale: 1 / scale */
	uint64_t key;
	int stochastic;
};

/* Elements [k0, k0 + n) of one row (columns j0 ..) with float32 g and moments, mom, fac and stoch
 * constants: a loop the compiler vectorises (the factored one: no sqrt per element). */
static inline __attribute__((always_inline)) void upd_f32(const struct upd_job *p, int64_t k0, int64_t n, int64_t j0,
							  double r, const float *unif, int mom, int fac, int stoch)
{
	const double b1 = p->b1, b2 = p->b2, bc = p->bc, eps = p->eps, lr = p->lr, scale = p->scale, cmean = p->cmean;
	const float *g = (const float *)p->g->data + k0, *m = mom ? (const float *)p->m->data + k0 : NULL;
	const float *v1 = fac ? NULL : (const float *)p->v1->data + k0;
	float *mo = mom ? (float *)p->mo->data + k0 : NULL, *v1o = fac ? NULL : (float *)p->v1o->data + k0;
	const double *c = fac ? p->c + j0 : NULL;
	const int16_t *q = p->q + k0;
	int16_t *qo = p->qo + k0;
	for (int64_t e = 0; e < n; e++) {
		double gk = g[e], u = gk, denom;
		if (mom) {
			u = b1 * m[e] + (1 - b1) * gk;
			mo[e] = (float)u;
		}
		if (fac) {
			denom = r * c[e] / cmean;
		} else {
			double v = b2 * v1[e] + (1 - b2) * gk * gk;
			v1o[e] = (float)v;
			denom = sqrt(v / bc) + eps;
		}
		qo[e] = quantize(q[e] * scale - lr * u / denom, scale, stoch ? unif[e] : -1, stoch);
	}
}

/* #52 powadam: the factored update without its three divisions per element (r c[j] / mean(c),
 * lr u / denom and w / scale). With ar = lr mean(c) / r once a row, 1 / c[j] and 1 / scale once a
 * call, t = ar u (1 / c[j]) and y = (q scale - t) (1 / scale) differ from the divided y by at most
 * (2 |q| + 9 |t / scale| + 5 |y|) 2^-53: each path is within half that of the real value, a rounding
 * of 2^-53 a step, 4 or 5 steps a term, as long as no denominator and no numerator lr u under- or
 * overflows: r, c[j], mean(c), scale and a nonzero lr within [2^-300, 2^300] (upd_span and
 * diet_adam_run check), u = g a float32 (a nonzero one at least 2^-149). A lane keeps its q' where
 * every y within d, 8 times that bound and 2^-60 more (subnormal steps' absolute error), quantizes to
 * one value: floor and nearbyint are monotonic, and so is the rounding of |y| + U. Where one lane
 * of a chunk does not (about one in 2^30: d is about 2^-30), the chunk is made again by the
 * divisions. So q' is the divided update's bit for bit. In AVX-512 intrinsics, without momentum (the
 * default beta1 = 0; with it, the divisions as before): the same loop in C, vectorised by GCC, ran
 * no faster than the divisions (492 perf samples against 232: an int16 q makes it take 32 lanes an
 * iteration, 4 vectors of double a value, spilled). bench_roofline DietAdam, 1 thread: the update
 * loop 230-360 -> 115-175 perf samples (5 runs). */
#ifdef SIMD_X86
/* Lanes e .. e + 7: q' in *z (32-bit), and whether each settled. With u = g a float32 (no
 * momentum), a nonzero u is at least 2^-149: no test. d = (2^15 + |t / scale|) 2^-45 + 2^-60 bounds
 * upd_fac's (|q| <= 2^15 - 1, |y| <= |q| + |t / scale|). Stochastic: a y within d of 0, whose
 * sign may be wrong, settles only where hi is 0 (lo is floor(0 + U) = 0 there), and q' is then 0. */
SIMD_TARGET static inline __mmask8 fac8(const struct upd_job *p, __m512d var, __m256 g8, __m512d ic, __m256i q8,
					__m256 u8, int stoch, __m256i *z)
{
	const __m512d qmax = _mm512_set1_pd(DIET_QMAX), is = _mm512_set1_pd(p->iscale);
	__m512d t = _mm512_mul_pd(_mm512_mul_pd(var, _mm512_cvtps_pd(g8)), ic);
	__m512d y = _mm512_mul_pd(_mm512_sub_pd(_mm512_mul_pd(_mm512_cvtepi32_pd(q8), _mm512_set1_pd(p->scale)), t), is);
	__m512d d = _mm512_fmadd_pd(_mm512_abs_pd(t), _mm512_set1_pd(p->iscale * 0x1p-45), _mm512_set1_pd(0x1p-30 + 0x1p-60));
	__m512d lo, hi;
	if (stoch) {
		__m512d a = _mm512_abs_pd(y), w = _mm512_cvtps_pd(u8);
		lo = _mm512_roundscale_pd(_mm512_add_pd(_mm512_max_pd(_mm512_sub_pd(a, d), _mm512_setzero_pd()), w),
					  _MM_FROUND_TO_NEG_INF);
		hi = _mm512_min_pd(qmax, _mm512_roundscale_pd(_mm512_add_pd(_mm512_add_pd(a, d), w), _MM_FROUND_TO_NEG_INF));
		lo = _mm512_min_pd(qmax, lo);
	} else {
		const __m512d qmin = _mm512_set1_pd(-DIET_QMAX);
		lo = _mm512_max_pd(qmin, _mm512_min_pd(qmax, _mm512_roundscale_pd(_mm512_sub_pd(y, d), _MM_FROUND_TO_NEAREST_INT)));
		hi = _mm512_max_pd(qmin, _mm512_min_pd(qmax, _mm512_roundscale_pd(_mm512_add_pd(y, d), _MM_FROUND_TO_NEAREST_INT)));
	}
	/* clamped with NaN kept (min and max give their second operand for NaN): a NaN or infinite y
	 * leaves lo or hi NaN, or lo 0 and hi the clamp */
	__mmask8 ok = _mm512_cmp_pd_mask(lo, hi, _CMP_EQ_OQ);
	if (stoch) /* y's sign: hi | (y & -0.0) */
		hi = _mm512_castsi512_pd(_mm512_ternarylogic_epi64(_mm512_castpd_si512(hi), _mm512_castpd_si512(y),
								   _mm512_set1_epi64(INT64_MIN), 0xF8));
	*z = _mm512_cvttpd_epi32(hi);
	return ok;
}

/* #52e adampool: fac8's update in float32 first, 16 lanes a vector, for updates under half a
 * step: y = q - f with f = t / scale, so the quantized y is q + s k, k = floor(U - s f) (s = y's
 * sign: q's, or -f's where q is 0) or nearbyint(-f), which f's float32 error leaves alone where U - s f
 * (or -f) is more than dd from an integer (a half-integer): f = g (A ic[j]) with A = ar / scale and
 * ic[j] rounded to float32 (A and ic[j] within [2^-60, 2^60], so A ic[j] is a normal float32) is
 * four float32 roundings from its real value (< 2^-22 |f| <= 2^-23 with |f| <= 1/2; a subnormal's
 * 2^-150 more), U - s f one more (2^-24), the divided y within 2^-36 of the real one (fac8's
 * bound) and |y| + U's rounding in double 2^-38: under 2^-22.4 in all, and dd = 2^-20. lo and hi
 * (floor or nearbyint of e -+ dd, rounded to float32, both monotonic) equal then put the real
 * U - s f within (k + 2^-20.5, k + 1 - 2^-20.5): q' is the divided update's bits. The lanes of a
 * vector with one that did not settle (|f| > 1/2, NaN, infinite; about 2^-18 a lane) go to fac8.
 * About 30 vector instructions for 16 lanes against fac8's 50. */
SIMD_TARGET static inline __mmask16 fac16f(__m512 a, __m512 g, __m512 icf, __m512i q, __m512 u, int stoch, __m512i *z)
{
	const __m512 dd = _mm512_set1_ps(0x1p-20f), zero = _mm512_setzero_ps();
	const __m512i sign = _mm512_set1_epi32(INT32_MIN), qmax = _mm512_set1_epi32(DIET_QMAX);
	__m512 f = _mm512_mul_ps(g, _mm512_mul_ps(a, icf)), lo, hi;
	__mmask16 ok = _mm512_cmp_ps_mask(_mm512_abs_ps(f), _mm512_set1_ps(0.5f), _CMP_LE_OQ), neg = 0;
	if (stoch) { /* s f, then floor(U - s f) */
		neg = _mm512_cmplt_epi32_mask(q, _mm512_setzero_si512()) |
		      _mm512_mask_cmp_ps_mask(_mm512_cmpeq_epi32_mask(q, _mm512_setzero_si512()), f, zero, _CMP_GT_OQ);
		__m512 e = _mm512_sub_ps(u, _mm512_castsi512_ps(_mm512_mask_xor_epi32(_mm512_castps_si512(f), neg,
											 _mm512_castps_si512(f), sign)));
		lo = _mm512_roundscale_ps(_mm512_sub_ps(e, dd), _MM_FROUND_TO_NEG_INF);
		hi = _mm512_roundscale_ps(_mm512_add_ps(e, dd), _MM_FROUND_TO_NEG_INF);
	} else { /* nearbyint(-f) */
		__m512 e = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(f), sign));
		lo = _mm512_roundscale_ps(_mm512_sub_ps(e, dd), _MM_FROUND_TO_NEAREST_INT);
		hi = _mm512_roundscale_ps(_mm512_add_ps(e, dd), _MM_FROUND_TO_NEAREST_INT);
	}
	ok &= _mm512_cmp_ps_mask(lo, hi, _CMP_EQ_OQ);
	__m512i k = _mm512_cvttps_epi32(hi);
	__m512i y = _mm512_mask_sub_epi32(_mm512_add_epi32(q, k), neg, q, k);
	*z = _mm512_max_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), qmax), _mm512_min_epi32(qmax, y));
	return ok;
}

/* Lanes [k0, k0 + n8) of a chunk, n8 a multiple of 16, without momentum: whether all settled; fac16f
 * first where a (A = ar / scale at float32) is not 0 */
SIMD_TARGET static int upd_fac_avx512(const struct upd_job *p, int64_t k0, int64_t n8, int64_t j0, double ar, float a,
				      const float *unif)
{
	const float *g = (const float *)p->g->data + k0;
	const double *ic = p->ic + j0;
	const int16_t *q = p->q + k0;
	int16_t *qo = p->qo + k0;
	const float *icf = a != 0 ? p->icf + j0 : NULL;
	const __m512d var = _mm512_set1_pd(ar);
	const __m512 va = _mm512_set1_ps(a);
	__mmask8 ok = 0xff;
	for (int64_t e = 0; e < n8; e += 16) {
		__m512i q16 = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(q + e)));
		__m256i z0, z1;
		if (icf) {
			__m512i z;
			__mmask16 f = p->stochastic ? fac16f(va, _mm512_loadu_ps(g + e), _mm512_loadu_ps(icf + e), q16,
							     _mm512_loadu_ps(unif + e), 1, &z)
						    : fac16f(va, _mm512_loadu_ps(g + e), _mm512_loadu_ps(icf + e), q16,
							     _mm512_setzero_ps(), 0, &z);
			if (f == 0xffff) {
				_mm256_storeu_si256((__m256i *)(qo + e), _mm512_cvtepi32_epi16(z));
				continue;
			}
		}
#define FAC8(h, z, stoch)                                                                                      \
	fac8(p, var, _mm256_loadu_ps(g + e + 8 * h), _mm512_loadu_pd(ic + e + 8 * h), _mm512_extracti64x4_epi64(q16, h), \
	     stoch ? _mm256_loadu_ps(unif + e + 8 * h) : _mm256_setzero_ps(), stoch, &z)
		if (p->stochastic)
			ok &= FAC8(0, z0, 1) & FAC8(1, z1, 1);
		else
			ok &= FAC8(0, z0, 0) & FAC8(1, z1, 0);
#undef FAC8
		_mm256_storeu_si256((__m256i *)(qo + e), _mm512_cvtepi32_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(z0), z1, 1)));
	}
	return ok == 0xff;
}
#endif

VM_CLONES static void upd_f32_any(const struct upd_job *p, int64_t k0, int64_t n, int64_t j0, double r, const float *unif)
{
	switch ((p->m != NULL) << 2 | (p->vr != NULL) << 1 | p->stochastic) {
#define F32(mom, fac, stoch)                                                                                   \
	case mom << 2 | fac << 1 | stoch: upd_f32(p, k0, n, j0, r, unif, mom, fac, stoch); return;
	F32(0, 0, 0) F32(0, 0, 1) F32(0, 1, 0) F32(0, 1, 1) F32(1, 0, 0) F32(1, 0, 1) F32(1, 1, 0) F32(1, 1, 1)
#undef F32
	}
}

#define UPD_CHUNK 1024
/* Pieces of a chunk of uniforms, within one row when factored (r and the columns' c[j] at hand). */
static void upd_span(void *arg, int64_t lo, int64_t hi)
{
	const struct upd_job *p = arg;
	const double b1 = p->b1, b2 = p->b2, bc = p->bc, eps = p->eps, lr = p->lr, scale = p->scale;
	int f32 = !p->row && p->g->dtype == DT_FLOAT && (!p->m || (p->m->dtype == DT_FLOAT && p->mo->dtype == DT_FLOAT)) &&
		  (p->vr || (p->v1->dtype == DT_FLOAT && p->v1o->dtype == DT_FLOAT)); /* factored: vr' read once a row */
	float unif[UPD_CHUNK];
	for (int64_t c0 = lo, c1; c0 < hi; c0 = c1) {
		int64_t i = c0 / p->cols, j0 = c0 % p->cols;
		c1 = hi - c0 > UPD_CHUNK ? c0 + UPD_CHUNK : hi;
		if (p->vr && c1 > (i + 1) * p->cols)
			c1 = (i + 1) * p->cols;
		if (p->stochastic)
			philox_uniforms(p->key, (uint64_t)c0, c1 - c0, unif);
		double r = p->vr ? sqrt(rt_load(p->vr, i) / bc) + eps : 0;
#ifdef SIMD_X86
		int64_t n16 = (c1 - c0) & ~(int64_t)15;
		double ar = p->lr * p->cmean / r, as = fabs(ar * p->iscale); /* fac16f's A within [2^-60, 2^60] */
		if (f32 && p->vr && !p->m && p->ic && r >= 0x1p-300 && r <= 0x1p300 && simd_avx512() &&
		    upd_fac_avx512(p, c0, n16, j0, ar, p->icf && as >= 0x1p-60 && as <= 0x1p60 ? (float)(ar * p->iscale) : 0,
				   unif)) {
			if (n16 < c1 - c0) /* the last lanes with the divisions */
				upd_f32_any(p, c0 + n16, c1 - c0 - n16, j0 + n16, r, unif + n16);
			continue;
		}
#endif
		if (f32) {
			upd_f32_any(p, c0, c1 - c0, j0, r, unif);
			continue;
		}
		for (int64_t k = c0; k < c1; k++) {
			double gk = p->row ? p->row[k - p->row_at] : grad_at(p->g, k), u = gk, denom;
			if (p->m) {
				u = b1 * rt_load(p->m, k) + (1 - b1) * gk;
				rt_store(p->mo, k, u);
			}
			if (p->vr) {
				denom = r * p->c[j0 + k - c0] / p->cmean;
			} else {
				double v = b2 * rt_load(p->v1, k) + (1 - b2) * gk * gk;
				rt_store(p->v1o, k, v);
				denom = sqrt(v / bc) + eps;
			}
			double w = p->q[k] * scale - lr * u / denom;
			p->qo[k] = quantize(w, scale, p->stochastic ? unif[k - c0] : -1, p->stochastic);
		}
	}
}

/* The factored moments of a dense float32 g (rows x cols): each row's sum of squares s[i] and each
 * column's colsum[j], every sum in the serial order (a row's over j = 0, 1, ..., a column's over
 * i = 0, 1, ...), so the bits do not depend on how the work is cut. The squares are exact (float
 * times float in double). A tile of 8 rows x 8 columns is squared once: the column sums add its
 * rows lane-wise, the row sums its transpose's rows (8 chains side by side in one vector). */
typedef vm_v8d v8d;
typedef float v8f __attribute__((vector_size(32)));
#define MOM_ROWS 8
#define MOM_STRIP 256 /* columns a piece of the columns' pass walks down */

static inline __attribute__((always_inline)) void sq8(const float *p, v8d *out)
{
	v8f f;
	memcpy(&f, p, sizeof f);
	v8d d = __builtin_convertvector(f, v8d);
	*out = d * d;
}

/* Rows i .. i + 7: their sums into s[i ..]; with colsum, each square also added to colsum[j] row
 * after row (the columns' sums so far: rows 0 .. i - 1). */
VM_CLONES static void mom_rows8(const float *g, int64_t i, int64_t cols, double *restrict colsum, double *restrict s)
{
	const float *g0 = g + i * cols;
	v8d acc = {0}, a[8], t[8];
	int64_t j = 0;
	for (; j + 8 <= cols; j += 8) {
		for (int k = 0; k < 8; k++)
			sq8(g0 + k * cols + j, &a[k]);
		if (colsum) {
			v8d c;
			memcpy(&c, colsum + j, sizeof c);
			for (int k = 0; k < 8; k++)
				c = c + a[k];
			memcpy(colsum + j, &c, sizeof c);
		}
		vm_transpose8(a, t); /* t[j] lane k = a[k] lane j */
		for (int k = 0; k < 8; k++)
			acc = acc + t[k];
	}
	double r[8];
	memcpy(r, &acc, sizeof r);
	for (; j < cols; j++)
		for (int k = 0; k < 8; k++) {
			double v = (double)g0[k * cols + j] * g0[k * cols + j];
			r[k] += v;
			if (colsum)
				colsum[j] += v;
		}
	memcpy(s + i, r, sizeof r);
}

/* Columns [j0, j1) of all rows into colsum, row after row. */
VM_CLONES static void mom_cols(const float *g, int64_t rows, int64_t cols, int64_t j0, int64_t j1, double *restrict colsum)
{
	for (int64_t j = j0; j < j1; j++)
		colsum[j] = 0;
	for (int64_t i = 0; i < rows; i++) {
		const float *p = g + i * cols;
		for (int64_t j = j0; j < j1; j++)
			colsum[j] += (double)p[j] * p[j];
	}
}

struct mom_job {
	const float *g;
	double *colsum, *s;
	int64_t rows, cols, nrb; /* nrb: the blocks of MOM_ROWS rows, the units before the strips */
};

/* Units [u0, u1): blocks of rows (row sums), then strips of columns (column sums) */
static void mom_span(void *arg, int64_t u0, int64_t u1)
{
	const struct mom_job *j = arg;
	for (int64_t u = u0; u < u1; u++) {
		if (u < j->nrb) {
			mom_rows8(j->g, u * MOM_ROWS, j->cols, NULL, j->s);
			continue;
		}
		int64_t c0 = (u - j->nrb) * MOM_STRIP, c1 = c0 + MOM_STRIP < j->cols ? c0 + MOM_STRIP : j->cols;
		mom_cols(j->g, j->rows, j->cols, c0, c1, j->colsum);
	}
}

/* The rows of a dense float32 g that come in whole blocks: their sums into s, and every row's
 * squares into colsum (zeroed here); returns the rows done. One thread: one pass; more: the row
 * blocks and the column strips over the pool (g read twice, the same bits). */
static int64_t moments_f32(const float *g, int64_t rows, int64_t cols, double *colsum, double *s)
{
	int64_t nrb = rows / MOM_ROWS;
	if (pool_threads() < 2) {
		memset(colsum, 0, sizeof *colsum * (size_t)cols);
		for (int64_t b = 0; b < nrb; b++)
			mom_rows8(g, b * MOM_ROWS, cols, colsum, s);
		for (int64_t i = nrb * MOM_ROWS; i < rows; i++) /* the last rows: the columns' sums go on */
			for (int64_t j = 0; j < cols; j++)
				colsum[j] += (double)g[i * cols + j] * g[i * cols + j];
		return nrb * MOM_ROWS;
	}
	struct mom_job j = {g, colsum, s, rows, cols, nrb};
	kernel_for(nrb + (cols + MOM_STRIP - 1) / MOM_STRIP, 1, mom_span, &j);
	return nrb * MOM_ROWS;
}

static int diet_adam_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *q = in[0], *g = in[1], *t = in[2], *m = n->n_in > 3 ? in[3] : NULL;
	const struct rtensor *v1 = n->n_in > 4 ? in[4] : NULL, *v2 = n->n_in > 5 ? in[5] : NULL;
	const struct rtensor *idx = n->n_in > 6 ? in[6] : NULL, *b = n->n_in > 7 ? in[7] : NULL;
	if (q->dtype != DT_INT16)
		return exec_fail(x, "the parameter must be int16, not %s", dtype_name(q->dtype));
	if (!is_float(g) && g->dtype != DT_FLOAT16 && g->dtype != DT_BFLOAT16)
		return exec_fail(x, "the gradient must be float32, float64, float16 or bfloat16, not %s",
				 dtype_name(g->dtype));
	if (!v1 || t->numel != 1)
		return exec_fail(x, "needs the parameter, its gradient, the step and the second moment");
	/* row by row: a matrix's rows, else one element at a time (no row buffer of the whole tensor) */
	int64_t rows = q->ndim == 2 ? q->dims[0] : q->numel, cols = q->ndim == 2 ? q->dims[1] : 1;
	int terms = row_terms(x, n, in, cols);
	if (terms < 0)
		return exec_status(x);
	if (terms && q->ndim != 2)
		return exec_fail(x, "row updates need a 2-D parameter");
	if (b) {
		if (q->ndim != 2 || g->ndim != 2 || b->ndim != 2 || g->dtype == DT_DOUBLE || b->dtype != g->dtype ||
		    g->dims[1] != rows || b->dims[1] != cols || g->dims[0] != b->dims[0])
			return exec_fail(x, "a product gradient g^T b needs a 2-D parameter (R, C), g (K, R) and b (K, C), "
					    "of one dtype, not float64%s", idx ? "" : ", and no indices");
	} else if (!idx && g->numel != q->numel) {
		return exec_fail(x, "the gradient must have the parameter's shape");
	}
	if (v2 ? q->ndim != 2 || v1->numel != rows || v2->numel != cols : v1->numel != q->numel)
		return exec_fail(x, "the second moment must be %s", v2 ? "factored as (rows) and (columns) of a 2-D parameter"
								  : "of the parameter's shape");
	if (m && m->numel != q->numel)
		return exec_fail(x, "the momentum must have the parameter's shape");
	/* every updated slot is an output: the next step needs it */
	if ((m && !(n->n_out > 1 && n->out[1])) || !(n->n_out > 2 && n->out[2]) || (v2 && !(n->n_out > 3 && n->out[3])))
		return exec_fail(x, "the updated momentum and second moment must be outputs");
	if (!attr_str_is(n, "schedule", "noam", 1) && !attr_str_is(n, "schedule", "none", 0))
		return exec_fail(x, "schedule must be noam or none");
	if (!attr_str_is(n, "round", "stochastic", 1) && !attr_str_is(n, "round", "nearest", 0))
		return exec_fail(x, "round must be stochastic or nearest");
	int16_t *qo = exec_alloc(x, out[0], DT_INT16, q->ndim, q->dims);
	void *mo = m ? exec_alloc(x, out[1], m->dtype, m->ndim, m->dims) : NULL;
	void *v1o = exec_alloc(x, out[2], v1->dtype, v1->ndim, v1->dims);
	void *v2o = v2 ? exec_alloc(x, out[3], v2->dtype, v2->ndim, v2->dims) : NULL;
	if (!qo || (m && !mo) || !v1o || (v2 && !v2o))
		return exec_status(x); /* shapes only, or out of memory */
	double b1 = attr_float(n, "beta1", DIET_BETA1), b2 = attr_float(n, "beta2", DIET_BETA2);
	double eps = attr_float(n, "epsilon", DIET_EPS), scale = attr_float(n, "scale", DIET_SCALE), step = rt_get(t, 0);
	double lr = diet_lr(attr_float(n, "lr", DIET_LR), attr_str_is(n, "schedule", "noam", 1),
			    attr_float(n, "warmup", DIET_WARMUP), step);
	int stochastic = attr_str_is(n, "round", "stochastic", 1);
	if (!(step >= 1))
		return exec_fail(x, "the step must count from 1, not %g", step);
	double bc = 1 - pow(b2, step), cmean = 0;
	uint64_t key = exec_node_seed(x, n) ^ ((uint64_t)step * 0x9e3779b97f4a7c15ull);
	struct grad_rows gr = {.g = g, .cols = cols, .n_terms = terms};
	gr.dt = terms ? term_upd(in, 0, b != NULL)->dtype : DT_FLOAT;
	size_t rowb = sizeof(double) * (size_t)(cols ? cols : 1), linkb = 3 * sizeof(void *) * (size_t)terms;
	for (int k = 0; k < terms; k++)
		linkb += sizeof(int64_t) * (size_t)(rows + term_idx(in, k)->numel);
	size_t wideb = b && g->dtype != DT_FLOAT ? sizeof(float) * (size_t)(g->numel + b->numel) : 0;
	if (b) { /* 16-bit factors read at float32 */
		gr.a = g->data;
		gr.b = b->data;
		gr.narrow = dtype_is_half(g->dtype) ? g->dtype : 0;
		gr.k = g->dims[0];
		gr.rows = rows;
		gr.block = block_rows(cols);
		gr.n = 0;
	}
	int rdt = dtype_is_half(gr.dt) ? DT_FLOAT : gr.dt; /* as the executor runs a 16-bit ScatterND: in float32 */
	size_t accb = b ? sizeof(float) * (size_t)(gr.block * cols) : 0, raccb = idx ? dtype_size(rdt) * (size_t)cols : 0;
	double *row = exec_scratch(x, rowb), *colsum = row && v2 ? exec_scratch(x, rowb) : NULL;
	void *links = row && (colsum || !v2) && idx ? exec_scratch(x, linkb ? linkb : 1) : NULL;
	if (links) { /* the terms' rows, heads and nexts, then the links */
		gr.upd = links;
		gr.head = (int64_t **)(gr.upd + terms);
		gr.next = gr.head + terms;
		int64_t *l = (int64_t *)(gr.next + terms);
		for (int k = 0; k < terms; l += rows + term_idx(in, k)->numel, k++) {
			gr.upd[k] = term_upd(in, k, b != NULL);
			gr.head[k] = l;
			gr.next[k] = l + rows;
		}
	}
	gr.acc = (struct rtensor){.dtype = DT_FLOAT, .ndim = 1, .dims = {(int64_t)(accb / sizeof(float))},
				  .numel = (int64_t)(accb / sizeof(float)), .nbytes = accb};
	gr.racc = (struct rtensor){.dtype = rdt, .ndim = 1, .dims = {cols}, .numel = idx ? cols : 0, .nbytes = raccb};
	gr.acc.data = b && row && (colsum || !v2) && (!idx || links) ? exec_scratch(x, accb ? accb : 1) : NULL;
	gr.racc.data = links && (!b || gr.acc.data) ? exec_scratch(x, raccb ? raccb : 1) : NULL;
	float *wide = (b ? gr.acc.data : row) && (!idx || gr.racc.data) && wideb ? exec_scratch(x, wideb) : NULL;
	int rc = !row || (v2 && !colsum) || (idx && !gr.racc.data) || (b && !gr.acc.data) || (wideb && !wide) ? exec_status(x) : 0;
	for (int64_t i = 0; !rc && wide && i < g->numel + b->numel; i++)
		wide[i] = (float)(i < g->numel ? rt_get(g, i) : rt_get(b, i - g->numel));
	if (wide) {
		gr.a = wide;
		gr.b = wide + g->numel;
	}
	for (int k = 0; !rc && k < terms; k++)
		rc = grad_rows_link(x, gr.head[k], gr.next[k], term_idx(in, k), rows);
	/* the moments first: v1' and v2' (and their means, for the factored denominator) */
	int dense32 = !rc && v2 && !idx && !b && g->dtype == DT_FLOAT;
	double *rs = dense32 ? exec_scratch(x, sizeof(double) * (size_t)(rows ? rows : 1)) : NULL;
	if (dense32 && !rs)
		rc = exec_status(x);
	int64_t i8 = rs ? moments_f32(g->data, rows, cols, colsum, rs) : 0; /* the rows' sums in rs, all columns' */
	for (int64_t i = 0; i < i8; i++)
		rt_set(out[2], i, b2 * rt_get(v1, i) + (1 - b2) * rs[i] / (double)cols);
	int cols_done = rs != NULL;
	exec_scratch_free(x, rs, sizeof(double) * (size_t)(rows ? rows : 1));
	for (int64_t i = i8; !rc && v2 && i < rows; i++) {
		grad_row(&gr, i, row);
		double s = 0;
		for (int64_t j = 0; j < cols; j++) {
			s += row[j] * row[j];
			if (!cols_done)
				colsum[j] += row[j] * row[j];
		}
		rt_set(out[2], i, b2 * rt_get(v1, i) + (1 - b2) * s / (double)cols);
	}
	for (int64_t j = 0; !rc && v2 && j < cols; j++) { /* colsum[j] becomes c[j] */
		rt_set(out[3], j, b2 * rt_get(v2, j) + (1 - b2) * colsum[j] / (double)rows);
		colsum[j] = sqrt(rt_get(out[3], j) / bc) + eps;
		cmean += colsum[j];
	}
	cmean /= (double)(cols ? cols : 1);
	/* upd_fac's reciprocals, where its ranges hold (else the divisions, as before) */
	int fast = !rc && v2 && scale >= 0x1p-300 && scale <= 0x1p300 && cmean >= 0x1p-300 && cmean <= 0x1p300 &&
		   (lr == 0 || (fabs(lr) >= 0x1p-300 && fabs(lr) <= 0x1p300));
	double *ic = fast ? exec_scratch_raw(x, rowb) : NULL;
	float *icf = ic ? exec_scratch_raw(x, rowb / 2) : NULL; /* fac16f's: where every ic[j] is within [2^-60, 2^60] */
	if (fast && (!ic || !icf))
		rc = exec_status(x);
	int fastf = icf != NULL;
	for (int64_t j = 0; ic && icf && j < cols; j++) {
		fast &= colsum[j] >= 0x1p-300 && colsum[j] <= 0x1p300;
		ic[j] = 1.0 / colsum[j];
		fastf &= ic[j] >= 0x1p-60 && ic[j] <= 0x1p60;
		icf[j] = (float)ic[j];
	}
	struct upd_job uj = {.q = q->data, .qo = qo, .g = g, .m = m, .v1 = v1, .vr = v2 ? out[2] : NULL, .mo = out[1],
			     .v1o = out[2], .c = colsum, .cols = cols, .b1 = b1, .b2 = b2, .bc = bc, .eps = eps, .lr = lr,
			     .scale = scale, .cmean = cmean, .key = key, .stochastic = stochastic, .ic = fast ? ic : NULL,
			     .icf = fast && fastf ? icf : NULL,
			     .iscale = 1.0 / scale};
	if (!rc && !idx && !b) /* a dense gradient: elements in pieces over the pool */
		kernel_for(q->numel, KERNEL_GRAIN, upd_span, &uj);
	for (int64_t i = 0; !rc && (idx || b) && i < rows; i++) {
		grad_row(&gr, i, row);
		uj.row = row;
		uj.row_at = i * cols;
		upd_span(&uj, i * cols, (i + 1) * cols);
	}
	exec_scratch_free(x, icf, rowb / 2);
	exec_scratch_free(x, ic, rowb);
	exec_scratch_free(x, wide, wideb);
	exec_scratch_free(x, gr.racc.data, raccb ? raccb : 1);
	exec_scratch_free(x, gr.acc.data, accb ? accb : 1);
	exec_scratch_free(x, links, linkb ? linkb : 1);
	exec_scratch_free(x, colsum, rowb);
	exec_scratch_free(x, row, rowb);
	return rc;
}

/* One operation per output element, plus with factors their product 2 K R C, made twice when
 * the second moment is factored. */
static void diet_adam_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
			   uint64_t *flops, uint64_t *bytes)
{
	(void)out;
	(void)bytes;
	if (n->n_in > 7 && in[7] && in[1] && in[1]->ndim == 2)
		*flops += 2 * (uint64_t)in[1]->numel * (uint64_t)in[7]->dims[in[7]->ndim - 1] *
			  (n->n_in > 5 && in[5] && in[1]->dims[1] > block_rows(in[7]->dims[in[7]->ndim - 1]) ? 2 : 1);
}

const struct op_impl op_diet_adam = {.run = diet_adam_run, .cost = diet_adam_cost, .recompute = RC_NEVER, .nodiff = ~0u,
				     .own_width = 1u << 1 | 1u << 7 | 1u << 8 /* the gradient, any float width */};
