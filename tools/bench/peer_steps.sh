#!/usr/bin/env bash
# Training step time of frugal next to PyTorch and MXNet on the same
# workloads (the peers in ../shared/peers: same shapes, same batch, synthetic
# data, one step = forward + backward + SGD update), alternated ROUNDS times;
# prints a Markdown table with the median of each side and the ratio
# frugal / peer.
#
# frugal: `frugal train` on a copy of the config with a synthetic training
# set; its step time is batch / samples_per_s of each --log-json window of
# WINDOW batches, the first window (warm-up) left out, median over windows.
# Peer: the script's step_s_median.
#
# Usage: PY=/path/to/venv/bin/python tools/bench/peer_steps.sh [WORKLOAD...]
#   workloads against PyTorch: r20b32 r20b128 r56b32 r56b128 r110b32 r110b128
#   r1001share r1001sqrt lstm lstm_fused mlp; against MXNet (MXPY): mx_r56b32
#   mx_r110b32 mx_lstm (default: r20b32 r56b32 r110b32 lstm lstm_fused)
# Env: PY (a python with torch), MXPY (a python with mxnet 1.9.1 and
# numpy<1.24), PEERS (default ../shared/peers), FRUGAL (default
# build/frugal), ROUNDS (default 3), FRUGAL_FLAGS (extra flags).
# Both sides: 2 threads, each at its own OpenMP defaults (frugal sets
# OMP_WAIT_POLICY=PASSIVE for itself; PASSIVE slows eager PyTorch by about
# 30%), OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (they halve OpenBLAS's
# GEMM speed).
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OMP_WAIT_POLICY
PY=${PY:-python3}
PEERS=${PEERS:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/peers}
frugal=${FRUGAL:-build/frugal}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tools/bench/common.sh
source "$(dirname "$0")/common.sh"

frugal_step() {  # config batch iters window flags...
  local config=$1 batch=$2 iters=$3 window=$4
  shift 4
  synthetic "$config" "$window" "$tmp/config.prototxt"
  # shellcheck disable=SC2068,SC2086
  "$frugal" train --config "$tmp/config.prototxt" --epochs 1 --max-iters "$iters" --noprogress $@ ${FRUGAL_FLAGS:-} \
    --log-json "$tmp/log.json" > "$tmp/frugal.log" 2>&1 || { tail -5 "$tmp/frugal.log" >&2; echo nan; return; }
  grep '"batch":.*"samples_per_s"' "$tmp/log.json" | sed -E 's/.*"samples_per_s":([0-9.e+-]+).*/\1/' | tail -n +2 |
    awk -v b="$batch" '{ print b / $1 }' | median
}

peer_step() {  # script args...
  (cd "$PEERS" && "$PY" "$@" --threads 2) | tail -1 | sed -E 's/.*"step_s_median": ([0-9.e+-]+).*/\1/'
}

# The MLP: one epoch of Fashion-MNIST at batch 128 (the real files, shuffled;
# frugal's epoch time_s from --log-json, PyTorch's epoch_s_median), each side
# validating after it (not timed).
mlp() {
  local f=() p=()
  for _ in $(seq "$rounds"); do
    # shellcheck disable=SC2086
    "$frugal" train --config models/mlp/fashion_mnist.prototxt --batch 128 --epochs 1 --noprogress ${FRUGAL_FLAGS:-} \
      --log-json "$tmp/mlp.json" > "$tmp/frugal.log" 2>&1 || tail -5 "$tmp/frugal.log" >&2
    f+=("$(grep '"epoch":' "$tmp/mlp.json" | grep -v '"batch":' | head -1 | sed -E 's/.*"time_s":([0-9.e+-]+).*/\1/')")
    p+=("$( (cd "$PEERS" && "$PY" fmnist_mlp.py --epochs 1 --batch 128 --threads 2) | tail -1 |
      sed -E 's/.*"epoch_s_median": ([0-9.e+-]+).*/\1/')")
  done
  row "MLP 784-512-512-10, one epoch at batch 128 (ms)" "${f[*]}" "${p[*]}"
}

mx_step() {  # script args... (MXNet takes its threads from OMP_NUM_THREADS)
  (cd "$PEERS" && OMP_NUM_THREADS=2 "${MXPY:?set MXPY to a python with mxnet}" "$@") | tail -1 |
    sed -E 's/.*"step_s_median": ([0-9.e+-]+).*/\1/'
}

mx_resnet() {  # depth batch iters window
  local f=() p=()
  for _ in $(seq "$rounds"); do
    f+=("$(frugal_step models/resnet/resnet_cifar.prototxt "$2" "$3" "$4" --define depth="$1" --define batch="$2" \
      --define channels=3 --define size=32 --memory share)")
    p+=("$(mx_step mx_resnet.py --depth "$1" --batch "$2" --mirror none --warmup 2 --steps "$3")")
  done
  row "ResNet-$1 b$2 (share / MXNet none)" "${f[*]}" "${p[*]}"
}

resnet() {  # depth batch iters window strategy peer_strategy
  local f=() p=()
  for _ in $(seq "$rounds"); do
    f+=("$(frugal_step models/resnet/resnet_cifar.prototxt "$2" "$3" "$4" --define depth="$1" --define batch="$2" \
      --define channels=3 --define size=32 --memory "$5")")
    p+=("$(peer_step resnet_cifar.py --depth "$1" --batch "$2" --strategy "$6" --warmup 2 --steps "$3")")
  done
  row "ResNet-$1 b$2 ($5 / PyTorch $6)" "${f[*]}" "${p[*]}"
}

# The LSTM 2x256 b32 T=1000: models/lstm/char_lm.prototxt, an lstm op per
# run of 25 steps (tools/bench/lstm_steps.sh also times it from outside).
lstm_flags=(--define layers=2 --define hidden=256 --define batch=32 --define seq_len=1000 --define chunk=25
            --define vocab=128 --define val_interval=0)
lstm() {  # impl
  local f=() p=()
  for _ in $(seq "$rounds"); do
    f+=("$(SYNTHETIC="integers: true max: 128 num_classes: 128 label_shape: 1000" frugal_step \
      models/lstm/char_lm.prototxt 32 6 1 "${lstm_flags[@]}")")
    p+=("$(peer_step lstm_lm.py --seq-len 1000 --impl "$1" --strategy plain --warmup 1 --steps 5)")
  done
  row "LSTM 2x256 b32 T=1000 (PyTorch $1)" "${f[*]}" "${p[*]}"
}

mx_lstm() {
  local f=() p=()
  for _ in $(seq "$rounds"); do
    f+=("$(SYNTHETIC="integers: true max: 128 num_classes: 128 label_shape: 1000" frugal_step \
      models/lstm/char_lm.prototxt 32 6 1 "${lstm_flags[@]}")")
    p+=("$(mx_step mx_lstm.py --seq-len 1000 --impl fused --mirror none --warmup 1 --steps 5)")
  done
  row "LSTM 2x256 b32 T=1000 (MXNet fused RNN)" "${f[*]}" "${p[*]}"
}

row() {  # label frugal_times peer_times
  local fm pm
  fm=$(tr ' ' '\n' <<< "$2" | median)
  pm=$(tr ' ' '\n' <<< "$3" | median)
  echo "| $1 | $(awk -v x="$fm" 'BEGIN { printf "%.1f", 1000 * x }') | $(awk -v x="$pm" 'BEGIN { printf "%.1f", 1000 * x }') | $(awk -v a="$fm" -v b="$pm" 'BEGIN { printf "%.2f", a / b }') | $2 / $3 |"
}

workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(r20b32 r56b32 r110b32 lstm lstm_fused)
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; load average at start $(cut -d' ' -f1-3 /proc/loadavg); $("$PY" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo "no torch")"
echo
echo "| workload (frugal strategy / peer) | frugal step (ms) | peer step (ms) | frugal / peer | rounds (s): frugal / peer |"
echo "|---|---|---|---|---|"
for w in "${workloads[@]}"; do
  case $w in
    r20b32) resnet 20 32 30 5 share plain ;;
    r20b128) resnet 20 128 15 3 share plain ;;
    r56b32) resnet 56 32 20 4 share plain ;;
    r56b128) resnet 56 128 10 2 share plain ;;
    r110b32) resnet 110 32 15 3 share plain ;;
    r110b128) resnet 110 128 8 2 share plain ;;
    r1001share) resnet 1001 32 5 1 share plain ;;
    r1001sqrt) resnet 1001 32 5 1 sqrt ckpt ;;
    lstm) lstm unrolled ;;
    lstm_fused) lstm fused ;;
    mlp) mlp ;;
    mx_r56b32) mx_resnet 56 32 20 4 ;;
    mx_r110b32) mx_resnet 110 32 15 3 ;;
    mx_lstm) mx_lstm ;;
    *) echo "unknown workload $w" >&2; exit 2 ;;
  esac
done
