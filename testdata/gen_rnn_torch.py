#!/usr/bin/python3
"""The recurrent kernels against PyTorch: nn.LSTM, nn.GRU and nn.RNN exported to ONNX
(testdata/rnn_torch/<case>.onnx) with the inputs fed and the outputs PyTorch computed
(testdata/ref/rnn_torch/<case>/<name>.npy), for tests/test_onnx.c's rnn_torch tests.

The ONNX LSTM's gates are in the order i, o, f, c and PyTorch's i, f, g, o: the exporter reorders
the weights, so the comparison covers the conversion as well as the kernel. Cases: a
bidirectional batch-first LSTM with initial states, a GRU (PyTorch's is linear_before_reset = 1)
with an initial state, a bidirectional tanh RNN (float32), and a 2-layer LSTM in float64.

Gradients too (#52 rnnback): each case again as <case>_loss.onnx, whose output is the scalar
loss = sum(y wy) + sum(hn wh) (+ sum(cn wc)), the w fixed random constants, and PyTorch's
gradients of it (testdata/ref/rnn_torch/<case>_loss/<name>_grad.npy) with respect to x, h0, c0
and every recurrent node's W, R and B, named after the ONNX initializers they are (the
exporter's gate order: the generator checks that its reordering of PyTorch's weights gives
the initializers' values), for tests/test_onnx.c's rnn_torch_gradients test.

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


class Loss(torch.nn.Module):
    def __init__(self, wrap, ws):
        super().__init__()
        self.wrap = wrap
        for k, w in enumerate(ws):
            self.register_buffer(f"w{k}", w)

    def forward(self, *args):
        outs = self.wrap(*args)
        terms = [(o * getattr(self, f"w{k}")).sum() for k, o in enumerate(outs)]
        return torch.stack(terms).sum()  # the exporter adds 0-d sums in float32


# PyTorch's gate blocks in ONNX's order: LSTM (i, f, g, o) -> (i, o, f, c); GRU (r, z, n) -> (z, r, h)
ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}


def gates(t, kind):
    c = t.chunk(len(ORDER[kind]), 0)
    return torch.cat([c[k] for k in ORDER[kind]], 0)


def grad_case(name, rnn, lstm, x, dirs_layers, dtype):
    """name's model with a scalar loss, and PyTorch's gradients of it"""
    import onnx
    from onnx import numpy_helper
    torch.manual_seed(1)
    rnn = rnn.to(dtype)
    with torch.no_grad():
        for p in rnn.parameters():
            p.uniform_(-0.5, 0.5)
    wrap = Wrap(rnn, lstm)
    B = x.shape[0] if rnn.batch_first else x.shape[1]
    h0 = torch.randn(dirs_layers, B, rnn.hidden_size, dtype=dtype) * 0.5
    c0 = torch.randn(dirs_layers, B, rnn.hidden_size, dtype=dtype) * 0.5
    args = [x.clone(), h0, c0] if lstm else [x.clone(), h0]
    with torch.no_grad():
        outs = wrap(*args)
    ws = [torch.randn(o.shape, dtype=dtype) for o in outs]
    m = Loss(wrap, ws).eval()
    names = ["x", "h0", "c0"][:len(args)]
    path = os.path.join(HERE, "rnn_torch", name + "_loss.onnx")
    torch.onnx.export(m, tuple(args), path, input_names=names, output_names=["loss"], opset_version=17)
    ref = os.path.join(HERE, "ref", "rnn_torch", name + "_loss")
    os.makedirs(ref, exist_ok=True)
    for a in args:
        a.requires_grad_(True)
    rnn.zero_grad()
    loss = m(*args)
    loss.backward()
    np.save(os.path.join(ref, "loss.npy"), loss.detach().numpy())
    for n, a in zip(names, args):
        np.save(os.path.join(ref, n + ".npy"), a.detach().numpy())
        np.save(os.path.join(ref, n + "_grad.npy"), a.grad.numpy())
    g = onnx.load(path).graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    kind = type(rnn).__name__
    nodes = [n for n in g.node if n.op_type == kind]
    assert len(nodes) == rnn.num_layers
    for layer, node in enumerate(nodes):
        sfx = [f"_l{layer}", f"_l{layer}_reverse"][:2 if rnn.bidirectional else 1]

        def par(which):
            return [getattr(rnn, which + s) for s in sfx]

        want = {1: [gates(p, kind) for p in par("weight_ih")], 2: [gates(p, kind) for p in par("weight_hh")],
                3: [torch.cat([gates(a, kind), gates(b, kind)]) for a, b in zip(par("bias_ih"), par("bias_hh"))]}
        for slot, ps in want.items():
            iname = node.input[slot]
            assert np.array_equal(inits[iname], torch.stack(ps).detach().numpy()), (name, iname)
            grads = [gates(p.grad, kind) if slot < 3 else None for p in par(["weight_ih", "weight_hh"][slot - 1]
                                                                                 if slot < 3 else "bias_ih")]
            if slot == 3:
                grads = [torch.cat([gates(a.grad, kind), gates(b.grad, kind)])
                         for a, b in zip(par("bias_ih"), par("bias_hh"))]
            np.save(os.path.join(ref, iname + "_grad.npy"), torch.stack(grads).numpy())


def main():
    os.makedirs(os.path.join(HERE, "rnn_torch"), exist_ok=True)
    g = torch.Generator().manual_seed(0)
    f32, f64 = torch.float32, torch.float64
    case("lstm_bidir", torch.nn.LSTM(24, 32, bidirectional=True, batch_first=True), True,
         torch.randn(3, 10, 24, generator=g), 2, f32)
    case("gru", torch.nn.GRU(24, 32), False, torch.randn(10, 3, 24, generator=g), 1, f32)
    case("rnn_bidir", torch.nn.RNN(24, 32, bidirectional=True), False, torch.randn(10, 3, 24, generator=g), 2, f32)
    case("lstm2_f64", torch.nn.LSTM(8, 16, num_layers=2), True, torch.randn(6, 2, 8, generator=g, dtype=f64), 2, f64)
    grad_case("lstm_bidir", torch.nn.LSTM(24, 32, bidirectional=True, batch_first=True), True,
              torch.randn(3, 10, 24, generator=g), 2, f32)
    grad_case("gru", torch.nn.GRU(24, 32), False, torch.randn(10, 3, 24, generator=g), 1, f32)
    grad_case("rnn_bidir", torch.nn.RNN(24, 32, bidirectional=True), False, torch.randn(10, 3, 24, generator=g), 2,
              f32)
    grad_case("lstm2_f64", torch.nn.LSTM(8, 16, num_layers=2), True, torch.randn(6, 2, 8, generator=g, dtype=f64), 2,
              f64)


if __name__ == "__main__":
    main()
