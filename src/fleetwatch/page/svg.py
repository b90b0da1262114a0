"""The page's inline SVG charts: the bands × windows burn heat map, latency (or burn)
against concurrency with the threshold and the capacity, the autoscaling signal's
history, and a component bar.

Each function returns one ``<svg>`` element as text; every label is escaped
(:func:`~fleetwatch.page.model.text`), every coordinate is a number the function computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from fleetwatch.page.model import HistoryPoint, Row, num, number, text
from fleetwatch.slo.outputs.report import window_order
from fleetwatch.slo.state import ALL, band_sort

#: Burn-rate colour steps: (upper bound, fill, text colour) — below 1 the budget lasts.
BURN_COLOURS = ((0.5, "#c7efd2", "#14532d"), (1.0, "#8fdca6", "#14532d"),
                (2.0, "#fde68a", "#713f12"), (6.0, "#fdba74", "#7c2d12"),
                (14.4, "#f87171", "#450a0a"), (math.inf, "#b91c1c", "#ffffff"))
NO_DATA = ("#e5e7eb", "#6b7280")


def burn_colour(burn: float | None) -> tuple[str, str]:
    """``(fill, text colour)`` of a heat-map cell for a burn rate (None: no data)."""
    if burn is None:
        return NO_DATA
    return next((fill, ink) for bound, fill, ink in BURN_COLOURS if burn < bound)


def _windows(burn_rates: Row) -> list[str]:
    return sorted((str(w) for w in burn_rates), key=window_order)


def _bands(burn_rates: Row) -> list[str]:
    found = {str(b) for per in burn_rates.values() if isinstance(per, dict) for b in per}
    return sorted(found, key=_band_key)


def _band_key(label: str) -> tuple[int, float, str]:
    try:
        kind, bound = band_sort(label)
    except ValueError:  # not a band label: after every band, by name
        return (3, 0.0, label)
    return (kind, bound, "")


def heatmap(burn_rates: Row) -> str:
    """Bands (rows, lowest first, then ``all``) × windows (columns, shortest first),
    each cell the burn rate, coloured by :data:`BURN_COLOURS`."""
    windows, bands = _windows(burn_rates), _bands(burn_rates)
    if not windows or not bands:
        return '<p class="muted">no burn rates yet</p>'
    cw, ch, left, top = 58, 20, 64, 18
    w, h = left + cw * len(windows) + 2, top + ch * len(bands) + 2
    out = [f'<svg class="heatmap" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           'role="img" aria-label="burn rate by concurrency band and window">']
    for j, win in enumerate(windows):
        out.append(f'<text x="{left + cw * j + cw / 2:.0f}" y="13" class="ax" '
                   f'text-anchor="middle">{text(win)}</text>')
    finite = [b for b in bands if b not in (ALL, "+Inf")]
    win_attr = [text(win) for win in windows]  # escaped once, used by every cell
    for i, band in enumerate(bands):
        y = top + ch * i
        name = ("all bands" if band == ALL else
                f"> {finite[-1]}" if band == "+Inf" and finite else f"≤ {band}")
        out.append(f'<text x="{left - 6}" y="{y + 14}" class="ax" text-anchor="end">'
                   f'{text(name)}</text>')
        band_attr = text(band)
        for j, win in enumerate(windows):
            per = burn_rates.get(win)
            burn = num(per.get(band)) if isinstance(per, dict) else None
            fill, ink = burn_colour(burn)
            x = left + cw * j
            out.append(f'<g class="cell" data-band="{band_attr}" data-window="{win_attr[j]}" '
                       f'data-burn="{"" if burn is None else repr(burn)}"><rect x="{x + 1}" '
                       f'y="{y + 1}" width="{cw - 2}" height="{ch - 2}" rx="2" fill="{fill}"/>'
                       f'<text x="{x + cw / 2:.0f}" y="{y + 14}" text-anchor="middle" '
                       f'fill="{ink}">{number(burn)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def nice_ceiling(v: float) -> float:
    """The smallest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10ⁿ that is ≥ ``v`` > 0 (an
    axis top whose half is a short number too)."""
    scale = 10.0 ** math.floor(math.log10(v))
    return next(m * scale for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)
                if m * scale >= v * (1 - 1e-12))


def _band_x(label: str, last_finite: float) -> float | None:
    """The concurrency a band is drawn at: its bound (``+Inf``: twice the last bound)."""
    if label == "+Inf":
        return last_finite * 2
    try:
        return float(label)
    except ValueError:
        return None


class _ChartPoints(NamedTuple):
    """What :func:`concurrency_chart` draws: ``mode`` (``latency`` or ``burn``), the
    ``points`` (concurrency, y, band), the horizontal ``line`` (threshold or burn 1;
    None: none) with its name, and the y axis' name."""

    mode: str
    points: list[tuple[float, float, str]]
    line: float | None
    line_name: str
    y_name: str


def _chart_points(row: Row, bands: list[str], last: float,
                  threshold: float | None) -> _ChartPoints:
    """Per band the latency quantile at its concurrency when the row has
    ``band_latency``, else its burn rate over the longest window (``last``: the last
    finite band bound)."""
    burn_rates = row.get("burn_rates") or {}
    lat = row.get("band_latency") or {}
    points: list[tuple[float, float, str]] = []  # (concurrency, y, band)
    if any(isinstance(v, dict) and num(v.get("latency_seconds")) is not None
           for v in lat.values()):
        mode, line, line_name = "latency", threshold, "threshold (s)"
        for band, v in lat.items():
            y = num(v.get("latency_seconds")) if isinstance(v, dict) else None
            x = (num(v.get("concurrency")) if isinstance(v, dict) else None) \
                or _band_x(str(band), last)
            if y is not None and x is not None and x > 0:
                points.append((x, y, str(band)))
        q = next((num(v.get("quantile")) for v in lat.values() if isinstance(v, dict)), None)
        y_name = f"p{q * 100:g} latency (s)" if q else "latency (s)"
    else:
        windows = _windows(burn_rates)
        longest = burn_rates.get(windows[-1], {}) if windows else {}
        mode, line, line_name = "burn", 1.0, "budget-neutral burn"
        for band in bands:
            y, x = num(longest.get(band)), _band_x(band, last)
            if y is not None and x is not None and x > 0:
                points.append((x, y, band))
        y_name = f"burn rate ({windows[-1]})" if windows else "burn rate"
    return _ChartPoints(mode, points, line, line_name, y_name)


def concurrency_chart(row: Row, threshold: float | None) -> str:
    """Per band, the objective's latency quantile against concurrency with the
    threshold — from ``band_latency`` when the row has it — else the band's burn rate
    over the longest window with burn 1 as the line; the capacity (and the predicted
    capacity, when given) and the current concurrency as vertical lines."""
    burn_rates = row.get("burn_rates") or {}
    bands = [b for b in _bands(burn_rates) if b != ALL]
    finite = [x for b in bands if b != "+Inf" and (x := _band_x(b, 1.0)) is not None]
    last = max(finite) if finite else 1.0
    mode, points, line, line_name, y_name = _chart_points(row, bands, last, threshold)
    cap, pred, conc = (num(row.get(k)) for k in ("capacity", "capacity_predicted",
                                                 "concurrency"))
    xs = [p[0] for p in points] + [v for v in (cap, pred, conc) if v and v > 0] + [last * 2]
    first = min(finite) if finite else 1.0  # a near-idle model does not squeeze the bands
    lo, hi = math.log2(max(min(xs), first / 4) / 1.5), math.log2(max(xs) * 1.3)
    ys = [p[1] for p in points] + [line or 0.0]
    top = nice_ceiling(max(ys) * 1.1) if max(ys) > 0 else 1.0
    if mode == "burn":
        top = min(top, 20.0)  # a burn of 40 and one of 400 both read "far above 1"
    w, h, ml, mr, mt, mb = 380, 200, 46, 12, 24, 34

    def px(x: float) -> float:  # below the axis' start: at its start
        return ml + (max(math.log2(x), lo) - lo) / (hi - lo) * (w - ml - mr)

    def py(y: float) -> float:
        return mt + (1 - min(y, top) / top) * (h - mt - mb)

    out = [f'<svg class="chart" data-mode="{mode}" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" role="img" aria-label="{text(y_name)} by concurrency">',
           f'<rect x="{ml}" y="{mt}" width="{w - ml - mr}" height="{h - mt - mb}" '
           'class="plot"/>']
    for frac in (0.0, 0.5, 1.0):
        yv = top * frac
        out.append(f'<text x="{ml - 4}" y="{py(yv) + 4:.1f}" class="ax" '
                   f'text-anchor="end">{number(yv)}</text>')
    for band in bands:
        x = _band_x(band, last)
        if x is not None and x > 0:
            out.append(f'<text x="{px(x):.1f}" y="{h - mb + 13}" class="ax" '
                       f'text-anchor="middle">{text(band)}</text>')
    out.append(f'<text x="{(ml + w - mr) / 2:.0f}" y="{h - 4}" class="ax" '
               'text-anchor="middle">concurrency (requests per replica)</text>')
    out.append(f'<text x="{ml}" y="{mt - 8}" class="ax">{text(y_name)}</text>')
    if line is not None:
        ly = py(line)
        label_y = ly + 12 if ly < mt + 16 else ly - 4  # below the line near the top
        out.append(f'<line x1="{ml}" x2="{w - mr}" y1="{ly:.1f}" y2="{ly:.1f}" '
                   f'class="threshold"/><text x="{ml + 4}" y="{label_y:.1f}" '
                   f'class="ax thr">{text(line_name)} {number(line)}</text>')
    for value, cls, name in ((cap, "capacity", "capacity"), (pred, "predicted", "predicted"),
                             (conc, "now", "now")):
        if value and value > 0:
            x = px(value)
            anchor = "end" if x > w * 0.7 else "start"
            dx = -3 if anchor == "end" else 3
            dy = {"capacity": 26, "predicted": 38, "now": 50}[cls]
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt}" y2="{h - mb}" '
                       f'class="{cls}"/><text x="{x + dx:.1f}" y="{mt + dy}" '
                       f'class="ax {cls}" text-anchor="{anchor}">{name} {number(value)}</text>')
    ordered = sorted(points)
    if len(ordered) > 1:
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in ordered)
        out.append(f'<polyline points="{path}" class="series"/>')
    for x, y, band in ordered:
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" class="pt" '
                   f'data-band="{text(band)}" data-y="{y!r}"><title>band {text(band)}: '
                   f'{number(y)}</title></circle>')
    if not points:
        out.append(f'<text x="{w / 2:.0f}" y="{h / 2:.0f}" class="ax" text-anchor="middle">'
                   'no per-band data yet</text>')
    out.append("</svg>")
    return "".join(out)


def sparkline(points: Sequence[HistoryPoint]) -> str:
    """The signal over time (oldest left) with the target 1 as a line."""
    w, h, ml, mt, mb = 380, 80, 34, 8, 16
    if len(points) < 2:
        return (f'<p class="muted">history builds up with the engine: {len(points)} '
                'snapshot(s) so far</p>')
    t0, t1 = points[0]["t"], points[-1]["t"]
    top = max(1.2, max(p["signal"] for p in points) * 1.1)

    def px(t: float) -> float:
        return ml + (t - t0) / ((t1 - t0) or 1.0) * (w - ml - 4)

    def py(y: float) -> float:
        return mt + (1 - y / top) * (h - mt - mb)

    path = " ".join(f"{px(p['t']):.1f},{py(p['signal']):.1f}" for p in points)
    span = t1 - t0
    span_text = f"{span / 60:.0f} min" if span >= 120 else f"{span:.0f} s"
    return (f'<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
            f'aria-label="autoscaling signal history" data-points="{len(points)}">'
            f'<rect x="{ml}" y="{mt}" width="{w - ml - 4}" height="{h - mt - mb}" '
            f'class="plot"/><line x1="{ml}" x2="{w - 4}" y1="{py(1.0):.1f}" '
            f'y2="{py(1.0):.1f}" class="threshold"/>'
            f'<text x="{ml - 4}" y="{py(1.0) + 4:.1f}" class="ax" text-anchor="end">1</text>'
            f'<text x="{ml - 4}" y="{py(0.0) + 4:.1f}" class="ax" text-anchor="end">0</text>'
            f'<polyline points="{path}" class="series"/>'
            f'<text x="{ml}" y="{h - 3}" class="ax">{text(span_text)} ago</text>'
            f'<text x="{w - 4}" y="{h - 3}" class="ax" text-anchor="end">last '
            f'{number(points[-1]["signal"])}</text></svg>')


def bar(value: float | None, scale: float = 2.0) -> str:
    """A small horizontal bar of a ratio (full width = ``scale``), a tick at 1."""
    w, h = 120, 12
    v = value if value is not None else 0.0
    fill = "#dc2626" if v >= 1 else "#2563eb"
    width = max(0.0, min(v, scale)) / scale * w
    return (f'<svg class="bar" width="{w}" height="{h}" viewBox="0 0 {w} {h}">'
            f'<rect width="{w}" height="{h}" class="plot"/>'
            f'<rect width="{width:.1f}" height="{h}" fill="{fill}"/>'
            f'<line x1="{w / scale:.1f}" x2="{w / scale:.1f}" y1="0" y2="{h}" '
            'class="tick"/></svg>')
