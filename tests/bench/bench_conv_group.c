/* bench_conv_group - grouped and depthwise convolutions (conv_group.c) against their roofs: for each
 * layer, the forward Conv, the ConvTranspose that differentiates its input (as conv.c's gradient rule
 * writes it) and the Conv that grouped_weight_grad makes of its weight's gradient (the batch as
 * channels, dY's planes as the kernel), each one node run by the executor on seeded random inputs and
 * timed from its per-op profile (kernels only).
 *
 *   bench_conv_group [--threads N] [--repeat N]
 *
 * Each time is the fastest of --repeat runs (default 5).
 * Two roofs, both measured in the same run: a streaming copy (memcpy between two faulted-in 64 MiB
 * buffers, the fastest of the runs; GB/s counts the node's input and output tensors once each) and
 * the FMA peak (AVX-512 FMAs on 12 independent accumulators, one core, times --threads; GFLOP/s
 * counts 2 (C/group) kh kw a product). A depthwise layer does 2 kh kw = 18 FLOPs (3 x 3) for about
 * 8 bytes of tensor an output: 2.25 FLOPs a byte, under the machine balance (peak over copy
 * bandwidth), so its roof is the copy's; a grouped ResNeXt layer's (C/group 4: 72 FLOPs an output)
 * is nearer the FMA roof. The layers: torchvision mobilenet_v2 at batch 8, 96 x 96 (run_step.py's),
 * an EfficientNet-style 5 x 5 depthwise layer and a ResNeXt 32 x 4d stage. */
#include "bench_util.h"
#include "exec/exec.h"
#include "io/format.h"
#include "ops/simd.h"
#include "util/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct layer {
	const char *name;
	int n, c, h, m, group, k, s;
};

static const struct layer layers[] = {
	{"mobilenet_v2 dw 32 @48 s1", 8, 32, 48, 32, 32, 3, 1},     {"mobilenet_v2 dw 96 @48 s2", 8, 96, 48, 96, 96, 3, 2},
	{"mobilenet_v2 dw 144 @24 s1", 8, 144, 24, 144, 144, 3, 1}, {"mobilenet_v2 dw 144 @24 s2", 8, 144, 24, 144, 144, 3, 2},
	{"mobilenet_v2 dw 192 @12 s1", 8, 192, 12, 192, 192, 3, 1}, {"mobilenet_v2 dw 384 @6 s1", 8, 384, 6, 384, 384, 3, 1},
	{"mobilenet_v2 dw 576 @6 s2", 8, 576, 6, 576, 576, 3, 2},   {"mobilenet_v2 dw 960 @3 s1", 8, 960, 3, 960, 960, 3, 1},
	{"efficientnet dw 240 @12 5x5", 8, 240, 12, 240, 240, 5, 1}, {"resnext 128/32 @24 s1", 8, 128, 24, 128, 32, 3, 1},
};

#ifdef SIMD_X86
/* one core's float32 FMA GFLOP/s: 12 chains of AVX-512 FMAs, the best of 64 runs of 2^16 steps (a
 * few ms each, so that one of them runs in a time slice of its own on a shared machine) */
static SIMD_TARGET double fma_peak(void)
{
	double best = 0;
	for (int r = 0; r < 64; r++) {
		__m512 acc[12], m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
		for (int i = 0; i < 12; i++)
			acc[i] = _mm512_set1_ps((float)i);
		long steps = 1L << 16;
		double t0 = bench_now();
		for (long s = 0; s < steps; s++)
#pragma GCC unroll 12
			for (int i = 0; i < 12; i++)
				acc[i] = _mm512_fmadd_ps(acc[i], m, a);
		double t = bench_now() - t0;
		float sink = 0;
		for (int i = 0; i < 12; i++)
			sink += _mm512_reduce_add_ps(acc[i]);
		if (sink == 12345.0f)
			printf(" ");
		double gf = (double)steps * 12 * 16 * 2 / t / 1e9;
		best = gf > best ? gf : best;
	}
	return best;
}
#endif

/* The Conv or ConvTranspose node's kernel seconds, the fastest of repeat runs after a warm-up (on a
 * shared machine the median counts other processes' time slices); a YAML graph of one node. */
static double node_seconds(const char *text, int repeat)
{
	char path[] = "/tmp/bench_conv_group_XXXXXX.yaml";
	int fd = mkstemps(path, 5);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -1;
	struct gd_err e = {0};
	struct graph *g = model_load(path, FMT_AUTO, &e);
	remove(path);
	if (!g) {
		fprintf(stderr, "bench_conv_group: %s\n", e.msg);
		return -1;
	}
	double best = -1;
	struct exec_profile prof;
	struct exec_opts eo = {.random_inputs = 1, .seed = 1, .profile = &prof};
	struct exec *x = NULL;
	for (int r = 0; r <= repeat; r++, exec_free(x)) { /* run 0 warms up */
		memset(&prof, 0, sizeof prof);
		if (!(x = exec_run(g, &eo, NULL, &e)))
			break;
		double s = prof.seconds[OP_CONV] + prof.seconds[OP_CONV_TRANSPOSE];
		best = r && (best < 0 || s < best) ? s : best;
	}
	if (!x)
		fprintf(stderr, "bench_conv_group: %s\n", e.msg);
	graph_free(g);
	return x ? best : -1; /* x: the last run's, freed */
}

/* The three nodes of layer l as YAML: 0 Conv, 1 ConvTranspose (dX), 2 the weight gradient's Conv */
static void node_text(const struct layer *l, int which, char *text, size_t size)
{
	int p = l->k / 2, oh = (l->h + 2 * p - l->k) / l->s + 1, cg = l->c / l->group, mg = l->m / l->group;
	int op = l->h - (l->s * (oh - 1) + l->k - 2 * p); /* ConvTranspose's output_padding */
	int pb = l->k - l->h - p + l->s * (oh - 1);       /* grad_window's end pad: a k x k output */
	const char *head = "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [%d, %d, %d, %d]}, "
			   "{name: w, dtype: float32, shape: [%d, %d, %d, %d]}]\nnodes:\n  - {op: %s, inputs: [x, w], "
			   "outputs: [y], attrs: {group: %d, pads: [%d, %d, %d, %d], strides: [%d, %d], dilations: [%d, %d]%s}}\n"
			   "outputs: [{name: y}]\n";
	if (which == 0)
		snprintf(text, size, head, l->n, l->c, l->h, l->h, l->m, cg, l->k, l->k, "Conv", l->group, p, p, p, p, l->s,
			 l->s, 1, 1, "");
	else if (which == 1)
		snprintf(text, size, head, l->n, l->m, oh, oh, l->m, cg, l->k, l->k, "ConvTranspose", l->group, p, p, p, p,
			 l->s, l->s, 1, 1, op ? ", output_padding: [1, 1]" : "");
	else /* X (1, G ci N, H, W) by dY's planes (G co, N, OH, OW), stride 1 and dilation s */
		snprintf(text, size, head, 1, l->group * cg * l->n, l->h, l->h, l->group * cg * mg, l->n, oh, oh, "Conv",
			 l->group * cg, p, p, pb < 0 ? 0 : pb, pb < 0 ? 0 : pb, 1, 1, l->s, l->s, "");
}

int main(int argc, char **argv)
{
	int repeat = 5, threads = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_conv_group [--threads N] [--repeat N]\n");
			return 2;
		}
	}
	if (repeat < 1 || repeat > 63 || threads < 1) {
		fprintf(stderr, "bench_conv_group: --repeat 1..63, --threads at least 1\n");
		return 2;
	}
	pool_set_threads(threads);
	double roof = bench_copy_gbs((size_t)64 << 20, 4 * repeat), peak = 0;
#ifdef SIMD_X86
	if (simd_avx512())
		peak = fma_peak() * threads;
#endif
	printf("bench_conv_group: %d thread(s), fastest of %d; memcpy %.1f GB/s, FMA peak %.1f GFLOP/s (%d x one core)\n",
	       threads, repeat, roof, peak, threads);
	printf("%-30s %-6s %9s %8s %8s %8s %8s\n", "layer", "node", "ms", "GB/s", "of copy", "GFLOP/s", "of FMA");
	static const char *const nodes[3] = {"Conv", "dX", "dW"};
	for (size_t k = 0; k < sizeof layers / sizeof *layers; k++) {
		const struct layer *l = &layers[k];
		int p = l->k / 2, oh = (l->h + 2 * p - l->k) / l->s + 1;
		double in = (double)l->n * l->c * l->h * l->h * 4, out = (double)l->n * l->m * oh * oh * 4;
		double flops = 2.0 * l->n * l->m * oh * oh * (l->c / l->group) * l->k * l->k;
		for (int w = 0; w < 3; w++) {
			char text[1024];
			node_text(l, w, text, sizeof text);
			double s = node_seconds(text, repeat);
			if (s < 0)
				return 1;
			double gbs = (in + out) / s / 1e9, gf = flops / s / 1e9;
			printf("%-30s %-6s %9.3f %8.2f %7.0f%% %8.2f %7.0f%%\n", l->name, nodes[w], s * 1e3, gbs,
			       100 * gbs / roof, gf, peak > 0 ? 100 * gf / peak : 0.0);
		}
	}
	return 0;
}
