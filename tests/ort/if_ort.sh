#!/bin/sh
# if_ort.sh NODE ORT_DIR COMMAND... - runs COMMAND (ctest's ort test) when NODE and onnxruntime-node
# in ORT_DIR are there; otherwise says why on standard output and exits 77 (ctest: skipped).
node=$1 dir=$2
shift 2
if [ ! -x "$node" ]; then
  echo "skipped: no node at $node (apt-get install nodejs npm; node elsewhere: configure again)"
  exit 77
fi
if [ ! -e "$dir/onnxruntime-node/package.json" ]; then
  echo "skipped: onnxruntime-node is not in $dir (npm install --ignore-scripts --prefix build/ort onnxruntime-node@1.30.0)"
  exit 77
fi
exec "$@"
