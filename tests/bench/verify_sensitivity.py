#!/usr/bin/python3
"""How sharp verify's default criterion is on 16-bit training graphs (issue 48): for each model and
precision, a correct training graph must pass `graphdiet verify MODEL TRAIN`, and the same graph with
one gradient scaled by FACTOR (a Mul after the node that makes it, in the YAML) must fail, for every
gradient in turn. Prints one row per model and precision: outputs, whether the correct graph
passed with the defaults and with README's --rtol 0.05 --atol 1e-3, how many scaled gradients
failed, and the ones that did not with their floor (the norm rel of MODEL's own 16-bit gradients).

    /usr/bin/python3 tests/bench/verify_sensitivity.py [--factor 1.01] [--graphdiet build/graphdiet]
        [MODEL.onnx ...]

Without models: testdata's mlp, transformer and rescnn, testdata/verify's lm4 and bert, and a
LLaMA-like model tests/bench/gen_llama.py writes (2 layers, d 64).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scaled(src, dst, name, factor):
    s = open(src).read()
    want = "    outputs: [%s]\n" % name
    i = s.index(want)
    s = s[:i] + "    outputs: [%s_unscaled]\n" % name + s[i + len(want):]
    j = re.compile(r"\n(  - name:|\S)").search(s, i).start() + 1
    s = s[:j] + ("  - name: off_factor\n    op: Constant\n    inputs: []\n    outputs: [off_factor]\n"
                 "    attrs:\n      value_float: %r\n  - name: off_by_factor\n    op: Mul\n"
                 "    inputs: [%s_unscaled, off_factor]\n    outputs: [%s]\n" % (factor, name, name)) + s[j:]
    open(dst, "w").write(s)


def rows(out):
    """name -> (norm rel, floor, verdict) of verify's table."""
    got = {}
    for line in out.splitlines()[2:]:
        f = line.split()
        if len(f) >= 7 and f[-1] in ("ok", "DIFFERS"):
            got[f[0]] = (float(f[4]), float(f[5]), f[-1])
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--factor", type=float, default=1.01)
    ap.add_argument("--graphdiet", default=os.path.join(ROOT, "build", "graphdiet"))
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    gd = a.graphdiet
    tmp = tempfile.mkdtemp(prefix="verify_sensitivity.")
    models = a.models
    if not models:
        llama = os.path.join(tmp, "llama.onnx")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/bench/gen_llama.py"), llama, "--layers", "2",
                        "--d", "64", "--heads", "4", "--ffn", "172", "--vocab", "128", "--max-seq", "16", "--random"],
                       check=True, capture_output=True)
        models = [os.path.join(ROOT, "testdata", m) for m in
                  ("mlp.onnx", "transformer.onnx", "rescnn.onnx", "verify/lm4.onnx", "verify/bert.onnx")] + [llama]
    print("| model | precision | outputs | correct: defaults | README's flags | x%g failed | passed (floor) |" % a.factor)
    print("|---|---|---|---|---|---|---|")
    total = caught = 0
    for m in models:
        for p in ("fp16", "bf16"):
            t, s = os.path.join(tmp, "t.yaml"), os.path.join(tmp, "s.yaml")
            subprocess.run([gd, "train", m, "--precision", p, "-o", t], check=True, capture_output=True)
            r = subprocess.run([gd, "verify", m, t], capture_output=True, text=True)
            rf = subprocess.run([gd, "verify", m, t, "--rtol", "0.05", "--atol", "1e-3"], capture_output=True, text=True)
            got = rows(r.stdout)
            grads = [n for n in got if n.endswith("_grad")]
            missed = []
            for n in grads:
                scaled(t, s, n, a.factor)
                q = subprocess.run([gd, "verify", m, s], capture_output=True, text=True)
                if q.returncode != 1:
                    missed.append("%s (%.3g)" % (n, got[n][1]))
            total += len(grads)
            caught += len(grads) - len(missed)
            print("| %s | %s | %d | %s | %s | %d of %d | %s |" % (
                os.path.basename(m), p, len(got), "pass" if r.returncode == 0 else "FAIL",
                "pass" if rf.returncode == 0 else "FAIL", len(grads) - len(missed), len(grads),
                ", ".join(missed) or "-"))
    print("\n%d of %d gradients scaled by %g failed verify's defaults" % (caught, total, a.factor))


if __name__ == "__main__":
    main()
