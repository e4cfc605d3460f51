/* elementwise.cu - broadcast binary ops, Where, unary ops, Cast, strided copies and fills. */
#include "common.cuh"

template <class T> __global__ void binary_k(enum ck_binop op, int64_t n, ck_walk w, const T *a, const T *b, T *out, uint8_t *cmp)
{
	typedef typename acc<T>::type A;
	CK_FOR(i, n) {
		int64_t o[2];
		walk_at<2>(w, i, o);
		A u = ld(a[o[0]]), v = ld(b[o[1]]);
		switch (op) {
		case CK_ADD: put(out + i, u + v); break;
		case CK_SUB: put(out + i, u - v); break;
		case CK_MUL: put(out + i, u * v); break;
		case CK_DIV: put(out + i, u / v); break;
		case CK_POW: put(out + i, (A)pow((double)u, (double)v)); break;
		case CK_EQ: cmp[i] = u == v; break;
		case CK_GT: cmp[i] = u > v; break;
		default: cmp[i] = u < v; break;
		}
	}
}

int ck_binary(enum ck_binop op, int dtype, int64_t n, const struct ck_walk *w, const void *a, const void *b, void *out)
{
	uint8_t *cmp = op >= CK_EQ ? (uint8_t *)out : NULL;
	CK_FLOAT_DISPATCH(dtype, (binary_k<T><<<ck_blocks(n, 256), 256>>>(op, n, *w, (const T *)a, (const T *)b,
									     cmp ? NULL : (T *)out, cmp)));
	return ck_launched();
}

template <class T> __global__ void where_k(int64_t n, ck_walk w, const uint8_t *c, const T *a, const T *b, T *out)
{
	CK_FOR(i, n) {
		int64_t o[3];
		walk_at<3>(w, i, o);
		out[i] = c[o[0]] ? a[o[1]] : b[o[2]];
	}
}

int ck_where(int dtype, int64_t n, const struct ck_walk *w, const uint8_t *cond, const void *a, const void *b, void *out)
{
	CK_FLOAT_DISPATCH(dtype, (where_k<T><<<ck_blocks(n, 256), 256>>>(n, *w, cond, (const T *)a, (const T *)b, (T *)out)));
	return ck_launched();
}

template <class T> __global__ void unary_k(enum ck_unop op, int64_t n, const T *in, T *out, uint8_t *flag)
{
	typedef typename acc<T>::type A;
	CK_FOR(i, n) {
		A v = ld(in[i]);
		switch (op) {
		case CK_NEG: put(out + i, -v); break;
		case CK_ABS: put(out + i, v < 0 ? -v : v); break;
		case CK_SQRT: put(out + i, sqrt(v)); break;
		case CK_EXP: put(out + i, exp(v)); break;
		case CK_LOG: put(out + i, log(v)); break;
		case CK_ERF: put(out + i, erf(v)); break;
		case CK_RELU: put(out + i, v > 0 || v != v ? v : (A)0); break; /* NaN stays NaN, as on the CPU */
		case CK_TANH: put(out + i, tanh(v)); break;
		case CK_SIGMOID: put(out + i, (A)1 / ((A)1 + exp(-v))); break;
		default: flag[i] = isnan(v); break;
		}
	}
}

__global__ void not_k(int64_t n, const uint8_t *in, uint8_t *out)
{
	CK_FOR(i, n) out[i] = !in[i];
}

int ck_unary(enum ck_unop op, int dtype, int64_t n, const void *in, void *out)
{
	if (op == CK_NOT) {
		not_k<<<ck_blocks(n, 256), 256>>>(n, (const uint8_t *)in, (uint8_t *)out);
		return ck_launched();
	}
	uint8_t *flag = op == CK_ISNAN ? (uint8_t *)out : NULL;
	CK_FLOAT_DISPATCH(dtype, (unary_k<T><<<ck_blocks(n, 256), 256>>>(op, n, (const T *)in, flag ? NULL : (T *)out, flag)));
	return ck_launched();
}

/* Cast through double, as the CPU's rt_get / rt_set: float to integer truncates, to bool tests != 0. */
__device__ __forceinline__ double cast_ld(int dt, const void *p, int64_t i)
{
	switch (dt) {
	case CDT_FLOAT: return ((const float *)p)[i];
	case CDT_DOUBLE: return ((const double *)p)[i];
	case CDT_FLOAT16: return __half2float(((const __half *)p)[i]);
	case CDT_BFLOAT16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
	case CDT_INT64: return (double)((const int64_t *)p)[i];
	case CDT_INT32: return ((const int32_t *)p)[i];
	default: return ((const uint8_t *)p)[i];
	}
}

__global__ void cast_k(int from, int to, int64_t n, const void *in, void *out)
{
	CK_FOR(i, n) {
		if (from == CDT_INT64 && to == CDT_INT64) {
			((int64_t *)out)[i] = ((const int64_t *)in)[i];
			continue;
		}
		double v = cast_ld(from, in, i);
		switch (to) {
		case CDT_FLOAT: ((float *)out)[i] = (float)v; break;
		case CDT_DOUBLE: ((double *)out)[i] = v; break;
		case CDT_FLOAT16: ((__half *)out)[i] = __float2half_rn((float)v); break;
		case CDT_BFLOAT16: ((__nv_bfloat16 *)out)[i] = __float2bfloat16_rn((float)v); break;
		case CDT_INT64: ((int64_t *)out)[i] = (int64_t)v; break;
		case CDT_INT32: ((int32_t *)out)[i] = (int32_t)v; break;
		case CDT_BOOL: ((uint8_t *)out)[i] = v != 0; break;
		default: ((uint8_t *)out)[i] = (uint8_t)v; break;
		}
	}
}

int ck_cast(int from, int to, int64_t n, const void *in, void *out)
{
	cast_k<<<ck_blocks(n, 256), 256>>>(from, to, n, in, out);
	return ck_launched();
}

template <class E> __global__ void copy_k(int64_t n, ck_walk w, E *dst, const E *src)
{
	CK_FOR(i, n) {
		int64_t o[2];
		walk_at<2>(w, i, o);
		dst[o[0]] = src[o[1]];
	}
}

int ck_copy(int esize, int64_t n, const struct ck_walk *w, void *dst, const void *src)
{
	unsigned b = ck_blocks(n, 256);
	switch (esize) {
	case 1: copy_k<uint8_t><<<b, 256>>>(n, *w, (uint8_t *)dst, (const uint8_t *)src); break;
	case 2: copy_k<uint16_t><<<b, 256>>>(n, *w, (uint16_t *)dst, (const uint16_t *)src); break;
	case 4: copy_k<uint32_t><<<b, 256>>>(n, *w, (uint32_t *)dst, (const uint32_t *)src); break;
	case 8: copy_k<uint64_t><<<b, 256>>>(n, *w, (uint64_t *)dst, (const uint64_t *)src); break;
	default: return cudaErrorInvalidValue;
	}
	return ck_launched();
}

template <class E> __global__ void fill_k(int64_t n, E *dst, E v)
{
	CK_FOR(i, n) dst[i] = v;
}

int ck_fill(int esize, int64_t n, void *dst, uint64_t bits)
{
	unsigned b = ck_blocks(n, 256);
	switch (esize) {
	case 1: fill_k<uint8_t><<<b, 256>>>(n, (uint8_t *)dst, (uint8_t)bits); break;
	case 2: fill_k<uint16_t><<<b, 256>>>(n, (uint16_t *)dst, (uint16_t)bits); break;
	case 4: fill_k<uint32_t><<<b, 256>>>(n, (uint32_t *)dst, (uint32_t)bits); break;
	case 8: fill_k<uint64_t><<<b, 256>>>(n, (uint64_t *)dst, bits); break;
	default: return cudaErrorInvalidValue;
	}
	return ck_launched();
}

const char *ck_error(int err)
{
	return cudaGetErrorString((cudaError_t)err);
}
