/* conv_wgrad.c - a weight gradient's Conv (conv.c's weight_grad) as one product per block of
 * channels, float64.
 *
 * weight_grad runs dW (M, C, kh, kw) as Conv(X^T, dY^T) transposed: a Conv whose "image" a is
 * (C, N, H, W), whose "kernel" w is (M, N, OH, OW), about as large as the image, and whose output
 * is (C, M, kh, kw), a few positions. In this Conv's own terms (n' = C images of c' = N channels,
 * m' = M kernels of kh' x kw' = OH x OW taps, oh' x ow' = kh x kw positions) it is the standard
 * im2col weight gradient, one product:
 *   Y^T (m', n' oh' ow') = W (m', c' kh' kw') x col (c' kh' kw', n' oh' ow')
 *   col[(c', i, j)][(n', oy, ox)] = a[n', c', oy sh + i dh - pt, ox sw + j dw - pl], 0 outside,
 * with K = N OH OW, the batch's positions: the product is long and wide where im2col makes one
 * thin product per image n' (m' x K x oh' ow'). It is float64's only: on this
 * project's Zen 4 the direct kernel takes float32's weight gradients at ResNet-50's small planes
 * near the FMA peak (512 channels on a 3 x 3 map, batch 8: 3.4-3.6 ms, best of 40; this product
 * 4.3-4.7 ms), and where the direct kernel declines float32 (fewer than 16 output channels) the
 * product's sums, in another order, moved the zoo's efficientnet_b0 from 9.5e-5 to 1.01e-4 of
 * PyTorch's gradients, past zoo/gradients_match_pytorch_with_dropout_on's 1e-4.
 * The columns are gathered for a block of images n' at a time, at most WGRAD_COL bytes of them,
 * and each block is one GEMM into its columns of Y^T: Y^T is (M, C, kh, kw), the layout
 * weight_grad's Transpose gives, so it is written as it is where the executor lets the Conv write
 * its output swapped, else copied out to (C, M, kh, kw). w, when it is a view
 * (dY^T, a folded Transpose), is copied in order once: dY regrouped (N, M, P) -> (M, N P).
 *
 * Every element of Y is one GEMM's dot product over the whole K; the blocks follow from the sizes
 * alone and blas.c's cuts never from --threads, so the bits are the same at any thread count. */
#include "conv.h"
#include "kernel.h"
#include "blas.h"

#include <string.h>

#define WGRAD_COL (4u << 20) /* bytes of gathered columns a block, at most */

struct wgrad_job {
	const struct conv_geom *g;
	const uint8_t *a;
	int64_t sn, sc; /* a's strides (elements) of its first two axes: n' and c' */
	uint8_t *col;
	int64_t n0, nb; /* the block: images [n0, n0 + nb) */
};

/* Rows of col for channels [c0, c1) of the block: a piece of kernel_for. */
static void gather_rows(void *arg, int64_t c0, int64_t c1)
{
	const struct wgrad_job *j = arg;
	const struct conv_geom *g = j->g;
	int64_t p = g->oh * g->ow, cols = j->nb * p;
	for (int64_t c = c0; c < c1; c++)
		for (int64_t i = 0; i < g->kh; i++)
			for (int64_t jj = 0; jj < g->kw; jj++) {
				double *row = (double *)j->col + ((c * g->kh + i) * g->kw + jj) * cols;
				for (int64_t n = 0; n < j->nb; n++) {
					const double *src = (const double *)j->a + (j->n0 + n) * j->sn + c * j->sc;
					for (int64_t oy = 0; oy < g->oh; oy++) {
						double *o = row + n * p + oy * g->ow;
						int64_t r = oy * g->sh + i * g->dh - g->pt;
						if (r < 0 || r >= g->h) {
							memset(o, 0, (size_t)g->ow * sizeof(double));
							continue;
						}
						for (int64_t ox = 0; ox < g->ow; ox++) {
							int64_t q = ox * g->sw + jj * g->dw - g->pl;
							o[ox] = q < 0 || q >= g->w ? 0.0 : src[r * g->w + q];
						}
					}
				}
			}
}

int conv_wgrad_fits(const struct conv_geom *g)
{
	/* a kernel at least a quarter of the image, a few positions, and K = c kh kw (a weight
	 * gradient's N OH OW) of 512 or more: float64 at K = 72 (512 channels on a 3 x 3 map, batch 8)
	 * took 25-31 ms against im2col's 21-23, at 288 about the same, at 1152 and up 0.6-0.7x */
	return g->group == 1 && g->oh * g->ow <= 64 && 4 * g->kh * g->kw >= g->h * g->w && g->c * g->kh * g->kw >= 512;
}

int conv_wgrad(struct exec *x, const struct rtensor *a, const struct rtensor *w, const struct conv_geom *g,
	       uint8_t *y, int *swapped)
{
	if (!conv_wgrad_fits(g))
		return 1;
	const size_t es = sizeof(double);
	int64_t p = g->oh * g->ow, k = g->c * g->kh * g->kw, hw = g->h * g->w;
	struct rtensor wc;
	const uint8_t *wr = w->data;
	if (w->view) { /* dY^T: dY regrouped once, (N, M, P) -> (M, N P) */
		if (exec_materialize(x, w, &wc))
			return -1;
		wr = wc.data;
	}
	int64_t nb = (int64_t)(WGRAD_COL / ((size_t)k * (size_t)p * es));
	nb = nb < 1 ? 1 : nb > g->n ? g->n : nb;
	size_t colb = (size_t)(k * nb * p) * es, yb = swapped ? 0 : (size_t)(g->m * g->n * p) * es;
	uint8_t *col = exec_scratch_raw(x, colb), *yt = yb ? exec_scratch_raw(x, yb) : y;
	if (!col || !yt) {
		if (col)
			exec_scratch_free(x, col, colb);
		if (w->view)
			exec_scratch_free(x, wc.data, wc.nbytes);
		return -1;
	}
	/* a's first two axes: a folded Transpose's view of X (N, C, H, W), or a row-major copy */
	struct wgrad_job j = {g, a->data, a->view ? a->vst[0] : g->c * hw, a->view ? a->vst[1] : hw, col, 0, 0};
	int ldc = (int)(g->n * p);
	for (int64_t n0 = 0; n0 < g->n; n0 += nb) {
		j.n0 = n0, j.nb = g->n - n0 < nb ? g->n - n0 : nb;
		kernel_for(g->c, 1, gather_rows, &j);
		int cols = (int)(j.nb * p);
		blas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->m, cols, (int)k, 1.0,
			   (const double *)wr, (int)k, (const double *)col, cols, 0.0, (double *)yt + n0 * p, ldc);
	}
	exec_scratch_free(x, col, colb);
	if (w->view)
		exec_scratch_free(x, wc.data, wc.nbytes);
	if (swapped) {
		*swapped = 1;
		return 0;
	}
	/* Y^T (m', n', P) -> Y (n', m', P) */
	for (int64_t m = 0; m < g->m; m++)
		for (int64_t n = 0; n < g->n; n++)
			memcpy(y + (size_t)((n * g->m + m) * p) * es, yt + (size_t)((m * g->n + n) * p) * es, (size_t)p * es);
	exec_scratch_free(x, yt, yb);
	return 0;
}
