/* bench_elem - the activations and Dropout against the memory roof: each case's forward node, or the
 * nodes its gradient rule writes (rows marked "now": what #52 actfast's rules write, after the row of
 * those they wrote before), run by the executor on a 16M-element float32 tensor, timed from the
 * executor's per-op profile (kernels only: no input drawing), and compared with a streaming copy
 * (memcpy between two faulted-in 64 MiB buffers, the fastest of the runs) measured in the same run.
 *
 *   bench_elem [--threads N] [--repeat N] [--numel N]
 *
 * GB/s counts each case's least traffic: its graph inputs read once and its outputs written once
 * (Clip's gradient: y and g read, dx written: 12 bytes an element), so the fraction is of what a
 * single fused pass at copy speed would reach. The executor's output buffers are fresh, so their
 * first-touch page faults count against the kernels, as in a training step. */
#include "exec/exec.h"
#include "io/format.h"
#include "util/pool.h"
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct elem_case {
	const char *name;
	const char *inputs; /* YAML, beyond x */
	const char *params; /* YAML: the constants */
	const char *nodes;  /* YAML */
	const char *outputs;
	int bytes; /* least traffic per element */
};

#define G ", {name: g, dtype: float32, shape: [N]}"
#define K(name, v) "{name: " #name ", dtype: float32, shape: [], data: [" #v "]}"
/* activation.c's select_above_zero: s g + (1 - s) lo, s = sign(relu(y)), after lo's nodes */
#define SELECT                                                                                                 \
	"  - {op: Relu, inputs: [x], outputs: [r]}\n  - {op: Sign, inputs: [r], outputs: [s]}\n"                   \
	"  - {op: Sub, inputs: [one, s], outputs: [t]}\n  - {op: Mul, inputs: [t, lo], outputs: [kl]}\n"           \
	"  - {op: Mul, inputs: [s, g], outputs: [kh]}\n  - {op: Add, inputs: [kh, kl], outputs: [d]}\n"
#define TRAIN K(r, 0) ", {name: t, dtype: bool, shape: [], data: [true]}"
static const struct elem_case cases[] = {
	{"Clip [0, 6]", "", K(lo, 0) ", " K(hi, 6),
	 "  - {op: Clip, inputs: [x, lo, hi], outputs: [y]}\n", "y", 8},
	{"Clip' (Greater Where Less Where)",
	 G, K(lo, 0) ", " K(hi, 6) ", " K(z, 0),
	 "  - {op: Greater, inputs: [x, lo], outputs: [c1]}\n  - {op: Where, inputs: [c1, g, z], outputs: [g1]}\n"
	 "  - {op: Less, inputs: [x, hi], outputs: [c2]}\n  - {op: Where, inputs: [c2, g1, z], outputs: [d]}\n",
	 "d", 12},
	{"Clip' now (Sub Sign Mul, twice)", G, K(lo, 0) ", " K(hi, 6),
	 "  - {op: Sub, inputs: [x, lo], outputs: [a]}\n  - {op: Sign, inputs: [a], outputs: [s1]}\n"
	 "  - {op: Mul, inputs: [g, s1], outputs: [g1]}\n  - {op: Sub, inputs: [hi, x], outputs: [b]}\n"
	 "  - {op: Sign, inputs: [b], outputs: [s2]}\n  - {op: Mul, inputs: [g1, s2], outputs: [d]}\n",
	 "d", 12},
	{"Relu", "", "", "  - {op: Relu, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Relu' (Greater Where)", G, K(z, 0),
	 "  - {op: Greater, inputs: [x, z], outputs: [c]}\n  - {op: Where, inputs: [c, g, z], outputs: [d]}\n", "d", 12},
	{"Sigmoid", "", "", "  - {op: Sigmoid, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Sigmoid' (Sub Mul Mul)", G, K(one, 1),
	 "  - {op: Sub, inputs: [one, x], outputs: [s]}\n  - {op: Mul, inputs: [x, s], outputs: [m]}\n"
	 "  - {op: Mul, inputs: [g, m], outputs: [d]}\n",
	 "d", 12},
	{"Tanh", "", "", "  - {op: Tanh, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Tanh' (Mul Sub Mul)", G, K(one, 1),
	 "  - {op: Mul, inputs: [x, x], outputs: [s]}\n  - {op: Sub, inputs: [one, s], outputs: [m]}\n"
	 "  - {op: Mul, inputs: [g, m], outputs: [d]}\n",
	 "d", 12},
	{"LeakyRelu", "", "", "  - {op: LeakyRelu, inputs: [x], outputs: [y]}\n", "y", 8},
	{"HardSigmoid", "", "", "  - {op: HardSigmoid, inputs: [x], outputs: [y]}\n", "y", 8},
	{"HardSwish", "", "", "  - {op: HardSwish, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Elu", "", "", "  - {op: Elu, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Softplus", "", "", "  - {op: Softplus, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Elu' (Greater Add Mul Where)", G, K(z, 0) ", " K(al, 1),
	 "  - {op: Greater, inputs: [x, z], outputs: [c]}\n  - {op: Add, inputs: [x, al], outputs: [s]}\n"
	 "  - {op: Mul, inputs: [g, s], outputs: [l]}\n  - {op: Where, inputs: [c, g, l], outputs: [d]}\n",
	 "d", 12},
	/* Elu's lo = g (min(y, 0) + 1) */
	{"Elu' now (one chain)", G, K(one, 1),
	 "  - {op: Neg, inputs: [x], outputs: [n1]}\n  - {op: Relu, inputs: [n1], outputs: [n2]}\n"
	 "  - {op: Neg, inputs: [n2], outputs: [m]}\n  - {op: Add, inputs: [m, one], outputs: [m1]}\n"
	 "  - {op: Mul, inputs: [g, m1], outputs: [lo]}\n" SELECT,
	 "d", 12},
	{"Softplus' (Sigmoid Mul)", G, "",
	 "  - {op: Sigmoid, inputs: [x], outputs: [s]}\n  - {op: Mul, inputs: [g, s], outputs: [d]}\n", "d", 12},
	{"Selu", "", "", "  - {op: Selu, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Celu", "", "", "  - {op: Celu, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Softsign", "", "", "  - {op: Softsign, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Mish", "", "", "  - {op: Mish, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Gelu", "", "", "  - {op: Gelu, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Gelu tanh", "", "", "  - {op: Gelu, inputs: [x], outputs: [y], attrs: {approximate: tanh}}\n", "y", 8},
	/* gelu_grad's nodes: g 0.5 (1 + erf(k x) + x (2k / sqrt(pi)) exp(-k^2 x^2)), k = 1 / sqrt(2) */
	{"Gelu' (11 nodes, one chain)", G, K(nk2, -0.5) ", " K(c, 0.7978845608) ", " K(k, 0.70710678) ", " K(one, 1) ", " K(h, 0.5),
	 "  - {op: Mul, inputs: [x, x], outputs: [sq]}\n  - {op: Mul, inputs: [sq, nk2], outputs: [a]}\n"
	 "  - {op: Exp, inputs: [a], outputs: [pdf]}\n  - {op: Mul, inputs: [pdf, c], outputs: [b]}\n"
	 "  - {op: Mul, inputs: [x, b], outputs: [xp]}\n  - {op: Mul, inputs: [x, k], outputs: [xk]}\n"
	 "  - {op: Erf, inputs: [xk], outputs: [e]}\n  - {op: Add, inputs: [e, one], outputs: [cdf]}\n"
	 "  - {op: Add, inputs: [cdf, xp], outputs: [sl]}\n  - {op: Mul, inputs: [sl, h], outputs: [hs]}\n"
	 "  - {op: Mul, inputs: [g, hs], outputs: [d]}\n",
	 "d", 12},
	{"LeakyRelu' (Greater Mul Where)", G, K(z, 0) ", " K(al, 0.01),
	 "  - {op: Greater, inputs: [x, z], outputs: [c]}\n  - {op: Mul, inputs: [g, al], outputs: [l]}\n"
	 "  - {op: Where, inputs: [c, g, l], outputs: [d]}\n",
	 "d", 12},
	{"LeakyRelu' now (one chain)", G, K(one, 1) ", " K(al, 0.01),
	 "  - {op: Mul, inputs: [g, al], outputs: [lo]}\n" SELECT,
	 "d", 12},
	{"Exp", "", "", "  - {op: Exp, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Erf", "", "", "  - {op: Erf, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Log", "", "", "  - {op: Log, inputs: [x], outputs: [y]}\n", "y", 8},
	{"Dropout p=0 (y, mask)", "", TRAIN, "  - {op: Dropout, inputs: [x, r, t], outputs: [y, m], attrs: {seed: 1}}\n", "y, m",
	 9},
	{"Dropout' (Cast Mul Div)", G ", {name: mb, dtype: bool, shape: [N]}", K(one, 1),
	 "  - {op: Cast, inputs: [mb], outputs: [mf], attrs: {to: 1}}\n  - {op: Mul, inputs: [g, mf], outputs: [p]}\n"
	 "  - {op: Div, inputs: [p, one], outputs: [d]}\n",
	 "d", 9},
};

/* The case's kernels' seconds per run: the median over repeat runs (after one to warm up) */
static double case_seconds(const struct elem_case *c, long long numel, int repeat)
{
	char text[4096], path[] = "/tmp/bench_elem_XXXXXX.yaml", outs[256] = "", names[64], *save = NULL;
	/* outputs "y, m" as [{name: y}, {name: m}] */
	snprintf(names, sizeof names, "%s", c->outputs);
	for (char *tok = strtok_r(names, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
		snprintf(outs + strlen(outs), sizeof outs - strlen(outs), "%s{name: %s}", *outs ? ", " : "", tok);
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [N]}%s]\nparams: [%s]\nnodes:\n%s"
		 "outputs: [%s]\n",
		 c->inputs, c->params, c->nodes, outs);
	/* "shape: [N]" is the case's size */
	char full[8192], *o = full;
	for (const char *p = text; *p && o < full + sizeof full - 32; p++)
		if (!strncmp(p, "[N]", 3)) {
			o += sprintf(o, "[%lld]", numel);
			p += 2;
		} else {
			*o++ = *p;
		}
	*o = 0;
	int fd = mkstemps(path, 5);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || fputs(full, f) < 0 || fclose(f))
		return -1;
	struct gd_err e = {0};
	struct graph *g = model_load(path, FMT_AUTO, &e);
	if (!getenv("BENCH_ELEM_KEEP"))
		remove(path);
	if (!g) {
		fprintf(stderr, "bench_elem: %s: %s\n", c->name, e.msg);
		return -1;
	}
	double t[64];
	for (int r = 0; r <= repeat; r++) {
		struct exec_profile prof = {0};
		struct exec_opts eo = {.random_inputs = 1, .seed = 1, .profile = &prof};
		struct exec *x = exec_run(g, &eo, NULL, &e);
		if (!x) {
			fprintf(stderr, "bench_elem: %s: %s\n", c->name, e.msg);
			graph_free(g);
			return -1;
		}
		exec_free(x);
		double s = 0;
		for (int op = 0; op < OP_COUNT; op++)
			s += prof.seconds[op];
		if (r)
			t[r - 1] = s;
	}
	graph_free(g);
	qsort(t, (size_t)repeat, sizeof *t, bench_by_value);
	return t[repeat / 2];
}

int main(int argc, char **argv)
{
	int repeat = 5, threads = 1;
	long long numel = 16LL << 20;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--numel") && i + 1 < argc)
			numel = atoll(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_elem [--threads N] [--repeat N] [--numel N]\n");
			return 2;
		}
	}
	if (repeat < 1 || repeat > 63 || numel < 1 || threads < 1) {
		fprintf(stderr, "bench_elem: --repeat 1..63, --numel and --threads at least 1\n");
		return 2;
	}
	pool_set_threads(threads);
	double roof = bench_copy_gbs((size_t)64 << 20, repeat);
	printf("bench_elem: %lld float32 elements, %d thread(s), median of %d; memcpy %.1f GB/s\n", numel, threads, repeat,
	       roof);
	printf("%-34s %10s %8s %8s\n", "case", "ms", "GB/s", "of copy");
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		double s = case_seconds(&cases[k], numel, repeat);
		if (s < 0)
			return 1;
		double gbs = (double)cases[k].bytes * (double)numel / s / 1e9;
		printf("%-34s %10.2f %8.2f %7.0f%%\n", cases[k].name, s * 1e3, gbs, 100 * gbs / roof);
	}
	return 0;
}
