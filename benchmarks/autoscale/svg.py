"""The experiment's picture: replicas (top) and TTFT attainment per window (bottom) over
replay time, one colour per policy, as a self-contained SVG (no plotting library)."""

from __future__ import annotations

from html import escape
from typing import Any

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
WIDTH, PANEL, MARGIN = 900, 220, 50


def _polyline(points: list[tuple[float, float]], colour: str) -> str:
    text = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{text}"/>'


def timeline_svg(timelines: dict[str, dict[str, Any]], objective: float) -> str:
    """``timelines``: policy → {"samples": [{t_s, replicas, …}], "attainment": [(t, n, a)]}."""
    t_max = max([s["t_s"] for tl in timelines.values() for s in tl["samples"]]
                + [w[0] for tl in timelines.values() for w in tl["attainment"]] + [1.0])
    r_max = max([s["replicas"] for tl in timelines.values() for s in tl["samples"]] + [1])
    plot_w = WIDTH - 2 * MARGIN

    def x(t: float) -> float:
        return MARGIN + plot_w * t / t_max

    top, bottom = MARGIN, 2 * MARGIN + PANEL
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
             f'height="{3 * MARGIN + 2 * PANEL + 20 * len(timelines)}" font-family="sans-serif" '
             'font-size="12">',
             f'<text x="{MARGIN}" y="{top - 10}">replicas (0–{r_max})</text>',
             f'<text x="{MARGIN}" y="{bottom - 10}">TTFT attainment per window (0–1; dashed: '
             f'objective {objective})</text>']
    for y0 in (top, bottom):
        parts.append(f'<rect x="{MARGIN}" y="{y0}" width="{plot_w}" height="{PANEL}" '
                     'fill="none" stroke="#999"/>')
    oy = bottom + PANEL * (1 - objective)
    parts.append(f'<line x1="{MARGIN}" x2="{MARGIN + plot_w}" y1="{oy}" y2="{oy}" '
                 'stroke="#999" stroke-dasharray="4"/>')
    for i, (name, tl) in enumerate(timelines.items()):
        colour = COLOURS[i % len(COLOURS)]
        steps: list[tuple[float, float]] = []
        for s in tl["samples"]:
            y = top + PANEL * (1 - s["replicas"] / r_max)
            if steps:
                steps.append((x(s["t_s"]), steps[-1][1]))
            steps.append((x(s["t_s"]), y))
        parts.append(_polyline(steps, colour))
        parts.append(_polyline([(x(w[0]), bottom + PANEL * (1 - w[2]))
                                for w in tl["attainment"]], colour))
        ly = 2 * MARGIN + 2 * PANEL + 20 * i + 15
        parts.append(f'<rect x="{MARGIN}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{MARGIN + 16}" y="{ly}">{escape(name)}</text>')
    parts.append(f'<text x="{MARGIN + plot_w - 120}" y="{bottom + PANEL + 15}">replay seconds '
                 f'(0–{t_max:.0f})</text></svg>')
    return "\n".join(parts) + "\n"
