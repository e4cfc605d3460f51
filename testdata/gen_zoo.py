#!/usr/bin/python3
"""Exports graphdiet's model zoo: models built from stock PyTorch modules, as people export them.

Every model has random weights, dropout left on, and is exported the way a user would:
torch.onnx.export(..., opset_version=17, training=TrainingMode.TRAINING, do_constant_folding=False).
Beside each DIR/<model>.onnx, DIR/<model>/ holds the inputs, PyTorch's loss, PyTorch's gradient of
every parameter (<param>_grad.npy) and BatchNorm's running statistics after the step
(<buffer>_new.npy), as the zoo test (tests/test_zoo.c) reads them; DIR/<model>_f64.onnx is the same
model in float64, with PyTorch's float64 numbers in DIR/<model>_f64/.

Dropout is random, so PyTorch's reference must draw graphdiet's masks: graphdiet keys each Dropout
node's numbers on its name (exec_node_seed: seed 0, step 0) and draws Philox4x32-10 uniforms
(src/util/philox.c). This script computes the same masks in numpy, independently of graphdiet's C
code, and patches torch.nn.functional.dropout so that its i-th call in the reference forward pass
uses the mask of the i-th Dropout node of the export (the exporter writes nodes in call order).
PyTorch's autograd then computes the gradients. A wrong mask shows up as a gradient mismatch.

    /usr/bin/python3 testdata/gen_zoo.py DIR        # Debian's python3-torch, python3-torchvision

The models are about 80 MB in all (torchvision's ResNet-18 alone is 45 MB), too big to commit: CI
and ctest (the zoo_gen fixture) generate them into the build tree.
"""
import copy
import os
import sys

import numpy as np

try:
    import onnx
    import onnx.numpy_helper
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
except ImportError as err:  # ctest's zoo_gen fixture: 77 is "skipped"
    print(f"gen_zoo.py: skipped: {err} (apt-get install python3-torch python3-torchvision python3-onnx)",
          file=sys.stderr)
    sys.exit(77)

OPSET = 17
M64 = (1 << 64) - 1


# ---- graphdiet's random numbers, for the reference masks ----

def strmap_hash(s):
    h = 1469598103934665603
    for c in s.encode():
        h = ((h ^ c) * 1099511628211) & M64
    h ^= h >> 32
    h = (h * 0x9E3779B97F4A7C15) & M64
    return h ^ (h >> 29)


def philox_uniform(key, n):
    """philox_uniform(key, i) for i in [0, n), as float32 (src/util/philox.c)."""
    ctr = np.arange((n + 3) // 4, dtype=np.uint64)
    c0 = (ctr & 0xFFFFFFFF).astype(np.uint64)
    c1 = (ctr >> np.uint64(32)).astype(np.uint64)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = key & 0xFFFFFFFF, key >> 32
    m32 = np.uint64(0xFFFFFFFF)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        n0 = (p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0)
        n2 = (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1)
        c1, c3, c0, c2 = p1 & m32, p0 & m32, n0, n2
        k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
        k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
    r = np.stack([c0, c1, c2, c3], axis=1).reshape(-1)[:n]
    return (r >> np.uint64(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def node_key(name, seed=0):
    return ((seed * 0x9E3779B97F4A7C15) & M64) ^ strmap_hash(name)


class GraphdietDropout:
    """Stands in for F.dropout: the i-th call draws the i-th exported Dropout node's mask."""

    def __init__(self, names):
        self.names, self.i = names, 0

    def __call__(self, x, p=0.5, training=True, inplace=False):
        if not training:
            return x
        if self.i >= len(self.names):
            raise RuntimeError("more dropout calls than Dropout nodes in the export")
        name = self.names[self.i]
        self.i += 1
        u = philox_uniform(node_key(name), x.numel()).reshape(tuple(x.shape))
        keep = torch.from_numpy(u >= np.float32(p)).to(x.dtype)
        return x * keep * (1.0 / (1.0 - p))


# ---- the models ----

class Classify(nn.Module):
    """A model whose output is (N, C) scores, with cross-entropy against integer labels."""

    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x, target):
        return F.cross_entropy(self.body(x), target)


class GPT(nn.Module):
    """Token and learned position embeddings, nn.TransformerEncoderLayer blocks under a causal mask
    (torch.triu), a tied head (the embedding's weight)."""

    def __init__(self, vocab=64, d=32, heads=2, layers=2, seq=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1, activation="gelu", batch_first=True,
                                       norm_first=True) for _ in range(layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, tokens, target):
        t = tokens.shape[1]
        pos = torch.arange(t, device=tokens.device)
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        h = self.drop(self.tok(tokens) + self.pos(pos))
        for b in self.blocks:
            h = b(h, src_mask=mask)
        logits = self.norm(h) @ self.tok.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


class Seq2Seq(nn.Module):
    """nn.Transformer (encoder-decoder) with a causal target mask."""

    def __init__(self, vocab=32, d=32, heads=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.tf = nn.Transformer(d, heads, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=64,
                                 dropout=0.1, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, src, tgt, target):
        t = tgt.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        h = self.tf(self.emb(src), self.emb(tgt), tgt_mask=mask)
        return F.cross_entropy(self.head(h).reshape(-1, self.head.out_features), target.reshape(-1))


class RNNClassifier(nn.Module):
    """nn.LSTM or nn.GRU (2 layers, bidirectional), dropout on the last step's output. (torch 1.13
    cannot export an RNN's own dropout between layers in training mode.)"""

    def __init__(self, cell, d_in=8, hidden=16, classes=4):
        super().__init__()
        self.rnn = cell(d_in, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x, target):
        y, _ = self.rnn(x)
        return F.cross_entropy(self.fc(self.drop(y[:, -1])), target)


class UNet(nn.Module):
    """Two levels, GroupNorm, bilinear upsampling, skip connections, per-pixel cross-entropy."""

    def __init__(self, c=8, classes=3):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(4, o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.GroupNorm(4, o), nn.ReLU())

        self.down1, self.down2 = block(3, c), block(c, 2 * c)
        self.mid = block(2 * c, 2 * c)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec2, self.dec1 = block(4 * c, c), block(2 * c, c)
        self.drop = nn.Dropout(0.1)  # torch 1.13 cannot export Dropout2d in training mode
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x, target):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        m = self.mid(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up(m), d2], 1))
        u1 = self.dec1(torch.cat([F.interpolate(u2, scale_factor=2.0, mode="nearest"), d1], 1))
        return F.cross_entropy(self.out(self.drop(u1)), target)


def models():
    g = torch.Generator().manual_seed(0)
    tv = torchvision.models

    def img(n=2, s=32):
        return torch.randn(n, 3, s, s, generator=g)

    def labels(n=2, c=10):
        return torch.randint(0, c, (n,), generator=g)

    def reseed(k):
        """Each model's weights and data from its own seed: tracing with dropout on draws from the
        global generator, so without this a model would depend on the ones exported before it."""
        torch.manual_seed(k)
        g.manual_seed(k)

    # Float32 decides the sizes and two seeds. At 32x32 ResNet-18's last BatchNorm normalizes pairs,
    # and PyTorch, onnxruntime and graphdiet disagree by 1e-2. Random-init MobileNetV2 and
    # EfficientNet are chaotic in float32: an input of a ReLU6 lies, in float64, within the float32
    # error of its kink (float32_noise counts 20-30 such per draw), and with BatchNorm over 16 values
    # per channel one such coin toss moves a gradient by up to 21%. Which runtime's toss lands
    # differently is luck: of MobileNetV2's seeds 102 and 105-112, five put one of PyTorch,
    # onnxruntime and graphdiet over 1e-4 from the others (each of them in some draw), four
    # none; 108 is one of those (and EfficientNet's 301, where PyTorch's float32 is 3.8e-5 from
    # float64 against 6e-5 to 1.2e-4 for seeds 3, 302 and 304).
    reseed(0)
    yield "resnet18", Classify(tv.resnet18(num_classes=10)), (img(2, 64), labels()), ["x", "target"], None
    reseed(108)  # see above
    yield "mobilenet_v2", Classify(tv.mobilenet_v2(num_classes=10, width_mult=0.5)), (img(4, 64), labels(4)), \
        ["x", "target"], None
    reseed(2)
    yield "mobilenet_v3_small", Classify(tv.mobilenet_v3_small(num_classes=10, width_mult=0.5)), \
        (img(2, 64), labels()), ["x", "target"], None
    # torch 1.13 cannot export stochastic depth's bernoulli_ in training mode (the tracer fails), so
    # that is off; the classifier's Dropout stays on
    reseed(301)  # float32 noise 3.8e-5 (seeds 3, 302, 304: 6e-5 to 1.2e-4)
    yield "efficientnet_b0", Classify(tv.efficientnet_b0(num_classes=10, stochastic_depth_prob=0.0)), \
        (img(2, 64), labels()), ["x", "target"], None
    reseed(4)
    yield "squeezenet1_1", Classify(tv.squeezenet1_1(num_classes=10)), (img(2, 64), labels()), ["x", "target"], None
    reseed(5)
    vit = tv.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                               dropout=0.1, attention_dropout=0.1, num_classes=10)
    yield "vit", Classify(vit), (img(), labels()), ["x", "target"], None
    reseed(6)
    yield "gpt", GPT(), (torch.randint(0, 64, (2, 8), generator=g), torch.randint(0, 64, (2, 8), generator=g)), \
        ["tokens", "target"], None
    reseed(7)
    yield "seq2seq", Seq2Seq(), (torch.randint(0, 32, (2, 6), generator=g), torch.randint(0, 32, (2, 5), generator=g),
                                 torch.randint(0, 32, (2, 5), generator=g)), ["src", "tgt", "target"], None
    reseed(8)
    yield "lstm", RNNClassifier(nn.LSTM), (torch.randn(3, 5, 8, generator=g), labels(3, 4)), ["x", "target"], None
    reseed(9)
    yield "gru", RNNClassifier(nn.GRU), (torch.randn(3, 5, 8, generator=g), labels(3, 4)), ["x", "target"], None
    reseed(10)
    yield "unet_gn", UNet(), (img(2, 16), torch.randint(0, 3, (2, 16, 16), generator=g)), ["x", "target"], None
    # a dynamic batch axis: shape arithmetic on the symbolic batch stays in the graph
    reseed(11)
    yield "gpt_dynamic", GPT(), (torch.randint(0, 64, (2, 8), generator=g),
                                 torch.randint(0, 64, (2, 8), generator=g)), \
        ["tokens", "target"], {"tokens": {0: "batch"}, "target": {0: "batch"}}


def save_reference(ref, input_names, args, loss, model):
    """The inputs, the loss and every parameter's gradient, as .npy under ref/ (after backward)."""
    for n, a in zip(input_names, args):
        np.save(os.path.join(ref, n + ".npy"), a.numpy())
    np.save(os.path.join(ref, "loss.npy"), loss.detach().numpy())
    for pname, p in model.named_parameters():
        if p.grad is not None:
            np.save(os.path.join(ref, pname + "_grad.npy"), p.grad.numpy())


def grad_error(ref, got):
    """The zoo test's metric: per tensor max |diff| / max(max |ref|, 1e-2 x the largest gradient)."""
    largest = max(float(np.abs(r).max()) for r in ref.values())
    return max(float(np.abs(ref[k] - got[k]).max()) / max(float(np.abs(ref[k]).max()), 1e-2 * largest) for k in ref)


KINKS = {nn.ReLU: (0,), nn.ReLU6: (0, 6), nn.Hardtanh: (-1, 1), nn.Hardswish: (-3, 3), nn.Hardsigmoid: (-3, 3)}


def float32_noise(model, args, path):
    """How far PyTorch's own float32 gradients are from float64 ones (the same model, inputs and
    masks), and how many inputs of piecewise activations lie, in float64, within 3x their tensor's
    float32 error of a kink: there whether the gradient passes is a coin toss for any float32
    implementation, and one such element can move a gradient by percent."""
    grads, pre = {}, {}
    for dt in (torch.float32, torch.float64):
        m = copy.deepcopy(model).to(dt)
        m.zero_grad()
        seen = []
        for mod in m.modules():
            if type(mod) in KINKS:
                # before the module runs: torchvision's activations work in place
                mod.register_forward_pre_hook(lambda mm, i, seen=seen: seen.append((type(mm), i[0].detach().clone().double())))
        pre[dt] = seen
        loss, _ = forward_with_masks(m, [a.to(dt) if a.is_floating_point() else a for a in args], path)
        loss.backward()
        grads[dt] = {k: p.grad.double().numpy() for k, p in m.named_parameters() if p.grad is not None}
    at_risk = 0
    for (kind, x32), (_, x64) in zip(pre[torch.float32], pre[torch.float64]):
        noise = float((x32 - x64).abs().max())
        for k in KINKS[kind]:
            at_risk += int(((x64 - k).abs() < 3 * noise).sum())
    return grad_error(grads[torch.float64], grads[torch.float32]), at_risk


def to_float64(src, dst):
    """The model in float64: float initializers, Constant tensors, Casts to float, and typed inputs and
    outputs. Float32's rounding then no longer decides kinks, and graphdiet must give PyTorch's
    float64 gradients to about 1e-9."""
    m = onnx.load(src)
    f32, f64 = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE
    for i, t in enumerate(m.graph.initializer):
        if t.data_type == f32:
            m.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float64),
                                                                         t.name))
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == f32:
                a.t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
            if n.op_type == "Cast" and a.name == "to" and a.i == f32:
                a.i = f64
    for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if v.type.tensor_type.elem_type == f32:
            v.type.tensor_type.elem_type = f64
    onnx.save(m, dst)


def float64_reference(model, args, input_names, path, ref):
    """PyTorch's float64 gradients of the float64 copy (graphdiet's masks), under ref."""
    m = copy.deepcopy(model).double()
    m.zero_grad()
    args = [a.double() if a.is_floating_point() else a for a in args]
    loss, _ = forward_with_masks(m, args, path)
    loss.backward()
    os.makedirs(ref, exist_ok=True)
    save_reference(ref, input_names, args, loss, m)


def forward_with_masks(model, args, path):
    """model(*args) with F.dropout drawing graphdiet's masks for the export at path: the loss, and
    the stand-in (its .i counts the calls)."""
    drop = GraphdietDropout(dropout_names(path))
    saved = F.dropout
    F.dropout = drop
    try:
        loss = model(*args)
    finally:
        F.dropout = saved
    return loss, drop


def dropout_names(path):
    names = []
    for n in onnx.load(path).graph.node:
        if n.op_type == "Dropout":
            names.append(n.name if n.name else n.output[0])
    return names


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "zoo"
    only = set(sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, model, args, input_names, dynamic in models():
        if only and name not in only:
            continue
        path = os.path.join(out, name + ".onnx")
        model.train()
        torch.onnx.export(model, args, path, input_names=input_names, output_names=["loss"],
                          opset_version=OPSET, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, dynamic_axes=dynamic)
        ref = os.path.join(out, name)
        os.makedirs(ref, exist_ok=True)
        model.zero_grad()
        # the export's trace moved BatchNorm's running statistics once: start from the file's
        with torch.no_grad():
            inits = {t.name: t for t in onnx.load(path).graph.initializer}
            for bname, buf in model.named_buffers():
                if bname in inits:
                    buf.copy_(torch.from_numpy(onnx.numpy_helper.to_array(inits[bname]).copy()))
        loss, drop = forward_with_masks(model, args, path)
        if drop.i != len(drop.names):
            raise RuntimeError(f"{name}: {drop.i} dropout calls, {len(drop.names)} Dropout nodes")
        loss.backward()
        save_reference(ref, input_names, args, loss, model)
        # for the record (test_zoo prints it): chaos shows here, and so do kinks (a ReLU or a max-pool
        # deciding otherwise in float64), which float32 computations share
        to_float64(path, os.path.join(out, name + "_f64.onnx"))
        float64_reference(model, args, input_names, path, os.path.join(out, name + "_f64"))
        noise, at_risk = float32_noise(model, args, path)
        with open(os.path.join(ref, "float32_noise.txt"), "w") as f:
            f.write(f"{noise:.3e}, {at_risk} kinks at risk\n")
        for bname, buf in model.named_buffers():  # the running statistics after the step
            if bname.endswith(("running_mean", "running_var")):
                np.save(os.path.join(ref, bname + "_new.npy"), buf.numpy())
        params = sum(p.numel() for p in model.parameters())
        print(f"{path}: {params} parameters, {os.path.getsize(path)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
