#!/usr/bin/env bash
# Training step time of a config under several engine settings, data loading
# on (the real Fashion-MNIST files, shuffled, loaded by the engine's I/O
# thread; inline with the naive engine). Prints a Markdown table: the median
# over REPEATS runs of (loop time / iterations), where the loop time is the
# epoch's "time_s" in the JSON log (training batches only: no data set
# loading, no validation).
#
# Usage: tools/bench/train_step.sh [CONFIG] [ITERS] [REPEATS]
# Run from the repository root after a Release build. Unsets OPENBLAS_CORETYPE
# and OPENBLAS_L2_SIZE (set in CI, they halve GEMM speed).
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
config=${1:-models/mlp/fashion_mnist.prototxt}
iters=${2:-400}
repeats=${3:-5}
frugal=${FRUGAL:-build/frugal}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

settings=(
  "naive (kernels: every core)|--engine naive"
  "naive, 1 kernel thread|--engine naive --engine-kernel-threads 1"
  "threaded, default split|--engine threaded"
  "threaded, 1 worker x 2 kernel threads|--engine threaded --engine-workers 1 --engine-kernel-threads 2"
  "threaded, 1 worker x 1 kernel thread|--engine threaded --engine-workers 1 --engine-kernel-threads 1"
  "threaded, 2 workers x 1 kernel thread|--engine threaded --engine-workers 2 --engine-kernel-threads 1"
  "threaded, 2 workers x 2 kernel threads (oversubscribed)|--engine threaded --engine-workers 2 --engine-kernel-threads 2"
)
echo "config $config, $iters iterations, median of $repeats runs; $(nproc) cores; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| engine | step time (ms) | samples/s | runs (ms) | load |"
echo "|---|---|---|---|---|"
for s in "${settings[@]}"; do
  label=${s%%|*}
  flags=${s#*|}
  times=()
  for r in $(seq "$repeats"); do
    # shellcheck disable=SC2086
    "$frugal" train --config "$config" --epochs 1 --max-iters "$iters" $flags \
      --log-json "$tmp/log.json" >"$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; exit 1; }
    times+=("$(python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline()); print(1000*d["time_s"]/d["iterations"])' "$tmp/log.json")")
  done
  batch=$(grep -o 'batch [0-9]*' "$tmp/out.txt" | head -1 | cut -d' ' -f2)
  python3 - "$label" "$batch" "$(cut -d' ' -f1 /proc/loadavg)" "${times[@]}" <<'PY'
import statistics, sys
label, batch, load, times = sys.argv[1], int(sys.argv[2]), sys.argv[3], [float(t) for t in sys.argv[4:]]
m = statistics.median(times)
print(f"| {label} | {m:.2f} | {batch * 1000 / m:.0f} | {', '.join(f'{t:.2f}' for t in times)} | {load} |")
PY
done
