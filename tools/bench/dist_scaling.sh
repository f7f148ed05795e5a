#!/usr/bin/env bash
# Data-parallel scaling over MPI on one machine: training samples/s of one
# process against `mpirun -np 2 ... --dist mpi` (same per-rank batch, so the
# 2-rank run's global batch is twice as large), for the Fashion-MNIST MLP and
# ResNet-20 (28x28, 1 channel, synthetic data: the config has no data
# section). Also prints rank 0's `dist:` line: time the gradient all-reduces
# were in flight and the part of it hidden behind backward.
#
# samples/s: the median of the --log-json windows (every DISPLAY batches,
# global over ranks), the first window (warm-up) left out.
#
# Usage: tools/bench/dist_scaling.sh [MLP_ITERS] [RESNET_ITERS]
# Run from the repository root after a Release build with MPI. Unsets
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (set in CI, they halve GEMM speed).
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mlp_iters=${1:-400}
resnet_iters=${2:-30}
frugal=${FRUGAL:-build/frugal}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The config with `display: $2` (and a synthetic training set if it has no data source).
prepare() {
  sed -e '/^ *display:/d' -e "s/^solver {/solver { display: $2/" "$1" > "$3"
  grep -q 'train *{' "$3" || sed -i 's/^data {/data {\n  train { synthetic { num_samples: 1000000 } }/' "$3"
}

median_speed() {
  grep '"batch":.*"samples_per_s"' "$1" | sed -E 's/.*"samples_per_s":([0-9.e+-]+).*/\1/' | tail -n +2 | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else printf "%.0f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

run() {  # key label config iters flags...
  local name=$1 label=$2 config=$3 iters=$4
  shift 4
  local one="$tmp/$name-1.json" single="$tmp/$name-1x1.json" two="$tmp/$name-2.json"
  # shellcheck disable=SC2068
  "$frugal" train --config "$config" --epochs 1 --max-iters "$iters" $@ --log-json "$one" > "$tmp/$name-1.log" 2>&1
  # shellcheck disable=SC2068
  "$frugal" train --config "$config" --epochs 1 --max-iters "$iters" $@ --engine-workers 1 --engine-kernel-threads 1 \
    --log-json "$single" > "$tmp/$name-1x1.log" 2>&1
  # shellcheck disable=SC2068
  mpirun --oversubscribe --bind-to none -np 2 "$frugal" train --config "$config" --epochs 1 --max-iters "$iters" $@ \
    --dist mpi --engine-workers 1 --engine-kernel-threads 1 --log-json "$two" > "$tmp/$name-2.log" 2>&1
  # shellcheck disable=SC2068
  mpirun --oversubscribe --bind-to none -np 2 "$frugal" train --config "$config" --epochs 1 --max-iters "$iters" $@ \
    --dist mpi --log-json "$two.split" > "$tmp/$name-2-split.log" 2>&1
  local s1 s11 s2 s22
  s1=$(median_speed "$one")
  s11=$(median_speed "$single")
  s2=$(median_speed "$two")
  s22=$(median_speed "$two.split")
  local speedup="$(awk -v a="$s1" -v b="$s2" 'BEGIN { printf "%.2f", b / a }') / $(awk -v a="$s1" -v b="$s22" 'BEGIN { printf "%.2f", b / a }')"
  local dist dist2
  dist=$(grep -o 'dist: .*' "$tmp/$name-2.log" | tail -1 | sed -E 's/.*in flight ([0-9.]+) s, of which exposed after backward ([0-9.]+) s \(([0-9]+)%.*/\1 s, \2 s, \3%/')
  dist2=$(grep -o 'dist: .*' "$tmp/$name-2-split.log" | tail -1 | sed -E 's/.*in flight ([0-9.]+) s, of which exposed after backward ([0-9.]+) s \(([0-9]+)%.*/\1 s, \2 s, \3%/')
  echo "| $label | $s1 | $s11 | $s2 | $s22 | $speedup | $dist | $dist2 |"
}

echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "1 process: threaded engine, default split (2 workers x 1 kernel thread) and 1 worker x 1 kernel thread;"
echo "2 processes: mpirun -np 2, each 1 worker x 1 kernel thread (1x1), or each the default split (2x1, 4 workers on 2 cores);"
echo "speed-up: 2 processes over 1 process (default split), 1x1 / 2x1; all-reduce: rank 0's time in flight (from the"
echo "request, gradients ready, to the end), of which exposed after backward, and the share hidden behind backward"
echo
echo "| model | 1 process | 1 process, 1x1 | 2 processes, 1x1 | 2 processes, 2x1 | speed-up | all-reduce, 1x1 | all-reduce, 2x1 |"
echo "|---|---|---|---|---|---|---|---|"
prepare models/mlp/fashion_mnist.prototxt 100 "$tmp/mlp.prototxt"
run mlp "MLP 784-512-512-10, batch 64/rank" "$tmp/mlp.prototxt" "$mlp_iters"
prepare models/resnet/resnet_cifar.prototxt 5 "$tmp/resnet.prototxt"
run resnet "ResNet-20 28x28x1, batch 64/rank" "$tmp/resnet.prototxt" "$resnet_iters" \
  --define depth=20 --define channels=1 --define size=28 --batch 64
