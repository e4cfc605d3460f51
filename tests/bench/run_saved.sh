#!/bin/bash
# What the training graph keeps for the backward pass, against PyTorch: plan's saved_bytes under
# --checkpoint none (the activations the backward pass reads, and the inputs and parameters it
# reads) beside the bytes PyTorch's autograd saves for the same model on the same inputs, measured
# in the same run (gen_saved_models.py: distinct storages, dropout on, float32), and the ratio; then
# the step's peak under none, speed and memory, and how much memory cuts it.
#
#     bash tests/bench/run_saved.sh [BUILD]
set -euo pipefail
build=${1:-build}
gd=$build/graphdiet
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$here/gen_saved_models.py" "$dir" >"$dir/torch" 2> >(grep -v -i warn >&2)
field() { # model, strategy, key
  "$gd" plan "$1" --checkpoint "$2" --format json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$3"
}
printf '| model | ours: saved bytes, none | PyTorch: saved bytes | ours / PyTorch | peak none | peak speed | peak memory | memory cuts the peak by |\n'
printf '|---|---|---|---|---|---|---|---|\n'
while read -r name torch; do
  m=$dir/$name.onnx
  ours=$(field "$m" none saved_bytes)
  pn=$(field "$m" none peak_bytes_after)
  ps=$(field "$m" speed peak_bytes_after)
  pm=$(field "$m" memory peak_bytes_after)
  awk -v n="$name" -v o="$ours" -v t="$torch" -v pn="$pn" -v ps="$ps" -v pm="$pm" \
    'BEGIN {printf "| %s | %d | %d | **%.2f** | %d | %d | %d | %.0f%% |\n", n, o, t, o / t, pn, ps, pm, 100 * (1 - pm / pn)}'
done <"$dir/torch"
