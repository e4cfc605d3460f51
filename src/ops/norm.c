/* norm.c - Softmax, LogSoftmax, LayerNormalization, BatchNormalization, Dropout.
 *
 * Softmax and LogSoftmax follow opset 13+: normalise along one axis (default -1); before opset 13
 * the input was coerced to 2-D at `axis` (default 1), which is the same as normalising over all
 * trailing dimensions together. LayerNormalization normalises over dimensions axis..rank-1 and can
 * also output the mean and 1/stddev; BatchNormalization in training mode (opset 14+) uses the batch
 * statistics and outputs updated running statistics as the spec and onnxruntime do: momentum, and
 * the batch (population) variance. PyTorch updates with the unbiased one; the training graph of a
 * PyTorch export states that correction in standard ops (rewrite/step.c), so every runtime agrees.
 * InstanceNormalization normalises each (n, c) plane. Dropout in training mode draws its mask from
 * Philox keyed by the node's seed attribute (or the run's seed and the node's name) and the training
 * step, so a recomputed Dropout draws its step's mask. InstanceNormalization, GroupNormalization,
 * MeanVarianceNormalization, LpNormalization and LRN run on float32 and float64 as norm_stat.c's
 * typed loops, which keep the bits of the per-element walks here (those take the other dtypes). */
#include "../util/philox.h"
#include "../util/pool.h"
#include "../util/xalloc.h"
#include "../autodiff/ad.h"
#include "kernel.h"
#include "norm_stat.h"
#include "vmath.h"

#include <math.h>
#include <string.h>

/* float32 rows of len elements, normalised one by one: pieces [o0, o1) of kernel_for. */
struct rows {
	const float *a, *scale, *bias;
	float *y, *mean, *inv;
	int64_t len;
	int logsm;
	double eps;
	const int64_t *col; /* log_softmax_pick's */
	double *picked;
};

/* The row's maximum (NaNs passed over), exact in any order: lanes of GCC vectors of eight, compared
 * and blended. The plain a > b ? a : b loop stays scalar (GCC vectorises it only when told that no
 * NaNs come), which made Softmax's max a third of its time. Four of them, independent. */
typedef float row_f8 __attribute__((vector_size(32)));
typedef int32_t row_i8 __attribute__((vector_size(32)));
VM_CLONES static float row_max(const float *p, int64_t len)
{
	row_f8 l[4], v;
	for (int k = 0; k < 8; k++)
		l[0][k] = -INFINITY;
	l[1] = l[2] = l[3] = l[0];
	int64_t i = 0;
	for (; i + 32 <= len; i += 32) /* four independent lanes of 8 */
		for (int u = 0; u < 4; u++) {
			memcpy(&v, p + i + 8 * u, sizeof v);
			row_i8 gt = v > l[u];
			l[u] = (row_f8)(((row_i8)v & gt) | ((row_i8)l[u] & ~gt));
		}
	float m = -INFINITY;
	for (; i < len; i++)
		m = p[i] > m ? p[i] : m;
	for (int u = 0; u < 4; u++)
		for (int k = 0; k < 8; k++)
			m = l[u][k] > m ? l[u][k] : m;
	return m;
}

VM_CLONES static void softmax_rows(void *arg, int64_t o0, int64_t o1)
{
	const struct rows *j = arg;
	int64_t len = j->len;
	for (int64_t o = o0; o < o1; o++) {
		const float *p = j->a + o * len;
		float *q = j->y + (j->col ? o0 : o) * len, m = row_max(p, len);
		/* LogSoftmax's and the picked rows keep z alone: p - m <= 0, and vm_expf_row's cut at
		 * e^-87 changes no bits of z (but at a rounding boundary; the test
		 * exec/log_softmax_terms_far_below_the_max_change_nothing). SoftmaxCrossEntropyLoss 1024 x
		 * 2000, 1 thread: 1.15 -> 0.84 ms, LogSoftmax 1.25 -> 0.93 ms (bench_roofline, best of 9,
		 * interleaved x3); Softmax's own outputs are those terms, so it keeps vm_expf. */
		if (j->logsm)
			for (int64_t k = 0; k < len; k++)
				q[k] = vm_expf_row(p[k] - m);
		else
			for (int64_t k = 0; k < len; k++)
				q[k] = vm_expf(p[k] - m);
		/* the exponentials' sum in run_sum's fixed lanes */
		struct rtensor e = {.dtype = DT_FLOAT, .data = q};
		double z = run_sum(&e, 0, len, 0, 0.0);
		if (j->col) {
			float lz = (float)log(z), v = j->col[o] >= 0 ? p[j->col[o]] - m - lz : 0;
			j->picked[o] = v;
		} else if (j->logsm) {
			float lz = (float)log(z);
			for (int64_t k = 0; k < len; k++)
				q[k] = p[k] - m - lz;
		} else {
			float iz = (float)(1 / z);
			for (int64_t k = 0; k < len; k++)
				q[k] = q[k] * iz;
		}
	}
}

void softmax_last(const float *a, float *y, int64_t rows, int64_t len, int logsm)
{
	struct rows j = {.a = a, .y = y, .len = len, .logsm = logsm};
	kernel_for(rows, KERNEL_GRAIN / (len + 1) + 1, softmax_rows, &j);
}

/* The exponentials of a piece's rows all go to its first row's place in work, which stays in
 * cache, and only the one log-probability is made, the float softmax_rows' last pass makes:
 * SoftmaxCrossEntropyLoss's 1024 x 2000 at 1 thread, 1.26 -> 1.15 ms (bench_roofline, best of 7;
 * vm_expf's vector loop is most of what is left). */
void log_softmax_pick(const float *a, float *work, const int64_t *col, double *picked, int64_t rows, int64_t len)
{
	struct rows j = {.a = a, .y = work, .len = len, .logsm = 1, .col = col, .picked = picked};
	kernel_for(rows, KERNEL_GRAIN / (len + 1) + 1, softmax_rows, &j);
}

/* Normalises over [axis, axis+span) as a block: (outer, len, inner) view. */
static int softmax_like(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out,
			int logsm)
{
	const struct rtensor *a = in[0];
	if (want_float(x, a, "the input"))
		return exec_status(x);
	int r = a->ndim, ax;
	int legacy = exec_opset(x) < 13;
	if (norm_axis(x, attr_int(n, "axis", legacy ? 1 : -1), r ? r : 1, &ax))
		return exec_status(x);
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	int64_t outer = 1, len = 1, inner = 1;
	for (int i = 0; i < r; i++) {
		if (i < ax)
			outer *= a->dims[i];
		else if (i == ax || legacy)
			len *= a->dims[i];
		else
			inner *= a->dims[i];
	}
	if (a->dtype == DT_FLOAT && inner == 1) { /* the common case: the last axis */
		softmax_last(a->data, out[0]->data, outer, len, logsm);
		return 0;
	}
	for (int64_t o = 0; o < outer; o++)
		for (int64_t k = 0; k < inner; k++) {
			int64_t base = o * len * inner + k;
			double m = -INFINITY, z = 0;
			for (int64_t j = 0; j < len; j++)
				m = fmax(m, rt_get(a, base + j * inner));
			for (int64_t j = 0; j < len; j++)
				z += exp(rt_get(a, base + j * inner) - m);
			for (int64_t j = 0; j < len; j++) {
				double v = rt_get(a, base + j * inner) - m;
				rt_set(out[0], base + j * inner, logsm ? v - log(z) : exp(v) / z);
			}
		}
	return 0;
}

static int softmax_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return softmax_like(x, n, in, out, 0);
}

static int log_softmax_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	return softmax_like(x, n, in, out, 1);
}

/* The mean of a's len elements from off, and their (population) variance in *var, in double. */
static double moments(const struct rtensor *a, int64_t off, int64_t len, double *var)
{
	double mean = 0, q = 0;
	for (int64_t j = 0; j < len; j++)
		mean += rt_get(a, off + j);
	mean /= (double)len;
	for (int64_t j = 0; j < len; j++) {
		double d = rt_get(a, off + j) - mean;
		q += d * d;
	}
	*var = q / (double)len;
	return mean;
}

VM_CLONES static void layer_norm_rows(void *arg, int64_t o0, int64_t o1)
{
	const struct rows *j = arg;
	int64_t len = j->len;
	const float *sc = j->scale, *bi = j->bias;
	for (int64_t o = o0; o < o1; o++) {
		const float *p = j->a + o * len;
		float *q = j->y + o * len;
		struct rtensor row = {.dtype = DT_FLOAT, .data = (void *)p};
		double mean = run_sum(&row, 0, len, 0, 0) / (double)len, var = run_sum(&row, 0, len, 1, mean);
		float inv = (float)(1 / sqrt(var / (double)len + j->eps)), m = (float)mean;
		for (int64_t k = 0; k < len; k++)
			q[k] = (p[k] - m) * inv * sc[k] + (bi ? bi[k] : 0);
		if (j->mean)
			j->mean[o] = m;
		if (j->inv)
			j->inv[o] = inv;
	}
}

static int layer_norm_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *scale = in[1], *bias = n->n_in > 2 ? in[2] : NULL;
	if (want_float(x, a, "X"))
		return exec_status(x);
	int ax;
	if (norm_axis(x, attr_int(n, "axis", -1), a->ndim, &ax))
		return exec_status(x);
	double eps = attr_float(n, "epsilon", 1e-5f);
	int64_t outer = 1, len = 1, sdims[RT_MAX_DIMS];
	for (int i = 0; i < a->ndim; i++) {
		if (i < ax)
			outer *= a->dims[i];
		else
			len *= a->dims[i];
		sdims[i] = i < ax ? a->dims[i] : 1;
	}
	if (scale->numel != len || (bias && bias->numel != len))
		return exec_fail(x, "Scale and B must have the normalised dimensions' %lld elements", (long long)len);
	void *y = exec_alloc(x, out[0], a->dtype, a->ndim, a->dims);
	void *mo = n->n_out > 1 && n->out[1] ? exec_alloc(x, out[1], DT_FLOAT, a->ndim, sdims) : NULL;
	void *so = n->n_out > 2 && n->out[2] ? exec_alloc(x, out[2], DT_FLOAT, a->ndim, sdims) : NULL;
	if (!y)
		return exec_status(x);
	if (a->dtype == DT_FLOAT && scale->dtype == DT_FLOAT && (!bias || bias->dtype == DT_FLOAT)) {
		struct rows j = {a->data, scale->data, bias ? bias->data : NULL, y, mo, so, len, 0, eps, NULL, NULL};
		kernel_for(outer, KERNEL_GRAIN / (len + 1) + 1, layer_norm_rows, &j);
		return 0;
	}
	for (int64_t o = 0; o < outer; o++) {
		double var, mean = moments(a, o * len, len, &var);
		double inv = 1 / sqrt(var + eps);
		for (int64_t j = 0; j < len; j++)
			rt_set(out[0], o * len + j,
			       (rt_get(a, o * len + j) - mean) * inv * rt_get(scale, j) + (bias ? rt_get(bias, j) : 0));
		if (mo)
			rt_set(out[1], o, mean);
		if (so)
			rt_set(out[2], o, inv);
	}
	return 0;
}

/* float32 BatchNormalization. In training, each channel's mean and variance are run_sum's over its
 * planes in order (the variance about the mean), and the running statistics (rm, rv, when wanted)
 * are updated with them as the spec says.
 *
 * One thread takes a channel at a time: its planes' three passes stay in cache. With more, a
 * channel-split would give each thread a slice of every image, half of them written by the other
 * core (the Conv or ReLU before works in memory order, image by image), and on this project's
 * virtual machine, whose two vCPUs sit on different dies at times, such a read waits on the other
 * die's cache. So there each pass (the planes' sums, their squares about the channel's mean, the
 * normalised planes) runs over the planes in memory order, and each channel combines its planes'
 * sums in image order after the pass: the same sums, the same bits. */
struct bn {
	const struct rtensor *a, *scale, *bias, *rmean, *rvar;
	float *y;
	struct rtensor *rm, *rv;
	int64_t nb, c, inner;
	int training;
	double eps, mom;
	double *part, *mean;  /* the plane-order passes: each plane's sum; each channel's mean */
	float *coef;          /* and each channel's m, inv, g, bb */
};

/* Channel ch's mean (squares 0) or variance about mean (squares 1): its planes' sums, part[b c + ch]
 * or run_sum's when part is NULL, added in image order, over the count. */
static double bn_moment(const struct bn *j, int64_t ch, int squares, double mean)
{
	double s = 0;
	for (int64_t b = 0; b < j->nb; b++) {
		int64_t p = b * j->c + ch;
		s += j->part ? j->part[p] : run_sum(j->a, p * j->inner, j->inner, squares, mean);
	}
	return s / (double)(j->nb * j->inner);
}

/* The running statistics' update (training) and channel ch's float m, inv, g, bb into k. */
static void bn_coef(const struct bn *j, int64_t ch, double mean, double var, float *k)
{
	if (j->training) {
		if (j->rm)
			rt_set(j->rm, ch, rt_get(j->rmean, ch) * j->mom + mean * (1 - j->mom));
		if (j->rv) /* the spec's: the batch (population) variance */
			rt_set(j->rv, ch, rt_get(j->rvar, ch) * j->mom + var * (1 - j->mom));
	}
	k[0] = (float)mean, k[1] = (float)(1 / sqrt(var + j->eps));
	k[2] = (float)rt_get(j->scale, ch), k[3] = (float)rt_get(j->bias, ch);
}

static void bn_plane(const struct bn *j, int64_t p, const float *k)
{
	const float *a = (const float *)j->a->data + p * j->inner;
	float *q = j->y + p * j->inner, m = k[0], inv = k[1], g = k[2], bb = k[3];
	for (int64_t i = 0; i < j->inner; i++)
		q[i] = (a[i] - m) * inv * g + bb;
}

/* Channels [c0, c1), their planes in cache: a piece of kernel_for. */
static void batch_norm_channels(void *arg, int64_t c0, int64_t c1)
{
	const struct bn *j = arg;
	for (int64_t ch = c0; ch < c1; ch++) {
		double mean = rt_get(j->rmean, ch), var = rt_get(j->rvar, ch);
		if (j->training) {
			mean = bn_moment(j, ch, 0, 0);
			var = bn_moment(j, ch, 1, mean);
		}
		float k[4];
		bn_coef(j, ch, mean, var, k);
		for (int64_t b = 0; b < j->nb; b++)
			bn_plane(j, b * j->c + ch, k);
	}
}

/* Planes [p0, p1) in memory order: their sums (mean NULL), their squares about their channel's mean,
 * or (coef set) their normalised values. Pieces of kernel_for. */
static void batch_norm_planes(void *arg, int64_t p0, int64_t p1)
{
	const struct bn *j = arg;
	for (int64_t p = p0; p < p1; p++)
		if (j->coef)
			bn_plane(j, p, j->coef + 4 * (p % j->c));
		else
			j->part[p] = run_sum(j->a, p * j->inner, j->inner, j->mean != NULL, j->mean ? j->mean[p % j->c] : 0);
}

static int batch_norm_f32(struct exec *x, struct bn *j)
{
	int64_t c = j->c, planes = j->nb * c, grain = KERNEL_GRAIN / (j->inner + 1) + 1;
	if (pool_threads() < 2 || planes < 2 * grain || j->nb < 2) {
		kernel_for(c, KERNEL_GRAIN / (j->nb * j->inner + 1) + 1, batch_norm_channels, j);
		return 0;
	}
	size_t pb = (size_t)planes * sizeof(double), mb = (size_t)c * sizeof(double), kb = (size_t)c * 4 * sizeof(float);
	double *part = exec_scratch_raw(x, pb), *mean = part ? exec_scratch_raw(x, mb) : NULL;
	float *coef = mean ? exec_scratch_raw(x, kb) : NULL;
	if (coef) {
		for (int64_t ch = 0; ch < c; ch++)
			mean[ch] = rt_get(j->rmean, ch);
		if (j->training) {
			j->part = part;
			kernel_for(planes, grain, batch_norm_planes, j);
			for (int64_t ch = 0; ch < c; ch++)
				mean[ch] = bn_moment(j, ch, 0, 0);
			j->mean = mean;
			kernel_for(planes, grain, batch_norm_planes, j);
		}
		for (int64_t ch = 0; ch < c; ch++)
			bn_coef(j, ch, mean[ch], j->training ? bn_moment(j, ch, 1, mean[ch]) : rt_get(j->rvar, ch), coef + 4 * ch);
		j->coef = coef;
		kernel_for(planes, grain, batch_norm_planes, j);
	}
	exec_scratch_free(x, coef, kb);
	exec_scratch_free(x, mean, mb);
	exec_scratch_free(x, part, pb);
	return coef ? 0 : exec_status(x);
}

static int batch_norm_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *scale = in[1], *bias = in[2], *rmean = in[3], *rvar = in[4];
	if (!dtype_is_float(a->dtype)) /* 16 bits too: the statistics and parameters keep their width */
		return exec_fail(x, "X must be a float tensor, not %s", dtype_name(a->dtype));
	if (a->ndim < 2)
		return exec_fail(x, "X must be (N, C, ...)");
	int64_t nb = a->dims[0], c = a->dims[1], inner = a->numel / (nb * c != 0 ? nb * c : 1);
	for (int k = 1; k < 5; k++)
		if (in[k]->numel != c)
			return exec_fail(x, "input %d must have the %lld channels", k, (long long)c);
	/* before opset 14 the running statistics as outputs meant training mode, with the batch's mean
	 * and variance as outputs 3 and 4 (saved_mean, saved_var) */
	int legacy = exec_opset(x) < 14 && n->n_out > 1;
	int training = legacy || attr_int(n, "training_mode", 0) != 0;
	double eps = attr_float(n, "epsilon", 1e-5f), mom = attr_float(n, "momentum", 0.9f);
	int64_t cd = c;
	int want_stats = training && n->n_out > 1;
	for (uint32_t k = 3; legacy && k < n->n_out; k++) {
		if (!n->out[k])
			continue;
		if (!exec_alloc(x, out[k], rmean->dtype, 1, &cd)) {
			if (exec_status(x))
				return exec_status(x);
			continue; /* shapes only */
		}
		for (int64_t ch = 0; ch < c; ch++) {
			double s = 0, q = 0, cnt = (double)(nb * inner), mean;
			for (int64_t b = 0; b < nb; b++)
				for (int64_t i = 0; i < inner; i++)
					s += rt_get(a, (b * c + ch) * inner + i);
			mean = cnt > 0 ? s / cnt : 0;
			for (int64_t b = 0; k == 4 && b < nb; b++)
				for (int64_t i = 0; i < inner; i++) {
					double d = rt_get(a, (b * c + ch) * inner + i) - mean;
					q += d * d;
				}
			rt_set(out[k], ch, k == 3 ? mean : cnt > 0 ? q / cnt : 0);
		}
	}
	void *y = exec_alloc(x, out[0], a->dtype, a->ndim, a->dims);
	void *pm = want_stats && n->out[1] ? exec_alloc(x, out[1], rmean->dtype, 1, &cd) : NULL;
	void *pv = want_stats && n->n_out > 2 && n->out[2] ? exec_alloc(x, out[2], rvar->dtype, 1, &cd) : NULL;
	if (!y)
		return exec_status(x);
	if (a->dtype == DT_FLOAT) {
		struct bn j = {a, scale, bias, rmean, rvar, y, pm ? out[1] : NULL, pv ? out[2] : NULL, nb, c, inner, training, eps, mom,
			       NULL, NULL, NULL};
		return batch_norm_f32(x, &j);
	}
	for (int64_t ch = 0; ch < c; ch++) {
		double mean, var;
		if (training) {
			double s = 0, q = 0, cnt = (double)(nb * inner);
			for (int64_t b = 0; b < nb; b++)
				for (int64_t k = 0; k < inner; k++)
					s += rt_get(a, (b * c + ch) * inner + k);
			mean = s / cnt;
			for (int64_t b = 0; b < nb; b++)
				for (int64_t k = 0; k < inner; k++) {
					double d = rt_get(a, (b * c + ch) * inner + k) - mean;
					q += d * d;
				}
			var = q / cnt;
			if (pm)
				rt_set(out[1], ch, rt_get(rmean, ch) * mom + mean * (1 - mom));
			if (pv) /* the spec's: the batch (population) variance */
				rt_set(out[2], ch, rt_get(rvar, ch) * mom + var * (1 - mom));
		} else {
			mean = rt_get(rmean, ch);
			var = rt_get(rvar, ch);
		}
		double inv = 1 / sqrt(var + eps), g = rt_get(scale, ch), bb = rt_get(bias, ch);
		for (int64_t b = 0; b < nb; b++)
			for (int64_t k = 0; k < inner; k++) {
				int64_t i = (b * c + ch) * inner + k;
				rt_set(out[0], i, (rt_get(a, i) - mean) * inv * g + bb);
			}
	}
	return 0;
}

/* Dropout's elements [lo, hi): a piece of kernel_for. Element i keeps when uniform i of the
 * node's stream (key, from off) is at least the ratio, whichever piece draws it. */
struct drop_job {
	const struct rtensor *a;
	struct rtensor *y;
	uint8_t *mask;
	uint64_t key, off;
	int training;
	double scale;
	float r; /* the ratio */
};

VM_CLONES static void dropout_elems(void *arg, int64_t lo, int64_t hi)
{
	const struct drop_job *d = arg;
	const struct rtensor *a = d->a;
	const int training = d->training;
	const double scale = d->scale;
	const float r = d->r;
	uint8_t *mask = d->mask;
	float u[1024]; /* the uniforms of a chunk of elements */
	for (int64_t i0 = lo; i0 < hi; i0 += 1024) {
		int64_t m = hi - i0 < 1024 ? hi - i0 : 1024;
		if (!training) { /* a copy (no product by 1, which would quiet a signalling NaN), every element kept */
			size_t es = dtype_size(a->dtype);
			memcpy((char *)d->y->data + (size_t)i0 * es, (const char *)a->data + (size_t)i0 * es, (size_t)m * es);
			if (mask)
				memset(mask + i0, 1, (size_t)m);
			continue;
		}
		philox_uniforms(d->key, d->off + (uint64_t)i0, m, u);
		if (a->dtype == DT_FLOAT) { /* as rt_set rounds the product made in double; loops that vectorise */
			const float *p = (const float *)a->data + i0;
			float *q = (float *)d->y->data + i0;
			for (int64_t j = 0; j < m; j++)
				q[j] = u[j] >= r ? (float)((double)p[j] * scale) : 0.0f;
			for (int64_t j = 0; mask && j < m; j++)
				mask[i0 + j] = (uint8_t)(u[j] >= r);
			continue;
		}
		for (int64_t j = 0, i = i0; j < m; j++, i++) {
			int keep = u[j] >= r;
			rt_set(d->y, i, keep ? rt_get(a, i) * scale : 0);
			if (mask)
				mask[i] = (uint8_t)keep;
		}
	}
}

static int dropout_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	double ratio = n->n_in > 1 && in[1] ? (in[1]->data ? rt_get(in[1], 0) : -1) : attr_float(n, "ratio", 0.5f);
	int training = n->n_in > 2 && in[2] ? (in[2]->data ? rt_get(in[2], 0) != 0 : -1) : 0;
	void *y = exec_alloc(x, out[0], a->dtype, a->ndim, a->dims);
	uint8_t *mask = n->n_out > 1 && n->out[1] ? exec_alloc(x, out[1], DT_BOOL, a->ndim, a->dims) : NULL;
	if (!y)
		return exec_status(x);
	if (ratio < 0 || ratio >= 1 || training < 0)
		return exec_fail(x, "ratio must be in [0, 1) and training_mode known");
	/* a fresh mask each training step; a recompute clone (same key, same step) draws its own step's.
	 * Ratio 0 keeps every element (no uniform is below 0) scaled by 1: the identity, drawn nothing,
	 * as in inference (the output a copy, bit for bit, the mask all true) */
	struct drop_job d = {a, out[0], mask, exec_node_seed(x, n) ^ exec_step(x) * 0xD1B54A32D192ED03ull,
			     exec_shard_offset(x, a->numel), training && ratio > 0, 1 / (1 - ratio), (float)ratio};
	kernel_for(a->numel, KERNEL_GRAIN, dropout_elems, &d);
	return 0;
}


/* InstanceNormalization: each (n, c) plane normalised over its spatial elements, then scaled and
 * shifted per channel; statistics in double, as LayerNormalization. PyTorch exports GroupNorm as
 * Reshape (N, G, -1) -> InstanceNormalization (unit scale, zero bias) -> Reshape -> Mul -> Add. */
static int instance_norm_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *scale = in[1], *bias = in[2];
	if (want_float(x, a, "X"))
		return exec_status(x);
	if (a->ndim < 3)
		return exec_fail(x, "X must be (N, C, spatial...), not of rank %d", a->ndim);
	int64_t c = a->dims[1], plane = a->numel / (a->dims[0] * c > 0 ? a->dims[0] * c : 1);
	if (scale->numel != c || bias->numel != c)
		return exec_fail(x, "scale and B must have the %lld channels", (long long)c);
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	double eps = attr_float(n, "epsilon", 1e-5f);
	if (!norm_stat_planes(out[0], a, scale, bias, a->dims[0] * c, plane, plane, c, eps))
		return 0;
	for (int64_t p = 0; p < a->dims[0] * c; p++) {
		double var, mean = moments(a, p * plane, plane, &var);
		double inv = 1 / sqrt(var + eps), sc = rt_get(scale, p % c), b = rt_get(bias, p % c);
		for (int64_t j = 0; j < plane; j++)
			rt_set(out[0], p * plane + j, (rt_get(a, p * plane + j) - mean) * inv * sc + b);
	}
	return 0;
}

/* ---- gradient rules ---- */

static struct value *reduce_keep(struct ad *a, const char *op, struct value *v, const int64_t *axes, int na)
{
	return ad_reduce(a, op, v, axes, na, 1);
}

/* Softmax: dx = y * (g - sum(g * y)) along the axis */
static int softmax_grad(struct ad *a, const struct node *n)
{
	int r = ad_shape(a, n->in[0])->ndim;
	int64_t ax = attr_int(n, "axis", -1);
	ax = ax < 0 ? ax + r : ax;
	struct value *g = ad_dy(a, n->out[0]), *y = n->out[0];
	struct value *s = reduce_keep(a, "ReduceSum", ad_op2(a, "Mul", g, y), &ax, 1);
	return ad_give(a, n->in[0], ad_op2(a, "Mul", y, ad_op2(a, "Sub", g, s)));
}

/* LogSoftmax: dx = g - exp(y) * sum(g) along the axis */
static int log_softmax_grad(struct ad *a, const struct node *n)
{
	int r = ad_shape(a, n->in[0])->ndim;
	int64_t ax = attr_int(n, "axis", -1);
	ax = ax < 0 ? ax + r : ax;
	struct value *g = ad_dy(a, n->out[0]);
	struct value *s = reduce_keep(a, "ReduceSum", g, &ax, 1);
	return ad_give(a, n->in[0], ad_op2(a, "Sub", g, ad_op2(a, "Mul", ad_op1(a, "Exp", n->out[0]), s)));
}

/* Normalisation over `axes` (keepdims): with xh = (x - mean) * inv, inv = 1/sqrt(var + eps) and
 * gh = dL/dxh,  dx = inv * (gh - mean(gh) - xh * mean(gh * xh)). Statistics are recomputed. */
static struct value *norm_dx(struct ad *a, struct value *x, struct value *gh, const int64_t *axes, int na, double eps,
			     int dt, struct value **xh_out)
{
	struct value *mean = reduce_keep(a, "ReduceMean", x, axes, na);
	struct value *d = ad_op2(a, "Sub", x, mean);
	struct value *var = reduce_keep(a, "ReduceMean", ad_op2(a, "Mul", d, d), axes, na);
	struct value *inv = ad_op2(a, "Div", ad_scalar(a, dt, 1),
				  ad_op1(a, "Sqrt", ad_op2(a, "Add", var, ad_scalar(a, dt, eps))));
	struct value *xh = ad_op2(a, "Mul", d, inv);
	*xh_out = xh;
	struct value *m1 = reduce_keep(a, "ReduceMean", gh, axes, na);
	struct value *m2 = reduce_keep(a, "ReduceMean", ad_op2(a, "Mul", gh, xh), axes, na);
	return ad_op2(a, "Mul", inv, ad_op2(a, "Sub", ad_op2(a, "Sub", gh, m1), ad_op2(a, "Mul", xh, m2)));
}

static struct value *reduce_drop(struct ad *a, struct value *v, const int64_t *axes, int na)
{
	return ad_reduce(a, "ReduceSum", v, axes, na, 0);
}

/* LayerNormalization over the trailing axes from `axis` (L elements per row), xh = (x - mean) inv:
 *   dScale = sum(g xh), dB = sum(g) over the leading axes,
 *   dx = inv (gh - mean(gh) - xh mean(gh xh)), gh = g scale, means over the row.
 * The backward pass reads x, and the row's mean and inverse standard deviation, which a float32
 * forward node gives as its optional outputs (as PyTorch saves them); other types recompute them
 * (the forward node's stash type is float32). At most three temporaries as large as x are live at
 * once: xh, g xh (or gh) and one product. */
static int layer_norm_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0], *scale = n->in[1], *g = ad_dy(a, n->out[0]);
	if (!g)
		return ad_fail(a, "gradients through Mean and InvStdDev are not supported");
	const struct rtensor *xs = ad_shape(a, x);
	int r = xs->ndim, ax = (int)attr_int(n, "axis", -1), dt = xs->dtype;
	ax = ax < 0 ? ax + r : ax;
	int64_t norm[RT_MAX_DIMS], lead[RT_MAX_DIMS];
	int nn = 0, nl = 0, nax[RT_MAX_DIMS];
	for (int i = 0; i < r; i++) {
		if (i >= ax)
			nax[nn] = i, norm[nn++] = i;
		else
			lead[nl++] = i;
	}
	struct value *mean, *inv;
	if (dt == DT_FLOAT) {
		mean = ad_add_output(a, n, 1);
		inv = ad_add_output(a, n, 2);
	} else {
		double eps = attr_float(n, "epsilon", 1e-5f);
		mean = reduce_keep(a, "ReduceMean", x, norm, nn);
		struct value *l2 = reduce_keep(a, "ReduceL2", ad_op2(a, "Sub", x, mean), norm, nn);
		struct value *var = ad_op2(a, "Div", ad_op2(a, "Mul", l2, l2), ad_count(a, x, nax, nn, dt));
		inv = ad_op2(a, "Div", ad_scalar(a, dt, 1), ad_op1(a, "Sqrt", ad_op2(a, "Add", var, ad_scalar(a, dt, eps))));
	}
	struct value *xh = ad_op2(a, "Mul", ad_op2(a, "Sub", x, mean), inv);
	struct value *gxh = ad_op2(a, "Mul", g, xh);
	if (ad_wants(a, scale) && ad_give(a, scale, nl ? reduce_drop(a, gxh, lead, nl) : gxh))
		return -1;
	if (n->n_in > 2 && ad_wants(a, n->in[2]) && ad_give(a, n->in[2], nl ? reduce_drop(a, g, lead, nl) : g))
		return -1;
	if (!ad_wants(a, x))
		return 0;
	struct value *m2 = reduce_keep(a, "ReduceMean", ad_op2(a, "Mul", gxh, scale), norm, nn);
	struct value *gh = ad_op2(a, "Mul", g, scale);
	struct value *m1 = reduce_keep(a, "ReduceMean", gh, norm, nn);
	return ad_give(a, x, ad_op2(a, "Mul", ad_op2(a, "Sub", gh, ad_op2(a, "Add", ad_op2(a, "Mul", xh, m2), m1)), inv));
}

/* ---- LayerNorm as older opsets export it ----
 *
 * Before opset 17 the exporter writes LayerNorm as xh = (x - mean) / sqrt(var + eps), with
 * mean = ReduceMean(x), var = ReduceMean((x - mean)^2), then times the weight plus the bias.
 * Differentiated op by op, the backward pass keeps x - mean (for the square) besides xh (for the
 * weight's gradient). Recognized at the division, x gets
 *   dx = (g - mean(g) - xh mean(g xh)) / s,   s = sqrt(var + eps),
 * which reads only xh, which the weight's gradient keeps anyway, and the per-row s. */

/* The reduced axes of a keepdims ReduceMean (attribute, or a known input from opset 18), sorted
 * as given; 0 when n is not one. */
static int mean_axes(const struct ad *a, const struct node *n, int64_t *axes)
{
	if (!n || n->op != OP_REDUCE_MEAN || !node_is_forward(n) || attr_int(n, "keepdims", 1) != 1)
		return 0;
	size_t na = 0;
	const int64_t *at = attr_ints(n, "axes", &na);
	int r = ad_shape(a, n->in[0])->ndim;
	if (!at && n->n_in > 1 && n->in[1]) {
		const struct rtensor *t = ad_shape(a, n->in[1]);
		if (!t->data || t->numel > RT_MAX_DIMS)
			return 0;
		na = (size_t)t->numel;
		for (size_t i = 0; i < na; i++)
			axes[i] = rt_get_i(t, (int64_t)i);
	} else if (at && na <= RT_MAX_DIMS) {
		memcpy(axes, at, na * sizeof *at);
	} else {
		return 0;
	}
	for (size_t i = 0; i < na; i++)
		axes[i] = axes[i] < 0 ? axes[i] + r : axes[i];
	return (int)na;
}

int layer_norm_chain_grad(struct ad *a, const struct node *n)
{
	const struct node *sub = ad_made_by(n->in[0], OP_SUB), *sq = ad_made_by(n->in[1], OP_SQRT), *add, *sqr, *m1, *m2;
	if (!sub || !sq || !(add = ad_made_by(sq->in[0], OP_ADD)))
		return 0;
	struct value *x = sub->in[0], *d = sub->out[0];
	int64_t ax1[RT_MAX_DIMS], ax2[RT_MAX_DIMS];
	int n1 = mean_axes(a, m1 = ad_made_by(sub->in[1], OP_REDUCE_MEAN), ax1);
	if (!n1 || m1->in[0] != x)
		return 0;
	int n2 = 0;
	double c;
	for (int i = 0; i < 2 && !n2; i++) /* var + eps, either way round */
		if ((m2 = ad_made_by(add->in[i], OP_REDUCE_MEAN)) && ad_known_scalar(a, add->in[1 - i], &c))
			n2 = mean_axes(a, m2, ax2);
	if (n2 != n1 || memcmp(ax1, ax2, sizeof *ax1 * (size_t)n1))
		return 0;
	if ((sqr = ad_made_by(m2->in[0], OP_POW))) { /* (x - mean)^2 as Pow(d, 2) or d d */
		if (sqr->in[0] != d || !ad_known_scalar(a, sqr->in[1], &c) || c != 2)
			return 0;
	} else if (!(sqr = ad_made_by(m2->in[0], OP_MUL)) || sqr->in[0] != d || sqr->in[1] != d) {
		return 0;
	}
	if (!ad_wants(a, x))
		return 1;
	struct value *g = ad_dy(a, n->out[0]), *xh = n->out[0];
	struct value *mg = reduce_keep(a, "ReduceMean", g, ax1, n1);
	struct value *mgx = reduce_keep(a, "ReduceMean", ad_op2(a, "Mul", g, xh), ax1, n1);
	struct value *dx = ad_op2(a, "Div", ad_op2(a, "Sub", ad_op2(a, "Sub", g, mg), ad_op2(a, "Mul", xh, mgx)), n->in[1]);
	return dx && !ad_give(a, x, dx) ? 1 : -1;
}

/* InstanceNormalization: as BatchNormalization in training mode, with the statistics over the
 * spatial axes of each (n, c); dScale and dB sum over N and the spatial axes. */
static int instance_norm_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0], *scale = n->in[1], *g = ad_dy(a, n->out[0]);
	const struct rtensor *xs = ad_shape(a, x);
	int r = xs->ndim;
	int64_t sp[RT_MAX_DIMS], all[RT_MAX_DIMS], cshape[RT_MAX_DIMS];
	int ns = 0, na = 0;
	for (int i = 0; i < r; i++) {
		if (i >= 2)
			sp[ns++] = i;
		if (i != 1)
			all[na++] = i;
		cshape[i] = i == 1 ? xs->dims[1] : 1;
	}
	struct value *gamma = ad_op2(a, "Reshape", scale, ad_ints(a, cshape, (size_t)r)), *xh = NULL;
	struct value *dx = norm_dx(a, x, ad_op2(a, "Mul", g, gamma), sp, ns, attr_float(n, "epsilon", 1e-5f),
				     xs->dtype, &xh);
	if (ad_wants(a, x) && ad_give(a, x, dx))
		return -1;
	if (ad_wants(a, scale) && ad_give(a, scale, reduce_drop(a, ad_op2(a, "Mul", g, xh), all, na)))
		return -1;
	return ad_wants(a, n->in[2]) && ad_give(a, n->in[2], reduce_drop(a, g, all, na)) ? -1 : 0;
}

/* BatchNormalization in training mode, per channel over the M elements of (N, spatial), with
 * d = x - mean, inv = 1/sqrt(var + eps), gb = sum(g) and gs = sum(g d) (the scale's gradient is
 * inv gs, the bias's gb):
 *   dx = gamma inv (g - gb/M - d inv^2 gs/M) = A g + (B d + C),
 *   A = gamma inv, B = -A inv^2 gs / M, C = -A gb / M, all per channel.
 * Only x is read from the forward pass; the statistics are recomputed from it (the variance as
 * ReduceL2 of d, so that d d is never made). The order keeps at most two temporaries as large as x
 * live at once: d and g d, then B d and B d + C (d gone), then A g. */
static int batch_norm_train_grad(struct ad *a, const struct node *n, struct value *x, struct value *g,
				 struct value *gamma, const int64_t *axes, int na, double eps, int dt, int xdt)
{
	int ax[RT_MAX_DIMS];
	for (int i = 0; i < na; i++)
		ax[i] = (int)axes[i];
	/* x may be a cast of the node's input (mixed precision), which has no inferred shape */
	int64_t c = ad_shape(a, n->in[0])->dims[1];
	struct value *m = ad_count(a, n->in[0], ax, na, dt);
	struct value *d = ad_op2(a, "Sub", x, reduce_keep(a, "ReduceMean", x, axes, na));
	struct value *l2 = reduce_keep(a, "ReduceL2", d, axes, na);
	struct value *var = ad_op2(a, "Div", ad_op2(a, "Mul", l2, l2), m);
	struct value *inv = ad_op2(a, "Div", ad_scalar(a, dt, 1),
				  ad_op1(a, "Sqrt", ad_op2(a, "Add", var, ad_scalar(a, dt, eps))));
	struct value *gs = reduce_keep(a, "ReduceSum", ad_op2(a, "Mul", g, d), axes, na);
	struct value *gb = reduce_keep(a, "ReduceSum", g, axes, na);
	struct value *A = ad_op2(a, "Mul", gamma, inv);
	struct value *B = ad_op1(a, "Neg", ad_op2(a, "Div", ad_op2(a, "Mul", ad_op2(a, "Mul", A, ad_op2(a, "Mul", inv, inv)), gs), m));
	struct value *C = ad_op1(a, "Neg", ad_op2(a, "Div", ad_op2(a, "Mul", A, gb), m));
	struct value *bdc = ad_op2(a, "Add", ad_op2(a, "Mul", d, B), C);
	struct value *dx = ad_op2(a, "Add", ad_op2(a, "Mul", g, A), bdc);
	if (ad_wants(a, n->in[0]) && ad_give(a, n->in[0], dt != xdt ? ad_cast(a, dx, xdt) : dx))
		return -1;
	struct value *flat = ad_ints(a, &c, 1);
	if (ad_wants(a, n->in[1]) && ad_give(a, n->in[1], ad_op2(a, "Reshape", ad_op2(a, "Mul", gs, inv), flat)))
		return -1;
	return ad_wants(a, n->in[2]) && ad_give(a, n->in[2], ad_op2(a, "Reshape", gb, flat)) ? -1 : 0;
}

/* BatchNormalization over (N, spatial): training mode uses the batch statistics (as the forward
 * pass did); inference mode the running ones, which are constants. A 16-bit X (mixed precision,
 * with float32 parameters) is differentiated in float32, as the forward kernel computes: X and its
 * gradient are cast up, and dX back down. */
static int batch_norm_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0], *scale = n->in[1], *g = ad_dy(a, n->out[0]);
	if (!g)
		return ad_fail(a, "gradients through the running statistics are not supported");
	const struct rtensor *xs = ad_shape(a, x);
	int r = xs->ndim, xdt = xs->dtype, dt = dtype_is_half(xdt) ? DT_FLOAT : xdt;
	int64_t axes[RT_MAX_DIMS], cshape[RT_MAX_DIMS];
	int na = 0;
	for (int i = 0; i < r; i++) {
		if (i != 1)
			axes[na++] = i;
		cshape[i] = i == 1 ? xs->dims[1] : 1;
	}
	if (dt != xdt) {
		x = ad_cast(a, x, dt);
		g = ad_cast(a, g, dt);
	}
	double eps = attr_float(n, "epsilon", 1e-5f);
	struct value *gamma = ad_op2(a, "Reshape", scale, ad_ints(a, cshape, (size_t)r));
	if (attr_int(n, "training_mode", 0))
		return batch_norm_train_grad(a, n, x, g, gamma, axes, na, eps, dt, xdt);
	struct value *mean = ad_op2(a, "Reshape", n->in[3], ad_ints(a, cshape, (size_t)r));
	struct value *var = ad_op2(a, "Reshape", n->in[4], ad_ints(a, cshape, (size_t)r));
	struct value *inv = ad_op2(a, "Div", ad_scalar(a, dt, 1),
				  ad_op1(a, "Sqrt", ad_op2(a, "Add", var, ad_scalar(a, dt, eps))));
	struct value *xh = ad_op2(a, "Mul", ad_op2(a, "Sub", x, mean), inv);
	struct value *dx = ad_op2(a, "Mul", g, ad_op2(a, "Mul", gamma, inv));
	if (ad_wants(a, n->in[0]) && ad_give(a, n->in[0], dt != xdt ? ad_cast(a, dx, xdt) : dx))
		return -1;
	if (ad_wants(a, scale) && ad_give(a, scale, reduce_drop(a, ad_op2(a, "Mul", g, xh), axes, na)))
		return -1;
	if (ad_wants(a, n->in[2]) && ad_give(a, n->in[2], reduce_drop(a, g, axes, na)))
		return -1;
	return 0;
}

/* Dropout: the kept elements' gradient, scaled as the forward pass scaled them */
static int dropout_grad(struct ad *a, const struct node *n)
{
	struct value *g = ad_dy(a, n->out[0]), *x = n->in[0];
	const struct rtensor *tm = n->n_in > 2 && n->in[2] ? ad_shape(a, n->in[2]) : NULL;
	if (!tm)
		return ad_give(a, x, g); /* inference mode: the identity */
	if (!tm->data)
		return ad_fail(a, "training_mode must be a constant to differentiate");
	/* of a constant ratio 0, every element is kept and scaled by 1: the identity, as in inference
	 * mode; nothing then reads the mask, so the forward Dropout is a no-op too (dropout_noop) */
	const struct rtensor *rt = n->n_in > 1 && n->in[1] ? ad_shape(a, n->in[1]) : NULL;
	if (!rt_get(tm, 0) || (rt && rt->data && rt->numel == 1 && rt_get(rt, 0) == 0))
		return ad_give(a, x, g);
	int dt = ad_shape(a, x)->dtype;
	struct value *mask = ad_add_output(a, n, 1);
	struct value *m = mask ? ad_cast(a, mask, dt) : NULL;
	if (!m)
		return -1;
	/* 1 - ratio: a constant when the ratio is one (a Sub of two 16-bit constants is left for
	 * onnxruntime to fold, and its CPU has no float16 Sub to fold it with: a warning at load) */
	struct value *keep;
	if (!rt || (rt->data && rt->numel == 1)) {
		keep = ad_scalar(a, dt, 1 - (rt ? rt_get(rt, 0) : 0.5));
	} else {
		struct value *ratio = n->in[1];
		if (rt->dtype != dt && !(ratio = ad_cast(a, ratio, dt)))
			return -1;
		keep = ad_op2(a, "Sub", ad_scalar(a, dt, 1), ratio);
	}
	return ad_give(a, x, ad_op2(a, "Div", ad_op2(a, "Mul", g, m), keep));
}

/* 4 operations per input element */
static void per_input_cost_4(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	*flops = 4 * (uint64_t)in[0]->numel;
}

/* 8 operations per input element */
static void per_input_cost_8(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	*flops = 8 * (uint64_t)in[0]->numel;
}

const struct op_impl op_softmax = {.run = softmax_run, .cost = per_input_cost_4, .grad = softmax_grad, .recompute = RC_CHEAP};
const struct op_impl op_log_softmax = {.run = log_softmax_run, .cost = per_input_cost_4, .grad = log_softmax_grad, .recompute = RC_CHEAP};
const struct op_impl op_layer_norm = {.run = layer_norm_run, .cost = per_input_cost_8, .grad = layer_norm_grad, .recompute = RC_CHEAP};
const struct op_impl op_instance_norm = {.run = instance_norm_run, .cost = per_input_cost_8, .grad = instance_norm_grad,
					.recompute = RC_CHEAP};
const struct op_impl op_batch_norm = {.run = batch_norm_run, .cost = per_input_cost_8, .grad = batch_norm_grad, .recompute = RC_CHEAP,
				      .nodiff = 1u << 3 | 1u << 4, .own_width = 0x1eu | 0x6u << 16, .own_width_since = 15};
/* Dropout in inference mode, or of ratio 0 (every element kept, scaled by 1 / (1 - 0)): the
 * identity, as dropout_run computes it; the caller checks that nothing reads the mask. */
static int dropout_noop(const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	(void)out;
	const struct rtensor *r = n->n_in > 1 ? in[1] : NULL, *t = n->n_in > 2 ? in[2] : NULL;
	if (!t || (t->data && rt_get(t, 0) == 0))
		return 0;
	return r ? (r->data && rt_get(r, 0) == 0 ? 0 : -1) : attr_float(n, "ratio", 0.5f) == 0 ? 0 : -1;
}

/* its ratio is T1 (float16, float or double; no bfloat16 before opset 22) apart from X since 12 */
const struct op_impl op_dropout = {.run = dropout_run, .grad = dropout_grad, .recompute = RC_RANDOM, .nodiff = 1u << 1 | 1u << 2,
				   .noop = dropout_noop, .own_width = 0x2u, .own_width_since = 12};

/* ---- RMSNormalization, GroupNormalization, MeanVarianceNormalization, LpNormalization, LRN ----
 *
 * Statistics in double (stash_type float32 or wider is then always met). Shapes as in the ONNX
 * operator documents. */

/* The element of t (broadcast to the rank-r shape dims, numpy's rule) at C-order index i. */
static double bcast_get(const struct rtensor *t, int r, const int64_t *dims, int64_t i)
{
	int64_t off = 0, st = 1;
	for (int d = r - 1, k = t->ndim - 1; d >= 0; d--, k--) {
		int64_t c = i % dims[d];
		i /= dims[d];
		if (k >= 0) {
			off += (t->dims[k] == 1 ? 0 : c) * st;
			st *= t->dims[k];
		}
	}
	return rt_get(t, off);
}

/* Whether t broadcasts to the rank-r shape dims without growing it. */
static int bcasts_to(const struct rtensor *t, int r, const int64_t *dims)
{
	if (t->ndim > r)
		return 0;
	for (int k = 0; k < t->ndim; k++) {
		int64_t d = dims[r - t->ndim + k];
		if (t->dims[k] != 1 && t->dims[k] != d)
			return 0;
	}
	return 1;
}

/* float32 rows of RMSNormalization, scale of the row's length: a piece of kernel_for */
VM_CLONES static void rms_norm_rows(void *arg, int64_t o0, int64_t o1)
{
	const struct rows *j = arg;
	int64_t len = j->len;
	for (int64_t o = o0; o < o1; o++) {
		struct rtensor row = {.dtype = DT_FLOAT, .data = (void *)(j->a + o * len)};
		float inv = (float)(1 / sqrt(run_sum(&row, 0, len, 1, 0) / (double)len + j->eps));
		const float *p = j->a + o * len, *sc = j->scale;
		float *q = j->y + o * len;
		for (int64_t k = 0; k < len; k++)
			q[k] = p[k] * inv * sc[k];
	}
}

/* RMSNormalization (opset 23): Y = X / sqrt(mean(X^2) + epsilon) * scale, the mean over the axes
 * axis..rank-1; scale broadcasts to X. */
static int rms_norm_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *scale = in[1];
	int ax;
	if (want_float(x, a, "X") || norm_axis(x, attr_int(n, "axis", -1), a->ndim, &ax))
		return exec_status(x);
	if (!bcasts_to(scale, a->ndim, a->dims))
		return exec_fail(x, "scale must broadcast to X's shape");
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	double eps = attr_float(n, "epsilon", 1e-5f);
	int64_t len = 1;
	for (int i = ax; i < a->ndim; i++)
		len *= a->dims[i];
	if (a->dtype == DT_FLOAT && scale->dtype == DT_FLOAT && scale->numel == len && len) {
		struct rows j = {.a = a->data, .scale = scale->data, .y = out[0]->data, .len = len, .eps = eps};
		kernel_for(a->numel / len, KERNEL_GRAIN / (len + 1) + 1, rms_norm_rows, &j);
		return 0;
	}
	for (int64_t o = 0; len && o < a->numel / len; o++) {
		double inv = 1 / sqrt(run_sum(a, o * len, len, 1, 0) / (double)len + eps);
		for (int64_t j = o * len; j < (o + 1) * len; j++)
			rt_set(out[0], j, rt_get(a, j) * inv * bcast_get(scale, a->ndim, a->dims, j));
	}
	return 0;
}

/* GroupNormalization: X (N, C, ...) normalised over each group of C / num_groups channels and the
 * spatial axes, then scaled and shifted per channel (opset 21: scale and bias (C)) or per group
 * (opset 18: (G)), told apart by their size (the same when C = G). */
static int group_norm_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0], *scale = in[1], *bias = in[2];
	if (want_float(x, a, "X"))
		return exec_status(x);
	int64_t G = attr_int(n, "num_groups", 0);
	if (a->ndim < 2)
		return exec_fail(x, "X must be (N, C, ...), not of rank %d", a->ndim);
	int64_t N = a->dims[0], C = a->dims[1], per = scale->numel;
	if (G <= 0 || C % G)
		return exec_fail(x, "num_groups %lld must divide the %lld channels", (long long)G, (long long)C);
	if ((per != C && per != G) || bias->numel != per)
		return exec_fail(x, "scale and bias must both have %lld elements (one per channel, opset 21) or %lld (one "
				 "per group, opset 18)", (long long)C, (long long)G);
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	double eps = attr_float(n, "epsilon", 1e-5f);
	int64_t inner = N * C != 0 ? a->numel / (N * C) : 0, len = C / G * inner;
	if (!norm_stat_planes(out[0], a, scale, bias, N * G, len, per == C ? inner : len, G, eps))
		return 0;
	for (int64_t p = 0; len && p < N * G; p++) {
		double var, mean = moments(a, p * len, len, &var), inv = 1 / sqrt(var + eps);
		for (int64_t j = 0; j < len; j++) {
			int64_t c = p % G * (C / G) + j / inner, k = per == C ? c : p % G;
			rt_set(out[0], p * len + j, (rt_get(a, p * len + j) - mean) * inv * rt_get(scale, k) + rt_get(bias, k));
		}
	}
	return 0;
}

/* The sums over the axes not in `keep`, a's elements (or their squares, or absolute values)
 * gathered by index with those axes zeroed: sums of numel / prod(kept) elements each. */
static void axis_sums(const struct rtensor *a, const uint8_t *reduced, int pow, double *sums, int64_t *at)
{
	int64_t st[RT_MAX_DIMS], kst[RT_MAX_DIMS], k = 1;
	c_strides(a->ndim, a->dims, st);
	for (int d = a->ndim - 1; d >= 0; d--) {
		kst[d] = reduced[d] ? 0 : k;
		k *= reduced[d] ? 1 : a->dims[d];
	}
	for (int64_t i = 0; i < a->numel; i++) {
		int64_t j = 0;
		for (int d = 0; d < a->ndim; d++)
			j += i / st[d] % a->dims[d] * kst[d];
		double v = rt_get(a, i);
		at[i] = j;
		sums[j] += pow == 2 ? v * v : pow == 1 ? fabs(v) : v;
	}
}

/* MeanVarianceNormalization: (X - mean) / (sqrt(var) + 1e-9) over `axes` (default 0, 2, 3), as the
 * ONNX function body computes it (var = E[X^2] - E[X]^2). */
static int mvn_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	if (want_float(x, a, "X"))
		return exec_status(x);
	size_t na = 0;
	const int64_t *axes = attr_ints(n, "axes", &na), dflt[3] = {0, 2, 3};
	if (!axes)
		axes = dflt, na = 3;
	uint8_t red[RT_MAX_DIMS] = {0};
	int64_t cnt = 1;
	for (size_t i = 0; i < na; i++) {
		int d;
		if (norm_axis(x, axes[i], a->ndim, &d))
			return exec_status(x);
		if (!red[d])
			cnt *= a->dims[d];
		red[d] = 1;
	}
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	int typed = norm_stat_mvn(out[0], a, red);
	if (typed <= 0)
		return typed ? exec_fail(x, "out of memory") : 0;
	double *s = xcalloc((size_t)(2 * a->numel + 2), sizeof *s);
	int64_t *at = xmalloc((size_t)(a->numel + 1) * sizeof *at);
	if (!s || !at) {
		xfree(s);
		xfree(at);
		return exec_fail(x, "out of memory");
	}
	axis_sums(a, red, 0, s, at);
	axis_sums(a, red, 2, s + a->numel + 1, at);
	for (int64_t i = 0; i < a->numel; i++) {
		double m = s[at[i]] / (double)cnt, q = s[a->numel + 1 + at[i]] / (double)cnt - m * m;
		rt_set(out[0], i, (rt_get(a, i) - m) / (sqrt(q > 0 ? q : 0) + 1e-9));
	}
	xfree(s);
	xfree(at);
	return 0;
}

/* LpNormalization: X / ||X||_p along `axis` (default -1), p 1 or 2 (default 2). */
static int lp_norm_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int ax;
	int64_t p = attr_int(n, "p", 2);
	if (want_float(x, a, "input") || norm_axis(x, attr_int(n, "axis", -1), a->ndim, &ax))
		return exec_status(x);
	if (p != 1 && p != 2)
		return exec_fail(x, "p must be 1 or 2, not %lld", (long long)p);
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	int64_t len = a->dims[ax], inner = 1;
	for (int i = ax + 1; i < a->ndim; i++)
		inner *= a->dims[i];
	if (!norm_stat_lp(out[0], a, len && inner ? a->numel / (len * inner) : 0, len, inner, (int)p))
		return 0;
	for (int64_t o = 0; len && inner && o < a->numel / (len * inner); o++)
		for (int64_t k = 0; k < inner; k++) {
			int64_t base = o * len * inner + k;
			double z = 0;
			for (int64_t j = 0; j < len; j++) {
				double v = rt_get(a, base + j * inner);
				z += p == 1 ? fabs(v) : v * v;
			}
			z = p == 1 ? z : sqrt(z);
			for (int64_t j = 0; j < len; j++)
				rt_set(out[0], base + j * inner, rt_get(a, base + j * inner) / z);
		}
	return 0;
}

/* LRN: X (N, C, ...), y = x / (bias + alpha / size * sum(x^2))^beta, the sum over the channels
 * c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2) that exist. */
static int lrn_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *a = in[0];
	int64_t size = attr_int(n, "size", 0);
	if (want_float(x, a, "X"))
		return exec_status(x);
	if (a->ndim < 2 || size <= 0)
		return exec_fail(x, "X must be (N, C, ...) and size positive");
	if (!exec_alloc(x, out[0], a->dtype, a->ndim, a->dims))
		return exec_status(x);
	double alpha = attr_float(n, "alpha", 1e-4f), beta = attr_float(n, "beta", 0.75f), bias = attr_float(n, "bias", 1);
	int64_t C = a->dims[1], inner = a->dims[0] * C != 0 ? a->numel / (a->dims[0] * C) : 0, lo = (size - 1) / 2, hi = size / 2;
	if (!norm_stat_lrn(out[0], a, C, size, alpha, beta, bias))
		return 0;
	for (int64_t i = 0; i < a->numel; i++) {
		int64_t c = i / inner % C, base = i - c * inner;
		double s = 0;
		for (int64_t k = c - lo > 0 ? c - lo : 0; k <= c + hi && k < C; k++) {
			double v = rt_get(a, base + k * inner);
			s += v * v;
		}
		rt_set(out[0], i, rt_get(a, i) / pow(bias + alpha / (double)size * s, beta));
	}
	return 0;
}

/* RMSNormalization, inv = 1/sqrt(mean(x^2) + eps) over the row, gh = g scale:
 *   dx = inv (gh - x inv^2 mean(gh x)),  dScale = g x inv summed to scale's shape.
 * The backward pass reads x and recomputes inv. */
static int rms_norm_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0], *scale = n->in[1], *g = ad_dy(a, n->out[0]);
	const struct rtensor *xs = ad_shape(a, x);
	int r = xs->ndim, ax = (int)attr_int(n, "axis", -1), dt = xs->dtype, nn = 0;
	ax = ax < 0 ? ax + r : ax;
	int64_t norm[RT_MAX_DIMS];
	for (int i = ax; i < r; i++)
		norm[nn++] = i;
	struct value *ms = reduce_keep(a, "ReduceMean", ad_op2(a, "Mul", x, x), norm, nn);
	struct value *inv = ad_op2(a, "Div", ad_scalar(a, dt, 1),
				  ad_op1(a, "Sqrt", ad_op2(a, "Add", ms, ad_scalar(a, dt, attr_float(n, "epsilon", 1e-5f)))));
	struct value *xh = ad_op2(a, "Mul", x, inv);
	if (ad_wants(a, scale) && ad_give(a, scale, ad_unbroadcast(a, ad_op2(a, "Mul", g, xh), scale, xs)))
		return -1;
	if (!ad_wants(a, x))
		return 0;
	struct value *gh = ad_op2(a, "Mul", g, scale);
	struct value *m = reduce_keep(a, "ReduceMean", ad_op2(a, "Mul", gh, x), norm, nn);
	return ad_give(a, x, ad_op2(a, "Mul", inv, ad_op2(a, "Sub", gh, ad_op2(a, "Mul", xh, ad_op2(a, "Mul", inv, m)))));
}

/* GroupNormalization as InstanceNormalization over x viewed (N, G, C/G * spatial): norm_dx there,
 * with the scale applied per channel (opset 21) before the view or per group (18) in it. */
static int group_norm_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0], *scale = n->in[1], *bias = n->in[2], *g = ad_dy(a, n->out[0]);
	const struct rtensor *xs = ad_shape(a, x);
	int r = xs->ndim, dt = xs->dtype;
	int64_t G = attr_int(n, "num_groups", 0), C = xs->dims[1], view[3] = {0, G, -1}, gsh[3] = {1, G, 1};
	int64_t cshape[RT_MAX_DIMS], all[RT_MAX_DIMS], two = 2, og[2] = {0, 2};
	int na = 0;
	for (int i = 0; i < r; i++) {
		cshape[i] = i == 1 ? C : 1;
		if (i != 1)
			all[na++] = i;
	}
	int per_channel = ad_shape(a, scale)->numel == C; /* as the kernel: (C) from opset 21, (G) before */
	struct value *vshape = ad_ints(a, view, 3), *xr = ad_op2(a, "Reshape", x, vshape), *gr = ad_op2(a, "Reshape", g, vshape);
	struct value *gh = per_channel ? ad_op2(a, "Reshape", ad_op2(a, "Mul", g, ad_op2(a, "Reshape", scale, ad_ints(a, cshape, (size_t)r))), vshape)
				       : ad_op2(a, "Mul", gr, ad_op2(a, "Reshape", scale, ad_ints(a, gsh, 3)));
	struct value *xh = NULL, *dx = norm_dx(a, xr, gh, &two, 1, attr_float(n, "epsilon", 1e-5f), dt, &xh);
	if (ad_wants(a, x) && ad_give(a, x, ad_op2(a, "Reshape", dx, ad_shape_of(a, x))))
		return -1;
	struct value *flat = ad_ints(a, per_channel ? &C : &G, 1);
	if (ad_wants(a, scale)) {
		struct value *p = per_channel ? reduce_drop(a, ad_op2(a, "Mul", g, ad_op2(a, "Reshape", xh, ad_shape_of(a, x))), all, na)
					      : reduce_drop(a, ad_op2(a, "Mul", gr, xh), og, 2);
		if (ad_give(a, scale, ad_op2(a, "Reshape", p, flat)))
			return -1;
	}
	if (ad_wants(a, bias) &&
	    ad_give(a, bias, ad_op2(a, "Reshape", per_channel ? reduce_drop(a, g, all, na) : reduce_drop(a, gr, og, 2), flat)))
		return -1;
	return 0;
}

/* MeanVarianceNormalization: norm_dx over its axes (the 1e-9 beside the standard deviation is
 * left out: a relative change of 1e-9 / sqrt(var)). */
static int mvn_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0], *xh = NULL;
	int r = ad_shape(a, x)->ndim;
	size_t na = 0;
	const int64_t *at = attr_ints(n, "axes", &na), dflt[3] = {0, 2, 3};
	int64_t axes[RT_MAX_DIMS];
	if (!at)
		at = dflt, na = 3;
	for (size_t i = 0; i < na && i < RT_MAX_DIMS; i++)
		axes[i] = at[i] < 0 ? at[i] + r : at[i];
	return ad_give(a, x, norm_dx(a, x, ad_dy(a, n->out[0]), axes, (int)(na < RT_MAX_DIMS ? na : RT_MAX_DIMS), 0, ad_shape(a, x)->dtype, &xh));
}

/* LpNormalization, y = x / z along the axis: dx = (g - s sum(g y)) / z, with s = y for p = 2 and
 * s = sign(x) (Greater - Less, cast) for p = 1. */
static int lp_norm_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0], *y = n->out[0], *g = ad_dy(a, y);
	const struct rtensor *xs = ad_shape(a, x);
	int64_t ax = attr_int(n, "axis", -1);
	ax = ax < 0 ? ax + xs->ndim : ax;
	int dt = xs->dtype, p = (int)attr_int(n, "p", 2);
	struct value *zero = ad_scalar(a, dt, 0), *z, *s;
	if (p == 1) {
		z = reduce_keep(a, "ReduceSum", ad_op1(a, "Abs", x), &ax, 1);
		s = ad_op2(a, "Sub", ad_cast(a, ad_op2(a, "Greater", x, zero), dt), ad_cast(a, ad_op2(a, "Less", x, zero), dt));
	} else {
		z = ad_op1(a, "Sqrt", reduce_keep(a, "ReduceSum", ad_op2(a, "Mul", x, x), &ax, 1));
		s = y;
	}
	struct value *gy = reduce_keep(a, "ReduceSum", ad_op2(a, "Mul", g, y), &ax, 1);
	return ad_give(a, x, ad_op2(a, "Div", ad_op2(a, "Sub", g, ad_op2(a, "Mul", s, gy)), z));
}

/* LRN, with S the windowed channel sum of x^2 (a MatMul by a C x C band matrix B over x viewed
 * (N, C, spatial)), d = bias + alpha/size S and y = x d^-beta:
 *   dx = g d^-beta - (2 alpha beta / size) x B^T(g x d^(-beta-1)). */
static int lrn_grad(struct ad *a, const struct node *n)
{
	struct value *x = n->in[0], *g = ad_dy(a, n->out[0]);
	const struct rtensor *xs = ad_shape(a, x);
	int dt = xs->dtype;
	int64_t C = xs->dims[1], size = attr_int(n, "size", 1), lo = (size - 1) / 2, hi = size / 2, view[3] = {0, C, -1};
	double alpha = attr_float(n, "alpha", 1e-4f), beta = attr_float(n, "beta", 0.75f), bias = attr_float(n, "bias", 1);
	double *band = xcalloc((size_t)(C * C * 2), sizeof *band);
	if (!band)
		return ad_fail(a, "out of memory");
	for (int64_t c = 0; c < C; c++)
		for (int64_t k = c - lo > 0 ? c - lo : 0; k <= c + hi && k < C; k++)
			band[c * C + k] = band[C * C + k * C + c] = 1; /* B, then B^T */
	int64_t bd[2] = {C, C};
	struct value *B = ad_tensor(a, dt, 2, bd, band), *BT = ad_tensor(a, dt, 2, bd, band + C * C);
	xfree(band);
	struct value *vs = ad_ints(a, view, 3), *shape = ad_shape_of(a, x);
	struct value *S = ad_op2(a, "Reshape", ad_op2(a, "MatMul", B, ad_op2(a, "Reshape", ad_op2(a, "Mul", x, x), vs)), shape);
	struct value *d = ad_op2(a, "Add", ad_op2(a, "Mul", S, ad_scalar(a, dt, alpha / (double)size)), ad_scalar(a, dt, bias));
	struct value *dnb = ad_op2(a, "Pow", d, ad_scalar(a, dt, -beta));
	struct value *t = ad_op2(a, "Div", ad_op2(a, "Mul", ad_op2(a, "Mul", g, x), dnb), d);
	struct value *u = ad_op2(a, "Reshape", ad_op2(a, "MatMul", BT, ad_op2(a, "Reshape", t, vs)), shape);
	struct value *k = ad_scalar(a, dt, 2 * alpha * beta / (double)size);
	return ad_give(a, x, ad_op2(a, "Sub", ad_op2(a, "Mul", g, dnb), ad_op2(a, "Mul", ad_op2(a, "Mul", x, u), k)));
}

const struct op_impl op_rms_norm = {.run = rms_norm_run, .cost = per_input_cost_4, .grad = rms_norm_grad, .recompute = RC_CHEAP};
const struct op_impl op_group_norm = {.run = group_norm_run, .cost = per_input_cost_8, .grad = group_norm_grad, .recompute = RC_CHEAP};
const struct op_impl op_mvn = {.run = mvn_run, .cost = per_input_cost_8, .grad = mvn_grad, .recompute = RC_CHEAP};
const struct op_impl op_lp_norm = {.run = lp_norm_run, .cost = per_input_cost_4, .grad = lp_norm_grad, .recompute = RC_CHEAP};
const struct op_impl op_lrn = {.run = lrn_run, .cost = per_input_cost_8, .grad = lrn_grad, .recompute = RC_CHEAP};
