#!/usr/bin/python3
"""Writes testdata/ops_elem.h: forward-value cases of the elementwise ops (tests/ops/elem.c), each a
one-node YAML graph with its inputs' data and the output NumPy computes from the ONNX spec's
formulas (math.erf for Gelu), not from graphdiet. Run: /usr/bin/python3 testdata/ops_elem.py"""
import math, os
import numpy as np

cases = []


def lst(a):
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return ", ".join("1" if v else "0" for v in a.ravel())
    if a.dtype.kind in "iu":
        return ", ".join(str(int(v)) for v in a.ravel())
    out = []
    for v in a.ravel().astype(np.float64):
        out.append("NAN" if math.isnan(v) else ("INFINITY" if v > 0 else "-INFINITY") if math.isinf(v) else repr(float(v)))
    return ", ".join(out)


def ylist(a):  # YAML data: NaN and infinities spelled as YAML floats
    return lst(a).replace("-INFINITY", "-.inf").replace("NAN", ".nan").replace("INFINITY", ".inf")


def clist(a):  # the expected values in C: doubles, or integers (uint64 as their bits)
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return "NULL, (const int64_t[]){%s}" % ", ".join(
            "(int64_t)%du" % int(v) if int(v) > 2 ** 62 else "INT64_MIN" if int(v) == -2 ** 63 else "INT64_C(%d)" % int(v)
            for v in a.ravel())
    return "(const double[]){%s}, NULL" % lst(a)


NAMES = {np.float32: "float32", np.float64: "float64", np.int8: "int8", np.int16: "int16", np.int32: "int32",
         np.int64: "int64", np.uint8: "uint8", np.uint16: "uint16", np.uint32: "uint32", np.uint64: "uint64",
         np.bool_: "bool"}


def dname(a):
    return NAMES[np.asarray(a).dtype.type]


def case(name, op, ins, y, attrs="", opset=20):
    params = "".join("  - {name: %s, dtype: %s, shape: [%s], data: [%s]}\\n" %
                     (k, dname(v), ", ".join(map(str, np.shape(v))), ylist(v)) for k, v in ins)
    node = "  - {op: %s, inputs: [%s], outputs: [y]%s}\\n" % (op, ", ".join(k for k, _ in ins),
                                                           ", attrs: {%s}" % attrs if attrs else "")
    y = np.asarray(y)
    cases.append('\t{"%s", %d, "%s", "%s", "%s", %d, {%s}, %s},' %
                 (name, opset, params, node.replace('"', '\\"'), dname(y), y.ndim, ", ".join(map(str, y.shape)) or "0",
                  clist(y)))


f32, f64 = np.float32, np.float64
x = np.array([-2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7], f64)
u = np.array([-0.9, -0.5, 0.0, 0.3, 0.99], f64)
with np.errstate(all="ignore"):
    for op, fn, v in [("Sin", np.sin, x), ("Cos", np.cos, x), ("Tan", np.tan, x), ("Asin", np.arcsin, u),
                      ("Acos", np.arccos, u), ("Atan", np.arctan, x), ("Sinh", np.sinh, x), ("Cosh", np.cosh, x),
                      ("Asinh", np.arcsinh, x), ("Acosh", np.arccosh, np.array([1.0, 1.5, 3.0, 10.0, 0.5], f64)),
                      ("Atanh", np.arctanh, u), ("Reciprocal", np.reciprocal, np.array([-4.0, 0.5, 3.0, 0.0], f64)),
                      ("Ceil", np.ceil, x), ("Floor", np.floor, x), ("Sign", np.sign, np.array([-3.0, -0.0, 0.0, 2.0, np.nan], f64))]:
        case(op, op, [("a", v)], fn(v))
    xf = x.astype(f32)
    case("Sin float32", "Sin", [("a", xf)], np.sin(xf))
    case("Sign int32", "Sign", [("a", np.array([-7, 0, 5], np.int32))], np.array([-1, 0, 1], np.int32))

# Mod: fmod 0 takes the divisor's sign (np.mod), fmod 1 the dividend's (np.fmod)
ai = np.array([-7, -7, 7, 7, 5, -4], np.int64)
bi = np.array([3, -3, 3, -3, 5, 3], np.int64)
case("Mod int64 fmod 0", "Mod", [("a", ai), ("b", bi)], np.mod(ai, bi))
case("Mod int32 fmod 1", "Mod", [("a", ai.astype(np.int32)), ("b", bi.astype(np.int32))],
     np.fmod(ai, bi).astype(np.int32), "fmod: 1")
af = np.array([[-4.3, 7.2], [5.0, -0.5]], f64)
bf = np.array([2.1, -3.4], f64)
case("Mod float64 fmod 1, broadcast", "Mod", [("a", af), ("b", bf)], np.fmod(af, bf), "fmod: 1")
case("Mod uint8", "Mod", [("a", np.array([250, 7], np.uint8)), ("b", np.array([7, 250], np.uint8))],
     np.array([250 % 7, 7], np.uint8))

# Max Min Mean: variadic, broadcasting; NaN wins
p = np.array([[1.0, -2.0, 3.0], [0.5, np.nan, -1.0]], f32)
q = np.array([0.0, 1.0, 2.0], f32)
r = np.array([[-1.0], [4.0]], f32)
case("Max of three float32, broadcast, NaN", "Max", [("a", p), ("b", q), ("c", r)], np.maximum(np.maximum(p, q), r))
case("Min of three float32, broadcast, NaN", "Min", [("a", p), ("b", q), ("c", r)], np.minimum(np.minimum(p, q), r))
case("Max of one", "Max", [("a", q)], q)
case("Mean of three", "Mean", [("a", p.astype(f64)), ("b", q.astype(f64)), ("c", r.astype(f64))],
     (p.astype(f64) + q + r) / 3)
mi = np.array([-5, 9, 2], np.int32)
ni = np.array([[3], [-8]], np.int32)
case("Max int32", "Max", [("a", mi), ("b", ni)], np.maximum(mi, ni))
big = np.array([2 ** 63 + 2048, 5], np.uint64)
small = np.array([7, 6], np.uint64)
case("Max uint64 past 2^63", "Max", [("a", big), ("b", small)], np.maximum(big, small))
case("Min uint64 past 2^63", "Min", [("a", big), ("b", small)], np.minimum(big, small))

# comparisons and logic
g1 = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], f32)
g2 = np.array([2.0, 2.0, 2.0], f32)
case("GreaterOrEqual float32, broadcast", "GreaterOrEqual", [("a", g1), ("b", g2)], g1 >= g2)
case("LessOrEqual float32, broadcast", "LessOrEqual", [("a", g1), ("b", g2)], g1 <= g2)
i1 = np.array([-3, 0, 4], np.int64)
i2 = np.array([0, 0, 0], np.int64)
case("GreaterOrEqual int64", "GreaterOrEqual", [("a", i1), ("b", i2)], i1 >= i2)
case("LessOrEqual int32", "LessOrEqual", [("a", i1.astype(np.int32)), ("b", i2.astype(np.int32))], i1 <= i2)
b1 = np.array([[True, False], [True, True]])
b2 = np.array([True, False])
case("And bool, broadcast", "And", [("a", b1), ("b", b2)], b1 & b2)
case("Or bool, broadcast", "Or", [("a", b1), ("b", b2)], b1 | b2)
case("Xor bool, broadcast", "Xor", [("a", b1), ("b", b2)], b1 ^ b2)
s8 = np.array([200, 3, 1, 255], np.uint8)
k8 = np.array([1, 2, 7, 0], np.uint8)
case("BitShift uint8 LEFT wraps", "BitShift", [("a", s8), ("b", k8)], np.left_shift(s8, k8), 'direction: "LEFT"')
s32 = np.array([4000000000, 17, 1], np.uint32)
k32 = np.array([3, 1, 0], np.uint32)
case("BitShift uint32 RIGHT", "BitShift", [("a", s32), ("b", k32)], np.right_shift(s32, k32), 'direction: "RIGHT"')
inf = np.array([-np.inf, np.inf, np.nan, 1.0, -2.0], f64)
case("IsInf", "IsInf", [("a", inf)], np.isinf(inf))
case("IsInf positive only", "IsInf", [("a", inf)], np.isposinf(inf), "detect_negative: 0")
case("IsInf negative only", "IsInf", [("a", inf)], np.isneginf(inf), "detect_positive: 0")

# activations
sx = np.array([-2.0, -0.6, -0.2, 0.0, 0.3, 0.8, 1.5], f64)
case("Softsign", "Softsign", [("a", sx)], sx / (1 + np.abs(sx)))
case("Shrink default (hard, 0.5)", "Shrink", [("a", sx)], np.where(np.abs(sx) > 0.5, sx, 0))
case("Shrink soft", "Shrink", [("a", sx)], np.where(sx < -0.4, sx + 0.4, np.where(sx > 0.4, sx - 0.4, 0)),
     "lambd: 0.4, bias: 0.4")
case("ThresholdedRelu default", "ThresholdedRelu", [("a", sx)], np.where(sx > 1.0, sx, 0))
case("ThresholdedRelu alpha 0.25", "ThresholdedRelu", [("a", sx)], np.where(sx > 0.25, sx, 0), "alpha: 0.25")
case("Mish", "Mish", [("a", sx)], sx * np.tanh(np.log1p(np.exp(sx))))
erf = np.vectorize(math.erf)
case("Gelu", "Gelu", [("a", sx)], 0.5 * sx * (1 + erf(sx / math.sqrt(2))))
case("Gelu tanh", "Gelu", [("a", sx)],
     0.5 * sx * (1 + np.tanh(math.sqrt(2 / math.pi) * (sx + 0.044715 * sx ** 3))), 'approximate: "tanh"')

# Clip: opset 6's attributes, integers
cx = np.array([-3.0, -0.5, 0.2, 0.7, 4.0], f32)
case("Clip-6 min and max attributes", "Clip", [("a", cx)], np.clip(cx, -1.0, 0.5), "min: -1.0, max: 0.5")
case("Clip-6 max attribute only", "Clip", [("a", cx)], np.minimum(cx, 0.5), "max: 0.5")
c8 = np.array([-128, -5, 0, 5, 127], np.int8)
case("Clip int8, min only", "Clip", [("a", c8), ("lo", np.array(-6, np.int8))], np.maximum(c8, -6))
c64 = np.array([-(2 ** 60) - 1, 3, 2 ** 60 + 1], np.int64)
case("Clip int64 exactly", "Clip", [("a", c64), ("lo", np.array(-(2 ** 60), np.int64)), ("hi", np.array(2 ** 60, np.int64))],
     np.clip(c64, -(2 ** 60), 2 ** 60))

# PRelu: opset 6's 1-D slope is per channel (axis 1); from opset 7 it broadcasts as NumPy
px = np.array([[[-1.0, 2.0], [-3.0, 4.0], [-5.0, -6.0]]], f64)
ps = np.array([0.1, 0.2, 0.3], f64)
case("PRelu-6 per-channel slope", "PRelu", [("a", px), ("s", ps)], np.where(px > 0, px, px * ps[:, None]), opset=6)
ps2 = np.array([0.1, 0.2], f64)
case("PRelu-7 slope broadcast over the last axis", "PRelu", [("a", px), ("s", ps2)], np.where(px > 0, px, px * ps2), opset=7)

# CastLike; Pow's mixed types (the output has the base's type)
case("CastLike float64 to float32", "CastLike", [("a", sx), ("b", np.array([0.0], f32))], sx.astype(f32))
case("CastLike float32 to int32 truncates", "CastLike", [("a", cx), ("b", np.array([0], np.int32))], cx.astype(np.int32))
pb = np.array([1, 2, 3], np.int32)
pe = np.array([4.0, 0.5, 2.5], f32)
case("Pow int32 base, float32 exponent", "Pow", [("a", pb), ("b", pe)], np.power(pb.astype(f64), pe).astype(np.int32))
case("Pow float32 base, int64 exponent", "Pow", [("a", pe), ("b", np.array([2, -1, 3], np.int64))],
     np.power(pe, np.array([2.0, -1.0, 3.0], f32)))
case("Pow int64 by squaring", "Pow", [("a", np.array([3, -2, 7], np.int64)), ("b", np.array([13, 5, 0], np.int64))],
     np.array([3 ** 13, -32, 1], np.int64))

# #50 ub: what C leaves undefined, defined. A float cast to an integer truncates and saturates, NaN
# to 0 (src/exec/exec.h's rule, CUDA's and ARM's: NumPy on x86 gives INT_MIN instead, so the expected
# values are computed here with Python's integers); integers cast to narrower ones wrap, as NumPy's.
# Integer Div truncates, and INT_MIN / -1 wraps to INT_MIN (NumPy's); INT_MIN % -1 is 0.
def saturated(v, dt):
    info = np.iinfo(dt)
    return 0 if math.isnan(v) else info.max if v >= info.max else info.min if v <= info.min else math.trunc(v)


wild = np.array([3e38, np.nan, np.inf, -np.inf, -3e38, 2.7, -2.7, 300.0, -1.0, 70000.0, 5e9, 2e19], f32)
for dt in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
    case("Cast float32 to %s saturates" % dname(np.zeros(1, dt)), "Cast", [("a", wild)],
         np.array([saturated(float(v), dt) for v in wild], dt), "to: %d" % {
             np.int8: 3, np.uint8: 2, np.int16: 5, np.uint16: 4, np.int32: 6, np.uint32: 12, np.int64: 7, np.uint64: 13}[dt])
case("Cast float64 to int32 saturates", "Cast", [("a", wild.astype(f64))],
     np.array([saturated(float(v), np.int32) for v in wild.astype(f64)], np.int32), "to: 6")
narrow = np.array([2 ** 40 + 5, -1, 300, -(2 ** 63), 2 ** 63 - 1], np.int64)
case("Cast int64 to int32 wraps", "Cast", [("a", narrow)], narrow.astype(np.int32), "to: 6")
case("Cast int64 to uint8 wraps", "Cast", [("a", narrow)], narrow.astype(np.uint8), "to: 2")


def trunc_div(a, b, dt):  # C's truncating division in Python's integers, wrapped to dt's width
    bits = np.iinfo(dt).bits
    q = [(abs(int(p)) // abs(int(r))) * (1 if (p < 0) == (r < 0) else -1) for p, r in zip(a, b)]
    return np.array([(v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1) for v in q], dt)


for dt in (np.int32, np.int64):
    lo = np.iinfo(dt).min
    da = np.array([lo, lo, 7, -7, lo + 1], dt)
    db = np.array([-1, 1, -1, 2, -1], dt)
    case("Div %s INT_MIN by -1 wraps" % dname(da), "Div", [("a", da), ("b", db)], trunc_div(da, db, dt))
    case("Mod %s INT_MIN by -1" % dname(da), "Mod", [("a", da), ("b", db)], np.array([0, 0, 0, 1, 0], dt))
    case("Mod %s fmod 1 INT_MIN by -1" % dname(da), "Mod", [("a", da), ("b", db)], np.array([0, 0, 0, -1, 0], dt),
         "fmod: 1")

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "ops_elem.h"), "w") as f:
    f.write("/* ops_elem.h - generated by testdata/ops_elem.py: do not edit. */\n")
    f.write("static const struct elem_case elem_cases[] = {\n%s\n};\n" % "\n".join(cases))
