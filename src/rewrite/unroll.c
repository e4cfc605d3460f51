/* unroll.c - If with a constant condition and Loop with a constant trip count, inlined into the
 * main graph before autodiff; see unroll.h.
 *
 * A clone of a body node reads, for each body value, the enclosing value it refers to (value.outer)
 * or the clone of its producer in this iteration (map, by body value id). The clones share their
 * originals' attributes (read-only), and are named <node>/<iteration>/<body node>, their outputs
 * likewise, made fresh where taken. The control node's outputs are detached from it and given new
 * producers (an Identity, a Concat), then the node, read by no one, is dropped. */
#include "unroll.h"
#include "fold.h"
#include "../io/tensor.h"
#include "../util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* v's value when it is a scalar constant (a Constant node's tensor, or an initializer that is
 * neither a parameter nor a graph input): 1 with *out set, else 0. */
static int const_scalar(struct graph *g, const struct value *v, double *out)
{
	const struct tensor *t = NULL;
	if (v && v->producer && v->producer->op == OP_CONSTANT) {
		const struct attr *a = node_attr(v->producer, "value");
		t = a && a->type == ATTR_TENSOR ? a->t : NULL;
	} else if (v && v->init && !(v->flags & (VALUE_PARAM | VALUE_INPUT))) { /* (an input may be given) */
		t = v->init;
	}
	struct gd_err e = {0};
	struct bytes b;
	/* a number of at most 8 bytes (not a string, not complex) */
	if (!t || tensor_numel(t) != 1 || t->dtype == DT_STRING || dtype_size(t->dtype) > sizeof(uint64_t) ||
	    tensor_bytes(g, t, &b, &e) || b.n != dtype_size(t->dtype))
		return 0;
	int64_t dims[1] = {1};
	uint64_t bits = 0;
	memcpy(&bits, b.p, b.n);
	struct rtensor r = {.dtype = t->dtype, .ndim = 1, .numel = 1, .data = &bits, .nbytes = b.n};
	r.dims[0] = dims[0];
	*out = rt_get(&r, 0);
	return 1;
}

/* The body's condition output is true at every iteration: its cond input or a true constant,
 * through Identity and Cast. */
static int always_true(struct graph *g, const struct graph *body, const struct value *v)
{
	double c;
	for (int depth = 0; v && depth < 64; depth++) {
		if (body->n_inputs > 1 && v == body->inputs[1])
			return 1;
		if (v->outer) /* a value of the main graph (PyTorch's exports read a Cast of a true Constant) */
			v = v->outer;
		if (!v->producer)
			return 0;
		if (v->producer->op == OP_CONSTANT)
			return const_scalar(g, v, &c) && c != 0;
		if (v->producer->op != OP_IDENTITY && v->producer->op != OP_CAST)
			return 0;
		v = v->producer->in[0];
	}
	return 0;
}

/* A body the pass can inline: no initializers, no subgraphs of its own. */
static int plain_body(const struct graph *b)
{
	if (!b || b->n_inits)
		return 0;
	for (uint32_t i = 0; i < b->n_nodes; i++)
		for (uint32_t k = 0; k < b->nodes[i]->n_attr; k++)
			if (b->nodes[i]->attr[k].type == ATTR_GRAPH || b->nodes[i]->attr[k].type == ATTR_GRAPHS)
				return 0;
	return 1;
}

static struct value *mapped(struct value **map, const struct value *v)
{
	return !v ? NULL : v->outer ? v->outer : map[v->id];
}

/* Clones body's nodes into g for one pass, reading through map, which then holds their outputs. */
static int clone_body(struct graph *g, const struct node *at, const struct graph *body, const char *prefix,
		      struct value **map, struct gd_err *e)
{
	char name[512];
	for (uint32_t i = 0; i < body->n_nodes; i++) {
		const struct node *bn = body->nodes[i];
		struct node *c = graph_add_node(g, e);
		if (!c)
			return e->code;
		snprintf(name, sizeof name, "%s/%s", prefix, node_base_name(bn));
		c->name = graph_fresh_name(g, name, e);
		c->op_type = bn->op_type;
		c->domain = bn->domain;
		c->op = bn->op;
		c->n_in = bn->n_in;
		c->n_out = bn->n_out;
		c->n_attr = bn->n_attr;
		c->attr = bn->attr;
		c->tags = at->tags;
		c->in = arena_array(g->arena, bn->n_in + bn->n_out + 1, sizeof *c->in);
		if (!c->name || !c->in)
			return err_oom(e);
		c->out = c->in + bn->n_in;
		for (uint32_t k = 0; k < bn->n_in; k++) {
			c->in[k] = mapped(map, bn->in[k]);
			if (bn->in[k] && !c->in[k])
				return err_set(e, GD_EINTERNAL, "unrolling: '%s' has no value", bn->in[k]->name);
		}
		for (uint32_t k = 0; k < bn->n_out; k++) {
			if (!bn->out[k])
				continue;
			snprintf(name, sizeof name, "%s/%s", prefix, bn->out[k]->name);
			struct value *v = graph_new_value(g, name, e);
			if (!v || graph_set_output_value(c, k, v, e))
				return e->code ? e->code : err_oom(e);
			v->type = bn->out[k]->type;
			map[bn->out[k]->id] = v;
		}
	}
	return 0;
}

/* unroll_if and unroll_loop: 1 when n was inlined, 0 when it stays, -1 with e set on failure. */

/* Gives `out`, an output of the control node at (detached from it), the producer op(ins) made
 * here; for Concat, axis 0. */
static int produce(struct graph *g, struct node *at, uint32_t slot, const char *op, struct value *const *ins,
		   uint32_t n_in, struct gd_err *e)
{
	struct value *out = at->out[slot];
	if (!out)
		return 0;
	struct node *n = graph_add_op(g, out->name, op, ins, n_in, out->name, e);
	if (!n || (!strcmp(op, "Concat") && node_add_int(g, n, "axis", 0)))
		return e->code ? e->code : err_oom(e);
	n->out[0]->producer = NULL; /* the fresh value graph_add_op made is left unread */
	out->producer = NULL;
	at->out[slot] = NULL;
	n->tags = at->tags;
	return graph_set_output_value(n, 0, out, e);
}

static int unroll_if(struct graph *g, struct node *n, struct gd_err *e)
{
	double c;
	if (!n->n_in || !const_scalar(g, n->in[0], &c))
		return 0;
	const struct attr *a = node_attr(n, c != 0 ? "then_branch" : "else_branch");
	struct graph *b = a && a->type == ATTR_GRAPH ? a->g : NULL;
	if (!plain_body(b) || b->n_inputs || b->n_outputs != n->n_out)
		return 0;
	struct value **map = xcalloc(b->n_values + 1, sizeof *map);
	if (!map)
		return err_oom(e);
	int rc = clone_body(g, n, b, node_base_name(n), map, e);
	for (uint32_t k = 0; k < n->n_out && !rc; k++) {
		struct value *v = mapped(map, b->outputs[k]);
		rc = v ? produce(g, n, k, "Identity", &v, 1, e) : err_set(e, GD_EINTERNAL, "unrolling: a branch output");
	}
	xfree(map);
	return rc ? -1 : 1;
}

static int unroll_loop(struct graph *g, struct node *n, struct gd_err *e)
{
	const struct attr *a = node_attr(n, "body");
	struct graph *b = a && a->type == ATTR_GRAPH ? a->g : NULL;
	double m, c = 1;
	if (!plain_body(b) || n->n_in < 2 || !n->in[0] || !const_scalar(g, n->in[0], &m) || m < 1 ||
	    m > UNROLL_MAX_TRIPS || (n->in[1] && (!const_scalar(g, n->in[1], &c) || c == 0)))
		return 0;
	uint32_t N = n->n_in - 2;
	if (b->n_inputs != N + 2 || b->n_outputs < N + 1 || n->n_out != b->n_outputs - 1 || !always_true(g, b, b->outputs[0]))
		return 0;
	uint32_t K = b->n_outputs - 1 - N;
	int64_t M = (int64_t)m;
	struct value **map = xcalloc(b->n_values + 1, sizeof *map), **cur = xcalloc(N + 1, sizeof *cur);
	struct value **scans = xcalloc((size_t)(K * M) + 1, sizeof *scans);
	int rc = !map || !cur || !scans ? err_oom(e) : 0;
	for (uint32_t k = 0; k < N && !rc; k++)
		cur[k] = n->in[2 + k];
	char prefix[400];
	for (int64_t i = 0; i < M && !rc; i++) {
		snprintf(prefix, sizeof prefix, "%s/%" PRId64, node_base_name(n), i);
		struct node *it = graph_add_scalar(g, prefix, DT_INT64, (double)i, e),
			    *ct = it ? graph_add_scalar(g, prefix, DT_BOOL, 1, e) : NULL;
		if (!ct) {
			rc = e->code ? e->code : err_oom(e);
			break;
		}
		it->tags = ct->tags = n->tags;
		map[b->inputs[0]->id] = it->out[0];
		map[b->inputs[1]->id] = ct->out[0];
		for (uint32_t k = 0; k < N; k++)
			map[b->inputs[2 + k]->id] = cur[k];
		if ((rc = clone_body(g, n, b, prefix, map, e)))
			break;
		for (uint32_t k = 0; k < N && !rc; k++)
			if (!(cur[k] = mapped(map, b->outputs[1 + k])))
				rc = err_set(e, GD_EINTERNAL, "unrolling: a loop-carried output");
		for (uint32_t j = 0; j < K && !rc; j++) {
			struct value *s = mapped(map, b->outputs[1 + N + j]);
			int64_t zero = 0;
			struct rtensor axes = {.dtype = DT_INT64, .ndim = 1, .numel = 1, .data = &zero, .nbytes = 8};
			axes.dims[0] = 1;
			struct node *ax = s ? graph_add_op(g, prefix, "Constant", NULL, 0, prefix, e) : NULL;
			struct value *ins[2] = {s, ax ? ax->out[0] : NULL};
			struct node *u = ax && !node_make_constant(g, &axes, ax, e) ? graph_add_op(g, prefix, "Unsqueeze", ins, 2, prefix, e) : NULL;
			if (!u) {
				rc = e->code ? e->code : err_set(e, GD_EINTERNAL, "unrolling: a scan output");
				break;
			}
			ax->tags = u->tags = n->tags;
			scans[j * M + i] = u->out[0];
		}
	}
	for (uint32_t k = 0; k < N && !rc; k++)
		rc = produce(g, n, k, "Identity", &cur[k], 1, e);
	for (uint32_t j = 0; j < K && !rc; j++)
		rc = produce(g, n, N + j, "Concat", scans + j * M, (uint32_t)M, e);
	xfree(map);
	xfree(cur);
	xfree(scans);
	return rc ? -1 : 1;
}

int graph_unroll_control(struct graph *g, size_t *count, struct gd_err *e)
{
	*count = 0;
	int64_t opset = 0; /* Unsqueeze takes its axes as an input from opset 13, as training needs */
	for (size_t i = 0; g->model && i < g->model->n_opsets; i++)
		if (op_domain_is_default(g->model->opsets[i].domain))
			opset = g->model->opsets[i].version;
	if (g->parent || opset < 13)
		return 0;
	struct node **done = NULL;
	size_t n_done = 0;
	uint32_t n0 = g->n_nodes;
	int rc = 0;
	for (uint32_t i = 0; i < n0 && !rc; i++) {
		struct node *n = g->nodes[i];
		int r = n->op == OP_IF ? unroll_if(g, n, e) : n->op == OP_LOOP ? unroll_loop(g, n, e) : 0;
		if (r < 0) {
			rc = e->code ? e->code : err_oom(e);
			break;
		}
		if (r > 0) {
			struct node **d = xrealloc(done, (n_done + 1) * sizeof *d);
			if (!d) {
				rc = err_oom(e);
				break;
			}
			done = d;
			done[n_done++] = n;
		}
	}
	if (!rc && n_done && !(rc = graph_toposort(g, e)))
		rc = graph_drop_unread(g, done, (uint32_t)n_done, e);
	xfree(done);
	*count = n_done;
	return rc;
}
