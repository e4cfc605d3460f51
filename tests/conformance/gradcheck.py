#!/usr/bin/python3
"""The gradient side of ONNX's conformance tests: every node test of libonnx-testdata trained as
ONNX's own training tests would train it, its floating-point graph inputs as the parameters
(`train --params`) and the mean squared error of its first floating-point output as the loss
(`--loss-fn mse`), then `verify --gradcheck` (on random inputs, or the test's own, test_data_set_0,
where the loss is NaN on random ones: Log, Sqrt): the gradients against central finite differences
of the model's loss in float64 (a 16-bit graph widened), along directions where the loss is smooth
(no Relu, Clip, Max... decision differs between the runs). Integer inputs
(shapes, axes, indices) are made initializers holding the test's data first.

    tests/conformance/gradcheck.py [BUILD] [DATA_DIR] [-j N] [--min-pass N] [--list]

Each test ends as one of:
  pass          verify --gradcheck matched
  mismatch      it did not (exit 1): a wrong gradient, unless expected_gradcheck.txt says why not
  inconclusive  no direction tried was smooth (exit 4): nothing judged; listed, not a failure
  no gradient   nothing differentiable reaches the loss (integer outputs, ArgMax, comparisons, shapes)
  refused       train exited 2 for another reason (an op or form without a gradient rule); the
                reasons are counted
  error         a crash, a timeout or any other exit status
Exit status 1 when any test is a mismatch not listed in expected_gradcheck.txt, or an error, or
fewer than --min-pass pass; 77 (skipped) without the data."""
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

FLOAT = {"float16", "bfloat16", "float32", "float64"}
# ops whose outputs carry no gradient to floating-point inputs (ONNX defines none, PyTorch's is zero
# or absent): a test of these alone is "no gradient"; any other op reaching no parameter lacks a rule
NONDIFF = {"ArgMax", "ArgMin", "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Not", "And",
           "Or", "Xor", "IsNaN", "IsInf", "Shape", "Size", "NonZero", "Unique", "Round", "Floor", "Ceil",
           "Sign", "BitShift", "EyeLike", "ConstantOfShape", "Range", "Constant", "Hardmax", "OneHot",
           "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"}
HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, timeout=120):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", ""


def first_error(out):
    for line in out.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return out.strip().splitlines()[-1] if out.strip() else "?"


def reason(msg):
    """The refusal with the test's own names taken out, so that like refusals count together."""
    msg = re.sub(r"^/\S+: ", "", msg)
    msg = re.sub(r"'[^']*'", "'…'", msg)
    msg = re.sub(r"\d+", "N", msg)
    return msg[:110]


def freeze(test, model, keep, tmp):
    """The model with every graph input but `keep` made an initializer holding the test's data
    (test_data_set_0): shapes, axes, indices and scales are constants in the models people train,
    and only what the node computes on is trained."""
    import onnx
    m = onnx.load(os.path.join(test, "model.onnx"))
    g = m.graph
    inits = {i.name for i in g.initializer}
    feeds = [i for i in g.input if i.name not in inits]
    frozen = []
    for k, i in enumerate(feeds):
        if i.name in keep:
            continue
        pb = os.path.join(test, "test_data_set_0", f"input_{k}.pb")
        if not os.path.exists(pb):
            continue
        t = onnx.TensorProto()
        with open(pb, "rb") as f:
            t.ParseFromString(f.read())
        t.name = i.name
        g.initializer.append(t)
        frozen.append(i)
    if not frozen:
        return model
    for i in frozen:
        g.input.remove(i)
    if m.ir_version < 4:
        m.ir_version = 4  # initializers need not be graph inputs from IR 4
    out = os.path.join(tmp, os.path.basename(test) + ".frozen.onnx")
    onnx.save(m, out)
    return out


def one(gd, test, tmp):
    model = os.path.join(test, "model.onnx")
    rc, out = run([gd, "info", model, "--format", "json"])
    if rc != 0:
        return "refused", reason(first_error(out))
    info = json.loads(out)
    ins = [i["name"] for i in info["inputs"] if i["dtype"] in FLOAT]
    outs = [o["name"] for o in info["outputs"] if o["dtype"] in FLOAT]
    if not ins or not outs:
        return "no gradient", "no floating-point input or output"
    t = os.path.join(tmp, os.path.basename(test) + ".onnx")
    loss = ["--loss-fn", "mse", "--loss", outs[0], "--target", "gd_conformance_target"]
    model = freeze(test, model, ins, tmp)
    rc, out = run([gd, "train", model, *loss, "--params", ",".join(ins), "-o", t])
    if rc == 2 and "must be known" in out and len(ins) > 1:  # a float input that is a size (Resize's scales)
        model, ins = freeze(test, model, ins[:1], tmp), ins[:1]
        rc, out = run([gd, "train", model, *loss, "--params", ",".join(ins), "-o", t])
    if rc == 2:
        msg = first_error(out)
        ops = {o["op"] for o in info.get("ops", [])}
        if ops <= NONDIFF:  # nothing to check, whatever stopped train (Unique's data-dependent size)
            return "no gradient", reason(msg)
        if "does not depend on any trainable parameter" in msg or "no trainable parameter affects" in msg:
            return "refused", "no gradient rule: " + " ".join(sorted(ops - NONDIFF))
        return "refused", reason(msg)
    if rc != 0:
        return "error", f"train: exit {rc}: {first_error(out)}"
    # the test's own data for the trained inputs (random values may leave a Log's or a Sqrt's domain)
    feeds = [i["name"] for i in info["inputs"]]
    given = []
    for name in ins:
        pb = os.path.join(test, "test_data_set_0", f"input_{feeds.index(name)}.pb")
        if os.path.exists(pb):
            given += ["-i", f"{name}={pb}"]
    # random inputs first; the test's own where the loss is NaN on those
    rc, out = run([gd, "verify", "--gradcheck", *loss, model, t])
    if rc == 2 and "known" in out and len(ins) > 1:  # a float input that is a setting (Dropout's ratio)
        model, ins = freeze(test, model, ins[:1], tmp), ins[:1]
        rc, out = run([gd, "train", model, *loss, "--params", ",".join(ins), "-o", t])
        given = given[:2]
        if rc == 0:
            rc, out = run([gd, "verify", "--gradcheck", *loss, model, t])
    if rc == 1 and "nan" in out and given:
        rc, out = run([gd, "verify", "--gradcheck", *loss, *given, model, t])
    os.unlink(t)
    if rc == 0:
        return "pass", ""
    if rc == 1:
        return "mismatch", " ".join(out.split())[:200]
    if rc == 4:
        return "inconclusive", " ".join(out.split())[-200:]
    return "error" if rc != 2 else "refused", f"verify: exit {rc}: {first_error(out)}"


def main():
    argv = sys.argv[1:]
    opt = {}
    for flag in ("-j", "--min-pass"):
        if flag in argv:
            k = argv.index(flag)
            opt[flag] = int(argv[k + 1])
            del argv[k:k + 2]
    args = [a for a in argv if not a.startswith("-")]
    jobs = opt.get("-j", os.cpu_count() or 2)
    min_pass = opt.get("--min-pass", 0)
    build = args[0] if args else "build"
    data = args[1] if len(args) > 1 else "/usr/share/libonnx-testdata/data"
    gd = os.path.abspath(os.path.join(build, "graphdiet"))
    node = os.path.join(data, "node")
    if not os.path.isdir(node):
        print(f"skipped: libonnx-testdata not installed ({node} is missing)")
        return 77
    expected = {}
    with open(os.path.join(HERE, "expected_gradcheck.txt")) as f:
        for line in f:
            name, _, why = line.partition("#")
            if name.strip():
                expected[name.strip()] = why.strip()
    tests = sorted(os.path.join(node, t) for t in os.listdir(node) if os.path.isfile(os.path.join(node, t, "model.onnx")))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(lambda t: one(gd, t, tmp), tests))
    by = Counter(r for r, _ in results)
    kinds = ('pass', 'mismatch', 'inconclusive', 'no gradient', 'refused', 'error')
    print(f"| node tests | {' | '.join(kinds)} |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {len(tests)} | {' | '.join(str(by[k]) for k in kinds)} |")
    print("\nrefused, by reason:")
    for why, k in Counter(w for r, w in results if r == "refused").most_common():
        print(f"  {k:4d}  {why}")
    bad = 0
    for t, (r, w) in zip(tests, results):
        name = os.path.basename(t)
        if r == "inconclusive":
            print(f"  inconclusive {name}: {w}")
        if r == "mismatch" and name in expected:
            print(f"  expected mismatch {name}: {expected[name]}")
        elif r in ("mismatch", "error"):
            bad += 1
            print(f"  {r.upper()} {name}: {w}")
    if "--list" in sys.argv:
        for t, (r, w) in zip(tests, results):
            print(f"{os.path.basename(t)}\t{r}\t{w}")
    if by["pass"] < min_pass:
        print(f"FAILED: {by['pass']} pass, fewer than --min-pass {min_pass}")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
