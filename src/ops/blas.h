/* blas.h - the CPU kernels' GEMMs: float32 on sgemm.c's AVX-512 kernel where it measures clearly
 * faster than OpenBLAS's on the CPU at hand (timed once per process at the first product; see
 * pick_sgemm in blas.c; GRAPHDIET_SGEMM=openblas or graphdiet forces either), the rest on
 * OpenBLAS, opened on first use.
 *
 * Linked, OpenBLAS would be loaded and its threads started by every graphdiet process: about 4 ms
 * at each start, and threads that spin on the second core for the first tenth of a second, while
 * plan, check, info, train and the rest run no kernel at all. So the library is dlopen'ed
 * (GD_BLAS_SONAME, the one the linker would pick) by the first GEMM, at one thread of its own
 * (OPENBLAS_NUM_THREADS=1, and openblas_set_num_threads(1) should it be loaded already): the
 * --threads pool (util/pool.h) runs a large product as pieces of C, rows or columns, each one
 * OpenBLAS call, and OpenBLAS's own threads would only compete with the pool's. The pieces follow
 * from the product's shape and the machine's cores, never from --threads, so every element of C
 * is the same sum whatever --threads is, with whichever kernels OpenBLAS picks for the CPU. With
 * its AVX-512 kernels, a float32 product a little too big for their small-matrix kernels runs as
 * pieces they take, which is faster (attention's per-head products). A library that cannot be
 * opened is a one-line error and exit 3. The arguments are cblas_sgemm's and cblas_dgemm's. */
#ifndef GD_BLAS_H
#define GD_BLAS_H

#include <cblas.h>
#include <stddef.h>

void blas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
		float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
void blas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
		double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc);

/* One OpenBLAS call, never cut into pieces: the GEMM benchmark's ceiling (tests/bench/bench_gemm.c). */
void blas_sgemm_whole(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
		      float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* For graphdiet --version: which kernel runs float32 products, with the two kernels' measured times
 * when it was measured (opening OpenBLAS and measuring, if no product has yet), and the BLAS
 * library as it describes itself (openblas_get_config, openblas_get_corename), into buf[n];
 * neither exits when OpenBLAS cannot be loaded. */
const char *blas_sgemm_kernel(void);
void blas_describe(char *buf, size_t n);

#endif
