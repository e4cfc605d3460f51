/* blas.c - see blas.h. */
#include "blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#ifndef GD_BLAS_SONAME
#define GD_BLAS_SONAME "libopenblas.so.0"
#endif

static void (*sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, float, const float *,
		     int, const float *, int, float, float *, int);
static void (*dgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, double,
		     const double *, int, const double *, int, double, double *, int);
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void open_blas(void)
{
	struct rlimit rl;
	if (!getenv("OPENBLAS_NUM_THREADS") && !getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY)
		setenv("OPENBLAS_NUM_THREADS", "1", 1);
	void *h = dlopen(GD_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		*(void **)&sgemm = dlsym(h, "cblas_sgemm");
		*(void **)&dgemm = dlsym(h, "cblas_dgemm");
	}
	if (!sgemm || !dgemm) {
		fprintf(stderr, "graphdiet: error: cannot load OpenBLAS (%s): %s (install libopenblas0)\n", GD_BLAS_SONAME,
			h ? "it has no cblas_sgemm or cblas_dgemm" : dlerror());
		exit(3);
	}
}

void blas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
		float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	pthread_once(&once, open_blas);
	sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void blas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
		double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
	pthread_once(&once, open_blas);
	dgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
