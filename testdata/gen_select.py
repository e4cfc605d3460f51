#!/usr/bin/python3
"""Exports models that select by value, one tiny model each, into testdata/select/ (committed: a few KB).

Each is Linear -> the selection -> cross-entropy, exported as a user would (opset 17, training
mode, no constant folding): torch.topk(...).values (TopK), torch.logsumexp (ReduceLogSumExp), and
a top-1 mixture of experts whose gate takes argmax and F.one_hot (ArgMax, OneHot: no gradient
through them, the softmax probability of the chosen expert carries it). testdata/ref/select/<name>/
holds PyTorch's inputs, loss and gradients.

    /usr/bin/python3 testdata/gen_select.py
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_zoo import save_reference  # noqa: E402


class Select(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(4, 8)
        self.experts = nn.ModuleList(nn.Linear(4, 5) for _ in range(3 if kind == "moe" else 0))

    def forward(self, x, target):
        y = self.fc(x)
        if self.kind == "topk":
            y = torch.topk(y, 3, dim=1).values
        elif self.kind == "logsumexp":
            y = torch.logsumexp(y.view(y.shape[0], 2, 4) * 3, dim=2)
        elif self.kind == "moe":
            gate = y[:, :3]
            onehot = F.one_hot(gate.argmax(-1), 3).to(y.dtype)
            w = F.softmax(gate, -1) * onehot
            e = torch.stack([ex(x) for ex in self.experts], 1)
            y = (e * w.unsqueeze(-1)).sum(1)
        return F.cross_entropy(y, target)


CLASSES = {"topk": 3, "logsumexp": 2, "moe": 5}


def main():
    out = os.path.join(HERE, "select")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    for kind, classes in CLASSES.items():
        model = Select(kind)
        x = torch.randn(4, 4, generator=g)
        t = torch.randint(0, classes, (4,), generator=g)
        path = os.path.join(out, kind + ".onnx")
        torch.onnx.export(model, (x, t), path, input_names=["x", "target"], output_names=["loss"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        ref = os.path.join(HERE, "ref", "select", kind)
        os.makedirs(ref, exist_ok=True)
        loss = model(x, t)
        loss.backward()
        save_reference(ref, ["x", "target"], (x, t), loss, model)
        print(f"{path}: {os.path.getsize(path)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
