#!/usr/bin/python3
"""The signal ops (signal.c): graphdiet run's time for one DFT or STFT against PyTorch's
(torch.fft.fft, torch.stft) on the same CPU, in the same run, at audio front-end sizes (16 kHz
speech: Whisper's 400-sample frames, hop 160, whose length takes Bluestein's algorithm; a 512
power of two). Usage: tests/bench/fft.py build/graphdiet [reps]. Prints a table: case,
graphdiet's seconds (its own report: nodes only), PyTorch's (the best of reps), ratio."""
import os, re, subprocess, sys, tempfile, time
import numpy as np, onnx, torch
from onnx import TensorProto, helper, numpy_helper

exe = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
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
