/* gradcheck.c - `graphdiet verify --gradcheck`: a training graph's gradients against finite differences. */
#include "../exec/exec.h"
#include "../ops/kernel.h"
#include "../rewrite/widen.h"
#include "../util/emit.h"
#include "../util/philox.h"
#include "../util/xalloc.h"
#include "verify.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --gradcheck: TRAIN's gradients against central finite differences of MODEL's loss, computed in
 * float64 (MODEL widened, rewrite/widen.h, 16-bit tensors too) on TRAIN's own inputs, along seeded
 * random unit directions d over every parameter TRAIN gives a gradient for: sum(grad . d) against
 * (L(theta + h d) - L(theta - h d)) / 2h, within atol + rtol max(|fd|, |grad * d|) (the second: the
 * L2 norm of the elementwise product, the size of grad . d's rounding errors where the sum
 * cancels to far less). Only the executor's forward pass is trusted, not
 * autodiff. Infinite entries (a causal mask's -inf, stored as a float initializer) are left out of
 * d and of |theta|: theta +- h d keeps them as they are.
 *
 * Only smooth directions are judged. A loss with kinks (Relu, MaxPool, Clip, a Where whose
 * condition is computed) has a gradient on each smooth piece, and TRAIN's is the one of the piece
 * theta lies on; a step that crosses into another piece differences a mix of two (PyTorch's own
 * float64 differences miss its autograd by 1-6% on BatchNorm+ReLU CNNs). So MODEL runs with every
 * value kept, at theta and at theta +- h d, and the decisions its nodes take (kinks_differ) are
 * compared: a direction whose three runs do not take the same branches everywhere is tried again
 * with h ten times smaller (at most GC_STEPS sizes), as long as float64's rounding of the
 * difference, taken as 1e-14 |L| / h (2^-52 |L| / h for each run's loss, with room for the
 * rounding of sums over many elements), stays under a tenth of the tolerance, until two steps in a
 * row are smooth and agree (try_direction), else given up for another direction, up to
 * GC_DIRECTIONS_MAX of them, until GC_SMOOTH smooth ones are judged. None smooth:
 * the verdict is "inconclusive" (GD_EINCONCLUSIVE), neither a match nor a mismatch. Decisions
 * inside If/Loop/Scan bodies are not looked at (their conditions, when computed, are). */
enum { GC_SMOOTH = 3, GC_DIRECTIONS_MAX = 10, GC_STEPS = 8 };

/* Tolerances for TRAIN's gradients when not given: float32 ones are float32's rounding of the
 * forward and backward passes against float64's (measured on testdata: 1e-6 .. 3e-5 relative);
 * where TRAIN computes in 16 bits, every value it stores is rounded to 2^-11 (float16) or 2^-8
 * (bfloat16) relative, and a gradient is a chain of such roundings, which the widened MODEL does
 * not make. */
#define GC_RTOL 1e-4
#define GC_ATOL 1e-7
#define GC_RTOL_F16 1e-2
#define GC_RTOL_BF16 5e-2
#define GC_ATOL_HALF 1e-4

struct fd_param {
	const struct value *p;      /* MODEL's initializer */
	const struct rtensor *grad; /* TRAIN's gradient */
	struct rtensor theta, d;    /* float64 */
};

/* ---- the decisions MODEL's nodes take ---- */

/* The points where n's derivative jumps in its first input (op_impl.breaks: at most 2), given
 * run x's inputs; 0 for an op with no such points. */
static int breakpoints(const struct node *n, const struct exec *x, double *br)
{
	const struct op_impl *impl = op_table[n->op].impl;
	struct rtensor *in[16] = {0};
	if (!impl || impl->kink != KINK_BREAKS || !impl->breaks)
		return 0;
	for (uint32_t k = 0; k < n->n_in && k < 16; k++)
		in[k] = n->in[k] ? (struct rtensor *)exec_value(x, n->in[k]) : NULL;
	return impl->breaks(n, in, br);
}

/* Which side of each breakpoint v lies on (below, on, above), as one number. */
static int piece(double v, const double *br, int nb)
{
	int p = 0;
	for (int i = 0; i < nb; i++)
		p = p * 3 + (v > br[i]) * 2 + (v == br[i]);
	return p;
}

/* Element k of a tensor broadcast (numpy's rule) to out's shape: its offset in `in`. */
static int64_t bcast_at(const struct rtensor *in, const struct rtensor *out, int64_t k)
{
	int64_t off = 0, stride = 1;
	for (int a = out->ndim - 1, b = in->ndim - 1; a >= 0; a--, b--) {
		int64_t i = k % out->dims[a];
		k /= out->dims[a];
		if (b >= 0) {
			off += in->dims[b] == 1 ? 0 : i * stride;
			stride *= in->dims[b];
		}
	}
	return off;
}

/* The axes (bits) a ReduceMax, ReduceMin or GlobalMaxPool of a rank-r input takes its maximum
 * over: its axes attribute (before opset 18) or input, all of them when none are given. */
static uint32_t reduced_axes(const struct node *n, const struct exec *x, int r)
{
	uint32_t all = r >= 32 ? ~0u : (1u << r) - 1, m = 0;
	if (n->op == OP_GLOBAL_MAX_POOL)
		return all & ~3u;
	const struct attr *a = node_attr(n, "axes");
	const struct rtensor *t = n->n_in > 1 && n->in[1] ? exec_value(x, n->in[1]) : NULL;
	int64_t na = a && a->type == ATTR_INTS ? (int64_t)a->n : t && t->data ? t->numel : 0;
	for (int64_t i = 0; i < na; i++) {
		int64_t ax = a && a->type == ATTR_INTS ? a->ints[i] : rt_get_i(t, i);
		ax += ax < 0 ? r : 0;
		if (ax >= 0 && ax < r)
			m |= 1u << ax;
	}
	return na || attr_int(n, "noop_with_empty_axes", 0) ? m : all;
}

/* For each element of y, a maximum or minimum of x over the axes in mask: the flat position in x
 * of the first element equal to it (-1: none). NULL when out of memory. */
static int64_t *reduce_picks(const struct rtensor *x, const struct rtensor *y, uint32_t mask)
{
	int64_t *pick = xmalloc(sizeof *pick * (size_t)(y->numel ? y->numel : 1)), idx[RT_MAX_DIMS] = {0};
	for (int64_t k = 0; pick && k < y->numel; k++)
		pick[k] = -1;
	for (int64_t i = 0; pick && i < x->numel; i++) {
		int64_t o = 0;
		for (int a = 0; a < x->ndim; a++)
			if (!(mask >> a & 1))
				o = o * x->dims[a] + idx[a];
		if (o < y->numel && pick[o] < 0 && rt_get(x, i) == rt_get(y, o))
			pick[o] = i;
		for (int a = x->ndim - 1; a >= 0 && ++idx[a] == x->dims[a]; a--)
			idx[a] = 0;
	}
	return pick;
}

/* Which input of a Max or Min gives y's element k (the first equal to it). */
static int64_t picked_input(const struct node *n, const struct exec *x, const struct rtensor *y, int64_t k)
{
	for (uint32_t i = 0; i < n->n_in; i++) {
		const struct rtensor *t = n->in[i] ? exec_value(x, n->in[i]) : NULL;
		if (t && t->data && rt_get(t, bcast_at(t, y, k)) == rt_get(y, k))
			return i;
	}
	return -1;
}

static int same_shape(const struct rtensor *a, const struct rtensor *b)
{
	return a && b && a->data && b->data && a->dtype == b->dtype && a->ndim == b->ndim &&
	       !memcmp(a->dims, b->dims, sizeof *a->dims * (size_t)a->ndim);
}

/* How many of node n's decisions differ between two runs a and b of MODEL (every value kept): the
 * side of each breakpoint its input lies on (Relu's sign, Clip's bounds), the input a Max/Min or a
 * ReduceMax/GlobalMaxPool takes, the step a Floor/Ceil/Round/Sign lands on, and for every node,
 * its integer and bool outputs (MaxPool's Indices, ArgMax's, a Greater that feeds a Where or an
 * If, a Cast to an integer). -1 when out of memory. */
static int64_t kinks_differ(const struct node *n, const struct exec *a, const struct exec *b)
{
	int64_t diff = 0;
	int kink = op_table[n->op].impl ? (int)op_table[n->op].impl->kink : KINK_NONE;
	for (uint32_t k = 0; k < n->n_out; k++) {
		const struct rtensor *ta = n->out[k] ? exec_value(a, n->out[k]) : NULL,
				     *tb = n->out[k] ? exec_value(b, n->out[k]) : NULL;
		int step = kink == KINK_STEP;
		if (!ta || !ta->data || (dtype_is_float(ta->dtype) && !step) || ta->dtype == DT_STRING)
			continue;
		if (!same_shape(ta, tb))
			diff += ta->numel ? ta->numel : 1;
		for (int64_t i = 0; same_shape(ta, tb) && i < ta->numel; i++)
			diff += rt_get(ta, i) != rt_get(tb, i) || rt_get_i(ta, i) != rt_get_i(tb, i);
	}
	const struct rtensor *xa = n->n_in && n->in[0] ? exec_value(a, n->in[0]) : NULL,
			     *xb = n->n_in && n->in[0] ? exec_value(b, n->in[0]) : NULL,
			     *ya = n->n_out && n->out[0] ? exec_value(a, n->out[0]) : NULL,
			     *yb = n->n_out && n->out[0] ? exec_value(b, n->out[0]) : NULL;
	if (!same_shape(xa, xb) || !same_shape(ya, yb) || !dtype_is_float(xa->dtype))
		return diff;
	double bra[2], brb[2];
	int nb = breakpoints(n, a, bra);
	if (nb && breakpoints(n, b, brb) == nb)
		for (int64_t i = 0; i < xa->numel; i++)
			diff += piece(rt_get(xa, i), bra, nb) != piece(rt_get(xb, i), brb, nb);
	if (kink == KINK_PICK)
		for (int64_t k = 0; k < ya->numel; k++)
			diff += picked_input(n, a, ya, k) != picked_input(n, b, yb, k);
	if (kink == KINK_PICK_REDUCED) {
		uint32_t mask = reduced_axes(n, a, xa->ndim);
		int64_t *pa = reduce_picks(xa, ya, mask), *pb = pa ? reduce_picks(xb, yb, mask) : NULL;
		for (int64_t k = 0; pb && k < ya->numel; k++)
			diff += pa[k] != pb[k];
		diff = pa && pb ? diff : -1;
		xfree(pa);
		xfree(pb);
	}
	return diff;
}

/* The first node of m whose decisions differ between runs a and b (*count of them), or NULL. */
static const struct node *kink_between(const struct graph *m, const struct exec *a, const struct exec *b,
				       int64_t *count)
{
	for (uint32_t i = 0; i < m->n_nodes; i++)
		if ((*count = kinks_differ(m->nodes[i], a, b)) != 0)
			return m->nodes[i];
	return NULL;
}

/* Gives every MaxPool of m the Indices output it may lack, so that its choices are kept and
 * compared (its argmax is its decision). */
static int expose_indices(struct graph *m, struct gd_err *e)
{
	for (uint32_t i = 0; i < m->n_nodes; i++) {
		struct node *n = m->nodes[i];
		if (n->op != OP_MAX_POOL || (n->n_out > 1 && n->out[1]))
			continue;
		struct value **io = arena_array(m->arena, n->n_in + 2, sizeof *io);
		char base[512];
		snprintf(base, sizeof base, "%s_gradcheck_indices", n->name && *n->name ? n->name : n->op_type);
		struct value *v = io ? graph_new_value(m, base, e) : NULL;
		if (!v)
			return e->code ? e->code : err_oom(e);
		memcpy(io, n->in, (n->n_in + n->n_out) * sizeof *io);
		n->in = io;
		n->out = io + n->n_in;
		n->n_out = 2;
		if (graph_set_output_value(n, 1, v, e))
			return e->code;
	}
	return 0;
}

/* ---- the check ---- */

/* What happened along one direction tried, for the report. */
struct gc_dir {
	char what[512];
	int smooth;
};

struct gc_state {
	struct graph *m;
	const struct value *loss;
	struct fd_param *fp;
	size_t n;
	struct rtensor *in[3]; /* MODEL's inputs at theta, theta + h d and theta - h d: a run borrows them */
	const char **names;
	size_t n_in;
	struct exec_opts eo;
};

/* MODEL run on inputs `slot` with each parameter at theta + t d (its values kept; t = 0: theta,
 * before any d is drawn); NULL with e set on an error. */
static struct exec *run_at(struct gc_state *s, int slot, double t, struct gd_err *e)
{
	struct rtensor *in = s->in[slot];
	for (size_t j = 0; j < s->n; j++)
		for (size_t q = 0; q < s->n_in; q++)
			if (s->names[q] == s->fp[j].p->name)
				for (int64_t k = 0; k < s->fp[j].d.numel; k++)
					rt_set(&in[q], k, rt_get(&s->fp[j].theta, k) + (t ? t * rt_get(&s->fp[j].d, k) : 0));
	s->eo.inputs = in;
	return exec_run(s->m, &s->eo, NULL, e);
}

/* d for direction `dir`: standard normal per element, then scaled to unit length over all
 * parameters; returns grad . d, and in *scale the L2 norm of grad * d (elementwise), the size
 * rounding errors in grad give grad . d (a dot product that cancels is far smaller). */
static double direction(struct gc_state *s, uint64_t seed, int dir, double *scale)
{
	double norm2 = 0, dot = 0, s2 = 0;
	for (size_t j = 0; j < s->n; j++)
		for (int64_t k = 0; k < s->fp[j].d.numel; k++) {
			double r = philox_normal(seed * 7919 + (uint64_t)dir * 104729 + j, (uint64_t)k);
			if (!isfinite(rt_get(&s->fp[j].theta, k)))
				r = 0; /* an infinite entry (a causal mask's -inf) has no neighbourhood to difference */
			rt_set(&s->fp[j].d, k, r);
			norm2 += r * r;
		}
	for (size_t j = 0; j < s->n; j++)
		for (int64_t k = 0; k < s->fp[j].d.numel; k++) {
			rt_set(&s->fp[j].d, k, rt_get(&s->fp[j].d, k) / sqrt(norm2));
			double gd = rt_get(s->fp[j].grad, k) * rt_get(&s->fp[j].d, k);
			dot += gd;
			s2 += gd * gd;
		}
	*scale = sqrt(s2);
	return dot;
}

static void free_inputs(struct rtensor *in, size_t n)
{
	for (size_t q = 0; in && q < n; q++)
		xfree(in[q].data);
	xfree(in);
}

/* A copy of inputs in, each with data of its own; NULL when out of memory. */
static struct rtensor *copy_inputs(const struct rtensor *in, size_t n)
{
	struct rtensor *c = xcalloc(n + 1, sizeof *c);
	for (size_t q = 0; c && q < n; q++) {
		c[q] = in[q];
		if (!(c[q].data = xmalloc(in[q].nbytes ? in[q].nbytes : 1))) {
			free_inputs(c, q);
			return NULL;
		}
		memcpy(c[q].data, in[q].data, in[q].nbytes);
	}
	return c;
}

/* The smallest step whose difference float64 rounds within a tenth of tol: 1e-14 |l0| / h <=
 * tol / 10; never NaN (a loss NaN at theta: no floor; a tolerance 0: no step but the first). */
static double rounding_floor(double l0, double tol)
{
	double l = isfinite(l0) ? fabs(l0) : 0;
	return l == 0 ? 0 : tol > 0 ? 1e-13 * l / tol : INFINITY;
}

/* One direction: steps h0, h0/10, ... (GC_STEPS of them at most, none under the floor where
 * rounding would reach a tenth of the tolerance; l0: the loss at theta) until two in a row are
 * smooth (their runs at theta +- h d take theta's branches everywhere; xc: MODEL's run at theta)
 * and their differences agree within 10 times the tolerance, so that the smaller one's curvature
 * error (O(h^2): a hundredth of that) is far below it; that one gives the row, or the smallest
 * step does when it is smooth (nothing smaller can confirm it). A BatchNorm over two values is
 * smooth but bends within sqrt(epsilon) of its kink: MNASNet's differences at 1e-5 |theta| missed
 * by 2%, at 1e-7 by 2e-6. A direction whose smallest step crosses a kink is skipped (*judged 0). */
static int try_direction(struct gc_state *s, const struct exec *xc, uint64_t seed, int dir, double h0, double rtol,
			 double atol, struct row *r, struct gc_dir *log, int *judged, struct gd_err *e)
{
	double scale, dot = direction(s, seed, dir, &scale), h = h0, prev = NAN,
		      l0 = rt_get(exec_value(xc, s->loss), 0), floor = rounding_floor(l0, atol + rtol * scale);
	const struct node *kink = NULL;
	int64_t count = 0;
	char where[300], also[400] = "";
	*judged = 0;
	for (int step = 0; step < GC_STEPS && (!step || h >= floor); step++, h /= 10) {
		struct exec *xp = run_at(s, 1, h, e), *xm = xp ? run_at(s, 2, -h, e) : NULL;
		if (!xm) {
			exec_free(xp);
			return e->code;
		}
		const struct node *at = kink_between(s->m, xc, xp, &count);
		if (!at && !count)
			at = kink_between(s->m, xc, xm, &count);
		/* relative to |fd|, or to grad * d's norm where grad . d cancels */
		double lp = rt_get(exec_value(xp, s->loss), 0), lm = rt_get(exec_value(xm, s->loss), 0),
		       fd = (lp - lm) / (2 * h), diff = fabs(dot - fd), ref = fmax(fabs(fd), scale);
		exec_free(xp);
		exec_free(xm);
		if (count < 0)
			return err_oom(e);
		if (isfinite(fd)) /* |fd|, even across a kink, says the size of the tolerance */
			floor = rounding_floor(l0, atol + rtol * ref);
		int last = step + 1 == GC_STEPS || h / 10 < floor; /* the loop's condition for the next */
		if (at) {
			kink = at;
			prev = NAN;
			snprintf(also, sizeof also, "; h = %.3g crossed a kink: %s", h, node_desc(kink, where, sizeof where));
			continue;
		}
		if (isfinite(fd) && !last && (isnan(prev) || !(fabs(fd - prev) <= 10 * (atol + rtol * ref)))) {
			if (!isnan(prev))
				snprintf(also, sizeof also, "; h = %.3g still bent (%.2g%% away)", h * 10,
					 100 * fabs(fd - prev) / fmax(ref, 1e-300));
			prev = fd;
			continue;
		}
		char *name = malloc(64);
		if (name)
			snprintf(name, 64, "d%d: %.7g vs %.7g", dir + 1, dot, fd);
		*r = (struct row){.name = name ? name : "direction", .owned = name != NULL, .found = 1,
				  .max_abs = diff, .max_rel = ref != 0 ? diff / ref : diff > 0 ? INFINITY : 0,
				  .norm_rel = ref != 0 ? diff / ref : 0};
		r->ok = isfinite(dot) && isfinite(fd) && diff <= atol + rtol * ref;
		if (isfinite(fd) && !isnan(prev) && fabs(fd - prev) <= 10 * (atol + rtol * ref))
			snprintf(log->what, sizeof log->what, "d%d: smooth at h = %.3g and %.3g%s", dir + 1, h, h * 10, also);
		else if (isfinite(fd))
			snprintf(log->what, sizeof log->what, "d%d: smooth at h = %.3g, the smallest step (no smaller one "
				 "to confirm its difference)%s", dir + 1, h, also);
		else
			snprintf(log->what, sizeof log->what, "d%d: the loss is not finite at h = %.3g", dir + 1, h);
		log->smooth = *judged = 1;
		return 0;
	}
	ASSERT(kink); /* the smallest step, not judged, crossed one */
	snprintf(log->what, sizeof log->what, "d%d: skipped: crosses a kink at every h down to %.3g, the smallest "
		 "step: %s, %" PRId64 " decision%s", dir + 1, h * 10, node_desc(kink, where, sizeof where), count,
		 count == 1 ? "" : "s");
	return 0;
}

/* The loss of MODEL to difference: the one --loss-fn appended (its last output), else the scalar
 * float output TRAIN also gives. */
static const struct value *model_loss_value(const struct graph *m, const struct graph *train, const struct exec *xt,
					    int appended)
{
	const struct value *loss = appended && m->n_outputs ? m->outputs[m->n_outputs - 1] : NULL;
	for (uint32_t i = 0; i < m->n_outputs && !loss; i++) {
		const struct value *t = strmap_get(&train->names, m->outputs[i]->name);
		const struct rtensor *tv = t && (t->flags & VALUE_OUTPUT) ? exec_value(xt, t) : NULL;
		if (tv && tv->numel == 1 && dtype_is_float(tv->dtype) && !(t->flags & VALUE_GRAD))
			loss = m->outputs[i];
	}
	return loss;
}

/* The narrowest float TRAIN computed in: float64, float32, float16 or bfloat16 (the narrower of
 * the two 16-bit types: bfloat16). */
static int narrowest_float(const struct graph *train, const struct exec *xt)
{
	int dt = DT_DOUBLE;
	for (uint32_t i = 0; i < train->n_values; i++) {
		const struct rtensor *t = exec_value(xt, train->values[i]);
		int v = t && t->known ? t->dtype : train->values[i]->type.dtype;
		if (v == DT_BFLOAT16 || (v == DT_FLOAT16 && dt != DT_BFLOAT16) || (v == DT_FLOAT && dt == DT_DOUBLE))
			dt = v;
	}
	return dt;
}

/* rtol and atol NaN: not given, chosen from the narrowest float TRAIN computed in (its gradients
 * are its own loss's, rounded where it rounds: train --precision, a Cast to 16 bits). */
static void default_tols(const struct graph *train, const struct exec *xt, double *rtol, double *atol)
{
	int dt = narrowest_float(train, xt);
	if (isnan(*rtol))
		*rtol = dt == DT_BFLOAT16 ? GC_RTOL_BF16 : dt == DT_FLOAT16 ? GC_RTOL_F16 : GC_RTOL;
	if (isnan(*atol))
		*atol = dtype_is_half(dt) ? GC_ATOL_HALF : GC_ATOL;
}

static int gradcheck(struct graph *m, struct graph *train, struct exec *xt, int appended, uint64_t seed,
		     double *rtol, double *atol, struct row *rows, size_t *n_rows, struct gc_dir *log, int *n_log,
		     int *all_ok, struct gd_err *e)
{
	if (graph_widen_f64(m, e) || expose_indices(m, e))
		return e->code;
	const struct value *loss = model_loss_value(m, train, xt, appended);
	if (!loss)
		return err_set(e, GD_EINPUT, "--gradcheck: no scalar output of MODEL is also TRAIN's");
	/* TRAIN's inputs and parameters, in float64, for MODEL */
	size_t n = 0, cap = m->n_inputs + m->n_inits + 1;
	struct fd_param *fp = xcalloc(cap, sizeof *fp);
	struct rtensor *in = xcalloc(cap, sizeof *in);
	const char **names = xcalloc(cap, sizeof *names);
	size_t n_in = 0;
	int rc = !fp || !in || !names ? err_oom(e) : 0;
	double theta2 = 0;
	char gname[600];
	for (uint32_t i = 0; !rc && i < m->n_inputs + m->n_inits; i++) {
		const struct value *v = i < m->n_inputs ? m->inputs[i] : m->inits[i - m->n_inputs],
				   *tv = strmap_get(&train->names, v->name);
		const struct rtensor *t = tv ? exec_value(xt, tv) : NULL;
		if (!t || !t->data || (i < m->n_inputs && v->init))
			continue; /* an initializer listed as an input too comes with the initializers */
		snprintf(gname, sizeof gname, "%s_grad", v->name);
		const struct value *gv = strmap_get(&train->names, gname); /* a trained input's too */
		struct rtensor *w = &in[n_in];
		*w = *t;
		w->owned = 0;
		w->dev = NULL;
		if (dtype_is_float(t->dtype) && t->dtype != DT_DOUBLE) {
			w->dtype = DT_DOUBLE;
			w->nbytes = (size_t)t->numel * sizeof(double);
		}
		if (!(w->data = xmalloc(w->nbytes ? w->nbytes : 1))) {
			rc = err_oom(e);
			break;
		}
		if (w->dtype == t->dtype)
			memcpy(w->data, t->data, t->nbytes);
		else
			for (int64_t k = 0; k < t->numel; k++)
				rt_set(w, k, rt_get(t, k));
		names[n_in++] = v->name;
		if (!gv || !(gv->flags & VALUE_OUTPUT) || !dtype_is_float(t->dtype))
			continue;
		const struct rtensor *gt = exec_value(xt, gv);
		if (gt->ndim != t->ndim || memcmp(gt->dims, t->dims, sizeof *t->dims * (size_t)t->ndim)) {
			char a[160], b[160];
			rc = err_set(e, GD_ECHECK, "--gradcheck: TRAIN's %s has shape %s, its parameter %s", gname,
				     rt_shape_str(gt, a, sizeof a), rt_shape_str(t, b, sizeof b));
			break;
		}
		struct fd_param *f = &fp[n++];
		f->p = v;
		f->grad = gt;
		f->theta = f->d = *w;
		f->theta.data = xmalloc(w->nbytes ? w->nbytes : 1);
		f->d.data = xmalloc(w->nbytes ? w->nbytes : 1);
		if (!f->theta.data || !f->d.data) {
			rc = err_oom(e);
			break;
		}
		memcpy(f->theta.data, w->data, w->nbytes);
		for (int64_t k = 0; k < t->numel; k++)
			if (isfinite(rt_get(w, k)))
				theta2 += rt_get(w, k) * rt_get(w, k);
	}
	if (!rc && !n)
		rc = err_set(e, GD_EINPUT, "--gradcheck: TRAIN gives no <param>_grad of MODEL's parameters");
	struct gc_state s = {m, loss, fp, n, {in, NULL, NULL}, names, n_in,
			     {.input_names = names, .n_inputs = n_in, .seed = seed, .default_dim = 2, .keep_values = 1}};
	for (int slot = 1; slot < 3 && !rc; slot++)
		if (!(s.in[slot] = copy_inputs(in, n_in)))
			rc = err_oom(e);
	if (!rc)
		default_tols(train, xt, rtol, atol);
	/* theta's own run, whose branches every step must keep */
	struct exec *xc = rc ? NULL : run_at(&s, 0, 0, e);
	if (!rc && !xc)
		rc = e->code;
	double h0 = 1e-5 * fmax(1, sqrt(theta2));
	for (int dir = 0; !rc && dir < GC_DIRECTIONS_MAX && *n_rows < GC_SMOOTH; dir++) {
		int judged;
		rc = try_direction(&s, xc, seed, dir, h0, *rtol, *atol, &rows[*n_rows], &log[(*n_log)++], &judged, e);
		if (!rc && judged)
			*all_ok &= rows[(*n_rows)++].ok;
	}
	exec_free(xc);
	for (size_t j = 0; fp && j < n; j++) {
		xfree(fp[j].d.data);
		xfree(fp[j].theta.data);
	}
	for (int slot = 0; slot < 3; slot++)
		free_inputs(s.in[slot], n_in);
	xfree(fp);
	xfree(names);
	return rc;
}

/* No direction was smooth: neither a match nor a mismatch. */
static void report_inconclusive(enum cli_out fmt, const struct gc_dir *log, int n_log)
{
	if (fmt == OUT_TEXT) {
		printf("inconclusive: none of the %d random directions tried is smooth at its smallest step: nothing "
		       "judged\n", n_log);
		return;
	}
	struct emit em;
	emit_init(&em, stdout, fmt == OUT_YAML);
	emit_obj_begin(&em);
	emit_key(&em, "match");
	emit_bool(&em, 0);
	emit_key(&em, "inconclusive");
	emit_bool(&em, 1);
	emit_key(&em, "directions");
	emit_arr_begin(&em);
	for (int i = 0; i < n_log; i++)
		emit_str(&em, log[i].what);
	emit_arr_end(&em);
	emit_obj_end(&em);
}

/* One gradcheck of TRAIN (widened to float64 first when `widen`): its directions, rows and
 * verdict; narrow is the float TRAIN computed in, before any widening. */
struct gc_result {
	struct row rows[GC_SMOOTH];
	size_t n_rows;
	struct gc_dir log[GC_DIRECTIONS_MAX];
	int n_log, all_ok, narrow;
	double rtol, atol;
};

static void result_free(struct gc_result *r)
{
	for (size_t i = 0; i < r->n_rows; i++)
		if (r->rows[i].owned)
			free((char *)r->rows[i].name);
	r->n_rows = 0;
}

/* TRAIN on seeded random inputs, past any step its dynamic loss scale skips, then gradcheck. */
static int check_once(const char *mpath, const char *tpath, const struct model_loss *ml, struct exec_binding *dims,
		      size_t *n_dims, struct exec_opts *eo, int widen, struct gc_result *r)
{
	int rc = 0;
	struct gd_err e = {0};
	struct graph *m = load_model(mpath, ml, &rc), *t = m ? cli_load(tpath, FMT_AUTO, &rc) : NULL;
	struct carried carry = {0};
	struct exec *xt = NULL;
	r->all_ok = 1;
	if (t)
		rc = verify_refuse_optimizer(t, tpath);
	if (t && !rc && bind_like_train(m, t, dims, n_dims, &e)) {
		err_print(tpath, &e);
		rc = e.code;
	}
	if (t && !rc && widen && graph_widen_f64(t, &e)) {
		err_print(tpath, &e);
		rc = e.code;
	}
	eo->dims = dims;
	eo->n_dims = *n_dims;
	/* the inputs given (-i), as float64 for a widened TRAIN */
	const struct rtensor *given = eo->inputs;
	struct rtensor *wide = widen && eo->n_inputs ? xcalloc(eo->n_inputs, sizeof *wide) : NULL;
	if (widen && eo->n_inputs && !wide)
		rc = (err_print(tpath, (err_oom(&e), &e)), e.code);
	for (size_t i = 0; wide && !rc && i < eo->n_inputs; i++) {
		wide[i] = given[i];
		wide[i].owned = 0;
		if (!dtype_is_float(given[i].dtype) || given[i].dtype == DT_DOUBLE) {
			wide[i].data = NULL; /* borrowed: given[i]'s */
			continue;
		}
		wide[i].dtype = DT_DOUBLE;
		wide[i].nbytes = (size_t)given[i].numel * sizeof(double);
		if (!(wide[i].data = xmalloc(wide[i].nbytes ? wide[i].nbytes : 1))) {
			rc = (err_print(tpath, (err_oom(&e), &e)), e.code);
			break;
		}
		for (int64_t k = 0; k < given[i].numel; k++)
			rt_set(&wide[i], k, rt_get(&given[i], k));
	}
	for (size_t i = 0; wide && !rc && i < eo->n_inputs; i++)
		if (!wide[i].data)
			wide[i].data = given[i].data;
	if (wide)
		eo->inputs = wide;
	if (t && !rc && (!(xt = exec_run(t, eo, NULL, &e)) || !(xt = unskipped(t, eo, xt, &carry, &e)))) {
		err_print(tpath, &e);
		rc = e.code;
	}
	if (xt && !widen)
		r->narrow = narrowest_float(t, xt);
	if (xt && (rc = gradcheck(m, t, xt, ml->fn >= 0, eo->seed, &r->rtol, &r->atol, r->rows, &r->n_rows, r->log,
				 &r->n_log, &r->all_ok, &e)))
		err_print(mpath, &e);
	exec_free(xt);
	carried_free(&carry);
	for (size_t i = 0; wide && i < eo->n_inputs; i++)
		if (wide[i].data != given[i].data)
			xfree(wide[i].data);
	xfree(wide);
	eo->inputs = given;
	graph_free(m);
	graph_free(t);
	return rc;
}

/* The directions tried, then the table (or the inconclusive verdict). */
static void report_once(const struct gc_result *r, enum cli_out fmt)
{
	for (int i = 0; i < r->n_log; i++) /* stdout stays JSON or YAML when asked for */
		if (fmt == OUT_TEXT)
			printf("%s\n", r->log[i].what);
		else if (r->n_rows)
			gd_note("--gradcheck: %s", r->log[i].what);
	if (!r->n_rows)
		report_inconclusive(fmt, r->log, r->n_log);
	else
		report(fmt, r->rows, r->n_rows, r->all_ok, r->rtol, r->atol, 1, 1);
}

/* verify --gradcheck MODEL TRAIN. rtol or atol NaN: chosen from TRAIN's gradients' dtype. A
 * float32 or 16-bit TRAIN whose gradients differ from the differences is checked again widened to
 * float64, the same graph with every float a double: where that matches, the graph is right and
 * the difference is its narrow floats' rounding (a BatchNorm over two values puts float32's
 * activations within its rounding of a Relu's kink, and float32's gradient is then not
 * float64's), which the table above the widened one shows; a wrong gradient differs in both. */
int run_gradcheck(const char *mpath, const char *tpath, const struct model_loss *ml, struct exec_binding *dims,
		  size_t *n_dims, struct exec_opts *eo, double rtol, double atol, enum cli_out fmt)
{
	struct gc_result r = {.rtol = rtol, .atol = atol}, w = {.rtol = rtol, .atol = atol};
	int rc = check_once(mpath, tpath, ml, dims, n_dims, eo, 0, &r);
	int again = !rc && r.n_rows && !r.all_ok && r.narrow != DT_DOUBLE;
	if (!rc && (fmt == OUT_TEXT || !again))
		report_once(&r, fmt);
	if (again && !(rc = check_once(mpath, tpath, ml, dims, n_dims, eo, 1, &w))) {
		const char *what = r.narrow == DT_FLOAT ? "float32" : r.narrow == DT_FLOAT16 ? "float16" : "bfloat16";
		if (fmt == OUT_TEXT)
			printf("\nTRAIN computes in %s, and differs from the float64 differences above; TRAIN widened to "
			       "float64 (the same graph, every float a double):\n", what);
		else
			gd_note("--gradcheck: TRAIN in %s differs from the float64 differences; the report is TRAIN "
				"widened to float64's", what);
		report_once(&w, fmt);
		if (fmt == OUT_TEXT && w.n_rows && w.all_ok)
			printf("the graph's gradients are right: widened to float64 they match, so what differs in %s is "
			       "its rounding on these inputs, not the graph\n", what);
	}
	int verdict = again ? (!w.n_rows ? GD_EINCONCLUSIVE : w.all_ok ? 0 : GD_ECHECK)
			    : (!r.n_rows ? GD_EINCONCLUSIVE : r.all_ok ? 0 : GD_ECHECK);
	result_free(&r);
	result_free(&w);
	return rc ? rc : verdict;
}
