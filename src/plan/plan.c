/* plan.c - see plan.h. */
#include "plan.h"
#include "../rewrite/step.h"
#include "../autodiff/ad.h"
#include "../ops/kernel.h"
#include "../rewrite/recompute.h"
#include "../rewrite/shard.h"
#include "../util/progress.h"
#include "../util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether backward value v is made from state, inputs and constants alone (a few nodes deep). */
static int from_state(const struct value *v, int depth)
{
	const struct node *n = v ? v->producer : NULL;
	if (!n)
		return v != NULL;
	if (!(n->tags & TAG_BACKWARD) || depth > 4)
		return 0;
	for (uint32_t k = 0; k < n->n_in; k++)
		if (!from_state(n->in[k], depth + 1))
			return 0;
	return 1;
}

/* The loss of a training graph: the forward output whose gradient seed `<loss>_grad` exists. */
static const struct value *training_loss(struct graph *g, const char *name, struct gd_err *e)
{
	const struct value *loss = NULL;
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		const struct value *v = g->outputs[i];
		char seed[512];
		snprintf(seed, sizeof seed, "%s_grad", v->name);
		if (!v->producer || (v->producer->tags & TAG_BACKWARD) || (name && strcmp(v->name, name)))
			continue;
		const struct value *s = strmap_get(&g->names, seed);
		/* the seed is a constant, or (dynamic loss scaling) a copy of the loss_scale state,
		 * weighted by 1/N for replicas */
		int seeded = s && s->producer && from_state(s, 0);
		if (seeded) {
			if (loss) {
				err_set(e, GD_EINPUT, "the training graph has several losses ('%s', '%s'); choose one with --loss",
					loss->name, v->name);
				return NULL;
			}
			loss = v;
		}
	}
	if (!loss)
		err_set(e, GD_EINPUT, name ? "--loss %s: no forward output of that name has a gradient seed '%s_grad'"
					   : "the training graph has no loss: no forward output has a gradient seed '<loss>_grad'",
			name, name);
	return loss;
}

/* Step i of the schedule as node_desc describes the rewritten graph's node i: the node, or its
 * clone <base>_recompute, at position i. */
static const char *step_desc(const struct graph *g, const struct rc_step *s, uint32_t i, char *buf, size_t n)
{
	struct node c = *g->nodes[s->node];
	char name[600];
	if (s->clone)
		c.name = rc_clone_name(&c, s->clone, name, sizeof name);
	c.index = i;
	return node_desc(&c, buf, n);
}

/* Step s recomputes: a clone the schedule adds, or a recompute node of a graph checkpointed
 * already (or by diet variables, step.h). */
static int step_recomputes(const struct graph *g, const struct rc_step *s)
{
	return s->clone || (g->nodes[s->node]->tags & TAG_RECOMPUTE);
}

/* The report's view of the schedule, as the rewrite would make it (a test holds the two equal), so
 * that plan need not apply it: the checkpoints (forward values that a backward node or a clone
 * reads, not recomputed), their steps and bytes, and the runs of clones. `seen` is scratch. */
static int report_schedule(struct graph *g, const struct memmodel *mm, const uint8_t *keep,
			   const struct rc_step *steps, uint32_t n_steps, uint8_t *seen, struct plan_report *r)
{
	const struct flat *f = &mm->f;
	uint32_t *pos = xmalloc(sizeof *pos * (g->n_nodes ? g->n_nodes : 1));
	/* unzeroed: filled as found, and few of a training graph's values are checkpoints */
	r->checkpoints = arena_alloc(g->arena, sizeof *r->checkpoints * (g->n_values ? g->n_values : 1));
	r->checkpoint_steps = arena_alloc(g->arena, sizeof *r->checkpoint_steps * (g->n_values ? g->n_values : 1));
	if (!pos || !r->checkpoints || !r->checkpoint_steps) {
		xfree(pos);
		return -1;
	}
	uint32_t runs = 0;
	for (uint32_t i = 0; i < n_steps; i++) {
		if (!steps[i].clone)
			pos[steps[i].node] = i;
		runs += step_recomputes(g, &steps[i]) && (!i || !step_recomputes(g, &steps[i - 1]));
	}
	memset(seen, 0, g->n_values);
	for (uint32_t i = 0; i < n_steps; i++) {
		const struct node *n = g->nodes[steps[i].node];
		if (!steps[i].clone && node_is_forward(n))
			continue;
		/* a recast (a clone of a Cast, or of a fixed value: a weight's 16-bit copy) reads inputs
		 * and parameters that the step holds anyway: they count as saved where the backward pass
		 * reads them itself */
		int fixed = steps[i].clone && (n->op == OP_CAST || (n->n_out && n->out[0] && rc_forced(f, n->out[0]->id)));
		for (uint32_t k = 0; k < n->n_in; k++) {
			const struct value *v = n->in[k];
			if (value_is_activation(v) && !rc_dropped(f, keep, v->id) && !seen[v->id]) {
				seen[v->id] = 1;
				r->checkpoint_steps[r->n_checkpoints] = pos[v->producer->index];
				r->checkpoints[r->n_checkpoints++] = v->name;
				r->kept_bytes += mm->bytes[v->id];
			} else if (v && !v->producer && !seen[v->id] && !fixed &&
				   (step_recomputes(g, &steps[i]) || (n->tags & TAG_BACKWARD))) {
				seen[v->id] = 1;
				r->saved_bytes += mm->bytes[v->id];
			}
		}
	}
	/* the checkpoints of the backward pass: dropped values of a level of their own that a clone
	 * makes, as --checkpoint list: names them (name@level) */
	for (uint32_t i = 0; i < n_steps; i++) {
		const struct node *n = g->nodes[steps[i].node];
		if (steps[i].clone > r->max_recomputes)
			r->max_recomputes = steps[i].clone;
		for (uint32_t k = 0; steps[i].clone && k < n->n_out; k++) {
			const struct value *v = n->out[k];
			if (!v || !rc_dropped(f, keep, v->id) || rc_level(keep, v->id) == RC_INNER || seen[v->id])
				continue;
			seen[v->id] = 1;
			char name_at[600];
			snprintf(name_at, sizeof name_at, "%s@%u", v->name, rc_level(keep, v->id));
			const char *name = arena_strdup(g->arena, name_at);
			if (!name) {
				xfree(pos);
				return -1;
			}
			r->checkpoint_steps[r->n_checkpoints] = i;
			r->checkpoints[r->n_checkpoints++] = name;
			r->n_inner++;
			r->inner_bytes += mm->bytes[v->id];
			if (rc_level(keep, v->id) > r->levels)
				r->levels = rc_level(keep, v->id);
		}
	}
	xfree(pos);
	r->saved_bytes += r->kept_bytes;
	r->segments = arena_array(g->arena, runs ? runs : 1, sizeof *r->segments);
	if (!r->segments)
		return -1;
	memset(seen, 0, g->n_values); /* once: each segment then clears only the entries it set */
	for (uint32_t i = 0; i < n_steps;) {
		if (!step_recomputes(g, &steps[i])) {
			i++;
			continue;
		}
		struct segment *sg = &r->segments[r->n_segments++];
		memset(sg, 0, sizeof *sg);
		sg->first_step = i;
		uint32_t j = i, reads = 0;
		for (; j < n_steps && step_recomputes(g, &steps[j]); j++)
			reads += g->nodes[steps[j].node]->n_in;
		sg->n_nodes = j - i;
		sg->from = arena_array(g->arena, reads ? reads : 1, sizeof *sg->from);
		char d[300];
		sg->before = j < n_steps ? arena_strdup(g->arena, step_desc(g, &steps[j], j, d, sizeof d)) : "(the end)";
		if (!sg->from || !sg->before)
			return -1;
		for (uint32_t k = i; k < j; k++) {
			const struct node *c = g->nodes[steps[k].node];
			sg->flops += mm->flops[steps[k].node];
			for (uint32_t q = 0; q < c->n_out; q++)
				if (c->out[q])
					sg->bytes += mm->bytes[c->out[q]->id];
			for (uint32_t q = 0; q < c->n_in; q++) {
				const struct value *v = c->in[q];
				if (value_is_activation(v) && !rc_dropped(f, keep, v->id) && !seen[v->id]) {
					seen[v->id] = 1;
					sg->from[sg->n_from++] = v;
					sg->from_bytes += mm->bytes[v->id];
				}
			}
		}
		for (uint32_t k = 0; k < sg->n_from; k++)
			seen[sg->from[k]->id] = 0;
		i = j;
	}
	return 0;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t p;
	return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

/* The schedule's traffic (comm_traffic), and the replicas and shard stage the graph was built
 * for: its metadata, or the collectives' own counts. */
static int plan_replicas(const struct graph *g, const struct memmodel *mm, const struct rc_step *steps, uint32_t n_steps,
			 struct plan_report *r, struct gd_err *e)
{
	struct comm_traffic *t = &r->traffic;
	int64_t most = 0;
	for (uint32_t i = 0; i < n_steps; i++) {
		const struct node *n = g->nodes[steps[i].node];
		enum comm_op op = memsim_comm_op(n);
		if (!op)
			continue;
		int64_t reps = attr_int(n, "replicas", 1); /* (1 .. 2^20: the shapes run's kernels check it) */
		most = reps > most ? reps : most;
		uint64_t bytes = 0, sent = 0, nm1 = (uint64_t)reps - 1;
		for (uint32_t k = 0; op == COMM_ALL_REDUCE && k < n->n_in; k++)
			bytes += n->in[k] ? mm->bytes[n->in[k]->id] : 0;
		for (uint32_t k = 0; op == COMM_REDUCE_SCATTER && k < n->n_out; k++)
			bytes += n->out[k] ? mm->bytes[n->out[k]->id] : 0;
		if (op == COMM_ALL_GATHER && n->n_in && n->in[0])
			bytes = mm->bytes[n->in[0]->id];
		if (op == COMM_ALL_REDUCE)
			sent = mul_sat(2 * nm1, bytes) / (uint64_t)reps;
		else if (op != COMM_SHARD)
			sent = mul_sat(nm1, bytes);
		t->calls[op]++;
		t->by_op[op] = t->by_op[op] + sent < sent ? UINT64_MAX : t->by_op[op] + sent;
		t->sent = t->sent + sent < sent ? UINT64_MAX : t->sent + sent;
	}
	const char *meta = g->model ? model_meta(g, REPLICAS_KEY) : NULL;
	char *end = NULL;
	long long n = meta ? strtoll(meta, &end, 10) : most;
	if (meta && (end == meta || *end || n < 1 || n > INT32_MAX))
		return err_set(e, GD_EINPUT, "metadata %s is '%s', not a number of replicas", REPLICAS_KEY, meta);
	r->replicas = (int)n;
	r->shard = g->model ? model_meta(g, REPLICAS_SHARD_KEY) : NULL;
	if ((r->shard_stage = r->shard ? shard_parse(r->shard) : 0) < 0)
		return err_set(e, GD_EINPUT, "metadata %s is '%s', not optimizer, gradients or parameters", REPLICAS_SHARD_KEY,
			       r->shard);
	return 0;
}

int plan_is_training_graph(const struct graph *g)
{
	/* a training graph already has outputs <param>_grad, or a training step's state bindings */
	int has_grads = 0;
	for (size_t i = 0; g->model && i < g->model->n_ti; i++)
		has_grads |= g->model->ti[i].n_update_bind > 0;
	for (uint32_t i = 0; i < g->n_outputs && !has_grads; i++)
		has_grads = autodiff_param_of(g, g->outputs[i]) != NULL;
	return has_grads;
}

int plan_memory(struct graph *g, const struct plan_opts *o, struct plan_report *r, struct gd_err *e)
{
	memset(r, 0, sizeof *r);
	if (!plan_is_training_graph(g)) {
		static const struct step_opts no_step;
		const struct step_opts *so = o->step ? o->step : &no_step;
		struct autodiff_opts ao = {.loss = o->loss, .params = o->params, .n_params = o->n_params,
					   .freeze = o->freeze, .n_freeze = o->n_freeze};
		struct autodiff_result res;
		if (step_begin(g, so, &ao, e) || autodiff(g, &ao, &res, e) || /* g stays sorted */
		    step_build(g, so, NULL, e))
			return e->code;
		r->built_training = 1;
		r->loss = res.loss;
		r->n_param_elems = res.n_elems + shard_unsliced(g);
		r->buffer_bytes = res.buffer_bytes;
	} else if (!(r->loss = training_loss(g, o->loss, e))) {
		return e->code;
	}
	double t = progress_begin();
	if (find_bottlenecks(g, r->loss, &r->bn, e))
		return e->code;
	progress_end(t, "bottlenecks", "%" PRIu32 " found", r->bn.n);
	xalloc_release(); /* autodiff's and the sweep's tables, before the shapes run's */
	t = progress_begin();
	/* the nodes' FLOPs come with their shapes */
	uint64_t *flops = xmalloc(sizeof *flops * (g->n_nodes ? g->n_nodes : 1));
	struct exec_opts so = {.shapes_only = 1, .dims = o->dims, .n_dims = o->n_dims, .node_flops = flops};
	struct exec *x = flops ? exec_run(g, &so, NULL, e) : NULL;
	if (!x) {
		xfree(flops);
		return flops ? e->code : err_oom(e);
	}
	progress_end(t, "shapes", NULL);
	t = progress_begin();
	struct mem_result m;
	struct memmodel mm;
	int built = memmodel_measure(g, x, &mm, e);
	/* The run's tensors (an rtensor a value: 152 bytes, 608 MB on a 1M-node chain's training
	 * graph) go now, before the model's connectivity and scratch are made beside them: the model
	 * has each value's bytes and each node's FLOPs, all that is weighed from here on, and the
	 * recompute rewrite copies its clones' types from their originals. */
	exec_free(x);
	mm.shapes = NULL;
	if (built || memmodel_finish(g, &mm, e)) {
		xfree(flops);
		return e->code;
	}
	mm.flops = flops; /* the model's now (memmodel_flops) */
	if (memsim_model(&mm, &m, e)) {
		memmodel_free(&mm);
		return e->code;
	}
	progress_end(t, "simulate", "%" PRIu32 " steps", m.n_live);
	r->peak_before = m.peak;
	r->n_before = m.n_live;
	if (!(r->live_before = arena_memdup(g->arena, m.live, sizeof *m.live * (m.n_live ? m.n_live : 1)))) {
		memsim_free(&m);
		memmodel_free(&mm);
		return err_oom(e);
	}
	/* FLOPs: the forward nodes' now, the recomputed ones' from the schedule below */
	const uint64_t *nflops = memmodel_flops(&mm, g, e);
	if (!nflops) {
		memsim_free(&m);
		memmodel_free(&mm);
		return e->code;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (node_is_forward(g->nodes[i]))
			r->forward_flops += nflops[i];
	r->peak_before_node = m.peak_node;
	char pd[300];
	r->peak_before_desc = arena_strdup(g->arena, m.peak_node >= 0 ? node_desc(g->nodes[m.peak_node], pd, sizeof pd)
								      : "(before the first node)");
	/* the schedule: the strategy's, or g's own order */
	uint8_t *keep = NULL;
	struct rc_step *steps = NULL;
	uint32_t n_steps = 0;
	int bad = 0;
	/* `none` keeps every value but fixed ones (rc_forced) and casts of kept ones (ckpt_choose),
	 * which are recomputed; where the backward pass reads none of those, g's own order is the
	 * schedule */
	if (o->ckpt.kind == CKPT_NONE && !(bad = ckpt_choose(g, &mm, &r->bn, &o->ckpt, &keep, NULL, e)) &&
	    !rc_any_dropped(&mm.f, keep)) {
		xfree(keep);
		keep = NULL;
	}
	if (!bad && (keep || o->ckpt.kind != CKPT_NONE)) {
		/* the rewritten graph's simulation is the schedule's (memsim_schedule; a test holds them
		 * equal step by step), so the model is not built again for it */
		t = progress_begin();
		memsim_free(&m);
		if (!keep)
			bad = ckpt_choose(g, &mm, &r->bn, &o->ckpt, &keep, &r->auto_plan, e);
		if (!bad) {
			progress_end(t, "checkpoints", NULL);
			t = progress_begin();
			bad = recompute_schedule(&mm.f, keep, &steps, &n_steps, e) ||
			      memsim_schedule(&mm, keep, steps, n_steps, 1, &m, e);
			if (!bad)
				progress_end(t, "simulate", "%" PRIu32 " steps", m.n_live);
		}
		r->strategy = o->ckpt.kind;
	} else if (!bad && (steps = xmalloc(sizeof *steps * (g->n_nodes ? g->n_nodes : 1)))) {
		for (n_steps = 0; n_steps < g->n_nodes; n_steps++)
			steps[n_steps] = (struct rc_step){n_steps, 0};
	} else if (!bad) {
		bad = err_oom(e);
	}
	uint8_t *seen = bad || o->rewrite_only ? NULL : xmalloc(g->n_values ? g->n_values : 1);
	if (!bad) {
		t = progress_begin();
		r->peak_after = m.peak;
		r->n_after = m.n_live;
		r->live_after = arena_memdup(g->arena, m.live, sizeof *m.live * (m.n_live ? m.n_live : 1));
		r->peak_node = m.peak_node;
		r->at_peak = m.at_peak;
		r->most = m.most;
		/* buffers are initializers, resident throughout: within mm.params and at every step */
		uint64_t buffers = r->buffer_bytes < mm.params ? r->buffer_bytes : mm.params;
		r->param_bytes = mm.params - buffers;
		r->at_peak.params -= buffers;
		r->most.params -= buffers;
		r->state_bytes = mm.state;
		r->peak_param_grads = m.peak_param_grads;
		r->n_nodes = n_steps;
		r->peak_in_recompute = m.peak_node >= 0 && step_recomputes(g, &steps[m.peak_node]);
		char d[300];
		r->peak_node_desc = m.peak_node >= 0 ? arena_strdup(g->arena, step_desc(g, &steps[m.peak_node],
										       (uint32_t)m.peak_node, d, sizeof d))
						     : "(before the first node)";
		for (uint32_t i = 0; i < n_steps; i++)
			if (step_recomputes(g, &steps[i])) {
				r->n_clones += !!steps[i].clone;
				r->recompute_flops += nflops[steps[i].node];
			}
		/* for the timeline: where each node runs, and where backprop begins */
		r->before_at = o->rewrite_only ? NULL : arena_alloc(g->arena, sizeof *r->before_at * (g->n_nodes ? g->n_nodes : 1));
		/* backprop begins after the last forward node (a gradient that reads weights alone, such as
		 * a transposed weight, may be scheduled earlier: it does not move the boundary) */
		r->backward_step = 0;
		for (uint32_t i = n_steps; i-- > 0;) {
			if (r->before_at && !steps[i].clone)
				r->before_at[steps[i].node] = i;
			if (!steps[i].clone && node_is_forward(g->nodes[steps[i].node]) && !r->backward_step)
				r->backward_step = i + 1;
		}
		if (!o->rewrite_only && plan_replicas(g, &mm, steps, n_steps, r, e))
			bad = e->code;
		else if (!r->live_after || !r->peak_node_desc || (!o->rewrite_only && !r->before_at) ||
		    (!o->rewrite_only && (!seen || report_schedule(g, &mm, keep, steps, n_steps, seen, r))))
			bad = err_oom(e);
		else
			progress_end(t, "report", NULL);
	}
	/* the rewrite itself, unless only its report is wanted (plan, check) */
	if (!bad && keep && !o->report_only) {
		struct recompute_stats st;
		t = progress_begin();
		if (!(bad = recompute_apply(g, &mm.f, keep, steps, n_steps, NULL, &st, e)))
			progress_end(t, "recompute", "%" PRIu32 " clones", st.n_clones);
	}
	xfree(seen);
	xfree(keep);
	xfree(steps);
	memmodel_free(&mm);
	if (bad) {
		memsim_free(&m);
		return e->code;
	}
	r->has_budget = o->has_budget;
	r->budget = o->budget;
	r->fits = !o->has_budget || r->peak_after <= o->budget;
	memsim_free(&m);
	return 0;
}
