#!/usr/bin/env bash
# The budget planner on every models/ config: five budgets 10%, 30%, 50%,
# 70% and 90% of the way from the sqrt plan's arena to share's, each
# planned by `frugal plan --memory budget=B --json`. One line per
# (config, budget): the recomputation (extra FLOPs), the arena, the
# planning time and the builds. With two binaries, both at each budget, and
# the second's recomputation against the first's (the planner issue's "at
# most today's + 2%").
#   tools/bench/planner_quality.sh [NEW_FRUGAL [OLD_FRUGAL]]   (default: build/frugal)
set -euo pipefail
new=${1:-build/frugal}
old=${2:-}

plan() {  # binary, strategy, config
  "$1" plan --config "$3" --memory "$2" --json --max-nodes 100000000 2>/dev/null
}
field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo
if [ -n "$old" ]; then
  echo "| config | budget | old MFLOP | new MFLOP | new/old | old ms | new ms | new builds |"
  echo "|---|---|---|---|---|---|---|---|"
else
  echo "| config | budget | MFLOP | arena | plan ms | builds |"
  echo "|---|---|---|---|---|---|"
fi
for config in models/*/*.prototxt; do
  lo=$(plan "$new" sqrt "$config" | field arena_bytes)
  hi=$(plan "$new" share "$config" | field arena_bytes)
  for pct in 10 30 50 70 90; do
    b=$((lo + (hi - lo) * pct / 100))
    n=$(plan "$new" "budget=$b" "$config" || echo '{}')
    if [ -n "$old" ]; then
      o=$(plan "$old" "budget=$b" "$config" || echo '{}')
      python3 - "$config" "$pct" "$o" "$n" <<'EOF'
import json, sys
config, pct, o, n = sys.argv[1], sys.argv[2], json.loads(sys.argv[3] or "{}"), json.loads(sys.argv[4] or "{}")
mf = lambda p: "%.3f" % (p["extra_flops_ratio"] * p["step_flops"] / 1e6) if p else "none"
ratio = "%.3f" % (n["extra_flops_ratio"] / o["extra_flops_ratio"]) if o and n and o["extra_flops_ratio"] > 0 else ("1" if o and n and n["extra_flops_ratio"] == 0 else "-")
ms = lambda p: "%.0f" % p["plan_ms"] if p else "-"
print("| %s | %s%% | %s | %s | %s | %s | %s | %s |" % (config, pct, mf(o), mf(n), ratio, ms(o), ms(n), n.get("num_builds", "-")))
EOF
    else
      python3 - "$config" "$pct" "$n" <<'EOF'
import json, sys
config, pct, n = sys.argv[1], sys.argv[2], json.loads(sys.argv[3] or "{}")
if not n:
    print("| %s | %s%% | none | | | |" % (config, pct)); sys.exit()
print("| %s | %s%% | %.3f | %.2f MiB | %.0f | %d |" % (config, pct, n["extra_flops_ratio"] * n["step_flops"] / 1e6, n["arena_bytes"] / 2**20,
                                                    n["plan_ms"], n["num_builds"]))
EOF
    fi
  done
done
