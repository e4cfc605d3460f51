/* select.c - ops that choose elements by value: ArgMax, ArgMin, TopK (torch.topk), Hardmax,
 * NonZero and Unique.
 *
 * Each works on the input viewed as (outer, len, inner) about its axis: a "lane" is the len
 * elements (o, 0..len-1, i). ArgMax, ArgMin and Hardmax compare in double (rt_get), so every dtype
 * is read the same way, except 64-bit integers; those and TopK and Unique compare int64 keys of
 * the same order (dkey), in which integers keep every bit (2^53 and 2^53 + 1 are two values). NaN counts as larger than any number
 * (as NumPy's argmax and PyTorch's topk), -0 as +0. Ties go to the lower index (the spec's rule
 * for TopK; ArgMax/ArgMin's unless select_last_index). Sorting is a stable merge sort over
 * indices, so equal keys keep their input order. TopK over contiguous float32 and float64 lanes
 * (AVX-512) compares the values themselves against the k-th and makes keys only for the values
 * that may go in: the same keys, put in the same order.
 *
 * Only TopK's values take a gradient: g scattered back to where each was read, ScatterElements
 * into zeros along the axis (the indices along a lane are distinct, so no reduction is needed).
 * NonZero's and Unique's output lengths depend on the data, so a shapes-only run knows them only
 * when the input is known. */
#include "../autodiff/ad.h"
#include "kernel.h"
#include "simd.h"
#include "vmath.h"
#include "../util/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lanes {
	int64_t outer, len, inner;
};

static struct lanes lanes_of(const struct rtensor *t, int ax)
{
	struct lanes l = {1, t->ndim ? t->dims[ax] : 1, 1};
	for (int i = 0; i < ax; i++)
		l.outer *= t->dims[i];
	for (int i = ax + 1; i < t->ndim; i++)
		l.inner *= t->dims[i];
	return l;
}

/* a > b, with NaN the largest and equal to itself */
static int greater_nan(double a, double b)
{
	return isnan(a) ? !isnan(b) : a > b;
}

/* Stable merge sort of idx[0..n) by before(ctx, a, b) ("a strictly first"), with tmp of n. */
typedef int (*before_fn)(const void *ctx, int64_t a, int64_t b);
static void merge_sort(int64_t *idx, int64_t *tmp, int64_t n, before_fn before, const void *ctx)
{
	for (int64_t w = 1; w < n; w *= 2) {
		for (int64_t lo = 0; lo < n; lo += 2 * w) {
			int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				tmp[k++] = before(ctx, idx[j], idx[i]) ? idx[j++] : idx[i++];
			while (i < mid)
				tmp[k++] = idx[i++];
			while (j < hi)
				tmp[k++] = idx[j++];
		}
		memcpy(idx, tmp, (size_t)n * sizeof *idx);
	}
}

/* Values as int64 keys whose order is select.c's (NaN the largest, every NaN one value, -0 and +0
 * one value) and whose equality is Unique's: a double's bits with a negative's magnitude bits
 * flipped (float32 and the other floats widened exactly), int64 itself, uint64 with its top bit
 * flipped, the other integers as int64. Integers compare exactly, not as doubles (2^53 and
 * 2^53 + 1 are two values). */
static inline int64_t dkey(double x)
{
	int64_t b;
	memcpy(&b, &x, sizeof b);
	b ^= (int64_t)((uint64_t)(b >> 63) >> 1);
	return x != x ? INT64_MAX : x == 0 ? 0 : b;
}

static inline int64_t key_at(const struct rtensor *a, int64_t at)
{
	switch (a->dtype) {
	case DT_INT64:
		return ((const int64_t *)a->data)[at];
	case DT_UINT64:
		return (int64_t)(((const uint64_t *)a->data)[at] ^ (1ull << 63));
	case DT_INT32:
		return ((const int32_t *)a->data)[at];
	default:
		return dkey(rt_get(a, at));
	}
}

/* the position in its lane of lane (o, i)'s largest (max 1) or smallest element; the first or
 * (last 1) of equal ones */
static int64_t lane_extreme(const struct rtensor *a, struct lanes l, int64_t o, int64_t i, int max, int last)
{
	int64_t best = 0;
	if (a->dtype == DT_INT64 || a->dtype == DT_UINT64) { /* as keys: doubles merge values past 2^53 */
		int64_t bk = key_at(a, o * l.len * l.inner + i);
		for (int64_t j = 1; j < l.len; j++) {
			int64_t k = key_at(a, (o * l.len + j) * l.inner + i);
			if ((max ? k > bk : k < bk) || (last && k == bk))
				best = j, bk = k;
		}
		return best;
	}
	double bv = rt_load(a, o * l.len * l.inner + i);
	for (int64_t j = 1; j < l.len; j++) {
		double v = rt_load(a, (o * l.len + j) * l.inner + i);
		int better = max ? greater_nan(v, bv) : greater_nan(bv, v);
		int same = v == bv || (isnan(v) && isnan(bv));
		if (better || (last && same)) {
			best = j;
			bv = v;
		}
	}
	return best;
}

/* lanes u0..u1 (o * inner + i) of an ArgMax or ArgMin, over the threads */
struct arg_job {
	const struct rtensor *a;
	struct lanes l;
	int64_t *o;
	int max, last;
};

static void arg_lanes(void *arg, int64_t u0, int64_t u1)
{
	const struct arg_job *j = arg;
	for (int64_t u = u0; u < u1; u++)
		j->o[u] = lane_extreme(j->a, j->l, u / j->l.inner, u % j->l.inner, j->max, j->last);
}

/* float32 and float64 lanes as typed loops, lane_extreme's answers. A contiguous lane (inner 1):
 * its extreme m by run_extreme (vectors of lanes; a NaN if one came), then the first (last)
 * element that is m by == (the walk moves only to a strictly better value, so it stops at the
 * first of the values equal to the extreme, -0 and +0 alike; with select_last_index it moves to
 * each equal one), or the first (last) NaN for ArgMax (a NaN beats every number); ArgMin's lanes
 * with a NaN (which beats no number) walk. Lanes a stride apart (inner > 1): ARG_RUN of them side
 * by side, each the walk itself, branch-free. */
#define ARG_RUN 256
#define ARG_TYPED(T, IT, name)                                                                          \
	static int64_t name##_find(const T *p, int64_t n, T m, int nan, int last)                       \
	{                                                                                                \
		for (int64_t b = 0, nb = (n + 63) / 64; b < nb; b++) {                                   \
			int64_t k0 = (last ? nb - 1 - b : b) * 64, k1 = k0 + 64 < n ? k0 + 64 : n;       \
			IT hit = 0;                                                                      \
			if (nan)                                                                         \
				for (int64_t k = k0; k < k1; k++)                                        \
					hit |= p[k] != p[k];                                             \
			else                                                                             \
				for (int64_t k = k0; k < k1; k++)                                        \
					hit |= p[k] == m;                                                \
			for (int64_t k = last ? k1 - 1 : k0; hit && k >= k0 && k < k1; k += last ? -1 : 1) \
				if (nan ? p[k] != p[k] : p[k] == m)                                      \
					return k;                                                        \
		}                                                                                        \
		return -1;                                                                               \
	}                                                                                                \
	static void name##_rows(const struct arg_job *j, int64_t u0, int64_t u1)                         \
	{                                                                                                \
		int64_t n = j->l.len;                                                                    \
		for (int64_t u = u0; u < u1; u++) {                                                      \
			T m = (T)run_extreme(j->a, u * n, n, !j->max);                                   \
			if (m != m && !j->max) /* ArgMin of a lane with a NaN: the walk */               \
				j->o[u] = lane_extreme(j->a, j->l, u, 0, 0, j->last);                    \
			else                                                                             \
				j->o[u] = name##_find((const T *)j->a->data + u * n, n, m, m != m, j->last); \
		}                                                                                        \
	}                                                                                                \
	VM_CLONES static void name##_strided(const struct arg_job *j, int64_t u0, int64_t u1)           \
	{                                                                                                \
		int64_t len = j->l.len, inner = j->l.inner, runs = (inner + ARG_RUN - 1) / ARG_RUN;      \
		IT mx = -(IT)j->max, last = -(IT)j->last; /* all ones where set */                       \
		for (int64_t u = u0; u < u1; u++) {                                                      \
			int64_t o = u / runs, i0 = u % runs * ARG_RUN;                                   \
			int64_t w = inner - i0 < ARG_RUN ? inner - i0 : ARG_RUN;                         \
			const T *p = (const T *)j->a->data + o * len * inner + i0;                       \
			T bv[ARG_RUN];                                                                   \
			IT best[ARG_RUN];                                                                \
			for (int64_t t = 0; t < w; t++) {                                                \
				bv[t] = p[t];                                                            \
				best[t] = 0;                                                             \
			}                                                                                \
			for (IT r = 1; r < (IT)len; r++) {                                               \
				const T *q = p + r * inner;                                              \
				for (int64_t t = 0; t < w; t++) {                                        \
					T v = q[t], b = bv[t];                                           \
					IT up = -(IT)((v > b) | ((v != v) & (b == b)));                 \
					IT dn = -(IT)((b > v) | ((b != b) & (v == v)));                 \
					IT same = -(IT)((v == b) | ((v != v) & (b != b)));               \
					IT take = (up & mx) | (dn & ~mx) | (same & last);                \
					bv[t] = take ? v : b;                                            \
					best[t] = (best[t] & ~take) | (r & take);                        \
				}                                                                        \
			}                                                                                \
			for (int64_t t = 0; t < w; t++)                                                  \
				j->o[o * inner + i0 + t] = best[t];                                      \
		}                                                                                        \
	}
ARG_TYPED(float, int32_t, arg_f32)
ARG_TYPED(double, int64_t, arg_f64)

static void arg_typed(void *arg, int64_t u0, int64_t u1)
{
	const struct arg_job *j = arg;
	int dbl = j->a->dtype == DT_DOUBLE;
	if (j->l.inner == 1)
		(dbl ? arg_f64_rows : arg_f32_rows)(j, u0, u1);
	else
		(dbl ? arg_f64_strided : arg_f32_strided)(j, u0, u1);
}

/* ArgMax / ArgMin(data, axis, keepdims, select_last_index): int64 positions along the axis */
static int arg_extreme(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		       int max)
{
	const struct rtensor *a = in[0];
	int ax;
	if (norm_axis(x, attr_int(n, "axis", 0), a->ndim ? a->ndim : 1, &ax))
		return exec_status(x);
	struct lanes l = lanes_of(a, ax);
	if (a->ndim && l.len == 0)
		return exec_fail(x, "%s over an empty dimension", max ? "ArgMax" : "ArgMin");
	int64_t dims[RT_MAX_DIMS];
	int nd = 0, keep = attr_int(n, "keepdims", 1) != 0;
	for (int i = 0; i < a->ndim; i++)
		if (i != ax || keep)
			dims[nd++] = i == ax ? 1 : a->dims[i];
	int64_t *o = exec_alloc(x, out[0], DT_INT64, nd, dims);
	if (!o)
		return exec_status(x);
	struct arg_job j = {a, l, o, max, attr_int(n, "select_last_index", 0) != 0};
	int typed = (a->dtype == DT_FLOAT && l.len <= INT32_MAX) || a->dtype == DT_DOUBLE;
	if (typed && l.inner > 1) { /* pieces: ARG_RUN lanes side by side */
		int64_t runs = (l.inner + ARG_RUN - 1) / ARG_RUN;
		kernel_for(l.outer * runs, KERNEL_GRAIN / (l.len * ARG_RUN + 1) + 1, arg_typed, &j);
	} else {
		kernel_for(l.outer * l.inner, KERNEL_GRAIN / (l.len + 1) + 1, typed ? arg_typed : arg_lanes, &j);
	}
	return 0;
}

static int argmax_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return arg_extreme(x, n, in, out, 1);
}

static int argmin_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return arg_extreme(x, n, in, out, 0);
}

/* Hardmax: 1 at each lane's first largest element, 0 elsewhere. From opset 13 the lanes run
 * along `axis` (default -1); before, the input is coerced to 2-D at `axis` (default 1) and each
 * row of the (d0 ... d_axis-1, d_axis ... dn) matrix is a lane. */
static int hardmax_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int v13 = exec_opset(x) >= 13, ax;
	if (a->ndim == 0)
		return exec_fail(x, "Hardmax needs at least 1 dimension");
	if (norm_axis(x, attr_int(n, "axis", v13 ? -1 : 1), a->ndim, &ax))
		return exec_status(x);
	struct lanes l = {1, 1, 1};
	if (v13) {
		l = lanes_of(a, ax);
	} else {
		for (int i = 0; i < a->ndim; i++)
			*(i < ax ? &l.outer : &l.len) *= a->dims[i];
	}
	if (!exec_alloc_zero(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	for (int64_t p = 0; l.len && p < l.outer; p++)
		for (int64_t i = 0; i < l.inner; i++)
			rt_set(out[0], (p * l.len + lane_extreme(a, l, p, i, 1, 0)) * l.inner + i, 1);
	return 0;
}

/* key[0 .. n) = the keys of a's elements at, at + stride, ..., their order reversed (~) unless
 * largest: typed loops for float32, float64 and int64 */
VM_CLONES static void keys_of(const struct rtensor *a, int64_t at, int64_t stride, int64_t n, int largest,
			      int64_t *restrict key)
{
	int64_t flip = largest ? 0 : -1;
	if (a->dtype == DT_FLOAT) {
		const float *p = (const float *)a->data + at;
		for (int64_t j = 0; j < n; j++)
			key[j] = dkey(p[j * stride]) ^ flip;
	} else if (a->dtype == DT_DOUBLE) {
		const double *p = (const double *)a->data + at;
		for (int64_t j = 0; j < n; j++)
			key[j] = dkey(p[j * stride]) ^ flip;
	} else if (a->dtype == DT_INT64) {
		const int64_t *p = (const int64_t *)a->data + at;
		for (int64_t j = 0; j < n; j++)
			key[j] = p[j * stride] ^ flip;
	} else
		for (int64_t j = 0; j < n; j++)
			key[j] = key_at(a, at + j * stride) ^ flip;
}

/* whether any of key[0 .. n) is above t */
static inline int any_above(const int64_t *restrict key, int64_t n, int64_t t)
{
	int hit = 0;
	for (int64_t j = 0; j < n; j++)
		hit |= key[j] > t;
	return hit;
}

static int key_gt(const void *ctx, int64_t p, int64_t q)
{
	const int64_t *key = ctx;
	return key[p] > key[q];
}

/* lanes u0..u1 (p * inner + i) of a TopK over the threads, each piece with buffers of its own */
struct topk_job {
	const struct rtensor *a;
	struct rtensor *v;
	int64_t *ix, k;
	struct lanes l;
	int largest, failed;
};

/* keys checked TOPK_PART at a time against the k-th best so far; Unique's read TOPK_RUN at a time */
#define TOPK_RUN 256
#define TOPK_PART 16

static inline __attribute__((always_inline)) int64_t run_max(const int64_t *restrict key, int64_t n)
{
	int64_t m = INT64_MIN;
	for (int64_t j = 0; j < n; j++)
		m = key[j] > m ? key[j] : m;
	return m;
}

/* v put in place among gm[0 .. at), kept highest first */
static inline __attribute__((always_inline)) void sorted_put(int64_t *restrict gm, int64_t at, int64_t v)
{
	for (; at > 0 && gm[at - 1] < v; at--)
		gm[at] = gm[at - 1];
	gm[at] = v;
}

/* a floor under the k-th highest of a lane's keys (len >= 16 k, k <= 64): the k-th highest of the
 * highest of each of 2 k pieces of the lane, k keys at least as high (where gm has 2 k places) */
static inline __attribute__((always_inline)) int64_t topk_floor(const int64_t *restrict key, int64_t len, int64_t k,
								int64_t *restrict gm)
{
	int64_t m = 2 * k, piece = len / m;
	for (int64_t q = 0; q < m; q++)
		sorted_put(gm, q, run_max(key + q * piece, q == m - 1 ? len - q * piece : piece));
	return gm[k - 1];
}

/* key kv at lane position j into the k best so far (best, their keys bk, *have of them): while
 * fewer than k are held, any key at least floor; then one above the k-th. Whether it went in. */
static inline __attribute__((always_inline)) int topk_put(int64_t *restrict best, int64_t *restrict bk, int64_t *have,
							  int64_t k, int64_t floor, int64_t j, int64_t kv)
{
	int64_t at;
	if (*have < k && kv >= floor)
		at = (*have)++;
	else if (*have == k && kv > bk[k - 1])
		at = k - 1;
	else
		return 0;
	for (; at > 0 && bk[at - 1] < kv; at--) {
		bk[at] = bk[at - 1];
		best[at] = best[at - 1];
	}
	bk[at] = kv;
	best[at] = j;
	return 1;
}

/* the k first of a lane's keys in TopK's order (the highest key first, ties by index), into best:
 * when k is small beside the lane (k * 8 <= len), each key that beats the k-th so far is put in
 * place among the k by insertion (a language model's top 50 of 50257: mostly one compare per
 * value), TOPK_PART at a time passed over when none is above the k-th (a later index does not win
 * a tie) or, before k are held, none reaches a floor under the lane's k-th (topk_floor); else the
 * whole lane's keys sorted (stable: ties by index). */
VM_CLONES static void topk_lane(const struct topk_job *jb, int64_t base, int64_t *restrict best, int64_t *restrict bk,
				int64_t *restrict key, int64_t *restrict tmp)
{
	int64_t len = jb->l.len, k = jb->k;
	keys_of(jb->a, base, jb->l.inner, len, jb->largest, key);
	if (k * 8 > len) {
		for (int64_t j = 0; j < len; j++)
			best[j] = j;
		merge_sort(best, tmp, len, key_gt, key);
		return;
	}
	if (!k)
		return;
	int64_t have = 0, floor = len >= 16 * k && k <= 64 ? topk_floor(key, len, k, bk + k) : INT64_MIN;
	for (int64_t s = 0; s < len; s += TOPK_PART) {
		int64_t e = len - s < TOPK_PART ? len - s : TOPK_PART;
		if (have == k ? !any_above(key + s, e, bk[k - 1]) : floor > INT64_MIN && !any_above(key + s, e, floor - 1))
			continue;
		for (int64_t j = s; j < s + e; j++)
			topk_put(best, bk, &have, k, floor, j, key[j]);
	}
}

#ifdef SIMD_X86
/* dkey's inverse: the value of a key (every NaN's key gives a NaN) */
static inline double key_value(int64_t key)
{
	key ^= (int64_t)((uint64_t)(key >> 63) >> 1);
	double x;
	memcpy(&x, &key, sizeof x);
	return x;
}

/* TOPK_BLOCK values are compared against the k-th at a time, one branch when none goes in */
#define TOPK_BLOCK 64
#define TOPK_CMP(ps, a, b, strict) (strict ? _mm512_cmp_##ps##_mask(a, b, _CMP_NLE_UQ) : _mm512_cmp_##ps##_mask(a, b, _CMP_NLT_UQ))

/* A mask of the values of p[0 .. e) (0 < e <= TOPK_BLOCK; float32, or float64 with f64) that may
 * have keys above (strict) or at least the key of t (tf, td: float32 and float64 broadcasts):
 * largest x > t (x >= t), or unordered; smallest t > x (t >= x), or unordered. In keys a NaN x is
 * above every number (largest) and a NaN t below every number (smallest's order), and -0 is +0 as
 * in the compares; the other unordered lanes (a NaN x for smallest, every x against a NaN t for
 * largest) are taken too, and turned away by their keys. */
static inline __attribute__((always_inline)) SIMD_TARGET uint64_t topk_cands(const void *p, int f64, int64_t e,
									     __m512 tf, __m512d td, int strict, int neg)
{
	uint64_t m = 0;
	if (!f64)
		for (int64_t v = 0; v < e; v += 16) {
			__mmask16 in = simd_lanes(e - v);
			__m512 x = _mm512_maskz_loadu_ps(in, (const float *)p + v);
			m |= (uint64_t)(in & (neg ? TOPK_CMP(ps, tf, x, strict) : TOPK_CMP(ps, x, tf, strict))) << v;
		}
	else
		for (int64_t v = 0; v < e; v += 8) {
			__mmask8 in = (__mmask8)simd_lanes(e - v < 8 ? e - v : 8);
			__m512d x = _mm512_maskz_loadu_pd(in, (const double *)p + v);
			m |= (uint64_t)(in & (neg ? TOPK_CMP(pd, td, x, strict) : TOPK_CMP(pd, x, td, strict))) << v;
		}
	return m;
}

/* the highest number of p[0 .. n) (neg: the lowest) by vector max (min; a NaN x passed over:
 * VMAXPS x, acc gives acc), and into *hi the highest magnitude bits seen, lane by lane (a NaN's are
 * above inf's) */
#define PIECE_TOP(T, VT, S, I, IS, MAG)                                                             \
	{                                                                                           \
		VT acc = _mm512_set1_##S(neg ? INFINITY : -INFINITY);                               \
		for (int64_t s = 0; s < n; s += 64 / (int64_t)sizeof(T)) {                          \
			int64_t e = n - s < 64 / (int64_t)sizeof(T) ? n - s : 64 / (int64_t)sizeof(T); \
			VT x = _mm512_mask_loadu_##S(acc, simd_lanes(e), (const T *)p + s);         \
			acc = neg ? _mm512_min_##S(x, acc) : _mm512_max_##S(x, acc);                \
			*hi = _mm512_max_##IS(*hi, _mm512_and_si512(_mm512_cast##S##_si512(x),      \
								    _mm512_set1_##I(MAG)));         \
		}                                                                                   \
		return neg ? _mm512_reduce_min_##S(acc) : _mm512_reduce_max_##S(acc);               \
	}

static inline __attribute__((always_inline)) SIMD_TARGET double topk_piece_top(const void *p, int f64, int64_t n,
									       int neg, __m512i *hi)
{
	if (!f64)
		PIECE_TOP(float, __m512, ps, epi32, epu32, 0x7fffffff)
	PIECE_TOP(double, __m512d, pd, epi64, epu64, INT64_MAX)
}

/* topk_lane for a contiguous float32 or float64 lane p with k * 8 <= len, the same keys put in the
 * same order, but read as values: blocks of TOPK_BLOCK where topk_cands finds no value whose key
 * would go in are passed over with no key made (below k held, those under the floor: topk_floor's,
 * of topk_piece_top's pieces), so most of the lane is a vector compare per 16 values and a branch
 * per 64, and a key is made only for a value that may go in (#52 topklse: TopK fwd 1024x2000
 * float32 k 10, 1 thread, 2.04-2.18 -> 0.85-0.93 ms; what is left is mostly the pieces' pass,
 * which reads the lane from memory, and the floor's insertions). The pieces' highest are numbers'
 * alone, so a lane with a NaN takes no floor. */
static SIMD_TARGET void topk_lane_avx512(const struct topk_job *jb, const void *p, int64_t *restrict best,
					 int64_t *restrict bk)
{
	int64_t len = jb->l.len, k = jb->k, flip = jb->largest ? 0 : -1, have = 0, floor = INT64_MIN;
	int f64 = jb->a->dtype == DT_DOUBLE, neg = !jb->largest;
	size_t es = f64 ? sizeof(double) : sizeof(float);
	if (len >= 16 * k && k <= 64) { /* no floor where a NaN came (rare): its pieces' keys are not their numbers' */
		int64_t m = 2 * k, piece = len / m;
		double top[128];
		__m512i hi = _mm512_setzero_si512();
		for (int64_t q = 0; q < m; q++)
			top[q] = topk_piece_top((const char *)p + q * piece * es, f64, q == m - 1 ? len - q * piece : piece, neg, &hi);
		if (f64 ? _mm512_reduce_max_epu64(hi) <= 0x7ff0000000000000ull : _mm512_reduce_max_epu32(hi) <= 0x7f800000u) {
			for (int64_t q = 0; q < m; q++)
				sorted_put(bk + k, q, dkey(top[q]) ^ flip);
			floor = bk[2 * k - 1]; /* the k-th of the 2 k pieces' highest, held at bk + k */
		}
	}
	double t = key_value(floor ^ flip); /* the value compared against: the floor's, then the k-th's */
	__m512 tf = _mm512_set1_ps((float)t);
	__m512d td = _mm512_set1_pd(t);
	for (int64_t s = 0; s < len; s += TOPK_BLOCK) {
		int64_t e = len - s < TOPK_BLOCK ? len - s : TOPK_BLOCK;
		uint64_t c = have == k || floor > INT64_MIN ? topk_cands((const char *)p + s * es, f64, e, tf, td, have == k, neg)
							    : ~0ull >> (TOPK_BLOCK - e);
		if (!c)
			continue;
		int moved = 0;
		for (; c; c &= c - 1) {
			int64_t j = s + __builtin_ctzll(c);
			moved |= topk_put(best, bk, &have, k, floor, j,
					  dkey(f64 ? ((const double *)p)[j] : ((const float *)p)[j]) ^ flip);
		}
		if (moved && have == k) {
			t = key_value(bk[k - 1] ^ flip);
			tf = _mm512_set1_ps((float)t);
			td = _mm512_set1_pd(t);
		}
	}
}
#endif

static void topk_lanes(void *arg, int64_t u0, int64_t u1)
{
	struct topk_job *jb = arg;
	struct lanes l = jb->l;
	int64_t k = jb->k, len = l.len;
	size_t es = dtype_size(jb->a->dtype);
	/* best (len), the merge buffer (len), the keys (len), the k best keys and topk_floor's 2 k */
	int64_t *best = xmalloc((size_t)(3 * len + 3 * k + 1) * sizeof(int64_t));
	if (!best) {
		__atomic_store_n(&jb->failed, 1, __ATOMIC_RELAXED);
		return;
	}
	int64_t *tmp = best + len, *key = tmp + len, *bk = key + len;
	for (int64_t u = u0; u < u1; u++) {
		int64_t p = u / l.inner, i = u % l.inner, base = p * len * l.inner + i;
#ifdef SIMD_X86
		if (l.inner == 1 && k && k * 8 <= len && (jb->a->dtype == DT_FLOAT || jb->a->dtype == DT_DOUBLE) &&
		    simd_avx512())
			topk_lane_avx512(jb, (const char *)jb->a->data + base * (int64_t)es, best, bk);
		else
#endif
			topk_lane(jb, base, best, bk, key, tmp);
		for (int64_t j = 0; j < k; j++) {
			int64_t at = (p * k + j) * l.inner + i;
			memcpy((uint8_t *)jb->v->data + at * (int64_t)es,
			       (const uint8_t *)jb->a->data + (base + best[j] * l.inner) * (int64_t)es, es);
			if (jb->ix)
				jb->ix[at] = best[j];
		}
	}
	free(best);
}

/* TopK(X, K) -> (Values, Indices): the k largest (largest 1) or smallest of each lane along axis,
 * sorted; K is an input from opset 10, the attribute k before. Lanes over the threads. */
static int topk_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int64_t k = attr_int(n, "k", -1);
	if (n->n_in > 1 && in[1]) {
		int got;
		if (rt_ints(x, in[1], "K", &k, 1, &got))
			return exec_status(x);
		if (got != 1)
			return exec_fail(x, "K must hold one value");
	}
	int ax;
	if (a->ndim == 0)
		return exec_fail(x, "TopK needs at least 1 dimension");
	if (norm_axis(x, attr_int(n, "axis", -1), a->ndim, &ax))
		return exec_status(x);
	if (k < 0 || k > a->dims[ax])
		return exec_fail(x, "k = %lld is not in [0, %lld] (the axis' length)", (long long)k, (long long)a->dims[ax]);
	int64_t dims[RT_MAX_DIMS];
	memcpy(dims, a->dims, sizeof dims);
	dims[ax] = k;
	void *v = exec_alloc(x, out[0], a->dtype, a->ndim, dims);
	int64_t *ix = n->n_out > 1 && n->out[1] ? exec_alloc(x, out[1], DT_INT64, a->ndim, dims) : NULL;
	if (!v || (n->n_out > 1 && n->out[1] && !ix))
		return exec_status(x);
	struct lanes l = lanes_of(a, ax);
	struct topk_job jb = {a, out[0], ix, k, l, attr_int(n, "largest", 1) != 0, 0};
	kernel_for(l.outer * l.inner, KERNEL_GRAIN / (l.len + 1) + 1, topk_lanes, &jb);
	if (jb.failed)
		return exec_fail(x, "out of memory");
	return 0;
}

/* dX = ScatterElements(zeros like X, Indices, dValues, axis) */
static int topk_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]);
	if (!g)
		return 0;
	struct value *ix = ad_add_output(a, n, 1);
	struct value *ins[3] = {ad_zeros_like(a, n->in[0]), ix, g};
	struct value *s = ins[0] && ix ? ad_op(a, "ScatterElements", ins, 3) : NULL;
	if (!s || ad_set_int(a, ad_producer(s), "axis", attr_int(n, "axis", -1)))
		return -1;
	return ad_give(a, n->in[0], s);
}

/* topk reads each element about log2(len) times in its sort */
static void topk_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		      uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	int64_t len = 1;
	for (int i = 0; i < in[0]->ndim; i++)
		len = in[0]->dims[i] > len ? in[0]->dims[i] : len;
	*flops = (uint64_t)in[0]->numel * (uint64_t)(log2((double)len) + 1);
}

/* m[0 .. n) = whether X's elements from e0 are nonzero (as rt_get(X, e) != 0: NaN is, -0 is not),
 * typed loops for the dtypes whose rt_get is their value; the rest by rt_get */
VM_CLONES static void nonzero_mask(const struct rtensor *a, int64_t e0, int64_t n, uint8_t *restrict m)
{
	const void *p = (const uint8_t *)a->data + (size_t)e0 * dtype_size(a->dtype);
#define NZ_MASK(T)                                                                                                     \
	do {                                                                                                           \
		const T *restrict q = p;                                                                               \
		for (int64_t i = 0; i < n; i++)                                                                        \
			m[i] = q[i] != 0;                                                                              \
	} while (0)
	switch (a->dtype) {
	case DT_FLOAT: NZ_MASK(float); break;
	case DT_DOUBLE: NZ_MASK(double); break;
	case DT_INT64: case DT_UINT64: NZ_MASK(int64_t); break;
	case DT_INT32: case DT_UINT32: NZ_MASK(int32_t); break;
	case DT_INT16: case DT_UINT16: NZ_MASK(int16_t); break;
	case DT_INT8: case DT_UINT8: case DT_BOOL: NZ_MASK(uint8_t); break;
	default:
		for (int64_t i = 0; i < n; i++)
			m[i] = rt_get(a, e0 + i) != 0;
	}
#undef NZ_MASK
}

/* NonZero's chunks of X: counted, then written from each chunk's first output column */
#define NZ_CHUNK (1 << 14)
struct nz_job {
	const struct rtensor *a;
	int64_t *start; /* each chunk's count, then its first column */
	int64_t *o, nnz;
};

static void nonzero_count(void *arg, int64_t c0, int64_t c1)
{
	const struct nz_job *j = arg;
	uint8_t m[NZ_CHUNK];
	for (int64_t c = c0; c < c1; c++) {
		int64_t e0 = c * NZ_CHUNK, n = j->a->numel - e0 < NZ_CHUNK ? j->a->numel - e0 : NZ_CHUNK, k = 0;
		nonzero_mask(j->a, e0, n, m);
		for (int64_t i = 0; i < n; i++)
			k += m[i];
		j->start[c] = k;
	}
}

/* The last coordinates are stored straight into the output without branches, each element's at
 * the column the next nonzero one takes (a zero's is overwritten by the next nonzero one's). The
 * chunk is cut after its last nonzero element, so none lands past the chunk's own columns, which
 * another thread writes. They went through a buffer and a memcpy, which perf put at 40% of the
 * op: 1M bools at 1 thread, 1.55 -> 0.99 ms (bench_roofline, best of 7). */
static void nonzero_write(void *arg, int64_t c0, int64_t c1)
{
	const struct nz_job *j = arg;
	const struct rtensor *a = j->a;
	int r = a->ndim;
	uint8_t m[NZ_CHUNK];
	int64_t *last = j->o + (r - 1) * j->nnz;
	for (int64_t c = c0; c < c1; c++) {
		int64_t e0 = c * NZ_CHUNK, n = a->numel - e0 < NZ_CHUNK ? a->numel - e0 : NZ_CHUNK, col = j->start[c];
		int64_t idx[RT_MAX_DIMS], q = e0;
		for (int d = r - 1; d >= 0; d--) {
			idx[d] = q % a->dims[d];
			q /= a->dims[d];
		}
		nonzero_mask(a, e0, n, m);
		while (n > 0 && !m[n - 1])
			n--;
		/* segments within a row: the last coordinates stored as above, the other coordinates as
		 * runs of one value */
		for (int64_t i = 0; i < n;) {
			int64_t seg = a->dims[r - 1] - idx[r - 1], k = 0, *o = last + col;
			seg = seg < n - i ? seg : n - i;
			for (int64_t t = 0; t < seg; t++) {
				o[k] = idx[r - 1] + t;
				k += m[i + t];
			}
			for (int d = 0; d + 1 < r; d++)
				for (int64_t t = 0; t < k; t++)
					j->o[d * j->nnz + col + t] = idx[d];
			col += k;
			i += seg;
			idx[r - 1] += seg;
			for (int d = r - 1; d > 0 && idx[d] == a->dims[d]; d--) {
				idx[d] = 0;
				idx[d - 1]++;
			}
		}
	}
}

/* NonZero(X): the (rank, nnz) int64 indices of X's nonzero elements, in C order: chunks counted
 * over the pool, their first columns summed, then written over the pool */
static int nonzero_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	const struct rtensor *a = in[0];
	if (!a->data)
		return exec_fail(x, "NonZero's output length depends on its input's values, which are not known before running");
	int64_t chunks = (a->numel + NZ_CHUNK - 1) / NZ_CHUNK, dims[2];
	struct nz_job j = {.a = a, .start = xcalloc((size_t)chunks + 1, sizeof *j.start)};
	if (!j.start)
		return exec_fail(x, "out of memory");
	kernel_for(chunks, 1, nonzero_count, &j);
	for (int64_t c = 0; c < chunks; c++) {
		int64_t k = j.start[c];
		j.start[c] = j.nnz;
		j.nnz += k;
	}
	dims[0] = a->ndim;
	dims[1] = j.nnz;
	j.o = exec_alloc(x, out[0], DT_INT64, 2, dims);
	if (j.o && a->ndim && j.nnz)
		kernel_for(chunks, 1, nonzero_write, &j);
	xfree(j.start);
	return j.o ? 0 : exec_status(x);
}

/* Unique's slices: slice j of (outer, len, inner) is the outer x inner elements (o, j, i),
 * compared in C order by their keys */
static int slice_cmp(const struct rtensor *a, struct lanes l, int64_t p, int64_t q)
{
	for (int64_t o = 0; o < l.outer; o++)
		for (int64_t i = 0; i < l.inner; i++) {
			int64_t u = key_at(a, (o * l.len + p) * l.inner + i), v = key_at(a, (o * l.len + q) * l.inner + i);
			if (u != v)
				return u > v ? 1 : -1;
		}
	return 0;
}

struct unique_ctx {
	const struct rtensor *a;
	struct lanes l;
	const int64_t *first; /* NULL: by value; else by the first occurrence of each slice's group */
};

static int unique_before(const void *ctx, int64_t p, int64_t q)
{
	const struct unique_ctx *c = ctx;
	return c->first ? c->first[p] < c->first[q] : slice_cmp(c->a, c->l, p, q) < 0;
}

static int key_lt(const void *ctx, int64_t p, int64_t q)
{
	return key_gt(ctx, q, p);
}

/* a key's hash: murmur3's finaliser (low bits from all) */
static inline uint64_t key_hash(int64_t x)
{
	uint64_t h = (uint64_t)x;
	h = (h ^ h >> 33) * 0xff51afd7ed558ccdull;
	h = (h ^ h >> 33) * 0xc4ceb9fe1a85ec53ull;
	return h ^ h >> 33;
}

/* Unique's groups of one-element slices (a's L elements, equal where their keys are) */
struct unique_groups {
	int64_t *table, hmax; /* up to hmax places, a power of two past 2 L */
	int64_t *first, *key; /* group g's lowest index and its key */
	int64_t *grp, *cnt;   /* slice j's group and group g's count; NULL: not kept */
};

/* a run of n keys against the few groups so far (gk: their keys, gw: their numbers, both padded
 * to UNIQUE_FEW with group 0's, which adds 0): 0 if a key is none of them; else each key's group
 * into grp and the run's count of each group into cnt (where kept). Branch-free vector loops: a
 * run of a bool mask or a label column costs a few compares a key, not a hash. */
#define UNIQUE_FEW 8
VM_CLONES static int unique_few(const int64_t *restrict key, int64_t n, const int64_t *restrict gk,
				const int64_t *restrict gw, int64_t *restrict grp, int64_t *restrict cnt)
{
	int64_t miss = 0;
	for (int64_t j = 0; j < n; j++) {
		int64_t m = 0;
		for (int q = 0; q < UNIQUE_FEW; q++)
			m |= key[j] == gk[q];
		miss |= !m;
	}
	if (miss)
		return 0;
	if (grp)
		for (int64_t j = 0; j < n; j++) {
			int64_t g = 0;
			for (int q = 0; q < UNIQUE_FEW; q++)
				g += gw[q] & -(int64_t)(key[j] == gk[q]);
			grp[j] = g;
		}
	if (cnt)
		for (int q = 0; q < UNIQUE_FEW; q++) {
			int64_t c = 0;
			for (int64_t j = 0; j < n; j++)
				c += key[j] == gk[q];
			cnt[q] = c;
		}
	return 1;
}

/* the groups in one pass: runs of TOPK_RUN keys that hold only the first UNIQUE_FEW groups by
 * unique_few, the others over a hash table from 64 places, doubled (the groups put back) when half
 * full. Groups are numbered in order of first occurrence. Returns the number of groups. */
static int64_t unique_hash(const struct rtensor *a, int64_t L, const struct unique_groups *s)
{
	int64_t u = 0, hb = s->hmax < 64 ? s->hmax : 64, *table = s->table, *gk = s->key, key[TOPK_RUN];
	int64_t fk[UNIQUE_FEW], fw[UNIQUE_FEW], fc[UNIQUE_FEW];
	memset(table, 0xff, (size_t)hb * sizeof *table);
	for (int64_t j0 = 0; j0 < L; j0 += TOPK_RUN) {
		int64_t n = L - j0 < TOPK_RUN ? L - j0 : TOPK_RUN;
		keys_of(a, j0, 1, n, 1, key);
		if (u && u <= UNIQUE_FEW && unique_few(key, n, fk, fw, s->grp ? s->grp + j0 : NULL, s->cnt ? fc : NULL)) {
			for (int64_t q = 0; s->cnt && q < u; q++)
				s->cnt[q] += fc[q];
			continue;
		}
		for (int64_t j = 0; j < n; j++) {
			int64_t kv = key[j], at = (int64_t)(key_hash(kv) & (uint64_t)(hb - 1)), g;
			while ((g = table[at]) >= 0 && gk[g] != kv)
				at = (at + 1) & (hb - 1);
			if (g < 0) {
				g = table[at] = u++;
				s->first[g] = j0 + j;
				gk[g] = kv;
				if (s->cnt)
					s->cnt[g] = 0;
				if (2 * u > hb && hb < s->hmax) { /* distinct keys: each to the first free place */
					hb *= 2;
					memset(table, 0xff, (size_t)hb * sizeof *table);
					for (int64_t q = 0; q < u; q++) {
						int64_t b = (int64_t)(key_hash(gk[q]) & (uint64_t)(hb - 1));
						while (table[b] >= 0)
							b = (b + 1) & (hb - 1);
						table[b] = q;
					}
				}
			}
			if (s->grp)
				s->grp[j0 + j] = g;
			if (s->cnt)
				s->cnt[g]++;
		}
		for (int q = 0; u <= UNIQUE_FEW && q < UNIQUE_FEW; q++) {
			fk[q] = gk[q < u ? q : 0];
			fw[q] = q < u ? q : 0;
		}
	}
	return u;
}

/* Unique(X, axis, sorted) -> (Y, indices, inverse_indices, counts): the distinct slices along
 * axis (elements when no axis: X flattened), ascending (sorted 1) or in order of first occurrence;
 * where each first occurs, which one each input slice is, and how often each occurs. Slices of one
 * element (no axis, or the axis the only one longer than 1) are grouped by their keys (unique_hash:
 * a few compares a key while there are at most UNIQUE_FEW groups, else a hash), then the groups
 * sorted by key (1M int64 over 2 values: 140 ms by sorting all); longer slices are sorted with
 * slice_cmp. The inverse indices and counts are kept only where asked for. */
static int unique_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	if (!a->data)
		return exec_fail(x, "Unique's output length depends on its input's values, which are not known before running");
	int has_axis = node_attr(n, "axis") != NULL, ax = 0;
	if (has_axis && norm_axis(x, attr_int(n, "axis", 0), a->ndim, &ax))
		return exec_status(x);
	struct lanes l = has_axis ? lanes_of(a, ax) : (struct lanes){1, a->numel, 1};
	int64_t L = l.len, hb = 1;
	while (hb < 2 * L + 2)
		hb *= 2;
	/* order, tmp, grp, first, rank, counts (L each), then the hash table (one-element slices) */
	int scalar = l.outer * l.inner == 1;
	int want_inv = n->n_out > 2 && n->out[2], want_cnt = n->n_out > 3 && n->out[3];
	size_t words = (size_t)(6 * L + 1 + (scalar ? hb : 0));
	int64_t *w = exec_scratch_raw(x, words * sizeof *w);
	if (!w)
		return exec_status(x);
	/* grp[j]: slice j's group, first[g]: group g's lowest slice; then tmp: the groups in output
	 * order, rank[g]: group g's place in it */
	int64_t *order = w, *tmp = w + L, *grp = w + 2 * L, *first = w + 3 * L, *rank = w + 4 * L, *cnt = NULL, u = 0;
	int sorted = attr_int(n, "sorted", 1) != 0;
	if (scalar) {
		/* order's first u: the groups' keys, to sort by; grp and the counts where asked for */
		struct unique_groups gs = {w + 6 * L, hb, first, order, want_inv ? grp : NULL, want_cnt ? w + 5 * L : NULL};
		u = unique_hash(a, L, &gs);
		cnt = gs.cnt;
		for (int64_t g = 0; g < u; g++)
			tmp[g] = g;
		if (sorted)
			merge_sort(tmp, rank, u, key_lt, order);
	} else {
		for (int64_t j = 0; j < L; j++)
			order[j] = j;
		struct unique_ctx c = {a, l, NULL};
		merge_sort(order, tmp, L, unique_before, &c);
		for (int64_t s = 0; s < L; s++) {
			if (s == 0 || slice_cmp(a, l, order[s - 1], order[s]) != 0)
				first[u++] = order[s]; /* stable: the group's lowest index */
			grp[order[s]] = u - 1;
		}
		for (int64_t g = 0; g < u; g++)
			tmp[g] = g;
		if (!sorted) {
			c.first = first;
			merge_sort(tmp, order, u, unique_before, &c);
		}
	}
	for (int64_t r = 0; r < u; r++)
		rank[tmp[r]] = r;
	int64_t dims[RT_MAX_DIMS];
	int nd = has_axis ? a->ndim : 1;
	if (has_axis)
		memcpy(dims, a->dims, sizeof dims);
	dims[has_axis ? ax : 0] = u;
	int rc = 0;
	uint8_t *y = exec_alloc(x, out[0], a->dtype, nd, dims);
	int64_t *o[3] = {NULL, NULL, NULL}, len[3] = {u, L, u};
	int missing = 0;
	for (int k = 0; k < 3; k++)
		if (n->n_out > (uint32_t)k + 1 && n->out[k + 1])
			missing |= !(o[k] = exec_alloc(x, out[k + 1], DT_INT64, 1, &len[k]));
	if (!y || missing) {
		rc = exec_status(x);
		goto done;
	}
	size_t es = dtype_size(a->dtype);
	for (int64_t r = 0; r < u; r++) {
		int64_t j = first[tmp[r]];
		for (int64_t p = 0; p < l.outer; p++)
			memcpy(y + ((p * u + r) * l.inner) * es, (const uint8_t *)a->data + ((p * L + j) * l.inner) * es,
			       (size_t)l.inner * es);
		if (o[0])
			o[0][r] = j;
	}
	if (o[1])
		for (int64_t j = 0; j < L; j++)
			o[1][j] = rank[grp[j]];
	if (o[2] && cnt)
		for (int64_t g = 0; g < u; g++)
			o[2][rank[g]] = cnt[g];
	else if (o[2]) {
		memset(o[2], 0, (size_t)u * sizeof *o[2]);
		for (int64_t j = 0; j < L; j++)
			o[2][rank[grp[j]]]++;
	}
done:
	exec_scratch_free(x, w, words * sizeof *w);
	return rc;
}

const struct op_impl op_argmax = {.run = argmax_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_argmin = {.run = argmin_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_hardmax = {.run = hardmax_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_topk = {.run = topk_run, .grad = topk_grad, .cost = topk_cost, .recompute = RC_CHEAP,
				.nodiff = 1u << 1};
const struct op_impl op_nonzero = {.run = nonzero_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_unique = {.run = unique_run, .recompute = RC_CHEAP, .nodiff = ~0u};
