#!/usr/bin/env bash
# run_zero.sh - sharded data parallelism (train --shard, ZeRO stages 1-3) at GPT-2 small's size
# (gen_gpt2.py: nanoGPT's GPT-2, 124M parameters, its head tied to the token embedding, batch 1 x
# 1024 per replica), float32 with Adam. For N = 1, 2, 4, 8 replicas and each stage, `plan`'s figures
# for one replica: the peak, the model states (parameters, optimizer state, and the most
# parameter-gradient bytes live at once) per parameter of the model, and the bytes each replica
# sends per step by its collectives (ring algorithms); beside them ZeRO's formulas (Rajbhandari et
# al. 2020, section 5 and 7): model states per parameter, in its mixed-precision accounting (2 + 2 +
# K, K = 12: fp16 parameters and gradients, fp32 master copy and Adam's moments) and in float32's
# (4 + 4 + 8: graphdiet's float32 parameters are the master copy), and its traffic, 2 Psi elements
# per step for plain data parallelism and stages 1 and 2, 3 Psi for stage 3, each replica sending
# (N - 1) / N of them. Each with Adam updating every parameter as soon as its gradient is complete
# (graphdiet's default), and with --clip-grad-norm 1, whose norm waits for every gradient (where
# stage 2 frees each replica's whole gradients and stage 1 keeps them). Figures, not runs: plan
# reads no weight.
#
#   bash tests/bench/run_zero.sh [build] [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
G=$(realpath "$B/graphdiet")
D=${2:-/tmp/graphdiet-zero}
mkdir -p "$D"
[ -s "$D/gpt2.onnx" ] || /usr/bin/python3 tests/bench/gen_gpt2.py "$D/gpt2.onnx" 1 1024 2> >(grep -v Warning >&2)
printf '\nGPT-2 small (124M), batch 1 x 1024 per replica, float32, Adam (%s)\n\n' "$(lscpu | sed -n 's/^Model name: *//p')"
/usr/bin/python3 - "$G" "$D/gpt2.onnx" <<'PY'
import json, subprocess, sys, time

g, model = sys.argv[1], sys.argv[2]


def plan(*args):
    t = time.time()
    out = subprocess.check_output([g, "plan", model, "--optimizer", "adam", "--format", "json"] + list(args))
    return json.loads(out), time.time() - t


MiB = 2**20
base, _ = plan()
psi = base["per_param"]["parameters"]  # the model's trainable parameters
print(f"parameters: {psi:,}\n")
print("| clip | replicas | shard | peak MiB | params MiB | optimizer MiB | gradients MiB (most live) | model states B/param |"
      " ZeRO fp32 B/param | ZeRO mixed B/param | sent MiB/step | ZeRO sent MiB/step | sent / ZeRO | plan s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
# ZeRO's model states per parameter: (parameters, gradients, optimizer state), each divided by N
# from its stage on; float32 Adam holds 4 + 4 + 8 bytes, ZeRO's mixed precision 2 + 2 + 12
shards = {None: (1, 1, 1), "optimizer": (1, 1, 0), "gradients": (1, 0, 0), "parameters": (0, 0, 0)}
for clip, n, stage in [(c, n, s) for c in (0, 1) for n in (1, 2, 4, 8) for s in (None, "optimizer", "gradients", "parameters")]:
        if (n == 1 and stage) or (clip and n not in (1, 8)):
            continue
        args = ["--replicas", str(n)] if n > 1 else []
        args += ["--shard", stage] if stage else []
        args += ["--clip-grad-norm", "1"] if clip else []
        d, secs = plan(*args)
        q, r = d["per_param"], d.get("replicas") or {}
        states = q["param_bytes"] + q["optimizer_state_bytes"] + q["peak_param_gradient_bytes"]
        whole = shards[stage]
        fp32 = sum(b / (1 if w else n) for b, w in zip((4, 4, 8), whole))
        mixed = sum(b / (1 if w else n) for b, w in zip((2, 2, 12), whole))
        sent = r.get("sent_bytes", 0)
        zero_sent = (3 if stage == "parameters" else 2) * psi * 4 * (n - 1) / n
        ratio = f"{sent / zero_sent:.3f}" if zero_sent else "-"
        print(f"| {'yes' if clip else '-'} | {n} | {stage or '-'} | {d['peak_bytes_after'] / MiB:.0f} | {q['param_bytes'] / MiB:.0f} |"
              f" {q['optimizer_state_bytes'] / MiB:.0f} | {q['peak_param_gradient_bytes'] / MiB:.0f} |"
              f" {states / psi:.2f} | {fp32:.2f} | {mixed:.2f} | {sent / MiB:.0f} | {zero_sent / MiB:.0f} | {ratio} |"
              f" {secs:.2f} |")
PY
