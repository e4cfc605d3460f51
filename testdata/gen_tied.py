#!/usr/bin/python3
"""Generates testdata/tied_gpt.onnx: a tiny nanoGPT-style GPT-2 (karpathy/nanoGPT's model.py,
written again here) whose head is tied to its token embedding (lm_head.weight = wte.weight) and
whose attention reads a registered causal-mask buffer sliced [:T, :T], exported as users export
it (opset 17, training mode, no constant folding); and tied_shared.onnx, one block of the same
whose token embedding is also read for a second token stream (three gradients to sum: the head's
and two embeddings', as an encoder-decoder sharing its embedding has). Beside each, ref/<name>/
holds the seeded batch, PyTorch's loss and gradients, and the tied weight after one and two steps
of diet variables' factored Adam computed here in float64 from PyTorch's gradients (diet_ref).

    /usr/bin/python3 testdata/gen_tied.py     # rewrites testdata/tied_{gpt,shared}.onnx, ref/tied_{gpt,shared}/

tests/bench/gen_gpt2.py exports the same class at GPT-2 small's size.
"""
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, block):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.heads, self.d = heads, d
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d, heads, block):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, block)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT (dropout 0): wte, wpe, the blocks, ln_f, and lm_head tied to wte."""

    def __init__(self, vocab, d, layers, heads, block):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d), wpe=nn.Embedding(block, d),
            h=nn.ModuleList([Block(d, heads, block) for _ in range(layers)]), ln_f=nn.LayerNorm(d)))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            torch.nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for blk in self.transformer.h:
            x = blk(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


class SharedGPT(GPT):
    """GPT whose token embedding is read twice more: each position adds the embedding of a second
    token stream (ctx), as an encoder-decoder's shared embedding is; the head stays tied."""

    def forward(self, idx, ctx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wte(ctx) + self.transformer.wpe(pos)
        for blk in self.transformer.h:
            x = blk(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def export(model, batch, seq, out, gen=None, names=("idx", "targets")):
    vocab = model.lm_head.weight.shape[0]
    args = tuple(torch.randint(0, vocab, (batch, seq), generator=gen) for _ in names)
    torch.onnx.export(model, args, out, input_names=list(names), output_names=["loss"],
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return args


def diet_ref(q, g, vr, vc, t, lr, beta2=0.98, eps=1e-10, scale=10.0 / 32767):
    """One step of diet.h's factored Adam (beta1 0, schedule none, warmup 1, round nearest) in
    float64 on INT16 storage q (R x C) with float32 gradient g: returns q', vr', vc'."""
    g = g.astype(np.float32).astype(np.float64)
    vr = beta2 * vr + (1 - beta2) * (g * g).mean(axis=1)
    vc = beta2 * vc + (1 - beta2) * (g * g).mean(axis=0)
    bc = 1 - beta2 ** t
    r, c = np.sqrt(vr / bc) + eps, np.sqrt(vc / bc) + eps
    w = q.astype(np.float64) * np.float64(np.float32(scale)) - lr * g / (np.outer(r, c) / c.mean())
    return np.clip(np.rint(w / np.float64(np.float32(scale))), -32767, 32767).astype(np.int16), vr, vc


def generate(name, model, names):
    """Exports model as testdata/<name>.onnx; ref/<name>/ gets the batch, PyTorch's loss and
    gradients, and the tied weight after each of two --diet steps (every 2-D parameter INT16,
    updated by factored Adam from PyTorch's gradients at the dequantized weights)."""
    gen = torch.Generator().manual_seed(0)
    vocab, d = model.lm_head.weight.shape
    out = os.path.join(HERE, name + ".onnx")
    args = export(model, 2, 8, out, gen, names)
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    tied = [i.name for i in m.graph.initializer if list(i.dims) == [vocab, d]]
    assert len(tied) == 1, tied  # one initializer, read by the Gathers and the head
    ref = os.path.join(HERE, "ref", name)
    os.makedirs(ref, exist_ok=True)
    for n, a in zip(names, args):
        np.save(os.path.join(ref, n + ".npy"), a.numpy())
    scale = np.float32(10.0 / 32767)
    diet = {n: p for n, p in model.named_parameters() if p.dim() == 2}
    st = {n: [np.clip(np.rint(p.detach().numpy().astype(np.float64) / np.float64(scale)), -32767, 32767)
              .astype(np.int16), np.zeros(p.shape[0]), np.zeros(p.shape[1])] for n, p in diet.items()}
    for t in (1, 2):
        with torch.no_grad():
            for n, p in diet.items():
                p.copy_(torch.from_numpy(st[n][0].astype(np.float32) * scale))
        model.zero_grad()
        loss = model(*args)
        loss.backward()
        if t == 1:
            np.save(os.path.join(ref, "loss.npy"), loss.detach().numpy())
            for pname, p in model.named_parameters():
                np.save(os.path.join(ref, pname + "_grad.npy"), p.grad.numpy())
        for n, p in diet.items():
            st[n] = list(diet_ref(*st[n][:1], p.grad.numpy(), *st[n][1:], t, lr=0.01))
        np.save(os.path.join(ref, f"tied_diet_step{t}.npy"), st["transformer.wte.weight"][0])
    print(f"{out}: {os.path.getsize(out)} bytes, tied weight '{tied[0]}'", file=sys.stderr)


def main():
    torch.manual_seed(0)
    generate("tied_gpt", GPT(vocab=80, d=16, layers=2, heads=2, block=8), ("idx", "targets"))
    torch.manual_seed(1)
    generate("tied_shared", SharedGPT(vocab=80, d=16, layers=1, heads=2, block=8), ("idx", "ctx", "targets"))


if __name__ == "__main__":
    main()
