#!/usr/bin/python3
"""Writes the binary files of graphdiet's malformed-input corpus (the YAML ones are hand-written).

    /usr/bin/python3 testdata/bad/gen_bad.py

Each file is broken in exactly one way; EXPECTED lists the error each must produce.
"""
import os

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))


def model(nodes, inputs, outputs, inits=(), value_info=()):
    g = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="gen_bad")


def vi(name, dtype=TensorProto.FLOAT, shape=(2,)):
    return helper.make_tensor_value_info(name, dtype, list(shape))


def save(name, m):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(m.SerializeToString())


def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def deep_nesting(levels):
    """If nodes nested `levels` deep, written at the wire level: onnx's helpers recurse too deeply."""
    g = ld(1, ld(1, b"c") + ld(2, b"y") + ld(4, b"Relu")) + ld(2, b"g")
    for _ in range(levels):
        attr = ld(1, b"then_branch") + varint(20 << 3) + varint(5) + ld(6, g)
        g = ld(1, ld(1, b"c") + ld(2, b"y") + ld(3, b"branch") + ld(4, b"If") + ld(5, attr)) + ld(2, b"g")
    return varint(1 << 3) + varint(8) + ld(7, g)


def main():
    mlp = open(os.path.join(HERE, "..", "mlp.onnx"), "rb").read()
    with open(os.path.join(HERE, "truncated.onnx"), "wb") as f:
        f.write(mlp[: len(mlp) // 2])
    with open(os.path.join(HERE, "garbage.onnx"), "wb") as f:
        f.write(bytes(range(7, 200)))
    open(os.path.join(HERE, "empty.onnx"), "wb").close()

    relu = lambda i, o, n: helper.make_node("Relu", [i], [o], name=n)
    save("cycle.onnx", model([relu("x", "a", "first"), relu("c", "b", "second"), relu("b", "c", "third"),
                              helper.make_node("Add", ["a", "c"], ["y"], name="join")], [vi("x")], [vi("y")]))
    save("dangling.onnx", model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")], [vi("x")], [vi("y")]))
    save("duplicate_producer.onnx", model([relu("x", "y", "one"), relu("x", "y", "two")], [vi("x")], [vi("y")]))
    save("unproduced_output.onnx", model([relu("x", "y", "r")], [vi("x")], [vi("y"), vi("ghost")]))
    save("unknown_dtype.onnx", model([relu("x", "y", "r")], [vi("x", 99)], [vi("y")]))
    save("overflow_dims.onnx", model([relu("x", "y", "r")], [vi("x", shape=(1 << 32, 1 << 32, 4))], [vi("y")]))
    save("wrong_arity.onnx", model([helper.make_node("Relu", ["x", "x"], ["y"], name="r")], [vi("x")], [vi("y")]))
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    w.dims[:] = [4, 4]  # 4 values for 16 elements
    save("short_initializer.onnx", model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                         [vi("x", shape=(4, 4))], [vi("y")], inits=[w]))
    ints = helper.make_tensor("w", TensorProto.FLOAT, [2], [1, 2])
    ints.ClearField("float_data")
    ints.int64_data.extend([1, 2])  # float32 elements in int64_data
    with open(os.path.join(HERE, "deep_nesting.onnx"), "wb") as f:
        f.write(deep_nesting(5000))
    level = "[{op: If, inputs: [c], outputs: [y], attrs: {then_branch: {type: graph, value: {nodes: "
    yaml = "graphdiet: 1\nopset: 17\nnodes: " + level * 100 + "[]" + "}}}}]" * 100 + "\n"
    with open(os.path.join(HERE, "deep_nesting.yaml"), "w") as f:
        f.write(yaml)
    # 200 KB of '[': libyaml's scanner is quadratic in flow nesting (81 s)
    with open(os.path.join(HERE, "deep_flow.yaml"), "w") as f:
        f.write("graphdiet: 1\nopset: 17\nnodes: " + "[" * 200000 + "\n")
    # 30 levels of If whose branches alias the level below: 2^30 subgraphs once expanded
    bomb = ["graphdiet: 1", "opset: 17", "inputs: [{name: c, dtype: bool, shape: []}]", "defs:",
            "  - &g0 {nodes: [{op: Identity, inputs: [c], outputs: [y]}], outputs: [{name: y}]}"]
    for i in range(1, 31):
        bomb.append("  - &g%d {nodes: [{op: If, inputs: [c], outputs: [y], attrs: {then_branch: {type: graph, "
                    "value: *g%d}, else_branch: {type: graph, value: *g%d}}}], outputs: [{name: y}]}" % (i, i - 1, i - 1))
    bomb.append("nodes: [{op: If, inputs: [c], outputs: [y], attrs: {then_branch: {type: graph, value: *g30}, "
                "else_branch: {type: graph, value: *g30}}}]")
    bomb.append("outputs: [{name: y}]")
    with open(os.path.join(HERE, "alias_bomb.yaml"), "w") as f:
        f.write("\n".join(bomb) + "\n")
    save("wrong_field_dtype.onnx", model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                         [vi("x")], [vi("y")], inits=[ints]))



def issue50_validate():
    """#50 validate: models the ONNX reader took whole that the checker now refuses."""
    relu = helper.make_node("LeakyRelu", ["x"], ["y"], name="r", alpha=0.1)
    relu.attribute.extend([helper.make_attribute("alpha", 0.2)])
    save("duplicate_attribute.onnx", model([relu], [vi("x")], [vi("y")]))
    red = helper.make_node("ReduceSum", ["x"], ["y"], name="sum")
    red.attribute.extend([helper.make_attribute("keepdims", "0")])  # a string, not an int
    save("keepdims_string.onnx", model([red], [vi("x")], [vi("y", shape=())]))
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])
    save("input_init_shape.onnx", model([helper.make_node("ReduceSum", ["w"], ["y"], name="sum", keepdims=0)],
                                        [vi("w", shape=(3,))], [vi("y", shape=())], inits=[w]))
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    m = model([helper.make_node("ReduceSum", ["w"], ["loss"], name="sum", keepdims=0),
               helper.make_node("Add", ["w", "w"], ["w_a"], name="double"),
               helper.make_node("Neg", ["w"], ["w_b"], name="neg")],
              [], [vi("loss", shape=()), vi("w_a"), vi("w_b")], inits=[w])
    ti = m.training_info.add()
    for v in ("w_a", "w_b"):
        b = ti.update_binding.add()
        b.key, b.value = "w", v
    save("update_binding_twice.onnx", m)


if __name__ == "__main__":
    main()
    issue50_validate()
