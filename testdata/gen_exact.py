#!/usr/bin/python3
"""Exports the U-Net test_exact plans into testdata/exact/ (committed: a few KB): three levels down
and up, the decoder concatenating each encoder level's output (long Concat skips: a skip lives from
the start of the forward pass to the end of it), an MSE loss against a target input. Under its peak
with everything kept there are plans that recompute nothing (issue #49: auto spent FLOPs there).
tests/bench/gen_exact_dags.py exports it wider, without the loss, with the bench's other DAGs.

    /usr/bin/python3 testdata/gen_exact.py
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class Level(nn.Module):
    """One level of a U-Net and the levels below it: conv, then (but at the bottom) down, the levels
    below, up, and a conv of that concatenated with this level's output, which lives meanwhile."""

    def __init__(self, cin, c, depth):
        super().__init__()
        self.enc = nn.Conv2d(cin, c, 3, padding=1)
        self.inner = Level(c, 2 * c, depth - 1) if depth > 1 else None
        if self.inner:
            self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
            self.dec = nn.Conv2d(2 * c, c, 3, padding=1)

    def forward(self, x):
        e = F.relu(self.enc(x))
        if not self.inner:
            return e
        return F.relu(self.dec(torch.cat([self.up(self.inner(F.max_pool2d(e, 2))), e], 1)))


class UNet(nn.Module):
    def __init__(self, c=4, levels=3, loss=True):
        super().__init__()
        self.loss = loss
        self.body = Level(3, c, levels)
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x, target=None):
        y = self.head(self.body(x))
        return ((y - target) ** 2).mean() if self.loss else y


def main():
    torch.manual_seed(0)
    os.makedirs(os.path.join(HERE, "exact"), exist_ok=True)
    x, target = torch.randn(2, 3, 32, 32), torch.randn(2, 2, 32, 32)
    torch.onnx.export(UNet(), (x, target), os.path.join(HERE, "exact", "unet3.onnx"), opset_version=17,
                      input_names=["x", "target"], output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


if __name__ == "__main__":
    main()
