/* diet.h - diet variables' arithmetic (tensor2tensor's diet variables): INT16 fixed-point storage,
 * value = q x scale, and the DietAdam update op (graphdiet domain), which the training step
 * (rewrite/step.h) places right after a parameter's gradient is complete.
 *
 * DietAdam(q, g, t, m, v1[, v2[, idx[, b[, rows[, idx2, rows2, ...]]]]]) -> (q', m', v1'[, v2'])
 *   q   INT16, the parameter (any shape); g its gradient (float32, float64, float16 or bfloat16
 *       of q's shape, read at float32 precision); t INT64 scalar, the step number counting from 1;
 *       m the momentum slot (float, q's shape; an absent input and output when beta1 = 0); v1, v2
 *       the second moment: for a 2-D q of R x C, v1 = vr (R) and v2 = vc (C), factored; otherwise
 *       v1 = v (q's shape) and no v2.
 *   idx (2-D q only) makes g row updates: g is (..., C) and idx (..., 1) INT64 or INT32 row numbers
 *       (negative ones count from the end), and the gradient is ScatterND(zeros, idx, g,
 *       reduction=add), summed as the executor sums it (in index order, in g's dtype or float32 for
 *       16 bits, then rounded to g's dtype), without the R x C
 *       matrix being made: the update of an embedding, whose gradient touches a few rows.
 *   b (2-D q only, with idx absent) makes g a factor: g is (K, R) and b (K, C) of one dtype, and
 *       the gradient is the product g^T b as Gemm(g, b, transA=1) makes it (in float32, rounded
 *       to a 16-bit dtype as the executor rounds the Gemm's output), made a block of rows
 *       at a time (twice when factored: once for the moments, once for the update) without the
 *       R x C matrix: the update of a Linear layer's weight, whose gradient is X^T dY.
 *   rows (2-D q only, with idx and b): a tied weight (a head's and an embedding's, as nanoGPT's
 *       lm_head.weight = wte.weight): the gradient is g^T b + ScatterND(zeros, idx, rows, add), each
 *       row of the product (as b alone makes it) plus that row's updates (as idx alone sums them;
 *       rows of any float dtype), added in float32 and stored in the rows' dtype, as an Add of the
 *       two stores it; neither term nor their sum is made whole.
 *   idx2, rows2, ... (after idx, and rows or, without b, an absent rows): more embeddings' row
 *       updates (a weight several Gathers read: an encoder-decoder's shared embedding), each
 *       ScatterND(zeros, idx_k, rows_k, add) added in turn to the sum so far, ((g^T b + S1) + S2)
 *       + ... or (S1 + S2) + ..., as autodiff's Adds add them; all rows of one dtype.
 *   attributes (defaults below): beta1, beta2, epsilon, lr, schedule ("noam" or "none"), warmup,
 *       scale, round ("stochastic" or "nearest").
 * The update, in float64:
 *   m' = beta1 m + (1 - beta1) g, and u = m' (u = g when beta1 = 0);
 *   factored: vr' = beta2 vr + (1 - beta2) mean(g^2, axis 1), vc' likewise along axis 0,
 *       r = sqrt(vr' / (1 - beta2^t)) + eps, c = sqrt(vc' / (1 - beta2^t)) + eps,
 *       denom[i][j] = r[i] c[j] / mean(c);
 *   full: v' = beta2 v + (1 - beta2) g^2, denom = sqrt(v' / (1 - beta2^t)) + eps;
 *   q' = quantize(q scale - lr_t u / denom), lr_t = diet_lr(t).
 * quantize(x) = x / scale rounded to nearest (ties to even), or stochastically: floor(|x| / scale +
 * U[0, 1)), sign restored, U from the executor's counter-based generator keyed by the run's seed,
 * the node's name and t (so each step draws afresh, and a run is reproducible); then clamped to
 * +-32767. */
#ifndef GD_DIET_H
#define GD_DIET_H

#include <stdint.h>

#define DIET_QMAX 32767
/* The defaults (tensor2tensor's): --diet's and the op's when an attribute is absent. */
#define DIET_BETA1 0.0
#define DIET_BETA2 0.98
#define DIET_EPS 1e-10
#define DIET_LR 1.0
#define DIET_WARMUP 2000.0
#define DIET_SCALE (10.0 / DIET_QMAX)

/* The learning rate at step t (>= 1): noam, lr min(t warmup^-1.5, t^-0.5); otherwise
 * lr min(t / warmup, 1). */
double diet_lr(double lr, int noam, double warmup, double t);
/* x / scale rounded (u < 0: to nearest, ties to even; else floor(|x| / scale + u) with the sign
 * restored), clamped to +-DIET_QMAX. NaN goes to 0. */
int16_t diet_quantize(double x, double scale, double u);

#endif
