/* trig.c - the trigonometric and hyperbolic functions: Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh
 * Acosh Atanh.
 *
 * float32 by vmath.h's vectorised vm_sinf ... vm_atanhf (within 1 ulp of the function; sin, cos and
 * tan beyond |x| = 2^18 by libm's sinf, cosf, tanf), float64 by libm's double functions (16-bit
 * tensors arrive widened, exec/cpu.c); outside the domain NaN.
 * Gradients are PyTorch's backward formulas in standard ONNX ops, g = dL/dy:
 *   Sin g cos x          Cos -g sin x          Tan g (1 + y^2)
 *   Asin g / sqrt(1 - x^2)   Acos -g / sqrt(1 - x^2)   Atan g / (1 + x^2)
 *   Sinh g cosh x        Cosh g sinh x
 *   Asinh g / sqrt(x^2 + 1)  Acosh g / sqrt(x^2 - 1)   Atanh g / (1 - x^2) */
#include "../autodiff/ad.h"
#include "kernel.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

enum trig { T_SIN, T_COS, T_TAN, T_ASIN, T_ACOS, T_ATAN, T_SINH, T_COSH, T_ASINH, T_ACOSH, T_ATANH };

static double (*const trig_d[])(double) = {
	[T_SIN] = sin,     [T_COS] = cos,     [T_TAN] = tan,     [T_ASIN] = asin,   [T_ACOS] = acos,   [T_ATAN] = atan,
	[T_SINH] = sinh,   [T_COSH] = cosh,   [T_ASINH] = asinh, [T_ACOSH] = acosh, [T_ATANH] = atanh,
};

struct trig_job {
	enum trig op;
	const struct rtensor *a;
	struct rtensor *o;
};

/* o = f(p), f one of vmath.h's, inlined into each clone so the loop vectorises */
static inline __attribute__((always_inline)) void map_f32(const float *restrict p, float *restrict o, int64_t n,
							   float (*f)(float))
{
	for (int64_t i = 0; i < n; i++)
		o[i] = f(p[i]);
}

/* whether any of p[0..n) is one vm_sinf, vm_cosf and vm_tanf do not compute (vm_trig_fast false:
 * beyond VM_TRIG_MAX, infinite or NaN): an OR over compares, which vectorises */
static inline __attribute__((always_inline)) int any_slow(const float *restrict p, int64_t n)
{
	int slow = 0;
	for (int64_t i = 0; i < n; i++)
		slow |= !(fabsf(p[i]) <= VM_TRIG_MAX);
	return slow;
}

/* Sin, Cos and Tan a tile at a time: the vectorised pass, then libm's sinf, cosf or tanf (slow) for
 * the tile's lanes beyond vm_trig_fast, looked for while the tile is in L1. (A second scalar pass
 * over the whole block, as it was, read 64 MiB again from memory and took a third of Sin's time on
 * 16M elements.) */
enum { TRIG_TILE = 2048 };

static inline __attribute__((always_inline)) void map_trig_f32(const float *p, float *o, int64_t n,
								float (*f)(float), float (*slow)(float))
{
	_Alignas(64) float r[TRIG_TILE];
	for (int64_t t = 0; t < n; t += TRIG_TILE) {
		int64_t m = n - t < TRIG_TILE ? n - t : TRIG_TILE;
		if (!any_slow(p + t, m)) {
			map_f32(p + t, o + t, m, f);
			continue;
		}
		/* through r: o may be p's buffer (OPF_REUSES), and the slow lanes read p after the pass */
		map_f32(p + t, r, m, f);
		for (int64_t i = 0; i < m; i++)
			if (!vm_trig_fast(p[t + i]))
				r[i] = slow(p[t + i]);
		memcpy(o + t, r, (size_t)m * sizeof *r);
	}
}

VM_CLONES static void trig_f32(enum trig op, const float *restrict p, float *restrict o, int64_t n)
{
	switch (op) {
	case T_SIN: map_trig_f32(p, o, n, vm_sinf, sinf); break;
	case T_COS: map_trig_f32(p, o, n, vm_cosf, cosf); break;
	case T_TAN: map_trig_f32(p, o, n, vm_tanf, tanf); break;
	case T_ASIN: map_f32(p, o, n, vm_asinf); break;
	case T_ACOS: map_f32(p, o, n, vm_acosf); break;
	case T_ATAN: map_f32(p, o, n, vm_atanf); break;
	case T_SINH: map_f32(p, o, n, vm_sinhf); break;
	case T_COSH: map_f32(p, o, n, vm_coshf); break;
	case T_ASINH: map_f32(p, o, n, vm_asinhf); break;
	case T_ACOSH: map_f32(p, o, n, vm_acoshf); break;
	case T_ATANH: map_f32(p, o, n, vm_atanhf); break;
	}
}

/* float32 by vmath.h's functions (1 ulp; sin, cos and tan of |x| > VM_TRIG_MAX, infinities and
 * NaN by libm's sinf, cosf and tanf, trig_f32), float64 by libm */
static void trig_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct trig_job *j = arg;
	if (j->a->dtype == DT_FLOAT) {
		trig_f32(j->op, (const float *)j->a->data + lo, (float *)j->o->data + lo, hi - lo);
	} else {
		const double *p = j->a->data;
		double *o = j->o->data, (*f)(double) = trig_d[j->op];
		for (int64_t i = lo; i < hi; i++)
			o[i] = f(p[i]);
	}
}

static int trig_run(struct exec *x, struct rtensor *const *in, struct rtensor *const *out, enum trig op)
{
	const struct rtensor *a = in[0];
	if (want_float(x, a, "the input") || !exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	struct trig_job j = {op, a, out[0]};
	kernel_for(a->numel, KERNEL_GRAIN, trig_elems, &j);
	return 0;
}

#define K(v) ad_scalar(a, ad_shape(a, n->in[0])->dtype, (v))

/* x gets g d, or g / d (div) */
static int give_scaled(struct ad *a, const struct node *n, struct value *d, int div)
{
	return ad_give(a, n->in[0], ad_op2(a, div ? "Div" : "Mul", ad_dy(a, n->out[0]), d));
}

/* 1 + s x^2 (s = 1), 1 - x^2 (s = -1), or x^2 - 1 (s = 0) */
static struct value *quad(struct ad *a, const struct node *n, int s)
{
	struct value *x = n->in[0], *sq = ad_op2(a, "Mul", x, x);
	return s > 0 ? ad_op2(a, "Add", sq, K(1)) : s < 0 ? ad_op2(a, "Sub", K(1), sq) : ad_op2(a, "Sub", sq, K(1));
}

static int sin_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, ad_op1(a, "Cos", n->in[0]), 0);
}

static int cos_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, ad_op1(a, "Neg", ad_op1(a, "Sin", n->in[0])), 0);
}

static int tan_grad(struct ad *a, const struct node *n)
{
	struct value *y = n->out[0];
	return give_scaled(a, n, ad_op2(a, "Add", ad_op2(a, "Mul", y, y), K(1)), 0);
}

static int asin_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, ad_op1(a, "Sqrt", quad(a, n, -1)), 1);
}

static int acos_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, ad_op1(a, "Neg", ad_op1(a, "Sqrt", quad(a, n, -1))), 1);
}

static int atan_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, quad(a, n, 1), 1);
}

static int sinh_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, ad_op1(a, "Cosh", n->in[0]), 0);
}

static int cosh_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, ad_op1(a, "Sinh", n->in[0]), 0);
}

static int asinh_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, ad_op1(a, "Sqrt", quad(a, n, 1)), 1);
}

static int acosh_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, ad_op1(a, "Sqrt", quad(a, n, 0)), 1);
}

static int atanh_grad(struct ad *a, const struct node *n)
{
	return give_scaled(a, n, quad(a, n, -1), 1);
}
#undef K

#define TRIG(name, op)                                                                                        \
	static int name##_run(struct exec *x, const struct node *n, struct rtensor *const *in,                 \
			      struct rtensor *const *out)                                                      \
	{                                                                                                      \
		(void)n;                                                                                       \
		return trig_run(x, in, out, op);                                                               \
	}                                                                                                      \
	const struct op_impl op_##name = {.run = name##_run, .grad = name##_grad, .recompute = RC_CHEAP};
TRIG(sin, T_SIN)
TRIG(cos, T_COS)
TRIG(tan, T_TAN)
TRIG(asin, T_ASIN)
TRIG(acos, T_ACOS)
TRIG(atan, T_ATAN)
TRIG(sinh, T_SINH)
TRIG(cosh, T_COSH)
TRIG(asinh, T_ASINH)
TRIG(acosh, T_ACOSH)
TRIG(atanh, T_ATANH)
