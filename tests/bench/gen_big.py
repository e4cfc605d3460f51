#!/usr/bin/python3
"""Exports a GPT-style transformer with ~33M parameters (about 133 MB of float32 weights) for the
I/O benchmark. Not committed: `bench_io` needs a real model larger than 100 MB.

    /usr/bin/python3 tests/bench/gen_big.py OUT.onnx [VOCAB] [D LAYERS HEADS SEQ [BATCH]]

VOCAB (default 8192) sizes the embeddings and the head; run_diet.sh asks for 4096, the most classes
the executor's SoftmaxCrossEntropyLoss takes.
"""
import inspect
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata"))
from gen_models import Transformer, TBlock  # noqa: E402


def main():
    out = sys.argv[1]
    vocab = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
    d, layers, heads, seq = (int(a) for a in sys.argv[3:7]) if len(sys.argv) > 6 else (512, 8, 8, 64)
    batch = int(sys.argv[7]) if len(sys.argv) > 7 else 2  # the export fixes it
    torch.manual_seed(0)
    model = Transformer(vocab=vocab, d=d, heads=heads, seq=seq)
    model.blocks = torch.nn.ModuleList([TBlock(d, heads) for _ in range(layers)])
    tokens = torch.randint(0, vocab, (batch, seq))
    # PyTorch 2.9 and later export through torch.export (dynamo) by default, with static shapes
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (tokens, tokens), out, input_names=["tokens", "target"], output_names=["loss"],
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      **legacy)
    print(f"{out}: {os.path.getsize(out) / 1e6:.0f} MB, "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
