#!/usr/bin/env bash
# After ctest: how many tests skipped themselves, and why (the line under
# GoogleTest's "Skipped", or pytest's "SKIPPED [n] FILE:LINE: reason" in the
# python test's output), from BUILD/Testing/Temporary/LastTest.log. A
# skipped test is not a pass: `make test` prints this after the suite.
# Usage: tools/skipped_tests.sh [BUILD]
set -euo pipefail
log="${1:-build}/Testing/Temporary/LastTest.log"
[[ -r "$log" ]] || { echo "skipped_tests: no ctest log at $log" >&2; exit 1; }
awk '
  / Test: /       { name = $NF }
  /: Skipped$/    { getline why; reason[name] = why }
  /^Test Pass Reason:/ { getline line; if (line ~ /^Skip regular expression/) skipped[++n] = name }
  /^SKIPPED \[[0-9]+\] / { line = $0; sub(/^SKIPPED \[[0-9]+\] /, "", line); py[++m] = name " (pytest) " line }
  END {
    printf "%d tests skipped themselves%s\n", n + m, n + m ? ":" : ""
    for (i = 1; i <= n; ++i) printf "  %s: %s\n", skipped[i], reason[skipped[i]]
    for (i = 1; i <= m; ++i) printf "  %s\n", py[i]
  }' "$log"
