#!/bin/bash
# Whether a checkpointed training graph's saving survives onnxruntime: a deep MLP and a
# ResNet-50-shaped CNN (gen_ort_models.py) trained with --checkpoint none and memory, written with
# --control-deps metadata (node order only, as onnxruntime sees it) and data (the schedule pinned by
# data edges), each run once in onnxruntime-node at its default options (one thread) in a fresh
# process. The figure is what the step adds to the process's peak resident set (mem_ort.cjs);
# plan's figures are the peaks graphdiet predicts for the same graphs (its executor measures the
# same). The saving ratio is onnxruntime's saving (none -> memory, both pinned) over plan's.
#
#     bash tests/bench/run_ort_memory.sh [BUILD]
#
# Needs npm install --ignore-scripts --prefix BUILD/ort onnxruntime-node@1.30.0.
set -euo pipefail
build=${1:-build}
gd=$build/graphdiet
export NODE_PATH=$build/ort/node_modules
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$here/gen_ort_models.py" "$dir" 2>/dev/null
peak() { "$gd" plan "$dir/$1.onnx" --checkpoint "$2" --format json |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_bytes_after"])'; }
ort() { # model strategy mode -> bytes the step added
  "$gd" -q train "$dir/$1.onnx" --checkpoint "$2" --control-deps "$3" -o "$dir/t.onnx"
  node "$here/../ort/mem_ort.cjs" "$dir/t.onnx" "x=$dir/$1.x.npy" "target=$dir/$1.target.npy" |
    awk '{print $6 * 1024}'
}
mb() { awk "BEGIN {printf \"%.1f\", $1 / 1e6}"; }
printf '| model | plan none MB | plan memory MB | plan saving MB | ort none, metadata | ort memory, metadata | ort none, data | ort memory, data | ort saving MB (data) | saving ratio ort/plan |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for m in mlp32 resnet; do
  pn=$(peak $m none)
  pm=$(peak $m memory)
  on=$(ort $m none metadata)
  om=$(ort $m memory metadata)
  dn=$(ort $m none data)
  dm=$(ort $m memory data)
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' $m "$(mb $pn)" "$(mb $pm)" "$(mb $((pn - pm)))" \
    "$(mb $on)" "$(mb $om)" "$(mb $dn)" "$(mb $dm)" "$(mb $((dn - dm)))" \
    "$(awk "BEGIN {printf \"%.2f\", ($dn - $dm) / ($pn - $pm)}")"
done
