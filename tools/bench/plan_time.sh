#!/usr/bin/env bash
# Planning time against graph size: `frugal plan --memory all --json` on
# growing graphs (the 4x1024 LSTM over T steps, the CIFAR ResNet at depth
# d), one Markdown row per graph: training-graph nodes of share and of sqrt
# (recomputations included) and each strategy's plan_ms. `budget` plans
# the budget strategy at three budgets between the sqrt plan's arena and
# share's (10%, 50% and 90% of the way) on the 4x1024 LSTM at T=1000 and
# 4096, the CIFAR ResNet at depth 1001 and 10001 and ResNet-1001 on
# ImageNet shapes (resnet_imagenet's default): plan_ms, builds, and
# the plan found. One run each, on a machine as quiet as can be had;
# docs/memory.md holds the figures.
#   tools/bench/plan_time.sh [lstm|resnet|budget ...]   (default: lstm resnet)
set -euo pipefail
frugal=${FRUGAL:-build/frugal}
strategies=(none inplace share drop_cheap sqrt logn)

row() {  # label, frugal plan arguments...
  local label=$1
  shift
  "$frugal" plan "$@" --memory all --json --max-nodes 100000000 2>/dev/null | python3 -c '
import json, sys
label, names = sys.argv[1], sys.argv[2].split()
plans = {p["strategy"]: p for p in map(json.loads, sys.stdin)}
cells = [label, str(plans["share"]["num_nodes"]), str(plans["sqrt"]["num_nodes"])]
cells += ["%.0f" % plans[s]["plan_ms"] for s in names]
print("| " + " | ".join(cells) + " |")' "$label" "${strategies[*]}"
}

header() {
  echo
  echo "| $1 | nodes (share) | nodes (sqrt) | $(printf '%s ms | ' "${strategies[@]}")"
  echo "|---|---|---|$(printf -- '---|%.0s' "${strategies[@]}")"
}

lstm() {
  header "LSTM 4x1024 b64, T"
  for t in 250 500 1000 2000 4096; do
    row "$t" --config models/lstm/lstm_lm.prototxt --define layers=4 --define hidden=1024 --define batch=64 \
      --define seq_len=$t --define "outputs=$((t - 1))"
  done
}

resnet() {
  header "CIFAR ResNet b32, depth"
  for d in 164 1001 2495 4997 10001; do
    row "$d" --config models/resnet/resnet_cifar.prototxt --define depth=$d --define batch=32
  done
}

budget_rows() {  # label, frugal plan arguments...
  local label=$1 lo hi
  shift
  read -r lo hi < <("$frugal" plan "$@" --memory sqrt --json --max-nodes 100000000 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["arena_bytes"], end=" ")'
    "$frugal" plan "$@" --memory share --json --max-nodes 100000000 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["arena_bytes"])')
  for tenths in 1 5 9; do
    local b=$((lo + (hi - lo) * tenths / 10))
    "$frugal" plan "$@" --memory budget=$b --json --max-nodes 100000000 2>/dev/null |
      python3 -c '
import json, sys
p = json.load(sys.stdin)
mib = lambda b: "%.0f MiB" % (b / 2**20)
print("| %s | %s | %.0f | %d | %s | +%.1f%% |" % (sys.argv[1], mib(int(sys.argv[2])), p["plan_ms"], p["num_builds"],
                                                 mib(p["arena_bytes"]), 100 * p["extra_flops_ratio"]))' "$label" "$b"
  done
}

budget() {
  echo
  echo "| graph | budget | plan_ms | builds | arena | extra FLOPs |"
  echo "|---|---|---|---|---|---|"
  local lstm=(--config models/lstm/lstm_lm.prototxt --define layers=4 --define hidden=1024 --define batch=64)
  budget_rows "LSTM T=1000" "${lstm[@]}" --define seq_len=1000 --define outputs=999
  budget_rows "LSTM T=4096" "${lstm[@]}" --define seq_len=4096 --define outputs=4095
  budget_rows "ResNet depth 1,001" --config models/resnet/resnet_cifar.prototxt --define depth=1001 --define batch=32
  budget_rows "ResNet depth 10,001" --config models/resnet/resnet_cifar.prototxt --define depth=10001 --define batch=32
  budget_rows "ResNet-1001 ImageNet b32" --config models/resnet/resnet_imagenet.prototxt
}

[ $# -gt 0 ] || set -- lstm resnet
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for w in "$@"; do "$w"; done
