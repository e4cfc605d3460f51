#!/usr/bin/python3
"""Exports the models of graphdiet's no-op folding and buffer tests into testdata/fold/ (a few KB).

- softmax_cast.onnx, softmax_plain.onnx: Linear -> softmax -> Linear -> cross-entropy, the first
  with softmax(x, dim=-1, dtype=torch.float32) of a float32 x, which the exporter writes as a
  Cast to float32 before the Softmax (a no-op: the same peak as the second, once folded).
- gpt_mask.onnx: a one-layer nanoGPT-style model (tied head, dropout 0) whose attention masks with
  a registered causal buffer, self.register_buffer("bias", torch.tril(torch.ones(T, T))), read only
  through masked_fill's condition; gpt_mask.json holds PyTorch's own counts:
  sum(p.numel() for p in model.parameters()) and the buffers' elements.

Exported as a user would: opset 17, training mode, no constant folding, static shapes.

    /usr/bin/python3 testdata/gen_fold.py
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fold")


class SoftmaxHead(nn.Module):
    def __init__(self, cast):
        super().__init__()
        self.cast = cast
        self.fc1 = nn.Linear(8, 64)
        self.fc2 = nn.Linear(64, 5)

    def forward(self, x, target):
        h = self.fc1(x)
        h = F.softmax(h, dim=-1, dtype=torch.float32) if self.cast else F.softmax(h, dim=-1)
        return F.cross_entropy(self.fc2(h), target)


class Attention(nn.Module):
    def __init__(self, d, heads, block):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Gpt(nn.Module):
    def __init__(self, vocab=16, d=8, heads=2, block=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, block)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as nanoGPT

    def forward(self, idx, targets):
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.attn(self.ln_1(x))
        x = x + self.proj(F.gelu(self.fc(self.ln_2(x))))
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def export(model, args, names, path):
    torch.onnx.export(model, args, path, input_names=names, output_names=["loss"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    print(f"{path}: {os.path.getsize(path)} bytes", file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    x, t = torch.randn(64, 8), torch.randint(0, 5, (64,))
    for cast in (True, False):
        export(SoftmaxHead(cast), (x, t), ["x", "target"],
               os.path.join(OUT, "softmax_cast.onnx" if cast else "softmax_plain.onnx"))
    gpt = Gpt()
    idx, targets = torch.randint(0, 16, (2, 6)), torch.randint(0, 16, (2, 6))
    export(gpt, (idx, targets), ["idx", "targets"], os.path.join(OUT, "gpt_mask.onnx"))
    counts = {"parameters": sum(p.numel() for p in gpt.parameters()),
              "buffers": sum(b.numel() for b in gpt.buffers())}
    with open(os.path.join(OUT, "gpt_mask.json"), "w") as f:
        json.dump(counts, f)
        f.write("\n")


if __name__ == "__main__":
    main()
