/* reduce.c - ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceL2, ReduceL1, ReduceSumSquare, ReduceLogSum,
 * ReduceLogSumExp, Size, and the losses SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
 *
 * Reductions accumulate in double in a fixed order, so results are deterministic (run to run and
 * between strategies) and at least as accurate as a float32 tree sum. A contiguous run of reduced
 * elements (the last axes, or BatchNorm's H x W under axes 0, 2, 3) is summed into RUN_LANES
 * partial sums that the compiler vectorises, combined pairwise; kept trailing axes are summed
 * element-wise into independent accumulators. Axes are an input from opset 13 (ReduceSum) or 18
 * (the others), an attribute before; both are read. A reduction over an empty set is its identity
 * (ONNX 18): 0 for the sums, -inf for ReduceMax, ReduceLogSum and ReduceLogSumExp, +inf for
 * ReduceMin. ReduceLogSumExp subtracts each output's maximum first, so large inputs do not
 * overflow: y = m + log sum exp(x - m). */
#include "../autodiff/ad.h"
#include "kernel.h"
#include "vmath.h"
#include "../util/xalloc.h"

#include <math.h>
#include <string.h>

enum rk { RK_SUM, RK_MEAN, RK_MAX, RK_PROD, RK_MIN, RK_L2, RK_L1, RK_SSQ, RK_LOGSUM, RK_LSE };

/* the output of a reduction from its accumulator (and, for RK_LSE, the maximum m it subtracted) */
static double reduce_finish(enum rk kind, double acc, int64_t count, double m)
{
	switch (kind) {
	case RK_MEAN:
		return acc / (double)count;
	case RK_L2:
		return sqrt(acc);
	case RK_LOGSUM:
		return log(acc);
	case RK_LSE:
		return isinf(m) ? m : m + log(acc);
	default:
		return acc;
	}
}

/* A block of reduced axes, the input (outer, len, inner): the sums over len of each outer's inner
 * columns, in pieces of `cols` columns (chunks of them per outer), each summed row after row into
 * acc (the order of a serial sum; the inner > 1 case's chunks stay in the first level cache). */
#define BLOCK_COLS 1024
struct block {
	const struct rtensor *a;
	double *acc;
	int64_t len, inner, cols, chunks;
};

VM_CLONES static void block_sums(void *arg, int64_t u0, int64_t u1)
{
	const struct block *j = arg;
	const struct rtensor *a = j->a;
	for (int64_t u = u0; u < u1; u++) {
		int64_t o = u / j->chunks, c0 = u % j->chunks * j->cols, c1 = c0 + j->cols < j->inner ? c0 + j->cols : j->inner;
		if (j->inner == 1) {
			j->acc[o] = run_sum(a, o * j->len, j->len, 0, 0);
			continue;
		}
		double *ac = j->acc + o * j->inner;
		for (int64_t i = c0; i < c1; i++)
			ac[i] = 0;
		for (int64_t r = 0; r < j->len; r++) {
			int64_t at = (o * j->len + r) * j->inner;
			if (a->dtype == DT_FLOAT) {
				const float *p = (const float *)a->data + at;
				for (int64_t i = c0; i < c1; i++)
					ac[i] += p[i];
			} else {
				const double *p = (const double *)a->data + at;
				for (int64_t i = c0; i < c1; i++)
					ac[i] += p[i];
			}
		}
	}
}

/* Reduced trailing axes (runs of `run` elements) below kept and reduced ones: output o's sum is
 * its runs' sums in input order, over the reduced leading dimensions rd (input strides rs) at the
 * offset its kept dimensions kd (strides ks) give. With reduced leading dimensions (BatchNorm's
 * gradient's sums over (0, 2, 3)) the runs are summed first, in memory order, into part (run r at
 * element r run): each thread then reads the part of the tensor that the elementwise kernels
 * before it wrote (kernel_for deals in memory order), where by outputs it read a slice of every
 * image, half of them written on the other core. Each output adds its runs' sums in the same order
 * either way: the same bits. Runs of 8 elements and more: part then takes at most a quarter of a
 * float32 input's bytes (runs of 1 would take twice them). */
struct runs {
	const struct rtensor *a;
	double *acc, *part;
	int64_t run, kd[RT_MAX_DIMS], ks[RT_MAX_DIMS], rd[RT_MAX_DIMS], rs[RT_MAX_DIMS];
	int nk, nr, squares;
};

static void run_parts(void *arg, int64_t r0, int64_t r1)
{
	const struct runs *j = arg;
	for (int64_t r = r0; r < r1; r++)
		j->part[r] = run_sum(j->a, r * j->run, j->run, j->squares, 0);
}

static void run_sums(void *arg, int64_t o0, int64_t o1)
{
	const struct runs *j = arg;
	for (int64_t o = o0; o < o1; o++) {
		int64_t base = 0, rem = o, idx[RT_MAX_DIMS] = {0}, off = 0;
		for (int d = j->nk - 1; d >= 0; d--) {
			base += rem % j->kd[d] * j->ks[d];
			rem /= j->kd[d];
		}
		double s = 0;
		for (;;) {
			s += j->part ? j->part[(base + off) / j->run] : run_sum(j->a, base + off, j->run, j->squares, 0);
			int d = j->nr - 1;
			for (; d >= 0; d--) {
				off += j->rs[d];
				if (++idx[d] < j->rd[d])
					break;
				off -= j->rs[d] * j->rd[d];
				idx[d] = 0;
			}
			if (d < 0)
				break;
		}
		j->acc[o] = s;
	}
}

/* A block of reduced axes (outer, len, inner) for the kinds that are not sums: each output (o, i)
 * reduced over its len elements in index order by one thread (the generic loop's order, so the
 * same bits); RK_LSE takes the maximum first, into mx. */
struct lanes_job {
	const struct rtensor *a;
	double *acc, *mx;
	int64_t len, inner;
	enum rk kind;
};

/* sum over r < n of exp(p[r] - m), m the row's finite maximum (d = x - m in [-inf, 0]): float32
 * exponentials, vm_expf_row (vm_expf's bits without its clamps and second factor, 0 for
 * d < -87), added in double into LSE_LANES
 * partial sums, element r into lane r mod LSE_LANES, the lanes then combined pairwise (lane k and
 * k + 8, then k and k + 4, k + 2, k + 1). The same order at any vector width and thread count.
 * next (NULL: none), the row after, is prefetched meanwhile (4 lines per 64 elements, one row of
 * 16 KB ahead), so that its maximum's pass, the one read from memory, overlaps these exponentials.
 * bench_roofline's 4096 x 4096 row, CPU time in the kernel's functions (perf samples, interleaved):
 * 13.4 ms with the index-order sums of vm_expf and 8 rows at once; 9.2-9.7 with the lanes (the
 * exponentials' pass 11.0 -> 6.3: the serial sums were 30% of it, vm_expf's clamps and second
 * factor 15%); 8.0-8.3 with the prefetch (the maximum's pass 2.7-3.6 -> 2.0-2.5). */
#define LSE_LANES 16
VM_CLONES static double sum_exp_f32(const float *p, int64_t n, float m, const float *next)
{
	float e[64];
	double s[LSE_LANES] = {0}; /* two vectors of double on AVX-512 */
	for (int64_t r0 = 0; r0 < n; r0 += 64) {
		int64_t k = n - r0 < 64 ? n - r0 : 64;
		for (int64_t c = 0; next && c < k; c += 16)
			__builtin_prefetch(next + r0 + c);
		for (int64_t r = 0; r < k; r++) {
			e[r] = vm_expf_row(p[r0 + r] - m);
		}
		for (int64_t r = k; r % LSE_LANES; r++)
			e[r] = 0; /* s + 0 is s */
		for (int64_t r = 0; r < k; r += LSE_LANES)
			for (int j = 0; j < LSE_LANES; j++)
				s[j] += e[r + j];
	}
	for (int w = LSE_LANES / 2; w; w /= 2)
		for (int k = 0; k < w; k++)
			s[k] += s[k + w];
	return s[0];
}

/* The serial walk m = v > m || isnan(v) ? v : m (v < m for the minimum) from -inf (+inf) over
 * p[0, n): the last NaN if one comes, else the first of the extreme values. 64-byte vectors of
 * lanes (GCC's vector extension: a compare's mask selects, as exact as the walk's compare) find
 * the extreme, which is the walk's bits unless a NaN came or it is a zero (the walk keeps the first
 * of -0 and +0 and a NaN's payload is the last's): then the walk runs. */
#define EXTREME(T, IT, name, CMP, start)                                                                \
	VM_CLONES static double name(const T *p, int64_t n)                                            \
	{                                                                                              \
		typedef T vt __attribute__((vector_size(64)));                                         \
		typedef IT vi __attribute__((vector_size(64)));                                        \
		enum { L = 64 / sizeof(T) };                                                           \
		T r = (T)(start);                                                                      \
		vt m = {0};                                                                            \
		vi nan = {0};                                                                          \
		m += r;                                                                                \
		int64_t i = 0;                                                                         \
		for (; i + L <= n; i += L) {                                                           \
			vt v;                                                                          \
			memcpy(&v, p + i, sizeof v);                                                   \
			vi take = v CMP m;                                                             \
			m = (vt)(((vi)v & take) | ((vi)m & ~take));                                    \
			nan |= v != v;                                                                 \
		}                                                                                      \
		int any = 0;                                                                           \
		for (int k = 0; k < L; k++) {                                                          \
			r = m[k] CMP r ? m[k] : r;                                                     \
			any |= nan[k] != 0;                                                            \
		}                                                                                      \
		for (; i < n; i++) {                                                                   \
			r = p[i] CMP r ? p[i] : r;                                                     \
			any |= p[i] != p[i];                                                           \
		}                                                                                      \
		if (!any && r != 0)                                                                    \
			return r;                                                                      \
		double w = (start);                                                                    \
		for (i = 0; i < n; i++)                                                                \
			w = p[i] CMP w || isnan(p[i]) ? p[i] : w;                                      \
		return w;                                                                              \
	}
EXTREME(float, int32_t, max_f32, >, -INFINITY)
EXTREME(float, int32_t, min_f32, <, INFINITY)
EXTREME(double, int64_t, max_f64, >, -INFINITY)
EXTREME(double, int64_t, min_f64, <, INFINITY)

double run_extreme(const struct rtensor *a, int64_t at, int64_t n, int lo)
{
	if (a->dtype == DT_FLOAT)
		return (lo ? min_f32 : max_f32)((const float *)a->data + at, n);
	return (lo ? min_f64 : max_f64)((const double *)a->data + at, n);
}

/* RK_L1 or RK_PROD of contiguous rows u0, u0 + 1, ... (ROWS_AT_ONCE of them): each row's serial
 * double chain in index order, the rows' chains interleaved so that they overlap. */
#define ROWS_AT_ONCE 8
#define ROWS_CHAIN(T, name)                                                                             \
	static void name(const T *p, int64_t len, int prod, double *acc)                               \
	{                                                                                              \
		double s[ROWS_AT_ONCE];                                                                \
		for (int k = 0; k < ROWS_AT_ONCE; k++)                                                 \
			s[k] = prod;                                                                   \
		for (int64_t r = 0; r < len; r++)                                                      \
			for (int k = 0; k < ROWS_AT_ONCE; k++) {                                       \
				double v = p[k * len + r];                                             \
				s[k] = prod ? s[k] * v : s[k] + fabs(v);                               \
			}                                                                              \
		memcpy(acc, s, sizeof s);                                                              \
	}
ROWS_CHAIN(float, rows_f32)
ROWS_CHAIN(double, rows_f64)

/* Output u of a lanes_job: its len elements walked one by one (the extremes of a contiguous row by
 * run_extreme). */
static void lane_one(const struct lanes_job *j, int64_t u)
{
	int dbl = j->a->dtype == DT_DOUBLE;
	const float *pf = j->a->data;
	const double *pd = j->a->data;
	int64_t at = u / j->inner * j->len * j->inner + u % j->inner;
	double m = j->kind == RK_MIN ? INFINITY : -INFINITY, s = j->kind == RK_PROD ? 1 : 0;
	int ext = j->kind == RK_MIN || j->kind == RK_MAX || j->kind == RK_LSE;
	if (ext && j->inner == 1) {
		m = run_extreme(j->a, at, j->len, j->kind == RK_MIN);
		at += j->len;
	}
	for (int64_t r = 0; r < j->len && !(ext && j->inner == 1); r++, at += j->inner) {
		double v = dbl ? pd[at] : pf[at];
		if (j->kind == RK_MIN)
			m = v < m || isnan(v) ? v : m;
		else if (j->kind == RK_MAX || j->kind == RK_LSE)
			m = v > m || isnan(v) ? v : m;
		else if (j->kind == RK_PROD)
			s *= v;
		else
			s += fabs(v);
	}
	if (j->kind == RK_LSE && !isinf(m)) {
		at -= j->len * j->inner;
		const float *next = at + 2 * j->len <= j->a->numel ? pf + at + j->len : NULL; /* inner 1 here */
		if (!dbl) /* a NaN maximum is the result (m + log 1) */
			s = isnan(m) ? 1 : sum_exp_f32(pf + at, j->len, (float)m, next);
		for (int64_t r = 0; dbl && r < j->len; r++, at += j->inner)
			s += exp(pd[at] - m);
	}
	if (j->kind == RK_LSE)
		j->mx[u] = m;
	j->acc[u] = j->kind == RK_MIN || j->kind == RK_MAX ? m : s;
}

/* ReduceLogSumExp over a strided axis: outputs (o, i0 .. i0 + n - 1), n <= LSE_COLS, side by side.
 * Each one's maximum is lane_one's walk and its sum of exponentials in index order (float32:
 * vm_expf of x - m added in double, not in lane_one's lanes; float64: libm's exp, lane_one's), the
 * len rows walked once for the maxima and once for the sums, each row's n elements a contiguous run. */
#define LSE_COLS 256
VM_CLONES static void lse_cols_f32(const float *p, int64_t len, int64_t inner, int64_t n, double *mx, double *acc)
{
	float m[LSE_COLS];
	double s[LSE_COLS];
	for (int64_t i = 0; i < n; i++)
		m[i] = -INFINITY, s[i] = 0;
	for (int64_t r = 0; r < len; r++)
		for (int64_t i = 0; i < n; i++) {
			float v = p[r * inner + i];
			m[i] = v > m[i] || v != v ? v : m[i];
		}
	for (int64_t r = 0; r < len; r++)
		for (int64_t i = 0; i < n; i++)
			s[i] += vm_expf(p[r * inner + i] - m[i]);
	for (int64_t i = 0; i < n; i++)
		mx[i] = m[i], acc[i] = isinf(m[i]) ? 0 : s[i];
}

static void lse_cols_f64(const double *p, int64_t len, int64_t inner, int64_t n, double *mx, double *acc)
{
	for (int64_t i = 0; i < n; i++)
		mx[i] = -INFINITY, acc[i] = 0;
	for (int64_t r = 0; r < len; r++)
		for (int64_t i = 0; i < n; i++) {
			double v = p[r * inner + i];
			mx[i] = v > mx[i] || isnan(v) ? v : mx[i];
		}
	for (int64_t r = 0; r < len; r++)
		for (int64_t i = 0; i < n; i++)
			acc[i] += isinf(mx[i]) ? 0 : exp(p[r * inner + i] - mx[i]);
}

/* Outputs [u0, u1): contiguous rows' L1 and Prod ROWS_AT_ONCE at a time, but a NaN result again
 * alone (the interleaved chains may be vectorised, whose adds and products take their operands
 * either way round: of two NaNs x86 keeps the first's payload) */
static void lane_reduce(void *arg, int64_t u0, int64_t u1)
{
	const struct lanes_job *j = arg;
	int chain = j->inner == 1 && (j->kind == RK_L1 || j->kind == RK_PROD);
	for (; chain && u0 + ROWS_AT_ONCE <= u1; u0 += ROWS_AT_ONCE) {
		if (j->a->dtype == DT_DOUBLE)
			rows_f64((const double *)j->a->data + u0 * j->len, j->len, j->kind == RK_PROD, j->acc + u0);
		else
			rows_f32((const float *)j->a->data + u0 * j->len, j->len, j->kind == RK_PROD, j->acc + u0);
		for (int64_t u = u0; u < u0 + ROWS_AT_ONCE; u++)
			if (isnan(j->acc[u]))
				lane_one(j, u);
	}
	while (j->inner > 1 && j->kind == RK_LSE && u0 < u1) { /* a strided axis: runs of outputs at once */
		int64_t i0 = u0 % j->inner, n = u1 - u0, at = u0 / j->inner * j->len * j->inner + i0;
		n = n < j->inner - i0 ? n : j->inner - i0;
		n = n < LSE_COLS ? n : LSE_COLS;
		if (j->a->dtype == DT_FLOAT)
			lse_cols_f32((const float *)j->a->data + at, j->len, j->inner, n, j->mx + u0, j->acc + u0);
		else
			lse_cols_f64((const double *)j->a->data + at, j->len, j->inner, n, j->mx + u0, j->acc + u0);
		u0 += n;
	}
	for (int64_t u = u0; u < u1; u++)
		lane_one(j, u);
}

/* the next input element's output offset *o, stepping the index idx of a's dimensions 0..last (the
 * output's strides ost, 0 along reduced dimensions) */
static void step_out(const struct rtensor *a, const int64_t *ost, int last, int64_t *idx, int64_t *o)
{
	for (int d = last; d >= 0; d--) {
		*o += ost[d];
		if (++idx[d] < a->dims[d])
			return;
		*o -= ost[d] * a->dims[d];
		idx[d] = 0;
	}
}

static int reduce(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		  enum rk kind)
{
	const struct rtensor *a = in[0];
	int64_t axes[RT_MAX_DIMS];
	int na = 0, red[RT_MAX_DIMS] = {0};
	if (node_axes(x, n, in, axes, &na))
		return exec_status(x);
	if (kind != RK_PROD && want_float(x, a, "the input"))
		return exec_status(x);
	int keep = attr_int(n, "keepdims", 1) != 0;
	if (na == 0 && attr_int(n, "noop_with_empty_axes", 0)) {
		/* each element reduced alone, as ONNX's reference: |x| (L1, L2), x^2, log x; x itself for
		 * the rest */
		if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
			return exec_status(x);
		if (kind != RK_L1 && kind != RK_L2 && kind != RK_SSQ && kind != RK_LOGSUM) {
			memcpy(out[0]->data, a->data, a->nbytes);
			return 0;
		}
		for (int64_t i = 0; i < a->numel; i++) {
			double v = rt_get(a, i);
			rt_set(out[0], i, reduce_finish(kind, kind == RK_L1 ? fabs(v) : kind == RK_LOGSUM ? v : v * v, 1, v));
		}
		return 0;
	}
	for (int i = 0; i < na; i++) {
		int ax;
		if (norm_axis(x, axes[i], a->ndim, &ax))
			return exec_status(x);
		red[ax] = 1;
	}
	int64_t dims[RT_MAX_DIMS], kdims[RT_MAX_DIMS];
	int nd = 0;
	int64_t count = 1;
	for (int i = 0; i < a->ndim; i++) {
		int r = na == 0 || red[i];
		kdims[i] = r ? 1 : a->dims[i];
		if (r)
			count *= a->dims[i];
		if (!r || keep)
			dims[nd++] = kdims[i];
	}
	if (!exec_alloc(x, out[0], a->dtype, nd, dims))
		return exec_status(x);
	int64_t on = out[0]->numel, ost[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0};
	double *acc = exec_scratch(x, (size_t)(on ? on : 1) * sizeof *acc), *mx = NULL; /* mx: RK_LSE's maxima */
	if (acc && kind == RK_LSE && !(mx = exec_scratch(x, (size_t)(on ? on : 1) * sizeof *mx)))
		exec_scratch_free(x, acc, (size_t)(on ? on : 1) * sizeof *acc);
	if (!acc || (kind == RK_LSE && !mx))
		return exec_status(x);
	/* reduced axes in one block: the input is (outer, len, inner) and the loops are plain */
	int first = -1, last = -1, block = 1;
	for (int d = 0; d < a->ndim; d++)
		if (na == 0 || red[d]) {
			if (first < 0)
				first = d;
			else if (last != d - 1)
				block = 0;
			last = d;
		}
	int sums = kind == RK_SUM || kind == RK_MEAN || kind == RK_LOGSUM;
	int64_t outer = 1, len = 1, inner = 1;
	if (!block && sums && na && !red[a->ndim - 1]) {
		/* axes of 1 aside, a block with kept axes last (Tile's gradient: (1, 8, 2, 64, 1, 48, 1,
		 * 48) over 0, 2, 4, 6): the row walk below sums in the same order, one thread, 5.1 ms (its
		 * Reshape included) for those 9.4 MB, where the block's columns take 2.1 */
		int f = -1, l = -1, b = 1;
		for (int d = 0; d < a->ndim; d++)
			if (red[d] && a->dims[d] != 1) {
				if (f < 0)
					f = d;
				else if (l != d - 1)
					for (int e = l + 1; e < d; e++)
						b &= a->dims[e] == 1;
				l = d;
			}
		for (int d = l + 1; d < a->ndim; d++)
			inner *= a->dims[d];
		if (f >= 0 && b && inner > 1)
			block = 1, first = f, last = l;
		inner = 1;
	}
	if (block && first >= 0 && sums && is_float(a)) {
		for (int d = 0; d < a->ndim; d++)
			*(d < first ? &outer : d <= last ? &len : &inner) *= a->dims[d];
		struct block j = {a, acc, len, inner, inner < BLOCK_COLS ? inner : BLOCK_COLS, 0};
		if (on) { /* else some kept dimension is 0 */
			j.chunks = (inner + j.cols - 1) / j.cols;
			kernel_for(outer * j.chunks, KERNEL_GRAIN / (len * j.cols + 1) + 1, block_sums, &j);
		}
		for (int64_t i = 0; i < on; i++) {
			double v = reduce_finish(kind, acc[i], count, 0);
			if (out[0]->dtype == DT_FLOAT)
				((float *)out[0]->data)[i] = (float)v;
			else
				((double *)out[0]->data)[i] = v;
		}
		exec_scratch_free(x, acc, (size_t)(on ? on : 1) * sizeof *acc);
		return 0;
	}
	int done = 0;
	if (block && first >= 0 && !sums && kind != RK_L2 && kind != RK_SSQ && is_float(a)) {
		struct lanes_job j = {a, acc, mx, 1, 1, kind};
		for (int d = first; d <= last; d++)
			j.len *= a->dims[d];
		for (int d = last + 1; d < a->ndim; d++)
			j.inner *= a->dims[d];
		kernel_for(on, KERNEL_GRAIN / (j.len + 1) + 1, lane_reduce, &j);
		done = 1;
	}
	c_strides(a->ndim, kdims, ost);
	for (int d = 0; d < a->ndim; d++)
		if (na == 0 || red[d])
			ost[d] = 0; /* moving along a reduced dimension stays on the same output */
	for (int64_t i = 0; i < on && !done; i++)
		acc[i] = kind == RK_MAX ? -INFINITY : kind == RK_MIN ? INFINITY : kind == RK_PROD ? 1 : 0;
	int64_t o = 0;
	/* reduced trailing axes: runs of `run` elements, each into one output */
	int64_t run = 1;
	int t = a->ndim;
	while (t > 0 && (na == 0 || red[t - 1]))
		run *= a->dims[--t];
	if (!done && (sums || kind == RK_L2 || kind == RK_SSQ) && t < a->ndim && is_float(a)) {
		struct runs j = {.a = a, .acc = acc, .run = run, .squares = kind == RK_L2 || kind == RK_SSQ};
		int64_t st[RT_MAX_DIMS];
		c_strides(a->ndim, a->dims, st);
		for (int d = 0; d < t; d++) {
			int r = na == 0 || red[d];
			int *nn = r ? &j.nr : &j.nk;
			(r ? j.rd : j.kd)[*nn] = a->dims[d];
			(r ? j.rs : j.ks)[(*nn)++] = st[d];
		}
		int64_t nruns = run ? a->numel / run : 0;
		size_t pb = (size_t)nruns * sizeof *j.part;
		if (j.nr && nruns && run >= 8 && !(j.part = exec_scratch_raw(x, pb))) {
			exec_scratch_free(x, acc, (size_t)(on ? on : 1) * sizeof *acc);
			return exec_status(x);
		}
		if (j.part)
			kernel_for(nruns, KERNEL_GRAIN / run + 1, run_parts, &j);
		kernel_for(on, KERNEL_GRAIN / ((j.part ? nruns : a->numel) / (on ? on : 1) + 1) + 1, run_sums, &j);
		exec_scratch_free(x, j.part, j.part ? pb : 0);
		done = 1;
	}
	if (!done && sums) { /* kept last axis: typed rows into their outputs */
		done = 1;
		int64_t row = a->ndim ? a->dims[a->ndim - 1] : 1, os = a->ndim ? ost[a->ndim - 1] : 0;
		for (int64_t i = 0; i < a->numel; i += row) {
			if (a->dtype == DT_FLOAT)
				for (int64_t j = 0; j < row; j++)
					acc[o + j * os] += ((const float *)a->data)[i + j];
			else
				for (int64_t j = 0; j < row; j++)
					acc[o + j * os] += ((const double *)a->data)[i + j];
			step_out(a, ost, a->ndim - 2, idx, &o);
		}
	}
	if (!done && kind == RK_LSE) { /* each output's maximum, a first pass */
		for (int64_t i = 0; i < on; i++)
			mx[i] = -INFINITY;
		for (int64_t i = 0; i < a->numel; i++) {
			double v = rt_get(a, i);
			mx[o] = v > mx[o] || isnan(v) ? v : mx[o];
			step_out(a, ost, a->ndim - 1, idx, &o);
		}
	}
	for (int64_t i = 0; !done && i < a->numel; i++) {
		double v = rt_get(a, i);
		if (kind == RK_LSE)
			acc[o] += isinf(mx[o]) ? 0 : exp(v - mx[o]);
		else if (kind == RK_L1)
			acc[o] += fabs(v);
		else if (kind == RK_MAX)
			acc[o] = v > acc[o] || isnan(v) ? v : acc[o];
		else if (kind == RK_MIN)
			acc[o] = v < acc[o] || isnan(v) ? v : acc[o];
		else if (kind == RK_PROD)
			acc[o] *= v;
		else if (kind == RK_L2 || kind == RK_SSQ)
			acc[o] += v * v;
		else
			acc[o] += v;
		step_out(a, ost, a->ndim - 1, idx, &o);
	}
	for (int64_t i = 0; i < on; i++)
		rt_set(out[0], i, reduce_finish(kind, acc[i], count, mx ? mx[i] : 0));
	if (mx)
		exec_scratch_free(x, mx, (size_t)(on ? on : 1) * sizeof *mx);
	exec_scratch_free(x, acc, (size_t)(on ? on : 1) * sizeof *acc);
	return 0;
}

static int reduce_sum_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, RK_SUM);
}

static int reduce_mean_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, RK_MEAN);
}

static int reduce_max_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, RK_MAX);
}

static int reduce_min_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, RK_MIN);
}

static int reduce_l2_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, RK_L2);
}

#define REDUCE_RUN(name, kind) \
	static int name##_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out) \
	{ \
		return reduce(x, n, in, out, kind); \
	}
REDUCE_RUN(reduce_l1, RK_L1)
REDUCE_RUN(reduce_sum_square, RK_SSQ)
REDUCE_RUN(reduce_log_sum, RK_LOGSUM)
REDUCE_RUN(reduce_log_sum_exp, RK_LSE)

/* Size: x's element count, an int64 scalar; computed from the shape alone (OPF_META) */
static int size_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	int64_t *o = exec_alloc(x, out[0], DT_INT64, 0, NULL);
	if (!o)
		return exec_status(x);
	*o = in[0]->numel;
	return 0;
}

/* The shared part of the two losses: per-element loss -w[t] * logp[t] over (N, d1, ...), with
 * log-probabilities laid out (N, C, d1, ...); or, where `picked` is given, logp gives the shape and
 * picked[i] is element i's log-probability of its label. */
static int nll(struct exec *x, const struct node *n, const struct rtensor *logp, const struct rtensor *t,
	       const struct rtensor *w, const double *picked, struct rtensor *out)
{
	if (t->dtype != DT_INT64 && t->dtype != DT_INT32)
		return exec_fail(x, "labels must be int64 or int32, not %s", dtype_name(t->dtype));
	if (logp->ndim < 2 || t->ndim != logp->ndim - 1 || t->dims[0] != logp->dims[0])
		return exec_fail(x, "labels must have the scores' shape without the class dimension");
	for (int i = 1; i < t->ndim; i++)
		if (t->dims[i] != logp->dims[i + 1])
			return exec_fail(x, "labels must have the scores' shape without the class dimension");
	int64_t c = logp->dims[1], inner = 1;
	for (int i = 2; i < logp->ndim; i++)
		inner *= logp->dims[i];
	if (w && (w->ndim != 1 || w->dims[0] != c))
		return exec_fail(x, "weights must be a vector of %lld classes", (long long)c);
	int64_t ignore = attr_int(n, "ignore_index", INT64_MIN);
	int mean = attr_str_is(n, "reduction", "mean", 1), sum = attr_str_is(n, "reduction", "sum", 0);
	if (!mean && !sum && !attr_str_is(n, "reduction", "none", 0))
		return exec_fail(x, "reduction must be none, sum or mean");
	int64_t one = 1;
	if (!exec_alloc(x, out, logp->dtype, mean || sum ? 0 : t->ndim, mean || sum ? &one : t->dims))
		return exec_status(x);
	double total = 0, wsum = 0;
	for (int64_t i = 0; i < t->numel; i++) {
		int64_t lab = rt_get_i(t, i), b = i / inner, s = i % inner;
		double l = 0;
		if (lab != ignore) {
			if (lab < 0 || lab >= c)
				return exec_fail(x, "label %lld is not a class in [0, %lld)", (long long)lab, (long long)c);
			double wt = w ? rt_get(w, lab) : 1;
			l = -wt * (picked ? picked[i] : rt_get(logp, (b * c + lab) * inner + s));
			wsum += wt;
		}
		total += l;
		if (!mean && !sum)
			rt_set(out, i, l);
	}
	if (mean || sum)
		rt_set(out, 0, mean ? total / wsum : total);
	return 0;
}

static int nll_loss_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	if (want_float(x, in[0], "the input"))
		return exec_status(x);
	return nll(x, n, in[0], in[1], n->n_in > 2 ? in[2] : NULL, NULL, out[0]);
}

/* log_softmax over axis 1 of (N, C, d1, ...) into lp (same shape). */
static void log_softmax_c(const struct rtensor *s, struct rtensor *lp)
{
	int64_t nb = s->dims[0], c = s->dims[1], inner = s->numel / (nb * c != 0 ? nb * c : 1);
	if (s->dtype == DT_FLOAT && inner == 1) { /* (N, C): contiguous rows */
		softmax_last(s->data, lp->data, nb, c, 1);
		return;
	}
	for (int64_t b = 0; b < nb; b++)
		for (int64_t k = 0; k < inner; k++) {
			double m = -INFINITY, z = 0;
			for (int64_t j = 0; j < c; j++)
				m = fmax(m, rt_get(s, (b * c + j) * inner + k));
			for (int64_t j = 0; j < c; j++)
				z += exp(rt_get(s, (b * c + j) * inner + k) - m);
			double lz = m + log(z);
			for (int64_t j = 0; j < c; j++)
				rt_set(lp, (b * c + j) * inner + k, rt_get(s, (b * c + j) * inner + k) - lz);
		}
}

/* The loss of (N, C) float32 scores without their log-probabilities: only each row's label's is
 * made (log_softmax_pick: softmax_last's float), a block of rows at a time, for nll.
 * Without it, a language model's logits took a temporary of their size (GPT-2: 1024 x 50257, 196
 * MiB), workspace that no plan counts, wherever the loss runs without its second output (the
 * forward model that verify runs; a training graph asks for it, for the gradient). 0 or the node's
 * error once it ran; -1 when the inputs are not that case. */
#define CE_BLOCK_BYTES (4 << 20)
static int ce_blocked(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *out)
{
	const struct rtensor *s = in[0], *t = in[1];
	if (s->dtype != DT_FLOAT || s->ndim != 2 || t->ndim != 1 || t->dims[0] != s->dims[0] || !s->data || !t->data ||
	    (t->dtype != DT_INT64 && t->dtype != DT_INT32))
		return -1;
	int64_t nb = s->dims[0], c = s->dims[1], ignore = attr_int(n, "ignore_index", INT64_MIN);
	int64_t rows = c ? CE_BLOCK_BYTES / (c * (int64_t)sizeof(float)) : nb;
	rows = rows < 1 ? 1 : rows > nb ? nb : rows;
	float *blk = exec_scratch_raw(x, (size_t)(rows * c) * sizeof *blk + 1);
	double *picked = blk ? exec_scratch_raw(x, (size_t)nb * sizeof *picked + 1) : NULL;
	int64_t *col = picked ? exec_scratch_raw(x, (size_t)nb * sizeof *col + 1) : NULL;
	int rc = 0;
	if (!blk || !picked || !col) {
		rc = exec_status(x);
		goto out;
	}
	for (int64_t i = 0; i < nb; i++) {
		int64_t lab = rt_get_i(t, i);
		col[i] = lab != ignore && lab >= 0 && lab < c ? lab : -1;
	}
	for (int64_t r0 = 0; r0 < nb; r0 += rows) {
		int64_t k = nb - r0 < rows ? nb - r0 : rows;
		log_softmax_pick((const float *)s->data + r0 * c, blk, col + r0, picked + r0, k, c);
	}
	rc = nll(x, n, s, t, n->n_in > 2 ? in[2] : NULL, picked, out);
out:
	if (col)
		exec_scratch_free(x, col, (size_t)nb * sizeof *col + 1);
	if (picked)
		exec_scratch_free(x, picked, (size_t)nb * sizeof *picked + 1);
	if (blk)
		exec_scratch_free(x, blk, (size_t)(rows * c) * sizeof *blk + 1);
	return rc;
}

static int softmax_ce_loss_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			       struct rtensor *const *out)
{
	const struct rtensor *s = in[0];
	if (want_float(x, s, "the scores"))
		return exec_status(x);
	if (s->ndim < 2)
		return exec_fail(x, "scores must be (N, C, ...)");
	int blocked = n->n_out > 1 && n->out[1] ? -1 : ce_blocked(x, n, in, out[0]);
	if (blocked >= 0)
		return blocked;
	/* log-probabilities: output 1 when asked for, a temporary otherwise */
	struct rtensor tmp = {0}, *lp = n->n_out > 1 && n->out[1] ? out[1] : &tmp;
	void *p = lp == &tmp ? exec_alloc_temp(x, lp, s->dtype, s->ndim, s->dims) : exec_alloc(x, lp, s->dtype, s->ndim, s->dims);
	if (!p && exec_status(x))
		return exec_status(x);
	if (p)
		log_softmax_c(s, lp);
	int rc = p ? nll(x, n, lp, in[1], n->n_in > 2 ? in[2] : NULL, NULL, out[0]) : 0;
	if (!p) { /* shapes only */
		int mean = !attr_str_is(n, "reduction", "none", 0);
		int64_t one = 1;
		exec_alloc(x, out[0], s->dtype, mean ? 0 : in[1]->ndim, mean ? &one : in[1]->dims);
		rc = exec_status(x);
	}
	if (lp == &tmp && tmp.data)
		exec_free_temp(x, &tmp); /* a temporary of this node */
	return rc;
}


/* ---- gradient rules ---- */

/* The reduced axes of node n (normalised, ascending) from its axes input or attribute; all axes
 * when none are given. Returns the count, or -1 when they are not known constants. */
static int reduced_axes(struct ad *a, const struct node *n, int rank, int *axes)
{
	int64_t raw[RT_MAX_DIMS];
	int na = 0, mark[RT_MAX_DIMS] = {0};
	if (n->n_in > 1 && n->in[1]) {
		const struct rtensor *t = ad_shape(a, n->in[1]);
		if (!t->data || t->numel > RT_MAX_DIMS)
			return -1;
		for (int64_t i = 0; i < t->numel; i++)
			raw[na++] = rt_get_i(t, i);
	} else {
		size_t k;
		const int64_t *p = attr_ints(n, "axes", &k);
		for (size_t i = 0; i < k && i < RT_MAX_DIMS; i++)
			raw[na++] = p[i];
	}
	for (int i = 0; i < na; i++)
		mark[raw[i] < 0 ? raw[i] + rank : raw[i]] = 1;
	int m = 0;
	for (int i = 0; i < rank; i++)
		if (!na || mark[i])
			axes[m++] = i;
	return m;
}

/* g (the reduced result) brought back to x's rank: Unsqueeze when keepdims was 0. */
static struct value *keep_dims(struct ad *a, const struct node *n, struct value *g, const int *axes, int na)
{
	if (attr_int(n, "keepdims", 1))
		return g;
	int64_t ax[RT_MAX_DIMS];
	for (int i = 0; i < na; i++)
		ax[i] = axes[i];
	return ad_op2(a, "Unsqueeze", g, ad_ints(a, ax, (size_t)na));
}

static int reduce_grad(struct ad *a, const struct node *n, enum rk kind)
{
	struct value *x = n->in[0], *g = ad_dy(a, n->out[0]);
	const struct rtensor *xs = ad_shape(a, x);
	int axes[RT_MAX_DIMS], na = reduced_axes(a, n, xs->ndim, axes);
	if (na < 0)
		return ad_fail(a, "the axes must be constants to differentiate");
	int noop = na == 0 && attr_int(n, "noop_with_empty_axes", 0);
	if (noop && kind != RK_L1 && kind != RK_L2 && kind != RK_SSQ && kind != RK_LOGSUM && kind != RK_LSE)
		return ad_give(a, x, g);
	struct value *gk = noop ? g : keep_dims(a, n, g, axes, na), *y = noop ? n->out[0] : NULL;
	if (kind == RK_MAX || kind == RK_MIN) {
		/* the gradient goes to the extrema, shared evenly among ties */
		struct value *yk = keep_dims(a, n, n->out[0], axes, na);
		struct value *m = ad_cast(a, ad_op2(a, "Equal", x, yk), xs->dtype);
		if (!m)
			return -1;
		int64_t ax[RT_MAX_DIMS];
		for (int i = 0; i < na; i++)
			ax[i] = axes[i];
		struct value *cnt = ad_reduce(a, "ReduceSum", m, ax, na, 1);
		return !cnt ? -1 : ad_give(a, x, ad_op2(a, "Mul", m, ad_op2(a, "Div", gk, cnt)));
	}
	if (kind == RK_PROD) {
		/* exact with zeros, from the product p of a group's nonzero elements and its count z of
		 * zeros: p / x where z = 0; p at the zero where z = 1; 0 elsewhere */
		int64_t ax[RT_MAX_DIMS];
		for (int i = 0; i < na; i++)
			ax[i] = axes[i];
		struct value *zero = ad_scalar(a, xs->dtype, 0), *one = ad_scalar(a, xs->dtype, 1);
		struct value *isz = ad_op2(a, "Equal", x, zero);
		struct value *nz[3] = {isz, one, x}, *xnz = ad_op(a, "Where", nz, 3);
		struct value *p = ad_reduce(a, "ReduceProd", xnz, ax, na, 1);
		struct value *z = ad_reduce(a, "ReduceSum", ad_cast(a, isz, xs->dtype), ax, na, 1);
		struct value *at_one[3] = {ad_op2(a, "Equal", z, one), p, zero};
		struct value *at_zero[3] = {isz, ad_op(a, "Where", at_one, 3), zero};
		struct value *d[3] = {ad_op2(a, "Equal", z, zero), ad_op2(a, "Div", p, xnz), ad_op(a, "Where", at_zero, 3)};
		return ad_give(a, x, ad_op2(a, "Mul", gk, ad_op(a, "Where", d, 3)));
	}
	if (kind == RK_L2) { /* x g / y, and 0 where the norm is 0 (as PyTorch) */
		struct value *yk = y ? y : keep_dims(a, n, n->out[0], axes, na), *zero = ad_scalar(a, xs->dtype, 0);
		struct value *ins[3] = {ad_op2(a, "Equal", yk, zero), zero, ad_op2(a, "Mul", x, ad_op2(a, "Div", gk, yk))};
		return ad_give(a, x, ad_op(a, "Where", ins, 3));
	}
	if (kind == RK_SSQ) /* 2 x g */
		return ad_give(a, x, ad_op2(a, "Mul", ad_op2(a, "Mul", x, ad_scalar(a, xs->dtype, 2)), gk));
	if (kind == RK_L1) { /* sign(x) g, as (x > 0) - (x < 0): Sign is opset 9's, and 0 at 0 as PyTorch */
		struct value *zero = ad_scalar(a, xs->dtype, 0);
		struct value *pos = ad_cast(a, ad_op2(a, "Greater", x, zero), xs->dtype);
		struct value *neg = ad_cast(a, ad_op2(a, "Less", x, zero), xs->dtype);
		return !pos || !neg ? -1 : ad_give(a, x, ad_op2(a, "Mul", ad_op2(a, "Sub", pos, neg), gk));
	}
	if (kind == RK_LSE) /* softmax: g exp(x - y) */
		return ad_give(a, x, ad_op2(a, "Mul", ad_op1(a, "Exp", ad_op2(a, "Sub", x, y ? y : keep_dims(a, n, n->out[0], axes, na))), gk));
	if (kind == RK_LOGSUM) /* g / sum = g exp(-y), broadcast */
		gk = ad_op2(a, "Div", gk, ad_op1(a, "Exp", y ? y : keep_dims(a, n, n->out[0], axes, na)));
	struct value *d = ad_op2(a, "Expand", gk, ad_shape_of(a, x));
	if (kind == RK_MEAN)
		d = ad_op2(a, "Div", d, ad_count(a, x, axes, na, xs->dtype));
	return ad_give(a, x, d);
}

static int reduce_sum_grad(struct ad *a, const struct node *n)
{
	return reduce_grad(a, n, RK_SUM);
}

static int reduce_mean_grad(struct ad *a, const struct node *n)
{
	return reduce_grad(a, n, RK_MEAN);
}

static int reduce_max_grad(struct ad *a, const struct node *n)
{
	return reduce_grad(a, n, RK_MAX);
}

static int reduce_min_grad(struct ad *a, const struct node *n)
{
	return reduce_grad(a, n, RK_MIN);
}

static int reduce_l2_grad(struct ad *a, const struct node *n)
{
	return reduce_grad(a, n, RK_L2);
}

#define REDUCE_GRAD(name, kind) \
	static int name##_grad(struct ad *a, const struct node *n) \
	{ \
		return reduce_grad(a, n, kind); \
	}
REDUCE_GRAD(reduce_l1, RK_L1)
REDUCE_GRAD(reduce_sum_square, RK_SSQ)
REDUCE_GRAD(reduce_log_sum, RK_LOGSUM)
REDUCE_GRAD(reduce_log_sum_exp, RK_LSE)

/* The gradient of both losses with respect to their (N, C, d...) input, except for the sign and the
 * softmax: -onehot(labels) * scale * f, where f holds the per-element class weights and the
 * ignore_index mask, and scale is g / sum(f) (mean), g (sum) or g per element (none). */
static struct value *nll_input_grad(struct ad *a, const struct node *n, struct value *g, const struct rtensor *ss,
				    struct value **onehot)
{
	struct value *lab = n->in[1], *w = n->n_in > 2 ? n->in[2] : NULL;
	int dt = ss->dtype, r = ss->ndim;
	if (ad_shape(a, lab)->dtype != DT_INT64)
		lab = ad_cast(a, lab, DT_INT64);
	/* classes (1, C, 1, ...) compared with labels (N, 1, d...) */
	int64_t c = ss->dims[1], shp[RT_MAX_DIMS], one = 1, *cls = xcalloc((size_t)c + 1, sizeof *cls);
	if (!cls)
		return ad_fail(a, "out of memory"), NULL;
	for (int64_t i = 0; i < c; i++)
		cls[i] = i;
	for (int i = 0; i < r; i++)
		shp[i] = i == 1 ? c : 1;
	struct value *classes = ad_op2(a, "Reshape", ad_ints(a, cls, (size_t)c), ad_ints(a, shp, (size_t)r));
	xfree(cls);
	struct value *lab1 = ad_op2(a, "Unsqueeze", lab, ad_ints(a, &one, 1));
	*onehot = ad_cast(a, ad_op2(a, "Equal", lab1, classes), dt);
	struct value *f = NULL;
	const struct attr *ig = node_attr(n, "ignore_index");
	if (ig && ig->type == ATTR_INT) {
		int64_t iv = ig->i;
		struct value *valid = ad_op1(a, "Not", ad_op2(a, "Equal", lab, ad_ints(a, &iv, 1)));
		f = ad_cast(a, valid, dt);
		if (w) { /* an ignored label may be out of range: gather a valid one instead */
			struct value *zero = ad_ints(a, (int64_t[]){0}, 1);
			struct value *ins[3] = {valid, lab, zero};
			lab = ad_op(a, "Where", ins, 3);
		}
	}
	if (w) {
		struct value *wl = ad_op2(a, "Gather", w, lab);
		f = f ? ad_op2(a, "Mul", f, wl) : wl;
	}
	struct value *scale;
	if (attr_str_is(n, "reduction", "none", 0)) {
		scale = ad_op2(a, "Unsqueeze", g, ad_ints(a, &one, 1));
	} else if (attr_str_is(n, "reduction", "sum", 0)) {
		scale = g;
	} else {
		struct value *den = f ? ad_reduce(a, "ReduceSum", f, NULL, 0, 0) : ad_count(a, n->in[1], NULL, 0, dt);
		scale = ad_op2(a, "Div", g, den);
	}
	if (f)
		scale = ad_op2(a, "Mul", scale, ad_op2(a, "Unsqueeze", f, ad_ints(a, &one, 1)));
	return scale;
}

/* SoftmaxCrossEntropyLoss: d/dscores = (softmax(scores) - onehot) * scale */
static int softmax_ce_loss_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]);
	if (!g)
		return ad_fail(a, "only the loss output can be differentiated");
	const struct rtensor *ss = ad_shape(a, n->in[0]);
	/* the forward node computes the log-probabilities anyway: have it output them */
	struct value *logp = ad_add_output(a, n, 1);
	if (!logp)
		return -1;
	struct value *onehot = NULL, *scale = nll_input_grad(a, n, g, ss, &onehot);
	if (!scale)
		return -1;
	return ad_give(a, n->in[0], ad_op2(a, "Mul", ad_op2(a, "Sub", ad_op1(a, "Exp", logp), onehot), scale));
}

/* NegativeLogLikelihoodLoss: d/dinput = -onehot * scale */
static int nll_loss_grad(struct ad *a, const struct node *n)
{
	struct value *onehot = NULL, *scale = nll_input_grad(a, n, ad_dy(a, n->out[0]), ad_shape(a, n->in[0]), &onehot);
	if (!scale)
		return -1;
	return ad_give(a, n->in[0], ad_op1(a, "Neg", ad_op2(a, "Mul", onehot, scale)));
}

static int reduce_prod_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return reduce(x, n, in, out, RK_PROD);
}

static int reduce_prod_grad(struct ad *a, const struct node *n)
{
	return reduce_grad(a, n, RK_PROD);
}

/* 1 operation per input element */
static void per_input_cost_1(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	*flops = 1 * (uint64_t)in[0]->numel;
}

/* NegativeLogLikelihoodLoss reads each label, its score (and its class weight) and writes the loss
 * or the losses: not the whole (N, C) score tensor. 2 FLOPs a label (the weighted term, the sum). */
static void nll_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		     uint64_t *bytes)
{
	const struct rtensor *t = in[1], *w = n->n_in > 2 ? in[2] : NULL;
	uint64_t labels = (uint64_t)t->numel;
	*flops = 2 * labels;
	*bytes = (uint64_t)t->nbytes + labels * dtype_size(in[0]->dtype) + (w ? labels * dtype_size(w->dtype) : 0) +
		 (uint64_t)out[0]->nbytes;
}

/* 4 operations per input element */
static void per_input_cost_4(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	*flops = 4 * (uint64_t)in[0]->numel;
}

const struct op_impl op_reduce_prod = {.run = reduce_prod_run, .cost = per_input_cost_1, .grad = reduce_prod_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_reduce_sum = {.run = reduce_sum_run, .cost = per_input_cost_1, .grad = reduce_sum_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_reduce_mean = {.run = reduce_mean_run, .cost = per_input_cost_1, .grad = reduce_mean_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_reduce_l2 = {.run = reduce_l2_run, .cost = per_input_cost_1, .grad = reduce_l2_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_reduce_min = {.run = reduce_min_run, .cost = per_input_cost_1, .grad = reduce_min_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1,
				      .kink = KINK_PICK_REDUCED};
const struct op_impl op_reduce_max = {.run = reduce_max_run, .cost = per_input_cost_1, .grad = reduce_max_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1,
				      .kink = KINK_PICK_REDUCED};
#define REDUCE_IMPL(name, cost_fn) \
	const struct op_impl op_##name = {.run = name##_run, .cost = cost_fn, .grad = name##_grad, .recompute = RC_CHEAP, \
					  .nodiff = 1u << 1}
const struct op_impl op_reduce_l1 = {.run = reduce_l1_run, .cost = per_input_cost_1, .grad = reduce_l1_grad, .recompute = RC_CHEAP,
				     .nodiff = 1u << 1, .kink = KINK_BREAKS, .breaks = op_breaks_at_zero};
REDUCE_IMPL(reduce_sum_square, per_input_cost_1);
REDUCE_IMPL(reduce_log_sum, per_input_cost_1);
REDUCE_IMPL(reduce_log_sum_exp, per_input_cost_4);
const struct op_impl op_size = {.run = size_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_softmax_ce_loss = {.run = softmax_ce_loss_run, .cost = per_input_cost_4, .grad = softmax_ce_loss_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1 | 1u << 2};
const struct op_impl op_nll_loss = {.run = nll_loss_run, .cost = nll_cost, .grad = nll_loss_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1 | 1u << 2};
