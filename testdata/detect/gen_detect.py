"""gen_detect.py - NonMaxSuppression and RoiAlign cases for tests/ops/detect.c, in the layout of
ONNX's backend tests (NAME/model.onnx, NAME/test_data_set_0/{input_K,output_0}.pb), so that
`graphdiet verify --against NAME/test_data_set_0 NAME/model.onnx` checks them.

The expected outputs come from torchvision (0.14: ops.nms, ops.roi_align), which graphdiet's code
does not share: NMS per (batch, class) after the score filter, truncated to the per-class limit;
RoiAlign avg with aligned=True (ONNX's half_pixel) and aligned=False (output_half_pixel, opset 10).
RoiAlign's max mode has no torchvision counterpart: its expected values come from roi_max below,
NumPy written from the spec's words (the largest weighted tap of every sample point in a bin), and
were checked against onnxruntime 1.30 (tests/ort/run_ort.cjs) when generated.

Run: /usr/bin/python3 testdata/detect/gen_detect.py testdata/detect"""
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import helper, numpy_helper, TensorProto

F = TensorProto.FLOAT


def save(out, name, opset, node, inputs, outputs):
    """a one-node model and its data set 0; inputs/outputs: (name, array, elem type) in order"""
    vi = lambda n, a, t: helper.make_tensor_value_info(n, t, list(a.shape))
    g = helper.make_graph([node], name, [vi(*i) for i in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, _, t in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="gen_detect.py")
    d = os.path.join(out, name, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(out, name, "model.onnx"))
    for kind, ts in (("input", inputs), ("output", outputs)):
        for k, (n, a, _) in enumerate(ts):
            with open(os.path.join(d, "%s_%d.pb" % (kind, k)), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())


def tv_nms(boxes_xyxy, scores, max_out, iou, thr):
    """selected_indices (S, 3) by torchvision.ops.nms for every (batch, class)"""
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            keep = np.nonzero(s > thr)[0] if thr is not None else np.arange(s.shape[0])
            sel = torchvision.ops.nms(torch.from_numpy(boxes_xyxy[b, keep]).double(), torch.from_numpy(s[keep]).double(), iou)
            rows += [[b, c, int(keep[i])] for i in sel.numpy()[:max_out]]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def nms_cases(out, rng):
    B, C, N = 2, 3, 16
    lo = rng.uniform(0, 8, (B, N, 2)).astype(np.float32)
    size = rng.uniform(1, 5, (B, N, 2)).astype(np.float32)
    xyxy = np.concatenate([lo, lo + size], axis=2)  # x1, y1, x2, y2
    scores = rng.uniform(0, 1, (B, C, N)).astype(np.float32)
    scores[0, 0] *= 0.2  # class 0 of batch 0: two boxes above the threshold, three at it, which are
    scores[0, 0, 3:5] = 0.6, 0.7  # removed (onnxruntime's `score > threshold`)
    scores[0, 0, :3] = 0.25
    scores[1, 2, 5] = scores[1, 2, 9]  # a tie: the lower index first
    # corners: ONNX's [y1, x1, y2, x2], every other box given from its other diagonal corner pair
    yxyx = xyxy[..., [1, 0, 3, 2]].copy()
    yxyx[:, ::2] = yxyx[:, ::2][..., [2, 3, 0, 1]]
    want = tv_nms(xyxy, scores, 4, 0.3, 0.25)
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "thr"], ["selected"])
    save(out, "nms_corners_threshold", 11, node,
         [("boxes", yxyx, F), ("scores", scores, F), ("max", np.array([4], np.int64), TensorProto.INT64),
          ("iou", np.array([0.3], np.float32), F), ("thr", np.array([0.25], np.float32), F)],
         [("selected", want, TensorProto.INT64)])
    # centers [x_center, y_center, width, height]; no score threshold; opset 10; a scalar limit
    cxcywh = np.concatenate([lo + size / 2, size], axis=2)
    want = tv_nms(xyxy, scores, 100, 0.5, None)
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou"], ["selected"], center_point_box=1)
    save(out, "nms_centers", 10, node,
         [("boxes", cxcywh, F), ("scores", scores, F), ("max", np.array(100, np.int64), TensorProto.INT64),
          ("iou", np.array([0.5], np.float32), F)],
         [("selected", want, TensorProto.INT64)])
    # iou_threshold omitted (its default, 0: any overlap suppresses), score_threshold given
    want = tv_nms(xyxy, scores, 3, 0.0, 0.5)
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "", "thr"], ["selected"])
    save(out, "nms_default_iou", 11, node,
         [("boxes", yxyx, F), ("scores", scores, F), ("max", np.array([3], np.int64), TensorProto.INT64),
          ("thr", np.array([0.5], np.float32), F)],
         [("selected", want, TensorProto.INT64)])
    # max_output_boxes_per_class omitted: 0, which selects nothing (the spec's default)
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["selected"])
    save(out, "nms_no_limit_selects_none", 11, node, [("boxes", yxyx, F), ("scores", scores, F)],
         [("selected", np.zeros((0, 3), np.int64), TensorProto.INT64)])


def roi_inputs(rng):
    X = rng.standard_normal((2, 3, 8, 10)).astype(np.float32)
    rois = np.array([[0, 0, 9, 7], [1.5, 2.25, 6.5, 5.0], [-2, -1.5, 4, 3], [7.5, 5, 12, 9.5], [3, 3, 3.4, 3.2]],
                    np.float32) * 2  # spatial_scale 0.5 brings them back
    idx = np.array([0, 1, 1, 0, 1], np.int64)
    return X, rois, idx


def tv_roi(X, rois, idx, oh, ow, scale, sampling, aligned):
    r = torch.from_numpy(np.concatenate([idx[:, None].astype(np.float64), rois.astype(np.float64)], axis=1))
    y = torchvision.ops.roi_align(torch.from_numpy(X).double(), r, (oh, ow), scale, sampling, aligned)
    return y.numpy().astype(np.float32)


def roi_max(X, rois, idx, oh, ow, scale, sampling):
    """max mode, half_pixel: per bin, the largest of w_k X[tap_k] over its sample points' taps"""
    H, W = X.shape[2:]
    Y = np.zeros((len(rois), X.shape[1], oh, ow))
    for r, (x0, y0, x1, y1) in enumerate(rois.astype(np.float64) * scale - 0.5):
        bh, bw = (y1 - y0) / oh, (x1 - x0) / ow
        gh = sampling or int(np.ceil((y1 - y0) / oh))
        gw = sampling or int(np.ceil((x1 - x0) / ow))
        img = X[idx[r]].astype(np.float64)

        def axis(c, n):  # [(tap, weight)] of one coordinate
            if c < -1 or c > n:
                return [(0, 0.0), (0, 0.0)]
            c = max(c, 0.0)
            lo = int(c)
            if lo >= n - 1:
                return [(n - 1, 1.0), (n - 1, 0.0)]
            return [(lo, 1 - (c - lo)), (lo + 1, c - lo)]

        for ph in range(oh):
            for pw in range(ow):
                best = None
                for iy in range(gh):
                    for ix in range(gw):
                        ys = axis(y0 + ph * bh + (iy + 0.5) * bh / gh, H)
                        xs = axis(x0 + pw * bw + (ix + 0.5) * bw / gw, W)
                        taps = np.stack([wy * wx * img[:, ty, tx] for ty, wy in ys for tx, wx in xs])
                        v = taps.max(axis=0)
                        best = v if best is None else np.maximum(best, v)
                Y[r, :, ph, pw] = best
    return Y.astype(np.float32)


def roi_cases(out, rng):
    X, rois, idx = roi_inputs(rng)
    ins = [("X", X, F), ("rois", rois, F), ("batch_indices", idx, TensorProto.INT64)]
    names = [i[0] for i in ins]
    # opset 16's default: half_pixel, avg; adaptive sampling
    node = helper.make_node("RoiAlign", names, ["Y"], output_height=3, output_width=4, spatial_scale=0.5)
    save(out, "roialign_half_pixel_adaptive", 16, node, ins, [("Y", tv_roi(X, rois, idx, 3, 4, 0.5, 0, True), F)])
    # opset 10: no coordinate_transformation_mode, output_half_pixel's behaviour
    node = helper.make_node("RoiAlign", names, ["Y"], output_height=2, output_width=3, spatial_scale=0.5, sampling_ratio=2)
    save(out, "roialign_opset10", 10, node, ins, [("Y", tv_roi(X, rois, idx, 2, 3, 0.5, 2, False), F)])
    node = helper.make_node("RoiAlign", names, ["Y"], output_height=3, output_width=2, spatial_scale=0.5, sampling_ratio=2,
                            mode="max")
    save(out, "roialign_max", 16, node, ins, [("Y", roi_max(X, rois, idx, 3, 2, 0.5, 2), F)])


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(47)
    nms_cases(out, rng)
    roi_cases(out, rng)
