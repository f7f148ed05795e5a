#!/usr/bin/env bash
# Makes the four Fashion-MNIST IDX files available in this directory as
# symlinks to the files of the Debian package dataset-fashion-mnist
# (installed by `make deps`). Safe to run again: existing links are replaced.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src=/usr/share/datasets/fashion-mnist
files=(
  train-images-idx3-ubyte.gz
  train-labels-idx1-ubyte.gz
  t10k-images-idx3-ubyte.gz
  t10k-labels-idx1-ubyte.gz
)

# Check every package file first, so a failure leaves nothing half done.
for f in "${files[@]}"; do
  if [[ ! -r "$src/$f" ]]; then
    echo "prepare.sh: $src/$f is missing: run \`make deps\` (installs the Debian package dataset-fashion-mnist), then re-run $0" >&2
    exit 1
  fi
done

# Link (or re-link) each file into this directory.
for f in "${files[@]}"; do
  ln -sfn "$src/$f" "$here/$f"
done
echo "prepare.sh: Fashion-MNIST ready in $here (links to $src)"
