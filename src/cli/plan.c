/* plan.c - `graphdiet plan` and `graphdiet check`: training memory, without rewriting anything. */
#include "../io/names.h"
#include "../rewrite/step.h"
#include "../io/svg.h"
#include "../util/fileio.h"
#include "../util/xalloc.h"
#include "../plan/plan.h"
#include "../util/emit.h"
#include "../util/size.h"
#include "../rewrite/fold.h"
#include "../rewrite/loss.h"
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What plan and check build the training graph with, as train does. */
#define TRAINING_STEP_HELP                                                                                     \
	"      --loss NAME       the loss, when the model has several scalar outputs (with\n" \
	"                        --loss-fn: the prediction)\n" \
	"      --loss-fn FN      plan with a loss appended to a model that has none: mse or\n" \
	"                        cross-entropy, as graphdiet-train(1); --target NAME as there\n" \
	"      --target NAME     the graph input --loss-fn adds for the targets (default: target)\n" \
	"      --params NAMES    train only these initializers, as graphdiet-train(1)\n" \
	"      --freeze NAMES    train every floating-point initializer but these (a RoPE table or a\n" \
	"                        float mask the loss reads through a product is not told from a\n" \
	"                        weight: freeze it, and it holds no gradient or optimizer state)\n" \
	"      --precision P     plan the training graph in mixed precision: fp32 (default), fp16 or\n" \
	"                        bf16 (see graphdiet-train(1)); --keep-fp32 OPS as there\n" \
	"      --keep-fp32 OPS   op types to leave in float32 under --precision\n" \
	"      --optimizer O     count the optimizer's state and update: sgd[:momentum=M] or adam\n" \
	"      --loss-scale L    fixed:S or dynamic[:...], as graphdiet-train(1)\n" \
	"      --clip-grad-norm X  gradient clipping, as graphdiet-train(1)\n" \
	"      --diet[:...]      diet variables, as graphdiet-train(1)\n" \
	"      --diet-params NAMES  which parameters are diet variables, as graphdiet-train(1)\n" \
	"      --replicas N      plan one of N data-parallel replicas (its batch is what --dim binds):\n" \
	"                        the figures are per replica, with its communication buffers and the\n" \
	"                        bytes it sends per step, by collective\n" \
	"      --bucket-bytes SIZE, --loss-reduction mean|sum, --sync-batchnorm  with --replicas,\n" \
	"                        as graphdiet-train(1)\n" \
	"      --shard STAGE     with --replicas: plan one replica of ZeRO's sharding, optimizer,\n" \
	"                        gradients or parameters (stages 1-3), as graphdiet-train(1)\n"

static const char plan_help[] =
	"usage: graphdiet plan [options] MODEL\n"
	"\n"
	"Reports how much memory training MODEL takes: the peak of live tensors over one training step\n"
	"(forward and backward), where in the schedule it occurs, and what it holds (parameters,\n"
	"gradients, activations), and the bytes per parameter (parameters, optimizer state and the most\n"
	"parameter-gradient bytes live at once). MODEL may be a model (its training graph is built) or a\n"
	"training graph.\n"
	"Nothing is written.\n"
	"\n"
	"options:\n"
	"      --checkpoint S    activation checkpointing strategy: none (keep every activation), speed\n"
	"                        (keep MatMul, Gemm and Conv outputs), memory (about sqrt(N) bottlenecks),\n"
	"                        auto (the fewest recompute FLOPs within --budget) or list:NAME,NAME\n"
	"                        (these tensors; NAME@2, NAME@3...: kept by the backward pass's\n"
	"                        recompute, a Revolve-style level); the rest is recomputed\n"
	"      --checkpoint-file F  keep the tensors a YAML file lists (a list, or the checkpoints: of\n"
	"                        what plan --format yaml printed)\n"
	"      --timeline FILE   draw live memory over the schedule, before and after checkpointing,\n"
	"                        with the recompute segments, checkpoints and budget, as SVG; with\n"
	"                        FILE '-' the SVG goes to standard output and the report to standard\n"
	"                        error (one thing per stream)\n"
	"      --explain[=all]   say why: the bottleneck tensors found, what bypasses the others (a\n"
	"                        count and the first few; =all: every one), the recompute segments\n"
	"      --budget SIZE     a memory budget: 8GiB, 500MB or bytes; reports whether the peak fits\n"
	"      --dim NAME=VALUE  bind a symbolic dimension (repeatable; all must be bound; NAME must be\n"
	"                        one of the graph's)\n"
	"      --batch N         plan at batch N: axis 0 of the data inputs, also in a static export\n"
	TRAINING_STEP_HELP
	"      --format FMT      text (default), json or yaml\n"
	"      --from FORMAT     input format: onnx or yaml\n"
	"      --base-dir DIR    the folder the model's data files are in (needed for one read from -)\n"
	"  -h, --help            show this help\n";

static const char check_help[] =
	"usage: graphdiet check [options] --budget SIZE MODEL\n"
	"\n"
	"A CI gate: prints one line saying whether training MODEL fits in SIZE bytes, with the peak and\n"
	"the budget (--format json or yaml: plan's report, whose \"fits\" is the verdict). Exit 0 if it\n"
	"fits, 1 if it is over budget, 2 on bad input.\n"
	"\n"
	"options:\n"
	"      --budget SIZE     the budget: 8GiB, 500MB or bytes (required)\n"
	"      --checkpoint S    activation checkpointing strategy: none, speed, memory, auto or\n"
	"                        list:NAME,...; auto plans for the budget\n"
	"      --checkpoint-file F  keep the tensors a YAML file lists\n"
	"      --dim NAME=VALUE  bind a symbolic dimension (repeatable)\n"
	"      --batch N         at batch N: axis 0 of the data inputs, also in a static export\n"
	TRAINING_STEP_HELP
	"      --format FMT      text (one line; default), json or yaml (as graphdiet plan's)\n"
	"      --from FORMAT     input format: onnx or yaml\n"
	"      --base-dir DIR    the folder the model's data files are in (needed for one read from -)\n"
	"  -h, --help            show this help\n";

static void breakdown(struct emit *em, const struct mem_breakdown *b, uint64_t buffers)
{
	emit_obj_begin(em);
	emit_key(em, "params");
	emit_uint(em, b->params);
	emit_key(em, "buffers");
	emit_uint(em, buffers);
	emit_key(em, "optimizer_state");
	emit_uint(em, b->opt_state);
	emit_key(em, "gradients");
	emit_uint(em, b->grads);
	emit_key(em, "activations");
	emit_uint(em, b->activations);
	emit_key(em, "param_gradients");
	emit_uint(em, b->param_grads);
	emit_key(em, "comm_buffers");
	emit_uint(em, b->comm);
	emit_obj_end(em);
}

static const char *const comm_names[COMM_OPS] = {NULL, "AllReduce", "ReduceScatter", "AllGather", "Shard"};

/* "replicas": how many, the shard stage and each replica's traffic per step. */
static void replicas_structured(struct emit *em, const struct plan_report *r)
{
	emit_obj_begin(em);
	emit_key(em, "n");
	emit_int(em, r->replicas);
	emit_key(em, "shard");
	if (r->shard)
		emit_str(em, r->shard);
	else
		emit_null(em);
	emit_key(em, "zero_stage");
	emit_int(em, r->shard_stage);
	emit_key(em, "sent_bytes");
	emit_uint(em, r->traffic.sent);
	emit_key(em, "by_op");
	emit_obj_begin(em);
	for (int k = COMM_ALL_REDUCE; k < COMM_OPS; k++) {
		if (!r->traffic.calls[k])
			continue;
		emit_key(em, comm_names[k]);
		emit_obj_begin(em);
		emit_key(em, "calls");
		emit_uint(em, r->traffic.calls[k]);
		emit_key(em, "sent_bytes");
		emit_uint(em, r->traffic.by_op[k]);
		emit_obj_end(em);
	}
	emit_obj_end(em);
	emit_obj_end(em);
}

static double per_param(const struct plan_report *r, uint64_t bytes)
{
	return (double)bytes / (double)r->n_param_elems;
}

static void per_param_structured(struct emit *em, const struct plan_report *r)
{
	if (!r->n_param_elems) {
		emit_null(em);
		return;
	}
	emit_obj_begin(em);
	emit_key(em, "parameters");
	emit_uint(em, r->n_param_elems);
	emit_key(em, "param_bytes");
	emit_uint(em, r->param_bytes);
	emit_key(em, "optimizer_state_bytes");
	emit_uint(em, r->state_bytes);
	emit_key(em, "peak_param_gradient_bytes");
	emit_uint(em, r->peak_param_grads);
	emit_key(em, "bytes_per_param");
	emit_double(em, per_param(r, r->param_bytes + r->state_bytes + r->peak_param_grads));
	emit_obj_end(em);
}

static void report_structured(FILE *f, const char *path, const struct plan_report *r, int yaml)
{
	struct emit em;
	emit_init(&em, f, yaml);
	emit_obj_begin(&em);
	emit_key(&em, "model");
	emit_str(&em, path);
	emit_key(&em, "checkpoint");
	emit_str(&em, ckpt_name(r->strategy));
	emit_key(&em, "peak_bytes_before");
	emit_uint(&em, r->peak_before);
	emit_key(&em, "peak_bytes_after");
	emit_uint(&em, r->peak_after);
	emit_key(&em, "peak_at");
	emit_str(&em, r->peak_node_desc);
	emit_key(&em, "peak_step");
	emit_int(&em, r->peak_node + 1); /* 1-based, as the text's "step S of N" */
	emit_key(&em, "steps");
	emit_uint(&em, r->n_nodes);
	emit_key(&em, "breakdown");
	breakdown(&em, &r->at_peak, r->buffer_bytes);
	emit_key(&em, "most_live");
	breakdown(&em, &r->most, r->buffer_bytes);
	emit_key(&em, "per_param");
	per_param_structured(&em, r);
	emit_key(&em, "replicas");
	if (r->replicas)
		replicas_structured(&em, r);
	else
		emit_null(&em); /* no replicas */
	emit_key(&em, "forward_flops");
	emit_uint(&em, r->forward_flops);
	emit_key(&em, "recompute_flops");
	emit_uint(&em, r->recompute_flops);
	emit_key(&em, "budget_bytes");
	if (r->has_budget)
		emit_uint(&em, r->budget);
	else
		emit_null(&em);
	emit_key(&em, "fits");
	if (r->has_budget)
		emit_bool(&em, r->fits);
	else
		emit_null(&em);
	emit_key(&em, "auto");
	if (r->strategy == CKPT_AUTO) {
		emit_obj_begin(&em);
		emit_key(&em, "feasible");
		emit_bool(&em, r->auto_plan.fits);
		emit_key(&em, "lower_bound_bytes");
		emit_uint(&em, r->auto_plan.lower_bound);
		emit_key(&em, "plans_weighed");
		emit_uint(&em, r->auto_plan.n_plans);
		emit_key(&em, "cut_positions");
		emit_uint(&em, r->auto_plan.n_cuts);
		emit_key(&em, "annealed_plans");
		emit_uint(&em, r->auto_plan.annealed);
		emit_key(&em, "optimal");
		emit_bool(&em, r->auto_plan.proved != 0);
		emit_key(&em, "space");
		if (r->auto_plan.proved == AUTO_CHAIN)
			emit_str(&em, "chain_levels");
		else if (r->auto_plan.proved == AUTO_KEPT)
			emit_str(&em, "kept_sets");
		else if (r->auto_plan.proved == AUTO_ALL)
			emit_str(&em, "all_plans");
		else
			emit_null(&em);
		emit_key(&em, "chain_stages");
		emit_uint(&em, r->auto_plan.chain);
		emit_key(&em, "levels");
		emit_uint(&em, r->auto_plan.levels);
		emit_obj_end(&em);
	} else {
		emit_null(&em);
	}
	emit_key(&em, "loss");
	emit_str(&em, r->loss->name);
	emit_key(&em, "bottlenecks");
	emit_arr_begin(&em);
	for (uint32_t i = 0; i < r->bn.n; i++)
		emit_str(&em, r->bn.v[i]->name);
	emit_arr_end(&em);
	emit_key(&em, "checkpoints");
	emit_arr_begin(&em);
	for (size_t i = 0; i < r->n_checkpoints; i++)
		emit_str(&em, r->checkpoints[i]);
	emit_arr_end(&em);
	emit_key(&em, "kept_bytes");
	emit_uint(&em, r->kept_bytes);
	emit_key(&em, "levels");
	emit_uint(&em, r->levels ? r->levels : 1);
	emit_key(&em, "most_recomputes");
	emit_uint(&em, r->max_recomputes);
	emit_key(&em, "saved_bytes");
	emit_uint(&em, r->saved_bytes);
	emit_obj_end(&em);
}

/* --explain: each candidate, kept as a bottleneck or with the edge of a path that avoids it. The
 * bypassed ones are most of a deep model's candidates (409 of 453 lines on a 12-layer GPT): a count
 * and the first few, unless all (--explain=all). */
enum { BYPASSED_SHOWN = 5 };

static void explain_bottlenecks(FILE *f, const struct plan_report *r, int all)
{
	const struct bottlenecks *b = &r->bn;
	uint32_t n_bypassed = b->n_cand - b->n, shown = 0;
	fprintf(f, "bottlenecks: %u of %u forward tensors on paths from the inputs to '%s' split the forward pass in two\n", b->n,
	       b->n_cand, r->loss->name);
	for (uint32_t i = 0; i < b->n_cand; i++) {
		const struct bypass *w = &b->why[i];
		char d[300];
		if (w->node && !all && shown++ >= BYPASSED_SHOWN)
			continue;
		if (!w->node)
			fprintf(f, "  %-24s bottleneck\n", b->cand[i]->name);
		else if (!w->into_node)
			fprintf(f, "  %-24s bypassed: %s also outputs '%s'\n", b->cand[i]->name, node_desc(w->node, d, sizeof d),
			       w->value->name);
		else if (w->value)
			fprintf(f, "  %-24s bypassed: %s reads '%s', made before it\n", b->cand[i]->name,
			       node_desc(w->node, d, sizeof d), w->value->name);
		else
			fprintf(f, "  %-24s bypassed: %s reads enclosing values from its subgraphs\n", b->cand[i]->name,
			       node_desc(w->node, d, sizeof d));
	}
	if (!all && n_bypassed > BYPASSED_SHOWN)
		fprintf(f, "  ... and %u more bypassed (--explain=all lists every one)\n", n_bypassed - BYPASSED_SHOWN);
}

/* --explain, after the bottlenecks: what each recompute segment costs and what it is fed from,
 * what is kept, and where the peak is before and after. */
void plan_explain(FILE *f, const struct plan_report *r, int all)
{
	char a[32], b[32];
	explain_bottlenecks(f, r, all);
	fprintf(f, "kept: %zu activations the backward pass reads, %s\n", r->n_checkpoints - r->n_inner,
		size_format(r->kept_bytes, a, sizeof a));
	if (r->n_inner) {
		fprintf(f, "kept in the backward pass: %zu activations, %s, made by recomputing and kept while the "
			   "backward pass before them runs (level%s %u; a node is recomputed up to %u times)\n",
			r->n_inner, size_format(r->inner_bytes, a, sizeof a), r->levels > 2 ? "s 2 to" : "", r->levels,
			r->max_recomputes);
		for (size_t i = r->n_checkpoints - r->n_inner; i < r->n_checkpoints; i++)
			fprintf(f, "  %-24s made at step %u\n", r->checkpoints[i], r->checkpoint_steps[i] + 1);
	}
	if (r->n_segments) {
		fprintf(f, "recomputed: %u segments, each rebuilt when backprop reaches it\n", r->n_segments);
		for (uint32_t i = 0; i < r->n_segments; i++) {
			const struct segment *s = &r->segments[i];
			if (!all && i == 40 && r->n_segments > 50) {
				fprintf(f, "  ... %u more\n", r->n_segments - 40);
				break;
			}
			fprintf(f, "  #%u at step %u, for %s: %u nodes, %s, %.3g FLOPs, from ", i + 1, s->first_step + 1,
				s->before, s->n_nodes, size_format(s->bytes, a, sizeof a), (double)s->flops);
			if (!s->n_from)
				fprintf(f, "no kept activation (inputs, parameters or earlier recomputes)");
			else
				fprintf(f, "%u kept (%s):", s->n_from, size_format(s->from_bytes, b, sizeof b));
			for (uint32_t k = 0; k < s->n_from && k < 4; k++)
				fprintf(f, "%s %s", k ? "," : "", s->from[k]->name);
			fprintf(f, "%s\n", s->n_from > 4 ? ", ..." : "");
		}
	} else {
		fprintf(f, "recomputed: nothing\n");
	}
	fprintf(f, "peak before: %s at %s, step %" PRId64 "\n", size_format(r->peak_before, a, sizeof a), r->peak_before_desc,
		r->peak_before_node + 1);
	fprintf(f, "peak after:  %s at %s, step %" PRId64 "%s\n", size_format(r->peak_after, a, sizeof a), r->peak_node_desc,
		r->peak_node + 1, r->peak_in_recompute ? " (while recomputing a segment)" : "");
}

/* How auto's answer was found, and what is proved of it. */
static void explain_auto(FILE *f, const struct auto_result *a, uint64_t budget)
{
	char b[32], l[32], lb[32];
	const char *how = a->chain && a->proved == AUTO_CHAIN ? "" : a->searched ? ", then local search"
											: ", a search down the ladder on a large graph";
	if (a->chain && a->proved == AUTO_CHAIN)
		fprintf(f, "auto:        %u plans weighed exactly (an exact DP over the chain's %u stage boundaries)\n",
			a->n_plans, a->chain);
	else if (a->annealed)
		fprintf(f, "auto:        %u plans weighed exactly (a DP over %u cut positions%s), then %u more by an annealing "
			   "sweep over levels\n", a->n_plans, a->n_cuts, how, a->annealed);
	else
		fprintf(f, "auto:        %u plans weighed exactly (a DP over %u cut positions%s)\n", a->n_plans, a->n_cuts, how);
	if (a->fits && a->proved == AUTO_CHAIN)
		fprintf(f, "             optimal over every plan on those boundaries, backward checkpoints at any level "
			   "(deepest used: %u): proved by the DP, whose peak and FLOPs the weighing matched\n", a->levels);
	else if (a->fits && a->proved == AUTO_ALL)
		fprintf(f, "             optimal: it recomputes no more than keeping every activation does\n");
	else if (a->fits && a->proved == AUTO_KEPT)
		fprintf(f, "             optimal over kept sets of its %u activations: no plan without backward checkpoints "
			   "fits with fewer FLOPs (a best-first search proved it)\n", a->kept_cands);
	else if (a->fits)
		fprintf(f, "             heuristic: not proved optimal (%s%s%s)\n",
			a->no_chain ? a->no_chain : "too large for the exact searches",
			a->kept_cands ? "; the search over kept sets" : "",
			a->kept_cands ? (a->proved ? "" : " ran out of weighs") : "");
	if (a->fits)
		return;
	if (a->proved == AUTO_CHAIN)
		fprintf(f, "             infeasible: no plan on the chain's %u stage boundaries fits %s: their least peak is %s "
			   "(proved by the DP); no plan's peak can be below %s\n", a->chain, size_format(budget, b, sizeof b),
			size_format(a->chain_least, l, sizeof l), size_format(a->lower_bound, lb, sizeof lb));
	else
		fprintf(f, "             infeasible: no plan found fits %s%s; the lowest peak found is shown; no plan's peak "
			   "can be below %s\n", size_format(budget, b, sizeof b),
			a->no_kept_set ? " (no kept set fits: proved by a search; plans with backward checkpoints were "
					 "searched, not proved)" : "", size_format(a->lower_bound, l, sizeof l));
}

/* "replicas: 8, shard: parameters (ZeRO stage 3)" */
static void replicas_text(FILE *f, const struct plan_report *r)
{
	static const char *const stage[] = {"none (every replica holds every parameter, gradient and optimizer moment)",
					    "optimizer (ZeRO stage 1)", "gradients (ZeRO stage 2)",
					    "parameters (ZeRO stage 3)"};
	fprintf(f, "replicas:    %d, shard: %s; figures per replica\n", r->replicas, stage[r->shard_stage]);
}

/* "traffic: 1.2 GiB sent per replica per step: AllReduce 0.9 GiB (3 calls), ..." */
static void traffic_text(FILE *f, const struct plan_report *r)
{
	char a[32];
	const struct comm_traffic *t = &r->traffic;
	fprintf(f, "traffic:     %s (%" PRIu64 " bytes) sent per replica per step", size_format(t->sent, a, sizeof a), t->sent);
	const char *sep = ": ";
	for (int k = COMM_ALL_REDUCE; k < COMM_OPS; k++) {
		if (!t->calls[k] || k == COMM_SHARD) /* a Shard sends nothing */
			continue;
		fprintf(f, "%s%s %s (%" PRIu64 " call%s)", sep, comm_names[k], size_format(t->by_op[k], a, sizeof a),
			t->calls[k], t->calls[k] == 1 ? "" : "s");
		sep = ", ";
	}
	fprintf(f, "\n");
}

static void report_text(FILE *f, const char *path, const struct plan_report *r, int explain)
{
	char a[32], b[32], c[32], d[32], g[32];
	fprintf(f, "model:       %s%s\n", strcmp(path, "-") ? path : "<stdin>",
	       r->built_training ? " (training graph built)" : " (a training graph)");
	if (r->replicas)
		replicas_text(f, r);
	fprintf(f, "peak:        %s (%" PRIu64 " bytes)%s at %s, step %" PRId64 " of %u\n", size_format(r->peak_after, a, sizeof a),
	       r->peak_after, r->replicas > 1 ? " per replica" : "", r->peak_node_desc, r->peak_node + 1, r->n_nodes);
	fprintf(f, "  params       %s\n", size_format(r->at_peak.params, a, sizeof a));
	if (r->buffer_bytes)
		fprintf(f, "  buffers      %s (initializers that take no gradient)\n", size_format(r->buffer_bytes, a, sizeof a));
	fprintf(f, "  gradients    %s\n", size_format(r->at_peak.grads, a, sizeof a));
	fprintf(f, "  activations  %s\n", size_format(r->at_peak.activations, a, sizeof a));
	fprintf(f, "  optimizer    %s\n", size_format(r->at_peak.opt_state, a, sizeof a));
	if (r->replicas || r->most.comm)
		fprintf(f, "  comm buffers %s (collectives' outputs: parameters gathered from their shards, ...)\n",
			size_format(r->at_peak.comm, a, sizeof a));
	if (r->n_param_elems)
		fprintf(f, "per param:   %.2f bytes: params %.2f + optimizer %.2f + gradients %.2f (the most live at once), "
		       "over %" PRIu64 " parameters\n",
		       per_param(r, r->param_bytes + r->state_bytes + r->peak_param_grads), per_param(r, r->param_bytes),
		       per_param(r, r->state_bytes), per_param(r, r->peak_param_grads), r->n_param_elems);
	if (r->replicas) {
		fprintf(f, "resident:    params %s, optimizer %s; the most live at once: gradients %s, activations %s, "
			   "comm buffers %s\n", size_format(r->param_bytes, a, sizeof a),
			size_format(r->state_bytes, b, sizeof b), size_format(r->most.grads, c, sizeof c),
			size_format(r->most.activations, d, sizeof d), size_format(r->most.comm, g, sizeof g));
		traffic_text(f, r);
	}
	if (r->strategy == CKPT_NONE && !r->recompute_flops && !r->n_segments) {
		fprintf(f, "checkpoint:  none: all %zu activations the backward pass reads are kept, %s\n", r->n_checkpoints,
		       size_format(r->kept_bytes, a, sizeof a));
		fprintf(f, "compute:     %.3g forward FLOPs, no recompute\n", (double)r->forward_flops);
	} else if (r->strategy == CKPT_NONE) { /* a training graph checkpointed already */
		fprintf(f, "checkpoint:  in the graph: %zu activations kept (%s), %u recompute segments\n", r->n_checkpoints,
		       size_format(r->kept_bytes, a, sizeof a), r->n_segments);
		fprintf(f, "compute:     %.3g forward FLOPs, %.3g recomputed (%.1f%%)\n", (double)r->forward_flops,
		       (double)r->recompute_flops, r->forward_flops ? 100.0 * (double)r->recompute_flops / (double)r->forward_flops : 0);
	} else {
		char k[32], in[96] = "";
		if (r->n_inner)
			snprintf(in, sizeof in, ", %zu more in the backward pass (level%s %u)", r->n_inner,
				 r->levels > 2 ? "s 2 to" : "", r->levels);
		fprintf(f, "checkpoint:  %s: %zu activations kept (%s)%s, %u nodes recomputed; peak before %s\n",
		       ckpt_name(r->strategy), r->n_checkpoints - r->n_inner, size_format(r->kept_bytes, k, sizeof k), in,
		       r->n_clones, size_format(r->peak_before, a, sizeof a));
		fprintf(f, "compute:     %.3g forward FLOPs, %.3g recomputed (%.1f%%)\n", (double)r->forward_flops,
		       (double)r->recompute_flops, r->forward_flops ? 100.0 * (double)r->recompute_flops / (double)r->forward_flops : 0);
	}
	if (explain) {
		plan_explain(f, r, explain > 1);
	} else {
		fprintf(f, "bottlenecks: %u", r->bn.n);
		for (uint32_t i = 0; i < r->bn.n && i < 6; i++)
			fprintf(f, "%s%s", i ? ", " : ": ", r->bn.v[i]->name);
		fprintf(f, "%s\n", r->bn.n > 6 ? ", ... (--explain lists all)" : "");
	}
	if (r->strategy == CKPT_AUTO)
		explain_auto(f, &r->auto_plan, r->budget);
	if (r->has_budget)
		fprintf(f, "budget:      %s: %s\n", size_format(r->budget, b, sizeof b), r->fits ? "fits" : "OVER BUDGET");
}

/* --timeline: live bytes over the schedule before and after, as SVG, written atomically. */
static int write_timeline(const char *out, const char *model, const struct plan_report *r,
			  struct gd_err *e)
{
	uint32_t *marks = xcalloc(r->n_checkpoints + 1, sizeof *marks);
	uint32_t *first = xcalloc(r->n_segments + 1, sizeof *first), *len = xcalloc(r->n_segments + 1, sizeof *len);
	if (!marks || !first || !len) {
		xfree(marks);
		xfree(first);
		xfree(len);
		return err_oom(e);
	}
	for (size_t i = 0; i < r->n_checkpoints; i++)
		marks[i] = r->checkpoint_steps[i];
	for (uint32_t i = 0; i < r->n_segments; i++) {
		first[i] = r->segments[i].first_step;
		len[i] = r->segments[i].n_nodes;
	}
	char title[600], after[64];
	snprintf(title, sizeof title, "%s: live memory over one training step, checkpoint %s", model,
		 ckpt_name(r->strategy));
	snprintf(after, sizeof after, "checkpoint %s", ckpt_name(r->strategy));
	struct timeline t = {title, r->live_before, r->live_after, r->n_before, r->n_after, marks, (uint32_t)r->n_checkpoints,
			     first, len, r->n_segments, r->has_budget ? r->budget : 0, r->before_at, r->backward_step,
			     "before checkpointing", after};
	struct outfile o;
	int rc = outfile_open(&o, out, e);
	if (!rc) {
		svg_timeline(o.f, &t);
		rc = outfile_commit(&o, e);
	}
	xfree(marks);
	xfree(first);
	xfree(len);
	return rc;
}

/* plan and check share their options and work; `check` prints one line and gates on the budget. */
static int run(int argc, char **argv, int check)
{
	static const struct option opts[] = {
		{"checkpoint", required_argument, NULL, 'c'}, {"budget", required_argument, NULL, 'b'},
		{"dim", required_argument, NULL, 'd'},        {"loss", required_argument, NULL, 'l'},
		{"format", required_argument, NULL, 'F'},     {"from", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'}, CLI_BASE_DIR_OPTION,             {"explain", optional_argument, NULL, 'x'},
		{"checkpoint-file", required_argument, NULL, 'C'}, {"timeline", required_argument, NULL, 'T'},
		{"precision", required_argument, NULL, 'P'}, {"keep-fp32", required_argument, NULL, 'K'},
		{"loss-fn", required_argument, NULL, 'L'}, {"target", required_argument, NULL, 'g'},
		{"batch", required_argument, NULL, CLI_OPT_BATCH},
		{"params", required_argument, NULL, 'p'},     {"freeze", required_argument, NULL, 'z'},
		CLI_STEP_OPTIONS,
		{NULL, 0, NULL, 0},
	};
	const char *cmd = check ? "check" : "plan";
	enum gd_format from = FMT_AUTO;
	enum cli_out fmt = OUT_TEXT;
	struct exec_binding dims[64];
	struct plan_opts po = {.report_only = 1}; /* plan rewrites nothing */
	size_t n_dims = 0;
	int c, rc = 0, shared_rc = 0, explain = 0;
	struct names file_names = {0};
	struct graph *g = NULL;
	const char *timeline = NULL;
	struct cli_precision prec = {0};
	struct step_opts step = {.sized = 1}; /* analysis: no weight is read */
	int loss_fn = -1;
	int64_t batch = 0;
	const char *target = "target";
	char *pbuf = NULL, *fbuf = NULL;
	optind = 1;
	cli_step_argv(argc, argv);
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
		case 'C':
			if ((rc = cli_checkpoint(cmd, c, optarg, &po.ckpt, &file_names)))
				goto out;
			break;
		case 'b':
			if (size_parse(optarg, &po.budget))
				CLI_FAIL(cli_usage(cmd, "--budget: '%s' is not a size (8GiB, 500MB or bytes)", optarg));
			po.has_budget = 1;
			break;
		case 'd':
			if (cli_add_dim(cmd, optarg, dims, &n_dims))
				CLI_FAIL(GD_EINPUT);
			break;
		case CLI_OPT_BATCH:
			if (cli_batch(cmd, optarg, &batch))
				CLI_FAIL(GD_EINPUT);
			break;
		case 'l':
			po.loss = optarg;
			break;
		case 'L':
			if (cli_loss_fn(cmd, optarg, &loss_fn))
				CLI_FAIL(GD_EINPUT);
			break;
		case 'g':
			target = optarg;
			break;
		case 'p':
			free(pbuf);
			po.n_params = cli_split_names(optarg, &pbuf, &po.params);
			break;
		case 'z':
			free(fbuf);
			po.n_freeze = cli_split_names(optarg, &fbuf, &po.freeze);
			break;
		CLI_STEP_CASES:
			if ((rc = cli_step(cmd, c, optarg, &step)))
				goto out;
			po.step = &step;
			break;
		case 'P':
		case 'K':
			if ((rc = cli_precision(cmd, c, optarg, &prec)))
				goto out;
			break;
		case 'T':
			if (check)
				CLI_FAIL(cli_usage(cmd, "--timeline is for 'graphdiet plan'"));
			timeline = optarg;
			break;
		case 'x':
			if (check)
				CLI_FAIL(cli_usage(cmd, "--explain is for 'graphdiet plan'"));
			if ((explain = cli_explain_level(cmd, optarg)) < 0)
				CLI_FAIL(GD_EINPUT);
			break;
		default:
			if (cli_shared_option(cmd, c, check ? check_help : plan_help, &from, &fmt, &shared_rc))
				CLI_FAIL(shared_rc);
			break;
		}
	}
	if (argc - optind != 1)
		CLI_FAIL(cli_usage(cmd, argc - optind < 1 ? "no model given" : "too many arguments"));
	if (check && !po.has_budget)
		CLI_FAIL(cli_usage(cmd, "--budget is required"));
	if (po.params && po.freeze)
		CLI_FAIL(cli_usage(cmd, "give --params or --freeze, not both"));
	if (po.ckpt.kind == CKPT_AUTO && !po.has_budget)
		CLI_FAIL(cli_usage(cmd, "--checkpoint auto needs --budget SIZE"));
	po.ckpt.budget = po.budget;
	const char *path = argv[optind];
	po.dims = dims;
	po.n_dims = n_dims;
	g = cli_load(path, from, &rc);
	if (g && (rc = cli_check_dims(path, g, dims, n_dims)))
		CLI_FAIL(rc);
	struct plan_report r;
	struct gd_err e = {0};
	/* the stages train runs before differentiating, so that plan measures the graph train writes: a
	 * model's dimensions bound and its shape arithmetic folded (a training graph is measured as
	 * it is) */
	size_t folded;
	int training = g && plan_is_training_graph(g);
	if (training && batch) {
		rc = cli_usage(cmd, "--batch is for a model; a training graph keeps the batch it was built with");
	} else if (g && !training &&
		   ((batch && (rc = graph_rebatch(g, batch, &e))) || (n_dims && ((rc = exec_check_bindings(g, dims, n_dims, &e)) || (rc = graph_bind_dims(g, dims, n_dims, 0, &e)))) ||
		    (rc = graph_fold_constants(g, &folded, &e)))) {
		if (batch && rc == GD_EINPUT)
			cli_batch_hint(&e, batch);
		err_print(path, &e);
	} else if (g && loss_fn >= 0 && (rc = loss_append(g, (enum loss_fn)loss_fn, po.loss, target, &e)))
		err_print(path, &e);
	if (g && !rc && loss_fn >= 0)
		po.loss = loss_name(g); /* "loss", unless the model has one */
	if (g && !rc && ((rc = cli_autocast(g, &prec, &e)) || (rc = plan_memory(g, &po, &r, &e)))) {
		if (batch && rc == GD_EINPUT)
			cli_batch_hint(&e, batch);
		err_print(path, &e);
	}
	if (g && !rc && timeline && (rc = write_timeline(timeline, path, &r, &e)))
		err_print(timeline, &e);
	if (g && !rc) {
		char a[32], b[32];
		/* one thing per stream: the SVG has standard output, the report goes to standard error */
		FILE *f = timeline && (!strcmp(timeline, "-") || !strcmp(timeline, "/dev/stdout")) ? stderr : stdout;
		if (check && fmt == OUT_TEXT) {
			char per[96] = "";
			if (r.replicas > 1)
				snprintf(per, sizeof per, " per replica (%d replicas%s%s)", r.replicas, r.shard ? ", shard " : "",
					 r.shard ? r.shard : "");
			printf("graphdiet check: %s: peak %s%s %s budget %s (%s)\n", r.fits ? "fits" : "over budget",
			       size_format(r.peak_after, a, sizeof a), per, r.fits ? "<=" : ">", size_format(r.budget, b, sizeof b),
			       strcmp(path, "-") ? path : "<stdin>");
		} else if (fmt == OUT_TEXT) {
			report_text(f, path, &r, explain);
		} else {
			report_structured(f, path, &r, fmt == OUT_YAML);
		}
		if (check)
			rc = r.fits ? 0 : GD_ECHECK;
	}
out:
	graph_free(g);
	names_free(&file_names);
	cli_precision_free(&prec);
	cli_step_free(&step);
	free((void *)po.params);
	free((void *)po.freeze);
	free(pbuf);
	free(fbuf);
	for (size_t i = 0; i < n_dims; i++)
		free((char *)dims[i].name);
	return cli_finish(rc);
}

int cmd_plan(int argc, char **argv)
{
	return run(argc, argv, 0);
}

int cmd_check(int argc, char **argv)
{
	return run(argc, argv, 1);
}
