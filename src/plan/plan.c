/* plan.c - see plan.h. */
#include "plan.h"
#include "../autodiff/ad.h"
#include "../rewrite/recompute.h"
#include "../util/progress.h"
#include "../util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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
		if (s && s->producer && (s->producer->tags & TAG_BACKWARD) && !s->producer->n_in) {
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

/* The recompute segments of the rewritten schedule; `seen` is scratch (g->n_values bytes). */
static int segments(struct graph *g, const struct exec *x, uint8_t *seen, struct plan_report *r)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		n += (g->nodes[i]->tags & TAG_RECOMPUTE) && (!i || !(g->nodes[i - 1]->tags & TAG_RECOMPUTE));
	r->segments = arena_array(g->arena, n ? n : 1, sizeof *r->segments);
	if (!r->segments)
		return -1;
	for (uint32_t i = 0; i < g->n_nodes;) {
		if (!(g->nodes[i]->tags & TAG_RECOMPUTE)) {
			i++;
			continue;
		}
		struct segment *s = &r->segments[r->n_segments++];
		memset(s, 0, sizeof *s);
		s->first_step = i;
		uint32_t j = i, reads = 0;
		for (; j < g->n_nodes && (g->nodes[j]->tags & TAG_RECOMPUTE); j++)
			reads += g->nodes[j]->n_in;
		s->n_nodes = j - i;
		s->from = arena_array(g->arena, reads ? reads : 1, sizeof *s->from);
		char d[300];
		s->before = j < g->n_nodes ? arena_strdup(g->arena, node_desc(g->nodes[j], d, sizeof d)) : "(the end)";
		if (!s->from || !s->before)
			return -1;
		memset(seen, 0, g->n_values);
		for (uint32_t k = i; k < j; k++) {
			const struct node *c = g->nodes[k];
			s->flops += node_flops(c, x);
			for (uint32_t q = 0; q < c->n_out; q++)
				if (c->out[q])
					s->bytes += exec_value(x, c->out[q])->nbytes;
			for (uint32_t q = 0; q < c->n_in; q++) {
				const struct value *v = c->in[q];
				if (value_is_activation(v) && !seen[v->id]) {
					seen[v->id] = 1;
					s->from[s->n_from++] = v;
					s->from_bytes += exec_value(x, v)->nbytes;
				}
			}
		}
		i = j;
	}
	return 0;
}

int plan_memory(struct graph *g, const struct plan_opts *o, struct plan_report *r, struct gd_err *e)
{
	memset(r, 0, sizeof *r);
	/* a training graph already has outputs <param>_grad */
	int has_grads = 0;
	for (uint32_t i = 0; i < g->n_outputs && !has_grads; i++) {
		const char *nm = g->outputs[i]->name;
		size_t len = strlen(nm);
		if (len > 5 && !strcmp(nm + len - 5, "_grad")) {
			char base[512];
			snprintf(base, sizeof base, "%.*s", (int)(len - 5), nm);
			const struct value *p = strmap_get(&g->names, base);
			has_grads = p && p->init;
		}
	}
	if (!has_grads) {
		struct autodiff_opts ao = {.loss = o->loss};
		struct autodiff_result res;
		if (autodiff(g, &ao, &res, e)) /* it leaves g sorted */
			return e->code;
		r->built_training = 1;
		r->loss = res.loss;
	} else if (!(r->loss = training_loss(g, o->loss, e))) {
		return e->code;
	}
	double t = progress_begin();
	if (find_bottlenecks(g, r->loss, &r->bn, e))
		return e->code;
	progress_end(t, "bottlenecks", "%" PRIu32 " found", r->bn.n);
	t = progress_begin();
	struct exec_opts so = {.shapes_only = 1, .dims = o->dims, .n_dims = o->n_dims};
	struct exec *x = exec_run(g, &so, NULL, e);
	if (!x)
		return e->code;
	progress_end(t, "shapes", NULL);
	t = progress_begin();
	struct mem_result m;
	struct memmodel mm;
	if (memmodel_build(g, x, &mm, e)) {
		exec_free(x);
		return e->code;
	}
	if (memsim_model(&mm, &m, e)) {
		memmodel_free(&mm);
		exec_free(x);
		return e->code;
	}
	progress_end(t, "simulate", "%" PRIu32 " steps", m.n_live);
	r->peak_before = m.peak;
	r->n_before = m.n_live;
	if (!(r->live_before = arena_memdup(g->arena, m.live, sizeof *m.live * (m.n_live ? m.n_live : 1)))) {
		memsim_free(&m);
		memmodel_free(&mm);
		exec_free(x);
		return err_oom(e);
	}
	/* FLOPs: the forward nodes' now, the recomputed ones' from the schedule below */
	const uint64_t *nflops = memmodel_flops(&mm, g, e);
	if (!nflops) {
		memsim_free(&m);
		memmodel_free(&mm);
		exec_free(x);
		return e->code;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (node_is_forward(g->nodes[i]))
			r->forward_flops += nflops[i];
	r->peak_before_node = m.peak_node;
	char pd[300];
	r->peak_before_desc = arena_strdup(g->arena, m.peak_node >= 0 ? node_desc(g->nodes[m.peak_node], pd, sizeof pd)
								      : "(before the first node)");
	if (o->ckpt.kind != CKPT_NONE) {
		/* the rewritten graph's simulation is the schedule's (memsim_schedule; a test holds them
		 * equal step by step), so the model is not built again for it */
		uint8_t *keep = NULL;
		struct rc_step *steps = NULL;
		uint32_t n_steps = 0;
		struct recompute_stats st;
		t = progress_begin();
		memsim_free(&m);
		int bad = ckpt_choose(g, &mm, &r->bn, &o->ckpt, &keep, &r->auto_plan, e);
		if (!bad) {
			progress_end(t, "checkpoints", NULL);
			t = progress_begin();
			bad = recompute_schedule(&mm.f, keep, &steps, &n_steps, e) ||
			      memsim_schedule(&mm, keep, steps, n_steps, 1, &m, e);
			for (uint32_t i = 0; !bad && i < n_steps; i++)
				if (steps[i].clone)
					r->recompute_flops += nflops[steps[i].node];
			if (!bad)
				progress_end(t, "simulate", "%" PRIu32 " steps", m.n_live);
		}
		if (!bad) {
			t = progress_begin();
			bad = recompute_apply(g, &mm.f, keep, steps, n_steps, x, &st, e);
		}
		xfree(keep);
		xfree(steps);
		memmodel_free(&mm);
		if (bad) {
			memsim_free(&m);
			exec_free(x);
			return e->code;
		}
		progress_end(t, "recompute", "%" PRIu32 " clones", st.n_clones);
		r->n_clones = st.n_clones;
		r->strategy = o->ckpt.kind;
	} else {
		memmodel_free(&mm);
	}
	t = progress_begin();
	r->peak_after = m.peak;
	r->n_after = m.n_live;
	r->live_after = arena_memdup(g->arena, m.live, sizeof *m.live * (m.n_live ? m.n_live : 1));
	r->peak_node = m.peak_node;
	r->at_peak = m.at_peak;
	r->n_nodes = g->n_nodes;
	char d[300];
	r->peak_node_desc = m.peak_node >= 0 ? arena_strdup(g->arena, node_desc(g->nodes[m.peak_node], d, sizeof d))
					     : "(before the first node)";
	/* the checkpoints: forward values the backward pass (or a recompute) reads */
	r->checkpoints = arena_array(g->arena, g->n_values ? g->n_values : 1, sizeof *r->checkpoints);
	uint8_t *seen = xcalloc(g->n_values ? g->n_values : 1, 1);
	if (!r->checkpoints || !seen || !r->peak_node_desc || !r->live_after) {
		xfree(seen);
		memsim_free(&m);
		exec_free(x);
		return err_oom(e);
	}
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		if (!node_is_forward(n))
			for (uint32_t k = 0; k < n->n_in; k++) {
				const struct value *v = n->in[k];
				if (value_is_activation(v) && !seen[v->id]) {
					seen[v->id] = 1;
					r->checkpoints[r->n_checkpoints++] = v->name;
					r->kept_bytes += exec_value(x, v)->nbytes;
				}
			}
	}
	r->peak_in_recompute = m.peak_node >= 0 && (g->nodes[m.peak_node]->tags & TAG_RECOMPUTE);
	progress_end(t, "report", NULL);
	int rc = segments(g, x, seen, r);
	xfree(seen);
	if (rc) {
		memsim_free(&m);
		exec_free(x);
		return err_oom(e);
	}
	r->has_budget = o->has_budget;
	r->budget = o->budget;
	r->fits = !o->has_budget || r->peak_after <= o->budget;
	memsim_free(&m);
	exec_free(x);
	return 0;
}
