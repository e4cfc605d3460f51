#!/usr/bin/python3
"""select_bench.py - graphdiet's selection and reduction kernels at a language model's size, beside
PyTorch's CPU kernels (the peer) in the same run, on the same number of threads.

usage: select_bench.py GRAPHDIET [ROWS [VOCAB]]   (default 1024 x 50257: GPT-2's logits)

Each op is a one-node ONNX model over float32 logits (ROWS, VOCAB) along the last axis, run by
`graphdiet run --random-inputs` (the executor's time for the node, the best of 3); PyTorch runs
the same op on random data of the same shape (best of 3). Prints: op, graphdiet s, PyTorch s,
ratio (graphdiet / PyTorch)."""
import json, os, subprocess, sys, tempfile, time

import onnx
import torch
from onnx import TensorProto, helper

gd = sys.argv[1]
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 50257
threads = os.cpu_count()
torch.set_num_threads(threads)

CASES = [
    ("ArgMax", lambda: helper.make_node("ArgMax", ["x"], ["y"], axis=-1), lambda x: torch.argmax(x, -1)),
    ("TopK k=50", lambda: helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1), lambda x: torch.topk(x, 50, -1)),
    ("ReduceLogSumExp", lambda: helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[-1]),
     lambda x: torch.logsumexp(x, -1, keepdim=True)),
    ("ReduceMax", lambda: helper.make_node("ReduceMax", ["x"], ["y"], axes=[-1]), lambda x: torch.amax(x, -1, keepdim=True)),
    ("ReduceL1", lambda: helper.make_node("ReduceL1", ["x"], ["y"], axes=[-1]),
     lambda x: torch.linalg.vector_norm(x, 1, -1, keepdim=True)),
]


def best(f, n=3):
    t = []
    for _ in range(n):
        s = time.perf_counter()
        f()
        t.append(time.perf_counter() - s)
    return min(t)


def graphdiet_seconds(path):
    r = []
    for _ in range(3):
        out = subprocess.run([gd, "--threads", str(threads), "run", path, "--random-inputs", "--format", "json"],
                             capture_output=True, text=True, check=True).stdout
        r.append(json.loads(out)["seconds"])
    return min(r)


def main():
    x = torch.randn(rows, vocab)
    print("logits (%d, %d) float32, %d threads" % (rows, vocab, threads))
    print("| op | graphdiet s | PyTorch s | ratio |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, node, peer in CASES:
            n = node()
            g = helper.make_graph([n], "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, vocab])],
                                  [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in n.output],
                                  initializer=[helper.make_tensor("k", TensorProto.INT64, [1], [50])])
            path = os.path.join(tmp, "m.onnx")
            onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
            ours, theirs = graphdiet_seconds(path), best(lambda: peer(x))
            print("| %s | %.4f | %.4f | %.1f |" % (name, ours, theirs, ours / theirs))


main()
