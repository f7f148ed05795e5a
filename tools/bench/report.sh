#!/usr/bin/env bash
# Regenerates the comparison with the peers at HEAD: runs
# tools/bench/peer_steps.sh on WORKLOADS and writes its table, with the
# command, date, commit and CPU, and its plot (docs/peer_steps.svg, drawn by
# tools/bench/ratio_plot.py from the same table) between the "peer-steps"
# markers of docs/benchmarks.md and of README.md. Run it on a quiet machine (no build,
# no other job: even a niced one takes about half of 2 cores), from the
# repository root, with the binary built from HEAD.
#
# Usage: PY=/path/to/torch/venv/bin/python MXPY=/path/to/mxnet/venv/bin/python tools/bench/report.sh
# Env: as peer_steps.sh; WORKLOADS (default below).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${PY:?set PY to a python with torch}" "${MXPY:?set MXPY to a python with mxnet 1.9.1}"
workloads=${WORKLOADS:-r20b32 r56b32 r110b32 r20b128 r56b128 r1001share r1001sqrt lstm gpt1024share gpt1024sqrt mx_r56b32 mx_lstm}
for f in docs/benchmarks.md README.md; do
  grep -q '<!-- peer-steps begin -->' "$f" && grep -q '<!-- peer-steps end -->' "$f" ||
    { echo "report.sh: $f has no <!-- peer-steps begin --> and <!-- peer-steps end --> lines" >&2; exit 1; }
done
if [ -n "$(git status --porcelain --untracked-files=no -- src include)" ]; then
  echo "report.sh: src/ or include/ differs from HEAD; commit first, so that the figures name the binary" >&2
  exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# shellcheck disable=SC2086
PY=$PY MXPY=$MXPY bash tools/bench/peer_steps.sh $workloads | tee "$out"

python3 tools/bench/ratio_plot.py "$out" docs/peer_steps.svg

# Replaces the lines between <!-- peer-steps begin --> and <!-- peer-steps end --> of file $1
# with the command, the table and the plot ($2: its path from the file).
splice() {
  local file=$1 body
  body=$(printf '```\ntools/bench/report.sh   # WORKLOADS="%s"\n```\n\n%s\n\n![frugal / peer, each round](%s)\n' \
    "$workloads" "$(cat "$out")" "$2")
  BODY=$body perl -0pi -e 's/(<!-- peer-steps begin -->\n).*?(<!-- peer-steps end -->)/$1$ENV{BODY}\n$2/s' "$file"
}
splice docs/benchmarks.md peer_steps.svg
splice README.md docs/peer_steps.svg
