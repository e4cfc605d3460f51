/* bench_gemm.c - GEMM-bound ops against the OpenBLAS sgemm rate measured in the same run.
 *
 *   bench_gemm [--repeat N] [--kernels | --panels]
 *
 * For each shape: one OpenBLAS sgemm call (the peer; ops/blas.h opens it), then the same work as
 * one graphdiet node (MatMul, Gemm with bias, a 3x3 Conv) run by the executor. Prints a Markdown
 * table of GFLOP/s (best of N) and the ratio. One thread: graphdiet runs OpenBLAS at one thread
 * and cuts products over its own threads (--threads), which run_step.py measures. The nodes'
 * float32 products run on the kernel ops/blas.c picked by measuring (printed first);
 * GRAPHDIET_SGEMM=openblas or graphdiet forces either.
 *
 * --kernels: graphdiet's AVX-512 kernel (ops/sgemm.h, called whole) against one OpenBLAS call on
 * the same shapes, the run-time pick's three among them: N rounds (default 5), the two in turns
 * (which goes first alternates), the median GFLOP/s of each and the median and range of the
 * rounds' ratios (ours over OpenBLAS's).
 *
 * --panels: a recurrence's step products (16 rows of a batch times R, 2048 x 512, or R^T, and
 * other widths) on ops/blas.h's panels, made once as the LSTM, GRU and RNN kernels make them,
 * against one blas_sgemm call on the operand as given, which packs it every step: interleaved as
 * --kernels, at one thread. "(no panels)": the panels do not apply to that shape on this CPU's
 * kernels, and both run the same call. */
#include "exec/exec.h"
#include "io/yaml.h"

#include "ops/blas.h"
#include "ops/sgemm.h"
#include "util/pool.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double sgemm_best(int m, int n, int k, int repeat)
{
	float *a = calloc((size_t)m * k, 4), *b = calloc((size_t)k * n, 4), *c = calloc((size_t)m * n, 4);
	for (int i = 0; i < m * k; i++)
		a[i] = (float)(i % 7) * 0.1f;
	for (int i = 0; i < k * n; i++)
		b[i] = (float)(i % 5) * 0.1f;
	double best = 1e30;
	for (int r = 0; r <= repeat; r++) {
		double t = now();
		blas_sgemm_whole(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
		t = now() - t;
		if (r && t < best)
			best = t;
	}
	free(a);
	free(b);
	free(c);
	return best;
}

static int by_value(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

/* A product timed two ways: once(which, ctx) runs way `which` (1: ours, 0: the peer) once, in
 * seconds. */
struct pair {
	double (*once)(int which, void *ctx);
	void *ctx;
};

enum { MAXR = 64 };

/* repeat rounds of the two ways in turns (which goes first alternates), after one of each as a
 * warm-up: out[0], out[1] the median seconds of ours and the peer's, out[2..4] the median, least
 * and greatest of the rounds' ratios (the peer's time over ours) */
static void interleave(const struct pair *p, int repeat, double out[5])
{
	double own[MAXR], theirs[MAXR], ratio[MAXR];
	p->once(1, p->ctx);
	p->once(0, p->ctx);
	for (int r = 0; r < repeat; r++) {
		int first = r & 1;
		double t0 = p->once(first, p->ctx), t1 = p->once(!first, p->ctx);
		own[r] = first ? t0 : t1;
		theirs[r] = first ? t1 : t0;
		ratio[r] = theirs[r] / own[r];
	}
	qsort(own, (size_t)repeat, sizeof *own, by_value);
	qsort(theirs, (size_t)repeat, sizeof *theirs, by_value);
	qsort(ratio, (size_t)repeat, sizeof *ratio, by_value);
	out[0] = own[repeat / 2], out[1] = theirs[repeat / 2];
	out[2] = ratio[repeat / 2], out[3] = ratio[0], out[4] = ratio[repeat - 1];
}

struct operands {
	int m, n, k, tb;
	float *a, *b, *c;
	struct blas_panels p;
};

static void operands_make(struct operands *o, int m, int n, int k, int tb)
{
	*o = (struct operands){.m = m, .n = n, .k = k, .tb = tb, .a = malloc((size_t)m * k * 4),
			       .b = malloc((size_t)k * n * 4), .c = malloc((size_t)m * n * 4)};
	for (size_t j = 0; j < (size_t)m * k; j++)
		o->a[j] = (float)(j % 7) * 0.1f;
	for (size_t j = 0; j < (size_t)k * n; j++)
		o->b[j] = (float)(j % 5) * 0.1f;
}

static void operands_free(struct operands *o)
{
	free(o->a);
	free(o->b);
	free(o->c);
}

/* One call of m x n x k on our kernel (1) or OpenBLAS's (0), whole: seconds. */
static double kernel_once(int own, void *ctx)
{
	const struct operands *o = ctx;
	int m = o->m, n = o->n, k = o->k;
	double t = now();
	if (own)
		sgemm_run(0, 0, m, n, k, 1, o->a, k, o->b, n, 0, o->c, n);
	else
		blas_sgemm_whole(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, o->a, k, o->b, n, 0, o->c, n);
	return now() - t;
}

/* --kernels: the table of sgemm.c's kernel against OpenBLAS's, interleaved. */
static int kernels(int repeat)
{
	if (!sgemm_usable()) {
		printf("this CPU has no AVX-512F: graphdiet's kernel cannot run\n");
		return 0;
	}
	static const int shapes[][3] = {{128, 256, 256}, {64, 512, 256}, {128, 64, 1024}, /* the pick's */
					{256, 256, 256},  {512, 512, 512},  {1024, 1024, 1024}, {64, 4096, 4096},
					{4096, 64, 4096}, {1024, 384, 1536}, {1024, 1536, 384}, {512, 2048, 2048},
					{64, 1024, 576}};
	enum { SHAPES = sizeof shapes / sizeof *shapes };
	printf("| M x N x K | graphdiet AVX-512 GFLOP/s | OpenBLAS GFLOP/s | ratio (median) | ratio range |\n"
	       "|---|---|---|---|---|\n");
	for (int i = 0; i < SHAPES; i++) {
		struct operands o;
		operands_make(&o, shapes[i][0], shapes[i][1], shapes[i][2], 0);
		double r[5], fl = 2.0 * o.m * o.n * o.k;
		interleave(&(struct pair){kernel_once, &o}, repeat, r);
		printf("| %dx%dx%d%s | %.1f | %.1f | %.2f | %.2f-%.2f |\n", o.m, o.n, o.k, i < 3 ? " (pick)" : "",
		       fl / r[0] / 1e9, fl / r[1] / 1e9, r[2], r[3], r[4]);
		operands_free(&o);
	}
	return 0;
}

/* One step product C = A op(B) on blas.h's panels (1) or as one blas_sgemm (0): seconds. */
static double panels_once(int panels, void *ctx)
{
	struct operands *o = ctx;
	double t = now();
	if (panels)
		blas_panels_sgemm(&o->p, o->a, o->k, o->c, o->n);
	else
		blas_sgemm(CblasRowMajor, CblasNoTrans, o->tb ? CblasTrans : CblasNoTrans, o->m, o->n, o->k, 1, o->a, o->k,
			   o->b, o->tb ? o->k : o->n, 0, o->c, o->n);
	return now() - t;
}

/* --panels: a recurrence's step products (rows of a batch times R, or R^T) on panels made once,
 * against one blas_sgemm call each (which packs R every step), interleaved. */
static int panels(int repeat)
{
	static const int shapes[][4] = {{16, 2048, 512, 1}, {16, 512, 2048, 0}, {16, 1024, 256, 1}, {16, 256, 1024, 0},
					{8, 2048, 512, 1},  {32, 2048, 512, 1}, {64, 2048, 512, 1}, {1, 2048, 512, 1},
					{16, 1536, 512, 1}, {16, 512, 1536, 0}};
	enum { SHAPES = sizeof shapes / sizeof *shapes };
	printf("| M x N x K (B^T) | panels GFLOP/s | one blas_sgemm GFLOP/s | ratio (median) | ratio range |\n"
	       "|---|---|---|---|---|\n");
	for (int i = 0; i < SHAPES; i++) {
		struct operands o;
		operands_make(&o, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
		float *buf = malloc(blas_panels_bytes(o.m, o.n, o.k) + 1);
		blas_panels_make(&o.p, o.m, o.n, o.k, o.tb, o.b, o.tb ? o.k : o.n, buf);
		double r[5], fl = 2.0 * o.m * o.n * o.k;
		interleave(&(struct pair){panels_once, &o}, repeat, r);
		printf("| %dx%dx%d%s | %.1f%s | %.1f | %.2f | %.2f-%.2f |\n", o.m, o.n, o.k, o.tb ? " (B^T)" : "",
		       fl / r[0] / 1e9, o.p.p ? "" : " (no panels)", fl / r[1] / 1e9, r[2], r[3], r[4]);
		free(buf);
		operands_free(&o);
	}
	return 0;
}

/* Best executor time of the single-node graph in `text` (its inputs random). */
static double node_best(const char *text, int repeat, uint64_t *flops)
{
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "bench", ".", &e);
	if (!g || graph_check(g, &e) || graph_toposort(g, &e)) {
		fprintf(stderr, "bench_gemm: %s\n", e.msg);
		exit(2);
	}
	struct exec_opts o = {.random_inputs = 1, .seed = 1};
	double best = 1e30;
	for (int r = 0; r <= repeat; r++) {
		struct exec_stats s;
		struct exec *x = exec_run(g, &o, &s, &e);
		if (!x) {
			fprintf(stderr, "bench_gemm: %s\n", e.msg);
			exit(2);
		}
		exec_free(x);
		if (r && s.seconds < best) {
			best = s.seconds;
			*flops = s.flops;
		}
	}
	graph_free(g);
	return best;
}

int main(int argc, char **argv)
{
	int repeat = 5, only_kernels = 0, only_panels = 0;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--kernels"))
			only_kernels = 1;
		else if (!strcmp(argv[i], "--panels"))
			only_panels = 1;
	if (repeat < 1)
		repeat = 1;
	if (repeat > MAXR)
		repeat = MAXR;
	pool_set_threads(1);
	printf("sgemm: %s\n\n", blas_sgemm_kernel());
	if (only_kernels)
		return kernels(repeat);
	if (only_panels)
		return panels(repeat);
	printf("| op | shape | graphdiet GFLOP/s | sgemm GFLOP/s (same M,N,K) | ratio |\n|---|---|---|---|---|\n");
	static const int sizes[] = {256, 512, 1024};
	char text[1024];
	for (int i = 0; i < 3; i++) {
		int n = sizes[i];
		uint64_t fl = 0;
		double peak = 2.0 * n * n * n / sgemm_best(n, n, n, repeat) / 1e9;
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: a, dtype: float32, shape: [%d, %d]}, {name: b, dtype: float32, shape: [%d, %d]}]\n"
			 "nodes: [{op: MatMul, inputs: [a, b], outputs: [y]}]\noutputs: [{name: y}]\n",
			 n, n, n, n);
		double t = node_best(text, repeat, &fl);
		printf("| MatMul | %dx%d @ %dx%d | %.1f | %.1f | %.2f |\n", n, n, n, n, fl / t / 1e9, peak, fl / t / 1e9 / peak);
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: a, dtype: float32, shape: [%d, %d]}, {name: b, dtype: float32, shape: [%d, %d]},"
			 " {name: c, dtype: float32, shape: [%d]}]\n"
			 "nodes: [{op: Gemm, inputs: [a, b, c], outputs: [y], attrs: {transB: 1}}]\noutputs: [{name: y}]\n",
			 n, n, n, n, n);
		t = node_best(text, repeat, &fl);
		printf("| Gemm (transB, bias) | %dx%d @ %dx%d^T | %.1f | %.1f | %.2f |\n", n, n, n, n, fl / t / 1e9, peak,
		       fl / t / 1e9 / peak);
	}
	/* a d256 transformer's at 1024 tokens: the feed-forward products, then a weight's gradient
	 * (X^T dY, 256 x 1024 from 1024 tokens), which is cut by columns */
	static const struct {
		int m, k, n, ta;
	} tf[] = {{1024, 256, 1024, 0}, {1024, 1024, 256, 0}, {256, 1024, 1024, 1}};
	for (int i = 0; i < 3; i++) {
		uint64_t fl = 0;
		double peak = 2.0 * tf[i].m * tf[i].n * tf[i].k / sgemm_best(tf[i].m, tf[i].n, tf[i].k, repeat) / 1e9;
		int ar = tf[i].ta ? tf[i].k : tf[i].m, ac = tf[i].ta ? tf[i].m : tf[i].k;
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: a, dtype: float32, shape: [%d, %d]}, {name: b, dtype: float32, shape: [%d, %d]}]\n"
			 "nodes: [{op: Gemm, inputs: [a, b], outputs: [y], attrs: {transA: %d}}]\noutputs: [{name: y}]\n",
			 ar, ac, tf[i].k, tf[i].n, tf[i].ta);
		double t = node_best(text, repeat, &fl);
		printf("| Gemm%s | %dx%d%s @ %dx%d | %.1f | %.1f | %.2f |\n", tf[i].ta ? " (transA)" : "", ar, ac,
		       tf[i].ta ? "^T" : "", tf[i].k, tf[i].n, fl / t / 1e9, peak, fl / t / 1e9 / peak);
	}
	/* attention's per-head products, 32 heads of 128 tokens (d 64): P V, 128 x 64 from 128 each, a
	 * little above OpenBLAS's small-matrix kernels' reach (src/ops/blas.c runs it as pieces); the
	 * ceiling is one whole call of one head's shape */
	uint64_t fl = 0;
	double peak = 2.0 * 128 * 64 * 128 / sgemm_best(128, 64, 128, repeat) / 1e9;
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: a, dtype: float32, shape: [32, 128, 128]}, {name: b, dtype: float32, shape: [32, 128, 64]}]\n"
		 "nodes: [{op: MatMul, inputs: [a, b], outputs: [y]}]\noutputs: [{name: y}]\n");
	double t = node_best(text, repeat, &fl);
	printf("| MatMul (32 heads) | 32x128x128 @ 32x128x64 | %.1f | %.1f | %.2f |\n", fl / t / 1e9, peak, fl / t / 1e9 / peak);
	/* a ResNet-style 3x3 convolution: M = 64 output channels, N = 32*32 pixels, K = 64*9 */
	peak = 2.0 * 64 * 1024 * 576 / sgemm_best(64, 1024, 576, repeat) / 1e9;
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [8, 64, 32, 32]}]\n"
		 "params: [{name: w, dtype: float32, shape: [64, 64, 3, 3], init: {dist: normal, seed: 1}}]\n"
		 "nodes: [{op: Conv, inputs: [x, w], outputs: [y], attrs: {pads: [1, 1, 1, 1]}}]\noutputs: [{name: y}]\n");
	t = node_best(text, repeat, &fl);
	printf("| Conv 3x3 | 8x64x32x32, 64 filters | %.1f | %.1f | %.2f |\n", fl / t / 1e9, peak, fl / t / 1e9 / peak);
	return 0;
}
