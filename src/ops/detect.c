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
	double ix0 = fmax(a->x0, b->x0), ix1 = fmin(a->x1, b->x1), iy0 = fmax(a->y0, b->y0), iy1 = fmin(a->y1, b->y1);
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

/* Selects for each (batch, class) into sel (rows of 3); returns how many, or -1 when out of memory */
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
				if (sel) {
					sel[3 * S] = b;
					sel[3 * S + 1] = c;
					sel[3 * S + 2] = i;
				}
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
	int64_t m = max_out > 0 ? (int64_t)max_out : 0;
	/* first count, then fill: the output is allocated at its exact length */
	int64_t S = nms_select(x, boxes, scores, m, iou, has_thr, thr, (int)center, NULL);
	if (S < 0)
		return exec_status(x);
	int64_t dims[2] = {S, 3};
	int64_t *o = exec_alloc(x, out[0], DT_INT64, 2, dims);
	if (!o)
		return exec_status(x);
	if (nms_select(x, boxes, scores, m, iou, has_thr, thr, (int)center, o) < 0)
		return exec_status(x);
	return 0;
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

/* Y[r, c] (oh, ow) for the (r, c) pairs [lo, hi) */
static void roi_range(void *arg, int64_t lo, int64_t hi)
{
	const struct roi_job *j = arg;
	for (int64_t rc = lo; rc < hi; rc++) {
		int64_t r = rc / j->C, c = rc % j->C, b = (int64_t)rt_get(j->idx, r);
		double x0 = rt_get(j->rois, 4 * r) * j->scale - j->offset, y0 = rt_get(j->rois, 4 * r + 1) * j->scale - j->offset,
		       x1 = rt_get(j->rois, 4 * r + 2) * j->scale - j->offset, y1 = rt_get(j->rois, 4 * r + 3) * j->scale - j->offset;
		double rw = x1 - x0, rh = y1 - y0;
		if (j->widen) {
			rw = fmax(rw, 1.0);
			rh = fmax(rh, 1.0);
		}
		double bh = rh / (double)j->oh, bw = rw / (double)j->ow;
		int64_t gh = j->sampling > 0 ? j->sampling : (int64_t)ceil(rh / (double)j->oh),
			gw = j->sampling > 0 ? j->sampling : (int64_t)ceil(rw / (double)j->ow);
		double count = gh * gw > 1 ? (double)(gh * gw) : 1.0;
		int64_t plane = (b * j->C + c) * j->H * j->W;
		for (int64_t ph = 0; ph < j->oh; ph++)
			for (int64_t pw = 0; pw < j->ow; pw++) {
				double acc = 0;
				int any = 0;
				for (int64_t iy = 0; iy < gh; iy++) {
					int64_t ylo, yhi;
					double wyl, wyh;
					roi_taps(y0 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh, j->H, &ylo, &yhi, &wyl, &wyh);
					for (int64_t ix = 0; ix < gw; ix++) {
						int64_t xlo, xhi;
						double wxl, wxh;
						roi_taps(x0 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw, j->W, &xlo, &xhi, &wxl,
							 &wxh);
						double t[4] = {wyl * wxl * rt_get(j->x, plane + ylo * j->W + xlo),
							       wyl * wxh * rt_get(j->x, plane + ylo * j->W + xhi),
							       wyh * wxl * rt_get(j->x, plane + yhi * j->W + xlo),
							       wyh * wxh * rt_get(j->x, plane + yhi * j->W + xhi)};
						if (j->max) {
							double v = fmax(fmax(t[0], t[1]), fmax(t[2], t[3]));
							acc = any ? fmax(acc, v) : v;
							any = 1;
						} else {
							acc += t[0] + t[1] + t[2] + t[3];
						}
					}
				}
				rt_set(j->y, (rc * j->oh + ph) * j->ow + pw, j->max ? acc : acc / count);
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
	int64_t dims[4] = {in[1]->dims[0], j.C, j.oh, j.ow};
	if (!exec_alloc(x, out[0], in[0]->dtype, 4, dims))
		return exec_status(x);
	j.y = out[0];
	kernel_for(dims[0] * j.C, 1, roi_range, &j);
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
