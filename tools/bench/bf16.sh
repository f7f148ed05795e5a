#!/usr/bin/env bash
# Mixed precision (--dtype bf16) against float32, in one run on this machine:
#   step    ResNet-20/56 b32 at CIFAR shapes on synthetic data: frugal's step
#           time in float32 and bfloat16, and the planned arena of each
#           (`frugal train --log-json`, the median of the windows after the
#           first, over ROUNDS runs each).
#   accuracy ResNet-20 on Fashion-MNIST (data/fashion-mnist), EPOCHS epochs
#           at batch 128 (the cosine schedule over them), float32 then
#           bfloat16: test accuracy after the last epoch. (The LSTM configs
#           stay float32 under --dtype bf16: docs/ARCHITECTURE.md.)
# Usage: tools/bench/bf16.sh [step] [accuracy]   (default: step)
# FRUGAL=path (default build/frugal), ROUNDS (3), EPOCHS (1).
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset (they halve OpenBLAS's
# GEMM speed); OMP_WAIT_POLICY=PASSIVE; run it on a quiet machine.
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_WAIT_POLICY=PASSIVE
frugal=${FRUGAL:-build/frugal}
rounds=${ROUNDS:-3}
epochs=${EPOCHS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tools/bench/common.sh
source "$(dirname "$0")/common.sh"

step_time() {  # depth dtype
  synthetic models/resnet/resnet_cifar.prototxt 4 "$tmp/config.prototxt"
  local t=()
  for _ in $(seq "$rounds"); do
    "$frugal" train --config "$tmp/config.prototxt" --define depth="$1" --define batch=32 --define channels=3 \
      --define size=32 --memory share --dtype "$2" --epochs 1 --max-iters 24 --noprogress \
      --log-json "$tmp/log.json" > "$tmp/frugal.log" 2>&1 || { tail -5 "$tmp/frugal.log" >&2; exit 1; }
    t+=("$(grep '"batch":.*"samples_per_s"' "$tmp/log.json" | sed -E 's/.*"samples_per_s":([0-9.e+-]+).*/\1/' | tail -n +2 |
      awk '{ print 32 / $1 }' | median)")
  done
  tr ' ' '\n' <<< "${t[*]}" | median
}

arena() {  # depth dtype
  "$frugal" plan --config models/resnet/resnet_cifar.prototxt --define depth="$1" --define batch=32 \
    --define channels=3 --define size=32 --memory share --dtype "$2" --json 2>/dev/null |
    sed -E 's/.*"arena_bytes":([0-9]+).*/\1/' | awk '{ printf "%.1f", $1 / 1048576 }'
}

step() {
  echo "| ResNet b32 (CIFAR shapes, share) | float32 ms | bfloat16 ms | ratio | float32 arena MiB | bfloat16 arena MiB |"
  echo "|---|---|---|---|---|---|"
  for depth in 20 56; do
    local f h
    f=$(step_time "$depth" float32)
    h=$(step_time "$depth" bf16)
    echo "| ResNet-$depth | $(awk -v x="$f" 'BEGIN { printf "%.1f", 1000 * x }') |" \
      "$(awk -v x="$h" 'BEGIN { printf "%.1f", 1000 * x }') | $(awk -v a="$h" -v b="$f" 'BEGIN { printf "%.2f", a / b }') |" \
      "$(arena "$depth" float32) | $(arena "$depth" bf16) |"
  done
}

accuracy() {
  echo "| run | float32 | bfloat16 |"
  echo "|---|---|---|"
  local r=()
  for d in float32 bf16; do
    "$frugal" train --config models/resnet/resnet_cifar.prototxt --define depth=20 --epochs "$epochs" --dtype "$d" \
      --noprogress --log-json "$tmp/acc.json" > "$tmp/frugal.log" 2>&1 || { tail -5 "$tmp/frugal.log" >&2; exit 1; }
    r+=("$(grep '"time_s"' "$tmp/acc.json" | tail -1 |
      sed -E 's/.*"val_accuracy":([0-9.e+-]+).*"time_s":([0-9.e+-]+).*/\1 (last epoch \2 s)/')")
  done
  echo "| ResNet-20 Fashion-MNIST, $epochs epoch(s): test accuracy | ${r[0]} | ${r[1]} |"
}

[ $# -gt 0 ] || set -- step
for what in "$@"; do "$what"; done
