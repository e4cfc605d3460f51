#!/usr/bin/python3
"""Exports a stock nanoGPT-style GPT-2 small (vocab 50257, d 768, 12 layers, 12 heads, block 1024,
lm_head tied to wte, a causal-mask buffer per layer) as users export it, at static shapes, for
run_diet.sh's GPT-2 rows. Not committed: about 500 MB.

    /usr/bin/python3 tests/bench/gen_gpt2.py OUT.onnx [BATCH [SEQ]]      (default 1 x 1024)

The model is testdata/gen_tied.py's GPT (karpathy/nanoGPT's model.py, dropout 0).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata"))
from gen_tied import GPT, export  # noqa: E402


def main():
    out = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    seq = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    torch.manual_seed(0)
    model = GPT(vocab=50257, d=768, layers=12, heads=12, block=1024)
    export(model, batch, seq, out)
    print(f"{out}: {os.path.getsize(out) / 1e6:.0f} MB, "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
