#!/usr/bin/env python3
"""roof_peers.py - the roofline rows that sit under 25% of their roof, against PyTorch's CPU kernel
for the same op, shape and input distribution, timed in one interleaved run at one thread.

bench_roofline says how far a kernel is from its roof; this says where that leaves it against the
framework people train with. Each round runs `bench_roofline --filter F --format tsv` for every
filter below, then PyTorch's version of each row (best of --repeat calls), so that both see the same
moments of a shared machine. The table gives the median over rounds of each side's best.

    /usr/bin/python3 tests/bench/roof_peers.py build [--rounds 3] [--repeat 7] [--only Pow,Gelu]

The rows are the forward rows bench_roofline has flagged under 25% on Zen 4 at some time (#52),
with the inputs bench_roofline.c draws (PF: normal; PU: uniform in [0.5, 2]; the inverse
trigonometric functions: uniform in (-0.999, 0.999)); Resize is bilinear at half-pixel centres,
PyTorch's align_corners=False. DietAdam has no PyTorch op (its row is
timed, its peer column empty).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def inputs():
    g = torch.Generator().manual_seed(1)
    big = (4096, 4096)
    d = {
        "x": torch.randn(big, generator=g),
        "pos": torch.rand(big, generator=g) * 1.5 + 0.5,
        "unit": torch.rand(big, generator=g) * 1.998 - 0.999,
        "img48": torch.randn((8, 64, 48, 48), generator=g),
        "img24": torch.randn((8, 64, 24, 24), generator=g),
        "grid": torch.randn((8, 24, 24, 2), generator=g),
        "logits": torch.randn((1024, 2000), generator=g),
        "labels": torch.randint(0, 2000, (1024,), generator=g),
        "col": torch.randint(0, 2000, (1024, 1), generator=g),
        "sig": torch.randn((64, 512), generator=g),
        "audio": torch.randn((8, 16000), generator=g),
        "mat4": torch.randn((65536, 4, 4), generator=g),
    }
    return d


# (op, shape as bench_roofline prints it) -> (its --filter, PyTorch's call on the inputs)
def peers(t):
    un = lambda f, k="x": (lambda: f(t[k]))  # noqa: E731
    return {
        ("Sin", "16M"): ("Sin", un(torch.sin)),
        ("Cos", "16M"): ("Cos", un(torch.cos)),
        ("Tan", "16M"): ("Tan", un(torch.tan)),
        ("Sinh", "16M"): ("Sin", un(torch.sinh)),
        ("Cosh", "16M"): ("Cos", un(torch.cosh)),
        ("Atan", "16M"): ("Atan", un(torch.atan)),
        ("Asinh", "16M"): ("Asin", un(torch.asinh)),
        ("Acosh", "16M"): ("Acos", un(torch.acosh, "pos")),
        ("Asin", "16M in (-1, 1)"): ("Asin", un(torch.asin, "unit")),
        ("Acos", "16M in (-1, 1)"): ("Acos", un(torch.acos, "unit")),
        ("Atanh", "16M in (-1, 1)"): ("Atan", un(torch.atanh, "unit")),
        ("Pow", "16M, 16M"): ("Pow", lambda: torch.pow(t["x"], t["pos"])),
        ("Gelu", "16M"): ("Gelu", lambda: F.gelu(t["x"])),
        ("Gelu", "16M tanh"): ("Gelu", lambda: F.gelu(t["x"], approximate="tanh")),
        ("LRN", "8x64x48x48 size 5"): ("LRN", lambda: F.local_response_norm(t["img48"], 5)),
        ("ReduceLogSumExp", "4096x4096 axis -1"): ("ReduceLogSumExp", lambda: torch.logsumexp(t["x"], -1)),
        ("DFT", "64 x 512 real, onesided"): ("DFT", lambda: torch.fft.rfft(t["sig"], dim=-1)),
        ("STFT", "8 x 16000, frame 400 step 160"): (
            "STFT", lambda: torch.stft(t["audio"], 400, 160, 400, center=False, onesided=True, return_complex=True)),
        ("GridSample", "8x64x24x24, grid 8x24x24"): (
            "GridSample", lambda: F.grid_sample(t["img24"], t["grid"], align_corners=False)),
        ("MaxPool", "8x64x48x48 3x3 /2"): ("MaxPool", lambda: F.max_pool2d(t["img48"], 3, 2, 1)),
        ("SoftmaxCrossEntropyLoss", "1024x2000, 1024 labels"): (
            "SoftmaxCrossEntropyLoss", lambda: F.cross_entropy(t["logits"], t["labels"])),
        ("NegativeLogLikelihoodLoss", "1024x2000, 1024 labels"): (
            "NegativeLogLikelihoodLoss", lambda: F.nll_loss(t["logits"], t["labels"])),
        ("GatherElements", "1024x2000 axis 1, 1024x1"): (
            "GatherElements", lambda: torch.gather(t["logits"], 1, t["col"])),
        ("HannWindow", "400"): ("HannWindow", lambda: torch.hann_window(400, periodic=True)),
        ("HammingWindow", "400"): ("HammingWindow", lambda: torch.hamming_window(400, periodic=True)),
        ("BlackmanWindow", "400"): ("BlackmanWindow", lambda: torch.blackman_window(400, periodic=True)),
        ("Resize", "8x64x24x24 bilinear x2"): (
            "Resize", lambda: F.interpolate(t["img24"], scale_factor=2, mode="bilinear", align_corners=False)),
        ("Det", "65536 x 4x4"): ("Det", lambda: torch.linalg.det(t["mat4"])),
        ("DietAdam", "16M int16 params, factored"): ("DietAdam", None),
    }


def bench_rows(exe, flt, repeat):
    """bench_roofline's forward rows for one filter: {(op, shape): (best seconds, fraction)}"""
    out = subprocess.run([exe, "--threads", "1", "--filter", flt, "--repeat", str(repeat), "--format", "tsv"],
                         check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) >= 10 and f[1] == "fwd" and f[4] not in ("", "best_ms"):
            try:
                rows[(f[0], f[2])] = (float(f[4]) / 1e3, float(f[8]))
            except ValueError:
                pass
    return rows


def torch_best(fn, repeat):
    fn()  # warm-up: allocator, plans
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="the build directory (its tests/bench/bench_roofline)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", help="comma-separated ops")
    a = ap.parse_args()
    exe = os.path.join(a.build, "tests", "bench", "bench_roofline")
    if not os.access(exe, os.X_OK):
        sys.exit(f"roof_peers.py: {exe}: not built")
    torch.set_num_threads(1)
    t = inputs()
    table = peers(t)
    if a.only:
        keep = set(a.only.split(","))
        table = {k: v for k, v in table.items() if k[0] in keep}
    filters = sorted({flt for flt, _ in table.values()})
    ours = {k: [] for k in table}
    frac = {k: [] for k in table}
    theirs = {k: [] for k in table}
    for r in range(a.rounds):
        for flt in filters:
            rows = bench_rows(exe, flt, a.repeat)
            for k, (f2, fn) in table.items():
                if f2 != flt:
                    continue
                if k in rows:
                    ours[k].append(rows[k][0])
                    frac[k].append(rows[k][1])
                if fn:
                    theirs[k].append(torch_best(fn, a.repeat))
        print(f"roof_peers.py: round {r + 1} of {a.rounds} done", file=sys.stderr)
    print(f"{cpu_model()}; 1 thread; PyTorch {torch.__version__}; medians over {a.rounds} interleaved rounds "
          f"of each side's best of {a.repeat}\n")
    print("| op | shape | graphdiet ms | of roof | PyTorch ms | PyTorch of roof | graphdiet / PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for k in table:
        if not ours[k]:
            print(f"| {k[0]} | {k[1]} | not timed | | | | |")
            continue
        g, fr = statistics.median(ours[k]), statistics.median(frac[k])
        p = statistics.median(theirs[k]) if theirs[k] else None
        pc = f"{p * 1e3:.3f}" if p else "no such op"
        pf = f"{100 * g * fr / p:.0f}%" if p else ""  # the same roof time, g fr
        ratio = f"{g / p:.2f}" if p else ""
        print(f"| {k[0]} | {k[1]} | {g * 1e3:.3f} | {100 * fr:.0f}% | {pc} | {pf} | {ratio} |")


if __name__ == "__main__":
    main()
