"""gen.py - testdata/checker/dropout_mlp.onnx: a small MLP with Dropout, exported by PyTorch in
training mode (its Dropout nodes keep training_mode true), for tests/checker/check_graphs.py: the
gradient of a 16-bit Dropout must load in onnxruntime without a warning.

    /usr/bin/python3 testdata/checker/gen.py
"""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class DropoutMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.drop = torch.nn.Dropout(0.1)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x, target):
        h = self.drop(torch.relu(self.fc1(x)))
        return ((self.fc2(h) - target) ** 2).mean()


def main():
    torch.manual_seed(0)
    m = DropoutMLP()
    args = (torch.randn(4, 8), torch.randn(4, 4))
    torch.onnx.export(m, args, os.path.join(HERE, 'dropout_mlp.onnx'), input_names=['x', 'target'],
                      output_names=['loss'], opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


if __name__ == '__main__':
    main()
