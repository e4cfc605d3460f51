/* reduce.cu - reductions, (log-)softmax, layer normalisation and the likelihood losses.
 *
 * One block owns each output (or row): its threads take fixed strided shares of the reduced
 * elements, accumulate in double, and combine in a fixed tree in shared memory, so the result does
 * not depend on timing. */
#include "common.cuh"

#define RT 256 /* threads per reducing block */

/* The block's sum (op 0) or max (op 1) of each thread's v, in a fixed order; every thread gets it. */
__device__ double block_combine(double v, int max)
{
	__shared__ double s[RT];
	__syncthreads();
	s[threadIdx.x] = v;
	__syncthreads();
	for (int h = RT / 2; h > 0; h >>= 1) {
		if (threadIdx.x < h)
			s[threadIdx.x] = max ? fmax(s[threadIdx.x], s[threadIdx.x + h]) : s[threadIdx.x] + s[threadIdx.x + h];
		__syncthreads();
	}
	double r = s[0];
	__syncthreads();
	return r;
}

template <class T> __global__ void reduce_k(enum ck_redop op, int64_t nout, ck_walk kept, int64_t nred, ck_walk red, const T *in, T *out)
{
	for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
		int64_t base;
		walk_at<1>(kept, o, &base);
		double a = op == CK_RMAX ? -INFINITY : 0;
		for (int64_t r = threadIdx.x; r < nred; r += RT) {
			int64_t off;
			walk_at<1>(red, r, &off);
			double v = ld(in[base + off]);
			a = op == CK_RMAX ? (v > a || isnan(v) ? v : a) : a + v;
		}
		a = block_combine(a, op == CK_RMAX);
		if (threadIdx.x == 0)
			put(out + o, (typename acc<T>::type)(op == CK_RMEAN ? a / (double)nred : a));
	}
}

int ck_reduce(enum ck_redop op, int dtype, int64_t nout, const struct ck_walk *kept, int64_t nred,
	      const struct ck_walk *red, const void *in, void *out)
{
	unsigned b = (unsigned)(nout < 1 ? 1 : nout > 65535 * 4 ? 65535 * 4 : nout);
	CK_FLOAT_DISPATCH(dtype, (reduce_k<T><<<b, RT>>>(op, nout, *kept, nred, *red, (const T *)in, (T *)out)));
	return ck_launched();
}

/* one block per (outer, inner) row of len elements, inner apart */
template <class T> __global__ void softmax_k(int log_, int64_t outer, int64_t len, int64_t inner, const T *in, T *out)
{
	typedef typename acc<T>::type A;
	for (int64_t row = blockIdx.x; row < outer * inner; row += gridDim.x) {
		int64_t o = row / inner, k = row % inner;
		const T *p = in + o * len * inner + k;
		T *q = out + o * len * inner + k;
		double m = -INFINITY;
		for (int64_t j = threadIdx.x; j < len; j += RT)
			m = fmax(m, (double)ld(p[j * inner]));
		m = block_combine(m, 1);
		double z = 0;
		for (int64_t j = threadIdx.x; j < len; j += RT)
			z += exp((double)ld(p[j * inner]) - m);
		z = block_combine(z, 0);
		A lz = (A)(m + log(z));
		for (int64_t j = threadIdx.x; j < len; j += RT) {
			A v = ld(p[j * inner]);
			put(q + j * inner, log_ ? v - lz : (A)exp((double)v - m) / (A)z);
		}
	}
}

int ck_softmax(int log_, int dtype, int64_t outer, int64_t len, int64_t inner, const void *in, void *out)
{
	int64_t rows = outer * inner;
	unsigned b = (unsigned)(rows < 1 ? 1 : rows > 65535 * 4 ? 65535 * 4 : rows);
	CK_FLOAT_DISPATCH(dtype, (softmax_k<T><<<b, RT>>>(log_, outer, len, inner, (const T *)in, (T *)out)));
	return ck_launched();
}

template <class T> __global__ void layer_norm_k(int64_t rows, int64_t len, double eps, const T *x, const T *scale,
						 const T *bias, T *y, float *mean, float *invstd)
{
	typedef typename acc<T>::type A;
	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const T *p = x + r * len;
		double s = 0;
		for (int64_t j = threadIdx.x; j < len; j += RT)
			s += ld(p[j]);
		double mu = block_combine(s, 0) / (double)len, v = 0;
		for (int64_t j = threadIdx.x; j < len; j += RT) {
			double d = ld(p[j]) - mu;
			v += d * d;
		}
		v = block_combine(v, 0);
		A inv = (A)(1 / sqrt(v / (double)len + eps)), m = (A)mu;
		for (int64_t j = threadIdx.x; j < len; j += RT)
			put(y + r * len + j, (ld(p[j]) - m) * inv * ld(scale[j]) + (bias ? ld(bias[j]) : (A)0));
		if (threadIdx.x == 0 && mean)
			mean[r] = (float)m;
		if (threadIdx.x == 0 && invstd)
			invstd[r] = (float)inv;
	}
}

int ck_layer_norm(int dtype, int64_t rows, int64_t len, double eps, const void *x, const void *scale,
		  const void *bias, void *y, float *mean, float *invstd)
{
	unsigned b = (unsigned)(rows < 1 ? 1 : rows > 65535 * 4 ? 65535 * 4 : rows);
	CK_FLOAT_DISPATCH(dtype, (layer_norm_k<T><<<b, RT>>>(rows, len, eps, (const T *)x, (const T *)scale,
							      (const T *)bias, (T *)y, mean, invstd)));
	return ck_launched();
}

/* per position: work[i] = loss, work[n + i] = its weight (0 when ignored) */
template <class T> __global__ void nll_k(int64_t n, int64_t c, int64_t inner, const T *lp, const int64_t *labels,
					  const T *w, int64_t ignore, int none, T *out, double *work, int *bad)
{
	CK_FOR(i, n) {
		int64_t lab = labels[i], b = i / inner, s = i % inner;
		double l = 0, wt = 0;
		if (lab != ignore) {
			if (lab < 0 || lab >= c) {
				*bad = 1;
			} else {
				wt = w ? (double)ld(w[lab]) : 1;
				l = -wt * (double)ld(lp[(b * c + lab) * inner + s]);
			}
		}
		if (none)
			put(out + i, (typename acc<T>::type)l);
		else {
			work[i] = l;
			work[n + i] = wt;
		}
	}
}

/* one block: the total (in position order per thread, then the fixed tree) and the mean */
template <class T> __global__ void nll_total_k(int64_t n, int mean, const double *work, T *out)
{
	double l = 0, w = 0;
	for (int64_t i = threadIdx.x; i < n; i += RT) {
		l += work[i];
		w += work[n + i];
	}
	l = block_combine(l, 0);
	w = block_combine(w, 0);
	if (threadIdx.x == 0)
		put(out, (typename acc<T>::type)(mean ? l / w : l));
}

int ck_nll(int dtype, int64_t nb, int64_t c, int64_t inner, const void *lp, const int64_t *labels,
	   const void *weights, int64_t ignore, int reduction, void *out, double *work, int *bad)
{
	int64_t n = nb * inner;
	CK_FLOAT_DISPATCH(dtype, (nll_k<T><<<ck_blocks(n, 256), 256>>>(n, c, inner, (const T *)lp, labels,
									  (const T *)weights, ignore, reduction == 0, (T *)out, work, bad)));
	int err = ck_launched();
	if (err || reduction == 0)
		return err;
	CK_FLOAT_DISPATCH(dtype, (nll_total_k<T><<<1, RT>>>(n, reduction == 2, work, (T *)out)));
	return ck_launched();
}
