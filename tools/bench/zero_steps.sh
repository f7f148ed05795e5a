#!/usr/bin/env bash
# Step time of --shard optimizer against unsharded data-parallel training:
# a GPT of models/gpt/gpt.prototxt (LAYERS x D, T = 256, batch 4 per rank,
# share) over 2 ranks on this machine, one engine worker and kernel thread
# per rank. The step is timed from outside the process: the wall time of
# W + N updates minus that of W, over N; the two variants alternate, ROUNDS
# rounds; every round's figure is printed, then the ratio of the medians.
#
# Usage: tools/bench/zero_steps.sh [ROUNDS] [LAYERS] [D]   (default: 3 4 256)
# Run from the repository root after a Release build with MPI, on a quiet
# machine.
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rounds=${1:-3}
layers=${2:-4}
d=${3:-256}
frugal=${FRUGAL:-build/frugal}
w=3
n=12
gpt=(--config models/gpt/gpt.prototxt --define "layers=$layers" --define "d_model=$d" --define heads=4
  --define seq_len=256 --define batch=4 --memory share --engine-workers 1 --engine-kernel-threads 1)

wall() {  # iters flags...
  local iters=$1
  shift
  local start
  start=$(date +%s.%N)
  mpirun --oversubscribe --bind-to none -np 2 "$frugal" train "${gpt[@]}" --max-iters "$iters" --dist mpi "$@" \
    > /dev/null 2>&1
  echo "$(date +%s.%N) - $start" | bc -l
}

echo "$(date -u +%F), $(git rev-parse --short HEAD), $(lscpu | sed -n 's/^Model name: *//p'), 2 ranks, GPT ${layers}x${d}"
declare -A steps
for ((r = 1; r <= rounds; r++)); do
  for shard in "" "--shard optimizer"; do
    key=${shard:-unsharded}
    # shellcheck disable=SC2086
    s=$(echo "($(wall $((w + n)) $shard) - $(wall $w $shard)) / $n" | bc -l)
    steps[$key]+="$s "
    printf "round %d %-18s step %.3f s\n" "$r" "$key" "$s"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
a=$(echo "${steps[unsharded]}" | median)
b=$(echo "${steps[--shard optimizer]}" | median)
printf "median step: unsharded %.3f s, --shard optimizer %.3f s: %.3fx\n" "$a" "$b" "$(echo "$b / $a" | bc -l)"
