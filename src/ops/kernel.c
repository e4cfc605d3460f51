/* kernel.c - helpers shared by the op families; see kernel.h. */
#include "kernel.h"
#include "vmath.h"
#include "../util/pool.h"

#include <string.h>

int64_t attr_int(const struct node *n, const char *name, int64_t dflt)
{
	const struct attr *a = node_attr(n, name);
	return a && a->type == ATTR_INT ? a->i : dflt;
}

float attr_float(const struct node *n, const char *name, float dflt)
{
	const struct attr *a = node_attr(n, name);
	return a && a->type == ATTR_FLOAT ? a->f : a && a->type == ATTR_INT ? (float)a->i : dflt;
}

const int64_t *attr_ints(const struct node *n, const char *name, size_t *count)
{
	const struct attr *a = node_attr(n, name);
	if (!a || a->type != ATTR_INTS) {
		*count = 0;
		return NULL;
	}
	*count = a->n;
	return a->ints;
}

int attr_str_is(const struct node *n, const char *name, const char *s, int dflt)
{
	const struct attr *a = node_attr(n, name);
	if (!a || a->type != ATTR_STRING)
		return dflt;
	return a->s.n == strlen(s) && memcmp(a->s.p, s, a->s.n) == 0;
}

int norm_axis(struct exec *x, int64_t axis, int rank, int *out)
{
	if (axis < -rank || axis >= rank || (rank == 0 && axis != 0))
		return exec_fail(x, "axis %lld is out of range for rank %d", (long long)axis, rank);
	*out = (int)(axis < 0 ? axis + rank : axis);
	return 0;
}

int bcast_shape(struct exec *x, struct rtensor *const *ts, int n, int *ndim, int64_t *dims)
{
	int r = 0;
	for (int k = 0; k < n; k++)
		if (ts[k]->ndim > r)
			r = ts[k]->ndim;
	for (int i = 0; i < r; i++) {
		int64_t d = 1;
		for (int k = 0; k < n; k++) {
			int j = i - (r - ts[k]->ndim);
			if (j < 0)
				continue;
			int64_t e = ts[k]->dims[j];
			if (e == d || e == 1)
				continue;
			if (d != 1)
				return !x ? 1
					  : exec_fail(x, "shapes cannot be broadcast together (dimension %d: %lld vs %lld)",
						      i, (long long)d, (long long)e);
			d = e;
		}
		dims[i] = d;
	}
	*ndim = r;
	return 0;
}

void c_strides(int ndim, const int64_t *dims, int64_t *strides)
{
	int64_t s = 1;
	for (int i = ndim - 1; i >= 0; i--) {
		strides[i] = s;
		s *= dims[i];
	}
}

void bcast_strides(const struct rtensor *t, int ndim, const int64_t *dims, int64_t *strides)
{
	int64_t own[RT_MAX_DIMS];
	c_strides(t->ndim, t->dims, own);
	for (int i = 0; i < ndim; i++) {
		int j = i - (ndim - t->ndim);
		strides[i] = j < 0 || (t->dims[j] == 1 && dims[i] != 1) ? 0 : own[j];
	}
}

int is_float(const struct rtensor *t)
{
	return t->dtype == DT_FLOAT || t->dtype == DT_DOUBLE;
}

int want_float(struct exec *x, const struct rtensor *t, const char *what)
{
	if (is_float(t))
		return 0;
	return exec_fail(x, "%s must be float32 or float64, not %s", what, dtype_name(t->dtype));
}

int node_axes(struct exec *x, const struct node *n, struct rtensor *const *in, int64_t *axes, int *count)
{
	*count = 0;
	if (n->n_in > 1 && in[1])
		return rt_ints(x, in[1], "axes", axes, RT_MAX_DIMS, count);
	size_t k;
	const int64_t *a = attr_ints(n, "axes", &k);
	if (k > RT_MAX_DIMS)
		return exec_fail(x, "too many axes");
	for (size_t i = 0; i < k; i++)
		axes[i] = a[i];
	*count = (int)k;
	return 0;
}

int merge_axes(int nd, const int64_t *dims, const int64_t *st, int64_t *D, int64_t *S)
{
	int R = 0;
	for (int i = 0; i < nd; i++) {
		if (dims[i] == 1)
			continue;
		if (R && S[R - 1] == st[i] * dims[i]) { /* the outer axis steps over the inner one whole */
			D[R - 1] *= dims[i];
			S[R - 1] = st[i];
			continue;
		}
		D[R] = dims[i];
		S[R++] = st[i];
	}
	return R;
}

#define RUN_LANES 8

/* One loop per dtype and kind: with the choice inside it, GCC leaves the lanes scalar. */
#define RUN(T, TERM)                                                                   \
	do {                                                                           \
		const T *p = (const T *)a->data + at;                                  \
		for (; i + RUN_LANES <= n; i += RUN_LANES)                             \
			for (int k = 0; k < RUN_LANES; k++) {                          \
				double d = (double)p[i + k] - c;                       \
				s[k] += TERM;                                          \
			}                                                              \
		for (; i < n; i++) {                                                   \
			double d = (double)p[i] - c;                                   \
			t += TERM;                                                     \
		}                                                                      \
	} while (0)

VM_CLONES double run_sum(const struct rtensor *a, int64_t at, int64_t n, int squares, double c)
{
	double s[RUN_LANES] = {0}, t = 0;
	int64_t i = 0;
	if (a->dtype == DT_FLOAT && squares)
		RUN(float, d * d);
	else if (a->dtype == DT_FLOAT)
		RUN(float, d);
	else if (squares)
		RUN(double, d * d);
	else
		RUN(double, d);
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + t;
}
#undef RUN

struct cut {
	void (*fn)(void *arg, int64_t lo, int64_t hi);
	void *arg;
	int64_t n, step;
};

static void cut_piece(void *arg, uint32_t i, uint32_t w)
{
	(void)w;
	const struct cut *c = arg;
	int64_t lo = (int64_t)i * c->step, hi = lo + c->step < c->n ? lo + c->step : c->n;
	c->fn(c->arg, lo, hi);
}

void kernel_for(int64_t n, int64_t grain, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg)
{
	int64_t pieces = n / (grain > 0 ? grain : 1), most = 4 * (int64_t)pool_threads();
	if (pieces > most)
		pieces = most;
	if (pieces < 2 || pool_threads() < 2) {
		if (n > 0)
			fn(arg, 0, n);
		return;
	}
	struct cut c = {fn, arg, n, (n + pieces - 1) / pieces};
	pool_for((uint32_t)((n + c.step - 1) / c.step), cut_piece, &c);
}
