/* signal_fft.h - signal.c's transforms of one line, written once for an element type SIG_V: double
 * (one line), a GCC vector of doubles or one of floats (one line per lane). signal.c includes it once
 * per type, with SIG_V the type, SIG_S its lanes' scalar type (double or float), SIG_TAB(name) the
 * plan's table of that scalar type (p->name, or its float copy) and SIG_FN(name) the names to give
 * its functions; SIG_BLUESTEIN 0 leaves out Bluestein's algorithm (the float path takes none). Every
 * operation on a lane is the SIG_S operation on a line, in the same order (the twiddles are
 * scalars, broadcast), so each line has the same bits whichever double type transforms it. The
 * algorithms are described at the head of signal.c. */

/* The butterflies of one stage of radix p (m of them, each st wide): BODY reads a[q + r m st], r < p,
 * and writes SIG_OUT(k, ...) = z[q + k st], k < p, times the twiddle w^(j k st) (w = e^(sg 2 pi i / N),
 * the tables c, s, N long) but where j k is 0 (its 1 would make an infinite part NaN). The j = 0
 * butterflies have a loop of their own, without twiddles: each loop a few registers' work. */
#define SIG_OUT(k, vr, vi)                                                                                     \
	do {                                                                                                   \
		SIG_V r_ = (vr), i_ = (vi);                                                                    \
		if (tw && (k)) {                                                                               \
			zr[q + st * (k)] = r_ * tr[k] - i_ * ti[k];                                            \
			zi[q + st * (k)] = r_ * ti[k] + i_ * tr[k];                                            \
		} else {                                                                                       \
			zr[q + st * (k)] = r_;                                                                 \
			zi[q + st * (k)] = i_;                                                                 \
		}                                                                                              \
	} while (0)
#define SIG_BUTTERFLIES(BODY)                                                                                  \
	for (int64_t j = 0; j < m; j++) {                                                                      \
		for (int64_t k = 1; k < p; k++) {                                                              \
			tr[k] = c[j * k * st];                                                                 \
			ti[k] = s[j * k * st];                                                                 \
		}                                                                                              \
		const SIG_V *ar = xr + st * j, *ai = xi + st * j;                                              \
		SIG_V *zr = yr + st * p * j, *zi = yi + st * p * j;                                            \
		if (j) {                                                                                       \
			const int tw = 1;                                                                      \
			for (int64_t q = 0; q < st; q++)                                                       \
				BODY;                                                                          \
		} else {                                                                               \
			const int tw = 0;                                                                      \
			for (int64_t q = 0; q < st; q++)                                                       \
				BODY;                                                                          \
		}                                                                                              \
	}
#define SIG_R2                                                                                                 \
	do {                                                                                                   \
		SIG_OUT(0, ar[q] + ar[q + ms], ai[q] + ai[q + ms]);                                            \
		SIG_OUT(1, ar[q] - ar[q + ms], ai[q] - ai[q + ms]);                                            \
	} while (0)
/* y1, y3 = t1 +- (a1 - a3) sg i: t1 + (a1 - a3) (-i) is y1 forward (k1 1), y3 inverse (k1 3) */
#define SIG_R4                                                                                                 \
	do {                                                                                                   \
		SIG_V t0r = ar[q] + ar[q + 2 * ms], t0i = ai[q] + ai[q + 2 * ms];                              \
		SIG_V t1r = ar[q] - ar[q + 2 * ms], t1i = ai[q] - ai[q + 2 * ms];                              \
		SIG_V t2r = ar[q + ms] + ar[q + 3 * ms], t2i = ai[q + ms] + ai[q + 3 * ms];                    \
		SIG_V dr = ar[q + ms] - ar[q + 3 * ms], di = ai[q + ms] - ai[q + 3 * ms];                      \
		SIG_OUT(0, t0r + t2r, t0i + t2i);                                                              \
		SIG_OUT(k1, t1r + di, t1i - dr);                                                               \
		SIG_OUT(2, t0r - t2r, t0i - t2i);                                                              \
		SIG_OUT(4 - k1, t1r - di, t1i + dr);                                                           \
	} while (0)
/* y1, y2 = e +- i d: e = a0 - (a1 + a2) / 2, d = sg sin(2 pi / 3) (a1 - a2) */
#define SIG_R3                                                                                                 \
	do {                                                                                                   \
		SIG_V br = ar[q + ms] + ar[q + 2 * ms], bi = ai[q + ms] + ai[q + 2 * ms];                      \
		SIG_V er = ar[q] - br * (SIG_S)0.5, ei = ai[q] - bi * (SIG_S)0.5;                                            \
		SIG_V dr = (ar[q + ms] - ar[q + 2 * ms]) * s3, di = (ai[q + ms] - ai[q + 2 * ms]) * s3;        \
		SIG_OUT(0, ar[q] + br, ai[q] + bi);                                                            \
		SIG_OUT(1, er - di, ei + dr);                                                                  \
		SIG_OUT(2, er + di, ei - dr);                                                                  \
	} while (0)
/* y1, y4 = e1 +- i f, y2, y3 = e2 +- i g: b1 = a1 + a4, b2 = a2 + a3, d1 = a1 - a4, d2 = a2 - a3,
 * e1 = a0 + c1 b1 + c2 b2, e2 = a0 + c2 b1 + c1 b2, f = sg (s1 d1 + s2 d2), g = sg (s2 d1 - s1 d2) */
#define SIG_R5                                                                                                 \
	do {                                                                                                   \
		SIG_V b1r = ar[q + ms] + ar[q + 4 * ms], b1i = ai[q + ms] + ai[q + 4 * ms];                    \
		SIG_V b2r = ar[q + 2 * ms] + ar[q + 3 * ms], b2i = ai[q + 2 * ms] + ai[q + 3 * ms];            \
		SIG_V d1r = ar[q + ms] - ar[q + 4 * ms], d1i = ai[q + ms] - ai[q + 4 * ms];                    \
		SIG_V d2r = ar[q + 2 * ms] - ar[q + 3 * ms], d2i = ai[q + 2 * ms] - ai[q + 3 * ms];            \
		SIG_V e1r = ar[q] + b1r * c1 + b2r * c2, e1i = ai[q] + b1i * c1 + b2i * c2;                    \
		SIG_V e2r = ar[q] + b1r * c2 + b2r * c1, e2i = ai[q] + b1i * c2 + b2i * c1;                    \
		SIG_V fr = d1r * s1 + d2r * s2, fi = d1i * s1 + d2i * s2;                                      \
		SIG_V gr = d1r * s2 - d2r * s1, gi = d1i * s2 - d2i * s1;                                      \
		SIG_OUT(0, ar[q] + b1r + b2r, ai[q] + b1i + b2i);                                              \
		SIG_OUT(1, e1r - fi, e1i + fr);                                                                \
		SIG_OUT(2, e2r - gi, e2i + gr);                                                                \
		SIG_OUT(3, e2r + gi, e2i - gr);                                                                \
		SIG_OUT(4, e1r + fi, e1i - fr);                                                                \
	} while (0)
/* any other prime: the O(p^2) sum, e^(sg 2 pi i e / p) the table's entry e N / p */
#define SIG_RP                                                                                                 \
	do {                                                                                                   \
		for (int64_t k = 0; k < p; k++) {                                                              \
			SIG_V sr = ar[q], si = ai[q];                                                          \
			for (int64_t r = 1, e = k; r < p; r++) {                                               \
				SIG_S wr = c[e * (N / p)], wi = s[e * (N / p)];                               \
				sr += ar[q + r * ms] * wr - ai[q + r * ms] * wi;                               \
				si += ar[q + r * ms] * wi + ai[q + r * ms] * wr;                               \
				if ((e += k) >= p)                                                             \
					e -= p;                                                                \
			}                                                                                      \
			SIG_OUT(k, sr, si);                                                                    \
		}                                                                                              \
	} while (0)

/* The transform of the N elements xr + i xi (twiddles c + i s = e^(sg 2 pi i j / N), j < N), left
 * in x; y: N elements of work. Stockham's autosort FFT (decimation in frequency, no bit reversal):
 * stage i, of radix p = f[i], takes the sub-transforms of length n = m p (N at the first) at stride
 * st (1 at the first) from one of x, y to the other, y[q + st (p j + k)] = w^(j k st) sum_r
 * x[q + st (j + r m)] e^(sg 2 pi i r k / p); the next stage's n is m, its st st p. */
SIG_ATTR static void SIG_FN(fft)(SIG_V *xr, SIG_V *xi, SIG_V *yr, SIG_V *yi, int64_t N, const int64_t *f, int nf,
				  const SIG_S *c, const SIG_S *s, int sg)
{
	/* cos and sin (2 pi / 5), (4 pi / 5); sin (2 pi / 3) */
	const SIG_S c1 = 0.30901699437494742410, c2 = -0.80901699437494742410, s1 = sg * 0.95105651629515357212,
		     s2 = sg * 0.58778525229247312917, s3 = sg * 0.86602540378443864676;
	SIG_V *x0r = xr, *x0i = xi;
	int64_t k1 = sg < 0 ? 1 : 3;
	for (int64_t i = 0, n = N, st = 1; i < nf; i++) {
		int64_t p = f[i], m = n / p, ms = m * st;
		SIG_S tr[SIG_DIRECT], ti[SIG_DIRECT];
		if (p == 4)
			SIG_BUTTERFLIES(SIG_R4)
		else if (p == 2)
			SIG_BUTTERFLIES(SIG_R2)
		else if (p == 3)
			SIG_BUTTERFLIES(SIG_R3)
		else if (p == 5)
			SIG_BUTTERFLIES(SIG_R5)
		else
			SIG_BUTTERFLIES(SIG_RP)
		SIG_V *t = xr;
		xr = yr, yr = t;
		t = xi, xi = yi, yi = t;
		n = m;
		st *= p;
	}
	if (xr != x0r) {
		memcpy(x0r, xr, (size_t)N * sizeof *xr);
		memcpy(x0i, xi, (size_t)N * sizeof *xi);
	}
}
#undef SIG_OUT
#undef SIG_BUTTERFLIES
#undef SIG_R2
#undef SIG_R4
#undef SIG_R3
#undef SIG_R5
#undef SIG_RP

/* The plan's transform of the line in re, im (its first nc elements; the arrays max(n, m) long),
 * left there; yr, yi: as long, work. A real line of even length n came as z[t] = x[2t] + i x[2t+1]
 * (nc = n / 2) and leaves as X[k], k <= n / 2 (and its mirror X[n - k] = conj(X[k]) when p->full). */
SIG_ATTR static void SIG_FN(plan_run)(const struct sig_plan *p, SIG_V *re, SIG_V *im, SIG_V *yr, SIG_V *yi)
{
	int64_t n = p->nc, m = p->m;
	if (!m)
		SIG_FN(fft)(re, im, yr, yi, n, p->f, p->nf, SIG_TAB(c), SIG_TAB(s), p->sign);
#if SIG_BLUESTEIN
	else {
		/* a = x ch, zero-padded to m; A = FFT(a); A B; inverse FFT as conj(FFT(conj(.))) / m */
		for (int64_t t = 0; t < n; t++) {
			SIG_V ar = re[t] * p->chr[t] - im[t] * p->chi[t], ai = re[t] * p->chi[t] + im[t] * p->chr[t];
			re[t] = ar;
			im[t] = ai;
		}
		memset(re + n, 0, (size_t)(m - n) * sizeof *re);
		memset(im + n, 0, (size_t)(m - n) * sizeof *im);
		SIG_FN(fft)(re, im, yr, yi, m, p->f, p->nf, p->c, p->s, -1);
		for (int64_t k = 0; k < m; k++) {
			SIG_V ar = re[k] * p->br[k] - im[k] * p->bi[k], ai = re[k] * p->bi[k] + im[k] * p->br[k];
			re[k] = ar;
			im[k] = -ai;
		}
		SIG_FN(fft)(re, im, yr, yi, m, p->f, p->nf, p->c, p->s, -1);
		for (int64_t k = 0; k < n; k++) {
			SIG_V cr = re[k] / (double)m, ci = -im[k] / (double)m;
			re[k] = cr * p->chr[k] - ci * p->chi[k];
			im[k] = cr * p->chi[k] + ci * p->chr[k];
		}
	}
#endif
	if (!p->half)
		return;
	/* Z = E + i O, E and O the transforms of x's even and odd elements (Hermitian, as real lines'):
	 * E[k] = (Z[k] + conj(Z[h - k])) / 2, O[k] = (Z[k] - conj(Z[h - k])) / 2i, X[k] = E[k] + w^k O[k]
	 * (w = e^(sign 2 pi i / 2h), from p->wr, p->wi), k <= h, indices mod h; k and h - k at once */
	for (int64_t k = 0; 2 * k <= n; k++) {
		int64_t l = n - k, lz = k ? l : 0;
		SIG_V ar = re[k], ai = im[k], br = re[lz], bi = -im[lz];
		for (int pass = 0; pass < 2; pass++) {
			int64_t kk = pass ? l : k;
			SIG_V er = (ar + br) * (SIG_S)0.5, ei = (ai + bi) * (SIG_S)0.5, odr = (ai - bi) * (SIG_S)0.5,
			      odi = (br - ar) * (SIG_S)0.5;
			SIG_S wr = SIG_TAB(wr)[kk], wi = SIG_TAB(wi)[kk];
			re[kk] = er + (odr * wr - odi * wi);
			im[kk] = ei + (odr * wi + odi * wr);
			if (2 * k == n)
				break;
			/* the pair's other: Z[h - k] and conj(Z[k]) */
			SIG_V t = ar;
			ar = br, br = t;
			t = ai, ai = -bi, bi = -t;
		}
	}
	for (int64_t k = 1; p->full && k < n; k++) {
		re[2 * n - k] = re[k];
		im[2 * n - k] = -im[k];
	}
}
