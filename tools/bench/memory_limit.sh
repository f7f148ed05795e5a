#!/usr/bin/env bash
# --memory-limit against the process it bounds, on the models/ configs with
# their data. Per config: the smallest limit `frugal plan` says fits (from
# its error at 1 MiB), and the planned process without recomputation (the
# limit=100GiB plan, which is share's); then three limits (the smallest,
# halfway, share's), each trained for a few iterations by `frugal train
# --memory-limit L`, its peak resident set (VmHWM) measured from outside by
# /usr/bin/time. One row per (config, limit): the plan's recomputation,
# the planned process, the measured peak, whether it stayed within the
# limit, and the smallest limit's answer over the peak its plan measured
# (the planner issue: within the limit always; the answer within 10%).
#   tools/bench/memory_limit.sh [FRUGAL [MATCH]]   (default: build/frugal; run from the repository root;
#   MATCH: only the rows whose config contains it)
# Needs data/fashion-mnist (prepare.sh) and data/text (prepare.sh); makes
# data/toy-imagenet with its make.py when missing.
set -euo pipefail
frugal=${1:-build/frugal}
match=${2:-}
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
[ -f data/toy-imagenet/train.rec ] ||
  python3 data/toy-imagenet/make.py --frugal "$frugal" --out data/toy-imagenet >/dev/null
imagenet="--define train=data/toy-imagenet/train --define val=data/toy-imagenet/val --define classes=4"
rows=(
  "models/mlp/fashion_mnist.prototxt|"
  "models/lenet/fashion_mnist.prototxt|"
  "models/resnet/resnet_cifar.prototxt|--define depth=56"
  "models/densenet/densenet_bc.prototxt|"
  "models/lstm/char_lm.prototxt|--define seq_len=256"
  "models/gpt/gpt.prototxt|"
  "models/resnet/resnet_imagenet.prototxt|$imagenet --define depth=50 --define size=128 --define batch=16"
)
iters=4
mib=$((1 << 20))

echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p'); \
$(git rev-parse --short HEAD 2>/dev/null || echo '?'); $iters iterations per run"
echo
echo "| config | limit | plan | recompute | planned process | measured peak | within | answer / peak |"
echo "|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  config=${row%%|*}
  [[ $config == *"$match"* ]] || continue
  defines=${row#*|}
  # shellcheck disable=SC2086  # the defines are words
  smallest=$({ "$frugal" plan --config "$config" $defines --memory-limit 1MiB 2>&1 || true; } |
    sed -n 's/.*use --memory-limit \([0-9]*\)MiB or more.*/\1/p')
  # shellcheck disable=SC2086
  share=$("$frugal" plan --config "$config" $defines --memory-limit 100GiB --json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["process"]["total_bytes"])')
  share=$(((share + mib - 1) / mib))
  [ -n "$smallest" ] || { echo "| $config $defines | planning failed | | | | | | |"; continue; }
  for limit in "$smallest" $(((smallest + share) / 2)) "$share"; do
    log=$(mktemp)
    # shellcheck disable=SC2086
    /usr/bin/time -f 'maxrss %M' "$frugal" train --config "$config" $defines --memory-limit "${limit}MiB" \
      --max-iters $iters --progress=false >"$log" 2>&1 || true
    python3 - "$config $defines" "$limit" "$smallest" "$log" <<'EOF'
import re, sys
name, limit, smallest, log = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), open(sys.argv[4]).read()
peak = re.findall(r"maxrss (\d+)", log)
plan = re.search(r"memory plan \((\S+), batch \d+\): arena (\S+ \S+).*?(?:nodes recomputed \(\+(\d+)% FLOPs\))?$", log, re.M)
planned = re.search(r"process peak \S+ \S+ \(planned (\S+ \S+) =", log)
if not peak or not plan or "error" in log.lower() and "process peak" not in log:
    err = re.search(r"error: (.*)", log)
    print(f"| {name} | {limit} MiB | failed: {err.group(1)[:120] if err else '?'} | | | | | |")
    sys.exit()
peak_mib = int(peak[-1]) / 1024
ratio = f"{smallest / peak_mib:.2f}" if limit == smallest else ""
print(f"| {name} | {limit} MiB | arena {plan.group(2)} | +{plan.group(3) or 0}% | {planned.group(1) if planned else '?'} "
      f"| {peak_mib:.1f} MiB | {'yes' if peak_mib <= limit else '**no**'} | {ratio} |")
EOF
    rm -f "$log"
  done
done
