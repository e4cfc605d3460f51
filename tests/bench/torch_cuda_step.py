#!/usr/bin/python3
"""PyTorch's training step on the GPU, the peer run_cuda.sh measures graphdiet against: forward,
loss and backward of the same model classes (testdata/gen_models.py), best of 10 after 3 warm-ups,
CUDA-synchronised. Prints "model batch seconds peak_bytes" (peak: torch.cuda.max_memory_allocated).

    /usr/bin/python3 tests/bench/torch_cuda_step.py transformer BATCH D LAYERS HEADS SEQ VOCAB
    /usr/bin/python3 tests/bench/torch_cuda_step.py rescnn BATCH
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata"))
import gen_models  # noqa: E402


def main():
    if not torch.cuda.is_available():
        print("PyTorch has no CUDA here", file=sys.stderr)
        return 2
    kind, batch = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    dev = torch.device("cuda")
    if hasattr(torch, "set_default_device"):  # the model's torch.arange(t) on the GPU too (PyTorch 2)
        torch.set_default_device(dev)
    if kind == "transformer":
        d, layers, heads, seq, vocab = (int(a) for a in sys.argv[3:8])
        model = gen_models.Transformer(vocab=vocab, d=d, heads=heads, seq=seq)
        model.blocks = torch.nn.ModuleList([gen_models.TBlock(d, heads) for _ in range(layers)])
        args = (torch.randint(0, vocab, (batch, seq)), torch.randint(0, vocab, (batch, seq)))
    else:
        model = gen_models.ResCNN()
        args = (torch.randn(batch, 3, 16, 16), torch.randint(0, 10, (batch,)))
    model = model.to(dev).train()
    args = tuple(a.to(dev) for a in args)
    times = []
    for r in range(13):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(*args)
        loss.backward()
        torch.cuda.synchronize()
        if r >= 3:
            times.append(time.perf_counter() - t0)
        model.zero_grad(set_to_none=True)
    print(f"{kind} {batch} {min(times):.6f} {torch.cuda.max_memory_allocated()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
