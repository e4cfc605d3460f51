#!/usr/bin/python3
"""Issue 47's done-when models, tiny, and GridSample's forward numbers (committed: a few KB each).

Each model is exported as a user would (opset 17, training mode, no constant folding) into
testdata/issue47/<name>.onnx, with its float64 copy <name>_f64.onnx (gen_zoo.to_float64) and
PyTorch's float64 inputs, loss and gradients under testdata/ref/issue47/<name>/, the folder
`graphdiet verify --against` reads:
  swin      a Swin-style block: window padding from `W % window` (Mod on shapes), torch.roll shifted
            windows, window partition by view/permute, attention in each window, LayerNorm, MLP
  topk_lse  torch.topk(...).values and torch.logsumexp (TopK, ReduceLogSumExp)
  moe       a top-1 mixture of experts: argmax, F.one_hot, gating (ArgMax, OneHot)
  stn       a spatial transformer: F.affine_grid (as its MatMul) and F.grid_sample (GridSample)
  rope      rotary position embeddings computed in forward with torch.sin and torch.cos

testdata/gridsample/ holds F.grid_sample's float64 numbers (x.npy, grid.npy, <mode>_<padding>_<align>.npy) for each mode,
padding mode and align_corners on a small input, with points outside [-1, 1], and a few 3-D ones (x3.npy, grid3.npy, 3d_*.npy) for opset 20's
N-d form (tests/ops/models.c).

    /usr/bin/python3 testdata/gen_issue47_models.py
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_zoo import float64_reference, to_float64  # noqa: E402


class Swin(nn.Module):
    """A shifted-window block as torchvision's swin_transformer writes it (no attention mask)."""

    def __init__(self, c=8, heads=2, window=4, shift=2, classes=3):
        super().__init__()
        self.window, self.shift, self.heads = window, shift, heads
        self.norm1, self.norm2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.mlp = nn.Sequential(nn.Linear(c, 2 * c), nn.GELU(), nn.Linear(2 * c, c))
        self.head = nn.Linear(c, classes)

    def attention(self, x):
        B, H, W, C = x.shape
        w = self.window
        pad_r = (w - W % w) % w
        pad_b = (w - H % w) % w
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        _, pH, pW, _ = x.shape
        x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        x = x.view(B, pH // w, w, pW // w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, C)
        qkv = self.qkv(x).reshape(x.size(0), x.size(1), 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = torch.softmax(q.matmul(k.transpose(-2, -1)) * (C // self.heads) ** -0.5, dim=-1)
        x = a.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), C)
        x = self.proj(x)
        x = x.view(B, pH // w, pW // w, w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(B, pH, pW, C)
        x = torch.roll(x, shifts=(self.shift, self.shift), dims=(1, 2))
        return x[:, :H, :W, :].contiguous()

    def forward(self, x, target):
        x = x + self.attention(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return F.cross_entropy(self.head(x.mean(dim=(1, 2))), target)


class TopkLse(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.out = nn.Linear(6, 10), nn.Linear(4, 3)

    def forward(self, x, target):
        h = self.fc(x)
        top = torch.topk(h, 4, dim=-1).values
        return F.cross_entropy(self.out(top), target) + torch.logsumexp(h, dim=-1).mean()


class MoE(nn.Module):
    def __init__(self, d=6, experts=3, classes=3):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(experts))
        self.head = nn.Linear(d, classes)

    def forward(self, x, target):
        probs = torch.softmax(self.gate(x), dim=-1)
        mask = F.one_hot(torch.argmax(probs, dim=-1), probs.shape[-1]).to(x.dtype)
        weight = (probs * mask).sum(-1, keepdim=True)
        y = sum(mask[:, e:e + 1] * expert(x) for e, expert in enumerate(self.experts))
        return F.cross_entropy(self.head(torch.relu(y * weight)), target)


def affine_grid(theta, h, w):
    """F.affine_grid(theta, (N, C, h, w), align_corners=False) as a MatMul with the base grid: torch
    1.13 exports no aten::affine_grid_generator (opset 20 has AffineGrid)."""
    xs = (torch.arange(w, dtype=theta.dtype) * 2 + 1) / w - 1
    ys = (torch.arange(h, dtype=theta.dtype) * 2 + 1) / h - 1
    base = torch.stack((xs.repeat(h), ys.repeat_interleave(w), torch.ones(h * w, dtype=theta.dtype)), dim=1)
    return base.matmul(theta.transpose(1, 2)).view(-1, h, w, 2)


class STN(nn.Module):
    """Localisation net -> theta (N, 2, 3) -> affine_grid -> grid_sample -> classifier."""

    def __init__(self, classes=3):
        super().__init__()
        self.loc = nn.Linear(2 * 5 * 6, 6)
        with torch.no_grad():
            self.loc.weight.mul_(0.1)
            self.loc.bias.copy_(torch.tensor([0.9, 0.2, 0.05, -0.1, 1.1, -0.05]))
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.fc = nn.Linear(3 * 4 * 4, classes)

    def forward(self, x, target):
        theta = self.loc(x.flatten(1)).view(-1, 2, 3)
        grid = affine_grid(theta, 4, 4)  # (2i + 1) / 4 - 1: the same in float32 and float64
        y = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        return F.cross_entropy(self.fc(torch.tanh(self.conv(y)).flatten(1)), target)


class Rope(nn.Module):
    def __init__(self, d=8, classes=3):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.head = nn.Linear(d, classes)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)), persistent=False)

    def rotate(self, x):
        t = torch.arange(x.shape[1], dtype=x.dtype)
        freqs = t[:, None] * self.inv_freq.to(x.dtype)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = torch.cos(emb), torch.sin(emb)
        half = x.shape[-1] // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rot * sin

    def forward(self, x, target):
        q, k = self.rotate(self.q(x)), self.rotate(self.k(x))
        a = torch.softmax(q.matmul(k.transpose(-2, -1)) / 8 ** 0.5, dim=-1)
        return F.cross_entropy(self.head(a.matmul(self.v(x)).mean(1)), target)


def models(g):
    t = torch.randint(0, 3, (2,), generator=g)
    return [
        ("swin", Swin(), (torch.randn(2, 5, 6, 8, generator=g), t)),
        ("topk_lse", TopkLse(), (torch.randn(2, 6, generator=g), t)),
        ("moe", MoE(), (torch.randn(2, 6, generator=g), t)),
        ("stn", STN(), (torch.randn(2, 2, 5, 6, generator=g), t)),
        ("rope", Rope(), (torch.randn(2, 5, 8, generator=g), t)),
    ]


def grid_sample_cases(g):
    """F.grid_sample's numbers for every mode, padding mode and align_corners: x (1, 2, 3, 4), grid
    (1, 3, 5, 2) reaching past [-1, 1] (to -1.7 and 1.6); points apart from the half-pixel grid."""
    out = os.path.join(HERE, "gridsample")
    os.makedirs(out, exist_ok=True)
    x = torch.randn(1, 2, 3, 4, generator=g, dtype=torch.float64)
    grid = torch.rand(1, 3, 5, 2, generator=g, dtype=torch.float64) * 3.3 - 1.7
    np.save(os.path.join(out, "x.npy"), x.numpy())
    np.save(os.path.join(out, "grid.npy"), grid.numpy())
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for align in (0, 1):
                y = F.grid_sample(x, grid, mode=mode, padding_mode=pad, align_corners=bool(align))
                np.save(os.path.join(out, f"{mode}_{pad}_{align}.npy"), y.numpy())
    # opset 20's N-d form: 5-D input, trilinear and nearest (PyTorch has no 3-D bicubic)
    x = torch.randn(1, 2, 2, 3, 4, generator=g, dtype=torch.float64)
    grid = torch.rand(1, 2, 3, 2, 3, generator=g, dtype=torch.float64) * 3.3 - 1.7
    np.save(os.path.join(out, "x3.npy"), x.numpy())
    np.save(os.path.join(out, "grid3.npy"), grid.numpy())
    for mode, pad, align in (("bilinear", "zeros", 0), ("bilinear", "reflection", 1), ("nearest", "border", 0)):
        y = F.grid_sample(x, grid, mode=mode, padding_mode=pad, align_corners=bool(align))
        np.save(os.path.join(out, f"3d_{mode}_{pad}_{align}.npy"), y.numpy())


def main():
    theta = torch.randn(2, 2, 3, dtype=torch.float64)
    assert torch.allclose(affine_grid(theta, 4, 5), F.affine_grid(theta, [2, 1, 4, 5], align_corners=False), atol=1e-12)
    out = os.path.join(HERE, "issue47")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(47)
    only = set(sys.argv[1:])
    for name, model, args in models(g):
        if only and name not in only:
            continue
        path = os.path.join(out, name + ".onnx")
        model.train()
        torch.onnx.export(model, args, path, input_names=["x", "target"], output_names=["loss"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        to_float64(path, os.path.join(out, name + "_f64.onnx"))
        float64_reference(model, args, ["x", "target"], path, os.path.join(HERE, "ref", "issue47", name))
        ops = sorted({n.op_type for n in onnx.load(path).graph.node})
        print(f"{path}: {os.path.getsize(path)} bytes, ops {' '.join(ops)}", file=sys.stderr)
    if not only:
        grid_sample_cases(g)


if __name__ == "__main__":
    main()
