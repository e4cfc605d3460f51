/* shard.c - sharding data-parallel training over the replicas (ZeRO stages 1-3); see shard.h. */
#include "shard.h"
#include "../autodiff/ad.h"
#include "../exec/comm.h"
#include "../io/tensor.h"
#include "../ops/kernel.h"
#include "../ops/ops.h"
#include "../util/join.h"
#include "../util/xalloc.h"

#include <stdio.h>
#include <string.h>

static const char *const stage_names[] = {"none", "optimizer", "gradients", "parameters"};

int shard_parse(const char *arg)
{
	for (int s = SHARD_OPTIMIZER; s <= SHARD_PARAMETERS; s++)
		if (!strcmp(arg, stage_names[s]) || (arg[0] == '0' + s && !arg[1]))
			return s;
	return -1;
}

const char *shard_name(enum shard_stage s)
{
	return stage_names[s];
}

/* Gives AllGather n its shape attribute: t's dims (room for it was made). */
static int gather_shape(struct graph *g, struct node *n, const struct tensor *t)
{
	int64_t *dims = arena_array(g->arena, t->ndim + 1, sizeof *dims);
	if (!dims)
		return -1;
	if (t->ndim)
		memcpy(dims, t->dims, t->ndim * sizeof *dims);
	n->attr[n->n_attr++] = (struct attr){.name = "shape", .type = ATTR_INTS, .has_type = true, .ints = dims, .n = t->ndim};
	return 0;
}

/* A slice's type: shard_len(numel(t), reps) elements of t's dtype. */
static int slice_type(struct graph *g, struct value *v, const struct tensor *t, int reps)
{
	int64_t k = shard_len(tensor_numel(t), reps);
	return step_set_type(g, v, t->dtype, 1, &k);
}

int shard_whole(const struct value *p, const struct diet *d)
{
	return step_diet_chosen(d, p) || (p->init->dtype != DT_FLOAT && p->init->dtype != DT_DOUBLE);
}

struct value *shard_slice(struct graph *g, int reps, struct value *v, struct gd_err *e)
{
	struct node *n = replicas_collective(g, OP_SHARD, reps, &v, NULL, 1, "_slice", TAG_BACKWARD, e);
	return n ? n->out[0] : NULL;
}

struct value *shard_gather(struct graph *g, int reps, struct value *slice, const struct tensor *like, uint32_t tags,
			   struct gd_err *e)
{
	struct node *n = replicas_collective(g, OP_ALL_GATHER, reps, &slice, NULL, 1, "_gathered", tags | TAG_COMM, e);
	if (n && (gather_shape(g, n, like) || step_set_type(g, n->out[0], like->dtype, like->ndim, like->dims))) {
		err_oom(e);
		return NULL;
	}
	return n ? n->out[0] : NULL;
}

/* Whether stage 3 shards initializer v: a float32 or float64 parameter autodiff will train (read
 * by a forward node where a gradient goes, mark[v] bit 1, chosen by --params and --freeze), not a
 * diet variable, and not read inside a subgraph (bit 2: whose references are by name). */
static int shardable(const struct value *v, const struct step_opts *o, const struct autodiff_opts *ao,
		     const uint8_t *mark)
{
	return (v->flags & VALUE_PARAM) && !(v->flags & (VALUE_STATE | VALUE_OUTPUT)) && mark[v->id] == 1 &&
	       !shard_whole(v, &o->diet) && autodiff_chosen(ao, v->name);
}

/* Parameter p becomes its slice, under its own name (an initializer described as zeros, made by
 * ig, the initialization graph, from p's weights, which move there: *bind binds it; no ig when
 * sized), and p, renamed p_gathered, is made by a forward AllGather of it. */
static int shard_param(struct graph *g, int reps, struct value *p, struct graph *ig, struct kv *bind, struct gd_err *e)
{
	const struct tensor *t = p->init;
	int64_t k = shard_len(tensor_numel(t), reps);
	const char *nm = p->name; /* (an arena string) */
	struct tensor *st = arena_zalloc(g->arena, sizeof *st);
	int64_t *dims = arena_memdup(g->arena, &k, sizeof k);
	char *full = arena_printf(g->arena, "%s_gathered", nm);
	if (!st || !dims || !full || graph_rename_fresh(g, p, full, e))
		return e->code ? e->code : err_oom(e);
	graph_unstore(g, p);
	struct value *q = graph_value(g, nm, e);
	if (!q || slice_type(g, q, t, reps))
		return e->code ? e->code : err_oom(e);
	*st = (struct tensor){.name = nm, .dtype = t->dtype, .ndim = 1, .dims = dims, .src = TSRC_RANDOM,
			      .rnd = {.dist = RND_CONSTANT, .a = 0}};
	struct node *n = graph_add_init(g, q, st, e) ? NULL :
			 replicas_collective(g, OP_ALL_GATHER, reps, &q, &p, 1, "", TAG_COMM, e);
	if (!n || gather_shape(g, n, t))
		return e->code ? e->code : err_oom(e);
	if (!ig)
		return 0;
	/* the initialization: Shard(<the weights>), each replica its slice */
	struct tensor *wt = arena_memdup(g->arena, t, sizeof *wt);
	const char *base = arena_printf(g->arena, "%s_weights", nm);
	const char *wn = wt && base ? graph_fresh_name(ig, base, e) : NULL;
	struct value *w = wn ? graph_value(ig, wn, e) : NULL;
	if (!w || step_set_type(ig, w, t->dtype, t->ndim, t->dims))
		return e->code ? e->code : err_oom(e);
	wt->name = wn;
	struct node *s = graph_add_init(ig, w, wt, e) ? NULL : replicas_collective(ig, OP_SHARD, reps, &w, NULL, 1, "_slice", 0, e);
	if (!s || slice_type(ig, s->out[0], t, reps) || graph_add_output(ig, s->out[0], e))
		return e->code ? e->code : err_oom(e);
	*bind = (struct kv){.key = nm, .value = s->out[0]->name};
	return 0;
}

/* mark[v] (xcalloc'd; NULL out of memory): bit 1, a forward node of g reads value v where a
 * gradient goes; bit 2, v is read inside a subgraph. */
static uint8_t *reads(const struct graph *g)
{
	uint8_t *mark = xcalloc(g->n_values ? g->n_values : 1, 1);
	for (uint32_t i = 0; mark && i < g->n_nodes; i++)
		for (uint32_t k = 0; node_is_forward(g->nodes[i]) && k < g->nodes[i]->n_in; k++)
			if (g->nodes[i]->in[k] && op_input_differentiable(g->nodes[i], k))
				mark[g->nodes[i]->in[k]->id] |= 1;
	for (uint32_t s = 0; mark && s < g->n_subgraphs; s++)
		for (uint32_t i = 0; i < g->subgraphs[s]->n_values; i++) {
			const struct value *v = g->subgraphs[s]->values[i]->outer;
			while (v && v->outer)
				v = v->outer;
			if (v && v->id < g->n_values && g->values[v->id] == v)
				mark[v->id] |= 2;
		}
	return mark;
}

int shard_parameters(struct graph *g, const struct step_opts *o, const struct autodiff_opts *ao, struct gd_err *e)
{
	uint32_t n_params = g->n_inits, n = 0;
	struct value **ps = xmalloc(sizeof *ps * (n_params + 1));
	uint8_t *mark = reads(g);
	struct kv *binds = xmalloc(sizeof *binds * (n_params + 1));
	int rc = ps && mark && binds ? 0 : err_oom(e);
	for (uint32_t i = 0; !rc && i < n_params; i++)
		if (shardable(g->inits[i], o, ao, mark))
			ps[n++] = g->inits[i];
	struct training_info *ti = !rc && n && !o->sized ? step_training_info(g) : NULL;
	struct graph *ig = ti ? step_init_graph(g, ti) : NULL;
	if (!rc && n && !o->sized && !ig)
		rc = err_oom(e);
	for (uint32_t i = 0; !rc && i < n; i++)
		rc = shard_param(g, o->rep.n, ps[i], ig, &binds[i], e);
	if (!rc && ig) { /* the slices' first values, after what the initialization binds already */
		struct kv *b = arena_array(g->arena, ti->n_init_bind + n, sizeof *b);
		if (!b) {
			rc = err_oom(e);
		} else {
			if (ti->n_init_bind)
				memcpy(b, ti->init_bind, ti->n_init_bind * sizeof *b);
			memcpy(b + ti->n_init_bind, binds, n * sizeof *b);
			ti->init_bind = b;
			ti->n_init_bind += n;
		}
	}
	if (!rc && n && graph_toposort(g, e)) /* each gather just before its first reader */
		rc = e->code;
	xfree(ps);
	xfree(mark);
	xfree(binds);
	return rc;
}

uint8_t *shard_slices(const struct graph *g)
{
	uint8_t *m = xcalloc(g->n_values ? g->n_values : 1, 1);
	for (uint32_t i = 0; m && i < g->n_nodes; i++)
		if (g->nodes[i]->op == OP_ALL_GATHER && node_is_forward(g->nodes[i]) && g->nodes[i]->in[0]->init)
			m[g->nodes[i]->in[0]->id] = 1;
	return m;
}

uint64_t shard_unsliced(const struct graph *g)
{
	uint64_t more = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		size_t nd = 0;
		const int64_t *dims = n->op == OP_ALL_GATHER ? attr_ints(n, "shape", &nd) : NULL;
		if (!dims || !node_is_forward(n) || !n->in[0]->init || !(n->in[0]->flags & VALUE_PARAM))
			continue;
		int64_t whole = 1;
		for (size_t k = 0; k < nd; k++)
			whole *= dims[k];
		more += (uint64_t)(whole - tensor_numel(n->in[0]->init));
	}
	return more;
}
