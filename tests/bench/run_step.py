#!/usr/bin/python3
"""Training-step and forward benchmark: graphdiet's executor against PyTorch CPU and onnxruntime.

    /usr/bin/python3 tests/bench/run_step.py [BUILD_DIR] [--testdata]

--testdata times the testdata models at their own sizes (the inputs gen_models.py saved); by
default the same classes run at sizes where compute, not per-op overhead, decides.

Each model is a testdata class at a size where compute matters, exported as testdata is (opset 17,
training mode). In one run, with one thread everywhere (torch.set_num_threads(1),
OPENBLAS_NUM_THREADS=1, onnxruntime intra-op threads 1), it times:
  - a training step (forward + backward): PyTorch's loss.backward() against graphdiet running the
    training graph `graphdiet train` builds;
  - the forward pass: onnxruntime (default graph optimisations) against graphdiet.
Best of N runs after a warm-up. Prints a Markdown table with the ratios (graphdiet / peer).
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testdata"))
import gen_models as gm  # noqa: E402

REPEAT = 10


def configs():
    g = torch.Generator().manual_seed(0)
    yield "mlp", gm.MLP(), (torch.randn(256, 20, generator=g), torch.randint(0, 10, (256,), generator=g))
    yield "tanh_chain (w256)", gm.TanhChain(depth=12, width=256), (torch.randn(64, 256, generator=g),
                                                                   torch.randn(64, 256, generator=g))
    yield "rescnn", gm.ResCNN(), (torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g))
    yield "transformer (d128)", gm.Transformer(vocab=1000, d=128, heads=4, seq=64), (
        torch.randint(0, 1000, (8, 64), generator=g), torch.randint(0, 1000, (8, 64), generator=g))
    yield "rnn (d128, 16 steps)", gm.UnrolledRNN(d=128, steps=16), (torch.randn(32, 16, 128, generator=g),
                                                                      torch.randint(0, 4, (32,), generator=g))
    yield "unet (64x64)", gm.UNet(), (torch.randn(4, 3, 64, 64, generator=g), torch.randint(0, 2, (4, 64, 64), generator=g))


def testdata_configs():
    for name, model, args, names, dynamic in gm.models():
        yield name, model, args


def best(fn):
    fn()
    t = float("inf")
    for _ in range(REPEAT):
        s = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - s)
    return t


def seconds(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return float(out.split()[1])


def main():
    argv = [a for a in sys.argv[1:] if a != "--testdata"]
    build = argv[0] if argv else os.path.join(ROOT, "build")
    which = testdata_configs if "--testdata" in sys.argv else configs
    bench = os.path.join(build, "tests", "bench", "bench_exec")
    ort_dir = os.path.join(build, "ort", "node_modules")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", NODE_PATH=ort_dir)
    torch.set_num_threads(1)
    print("| model | PyTorch step s | graphdiet step s | step ratio | onnxruntime fwd s | graphdiet fwd s | fwd ratio |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, args in which():
            path = os.path.join(tmp, "m.onnx")
            torch.onnx.export(model, args, path, input_names=["x", "target"], output_names=["loss"], opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

            def step():
                model.zero_grad(set_to_none=True)
                model(*args).backward()

            t_torch = best(step)
            t_step = seconds([bench, path, "--train", "--repeat", str(REPEAT)], env)
            t_fwd = seconds([bench, path, "--repeat", str(REPEAT)], env)
            feeds = []
            for n, a in zip(["x", "target"], args):
                f = os.path.join(tmp, n + ".npy")
                np.save(f, a.numpy())
                feeds.append(f"{n}={f}")
            t_ort = seconds(["node", os.path.join(ROOT, "tests", "ort", "time_ort.cjs"), path, str(REPEAT)] + feeds, env) \
                if os.path.isdir(ort_dir) else float("nan")
            print(f"| {name} | {t_torch:.5f} | {t_step:.5f} | {t_step / t_torch:.2f} | {t_ort:.5f} | {t_fwd:.5f} | "
                  f"{t_fwd / t_ort:.2f} |", flush=True)


if __name__ == "__main__":
    main()
