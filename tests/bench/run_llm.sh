#!/usr/bin/env bash
# run_llm.sh - the questions asked at LLM scale: does training a LLaMA-7B-shaped model (gen_llama.py:
# d 4096, 32 layers, SwiGLU 11008, vocabulary 32000, weights external and never made) fit on an
# 80 GB GPU, at batch 1 x 2048, in float32 and bf16, with no optimizer, Adam or diet variables,
# with and without --checkpoint auto? For each: `graphdiet check`'s answer, its wall time and peak
# RSS (it reads no weight), and `plan`'s breakdown of the peak; beside what PyTorch holds for the
# same step by its own accounting (parameters, gradients and optimizer state per parameter: 8 with
# no optimizer, 16 for Adam, and under AMP the bf16 copies of the weights autocast saves for
# backward, 2 more; a formula, not a run: PyTorch cannot be run at this size here); with --replicas 8
# --shard, one replica's figures beside ZeRO's model states per parameter for that stage (its
# mixed-precision accounting: fp16 parameters and gradients, 12 bytes of fp32 master copy and Adam
# moments, sharded from stage 1, 2, 3 on).
#
#   bash tests/bench/run_llm.sh [build] [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
G=$PWD/$B/graphdiet
D=${2:-/tmp/graphdiet-llm}
PY=/usr/bin/python3
mkdir -p "$D"
[ -s "$D/llama7b.onnx" ] || $PY tests/bench/gen_llama.py "$D/llama7b.onnx" 2> >(grep -v Warning >&2)
cd "$D"
dims=(--dim batch=1 --dim seq=2048)
gib() { $PY -c "print(f'{$1 / 2**30:.1f}')"; }

printf '\nLLaMA-7B shape, batch 1 x 2048, budget 80 GiB unless the row says (%s)\n\n' "$(lscpu | sed -n 's/^Model name: *//p')"
printf '| options | check says | peak GiB | params | optimizer | gradients | activations | B/param (params+state+grads) | PyTorch B/param | check s | check RSS MB |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
while IFS='|' read -r opts torch; do
  read -ra o <<<"$opts"
  t0=$(date +%s.%N)
  ans=$(/usr/bin/time -f '%M' -o time.txt "$G" check llama7b.onnx "${dims[@]}" --budget 80GiB "${o[@]}" 2>&1 | head -1) || true
  t1=$(date +%s.%N)
  rss=$(( $(tail -1 time.txt) / 1024 ))
  "$G" plan llama7b.onnx "${dims[@]}" "${o[@]}" --format json >plan.json
  read -r peak p s g a bpp < <($PY -c "
import json; d = json.load(open('plan.json')); b = d['breakdown']; q = d['per_param']
print(d['peak_bytes_after'], b['params'] + b['buffers'], b['optimizer_state'], b['gradients'], b['activations'],
      f\"{q['bytes_per_param']:.2f}\")")
  verdict=$(sed -e 's/^graphdiet check: //' -e 's/ (llama7b.onnx)//' -e 's/:.*//' <<<"$ans")
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %d |\n' "${opts:-(fp32, no optimizer)}" "$verdict" \
    "$(gib "$peak")" "$(gib "$p")" "$(gib "$s")" "$(gib "$g")" "$(gib "$a")" "$bpp" "$torch" \
    "$($PY -c "print($t1 - $t0)")" "$rss"
done <<'ROWS'
|8
--precision bf16|8 + 2
--optimizer adam|16
--optimizer adam --precision bf16|16 + 2
--optimizer adam --precision bf16 --checkpoint auto --budget 80GiB|16 + 2
--optimizer adam --precision bf16 --replicas 8 --shard optimizer|ZeRO-1: 4 + 12/8
--optimizer adam --precision bf16 --replicas 8 --shard gradients|ZeRO-2: 2 + 14/8
--optimizer adam --precision bf16 --replicas 8 --shard parameters|ZeRO-3: 16/8
--optimizer adam --precision bf16 --replicas 8 --shard parameters --checkpoint auto --budget 80GiB|ZeRO-3: 16/8
--diet|-
--diet --precision bf16|-
--diet --precision bf16 --checkpoint auto --budget 40GiB|-
ROWS
