/* autocast.c - mixed precision; see autocast.h.
 *
 * One pass over the sorted forward nodes, with each value's dtype from a shapes-only run, and
 * dt[v], the dtype v has after the rewrite so far. A node's float inputs are cast to the width its
 * op computes in (a cast made once per value and width: cast[v][0] narrow, cast[v][1] float32);
 * its float outputs then have that width, as the executor gives them (it computes 16-bit ops in
 * float32 and rounds their float results back). Casts go to the end; a sort puts them in place. */
#include "autocast.h"
#include "../exec/exec.h"
#include "../io/tensor.h"
#include "../util/join.h"
#include "../util/xalloc.h"
#include "fold.h"

#include <float.h>
#include <math.h>
#include <string.h>

int autocast_parse(const char *s)
{
	if (!strcmp(s, "fp16") || !strcmp(s, "float16"))
		return DT_FLOAT16;
	if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16"))
		return DT_BFLOAT16;
	if (!strcmp(s, "fp32") || !strcmp(s, "float32"))
		return DT_FLOAT;
	return -1;
}

/* Cast(in) -> out, named after out. */
static int cast_node(struct graph *g, struct value *in, struct value *out, int to, struct gd_err *e)
{
	char name[512];
	struct node *n = graph_add_node(g, e);
	struct value **io = n ? arena_array(g->arena, 2, sizeof *io) : NULL;
	if (!io)
		return e->code ? e->code : err_oom(e);
	JOIN(name, sizeof name, out->name, "/Cast");
	n->name = graph_fresh_name(g, name, e);
	n->op_type = "Cast";
	n->op = OP_CAST;
	n->n_in = n->n_out = 1;
	n->in = io;
	n->out = io + 1;
	n->in[0] = in;
	if (!n->name || graph_set_output_value(n, 0, out, e) || node_add_int(g, n, "to", to))
		return e->code ? e->code : err_oom(e);
	return 0;
}

struct ac {
	struct graph *g;
	int opset;                /* the default domain's */
	const struct autocast_opts *o;
	struct exec *x;           /* the shapes-only run: dtypes, and the data of small constants */
	int *dt;                  /* by value id: the dtype after the rewrite */
	uint8_t *fixed;           /* by value id: an initializer, or made from initializers alone */
	uint8_t *fit;             /* by value id: 1 fits 16 bits, 2 does not, 0 not yet known */
	struct value *(*cast)[2]; /* by value id: its casts, [0] to 16 bits, [1] to float32 */
	struct gd_err *e;
};

/* v as dtype `to` (16-bit or float32): itself, or its cast, made on first use. */
static struct value *as(struct ac *a, struct value *v, int to)
{
	if (a->dt[v->id] == to)
		return v;
	int w = to == DT_FLOAT;
	if (!a->cast[v->id][w]) {
		char name[512];
		JOIN(name, sizeof name, v->name, to == DT_FLOAT ? "_fp32" : to == DT_FLOAT16 ? "_fp16" : "_bf16");
		struct value *c = graph_new_value(a->g, name, a->e);
		if (!c || cast_node(a->g, v, c, to, a->e))
			return NULL;
		a->cast[v->id][w] = c;
	}
	return a->cast[v->id][w];
}

static int kept(const struct autocast_opts *o, const struct node *n)
{
	for (size_t i = 0; i < o->n_keep; i++)
		if (!strcmp(o->keep[i], n->op_type))
			return 1;
	return 0;
}

/* 1 if each of the n float32s at p (in place in a model file: maybe unaligned) keeps its magnitude
 * in `dt`: finite stays finite, nonzero stays normal. */
static int floats_fit(const void *p, size_t n, int dt)
{
	float tiny = dt == DT_FLOAT16 ? 0x1p-14f : FLT_MIN;
	for (size_t i = 0; i < n; i++) {
		float f;
		memcpy(&f, (const char *)p + i * sizeof f, sizeof f);
		float r = dt == DT_FLOAT16 ? f32_from_f16(f16_from_f32(f)) : f32_from_bf16(bf16_from_f32(f));
		if (isfinite(f) && (isinf(r) || (f != 0 && fabsf(r) < tiny)))
			return 0;
	}
	return 1;
}

/* Initializers of more elements than this are weights: cast to 16 bits as PyTorch's autocast casts
 * a Linear's weight and bias, unread. Checking them would read every weight of the model (27 GB at
 * 7B) to answer what `plan` and `check` ask; what the check is for are the small constants an
 * export folds in (an epsilon, a mask's fill value, a scale), which the shapes-only run holds. */
#define FITS_READ_MAX 65536

/* Whether fixed value v fits 16 bits: by its data (the run's, or a small initializer's), else by
 * the fixed values it is made from (a parameter transposed or reshaped). */
static int fits(struct ac *a, const struct value *v)
{
	if (a->fit[v->id])
		return a->fit[v->id] == 1;
	const struct rtensor *t = exec_value(a->x, v);
	struct bytes b = {0};
	int ok = 1;
	if (t->data && t->dtype == DT_FLOAT)
		ok = floats_fit(t->data, (size_t)t->numel, a->o->dtype);
	else if (v->init && tensor_numel(v->init) > FITS_READ_MAX)
		ok = 1;
	else if (v->init && v->init->dtype == DT_FLOAT && !tensor_bytes(a->g, v->init, &b, a->e))
		ok = floats_fit(b.p, b.n / sizeof(float), a->o->dtype);
	else if (v->producer)
		for (uint32_t k = 0; k < v->producer->n_in && ok; k++)
			ok = !v->producer->in[k] || a->dt[v->producer->in[k]->id] != DT_FLOAT ||
			     fits(a, v->producer->in[k]);
	a->fit[v->id] = ok ? 1 : 2;
	return ok;
}

/* Input k of n (output k, when `out`) keeps its own width (op_impl.own_width). */
static int own_width(const struct node *n, uint32_t k, int out)
{
	const struct op_impl *impl = op_table[n->op].impl;
	return impl && k < 16 && (impl->own_width >> (out ? 16 + k : k) & 1);
}

/* The width n computes in: 16-bit, float32, or 0 (its inputs' own: it reads no float, or only
 * one width). A node reading both widths computes in 16 bits when its float32 inputs are fixed
 * (parameters and constants, as a Linear's bias or GELU's 0.5) and fit 16 bits, so they are cast
 * down; otherwise in float32. */
static int width(struct ac *a, const struct node *n)
{
	uint32_t fl = op_table[n->op].flags;
	if (n->op == OP_CAST || (fl & OPF_META))
		return 0;
	const struct op_impl *impl = op_table[n->op].impl;
	if (kept(a->o, n) || (fl & OPF_AMP_FP32) || (a->o->dtype == DT_BFLOAT16 && impl && impl->bf16_since > a->opset) ||
	    (impl && impl->own_width && impl->own_width_since > a->opset))
		return DT_FLOAT;
	if (fl & OPF_AMP_LOW)
		return a->o->dtype;
	int low = 0, wide = 0;
	for (uint32_t k = 0; k < n->n_in; k++) {
		const struct value *v = n->in[k];
		if (v && !own_width(n, k, 0)) {
			low |= a->dt[v->id] == a->o->dtype;
			wide |= a->dt[v->id] == DT_FLOAT;
		}
	}
	if (!low || !wide)
		return 0;
	for (uint32_t k = 0; k < n->n_in; k++) { /* only now: a node reading float32 alone reads no data */
		const struct value *v = n->in[k];
		if (v && !own_width(n, k, 0) && a->dt[v->id] == DT_FLOAT && !(a->fixed[v->id] && fits(a, v)))
			return DT_FLOAT;
	}
	return a->o->dtype;
}

int autocast(struct graph *g, const struct autocast_opts *o, size_t *n_low, struct gd_err *e)
{
	*n_low = 0;
	struct exec_opts eo = {.shapes_only = 1, .probe_unbound = 1, .keep_values = 1}; /* constants' data for fits() */
	struct exec *x = exec_run(g, &eo, NULL, e);
	if (!x)
		return e->code;
	uint32_t nv = g->n_values, nn = g->n_nodes;
	size_t n1 = nv ? nv : 1;
	struct ac a = {g, 17, o, x, xcalloc(n1, sizeof *a.dt), xcalloc(n1, 1), xcalloc(n1, 1), xcalloc(n1, sizeof *a.cast), e};
	for (size_t i = 0; g->model && i < g->model->n_opsets; i++)
		if (op_domain_is_default(g->model->opsets[i].domain))
			a.opset = (int)g->model->opsets[i].version;
	int rc = a.dt && a.fixed && a.fit && a.cast ? 0 : err_oom(e);
	for (uint32_t i = 0; i < nv && !rc; i++) {
		a.dt[i] = exec_value(x, g->values[i])->dtype;
		a.fixed[i] = g->values[i]->init != NULL;
	}
	for (uint32_t i = 0; i < nn && !rc; i++) {
		struct node *n = g->nodes[i];
		int fixed = !(op_table[n->op].flags & OPF_RANDOM);
		for (uint32_t k = 0; k < n->n_in; k++)
			fixed &= !n->in[k] || a.fixed[n->in[k]->id];
		for (uint32_t k = 0; k < n->n_out; k++)
			if (n->out[k])
				a.fixed[n->out[k]->id] = (uint8_t)fixed;
		int w = width(&a, n), in16 = 0;
		if (e->code) { /* an initializer's bytes could not be read */
			rc = e->code;
			break;
		}
		for (uint32_t k = 0; k < n->n_in && !rc; k++) {
			struct value *v = n->in[k];
			if (!v || own_width(n, k, 0) || (a.dt[v->id] != DT_FLOAT && a.dt[v->id] != o->dtype))
				continue;
			/* a float input: n computes in 16 bits if that is its width, or, without one, if
			 * it reads 16 bits */
			in16 |= w ? w == o->dtype : a.dt[v->id] == o->dtype;
			if (w && !(n->in[k] = as(&a, v, w)))
				rc = e->code ? e->code : err_oom(e);
		}
		*n_low += in16 && w != DT_FLOAT && n->op != OP_CAST;
		for (uint32_t k = 0; k < n->n_out && in16 && n->op != OP_CAST; k++)
			if (n->out[k] && a.dt[n->out[k]->id] == DT_FLOAT && !own_width(n, k, 1))
				a.dt[n->out[k]->id] = o->dtype;
	}
	exec_free(x);
	/* graph outputs keep their dtype: the 16-bit value is renamed (its producer and readers keep
	 * it), and a cast takes the output's name */
	struct value **renamed = rc ? NULL : xcalloc(nv ? nv : 1, sizeof *renamed);
	int any = 0;
	if (!rc && !renamed)
		rc = err_oom(e);
	for (uint32_t i = 0; i < g->n_outputs && !rc; i++) {
		struct value *y = g->outputs[i];
		if (y->id >= nv || a.dt[y->id] != o->dtype || !y->producer || renamed[y->id])
			continue;
		char name[512];
		JOIN(name, sizeof name, y->name, o->dtype == DT_FLOAT16 ? "_fp16" : "_bf16");
		struct value *h = graph_new_value(g, name, e);
		struct node *p = y->producer;
		if (!h) {
			rc = e->code ? e->code : err_oom(e);
			break;
		}
		y->producer = NULL;
		if ((rc = graph_set_output_value(p, y->slot, h, e)))
			break;
		renamed[y->id] = h;
		any = 1;
	}
	for (uint32_t j = 0; any && !rc && j < g->n_nodes; j++) /* casts up included: they read 16 bits */
		for (uint32_t k = 0; k < g->nodes[j]->n_in; k++) {
			struct value *v = g->nodes[j]->in[k];
			if (v && v->id < nv && renamed[v->id])
				g->nodes[j]->in[k] = renamed[v->id];
		}
	for (uint32_t i = 0; any && !rc && i < nv; i++)
		if (renamed[i])
			rc = cast_node(g, renamed[i], g->values[i], DT_FLOAT, e);
	xfree(renamed);
	/* value_info entries give the new widths */
	for (uint32_t i = 0; i < g->n_infos; i++) {
		struct value *v = g->infos[i];
		if (v->id < nv && v->type.has_dtype && v->type.dtype == DT_FLOAT && a.dt[v->id] == o->dtype)
			v->type.dtype = o->dtype;
	}
	xfree(a.dt);
	xfree(a.fixed);
	xfree(a.fit);
	xfree(a.cast);
	return rc ? rc : graph_toposort(g, e);
}
