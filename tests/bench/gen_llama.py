#!/usr/bin/python3
"""Exports a LLaMA-shaped causal language model as users export one, at any size, for `check` and
`train` at LLM scale (issue 46). The default is LLaMA-7B's shape: d 4096, 32 layers of 32 heads,
SwiGLU 11008, RMSNorm, rotary embeddings, vocabulary 32000: 6.74 billion parameters.

    /usr/bin/python3 tests/bench/gen_llama.py OUT.onnx [--layers 32] [--d 4096] [--heads 32]
        [--ffn 11008] [--vocab 32000] [--max-seq 4096] [--random]

The model is written as torch.onnx.export writes it (opset 17, training mode, no constant folding,
dynamic `batch` and `seq` axes on `tokens` and `target`): RoPE's cos/sin tables and the causal mask
are registered buffers sliced `[:T]`, softmax runs in float32 (`.float()`, a Cast of a float32
tensor), the loss is cross-entropy.

Without --random the weights are not made: torch exports one layer at full width, the other
layers are that layer's nodes repeated under their own names, and every initializer is ONNX
external data in OUT.bin, a sparse file of the weights' full size that holds no blocks on disk
(reading it gives zeros). That is how to ask graphdiet about a model whose weights you do not have:
`graphdiet check` never reads them. With --random (small shapes only) every layer is exported
with PyTorch's random initialisation, as an ordinary model file.
"""
import argparse
import os
import sys

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Layer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.attention_norm = RMSNorm(d)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.ffn_norm = RMSNorm(d)
        self.w1 = nn.Linear(d, ffn, bias=False)  # gate
        self.w3 = nn.Linear(d, ffn, bias=False)  # up
        self.w2 = nn.Linear(ffn, d, bias=False)  # down

    def forward(self, x, cos, sin, mask):
        B, T, D = x.shape
        hd = D // self.heads
        h = self.attention_norm(x)
        q, k, v = (w(h).view(B, T, self.heads, hd).transpose(1, 2) for w in (self.wq, self.wk, self.wv))

        def rotate_half(t):
            return torch.cat((-t[..., hd // 2:], t[..., :hd // 2]), dim=-1)

        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-2, -1) / hd ** 0.5 + mask
        a = F.softmax(scores.float(), dim=-1).type_as(q)
        x = x + self.wo((a @ v).transpose(1, 2).reshape(B, T, D))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab, d, layers, heads, ffn, max_seq):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.output = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        freqs = torch.outer(torch.arange(max_seq).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("rope_cos", emb.cos())
        self.register_buffer("rope_sin", emb.sin())
        self.register_buffer("causal_mask", torch.full((max_seq, max_seq), float("-inf")).triu(1))

    def forward(self, tokens, target):
        T = tokens.shape[1]
        x = self.tok_embeddings(tokens)
        cos, sin, mask = self.rope_cos[:T], self.rope_sin[:T], self.causal_mask[:T, :T]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))


def export(model, path, vocab):
    tokens = torch.randint(0, vocab, (1, 8))
    torch.onnx.export(model, (tokens, tokens), path, input_names=["tokens", "target"], output_names=["loss"],
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "target": {0: "batch", 1: "seq"}})


def repeat_layer(m, layers):
    """Layer 0's nodes (those from its first node to its last, the unnamed Constants between them
    included), repeated for layers 1.. under their own names, each reading the one before."""
    g = m.graph
    nodes = list(g.node)
    inside = [i for i, n in enumerate(nodes) if n.name.startswith("/layers.0/")]
    first, last = inside[0], inside[-1]
    block = nodes[first:last + 1]
    made = {o for n in block for o in n.output}
    inits = {t.name: t for t in g.initializer}
    read = [i for n in block for i in n.input if i and i not in made]
    # the residual stream: what layer 0 reads that an earlier node made (not a shared table)
    later = [i for n in nodes[last + 1:] for i in n.input]
    out = [o for n in block for o in n.output if o in later]
    assert len(out) == 1, out
    x_in = {i for i in read if i.startswith("/tok_embeddings/")}
    assert len(x_in) == 1, x_in
    x_in, y = x_in.pop(), out[0]
    own = sorted({i for i in read if i.startswith("layers.0.")})
    new_nodes, prev = [], y
    for k in range(1, layers):
        ren = {v: f"{v.replace('/layers.0/', f'/layers.{k}/')}" if "/layers.0/" in v else f"{v}_l{k}" for v in made}
        ren.update({p: p.replace("layers.0.", f"layers.{k}.", 1) for p in own})
        ren[x_in] = prev
        for n in block:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            c.name = n.name.replace("/layers.0/", f"/layers.{k}/") if n.name.startswith("/layers.0/") else f"{n.name}_l{k}"
            c.input[:] = [ren.get(i, i) for i in n.input]
            c.output[:] = [ren[o] for o in n.output]
            new_nodes.append(c)
        for p in own:
            t = onnx.TensorProto()
            t.CopyFrom(inits[p])
            t.name = ren[p]
            g.initializer.append(t)
        prev = ren[y]
    tail = nodes[last + 1:]
    for n in tail:
        n.input[:] = [prev if i == y else i for i in n.input]
    del g.node[:]
    g.node.extend(nodes[:last + 1] + new_nodes + tail)


def externalise(m, path):
    """Every initializer as external data in a sparse file: offsets and lengths, no bytes."""
    data = os.path.basename(path) + ".bin"
    off = 0
    for t in m.graph.initializer:
        n = 4
        for d in t.dims:
            n *= d
        del t.external_data[:]
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", data), ("offset", str(off)), ("length", str(n))):
            e = t.external_data.add()
            e.key, e.value = k, v
        off += (n + 63) // 64 * 64
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), data), "wb") as f:
        f.truncate(off)
    return off


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    for k, v in (("layers", 32), ("d", 4096), ("heads", 32), ("ffn", 11008), ("vocab", 32000), ("max_seq", 4096)):
        p.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    p.add_argument("--random", action="store_true", help="export every layer with random weights (small shapes)")
    a = p.parse_args()
    torch.manual_seed(0)
    build = a.layers if a.random else 1
    with torch.no_grad():
        model = Llama(a.vocab, a.d, build, a.heads, a.ffn, a.max_seq)
    n_params = sum(p.numel() for p in model.parameters())
    per_layer = sum(p.numel() for p in model.layers[0].parameters())
    n_params += (a.layers - build) * per_layer
    export(model, a.out, a.vocab)
    if a.random:
        print(f"{a.out}: {n_params / 1e6:.2f}M parameters", file=sys.stderr)
        return
    del model
    m = onnx.load(a.out)
    for t in m.graph.initializer:  # the bytes go before layer 0 is copied 31 times
        t.ClearField("raw_data")
    if a.layers > 1:
        repeat_layer(m, a.layers)
    size = externalise(m, a.out)
    onnx.save(m, a.out)
    print(f"{a.out}: {n_params / 1e9:.3f}B parameters, {len(m.graph.node)} nodes; weights external in "
          f"{a.out}.bin ({size / 2**30:.1f} GiB, sparse)", file=sys.stderr)


if __name__ == "__main__":
    main()
