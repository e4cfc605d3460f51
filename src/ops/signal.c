/* signal.c - the signal-processing ops of opset 17 (audio front ends in exported models): DFT,
 * STFT, MelWeightMatrix and the window generators HannWindow, HammingWindow, BlackmanWindow.
 * Forward only: ONNX defines no gradient for them, so every input is nodiff and a training graph
 * through them is refused by autodiff as for any op without a gradient rule.
 *
 * Complex tensors are real ones with a last axis of 2 (real, imaginary); a real signal has a last
 * axis of 1. Every transform computes in double, but a float32 signal's whose stages are all radix
 * 2, 3, 4 or 5 (no Bluestein) in float, as PyTorch's and pocketfft's float32 FFTs do (the twiddles
 * rounded to float from the double tables; the loaded elements, windowed in double, rounded once),
 * line by line (8 lines at a time, one per lane of a vector, the lines split over the pool: each
 * lane the operations of a line alone, so the bits do not depend on the threads or on a line's
 * neighbours; no FMA contraction, so the VM_CLONES clones compute the same bits):
 *   X[k] = sum_t x[t] e^(s 2 pi i k t / n), s = -1 (forward) or +1 (inverse, then divided by n).
 * A line whose prime factors are all at most SIG_DIRECT runs Stockham's autosort FFT (signal_fft.h:
 * a stage per factor, radix-4 butterflies for the power of two's pairs of 2s, radix 2, 3 and 5
 * written out, any other prime p its O(p^2) sum; no bit reversal, each stage from one buffer to
 * the other); any other length Bluestein's algorithm, the DFT as a convolution with the chirp
 * ch[j] = e^(s pi i j^2 / n) (k t = (k^2 + t^2 - (k - t)^2) / 2, so X[k] = ch[k] sum_t (x[t] ch[t])
 * conj(ch[k - t])), done by FFTs of a power of two m >= 2n - 1. A real line of even length n >= 32 is
 * transformed as the complex line z[t] = x[2t] + i x[2t + 1] of n / 2 (Z = E + i O, E and O the
 * transforms of the even and odd elements) and unpacked: X[k] = E[k] + e^(s 2 pi i k / n) O[k],
 * k <= n / 2, the rest conj(X[n - k]): half the work. Against a naive DFT in long double its error
 * relative to the line's L2 norm is at most the radix-2 and recursive mixed-radix FFTs' it
 * replaced (float64, the largest of 8 lines: 512 real 5.5e-16 (1.5e-15 before), 400 real 6.8e-16
 * (4.0e-15), 1009 complex 2.4e-15 (4.6e-15); tests/bench/fft.py --accuracy). float32 in float:
 * against numpy's float64 FFT of the same float32 lines, the largest |error| of a bin over 8 lines
 * relative to the line's L2 norm is of the order of PyTorch's float32 FFT (torch.fft.rfft / fft on
 * the same lines), up to 5 times the double transform's (whose output's rounding to float32 was the whole
 * of its error): random normal lines 512 real 4.1e-7 (double 8.9e-8, PyTorch 2.9e-7), 400 real
 * 3.8e-7 (9.4e-8, 4.0e-7), 2048 complex 4.6e-7 (1.2e-7, 4.4e-7); the worst of random, impulse,
 * sine and 1e4 sine plus 1e-6..1e6 noise lines at 16 to 2048 3.0e-6 (2048 real sine; double 9.0e-7,
 * PyTorch 2.0e-6). A radix-p prime's O(p^2) sum in float was 3 times PyTorch's error at 61, so those
 * lengths stay double (and Bluestein's). Subnormal elements round absolutely (2^-150) in float: a
 * line of 1e-40 values had errors of 1.5e-5 of its norm. float16 signals, which the CPU widens to
 * float32, take the float transform too (against the double one: 1 to 15 outputs of 4,422 to 22,000
 * in 1 to 5 units of the last place, each output's largest error the same). DFT 64 x 512 real took 0.031-0.032 ms in
 * float against 0.044 in double, STFT 8 x 16000 frame 400 0.30 against 0.36; with sig_load16f and
 * sig_store16f (float lines loaded and stored without double vectors) 0.019-0.020 and 0.187-0.192
 * (bench_roofline, 1 thread, interleaved x5, best of 9).
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
#include "vmath.h"
#include "../util/pool.h"
#include "../util/xalloc.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* The largest prime factor the mixed-radix FFT takes (an O(p^2) step); a length with a larger one
 * takes Bluestein's algorithm. */
#define SIG_DIRECT 64

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

/* The radices of the Stockham stages of a smooth n, into f (64 long): 4s, a 2 where the power of
 * two is odd, the odd primes rising; their count. */
static int sig_radices(int64_t n, int64_t *f)
{
	int nf = 0;
	for (; n % 4 == 0; n /= 4)
		f[nf++] = 4;
	for (int64_t p; n > 1; n /= p)
		f[nf++] = p = sig_factor(n);
	return nf;
}

/* One transform of length n in direction sign: its tables, read by every line. */
struct sig_plan {
	int64_t n, nc, m; /* nc: the complex transform's length (n, or n / 2 when half); m: Bluestein's
			     power-of-two length for nc, else 0 */
	int sign;
	int half;	   /* a real line of even n, as a complex one of n / 2 */
	int full;	   /* half: the mirrored bins past n / 2 wanted too */
	int nf;		   /* the Stockham radices f[] of nc (m when Bluestein's) */
	int64_t f[64];
	double *c, *s;     /* twiddles e^(sign 2 pi i j / nc), j < nc; Bluestein: e^(-2 pi i j / m), j < m */
	double *wr, *wi;   /* half: e^(sign 2 pi i k / n), k <= n / 2 */
	double *chr, *chi; /* Bluestein: the chirp ch[j], j < nc */
	double *br, *bi;   /* Bluestein: the FFT of conj(ch[|j|]) laid out circularly over m */
	float *cf, *sf;    /* not Bluestein: c, s rounded to float (the float32 signals' transform) */
	float *wrf, *wif;  /* half, not Bluestein: wr, wi rounded to float */
	void *block;
	size_t bytes;
};

/* the transforms of one line (sig_*1) and of SIG_W lines, one per lane of a vector (sig_*v) */
#define SIG_W 8
typedef double sig_v __attribute__((vector_size(SIG_W * sizeof(double))));
typedef float sig_vf __attribute__((vector_size(SIG_W * sizeof(float))));
typedef float sig_vf2 __attribute__((vector_size(2 * SIG_W * sizeof(float)))); /* a sig_v's bytes */
#define SIG_S double
#define SIG_TAB(name) p->name
#define SIG_BLUESTEIN 1
#define SIG_V double
#define SIG_FN(name) sig_##name##1
#define SIG_ATTR
#include "signal_fft.h"
#undef SIG_V
#undef SIG_FN
#undef SIG_ATTR
/* the vector ones compiled for each instruction set (a 64-byte vector taken apart into SSE2's
 * 16-byte registers in memory ran 3 times slower than one line at a time) */
#define SIG_V sig_v
#define SIG_FN(name) sig_##name##v
#define SIG_ATTR VM_CLONES
#include "signal_fft.h"
#undef SIG_V
#undef SIG_FN
#undef SIG_S
#undef SIG_TAB
#undef SIG_BLUESTEIN
/* float32 signals' lines (not Bluestein's), SIG_W a vector of floats: half the bytes a stage moves
 * and twice the lanes an instruction of the v3 and v4 clones */
#define SIG_S float
#define SIG_TAB(name) p->name##f
#define SIG_BLUESTEIN 0
#define SIG_V sig_vf
#define SIG_FN(name) sig_##name##f
#include "signal_fft.h"
#undef SIG_V
#undef SIG_FN
#undef SIG_ATTR
#undef SIG_S
#undef SIG_TAB
#undef SIG_BLUESTEIN

/* c[j] + i s[j] = e^(sg 2 pi i j / N) for j < len <= N: cos and sin of the first eighth of the
 * circle, the rest by its symmetries (each from a j already done: the conjugate of N - j, minus the
 * conjugate of N / 2 - j, i times the conjugate of N / 4 - j, where N allows). An eighth of the libm
 * calls, which were a seventh of DFT 64 x 512's time (perf); and e^(i pi), e^(i pi / 2) exactly -1, i. */
static void sig_cis(double *c, double *s, int64_t N, int64_t len, int sg)
{
	for (int64_t j = 0; j < len; j++)
		if (2 * j > N)
			c[j] = c[N - j], s[j] = -s[N - j];
		else if (N % 2 == 0 && 4 * j > N)
			c[j] = -c[N / 2 - j], s[j] = s[N / 2 - j];
		else if (N % 4 == 0 && 8 * j > N)
			c[j] = sg * s[N / 4 - j], s[j] = sg * c[N / 4 - j];
		else {
			double a = 2 * M_PI * (double)j / (double)N;
			c[j] = cos(a);
			s[j] = sg * sin(a);
		}
}

/* Plans' tables kept across calls: a plan's tables depend on its n, sign and half alone and are the
 * same bits at every call. Making them (sig_cis's libm cos and sin) was a tenth of DFT 64 x 512's
 * samples (perf); kept, the row took 0.043-0.044 ms, 0.045-0.046 before (bench_roofline, 1 thread,
 * interleaved x3, best of 9; STFT's row the same). The first SIG_CACHED plans of at most
 * SIG_CACHE_BYTES are copied here once, each published whole by one compare-and-swap into a free
 * slot and never changed or freed after (readers load it with acquire): thread-safe and bounded
 * (8 MiB at most); later plans are made per call as before. */
enum { SIG_CACHED = 8 };
#define SIG_CACHE_BYTES ((size_t)1 << 20)
static _Atomic(struct sig_plan *) sig_cache[SIG_CACHED];

/* p's tables from the cache (p->block NULL): whether it held them. */
static int sig_cache_get(struct sig_plan *p)
{
	for (int i = 0; i < SIG_CACHED; i++) {
		const struct sig_plan *q = atomic_load_explicit(&sig_cache[i], memory_order_acquire);
		if (!q)
			return 0;
		if (q->n == p->n && q->sign == p->sign && q->half == p->half) {
			p->c = q->c, p->s = q->s, p->wr = q->wr, p->wi = q->wi;
			p->chr = q->chr, p->chi = q->chi, p->br = q->br, p->bi = q->bi;
			p->cf = q->cf, p->sf = q->sf, p->wrf = q->wrf, p->wif = q->wif;
			p->block = NULL;
			return 1;
		}
	}
	return 0;
}

/* A copy of p's tables into a free slot of the cache, where there is one (out of memory: none) */
static void sig_cache_put(const struct sig_plan *p)
{
	if (p->bytes > SIG_CACHE_BYTES)
		return;
	struct sig_plan *e = xmalloc(sizeof *e + p->bytes);
	if (!e)
		return;
	*e = *p;
	char *from = p->block, *to = (char *)(e + 1);
	memcpy(to, from, p->bytes);
	double **tab[] = {&e->c, &e->s, &e->wr, &e->wi, &e->chr, &e->chi, &e->br, &e->bi};
	for (size_t i = 0; i < sizeof tab / sizeof *tab; i++)
		if (*tab[i])
			*tab[i] = (double *)(to + ((char *)*tab[i] - from));
	float **tabf[] = {&e->cf, &e->sf, &e->wrf, &e->wif};
	for (size_t i = 0; i < sizeof tabf / sizeof *tabf; i++)
		if (*tabf[i])
			*tabf[i] = (float *)(to + ((char *)*tabf[i] - from));
	e->block = NULL;
	for (int i = 0; i < SIG_CACHED; i++) {
		struct sig_plan *q = NULL;
		if (atomic_compare_exchange_strong(&sig_cache[i], &q, e))
			return;
		if (q->n == p->n && q->sign == p->sign && q->half == p->half) /* another thread's, the same */
			break;
	}
	xfree(e);
}

/* A plan for lines of length n0 in direction sign; real: the lines are real (their c is 1). */
static int sig_plan_init(struct exec *x, struct sig_plan *p, int64_t n0, int sign, int real, int full)
{
	memset(p, 0, sizeof *p);
	p->n = n0;
	p->sign = sign;
	/* (under 32 the unpacking's roundings outweigh the shorter transform's: 8 and 16 were 1.3 and
	 * 1.07 times the complex transform's error, 32 0.65 times) */
	p->half = real && n0 % 2 == 0 && n0 >= 32;
	p->full = full;
	int64_t n = p->nc = p->half ? n0 / 2 : n0, nw = p->half ? n + 1 : 0;
	if (!sig_smooth(n))
		for (p->m = 1; p->m < 2 * n - 1; p->m <<= 1)
			;
	int64_t tw = p->m ? p->m : n;
	p->nf = sig_radices(tw, p->f);
	size_t nd = (size_t)(2 * tw + 2 * nw + (p->m ? 2 * n + 2 * p->m : 0)), nfl = p->m ? 0 : (size_t)(2 * tw + 2 * nw);
	p->bytes = nd * sizeof(double) + nfl * sizeof(float);
	if (sig_cache_get(p))
		return 0;
	double *d = p->block = exec_scratch(x, p->bytes);
	if (!d)
		return exec_status(x);
	p->c = d, d += tw;
	p->s = d, d += tw;
	sig_cis(p->c, p->s, tw, tw, p->m ? -1 : sign);
	p->wr = d, d += nw;
	p->wi = d, d += nw;
	sig_cis(p->wr, p->wi, n0, nw, sign);
	if (!p->m) {
		float *e = (float *)((char *)p->block + nd * sizeof(double));
		p->cf = e, e += tw;
		p->sf = e, e += tw;
		p->wrf = e, e += nw;
		p->wif = e;
		for (int64_t i = 0; i < tw; i++)
			p->cf[i] = (float)p->c[i], p->sf[i] = (float)p->s[i];
		for (int64_t i = 0; i < nw; i++)
			p->wrf[i] = (float)p->wr[i], p->wif[i] = (float)p->wi[i];
	}
	if (p->m) {
		p->chr = d, d += n;
		p->chi = d, d += n;
		p->br = d, d += p->m;
		p->bi = d;
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
		double *w = exec_scratch_raw(x, (size_t)(2 * p->m) * sizeof *w);
		if (!w) {
			exec_scratch_free(x, p->block, p->bytes);
			return exec_status(x);
		}
		sig_fft1(p->br, p->bi, w, w + p->m, p->m, p->f, p->nf, p->c, p->s, -1);
		exec_scratch_free(x, w, (size_t)(2 * p->m) * sizeof *w);
	}
	sig_cache_put(p);
	return 0;
}

static void sig_plan_free(struct exec *x, struct sig_plan *p)
{
	if (p->block) /* (not the cache's) */
		exec_scratch_free(x, p->block, p->bytes);
	p->block = NULL;
}

/* Lines of a DFT or an STFT over the pool, SIG_W at a time (one per lane; a line too long for
 * SIG_W copies in the caches alone). Line L's element t is the input's element
 * (L / q) A + (L % q) B + t st (its first used elements; the rest 0), times h[t] where there is a
 * window, and its bin k goes to the output's (L / q) A2 + (L % q) B2 + k st2, times scale. */
struct sig_job {
	const struct sig_plan *p;
	const struct rtensor *a;
	struct rtensor *y;
	const double *h;
	const float *hf; /* h in float where every h[t] is a float (x h rounded to float the same bits) */
	double scale;
	int c; /* the input's components: 1 real, 2 complex */
	int64_t lines, q, A, B, st, used, A2, B2, st2, keep;
	int64_t block, per; /* lines a block, blocks a piece */
	int f32;	    /* the blocks of SIG_W lines transformed in float (sig_plan_runf) */
	char *work;	 /* the pieces' work, each bytes long */
	size_t bytes;
};

/* line elements s[t st] (and s[t st + 1], the imaginary parts, when c is 2) times the window h
 * where there is one, into lane l of re and im: one loop per dtype, window and c. A real line's
 * elements 2u and 2u + 1 go to d0[u ds] and d1[u ds] (re[2u], re[2u + 1]; half: re[u], im[u]). */
#define SIG_LOAD(T)                                                                                            \
	do {                                                                                                   \
		const T *s = (const T *)j->a->data + e;                                                        \
		int64_t u = from / 2, st = j->st, used = j->used;                                              \
		if (j->h && j->c == 2)                                                                         \
			for (int64_t t = 0; t < used; t++) {                                                   \
				re[t * lanes + l] = s[t * st] * j->h[t];                                        \
				im[t * lanes + l] = s[t * st + 1] * j->h[t];                                    \
			}                                                                                      \
		else if (j->c == 2)                                                                            \
			for (int64_t t = 0; t < used; t++) {                                                   \
				re[t * lanes + l] = s[t * st];                                                  \
				im[t * lanes + l] = s[t * st + 1];                                              \
			}                                                                                      \
		else if (j->h) {                                                                               \
			for (; 2 * u + 1 < used; u++) {                                                        \
				d0[u * ds] = s[2 * u * st] * j->h[2 * u];                                       \
				d1[u * ds] = s[(2 * u + 1) * st] * j->h[2 * u + 1];                             \
			}                                                                                      \
			if (used & 1)                                                                          \
				d0[u * ds] = s[2 * u * st] * j->h[2 * u];                                       \
		} else {                                                                                       \
			for (; 2 * u + 1 < used; u++) {                                                        \
				d0[u * ds] = s[2 * u * st];                                                     \
				d1[u * ds] = s[(2 * u + 1) * st];                                               \
			}                                                                                      \
			if (used & 1)                                                                          \
				d0[u * ds] = s[2 * u * st];                                                     \
		}                                                                                              \
	} while (0)

/* Real lines' contiguous elements (st 1), float32 or float64, 8 of each of lines [l0, l0 + nl) at a
 * time, turned by vm_transpose8 into the vectors of elements t .. t + 7 (lanes past nl 0): as
 * sig_load writes them, in 3.5 times fewer instructions than its element by element. The elements
 * loaded: a multiple of 8, the rest sig_load's. f32 (a constant where it is inlined): re, im are
 * sig_vf (each rounded to float once, after the window's double product), else sig_v. */
static inline __attribute__((always_inline)) int64_t sig_load8(const struct sig_job *j, int64_t l0, int64_t nl, void *re,
							       void *im, int f32)
{
	int dt = j->a->dtype, half = j->p->half;
	if (j->c != 1 || j->st != 1 || (dt != DT_FLOAT && dt != DT_DOUBLE))
		return 0;
	const char *s[SIG_W];
	for (int64_t l = 0; l < nl; l++)
		s[l] = (const char *)j->a->data + (size_t)((l0 + l) / j->q * j->A + (l0 + l) % j->q * j->B) * dtype_size(dt);
	int64_t t = 0;
	for (; t + SIG_W <= j->used; t += SIG_W) {
		sig_v a[SIG_W], v[SIG_W];
		for (int64_t l = 0; l < SIG_W; l++) {
			a[l] = (sig_v){0};
			if (l < nl && dt == DT_FLOAT) {
				sig_vf f;
				memcpy(&f, (const float *)s[l] + t, sizeof f);
				a[l] = __builtin_convertvector(f, sig_v);
			} else if (l < nl)
				memcpy(&a[l], (const double *)s[l] + t, sizeof a[l]);
		}
		vm_transpose8(a, v);
		for (int i = 0; j->h && i < SIG_W; i++)
			v[i] *= j->h[t + i];
		for (int i = 0; i < SIG_W; i++) {
			int64_t at = half ? (t + i) / 2 : t + i;
			void *d = half && i & 1 ? im : re;
			if (f32)
				((sig_vf *)d)[at] = __builtin_convertvector(v[i], sig_vf);
			else
				((sig_v *)d)[at] = v[i];
		}
	}
	return t;
}

/* Complex bins k < keep of lines [l0, l0 + nl) to contiguous (real, imaginary) pairs (st2 2) of
 * float32 or float64, 4 bins of 8 lines at a time: the vectors re[k], im[k], re[k + 1], ... turned
 * by vm_transpose8 are each line's 8 outputs. The bins stored: a multiple of 4, the rest sig_store's. */
static inline __attribute__((always_inline)) int64_t sig_store8(const struct sig_job *j, int64_t l0, int64_t nl,
								const void *re, const void *im, int f32)
{
	int dt = j->y->dtype;
	if (j->st2 != 2 || (dt != DT_FLOAT && dt != DT_DOUBLE))
		return 0;
	char *d[SIG_W];
	for (int64_t l = 0; l < nl; l++)
		d[l] = (char *)j->y->data + (size_t)((l0 + l) / j->q * j->A2 + (l0 + l) % j->q * j->B2) * dtype_size(dt);
	int64_t k = 0;
	for (; k + SIG_W / 2 <= j->keep; k += SIG_W / 2) {
		sig_v a[SIG_W], v[SIG_W];
		for (int i = 0; i < SIG_W / 2; i++) {
			a[2 * i] = f32 ? __builtin_convertvector(((const sig_vf *)re)[k + i], sig_v) : ((const sig_v *)re)[k + i];
			a[2 * i + 1] = f32 ? __builtin_convertvector(((const sig_vf *)im)[k + i], sig_v) : ((const sig_v *)im)[k + i];
		}
		vm_transpose8(a, v);
		for (int64_t l = 0; l < nl; l++) {
			sig_v o = j->scale != 1 ? v[l] * j->scale : v[l];
			if (dt == DT_FLOAT) {
				sig_vf f = __builtin_convertvector(o, sig_vf);
				memcpy((float *)d[l] + 2 * k, &f, sizeof f);
			} else
				memcpy((double *)d[l] + 2 * k, &o, sizeof o);
		}
	}
	return k;
}

/* The float lines' sig_load8 and sig_store8 (float32, st 1, the window's elements floats, scale 1):
 * 16 floats of each of 8 lines at a time, their (even, odd) pairs moved as the 64-bit lanes of
 * vm_transpose8 (moves only: the same bits), each of the 8 results the pairs t + 2u, t + 2u + 1 of
 * the 8 lines, split into the two lines' vectors; the windowed elements are x h in float, the bits
 * of sig_load8's double product rounded (both factors floats: that product is exact). sig_load8
 * took DFT 64 x 512's and STFT 8 x 16000's loads through double vectors, 2 conversions and a
 * double transpose of 8 elements (perf: sig_lines 34% of the STFT's samples, the float FFT 22%). The
 * elements loaded, bins stored: multiples of 16 and 8, the rest sig_load8's and sig_store's. */
static inline __attribute__((always_inline)) int64_t sig_load16f(const struct sig_job *j, int64_t l0, int64_t nl, sig_vf *re,
								 sig_vf *im)
{
	if (j->c != 1 || j->st != 1 || j->a->dtype != DT_FLOAT || (j->h && !j->hf))
		return 0;
	const float *s[SIG_W];
	for (int64_t l = 0; l < nl; l++)
		s[l] = (const float *)j->a->data + ((l0 + l) / j->q * j->A + (l0 + l) % j->q * j->B);
	int64_t t = 0, half = j->p->half;
	for (; t + 2 * SIG_W <= j->used; t += 2 * SIG_W) {
		sig_v a[SIG_W], v[SIG_W];
		for (int64_t l = 0; l < SIG_W; l++) {
			a[l] = (sig_v){0};
			if (l < nl)
				memcpy(&a[l], s[l] + t, sizeof a[l]);
		}
		vm_transpose8(a, v);
		for (int u = 0; u < SIG_W; u++) {
			sig_vf2 w = (sig_vf2)v[u];
			sig_vf e = __builtin_shufflevector(w, w, 0, 2, 4, 6, 8, 10, 12, 14);
			sig_vf o = __builtin_shufflevector(w, w, 1, 3, 5, 7, 9, 11, 13, 15);
			if (j->hf) {
				e *= j->hf[t + 2 * u];
				o *= j->hf[t + 2 * u + 1];
			}
			if (half)
				re[t / 2 + u] = e, im[t / 2 + u] = o;
			else
				re[t + 2 * u] = e, re[t + 2 * u + 1] = o;
		}
	}
	return t;
}

static inline __attribute__((always_inline)) int64_t sig_store16f(const struct sig_job *j, int64_t l0, int64_t nl,
								  const sig_vf *re, const sig_vf *im)
{
	if (j->st2 != 2 || j->y->dtype != DT_FLOAT || j->scale != 1)
		return 0;
	float *d[SIG_W];
	for (int64_t l = 0; l < nl; l++)
		d[l] = (float *)j->y->data + ((l0 + l) / j->q * j->A2 + (l0 + l) % j->q * j->B2);
	int64_t k = 0;
	for (; k + SIG_W <= j->keep; k += SIG_W) {
		sig_v a[SIG_W], v[SIG_W];
		for (int i = 0; i < SIG_W; i++)
			a[i] = (sig_v)__builtin_shufflevector(re[k + i], im[k + i], 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
		vm_transpose8(a, v);
		for (int64_t l = 0; l < nl; l++)
			memcpy(d[l] + 2 * k, &v[l], sizeof v[l]);
	}
	return k;
}

/* lines [l0, l0 + nl) into the n-element arrays re, im (lane l: line l0 + l; lanes past nl 0), but
 * a real line's elements t < from (sig_load8's) */
static void sig_load(const struct sig_job *j, int64_t l0, int64_t nl, int64_t from, double *re, double *im, int lanes)
{
	/* zeros where the transform reads (the complex line's nc elements) and no line is loaded */
	int64_t n = j->p->nc, half = j->p->half, z = half ? from / 2 : from;
	memset(re + z * lanes, 0, (size_t)((n - z) * lanes) * sizeof *re);
	memset(im + (half ? z : 0) * lanes, 0, (size_t)((n - (half ? z : 0)) * lanes) * sizeof *im);
	int64_t ds = half ? lanes : 2 * lanes;
	for (int64_t l = 0; l < nl; l++) {
		int64_t L = l0 + l, e = L / j->q * j->A + L % j->q * j->B;
		double *d0 = re + l, *d1 = (half ? im : re + lanes) + l;
		if (j->a->dtype == DT_FLOAT)
			SIG_LOAD(float);
		else if (j->a->dtype == DT_DOUBLE)
			SIG_LOAD(double);
		else
			for (int64_t t = 0; t < j->used; t++, e += j->st) { /* (from 0: sig_load8 takes none) */
				double h = j->h ? j->h[t] : 1;
				double v = j->h ? rt_get(j->a, e) * h : rt_get(j->a, e);
				if (j->c == 1)
					(t & 1 ? d1 : d0)[t / 2 * ds] = v;
				else
					re[t * lanes + l] = v;
				if (j->c == 2)
					im[t * lanes + l] = j->h ? rt_get(j->a, e + 1) * h : rt_get(j->a, e + 1);
			}
	}
}

/* bins [from, keep) of lines [l0, l0 + nl) to the output (those before, sig_store8's) */
static void sig_store(const struct sig_job *j, int64_t l0, int64_t nl, int64_t from, const double *re, const double *im,
		      int lanes)
{
	for (int64_t l = 0; l < nl; l++) {
		int64_t L = l0 + l, e = L / j->q * j->A2 + L % j->q * j->B2 + from * j->st2;
		for (int64_t k = from; k < j->keep; k++, e += j->st2) {
			rt_store(j->y, e, re[k * lanes + l] * j->scale);
			rt_store(j->y, e + 1, im[k * lanes + l] * j->scale);
		}
	}
}

/* pieces [lo, hi): piece i transforms blocks [i per, (i + 1) per) in its own work */
VM_CLONES static void sig_lines(void *arg, int64_t lo, int64_t hi)
{
	const struct sig_job *j = arg;
	int64_t n = j->p->n, len = j->p->m > n ? j->p->m : n;
	for (int64_t i = lo; i < hi; i++) {
		char *w = j->work + (size_t)lo * j->bytes; /* lo's: the pieces of one call run one by one */
		for (int64_t b = i * j->per; b < (i + 1) * j->per && b * j->block < j->lines; b++) {
			int64_t l0 = b * j->block, nl = j->lines - l0 < j->block ? j->lines - l0 : j->block;
			if (j->block == SIG_W) {
				sig_v *re = (sig_v *)w, *im = re + len, *yr = im + len, *yi = yr + len;
				if (j->f32) {
					/* the float lines in yr, yi's room; sig_load's elements (past sig_load8's)
					 * and sig_store's bins (past sig_store8's) through re, im */
					sig_vf *fr = (sig_vf *)yr, *fi = fr + len, *fyr = fi + len, *fyi = fyr + len;
					int64_t from = sig_load16f(j, l0, nl, fr, fi);
					if (!from)
						from = sig_load8(j, l0, nl, fr, fi, 1);
					int64_t t = j->p->half ? from / 2 : from;
					sig_load(j, l0, nl, from, (double *)re, (double *)im, SIG_W);
					for (int64_t i = j->p->half ? t : 0; i < j->p->nc; i++) /* (sig_load8 fills no im unless half) */
						fi[i] = __builtin_convertvector(im[i], sig_vf);
					for (; t < j->p->nc; t++)
						fr[t] = __builtin_convertvector(re[t], sig_vf);
					sig_plan_runf(j->p, fr, fi, fyr, fyi);
					int64_t k = sig_store16f(j, l0, nl, fr, fi);
					if (!k)
						k = sig_store8(j, l0, nl, fr, fi, 1);
					for (int64_t i = k; i < j->keep; i++) {
						re[i] = __builtin_convertvector(fr[i], sig_v);
						im[i] = __builtin_convertvector(fi[i], sig_v);
					}
					sig_store(j, l0, nl, k, (const double *)re, (const double *)im, SIG_W);
				} else {
					sig_load(j, l0, nl, sig_load8(j, l0, nl, re, im, 0), (double *)re, (double *)im, SIG_W);
					sig_plan_runv(j->p, re, im, yr, yi);
					sig_store(j, l0, nl, sig_store8(j, l0, nl, re, im, 0), (const double *)re,
						  (const double *)im, SIG_W);
				}
			} else {
				double *re = (double *)w, *im = re + len, *yr = im + len, *yi = yr + len;
				sig_load(j, l0, nl, 0, re, im, 1);
				sig_plan_run1(j->p, re, im, yr, yi);
				sig_store(j, l0, nl, 0, re, im, 1);
			}
		}
	}
}

/* Runs job j (its layout and p filled in) over the pool: 0, or the run's error (out of memory). */
static int sig_run_lines(struct exec *x, struct sig_job *j)
{
	int64_t n = j->p->n, len = j->p->m > n ? j->p->m : n;
	if (j->lines < 1)
		return 0;
	/* SIG_W lines' work up to 2^15 elements a line (4 MiB): past that, one line at a time */
	j->block = len <= (INT64_C(1) << 15) ? SIG_W : 1;
	/* float32 lines in float where every stage is radix 2, 3, 4 or 5 (a prime's O(p^2) sum in float
	 * was 3 times PyTorch's error at 61; those stay double, as Bluestein's lengths do) */
	j->f32 = j->a->dtype == DT_FLOAT && !j->p->m && j->block == SIG_W;
	for (int i = 0; i < j->p->nf; i++)
		j->f32 &= j->p->f[i] <= 5;
	j->bytes = (size_t)(4 * len) * (size_t)j->block * sizeof(double);
	int64_t blocks = (j->lines + j->block - 1) / j->block, pieces = pool_threads();
	pieces = pieces < 1 ? 1 : pieces > blocks ? blocks : pieces;
	j->per = (blocks + pieces - 1) / pieces;
	pieces = (blocks + j->per - 1) / j->per;
	size_t total = j->bytes * (size_t)pieces + sizeof(sig_v);
	void *raw = exec_scratch_raw(x, total);
	if (!raw)
		return exec_status(x);
	/* the vectors' alignment */
	j->work = (char *)raw + (sizeof(sig_v) - (uintptr_t)raw % sizeof(sig_v)) % sizeof(sig_v);
	kernel_for(pieces, 1, sig_lines, j);
	exec_scratch_free(x, raw, total);
	return 0;
}

/* FLOPs of one line of length n, c its components (1 real, 2 complex): the usual count of the
 * transform's work, whatever the algorithm (FFTW's benchFFT): 5 n log2 n for a complex line, half
 * that for a real one. (Until the real lines' half-length transform this counted the algorithm's
 * own operations, 8 p a factor p for each output of a smooth n, 2.1 times 5 n log2 n for 400, and
 * a real line as a complex one: the roofs of the STFT and DFT rows were 4.2 and 2 times too long.) */
static double sig_line_flops(int64_t n, int c)
{
	return n <= 1 ? 0 : 2.5 * c * (double)n * log2((double)n);
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
	if (sig_plan_init(x, &p, nfft, inverse ? 1 : -1, c == 1, !onesided))
		return exec_status(x);
	struct sig_job j = {.p = &p, .a = a, .y = y, .scale = inverse ? 1.0 / (double)nfft : 1.0, .c = c,
			    .lines = outer * inner, .q = inner, .A = len * inner * c, .B = c, .st = inner * c,
			    .used = len < nfft ? len : nfft, .A2 = keep * inner * 2, .B2 = 2, .st2 = inner * 2, .keep = keep};
	int rc = sig_run_lines(x, &j);
	sig_plan_free(x, &p);
	return rc;
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
	*flops = (uint64_t)((double)(y->numel / 2 / y->dims[ax]) * sig_line_flops(len, a->dims[a->ndim - 1] == 2 ? 2 : 1));
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
	if (sig_plan_init(x, &p, nfft, -1, c == 1, keep == nfft))
		return exec_status(x);
	size_t hb = (size_t)nfft * (sizeof(double) + sizeof(float));
	double *h = w ? exec_scratch_raw(x, hb) : NULL;
	if (w && !h) {
		sig_plan_free(x, &p);
		return exec_status(x);
	}
	float *hf = w ? (float *)(h + nfft) : NULL;
	int exact = 1; /* (a NaN element not: the double products) */
	for (int64_t t = 0; w && t < nfft; t++) {
		h[t] = rt_get(w, t);
		hf[t] = (float)h[t];
		exact &= (double)hf[t] == h[t];
	}
	struct sig_job j = {.p = &p, .a = a, .y = y, .h = h, .hf = exact ? hf : NULL, .scale = 1.0, .c = c, .lines = batch * frames, .q = frames,
			    .A = len * c, .B = step * c, .st = c, .used = nfft, .A2 = frames * keep * 2, .B2 = keep * 2,
			    .st2 = 2, .keep = keep};
	int rc = sig_run_lines(x, &j);
	if (h)
		exec_scratch_free(x, h, hb);
	sig_plan_free(x, &p);
	return rc;
}

static void stft_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		      uint64_t *bytes)
{
	const struct rtensor *y = out[0];
	const struct rtensor *a = in[0];
	int64_t nfft = n->n_in > 2 && in[2] ? in[2]->numel : attr_int(n, "onesided", 1) ? 2 * (y->dims[2] - 1) : y->dims[2];
	int c = a->ndim == 3 && a->dims[2] == 2 ? 2 : 1, win = n->n_in > 2 && in[2];
	/* the transforms, and the window's products */
	*flops = (uint64_t)((double)(y->dims[0] * y->dims[1]) * (sig_line_flops(nfft, c) + (win ? c * (double)nfft : 0)));
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
