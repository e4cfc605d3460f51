/* detect.c - the ops of detection models' heads (torchvision's Faster/Mask R-CNN exports):
 * NonMaxSuppression and RoiAlign. CPU kernels, shape rules and costs; forward only.
 *
 * Neither has a gradient: NonMaxSuppression's output is indices, and RoiAlign in these models reads
 * proposals that NonMaxSuppression chose, so no input of either is differentiated (nodiff ~0). The
 * semantics are the spec's as onnxruntime implements them (ONNX's test data come from it):
 *
 * NonMaxSuppression(boxes (B, N, 4), scores (B, C, N), max_output_boxes_per_class, iou_threshold,
 * score_threshold) -> selected_indices (S, 3) int64, rows (batch, class, box). For each batch and
 * class, the boxes whose score is above score_threshold (strictly; all when it is omitted) are
 * taken in descending score (ties: lower index first), and each is selected unless its IoU with
 * one already selected in that class exceeds iou_threshold (strictly), until
 * max_output_boxes_per_class are (0, the default, selects none; negative counts as 0). Boxes are
 * [y1, x1, y2, x2] corners in either order (center_point_box 0) or [x_center, y_center, width,
 * height] (1). Boxes that do not overlap, or have no area, never suppress each other. S depends on
 * the values, so a shapes-only run knows it only when the inputs are known (as NonZero's).
 *
 * RoiAlign(X (N, C, H, W), rois (R, 4) [x1, y1, x2, y2], batch_indices (R)) -> Y (R, C, oh, ow):
 * each region, scaled by spatial_scale (and shifted by -0.5 under half_pixel, opset 16's default;
 * output_half_pixel is opset 10's behaviour, which also widens a region to at least 1 x 1), is cut
 * into oh x ow bins; each bin reads a gh x gw grid of points (sampling_ratio, or ceil(region / bins)
 * when it is 0) by bilinear interpolation, a point more than one pixel outside X reading 0 and one
 * within it clamped to the edge. mode avg averages the points' values; max takes the largest of
 * the points' four weighted taps w_k X[tap_k] (onnxruntime's definition, which ONNX's spec
 * follows), not the largest interpolated value. Computed in double whatever the float dtype. */
#include "kernel.h"
#include "../ir/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- NonMaxSuppression ---- */

struct nms_box {
	double x0, x1, y0, y1; /* x0 <= x1, y0 <= y1 */
};

static struct nms_box nms_box_at(const struct rtensor *b, int64_t at, int center)
{
	double v[4];
	for (int k = 0; k < 4; k++)
		v[k] = rt_get(b, at + k);
	if (center)
		return (struct nms_box){v[0] - v[2] / 2, v[0] + v[2] / 2, v[1] - v[3] / 2, v[1] + v[3] / 2};
	return (struct nms_box){fmin(v[1], v[3]), fmax(v[1], v[3]), fmin(v[0], v[2]), fmax(v[0], v[2])};
}

/* Whether a and b overlap by more than iou (onnxruntime's SuppressByIOU) */
static int nms_suppresses(const struct nms_box *a, const struct nms_box *b, double iou)
{
	/* std::max and std::min's ternaries, as onnxruntime's (and inlined, where fmin is a call) */
	double ix0 = a->x0 > b->x0 ? a->x0 : b->x0, ix1 = a->x1 < b->x1 ? a->x1 : b->x1,
	       iy0 = a->y0 > b->y0 ? a->y0 : b->y0, iy1 = a->y1 < b->y1 ? a->y1 : b->y1;
	if (ix1 <= ix0 || iy1 <= iy0)
		return 0;
	double inter = (ix1 - ix0) * (iy1 - iy0), area_a = (a->x1 - a->x0) * (a->y1 - a->y0),
	       area_b = (b->x1 - b->x0) * (b->y1 - b->y0), uni = area_a + area_b - inter;
	if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0)
		return 0;
	return inter / uni > iou;
}

struct nms_cand {
	double score;
	int64_t box;
};

/* descending score, then ascending box index: a total order, so qsort's instability is moot */
static int nms_cand_cmp(const void *p, const void *q)
{
	const struct nms_cand *a = p, *b = q;
	if (a->score != b->score)
		return a->score < b->score ? 1 : -1;
	return (a->box > b->box) - (a->box < b->box);
}

/* optional scalar input k (a scalar or a [1]); 0 when given */
static int nms_scalar(struct exec *x, const struct node *n, struct rtensor *const *in, uint32_t k, const char *what,
		      double *v)
{
	if (n->n_in <= k || !in[k])
		return 0;
	if (in[k]->numel != 1)
		return exec_fail(x, "%s must hold one element, not %lld", what, (long long)in[k]->numel);
	*v = rt_get(in[k], 0);
	return 0;
}

/* Selects for each (batch, class) into sel (rows of 3); returns how many, or -1 when out of memory.
 * max_out is at most N. */
static int64_t nms_select(struct exec *x, const struct rtensor *boxes, const struct rtensor *scores, int64_t max_out,
			  double iou, int has_thr, double thr, int center, int64_t *sel)
{
	int64_t B = boxes->dims[0], N = boxes->dims[1], C = scores->dims[1], S = 0;
	size_t bytes = (size_t)N * (sizeof(struct nms_cand) + sizeof(struct nms_box) + sizeof(int64_t)) + 1;
	struct nms_cand *cand = exec_scratch_raw(x, bytes);
	if (!cand)
		return -1;
	struct nms_box *box = (struct nms_box *)(cand + N);
	int64_t *kept = (int64_t *)(box + N);
	for (int64_t b = 0; b < B; b++) {
		for (int64_t i = 0; i < N; i++)
			box[i] = nms_box_at(boxes, (b * N + i) * 4, center);
		for (int64_t c = 0; c < C; c++) {
			int64_t m = 0, nk = 0;
			for (int64_t i = 0; i < N; i++) {
				double s = rt_get(scores, (b * C + c) * N + i);
				if (!has_thr || s > thr)
					cand[m++] = (struct nms_cand){s, i};
			}
			qsort(cand, (size_t)m, sizeof *cand, nms_cand_cmp);
			for (int64_t j = 0; j < m && nk < max_out; j++) {
				int64_t i = cand[j].box, k = 0;
				while (k < nk && !nms_suppresses(&box[kept[k]], &box[i], iou))
					k++;
				if (k < nk)
					continue;
				kept[nk++] = i;
				sel[3 * S] = b;
				sel[3 * S + 1] = c;
				sel[3 * S + 2] = i;
				S++;
			}
		}
	}
	exec_scratch_free(x, cand, bytes);
	return S;
}

static int nms_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	const struct rtensor *boxes = in[0], *scores = in[1];
	if (want_float(x, boxes, "boxes") || want_float(x, scores, "scores"))
		return exec_status(x);
	if (boxes->ndim != 3 || boxes->dims[2] != 4)
		return exec_fail(x, "boxes must be (num_batches, num_boxes, 4)");
	if (scores->ndim != 3 || scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
		return exec_fail(x, "scores must be (num_batches, num_classes, num_boxes) = (%lld, C, %lld)",
				 (long long)boxes->dims[0], (long long)boxes->dims[1]);
	int64_t center = attr_int(n, "center_point_box", 0);
	if (center != 0 && center != 1)
		return exec_fail(x, "center_point_box must be 0 or 1, not %lld", (long long)center);
	for (uint32_t k = 2; k < n->n_in && k < 5; k++)
		if (in[k] && !in[k]->data)
			return exec_fail(x, "NonMaxSuppression's output length depends on its inputs' values, which are not "
					    "known before running");
	double max_out = 0, iou = 0, thr = 0;
	if (nms_scalar(x, n, in, 2, "max_output_boxes_per_class", &max_out) ||
	    nms_scalar(x, n, in, 3, "iou_threshold", &iou) || nms_scalar(x, n, in, 4, "score_threshold", &thr))
		return exec_status(x);
	if (n->n_in > 2 && in[2] && in[2]->dtype != DT_INT64)
		return exec_fail(x, "max_output_boxes_per_class must be int64, not %s", dtype_name(in[2]->dtype));
	if (!(iou >= 0 && iou <= 1))
		return exec_fail(x, "iou_threshold must be in [0, 1], not %g", iou);
	if (!boxes->data || !scores->data)
		return exec_fail(x, "NonMaxSuppression's output length depends on its inputs' values, which are not "
				    "known before running");
	int has_thr = n->n_in > 4 && in[4];
	int64_t N = boxes->dims[1], m = max_out <= 0 ? 0 : max_out < (double)N ? (int64_t)max_out : N;
	/* selected into workspace of the most there can be, then copied to the output at its length */
	size_t bytes = (size_t)(boxes->dims[0] * scores->dims[1] * m * 3 + 1) * sizeof(int64_t);
	int64_t *sel = exec_scratch_raw(x, bytes);
	if (!sel)
		return exec_status(x);
	int64_t S = nms_select(x, boxes, scores, m, iou, has_thr, thr, (int)center, sel), dims[2] = {S, 3};
	int64_t *o = S < 0 ? NULL : exec_alloc(x, out[0], DT_INT64, 2, dims);
	if (o)
		memcpy(o, sel, (size_t)S * 3 * sizeof *o);
	exec_scratch_free(x, sel, bytes);
	return exec_status(x);
}

/* sorting each class's boxes, then up to N IoUs per box taken (about 12 operations each) */
static void nms_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
		     uint64_t *bytes)
{
	(void)n;
	(void)out;
	(void)bytes;
	double N = (double)in[0]->dims[1], BC = (double)in[1]->dims[0] * (double)in[1]->dims[1];
	*flops = (uint64_t)(BC * N * (log2(N + 1) + 12 * N));
}

/* ---- RoiAlign ---- */

struct roi_job {
	const struct rtensor *x, *rois, *idx;
	struct rtensor *y;
	int64_t C, H, W, oh, ow, sampling;
	double scale, offset;
	int max, widen;
	/* the region being computed: its image, its points' taps (pos, w: 4 per point, the bins'
	 * points in order, gh x gw per bin) and the average's divisor */
	int64_t r, b, points;
	const int64_t *pos;
	const double *w;
	double count;
};

/* One axis of a sample point at c in a side of len pixels: taps lo, hi with weights wl, wh (both 0
 * when c is more than a pixel outside) */
static void roi_taps(double c, int64_t len, int64_t *lo, int64_t *hi, double *wl, double *wh)
{
	if (c < -1.0 || c > (double)len) {
		*lo = *hi = 0;
		*wl = *wh = 0;
		return;
	}
	if (c <= 0)
		c = 0;
	*lo = (int64_t)c;
	if (*lo >= len - 1) {
		*lo = *hi = len - 1;
		c = (double)*lo;
	} else {
		*hi = *lo + 1;
	}
	*wh = c - (double)*lo;
	*wl = 1 - *wh;
}

/* Region r's geometry: its corner (x0, y0), its bins' sizes and its grid gh x gw */
struct roi_geom {
	double x0, y0, bh, bw;
	int64_t gh, gw;
};

static struct roi_geom roi_geom_of(const struct roi_job *j, int64_t r)
{
	struct roi_geom g;
	double c[4];
	for (int k = 0; k < 4; k++)
		c[k] = rt_get(j->rois, 4 * r + k) * j->scale - j->offset;
	double rw = c[2] - c[0], rh = c[3] - c[1];
	if (j->widen) {
		rw = fmax(rw, 1.0);
		rh = fmax(rh, 1.0);
	}
	g.x0 = c[0];
	g.y0 = c[1];
	g.bh = rh / (double)j->oh;
	g.bw = rw / (double)j->ow;
	/* points per bin: 0 for an inverted or NaN region (as onnxruntime's loops), at most 2^20 (the
	 * caller refuses grids past its cap) */
	double gh = j->sampling > 0 ? (double)j->sampling : ceil(rh / (double)j->oh);
	double gw = j->sampling > 0 ? (double)j->sampling : ceil(rw / (double)j->ow);
	g.gh = gh >= 0 ? (int64_t)fmin(gh, 1 << 20) : 0;
	g.gw = gw >= 0 ? (int64_t)fmin(gw, 1 << 20) : 0;
	return g;
}

/* The taps of region r's points into pos and w (4 each per point) */
static void roi_points(const struct roi_job *j, const struct roi_geom *g, int64_t *pos, double *w)
{
	int64_t p = 0;
	for (int64_t ph = 0; ph < j->oh; ph++)
		for (int64_t pw = 0; pw < j->ow; pw++)
			for (int64_t iy = 0; iy < g->gh; iy++) {
				int64_t ylo, yhi;
				double wyl, wyh;
				roi_taps(g->y0 + (double)ph * g->bh + ((double)iy + 0.5) * g->bh / (double)g->gh, j->H, &ylo, &yhi, &wyl,
					 &wyh);
				for (int64_t ix = 0; ix < g->gw; ix++, p++) {
					int64_t xlo, xhi;
					double wxl, wxh;
					roi_taps(g->x0 + (double)pw * g->bw + ((double)ix + 0.5) * g->bw / (double)g->gw, j->W, &xlo, &xhi,
						 &wxl, &wxh);
					int64_t *q = pos + 4 * p;
					double *v = w + 4 * p;
					q[0] = ylo * j->W + xlo, q[1] = ylo * j->W + xhi, q[2] = yhi * j->W + xlo, q[3] = yhi * j->W + xhi;
					v[0] = wyl * wxl, v[1] = wyl * wxh, v[2] = wyh * wxl, v[3] = wyh * wxh;
				}
			}
}

/* Y[r, c] (oh, ow) of the current region for channels [lo, hi): avg sums the points' taps, max
 * takes the largest weighted tap */
static void roi_range(void *arg, int64_t lo, int64_t hi)
{
	const struct roi_job *j = arg;
	int dbl = j->x->dtype == DT_DOUBLE;
	int64_t per_bin = j->points / (j->oh * j->ow);
	for (int64_t c = lo; c < hi; c++) {
		int64_t plane = (j->b * j->C + c) * j->H * j->W;
		const float *xf = (const float *)j->x->data + plane;
		const double *xd = (const double *)j->x->data + plane;
		for (int64_t bin = 0; bin < j->oh * j->ow; bin++) {
			double acc = 0;
			for (int64_t p = bin * per_bin; p < (bin + 1) * per_bin; p++) {
				const int64_t *q = j->pos + 4 * p;
				const double *w = j->w + 4 * p;
				double t[4];
				for (int k = 0; k < 4; k++)
					t[k] = w[k] * (dbl ? xd[q[k]] : (double)xf[q[k]]);
				if (j->max) {
					double v = fmax(fmax(t[0], t[1]), fmax(t[2], t[3]));
					acc = p == bin * per_bin ? v : fmax(acc, v);
				} else {
					acc += t[0] + t[1] + t[2] + t[3];
				}
			}
			rt_set(j->y, (j->r * j->C + c) * j->oh * j->ow + bin, j->max ? acc : acc / j->count);
		}
	}
}

static int roi_job_init(struct exec *x, const struct node *n, struct rtensor *const *in, struct roi_job *j)
{
	const struct rtensor *X = in[0], *rois = in[1], *idx = in[2];
	if (want_float(x, X, "X") || want_float(x, rois, "rois"))
		return -1;
	if (X->ndim != 4)
		return exec_fail(x, "X must be (N, C, H, W), not of rank %d", X->ndim);
	if (rois->ndim != 2 || rois->dims[1] != 4)
		return exec_fail(x, "rois must be (num_rois, 4)");
	if (idx->ndim != 1 || idx->dims[0] != rois->dims[0] || idx->dtype != DT_INT64)
		return exec_fail(x, "batch_indices must be int64 of shape (%lld), one per roi", (long long)rois->dims[0]);
	*j = (struct roi_job){.x = X, .rois = rois, .idx = idx, .C = X->dims[1], .H = X->dims[2], .W = X->dims[3]};
	j->oh = attr_int(n, "output_height", 1);
	j->ow = attr_int(n, "output_width", 1);
	j->sampling = attr_int(n, "sampling_ratio", 0);
	j->scale = attr_float(n, "spatial_scale", 1.0f);
	if (j->oh < 1 || j->ow < 1)
		return exec_fail(x, "output_height and output_width must be positive, not %lld x %lld", (long long)j->oh,
				 (long long)j->ow);
	if (j->sampling < 0)
		return exec_fail(x, "sampling_ratio must be 0 or more, not %lld", (long long)j->sampling);
	j->max = attr_str_is(n, "mode", "max", 0);
	if (!j->max && !attr_str_is(n, "mode", "avg", 1))
		return exec_fail(x, "mode must be avg or max");
	/* opset 10 has no coordinate_transformation_mode: its behaviour is output_half_pixel */
	int half = attr_str_is(n, "coordinate_transformation_mode", "half_pixel", exec_opset(x) >= 16);
	if (!half && !attr_str_is(n, "coordinate_transformation_mode", "output_half_pixel", 1))
		return exec_fail(x, "coordinate_transformation_mode must be half_pixel or output_half_pixel");
	j->offset = half ? 0.5 : 0;
	j->widen = !half;
	if (idx->data)
		for (int64_t r = 0; r < idx->numel; r++) {
			double b = rt_get(idx, r);
			if (b < 0 || b >= (double)X->dims[0])
				return exec_fail(x, "batch_indices[%lld] = %g is outside X's batch of %lld", (long long)r, b,
						 (long long)X->dims[0]);
		}
	return 0;
}

static int roi_align_run(struct exec *x, const struct node *n, struct rtensor *const *in, struct rtensor *const *out)
{
	struct roi_job j;
	if (roi_job_init(x, n, in, &j))
		return exec_status(x);
	int64_t R = in[1]->dims[0], dims[4] = {R, j.C, j.oh, j.ow}, most = 0;
	if (!exec_alloc(x, out[0], in[0]->dtype, 4, dims))
		return exec_status(x);
	j.y = out[0];
	/* the taps of a region's points are computed once and read by every channel (onnxruntime's
	 * pre-computation): the buffer holds the largest region's */
	for (int64_t r = 0; r < R; r++) {
		struct roi_geom g = roi_geom_of(&j, r);
		if ((double)g.gh * (double)g.gw * (double)(j.oh * j.ow) > 1e8)
			return exec_fail(x, "region %lld samples %lld x %lld points per bin: past the 10^8 points graphdiet "
					    "samples a region",
					 (long long)r, (long long)g.gh, (long long)g.gw);
		if (g.gh * g.gw > most)
			most = g.gh * g.gw;
	}
	size_t bytes = (size_t)(j.oh * j.ow * (most ? most : 1)) * 4 * (sizeof(int64_t) + sizeof(double));
	int64_t *pos = exec_scratch_raw(x, bytes);
	if (!pos)
		return exec_status(x);
	double *w = (double *)(pos + bytes / (sizeof(int64_t) + sizeof(double)));
	for (int64_t r = 0; r < R; r++) {
		struct roi_geom g = roi_geom_of(&j, r);
		j.r = r;
		j.b = (int64_t)rt_get(j.idx, r);
		j.points = j.oh * j.ow * g.gh * g.gw;
		j.count = g.gh * g.gw > 1 ? (double)(g.gh * g.gw) : 1.0;
		j.pos = pos;
		j.w = w;
		if (!j.points) {
			for (int64_t e = 0; e < j.C * j.oh * j.ow; e++) /* no points: avg's 0 / 1, max's 0 */
				rt_set(j.y, r * j.C * j.oh * j.ow + e, 0);
			continue;
		}
		roi_points(&j, &g, pos, w);
		kernel_for(j.C, 8, roi_range, &j);
	}
	exec_scratch_free(x, pos, bytes);
	return 0;
}

/* per output element, gh x gw points (4 when adaptive: unknown without the rois) of 4 taps */
static void roi_align_cost(const struct node *n, struct rtensor *const *in, struct rtensor *const *out, uint64_t *flops,
			   uint64_t *bytes)
{
	(void)in;
	(void)bytes;
	int64_t s = attr_int(n, "sampling_ratio", 0);
	uint64_t points = s > 0 ? (uint64_t)(s * s) : 4;
	*flops = (uint64_t)out[0]->numel * points * 12;
}

const struct op_impl op_non_max_suppression = {.run = nms_run, .cost = nms_cost, .recompute = RC_CHEAP, .nodiff = ~0u};
const struct op_impl op_roi_align = {.run = roi_align_run, .cost = roi_align_cost, .recompute = RC_EXPENSIVE,
				     .nodiff = ~0u};
