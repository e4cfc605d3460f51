/* fold.c - dimension binding and constant folding; see fold.h.
 *
 * Folding runs the executor in shape-inference mode, which already computes every small node whose
 * inputs are all known (that is how Reshape targets resolve). A computed node that is not random
 * and none of whose outputs is a graph output becomes a Constant per output consumed elsewhere; a
 * sweep then removes nodes whose outputs nobody reads, in one pass from the end (sweep). A graph in
 * which no node could be computed (may_fold) is only swept: a million-layer stack is not run.
 *
 * Exporter no-ops go too (fold_noops), bound dimensions or not: a node whose output 0 is one of its
 * inputs bit for bit, by its op's rule (op_impl.noop: Cast to the same dtype, Reshape to the same
 * shape, Mul by 1, ...), has its readers read that input instead, so the two tensors are never
 * both kept. Shapes come from the same run; with symbolic dimensions, from two runs with different
 * stand-ins, and a no-op must be one in both (a Slice of a 20000-row buffer by `seq` has seq's
 * length at seq = 10007, not at 40009). A no-op whose output is a graph output gives the input its
 * name (outputs and the loss keep their names), unless the input is itself an input or an output. */
#include "fold.h"
#include "unroll.h"
#include "../util/join.h"
#include "../util/xalloc.h"

#include <stdio.h>
#include <string.h>

static int bind_type(struct ttype *t, const struct exec_binding *b, size_t n, int *used)
{
	for (uint32_t i = 0; t->has_shape && i < t->ndim; i++)
		for (size_t k = 0; k < n && t->dims[i].kind == DIM_PARAM; k++)
			if (t->dims[i].param && !strcmp(t->dims[i].param, b[k].name)) {
				t->dims[i].kind = DIM_VALUE;
				t->dims[i].value = b[k].value;
				t->dims[i].param = NULL;
				used[k] = 1;
			}
	return 0;
}

int graph_bind_dims(struct graph *g, const struct exec_binding *b, size_t n, int strict, struct gd_err *e)
{
	int used[64] = {0};
	if (n > 64)
		return err_set(e, GD_EINPUT, "more than 64 --dim bindings");
	for (uint32_t i = 0; i < g->n_values; i++)
		bind_type(&g->values[i]->type, b, n, used);
	for (size_t k = 0; k < n; k++) {
		if (used[k])
			continue;
		if (strict)
			return err_set(e, GD_EINPUT, "--dim %s: no dimension of the graph is called '%s'", b[k].name, b[k].name);
		/* plan takes a script's --dim for models that have the dimension and those that do not
		 * (a static export), but a typo is named, with the names that are left */
		fprintf(stderr, "graphdiet: note: --dim %s: no dimension of the graph is called '%s'", b[k].name, b[k].name);
		const char *sep = " (unbound: ", *said[16];
		size_t n_said = 0;
		for (uint32_t i = 0; i < g->n_inputs; i++)
			for (uint32_t d = 0; g->inputs[i]->type.has_shape && d < g->inputs[i]->type.ndim; d++) {
				const struct dim *dd = &g->inputs[i]->type.dims[d];
				size_t j = 0;
				while (dd->kind == DIM_PARAM && dd->param && j < n_said && strcmp(said[j], dd->param))
					j++;
				if (dd->kind == DIM_PARAM && dd->param && j == n_said && n_said < 16) {
					fprintf(stderr, "%s%s", sep, said[n_said++] = dd->param);
					sep = ", ";
				}
			}
		fputs(*sep == ',' ? ")\n" : "\n", stderr);
	}
	return 0;
}

int graph_rebatch(struct graph *g, int64_t n, struct gd_err *e)
{
	uint32_t done = 0;
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		struct ttype *t = &g->inputs[i]->type;
		if (g->inputs[i]->init || !t->has_shape || !t->ndim)
			continue;
		t->dims[0] = (struct dim){.kind = DIM_VALUE, .value = n};
		done++;
	}
	if (!done)
		return err_set(e, GD_EINPUT, "--batch %lld: no graph input has a batch axis (axis 0 of a shaped input that is "
					     "not an initializer)", (long long)n);
	return 0;
}

int node_make_constant(struct graph *g, const struct rtensor *t, struct node *n, struct gd_err *e)
{
	struct tensor *c = arena_zalloc(g->arena, sizeof *c);
	struct attr *a = arena_zalloc(g->arena, sizeof *a);
	if (!c || !a)
		return err_oom(e);
	c->dtype = t->dtype;
	c->ndim = (uint32_t)t->ndim;
	c->dims = arena_memdup(g->arena, t->dims, (size_t)t->ndim * sizeof *t->dims);
	c->src = TSRC_BYTES;
	c->bytes = (struct bytes){arena_memdup(g->arena, t->data, t->nbytes), t->nbytes};
	if ((t->ndim && !c->dims) || (t->nbytes && !c->bytes.p))
		return err_oom(e);
	*a = (struct attr){.name = "value", .type = ATTR_TENSOR, .has_type = true, .t = c};
	/* reuse the node: it becomes the Constant (its name and output stay) */
	n->op_type = "Constant";
	n->op = OP_CONSTANT;
	n->domain = NULL;
	n->n_in = 0;
	n->n_attr = 1;
	n->attr = a;
	n->n_ctrl = 0;
	return 0;
}

/* Whether shape inference could compute a node that fold would make a Constant: one that is not
 * random and reads only known data (initializers other than parameters, and what such nodes make)
 * or only shapes (OPF_META). A graph with none, like a plain stack of layers, needs no run of the
 * executor. 1, 0, or -1 when out of memory. */
static int may_fold(const struct graph *g)
{
	uint8_t *known = xcalloc(g->n_values ? g->n_values : 1, 1);
	if (!known)
		return -1;
	for (uint32_t i = 0; i < g->n_values; i++)
		known[i] = g->values[i]->init && !(g->values[i]->flags & VALUE_PARAM);
	int any = 0;
	for (uint32_t i = 0; i < g->n_nodes && !any; i++) {
		const struct node *n = g->nodes[i];
		uint32_t fl = op_table[n->op].flags;
		int k = n->op != OP_UNKNOWN && !(fl & OPF_RANDOM);
		for (uint32_t j = 0; j < n->n_in && k && !(fl & OPF_META); j++)
			k = !n->in[j] || known[n->in[j]->id];
		any = k && n->op != OP_CONSTANT;
		for (uint32_t j = 0; j < n->n_out && k; j++)
			if (n->out[j])
				known[n->out[j]->id] = 1;
	}
	xfree(known);
	return any;
}

/* Which values depend on the values of a parameter or a graph input (1), one per value of g; NULL
 * when out of memory. Shape reads only shapes, so its output depends on nothing. */
static uint8_t *depends(const struct graph *g)
{
	uint8_t *dep = xcalloc(g->n_values ? g->n_values : 1, 1);
	for (uint32_t i = 0; dep && i < g->n_values; i++)
		dep[i] = (g->values[i]->flags & (VALUE_PARAM | VALUE_INPUT)) != 0;
	for (uint32_t i = 0; dep && i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		int d = 0;
		for (uint32_t k = 0; k < n->n_in && !(op_table[n->op].flags & OPF_META); k++)
			d |= n->in[k] && dep[n->in[k]->id];
		for (uint32_t k = 0; k < n->n_out; k++)
			if (n->out[k])
				dep[n->out[k]->id] = (uint8_t)d;
	}
	return dep;
}

/* 1. computed nodes with one output become Constants (multi-output ones are left); the run goes
 * to *run, for fold_noops */
static int fold(struct graph *g, struct exec **run, struct gd_err *e)
{
	struct exec_opts o = {.shapes_only = 1, .keep_values = 1};
	struct exec *x = exec_run(g, &o, NULL, e);
	if (!x)
		return e->code;
	*run = x;
	/* what depends on a parameter's values stays: folding it would take it out of training; so
	 * does what depends on an input's (shape inference knows Greater(x, x) without x: a data edge
	 * of --control-deps data) */
	uint8_t *dep = depends(g);
	if (!dep)
		return err_oom(e);
	int rc = 0;
	for (uint32_t i = 0; i < g->n_nodes && !rc; i++) {
		struct node *n = g->nodes[i];
		if (n->op == OP_CONSTANT || n->op == OP_UNKNOWN || n->n_out != 1 || !n->out[0] ||
		    (op_table[n->op].flags & OPF_RANDOM) || (n->out[0]->flags & VALUE_OUTPUT) || dep[n->out[0]->id])
			continue;
		const struct rtensor *t = exec_value(x, n->out[0]);
		int all_known = 1;
		for (uint32_t k = 0; k < n->n_in; k++)
			all_known &= !n->in[k] || exec_value(x, n->in[k])->data != NULL;
		if (t->data && all_known)
			rc = node_make_constant(g, t, n, e);
	}
	xfree(dep);
	return rc;
}

static void read_from_inside(const struct graph *g, const struct graph *sg, uint8_t *read);

/* Marks in `read` the values of g that n's subgraphs read. */
static void read_by_subgraphs(const struct graph *g, const struct node *n, uint8_t *read)
{
	for (uint32_t k = 0; k < n->n_attr; k++) {
		const struct attr *a = &n->attr[k];
		if (a->type == ATTR_GRAPH && a->g)
			read_from_inside(g, a->g, read);
		for (size_t j = 0; a->type == ATTR_GRAPHS && j < a->n; j++)
			read_from_inside(g, a->graphs[j], read);
	}
}

/* Marks in `read` the values of g that sg's nodes, or those of the subgraphs in them, read from
 * outside (an outer reference leads, maybe through enclosing subgraphs, to a value of g). */
static void read_from_inside(const struct graph *g, const struct graph *sg, uint8_t *read)
{
	for (uint32_t i = 0; i < sg->n_nodes; i++) {
		const struct node *n = sg->nodes[i];
		for (uint32_t k = 0; k < n->n_in; k++) {
			const struct value *v = n->in[k];
			while (v && v->outer)
				v = v->outer;
			if (v && v->id < g->n_values && g->values[v->id] == v)
				read[v->id] = 1;
		}
		read_by_subgraphs(g, n, read);
	}
}

/* Drops the nodes nothing reads, in one pass from the last: g is sorted (a node after its inputs'
 * producers and its control inputs), so every reader of a node's outputs has been judged when the
 * node is. A node stays if it makes a graph output, is random (its draws are part of the run), or a
 * node that stays reads one of its outputs (in a subgraph too) or waits on it. With `only` (one
 * flag per node), only the flagged nodes and those whose every reader went are dropped: a node
 * nothing read before stays. */
static int sweep(struct graph *g, const uint8_t *only, struct gd_err *e)
{
	uint8_t *read = xcalloc(g->n_values ? g->n_values : 1, 1), *waited = xcalloc(g->n_nodes ? g->n_nodes : 1, 1);
	uint8_t *was = only ? xcalloc(g->n_values ? g->n_values : 1, 1) : NULL;
	if (!read || !waited || (only && !was)) {
		xfree(read);
		xfree(waited);
		xfree(was);
		return err_oom(e);
	}
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		g->nodes[i]->index = i;
		for (uint32_t k = 0; was && k < g->nodes[i]->n_in; k++)
			if (g->nodes[i]->in[k])
				was[g->nodes[i]->in[k]->id] = 1;
		if (was)
			read_by_subgraphs(g, g->nodes[i], was);
	}
	for (uint32_t i = g->n_nodes; i-- > 0;) {
		struct node *n = g->nodes[i];
		int keep = waited[i] || (op_table[n->op].flags & OPF_RANDOM), before = 0;
		for (uint32_t j = 0; j < n->n_out && !keep; j++) {
			keep = n->out[j] && (read[n->out[j]->id] || (n->out[j]->flags & VALUE_OUTPUT));
			before |= n->out[j] && was && was[n->out[j]->id];
		}
		if (only && !only[i] && !before)
			keep = 1;
		if (!keep) {
			for (uint32_t j = 0; j < n->n_out; j++)
				if (n->out[j])
					n->out[j]->producer = NULL;
			g->nodes[i] = NULL;
			continue;
		}
		for (uint32_t k = 0; k < n->n_in; k++)
			if (n->in[k])
				read[n->in[k]->id] = 1;
		for (uint32_t k = 0; k < n->n_ctrl; k++) {
			uint32_t c = n->ctrl[k]->index;
			if (c < g->n_nodes && g->nodes[c] == n->ctrl[k])
				waited[c] = 1;
		}
		read_by_subgraphs(g, n, read);
	}
	uint32_t k = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]) {
			g->nodes[i]->index = k;
			g->nodes[k++] = g->nodes[i];
		}
	g->n_nodes = k;
	xfree(read);
	xfree(waited);
	xfree(was);
	return 0;
}

int graph_drop_unread(struct graph *g, struct node *const *nodes, uint32_t n, struct gd_err *e)
{
	uint8_t *only = xcalloc(g->n_nodes ? g->n_nodes : 1, 1);
	if (!only)
		return err_oom(e);
	for (uint32_t i = 0; i < g->n_nodes; i++)
		g->nodes[i]->index = i;
	for (uint32_t i = 0; i < n; i++)
		if (nodes[i]->index < g->n_nodes && g->nodes[nodes[i]->index] == nodes[i])
			only[nodes[i]->index] = 1;
	int rc = sweep(g, only, e);
	xfree(only);
	return rc;
}

/* 2. no-ops: see the top of the file */

/* The most inputs an op with a no-op rule has (Slice's 5). */
#define NOOP_MAX_IN 5

/* Whether n may be a no-op: its op has a rule, and all its inputs but one at most are known without
 * parameters and graph inputs (a Mul of two activations is no Mul by 1), so a graph without any
 * (a stack of layers) is not run. */
static int noop_candidate(const struct node *n, const uint8_t *dep)
{
	const struct op_impl *impl = n->op != OP_UNKNOWN ? op_table[n->op].impl : NULL;
	if (!impl || !impl->noop || !n->n_in || !n->in[0] || n->n_in > NOOP_MAX_IN || !n->n_out || !n->out[0] ||
	    (op_table[n->op].flags & OPF_SUBGRAPH))
		return 0;
	uint32_t d = 0;
	for (uint32_t k = 0; k < n->n_in; k++)
		d += n->in[k] && dep[n->in[k]->id];
	return d <= 1;
}

/* The input whose tensor output 0 of candidate n is, bit for bit, in the shapes-only run x: by the
 * op's rule, which sees data only on inputs that depend on no parameter or graph input, with
 * output 0 of that input's dtype and shape, and every other input independent of them. -1: none. */
static int noop_input(const struct exec *x, const struct node *n, const uint8_t *dep)
{
	struct rtensor ins[NOOP_MAX_IN], *in[NOOP_MAX_IN], out = *exec_value(x, n->out[0]), *outs[1] = {&out};
	for (uint32_t k = 0; k < n->n_in; k++) {
		in[k] = NULL;
		if (!n->in[k])
			continue;
		ins[k] = *exec_value(x, n->in[k]);
		if (!ins[k].known)
			return -1;
		if (dep[n->in[k]->id])
			ins[k].data = NULL;
		in[k] = &ins[k];
	}
	if (!out.known)
		return -1;
	int k = op_table[n->op].impl->noop(n, in, outs);
	if (k < 0 || (uint32_t)k >= n->n_in || !in[k] || in[k]->dtype != out.dtype || in[k]->ndim != out.ndim)
		return -1;
	/* the others are the same at every step: a Slice bound cast from a parameter is not */
	for (uint32_t j = 0; j < n->n_in; j++)
		if (j != (uint32_t)k && n->in[j] && dep[n->in[j]->id])
			return -1;
	for (int d = 0; d < out.ndim; d++)
		if (in[k]->dims[d] != out.dims[d])
			return -1;
	return k;
}

/* Shapes for fold_noops: given (the constant fold's run), or one run with the dimensions bound,
 * or with symbolic ones two: distinct stand-ins (a), and distinct others (b: 40009 + 2k for the
 * k-th symbol, 65521 for an unnamed dimension). A graph that shape inference refuses is left to
 * the stage that needs its shapes to say why: *a stays NULL. 0, or an error other than the input's. */
static int noop_runs(struct graph *g, int bound, struct exec **a, struct exec **b, struct gd_err *e)
{
	struct gd_err local = {0};
	struct exec_opts oa = {.shapes_only = 1, .keep_values = 1, .probe_unbound = !bound};
	struct exec_opts ob = {.shapes_only = 1, .keep_values = 1, .default_dim = 65521};
	struct exec_binding *dims = NULL;
	size_t n = 0;
	for (uint32_t i = 0; !bound && i < g->n_inputs; i++)
		n += g->inputs[i]->type.has_shape ? g->inputs[i]->type.ndim : 0;
	if (n && !(dims = xmalloc(n * sizeof *dims)))
		return err_oom(e);
	ob.dims = dims;
	for (uint32_t i = 0; dims && i < g->n_inputs; i++)
		for (uint32_t k = 0; g->inputs[i]->type.has_shape && k < g->inputs[i]->type.ndim; k++) {
			const struct dim *d = &g->inputs[i]->type.dims[k];
			size_t j = 0;
			while (j < ob.n_dims && d->kind == DIM_PARAM && d->param && strcmp(dims[j].name, d->param))
				j++;
			if (d->kind == DIM_PARAM && d->param && j == ob.n_dims)
				dims[ob.n_dims++] = (struct exec_binding){d->param, 40009 + 2 * (int64_t)j};
		}
	*a = exec_run(g, &oa, NULL, &local);
	if (*a && !bound && !(*b = exec_run(g, &ob, NULL, &local))) {
		exec_free(*a);
		*a = NULL;
	}
	xfree(dims);
	if (local.code && local.code != GD_EINPUT)
		return *e = local, e->code;
	return 0;
}

/* Gives src, a value some node makes, the name, type and output place of graph output out, which
 * a no-op made of it; -1 when src cannot take them (an input, an output, a name a subgraph reads),
 * 0, or an error. */
static int take_output(struct graph *g, struct value *src, struct value *out, const uint8_t *sub_read, struct gd_err *e)
{
	if (!src->producer || (src->flags & (VALUE_INPUT | VALUE_OUTPUT)) || src->init || src->outer || sub_read[src->id])
		return -1;
	const char *name = out->name;
	char base[512];
	JOIN(base, sizeof base, name, "_noop");
	if (graph_rename_fresh(g, out, base, e) || graph_rename_value(g, src, name, e))
		return e->code ? e->code : err_oom(e);
	if (out->type.has_type)
		src->type = out->type;
	src->ext = out->ext;
	src->flags |= out->flags & (VALUE_OUTPUT | VALUE_LOSS);
	out->flags &= ~(uint32_t)(VALUE_OUTPUT | VALUE_LOSS);
	for (uint32_t i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == out)
			g->outputs[i] = src;
	return 0;
}

/* The no-ops of g (sorted) go, in one pass in order: each node first reads what replaced its
 * inputs, then, a no-op, is replaced by its input. Kept: a no-op another node waits on or that
 * waits itself, whose output a subgraph reads, or whose other outputs are read (Dropout's mask).
 * What only the no-ops read (their Constants) goes after them, symbolic dimensions or not. */
static int fold_noops(struct graph *g, struct exec *run, int bound, struct gd_err *e)
{
	uint8_t *dep = depends(g), *read = NULL, *sub_read = NULL, *waited = NULL, *fed = NULL;
	struct value **to = NULL;
	struct exec *a = run, *b = NULL;
	int rc = dep ? 0 : err_oom(e), any = 0, dropped = 0;
	for (uint32_t i = 0; !rc && i < g->n_nodes && !any; i++)
		any = noop_candidate(g->nodes[i], dep);
	if (any && !run)
		rc = noop_runs(g, bound, &a, &b, e);
	if (!any || rc || !a)
		goto out;
	read = xcalloc(g->n_values ? g->n_values : 1, 1);
	sub_read = xcalloc(g->n_values ? g->n_values : 1, 1);
	waited = xcalloc(g->n_nodes ? g->n_nodes : 1, 1);
	fed = xcalloc(g->n_nodes ? g->n_nodes : 1, 1);
	to = xcalloc(g->n_values ? g->n_values : 1, sizeof *to);
	if (!read || !sub_read || !waited || !fed || !to) {
		rc = err_oom(e);
		goto out;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		g->nodes[i]->index = i;
		for (uint32_t k = 0; k < n->n_in; k++)
			if (n->in[k])
				read[n->in[k]->id] = 1;
		read_by_subgraphs(g, n, sub_read);
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		for (uint32_t k = 0; k < g->nodes[i]->n_ctrl; k++) {
			uint32_t c = g->nodes[i]->ctrl[k]->index;
			if (c < g->n_nodes && g->nodes[c] == g->nodes[i]->ctrl[k])
				waited[c] = 1;
		}
	for (uint32_t i = 0; i < g->n_nodes && !rc; i++) {
		struct node *n = g->nodes[i];
		for (uint32_t k = 0; k < n->n_in; k++)
			if (n->in[k] && to[n->in[k]->id])
				n->in[k] = to[n->in[k]->id];
		if (waited[i] || n->n_ctrl || !noop_candidate(n, dep) || sub_read[n->out[0]->id])
			continue;
		int k = noop_input(a, n, dep), other = 0;
		if (k < 0 || (b && noop_input(b, n, dep) != k))
			continue;
		for (uint32_t j = 1; j < n->n_out; j++)
			other |= n->out[j] && (read[n->out[j]->id] || sub_read[n->out[j]->id] || (n->out[j]->flags & VALUE_OUTPUT));
		int t = other ? -1 : (n->out[0]->flags & VALUE_OUTPUT) ? take_output(g, n->in[k], n->out[0], sub_read, e) : 0;
		rc = t > 0 ? t : 0;
		if (t)
			continue;
		to[n->out[0]->id] = n->in[k];
		for (uint32_t j = 0; j < n->n_in; j++) {
			const struct node *p = n->in[j] ? n->in[j]->producer : NULL;
			if (p && p->index < i && g->nodes[p->index] == p)
				fed[p->index] = 1;
		}
		dropped = 1;
		for (uint32_t j = 0; j < n->n_out; j++)
			if (n->out[j])
				n->out[j]->producer = NULL;
		g->nodes[i] = NULL;
	}
	uint32_t m = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (g->nodes[i]) {
			fed[m] = fed[i];
			g->nodes[i]->index = m;
			g->nodes[m++] = g->nodes[i];
		}
	g->n_nodes = m;
	if (!rc && dropped)
		rc = sweep(g, fed, e);
out:
	if (a != run)
		exec_free(a);
	exec_free(b);
	xfree(dep);
	xfree(read);
	xfree(sub_read);
	xfree(waited);
	xfree(fed);
	xfree(to);
	return rc;
}

int graph_fold_constants(struct graph *g, size_t *removed, struct gd_err *e)
{
	*removed = 0;
	/* shape computations on symbolic dimensions are the graph's to do at run time */
	int bound = 1;
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		const struct ttype *t = &g->inputs[i]->type;
		for (uint32_t k = 0; t->has_shape && k < t->ndim; k++)
			bound &= t->dims[k].kind == DIM_VALUE;
	}
	uint32_t n0 = g->n_nodes;
	struct exec *run = NULL;
	int rc = bound ? may_fold(g) : 0;
	if (rc < 0)
		return err_oom(e);
	if (rc)
		rc = fold(g, &run, e);
	if (!rc)
		rc = fold_noops(g, run, bound, e);
	exec_free(run);
	if (!rc && bound)
		rc = sweep(g, NULL, e);
	/* values left without producer or use disappear from the listings by name only: drop their
	 * value_info entries so the writers do not describe them */
	uint32_t k = 0;
	for (uint32_t i = 0; i < g->n_infos; i++)
		if (g->infos[i]->producer || (g->infos[i]->flags & (VALUE_INPUT | VALUE_PARAM | VALUE_CONST)))
			g->infos[k++] = g->infos[i];
	g->n_infos = k;
	*removed = n0 > g->n_nodes ? n0 - g->n_nodes : 0;
	/* control flow with constant counts and conditions made plain for autodiff (unroll.h), and
	 * what its unrolled bodies compute from constants folded in turn */
	size_t unrolled = 0, more = 0;
	if (!rc && !(rc = graph_unroll_control(g, &unrolled, e)) && unrolled)
		rc = graph_fold_constants(g, &more, e);
	return rc;
}

struct node *graph_add_scalar(struct graph *g, const char *name, int dtype, double v, struct gd_err *e)
{
	struct node *n = graph_add_op(g, name, "Constant", NULL, 0, name, e);
	uint64_t bits = 0;
	struct rtensor t = {.dtype = dtype, .numel = 1, .data = &bits, .nbytes = dtype_size(dtype)};
	rt_set(&t, 0, v);
	return n && !node_make_constant(g, &t, n, e) ? n : NULL;
}

int node_add_int(struct graph *g, struct node *n, const char *name, int64_t v)
{
	struct attr *a = n ? arena_zalloc(g->arena, sizeof *a) : NULL;
	if (!a)
		return -1;
	*a = (struct attr){.name = name, .type = ATTR_INT, .has_type = true, .i = v};
	n->attr = a;
	n->n_attr = 1;
	return 0;
}

struct node *graph_add_op(struct graph *g, const char *name, const char *op, struct value *const *ins, uint32_t n_in,
			  const char *out, struct gd_err *e)
{
	struct node *n = graph_add_node(g, e);
	if (!n)
		return NULL;
	n->name = graph_fresh_name(g, name, e);
	n->op_type = op;
	n->op = op_lookup(NULL, op);
	n->n_in = n_in;
	n->n_out = 1;
	n->in = arena_array(g->arena, n_in + 1, sizeof *n->in);
	const char *oname = graph_fresh_name(g, out, e);
	if (!n->name || !n->in || !oname) {
		err_oom(e);
		return NULL;
	}
	n->out = n->in + n_in;
	if (n_in) /* a Constant reads nothing: memcpy from NULL is undefined */
		memcpy(n->in, ins, n_in * sizeof *ins);
	return graph_set_output(g, n, 0, oname, e) ? NULL : n;
}
