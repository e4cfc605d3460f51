/* linalg.c - linear algebra ops: Det (opset 11).
 *
 * Det: X (..., M, M) -> (...), each matrix's determinant by LU factorisation with partial pivoting
 * (Golub and Van Loan, Matrix Computations, 3.4), in double, rounded on store: det = (-1)^swaps
 * times the product of U's diagonal. A singular matrix gives 0 (exactly, when a column has no
 * nonzero pivot); a 0 x 0 matrix gives 1 (the empty product).
 *
 * Gradient: d det(X) / dX = det(X) X^-T = cof(X), the cofactor matrix, cof_ij = (-1)^(i+j) det of X
 * with row i and column j removed. ONNX has no Inverse op, but the cofactors are Dets of minors, so
 * the rule stays in standard ops (Gather, Transpose, Det, Mul, Reshape) and, unlike det X^-T, holds
 * at singular matrices too:
 *   minors (..., M, M, M-1, M-1) = Transpose(Gather(Gather(X, rows, axis -2), cols, axis -1))
 *   dX = dY[..., None, None] * sign * Det(minors),  sign_ij = (-1)^(i+j)
 * rows[i] lists 0..M-1 but i (cols likewise). It costs M^2 Dets of (M-1)^2 matrices, O(M^5) per
 * matrix: fine for the small matrices models take determinants of. M = 1: dX = dY. */
#include "../autodiff/ad.h"
#include "../util/xalloc.h"
#include "kernel.h"

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

/* (M, M - 1): row i lists 0..M-1 but i */
static struct value *all_but_one(struct ad *a, int64_t m)
{
	int64_t dims[2] = {m, m - 1};
	double *v = xcalloc((size_t)(m * (m - 1)) + 1, sizeof *v);
	struct value *r = NULL;
	if (v) {
		for (int64_t i = 0, k = 0; i < m; i++)
			for (int64_t j = 0; j < m; j++)
				if (j != i)
					v[k++] = (double)j;
		r = ad_tensor(a, DT_INT64, 2, dims, v);
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
	struct value *ix = all_but_one(a, m);
	struct value *rows = ad_op2(a, "Gather", n->in[0], ix); /* (..., M, M-1, M) */
	if (!rows || ad_set_int(a, ad_producer(rows), "axis", nb))
		return -1;
	struct value *both = ad_op2(a, "Gather", rows, ix); /* (..., M, M-1, M, M-1) */
	if (!both || ad_set_int(a, ad_producer(both), "axis", nb + 2))
		return -1;
	int64_t perm[36];
	for (int k = 0; k < nb; k++)
		perm[k] = k;
	perm[nb] = nb, perm[nb + 1] = nb + 2, perm[nb + 2] = nb + 1, perm[nb + 3] = nb + 3;
	struct value *minors = ad_op1(a, "Transpose", both);
	if (!minors || ad_set_ints(a, ad_producer(minors), "perm", perm, (size_t)nb + 4))
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
