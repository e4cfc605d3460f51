#!/usr/bin/python3
"""PyTorch's own autocast, as the peer for run_amp.sh's activation ratios.

    /usr/bin/python3 tests/bench/torch_amp_saved.py [BATCH]

For each testdata model class (gen_models.py) at batch BATCH (32; the transformer's inputs are
fixed at 2 x 8, as in its export), the bytes of the tensors autograd saves for the backward pass
(distinct storages, via torch.autograd.graph.saved_tensors_hooks), in float32 and under
torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch 1.13 autocasts the CPU to bfloat16 only), and
their ratio. This counts what the forward pass keeps, not a peak, so compare ratios, not bytes.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testdata"))
import gen_models as gm  # noqa: E402


def saved_bytes(model, args, amp):
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()] = \
            t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = model(*args)
    loss.backward()
    return sum(seen.values())


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    torch.manual_seed(0)
    print("| model (batch %d) | PyTorch fp32 saved bytes | autocast bf16 | bf16/fp32 |" % batch)
    print("|---|---|---|---|")
    for name, model, args, _, dynamic in gm.models():
        if dynamic:
            args = tuple(a.repeat((batch + a.shape[0] - 1) // a.shape[0], *[1] * (a.dim() - 1))[:batch] for a in args)
        a = saved_bytes(model, args, False)
        b = saved_bytes(model, args, True)
        print("| %s | %d | %d | %.2f |" % (name, a, b, b / a))


if __name__ == "__main__":
    main()
