/* main.c - graphdiet's entry point: the command table and global options.
 *
 * Each subcommand lives in src/cli/<name>.c and parses its own options. Exit codes are the
 * CLI contract in DESIGN.md: 0 success, 1 a check failed, 2 bad usage or input, 3 internal. */
#include "cli/cli.h"
#include "exec/backend.h"
#include "gd_commit.h" /* GD_COMMIT, written at build time (cmake/commit.cmake) */
#include "ops/blas.h"
#include "util/pool.h"
#include "util/progress.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef GD_HAVE_MPI
#include <mpi.h>
#endif

const struct cli_cmd cli_cmds[] = {
	{"info", cmd_info, "summarise a model: ops, parameters, inputs and outputs"},
	{"convert", cmd_convert, "convert between ONNX and graphdiet YAML, losslessly"},
	{"dot", cmd_dot, "draw a graph as Graphviz DOT"},
	{"train", cmd_train, "build the training graph: forward, backward, <param>_grad outputs"},
	{"plan", cmd_plan, "report training memory: peak, where, and what it holds"},
	{"check", cmd_check, "CI gate: does training fit in a memory budget? (exit 1 if not)"},
	{"run", cmd_run, "run a graph with the reference executor"},
	{"verify", cmd_verify, "check a training graph's gradients against the model's plain ones"},
	{"ops", cmd_ops, "list the supported ops: gradient, recompute class, mixed precision"},
	{NULL, NULL, NULL},
};

static void usage(FILE *f)
{
	fputs("usage: graphdiet [-V | --version] [-h | --help] [-v | --verbose] [-q | --quiet | --progress]\n"
	      "                 [--threads N] <command> [<args>]\n\n"
	      "Puts deep-learning training graphs on a memory diet.\n\ncommands:\n",
	      f);
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fputs("\nModels are ONNX (.onnx) or graphdiet YAML (.yaml); '-' is standard input or output.\n"
	      "-v prints each phase of the work, its time and the memory in use to standard error.\n"
	      "On a terminal, work that runs over a second shows a live meter on standard error; -q hides\n"
	      "it, --progress shows it anywhere (a CI log), from the start.\n"
	      "--threads N: the threads graphdiet's own parallel work uses (default: the cores online);\n"
	      "results are the same for any N.\n"
	      "--version: the version, then the build's facts (commit, compiler, GEMM kernel and BLAS, CUDA,\n"
	      "MPI), for bug reports.\n"
	      "'graphdiet <command> --help' describes a command; man graphdiet(1) has the details (from\n"
	      "a source tree before 'cmake --install': man -l man/graphdiet.1).\n",
	      f);
}

/* --version: the version, then one build fact a line ("what: value"), for bug reports. */
static int version(void)
{
	char blas[512], cuda[512];
	blas_describe(blas, sizeof blas);
#ifdef GD_HAVE_CUDA
	cuda_describe(cuda, sizeof cuda);
#else
	snprintf(cuda, sizeof cuda, "not built (--backend cuda is refused; cmake -DGRAPHDIET_CUDA=ON with nvcc)");
#endif
	printf("graphdiet %s\n"
	       "commit:     %s\n"
	       "build:      %s, %s, sanitizers: %s\n"
	       "sgemm:      %s\n"
	       "blas:       %s\n"
	       "cuda:       %s\n",
	       GD_VERSION, GD_COMMIT, GD_BUILD_TYPE, GD_COMPILER, GD_SANITIZERS, blas_sgemm_kernel(), blas, cuda);
#ifdef GD_HAVE_MPI
	char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
	int len = 0;
	MPI_Get_library_version(lib, &len); /* one of the calls MPI allows before MPI_Init */
	lib[strcspn(lib, ",\n")] = 0;
	printf("mpi:        %s (mpirun -np N graphdiet run --shard-inputs)\n", lib);
#else
	puts("mpi:        not built (replicas run in one process; cmake finds MPI with libopenmpi-dev)");
#endif
	return cli_finish(0);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN); /* a closed pipe becomes a write error we report, not a silent death */
	if (argc < 2) {
		usage(stderr);
		return GD_EINPUT;
	}
	progress_meter = isatty(2); /* a live meter on a terminal, for work over a second */
	for (;;) { /* global options, before the command */
		if (!strcmp(argv[1], "-v") || !strcmp(argv[1], "--verbose"))
			progress_on = 1;
		else if (!strcmp(argv[1], "-q") || !strcmp(argv[1], "--quiet"))
			progress_meter = 0;
		else if (!strcmp(argv[1], "--progress"))
			progress_meter = 2;
		else if (!strcmp(argv[1], "--threads") || !strncmp(argv[1], "--threads=", 10)) {
			const char *v = argv[1][9] == '=' ? argv[1] + 10 : argc > 2 ? argv[2] : "";
			int64_t n;
			if (cli_parse_i64(v, 1, POOL_MAX, &n))
				return cli_usage(NULL, "--threads: '%s' is not a number of threads from 1 to %d", v, POOL_MAX);
			pool_set_threads((int)n);
			if (argv[1][9] != '=') {
				argc--;
				argv++;
			}
		} else
			break;
		argc--;
		argv++;
		if (argc < 2) {
			usage(stderr);
			return GD_EINPUT;
		}
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		if (argc > 2 && strcmp(cmd, "help") == 0) {
			for (const struct cli_cmd *c = cli_cmds; c->name; c++)
				if (!strcmp(c->name, argv[2])) {
					char *args[] = {argv[2], "--help", NULL};
					cli_argv = args;
					return c->fn(2, args);
				}
			return cli_usage(NULL, "'%s' is not a graphdiet command", argv[2]);
		}
		usage(stdout);
		return cli_finish(0);
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
		return version();
	}
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		if (!strcmp(c->name, cmd)) {
			cli_argv = argv + 1;
			return c->fn(argc - 1, argv + 1);
		}
	return cli_usage(NULL, "'%s' is not a graphdiet command", cmd);
}
