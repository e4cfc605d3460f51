/* bench_bottleneck.c - finding bottleneck tensors: graphdiet's linear sweep against the
 * walk-per-candidate method of the original memory_saving_gradients (one reachability search per
 * candidate, with the candidate deleted), in the same run, on residual stacks of 10^3 to 10^6 nodes.
 *
 *   bench_bottleneck [MAX_NODES]      (default 1000000)
 *
 * After a stem h0 = Relu(x), a block is a = Relu(h), b = Neg(a), h' = Add(h, b): the skip edge
 * bypasses a and b, and every h is a bottleneck, so both methods must find them all (checked). The
 * walk method is run up to 10^4 nodes (10^5 takes about 7 minutes); beyond that its time is
 * extrapolated (quadratic) and marked so. Prints a Markdown table: best of 3 times, and the ratio. */
#include "io/format.h"
#include "plan/bottleneck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static struct graph *residual_stack(uint32_t blocks, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return NULL;
	fprintf(f, "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4]}]\nnodes:\n"
		   "  - {op: Relu, inputs: [x], outputs: [h0]}\n");
	for (uint32_t i = 0; i < blocks; i++)
		fprintf(f, "  - {op: Relu, inputs: [h%u], outputs: [a%u]}\n  - {op: Neg, inputs: [a%u], outputs: [b%u]}\n"
			   "  - {op: Add, inputs: [h%u, b%u], outputs: [h%u]}\n",
			i, i, i, i, i, i, i + 1);
	fprintf(f, "outputs: [{name: h%u}]\n", blocks);
	fclose(f);
	struct gd_err e = {0};
	struct graph *g = model_load(path, FMT_AUTO, &e);
	if (!g)
		fprintf(stderr, "bench_bottleneck: %s\n", e.msg);
	return g;
}

/* The quadratic method: a forward search from the inputs per candidate, with it deleted. */
static uint32_t walk_per_candidate(const struct graph *g, const struct value *loss)
{
	uint8_t *live = malloc(g->n_values);
	uint32_t found = 0;
	for (uint32_t c = 0; c < g->n_nodes; c++) {
		const struct value *cut = g->nodes[c]->out[0];
		if (cut == loss)
			continue;
		memset(live, 0, g->n_values);
		for (uint32_t i = 0; i < g->n_inputs; i++)
			live[g->inputs[i]->id] = 1;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct node *n = g->nodes[i];
			int on = 0;
			for (uint32_t k = 0; k < n->n_in; k++)
				on |= live[n->in[k]->id];
			live[n->out[0]->id] = on && n->out[0] != cut;
		}
		found += !live[loss->id];
	}
	free(live);
	return found;
}

int main(int argc, char **argv)
{
	uint32_t max = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000;
	char path[] = "/tmp/bench_bottleneck_XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	printf("| nodes | bottlenecks | graphdiet sweep | walk per candidate | ratio |\n|---:|---:|---:|---:|---:|\n");
	double walk_ns_per_n2 = 0;
	for (uint32_t n = 1000; n <= max; n *= 10) {
		uint32_t blocks = (n - 1) / 3;
		struct graph *g = residual_stack(blocks, path);
		if (!g)
			return 1;
		const struct value *loss = g->outputs[0];
		struct bottlenecks b;
		struct gd_err e = {0};
		double best = 1e30, walk = 1e30;
		for (int r = 0; r < 3; r++) {
			double t = now();
			if (find_bottlenecks(g, loss, &b, &e)) {
				fprintf(stderr, "bench_bottleneck: %s\n", e.msg);
				return 1;
			}
			t = now() - t;
			best = t < best ? t : best;
		}
		int measured = g->n_nodes <= 10000;
		uint32_t wf = 0;
		for (int r = 0; r < (measured ? (g->n_nodes > 10000 ? 1 : 3) : 0); r++) {
			double t = now();
			wf = walk_per_candidate(g, loss);
			t = now() - t;
			walk = t < walk ? t : walk;
		}
		if (measured)
			walk_ns_per_n2 = walk / ((double)g->n_nodes * g->n_nodes);
		else
			walk = walk_ns_per_n2 * (double)g->n_nodes * g->n_nodes;
		/* h0 .. h(blocks-1); the loss h(blocks) is left out */
		if (b.n != blocks || (measured && wf != b.n)) {
			fprintf(stderr, "bench_bottleneck: %u nodes: sweep found %u, walk %u, expected %u\n", g->n_nodes, b.n, wf,
				blocks);
			return 1;
		}
		printf("| %u | %u | %.3g ms | %.3g ms%s | %.0fx |\n", g->n_nodes, b.n, best * 1e3, walk * 1e3,
		       measured ? "" : " (extrapolated)", walk / best);
		fflush(stdout);
		graph_free(g);
	}
	unlink(path);
	return 0;
}
