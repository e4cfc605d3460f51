#!/usr/bin/python3
"""3-D windows (conv_nd.c): graphdiet run's time for one op against PyTorch's on the same CPU, in
the same run. Usage: tests/bench/conv_nd.py build/graphdiet [reps]. Prints a table: case, FLOPs,
graphdiet's seconds (its own report: nodes only), PyTorch's (the best of reps), ratio."""
import os, re, subprocess, sys, tempfile, time
import numpy as np, torch

exe = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
torch.set_num_threads(os.cpu_count())
torch.manual_seed(0)
cases = [  # (name, module, input shape): video-model sizes (a C3D/R3D stage)
    ("Conv3d 32->32 k3 p1", torch.nn.Conv3d(32, 32, 3, padding=1), (2, 32, 8, 28, 28)),
    ("Conv3d 64->64 k3 s2 p1", torch.nn.Conv3d(64, 64, 3, stride=2, padding=1), (2, 64, 8, 28, 28)),
    ("ConvTranspose3d 32->16 k2 s2", torch.nn.ConvTranspose3d(32, 16, 2, stride=2), (2, 32, 8, 14, 14)),
    ("MaxPool3d k3 s2 p1", torch.nn.MaxPool3d(3, stride=2, padding=1), (2, 64, 8, 28, 28)),
    ("AvgPool3d k2 s2", torch.nn.AvgPool3d(2, stride=2), (2, 64, 8, 28, 28)),
]
print(f"{'case':32} {'graphdiet s':>12} {'torch s':>10} {'ratio':>7}")
with tempfile.TemporaryDirectory() as tmp:
    for name, mod, shape in cases:
        x = torch.randn(*shape)
        path = f"{tmp}/m.onnx"
        torch.onnx.export(mod, (x,), path, opset_version=13, input_names=["x"], output_names=["y"])
        np.save(f"{tmp}/x.npy", x.numpy())
        ours = []
        for _ in range(reps):
            r = subprocess.run([exe, "run", path, "-i", f"x={tmp}/x.npy"], capture_output=True, text=True, check=True)
            ours.append(float(re.search(r"; ([0-9.e+-]+) s;", r.stdout + r.stderr).group(1)))
        theirs = []
        with torch.no_grad():
            mod(x)
            for _ in range(reps):
                t = time.perf_counter()
                mod(x)
                theirs.append(time.perf_counter() - t)
        a, b = min(ours), min(theirs)
        print(f"{name:32} {a:12.4f} {b:10.4f} {a / b:7.2f}")
