#!/bin/bash
# Planner speed: `plan --checkpoint auto` and `train --checkpoint auto` on MatMul+Tanh chains of
# 10^3 to MAX forward nodes (default 10^6: 10^3, 10^4, 10^5, MAX/2 and MAX), at a budget that
# halves `none`'s activation bytes; wall seconds and peak RSS (GNU time) with RSS per forward node
# against issue 46's 1 KB, the ratio of plan's time to the row above and the scaling exponent
# log(time ratio) / log(size ratio), so that time(2N)/time(N) = 2^exponent; last, the largest
# chain's plan against the targets scaled from 1M nodes (10 s, 1.2 GB). With -v, each run's phases go to stderr (graphdiet -v). RUNS=k
# (default 1) times each command k times and reports the fastest, for machines whose timings are
# noisy (shared virtual machines vary by a third from run to run). Each train writes a new file:
# replacing the last run's would add the kernel's freeing of it (~1 GB at 10^6 nodes, 0.2-0.8 s).
#
# First, the fixed cost on small graphs: `plan --checkpoint auto --budget 1` (the lowest peak: the
# whole ladder of budgets, then the local search) on each testdata model, beside `plan` with no
# strategy on the same model (loading, autodiff, shapes and one simulation: what any plan costs),
# medians of 5 runs, and auto's cost over the 50 ms target; and how tight auto's lower bound is:
# the lowest peak it finds over the bound it reports (1.000: that peak is optimal). The zoo's
# models (build/zoo, made by ctest) follow when present.
#
#     [RUNS=3] bash tests/bench/run_planner.sh [BUILD] [MAX] [-v]
set -euo pipefail
build=${1:-build}
max=${2:-1000000}
verbose=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gd=$build/graphdiet
median() { # command...: the median wall seconds of 5 runs
  for ((r = 0; r < 5; r++)); do
    /usr/bin/time -f '%e' -o "$dir/tm" "$@" >/dev/null 2>&1
    cat "$dir/tm"
  done | sort -n | sed -n 3p
}
printf '| model | forward nodes | plan s | plan --checkpoint auto --budget 1 s | auto / 50 ms | lower bound | lowest peak | peak / bound |\n'
printf '|---|---|---|---|---|---|---|---|\n'
zoo=()
for z in resnet18 mobilenet_v2 efficientnet_b0 squeezenet1_1 vit gpt lstm gru seq2seq unet_gn; do
  [ -f "$build/zoo/$z.onnx" ] && zoo+=("$build/zoo/$z.onnx")
done
for f in testdata/{mlp,transformer,rescnn,tanh_chain,unet,rnn}.onnx "${zoo[@]}"; do
  dims=()
  case $f in testdata/*) dims=(--dim batch=32) ;; esac
  nodes=$("$gd" info "$f" --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"])')
  p=$(median "$gd" plan "$f" "${dims[@]}")
  a=$(median "$gd" plan "$f" "${dims[@]}" --checkpoint auto --budget 1)
  read -r lb low < <("$gd" plan "$f" "${dims[@]}" --checkpoint auto --budget 1 --format json 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["auto"]["lower_bound_bytes"], d["peak_bytes_after"])')
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(basename "$f" .onnx)" "$nodes" "$p" "$a" \
    "$(/usr/bin/python3 -c "print(f'{$a / 0.05:.2f}')")" "$lb" "$low" "$(/usr/bin/python3 -c "print(f'{$low / $lb:.3f}')")"
done
echo
printf '| forward nodes | training steps | plan auto s | plan RSS MB | plan RSS / node (target 1 KB) | train auto s | train RSS MB | train RSS / node | plan s ratio to the row above |\n|---|---|---|---|---|---|---|---|---|\n'
prev=
sizes=()
for ((n = 1000; n < max / 2; n *= 10)); do sizes+=("$n"); done
sizes+=($((max / 2)) "$max")
for n in "${sizes[@]}"; do
  /usr/bin/python3 - "$n" >"$dir/c.yaml" <<'PY'
import sys
n = int(sys.argv[1]) // 2
w = sys.stdout.write
w("graphdiet: 1\nopset: 17\ninputs: [{name: x, dtype: float32, shape: [64, 16]}]\nparams:\n")
for i in range(n):
    w(f"  - {{name: w{i}, dtype: float32, shape: [16, 16], init: zeros}}\n")
w("nodes:\n")
for i in range(n):
    p = f"t{i-1}" if i else "x"
    w(f"  - {{op: MatMul, inputs: [{p}, w{i}], outputs: [m{i}]}}\n  - {{op: Tanh, inputs: [m{i}], outputs: [t{i}]}}\n")
w(f"  - {{op: ReduceSum, inputs: [t{n-1}], outputs: [loss], attrs: {{keepdims: 0}}}}\noutputs: [{{name: loss}}]\n")
PY
  "$gd" convert "$dir/c.yaml" -o "$dir/c.onnx"
  read -r peak act steps < <("$gd" plan "$dir/c.onnx" --format json | /usr/bin/python3 -c \
    'import json,sys; d=json.load(sys.stdin); print(d["peak_bytes_after"], d["breakdown"]["activations"], d["steps"])')
  budget=$((peak - act / 2))
  s1= s2=
  for ((r = 0; r < ${RUNS:-1}; r++)); do
    /usr/bin/time -f '%e %M' -o "$dir/t1" "$gd" $verbose plan "$dir/c.onnx" --checkpoint auto --budget "$budget" >/dev/null
    rm -f "$dir/t.onnx" # not timed: the kernel's freeing the last run's output as it is replaced
    /usr/bin/time -f '%e %M' -o "$dir/t2" "$gd" $verbose train "$dir/c.onnx" --checkpoint auto --budget "$budget" -o "$dir/t.onnx"
    read -r a1 m1 <"$dir/t1"
    read -r a2 m2 <"$dir/t2"
    s1=$(/usr/bin/python3 -c "print(min(x for x in [$a1, ${s1:-$a1}]))")
    s2=$(/usr/bin/python3 -c "print(min(x for x in [$a2, ${s2:-$a2}]))")
  done
  ratio=${prev:+$(/usr/bin/python3 -c "import math; print(f'{$s1/$prev:.2f} for {$n/$prevn:g}x the nodes (exponent {math.log($s1/$prev)/math.log($n/$prevn):.2f})')")}
  printf '| %d | %d | %s | %d | %s | %s | %d | %s | %s |\n' "$n" "$steps" "$s1" $((m1 * 1024 / 1000000)) \
    "$(/usr/bin/python3 -c "print(f'{$m1 * 1024 / $n:.0f} B ({$m1 / $n:.2f}x)')")" "$s2" $((m2 * 1024 / 1000000)) \
    "$(/usr/bin/python3 -c "print(f'{$m2 * 1024 / $n:.0f} B ({$m2 / $n:.2f}x)')")" "${ratio:--}"
  last_n=$n last_s=$s1 last_m=$m1
  prev=$s1
  prevn=$n
done
echo
printf '| at %d forward nodes | ours | target | ratio |\n|---|---|---|---|\n' "$last_n"
/usr/bin/python3 -c "
n, s, m = $last_n, $last_s, $last_m * 1024
ts, tm = 10 * n / 1e6, 1.2e9 * n / 1e6
print(f'| plan --checkpoint auto, s | {s} | {ts:g} | {s / ts:.2f} |')
print(f'| plan --checkpoint auto, peak RSS MB | {m / 1e6:.0f} | {tm / 1e6:.0f} | {m / tm:.2f} |')"
