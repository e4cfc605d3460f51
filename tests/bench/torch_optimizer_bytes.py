"""A parameter-bound MLP (L x Linear(D, D) with ReLU, a squared-error loss, batch B) exported for
graphdiet, and what PyTorch 1.13 (CPU) holds through one optimizer step, per parameter: the
parameters, their .grad and every tensor the optimizer keeps as state (torch.optim.Adam's exp_avg,
exp_avg_sq and step; SGD's momentum_buffer), counted after optimizer.step().

    python3 torch_optimizer_bytes.py OUT.onnx D L B   ->  prints "adam 16.0000 sgd 8.0000 ..."
"""
import sys
import torch

out, d, layers, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.ModuleList([torch.nn.Linear(d, d) for _ in range(layers)])

    def forward(self, x, t):
        for lin in self.l:
            x = torch.relu(lin(x))
        return ((x - t) ** 2).mean()


torch.manual_seed(0)
model = MLP()
x, t = torch.randn(batch, d), torch.randn(batch, d)
torch.onnx.export(model, (x, t), out, input_names=["x", "t"], output_names=["loss"], opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
n = sum(p.numel() for p in model.parameters())
row = []
for name, make in (("adam", lambda ps: torch.optim.Adam(ps, lr=1e-3)),
                   ("sgd", lambda ps: torch.optim.SGD(ps, lr=1e-2)),
                   ("sgd:momentum=0.9", lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9))):
    model.zero_grad(set_to_none=True)
    opt = make(model.parameters())
    model(x, t).backward()
    opt.step()
    held = sum(p.numel() * p.element_size() for p in model.parameters())
    held += sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    held += sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    row.append("%s %.4f" % (name, held / n))
print(" ".join(row))
