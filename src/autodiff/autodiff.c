/* autodiff.c - the reverse-mode engine; see ad.h.
 *
 * 1. Shapes of every forward value come from a shapes-only run of the executor, with symbolic
 *    dimensions given distinct stand-in values (so broadcasting stays visible).
 * 2. A value wants a gradient when it is floating-point, depends on a trainable parameter and the
 *    loss depends on it: one forward sweep and one backward sweep over the sorted nodes, O(N+E).
 * 3. The loss's gradient is a constant 1. Nodes are visited in reverse order; each node whose
 *    outputs received a gradient runs its op's rule. A value's contributions are summed (one Sum
 *    node) when it is first read, which is after all its consumers were visited.
 * 4. Each parameter's gradient becomes the graph output <param>_grad.
 * New nodes are appended in the order they are made, which is topological, and tagged BACKWARD. */
#include "ad.h"
#include "../rewrite/exporter.h"
#include "../rewrite/upgrade.h"
#include "../util/join.h"
#include "../util/progress.h"
#include "../util/xalloc.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A value's gradient contributions: most values have one, kept in place; more go to `many`. */
struct contrib {
	struct value *one;
	struct value **many; /* all n of them, once there are two */
	struct value *sum;   /* their running sum, once there are two */
	uint32_t n, cap;
};

struct ad {
	struct graph *g;
	struct exec *shapes;
	struct gd_err *e;
	uint32_t n_fwd_values, n_fwd_nodes;
	uint8_t *wants;           /* by value id (forward values) */
	uint8_t *reach;           /* by value id: REACH_ANY when the loss is computed from it, and
				   * REACH_DIFF when through inputs that take a gradient (mark_wants) */
	struct contrib *contrib;  /* by value id (forward values) */
	struct value **grad;      /* summed gradient, by value id */
	struct value **shape_of;  /* Shape(x) of a symbolic forward value, by value id (ad_shape_of) */
	uint32_t n_hoisted;       /* how many: they move into the forward pass (hoist_shapes) */
	const struct node *cur;   /* the forward node whose rule runs */
	const char *sum_of;       /* naming a Sum node: the value whose contributions it adds */
	int opset;
	int fused_rnn;
	struct strmap node_names; /* the forward nodes' names, and fresh_node_name's */
	struct strmap node_next;  /* for fresh_node_name */
	struct scalar {
		int dtype;
		double v;
		struct value *c;
	} scalars[16];            /* scalar constants, made once and shared by the rules */
	uint32_t n_scalars;
	/* naming new values: the k-th made for one (cur, sum_of) is graph_new_value_nth's */
	const struct node *name_cur;
	const char *name_sum;
	uint32_t name_k;
	char base[512];
	struct op_memo {
		const char *op_type; /* the rules' string literals, compared by address */
		enum op_id op;
	} ops[32];
};

int ad_fail(struct ad *a, const char *fmt, ...)
{
	char d[300];
	va_list ap;
	va_start(ap, fmt);
	int rc = err_vat(a->e, a->cur ? node_desc(a->cur, d, sizeof d) : "autodiff", fmt, ap);
	va_end(ap);
	return rc;
}

int ad_opset(const struct ad *a)
{
	return a->opset;
}

int ad_fused_rnn(const struct ad *a)
{
	return a->fused_rnn;
}

int ad_symbolic(const struct ad *a)
{
	return exec_probed(a->shapes);
}

int ad_dim_symbolic(const struct ad *a, int64_t d)
{
	return exec_dim_symbolic(a->shapes, d);
}

const struct rtensor *ad_shape(const struct ad *a, const struct value *v)
{
	return exec_value(a->shapes, v);
}

int ad_wants(const struct ad *a, const struct value *x)
{
	return x && x->id < a->n_fwd_values && a->wants[x->id];
}

struct node *ad_producer(struct value *v)
{
	return v ? v->producer : NULL;
}

const struct node *ad_made_by(const struct value *v, enum op_id op)
{
	const struct node *p = v ? v->producer : NULL;
	return p && p->op == op && node_is_forward(p) ? p : NULL;
}

int ad_known_scalar(const struct ad *a, const struct value *v, double *out)
{
	if (!v || ad_wants(a, v) || (v->flags & VALUE_INPUT))
		return 0;
	const struct rtensor *t = ad_shape(a, v);
	if (!t || t->numel != 1 || !t->data)
		return 0;
	*out = rt_get(t, 0);
	return 1;
}

/* The base of new values' names: <node>_grad, or <value>_grad_sum for a Sum; made once per
 * (cur, sum_of), not per value (autodiff names millions). */
static const char *base_name(struct ad *a)
{
	const struct node *c = a->cur;
	if (a->name_cur == c && a->name_sum == a->sum_of && a->base[0])
		return a->base;
	char *buf = a->base;
	size_t n = sizeof a->base;
	char k[21];
	if (a->sum_of)
		JOIN(buf, n, a->sum_of, "_grad_sum");
	else if (c && c->name && *c->name)
		JOIN(buf, n, c->name, "_grad");
	else if (c) /* unnamed: as node_desc numbers it, so that bases differ */
		JOIN(buf, n, c->op_type, "_", u64_dec(k, c->index), "_grad");
	else
		JOIN(buf, n, "grad");
	a->name_cur = c;
	a->name_sum = a->sum_of;
	a->name_k = 0;
	return buf;
}

/* A node name not used yet: the name of its first output, which no other new node's output has;
 * else (a forward node has that name, or there is no output) base, base_1, ... that no value has
 * yet either, recorded so that later new nodes avoid it. */
static const char *fresh_node_name(struct ad *a, const struct node *n, const char *base)
{
	if (n->n_out && n->out[0] && !strmap_get(&a->node_names, n->out[0]->name))
		return n->out[0]->name;
	/* a name some value has is recorded too, so that the next try moves on to base_k */
	for (;;) {
		const char *s = name_fresh(a->g->arena, &a->node_names, &a->node_next, base, a->e);
		if (s && strmap_put(&a->node_names, s, (void *)s)) {
			err_oom(a->e);
			return NULL;
		}
		if (!s || !strmap_get(&a->g->names, s))
			return s;
	}
}

/* Renames v, a value a new node made. Its node was named after it (fresh_node_name), so that name
 * is recorded as a node's first: else a later node whose output reuses the freed name would get the
 * same node name. */
static int ad_rename(struct ad *a, struct value *v, const char *name)
{
	struct node *n = v->producer;
	if (n && n->name == v->name && strmap_put(&a->node_names, n->name, (void *)n->name))
		return err_oom(a->e);
	return graph_rename_fresh(a->g, v, name, a->e);
}

struct node *ad_node(struct ad *a, const char *op, struct value *const *ins, int n_in, int n_out)
{
	struct graph *g = a->g;
	struct node *n = graph_add_node(g, a->e);
	if (!n)
		return NULL;
	const char *base = base_name(a);
	n->op_type = op;
	struct op_memo *m = &a->ops[((uintptr_t)op >> 3) % 32];
	if (m->op_type != op)
		*m = (struct op_memo){op, op_lookup(NULL, op)};
	n->op = m->op;
	n->tags = TAG_BACKWARD;
	n->n_in = (uint32_t)n_in;
	n->n_out = (uint32_t)n_out;
	n->in = arena_array(g->arena, (size_t)(n_in + n_out), sizeof *n->in);
	if (!n->in) {
		err_oom(a->e);
		return NULL;
	}
	n->out = n->in + n_in;
	for (int i = 0; i < n_in; i++)
		n->in[i] = ins[i];
	for (int i = 0; i < n_out; i++) {
		struct value *v = graph_new_value_nth(g, base, a->name_k++, a->e);
		if (!v || graph_set_output_value(n, (uint32_t)i, v, a->e))
			return NULL;
	}
	if (!(n->name = fresh_node_name(a, n, base)))
		return NULL;
	return n;
}

struct value *ad_op(struct ad *a, const char *op, struct value *const *ins, int n_in)
{
	struct node *n = ad_node(a, op, ins, n_in, 1);
	return n ? n->out[0] : NULL;
}

struct value *ad_op1(struct ad *a, const char *op, struct value *x)
{
	return x ? ad_op(a, op, &x, 1) : NULL;
}

struct value *ad_op2(struct ad *a, const char *op, struct value *x, struct value *y)
{
	struct value *ins[2] = {x, y};
	return x && y ? ad_op(a, op, ins, 2) : NULL;
}

static struct attr *new_attr(struct ad *a, struct node *n, const char *name, int type)
{
	if (!n)
		return NULL;
	/* grown one at a time: backward nodes have a few attributes at most */
	struct attr *grown = arena_array(a->g->arena, (size_t)n->n_attr + 1, sizeof *grown);
	if (!grown) {
		err_oom(a->e);
		return NULL;
	}
	if (n->n_attr)
		memcpy(grown, n->attr, n->n_attr * sizeof *grown);
	n->attr = grown;
	struct attr *at = &n->attr[n->n_attr++];
	memset(at, 0, sizeof *at);
	at->name = name;
	at->type = type;
	at->has_type = true;
	return at;
}

int ad_set_int(struct ad *a, struct node *n, const char *name, int64_t v)
{
	struct attr *at = new_attr(a, n, name, ATTR_INT);
	if (!at)
		return a->e->code ? a->e->code : GD_EINTERNAL;
	at->i = v;
	return 0;
}

int ad_set_float(struct ad *a, struct node *n, const char *name, float v)
{
	struct attr *at = new_attr(a, n, name, ATTR_FLOAT);
	if (!at)
		return a->e->code ? a->e->code : GD_EINTERNAL;
	at->f = v;
	return 0;
}

int ad_set_ints(struct ad *a, struct node *n, const char *name, const int64_t *v, size_t count)
{
	struct attr *at = new_attr(a, n, name, ATTR_INTS);
	if (!at)
		return a->e->code ? a->e->code : GD_EINTERNAL;
	at->n = count;
	at->ints = arena_memdup(a->g->arena, v, count * sizeof *v);
	return at->ints || !count ? 0 : err_oom(a->e);
}

int ad_set_str(struct ad *a, struct node *n, const char *name, const char *s)
{
	struct attr *at = new_attr(a, n, name, ATTR_STRING);
	const char *copy = at ? arena_strdup(a->g->arena, s) : NULL; /* s may be the caller's buffer */
	if (!copy)
		return a->e->code ? a->e->code : err_oom(a->e);
	at->s = (struct bytes){(const uint8_t *)copy, strlen(copy)};
	return 0;
}

static struct value *constant(struct ad *a, int dtype, uint32_t ndim, const int64_t *dims, const void *data, size_t nbytes)
{
	struct node *n = ad_node(a, "Constant", NULL, 0, 1);
	struct tensor *t = n ? arena_zalloc(a->g->arena, sizeof *t) : NULL;
	struct attr *at = t ? new_attr(a, n, "value", ATTR_TENSOR) : NULL;
	if (!at) {
		err_oom(a->e);
		return NULL;
	}
	t->dtype = dtype;
	t->ndim = ndim;
	t->dims = ndim ? arena_memdup(a->g->arena, dims, ndim * sizeof *dims) : NULL;
	t->src = TSRC_BYTES;
	t->field = TFIELD_RAW;
	t->bytes = (struct bytes){arena_memdup(a->g->arena, data, nbytes), nbytes};
	if ((ndim && !t->dims) || !t->bytes.p) {
		err_oom(a->e);
		return NULL;
	}
	at->t = t;
	return n->out[0];
}

struct value *ad_scalar(struct ad *a, int dtype, double v)
{
	float f = (float)v;
	dtype = dtype == DT_DOUBLE || dtype_is_half(dtype) ? dtype : DT_FLOAT;
	for (uint32_t i = 0; i < a->n_scalars; i++)
		if (a->scalars[i].dtype == dtype && !memcmp(&a->scalars[i].v, &v, sizeof v))
			return a->scalars[i].c;
	uint16_t h = dtype == DT_FLOAT16 ? f16_from_f32(f) : bf16_from_f32(f);
	struct value *c = dtype == DT_DOUBLE  ? constant(a, dtype, 0, NULL, &v, 8)
			  : dtype_is_half(dtype) ? constant(a, dtype, 0, NULL, &h, 2)
						 : constant(a, DT_FLOAT, 0, NULL, &f, 4);
	if (c && a->n_scalars < sizeof a->scalars / sizeof *a->scalars)
		a->scalars[a->n_scalars++] = (struct scalar){dtype, v, c};
	return c;
}

struct value *ad_ints(struct ad *a, const int64_t *v, size_t n)
{
	int64_t d = (int64_t)n;
	return constant(a, DT_INT64, 1, &d, v, n * sizeof *v);
}

struct value *ad_tensor(struct ad *a, int dtype, int ndim, const int64_t *dims, const double *v)
{
	int64_t numel = 1;
	for (int i = 0; i < ndim; i++)
		numel *= dims[i];
	struct rtensor t = {.dtype = dtype, .numel = numel, .nbytes = (size_t)numel * dtype_size(dtype)};
	if (!(t.data = xmalloc(t.nbytes ? t.nbytes : 1))) {
		err_oom(a->e);
		return NULL;
	}
	for (int64_t i = 0; i < numel; i++)
		rt_set(&t, i, v[i]);
	struct value *c = constant(a, dtype, ndim, dims, t.data, t.nbytes);
	xfree(t.data);
	return c;
}

/* Whether a dimension of s (those at axes, all when n_axes is 0) derives from a symbolic one. */
static int any_symbolic(const struct ad *a, const struct rtensor *s, const int *axes, int n_axes)
{
	for (int i = 0; i < (n_axes ? n_axes : s->ndim); i++)
		if (ad_dim_symbolic(a, s->dims[n_axes ? axes[i] : i]))
			return 1;
	return 0;
}

/* ConstantOfShape(shape) with zeros of dtype. */
static struct value *zeros_of(struct ad *a, struct value *shape, int dt)
{
	struct value *z = ad_op1(a, "ConstantOfShape", shape);
	struct node *n = ad_producer(z);
	struct tensor *t = n ? arena_zalloc(a->g->arena, sizeof *t) : NULL;
	struct attr *at = t ? new_attr(a, n, "value", ATTR_TENSOR) : NULL;
	int64_t one = 1;
	if (!at) {
		err_oom(a->e);
		return NULL;
	}
	t->dtype = dt;
	t->ndim = 1;
	t->dims = arena_memdup(a->g->arena, &one, sizeof one);
	t->src = TSRC_BYTES;
	t->bytes = (struct bytes){arena_zalloc(a->g->arena, dtype_size(dt)), dtype_size(dt)};
	at->t = t;
	return t->dims && t->bytes.p ? z : NULL;
}

struct value *ad_zeros_like(struct ad *a, const struct value *x)
{
	return zeros_of(a, ad_shape_of(a, x), ad_shape(a, x)->dtype);
}

struct value *ad_zeros_flat(struct ad *a, const struct value *x, int dtype)
{
	const struct rtensor *s = ad_shape(a, x);
	struct value *numel = any_symbolic(a, s, NULL, 0) ? ad_reduce(a, "ReduceProd", ad_shape_of(a, x), NULL, 0, 1)
							  : ad_ints(a, &s->numel, 1);
	return numel ? zeros_of(a, numel, dtype) : NULL;
}

struct value *ad_add_output(struct ad *a, const struct node *cn, uint32_t slot)
{
	struct node *n = (struct node *)cn; /* the training graph's forward nodes are ours to extend */
	if (slot < n->n_out && n->out[slot])
		return n->out[slot];
	uint32_t nout = slot + 1 > n->n_out ? slot + 1 : n->n_out;
	struct value **io = arena_array(a->g->arena, n->n_in + nout, sizeof *io);
	char base[512];
	snprintf(base, sizeof base, "%s_out%u", n->name && *n->name ? n->name : n->op_type, slot);
	struct value *v = io ? graph_new_value(a->g, base, a->e) : NULL;
	if (!v) {
		err_oom(a->e);
		return NULL;
	}
	memcpy(io, n->in, (n->n_in + n->n_out) * sizeof *io);
	n->in = io;
	n->out = io + n->n_in;
	n->n_out = nout;
	return graph_set_output_value(n, slot, v, a->e) ? NULL : v;
}

struct value *ad_shape_of(struct ad *a, const struct value *x)
{
	const struct rtensor *s = ad_shape(a, x);
	/* a constant when it can be: Shape(x) in the backward pass would keep x alive until then, so a
	 * symbolic one is taken in the forward pass (hoist_shapes), once, and only it is kept */
	if (!any_symbolic(a, s, NULL, 0))
		return ad_ints(a, s->dims, (size_t)s->ndim);
	int fwd = x->id < a->n_fwd_values;
	if (fwd && a->shape_of[x->id])
		return a->shape_of[x->id];
	struct value *v = ad_op1(a, "Shape", (struct value *)x);
	if (v && fwd) {
		v->producer->tags = TAG_FORWARD;
		a->shape_of[x->id] = v;
		a->n_hoisted++;
	}
	return v;
}

/* Moves each Shape node ad_shape_of made of a forward value to right after that value is made (a
 * graph input's or initializer's to the start). The sort is kept: the node reads only that value. */
static int hoist_shapes(struct ad *a)
{
	struct graph *g = a->g;
	struct node **order = xmalloc(sizeof *order * (g->n_nodes ? g->n_nodes : 1));
	if (!order)
		return err_oom(a->e);
	uint32_t k = 0;
	for (uint32_t i = 0; i < a->n_fwd_values; i++) {
		const struct value *v = g->values[i];
		if (a->shape_of[i] && !v->producer)
			order[k++] = a->shape_of[i]->producer;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		struct node *n = g->nodes[i];
		if (i >= a->n_fwd_nodes && n->op == OP_SHAPE && n->n_out == 1 && n->out[0] && n->in[0] &&
		    n->in[0]->id < a->n_fwd_values && a->shape_of[n->in[0]->id] == n->out[0])
			continue; /* placed with its input */
		order[k++] = n;
		for (uint32_t j = 0; i < a->n_fwd_nodes && j < n->n_out; j++)
			if (n->out[j] && n->out[j]->id < a->n_fwd_values && a->shape_of[n->out[j]->id])
				order[k++] = a->shape_of[n->out[j]->id]->producer;
	}
	ASSERT(k == g->n_nodes);
	for (uint32_t i = 0; i < k; i++) {
		g->nodes[i] = order[i];
		order[i]->index = i;
	}
	xfree(order);
	return 0;
}

struct value *ad_reduce(struct ad *a, const char *op, struct value *v, const int64_t *axes, int na, int keepdims)
{
	int as_input = a->opset >= (strcmp(op, "ReduceSum") ? 18 : 13);
	struct value *r;
	if (na && as_input) {
		struct value *ins[2] = {v, ad_ints(a, axes, (size_t)na)};
		r = ins[1] ? ad_op(a, op, ins, 2) : NULL;
	} else {
		r = ad_op1(a, op, v);
		if (r && na && ad_set_ints(a, ad_producer(r), "axes", axes, (size_t)na))
			return NULL;
	}
	return r && (keepdims || !ad_set_int(a, ad_producer(r), "keepdims", 0)) ? r : NULL;
}

/* The training graph's default-domain opset raised to `opset` (and its IR version to 8, opset
 * 16's), for a rule that needs ops only that opset has. Only from 13, 14 and 15 to 16: no op graphdiet
 * runs changes meaning across those versions (15 and 16 add types, Shape's optional start and end,
 * and Scatter's reduction, whose default is the old behaviour), and 14 is what torch.onnx.export
 * writes by default. */
static int raise_opset(struct ad *a, int opset)
{
	struct model *m = a->g->model;
	if (!m || opset != 16 || a->opset < 13)
		return -1;
	/* from 13 (an older model upgraded, rewrite/upgrade.h): BatchNormalization with its running
	 * statistics as outputs meant training mode before 14, training_mode = 1 after */
	for (uint32_t i = 0; a->opset == 13 && i < a->n_fwd_nodes; i++)
		if (a->g->nodes[i]->op == OP_BATCH_NORM && a->g->nodes[i]->n_out > 1)
			return -1;
	for (size_t i = 0; i < m->n_opsets; i++)
		if (op_domain_is_default(m->opsets[i].domain))
			m->opsets[i].version = opset;
	if (m->ir_version < 8) {
		m->ir_version = 8;
		m->has_ir_version = true;
	}
	a->opset = opset;
	return 0;
}

int ad_need_opset(struct ad *a, int opset, const char *what)
{
	if (a->opset >= opset || !raise_opset(a, opset))
		return 0;
	return ad_fail(a, "%s needs opset %d or later (the model has %d)", what, opset, a->opset);
}

struct value *ad_unbroadcast(struct ad *a, struct value *g, const struct value *x, const struct rtensor *gs)
{
	const struct rtensor *xs = ad_shape(a, x);
	int64_t axes[RT_MAX_DIMS];
	int na = 0, lead = gs->ndim - xs->ndim;
	for (int i = 0; i < gs->ndim; i++)
		if (i < lead || (xs->dims[i - lead] == 1 && gs->dims[i] != 1))
			axes[na++] = i;
	if (!na)
		return g;
	struct value *r = ad_reduce(a, "ReduceSum", g, axes, na, !lead);
	if (!r)
		return NULL;
	/* without leading axes keepdims leaves x's shape; with them, dropping every reduced axis leaves
	 * it too unless an inner axis (size 1 in x) was reduced as well: then reshape */
	int inner = 0;
	for (int k = 0; k < na; k++)
		inner |= axes[k] >= lead;
	return lead && inner ? ad_op2(a, "Reshape", r, ad_shape_of(a, x)) : r;
}

struct value *ad_count(struct ad *a, const struct value *x, const int *axes, int n_axes, int dtype)
{
	const struct rtensor *s = ad_shape(a, x);
	if (!any_symbolic(a, s, axes, n_axes)) {
		double c = 1;
		for (int i = 0; i < (n_axes ? n_axes : s->ndim); i++)
			c *= (double)s->dims[n_axes ? axes[i] : i];
		return ad_scalar(a, dtype, c);
	}
	struct value *sh = ad_shape_of(a, x), *sel = sh;
	if (n_axes) {
		int64_t ix[RT_MAX_DIMS];
		for (int i = 0; i < n_axes; i++)
			ix[i] = axes[i];
		sel = ad_op2(a, "Gather", sh, ad_ints(a, ix, (size_t)n_axes));
	}
	struct value *p = ad_reduce(a, "ReduceProd", sel, NULL, 0, 0);
	return p ? ad_cast(a, p, dtype) : NULL;
}

struct value *ad_cast(struct ad *a, struct value *v, int dtype)
{
	struct value *c = ad_op1(a, "Cast", v);
	return c && !ad_set_int(a, ad_producer(c), "to", dtype) ? c : NULL;
}

/* Whether g, the product of a Gemm just made (nothing reads it yet), now adds s as its C: one node
 * for the summand and the sum, and no buffer of the summand's own (x, a matrix: a weight that each
 * step of an unrolled RNN reads, whose 15 summands cost an Add each). -1 when out of memory. */
static int gemm_adds(struct ad *a, const struct value *x, struct value *s, struct value *g)
{
	struct node *n = g->producer;
	if (!n || n->op != OP_GEMM || n->n_in != 2 || n->n_out != 1 || !(n->tags & TAG_BACKWARD) ||
	    a->g->nodes[a->g->n_nodes - 1] != n || node_attr(n, "beta") || ad_shape(a, x)->ndim != 2)
		return 0;
	struct value **io = arena_array(a->g->arena, 4, sizeof *io);
	if (!io) {
		err_oom(a->e);
		return -1;
	}
	io[0] = n->in[0];
	io[1] = n->in[1];
	io[2] = s;
	io[3] = g;
	n->in = io;
	n->out = io + 3;
	n->n_in = 3;
	return 1;
}

int ad_give(struct ad *a, const struct value *x, struct value *g)
{
	if (!ad_wants(a, x))
		return 0;
	if (!g)
		return a->e->code ? a->e->code : err_set(a->e, GD_EINTERNAL, "a gradient rule gave no gradient");
	struct contrib *c = &a->contrib[x->id];
	if (!c->n) {
		c->one = g;
		c->n = 1;
		return 0;
	}
	if (c->n >= c->cap) {
		uint32_t nc = c->cap ? c->cap * 2 : 4;
		struct value **nv = xreallocarray(c->many, nc, sizeof *nv);
		if (!nv)
			return err_oom(a->e);
		nv[0] = c->one;
		c->many = nv;
		c->cap = nc;
	}
	c->many[c->n++] = g;
	/* added as they come, as PyTorch accumulates .grad: each summand is freed once added, rather
	 * than all held for one Sum at the end (a weight shared by every step of an RNN) */
	struct value *s = c->sum ? c->sum : c->one;
	int fused = gemm_adds(a, x, s, g);
	if (fused < 0)
		return -1;
	a->sum_of = x->name;
	c->sum = fused ? g : ad_op2(a, "Add", s, g);
	a->sum_of = NULL;
	return c->sum ? 0 : -1;
}

struct value *ad_dy(struct ad *a, const struct value *y)
{
	if (!y || y->id >= a->n_fwd_values)
		return NULL;
	if (a->grad[y->id])
		return a->grad[y->id];
	struct contrib *c = &a->contrib[y->id];
	if (!c->n)
		return NULL;
	struct value *g = c->n > 1 ? c->sum : c->one;
	if (c->n > 1) { /* every consumer has been visited: the sum is complete */
		char name[512];
		JOIN(name, sizeof name, y->name, "_grad");
		if (!g || ad_rename(a, g, name))
			return NULL;
	}
	a->grad[y->id] = g;
	return g;
}

struct value *autodiff_param_of(const struct graph *g, const struct value *v)
{
	size_t len = strlen(v->name);
	char base[512];
	if (len <= 5 || len - 5 >= sizeof base || strcmp(v->name + len - 5, "_grad"))
		return NULL;
	memcpy(base, v->name, len - 5);
	base[len - 5] = 0;
	struct value *p = strmap_get(&g->names, base);
	return p && p->init ? p : NULL;
}

/* A --params or --freeze entry: a name, or a shell pattern ('blocks.*.weight'). */
static int names(const char *entry, const char *name)
{
	return !strcmp(entry, name) || !fnmatch(entry, name, 0);
}

/* A floating-point graph input that is no initializer: --params may name it (PyTorch's
 * requires_grad on an input), and then it takes a gradient <input>_grad like a parameter, but no
 * optimizer updates it (it is fed, not stored). */
static int is_float_input(const struct value *v)
{
	return (v->flags & VALUE_INPUT) && !v->init && dtype_is_float(v->type.dtype);
}

static int is_param(const struct value *v, const struct autodiff_opts *o)
{
	if (is_float_input(v) && o->params && (v->flags & VALUE_GRAD_SLOT)) {
		for (size_t i = 0; i < o->n_params; i++)
			if (!strcmp(o->params[i], v->name))
				return 1;
		return 0;
	}
	return (v->flags & VALUE_PARAM) && !(v->flags & VALUE_STATE) && (v->flags & VALUE_GRAD_SLOT) &&
	       autodiff_chosen(o, v->name);
}

int autodiff_chosen(const struct autodiff_opts *o, const char *name)
{
	for (size_t i = 0; i < o->n_freeze; i++)
		if (names(o->freeze[i], name))
			return 0;
	if (!o->params)
		return 1;
	for (size_t i = 0; i < o->n_params; i++)
		if (names(o->params[i], name))
			return 1;
	return 0;
}

/* Each --params and --freeze entry names some floating-point initializer: a typo is an error, not
 * a silently different set of parameters. */
static int check_param_names(const struct graph *g, const struct autodiff_opts *o, struct gd_err *e)
{
	for (int list = 0; list < 2; list++) {
		const char *const *es = list ? o->freeze : o->params;
		size_t n = list ? o->n_freeze : o->n_params;
		for (size_t k = 0; es && k < n; k++) {
			int found = 0;
			for (uint32_t i = 0; i < g->n_inits && !found; i++)
				found = (g->inits[i]->flags & VALUE_PARAM) && names(es[k], g->inits[i]->name);
			for (uint32_t i = 0; i < g->n_inputs && !found && !list; i++)
				found = is_float_input(g->inputs[i]) && !strcmp(es[k], g->inputs[i]->name);
			if (!found)
				return err_set(e, GD_EINPUT, "%s: '%s' %s", list ? "--freeze" : "--params", es[k],
					       strpbrk(es[k], "*?[") ? "matches no floating-point initializer"
					       : list ? "is not a floating-point initializer"
						      : "is neither a floating-point initializer nor a graph input");
		}
	}
	return 0;
}

/* Flags VALUE_PARAM_GRAD on what the gradients of parameters are made of: the gradient of each
 * forward value made from resident values alone with a trainable parameter among them (the
 * parameter, its transpose or cast), and its summands, unless a summand is given to another value
 * too (an Add passes its dy on unchanged). The memory model counts these apart (plan's bytes per
 * parameter). */
static int mark_param_grads(struct ad *a, const struct autodiff_opts *o)
{
	struct graph *g = a->g;
	uint8_t *pd = xmalloc(g->n_values ? g->n_values : 1); /* 2: made from a parameter (graph_mark_resident) */
	if (!pd)
		return err_oom(a->e);
	for (uint32_t i = 0; i < g->n_values; i++)
		pd[i] = is_param(g->values[i], o) ? 2 : g->values[i]->init ? 1 : 0;
	graph_mark_resident(g, pd);
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < a->n_fwd_values; i++) {
			const struct contrib *c = &a->contrib[i];
			if ((pd[i] == 2) != !pass)
				continue;
			for (uint32_t k = 0; k < c->n; k++) {
				struct value *v = c->n == 1 ? c->one : c->many[k];
				/* a gradient cast to its parameter's type (autocast) is one in both types */
				for (int hop = 0; v && hop < 2; hop++) {
					v->flags = pass ? v->flags & ~VALUE_PARAM_GRAD : v->flags | VALUE_PARAM_GRAD;
					const struct node *p = v->producer;
					v = p && p->op == OP_CAST && (p->tags & TAG_BACKWARD) && p->in[0] &&
						    p->in[0]->id >= a->n_fwd_values
						    ? p->in[0]
						    : NULL;
				}
			}
			if (!pass && a->grad[i])
				a->grad[i]->flags |= VALUE_PARAM_GRAD;
		}
	xfree(pd);
	return 0;
}

static const struct value *pick_loss(struct graph *g, struct ad *a, const struct autodiff_opts *o)
{
	const struct value *loss = NULL;
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		const struct value *v = g->outputs[i];
		if (o->loss ? !strcmp(v->name, o->loss) : ad_shape(a, v)->numel == 1 && dtype_is_float(ad_shape(a, v)->dtype)) {
			if (loss && !o->loss) {
				err_set(a->e, GD_EINPUT, "the graph has several scalar outputs ('%s', '%s'); choose one with --loss",
					loss->name, v->name);
				return NULL;
			}
			loss = v;
		}
	}
	if (!loss && o->loss)
		err_set(a->e, GD_EINPUT, "--loss %s: the graph has no output of that name", o->loss);
	else if (!loss)
		err_set(a->e, GD_EINPUT, "the graph has no scalar floating-point output to use as the loss (for a model "
					 "exported without one, --loss-fn mse or cross-entropy appends it)");
	else if (ad_shape(a, loss)->numel != 1 || !dtype_is_float(ad_shape(a, loss)->dtype))
		err_set(a->e, GD_EINPUT, "the loss '%s' must be a floating-point scalar", loss->name);
	return a->e->code ? NULL : loss;
}

enum { REACH_ANY = 1, REACH_DIFF = 2 };

/* Which values lie between a trainable parameter and the loss; and which the loss is computed from
 * (a->reach), through inputs that take a gradient or not. */
static void mark_wants(struct ad *a, const struct value *loss, const struct autodiff_opts *o)
{
	struct graph *g = a->g;
	uint8_t *fwd = a->wants;
	/* a parameter read only where no gradient goes (running statistics, shapes) is a buffer */
	for (uint32_t i = 0; i < a->n_fwd_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_in; k++)
			if (g->nodes[i]->in[k] && op_input_differentiable(g->nodes[i], k))
				g->nodes[i]->in[k]->flags |= VALUE_GRAD_SLOT;
	for (uint32_t i = 0; i < g->n_values; i++)
		fwd[i] = is_param(g->values[i], o);
	for (uint32_t i = 0; i < a->n_fwd_nodes; i++) {
		const struct node *n = g->nodes[i];
		int any = 0;
		for (uint32_t k = 0; k < n->n_in; k++)
			any |= n->in[k] && fwd[n->in[k]->id] && op_input_differentiable(n, k);
		if (any)
			for (uint32_t k = 0; k < n->n_out; k++)
				if (n->out[k] && dtype_is_float(ad_shape(a, n->out[k])->dtype))
					fwd[n->out[k]->id] = 1;
	}
	uint8_t *bwd = a->reach;
	bwd[loss->id] = REACH_ANY | REACH_DIFF;
	for (uint32_t i = a->n_fwd_nodes; i-- > 0;) {
		const struct node *n = g->nodes[i];
		uint8_t any = 0;
		for (uint32_t k = 0; k < n->n_out; k++)
			any |= n->out[k] ? bwd[n->out[k]->id] : 0;
		if (any)
			for (uint32_t k = 0; k < n->n_in; k++)
				if (n->in[k])
					bwd[n->in[k]->id] |= REACH_ANY | (any & REACH_DIFF && op_input_differentiable(n, k) ? REACH_DIFF : 0);
	}
	for (uint32_t i = 0; i < g->n_values; i++)
		fwd[i] = fwd[i] && bwd[i];
}

/* The initializers that are no parameters (r's buffers): a parameter is a floating-point
 * initializer the loss is computed from through inputs that take a gradient, whatever --params and
 * --freeze say; a causal mask read only through a comparison, running statistics and integer
 * constants are buffers. Only their shapes are read. */
static void count_buffers(const struct ad *a, struct autodiff_result *r)
{
	const struct graph *g = a->g;
	for (uint32_t i = 0; i < g->n_inits; i++) {
		const struct value *v = g->inits[i];
		int64_t ne = tensor_numel(v->init);
		if ((v->flags & VALUE_STATE) || ((v->flags & VALUE_PARAM) && (a->reach[v->id] & REACH_DIFF)))
			continue;
		r->n_buffers++;
		r->buffer_bytes += ne > 0 ? (uint64_t)ne * dtype_size(v->init->dtype) : 0;
	}
}

static const char meter_autodiff[] = "building the backward pass"; /* util/progress.h */

/* Marks in read the values of g that subgraph s (or one nested in it) reads. */
static void outer_reads(const struct graph *g, const struct graph *s, uint8_t *read)
{
	for (uint32_t i = 0; i < s->n_values; i++) {
		const struct value *o = s->values[i]->outer;
		if (o && o->id < g->n_values && g->values[o->id] == o)
			read[o->id] = 1;
	}
	for (uint32_t i = 0; i < s->n_nodes; i++)
		for (uint32_t k = 0; k < s->nodes[i]->n_attr; k++) {
			const struct attr *t = &s->nodes[i]->attr[k];
			if (t->type == ATTR_GRAPH && t->g)
				outer_reads(g, t->g, read);
			for (size_t j = 0; t->type == ATTR_GRAPHS && j < t->n; j++)
				outer_reads(g, t->graphs[j], read);
		}
}

/* Control flow left in the forward pass (ops/control.c; rewrite/unroll.h inlines what has constant
 * counts and conditions) takes no gradient: refused where a trainable parameter reaches the loss
 * through it, by its inputs or by what its bodies read, rather than giving that path no gradient. */
static int refuse_control_flow(struct ad *a, struct gd_err *e)
{
	struct graph *g = a->g;
	uint32_t i = 0;
	while (i < a->n_fwd_nodes && !(op_table[g->nodes[i]->op].flags & OPF_SUBGRAPH))
		i++;
	if (i == a->n_fwd_nodes)
		return 0;
	uint8_t *dep = xcalloc(g->n_values + 1, 1), *read = xcalloc(g->n_values + 1, 1);
	if (!dep || !read) {
		xfree(dep);
		xfree(read);
		return err_oom(e);
	}
	for (uint32_t v = 0; v < g->n_values; v++)
		dep[v] = (g->values[v]->flags & VALUE_PARAM) && !(g->values[v]->flags & VALUE_STATE);
	int rc = 0;
	for (i = 0; i < a->n_fwd_nodes && !rc; i++) {
		const struct node *n = g->nodes[i];
		int any = 0, reached = 0, sub = op_table[n->op].flags & OPF_SUBGRAPH;
		if (sub) {
			memset(read, 0, g->n_values);
			for (uint32_t k = 0; k < n->n_attr; k++)
				if (n->attr[k].type == ATTR_GRAPH && n->attr[k].g)
					outer_reads(g, n->attr[k].g, read);
			for (uint32_t v = 0; v < g->n_values && !any; v++)
				any = read[v] && dep[v];
		}
		for (uint32_t k = 0; k < n->n_in; k++)
			any |= n->in[k] && dep[n->in[k]->id];
		for (uint32_t k = 0; k < n->n_out; k++)
			if (n->out[k]) {
				dep[n->out[k]->id] |= (uint8_t)any;
				reached |= a->reach[n->out[k]->id] & REACH_ANY;
			}
		char d[300];
		if (sub && any && reached)
			rc = err_set(e, GD_EINPUT, "%s: a trainable parameter reaches the loss through it, and control flow is "
						   "not differentiated (only an If whose condition and a Loop whose count and "
						   "conditions are constants are: they are unrolled first)",
				     node_desc(n, d, sizeof d));
	}
	xfree(dep);
	xfree(read);
	return rc;
}

int autodiff(struct graph *g, const struct autodiff_opts *o, struct autodiff_result *r, struct gd_err *e)
{
	double t = progress_begin();
	/* a model of opset 7 to 12 is brought to 13's forms, which the backward pass is written in */
	int from;
	if (opset_upgrade(g, &from, e))
		return e->code;
	size_t restated;
	if (exporter_semantics(g, &restated, e))
		return e->code;
	if (from != model_opset(g))
		gd_note("%s: the model's opset %d is rewritten in opset-%d forms, the lowest that holds the backward pass",
			g->path ? g->path : "-", from, model_opset(g));
	struct ad a = {.g = g, .e = e, .n_fwd_values = g->n_values, .n_fwd_nodes = g->n_nodes, .opset = model_opset(g),
		     .fused_rnn = o->fused_rnn};
	/* keep_values: the rules read constant inputs (Slice bounds, Dropout's training_mode, Pad's pads,
	 * reduction axes) after their last forward reader has run; only small computed values have data */
	struct exec_opts eo = {.shapes_only = 1, .probe_unbound = 1, .keep_values = 1};
	memset(r, 0, sizeof *r);
	a.shapes = exec_run(g, &eo, NULL, e);
	if (!a.shapes)
		return e->code;
	/* a bfloat16 graph (mixed precision) at 16 at least where it can be: Where, which Relu's and
	 * other rules' gradients use, takes bfloat16 from 16 only */
	for (uint32_t i = 0; a.opset >= 13 && a.opset < 16 && i < g->n_values; i++)
		if (exec_value(a.shapes, g->values[i])->dtype == DT_BFLOAT16) {
			raise_opset(&a, 16);
			break;
		}
	strmap_init(&a.node_names);
	strmap_init(&a.node_next);
	/* room for what the rules typically make, about three values per forward node, so that the
	 * name tables are not rehashed as they grow */
	uint32_t named = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		named += g->nodes[i]->name != NULL;
	int full = strmap_reserve(&g->names, g->n_values + 3 * (size_t)g->n_nodes) ||
		   strmap_reserve(&a.node_names, named);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (full || (g->nodes[i]->name && strmap_put(&a.node_names, g->nodes[i]->name, g->nodes[i]))) {
			exec_free(a.shapes);
			strmap_free(&a.node_names);
			return err_oom(e);
		}
	a.wants = xcalloc(g->n_values ? g->n_values : 1, 1);
	a.reach = xcalloc(g->n_values ? g->n_values : 1, 1);
	a.contrib = xcalloc(g->n_values ? g->n_values : 1, sizeof *a.contrib);
	a.grad = xcalloc(g->n_values ? g->n_values : 1, sizeof *a.grad);
	a.shape_of = xcalloc(g->n_values ? g->n_values : 1, sizeof *a.shape_of);
	int rc = 0;
	const struct value *loss = NULL;
	if (!a.wants || !a.reach || !a.contrib || !a.grad || !a.shape_of) {
		rc = err_oom(e);
		goto out;
	}
	if (!(loss = pick_loss(g, &a, o))) {
		rc = e->code;
		goto out;
	}
	r->loss = loss;
	g->values[loss->id]->flags |= VALUE_LOSS;
	if ((rc = check_param_names(g, o, e)))
		goto out;
	mark_wants(&a, loss, o);
	for (uint32_t i = 0; i < a.n_fwd_nodes; i++)
		g->nodes[i]->tags |= TAG_FORWARD;
	/* dL/dL = 1 */
	char seed[512];
	snprintf(seed, sizeof seed, "%s_grad", loss->name);
	double scale = o->loss_scale > 0 ? o->loss_scale : 1.0, weight = o->loss_weight > 0 ? o->loss_weight : 1.0;
	struct value *one, *scale_v = NULL, *inv = NULL;
	int loss_dt = ad_shape(&a, loss)->dtype;
	if (o->loss_scale_value) { /* dL/dL = the scale's value, in the loss's dtype */
		scale_v = strmap_get(&g->names, o->loss_scale_value);
		if (!scale_v) {
			rc = err_set(e, GD_EINTERNAL, "no loss scale value '%s'", o->loss_scale_value);
			goto out;
		}
		one = ad_op1(&a, loss_dt == DT_FLOAT ? "Identity" : "Cast", scale_v);
		if (one && loss_dt != DT_FLOAT && ad_set_int(&a, ad_producer(one), "to", loss_dt))
			goto fail;
		if (one && weight != 1.0)
			one = ad_op2(&a, "Mul", one, ad_scalar(&a, loss_dt, weight));
		inv = one ? ad_op2(&a, "Div", ad_scalar(&a, DT_FLOAT, 1.0), scale_v) : NULL;
		if (inv && ad_rename(&a, inv, "loss_scale_inverse"))
			goto fail;
	} else {
		one = ad_scalar(&a, loss_dt, scale * weight);
	}
	if (!one || ad_rename(&a, one, seed) || ad_give(&a, loss, one))
		goto fail;
	if ((rc = refuse_control_flow(&a, e)))
		goto out;
	if (!a.wants[loss->id]) {
		rc = err_set(e, GD_EINPUT, "the loss '%s' does not depend on any trainable parameter", loss->name);
		goto out;
	}
	for (uint32_t i = a.n_fwd_nodes; i-- > 0;) {
		const struct node *n = g->nodes[i];
		int flows = 0, needed = 0;
		if (!(i & 63))
			progress_step(meter_autodiff, a.n_fwd_nodes - i, a.n_fwd_nodes);
		for (uint32_t k = 0; k < n->n_out; k++)
			flows |= n->out[k] && n->out[k]->id < a.n_fwd_values && a.contrib[n->out[k]->id].n;
		for (uint32_t k = 0; k < n->n_in; k++)
			needed |= ad_wants(&a, n->in[k]);
		if (!flows || !needed)
			continue;
		const struct op_impl *impl = n->op != OP_UNKNOWN ? op_table[n->op].impl : NULL;
		char d[300];
		if (!impl || !impl->grad) {
			rc = err_set(e, GD_EINPUT, "%s: graphdiet has no gradient rule for %s", node_desc(n, d, sizeof d),
				     n->op_type);
			goto out;
		}
		a.cur = n;
		if (impl->grad(&a, n)) {
			if (!e->code)
				err_oom(e);
			if (e->code == GD_EINPUT && !strstr(e->msg, "node "))
				err_prefix(e, "%s", node_desc(n, d, sizeof d));
			rc = e->code;
			goto out;
		}
	}
	a.cur = NULL;
	/* parameter gradients as outputs, named <param>_grad */
	for (uint32_t i = 0; i < a.n_fwd_values; i++) {
		struct value *p = g->values[i];
		if (!is_param(p, o))
			continue;
		struct value *gp = a.wants[p->id] ? ad_dy(&a, p) : NULL;
		if (!gp && (a.reach[p->id] != REACH_ANY || o->n_params)) { /* a buffer (count_buffers) goes without
									     * saying, unless --params asked for it */
			r->n_unconnected++;
			gd_warn("%s: parameter '%s' does not affect the loss; it gets no gradient", g->path ? g->path : "-",
				p->name);
		}
		if (!gp)
			continue;
		char name[512];
		JOIN(name, sizeof name, p->name, "_grad");
		if (scale != 1.0 || inv) { /* the scaled gradient (a sum may be named <param>_grad) gives way */
			char scaled[520];
			JOIN(scaled, sizeof scaled, name, "_scaled");
			int pdt = p->init ? p->init->dtype : p->type.dtype;
			struct value *by = !inv ? ad_scalar(&a, pdt, 1.0 / scale) : pdt == DT_FLOAT ? inv : ad_cast(&a, inv, pdt);
			if ((!strcmp(gp->name, name) && ad_rename(&a, gp, scaled)) || !(gp = ad_op2(&a, "Mul", gp, by)))
				goto fail;
		}
		/* a value that is already something else (an output, another gradient) gets a copy */
		if (gp->id < a.n_fwd_values || (gp->flags & VALUE_OUTPUT) || (gp->flags & VALUE_GRAD)) {
			gp = ad_op1(&a, "Identity", gp);
			if (!gp)
				goto fail;
		}
		if (strcmp(gp->name, name) && ad_rename(&a, gp, name)) /* a sum has the name already */
			goto fail;
		gp->flags |= VALUE_GRAD;
		/* the gradient has its parameter's type (a trained input's, its declared one): written as
		 * the output's ValueInfo */
		const struct tensor *pt = p->init;
		uint32_t nd = pt ? pt->ndim : p->type.ndim;
		gp->type = (struct ttype){.dtype = pt ? pt->dtype : p->type.dtype, .has_type = true, .has_tensor = true,
					  .has_dtype = true, .has_shape = pt || p->type.has_shape, .ndim = nd};
		gp->type.dims = arena_array(g->arena, nd ? nd : 1, sizeof *gp->type.dims);
		if (!gp->type.dims)
			goto fail;
		for (uint32_t k = 0; k < nd; k++)
			gp->type.dims[k] = pt ? (struct dim){.kind = DIM_VALUE, .value = pt->dims[k]}
					      : (struct dim){.kind = p->type.dims[k].kind, .value = p->type.dims[k].value,
							     .param = p->type.dims[k].param};
		if (graph_add_output(g, gp, e))
			goto fail;
		r->n_grads++;
		int64_t ne = pt ? tensor_numel(pt) : ttype_numel(&p->type);
		r->n_elems += ne > 0 ? (uint64_t)ne : 0;
	}
	count_buffers(&a, r);
	if (a.n_hoisted && hoist_shapes(&a))
		goto fail;
	if (!r->n_grads)
		rc = err_set(e, GD_EINPUT, "no trainable parameter affects the loss '%s'", loss->name);
	else
		rc = mark_param_grads(&a, o);
	goto out;
fail:
	rc = e->code ? e->code : err_oom(e);
out:
	progress_done(meter_autodiff);
	for (uint32_t i = 0; a.contrib && i < a.n_fwd_values; i++)
		xfree(a.contrib[i].many);
	xfree(a.contrib);
	xfree(a.grad);
	xfree(a.shape_of);
	xfree(a.wants);
	xfree(a.reach);
	exec_free(a.shapes);
	strmap_free(&a.node_names);
	strmap_free(&a.node_next);
	if (!rc)
		progress_end(t, "autodiff", "%" PRIu32 " nodes", g->n_nodes);
	return rc;
}
