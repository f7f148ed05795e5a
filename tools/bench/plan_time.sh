#!/usr/bin/env bash
# Planning time against graph size: `frugal plan --memory all --json` on
# growing graphs (the 4x1024 LSTM over T steps, the CIFAR ResNet at depth
# d), one Markdown row per graph: training-graph nodes of share and of sqrt
# (recomputations included) and each strategy's plan_ms. One run each, on a
# machine as quiet as can be had; docs/memory.md holds the figures.
#   tools/bench/plan_time.sh [lstm|resnet ...]   (default: both)
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

[ $# -gt 0 ] || set -- lstm resnet
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for w in "$@"; do "$w"; done
