#!/usr/bin/env bash
# Training step time and peak memory of frugal next to PyTorch and MXNet on
# the same workloads (the peers in ../shared/peers: same shapes, same batch,
# synthetic data, one step = forward + backward + update), the sides
# alternated in each of ROUNDS rounds; prints a Markdown table of ranges
# over the rounds.
#
# frugal, as its README tells a user to run it: `frugal train` on a copy of
# the config with a synthetic training set, its step measured by itself
# and from outside the process (common.sh: frugal_steps); the ratio uses
# the outside time. The peer at its best: each of its variants every round
# (PyTorch: its default OpenMP settings, NCHW and channels_last for the
# ResNets, nn.LSTM and an unrolled LSTMCell loop; MXNet: its fused RNN and
# an unrolled one), the fastest taken (the variant that won is named).
# The ratio column is the range of frugal outside / peer's best over the
# rounds, the worst round last.
#
# Usage: PY=/path/to/venv/bin/python [MXPY=/path/to/mxnet/venv/bin/python] \
#   tools/bench/peer_steps.sh [WORKLOAD...]
#   against PyTorch: r20b32 r20b128 r56b32 r56b128 r110b32 r110b128
#   r1001share r1001sqrt lstm gpt1024share gpt1024sqrt gpt4096share
#   gpt4096sqrt mlp; against MXNet 1.9.1: mx_r56b32 mx_r110b32 mx_lstm
#   (default: r20b32 r56b32 r110b32 lstm)
# Env: PY (a python with torch), MXPY (a python with mxnet 1.9.1 and
# numpy<1.24), PEERS (default ../shared/peers), FRUGAL (default
# build/frugal), ROUNDS (default 3), FRUGAL_FLAGS (extra train flags).
# Both sides: 2 threads; OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (they
# halve OpenBLAS's GEMM speed); OMP_WAIT_POLICY unset (frugal sets PASSIVE
# for itself; PASSIVE slows eager PyTorch by about 30%).
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OMP_WAIT_POLICY
PY=${PY:-python3}
PEERS=${PEERS:-$(cd "$(dirname "$0")/../../.." && pwd)/shared/peers}
bench=$(cd "$(dirname "$0")" && pwd)
frugal=${FRUGAL:-build/frugal}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tools/bench/common.sh
source "$(dirname "$0")/common.sh"

# The peer's best of its variants: "step_s peak_mib variant". Each variant
# is one argument, the script's flags, run as `$runner script flags`.
peer_best() {  # runner script variant...
  local runner=$1 script=$2 best="" line s p
  shift 2
  for v in "$@"; do
    # shellcheck disable=SC2086
    line=$(cd "$PEERS" && $runner "$script" $v | tail -1) || continue
    s=$(sed -E 's/.*"step_s_median": ([0-9.e+-]+).*/\1/' <<< "$line")
    p=$(sed -E 's/.*"peak_rss_mib": ([0-9.e+-]+).*/\1/' <<< "$line")
    if [ -z "$best" ] || awk -v a="$s" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
      best="$s $p $(variant "$script" "$v")"
    fi
  done
  echo "${best:-nan nan none}"
}
variant() {  # script flags: what tells the variant apart, for the table
  local n=""
  [[ $1 == *resnet* ]] && n=NCHW
  [[ $2 == *--channels-last* ]] && n=channels_last
  [[ $2 == *"--impl fused"* ]] && n=fused
  [[ $2 == *"--impl unrolled"* ]] && n=unrolled
  [[ $2 == *"--strategy ckpt"* || $2 == *"--mirror sqrt"* ]] && n="${n:+$n, }checkpointed"
  echo "${n:-plain}"
}
torch_runner() { "$PY" "$@" --threads 2; }
mx_runner() { OMP_NUM_THREADS=2 "${MXPY:?set MXPY to a python with mxnet}" "$@"; }

# One row: ROUNDS rounds of frugal_steps (config batch W N flags...) and
# peer_best (runner script variants...), the two separated by "--".
compare() {  # label config batch W N flags... -- runner script variants...
  local label=$1 fargs=() pargs=() own=() out=() fpeak=() ps=() ppeak=() pv=() ratio=() o w m s p v
  shift
  while [ "$1" != -- ]; do fargs+=("$1"); shift; done
  shift
  pargs=("$@")
  for _ in $(seq "$rounds"); do
    # shellcheck disable=SC2086
    read -r o w m < <(frugal_steps "${fargs[@]}" ${FRUGAL_FLAGS:-})
    read -r s p v < <(peer_best "${pargs[@]}")
    own+=("$o") out+=("$w") fpeak+=("$m") ps+=("$s") ppeak+=("$p") pv+=("$v")
    ratio+=("$(awk -v a="$w" -v b="$s" 'BEGIN { printf "%.2f", a / b }')")
  done
  lines() { printf '%s\n' "$@"; }
  echo "| $label | $(lines "${own[@]}" | range 1000 0) | $(lines "${out[@]}" | range 1000 0) |" \
    "$(lines "${ps[@]}" | range 1000 0) ($(lines "${pv[@]}" | sort | uniq -c | sort -rn | head -1 | sed 's/^ *[0-9]* //')) |" \
    "$(printf '%s ' "${ratio[@]}" | sed 's/ $//') |" \
    "$(lines "${fpeak[@]}" | median 0) / $(lines "${ppeak[@]}" | median 0) |"
}

resnet() {  # depth batch W N strategy, peer checkpointed (ckpt) or not (plain)
  compare "ResNet-$1 b$2, $5" models/resnet/resnet_cifar.prototxt "$2" "$3" "$4" --define depth="$1" \
    --define batch="$2" --define channels=3 --define size=32 --memory "$5" -- torch_runner resnet_cifar.py \
    "--depth $1 --batch $2 --strategy $6 --warmup 2 --steps $4" \
    "--depth $1 --batch $2 --strategy $6 --warmup 2 --steps $4 --channels-last"
}

mx_resnet() {  # depth batch W N
  compare "ResNet-$1 b$2, share (MXNet)" models/resnet/resnet_cifar.prototxt "$2" "$3" "$4" --define depth="$1" \
    --define batch="$2" --define channels=3 --define size=32 --memory share -- mx_runner mx_resnet.py \
    "--depth $1 --batch $2 --mirror none --warmup 2 --steps $4"
}

# The LSTM 2x256 b32 T=1000: models/lstm/char_lm.prototxt, an lstm op per
# run of 25 steps, Adam (the config's; the peers use SGD).
lstm_flags=(--define layers=2 --define hidden=256 --define batch=32 --define seq_len=1000 --define chunk=25
            --define vocab=128 --define val_interval=0)
lstm() {  # label runner script
  SYNTHETIC="integers: true max: 128 num_classes: 128 label_shape: 1000" compare "$1" \
    models/lstm/char_lm.prototxt 32 2 5 "${lstm_flags[@]}" -- "$2" "$3" \
    "--seq-len 1000 --impl fused --strategy plain --warmup 1 --steps 5" \
    "--seq-len 1000 --impl unrolled --strategy plain --warmup 1 --steps 5"
}
mx_lstm() {
  SYNTHETIC="integers: true max: 128 num_classes: 128 label_shape: 1000" compare "LSTM 2x256 b32 T=1000 (MXNet)" \
    models/lstm/char_lm.prototxt 32 2 5 "${lstm_flags[@]}" -- mx_runner mx_lstm.py \
    "--seq-len 1000 --impl fused --mirror none --warmup 1 --steps 5" \
    "--seq-len 1000 --impl unrolled --mirror none --warmup 1 --steps 5"
}

# The GPT: models/gpt/gpt.prototxt at 6 layers of 512, 8 heads, GPT-2's
# vocabulary (50,257), batch 2, dropout 0, Adam, synthetic tokens, against
# tools/bench/torch_gpt.py (the same model: pre-LN blocks,
# scaled_dot_product_attention(is_causal=True), a full nn.Linear head and
# F.cross_entropy), plain or with torch.utils.checkpoint on every block.
gpt() {  # T strategy peer_strategy
  SYNTHETIC="integers: true max: 50257 num_classes: 50257 label_shape: $1" compare "GPT 6x512 b2 T=$1, $2" \
    models/gpt/gpt.prototxt 2 1 2 --define layers=6 --define heads=8 --define d_model=512 --define vocab=50257 \
    --define batch=2 --define seq_len="$1" --define dropout=0 --memory "$2" -- torch_runner "$bench/torch_gpt.py" \
    "--seq-len $1 --strategy $3 --warmup 1 --steps 2"
}

# The MLP: one epoch of Fashion-MNIST at batch 128 (the real files,
# shuffled; frugal's epoch time_s from --log-json, PyTorch's
# epoch_s_median), each side validating after it (not timed).
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
  echo "| MLP 784-512-512-10, one epoch at batch 128 (s) | $(printf '%s\n' "${f[@]}" | range 1 2) | |" \
    "$(printf '%s\n' "${p[@]}" | range 1 2) | $(paste -d' ' <(printf '%s\n' "${f[@]}") <(printf '%s\n' "${p[@]}") |
      awk '{ printf "%s%.2f", NR > 1 ? " " : "", $1 / $2 }') | |"
}

workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(r20b32 r56b32 r110b32 lstm)
echo "$(machine); $rounds rounds; $("$PY" -c 'import torch; print("PyTorch", torch.__version__)' 2>/dev/null ||
  echo "no torch")${MXPY:+; MXNet $("$MXPY" -c 'import mxnet; print(mxnet.__version__)' 2>/dev/null)}"
echo
echo "| workload, frugal's strategy | frugal, own (ms) | frugal, outside (ms) | peer's best (ms) | frugal / peer, each round | peak MiB, frugal / peer |"
echo "|---|---|---|---|---|---|"
for w in "${workloads[@]}"; do
  case $w in
    r20b32) resnet 20 32 5 25 share plain ;;
    r20b128) resnet 20 128 3 12 share plain ;;
    r56b32) resnet 56 32 4 16 share plain ;;
    r56b128) resnet 56 128 2 8 share plain ;;
    r110b32) resnet 110 32 3 12 share plain ;;
    r110b128) resnet 110 128 2 6 share plain ;;
    r1001share) resnet 1001 32 1 4 share plain ;;
    r1001sqrt) resnet 1001 32 1 4 sqrt ckpt ;;
    lstm) lstm "LSTM 2x256 b32 T=1000 (PyTorch)" torch_runner lstm_lm.py ;;
    gpt1024share) gpt 1024 share plain ;;
    gpt1024sqrt) gpt 1024 sqrt ckpt ;;
    gpt4096share) gpt 4096 share plain ;;
    gpt4096sqrt) gpt 4096 sqrt ckpt ;;
    mlp) mlp ;;
    mx_r56b32) mx_resnet 56 32 4 16 ;;
    mx_r110b32) mx_resnet 110 32 3 12 ;;
    mx_lstm) mx_lstm ;;
    *) echo "unknown workload $w" >&2; exit 2 ;;
  esac
done
