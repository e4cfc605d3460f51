/* gradcheck.c - `graphdiet verify --gradcheck`: a training graph's gradients against finite differences. */
#include "../exec/exec.h"
#include "../rewrite/widen.h"
#include "../util/philox.h"
#include "../util/xalloc.h"
#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --gradcheck: TRAIN's gradients against central finite differences of MODEL's loss, computed in
 * float64 (MODEL widened, rewrite/widen.h) on TRAIN's own inputs, along seeded random unit
 * directions d over every parameter TRAIN gives a gradient for: sum(grad . d) against
 * (L(theta + h d) - L(theta - h d)) / 2h, h = 1e-5 max(1, |theta|). Only the executor's forward
 * pass is trusted, not autodiff. Infinite entries (a causal mask's -inf, stored as a float
 * initializer) are left out of d and of |theta|: theta +- h d keeps them as they are. */
enum { GRADCHECK_DIRECTIONS = 3 };

struct fd_param {
	const struct value *p;      /* MODEL's initializer */
	const struct rtensor *grad; /* TRAIN's gradient */
	struct rtensor theta, d;    /* float64 */
};

static double model_loss(struct graph *m, const struct value *loss, struct exec_opts *eo, struct gd_err *e, int *rc)
{
	struct exec *x = exec_run(m, eo, NULL, e);
	double l = x ? rt_get(exec_value(x, loss), 0) : NAN;
	*rc = x ? 0 : e->code;
	exec_free(x);
	return l;
}

static int gradcheck(struct graph *m, struct graph *train, struct exec *xt, int appended, uint64_t seed,
		     double rtol, double atol, struct row *rows, size_t *n_rows, int *all_ok, struct gd_err *e)
{
	if (graph_widen_f64(m, e))
		return e->code;
	/* MODEL's loss: the one --loss-fn appended (its last output), else the scalar float output
	 * TRAIN also gives */
	const struct value *loss = appended && m->n_outputs ? m->outputs[m->n_outputs - 1] : NULL;
	for (uint32_t i = 0; i < m->n_outputs && !loss; i++) {
		const struct value *t = strmap_get(&train->names, m->outputs[i]->name);
		const struct rtensor *tv = t && (t->flags & VALUE_OUTPUT) ? exec_value(xt, t) : NULL;
		if (tv && tv->numel == 1 && dtype_is_float(tv->dtype) && !(t->flags & VALUE_GRAD))
			loss = m->outputs[i];
	}
	if (!loss)
		return err_set(e, GD_EINPUT, "--gradcheck: no scalar output of MODEL is also TRAIN's");
	/* TRAIN's inputs and parameters, in float64, for MODEL */
	size_t n = 0, cap = m->n_inputs + m->n_inits + 1;
	struct fd_param *fp = xcalloc(cap, sizeof *fp);
	struct rtensor *in = xcalloc(cap, sizeof *in);
	const char **names = xcalloc(cap, sizeof *names);
	size_t n_in = 0;
	int rc = !fp || !in || !names ? err_oom(e) : 0;
	double norm2 = 0, theta2 = 0;
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
	double h = 1e-5 * fmax(1, sqrt(theta2));
	struct exec_opts eo = {.inputs = in, .input_names = names, .n_inputs = n_in, .seed = seed, .default_dim = 2};
	for (int dir = 0; !rc && dir < GRADCHECK_DIRECTIONS; dir++) {
		/* d: standard normal per element, then scaled to unit length over all parameters */
		norm2 = 0;
		for (size_t j = 0; j < n; j++)
			for (int64_t k = 0; k < fp[j].d.numel; k++) {
				double r = philox_normal(seed * 7919 + (uint64_t)dir * 104729 + j, (uint64_t)k);
				if (!isfinite(rt_get(&fp[j].theta, k)))
					r = 0; /* an infinite entry (a causal mask's -inf) has no neighbourhood to difference */
				rt_set(&fp[j].d, k, r);
				norm2 += r * r;
			}
		double dot = 0, lp, lm;
		for (size_t j = 0; j < n; j++)
			for (int64_t k = 0; k < fp[j].d.numel; k++) {
				rt_set(&fp[j].d, k, rt_get(&fp[j].d, k) / sqrt(norm2));
				dot += rt_get(fp[j].grad, k) * rt_get(&fp[j].d, k);
			}
		/* theta + h d, then theta - h d, in place of each parameter's input */
		for (int sign = 1; sign >= -1 && !rc; sign -= 2) {
			for (size_t j = 0; j < n; j++)
				for (size_t q = 0; q < n_in; q++)
					if (names[q] == fp[j].p->name)
						for (int64_t k = 0; k < fp[j].d.numel; k++)
							rt_set(&in[q], k, rt_get(&fp[j].theta, k) + sign * h * rt_get(&fp[j].d, k));
			double l = model_loss(m, loss, &eo, e, &rc);
			*(sign > 0 ? &lp : &lm) = l;
		}
		if (rc)
			break;
		double fd = (lp - lm) / (2 * h), diff = fabs(dot - fd);
		struct row *r = &rows[(*n_rows)++];
		char *name = malloc(64);
		if (name)
			snprintf(name, 64, "d%d: %.7g vs %.7g", dir + 1, dot, fd);
		*r = (struct row){.name = name ? name : "direction", .owned = name != NULL, .found = 1,
				  .max_abs = diff, .max_rel = fd != 0 ? diff / fabs(fd) : diff > 0 ? INFINITY : 0,
				  .norm_rel = fd != 0 ? diff / fabs(fd) : 0};
		r->ok = isfinite(dot) && isfinite(fd) && diff <= atol + rtol * fabs(fd);
		*all_ok &= r->ok;
	}
	for (size_t j = 0; fp && j < n; j++) {
		xfree(fp[j].d.data);
		xfree(fp[j].theta.data);
	}
	for (size_t q = 0; in && q < n_in; q++)
		xfree(in[q].data);
	xfree(fp);
	xfree(in);
	xfree(names);
	return rc;
}

/* verify --gradcheck MODEL TRAIN: TRAIN on seeded random inputs, past any step its dynamic loss
 * scale skips, then gradcheck. */
int run_gradcheck(const char *mpath, const char *tpath, const struct model_loss *ml, struct exec_binding *dims,
			 size_t *n_dims, struct exec_opts *eo, double rtol, double atol, enum cli_out fmt)
{
	int rc = 0, all_ok = 1;
	struct gd_err e = {0};
	struct graph *m = load_model(mpath, ml, &rc), *t = m ? cli_load(tpath, FMT_AUTO, &rc) : NULL;
	struct carried carry = {0};
	struct row rows[GRADCHECK_DIRECTIONS];
	size_t n_rows = 0;
	struct exec *xt = NULL;
	if (t && bind_like_train(m, t, dims, n_dims, &e)) {
		err_print(tpath, &e);
		rc = e.code;
	}
	eo->dims = dims;
	eo->n_dims = *n_dims;
	if (t && !rc && (!(xt = exec_run(t, eo, NULL, &e)) || !(xt = unskipped(t, eo, xt, &carry, &e)))) {
		err_print(tpath, &e);
		rc = e.code;
	}
	if (xt && (rc = gradcheck(m, t, xt, ml->fn >= 0, eo->seed, rtol, atol, rows, &n_rows, &all_ok, &e)))
		err_print(mpath, &e);
	if (xt && !rc)
		report(fmt, rows, n_rows, all_ok, rtol, atol, 1, 1);
	for (size_t i = 0; i < n_rows; i++)
		if (rows[i].owned)
			free((char *)rows[i].name);
	exec_free(xt);
	carried_free(&carry);
	graph_free(m);
	graph_free(t);
	return rc ? rc : all_ok ? 0 : GD_ECHECK;
}

