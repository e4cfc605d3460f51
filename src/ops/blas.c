/* blas.c - see blas.h. */
#include "blas.h"
#include "kernel.h"
#include "sgemm.h"
#include "../util/pool.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#ifndef GD_BLAS_SONAME
#define GD_BLAS_SONAME "libopenblas.so.0"
#endif

static void (*sgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, float, const float *,
		     int, const float *, int, float, float *, int);
static void (*dgemm)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, double,
		     const double *, int, const double *, int, double, double *, int);
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int cores;       /* online: the most pieces a product is cut into */
static int wide_kernels; /* OpenBLAS's AVX-512 kernels (SkylakeX, Cooperlake): float32 cuts in columns keep the sums */
static int own_sgemm;    /* float32 products on sgemm.c's kernel, not OpenBLAS's */
static char load_error[256]; /* why OpenBLAS could not be opened, or "" */
static char picked[320];     /* which kernel runs float32 products, and why (blas_sgemm_kernel) */

#define PICK_MARGIN 1.3 /* how much faster sgemm.c's kernel must measure than OpenBLAS's to be picked */
#define PICK_ROUNDS 7    /* rounds of pick_sgemm's products, each kernel once a round */

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds of one round of the products the pick times, on sgemm.c's kernel (own) or OpenBLAS's,
 * each called whole, at one thread: a square-ish 128 x 256 x 256, a skinny one (a batch of 64
 * rows through a 256 x 512 layer) and a narrow one of a long k (a weight gradient's: n 64, one
 * panel of the 6 x 64 tile, k 1024), 8.4M multiply-adds each, about 0.55 ms a round at
 * 90 GFLOP/s. own -1 or -2: the probe, 64 x 64 x 256, on ours or OpenBLAS's. */
static double pick_round(int own, float *a, float *b, float *c)
{
	static const int shapes[][3] = {{128, 256, 256}, {64, 512, 256}, {128, 64, 1024}, /* m, n, k */
					{64, 64, 256}}; /* the probe (pick_sgemm) */
	double t = seconds();
	for (int i = own < 0 ? 3 : 0; i < (own < 0 ? 4 : 3); i++) {
		int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
		if (own == 1 || own == -1)
			sgemm_run(0, 0, m, n, k, 1, a, k, b, n, 0, c, n);
		else
			sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
	}
	return seconds() - t;
}

static int by_value(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* Whether float32 products run on sgemm.c's kernel: GRAPHDIET_SGEMM=graphdiet or openblas forces
 * either (graphdiet only where the CPU has AVX-512F), another value is an error (exit 2); unset
 * or empty, it is measured once per process, here, at the first product. First a probe, one
 * small product on each, best of 3: where ours takes over twice OpenBLAS's time (an unoptimised
 * or sanitizer build) the pick is OpenBLAS at once, with the probe's times. Else one round of
 * pick_round each to warm caches and page in the operands, then PICK_ROUNDS rounds, the two
 * kernels in turns (which goes first alternates); sgemm.c's kernel is picked only when
 * OpenBLAS's best round over ours is PICK_MARGIN or more. The best rounds, not the median of
 * the rounds' ratios: on a loaded machine a kernel preempted in most of its rounds made the
 * median ratio 9.66 in 1 of 40 starts (2 busy loops on this project's 2 cores), and that process
 * multiplied with the other kernel, other bits than its neighbours' (a --threads 1 against 2
 * comparison of two processes failed in ctest); a best round is one the scheduler let run.
 * On this project's Zen 4, whose 512-bit FMAs run at the 256-bit rate, ours is a little faster
 * on these small products and no faster on large ones (bench_gemm --kernels; a training step
 * 0.97-1.09x): 250 process starts measured ratios of 0.93 to 1.16, median 1.10, so a margin of
 * 1.15 would have let noise tip some processes to ours; at 1.3 none did, and on the Zen 5 where
 * OpenBLAS runs its AVX2 kernels (ours 1.4-1.9x) noise cannot tip the pick to OpenBLAS either.
 * About 10 ms of CPU, once, in a process that multiplies floats; the pick and both times go
 * into picked for graphdiet --version. The pick never changes within a process, so recomputes,
 * plan against run and verify's comparisons all see one kernel; across processes it holds as
 * long as the CPU does not measure near the margin (GRAPHDIET_SGEMM fixes it where it does). */
static int pick_sgemm(void)
{
	const char *force = getenv("GRAPHDIET_SGEMM");
	if (force && *force && strcmp(force, "openblas") && strcmp(force, "graphdiet")) {
		fprintf(stderr, "graphdiet: error: GRAPHDIET_SGEMM=%s: expected openblas or graphdiet (or unset, to measure)\n",
			force);
		exit(2);
	}
	if (!sgemm_usable()) {
		snprintf(picked, sizeof picked, "OpenBLAS's (this CPU has no AVX-512%s)",
			 force && !strcmp(force, "graphdiet") ? "; GRAPHDIET_SGEMM=graphdiet cannot run here" : "");
		return 0;
	}
	if (force && *force) {
		int own = !strcmp(force, "graphdiet");
		snprintf(picked, sizeof picked, "%s (GRAPHDIET_SGEMM=%s)", own ? "graphdiet's AVX-512 kernel" : "OpenBLAS's",
			 force);
		return own;
	}
	enum { SIDE = 128 * 1024 }; /* the largest operand of pick_round's products */
	float *a = malloc(3 * SIDE * sizeof *a), *b = a ? a + SIDE : NULL, *c = a ? b + SIDE : NULL;
	if (!a) {
		snprintf(picked, sizeof picked, "OpenBLAS's (no memory to measure graphdiet's AVX-512 kernel against it)");
		return 0;
	}
	for (int i = 0; i < 2 * SIDE; i++)
		a[i] = (float)(i % 13) * 0.125f - 0.75f;
	double own[PICK_ROUNDS], theirs[PICK_ROUNDS];
	/* the probe: ours at half OpenBLAS's speed or less (an unoptimised or sanitizer build, ours at
	 * 0.2 GFLOP/s: 5 ms) needs no rounds, which would take 0.8 s. The best of 3 each, as one
	 * preempted or cold call (of 20 us in an optimised build) can take 50 times as long. */
	own[0] = theirs[0] = 1e30;
	for (int i = 0; i < 3; i++) {
		double t = pick_round(-1, a, b, c);
		own[0] = t < own[0] ? t : own[0];
		t = pick_round(-2, a, b, c);
		theirs[0] = t < theirs[0] ? t : theirs[0];
	}
	int rounds = theirs[0] / own[0] < 0.5 ? 1 : PICK_ROUNDS;
	if (rounds > 1) { /* warm-up */
		pick_round(1, a, b, c);
		pick_round(0, a, b, c);
	}
	for (int r = 0; rounds > 1 && r < PICK_ROUNDS; r++) {
		if (r & 1) {
			theirs[r] = pick_round(0, a, b, c);
			own[r] = pick_round(1, a, b, c);
		} else {
			own[r] = pick_round(1, a, b, c);
			theirs[r] = pick_round(0, a, b, c);
		}
	}
	free(a);
	qsort(own, (size_t)rounds, sizeof *own, by_value);
	qsort(theirs, (size_t)rounds, sizeof *theirs, by_value);
	double best = theirs[0] / own[0];
	int mine = best >= PICK_MARGIN;
	snprintf(picked, sizeof picked,
		 "%s (measured: graphdiet's AVX-512 kernel %.3f ms, OpenBLAS's %.3f ms, ratio %.2f; graphdiet's "
		 "needs %.2f; GRAPHDIET_SGEMM=openblas or graphdiet forces either)",
		 mine ? "graphdiet's AVX-512 kernel" : "OpenBLAS's", own[0] * 1e3, theirs[0] * 1e3, best, PICK_MARGIN);
	return mine;
}

/* Opens OpenBLAS (load_error says why not) and picks the float32 kernel. */
static void open_blas(void)
{
	long c = sysconf(_SC_NPROCESSORS_ONLN);
	cores = c < 1 ? 1 : c > POOL_MAX ? POOL_MAX : (int)c;
	/* one thread of its own: the pool's threads call it */
	setenv("OPENBLAS_NUM_THREADS", "1", 1);
	void *h = dlopen(GD_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		void (*set_threads)(int);
		char *(*corename)(void);
		*(void **)&sgemm = dlsym(h, "cblas_sgemm");
		*(void **)&dgemm = dlsym(h, "cblas_dgemm");
		*(void **)&set_threads = dlsym(h, "openblas_set_num_threads");
		*(void **)&corename = dlsym(h, "openblas_get_corename");
		if (set_threads) /* loaded before (by a test's or a bench's process): started its threads */
			set_threads(1);
		const char *core = corename ? corename() : "";
		wide_kernels = core && (!strcasecmp(core, "skylakex") || !strcasecmp(core, "cooperlake"));
	}
	if (!sgemm || !dgemm) {
		snprintf(load_error, sizeof load_error, "cannot load OpenBLAS (%s): %s (install libopenblas0)",
			 GD_BLAS_SONAME, h ? "it has no cblas_sgemm or cblas_dgemm" : dlerror());
		snprintf(picked, sizeof picked, "none: %s", load_error);
		return;
	}
	own_sgemm = pick_sgemm();
}

/* Opens OpenBLAS once, or exits 3 saying why it cannot. */
static void need_blas(void)
{
	pthread_once(&once, open_blas);
	if (*load_error) {
		fprintf(stderr, "graphdiet: error: %s\n", load_error);
		exit(3);
	}
}

const char *blas_sgemm_kernel(void)
{
	pthread_once(&once, open_blas);
	return picked;
}

void blas_describe(char *buf, size_t n)
{
	setenv("OPENBLAS_NUM_THREADS", "1", 1); /* as open_blas: no threads of its own started */
	void *h = dlopen(GD_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(buf, n, "%s cannot be loaded: %s", GD_BLAS_SONAME, dlerror());
		return;
	}
	char *(*config)(void), *(*corename)(void);
	*(void **)&config = dlsym(h, "openblas_get_config");
	*(void **)&corename = dlsym(h, "openblas_get_corename");
	snprintf(buf, n, "%s (%s, core %s)", config ? config() : "not OpenBLAS", GD_BLAS_SONAME,
		 corename ? corename() : "unknown");
}

/* A product split into pieces of `step` rows (by_rows) or columns of C, in row-major order. */
struct gemm {
	int wide; /* double */
	enum CBLAS_TRANSPOSE ta, tb;
	int m, n, k, lda, ldb, ldc, by_rows, step, pieces; /* the last piece runs to the end */
	double alpha, beta;
	const void *a, *b;
	void *c;
	int zero; /* C is zeroed piece by piece, and beta is 1 (gemm_run) */
	int own;  /* float32 on sgemm.c's kernel (own_cut) */
	int turn; /* B is read as A B^T's, n x k: each piece turns its rows and multiplies A B (plain_b) */
};

#define PIECE_MACS (1 << 21) /* a piece's work at least: about 40 us at 100 GFLOP/s */
#define SMALL_SPAN (1 << 23)  /* products small_pieces may cut */
#define ROW_ALIGN 48          /* pieces of rows of C: a multiple of the kernels' tiles (16; Haswell's 12) */
#define COL_ALIGN 16          /* pieces of columns, and of rows with the AVX-512 float32 kernels */
#define SMALL_MACS 1000000    /* OpenBLAS's small-matrix kernels take products up to 100^3 multiply-adds */
#define SMALL_ROWS 16         /* rows a piece for them at least */
#define TURN_MAX 16384        /* elements of B plain_b turns, at most: a buffer on the stack */

/* A piece of a turned product (plain_b): its n rows of B turned into a copy of this core's (one
 * turned by another core came over slowly: 16 us, not 9, at 2 threads), then A B. */
static void turned_sgemm(const struct gemm *g, int m, int n, const float *a, const float *b, float *c)
{
	float turned[TURN_MAX];
	transpose2(b, 1, n, g->k, sizeof *b, turned);
	sgemm(CblasRowMajor, g->ta, CblasNoTrans, m, n, g->k, (float)g->alpha, a, g->lda, turned, n, (float)g->beta, c,
	      g->ldc);
}

static void gemm_piece(void *arg, uint32_t i, uint32_t w)
{
	(void)w;
	const struct gemm *g = arg;
	size_t sz = g->wide ? sizeof(double) : sizeof(float);
	int lo = (int)i * g->step, hi = (int)i + 1 < g->pieces ? lo + g->step : g->by_rows ? g->m : g->n;
	int m = g->m, n = g->n;
	const char *a = g->a, *b = g->b;
	char *c = g->c;
	if (g->by_rows) { /* rows lo..hi of op(A) and of C */
		m = hi - lo;
		a += (size_t)lo * (g->ta == CblasNoTrans ? (size_t)g->lda : 1) * sz;
		c += (size_t)lo * (size_t)g->ldc * sz;
	} else { /* columns lo..hi of op(B) and of C */
		n = hi - lo;
		b += (size_t)lo * (g->tb == CblasNoTrans && !g->turn ? 1 : (size_t)g->ldb) * sz;
		c += (size_t)lo * sz;
	}
	if (g->zero)
		for (int r = 0; r < m; r++)
			memset(c + (size_t)r * (size_t)g->ldc * sz, 0, (size_t)n * sz);
	if (g->own)
		sgemm_run(g->ta == CblasTrans, g->tb == CblasTrans, m, n, g->k, (float)g->alpha, (const float *)a, g->lda,
			  (const float *)b, g->ldb, (float)g->beta, (float *)c, g->ldc);
	else if (g->turn)
		turned_sgemm(g, m, n, (const float *)a, (const float *)b, (float *)c);
	else if (g->wide)
		dgemm(CblasRowMajor, g->ta, g->tb, m, n, g->k, g->alpha, (const double *)a, g->lda, (const double *)b,
		      g->ldb, g->beta, (double *)c, g->ldc);
	else
		sgemm(CblasRowMajor, g->ta, g->tb, m, n, g->k, (float)g->alpha, (const float *)a, g->lda,
		      (const float *)b, g->ldb, (float)g->beta, (float *)c, g->ldc);
}

/* A product below SMALL_SPAN, a little above what OpenBLAS's AVX-512 small-matrix kernels take
 * (SMALL_MACS): pieces of rows of C within their reach, over the threads (with one, one after the
 * other), instead of gemm_run's cut.
 * Those kernels skip packing, and such products (attention's 128 x 64 x 128 per head, 1.05M
 * multiply-adds) run 8-18% faster as pieces (bench_gemm), except those OpenBLAS sees as A^T B
 * (ours A B^T: ta none, tb transposed), which it keeps off them. Float32 only, and only with those
 * kernels; elsewhere g stays one piece. The pieces follow from the shape alone. */
static void small_pieces(struct gemm *g, double macs)
{
	if (!wide_kernels || g->wide || macs <= SMALL_MACS || (g->ta == CblasNoTrans && g->tb == CblasTrans))
		return;
	int step = (int)(SMALL_MACS / ((double)g->n * g->k));
	if (step < SMALL_ROWS)
		return;
	g->by_rows = 1;
	g->step = step;
	g->pieces = (g->m + step - 1) / step;
}

/* Whether OpenBLAS's AVX-512 small-matrix kernels (0.3.21: kernel/x86_64/
 * sgemm_small_kernel_permit_skylakex.c) take g's float32 product with m x n of C: up to
 * SMALL_MACS multiply-adds, but never A^T B^T, and A B^T (its transposed-A, plain-B case) only
 * with 1200 elements of C at most and k of 32 or more. */
static int small_kernel(const struct gemm *g, int m, int n)
{
	if ((double)m * n * g->k > SMALL_MACS || (g->ta == CblasTrans && g->tb == CblasTrans))
		return 0;
	return g->ta == CblasTrans || g->tb == CblasNoTrans || ((long)m * n <= 1200 && g->k >= 32);
}

/* A float32 product too small for gemm_run's cut or small_pieces' (a recurrent layer's 32 x 128 x
 * 128, 14 us), cut for the threads anyway when they are 2 or more: the longer side of C into as
 * many pieces as threads, on multiples of 16, each TINY_MACS multiply-adds at least. Each piece
 * must go to the same OpenBLAS kernel as the whole: then, with the AVX-512 float32 kernels, every
 * element is the same sum (20000 random shapes of 50000 to SMALL_MACS multiply-adds, either
 * operand transposed, beta 0 and 1, alpha 1 and 0.5, cut in rows and in columns: no bit differs
 * where the small-matrix kernel takes both or neither, the "direct" one (A B, alpha 1, beta 0)
 * included; where it takes the pieces of an A B^T and not the whole, 7% of shapes differ), and
 * with one thread it runs whole. An rnn's step (d128, batch 32) at 2 threads: 1.07 -> 0.83 ms. */
#define TINY_MACS (1 << 17) /* about 3.5 us */
static void tiny_pieces(struct gemm *g, double macs)
{
	int side = g->by_rows ? g->m : g->n, pieces = pool_threads();
	if (!wide_kernels || g->wide || pieces < 2)
		return;
	if (pieces > macs / TINY_MACS)
		pieces = (int)(macs / TINY_MACS);
	if (pieces > side / COL_ALIGN)
		pieces = side / COL_ALIGN;
	if (pieces < 2)
		return;
	int step = ((side + pieces - 1) / pieces + COL_ALIGN - 1) / COL_ALIGN * COL_ALIGN;
	int last = side - (side - 1) / step * step, whole = small_kernel(g, g->m, g->n);
	if (g->by_rows ? small_kernel(g, step, g->n) != whole || small_kernel(g, last, g->n) != whole
		       : small_kernel(g, g->m, step) != whole || small_kernel(g, g->m, last) != whole)
		return;
	g->step = step;
	g->pieces = (side + step - 1) / step;
}

/* A float32 A B^T that OpenBLAS's small-matrix kernels leave to its packing driver (C of over 1200
 * elements) but take as A B: each piece turns the rows of B it reads (transpose2), then multiplies
 * A B. A recurrent layer's 32 x 128 x 128 took 13.1 us, now 2 + 8.5. Measured from 8 x 64 x 32 to
 * 128 x 128 x 32 (up to SMALL_MACS): 17-30% faster with m of 16 or more; with 8, the turn costs as
 * much as it saves or more. Whether B is turned follows from the shape alone, as the kernel's sums
 * differ. */
static void plain_b(struct gemm *g)
{
	if (wide_kernels && !g->wide && g->ta == CblasNoTrans && g->tb == CblasTrans && g->m >= 16 && g->ldb == g->k &&
	    (double)g->m * g->n * g->k <= SMALL_MACS && (long)g->n * g->k <= TURN_MAX && !small_kernel(g, g->m, g->n)) {
		g->turn = 1;
		g->tb = CblasNoTrans;
	}
}

/* Runs g over the pool: the longer of C's two sides is cut into pieces, as many as the machine
 * has cores at most, each of PIECE_MACS multiply-adds or more (a 64 x 256 x 256 layer's product
 * too: at 2^22 it ran on one core, and a 12-layer MLP of them took as long with 2 threads as with
 * 1). Each piece packs the other operand again, so more pieces than cores would only cost (7% of
 * a transformer's step at 1 thread with 8 pieces).
 *
 * The pieces follow from the shape and the cores alone, and every element of C is the same sum
 * whatever --threads is. With one thread a product runs whole where that gives the same sums,
 * saving each piece's second packing (1-7% of its time). OpenBLAS's blocked driver cuts k by k
 * alone, but whether an element's sum depends on where the call's edges are differs by kernel
 * (OpenBLAS picks the SkylakeX or Cooperlake ones on AVX-512 CPUs, Haswell's on AVX2 ones, Zen 2
 * and 3 among them):
 *   - rows of C (OpenBLAS's n, as C is row-major): the Cooperlake (SkylakeX) float32 kernels sum
 *     the same for any cut on a multiple of 16, the Haswell ones on a multiple of 12, and both
 *     sets' float64 ones on multiples of 48 (the AVX-512 ones not on every multiple of 16: 34 of
 *     60 random shapes differ); all checked with random shapes, K up to 2500, either operand
 *     transposed. So pieces of rows start on multiples of 16 with the AVX-512 float32 kernels
 *     (two pieces of 512 rows of 1024, not 528 and 496; of 147, 80 and 67, not 96 and 51), of 48
 *     otherwise, and with one thread such a product runs whole;
 *   - columns (OpenBLAS's m): the AVX-512 float32 kernels sum the same for any cut on a multiple
 *     of 16, and a float32 product cut by columns runs whole with them too. Other kernels' sums
 *     change with the call's width: the Haswell float32 ones (a piece of 256 columns of 1024
 *     differs in its last 8 from the whole) and the AVX-512 float64 ones (50 of 60 random shapes
 *     cut on multiples of 16 differ somewhere). So with those, and any kernels not named here, a
 *     product cut by columns runs as its pieces, one after the other with one thread: 1% of a
 *     d256 transformer's products, which pack A again.
 * OpenBLAS's other kernels, which may sum otherwise, are kept off products that are cut: the
 * small-matrix ones take only products below 100^3 multiply-adds (a piece has 2^20 at least), and
 * the "direct" one (non-transposed float32 products below 28 x 512^2 with beta 0) is never asked,
 * as C is zeroed here and beta made 1. */
static void gemm_cut(struct gemm *g)
{
	g->by_rows = g->m >= g->n;
	int side = g->by_rows ? g->m : g->n;
	int align = g->by_rows && !(wide_kernels && !g->wide) ? ROW_ALIGN : COL_ALIGN; /* 16 rows: AVX-512 float32 */
	int least = g->by_rows ? ROW_ALIGN : 2 * COL_ALIGN; /* 48 rows or 32 columns a piece at least */
	double macs = (double)g->m * g->n * g->k;
	int pieces = macs / PIECE_MACS < cores ? (int)(macs / PIECE_MACS) : cores;
	if (pieces > side / least)
		pieces = side / least;
	g->pieces = 1;
	if (macs < SMALL_SPAN)
		small_pieces(g, macs);
	if (g->pieces == 1 && pieces < 2)
		tiny_pieces(g, macs);
	if (g->pieces > 1 || pieces < 2) { /* small_pieces' or tiny_pieces' (over the threads), or whole */
		if (g->pieces > 1 && pool_threads() >= 2)
			pool_for((uint32_t)g->pieces, gemm_piece, g);
		else
			for (int i = 0; i < g->pieces; i++)
				gemm_piece(g, (uint32_t)i, 0);
		return;
	}
	if (g->beta == 0) {
		g->zero = 1;
		g->beta = 1;
	}
	int step = (side + pieces - 1) / pieces;
	g->step = (step + align - 1) / align * align;
	/* a remainder under half a piece joins the last: every piece has half a piece's share of the
	 * work at least, 2^20 multiply-adds, out of the small-matrix kernels' reach */
	g->pieces = side / g->step + (side % g->step >= g->step / 2);
	if (pool_threads() >= 2)
		pool_for((uint32_t)g->pieces, gemm_piece, g);
	else if (g->by_rows || (wide_kernels && !g->wide)) { /* whole: the same sums */
		g->pieces = 1;
		gemm_piece(g, 0, 0);
	} else
		for (int i = 0; i < g->pieces; i++)
			gemm_piece(g, (uint32_t)i, 0);
}

/* A float32 product on sgemm.c's kernel, whose sums are the same for any cut of C: C's longer side
 * in one piece a thread (fewer where a piece would have under OWN_MACS multiply-adds), on whole
 * tiles' rows or whole vectors' columns. Each piece packs the other operand itself. */
#define OWN_MACS (1 << 17) /* about 1.5 us at 170 GFLOP/s */
static void own_cut(struct gemm *g)
{
	g->own = 1;
	g->by_rows = g->m >= g->n;
	int side = g->by_rows ? g->m : g->n, align = g->by_rows ? SGEMM_MR : 16;
	double macs = (double)g->m * g->n * g->k;
	int pieces = pool_threads();
	if (pieces > macs / OWN_MACS)
		pieces = (int)(macs / OWN_MACS);
	if (pieces > (side + align - 1) / align)
		pieces = (side + align - 1) / align;
	if (pieces < 2) {
		g->step = side;
		g->pieces = 1;
		gemm_piece(g, 0, 0);
		return;
	}
	g->step = ((side + pieces - 1) / pieces + align - 1) / align * align;
	g->pieces = (side + g->step - 1) / g->step;
	pool_for((uint32_t)g->pieces, gemm_piece, g);
}

/* g on sgemm.c's kernel, or OpenBLAS's with B turned where that is faster (plain_b). */
static void gemm_run(struct gemm *g)
{
	need_blas();
	if (own_sgemm && !g->wide) {
		own_cut(g);
		return;
	}
	plain_b(g);
	gemm_cut(g);
}

void blas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
		float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	struct gemm g = {.wide = 0, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
			 .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c};
	if (order == CblasColMajor) /* C^T = op(B)^T op(A)^T in row-major terms */
		g = (struct gemm){.wide = 0, .ta = tb, .tb = ta, .m = n, .n = m, .k = k, .lda = ldb, .ldb = lda, .ldc = ldc,
				  .alpha = alpha, .beta = beta, .a = b, .b = a, .c = c};
	gemm_run(&g);
}

void blas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
		double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
	struct gemm g = {.wide = 1, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
			 .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c};
	if (order == CblasColMajor)
		g = (struct gemm){.wide = 1, .ta = tb, .tb = ta, .m = n, .n = m, .k = k, .lda = ldb, .ldb = lda, .ldc = ldc,
				  .alpha = alpha, .beta = beta, .a = b, .b = a, .c = c};
	gemm_run(&g);
}

void blas_sgemm_whole(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
		      float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
	need_blas();
	sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#define PANEL_ROWS 64   /* rows of A a product on panels has at most (1.16x at 64, 1.8x at 16) */
#define PANEL_WIDTH 128 /* columns a panel at most */

static int panel_width(int m, int n, int k)
{
	need_blas();
	if (!wide_kernels || own_sgemm || m < 1 || m > PANEL_ROWS || n < 1 || k < 1)
		return 0;
	double w = SMALL_MACS / ((double)m * k);
	int width = w >= PANEL_WIDTH ? PANEL_WIDTH : (int)w / 16 * 16;
	return width >= 16 ? width : 0;
}

size_t blas_panels_bytes(int m, int n, int k)
{
	return panel_width(m, n, k) ? (size_t)n * (size_t)k * sizeof(float) : 0;
}

void blas_panels_make(struct blas_panels *p, int m, int n, int k, int tb, const float *b, int ldb, float *buf)
{
	*p = (struct blas_panels){.b = b, .tb = tb, .ldb = ldb, .m = m, .n = n, .k = k, .width = panel_width(m, n, k)};
	if (!p->width || !buf)
		return;
	for (int j0 = 0; j0 < n; j0 += p->width) {
		int w = n - j0 < p->width ? n - j0 : p->width;
		float *panel = buf + (size_t)j0 * (size_t)k;
		if (tb && ldb == k) /* rows j0.. of B, turned */
			transpose2(b + (size_t)j0 * (size_t)ldb, 1, w, k, sizeof *b, panel);
		else if (tb)
			for (int r = 0; r < k; r++)
				for (int j = 0; j < w; j++)
					panel[(size_t)r * (size_t)w + j] = b[(size_t)(j0 + j) * (size_t)ldb + r];
		else
			for (int r = 0; r < k; r++)
				memcpy(panel + (size_t)r * (size_t)w, b + (size_t)r * (size_t)ldb + j0, (size_t)w * sizeof *b);
	}
	p->p = buf;
}

struct panels_run {
	const struct blas_panels *p;
	const float *a;
	float *c;
	int lda, ldc, per; /* panels a piece */
};

static void panels_piece(void *arg, uint32_t i, uint32_t w)
{
	(void)w;
	const struct panels_run *r = arg;
	const struct blas_panels *p = r->p;
	int panels = (p->n + p->width - 1) / p->width;
	for (int j = (int)i * r->per; j < panels && j < ((int)i + 1) * r->per; j++) {
		int j0 = j * p->width, cols = p->n - j0 < p->width ? p->n - j0 : p->width;
		sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->m, cols, p->k, 1, r->a, r->lda,
		      p->p + (size_t)j0 * (size_t)p->k, cols, 0, r->c + j0, r->ldc);
	}
}

void blas_panels_sgemm(const struct blas_panels *p, const float *a, int lda, float *c, int ldc)
{
	if (!p->p) {
		blas_sgemm(CblasRowMajor, CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, p->m, p->n, p->k, 1, a, lda, p->b,
			   p->ldb, 0, c, ldc);
		return;
	}
	int panels = (p->n + p->width - 1) / p->width, pieces = pool_threads() < panels ? pool_threads() : panels;
	struct panels_run r = {.p = p, .a = a, .c = c, .lda = lda, .ldc = ldc, .per = (panels + pieces - 1) / pieces};
	if (pieces >= 2)
		pool_for((uint32_t)((panels + r.per - 1) / r.per), panels_piece, &r);
	else
		panels_piece(&r, 0, 0);
}
