#!/bin/bash
# plan on wide DAGs with many recompute segments: W chains of 1000 Tanh nodes from one parameter,
# summed, with every 10th node kept (--checkpoint-file), so that the schedule has W x 100
# segments. Prints plan's wall seconds and the exponent of its time against the size (1: linear).
# Its report cleared an array the size of the graph per segment: 11.7 s at 10^6 nodes, 8.7 s since.
#
#     bash tests/bench/run_plan_report.sh [BUILD] [W...]     (default W: 100 300 1000)
set -euo pipefail
build=${1:-build}
shift || true
widths=("${@:-100 300 1000}")
read -r -a widths <<<"${widths[*]}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gd=$build/graphdiet
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
printf '| nodes | segments | plan s | exponent |\n|---|---|---|---|\n'
prev_n= prev_r=
for w in "${widths[@]}"; do
  /usr/bin/python3 - "$w" "$dir" <<'PY'
import sys
W, D, out = int(sys.argv[1]), 1000, sys.argv[2]
with open(out + "/wide.yaml", "w") as f:
    f.write("graphdiet: 1\nopset: 17\nparams: [{name: x, dtype: float32, shape: [4], init: {dist: normal, seed: 1}}]\nnodes:\n")
    for c in range(W):
        prev = "x"
        for d in range(D):
            f.write(f"  - {{op: Tanh, inputs: [{prev}], outputs: [c{c}_{d}]}}\n")
            prev = f"c{c}_{d}"
    f.write("  - {op: Sum, inputs: [" + ", ".join(f"c{c}_{D - 1}" for c in range(W)) + "], outputs: [s]}\n")
    f.write("  - {op: ReduceSum, inputs: [s], outputs: [loss], attrs: {keepdims: 0}}\noutputs: [{name: loss}]\n")
with open(out + "/keep.yaml", "w") as f:
    f.write("".join(f"- c{c}_{d}\n" for c in range(W) for d in range(0, D, 10)))
PY
  n=$((w * 1000))
  r=$(secs "$gd" plan "$dir/wide.yaml" --checkpoint-file "$dir/keep.yaml" --explain)
  e=-
  if [ -n "$prev_n" ]; then e=$(echo "l($r / $prev_r) / l($n / $prev_n)" | bc -l 2>/dev/null | cut -c1-5 || echo -); fi
  printf '| %d | %d | %.2f | %s |\n' "$n" $((w * 100)) "$r" "$e"
  prev_n=$n prev_r=$r
done
