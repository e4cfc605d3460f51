/* vmath.h - exp, erf and tanh for float32 kernels, written without branches or tables so that
 * the compiler vectorises the loops that call them (src/ops/ builds at -O3).
 *
 * Every element is computed by the same arithmetic whether a loop runs vectorised or not, so
 * results are deterministic and independent of the vector width. Accuracy against the
 * double-precision libm (the worst of 2^24 evenly spaced inputs; tests/test_exec.c holds each to the
 * bound given, on 2^20):
 *   vm_expf   1.1 ulp (bound 2) for x in [-87.3, 88.7]; below, gradual underflow (denormals) down to
 *             0 at x < -103.9; +inf above 88.72; NaN stays NaN.
 *   vm_erff   2.5 ulp (bound 3), 1.3e-7 absolute: x p(x^2) for |x| < 1, and 1 - exp(-x^2) g(x - 2.5)
 *             on 1 <= |x| < 4 (erfc's smooth factor); +-1 beyond, where erfc is below half an ulp of 1.
 *   vm_tanhf  1.3 ulp (bound 2): x p(x^2) for |x| < 0.625, 1 - 2 / (e^2|x| + 1) above, with the sign.
 *   vm_geluf  (Gelu, x Phi(x)) 1.76 ulp of max(|y|, |x| / 2) (Gelu's bound 3): two polynomials, no
 *             exp (at vm_geluf).
 * and (#52 actfast; tests/kernels/elem.c's vmath/activations_within_their_ulp_bounds, every 2048th
 * float and 2^21 points in [-25, 25], all special values):
 *   vm_expm1f 1.55 ulp (bound 2); vm_logf 1.84 ulp (bound 2); vm_softplusf 2.48 ulp (bound 3):
 *             series with exact coefficients 1/(2k+1), no fit.
 * The polynomials are least-squares fits on Chebyshev nodes, weighted to relative error, made by
 * tests/bench/fit_vmath.py (numpy). */
#ifndef GD_VMATH_H
#define GD_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A kernel whose loops call these, compiled three times: for x86-64-v4 (AVX-512), x86-64-v3 (AVX2
 * and FMA) and the x86-64 baseline, the one the processor runs chosen at load time. The
 * polynomials are evaluated with fmaf, which is exactly rounded everywhere: the v3 and v4 clones
 * make it one vector FMA, the baseline a libm call (slower, the same bits). C11 (not GNU C) does
 * not contract other a * b + c into FMA, so all three compute the same bits, 16, 8 or 4 lanes at a
 * time. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VM_CLONES
#endif

static inline float vm_bits_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* e^x = 2^n e^r, x = n ln2 + r, |r| <= ln2 / 2: n (rounded x log2(e)) and e^r - 1 = r + r^2 q(r),
 * which keeps its relative accuracy as r goes to 0 (r is x itself when n is 0). */
static inline float vm_expm1_parts(float x, int32_t *n)
{
	float t = fmaf(x, 1.44269504f, 12582912.0f); /* 1.5 2^23: rounds x log2(e) */
	float fn = t - 12582912.0f;
	uint32_t tb;
	memcpy(&tb, &t, sizeof tb);
	*n = (int32_t)(tb - 0x4B400000u);
	float r = fmaf(fn, 2.12194440e-4f, fmaf(fn, -0.693359375f, x));
	float q = fmaf(r, fmaf(r, fmaf(r, fmaf(r, 0.0013893929f, 0.0083637182f), 0.041666955f), 0.16666573f), 0.5f);
	return fmaf(r * r, q, r);
}

static inline float vm_exp_parts(float x, int32_t *n)
{
	return 1.0f + vm_expm1_parts(x, n);
}

static inline float vm_expf(float x)
{
	/* 2^n applied as two factors so that n up to 129 and down to -150 (denormal results) stay
	 * normal floats on the way */
	int32_t n;
	float p = vm_exp_parts(x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x, &n); /* NaN passes */
	int32_t h = n / 2;
	return p * vm_bits_float((uint32_t)(h + 127) << 23) * vm_bits_float((uint32_t)(n - h + 127) << 23);
}

/* e^x for x in [-88, 89] or NaN (callers clamp): 2^n one factor, (n + 127) 2^23's bits, so vm_expf's
 * bits for x in [-87.68, 88.37] (n in [-126, 127]: p 2^n rounds once, as vm_expf's two factors do), 0
 * below (n = -127: the exponent field 0) and +inf above (n = 128). Without vm_expf's clamps and second
 * factor (n / 2 and a second product; the clamp at the top alone was 11% of a 4096 x 4096
 * ReduceLogSumExp's time). */
static inline float vm_expf_in(float x)
{
	int32_t n;
	float p = vm_exp_parts(x, &n);
	return p * vm_bits_float((uint32_t)(n + 127) << 23);
}

/* e^d for a row's d = x - max <= 0 (or NaN) whose exponentials only feed a sum holding the max's 1
 * (ReduceLogSumExp, LogSoftmax, SoftmaxCrossEntropyLoss): vm_expf's bits from -87 on, 0 below (e^-87
 * = 1.6e-38, under 2^-125 of that 1: a row's sum of them moves no double's bits but where the sum
 * sits that close to a rounding boundary) */
static inline float vm_expf_row(float d)
{
	float v = vm_expf_in(d < -87.0f ? -87.0f : d);
	return d < -87.0f ? 0.0f : v;
}

/* e^x - 1 = 2^n (e^r - 1) + (2^n - 1), one rounding (fmaf): 2^n - 1 is exact for the n in [-44, 44]
 * of |x| <= 30; beyond, e^x - 1 is e^x or -1 to float precision. -0 stays -0. */
static inline float vm_expm1f(float x)
{
	int32_t n;
	float u = vm_expm1_parts(x < -30.0f ? -30.0f : x > 30.0f ? 30.0f : x, &n); /* NaN passes */
	float two = vm_bits_float((uint32_t)(n + 127) << 23);
	float y = fmaf(two, u, two - 1.0f);
	y = x > 30.0f ? vm_expf(x) : y;
	return x == 0 ? x : y;
}

/* log(1 + e^x) = max(x, 0) + log1p(t), t = e^-|x| in (0, 1]: log1p(t) = 2 atanh(s), s = t / (2 + t)
 * in (0, 1/3], by its series 2 (s + s^3/3 + ... + s^15/15) (the next term is below 1.5e-9 of the
 * sum): no cancellation anywhere, and it goes to t as t underflows. */
static inline float vm_softplusf(float x)
{
	float t = vm_expf(x < 0 ? x : -x), s = t / (2.0f + t), z = s * s;
	float p = fmaf(z, 1.0f / 15, 1.0f / 13);
	p = fmaf(z, p, 1.0f / 11);
	p = fmaf(z, p, 1.0f / 9);
	p = fmaf(z, p, 1.0f / 7);
	p = fmaf(z, p, 1.0f / 5);
	p = fmaf(z, p, 1.0f / 3);
	float s2 = 2.0f * s, l = fmaf(s2 * z, p, s2);
	return (x > 0 ? x : 0.0f) + l; /* NaN: t and l are NaN */
}

/* log x = k ln2 + log m, x = 2^k m, m in [sqrt(1/2), sqrt(2)): log m = 2 atanh(s), s = (m - 1) / (m + 1)
 * in [-0.172, 0.172] (m - 1 exact), by its series 2 (s + s^3/3 + ... + s^13/13) (the next term is
 * below 1e-13 of the sum); ln2 in two parts, k ln2's high part exact. Subnormal x scaled by 2^23
 * first; log 0 = -inf, log of a negative number NaN, log +inf = +inf, NaN stays NaN. */
static inline float vm_logf(float x)
{
	int sub = x < 1.17549435e-38f;
	float xs = sub ? x * 8388608.0f : x;
	uint32_t ix;
	memcpy(&ix, &xs, sizeof ix);
	ix += 0x3f800000u - 0x3f3504f3u;
	float k = (float)((int32_t)(ix >> 23) - 127 - (sub ? 23 : 0));
	float m = vm_bits_float((ix & 0x007fffffu) + 0x3f3504f3u), s = (m - 1.0f) / (m + 1.0f), z = s * s;
	float p = fmaf(z, 1.0f / 13, 1.0f / 11);
	p = fmaf(z, p, 1.0f / 9);
	p = fmaf(z, p, 1.0f / 7);
	p = fmaf(z, p, 1.0f / 5);
	p = fmaf(z, p, 1.0f / 3);
	float s2 = 2.0f * s, lm = fmaf(s2 * z, p, s2);
	float y = fmaf(k, 0.693145752f, fmaf(k, 1.42860677e-06f, lm)); /* ln2 = 0.693145752 + 1.42860677e-06 */
	y = x == 0 ? -INFINITY : x < 0 ? NAN : y;
	return x == INFINITY || x != x ? x : y;
}

static inline float vm_erff(float x)
{
	float a = x < 0 ? -x : x, z = x * x;
	float p = fmaf(z, 7.8982099e-05f, -0.00080243539f);
	p = fmaf(z, p, 0.0051900535f);
	p = fmaf(z, p, -0.026854809f);
	p = fmaf(z, p, 0.11283612f);
	p = fmaf(z, p, -0.37612629f);
	float small = x * fmaf(z, p, 1.1283792f);
	float a4 = a < 4.0f ? a : 4.0f, s = a4 - 2.5f; /* NaN: 4 */
	float g = fmaf(s, -3.8357987e-07f, 1.6588418e-06f);
	g = fmaf(s, g, -4.0093432e-06f);
	g = fmaf(s, g, 1.4425777e-05f);
	g = fmaf(s, g, -5.8942707e-05f);
	g = fmaf(s, g, 0.00021283205f);
	g = fmaf(s, g, -0.00073371298f);
	g = fmaf(s, g, 0.0024660928f);
	g = fmaf(s, g, -0.0080014747f);
	g = fmaf(s, g, 0.024938174f);
	g = fmaf(s, g, -0.074347362f);
	g = fmaf(s, g, 0.21080635f);
	float e = vm_expf_in(-a4 * a4); /* e^-z for |x| < 4 (the lanes that keep big): -z >= -16 */
	float big = fmaf(-e, g, 1.0f);
	big = a >= 4.0f ? 1.0f : big;
	big = x < 0 ? -big : big;
	return a < 1.0f || x != x ? small : big;
}

/* Gelu's erf form x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, without erf: x (1/2 + x s(x^2)) for
 * |x| < 1 (s: (Phi(x) - 1/2) / x, 7e-10 relative); beyond, x Q(|x|) below 0 and x - |x| Q(|x|) above,
 * Q(a) = erfc(a / sqrt 2) / 2 = 1 - Phi(a) by one polynomial in a - 3.3 on [1, 5.6] (8.3e-9
 * absolute), 0 from 5.6 on (Q(5.6) = 1.1e-8: x, or -0, is within 0.2 ulp of max(|y|, |x| / 2)).
 * Weighted least squares, reweighted towards minimax (mpmath), float coefficients. 1.76 ulp of
 * max(|y|, |x| / 2) over every float of [-10, 10] from 2^-30 on (0.5 x (1 + vm_erff) was 2.04),
 * in 0.76 of the time: no exp, where vm_erff evaluates both its branches and one (9.4 ms for 16M
 * elements in the first level cache, 12.3 before). -inf gives NaN (-inf 0), as the definition does. */
static inline float vm_geluf(float x)
{
	float a = x < 0 ? -x : x, c = a < 5.6f ? a : 5.6f, z = x * x;
	float s = fmaf(z, 5.36838854e-07f, -9.27311794e-06f);
	s = fmaf(z, s, 0.000115319293f);
	s = fmaf(z, s, -0.00118728797f);
	s = fmaf(z, s, 0.00997355022f);
	s = fmaf(z, s, -0.066490382f);
	s = fmaf(z, s, 0.398942292f);
	float small = fmaf(x, x * s, 0.5f * x);
	float t = c - 3.3f;
	float q = fmaf(t, -5.38013278e-09f, 1.4230257e-08f);
	q = fmaf(t, q, 1.35385761e-07f);
	q = fmaf(t, q, -6.05774972e-07f);
	q = fmaf(t, q, -4.03440822e-07f);
	q = fmaf(t, q, 8.32540627e-06f);
	q = fmaf(t, q, -2.31235645e-05f);
	q = fmaf(t, q, 3.42685871e-06f);
	q = fmaf(t, q, 0.000195641405f);
	q = fmaf(t, q, -0.000806709751f);
	q = fmaf(t, q, 0.0018682949f);
	q = fmaf(t, q, -0.00283970591f);
	q = fmaf(t, q, 0.00284236297f);
	q = fmaf(t, q, -0.00172252581f);
	q = fmaf(t, q, 0.000483418844f);
	q = a < 5.6f ? q : 0.0f; /* NaN: 0, and x - c 0 stays NaN */
	float big = x < 0 ? x * q : fmaf(-c, q, x);
	return a < 1.0f ? small : big;
}

static inline float vm_tanhf(float x)
{
	float a = x < 0 ? -x : x, z = x * x;
	float p = fmaf(z, -0.0056975223f, 0.020630307f);
	p = fmaf(z, p, -0.053735863f);
	p = fmaf(z, p, 0.13331366f);
	p = fmaf(z, p, -0.33333275f);
	float small = x * fmaf(z, p, 1.0f);
	float big = 1.0f - 2.0f / (vm_expf(2.0f * (a < 10.0f ? a : 10.0f)) + 1.0f);
	big = x < 0 ? -big : big;
	return a < 0.625f || x != x ? small : big;
}

/* #52 trig: float32 trigonometric and hyperbolic functions, evaluated in double from the float
 * argument and rounded to float once: each polynomial is its Taylor or atanh series with exact
 * coefficients (1 / k!, 1 / (2k + 1), ...), cut where the next term is below 2^-40 of the sum, so the
 * double result is within about 1e-11 of the function and the float one within 0.5 ulp plus that
 * (tests/kernels/elem.c's vmath/trig_within_their_ulp_bounds holds each to 1 ulp against libm in
 * double, on every 2048th float, 2^21 points in [-25, 25], and the special values). Plain double
 * arithmetic (no fma: C11 does not contract), so every clone computes the same bits:
 *   vm_sinf, vm_cosf, vm_tanf  x = n pi/2 + r, |r| <= pi/4 (pi/2 in two parts, the high one of 33
 *             bits: n pi/2's high part exact for |x| <= VM_TRIG_MAX); sin r and cos r by their series,
 *             chosen and signed by n mod 4; tan as their quotient. Beyond VM_TRIG_MAX, and at
 *             infinities and NaN, the result is not the function: kernels give those elements to
 *             libm (vm_trig_fast says which).
 *   vm_atanf  a = |x| reduced to |u| <= tan(pi/8) by atan a = k pi/4 + atan u (u = a, (a - 1) /
 *             (a + 1) or -1 / a), atan u by its series to u^29; the sign of x.
 *   vm_asinf  atan(x / sqrt((1 - x)(1 + x))); vm_acosf 2 atan(sqrt((1 - x) / (1 + x))); NaN outside
 *             [-1, 1] (a square root of a negative number).
 *   vm_sinhf, vm_coshf  (e^a -+ e^-a) / 2 with e^a in double (vm_exp_d), sinh by its series below
 *             a = 1/2 (no cancellation); vm_asinhf log(a + sqrt(a^2 + 1)) (vm_log_d), vm_atanhf
 *             log((1 + a) / (1 - a)) / 2, both by their series below a = 1/8; vm_acoshf
 *             log(x + sqrt((x - 1)(x + 1))). */
#define VM_TRIG_MAX 262144.0f /* 2^18 */

static inline double vm_bits_double(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

/* c[0] z^(n-1) + ... + c[n-1] by Horner's rule (a constant n and c: unrolled, the loads folded) */
static inline __attribute__((always_inline)) double vm_horner_d(double z, const double *c, int n)
{
	double p = c[0];
	for (int i = 1; i < n; i++)
		p = p * z + c[i];
	return p;
}

/* e^a in double for a in [-700, 700] (callers clamp; NaN passes): a = n ln2 + r, |r| <= ln2 / 2,
 * e^r by its series to r^13 / 13! (relative error below 2e-16 + 1e-17) */
static inline double vm_exp_d(double a)
{
	double t = a * 1.4426950408889634 + 6755399441055744.0; /* 1.5 2^52: rounds a log2(e) */
	double fn = t - 6755399441055744.0;
	uint64_t tb;
	memcpy(&tb, &t, sizeof tb);
	int64_t n = (int64_t)(tb - 0x4338000000000000u);
	double r = (a - fn * 6.93147180369123816490e-01) - fn * 1.90821492927058770002e-10;
	static const double c[] = {1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880,
				   1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0};
	double p = vm_horner_d(r, c, 14);
	return p * vm_bits_double((uint64_t)(n + 1023) << 52);
}

/* log y in double for y >= 2^-1022 (callers pass 1 or more, +inf or NaN; 0 gives -inf, below 0
 * NaN): y = 2^k m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1), by its series
 * to s^17 / 17 */
static inline double vm_log_d(double y)
{
	uint64_t iy;
	memcpy(&iy, &y, sizeof iy);
	iy += 0x3ff0000000000000u - 0x3fe6a09e667f3bcdu;
	double k = (double)((int64_t)(iy >> 52) - 1023);
	double m = vm_bits_double((iy & 0x000fffffffffffffu) + 0x3fe6a09e667f3bcdu), s = (m - 1.0) / (m + 1.0), z = s * s;
	static const double c[] = {1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3};
	double p = vm_horner_d(z, c, 8);
	double l = k * 0.6931471805599453 + (2.0 * s + 2.0 * s * z * p);
	l = y == 0 ? -INFINITY : y < 0 ? NAN : l;
	return y == INFINITY || y != y ? y : l;
}

/* sin r (*s) and cos r (*c) for |r| <= pi/4 (and a little beyond), their series to r^13 and r^14 */
static inline void vm_sincos_d(double r, double *s, double *c)
{
	static const double ks[] = {-1.0 / 6227020800, 1.0 / 39916800, -1.0 / 362880, 1.0 / 5040, -1.0 / 120, 1.0 / 6};
	static const double kc[] = {1.0 / 87178291200, -1.0 / 479001600, 1.0 / 3628800, -1.0 / 40320,
				    1.0 / 720, -1.0 / 24, 0.5};
	double z = r * r;
	*s = r * (1.0 - z * vm_horner_d(z, ks, 6)); /* -0 stays -0 */
	*c = 1.0 - z * vm_horner_d(z, kc, 7);
}

/* x = n pi/2 + r: r, and n mod 4 in *q */
static inline double vm_trig_reduce(float x, int *q)
{
	double d = x, t = d * 0.63661977236758134 + 6755399441055744.0, fn = t - 6755399441055744.0;
	uint64_t tb;
	memcpy(&tb, &t, sizeof tb);
	*q = (int)(tb & 3);
	return (d - fn * 1.57079632673412561417e+00) - fn * 6.07710050650619224932e-11;
}

static inline int vm_trig_fast(float x)
{
	return fabsf(x) <= VM_TRIG_MAX; /* false for NaN */
}

static inline float vm_sinf(float x)
{
	int q;
	double s, c, r = vm_trig_reduce(x, &q);
	vm_sincos_d(r, &s, &c);
	double y = q & 1 ? c : s;
	return (float)(q & 2 ? -y : y);
}

static inline float vm_cosf(float x)
{
	int q;
	double s, c, r = vm_trig_reduce(x, &q);
	vm_sincos_d(r, &s, &c);
	double y = q & 1 ? s : c;
	return (float)((q + 1) & 2 ? -y : y);
}

static inline float vm_tanf(float x)
{
	int q;
	double s, c, r = vm_trig_reduce(x, &q);
	vm_sincos_d(r, &s, &c);
	return (float)(q & 1 ? -c / s : s / c);
}

/* atan a for a >= 0 (+inf, NaN) */
static inline double vm_atan_d(double a)
{
	int lo = a <= 0.41421356237309503, hi = a > 2.4142135623730950;
	double u = (lo ? a : hi ? -1.0 : a - 1.0) / (lo ? 1.0 : hi ? a : a + 1.0), z = u * u;
	static const double c[] = {1.0 / 29, -1.0 / 27, 1.0 / 25, -1.0 / 23, 1.0 / 21, -1.0 / 19, 1.0 / 17,
				   -1.0 / 15, 1.0 / 13, -1.0 / 11, 1.0 / 9, -1.0 / 7, 1.0 / 5, -1.0 / 3};
	double p = vm_horner_d(z, c, 14);
	double k = lo ? 0.0 : hi ? 1.5707963267948966 : 0.78539816339744831;
	return k + (u + u * z * p);
}

static inline float vm_atanf(float x)
{
	float y = (float)vm_atan_d(fabs((double)x));
	return x < 0 ? -y : x == 0 ? x : y;
}

static inline float vm_asinf(float x)
{
	double d = x, a = fabs(d);
	float y = (float)vm_atan_d(a / sqrt((1.0 - a) * (1.0 + a)));
	return d < 0 ? -y : d == 0 ? x : y;
}

static inline float vm_acosf(float x)
{
	double d = x;
	return (float)(2.0 * vm_atan_d(sqrt((1.0 - d) / (1.0 + d))));
}

static inline float vm_sinhf(float x)
{
	double d = x, a = fabs(d), z = a * a;
	static const double c[] = {1.0 / 6227020800, 1.0 / 39916800, 1.0 / 362880, 1.0 / 5040, 1.0 / 120, 1.0 / 6};
	double p = vm_horner_d(z, c, 6);
	double e = vm_exp_d(a > 100.0 ? 100.0 : a); /* NaN passes; e^100 is beyond float */
	double y = a < 0.5 ? a + a * z * p : 0.5 * (e - 1.0 / e);
	float f = (float)y;
	return d < 0 ? -f : d == 0 ? x : f;
}

static inline float vm_coshf(float x)
{
	double a = fabs((double)x), e = vm_exp_d(a > 100.0 ? 100.0 : a);
	return (float)(0.5 * (e + 1.0 / e));
}

static inline float vm_asinhf(float x)
{
	double d = x, a = fabs(d), z = a * a;
	static const double c[] = {-231.0 / 13312, 63.0 / 2816, -35.0 / 1152, 5.0 / 112, -3.0 / 40, 1.0 / 6};
	double p = vm_horner_d(z, c, 6);
	double y = a < 0.125 ? a - a * z * p : vm_log_d(a + sqrt(z + 1.0));
	float f = (float)y;
	return d < 0 ? -f : d == 0 ? x : f;
}

static inline float vm_acoshf(float x)
{
	double d = x;
	return d < 1.0 ? NAN : (float)vm_log_d(d + sqrt((d - 1.0) * (d + 1.0)));
}

static inline float vm_atanhf(float x)
{
	double d = x, a = fabs(d), z = a * a;
	static const double c[] = {1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3};
	double p = vm_horner_d(z, c, 6);
	double y = a < 0.125 ? a + a * z * p : 0.5 * vm_log_d((1.0 + a) / (1.0 - a));
	float f = (float)y;
	return d < 0 ? -f : d == 0 ? x : f;
}

/* #52 trig: fmodf(a, b) exactly, for |a| < 2^29 |b| with b finite and not 0 (vm_fmodf_fast says
 * which; kernels give the others to libm): in double, q = trunc(|a| / |b|) is the integer part of the
 * quotient Q (Q's rounding error is below Q 2^-53 < 2^-24, and a Q that is not an integer k is at
 * least 2^-24 from it: |a| - k |b| is a multiple of b's ulp when |a| >= |b|), q |b| is exact (29 + 24
 * bits), so is |a| - q |b| (a multiple of the smaller ulp, below |b|); the sign is a's (-0 for a
 * negative a that b divides). */
static inline int vm_fmodf_fast(float a, float b)
{
	double db = fabs((double)b);
	return fabs((double)a) < 536870912.0 * db && db < INFINITY; /* false for NaN, b = 0 and a = +-inf */
}

static inline float vm_fmodf(float a, float b)
{
	double da = fabs((double)a), db = fabs((double)b), q = trunc(da / db), r = da - q * db;
	return (float)(a < 0 || (a == 0 && signbit(a)) ? -r : r);
}

/* #52 pow: a^b = 2^(b log2 a) in double, for float32 Pow and LRN's d^-beta. Neither is rounded to
 * float here: callers round d - e and d + e, e = |d| 2^-40, and keep the float where both agree
 * (vm_settled_f). The double result is within 2^-42 of a^b (relative) wherever |b log2 a| <= 160,
 * and glibc's pow within 2^-52, so where every real within 2^-40 of d rounds to one float, glibc's
 * rounds to it too: the float is (float)pow(a, b) bit for bit, the kernels' result before. About one
 * element in 2^15 has a rounding boundary within reach; kernels give those, and the special cases
 * (zero, infinite or NaN operands), to libm's pow in a second pass. Error budget, log2 a = k +
 * log2 m: log m = 2 atanh(s) = 2s + 2s z p(z), z = s^2, p of degree 5 within 2^-50.3 (relative to
 * log m) on z <= 0.0295, and e^r, |r| <= ln2 / 2, of degree 9 within 2^-46 (Chebyshev fits:
 * tests/bench/fit_vmath.py); with the fmas' and the division's roundings log2 a is within 2^-50 of
 * itself (relative), b log2 a within |b log2 a| 2^-50 + 2^-53 <= 2^-42.6 at |b log2 a| <= 160, 2^t
 * within that times ln2 plus 2^-45.5: under 2^-42 in all (2^-43.3 measured against powl on 2^24
 * points). The fmas are one instruction in the v3 and v4 clones (VM_CLONES), libm's fma (the same
 * bits) in the baseline. */
#define VM_AI static inline __attribute__((always_inline))

/* log2 a for a double a > 0, normal and finite (other lanes give garbage, not a trap): a = 2^k m,
 * m in [sqrt(1/2), sqrt(2)), k from the exponent's bits (k + 1023 + 2^52 as a double's bits: AVX2
 * converts no int64 to double) */
VM_AI double vm_log2_d(double a)
{
	uint64_t ia;
	memcpy(&ia, &a, sizeof ia);
	ia += 0x3ff0000000000000u - 0x3fe6a09e667f3bcdu;
	double k = vm_bits_double((ia >> 52) | 0x4330000000000000u) - (4503599627370496.0 + 1023.0);
	double m = vm_bits_double((ia & 0x000fffffffffffffu) + 0x3fe6a09e667f3bcdu), f = m - 1.0;
	double s = f / (m + 1.0), z = s * s;
	double p = fma(z, 0.16621817152858928, 0.18140193802865992);
	p = fma(z, p, 0.22222862280108716);
	p = fma(z, p, 0.2857142413832416);
	p = fma(z, p, 0.40000000011206505);
	p = fma(z, p, 0.6666666666666208);
	double lm = fma(s * z, p, s + s); /* log m */
	return fma(lm, 1.4426950408889634, k);
}

/* 2^t for t in [-1000, 1000] (callers clamp; NaN passes): t = n + f, |f| <= 1/2 exact, 2^f = e^r,
 * r = f ln2, 2^n as exponent bits */
VM_AI double vm_exp2_d(double t)
{
	double u = t + 6755399441055744.0; /* 1.5 2^52: n in u's low bits */
	double fn = u - 6755399441055744.0, r = (t - fn) * 0.6931471805599453;
	uint64_t ub;
	memcpy(&ub, &u, sizeof ub);
	double p = fma(r, 2.7632640675430236e-06, 2.4884459751751116e-05);
	p = fma(r, p, 0.0001984119064754424);
	p = fma(r, p, 0.0013888801749656543);
	p = fma(r, p, 0.008333333367311603);
	p = fma(r, p, 0.04166666704055191);
	p = fma(r, p, 0.16666666666615648);
	p = fma(r, p, 0.4999999999943859);
	p = fma(r, p, 1.0000000000000013);
	p = fma(r, p, 1.0000000000000135);
	return p * vm_bits_double((ub + 1023u) << 52);
}

/* a^b for a > 0 normal and finite: *t = b log2 a, the result 2^t with t clamped to [-160, 160]
 * (beyond, a float result is 0 or infinite either way) */
VM_AI double vm_pow_d(double a, double b, double *t)
{
	double l = b * vm_log2_d(a);
	*t = l;
	return vm_exp2_d(l < -160.0 ? -160.0 : l > 160.0 ? 160.0 : l); /* NaN passes */
}

/* Whether every real within 2^-40 of d (relative) rounds to one float, *r: that float */
VM_AI int vm_settled_f(double d, float *r)
{
	double e = fabs(d) * 0x1p-40;
	float lo = (float)(d - e), hi = (float)(d + e);
	*r = lo;
	return lo == hi;
}

/* (float)pow((double)x, (double)y) into *r where that is settled (returns 1): x and y finite, x not
 * 0, and x > 0 or y an integer (the sign: y odd, y / 2 not an integer; from 2^24 on every float is
 * even); a finite x < 0 to a finite y not an integer is the invalid operation's NaN, dn: the
 * processor's default NaN, which libm's pow returns there as (x - x) / (x - x) (callers compute it
 * at run time, as 0 / 0 of a volatile 0: folded, 0.0f / 0.0f is +NaN, x86's is -NaN). Branch-free:
 * the loops calling it vectorise. */
VM_AI int vm_powf_settled(float x, float y, float dn, float *r)
{
	float ax = fabsf(x), hy = y * 0.5f;
	int fin = (ax > 0) & (ax < INFINITY) & (fabsf(y) < INFINITY);
	int yint = y == truncf(y), odd = yint & (hy != truncf(hy)), bad = (x < 0) & !yint;
	double t, d = vm_pow_d(ax, y, &t);
	d = (x < 0) & odd ? -d : d;
	float v;
	int set = vm_settled_f(d, &v);
	*r = bad ? dn : v;
	return fin & (bad | set);
}

/* 8 x 8 doubles turned: t[j] lane k = a[k] lane j. Three rounds of two-source shuffles (24 in all),
 * in GCC/Clang vectors, so each VM_CLONES clone takes its own registers' width. (signal.c's lines,
 * diet.c's row sums) */
typedef double vm_v8d __attribute__((vector_size(64)));
static inline __attribute__((always_inline)) void vm_transpose8(const vm_v8d *a, vm_v8d *t)
{
	vm_v8d b[8], c[8];
	for (int k = 0; k < 8; k += 2) {
		b[k] = __builtin_shufflevector(a[k], a[k + 1], 0, 8, 2, 10, 4, 12, 6, 14);
		b[k + 1] = __builtin_shufflevector(a[k], a[k + 1], 1, 9, 3, 11, 5, 13, 7, 15);
	}
	for (int k = 0; k < 8; k += 4)
		for (int h = 0; h < 2; h++) {
			c[k + h] = __builtin_shufflevector(b[k + h], b[k + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
			c[k + h + 2] = __builtin_shufflevector(b[k + h], b[k + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
		}
	for (int h = 0; h < 4; h++) {
		t[h] = __builtin_shufflevector(c[h], c[h + 4], 0, 1, 2, 3, 8, 9, 10, 11);
		t[h + 4] = __builtin_shufflevector(c[h], c[h + 4], 4, 5, 6, 7, 12, 13, 14, 15);
	}
}

#endif
