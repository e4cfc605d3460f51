/* test_graph.c - IR construction, validation, topological sort, equality, 16-bit floats. */
#include "helpers.h"
#include "io/format.h"
#include "io/yaml.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The 16-bit float conversions against NumPy's (binary16) and an arithmetic definition of
 * bfloat16 rounding (8 significant bits, ties to even; float32's subnormal range in steps of
 * 2^-133): every 16-bit pattern widened, and two million random float32 patterns plus the ranges
 * where rounding is delicate (subnormal edges, the overflow threshold) narrowed. */
Test(dtype, half_conversions_agree_with_numpy)
{
	char in[256], out[256];
	snprintf(in, sizeof in, "%s/half_in.bin", tmpdir());
	snprintf(out, sizeof out, "%s/half_out.bin", tmpdir());
	char code[2048];
	snprintf(code, sizeof code,
		 "import numpy as np\n"
		 "r = np.random.default_rng(7)\n"
		 "b = np.concatenate([r.integers(0, 2**32, 2000000, dtype=np.uint64).astype(np.uint32),\n"
		 "  np.arange(0x33000000, 0x33800000, 7, dtype=np.uint32), np.arange(0x38700000, 0x38900000, 3, dtype=np.uint32),\n"
		 "  np.arange(0x477f0000, 0x47800100, dtype=np.uint32), np.arange(0x7f7f0000, 0x7f800001, dtype=np.uint32),\n"
		 "  np.arange(0, 0x00900000, 97, dtype=np.uint32)]).astype(np.uint32)\n"
		 "b = np.concatenate([b, b | 0x80000000])\n"
		 "b.tofile('%s')\n",
		 in);
	python_ok(code, NULL, "the test values");
	size_t len;
	uint32_t *bits = (uint32_t *)slurp(in, &len);
	size_t n = len / 4;
	uint16_t *res = malloc((2 * n + 2 * 65536) * sizeof *res);
	float *wide = malloc(2 * 65536 * sizeof *wide);
	for (size_t i = 0; i < n; i++) {
		float f;
		memcpy(&f, &bits[i], sizeof f);
		res[2 * i] = f16_from_f32(f);
		res[2 * i + 1] = bf16_from_f32(f);
	}
	for (uint32_t h = 0; h < 65536; h++) {
		wide[2 * h] = f32_from_f16((uint16_t)h);
		wide[2 * h + 1] = f32_from_bf16((uint16_t)h);
	}
	FILE *f = fopen(out, "wb");
	fwrite(res, sizeof *res, 2 * n, f);
	fwrite(wide, sizeof *wide, 2 * 65536, f);
	fclose(f);
	snprintf(code, sizeof code,
		 "import numpy as np\n"
		 "b = np.fromfile('%s', dtype=np.uint32); n = len(b); f = b.view(np.float32)\n"
		 "o = np.fromfile('%s', dtype=np.uint8)\n"
		 "res = o[:4 * n].view(np.uint16).reshape(-1, 2); wide = o[4 * n:].view(np.float32).reshape(-1, 2)\n"
		 "nan = np.isnan(f)\n"
		 "with np.errstate(all='ignore'):\n"
		 "    h = f.astype(np.float16).view(np.uint16)\n"
		 "    d = f.astype(np.float64); m, e = np.frexp(d)\n"
		 "    bf = np.where(np.abs(d) < 2.0**-126, np.rint(d * 2.0**133) * 2.0**-133, np.ldexp(np.rint(m * 256), e - 8))\n"
		 "    bf = bf.astype(np.float32).view(np.uint32)\n"
		 "bad = np.flatnonzero((res[:, 0] != h) & ~nan)\n"
		 "assert len(bad) == 0, ('float16', hex(b[bad[0]]), hex(res[bad[0], 0]), hex(h[bad[0]]))\n"
		 "bad = np.flatnonzero(((res[:, 1].astype(np.uint32) << 16) != bf) & ~nan)\n"
		 "assert len(bad) == 0, ('bfloat16', hex(b[bad[0]]), hex(res[bad[0], 1]), hex(bf[bad[0]]))\n"
		 "assert np.isnan(res[nan, 0].view(np.float16)).all()\n"
		 "assert (((res[nan, 1] & 0x7f80) == 0x7f80) & ((res[nan, 1] & 0x7f) != 0)).all()\n"
		 "hh = np.arange(65536, dtype=np.uint32).astype(np.uint16); ref = hh.view(np.float16).astype(np.float32)\n"
		 "ok = np.isnan(ref)\n"
		 "assert (wide[~ok, 0].view(np.uint32) == ref[~ok].view(np.uint32)).all() and np.isnan(wide[ok, 0]).all()\n"
		 "assert (wide[:, 1].view(np.uint32) == hh.astype(np.uint32) << 16).all()\n",
		 in, out);
	python_ok(code, NULL, "the conversions against NumPy");
	free(bits);
	free(res);
	free(wide);
}

/* A 0 anywhere in a shape makes it empty, whatever the order of the other dims: [2^32, 2^32, 0]
 * "had more elements than fit in 64 bits" where [0, 2^32, 2^32] was read. */
Test(check, a_zero_dim_anywhere_makes_an_empty_shape)
{
	const char *shapes[] = {"[4294967296, 4294967296, 0]", "[0, 4294967296, 4294967296]",
				"[4294967296, 0, 4294967296]", "[4294967296, 4294967296, 2]"};
	for (int i = 0; i < 4; i++) {
		char text[512], path[512];
		snprintf(text, sizeof text,
			 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: %s}]\n"
			 "nodes: [{op: Relu, inputs: [x], outputs: [y]}]\noutputs: [{name: y}]\n",
			 shapes[i]);
		write_text(path, sizeof path, "zero_dims.yaml", text);
		struct gd_err e = {0};
		struct graph *g = model_load(path, FMT_AUTO, &e);
		if (i < 3)
			cr_expect(g, "%s: %s", shapes[i], e.msg);
		else
			cr_expect(!g && strstr(e.msg, "more elements than fit in 64 bits"), "%s: %s", shapes[i], e.msg);
		graph_free(g);
	}
}

/* #50 validate: the attribute registry (ops/attrs.def) and the checks that read it. */

/* op_attr_rows bisects on the op: every row must be found from its own op and name, which holds
 * only while the rows keep ops.def's order; a row listing allowed values is a string's. */
Test(check, every_attribute_row_is_found)
{
	cr_assert_gt(op_attrs_count, 300);
	for (size_t i = 0; i < op_attrs_count; i++) {
		const struct op_attr *r = &op_attrs[i];
		int k;
		const struct op_attr *found = op_attr_rows(r->op, r->name, &k);
		cr_expect(found && found <= r && r < found + k, "row %zu: %s '%s' not found", i,
			  op_table[r->op].op_type, r->name);
		cr_expect(i == 0 || op_attrs[i - 1].op <= r->op, "row %zu: %s out of ops.def's order", i,
			  op_table[r->op].op_type);
		cr_expect(!r->values || r->type == ATTR_STRING || r->type == ATTR_STRINGS, "row %zu", i);
	}
	int k;
	cr_expect_null(op_attr_rows(OP_RELU, "alpha", &k));
	cr_expect_eq(k, 0);
	const struct op_attr *cast = op_attr_rows(OP_CAST, "to", &k);
	cr_assert(cast);
	cr_expect_eq(k, 2, "Cast's 'to' was a string in opset 1 and an int since");
}

/* A node with many attributes is checked for a repeated name by hash, a few by pairs: both find
 * the one name given twice, and neither refuses distinct names. */
Test(check, an_attribute_given_twice_is_refused)
{
	for (int many = 0; many < 2; many++)
		for (int twice = 0; twice < 2; twice++) {
			struct graph *g = graph_new("t");
			struct gd_err e = {0};
			input(g, "x");
			struct node *n = mk(g, "op", "Mystery", "x", "y");
			n->n_attr = many ? 40 : 3;
			n->attr = arena_array(g->arena, n->n_attr, sizeof *n->attr);
			for (uint32_t i = 0; i < n->n_attr; i++) {
				char name[16];
				snprintf(name, sizeof name, "a%u", twice && i == n->n_attr - 1 ? 1 : i);
				n->attr[i] = (struct attr){.name = arena_strdup(g->arena, name), .type = ATTR_INT};
			}
			int rc = graph_check(g, &e);
			if (twice) {
				cr_expect_eq(rc, GD_EINPUT, "%d attributes", n->n_attr);
				cr_expect_str_eq(e.msg, "node 'op' (Mystery): attribute 'a1' is given twice");
			} else {
				cr_expect_eq(rc, 0, "%s", e.msg);
			}
			graph_free(g);
		}
}

/* The YAML model of one node (`node_fmt` with `arg`) reading x (dtype, 2 elements) and writing y,
 * read, then checked: refused with a message containing `want`, or (want NULL) accepted. The
 * graph, for the caller to look into and free. */
static struct graph *read_and_check(const char *dtype, const char *node_fmt, const char *arg, const char *want,
				    size_t i)
{
	char node[512], text[1024];
	snprintf(node, sizeof node, node_fmt, arg);
	snprintf(text, sizeof text,
		 "graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: %s, shape: [2]}]\nnodes:\n  - %s\n"
		 "outputs: [{name: y}]\n",
		 dtype, node);
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "check.yaml", ".", &e);
	cr_assert(g, "case %zu: %s", i, e.msg);
	int rc = graph_check(g, &e);
	if (want)
		cr_expect(rc == GD_EINPUT && strstr(e.msg, want), "case %zu: %s", i, e.msg);
	else
		cr_expect_eq(rc, 0, "case %zu: %s", i, e.msg);
	return g;
}

/* A mode outside its op's allowed values is refused when the model is checked, before any kernel
 * reads it (BitShift's 'UP' and Gelu's 'erf' were refused by the kernels, test elem/bad_inputs_are_refused
 * before #50; LSTM's 'sideways' ran forward); the allowed ones pass. */
Test(check, modes_outside_the_registry_are_refused)
{
	static const struct {
		const char *node, *want;
	} cases[] = {
		{"{name: n, op: BitShift, inputs: [x, x], outputs: [y], attrs: {direction: UP}}",
		 "node 'n' (BitShift): attribute 'direction' is 'UP', not one of LEFT/RIGHT"},
		{"{name: n, op: Pad, inputs: [x, x], outputs: [y], attrs: {mode: mirror}}",
		 "node 'n' (Pad): attribute 'mode' is 'mirror', not one of constant/reflect/edge/wrap"},
		{"{name: n, op: Conv, inputs: [x, x], outputs: [y], attrs: {auto_pad: SAME}}",
		 "node 'n' (Conv): attribute 'auto_pad' is 'SAME', not one of NOTSET/SAME_UPPER/SAME_LOWER/VALID"},
		{"{name: n, op: ScatterElements, inputs: [x, x, x], outputs: [y], attrs: {reduction: {base64: AGFkZA==}}}",
		 "node 'n' (ScatterElements): attribute 'reduction' is '?add', not one of none/add/mul/max/min"},
		{"{name: n, op: LSTM, inputs: [x, x, x], outputs: [y], attrs: {activations: [Sigmoid, Tanh, tanh]}}",
		 "node 'n' (LSTM): attribute 'activations' is 'tanh', not one of Relu/Tanh/Sigmoid/"},
		{"{name: n, op: Gelu, inputs: [x], outputs: [y], attrs: {approximate: erf}}",
		 "node 'n' (Gelu): attribute 'approximate' is 'erf', not one of none/tanh"},
		{"{name: n, op: BitShift, inputs: [x, x], outputs: [y], attrs: {direction: LEFT}}", NULL},
		{"{name: n, op: LSTM, inputs: [x, x, x], outputs: [y], attrs: {activations: [Sigmoid, Tanh, Tanh]}}", NULL},
		{"{name: n, op: Resize, inputs: [x], outputs: [y], attrs: {coordinate_transformation_mode: tf_half_pixel_for_nn}}",
		 NULL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		graph_free(read_and_check("int64", "%s", cases[i].node, cases[i].want, i));
}

/* YAML's short form types a number by its spelling: `alpha: 1` was an int, which the ONNX written
 * from it carried (onnx.checker: "Mismatched attribute type"). Where the registry types the
 * attribute float and never int it is read as a float; the explicit form keeps what it says, and
 * the checker refuses that. */
Test(check, short_form_numbers_take_the_registry_type)
{
	static const struct {
		const char *attrs;
		int type;
		const char *want;
	} cases[] = {
		{"{alpha: 1}", ATTR_FLOAT, NULL},
		{"{alpha: 0.5}", ATTR_FLOAT, NULL},
		{"{alpha: {type: int, value: 1}}", ATTR_INT, "node 'n' (LeakyRelu): attribute 'alpha' is an int, not a float"},
		{"{alpha: [1]}", ATTR_INTS, "node 'n' (LeakyRelu): attribute 'alpha' is ints, not a float"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct graph *g = read_and_check("float32", "{name: n, op: LeakyRelu, inputs: [x], outputs: [y], attrs: %s}",
						 cases[i].attrs, cases[i].want, i);
		cr_expect_eq(g->nodes[0]->attr[0].type, cases[i].type, "case %zu", i);
		graph_free(g);
	}
	/* lists too (Upsample-7's scales), and not where ONNX typed the attribute int as well (Cast's to) */
	const char *text = "graphdiet: 1\nopset: 7\ninputs: [{name: x, dtype: float32, shape: [1, 1, 2, 2]}]\nnodes:\n"
			   "  - {op: Upsample, inputs: [x], outputs: [y], attrs: {scales: [1, 1, 2, 2]}}\n"
			   "  - {op: Cast, inputs: [y], outputs: [z], attrs: {to: 1}}\noutputs: [{name: z}]\n";
	struct gd_err e = {0};
	struct graph *g = yaml_read((const uint8_t *)text, strlen(text), "short.yaml", ".", &e);
	cr_assert(g, "%s", e.msg);
	cr_expect_eq(g->nodes[0]->attr[0].type, ATTR_FLOATS);
	cr_expect_eq(g->nodes[0]->attr[0].floats[2], 2.0f);
	cr_expect_eq(g->nodes[1]->attr[0].type, ATTR_INT);
	cr_expect_eq(graph_check(g, &e), 0, "%s", e.msg);
	graph_free(g);
}

/* An attribute of a file before IR 3 has no type field: the reader types it by the value it holds,
 * and an empty list holds none. That one passes (the kernel reads it as absent); a typed one of the
 * wrong type does not. */
Test(check, an_untyped_empty_attribute_passes)
{
	for (int typed = 0; typed < 2; typed++) {
		struct graph *g = graph_new("t");
		struct gd_err e = {0};
		input(g, "x");
		struct node *n = mk(g, "p", "MaxPool", "x", "y");
		n->n_attr = 1;
		n->attr = arena_array(g->arena, 1, sizeof *n->attr);
		n->attr[0] = (struct attr){.name = "pads", .type = ATTR_UNDEFINED, .has_type = typed};
		int rc = graph_check(g, &e);
		if (typed)
			cr_expect(rc == GD_EINPUT && !strcmp(e.msg, "node 'p' (MaxPool): attribute 'pads' is undefined, not ints"),
				  "%s", e.msg);
		else
			cr_expect_eq(rc, 0, "%s", e.msg);
		graph_free(g);
	}
}
