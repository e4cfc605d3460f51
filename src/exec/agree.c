/* agree.c - the replicas' agreement before the first sum; see agree.h.
 *
 * Each replica makes a digest: D_COUNT 64-bit words (util/hash.h fingerprints), one allgather gives
 * every replica every replica's, and each then decides from the same table, so all reach the same
 * verdict and take the same further collectives. The words, in the order a difference is named (the
 * first word where some replica differs from replica 0):
 *   ok       the replica could make its digest (else it prints its own error: a parameter file
 *            that cannot be read)
 *   steps    --steps
 *   run      the run's options: the inputs given (names, dtypes and shapes), --dim, --seed,
 *            --random-inputs, --shard-inputs
 *   dtypes   the set of dtypes the values have, as a shapes-only run of this run infers them
 *            (declared ones where it cannot): a float16 graph against a float32 one
 *   reduces  the number of AllReduce nodes, then a hash of each one's element count and dtype in
 *            node order (the order they run in), from the same shapes-only run
 *   graph    the number of nodes, then a hash of the graph's lists (inputs, outputs, initializers'
 *            names, dtypes and shapes, opsets, update bindings) and of each node (name, op, domain,
 *            inputs, outputs with their inferred dtypes and shapes, attributes with their tensors'
 *            data and subgraphs, control inputs)
 *   params   a hash of each initializer's bytes (a random init's: its distribution and seed)
 * Where a count is equal and a hash is not, a second allgather of the per-item words (the
 * AllReduces' counts and dtypes, the per-node or per-initializer hashes) names the first item that
 * differs. Only when the digests differ does that cost more than one allgather of 80 bytes. */
#include "agree.h"
#include "comm.h"
#include "exec.h"
#include "../io/tensor.h"
#include "../util/hash.h"
#include "../util/progress.h"
#include "../util/xalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum { D_OK, D_STEPS, D_RUN, D_DTYPES, D_N_REDUCE, D_REDUCES, D_N_NODES, D_GRAPH, D_PARAMS, D_COUNT };

#define UNKNOWN UINT64_MAX /* an element count a shapes-only run could not infer */

/* What one replica computes: the digest and the items its hashes fold. */
struct mine {
	uint64_t d[D_COUNT];
	uint64_t *reduce; /* 2 words per AllReduce node: element count, dtype */
	uint64_t *node;   /* the lists' hash, then one per node */
	uint64_t *param;  /* one per initializer (param_at's) */
	uint32_t n_reduce, n_param;
};

/* Initializer i of g's main graph, then of its initialization graphs (the weights a sharded
 * replica takes its slice of, rewrite/shard.h; diet storage's), in that order; NULL past them. */
static const struct value *param_at(const struct graph *g, uint32_t i)
{
	if (i < g->n_inits)
		return g->inits[i];
	i -= g->n_inits;
	for (size_t t = 0; g->model && t < g->model->n_ti; t++) {
		const struct graph *ig = g->model->ti[t].init;
		if (ig && i < ig->n_inits)
			return ig->inits[i];
		i -= ig ? ig->n_inits : 0;
	}
	return NULL;
}

static uint64_t hash_ttype(uint64_t h, const struct ttype *t)
{
	h = hash_u64(h, t->has_dtype ? (uint64_t)t->dtype : UNKNOWN);
	h = hash_u64(h, t->has_shape ? t->ndim : UNKNOWN);
	for (uint32_t i = 0; t->has_shape && i < t->ndim; i++) {
		h = hash_u64(h, (uint64_t)t->dims[i].kind);
		h = t->dims[i].kind == DIM_PARAM ? hash_str(h, t->dims[i].param) : hash_u64(h, (uint64_t)t->dims[i].value);
	}
	return h;
}

static int hash_tensor(struct graph *g, const struct tensor *t, uint64_t *out, struct gd_err *e)
{
	uint64_t h = hash_str(hash_u64(0, (uint64_t)t->dtype), t->name);
	h = hash_u64(h, t->ndim);
	for (uint32_t i = 0; i < t->ndim; i++)
		h = hash_u64(h, (uint64_t)t->dims[i]);
	h = hash_u64(h, (uint64_t)t->src);
	if (t->src == TSRC_RANDOM) { /* its bytes follow from these, and making them costs more */
		uint64_t a, b;
		memcpy(&a, &t->rnd.a, sizeof a);
		memcpy(&b, &t->rnd.b, sizeof b);
		h = hash_u64(hash_u64(hash_u64(hash_u64(h, (uint64_t)t->rnd.dist), a), b), t->rnd.seed);
	} else if (t->src == TSRC_STRINGS) {
		for (size_t i = 0; i < t->n_strings; i++)
			h = hash_u64(h, hash_bytes(t->strings[i].p, t->strings[i].n, 2));
	} else {
		struct bytes b;
		if (tensor_bytes(g, t, &b, e))
			return e->code;
		h = hash_u64(h, hash_bytes(b.p, b.n, 3));
	}
	*out = h;
	return 0;
}

static int hash_graph(struct graph *root, const struct graph *sub, const struct exec *x, uint64_t *node, uint64_t *out,
		      struct gd_err *e);

static int hash_attr(struct graph *g, const struct attr *a, uint64_t *out, struct gd_err *e)
{
	uint64_t h = hash_u64(hash_str(0, a->name), (uint64_t)a->type), v;
	h = hash_str(h, a->ref);
	switch (a->type) {
	case ATTR_FLOAT:
		h = hash_u64(h, hash_bytes(&a->f, sizeof a->f, 4));
		break;
	case ATTR_INT:
		h = hash_u64(h, (uint64_t)a->i);
		break;
	case ATTR_STRING:
		h = hash_u64(h, hash_bytes(a->s.p, a->s.n, 5));
		break;
	case ATTR_FLOATS:
		h = hash_u64(h, hash_bytes(a->floats, a->n * sizeof *a->floats, 6));
		break;
	case ATTR_INTS:
		h = hash_u64(h, hash_bytes(a->ints, a->n * sizeof *a->ints, 7));
		break;
	case ATTR_STRINGS:
		for (size_t i = 0; i < a->n; i++)
			h = hash_u64(h, hash_bytes(a->strings[i].p, a->strings[i].n, 5));
		break;
	case ATTR_TENSOR:
	case ATTR_TENSORS:
		for (size_t i = 0; i < (a->type == ATTR_TENSOR ? 1 : a->n); i++) {
			if (hash_tensor(g, a->type == ATTR_TENSOR ? a->t : a->tensors[i], &v, e))
				return e->code;
			h = hash_u64(h, v);
		}
		break;
	case ATTR_GRAPH:
	case ATTR_GRAPHS:
		for (size_t i = 0; i < (a->type == ATTR_GRAPH ? 1 : a->n); i++) {
			if (hash_graph(g, a->type == ATTR_GRAPH ? a->g : a->graphs[i], NULL, NULL, &v, e))
				return e->code;
			h = hash_u64(h, v);
		}
		break;
	default: /* sparse tensors and type protos: their count only */
		h = hash_u64(h, a->n);
		break;
	}
	*out = h;
	return 0;
}

static uint64_t hash_value(uint64_t h, const struct value *v, const struct exec *x)
{
	if (!v)
		return hash_u64(h, UNKNOWN);
	h = hash_ttype(hash_str(h, v->name), &v->type);
	const struct rtensor *t = x ? exec_value(x, v) : NULL;
	if (t && t->known) {
		h = hash_u64(hash_u64(h, (uint64_t)t->dtype), (uint64_t)t->ndim);
		for (int i = 0; i < t->ndim; i++)
			h = hash_u64(h, (uint64_t)t->dims[i]);
	}
	return h;
}

static int hash_node(struct graph *g, const struct node *n, const struct exec *x, uint64_t *out, struct gd_err *e)
{
	uint64_t h = hash_str(hash_str(hash_str(0, n->name), n->op_type), n->domain), v = 0;
	h = hash_u64(hash_u64(hash_u64(h, n->n_in), n->n_out), n->n_attr);
	for (uint32_t i = 0; i < n->n_in; i++)
		h = n->in[i] ? hash_str(h, n->in[i]->name) : hash_u64(h, UNKNOWN);
	for (uint32_t i = 0; i < n->n_out; i++)
		h = hash_value(h, n->out[i], x);
	for (uint32_t i = 0; i < n->n_attr; i++) {
		if (hash_attr(g, &n->attr[i], &v, e))
			return e->code;
		h = hash_u64(h, v);
	}
	h = hash_u64(h, n->n_ctrl);
	for (uint32_t i = 0; i < n->n_ctrl; i++)
		h = hash_u64(h, n->ctrl[i]->index);
	*out = h;
	return 0;
}

/* sub's lists, then its nodes; node (when not NULL) gets the lists' hash and each node's */
static int hash_graph(struct graph *root, const struct graph *sub, const struct exec *x, uint64_t *node, uint64_t *out,
		      struct gd_err *e)
{
	uint64_t h = hash_u64(hash_str(0, sub->name), sub->n_inputs);
	for (uint32_t i = 0; i < sub->n_inputs; i++)
		h = hash_value(h, sub->inputs[i], x);
	h = hash_u64(h, sub->n_outputs);
	for (uint32_t i = 0; i < sub->n_outputs; i++)
		h = hash_value(h, sub->outputs[i], x);
	h = hash_u64(h, sub->n_inits);
	for (uint32_t i = 0; i < sub->n_inits; i++) {
		const struct tensor *t = sub->inits[i]->init;
		h = hash_u64(hash_str(h, sub->inits[i]->name), t ? (uint64_t)t->dtype : UNKNOWN);
		for (uint32_t k = 0; t && k < t->ndim; k++)
			h = hash_u64(h, (uint64_t)t->dims[k]);
	}
	const struct model *m = sub->model;
	for (size_t i = 0; m && i < m->n_opsets; i++)
		h = hash_u64(hash_str(h, m->opsets[i].domain), (uint64_t)m->opsets[i].version);
	for (size_t i = 0; m && i < m->n_ti; i++)
		for (size_t k = 0; k < m->ti[i].n_update_bind; k++)
			h = hash_str(hash_str(h, m->ti[i].update_bind[k].key), m->ti[i].update_bind[k].value);
	if (node)
		node[0] = h;
	h = hash_u64(h, sub->n_nodes);
	for (uint32_t i = 0; i < sub->n_nodes; i++) {
		uint64_t v = 0;
		if (hash_node(root, sub->nodes[i], x, &v, e))
			return e->code;
		if (node)
			node[i + 1] = v;
		h = hash_u64(h, v);
	}
	*out = h;
	return 0;
}

static uint64_t hash_words(const uint64_t *w, size_t n)
{
	return hash_bytes(w, n * sizeof *w, 8);
}

/* The inputs given and the options that decide what each replica runs. */
static uint64_t hash_run(const struct exec_opts *o)
{
	uint64_t h = hash_u64(0, o->n_inputs);
	for (size_t i = 0; i < o->n_inputs; i++) {
		const struct rtensor *t = &o->inputs[i];
		h = hash_u64(hash_u64(hash_str(h, o->input_names[i]), (uint64_t)t->dtype), (uint64_t)t->ndim);
		for (int k = 0; k < t->ndim; k++)
			h = hash_u64(h, (uint64_t)t->dims[k]);
		if (t->data) /* every rank takes its slice of one batch (or weights fed as inputs) */
			h = hash_u64(h, hash_bytes(t->data, t->nbytes, 9));
	}
	h = hash_u64(h, o->n_dims);
	for (size_t i = 0; i < o->n_dims; i++)
		h = hash_u64(hash_str(h, o->dims[i].name), (uint64_t)o->dims[i].value);
	h = hash_u64(hash_u64(h, o->seed), (uint64_t)o->random_inputs);
	return hash_u64(hash_u64(h, (uint64_t)o->shard_inputs), (uint64_t)o->batch_times);
}

/* v's dtype and element count: as the shapes-only run x infers them, else as declared */
static void value_shape(const struct exec *x, const struct value *v, int *dtype, uint64_t *count)
{
	const struct rtensor *t = x && v ? exec_value(x, v) : NULL;
	if (t && t->known) {
		*dtype = t->dtype;
		*count = (uint64_t)t->numel;
		return;
	}
	int64_t n = v && v->type.has_shape ? ttype_numel(&v->type) : -1;
	*dtype = v && v->type.has_dtype ? v->type.dtype : DT_UNDEFINED;
	*count = n >= 0 ? (uint64_t)n : UNKNOWN;
}

static int make_mine(struct graph *g, const struct exec_opts *o, uint64_t steps, struct mine *m, struct gd_err *e)
{
	/* the shapes (and dtypes) of this run: its inputs, its slice, its --dim (an AllReduce sums
	 * nothing in a shapes-only run) */
	struct exec_opts so = *o;
	so.shapes_only = 1;
	so.backend = NULL;
	so.profile = NULL;
	so.node_flops = NULL;
	so.keep_values = 0;
	struct gd_err se = {0};
	struct exec *x = exec_run(g, &so, NULL, &se); /* NULL when it cannot: the run says why */
	m->d[D_STEPS] = steps;
	m->d[D_RUN] = hash_run(o);
	for (uint32_t i = 0; i < g->n_values; i++) {
		int dt;
		uint64_t n;
		value_shape(x, g->values[i], &dt, &n);
		if (g->values[i]->init)
			dt = g->values[i]->init->dtype;
		if (dt > DT_UNDEFINED && dt < 64)
			m->d[D_DTYPES] |= UINT64_C(1) << dt;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		m->n_reduce += g->nodes[i]->op == OP_ALL_REDUCE;
	m->reduce = xcalloc(2 * (size_t)m->n_reduce + 1, sizeof *m->reduce);
	m->node = xcalloc((size_t)g->n_nodes + 1, sizeof *m->node);
	while (param_at(g, m->n_param))
		m->n_param++;
	m->param = xcalloc((size_t)m->n_param + 1, sizeof *m->param);
	int rc = m->reduce && m->node && m->param ? 0 : err_oom(e);
	for (uint32_t i = 0, k = 0; !rc && i < g->n_nodes; i++) {
		const struct node *n = g->nodes[i];
		if (n->op != OP_ALL_REDUCE)
			continue;
		uint64_t total = 0, c;
		int dt = DT_UNDEFINED, d;
		for (uint32_t j = 0; j < n->n_in; j++) {
			value_shape(x, n->in[j], &d, &c);
			dt = j ? dt : d;
			total = total == UNKNOWN || c == UNKNOWN ? UNKNOWN : total + c;
		}
		m->reduce[2 * k] = total;
		m->reduce[2 * k++ + 1] = (uint64_t)dt;
	}
	m->d[D_N_REDUCE] = m->n_reduce;
	m->d[D_REDUCES] = m->reduce ? hash_words(m->reduce, 2 * (size_t)m->n_reduce) : 0;
	m->d[D_N_NODES] = g->n_nodes;
	if (!rc)
		rc = hash_graph(g, g, x, m->node, &m->d[D_GRAPH], e);
	exec_free(x);
	for (uint32_t i = 0; !rc && i < m->n_param; i++)
		if (param_at(g, i)->init)
			rc = hash_tensor(g, param_at(g, i)->init, &m->param[i], e);
	if (!rc)
		m->d[D_PARAMS] = hash_words(m->param, m->n_param);
	m->d[D_OK] = !rc;
	return rc;
}

/* " (so do ranks 2, 3)": the ranks after `first` whose words at [at, at + width) of each stride of
 * all differ from rank 0's, into buf ("" for none) */
static void more_ranks(char *buf, size_t size, const uint64_t *all, int n, size_t stride, size_t at, size_t width,
		       int first)
{
	int list[6], shown = 0, more = 0;
	for (int r = first + 1; r < n; r++)
		if (memcmp(all + (size_t)r * stride + at, all + at, width * sizeof *all)) {
			if (shown < 6)
				list[shown++] = r;
			else
				more++;
		}
	size_t k = (size_t)snprintf(buf, size, "%s", !shown ? "" : shown == 1 ? " (so does rank " : " (so do ranks ");
	for (int i = 0; i < shown && k < size; i++)
		k += (size_t)snprintf(buf + k, size - k, "%s%d", i ? ", " : "", list[i]);
	if (more && k < size)
		k += (size_t)snprintf(buf + k, size - k, " and %d more", more);
	if (shown && k < size)
		snprintf(buf + k, size - k, ")");
}

/* The first rank whose words at [at, at + width) of each stride differ from rank 0's; -1 if none. */
static int first_rank(const uint64_t *all, int n, size_t stride, size_t at, size_t width)
{
	for (int r = 1; r < n; r++)
		if (memcmp(all + (size_t)r * stride + at, all + at, width * sizeof *all))
			return r;
	return -1;
}

/* Allgathers n words of each replica into *all (xmalloc'd); the first item (width words) where a
 * replica differs from replica 0 at *item, and that replica at *rank. *local is set when this
 * replica failed alone (out of memory, an MPI error). */
static int gather_items(struct comm *c, const uint64_t *mine, size_t n, size_t width, uint64_t **all, size_t *item,
			int *rank, int *local, struct gd_err *e)
{
	*all = xmalloc(n * sizeof **all * (size_t)c->size + 1);
	if (!*all || c->allgather(c, mine, n * sizeof *mine, *all, e)) {
		*local = 1;
		return *all ? e->code : err_oom(e);
	}
	for (size_t i = 0; i + width <= n; i += width)
		if ((*rank = first_rank(*all, c->size, n, i, width)) >= 0) {
			*item = i;
			return 0;
		}
	return err_set(e, GD_EINTERNAL, "the replicas' hashes differ, and no item does");
}

static void dtype_list(uint64_t mask, char *buf, size_t size)
{
	size_t k = 0;
	buf[0] = 0;
	for (int dt = 1; dt < 64 && k < size; dt++)
		if (mask >> dt & 1)
			k += (size_t)snprintf(buf + k, size - k, "%s%s", k ? ", " : "", dtype_name((enum dtype)dt));
}

static const char *count_str(uint64_t n, char *buf, size_t size)
{
	if (n == UNKNOWN)
		snprintf(buf, size, "an unknown number of");
	else
		snprintf(buf, size, "%" PRIu64, n);
	return buf;
}

/* The message for the first word f where the digests `all` differ (rank r the first that differs),
 * with a second gather where it names an item (*local set when that failed on this replica alone). */
static int differ(struct comm *c, struct graph *g, const struct mine *m, const uint64_t *all, int f, int r, int *local,
		  struct gd_err *e)
{
	char more[160], a[160], b[160], na[32], nb[32];
	const uint64_t *o = all + (size_t)r * D_COUNT;
	const char *head = "the ranks disagree before the first AllReduce";
	more_ranks(more, sizeof more, all, c->size, D_COUNT, (size_t)f, 1, r);
	uint64_t *items = NULL;
	size_t i = 0;
	int ir = -1, rc = GD_EINPUT;
	switch (f) {
	case D_STEPS:
		err_set(e, GD_EINPUT, "%s: --steps: rank 0 runs %" PRIu64 ", rank %d %" PRIu64 "%s", head, m->d[f], r, o[f], more);
		break;
	case D_RUN:
		err_set(e, GD_EINPUT, "%s: rank %d was given other inputs (names, dtypes, shapes or values), --dim, --seed, "
				      "--random-inputs or --shard-inputs than rank 0%s", head, r, more);
		break;
	case D_DTYPES: /* the dtypes one has and the other has not */
		dtype_list(m->d[f] & ~o[f], a, sizeof a);
		dtype_list(o[f] & ~m->d[f], b, sizeof b);
		if (a[0] && b[0])
			err_set(e, GD_EINPUT, "%s: the graphs' dtypes differ: rank 0 has %s values and rank %d none, rank %d "
					      "has %s values and rank 0 none%s (one graph for each --precision?)", head, a, r, r, b,
				more);
		else
			err_set(e, GD_EINPUT, "%s: the graphs' dtypes differ: rank %d has %s values and rank %d none%s (one "
					      "graph for each --precision?)", head, a[0] ? 0 : r, a[0] ? a : b, a[0] ? r : 0, more);
		break;
	case D_N_REDUCE:
		err_set(e, GD_EINPUT, "%s: rank 0's graph has %" PRIu64 " AllReduce nodes, rank %d's %" PRIu64 "%s (built "
				      "with another --bucket-bytes, or from another model?)", head, m->d[f], r, o[f], more);
		break;
	case D_REDUCES:
		if ((rc = gather_items(c, m->reduce, 2 * (size_t)m->n_reduce, 2, &items, &i, &ir, local, e)))
			break;
		{
			const uint64_t *x = items + i, *y = items + (size_t)ir * 2 * m->n_reduce + i;
			uint32_t k = (uint32_t)(i / 2), seen = 0;
			const struct node *n = NULL;
			for (uint32_t j = 0; j < g->n_nodes && !n; j++)
				if (g->nodes[j]->op == OP_ALL_REDUCE && seen++ == k)
					n = g->nodes[j];
			more_ranks(more, sizeof more, items, c->size, 2 * (size_t)m->n_reduce, i, 2, ir);
			rc = err_set(e, GD_EINPUT, "%s: AllReduce %u of %u ('%s' on rank 0) sums %s %s elements on rank 0, "
						   "%s %s on rank %d%s", head, k + 1, m->n_reduce, n && n->name ? n->name : "?",
				     count_str(x[0], na, sizeof na), dtype_name((enum dtype)x[1]), count_str(y[0], nb, sizeof nb),
				     dtype_name((enum dtype)y[1]), ir, more);
		}
		break;
	case D_N_NODES:
		err_set(e, GD_EINPUT, "%s: rank 0's graph has %" PRIu64 " nodes, rank %d's %" PRIu64 "%s", head, m->d[f], r,
			o[f], more);
		break;
	case D_GRAPH:
		if ((rc = gather_items(c, m->node, (size_t)g->n_nodes + 1, 1, &items, &i, &ir, local, e)))
			break;
		more_ranks(more, sizeof more, items, c->size, (size_t)g->n_nodes + 1, i, 1, ir);
		if (!i)
			rc = err_set(e, GD_EINPUT, "%s: the graphs differ in their inputs, outputs, initializers' shapes or "
						   "dtypes, opsets or update bindings: rank 0's and rank %d's%s", head, ir, more);
		else
			rc = err_set(e, GD_EINPUT, "%s: the graphs differ at node %zu, %s on rank 0 (its name, op, inputs, "
						   "outputs, shapes or attributes): rank 0's and rank %d's%s", head, i,
				     node_desc(g->nodes[i - 1], a, sizeof a), ir, more);
		break;
	default:
		if ((rc = gather_items(c, m->param, m->n_param, 1, &items, &i, &ir, local, e)))
			break;
		more_ranks(more, sizeof more, items, c->size, m->n_param, i, 1, ir);
		rc = err_set(e, GD_EINPUT, "%s: parameter '%s' holds other values on rank %d than on rank 0%s", head,
			     param_at(g, (uint32_t)i)->name, ir, more);
		break;
	}
	xfree(items);
	return rc;
}

void agree_release(struct comm *c)
{
	xfree(c->check);
	c->check = NULL;
	c->n_check = 0;
}

int agree_check(struct comm *c, struct graph *g, const struct exec_opts *o, uint64_t steps, int *together,
		int *speak, struct gd_err *e)
{
	struct mine m = {0};
	struct gd_err le = {0};
	*together = 1;
	*speak = 0;
	double t = progress_begin();
	int lrc = make_mine(g, o, steps, &m, &le);
	progress_end(t, "agree: digest", "%" PRIu32 " nodes, %" PRIu32 " initializers, %" PRIu32 " AllReduces", g->n_nodes,
		     m.n_param, m.n_reduce);
	t = progress_begin();
	uint64_t *all = xmalloc(sizeof *all * D_COUNT * (size_t)c->size);
	int rc = all ? c->allgather(c, m.d, sizeof m.d, all, e) : err_oom(e);
	progress_end(t, "agree: allgather", "%d ranks", c->size);
	if (rc) { /* this replica alone: the others may wait */
		*together = 0;
		*speak = 1;
		goto out;
	}
	for (int r = 0; r < c->size; r++)
		if (!all[(size_t)r * D_COUNT + D_OK]) { /* the lowest that failed says why */
			*speak = r == c->rank;
			rc = lrc ? (*e = le, lrc) : err_set(e, GD_EINPUT, "rank %d failed", r);
			goto out;
		}
	for (int f = D_OK + 1; f < D_COUNT; f++) {
		int r = first_rank(all, c->size, D_COUNT, (size_t)f, 1);
		if (r < 0)
			continue;
		int local = 0;
		rc = differ(c, g, &m, all, f, r, &local, e);
		*together = !local;
		*speak = local || !c->rank;
		break;
	}
	/* all agree: the AllReduces of counts no one could infer compare them at each sum */
	for (uint32_t k = 0; !rc && k < m.n_reduce && !c->check; k++)
		if (m.reduce[2 * k] == UNKNOWN && !(c->check = xcalloc(g->n_nodes, 1)))
			rc = err_oom(e), *together = 0, *speak = 1;
	for (uint32_t i = 0, k = 0; c->check && i < g->n_nodes; i++)
		if (g->nodes[i]->op == OP_ALL_REDUCE)
			c->check[i] = m.reduce[2 * k++] == UNKNOWN;
	c->n_check = c->check ? g->n_nodes : 0;
out:
	c->together = rc && *together;
	xfree(all);
	xfree(m.reduce);
	xfree(m.node);
	xfree(m.param);
	return rc;
}
