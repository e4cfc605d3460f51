#!/usr/bin/python3
"""BatchNorm + ReLU + MaxPool CNNs for verify --gradcheck (tests/test_cli.c, "#48 gradcheck"): stock
torchvision models at reduced widths and small inputs, random weights, exported as README says
(opset 17, training mode, no constant folding), cross-entropy inside. Their finite differences
cross ReLU and MaxPool kinks along most random directions; the gradients are right.

    /usr/bin/python3 testdata/gradcheck/gen.py [DIR]     # default: beside this script
"""
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gen_zoo import Classify  # noqa: E402  (cross-entropy of the body's scores against labels)


def models():
    tv = torchvision.models
    torch.manual_seed(1)
    yield "shufflenet", tv.ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 64], num_classes=10), 48
    torch.manual_seed(4)
    yield "densenet", tv.DenseNet(growth_rate=4, block_config=(2, 2), num_init_features=8, bn_size=2,
                                  num_classes=10), 32


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, body, size in models():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, size, size, generator=g)
        t = torch.randint(0, 10, (2,), generator=g)
        m = Classify(body).train()
        torch.onnx.export(m, (x, t), os.path.join(out, name + ".onnx"), input_names=["x", "target"],
                          output_names=["loss"], opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)


if __name__ == "__main__":
    main()
