#!/bin/bash
# A no-op Cast costs nothing: plan's peak of a 2-layer d256 attention stack whose softmax is
# softmax(scores, dim=-1, dtype=torch.float32) (exported as a Cast to float32) against the same
# stack without the dtype, at sequence lengths 512 and 2048 (gen_noop_cast.py).
#   bash tests/bench/run_noop_cast.sh [build]
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
peak() { "$build/graphdiet" plan "$1" --format json | sed -n 's/.*"peak_bytes_after": \([0-9]*\).*/\1/p'; }
printf '| seq | peak with the Cast | peak without it (peer) | ratio |\n|---|---|---|---|\n'
for seq in 512 2048; do
	/usr/bin/python3 "$here/gen_noop_cast.py" "$dir/$seq" "$seq" 2>/dev/null
	a=$(peak "$dir/$seq/attn_cast.onnx")
	b=$(peak "$dir/$seq/attn_plain.onnx")
	printf '| %s | %s | %s | %s |\n' "$seq" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }')"
done
