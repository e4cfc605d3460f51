#!/usr/bin/python3
"""Exports the exporter's idioms, one tiny model each, into testdata/idioms/ (committed: a few KB).

Each is Linear -> one idiom -> cross-entropy, exported as a user would (opset 17, training mode, no
constant folding, dropout on), the way the stock modules put them in graphs: a slice whose bounds
come from shape arithmetic, Dropout with Constant ratio and mode, a view and a sum, F.pad, ReLU6
(Clip), Hardswish, Hardsigmoid, torch.triu (Trilu), torch.arange on a dynamic batch (Range), an
index along axis 1 (Gather), 33 stacked layers (a training step's finite check then sums more
than 64 gradients), GELU (Erf and tanh forms), SiLU and Mish, which the exporter writes as
x u(x), LayerNorm exported at opset 16 (as its chain of ReduceMean, Sub, Pow, Sqrt, Div), and MaxPool
and Gather at opset 14, torch.onnx.export's default (their gradients need opset 16). testdata/ref/idioms/<name>/ holds PyTorch's inputs, loss and gradients, with
graphdiet's dropout masks as gen_zoo.py draws them.

    /usr/bin/python3 testdata/gen_idioms.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_zoo import forward_with_masks, save_reference  # noqa: E402  (the zoo's masks)


class Idiom(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(4, 20 if kind == "resize_align" else 6)
        self.drop = nn.Dropout(0.3 if kind == "dropout" else 0.0)
        self.layers = nn.ModuleList(nn.Linear(6, 6) for _ in range(32 if kind == "deep" else 0))
        self.norm = nn.LayerNorm(6) if kind == "layer_norm16" else None

    def forward(self, x, target):
        y = self.fc(x)
        k = self.kind
        if k == "slice":  # bounds from the shape: Shape -> Gather -> Div -> Slice
            y = y[:, : y.shape[1] // 2]
        elif k in ("dropout", "dropout0"):
            y = self.drop(y)
        elif k == "view_sum":
            y = y.view(y.shape[0], 3, 2).sum(2)
        elif k == "pad":
            y = F.pad(y, (1, 2))
        elif k == "relu6":
            y = F.relu6(y * 8)  # past both bounds
        elif k == "hardswish":
            y = F.hardswish(y * 4)
        elif k == "hardsigmoid":
            y = F.hardsigmoid(y * 4)
        elif k == "triu":
            y = torch.triu(y.view(y.shape[0], 2, 3), diagonal=1).flatten(1)
        elif k == "arange":  # a dynamic batch: Range over a shape
            y = y * torch.arange(y.shape[1], dtype=y.dtype)
        elif k == "gather1":
            y = y[:, 1:2] * y + y[:, 0].unsqueeze(1)
        elif k == "gelu":  # x (1 + erf(x / sqrt 2)) / 2
            y = F.gelu(y * 2)
        elif k == "gelu_tanh":
            y = F.gelu(y * 2, approximate="tanh")
        elif k == "silu":  # x sigmoid(x)
            y = F.silu(y * 2)
        elif k == "mish":  # x tanh(softplus(x))
            y = F.mish(y * 2)
        elif k == "layer_norm16":  # exported at opset 16: ReduceMean, Sub, Pow, ..., Div
            y = self.norm(y * 4)
        elif k == "pool_gather14":  # torch.onnx.export's default opset, 14: MaxPool and Gather
            y = F.max_pool1d(y.unsqueeze(1), 3, stride=1, padding=1).squeeze(1) + y[:, 0].unsqueeze(1)
        elif k == "resize_align":  # scales in the file, PyTorch's floor(n s) corners meant (rewrite/exporter.h)
            y = F.interpolate(y.view(y.shape[0], 1, 4, 5), scale_factor=0.6, mode="bilinear", align_corners=True)
            y = y.flatten(1)
        elif k == "deep":
            for layer in self.layers:
                y = torch.tanh(layer(y))
        return F.cross_entropy(y, target)


KINDS = ["slice", "dropout", "dropout0", "view_sum", "pad", "relu6", "hardswish", "hardsigmoid", "triu", "arange",
         "gather1", "deep", "gelu", "gelu_tanh", "silu", "mish", "layer_norm16", "pool_gather14",
         "resize_align"]


def main():
    out = os.path.join(HERE, "idioms")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    for kind in KINDS:
        model = Idiom(kind)
        x = torch.randn(2, 4, generator=g)
        classes = 3 if kind in ("slice", "view_sum") else 9 if kind == "pad" else 6
        t = torch.randint(0, classes, (2,), generator=g)
        path = os.path.join(out, kind + ".onnx")
        dynamic = {"x": {0: "batch"}, "target": {0: "batch"}} if kind in ("arange", "slice") else None
        torch.onnx.export(model, (x, t), path, input_names=["x", "target"], output_names=["loss"], opset_version=int(kind[-2:]) if kind[-2:].isdigit() else 17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, dynamic_axes=dynamic)
        ref = os.path.join(HERE, "ref", "idioms", kind)
        os.makedirs(ref, exist_ok=True)
        loss, _ = forward_with_masks(model, (x, t), path)
        loss.backward()
        save_reference(ref, ["x", "target"], (x, t), loss, model)
        print(f"{path}: {os.path.getsize(path)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
