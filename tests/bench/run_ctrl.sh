#!/bin/bash
# Control flow's cost: a Loop of M iterations of acc = tanh(acc * w + x) on D = 256 floats with a scan
# output, and the same as a Scan over an [M, 256] sequence (gen_ctrl_bench.py), run by graphdiet's
# executor (each body a subgraph run: ops/control.c) and by onnxruntime-node on the same inputs:
# median node time of 5 runs each (graphdiet's `run --format json` seconds; onnxruntime's
# session.run, tests/ort/time_ort.cjs, 1 thread), and the ratio, per iteration too.
#   bash tests/bench/run_ctrl.sh [build]
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export NODE_PATH=${NODE_PATH:-$build/ort/node_modules}
gd() { # median seconds of 5 runs
	for k in 1 2 3 4 5; do
		GRAPHDIET_THREADS=1 "$build/graphdiet" run "$@" --format json | sed -n 's/^  "seconds": \([0-9.e+-]*\),*/\1/p'
	done | sort -g | sed -n 3p
}
printf '| model | M | graphdiet s | per iteration us | onnxruntime s (peer) | ratio |\n|---|---|---|---|---|---|\n'
for M in 100 1000 10000; do
	/usr/bin/python3 "$here/gen_ctrl_bench.py" "$dir/$M" "$M" 256
	for model in loop scan; do
		if [ $model = loop ]; then ins=("a0=$dir/$M/a0.npy" "x=$dir/$M/x.npy"); else ins=("a0=$dir/$M/a0.npy" "xseq=$dir/$M/xseq.npy"); fi
		args=(); for i in "${ins[@]}"; do args+=(-i "$i"); done
		a=$(gd "$dir/$M/$model.onnx" "${args[@]}")
		b=$(node "$here/../ort/time_ort.cjs" "$dir/$M/$model.onnx" 5 1 "${ins[@]}" | awk '{print $2}')
		printf '| %s | %s | %.4g | %.2f | %.4g | %.2f |\n' $model "$M" "$a" "$(awk -v a="$a" -v m="$M" 'BEGIN { print a / m * 1e6 }')" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')"
	done
done
