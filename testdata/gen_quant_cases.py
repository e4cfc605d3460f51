"""gen_quant_cases.py OUT - the quantization ops' cases that ONNX's backend tests (libonnx-testdata,
ONNX 1.12) do not cover, for tests/ops/quant.c: int8/int16 outputs, per-axis along other axes,
blocked scales (opset 21), per-row/per-column zero points and scales, batch broadcasting, grouped
strided and dilated integer convolutions, QLinearConv's bias, DynamicQuantizeLinear of zeros.

Each case is OUT/<name>/model.onnx with test_data_set_0/{input_K,output_K}.pb, laid out as ONNX's
backend tests are, so `graphdiet verify --against OUT/<name>/test_data_set_0 OUT/<name>/model.onnx`
checks it. The expected outputs come from the spec's formulas written here in numpy (float32
arithmetic as onnxruntime's kernels: round half to even with np.rint, then saturate), never from
graphdiet. Cases named bad_* are inputs graphdiet must refuse with exit 2 (their outputs are
placeholders). OUT/list.txt names every case, one a line.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
RNG = np.random.default_rng(47)
NAMES = []
TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.uint8): TensorProto.UINT8,
         np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int16): TensorProto.INT16,
         np.dtype(np.int32): TensorProto.INT32}
RANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127), np.dtype(np.int16): (-32768, 32767)}


def case(name, op, inputs, outputs, opset, **attrs):
    """inputs: [(name, array or None for an omitted one)]; outputs: [(name, array)]"""
    d = os.path.join(OUT, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    node = helper.make_node(op, [n if a is not None else "" for n, a in inputs], [n for n, _ in outputs], **attrs)
    vi = lambda n, a: helper.make_tensor_value_info(n, TYPES[a.dtype], a.shape)
    graph = helper.make_graph([node], name, [vi(n, a) for n, a in inputs if a is not None],
                              [vi(n, a) for n, a in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "model.onnx"))
    k = 0
    for n, a in inputs:
        if a is not None:
            t = numpy_helper.from_array(a, n)
            open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb").write(t.SerializeToString())
            k += 1
    for k, (n, a) in enumerate(outputs):
        t = numpy_helper.from_array(a, n)
        open(os.path.join(d, "test_data_set_0", "output_%d.pb" % k), "wb").write(t.SerializeToString())
    NAMES.append(name)


def along(p, x, axis, block=0):
    """a per-axis (1-D) or blocked scale/zero point spread over x's shape"""
    axis %= x.ndim
    if block:
        return np.repeat(p, block, axis=axis).take(range(x.shape[axis]), axis=axis)
    shape = [1] * x.ndim
    shape[axis] = -1
    return p.reshape(shape)


def quantize(x, s, zp, dt):
    lo, hi = RANGE[np.dtype(dt)]
    y = np.rint(x.astype(np.float32) / s.astype(np.float32)) + zp.astype(np.float32)
    return np.clip(y, lo, hi).astype(dt)


def dequantize(x, s, zp):
    return (x.astype(np.int64) - zp.astype(np.int64)).astype(np.float32) * s.astype(np.float32)


def requantize(acc, mult, zp, dt):
    lo, hi = RANGE[np.dtype(dt)]
    return np.clip(np.rint(acc.astype(np.float32) * mult.astype(np.float32)) + np.float32(zp), lo, hi).astype(dt)


def conv_int(x, w, xz, wz, strides, pads, dil, group):
    """direct integer convolution, any window rank; pads (begins..., ends...); wz per output channel"""
    r = x.ndim - 2
    xp = np.pad(x.astype(np.int64) - np.int64(xz), [(0, 0), (0, 0)] + [(pads[i], pads[i + r]) for i in range(r)])
    wi = w.astype(np.int64) - wz.astype(np.int64).reshape([-1] + [1] * (w.ndim - 1))
    m, cg = w.shape[0], w.shape[1]
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - dil[i] * (k[i] - 1) - 1) // strides[i] + 1 for i in range(r)]
    y = np.zeros([x.shape[0], m] + out, np.int64)
    mg = m // group
    for o in np.ndindex(*out):
        for t in np.ndindex(*k):
            at = tuple(o[i] * strides[i] + t[i] * dil[i] for i in range(r))
            for c in range(m):
                g = c // mg
                xs = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + at]  # (N, cg)
                y[(slice(None), c) + o] += xs @ wi[(c, slice(None)) + t]
    return y


f32 = lambda *a: np.array(a, np.float32)

# QuantizeLinear: int8 per-axis along axis 0, ties (to even) and saturation
x = f32([0.0, 2.5, -2.5, 300.0], [3.0, 9.0, -3.0, -1000.0], [0.125, 0.375, 100.0, -100.0])
s, zp = f32(1.0, 2.0, 0.25), np.array([0, -3, 5], np.int8)
case("quantizelinear_int8_axis0", "QuantizeLinear", [("x", x), ("s", s), ("zp", zp)],
     [("y", quantize(x, along(s, x, 0), along(zp, x, 0), np.int8))], 13, axis=0)
# no zero point: uint8, negatives saturate at 0
x = f32(-3.0, -0.5, 0.5, 1.5, 2.5, 600.0)
case("quantizelinear_no_zero_point", "QuantizeLinear", [("x", x), ("s", f32(2.0))],
     [("y", quantize(x, f32(2.0), np.uint8(0), np.uint8))], 13)
# blocked (opset 21): x (2, 6), blocks of 4 along axis 1 (the last one short)
x = (RNG.standard_normal((2, 6)) * 40).astype(np.float32)
s, zp = f32([0.5, 1.5], [2.0, 0.75]), np.array([[1, -2], [0, 7]], np.int8)
case("quantizelinear_blocked", "QuantizeLinear", [("x", x), ("s", s), ("zp", zp)],
     [("y", quantize(x, along(s, x, 1, 4), along(zp, x, 1, 4), np.int8))], 21, axis=1, block_size=4)
# int16 (opset 21), per axis along the last axis
x = (RNG.standard_normal((3, 2)) * 30000).astype(np.float32)
s, zp = f32(0.5, 0.25), np.array([100, -100], np.int16)
case("quantizelinear_int16", "QuantizeLinear", [("x", x), ("s", s), ("zp", zp)],
     [("y", quantize(x, along(s, x, -1), along(zp, x, -1), np.int16))], 21, axis=-1)

# DequantizeLinear: int8 per axis along axis -1; int32 without zero point; blocked
x = RNG.integers(-128, 128, (2, 3, 2)).astype(np.int8)
s, zp = f32(0.1, 3.0), np.array([-7, 12], np.int8)
case("dequantizelinear_int8_last_axis", "DequantizeLinear", [("x", x), ("s", s), ("zp", zp)],
     [("y", dequantize(x, along(s, x, -1), along(zp, x, -1)))], 13, axis=-1)
x = np.array([-2000000, -1, 0, 7, 123456789], np.int32)
case("dequantizelinear_int32", "DequantizeLinear", [("x", x), ("s", f32(0.001))],
     [("y", dequantize(x, f32(0.001), np.int32(0)))], 13)
x = RNG.integers(0, 256, (3, 5)).astype(np.uint8)
s, zp = f32([0.5, 2.0, 1.0]).reshape(3, 1), np.array([[128], [3], [250]], np.uint8)
case("dequantizelinear_blocked", "DequantizeLinear", [("x", x), ("s", s), ("zp", zp)],
     [("y", dequantize(x, along(s, x, 1, 5), along(zp, x, 1, 5)))], 21, axis=1, block_size=5)

# DynamicQuantizeLinear: all zeros (onnxruntime's scale 1, where the formula would divide 0 by 0)
x = np.zeros((2, 3), np.float32)
case("dynamicquantizelinear_zeros", "DynamicQuantizeLinear", [("x", x)],
     [("y", np.zeros((2, 3), np.uint8)), ("y_scale", np.float32(1.0)), ("y_zero_point", np.uint8(0))], 11)
x = (RNG.standard_normal((4, 5)) * 3 + 1).astype(np.float32)
lo, hi = np.float32(min(0, x.min())), np.float32(max(0, x.max()))
sc = np.float32((hi - lo) / np.float32(255))
z = np.uint8(np.rint(np.clip(np.float32(0) - lo / sc, 0, 255)))
case("dynamicquantizelinear_random", "DynamicQuantizeLinear", [("x", x)],
     [("y", quantize(x, sc, z, np.uint8)), ("y_scale", sc), ("y_zero_point", z)], 11)

# MatMulInteger: int8, batched A (2, 3, 4) by B (4, 5), a per-row and b per-column zero points
a = RNG.integers(-128, 128, (2, 3, 4)).astype(np.int8)
b = RNG.integers(-128, 128, (4, 5)).astype(np.int8)
za, zb = np.array([1, -2, 3], np.int8), np.array([0, 5, -5, 127, -128], np.int8)
y = np.matmul(a.astype(np.int32) - za.astype(np.int32)[:, None], b.astype(np.int32) - zb.astype(np.int32))
case("matmulinteger_int8_row_column", "MatMulInteger", [("A", a), ("B", b), ("za", za), ("zb", zb)],
     [("Y", y.astype(np.int32))], 10)
# 1-D A (4) by batched B (2, 4, 3), no zero points: Y (2, 3)
a = RNG.integers(0, 256, (4,)).astype(np.uint8)
b = RNG.integers(0, 256, (2, 4, 3)).astype(np.uint8)
case("matmulinteger_vector", "MatMulInteger", [("A", a), ("B", b)],
     [("Y", np.matmul(a.astype(np.int32), b.astype(np.int32)))], 10)

# QLinearMatMul: int8, per-row a scales and zero points, per-column b ones, int8 y
a = RNG.integers(-128, 128, (3, 4)).astype(np.int8)
b = RNG.integers(-128, 128, (4, 2)).astype(np.int8)
as_, za = f32(0.02, 0.05, 0.01), np.array([1, 0, -1], np.int8)
bs, zb = f32(0.03, 0.007), np.array([2, -3], np.int8)
ys, zy = f32(0.1), np.int8(-5)
acc = (a.astype(np.int64) - za.astype(np.int64)[:, None]) @ (b.astype(np.int64) - zb.astype(np.int64))
mult = as_[:, None] * bs[None, :] / ys
case("qlinearmatmul_int8_row_column", "QLinearMatMul",
     [("a", a), ("as", as_), ("za", za), ("b", b), ("bs", bs), ("zb", zb), ("ys", ys), ("zy", zy)],
     [("y", requantize(acc, mult, zy, np.int8))], 10)

# ConvInteger: groups 2, stride 2, pads 1, per-channel w zero points (uint8)
x = RNG.integers(0, 256, (1, 4, 5, 5)).astype(np.uint8)
w = RNG.integers(0, 256, (4, 2, 3, 3)).astype(np.uint8)
xz, wz = np.uint8(7), np.array([0, 128, 255, 3], np.uint8)
y = conv_int(x, w, xz, wz, [2, 2], [1, 1, 1, 1], [1, 1], 2)
case("convinteger_group_stride", "ConvInteger", [("x", x), ("w", w), ("xz", xz), ("wz", wz)],
     [("y", y.astype(np.int32))], 10, group=2, strides=[2, 2], pads=[1, 1, 1, 1])
# 1-D, int8, dilation 2, asymmetric pads
x = RNG.integers(-128, 128, (2, 2, 9)).astype(np.int8)
w = RNG.integers(-128, 128, (3, 2, 3)).astype(np.int8)
y = conv_int(x, w, np.int8(-4), np.zeros(3, np.int8), [1], [2, 1], [2], 1)
case("convinteger_1d_dilated", "ConvInteger", [("x", x), ("w", w), ("xz", np.int8(-4))],
     [("y", y.astype(np.int32))], 10, dilations=[2], pads=[2, 1])

# QLinearConv: int8 w with per-channel scales, int32 bias, uint8 y
x = RNG.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
w = RNG.integers(-128, 128, (3, 2, 2, 2)).astype(np.int8)
xs, xz, ws, wz = f32(0.02), np.uint8(128), f32(0.01, 0.05, 0.003), np.zeros(3, np.int8)
ys, zy, bias = f32(0.2), np.uint8(100), np.array([1000, -2000, 0], np.int32)
acc = conv_int(x, w, xz, wz, [1, 1], [0, 0, 0, 0], [1, 1], 1) + bias.reshape(1, 3, 1, 1)
mult = (xs * ws / ys).reshape(1, 3, 1, 1)
case("qlinearconv_bias_per_channel", "QLinearConv",
     [("x", x), ("xs", xs), ("xz", xz), ("w", w), ("ws", ws), ("wz", wz), ("ys", ys), ("zy", zy), ("B", bias)],
     [("y", requantize(acc, mult, zy, np.uint8))], 10)

# refused with exit 2: a float8 output (output_dtype 17), a per-axis scale of the wrong length,
# MatMulInteger of floats
x = f32(1.0, 2.0)
case("bad_quantizelinear_float8", "QuantizeLinear", [("x", x), ("s", f32(1.0))],
     [("y", np.zeros(2, np.uint8))], 21, output_dtype=17)
x = np.ones((2, 3), np.float32)
case("bad_quantizelinear_axis_length", "QuantizeLinear", [("x", x), ("s", f32(1.0, 2.0)), ("zp", np.zeros(2, np.uint8))],
     [("y", np.zeros((2, 3), np.uint8))], 13, axis=1)
case("bad_matmulinteger_float", "MatMulInteger", [("A", np.ones((2, 2), np.float32)), ("B", np.ones((2, 2), np.float32))],
     [("Y", np.zeros((2, 2), np.int32))], 10)

open(os.path.join(OUT, "list.txt"), "w").write("".join(n + "\n" for n in NAMES))
