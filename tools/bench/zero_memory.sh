#!/usr/bin/env bash
# Per-rank memory of --shard optimizer (ZeRO stage 1) against unsharded
# data-parallel training: the GPT of models/gpt/gpt.prototxt at 12 layers
# of 768 features (GPT-2 small's shapes, the character vocabulary), T =
# 1,024, batch 1 per rank, --memory sqrt, N ranks on this machine, ITERS
# updates. Per run, one Markdown row: the plan of rank 0 (`frugal plan
# --ranks N [--shard optimizer] --json`: parameters + gradients + optimizer
# state, and every tensor), each rank's peak resident set as /usr/bin/time
# measures it from outside the process (min-max over the ranks), and the
# run's wall time; then the saving per rank, planned against measured.
#
# Usage: tools/bench/zero_memory.sh [RANKS] [ITERS]   (default: 4 2)
# Run from the repository root after a Release build with MPI.
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks=${1:-4}
iters=${2:-2}
frugal=${FRUGAL:-build/frugal}
gpt=(--config models/gpt/gpt.prototxt --define layers=12 --define d_model=768 --define heads=12
  --define seq_len=1024 --define batch=1 --memory sqrt)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "$(date -u +%F), $(git rev-parse --short HEAD), $(lscpu | sed -n 's/^Model name: *//p'), $ranks ranks, $iters updates"
echo
echo "| run | planned: params + grads + opt state | planned: every tensor | measured peak RSS per rank | wall s |"
echo "|---|---|---|---|---|"
declare -A tensors peak
for shard in "" "--shard optimizer"; do
  key=${shard:-unsharded}
  # shellcheck disable=SC2086
  read -r state all < <("$frugal" plan "${gpt[@]}" --ranks "$ranks" $shard --json 2>/dev/null | python3 -c '
import json, sys
p = json.loads(sys.stdin.readline())
print(p["param_bytes"] + p["param_grad_bytes"] + p["optimizer_state_bytes"], p["tensor_bytes"])')
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  mpirun --oversubscribe --bind-to none -np "$ranks" /usr/bin/time -f "maxrss %M" "$frugal" train "${gpt[@]}" \
    --max-iters "$iters" --dist mpi $shard --engine-kernel-threads 1 > "$tmp/log" 2>&1
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  read -r lo hi < <(sed -n 's/^maxrss \([0-9]*\)$/\1/p' "$tmp/log" | sort -n | awk '{ v[NR] = $1 } END { print v[1] * 1024, v[NR] * 1024 }')
  tensors[$key]=$all
  peak[$key]=$hi
  printf "| %s | %.0f MiB | %.0f MiB | %.0f-%.0f MiB | %.0f |\n" "$key" "$(echo "$state / 1048576" | bc -l)" \
    "$(echo "$all / 1048576" | bc -l)" "$(echo "$lo / 1048576" | bc -l)" "$(echo "$hi / 1048576" | bc -l)" "$wall"
done
echo
printf "saving per rank: planned %.0f MiB, measured %.0f MiB (the largest rank's peak)\n" \
  "$(echo "(${tensors[unsharded]} - ${tensors[--shard optimizer]}) / 1048576" | bc -l)" \
  "$(echo "(${peak[unsharded]} - ${peak[--shard optimizer]}) / 1048576" | bc -l)"
