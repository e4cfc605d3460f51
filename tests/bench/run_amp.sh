#!/bin/bash
# Mixed precision: activation bytes in fp16 and bf16 against float32, from `plan` (the activations
# live at the peak, DESIGN.md's memory model), and the cost of dynamic loss scaling's finite check
# (the nodes tagged loss_scale: every gradient multiplied by 0 and summed, IsNaN, and the scale's
# update) as a share of the executor's node time for a whole fp16 training step (autocast, dynamic
# scaling, Adam), one thread, best of 10 (bench_exec --profile). Testdata models at batch B (32).
#
#     bash tests/bench/run_amp.sh [BUILD] [B]
set -euo pipefail
build=${1:-build}
batch=${2:-32}
gd=$build/graphdiet
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
acts() { "$gd" plan "$@" --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["breakdown"]["activations"])'; }
printf '| model (batch %s) | fp32 activations | fp16 | fp16/fp32 | bf16 | bf16/fp32 | step ms | finite check + scale update ms | share of step |\n' "$batch"
printf '|---|---|---|---|---|---|---|---|---|\n'
for m in mlp tanh_chain transformer rnn rescnn unet; do
  model=testdata/$m.onnx
  dims=()
  if "$gd" info "$model" | grep -q '\bbatch\b'; then dims=(--dim "batch=$batch"); fi
  a32=$(acts "$model" "${dims[@]}")
  a16=$(acts "$model" "${dims[@]}" --precision fp16)
  ab16=$(acts "$model" "${dims[@]}" --precision bf16)
  "$gd" train "$model" --precision fp16 --loss-scale dynamic --optimizer adam -o "$dir/$m.onnx"
  prof=$(OPENBLAS_NUM_THREADS=1 "$build/tests/bench/bench_exec" "$dir/$m.onnx" "${dims[@]}" --profile 2>&1)
  step=$(awk '/^seconds/ {printf "%.3f", $2 * 1000}' <<<"$prof")
  check=$(awk '/^tagged loss_scale/ {print $3}' <<<"$prof")
  share=$(awk '/^tagged loss_scale/ {print $5}' <<<"$prof")
  printf '| %s | %s | %s | %.2f | %s | %.2f | %s | %s | %s |\n' "$m" "$a32" "$a16" "$(awk "BEGIN {print $a16 / $a32}")" \
    "$ab16" "$(awk "BEGIN {print $ab16 / $a32}")" "$step" "$check" "$share"
done
