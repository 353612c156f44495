#!/usr/bin/env python3
"""Draws bench/palette-quality.sh's CSV as an SVG: per model, next-token KL
against the f32 model (log scale) over bits per layer weight, one series per
kind of weights (the uniform formats by family, the nested model's widths,
each allocation's budgets), so the quality-vs-bits front is visible.

usage: bench/quality-plot.py QUALITY.csv OUT.svg
"""
import csv
import math
import sys

# series key -> (colour, marker, joined by a line)
STYLE = {
    "q": ("#444444", "square", False),
    "nuq": ("#1f77b4", "circle", False),
    "vq": ("#2ca02c", "diamond", False),
    "tcq": ("#d62728", "triangle", False),
    "nested": ("#9467bd", "circle", True),
    "allocated measured": ("#ff7f0e", "circle", True),
    "allocated flat": ("#bcbd22", "circle", True),
    "allocated nuq": ("#17becf", "circle", True),
    "allocated full": ("#e377c2", "circle", True),
    "allocated tcq": ("#8c564b", "circle", True),
    "allocated palette16": ("#7f7f7f", "circle", True),
    "allocated ldlq": ("#000000", "circle", True),
}
PANEL_W, PANEL_H, LEFT, TOP, BOTTOM = 520, 360, 60, 30, 45
X_MIN, X_MAX = 1.5, 9.0


def series_of(label):
    kind, _, name = label.partition(" ")
    if kind == "uniform":
        family = name.rstrip("0123456789.")
        return (family if family in ("nuq", "vq", "tcq") else "q"), name
    if kind == "nested":
        return "nested", name + "-bit"
    how, _, budget = name.rpartition(" ")
    return "allocated " + how, budget


def marker(shape, x, y, colour):
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{colour}"/>'
    if shape == "diamond":
        return f'<polygon points="{x:.1f},{y - 5:.1f} {x + 5:.1f},{y:.1f} {x:.1f},{y + 5:.1f} {x - 5:.1f},{y:.1f}" fill="{colour}"/>'
    if shape == "triangle":
        return f'<polygon points="{x:.1f},{y - 5:.1f} {x + 5:.1f},{y + 4:.1f} {x - 5:.1f},{y + 4:.1f}" fill="{colour}"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>'


def panel(model, rows, x0):
    kls = [r["kl"] for r in rows]
    y_lo = 10 ** math.floor(math.log10(min(kls)))
    y_hi = 10 ** math.ceil(math.log10(max(kls)))
    w, h = PANEL_W - LEFT - 20, PANEL_H - TOP - BOTTOM

    def px(bits):
        return x0 + LEFT + (bits - X_MIN) / (X_MAX - X_MIN) * w

    def py(kl):
        return TOP + (math.log10(y_hi) - math.log10(kl)) / (math.log10(y_hi) - math.log10(y_lo)) * h

    out = [f'<text x="{x0 + LEFT + w / 2:.0f}" y="18" text-anchor="middle" font-weight="bold">{model}</text>',
           f'<rect x="{x0 + LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#888"/>']
    for bits in range(2, 10):
        out.append(f'<line x1="{px(bits):.1f}" y1="{TOP + h}" x2="{px(bits):.1f}" y2="{TOP + h + 4}" stroke="#888"/>'
                   f'<text x="{px(bits):.1f}" y="{TOP + h + 16}" text-anchor="middle">{bits}</text>')
    decade = y_lo
    while decade <= y_hi * 1.001:
        out.append(f'<line x1="{x0 + LEFT}" y1="{py(decade):.1f}" x2="{x0 + LEFT + w}" y2="{py(decade):.1f}" '
                   f'stroke="#ddd"/><text x="{x0 + LEFT - 6}" y="{py(decade) + 4:.1f}" text-anchor="end">'
                   f'{decade:g}</text>')
        decade *= 10
    out.append(f'<text x="{x0 + LEFT + w / 2:.0f}" y="{PANEL_H - 8}" text-anchor="middle">'
               'bits per layer weight</text>')
    out.append(f'<text transform="translate({x0 + 14},{TOP + h / 2:.0f}) rotate(-90)" text-anchor="middle">'
               'KL vs f32 (nats)</text>')
    groups = {}
    for r in rows:
        groups.setdefault(r["series"], []).append(r)
    for key, members in groups.items():
        colour, shape, joined = STYLE.get(key, ("#000000", "circle", False))
        members.sort(key=lambda r: r["bits"])
        if joined and len(members) > 1:
            points = " ".join(f'{px(r["bits"]):.1f},{py(r["kl"]):.1f}' for r in members)
            out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for r in members:
            out.append(marker(shape, px(r["bits"]), py(r["kl"]), colour))
            if not joined:
                out.append(f'<text x="{px(r["bits"]) + 6:.1f}" y="{py(r["kl"]) - 4:.1f}" font-size="9" '
                           f'fill="{colour}">{r["name"]}</text>')
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    models = {}
    with open(sys.argv[1], newline="") as f:
        for row in csv.DictReader(f):
            try:
                bits, kl = float(row["bits_per_weight"]), float(row["kl"])
            except ValueError:
                continue  # a refused budget
            series, name = series_of(row["weights"])
            if kl > 0 and X_MIN <= bits <= X_MAX:
                models.setdefault(row["model"], []).append(
                    {"bits": bits, "kl": kl, "series": series, "name": name})
    body = []
    for i, (model, rows) in enumerate(models.items()):
        body += panel(model, rows, i * PANEL_W)
    legend_y = PANEL_H + 14
    for i, (key, (colour, shape, _)) in enumerate(STYLE.items()):
        x = 20 + (i % 5) * 200
        y = legend_y + (i // 5) * 18
        body.append(marker(shape, x, y - 4, colour))
        body.append(f'<text x="{x + 10}" y="{y}">{"uniform " + key if key in ("q", "nuq", "vq", "tcq") else key}</text>')
    width, height = max(1, len(models)) * PANEL_W, PANEL_H + 56
    with open(sys.argv[2], "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                f'font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n')
        f.write("\n".join(body))
        f.write("\n</svg>\n")


if __name__ == "__main__":
    main()
