"""The small DAGs of issue #49, for bench_exact: a residual MLP (batch 1024), a U-Net with long Concat
skips (testdata/gen_exact.py's, wider) and a 2-layer transformer; and four other shapes: a
DenseNet-style MLP (each layer reads the concatenation of all before it), an Inception-style MLP
(three branches of different depths, summed), a pre-norm GELU residual MLP and a 3-layer
transformer; all exported from PyTorch without a loss (plan them with --loss-fn mse).

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


class Dense(nn.Module):
    """Each of five Tanh layers reads the concatenation of the input and every layer before it."""

    def __init__(self, d=32, n=5):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d * (i + 1), d) for i in range(n)])
        self.out = nn.Linear(d * (n + 1), 8)

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(torch.tanh(layer(torch.cat(feats, 1))))
        return self.out(torch.cat(feats, 1))


class Inception(nn.Module):
    """Three blocks of three branches summed: one Linear+ReLU, a GELU MLP twice as wide, and a
    three-layer Tanh/Sigmoid bottleneck half as wide."""

    def __init__(self, d=64, blocks=3):
        super().__init__()

        def linears(i, o):
            return nn.ModuleList([nn.Linear(i, o) for _ in range(blocks)])

        self.a = linears(d, d)
        self.b1, self.b2 = linears(d, 2 * d), linears(2 * d, d)
        self.c1, self.c2, self.c3 = linears(d, d // 2), linears(d // 2, d // 2), linears(d // 2, d)

    def forward(self, x):
        for i in range(len(self.a)):
            x = (torch.relu(self.a[i](x)) + self.b2[i](F.gelu(self.b1[i](x))) +
                 self.c3[i](torch.sigmoid(self.c2[i](torch.tanh(self.c1[i](x))))))
        return x


class GeluRes(nn.Module):
    """x + W2 gelu(W1 layernorm(x)), six blocks."""

    def __init__(self, d=64, blocks=6):
        super().__init__()
        self.fc1 = nn.ModuleList([nn.Linear(d, 4 * d) for _ in range(blocks)])
        self.fc2 = nn.ModuleList([nn.Linear(4 * d, d) for _ in range(blocks)])
        self.ln = nn.ModuleList([nn.LayerNorm(d) for _ in range(blocks)])

    def forward(self, x):
        for a, b, ln in zip(self.fc1, self.fc2, self.ln):
            x = x + b(F.gelu(a(ln(x))))
        return x


MODELS = [("resmlp", ResMLP, (1024, 32)), ("unet3", lambda: UNet(c=8, loss=False), (4, 3, 64, 64)),
          ("transformer2", Transformer, (8, 64, 64)), ("dense5", Dense, (512, 32)),
          ("inception3", Inception, (512, 64)), ("gelures6", GeluRes, (256, 64)),
          ("transformer3", lambda: Transformer(layers=3), (4, 64, 64))]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, make, shape in MODELS:
        model, x = make(), torch.randn(*shape)
        torch.onnx.export(model, (x,), os.path.join(out, name + ".onnx"), opset_version=17, input_names=["x"],
                          output_names=["y"], training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        print(os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main()
