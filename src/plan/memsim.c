/* memsim.c - the memory model; see memsim.h. O(values + node inputs). */
#include "memsim.h"
#include "../ops/ops.h"
#include "../util/xalloc.h"

#include <string.h>

/* What the model needs of the shapes run, read into arrays of its own (bytes and the reuse table,
 * 9 bytes a value and 1 an input, against the run's 152-byte rtensor a value), so that the run can
 * be freed before the connectivity and the scratch are made (memmodel_finish): plan's peak is the
 * graph, the run and what is built beside it. */
int memmodel_measure(const struct graph *g, const struct exec *shapes, struct memmodel *m, struct gd_err *e)
{
	memset(m, 0, sizeof *m);
	size_t nv = g->n_values ? g->n_values : 1, n_in = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		n_in += g->nodes[i]->n_in;
	m->shapes = shapes;
	m->bytes = xmalloc(sizeof *m->bytes * nv);
	m->fits = xcalloc(n_in + 1, 1);
	m->half_taken = xcalloc(g->n_nodes + 1, 1);
	if (!m->bytes || !m->fits || !m->half_taken) {
		memmodel_free(m);
		return err_oom(e);
	}
	for (uint32_t v = 0; v < g->n_values; v++)
		m->bytes[v] = exec_value(shapes, g->values[v])->nbytes;
	/* the CPU computes a scatter or a Gemm of 16-bit floats on float32 copies, which take no
	 * buffer; and the inputs an elementwise node's output may be written over: its dtype (not
	 * 16-bit, which the CPU computes on float32 copies) and its element count. fits is indexed
	 * as flat's inputs are: node by node, in order */
	size_t a = 0;
	for (uint32_t i = 0; i < g->n_nodes; a += g->nodes[i++]->n_in) {
		const struct node *n = g->nodes[i];
		uint32_t fl = op_table[n->op].flags;
		int t = op_taken_input(fl, n->n_in);
		m->half_taken[i] = t >= 0 && !(fl & OPF_VIEW) &&
				   (!n->n_in || !n->in[t] || dtype_is_half(exec_value(shapes, n->in[t])->dtype));
		const struct rtensor *o = (fl & OPF_REUSES) && n->n_out && n->out[0] ? exec_value(shapes, n->out[0]) : NULL;
		for (uint32_t k = 0; o && k < n->n_in; k++) {
			const struct rtensor *x = n->in[k] ? exec_value(shapes, n->in[k]) : NULL;
			m->fits[a + k] = x && x->known && o->known && x->dtype == o->dtype && !dtype_is_half(x->dtype) &&
					 x->numel == o->numel;
		}
	}
	return 0;
}

enum comm_op memsim_comm_op(const struct node *n)
{
	return n->op == OP_ALL_REDUCE       ? COMM_ALL_REDUCE
	       : n->op == OP_REDUCE_SCATTER ? COMM_REDUCE_SCATTER
	       : n->op == OP_ALL_GATHER     ? COMM_ALL_GATHER
	       : n->op == OP_SHARD          ? COMM_SHARD
					    : COMM_NONE;
}

/* m->cat: the category in the low bits, CAT_PG for a parameter's gradient (FLAT_PARAM_GRAD): one
 * byte the simulation's inner loop reads per value */
enum cat { CAT_PARAM, CAT_GRAD, CAT_ACT, CAT_STATE, CAT_COMM, N_CAT, CAT_MASK = 7, CAT_PG = 8 };

/* A collective's output that is no parameter or state is a communication buffer (memsim.h), but
 * for a gradient: what a backward AllReduce or ReduceScatter makes (a summed bucket, a gradient
 * shard), or a Shard of a gradient; the rest by their flags. By the tags, not by autodiff's
 * VALUE_PARAM_GRAD, so that a training graph read back counts as the one built. */
static enum cat category(const struct flat *f, const struct value *v)
{
	uint8_t fl = f->vflags[v->id];
	enum comm_op op = v->producer ? memsim_comm_op(v->producer) : COMM_NONE;
	const struct value *in = v->producer && v->producer->n_in ? v->producer->in[0] : NULL;
	int grad = (fl & FLAT_GRAD) && (op == COMM_ALL_REDUCE || op == COMM_REDUCE_SCATTER ||
					(op == COMM_SHARD && in && (f->vflags[in->id] & FLAT_GRAD)));
	return (fl & FLAT_STATE)   ? CAT_STATE
	       : (fl & FLAT_PARAM) ? CAT_PARAM
	       : op && !grad       ? CAT_COMM
	       : (fl & FLAT_GRAD)  ? CAT_GRAD
				   : CAT_ACT;
}

#define BREAKDOWN(cat, pg) \
	((struct mem_breakdown){(cat)[CAT_PARAM], (cat)[CAT_STATE], (cat)[CAT_GRAD], (cat)[CAT_ACT], (pg), (cat)[CAT_COMM]})

int memmodel_finish(const struct graph *g, struct memmodel *m, struct gd_err *e)
{
	size_t nv = g->n_values ? g->n_values : 1;
	if (flat_build(g, &m->f)) {
		memmodel_free(m);
		return err_oom(e);
	}
	m->left = xmalloc(sizeof *m->left * (2 * nv));
	m->n_left = 2 * nv;
	m->copy = xmalloc(sizeof *m->copy * nv);
	if (!m->left || !m->copy) {
		memmodel_free(m);
		return err_oom(e);
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		if (m->half_taken[i])
			m->f.nflags[i] &= (uint8_t)~(FLAT_TAKES | FLAT_TAKES_LAST);
	xfree(m->half_taken);
	m->half_taken = NULL;
	if (!(m->cat = xmalloc(nv))) {
		memmodel_free(m);
		return err_oom(e);
	}
	for (uint32_t v = 0; v < g->n_values; v++)
		m->cat[v] = (uint8_t)(category(&m->f, g->values[v]) | (m->f.vflags[v] & FLAT_PARAM_GRAD ? CAT_PG : 0));
	for (uint32_t i = 0; i < g->n_inits; i++)
		*(g->inits[i]->flags & VALUE_STATE ? &m->state : &m->params) += m->bytes[g->inits[i]->id];
	for (uint32_t i = 0; i < g->n_inputs; i++)
		if (!g->inputs[i]->init)
			m->inputs += m->bytes[g->inputs[i]->id];
	return 0;
}

int memmodel_build(const struct graph *g, const struct exec *shapes, struct memmodel *m, struct gd_err *e)
{
	return memmodel_measure(g, shapes, m, e) || memmodel_finish(g, m, e) ? e->code : 0;
}

int memmodel_twin(const struct memmodel *m, struct memmodel *t)
{
	size_t nv = m->f.n_values ? m->f.n_values : 1;
	*t = *m;
	t->left = xmalloc(sizeof *t->left * (2 * nv));
	t->n_left = 2 * nv;
	t->copy = xmalloc(sizeof *t->copy * nv);
	memset(&t->rc, 0, sizeof t->rc);
	if (!t->left || !t->copy) {
		memmodel_twin_free(t);
		return -1;
	}
	return 0;
}

void memmodel_twin_free(struct memmodel *t)
{
	xfree(t->left);
	xfree(t->copy);
	rc_scratch_free(&t->rc);
	memset(t, 0, sizeof *t);
}

void memmodel_free(struct memmodel *m)
{
	flat_free(&m->f);
	xfree(m->bytes);
	xfree(m->left);
	xfree(m->copy);
	xfree(m->fits);
	xfree(m->half_taken);
	xfree(m->cat);
	rc_scratch_free(&m->rc);
	xfree(m->flops);
	memset(m, 0, sizeof *m);
}

const uint64_t *memmodel_flops(struct memmodel *m, const struct graph *g, struct gd_err *e)
{
	if (m->flops)
		return m->flops;
	if (!(m->flops = xmalloc(sizeof *m->flops * (g->n_nodes ? g->n_nodes : 1)))) {
		err_oom(e);
		return NULL;
	}
	for (uint32_t i = 0; i < g->n_nodes; i++)
		m->flops[i] = node_flops(g->nodes[i], m->shapes);
	return m->flops;
}


int memsim_schedule(struct memmodel *m, const uint8_t *keep, const struct rc_step *steps, uint32_t n_steps,
		    int trace, struct mem_result *r, struct gd_err *e)
{
	const struct flat *f = &m->f;
	const uint32_t nv = f->n_values;
	memset(r, 0, sizeof *r);
	if (trace) {
		r->live = xmalloc(sizeof *r->live * (n_steps ? n_steps : 1));
		r->live_end = xmalloc(sizeof *r->live_end * (n_steps ? n_steps : 1));
		if (!r->live || !r->live_end) {
			memsim_free(r);
			return err_oom(e);
		}
		r->n_live = n_steps;
	}
	/* a read of a dropped value by a clone or a backward node reads its latest recomputed copy:
	 * copies are numbered from nv on, in the order the steps make them */
	size_t copies = nv;
	for (uint32_t i = 0; i < n_steps; i++)
		if (steps[i].clone)
			copies += f->out_off[steps[i].node + 1] - f->out_off[steps[i].node];
	if (copies > m->n_left) {
		uint32_t *grown = xrealloc(m->left, sizeof *grown * copies);
		if (!grown)
			return err_oom(e);
		m->left = grown;
		m->n_left = copies;
	}
	uint32_t *left = m->left, *copy = m->copy;
	memset(left, 0, sizeof *left * copies);
#define IN_ID(s, k) ((((s)->clone || (f->nflags[(s)->node] & FLAT_BACKWARD)) && rc_dropped(f, keep, f->in[k])) ? copy[f->in[k]] : f->in[k])
#define MAKE_COPIES(s)                                                                          \
	for (uint32_t k = f->out_off[(s)->node]; (s)->clone && k < f->out_off[(s)->node + 1]; k++) \
		if (f->out[k] != FLAT_NONE)                                                             \
			copy[f->out[k]] = next++;
	uint32_t next = nv;
	for (uint32_t i = 0; i < n_steps; i++) {
		for (uint32_t k = f->in_off[steps[i].node]; k < f->in_off[steps[i].node + 1]; k++)
			if (f->in[k] != FLAT_NONE)
				left[IN_ID(&steps[i], k)]++;
		MAKE_COPIES(&steps[i]);
	}
	next = nv;
	uint64_t cat[N_CAT] = {m->params, 0, m->inputs, m->state, 0};
	uint64_t live = cat[0] + cat[1] + cat[2] + cat[3], pg = 0; /* pg: FLAT_PARAM_GRAD bytes live */
#define LIVE(v, op) (live op m->bytes[v], cat[m->cat[v] & CAT_MASK] op m->bytes[v], \
		     pg op (m->cat[v] & CAT_PG ? m->bytes[v] : 0))
	uint64_t most[N_CAT];
	memcpy(most, cat, sizeof most);
	r->peak = live;
	r->peak_node = -1;
	r->at_peak = BREAKDOWN(cat, pg);

	for (uint32_t i = 0; i < n_steps; i++) {
		const struct rc_step *s = &steps[i];
		uint32_t o0 = f->out_off[s->node], o1 = f->out_off[s->node + 1];
		MAKE_COPIES(s);
		/* a recomputed copy counts as the activation it copies */
		for (uint32_t k = o0; k < o1; k++)
			if (f->out[k] != FLAT_NONE)
				LIVE(f->out[k], +=);
		/* a view, a scatter or a Gemm whose taken input dies here takes its buffer: its bytes become
		 * the output's */
		uint32_t i0 = flat_taken(f, s->node), v0 = i0 < f->in_off[s->node + 1] ? f->in[i0] : FLAT_NONE;
		uint32_t taken = FLAT_NONE;
		if ((f->nflags[s->node] & FLAT_TAKES) && v0 != FLAT_NONE && f->out[o0] != FLAT_NONE &&
		    m->bytes[v0] == m->bytes[f->out[o0]]) {
			uint32_t id = IN_ID(s, i0);
			if (left[id] == 1 && (id >= nv || !(f->vflags[v0] & FLAT_PINNED))) {
				LIVE(v0, -=);
				taken = id;
			}
		}
		/* an elementwise node writes over the first input of its dtype and size that dies here */
		for (uint32_t k = f->in_off[s->node]; taken == FLAT_NONE && (f->nflags[s->node] & FLAT_REUSES) &&
						      f->out[o0] != FLAT_NONE && k < f->in_off[s->node + 1]; k++) {
			uint32_t id = m->fits[k] ? IN_ID(s, k) : FLAT_NONE, reads = 0;
			if (id == FLAT_NONE || (id < nv && (f->vflags[id] & FLAT_PINNED)))
				continue;
			for (uint32_t q = f->in_off[s->node]; q < f->in_off[s->node + 1]; q++)
				reads += f->in[q] != FLAT_NONE && IN_ID(s, q) == id;
			if (left[id] == reads) {
				LIVE(f->in[k], -=);
				taken = id;
			}
		}
		if (trace)
			r->live[i] = live;
		r->area += live >> 8;
		if (live > r->peak) {
			r->peak = live;
			r->peak_node = i;
			r->at_peak = BREAKDOWN(cat, pg);
		}
		if (pg > r->peak_param_grads)
			r->peak_param_grads = pg;
		for (int c = 0; trace && c < N_CAT; c++) /* for the report: not while weighing plans */
			most[c] = cat[c] > most[c] ? cat[c] : most[c];
		for (uint32_t k = o0; k < o1; k++) {
			uint32_t v = f->out[k];
			if (v != FLAT_NONE && (s->clone || !(f->vflags[v] & FLAT_PINNED)) && left[s->clone ? copy[v] : v] == 0)
				LIVE(v, -=); /* nobody reads it */
		}
		for (uint32_t k = f->in_off[s->node]; k < f->in_off[s->node + 1]; k++) {
			uint32_t v = f->in[k];
			if (v == FLAT_NONE)
				continue;
			uint32_t id = IN_ID(s, k);
			if (left[id] == 0)
				continue;
			if (--left[id] == 0 && (id >= nv || !(f->vflags[v] & FLAT_PINNED)) && id != taken)
				LIVE(v, -=);
		}
		if (trace)
			r->live_end[i] = live;
	}
#undef IN_ID
#undef MAKE_COPIES
#undef LIVE
	r->most = BREAKDOWN(most, r->peak_param_grads);
	return 0;
}

int memsim_model(struct memmodel *m, struct mem_result *r, struct gd_err *e)
{
	struct rc_step *steps = xmalloc(sizeof *steps * ((size_t)m->f.n_nodes + 1));
	if (!steps)
		return err_oom(e);
	for (uint32_t i = 0; i < m->f.n_nodes; i++)
		steps[i] = (struct rc_step){i, 0};
	int rc = memsim_schedule(m, NULL, steps, m->f.n_nodes, 1, r, e);
	m->peak_all = rc ? 0 : r->peak;
	xfree(steps);
	return rc;
}

int memsim(const struct graph *g, const struct exec *shapes, struct mem_result *r, struct gd_err *e)
{
	struct memmodel m;
	if (memmodel_build(g, shapes, &m, e))
		return e->code;
	int rc = memsim_model(&m, r, e);
	memmodel_free(&m);
	return rc;
}

void memsim_free(struct mem_result *r)
{
	xfree(r->live);
	xfree(r->live_end);
	r->live = r->live_end = NULL;
}

uint64_t node_flops(const struct node *n, const struct exec *shapes)
{
	static struct rtensor none;
	struct rtensor **in = xcalloc(n->n_in + n->n_out + 1, sizeof *in), **out = in ? in + n->n_in : NULL;
	if (!in)
		return 0;
	for (uint32_t k = 0; k < n->n_in; k++)
		in[k] = n->in[k] ? (struct rtensor *)exec_value(shapes, n->in[k]) : &none;
	for (uint32_t k = 0; k < n->n_out; k++)
		out[k] = n->out[k] ? (struct rtensor *)exec_value(shapes, n->out[k]) : &none;
	uint64_t f, b;
	op_cost(n, in, out, &f, &b);
	xfree(in);
	return f;
}
