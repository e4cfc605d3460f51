#!/usr/bin/python3
"""auto against an independent exact optimum: multi-level checkpointing of chains.

    /usr/bin/python3 tests/bench/exact_chains.py [BUILD] [OUTDIR] [--dense] [--validate] [--models a,b]

BUILD (default build) holds graphdiet; OUTDIR (default a temporary folder) the models, made by
gen_plan_models.py --chains when missing: chains of 8 to 256 Linear(64, 64) + Tanh layers, 32
layers alternating widths 256 / 32, 32 layers of width 64 with one of 512 (batch 1024, `--loss-fn
mse`).

The reference is a dynamic program written here, apart from graphdiet's planner, over every plan
graphdiet can express on a chain's layer outputs t_1 .. t_{L-1}: each kept (forward pass), or a
checkpoint the backward pass's recompute stores at level 2 .. 127, or dropped; and the loss's
difference kept or dropped. It is rotor's recurrence (Beaumont et al. 2019) on graphdiet's own
schedule (recompute.c's passes: at the first backward reader of a dropped t_j, one sweep from the
nearest available t_a stores the lowest level on the way) and its own memory accounting (memsim.c),
whose per-step terms it takes from a simulation of the training graph written here (`Sim`):

    live(step) = base(step) + bytes of the t_i alive then (kept, or stored by an earlier sweep)

    Opt(a, j): the backward from the trigger of t_j down to stage a + 1, t_a held; a Pareto list
    of (need, FLOPs). For each first checkpoint s in (a, j] (a sweep a -> s storing t_s):
      need = max(beta_j + sweep(a, s), s_s + Opt(s, j), e12(s), Opt(a, s - 1))
      FLOPs = U(a, s] + Opt(s, j) + Opt(a, s - 1);  Opt(j, j) = e3(j + 1)
    Top(a): the same with the forward pass as the sweep (kept, FLOPs free) and the loss last.

A sweep at nesting depth d stores at level d + 1. Trust comes from checks, run with --validate:
Sim against `plan --checkpoint-file` (peak, recompute FLOPs and steps, to the byte) on random
plans of every model, the DP's prediction against Sim and graphdiet on random rotor trees, and the
DP's optimum against exhaustive enumeration of every level assignment on 3- to 6-layer chains.
Every plan the table shows is re-weighed by graphdiet itself (the table's figures are graphdiet's,
and the run stops if one differs from the DP's prediction).

For each model and budget (90/70/50/30/20% of none's peak, the least feasible peak, and a dense
grid from the least feasible to none's peak: 12 budgets, 80 with --dense), auto's recompute FLOPs
(`plan --checkpoint auto --budget B`) beside the optimum's and the ratio; then per model, over the
distinct budgets where the optimum has a plan, those where auto is within 2%, the worst ratio,
auto's "no plan fits", auto's plans below the optimum (a plan outside the DP's space would show
there) and the wall time of auto's `plan`.
"""
import itertools
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["chain8", "chain16", "chain32", "chain64", "chain128", "chain256", "alt32", "wide32"]
MAX_LEVEL = 127
ELEMWISE = {"Add", "Sub", "Mul", "Div", "Tanh", "Relu", "Sigmoid", "Neg", "Exp", "Log", "Sqrt", "Pow"}
VIEWS = {"Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity"}
DTYPE_BYTES = {1: 4, 7: 8, 6: 4, 10: 2, 16: 2, 11: 8, 9: 1}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def plan(gd, model, args):
    rc, out, err = run([gd, "plan", model, "--loss-fn", "mse", "--format", "json"] + args)
    if rc not in (0, 1):
        sys.exit(f"graphdiet plan {model} {' '.join(args)}: {err.strip()}")
    return json.loads(out)


def weigh(gd, model, names, tmp):
    """graphdiet's own (peak, recompute FLOPs, steps) of a plan given as --checkpoint-file names."""
    f = os.path.join(tmp, "plan.yaml")
    with open(f, "w") as out:
        out.write("".join(f'- "{n}"\n' for n in names) or "[]\n")
    r = plan(gd, model, ["--checkpoint-file", f])
    return r["peak_bytes_after"], r["recompute_flops"], r["steps"]


# ---------------------------------------------------------------------------------------------
# Sim: graphdiet's schedule and memory accounting, re-implemented from their documentation
# (recompute.h, memsim.h) on the training graph `graphdiet train --loss-fn mse` writes.

class Sim:
    def __init__(self, path):
        m = onnx.shape_inference.infer_shapes(onnx.load(path))
        g = m.graph
        shapes, dtypes = {}, {}
        for v in list(g.input) + list(g.output) + list(g.value_info):
            t = v.type.tensor_type
            shapes[v.name] = [d.dim_value for d in t.shape.dim]
            dtypes[v.name] = t.elem_type
        for t in g.initializer:
            shapes[t.name], dtypes[t.name] = list(t.dims), t.data_type
        self.names, self.id = [], {}

        def vid(n):
            if n not in self.id:
                self.id[n] = len(self.names)
                self.names.append(n)
            return self.id[n]

        inits = {t.name for t in g.initializer}
        inputs = {v.name for v in g.input} - inits
        outputs = {v.name for v in g.output}
        for n in list(inits) + list(inputs):
            vid(n)
        self.nodes = []  # (op, [in ids or -1], [out ids], backward, attrs)
        loss_done = False
        for n in g.node:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            ins = [vid(x) if x else -1 for x in n.input]
            outs = [vid(x) for x in n.output]
            self.nodes.append((n.op_type, ins, outs, loss_done, attrs))
            if "loss" in n.output:
                loss_done = True  # autodiff appends the backward pass after the loss
        nv = len(self.names)
        numel = [1] * nv
        self.bytes = [0] * nv
        for v, n in enumerate(self.names):
            for d in shapes.get(n, []):
                numel[v] *= d
            self.bytes[v] = numel[v] * DTYPE_BYTES[dtypes.get(n, 1)]
        self.numel = numel
        self.producer = [-1] * nv
        for i, (_, _, outs, _, _) in enumerate(self.nodes):
            for v in outs:
                self.producer[v] = i
        self.pinned = [n in inits or n in inputs or n in outputs for n in self.names]
        self.droppable = [self.producer[v] >= 0 and not self.nodes[self.producer[v]][3] and n not in outputs
                          for v, n in enumerate(self.names)]
        self.resident = sum(self.bytes[self.id[n]] for n in list(inits) + list(inputs))
        self.shapes = shapes
        self.flops = [self.node_flops(nd) for nd in self.nodes]

    def node_flops(self, nd):
        op, ins, outs, _, attrs = nd
        if op == "Gemm":
            a = self.shapes[self.names[ins[0]]]
            k = a[0] if attrs.get("transA") else a[1]
            return 2 * self.numel[outs[0]] * k + (self.numel[outs[0]] if len(ins) > 2 and ins[2] >= 0 else 0)
        return self.numel[outs[0]] if op in ELEMWISE else 0

    def schedule(self, keep):
        """recompute_schedule: keep[v] as recompute.h (odd kept, even 2k level k, 0 innermost)."""
        nodes, producer = self.nodes, self.producer

        def dropped(v):
            return v >= 0 and self.droppable[v] and not keep.get(v, 0) & 1

        def level(v):
            k = keep.get(v, 0)
            return k // 2 if k and not k & 1 else 128

        made, times, steps = {}, {}, []

        def do_pass(v):
            stack = [v]
            while stack:
                u = stack[-1]
                if made.get(u):
                    stack.pop()
                    continue
                p = producer[u]
                miss = next((x for x in nodes[p][1] if dropped(x) and not made.get(x)), None)
                if miss is not None:
                    stack.append(miss)
                    continue
                for o in nodes[p][2]:
                    if not made.get(o):
                        made[o] = 2
                times[p] = times.get(p, 0) + 1
                steps.append((p, times[p]))
                stack.pop()

        def recompute(v):
            while not made.get(v):
                first = len(steps)
                walked, seen, stack = [], {v}, [v]
                while stack:
                    u = stack.pop()
                    walked.append(u)
                    for x in nodes[producer[u]][1]:
                        if dropped(x) and not made.get(x) and x not in seen:
                            seen.add(x)
                            stack.append(x)
                low = min(level(u) for u in walked)
                if level(v) == low:
                    do_pass(v)
                else:
                    for u in reversed(walked):
                        if level(u) == low and not made.get(u):
                            do_pass(u)
                for p, _ in steps[first:]:
                    for u in nodes[p][2]:
                        if made.get(u) == 2:
                            made[u] = 0 if dropped(u) and level(u) > low else 1

        for i, nd in enumerate(nodes):
            if nd[3]:
                for x in nd[1]:
                    if dropped(x) and not made.get(x):
                        recompute(x)
            steps.append((i, 0))
        return steps, dropped

    def weigh(self, keep, trace=False):
        """memsim_schedule: (peak, recompute FLOPs, steps[, live at each step, live after it])."""
        steps, dropped = self.schedule(keep)
        nodes, nb, pinned, nv = self.nodes, self.bytes, self.pinned, len(self.names)
        copy, left, nxt = {}, {}, nv

        def in_id(st, x):
            return copy[x] if (st[1] or nodes[st[0]][3]) and dropped(x) else x

        ids = []
        for st in steps:
            row = [in_id(st, x) if x >= 0 else -1 for x in nodes[st[0]][1]]
            for i in row:
                if i >= 0:
                    left[i] = left.get(i, 0) + 1
            if st[1]:
                for o in nodes[st[0]][2]:
                    copy[o] = nxt
                    nxt += 1
            ids.append(row)
        live = peak = self.resident
        flops, at, after, nxt = 0, [], [], nv
        for st, row in zip(steps, ids):
            op, ins, outs, _, _ = nodes[st[0]]
            if st[1]:
                flops += self.flops[st[0]]
                oid = []
                for o in outs:
                    copy[o] = nxt
                    oid.append(nxt)
                    nxt += 1
            else:
                oid = outs
            for o in outs:
                live += nb[o]
            taken = -1
            t = 0 if op in VIEWS else 2 if op == "Gemm" and len(ins) == 3 else -1
            if t >= 0 and ins[t] >= 0 and nb[ins[t]] == nb[outs[0]]:
                i = row[t]
                if left[i] == 1 and (i >= nv or not pinned[i]):
                    live -= nb[ins[t]]
                    taken = i
            if taken < 0 and op in ELEMWISE:
                for k, x in enumerate(ins):
                    i = row[k]
                    if x < 0 or self.numel[x] != self.numel[outs[0]] or (i < nv and pinned[i]):
                        continue
                    if left[i] == row.count(i):
                        live -= nb[x]
                        taken = i
                        break
            at.append(live)
            peak = max(peak, live)
            for o, i in zip(outs, oid):
                if (st[1] or not pinned[o]) and left.get(i, 0) == 0:
                    live -= nb[o]
            for x, i in zip(ins, row):
                if x < 0 or not left.get(i):
                    continue
                left[i] -= 1
                if left[i] == 0 and (i >= nv or not pinned[x]) and i != taken:
                    live -= nb[x]
            after.append(live)
        if trace:
            return peak, flops, len(steps), steps, at, after
        return peak, flops, len(steps)


# ---------------------------------------------------------------------------------------------
# The chain and its DP.

class Chain:
    """Stages k = 1 .. L: Gemm_k (z_k) and Tanh_k (t_k); t_0 is the input, t_L the output y."""

    def __init__(self, sim, path):
        self.sim = sim
        fwd = [i for i, nd in enumerate(sim.nodes) if not nd[3]]
        gemms = [i for i in fwd if sim.nodes[i][0] == "Gemm"]
        self.L = L = len(gemms)
        self.t = [sim.nodes[gemms[0]][1][0]] + [sim.nodes[i + 1][2][0] for i in gemms]
        if not gemms or any(sim.nodes[i + 1][0] != "Tanh" for i in gemms):
            sys.exit(f"exact_chains.py: {path}: not a chain of Gemm + Tanh layers")
        self.z = [-1] + [sim.nodes[i][2][0] for i in gemms]
        self.diff = next(sim.nodes[i][2][0] for i in fwd if sim.nodes[i][0] == "Sub")
        self.s = [sim.bytes[v] for v in self.t]
        self.u = [0] + [sim.flops[i] + sim.flops[i + 1] for i in gemms]
        self.udiff = sim.flops[sim.producer[self.diff]]
        self.S = [0] * (L + 1)  # S[r] = s_1 + .. + s_r
        for r in range(1, L + 1):
            self.S[r] = self.S[r - 1] + self.s[r]
        self.U = [0] * (L + 1)
        for r in range(1, L + 1):
            self.U[r] = self.U[r - 1] + self.u[r]
        self.name = lambda v: sim.names[v]
        self._terms()

    def keep_all(self, diff_kept):
        k = {v: 1 for v in self.t[1:self.L]}
        k.update({v: 1 for v in self.z[1:]})
        k[self.diff] = 1 if diff_kept else 0
        return k

    def _terms(self):
        """base(step) = live - the bytes of t_1 .. t_r(step), from the everything-kept schedule."""
        sim, L, S = self.sim, self.L, self.S
        r1, r2 = {}, {}  # first and last backward reader of t_j (node index)
        for i, nd in enumerate(sim.nodes):
            if nd[3]:
                for j, v in enumerate(self.t):
                    if v in nd[1]:
                        r1.setdefault(j, i)
                        r2[j] = i
        gemm = {sim.producer[self.z[k]]: k for k in range(1, L + 1)}
        tanh = {sim.producer[self.t[k]]: k for k in range(1, L + 1)}
        first_bwd = next(i for i, nd in enumerate(sim.nodes) if nd[3])
        # each step holds t_1 .. t_r of what a plan keeps: forward Gemm_i r = i - 2 (t_{i-1} is its
        # input), Tanh_i r = i - 1; the loss and its backward r = L - 1; stage k's backward r = k - 1,
        # t_k (read first by its Tanh's gradient) part of the base, and t_{k-1} held from its
        # first backward reader (dW_k, the trigger: beta is the base just before it) on (e3)
        self.fwd = {}  # diff kept (1) or not (0) -> [(r, base)] of the forward Gemm and Tanh steps
        self.loss = {}  # diff kept or not -> the highest base of the loss's steps
        e12, e3, beta = [0] * (L + 2), [0] * (L + 2), [0] * (L + 1)
        for dk in (0, 1):
            _, _, _, steps, at, after = sim.weigh(self.keep_all(dk), trace=True)
            fw, lo = [], 0
            for n, ((i, c), live) in enumerate(zip(steps, at)):
                if i in gemm and not c:
                    r = max(gemm[i] - 2, 0)
                    fw.append((r, live - S[r]))
                elif i in tanh and not c:
                    r = tanh[i] - 1
                    fw.append((r, live - S[r]))
                elif i < first_bwd or i < r2[L] or c:
                    lo = max(lo, live - S[L - 1])
                else:
                    k = next(k for k in range(1, L + 1) if i >= r2[k])  # stage k's backward
                    b = live - S[k - 1]
                    if i < r1[k - 1]:
                        e12[k] = max(e12[k], b)
                        if dk and steps[n + 1][0] == r1.get(k - 1):
                            beta[k - 1] = after[n] - S[k - 1]
                    else:
                        e3[k] = max(e3[k], b)
            self.fwd[dk], self.loss[dk] = fw, lo
        self.e12, self.e3, self.beta = e12, e3, beta
        self.fmax = {}
        for dk in (0, 1):
            per = [0] * (L + 1)  # the highest base of forward steps by r
            for r, b in self.fwd[dk]:
                per[r] = max(per[r], b)
            self.fmax[dk] = per

    def fseg(self, dk, a, b):
        """max base of the steps whose held t's are those up to a, when a and b are consecutive kept."""
        per = self.fmax[dk]
        m = max(per[a:b]) if b > a else 0
        return max(m, self.loss[dk]) if b == self.L else m


def combine(A, B, ca, floor):
    """Pareto list of max(floor, ca + A.need, B.need), A.flops + B.flops: (need, flops, ia, ib)."""
    out, ia, ib = [], 0, 0
    na, nb = len(A), len(B)
    if not na or not nb:
        return out
    # walk every breakpoint: the least need at which each pair of entries is reachable
    pts = sorted({max(floor, ca + A[i][0]) for i in range(na)} | {max(floor, B[i][0]) for i in range(nb)})
    for n in pts:
        while ia + 1 < na and ca + A[ia + 1][0] <= n:
            ia += 1
        while ib + 1 < nb and B[ib + 1][0] <= n:
            ib += 1
        if ca + A[ia][0] > n or B[ib][0] > n:
            continue
        f = A[ia][1] + B[ib][1]
        if not out or f < out[-1][1]:
            out.append((n, f, ia, ib))
    return out


def pareto(cands, cap):
    """cands: (need, flops, choice); the entries no other beats, need <= cap."""
    cands.sort(key=lambda e: (e[0], e[1]))
    out = []
    for e in cands:
        if e[0] <= cap and (not out or e[1] < out[-1][1]):
            out.append(e)
    return out


class DP:
    def __init__(self, ch, cap):
        self.ch, self.cap = ch, cap
        L, s, beta = ch.L, ch.s, ch.beta
        self.opt = {}
        for j in range(0, L):
            self.opt[(j, j)] = [(ch.e3[j + 1], 0, None)]
        for length in range(1, L):
            for a in range(0, L - length):
                j = a + length
                cands, sw = [], 0
                for sp in range(a + 1, j + 1):
                    sw = max(sw, (s[sp - 1] if sp - 1 > a else 0) + s[sp])
                    if beta[j] + sw > cap:
                        break
                    floor = max(beta[j] + sw, ch.e12[sp])
                    for n, f, ia, ib in combine(self.opt[(sp, j)], self.opt[(a, sp - 1)], s[sp], floor):
                        cands.append((n, f + ch.U[sp] - ch.U[a], (sp, ia, ib)))
                self.opt[(a, j)] = pareto(cands, cap)
        self.top = {}
        for a in range(L - 1, -1, -1):
            cands = []
            for dk in (0, 1):  # the last segment, with the loss's difference kept or dropped
                floor = max(ch.fseg(dk, a, L), ch.e12[L])
                for n, f, ia, _ in combine(self.opt[(a, L - 1)], [(0, 0)], 0, floor):
                    cands.append((n, f + (0 if dk else ch.udiff), (L, dk, ia, 0)))
            for b in range(a + 1, L):
                floor = max(ch.fseg(1, a, b), ch.e12[b])
                for n, f, ia, ib in combine(self.top[b], self.opt[(a, b - 1)], s[b], floor):
                    cands.append((n, f, (b, None, ia, ib)))
            self.top[a] = pareto(cands, cap)

    def plan(self, idx):
        """keep (by value id) and names of Top(0)'s entry idx; the deepest level used."""
        ch, keep, deep = self.ch, {}, [1]

        def opt(a, j, i, d):
            while a < j:
                sp, ia, ib = self.opt[(a, j)][i][2]
                keep[ch.t[sp]] = 2 * d
                deep[0] = max(deep[0], d)
                opt(a, sp - 1, ib, d + 1)
                a, i = sp, ia

        a, i = 0, idx
        while True:
            b, dk, ia, ib = self.top[a][i][2]
            if b == ch.L:
                opt(a, ch.L - 1, ia, 2)
                keep[ch.diff] = 1 if dk else 0
                break
            keep[ch.t[b]] = 1
            opt(a, b - 1, ib, 2)
            a, i = b, ia
        names = []
        for v, k in keep.items():
            if k == 1:
                names.append(ch.name(v))
            elif k:
                names.append(f"{ch.name(v)}@{k // 2}")
        return keep, names, deep[0]


class BudgetDP:
    """The same recurrence at one budget B, vectorised (numpy) over the bytes held outside a
    subproblem, n units of g = gcd of the t's bytes: T[a, j, n] = the fewest FLOPs of Opt(a, j)
    with every step at most B - n g (inf: none). O(L^3 N) per budget, N = B / g at most."""

    def __init__(self, ch, B):
        L, s = ch.L, ch.s
        g = 0
        for x in s[1:L]:
            g = math.gcd(g, x)
        g = g or 1
        k = np.array([x // g for x in s], dtype=np.int64)
        lo = min(min(ch.e3[1:L + 1]), min(ch.beta[:L]))
        N = max(0, min((B - lo) // g, ch.S[L - 1] // g)) + 1  # more held than that fits nothing
        self.ch, self.B, self.g, self.k, self.N = ch, B, g, k, N
        room = B - g * np.arange(N, dtype=np.int64)  # what a subproblem may use, n units held
        kmax = int(k.max())
        T = np.full((L, L, N + kmax + 1), np.inf)  # the columns past N: more held than fits
        arg = np.zeros((L, L, N), dtype=np.int16)
        e3 = np.array(ch.e3, dtype=np.int64)
        T[np.arange(L), np.arange(L), :N] = np.where(e3[1:L + 1, None] <= room[None, :], 0.0, np.inf)
        U = np.array(ch.U, dtype=np.float64)
        beta = np.array(ch.beta, dtype=np.int64)
        e12 = np.array(ch.e12, dtype=np.int64)
        sa = np.array(s, dtype=np.int64)
        # SW[a, q] = the most a sweep a -> a + q holds of its own: max over a < i <= a + q of
        # s_{i-1} (not when i - 1 = a) + s_i
        pair = np.zeros(L + 1, dtype=np.int64)
        pair[1:] = sa[1:] + sa[:-1]
        nidx = np.arange(N)
        for length in range(1, L):
            a = np.arange(0, L - length)
            q = np.arange(1, length + 1)
            sp = a[:, None] + q[None, :]  # (na, l)
            j = a + length
            own = np.where(q[None, :] == 1, sa[sp], pair[sp])
            sw = np.maximum.accumulate(own, axis=1)
            floor = np.maximum(beta[j][:, None] + sw, e12[sp])  # (na, l)
            inner = T[sp[:, :, None], j[:, None, None], nidx[None, None, :] + k[sp][:, :, None]]
            after = T[a[:, None, None], (sp - 1)[:, :, None], nidx[None, None, :]]
            v = inner + after + (U[sp] - U[a][:, None])[:, :, None]
            v[floor[:, :, None] > room[None, None, :]] = np.inf
            best = v.argmin(axis=1)
            T[a, j, :N] = np.take_along_axis(v, best[:, None, :], axis=1)[:, 0, :]
            arg[a, j] = best + 1
        self.T, self.arg = T, arg
        # Top(a)[n]: the suffix after kept t_a, n units kept before it
        top = np.full((L + 1, N + kmax + 1), np.inf)
        targ = [None] * L
        for a in range(L - 1, -1, -1):
            best, choice = np.full(N, np.inf), np.zeros(N, dtype=np.int64)
            for dk in (0, 1):
                floor = max(ch.fseg(dk, a, L), ch.e12[L])
                v = T[a, L - 1, :N] + (0 if dk else ch.udiff)
                v = np.where(floor <= room, v, np.inf)
                better = v < best
                best, choice = np.where(better, v, best), np.where(better, -1 - dk, choice)
            for b in range(a + 1, L):
                floor = max(ch.fseg(1, a, b), ch.e12[b])
                v = top[b, k[b]:k[b] + N] + T[a, b - 1, :N]
                v = np.where(floor <= room, v, np.inf)
                better = v < best
                best, choice = np.where(better, v, best), np.where(better, b, choice)
            top[a, :N], targ[a] = best, choice
        self.top, self.targ = top, targ
        self.flops = None if np.isinf(top[0, 0]) else int(top[0, 0])

    def plan(self):
        """keep (by value id), --checkpoint-file names and the deepest level of the optimum."""
        ch, keep, deep = self.ch, {}, [1]

        def opt(a, j, n, d):
            while a < j:
                sp = a + int(self.arg[a, j, n])
                keep[ch.t[sp]] = 2 * d
                deep[0] = max(deep[0], d)
                opt(a, sp - 1, n, d + 1)
                a, n = sp, n + int(self.k[sp])

        a, n = 0, 0
        while True:
            b = int(self.targ[a][n])
            if b < 0:
                opt(a, ch.L - 1, n, 2)
                keep[ch.diff] = 1 if b == -2 else 0
                break
            keep[ch.t[b]] = 1
            opt(a, b - 1, n, 2)
            a, n = b, n + int(self.k[b])
        return keep, names_of(ch, keep), deep[0]


def names_of(ch, keep):
    return [ch.name(v) if k == 1 else f"{ch.name(v)}@{k // 2}" for v, k in keep.items() if k]


def least_need(ch):
    """The least peak of any plan in the space: the recurrence with max for + and min for Pareto."""
    L, s = ch.L, ch.s
    MN = {(j, j): ch.e3[j + 1] for j in range(L)}
    for length in range(1, L):
        for a in range(0, L - length):
            j, best, sw = a + length, None, 0
            for sp in range(a + 1, j + 1):
                sw = max(sw, (s[sp - 1] if sp - 1 > a else 0) + s[sp])
                v = max(ch.beta[j] + sw, ch.e12[sp], s[sp] + MN[(sp, j)], MN[(a, sp - 1)])
                best = v if best is None else min(best, v)
            MN[(a, j)] = best
    MT = {}
    for a in range(L - 1, -1, -1):
        best = max(min(ch.fseg(0, a, L), ch.fseg(1, a, L)), ch.e12[L], MN[(a, L - 1)])
        for b in range(a + 1, L):
            best = min(best, max(ch.fseg(1, a, b), ch.e12[b], MN[(a, b - 1)], s[b] + MT[b]))
        MT[a] = best
    return MT[0]


# ---------------------------------------------------------------------------------------------
# Checks (--validate): the simulation against graphdiet, the recurrence against the simulation
# on random plans of its space, and against exhaustive enumeration on short chains.

def random_plan(ch, rng):
    """Any level assignment: t's kept, dropped or at a level; a few z's kept or levelled too."""
    keep = {ch.diff: rng.randint(0, 1)}
    for j in range(1, ch.L):
        r = rng.random()
        keep[ch.t[j]] = 1 if r < 0.3 else 0 if r < 0.5 else 2 * rng.randint(2, min(MAX_LEVEL, ch.L + 2))
    for j in range(1, ch.L + 1):
        if rng.random() < 0.1:
            keep[ch.z[j]] = rng.choice([1, 4, 6])
    return keep


def random_tree(ch, rng):
    """A random plan of the DP's space and the recurrence's (need, FLOPs) for it."""
    s, keep = ch.s, {}

    def opt(a, j, d):
        if a == j:
            return ch.e3[j + 1], 0
        sp = a + 1 if d >= MAX_LEVEL - 1 else rng.randint(a + 1, j)
        keep[ch.t[sp]] = 2 * d
        sw = max((s[i - 1] if i - 1 > a else 0) + s[i] for i in range(a + 1, sp + 1))
        n1, f1 = opt(sp, j, d)
        n2, f2 = opt(a, sp - 1, d + 1)
        return max(ch.beta[j] + sw, ch.e12[sp], s[sp] + n1, n2), ch.U[sp] - ch.U[a] + f1 + f2

    kept = sorted(rng.sample(range(1, ch.L), rng.randint(0, ch.L - 1)))
    dk = rng.randint(0, 1)
    keep[ch.diff] = dk
    need, flops, held = 0, 0 if dk else ch.udiff, 0
    for a, b in zip([0] + kept, kept + [ch.L]):
        n, f = opt(a, b - 1, 2)
        need = max(need, held + max(ch.fseg(dk if b == ch.L else 1, a, b), ch.e12[b], n))
        flops += f
        if b < ch.L:
            keep[ch.t[b]] = 1
            held += s[b]
    return keep, need, flops


def front(entries):
    out = []
    for n, f in sorted(entries):
        if not out or f < out[-1][1]:
            out.append((n, f))
    return out


def validate(gd, models, tmp, rng):
    bad = 0

    def check(what, ok, detail):
        nonlocal bad
        if not ok:
            bad += 1
            print(f"  MISMATCH {what}: {detail}")

    for name, (onnx_path, ch) in models.items():
        n_sim = n_tree = 0
        for _ in range(40):
            keep = random_plan(ch, rng)
            a, b = ch.sim.weigh(keep), weigh(gd, onnx_path, names_of(ch, keep), tmp)
            check(f"{name} Sim", a == b, f"{names_of(ch, keep)}: Sim {a}, graphdiet {b}")
            n_sim += 1
        for i in range(30):
            keep, need, flops = random_tree(ch, rng)
            a = ch.sim.weigh(keep)
            check(f"{name} tree", (need, flops) == a[:2], f"{names_of(ch, keep)}: DP {need, flops}, Sim {a}")
            if i < 10:
                b = weigh(gd, onnx_path, names_of(ch, keep), tmp)
                check(f"{name} tree", a == b, f"{names_of(ch, keep)}: Sim {a}, graphdiet {b}")
            n_tree += 1
        msg = f"{name}: Sim = graphdiet on {n_sim} random plans; DP = Sim on {n_tree} random trees (10 re-weighed)"
        if ch.L <= 64:
            dp = DP(ch, 1 << 62)
            fr = [(n, f) for n, f, _ in dp.top[0]]
            for i, (n, f) in enumerate(fr):
                keep, names, _ = dp.plan(i)
                check(f"{name} Pareto", ch.sim.weigh(keep)[:2] == (n, f) == weigh(gd, onnx_path, names, tmp)[:2],
                      f"entry {i} {n, f}")
            check(f"{name} least", least_need(ch) == fr[0][0], f"{least_need(ch)} against {fr[0][0]}")
            for n, f in fr[::max(1, len(fr) // 12)]:
                for B in (n - 1, n):
                    want = min([g for m, g in fr if m <= B], default=None)
                    got = BudgetDP(ch, B).flops
                    check(f"{name} budget DP", got == want, f"B {B}: {got} against {want}")
            msg += f"; Pareto DP: {len(fr)} plans re-weighed, the budget DP agrees"
        if ch.L <= 6:  # every level of every t (on 3 layers, of every z too) and the difference
            lev = [1] + list(range(2, ch.L + 2)) + [128]
            vals = ch.t[1:ch.L] + (ch.z[1:] if ch.L <= 3 else [])
            pts = []
            for combo in itertools.product(lev, repeat=len(vals)):
                for dk in (0, 1):
                    keep = {v: (1 if x == 1 else 2 * x) for v, x in zip(vals, combo)}
                    keep[ch.diff] = dk
                    pts.append(ch.sim.weigh(keep)[:2])
            check(f"{name} exhaustive", front(pts) == fr, f"{front(pts)} against {fr}")
            msg += f"; Pareto front = exhaustive enumeration of {len(pts)} plans"
        print(msg)
        sys.stdout.flush()
    return bad


# ---------------------------------------------------------------------------------------------

def ratio(ours, ref):
    if ours is None or ref is None:
        return "—"
    if ref == 0:
        return "1.000" if ours == 0 else "inf"
    return f"{ours / ref:.3f}"


def mb(x):
    return f"{x / 2**20:.2f} MiB"


def bench(gd, name, onnx_path, ch, n_dense, tmp):
    none = plan(gd, onnx_path, ["--checkpoint", "none"])["peak_bytes_before"]
    least = least_need(ch)
    fixed = [(f"{p}%", int(none * p / 100)) for p in (90, 70, 50, 30, 20)] + [("least", least)]
    dense = [("grid", least + (none - least) * i // (n_dense - 1)) for i in range(n_dense)] if n_dense > 1 else []
    rows, within, noplan, below, n_ref, times, cache = [], 0, 0, 0, 0, [], {}
    for label, B in fixed + dense:
        if B not in cache:
            dp = BudgetDP(ch, B)
            ref = None
            if dp.flops is not None:
                keep, names, deep = dp.plan()
                w = weigh(gd, onnx_path, names, tmp)
                s = ch.sim.weigh(keep)
                if w != s or w[1] != dp.flops or w[0] > B or deep > MAX_LEVEL:
                    sys.exit(f"{name} at {B}: the optimum's plan weighs {w} in graphdiet, {s} in Sim, DP {dp.flops}"
                             f" (depth {deep}): the model is wrong")
                ref = (w[0], w[1], deep)
            t0 = time.time()
            a = plan(gd, onnx_path, ["--checkpoint", "auto", "--budget", str(B)])
            times.append(time.time() - t0)
            cache[B] = (ref, (a["peak_bytes_after"], a["recompute_flops"], bool(a["fits"])))
        ref, (apk, afl, fits) = cache[B]
        ours = afl if fits else None
        if label != "grid":
            opt = f"{ref[0]:,} | {ref[1]:,} | {ref[2]}" if ref else "— (no plan fits) | — | —"
            rows.append(f"| {name} | {label} | {B:,} | {opt} | {apk:,}{'' if fits else ' (no plan fits)'} | "
                        f"{f'{afl:,}' if fits else '—'} | {ratio(ours, ref[1] if ref else None)} |")
    worst = 1.0
    for ref, (_, afl, fits) in cache.values():  # each distinct budget once
        if ref:
            n_ref += 1
            noplan += not fits
            within += fits and afl <= 1.02 * ref[1]
            if fits and afl > ref[1]:
                worst = max(worst, afl / ref[1] if ref[1] else float("inf"))
        below += fits and (ref is None or afl < ref[1])  # a plan outside the DP's space beats it
    times.sort()
    summary = (f"| {name} | {mb(none)} | {mb(least)} ({least / none:.1%}) | {within}/{n_ref} | {worst:.3f} | "
               f"{noplan} | {below} | {times[len(times) // 2]:.2f} / {times[-1]:.2f} s |")
    return rows, summary


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    build = args[0] if args else "build"
    out = args[1] if len(args) > 1 else tempfile.mkdtemp()
    gd = os.path.join(build, "graphdiet")
    names = MODELS
    for f in flags:
        if f.startswith("--models="):
            names = f.split("=", 1)[1].split(",")
        elif f not in ("--dense", "--validate"):
            sys.exit(f"exact_chains.py: unknown option {f}")
    if "--validate" in flags and "--models=" not in " ".join(flags):
        names = ["chain3", "chain4", "chain5", "chain6"] + MODELS
    os.makedirs(out, exist_ok=True)
    if any(not os.path.exists(os.path.join(out, n + ".onnx")) for n in names):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_plan_models.py"), "--chains", out], check=True,
                       stderr=subprocess.DEVNULL)
    tmp = tempfile.mkdtemp()
    models = {}
    for n in names:
        src, tr = os.path.join(out, n + ".onnx"), os.path.join(out, n + ".train.onnx")
        rc, _, err = run([gd, "train", src, "--loss-fn", "mse", "-o", tr])
        if rc:
            sys.exit(f"graphdiet train {src}: {err.strip()}")
        models[n] = (src, Chain(Sim(tr), src))
    if "--validate" in flags:
        bad = validate(gd, models, tmp, random.Random(49))
        print(f"validation: {bad} mismatches")
        sys.exit(1 if bad else 0)
    n_dense = 80 if "--dense" in flags else 12
    print("| model | budget | B (bytes) | optimum: peak | optimum: recompute FLOPs | optimum: deepest level | "
          "auto: peak | auto: recompute FLOPs | auto / optimum |")
    print("|---|---|---|---|---|---|---|---|---|")
    summaries = []
    for n, (src, ch) in models.items():
        rows, summary = bench(gd, n, src, ch, n_dense, tmp)
        print("\n".join(rows))
        sys.stdout.flush()
        summaries.append(summary)
    print()
    print(f"| model | none's peak | least feasible peak | auto within 2% of the optimum (the distinct budgets of the "
          f"{n_dense}-budget grid and the 6 above where the optimum has a plan) | auto / optimum, worst where both "
          "have one | auto's \"no plan fits\" where the optimum has one | auto below the optimum (a plan outside "
          "its space) | auto's `plan` wall time, median / slowest |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(summaries))


if __name__ == "__main__":
    main()
