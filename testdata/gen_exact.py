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


class UNet(nn.Module):
    def __init__(self, c=4, loss=True):
        super().__init__()
        ch = [c, 2 * c, 4 * c]
        self.loss = loss
        self.enc = nn.ModuleList([nn.Conv2d(3 if i == 0 else ch[i - 1], ch[i], 3, padding=1) for i in range(3)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(ch[i], ch[i - 1], 2, stride=2) for i in range(2, 0, -1)])
        self.dec = nn.ModuleList([nn.Conv2d(2 * ch[i - 1], ch[i - 1], 3, padding=1) for i in range(2, 0, -1)])
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x, target=None):
        skips = []
        for i, e in enumerate(self.enc):
            x = F.relu(e(x if i == 0 else F.max_pool2d(x, 2)))
            skips.append(x)
        for up, dec, s in zip(self.up, self.dec, reversed(skips[:-1])):
            x = F.relu(dec(torch.cat([up(x), s], 1)))
        y = self.head(x)
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
