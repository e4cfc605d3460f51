/* bench_gemm.c - GEMM-bound ops against the OpenBLAS sgemm rate measured in the same run.
 *
 *   bench_gemm [--repeat N] [--kernels]
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
 * rounds' ratios (ours over OpenBLAS's). */
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

/* One call of m x n x k on our kernel (own) or OpenBLAS's, whole: seconds. */
static double kernel_once(int own, int m, int n, int k, const float *a, const float *b, float *c)
{
	double t = now();
	if (own)
		sgemm_run(0, 0, m, n, k, 1, a, k, b, n, 0, c, n);
	else
		blas_sgemm_whole(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
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
	enum { SHAPES = sizeof shapes / sizeof *shapes, MAXR = 64 };
	if (repeat > MAXR)
		repeat = MAXR;
	printf("| M x N x K | graphdiet AVX-512 GFLOP/s | OpenBLAS GFLOP/s | ratio (median) | ratio range |\n"
	       "|---|---|---|---|---|\n");
	for (int i = 0; i < SHAPES; i++) {
		int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
		float *a = malloc((size_t)m * k * 4), *b = malloc((size_t)k * n * 4), *c = malloc((size_t)m * n * 4);
		for (size_t j = 0; j < (size_t)m * k; j++)
			a[j] = (float)(j % 7) * 0.1f;
		for (size_t j = 0; j < (size_t)k * n; j++)
			b[j] = (float)(j % 5) * 0.1f;
		double own[MAXR], theirs[MAXR], ratio[MAXR], fl = 2.0 * m * n * k;
		kernel_once(1, m, n, k, a, b, c);
		kernel_once(0, m, n, k, a, b, c);
		for (int r = 0; r < repeat; r++) {
			int first = r & 1;
			double t0 = kernel_once(first, m, n, k, a, b, c), t1 = kernel_once(!first, m, n, k, a, b, c);
			own[r] = first ? t0 : t1;
			theirs[r] = first ? t1 : t0;
			ratio[r] = theirs[r] / own[r];
		}
		qsort(own, (size_t)repeat, sizeof *own, by_value);
		qsort(theirs, (size_t)repeat, sizeof *theirs, by_value);
		qsort(ratio, (size_t)repeat, sizeof *ratio, by_value);
		printf("| %dx%dx%d%s | %.1f | %.1f | %.2f | %.2f-%.2f |\n", m, n, k, i < 3 ? " (pick)" : "",
		       fl / own[repeat / 2] / 1e9, fl / theirs[repeat / 2] / 1e9, ratio[repeat / 2], ratio[0],
		       ratio[repeat - 1]);
		free(a);
		free(b);
		free(c);
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
	int repeat = 5, only_kernels = 0;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--kernels"))
			only_kernels = 1;
	if (repeat < 1)
		repeat = 1;
	pool_set_threads(1);
	printf("sgemm: %s\n\n", blas_sgemm_kernel());
	if (only_kernels)
		return kernels(repeat);
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
