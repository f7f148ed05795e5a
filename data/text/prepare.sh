#!/usr/bin/env bash
# Builds a small English text corpus for language models from the fortune
# cookies of the Debian package `fortunes` (installed by `make deps`):
#   corpus.txt  every fortune, one blank line between fortunes
#   train.txt   all but every 20th fortune
#   valid.txt   every 20th fortune
# The '%' separator lines become blank lines; overstrike sequences (x BS y)
# and carriage returns are removed. Safe to run again: the files are rebuilt.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src=/usr/share/games/fortunes

if [[ ! -r "$src/fortunes" ]]; then
  echo "prepare.sh: $src/fortunes is missing: run \`make deps\` (installs the Debian package fortunes), then re-run $0" >&2
  exit 1
fi

# The fortune files: plain text, not the .dat indexes or the .u8 links.
files=()
while IFS= read -r f; do files+=("$f"); done < <(
  find "$src" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | LC_ALL=C sort)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cat "${files[@]}" | LC_ALL=C sed -e 's/.\x08//g' | tr -d '\r\b' | awk -v all="$tmp/corpus.txt" -v train="$tmp/train.txt" \
    -v valid="$tmp/valid.txt" '
  function flush() {
    if (text == "") return
    n++
    print text > all
    print text > (n % 20 == 0 ? valid : train)
    text = ""
  }
  $0 == "%" { flush(); next }
  { text = text $0 "\n" }
  END { flush() }'
for f in corpus.txt train.txt valid.txt; do mv "$tmp/$f" "$here/$f"; done
echo "prepare.sh: text corpus ready in $here: $(wc -c < "$here/corpus.txt") bytes" \
     "(train.txt $(wc -c < "$here/train.txt"), valid.txt $(wc -c < "$here/valid.txt")) from ${#files[@]} fortune files"
