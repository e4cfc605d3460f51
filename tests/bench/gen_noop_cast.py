#!/usr/bin/python3
"""Two attention stacks that differ only in softmax(scores, dim=-1, dtype=torch.float32) of float32
scores, which the exporter writes as a Cast to float32 after the Softmax (a no-op graphdiet folds;
scores.float() is not exported at all): plan both and their peaks must agree.

    /usr/bin/python3 tests/bench/gen_noop_cast.py OUTDIR [SEQ]
    graphdiet plan OUTDIR/attn_cast.onnx; graphdiet plan OUTDIR/attn_plain.onnx
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Layer(nn.Module):
    def __init__(self, d, heads, cast):
        super().__init__()
        self.heads, self.cast = heads, cast
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)
        att = F.softmax(scores, dim=-1, dtype=torch.float32) if self.cast else F.softmax(scores, dim=-1)
        return x + self.out((att @ v).transpose(1, 2).reshape(B, T, C))


class Stack(nn.Module):
    def __init__(self, cast, d=256, heads=8, layers=2):
        super().__init__()
        self.layers = nn.ModuleList(Layer(d, heads, cast) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.square().mean()


def main():
    out, seq = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    os.makedirs(out, exist_ok=True)
    for cast in (True, False):
        torch.manual_seed(0)
        path = os.path.join(out, "attn_cast.onnx" if cast else "attn_plain.onnx")
        torch.onnx.export(Stack(cast), (torch.randn(1, seq, 256),), path, input_names=["x"], output_names=["loss"],
                          opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
