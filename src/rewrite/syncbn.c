/* syncbn.c - --sync-batchnorm: BatchNormalization in training mode with the statistics of all the
 * replicas' batch, as PyTorch's SyncBatchNorm; see replicas.h.
 *
 * Before autodiff, each training-mode BatchNormalization node over X (N, C, ...) of a replica is
 * replaced by standard ops and two AllReduce nodes (domain graphdiet, tagged forward and comm), so
 * that autodiff derives the backward pass, AllReduce's gradient being the AllReduce of its output's
 * gradient (ops/comm.c). With R replicas, each on an equal slice of the batch (run and verify
 * refuse an uneven split), and the axes A = all but 1:
 *   mean = AllReduce(ReduceMean(X, A)) / R                 (1, C, 1, ...)
 *   d    = X - mean
 *   var  = AllReduce(ReduceMean(d d, A)) / R               the population variance, two passes
 *   Y    = d (scale / sqrt(var + eps)) + B                 per-channel gain first
 * The variance is the mean of the squares about the global mean rather than E[x^2] - mean^2 in one
 * AllReduce: one more collective per node in each direction, for the kernel's numbers (float32
 * E[x^2] - mean^2 loses digits when the mean is large against the deviation). The gain is applied
 * to d in one Mul so that d is the only activation-sized tensor the backward pass keeps (Sub and
 * ReduceMean keep none, and X is freed), as the fused rule (ops/norm.c) keeps X alone; (d inv) scale
 * would keep d inv as well. A 16-bit X is normalised in float32 and Y cast back, as the kernel
 * computes.
 *
 * The running statistics (outputs 1 and 2, when the node has them) are updated from these global
 * statistics, the same on every replica: mean' = mean_r m + mean (1 - m), and the variance
 * likewise with the population variance (the spec's), or for a PyTorch export with the unbiased
 * one over the whole batch, var M / (M - 1), M = R numel(X) / C (SyncBatchNorm's). The two updates
 * are Add nodes tagged forward and comm whose first input is Mul(running statistic, m), which
 * replicas_running_stat recognises for the step's state bindings (rewrite/step.c). The running
 * statistics lose their parameter flag: BatchNormalization read them through inputs that take no
 * gradient, so autodiff counted them buffers; read by Mul they would be parameters that do not
 * affect the loss, and warned about. X's rank and the dtypes come from a shapes-only run, as
 * values have no inferred types before autodiff. */
#include "replicas.h"
#include "fold.h"
#include "upgrade.h"
#include "../exec/exec.h"
#include "../ops/kernel.h"
#include "../ops/ops.h"
#include "../util/join.h"

#include <stdio.h>
#include <string.h>

struct sbn {
	struct graph *g;
	struct gd_err *e;
	const struct exec *shapes; /* a shapes-only run of the graph: X's rank and the dtypes */
	const char *base;          /* the BatchNormalization node's name */
	int reps;
	int opset;
};

/* A forward node op_type(a) or op_type(a, b) named <base>/<what>, its output likewise; NULL with e
 * set (or when an input is NULL: its maker set e). */
static struct value *node_of(struct sbn *s, const char *what, const char *op_type, struct value *a, struct value *b, int n_in)
{
	char name[600];
	JOIN(name, sizeof name, s->base, "/", what);
	struct value *ins[2] = {a, b};
	struct node *n = a && (b || n_in == 1) ? graph_add_op(s->g, name, op_type, ins, (uint32_t)n_in, name, s->e) : NULL;
	if (!n)
		return NULL;
	n->tags = TAG_FORWARD;
	return n->out[0];
}

static struct value *op1(struct sbn *s, const char *what, const char *op_type, struct value *a)
{
	return node_of(s, what, op_type, a, NULL, 1);
}

static struct value *op(struct sbn *s, const char *what, const char *op_type, struct value *a, struct value *b)
{
	return node_of(s, what, op_type, a, b, 2);
}

static struct value *scalar(struct sbn *s, const char *what, int dtype, double v)
{
	char name[600];
	JOIN(name, sizeof name, s->base, "/", what);
	struct node *n = graph_add_scalar(s->g, name, dtype, v, s->e);
	return n ? (n->tags = TAG_FORWARD, n->out[0]) : NULL;
}

static struct value *ints(struct sbn *s, const char *what, const int64_t *v, int count)
{
	char name[600];
	JOIN(name, sizeof name, s->base, "/", what);
	struct node *n = graph_add_op(s->g, name, "Constant", NULL, 0, name, s->e);
	struct rtensor t = {.dtype = DT_INT64, .ndim = 1, .dims = {count}, .numel = count, .data = (void *)v,
			    .nbytes = (size_t)count * sizeof *v};
	if (!n || node_make_constant(s->g, &t, n, s->e))
		return NULL;
	n->tags = TAG_FORWARD;
	return n->out[0];
}

static struct value *cast(struct sbn *s, const char *what, struct value *v, int dtype)
{
	struct value *c = op1(s, what, "Cast", v);
	if (c && node_add_int(s->g, c->producer, "to", dtype))
		return err_oom(s->e), NULL;
	return c;
}

/* ReduceMean(v) over every axis but 1 of a rank-r tensor, kept: axes an input from opset 18, an
 * attribute before. */
static struct value *mean_but_1(struct sbn *s, const char *what, struct value *v, int r)
{
	int64_t axes[RT_MAX_DIMS];
	int na = 0;
	for (int i = 0; i < r; i++)
		if (i != 1)
			axes[na++] = i;
	if (s->opset >= 18)
		return op(s, what, "ReduceMean", v, ints(s, "axes", axes, na));
	struct value *m = op1(s, what, "ReduceMean", v);
	struct attr *a = m ? arena_zalloc(s->g->arena, sizeof *a) : NULL;
	int64_t *ax = a ? arena_memdup(s->g->arena, axes, (size_t)na * sizeof *axes) : NULL;
	if (!ax)
		return m ? (err_oom(s->e), NULL) : NULL;
	*a = (struct attr){.name = "axes", .type = ATTR_INTS, .has_type = true, .ints = ax, .n = (size_t)na};
	m->producer->attr = a;
	m->producer->n_attr = 1;
	return m;
}

/* The sum over the replicas of v, divided by their number. */
static struct value *replicas_mean(struct sbn *s, const char *what, struct value *v, int dtype)
{
	struct node *ar = v ? replicas_all_reduce(s->g, s->reps, &v, 1, TAG_FORWARD | TAG_COMM, s->e) : NULL;
	return ar ? op(s, what, "Mul", ar->out[0], scalar(s, "inv_replicas", dtype, 1.0 / s->reps)) : NULL;
}

/* n's output 0 (the node's) gives way to b's output k, which n now makes; b gets n's. */
static int take_over(struct sbn *s, struct node *b, uint32_t k, struct value *made)
{
	struct node *n = made->producer;
	struct value *was = b->out[k];
	was->producer = NULL;
	made->producer = NULL;
	if (graph_set_output_value(n, 0, was, s->e) || graph_set_output_value(b, k, made, s->e))
		return s->e->code;
	n->tags |= k ? TAG_COMM : 0;
	return 0;
}

/* A running statistic's update from the global one (flat: its C values): rs m + flat (1 - m). */
static struct value *running(struct sbn *s, const char *what, struct value *rs, struct value *stat, double m, int cdt)
{
	int dt = exec_value(s->shapes, rs)->dtype;
	static const int64_t flat = -1;
	struct value *v = op(s, "stat_flat", "Reshape", stat, ints(s, "flat", &flat, 1));
	if (v && dt != cdt)
		v = cast(s, "stat_cast", v, dt);
	rs->flags &= ~VALUE_PARAM; /* a buffer, as when BatchNormalization read it: no gradient, no warning */
	struct value *kept = op(s, "stat_kept", "Mul", rs, scalar(s, "momentum", dt, m));
	return op(s, what, "Add", kept, op(s, "stat_new", "Mul", v, scalar(s, "momentum_1", dt, 1 - m)));
}

static int sync_one(struct sbn *s, struct node *b, int pytorch)
{
	char d[300];
	struct value *x = b->in[0];
	const struct rtensor *t = exec_value(s->shapes, x);
	if (!t || t->ndim < 2)
		return err_set(s->e, GD_EINPUT, "%s: --sync-batchnorm needs X of shape (N, C, ...)", node_desc(b, d, sizeof d));
	if (b->n_out > 3)
		return err_set(s->e, GD_EINPUT, "%s: --sync-batchnorm takes opset 14's form (outputs Y, running mean, "
				      "running var)", node_desc(b, d, sizeof d));
	int xdt = t->dtype, cdt = dtype_is_half(xdt) ? DT_FLOAT : xdt, r = t->ndim;
	double eps = attr_float(b, "epsilon", 1e-5f), m = attr_float(b, "momentum", 0.9f);
	struct value *xf = cdt != xdt ? cast(s, "x_float", x, cdt) : x;
	int64_t cshape[RT_MAX_DIMS];
	for (int i = 0; i < r; i++)
		cshape[i] = i == 1 ? -1 : 1;
	struct value *shape = ints(s, "channels", cshape, r), *par[2] = {b->in[1], b->in[2]};
	for (int k = 0; k < 2; k++) {
		const struct value *p = par[k];
		int pdt = exec_value(s->shapes, p)->dtype;
		par[k] = op(s, k ? "bias" : "scale", "Reshape", pdt != cdt ? cast(s, "param_cast", par[k], cdt) : par[k], shape);
	}
	struct value *mean = replicas_mean(s, "mean", mean_but_1(s, "mean_local", xf, r), cdt);
	struct value *dev = op(s, "centred", "Sub", xf, mean);
	struct value *var = replicas_mean(s, "var", mean_but_1(s, "var_local", op(s, "sq", "Mul", dev, dev), r), cdt);
	struct value *inv = op(s, "inv_std", "Div", scalar(s, "one", cdt, 1),
			       op1(s, "std", "Sqrt", op(s, "var_eps", "Add", var, scalar(s, "eps", cdt, eps))));
	struct value *y = op(s, "y", "Add", op(s, "scaled", "Mul", dev, op(s, "gain", "Mul", inv, par[0])), par[1]);
	if (y && cdt != xdt)
		y = cast(s, "y_cast", y, xdt);
	if (!y || take_over(s, b, 0, y))
		return s->e->code ? s->e->code : err_oom(s->e);
	if (b->n_out > 1 && b->out[1]) {
		struct value *rm = running(s, "sync_running_mean", b->in[3], mean, m, cdt);
		if (!rm || take_over(s, b, 1, rm))
			return s->e->code ? s->e->code : err_oom(s->e);
	}
	if (b->n_out > 2 && b->out[2]) {
		struct value *v = var;
		if (pytorch) { /* M / (M - 1), M = R numel(X) / C; d's size, as d lives until the backward pass */
			struct value *n = op(s, "count", "Div", cast(s, "count_x", op1(s, "numel", "Size", dev), cdt),
					     cast(s, "count_c", op1(s, "channels_n", "Size", b->in[3]), cdt));
			struct value *big = op(s, "count_all", "Mul", n, scalar(s, "replicas", cdt, s->reps));
			v = op(s, "var_unbiased", "Mul", var,
			       op(s, "bessel", "Div", big, op(s, "count_1", "Sub", big, scalar(s, "one_", cdt, 1))));
		}
		struct value *rv = running(s, "sync_running_var", b->in[4], v, m, cdt);
		if (!rv || take_over(s, b, 2, rv))
			return s->e->code ? s->e->code : err_oom(s->e);
	}
	return 0;
}

int replicas_sync_batch_norm(struct graph *g, int reps, struct gd_err *e)
{
	const char *pn = g->model ? g->model->producer_name : NULL;
	int opset = model_opset(g);
	uint32_t n0 = g->n_nodes, n_bn = 0;
	struct node **bn = arena_array(g->arena, n0 + 1, sizeof *bn);
	struct exec_opts eo = {.shapes_only = 1, .probe_unbound = 1, .keep_values = 1};
	struct exec *x = bn ? exec_run(g, &eo, NULL, e) : NULL;
	if (!x)
		return e->code ? e->code : err_oom(e);
	int rc = 0;
	for (uint32_t i = 0; i < n0 && !rc; i++) {
		struct node *b = g->nodes[i];
		if (b->op != OP_BATCH_NORM || !attr_int(b, "training_mode", 0))
			continue;
		struct sbn s = {g, e, x, node_base_name(b), reps, opset};
		rc = sync_one(&s, b, pn && !strcmp(pn, "pytorch"));
		bn[n_bn++] = b;
	}
	exec_free(x);
	if (rc || !n_bn)
		return rc;
	return graph_need_domain(g, "graphdiet") ? err_oom(e)
	       : graph_toposort(g, e) || graph_drop_unread(g, bn, n_bn, e) ? e->code : 0;
}

struct value *replicas_running_stat(const struct node *n)
{
	if (n->op != OP_ADD || !(n->tags & TAG_COMM) || !node_is_forward(n) || n->n_in != 2)
		return NULL;
	const struct node *k = n->in[0]->producer;
	return k && k->op == OP_MUL && k->in[0]->init ? k->in[0] : NULL;
}
