#!/usr/bin/python3
"""The model zoo's table: for each model, its parameters (PyTorch's) and nodes, the gradient error against
PyTorch's (max |diff| / max(max |ref|, 1e-2 x the largest gradient), per tensor, the worst),
onnxruntime's error against graphdiet on the same training graph (from test_zoo, which gives
onnxruntime graphdiet's dropout masks), `graphdiet train`'s time (median of 3), and the training
peak with --checkpoint none and memory (what `graphdiet run` measures; test_zoo asserts plan's
equals it).

    /usr/bin/python3 tests/bench/zoo_table.py [BUILD_DIR]    # after ctest has generated BUILD/zoo
"""
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
GD = os.path.join(BUILD, "graphdiet")
ZOO = os.path.join(BUILD, "zoo")
MODELS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "vit", "gpt",
          "seq2seq", "lstm", "gru", "unet_gn", "gpt_dynamic"]


def gd(*args):
    r = subprocess.run([GD, *args], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"graphdiet {' '.join(args)}: {r.stderr}")
    return r.stdout


def model_args(m, inputs):
    """-i NAME=FILE for PyTorch's inputs, --dim for a symbolic batch (bound from them)."""
    info = json.loads(gd("info", os.path.join(ZOO, m + ".onnx"), "--format", "json"))
    args, dims = [], {}
    for i in info["inputs"]:
        npy = os.path.join(ZOO, m, i["name"] + ".npy")
        if inputs:
            args += ["-i", f"{i['name']}={npy}"]
        for k, d in enumerate(i["shape"]):
            if isinstance(d, str) and d not in dims:
                dims[d] = np.load(npy).shape[k]
    for d, v in dims.items():
        args += ["--dim", f"{d}={v}"]
    return info, args


def grad_error_of(m, tmp):
    """train -> run of zoo model m against its references, by the zoo test's metric."""
    _, dims = model_args(m, False)
    _, ins = model_args(m, True)
    train = os.path.join(tmp, m + "_train.onnx")
    out = os.path.join(tmp, m + "_out")
    gd("train", os.path.join(ZOO, m + ".onnx"), "-o", train, *dims)
    gd("run", train, "-o", out, *ins)
    refs = glob.glob(os.path.join(ZOO, m, "*_grad.npy"))
    largest = max(np.abs(np.load(f)).max() for f in refs)
    return max(float(np.abs(np.load(f) - np.load(os.path.join(out, os.path.basename(f)))).max()
                     / max(np.abs(np.load(f)).max(), 1e-2 * largest)) for f in refs)


def main():
    ort = {}
    test = os.path.join(BUILD, "tests", "test_zoo")
    r = subprocess.run([test, "--filter", "zoo/onnxruntime*"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        hit = re.match(r"zoo (\S+) +onnxruntime: .* worst (\S+)", line)
        if hit:
            ort[hit.group(1)] = float(hit.group(2))
    print("| model | parameters | nodes | gradient error vs PyTorch | in float64 | onnxruntime vs graphdiet "
          "| train (s) | peak, none | peak, memory |")
    print("|---|---|---|---|---|---|---|---|---|")
    tmp = tempfile.mkdtemp()
    for m in MODELS:
        src = os.path.join(ZOO, m + ".onnx")
        info, dims = model_args(m, False)
        _, ins = model_args(m, True)
        train = os.path.join(tmp, m + "_train.onnx")
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            gd("train", src, "-o", train, *dims)
            times.append(time.perf_counter() - t0)
        out = os.path.join(tmp, m + "_out")
        none = json.loads(gd("run", train, "-o", out, "--format", "json", *ins))["peak_bytes"]
        mem_graph = os.path.join(tmp, m + "_mem.onnx")
        gd("train", src, "--checkpoint", "memory", "-o", mem_graph, *dims)
        mem = json.loads(gd("run", mem_graph, "--format", "json", *ins))["peak_bytes"]
        refs = glob.glob(os.path.join(ZOO, m, "*_grad.npy"))
        largest = max(np.abs(np.load(f)).max() for f in refs)
        worst = 0.0
        for f in refs:
            a, b = np.load(f), np.load(os.path.join(out, os.path.basename(f)))
            worst = max(worst, float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-2 * largest)))
        o = f"{ort[m]:.1e}" if m in ort else "n/a"
        f64 = grad_error_of(m + "_f64", tmp)
        print(f"| {m} | {sum(np.load(f).size for f in refs):,} | {info['nodes']:,} | {worst:.1e} | {f64:.1e} | {o} | "
              f"{statistics.median(times):.2f} | {none / 2**20:.2f} MiB | {mem / 2**20:.2f} MiB |")


if __name__ == "__main__":
    main()
