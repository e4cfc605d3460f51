#!/bin/sh
# run_exact.sh [BUILD] [OUTDIR] - bench_exact on the small DAGs (gen_exact_dags.py; its reference columns:
# the exact kept-set search, and a sweep with 8-40x auto's weighs), then graphdiet's own
# word on each row: none's peak, auto's recompute FLOPs (plan --checkpoint auto --budget B), and the
# peak and recompute FLOPs of each plan exact found, re-weighed by plan --checkpoint-file. A row
# whose numbers differ from bench_exact's says so.
#
#     sh tests/bench/run_exact.sh build /tmp/exb
set -eu
build=${1:-build}
out=${2:-/tmp/bench_exact}
mkdir -p "$out/plans"
/usr/bin/python3 "$(dirname "$0")/gen_exact_dags.py" "$out" >/dev/null
models="resmlp unet3 transformer2 dense5 inception3 gelures6 transformer3"
# shellcheck disable=SC2046 # one argument a model
"$build/tests/bench/bench_exact" --plans "$out/plans" $(for m in $models; do echo "$out/$m.onnx"; done) |
	tee "$out/bench.md"
echo
echo "| model | budget | bytes | auto FLOPs (plan) | exact's plan re-weighed by plan: peak, FLOPs | agrees |"
echo "|---|---|---|---|---|---|"
for m in $models; do
	none_b=$(sed -n "s/^$m.onnx: .*none's peak \([0-9]*\) B.*/\1/p" "$out/bench.md")
	none=$("$build/graphdiet" plan "$out/$m.onnx" --loss-fn mse --checkpoint none --format json |
		/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["peak_bytes_after"])')
	echo "| $m | none | $none | - | - | $([ "$none" = "$none_b" ] && echo yes || echo "NO: none $none_b") |"
	for pct in 99 97 95 90 70 50 30 20; do
		row=$(awk -v m="$m.onnx:" -v p="| $pct% |" '$1 == m { on = 1 } on && index($0, p) == 1 { print; exit }' "$out/bench.md")
		budget=$(echo "$row" | cut -d'|' -f3 | tr -d ' ')
		auto_b=$(echo "$row" | cut -d'|' -f4 | awk '{ print $1 }')
		exact_b=$(echo "$row" | cut -d'|' -f5 | tr -d ' ')
		auto=$("$build/graphdiet" plan "$out/$m.onnx" --loss-fn mse --checkpoint auto --budget "$budget" --format json |
			/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["recompute_flops"])')
		plan="-"
		agree=$([ "$auto" = "$auto_b" ] && echo yes || echo "NO: auto")
		if [ -f "$out/plans/${m}_$pct.yaml" ]; then
			plan=$("$build/graphdiet" plan "$out/$m.onnx" --loss-fn mse --checkpoint-file "$out/plans/${m}_$pct.yaml" \
				--budget "$budget" --format json |
				/usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["peak_bytes_after"], d["recompute_flops"], d["fits"])')
			[ "$(echo "$plan" | awk '{ print $2 }')" = "$exact_b" ] && [ "$(echo "$plan" | awk '{ print $3 }')" = True ] ||
				agree="NO: exact"
		fi
		echo "| $m | $pct% | $budget | $auto | $plan | $agree |"
	done
done
