#!/usr/bin/env bash
# Step time of each memory strategy against share, one config per line of
# output, measured with `frugal time` in one run (ratios on a noisy machine).
#   tools/bench/strategy_steps.sh [ITERS]
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for these figures.
set -euo pipefail
iters=${1:-3}
frugal=${FRUGAL:-build/frugal}
run() {  # name, config, defines...
  local name=$1 config=$2; shift 2
  local line="$name:"
  for s in share drop_cheap sqrt logn; do
    local ms
    ms=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$frugal" time --config "$config" "$@" --memory "$s" \
         --iters "$iters" --warmup 1 --data-grad=false 2>/dev/null | sed -n 's/^step (forward + backward, batch [0-9]*): \([0-9.]*\) ms.*/\1/p')
    line+=" $s ${ms} ms"
  done
  echo "$line"
}
run "ResNet-56 (1x28x28, batch 64)" models/resnet/resnet_cifar.prototxt --define depth=56 --define channels=1 --define size=28 --define batch=64
run "ResNet-164 (1x28x28, batch 32)" models/resnet/resnet_cifar.prototxt --define depth=164 --define channels=1 --define size=28 --define batch=32
run "LSTM 2x256, 64 steps, batch 32, vocab 1000" models/lstm/lstm_lm.prototxt --define layers=2 --define hidden=256 --define seq_len=64 --define batch=32 --define vocab=1000 --define 'outputs=$(${seq_len} - 1)' --token-data 1000
