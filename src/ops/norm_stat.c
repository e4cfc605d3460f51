/* norm_stat.c - the typed loops of InstanceNormalization, GroupNormalization,
 * MeanVarianceNormalization, LpNormalization and LRN over float32 or float64 data (norm_stat.h).
 *
 * The ops' rt_get/rt_set walks (norm.c) sum in double, one serial chain per plane, row, column or
 * channel, and round each element's result once to the tensor's type. These loops keep every chain
 * and every expression as they were; what changes is the schedule. STAT_CHAINS independent chains
 * (planes, rows, MVN's channels) are walked side by side, so that their adds overlap instead of each
 * waiting on the one before; chains that sit side by side in memory (LpNormalization's columns,
 * LRN's pixels) are walked as a block, a vector of sums; the elementwise results are loops over
 * contiguous data that vectorise (ISO C: no product and sum is contracted into an FMA). Pieces of
 * independent planes, rows or pixel blocks go to the pool (kernel_for): no result depends on the
 * cut. A NaN comes out a NaN, but its payload is the compiler's operand order's. One result is
 * reached another way: LRN's float32 quotient by a root (beta 0.75, 0.5, 1), or for any other beta
 * by vmath.h's vm_pow_d, where that provably rounds as glibc's pow does, else by pow (lrn_roots,
 * lrn_pow). */
#include "norm_stat.h"
#include "../util/xalloc.h"
#include "kernel.h"
#include "simd.h"
#include "vmath.h"

#include <math.h>

#define STAT_CHAINS 8
#define STAT_BLOCK 256 /* columns or pixels summed as one block: two double arrays in L1 */
#define INLINE static inline __attribute__((always_inline))

/* name: a piece [lo, hi) of kernel_for over the job's units, by f32 or f64 after its a's dtype,
 * given the job, y's and a's data */
#define TYPED_PIECE(name, job, f32, f64)                               \
	VM_CLONES static void name(void *arg, int64_t lo, int64_t hi)  \
	{                                                              \
		const struct job *j = arg;                             \
		if (j->a->dtype == DT_DOUBLE)                          \
			f64(j, j->y->data, j->a->data, lo, hi);        \
		else                                                   \
			f32(j, j->y->data, j->a->data, lo, hi);        \
	}

/* ---- InstanceNormalization and GroupNormalization: contiguous planes ---- */

struct planes_job {
	struct rtensor *y;
	const struct rtensor *a, *scale, *bias;
	int64_t len, sub, groups;
	double eps;
};

/* m planes of len elements from x: each one's mean and its variance about it, as norm.c's
 * moments() walks one (sum from 0 in index order, then the squared differences likewise) */
#define PLANE_MOMENTS(T, name)                                                                              \
	INLINE void name(double *restrict mean, double *restrict var, const T *restrict x, int64_t len, int m) \
	{                                                                                                   \
		double s[STAT_CHAINS] = {0};                                                                \
		for (int64_t j = 0; j < len; j++)                                                           \
			for (int k = 0; k < m; k++)                                                         \
				s[k] += x[k * len + j];                                                     \
		for (int k = 0; k < m; k++) {                                                               \
			mean[k] = s[k] / (double)len;                                                       \
			s[k] = 0;                                                                           \
		}                                                                                           \
		for (int64_t j = 0; j < len; j++)                                                           \
			for (int k = 0; k < m; k++) {                                                       \
				double d = x[k * len + j] - mean[k];                                        \
				s[k] += d * d;                                                              \
			}                                                                                   \
		for (int k = 0; k < m; k++)                                                                 \
			var[k] = s[k] / (double)len;                                                        \
	}
PLANE_MOMENTS(float, moments_f32)
PLANE_MOMENTS(double, moments_f64)

#define AFFINE(T, name)                                                                                      \
	INLINE void name(T *restrict y, const T *restrict x, int64_t n, double m, double inv, double sc, double b) \
	{                                                                                                    \
		for (int64_t i = 0; i < n; i++)                                                              \
			y[i] = (T)((x[i] - m) * inv * sc + b);                                               \
	}

/* planes [p0, p1): STAT_CHAINS at a time, the rest one by one */
#define PLANES(T, name, moments, affine)                                                                   \
	INLINE void name(const struct planes_job *j, T *y, const T *x, int64_t p0, int64_t p1)              \
	{                                                                                                   \
		int64_t len = j->len, sub = j->sub;                                                         \
		double mean[STAT_CHAINS], var[STAT_CHAINS];                                                 \
		for (int64_t p = p0; p < p1;) {                                                             \
			int m = p1 - p >= STAT_CHAINS ? STAT_CHAINS : 1;                                    \
			if (m == STAT_CHAINS)                                                               \
				moments(mean, var, x + p * len, len, STAT_CHAINS);                          \
			else                                                                                \
				moments(mean, var, x + p * len, len, 1);                                    \
			for (int k = 0; k < m; k++, p++) {                                                  \
				double inv = 1 / sqrt(var[k] + j->eps);                                     \
				for (int64_t s0 = 0; s0 < len; s0 += sub) {                                 \
					int64_t e = p % j->groups * (len / sub) + s0 / sub;                 \
					affine(y + p * len + s0, x + p * len + s0, sub, mean[k], inv,       \
					       rt_get(j->scale, e), rt_get(j->bias, e));                    \
				}                                                                           \
			}                                                                                   \
		}                                                                                           \
	}
AFFINE(float, affine_f32)
AFFINE(double, affine_f64)
PLANES(float, planes_f32, moments_f32, affine_f32)
PLANES(double, planes_f64, moments_f64, affine_f64)

TYPED_PIECE(planes_piece, planes_job, planes_f32, planes_f64)

static int typed(const struct rtensor *a)
{
	return a->dtype == DT_FLOAT || a->dtype == DT_DOUBLE;
}

int norm_stat_planes(struct rtensor *y, const struct rtensor *a, const struct rtensor *scale,
		     const struct rtensor *bias, int64_t planes, int64_t len, int64_t sub, int64_t groups, double eps)
{
	if (!typed(a))
		return 1;
	if (len <= 0 || planes <= 0)
		return 0;
	struct planes_job j = {y, a, scale, bias, len, sub, groups, eps};
	int64_t grain = KERNEL_GRAIN / len + 1;
	kernel_for(planes, grain > STAT_CHAINS ? grain : STAT_CHAINS, planes_piece, &j);
	return 0;
}

/* ---- LpNormalization: lines along one axis ---- */

struct lp_job {
	struct rtensor *y;
	const struct rtensor *a;
	int64_t len, inner, blocks; /* blocks: of STAT_BLOCK columns per outer index */
	int l1;
};

/* m contiguous rows of len elements (inner 1): each row's norm a chain, the rows' side by side */
#define LP_ROWS(T, name)                                                                      \
	INLINE void name(T *restrict y, const T *restrict x, int64_t len, int m, int l1)       \
	{                                                                                     \
		double z[STAT_CHAINS] = {0};                                                  \
		for (int64_t j = 0; j < len; j++)                                             \
			for (int k = 0; k < m; k++) {                                         \
				double v = x[k * len + j];                                    \
				z[k] += l1 ? fabs(v) : v * v;                                 \
			}                                                                     \
		for (int k = 0; k < m; k++) {                                                 \
			double zk = l1 ? z[k] : sqrt(z[k]);                                   \
			for (int64_t j = 0; j < len; j++)                                     \
				y[k * len + j] = (T)(x[k * len + j] / zk);                    \
		}                                                                             \
	}
LP_ROWS(float, lp_rows_f32)
LP_ROWS(double, lp_rows_f64)

/* w (<= STAT_BLOCK) neighbouring columns of a (len, inner) block: a vector of chains */
#define LP_COLS(T, name)                                                                                 \
	INLINE void name(T *restrict y, const T *restrict x, int64_t len, int64_t inner, int64_t w, int l1) \
	{                                                                                                \
		double z[STAT_BLOCK];                                                                    \
		for (int64_t t = 0; t < w; t++)                                                          \
			z[t] = 0;                                                                        \
		for (int64_t j = 0; j < len; j++)                                                        \
			for (int64_t t = 0; t < w; t++) {                                                \
				double v = x[j * inner + t];                                             \
				z[t] += l1 ? fabs(v) : v * v;                                            \
			}                                                                                \
		for (int64_t t = 0; !l1 && t < w; t++)                                                   \
			z[t] = sqrt(z[t]);                                                               \
		for (int64_t j = 0; j < len; j++)                                                        \
			for (int64_t t = 0; t < w; t++)                                                  \
				y[j * inner + t] = (T)(x[j * inner + t] / z[t]);                         \
	}
LP_COLS(float, lp_cols_f32)
LP_COLS(double, lp_cols_f64)

/* units [u0, u1): rows (inner 1), else blocks of columns */
#define LP_UNITS(T, name, rows, cols)                                                                         \
	INLINE void name(const struct lp_job *j, T *y, const T *x, int64_t u0, int64_t u1)                     \
	{                                                                                                      \
		int64_t len = j->len, inner = j->inner;                                                        \
		if (inner == 1) {                                                                              \
			for (; u0 + STAT_CHAINS <= u1; u0 += STAT_CHAINS)                                      \
				j->l1 ? rows(y + u0 * len, x + u0 * len, len, STAT_CHAINS, 1)                  \
				      : rows(y + u0 * len, x + u0 * len, len, STAT_CHAINS, 0);                 \
			for (; u0 < u1; u0++)                                                                  \
				j->l1 ? rows(y + u0 * len, x + u0 * len, len, 1, 1) : rows(y + u0 * len, x + u0 * len, len, 1, 0); \
			return;                                                                                \
		}                                                                                              \
		for (int64_t u = u0; u < u1; u++) {                                                            \
			int64_t o = u / j->blocks, t0 = u % j->blocks * STAT_BLOCK;                            \
			int64_t w = inner - t0 < STAT_BLOCK ? inner - t0 : STAT_BLOCK, at = o * len * inner + t0; \
			j->l1 ? cols(y + at, x + at, len, inner, w, 1) : cols(y + at, x + at, len, inner, w, 0); \
		}                                                                                              \
	}
LP_UNITS(float, lp_f32, lp_rows_f32, lp_cols_f32)
LP_UNITS(double, lp_f64, lp_rows_f64, lp_cols_f64)

TYPED_PIECE(lp_piece, lp_job, lp_f32, lp_f64)

int norm_stat_lp(struct rtensor *y, const struct rtensor *a, int64_t outer, int64_t len, int64_t inner, int p)
{
	if (!typed(a))
		return 1;
	if (outer <= 0 || len <= 0 || inner <= 0)
		return 0;
	struct lp_job j = {y, a, len, inner, (inner + STAT_BLOCK - 1) / STAT_BLOCK, p == 1};
	int64_t units = inner == 1 ? outer : outer * j.blocks, per = inner == 1 ? len : len * STAT_BLOCK;
	kernel_for(units, KERNEL_GRAIN / per + 1, lp_piece, &j);
	return 0;
}

/* ---- LRN: a window over the channels, per pixel ---- */

struct lrn_job {
	struct rtensor *y;
	const struct rtensor *a;
	int64_t C, inner, blocks, lo, hi;
	double as, beta, bias; /* as: alpha / size, as the walk computes it first */
};

/* The window sums: each channel's row of squares made once per block into a ring of LRN_RING rows
 * (the walk squared every row once per window it lies in, size times, and added into s[] in
 * memory), the channels outside [0, C) a row of zeros, and s = p[0] + p[1] + ... + p[size - 1]
 * added 8 lanes at a time in registers. The same sum as the walk's, bit for bit: its s starts at 0
 * and 0 + a is a; the zero rows are added where the walk adds nothing, before its first square
 * (0 + 0) or after its last (a + 0 is a: a is never -0, the squares being +0 or more, or NaN). */
#define LRN_RING 16
typedef double lrn_v __attribute__((vector_size(64)));
typedef int64_t lrn_i __attribute__((vector_size(64)));
typedef uint64_t lrn_u __attribute__((vector_size(64)));
typedef float lrn_f __attribute__((vector_size(32)));
typedef int32_t lrn_m __attribute__((vector_size(32)));
typedef int8_t lrn_b __attribute__((vector_size(8)));

/* the window sums of lanes t .. t + 7 into *s */
INLINE void lrn_sum8(lrn_v *s, const double *const *p, int64_t size, int64_t t)
{
	lrn_v v, r;
	memcpy(&v, p[0] + t, sizeof v);
	for (int64_t i = 1; i < size; i++) {
		memcpy(&r, p[i] + t, sizeof r);
		v += r;
	}
	*s = v;
}

/* one lane's window sum, the same adds in the same order */
INLINE double lrn_sum1(const double *const *p, int64_t size, int64_t t)
{
	double v = p[0][t];
	for (int64_t i = 1; i < size; i++)
		v += p[i][t];
	return v;
}

/* float32 results by a root, 8 lanes (x8, y8, ok8) at ring lane t: q = x / d (beta 1), x d^-1/2
 * (0.5) or x (d^-1/4)^3 (0.75), where every real within 2^-40 of q (relative) rounds to one float
 * (vmath.h's vm_settled_f, lane-wise): q is within 2^-49 of x d^-beta for d in [2^-1000, 2^1000], as
 * glibc's pow is (under one ulp), so x / pow(d, beta) lies there too and rounds to that float, the
 * walk's result. Elsewhere (a rounding boundary within reach, one lane in about 2^15; d outside
 * [2^-100, 2^100], tested as a float: GCC 12 makes each lane of a 512-bit double compare a scalar
 * vcomisd, 4.5 ms in all; NaNs) *ok8 is 0 and *bad gets the lane; the caller gives those to
 * x / pow(d, beta).
 *
 * The roots take no square root and no division (the two vsqrtpd and the vdivpd of sqrt(d)
 * sqrt(sqrt(d)) were 1.2 of the 3.1 ms of 8x64x48x48 at beta 0.75): an estimate from d's bits (its
 * exponent, as a logarithm, halved or quartered: within 3.5% and 3.2%), then four Newton steps
 * z <- z (3/2 - d/2 z^2) or z <- z (5/4 - d/4 z^4), each squaring the error (times 1.5 and 2.5):
 * within 2^-51.6 of d^-1/2 and, cubed, 2^-49.9 of d^-3/4 (mpmath, 10^5 random d over the range and
 * every power of 2 with its neighbours); three steps leave 2^-35 and 2^-29. */
INLINE void lrn_roots8(float *y8, uint8_t *ok8, lrn_m *bad, const float *x8, const double *const *p, int64_t size,
		       int64_t t, double bias, double as, int root)
{
	lrn_v s, q, z;
	lrn_f xf;
	lrn_sum8(&s, p, size, t);
	lrn_v d = bias + as * s;
	memcpy(&xf, x8, sizeof xf);
	lrn_v xd = __builtin_convertvector(xf, lrn_v);
	lrn_u u = (lrn_u)d;
	if (root == 1) {
		q = xd / d;
	} else if (root == 2) {
		lrn_v h = 0.5 * d;
		z = (lrn_v)(0x5fe6ec0000000000u - (u >> 1));
		for (int i = 0; i < 4; i++)
			z = z * (1.5 - h * (z * z));
		q = xd * z;
	} else {
		lrn_v h = 0.25 * d;
		z = (lrn_v)(0x4feb0c0000000000u - (u >> 2));
		for (int i = 0; i < 4; i++) {
			lrn_v z2 = z * z;
			z = z * (1.25 - h * (z2 * z2));
		}
		q = xd * (z * z * z);
	}
	lrn_v e = (lrn_v)((lrn_i)q & INT64_MAX) * 0x1p-40;
	lrn_f lo = __builtin_convertvector(q - e, lrn_f), hi = __builtin_convertvector(q + e, lrn_f);
	lrn_f df = __builtin_convertvector(d, lrn_f);
	lrn_m set = (lo == hi) & (df >= 0x1p-100f) & (df <= 0x1p100f);
	lrn_b o = __builtin_convertvector(set, lrn_b);
	memcpy(y8, &lo, sizeof lo);
	memcpy(ok8, &o, sizeof o);
	*bad |= ~set;
}

/* #52 pow: any other beta the same way, d^beta by vmath.h's vm_pow_d (within 2^-42 of it where d is
 * normal and |beta log2 d| <= 150, inside the 2^-40) */
INLINE int lrn_pow(float *restrict y, uint8_t *restrict ok, const float *restrict x, const double *restrict s,
		   int64_t w, double bias, double as, double beta)
{
	int left = 0;
	for (int64_t t = 0; t < w; t++) {
		double d = bias + as * s[t], l, r = vm_pow_d(d, beta, &l);
		float v;
		int k = vm_settled_f(x[t] / r, &v);
		ok[t] = (uint8_t)((d >= 0x1p-1022) & (d < INFINITY) & (fabs(l) <= 150.0) & k);
		left |= !ok[t];
		y[t] = v;
	}
	return left;
}

/* s[t], t < w8 (a multiple of 8), the window sums */
INLINE void lrn_window(double *restrict s, const double *const *p, int64_t size, int64_t w8)
{
	for (int64_t t = 0; t < w8; t += 8) {
		lrn_v v;
		lrn_sum8(&v, p, size, t);
		memcpy(s + t, &v, sizeof v);
	}
}

/* a root's lanes, 8 at a time, the last up to 8 through a padded copy */
INLINE int lrn_roots(float *restrict y, uint8_t *restrict ok, const float *restrict x, const double *const *p,
		     int64_t size, int64_t w, double bias, double as, int root)
{
	lrn_m bad = {0};
	int64_t t = 0;
	for (; t + 8 <= w; t += 8)
		lrn_roots8(y + t, ok + t, &bad, x + t, p, size, t, bias, as, root);
	if (t < w) {
		float x8[8] = {0}, y8[8];
		memcpy(x8, x + t, (size_t)(w - t) * sizeof *x);
		lrn_roots8(y8, ok + t, &bad, x8, p, size, t, bias, as, root);
		memcpy(y + t, y8, (size_t)(w - t) * sizeof *y);
	}
	uint64_t b[4];
	memcpy(b, &bad, sizeof b);
	return (b[0] | b[1] | b[2] | b[3]) != 0;
}

#ifdef SIMD_X86
/* The roots again with AVX-512, where the processor has it (simd_avx512): the same results, as a
 * settled lane is (float)(x / pow(d, beta)) whichever q within reach of x d^-beta is reached, and
 * the others go to x / pow(d, beta). 8x64x48x48 at beta 0.75 was 2.1 ms (17% of its roof) with the
 * four Newton steps' 20 multiplies and the settled test's three conversions. Here, per 8 lanes:
 * - a start from vrsqrt14pd (within 2^-14): z = d^-1/2, or d^-1/4 as rsqrt14(d rsqrt14(d)), within
 *   2^-13.4; then one step of the series (1 - r)^-a = 1 + a r + ..., r = 1 - d z^2 or 1 - d z^4
 *   (an fma), to r^3: x d^-1/2 = x z (1 + r (1/2 + r (3/8 + r 5/16))), x d^-3/4 = x z^3 (1 + r
 *   (3/4 + r (21/32 + r 77/128))), 12 operations for 0.75 where Newton took 15; the product by
 *   (1 + ...) last, so x's -0 gives -0. mpmath (lrnpow-series.py, vrsqrt14pd's result taken at
 *   both ends of its 2^-14 and at random, the fmas rounded once): within 2^-46.4 of d^-3/4 and
 *   2^-51.5 of d^-1/2 over every power of 2 from 2^-1000 to 2^1022 with its neighbours, 3 10^4
 *   random d there and 7500 in [1, 1.001], against the 2^-40 the settled test needs;
 * - the settled test on q's bits, no conversions: m, q's low 29 mantissa bits, more than 2^13 from
 *   2^28 (a midpoint between floats), which is farther than 2^-40 of q; |q| from 2^-126 to
 *   infinity (a float's binades, so that its low 29 bits are those below the float's; the top
 *   binade's midpoint is where a float rounds to infinity; past it, and at infinity, every real
 *   near q rounds to infinity) or q = +-0 (x's zero: 0 / pow(d, beta) is that zero); a NaN q
 *   goes to pow (d = infinity makes q NaN and x / pow(d, beta) 0);
 * - d's range [2^-100, 2^100) tested on d's bits only where the bias is under 2^-100 or alpha is
 *   negative: otherwise d >= bias >= 2^-100 (or NaN: q NaN), and a d past 2^1022, where z^4 is
 *   subnormal, makes |q| under 2^-600 (|x| < 2^128): a lane for pow;
 * - at beta 1 no test: q is x / d, which x / pow(d, 1) is (pow is within an ulp: d exactly).
 * vrsqrt14pd's bits are the processor's (Intel's and AMD's differ, each within 2^-14), q's with
 * them; the floats kept are not. 2.1 -> 1.29 ms (thread CPU, a driver calling norm_stat_lrn);
 * the d test costs 0.08 ms, the zero lanes' test 0.07 ms (each mask compare and mask op about one
 * cycle a lane group). */
#define LRN_MID_LO ((1ll << 28) - (1ll << 13))
#define LRN_Q_LO 0x3810000000000000ll /* 2^-126, 2^-100 and 2^100 as doubles' bits */
#define LRN_Q_W (0x7ff0000000000001ll - LRN_Q_LO) /* 2^-126 to infinity */
#define LRN_D_LO 0x39b0000000000000ll
#define LRN_D_HI 0x4630000000000000ll
SIMD_TARGET static inline __attribute__((always_inline)) __m512d lrn_root_avx512(__m512d d, __m512d xd, int root)
{
	if (root == 1)
		return _mm512_div_pd(xd, d);
	__m512d z = _mm512_rsqrt14_pd(d), one = _mm512_set1_pd(1.0), r, p, q;
	if (root == 2) {
		r = _mm512_fnmadd_pd(d, _mm512_mul_pd(z, z), one);
		p = _mm512_fmadd_pd(r, _mm512_set1_pd(5.0 / 16), _mm512_set1_pd(3.0 / 8));
		p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
		q = _mm512_mul_pd(xd, z);
	} else {
		z = _mm512_rsqrt14_pd(_mm512_mul_pd(d, z));
		__m512d z2 = _mm512_mul_pd(z, z);
		r = _mm512_fnmadd_pd(d, _mm512_mul_pd(z2, z2), one);
		p = _mm512_fmadd_pd(r, _mm512_set1_pd(77.0 / 128), _mm512_set1_pd(21.0 / 32));
		p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.75));
		q = _mm512_mul_pd(xd, _mm512_mul_pd(z2, z));
	}
	return _mm512_mul_pd(q, _mm512_fmadd_pd(p, r, one)); /* q (1 + p r): x's -0 stays -0 */
}

/* lanes t .. t + 7 of m: their floats stored, the mask of those settled */
SIMD_TARGET static inline __attribute__((always_inline)) __mmask8
lrn_lanes_avx512(float *restrict y, const float *restrict x, const double *const *p, int64_t size, int64_t t,
		 __mmask8 m, double bias, double as, int root, int dchk)
{
	__m512d s = _mm512_loadu_pd(p[0] + t); /* the rows hold zeros up to w's multiple of 8 */
	for (int64_t i = 1; i < size; i++)
		s = _mm512_add_pd(s, _mm512_loadu_pd(p[i] + t));
	__m512d d = _mm512_add_pd(_mm512_set1_pd(bias), _mm512_mul_pd(_mm512_set1_pd(as), s));
	__m512d xd = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(m, x + t)));
	__m512d q = lrn_root_avx512(d, xd, root);
	_mm512_mask_storeu_ps(y + t, m, _mm512_castps256_ps512(_mm512_cvtpd_ps(q))); /* AVX-512F: 16-lane masks */
	if (root == 1)
		return m;
	__m512i qi = _mm512_and_si512(_mm512_castpd_si512(q), _mm512_set1_epi64(INT64_MAX));
	__mmask8 set = _mm512_cmplt_epu64_mask(_mm512_sub_epi64(qi, _mm512_set1_epi64(LRN_Q_LO)), _mm512_set1_epi64(LRN_Q_W));
	set |= _mm512_cmpeq_epi64_mask(qi, _mm512_setzero_si512());
	__m512i mid = _mm512_sub_epi64(_mm512_and_si512(qi, _mm512_set1_epi64((1ll << 29) - 1)), _mm512_set1_epi64(LRN_MID_LO));
	set &= _mm512_cmpgt_epu64_mask(mid, _mm512_set1_epi64(1ll << 14));
	if (dchk)
		set &= _mm512_cmplt_epu64_mask(_mm512_sub_epi64(_mm512_castpd_si512(d), _mm512_set1_epi64(LRN_D_LO)),
					       _mm512_set1_epi64(LRN_D_HI - LRN_D_LO));
	return set & m;
}

/* the unsettled lanes of t .. t + 7 (bad's bits) by pow */
static void lrn_fix(float *restrict y, const float *restrict x, const double *const *p, int64_t size, int64_t t,
		    unsigned bad, double bias, double as, double beta)
{
	for (; bad; bad &= bad - 1) {
		int64_t k = t + __builtin_ctz(bad);
		y[k] = (float)(x[k] / pow(bias + as * lrn_sum1(p, size, k), beta));
	}
}

/* 32 lanes a step, one branch to pow for the four masks (8 lanes a step: 1.34-1.43 ms against
 * 1.29-1.32) */
SIMD_TARGET static inline __attribute__((always_inline)) void
lrn_roots_avx512(float *restrict y, const float *restrict x, const double *const *p, int64_t size, int64_t w,
		 double bias, double as, int root, int dchk)
{
	double beta = root == 1 ? 1 : root == 2 ? 0.5 : 0.75;
	int64_t t = 0;
	for (; t + 32 <= w; t += 32) {
		__mmask8 k0 = lrn_lanes_avx512(y, x, p, size, t, 0xff, bias, as, root, dchk);
		__mmask8 k1 = lrn_lanes_avx512(y, x, p, size, t + 8, 0xff, bias, as, root, dchk);
		__mmask8 k2 = lrn_lanes_avx512(y, x, p, size, t + 16, 0xff, bias, as, root, dchk);
		__mmask8 k3 = lrn_lanes_avx512(y, x, p, size, t + 24, 0xff, bias, as, root, dchk);
		unsigned all = (unsigned)k0 | (unsigned)k1 << 8 | (unsigned)k2 << 16 | (unsigned)k3 << 24;
		if (all != 0xffffffffu)
			for (int i = 0; i < 4; i++)
				lrn_fix(y, x, p, size, t + 8 * i, ~all >> 8 * i & 0xff, bias, as, beta);
	}
	for (; t < w; t += 8) {
		__mmask8 m = w - t >= 8 ? 0xff : (__mmask8)((1u << (w - t)) - 1);
		lrn_fix(y, x, p, size, t, m & ~lrn_lanes_avx512(y, x, p, size, t, m, bias, as, root, dchk), bias, as, beta);
	}
}

SIMD_TARGET static void lrn_roots_any_avx512(float *restrict y, const float *restrict x, const double *const *p,
					     int64_t size, int64_t w, double bias, double as, int root)
{
	int known = bias >= 0x1p-100 && as >= 0; /* d >= bias: no lane needs d's range tested */
	if (root == 1)
		lrn_roots_avx512(y, x, p, size, w, bias, as, 1, 0);
	else if (root == 2 && known)
		lrn_roots_avx512(y, x, p, size, w, bias, as, 2, 0);
	else if (root == 2)
		lrn_roots_avx512(y, x, p, size, w, bias, as, 2, 1);
	else if (known)
		lrn_roots_avx512(y, x, p, size, w, bias, as, 3, 0);
	else
		lrn_roots_avx512(y, x, p, size, w, bias, as, 3, 1);
}
#endif

/* channel row y, x of w pixels from the window's rows p (their sums: s) */
INLINE void lrn_out_f32(float *restrict y, const float *restrict x, const double *const *p, int64_t size,
			double *restrict s, int64_t w, int64_t w8, const struct lrn_job *j)
{
	uint8_t ok[STAT_BLOCK];
	int root = j->beta == 1 ? 1 : j->beta == 0.5 ? 2 : j->beta == 0.75 ? 3 : 0, left;
#ifdef SIMD_X86
	if (root && simd_avx512()) {
		lrn_roots_any_avx512(y, x, p, size, w, j->bias, j->as, root);
		return;
	}
#endif
	if (root == 1)
		left = lrn_roots(y, ok, x, p, size, w, j->bias, j->as, 1);
	else if (root == 2)
		left = lrn_roots(y, ok, x, p, size, w, j->bias, j->as, 2);
	else if (root == 3)
		left = lrn_roots(y, ok, x, p, size, w, j->bias, j->as, 3);
	else {
		lrn_window(s, p, size, w8);
		left = lrn_pow(y, ok, x, s, w, j->bias, j->as, j->beta);
	}
	for (int64_t t = 0; left && t < w; t++)
		if (!ok[t])
			y[t] = (float)(x[t] / pow(j->bias + j->as * lrn_sum1(p, size, t), j->beta));
}

INLINE void lrn_out_f64(double *restrict y, const double *restrict x, const double *const *p, int64_t size,
			double *restrict s, int64_t w, int64_t w8, const struct lrn_job *j)
{
	lrn_window(s, p, size, w8);
	for (int64_t t = 0; t < w; t++)
		y[t] = x[t] / pow(j->bias + j->as * s[t], j->beta);
}

/* w (<= STAT_BLOCK) neighbouring pixels of one image (C, inner) from x, each pixel's window over
 * the channels in order, the block's pixels side by side; a window wider than LRN_RING walks
 * the channels one by one as norm.c does */
#define LRN_BLOCK(T, name, out)                                                                             \
	INLINE void name(T *restrict y, const T *restrict x, const struct lrn_job *j, int64_t w)             \
	{                                                                                                   \
		double s[STAT_BLOCK], ring[LRN_RING][STAT_BLOCK], zero[STAT_BLOCK] = {0};                   \
		const double *p[LRN_RING];                                                                  \
		int64_t C = j->C, inner = j->inner, lo = j->lo, hi = j->hi, size = lo + hi + 1;             \
		int64_t w8 = (w + 7) / 8 * 8;                                                               \
		for (int64_t c = size <= LRN_RING ? -hi : 0; c < C; c++) {                                  \
			int64_t k = c + hi;                                                                 \
			if (size > LRN_RING) {                                                              \
				for (int64_t t = 0; t < w8; t++) /* past w: the lanes read, not kept */     \
					s[t] = 0;                                                           \
				for (k = c - lo > 0 ? c - lo : 0; k <= c + hi && k < C; k++)                \
					for (int64_t t = 0; t < w; t++) {                                   \
						double v = x[k * inner + t];                                \
						s[t] += v * v;                                              \
					}                                                                   \
				p[0] = s;                                                                   \
				out(y + c * inner, x + c * inner, p, 1, ring[0], w, w8, j);                 \
				continue;                                                                   \
			}                                                                                   \
			if (k < C) {                                                                        \
				double *r = ring[k % size];                                                 \
				for (int64_t t = 0; t < w; t++) {                                           \
					double v = x[k * inner + t];                                        \
					r[t] = v * v;                                                       \
				}                                                                           \
				for (int64_t t = w; t < w8; t++)                                            \
					r[t] = 0;                                                           \
			}                                                                                   \
			if (c < 0)                                                                          \
				continue;                                                                   \
			for (int64_t i = 0; i < size; i++)                                                  \
				p[i] = c - lo + i < 0 || c - lo + i >= C ? zero : ring[(c - lo + i) % size]; \
			out(y + c * inner, x + c * inner, p, size, s, w, w8, j);                            \
		}                                                                                           \
	}
LRN_BLOCK(float, lrn_block_f32, lrn_out_f32)
LRN_BLOCK(double, lrn_block_f64, lrn_out_f64)

VM_CLONES static void lrn_piece(void *arg, int64_t u0, int64_t u1)
{
	const struct lrn_job *j = arg;
	for (int64_t u = u0; u < u1; u++) {
		int64_t n = u / j->blocks, t0 = u % j->blocks * STAT_BLOCK, at = n * j->C * j->inner + t0;
		int64_t w = j->inner - t0 < STAT_BLOCK ? j->inner - t0 : STAT_BLOCK;
		if (j->a->dtype == DT_DOUBLE)
			lrn_block_f64((double *)j->y->data + at, (const double *)j->a->data + at, j, w);
		else
			lrn_block_f32((float *)j->y->data + at, (const float *)j->a->data + at, j, w);
	}
}

int norm_stat_lrn(struct rtensor *y, const struct rtensor *a, int64_t C, int64_t size, double alpha, double beta,
		  double bias)
{
	if (!typed(a))
		return 1;
	int64_t N = a->dims[0], inner = N * C != 0 ? a->numel / (N * C) : 0;
	if (inner <= 0)
		return 0;
	struct lrn_job j = {y, a, C, inner, (inner + STAT_BLOCK - 1) / STAT_BLOCK, (size - 1) / 2, size / 2,
			    alpha / (double)size, beta, bias};
	kernel_for(N * j.blocks, KERNEL_GRAIN / (C * STAT_BLOCK) + 1, lrn_piece, &j);
	return 0;
}

/* ---- MeanVarianceNormalization: sums over any axes ----
 *
 * The shape with its 1s dropped and neighbouring axes alike (reduced or kept) merged; a's elements
 * then fall in runs of the last merged axis's L: when it is kept, run o's element t goes to sum
 * base(o) + t (a vector of chains), when reduced, all of them to base(o) (one chain; runs of
 * different sums side by side, STAT_CHAINS at a time, each sum's runs still in index order). */
struct mvn_view {
	int nm, red_last;
	int64_t md[RT_MAX_DIMS], kst[RT_MAX_DIMS], L, runs;
};

static int64_t run_base(const struct mvn_view *v, int64_t o)
{
	int64_t j = 0;
	for (int d = v->nm - 2; d >= 0; d--) {
		j += o % v->md[d] * v->kst[d];
		o /= v->md[d];
	}
	return j;
}

#define MVN_SUMS(T, name)                                                                                 \
	INLINE void name##_kept(double *restrict s1, double *restrict s2, const T *restrict x, int64_t n)  \
	{                                                                                                 \
		for (int64_t t = 0; t < n; t++) {                                                         \
			double v = x[t];                                                                  \
			s1[t] += v;                                                                       \
			s2[t] += v * v;                                                                   \
		}                                                                                         \
	}                                                                                                 \
	INLINE void name##_chains(double *restrict s1, double *restrict s2, const T *restrict x, int64_t L, \
				  const int64_t *jb, int m)                                               \
	{                                                                                                 \
		double a1[STAT_CHAINS], a2[STAT_CHAINS];                                                  \
		for (int k = 0; k < m; k++)                                                               \
			a1[k] = s1[jb[k]], a2[k] = s2[jb[k]];                                             \
		for (int64_t t = 0; t < L; t++)                                                           \
			for (int k = 0; k < m; k++) {                                                     \
				double v = x[k * L + t];                                                  \
				a1[k] += v;                                                               \
				a2[k] += v * v;                                                           \
			}                                                                                 \
		for (int k = 0; k < m; k++)                                                               \
			s1[jb[k]] = a1[k], s2[jb[k]] = a2[k];                                             \
	}                                                                                                 \
	INLINE void name(const struct mvn_view *v, double *s1, double *s2, const T *x)                    \
	{                                                                                                 \
		int64_t L = v->L;                                                                         \
		for (int64_t o = 0; !v->red_last && o < v->runs; o++) {                                   \
			int64_t b = run_base(v, o);                                                       \
			name##_kept(s1 + b, s2 + b, x + o * L, L);                                        \
		}                                                                                         \
		for (int64_t o = 0; v->red_last && o < v->runs;) {                                        \
			int64_t jb[STAT_CHAINS];                                                          \
			int m = 0, dup = 0;                                                               \
			for (; m < STAT_CHAINS && o + m < v->runs && !dup; m++) {                         \
				jb[m] = run_base(v, o + m);                                               \
				for (int k = 0; k < m; k++)                                               \
					dup |= jb[k] == jb[m];                                            \
			}                                                                                 \
			if (m == STAT_CHAINS && !dup) {                                                   \
				name##_chains(s1, s2, x + o * L, L, jb, STAT_CHAINS);                     \
				o += STAT_CHAINS;                                                         \
			} else {                                                                          \
				name##_chains(s1, s2, x + o * L, L, jb, 1);                               \
				o++;                                                                      \
			}                                                                                 \
		}                                                                                         \
	}
MVN_SUMS(float, mvn_sums_f32)
MVN_SUMS(double, mvn_sums_f64)

VM_CLONES static void mvn_sums(const struct mvn_view *v, double *s1, double *s2, const struct rtensor *a)
{
	if (a->dtype == DT_DOUBLE)
		mvn_sums_f64(v, s1, s2, a->data);
	else
		mvn_sums_f32(v, s1, s2, a->data);
}

struct mvn_job {
	struct rtensor *y;
	const struct rtensor *a;
	const struct mvn_view *v;
	const double *mean, *den;
};

/* runs [o0, o1) of y = (x - mean) / den */
#define MVN_OUT(T, name)                                                                                    \
	INLINE void name(T *restrict y, const T *restrict x, const double *restrict mean,                  \
			 const double *restrict den, int64_t n, int red)                                    \
	{                                                                                                   \
		for (int64_t t = 0; red && t < n; t++)                                                      \
			y[t] = (T)((x[t] - mean[0]) / den[0]);                                              \
		for (int64_t t = 0; !red && t < n; t++)                                                     \
			y[t] = (T)((x[t] - mean[t]) / den[t]);                                              \
	}
MVN_OUT(float, mvn_out_f32)
MVN_OUT(double, mvn_out_f64)

VM_CLONES static void mvn_piece(void *arg, int64_t o0, int64_t o1)
{
	const struct mvn_job *j = arg;
	int64_t L = j->v->L;
	int red = j->v->red_last;
	for (int64_t o = o0; o < o1; o++) {
		int64_t b = run_base(j->v, o);
		if (j->a->dtype == DT_DOUBLE)
			mvn_out_f64((double *)j->y->data + o * L, (const double *)j->a->data + o * L, j->mean + b,
				    j->den + b, L, red);
		else
			mvn_out_f32((float *)j->y->data + o * L, (const float *)j->a->data + o * L, j->mean + b,
				    j->den + b, L, red);
	}
}

int norm_stat_mvn(struct rtensor *y, const struct rtensor *a, const uint8_t *red)
{
	if (!typed(a))
		return 1;
	if (a->numel <= 0)
		return 0;
	struct mvn_view v = {0};
	uint8_t mr[RT_MAX_DIMS];
	int64_t cnt = 1;
	for (int d = 0; d < a->ndim; d++) {
		cnt *= red[d] ? a->dims[d] : 1;
		if (a->dims[d] == 1)
			continue;
		if (v.nm && mr[v.nm - 1] == red[d]) {
			v.md[v.nm - 1] *= a->dims[d];
			continue;
		}
		mr[v.nm] = red[d];
		v.md[v.nm++] = a->dims[d];
	}
	if (!v.nm) {
		mr[0] = 0;
		v.md[v.nm++] = 1;
	}
	int64_t k = 1;
	for (int d = v.nm - 1; d >= 0; d--) {
		v.kst[d] = mr[d] ? 0 : k;
		k *= mr[d] ? 1 : v.md[d];
	}
	v.red_last = mr[v.nm - 1];
	v.L = v.md[v.nm - 1];
	v.runs = a->numel / v.L;
	double *s = xcalloc((size_t)(2 * k), sizeof *s); /* k: the sums, one per kept index */
	if (!s)
		return -1;
	mvn_sums(&v, s, s + k, a);
	for (int64_t i = 0; i < k; i++) { /* the mean, then the divisor, in their places */
		double m = s[i] / (double)cnt, q = s[k + i] / (double)cnt - m * m;
		s[i] = m;
		s[k + i] = sqrt(q > 0 ? q : 0) + 1e-9;
	}
	struct mvn_job j = {y, a, &v, s, s + k};
	kernel_for(v.runs, KERNEL_GRAIN / v.L + 1, mvn_piece, &j);
	xfree(s);
	return 0;
}
