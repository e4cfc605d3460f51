/* test_graph.c - IR construction, validation, topological sort, equality. */
#include "helpers.h"
#include "io/format.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* Adds node `name` (op) reading `ins` and writing `outs` (comma-separated names, "" = none). */
static struct node *mk(struct graph *g, const char *name, const char *op, const char *ins, const char *outs)
{
	struct gd_err e = {0};
	struct node *n = graph_add_node(g, &e);
	cr_assert(n);
	n->name = arena_strdup(g->arena, name);
	n->op_type = arena_strdup(g->arena, op);
	n->op = op_lookup(NULL, op);
	const char *lists[2] = {ins, outs};
	for (int k = 0; k < 2; k++) {
		uint32_t cnt = 0;
		char *copy = arena_strdup(g->arena, lists[k]), *save, *tok;
		struct value **vs = arena_array(g->arena, 16, sizeof *vs);
		if (k)
			n->out = vs;
		for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save), cnt++)
			if (k)
				n->n_out = cnt + 1;
			else
				vs[cnt] = graph_value(g, tok, &e);
		if (k) {
			copy = arena_strdup(g->arena, lists[k]);
			cnt = 0;
			for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save), cnt++)
				cr_assert_eq(graph_set_output(g, n, cnt, tok, &e), 0, "%s", e.msg);
		} else {
			n->in = vs;
			n->n_in = cnt;
		}
	}
	return n;
}

static void input(struct graph *g, const char *name)
{
	struct gd_err e = {0};
	cr_assert_eq(graph_add_input(g, graph_value(g, name, &e), &e), 0);
}

static void output(struct graph *g, const char *name)
{
	struct gd_err e = {0};
	cr_assert_eq(graph_add_output(g, graph_value(g, name, &e), &e), 0);
}

static void order_is(struct graph *g, const char *expect)
{
	char got[512] = "";
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		strcat(got, g->nodes[i]->name);
		if (i + 1 < g->n_nodes)
			strcat(got, " ");
		cr_assert_eq(g->nodes[i]->index, i);
	}
	cr_assert_str_eq(got, expect);
}

Test(topo, sorted_input_is_unchanged)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	input(g, "x");
	mk(g, "a", "Relu", "x", "a");
	mk(g, "b", "Neg", "x", "b");
	mk(g, "c", "Add", "a,b", "c");
	mk(g, "d", "Tanh", "x", "d");
	output(g, "c");
	output(g, "d");
	cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s", e.msg);
	order_is(g, "a b c d");
	graph_free(g);
}

Test(topo, producers_move_up_only_as_far_as_needed)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	input(g, "x");
	mk(g, "c", "Add", "a,b", "c");
	mk(g, "d", "Tanh", "x", "d");
	mk(g, "b", "Neg", "x", "b");
	mk(g, "a", "Relu", "x", "a");
	output(g, "c");
	cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s", e.msg);
	/* c needs a then b (input order); d keeps its place after c */
	order_is(g, "a b c d");
	graph_free(g);
}

Test(topo, control_inputs_order_nodes)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	input(g, "x");
	struct node *late = mk(g, "late", "Relu", "x", "y");
	struct node *early = mk(g, "early", "Neg", "x", "z");
	late->n_ctrl = 1;
	late->ctrl = arena_array(g->arena, 1, sizeof *late->ctrl);
	late->ctrl[0] = early;
	cr_assert_eq(graph_check(g, &e), 0);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s", e.msg);
	order_is(g, "early late");
	graph_free(g);
}

Test(topo, cycle_lists_exactly_its_nodes)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	input(g, "x");
	mk(g, "entry", "Relu", "x", "p");
	mk(g, "a", "Add", "p,c", "a");
	mk(g, "b", "Relu", "a", "b");
	mk(g, "c", "Relu", "b", "c");
	mk(g, "out", "Relu", "c", "y");
	cr_assert_eq(graph_check(g, &e), 0);
	cr_assert_eq(graph_toposort(g, &e), GD_EINPUT);
	/* in data-flow order, without the nodes before (entry) and after (out) the cycle */
	cr_assert_str_eq(e.msg, "cycle through node 'a' (Add) -> node 'b' (Relu) -> node 'c' (Relu) -> node 'a' (Add)");
	graph_free(g);
}

Test(topo, self_loop)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	mk(g, "loop", "Add", "y,y", "y");
	cr_assert_eq(graph_check(g, &e), 0);
	cr_assert_eq(graph_toposort(g, &e), GD_EINPUT);
	cr_assert_str_eq(e.msg, "cycle through node 'loop' (Add) -> node 'loop' (Add)");
	graph_free(g);
}

Test(topo, deep_reversed_chain_does_not_recurse)
{
	/* 300,000 nodes listed last-first: a recursive sort would overflow the C stack. */
	enum { N = 300000 };
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	char in[32], out[32], name[32];
	input(g, "v0");
	for (int i = N; i >= 1; i--) {
		snprintf(in, sizeof in, "v%d", i - 1);
		snprintf(out, sizeof out, "v%d", i);
		snprintf(name, sizeof name, "n%d", i);
		mk(g, name, "Tanh", in, out);
	}
	cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_toposort(g, &e), 0, "%s", e.msg);
	for (uint32_t i = 0; i < N; i++) {
		snprintf(name, sizeof name, "n%u", i + 1);
		cr_assert_str_eq(g->nodes[i]->name, name);
	}
	graph_free(g);
}

Test(check, duplicate_producer_and_input_shadowing)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	input(g, "x");
	mk(g, "a", "Relu", "x", "y");
	struct node *n = graph_add_node(g, &e);
	n->name = "b";
	n->op_type = "Neg";
	n->n_out = 1;
	n->out = arena_array(g->arena, 1, sizeof *n->out);
	cr_assert_eq(graph_set_output(g, n, 0, "y", &e), GD_EINPUT);
	cr_assert_str_eq(e.msg, "node 'b' (Neg): output 'y' is also produced by node 'a' (Relu)");
	struct gd_err e2 = {0};
	cr_assert_eq(graph_set_output(g, n, 0, "x", &e2), GD_EINPUT);
	cr_assert_str_eq(e2.msg, "node 'b' (Neg): output 'x' is also a graph input");
	graph_free(g);
}

Test(check, dangling_unproduced_and_arity)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	input(g, "x");
	mk(g, "a", "Relu", "x,ghost", "y");
	cr_assert_eq(graph_check(g, &e), GD_EINPUT);
	cr_assert_str_eq(e.msg, "node 'a' (Relu): input 'ghost' is not produced by any node, graph input or initializer");
	graph_free(g);

	g = graph_new("t");
	struct gd_err e2 = {0};
	input(g, "x");
	mk(g, "a", "Relu", "x,x", "y");
	cr_assert_eq(graph_check(g, &e2), GD_EINPUT);
	cr_assert_str_eq(e2.msg, "node 'a' (Relu): takes 1 input, got 2");
	graph_free(g);

	g = graph_new("t");
	struct gd_err e3 = {0};
	input(g, "x");
	mk(g, "a", "Relu", "x", "y");
	output(g, "z");
	cr_assert_eq(graph_check(g, &e3), GD_EINPUT);
	cr_assert_str_eq(e3.msg, "graph output 'z' is not produced by any node, input or initializer");
	graph_free(g);
}

Test(check, unknown_ops_are_opaque)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	input(g, "x");
	struct node *n = mk(g, "mystery", "FancyOp", "x,x,x", "y,z");
	cr_assert_eq(n->op, OP_UNKNOWN);
	cr_assert_eq(graph_check(g, &e), 0, "%s", e.msg);
	graph_free(g);
}

Test(check, element_count_overflow)
{
	struct graph *g = graph_new("t");
	struct gd_err e = {0};
	struct value *v = graph_value(g, "x", &e);
	graph_add_input(g, v, &e);
	v->type.has_type = v->type.has_tensor = v->type.has_dtype = v->type.has_shape = true;
	v->type.dtype = DT_DOUBLE;
	v->type.ndim = 2;
	v->type.dims = arena_array(g->arena, 2, sizeof *v->type.dims);
	/* 2^31 * 2^31 elements fit in int64, but not once multiplied by 8 bytes */
	v->type.dims[0] = (struct dim){DIM_VALUE, 1ll << 31, NULL, NULL, {0, NULL}};
	v->type.dims[1] = (struct dim){DIM_VALUE, 1ll << 31, NULL, NULL, {0, NULL}};
	cr_assert_eq(graph_check(g, &e), GD_EINPUT);
	cr_assert(strstr(e.msg, "more elements than fit in 64 bits"), "%s", e.msg);
	v->type.dims[1].kind = DIM_PARAM;
	v->type.dims[1].param = "batch";
	struct gd_err e2 = {0};
	cr_assert_eq(graph_check(g, &e2), 0, "symbolic dims are not sized: %s", e2.msg);
	graph_free(g);
}

Test(check, subgraph_outer_reference_orders_the_parent)
{
	struct graph *g = load_ok(TESTDATA "/yaml/if_branch.yaml");
	/* 'prep' is listed after the If, but the If's branches read its output */
	cr_assert_str_eq(g->nodes[0]->name, "prep");
	cr_assert_str_eq(g->nodes[1]->name, "branch");
	struct graph *then = g->nodes[1]->attr[0].g;
	struct value *x = strmap_get(&then->names, "x");
	cr_assert(x && x->outer, "the branch's x refers to the outer x");
	cr_assert_eq(x->outer->producer, g->nodes[0]);
	graph_free(g);
}

Test(graph, equal_detects_differences)
{
	char why[256];
	struct graph *a = load_ok(TESTDATA "/mlp.onnx"), *b = load_ok(TESTDATA "/mlp.onnx");
	cr_assert(graph_equal(a, b, why, sizeof why), "%s", why);
	/* flip one initializer byte of b: bytes live in the mapped file, so swap in a copy */
	struct tensor *t = b->inits[0]->init;
	uint8_t *copy = arena_memdup(b->arena, t->bytes.p, t->bytes.n);
	copy[t->bytes.n - 1] ^= 1;
	t->bytes.p = copy;
	cr_assert_not(graph_equal(a, b, why, sizeof why));
	cr_assert(strstr(why, "data bytes differ"), "%s", why);
	graph_free(b);
	b = load_ok(TESTDATA "/mlp.onnx");
	b->nodes[0]->attr[0].f = 2.0f;
	cr_assert_not(graph_equal(a, b, why, sizeof why));
	cr_assert(strstr(why, "attribute 'alpha' value differs"), "%s", why);
	graph_free(a);
	graph_free(b);
}
