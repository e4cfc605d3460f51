#!/usr/bin/python3
"""Exports the onnxruntime memory benchmark's models and inputs (not committed; run_ort_memory.sh
reads them):

    mlp32.onnx   a deep MLP: 32 x (Linear 512 + Tanh), batch 4096, mean-squared error
    resnet.onnx  a ResNet-50-shaped CNN with BatchNorm (gen_plan_models.ResNet50), batch 32, 32x32

with each model's inputs as <model>.<input>.npy.

    /usr/bin/python3 tests/bench/gen_ort_models.py OUTDIR
"""
import os
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "testdata"))
sys.path.insert(0, here)
from gen_models import TanhChain  # noqa: E402
from gen_plan_models import ResNet50  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    models = [
        ("mlp32", TanhChain(depth=32, width=512), (torch.randn(4096, 512), torch.randn(4096, 512))),
        ("resnet", ResNet50(), (torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,)))),
    ]
    for name, model, args in models:
        torch.onnx.export(model, args, os.path.join(out, name + ".onnx"), input_names=["x", "target"],
                          output_names=["loss"], opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        for input_name, a in zip(["x", "target"], args):
            np.save(os.path.join(out, f"{name}.{input_name}.npy"), a.numpy())
        print(os.path.join(out, name + ".onnx"), file=sys.stderr)


if __name__ == "__main__":
    main()
