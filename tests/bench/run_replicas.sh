#!/bin/bash
# Data-parallel replicas: what the all-reduce costs in graphdiet's executor. A training step (SGD)
# of a 29M-parameter GPT-style transformer (gen_big.py: vocabulary 4096, d = 512, 8 blocks, batch
# 2 x 64 per replica) under `mpirun -np N graphdiet run --shard-inputs` (Open MPI, MPI_Allreduce)
# for N = 1 (the graph without replicas), 2 and 4 ranks on this machine, one gradient per AllReduce
# and in 25 MiB buckets (PyTorch DDP's default), and the same replicas as threads in one process
# (run --replicas N). Per step, on rank 0 (the last of 3 steps): the step time, the time spent in
# AllReduce nodes (waiting for the other ranks included) and its share of the step, the all-reduces
# made, and the bytes each rank hands MPI against its gradient bytes (the parameters' float32
# bytes). Beside each MPI row, the transport's own cost measured in the same run: bench_allreduce
# times raw MPI_Allreduce of exactly those buffers (one call per AllReduce node, best of 3), and the
# ratio of graphdiet's AllReduce time to it. OpenBLAS runs one thread per rank, so the ranks do not fight over cores; on a machine with
# fewer cores than ranks, mpirun oversubscribes and the waiting grows.
#
#     bash tests/bench/run_replicas.sh [BUILD]
set -euo pipefail
build=${1:-build}
gd=$(realpath "$build/graphdiet")
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
/usr/bin/python3 "$here/gen_big.py" "$dir/gpt.onnx" 4096 2> >(grep -v Warning >&2)
grad_bytes=$(/usr/bin/python3 -c '
import sys, onnx, numpy as np
m = onnx.load(sys.argv[1], load_external_data=False)
print(sum(4 * int(np.prod(i.dims)) for i in m.graph.initializer if i.data_type == 1))' "$dir/gpt.onnx")
echo "cores: $(nproc); gradient bytes per step: $grad_bytes"
printf '%-9s %-8s %-7s %8s %12s %8s %6s %12s %10s %10s %9s\n' transport replicas bucket "step s" "allreduce s" share sums "bytes/rank" "/gradients" "raw MPI s" "ours/raw"
row() { # transport, replicas, bucket, raw MPI json or -; run json on stdin
  /usr/bin/python3 -c '
import json, sys
t, n, b, g, raw = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
d = json.loads(sys.stdin.read())
a = d["allreduce"]
r = json.loads(raw)["seconds"] if raw != "-" else None
print("%-9s %-8s %-7s %8.3f %12.3f %7.1f%% %6d %12d %10.4f %10s %9s" % (t, n, b, d["seconds"], a["seconds"],
      100 * a["seconds"] / d["seconds"], a["calls"], a["bytes"], a["bytes"] / g,
      "-" if r is None else "%.3f" % r, "-" if not r else "%.2f" % (a["seconds"] / r)))' "$1" "$2" "$3" "$grad_bytes" "$4"
}
"$gd" train "$dir/gpt.onnx" --optimizer sgd -o "$dir/r1.onnx"
"$gd" run "$dir/r1.onnx" --random-inputs --steps 3 --format json | row none 1 - -
for n in 2 4; do
  for bucket in none 25MiB; do
    opts=()
    [ "$bucket" = none ] || opts=(--bucket-bytes "$bucket")
    "$gd" train "$dir/gpt.onnx" --optimizer sgd --replicas "$n" "${opts[@]}" -o "$dir/r$n.onnx"
    raw=$(mpirun --oversubscribe -np "$n" "$build/tests/bench/bench_allreduce" "$dir/r$n.onnx")
    mpirun --oversubscribe -np "$n" "$gd" run "$dir/r$n.onnx" --shard-inputs --random-inputs --steps 3 --format json |
      row MPI "$n" "$bucket" "$raw"
    "$gd" run "$dir/r$n.onnx" --replicas "$n" --random-inputs --steps 3 --format json | row threads "$n" "$bucket" -
  done
done
