/* signal_fft.h - signal.c's transforms of one line, written once for an element type SIG_V: double
 * (one line) or a GCC vector of doubles (one line per lane). signal.c includes it once per type,
 * with SIG_V the type and SIG_FN(name) the names to give its functions. Every operation on a lane
 * is the double operation on a line, in the same order (the twiddles are scalars, broadcast), so
 * each line has the same bits whichever type transforms it. The algorithms are described at the
 * head of signal.c. */

/* In-place radix-2 FFT of re + i im (n a power of two) with twiddles c + i s of length L = n * stride:
 * element j of n's twiddles is at j * stride. */
SIG_ATTR static void SIG_FN(fft2)(SIG_V *re, SIG_V *im, int64_t n, const double *c, const double *s, int64_t stride)
{
	for (int64_t i = 1, j = 0; i < n; i++) {
		int64_t bit = n >> 1;
		for (; j & bit; bit >>= 1)
			j ^= bit;
		j ^= bit;
		if (i < j) {
			SIG_V t = re[i];
			re[i] = re[j];
			re[j] = t;
			t = im[i];
			im[i] = im[j];
			im[j] = t;
		}
	}
	for (int64_t len = 2; len <= n; len <<= 1) {
		int64_t step = n / len * stride, half = len / 2;
		for (int64_t i = 0; i < n; i += len)
			for (int64_t k = 0; k < half; k++) {
				double cr = c[k * step], ci = s[k * step];
				int64_t p = i + k, q = p + half;
				SIG_V xr = re[q] * cr - im[q] * ci, xi = re[q] * ci + im[q] * cr;
				re[q] = re[p] - xr;
				im[q] = im[p] - xi;
				re[p] += xr;
				im[p] += xi;
			}
	}
}

/* y (n elements) = the transform of the n elements of x at stride st, n dividing the plan's
 * length N = n tstep: twiddle e^(s 2 pi i e / n) is the plan's entry e tstep. Decimation in time
 * by p, the smallest prime factor: the p sub-transforms land at y + r q, and the outputs
 * k + q s (s < p) are the same p places as the inputs r q + k (r < p), so each k combines in place
 * through p temporaries. */
SIG_ATTR static void SIG_FN(fft_mixed)(const struct sig_plan *pl, const SIG_V *xr, const SIG_V *xi, int64_t st, SIG_V *yr,
			      SIG_V *yi, int64_t n, int64_t tstep)
{
	if (n == 1) {
		yr[0] = xr[0];
		yi[0] = xi[0];
		return;
	}
	int64_t p = sig_factor(n), q = n / p;
	for (int64_t r = 0; r < p; r++)
		SIG_FN(fft_mixed)(pl, xr + r * st, xi + r * st, st * p, yr + r * q, yi + r * q, q, tstep * p);
	SIG_V tr[SIG_DIRECT], ti[SIG_DIRECT];
	for (int64_t k = 0; k < q; k++) {
		for (int64_t s = 0; s < p; s++) {
			int64_t kk = k + q * s, e = kk; /* e = r kk mod n; r = 0's twiddle is 1 */
			SIG_V sr = yr[k], si = yi[k];
			for (int64_t r = 1; r < p; r++) {
				SIG_V ar = yr[r * q + k], ai = yi[r * q + k];
				double cr = pl->c[e * tstep], ci = pl->s[e * tstep];
				sr += ar * cr - ai * ci;
				si += ar * ci + ai * cr;
				if ((e += kk) >= n)
					e -= n;
			}
			tr[s] = sr;
			ti[s] = si;
		}
		for (int64_t s = 0; s < p; s++) {
			yr[k + q * s] = tr[s];
			yi[k + q * s] = ti[s];
		}
	}
}

/* The plan's transform of the line in re, im (its first n elements; the arrays max(n, m) long),
 * left there; yr, yi: n elements of work for the mixed radix. */
SIG_ATTR static void SIG_FN(plan_run)(const struct sig_plan *p, SIG_V *re, SIG_V *im, SIG_V *yr, SIG_V *yi)
{
	int64_t n = p->n, m = p->m;
	if (sig_pow2(n)) {
		SIG_FN(fft2)(re, im, n, p->c, p->s, 1);
		return;
	}
	if (!m) {
		SIG_FN(fft_mixed)(p, re, im, 1, yr, yi, n, 1);
		memcpy(re, yr, (size_t)n * sizeof *re);
		memcpy(im, yi, (size_t)n * sizeof *im);
		return;
	}
	/* a = x ch, zero-padded to m; A = FFT(a); A B; inverse FFT as conj(FFT(conj(.))) / m */
	for (int64_t t = 0; t < n; t++) {
		SIG_V ar = re[t] * p->chr[t] - im[t] * p->chi[t], ai = re[t] * p->chi[t] + im[t] * p->chr[t];
		re[t] = ar;
		im[t] = ai;
	}
	memset(re + n, 0, (size_t)(m - n) * sizeof *re);
	memset(im + n, 0, (size_t)(m - n) * sizeof *im);
	SIG_FN(fft2)(re, im, m, p->c, p->s, 1);
	for (int64_t k = 0; k < m; k++) {
		SIG_V ar = re[k] * p->br[k] - im[k] * p->bi[k], ai = re[k] * p->bi[k] + im[k] * p->br[k];
		re[k] = ar;
		im[k] = -ai;
	}
	SIG_FN(fft2)(re, im, m, p->c, p->s, 1);
	for (int64_t k = 0; k < n; k++) {
		SIG_V cr = re[k] / (double)m, ci = -im[k] / (double)m;
		re[k] = cr * p->chr[k] - ci * p->chi[k];
		im[k] = cr * p->chi[k] + ci * p->chr[k];
	}
}
