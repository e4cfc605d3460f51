/* bench_roofline.c - every op of the registry against its roof, forward and gradient kernels.
 *
 *   bench_roofline [--threads N] [--filter SUBSTR] [--repeat K] [--format md|tsv]
 *
 * The roofs are measured in the same run, each the best of samples taken before the first op,
 * between the ops and after the last (a shared machine's quiet moments): the FMA peak of one core (a
 * float32 FMA loop on registers alone, 12 independent accumulators, with zmm and ymm registers where
 * the CPU has them, the higher), times the threads; and the streaming bandwidth of one thread
 * (memcpy, and a y = x + 1 loop, the higher, between two buffers of COPY_BYTES, 8x this machine's
 * 32 MiB L3, counting bytes read plus written as the ops' costs do).
 *
 * The table walks op_table itself, so an op added to ops.def gets a row: cases[] below holds one or
 * more one-node graphs per op at a size real models use (the sizes of issue #52's step benchmark:
 * ResNet-50 and MobileNetV2 at batch 8, 96x96, for convolutions, pooling and batch norm; the BERT
 * encoder, d384, 6 heads, seq 128, batch 8, for products, layer norm, softmax and attention; the
 * 2 x 512 LSTM LM, seq 64, batch 16, for the recurrences; 16M-element tensors for elementwise ops,
 * which every elementwise op without a case of its own gets), and an op no kernel times says why.
 * Each graph is run by the executor: once to take each timed node's cost (op_cost: FLOPs and bytes
 * moved), once to warm up, then K times, timing the node's kernel (the executor's per-op profile,
 * wall time). A node's roof time is max(FLOPs / peak, bytes / bandwidth): a roofline, the FMA roof
 * when its arithmetic intensity is above the machine balance, the bandwidth roof below. The table
 * gives the median and the best run; the fraction, roof time / time, is the best run's: on a machine
 * shared with other jobs the least interrupted run is the kernel's, as the roofs are their best.
 *
 * "grad" rows: the case with the loss sum(y * y), differentiated by autodiff with every float
 * initializer a parameter (but k0, k1: exporters' constants); the nodes the op's gradient rule
 * emitted (named op_grad*, tagged backward) are timed as a whole against the sum of their roof
 * times. The loss's own backward nodes are retagged out of the timed set, and the gradient runs fuse
 * no elementwise chains (exec_opts.no_chains): a chain's time goes to its first node, which may be
 * the loss's, and each emitted node is then timed as the kernel it is.
 *
 * Under 25% of its roof a row is flagged "<25%", and listed again at the end, furthest below first.
 * Timings of a shared machine are noisy: read the fractions as within a factor of 1.5. Not a timed
 * test (tests/bench/README.md). */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "io/tensor.h"
#include "io/yaml.h"
#include "util/pool.h"

#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define COPY_BYTES ((size_t)256 << 20)

/* ---- the roofs ---- */

#if defined(__x86_64__)
/* GFLOP/s of `iters` rounds of 12 independent float32 FMA chains (enough to cover the FMA latency
 * on two pipes), each a named variable so that all stay in registers */
#define FMA12(fma, acc)                                                                                      \
	do {                                                                                                 \
		acc##0 = fma(acc##0, m, a), acc##1 = fma(acc##1, m, a), acc##2 = fma(acc##2, m, a);          \
		acc##3 = fma(acc##3, m, a), acc##4 = fma(acc##4, m, a), acc##5 = fma(acc##5, m, a);          \
		acc##6 = fma(acc##6, m, a), acc##7 = fma(acc##7, m, a), acc##8 = fma(acc##8, m, a);          \
		acc##9 = fma(acc##9, m, a), acc##10 = fma(acc##10, m, a), acc##11 = fma(acc##11, m, a);      \
	} while (0)
#define SUM12(add, acc)                                                                                      \
	add(add(add(add(acc##0, acc##1), add(acc##2, acc##3)), add(add(acc##4, acc##5), add(acc##6, acc##7))), \
	    add(add(acc##8, acc##9), add(acc##10, acc##11)))

/* fma_<name>: the loop in one register width (vec, lanes) with its intrinsics (pfx: _mm512, _mm256) */
#define FMA_LOOP(name, isa, vec, pfx, lanes)                                                             \
	__attribute__((target(isa))) static double fma_##name   (long iters)                              \
	{                                                                                                 \
		vec m = pfx##_set1_ps(0.9999f), a = pfx##_set1_ps(1e-4f), v0 = pfx##_set1_ps(0),          \
		    v1 = pfx##_set1_ps(1), v2 = pfx##_set1_ps(2), v3 = pfx##_set1_ps(3), v4 = pfx##_set1_ps(4), \
		    v5 = pfx##_set1_ps(5), v6 = pfx##_set1_ps(6), v7 = pfx##_set1_ps(7), v8 = pfx##_set1_ps(8), \
		    v9 = pfx##_set1_ps(9), v10 = pfx##_set1_ps(10), v11 = pfx##_set1_ps(11);              \
		/* unequal starts, or the compiler merges the chains into one */                         \
		double t0 = bench_now();                                                                  \
		for (long i = 0; i < iters; i++)                                                          \
			FMA12(pfx##_fmadd_ps, v);                                                         \
		double t = bench_now() - t0;                                                              \
		float sink[lanes];                                                                        \
		pfx##_storeu_ps(sink, SUM12(pfx##_add_ps, v));                                            \
		return sink[0] == -1 ? 0 : 2.0 * lanes * 12 * (double)iters / t / 1e9;                    \
	}
FMA_LOOP(avx512, "avx512f", __m512, _mm512, 16)
FMA_LOOP(avx2, "avx2,fma", __m256, _mm256, 8)
#endif

/* a scalar loop's rate where neither is there (the compiler may vectorise it) */
static double fma_scalar(long iters)
{
	float acc[12];
	for (int k = 0; k < 12; k++)
		acc[k] = (float)k;
	double t0 = bench_now();
	for (long i = 0; i < iters; i++)
		for (int k = 0; k < 12; k++)
			acc[k] = acc[k] * 0.9999f + 1e-4f;
	double t = bench_now() - t0;
	return acc[0] == -1 ? 0 : 2.0 * 12 * (double)iters / t / 1e9;
}

/* The roofs, the best seen in samples taken between the cases (a shared machine's quiet moments):
 * FMA GFLOP/s per core with zmm and ymm registers (0 where the CPU lacks them) or in a scalar loop;
 * GB/s (read + written) of memcpy and of a streaming loop y = x + 1 over buffers of COPY_BYTES. */
static struct {
	double zmm, ymm, scalar, memcpy, loop;
	float *a, *b;
} roof;

static void stream_loop(float *restrict y, const float *restrict x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] + 1.0f;
}

static void roof_sample(long fma_iters)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		double g = fma_avx512(fma_iters);
		roof.zmm = g > roof.zmm ? g : roof.zmm;
	}
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		double g = fma_avx2(fma_iters);
		roof.ymm = g > roof.ymm ? g : roof.ymm;
	}
#endif
	if (!roof.zmm && !roof.ymm) {
		double g = fma_scalar(fma_iters);
		roof.scalar = g > roof.scalar ? g : roof.scalar;
	}
	size_t n = COPY_BYTES / sizeof(float);
	double t0 = bench_now();
	memcpy(roof.b, roof.a, COPY_BYTES);
	double t1 = bench_now();
	stream_loop(roof.a, roof.b, n);
	double t2 = bench_now(), g = 2.0 * (double)COPY_BYTES / 1e9;
	roof.memcpy = g / (t1 - t0) > roof.memcpy ? g / (t1 - t0) : roof.memcpy;
	roof.loop = g / (t2 - t1) > roof.loop ? g / (t2 - t1) : roof.loop;
}

static double roof_peak(void)
{
	double p = roof.zmm > roof.ymm ? roof.zmm : roof.ymm;
	return p > roof.scalar ? p : roof.scalar;
}

static double roof_bw(void)
{
	return roof.memcpy > roof.loop ? roof.memcpy : roof.loop;
}

static void cpu_model(char *buf, size_t n)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	snprintf(buf, n, "unknown CPU");
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
			char *p = strchr(line, ':') + 2;
			p[strcspn(p, "\n")] = 0;
			snprintf(buf, n, "%s", p);
			break;
		}
	if (f)
		fclose(f);
}

/* ---- the cases ---- */

/* YAML list entries: a float32 parameter (normal draws; uniform in [0.5, 2] for PU), a constant
 * with its data, a graph input (random draws: integers over the range their use allows) */
#define PF(name, shape) "  - {name: " name ", dtype: float32, shape: " shape ", init: {dist: normal, seed: 1}}\n"
#define PU(name, shape) "  - {name: " name ", dtype: float32, shape: " shape ", init: {dist: uniform, low: 0.5, high: 2, seed: 2}}\n"
#define CD(name, dtype, shape, data) "  - {name: " name ", dtype: " dtype ", shape: " shape ", data: " data "}\n"
#define IN(name, dtype, shape) "  - {name: " name ", dtype: " dtype ", shape: " shape "}\n"
#define N16M "[4096, 4096]"

struct rcase {
	const char *op;     /* op_type of the timed node, named `op`, output `y` */
	int opset;          /* 0: 17 */
	const char *shape;  /* the table's summary */
	const char *inputs; /* YAML entries */
	const char *params; /* YAML entries */
	const char *nodes;  /* YAML entries */
};

#define UNARY(name, attrs) \
	{name, 0, "16M", "", PF("x", N16M), "  - {op: " name ", inputs: [x], outputs: [y], name: op" attrs "}\n"}
#define UNARY_POS(name, attrs) \
	{name, 0, "16M", "", PU("x", N16M), "  - {op: " name ", inputs: [x], outputs: [y], name: op" attrs "}\n"}
#define BINARY(name, attrs) \
	{name, 0, "16M, 16M", "", PF("a", N16M) PU("b", N16M), \
	 "  - {op: " name ", inputs: [a, b], outputs: [y], name: op" attrs "}\n"}
#define RESNET_X(c, hw) PF("x", "[8, " #c ", " #hw ", " #hw "]")

static const struct rcase cases[] = {
	/* dense: BERT d384's feed-forward and attention products (1024 tokens) */
	{"Gemm", 0, "1024x384 @ 1536x384^T + b", "", PF("x", "[1024, 384]") PF("w", "[1536, 384]") PF("b", "[1536]"),
	 "  - {op: Gemm, inputs: [x, w, b], outputs: [y], name: op, attrs: {transB: 1}}\n"},
	{"Gemm", 0, "512x2048 @ 2048x2048^T + b (MLP)", "", PF("x", "[512, 2048]") PF("w", "[2048, 2048]") PF("b", "[2048]"),
	 "  - {op: Gemm, inputs: [x, w, b], outputs: [y], name: op, attrs: {transB: 1}}\n"},
	{"MatMul", 0, "8x128x384 @ 384x1152 (QKV)", "", PF("x", "[8, 128, 384]") PF("w", "[384, 1152]"),
	 "  - {op: MatMul, inputs: [x, w], outputs: [y], name: op}\n"},
	{"MatMul", 0, "8x6x128x64 @ 8x6x64x128 (scores)", "", PF("q", "[8, 6, 128, 64]") PF("k", "[8, 6, 64, 128]"),
	 "  - {op: MatMul, inputs: [q, k], outputs: [y], name: op}\n"},
	{"Einsum", 0, "bhqd,bhkd->bhqk 8x6x128x64", "", PF("q", "[8, 6, 128, 64]") PF("k", "[8, 6, 128, 64]"),
	 "  - {op: Einsum, inputs: [q, k], outputs: [y], name: op, attrs: {equation: \"bhqd,bhkd->bhqk\"}}\n"},
	/* convolution: ResNet-50 and MobileNetV2 at batch 8, 96x96 (stage 1 is 24x24) */
	{"Conv", 0, "8x64x24x24, 64 3x3 (ResNet-50)", "", RESNET_X(64, 24) PF("w", "[64, 64, 3, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], name: op, attrs: {pads: [1, 1, 1, 1]}}\n"},
	{"Conv", 0, "8x256x24x24, 64 1x1 (ResNet-50)", "", RESNET_X(256, 24) PF("w", "[64, 256, 1, 1]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], name: op}\n"},
	{"Conv", 0, "8x3x96x96, 64 7x7 /2 (stem)", "", RESNET_X(3, 96) PF("w", "[64, 3, 7, 7]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], name: op, attrs: {strides: [2, 2], pads: [3, 3, 3, 3]}}\n"},
	{"Conv", 0, "8x144x24x24 depthwise 3x3 (MobileNetV2)", "", RESNET_X(144, 24) PF("w", "[144, 1, 3, 3]"),
	 "  - {op: Conv, inputs: [x, w], outputs: [y], name: op, attrs: {group: 144, pads: [1, 1, 1, 1]}}\n"},
	{"ConvTranspose", 0, "8x64x24x24, 32 2x2 /2", "", RESNET_X(64, 24) PF("w", "[64, 32, 2, 2]"),
	 "  - {op: ConvTranspose, inputs: [x, w], outputs: [y], name: op, attrs: {strides: [2, 2]}}\n"},
	{"BatchNormalization", 0, "8x64x48x48 training", "", RESNET_X(64, 48) PU("s", "[64]") PF("b", "[64]")
	 PF("m", "[64]") PU("v", "[64]"),
	 "  - {op: BatchNormalization, inputs: [x, s, b, m, v], outputs: [y, rm, rv], name: op, attrs: {training_mode: 1}}\n"},
	{"MaxPool", 0, "8x64x48x48 3x3 /2", "", RESNET_X(64, 48),
	 "  - {op: MaxPool, inputs: [x], outputs: [y], name: op, attrs: {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]}}\n"},
	{"AveragePool", 0, "8x256x24x24 2x2 /2", "", RESNET_X(256, 24),
	 "  - {op: AveragePool, inputs: [x], outputs: [y], name: op, attrs: {kernel_shape: [2, 2], strides: [2, 2]}}\n"},
#define RESIZE_X2(mode, label) {"Resize", 0, "8x64x24x24 " label " x2", "", RESNET_X(64, 24) CD("sc", "float32", "[4]", "[1, 1, 2, 2]"), \
	"  - {op: Resize, inputs: [x, \"\", sc], outputs: [y], name: op, attrs: {mode: " mode "}}\n"}
	RESIZE_X2("nearest", "nearest"), RESIZE_X2("linear", "bilinear"),
#define GLOBAL_POOL(op, c, hw, label) {op, 0, "8x" #c "x" #hw "x" #hw label, "", RESNET_X(c, hw), \
	"  - {op: " op ", inputs: [x], outputs: [y], name: op}\n"}
	GLOBAL_POOL("GlobalAveragePool", 2048, 3, " (ResNet-50 head)"), GLOBAL_POOL("GlobalAveragePool", 256, 24, ""),
	{"Upsample", 9, "8x64x24x24 nearest x2", "", RESNET_X(64, 24) CD("sc", "float32", "[4]", "[1, 1, 2, 2]"),
	 "  - {op: Upsample, inputs: [x, sc], outputs: [y], name: op}\n"},
	GLOBAL_POOL("GlobalMaxPool", 256, 24, ""),
	{"MaxUnpool", 0, "8x64x24x24 2x2 /2 (of MaxPool's)", "", RESNET_X(64, 48),
	 "  - {op: MaxPool, inputs: [x], outputs: [p, i], name: pool, attrs: {kernel_shape: [2, 2], strides: [2, 2]}}\n"
	 "  - {op: MaxUnpool, inputs: [p, i], outputs: [y], name: op, attrs: {kernel_shape: [2, 2], strides: [2, 2]}}\n"},
	{"LpPool", 0, "8x64x48x48 3x3 /2 p2", "", RESNET_X(64, 48),
	 "  - {op: LpPool, inputs: [x], outputs: [y], name: op, attrs: {kernel_shape: [3, 3], strides: [2, 2], p: 2}}\n"},
	/* recurrent: the LM's 2 x 512 LSTM (seq 64, batch 16, input 256); GRU and RNN alike */
	{"LSTM", 0, "seq64 b16 in256 h512", "", PF("x", "[64, 16, 256]") PF("w", "[1, 2048, 256]") PF("r", "[1, 2048, 512]")
	 PF("b", "[1, 4096]"), "  - {op: LSTM, inputs: [x, w, r, b], outputs: [y], name: op, attrs: {hidden_size: 512}}\n"},
	{"GRU", 0, "seq64 b16 in256 h512", "", PF("x", "[64, 16, 256]") PF("w", "[1, 1536, 256]") PF("r", "[1, 1536, 512]")
	 PF("b", "[1, 3072]"),
	 "  - {op: GRU, inputs: [x, w, r, b], outputs: [y], name: op, attrs: {hidden_size: 512, linear_before_reset: 1}}\n"},
	{"RNN", 0, "seq64 b16 in256 h512", "", PF("x", "[64, 16, 256]") PF("w", "[1, 512, 256]") PF("r", "[1, 512, 512]")
	 PF("b", "[1, 1024]"), "  - {op: RNN, inputs: [x, w, r, b], outputs: [y], name: op, attrs: {hidden_size: 512}}\n"},
	/* the LSTM's fused backward (train --fused-rnn), given the forward's gates as the training graph gives them */
	{"RecurrentGrad", 0, "LSTM seq64 b16 in256 h512, gates saved", "", PF("x", "[64, 16, 256]") PF("w", "[1, 2048, 256]")
	 PF("r", "[1, 2048, 512]") PF("b", "[1, 4096]") PF("dy", "[64, 1, 16, 512]"),
	 "  - {op: LSTM, domain: graphdiet, inputs: [x, w, r, b], outputs: [yf, \"\", \"\", g], name: fwd, attrs: {hidden_size: 512}}\n"
	 "  - {op: RecurrentGrad, domain: graphdiet, inputs: [x, w, r, b, \"\", \"\", \"\", \"\", yf, dy, \"\", \"\", g],"
	 " outputs: [y, dw, dr, db], name: op, attrs: {cell: LSTM, hidden_size: 512}}\n"},
	/* elementwise with attributes or inputs of their own (the rest: elem_case) */
	UNARY_POS("Sqrt", ""),
	UNARY_POS("Log", ""),
	UNARY_POS("Reciprocal", ""),
	UNARY_POS("Acosh", ""),
	/* #52 trigrow: the inverse functions in their domain, as a model feeds them (normal draws put a
	 * third of the lanes outside, where the result is NaN: the same time, the kernels have no branch) */
#define UNARY_UNIT(name) {name, 0, "16M in (-1, 1)", "", \
	"  - {name: x, dtype: float32, shape: " N16M ", init: {dist: uniform, low: -0.999, high: 0.999, seed: 2}}\n", \
	"  - {op: " name ", inputs: [x], outputs: [y], name: op}\n"}
	UNARY_UNIT("Asin"), UNARY_UNIT("Acos"), UNARY_UNIT("Atanh"),
	{"Pow", 0, "16M ^ 2 (exported square)", "", PU("x", N16M) CD("k0", "float32", "[]", "[2]"),
	 "  - {op: Pow, inputs: [x, k0], outputs: [y], name: op}\n"},
	BINARY("Pow", ""),
	BINARY("Mod", ", attrs: {fmod: 1}"),
	{"Where", 0, "16M bool, 16M, 16M", IN("c", "bool", N16M), PF("a", N16M) PF("b", N16M),
	 "  - {op: Where, inputs: [c, a, b], outputs: [y], name: op}\n"},
	{"Add", 0, "8x64x48x48 + 64x1x1 (bias)", "", RESNET_X(64, 48) PF("b", "[64, 1, 1]"),
	 "  - {op: Add, inputs: [x, b], outputs: [y], name: op}\n"},
	{"Cast", 0, "16M float32 -> float16", "", PF("x", N16M), "  - {op: Cast, inputs: [x], outputs: [y], name: op, attrs: {to: 10}}\n"},
	{"Cast", 0, "16M bool -> float32", IN("x", "bool", N16M), "", "  - {op: Cast, inputs: [x], outputs: [y], name: op, attrs: {to: 1}}\n"},
	{"CastLike", 0, "16M float32 like float16", IN("h", "float16", "[1]"), PF("x", N16M),
	 "  - {op: CastLike, inputs: [x, h], outputs: [y], name: op}\n"},
	{"BitShift", 0, "16M uint32 << 16M", IN("a", "uint32", N16M) IN("b", "uint32", N16M), "",
	 "  - {op: BitShift, inputs: [a, b], outputs: [y], name: op, attrs: {direction: LEFT}}\n"},
	{"Clip", 0, "16M [0, 6] (ReLU6)", "", PF("x", N16M) CD("k0", "float32", "[]", "[0]") CD("k1", "float32", "[]", "[6]"),
	 "  - {op: Clip, inputs: [x, k0, k1], outputs: [y], name: op}\n"},
	{"PRelu", 0, "8x64x48x48, slope 64x1x1", "", RESNET_X(64, 48) PF("s", "[64, 1, 1]"),
	 "  - {op: PRelu, inputs: [x, s], outputs: [y], name: op}\n"},
	{"Dropout", 0, "16M p 0.1 training", "", PF("x", N16M) CD("k0", "float32", "[]", "[0.1]") CD("t", "bool", "[]", "[1]"),
	 "  - {op: Dropout, inputs: [x, k0, t], outputs: [y, m], name: op, attrs: {seed: 1}}\n"},
	{"Dropout", 0, "16M p 0 training", "", PF("x", N16M) CD("k0", "float32", "[]", "[0]") CD("t", "bool", "[]", "[1]"),
	 "  - {op: Dropout, inputs: [x, k0, t], outputs: [y, m], name: op, attrs: {seed: 1}}\n"},
	UNARY("Gelu", ""),
	{"Gelu", 0, "16M tanh", "", PF("x", N16M), "  - {op: Gelu, inputs: [x], outputs: [y], name: op, attrs: {approximate: tanh}}\n"},
	/* normalisation and softmax: BERT d384 (1024 tokens), attention 8x6x128x128 */
	{"Softmax", 0, "8x6x128x128 axis -1", "", PF("x", "[8, 6, 128, 128]"), "  - {op: Softmax, inputs: [x], outputs: [y], name: op}\n"},
	{"Softmax", 0, "1024x2000 axis -1 (LM logits)", "", PF("x", "[1024, 2000]"), "  - {op: Softmax, inputs: [x], outputs: [y], name: op}\n"},
	{"LogSoftmax", 0, "1024x2000 axis -1 (LM logits)", "", PF("x", "[1024, 2000]"),
	 "  - {op: LogSoftmax, inputs: [x], outputs: [y], name: op}\n"},
	{"LayerNormalization", 0, "8x128x384 axis -1", "", PF("x", "[8, 128, 384]") PU("s", "[384]") PF("b", "[384]"),
	 "  - {op: LayerNormalization, inputs: [x, s, b], outputs: [y], name: op, attrs: {axis: -1}}\n"},
	{"InstanceNormalization", 0, "8x64x48x48", "", RESNET_X(64, 48) PU("s", "[64]") PF("b", "[64]"),
	 "  - {op: InstanceNormalization, inputs: [x, s, b], outputs: [y], name: op}\n"},
	{"GroupNormalization", 18, "8x64x48x48, 32 groups", "", RESNET_X(64, 48) PU("s", "[64]") PF("b", "[64]"),
	 "  - {op: GroupNormalization, inputs: [x, s, b], outputs: [y], name: op, attrs: {num_groups: 32}}\n"},
	{"RMSNormalization", 23, "8x128x384 axis -1", "", PF("x", "[8, 128, 384]") PU("s", "[384]"),
	 "  - {op: RMSNormalization, inputs: [x, s], outputs: [y], name: op, attrs: {axis: -1}}\n"},
	{"MeanVarianceNormalization", 0, "8x64x48x48", "", RESNET_X(64, 48),
	 "  - {op: MeanVarianceNormalization, inputs: [x], outputs: [y], name: op}\n"},
	{"LpNormalization", 0, "1024x384 p2 axis -1", "", PF("x", "[1024, 384]"),
	 "  - {op: LpNormalization, inputs: [x], outputs: [y], name: op, attrs: {axis: -1}}\n"},
	{"LRN", 0, "8x64x48x48 size 5", "", RESNET_X(64, 48), "  - {op: LRN, inputs: [x], outputs: [y], name: op, attrs: {size: 5}}\n"},
	{"Attention", 23, "8x6x128x64 q, k, v", "", PF("q", "[8, 6, 128, 64]") PF("k", "[8, 6, 128, 64]") PF("v", "[8, 6, 128, 64]"),
	 "  - {op: Attention, inputs: [q, k, v], outputs: [y], name: op}\n"},
	{"Attention", 23, "8x6x128x64 causal", "", PF("q", "[8, 6, 128, 64]") PF("k", "[8, 6, 128, 64]") PF("v", "[8, 6, 128, 64]"),
	 "  - {op: Attention, inputs: [q, k, v], outputs: [y], name: op, attrs: {is_causal: 1}}\n"},
	{"RotaryEmbedding", 23, "8x6x128x64, caches 128x32", IN("p", "int64", "[8, 128]"),
	 PF("x", "[8, 6, 128, 64]") PF("c", "[128, 32]") PF("s", "[128, 32]"),
	 "  - {op: RotaryEmbedding, inputs: [x, c, s, p], outputs: [y], name: op}\n"},
	/* layout: BERT's and ResNet's activations */
	{"Reshape", 0, "8x128x384 -> 8x128x6x64", "", PF("x", "[8, 128, 384]") CD("sh", "int64", "[4]", "[8, 128, 6, 64]"),
	 "  - {op: Reshape, inputs: [x, sh], outputs: [y], name: op}\n"},
	{"Transpose", 0, "8x128x6x64 perm 0213", "", PF("x", "[8, 128, 6, 64]"),
	 "  - {op: Transpose, inputs: [x], outputs: [y], name: op, attrs: {perm: [0, 2, 1, 3]}}\n"},
	{"Transpose", 0, "4096x4096 perm 10", "", PF("x", N16M), "  - {op: Transpose, inputs: [x], outputs: [y], name: op, attrs: {perm: [1, 0]}}\n"},
	{"Flatten", 0, "8x2048x3x3", "", RESNET_X(2048, 3), "  - {op: Flatten, inputs: [x], outputs: [y], name: op}\n"},
	{"Squeeze", 0, "8x2048x1x1", "", PF("x", "[8, 2048, 1, 1]") CD("ax", "int64", "[2]", "[2, 3]"),
	 "  - {op: Squeeze, inputs: [x, ax], outputs: [y], name: op}\n"},
	{"Unsqueeze", 0, "8x128x384 axis 1", "", PF("x", "[8, 128, 384]") CD("ax", "int64", "[1]", "[1]"),
	 "  - {op: Unsqueeze, inputs: [x, ax], outputs: [y], name: op}\n"},
	{"Concat", 0, "2 x 8x128x24x24 axis 1 (DenseNet)", "", PF("a", "[8, 128, 24, 24]") PF("b", "[8, 128, 24, 24]"),
	 "  - {op: Concat, inputs: [a, b], outputs: [y], name: op, attrs: {axis: 1}}\n"},
	{"Split", 0, "8x128x1152 -> 3 x 384 (QKV)", "", PF("x", "[8, 128, 1152]") CD("sp", "int64", "[3]", "[384, 384, 384]"),
	 "  - {op: Split, inputs: [x, sp], outputs: [y, y1, y2], name: op, attrs: {axis: 2}}\n"},
	{"Slice", 0, "8x128x1152 [:, :, 384:768]", "", PF("x", "[8, 128, 1152]") CD("st", "int64", "[1]", "[384]")
	 CD("en", "int64", "[1]", "[768]") CD("ax", "int64", "[1]", "[2]"),
	 "  - {op: Slice, inputs: [x, st, en, ax], outputs: [y], name: op}\n"},
	{"Gather", 0, "embedding 30522x384, 8x128 ids", IN("i", "int64", "[8, 128]"), PF("w", "[30522, 384]"),
	 "  - {op: Gather, inputs: [w, i], outputs: [y], name: op}\n"},
	{"DepthToSpace", 0, "8x256x24x24 block 2", "", RESNET_X(256, 24),
	 "  - {op: DepthToSpace, inputs: [x], outputs: [y], name: op, attrs: {blocksize: 2}}\n"},
	{"SpaceToDepth", 0, "8x64x48x48 block 2", "", RESNET_X(64, 48),
	 "  - {op: SpaceToDepth, inputs: [x], outputs: [y], name: op, attrs: {blocksize: 2}}\n"},
	{"GatherElements", 0, "1024x2000 axis 1, 1024x1", IN("i", "int64", "[1024, 1]"), PF("x", "[1024, 2000]"),
	 "  - {op: GatherElements, inputs: [x, i], outputs: [y], name: op, attrs: {axis: 1}}\n"},
	{"Tile", 0, "8x64x48x48 x (1, 2, 1, 1)", "", RESNET_X(64, 48) CD("rp", "int64", "[4]", "[1, 2, 1, 1]"),
	 "  - {op: Tile, inputs: [x, rp], outputs: [y], name: op}\n"},
	{"Expand", 0, "1x128x384 -> 8x128x384 (positions)", "", PF("x", "[1, 128, 384]") CD("sh", "int64", "[3]", "[8, 128, 384]"),
	 "  - {op: Expand, inputs: [x, sh], outputs: [y], name: op}\n"},
	{"Trilu", 0, "8x6x128x128 lower", "", PF("x", "[8, 6, 128, 128]"),
	 "  - {op: Trilu, inputs: [x], outputs: [y], name: op, attrs: {upper: 0}}\n"},
	{"CumSum", 0, "8x128x384 axis 1", "", PF("x", "[8, 128, 384]") CD("ax", "int64", "[]", "[1]"),
	 "  - {op: CumSum, inputs: [x, ax], outputs: [y], name: op}\n"},
	UNARY("Identity", ""),
	{"Pad", 0, "8x64x48x48 pad 1", "", RESNET_X(64, 48) CD("pd", "int64", "[8]", "[0, 0, 1, 1, 0, 0, 1, 1]"),
	 "  - {op: Pad, inputs: [x, pd], outputs: [y], name: op}\n"},
	{"ReverseSequence", 0, "64x16x512 time-major", IN("l", "int64", "[16]"), PF("x", "[64, 16, 512]"),
	 "  - {op: ReverseSequence, inputs: [x, l], outputs: [y], name: op, attrs: {batch_axis: 1, time_axis: 0}}\n"},
	{"Compress", 0, "1024x384 rows by 1024 bools", IN("c", "bool", "[1024]"), PF("x", "[1024, 384]"),
	 "  - {op: Compress, inputs: [x, c], outputs: [y], name: op, attrs: {axis: 0}}\n"},
	{"GatherND", 0, "30522x384, 1024x1 rows", IN("i", "int64", "[1024, 1]"), PF("x", "[30522, 384]"),
	 "  - {op: GatherND, inputs: [x, i], outputs: [y], name: op}\n"},
	{"ScatterND", 0, "30522x384, 1024 rows (embedding grad)", IN("i", "int64", "[1024, 1]"),
	 PF("d", "[30522, 384]") PF("u", "[1024, 384]"),
	 "  - {op: ScatterND, inputs: [d, i, u], outputs: [y], name: op, attrs: {reduction: add}}\n"},
	{"ScatterElements", 0, "1024x2000 axis 1, 1024x1", IN("i", "int64", "[1024, 1]"), PF("d", "[1024, 2000]") PF("u", "[1024, 1]"),
	 "  - {op: ScatterElements, inputs: [d, i, u], outputs: [y], name: op, attrs: {axis: 1}}\n"},
	{"Scatter", 9, "1024x2000 axis 1, 1024x1", IN("i", "int64", "[1024, 1]"), PF("d", "[1024, 2000]") PF("u", "[1024, 1]"),
	 "  - {op: Scatter, inputs: [d, i, u], outputs: [y], name: op, attrs: {axis: 1}}\n"},
	{"ConstantOfShape", 0, "16M float32 zeros", "", CD("sh", "int64", "[2]", "[4096, 4096]"),
	 "  - {op: ConstantOfShape, inputs: [sh], outputs: [y], name: op}\n"},
	{"Range", 0, "16M int64", "", CD("a", "int64", "[]", "[0]") CD("b", "int64", "[]", "[16777216]") CD("d", "int64", "[]", "[1]"),
	 "  - {op: Range, inputs: [a, b, d], outputs: [y], name: op}\n"},
	/* reductions: 16M over the last axis; the losses at the LM's logits */
	{"ReduceSum", 0, "4096x4096 axis -1", "", PF("x", N16M) CD("ax", "int64", "[1]", "[-1]"),
	 "  - {op: ReduceSum, inputs: [x, ax], outputs: [y], name: op}\n"},
#define REDUCE(name) {name, 0, "4096x4096 axis -1", "", PU("x", N16M), \
		       "  - {op: " name ", inputs: [x], outputs: [y], name: op, attrs: {axes: [-1]}}\n"}
	REDUCE("ReduceMean"), REDUCE("ReduceMax"), REDUCE("ReduceMin"), REDUCE("ReduceL2"), REDUCE("ReduceL1"),
	REDUCE("ReduceSumSquare"), REDUCE("ReduceLogSum"), REDUCE("ReduceLogSumExp"), REDUCE("ReduceProd"),
	{"SoftmaxCrossEntropyLoss", 0, "1024x2000, 1024 labels", IN("l", "int64", "[1024]"), PF("x", "[1024, 2000]"),
	 "  - {op: SoftmaxCrossEntropyLoss, inputs: [x, l], outputs: [y], name: op, attrs: {reduction: mean}}\n"},
	{"NegativeLogLikelihoodLoss", 0, "1024x2000, 1024 labels", IN("l", "int64", "[1024]"), PF("x", "[1024, 2000]"),
	 "  - {op: NegativeLogLikelihoodLoss, inputs: [x, l], outputs: [y], name: op, attrs: {reduction: mean}}\n"},
	{"ArgMax", 0, "1024x2000 axis 1", "", PF("x", "[1024, 2000]"), "  - {op: ArgMax, inputs: [x], outputs: [y], name: op, attrs: {axis: 1}}\n"},
	{"ArgMin", 0, "1024x2000 axis 1", "", PF("x", "[1024, 2000]"), "  - {op: ArgMin, inputs: [x], outputs: [y], name: op, attrs: {axis: 1}}\n"},
	{"Hardmax", 0, "1024x2000 axis -1", "", PF("x", "[1024, 2000]"), "  - {op: Hardmax, inputs: [x], outputs: [y], name: op}\n"},
	{"TopK", 0, "1024x2000 k 10", "", PF("x", "[1024, 2000]") CD("k", "int64", "[1]", "[10]"),
	 "  - {op: TopK, inputs: [x, k], outputs: [y, i], name: op, attrs: {axis: 1}}\n"},
	{"NonZero", 0, "1M bools", IN("x", "bool", "[1024, 1024]"), "", "  - {op: NonZero, inputs: [x], outputs: [y], name: op}\n"},
	{"Unique", 0, "1M int64 over 2", IN("x", "int64", "[1048576]"), "", "  - {op: Unique, inputs: [x], outputs: [y], name: op}\n"},
	{"OneHot", 0, "1024 labels x 2000", IN("i", "int64", "[1024]"),
	 CD("d", "int64", "[]", "[2000]") CD("v", "float32", "[2]", "[0, 1]"),
	 "  - {op: OneHot, inputs: [i, d, v], outputs: [y], name: op}\n"},
	{"EyeLike", 0, "4096x4096", "", PF("x", N16M), "  - {op: EyeLike, inputs: [x], outputs: [y], name: op}\n"},
	{"Sum", 0, "3 x 16M", "", PF("a", N16M) PF("b", N16M) PF("c", N16M), "  - {op: Sum, inputs: [a, b, c], outputs: [y], name: op}\n"},
	{"GridSample", 0, "8x64x24x24, grid 8x24x24", "", RESNET_X(64, 24) PF("g", "[8, 24, 24, 2]"),
	 "  - {op: GridSample, inputs: [x, g], outputs: [y], name: op}\n"},
	{"Det", 0, "65536 x 4x4", "", PF("x", "[65536, 4, 4]"), "  - {op: Det, inputs: [x], outputs: [y], name: op}\n"},
	{"QuantizeLinear", 0, "16M float32 -> uint8", "", PF("x", N16M) CD("k0", "float32", "[]", "[0.05]") CD("z", "uint8", "[]", "[128]"),
	 "  - {op: QuantizeLinear, inputs: [x, k0, z], outputs: [y], name: op}\n"},
	{"DequantizeLinear", 0, "16M uint8 -> float32", IN("x", "uint8", N16M), CD("k0", "float32", "[]", "[0.05]") CD("z", "uint8", "[]", "[128]"),
	 "  - {op: DequantizeLinear, inputs: [x, k0, z], outputs: [y], name: op}\n"},
	{"DynamicQuantizeLinear", 0, "16M float32", "", PF("x", N16M),
	 "  - {op: DynamicQuantizeLinear, inputs: [x], outputs: [y, s, z], name: op}\n"},
/* a quantized operand's scale s<x> and zero point z<x> */
#define QP(x) CD("s" x, "float32", "[]", "[0.1]") CD("z" x, "uint8", "[]", "[128]")
	{"MatMulInteger", 0, "128x384 @ 384x1536 uint8", IN("a", "uint8", "[128, 384]") IN("b", "uint8", "[384, 1536]"), "",
	 "  - {op: MatMulInteger, inputs: [a, b], outputs: [y], name: op}\n"},
	{"QLinearMatMul", 0, "128x384 @ 384x1536 uint8", IN("a", "uint8", "[128, 384]") IN("b", "uint8", "[384, 1536]"),
	 QP("a") QP("b") QP("y"),
	 "  - {op: QLinearMatMul, inputs: [a, sa, za, b, sb, zb, sy, zy], outputs: [y], name: op}\n"},
	{"ConvInteger", 0, "1x64x24x24 uint8, 64 3x3", IN("x", "uint8", "[1, 64, 24, 24]") IN("w", "uint8", "[64, 64, 3, 3]"), "",
	 "  - {op: ConvInteger, inputs: [x, w], outputs: [y], name: op, attrs: {pads: [1, 1, 1, 1]}}\n"},
	{"QLinearConv", 0, "1x64x24x24 uint8, 64 3x3", IN("x", "uint8", "[1, 64, 24, 24]") IN("w", "uint8", "[64, 64, 3, 3]"),
	 QP("x") QP("w") QP("y"),
	 "  - {op: QLinearConv, inputs: [x, sx, zx, w, sw, zw, sy, zy], outputs: [y], name: op, attrs: {pads: [1, 1, 1, 1]}}\n"},
	{"RoiAlign", 0, "8x256x24x24, 512 rois 7x7", IN("bi", "int64", "[512]"), RESNET_X(256, 24) PU("r", "[512, 4]"),
	 "  - {op: RoiAlign, inputs: [x, r, bi], outputs: [y], name: op}\n"},
	{"NonMaxSuppression", 0, "1000 boxes, 1 class", "", PU("b", "[1, 1000, 4]") PU("s", "[1, 1, 1000]")
	 CD("mx", "int64", "[]", "[100]") CD("iou", "float32", "[]", "[0.5]"),
	 "  - {op: NonMaxSuppression, inputs: [b, s, mx, iou], outputs: [y], name: op}\n"},
	{"HannWindow", 0, "400", "", CD("n", "int64", "[]", "[400]"), "  - {op: HannWindow, inputs: [n], outputs: [y], name: op}\n"},
	{"HammingWindow", 0, "400", "", CD("n", "int64", "[]", "[400]"), "  - {op: HammingWindow, inputs: [n], outputs: [y], name: op}\n"},
	{"BlackmanWindow", 0, "400", "", CD("n", "int64", "[]", "[400]"), "  - {op: BlackmanWindow, inputs: [n], outputs: [y], name: op}\n"},
	{"DFT", 20, "64 x 512 real, onesided", "", PF("x", "[64, 512, 1]") CD("ax", "int64", "[]", "[1]"),
	 "  - {op: DFT, inputs: [x, \"\", ax], outputs: [y], name: op, attrs: {onesided: 1}}\n"},
	{"STFT", 17, "8 x 16000, frame 400 step 160", "", PF("x", "[8, 16000, 1]") CD("st", "int64", "[]", "[160]")
	 CD("fl", "int64", "[]", "[400]"),
	 "  - {op: STFT, inputs: [x, st, \"\", fl], outputs: [y], name: op, attrs: {onesided: 1}}\n"},
	{"MelWeightMatrix", 17, "80 mels x 201 bins", "", CD("nm", "int64", "[]", "[80]") CD("nd", "int64", "[]", "[400]")
	 CD("sr", "int64", "[]", "[16000]") CD("lo", "float32", "[]", "[0]") CD("hi", "float32", "[]", "[8000]"),
	 "  - {op: MelWeightMatrix, inputs: [nm, nd, sr, lo, hi], outputs: [y], name: op}\n"},
	/* optimizers over 16M parameters (float32; DietAdam's 16-bit ones, factored second moment) */
	{"Adam", 0, "16M params", IN("g", "float32", N16M), PF("x", N16M) PU("v", N16M) PU("h", N16M)
	 CD("r", "float32", "[]", "[0.001]") CD("t", "int64", "[]", "[1]"),
	 "  - {op: Adam, domain: ai.onnx.preview.training, inputs: [r, t, x, g, v, h], outputs: [y, v1, h1], name: op}\n"},
	{"Adagrad", 0, "16M params", IN("g", "float32", N16M), PF("x", N16M) PU("h", N16M)
	 CD("r", "float32", "[]", "[0.001]") CD("t", "int64", "[]", "[1]"),
	 "  - {op: Adagrad, domain: ai.onnx.preview.training, inputs: [r, t, x, g, h], outputs: [y, h1], name: op}\n"},
	{"Momentum", 0, "16M params", IN("g", "float32", N16M), PF("x", N16M) PF("v", N16M)
	 CD("r", "float32", "[]", "[0.001]") CD("t", "int64", "[]", "[1]"),
	 "  - {op: Momentum, domain: ai.onnx.preview.training, inputs: [r, t, x, g, v], outputs: [y, v1], name: op,"
	 " attrs: {alpha: 0.9, beta: 1.0, mode: standard, norm_coefficient: 0.0}}\n"},
	{"DietAdam", 0, "16M int16 params, factored", IN("q", "int16", N16M) IN("g", "float32", N16M),
	 CD("t", "int64", "[]", "[1]") PU("vr", "[4096]") PU("vc", "[4096]"),
	 "  - {op: DietAdam, domain: graphdiet, inputs: [q, g, t, '', vr, vc], outputs: [y, '', vr1, vc1], name: op,"
	 " attrs: {lr: 0.01}}\n"},
};

/* Why an op without a case has no kernel to time, or NULL. */
static const char *not_a_kernel(enum op_id op)
{
	uint32_t f = op_table[op].flags;
	if (f & OPF_COMM)
		return "not a kernel: a collective over the replicas, its time is communication (bench_allreduce)";
	if (f & OPF_SUBGRAPH)
		return "not a kernel: control flow running a subgraph, whose nodes have rows of their own";
	if (f & OPF_META)
		return "not a kernel: reads only its input's shape";
	if (op == OP_CONSTANT)
		return "not a kernel: no inputs, its tensor is the model's";
	if (op == OP_PT_GRADIENT)
		return "not a kernel: autodiff's marker, expanded into the backward nodes";
	if (op == OP_SHARD)
		return "not a kernel: a replica's slice of a tensor under the replicas rewrite";
	return NULL;
}

struct opts {
	int repeat, tsv, threads;
	const char *filter;
};

/* A row of the table: a timed case's kernel time and its nodes' costs (the roof is applied at the
 * end, with the best roofs of the run), or why it is not timed. */
struct row {
	const char *op, *dir, *shape;
	char *why;
	double sec, best; /* the median and the best run's */
	int runs;
	size_t n;
	uint64_t *f, *b; /* each timed node's FLOPs and bytes */
};

static struct row *rows;
static size_t n_rows, cap_rows;

static struct row *row_add(const char *op, const char *dir, const char *shape)
{
	if (n_rows == cap_rows) {
		cap_rows = cap_rows ? 2 * cap_rows : 256;
		rows = realloc(rows, cap_rows * sizeof *rows);
		if (!rows) {
			fprintf(stderr, "bench_roofline: out of memory\n");
			exit(1);
		}
	}
	rows[n_rows] = (struct row){op, dir, shape, NULL, 0, 0, 0, 0, NULL, NULL};
	return &rows[n_rows++];
}

static struct node *named_node(struct graph *g, const char *name)
{
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]->name && !strcmp(g->nodes[i]->name, name))
			return g->nodes[i];
	return NULL;
}

/* Generates the random initializers' bytes once, so that no run pays for them (the executor would
 * draw them again in each run, inside the first node that reads them); 0, or a status. */
static int materialize(struct graph *g, struct gd_err *e)
{
	for (uint32_t i = 0; i < g->n_values; i++) {
		struct tensor *t = g->values[i]->init;
		struct bytes b;
		if (!t || t->src != TSRC_RANDOM)
			continue;
		if (tensor_bytes(g, t, &b, e))
			return e->code;
		t->src = TSRC_BYTES;
		t->field = TFIELD_RAW;
		t->bytes = b;
	}
	return 0;
}

/* The loss: sum(y * y), whose dL/dy = 2y is a tensor like any other (an all-ones dL/dy from
 * sum(y) lets products of a broadcast seed shortcut); its nodes' gradients are not timed */
#define LOSS "  - {op: Mul, inputs: [y, y], outputs: [yy], name: lossmul}\n" \
	     "  - {op: ReduceSum, inputs: [yy], outputs: [loss], name: lossnode, attrs: {keepdims: 0}}\n"

/* The case's graph, checked and sorted; with grad, its loss and the backward pass, only the nodes
 * the op's gradient rule emitted left tagged backward (*n_grad of them). NULL with *why set. */
static struct graph *case_graph(const struct rcase *c, int grad, int *n_grad, char **why)
{
	size_t len = strlen(c->inputs) + strlen(c->params) + strlen(c->nodes) + 512;
	char *text = malloc(len);
	struct gd_err e = {0};
	if (!text) {
		*why = strdup("out of memory");
		return NULL;
	}
	snprintf(text, len, "graphdiet: 1\nopset: %d\ninputs:%s%s\nparams:%s%s\nnodes:\n%s%soutputs: [{name: %s}]\n",
		 c->opset ? c->opset : 17, *c->inputs ? "\n" : " []", c->inputs, *c->params ? "\n" : " []", c->params,
		 c->nodes, grad ? LOSS : "", grad ? "loss" : "y");
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "roofline.yaml", ".", &e);
	free(text);
	if (g && !graph_check(g, &e) && !graph_toposort(g, &e) && !named_node(g, "op"))
		snprintf(e.msg, sizeof e.msg, "the case has no node named op"), e.code = 1;
	if (g && !e.code && grad) {
		const char *const freeze[] = {"k[0-9]"};
		struct autodiff_opts ao = {.freeze = freeze, .n_freeze = strstr(c->params, "name: k0") ? 1 : 0};
		struct autodiff_result res;
		if (!autodiff(g, &ao, &res, &e)) {
			*n_grad = 0;
			for (uint32_t i = 0; i < g->n_nodes; i++) {
				struct node *n = g->nodes[i];
				if (!(n->tags & TAG_BACKWARD))
					continue;
				if (n->name && !strncmp(n->name, "op_grad", 7))
					++*n_grad;
				else /* the loss's: timed apart */
					n->tags = (n->tags & ~(uint32_t)TAG_BACKWARD) | TAG_LOSS_SCALE;
			}
		}
	}
	if (g && !e.code)
		materialize(g, &e);
	if (!g || e.code) {
		*why = strdup(e.msg);
		graph_free(g);
		return NULL;
	}
	return g;
}

/* Times g's timed nodes (grad: those tagged backward, else the node named op) into r: 0, or -1
 * with r->why set. A slow kernel is run fewer times: no more runs once 2 s have been spent, and no
 * warm-up run beyond the costs' when that took over a second. */
static int measure(struct graph *g, int grad, const struct opts *o, struct row *r)
{
	struct gd_err e = {0};
	const struct node *opn = named_node(g, "op");
	struct exec_opts co = {.random_inputs = 1, .seed = 1, .keep_values = 1};
	double tc = bench_now();
	struct exec *x = exec_run(g, &co, NULL, &e);
	tc = bench_now() - tc;
	if (!x) {
		r->why = strdup(e.msg);
		return -1;
	}
	r->f = calloc(g->n_nodes, sizeof *r->f);
	r->b = calloc(g->n_nodes, sizeof *r->b);
	for (uint32_t i = 0; r->f && r->b && i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		struct rtensor *in[64] = {0}, *out[64] = {0};
		if (grad ? !(n->tags & TAG_BACKWARD) : n != opn)
			continue;
		for (uint32_t k = 0; k < n->n_in && k < 64; k++)
			in[k] = n->in[k] ? (struct rtensor *)exec_value(x, n->in[k]) : NULL;
		for (uint32_t k = 0; k < n->n_out && k < 64; k++)
			out[k] = n->out[k] ? (struct rtensor *)exec_value(x, n->out[k]) : NULL;
		op_cost(n, in, out, &r->f[r->n], &r->b[r->n]);
		r->n++;
	}
	exec_free(x);
	double t[64], t0 = bench_now();
	int runs = 0;
	/* past a second, the costs' run was warm-up enough */
	for (int k = tc > 1.0; k <= o->repeat && (runs < 1 || bench_now() - t0 < 2.0); k++) {
		struct exec_profile prof = {0};
		struct exec_opts eo = {.random_inputs = 1, .seed = 1, .profile = &prof, .no_chains = grad};
		x = exec_run(g, &eo, NULL, &e);
		if (!x) {
			r->why = strdup(e.msg);
			return -1;
		}
		exec_free(x);
		if (k) /* run 0 warms caches and page tables */
			t[runs++] = grad ? prof.tag_seconds[1] : prof.seconds[opn->op];
	}
	qsort(t, (size_t)runs, sizeof *t, bench_by_value);
	r->sec = t[runs / 2];
	r->best = t[0];
	r->runs = runs;
	return 0;
}

/* The case in direction grad (0: fwd): a row, timed or saying why not. */
static void case_row(const struct rcase *c, int grad, const struct opts *o)
{
	int n_grad = 0;
	struct row *r = row_add(c->op, grad ? "grad" : "fwd", c->shape);
	struct graph *g = case_graph(c, grad, &n_grad, &r->why);
	if (g && grad && !n_grad) {
		r->why = strdup("no gradient nodes: the rule hands dL/dy on as it is");
		graph_free(g);
		g = NULL;
	}
	fprintf(stderr, "%s %s %s\n", c->op, r->dir, c->shape);
	if (g)
		measure(g, grad, o, r);
	graph_free(g);
}

/* An elementwise op without a case of its own: float32 16M-element operands (parameters, so the
 * gradient has something to flow to), or bool graph inputs where the op takes no floats. */
static void elem_rows(enum op_id op, const struct opts *o)
{
	const struct op_info *oi = &op_table[op];
	int n_in = oi->max_in < 0 || oi->max_in > 2 ? 2 : oi->max_in;
	n_in = n_in < oi->min_in ? oi->min_in : n_in;
	static char nodes[OP_COUNT][160];
	snprintf(nodes[op], sizeof nodes[op], "  - {op: %s, inputs: [%s], outputs: [y], name: op}\n", oi->op_type,
		 n_in > 1 ? "a, b" : "a");
	struct rcase fc = {oi->op_type, 0, n_in > 1 ? "16M, 16M" : "16M", "", n_in > 1 ? PF("a", N16M) PU("b", N16M) : PF("a", N16M),
			   nodes[op]};
	struct rcase bc = {oi->op_type, 0, n_in > 1 ? "16M bool, 16M bool" : "16M bool",
			   n_in > 1 ? IN("a", "bool", N16M) IN("b", "bool", N16M) : IN("a", "bool", N16M), "", nodes[op]};
	int n_grad = 0;
	char *why = NULL;
	struct graph *g = case_graph(&fc, 0, &n_grad, &why);
	const struct rcase *c = &fc;
	if (g) { /* an op of bools takes no floats: a shapes run tells */
		struct exec_opts so = {.random_inputs = 1, .seed = 1, .shapes_only = 1};
		struct gd_err e = {0};
		struct exec *x = exec_run(g, &so, NULL, &e);
		if (!x)
			c = &bc;
		exec_free(x);
		graph_free(g);
	} else {
		c = &bc;
	}
	free(why);
	case_row(c, 0, o);
	if (oi->flags & OPF_DIFF)
		case_row(c, 1, o);
}

/* The row's roof time: each node's max(FLOPs / peak, bytes / bandwidth), summed; *compute: the FMA
 * roof binds the nodes' total */
static double row_roof(const struct row *r, double peak, double bw, int *compute)
{
	double s = 0, tf = 0, tb = 0;
	for (size_t i = 0; i < r->n; i++) {
		double f = (double)r->f[i] / (peak * 1e9), b = (double)r->b[i] / (bw * 1e9);
		s += f > b ? f : b;
		tf += f;
		tb += b;
	}
	*compute = tf > tb;
	return s;
}

/* A view op (OPF_VIEW: Reshape, Flatten, Squeeze, Unsqueeze): where its input dies at the node
 * the output takes the input's buffer (exec_take) and moves no bytes, as its gradient's Reshape
 * does; its forward case here reads a parameter, which lives on, so the time is the copy made then */
static int row_view(const struct row *r)
{
	enum op_id op = op_lookup(NULL, r->op);
	return op != OP_UNKNOWN && (op_table[op].flags & OPF_VIEW);
}

#define VIEW_NOTE "view: no bytes where the input dies at the node (the output takes its buffer); else a copy, timed here"

static void row_print(const struct row *r, const struct opts *o, double peak, double bw)
{
	if (r->why) {
		if (o->tsv)
			printf("%s\t%s\t%s\t\t\t\t\t\t\t%s\n", r->op, r->dir, r->shape, r->why);
		else
			printf("| %s | %s | %s | | | | | | %s |\n", r->op, r->dir, r->shape, r->why);
		return;
	}
	int compute = 0;
	double frac = r->best > 0 ? row_roof(r, peak, bw, &compute) / r->best : 0, sum = 0;
	for (size_t i = 0; i < r->n; i++)
		sum += (double)(compute ? r->f[i] : r->b[i]);
	double rate = r->best > 0 ? sum / r->best / 1e9 : 0;
	const char *unit = compute ? "GFLOP/s" : "GB/s", *flag = frac < 0.25 ? "<25%" : "";
	if (row_view(r)) {
		if (o->tsv)
			printf("%s\t%s\t%s\t%.3f\t%.3f\t%.1f\t%.1f\t%s\tview\t%s\n", r->op, r->dir, r->shape, r->sec * 1e3,
			       r->best * 1e3, rate, bw, unit, VIEW_NOTE);
		else
			printf("| %s | %s | %s | %.3f | %.3f | %.1f %s | %.1f %s | view | %s |\n", r->op, r->dir, r->shape,
			       r->sec * 1e3, r->best * 1e3, rate, unit, bw, unit, VIEW_NOTE);
		return;
	}
	if (o->tsv)
		printf("%s\t%s\t%s\t%.3f\t%.3f\t%.1f\t%.1f\t%s\t%.3f\t%s\n", r->op, r->dir, r->shape, r->sec * 1e3, r->best * 1e3,
		       rate, compute ? peak : bw, unit, frac, flag);
	else
		printf("| %s | %s | %s | %.3f | %.3f | %.1f %s | %.1f %s | %.0f%% | %s |\n", r->op, r->dir, r->shape, r->sec * 1e3,
		       r->best * 1e3, rate, unit, compute ? peak : bw, unit, 100 * frac, flag);
}

static double final_peak, final_bw; /* the roofs the table applies */

static double row_frac(const struct row *r)
{
	int compute;
	return r->why || r->best <= 0 || row_view(r) ? 2 : row_roof(r, final_peak, final_bw, &compute) / r->best;
}

static int by_frac(const void *a, const void *b)
{
	double x = row_frac(*(struct row *const *)a), y = row_frac(*(struct row *const *)b);
	return (x > y) - (x < y);
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_roofline [--threads N] [--filter SUBSTR] [--repeat K (1..63)] [--format md|tsv]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct opts o = {.repeat = 5, .threads = 1};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			o.threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			o.repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
			o.filter = argv[++i];
		else if (!strcmp(argv[i], "--format") && i + 1 < argc && (!strcmp(argv[i + 1], "md") || !strcmp(argv[i + 1], "tsv")))
			o.tsv = !strcmp(argv[++i], "tsv");
		else
			return usage();
	}
	if (o.threads < 1 || o.repeat < 1 || o.repeat > 63)
		return usage();
	pool_set_threads(o.threads);
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		int found = 0;
		for (int op = 1; op < OP_COUNT && !found; op++)
			found = !strcmp(op_table[op].op_type, cases[k].op);
		if (!found) {
			fprintf(stderr, "bench_roofline: case %zu names %s, which the registry lacks\n", k, cases[k].op);
			return 1;
		}
	}
	roof.a = malloc(COPY_BYTES);
	roof.b = malloc(COPY_BYTES);
	if (!roof.a || !roof.b) {
		fprintf(stderr, "bench_roofline: out of memory for the copy buffers\n");
		return 1;
	}
	memset(roof.a, 0, COPY_BYTES);
	memset(roof.b, 0, COPY_BYTES);
	for (int k = 0; k < 3; k++)
		roof_sample(20000000);
	for (int op = 1; op < OP_COUNT; op++) {
		const struct op_info *oi = &op_table[op];
		if (o.filter && !strstr(oi->op_type, o.filter))
			continue;
		roof_sample(4000000);
		int any = 0;
		for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
			if (!strcmp(cases[k].op, oi->op_type)) {
				any = 1;
				case_row(&cases[k], 0, &o);
				if (oi->flags & OPF_DIFF)
					case_row(&cases[k], 1, &o);
			}
		if (any)
			continue;
		const char *why = not_a_kernel((enum op_id)op);
		if (why)
			row_add(oi->op_type, "fwd", "")->why = strdup(why);
		else if (oi->flags & OPF_ELEMWISE)
			elem_rows((enum op_id)op, &o);
		else
			row_add(oi->op_type, "fwd", "")->why = strdup("no real-size case in bench_roofline yet");
	}
	for (int k = 0; k < 3; k++)
		roof_sample(20000000);
	double peak = final_peak = roof_peak() * o.threads, bw = final_bw = roof_bw();
	char cpu[256];
	cpu_model(cpu, sizeof cpu);
	printf("bench_roofline: %s; %d thread(s); ms: the median of up to %d runs (fewer past 2 s), and the best, "
	       "which the fraction is of\n",
	       cpu, o.threads, o.repeat);
	printf("FMA peak %.1f GFLOP/s (float32, one core: zmm %.1f, ymm %.1f; x %d threads); bandwidth %.1f GB/s (read + "
	       "written, one thread, %zu MiB buffers: memcpy %.1f, y = x + 1 loop %.1f); balance %.1f FLOP/byte; the "
	       "best of samples taken between the ops\n\n",
	       peak, roof.zmm, roof.ymm, o.threads, bw, COPY_BYTES >> 20, roof.memcpy, roof.loop, peak / bw);
	if (o.tsv)
		printf("op\tdir\tshape\tms\tbest_ms\trate\troof\tunit\tfraction\tflag\tnot timed\n");
	else
		printf("| op | dir | shape | ms | best ms | achieved (best) | roof | of roof | |\n|---|---|---|---|---|---|---|---|---|\n");
	struct row **low = calloc(n_rows + 1, sizeof *low);
	size_t n_low = 0, n_timed = 0;
	for (size_t i = 0; i < n_rows; i++) {
		row_print(&rows[i], &o, peak, bw);
		n_timed += !rows[i].why;
		if (!rows[i].why && low && row_frac(&rows[i]) < 0.25)
			low[n_low++] = &rows[i];
	}
	printf("\n%zu rows timed, %zu under 25%% of their roof; %zu rows not timed\n", n_timed, n_low, n_rows - n_timed);
	if (low && n_low) {
		qsort(low, n_low, sizeof *low, by_frac);
		printf("\nUnder 25%%, furthest below first:\n\n");
		if (!o.tsv)
			printf("| op | dir | shape | ms | best ms | achieved (best) | roof | of roof | |\n|---|---|---|---|---|---|---|---|---|\n");
		for (size_t i = 0; i < n_low; i++)
			row_print(low[i], &o, peak, bw);
	}
	for (size_t i = 0; i < n_rows; i++) {
		free(rows[i].why);
		free(rows[i].f);
		free(rows[i].b);
	}
	free(rows);
	free(low);
	free(roof.a);
	free(roof.b);
	return 0;
}
