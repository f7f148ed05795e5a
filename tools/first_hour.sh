#!/usr/bin/env bash
# A new user's first hour, as a script: for each model of the zoo, on its
# real data and a few iterations, the README's round trips through the CLI:
#   train (checkpoints; each validation and test on the first 16 batches
#   of the validation set, --val-batches), resume from the folder with more
#   iterations and no --config (the learning rate continues: asserted from
#   the JSON logs),
#   test from the checkpoint alone (its config and defines are in it),
#   export-onnx, import-onnx, and test of the imported weights under the
#   model's config: the same metrics to the last printed digit; then
#   predict: a language model writes text from a prompt, an image model
#   gives its classes for three (blank) images of a .npy.
# Usage: tools/first_hour.sh [FRUGAL] [MODEL...]   (models: mlp lenet resnet
# densenet char_lm gpt; default all). Run from the repository root; exits
# non-zero at the first step that fails, naming it. ctest runs it
# (first_hour); data/fashion-mnist and data/text are prepared when missing.
set -euo pipefail

frugal="${1:-build/frugal}"
shift || true
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(mlp lenet resnet densenet char_lm gpt)
[[ -x "$frugal" ]] || { echo "first_hour: $frugal is not built" >&2; exit 1; }
[[ -f data/fashion-mnist/t10k-images-idx3-ubyte.gz ]] || bash data/fashion-mnist/prepare.sh >/dev/null
[[ -f data/text/train.txt ]] || bash data/text/prepare.sh >/dev/null

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "first_hour: $model: $*" >&2
  exit 1
}

# Runs one step of the tour, its output kept in $tmp/out and appended to
# $tmp/$model.log; fails naming it.
step() {
  local what="$1"
  shift
  "$frugal" "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "$what failed: $frugal $*"; }
  cat "$tmp/out" >>"$tmp/$model.log"
}

# A .npy of n blank samples of shape (1,28,28), float32 (NumPy's format 1.0).
blank_npy() {
  python3 -c "
import struct, sys
n = int(sys.argv[1])
h = \"{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 1, 28, 28), }\" % n
h += ' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + '\\n'
sys.stdout.buffer.write(b'\\x93NUMPY\\x01\\x00' + struct.pack('<H', len(h)) + h.encode() + bytes(n * 784 * 4))" "$1"
}

# The metrics of `frugal test`'s result line.
metrics() { grep -o 'test-[a-z_]*=[0-9.e+-]*' "$tmp/out" | tr '\n' ' '; }

# The learning rate of the last (or first) window line of a JSON log.
lr_of() { grep '"batch":' "$1" | sed -E 's/.*"lr":([0-9.e+-]+).*/\1/' | "$2" -n 1; }

for model in "${models[@]}"; do
  case "$model" in
    mlp) config=models/mlp/fashion_mnist.prototxt defines=() iters=20 batch=64 ;;
    lenet) config=models/lenet/fashion_mnist.prototxt defines=() iters=10 batch=64 ;;
    resnet) config=models/resnet/resnet_cifar.prototxt defines=(--define depth=20 --define batch=32) iters=4 batch=32 ;;
    densenet) config=models/densenet/densenet_bc.prototxt defines=(--define depth=10 --define batch=32) iters=4 batch=32 ;;
    char_lm) config=models/lstm/char_lm.prototxt defines=() iters=10 batch=32 ;;
    gpt) config=models/gpt/gpt.prototxt defines=() iters=6 batch=16 ;;
    *) echo "first_hour: no model '$model' (mlp lenet resnet densenet char_lm gpt)" >&2; exit 1 ;;
  esac
  dir="$tmp/$model"
  start=$SECONDS
  step "train" train --config "$config" "${defines[@]}" --max-iters "$iters" --checkpoint-dir "$dir/ck" \
    --val-batches 16 --log-json "$dir/a.json" --noprogress
  # A resume with another --max-iters, from the folder alone.
  step "resume" train --resume "$dir/ck" --max-iters $((2 * iters)) --val-batches 16 --log-json "$dir/b.json" \
    --noprogress
  grep -q "resumed\|resume" "$tmp/out" || fail "the resume does not say it resumed"
  before="$(lr_of "$dir/a.json" tail)" after="$(lr_of "$dir/b.json" head)"
  awk -v a="$before" -v b="$after" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.05 * a + 1e-12) }' ||
    fail "the learning rate jumps at the resume: $before before, $after after"
  step "test" test --checkpoint "$dir/ck" --val-batches 16
  want="$(metrics)"
  [[ -n "$want" ]] || fail "test printed no metrics"
  step "export-onnx" export-onnx --checkpoint "$dir/ck" --out "$dir/model.onnx"
  step "import-onnx" import-onnx "$dir/model.onnx" --out "$dir/imported" --batch "$batch"
  step "test of the imported weights" test --config "$config" "${defines[@]}" --checkpoint "$dir/imported.frugal" \
    --val-batches 16
  got="$(metrics)"
  [[ "$got" == "$want" ]] || fail "the imported model's metrics differ: $got, the trained one's $want"
  if [[ "$config" == *lstm* || "$config" == *gpt* ]]; then
    step "predict --generate" predict --checkpoint "$dir/ck" --prompt "The " --generate 16 --seed 1
    grep -q "tokens/s" "$tmp/out" || fail "predict --generate printed no speed"
  else
    blank_npy 3 >"$dir/x.npy"
    step "predict" predict --checkpoint "$dir/ck" --input "$dir/x.npy" --out "$dir/y.npy" --top-k 2
    grep -q "^sample 2: " "$tmp/out" || fail "predict gave no classes for the third sample"
  fi
  printf '%-9s %3d s  %s(lr %s -> %s at the resume)\n' "$model" $((SECONDS - start)) "$want" "$before" "$after"
done
echo "first_hour: ${#models[@]} models: train, resume, test, export-onnx, import-onnx, test, predict: passed"
