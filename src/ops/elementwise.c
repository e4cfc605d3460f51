/* elementwise.c - elementwise ops with NumPy broadcasting: Add Sub Mul Div Pow, Equal Greater Less,
 * Where, and the unary ops (Neg Sqrt Exp Log Erf Relu Tanh Sigmoid Not Identity Cast).
 *
 * Broadcast operands are walked row by row: the output's last dimension is the inner loop, with
 * each operand's stride there 0 when it is broadcast. float32 rows have their own loops (the hot
 * case in training); other dtypes go through double (exact for the basic operations, since
 * double rounding of a float32 +-x/ in double is innocuous) or int64 (integer Div truncates, as
 * in C). Gradient rules sit next to each op. */
#include "../autodiff/ad.h"
#include "kernel.h"
#include "halfconv.h"
#include "vmath.h"
#include "../util/xalloc.h"

#include <math.h>
#include <string.h>

/* B_SQUARE, B_FIRST: Pow(x, 2), Pow(x, 1). B_MOD is Mod's fmod 0 (the divisor's sign, as Python's
 * %), B_FMOD its fmod 1 (the dividend's, as C's). From B_EQ on, the output is bool. */
enum bin {
	B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_SQUARE, B_FIRST, B_MOD, B_FMOD, B_SHL, B_SHR,
	B_EQ, B_GT, B_LT, B_GE, B_LE, B_AND, B_OR, B_XOR
};

/* a mod b with the divisor's sign (fmod 0): the C remainder moved by b when their signs differ */
static double mod_floor(double a, double b)
{
	double r = fmod(a, b);
	return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

static double bin_d(enum bin op, double a, double b)
{
	switch (op) {
	case B_ADD: return a + b;
	case B_SUB: return a - b;
	case B_SQUARE: return a * a;
	case B_FIRST: return a;
	case B_MUL: return a * b;
	case B_DIV: return a / b;
	case B_POW: return pow(a, b);
	case B_MOD: return mod_floor(a, b);
	case B_FMOD: return fmod(a, b);
	case B_EQ: return a == b;
	case B_GT: return a > b;
	case B_GE: return a >= b;
	case B_LE: return a <= b;
	default: return a < b;
	}
}

/* An integer op on int64 operands, or (uns) on the bits of uint64 ones. */
static int bin_i(struct exec *x, enum bin op, int64_t a, int64_t b, int64_t *r, int uns)
{
	const uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
	if (uns) {
		switch (op) {
		case B_DIV: case B_MOD: case B_FMOD:
			if (!ub)
				return exec_fail(x, "integer division by zero");
			*r = (int64_t)(op == B_DIV ? ua / ub : ua % ub);
			return 0;
		case B_GT: *r = ua > ub; return 0;
		case B_LT: *r = ua < ub; return 0;
		case B_GE: *r = ua >= ub; return 0;
		case B_LE: *r = ua <= ub; return 0;
		default: break;
		}
	}
	switch (op) {
	case B_ADD: *r = (int64_t)((uint64_t)a + (uint64_t)b); return 0;
	case B_SUB: *r = (int64_t)((uint64_t)a - (uint64_t)b); return 0;
	case B_MUL: *r = (int64_t)((uint64_t)a * (uint64_t)b); return 0;
	case B_DIV: /* INT64_MIN / -1 wraps to INT64_MIN, as NumPy's and as int32's INT_MIN / -1 here */
		if (b == 0)
			return exec_fail(x, "integer division by zero");
		*r = b == -1 ? (int64_t)(0 - ua) : a / b;
		return 0;
	case B_POW: { /* by squaring, wrapping */
		uint64_t p = 1, s = ua;
		for (uint64_t e = ub; e && b > 0; e >>= 1, s *= s)
			if (e & 1)
				p *= s;
		*r = b < 0 ? 0 : (int64_t)p;
		return 0;
	}
	case B_MOD: case B_FMOD:
		if (b == 0)
			return exec_fail(x, "integer division by zero");
		*r = b == -1 ? 0 : a % b; /* INT64_MIN % -1 overflows in C */
		if (op == B_MOD && *r != 0 && (*r < 0) != (b < 0))
			*r += b;
		return 0;
	case B_SHL: *r = ub >= 64 ? 0 : (int64_t)(ua << ub); return 0;
	case B_SHR: *r = ub >= 64 ? 0 : (int64_t)(ua >> ub); return 0;
	case B_EQ: *r = a == b; return 0;
	case B_GT: *r = a > b; return 0;
	case B_GE: *r = a >= b; return 0;
	case B_LE: *r = a <= b; return 0;
	case B_AND: *r = a && b; return 0;
	case B_OR: *r = a || b; return 0;
	case B_XOR: *r = !a != !b; return 0;
	default: *r = a < b; return 0;
	}
}

static int is_unsigned(int dt)
{
	return dt == DT_UINT8 || dt == DT_UINT16 || dt == DT_UINT32 || dt == DT_UINT64;
}

/* Visits the output row by row: offsets of each operand at the row's start. Adjacent dimensions
 * that every operand walks as one (contiguous, or both broadcast) are merged first, so rows are as
 * long as they can be: (N, C, H, W) against a per-channel (1, C, 1, 1) walks rows of H x W. */
struct walk {
	int nd;
	int64_t dims[RT_MAX_DIMS], st[3][RT_MAX_DIMS], idx[RT_MAX_DIMS], off[3];
	int n;
};

static void walk_init(struct walk *w, int nd, const int64_t *dims, struct rtensor *const *ts, int n)
{
	memset(w, 0, sizeof *w);
	w->nd = nd;
	w->n = n;
	memcpy(w->dims, dims, (size_t)nd * sizeof *dims);
	for (int k = 0; k < n; k++)
		bcast_strides(ts[k], nd, dims, w->st[k]);
	for (int i = w->nd - 1; i > 0; i--) { /* dimension i into i - 1 */
		int merge = 1;
		for (int k = 0; k < n && merge; k++)
			merge = w->st[k][i - 1] == w->st[k][i] * w->dims[i];
		if (!merge)
			continue;
		w->dims[i - 1] *= w->dims[i];
		for (int k = 0; k < n; k++)
			w->st[k][i - 1] = w->st[k][i];
		for (int j = i; j + 1 < w->nd; j++) {
			w->dims[j] = w->dims[j + 1];
			for (int k = 0; k < n; k++)
				w->st[k][j] = w->st[k][j + 1];
		}
		w->nd--;
	}
}

/* Advances to the next row; returns 0 when done. */
static int walk_next(struct walk *w)
{
	for (int i = w->nd - 2; i >= 0; i--) {
		for (int k = 0; k < w->n; k++)
			w->off[k] += w->st[k][i];
		if (++w->idx[i] < w->dims[i])
			return 1;
		for (int k = 0; k < w->n; k++)
			w->off[k] -= w->st[k][i] * w->dims[i];
		w->idx[i] = 0;
	}
	return 0;
}

/* Moves w to the start of row r (rows are the merged last dimension). */
static void walk_seek(struct walk *w, int64_t r)
{
	memset(w->off, 0, sizeof w->off);
	for (int i = w->nd - 2; i >= 0; i--) {
		w->idx[i] = r % w->dims[i];
		r /= w->dims[i];
		for (int k = 0; k < w->n; k++)
			w->off[k] += w->idx[i] * w->st[k][i];
	}
}

/* One row of a binary op, len elements at pa, pb (strides sa, sb) into po: contiguous operands, or
 * one of them a broadcast scalar, are loops the compiler vectorises. */
#define ROWP(T, OT, EXPR)                                                                                      \
	do {                                                                                                   \
		if (sa == 1 && sb == 1) {                                                                      \
			for (int64_t j = 0; j < len; j++) {                                                    \
				T u = pa[j], v = pb[j];                                                        \
				po[j] = (OT)(EXPR);                                                            \
			}                                                                                      \
		} else if (sa == 1 && sb == 0) {                                                               \
			T v = pb[0];                                                                           \
			for (int64_t j = 0; j < len; j++) {                                                    \
				T u = pa[j];                                                                   \
				po[j] = (OT)(EXPR);                                                            \
			}                                                                                      \
		} else if (sa == 0 && sb == 1) {                                                               \
			T u = pa[0];                                                                           \
			for (int64_t j = 0; j < len; j++) {                                                    \
				T v = pb[j];                                                                   \
				po[j] = (OT)(EXPR);                                                            \
			}                                                                                      \
		} else {                                                                                       \
			for (int64_t j = 0; j < len; j++) {                                                    \
				T u = pa[j * sa], v = pb[j * sb];                                              \
				po[j] = (OT)(EXPR);                                                            \
			}                                                                                      \
		}                                                                                              \
	} while (0)

/* #52 pow: float32 Pow (and Mod's fmod, fmod_lanes) in blocks of POW_BLOCK: vmath.h's
 * vm_powf_settled for every lane into r, vectorised (the strides 1 and 0 constants in each loop),
 * then the block written out, the lanes it did not settle by libm's pow in double:
 * (float)pow((double)x, (double)y), the rule's bits, for every lane. The inputs are read again only
 * for those lanes, before their output is written (the output may be an input's buffer: OPF_REUSES). */
#define POW_BLOCK 256

static inline __attribute__((always_inline)) int64_t pow_lanes(float *restrict r, uint8_t *restrict ok,
							       const float *restrict pa, int64_t sa,
							       const float *restrict pb, int64_t sb, int64_t len,
							       float dn)
{
	int64_t bad = 0;
	for (int64_t j = 0; j < len; j++) {
		float v;
		int k = vm_powf_settled(pa[j * sa], pb[j * sb], dn, &v);
		r[j] = v;
		ok[j] = (uint8_t)k;
		bad += !k;
	}
	return bad;
}

/* float32 fmod's lanes the same way: vmath.h's vm_fmodf where vm_fmodf_fast says it is exact */
static inline __attribute__((always_inline)) int64_t fmod_lanes(float *restrict r, uint8_t *restrict ok,
								const float *restrict pa, int64_t sa,
								const float *restrict pb, int64_t sb, int64_t len)
{
	int64_t bad = 0;
	for (int64_t j = 0; j < len; j++) {
		float u = pa[j * sa], v = pb[j * sb];
		int k = vm_fmodf_fast(u, v);
		r[j] = vm_fmodf(u, v);
		ok[j] = (uint8_t)k;
		bad += !k;
	}
	return bad;
}

#define SETTLED_LANES(LANES, ...)                                                                              \
	(sa == 1 && sb == 1   ? LANES(r, ok, a, 1, b, 1, n, ##__VA_ARGS__)                                    \
	 : sa == 1 && sb == 0 ? LANES(r, ok, a, 1, b, 0, n, ##__VA_ARGS__)                                    \
	 : sa == 0 && sb == 1 ? LANES(r, ok, a, 0, b, 1, n, ##__VA_ARGS__)                                    \
			      : LANES(r, ok, a, sa, b, sb, n, ##__VA_ARGS__))

/* float32 Pow (fmod 0) or fmod (1) on a row, in blocks: the fast lanes, then libm for the others */
static inline __attribute__((always_inline)) void settled_f32(int fmod_op, const float *pa, int64_t sa, const float *pb,
							      int64_t sb, float *po, int64_t len)
{
	_Alignas(64) float r[POW_BLOCK];
	uint8_t ok[POW_BLOCK];
	volatile float zero = 0.0f;
	const float dn = zero / zero; /* the default NaN (vm_powf_settled) */
	for (int64_t s0 = 0; s0 < len; s0 += POW_BLOCK) {
		const int64_t n = len - s0 < POW_BLOCK ? len - s0 : POW_BLOCK;
		const float *a = pa + s0 * sa, *b = pb + s0 * sb;
		float *o = po + s0;
		int64_t bad = fmod_op ? SETTLED_LANES(fmod_lanes) : SETTLED_LANES(pow_lanes, dn);
		if (!bad) {
			memcpy(o, r, (size_t)n * sizeof *o);
			continue;
		}
		for (int64_t j = 0; j < n; j++) {
			double u = a[j * sa], v = b[j * sb];
			o[j] = ok[j] ? r[j] : (float)(fmod_op ? fmod(u, v) : pow(u, v));
		}
	}
}
#undef SETTLED_LANES

/* A float32 arithmetic op (Add Sub Mul Div, Pow and its two exact cases) on one row: what
 * bin_elems does for float32, and each step of a fused chain (chain_run). */
static inline __attribute__((always_inline)) void bin_f32(enum bin op, const float *pa, int64_t sa, const float *pb,
							 int64_t sb, float *po, int64_t len)
{
	switch (op) {
	case B_ADD: ROWP(float, float, u + v); break;
	case B_SUB: ROWP(float, float, u - v); break;
	case B_MUL: ROWP(float, float, u * v); break;
	case B_DIV: ROWP(float, float, u / v); break;
	case B_POW: settled_f32(0, pa, sa, pb, sb, po, len); break;
	case B_SQUARE: ROWP(float, float, ((void)v, u * u)); break;
	default: ROWP(float, float, ((void)v, u)); break;
	}
}

/* A binary op on float32, float64, int64 (not Div or Pow), bool (And Or Xor) or unsigned integer
 * (BitShift) operands, which cannot fail: its output elements [e0, e1) are a piece of kernel_for. */
struct bin_job {
	struct walk w;
	enum bin op;
	const struct rtensor *a, *b;
	struct rtensor *o;
	int64_t row, sa, sb;
};

VM_CLONES static void bin_elems(void *arg, int64_t e0, int64_t e1)
{
	const struct bin_job *jb = arg;
	const struct rtensor *a = jb->a, *b = jb->b;
	struct rtensor *o = jb->o;
	const int64_t sa = jb->sa, sb = jb->sb;
	const enum bin op = jb->op;
	struct walk w = jb->w;
	walk_seek(&w, e0 / jb->row);
	for (int64_t i = e0, c = e0 % jb->row; i < e1; c = 0, walk_next(&w)) {
		/* columns c .. c + len of the row */
		const int64_t len = jb->row - c < e1 - i ? jb->row - c : e1 - i, oa = w.off[0] + c * sa, ob = w.off[1] + c * sb;
#define ROW(T, OT, EXPR)                                                                                       \
	do {                                                                                                   \
		const T *pa = (const T *)a->data + oa, *pb = (const T *)b->data + ob;                          \
		OT *po = (OT *)o->data + i;                                                                    \
		ROWP(T, OT, EXPR);                                                                             \
	} while (0)
#define ROWS(T)                                                                                                \
	switch (op) {                                                                                          \
	case B_ADD: ROW(T, T, u + v); break;                                                                   \
	case B_SUB: ROW(T, T, u - v); break;                                                                   \
	case B_MUL: ROW(T, T, u * v); break;                                                                   \
	case B_DIV: ROW(T, T, u / v); break;                                                                   \
	case B_POW: ROW(T, T, pow((double)u, (double)v)); break;                                               \
	case B_SQUARE: ROW(T, T, ((void)v, u * u)); break;                                                     \
	case B_FIRST: ROW(T, T, ((void)v, u)); break;                                                          \
	case B_FMOD: ROW(T, T, fmod((double)u, (double)v)); break;                                             \
	case B_EQ: ROW(T, uint8_t, u == v); break;                                                             \
	case B_GT: ROW(T, uint8_t, u > v); break;                                                              \
	case B_GE: ROW(T, uint8_t, u >= v); break;                                                             \
	case B_LE: ROW(T, uint8_t, u <= v); break;                                                             \
	default: ROW(T, uint8_t, u < v); break;                                                                \
	}
#define SHIFTS(T, W)                                                                                           \
	do {                                                                                                   \
		if (op == B_SHL)                                                                               \
			ROW(T, T, v >= W ? 0 : u << v);                                                        \
		else                                                                                           \
			ROW(T, T, v >= W ? 0 : u >> v);                                                        \
	} while (0)
		/* one switch per row; the loops are typed (the compiler vectorises them) */
		if (a->dtype == DT_FLOAT && op <= B_FIRST) {
			bin_f32(op, (const float *)a->data + oa, sa, (const float *)b->data + ob, sb, (float *)o->data + i, len);
		} else if (a->dtype == DT_FLOAT && op == B_FMOD) { /* fmod's bits; its slow cases by libm */
			settled_f32(1, (const float *)a->data + oa, sa, (const float *)b->data + ob, sb,
				    (float *)o->data + i, len);
		} else if (a->dtype == DT_FLOAT) {
			ROWS(float)
		} else if (a->dtype == DT_DOUBLE) {
			ROWS(double)
		} else if (op == B_SHL || op == B_SHR) { /* a shift by the width or more gives 0 */
			switch (a->dtype) {
			case DT_UINT8: SHIFTS(uint8_t, 8); break;
			case DT_UINT16: SHIFTS(uint16_t, 16); break;
			case DT_UINT32: SHIFTS(uint32_t, 32); break;
			default: SHIFTS(uint64_t, 64); break;
			}
		} else if (a->dtype == DT_BOOL) { /* And, Or, Xor: any nonzero byte is true */
			switch (op) {
			case B_AND: ROW(uint8_t, uint8_t, (u != 0) & (v != 0)); break;
			case B_OR: ROW(uint8_t, uint8_t, (u != 0) | (v != 0)); break;
			default: ROW(uint8_t, uint8_t, (u != 0) ^ (v != 0)); break;
			}
		} else {
			switch (op) { /* wrapping arithmetic, as two's complement int64 does */
			case B_ADD: ROW(int64_t, int64_t, (int64_t)((uint64_t)u + (uint64_t)v)); break;
			case B_SUB: ROW(int64_t, int64_t, (int64_t)((uint64_t)u - (uint64_t)v)); break;
			case B_MUL: ROW(int64_t, int64_t, (int64_t)((uint64_t)u * (uint64_t)v)); break;
			case B_EQ: ROW(int64_t, uint8_t, u == v); break; /* a loss's one-hot targets */
			case B_GT: ROW(int64_t, uint8_t, u > v); break;
			case B_GE: ROW(int64_t, uint8_t, u >= v); break;
			case B_LE: ROW(int64_t, uint8_t, u <= v); break;
			default: ROW(int64_t, uint8_t, u < v); break;
			}
		}
#undef SHIFTS
#undef ROWS
#undef ROW
		i += len;
	}
}

static int binary(struct exec *x, struct rtensor *const *in, struct rtensor *const *out, enum bin op)
{
	struct rtensor *a = in[0], *b = in[1];
	if (a->dtype != b->dtype && op != B_POW) /* Pow's exponent may be of any numeric type */
		return exec_fail(x, "operands are %s and %s; they must have the same dtype", dtype_name(a->dtype),
				 dtype_name(b->dtype));
	if ((op == B_AND || op == B_OR || op == B_XOR) && a->dtype != DT_BOOL)
		return exec_fail(x, "operands must be bool, not %s", dtype_name(a->dtype));
	if ((op == B_SHL || op == B_SHR) && !is_unsigned(a->dtype))
		return exec_fail(x, "operands must be unsigned integers, not %s", dtype_name(a->dtype));
	if (op == B_FMOD && !is_float(a) && a->dtype != DT_INT64 && a->dtype != DT_INT32 && a->dtype != DT_INT16 &&
	    a->dtype != DT_INT8 && !is_unsigned(a->dtype))
		return exec_fail(x, "operands must be numbers, not %s", dtype_name(a->dtype));
	int nd;
	int64_t dims[RT_MAX_DIMS];
	if (bcast_shape(x, in, 2, &nd, dims))
		return exec_status(x);
	int cmp = op >= B_EQ;
	if (!exec_alloc(x, out[0], cmp ? DT_BOOL : a->dtype, nd, dims))
		return exec_status(x);
	struct rtensor *o = out[0];
	if (o->numel == 0)
		return 0;
	struct bin_job j = {.op = op, .a = a, .b = b, .o = o};
	struct walk *w = &j.w;
	walk_init(w, nd, dims, in, 2);
	j.row = w->nd ? w->dims[w->nd - 1] : 1;
	j.sa = w->nd ? w->st[0][w->nd - 1] : 0;
	j.sb = w->nd ? w->st[1][w->nd - 1] : 0;
	int f32 = a->dtype == DT_FLOAT && b->dtype == DT_FLOAT, f64 = a->dtype == DT_DOUBLE && b->dtype == DT_DOUBLE;
	/* x^2 and x^1 (an MSE loss and its gradient's Pow): x x is the exact square rounded once, as
	 * pow's is, and pow(x, 1) is x */
	if (op == B_POW && (f32 || f64) && b->numel == 1 && (rt_get(b, 0) == 2.0 || rt_get(b, 0) == 1.0))
		j.op = rt_get(b, 0) == 2.0 ? B_SQUARE : B_FIRST;
	/* the typed loops: float arithmetic, fmod and comparisons, int64 Add Sub Mul and comparisons,
	 * unsigned BitShift */
	int typed = op <= B_FIRST || op == B_FMOD || (op >= B_EQ && op <= B_LE);
	if ((op == B_SHL || op == B_SHR) && a->dtype == b->dtype) {
		kernel_for(o->numel, KERNEL_GRAIN, bin_elems, &j);
		return 0;
	}
	if ((f32 || f64) && typed) {
		kernel_for(o->numel, KERNEL_GRAIN, bin_elems, &j);
		return 0;
	}
	if (a->dtype == DT_INT64 && b->dtype == DT_INT64 && (op == B_ADD || op == B_SUB || op == B_MUL || op >= B_EQ) &&
	    typed) {
		kernel_for(o->numel, KERNEL_GRAIN, bin_elems, &j);
		return 0;
	}
	if (a->dtype == DT_BOOL && op >= B_AND) {
		kernel_for(o->numel, KERNEL_GRAIN, bin_elems, &j);
		return 0;
	}
	int64_t i = 0, row = j.row, sa = j.sa, sb = j.sb;
	const int uns = is_unsigned(a->dtype);
	do {
		const int64_t oa = w->off[0], ob = w->off[1];
		if (!is_float(a) && op == B_POW && is_float(b)) { /* an integer to a float power: truncated */
			for (int64_t k = 0; k < row; k++) {
				double p = pow(rt_get(a, oa + k * sa), rt_get(b, ob + k * sb));
				rt_set_i(o, i + k, isfinite(p) && fabs(p) < 9.2e18 ? (int64_t)p : INT64_MIN);
			}
		} else if (!is_float(a)) {
			for (int64_t k = 0; k < row; k++) {
				int64_t r = 0;
				if (bin_i(x, op, rt_get_i(a, oa + k * sa), rt_get_i(b, ob + k * sb), &r, uns))
					return exec_status(x);
				rt_set_i(o, i + k, r);
			}
		} else {
			for (int64_t k = 0; k < row; k++)
				rt_set(o, i + k, bin_d(j.op, rt_get(a, oa + k * sa), rt_get(b, ob + k * sb)));
		}
		i += row;
	} while (walk_next(w));
	return 0;
}

#define BINARY(name, op)                                                                                      \
	static int name##_run(struct exec *x, const struct node *n, struct rtensor *const *in,                 \
			      struct rtensor *const *out)                                                      \
	{                                                                                                      \
		(void)n;                                                                                       \
		return binary(x, in, out, op);                                                                 \
	}
BINARY(add, B_ADD)
BINARY(sub, B_SUB)
BINARY(mul, B_MUL)
BINARY(div, B_DIV)
BINARY(pow, B_POW)
BINARY(equal, B_EQ)
BINARY(greater_or_equal, B_GE)
BINARY(less_or_equal, B_LE)
BINARY(and, B_AND)
BINARY(or, B_OR)
BINARY(xor, B_XOR)

/* Mod: fmod 0 takes the divisor's sign (Python's %), fmod 1 the dividend's (C's fmod and %).
 * Floats need fmod 1, as the spec says and onnxruntime enforces. */
static int mod_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int64_t fm = attr_int(n, "fmod", 0);
	if (fm != 0 && fm != 1)
		return exec_fail(x, "fmod must be 0 or 1, not %lld", (long long)fm);
	if (!fm && (is_float(in[0]) || is_float(in[1])))
		return exec_fail(x, "fmod must be 1 for %s operands", dtype_name(is_float(in[0]) ? in[0]->dtype : in[1]->dtype));
	return binary(x, in, out, fm ? B_FMOD : B_MOD);
}

static int bit_shift_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int left = attr_str_is(n, "direction", "LEFT", -1), right = attr_str_is(n, "direction", "RIGHT", -1);
	if (left != 1 && right != 1)
		return exec_fail(x, "direction must be \"LEFT\" or \"RIGHT\"");
	return binary(x, in, out, left == 1 ? B_SHL : B_SHR);
}

int op_self_compare(const struct node *n)
{
	return (n->op == OP_GREATER || n->op == OP_LESS) && n->n_in == 2 && n->in[0] && n->in[0] == n->in[1];
}

#define COMPARE(name, op)                                                                                     \
	static int name##_run(struct exec *x, const struct node *n, struct rtensor *const *in,                 \
			      struct rtensor *const *out)                                                      \
	{                                                                                                      \
		if (!op_self_compare(n) || in[0]->data)                                                        \
			return binary(x, in, out, op);                                                         \
		/* shape inference: false everywhere, whatever the data */                                     \
		exec_alloc_zero(x, out[0], DT_BOOL, in[0]->ndim, in[0]->dims);                                 \
		return exec_status(x);                                                                         \
	}
COMPARE(greater, B_GT)
COMPARE(less, B_LT)

/* ---- unary ---- */

enum un {
	U_NEG, U_ABS, U_SQRT, U_EXP, U_LOG, U_ERF, U_RELU, U_TANH, U_SIGMOID, U_NOT, U_ISNAN, U_IDENTITY, U_ROUND,
	U_RECIP, U_CEIL, U_FLOOR, U_SIGN
};

static double un_d(enum un op, double v)
{
	switch (op) {
	case U_NEG: return -v;
	case U_ABS: return fabs(v);
	case U_SQRT: return sqrt(v);
	case U_EXP: return exp(v);
	case U_LOG: return log(v);
	case U_ERF: return erf(v);
	case U_RELU: return v > 0 || isnan(v) ? v : 0; /* NaN stays NaN, as in PyTorch */
	case U_TANH: return tanh(v);
	case U_SIGMOID: return v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
	case U_NOT: return !v;
	case U_ROUND: return nearbyint(v); /* to nearest, ties to even (the default rounding mode) */
	case U_RECIP: return 1 / v;
	case U_CEIL: return ceil(v);
	case U_FLOOR: return floor(v);
	case U_SIGN: return v > 0 ? 1 : v < 0 ? -1 : v; /* 0 stays 0 (its sign too), NaN stays NaN */
	default: return v;
	}
}

/* A unary op on float32 elements [lo, hi): a piece of kernel_for. */
struct un_job {
	enum un op;
	const float *p;
	float *o;
};

/* A unary op on float32 elements [lo, hi) of p into o: what un_floats does, and a step of a fused
 * chain (chain_run). */
static inline __attribute__((always_inline)) void un_f32(enum un op, const float *p, float *o, int64_t lo, int64_t hi)
{
	switch (op) {
	case U_RELU: for (int64_t i = lo; i < hi; i++) o[i] = !(p[i] <= 0) ? p[i] : 0; return; /* NaN stays */
	case U_NEG: for (int64_t i = lo; i < hi; i++) o[i] = -p[i]; return;
	case U_ABS: for (int64_t i = lo; i < hi; i++) o[i] = fabsf(p[i]); return;
	case U_ROUND: for (int64_t i = lo; i < hi; i++) o[i] = nearbyintf(p[i]); return;
	case U_RECIP: for (int64_t i = lo; i < hi; i++) o[i] = 1 / p[i]; return;
	case U_CEIL: for (int64_t i = lo; i < hi; i++) o[i] = ceilf(p[i]); return;
	case U_FLOOR: for (int64_t i = lo; i < hi; i++) o[i] = floorf(p[i]); return;
	case U_SIGN: for (int64_t i = lo; i < hi; i++) o[i] = p[i] > 0 ? 1.0f : p[i] < 0 ? -1.0f : p[i]; return;
	case U_SQRT: /* sqrtf's bits: of |x| it sets no errno, so the compiler vectorises it; +-0 stays,
		      * below 0 the default NaN, a NaN quieted */
		for (int64_t i = lo; i < hi; i++) {
			float v = p[i], s = sqrtf(fabsf(v));
			o[i] = v > 0 ? s : v == 0 ? v : v != v ? v + v : vm_bits_float(0xffc00000u);
		}
		return;
	case U_EXP: for (int64_t i = lo; i < hi; i++) o[i] = vm_expf(p[i]); return;
	case U_LOG: for (int64_t i = lo; i < hi; i++) o[i] = vm_logf(p[i]); return;
	case U_ERF: for (int64_t i = lo; i < hi; i++) o[i] = vm_erff(p[i]); return;
	case U_TANH: for (int64_t i = lo; i < hi; i++) o[i] = vm_tanhf(p[i]); return;
	case U_SIGMOID: /* e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below */
		for (int64_t i = lo; i < hi; i++) {
			float e = vm_expf(p[i] < 0 ? p[i] : -p[i]), s = 1 / (1 + e);
			o[i] = p[i] >= 0 ? s : e * s;
		}
		return;
	default:
		for (int64_t i = lo; i < hi; i++)
			o[i] = p[i];
		return;
	}
}

VM_CLONES static void un_floats(void *arg, int64_t lo, int64_t hi)
{
	const struct un_job *j = arg;
	un_f32(j->op, j->p, j->o, lo, hi);
}

/* IsNaN, IsInf (C_POSINF, C_NEGINF or both) on float32 or float64 (float16 and bfloat16 come
 * widened, cpu.c) and Not (bool: 0 is false) into bool elements, a piece of kernel_for. */
enum { C_NAN = 1, C_NOT = 2, C_POSINF = 4, C_NEGINF = 8 };

/* A typed loop's job: elements of dtype from at p into o (Cast's dtype to; class_elems' test) */
struct typed_job {
	const void *p;
	void *o;
	int from, to;
};

VM_CLONES static void class_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct typed_job *j = arg;
	const int what = j->to, pos = (what & C_POSINF) != 0, neg = (what & C_NEGINF) != 0;
	uint8_t *o = j->o;
#define CLASS_LOOP(T, NANX, INFX, NEGX)                                                                          \
	do {                                                                                                   \
		const T *p = j->p;                                                                             \
		if (what == C_NAN)                                                                             \
			for (int64_t i = lo; i < hi; i++) {                                                    \
				T v = p[i];                                                                    \
				o[i] = NANX;                                                                   \
			}                                                                                      \
		else                                                                                           \
			for (int64_t i = lo; i < hi; i++) {                                                    \
				T v = p[i];                                                                    \
				o[i] = (INFX) & (NEGX ? neg : pos);                                            \
			}                                                                                      \
	} while (0)
	if (what == C_NOT) {
		const uint8_t *p = j->p;
		for (int64_t i = lo; i < hi; i++)
			o[i] = p[i] == 0;
	} else if (j->from == DT_FLOAT) {
		CLASS_LOOP(float, v != v, fabsf(v) == INFINITY, v < 0);
	} else {
		CLASS_LOOP(double, v != v, fabs(v) == INFINITY, v < 0);
	}
#undef CLASS_LOOP
}

static int fp_class(const struct rtensor *a, struct rtensor *o, int what)
{
	if (what != C_NOT && a->dtype != DT_FLOAT && a->dtype != DT_DOUBLE) {
		uint8_t *q = o->data; /* any other float type, as rt_get reads it */
		for (int64_t i = 0; i < a->numel; i++) {
			double v = rt_get(a, i);
			q[i] = what == C_NAN ? isnan(v) : isinf(v) && (v > 0 ? (what & C_POSINF) : (what & C_NEGINF));
		}
		return 0;
	}
	struct typed_job j = {a->data, o->data, a->dtype, what};
	kernel_for(a->numel, KERNEL_GRAIN, class_elems, &j);
	return 0;
}

static int unary(struct exec *x, struct rtensor *const *in, struct rtensor *const *out, enum un op)
{
	struct rtensor *a = in[0];
	if (op == U_NOT && a->dtype != DT_BOOL)
		return exec_fail(x, "Not takes bool, not %s", dtype_name(a->dtype));
	if (op != U_NOT && op != U_IDENTITY && op != U_NEG && op != U_ABS && op != U_RELU && op != U_SIGN &&
	    want_float(x, a, "the input"))
		return exec_status(x);
	if (!exec_alloc(x, out[0], op == U_ISNAN ? DT_BOOL : a->dtype, a->ndim, a->dims))
		return exec_status(x);
	if (op == U_ISNAN || op == U_NOT)
		return fp_class(a, out[0], op == U_ISNAN ? C_NAN : C_NOT);
	if (op == U_IDENTITY) {
		memcpy(out[0]->data, a->data, a->nbytes);
		return 0;
	}
	if (a->dtype == DT_FLOAT) {
		struct un_job j = {op, a->data, out[0]->data};
		kernel_for(a->numel, KERNEL_GRAIN, un_floats, &j);
		return 0;
	}
	if (a->dtype == DT_DOUBLE) { /* what rt_get and rt_set made of it, without their calls */
		const double *p = a->data;
		double *o = out[0]->data;
		for (int64_t i = 0; i < a->numel; i++)
			o[i] = un_d(op, p[i]);
		return 0;
	}
	for (int64_t i = 0; i < a->numel; i++)
		rt_set(out[0], i, un_d(op, rt_get(a, i)));
	return 0;
}

#define UNARY(name, op)                                                                                       \
	static int name##_run(struct exec *x, const struct node *n, struct rtensor *const *in,                 \
			      struct rtensor *const *out)                                                      \
	{                                                                                                      \
		(void)n;                                                                                       \
		return unary(x, in, out, op);                                                                  \
	}
UNARY(neg, U_NEG)
UNARY(abs, U_ABS)
UNARY(sqrt, U_SQRT)
UNARY(exp, U_EXP)
UNARY(log, U_LOG)
UNARY(erf, U_ERF)
UNARY(relu, U_RELU)
UNARY(tanh, U_TANH)
UNARY(sigmoid, U_SIGMOID)
UNARY(not, U_NOT)
UNARY(is_nan, U_ISNAN)
UNARY(round, U_ROUND)
UNARY(identity, U_IDENTITY)
UNARY(reciprocal, U_RECIP)
UNARY(ceil, U_CEIL)
UNARY(floor, U_FLOOR)
UNARY(sign, U_SIGN)

/* IsInf: +inf where detect_positive (default 1), -inf where detect_negative (default 1) */
static int is_inf_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int pos = attr_int(n, "detect_positive", 1) != 0, neg = attr_int(n, "detect_negative", 1) != 0;
	if (want_float(x, a, "the input") || !exec_alloc(x, out[0], DT_BOOL, a->ndim, a->dims))
		return exec_status(x);
	return fp_class(a, out[0], (pos ? C_POSINF : 0) | (neg ? C_NEGINF : 0));
}

/* Cast's typed loops among float32, float64, float16, bfloat16, bool, int32 and int64: what the
 * rt_get/rt_set loop below makes of each element, without a call per element. The half
 * conversions are halfconv.h's, branch-free so they vectorise. */

/* f through double and back, as rt_get and rt_set take it: a signalling NaN quieted */
static inline float cf_quiet(float f)
{
	uint32_t u = cf_bits(f);
	return vm_bits_float((u & 0x7fffffff) > 0x7f800000 ? u | 0x400000 : u);
}

/* rt_set's float -> integer rule: truncated, saturated, NaN 0 */
static inline int64_t cf_sat(double v, int64_t lo, int64_t hi)
{
	return v != v ? 0 : v >= (double)hi ? hi : v <= (double)lo ? lo : (int64_t)v;
}

VM_CLONES static void cast_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct typed_job *j = arg;
	/* one loop per (from, to). RD: the source element as rt_get reads it; FL: whether the source is
	 * a float (to an integer: truncated and saturated, else wrapped as rt_set_i does); BL: whether
	 * it is bool (to float32 or float64: 1 for any nonzero byte, as the masks' loop before did) */
#define CF_LOOP(ST, DT, WR)                                                                                    \
	do {                                                                                                   \
		const ST *p = j->p;                                                                            \
		DT *o = j->o;                                                                                  \
		for (int64_t i = lo; i < hi; i++) {                                                            \
			ST s = p[i];                                                                           \
			o[i] = (DT)(WR);                                                                       \
		}                                                                                              \
	} while (0)
#define CF_TO(ST, RD, FL, BL)                                                                                  \
	switch (j->to) {                                                                                       \
	case DT_FLOAT: CF_LOOP(ST, float, BL ? (float)(s != 0) : cf_quiet((float)(RD))); break;                \
	case DT_DOUBLE: CF_LOOP(ST, double, BL ? (double)(s != 0) : (RD)); break;                              \
	case DT_FLOAT16: CF_LOOP(ST, uint16_t, cf_f16((float)(RD))); break;                                    \
	case DT_BFLOAT16: CF_LOOP(ST, uint16_t, cf_bf16((float)(RD))); break;                                  \
	case DT_BOOL: CF_LOOP(ST, uint8_t, (RD) != 0); break;                                                  \
	case DT_INT32: CF_LOOP(ST, int32_t, FL ? cf_sat((RD), INT32_MIN, INT32_MAX) : (int64_t)s); break;      \
	default: CF_LOOP(ST, int64_t, FL ? cf_sat((RD), INT64_MIN, INT64_MAX) : (int64_t)s); break;            \
	}                                                                                                      \
	break
	switch (j->from) {
	case DT_FLOAT: CF_TO(float, (double)s, 1, 0);
	case DT_DOUBLE: CF_TO(double, s, 1, 0);
	case DT_FLOAT16: CF_TO(uint16_t, (double)cf_from_f16(s), 1, 0);
	case DT_BFLOAT16: CF_TO(uint16_t, (double)cf_from_bf16(s), 1, 0);
	case DT_BOOL: CF_TO(uint8_t, (double)s, 0, 1);
	case DT_INT32: CF_TO(int32_t, (double)s, 0, 0);
	default: CF_TO(int64_t, (double)s, 0, 0);
	}
#undef CF_TO
#undef CF_LOOP
}

static int cast_typed(int dt)
{
	return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_FLOAT16 || dt == DT_BFLOAT16 || dt == DT_BOOL ||
	       dt == DT_INT32 || dt == DT_INT64;
}

/* Cast (to: the attribute) and CastLike (to: the second input's dtype) */
static int cast_to(struct exec *x, int to, struct rtensor *a, struct rtensor *const *out)
{
	if (!dtype_valid(to) || !dtype_size(to))
		return exec_fail(x, "cannot cast to %s", dtype_name(to));
	if (!exec_alloc(x, out[0], to, a->ndim, a->dims))
		return exec_status(x);
	struct rtensor *o = out[0];
	if (a->dtype == o->dtype) {
		memcpy(o->data, a->data, a->nbytes);
		return 0;
	}
	if (cast_typed(a->dtype) && cast_typed(o->dtype)) {
		struct typed_job j = {a->data, o->data, a->dtype, o->dtype};
		kernel_for(a->numel, KERNEL_GRAIN, cast_elems, &j);
		return 0;
	}
	/* integer -> integer wraps to the target's width (exact beyond 2^53), as NumPy; float -> int
	 * truncates toward zero, as ONNX says, and saturates (rt_set: NaN 0, 3e38 the maximum) */
	for (int64_t i = 0; i < a->numel; i++) {
		if (!dtype_is_float(a->dtype) && !dtype_is_float(o->dtype))
			rt_set_i(o, i, rt_get_i(a, i));
		else if (o->dtype == DT_BOOL)
			rt_set(o, i, rt_get(a, i) != 0);
		else
			rt_set(o, i, rt_get(a, i));
	}
	return 0;
}

static int cast_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return cast_to(x, (int)attr_int(n, "to", 0), in[0], out);
}

static int cast_like_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	return cast_to(x, in[1]->dtype, in[0], out);
}

/* Where's output elements [e0, e1): a piece of kernel_for, as bin_elems. */
struct where_job {
	struct walk w;
	struct rtensor *const *in;
	struct rtensor *o;
	int64_t row;
};

VM_CLONES static void where_elems(void *arg, int64_t e0, int64_t e1)
{
	const struct where_job *jb = arg;
	struct rtensor *const *in = jb->in;
	struct walk w = jb->w;
	size_t es = dtype_size(in[1]->dtype);
	int64_t s0 = w.nd ? w.st[0][w.nd - 1] : 0, s1 = w.nd ? w.st[1][w.nd - 1] : 0, s2 = w.nd ? w.st[2][w.nd - 1] : 0;
	walk_seek(&w, e0 / jb->row);
	for (int64_t i = e0, c = e0 % jb->row; i < e1; c = 0, walk_next(&w)) {
		/* columns c .. c + len of the row */
		const int64_t len = jb->row - c < e1 - i ? jb->row - c : e1 - i;
		const uint8_t *cd = (const uint8_t *)in[0]->data + w.off[0] + c * s0;
		int64_t o1 = w.off[1] + c * s1, o2 = w.off[2] + c * s2;
		if (es == 4) {
			const uint32_t *p = (const uint32_t *)in[1]->data + o1, *q = (const uint32_t *)in[2]->data + o2;
			uint32_t *o = (uint32_t *)jb->o->data + i;
			/* contiguous, or a scalar branch (ReLU's gradient: Where(x > 0, g, 0)): blends by a
			 * mask, which the compiler vectorises */
			if (s0 == 1 && (s1 | s2) <= 1 && (s1 == 1 || s2 == 1))
				for (int64_t j = 0; j < len; j++) {
					uint32_t m = -(uint32_t)(cd[j] != 0);
					o[j] = (p[j * s1] & m) | (q[j * s2] & ~m);
				}
			else
				for (int64_t j = 0; j < len; j++)
					o[j] = cd[j * s0] ? p[j * s1] : q[j * s2];
		} else if (es == 8) {
			const uint64_t *p = (const uint64_t *)in[1]->data + o1, *q = (const uint64_t *)in[2]->data + o2;
			uint64_t *o = (uint64_t *)jb->o->data + i;
			for (int64_t j = 0; j < len; j++)
				o[j] = cd[j * s0] ? p[j * s1] : q[j * s2];
		} else {
			for (int64_t j = 0; j < len; j++) {
				int k = cd[j * s0] ? 1 : 2;
				memcpy((uint8_t *)jb->o->data + (i + j) * es,
				       (const uint8_t *)in[k]->data + ((k == 1 ? o1 : o2) + j * (k == 1 ? s1 : s2)) * es, es);
			}
		}
		i += len;
	}
}

static int where_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	if (in[0]->dtype != DT_BOOL)
		return exec_fail(x, "the condition must be bool, not %s", dtype_name(in[0]->dtype));
	if (in[1]->dtype != in[2]->dtype)
		return exec_fail(x, "the two branches are %s and %s", dtype_name(in[1]->dtype), dtype_name(in[2]->dtype));
	int nd;
	int64_t dims[RT_MAX_DIMS];
	if (bcast_shape(x, in, 3, &nd, dims) || !exec_alloc(x, out[0], in[1]->dtype, nd, dims))
		return exec_status(x);
	if (out[0]->numel == 0)
		return 0;
	struct where_job j = {.in = in, .o = out[0]};
	walk_init(&j.w, nd, dims, in, 3);
	j.row = j.w.nd ? j.w.dims[j.w.nd - 1] : 1;
	kernel_for(out[0]->numel, KERNEL_GRAIN, where_elems, &j);
	return 0;
}

/* Sum, Mean, Max and Min of n inputs with broadcasting, accumulated into the output left to right (a
 * fixed order: deterministic, and no intermediate tensors). Sum and Mean add from zero (Mean then
 * divides by n) and take floats; Max and Min start from the first input and take any number type,
 * a NaN winning as in NumPy's maximum and PyTorch's. */
enum fold { F_SUM, F_MEAN, F_MAX, F_MIN };

#define FOLD_ROW(T)                                                                                            \
	do {                                                                                                   \
		const T *p = (const T *)in[k]->data + w.off[0];                                                \
		T *q = (T *)o + i;                                                                             \
		if (op <= F_MEAN)                                                                              \
			for (int64_t j = 0; j < row; j++)                                                      \
				q[j] += p[j * s];                                                              \
		else                                                                                           \
			for (int64_t j = 0; j < row; j++) {                                                    \
				T v = p[j * s];                                                                \
				if (!k || v != v || (op == F_MAX ? v > q[j] : v < q[j]))                       \
					q[j] = v;                                                              \
			}                                                                                      \
	} while (0)

/* The same fold over float32 or float64 inputs that are whole (the output's shape) or scalars: each
 * piece of kernel_for folds blocks of FOLD_BLOCK elements, input by input in the same order, so each
 * element sees the same operations as above. */
enum { FOLD_BLOCK = 2048 };

struct fold_job {
	struct rtensor *const *in;
	uint32_t n;
	enum fold op;
	void *o;
};

VM_CLONES static void fold_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct fold_job *jb = arg;
	const enum fold op = jb->op;
#define FOLD_FAST(T)                                                                                           \
	do {                                                                                                   \
		T *q = (T *)jb->o;                                                                             \
		for (uint32_t k = 0; k < jb->n; k++) {                                                         \
			const T *p = jb->in[k]->data;                                                          \
			const int64_t s = jb->in[k]->numel > 1;                                                \
			if (op <= F_MEAN && !k)                                                                \
				for (int64_t j = b; j < e; j++)                                                \
					q[j] = (T)0 + p[j * s];                                                \
			else if (op <= F_MEAN)                                                                 \
				for (int64_t j = b; j < e; j++)                                                \
					q[j] += p[j * s];                                                      \
			else if (!k)                                                                           \
				for (int64_t j = b; j < e; j++)                                                \
					q[j] = p[j * s];                                                       \
			else if (op == F_MAX)                                                                  \
				for (int64_t j = b; j < e; j++) {                                              \
					T v = p[j * s];                                                        \
					q[j] = v != v || v > q[j] ? v : q[j];                                  \
				}                                                                              \
			else                                                                                   \
				for (int64_t j = b; j < e; j++) {                                              \
					T v = p[j * s];                                                        \
					q[j] = v != v || v < q[j] ? v : q[j];                                  \
				}                                                                              \
		}                                                                                              \
		for (int64_t j = b; op == F_MEAN && j < e; j++) /* rt_set(rt_get / n) */                      \
			q[j] = (T)((double)q[j] / jb->n);                                                      \
	} while (0)
	for (int64_t b = lo, e; b < hi; b = e) {
		e = hi - b < FOLD_BLOCK ? hi : b + FOLD_BLOCK;
		if (jb->in[0]->dtype == DT_FLOAT)
			FOLD_FAST(float);
		else
			FOLD_FAST(double);
	}
#undef FOLD_FAST
}

static int fold_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		    enum fold op)
{
	int nd;
	int64_t dims[RT_MAX_DIMS];
	for (uint32_t k = 0; k < n->n_in; k++) {
		if (op <= F_MEAN && want_float(x, in[k], "every input"))
			return exec_status(x);
		if (in[k]->dtype != in[0]->dtype)
			return exec_fail(x, "inputs are %s and %s; they must have the same dtype", dtype_name(in[0]->dtype),
					 dtype_name(in[k]->dtype));
		if (in[k]->dtype == DT_BOOL || in[k]->dtype == DT_STRING)
			return exec_fail(x, "inputs must be numbers, not %s", dtype_name(in[k]->dtype));
	}
	if (bcast_shape(x, in, (int)n->n_in, &nd, dims))
		return exec_status(x);
	void *o = exec_alloc_zero(x, out[0], in[0]->dtype, nd, dims);
	if (!o || out[0]->numel == 0)
		return exec_status(x);
	int whole = in[0]->dtype == DT_FLOAT || in[0]->dtype == DT_DOUBLE;
	for (uint32_t k = 0; k < n->n_in && whole; k++)
		whole = in[k]->numel == out[0]->numel || in[k]->numel == 1;
	if (whole) {
		struct fold_job j = {in, n->n_in, op, o};
		kernel_for(out[0]->numel, KERNEL_GRAIN, fold_elems, &j);
		return 0;
	}
	const int uns = is_unsigned(in[0]->dtype);
	for (uint32_t k = 0; k < n->n_in; k++) {
		struct walk w;
		walk_init(&w, nd, dims, &in[k], 1);
		int64_t row = w.nd ? w.dims[w.nd - 1] : 1, s = w.nd ? w.st[0][w.nd - 1] : 0, i = 0;
		do {
			if (in[0]->dtype == DT_FLOAT) {
				FOLD_ROW(float);
			} else if (in[0]->dtype == DT_DOUBLE) {
				FOLD_ROW(double);
			} else { /* integers: compared as int64, or as uint64 for unsigned types */
				for (int64_t j = 0; j < row; j++) {
					int64_t v = rt_get_i(in[k], w.off[0] + j * s), c = rt_get_i(out[0], i + j), gt = 0;
					if (bin_i(x, op == F_MAX ? B_GT : B_LT, v, c, &gt, uns))
						return exec_status(x);
					if (!k || gt)
						rt_set_i(out[0], i + j, v);
				}
			}
			i += row;
		} while (walk_next(&w));
	}
	for (int64_t i = 0; op == F_MEAN && i < out[0]->numel; i++)
		rt_set(out[0], i, rt_get(out[0], i) / n->n_in);
	return 0;
}
#undef FOLD_ROW

#define FOLD(name, op)                                                                                        \
	static int name##_run(struct exec *x, const struct node *n, struct rtensor *const *in,                 \
			      struct rtensor *const *out)                                                      \
	{                                                                                                      \
		return fold_run(x, n, in, out, op);                                                            \
	}
FOLD(sum, F_SUM)
FOLD(mean, F_MEAN)
FOLD(max, F_MAX)
FOLD(min, F_MIN)

/* ---- gradient rules ----
 * y = a op b with broadcasting: each operand's gradient is summed back to its own shape
 * (ad_unbroadcast). Notation: g = dL/dy. */

static int give_ub(struct ad *a, const struct node *n, int k, struct value *g)
{
	if (!ad_wants(a, n->in[k]))
		return 0;
	return g ? ad_give(a, n->in[k], ad_unbroadcast(a, g, n->in[k], ad_shape(a, n->out[0]))) : -1;
}

static int add_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]);
	return give_ub(a, n, 0, g) || give_ub(a, n, 1, g);
}

static int sub_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]);
	return give_ub(a, n, 0, g) || (ad_wants(a, n->in[1]) && give_ub(a, n, 1, ad_op1(a, "Neg", g)));
}

static int mul_grad(struct ad *a, const struct node *n)
{
	int p = activation_product_grad(a, n);
	if (p)
		return p < 0 ? -1 : 0;
	struct value *g = ad_dy(a, n->out[0]);
	return (ad_wants(a, n->in[0]) && give_ub(a, n, 0, ad_op2(a, "Mul", g, n->in[1]))) ||
	       (ad_wants(a, n->in[1]) && give_ub(a, n, 1, ad_op2(a, "Mul", g, n->in[0])));
}

/* d(a/b)/da = 1/b; d(a/b)/db = -y/b */
static int div_grad(struct ad *a, const struct node *n)
{
	int p = layer_norm_chain_grad(a, n);
	if (p)
		return p < 0 ? -1 : 0;
	struct value *g = ad_dy(a, n->out[0]);
	return (ad_wants(a, n->in[0]) && give_ub(a, n, 0, ad_op2(a, "Div", g, n->in[1]))) ||
	       (ad_wants(a, n->in[1]) &&
		give_ub(a, n, 1, ad_op1(a, "Neg", ad_op2(a, "Div", ad_op2(a, "Mul", g, n->out[0]), n->in[1]))));
}

/* d(a^b)/da = b a^(b-1); d(a^b)/db = y ln a */
static int pow_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]), *x = n->in[0], *b = n->in[1];
	int dt = ad_shape(a, x)->dtype;
	if (ad_wants(a, x)) {
		struct value *bb = ad_shape(a, b)->dtype == dt ? b : ad_cast(a, b, dt);
		if (!bb)
			return -1;
		struct value *p = ad_op2(a, "Pow", x, ad_op2(a, "Sub", bb, ad_scalar(a, dt, 1)));
		if (give_ub(a, n, 0, ad_op2(a, "Mul", g, ad_op2(a, "Mul", bb, p))))
			return -1;
	}
	return ad_wants(a, b) &&
	       give_ub(a, n, 1, ad_op2(a, "Mul", g, ad_op2(a, "Mul", n->out[0], ad_op1(a, "Log", x))));
}

/* d|x| = sign(x), 0 at 0 as in PyTorch: (x > 0) - (x < 0) */
static int abs_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0];
	int dt = ad_shape(a, x)->dtype;
	struct value *zero = ad_scalar(a, dt, 0);
	struct value *s = ad_op2(a, "Sub", ad_cast(a, ad_op2(a, "Greater", x, zero), dt),
				 ad_cast(a, ad_op2(a, "Less", x, zero), dt));
	return ad_give(a, x, ad_op2(a, "Mul", ad_dy(a, n->out[0]), s));
}

static int neg_grad(struct ad *a, const struct node *n)
{
	return ad_give(a, n->in[0], ad_op1(a, "Neg", ad_dy(a, n->out[0])));
}

/* d sqrt(x) = 0.5 / y */
static int sqrt_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *g = ad_dy(a, n->out[0]);
	return ad_give(a, n->in[0], ad_op2(a, "Div", ad_op2(a, "Mul", g, ad_scalar(a, dt, 0.5)), n->out[0]));
}

static int exp_grad(struct ad *a, const struct node *n)
{
	return ad_give(a, n->in[0], ad_op2(a, "Mul", ad_dy(a, n->out[0]), n->out[0]));
}

static int log_grad(struct ad *a, const struct node *n)
{
	return ad_give(a, n->in[0], ad_op2(a, "Div", ad_dy(a, n->out[0]), n->in[0]));
}

/* d erf(x) = 2/sqrt(pi) exp(-x^2) */
static int erf_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *x = n->in[0];
	struct value *e = ad_op1(a, "Exp", ad_op1(a, "Neg", ad_op2(a, "Mul", x, x)));
	struct value *k = ad_scalar(a, dt, 1.1283791670955126);
	return ad_give(a, x, ad_op2(a, "Mul", ad_dy(a, n->out[0]), ad_op2(a, "Mul", e, k)));
}

/* Relu' = Where(Greater(y, 0), g, 0): g where y > 0 (which holds just where x > 0): reading the output, as PyTorch does, lets the
 * input go once the forward pass is past it, unless something else keeps it */
static int relu_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *zero = ad_scalar(a, dt, 0);
	struct value *ins[3] = {ad_op2(a, "Greater", n->out[0], zero), ad_dy(a, n->out[0]), zero};
	return ins[0] ? ad_give(a, n->in[0], ad_op(a, "Where", ins, 3)) : -1;
}

/* d tanh = 1 - y^2 */
static int tanh_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *y = n->out[0];
	struct value *d = ad_op2(a, "Sub", ad_scalar(a, dt, 1), ad_op2(a, "Mul", y, y));
	return ad_give(a, n->in[0], ad_op2(a, "Mul", ad_dy(a, y), d));
}

/* d sigmoid = y (1 - y) */
static int sigmoid_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->in[0])->dtype;
	struct value *y = n->out[0];
	struct value *d = ad_op2(a, "Mul", y, ad_op2(a, "Sub", ad_scalar(a, dt, 1), y));
	return ad_give(a, n->in[0], ad_op2(a, "Mul", ad_dy(a, y), d));
}

static int identity_grad(struct ad *a, const struct node *n)
{
	return ad_give(a, n->in[0], ad_dy(a, n->out[0]));
}

static int cast_grad(struct ad *a, const struct node *n)
{
	struct value *c = ad_cast(a, ad_dy(a, n->out[0]), ad_shape(a, n->in[0])->dtype);
	return c ? ad_give(a, n->in[0], c) : -1;
}

/* Where(c, a, b): a gets g where c holds, b where it does not */
static int where_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]);
	struct value *zero = ad_scalar(a, ad_shape(a, n->out[0])->dtype, 0);
	struct value *ta[3] = {n->in[0], g, zero}, *tb[3] = {n->in[0], zero, g};
	return (ad_wants(a, n->in[1]) && give_ub(a, n, 1, ad_op(a, "Where", ta, 3))) ||
	       (ad_wants(a, n->in[2]) && give_ub(a, n, 2, ad_op(a, "Where", tb, 3)));
}

static int sum_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]);
	for (uint32_t k = 0; k < n->n_in; k++)
		if (give_ub(a, n, (int)k, g))
			return -1;
	return 0;
}

/* Mean: each input gets g / n */
static int mean_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->out[0])->dtype;
	struct value *g = ad_op2(a, "Div", ad_dy(a, n->out[0]), ad_scalar(a, dt, n->n_in));
	for (uint32_t k = 0; k < n->n_in; k++)
		if (give_ub(a, n, (int)k, g))
			return -1;
	return 0;
}

/* Max, Min: g goes to the inputs equal to y, split evenly among ties: input k gets
 * g [x_k == y] / #{j: x_j == y}. For two inputs that is PyTorch's maximum/minimum backward (a tie
 * gives each half); one input gets g. */
static int extremum_grad(struct ad *a, const struct node *n)
{
	int dt = ad_shape(a, n->out[0])->dtype;
	struct value *g = ad_dy(a, n->out[0]), *y = n->out[0];
	if (n->n_in == 1)
		return give_ub(a, n, 0, g);
	struct value **m = xcalloc(n->n_in, sizeof *m), *share = NULL;
	int rc = m ? 0 : ad_fail(a, "out of memory");
	for (uint32_t k = 0; k < n->n_in && !rc; k++)
		if (!(m[k] = ad_cast(a, ad_op2(a, "Equal", n->in[k], y), dt)))
			rc = -1;
	if (!rc && !(share = ad_op2(a, "Div", g, ad_op(a, "Sum", m, (int)n->n_in))))
		rc = -1;
	for (uint32_t k = 0; k < n->n_in && !rc; k++)
		if (ad_wants(a, n->in[k]) && give_ub(a, n, (int)k, ad_op2(a, "Mul", share, m[k])))
			rc = -1;
	xfree(m);
	return rc;
}

/* d(1/x) = -y^2, from the output as PyTorch's reciprocal backward */
static int reciprocal_grad(struct ad *a, const struct node *n)
{
	struct value *y = n->out[0];
	return ad_give(a, n->in[0], ad_op1(a, "Neg", ad_op2(a, "Mul", ad_dy(a, y), ad_op2(a, "Mul", y, y))));
}

/* Mod (floats, so fmod 1): a - b q with q = trunc(a / b), q's own derivative 0 almost everywhere,
 * as PyTorch's fmod: a gets g, b gets -g q. trunc(v) is sign(v) floor(|v|), ONNX having no Trunc. */
static int mod_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]);
	if (give_ub(a, n, 0, g))
		return -1;
	if (!ad_wants(a, n->in[1]))
		return 0;
	struct value *q = ad_op2(a, "Div", n->in[0], n->in[1]);
	q = ad_op2(a, "Mul", ad_op1(a, "Sign", q), ad_op1(a, "Floor", ad_op1(a, "Abs", q)));
	return give_ub(a, n, 1, ad_op1(a, "Neg", ad_op2(a, "Mul", g, q)));
}

/* ---- fused chains (exec.c) ---- */

int chain_op(int op)
{
	switch (op) {
	case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: return 2;
	case OP_NEG: case OP_ABS: case OP_SQRT: case OP_EXP: case OP_LOG: case OP_ERF: case OP_RELU: case OP_TANH:
	case OP_SIGMOID: case OP_SIGN: return 1;
	default: return 0;
	}
}

static enum bin chain_bin(int op)
{
	return op == OP_ADD ? B_ADD : op == OP_SUB ? B_SUB : op == OP_MUL ? B_MUL : B_DIV;
}

static enum un chain_un(int op)
{
	switch (op) {
	case OP_NEG: return U_NEG;
	case OP_ABS: return U_ABS;
	case OP_SQRT: return U_SQRT;
	case OP_EXP: return U_EXP;
	case OP_LOG: return U_LOG;
	case OP_ERF: return U_ERF;
	case OP_RELU: return U_RELU;
	case OP_TANH: return U_TANH;
	case OP_SIGN: return U_SIGN; /* Clip's gradient (activation.c's pass_inside) */
	default: return U_SIGMOID;
	}
}

/* Elements a step computes at a time: the chain's slices stay in L1 (at 256 a 17-step GELU chain
 * ran 13% slower). */
#define SLICE 128

/* Operand a's elements [e0, e0 + len): a pointer to them (*stride 1), to the one element they all
 * are (*stride 0), or buf filled with them (a tensor broadcast along some axes: element e at
 * p[(e / q) % r]). */
static const float *chain_arg_at(const struct chain_arg *a, float *const *res, int64_t e0, int64_t len, float *buf,
				 int64_t *stride)
{
	*stride = 1;
	if (a->step >= 0)
		return res[a->step];
	if (a->r == 1) {
		*stride = 0;
		return a->p;
	}
	if (a->q == 1 && a->r >= e0 + len)
		return a->p + e0;
	int64_t idx = e0 / a->q % a->r, off = e0 % a->q;
	if (off + len <= a->q) { /* one element for all of them (a channel's scale over its plane) */
		*stride = 0;
		return a->p + idx;
	}
	for (int64_t j = 0; j < len;) {
		int64_t run;
		if (a->q == 1) {
			run = a->r - idx < len - j ? a->r - idx : len - j;
			memcpy(buf + j, a->p + idx, (size_t)run * sizeof *buf);
			idx = 0;
		} else {
			run = a->q - off < len - j ? a->q - off : len - j;
			for (int64_t t = 0; t < run; t++)
				buf[j + t] = a->p[idx];
			off = 0;
			idx = idx + 1 < a->r ? idx + 1 : 0;
		}
		j += run;
	}
	return buf;
}

VM_CLONES static void chain_piece(void *arg, int64_t e0, int64_t e1)
{
	const struct chain *c = arg;
	_Alignas(64) float tmp[CHAIN_MAX][SLICE], ga[SLICE], gb[SLICE];
	float *res[CHAIN_MAX]; /* each step's slice: in tmp, or where the result is wanted */
	for (int64_t s0 = e0; s0 < e1; s0 += SLICE) {
		int64_t len = e1 - s0 < SLICE ? e1 - s0 : SLICE;
		for (int k = 0; k < c->n; k++)
			res[k] = c->s[k].out ? c->s[k].out + s0 : tmp[k];
		for (int k = 0; k < c->n; k++) {
			const struct chain_step *st = &c->s[k];
			int64_t sa, sb;
			const float *pa = chain_arg_at(&st->a, res, s0, len, ga, &sa);
			float *po = res[k];
			if (chain_op(st->op) == 2) {
				const float *pb = chain_arg_at(&st->b, res, s0, len, gb, &sb);
				bin_f32(chain_bin(st->op), pa, sa, pb, sb, po, len);
			} else {
				un_f32(chain_un(st->op), pa, po, 0, len);
			}
		}
	}
}

void chain_run(const struct chain *c)
{
	kernel_for(c->numel, KERNEL_GRAIN, chain_piece, (void *)c);
}

/* No-ops (op_impl.noop): x + -0.0 is x bit for bit for every x, -0 and NaN included, but
 * -0 + +0 is +0, so Add folds only a -0.0 (or an integer 0); x - +0.0 is x + -0.0, and x * 1,
 * x / 1 and pow(x, 1) (C's Annex F) are x. The gradient through each is dy unchanged. */
static int add_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	(void)out;
	return op_all_equal(in[1], -0.0) ? 0 : op_all_equal(in[0], -0.0) ? 1 : -1;
}

static int sub_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	(void)out;
	return op_all_equal(in[1], 0.0) ? 0 : -1;
}

static int mul_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	(void)out;
	return op_all_equal(in[1], 1.0) ? 0 : op_all_equal(in[0], 1.0) ? 1 : -1;
}

/* Div, Pow */
static int by_one_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	(void)out;
	return op_all_equal(in[1], 1.0) ? 0 : -1;
}

/* Sum of one input */
static int sum_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)in;
	(void)out;
	return n->n_in == 1 ? 0 : -1;
}

const struct op_impl op_sum = {.run = sum_run, .grad = sum_grad, .recompute = RC_CHEAP, .noop = sum_noop};
const struct op_impl op_add = {.run = add_run, .grad = add_grad, .recompute = RC_CHEAP, .noop = add_noop};
const struct op_impl op_sub = {.run = sub_run, .grad = sub_grad, .recompute = RC_CHEAP, .noop = sub_noop};
const struct op_impl op_mul = {.run = mul_run, .grad = mul_grad, .recompute = RC_CHEAP, .noop = mul_noop};
const struct op_impl op_div = {.run = div_run, .grad = div_grad, .recompute = RC_CHEAP, .noop = by_one_noop};
const struct op_impl op_pow = {.run = pow_run, .grad = pow_grad, .recompute = RC_CHEAP, .noop = by_one_noop};
const struct op_impl op_equal = {.run = equal_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_greater = {.run = greater_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_less = {.run = less_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_neg = {.run = neg_run, .grad = neg_grad, .recompute = RC_CHEAP};
int op_breaks_at_zero(const struct node *n, struct rtensor *const *in, double *br)
{
	(void)n;
	(void)in;
	br[0] = 0;
	return 1;
}

const struct op_impl op_abs = {.run = abs_run, .grad = abs_grad, .recompute = RC_CHEAP, .kink = KINK_BREAKS,
			       .breaks = op_breaks_at_zero};
const struct op_impl op_sqrt = {.run = sqrt_run, .grad = sqrt_grad, .recompute = RC_CHEAP};
const struct op_impl op_exp = {.run = exp_run, .grad = exp_grad, .recompute = RC_CHEAP};
const struct op_impl op_log = {.run = log_run, .grad = log_grad, .recompute = RC_CHEAP};
const struct op_impl op_erf = {.run = erf_run, .grad = erf_grad, .recompute = RC_CHEAP};
const struct op_impl op_relu = {.run = relu_run, .grad = relu_grad, .recompute = RC_CHEAP, .kink = KINK_BREAKS,
				.breaks = op_breaks_at_zero};
const struct op_impl op_tanh = {.run = tanh_run, .grad = tanh_grad, .recompute = RC_CHEAP};
const struct op_impl op_sigmoid = {.run = sigmoid_run, .grad = sigmoid_grad, .recompute = RC_CHEAP};
const struct op_impl op_not = {.run = not_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_is_nan = {.run = is_nan_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_round = {.run = round_run, .recompute = RC_CHEAP, .nodiff = ~0u, .kink = KINK_STEP};
/* elem: issue 47's elementwise ops. Ceil, Floor and Sign pass no gradient, as Round (PyTorch's is
 * zero); comparisons, logic and BitShift none either. */
const struct op_impl op_reciprocal = {.run = reciprocal_run, .grad = reciprocal_grad, .recompute = RC_CHEAP};
const struct op_impl op_ceil = {.run = ceil_run, .recompute = RC_CHEAP, .nodiff = ~0u, .kink = KINK_STEP};
const struct op_impl op_floor = {.run = floor_run, .recompute = RC_CHEAP, .nodiff = ~0u, .kink = KINK_STEP};
const struct op_impl op_sign = {.run = sign_run, .recompute = RC_CHEAP, .nodiff = ~0u, .kink = KINK_STEP};
const struct op_impl op_is_inf = {.run = is_inf_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_greater_or_equal = {.run = greater_or_equal_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_less_or_equal = {.run = less_or_equal_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_and = {.run = and_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_or = {.run = or_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_xor = {.run = xor_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_bit_shift = {.run = bit_shift_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_mod = {.run = mod_run, .grad = mod_grad, .recompute = RC_CHEAP};
const struct op_impl op_max = {.run = max_run, .grad = extremum_grad, .recompute = RC_CHEAP, .kink = KINK_PICK};
const struct op_impl op_min = {.run = min_run, .grad = extremum_grad, .recompute = RC_CHEAP, .kink = KINK_PICK};
const struct op_impl op_mean = {.run = mean_run, .grad = mean_grad, .recompute = RC_CHEAP};
/* CastLike: the cast itself reads and writes 16-bit tensors (no widening), and mixed precision
 * leaves both inputs and the output at their own widths: the target type is the second input's. */
const struct op_impl op_cast_like = {.run = cast_like_run, .grad = cast_grad, .recompute = RC_CHEAP, .nodiff = 1u << 1,
				     .own_width = 1u << 0 | 1u << 1 | 1u << 16, .noop = op_noop_same_shape};
const struct op_impl op_identity = {.run = identity_run, .grad = identity_grad, .recompute = RC_CHEAP,
				    .noop = op_noop_same_shape};
const struct op_impl op_cast = {.run = cast_run, .grad = cast_grad, .recompute = RC_CHEAP, .noop = op_noop_same_shape};
const struct op_impl op_where = {.run = where_run, .grad = where_grad, .recompute = RC_CHEAP, .nodiff = 1u << 0};
