#!/usr/bin/env python3
"""Planned memory of every strategy across model sizes, from `frugal plan --json`.

Runs `frugal plan --memory all --json` (plus the budgets given) for each value
of one config variable, then writes a Markdown table and a log-log SVG plot.

  tools/memory/report.py --frugal build/frugal \
      --config models/resnet/resnet_imagenet.prototxt --var depth \
      --values 101 152 200 302 500 1001 --define batch=32 --budget 7GB \
      --table docs/memory_resnet.md --svg docs/memory_resnet.svg

No third-party packages: the plot is plain SVG.
"""
import argparse
import json
import math
import subprocess
import sys

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def plan(args, value, strategy):
    cmd = [args.frugal, "plan", "--config", args.config, "--json", "--memory", strategy,
           "--define", f"{args.var}={value}"]
    for d in args.define:
        cmd += ["--define", d]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return [{"strategy": strategy, "error": out.stderr.strip().splitlines()[-1]}]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def gib(b):
    return b / 2**30


def human(b):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b} B"


def table(rows, strategies, args):
    lines = [f"| {args.var} | " + " | ".join(strategies) + " |",
             "|---|" + "---|" * len(strategies)]
    for value, plans in rows:
        cells = []
        for s in strategies:
            p = plans.get(s)
            if p is None or "error" in p:
                cells.append("infeasible" if p else "-")
            else:
                extra = p["extra_flops_ratio"]
                cells.append(human(p["arena_bytes"]) + (f" (+{100 * extra:.0f}%)" if extra > 0 else ""))
        lines.append(f"| {value} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def svg(rows, strategies, args):
    w, h, m, legend = 820, 440, 70, 130
    pts = [(float(v), gib(p["arena_bytes"])) for v, plans in rows for p in plans.values() if "error" not in p]
    xs = [math.log10(x) for x, _ in pts]
    ys = [math.log10(max(y, 1e-6)) for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = math.floor(min(ys)), math.ceil(max(ys))
    sx = lambda x: m + (math.log10(x) - x0) / max(x1 - x0, 1e-9) * (w - 2 * m - legend)
    sy = lambda y: h - m - (math.log10(max(y, 1e-6)) - y0) / max(y1 - y0, 1e-9) * (h - 2 * m)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{m}" y1="{h - m}" x2="{w - m - legend}" y2="{h - m}" stroke="black"/>',
           f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>']
    for e in range(y0, y1 + 1):
        y = sy(10 ** e)
        out.append(f'<line x1="{m}" y1="{y:.1f}" x2="{w - m - legend}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{m - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    for v, _ in rows:
        x = sx(float(v))
        out.append(f'<text x="{x:.1f}" y="{h - m + 16}" text-anchor="middle">{v}</text>')
    out.append(f'<text x="{(w - legend) / 2}" y="{h - 20}" text-anchor="middle">{args.var} (log scale)</text>')
    out.append(f'<text x="18" y="{h / 2}" transform="rotate(-90 18 {h / 2})" text-anchor="middle">planned arena, GiB (log scale)</text>')
    out.append(f'<text x="{w / 2}" y="24" text-anchor="middle" font-size="14">{args.title}</text>')
    for k, s in enumerate(strategies):
        line = [(sx(float(v)), sy(gib(plans[s]["arena_bytes"]))) for v, plans in rows
                if s in plans and "error" not in plans[s]]
        if not line:
            continue
        c = COLORS[k % len(COLORS)]
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="' +
                   " ".join(f"{x:.1f},{y:.1f}" for x, y in line) + '"/>')
        for x, y in line:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{c}"/>')
        out.append(f'<rect x="{w - legend - 40}" y="{m + 18 * k - 9}" width="10" height="10" fill="{c}"/>')
        out.append(f'<text x="{w - legend - 26}" y="{m + 18 * k}">{s}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frugal", default="build/frugal")
    ap.add_argument("--config", required=True)
    ap.add_argument("--var", required=True)
    ap.add_argument("--values", nargs="+", required=True)
    ap.add_argument("--define", nargs="*", default=[])
    ap.add_argument("--budget", nargs="*", default=[])
    ap.add_argument("--table")
    ap.add_argument("--svg")
    ap.add_argument("--json", help="also write every plan as JSON lines")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    strategies = ["none", "inplace", "share", "drop_cheap", "sqrt", "logn"] + [f"budget={b}" for b in args.budget]
    rows = []
    raw = []
    for v in args.values:
        plans = {}
        for p in plan(args, v, "all"):
            plans[p["strategy"]] = p
        for b in args.budget:
            for p in plan(args, v, f"budget={b}"):
                plans[f"budget={b}"] = p
        rows.append((v, plans))
        raw += [dict(p, **{args.var: v}) for p in plans.values()]
        print(f"{args.var}={v}: " + ", ".join(
            f"{s} {gib(p['arena_bytes']):.3f}" if "error" not in p else f"{s} infeasible" for s, p in plans.items()),
            file=sys.stderr)
    if args.table:
        open(args.table, "w").write(table(rows, strategies, args))
    if args.svg:
        open(args.svg, "w").write(svg(rows, strategies, args))
    if args.json:
        open(args.json, "w").write("".join(json.dumps(r) + "\n" for r in raw))


if __name__ == "__main__":
    main()
