#!/bin/sh
# skipped.sh - why ctest skipped a test, shown at the end of the run. ctest prints no output of a
# skipped test (exit 77), and a post-test command cannot read this run's LastTest.log (ctest writes
# it after), so:
#   skipped.sh run DIR NAME COMMAND...  runs COMMAND (its output as ever) and, when it exits 77,
#                                        keeps its reasons in DIR/NAME: its "skipped:" lines and
#                                        Criterion's "[SKIP] test: why" (--verbose) other than those
#                                        of suites --filter left out;
#   skipped.sh report DIR                prints and removes them (CTEST_CUSTOM_POST_TEST, written by
#                                        tests/CMakeLists.txt), on standard error, which ctest shows;
#                                        exits 0 (ctest counts a failing post-test command as an error).
mode=$1 dir=$2
shift 2
if [ "$mode" = report ]; then
  [ -d "$dir" ] || exit 0
  first=1
  for f in "$dir"/*; do
    [ -f "$f" ] || continue
    if [ "$first" = 1 ]; then
      printf '\nWhy tests were skipped:\n' >&2
      first=0
    fi
    sed "s|^|  ${f##*/}: |" "$f" >&2
    rm -f "$f"
  done
  exit 0
fi
name=$1
shift
mkdir -p "$dir"
rm -f "$dir/$name"
out=$(mktemp)
{ "$@" 2>&1; echo $? >"$out.rc"; } | tee "$out" # (its output streamed: a timeout keeps what came)
rc=$(cat "$out.rc")
if [ "$rc" = 77 ]; then
  grep -E 'skipped: |^\[SKIP\] ' "$out" | grep -v ': Test is disabled$' | sed 's/^\[SKIP\] //' | sort -u >"$dir/$name"
  [ -s "$dir/$name" ] || echo "exit 77 with no reason printed (see its output in Testing/Temporary/LastTest.log)" >"$dir/$name"
fi
rm -f "$out" "$out.rc"
exit "$rc"
