"""What the status page is rendered from (:class:`PageInput`), and the text helpers every
part of it uses.

The ``slos`` and ``autoscaling`` rows are the ``/slo`` and ``/autoscaling`` objects as
served (:class:`~fleetwatch.slo.outputs.status.SLOStatus`,
:class:`~fleetwatch.slo.outputs.autoscaling.ModelSignal`), read key by key with defaults: a key a
newer engine adds (``band_latency``, ``capacity_predicted``) is used when present, a key
a source cannot give (a Prometheus report has no ``explanation``) is shown as ``-``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from fleetwatch.slo.outputs.report import fmt, printable

#: One ``/slo`` or ``/autoscaling`` row, as JSON gives it.
Row = Mapping[str, Any]


class TargetView(TypedDict):
    """One scrape target and its health (``/readyz``'s view)."""

    name: str
    kind: str
    up: bool
    ready: bool
    required: bool | None  # None: not known (Prometheus does not have it)
    error: str | None
    models_not_ready: list[str]
    models_sleeping: list[str]


class ModelView(TypedDict):
    """One served model with its registry entry and what its server says about itself."""

    model: str
    model_version: str
    backend: str
    runtime: str
    target: str  # the target (sidecar) or instance (Prometheus) serving it
    team: str
    owner: str
    oncall: str
    latency_tier: str
    engine_version: str
    quantization: str


class ConfigRow(TypedDict):
    """One governance row: a configuration field that drifts from the registry's
    declaration (``kind`` ``drift``: ``what`` the field, ``detail`` declared → running)
    or a lint finding (``kind`` ``lint``: ``what`` the check, ``detail`` what to change)."""

    model: str
    kind: str
    what: str
    severity: str
    detail: str


class HistoryPoint(TypedDict):
    """One autoscaling snapshot of one model."""

    t: float  # Unix seconds (the engine's update)
    signal: float
    components: dict[str, float]


class PageInput(TypedDict):
    """Everything the page shows. ``history`` maps :func:`model_label` of a model to its
    snapshots, oldest first; ``thresholds`` an SLO name to its latency threshold (seconds,
    latency and timeslice SLIs); ``refresh_seconds`` > 0 reloads the page (the sidecar's
    page; 0 for a file); ``history_note`` says why a source has no history (Prometheus'
    instant queries)."""

    title: str
    source: str
    generated: float
    updated: float | None
    targets: list[TargetView]
    models: list[ModelView]
    slos: Sequence[Row]
    autoscaling: Sequence[Row]
    history: dict[str, list[HistoryPoint]]
    thresholds: dict[str, float]
    links: list[tuple[str, str]]
    refresh_seconds: float
    history_note: str  # shown instead of a model's history when there is none ("": count)
    configuration: list[ConfigRow]  # drifts and lint findings (the sidecar's; [] elsewhere)


def text(value: object) -> str:
    """``value`` as HTML text: printable (control and bidi characters written as
    escapes) and HTML-escaped, quotes included (safe in attributes too)."""
    return html.escape(printable("" if value is None else str(value)), quote=True)


def num(value: object) -> float | None:
    """A finite number from a JSON value, else None (``None``, text, NaN, ±Inf, bools)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def number(value: object, pct: bool = False) -> str:
    """A JSON value as cell text: 3 significant digits (or a percentage), ``-`` when it
    is not a finite number (see :func:`fleetwatch.slo.outputs.report.fmt`)."""
    return fmt(num(value), pct=pct)


def model_label(row: Row) -> str:
    """``model`` ``v<version>`` ``(<backend>)`` of a row — the key of a model's history
    (plain text: escape it with :func:`text` where it is shown)."""
    version = row.get("model_version") or ""
    parts = [str(row.get("model", "")), f"v{version}" if version else "",
             f"({row['backend']})" if row.get("backend") else ""]
    return " ".join(p for p in parts if p)
