/* conv.cu - convolution's columns (im2col, and col2im for ConvTranspose, which gathers each image
 * element's contributions in a fixed order rather than scattering them) and 2-D pooling. The
 * matrix products are cuBLAS's (backend.c). */
#include "common.cuh"

/* col (c * kh * kw, oh * ow) */
template <class T> __global__ void im2col_k(ck_conv p, const T *img, T *col)
{
	int64_t n = p.c * p.kh * p.kw * p.oh * p.ow;
	CK_FOR(i, n) {
		int64_t x = i % p.ow, y = i / p.ow % p.oh, r = i / (p.ow * p.oh);
		int64_t kj = r % p.kw, ki = r / p.kw % p.kh, c = r / (p.kw * p.kh);
		int64_t h = y * p.sh - p.ph + ki * p.dh, w = x * p.sw - p.pw + kj * p.dw;
		col[i] = h >= 0 && h < p.h && w >= 0 && w < p.w ? img[(c * p.h + h) * p.w + w] : stf<T>(0.f);
	}
}

int ck_im2col(int dtype, const struct ck_conv *p, const void *img, void *col)
{
	int64_t n = p->c * p->kh * p->kw * p->oh * p->ow;
	CK_FLOAT_DISPATCH(dtype, (im2col_k<T><<<ck_blocks(n, 256), 256>>>(*p, (const T *)img, (T *)col)));
	return ck_launched();
}

template <class T> __global__ void col2im_k(ck_conv p, const T *col, T *img)
{
	typedef typename acc<T>::type A;
	int64_t n = p.c * p.h * p.w;
	CK_FOR(i, n) {
		int64_t w = i % p.w, h = i / p.w % p.h, c = i / (p.w * p.h);
		A s = 0;
		for (int64_t ki = 0; ki < p.kh; ki++) {
			int64_t yy = h + p.ph - ki * p.dh;
			if (yy < 0 || yy % p.sh || yy / p.sh >= p.oh)
				continue;
			for (int64_t kj = 0; kj < p.kw; kj++) {
				int64_t xx = w + p.pw - kj * p.dw;
				if (xx < 0 || xx % p.sw || xx / p.sw >= p.ow)
					continue;
				s += ld(col[((c * p.kh + ki) * p.kw + kj) * p.oh * p.ow + (yy / p.sh) * p.ow + xx / p.sw]);
			}
		}
		put(img + i, s);
	}
}

int ck_col2im(int dtype, const struct ck_conv *p, const void *col, void *img)
{
	int64_t n = p->c * p->h * p->w;
	CK_FLOAT_DISPATCH(dtype, (col2im_k<T><<<ck_blocks(n, 256), 256>>>(*p, (const T *)col, (T *)img)));
	return ck_launched();
}

template <class T> __global__ void pool_k(int max, int64_t nc, ck_conv p, int count_pad, const T *in, T *out, int64_t *idx)
{
	typedef typename acc<T>::type A;
	int64_t n = nc * p.oh * p.ow;
	CK_FOR(i, n) {
		int64_t x = i % p.ow, y = i / p.ow % p.oh, c = i / (p.ow * p.oh);
		A best = -INFINITY, sum = 0;
		int64_t at = -1, cnt = 0;
		for (int64_t ki = 0; ki < p.kh; ki++) {
			int64_t h = y * p.sh - p.ph + ki * p.dh;
			for (int64_t kj = 0; kj < p.kw; kj++) {
				int64_t w = x * p.sw - p.pw + kj * p.dw;
				int inside = h >= 0 && h < p.h && w >= 0 && w < p.w;
				if (!inside) {
					/* pads count for the average when asked, but not ceil_mode's overhang */
					cnt += count_pad && h >= -p.ph && w >= -p.pw && h < p.h + p.pb && w < p.w + p.pr;
					continue;
				}
				A v = ld(in[(c * p.h + h) * p.w + w]);
				if (max && (v > best || at < 0)) {
					best = v;
					at = (c * p.h + h) * p.w + w;
				}
				sum += v;
				cnt++;
			}
		}
		put(out + i, max ? best : cnt ? sum / (A)cnt : (A)0);
		if (max && idx)
			idx[i] = at;
	}
}

int ck_pool(int max, int dtype, int64_t nc, const struct ck_conv *p, int count_pad, const void *in, void *out,
	    int64_t *idx)
{
	int64_t n = nc * p->oh * p->ow;
	CK_FLOAT_DISPATCH(dtype, (pool_k<T><<<ck_blocks(n, 256), 256>>>(max, nc, *p, count_pad, (const T *)in, (T *)out, idx)));
	return ck_launched();
}
