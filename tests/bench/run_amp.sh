#!/bin/bash
# Mixed precision, testdata models at batch B (32; the transformer's inputs are fixed at 2 x 8).
#
# Memory: what the backward pass holds of the forward pass (plan's saved_bytes: kept activations,
# and the inputs and parameters it reads), float32 against fp16 and bf16, beside the peer measured
# in the same run: the bytes PyTorch's autograd saves for backward in float32 and under CPU autocast
# (bfloat16; torch_amp_saved.py). Also the activations live at the peak (plan's breakdown), which
# move with where the peak falls.
#
# Time: the cost of dynamic loss scaling's finite check (the nodes tagged loss_scale: every
# gradient multiplied by 0 and summed, IsNaN, and the scale's update) as a share of the executor's
# node time for a whole fp16 training step (autocast, dynamic scaling, Adam), one thread, best of 10
# (bench_exec --profile).
#
#     bash tests/bench/run_amp.sh [BUILD] [B]
set -euo pipefail
build=${1:-build}
batch=${2:-32}
gd=$build/graphdiet
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here=$(dirname "$0")
/usr/bin/python3 "$here/torch_amp_saved.py" "$batch" | awk -F'|' 'NR > 2 {gsub(/ /, ""); print $2, $3, $4}' >"$dir/torch"
plan() { "$gd" plan "$@" --format json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["saved_bytes"], d["breakdown"]["activations"])'; }
ratio() { awk "BEGIN {printf \"%.2f\", $1 / $2}"; }
printf '| model (batch %s) | fp32 saved | fp16 saved | fp16/fp32 | bf16/fp32 | PyTorch fp32 saved | PyTorch autocast bf16 | PyTorch ratio | ours / PyTorch ratio | activations at peak fp16/fp32 |\n' "$batch"
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for m in mlp tanh_chain transformer rnn rescnn unet; do
  model=testdata/$m.onnx
  read -r s32 a32 < <(plan "$model" --dim "batch=$batch")
  read -r s16 a16 < <(plan "$model" --dim "batch=$batch" --precision fp16)
  read -r sb16 _ < <(plan "$model" --dim "batch=$batch" --precision bf16)
  read -r t32 tb16 < <(awk -v m="$m" '$1 == m {print $2, $3}' "$dir/torch")
  r=$(ratio "$s16" "$s32")
  rt=$(ratio "$tb16" "$t32")
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$m" "$s32" "$s16" "$r" "$(ratio "$sb16" "$s32")" \
    "$t32" "$tb16" "$rt" "$(ratio "$r" "$rt")" "$(ratio "$a16" "$a32")"
done
echo
printf '| model (batch %s) | fp16 Adam step ms | finite check + scale update ms | share of step |\n' "$batch"
printf '|---|---|---|---|\n'
for m in mlp tanh_chain transformer rnn rescnn unet; do
  model=testdata/$m.onnx
  "$gd" train "$model" --precision fp16 --loss-scale dynamic --optimizer adam -o "$dir/$m.onnx"
  prof=$(OPENBLAS_NUM_THREADS=1 "$build/tests/bench/bench_exec" "$dir/$m.onnx" --dim "batch=$batch" --profile 2>&1)
  step=$(awk '/^seconds/ {printf "%.3f", $2 * 1000}' <<<"$prof")
  check=$(awk '/^tagged loss_scale/ {print $3}' <<<"$prof")
  share=$(awk '/^tagged loss_scale/ {print $5}' <<<"$prof")
  printf '| %s | %s | %s | %s |\n' "$m" "$step" "$check" "$share"
done
