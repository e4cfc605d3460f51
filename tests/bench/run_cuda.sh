#!/usr/bin/env bash
# run_cuda.sh - the CUDA backend on a GPU: a training step of a GPT-style transformer (batch 32,
# d 768, 12 layers, 12 heads, sequence 128) and of the testdata ResCNN (batch 256) under
# `graphdiet run --backend cuda`, against PyTorch on the same GPU in the same run
# (torch_cuda_step.py, when its PyTorch has CUDA); the peak `graphdiet plan` predicts for that
# training graph against the device peak the run measured; and a large MatMul node against
# cuBLAS's own rate (bench_cublas).
#
#   bash tests/bench/run_cuda.sh [build]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
G=$B/graphdiet
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PY=${PY:-/usr/bin/python3}
VOCAB=4096 D=768 LAYERS=12 HEADS=12 SEQ=128 BATCH=32 CNN_BATCH=256

num() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }

$PY tests/bench/gen_big.py "$T/gpt.onnx" $VOCAB $D $LAYERS $HEADS $SEQ $BATCH # (its batch is static)
$G train "$T/gpt.onnx" -o "$T/gpt_train.onnx"
$G train testdata/rescnn.onnx --dim batch=$CNN_BATCH -o "$T/cnn_train.onnx"

printf '\n%-12s %12s %12s %8s %14s %14s %6s\n' model graphdiet pytorch ratio planned_peak device_peak same
for m in gpt cnn; do
  dims=$([ $m = gpt ] || echo --dim batch=$CNN_BATCH)
  best=1e9
  for r in 1 2 3 4; do # the first run warms the GPU up
    $G run "$T/${m}_train.onnx" --random-inputs $dims --backend cuda --format json >"$T/$m.json"
    s=$(num "$T/$m.json" "d['seconds']")
    [ "$r" = 1 ] || best=$($PY -c "print(min($best, $s))")
  done
  src=$([ $m = gpt ] && echo "$T/gpt.onnx" || echo testdata/rescnn.onnx)
  $G plan "$src" $dims --format json >"$T/${m}_plan.json"
  planned=$(num "$T/${m}_plan.json" "d['peak_bytes_after']")
  device=$(num "$T/$m.json" "d['backend']['device_peak_bytes']")
  if [ $m = gpt ]; then
    peer=$($PY tests/bench/torch_cuda_step.py transformer $BATCH $D $LAYERS $HEADS $SEQ $VOCAB | awk '{print $3}') || peer=
  else
    peer=$($PY tests/bench/torch_cuda_step.py rescnn $CNN_BATCH | awk '{print $3}') || peer=
  fi
  ratio=$([ -n "$peer" ] && $PY -c "print(f'{$best / $peer:.2f}')" || echo n/a)
  printf '%-12s %12.6f %12s %8s %14s %14s %6s\n' $m "$best" "${peer:-n/a}" "$ratio" "$planned" "$device" \
    "$([ "$planned" = "$device" ] && echo yes || echo NO)"
done

# one MatMul node of n x n float32 matrices against cuBLAS's own rate
N=8192
cat >"$T/mm.yaml" <<YAML
graphdiet: 1
opset: 17
inputs: [{name: a, dtype: float32, shape: [$N, $N]}, {name: b, dtype: float32, shape: [$N, $N]}]
nodes:
  - {op: MatMul, inputs: [a, b], outputs: [c]}
outputs: [{name: c}]
YAML
best=1e9
for r in 1 2 3 4; do
  s=$($G run "$T/mm.yaml" --random-inputs --backend cuda --format json | $PY -c "import json,sys; print(json.load(sys.stdin)['seconds'])")
  [ "$r" = 1 ] || best=$($PY -c "print(min($best, $s))")
done
read -r _ _ cs _ < <("$B/tests/bench/bench_cublas" $N | head -1)
printf '\n%-28s %10s %10s %8s\n' "MatMul $N^3 float32" graphdiet cublas ratio
printf '%-28s %10.6f %10.6f %8.2f\n' "seconds (TFLOP/s: $($PY -c "print(f'{2*$N**3/$best/1e12:.1f}')"))" "$best" "$cs" \
  "$($PY -c "print($best / $cs)")"
