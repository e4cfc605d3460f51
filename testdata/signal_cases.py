"""signal_cases.py - cases for the signal-processing ops (tests/ops/signal.c), with expected values
computed by NumPy apart from graphdiet: numpy.fft for DFT and STFT, the spec's window formulas
evaluated by NumPy, and MelWeightMatrix by the spec's (ONNX reference implementation's) steps.

    python3 testdata/signal_cases.py OUT_DIR

writes OUT_DIR/<case>/model.onnx and OUT_DIR/<case>/test_data_set_0/{input_K,output_0}.pb (the
layout of ONNX's backend tests, read by `graphdiet verify --against`), and OUT_DIR/list.txt with one
line per case: `<case> <exit status graphdiet must give>`. Cases that must exit 2 (bad input) carry
a placeholder output."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
RNG = np.random.default_rng(47)
cases = []


def case(name, op, inputs, want, attrs=None, status=0, opset=17):
    """inputs: (name, array or None for an omitted optional input, graph input (1) or initializer (0))"""
    d = os.path.join(OUT, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    gin, inits, names, k = [], [], [], 0
    for iname, arr, is_input in inputs:
        if arr is None:
            names.append("")
            continue
        names.append(iname)
        if is_input:
            gin.append(helper.make_tensor_value_info(iname, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[arr.dtype], arr.shape))
            t = numpy_helper.from_array(arr, iname)
            open(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), "wb").write(t.SerializeToString())
            k += 1
        else:
            inits.append(numpy_helper.from_array(arr, iname))
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    y = helper.make_tensor_value_info("y", onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[want.dtype], None)
    g = helper.make_graph([node], name, gin, [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, os.path.join(d, "model.onnx"))
    t = numpy_helper.from_array(want, "y")
    open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb").write(t.SerializeToString())
    cases.append("%s %d" % (name, status))


def cplx(y, axis):
    """complex y -> real (..., 2), the complex axis last"""
    return np.stack((y.real, y.imag), axis=-1)


# DFT: every kind of line length (powers of two: radix-2; prime factors up to 64: mixed radix, a
# prime the direct sum; a larger prime factor, 97 = 97, 134 = 2 67, 1031 = 1031: Bluestein),
# forward and inverse, real and complex input, dft_length padding and truncating, onesided, and the
# axis attribute (opset 17) or input (opset 20).
for n in (1, 2, 5, 8, 12, 64, 65, 97, 100, 134, 256, 400, 1000, 1031):
    x = RNG.standard_normal((3, n))
    case("dft_real_%d" % n, "DFT", [("x", x[..., None], 1)], cplx(np.fft.fft(x, axis=1), 1), {"axis": 1})
    z = RNG.standard_normal((2, n)) + 1j * RNG.standard_normal((2, n))
    case("dft_complex_%d" % n, "DFT", [("x", cplx(z, 1), 1)], cplx(np.fft.fft(z, axis=1), 1), {"axis": 1})
    case("dft_inverse_%d" % n, "DFT", [("x", cplx(z, 1), 1)], cplx(np.fft.ifft(z, axis=1), 1),
         {"axis": 1, "inverse": 1})
for n, L in ((10, 16), (10, 7), (100, 130), (9, 4)):
    x = RNG.standard_normal((2, n))
    L64 = np.array(L, np.int64)
    case("dft_length_%d_to_%d" % (n, L), "DFT", [("x", x[..., None], 1), ("L", L64, 0)],
         cplx(np.fft.fft(x, n=L, axis=1), 1), {"axis": 1})
    case("dft_onesided_%d_to_%d" % (n, L), "DFT", [("x", x[..., None], 1), ("L", L64, 0)],
         cplx(np.fft.rfft(x, n=L, axis=1), 1), {"axis": 1, "onesided": 1})
x = RNG.standard_normal((2, 6, 5, 3))
case("dft_axis_2_of_4", "DFT", [("x", x[..., None], 1)], cplx(np.fft.fft(x, axis=2), 2), {"axis": 2})
case("dft_axis_minus_3", "DFT", [("x", x[..., None], 1)], cplx(np.fft.fft(x, axis=2), 2), {"axis": -3})
case("dft_opset20_axis_input", "DFT", [("x", x[..., None], 1), ("L", None, 0), ("ax", np.array(1, np.int64), 0)],
     cplx(np.fft.fft(x, axis=1), 1), {}, opset=20)
case("dft_opset20_default_axis", "DFT", [("x", x[..., None], 1)], cplx(np.fft.fft(x, axis=3), 3), {}, opset=20)
case("dft_float32", "DFT", [("x", x[..., None].astype(np.float32), 1)],
     cplx(np.fft.fft(x.astype(np.float32).astype(np.float64), axis=1), 1).astype(np.float32), {"axis": 1})

# STFT: frames of a real and a complex signal, with a window or a frame_length, onesided or not.
sig = RNG.standard_normal((2, 100))
win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(20) / 20)


def frames(s, n, step, w):
    f = np.stack([s[:, i * step:i * step + n] for i in range((s.shape[1] - n) // step + 1)], axis=1)
    return f * (w if w is not None else 1)


step = np.array(7, np.int64)
case("stft_window_onesided", "STFT", [("s", sig[..., None], 1), ("step", step, 0), ("w", win, 0)],
     cplx(np.fft.rfft(frames(sig, 20, 7, win), axis=2), 2))
case("stft_length_full", "STFT",
     [("s", sig[..., None], 1), ("step", step, 0), ("w", None, 0), ("n", np.array(13, np.int64), 0)],
     cplx(np.fft.fft(frames(sig, 13, 7, None), axis=2), 2), {"onesided": 0})
zs = sig + 1j * RNG.standard_normal((2, 100))
case("stft_complex_window", "STFT", [("s", cplx(zs, 1), 1), ("step", step, 0), ("w", win, 0)],
     cplx(np.fft.fft(frames(zs, 20, 7, win), axis=2), 2), {"onesided": 0})
case("stft_rank2_real", "STFT", [("s", sig, 1), ("step", np.array(25, np.int64), 0), ("w", win, 0)],
     cplx(np.fft.rfft(frames(sig, 20, 25, win), axis=2), 2))

# The windows by the spec's formulas, periodic and symmetric, float32 and float64.
for op, a in (("HannWindow", (0.5, 0.5, 0)), ("HammingWindow", (25 / 46, 21 / 46, 0)),
              ("BlackmanWindow", (0.42, 0.5, 0.08))):
    for size in (1, 10, 33):
        for periodic in (1, 0):
            N = size if periodic else size - 1
            i = np.arange(size)
            w = a[0] - a[1] * np.cos(2 * np.pi * i / N) + a[2] * np.cos(4 * np.pi * i / N) if N else np.ones(1)
            for dt, np_dt in ((TensorProto.FLOAT, np.float32), (TensorProto.DOUBLE, np.float64)):
                case("%s_%d_%s_%s" % (op.lower(), size, "periodic" if periodic else "symmetric", np_dt.__name__), op,
                     [("size", np.array(size, np.int64), 1)], w.astype(np_dt),
                     {"periodic": periodic, "output_datatype": dt})


def mel(num, L, rate, lo, hi):
    """MelWeightMatrix as the spec states it"""
    fb = np.arange(0, num + 2)
    mlo, mhi = 2595 * np.log10(1 + lo / 700), 2595 * np.log10(1 + hi / 700)
    fb = 700 * (np.power(10, (fb * ((mhi - mlo) / fb.shape[0]) + mlo) / 2595) - 1)
    fb = (((L + 1) * fb) // rate).astype(int)
    out = np.zeros((L // 2 + 1, num))
    for i in range(num):
        lo_, c, hi_ = fb[i], fb[i + 1], fb[i + 2]
        if c == lo_:
            out[c, i] = 1
        else:
            for j in range(lo_, c + 1):
                out[j, i] = (j - lo_) / (c - lo_)
        for j in range(c, hi_):
            out[j, i] = (hi_ - j) / (hi_ - c)
    return out


for num, L, rate, lo, hi in ((10, 512, 16000, 20.0, 8000.0), (40, 400, 16000, 0.0, 8000.0), (4, 64, 8000, 300.0, 3400.0)):
    case("mel_%d_%d" % (num, L), "MelWeightMatrix",
         [("num", np.array(num, np.int64), 1), ("L", np.array(L, np.int64), 1), ("rate", np.array(rate, np.int64), 1),
          ("lo", np.array(lo, np.float32), 1), ("hi", np.array(hi, np.float32), 1)],
         mel(num, L, rate, lo, hi).astype(np.float64), {"output_datatype": TensorProto.DOUBLE})

# Bad input: a clear error and exit 2.
z1 = np.zeros((2, 8, 3))
case("bad_dft_last_axis_3", "DFT", [("x", z1, 1)], np.zeros(1), {"axis": 1}, status=2)
case("bad_dft_axis_is_complex_axis", "DFT", [("x", np.zeros((2, 8, 1)), 1)], np.zeros(1), {"axis": 2}, status=2)
case("bad_dft_length_zero", "DFT", [("x", np.zeros((2, 8, 1)), 1), ("L", np.array(0, np.int64), 0)], np.zeros(1),
     {"axis": 1}, status=2)
case("bad_stft_no_length", "STFT", [("s", np.zeros((1, 16, 1)), 1), ("step", np.array(4, np.int64), 0)], np.zeros(1),
     status=2)
case("bad_stft_frame_longer_than_signal", "STFT",
     [("s", np.zeros((1, 16, 1)), 1), ("step", np.array(4, np.int64), 0), ("w", np.ones(32), 0)], np.zeros(1), status=2)
case("bad_stft_length_differs_from_window", "STFT",
     [("s", np.zeros((1, 16, 1)), 1), ("step", np.array(4, np.int64), 0), ("w", np.ones(8), 0),
      ("n", np.array(6, np.int64), 0)], np.zeros(1), status=2)
case("bad_window_negative_size", "HannWindow", [("size", np.array(-3, np.int64), 1)], np.zeros(1, np.float32),
     status=2)
case("bad_mel_upper_edge_past_nyquist", "MelWeightMatrix",
     [("num", np.array(8, np.int64), 1), ("L", np.array(16, np.int64), 1), ("rate", np.array(8000, np.int64), 1),
      ("lo", np.array(0, np.float32), 1), ("hi", np.array(16000, np.float32), 1)], np.zeros(1, np.float32), status=2)

open(os.path.join(OUT, "list.txt"), "w").write("".join(c + "\n" for c in cases))
