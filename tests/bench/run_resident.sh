#!/bin/bash
# What `graphdiet run` holds beyond the plan: a GPT-style training graph (gen_big.py: vocabulary
# VOCAB, width D, L layers, H heads, sequence T; default 4096 768 12 12 256, GPT-2 small's body at
# the most classes the executor's SoftmaxCrossEntropyLoss takes) written by `train`, then run with
# random inputs while a sampler reads /proc/PID/status every 2 ms: the peak anonymous memory
# (RssAnon: what the process made itself) and the peak of mapped files (RssFile: the weights, read
# in place from the training graph). Issue 46's target for the anonymous part is the planned peak
# less the parameters (`plan`'s breakdown of the same file) plus a few MB; the table gives both and
# the ratio, and the same for the model as PyTorch wrote it, whose weights lie wherever they fall
# (most at offsets the executor cannot use in place, so it copies them).
#
#     bash tests/bench/run_resident.sh [BUILD] [VOCAB D L H T]
set -euo pipefail
build=${1:-build}
shift || true
args=("${@:-4096 768 12 12 256}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gd=$build/graphdiet
# shellcheck disable=SC2068
/usr/bin/python3 tests/bench/gen_big.py "$dir/gpt.onnx" ${args[@]} 2>/dev/null
"$gd" train "$dir/gpt.onnx" -o "$dir/train.onnx"
"$gd" convert "$dir/train.onnx" "$dir/unaligned.onnx" # convert keeps no alignment: weights where they fall
printf '| training graph (%s) | planned peak MiB | of it parameters MiB | planned non-parameter MiB | peak RssAnon MiB | over the plan MiB | RssAnon / planned non-parameter | peak RssFile MiB | run s |\n' "${args[*]}"
printf '|---|---|---|---|---|---|---|---|---|\n'
for f in train unaligned; do
  read -r peak params < <("$gd" plan "$dir/$f.onnx" --format json | /usr/bin/python3 -c \
    'import json,sys; d=json.load(sys.stdin); print(d["peak_bytes_after"], d["breakdown"]["params"])')
  /usr/bin/python3 - "$peak" "$params" "$f" "$gd" run "$dir/$f.onnx" --random-inputs <<'PY'
import subprocess, sys, time
peak, params, name, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
t0 = time.time()
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
anon = fil = 0
while p.poll() is None:
    try:
        with open(f"/proc/{p.pid}/status") as s:
            for l in s:
                if l.startswith("RssAnon:"):
                    anon = max(anon, int(l.split()[1]) * 1024)
                elif l.startswith("RssFile:"):
                    fil = max(fil, int(l.split()[1]) * 1024)
    except OSError:
        pass
    time.sleep(0.002)
assert p.returncode == 0, f"run failed: {p.returncode}"
M = 2**20
want = peak - params
label = {"train": "as train writes it (weights 8-aligned)", "unaligned": "the same through convert (weights where they fall)"}[name]
print(f"| {label} | {peak / M:.0f} | {params / M:.0f} | {want / M:.0f} | {anon / M:.0f} | {(anon - want) / M:.0f} | "
      f"{anon / want:.2f} | {fil / M:.0f} | {time.time() - t0:.1f} |")
PY
done
