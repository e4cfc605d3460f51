/* loss.c - appending a loss to a model exported without one; see loss.h.
 *
 * MSE:            loss = ReduceMean((pred - target)^2), target shaped like pred.
 * cross-entropy:  loss = SoftmaxCrossEntropyLoss(pred, target) (mean), target int64 shaped like pred
 *                 without its class dimension (axis 1), as torch.nn.functional.cross_entropy. */
#include "loss.h"
#include "fold.h"

#include <string.h>

int loss_append(struct graph *g, enum loss_fn fn, const char *pred_name, const char *target, struct gd_err *e)
{
	struct value *pred = NULL;
	if (pred_name) {
		pred = strmap_get(&g->names, pred_name);
		if (!pred || !(pred->flags & VALUE_OUTPUT))
			return err_set(e, GD_EINPUT, "--loss %s: the graph has no output of that name", pred_name);
	} else if (g->n_outputs == 1) {
		pred = g->outputs[0];
	} else {
		return err_set(e, GD_EINPUT, "the graph has %u outputs; name the prediction with --loss", g->n_outputs);
	}
	if (strmap_get(&g->names, target))
		return err_set(e, GD_EINPUT, "--target %s: the graph already has a value of that name", target);
	const struct ttype *pt = &pred->type;
	if (!pt->has_dtype || !dtype_is_float(pt->dtype) || !pt->has_shape)
		return err_set(e, GD_EINPUT, "output '%s' needs a known floating-point type and shape for --loss-fn", pred->name);
	if (fn == LOSS_CROSS_ENTROPY && pt->ndim < 2)
		return err_set(e, GD_EINPUT, "output '%s' must be (N, C, ...) class scores for cross-entropy", pred->name);
	/* the target input */
	const char *tname = arena_strdup(g->arena, target);
	struct value *t = tname ? graph_value(g, tname, e) : NULL;
	if (!t)
		return err_oom(e);
	t->type = *pt;
	if (fn == LOSS_CROSS_ENTROPY) {
		t->type.dtype = DT_INT64;
		t->type.ndim = pt->ndim - 1;
		t->type.dims = arena_array(g->arena, t->type.ndim, sizeof *t->type.dims);
		if (!t->type.dims)
			return err_oom(e);
		for (uint32_t i = 0, k = 0; i < pt->ndim; i++)
			if (i != 1)
				t->type.dims[k++] = pt->dims[i];
	}
	if (graph_add_input(g, t, e))
		return e->code;
	struct value *loss;
	if (fn == LOSS_MSE) {
		struct value *ins[2] = {pred, t};
		struct node *d = graph_add_op(g, "loss/Sub", "Sub", ins, 2, "loss/diff", e);
		struct value *sq[2] = {d ? d->out[0] : NULL, d ? d->out[0] : NULL};
		struct node *m = d ? graph_add_op(g, "loss/Mul", "Mul", sq, 2, "loss/sq", e) : NULL;
		struct node *r = m ? graph_add_op(g, "loss/ReduceMean", "ReduceMean", &m->out[0], 1, "loss", e) : NULL;
		if (!r)
			return e->code ? e->code : err_oom(e);
		r->attr = arena_zalloc(g->arena, sizeof *r->attr);
		if (!r->attr)
			return err_oom(e);
		r->n_attr = 1;
		r->attr[0] = (struct attr){.name = "keepdims", .type = ATTR_INT, .has_type = true, .i = 0};
		loss = r->out[0];
	} else {
		struct value *ins[2] = {pred, t};
		struct node *c = graph_add_op(g, "loss/SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyLoss", ins, 2, "loss", e);
		if (!c)
			return e->code ? e->code : err_oom(e);
		loss = c->out[0];
	}
	loss->type = (struct ttype){.dtype = pt->dtype, .has_type = true, .has_tensor = true, .has_dtype = true,
				    .has_shape = true, .ndim = 0};
	if (graph_add_output(g, loss, e))
		return e->code;
	return graph_check(g, e) || graph_toposort(g, e) ? e->code : 0;
}
