/* sequence.c - ops that are functions of element positions: Range (torch.arange), Trilu (the causal
 * masks of torch.triu/tril), CumSum, ReverseSequence.
 *
 * Range reads only scalars, so shape inference computes it whenever they are known (constants,
 * or shapes once dimensions are bound) and folding turns it into a constant. Trilu and CumSum
 * are linear, so their gradients are the same op on g: Trilu(g) with the same k and side, and
 * CumSum(g) in the other direction. ReverseSequence is a permutation that is its own inverse: its
 * gradient is the same ReverseSequence of g. */
#include "../autodiff/ad.h"
#include "kernel.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

__extension__ typedef __int128 wide;

/* Range's elements lo..hi of its output, typed: float ones st + (double)i d rounded to the dtype
 * (rt_set's rule), integer ones start + i delta in 64 bits modulo 2^64 (the 128-bit value lies
 * between start and limit, so it fits, and its low bits are the integer). */
struct range_job {
	struct rtensor *o;
	double st, d;
	uint64_t ist, idl;
};

#define RANGE_INT(T)                                                                                        \
	static inline __attribute__((always_inline)) void range_##T(T *restrict o, uint64_t st, uint64_t dl, \
								      int64_t lo, int64_t hi)                \
	{                                                                                                   \
		for (int64_t i = lo; i < hi; i++)                                                           \
			o[i] = (T)(st + (uint64_t)i * dl);                                                  \
	}
RANGE_INT(int64_t)
RANGE_INT(int32_t)
RANGE_INT(int16_t)
#undef RANGE_INT

static inline __attribute__((always_inline)) void range_float(float *restrict o, double st, double d, int64_t lo,
							      int64_t hi)
{
	for (int64_t i = lo; i < hi; i++)
		o[i] = (float)(st + (double)i * d);
}

static inline __attribute__((always_inline)) void range_double(double *restrict o, double st, double d, int64_t lo,
							       int64_t hi)
{
	for (int64_t i = lo; i < hi; i++)
		o[i] = st + (double)i * d;
}

VM_CLONES static void range_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct range_job *j = arg;
	switch (j->o->dtype) {
	case DT_FLOAT: range_float(j->o->data, j->st, j->d, lo, hi); break;
	case DT_DOUBLE: range_double(j->o->data, j->st, j->d, lo, hi); break;
	case DT_INT64: range_int64_t(j->o->data, j->ist, j->idl, lo, hi); break;
	case DT_INT32: range_int32_t(j->o->data, j->ist, j->idl, lo, hi); break;
	case DT_INT16: range_int16_t(j->o->data, j->ist, j->idl, lo, hi); break;
	default: /* other dtypes (int8, float16, bfloat16...) as rt_set_i and rt_set store them */
		for (int64_t i = lo; i < hi; i++) {
			if (dtype_is_float(j->o->dtype))
				rt_set(j->o, i, j->st + (double)i * j->d);
			else
				rt_set_i(j->o, i, (int64_t)(j->ist + (uint64_t)i * j->idl));
		}
		break;
	}
}

/* Range(start, limit, delta): max(ceil((limit - start) / delta), 0) elements start + i delta. */
static int range_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	for (int k = 0; k < 3; k++)
		if (in[k]->numel != 1)
			return exec_fail(x, "Range's inputs must be scalars");
	if (in[1]->dtype != in[0]->dtype || in[2]->dtype != in[0]->dtype)
		return exec_fail(x, "Range's start, limit and delta must have one dtype, not %s, %s and %s",
				 dtype_name(in[0]->dtype), dtype_name(in[1]->dtype), dtype_name(in[2]->dtype));
	if (in[0]->dtype == DT_UINT64 || in[0]->dtype == DT_UINT32 || in[0]->dtype == DT_UINT16 || in[0]->dtype == DT_UINT8)
		return exec_fail(x, "Range's inputs must be float, double, int16, int32 or int64, not %s",
				 dtype_name(in[0]->dtype)); /* ONNX's T; uint64 past 2^63 read as negative */
	if (!in[0]->data || !in[1]->data || !in[2]->data)
		return exec_fail(x, "Range needs known start, limit and delta (bind the symbolic dimensions with --dim)");
	double st = rt_get(in[0], 0), lim = rt_get(in[1], 0), d = rt_get(in[2], 0);
	if (d == 0 || !isfinite(st) || !isfinite(lim) || !isfinite(d))
		return exec_fail(x, "Range's delta must be nonzero and its inputs finite");
	/* integer ranges count and step exactly, in 128 bits (INT64_MIN to INT64_MAX spans 2^64, and
	 * start + i delta passes 2^63 on the way); float ones as start + i delta */
	int integral = !dtype_is_float(in[0]->dtype);
	wide ist = rt_get_i(in[0], 0), idl = rt_get_i(in[2], 0), span = (wide)rt_get_i(in[1], 0) - ist;
	wide len = integral ? span / idl + (span % idl != 0 && (span < 0) == (idl < 0)) : 0;
	double flen = ceil((lim - st) / d); /* +-inf past the doubles */
	if (integral ? len > INT32_MAX : flen > (double)INT32_MAX)
		return integral ? exec_fail(x, "Range of %llu elements is too long", (unsigned long long)len)
				: exec_fail(x, "Range of %.0f elements is too long", flen);
	int64_t dims[1] = {integral ? (len > 0 ? (int64_t)len : 0) : flen > 0 ? (int64_t)flen : 0};
	if (!exec_alloc(x, out[0], in[0]->dtype, 1, dims))
		return exec_status(x);
	struct range_job j = {.o = out[0], .st = st, .d = d, .ist = (uint64_t)(int64_t)ist, .idl = (uint64_t)(int64_t)idl};
	if (dims[0])
		kernel_for(dims[0], KERNEL_GRAIN, range_elems, &j);
	return 0;
}

/* Trilu's rows lo..hi (of all the matrices): row i keeps columns j with j - i >= k (upper) or
 * j - i <= k (lower), one contiguous run copied, the rest zeroed. */
struct trilu_job {
	const uint8_t *a;
	uint8_t *o;
	size_t es;
	int64_t rows, cols, k;
	int upper;
};

static void trilu_rows(void *arg, int64_t lo, int64_t hi)
{
	const struct trilu_job *j = arg;
	size_t row = (size_t)j->cols * j->es;
	for (int64_t r = lo; r < hi; r++) {
		int64_t i = r % j->rows, e = i + j->k; /* upper: columns e.., lower: ..e */
		int64_t b = j->upper ? e : 0, f = j->upper ? j->cols : e + 1;
		b = b < 0 ? 0 : b > j->cols ? j->cols : b;
		f = f < b ? b : f > j->cols ? j->cols : f;
		const uint8_t *src = j->a + (size_t)r * row;
		uint8_t *dst = j->o + (size_t)r * row;
		memset(dst, 0, (size_t)b * j->es);
		memcpy(dst + (size_t)b * j->es, src + (size_t)b * j->es, (size_t)(f - b) * j->es);
		memset(dst + (size_t)f * j->es, 0, (size_t)(j->cols - f) * j->es);
	}
}

/* Trilu(x, k): the upper (upper = 1: j - i >= k) or lower (j - i <= k) triangle of each matrix
 * over the last two dimensions; the rest zero. */
static int trilu_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	if (a->ndim < 2)
		return exec_fail(x, "Trilu needs at least 2 dimensions, not %d", a->ndim);
	if (n->n_in > 1 && in[1] && in[1]->numel != 1)
		return exec_fail(x, "Trilu's k must be a scalar");
	uint8_t *o = exec_alloc(x, out[0], a->dtype, a->ndim, a->dims);
	if (!o)
		return exec_status(x);
	int64_t k = n->n_in > 1 && in[1] ? rt_get_i(in[1], 0) : 0, upper = attr_int(n, "upper", 1);
	int64_t rows = a->dims[a->ndim - 2], cols = a->dims[a->ndim - 1], mats = rows > 0 && cols > 0 ? a->numel / (rows * cols) : 0;
	/* |k| past rows + cols keeps all or nothing, as it would unclamped (and i + k cannot overflow) */
	int64_t far = rows + cols;
	struct trilu_job j = {.a = a->data, .o = o, .es = dtype_size(a->dtype), .rows = rows, .cols = cols,
			      .k = k > far ? far : k < -far ? -far : k, .upper = upper != 0};
	if (mats)
		kernel_for(mats * rows, KERNEL_GRAIN / cols > 1 ? KERNEL_GRAIN / cols : 1, trilu_rows, &j);
	return 0;
}

static int trilu_grad(struct ad *a, const struct node *n)
{
	struct value *ins[2] = {ad_dy(a, n->out[0]), n->n_in > 1 ? n->in[1] : NULL};
	struct value *t = ad_op(a, "Trilu", ins, ins[1] ? 2 : 1);
	return !t || ad_set_int(a, ad_producer(t), "upper", attr_int(n, "upper", 1)) ? -1 : ad_give(a, n->in[0], t);
}

/* CumSum of float32 or float64 as typed loops: the running sums of up to CUMSUM_COLS neighbouring
 * columns (elements one step apart along the dimensions after the axis) side by side, each in
 * double and in index order as the rt_get walk adds them, stored rounded to the dtype; a unit of
 * work is one block of columns of one outer index. */
#define CUMSUM_COLS 512
struct cumsum_job {
	const struct rtensor *a;
	struct rtensor *o;
	int64_t d, inner, blocks;
	int rev, excl;
};

#define CUMSUM_STEP(T)                                                                                        \
	static inline __attribute__((always_inline)) void cumsum_step_##T(const T *restrict x, T *restrict y,  \
									    double *restrict s, int64_t w, int excl) \
	{                                                                                                     \
		if (excl)                                                                                     \
			for (int64_t c = 0; c < w; c++) {                                                     \
				y[c] = (T)s[c];                                                               \
				s[c] += x[c];                                                                 \
			}                                                                                     \
		else                                                                                          \
			for (int64_t c = 0; c < w; c++) {                                                     \
				s[c] += x[c];                                                                 \
				y[c] = (T)s[c];                                                               \
			}                                                                                     \
	}
CUMSUM_STEP(float)
CUMSUM_STEP(double)
#undef CUMSUM_STEP

/* along the last axis (one column): g <= CUMSUM_ROWS rows' sums side by side (independent chains
 * of additions, not one chain's latency per element), step -1 when reversed */
#define CUMSUM_ROWS 8
#define CUMSUM_ROW(T)                                                                                         \
	static void cumsum_rows_##T(const T *restrict x, T *restrict y, int64_t d, int64_t g, int64_t step,    \
				    int excl)                                                                 \
	{                                                                                                     \
		double s[CUMSUM_ROWS] = {0};                                                                  \
		for (int64_t t = 0; t < d; t++, x += step, y += step)                                         \
			for (int64_t r = 0; r < g; r++) {                                                     \
				double v = x[r * d];                                                          \
				if (!excl)                                                                    \
					s[r] += v;                                                            \
				y[r * d] = (T)s[r];                                                           \
				if (excl)                                                                     \
					s[r] += v;                                                            \
			}                                                                                     \
	}
CUMSUM_ROW(float)
CUMSUM_ROW(double)

VM_CLONES static void cumsum_units(void *arg, int64_t lo, int64_t hi)
{
	const struct cumsum_job *j = arg;
	double s[CUMSUM_COLS];
	if (j->inner == 1) { /* units are rows */
		for (int64_t u = lo, g; u < hi; u += g) {
			g = hi - u < CUMSUM_ROWS ? hi - u : CUMSUM_ROWS;
			int64_t at = u * j->d + (j->rev ? j->d - 1 : 0), step = j->rev ? -1 : 1;
			if (j->a->dtype == DT_FLOAT)
				cumsum_rows_float((const float *)j->a->data + at, (float *)j->o->data + at, j->d, g, step,
						  j->excl);
			else
				cumsum_rows_double((const double *)j->a->data + at, (double *)j->o->data + at, j->d, g,
						   step, j->excl);
		}
		return;
	}
	for (int64_t u = lo; u < hi; u++) {
		int64_t o = u / j->blocks, c0 = u % j->blocks * CUMSUM_COLS;
		int64_t w = j->inner - c0 < CUMSUM_COLS ? j->inner - c0 : CUMSUM_COLS;
		memset(s, 0, sizeof *s * (size_t)w);
		for (int64_t t = 0; t < j->d; t++) {
			int64_t at = (o * j->d + (j->rev ? j->d - 1 - t : t)) * j->inner + c0;
			if (j->a->dtype == DT_FLOAT)
				cumsum_step_float((const float *)j->a->data + at, (float *)j->o->data + at, s, w, j->excl);
			else
				cumsum_step_double((const double *)j->a->data + at, (double *)j->o->data + at, s, w,
						   j->excl);
		}
	}
}
#undef CUMSUM_ROW

/* CumSum(x, axis): running sums along the axis, forward or (reverse = 1) backward, inclusive or
 * (exclusive = 1) not. Sums run in double, in index order. */
static int cumsum_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	if (in[1]->numel != 1)
		return exec_fail(x, "CumSum's axis must be a scalar");
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	int ax;
	if (norm_axis(x, rt_get_i(in[1], 0), a->ndim, &ax))
		return exec_status(x);
	int rev = (int)attr_int(n, "reverse", 0), excl = (int)attr_int(n, "exclusive", 0);
	int64_t outer = 1, inner = 1, d = a->dims[ax];
	for (int i = 0; i < ax; i++)
		outer *= a->dims[i];
	for (int i = ax + 1; i < a->ndim; i++)
		inner *= a->dims[i];
	if (a->dtype == DT_FLOAT || a->dtype == DT_DOUBLE) {
		struct cumsum_job j = {.a = a, .o = out[0], .d = d, .inner = inner, .rev = rev, .excl = excl,
				       .blocks = (inner + CUMSUM_COLS - 1) / CUMSUM_COLS};
		int64_t units = outer * j.blocks, cost = d * (inner < CUMSUM_COLS ? inner : CUMSUM_COLS);
		if (units && d)
			kernel_for(units, cost && KERNEL_GRAIN / cost > 1 ? KERNEL_GRAIN / cost : 1, cumsum_units, &j);
		return 0;
	}
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			double s = 0;
			for (int64_t t = 0; t < d; t++) {
				int64_t at = (o * d + (rev ? d - 1 - t : t)) * inner + i;
				double v = rt_get(a, at);
				if (!excl)
					s += v;
				rt_set(out[0], at, s);
				if (excl)
					s += v;
			}
		}
	return 0;
}

/* the adjoint of a running sum is the running sum the other way */
static int cumsum_grad(struct ad *a, const struct node *n)
{
	struct value *ins[2] = {ad_dy(a, n->out[0]), n->in[1]};
	struct value *c = ad_op(a, "CumSum", ins, 2);
	struct node *p = ad_producer(c);
	if (!p || ad_set_int(a, p, "reverse", !attr_int(n, "reverse", 0)) ||
	    (attr_int(n, "exclusive", 0) && ad_set_int(a, p, "exclusive", 1)))
		return -1;
	return ad_give(a, n->in[0], c);
}

/* ReverseSequence(input, sequence_lens, batch_axis, time_axis): batch b's first sequence_lens[b]
 * steps along the time axis reversed, the rest copied */
static int reverse_sequence_run(struct exec *x, const struct node *n, struct rtensor *const *in,
				struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *sl = in[1];
	int64_t ba = attr_int(n, "batch_axis", 1), ta = attr_int(n, "time_axis", 0);
	if (a->ndim < 2 || (ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
		return exec_fail(x, "batch_axis and time_axis must be 0 and 1 (in either order) of an input of rank 2 or more");
	if (sl->ndim != 1 || sl->dims[0] != a->dims[ba])
		return exec_fail(x, "sequence_lens must hold one length per batch entry (%lld)", (long long)a->dims[ba]);
	uint8_t *o = exec_alloc(x, out[0], a->dtype, a->ndim, a->dims);
	if (!o)
		return exec_status(x);
	int64_t head = a->dims[0] * a->dims[1], inner = a->numel / (head != 0 ? head : 1), T = a->dims[ta];
	size_t row = (size_t)inner * dtype_size(a->dtype);
	for (int64_t b = 0; b < a->dims[ba]; b++) {
		int64_t len = rt_get_i(sl, b);
		if (len < 0 || len > T)
			return exec_fail(x, "sequence length %lld is not in [0, %lld]", (long long)len, (long long)T);
		for (int64_t t = 0; t < T; t++) {
			int64_t s = t < len ? len - 1 - t : t;
			int64_t to = ba == 0 ? b * T + t : t * a->dims[1] + b, from = ba == 0 ? b * T + s : s * a->dims[1] + b;
			memcpy(o + (size_t)to * row, (const uint8_t *)a->data + (size_t)from * row, row);
		}
	}
	return 0;
}

static int reverse_sequence_grad(struct ad *a, const struct node *n)
{
	struct value *ins[2] = {ad_dy(a, n->out[0]), n->in[1]};
	struct value *r = ad_op(a, "ReverseSequence", ins, 2);
	struct node *p = ad_producer(r);
	if (!p || ad_set_int(a, p, "batch_axis", attr_int(n, "batch_axis", 1)) ||
	    ad_set_int(a, p, "time_axis", attr_int(n, "time_axis", 0)))
		return -1;
	return ad_give(a, n->in[0], r);
}

const struct op_impl op_reverse_sequence = {.run = reverse_sequence_run, .grad = reverse_sequence_grad,
					    .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_range = {.run = range_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_trilu = {.run = trilu_run, .grad = trilu_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
const struct op_impl op_cumsum = {.run = cumsum_run, .grad = cumsum_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1};
