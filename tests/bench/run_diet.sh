#!/bin/bash
# Diet variables: bytes per parameter (plan's per_param: resident parameters + optimizer state +
# the most parameter-gradient bytes live at once, over the trainable elements) for float32 Adam,
# SGD, SGD with momentum and diet variables, on the testdata transformer (8,370 parameters), on
# a 29M-parameter GPT-style transformer (gen_big.py with a 4096-token vocabulary, 8 blocks, d = 512,
# batch 2 x 64) and, with GPT2=1, on stock nanoGPT GPT-2 small (gen_gpt2.py: 124M parameters, the
# head tied to the token embedding, a causal-mask buffer per layer, batch 1 x 1024; a 550 MB export,
# --diet rows only), beside the floor computed here from the parameters' shapes alone: 2 bytes per INT16
# element (4 per float32 one left off the diet, not counting its gradient output), 4 (R + C) per
# R x C slot pair (4 per element for a full v), the step counter, and one whole gradient of the
# largest diet parameter other than an embedding (one only Gather reads, updated by rows), a
# Linear layer's weight (one only MatMul or Gemm reads, directly or through a Transpose: updated
# from the factors X and dY of its gradient X^T dY, a block of rows at a time) and a tied weight
# (Gathers and products read it: both), 4 bytes per element, or 2 with --precision fp16: the least
# any update that reads a whole gradient can hold. A buffer (an initializer only Slice or Shape
# reads: nanoGPT's causal mask) is no parameter and not counted; plan counts its bytes today.
#
#     bash tests/bench/run_diet.sh [BUILD]
set -euo pipefail
build=${1:-build}
gd=$build/graphdiet
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$here/gen_big.py" "$dir/gpt29m.onnx" 4096 2> >(grep -v Warning >&2)
[ -z "${GPT2:-}" ] || /usr/bin/python3 "$here/gen_gpt2.py" "$dir/gpt2.onnx" 2> >(grep -v Warning >&2)
floor() { # model, all: every parameter on a diet (else the 2-D ones), gradient bytes per element
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import sys, onnx, numpy as np
m = onnx.load(sys.argv[1], load_external_data=False)
readers = {i.name: [n for n in m.graph.node if i.name in n.input] for i in m.graph.initializer}
buffer = {i.name for i in m.graph.initializer if readers[i.name] and all(n.op_type in ("Slice", "Shape") for n in readers[i.name])}
s = [list(i.dims) for i in m.graph.initializer if i.name not in buffer]
def gather(n, v):
    return n.op_type == "Gather" and n.input[0] == v and not any(a.name == "axis" and a.i for a in n.attribute)
def product(v, hops=1, rows=False):  # read only as a MatMul or Gemm operand, or through one Transpose (or by Gather, rows)
    r = [n for n in m.graph.node if v in n.input]
    return bool(r) and all(n.op_type in ("MatMul", "Gemm") and v in n.input[:2] or rows and gather(n, v) or
                           hops and n.op_type == "Transpose" and product(n.output[0], 0) for n in r)
inits = [i for i in m.graph.initializer if i.name not in buffer]
embedding = [all(gather(n, i.name) for n in readers[i.name]) and readers[i.name] for i in inits]
linear = [len(i.dims) == 2 and product(i.name, rows=True) for i in inits]
n = sum(int(np.prod(d)) for d in s)
diet = [d for d in s if sys.argv[2] == "all" or len(d) == 2]
rest = [d for d in s if not (sys.argv[2] == "all" or len(d) == 2)]
b = sum(2 * int(np.prod(d)) + (4 * (d[0] + d[1]) if len(d) == 2 else 4 * int(np.prod(d))) for d in diet)
b += sum(4 * int(np.prod(d)) for d in rest)  # float32 (its gradient output not counted)
whole = [int(np.prod(d)) for d, e, l in zip(s, embedding, linear) if not e and not l and (sys.argv[2] == "all" or len(d) == 2)]
b += int(sys.argv[3]) * max(whole, default=0) + 8
print(f"{b / n:.2f}")
PY
}
row() { # label, model, floor, plan options...
  local label=$1 model=$2 fl=$3
  shift 3
  "$gd" plan "$model" "$@" --format json 2> >(grep -v 'does not affect the loss' >&2) | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["per_param"]
n = p["parameters"]
fl = sys.argv[2]
ratio = "" if fl == "-" else "%.2f" % (p["bytes_per_param"] / float(fl))
print("| %s | %d | %.2f | %.2f | %.2f | **%.2f** | %s | %s | %d |" % (sys.argv[1], n, p["param_bytes"] / n,
      p["optimizer_state_bytes"] / n, p["peak_param_gradient_bytes"] / n, p["bytes_per_param"], fl, ratio,
      d["peak_bytes_after"]))' "$label" "$fl"
}
printf '| model, update | parameters | params B/p | optimizer B/p | gradients B/p | total B/p | floor B/p | total/floor | step peak bytes |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for m in testdata/transformer.onnx "$dir/gpt29m.onnx" ${GPT2:+"$dir/gpt2.onnx"}; do
  name=$(basename "$m" .onnx)
  if [ "$name" = gpt2 ]; then
    row "$name, --diet (2-D)" "$m" "$(floor "$m" 2d 4)" --diet
    row "$name, --diet --precision fp16" "$m" "$(floor "$m" 2d 2)" --diet --precision fp16
    continue
  fi
  row "$name, float32 Adam" "$m" - --optimizer adam
  row "$name, SGD" "$m" - --optimizer sgd
  row "$name, SGD momentum" "$m" - --optimizer sgd:momentum=0.9
  row "$name, --diet (2-D)" "$m" "$(floor "$m" 2d 4)" --diet
  row "$name, --diet-params '*'" "$m" "$(floor "$m" all 4)" --diet-params '*'
  row "$name, --diet --precision fp16" "$m" "$(floor "$m" 2d 2)" --diet --precision fp16
done

# The optimizer step in place: a parameter-bound MLP (4 x Linear(2048, 2048), batch 8), the step's
# peak per parameter as plan predicts it and as run measures it, beside what PyTorch holds through
# its step (parameters + gradients + optimizer state tensors, torch_optimizer_bytes.py, the same
# run). Each update runs as soon as its gradient is made (no loss scaling or clipping waits for
# them all), so graphdiet's peak holds some of the gradients, plus one parameter's temporary where
# a value is read twice (Adam's gradient, momentum's new buffer) and the batch; PyTorch's count
# holds every gradient.
pt=$(/usr/bin/python3 "$here/torch_optimizer_bytes.py" "$dir/mlp2048.onnx" 2048 4 8 2> >(grep -v Warning >&2))
printf '\n| MLP 4 x 2048, batch 8 | parameters | plan peak B/p | run peak B/p | PyTorch B/p | plan/PyTorch |\n'
printf '|---|---|---|---|---|---|\n'
for o in adam sgd sgd:momentum=0.9; do
  "$gd" train "$dir/mlp2048.onnx" --optimizer "$o" -o "$dir/step.onnx"
  "$gd" plan "$dir/mlp2048.onnx" --optimizer "$o" --format json > "$dir/plan.json"
  "$gd" run "$dir/step.onnx" --random-inputs --format json > "$dir/run.json"
  /usr/bin/python3 - "$o" "$dir/plan.json" "$dir/run.json" "$pt" <<'PY'
import json, sys
o, plan, run = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
torch = dict(zip(sys.argv[4].split()[::2], map(float, sys.argv[4].split()[1::2])))[o]
n = plan["per_param"]["parameters"]
p, r = plan["peak_bytes_after"] / n, run["peak_bytes"] / n
print("| %s | %d | **%.3f** | %.3f | %.3f | %.3f |" % (o, n, p, r, torch, p / torch))
PY
done
