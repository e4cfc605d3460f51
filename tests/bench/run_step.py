#!/usr/bin/python3
"""Training-step benchmark: graphdiet's executor against PyTorch CPU and onnxruntime, one step each.

    /usr/bin/python3 tests/bench/run_step.py [BUILD_DIR] [--testdata] [--threads 1,2] [--rounds 7]

--testdata times the testdata models at their own sizes (the inputs gen_models.py saved); by
default the same classes run at sizes where compute, not per-op overhead, decides.

Each model is exported as testdata is (opset 17, training mode) and `graphdiet train` writes its
training graph (forward, backward, every parameter's gradient). All three run the same step on the
same inputs:
  - PyTorch: the model's forward and loss.backward();
  - graphdiet: the training graph file in its executor (bench_exec, the nodes' time);
  - onnxruntime-node: the same training graph file (default graph optimisations).
With T threads everywhere (torch.set_num_threads, OPENBLAS_NUM_THREADS, onnxruntime's intra-op
threads), for each T of --threads. Rounds interleave the three (PyTorch, graphdiet, onnxruntime,
then again), each round a median of 5 runs after a warm-up; the table gives the median over the
rounds (default 7) and the ratios graphdiet / peer (below 1: graphdiet is faster).
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


INNER = 5


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def torch_median(fn):
    fn()
    t = []
    for _ in range(INNER):
        s = time.perf_counter()
        fn()
        t.append(time.perf_counter() - s)
    return median(t)


def seconds(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return float(out.split()[1])


def main():
    argv = sys.argv[1:]
    opt = {"--threads": "1,2", "--rounds": "7"}
    for k in opt:
        if k in argv:
            i = argv.index(k)
            opt[k] = argv[i + 1]
            del argv[i:i + 2]
    argv = [a for a in argv if a != "--testdata"]
    build = argv[0] if argv else os.path.join(ROOT, "build")
    which = testdata_configs if "--testdata" in sys.argv else configs
    bench = os.path.join(build, "tests", "bench", "bench_exec")
    gd = os.path.join(build, "graphdiet")
    ort_dir = os.path.join(build, "ort", "node_modules")
    have_ort = os.path.isdir(ort_dir)
    rounds = int(opt["--rounds"])
    print("| model | threads | PyTorch step s | graphdiet step s | onnxruntime step s | graphdiet / PyTorch | "
          "graphdiet / onnxruntime |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, args in which():
            path, train = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
            torch.onnx.export(model, args, path, input_names=["x", "target"], output_names=["loss"], opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
            subprocess.run([gd, "train", path, "-o", train], check=True, capture_output=True)
            feeds = []
            for n, a in zip(["x", "target"], args):
                f = os.path.join(tmp, n + ".npy")
                np.save(f, a.numpy())
                feeds.append(f"{n}={f}")

            def step():
                model.zero_grad(set_to_none=True)
                model(*args).backward()

            for threads in [int(t) for t in opt["--threads"].split(",")]:
                torch.set_num_threads(threads)
                env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), NODE_PATH=ort_dir)
                t_torch, t_gd, t_ort = [], [], []
                for _ in range(rounds):
                    t_torch.append(torch_median(step))
                    t_gd.append(seconds([bench, train, "--repeat", str(INNER)] +
                                        [a for f in feeds for a in ("--input", f)], env))
                    if have_ort:
                        t_ort.append(seconds(["node", os.path.join(ROOT, "tests", "ort", "time_ort.cjs"), train,
                                              str(INNER), str(threads)] + feeds, env))
                pt, g, o = median(t_torch), median(t_gd), median(t_ort) if t_ort else float("nan")
                print(f"| {name} | {threads} | {pt:.5f} | {g:.5f} | {o:.5f} | {g / pt:.2f} | {g / o:.2f} |", flush=True)


if __name__ == "__main__":
    main()
