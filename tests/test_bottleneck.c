/* test_bottleneck.c - articulation tensors: hand-checked graphs, and random DAGs against the
 * definition checked directly by a quadratic scan. */
#include "helpers.h"
#include "plan/bottleneck.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct bottlenecks find(struct graph *g, const char *loss)
{
	struct bottlenecks b;
	struct gd_err e = {0};
	const struct value *l = strmap_get(&g->names, loss);
	cr_assert(l);
	cr_assert_eq(find_bottlenecks(g, l, &b, &e), 0, "%s", e.msg);
	return b;
}

static const char *names(const struct value *const *v, uint32_t n, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = 0;
	for (uint32_t i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "", v[i]->name);
	return buf;
}

Test(bottleneck, residual_block_by_hand)
{
	/* x -> a -> b -> c, d = a + c (the skip), e = w * d (a parameter), loss = sum(e): every path
	 * passes a, d and e; b and c are bypassed by the skip edge a -> Add. */
	struct graph *g = load_text("residual.yaml",
				    "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [4]}]\n"
				    "params: [{name: w, dtype: float32, shape: [4], init: zeros}]\n"
				    "nodes:\n"
				    "  - {op: Relu, inputs: [x], outputs: [a]}\n"
				    "  - {op: Neg, inputs: [a], outputs: [b]}\n"
				    "  - {op: Tanh, inputs: [b], outputs: [c]}\n"
				    "  - {name: skip, op: Add, inputs: [a, c], outputs: [d]}\n"
				    "  - {op: Mul, inputs: [w, d], outputs: [e]}\n"
				    "  - {op: ReduceSum, inputs: [e], outputs: [loss], attrs: {keepdims: 0}}\n"
				    "outputs: [{name: loss}]\n");
	struct bottlenecks b = find(g, "loss");
	char buf[256];
	cr_assert_str_eq(names(b.v, b.n, buf, sizeof buf), "a,d,e");
	cr_assert_eq(b.n_cand, 5);
	cr_assert_str_eq(b.cand[1]->name, "b");
	cr_assert(b.why[1].node && !strcmp(b.why[1].node->name, "skip") && b.why[1].into_node);
	cr_assert_str_eq(b.why[1].value->name, "a");
	cr_assert_null(b.why[0].node);
	graph_free(g);
}

Test(bottleneck, labels_and_parameters_are_resident)
{
	/* the labels t are read by the loss at the very end and wt = Transpose(w) depends on a
	 * parameter alone: neither bypasses h or a (else nothing would ever be a bottleneck) */
	struct graph *g = load_text("resident.yaml",
				    "graphdiet: 1\nopset: 17\ninputs:\n"
				    "  - {name: x, dtype: float32, shape: [2, 2]}\n  - {name: t, dtype: float32, shape: [2, 2]}\n"
				    "params: [{name: w, dtype: float32, shape: [2, 2], init: zeros}]\n"
				    "nodes:\n"
				    "  - {op: Transpose, inputs: [w], outputs: [wt]}\n"
				    "  - {op: MatMul, inputs: [x, w], outputs: [h]}\n"
				    "  - {op: Relu, inputs: [h], outputs: [a]}\n"
				    "  - {op: MatMul, inputs: [a, wt], outputs: [y]}\n"
				    "  - {op: Sub, inputs: [y, t], outputs: [d]}\n"
				    "  - {op: ReduceSum, inputs: [d], outputs: [loss], attrs: {keepdims: 0}}\n"
				    "outputs: [{name: loss}]\n");
	struct bottlenecks b = find(g, "loss");
	char buf[256];
	cr_assert_str_eq(names(b.v, b.n, buf, sizeof buf), "h,a,y,d");
	cr_assert_eq(b.n_cand, 4, "wt depends on no input: not a candidate");
	graph_free(g);
}

/* The definition, checked directly: the values on input-to-loss paths (found by two searches), and
 * for each candidate a scan of every other such value for one made at or before it and read after
 * it. Quadratic, fine for tests. on[] marks values (by id) and nodes (n_values + index). */
static uint8_t *on_paths(const struct graph *g, const struct value *loss)
{
	uint32_t nv = g->n_values;
	uint8_t *from = calloc(nv + g->n_nodes, 1), *to = calloc(nv + g->n_nodes, 1);
	for (uint32_t i = 0; i < g->n_inputs; i++)
		from[g->inputs[i]->id] = !g->inputs[i]->init;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
			if (from[g->nodes[i]->in[k]->id])
				from[nv + i] = from[g->nodes[i]->out[0]->id] = 1;
	to[loss->id] = 1;
	for (uint32_t i = g->n_nodes; i-- > 0;)
		if (to[g->nodes[i]->out[0]->id]) {
			to[nv + i] = 1;
			for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
				to[g->nodes[i]->in[k]->id] = 1;
		}
	for (uint32_t i = 0; i < nv + g->n_nodes; i++)
		from[i] &= to[i];
	free(to);
	return from;
}

static int crossed(const struct graph *g, const uint8_t *on, const struct value *v)
{
	uint32_t at = v->producer->index;
	for (uint32_t j = 0; j <= at; j++) {
		const struct value *u = g->nodes[j]->out[0];
		if (u == v || !on[u->id])
			continue;
		for (uint32_t k = at + 1; k < g->n_nodes; k++)
			for (uint32_t m = 0; m < g->nodes[k]->n_in; m++)
				if (g->nodes[k]->in[m] == u && on[g->n_values + k])
					return 1;
	}
	return 0;
}

Test(bottleneck, random_dags_match_the_definition)
{
	static const char *const un[] = {"Relu", "Neg", "Tanh"}, *const bin[] = {"Add", "Mul"};
	srand(7);
	for (int t = 0; t < 300; t++) {
		int n = 2 + rand() % 30, ni = 1 + rand() % 2;
		char *text = malloc(200 * (size_t)(n + 8)), *p = text;
		p += sprintf(p, "graphdiet: 1\nopset: 17\ninputs:\n");
		for (int i = 0; i < ni; i++)
			p += sprintf(p, "  - {name: x%d, dtype: float32, shape: [2]}\n", i);
		p += sprintf(p, "params: [{name: w, dtype: float32, shape: [2], init: zeros}]\nnodes:\n");
		/* values: x0.. (inputs), v0.. (node outputs); operands drawn from the last few, so that
		 * there are long skips and short ones; w now and then */
		for (int i = 0; i < n; i++) {
			char ops[2][16];
			int arity = 1 + rand() % 2;
			for (int k = 0; k < arity; k++) {
				int back = 1 + rand() % (rand() % 4 ? 3 : 12), j = i - back;
				if (rand() % 8 == 0)
					snprintf(ops[k], sizeof ops[k], "w");
				else if (j < 0)
					snprintf(ops[k], sizeof ops[k], "x%d", (-j - 1) % ni);
				else
					snprintf(ops[k], sizeof ops[k], "v%d", j);
			}
			if (arity == 1)
				p += sprintf(p, "  - {op: %s, inputs: [%s], outputs: [v%d]}\n", un[rand() % 3], ops[0], i);
			else
				p += sprintf(p, "  - {op: %s, inputs: [%s, %s], outputs: [v%d]}\n", bin[rand() % 2], ops[0], ops[1], i);
		}
		sprintf(p, "outputs: [{name: v%d}]\n", n - 1);
		struct graph *g = load_text("dag.yaml", text);
		char loss[16];
		snprintf(loss, sizeof loss, "v%d", n - 1);
		struct bottlenecks b = find(g, loss);
		const struct value *l = strmap_get(&g->names, loss);
		uint8_t *on = on_paths(g, l);
		uint32_t k = 0;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const struct value *v = g->nodes[i]->out[0];
			if (v == l || !on[v->id])
				continue;
			int is = !crossed(g, on, v), found = k < b.n && b.v[k] == v;
			cr_assert_eq(found, is, "graph %d, '%s': found %d, by definition %d\n%s", t, v->name, found, is, text);
			k += (uint32_t)found;
		}
		cr_assert_eq(k, b.n, "graph %d: extra bottlenecks\n%s", t, text);
		for (uint32_t i = 0; i < b.n_cand; i++)
			if (b.why[i].node) /* the witness edge exists */
				cr_assert(b.why[i].into_node ? b.why[i].value != NULL : b.why[i].node->n_out > 1);
		graph_free(g);
		free(text);
		free(on);
	}
}
