#!/usr/bin/python3
"""Issue #52's LSTM LM training step: graphdiet's executor (one or more builds) against PyTorch.

    /usr/bin/python3 tests/bench/lstm_step.py [--threads N] [--rounds R] [--cpu] BUILD_DIR[,TRAIN_OPTION...] ...

The model: Embedding(2000, 256), nn.LSTM 2 layers x 512, Linear(512, 2000) and cross-entropy, at
seq 64 and batch 16 (tokens (64, 16), the LSTM's time-major layout). Exported as run_step.py
exports (opset 17, training mode), each build's `graphdiet train` writes its training graph (with
the options after the build's commas: `build,--fused-rnn` differentiates the LSTM with
RecurrentGrad), and each round times PyTorch's step (forward and loss.backward()) and then each
build's bench_exec on its file (median of the round's runs), interleaved. Printed: the medians over the
rounds, each build's ratio to PyTorch, and then each build's `bench_exec --profile` line for the
LSTM op with its GFLOP/s (8 T B 4 H (I + H) per layer and step: the two products; the gates are
not counted) and the backward's time: RecurrentGrad's line (its products are twice the
forward's: dG R a step, dW, dR and dX; the gates come from the forward), or the unrolled rule's
standard ops.

--cpu times CPU seconds instead of wall seconds, for a machine others load: PyTorch's step by
time.process_time(), each build's as the CPU time of bench_exec --repeat N less that of --repeat 1,
over N - 1 (the loading apart). At one thread that is the step's time on a quiet core; at more it
is the sum over the threads."""
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_step as rs  # noqa: E402

LstmLM = rs.LstmLM
V, E, H, L, T, B = LstmLM.V, LstmLM.E, LstmLM.H, LstmLM.L, LstmLM.T, LstmLM.B


def main():
    argv = sys.argv[1:]
    cpu = "--cpu" in argv
    argv = [a for a in argv if a != "--cpu"]
    opt = {"--threads": "1", "--rounds": "5"}
    for k in opt:
        if k in argv:
            i = argv.index(k)
            opt[k] = argv[i + 1]
            del argv[i:i + 2]
    if not argv:
        print(__doc__.strip())
        return
    threads, rounds = int(opt["--threads"]), int(opt["--rounds"])
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = LstmLM()
    args = (torch.randint(0, V, (T, B), generator=g), torch.randint(0, V, (T, B), generator=g))
    rs.torch_threads(threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        torch.onnx.export(model, args, path, input_names=["x", "target"], output_names=["loss"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        specs = [a.split(",") for a in argv]
        trains = []
        for k, spec in enumerate(specs):
            trains.append(os.path.join(tmp, f"t{k}.onnx"))
            subprocess.run([os.path.join(spec[0], "graphdiet"), "train", path, "-o", trains[k]] + spec[1:],
                           check=True, capture_output=True)
        feeds = []
        for n, a in zip(["x", "target"], args):
            f = os.path.join(tmp, n + ".npy")
            np.save(f, a.numpy())
            feeds += ["--input", f"{n}={f}"]

        def step():
            model.zero_grad(set_to_none=True)
            model(*args).backward()

        def cpu_step():
            t = []
            for _ in range(runs):
                s = time.process_time()
                step()
                t.append(time.process_time() - s)
            return rs.median(t)

        def cpu_bench(cmd):
            def child(n):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run(cmd + ["--repeat", str(n)], env=env, check=True, capture_output=True)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            rs.settle()
            return (child(runs) - child(1)) / (runs - 1)

        runs = max(3, rs.inner_runs(step))
        benches = [os.path.join(spec[0], "tests", "bench", "bench_exec") for spec in specs]
        t_torch, t_gd = [], [[] for _ in benches]
        for _ in range(rounds):
            t_torch.append(cpu_step() if cpu else rs.torch_median(step, runs))
            for k, bench in enumerate(benches):
                if cpu:
                    t_gd[k].append(cpu_bench([bench, trains[k], "--threads", str(threads)] + feeds))
                    continue
                t_gd[k].append(rs.seconds([bench, trains[k], "--repeat", str(runs), "--threads", str(threads)] + feeds,
                                          env))
        pt = rs.median(t_torch)
        print(f"threads {threads}, {rounds} rounds of {runs} runs, {'CPU' if cpu else 'wall'} time; PyTorch step "
              f"{pt:.4f} s")
        for b, t in zip(argv, t_gd):
            print(f"  {b}: step {rs.median(t):.4f} s, {rs.median(t) / pt:.2f} x PyTorch {rs.spread(t, t_torch)}")
        flop = 2 * T * B * 4 * H * ((E + H) + (H + H))  # two layers: X W^T and H R^T, 2 flops a multiply-add
        for b, bench, train in zip(argv, benches, trains):
            err = subprocess.run([bench, train, "--profile", "--repeat", "1", "--threads", str(threads)] + feeds,
                                 env=env, check=True, capture_output=True, text=True).stderr
            for line in err.splitlines():
                w = line.split()
                if w[:1] == ["LSTM"]:  # LSTM  MS ms/run  CALLS calls/run
                    ms = float(w[1])
                    print(f"  {b}: LSTM forward {ms:.1f} ms a step ({w[3]} calls), {flop / 1e9:.2f} GFLOP: "
                          f"{flop / 1e6 / ms:.1f} GFLOP/s")
                if w[:1] == ["RecurrentGrad"]:
                    ms = float(w[1])
                    print(f"  {b}: RecurrentGrad {ms:.1f} ms a step ({w[3]} calls), {2 * flop / 1e9:.2f} GFLOP: "
                          f"{2 * flop / 1e6 / ms:.1f} GFLOP/s")

if __name__ == "__main__":
    main()
