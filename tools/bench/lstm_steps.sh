#!/usr/bin/env bash
# The char LSTM (models/lstm/char_lm.prototxt at 2 layers of 256, batch 32,
# T=1000 steps, vocabulary 128, an `lstm` op per run of CHUNK steps) against
# PyTorch's nn.LSTM on the same model (../shared/peers/lstm_lm.py --impl
# fused), alternated ROUNDS times, one line per round:
# frugal's step from its own --log-json windows (the median after the first
# W) and from outside the process (the wall time of W+N iterations minus
# that of W, over N), its peak resident set, and PyTorch's median step and
# peak. Both sides: 2 threads, each at its own OpenMP defaults (frugal sets
# OMP_WAIT_POLICY=PASSIVE for itself; PyTorch's threads spin),
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset; frugal trains with synthetic
# token ids and Adam (the config's), PyTorch with SGD.
#
# Usage: PY=/path/to/venv/bin/python tools/bench/lstm_steps.sh
# Env: PY, PEERS (default ../shared/peers), FRUGAL (default build/frugal),
# ROUNDS (3), CHUNK (25), W (2), N (5).
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OMP_WAIT_POLICY
PY=${PY:-python3}
PEERS=${PEERS:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/peers}
frugal=${FRUGAL:-build/frugal}
rounds=${ROUNDS:-3} chunk=${CHUNK:-25} w=${W:-2} n=${N:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tools/bench/common.sh
source "$(dirname "$0")/common.sh"

SYNTHETIC="integers: true max: 128 num_classes: 128 label_shape: 1000" synthetic models/lstm/char_lm.prototxt 1 \
  "$tmp/char.prototxt"
defines=(--define layers=2 --define hidden=256 --define batch=32 --define seq_len=1000 --define "chunk=$chunk"
         --define vocab=128 --define val_interval=0)
run() {  # iterations [flags...]: the wall seconds and peak KiB of `frugal train`
  local iters=$1
  shift
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$frugal" train --config "$tmp/char.prototxt" "${defines[@]}" --epochs 1 \
    --max-iters "$iters" --noprogress "$@" > "$tmp/frugal.log" 2>&1 || { tail -5 "$tmp/frugal.log" >&2; exit 1; }
  cat "$tmp/time"
}

echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p');" \
  "frugal $(git rev-parse --short HEAD 2>/dev/null || echo '?'); LSTM 2x256 b32 T=1000, chunk $chunk"
for r in $(seq "$rounds"); do
  read -r a _ < <(run "$w")
  read -r b peak < <(run $((w + n)) --log-json "$tmp/log.json")
  own=$(grep '"batch":.*"samples_per_s"' "$tmp/log.json" | sed -E 's/.*"samples_per_s":([0-9.e+-]+).*/\1/' |
    tail -n +$((w + 1)) | awk '{ print 32 / $1 }' | median 3)
  wall=$(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.3f", (b - a) / n }')
  torch=$(cd "$PEERS" && "$PY" lstm_lm.py --seq-len 1000 --impl fused --strategy plain --warmup 1 --steps "$n" \
    --threads 2 2>/dev/null | tail -1)
  ts=$(echo "$torch" | sed -E 's/.*"step_s_median": ([0-9.e+-]+).*/\1/')
  tp=$(echo "$torch" | sed -E 's/.*"peak_rss_mib": ([0-9.e+-]+).*/\1/')
  awk -v r="$r" -v own="$own" -v wall="$wall" -v peak="$peak" -v ts="$ts" -v tp="$tp" 'BEGIN {
    printf "round %d: frugal %.3f s (own) %.3f s (wall), peak %.0f MiB | nn.LSTM %.3f s, peak %.0f MiB | frugal / nn.LSTM %.2f (own) %.2f (wall)\n",
      r, own, wall, peak / 1024, ts, tp, own / ts, wall / ts }'
done
