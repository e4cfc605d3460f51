#!/usr/bin/python3
"""gen_attrs.py - writes attrs.def, the attribute types and allowed values of the ops in ops.def.

Types come from ONNX's own operator schemas (python3-onnx, every opset version of each op: the union,
so an attribute an older opset had keeps its type), plus NEWER below for what opsets past the
installed onnx's added. String attributes that name one of a fixed set of modes get their allowed
values from ENUMS (the ONNX operator documents list them only in prose). graphdiet's own ops
(graphdiet-train(1)) have none: their attributes are not checked.

Run from the repository root: /usr/bin/python3 src/ops/gen_attrs.py > src/ops/attrs.def
"""
import re
import sys

import onnx.defs

# Attributes of opsets newer than python3-onnx 1.12 knows (18-23), by op.
NEWER = {
    "Gelu": {"approximate": "STRING"},
    "GroupNormalization": {"epsilon": "FLOAT", "num_groups": "INT", "stash_type": "INT"},
    "RMSNormalization": {"axis": "INT", "epsilon": "FLOAT", "stash_type": "INT"},
    "RotaryEmbedding": {"interleaved": "INT", "num_heads": "INT", "rotary_embedding_dim": "INT"},
    "Attention": {"is_causal": "INT", "kv_num_heads": "INT", "q_num_heads": "INT",
                  "qk_matmul_output_mode": "INT", "scale": "FLOAT", "softcap": "FLOAT",
                  "softmax_precision": "INT"},
    "Resize": {"antialias": "INT", "axes": "INTS", "keep_aspect_ratio_policy": "STRING"},
    "Split": {"num_outputs": "INT"},
    "LpPool": {"ceil_mode": "INT", "dilations": "INTS"},
    "AveragePool": {"dilations": "INTS"},
    "Cast": {"saturate": "INT"},
    "QuantizeLinear": {"saturate": "INT", "block_size": "INT", "output_dtype": "INT"},
    "DequantizeLinear": {"block_size": "INT"},
}

AUTO_PAD = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]
RNN_DIRECTION = ["forward", "reverse", "bidirectional"]
RNN_ACTIVATIONS = ["Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
                   "HardSigmoid", "Elu", "Softsign", "Softplus"]
SCATTER_REDUCTION = ["none", "add", "mul", "max", "min"]
LOSS_REDUCTION = ["none", "sum", "mean"]
# Allowed values of string attributes (each item of a strings one), as the ONNX operator documents
# list them over opsets 7-23.
ENUMS = {
    ("Conv", "auto_pad"): AUTO_PAD,
    ("ConvTranspose", "auto_pad"): AUTO_PAD,
    ("ConvInteger", "auto_pad"): AUTO_PAD,
    ("QLinearConv", "auto_pad"): AUTO_PAD,
    ("MaxPool", "auto_pad"): AUTO_PAD,
    ("AveragePool", "auto_pad"): AUTO_PAD,
    ("LpPool", "auto_pad"): AUTO_PAD,
    ("LSTM", "direction"): RNN_DIRECTION,
    ("GRU", "direction"): RNN_DIRECTION,
    ("RNN", "direction"): RNN_DIRECTION,
    ("LSTM", "activations"): RNN_ACTIVATIONS,
    ("GRU", "activations"): RNN_ACTIVATIONS,
    ("RNN", "activations"): RNN_ACTIVATIONS,
    ("Pad", "mode"): ["constant", "reflect", "edge", "wrap"],
    ("Resize", "mode"): ["nearest", "linear", "cubic", "bilinear"],
    ("Upsample", "mode"): ["nearest", "linear", "bilinear"],
    ("Resize", "coordinate_transformation_mode"): [
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
        "tf_half_pixel_for_nn", "tf_crop_and_resize"],
    ("Resize", "nearest_mode"): ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"],
    ("Resize", "keep_aspect_ratio_policy"): ["stretch", "not_larger", "not_smaller"],
    ("GridSample", "mode"): ["bilinear", "nearest", "bicubic", "linear", "cubic"],
    ("GridSample", "padding_mode"): ["zeros", "border", "reflection"],
    ("Gelu", "approximate"): ["none", "tanh"],
    ("ScatterElements", "reduction"): SCATTER_REDUCTION,
    ("ScatterND", "reduction"): SCATTER_REDUCTION,
    ("DepthToSpace", "mode"): ["DCR", "CRD"],
    ("BitShift", "direction"): ["LEFT", "RIGHT"],
    ("RoiAlign", "mode"): ["avg", "max"],
    ("RoiAlign", "coordinate_transformation_mode"): ["half_pixel", "output_half_pixel"],
    ("NegativeLogLikelihoodLoss", "reduction"): LOSS_REDUCTION,
    ("SoftmaxCrossEntropyLoss", "reduction"): LOSS_REDUCTION,
    ("Momentum", "mode"): ["standard", "nesterov"],
}


def main():
    ops = []
    for line in open("src/ops/ops.def"):
        m = re.match(r'OP\((\w+),\s*"(\w+)",\s*"([\w.]*)"', line)
        if m:
            ops.append(m.groups())
    types = {}
    for s in onnx.defs.get_all_schemas_with_history():
        for name, a in s.attributes.items():
            t = str(a.type).split(".")[-1]
            types.setdefault((s.domain, s.name), {}).setdefault(name, set()).add(t)
    for op, attrs in NEWER.items():
        for name, t in attrs.items():
            types.setdefault(("", op), {}).setdefault(name, set()).add(t)
    seen = set()
    out = sys.stdout
    out.write("/* attrs.def - the type of each attribute of an op in ops.def, and the values a string one may\n"
              " * take. Written by gen_attrs.py (which says where each comes from): edit that, not this.\n"
              " *\n"
              " * ATTR(op id, attribute name, enum attr_type, allowed values separated by '|' or NULL)\n"
              " *   rows of one op are together; an attribute ONNX typed two ways over its opsets has a row\n"
              " *   per type. graph_check (ir/check.c) refuses a node whose attribute has another type or\n"
              " *   value; attributes not listed are not checked. */\n")
    for op_id, name, domain in ops:
        for attr, ts in sorted(types.get((domain, name), {}).items()):
            for t in sorted(ts):
                vals = ENUMS.get((name, attr))
                seen.add((name, attr))
                enum = '"%s"' % "|".join(vals) if vals else "NULL"
                out.write('ATTR(%s, "%s", ATTR_%s, %s)\n' % (op_id, attr, t, enum))
    missing = set(ENUMS) - seen
    ops_known = {n for _, n, _ in ops}
    missing = {k for k in missing if k[0] in ops_known}
    if missing:
        sys.exit("gen_attrs.py: ENUMS names attributes no op has: %s" % sorted(missing))


main()
