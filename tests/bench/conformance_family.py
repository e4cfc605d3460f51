#!/usr/bin/python3
"""conformance_family.py - runs libonnx-testdata node tests whose names match a pattern through
`graphdiet run` and prints a table: pass, refused (exit 2), wrong (value/shape/dtype), crash.

usage: conformance_family.py GRAPHDIET REGEX [-v]
Floats compare with rtol 1e-4, atol 1e-5, NaN equal; integers and bools exactly; shape and dtype
must match (issue 47's rule)."""
import glob, os, re, subprocess, sys, tempfile
import numpy as np
import onnx
from onnx import numpy_helper

ROOT = "/usr/share/libonnx-testdata/data"


def load(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def run_one(gd, d, verbose):
    m = onnx.load(os.path.join(d, "model.onnx"))
    init = {i.name for i in m.graph.initializer}
    ins = [i.name for i in m.graph.input if i.name not in init]
    outs = [o.name for o in m.graph.output]
    for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        with tempfile.TemporaryDirectory() as tmp:
            args = [gd, "run", os.path.join(d, "model.onnx"), "-o", os.path.join(tmp, "out")]
            for k, p in enumerate(sorted(glob.glob(os.path.join(ds, "input_*.pb")),
                                         key=lambda s: int(re.findall(r"\d+", os.path.basename(s))[0]))):
                name, a = load(p)
                name = name or ins[k]
                f = os.path.join(tmp, "in%d.npy" % k)
                np.save(f, a)
                args += ["-i", "%s=%s" % (name, f)]
            try:
                r = subprocess.run(args, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                return "timeout", ""
            if r.returncode == 2:
                return "refused", r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            if r.returncode != 0:
                return "crash", "rc %d %s" % (r.returncode, r.stderr.strip()[-200:])
            for k, p in enumerate(sorted(glob.glob(os.path.join(ds, "output_*.pb")),
                                         key=lambda s: int(re.findall(r"\d+", os.path.basename(s))[0]))):
                name, want = load(p)
                name = name or outs[k]
                f = os.path.join(tmp, "out", name + ".npy")
                if not os.path.exists(f):
                    return "wrong", "no output " + name
                got = np.load(f)
                if got.shape != want.shape or got.dtype != want.dtype:
                    return "wrong", "%s: %s %s, want %s %s" % (name, got.dtype, got.shape, want.dtype, want.shape)
                if want.dtype.kind == "f":
                    ok = np.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
                else:
                    ok = np.array_equal(got, want)
                if not ok:
                    return "wrong", "%s: values differ (max |d| %s)" % (
                        name, np.max(np.abs(got.astype(np.float64) - want)) if got.size else 0)
    return "pass", ""


def main():
    gd, pat = sys.argv[1], re.compile(sys.argv[2])
    verbose = "-v" in sys.argv
    counts = {}
    rows = []
    for kind in ("node", "pytorch-converted", "pytorch-operator", "simple"):
        for d in sorted(glob.glob(os.path.join(ROOT, kind, "test_*"))):
            name = os.path.basename(d)
            if not pat.search(name):
                continue
            try:
                res, why = run_one(gd, d, verbose)
            except Exception as ex:  # data numpy_helper cannot read (sequences, strings of other shapes)
                res, why = "unreadable", str(ex)[:120]
            counts[res] = counts.get(res, 0) + 1
            rows.append((kind + "/" + name, res, why))
    for r in rows:
        if verbose or r[1] != "pass":
            print("%-70s %-8s %s" % r)
    total = sum(counts.values())
    print("| tests | pass | refused | wrong | crash | timeout | unreadable data |")
    print("|---|---|---|---|---|---|---|")
    print("| %d | %d | %d | %d | %d | %d | %d |" % (total, counts.get("pass", 0), counts.get("refused", 0),
                                                   counts.get("wrong", 0), counts.get("crash", 0),
                                                   counts.get("timeout", 0), counts.get("unreadable", 0)))


main()
