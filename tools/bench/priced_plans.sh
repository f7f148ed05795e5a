#!/usr/bin/env bash
# Plans priced in time (issue 18 §3), in one run per model:
#   1. `frugal time --save-costs` measures each op under share (the table);
#   2. for share, drop_cheap, sqrt and two budgets between sqrt's and share's
#      arenas, `frugal time --costs` prints the plan's predicted step beside
#      the measured one;
#   3. at each budget, the measured step of the FLOP-priced plan (no table)
#      against the time-priced one.
#   tools/bench/priced_plans.sh [ITERS]
# Steps are the fastest of ITERS (the cost table's unit), the least slowed by
# other processes and stolen time on a shared machine.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for these figures.
set -euo pipefail
iters=${1:-5}
frugal=${FRUGAL:-build/frugal}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
time_args=()  # flags of `frugal time` alone (--token-data), set per model
ftime() { env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$frugal" time "$@" "${time_args[@]}" --iters "$iters" \
            --warmup 1 --data-grad=false 2>/dev/null; }
arena() {  # config-args... -> arena bytes of the one strategy asked for
  "$frugal" plan "$@" --json 2>/dev/null |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["arena_bytes"])'
}
run() {  # name, config args...
  local name=$1; shift
  echo "## $name"
  ftime "$@" --memory share --save-costs "$tmp/costs" | grep '^cost table' | sed "s|$tmp/||"
  local share sqrt
  share=$(arena "$@" --memory share)
  sqrt=$(arena "$@" --memory sqrt)
  local b1=$((sqrt + (share - sqrt) / 3)) b2=$((sqrt + 2 * (share - sqrt) / 3))
  echo "| plan | arena | recompute, predicted | step, predicted | fastest step, measured | predicted / measured |"
  echo "|---|---|---|---|---|---|"
  for s in share drop_cheap sqrt "budget=$b1" "budget=$b2"; do
    ftime "$@" --memory "$s" --costs "$tmp/costs" | python3 -c '
import re, sys
out = sys.stdin.read()
p = re.search(r"predicted by the cost table \S+: step ([0-9.]+) ms \(recomputation ([0-9.]+) ms\), "
              r"measured ([0-9.]+) ms fastest", out)
a = re.search(r"arena planned ([0-9.]+ \S+),", out)
print(f"| {sys.argv[1]} | {a.group(1)} | {float(p.group(2)):.1f} ms | {float(p.group(1)):.1f} ms | "
      f"{float(p.group(3)):.1f} ms | {float(p.group(1)) / float(p.group(3)):.3f} |")' "$s"
  done
  echo
  echo "| budget | FLOP-priced: recompute FLOPs, fastest step | time-priced: recompute FLOPs, fastest step |" \
       "time / FLOP |"
  echo "|---|---|---|---|"
  for b in "$b1" "$b2"; do
    ftime "$@" --memory "budget=$b" > "$tmp/flop.txt"
    ftime "$@" --memory "budget=$b" --costs "$tmp/costs" > "$tmp/time.txt"
    python3 - "$b" "$tmp/flop.txt" "$tmp/time.txt" <<'PY'
import re, sys
def parse(path):
    out = open(path).read()
    step = float(re.search(r"^step \(forward \+ backward, batch \d+\): .* fastest ([0-9.]+) ms", out, re.M).group(1))
    extra = re.search(r"nodes recomputed \(\+([0-9.]+)% FLOPs\)", out).group(1)
    return step, extra
(fs, fx), (ts, tx) = parse(sys.argv[2]), parse(sys.argv[3])
print(f"| {int(sys.argv[1]) / 2**20:.1f} MiB | +{fx}%, {fs:.1f} ms | +{tx}%, {ts:.1f} ms | {ts / fs:.3f} |")
PY
  done
  echo
}
run "ResNet-164 (1x28x28, batch 32)" --config models/resnet/resnet_cifar.prototxt --define depth=164 \
  --define channels=1 --define size=28 --define batch=32
time_args=(--token-data 1000)
run "LSTM 2x256, 128 steps, batch 32, vocabulary 1000" --config models/lstm/lstm_lm.prototxt --define layers=2 \
  --define hidden=256 --define seq_len=128 --define batch=32 --define vocab=1000 --define 'outputs=$(${seq_len} - 1)'
