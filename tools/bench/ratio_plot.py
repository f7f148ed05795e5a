#!/usr/bin/env python3
"""Step time against the peers as a plot: frugal / peer per workload and round.

Reads the Markdown table tools/bench/peer_steps.sh prints (its header line:
date, CPU, commit; then one row per workload whose fifth column holds the
round ratios) and writes an SVG: one row per workload, a dot per round, a bar
over their range, and the line at 1 (left of it frugal is faster).

  tools/bench/ratio_plot.py TABLE.md docs/peer_steps.svg

No third-party packages: the plot is plain SVG.
"""
import html
import sys


def parse(text):
    """(header line, [(workload, [ratios])]) of peer_steps.sh's output."""
    header, rows = "", []
    for line in text.splitlines():
        if line.startswith("| workload") or line.startswith("|---"):
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            ratios = [float(r) for r in cells[4].split()]
            if ratios:
                rows.append((cells[0], ratios))
        elif line.strip() and not rows and not line.startswith(("```", "tools/")):
            header = line.strip()
    if not rows:
        sys.exit("ratio_plot.py: no table rows with round ratios (the fifth column) in the input")
    return header, rows


def svg(header, rows):
    label_w, plot_w, row_h, top, bottom = 330, 440, 22, 56, 46
    w, h = label_w + plot_w + 30, top + row_h * len(rows) + bottom
    hi = max(1.5, max(r for _, rs in rows for r in rs) * 1.05)
    sx = lambda v: label_w + v / hi * plot_w
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">frugal step time / the peer\'s best, '
           'one dot per round</text>',
           f'<text x="{w / 2}" y="38" text-anchor="middle" fill="#555">{html.escape(header)}</text>']
    tick = 0.0
    while tick <= hi:
        x = sx(tick)
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{h - bottom}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{x:.1f}" y="{h - bottom + 16}" text-anchor="middle">{tick:g}</text>')
        tick = round(tick + 0.25, 2)
    one = sx(1.0)
    out.append(f'<line x1="{one:.1f}" y1="{top - 6}" x2="{one:.1f}" y2="{h - bottom}" stroke="black"/>')
    out.append(f'<text x="{label_w + plot_w / 2}" y="{h - 10}" text-anchor="middle">'
               'frugal / peer (below 1: frugal faster)</text>')
    for k, (name, ratios) in enumerate(rows):
        y = top + row_h * k + row_h / 2
        color = "#2ca02c" if max(ratios) <= 1 else "#d62728" if min(ratios) > 1 else "#ff7f0e"
        out.append(f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end">{html.escape(name)}</text>')
        out.append(f'<line x1="{sx(min(ratios)):.1f}" y1="{y:.1f}" x2="{sx(max(ratios)):.1f}" y2="{y:.1f}" '
                   f'stroke="{color}" stroke-width="6" stroke-opacity="0.35"/>')
        for r in ratios:
            out.append(f'<circle cx="{sx(r):.1f}" cy="{y:.1f}" r="4" fill="{color}"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tools/bench/ratio_plot.py TABLE.md OUT.svg")
    with open(sys.argv[1]) as f:
        header, rows = parse(f.read())
    with open(sys.argv[2], "w") as f:
        f.write(svg(header, rows))


if __name__ == "__main__":
    main()
