#!/usr/bin/python3
"""Exports the saved-bytes benchmark's models (run_saved.sh; not committed) and measures the peer:
the bytes PyTorch's autograd saves for the backward pass of the same model on the same inputs,
in float32, dropout on (distinct storages, via torch.autograd.graph.saved_tensors_hooks; the
parameters it saves count, as ours do).

    tf256      gen_models.Transformer: 4 pre-norm blocks (LayerNorm, attention, Erf-GELU MLP),
               d 256, 4 heads, seq 128, batch 8, vocabulary 512; and the same exported at opset
               16 (tf256_opset16), where LayerNorm is a chain of ReduceMean, Sub, Pow, Sqrt, Div
    gpt        gen_zoo.GPT: nn.TransformerEncoderLayer (GELU, norm_first, dropout 0.1) under a
               causal mask, at the zoo's size (d 32, 2 layers, batch 2 x 8) and at d 256, 4 layers,
               4 heads, batch 8 x 128 (gpt256)
    resnet18   torchvision ResNet-18 (BatchNorm), batch 8, 64x64 (parameters and their gradients are
               90 of its 104 MB), and at batch 32, 128x128 (resnet18_b32), where activations dominate
    rescnn     gen_models.ResCNN (testdata's small residual CNN with BatchNorm), batch 32, 16x16
    resnet50   gen_plan_models.ResNet50 (bottlenecks with BatchNorm), batch 32, 32x32

Prints one line per model: NAME PYTORCH_SAVED_BYTES, and writes OUTDIR/NAME.onnx.

    /usr/bin/python3 tests/bench/gen_saved_models.py OUTDIR
"""
import os
import sys
import warnings

import torch
import torchvision

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "testdata"))
sys.path.insert(0, here)
warnings.filterwarnings("ignore")
from gen_models import ResCNN, TBlock, Transformer  # noqa: E402
from gen_plan_models import ResNet50  # noqa: E402
from gen_zoo import GPT, Classify  # noqa: E402


def saved_bytes(model, args):
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()] = \
            t.storage().nbytes() if hasattr(t.storage(), "nbytes") else t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(*args)
    loss.backward()
    return sum(seen.values())


def models():
    torch.manual_seed(0)
    tf = Transformer(vocab=512, d=256, heads=4, seq=128)
    tf.blocks = torch.nn.ModuleList([TBlock(256, 4) for _ in range(4)])
    tok = torch.randint(0, 512, (8, 128))
    target = torch.randint(0, 512, (8, 128))
    yield "tf256", tf, (tok, target), ["tokens", "target"], 17
    yield "tf256_opset16", tf, (tok, target), ["tokens", "target"], 16
    yield "gpt", GPT(), (torch.randint(0, 64, (2, 8)), torch.randint(0, 64, (2, 8))), ["tokens", "target"], 17
    yield "gpt256", GPT(vocab=512, d=256, heads=4, layers=4, seq=128), \
        (torch.randint(0, 512, (8, 128)), torch.randint(0, 512, (8, 128))), ["tokens", "target"], 17
    yield "resnet18", Classify(torchvision.models.resnet18(num_classes=10)), \
        (torch.randn(8, 3, 64, 64), torch.randint(0, 10, (8,))), ["x", "target"], 17
    yield "resnet18_b32", Classify(torchvision.models.resnet18(num_classes=10)), \
        (torch.randn(32, 3, 128, 128), torch.randint(0, 10, (32,))), ["x", "target"], 17
    yield "rescnn", ResCNN(), (torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))), ["x", "target"], 17
    yield "resnet50", ResNet50(), (torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))), ["x", "target"], 17


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, model, args, names, opset in models():
        model.train()
        torch.onnx.export(model, args, os.path.join(out, name + ".onnx"), input_names=names, output_names=["loss"],
                          opset_version=opset, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        print(name, saved_bytes(model, args), flush=True)


if __name__ == "__main__":
    main()
