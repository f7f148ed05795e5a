#!/usr/bin/env bash
# The threaded engine's default split (chosen per graph, MakeEngineFor)
# against each fixed split and the naive engine, on every config in
# models/: training step time from `frugal train` on synthetic data (the
# config's data replaced; the char LSTM keeps its text), the median of the
# --log-json windows after the first. Prints a Markdown table; each row's
# settings run in one round, ROUNDS rounds (default 2), median per setting.
#
# Usage: tools/bench/engine_splits.sh   (from the repository root, Release build)
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset; OMP_WAIT_POLICY as frugal sets it.
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
frugal=${FRUGAL:-build/frugal}
rounds=${ROUNDS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tools/bench/common.sh
source "$(dirname "$0")/common.sh"

step_ms() {  # config iters window flags...
  local config=$1 iters=$2 window=$3
  shift 3
  # shellcheck disable=SC2068
  "$frugal" train --config "$config" --epochs 1 --max-iters "$iters" --noprogress $@ \
    --log-json "$tmp/log.json" > "$tmp/out.log" 2>&1 || { tail -3 "$tmp/out.log" >&2; echo nan; return; }
  local batch
  batch=$(grep -o 'memory plan ([a-z_]*, batch [0-9]*' "$tmp/out.log" | head -1 | grep -o '[0-9]*$')
  grep '"batch":.*"samples_per_s"' "$tmp/log.json" | sed -E 's/.*"samples_per_s":([0-9.e+-]+).*/\1/' | tail -n +2 |
    awk -v b="$batch" '{ print 1000 * b / $1 }' | median 2
}

settings=("" "--engine-workers 1 --engine-kernel-threads 2" "--engine-workers 2 --engine-kernel-threads 1"
          "--engine naive")
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; load average at start $(cut -d' ' -f1-3 /proc/loadavg); ms per step, median of $rounds rounds"
echo
echo "| config | default split (chosen) | 1 worker x 2 | 2 workers x 1 | naive | default / best fixed |"
echo "|---|---|---|---|---|---|"
row() {  # label config iters window flags...
  local label=$1 config=$2 iters=$3 window=$4
  shift 4
  local -A runs=()
  for _ in $(seq "$rounds"); do
    for i in "${!settings[@]}"; do
      # shellcheck disable=SC2068,SC2086
      runs[$i]+="$(step_ms "$config" "$iters" "$window" $@ ${settings[$i]}) "
    done
  done
  "$frugal" train --config "$config" --max-iters 1 --noprogress $@ > "$tmp/split.log" 2>&1 || true
  local chosen m=()
  chosen=$(grep -o 'cpu: [0-9]* workers\? x [0-9]* kernel threads\?' "$tmp/split.log" | head -1 | sed 's/cpu: //')
  for i in "${!settings[@]}"; do m[$i]=$(tr ' ' '\n' <<< "${runs[$i]}" | grep -v '^$' | median 2); done
  echo "| $label | ${m[0]} ($chosen) | ${m[1]} | ${m[2]} | ${m[3]} | $(awk -v d="${m[0]}" -v a="${m[1]}" -v b="${m[2]}" -v c="${m[3]}" 'BEGIN { best = a < b ? a : b; best = best < c ? best : c; printf "%.2f", d / best }') |"
}
[ -f data/text/train.txt ] || bash data/text/prepare.sh > /dev/null
synthetic models/mlp/fashion_mnist.prototxt 50 "$tmp/mlp.prototxt"
row "MLP (batch 64)" "$tmp/mlp.prototxt" 300 50
synthetic models/lenet/fashion_mnist.prototxt 20 "$tmp/lenet.prototxt"
row "LeNet (batch 64)" "$tmp/lenet.prototxt" 100 20
synthetic models/resnet/resnet_cifar.prototxt 5 "$tmp/resnet.prototxt"
row "ResNet-20 (1x28x28, batch 128)" "$tmp/resnet.prototxt" 25 5
synthetic models/densenet/densenet_bc.prototxt 5 "$tmp/densenet.prototxt"
row "DenseNet-BC-40 (batch 64)" "$tmp/densenet.prototxt" 20 4
sed -e '/^ *display:/d' -e 's/^solver {/solver { display: 10/' models/lstm/char_lm.prototxt > "$tmp/char.prototxt"
row "char LSTM 2x128, 64 steps (fortunes text)" "$tmp/char.prototxt" 50 10
