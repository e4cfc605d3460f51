/* common.cuh - what the CUDA kernels share: element types and their compute types, launch sizes,
 * and walking a broadcast index space (kernels.h). */
#ifndef GD_CUDA_COMMON_CUH
#define GD_CUDA_COMMON_CUH

#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

enum { CDT_FLOAT = 1, CDT_UINT8 = 2, CDT_INT32 = 6, CDT_INT64 = 7, CDT_BOOL = 9, CDT_FLOAT16 = 10, CDT_DOUBLE = 11,
       CDT_BFLOAT16 = 16 }; /* ir/dtype.h's numbers */

/* The type a T computes in, and the conversions. */
template <class T> struct acc { typedef float type; };
template <> struct acc<double> { typedef double type; };
__device__ __forceinline__ float ld(float v) { return v; }
__device__ __forceinline__ double ld(double v) { return v; }
__device__ __forceinline__ float ld(__half v) { return __half2float(v); }
__device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ __forceinline__ T st(double v);
template <> __device__ __forceinline__ float st<float>(double v) { return (float)v; }
template <> __device__ __forceinline__ double st<double>(double v) { return v; }
template <class T> __device__ __forceinline__ T stf(float v);
template <> __device__ __forceinline__ float stf<float>(float v) { return v; }
template <> __device__ __forceinline__ double stf<double>(float v) { return v; }
template <> __device__ __forceinline__ __half stf<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 stf<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
/* stores a compute value: float for the 16-bit and 32-bit types, double for double */
__device__ __forceinline__ void put(float *p, float v) { *p = v; }
__device__ __forceinline__ void put(double *p, double v) { *p = v; }
__device__ __forceinline__ void put(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void put(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* Calls F<T>(args) for a float dtype; an unsupported one is cudaErrorInvalidValue. */
#define CK_FLOAT_DISPATCH(dtype, CALL)                                                                         \
	do {                                                                                                   \
		switch (dtype) {                                                                               \
		case CDT_FLOAT: { typedef float T; CALL; } break;                                              \
		case CDT_DOUBLE: { typedef double T; CALL; } break;                                            \
		case CDT_FLOAT16: { typedef __half T; CALL; } break;                                           \
		case CDT_BFLOAT16: { typedef __nv_bfloat16 T; CALL; } break;                                   \
		default: return cudaErrorInvalidValue;                                                         \
		}                                                                                              \
	} while (0)

static inline unsigned ck_blocks(int64_t n, int threads)
{
	int64_t b = (n + threads - 1) / threads;
	return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

/* grid-stride loop over [0, n) */
#define CK_FOR(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* Offsets of operands 0..k-1 of element i of w. */
template <int K> __device__ __forceinline__ void walk_at(const ck_walk &w, int64_t i, int64_t *off)
{
	for (int k = 0; k < K; k++)
		off[k] = w.off[k];
	for (int d = w.nd - 1; d >= 0; d--) {
		int64_t c = i % w.dims[d];
		i /= w.dims[d];
		for (int k = 0; k < K; k++)
			off[k] += c * w.st[k][d];
	}
}

static inline int ck_launched(void)
{
	return (int)cudaGetLastError();
}

#endif
