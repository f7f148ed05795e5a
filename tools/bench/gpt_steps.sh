#!/usr/bin/env bash
# The GPT's training step on the CPU, frugal next to PyTorch (#19): step time
# and process peak of models/gpt/gpt.prototxt under each memory strategy
# asked, against tools/bench/torch_gpt.py (the same model, dropout 0 on both
# sides, Adam) plain and with torch.utils.checkpoint on every block. Synthetic
# tokens; frugal's step is batch / samples_per_s of each --log-json window of
# one batch (the first batch, the warm-up, has none), its peak the trainer's
# "process peak";
# PyTorch's the script's median and VmHWM. One run per setting, each in its
# own process; prints a Markdown table.
#
# Usage: PY=/path/to/venv/bin/python tools/bench/gpt_steps.sh
# Env: PY (a python with torch 2.x), FRUGAL (default build/frugal), LAYERS (6),
#   D_MODEL (512), HEADS (8), BATCH (2), VOCAB (50257), SEQ_LENS ("1024 4096"),
#   STRATEGIES ("share sqrt"), STEPS (3, the first a warm-up).
# Both sides: 2 threads, OMP_WAIT_POLICY=PASSIVE, OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE unset.
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_WAIT_POLICY=PASSIVE
PY=${PY:-python3}
frugal=${FRUGAL:-build/frugal}
layers=${LAYERS:-6} d_model=${D_MODEL:-512} heads=${HEADS:-8} batch=${BATCH:-2} vocab=${VOCAB:-50257}
steps=${STEPS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tools/bench/common.sh
source "$(dirname "$0")/common.sh"

# "step_s peak_GiB (before_GiB)" of PyTorch with strategy $2 at T=$1: before
# is the RSS before the first step (torch's libraries, the model, the inputs).
torch_row() {
  "$PY" "$(dirname "$0")/torch_gpt.py" --layers "$layers" --d-model "$d_model" --heads "$heads" --seq-len "$1" \
    --batch "$batch" --vocab "$vocab" --strategy "$2" --warmup 1 --steps $((steps - 1)) --threads 2 | tail -1 |
    sed -E 's/.*"step_s_median": ([0-9.e+-]+).*"rss_before_mib": ([0-9.]+).*"peak_rss_mib": ([0-9.]+).*/\1 \2 \3/' |
    awk '{ printf "%.2f %.2f (%.2f)", $1, $3 / 1024, $2 / 1024 }'
}

# "step_s peak_GiB" of frugal with memory strategy $2 at T=$1.
frugal_row() {
  SYNTHETIC="integers: true max: $vocab num_classes: $vocab label_shape: $1" \
    synthetic models/gpt/gpt.prototxt 1 "$tmp/gpt.prototxt"
  "$frugal" train --config "$tmp/gpt.prototxt" --define layers="$layers" --define heads="$heads" \
    --define d_model="$d_model" --define vocab="$vocab" --define batch="$batch" --define seq_len="$1" \
    --define dropout=0 --memory "$2" --max-iters "$steps" --noprogress --log-json "$tmp/log.json" \
    > "$tmp/frugal.log" 2>&1 || { tail -5 "$tmp/frugal.log" >&2; echo "nan nan"; return; }
  local step peak
  step=$(grep '"batch":.*"samples_per_s"' "$tmp/log.json" | sed -E 's/.*"samples_per_s":([0-9.e+-]+).*/\1/' |
    awk -v b="$batch" '{ print b / $1 }' | median 2)
  peak=$(sed -nE 's/.*process peak ([0-9.]+) (MiB|GiB).*/\1 \2/p' "$tmp/frugal.log" | tail -1 |
    awk '{ printf "%.2f", $2 == "MiB" ? $1 / 1024 : $1 }')
  echo "$step $peak"
}

strategies=${STRATEGIES:-share sqrt}
header="| T | PyTorch plain | PyTorch checkpoint per block |"
rule="|---|---|---|"
for m in $strategies; do header+=" frugal $m |"; rule+="---|"; done
echo "GPT ${layers} x ${d_model}, ${heads} heads, vocabulary ${vocab}, batch ${batch}: step s / process peak GiB"
echo "(PyTorch: its RSS before the first step in parentheses)"
echo
echo "$header"
echo "$rule"
for t in ${SEQ_LENS:-1024 4096}; do
  line="| $t |"
  for s in plain ckpt; do line+=" $(torch_row "$t" "$s" | awk '{ print $1 " s / " $2 " " $3 }') |"; done
  for m in $strategies; do line+=" $(frugal_row "$t" "$m" | awk '{ print $1 " s / " $2 }') |"; done
  echo "$line"
done
