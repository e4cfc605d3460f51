#!/usr/bin/python3
"""Exports the plan-quality benchmark's models (not committed; bench_plan reads them):

    chain.onnx          a deep chain: 64 x (Linear 128 + Tanh), batch 1024
    transformer24.onnx  a 24-layer pre-norm transformer, d 64, 4 heads, sequence 32, batch 4
    resnet50.onnx       a ResNet-50-shaped CNN: bottleneck blocks [3, 4, 6, 3], widths 16..128, 32x32
    unet.onnx           a four-level U-Net with skip concatenations, 32 channels at the top, 64x64
    rnn.onnx            an Elman RNN unrolled over 32 steps, d 128, batch 512

    /usr/bin/python3 tests/bench/gen_plan_models.py OUTDIR

With --chains, issue 49's chains instead (exact_chains.py reads them; exported without a loss,
graphdiet appends one with --loss-fn mse): chainN.onnx, N = 3 .. 6, 8, 16, .., 256 Linear(64, 64)
+ Tanh layers; alt32.onnx, 32 layers alternating widths 256 and 32; wide32.onnx, 32 layers of
width 64 but one of 512 in the middle; all at batch 1024.

    /usr/bin/python3 tests/bench/gen_plan_models.py --chains OUTDIR
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata"))
from gen_models import TanhChain, TBlock, Transformer, UnrolledRNN  # noqa: E402


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride):
        super().__init__()
        cout = 4 * mid
        self.c1, self.b1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.c2, self.b2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.c3, self.b3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = F.relu(self.b2(self.c2(h)))
        h = self.b3(self.c3(h))
        return F.relu(h + (self.down(x) if self.down is not None else x))


class ResNet50(nn.Module):
    def __init__(self, base=16, classes=10):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, base, 3, 1, 1, bias=False), nn.BatchNorm2d(base)
        layers, cin = [], base
        for i, n in enumerate([3, 4, 6, 3]):
            mid = base * 2 ** i // 2 if i else base // 2
            for j in range(n):
                layers.append(Bottleneck(cin, mid, 2 if j == 0 and i > 0 else 1))
                cin = 4 * mid
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x, target):
        h = self.layers(F.relu(self.bn(self.stem(x))))
        return F.cross_entropy(self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1)), target)


class UNet4(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        ch = [c, 2 * c, 4 * c, 8 * c]
        self.enc = nn.ModuleList([nn.Conv2d(3 if i == 0 else ch[i - 1], ch[i], 3, padding=1) for i in range(4)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(ch[i], ch[i - 1], 2, stride=2) for i in range(3, 0, -1)])
        self.dec = nn.ModuleList([nn.Conv2d(2 * ch[i - 1], ch[i - 1], 3, padding=1) for i in range(3, 0, -1)])
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x, target):
        skips = []
        for i, e in enumerate(self.enc):
            x = F.relu(e(x if i == 0 else F.max_pool2d(x, 2)))
            skips.append(x)
        for up, dec, s in zip(self.up, self.dec, reversed(skips[:-1])):
            x = F.relu(dec(torch.cat([up(x), s], 1)))
        return F.cross_entropy(self.head(x), target)


def chain(widths):
    """Linear(widths[i], widths[i + 1]) + Tanh for each i: a model and its input, batch 1024."""
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers), torch.randn(1024, widths[0])


def chains(out):
    wide = [64] * 33
    wide[16] = 512
    shapes = [(f"chain{n}", [64] * (n + 1)) for n in [3, 4, 5, 6, 8, 16, 32, 64, 128, 256]]
    shapes += [("alt32", [256 if i % 2 == 0 else 32 for i in range(33)]), ("wide32", wide)]
    for name, widths in shapes:
        model, x = chain(widths)
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], opset_version=17)
        print(path, file=sys.stderr)


def main():
    out = sys.argv[-1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    if "--chains" in sys.argv[1:-1]:
        chains(out)
        return
    torch.manual_seed(0)
    tr = Transformer(vocab=256, d=64, heads=4, seq=32)
    tr.blocks = nn.ModuleList([TBlock(64, 4) for _ in range(24)])
    models = [
        ("chain", TanhChain(depth=64, width=128), (torch.randn(1024, 128), torch.randn(1024, 128)), ["x", "target"]),
        ("transformer24", tr, (torch.randint(0, 256, (4, 32)), torch.randint(0, 256, (4, 32))), ["tokens", "target"]),
        ("resnet50", ResNet50(), (torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))), ["x", "target"]),
        ("unet", UNet4(), (torch.randn(2, 3, 64, 64), torch.randint(0, 2, (2, 64, 64))), ["x", "target"]),
        ("rnn", UnrolledRNN(d=128, steps=32), (torch.randn(512, 32, 128), torch.randint(0, 4, (512,))), ["x", "target"]),
    ]
    for name, model, args, names in models:
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(model, args, path, input_names=names, output_names=["loss"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
