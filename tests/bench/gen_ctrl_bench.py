#!/usr/bin/python3
"""Loop and Scan models for run_ctrl.sh: M iterations of acc = tanh(acc * w + x) on D floats (w, x
read from the enclosing graph), each iteration's acc stacked as a scan output; and the same
recurrence as a Scan over an [M, D] sequence.
  /usr/bin/python3 tests/bench/gen_ctrl_bench.py OUTDIR M D"""
import os
import sys
import numpy as np
import onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh

out, M, D = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out, exist_ok=True)
vi = h.make_tensor_value_info
rng = np.random.default_rng(0)
body = h.make_graph([h.make_node("Mul", ["acc", "w"], ["t"]), h.make_node("Add", ["t", "x"], ["u"]),
                     h.make_node("Tanh", ["u"], ["acc_new"]), h.make_node("Identity", ["cond"], ["cond_out"]),
                     h.make_node("Identity", ["acc_new"], ["s"])], "body",
                    [vi("i", T.INT64, []), vi("cond", T.BOOL, []), vi("acc", T.FLOAT, [D])],
                    [vi("cond_out", T.BOOL, []), vi("acc_new", T.FLOAT, [D]), vi("s", T.FLOAT, [D])])
g = h.make_graph([h.make_node("Loop", ["M", "", "a0"], ["acc_final", "scan"], body=body)], "loop",
                 [vi("a0", T.FLOAT, [D]), vi("x", T.FLOAT, [D])], [vi("acc_final", T.FLOAT, [D]), vi("scan", T.FLOAT, [M, D])],
                 [nh.from_array(np.array(M, np.int64), "M"), nh.from_array(rng.standard_normal(D).astype(np.float32), "w")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, os.path.join(out, "loop.onnx"))
body = h.make_graph([h.make_node("Mul", ["acc", "w"], ["t"]), h.make_node("Add", ["t", "xs"], ["u"]),
                     h.make_node("Tanh", ["u"], ["acc_new"]), h.make_node("Identity", ["acc_new"], ["s"])], "body",
                    [vi("acc", T.FLOAT, [D]), vi("xs", T.FLOAT, [D])], [vi("acc_new", T.FLOAT, [D]), vi("s", T.FLOAT, [D])])
g = h.make_graph([h.make_node("Scan", ["a0", "xseq"], ["acc_final", "scan"], body=body, num_scan_inputs=1)], "scan",
                 [vi("a0", T.FLOAT, [D]), vi("xseq", T.FLOAT, [M, D])],
                 [vi("acc_final", T.FLOAT, [D]), vi("scan", T.FLOAT, [M, D])],
                 [nh.from_array(rng.standard_normal(D).astype(np.float32), "w")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 16)])
m.ir_version = 8
onnx.save(m, os.path.join(out, "scan.onnx"))
np.save(os.path.join(out, "a0.npy"), rng.standard_normal(D).astype(np.float32))
np.save(os.path.join(out, "x.npy"), rng.standard_normal(D).astype(np.float32))
np.save(os.path.join(out, "xseq.npy"), rng.standard_normal((M, D)).astype(np.float32))
