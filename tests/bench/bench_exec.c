/* bench_exec.c - times graphdiet's executor on one model: forward, or a training step.
 *
 *   bench_exec MODEL [--train] [--repeat N] [--threads N] [--dim NAME=VALUE]... [--input NAME=FILE.npy]...
 *              [--profile]
 *
 * Prints "seconds S peak_bytes P flops F best B": the median S and the best B of N runs (default
 * 10) after one warm-up run, on the inputs given (seeded random values for the others). The graph
 * is loaded (and with --train differentiated) once; only the nodes' execution is timed. Used by
 * run_step.py, which times PyTorch and onnxruntime on the same step and inputs in the same run. */
#include "autodiff/ad.h"
#include "cli/cli.h"
#include "exec/exec.h"
#include "io/format.h"
#include "util/pool.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_exec MODEL [--train] [--repeat N] [--dim NAME=VALUE]...\n");
		return 2;
	}
	int train = 0, repeat = 10, profile = 0;
	static struct exec_profile prof;
	struct exec_binding dims[16];
	size_t nd = 0, ni = 0;
	struct rtensor inputs[16];
	const char *names[16];
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--train"))
			train = 1;
		else if (!strcmp(argv[i], "--profile"))
			profile = 1;
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			pool_set_threads(atoi(argv[++i]));
		else if (!strcmp(argv[i], "--dim") && i + 1 < argc && nd < 16) {
			char *eq = strchr(argv[++i], '=');
			if (!eq)
				return 2;
			*eq = 0;
			dims[nd].name = argv[i];
			dims[nd++].value = atoll(eq + 1);
		} else if (!strcmp(argv[i], "--input") && i + 1 < argc && ni < 16) {
			char *eq = strchr(argv[++i], '=');
			struct gd_err e = {0};
			if (!eq)
				return 2;
			*eq = 0;
			names[ni] = argv[i];
			if (cli_tensor_load(eq + 1, &inputs[ni++], &e)) {
				fprintf(stderr, "bench_exec: %s\n", e.msg);
				return 2;
			}
		} else {
			fprintf(stderr, "bench_exec: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	struct gd_err e = {0};
	struct graph *g = model_load(argv[1], FMT_AUTO, &e);
	if (!g) {
		fprintf(stderr, "bench_exec: %s: %s\n", argv[1], e.msg);
		return 2;
	}
	struct autodiff_opts ao = {0};
	struct autodiff_result res;
	if (train && (autodiff(g, &ao, &res, &e) || graph_toposort(g, &e))) {
		fprintf(stderr, "bench_exec: %s\n", e.msg);
		return 2;
	}
	struct exec_opts o = {.random_inputs = 1, .seed = 1, .dims = dims, .n_dims = nd, .profile = profile ? &prof : NULL,
			      .inputs = inputs, .input_names = names, .n_inputs = ni};
	double *t = calloc((size_t)(repeat > 0 ? repeat : 1), sizeof *t);
	struct exec_stats st = {0};
	for (int r = 0; t && r <= repeat; r++) {
		struct exec *x = exec_run(g, &o, &st, &e);
		if (!x) {
			fprintf(stderr, "bench_exec: %s\n", e.msg);
			return 2;
		}
		exec_free(x);
		if (r) /* run 0 warms caches and page tables */
			t[r - 1] = st.seconds;
	}
	if (!t || repeat < 1)
		return 2;
	qsort(t, (size_t)repeat, sizeof *t, by_value);
	printf("seconds %.6f peak_bytes %zu flops %llu best %.6f\n", t[repeat / 2], st.peak_bytes,
	       (unsigned long long)st.flops, t[0]);
	free(t);
	for (int op = 0; profile && op < OP_COUNT; op++)
		if (prof.calls[op])
			fprintf(stderr, "%-26s %8.3f ms/run %6llu calls/run\n", op ? op_table[op].op_type : "?",
				prof.seconds[op] * 1000 / (repeat + 1), (unsigned long long)(prof.calls[op] / (repeat + 1)));
	double total = 0;
	for (int op = 0; op < OP_COUNT; op++)
		total += prof.seconds[op];
	for (int k = 0; profile && k < 8; k++)
		if (prof.tag_seconds[k] > 0) {
			char tag[32];
			fprintf(stderr, "tagged %-19s %8.3f ms/run %5.1f%% of node time\n", node_tags_str(1u << k, tag, sizeof tag),
				prof.tag_seconds[k] * 1000 / (repeat + 1), 100 * prof.tag_seconds[k] / total);
		}
	for (size_t k = 0; k < ni; k++)
		xfree(inputs[k].data);
	graph_free(g);
	return 0;
}
