#!/usr/bin/env bash
# Fails, naming the files, when a C++ or CUDA file of frugal differs from
# what clang-format-14 makes of it with .clang-format. Fix: run
#   tools/check_format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
format=clang-format-14
command -v "$format" >/dev/null || { echo "check_format: $format is missing (make deps installs it)" >&2; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- 'include/*.h' 'src/*.h' 'src/*.cc' 'src/*.cu' 'src/*.inc' 'tools/*.h' \
                                        'tools/*.cc' 'tests/*.h' 'tests/*.cc' 'tests/*.cu' 'python/*.cc')
else  # a copy without git: the same folders
  mapfile -t files < <(find include src tools tests python -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' \
                                                             -o -name '*.inc' \) | sort)
fi
if [ "${1:-}" = --fix ]; then
  "$format" -i --style=file "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$format" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) differ from clang-format's layout (.clang-format):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check_format: run tools/check_format.sh --fix, then look at the diff" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
