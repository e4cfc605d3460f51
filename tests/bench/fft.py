#!/usr/bin/python3
"""The signal ops (signal.c): graphdiet run's time for one DFT or STFT against PyTorch's
(torch.fft.fft, torch.stft) on the same CPU, in the same run, at audio front-end sizes (16 kHz
speech: Whisper's 400-sample frames, hop 160, whose length takes Bluestein's algorithm; a 512
power of two). Usage: tests/bench/fft.py build/graphdiet [reps]. Prints a table: case,
graphdiet's seconds (its own report: nodes only), PyTorch's (the best of reps), ratio.

tests/bench/fft.py --accuracy GRAPHDIET... : each graphdiet's DFT error against a naive DFT in long
double (twiddle exponents reduced mod n as integers), for real and complex lines of float32 and
float64 at lengths 512, 400, 1000, powers of two and primes: the largest |error| of any bin,
relative to its line's L2 norm, over 8 lines of uniform [-1, 1) values (the float32 input rounded
first, so that both see the same line). One column per graphdiet."""
import os, re, subprocess, sys, tempfile, time
import numpy as np, onnx, torch
from onnx import TensorProto, helper, numpy_helper

accuracy = sys.argv[1] == "--accuracy"
exe = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 and not accuracy else 5
torch.set_num_threads(os.cpu_count())
rng = np.random.default_rng(0)


def model(path, op, inits, attrs, shape):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    names = ["x"] + [n for n, _ in inits]
    node = helper.make_node(op, names, ["y"], **attrs)
    g = helper.make_graph([node], op, [x], [y], initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def stft_case(batch, secs, n, hop):
    sig = rng.standard_normal((batch, 16000 * secs)).astype(np.float32)
    win = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32)
    inits = [("step", np.array(hop, np.int64)), ("w", win)]
    tw = torch.from_numpy(win)
    ts = torch.from_numpy(sig)
    return (f"STFT b{batch} {secs}s n{n} hop{hop}", "STFT", inits, {}, sig[..., None],
            lambda: torch.stft(ts, n, hop, window=tw, center=False, onesided=True, return_complex=True))


def dft_case(batch, n):
    sig = rng.standard_normal((batch, n)).astype(np.float32)
    ts = torch.from_numpy(sig)
    return (f"DFT b{batch} n{n}", "DFT", [], {"axis": 1}, sig[..., None], lambda: torch.fft.fft(ts, dim=1))


def naive(x):
    """x (lines, n) complex as (re, im) long double arrays -> the DFT's (re, im), long double"""
    xr, xi = x
    n = xr.shape[1]
    a = 2 * np.arccos(np.longdouble(-1)) * np.arange(n, dtype=np.longdouble) / n  # np.pi is a double
    c, s = np.cos(a), -np.sin(a)
    yr, yi = np.zeros_like(xr), np.zeros_like(xr)
    t = np.arange(n)
    for k0 in range(0, n, 128):
        e = (np.arange(k0, min(n, k0 + 128))[:, None] * t[None, :]) % n
        cr, ci = c[e], s[e]
        yr[:, k0:k0 + 128] = xr @ cr.T - xi @ ci.T
        yi[:, k0:k0 + 128] = xr @ ci.T + xi @ cr.T
    return yr, yi


def accuracy_table(exes):
    sizes = [512, 400, 1000, 8, 64, 256, 2048, 4096, 7, 61, 67, 509, 1009]
    print(f"{'n':>6} {'dtype':8} {'line':8} " + " ".join(f"{e[-12:]:>12}" for e in exes))
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for dt, npdt, tp in (("float32", np.float32, TensorProto.FLOAT), ("float64", np.float64, TensorProto.DOUBLE)):
                for c in (1, 2):
                    x = rng.uniform(-1, 1, (8, n, c)).astype(npdt)
                    xl = x.astype(np.longdouble)
                    ref = naive((xl[..., 0], xl[..., 1] if c == 2 else np.zeros_like(xl[..., 0])))
                    norm = np.sqrt((xl.astype(np.longdouble) ** 2).sum(axis=(1, 2)))
                    xv = helper.make_tensor_value_info("x", tp, list(x.shape))
                    yv = helper.make_tensor_value_info("y", tp, None)
                    node = helper.make_node("DFT", ["x"], ["y"], axis=1)
                    g = helper.make_graph([node], "dft", [xv], [yv])
                    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{tmp}/m.onnx")
                    np.save(f"{tmp}/x.npy", x)
                    errs = []
                    for e in exes:
                        subprocess.run([e, "run", f"{tmp}/m.onnx", "-i", f"x={tmp}/x.npy", "-o", tmp], capture_output=True,
                                       check=True)
                        y = np.load(f"{tmp}/y.npy").astype(np.longdouble)
                        err = np.maximum(abs(y[..., 0] - ref[0]), abs(y[..., 1] - ref[1])).max(axis=1) / norm
                        errs.append(float(err.max()))
                    print(f"{n:6} {dt:8} {'real' if c == 1 else 'complex':8} " + " ".join(f"{v:12.3e}" for v in errs),
                          flush=True)


if accuracy:
    accuracy_table(sys.argv[2:])
    sys.exit(0)

cases = [stft_case(8, 10, 400, 160), stft_case(8, 10, 512, 160), dft_case(8, 16000), dft_case(8, 16384),
         dft_case(512, 60)]
print(f"{'case':32} {'graphdiet s':>12} {'torch s':>10} {'ratio':>7}")
with tempfile.TemporaryDirectory() as tmp:
    for name, op, inits, attrs, x, peer in cases:
        path = f"{tmp}/m.onnx"
        model(path, op, inits, attrs, list(x.shape))
        np.save(f"{tmp}/x.npy", x)
        ours = []
        for _ in range(reps):
            r = subprocess.run([exe, "run", path, "-i", f"x={tmp}/x.npy"], capture_output=True, text=True, check=True)
            ours.append(float(re.search(r"; ([0-9.e+-]+) s;", r.stdout + r.stderr).group(1)))
        peer()
        a, b = min(ours), min(timed(peer) for _ in range(reps))
        print(f"{name:32} {a:12.4f} {b:10.4f} {a / b:7.2f}")
