#!/usr/bin/python3
"""Small models using the ops PyTorch 2.9's dynamo exporter writes at opset 18-23 (Gelu-20, Mish-18,
GroupNormalization-21, RMSNormalization-23, Attention-23, RotaryEmbedding-23), built by hand with
onnx.helper (torch 1.13 cannot export them; python3-onnx 1.12 does not know their schemas, so the
checker is not run). Each has one float32 output `y` and no loss: tests train them with
--loss-fn mse. The inputs (and a target for the loss) go to ref/<model>/<input>.npy for tests that
run them in onnxruntime.

    /usr/bin/python3 testdata/gen_opset23.py [OUTDIR]   (default: testdata/opset23)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(23)


def w(name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def model(name, nodes, inits, inputs, out, opset=23):
    """Writes OUTDIR/<name>.onnx: `inputs` maps each input name to its (float32) value; y has shape out."""
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in inputs.items()]
    g = helper.make_graph(nodes, name, vi, [helper.make_tensor_value_info('y', TensorProto.FLOAT, out)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', opset)], producer_name='gen_opset23')
    m.ir_version = 10
    save(m, os.path.join(OUT, name + '.onnx'))
    ref = os.path.join(HERE, 'ref', name)
    os.makedirs(ref, exist_ok=True)
    for k, v in inputs.items():
        np.save(os.path.join(ref, k + '.npy'), v)
    # train --loss-fn mse's target, for running the training graph
    np.save(os.path.join(ref, 'target.npy'), rng.standard_normal(out).astype(np.float32))


def rope_caches(positions, half):
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    ang = np.arange(positions)[:, None] * inv[None, :]
    return (numpy_helper.from_array(np.cos(ang).astype(np.float32), 'cos'),
            numpy_helper.from_array(np.sin(ang).astype(np.float32), 'sin'))


def x(*shape):
    return {'x': rng.standard_normal(shape).astype(np.float32)}


mm = helper.make_node

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, 'opset23')
os.makedirs(OUT, exist_ok=True)

# GroupNormalization-21 (per-channel scale and bias) after a 1x1 convolution
model('opset23_groupnorm',
      [mm('Conv', ['x', 'cw'], ['c']),
       mm('GroupNormalization', ['c', 'gs', 'gb'], ['y'], num_groups=3, epsilon=1e-5)],
      [w('cw', 6, 4, 1, 1), w('gs', 6, scale=1.0), w('gb', 6)], x(2, 4, 3, 3), (2, 6, 3, 3))

# RMSNormalization-23 before a projection
model('opset23_rmsnorm',
      [mm('RMSNormalization', ['x', 'rs'], ['h'], axis=-1, epsilon=1e-6),
       mm('MatMul', ['h', 'wo'], ['y'])],
      [w('rs', 8, scale=1.0), w('wo', 8, 8)], x(2, 4, 8), (2, 4, 8))

# Gelu-20 (tanh approximation) and Mish-18 between projections
model('opset23_gelu',
      [mm('MatMul', ['x', 'w1'], ['a']), mm('Gelu', ['a'], ['b'], approximate='tanh'), mm('MatMul', ['b', 'w2'], ['y'])],
      [w('w1', 8, 8), w('w2', 8, 4)], x(3, 8), (3, 4))
model('opset23_mish',
      [mm('MatMul', ['x', 'w1'], ['a']), mm('Mish', ['a'], ['b']), mm('MatMul', ['b', 'w2'], ['y'])],
      [w('w1', 8, 8), w('w2', 8, 4)], x(3, 8), (3, 4))

# RotaryEmbedding-23 on 3-D projections, position ids a constant
cos, sin = rope_caches(16, 2)
model('opset23_rotary',
      [mm('MatMul', ['x', 'wq'], ['q']),
       mm('RotaryEmbedding', ['q', 'cos', 'sin', 'pos'], ['y'], num_heads=4)],
      [w('wq', 16, 16), cos, sin, numpy_helper.from_array(np.array([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]], np.int64), 'pos')],
      x(2, 5, 16), (2, 5, 16))

# Attention-23: 3-D, grouped-query (4 query heads, 2 key/value heads), causal
model('opset23_attention',
      [mm('MatMul', ['x', 'wq'], ['q']), mm('MatMul', ['x', 'wk'], ['k']), mm('MatMul', ['x', 'wv'], ['v']),
       mm('Attention', ['q', 'k', 'v'], ['a'], q_num_heads=4, kv_num_heads=2, is_causal=1),
       mm('MatMul', ['a', 'wo'], ['y'])],
      [w('wq', 16, 16), w('wk', 16, 8), w('wv', 16, 8), w('wo', 16, 16)], x(2, 5, 16), (2, 5, 16))

# A LLaMA-style decoder block: RMSNorm, rotary q and k, grouped-query causal attention, residual
cos, sin = rope_caches(8, 2)
model('opset23_block',
      [mm('RMSNormalization', ['x', 'rs'], ['h'], epsilon=1e-6),
       mm('MatMul', ['h', 'wq'], ['q0']), mm('MatMul', ['h', 'wk'], ['k0']), mm('MatMul', ['h', 'wv'], ['v']),
       mm('RotaryEmbedding', ['q0', 'cos', 'sin', 'pos'], ['q'], num_heads=4),
       mm('RotaryEmbedding', ['k0', 'cos', 'sin', 'pos'], ['k'], num_heads=2),
       mm('Attention', ['q', 'k', 'v'], ['a'], q_num_heads=4, kv_num_heads=2, is_causal=1),
       mm('MatMul', ['a', 'wo'], ['o']), mm('Add', ['x', 'o'], ['y'])],
      [w('rs', 16, scale=1.0), w('wq', 16, 16), w('wk', 16, 8), w('wv', 16, 8), w('wo', 16, 16), cos, sin,
       numpy_helper.from_array(np.tile(np.arange(6, dtype=np.int64), (2, 1)), 'pos')],
      x(2, 6, 16), (2, 6, 16))
