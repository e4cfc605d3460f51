#!/usr/bin/python3
"""Exports one small CNN three ways into testdata/evalmode/, for train's note on eval-mode exports.

Two models, each with its MSE loss inside (inputs x and y, one scalar output), so that
`graphdiet train` needs no option: a CNN (Conv -> BatchNorm2d -> ReLU -> Dropout -> Linear) and an
MLP (Linear -> BatchNorm1d -> ReLU -> Dropout -> Linear).

- eval_folded.onnx: the CNN, torch.onnx.export(training=TrainingMode.EVAL): the exporter folds the
  BatchNorm into the Conv, whose weight and bias become initializers named onnx::Conv_N, and drops
  the Dropout.
- eval_bn.onnx: the MLP in EVAL mode: an inference-form BatchNormalization (one output,
  training_mode 0) on the running statistics, no Dropout.
- training.onnx, training_bn.onnx: the CNN and the MLP in TrainingMode.TRAINING: training-mode
  BatchNormalization (three outputs) and the Dropout.

    /usr/bin/python3 testdata/evalmode/gen_evalmode.py
"""
import os

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(nn.Module):
    def __init__(self, cnn):
        super().__init__()
        self.cnn = cnn
        self.first = nn.Conv2d(3, 4, 3, padding=1) if cnn else nn.Linear(3 * 6 * 6, 4)
        self.bn = nn.BatchNorm2d(4) if cnn else nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(4 * 6 * 6 if cnn else 4, 2)

    def forward(self, x, y):
        h = self.drop(torch.relu(self.bn(self.first(x if self.cnn else x.flatten(1)))))
        return ((self.fc(h.flatten(1)) - y) ** 2).mean()


def export(name, cnn, mode):
    torch.manual_seed(0)
    m = Net(cnn)
    x, y = torch.randn(2, 3, 6, 6), torch.randn(2, 2)
    torch.onnx.export(m, (x, y), os.path.join(HERE, name), input_names=["x", "y"], output_names=["loss"],
                      opset_version=14, training=mode)


export("eval_folded.onnx", True, torch.onnx.TrainingMode.EVAL)
export("eval_bn.onnx", False, torch.onnx.TrainingMode.EVAL)
export("training.onnx", True, torch.onnx.TrainingMode.TRAINING)
export("training_bn.onnx", False, torch.onnx.TrainingMode.TRAINING)
