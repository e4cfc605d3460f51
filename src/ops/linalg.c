/* linalg.c - linear algebra ops: Det (opset 11).
 *
 * Det: X (..., M, M) -> (...), each matrix's determinant by LU factorisation with partial pivoting
 * (Golub and Van Loan, Matrix Computations, 3.4), in double, rounded on store: det = (-1)^swaps
 * times the product of U's diagonal. A singular matrix gives 0 (exactly, when a column has no
 * nonzero pivot); a 0 x 0 matrix gives 1 (the empty product). float32 and float64 matrices up to
 * 16 x 16 are factored 8 at a time, one per lane of a vector, over the pool: the same operations
 * on each lane as the one-matrix loop, so the same bits for any number of threads.
 *
 * Gradient: d det(X) / dX = det(X) X^-T = cof(X), the cofactor matrix, cof_ij = (-1)^(i+j) det of X
 * with row i and column j removed. ONNX has no Inverse op, but the cofactors are Dets of minors, so
 * the rule stays in standard ops (Reshape, Gather, Det, Mul) and, unlike det X^-T, holds at
 * singular matrices too:
 *   minors (..., M, M, M-1, M-1) = Gather(Reshape(X, (..., M^2)), idx, axis -1)
 *   dX = dY[..., None, None] * sign * Det(minors),  sign_ij = (-1)^(i+j)
 * idx[i, j, r, c] is the flat index in X of minor (i, j)'s element (r, c). It costs M^2 Dets of
 * (M-1)^2 matrices, O(M^5) per matrix: fine for the small matrices models take determinants of.
 * M = 1: dX = dY. */
#include "../autodiff/ad.h"
#include "../util/xalloc.h"
#include "kernel.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

/* det of the m x m matrix a (row-major), which it overwrites with its LU factors */
static double lu_det(double *a, int64_t m)
{
	double det = 1;
	for (int64_t k = 0; k < m; k++) {
		int64_t p = k;
		for (int64_t i = k + 1; i < m; i++)
			if (fabs(a[i * m + k]) > fabs(a[p * m + k]))
				p = i;
		if (a[p * m + k] == 0)
			return 0;
		if (p != k) {
			for (int64_t j = 0; j < m; j++) {
				double t = a[k * m + j];
				a[k * m + j] = a[p * m + j];
				a[p * m + j] = t;
			}
			det = -det;
		}
		double piv = a[k * m + k];
		det *= piv;
		for (int64_t i = k + 1; i < m; i++) {
			double l = a[i * m + k] / piv;
			for (int64_t j = k + 1; j < m; j++)
				a[i * m + j] -= l * a[k * m + j];
		}
	}
	return det;
}

/* lu_det of DET_W matrices at once, in GCC's vector types, lane l of element (r, c) in lane l of
 * a[r m + c]: every lane the same double operations in the same order as lu_det (the pivot the
 * first largest |a|, the row swap and the sign as selects, a zero pivot marking the lane 0 where
 * lu_det returns), so each determinant has lu_det's bits. A lane marked 0 goes on dividing by its
 * zero pivot; its inf and NaN stay in the lane. Columns left of k are not swapped: no later step
 * reads them. */
#define DET_W 8
#define DET_LANES_MAX 16
typedef double det_v __attribute__((vector_size(DET_W * sizeof(double))));
typedef int64_t det_i __attribute__((vector_size(DET_W * sizeof(double))));

/* c ? a : b, c's lanes all ones or all zeros; |a| (macros: GCC warns of a 64-byte vector passed
 * to a function without AVX-512 enabled, though these only ever inline) */
#define DET_SEL(c, a, b) ((det_v)(((c) & (det_i)(a)) | (~(c) & (det_i)(b))))
#define DET_ABS(a) ((det_v)((det_i)(a) & INT64_MAX))

static inline __attribute__((always_inline)) void det_lanes(double *out, det_v *a, int64_t m)
{
	det_v det = (det_v){0} + 1, zero = (det_v){0};
	for (int64_t k = 0; k < m; k++) {
		det_v piv = a[k * m + k], p = (det_v){0} + (double)k;
		for (int64_t i = k + 1; i < m; i++) {
			det_i c = DET_ABS(a[i * m + k]) > DET_ABS(piv);
			piv = DET_SEL(c, a[i * m + k], piv);
			p = DET_SEL(c, (det_v){0} + (double)i, p);
		}
		zero = DET_SEL(piv == 0, (det_v){0} + 1, zero);
		det = DET_SEL(p != (double)k, -det, det);
		det *= piv;
		for (int64_t j = k; j < m; j++) {
			det_v t = a[k * m + j], row = t;
			for (int64_t i = k + 1; i < m; i++) {
				det_i c = p == (double)i;
				row = DET_SEL(c, a[i * m + j], row);
				a[i * m + j] = DET_SEL(c, t, a[i * m + j]);
			}
			a[k * m + j] = row;
		}
		for (int64_t i = k + 1; i < m; i++) {
			det_v q = a[i * m + k] / piv;
			for (int64_t j = k + 1; j < m; j++)
				a[i * m + j] -= q * a[k * m + j];
		}
	}
	det = DET_SEL(zero != 0, (det_v){0}, det);
	memcpy(out, &det, sizeof det);
}

/* Det of float32 or float64 matrices [lo, hi) of x into y: a piece of kernel_for. */
struct det_job {
	const void *x;
	void *y;
	int64_t m;
	int f64;
};

static inline __attribute__((always_inline)) void det_block(const struct det_job *j, det_v *a, int64_t b,
							   int64_t nb, int64_t m)
{
	int64_t mm = m * m;
	if (nb < DET_W)
		memset(a, 0, (size_t)mm * sizeof *a);
	if (nb < DET_W)
		for (int64_t l = 0; l < nb; l++)
			for (int64_t e = 0; e < mm; e++)
				a[e][l] = j->f64 ? ((const double *)j->x)[(b + l) * mm + e] : ((const float *)j->x)[(b + l) * mm + e];
	else if (j->f64)
		for (int64_t e = 0; e < mm; e++) { /* a vector built in registers, no store to reload */
			const double *s = (const double *)j->x + b * mm + e;
			a[e] = (det_v){s[0], s[mm], s[2 * mm], s[3 * mm], s[4 * mm], s[5 * mm], s[6 * mm], s[7 * mm]};
		}
	else
		for (int64_t e = 0; e < mm; e++) {
			const float *s = (const float *)j->x + b * mm + e;
			a[e] = (det_v){s[0], s[mm], s[2 * mm], s[3 * mm], s[4 * mm], s[5 * mm], s[6 * mm], s[7 * mm]};
		}
	double det[DET_W];
	det_lanes(det, a, m);
	for (int64_t l = 0; l < nb; l++)
		if (j->f64)
			((double *)j->y)[b + l] = det[l];
		else
			((float *)j->y)[b + l] = (float)det[l];
}

VM_CLONES static void det_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct det_job *j = arg;
	int64_t m = j->m;
	det_v a[DET_LANES_MAX * DET_LANES_MAX];
	for (int64_t b = lo; b < hi; b += DET_W) {
		int64_t nb = hi - b < DET_W ? hi - b : DET_W;
		/* the sizes models use, with m a constant: the loops unroll */
		if (m == 2)
			det_block(j, a, b, nb, 2);
		else if (m == 3)
			det_block(j, a, b, nb, 3);
		else if (m == 4)
			det_block(j, a, b, nb, 4);
		else
			det_block(j, a, b, nb, m);
	}
}

static int det_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	const struct rtensor *X = in[0];
	if (want_float(x, X, "X"))
		return exec_status(x);
	if (X->ndim < 2 || X->dims[X->ndim - 1] != X->dims[X->ndim - 2])
		return exec_fail(x, "Det needs square matrices (..., M, M), not a tensor of rank %d%s", X->ndim,
				 X->ndim < 2 ? "" : " whose last two dimensions differ");
	int64_t m = X->dims[X->ndim - 1], count = 1;
	for (int k = 0; k < X->ndim - 2; k++)
		count *= X->dims[k];
	if (!exec_alloc(x, out[0], X->dtype, X->ndim - 2, X->dims))
		return exec_status(x);
	if (m >= 1 && m <= DET_LANES_MAX && (X->dtype == DT_FLOAT || X->dtype == DT_DOUBLE)) {
		struct det_job j = {X->data, out[0]->data, m, X->dtype == DT_DOUBLE};
		kernel_for(count, 256, det_elems, &j);
		return 0;
	}
	/* larger matrices (one at a time: lanes of m^2 elements outgrow the caches), other dtypes */
	double *a = xcalloc((size_t)(m * m) + 1, sizeof *a);
	if (!a)
		return exec_fail(x, "out of memory");
	for (int64_t b = 0; b < count; b++) {
		for (int64_t k = 0; k < m * m; k++)
			a[k] = rt_get(X, b * m * m + k);
		rt_set(out[0], b, lu_det(a, m));
	}
	xfree(a);
	return 0;
}

/* (M, M, M-1, M-1): minor (i, j)'s element (r, c) is X's flat index r' M + c', r' the r-th of
 * 0..M-1 but i, c' the c-th of 0..M-1 but j */
static struct value *minor_index(struct ad *a, int64_t m)
{
	int64_t dims[4] = {m, m, m - 1, m - 1};
	double *v = xcalloc((size_t)(m * m * (m - 1) * (m - 1)) + 1, sizeof *v);
	struct value *r = NULL;
	if (v) {
		int64_t k = 0;
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < m; j++)
				for (int64_t ro = 0; ro < m; ro++)
					for (int64_t co = 0; ro != i && co < m; co++)
						if (co != j)
							v[k++] = (double)(ro * m + co);
		r = ad_tensor(a, DT_INT64, 4, dims, v);
	} else {
		ad_fail(a, "out of memory");
	}
	xfree(v);
	return r;
}

static int det_grad(struct ad *a, const struct node *n)
{
	const struct rtensor *xs = ad_shape(a, n->in[0]);
	int nb = xs->ndim - 2, dt = xs->dtype;
	int64_t m = xs->dims[xs->ndim - 1];
	if (ad_dim_symbolic(a, m))
		return ad_fail(a, "the matrix size must be known to differentiate Det (bind it with --dim)");
	struct value *dy = ad_dy(a, n->out[0]);
	/* dY as (..., 1, 1): Reshape's 0 copies each batch dimension */
	int64_t shape[34];
	if (nb > 32)
		return ad_fail(a, "Det's gradient takes at most 32 batch dimensions, not %d", nb);
	for (int k = 0; k < nb; k++)
		shape[k] = 0;
	shape[nb] = shape[nb + 1] = 1;
	struct value *g = ad_op2(a, "Reshape", dy, ad_ints(a, shape, (size_t)nb + 2));
	if (m == 1)
		return ad_give(a, n->in[0], g);
	/* the minors in one Gather of X's rows of M^2 (a Gather of rows, one of columns and a
	 * Transpose moved 2.3 times the minors' elements: 65536 4 x 4 matrices 120 -> 45 ms) */
	shape[nb] = m * m;
	struct value *flat = ad_op2(a, "Reshape", n->in[0], ad_ints(a, shape, (size_t)nb + 1));
	struct value *minors = ad_op2(a, "Gather", flat, minor_index(a, m)); /* (..., M, M, M-1, M-1) */
	if (!minors || ad_set_int(a, ad_producer(minors), "axis", nb))
		return -1;
	double *sign = xcalloc((size_t)(m * m), sizeof *sign);
	if (!sign)
		return ad_fail(a, "out of memory");
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < m; j++)
			sign[i * m + j] = (i + j) % 2 ? -1 : 1;
	int64_t sd[2] = {m, m};
	struct value *cof = ad_op2(a, "Mul", ad_op1(a, "Det", minors), ad_tensor(a, dt, 2, sd, sign));
	xfree(sign);
	return ad_give(a, n->in[0], ad_op2(a, "Mul", g, cof));
}

/* LU: about 2/3 M^3 multiply-adds per matrix */
static void det_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		     uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	const struct rtensor *X = in[0];
	uint64_t m = X->ndim >= 2 ? (uint64_t)X->dims[X->ndim - 1] : 0;
	uint64_t count = m ? (uint64_t)X->numel / (m * m) : 0;
	*flops = count * (2 * m * m * m / 3 + m);
}

const struct op_impl op_det = {.run = det_run, .cost = det_cost, .grad = det_grad, .recompute = RC_EXPENSIVE};
