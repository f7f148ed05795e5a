#!/usr/bin/env bash
# ctest's ONNX backend runs: `frugal onnx-test ARGS...` passes when it exits 0
# and its last line says some passed and none failed. (ctest's
# PASS_REGULAR_EXPRESSION alone ignores the exit status, so a run that
# printed the line and then failed would pass.)
# Usage: tools/onnx_conformance.sh FRUGAL onnx-test DIR... --expect-passed LIST
set -uo pipefail
out="$("$@" 2>&1)"
rc=$?
printf '%s\n' "$out"
if [[ $rc -ne 0 ]]; then
  echo "onnx_conformance: '$*' exited $rc" >&2
  exit 1
fi
if ! tail -n 1 <<<"$out" | grep -Eq '^[1-9][0-9]* passed, 0 failed, [0-9]+ unsupported$'; then
  echo "onnx_conformance: the last line is not 'N passed, 0 failed, K unsupported'" >&2
  exit 1
fi
