/* dense.c - Gemm and MatMul on OpenBLAS (sgemm/dgemm).
 *
 * Gemm: Y (M,N) = alpha * A' (M,K) * B' (K,N) + beta * C, with A' = A or A^T (transA), B' likewise,
 * and C broadcast to (M,N). MatMul follows NumPy: 1-D operands gain a dimension that is dropped
 * again, batch dimensions broadcast, and each batch is one GEMM. */
#include "../autodiff/ad.h"
#include "kernel.h"

#include "blas.h"
#include <string.h>

static void gemm(int dt, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const void *a, int64_t lda,
		 const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
	if (dt == DT_FLOAT)
		blas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
			    (int)k, (float)alpha, a, (int)lda, b, (int)ldb, (float)beta, c, (int)ldc);
	else
		blas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n,
			    (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

static int blas_ok(struct exec *x, int64_t m, int64_t n, int64_t k)
{
	if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
		return exec_fail(x, "a matrix dimension exceeds what BLAS indexes (2^31)");
	return 0;
}

/* How BLAS reads t's (rows, cols) matrices, t contiguous or a view (a folded Transpose): *trans
 * and *ld; bst, its strides in elements for the nb batch dimensions of the product (0 where t
 * has none or broadcasts). */
static void operand(const struct rtensor *t, int nb, int *trans, int64_t *ld, int64_t *bst)
{
	int64_t st[RT_MAX_DIMS];
	if (t->view)
		rt_view_strides(t, st);
	else
		c_strides(t->ndim, t->dims, st);
	int64_t rows = t->dims[t->ndim - 2], cols = t->dims[t->ndim - 1], rs = st[t->ndim - 2], cs = st[t->ndim - 1];
	*trans = cs != 1 && rs == 1;
	*ld = *trans ? (cols > 1 ? cs : rows > 1 ? rows : 1) : (rows > 1 ? rs : cols > 1 ? cols : 1);
	for (int i = 0; i < nb; i++) {
		int d = i - (nb - (t->ndim - 2));
		bst[i] = d >= 0 && t->dims[d] != 1 ? st[d] : 0;
	}
}

static int gemm_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct rtensor *a = in[0], *b = in[1], *c = n->n_in > 2 ? in[2] : NULL;
	if (want_float(x, a, "A") || want_float(x, b, "B"))
		return exec_status(x);
	if (a->ndim != 2 || b->ndim != 2 || a->dtype != b->dtype || (c && c->dtype != a->dtype))
		return exec_fail(x, "A and B must be 2-D matrices of one dtype");
	int ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
	double alpha = attr_float(n, "alpha", 1), beta = attr_float(n, "beta", 1);
	int64_t m = ta ? a->dims[1] : a->dims[0], k = ta ? a->dims[0] : a->dims[1];
	int64_t kb = tb ? b->dims[1] : b->dims[0], nn = tb ? b->dims[0] : b->dims[1];
	if (k != kb)
		return exec_fail(x, "A is %lldx%lld and B %lldx%lld: inner dimensions differ", (long long)m, (long long)k,
				 (long long)kb, (long long)nn);
	int64_t dims[2] = {m, nn};
	if (c) {
		int nd;
		int64_t cd[RT_MAX_DIMS];
		struct rtensor y = {.ndim = 2, .dims = {m, nn}};
		struct rtensor *pair[2] = {&y, c};
		if (c->ndim > 2 || bcast_shape(x, pair, 2, &nd, cd) || cd[0] != m || cd[1] != nn)
			return exec_status(x) ? exec_status(x) : exec_fail(x, "C does not broadcast to %lldx%lld", (long long)m,
									  (long long)nn);
	}
	if (blas_ok(x, m, nn, k))
		return exec_status(x);
	/* a C of Y's elements that dies here is Y's buffer: the product is added to it in place (a
	 * shared weight's gradient summed, autodiff's gemm_adds) */
	int taken = c && c->numel == m * nn ? exec_take(x, in[2], out[0], 2, dims) : 0;
	if (taken < 0 || (!taken && !exec_alloc(x, out[0], a->dtype, 2, dims)))
		return exec_status(x);
	struct rtensor *y = out[0];
	size_t es = dtype_size(a->dtype);
	if (!c) {
		beta = 0;
	} else if (!taken && beta != 0) { /* Y = C broadcast, then GEMM accumulates into it */
		int64_t st[RT_MAX_DIMS];
		bcast_strides(c, 2, dims, st);
		uint8_t *yd = y->data;
		const uint8_t *cd = c->data;
		for (int64_t i = 0; i < m; i++) {
			if (st[1] == 1) { /* a row of C: copy it whole */
				memcpy(yd + i * nn * es, cd + i * st[0] * es, (size_t)nn * es);
				continue;
			}
			for (int64_t j = 0; j < nn; j++)
				memcpy(yd + (i * nn + j) * es, cd + (i * st[0] + j * st[1]) * es, es);
		}
	}
	int64_t lda, ldb;
	int va, vb; /* a view (a folded Transpose) toggles the flag */
	operand(a, 0, &va, &lda, NULL);
	operand(b, 0, &vb, &ldb, NULL);
	if (m && nn)
		gemm(a->dtype, ta ^ va, tb ^ vb, m, nn, k, alpha, a->data, lda, b->data, ldb, beta, y->data, nn);
	return 0;
}

/* MatMul's batches [b0, b1), one GEMM each: a piece of kernel_for. sa, sb: the operands' batch
 * strides in elements (0 where broadcast); ta, lda, tb, ldb: how BLAS reads each matrix. */
struct batched {
	int dt, nb, ta, tb;
	int64_t m, n, k, lda, ldb;
	const void *a, *b;
	void *y;
	int64_t dims[RT_MAX_DIMS], sa[RT_MAX_DIMS], sb[RT_MAX_DIMS];
};

static void batch_gemms(void *arg, int64_t b0, int64_t b1)
{
	const struct batched *j = arg;
	size_t es = dtype_size(j->dt);
	for (int64_t bi = b0; bi < b1; bi++) {
		int64_t oa = 0, ob = 0, rem = bi;
		for (int i = j->nb - 1; i >= 0; i--) {
			oa += rem % j->dims[i] * j->sa[i];
			ob += rem % j->dims[i] * j->sb[i];
			rem /= j->dims[i];
		}
		gemm(j->dt, j->ta, j->tb, j->m, j->n, j->k, 1, (const uint8_t *)j->a + oa * es, j->lda,
		     (const uint8_t *)j->b + ob * es, j->ldb, 0, (uint8_t *)j->y + bi * j->m * j->n * es, j->n);
	}
}

static int matmul_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)n;
	struct rtensor a = *in[0], b = *in[1];
	if (want_float(x, &a, "A") || want_float(x, &b, "B"))
		return exec_status(x);
	if (a.dtype != b.dtype)
		return exec_fail(x, "A is %s and B %s", dtype_name(a.dtype), dtype_name(b.dtype));
	if (a.ndim == 0 || b.ndim == 0)
		return exec_fail(x, "MatMul operands must have at least one dimension");
	int a1 = a.ndim == 1, b1 = b.ndim == 1;
	if (a1) { /* (K) -> (1,K) */
		a.dims[1] = a.dims[0];
		a.dims[0] = 1;
		a.ndim = 2;
	}
	if (b1) { /* (K) -> (K,1) */
		b.dims[1] = 1;
		b.ndim = 2;
	}
	int64_t m = a.dims[a.ndim - 2], k = a.dims[a.ndim - 1], kb = b.dims[b.ndim - 2], nn = b.dims[b.ndim - 1];
	if (k != kb)
		return exec_fail(x, "inner dimensions differ: %lld vs %lld", (long long)k, (long long)kb);
	/* batch dimensions broadcast */
	struct rtensor ab = {.ndim = a.ndim - 2}, bb = {.ndim = b.ndim - 2};
	memcpy(ab.dims, a.dims, (size_t)ab.ndim * sizeof *a.dims);
	memcpy(bb.dims, b.dims, (size_t)bb.ndim * sizeof *b.dims);
	struct rtensor *pair[2] = {&ab, &bb};
	int nb;
	int64_t dims[RT_MAX_DIMS];
	if (bcast_shape(x, pair, 2, &nb, dims))
		return exec_status(x);
	int nd = nb;
	if (!a1)
		dims[nd++] = m;
	if (!b1)
		dims[nd++] = nn;
	if (nd > RT_MAX_DIMS)
		return exec_fail(x, "result rank exceeds %d", RT_MAX_DIMS);
	if (blas_ok(x, m, nn, k) || !exec_alloc(x, out[0], a.dtype, nd, dims))
		return exec_status(x);
	struct batched j = {.dt = a.dtype, .nb = nb, .m = m, .n = nn, .k = k, .a = a.data, .b = b.data, .y = out[0]->data};
	operand(&a, nb, &j.ta, &j.lda, j.sa);
	operand(&b, nb, &j.tb, &j.ldb, j.sb);
	memcpy(j.dims, dims, (size_t)nb * sizeof *dims);
	int64_t batches = 1;
	for (int i = 0; i < nb; i++)
		batches *= dims[i];
	/* a matrix applied to a batch (a Linear layer on (N, T, K)): A's batches are contiguous rows and B
	 * is the same for all, so the product is one GEMM of batches x m rows */
	int flat = !a1 && nb > 0 && !a.view;
	for (int64_t i = nb - 1, run = m * k; i >= 0 && flat; run *= dims[i--])
		flat = j.sb[i] == 0 && (dims[i] == 1 || j.sa[i] == run);
	if (flat) {
		if (m && nn)
			gemm(a.dtype, 0, j.tb, batches * m, nn, k, 1, a.data, k, b.data, j.ldb, 0, out[0]->data, nn);
		return 0;
	}
	if (m && nn) /* each batch's GEMM the same call, whichever thread makes it */
		kernel_for(batches, (int64_t)((1 << 20) / ((double)m * nn * k + 1)) + 1, batch_gemms, &j);
	return 0;
}

/* Gemm: with A' = op(A), B' = op(B) and g = dL/dY,
 *   dA' = alpha g B'^T  -> dA = transA ? alpha B' g^T : alpha g B'^T
 *   dB' = alpha A'^T g  -> dB = transB ? alpha g^T A' : alpha A'^T g
 *   dC  = beta g, summed back to C's shape.
 * Each is one Gemm with the transpositions folded into its transA/transB. */
static struct value *gemm_node(struct ad *a, struct value *p, struct value *q, int ta, int tb, float alpha)
{
	struct value *y = ad_op2(a, "Gemm", p, q);
	struct node *n = ad_producer(y);
	if (!y || (ta && ad_set_int(a, n, "transA", 1)) || (tb && ad_set_int(a, n, "transB", 1)) ||
	    (alpha != 1 && ad_set_float(a, n, "alpha", alpha)))
		return NULL;
	return y;
}

static int gemm_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]), *A = n->in[0], *B = n->in[1];
	int ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
	float alpha = attr_float(n, "alpha", 1), beta = attr_float(n, "beta", 1);
	if (ad_wants(a, A) &&
	    ad_give(a, A, ta ? gemm_node(a, B, g, tb, 1, alpha) : gemm_node(a, g, B, 0, !tb, alpha)))
		return -1;
	if (ad_wants(a, B) &&
	    ad_give(a, B, tb ? gemm_node(a, g, A, 1, ta, alpha) : gemm_node(a, A, g, !ta, 0, alpha)))
		return -1;
	if (n->n_in > 2 && ad_wants(a, n->in[2])) {
		struct value *gc = beta == 1 ? g : ad_op2(a, "Mul", g, ad_scalar(a, ad_shape(a, A)->dtype, beta));
		return ad_give(a, n->in[2], ad_unbroadcast(a, gc, n->in[2], ad_shape(a, n->out[0])));
	}
	return 0;
}

/* The last two dimensions swapped. */
static struct value *swap_last(struct ad *a, struct value *v, int rank)
{
	int64_t perm[RT_MAX_DIMS];
	for (int i = 0; i < rank; i++)
		perm[i] = i;
	perm[rank - 2] = rank - 1;
	perm[rank - 1] = rank - 2;
	struct value *t = ad_op1(a, "Transpose", v);
	return t && !ad_set_ints(a, ad_producer(t), "perm", perm, (size_t)rank) ? t : NULL;
}

/* W when v = Transpose(W) with W a matrix (perm [1, 0] or none), as PyTorch exports a Linear layer
 * on batched input, or Cast(Transpose(W)), as autocast makes it (*to: the Cast's type, else 0);
 * else NULL. */
static struct value *untransposed(const struct value *v, int *to)
{
	const struct node *t = v->producer;
	*to = 0;
	if (t && t->op == OP_CAST && node_is_forward(t) && t->in[0]) {
		*to = (int)attr_int(t, "to", 0);
		t = t->in[0]->producer;
	}
	if (!t || t->op != OP_TRANSPOSE || !node_is_forward(t) || !t->in[0])
		return NULL;
	size_t np;
	const int64_t *p = attr_ints(t, "perm", &np);
	return p && (np != 2 || p[0] != 1 || p[1] != 0) ? NULL : t->in[0];
}

/* W's gradient d, cast back to W's type when B = Cast(Transpose(W)). */
static struct value *cast_back(struct ad *a, struct value *d, const struct value *W, int to)
{
	return to && d ? ad_cast(a, d, ad_shape(a, W)->dtype) : d;
}

/* MatMul (rank >= 2 both): dA = g B^T, dB = A^T g, each summed over broadcast batch dims. Two
 * matrices take one Gemm each, with the transposition as an attribute (no transposed copy); C is
 * optional in Gemm from opset 11. When B = Transpose(W) of a matrix, the rule reads W for dA and
 * gives W its gradient g^T A itself, so neither pass keeps or transposes a copy of the weight (the
 * Transpose's own rule sees only what other readers of B give); when B = Cast(Transpose(W)), W
 * still gets g^T A itself, cast back. */
static int matmul_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]), *A = n->in[0], *B = n->in[1];
	const struct rtensor *sa = ad_shape(a, A), *sb = ad_shape(a, B), *sy = ad_shape(a, n->out[0]);
	if (sa->ndim < 2 || sb->ndim < 2)
		return ad_fail(a, "gradients of MatMul with 1-D operands are not supported yet");
	int to = 0;
	struct value *W = sb->ndim == 2 ? untransposed(B, &to) : NULL;
	/* dA reads W for B^T; a 16-bit B (autocast's) is read as it is, as a copy kept or recomputed
	 * costs half the float32 W a cast in the backward pass would keep alive */
	struct value *Wr = to ? NULL : W;
	if (sa->ndim == 2 && sb->ndim == 2 && ad_opset(a) >= 11) {
		if (ad_wants(a, A) && ad_give(a, A, Wr ? gemm_node(a, g, Wr, 0, 0, 1) : gemm_node(a, g, B, 0, 1, 1)))
			return -1;
		if (W)
			return ad_wants(a, W) && ad_give(a, W, cast_back(a, gemm_node(a, g, A, 1, 0, 1), W, to)) ? -1 : 0;
		return ad_wants(a, B) && ad_give(a, B, gemm_node(a, A, g, 1, 0, 1)) ? -1 : 0;
	}
	if (ad_wants(a, A)) {
		struct value *d = ad_op2(a, "MatMul", g, Wr ? Wr : swap_last(a, B, sb->ndim));
		struct rtensor ds = *sy; /* dA before unbroadcasting: batch dims of y, then (M, K) */
		ds.dims[ds.ndim - 1] = sa->dims[sa->ndim - 1];
		if (ad_give(a, A, d ? ad_unbroadcast(a, d, A, &ds) : NULL))
			return -1;
	}
	int64_t k = sa->dims[sa->ndim - 1], nn = sy->dims[sy->ndim - 1];
	if (sb->ndim == 2 && ad_opset(a) >= 11 && !ad_dim_symbolic(a, k) && !ad_dim_symbolic(a, nn) &&
	    (W ? ad_wants(a, W) : ad_wants(a, B))) {
		/* a matrix applied to a batch (a Linear layer on (N, T, K)): its gradient is one Gemm
		 * over the flattened batch, not a product per batch element summed afterwards (which
		 * holds batch x K x N at once); the matrix's sizes are constants in the Reshapes */
		struct value *a2 = ad_op2(a, "Reshape", A, ad_ints(a, (int64_t[]){-1, k}, 2));
		struct value *g2 = ad_op2(a, "Reshape", g, ad_ints(a, (int64_t[]){-1, nn}, 2));
		if (W)
			return ad_give(a, W, cast_back(a, gemm_node(a, g2, a2, 1, 0, 1), W, to));
		return ad_give(a, B, gemm_node(a, a2, g2, 1, 0, 1));
	}
	if (W && ad_wants(a, W)) {
		struct value *d = ad_op2(a, "MatMul", swap_last(a, g, sy->ndim), A);
		struct rtensor ds = *sy; /* dW before unbroadcasting: batch dims of y, then (N, K) */
		ds.dims[ds.ndim - 2] = sy->dims[sy->ndim - 1];
		ds.dims[ds.ndim - 1] = sb->dims[0];
		return ad_give(a, W, cast_back(a, d ? ad_unbroadcast(a, d, W, &ds) : NULL, W, to));
	}
	if (!W && ad_wants(a, B)) {
		struct value *d = ad_op2(a, "MatMul", swap_last(a, A, sa->ndim), g);
		struct rtensor ds = *sy;
		ds.dims[ds.ndim - 2] = sb->dims[sb->ndim - 2];
		if (ad_give(a, B, d ? ad_unbroadcast(a, d, B, &ds) : NULL))
			return -1;
	}
	return 0;
}

/* 2MNK multiply-adds, plus the MN additions of C */
static void gemm_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		      uint64_t *bytes)
{
	(void)bytes;
	int ta = attr_int(n, "transA", 0) != 0;
	uint64_t k = (uint64_t)in[0]->dims[ta ? 0 : 1];
	*flops = 2 * (uint64_t)out[0]->numel * k + (n->n_in > 2 ? (uint64_t)out[0]->numel : 0);
}

/* 2 * (output elements) * K */
static void matmul_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			uint64_t *bytes)
{
	(void)n;
	(void)bytes;
	*flops = 2 * (uint64_t)out[0]->numel * (uint64_t)in[0]->dims[in[0]->ndim - 1];
}

const struct op_impl op_gemm = {.run = gemm_run, .cost = gemm_cost, .grad = gemm_grad, .recompute = RC_EXPENSIVE};
const struct op_impl op_matmul = {.run = matmul_run, .cost = matmul_cost, .grad = matmul_grad, .recompute = RC_EXPENSIVE};
