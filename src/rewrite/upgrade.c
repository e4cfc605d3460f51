/* upgrade.c - older opsets rewritten in opset-13 forms; see upgrade.h. */
#include "upgrade.h"
#include "../exec/exec.h"
#include "../ir/dtype.h"
#include "fold.h"

#include <math.h>
#include <string.h>

int model_opset(const struct graph *g)
{
	for (size_t i = 0; g->model && i < g->model->n_opsets; i++)
		if (op_domain_is_default(g->model->opsets[i].domain))
			return (int)g->model->opsets[i].version;
	return 17;
}

struct up {
	struct graph *g;
	struct node *n; /* the node being rewritten */
	int from;
	int to;         /* UPGRADE_OPSET, or 14 for a BatchNormalization in training mode */
	struct gd_err *e;
};

/* "<node>/<what>": a name for a node the rewrite adds for n, apart from n's own (onnxruntime refuses
 * two nodes of one name); graph_add_op makes it fresh among the values. NULL when out of memory. */
static const char *sub_name(struct graph *g, const struct node *n, const char *what)
{
	return arena_printf(g->arena, "%s/%s", node_base_name(n), what);
}

/* A Constant named after the node: int64 [k] holding v. */
static struct value *ints(struct up *u, const int64_t *v, size_t k)
{
	const char *nm = sub_name(u->g, u->n, "Constant");
	struct node *c = nm ? graph_add_op(u->g, nm, "Constant", NULL, 0, nm, u->e) : NULL;
	int64_t dims[1] = {(int64_t)k}, none = 0;
	struct rtensor t = {.dtype = DT_INT64, .ndim = 1, .numel = (int64_t)k, .data = k ? (void *)v : &none,
			    .nbytes = k * sizeof *v};
	t.dims[0] = dims[0];
	return c && !node_make_constant(u->g, &t, c, u->e) ? c->out[0] : NULL;
}

/* A scalar Constant of the dtype of the node's input 0 (float32 where the file does not say). */
static struct value *scalar(struct up *u, double v)
{
	const struct value *x = u->n->n_in ? u->n->in[0] : NULL;
	int dt = x && x->type.has_dtype && dtype_is_float(x->type.dtype) ? x->type.dtype : DT_FLOAT;
	const char *nm = sub_name(u->g, u->n, "Constant");
	struct node *c = nm ? graph_add_scalar(u->g, nm, dt, v, u->e) : NULL;
	return c ? c->out[0] : NULL;
}

/* The node's inputs become ins[0..k) (NULL: omitted). */
static int set_inputs(struct up *u, struct value *const *ins, uint32_t k)
{
	while (k && !ins[k - 1])
		k--; /* trailing omitted inputs are left off */
	struct value **in = arena_array(u->g->arena, k ? k : 1, sizeof *in);
	if (!in)
		return err_oom(u->e);
	memcpy(in, ins, k * sizeof *ins);
	u->n->in = in;
	u->n->n_in = k;
	return 0;
}

/* The node's attributes without `name` (a copy: the array may be another node's too), and with
 * `add` (if given) appended. */
static int edit_attrs(struct up *u, const char *drop, const struct attr *add)
{
	struct node *n = u->n;
	struct attr *a = arena_array(u->g->arena, n->n_attr + 1, sizeof *a);
	if (!a)
		return err_oom(u->e);
	uint32_t k = 0;
	for (uint32_t i = 0; i < n->n_attr; i++)
		if (!drop || !n->attr[i].name || strcmp(n->attr[i].name, drop))
			a[k++] = n->attr[i];
	if (add)
		a[k++] = *add;
	n->attr = a;
	n->n_attr = k;
	return 0;
}

static int drop_attr(struct up *u, const char *name)
{
	return node_attr(u->n, name) ? edit_attrs(u, name, NULL) : 0;
}

static int set_str(struct up *u, const char *name, const char *v)
{
	struct attr a = {.name = name, .type = ATTR_STRING, .has_type = true,
			 .s = {(const uint8_t *)v, strlen(v)}};
	return edit_attrs(u, name, &a);
}

static int set_int(struct up *u, const char *name, int64_t v)
{
	struct attr a = {.name = name, .type = ATTR_INT, .has_type = true, .i = v};
	return edit_attrs(u, name, &a);
}

static int64_t int_attr(const struct node *n, const char *name, int64_t dflt)
{
	const struct attr *a = node_attr(n, name);
	return a && a->type == ATTR_INT ? a->i : dflt;
}

/* An ints attribute moved to input k (the inputs before it kept; later ones, none in these ops'
 * older forms, would follow). Absent: the input is left off, which means what the attribute's
 * absence meant. */
static int ints_to_input(struct up *u, const char *name, uint32_t k)
{
	const struct attr *a = node_attr(u->n, name);
	if (!a)
		return 0;
	if (a->type != ATTR_INTS)
		return err_set(u->e, GD_EINPUT, "node '%s' (%s): attribute %s is not a list of integers",
			       node_base_name(u->n), u->n->op_type, name);
	struct value *ins[8] = {0}, *v = ints(u, a->ints, a->n);
	if (!v || k >= 8)
		return v ? -1 : u->e->code;
	for (uint32_t i = 0; i < u->n->n_in && i < k; i++)
		ins[i] = u->n->in[i];
	ins[k] = v;
	return set_inputs(u, ins, k + 1) || drop_attr(u, name);
}

/* Softmax, LogSoftmax and Hardmax before 13: the input flattened to 2-D at `axis` (default 1),
 * normalised along its second axis. With the axis the last, that is 13's meaning with that axis;
 * otherwise Reshape(op(Flatten(x, axis), axis -1), Shape(x)), the node itself becoming the
 * Reshape. */
static int upgrade_softmax(struct up *u)
{
	struct node *n = u->n;
	struct value *x = n->in[0];
	int64_t axis = int_attr(n, "axis", 1);
	int rank = x->type.has_shape ? (int)x->type.ndim : -1;
	if (rank >= 0 && (axis == rank - 1 || axis == -1))
		return set_int(u, "axis", -1);
	const char *fn = sub_name(u->g, n, "Flatten"), *sn = sub_name(u->g, n, "Shape"), *on = sub_name(u->g, n, "2d");
	struct node *f = fn ? graph_add_op(u->g, fn, "Flatten", &x, 1, fn, u->e) : NULL;
	struct node *s = sn ? graph_add_op(u->g, sn, "Shape", &x, 1, sn, u->e) : NULL;
	struct node *op = f && on ? graph_add_op(u->g, on, n->op_type, &f->out[0], 1, on, u->e) : NULL;
	if (!s || !op || node_add_int(u->g, f, "axis", axis) || node_add_int(u->g, op, "axis", -1))
		return u->e->code ? u->e->code : err_oom(u->e);
	struct value *ins[2] = {op->out[0], s->out[0]};
	n->op_type = "Reshape";
	n->op = OP_RESHAPE;
	n->n_attr = 0;
	return set_inputs(u, ins, 2);
}

/* Slice before 10: starts, ends and axes attributes. */
static int upgrade_slice(struct up *u)
{
	const char *names[3] = {"starts", "ends", "axes"};
	for (uint32_t k = 0; k < 3; k++)
		if (ints_to_input(u, names[k], k + 1))
			return u->e->code ? u->e->code : -1;
	return 0;
}

/* Pad before 11: pads and value attributes, mode kept. */
static int upgrade_pad(struct up *u)
{
	const struct attr *v = node_attr(u->n, "value");
	double value = v && v->type == ATTR_FLOAT ? v->f : 0;
	if (ints_to_input(u, "pads", 1))
		return u->e->code ? u->e->code : -1;
	if (value != 0) {
		struct value *c = scalar(u, value), *ins[3] = {u->n->in[0], u->n->n_in > 1 ? u->n->in[1] : NULL, c};
		if (!c || set_inputs(u, ins, 3))
			return u->e->code ? u->e->code : -1;
	}
	return drop_attr(u, "value");
}

/* Clip before 11: min and max attributes (the float range's ends when absent). */
static int upgrade_clip(struct up *u)
{
	const struct attr *lo = node_attr(u->n, "min"), *hi = node_attr(u->n, "max");
	struct value *ins[3] = {u->n->in[0], lo ? scalar(u, lo->f) : NULL, hi ? scalar(u, hi->f) : NULL};
	if ((lo && !ins[1]) || (hi && !ins[2]) || set_inputs(u, ins, 3) || drop_attr(u, "min") || drop_attr(u, "max"))
		return u->e->code ? u->e->code : -1;
	return 0;
}

/* A float attribute moved to input k as a scalar (Dropout's ratio). */
static int float_to_input(struct up *u, const char *name, uint32_t k)
{
	const struct attr *a = node_attr(u->n, name);
	if (!a)
		return 0;
	struct value *ins[4] = {0}, *c = scalar(u, a->f);
	for (uint32_t i = 0; i < u->n->n_in && i < k; i++)
		ins[i] = u->n->in[i];
	ins[k] = c;
	return !c || set_inputs(u, ins, k + 1) || drop_attr(u, name) ? (u->e->code ? u->e->code : -1) : 0;
}

/* Upsample (7-9) and Resize-10: output index i reads input i / scale (nearest rounding down), the
 * asymmetric coordinates of Resize-13, whose inputs are X, roi (omitted), scales. */
static int upgrade_upsample(struct up *u)
{
	struct node *n = u->n;
	struct value *scales = n->n_in > 1 ? n->in[1] : NULL;
	const struct attr *a = node_attr(n, "scales");
	if (!scales && a && a->type == ATTR_FLOATS) { /* Upsample-7 */
		const char *nm = sub_name(u->g, n, "scales");
		struct node *c = nm ? graph_add_op(u->g, nm, "Constant", NULL, 0, nm, u->e) : NULL;
		struct rtensor t = {.dtype = DT_FLOAT, .ndim = 1, .numel = (int64_t)a->n, .data = a->floats,
				    .nbytes = a->n * sizeof(float)};
		t.dims[0] = (int64_t)a->n;
		if (!c || node_make_constant(u->g, &t, c, u->e))
			return u->e->code ? u->e->code : err_oom(u->e);
		scales = c->out[0];
	}
	if (!scales)
		return err_set(u->e, GD_EINPUT, "node '%s' (%s): no scales", node_base_name(n), n->op_type);
	const struct attr *m = node_attr(n, "mode");
	int linear = m && m->type == ATTR_STRING && m->s.n >= 6 && !memcmp(m->s.p, "linear", 6);
	struct value *ins[3] = {n->in[0], NULL, scales};
	n->op_type = "Resize";
	n->op = OP_RESIZE;
	if (set_inputs(u, ins, 3) || drop_attr(u, "scales") || set_str(u, "coordinate_transformation_mode", "asymmetric") ||
	    (!linear && set_str(u, "nearest_mode", "floor")))
		return u->e->code ? u->e->code : err_oom(u->e);
	return 0;
}

static int upgrade_batch_norm(struct up *u)
{
	if (!int_attr(u->n, "spatial", 1))
		return err_set(u->e, GD_EINPUT,
			       "node '%s' (BatchNormalization): spatial = 0 (statistics per element, opset %d) has no "
			       "form in later opsets, which the backward pass needs",
			       node_base_name(u->n), u->from);
	if (drop_attr(u, "spatial") || drop_attr(u, "is_test") || drop_attr(u, "consumed_inputs"))
		return err_oom(u->e);
	if (u->n->n_out < 2)
		return 0;
	/* running statistics as outputs meant training mode before 14 (Y, mean, var, saved_mean,
	 * saved_var, as PyTorch exports it in training mode): 14's training_mode = 1, its three
	 * outputs, so the backward pass differentiates the batch statistics */
	for (uint32_t k = 3; k < u->n->n_out; k++) {
		const struct value *o = u->n->out[k];
		int read = o && (o->flags & VALUE_OUTPUT);
		for (uint32_t i = 0; o && !read && i < u->g->n_nodes; i++)
			for (uint32_t j = 0; j < u->g->nodes[i]->n_in && !read; j++)
				read = u->g->nodes[i]->in[j] == o;
		if (read)
			return err_set(u->e, GD_EINPUT,
				       "node '%s' (BatchNormalization): its saved_mean or saved_var output (opset %d) is read; "
				       "opset 14, which the backward pass needs, has no such output",
				       node_base_name(u->n), u->from);
	}
	if (u->n->n_out > 3)
		u->n->n_out = 3;
	u->to = 14;
	return set_int(u, "training_mode", 1);
}

/* Before 7, arithmetic broadcast only with broadcast = 1, aligning B at `axis`: numpy's rule from
 * 7 gives the same only where B's dimensions are the trailing ones, axis absent. */
static int upgrade_legacy_broadcast(struct up *u)
{
	static const char *const arith[] = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"};
	struct node *n = u->n;
	int is_arith = 0;
	for (size_t i = 0; i < sizeof arith / sizeof *arith; i++)
		is_arith |= !strcmp(n->op_type, arith[i]);
	if (is_arith && node_attr(n, "axis"))
		return err_set(u->e, GD_EINPUT,
			       "node '%s' (%s): broadcasting at an axis (opset %d) has no form in later opsets; re-export "
			       "the model at opset 7 or later",
			       node_base_name(n), n->op_type, u->from);
	return (is_arith || !strcmp(n->op_type, "Gemm")) && drop_attr(u, "broadcast") ? err_oom(u->e) : 0;
}

/* PRelu before 7: a 1-D slope of C elements applies along axis 1; from 7 it broadcasts
 * numpy-style, so it becomes (C, 1, ..., 1). */
static int upgrade_prelu(struct up *u)
{
	struct node *n = u->n;
	const struct value *x = n->in[0], *s = n->in[1];
	if (!x->type.has_shape || !s->type.has_shape || s->type.ndim != 1 || x->type.ndim < 3)
		return 0;
	int64_t axes[RT_MAX_DIMS];
	size_t k = 0;
	for (uint32_t i = 1; i + 1 < x->type.ndim && k < RT_MAX_DIMS; i++)
		axes[k++] = i;
	struct value *ax = ints(u, axes, k), *ins[2] = {n->in[1], ax};
	const char *nm = sub_name(u->g, n, "Unsqueeze");
	struct node *q = ax && nm ? graph_add_op(u->g, nm, "Unsqueeze", ins, 2, nm, u->e) : NULL;
	if (!q)
		return u->e->code ? u->e->code : err_oom(u->e);
	struct value *in2[2] = {n->in[0], q->out[0]};
	return set_inputs(u, in2, 2);
}

static int upgrade_node(struct up *u)
{
	struct node *n = u->n;
	const char *op = n->op_type;
	if (!op || (n->domain && !op_domain_is_default(n->domain)))
		return 0;
	if (u->from >= UPGRADE_OPSET) /* 13: only training mode's form changed, in 14 */
		return strcmp(op, "BatchNormalization") ? 0 : upgrade_batch_norm(u);
	if (u->from < 7 && (drop_attr(u, "consumed_inputs") || upgrade_legacy_broadcast(u)))
		return u->e->code ? u->e->code : err_oom(u->e);
	if (!strcmp(op, "Reshape") && u->from < 5)
		return ints_to_input(u, "shape", 1);
	if (!strcmp(op, "Concat") && !node_attr(n, "axis"))
		return err_set(u->e, GD_EINPUT, "node '%s' (Concat): no axis (opset %d's default of 1 is gone from 4)",
			       node_base_name(n), u->from);
	if (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") || !strcmp(op, "ReduceSum"))
		return ints_to_input(u, "axes", 1);
	if (!strcmp(op, "Split"))
		return ints_to_input(u, "split", 1);
	if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax") || !strcmp(op, "Hardmax"))
		return upgrade_softmax(u);
	if (!strcmp(op, "Slice") && u->from < 10)
		return upgrade_slice(u);
	if (!strcmp(op, "Pad") && u->from < 11)
		return upgrade_pad(u);
	if (!strcmp(op, "Clip") && u->from < 11)
		return upgrade_clip(u);
	if (!strcmp(op, "TopK") && u->from < 10) {
		int64_t k = int_attr(n, "k", 1);
		struct value *ins[2] = {n->in[0], ints(u, &k, 1)};
		return !ins[1] || set_inputs(u, ins, 2) || drop_attr(u, "k") ? (u->e->code ? u->e->code : -1) : 0;
	}
	if (!strcmp(op, "Dropout"))
		return drop_attr(u, "is_test") || float_to_input(u, "ratio", 1) ? (u->e->code ? u->e->code : -1) : 0;
	if (!strcmp(op, "Upsample") || (!strcmp(op, "Resize") && u->from < 11))
		return upgrade_upsample(u);
	if (!strcmp(op, "Scatter")) {
		n->op_type = "ScatterElements";
		n->op = OP_SCATTER_ELEMENTS;
		return 0;
	}
	if (!strcmp(op, "BatchNormalization"))
		return upgrade_batch_norm(u);
	if (!strcmp(op, "PRelu") && u->from < 7)
		return upgrade_prelu(u);
	return 0;
}

int opset_upgrade(struct graph *g, int *from, struct gd_err *e)
{
	*from = model_opset(g);
	if (*from >= 14 || !g->model)
		return 0;
	struct up u = {.g = g, .from = *from, .to = *from < UPGRADE_OPSET ? UPGRADE_OPSET : *from, .e = e};
	uint32_t n_nodes = g->n_nodes; /* the nodes added along the way are in 13's forms already */
	for (uint32_t i = 0; i < n_nodes; i++) {
		u.n = g->nodes[i];
		if (upgrade_node(&u))
			return e->code ? e->code : err_oom(e);
	}
	if (u.to == *from)
		return 0;
	for (size_t i = 0; i < g->model->n_opsets; i++)
		if (op_domain_is_default(g->model->opsets[i].domain))
			g->model->opsets[i].version = u.to;
	if (g->model->ir_version < 7) { /* opset 13's */
		g->model->ir_version = 7;
		g->model->has_ir_version = true;
	}
	return graph_toposort(g, e);
}
