/* layout.cu - Gather and the scatters. Each output element has one owning thread that applies its
 * updates in index order, so ScatterND's and ScatterElements' sums (the gradients of Gather and
 * MaxPool) are deterministic without atomics. */
#include "common.cuh"

template <class E> __global__ void gather_k(int64_t n, int64_t axis, int64_t nidx, int64_t inner, const E *data,
					     const int64_t *idx, E *out, int *bad)
{
	CK_FOR(i, n) {
		int64_t k = i % inner, j = (i / inner) % nidx, o = i / inner / nidx, t = idx[j];
		if (t < 0)
			t += axis;
		if (t < 0 || t >= axis) {
			*bad = 1;
			t = 0;
		}
		out[i] = data[(o * axis + t) * inner + k];
	}
}

int ck_gather(int esize, int64_t outer, int64_t axis, int64_t nidx, int64_t inner, const void *data,
	      const int64_t *idx, void *out, int *bad)
{
	int64_t n = outer * nidx * inner;
	unsigned b = ck_blocks(n, 256);
	switch (esize) {
	case 1: gather_k<uint8_t><<<b, 256>>>(n, axis, nidx, inner, (const uint8_t *)data, idx, (uint8_t *)out, bad); break;
	case 2: gather_k<uint16_t><<<b, 256>>>(n, axis, nidx, inner, (const uint16_t *)data, idx, (uint16_t *)out, bad); break;
	case 4: gather_k<uint32_t><<<b, 256>>>(n, axis, nidx, inner, (const uint32_t *)data, idx, (uint32_t *)out, bad); break;
	case 8: gather_k<uint64_t><<<b, 256>>>(n, axis, nidx, inner, (const uint64_t *)data, idx, (uint64_t *)out, bad); break;
	default: return cudaErrorInvalidValue;
	}
	return ck_launched();
}

struct nd_dims {
	int64_t d[CK_MAX_DIMS];
};

/* thread s owns element s of every slice: it visits the m tuples in order */
template <class T> __global__ void scatter_nd_k(int add, int64_t m, int q, nd_dims dims, int64_t slice, const int64_t *idx,
						 const T *upd, T *out, int *bad)
{
	CK_FOR(s, slice) {
		for (int64_t j = 0; j < m; j++) {
			int64_t off = 0;
			for (int k = 0; k < q; k++) {
				int64_t t = idx[j * q + k];
				if (t < 0)
					t += dims.d[k];
				if (t < 0 || t >= dims.d[k]) {
					*bad = 1;
					t = 0;
				}
				off = off * dims.d[k] + t;
			}
			T *p = out + off * slice + s;
			if (add)
				put(p, ld(*p) + ld(upd[j * slice + s]));
			else
				*p = upd[j * slice + s];
		}
	}
}

int ck_scatter_nd(int dtype, int add, int64_t m, int q, const int64_t *dims, int64_t slice, const int64_t *idx,
		  const void *upd, void *out, int *bad)
{
	nd_dims d;
	for (int k = 0; k < q && k < CK_MAX_DIMS; k++)
		d.d[k] = dims[k];
	CK_FLOAT_DISPATCH(dtype, (scatter_nd_k<T><<<ck_blocks(slice, 256), 256>>>(add, m, q, d, slice, idx, (const T *)upd, (T *)out, bad)));
	return ck_launched();
}

/* thread (o, k) owns output line (o, :, k): it applies its updates along the axis in order */
template <class T> __global__ void scatter_el_k(int add, int64_t outer, int64_t ulen, int64_t inner, int64_t olen,
						 const int64_t *idx, const T *upd, T *out, int *bad)
{
	CK_FOR(line, outer * inner) {
		int64_t o = line / inner, k = line % inner;
		for (int64_t j = 0; j < ulen; j++) {
			int64_t u = (o * ulen + j) * inner + k, t = idx[u];
			if (t < 0)
				t += olen;
			if (t < 0 || t >= olen) {
				*bad = 1;
				continue;
			}
			T *p = out + (o * olen + t) * inner + k;
			if (add)
				put(p, ld(*p) + ld(upd[u]));
			else
				*p = upd[u];
		}
	}
}

int ck_scatter_elements(int dtype, int add, int64_t outer, int64_t ulen, int64_t inner, int64_t olen,
			const int64_t *idx, const void *upd, void *out, int *bad)
{
	CK_FLOAT_DISPATCH(dtype, (scatter_el_k<T><<<ck_blocks(outer * inner, 256), 256>>>(add, outer, ulen, inner, olen, idx,
												(const T *)upd, (T *)out, bad)));
	return ck_launched();
}
