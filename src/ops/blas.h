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

/* A float32 operand that many products with few rows reuse: a recurrence's steps, H_{t-1} R^T
 * with H_{t-1} of a batch's rows. op(B) (k x n; B n x k when tb) is copied once into panels of
 * columns, each (k, width) contiguous, width the most (16 to 128, a multiple of 16) that keeps
 * m x width x k within OpenBLAS's AVX-512 small-matrix kernels (which read B in place, unpacked);
 * each product then runs panel by panel on them, the panels spread over the pool. An LSTM's 16 x
 * 2048 x 512 step took 0.55 ms as one call (its packing of R every step), 0.28 ms so (1.6-2.3x on
 * m of 16 and k up to 2048, bench: tests/bench/bench_gemm.c --panels). Every panel is one call
 * whatever the threads, so C is the same sums with any --threads. Only with those kernels and m of
 * 64 at most; elsewhere blas_panels_bytes is 0 and the products run on op(B) as given. */
struct blas_panels {
	const float *b, *p; /* op(B) as given; the panels, or NULL */
	int tb, ldb, m, n, k, width;
};
size_t blas_panels_bytes(int m, int n, int k);
/* p for op(B); buf: blas_panels_bytes(m, n, k) bytes (none when 0) */
void blas_panels_make(struct blas_panels *p, int m, int n, int k, int tb, const float *b, int ldb, float *buf);
/* C (m, n; ldc) = A (m, k; lda) op(B) */
void blas_panels_sgemm(const struct blas_panels *p, const float *a, int lda, float *c, int ldc);

/* For graphdiet --version: which kernel runs float32 products, with the two kernels' measured times
 * when it was measured (opening OpenBLAS and measuring, if no product has yet), and the BLAS
 * library as it describes itself (openblas_get_config, openblas_get_corename), into buf[n];
 * neither exits when OpenBLAS cannot be loaded. */
const char *blas_sgemm_kernel(void);
void blas_describe(char *buf, size_t n);

#endif
