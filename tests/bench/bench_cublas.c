/* bench_cublas.c - cuBLAS's own GEMM rate, the ceiling run_cuda.sh compares graphdiet's MatMul on
 * the GPU with: C (n, n) = A B in float32 (CUBLAS_COMPUTE_32F, as graphdiet) and in float16 with
 * float32 accumulation, best of 10 after a warm-up. Prints "dtype n seconds tflops". */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static double best(cublasHandle_t h, cudaDataType_t t, int n, void *a, void *b, void *c)
{
	float one = 1, zero = 0;
	cudaEvent_t e0, e1;
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	double b_s = 1e30;
	for (int r = 0; r < 11; r++) {
		cudaEventRecord(e0, 0);
		cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, t, n, b, t, n, &zero, c, t, n, CUBLAS_COMPUTE_32F,
			     CUBLAS_GEMM_DEFAULT);
		cudaEventRecord(e1, 0);
		cudaEventSynchronize(e1);
		float ms;
		cudaEventElapsedTime(&ms, e0, e1);
		if (r && ms / 1e3 < b_s)
			b_s = ms / 1e3;
	}
	return b_s;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 8192, count = 0;
	if (cudaGetDeviceCount(&count) || !count) {
		fprintf(stderr, "bench_cublas: no CUDA device\n");
		return 2;
	}
	cublasHandle_t h;
	cublasCreate(&h);
	void *a, *b, *c;
	size_t bytes = (size_t)n * n * 4;
	if (cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes) || cudaMalloc(&c, bytes))
		return 2;
	cudaMemset(a, 0, bytes);
	cudaMemset(b, 0, bytes);
	double s32 = best(h, CUDA_R_32F, n, a, b, c), s16 = best(h, CUDA_R_16F, n, a, b, c), fl = 2.0 * n * n * n;
	printf("float32 %d %.6f %.1f\nfloat16 %d %.6f %.1f\n", n, s32, fl / s32 / 1e12, n, s16, fl / s16 / 1e12);
	return 0;
}
