# Shell functions the benchmark scripts share (sourced, not run).

# A copy of a config with `display: N` and a synthetic training set instead
# of its data sources (no validation); $SYNTHETIC adds fields to the
# synthetic source (e.g. "integers: true max: 128 label_shape: 1000").
synthetic() {  # config display out
  sed -e '/^ *display:/d' -e "s/^solver {/solver { display: $2/" -e '/^ *train *{/,/}/d' -e '/^ *val *{/,/}/d' \
    -e '/^ *labels:/d' "$1" > "$3"
  sed -i "s/^data {/data {\n  train { synthetic { num_samples: 100000000 ${SYNTHETIC:-} } }/" "$3"
}

# The median of the numbers on stdin, one per line, with $1 decimals (default 4).
median() {
  sort -g | awk -v d="${1:-4}" '{ v[NR] = $1 } END { printf "%.*f", d, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
