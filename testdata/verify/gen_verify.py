#!/usr/bin/python3
"""Models for verify's 16-bit defaults (issue 48): a BERT-like encoder and a 4-layer GPT-style language
model, small, exported as torch.onnx.export writes them in training mode (opset 17, no constant
folding), each with its loss as the output. Dropout is 0, so that verify's runs are deterministic.

    /usr/bin/python3 testdata/verify/gen_verify.py [OUTDIR]

writes bert.onnx (2 layers, d 32, 4 heads, GELU, post-norm, a [CLS] classifier with cross-entropy)
and lm4.onnx (4 pre-norm layers, d 32, 4 heads, causal, next-token cross-entropy summed over the
tokens, as recipes that normalise elsewhere write it: its gradients are 16 times a mean's, so a
16-bit rounding error is larger than verify --atol 1e-3 where a gradient element nearly cancels),
and cnn.onnx (three Conv-BatchNorm-ReLU blocks, batch 8 x 3 x 32 x 32) with cnn_ref/, PyTorch's
float32 loss and gradients on one batch as verify --against reads them (x.npy, target.npy,
loss.npy, <param>_grad.npy).
"""
import math
import os
import sys

import numpy
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        s = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        if self.causal:
            s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        y = F.softmax(s, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Bert(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=2, seq=8, classes=3):
        super().__init__()
        self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(seq, d), nn.Embedding(2, d)
        self.ln0 = nn.LayerNorm(d)
        self.attn = nn.ModuleList(Attention(d, heads, False) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.fc1 = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(layers))
        self.fc2 = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.pool = nn.Linear(d, d)
        self.cls = nn.Linear(d, classes)

    def forward(self, tokens, types, labels):
        t = tokens.shape[1]
        x = self.ln0(self.tok(tokens) + self.pos(torch.arange(t)) + self.typ(types))
        for a, l1, f1, f2, l2 in zip(self.attn, self.ln1, self.fc1, self.fc2, self.ln2):
            x = l1(x + a(x))
            x = l2(x + f2(F.gelu(f1(x))))
        return F.cross_entropy(self.cls(torch.tanh(self.pool(x[:, 0]))), labels)


class LM(nn.Module):
    def __init__(self, vocab=64, d=32, heads=4, layers=4, seq=8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.attn = nn.ModuleList(Attention(d, heads, True) for _ in range(layers))
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.fc1 = nn.ModuleList(nn.Linear(d, 4 * d) for _ in range(layers))
        self.fc2 = nn.ModuleList(nn.Linear(4 * d, d) for _ in range(layers))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, target):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
        for a, l1, f1, f2, l2 in zip(self.attn, self.ln1, self.fc1, self.fc2, self.ln2):
            x = x + a(l1(x))
            x = x + f2(F.gelu(f1(l2(x))))
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="sum")


class CNN(nn.Module):
    """Conv-BatchNorm-ReLU blocks, a max pool, global average pooling and a classifier."""

    def __init__(self, c=16, classes=10):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, 2 * c, 3, padding=1, bias=False), nn.BatchNorm2d(2 * c)
        self.c3, self.b3 = nn.Conv2d(2 * c, 2 * c, 3, padding=1, bias=False), nn.BatchNorm2d(2 * c)
        self.fc = nn.Linear(2 * c, classes)

    def forward(self, x, target):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.relu(self.b2(self.c2(x)))
        x = F.relu(self.b3(self.c3(x)) + x)
        return F.cross_entropy(self.fc(x.mean((2, 3))), target)


def export(model, args, names, path):
    torch.onnx.export(model, args, path, input_names=names, output_names=["loss"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(0)
    tokens = torch.randint(0, 64, (2, 8))
    export(Bert(), (tokens, torch.randint(0, 2, (2, 8)), torch.randint(0, 3, (2,))), ["tokens", "types", "labels"],
           os.path.join(out, "bert.onnx"))
    export(LM(), (tokens, torch.randint(0, 64, (2, 8))), ["tokens", "target"], os.path.join(out, "lm4.onnx"))
    # the CNN, and PyTorch's float32 loss and gradients on one batch, for verify --against
    cnn, x, target = CNN(), torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    export(cnn, (x, target), ["x", "target"], os.path.join(out, "cnn.onnx"))
    ref = os.path.join(out, "cnn_ref")
    os.makedirs(ref, exist_ok=True)
    cnn.zero_grad()
    loss = cnn(x, target)
    loss.backward()
    numpy.save(os.path.join(ref, "x.npy"), x.numpy())
    numpy.save(os.path.join(ref, "target.npy"), target.numpy())
    numpy.save(os.path.join(ref, "loss.npy"), loss.detach().numpy())
    for name, p in cnn.named_parameters():
        numpy.save(os.path.join(ref, name + "_grad.npy"), p.grad.numpy())


if __name__ == "__main__":
    main()
