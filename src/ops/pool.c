/* pool.c - 1-D and 2-D MaxPool and AveragePool; GlobalAveragePool, GlobalMaxPool: kernels, gradient
 * rules and costs. Their window geometry is conv.c's (conv_geometry); other ranks, integer MaxPool
 * and MaxPool's storage_order: conv_nd.c.
 * MaxPool's Indices are flattened over the whole input, ((n*C + c)*H + h)*W + w. */
#include "../autodiff/ad.h"
#include "conv.h"
#include "kernel.h"
#include "simd.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

/* float32 or float64 MaxPool, planes [nc0, nc1) of (n c): a piece of kernel_for; each window is
 * clipped to the image once. */
struct maxpool {
	const struct conv_geom *g;
	const void *x;
	void *y;
	int64_t *idx;
};

#define MAX_RUN 256 /* outputs of a row compared side by side */

/* the outputs whose columns ox sw - pl + j dw stay in [0, w) for every j: [*xa, *xb) */
static void inner_columns(const struct conv_geom *g, int64_t *xa, int64_t *xb)
{
	int64_t top = g->w - 1 + g->pl - (g->kw - 1) * g->dw;
	*xb = top < 0 ? 0 : top / g->sw + 1;
	*xb = *xb < g->ow ? *xb : g->ow;
	*xa = (g->pl + g->sw - 1) / g->sw;
	*xa = *xa < *xb ? *xa : *xb;
}

#ifdef SIMD_X86
/* max_run on AVX-512 for strides 1 and 2, 16 (float32) or 8 (float64) outputs a vector held in
 * registers over the whole window: at stride 2 two vectors of input read and their even lanes
 * taken (a two-source permute), the run's last vector masked. The same compares in the same
 * order as max_run's: the same bits. Without Indices (off NULL, Indices not asked for: ResNet's
 * stem) no offsets are kept and each window element is one max, MAXPS's rule being the compare's
 * own: v > a ? v : a, a on a tie or a NaN (a compare and two masked moves before: MaxPool fwd
 * 8x64x48x48 3x3 /2 best of 7, interleaved x5, 0.873-0.878 -> 0.823-0.830 ms). */
#define MAX_RUN_AVX512(T, VT, S, I, MT, L, EVEN, STORE_OFF, name)                                           \
	static SIMD_TARGET void name(const T *p, int64_t sw, int64_t n, int64_t kr, int64_t dr, int64_t kw,     \
				     int64_t dw, T *acc, int32_t *off)                                         \
	{                                                                                                       \
		const __m512i even = EVEN;                                                                      \
		for (int64_t t0 = 0; t0 < n; t0 += L) {                                                         \
			int64_t m = n - t0 < L ? n - t0 : L, span = (m - 1) * sw + 1; /* inputs a tap reads */  \
			MT lo = (MT)simd_lanes(span), hi = span > L ? (MT)simd_lanes(span - L) : 0;             \
			VT a = _mm512_setzero_##S();                                                            \
			__m512i o = _mm512_setzero_si512();                                                     \
			for (int64_t i = 0; i < kr; i++)                                                        \
				for (int64_t j = 0; j < kw; j++) {                                              \
					const T *q = p + i * dr + j * dw + t0 * sw;                             \
					VT v = _mm512_maskz_loadu_##S(lo, q);                                   \
					if (sw == 2)                                                            \
						v = _mm512_permutex2var_##S(v, even, _mm512_maskz_loadu_##S(hi, q + L)); \
					if (!i && !j) {                                                         \
						a = v;                                                          \
						continue;                                                       \
					}                                                                       \
					if (!off) { /* v > a ? v : a: MAXPS's own rule, a on a NaN or a tie */ \
						a = _mm512_max_##S(v, a);                                       \
						continue;                                                       \
					}                                                                       \
					MT gt = _mm512_cmp_##S##_mask(v, a, _CMP_GT_OQ);                        \
					a = _mm512_mask_mov_##S(a, gt, v);                                      \
					o = _mm512_mask_mov_epi##I(o, gt, _mm512_set1_epi##I(i * dr + j * dw)); \
				}                                                                               \
			_mm512_mask_storeu_##S(acc + t0, (MT)simd_lanes(m), a);                                 \
			if (off)                                                                                \
				STORE_OFF(off + t0, (MT)simd_lanes(m), o);                                      \
		}                                                                                               \
	}
MAX_RUN_AVX512(float, __m512, ps, 32, __mmask16, 16, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
	       _mm512_mask_storeu_epi32, max_run_f32_avx512)
MAX_RUN_AVX512(double, __m512d, pd, 64, __mmask8, 8, _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), _mm512_mask_cvtepi64_storeu_epi32,
	       max_run_f64_avx512)
#endif

/* Planes [nc0, nc1): each output row's outputs whose windows lie inside the image columns are
 * compared side by side, window element after window element (in the order the scalar walk
 * takes, so ties and NaNs go the same way: a NaN wins only as a window's first element), each
 * output's winner held as its offset in the window (32 bits, a vector's lanes as wide as
 * float32's) until the run is written: MAX_RUN_AVX512's kernels at strides 1 and 2 on AVX-512,
 * else name_run, the compiled loop (its index updated by arithmetic: with a select, and the
 * stride a constant, GCC's code took twice as long). The others (clipped windows) walk alone:
 * name_clipped. */
#define MAX_PLANES(T, name)                                                                             \
	static void name##_clipped(const struct maxpool *mp, int64_t nc, int64_t oy, int64_t ox, int64_t i0, \
				   int64_t i1)                                                          \
	{                                                                                               \
		const struct conv_geom *g = mp->g;                                                      \
		const T *x = mp->x;                                                                     \
		int64_t y0 = oy * g->sh - g->pt, x0 = ox * g->sw - g->pl, j0, j1;                       \
		conv_inside(x0, g->dw, g->w, g->kw, &j0, &j1);                                          \
		T acc = -(T)INFINITY;                                                                   \
		int64_t arg = -1;                                                                       \
		for (int64_t i = i0; i < i1; i++) {                                                     \
			int64_t row = (nc * g->h + y0 + i * g->dh) * g->w + x0;                         \
			for (int64_t j = j0; j < j1; j++) {                                             \
				T v = x[row + j * g->dw];                                               \
				if (v > acc || arg < 0) {                                               \
					acc = v;                                                        \
					arg = row + j * g->dw;                                          \
				}                                                                       \
			}                                                                               \
		}                                                                                       \
		int64_t o = (nc * g->oh + oy) * g->ow + ox;                                             \
		((T *)mp->y)[o] = acc;                                                                  \
		if (mp->idx)                                                                            \
			mp->idx[o] = arg;                                                               \
	}                                                                                               \
	/* outputs [0, n) of a run whose first window starts at p: rows kr of the window, dr apart */  \
	static inline __attribute__((always_inline)) void name##_run(const T *restrict p, int64_t sw, int64_t n, \
		int64_t kr, int64_t dr, int64_t kw, int64_t dw, T *restrict acc, int32_t *restrict off)      \
	{                                                                                               \
		for (int64_t i = 0; i < kr; i++)                                                        \
			for (int64_t j = 0; j < kw; j++) {                                              \
				const T *q = p + i * dr + j * dw;                                       \
				int32_t at = (int32_t)(i * dr + j * dw);                                \
				if (!i && !j) {                                                         \
					for (int64_t t = 0; t < n; t++) {                               \
						acc[t] = q[t * sw];                                     \
						off[t] = 0;                                             \
					}                                                               \
					continue;                                                       \
				}                                                                       \
				for (int64_t t = 0; t < n; t++) { /* no branch: random data mispredicts */ \
					T v = q[t * sw], a = acc[t];                                    \
					int32_t gt = v > a;                                             \
					acc[t] = v > a ? v : a;                                         \
					off[t] += (at - off[t]) * gt;                                   \
				}                                                                       \
			}                                                                               \
	}                                                                                               \
	VM_CLONES static void name(void *job, int64_t nc0, int64_t nc1)                                 \
	{                                                                                               \
		const struct maxpool *mp = job;                                                         \
		const struct conv_geom *g = mp->g;                                                      \
		const T *x = mp->x;                                                                     \
		T *y = mp->y;                                                                           \
		int64_t xa, xb;                                                                         \
		inner_columns(g, &xa, &xb);                                                             \
		for (int64_t nc = nc0; nc < nc1; nc++)                                                  \
			for (int64_t oy = 0; oy < g->oh; oy++) {                                        \
				int64_t y0 = oy * g->sh - g->pt, i0, i1;                                \
				conv_inside(y0, g->dh, g->h, g->kh, &i0, &i1);                          \
				for (int64_t ox = 0; ox < xa; ox++)                                     \
					name##_clipped(mp, nc, oy, ox, i0, i1);                         \
				for (int64_t ox = xb; ox < g->ow; ox++)                                 \
					name##_clipped(mp, nc, oy, ox, i0, i1);                         \
				for (int64_t r0 = xa; r0 < xb && i0 >= i1; r0++) /* no row of the window in the image */ \
					name##_clipped(mp, nc, oy, r0, i0, i1);                         \
				for (int64_t r0 = xa; r0 < xb && i0 < i1; r0 += MAX_RUN) {              \
					int64_t n = xb - r0 < MAX_RUN ? xb - r0 : MAX_RUN;              \
					int64_t row = (nc * g->h + y0 + i0 * g->dh) * g->w + r0 * g->sw - g->pl; \
					int64_t dr = g->dh * g->w, kr = i1 - i0, o = (nc * g->oh + oy) * g->ow + r0; \
					T acc[MAX_RUN];                                                 \
					int32_t off[MAX_RUN];                                           \
					if (SIMD_RUN(T, x + row, n, kr, dr, acc, mp->idx ? off : NULL)) \
						;                                                       \
					else                                                            \
						name##_run(x + row, g->sw, n, kr, dr, g->kw, g->dw, acc, off); \
					memcpy(y + o, acc, (size_t)n * sizeof *acc);                    \
					for (int64_t t = 0; mp->idx && t < n; t++)                      \
						mp->idx[o + t] = row + t * g->sw + off[t];              \
				}                                                                       \
			}                                                                               \
	}
#ifdef SIMD_X86
#define SIMD_RUN(T, p, n, kr, dr, acc, off)                                                            \
	((g->sw == 1 || g->sw == 2) && simd_avx512() &&                                                  \
	 ((sizeof(T) == 4 ? max_run_f32_avx512((const float *)(p), g->sw, n, kr, dr, g->kw, g->dw, (float *)(acc), off) \
			  : max_run_f64_avx512((const double *)(p), g->sw, n, kr, dr, g->kw, g->dw, (double *)(acc), off)), 1))
#else
#define SIMD_RUN(T, p, n, kr, dr, acc, off) 0
#endif
MAX_PLANES(float, max_planes_f32)
MAX_PLANES(double, max_planes_f64)

#ifdef SIMD_X86
/* float32 MaxPool without Indices, strides 1 and 2, on AVX-512: separable. Each input row's
 * horizontal maxima (every output column's kw taps, the row copied between -inf pads) once, then
 * each output row the max of its window's rows of those: each input row is read once, not by each
 * of the (up to 2 at 3x3 /2) output rows whose windows hold it, and the clipped windows are lanes
 * like the others (no scalar walk). Without NaNs the max taken tap after tap (v > a ? v : a, a on a
 * tie) is the first of the window's greatest elements in the walk's order either way, and a pad's
 * -inf wins only where every element is -inf (the same bits); a plane with a NaN, which wins only
 * as a window's first element, is made again by max_planes_f32. bench_roofline --threads 1 --filter
 * MaxPool, interleaved x3: fwd 8x64x48x48 3x3 /2 best 0.825-0.828 -> 0.477-0.494 ms (the scalar
 * clipped windows had cost about 60% as much as all the vector runs). */
#define MAX_SEP_PAD 2048  /* a padded row's floats: pl + w, the taps past it and a vector's overread */
#define MAX_SEP_ROWS 8192 /* h * ow: the horizontal maxima of a plane */
static int max_sep_fits(const struct conv_geom *g)
{
	return (g->sw == 1 || g->sw == 2) && g->kw <= 16 && g->pl < g->kw &&
	       (g->ow + 15) / 16 * 16 * g->sw + (g->kw - 1) * g->dw + 32 <= MAX_SEP_PAD && g->w + g->pl + 16 <= MAX_SEP_PAD &&
	       g->h * ((g->ow + 15) / 16 * 16) <= MAX_SEP_ROWS;
}

static SIMD_TARGET void max_planes_sep_f32(void *job, int64_t nc0, int64_t nc1)
{
	const struct maxpool *mp = job;
	const struct conv_geom *g = mp->g;
	const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512 ninf = _mm512_set1_ps(-INFINITY);
	int64_t ows = (g->ow + 15) / 16 * 16; /* hb's row stride */
	float pad[MAX_SEP_PAD], hb[MAX_SEP_ROWS];
	for (int k = 0; k < MAX_SEP_PAD; k += 16)
		_mm512_storeu_ps(pad + k, ninf);
	for (int64_t nc = nc0; nc < nc1; nc++) {
		const float *xp = (const float *)mp->x + nc * g->h * g->w;
		float *yp = (float *)mp->y + nc * g->oh * g->ow;
		__mmask16 nan = 0;
		for (int64_t r = 0; r < g->h; r++) {
			for (int64_t k = 0; k < g->w; k += 16) {
				__mmask16 m = simd_lanes(g->w - k);
				__m512 v = _mm512_maskz_loadu_ps(m, xp + r * g->w + k);
				nan |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
				_mm512_mask_storeu_ps(pad + g->pl + k, m, v);
			}
			for (int64_t t0 = 0; t0 < g->ow; t0 += 16) {
				__m512 a = ninf;
				for (int64_t j = 0; j < g->kw; j++) {
					const float *q = pad + t0 * g->sw + j * g->dw;
					__m512 v = _mm512_loadu_ps(q);
					if (g->sw == 2)
						v = _mm512_permutex2var_ps(v, even, _mm512_loadu_ps(q + 16));
					a = j ? _mm512_max_ps(v, a) : v;
				}
				_mm512_storeu_ps(hb + r * ows + t0, a);
			}
		}
		if (nan) {
			max_planes_f32(job, nc, nc + 1);
			continue;
		}
		for (int64_t oy = 0; oy < g->oh; oy++) {
			int64_t y0 = oy * g->sh - g->pt, i0, i1;
			conv_inside(y0, g->dh, g->h, g->kh, &i0, &i1);
			for (int64_t t0 = 0; t0 < g->ow; t0 += 16) {
				__m512 a = ninf;
				for (int64_t i = i0; i < i1; i++) {
					__m512 v = _mm512_loadu_ps(hb + (y0 + i * g->dh) * ows + t0);
					a = i > i0 ? _mm512_max_ps(v, a) : v;
				}
				_mm512_mask_storeu_ps(yp + oy * g->ow + t0, simd_lanes(g->ow - t0), a);
			}
		}
	}
}
#endif

/* Output (nc, oy, ox) of a pool over g, the window walked element by element in order (the
 * generic path, and the clipped windows of avg_planes): the maximum (its input index in *arg, the
 * first of ties, a NaN kept only as the first element) or the mean, with count_include_pad's pads
 * counted but not the ceil_mode overhang. */
static double pool_one(const struct conv_geom *g, const struct rtensor *a, int64_t nc, int64_t oy, int64_t ox,
		       int max, int include_pad, int64_t *arg)
{
	const float *af = a->dtype == DT_FLOAT ? a->data : NULL; /* read without rt_get's dispatch */
	double acc = max ? -INFINITY : 0;
	int64_t cnt = 0;
	*arg = -1;
	for (int64_t i = 0; i < g->kh; i++)
		for (int64_t j = 0; j < g->kw; j++) {
			int64_t iy = oy * g->sh - g->pt + i * g->dh, ix = ox * g->sw - g->pl + j * g->dw;
			int inside = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;
			int in_pads = iy < g->h + g->pb && ix < g->w + g->pr;
			if (!inside) {
				cnt += include_pad && in_pads && iy >= -g->pt && ix >= -g->pl;
				continue;
			}
			int64_t k = (nc * g->h + iy) * g->w + ix;
			double v = af ? af[k] : rt_get(a, k);
			if (max && (v > acc || *arg < 0)) {
				acc = v;
				*arg = k;
			}
			if (!max)
				acc += v;
			cnt++;
		}
	return max ? acc : cnt ? acc / (double)cnt : 0;
}

#ifdef SIMD_X86
/* pool_sum_run's body: 16 outputs at a time, each lane's sum in double held in registers over the
 * whole window (two vectors of 8 doubles), its terms in the window's order; at stride 2 two
 * vectors of input read and their even lanes taken, as
 * MAX_RUN_AVX512 does; then finished in registers and stored (a store and a reload of the sums
 * stalled store forwarding: a separate pass took longer than the sums). */
static inline __attribute__((always_inline)) SIMD_TARGET __m512d sum_term(__m512d v, int kind)
{
	return kind == POOL_RUN_L1 ? _mm512_abs_pd(v) : kind == POOL_RUN_L2 ? _mm512_mul_pd(v, v) : v;
}

/* the mean (over cnt), the sum, or lp_root_f32's square root, the lanes to leave to the caller
 * (a NaN mean; a root lp_root_f32 takes from pow) added to *bad */
static inline __attribute__((always_inline)) SIMD_TARGET __m512d sum_finish(__m512d a, __m512d cnt, int kind, __mmask8 *bad)
{
	if (kind == POOL_RUN_MEAN) {
		__m512d q = _mm512_div_pd(a, cnt);
		*bad |= _mm512_cmp_pd_mask(q, q, _CMP_UNORD_Q);
		return q;
	}
	if (kind == POOL_RUN_L1)
		return a;
	__m512d r = _mm512_sqrt_pd(a);
	__m512i low = _mm512_sub_epi64(_mm512_and_si512(_mm512_castpd_si512(r), _mm512_set1_epi64(0x1fffffff)),
				       _mm512_set1_epi64(0x10000000));
	__mmask8 ok = _mm512_cmp_pd_mask(r, _mm512_set1_pd(0x1p-126), _CMP_GE_OQ) &
		      _mm512_cmp_pd_mask(r, _mm512_set1_pd(0x1p127), _CMP_LT_OQ) &
		      (_mm512_cmpgt_epi64_mask(low, _mm512_set1_epi64(1)) | _mm512_cmplt_epi64_mask(low, _mm512_set1_epi64(-1)));
	*bad |= (__mmask8)~(ok | _mm512_cmp_pd_mask(a, _mm512_setzero_pd(), _CMP_EQ_OQ));
	return r;
}

/* the first n lanes of 8 (none for n <= 0) */
static inline __mmask8 sum_lanes8(int64_t n)
{
	return n <= 0 ? 0 : n >= 8 ? 0xff : (__mmask8)((1u << n) - 1);
}

/* the terms of 16 outputs at q, sw apart (1 or 2; span elements to read), as two vectors of 8
 * doubles: float32 16 lanes (at stride 2 the even lanes of 32) widened, float64 2 (4) vectors */
static inline __attribute__((always_inline)) SIMD_TARGET void sum_load(const void *q, int f64, int64_t sw, int64_t span,
								       __m512d *v0, __m512d *v1)
{
	if (!f64) {
		const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
		__m512 v = _mm512_maskz_loadu_ps(simd_lanes(span), q);
		if (sw == 2)
			v = _mm512_permutex2var_ps(v, even, _mm512_maskz_loadu_ps(span > 16 ? simd_lanes(span - 16) : 0, (const float *)q + 16));
		*v0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
		*v1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
		return;
	}
	const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
	__m512d w[4];
	for (int k = 0; k < 2 * sw; k++)
		w[k] = _mm512_maskz_loadu_pd(sum_lanes8(span - 8 * k), (const double *)q + 8 * k);
	*v0 = sw == 2 ? _mm512_permutex2var_pd(w[0], even, w[1]) : w[0];
	*v1 = sw == 2 ? _mm512_permutex2var_pd(w[2], even, w[3]) : w[1];
}

/* pool_sum_run for a dtype and kind, 16 outputs at a time */
static inline __attribute__((always_inline)) SIMD_TARGET int sum_run(void *y, const void *p, int f64, int64_t sw, int64_t n,
								     int64_t kr, int64_t dr, int64_t kw, int64_t dw, double cnt,
								     int kind)
{
	const __m512d c = _mm512_set1_pd(cnt);
	int64_t es = f64 ? 8 : 4;
	__mmask8 bad = 0;
	for (int64_t t0 = 0; t0 < n; t0 += 16) {
		int64_t m = n - t0 < 16 ? n - t0 : 16, span = (m - 1) * sw + 1;
		__m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), v0, v1;
		for (int64_t i = 0; i < kr; i++)
			for (int64_t j = 0; j < kw; j++) {
				sum_load((const uint8_t *)p + (i * dr + j * dw + t0 * sw) * es, f64, sw, span, &v0, &v1);
				a0 = _mm512_add_pd(a0, sum_term(v0, kind));
				a1 = _mm512_add_pd(a1, sum_term(v1, kind));
			}
		a0 = sum_finish(a0, c, kind, &bad);
		a1 = sum_finish(a1, c, kind, &bad);
		if (f64) {
			_mm512_mask_storeu_pd((double *)y + t0, sum_lanes8(m), a0);
			_mm512_mask_storeu_pd((double *)y + t0 + 8, sum_lanes8(m - 8), a1);
		} else {
			__m256d f1 = _mm256_castps_pd(_mm512_cvtpd_ps(a1));
			__m512d f = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm512_cvtpd_ps(a0))), f1, 1);
			_mm512_mask_storeu_ps((float *)y + t0, simd_lanes(m), _mm512_castpd_ps(f));
		}
	}
	return bad != 0;
}

/* LpPool's runs (POOL_RUN_L1, float32's POOL_RUN_L2), one row a call */
static SIMD_TARGET int sum_run_avx512(void *y, const void *p, int f64, int kind, double cnt, int64_t sw, int64_t n,
				      int64_t kr, int64_t dr, int64_t kw, int64_t dw)
{
	if (f64)
		return sum_run(y, p, 1, sw, n, kr, dr, kw, dw, cnt, POOL_RUN_L1);
	if (kind == POOL_RUN_L1)
		return sum_run(y, p, 0, sw, n, kr, dr, kw, dw, cnt, POOL_RUN_L1);
	return sum_run(y, p, 0, sw, n, kr, dr, kw, dw, cnt, POOL_RUN_L2);
}

/* AveragePool's runs over `rows` rows in one call (bench_roofline's 0.60 -> 0.52 ms: a call a row
 * gone); LpPool's stay one row a call of sum_run_avx512 (a loop over rows in pool_sum_run, even of
 * one row, took them from 0.70 to 0.84 ms) */
static SIMD_TARGET int sum_mean_rows(void *y, const void *p, int f64, double cnt, int64_t sw, int64_t n, int64_t kr,
				     int64_t dr, int64_t kw, int64_t dw, int64_t rows, int64_t rs, int64_t ys)
{
	int bad = 0, es = f64 ? 8 : 4;
	for (int64_t r = 0; r < rows; r++) {
		void *yr = (uint8_t *)y + r * ys * es;
		const void *pr = (const uint8_t *)p + r * rs * es;
		bad |= f64 ? sum_run(yr, pr, 1, sw, n, kr, dr, kw, dw, cnt, POOL_RUN_MEAN)
			   : sum_run(yr, pr, 0, sw, n, kr, dr, kw, dw, cnt, POOL_RUN_MEAN);
	}
	return bad;
}
#endif

int pool_sum_run(void *y, const void *p, int f64, int kind, double cnt, int64_t sw, int64_t n, int64_t kr, int64_t dr,
		 int64_t kw, int64_t dw, int64_t rows, int64_t rs, int64_t ys)
{
#ifdef SIMD_X86
	if ((sw != 1 && sw != 2) || !simd_avx512() || (f64 && kind == POOL_RUN_L2))
		return -1;
	if (kind == POOL_RUN_MEAN)
		return sum_mean_rows(y, p, f64, cnt, sw, n, kr, dr, kw, dw, rows, rs, ys);
	return sum_run_avx512(y, p, f64, kind, cnt, sw, n, kr, dr, kw, dw);
#else
	(void)y, (void)p, (void)f64, (void)kind, (void)cnt, (void)sw, (void)n, (void)kr, (void)dr, (void)kw, (void)dw;
	(void)rows, (void)rs, (void)ys;
	return -1;
#endif
}

/* The count AveragePool divides output row oy's inner windows by, the window rows inside the
 * image [*i0, *i1) */
static int64_t avg_count(const struct conv_geom *g, int include_pad, int64_t oy, int64_t *i0, int64_t *i1)
{
	int64_t y0 = oy * g->sh - g->pt;
	conv_inside(y0, g->dh, g->h, g->kh, i0, i1);
	int64_t cnt = (*i1 - *i0) * g->kw;
	for (int64_t i = 0; i < g->kh && include_pad; i++) {
		int64_t iy = y0 + i * g->dh;
		cnt += (i < *i0 || i >= *i1) && iy >= -g->pt && iy < g->h + g->pb ? g->kw : 0;
	}
	return cnt;
}

/* AveragePool over float32 or float64 planes [nc0, nc1): as max_planes, each output row's
 * outputs whose windows lie inside the image columns summed side by side (in double, from +0, in
 * the walk's order: the same bits; pool_sum_run's registers at strides 1 and 2 on AVX-512, else
 * the compiled loop, divided in avg_quotients), the rest by pool_one, and so are the sums that
 * come out NaN (vector adds may take their operands either way round, and of two NaNs x86 keeps
 * the first's payload). */
struct avgpool {
	const struct conv_geom *g;
	const struct rtensor *a;
	struct rtensor *y;
	int include_pad;
};

/* y[t] = acc[t] / cnt rounded to T; whether one is NaN */
#define AVG_QUOTIENTS(T, name)                                                                          \
	VM_CLONES static int name(T *restrict y, const double *restrict acc, double cnt, int64_t n)    \
	{                                                                                              \
		int nan = 0;                                                                           \
		for (int64_t t = 0; t < n; t++) {                                                      \
			double q = acc[t] / cnt;                                                       \
			nan |= q != q;                                                                 \
			y[t] = (T)q;                                                                   \
		}                                                                                      \
		return nan;                                                                            \
	}
AVG_QUOTIENTS(float, avg_quotients_f32)
AVG_QUOTIENTS(double, avg_quotients_f64)

#define AVG_PLANES(T, name, quotients)                                                                        \
	VM_CLONES static void name(void *job, int64_t nc0, int64_t nc1)                                       \
	{                                                                                                     \
		const struct avgpool *ap = job;                                                               \
		const struct conv_geom *g = ap->g;                                                            \
		const T *x = ap->a->data;                                                                     \
		T *y = ap->y->data;                                                                           \
		int64_t xa, xb, arg, rows;                                                                    \
		inner_columns(g, &xa, &xb);                                                                   \
		for (int64_t nc = nc0; nc < nc1; nc++)                                                        \
			for (int64_t oy = 0; oy < g->oh; oy += rows) {                                        \
				int64_t y0 = oy * g->sh - g->pt, i0, i1, j0, j1, o = (nc * g->oh + oy) * g->ow;       \
				int64_t cnt = avg_count(g, ap->include_pad, oy, &i0, &i1), kr = i1 > i0 ? i1 - i0 : 0; \
				rows = 1; /* and the rows below of the same count and window rows, in one run */  \
				while (xb - xa <= MAX_RUN && oy + rows < g->oh &&                              \
				       avg_count(g, ap->include_pad, oy + rows, &j0, &j1) == cnt && j0 == i0 && j1 == i1) \
					rows++;                                                               \
				for (int64_t q = 0; q < rows; q++)                                            \
					for (int64_t ox = 0; ox < g->ow; ox++)                                \
						if (ox < xa || ox >= xb) /* a clipped window */               \
							y[o + q * g->ow + ox] =                               \
								(T)pool_one(g, ap->a, nc, oy + q, ox, 0, ap->include_pad, &arg); \
				for (int64_t q = 0; q < rows && !cnt; q++) /* no element, none counted */     \
					for (int64_t r0 = xa; r0 < xb; r0++)                                  \
						y[o + q * g->ow + r0] = 0;                                    \
				for (int64_t r0 = xa; r0 < xb && cnt; r0 += MAX_RUN) {                        \
					int64_t n = xb - r0 < MAX_RUN ? xb - r0 : MAX_RUN, dr = g->dh * g->w;  \
					int64_t row = kr ? (nc * g->h + y0 + i0 * g->dh) * g->w + r0 * g->sw - g->pl : 0; \
					int bad = pool_sum_run(y + o + r0, x + row, sizeof(T) == 8, POOL_RUN_MEAN, (double)cnt, g->sw, n, \
							       kr, dr, g->kw, g->dw, rows, kr ? g->sh * g->w : 0, g->ow), nan = 0; \
					for (int64_t q = 0; bad < 0 && q < rows; q++) {                       \
						double acc[MAX_RUN];                                          \
						for (int64_t t = 0; t < n; t++)                               \
							acc[t] = 0;                                           \
						for (int64_t i = 0; i < kr; i++)                              \
							for (int64_t j = 0; j < g->kw; j++) {                 \
								const T *p = x + row + q * g->sh * g->w + i * dr + j * g->dw; \
								for (int64_t t = 0; t < n; t++)       \
									acc[t] += p[t * g->sw];       \
							}                                             \
						nan |= quotients(y + o + q * g->ow + r0, acc, (double)cnt, n);\
					}                                                                     \
					bad = bad < 0 ? nan : bad;                                            \
					for (int64_t q = 0; bad && q < rows; q++) /* a NaN's payload: the walk's */ \
						for (int64_t t = 0; t < n; t++)                               \
							if (isnan(y[o + q * g->ow + r0 + t]))                 \
								y[o + q * g->ow + r0 + t] =                   \
									(T)pool_one(g, ap->a, nc, oy + q, r0 + t, 0, 0, &arg); \
				}                                                                             \
			}                                                                                     \
	}
AVG_PLANES(float, avg_planes_f32, avg_quotients_f32)
AVG_PLANES(double, avg_planes_f64, avg_quotients_f64)

static int pool(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out, int max)
{
	const struct rtensor *a = in[0];
	if (a->ndim > 4 || !dtype_is_float(a->dtype) || (max && attr_int(n, "storage_order", 0)))
		return pool_nd_run(x, n, in, out, max);
	struct conv_geom g;
	if (conv_geometry(x, n, in, CONV_POOL, &g))
		return exec_status(x);
	int64_t dims[4];
	int r = conv_out_dims(&g, g.c, dims);
	void *y = exec_alloc(x, out[0], a->dtype, r, dims); /* every output gets its shape first */
	int64_t *idx = max && n->n_out > 1 && n->out[1] ? exec_alloc(x, out[1], DT_INT64, r, dims) : NULL;
	if (!y)
		return exec_status(x);
	int include_pad = attr_int(n, "count_include_pad", 0) != 0;
	float *yf = out[0]->dtype == DT_FLOAT ? y : NULL;
	/* the offsets in a window that max_run holds in 32 bits */
	int narrow = (g.kh - 1) * g.dh * g.w + (g.kw - 1) * g.dw <= INT32_MAX;
	if (max && narrow && (a->dtype == DT_FLOAT || a->dtype == DT_DOUBLE)) {
		struct maxpool j = {&g, a->data, y, idx};
		void (*planes)(void *, int64_t, int64_t) = a->dtype == DT_FLOAT ? max_planes_f32 : max_planes_f64;
#ifdef SIMD_X86
		if (a->dtype == DT_FLOAT && !idx && max_sep_fits(&g) && simd_avx512())
			planes = max_planes_sep_f32;
#endif
		kernel_for(g.n * g.c, KERNEL_GRAIN / (g.h * g.w + 1) + 1, planes, &j);
		return 0;
	}
	if (!max && (a->dtype == DT_FLOAT || a->dtype == DT_DOUBLE)) {
		struct avgpool j = {&g, a, out[0], include_pad};
		kernel_for(g.n * g.c, KERNEL_GRAIN / (g.h * g.w + 1) + 1, a->dtype == DT_FLOAT ? avg_planes_f32 : avg_planes_f64, &j);
		return 0;
	}
	for (int64_t nc = 0; nc < g.n * g.c; nc++)
		for (int64_t oy = 0; oy < g.oh; oy++)
			for (int64_t ox = 0; ox < g.ow; ox++) {
				int64_t arg;
				double res = pool_one(&g, a, nc, oy, ox, max, include_pad, &arg);
				int64_t o = (nc * g.oh + oy) * g.ow + ox;
				if (yf)
					yf[o] = (float)res;
				else
					rt_set(out[0], o, res);
				if (idx)
					idx[o] = arg;
			}
	return 0;
}

static int max_pool_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return pool(x, n, in, out, 1);
}

static int average_pool_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			    struct rtensor *const *out)
{
	return pool(x, n, in, out, 0);
}

/* GlobalAveragePool: each (n, c) plane's mean, its sum in run_sum's fixed lanes (the bits of
 * ReduceMean over the same axes). */
struct plane_means {
	const struct rtensor *a;
	struct rtensor *o;
	int64_t sp;
};

static void plane_mean(void *arg, int64_t lo, int64_t hi)
{
	const struct plane_means *j = arg;
	for (int64_t nc = lo; nc < hi; nc++)
		rt_set(j->o, nc, j->sp ? run_sum(j->a, nc * j->sp, j->sp, 0, 0) / (double)j->sp : 0);
}

/* GlobalMaxPool's planes [lo, hi): run_extreme's walk (the last NaN, else the first maximum) */
static void plane_max(void *arg, int64_t lo, int64_t hi)
{
	const struct plane_means *j = arg;
	for (int64_t nc = lo; nc < hi; nc++)
		rt_set(j->o, nc, run_extreme(j->a, nc * j->sp, j->sp, 0));
}

/* GlobalAveragePool (max 0) or GlobalMaxPool (max 1: each plane's largest element, NaN if it
 * holds one). */
static int global_pool(struct exec *x, struct rtensor *const *in, struct rtensor *const *out, int max)
{
	const struct rtensor *a = in[0];
	if (want_float(x, a, "X"))
		return exec_status(x);
	if (a->ndim < 3)
		return exec_fail(x, "X must be (N, C, spatial...)");
	int64_t dims[RT_MAX_DIMS], sp = 1;
	for (int i = 0; i < a->ndim; i++) {
		dims[i] = i < 2 ? a->dims[i] : 1;
		if (i >= 2)
			sp *= a->dims[i];
	}
	if (max && !sp && a->dims[0] && a->dims[1])
		return exec_fail(x, "GlobalMaxPool over an empty plane");
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, dims))
		return exec_status(x);
	int typed = a->dtype == DT_FLOAT || a->dtype == DT_DOUBLE;
	for (int64_t nc = 0; max && !typed && nc < out[0]->numel; nc++) {
		double m = -INFINITY;
		for (int64_t k = 0; k < sp; k++) {
			double v = rt_get(a, nc * sp + k);
			m = v > m || isnan(v) ? v : m;
		}
		rt_set(out[0], nc, m);
	}
	if (max && !typed)
		return 0;
	struct plane_means j = {a, out[0], sp};
	kernel_for(a->dims[0] * a->dims[1], KERNEL_GRAIN / (sp + 1) + 1, max ? plane_max : plane_mean, &j);
	return 0;
}

static int global_average_pool_run(struct exec *x, const struct node *n, struct rtensor *const *in,
				   struct rtensor *const *out)
{
	(void)n;
	return global_pool(x, in, out, 0);
}

static int global_max_pool_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			       struct rtensor *const *out)
{
	(void)n;
	return global_pool(x, in, out, 1);
}
/* MaxPool: each output's gradient goes to the element it took (Indices), via ScatterElements */
static int max_pool_grad(struct ad *a, const struct node *n)
{
	if (ad_need_opset(a, 16, "the MaxPool gradient (ScatterElements with reduction)"))
		return -1;
	if (attr_int(n, "storage_order", 0)) /* its Indices are not the flat positions ScatterElements takes */
		return ad_fail(a, "gradients of MaxPool with storage_order 1 are not supported");
	struct value *idx = ad_add_output(a, n, 1);
	int64_t flat = -1;
	int dt = ad_shape(a, n->in[0])->dtype, half = dtype_is_half(dt);
	/* overlapping windows sum in float32 (onnxruntime adds no 16-bit floats) */
	struct value *m1 = ad_ints(a, &flat, 1), *zeros = ad_zeros_flat(a, n->in[0], half ? DT_FLOAT : dt);
	struct value *g = ad_dy(a, n->out[0]);
	if (half && g)
		g = ad_cast(a, g, DT_FLOAT);
	struct value *ins[3] = {zeros, ad_op2(a, "Reshape", idx, m1), ad_op2(a, "Reshape", g, m1)};
	struct value *s = idx && ins[0] && ins[1] && ins[2] ? ad_op(a, "ScatterElements", ins, 3) : NULL;
	if (!s || ad_set_str(a, ad_producer(s), "reduction", "add") || (half && !(s = ad_cast(a, s, dt))))
		return -1;
	return ad_give(a, n->in[0], ad_op2(a, "Reshape", s, ad_shape_of(a, n->in[0])));
}

/* AveragePool: g divided by each window's count, spread back over the window by a depthwise
 * ConvTranspose with a kernel of ones. Without count_include_pad the count excludes padding and is
 * itself an AveragePool of ones (including pads) times the window size. */
static int average_pool_grad(struct ad *a, const struct node *n)
{
	if (ad_shape(a, n->in[0])->ndim > 4)
		return conv_nd_grad(a, n);
	struct conv_geom g;
	if (conv_geom_of(a, n, 0, &g))
		return -1;
	if (attr_int(n, "ceil_mode", 0))
		return ad_fail(a, "gradients of AveragePool with ceil_mode are not supported yet");
	int dt = ad_shape(a, n->in[0])->dtype;
	double win = (double)(g.kh * g.kw);
	struct value *gy = conv_lift(a, ad_dy(a, n->out[0]), &g), *scaled;
	if (attr_int(n, "count_include_pad", 0)) {
		scaled = ad_op2(a, "Div", gy, ad_scalar(a, dt, win));
	} else {
		struct value *ones = ad_op2(a, "Add", conv_lift(a, ad_zeros_like(a, n->in[0]), &g), ad_scalar(a, dt, 1));
		struct value *avg = ad_op1(a, "AveragePool", ones);
		struct node *p = ad_producer(avg);
		int64_t ks[2] = {g.kh, g.kw};
		if (!p || ad_set_ints(a, p, "kernel_shape", ks, 2) || conv_set_window(a, p, &g, g.sh, g.sw, g.dh, g.dw, 1) ||
		    ad_set_int(a, p, "count_include_pad", 1))
			return -1;
		scaled = ad_op2(a, "Div", gy, ad_op2(a, "Mul", avg, ad_scalar(a, dt, win)));
	}
	/* depthwise ones kernel (C, 1, kh, kw) */
	int64_t c = g.c, kd[4] = {c, 1, g.kh, g.kw}, total = c * g.kh * g.kw;
	struct value *kern = ad_op2(a, "Expand", ad_scalar(a, dt, 1), ad_ints(a, kd, 4));
	(void)total;
	int64_t full_h = g.sh * (g.oh - 1) + g.dh * (g.kh - 1) + 1 - g.pt - g.pb;
	int64_t full_w = g.sw * (g.ow - 1) + g.dw * (g.kw - 1) + 1 - g.pl - g.pr;
	int64_t op[2] = {g.h - full_h, g.w - full_w};
	struct value *ins[2] = {scaled, kern};
	struct value *dx = kern ? ad_op(a, "ConvTranspose", ins, 2) : NULL;
	if (!dx || conv_set_window(a, ad_producer(dx), &g, g.sh, g.sw, g.dh, g.dw, c) ||
	    ((op[0] || op[1]) && ad_set_ints(a, ad_producer(dx), "output_padding", op, 2)))
		return -1;
	return ad_give(a, n->in[0], conv_drop(a, dx, &g));
}

static int global_average_pool_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]);
	int axes[RT_MAX_DIMS], na = 0;
	for (int i = 2; i < xs->ndim; i++)
		axes[na++] = i;
	struct value *e = ad_op2(a, "Expand", ad_dy(a, n->out[0]), ad_shape_of(a, n->in[0]));
	return ad_give(a, n->in[0], ad_op2(a, "Div", e, ad_count(a, n->in[0], axes, na, xs->dtype)));
}

/* GlobalMaxPool: g goes to each plane's maximum, shared evenly among ties (ReduceMax's rule). */
static int global_max_pool_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]);
	int64_t axes[RT_MAX_DIMS];
	for (int i = 2; i < xs->ndim; i++)
		axes[i - 2] = i;
	struct value *m = ad_cast(a, ad_op2(a, "Equal", n->in[0], n->out[0]), xs->dtype);
	struct value *cnt = ad_reduce(a, "ReduceSum", m, axes, xs->ndim - 2, 1);
	return ad_give(a, n->in[0], ad_op2(a, "Mul", m, ad_op2(a, "Div", ad_dy(a, n->out[0]), cnt)));
}

void pool_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
	       uint64_t *bytes)
{
	(void)in;
	(void)bytes;
	size_t k;
	const int64_t *ks = attr_ints(n, "kernel_shape", &k);
	uint64_t window = 1;
	for (size_t i = 0; ks && i < k; i++)
		window *= (uint64_t)ks[i];
	*flops = (uint64_t)out[0]->numel * window;
}

/* a global pool: one operation per input element */
static void global_pool_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
			     uint64_t *flops, uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	*flops = (uint64_t)in[0]->numel;
}

const struct op_impl op_max_pool = {.run = max_pool_run, .cost = pool_cost, .grad = max_pool_grad, .recompute = RC_CHEAP, .bf16_since = 22};
const struct op_impl op_average_pool = {.run = average_pool_run, .cost = pool_cost, .grad = average_pool_grad, .recompute = RC_CHEAP, .bf16_since = 22};
const struct op_impl op_global_max_pool = {.run = global_max_pool_run, .cost = global_pool_cost, .grad = global_max_pool_grad, .recompute = RC_CHEAP, .bf16_since = 22,
					   .kink = KINK_PICK_REDUCED};
const struct op_impl op_global_average_pool = {.run = global_average_pool_run, .grad = global_average_pool_grad, .recompute = RC_CHEAP, .bf16_since = 22};
