/* sgemm.h - float32 GEMM of graphdiet's own on AVX-512: packed panels and a 6 x 64 register tile.
 *
 * Row-major C (m, n) = alpha op(A) op(B) + beta C, as cblas_sgemm's row-major call: op(A) is A
 * (m, k; lda) or A^T (A k x m), op(B) B (k, n; ldb) or B^T (B n x k). beta 0 never reads C.
 * Every element of C is summed the same way whatever part of C a call computes: for each block
 * of SGEMM_KC of k in order, the chain of fused multiply-adds over the block from 0, s; then
 * y = alpha s (the first block, beta 0), fma(alpha, s, beta y) (the first, beta 1: y), or
 * fma(alpha, s, y) (the later ones). So a product cut into pieces of rows or columns, over any
 * number of threads, gives the same bits as the whole, and A B^T the same as A times B turned.
 * Only where sgemm_usable() says the processor has AVX-512F. */
#ifndef GD_SGEMM_H
#define GD_SGEMM_H

#include <stdint.h>

#define SGEMM_MR 6   /* rows of C a tile: a cut of rows on a multiple of it splits no tile */
#define SGEMM_KC 256 /* k a block */

int sgemm_usable(void);
void sgemm_run(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
	       const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

#endif
