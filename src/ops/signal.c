/* signal.c - the signal-processing ops of opset 17 (audio front ends in exported models): DFT,
 * STFT, MelWeightMatrix and the window generators HannWindow, HammingWindow, BlackmanWindow.
 * Forward only: ONNX defines no gradient for them, so every input is nodiff and a training graph
 * through them is refused by autodiff as for any op without a gradient rule.
 *
 * Complex tensors are real ones with a last axis of 2 (real, imaginary); a real signal has a last
 * axis of 1. Every transform computes in double whatever the float dtype, one line at a time:
 *   X[k] = sum_t x[t] e^(s 2 pi i k t / n), s = -1 (forward) or +1 (inverse, then divided by n).
 * A line of a power-of-two length n runs an iterative radix-2 FFT; one whose prime factors are all
 * at most SIG_DIRECT a recursive mixed-radix Cooley-Tukey FFT (n = p q, p the smallest prime
 * factor: X[k] = sum_r e^(s 2 pi i r k / n) Y_r[k mod q], Y_r the length-q transform of x[p j + r];
 * a prime n is the O(n^2) sum); any other length Bluestein's algorithm, the DFT as a convolution
 * with the chirp ch[j] = e^(s pi i j^2 / n) (k t = (k^2 + t^2 - (k - t)^2) / 2, so X[k] = ch[k]
 * sum_t (x[t] ch[t]) conj(ch[k - t])), done by radix-2 FFTs of a power of two m >= 2n - 1.
 * Twiddle exponents are reduced mod n (mod 2n for the chirp's j^2) as integers before the multiply
 * by pi, so long lines lose no accuracy to large angles.
 *
 * The windows follow the spec's formulas with N = size (periodic) or size - 1 (symmetric):
 *   Hann a0 - a1 cos(2 pi n / N) with a0 = a1 = 1/2; Hamming a0 = 25/46, a1 = 21/46;
 *   Blackman 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N).
 * A symmetric window of one element (N = 0, where the formula divides by zero) is 1, as NumPy's.
 * MelWeightMatrix is the spec's (ONNX's reference implementation): num_mel_bins + 2 points evenly
 * spaced on the mel scale mel(f) = 2595 log10(1 + f / 700) from lower_edge_hertz, with step
 * (mel(upper) - mel(lower)) / (num_mel_bins + 2), mapped back to hertz and to the DFT bin
 * floor((dft_length + 1) f / sample_rate); triangle i rises from point i to point i + 1 and falls
 * to point i + 2, with peak 1. */
#include "kernel.h"

#include <math.h>
#include <string.h>

/* The largest prime factor the mixed-radix FFT takes (an O(p^2) step); a length with a larger one
 * takes Bluestein's algorithm. */
#define SIG_DIRECT 64

static int sig_pow2(int64_t n)
{
	return n > 0 && !(n & (n - 1));
}

/* The smallest prime factor of n >= 2. */
static int64_t sig_factor(int64_t n)
{
	for (int64_t p = 2; p * p <= n; p++)
		if (n % p == 0)
			return p;
	return n;
}

/* Whether every prime factor of n is at most SIG_DIRECT. */
static int sig_smooth(int64_t n)
{
	for (int64_t p; n > 1; n /= p)
		if ((p = sig_factor(n)) > SIG_DIRECT)
			return 0;
	return 1;
}

/* One transform of length n in direction sign, with its tables in one scratch block. */
struct sig_plan {
	int64_t n, m; /* m: Bluestein's power-of-two length, else 0 */
	int sign;
	double *c, *s;     /* twiddles e^(sign 2 pi i j / n), j < n; Bluestein: e^(-2 pi i j / m), j < m */
	double *chr, *chi; /* Bluestein: the chirp ch[j], j < n */
	double *br, *bi;   /* Bluestein: the FFT of conj(ch[|j|]) laid out circularly over m */
	double *wr, *wi;   /* the line's work: length max(n, m) */
	double *yr, *yi;   /* mixed radix: the transform's output, length n */
	void *block;
	size_t bytes;
};

/* In-place radix-2 FFT of re + i im (n a power of two) with twiddles c + i s of length L = n * stride:
 * element j of n's twiddles is at j * stride. */
static void sig_fft2(double *re, double *im, int64_t n, const double *c, const double *s, int64_t stride)
{
	for (int64_t i = 1, j = 0; i < n; i++) {
		int64_t bit = n >> 1;
		for (; j & bit; bit >>= 1)
			j ^= bit;
		j ^= bit;
		if (i < j) {
			double t = re[i];
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
				double xr = re[q] * cr - im[q] * ci, xi = re[q] * ci + im[q] * cr;
				re[q] = re[p] - xr;
				im[q] = im[p] - xi;
				re[p] += xr;
				im[p] += xi;
			}
	}
}

static int sig_plan_init(struct exec *x, struct sig_plan *p, int64_t n, int sign)
{
	memset(p, 0, sizeof *p);
	p->n = n;
	p->sign = sign;
	if (!sig_smooth(n))
		for (p->m = 1; p->m < 2 * n - 1; p->m <<= 1)
			;
	int64_t tw = p->m ? p->m : n, work = p->m ? p->m : n;
	p->bytes = (size_t)(2 * tw + 2 * n + (p->m ? 2 * p->m : 0) + 2 * work) * sizeof(double);
	double *d = p->block = exec_scratch(x, p->bytes);
	if (!d)
		return exec_status(x);
	p->c = d, d += tw;
	p->s = d, d += tw;
	for (int64_t j = 0; j < tw; j++) {
		double a = 2 * M_PI * (double)j / (double)tw;
		p->c[j] = cos(a);
		p->s[j] = (p->m ? -1 : sign) * sin(a);
	}
	if (p->m) {
		p->chr = d, d += n;
		p->chi = d, d += n;
		p->br = d, d += p->m;
		p->bi = d, d += p->m;
		for (int64_t j = 0; j < n; j++) {
			/* j^2 mod 2n, exactly (j^2 fits 64 bits for any line under 2^32 elements) */
			int64_t q = (int64_t)((uint64_t)j * (uint64_t)j % (uint64_t)(2 * n));
			double a = M_PI * (double)q / (double)n;
			p->chr[j] = cos(a);
			p->chi[j] = sign * sin(a);
			p->br[j] = p->chr[j];
			p->bi[j] = -p->chi[j];
			if (j) {
				p->br[p->m - j] = p->chr[j];
				p->bi[p->m - j] = -p->chi[j];
			}
		}
		sig_fft2(p->br, p->bi, p->m, p->c, p->s, 1);
	}
	p->wr = d, d += work;
	p->wi = d, d += work;
	p->yr = d, d += n;
	p->yi = d;
	return 0;
}

static void sig_plan_free(struct exec *x, struct sig_plan *p)
{
	exec_scratch_free(x, p->block, p->bytes);
	p->block = NULL;
}

/* y (n elements) = the transform of the n elements of x at stride st, n dividing the plan's
 * length N = n tstep: twiddle e^(s 2 pi i e / n) is the plan's entry e tstep. Decimation in time
 * by p, the smallest prime factor: the p sub-transforms land at y + r q, and the outputs
 * k + q s (s < p) are the same p places as the inputs r q + k (r < p), so each k combines in place
 * through p temporaries. */
static void sig_fft_mixed(const struct sig_plan *pl, const double *xr, const double *xi, int64_t st, double *yr,
			  double *yi, int64_t n, int64_t tstep)
{
	if (n == 1) {
		yr[0] = xr[0];
		yi[0] = xi[0];
		return;
	}
	int64_t p = sig_factor(n), q = n / p;
	for (int64_t r = 0; r < p; r++)
		sig_fft_mixed(pl, xr + r * st, xi + r * st, st * p, yr + r * q, yi + r * q, q, tstep * p);
	double tr[SIG_DIRECT], ti[SIG_DIRECT];
	for (int64_t k = 0; k < q; k++) {
		for (int64_t s = 0; s < p; s++) {
			int64_t kk = k + q * s, e = kk; /* e = r kk mod n; r = 0's twiddle is 1 */
			double sr = yr[k], si = yi[k];
			for (int64_t r = 1; r < p; r++) {
				double ar = yr[r * q + k], ai = yi[r * q + k], cr = pl->c[e * tstep], ci = pl->s[e * tstep];
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

/* The plan's transform of the line in p->wr, p->wi (its first n elements), left there. */
static void sig_plan_run(struct sig_plan *p)
{
	int64_t n = p->n, m = p->m;
	double *re = p->wr, *im = p->wi;
	if (sig_pow2(n)) {
		sig_fft2(re, im, n, p->c, p->s, 1);
		return;
	}
	if (!m) {
		sig_fft_mixed(p, re, im, 1, p->yr, p->yi, n, 1);
		memcpy(re, p->yr, (size_t)n * sizeof *re);
		memcpy(im, p->yi, (size_t)n * sizeof *im);
		return;
	}
	/* a = x ch, zero-padded to m; A = FFT(a); A B; inverse FFT as conj(FFT(conj(.))) / m */
	for (int64_t t = 0; t < n; t++) {
		double ar = re[t] * p->chr[t] - im[t] * p->chi[t], ai = re[t] * p->chi[t] + im[t] * p->chr[t];
		re[t] = ar;
		im[t] = ai;
	}
	memset(re + n, 0, (size_t)(m - n) * sizeof *re);
	memset(im + n, 0, (size_t)(m - n) * sizeof *im);
	sig_fft2(re, im, m, p->c, p->s, 1);
	for (int64_t k = 0; k < m; k++) {
		double ar = re[k] * p->br[k] - im[k] * p->bi[k], ai = re[k] * p->bi[k] + im[k] * p->br[k];
		re[k] = ar;
		im[k] = -ai;
	}
	sig_fft2(re, im, m, p->c, p->s, 1);
	for (int64_t k = 0; k < n; k++) {
		double cr = re[k] / (double)m, ci = -im[k] / (double)m;
		re[k] = cr * p->chr[k] - ci * p->chi[k];
		im[k] = cr * p->chi[k] + ci * p->chr[k];
	}
}

/* FLOPs of one complex line of length n. */
static double sig_line_flops(int64_t n)
{
	if (n <= 1)
		return 0;
	if (sig_pow2(n))
		return 5.0 * (double)n * log2((double)n);
	if (sig_smooth(n)) {
		double f = 0; /* 8 p flops per output at each factor p */
		for (int64_t p, r = n; r > 1; r /= p)
			f += 8.0 * (double)(p = sig_factor(r)) * (double)n;
		return f;
	}
	double m = exp2(ceil(log2(2.0 * (double)n - 1)));
	return 10.0 * m * log2(m) + 6.0 * m + 12.0 * (double)n;
}

/* A scalar integer input that must be known (a constant, or computed from one). */
static int sig_scalar(struct exec *x, const struct rtensor *t, const char *what, int64_t *v)
{
	if (t->numel != 1)
		return exec_fail(x, "%s must be a scalar, not %lld elements", what, (long long)t->numel);
	if (!t->data)
		return exec_fail(x, "%s must be known when the graph is loaded (a constant)", what);
	*v = rt_get_i(t, 0); /* a float truncated and saturated, NaN 0 */
	return 0;
}

/* The complex signal's last axis: 1 (real) or 2 (complex). */
static int sig_components(struct exec *x, const struct rtensor *t, int min_rank, int *c)
{
	if (t->ndim < min_rank)
		return exec_fail(x, "the signal needs rank %d or more, not %d", min_rank, t->ndim);
	*c = (int)t->dims[t->ndim - 1];
	if (*c != 1 && *c != 2)
		return exec_fail(x, "the signal's last axis must be 1 (real) or 2 (complex), not %d", *c);
	return want_float(x, t, "the signal");
}

/* DFT(input, dft_length?, axis?): input (..., len along axis, ..., c) -> (..., out_len, ..., 2).
 * Opset 17 takes axis as an attribute (default 1), opset 20 as input 2 (default -2); both count
 * over input's rank and may not name the last axis. */
static int dft_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int c = 1, r = a->ndim, ax;
	if (sig_components(x, a, 2, &c))
		return exec_status(x);
	int64_t axis = n->n_in > 2 && in[2] ? 0 : attr_int(n, "axis", exec_opset(x) >= 20 ? -2 : 1);
	if (n->n_in > 2 && in[2] && sig_scalar(x, in[2], "axis", &axis))
		return exec_status(x);
	if (norm_axis(x, axis, r, &ax))
		return exec_status(x);
	if (ax == r - 1)
		return exec_fail(x, "axis %lld names the real/imaginary axis, not a signal axis", (long long)axis);
	int64_t len = a->dims[ax], nfft = len;
	if (n->n_in > 1 && in[1] && sig_scalar(x, in[1], "dft_length", &nfft))
		return exec_status(x);
	if (nfft < 1 || nfft > (INT64_C(1) << 40)) /* its plan's buffers are 4 nfft doubles and more */
		return exec_fail(x, "dft_length %lld must be in [1, 2^40]", (long long)nfft);
	int inverse = attr_int(n, "inverse", 0) != 0, onesided = attr_int(n, "onesided", 0) != 0;
	int64_t keep = onesided ? nfft / 2 + 1 : nfft, outer = 1, inner = 1, dims[RT_MAX_DIMS];
	for (int i = 0; i < r - 1; i++)
		if (i != ax)
			*(i < ax ? &outer : &inner) *= a->dims[i];
	memcpy(dims, a->dims, sizeof dims);
	dims[ax] = keep;
	dims[r - 1] = 2;
	struct rtensor *y = out[0];
	if (!exec_alloc(x, y, a->dtype, r, dims))
		return exec_status(x);
	if (!y->numel) /* nothing to transform: no plan */
		return 0;
	struct sig_plan p;
	if (sig_plan_init(x, &p, nfft, inverse ? 1 : -1))
		return exec_status(x);
	int64_t used = len < nfft ? len : nfft;
	double scale = inverse ? 1.0 / (double)nfft : 1.0;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			for (int64_t t = 0; t < nfft; t++) {
				int64_t e = ((o * len + t) * inner + i) * c;
				p.wr[t] = t < used ? rt_get(a, e) : 0;
				p.wi[t] = t < used && c == 2 ? rt_get(a, e + 1) : 0;
			}
			sig_plan_run(&p);
			for (int64_t k = 0; k < keep; k++) {
				int64_t e = ((o * keep + k) * inner + i) * 2;
				rt_set(y, e, p.wr[k] * scale);
				rt_set(y, e + 1, p.wi[k] * scale);
			}
		}
	sig_plan_free(x, &p);
	return 0;
}

static void dft_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		     uint64_t *bytes)
{
	/* the axis: the attribute, else the last signal axis (opset 20's default; opset 17's default 1
	 * is the same axis for the usual (batch, length, c) signal) */
	const struct rtensor *a = in[0], *y = out[0];
	int64_t axis = attr_int(n, "axis", a->ndim - 2);
	int ax = (int)(axis < 0 ? axis + a->ndim : axis);
	if (ax < 0 || ax >= a->ndim - 1 || !y->dims[ax]) {
		*flops = 0;
		*bytes = a->nbytes + y->nbytes;
		return;
	}
	int64_t len = a->dims[ax] > y->dims[ax] ? a->dims[ax] : y->dims[ax];
	*flops = (uint64_t)((double)(y->numel / 2 / y->dims[ax]) * sig_line_flops(len));
	*bytes = a->nbytes + y->nbytes;
}

/* STFT(signal (B, L, c), frame_step, window (W)?, frame_length?) -> (B, frames, bins, 2): frame f
 * of batch b is signal[b, f step .. f step + n) times the window, transformed; n = frame_length or
 * W (equal when both are given), frames = (L - n) / step + 1, bins = n / 2 + 1 when onesided (the
 * default) else n. A signal of rank 2 is real. */
static int stft_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *w = n->n_in > 2 ? in[2] : NULL, *fl = n->n_in > 3 ? in[3] : NULL;
	int c = 1;
	if (a->ndim == 2 ? want_float(x, a, "the signal") : sig_components(x, a, 3, &c))
		return exec_status(x);
	if (a->ndim > 3)
		return exec_fail(x, "the signal must be (batch, length, 1 or 2), not rank %d", a->ndim);
	int64_t step = 0, nfft = -1;
	if (sig_scalar(x, in[1], "frame_step", &step))
		return exec_status(x);
	if (step < 1)
		return exec_fail(x, "frame_step %lld must be positive", (long long)step);
	if (fl && sig_scalar(x, fl, "frame_length", &nfft))
		return exec_status(x);
	if (w) {
		if (w->ndim != 1)
			return exec_fail(x, "the window must be 1-D, not rank %d", w->ndim);
		if (want_float(x, w, "the window"))
			return exec_status(x);
		if (fl && nfft != w->dims[0])
			return exec_fail(x, "frame_length %lld differs from the window's length %lld", (long long)nfft,
					 (long long)w->dims[0]);
		nfft = w->dims[0];
	}
	if (nfft < 0)
		return exec_fail(x, "STFT needs a window or a frame_length");
	int64_t batch = a->dims[0], len = a->dims[1];
	if (nfft < 1 || nfft > len)
		return exec_fail(x, "frame length %lld must be in [1, %lld] (the signal's length)", (long long)nfft,
				 (long long)len);
	int64_t frames = (len - nfft) / step + 1, keep = attr_int(n, "onesided", 1) ? nfft / 2 + 1 : nfft;
	int64_t dims[4] = {batch, frames, keep, 2};
	struct rtensor *y = out[0];
	if (!exec_alloc(x, y, a->dtype, 4, dims))
		return exec_status(x);
	if (w && !w->data)
		return exec_fail(x, "the window has no data");
	struct sig_plan p;
	if (sig_plan_init(x, &p, nfft, -1))
		return exec_status(x);
	for (int64_t b = 0; b < batch; b++)
		for (int64_t f = 0; f < frames; f++) {
			for (int64_t t = 0; t < nfft; t++) {
				int64_t e = (b * len + f * step + t) * c;
				double h = w ? rt_get(w, t) : 1;
				p.wr[t] = rt_get(a, e) * h;
				p.wi[t] = c == 2 ? rt_get(a, e + 1) * h : 0;
			}
			sig_plan_run(&p);
			for (int64_t k = 0; k < keep; k++) {
				int64_t e = ((b * frames + f) * keep + k) * 2;
				rt_set(y, e, p.wr[k]);
				rt_set(y, e + 1, p.wi[k]);
			}
		}
	sig_plan_free(x, &p);
	return 0;
}

static void stft_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		      uint64_t *bytes)
{
	const struct rtensor *y = out[0];
	int64_t nfft = n->n_in > 2 && in[2] ? in[2]->numel : attr_int(n, "onesided", 1) ? 2 * (y->dims[2] - 1) : y->dims[2];
	*flops = (uint64_t)((double)(y->dims[0] * y->dims[1]) * (sig_line_flops(nfft) + 2.0 * (double)nfft));
	*bytes = in[0]->nbytes + y->nbytes;
}

/* The output_datatype attribute: a numeric dtype, float32 by default. */
static int sig_out_dtype(struct exec *x, const struct node *n, int *dt)
{
	*dt = (int)attr_int(n, "output_datatype", DT_FLOAT);
	if (!dtype_valid(*dt) || *dt == DT_STRING)
		return exec_fail(x, "output_datatype %d is not a numeric type", *dt);
	return 0;
}

/* a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), the cosine-sum windows (size) -> (size) */
static int window_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
		      double a0, double a1, double a2)
{
	int64_t size;
	int dt;
	if (sig_scalar(x, in[0], "size", &size) || sig_out_dtype(x, n, &dt))
		return exec_status(x);
	if (size < 0)
		return exec_fail(x, "size %lld must not be negative", (long long)size);
	int64_t N = attr_int(n, "periodic", 1) ? size : size - 1;
	if (!exec_alloc(x, out[0], dt, 1, &size))
		return exec_status(x);
	for (int64_t i = 0; i < size; i++) {
		/* 2 pi i / N with i < N + 1 <= 2N: no reduction needed */
		double t = N ? 2 * M_PI * (double)i / (double)N : 0;
		rt_set(out[0], i, N ? a0 - a1 * cos(t) + a2 * cos(2 * t) : 1);
	}
	return 0;
}

static int hann_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return window_run(x, n, in, out, 0.5, 0.5, 0);
}

static int hamming_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return window_run(x, n, in, out, 25.0 / 46.0, 21.0 / 46.0, 0);
}

static int blackman_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return window_run(x, n, in, out, 0.42, 0.5, 0.08);
}

static double mel_of(double hz)
{
	return 2595 * log10(1 + hz / 700);
}

/* MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz)
 * -> (dft_length / 2 + 1, num_mel_bins) */
static int mel_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	int64_t mels = 0, nfft = 0, rate = 0;
	int dt;
	if (sig_scalar(x, in[0], "num_mel_bins", &mels) || sig_scalar(x, in[1], "dft_length", &nfft) ||
	    sig_scalar(x, in[2], "sample_rate", &rate) || sig_out_dtype(x, n, &dt))
		return exec_status(x);
	for (int k = 3; k < 5; k++)
		if (in[k]->numel != 1 || !in[k]->data)
			return exec_fail(x, "%s must be a known scalar", k == 3 ? "lower_edge_hertz" : "upper_edge_hertz");
	if (mels < 1 || nfft < 1 || rate < 1)
		return exec_fail(x, "num_mel_bins (%lld), dft_length (%lld) and sample_rate (%lld) must be positive",
				 (long long)mels, (long long)nfft, (long long)rate);
	double lo = rt_get(in[3], 0), hi = rt_get(in[4], 0);
	int64_t bins = nfft / 2 + 1, dims[2] = {bins, mels};
	if (!exec_alloc_zero(x, out[0], dt, 2, dims))
		return exec_status(x);
	double mlo = mel_of(lo), step = (mel_of(hi) - mlo) / (double)(mels + 2);
	int64_t pt[3];
	for (int64_t i = 0; i < mels; i++) {
		for (int k = 0; k < 3; k++) {
			double hz = 700 * (pow(10, ((double)(i + k) * step + mlo) / 2595) - 1);
			/* clamped to [-1, bins + 1], which the check below refuses as it would the
			 * point (NaN and 1e300 edges were undefined as integers) */
			double p = floor((double)(nfft + 1) * hz / (double)rate);
			pt[k] = !(p >= -1) ? -1 : p > (double)(bins + 1) ? bins + 1 : (int64_t)p;
		}
		/* the bins written: pt[1], and [pt[0], pt[2]) when the points rise */
		int64_t first = pt[0] < pt[1] ? pt[0] : pt[1], last = pt[2] - 1 > pt[1] ? pt[2] - 1 : pt[1];
		if (first < 0 || last >= bins)
			return exec_fail(x, "mel band %lld spans DFT bins %lld to %lld, outside [0, %lld): the edges must lie in "
					    "[0, sample_rate / 2]", (long long)i, (long long)first, (long long)last, (long long)bins);
		if (pt[1] == pt[0])
			rt_set(out[0], pt[1] * mels + i, 1);
		for (int64_t j = pt[0]; pt[1] != pt[0] && j <= pt[1]; j++)
			rt_set(out[0], j * mels + i, (double)(j - pt[0]) / (double)(pt[1] - pt[0]));
		for (int64_t j = pt[1]; j < pt[2]; j++)
			rt_set(out[0], j * mels + i, (double)(pt[2] - j) / (double)(pt[2] - pt[1]));
	}
	return 0;
}

const struct op_impl op_dft = {.run = dft_run, .cost = dft_cost, .recompute = RC_EXPENSIVE, .nodiff = ~0u};
const struct op_impl op_stft = {.run = stft_run, .cost = stft_cost, .recompute = RC_EXPENSIVE, .nodiff = ~0u};
const struct op_impl op_mel_weight_matrix = {.run = mel_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_hann_window = {.run = hann_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_hamming_window = {.run = hamming_run, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_blackman_window = {.run = blackman_run, .recompute = RC_CHEAP, .nodiff = ~0u};
