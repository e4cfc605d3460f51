#!/usr/bin/python3
"""Attention-23's forward kernel against onnxruntime 1.30 (CPU, 1 thread each) on the same model and
inputs: one 4-D causal grouped-query Attention node (B 1, 32 query heads, 8 key/value heads, head 128,
LLaMA's shapes) at sequence lengths 256 and 1024; and RMSNormalization over (seq, 4096).
Prints a table: graphdiet's median run, onnxruntime's, the ratio.

    /usr/bin/python3 tests/bench/run_attention.py [build] [ort node_modules]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

build = sys.argv[1] if len(sys.argv) > 1 else 'build'
ort_dir = sys.argv[2] if len(sys.argv) > 2 else '/work/main/build/ort/node_modules'
here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)


def save(path, node, ins):
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in ins.items()]
    g = helper.make_graph([node], 'b', vi, [helper.make_tensor_value_info('y', TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 23)])
    m.ir_version = 10
    onnx.save(m, path)


def ours(model, feeds, n=5):
    t = []
    for _ in range(n):
        r = subprocess.run([os.path.join(build, 'graphdiet'), '--threads', '1', 'run', model, '--format', 'json'] +
                           [a for k, v in feeds.items() for a in ('--input', f'{k}={v}')], capture_output=True, text=True, check=True)
        t.append(float(r.stdout.split('"seconds": ')[1].split(',')[0]))
    return float(np.median(t))


def theirs(model, feeds, n=5):
    r = subprocess.run(['node', os.path.join(here, '..', 'ort', 'time_ort.cjs'), model, str(n), '1'] +
                       [f'{k}={v}' for k, v in feeds.items()], capture_output=True, text=True, check=True,
                       env=dict(os.environ, NODE_PATH=ort_dir))
    return float(r.stdout.split()[1])


print('| case | graphdiet (s) | onnxruntime (s) | ratio |\n|---|---|---|---|')
with tempfile.TemporaryDirectory() as d:
    cases = []
    for seq in (256, 1024):
        ins = {'q': rng.standard_normal((1, 32, seq, 128)), 'k': rng.standard_normal((1, 8, seq, 128)),
               'v': rng.standard_normal((1, 8, seq, 128))}
        cases.append((f'Attention causal GQA 32/8 heads, seq {seq}',
                      helper.make_node('Attention', ['q', 'k', 'v'], ['y'], is_causal=1), ins))
    for seq in (256, 1024):
        ins = {'x': rng.standard_normal((1, seq, 4096)), 's': rng.standard_normal(4096)}
        cases.append((f'RMSNormalization (1, {seq}, 4096)', helper.make_node('RMSNormalization', ['x', 's'], ['y']), ins))
    for i, (name, node, ins) in enumerate(cases):
        ins = {k: v.astype(np.float32) for k, v in ins.items()}
        model = os.path.join(d, f'{i}.onnx')
        save(model, node, ins)
        feeds = {}
        for k, v in ins.items():
            feeds[k] = os.path.join(d, f'{i}_{k}.npy')
            np.save(feeds[k], v)
        a, b = ours(model, feeds), theirs(model, feeds)
        print(f'| {name} | {a:.4f} | {b:.4f} | {a / b:.2f} |')
