/* verifysteps.c - `graphdiet verify --replicas N REF TRAIN` of two training graphs with an
 * optimizer: TRAIN (typically train --replicas N --optimizer adam --shard S) trains as REF (the same
 * command without --shard) does, step for step.
 *
 * Both run as N replicas in threads (comm_run_replicas), each replica on its slice of the same
 * seeded random whole batch (or the --input files), for K steps, each step's bound outputs carried
 * to the next as run --steps carries them (steps.h). A sharded graph's replicas hold different
 * state (their slices), so the state goes back through each replica's own graph (steps_to_inits),
 * not the one set of inputs every replica is given. Compared:
 *
 *   at every step   <loss>_global, and each replica's own loss, TRAIN's against REF's;
 *   after the last  every value REF binds to state (P_new, P_adam_m_new, ..., optimizer_step_new):
 *                   TRAIN's of that name, or, where TRAIN's is a replica's slice (1-D, k =
 *                   ceil(numel / N) elements, where REF's has numel: ZeRO stages 1-3 slice the
 *                   optimizer state, stage 3 the parameters too), the replicas' slices
 *                   concatenated, its first numel elements in REF's shape (the layout of
 *                   ops/comm.c's Shard and AllGather);
 *   at every step   the replicas of each graph agree bit for bit on every output but their own
 *                   loss and TRAIN's slices; where REF's BatchNormalization takes each replica's
 *                   own statistics (train --replicas without --sync-batchnorm, as PyTorch DDP), the
 *                   outputs REF's replicas differ on (the running statistics) are each replica's
 *                   own, and are compared replica by replica instead.
 *
 * A value passes within relative 1e-6 in the L2 norm, or with equal values (--rtol/--atol: element
 * by element instead). Returns 0, GD_ECHECK when anything differs or is missing, or an error. */
#include "../exec/comm.h"
#include "../rewrite/replicas.h"
#include "../rewrite/shard.h"
#include "../util/xalloc.h"
#include "steps.h"
#include "verify.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The criterion's norm margin where --rtol and --atol are not given. */
#define VS_NORM 1e-6

void verify_steps_judge(struct verify_steps_opts *o, double rtol, double atol, int given)
{
	if (given) {
		o->base = (struct tol){.kind = TOL_ELEMENT, .rtol = rtol, .atol = atol};
		verify_tol_describe(&o->base, 0, o->crit, sizeof o->crit, o->sum, sizeof o->sum);
		return;
	}
	o->base = (struct tol){.kind = TOL_NORM, .norm = VS_NORM};
	snprintf(o->crit, sizeof o->crit, "norm rel <= %g (|train - ref| / |ref| in the L2 norm), or equal values",
		 VS_NORM);
	snprintf(o->sum, sizeof o->sum, "norm rel <= %g", VS_NORM);
}

/* REF or TRAIN: its N replicas, each with its graph (g[0] the one the caller loaded), executor of
 * the last step and carried state. */
struct side {
	const char *path, *what;
	struct graph **g;
	struct exec **x;
	struct steps *s;
	int n;
};

static void side_free(struct side *sd)
{
	for (int r = 0; sd->s && r < sd->n; r++)
		steps_free(&sd->s[r]);
	for (int r = 0; sd->x && r < sd->n; r++)
		exec_free(sd->x[r]);
	xfree(sd->s);
	xfree(sd->x);
	cli_free_copies(sd->g, sd->n);
}

/* The value `name` of replica r's last step: an output of its graph, else NULL. */
static const struct rtensor *value_of(const struct side *sd, int r, const char *name)
{
	const struct value *v = strmap_get(&sd->g[r]->names, name);
	return v && (v->flags & VALUE_OUTPUT) && sd->x[r] ? exec_value(sd->x[r], v) : NULL;
}

/* A graph this mode can take: a training step with an optimizer, of n replicas; REF unsharded,
 * TRAIN of --shard's stage when given (shard >= 0). Prints the error. */
static int side_check(const struct graph *g, const char *path, const char *what, int n, int shard)
{
	struct gd_err e = {0};
	const char *reps = model_meta(g, REPLICAS_KEY), *stage = model_meta(g, REPLICAS_SHARD_KEY);
	if (!verify_updated_param(g) && !strcmp(what, "REF"))
		err_set(&e, GD_EINPUT, "REF is not a training graph with an optimizer: verify --replicas %d of a TRAIN "
				       "built with --optimizer compares its steps with REF's, the graph the same train "
				       "command writes without --shard (MODEL's gradients: verify a TRAIN built without "
				       "--optimizer)", n);
	else if (!verify_updated_param(g))
		err_set(&e, GD_EINPUT, "TRAIN is not a training graph with an optimizer: --steps and --shard compare "
				       "the steps of two graphs built with train --replicas %d --optimizer", n);
	else if (!reps || strtol(reps, NULL, 10) != n)
		err_set(&e, GD_EINPUT, "--replicas %d, but %s was built with %s%s", n, what, reps ? "--replicas " : "",
			reps ? reps : "no --replicas");
	else if (!strcmp(what, "REF") && stage)
		err_set(&e, GD_EINPUT, "REF is sharded (%s = %s): the reference is the unsharded replicas' graph, the "
				       "same train command without --shard", REPLICAS_SHARD_KEY, stage);
	else if (shard >= 0 && (!stage || strcmp(stage, shard_name((enum shard_stage)shard))))
		err_set(&e, GD_EINPUT, "--shard %s, but TRAIN was built with %s%s", shard_name((enum shard_stage)shard),
			stage ? "--shard " : "", stage ? stage : "no --shard");
	if (e.code)
		err_print(path, &e);
	return e.code;
}

/* The n graphs and their state bindings; prints the error. */
static int side_open(struct side *sd, struct graph *first, int n)
{
	struct gd_err e = {0};
	sd->n = n;
	int rc = cli_load_copies(sd->path, FMT_AUTO, first, n, &sd->g);
	if (!rc && (!(sd->x = xcalloc((size_t)n, sizeof *sd->x)) || !(sd->s = xcalloc((size_t)n, sizeof *sd->s))))
		rc = err_oom(&e);
	for (int r = 0; !rc && r < n; r++)
		rc = steps_init(sd->g[r], NULL, &sd->s[r], &e);
	if (rc && e.code)
		err_print(sd->path, &e);
	return rc;
}

/* Step k (from 1) of every replica, from the state step k - 1 left. Prints the error. */
static int side_step(struct side *sd, struct exec_opts *eo, long k)
{
	struct gd_err e = {0};
	for (int r = 0; k > 1 && r < sd->n; r++)
		if (steps_advance(&sd->s[r], sd->x[r], &e) || steps_to_inits(&sd->s[r], sd->g[r], &e)) {
			err_print(sd->path, &e);
			return e.code;
		}
	for (int r = 0; r < sd->n; r++) {
		exec_free(sd->x[r]);
		sd->x[r] = NULL;
	}
	eo->step = (uint64_t)(k - 1);
	if (comm_run_replicas(sd->g, sd->n, eo, sd->x, NULL, &e)) {
		err_prefix(&e, "step %ld", k);
		err_print(sd->path, &e);
		return e.code;
	}
	return 0;
}

/* Whether t (TRAIN's) is a replica's slice of a (REF's): 1-D, ceil(numel / n) elements, and not
 * a's own shape. */
static int is_slice(const struct rtensor *a, const struct rtensor *t, int n)
{
	int same = a->ndim == t->ndim && !memcmp(a->dims, t->dims, sizeof *a->dims * (size_t)a->ndim);
	return !same && t->ndim == 1 && a->numel > 0 && t->numel == (a->numel + n - 1) / n;
}

/* REF's value `name` (a) against TRAIN's, whole or gathered from its replicas' slices. */
static void compare_state(struct row *row, const struct side *ref, const struct side *tr, const char *name,
			  const struct tol *tol)
{
	const struct rtensor *a = value_of(ref, 0, name), *t = value_of(tr, 0, name);
	char as[64], ts[64];
	if (!t || !is_slice(a, t, tr->n)) {
		if (t && (a->dtype != t->dtype || a->ndim != t->ndim ||
			  memcmp(a->dims, t->dims, sizeof *a->dims * (size_t)a->ndim))) {
			row->found = 1;
			snprintf(row->why, sizeof row->why, ": TRAIN's %s %s, REF's %s %s", dtype_name(t->dtype),
				 rt_shape_str(t, ts, sizeof ts), dtype_name(a->dtype), rt_shape_str(a, as, sizeof as));
			return;
		}
		compare(row, a, t, tol, 0, NULL);
		return;
	}
	struct rtensor whole = *a;
	size_t es = dtype_size(a->dtype), k = (size_t)t->numel;
	whole.owned = 0;
	whole.dev = NULL;
	whole.data = xmalloc(a->nbytes ? a->nbytes : 1);
	if (!whole.data) {
		snprintf(row->why, sizeof row->why, ": out of memory gathering TRAIN's slices");
		row->found = 1;
		return;
	}
	for (int r = 0; r < tr->n; r++) {
		const struct rtensor *p = value_of(tr, r, name);
		size_t at = (size_t)r * k, take = at < (size_t)a->numel ? (size_t)a->numel - at : 0;
		take = take < k ? take : k;
		if (!p || p->dtype != a->dtype || p->numel != t->numel || (take && !p->data)) {
			row->found = 1;
			snprintf(row->why, sizeof row->why, ": replica %d's slice is %s %s, not %s [%zu]", r,
				 p ? dtype_name(p->dtype) : "missing", p ? rt_shape_str(p, ts, sizeof ts) : "",
				 dtype_name(a->dtype), k);
			xfree(whole.data);
			return;
		}
		memcpy((char *)whole.data + at * es, p->data, take * es);
	}
	compare(row, a, &whole, tol, 0, NULL);
	snprintf(row->why, sizeof row->why, "  (gathered from %d slices of %zu)", tr->n, k);
	xfree(whole.data);
}

/* rows[*n], named `label` (malloc'd, owned), judged by base or the --tol matching it; NULL, with
 * the error printed and *rc set, when out of memory. */
static struct row *add_row(struct row **rows, size_t *n, size_t *cap, const char *label, const char *missing_from,
			   const struct verify_steps_opts *o, int *rc)
{
	struct gd_err e = {0};
	struct row *grown = *n < *cap ? *rows : xrealloc(*rows, (*cap ? 2 * *cap : 64) * sizeof *grown);
	char *name = grown ? strdup(label) : NULL;
	if (grown && grown != *rows) {
		*rows = grown;
		*cap = *cap ? 2 * *cap : 64;
	}
	if (!name) {
		*rc = err_oom(&e);
		err_print(NULL, &e);
		return NULL;
	}
	struct row *r = &(*rows)[(*n)++];
	*r = (struct row){.name = name, .owned = 1, .missing_from = missing_from, .noise = -1};
	verify_row_tol(r, &o->base, o->ov, o->n_ov);
	return r;
}

/* The loss output X whose X_global REF has: X (NULL when none). */
static const struct value *find_loss(const struct graph *g)
{
	for (uint32_t i = 0; i < g->n_outputs; i++) {
		const char *name = g->outputs[i]->name;
		size_t len = strlen(name);
		if (len <= 7 || strcmp(name + len - 7, "_global"))
			continue;
		for (uint32_t k = 0; k < g->n_outputs; k++)
			if (strlen(g->outputs[k]->name) == len - 7 && !strncmp(g->outputs[k]->name, name, len - 7))
				return g->outputs[k];
	}
	return NULL;
}

/* The index of g's output `name`, or -1. */
static int64_t output_index(const struct graph *g, const char *name)
{
	for (uint32_t i = 0; i < g->n_outputs; i++)
		if (!strcmp(g->outputs[i]->name, name))
			return i;
	return -1;
}

/* Each --input must be a batch input of g (a graph input that is no initializer and no state). */
static int check_inputs(const struct side *sd, const struct exec_opts *eo)
{
	for (size_t i = 0; i < eo->n_inputs; i++) {
		const struct value *v = strmap_get(&sd->g[0]->names, eo->input_names[i]);
		int state = 0;
		for (uint32_t k = 0; v && k < sd->s[0].n; k++)
			state |= sd->s[0].key[k] == v;
		if (!v || !(v->flags & VALUE_INPUT) || v->init || state) {
			struct gd_err e = {0};
			err_set(&e, GD_EINPUT, "--input %s: %s has no batch input of that name%s", eo->input_names[i], sd->what,
				state ? " (it is state, carried from step to step)" : "");
			err_print(sd->path, &e);
			return e.code;
		}
	}
	return 0;
}

int run_verify_steps(const char *rpath, const char *tpath, struct graph *train, struct exec_opts *eo,
		     const struct verify_steps_opts *o, enum cli_out fmt)
{
	int n = o->n_rep, rc = 0, all_ok = 1, agree = 1;
	struct side ref = {.path = rpath, .what = "REF"}, tr = {.path = tpath, .what = "TRAIN"};
	struct row *rows = NULL;
	size_t n_rows = 0, cap = 0;
	/* by TRAIN's output index: a replica's slice, or a replica's own (per), which the others'
	 * differ from; per by REF's */
	uint8_t *slice = NULL, *skip = NULL, *per = NULL;
	struct gd_err e = {0};
	struct graph *rg = cli_load(rpath, FMT_AUTO, &rc);
	if (!rg)
		return rc;
	if ((rc = side_check(rg, rpath, "REF", n, -1)) || (rc = side_check(train, tpath, "TRAIN", n, o->shard))) {
		graph_free(rg);
		return rc;
	}
	if ((rc = side_open(&ref, rg, n)) || (rc = side_open(&tr, train, n)) || (rc = check_inputs(&ref, eo)) ||
	    (rc = check_inputs(&tr, eo)))
		goto done;
	const struct value *loss = find_loss(ref.g[0]);
	if (!loss) {
		rc = err_set(&e, GD_EINPUT, "REF has no <loss>_global output (the whole batch's loss train --replicas adds)");
		err_print(rpath, &e);
		goto done;
	}
	const char *bn = model_meta(rg, REPLICAS_BATCH_NORM_KEY);
	int own_stats = bn && !strcmp(bn, "replica");
	if (!(slice = xcalloc(train->n_outputs + 1, 1)) || !(skip = xcalloc(train->n_outputs + 1, 1)) ||
	    !(per = xcalloc(rg->n_outputs + 1, 1))) {
		rc = err_oom(&e);
		err_print(tpath, &e);
		goto done;
	}
	char global[600], label[700];
	snprintf(global, sizeof global, "%s_global", loss->name);
	for (long k = 1; !rc && k <= o->steps; k++) {
		if ((rc = side_step(&ref, eo, k)) || (rc = side_step(&tr, eo, k)))
			break;
		for (int r = -1; r < n && !rc; r++) {
			if (r < 0)
				snprintf(label, sizeof label, "%s (step %ld)", global, k);
			else
				snprintf(label, sizeof label, "%s (step %ld, replica %d)", loss->name, k, r);
			struct row *row = add_row(&rows, &n_rows, &cap, label, tpath, o, &rc);
			if (!row)
				break;
			const char *name = r < 0 ? global : loss->name;
			compare(row, value_of(&ref, r < 0 ? 0 : r, name), value_of(&tr, r < 0 ? 0 : r, name), &row->tol, 0, NULL);
			all_ok &= row->ok;
		}
		/* which of TRAIN's outputs are slices (from the first step's shapes), which of REF's each
		 * replica's own */
		for (uint32_t i = 0; k == 1 && i < train->n_outputs; i++) {
			const struct rtensor *a = value_of(&ref, 0, train->outputs[i]->name);
			slice[i] = a && is_slice(a, exec_value(tr.x[0], train->outputs[i]), n);
		}
		for (uint32_t i = 0; own_stats && i < rg->n_outputs; i++)
			per[i] |= rg->outputs[i] != loss && !verify_output_agrees(ref.g, ref.x, n, i);
		for (uint32_t i = 0; i < train->n_outputs; i++) {
			int64_t j = output_index(rg, train->outputs[i]->name);
			skip[i] = slice[i] || (j >= 0 && per[j]);
		}
		agree &= verify_replicas_agree(ref.g, ref.x, n, loss->name, per) &&
			 verify_replicas_agree(tr.g, tr.x, n, loss->name, skip);
	}
	/* the state after the last step: REF's bindings, then any TRAIN binds that REF does not */
	for (uint32_t i = 0; !rc && i < ref.s[0].n; i++) {
		const char *name = ref.s[0].next[i]->name;
		int64_t j = output_index(rg, name);
		int own = j >= 0 && per[j];
		for (int r = 0; r < (own ? n : 1) && !rc; r++) { /* a replica's own: each against REF's */
			snprintf(label, sizeof label, "%s (replica %d)", name, r);
			struct row *row = add_row(&rows, &n_rows, &cap, own ? label : name, tpath, o, &rc);
			if (row && own)
				compare(row, value_of(&ref, r, name), value_of(&tr, r, name), &row->tol, 0, NULL);
			else if (row)
				compare_state(row, &ref, &tr, name, &row->tol);
			all_ok &= !row || row->ok;
		}
	}
	for (uint32_t i = 0; !rc && i < tr.s[0].n; i++) {
		const char *name = tr.s[0].next[i]->name;
		if (value_of(&ref, 0, name))
			continue;
		if (!add_row(&rows, &n_rows, &cap, name, rpath, o, &rc))
			break;
		all_ok = 0;
	}
	if (!rc) {
		if (fmt == OUT_TEXT) {
			const char *stage = model_meta(train, REPLICAS_SHARD_KEY);
			printf("steps: %ld, each replica on its slice of one batch; TRAIN %s%s\n", o->steps,
			       stage ? "sharded: " : "", stage ? stage : "unsharded");
		}
		report_rows(fmt, rows, n_rows, all_ok && agree, o->crit, o->sum, n, agree);
		verify_note_unmatched(o->ov, o->n_ov);
		rc = all_ok && agree ? 0 : GD_ECHECK;
	}
done:
	for (size_t i = 0; i < n_rows; i++)
		free((char *)rows[i].name);
	xfree(rows);
	xfree(slice);
	xfree(skip);
	xfree(per);
	side_free(&tr);
	side_free(&ref);
	graph_free(rg);
	return rc;
}
