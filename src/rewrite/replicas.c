/* replicas.c - data-parallel replicas: the loss's weight, and the gradients' all-reduce; see
 * replicas.h. */
#include "replicas.h"
#include "shard.h"
#include "fold.h"
#include "../autodiff/ad.h"
#include "../ops/kernel.h"
#include "../ops/ops.h"
#include "../util/join.h"
#include "../util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The loss: `name`, else the only output declared a float scalar. */
static struct value *find_loss(struct graph *g, const char *name, struct gd_err *e)
{
	struct value *loss = NULL;
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		struct value *v = g->outputs[i];
		const struct ttype *t = &v->type;
		int scalar = t->has_dtype && dtype_is_float(t->dtype) && t->has_shape && t->ndim == 0;
		if (name ? !strcmp(v->name, name) : scalar) {
			if (loss && !name) {
				err_set(e, GD_EINPUT, "--replicas: the graph has several scalar outputs ('%s', '%s'); choose "
						      "the loss with --loss", loss->name, v->name);
				return NULL;
			}
			loss = v;
		}
	}
	if (!loss && name)
		err_set(e, GD_EINPUT, "--loss %s: the graph has no output of that name", name);
	else if (!loss)
		err_set(e, GD_EINPUT, "--replicas: no output is declared a floating-point scalar; name the loss with --loss");
	return loss;
}

/* Whether v is a constant: an initializer that is not trained, or a Constant's output. */
static int constant(const struct value *v)
{
	return (v->init && !(v->flags & VALUE_PARAM)) || (v->producer && v->producer->op == OP_CONSTANT);
}

/* The reduction that makes v: MEAN, SUM, or AUTO when the walk cannot tell (*why says where). */
static enum loss_reduction reduction_of(const struct value *v, const struct node **why, int depth)
{
	const struct node *n = v->producer;
	if (!n || depth > 64) {
		*why = n;
		return LOSS_REDUCTION_AUTO;
	}
	switch (n->op) {
	case OP_REDUCE_MEAN:
		return LOSS_REDUCTION_MEAN;
	case OP_REDUCE_SUM:
		return LOSS_REDUCTION_SUM;
	case OP_SOFTMAX_CE_LOSS:
	case OP_NLL_LOSS:
		if (attr_str_is(n, "reduction", "mean", 1))
			return LOSS_REDUCTION_MEAN;
		if (attr_str_is(n, "reduction", "sum", 0))
			return LOSS_REDUCTION_SUM;
		break;
	case OP_CAST:
	case OP_IDENTITY:
	case OP_RESHAPE:
	case OP_SQUEEZE:
	case OP_UNSQUEEZE:
	case OP_NEG:
		return reduction_of(n->in[0], why, depth + 1);
	case OP_MUL:
	case OP_DIV:
	case OP_ADD:
	case OP_SUB: {
		int c0 = constant(n->in[0]), c1 = constant(n->in[1]);
		int scaling = n->op == OP_MUL || n->op == OP_DIV;
		if (scaling && c1 != c0 && !(n->op == OP_DIV && c0)) /* x * c, c * x, x / c */
			return reduction_of(c0 ? n->in[1] : n->in[0], why, depth + 1);
		if (!scaling && !c0 && !c1) { /* two losses: they must agree */
			enum loss_reduction a = reduction_of(n->in[0], why, depth + 1);
			return a && a == reduction_of(n->in[1], why, depth + 1) ? a : LOSS_REDUCTION_AUTO;
		}
		break;
	}
	default:
		break;
	}
	*why = n;
	return LOSS_REDUCTION_AUTO;
}

int replicas_begin(struct graph *g, const struct replicas *r, const char *loss_name, double *weight, struct gd_err *e)
{
	*weight = 1;
	char d[300], buf[32];
	int bn = 0;
	for (uint32_t i = 0; r->n > 1 && i < g->n_nodes && !bn; i++)
		bn = g->nodes[i]->op == OP_BATCH_NORM && attr_int(g->nodes[i], "training_mode", 0);
	if ((bn && model_set_meta(g, REPLICAS_BATCH_NORM_KEY, r->sync_bn ? "sync" : "replica")) ||
	    (bn && r->sync_bn && replicas_sync_batch_norm(g, r->n, e)))
		return e->code ? e->code : err_oom(e);
	struct value *loss = find_loss(g, loss_name, e);
	if (!loss)
		return e->code;
	enum loss_reduction red = r->reduction;
	const struct node *why = NULL;
	if (red == LOSS_REDUCTION_AUTO && !(red = reduction_of(loss, &why, 0)))
		return err_set(e, GD_EINPUT,
			       "--replicas: cannot tell whether the loss '%s' is a mean or a sum over the batch (%s%s); "
			       "say which with --loss-reduction mean|sum",
			       loss->name, why ? "it stops at " : "it is a graph input",
			       why ? node_desc(why, d, sizeof d) : "");
	*weight = red == LOSS_REDUCTION_MEAN ? 1.0 / r->n : 1.0;
	snprintf(buf, sizeof buf, "%d", r->n);
	if (model_set_meta(g, REPLICAS_KEY, buf) ||
	    model_set_meta(g, REPLICAS_REDUCTION_KEY, red == LOSS_REDUCTION_MEAN ? "mean" : "sum") ||
	    (r->shard && model_set_meta(g, REPLICAS_SHARD_KEY, shard_name(r->shard))))
		return err_oom(e);
	return 0;
}

/* The node is named <its first output>/<its op>: graph_fresh_name keeps value names unique, not
 * node names, so a fixed base named every AllReduce alike, which onnxruntime refuses. */
struct node *replicas_collective(struct graph *g, int op, int reps, struct value *const *ins, struct value *const *outs,
				 uint32_t n_in, const char *suffix, uint32_t tags, struct gd_err *e)
{
	struct node *n = graph_add_node(g, e);
	struct value **io = n ? arena_array(g->arena, 2 * n_in, sizeof *io) : NULL;
	struct attr *a = io ? arena_array(g->arena, 3, sizeof *a) : NULL; /* (a third for a gather's shape) */
	if (!a)
		return NULL;
	n->op_type = op_table[op].op_type;
	n->domain = "graphdiet";
	n->op = op;
	n->tags = tags;
	n->in = io;
	n->out = io + n_in;
	n->n_in = n->n_out = n_in;
	memcpy(n->in, ins, n_in * sizeof *ins);
	for (uint32_t k = 0; k < n_in; k++) {
		char name[600];
		JOIN(name, sizeof name, ins[k]->name, suffix);
		const char *on = outs ? NULL : graph_fresh_name(g, name, e);
		if (outs ? graph_set_output_value(n, k, outs[k], e) : !on || graph_set_output(g, n, k, on, e))
			return NULL;
		if (op == OP_ALL_REDUCE)
			n->out[k]->type = ins[k]->type;
	}
	char name[600];
	JOIN(name, sizeof name, n->out[0]->name, "/", op_table[op].op_type);
	if (!(n->name = graph_fresh_name(g, name, e)))
		return NULL;
	n->attr = a;
	if (op == OP_ALL_REDUCE || op == OP_REDUCE_SCATTER)
		a[n->n_attr++] = (struct attr){.name = "reduction", .type = ATTR_STRING, .has_type = true,
					       .s = {(const uint8_t *)"sum", 3}};
	a[n->n_attr++] = (struct attr){.name = "replicas", .type = ATTR_INT, .has_type = true, .i = reps};
	return n;
}

struct node *replicas_all_reduce(struct graph *g, int reps, struct value *const *ins, uint32_t n_in, uint32_t tags,
				 struct gd_err *e)
{
	return replicas_collective(g, OP_ALL_REDUCE, reps, ins, NULL, n_in, "_sum", tags, e);
}

/* Output `out` (at index i) gives way to `now`, which takes its name; out becomes <name>_<suffix>. */
static int take_output(struct graph *g, uint32_t i, struct value *now, const char *suffix, struct gd_err *e)
{
	struct value *was = g->outputs[i];
	char name[600], old[620];
	snprintf(name, sizeof name, "%s", was->name);
	JOIN(old, sizeof old, name, "_", suffix);
	if (graph_rename_fresh(g, was, old, e) || graph_rename_fresh(g, now, name, e))
		return e->code ? e->code : err_oom(e);
	now->flags |= was->flags & (VALUE_OUTPUT | VALUE_GRAD | VALUE_PARAM_GRAD);
	was->flags &= ~(VALUE_OUTPUT | VALUE_GRAD);
	g->outputs[i] = now;
	return 0;
}

struct grad_out {
	uint32_t out;  /* its place in the graph outputs */
	uint32_t made; /* its producer's index: when backprop completes it */
	size_t bytes;
	int dtype;
	int scatter; /* summed into this replica's slice (ReduceScatter), not whole (AllReduce) */
};

static int by_made(const void *a, const void *b)
{
	const struct grad_out *x = a, *y = b;
	return x->made != y->made ? (x->made > y->made) - (x->made < y->made) : (x->out > y->out) - (x->out < y->out);
}

int replicas_build(struct graph *g, const struct replicas *r, int (*whole)(const struct value *, const void *),
		   const void *ctx, struct gd_err *e)
{
	if (!r->n)
		return 0;
	uint32_t n_old = g->n_nodes; /* the backward pass ends here */
	int moved = 0;                /* a node now waits for one made after it: sort again */
	if (graph_need_domain(g, "graphdiet"))
		return err_oom(e);
	struct grad_out *go = xmalloc(sizeof *go * (g->n_outputs + 1));
	struct value **ins = xmalloc(sizeof *ins * (g->n_outputs + 1));
	struct value *loss = NULL;
	uint8_t *slices = shard_slices(g);
	uint32_t n = 0;
	int rc = 0;
	if (!go || !ins || !slices) {
		rc = err_oom(e);
		goto out;
	}
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		struct value *v = g->outputs[i];
		loss = v->flags & VALUE_LOSS ? v : loss;
		const struct value *param = v->flags & VALUE_GRAD ? autodiff_param_of(g, v) : NULL;
		if (!param || slices[param->id]) /* (a slice's gradient is a ReduceScatter's: summed) */
			continue;
		const struct tensor *p = param->init;
		go[n++] = (struct grad_out){i, v->producer ? v->producer->index : 0,
					    (size_t)tensor_numel(p) * dtype_size(p->dtype), p->dtype,
					    r->shard >= SHARD_GRADIENTS && !(whole && whole(param, ctx))};
	}
	qsort(go, n, sizeof *go, by_made);
	/* buckets, in the order backprop completes the gradients */
	for (uint32_t i = 0, j; i < n && !rc; i = j) {
		size_t bytes = go[i].bytes;
		for (j = i + 1; j < n && r->bucket_bytes && go[j].dtype == go[i].dtype && go[j].scatter == go[i].scatter &&
			     bytes + go[j].bytes <= r->bucket_bytes; j++)
			bytes += go[j].bytes;
		for (uint32_t k = i; k < j; k++)
			ins[k - i] = g->outputs[go[k].out];
		struct node *ar = go[i].scatter ? replicas_collective(g, OP_REDUCE_SCATTER, r->n, ins, NULL, j - i, "_slice",
								      TAG_BACKWARD | TAG_COMM, e)
						: replicas_all_reduce(g, r->n, ins, j - i, TAG_BACKWARD | TAG_COMM, e);
		/* a reduce-scatter runs as soon as its bucket is complete, so that the replica's whole
		 * gradients are freed then (the backward node after the bucket's last waits for it) */
		uint32_t last = go[j - 1].made;
		if (ar && go[i].scatter && last + 1 < n_old)
			rc = node_wait_for(g, g->nodes[last + 1], ar) ? err_oom(e) : 0, moved = 1;
		for (uint32_t k = i; k < j && ar && !rc; k++)
			rc = take_output(g, go[k].out, ar->out[k - i], "local", e);
		if (!ar)
			rc = e->code ? e->code : err_oom(e);
	}
	/* the whole batch's loss: the replicas' mean (weighted by 1/N) or sum */
	if (!rc && loss) {
		const char *red = model_meta(g, REPLICAS_REDUCTION_KEY);
		struct value *x = loss;
		if (red && !strcmp(red, "mean") && r->n > 1) {
			struct node *c = graph_add_scalar(g, "loss_weight", loss->type.dtype, 1.0 / r->n, e);
			struct value *two[2] = {loss, c ? c->out[0] : NULL};
			struct node *m = c ? graph_add_op(g, "loss_weighted", "Mul", two, 2, "loss_weighted", e) : NULL;
			if (!m) {
				rc = e->code ? e->code : err_oom(e);
				goto out;
			}
			c->tags = m->tags = TAG_BACKWARD | TAG_COMM;
			x = m->out[0];
			x->type = loss->type;
		}
		char name[600];
		JOIN(name, sizeof name, loss->name, "_global");
		struct node *ar = replicas_all_reduce(g, r->n, &x, 1, TAG_BACKWARD | TAG_COMM, e);
		if (!ar || graph_rename_fresh(g, ar->out[0], name, e) || graph_add_output(g, ar->out[0], e))
			rc = e->code ? e->code : err_oom(e);
	}
	if (!rc && moved && graph_toposort(g, e))
		rc = e->code;
out:
	xfree(go);
	xfree(ins);
	xfree(slices);
	return rc;
}
