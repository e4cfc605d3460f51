/* ctrl.c - see ctrl.h. */
#include "ctrl.h"
#include "../exec/exec.h"
#include "../ir/dtype.h"
#include "../util/xalloc.h"
#include "fold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ctrl_parse(const char *s, enum ctrl_mode *m)
{
	static const char *const names[] = {"metadata", "order", "data"};
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*m = (enum ctrl_mode)i;
			return 0;
		}
	return -1;
}

/* ---- which nodes a runtime folds away: constant-only nodes ---- */

/* A value whose bytes are known before the run: an initializer no graph input overrides, or the
 * output of a constant node. */
static int value_is_const(const struct value *v, const uint8_t *cnode)
{
	while (v->outer)
		v = v->outer;
	if (v->producer)
		return cnode[v->producer->index];
	return v->init && !(v->flags & VALUE_INPUT);
}

/* cnode[i]: node i reads constants alone (none for a Constant), so onnxruntime's constant folding
 * turns it into an initializer and it never runs; a Shape of a fully static shape is folded too.
 * Random nodes and nodes with subgraphs always run. g is sorted. */
static void mark_const(const struct graph *g, int static_dims, uint8_t *cnode)
{
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		uint32_t fl = op_table[n->op].flags;
		int c = n->op != OP_UNKNOWN && !(fl & (OPF_RANDOM | OPF_SUBGRAPH));
		if (c && !(n->op == OP_SHAPE && static_dims))
			for (uint32_t k = 0; k < n->n_in && c; k++)
				c = !n->in[k] || value_is_const(n->in[k], cnode);
		cnode[i] = (uint8_t)c;
	}
}

/* Nodes that allocate nothing of note, free to run whenever their input exists, stay out of the
 * chain: views in onnxruntime (which fuses a Reshape with the one next to it) and Shape. */
static int is_view(const struct node *n)
{
	return n->op == OP_SHAPE || n->op == OP_RESHAPE || n->op == OP_FLATTEN || n->op == OP_SQUEEZE || n->op == OP_UNSQUEEZE ||
	       n->op == OP_IDENTITY;
}

static int dims_static(const struct graph *g)
{
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		const struct ttype *t = &g->inputs[i]->type;
		for (uint32_t d = 0; d < t->ndim; d++)
			if (t->dims[d].kind != DIM_VALUE)
				return 0;
	}
	return 1;
}

/* ---- a value-preserving data edge ---- */

struct edges {
	struct graph *g;
	const struct exec *x; /* a shapes-only run of g: dtypes and shapes of its values */
	const uint8_t *cnode; /* mark_const's */
	struct value *flat, *zero, *one; /* shared int64 [-1], [0], [1] */
	int static_dims;
};

static struct value *int_const(struct graph *g, const char *name, const int64_t *v, int64_t n, struct gd_err *e)
{
	struct node *c = graph_add_op(g, name, "Constant", NULL, 0, name, e);
	struct rtensor t = {.dtype = DT_INT64, .ndim = 1, .dims = {n}, .numel = n, .data = (void *)v,
			    .nbytes = (size_t)n * sizeof *v};
	return c && !node_make_constant(g, &t, c, e) ? c->out[0] : NULL;
}

static struct value *op1(struct graph *g, const char *base, const char *op, struct value *a, struct value *b,
			 struct gd_err *e)
{
	struct value *in[2] = {a, b};
	struct node *n = graph_add_op(g, base, op, in, b ? 2 : 1, base, e);
	return n ? n->out[0] : NULL;
}

static struct value *cast_to(struct graph *g, const char *base, struct value *v, int dtype, struct gd_err *e)
{
	struct node *n = graph_add_op(g, base, "Cast", &v, 1, base, e);
	return n && !node_add_int(g, n, "to", dtype) ? n->out[0] : NULL;
}

/* An int64 [0] that cannot exist before y does and is 0 whatever y holds, NaN included:
 *   s = Slice(Reshape(y, [-1]), [0], [1])     one element of y (bool y: Cast to INT32)
 *   Cast(Greater(s, s), INT64)                nothing is greater than itself
 * Shape inference knows Greater(s, s) without s (op_self_compare), so the Reshape it shapes has a
 * known shape there; a runtime has to wait for y. */
static struct value *zero_after(struct edges *c, const char *base, struct value *y, struct gd_err *e)
{
	struct graph *g = c->g;
	struct value *s = op1(g, base, "Reshape", y, c->flat, e);
	if (s) {
		struct value *in[3] = {s, c->zero, c->one};
		struct node *sl = graph_add_op(g, base, "Slice", in, 3, base, e);
		s = sl ? sl->out[0] : NULL;
	}
	if (s && exec_value(c->x, y)->dtype == DT_BOOL)
		s = cast_to(g, base, s, DT_INT32, e);
	struct value *b = s ? op1(g, base, "Greater", s, s, e) : NULL;
	return b ? cast_to(g, base, b, DT_INT64, e) : NULL;
}

/* The input of n that the edge passes through a Reshape (a view in onnxruntime, a copy in
 * graphdiet's executor): the smallest floating input that takes a gradient, else the smallest
 * floating one, else the smallest that takes a gradient, else the smallest one that is not a
 * constant (labels): constant shapes, axes and indices are left alone, as runtimes rewrite ops
 * assuming those are constants. -1 for none. */
static int smallest_input(const struct edges *c, const struct node *n)
{
	for (int pref = 0; pref < 4; pref++) {
		int best = -1;
		int64_t least = 0;
		for (uint32_t k = 0; k < n->n_in; k++) {
			const struct rtensor *t = n->in[k] && !n->in[k]->outer ? exec_value(c->x, n->in[k]) : NULL;
			if (!t || !t->known)
				continue;
			int fl = dtype_is_float(t->dtype), diff = op_input_differentiable(n, k);
			if ((pref == 0 && fl && diff) || (pref == 1 && fl) || (pref == 2 && diff) ||
			    (pref == 3 && !value_is_const(n->in[k], c->cnode)))
				if (best < 0 || t->numel < least)
					best = (int)k, least = t->numel;
		}
		if (best >= 0)
			return best;
	}
	return -1;
}

/* An output of d with an element to read and a dtype Greater or Cast takes; -1 for none. */
static int readable_output(const struct edges *c, const struct node *d)
{
	for (uint32_t k = 0; k < d->n_out; k++) {
		const struct rtensor *t = d->out[k] ? exec_value(c->x, d->out[k]) : NULL;
		if (t && t->known && t->numel > 0 && t->dtype != DT_STRING)
			return (int)k;
	}
	return -1;
}

/* n waits for d: n's smallest input x becomes Reshape(x, Add(Shape(x), zero_after(d's output))),
 * x bit for bit. 1 when n has no input or d no output to carry it (the edge stays metadata). */
static int wait_for(struct edges *c, struct node *n, const struct node *d, struct gd_err *e)
{
	struct graph *g = c->g;
	int k = smallest_input(c, n), o = readable_output(c, d);
	if (k < 0 || o < 0)
		return 1;
	char base[600];
	snprintf(base, sizeof base, "%s_after", node_base_name(n));
	struct value *xv = n->in[k], *z = zero_after(c, base, d->out[o], e), *shape;
	const struct rtensor *xt = exec_value(c->x, xv);
	if (c->static_dims)
		shape = int_const(g, base, xt->dims, xt->ndim, e);
	else
		shape = op1(g, base, "Shape", xv, NULL, e);
	struct value *sum = z && shape ? op1(g, base, "Add", shape, z, e) : NULL;
	struct value *w = sum ? op1(g, base, "Reshape", xv, sum, e) : NULL;
	if (!w)
		return e->code ? e->code : err_oom(e);
	n->in[k] = w;
	return 0;
}

/* ---- adding edges ---- */

struct wait {
	struct node *n;
	const struct node *d;
};

/* Makes each waits[i] (one per node, in node order) a data edge; status[i] gets wait_for's result
 * (1: stays metadata). The new nodes run right before the node that waits, and carry its tags. */
static int add_waits(struct edges *c, const struct wait *w, size_t n_w, uint8_t *status, uint32_t *n_data,
		     struct gd_err *e)
{
	struct graph *g = c->g;
	uint32_t n0 = g->n_nodes;
	uint32_t *from = xmalloc(sizeof *from * (n_w + 1)); /* w[i]'s new nodes: [from[i], from[i + 1]) */
	int rc = from ? 0 : err_oom(e);
	for (size_t i = 0; i < n_w && !rc; i++) {
		from[i] = g->n_nodes;
		rc = wait_for(c, w[i].n, w[i].d, e);
		status[i] = rc == 1;
		*n_data += !rc;
		rc = rc == 1 ? 0 : rc;
		for (uint32_t j = from[i]; j < g->n_nodes; j++)
			g->nodes[j]->tags = w[i].n->tags;
	}
	struct node **order = rc ? NULL : xmalloc(sizeof *order * ((size_t)g->n_nodes + 1));
	if (!rc && !order)
		rc = err_oom(e);
	if (!rc) {
		from[n_w] = g->n_nodes;
		uint32_t k = 0;
		size_t i = 0;
		for (uint32_t j = 0; j < n0; j++) {
			if (i < n_w && w[i].n == g->nodes[j]) {
				for (uint32_t t = from[i]; t < from[i + 1]; t++)
					order[k++] = g->nodes[t];
				i++;
			}
			order[k++] = g->nodes[j];
		}
		memcpy(g->nodes, order, sizeof *order * k);
		for (uint32_t j = 0; j < k; j++)
			g->nodes[j]->index = j;
	}
	xfree(from), xfree(order);
	return rc;
}

/* Moves the last k (<= 4) nodes, Constants, to the front. */
static void to_front(struct graph *g, uint32_t k)
{
	struct node *tmp[4];
	memcpy(tmp, g->nodes + g->n_nodes - k, k * sizeof *tmp);
	memmove(g->nodes + k, g->nodes, (g->n_nodes - k) * sizeof *g->nodes);
	memcpy(g->nodes, tmp, k * sizeof *tmp);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		g->nodes[i]->index = i;
}

/* Every node that runs waits for the running node before it, unless it reads it already: the
 * running nodes form one chain, so any runtime that honours data dependencies runs them in
 * graphdiet's order, whatever its scheduler (onnxruntime's reverse depth-first walk, which ran
 * parameter gradients last and hoisted recompute clones into the forward pass, included) and
 * whichever nodes it fuses. Nodes a runtime folds into constants, and views (Reshape and its kind,
 * which allocate nothing there, and Shape), are left out. A node that cannot wait keeps its control inputs as
 * metadata. */
int ctrl_encode(struct graph *g, enum ctrl_mode mode, uint32_t *n_data, struct gd_err *e)
{
	*n_data = 0;
	if (mode == CTRL_METADATA)
		return 0;
	if (mode == CTRL_ORDER) {
		for (uint32_t i = 0; i < g->n_nodes; i++)
			g->nodes[i]->n_ctrl = 0;
		return 0;
	}
	struct edges c = {.g = g, .static_dims = dims_static(g)};
	/* dtypes and shapes whatever the dimensions: stand-ins for unbound ones */
	struct exec_opts so = {.shapes_only = 1, .probe_unbound = 1};
	struct exec *x = exec_run(g, &so, NULL, e);
	if (!x)
		return e->code;
	c.x = x;
	static const int64_t flat = -1, zero = 0, one = 1;
	uint32_t n0 = g->n_nodes;
	uint8_t *cnode = xmalloc((size_t)n0 + 4), *status = xmalloc((size_t)n0 + 1);
	struct wait *w = xmalloc(sizeof *w * ((size_t)n0 + 1));
	int rc = cnode && status && w ? 0 : err_oom(e);
	size_t n_w = 0;
	if (!rc) {
		mark_const(g, c.static_dims, cnode);
		c.cnode = cnode;
		const struct node *prev = NULL;
		for (uint32_t i = 0; i < n0; i++) {
			struct node *n = g->nodes[i];
			int reads = 0;
			for (uint32_t k = 0; prev && k < n->n_in && !reads; k++)
				reads = n->in[k] && n->in[k]->producer == prev;
			int chained = !cnode[i] && !is_view(n);
			if (chained && prev && !reads)
				w[n_w++] = (struct wait){n, prev};
			else
				n->n_ctrl = 0; /* the order carries them now */
			if (chained)
				prev = n;
		}
	}
	if (!rc && n_w) {
		c.flat = int_const(g, "after_flat", &flat, 1, e);
		c.zero = c.flat ? int_const(g, "after_zero", &zero, 1, e) : NULL;
		c.one = c.zero ? int_const(g, "after_one", &one, 1, e) : NULL;
		if (!c.one)
			rc = e->code ? e->code : err_oom(e);
		else
			to_front(g, 3), mark_const(g, c.static_dims, cnode); /* indices moved */
	}
	if (!rc)
		rc = add_waits(&c, w, n_w, status, n_data, e);
	for (size_t i = 0; !rc && i < n_w; i++) /* where no value could carry the wait, metadata does */
		if (!status[i])
			w[i].n->n_ctrl = 0;
	xfree(cnode), xfree(status), xfree(w);
	exec_free(x);
	return rc;
}
