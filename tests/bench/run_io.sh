#!/usr/bin/env bash
# I/O benchmark: graphdiet read -> toposort -> write against protobuf-c's unpack + pack, on a
# synthetic 1,000,000-node graph and a PyTorch transformer with over 100 MB of weights.
#   bash tests/bench/run_io.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$here/gen_big.py" "$tmp/gpt33m.onnx" 2> >(grep -v Warning >&2)
"$build/tests/bench/bench_io" --keep "$tmp" "$tmp/gpt33m.onnx"
