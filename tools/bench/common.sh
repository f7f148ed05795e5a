# Shell functions the benchmark scripts share (sourced, not run).

# A copy of a config with `display: N` and a synthetic training set instead
# of its data sources (no validation); $SYNTHETIC adds fields to the
# synthetic source (e.g. "integers: true max: 128 label_shape: 1000").
synthetic() {  # config display out
  sed -e '/^ *display:/d' -e "s/^solver {/solver { display: $2/" -e '/^ *train *{/,/}/d' -e '/^ *val *{/,/}/d' \
    -e '/^ *labels:/d' "$1" > "$3"
  sed -i "s/^data {/data {\n  train { synthetic { num_samples: 100000000 ${SYNTHETIC:-} } }/" "$3"
}

# The median of the numbers on stdin, one per line, with $1 decimals (default 4).
median() {
  sort -g | awk -v d="${1:-4}" '{ v[NR] = $1 } END { printf "%.*f", d, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# "min-max" of the numbers on stdin, one per line, times $1, with $2 decimals.
range() {
  sort -g | awk -v k="$1" -v d="$2" 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.*f-%.*f", d, k * lo, d, k * hi }'
}

# One round of frugal's training step, measured two ways: `frugal train`
# on a synthetic copy of the config ($tmp/steps.prototxt; $SYNTHETIC as in
# synthetic) for W iterations, then for W+N with --log-json. Prints "own
# outside peak_mib": own, the median of batch / samples_per_s over the
# longer run's one-batch windows past the first W (what frugal reports of
# itself); outside, the wall time of W+N iterations minus that of W, over N
# (start-up, planning, first touch and warm-up cancel out); the longer
# run's peak resident set (VmHWM). Needs $tmp and $frugal.
frugal_steps() {  # config batch W N [train flags...]
  local config=$1 batch=$2 w=$3 n=$4 a b peak own
  shift 4
  synthetic "$config" 1 "$tmp/steps.prototxt"
  timed() {  # iterations [flags...]: wall seconds and peak KiB
    local iters=$1
    shift
    /usr/bin/time -f "%e %M" -o "$tmp/time" "$frugal" train --config "$tmp/steps.prototxt" --epochs 1 \
      --max-iters "$iters" --noprogress "$@" > "$tmp/frugal.log" 2>&1 || { tail -5 "$tmp/frugal.log" >&2; return 1; }
    cat "$tmp/time"
  }
  read -r a _ < <(timed "$w" "$@") || { echo "nan nan nan"; return; }
  read -r b peak < <(timed $((w + n)) "$@" --log-json "$tmp/log.json") || { echo "nan nan nan"; return; }
  own=$(grep '"batch":.*"samples_per_s"' "$tmp/log.json" | sed -E 's/.*"samples_per_s":([0-9.e+-]+).*/\1/' |
    tail -n +$((w + 1)) | awk -v b="$batch" '{ print b / $1 }' | median 4)
  awk -v own="$own" -v a="$a" -v b="$b" -v n="$n" -v p="$peak" 'BEGIN { printf "%s %.4f %.0f\n", own, (b - a) / n, p / 1024 }'
}

# What the benchmarks ran on, for the line above their tables.
machine() {
  local isa="AVX2, no AVX-512"
  grep -qw avx512f /proc/cpuinfo && isa=AVX-512
  grep -qw avx2 /proc/cpuinfo || isa="no AVX2"
  echo "$(date -u '+%Y-%m-%d'); $(lscpu | sed -n 's/^Model name: *//p') ($isa), $(nproc) cores;" \
    "frugal $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
}
