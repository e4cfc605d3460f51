#!/usr/bin/python3
"""Writes testdata/ops_rnnform.h: forward cases for Det (numpy.linalg.det) and for the recurrent
forms issue 47 added (layout 1, LSTM peepholes, sequence_lens), their expected outputs from the
straightforward NumPy reading of the ONNX spec's equations below, apart from graphdiet's kernels.

    /usr/bin/python3 testdata/ops_rnnform.py > testdata/ops_rnnform.h

Each case is one graph: its params as YAML data (float64), its nodes, and y's shape and values.
The recurrent cases flatten every output into one row y = [Y, Y_h(, Y_c)]."""
import numpy as np

rng = np.random.default_rng(47)


def sig(v):
    return 1 / (1 + np.exp(-v))


def yaml_param(name, a, dtype="float64"):
    a = np.asarray(a)
    data = ", ".join(repr(int(v)) if a.dtype.kind == "i" else repr(float(v)) for v in a.ravel())
    return '  - {name: %s, dtype: %s, shape: [%s], data: [%s]}\\n' % (
        name, dtype, ", ".join(str(d) for d in a.shape), data)


def recurrent(cell, X, W, R, B, lens, h0, c0, P, direction, layout, lbr=0):
    """ONNX's RNN/GRU/LSTM with default activations; X, h0, c0 and the results in the node's layout."""
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    T, Bn, _ = X.shape
    D, H = W.shape[0], R.shape[2]
    Y = np.zeros((T, D, Bn, H))
    Yh = np.zeros((D, Bn, H))
    Yc = np.zeros((D, Bn, H))
    for d in range(D):
        back = direction == "reverse" or d == 1
        Wb, Rb = np.split(B[d], 2) if B is not None else (np.zeros(W.shape[1]), np.zeros(W.shape[1]))
        for b in range(Bn):
            L = T if lens is None else lens[b]
            h = np.zeros(H) if h0 is None else h0[d, b].copy()
            c = np.zeros(H) if c0 is None else c0[d, b].copy()
            for s in range(L):
                t = L - 1 - s if back else s
                x = X[t, b]
                if cell == "LSTM":
                    g = W[d] @ x + R[d] @ h + Wb + Rb
                    gi, go, gf, gc = np.split(g, 4)
                    pi, po, pf = np.split(P[d], 3) if P is not None else (0, 0, 0)
                    i = sig(gi + pi * c)
                    f = sig(gf + pf * c)
                    c = f * c + i * np.tanh(gc)
                    o = sig(go + po * c)
                    h = o * np.tanh(c)
                elif cell == "GRU":
                    Wz, Wr, Wh = np.split(W[d], 3)
                    Rz, Rr, Rh = np.split(R[d], 3)
                    Wbz, Wbr, Wbh = np.split(Wb, 3)
                    Rbz, Rbr, Rbh = np.split(Rb, 3)
                    z = sig(Wz @ x + Rz @ h + Wbz + Rbz)
                    r = sig(Wr @ x + Rr @ h + Wbr + Rbr)
                    if lbr:
                        hh = np.tanh(Wh @ x + r * (Rh @ h + Rbh) + Wbh)
                    else:
                        hh = np.tanh(Wh @ x + Rh @ (r * h) + Rbh + Wbh)
                    h = (1 - z) * hh + z * h
                else:
                    h = np.tanh(W[d] @ x + R[d] @ h + Wb + Rb)
                Y[t, d, b] = h
            if L > 0:  # a zero-length row's are zeros, as onnxruntime gives (the spec is silent)
                Yh[d, b] = h
                Yc[d, b] = c
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, Yc


cases = []


def det_case(name, x, dtype="float64"):
    x = np.asarray(x, dtype=np.float64)
    want = np.linalg.det(x)
    cases.append((name, yaml_param("x", x, dtype), "  - {op: Det, inputs: [x], outputs: [y]}\\n", want))


det_case("Det 3 x 3, batch of 2", rng.normal(size=(2, 3, 3)))
det_case("Det (2, 2, 4, 4)", rng.normal(size=(2, 2, 4, 4)))
det_case("Det singular by roundoff", [[1, 2, 3], [4, 5, 6], [7, 8, 9]])
det_case("Det exactly singular", [[1, 2], [2, 4]])
det_case("Det 1 x 1", [[[-2.5]], [[0.75]]])
det_case("Det needing a row swap", [[0, 1, 2], [3, 0, 1], [1, 1, 0]])
det_case("Det float32", np.round(rng.normal(size=(3, 3)), 3), "float32")


def rnn_case(name, cell, T, Bn, I, H, direction="forward", layout=0, lens=None, init=False, peep=False, bias=True, lbr=0):
    D = 2 if direction == "bidirectional" else 1
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[cell]
    X = rng.normal(size=(Bn, T, I) if layout else (T, Bn, I))
    W = rng.normal(size=(D, G * H, I)) * 0.5
    R = rng.normal(size=(D, G * H, H)) * 0.5
    B = rng.normal(size=(D, 2 * G * H)) * 0.5 if bias else None
    sshape = (Bn, D, H) if layout else (D, Bn, H)
    h0 = rng.normal(size=sshape) if init else None
    c0 = rng.normal(size=sshape) if init and cell == "LSTM" else None
    P = rng.normal(size=(D, 3 * H)) if peep else None
    Y, Yh, Yc = recurrent(cell, X, W, R, B, lens, h0, c0, P, direction, layout, lbr)
    params = yaml_param("x", X) + yaml_param("w", W) + yaml_param("r", R)
    ins = ["x", "w", "r", "b" if bias else '\\"\\"', '\\"\\"']
    if bias:
        params += yaml_param("b", B)
    if lens is not None:
        params += yaml_param("sl", np.array(lens), "int32")
        ins[4] = "sl"
    if init:
        params += yaml_param("h0", h0)
        ins.append("h0")
        if cell == "LSTM":
            params += yaml_param("c0", c0)
            ins.append("c0")
    if peep:
        ins += ['\\"\\"'] * (7 - len(ins)) + ["p"]
        params += yaml_param("p", P)
    while ins[-1] == '\\"\\"':
        ins.pop()
    outs = ["ro", "rh", "rc"] if cell == "LSTM" else ["ro", "rh"]
    attrs = "hidden_size: %d, direction: %s, layout: %d" % (H, direction, layout)
    if cell == "GRU":
        attrs += ", linear_before_reset: %d" % lbr
    nodes = "  - {op: %s, inputs: [%s], outputs: [%s], attrs: {%s}}\\n" % (cell, ", ".join(ins), ", ".join(outs), attrs)
    flat = []
    for o in outs:
        nodes += "  - {op: Flatten, inputs: [%s], outputs: [f%s], attrs: {axis: 0}}\\n" % (o, o)
        flat.append("f" + o)
    nodes += "  - {op: Concat, inputs: [%s], outputs: [y], attrs: {axis: 1}}\\n" % ", ".join(flat)
    want = np.concatenate([v.ravel() for v in (Y, Yh, Yc)[:len(outs)]])[None, :]
    cases.append((name, params, nodes, want))


rnn_case("LSTM peepholes, bidirectional, sequence_lens, initial states", "LSTM", 4, 3, 2, 3, "bidirectional",
         lens=[4, 2, 1], init=True, peep=True)
rnn_case("LSTM layout 1, reverse, peepholes", "LSTM", 3, 2, 3, 2, "reverse", layout=1, peep=True, init=True)
rnn_case("GRU layout 1, reverse, sequence_lens", "GRU", 3, 2, 2, 3, "reverse", layout=1, lens=[2, 3], init=True)
rnn_case("GRU layout 1, bidirectional, linear_before_reset", "GRU", 3, 2, 2, 2, "bidirectional", layout=1, lbr=1)
rnn_case("RNN layout 1, bidirectional, initial state", "RNN", 3, 2, 2, 3, "bidirectional", layout=1, init=True)
rnn_case("RNN sequence_lens with a zero length", "RNN", 3, 3, 2, 2, lens=[3, 0, 2], init=True, bias=False)

print("/* ops_rnnform.h - written by testdata/ops_rnnform.py (NumPy %s): do not edit. */" % np.__version__)
for k, (name, params, nodes, want) in enumerate(cases):
    print("static const double rnnform_want_%d[] = {%s};" % (k, ", ".join(repr(float(v)) for v in np.ravel(want))))
print("static const struct rnnform_case rnnform_cases[] = {")
for k, (name, params, nodes, want) in enumerate(cases):
    want = np.asarray(want)
    print('\t{"%s", "%s", "%s", %d, {%s}, rnnform_want_%d},' % (
        name, params, nodes, want.ndim, ", ".join(str(d) for d in want.shape) or "0", k))
print("};")
