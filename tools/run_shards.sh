#!/usr/bin/env bash
# Runs a GoogleTest binary as SHARDS processes at once (GTEST_TOTAL_SHARDS,
# GTEST_SHARD_INDEX), each under `timeout SECONDS`, then prints every shard's
# output and fails if any shard failed, was killed or ran no test. The
# sanitizer runs (make tsan, make asan) use it: one process ran the suite on
# one of CI's two cores.
#   tools/run_shards.sh BINARY SHARDS SECONDS [gtest flags...]
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 BINARY SHARDS SECONDS [gtest flags...]" >&2
  exit 2
fi
binary=$1 shards=$2 seconds=$3
shift 3
logs=$(mktemp -d)
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
    timeout --kill-after=30 "$seconds" "$binary" "$@" > "$logs/$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for ((i = 0; i < shards; ++i)); do
  status=0
  wait "${pids[$i]}" || status=$?
  echo "===== shard $((i + 1)) of $shards ($binary) ====="
  cat "$logs/$i.log"
  if [ $status -ne 0 ]; then
    if [ $status -eq 124 ] || [ $status -eq 137 ]; then
      echo "shard $((i + 1)) of $shards: killed after $seconds s (a hang? the last '[ RUN ]' line names the test)"
    else
      echo "shard $((i + 1)) of $shards: failed (exit $status)"
    fi
    failed=1
  elif ! grep -q '^\[  PASSED  \] [1-9]' "$logs/$i.log"; then
    echo "shard $((i + 1)) of $shards: ran no test"
    failed=1
  fi
done
rm -rf "$logs"
exit $failed
