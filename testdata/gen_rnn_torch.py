#!/usr/bin/python3
"""The recurrent kernels against PyTorch: nn.LSTM, nn.GRU and nn.RNN exported to ONNX
(testdata/rnn_torch/<case>.onnx) with the inputs fed and the outputs PyTorch computed
(testdata/ref/rnn_torch/<case>/<name>.npy), for tests/test_onnx.c's rnn_torch tests.

The ONNX LSTM's gates are in the order i, o, f, c and PyTorch's i, f, g, o: the exporter reorders
the weights, so the comparison covers the conversion as well as the kernel. Cases: a
bidirectional batch-first LSTM with initial states, a GRU (PyTorch's is linear_before_reset = 1)
with an initial state, a bidirectional tanh RNN (float32), and a 2-layer LSTM in float64.

    /usr/bin/python3 testdata/gen_rnn_torch.py
"""
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class Wrap(torch.nn.Module):
    def __init__(self, rnn, lstm):
        super().__init__()
        self.rnn, self.lstm = rnn, lstm

    def forward(self, x, h0, c0=None):
        if self.lstm:
            y, (h, c) = self.rnn(x, (h0, c0))
            return y, h, c
        y, h = self.rnn(x, h0)
        return y, h


def case(name, rnn, lstm, x, dirs_layers, dtype):
    torch.manual_seed(1)
    rnn = rnn.to(dtype)
    with torch.no_grad():  # weights of a trained model's size, not the initialiser's 1/sqrt(H)
        for p in rnn.parameters():
            p.uniform_(-0.5, 0.5)
    m = Wrap(rnn, lstm).eval()
    B = x.shape[0] if rnn.batch_first else x.shape[1]
    h0 = torch.randn(dirs_layers, B, rnn.hidden_size, dtype=dtype) * 0.5
    c0 = torch.randn(dirs_layers, B, rnn.hidden_size, dtype=dtype) * 0.5
    args = (x, h0, c0) if lstm else (x, h0)
    names = ["x", "h0", "c0"][:len(args)]
    outs = ["y", "hn", "cn"][:3 if lstm else 2]
    torch.onnx.export(m, args, os.path.join(HERE, "rnn_torch", name + ".onnx"), input_names=names, output_names=outs,
                      opset_version=17)
    ref = os.path.join(HERE, "ref", "rnn_torch", name)
    os.makedirs(ref, exist_ok=True)
    with torch.no_grad():
        got = m(*args)
    for n, a in list(zip(names, args)) + list(zip(outs, got)):
        np.save(os.path.join(ref, n + ".npy"), a.numpy())


def main():
    os.makedirs(os.path.join(HERE, "rnn_torch"), exist_ok=True)
    g = torch.Generator().manual_seed(0)
    f32, f64 = torch.float32, torch.float64
    case("lstm_bidir", torch.nn.LSTM(24, 32, bidirectional=True, batch_first=True), True,
         torch.randn(3, 10, 24, generator=g), 2, f32)
    case("gru", torch.nn.GRU(24, 32), False, torch.randn(10, 3, 24, generator=g), 1, f32)
    case("rnn_bidir", torch.nn.RNN(24, 32, bidirectional=True), False, torch.randn(10, 3, 24, generator=g), 2, f32)
    case("lstm2_f64", torch.nn.LSTM(8, 16, num_layers=2), True, torch.randn(6, 2, 8, generator=g, dtype=f64), 2, f64)


if __name__ == "__main__":
    main()
