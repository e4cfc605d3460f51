#!/usr/bin/python3
"""BatchNorm + ReLU + MaxPool CNNs for verify --gradcheck (tests/test_cli.c, "#48 gradcheck"): stock
torchvision models at reduced widths and small inputs, random weights, exported as README says
(opset 17, training mode, no constant folding), cross-entropy inside. Their finite differences
cross ReLU and MaxPool kinks along most random directions; the gradients are right. bn_pairs
normalises pairs of values, where float32's gradient is float64's only to float32's rounding.

    /usr/bin/python3 testdata/gradcheck/gen.py [DIR]     # default: beside this script
"""
import os
import sys

import numpy
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gen_zoo import Classify  # noqa: E402  (cross-entropy of the body's scores against labels)


def models():
    tv = torchvision.models
    torch.manual_seed(1)
    yield "shufflenet", tv.ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 64], num_classes=10), 48, 0
    torch.manual_seed(4)
    yield "densenet", tv.DenseNet(growth_rate=4, block_config=(2, 2), num_init_features=8, bn_size=2,
                                  num_classes=10), 32, 0
    # BatchNorm over two values (a batch of 2 pooled to 1x1), the two samples 1e-3 apart: float32's
    # gradient is 15% from float64's here, and --gradcheck must check the graph widened to float64
    nn = torch.nn
    torch.manual_seed(32)
    yield "bn_pairs", nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        *[layer for c in (8, 16, 16) for layer in (nn.Conv2d(c, 16, 1), nn.BatchNorm2d(16), nn.ReLU())],
        nn.Flatten(), nn.Linear(16, 10)), 8, 1e-3


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, body, size, near in models():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, size, size, generator=g)
        t = torch.randint(0, 10, (2,), generator=g)
        if near:  # the second sample near the first, saved for verify --gradcheck -i
            x[1] = x[0] + near * x[1]
            numpy.save(os.path.join(out, name + "_x.npy"), x.numpy())
            numpy.save(os.path.join(out, name + "_target.npy"), t.numpy())
        m = Classify(body).train()
        torch.onnx.export(m, (x, t), os.path.join(out, name + ".onnx"), input_names=["x", "target"],
                          output_names=["loss"], opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)


if __name__ == "__main__":
    main()
