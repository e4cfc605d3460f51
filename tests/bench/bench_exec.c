/* bench_exec.c - times graphdiet's executor on one model: forward, or a training step.
 *
 *   bench_exec MODEL [--train] [--repeat N] [--dim NAME=VALUE]... [--input NAME=FILE.npy]...
 *
 * Prints "seconds S peak_bytes P flops F": the best of N runs (default 10) after one warm-up run,
 * with seeded random inputs unless given. The graph is loaded (and differentiated) once; only
 * execution is timed. Used by run_step.py, which times PyTorch on the same model in the same run. */
#include "autodiff/ad.h"
#include "exec/exec.h"
#include "io/format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_exec MODEL [--train] [--repeat N] [--dim NAME=VALUE]...\n");
		return 2;
	}
	int train = 0, repeat = 10, profile = 0;
	static struct exec_profile prof;
	struct exec_binding dims[16];
	size_t nd = 0;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--train"))
			train = 1;
		else if (!strcmp(argv[i], "--profile"))
			profile = 1;
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--dim") && i + 1 < argc && nd < 16) {
			char *eq = strchr(argv[++i], '=');
			if (!eq)
				return 2;
			*eq = 0;
			dims[nd].name = argv[i];
			dims[nd++].value = atoll(eq + 1);
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
	struct exec_opts o = {.random_inputs = 1, .seed = 1, .dims = dims, .n_dims = nd, .profile = profile ? &prof : NULL};
	double best = 1e30;
	struct exec_stats st = {0};
	for (int r = 0; r <= repeat; r++) {
		struct exec_stats s;
		struct exec *x = exec_run(g, &o, &s, &e);
		if (!x) {
			fprintf(stderr, "bench_exec: %s\n", e.msg);
			return 2;
		}
		exec_free(x);
		if (r && s.seconds < best) { /* run 0 warms caches and page tables */
			best = s.seconds;
			st = s;
		}
	}
	printf("seconds %.6f peak_bytes %zu flops %llu\n", best, st.peak_bytes, (unsigned long long)st.flops);
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
	graph_free(g);
	return 0;
}
