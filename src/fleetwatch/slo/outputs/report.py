"""The data of ``fleetwatch slo report``: the SLO engine's view, rebuilt from the
instant-query answers of a Prometheus that scrapes the sidecars, and its table cells.

Pure (no I/O, no CLI): the command (:mod:`fleetwatch.commands.slo_report`) runs the
:data:`QUERIES` through its Prometheus client and hands the answers to
:func:`build_report`; :func:`table` turns a report into printable cells.

Odd samples are tolerated: a value that is NaN, ±Inf or not a number is reported as no
value (``None``, shown ``-``), a sample without the label it is keyed by (``state``,
``window``, ``band``) is skipped, and label values are text — :func:`printable` escapes
control and format characters so that a label cannot drive a terminal.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from fleetwatch.slo.durations import parse_duration

#: The labels one report row is keyed by, in order.
KEY = ("slo", "model", "model_version", "backend", "instance")
RowKey = tuple[str, ...]
#: One sample of an instant vector as Prometheus' JSON has it (``metric`` is a mapping).
Sample = Mapping[str, Any]

STATE_QUERY = "fleetwatch_slo_state == 1"
BUDGET_QUERY = "fleetwatch_slo_error_budget_remaining_ratio"
CAPACITY_QUERY = "fleetwatch_slo_capacity_concurrency"
BURN_QUERY = "fleetwatch_slo_burn_rate"
CONCURRENCY_QUERY = "fleetwatch_slo_concurrency"
#: Every instant query the report needs, in the order they are sent.
QUERIES = (STATE_QUERY, BUDGET_QUERY, CAPACITY_QUERY, BURN_QUERY, CONCURRENCY_QUERY)


class ReportRow(TypedDict, total=False):
    """One (SLO, model, version, backend, instance): the :data:`KEY` labels (always),
    ``state``, ``budget_remaining`` (ratio of the budget), ``capacity`` and
    ``concurrency`` (requests per replica), ``burn_rates`` (window label → band label →
    burn rate); a missing or unusable value is None."""

    slo: str
    model: str
    model_version: str
    backend: str
    instance: str
    state: str
    budget_remaining: float | None
    capacity: float | None
    concurrency: float | None
    burn_rates: dict[str, dict[str, float | None]]


def printable(text: str) -> str:
    """``text`` with control and format characters (ESC, NUL, bidi overrides, line breaks)
    written as escapes (``\\x1b``), so that a label value cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else
                   f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                   for c in text)


#: Characters of foreign text (an error message) kept by :func:`detail`.
DETAIL_CHARS = 300


def detail(text: str) -> str:
    """Foreign text for an error line: one line, printable, at most
    :data:`DETAIL_CHARS` characters (then ``…``)."""
    one = printable(" ".join(str(text).split()))
    return one if len(one) <= DETAIL_CHARS else one[:DETAIL_CHARS] + "…"


def sample_value(sample: Sample) -> float | None:
    """The sample's value, or None when it is missing, not a number, NaN or ±Inf."""
    pair = sample.get("value")
    if not (isinstance(pair, list) and len(pair) == 2):
        return None
    try:
        v = float(pair[1])
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def sample_labels(sample: Sample) -> dict[str, str]:
    """The sample's labels as text (a value that is not a string is written as JSON)."""
    return {str(k): v if isinstance(v, str) else json.dumps(v)
            for k, v in sample["metric"].items()}


def build_report(answers: Mapping[str, Sequence[Sample]]) -> list[ReportRow]:
    """One :class:`ReportRow` per (SLO, model, version, backend, instance), sorted, from
    the answer (samples whose ``metric`` is a mapping) to each query of :data:`QUERIES`
    (a missing answer counts as no samples)."""
    rows: dict[RowKey, dict[str, Any]] = defaultdict(lambda: {"burn_rates": defaultdict(dict)})

    def key(m: Mapping[str, str]) -> RowKey:
        return tuple(m.get(k, "") for k in KEY)

    for s in answers.get(STATE_QUERY, ()):
        m = sample_labels(s)
        if "state" in m:
            rows[key(m)]["state"] = m["state"]
    for name, field in ((BUDGET_QUERY, "budget_remaining"), (CAPACITY_QUERY, "capacity")):
        for s in answers.get(name, ()):
            rows[key(sample_labels(s))][field] = sample_value(s)
    for s in answers.get(BURN_QUERY, ()):
        m = sample_labels(s)
        if "window" in m and "band" in m:
            rows[key(m)]["burn_rates"][m["window"]][m["band"]] = sample_value(s)
    conc = {tuple(sample_labels(s).get(k, "") for k in KEY[1:]): sample_value(s)
            for s in answers.get(CONCURRENCY_QUERY, ())}
    out: list[ReportRow] = []
    for k in sorted(rows):
        row: dict[str, Any] = {**dict(zip(KEY, k, strict=True)), **rows[k]}
        row["burn_rates"] = {w: dict(b) for w, b in row["burn_rates"].items()}
        row["concurrency"] = conc.get(k[1:])
        out.append(cast(ReportRow, row))  # built key by key: exactly ReportRow's keys
    return out


def fmt(v: float | None, pct: bool = False) -> str:
    """A number for a person: ``-`` for None, a percentage with one decimal, else 3
    significant digits — whole digits from 1,000 to 10^6 (a burn rate of ``1440``, not
    ``:.3g``'s ``1.44e+03``), an exponent only beyond."""
    if v is None:
        return "-"
    if pct:
        return f"{v * 100:.1f}%"
    return f"{v:.0f}" if 999.5 <= abs(v) < 1e6 else f"{v:.3g}"


def window_order(w: str) -> tuple[float, str]:
    """Windows by length (``5m`` < ``1h``); labels that are not durations last, by name."""
    try:
        return (parse_duration(w), w)
    except ValueError:
        return (math.inf, w)


def table(report: Sequence[ReportRow]) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)`` of printable cells: one row per SLO/model/instance, overall
    burn rates by window (shortest first), and the bands that burn faster than 1 in the
    longest window. Every cell went through :func:`printable`."""
    windows = sorted({w for r in report for w in r.get("burn_rates", {})}, key=window_order)
    columns = ["SLO", "model", "version", "instance", "state", "budget left", "capacity",
               "concurrency", *(f"burn {w}" for w in windows), "bands burning (longest)"]
    cells: list[list[str]] = []
    for r in report:
        burn_rates = r.get("burn_rates", {})
        burns = [fmt(burn_rates.get(w, {}).get("all")) for w in windows]
        longest = burn_rates.get(windows[-1], {}) if windows else {}
        hot = ", ".join(b for b, v in longest.items() if b != "all" and v is not None and v > 1)
        cells.append([printable(str(v)) for v in (
            r.get("slo", ""), r.get("model", ""), r.get("model_version", ""),
            r.get("instance", ""), r.get("state", "?"),
            fmt(r.get("budget_remaining"), pct=True), fmt(r.get("capacity")),
            fmt(r.get("concurrency")), *burns, hot or "-")])
    return [printable(c) for c in columns], cells
