/* diet.c - the DietAdam op; see diet.h. */
#include "diet.h"
#include "../util/philox.h"
#include "kernel.h"
#include "ops.h"

#include <math.h>
#include <string.h>

double diet_lr(double lr, int noam, double warmup, double t)
{
	if (noam)
		return lr * fmin(t * pow(warmup, -1.5), 1 / sqrt(t));
	return lr * fmin(t / warmup, 1);
}

int16_t diet_quantize(double x, double scale, double u)
{
	double y = x / scale;
	if (isnan(y))
		return 0;
	if (u < 0)
		y = nearbyint(y);
	else
		y = copysign(floor(fabs(y) + u), y);
	return (int16_t)(y > DIET_QMAX ? DIET_QMAX : y < -DIET_QMAX ? -DIET_QMAX : y);
}

/* The gradient row by row: dense (g of q's shape), or the rows ScatterND(zeros, idx, g, add)
 * would make, summed as it sums them (in g's dtype, in index order), without the dense matrix. */
struct grad_rows {
	const struct rtensor *g;
	int64_t cols;
	int64_t *head, *next; /* sparse: each row's first update, and each update's next for its row (-1 ends) */
	struct rtensor acc;   /* sparse: one row in g's dtype */
};

static void grad_row(struct grad_rows *r, int64_t i, double *out)
{
	const struct rtensor *from = r->g;
	int64_t at = i * r->cols;
	if (r->head) {
		memset(r->acc.data, 0, r->acc.nbytes);
		for (int64_t u = r->head[i]; u >= 0; u = r->next[u])
			for (int64_t j = 0; j < r->cols; j++)
				rt_set(&r->acc, j, rt_get(&r->acc, j) + rt_get(r->g, u * r->cols + j));
		from = &r->acc;
		at = 0;
	}
	for (int64_t j = 0; j < r->cols; j++) /* at float32 precision, as a Cast to float32 leaves it */
		out[j] = (float)rt_get(from, at + j);
}

/* Links the updates of each row (in index order); fails on an index out of range. */
static int grad_rows_link(struct exec *x, struct grad_rows *r, const struct rtensor *idx, int64_t rows)
{
	for (int64_t i = 0; i < rows; i++)
		r->head[i] = -1;
	int64_t *tail = r->next; /* built backwards: the last update first, then prepended */
	for (int64_t u = idx->numel; u-- > 0;) {
		int64_t i = rt_get_i(idx, u);
		if (i < 0)
			i += rows;
		if (i < 0 || i >= rows)
			return exec_fail(x, "index %lld is out of range for %lld rows", (long long)rt_get_i(idx, u),
					 (long long)rows);
		tail[u] = r->head[i];
		r->head[i] = u;
	}
	return 0;
}

static int diet_adam_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *q = in[0], *g = in[1], *t = in[2], *m = n->n_in > 3 ? in[3] : NULL;
	const struct rtensor *v1 = n->n_in > 4 ? in[4] : NULL, *v2 = n->n_in > 5 ? in[5] : NULL;
	const struct rtensor *idx = n->n_in > 6 ? in[6] : NULL;
	if (q->dtype != DT_INT16)
		return exec_fail(x, "the parameter must be int16, not %s", dtype_name(q->dtype));
	if (!is_float(g) && g->dtype != DT_FLOAT16 && g->dtype != DT_BFLOAT16)
		return exec_fail(x, "the gradient must be float32, float64, float16 or bfloat16, not %s",
				 dtype_name(g->dtype));
	if (!v1 || t->numel != 1)
		return exec_fail(x, "needs the parameter, its gradient, the step and the second moment");
	/* row by row: a matrix's rows, else one element at a time (no row buffer of the whole tensor) */
	int64_t rows = q->ndim == 2 ? q->dims[0] : q->numel, cols = q->ndim == 2 ? q->dims[1] : 1;
	if (idx) {
		if (q->ndim != 2 || idx->ndim < 1 || idx->dims[idx->ndim - 1] != 1 || g->numel != idx->numel * cols ||
		    (idx->dtype != DT_INT64 && idx->dtype != DT_INT32))
			return exec_fail(x, "row updates need a 2-D parameter, indices (..., 1) of int64 or int32 "
					    "and a gradient of (..., columns)");
	} else if (g->numel != q->numel) {
		return exec_fail(x, "the gradient must have the parameter's shape");
	}
	if (v2 ? q->ndim != 2 || v1->numel != rows || v2->numel != cols : v1->numel != q->numel)
		return exec_fail(x, "the second moment must be %s", v2 ? "factored as (rows) and (columns) of a 2-D parameter"
								  : "of the parameter's shape");
	if (m && m->numel != q->numel)
		return exec_fail(x, "the momentum must have the parameter's shape");
	/* every updated slot is an output: the next step needs it */
	if ((m && !(n->n_out > 1 && n->out[1])) || !(n->n_out > 2 && n->out[2]) || (v2 && !(n->n_out > 3 && n->out[3])))
		return exec_fail(x, "the updated momentum and second moment must be outputs");
	if (!attr_str_is(n, "schedule", "noam", 1) && !attr_str_is(n, "schedule", "none", 0))
		return exec_fail(x, "schedule must be noam or none");
	if (!attr_str_is(n, "round", "stochastic", 1) && !attr_str_is(n, "round", "nearest", 0))
		return exec_fail(x, "round must be stochastic or nearest");
	int16_t *qo = exec_alloc(x, out[0], DT_INT16, q->ndim, q->dims);
	void *mo = m ? exec_alloc(x, out[1], m->dtype, m->ndim, m->dims) : NULL;
	void *v1o = exec_alloc(x, out[2], v1->dtype, v1->ndim, v1->dims);
	void *v2o = v2 ? exec_alloc(x, out[3], v2->dtype, v2->ndim, v2->dims) : NULL;
	if (!qo || (m && !mo) || !v1o || (v2 && !v2o))
		return exec_status(x); /* shapes only, or out of memory */
	double b1 = attr_float(n, "beta1", DIET_BETA1), b2 = attr_float(n, "beta2", DIET_BETA2);
	double eps = attr_float(n, "epsilon", DIET_EPS), scale = attr_float(n, "scale", DIET_SCALE), step = rt_get(t, 0);
	double lr = diet_lr(attr_float(n, "lr", DIET_LR), attr_str_is(n, "schedule", "noam", 1),
			    attr_float(n, "warmup", DIET_WARMUP), step);
	int stochastic = attr_str_is(n, "round", "stochastic", 1);
	if (!(step >= 1))
		return exec_fail(x, "the step must count from 1, not %g", step);
	double bc = 1 - pow(b2, step), cmean = 0;
	uint64_t key = exec_node_seed(x, n) ^ ((uint64_t)step * 0x9e3779b97f4a7c15ull);
	struct grad_rows gr = {.g = g, .cols = cols};
	size_t rowb = sizeof(double) * (size_t)(cols ? cols : 1), linkb = idx ? sizeof(int64_t) * (size_t)(rows + idx->numel) : 0;
	size_t accb = idx ? dtype_size(g->dtype) * (size_t)cols : 0;
	double *row = exec_scratch(x, rowb), *colsum = row && v2 ? exec_scratch(x, rowb) : NULL;
	gr.head = row && (colsum || !v2) && idx ? exec_scratch(x, linkb ? linkb : 1) : NULL;
	gr.acc = (struct rtensor){.dtype = g->dtype, .ndim = 1, .dims = {cols}, .numel = cols, .nbytes = accb};
	gr.acc.data = gr.head ? exec_scratch(x, accb ? accb : 1) : NULL;
	int rc = !row || (v2 && !colsum) || (idx && !gr.acc.data) ? exec_status(x) : 0;
	if (!rc && idx) {
		gr.next = gr.head + rows;
		rc = grad_rows_link(x, &gr, idx, rows);
	}
	/* the moments first: v1' and v2' (and their means, for the factored denominator) */
	for (int64_t i = 0; !rc && v2 && i < rows; i++) {
		grad_row(&gr, i, row);
		double s = 0;
		for (int64_t j = 0; j < cols; j++) {
			s += row[j] * row[j];
			colsum[j] += row[j] * row[j];
		}
		rt_set(out[2], i, b2 * rt_get(v1, i) + (1 - b2) * s / (double)cols);
	}
	for (int64_t j = 0; !rc && v2 && j < cols; j++) {
		rt_set(out[3], j, b2 * rt_get(v2, j) + (1 - b2) * colsum[j] / (double)rows);
		cmean += sqrt(rt_get(out[3], j) / bc) + eps;
	}
	cmean /= (double)(cols ? cols : 1);
	for (int64_t i = 0; !rc && i < rows; i++) {
		grad_row(&gr, i, row);
		for (int64_t j = 0, k = i * cols; j < cols; j++, k++) {
			double gk = row[j], u = gk, denom;
			if (m) {
				u = b1 * rt_get(m, k) + (1 - b1) * gk;
				rt_set(out[1], k, u);
			}
			if (v2) {
				denom = (sqrt(rt_get(out[2], i) / bc) + eps) * (sqrt(rt_get(out[3], j) / bc) + eps) / cmean;
			} else {
				double v = b2 * rt_get(v1, k) + (1 - b2) * gk * gk;
				rt_set(out[2], k, v);
				denom = sqrt(v / bc) + eps;
			}
			double w = ((const int16_t *)q->data)[k] * scale - lr * u / denom;
			qo[k] = diet_quantize(w, scale, stochastic ? philox_uniform(key, (uint64_t)k) : -1);
		}
	}
	exec_scratch_free(x, gr.acc.data, accb ? accb : 1);
	exec_scratch_free(x, gr.head, linkb ? linkb : 1);
	exec_scratch_free(x, colsum, rowb);
	exec_scratch_free(x, row, rowb);
	return rc;
}

const struct op_impl op_diet_adam = {.run = diet_adam_run, .recompute = RC_NEVER, .nodiff = ~0u,
				     .own_width = 1u << 1 /* the gradient, any float width */};
