#!/usr/bin/python3
"""Exports tiny models with dynamic batch and sequence axes into testdata/dynamic/ (committed: a
few tens of KB each), the way users export the stock LLM modules: each slices a fixed-size buffer
by the sequence length, so that shape inference without --dim meets a Slice whose end is the
symbol `seq` on an axis of fixed size (MAXLEN, 64).

- gpt.onnx: nanoGPT-style GPT: token and position embeddings, a registered causal-mask buffer
  `bias[:, :, :T, :T]` (masked_fill with -inf), a tied head, cross-entropy.
- llama.onnx: a LLaMA-style block: RMSNorm, RoPE with cos/sin buffers sliced `[:T]`, a causal mask
  buffer, SwiGLU, a tied head.
- bert.onnx: HF-BERT-style embeddings: `position_ids[:, :seq]` from a registered buffer, LayerNorm,
  one attention layer without a mask, a token classifier.

Inputs are "tokens" [batch, seq] (int64) and "targets" [batch, seq] (int64); the output is "loss".

    /usr/bin/python3 testdata/gen_dynamic.py
    /usr/bin/python3 testdata/gen_dynamic.py OUTDIR D MAXLEN VOCAB   # larger ones, for timing
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "dynamic")
VOCAB, D, HEADS, MAXLEN = 32, 16, 2, 64


class Attention(nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.causal = causal
        if causal:
            self.register_buffer("bias", torch.tril(torch.ones(MAXLEN, MAXLEN)).view(1, 1, MAXLEN, MAXLEN))

    def forward(self, x, rope=None):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(D, dim=2)
        q = q.view(B, T, HEADS, C // HEADS).transpose(1, 2)
        k = k.view(B, T, HEADS, C // HEADS).transpose(1, 2)
        v = v.view(B, T, HEADS, C // HEADS).transpose(1, 2)
        if rope is not None:
            q, k = rope(q), rope(k)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if self.causal:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Rope(nn.Module):
    def __init__(self):
        super().__init__()
        hd = D // HEADS
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        f = torch.outer(torch.arange(MAXLEN).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos_cached", emb.cos())
        self.register_buffer("sin_cached", emb.sin())

    def forward(self, x):
        T = x.shape[2]
        cos, sin = self.cos_cached[:T], self.sin_cached[:T]
        h = x.shape[-1] // 2
        rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
        return x * cos + rot * sin


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.wpe = nn.Embedding(MAXLEN, D)
        self.ln1 = nn.LayerNorm(D)
        self.attn = Attention(causal=True)
        self.ln2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.wte.weight  # tied

    def forward(self, tokens, targets):
        T = tokens.size(1)
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.wte(tokens) + self.wpe(pos)
        x = x + self.attn(self.ln1(x))
        x = x + self.fc2(F.gelu(self.fc(self.ln2(x))))
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.n1 = RMSNorm()
        self.rope = Rope()
        self.attn = Attention(causal=True)
        self.n2 = RMSNorm()
        self.w1 = nn.Linear(D, 40 * D // 16, bias=False)
        self.w3 = nn.Linear(D, 40 * D // 16, bias=False)
        self.w2 = nn.Linear(40 * D // 16, D, bias=False)
        self.nf = RMSNorm()
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tokens, targets):
        x = self.emb(tokens)
        x = x + self.attn(self.n1(x), self.rope)
        h = self.n2(x)
        x = x + self.w2(F.silu(self.w1(h)) * self.w3(h))
        logits = self.head(self.nf(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(MAXLEN, D)
        self.register_buffer("position_ids", torch.arange(MAXLEN).expand((1, -1)))
        self.ln = nn.LayerNorm(D)
        self.attn = Attention(causal=False)
        self.cls = nn.Linear(D, VOCAB)

    def forward(self, tokens, targets):
        seq = tokens.size(1)
        ids = self.position_ids[:, :seq]
        x = self.ln(self.word(tokens) + self.pos(ids))
        x = x + self.attn(x)
        logits = self.cls(x)
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def main():
    global OUT, D, MAXLEN, VOCAB
    if len(sys.argv) == 5:
        OUT, D, MAXLEN, VOCAB = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(OUT, exist_ok=True)
    for name, cls in (("gpt", GPT), ("llama", Llama), ("bert", Bert)):
        torch.manual_seed(0)
        model = cls()
        tokens = torch.randint(0, VOCAB, (2, 8))
        targets = torch.randint(0, VOCAB, (2, 8))
        path = os.path.join(OUT, name + ".onnx")
        torch.onnx.export(model, (tokens, targets), path, input_names=["tokens", "targets"], output_names=["loss"],
                          opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "targets": {0: "batch", 1: "seq"}})
        print(path, os.path.getsize(path))


if __name__ == "__main__":
    main()
