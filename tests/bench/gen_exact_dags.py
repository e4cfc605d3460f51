"""The small DAGs of issue #49, for bench_exact: a residual MLP (batch 1024), a U-Net with long Concat
skips (testdata/gen_exact.py's, wider) and a 2-layer transformer, exported from PyTorch without a loss
(plan them with --loss-fn mse).

    /usr/bin/python3 tests/bench/gen_exact_dags.py /tmp/exb
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata"))
from gen_exact import UNet  # noqa: E402  (three levels, long Concat skips)


class ResMLP(nn.Module):
    """h + W2 relu(W1 h), four blocks of width 64."""

    def __init__(self, d=64, blocks=4):
        super().__init__()
        self.inp = nn.Linear(32, d)
        self.fc1 = nn.ModuleList([nn.Linear(d, 2 * d) for _ in range(blocks)])
        self.fc2 = nn.ModuleList([nn.Linear(2 * d, d) for _ in range(blocks)])
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        h = self.inp(x)
        for a, b in zip(self.fc1, self.fc2):
            h = h + b(F.relu(a(h)))
        return self.out(h)


class Block(nn.Module):
    """Pre-norm, one attention head (so no head reshapes: a 2-layer model stays within exact's 64
    candidates), a ReLU MLP."""

    def __init__(self, d=64):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        a = torch.softmax(self.q(h) @ self.k(h).transpose(1, 2) / x.shape[2] ** 0.5, dim=-1) @ self.v(h)
        x = x + self.proj(a)
        return x + self.fc2(F.relu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, d=64, layers=2):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(layers)])
        self.out = nn.Linear(d, d)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.out(x)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, model, x in [("resmlp", ResMLP(), torch.randn(1024, 32)),
                           ("unet3", UNet(c=8, loss=False), torch.randn(4, 3, 64, 64)),
                           ("transformer2", Transformer(), torch.randn(8, 64, 64))]:
        torch.onnx.export(model, (x,), os.path.join(out, name + ".onnx"), opset_version=17, input_names=["x"],
                          output_names=["y"], training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        print(os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main()
