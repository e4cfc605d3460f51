/* rnn.c - the recurrent op family: LSTM, GRU and RNN as ONNX defines them and PyTorch exports them
 * (nn.LSTM, nn.GRU, nn.RNN: forward, reverse or bidirectional, stacked as one node per layer,
 * optional initial states, every output), in either layout, with LSTM's peepholes and sequence_lens.
 *
 * Shapes (layout 0): X (T, B, I); W (D, G H, I); R (D, G H, H); B (D, 2 G H) = [Wb, Rb];
 * initial_h, initial_c (D, B, H); Y (T, D, B, H); Y_h, Y_c (D, B, H). G = 4 gates for LSTM (i, o,
 * f, c), 3 for GRU (z, r, h), 1 for RNN; D = 2 when bidirectional. Layout 1 is batch-major: X
 * (B, T, I), Y (B, T, D, H), the states (B, D, H); the gradient rule transposes it into layout 0 and
 * its gradients back. Default activations only (sigmoid, tanh), no clip (graphdiet says so).
 * sequence_lens (B): row b runs its first L_b steps (a reverse direction from step L_b - 1), Y is
 * zero past them, Y_h and Y_c hold the state after them (zeros for L_b = 0, as onnxruntime); the
 * gradient rule masks those steps.
 *
 *   LSTM: i, o, f = sigmoid(.), c~ = tanh(.) of X W^T + H R^T + Wb + Rb;
 *         C_t = f C_{t-1} + i c~; H_t = o tanh(C_t); peepholes P (D, 3 H) = [Pi, Po, Pf] add
 *         Pi C_{t-1} to i's argument, Pf C_{t-1} to f's and Po C_t to o's (then i, f, o, too, run
 *         step by step in the gradient rule)
 *   GRU:  z, r = sigmoid(.); h~ = tanh(X Wh^T + Wbh + r (H Rh^T + Rbh)) (linear_before_reset = 1,
 *         as PyTorch) or tanh(X Wh^T + Wbh + (r H) Rh^T + Rbh) (0, ONNX's default);
 *         H_t = (1 - z) h~ + z H_{t-1}
 *   RNN:  H_t = tanh(X W^T + H R^T + Wb + Rb)
 *
 * The kernel computes in X's dtype (float32 as PyTorch does, float64 for gradient checks): per
 * direction, the input projection X W^T of every step is one product, the recurrence H_{t-1} R^T
 * one product a step over the whole batch, and the gates one fused loop over contiguous rows
 * (vmath.h's exp and tanh for float32). The gradient rule is the unrolled
 * backward recurrence in standard ONNX ops. Per direction it works in processing order (a reverse
 * direction's time axis is reversed once, by a Gather). The forward pass keeps only X, the weights
 * and Y: H_{t-1} is Y shifted by one step, so every gate of every step is recomputed at once (two
 * MatMuls over the whole sequence); only LSTM's cell state runs step by step. The backward
 * recurrence then takes T steps of elementwise ops and one MatMul by R each; the weight gradients
 * are one Gemm each over all steps. */
#include "../autodiff/ad.h"
#include "../util/xalloc.h"
#include "blas.h"
#include "kernel.h"
#include "vmath.h"
#undef I /* cblas.h's complex.h: I is X's feature count here */

#include <math.h>
#include <stddef.h>
#include <string.h>

enum cell { CELL_LSTM, CELL_GRU, CELL_RNN };

static enum cell cell_of(const struct node *n)
{
	return n->op == OP_LSTM || n->op == OP_LSTM_GATES ? CELL_LSTM
	       : n->op == OP_GRU || n->op == OP_GRU_GATES ? CELL_GRU
							  : CELL_RNN;
}

static int gates_of(enum cell c)
{
	return c == CELL_LSTM ? 4 : c == CELL_GRU ? 3 : 1;
}

/* What graphdiet does not do, for the kernel's and the rule's messages; NULL when supported. */
static const char *unsupported(const struct node *n)
{
	if (node_attr(n, "clip"))
		return "clip is not supported";
	if (attr_int(n, "input_forget", 0))
		return "input_forget is not supported";
	const struct attr *acts = node_attr(n, "activations");
	if (acts && acts->type != ATTR_STRINGS)
		return "activations must be a list of strings";
	if (acts) {
		/* only the defaults, spelt out */
		static const char *const lstm[] = {"Sigmoid", "Tanh", "Tanh"}, *const gru[] = {"Sigmoid", "Tanh"};
		const char *const *want = cell_of(n) == CELL_LSTM ? lstm : cell_of(n) == CELL_GRU ? gru : gru + 1;
		size_t per = cell_of(n) == CELL_LSTM ? 3 : cell_of(n) == CELL_GRU ? 2 : 1;
		for (size_t k = 0; k < acts->n; k++)
			if (acts->strings[k].n != strlen(want[k % per]) || memcmp(acts->strings[k].p, want[k % per], acts->strings[k].n))
				return "only the default activations are supported";
	}
	return NULL;
}

/* The gate loops run over a row's H elements, a count GCC's -O2 cost model (very-cheap: no
 * epilogue) will not vectorise; this one will, with every clone's vector width. */
#if defined(__GNUC__) && !defined(__clang__)
#define RNN_VEC __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define RNN_VEC
#endif

/* sigmoid without overflow: e = exp(-|v|), 1 / (1 + e) for v >= 0, e / (1 + e) below */
static inline __attribute__((always_inline)) double sig_f64(double v)
{
	double e = exp(v < 0 ? v : -v), s = 1 / (1 + e);
	return v >= 0 ? s : e * s;
}

static inline __attribute__((always_inline)) float sig_f32(float v)
{
	float e = vm_expf(v < 0 ? v : -v), s = 1 / (1 + e);
	return v >= 0 ? s : e * s;
}

/* Rows of X (times I), of the states (times H) and of Y (times H) in either layout: 0 is
 * (T, B, ...), (D, B, H), (T, D, B, H); 1 is batch-major (B, T, ...), (B, D, H), (B, T, D, H). */
static int64_t x_row(int layout, int64_t T, int64_t Bn, int64_t t, int64_t b)
{
	return layout ? b * T + t : t * Bn + b;
}

static int64_t state_row(int layout, int D, int64_t Bn, int d, int64_t b)
{
	return layout ? b * D + d : d * Bn + b;
}

static int64_t y_row(int layout, int64_t T, int D, int64_t Bn, int64_t t, int d, int64_t b)
{
	return layout ? (b * T + t) * D + d : (t * D + d) * Bn + b;
}

/* C (m, n; ldc) = op(A) op(B) + beta C, op transposing when ta / tb */
static void rg_gemm(int dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
		    const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
	size_t es = dtype_size(dt);
	if (!m || !n)
		return;
	if (!k) {
		if (beta == 0)
			for (int64_t i = 0; i < m; i++)
				memset((char *)c + (size_t)(i * ldc) * es, 0, (size_t)n * es);
		return;
	}
	enum CBLAS_TRANSPOSE A = ta ? CblasTrans : CblasNoTrans, B = tb ? CblasTrans : CblasNoTrans;
	if (dt == DT_FLOAT)
		blas_sgemm(CblasRowMajor, A, B, (int)m, (int)n, (int)k, 1, a, (int)lda, b, (int)ldb, (float)beta, c,
			   (int)ldc);
	else
		blas_dgemm(CblasRowMajor, A, B, (int)m, (int)n, (int)k, 1, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* A step's product C (m, n; ldc) = A (m, k; lda) op(B), op(B) the same every step (R, or a part of
 * it): float32 on blas.h's panels, made once a direction (counted workspace), else one product a
 * step. */
struct steps {
	int dt;
	struct blas_panels p; /* the operand as given (p.b, p.tb, p.ldb: any dtype), and the panels */
	void *buf;
	size_t bytes;
};

/* 0, or -1 out of memory (the error set); steps_free(x, s) after */
static int steps_init(struct exec *x, struct steps *s, int dt, int64_t m, int64_t n, int64_t k, int tb, const void *b,
		      int64_t ldb)
{
	*s = (struct steps){.dt = dt, .p = {.b = b, .tb = tb, .ldb = (int)ldb, .m = (int)m, .n = (int)n, .k = (int)k}};
	s->bytes = dt == DT_FLOAT ? blas_panels_bytes((int)m, (int)n, (int)k) : 0;
	if (!s->bytes)
		return 0;
	if (!(s->buf = exec_scratch_raw(x, s->bytes)))
		return -1;
	blas_panels_make(&s->p, (int)m, (int)n, (int)k, tb, b, (int)ldb, s->buf);
	return 0;
}

static void steps_free(struct exec *x, struct steps *s)
{
	if (s->buf)
		exec_scratch_free(x, s->buf, s->bytes);
	s->buf = NULL;
}

static void steps_gemm(const struct steps *s, const void *a, int64_t lda, void *c, int64_t ldc)
{
	if (s->p.p)
		blas_panels_sgemm(&s->p, a, (int)lda, c, (int)ldc);
	else
		rg_gemm(s->dt, 0, s->p.tb, s->p.m, s->p.n, s->p.k, a, lda, s->p.b, s->p.ldb, 0, c, ldc);
}

/* One direction's step for the typed loops below. xw (T Bn, G H) is X W^T + Wb + Rb (GRU's h gate:
 * + Wb only) for every row of X; q (Bn, G H) is H_{t-1} R^T (GRU without linear_before_reset: its h
 * columns are (r H_{t-1}) Rh^T). Batch row b reads xw's row xr[b], or runs no step (xr[b] < 0: past
 * its length), and updates h, c (Bn, H) in place: its gates read only column k of the states. */
struct rnn_step {
	enum cell cell;
	int lbr;
	int64_t Bn, H;
	const int64_t *xr;
	const void *xw, *q;
	void *h, *c, *rh;    /* rh (Bn, H): GRU's r H_{t-1}, the second product's A */
	void *save;          /* or NULL: each row's gates at xr[b] ss (the forward node's gates output) */
	void *sink;          /* (G H + H) where they go when not saved: one loop either way */
	int64_t ss;
	const void *p, *rbh; /* (3 H) peepholes i, o, f and (H) GRU's Rbh; zeros when absent */
};

/* xw's rows += Wb + Rb (rb read for its first rb_n columns), then the gates of a step: reset (1:
 * GRU's r H_{t-1}) or the whole cell (0). Written once for float32 (vmath.h's exp and tanh, fused
 * into one loop the compiler vectorises) and once for float64 (libm), each computing in its type. */
#define RNN_TYPED(real, sfx, SIG, TANH)                                                                                \
	static void bias_rows_##sfx(void *xw, int64_t rows, int64_t n, int64_t ld, const void *wb, const void *rb,    \
				    int64_t rb_n)                                                                      \
	{                                                                                                              \
		real *row = xw;                                                                                        \
		const real *w = wb, *r = rb;                                                                           \
		for (int64_t i = 0; i < rows; i++, row += ld)                                                          \
			for (int64_t j = 0; j < n; j++)                                                                \
				row[j] += w[j] + (j < rb_n ? r[j] : 0);                                                \
	}                                                                                                              \
	/* a row's LSTM cell: i, o, f, c~, C_t (peepholes: i, f read C_{t-1}). The loops are functions of   \
	 * their own, with restrict parameters, as GCC does not vectorise them inside cells_ (its restrict     \
	 * locals and branches): there they ran scalar, 12% of an LSTM LM's training step. */                  \
	static inline __attribute__((always_inline)) void lstm_cell_##sfx(                                     \
		int64_t H, int64_t GH, const real *restrict g, const real *restrict q, const real *restrict pi,   \
		const real *restrict po, const real *restrict pf, real *restrict c, real *restrict h,            \
		real *restrict sv)                                                                             \
	{                                                                                                      \
		for (int64_t k = 0; k < H; k++) {                                                              \
			real i = SIG(g[k] + q[k] + pi[k] * c[k]);                                              \
			real f = SIG(g[2 * H + k] + q[2 * H + k] + pf[k] * c[k]);                              \
			real cg = TANH(g[3 * H + k] + q[3 * H + k]), cn = f * c[k] + i * cg;                   \
			real o = SIG(g[H + k] + q[H + k] + po[k] * cn);                                        \
			c[k] = cn;                                                                             \
			h[k] = o * TANH(cn);                                                                   \
			sv[k] = i, sv[H + k] = o, sv[2 * H + k] = f, sv[3 * H + k] = cg, sv[GH + k] = cn;      \
		}                                                                                              \
	}                                                                                                      \
	/* a row's GRU cell: q's h columns are H Rh^T, or (r H) Rh^T; E (lbr): H Rh^T + Rbh */                 \
	static inline __attribute__((always_inline)) void gru_cell_##sfx(                                      \
		int64_t H, int64_t GH, int lbr, const real *restrict g, const real *restrict q,                 \
		const real *restrict rbh, real *restrict h, real *restrict sv)                                   \
	{                                                                                                      \
		for (int64_t k = 0; k < H; k++) {                                                              \
			real z = SIG(g[k] + q[k]), r = SIG(g[H + k] + q[H + k]);                               \
			real rec = q[2 * H + k] + rbh[k];                                                      \
			real hh = TANH(g[2 * H + k] + (lbr ? r * rec : rec));                                  \
			h[k] = (1 - z) * hh + z * h[k];                                                        \
			sv[k] = z, sv[H + k] = r, sv[2 * H + k] = hh;                                          \
			sv[GH + k] = lbr ? rec : sv[GH + k];                                                   \
		}                                                                                              \
	}                                                                                                      \
	VM_CLONES static void cells_##sfx(const struct rnn_step *st, int reset)                                        \
	{                                                                                                              \
		const int64_t H = st->H, GH = H * gates_of(st->cell);                                                  \
		const real *restrict pi = st->p, *restrict po = pi + H, *restrict pf = po + H, *restrict rbh = st->rbh; \
		for (int64_t b = 0; b < st->Bn; b++) {                                                                 \
			if (st->xr[b] < 0)                                                                             \
				continue;                                                                              \
			const real *restrict g = (const real *)st->xw + st->xr[b] * GH;                                \
			const real *restrict q = (const real *)st->q + b * GH;                                         \
			real *restrict h = (real *)st->h + b * H, *restrict c = (real *)st->c + b * H;                 \
			real *restrict rh = (real *)st->rh + b * H;                                                    \
			real *restrict sv = st->save ? (real *)st->save + st->xr[b] * st->ss : (real *)st->sink;      \
			if (reset) {                                                                                   \
				for (int64_t k = 0; k < H; k++)                                                        \
					rh[k] = SIG(g[H + k] + q[H + k]) * h[k];                                       \
				if (st->save) /* E: r H_{t-1} */                                                       \
					memcpy(sv + GH, rh, (size_t)H * sizeof(real));                                 \
			} else if (st->cell == CELL_LSTM) {                                                            \
				lstm_cell_##sfx(H, GH, g, q, pi, po, pf, c, h, sv);                                    \
			} else if (st->cell == CELL_GRU) {                                                             \
				gru_cell_##sfx(H, GH, st->lbr, g, q, rbh, h, sv);                                      \
			} else {                                                                                       \
				for (int64_t k = 0; k < H; k++)                                                        \
					h[k] = TANH(g[k] + q[k]);                                                      \
				if (st->save)                                                                          \
					memcpy(sv, h, (size_t)H * sizeof(real));                                       \
			}                                                                                              \
		}                                                                                                      \
	}

RNN_TYPED(float, f32, sig_f32, vm_tanhf)
RNN_TYPED(double, f64, sig_f64, tanh)

/* t's elements in dtype dt: its own bytes when it has that dtype, else a converted copy in *copy
 * (freed by the caller); NULL for an absent t, or out of memory (*copy NULL then too). */
static const void *as_dtype(const struct rtensor *t, int dt, void **copy, int *oom)
{
	*copy = NULL;
	if (!t || t->dtype == dt)
		return t ? t->data : NULL;
	*copy = xmalloc((size_t)t->numel * dtype_size(dt) + 1);
	if (!*copy) {
		*oom = 1;
		return NULL;
	}
	for (int64_t i = 0; i < t->numel; i++)
		if (dt == DT_FLOAT)
			((float *)*copy)[i] = (float)rt_get(t, i);
		else
			((double *)*copy)[i] = rt_get(t, i);
	return *copy;
}

/* What a run of the kernel holds apart from its inputs and outputs. */
struct rnn_bufs {
	void *xw, *q, *h, *c, *rh, *zeros, *sink, *conv[6];
	int64_t *xr, *len;
};

static void rnn_bufs_free(struct rnn_bufs *m)
{
	xfree(m->xw);
	xfree(m->q);
	xfree(m->h);
	xfree(m->c);
	xfree(m->rh);
	xfree(m->zeros);
	xfree(m->sink);
	for (int i = 0; i < 6; i++)
		xfree(m->conv[i]);
	xfree(m->xr);
	xfree(m->len);
}

/* The inputs of a recurrent node (the forward op's, or RecurrentGrad's first 8), checked. */
struct rnn_in {
	enum cell cell;
	int G, D, rev, lbr, layout;
	int64_t T, Bn, I, H, GH;
	const struct rtensor *X, *W, *R, *Bs, *h0, *c0, *P, *lens;
};

static int rnn_check(struct exec *x, const struct node *n, enum cell cell, struct rtensor *const *in, struct rnn_in *o)
{
	const struct rtensor *X = in[0], *W = in[1], *R = in[2];
	const struct rtensor *Bs = n->n_in > 3 ? in[3] : NULL, *h0 = n->n_in > 5 ? in[5] : NULL;
	const struct rtensor *c0 = cell == CELL_LSTM && n->n_in > 6 ? in[6] : NULL;
	const struct rtensor *P = cell == CELL_LSTM && n->n_in > 7 ? in[7] : NULL; /* (D, 3 H): i, o, f */
	const struct rtensor *lens = n->n_in > 4 ? in[4] : NULL; /* (B) int32 */
	if (want_float(x, X, "X"))
		return exec_status(x);
	int G = gates_of(cell), D = attr_str_is(n, "direction", "bidirectional", 0) ? 2 : 1;
	int rev = attr_str_is(n, "direction", "reverse", 0), lbr = (int)attr_int(n, "linear_before_reset", 0);
	int layout = (int)attr_int(n, "layout", 0);
	if (layout != 0 && layout != 1)
		return exec_fail(x, "layout must be 0 or 1, not %d", layout);
	if (X->ndim != 3 || W->ndim != 3 || R->ndim != 3)
		return exec_fail(x, "X, W and R must have rank 3");
	int64_t T = X->dims[layout], Bn = X->dims[!layout], I = X->dims[2], H = R->dims[2], GH = G * H;
	if (lens && lens->numel != Bn)
		return exec_fail(x, "sequence_lens must have %lld elements (the batch), not %lld", (long long)Bn,
				 (long long)lens->numel);
	for (int64_t b = 0; lens && lens->data && b < Bn; b++) /* known only when computing, or constant */
		if (rt_get_i(lens, b) < 0 || rt_get_i(lens, b) > T)
			return exec_fail(x, "sequence_lens[%lld] is %lld, outside [0, %lld]", (long long)b,
					 (long long)rt_get_i(lens, b), (long long)T);
	if (attr_int(n, "hidden_size", H) != H || W->dims[0] != D || R->dims[0] != D || W->dims[1] != GH ||
	    R->dims[1] != GH || W->dims[2] != I)
		return exec_fail(x, "W must be (%d, %lld, %lld) and R (%d, %lld, %lld)", D, (long long)GH, (long long)I, D,
				 (long long)GH, (long long)H);
	if ((Bs && Bs->numel != D * 2 * GH) || (h0 && h0->numel != D * Bn * H) || (c0 && c0->numel != D * Bn * H) ||
	    (P && P->numel != D * 3 * H))
		return exec_fail(x, "B must be (%d, %lld); P (%d, %lld); initial_h and initial_c %d x %lld x %lld", D,
				 (long long)(2 * GH), D, (long long)(3 * H), D, (long long)Bn, (long long)H);
	*o = (struct rnn_in){.cell = cell, .G = G, .D = D, .rev = rev, .lbr = lbr, .layout = layout, .T = T, .Bn = Bn,
			     .I = I, .H = H, .GH = GH, .X = X, .W = W, .R = R, .Bs = Bs, .h0 = h0, .c0 = c0, .P = P,
			     .lens = lens};
	return 0;
}

/* The forward pass, per direction: xw = X W^T + biases for all steps as one product; then per step
 * q = H_{t-1} R^T as one product over the batch (GRU without linear_before_reset: H_{t-1} Rzr^T,
 * then (r H_{t-1}) Rh^T) and the gates fused in one loop over contiguous rows, in X's dtype. */
static int rnn_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const char *why = unsupported(n);
	if (why)
		return exec_fail(x, "%s", why);
	enum cell cell = cell_of(n);
	struct rnn_in ri;
	if (rnn_check(x, n, cell, in, &ri))
		return exec_status(x);
	const struct rtensor *X = ri.X, *W = ri.W, *R = ri.R, *Bs = ri.Bs, *h0 = ri.h0, *c0 = ri.c0, *P = ri.P;
	const struct rtensor *lens = ri.lens;
	int G = ri.G, D = ri.D, rev = ri.rev, lbr = ri.lbr, layout = ri.layout;
	int64_t T = ri.T, Bn = ri.Bn, I = ri.I, H = ri.H, GH = ri.GH;
	(void)G;
	int64_t yd[4] = {T, D, Bn, H}, sd[3] = {D, Bn, H};
	if (layout) {
		yd[0] = Bn, yd[1] = T, yd[2] = D;
		sd[0] = Bn, sd[1] = D;
	}
	int dt = X->dtype;
	void *y = n->n_out > 0 && n->out[0] ? exec_alloc(x, out[0], dt, 4, yd) : NULL;
	void *yh = n->n_out > 1 && n->out[1] ? exec_alloc(x, out[1], dt, 3, sd) : NULL;
	void *yc = cell == CELL_LSTM && n->n_out > 2 && n->out[2] ? exec_alloc(x, out[2], dt, 3, sd) : NULL;
	/* the training graph's extra output for RecurrentGrad (train --fused-rnn): every row's gates */
	int gslot = cell == CELL_LSTM ? 3 : 2;
	int64_t gs = GH + (cell == CELL_RNN ? 0 : H), gd[3] = {D, T * Bn, gs};
	void *gates = n->n_out > (uint32_t)gslot && n->out[gslot] ? exec_alloc(x, out[gslot], dt, 3, gd) : NULL;
	if (exec_status(x) || !(y || yh || yc || gates))
		return exec_status(x);
	if (T * Bn > INT32_MAX || GH > INT32_MAX || I > INT32_MAX)
		return exec_fail(x, "a product's dimension exceeds what BLAS indexes (2^31)");
	size_t es = dtype_size(dt);
	struct rnn_bufs m = {0};
	int oom = 0;
	const char *w = as_dtype(W, dt, &m.conv[0], &oom), *r = as_dtype(R, dt, &m.conv[1], &oom);
	const char *bias = as_dtype(Bs, dt, &m.conv[2], &oom), *ih = as_dtype(h0, dt, &m.conv[3], &oom);
	const char *ic = as_dtype(c0, dt, &m.conv[4], &oom), *peep = as_dtype(P, dt, &m.conv[5], &oom);
	m.xw = xmalloc((size_t)(T * Bn * GH) * es + 1);
	m.q = xmalloc((size_t)(Bn * GH) * es + 1);
	m.h = xmalloc((size_t)(Bn * H) * es + 1);
	m.c = xmalloc((size_t)(Bn * H) * es + 1);
	m.rh = xcalloc((size_t)(Bn * H) + 1, es);
	m.zeros = xcalloc((size_t)(3 * H) + 1, es); /* 0.0 in both dtypes */
	m.sink = xcalloc((size_t)(GH + H) + 1, es);
	m.xr = xmalloc((size_t)Bn * sizeof *m.xr + 1);
	m.len = xmalloc((size_t)Bn * sizeof *m.len + 1);
	if (oom || !m.xw || !m.q || !m.h || !m.c || !m.rh || !m.zeros || !m.sink || !m.xr || !m.len) {
		rnn_bufs_free(&m);
		return exec_fail(x, "out of memory");
	}
	for (int64_t b = 0; b < Bn; b++)
		m.len[b] = lens ? rt_get_i(lens, b) : T;
	if (y && lens)
		memset(y, 0, (size_t)(T * D * Bn * H) * es);
	if (gates && lens) /* rows past their length: RecurrentGrad multiplies them by zeros */
		memset(gates, 0, (size_t)(D * T * Bn * gs) * es);
	struct rnn_step st = {.cell = cell, .lbr = lbr, .Bn = Bn, .H = H, .xr = m.xr, .xw = m.xw, .q = m.q,
			      .h = m.h, .c = m.c, .rh = m.rh, .p = m.zeros, .rbh = m.zeros, .sink = m.sink};
	void (*cells)(const struct rnn_step *, int) = dt == DT_FLOAT ? cells_f32 : cells_f64;
	int gru0 = cell == CELL_GRU && !lbr; /* r applies before the h gate's product: two products a step */
	char *hs = m.h, *cs = m.c;
	for (int d = 0; d < D; d++) {
		const char *wd = w + (size_t)(d * GH * I) * es, *rd = r + (size_t)(d * GH * H) * es;
		for (int64_t b = 0; b < Bn; b++) {
			int64_t at = state_row(layout, D, Bn, d, b) * H;
			memcpy(hs + (size_t)(b * H) * es, ih ? ih + (size_t)at * es : (const char *)m.zeros, (size_t)H * es);
			if (cell == CELL_LSTM)
				memcpy(cs + (size_t)(b * H) * es, ic ? ic + (size_t)at * es : (const char *)m.zeros,
				       (size_t)H * es);
		}
		rg_gemm(dt, 0, 1, T * Bn, GH, I, X->data, I, wd, I, 0, m.xw, GH);
		if (bias) {
			const char *bd = bias + (size_t)(d * 2 * GH) * es;
			(dt == DT_FLOAT ? bias_rows_f32 : bias_rows_f64)(m.xw, T * Bn, GH, GH, bd, bd + (size_t)GH * es,
									 cell == CELL_GRU ? 2 * H : GH);
			st.rbh = bd + (size_t)(GH + 2 * H) * es;
		}
		if (peep)
			st.p = peep + (size_t)(d * 3 * H) * es;
		st.save = gates ? (char *)gates + (size_t)(d * T * Bn * gs) * es : NULL;
		st.ss = gs;
		struct steps hr, rr = {0}; /* H_{t-1} R^T (Rzr^T); GRU lbr 0's (r H_{t-1}) Rh^T */
		if (steps_init(x, &hr, dt, Bn, gru0 ? 2 * H : GH, H, 1, rd, H) ||
		    (gru0 && steps_init(x, &rr, dt, Bn, H, H, 1, rd + (size_t)(2 * H * H) * es, H))) {
			steps_free(x, &hr);
			rnn_bufs_free(&m);
			return exec_status(x);
		}
		for (int64_t s = 0; s < T; s++) {
			for (int64_t b = 0; b < Bn; b++) /* a reverse direction starts at each row's last step */
				m.xr[b] = s >= m.len[b] ? -1
					  : x_row(layout, T, Bn, rev || d == 1 ? m.len[b] - 1 - s : s, b);
			steps_gemm(&hr, hs, H, m.q, GH);
			if (gru0) {
				cells(&st, 1);
				steps_gemm(&rr, m.rh, H, (char *)m.q + (size_t)(2 * H) * es, GH);
			}
			cells(&st, 0);
			for (int64_t b = 0; y && b < Bn; b++)
				if (m.xr[b] >= 0) {
					int64_t t = rev || d == 1 ? m.len[b] - 1 - s : s;
					memcpy((char *)y + (size_t)(y_row(layout, T, D, Bn, t, d, b) * H) * es,
					       hs + (size_t)(b * H) * es, (size_t)H * es);
				}
		}
		steps_free(x, &hr);
		steps_free(x, &rr);
		for (int64_t b = 0; b < Bn; b++) { /* zeros for a row of length 0, as onnxruntime gives */
			size_t at = (size_t)(state_row(layout, D, Bn, d, b) * H) * es, row = (size_t)(b * H) * es;
			int empty = m.len[b] == 0;
			if (yh)
				memcpy((char *)yh + at, empty ? (const char *)m.zeros : hs + row, (size_t)H * es);
			if (yc)
				memcpy((char *)yc + at, empty ? (const char *)m.zeros : cs + row, (size_t)H * es);
		}
	}
	rnn_bufs_free(&m);
	return 0;
}

/* ---- the gradient rule ---- */

static struct value *index_scalar(struct ad *a, int64_t i)
{
	double v = (double)i;
	return ad_tensor(a, DT_INT64, 0, NULL, &v);
}

/* v's slice i along axis, that axis dropped */
static struct value *pick(struct ad *a, struct value *v, int64_t i, int axis)
{
	struct value *p = ad_op2(a, "Gather", v, index_scalar(a, i));
	return p && !ad_set_int(a, ad_producer(p), "axis", axis) ? p : NULL;
}

static struct value *slice0(struct ad *a, struct value *v, int axis, int64_t start, int64_t end)
{
	int64_t ax = axis;
	struct value *ins[4] = {v, ad_ints(a, &start, 1), ad_ints(a, &end, 1), ad_ints(a, &ax, 1)};
	return ad_op(a, "Slice", ins, 4);
}

static struct value *concat(struct ad *a, struct value **parts, int k, int axis)
{
	if (k == 1)
		return parts[0];
	struct value *c = ad_op(a, "Concat", parts, k);
	return c && !ad_set_int(a, ad_producer(c), "axis", axis) ? c : NULL;
}

/* v (T, B, ...) in reverse time order; with sequence lengths (B, int64), each row's first L_b steps
 * reversed and the rest left in place (ReverseSequence), as a reverse direction runs them */
static struct value *reverse_time(struct ad *a, struct value *v, int64_t T, struct value *lens)
{
	if (lens) {
		struct value *r = ad_op2(a, "ReverseSequence", v, lens);
		return r && !ad_set_int(a, ad_producer(r), "time_axis", 0) && !ad_set_int(a, ad_producer(r), "batch_axis", 1)
			       ? r
			       : NULL;
	}
	int64_t *ix = xcalloc((size_t)T + 1, sizeof *ix);
	if (!ix)
		return NULL;
	for (int64_t t = 0; t < T; t++)
		ix[t] = T - 1 - t;
	struct value *r = ad_op2(a, "Gather", v, ad_ints(a, ix, (size_t)T));
	xfree(ix);
	return r;
}

/* v's T steps along axis 0, each (1, ...): one Split node */
static int split_time(struct ad *a, struct value *v, int64_t T, struct value **steps)
{
	if (T == 1) {
		steps[0] = v;
		return v ? 0 : -1;
	}
	int64_t *ones = xcalloc((size_t)T, sizeof *ones);
	if (!ones)
		return -1;
	for (int64_t t = 0; t < T; t++)
		ones[t] = 1;
	struct value *ins[2] = {v, ad_ints(a, ones, (size_t)T)};
	xfree(ones);
	struct node *s = ins[0] && ins[1] ? ad_node(a, "Split", ins, 2, (int)T) : NULL;
	if (!s || ad_set_int(a, s, "axis", 0))
		return -1;
	for (int64_t t = 0; t < T; t++)
		steps[t] = s->out[t];
	return 0;
}

/* G pieces of v along its last axis (rank 3) */
static int split_gates(struct ad *a, struct value *v, int G, struct value **parts)
{
	if (G == 1) {
		parts[0] = v;
		return v ? 0 : -1;
	}
	struct node *s = v ? ad_node(a, "Split", &v, 1, G) : NULL;
	if (!s || ad_set_int(a, s, "axis", 2))
		return -1;
	for (int k = 0; k < G; k++)
		parts[k] = s->out[k];
	return 0;
}

static struct value *mul(struct ad *a, struct value *x, struct value *y)
{
	return ad_op2(a, "Mul", x, y);
}

static struct value *add(struct ad *a, struct value *x, struct value *y)
{
	return !x ? y : !y ? x : ad_op2(a, "Add", x, y);
}

/* s (1 - s): the derivative of a sigmoid from its value */
static struct value *dsig(struct ad *a, struct value *s, int dt)
{
	return mul(a, s, ad_op2(a, "Sub", ad_scalar(a, dt, 1), s));
}

/* 1 - t^2: the derivative of tanh from its value */
static struct value *dtanh(struct ad *a, struct value *t, int dt)
{
	return ad_op2(a, "Sub", ad_scalar(a, dt, 1), mul(a, t, t));
}

struct rnn_dir {
	struct value *dx, *dw, *dr, *db, *dh0, *dc0, *dp;
};

/* The node's tensors in layout 0, whatever its layout (a layout-1 node's are transposed once, so the
 * rule below reads one layout): X (T, B, I), Y (T, D, B, H), the states (D, B, H); NULL if absent. */
struct rnn_io {
	int64_t T, Bn;
	struct value *X, *Y, *dY, *dYh, *dYc, *h0, *c0, *P;
	struct value *lens; /* sequence_lens as int64, or NULL */
};

static struct value *transpose(struct ad *a, struct value *v, const int64_t *perm, size_t n)
{
	struct value *t = v ? ad_op1(a, "Transpose", v) : NULL;
	return t && !ad_set_ints(a, ad_producer(t), "perm", perm, n) ? t : NULL;
}

/* (B, ...) <-> (T or D, ...): layout 1's batch axis against layout 0's */
static const int64_t swap01[3] = {1, 0, 2};

/* One direction's gradients, in processing order. */
static int rnn_dir_grad(struct ad *a, const struct node *n, const struct rnn_io *io, int d, int reversed,
			struct rnn_dir *out)
{
	enum cell cell = cell_of(n);
	const struct rtensor *xs = ad_shape(a, n->in[0]), *rs = ad_shape(a, n->in[2]);
	int dt = xs->dtype, G = gates_of(cell);
	int64_t T = io->T, Bn = io->Bn, I = xs->dims[2], H = rs->dims[2];
	struct value *dY = io->dY, *dYh = io->dYh, *dYc = io->dYc;
	struct value *Wd = pick(a, n->in[1], d, 0), *Rd = pick(a, n->in[2], d, 0);
	struct value *Bd = n->n_in > 3 && n->in[3] ? pick(a, n->in[3], d, 0) : NULL;
	struct value *Xd = reversed ? reverse_time(a, io->X, T, io->lens) : io->X;
	struct value *Yd = pick(a, io->Y, d, 1);
	if (reversed)
		Yd = reverse_time(a, Yd, T, io->lens);
	int64_t sd[3] = {1, Bn, H}, perm[2] = {1, 0};
	struct value *h0 = io->h0 ? ad_op2(a, "Reshape", pick(a, io->h0, d, 0), ad_ints(a, sd, 3))
				  : ad_op2(a, "Expand", ad_scalar(a, dt, 0), ad_ints(a, sd, 3));
	struct value *c0 = cell != CELL_LSTM ? NULL
			   : io->c0 ? ad_op2(a, "Reshape", pick(a, io->c0, d, 0), ad_ints(a, sd, 3))
				    : ad_op2(a, "Expand", ad_scalar(a, dt, 0), ad_ints(a, sd, 3));
	/* peepholes Pi, Po, Pf, each (H): broadcast against (1, B, H) */
	struct value *Pd = io->P ? pick(a, io->P, d, 0) : NULL, *Pi = NULL, *Po = NULL, *Pf = NULL;
	if (Pd) {
		Pi = slice0(a, Pd, 0, 0, H);
		Po = slice0(a, Pd, 0, H, 2 * H);
		Pf = slice0(a, Pd, 0, 2 * H, 3 * H);
	}
	struct value *hp_parts[2] = {h0, T > 1 ? slice0(a, Yd, 0, 0, T - 1) : NULL};
	struct value *Hprev = concat(a, hp_parts, T > 1 ? 2 : 1, 0); /* (T, B, H) */
	struct value *Wt = ad_op1(a, "Transpose", Wd), *Rt = ad_op1(a, "Transpose", Rd);
	if (!Wt || !Rt || ad_set_ints(a, ad_producer(Wt), "perm", perm, 2) || ad_set_ints(a, ad_producer(Rt), "perm", perm, 2))
		return -1;
	struct value *xw = ad_op2(a, "MatMul", Xd, Wt), *hr = ad_op2(a, "MatMul", Hprev, Rt); /* (T, B, G H) */
	if (Bd) {
		xw = add(a, xw, slice0(a, Bd, 0, 0, G * H));
		hr = add(a, hr, slice0(a, Bd, 0, G * H, 2 * G * H));
	}
	/* GRU without linear_before_reset (ONNX's default): h~ reads P = r H_{t-1} times Rh */
	int lbr = (int)attr_int(n, "linear_before_reset", 0), reset_first = cell == CELL_GRU && !lbr;
	struct value *Rh = reset_first ? slice0(a, Rd, 0, 2 * H, 3 * H) : NULL, *Pall = NULL;
	/* per step, in processing order: s[k][t] */
	size_t nt = (size_t)T;
	struct value **buf = xcalloc(nt * 15 + 1, sizeof *buf);
	if (!buf)
		return ad_fail(a, "out of memory");
	struct value **dYs = buf, **hp = buf + nt, **A = buf + 2 * nt, **Bq = buf + 3 * nt, **Cq = buf + 4 * nt,
		     **Dq = buf + 5 * nt, **cs = buf + 6 * nt, **tc = buf + 7 * nt, **dgx = buf + 8 * nt,
		     **dgr = buf + 9 * nt, **Eq = buf + 10 * nt, **pg = buf + 11 * nt; /* pg: 3 nt, peepholes' */
	struct value **M = io->lens ? buf + 14 * nt : NULL;
	int rc = -1;
	struct value *gate[4], *hpart[3];
	if (dY && split_time(a, reversed ? reverse_time(a, pick(a, dY, d, 1), T, io->lens) : pick(a, dY, d, 1), T, dYs))
		goto out;
	if (split_time(a, Hprev, T, hp))
		goto out;
	if (cell == CELL_LSTM) {
		/* i, o, f, c~ for every step; then C step by step. With peepholes the gates read the
		 * cell state, so i, f (from C_{t-1}) and o (from C_t) are made step by step too. */
		if (split_gates(a, add(a, xw, hr), 4, gate))
			goto out;
		struct value *c = ad_op1(a, "Tanh", gate[3]);
		if (Pd ? split_time(a, gate[0], T, A) || split_time(a, gate[1], T, Bq) || split_time(a, gate[2], T, Cq)
		       : split_time(a, ad_op1(a, "Sigmoid", gate[0]), T, A) ||
				 split_time(a, ad_op1(a, "Sigmoid", gate[1]), T, Bq) ||
				 split_time(a, ad_op1(a, "Sigmoid", gate[2]), T, Cq))
			goto out;
		if (split_time(a, c, T, Dq))
			goto out;
		struct value *prev = c0;
		for (int64_t t = 0; t < T; t++) {
			if (Pd) {
				A[t] = ad_op1(a, "Sigmoid", add(a, A[t], mul(a, Pi, prev)));
				Cq[t] = ad_op1(a, "Sigmoid", add(a, Cq[t], mul(a, Pf, prev)));
			}
			cs[t] = add(a, mul(a, Cq[t], prev), mul(a, A[t], Dq[t]));
			if (Pd)
				Bq[t] = ad_op1(a, "Sigmoid", add(a, Bq[t], mul(a, Po, cs[t])));
			tc[t] = ad_op1(a, "Tanh", cs[t]);
			Eq[t] = prev; /* C_{t-1} */
			prev = cs[t];
		}
	} else if (cell == CELL_GRU) {
		struct value *xp[3];
		if (split_gates(a, xw, 3, xp) || split_gates(a, hr, 3, hpart))
			goto out;
		struct value *z = ad_op1(a, "Sigmoid", add(a, xp[0], hpart[0]));
		struct value *r = ad_op1(a, "Sigmoid", add(a, xp[1], hpart[1]));
		struct value *ht;
		if (reset_first) { /* tanh(x Wh^T + Wbh + (r H) Rh^T + Rbh) */
			int64_t pr[2] = {1, 0};
			struct value *Rht = ad_op1(a, "Transpose", Rh);
			if (!Rht || ad_set_ints(a, ad_producer(Rht), "perm", pr, 2))
				goto out;
			Pall = mul(a, r, Hprev);
			struct value *hh = ad_op2(a, "MatMul", Pall, Rht);
			if (Bd)
				hh = add(a, hh, slice0(a, Bd, 0, G * H + 2 * H, G * H + 3 * H));
			ht = ad_op1(a, "Tanh", add(a, xp[2], hh));
			if (split_time(a, Pall, T, Eq))
				goto out;
		} else {
			ht = ad_op1(a, "Tanh", add(a, xp[2], mul(a, r, hpart[2])));
		}
		if (split_time(a, z, T, A) || split_time(a, r, T, Bq) || split_time(a, ht, T, Cq) ||
		    (!reset_first && split_time(a, hpart[2], T, Dq)))
			goto out;
	} else {
		if (split_time(a, Yd, T, A)) /* H_t itself */
			goto out;
	}
	/* sequence_lens: M[t] (1, B, 1) is 1 while t < L_b. In processing order a row's steps past its
	 * length keep the state, so there the state's gradients pass through and the step's gates take
	 * none (nor does Y, zero there); steps before it are the plain recurrence. */
	struct value *dYhd = dYh ? ad_op2(a, "Reshape", pick(a, dYh, d, 0), ad_ints(a, sd, 3)) : NULL;
	struct value *dYcd = dYc ? ad_op2(a, "Reshape", pick(a, dYc, d, 0), ad_ints(a, sd, 3)) : NULL;
	if (M) {
		double *tv = xcalloc(nt, sizeof *tv);
		if (!tv)
			goto out;
		for (int64_t t = 0; t < T; t++)
			tv[t] = (double)t;
		int64_t td[2] = {T, 1}, md[3] = {T, Bn, 1};
		struct value *tix = ad_tensor(a, DT_INT64, 2, td, tv);
		xfree(tv);
		struct value *m = ad_cast(a, ad_op2(a, "Less", tix, io->lens), dt);
		if (split_time(a, ad_op2(a, "Reshape", m, ad_ints(a, md, 3)), T, M))
			goto out;
		/* a zero-length row's Y_h and Y_c are zeros, not its initial state: no gradient */
		int64_t zero = 0, bd[3] = {1, Bn, 1};
		struct value *some = ad_op2(a, "Reshape", ad_cast(a, ad_op2(a, "Greater", io->lens, ad_ints(a, &zero, 1)), dt),
					    ad_ints(a, bd, 3));
		dYhd = dYhd ? mul(a, dYhd, some) : NULL;
		dYcd = dYcd ? mul(a, dYcd, some) : NULL;
	}
	/* the backward recurrence, last step first */
	struct value *dHn = NULL, *dCn = NULL;
	for (int64_t t = T - 1; t >= 0; t--) {
		/* carry, carryC: the state's gradients from the later steps and the final outputs */
		struct value *carry = add(a, dHn, t == T - 1 ? dYhd : NULL), *dH = add(a, dY ? dYs[t] : NULL, carry);
		struct value *carryC = cell == CELL_LSTM ? add(a, dCn, t == T - 1 ? dYcd : NULL) : NULL, *dCin = carryC;
		if (!dH) { /* nothing flows into this step: a zero (1, B, H) */
			dH = ad_op2(a, "Expand", ad_scalar(a, dt, 0), ad_ints(a, sd, 3));
		}
		if (M) {
			dH = mul(a, dH, M[t]);
			dCin = carryC ? mul(a, carryC, M[t]) : NULL;
		}
		if (cell == CELL_LSTM) {
			/* gates' pre-activations i, o, f, c~; C_t reaches o through Po, C_{t-1} i and f
			 * through Pi and Pf */
			struct value *go = mul(a, mul(a, dH, tc[t]), dsig(a, Bq[t], dt));
			struct value *dC = add(a, mul(a, mul(a, dH, Bq[t]), dtanh(a, tc[t], dt)), dCin);
			if (Pd)
				dC = add(a, dC, mul(a, go, Po));
			struct value *g4[4] = {mul(a, mul(a, dC, Dq[t]), dsig(a, A[t], dt)), go,
					       mul(a, mul(a, dC, Eq[t]), dsig(a, Cq[t], dt)),
					       mul(a, mul(a, dC, A[t]), dtanh(a, Dq[t], dt))};
			dgx[t] = dgr[t] = concat(a, g4, 4, 2);
			dCn = mul(a, dC, Cq[t]);
			if (Pd) {
				dCn = add(a, dCn, add(a, mul(a, g4[0], Pi), mul(a, g4[2], Pf)));
				pg[t] = mul(a, g4[0], Eq[t]);
				pg[nt + t] = mul(a, go, cs[t]);
				pg[2 * nt + t] = mul(a, g4[2], Eq[t]);
			}
			dHn = ad_op2(a, "MatMul", dgr[t], Rd);
		} else if (reset_first) {
			/* z = A, r = Bq, h~ = Cq, P = Eq: dP = dgh Rh; r's gradient dP H_{t-1}; H_{t-1}'s
			 * dH z + [dgz dgr] R_zr + dP r */
			struct value *dgh = mul(a, mul(a, dH, ad_op2(a, "Sub", ad_scalar(a, dt, 1), A[t])), dtanh(a, Cq[t], dt));
			struct value *dgz = mul(a, mul(a, dH, ad_op2(a, "Sub", hp[t], Cq[t])), dsig(a, A[t], dt));
			struct value *dP = ad_op2(a, "MatMul", dgh, Rh);
			struct value *dgrr = mul(a, mul(a, dP, hp[t]), dsig(a, Bq[t], dt));
			struct value *zr[2] = {dgz, dgrr}, *gx[3] = {dgz, dgrr, dgh};
			dgx[t] = dgr[t] = concat(a, gx, 3, 2);
			dHn = add(a, add(a, mul(a, dH, A[t]), ad_op2(a, "MatMul", concat(a, zr, 2, 2), slice0(a, Rd, 0, 0, 2 * H))),
				  mul(a, dP, Bq[t]));
		} else if (cell == CELL_GRU) {
			/* z = A, r = Bq, h~ = Cq, H Rh^T + Rbh = Dq */
			struct value *dgh = mul(a, mul(a, dH, ad_op2(a, "Sub", ad_scalar(a, dt, 1), A[t])), dtanh(a, Cq[t], dt));
			struct value *dgz = mul(a, mul(a, dH, ad_op2(a, "Sub", hp[t], Cq[t])), dsig(a, A[t], dt));
			struct value *dgrr = mul(a, mul(a, dgh, Dq[t]), dsig(a, Bq[t], dt));
			struct value *gx[3] = {dgz, dgrr, dgh}, *gr[3] = {dgz, dgrr, mul(a, dgh, Bq[t])};
			dgx[t] = concat(a, gx, 3, 2);
			dgr[t] = concat(a, gr, 3, 2);
			dHn = add(a, mul(a, dH, A[t]), ad_op2(a, "MatMul", dgr[t], Rd));
		} else {
			dgx[t] = dgr[t] = mul(a, dH, dtanh(a, A[t], dt));
			dHn = ad_op2(a, "MatMul", dgr[t], Rd);
		}
		if (M) {
			struct value *keep = ad_op2(a, "Sub", ad_scalar(a, dt, 1), M[t]);
			if (carry)
				dHn = add(a, dHn, mul(a, carry, keep));
			if (carryC)
				dCn = add(a, dCn, mul(a, carryC, keep));
		}
		if (!dHn)
			goto out;
	}
	struct value *dGx = concat(a, dgx, (int)T, 0), *dGr = cell == CELL_GRU && !reset_first ? concat(a, dgr, (int)T, 0) : dGx;
	out->dx = ad_op2(a, "MatMul", dGx, Wd); /* (T, B, I) */
	if (reversed)
		out->dx = reverse_time(a, out->dx, T, io->lens);
	int64_t fx[2] = {T * Bn, G * H}, xf[2] = {T * Bn, I}, hf[2] = {T * Bn, H}, ax01[2] = {0, 1};
	struct value *gx2 = ad_op2(a, "Reshape", dGx, ad_ints(a, fx, 2)), *gr2 = ad_op2(a, "Reshape", dGr, ad_ints(a, fx, 2));
	struct value *wi[2] = {gx2, ad_op2(a, "Reshape", Xd, ad_ints(a, xf, 2))};
	struct value *ri[2] = {gr2, ad_op2(a, "Reshape", Hprev, ad_ints(a, hf, 2))};
	out->dw = ad_op(a, "Gemm", wi, 2);
	if (reset_first) { /* R's rows: z and r against H_{t-1}, h against P */
		int64_t one = 1;
		struct value *zr[2] = {slice0(a, gr2, 1, 0, 2 * H), ri[1]};
		struct value *hp2[2] = {slice0(a, gr2, 1, 2 * H, 3 * H), ad_op2(a, "Reshape", Pall, ad_ints(a, hf, 2))};
		struct value *parts[2] = {ad_op(a, "Gemm", zr, 2), ad_op(a, "Gemm", hp2, 2)};
		if (!parts[0] || !parts[1] || ad_set_int(a, ad_producer(parts[0]), "transA", one) ||
		    ad_set_int(a, ad_producer(parts[1]), "transA", one))
			goto out;
		out->dr = concat(a, parts, 2, 0);
	} else {
		out->dr = ad_op(a, "Gemm", ri, 2);
		if (out->dr && ad_set_int(a, ad_producer(out->dr), "transA", 1))
			goto out;
	}
	if (!out->dw || !out->dr || ad_set_int(a, ad_producer(out->dw), "transA", 1))
		goto out;
	struct value *bparts[2] = {ad_reduce(a, "ReduceSum", dGx, ax01, 2, 0), ad_reduce(a, "ReduceSum", dGr, ax01, 2, 0)};
	out->db = concat(a, bparts, 2, 0);
	out->dh0 = dHn;
	out->dc0 = dCn;
	if (Pd) { /* dPi, dPo, dPf: sums over steps and the batch */
		struct value *pp[3];
		for (int k = 0; k < 3; k++)
			pp[k] = ad_reduce(a, "ReduceSum", concat(a, pg + k * nt, (int)T, 0), ax01, 2, 0);
		if (!(out->dp = concat(a, pp, 3, 0)))
			goto out;
	}
	rc = out->dx && out->db ? 0 : -1;
out:
	xfree(buf);
	return rc;
}

/* The backward pass as one RecurrentGrad node (autodiff_opts.fused_rnn): its inputs are the forward
 * node's, Y and the outputs' gradients; each output goes to the input that wants it. */
static int rnn_fused_grad(struct ad *a, const struct node *n)
{
	enum cell cell = cell_of(n);
	int lstm = cell == CELL_LSTM;
	struct value *ins[13] = {0};
	for (uint32_t k = 0; k < 8 && k < n->n_in; k++)
		ins[k] = n->in[k];
	ins[8] = n->n_out > 0 && n->out[0] ? n->out[0] : ad_add_output(a, n, 0);
	ins[9] = n->n_out > 0 && n->out[0] ? ad_dy(a, n->out[0]) : NULL;
	ins[10] = n->n_out > 1 && n->out[1] ? ad_dy(a, n->out[1]) : NULL;
	ins[11] = lstm && n->n_out > 2 && n->out[2] ? ad_dy(a, n->out[2]) : NULL;
	if (!ins[8])
		return -1;
	if (!ins[9] && !ins[10] && !ins[11])
		return 0;
	if (!(ins[12] = ad_add_output(a, n, lstm ? 3 : 2))) /* the gates the forward kernel computed */
		return -1;
	/* ONNX's recurrent ops have no such output: the node becomes graphdiet's op of its name */
	struct node *fw = (struct node *)n;
	fw->domain = "graphdiet";
	if (ad_need_domain(a, "graphdiet"))
		return -1;
	fw->op = cell == CELL_LSTM ? OP_LSTM_GATES : cell == CELL_GRU ? OP_GRU_GATES : OP_RNN_GATES;
	int n_in = 13;
	while (!ins[n_in - 1])
		n_in--;
	struct node *g = ad_node(a, "RecurrentGrad", ins, n_in, lstm ? 7 : 5);
	static const char *const cells[] = {"LSTM", "GRU", "RNN"};
	const struct attr *dir = node_attr(n, "direction");
	char dirs[16] = "forward";
	if (dir && dir->type == ATTR_STRING && dir->s.n < sizeof dirs) {
		memcpy(dirs, dir->s.p, dir->s.n);
		dirs[dir->s.n] = 0;
	}
	if (!g || ad_set_str(a, g, "cell", cells[cell]) || ad_set_str(a, g, "direction", dirs) ||
	    ad_set_int(a, g, "layout", attr_int(n, "layout", 0)) ||
	    ad_set_int(a, g, "linear_before_reset", attr_int(n, "linear_before_reset", 0)) ||
	    (node_attr(n, "hidden_size") && ad_set_int(a, g, "hidden_size", attr_int(n, "hidden_size", 0))))
		return -1;
	g->domain = "graphdiet";
	g->op = OP_RECURRENT_GRAD; /* ad_node looks the type up in the default domain */
	static const int slot[7] = {0, 1, 2, 3, 5, 6, 7};
	for (int k = 0; k < (lstm ? 7 : 5); k++)
		if ((uint32_t)slot[k] < n->n_in && n->in[slot[k]] && ad_wants(a, n->in[slot[k]]) &&
		    ad_give(a, n->in[slot[k]], g->out[k]))
			return -1;
	return 0;
}

/* (D, ...) from each direction's (...) */
static struct value *stack_dirs(struct ad *a, struct value **v, int D, int unsq)
{
	struct value *p[2];
	int64_t zero = 0;
	for (int d = 0; d < D; d++)
		if (!(p[d] = unsq ? ad_op2(a, "Unsqueeze", v[d], ad_ints(a, &zero, 1)) : v[d]))
			return NULL;
	return concat(a, p, D, 0);
}

static int rnn_grad(struct ad *a, const struct node *n)
{
	const char *why = unsupported(n);
	if (why)
		return ad_fail(a, "%s", why);
	const struct rtensor *xs = ad_shape(a, n->in[0]);
	int layout = (int)attr_int(n, "layout", 0);
	if (layout != 0 && layout != 1)
		return ad_fail(a, "layout must be 0 or 1, not %d", layout);
	if (ad_dim_symbolic(a, xs->dims[layout]))
		return ad_fail(a, "the sequence length must be known to differentiate (bind it with --dim)");
	if (xs->dims[layout] < 1)
		return ad_fail(a, "an empty sequence has no gradient to give");
	if (ad_fused_rnn(a))
		return rnn_fused_grad(a, n);
	int D = attr_str_is(n, "direction", "bidirectional", 0) ? 2 : 1, rev = attr_str_is(n, "direction", "reverse", 0);
	int lstm = cell_of(n) == CELL_LSTM;
	/* layout 1: transposed into layout 0 here, the gradients of X and the states back below */
	static const int64_t y_to0[4] = {1, 2, 0, 3};
	struct value *Y = n->n_out > 0 && n->out[0] ? n->out[0] : ad_add_output(a, n, 0);
	struct value *dY = n->n_out > 0 && n->out[0] ? ad_dy(a, n->out[0]) : NULL;
	struct value *dYh = n->n_out > 1 && n->out[1] ? ad_dy(a, n->out[1]) : NULL;
	struct value *dYc = lstm && n->n_out > 2 && n->out[2] ? ad_dy(a, n->out[2]) : NULL;
	struct value *h0 = n->n_in > 5 ? n->in[5] : NULL, *c0 = lstm && n->n_in > 6 ? n->in[6] : NULL;
	struct rnn_io io = {.T = xs->dims[layout], .Bn = xs->dims[!layout], .X = n->in[0], .Y = Y, .dY = dY,
			    .dYh = dYh, .dYc = dYc, .h0 = h0, .c0 = c0, .P = lstm && n->n_in > 7 ? n->in[7] : NULL};
	if (n->n_in > 4 && n->in[4] && !(io.lens = ad_cast(a, n->in[4], DT_INT64)))
		return -1;
	if (layout) {
		io.X = transpose(a, n->in[0], swap01, 3);
		io.Y = transpose(a, Y, y_to0, 4);
		io.dY = dY ? transpose(a, dY, y_to0, 4) : NULL;
		io.dYh = dYh ? transpose(a, dYh, swap01, 3) : NULL;
		io.dYc = dYc ? transpose(a, dYc, swap01, 3) : NULL;
		io.h0 = h0 ? transpose(a, h0, swap01, 3) : NULL;
		io.c0 = c0 ? transpose(a, c0, swap01, 3) : NULL;
		if (!io.X || !io.Y || (dY && !io.dY) || (dYh && !io.dYh) || (dYc && !io.dYc) || (h0 && !io.h0) ||
		    (c0 && !io.c0))
			return -1;
	}
	struct rnn_dir dir[2];
	memset(dir, 0, sizeof dir);
	for (int d = 0; d < D; d++)
		if (rnn_dir_grad(a, n, &io, d, rev || d == 1, &dir[d]))
			return -1;
	struct value *v[2];
	if (ad_wants(a, n->in[0])) {
		struct value *dx = D == 2 ? add(a, dir[0].dx, dir[1].dx) : dir[0].dx;
		if (ad_give(a, n->in[0], layout ? transpose(a, dx, swap01, 3) : dx))
			return -1;
	}
	static const size_t offs[6] = {offsetof(struct rnn_dir, dw),  offsetof(struct rnn_dir, dr),
				       offsetof(struct rnn_dir, db),  offsetof(struct rnn_dir, dp),
				       offsetof(struct rnn_dir, dh0), offsetof(struct rnn_dir, dc0)};
	static const int slot[6] = {1, 2, 3, 7, 5, 6};
	for (int k = 0; k < 6; k++) {
		if ((uint32_t)slot[k] >= n->n_in || !n->in[slot[k]] || !ad_wants(a, n->in[slot[k]]))
			continue;
		for (int d = 0; d < D; d++)
			v[d] = *(struct value **)((char *)&dir[d] + offs[k]);
		/* h0 and c0 gradients are (1, B, H) already, stacked to (D, B, H) (layout 1: (B, D, H));
		 * the rest gain their direction axis */
		struct value *g = stack_dirs(a, v, D, k < 4);
		if (ad_give(a, n->in[slot[k]], k >= 4 && layout ? transpose(a, g, swap01, 3) : g))
			return -1;
	}
	return 0;
}

/* ---- RecurrentGrad: the backward recurrence as one kernel (domain graphdiet) ----
 *
 * RecurrentGrad(X, W, R, B, sequence_lens, initial_h, initial_c, P, Y, dY, dY_h, dY_c)
 *   -> (dX, dW, dR, dB, dinitial_h[, dinitial_c, dP]), attributes cell ("LSTM", "GRU", "RNN") and
 * the forward node's direction, layout, hidden_size, linear_before_reset. Y is the forward node's
 * (H_{t-1} is Y one step back, or initial_h); dY, dY_h, dY_c may be omitted (no gradient flows
 * there). Outputs are in X's dtype and the shapes of their inputs (dB, dinitial_h, dinitial_c and
 * dP whether or not those are given). Per direction, every X row (t, b) past its length takes no
 * gradient; the others are visited in processing order s (t = s forward, L_b - 1 - s reverse):
 *   1. the gates, recomputed: X W^T for all steps as one product, H_{t-1} R^T as one more (GRU
 *      without linear_before_reset: H_{t-1} Rzr^T, then (r H_{t-1}) Rh^T), activations fused;
 *      LSTM's cell states (and peepholes) in one elementwise pass per batch row;
 *   2. the backward recurrence, last step first: the gates' derivatives of a step in one loop
 *      over the batch, then one product by R (GRU without linear_before_reset: by Rh, then Rzr)
 *      giving dH_{t-1};
 *   3. dW = dG^T X, dR = dG^T H_{t-1}, dX += dG W: one product each over all steps; dB the
 *      column sums of dG (in double, in row order); dP the peepholes' sums, step by step.
 * dG (T B, G H) is kept in X's row order, zero past each row's length, so the three products read
 * X and H_{t-1} as they lie. The kernel's buffers are workspace (exec_scratch): about
 * (3 G + 4) T B H elements a direction at most, counted apart from the tensors as the executor
 * counts every kernel's. Deterministic: BLAS products and sums in a fixed order. */

/* One direction's state for the typed loops. Rows of (T B, ...) buffers are X's rows. */
struct rg_dir {
	enum cell cell;
	int lbr, layout, D, d, rev;
	int64_t T, Bn, H, GH, gs; /* gs: G's row stride, G H (+ H for E or C) */
	const int64_t *len;
	int64_t *xr, *yr; /* (Bn): this step's X row and Y row of each batch row, -1 past its length */
	void *G;          /* (T B, gs): the gates' values (LSTM i, o, f, c~; GRU z, r, h~; RNN H_t), then */
	void *E;          /* G + G H: GRU's r H_{t-1} (linear_before_reset 0) or H_{t-1} Rh^T + Rbh (1) */
	void *C, *Cp;     /* G + G H: LSTM's C_t; (T B, H): C_{t-1} */
	void *hp;         /* (T B, H): H_{t-1} */
	void *dG, *dGrh;  /* (T B, G H): the gates' pre-activation gradients; (T B, H) GRU lbr's dgh r */
	void *S, *dHs, *dPs, *Qs, *dHc, *dCc; /* a step's (Bn, G H) and (Bn, H) */
	const void *p, *rbh, *dY;
	double *dp;       /* (3 H): the peepholes' gradients, summed */
};

/* t of processing step s for batch row b (s < len[b]) */
static int64_t rg_t(const struct rg_dir *g, int64_t s, int64_t b)
{
	return g->rev ? g->len[b] - 1 - s : s;
}

static void rg_rows(struct rg_dir *g, int64_t s)
{
	for (int64_t b = 0; b < g->Bn; b++) {
		int on = s < g->len[b];
		g->xr[b] = on ? x_row(g->layout, g->T, g->Bn, rg_t(g, s, b), b) : -1;
		g->yr[b] = on ? y_row(g->layout, g->T, g->D, g->Bn, rg_t(g, s, b), g->d, b) : -1;
	}
}

#define RG_TYPED(real, sfx, SIG, TANH)                                                                                 \
	/* a row's LSTM cell over its pre-activations gt, in place (restrict parameters: see lstm_cell_) */    \
	static inline __attribute__((always_inline)) void lstm_act_##sfx(                                      \
		int64_t H, const real *restrict cprev, const real *restrict pi, const real *restrict po,         \
		const real *restrict pf, real *restrict gt, real *restrict cp, real *restrict cc)                \
	{                                                                                                      \
		for (int64_t k = 0; k < H; k++) {                                                              \
			real c = cprev[k];                                                                     \
			real i = SIG(gt[k] + pi[k] * c), f = SIG(gt[2 * H + k] + pf[k] * c);                   \
			real cg = TANH(gt[3 * H + k]), cn = f * c + i * cg;                                    \
			gt[k] = i, gt[2 * H + k] = f, gt[3 * H + k] = cg;                                      \
			gt[H + k] = SIG(gt[H + k] + po[k] * cn);                                               \
			cp[k] = c, cc[k] = cn;                                                                 \
		}                                                                                              \
	}                                                                                                      \
	/* phase 0: RNN's tanh, GRU's z and r (then h~, or r H_{t-1}); 1: GRU lbr 0's h~; LSTM: its cells */         \
	RNN_VEC VM_CLONES static void rg_act_##sfx(struct rg_dir *g, int phase, const void *c0)                               \
	{                                                                                                              \
		const int64_t H = g->H, gs = g->gs;                                                                    \
		const real *pi = g->p, *po = pi + H, *pf = po + H, *rbh = g->rbh;                                     \
		for (int64_t b = 0; b < g->Bn; b++) {                                                                  \
			const real *cprev = (const real *)c0 + b * H;                                                  \
			for (int64_t s = 0; s < g->len[b]; s++) {                                                      \
				int64_t row = x_row(g->layout, g->T, g->Bn, rg_t(g, s, b), b);                         \
				real *restrict gt = (real *)g->G + row * gs, *restrict e = (real *)g->E + row * gs;    \
				const real *restrict hp = (const real *)g->hp + row * H;                               \
				if (g->cell == CELL_LSTM) {                                                            \
					real *restrict cc = (real *)g->C + row * gs, *restrict cp = (real *)g->Cp + row * H; \
					lstm_act_##sfx(H, cprev, pi, po, pf, gt, cp, cc);                              \
					cprev = cc;                                                                    \
				} else if (g->cell == CELL_RNN) {                                                      \
					for (int64_t k = 0; k < H; k++)                                                \
						gt[k] = TANH(gt[k]);                                                   \
				} else if (phase == 1) {                                                               \
					for (int64_t k = 0; k < H; k++)                                                \
						gt[2 * H + k] = TANH(gt[2 * H + k] + rbh[k]);                          \
				} else {                                                                               \
					for (int64_t k = 0; k < 2 * H; k++)                                            \
						gt[k] = SIG(gt[k]);                                                    \
					for (int64_t k = 0; k < H; k++) {                                              \
						if (g->lbr) {                                                          \
							e[k] += rbh[k];                                                \
							gt[2 * H + k] = TANH(gt[2 * H + k] + gt[H + k] * e[k]);        \
						} else {                                                               \
							e[k] = gt[H + k] * hp[k];                                      \
						}                                                                      \
					}                                                                              \
				}                                                                              \
			}                                                                                      \
		}                                                                                              \
	}                                                                                                      \
	/* a row's LSTM gate gradients into S and dC_{t-1} into dC (functions of their own with restrict      \
	 * parameters, as lstm_cell_: GCC vectorises them only so) */                                          \
	static inline __attribute__((always_inline)) void lstm_back_##sfx(                                     \
		int64_t H, const real *restrict gt, const real *restrict cc, const real *restrict cp,             \
		const real *restrict dHs, const real *restrict pi, const real *restrict po, const real *restrict pf, \
		real *restrict dC, real *restrict S)                                                           \
	{                                                                                                      \
		for (int64_t k = 0; k < H; k++) {                                                              \
			real i = gt[k], o = gt[H + k], f = gt[2 * H + k], cg = gt[3 * H + k];                  \
			real tc = TANH(cc[k]), go = dHs[k] * tc * o * (1 - o);                                 \
			real dc2 = dHs[k] * o * (1 - tc * tc) + dC[k] + go * po[k];                            \
			real di = dc2 * cg * i * (1 - i), df = dc2 * cp[k] * f * (1 - f);                      \
			S[k] = di, S[H + k] = go, S[2 * H + k] = df;                                           \
			S[3 * H + k] = dc2 * i * (1 - cg * cg);                                                \
			dC[k] = dc2 * f + di * pi[k] + df * pf[k];                                             \
		}                                                                                              \
	}                                                                                                      \
	static inline __attribute__((always_inline)) void gru_back_##sfx(                                      \
		int64_t H, const real *restrict gt, const real *restrict hp, const real *restrict dHs,           \
		real *restrict S)                                                                              \
	{                                                                                                      \
		for (int64_t k = 0; k < H; k++) {                                                              \
			real z = gt[k], hh = gt[2 * H + k];                                                    \
			S[k] = dHs[k] * (hp[k] - hh) * z * (1 - z);                                            \
			S[2 * H + k] = dHs[k] * (1 - z) * (1 - hh * hh);                                       \
		}                                                                                              \
	}                                                                                                      \
	static inline __attribute__((always_inline)) void gru_back_lbr_##sfx(                                  \
		int64_t H, const real *restrict gt, const real *restrict hp, const real *restrict e,             \
		const real *restrict dHs, real *restrict S, real *restrict dr, real *restrict dx)                \
	{                                                                                                      \
		for (int64_t k = 0; k < H; k++) {                                                              \
			real z = gt[k], r = gt[H + k], hh = gt[2 * H + k];                                     \
			real dgh = dHs[k] * (1 - z) * (1 - hh * hh);                                           \
			S[k] = dHs[k] * (hp[k] - hh) * z * (1 - z);                                            \
			S[H + k] = dgh * e[k] * r * (1 - r);                                                   \
			S[2 * H + k] = dr[k] = dgh * r;                                                        \
			dx[2 * H + k] = dgh;                                                                   \
		}                                                                                              \
	}                                                                                                      \
	/* a step's gate gradients into S (zero rows past their length); phase 1: GRU lbr 0's dgr from dPs */ \
	RNN_VEC VM_CLONES static void rg_back_##sfx(struct rg_dir *g, int phase)                                      \
	{                                                                                                      \
		const int64_t H = g->H, GH = g->GH;                                                            \
		const real *pi = g->p, *po = pi + H, *pf = po + H;                                            \
		for (int64_t b = 0; b < g->Bn; b++) {                                                          \
			real *restrict S = (real *)g->S + b * GH, *restrict dHs = (real *)g->dHs + b * H;      \
			int64_t row = g->xr[b];                                                                \
			if (row < 0) {                                                                         \
				if (!phase)                                                                    \
					memset(S, 0, (size_t)GH * sizeof(real));                               \
				continue;                                                                      \
			}                                                                                      \
			const real *restrict gt = (const real *)g->G + row * g->gs;                            \
			const real *restrict hp = (const real *)g->hp + row * H;                               \
			if (phase) {                                                                           \
				const real *restrict dP = (const real *)g->dPs + b * H;                        \
				for (int64_t k = 0; k < H; k++)                                                \
					S[H + k] = dP[k] * hp[k] * gt[H + k] * (1 - gt[H + k]);               \
				continue;                                                                      \
			}                                                                                      \
			const real *restrict dc = (const real *)g->dHc + b * H;                                \
			const real *restrict dy = g->dY ? (const real *)g->dY + g->yr[b] * H : NULL;          \
			for (int64_t k = 0; k < H; k++)                                                        \
				dHs[k] = dc[k] + (dy ? dy[k] : 0);                                             \
			if (g->cell == CELL_LSTM) {                                                            \
				const real *restrict cc = (const real *)g->C + row * g->gs;                    \
				const real *restrict cp = (const real *)g->Cp + row * H;                       \
				real *restrict dC = (real *)g->dCc + b * H;                                    \
				lstm_back_##sfx(H, gt, cc, cp, dHs, pi, po, pf, dC, S);                        \
				for (int64_t k = 0; g->dp && k < H; k++) {                                     \
					g->dp[k] += (double)(S[k] * cp[k]);                                    \
					g->dp[H + k] += (double)(S[H + k] * cc[k]);                            \
					g->dp[2 * H + k] += (double)(S[2 * H + k] * cp[k]);                    \
				}                                                                              \
			} else if (g->cell == CELL_RNN) {                                                      \
				for (int64_t k = 0; k < H; k++)                                                \
					S[k] = dHs[k] * (1 - gt[k] * gt[k]);                                   \
			} else {                                                                               \
				const real *restrict e = (const real *)g->E + row * g->gs;                     \
				real *restrict dx = (real *)g->dG + row * GH;                                  \
				if (g->lbr)                                                                    \
					gru_back_lbr_##sfx(H, gt, hp, e, dHs, S, (real *)g->dGrh + row * H, dx); \
				else                                                                           \
					gru_back_##sfx(H, gt, hp, dHs, S);                                     \
			}                                                                                      \
		}                                                                                              \
	}                                                                                                      \
	/* after the step's product Qs = S R: dH_{t-1} into dHc, S into dG */                                \
	RNN_VEC static void rg_carry_##sfx(struct rg_dir *g)                                                          \
	{                                                                                                      \
		const int64_t H = g->H, GH = g->GH;                                                            \
		for (int64_t b = 0; b < g->Bn; b++) {                                                          \
			int64_t row = g->xr[b];                                                                \
			if (row < 0)                                                                           \
				continue;                                                                      \
			real *restrict dc = (real *)g->dHc + b * H;                                            \
			const real *restrict q = (const real *)g->Qs + b * H, *restrict dh = (const real *)g->dHs + b * H; \
			const real *restrict S = (const real *)g->S + b * GH, *restrict gt = (const real *)g->G + row * g->gs; \
			real *restrict dx = (real *)g->dG + row * GH;                                          \
			if (g->cell == CELL_GRU) {                                                             \
				const real *restrict dP = (const real *)g->dPs + b * H;                        \
				for (int64_t k = 0; k < H; k++)                                                \
					dc[k] = q[k] + dh[k] * gt[k] + (g->lbr ? 0 : dP[k] * gt[H + k]);       \
			} else {                                                                               \
				memcpy(dc, q, (size_t)H * sizeof(real));                                       \
			}                                                                                      \
			memcpy(dx, S, (size_t)(g->cell == CELL_GRU && g->lbr ? 2 * H : GH) * sizeof(real));   \
		}                                                                                              \
	}

RG_TYPED(float, f32, sig_f32, vm_tanhf)
RG_TYPED(double, f64, sig_f64, tanh)

/* out (n) = column sums of a's rows (rows, n; lda) in row order, accumulated in double */
static void rg_colsum(int dt, void *out, const void *a, int64_t rows, int64_t n, int64_t lda, double *acc)
{
	memset(acc, 0, (size_t)n * sizeof *acc);
	for (int64_t i = 0; i < rows; i++)
		for (int64_t j = 0; j < n; j++)
			acc[j] += dt == DT_FLOAT ? ((const float *)a)[i * lda + j] : ((const double *)a)[i * lda + j];
	for (int64_t j = 0; j < n; j++)
		if (dt == DT_FLOAT)
			((float *)out)[j] = (float)acc[j];
		else
			((double *)out)[j] = acc[j];
}

static enum cell grad_cell(const struct node *n)
{
	return attr_str_is(n, "cell", "LSTM", 0) ? CELL_LSTM : attr_str_is(n, "cell", "GRU", 0) ? CELL_GRU : CELL_RNN;
}

struct rg_bufs {
	void *p[18];
	size_t bytes[18];
	int n;
};

static void *rg_take(struct exec *x, struct rg_bufs *m, size_t bytes)
{
	void *p = exec_scratch(x, bytes + 1);
	m->bytes[m->n] = bytes + 1;
	return m->p[m->n++] = p;
}

static void rg_free(struct exec *x, struct rg_bufs *m)
{
	for (int i = 0; i < m->n; i++)
		if (m->p[i])
			exec_scratch_free(x, m->p[i], m->bytes[i]);
}

static int recurrent_grad_run(struct exec *x, const struct node *n, struct rtensor *const *in,
			      struct rtensor *const *out)
{
	if (!attr_str_is(n, "cell", "LSTM", 0) && !attr_str_is(n, "cell", "GRU", 0) && !attr_str_is(n, "cell", "RNN", 0))
		return exec_fail(x, "attribute cell must be LSTM, GRU or RNN");
	enum cell cell = grad_cell(n);
	struct rnn_in ri;
	if (n->n_in < 9 || !in[8])
		return exec_fail(x, "Y (input 8) is required");
	if (rnn_check(x, n, cell, in, &ri))
		return exec_status(x);
	const struct rtensor *Y = in[8], *dYt = n->n_in > 9 ? in[9] : NULL, *dYht = n->n_in > 10 ? in[10] : NULL;
	const struct rtensor *dYct = cell == CELL_LSTM && n->n_in > 11 ? in[11] : NULL;
	int D = ri.D, layout = ri.layout, dt = ri.X->dtype;
	int64_t T = ri.T, Bn = ri.Bn, I = ri.I, H = ri.H, GH = ri.GH, N = T * Bn;
	if (Y->numel != T * D * Bn * H || (dYt && dYt->numel != Y->numel) || (dYht && dYht->numel != D * Bn * H) ||
	    (dYct && dYct->numel != D * Bn * H))
		return exec_fail(x, "Y and dY must have %lld elements, dY_h and dY_c %lld", (long long)(T * D * Bn * H),
				 (long long)(D * Bn * H));
	if (N > INT32_MAX || GH > INT32_MAX || I > INT32_MAX)
		return exec_fail(x, "a product's dimension exceeds what BLAS indexes (2^31)");
	int64_t gs = GH + (cell == CELL_RNN ? 0 : H);
	const struct rtensor *sv = n->n_in > 12 ? in[12] : NULL; /* the forward's gates, or recompute them */
	if (sv && sv->numel != D * N * gs)
		return exec_fail(x, "gates (input 12) must be %d x %lld x %lld", D, (long long)N, (long long)gs);
	int64_t sd[3] = {D, Bn, H}, bd[2] = {D, 2 * GH}, pd[2] = {D, 3 * H};
	if (layout)
		sd[0] = Bn, sd[1] = D;
	void *dx = exec_alloc(x, out[0], dt, 3, ri.X->dims), *dw = exec_alloc(x, out[1], dt, 3, ri.W->dims);
	void *dr = exec_alloc(x, out[2], dt, 3, ri.R->dims);
	void *db = n->n_out > 3 && n->out[3] ? exec_alloc(x, out[3], dt, 2, bd) : NULL;
	void *dh0 = n->n_out > 4 && n->out[4] ? exec_alloc(x, out[4], dt, 3, sd) : NULL;
	void *dc0 = cell == CELL_LSTM && n->n_out > 5 && n->out[5] ? exec_alloc(x, out[5], dt, 3, sd) : NULL;
	void *dpo = cell == CELL_LSTM && n->n_out > 6 && n->out[6] ? exec_alloc(x, out[6], dt, 2, pd) : NULL;
	if (exec_status(x) || !dx || !dw || !dr)
		return exec_status(x);
	size_t es = dtype_size(dt);
	void *conv[11] = {0};
	int oom = 0;
	const char *w = as_dtype(ri.W, dt, &conv[0], &oom), *r = as_dtype(ri.R, dt, &conv[1], &oom);
	const char *bias = as_dtype(ri.Bs, dt, &conv[2], &oom), *ih = as_dtype(ri.h0, dt, &conv[3], &oom);
	const char *ic = as_dtype(ri.c0, dt, &conv[4], &oom), *peep = as_dtype(ri.P, dt, &conv[5], &oom);
	const char *y = as_dtype(Y, dt, &conv[6], &oom), *dY = as_dtype(dYt, dt, &conv[7], &oom);
	const char *dYh = as_dtype(dYht, dt, &conv[8], &oom), *dYc = as_dtype(dYct, dt, &conv[9], &oom);
	const char *saved = as_dtype(sv, dt, &conv[10], &oom);
	struct rg_bufs m = {0};
	int lstm = cell == CELL_LSTM, gru = cell == CELL_GRU;
	struct rg_dir g = {.cell = cell, .lbr = ri.lbr, .layout = layout, .D = D, .T = T, .Bn = Bn, .H = H, .GH = GH,
			   .gs = gs, .dY = dY};
	int64_t *len = rg_take(x, &m, (size_t)(3 * Bn) * sizeof *len);
	g.G = saved ? NULL : rg_take(x, &m, (size_t)(N * gs) * es);
	g.dG = rg_take(x, &m, (size_t)(N * GH) * es);
	g.hp = rg_take(x, &m, (size_t)(N * H) * es);
	g.dGrh = gru && ri.lbr ? rg_take(x, &m, (size_t)(N * H) * es) : NULL;
	g.Cp = lstm ? rg_take(x, &m, (size_t)(N * H) * es) : NULL;
	g.S = rg_take(x, &m, (size_t)(Bn * GH) * es);
	char *st = rg_take(x, &m, (size_t)(6 * Bn * H + 4 * H) * es); /* dHs dPs Qs dHc dCc c0, zeros */
	double *acc = rg_take(x, &m, (size_t)(2 * GH + 3 * H) * sizeof *acc);
	int bad = oom || (sv && !saved);
	for (int i = 0; i < m.n; i++)
		bad |= !m.p[i];
	if (bad) {
		rg_free(x, &m);
		for (int i = 0; i < 11; i++)
			xfree(conv[i]);
		return exec_fail(x, "out of memory");
	}
	g.dHs = st, g.dPs = st + (size_t)(Bn * H) * es, g.Qs = st + (size_t)(2 * Bn * H) * es;
	g.dHc = st + (size_t)(3 * Bn * H) * es, g.dCc = st + (size_t)(4 * Bn * H) * es;
	char *c0 = st + (size_t)(5 * Bn * H) * es, *zeros = st + (size_t)(6 * Bn * H) * es;
	g.len = len, g.xr = len + Bn, g.yr = len + 2 * Bn;
	for (int64_t b = 0; b < Bn; b++)
		len[b] = ri.lens ? rt_get_i(ri.lens, b) : T;
	void (*act)(struct rg_dir *, int, const void *) = dt == DT_FLOAT ? rg_act_f32 : rg_act_f64;
	void (*back)(struct rg_dir *, int) = dt == DT_FLOAT ? rg_back_f32 : rg_back_f64;
	void (*carry)(struct rg_dir *) = dt == DT_FLOAT ? rg_carry_f32 : rg_carry_f64;
	for (int d = 0; d < D; d++) {
		const char *wd = w + (size_t)(d * GH * I) * es, *rd = r + (size_t)(d * GH * H) * es;
		const char *bdd = bias ? bias + (size_t)(d * 2 * GH) * es : NULL;
		g.d = d, g.rev = ri.rev || d == 1;
		if (saved)
			g.G = (char *)saved + (size_t)(d * N * gs) * es;
		g.E = g.C = (char *)g.G + (size_t)GH * es;
		g.p = peep ? peep + (size_t)(d * 3 * H) * es : zeros;
		g.rbh = bdd && gru ? bdd + (size_t)(GH + 2 * H) * es : zeros;
		g.dp = dpo ? acc + 2 * GH : NULL;
		if (g.dp)
			memset(g.dp, 0, (size_t)(3 * H) * sizeof *g.dp);
		/* H_{t-1} of every row; the initial states of the direction */
		for (int64_t b = 0; b < Bn; b++) {
			size_t at = (size_t)(state_row(layout, D, Bn, d, b) * H) * es, row = (size_t)(b * H) * es;
			const char *h0b = ih ? ih + at : zeros;
			for (int64_t s = 0; s < len[b]; s++) {
				int64_t xrow = x_row(layout, T, Bn, rg_t(&g, s, b), b);
				const char *src = s ? y + (size_t)(y_row(layout, T, D, Bn, rg_t(&g, s - 1, b), d, b) * H) * es : h0b;
				memcpy((char *)g.hp + (size_t)(xrow * H) * es, src, (size_t)H * es);
			}
			memcpy(c0 + row, ic ? ic + at : zeros, (size_t)H * es);
			int some = len[b] > 0;
			memcpy((char *)g.dHc + row, some && dYh ? dYh + at : zeros, (size_t)H * es);
			memcpy((char *)g.dCc + row, some && dYc ? dYc + at : zeros, (size_t)H * es);
		}
		/* 1. the gates: the forward's, or recomputed */
		if (saved && lstm) { /* C_{t-1} */
			for (int64_t b = 0; b < Bn; b++)
				for (int64_t s = 0; s < len[b]; s++) {
					int64_t xrow = x_row(layout, T, Bn, rg_t(&g, s, b), b);
					const char *src = s ? (char *)g.C + (size_t)(x_row(layout, T, Bn, rg_t(&g, s - 1, b), b) * gs) * es
							    : c0 + (size_t)(b * H) * es;
					memcpy((char *)g.Cp + (size_t)(xrow * H) * es, src, (size_t)H * es);
				}
		} else if (!saved) {
			rg_gemm(dt, 0, 1, N, GH, I, ri.X->data, I, wd, I, 0, g.G, gs);
			if (bdd)
				(dt == DT_FLOAT ? bias_rows_f32 : bias_rows_f64)(g.G, N, GH, gs, bdd, bdd + (size_t)GH * es,
										 gru ? 2 * H : GH);
			rg_gemm(dt, 0, 1, N, gru ? 2 * H : GH, H, g.hp, H, rd, H, 1, g.G, gs);
			if (gru && ri.lbr)
				rg_gemm(dt, 0, 1, N, H, H, g.hp, H, rd + (size_t)(2 * H * H) * es, H, 0, g.E, gs);
			act(&g, 0, c0);
			if (gru && !ri.lbr) {
				rg_gemm(dt, 0, 1, N, H, H, g.E, gs, rd + (size_t)(2 * H * H) * es, H, 1,
					(char *)g.G + (size_t)(2 * H) * es, gs);
				act(&g, 1, c0);
			}
		}
		/* 2. the backward recurrence */
		struct steps sr, sh = {0}; /* S R (S Rzr); GRU lbr 0's dgh Rh */
		if (steps_init(x, &sr, dt, Bn, H, gru && !ri.lbr ? 2 * H : GH, 0, rd, H) ||
		    (gru && !ri.lbr && steps_init(x, &sh, dt, Bn, H, H, 0, rd + (size_t)(2 * H * H) * es, H))) {
			steps_free(x, &sr);
			rg_free(x, &m);
			for (int i = 0; i < 11; i++)
				xfree(conv[i]);
			return exec_status(x);
		}
		for (int64_t s = T - 1; s >= 0; s--) {
			rg_rows(&g, s);
			back(&g, 0);
			if (gru && !ri.lbr) { /* dP = dgh Rh, then r's gradient, then by Rzr */
				steps_gemm(&sh, (char *)g.S + (size_t)(2 * H) * es, GH, g.dPs, H);
				back(&g, 1);
			}
			steps_gemm(&sr, g.S, GH, g.Qs, H);
			carry(&g);
		}
		steps_free(x, &sr);
		steps_free(x, &sh);
		/* 3. the products over all steps, the sums */
		rg_gemm(dt, 1, 0, GH, I, N, g.dG, GH, ri.X->data, I, 0, (char *)dw + (size_t)(d * GH * I) * es, I);
		char *drd = (char *)dr + (size_t)(d * GH * H) * es;
		if (gru) { /* rows z, r against H_{t-1}; h against H_{t-1} (lbr: dgh r) or r H_{t-1} */
			rg_gemm(dt, 1, 0, 2 * H, H, N, g.dG, GH, g.hp, H, 0, drd, H);
			if (ri.lbr)
				rg_gemm(dt, 1, 0, H, H, N, g.dGrh, H, g.hp, H, 0, drd + (size_t)(2 * H * H) * es, H);
			else
				rg_gemm(dt, 1, 0, H, H, N, (char *)g.dG + (size_t)(2 * H) * es, GH, g.E, gs, 0,
					drd + (size_t)(2 * H * H) * es, H);
		} else {
			rg_gemm(dt, 1, 0, GH, H, N, g.dG, GH, g.hp, H, 0, drd, H);
		}
		rg_gemm(dt, 0, 0, N, I, GH, g.dG, GH, wd, I, d ? 1 : 0, dx, I);
		if (db) {
			char *dbd = (char *)db + (size_t)(d * 2 * GH) * es;
			rg_colsum(dt, dbd, g.dG, N, GH, GH, acc);
			memcpy(dbd + (size_t)GH * es, dbd, (size_t)GH * es);
			if (gru && ri.lbr)
				rg_colsum(dt, dbd + (size_t)(GH + 2 * H) * es, g.dGrh, N, H, H, acc);
		}
		for (int64_t b = 0; b < Bn; b++) {
			size_t at = (size_t)(state_row(layout, D, Bn, d, b) * H) * es, row = (size_t)(b * H) * es;
			if (dh0)
				memcpy((char *)dh0 + at, (char *)g.dHc + row, (size_t)H * es);
			if (dc0)
				memcpy((char *)dc0 + at, (char *)g.dCc + row, (size_t)H * es);
		}
		for (int64_t k = 0; dpo && k < 3 * H; k++)
			if (dt == DT_FLOAT)
				((float *)dpo)[d * 3 * H + k] = (float)g.dp[k];
			else
				((double *)dpo)[d * 3 * H + k] = g.dp[k];
	}
	rg_free(x, &m);
	for (int i = 0; i < 11; i++)
		xfree(conv[i]);
	return 0;
}

/* per direction: dW, dR and dX, one product each over all steps, the step's product by R, about 30
 * elementwise operations per gate element, and without the forward's gates (input 12) their two
 * products again */
static void recurrent_grad_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
				uint64_t *flops, uint64_t *bytes)
{
	(void)out;
	(void)bytes;
	int layout = (int)attr_int(n, "layout", 0), G = gates_of(grad_cell(n));
	uint64_t T = (uint64_t)in[0]->dims[layout], B = (uint64_t)in[0]->dims[!layout], I = (uint64_t)in[0]->dims[2];
	uint64_t D = (uint64_t)in[1]->dims[0], H = (uint64_t)in[2]->dims[2];
	uint64_t products = n->n_in > 12 && in[12] ? 2 * I + 2 * H : 3 * I + 3 * H;
	*flops = D * T * B * (uint64_t)G * H * (2 * products + 30);
}

const struct op_impl op_recurrent_grad = {.run = recurrent_grad_run, .cost = recurrent_grad_cost,
					  .recompute = RC_EXPENSIVE, .nodiff = ~0u};

/* per step and direction: the products by W and R, and about 10 elementwise ops per gate element */
static void rnn_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		     uint64_t *bytes)
{
	(void)out;
	(void)bytes;
	int G = gates_of(cell_of(n));
	uint64_t T = (uint64_t)in[0]->dims[0], B = (uint64_t)in[0]->dims[1], I = (uint64_t)in[0]->dims[2];
	uint64_t D = (uint64_t)in[1]->dims[0], H = (uint64_t)in[2]->dims[2];
	*flops = D * T * B * (uint64_t)G * H * (2 * (I + H) + 10);
}

const struct op_impl op_lstm = {.run = rnn_run, .cost = rnn_cost, .grad = rnn_grad, .recompute = RC_EXPENSIVE,
				.nodiff = 1u << 4};
const struct op_impl op_gru = {.run = rnn_run, .cost = rnn_cost, .grad = rnn_grad, .recompute = RC_EXPENSIVE,
			       .nodiff = 1u << 4};
const struct op_impl op_rnn = {.run = rnn_run, .cost = rnn_cost, .grad = rnn_grad, .recompute = RC_EXPENSIVE,
			       .nodiff = 1u << 4};
