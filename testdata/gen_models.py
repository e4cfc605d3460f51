#!/usr/bin/python3
"""Generates graphdiet's test models from PyTorch (Debian python3-torch, python3-onnx).

Each model is a forward pass that ends in its loss, exported in training mode with no constant
folding, opset 17. Beside each model, ref/<model>/ holds a seeded input batch, PyTorch's loss and
PyTorch's gradient for every parameter, as .npy, for the gradient tests.

    /usr/bin/python3 testdata/gen_models.py            # rewrites testdata/*.onnx and testdata/ref/

The output is deterministic for a given torch version.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17


class MLP(nn.Module):
    """Two hidden layers and a softmax cross-entropy loss."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 10)

    def forward(self, x, target):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        return F.cross_entropy(self.fc3(h), target)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(h)))


class ResCNN(nn.Module):
    """A small residual CNN: conv stem, BatchNorm, MaxPool, two residual blocks, global pool."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.block1 = Block(8)
        self.block2 = Block(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x, target):
        h = F.max_pool2d(F.relu(self.bn(self.stem(x))), 2)
        h = self.block2(self.block1(h))
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return F.cross_entropy(self.fc(h), target)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class TBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    """Token and position embeddings, two pre-norm blocks (multi-head attention, GELU MLP), LM loss."""

    def __init__(self, vocab=50, d=16, heads=2, seq=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([TBlock(d, heads) for _ in range(2)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.vocab = vocab

    def forward(self, tokens, target):
        t = tokens.shape[1]
        x = self.tok(tokens) + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, self.vocab), target.reshape(-1))


class TanhChain(nn.Module):
    """A deep chain of Linear + Tanh with a mean-squared-error loss."""

    def __init__(self, depth=12, width=16):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x, target):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return ((x - target) ** 2).mean()  # F.mse_loss has no ONNX export in torch 1.13


class UnrolledRNN(nn.Module):
    """An Elman RNN unrolled over 5 steps: the recurrent weight is shared by every step, so its
    gradient is the sum of 5 contributions."""

    def __init__(self, d=8, steps=5):
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.rec = nn.Linear(d, d, bias=False)
        self.out = nn.Linear(d, 4)
        self.steps = steps

    def forward(self, x, target):
        h = torch.zeros(x.shape[0], x.shape[2])
        for t in range(self.steps):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
        return F.cross_entropy(self.out(h), target)


class UNet(nn.Module):
    """A two-level U-Net: the decoder concatenates the upsampled features with the encoder's (a skip
    connection), and the loss is a per-pixel cross-entropy."""

    def __init__(self):
        super().__init__()
        self.enc1 = nn.Conv2d(3, 8, 3, padding=1)
        self.enc2 = nn.Conv2d(8, 16, 3, padding=1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec = nn.Conv2d(16, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x, target):
        e1 = F.relu(self.enc1(x))
        e2 = F.relu(self.enc2(F.max_pool2d(e1, 2)))
        d = F.relu(self.dec(torch.cat([self.up(e2), e1], 1)))
        return F.cross_entropy(self.head(d), target)


def models():
    g = torch.Generator().manual_seed(0)
    yield "mlp", MLP(), (torch.randn(4, 20, generator=g), torch.randint(0, 10, (4,), generator=g)), \
        ["x", "target"], {"x": {0: "batch"}, "target": {0: "batch"}}
    yield "rescnn", ResCNN(), (torch.randn(2, 3, 16, 16, generator=g), torch.randint(0, 10, (2,), generator=g)), \
        ["x", "target"], {"x": {0: "batch"}, "target": {0: "batch"}}
    yield "transformer", Transformer(), (torch.randint(0, 50, (2, 8), generator=g),
                                         torch.randint(0, 50, (2, 8), generator=g)), \
        ["tokens", "target"], None
    yield "tanh_chain", TanhChain(), (torch.randn(4, 16, generator=g), torch.randn(4, 16, generator=g)), \
        ["x", "target"], {"x": {0: "batch"}, "target": {0: "batch"}}
    yield "rnn", UnrolledRNN(), (torch.randn(3, 5, 8, generator=g), torch.randint(0, 4, (3,), generator=g)), \
        ["x", "target"], {"x": {0: "batch"}, "target": {0: "batch"}}
    yield "unet", UNet(), (torch.randn(2, 3, 16, 16, generator=g), torch.randint(0, 2, (2, 16, 16), generator=g)), \
        ["x", "target"], {"x": {0: "batch"}, "target": {0: "batch"}}


def main():
    torch.manual_seed(0)
    for name, model, args, input_names, dynamic in models():
        path = os.path.join(HERE, name + ".onnx")
        torch.onnx.export(model, args, path, input_names=input_names, output_names=["loss"],
                          opset_version=OPSET, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, dynamic_axes=dynamic)
        onnx.checker.check_model(onnx.load(path), full_check=True)
        ref = os.path.join(HERE, "ref", name)
        os.makedirs(ref, exist_ok=True)
        model.zero_grad()
        loss = model(*args)
        loss.backward()
        for n, a in zip(input_names, args):
            np.save(os.path.join(ref, n + ".npy"), a.numpy())
        np.save(os.path.join(ref, "loss.npy"), loss.detach().numpy())
        for pname, p in model.named_parameters():
            np.save(os.path.join(ref, pname + "_grad.npy"), p.grad.numpy())
        print(f"{path}: {os.path.getsize(path)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
