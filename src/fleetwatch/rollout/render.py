"""A rollout comparison (:class:`~fleetwatch.rollout.compare.Comparison`) as the terminal
text ``fleetwatch compare`` prints, or as strict JSON (``--json``)."""

from __future__ import annotations

import json
import math

from fleetwatch.rollout.compare import BandComparison, Comparison, SLOComparison
from fleetwatch.rollout.summary import BandSLI
from fleetwatch.slo.judge.states import band_list
from fleetwatch.slo.outputs.report import printable


def count(v: float) -> str:
    """An event count for a person: whole digits when it is a whole number to within
    float rounding (``1234567``, where ``:g`` writes ``1.23457e+06``; an ``increase()``
    over a range reads ``299.99999999999994`` for 300), else one decimal
    (``increase()``'s extrapolation: ``12.5``)."""
    r = round(v)
    if abs(v - r) <= 1e-9 * max(1.0, abs(v)):
        return str(r)
    return f"{v:.1f}"


def decimals(margin: float) -> int:
    """Decimals of a percentage that show a difference of ``margin`` (a ratio): one for
    margins of 0.5 percentage points and more, two for 0.05pp (a 99.9 % objective's
    half budget), three for 0.005pp — so 9995/10000 reads 99.95%, not 100.0%. At most
    four."""
    pp = 100 * margin
    return 1 if pp <= 0 else max(1, min(4, math.ceil(-math.log10(pp) - 1e-9)))


def _ratio(side: BandSLI | None, interval: tuple[float, float] | None, d: int) -> str:
    if side is None:
        return "-"
    text = f"{count(side.good)}/{count(side.total)}"
    if side.total > 0:
        text += f" {100 * side.good / side.total:.{d}f}%"
    if interval is not None:
        text += f" [{100 * interval[0]:.{d}f}, {100 * interval[1]:.{d}f}]"
    return text


def _latency(side: BandSLI | None) -> str:
    if side is None or side.latency_seconds is None:
        return "-"
    text = f"{1000 * side.latency_seconds:.3g}ms"
    if side.latency_low_seconds is not None and side.latency_high_seconds is not None:
        text += f" [{1000 * side.latency_low_seconds:.3g}, " \
                f"{1000 * side.latency_high_seconds:.3g}]"
    return text


def _row(b: BandComparison, d: int) -> list[str]:
    diff = "-" if b.difference is None else f"{100 * b.difference:+.{d}f}pp"
    p = "-" if b.p_value is None else f"{b.p_value:.2g}"
    return [b.band, _ratio(b.baseline, b.baseline_interval, d),
            _ratio(b.candidate, b.candidate_interval, d), diff, p, _latency(b.baseline),
            _latency(b.candidate), b.verdict]


HEADER = ["band", "baseline good/events", "candidate good/events", "diff", "p",
          "baseline latency", "candidate latency", "verdict"]


def _slo_lines(s: SLOComparison) -> list[str]:
    drive = f" ({band_list(s.driving_bands)})" if s.driving_bands else ""
    lines = [f"SLO {printable(s.slo)}: {s.verdict}{drive}; per band p < {s.threshold:.2g} "
             f"and |diff| ≥ {100 * s.margin:.2g}pp"]
    d = decimals(s.margin)
    rows = [HEADER, *(_row(b, d) for b in s.bands)]
    if s.overall is not None:
        rows.append(["all (naive)", *_row(s.overall, d)[1:]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return lines


def render(c: Comparison) -> str:
    """The comparison as text: the verdict, then one table per SLO (ratios with their
    Wilson 95 % interval and the difference, in percent with the :func:`decimals` the
    SLO's margin needs; p-value, the objective's latency quantile with its interval, the
    band's verdict) ending with the naive overall comparison."""
    drive = ", ".join(f"{printable(s)} band {b}" for s, b in c.driving)
    lines = [f"{printable(c.model)}: candidate {printable(c.candidate)} vs "
             f"{printable(c.baseline)}: {c.verdict}" + (f" (driven by {drive})" if drive
                                                        else "")]
    for s in c.slos:
        lines.append("")
        lines += _slo_lines(s)
    return "\n".join(lines)


def to_json(c: Comparison) -> str:
    """Strict JSON of a comparison (no NaN)."""
    from fleetwatch.slo.outputs.status import strict_json

    return json.dumps(strict_json(c.to_json()), allow_nan=False, indent=2, sort_keys=True)
