#!/usr/bin/python3
"""Writes testdata/ctrl/: small models of control flow (If, Loop, Scan), ONNX local functions, the
ai.onnx.preview.training optimizers and Slice-1, each with inputs and expected outputs computed
here with numpy (or PyTorch) apart from graphdiet, for tests/ops/ctrl.c. Run with Debian's python3
(onnx 1.12, torch 1.13): /usr/bin/python3 testdata/gen_ctrl.py"""
import os
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ctrl")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(47)


def save(name, model, inputs, outputs):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name + ".onnx"))
    for k, v in inputs.items():
        np.save(os.path.join(OUT, "%s.in.%s.npy" % (name, k)), v)
    for k, v in outputs.items():
        np.save(os.path.join(OUT, "%s.out.%s.npy" % (name, k)), v)


def vi(name, dt, shape):
    return h.make_tensor_value_info(name, dt, shape)


def const(name, arr):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.asarray(arr), name))


def model(graph, opset=13, extra=(), functions=()):
    imports = [h.make_opsetid("", opset)] + [h.make_opsetid(d, v) for d, v in extra]
    m = h.make_model(graph, opset_imports=imports, functions=list(functions))
    m.ir_version = 8
    return m


# If: y = x * 2 if c else x - 1, both branches reading x from the enclosing graph
x = rng.standard_normal((2, 3)).astype(np.float32)
then_g = h.make_graph([const("two", np.float32(2)), h.make_node("Mul", ["x", "two"], ["t"])], "then",
                      [], [vi("t", T.FLOAT, [2, 3])])
else_g = h.make_graph([const("one", np.float32(1)), h.make_node("Sub", ["x", "one"], ["e"])], "else",
                      [], [vi("e", T.FLOAT, [2, 3])])
g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "if",
                 [vi("c", T.BOOL, []), vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])])
save("if_true", model(g), {"c": np.array(True), "x": x}, {"y": x * 2})
save("if_false", model(g), {"c": np.array(False), "x": x}, {"y": x - 1})

# Loop: M trips of acc += x * i (outer x), scanning acc after each, with an If nested in the body
# that reads w two graphs up: s = acc if i is even else acc + w
w = rng.standard_normal((3,)).astype(np.float32)
x = rng.standard_normal((3,)).astype(np.float32)
even_g = h.make_graph([h.make_node("Identity", ["acc_new"], ["s_even"])], "even", [], [vi("s_even", T.FLOAT, [3])])
odd_g = h.make_graph([h.make_node("Add", ["acc_new", "w"], ["s_odd"])], "odd", [], [vi("s_odd", T.FLOAT, [3])])
body = h.make_graph([
    h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
    h.make_node("Mul", ["x", "fi"], ["xi"]),
    h.make_node("Add", ["acc", "xi"], ["acc_new"]),
    const("two", np.int64(2)),
    h.make_node("Div", ["i", "two"], ["half"]),
    h.make_node("Mul", ["half", "two"], ["twice"]),
    h.make_node("Equal", ["twice", "i"], ["is_even"]),
    h.make_node("If", ["is_even"], ["s"], then_branch=even_g, else_branch=odd_g),
    h.make_node("Identity", ["cond"], ["cond_out"]),
], "body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", T.FLOAT, [3])],
    [vi("cond_out", T.BOOL, []), vi("acc_new", T.FLOAT, [3]), vi("s", T.FLOAT, [3])])
g = h.make_graph([const("M", np.int64(4)), const("c0", np.bool_(True)),
                  h.make_node("Loop", ["M", "c0", "a0"], ["acc_final", "scan"], body=body)], "loop",
                 [vi("a0", T.FLOAT, [3]), vi("x", T.FLOAT, [3]), vi("w", T.FLOAT, [3])],
                 [vi("acc_final", T.FLOAT, [3]), vi("scan", T.FLOAT, [4, 3])])
a0 = rng.standard_normal((3,)).astype(np.float32)
acc, rows = a0.copy(), []
for i in range(4):
    acc = acc + x * np.float32(i)
    rows.append(acc if i % 2 == 0 else acc + w)
save("loop", model(g), {"a0": a0, "x": x, "w": w}, {"acc_final": acc, "scan": np.stack(rows)})

# Loop ended by its condition (no M): count up while i < 3 (body's condition), scanning i
body = h.make_graph([const("three", np.int64(3)), const("one", np.int64(1)), h.make_node("Add", ["i", "one"], ["i1"]),
                     h.make_node("Less", ["i1", "three"], ["go"]), h.make_node("Identity", ["i"], ["iv"])],
                    "count", [vi("i", T.INT64, []), vi("cond", T.BOOL, [])],
                    [vi("go", T.BOOL, []), vi("iv", T.INT64, [])])
g = h.make_graph([h.make_node("Loop", ["", "c"], ["ivs"], body=body)], "while",
                 [vi("c", T.BOOL, [])], [vi("ivs", T.INT64, [None])])
save("loop_while", model(g), {"c": np.array(True)}, {"ivs": np.array([0, 1, 2], np.int64)})

# Scan-9: a running sum over axis 1 read backwards, written along axis 1 (scan_output_axes)
sx = rng.standard_normal((2, 4, 3)).astype(np.float32)
body = h.make_graph([h.make_node("Add", ["st", "xs"], ["st_new"]), h.make_node("Identity", ["st_new"], ["ys"])],
                    "scan_body", [vi("st", T.FLOAT, [2, 3]), vi("xs", T.FLOAT, [2, 3])],
                    [vi("st_new", T.FLOAT, [2, 3]), vi("ys", T.FLOAT, [2, 3])])
g = h.make_graph([h.make_node("Scan", ["s0", "sx"], ["s_final", "ys"], body=body, num_scan_inputs=1,
                              scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1])],
                 "scan", [vi("s0", T.FLOAT, [2, 3]), vi("sx", T.FLOAT, [2, 4, 3])],
                 [vi("s_final", T.FLOAT, [2, 3]), vi("ys", T.FLOAT, [2, 4, 3])])
s0 = rng.standard_normal((2, 3)).astype(np.float32)
st, ys = s0.copy(), [None] * 4
for t in range(4):
    st = st + sx[:, 3 - t, :]
    ys[t] = st
save("scan", model(g, 16), {"s0": s0, "sx": sx}, {"s_final": st, "ys": np.stack(ys, axis=1)})

# Local functions: F1(a, b) = LeakyRelu(a + b, alpha=@alpha); F2(a) = -F1(a, a, alpha=0.5);
# y1 = F2(x), y2 = F1(x, z) with alpha 0.1, y3 = F1(x, z) without alpha (LeakyRelu's 0.01)
f1 = h.make_function("local", "F1", ["a", "b"], ["c"],
                     [h.make_node("Add", ["a", "b"], ["t"]),
                      h.make_node("LeakyRelu", ["t"], ["c"], alpha=0.0)],
                     [h.make_opsetid("", 13)], ["alpha"])
f1.node[1].attribute[0].ref_attr_name = "alpha"
f2 = h.make_function("local", "F2", ["a"], ["c"],
                     [h.make_node("F1", ["a", "a"], ["u"], domain="local", alpha=0.5), h.make_node("Neg", ["u"], ["c"])],
                     [h.make_opsetid("", 13), h.make_opsetid("local", 1)], [])
g = h.make_graph([h.make_node("F2", ["x"], ["y1"], domain="local", name="call2"),
                  h.make_node("F1", ["x", "z"], ["y2"], domain="local", alpha=0.1),
                  h.make_node("F1", ["x", "z"], ["y3"], domain="local")], "functions",
                 [vi("x", T.FLOAT, [2, 4]), vi("z", T.FLOAT, [2, 4])],
                 [vi("y1", T.FLOAT, [2, 4]), vi("y2", T.FLOAT, [2, 4]), vi("y3", T.FLOAT, [2, 4])])
fx = rng.standard_normal((2, 4)).astype(np.float32)
fz = rng.standard_normal((2, 4)).astype(np.float32)
lrelu = lambda v, a: np.where(v >= 0, v, v * np.float32(a)).astype(np.float32)
save("functions", model(g, 13, [("local", 1)], [f1, f2]), {"x": fx, "z": fz},
     {"y1": -lrelu(fx + fx, 0.5), "y2": lrelu(fx + fz, 0.1), "y3": lrelu(fx + fz, 0.01)})

# Slice-1 (opset 9): starts, ends and axes as attributes
sl = rng.standard_normal((4, 5)).astype(np.float32)
g = h.make_graph([h.make_node("Slice", ["x"], ["y"], starts=[1, -4], ends=[3, 100], axes=[0, 1])], "slice1",
                 [vi("x", T.FLOAT, [4, 5])], [vi("y", T.FLOAT, [2, 4])])
save("slice1", model(g, 9), {"x": sl}, {"y": sl[1:3, -4:]})

# ai.onnx.preview.training: Adam, Adagrad, Momentum (standard and nesterov) on two tensors each,
# their numbers from the operator documents' formulas
TR = "ai.onnx.preview.training"
p1 = rng.standard_normal((3,)).astype(np.float32)
p2 = rng.standard_normal((2, 2)).astype(np.float32)
g1 = rng.standard_normal((3,)).astype(np.float32)
g2 = rng.standard_normal((2, 2)).astype(np.float32)
m1 = rng.standard_normal((3,)).astype(np.float32)
m2 = rng.standard_normal((2, 2)).astype(np.float32)
v1 = np.abs(rng.standard_normal((3,))).astype(np.float32)
v2 = np.abs(rng.standard_normal((2, 2))).astype(np.float32)
R, Tn = np.float32(0.1), np.int64(3)
ins = {"R": R, "T": Tn, "X1": p1, "X2": p2, "G1": g1, "G2": g2}


def tmodel(op, names, outs, **attrs):
    node = h.make_node(op, names, outs, domain=TR, **attrs)
    shapes = {"R": [], "T": []}
    inputs = [vi(n, T.INT64 if n == "T" else T.FLOAT, shapes.get(n, list(ins_all[n].shape))) for n in names]
    outputs = [vi(o, T.FLOAT, list(ins_all[o.split("_")[0]].shape)) for o in outs]
    return model(h.make_graph([node], op.lower(), inputs, outputs), 13, [(TR, 1)])


def adam(r, t, x, g, v, hh, nc, ncp, alpha, beta, eps):
    gr = nc * x + g
    vn = alpha * v + (1 - alpha) * gr
    hn = beta * hh + (1 - beta) * gr * gr
    ra = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    return (1 - ncp) * (x - ra * (vn / (np.sqrt(hn) + eps))), vn, hn


ins_all = dict(ins, V1=m1, V2=m2, H1=v1, H2=v2)
names = ["R", "T", "X1", "X2", "G1", "G2", "V1", "V2", "H1", "H2"]
outs = ["X1_new", "X2_new", "V1_new", "V2_new", "H1_new", "H2_new"]
a1 = adam(R, Tn, p1, g1, m1, v1, 0.001, 0.01, 0.95, 0.99, 1e-5)
a2 = adam(R, Tn, p2, g2, m2, v2, 0.001, 0.01, 0.95, 0.99, 1e-5)
save("adam", tmodel("Adam", names, outs, alpha=0.95, beta=0.99, epsilon=1e-5, norm_coefficient=0.001,
                    norm_coefficient_post=0.01), {k: ins_all[k] for k in names},
     {"X1_new": a1[0], "X2_new": a2[0], "V1_new": a1[1], "V2_new": a2[1], "H1_new": a1[2], "H2_new": a2[2]})


def adagrad(r, t, x, g, hh, nc, eps, decay):
    rr = r / (1 + t * decay)
    gr = nc * x + g
    hn = hh + gr * gr
    return x - rr * gr / (np.sqrt(hn) + eps), hn


names = ["R", "T", "X1", "X2", "G1", "G2", "H1", "H2"]
outs = ["X1_new", "X2_new", "H1_new", "H2_new"]
b1 = adagrad(R, Tn, p1, g1, v1, 0.001, 1e-5, 0.1)
b2 = adagrad(R, Tn, p2, g2, v2, 0.001, 1e-5, 0.1)
save("adagrad", tmodel("Adagrad", names, outs, epsilon=1e-5, decay_factor=0.1, norm_coefficient=0.001),
     {k: ins_all[k] for k in names}, {"X1_new": b1[0], "X2_new": b2[0], "H1_new": b1[1], "H2_new": b2[1]})


def momentum(r, t, x, g, v, nc, alpha, beta, nesterov):
    gr = nc * x + g
    vn = alpha * v + (beta if t > 0 else 1) * gr
    return (x - r * (gr + alpha * vn) if nesterov else x - r * vn), vn


names = ["R", "T", "X1", "X2", "G1", "G2", "V1", "V2"]
outs = ["X1_new", "X2_new", "V1_new", "V2_new"]
for mode in ("standard", "nesterov"):
    c1 = momentum(R, Tn, p1, g1, m1, 0.001, 0.9, 0.8, mode == "nesterov")
    c2 = momentum(R, Tn, p2, g2, m2, 0.001, 0.9, 0.8, mode == "nesterov")
    save("momentum_" + mode, tmodel("Momentum", names, outs, alpha=0.9, beta=0.8, mode=mode, norm_coefficient=0.001),
         {k: ins_all[k] for k in names}, {"X1_new": c1[0], "X2_new": c2[0], "V1_new": c1[1], "V2_new": c2[1]})

# A loss that reaches its parameter wp through a Loop that is not unrolled (its body has an If) and
# directly: train refuses it (control flow is not differentiated) rather than give wp the direct
# path's gradient alone
g = onnx.load(os.path.join(OUT, "loop.onnx")).graph
g.initializer.append(nh.from_array(np.ones(3, np.float32), "wp"))
g.node.insert(0, h.make_node("Mul", ["x", "wp"], ["xw"]))
g.node[-1].input[2] = "xw"
g.node.append(h.make_node("ReduceSum", ["scan"], ["l1"], keepdims=0))
g.node.append(h.make_node("ReduceSum", ["wp"], ["l2"], keepdims=0))
g.node.append(h.make_node("Add", ["l1", "l2"], ["loss"]))
del g.output[:]
g.output.append(vi("loss", T.FLOAT, []))
onnx.save(model(g), os.path.join(OUT, "loss_through_loop.onnx"))

# A loss through a Loop of constant count 3 (its body plain: unrolled before autodiff) and an If
# whose condition is a constant (its taken branch inlined): both read the parameters wp and wq from
# the enclosing graph; train differentiates them (tests/ops/ctrl.c checks with verify --gradcheck)
body = h.make_graph([h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT), h.make_node("Mul", ["acc", "wp"], ["t"]),
                     h.make_node("Add", ["t", "fi"], ["u"]), h.make_node("Tanh", ["u"], ["acc_new"]),
                     h.make_node("Identity", ["cond"], ["cond_out"]), h.make_node("Identity", ["acc_new"], ["s"])],
                    "plain_body", [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", T.FLOAT, [2, 3])],
                    [vi("cond_out", T.BOOL, []), vi("acc_new", T.FLOAT, [2, 3]), vi("s", T.FLOAT, [2, 3])])
then_g = h.make_graph([h.make_node("Mul", ["acc_final", "wq"], ["tb"])], "then", [], [vi("tb", T.FLOAT, [2, 3])])
else_g = h.make_graph([h.make_node("Neg", ["acc_final"], ["eb"])], "else", [], [vi("eb", T.FLOAT, [2, 3])])
g = h.make_graph([const("M", np.int64(3)), const("c0", np.bool_(True)), const("pick", np.bool_(True)),
                  h.make_node("Loop", ["M", "c0", "x"], ["acc_final", "scan"], body=body),
                  h.make_node("If", ["pick"], ["y"], then_branch=then_g, else_branch=else_g),
                  h.make_node("Mul", ["scan", "scan"], ["sq"]), h.make_node("ReduceSum", ["sq"], ["l1"], keepdims=0),
                  h.make_node("ReduceSum", ["y"], ["l2"], keepdims=0), h.make_node("Add", ["l1", "l2"], ["loss"])],
                 "loop_train", [vi("x", T.FLOAT, [2, 3])], [vi("loss", T.FLOAT, [])],
                 [nh.from_array(rng.standard_normal((3,)).astype(np.float32), "wp"),
                  nh.from_array(rng.standard_normal((3,)).astype(np.float32), "wq")])
onnx.save(model(g), os.path.join(OUT, "loop_train.onnx"))

# nn.EmbeddingBag(mode="mean") as PyTorch 1.13 exports it: a Loop over the bags, each a Slice of the
# indices by offsets (data), gathered and averaged; the expected bags from PyTorch itself
import torch


class Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.e = torch.nn.EmbeddingBag(10, 4, mode="mean")

    def forward(self, idx, off):
        return self.e(idx, off)


bag = Bag()
idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
off = torch.tensor([0, 3, 7])
path = os.path.join(OUT, "embedding_bag.onnx")
torch.onnx.export(bag, (idx, off), path, input_names=["idx", "off"], output_names=["bags"], opset_version=13,
                  do_constant_folding=False)
with torch.no_grad():
    want = bag(idx, off).numpy()
for k, v in {"idx": idx.numpy(), "off": off.numpy()}.items():
    np.save(os.path.join(OUT, "embedding_bag.in.%s.npy" % k), v)
np.save(os.path.join(OUT, "embedding_bag.out.bags.npy"), want)

# ai.onnx.preview.training's Gradient (the runtime differentiates): refused when run
g = h.make_graph([h.make_node("Add", ["a", "b"], ["c"]),
                  h.make_node("Gradient", ["a", "b"], ["dc_da", "dc_db"], domain=TR, xs=["a", "b"], y="c")],
                 "gradient", [vi("a", T.FLOAT, [2]), vi("b", T.FLOAT, [2])],
                 [vi("c", T.FLOAT, [2]), vi("dc_da", T.FLOAT, [2]), vi("dc_db", T.FLOAT, [2])])
onnx.save(model(g, 13, [(TR, 1)]), os.path.join(OUT, "gradient_op.onnx"))

# Malformed control flow and functions, each refused with exit 2 naming the node (tests/ops/ctrl.c)
body = h.make_graph([h.make_node("Identity", ["cond"], ["c2"])], "short_body",
                    [vi("i", T.INT64, []), vi("cond", T.BOOL, [])], [vi("c2", T.BOOL, [])])
g = h.make_graph([const("M", np.int64(2)), h.make_node("Loop", ["M", "", "a"], ["b"], body=body)], "bad_loop",
                 [vi("a", T.FLOAT, [2])], [vi("b", T.FLOAT, [2])])
onnx.save(model(g), os.path.join(OUT, "bad_loop_arity.onnx"))
two = h.make_graph([h.make_node("Identity", ["x"], ["p"]), h.make_node("Identity", ["x"], ["q"])], "two", [],
                   [vi("p", T.FLOAT, [2]), vi("q", T.FLOAT, [2])])
g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=two, else_branch=two)], "bad_if",
                 [vi("c", T.BOOL, []), vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])])
onnx.save(model(g), os.path.join(OUT, "bad_if_outputs.onnx"))
body = h.make_graph([h.make_node("Add", ["u", "v"], ["w"])], "pair",
                    [vi("u", T.FLOAT, [2]), vi("v", T.FLOAT, [2])], [vi("w", T.FLOAT, [2])])
g = h.make_graph([h.make_node("Scan", ["s1", "s2"], ["w"], body=body, num_scan_inputs=2)], "bad_scan",
                 [vi("s1", T.FLOAT, [3, 2]), vi("s2", T.FLOAT, [4, 2])], [vi("w", T.FLOAT, [3, 2])])
onnx.save(model(g, 16), os.path.join(OUT, "bad_scan_lengths.onnx"))
rec = h.make_function("local", "R", ["a"], ["b"], [h.make_node("R", ["a"], ["b"], domain="local")],
                      [h.make_opsetid("", 13), h.make_opsetid("local", 1)], [])
g = h.make_graph([h.make_node("R", ["x"], ["y"], domain="local")], "recursive", [vi("x", T.FLOAT, [2])],
                 [vi("y", T.FLOAT, [2])])
m = model(g, 13, [("local", 1)], [rec])
onnx.save(m, os.path.join(OUT, "bad_recursive_function.onnx"))

# A local function's attribute default (FunctionProto.attribute_proto, field 11, from ONNX 1.13: the
# onnx 1.12 here has no field for it, so its bytes are appended and kept as an unknown field):
# D(a) = LeakyRelu(a, alpha=@alpha) with alpha 0.3 by default; y1 = D(x), y2 = D(x, alpha=0.2)
fd = h.make_function("local", "D", ["a"], ["b"], [h.make_node("LeakyRelu", ["a"], ["b"], alpha=0.0)],
                     [h.make_opsetid("", 13)], [])
fd.node[0].attribute[0].ref_attr_name = "alpha"
default = h.make_attribute("alpha", 0.3).SerializeToString()
raw = fd.SerializeToString() + bytes([11 << 3 | 2, len(default)]) + default
fd = onnx.FunctionProto.FromString(raw)
g = h.make_graph([h.make_node("D", ["x"], ["y1"], domain="local"),
                  h.make_node("D", ["x"], ["y2"], domain="local", alpha=0.2)], "defaults",
                 [vi("x", T.FLOAT, [2, 4])], [vi("y1", T.FLOAT, [2, 4]), vi("y2", T.FLOAT, [2, 4])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("local", 1)], functions=[fd])
m.ir_version = 8
onnx.save(m, os.path.join(OUT, "function_default.onnx"))
np.save(os.path.join(OUT, "function_default.in.x.npy"), fx)
np.save(os.path.join(OUT, "function_default.out.y1.npy"), lrelu(fx, 0.3))
np.save(os.path.join(OUT, "function_default.out.y2.npy"), lrelu(fx, 0.2))
