#!/usr/bin/python3
"""auto against an exact multi-level checkpointing solver on uniform chains.

    /usr/bin/python3 tests/bench/revolve_chains.py [BUILD] [N ...]

Chains of N MatMul + Tanh layers (width 64, batch 2048: activations dominate) are planned by
`graphdiet plan --checkpoint auto` at budgets of 70, 50 and 30% of `none`'s peak, and at the lowest
peak it reaches. The peer is Griewank and Walther's binomial checkpointing DP (Revolve), solved
exactly here for every number of checkpoint slots c from 1 to N:

    p(l, 1) = l (l - 1) / 2,  p(1, c) = 0,
    p(l, c) = min over 0 < j < l of  j + p(l - j, c - 1) + p(j, c)

the fewest layer recomputations that reverse l layers from a stored state with c slots (advance j
layers, store that state, reverse the rest with one slot less, then the first j again); the
forward pass places its checkpoints for free (T below). Each DP plan is written as graphdiet
levels (the forward pass's checkpoints plain, a checkpoint the backward pass stores at nesting
depth d as name@d+1) and re-measured by `graphdiet plan --checkpoint-file` itself, so both sides'
peaks and FLOPs are graphdiet's exact simulation. The reference at a budget is the DP plan with
the fewest recompute FLOPs whose measured peak fits it.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

W, B = 64, 2048
INF = np.int64(1) << 60


def chain_yaml(n, path):
    out = ["graphdiet: 1", "opset: 17", f"inputs: [{{name: x, dtype: float32, shape: [{B}, {W}]}}]", "params:"]
    for i in range(n):
        out.append(f"  - {{name: w{i}, dtype: float32, shape: [{W}, {W}], init: {{dist: normal, std: 0.1, seed: {i + 1}}}}}")
    out.append("nodes:")
    prev = "x"
    for i in range(n):
        out.append(f"  - {{op: MatMul, inputs: [{prev}, w{i}], outputs: [m{i}]}}")
        out.append(f"  - {{op: Tanh, inputs: [m{i}], outputs: [t{i}]}}")
        prev = f"t{i}"
    out.append(f"  - {{op: ReduceSum, inputs: [{prev}], outputs: [loss], attrs: {{keepdims: 0}}}}")
    out.append("outputs: [{name: loss}]")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def revolve_tables(n):
    """p[l][c] and its best split, and T[l][c] (the forward pass's checkpoints free)."""
    p = np.full((n + 1, n + 1), INF, dtype=np.int64)
    ps = np.zeros((n + 1, n + 1), dtype=np.int64)
    for l in range(1, n + 1):
        p[l, 1] = l * (l - 1) // 2
    p[1, 1:] = 0
    for c in range(2, n + 1):
        for l in range(2, n + 1):
            j = np.arange(1, l)
            cost = j + p[l - j, c - 1] + p[j, c]
            k = int(np.argmin(cost))
            p[l, c], ps[l, c] = cost[k], j[k]
    # T: the first j layers' end kept by the forward pass, the rest reversed with c - 1 slots
    T = np.full((n + 1, n + 1), INF, dtype=np.int64)
    ts = np.zeros((n + 1, n + 1), dtype=np.int64)
    for c in range(1, n + 1):
        for l in range(1, n + 1):
            T[l, c], ts[l, c] = p[l, c], 0
            if c > 1 and l > 1:
                j = np.arange(1, l)
                cost = T[l - j, c - 1] + p[j, c]
                k = int(np.argmin(cost))
                if cost[k] < T[l, c]:
                    T[l, c], ts[l, c] = cost[k], j[k]
    return p, ps, T, ts


def plan_names(n, c, ps, ts):
    """The DP plan for n layers and c slots as --checkpoint-file names: state s is t{s-1}."""
    names = []

    def rev(start, l, c, depth):  # reverse layers start+1 .. start+l from state start
        while l > 1 and c > 1:
            j = int(ps[l, c])
            names.append(f"t{start + j - 1}@{depth}")  # stored while the rest is reversed
            rev(start, j, c, depth + 1)  # the first j layers, after the rest
            start, l, c = start + j, l - j, c - 1
        # one slot: each state recomputed from `start`, the last first (each its own level, so each
        # pass keeps only it)
        for k in range(1, l):
            names.append(f"t{start + l - 1 - k}@{min(depth + k - 1, 127)}")

    start, l = 0, n
    while l > 1 and c > 1 and ts[l, c]:
        j = int(ts[l, c])
        names.append(f"t{start + j - 1}")
        rev(start, j, c, 2)
        start, l, c = start + j, l - j, c - 1
    rev(start, l, c, 2)
    return names


def plan(gd, model, args):
    r = subprocess.run([gd, "plan", model, "--format", "json"] + args, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"graphdiet plan {' '.join(args)}: {r.stderr}")
    return json.loads(r.stdout)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    sizes = [int(a) for a in sys.argv[2:]] or [8, 16, 32, 64, 128, 256]
    gd = os.path.join(build, "graphdiet")
    tmp = tempfile.mkdtemp()
    print("| layers | budget | auto: peak | auto: recompute FLOPs | Revolve DP: peak | Revolve DP: recompute FLOPs | auto / DP FLOPs |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        model = os.path.join(tmp, f"chain{n}.yaml")
        chain_yaml(n, model)
        none = plan(gd, model, ["--checkpoint", "none"])
        p, ps, T, ts = revolve_tables(n)
        ref = []  # (peak, flops) of every DP plan, re-measured
        for c in range(1, n + 1):
            f = os.path.join(tmp, "plan.yaml")
            with open(f, "w") as out:
                out.write("".join(f'- "{s}"\n' for s in plan_names(n, c, ps, ts)) or "[]\n")
            r = plan(gd, model, ["--checkpoint-file", f])
            ref.append((r["peak_bytes_after"], r["recompute_flops"]))
        low = min(ref)
        budgets = [("70%", int(0.7 * none["peak_bytes_before"])), ("50%", int(0.5 * none["peak_bytes_before"])),
                   ("30%", int(0.3 * none["peak_bytes_before"])), ("DP's lowest", low[0])]
        for label, b in budgets:
            a = plan(gd, model, ["--checkpoint", "auto", "--budget", str(b)])
            fit = [fl for pk, fl in ref if pk <= b]
            dp = min(fit) if fit else None
            dpk = min(pk for pk, fl in ref if pk <= b and fl == dp) if fit else None
            ours = a["recompute_flops"] if a["fits"] else None
            ratio = "—" if dp is None or ours is None else ("1.000" if dp == ours else f"{ours / dp:.3f}" if dp else "inf")
            print(f"| {n} | {label} ({b / 1e6:.1f} MB) | {a['peak_bytes_after'] / 1e6:.2f} MB{'' if a['fits'] else ' (no plan fits)'} | "
                  f"{ours if ours is not None else '—'} | {f'{dpk / 1e6:.2f} MB' if fit else '— (none fits)'} | "
                  f"{dp if dp is not None else '—'} | {ratio} |")
        a = plan(gd, model, ["--checkpoint", "auto", "--budget", "1"])
        print(f"| {n} | lowest peak | {a['peak_bytes_after'] / 1e6:.2f} MB ({a['peak_bytes_after'] / none['peak_bytes_before']:.1%} of none) | "
              f"{a['recompute_flops']} | {low[0] / 1e6:.2f} MB ({low[0] / none['peak_bytes_before']:.1%}) | {low[1]} | "
              f"peak {a['peak_bytes_after'] / low[0]:.3f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
