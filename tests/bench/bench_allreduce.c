/* bench_allreduce.c - the transport's own cost: raw MPI_Allreduce (MPI_SUM, in place) of exactly
 * the buffers a training graph's AllReduce nodes sum in one step, one call per node, under mpirun.
 * run_replicas.sh sets it beside graphdiet's AllReduce time for the same graph.
 *
 *   mpirun -np N bench_allreduce TRAIN.onnx [--repeat R]
 *
 * Prints, on rank 0: nodes, bytes, and the best of R steps' seconds (after a barrier each). */
#include "io/format.h"
#include "ir/graph.h"
#include "ops/ops.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	int repeat = argc > 3 && !strcmp(argv[2], "--repeat") ? atoi(argv[3]) : 3;
	struct gd_err e = {0};
	struct graph *g = argc > 1 ? model_load(argv[1], FMT_AUTO, &e) : NULL;
	if (!g) {
		fprintf(stderr, "bench_allreduce: %s\n", argc > 1 ? e.msg : "usage: bench_allreduce TRAIN.onnx");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	/* each node's elements (float32 or float64 by its first input) */
	size_t n = 0, *count = calloc(g->n_nodes + 1, sizeof *count), bytes = 0;
	int *f64 = calloc(g->n_nodes + 1, sizeof *f64);
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *nd = g->nodes[i];
		if (nd->op != OP_ALL_REDUCE)
			continue;
		for (uint32_t k = 0; k < nd->n_in; k++) { /* <param>_grad_local has its parameter's shape */
			char name[600];
			snprintf(name, sizeof name, "%s", nd->in[k]->name);
			char *sfx = strstr(name, "_grad_local");
			if (sfx)
				*sfx = 0;
			const struct value *p = strmap_get(&g->names, name);
			size_t c = 1;
			for (uint32_t d = 0; sfx && p && p->init && d < p->init->ndim; d++)
				c *= (size_t)p->init->dims[d];
			count[n] += c;
			f64[n] = p && p->init && p->init->dtype == DT_DOUBLE;
		}
		bytes += count[n] * (f64[n] ? 8 : 4);
		n++;
	}
	size_t most = 0;
	for (size_t i = 0; i < n; i++)
		most = count[i] * 8 > most ? count[i] * 8 : most;
	void *buf = calloc(most ? most : 1, 1);
	double best = 1e30;
	for (int r = 0; r <= repeat; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t = MPI_Wtime();
		for (size_t i = 0; i < n; i++)
			MPI_Allreduce(MPI_IN_PLACE, buf, (int)count[i], f64[i] ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		t = MPI_Wtime() - t;
		if (r && t < best) /* the first is a warm-up */
			best = t;
	}
	if (!rank)
		printf("{\"nodes\": %zu, \"bytes\": %zu, \"seconds\": %.6f}\n", n, bytes, best);
	free(buf);
	free(count);
	free(f64);
	graph_free(g);
	MPI_Finalize();
	return 0;
}
