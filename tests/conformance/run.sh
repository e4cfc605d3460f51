#!/usr/bin/env bash
# run.sh - ONNX's own backend tests (Debian's libonnx-testdata, ONNX 1.12) through graphdiet's
# executor: the conformance suite that nobody here wrote.
#
#   tests/conformance/run.sh [BUILD] [DATA_DIR] [MIN_PASS]
#
# BUILD is the build folder holding `graphdiet` (default build), DATA_DIR the folder holding node/,
# pytorch-converted/, pytorch-operator/ and simple/ (default /usr/share/libonnx-testdata/data).
# Every test folder there (model.onnx, test_data_set_N/{input_K,output_K}.pb) runs through
# `graphdiet verify --against test_data_set_N model.onnx` for each of its data sets, under
# `timeout $TIMEOUT` (default 60 s), $JOBS at a time (default nproc). A test is
#   pass     every data set matches (floats rtol 1e-4 atol 1e-5, NaN equal, integers exactly)
#   refused  exit 2: an op or a form of one graphdiet does not run (a clean error)
#   wrong    exit 1: a value, shape or dtype differs, or an output is missing
#   crash    any other exit (3 is an internal ASSERT; a signal, a sanitizer's abort)
#   timeout  past $TIMEOUT
# and it prints the counts per folder, the refusals grouped by op, and every wrong value, crash and
# timeout by name. It fails (exit 1) on any crash or timeout, on a wrong value that
# expected_failures.txt (beside this script) does not list, or when fewer than MIN_PASS (the third
# argument or $MIN_PASS) pass. Refusals are counted but do not fail it. Exit 77 (ctest's "skipped")
# when DATA_DIR is missing.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
data=${2:-/usr/share/libonnx-testdata/data}
min_pass=${3:-${MIN_PASS:-0}}
timeout_s=${TIMEOUT:-60}
jobs=${JOBS:-$(nproc)}
expected=${EXPECTED:-$here/expected_failures.txt}
folders="node pytorch-converted pytorch-operator simple"

if [ ! -d "$data/node" ]; then
	echo "conformance: skipped: libonnx-testdata not installed ($data/node missing; apt-get install libonnx-testdata)"
	exit 77
fi
gd=$build/graphdiet
[ -x "$gd" ] || { echo "conformance: no graphdiet binary at $gd" >&2; exit 2; }
case $min_pass in '' | *[!0-9]*) echo "conformance: MIN_PASS '$min_pass' is not a count" >&2; exit 2 ;; esac

# One test folder -> one line: folder, test, class, detail (tab-separated).
one() {
	local t=$1 gd=$2 timeout_s=$3 folder name class=pass detail= ds out rc
	folder=$(basename "$(dirname "$t")")
	name=$(basename "$t")
	for ds in "$t"/test_data_set_*; do
		[ -d "$ds" ] || continue
		out=$(timeout "$timeout_s" "$gd" verify --against "$ds" "$t/model.onnx" 2>&1)
		rc=$?
		case $rc in
		0) continue ;;
		1) class=wrong
		   detail="$(basename "$ds"): $(grep -E 'DIFFERS|MISSING' <<<"$out" | sed -E \
			-e 's/^([^ ]+) +([^ ]+) +([^ ]+) +([^ ]+) +([^ ]+) +DIFFERS(.*)/\1: max abs \2, max rel \3\6/' \
			-e 's/^([^ ]+) +- +- +- +- +MISSING from.*/\1: missing/' | tr -s ' ' | tr '\n' ';' | cut -c1-400)" ;;
		2) class=refused
		   detail=$(grep -m1 . <<<"$out" | tr '\t' ' ') ;;
		124) class=timeout detail="$(basename "$ds"): over ${timeout_s}s" ;;
		*) class=crash
		   detail="$(basename "$ds"): exit $rc$( [ "$rc" -gt 128 ] && echo " (signal $((rc - 128)))"): $(tail -n 3 <<<"$out" | tr '\t\n' '  ' | cut -c1-300)" ;;
		esac
		break
	done
	printf '%s\t%s\t%s\t%s\n' "$folder" "$name" "$class" "$detail"
}
export -f one

results=$(mktemp)
trap 'rm -f "$results"' EXIT
start=$(date +%s)
for f in $folders; do
	[ -d "$data/$f" ] && find "$data/$f" -mindepth 1 -maxdepth 1 -type d -name 'test_*'
done | sort | xargs -P "$jobs" -I{} bash -c 'one "$@"' _ {} "$gd" "$timeout_s" >"$results"
secs=$(( $(date +%s) - start ))

# The names expected_failures.txt lists (a name, then '# reason').
listed() { [ -f "$expected" ] && grep -qxE "$1[[:space:]]*(#.*)?" "$expected"; }

echo "ONNX backend tests ($data), graphdiet $("$gd" --version 2>/dev/null | head -1), ${secs}s with $jobs jobs"
echo
awk -F'\t' -v folders="$folders" '
	{ n[$1]++; c[$1, $3]++; N++; C[$3]++ }
	END {
		printf "%-20s %6s %6s %8s %6s %6s %8s\n", "folder", "tests", "pass", "refused", "wrong", "crash", "timeout"
		split(folders, f, " ")
		for (i = 1; i in f; i++)
			printf "%-20s %6d %6d %8d %6d %6d %8d\n", f[i], n[f[i]], c[f[i], "pass"], c[f[i], "refused"],
			       c[f[i], "wrong"], c[f[i], "crash"], c[f[i], "timeout"]
		printf "%-20s %6d %6d %8d %6d %6d %8d\n", "total", N, C["pass"], C["refused"], C["wrong"], C["crash"],
		       C["timeout"]
	}' "$results"

# Refusals by op: each op the executor lacks ("N ops are not supported by graphdiet's executor: A
# (...), B (...)") once per test, else the op of the node the message names with its reason, the
# test's own names ('...') and paths taken out.
echo
echo "refusals by op (tests):"
awk -F'\t' '$3 == "refused" {
	m = $4
	sub(/^graphdiet: (error: )?/, "", m)
	while (sub(/^[^ ]*\.(onnx|pb): /, "", m))
		;
	if ((i = index(m, "not supported by graphdiet'"'"'s executor: "))) {
		l = substr(m, i)
		sub(/^[^:]*: /, "", l)
		while (gsub(/ *\([^()]*\)/, "", l))
			;
		n = split(l, ops, /, /)
		for (k = 1; k <= n; k++)
			if (ops[k] ~ /^[A-Za-z0-9_.]+$/)
				print ops[k] "\t(not in the executor)"
		if (n == 0 || ops[1] !~ /^[A-Za-z0-9_.]+$/) {
			op = m
			if (match(m, /\([A-Za-z0-9_.]+\)/))
				op = substr(m, RSTART + 1, RLENGTH - 2)
			print op "\t(not in the executor)"
		}
		next
	}
	gsub(/'"'"'[^'"'"']*'"'"'/, "'"'"'…'"'"'", m)
	if (match(m, /^node [^(]*\([A-Za-z0-9_.]+\): /)) {
		h = substr(m, 1, RLENGTH)
		sub(/^node [^(]*\(/, "", h)
		sub(/\): $/, "", h)
		print h "\t" substr(m, RLENGTH + 1)
	} else {
		print "(model, data)\t" m
	}
}' "$results" | sort | uniq -c | sort -k1,1nr -k2 | awk '{ c = $1; sub(/^ *[0-9]+ /, ""); split($0, f, "\t"); printf "  %4d  %-24s %s\n", c, f[1], f[2] }'

fail=0
for class in wrong crash timeout; do
	lines=$(awk -F'\t' -v c="$class" '$3 == c' "$results")
	[ -n "$lines" ] || continue
	echo
	echo "$class:"
	while IFS=$'\t' read -r folder name _ detail; do
		if listed "$name"; then
			echo "  $folder/$name (expected: $(grep -m1 -E "^$name[[:space:]]" "$expected" | sed -E 's/^[^#]*#[[:space:]]*//')): $detail"
		else
			echo "  $folder/$name: $detail"
			fail=1
		fi
	done <<<"$lines"
done
# an expected failure that passes now: the list should lose it (said, not failed)
if [ -f "$expected" ]; then
	while read -r name _; do
		case $name in '' | '#'*) continue ;; esac
		awk -F'\t' -v n="$name" '$2 == n && $3 == "pass" { found = 1 } END { exit !found }' "$results" &&
			echo "note: $name passes now: remove it from $expected"
	done <"$expected"
fi

pass=$(awk -F'\t' '$3 == "pass"' "$results" | wc -l)
echo
[ "$fail" = 0 ] || echo "FAIL: a crash, timeout or wrong value above that $(basename "$expected") does not list"
if [ "$pass" -lt "$min_pass" ]; then
	echo "FAIL: $pass tests pass, fewer than MIN_PASS $min_pass"
	fail=1
fi
[ "$fail" = 0 ] && echo "ok: $pass pass (MIN_PASS $min_pass); no crash, timeout or unlisted wrong value"
exit "$fail"
