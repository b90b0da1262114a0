"""The rule data model (alerting rules, rule groups) and the burn-tier vocabulary every
alert family and the Alertmanager inhibitions share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fleetwatch.alerts.numbers import window
from fleetwatch.alerts.recording import RecordingRule
from fleetwatch.slo.bands import band_label
from fleetwatch.slo.spec import BurnWindow, SLOSpec

#: Label or annotation pairs, in output order.
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule: ``labels`` and ``annotations`` are Go templates (see
    :mod:`fleetwatch.alerts.annotations`), ``for_`` a Prometheus duration or None."""

    alert: str
    expr: str
    labels: Labels
    annotations: Labels
    for_: str | None = None


@dataclass(frozen=True)
class RuleGroup:
    """A Prometheus rule group (rules run in order within one evaluation)."""

    name: str
    rules: tuple[RecordingRule | AlertRule, ...]
    interval: str | None = None


def tier_name(w: BurnWindow) -> str:
    """The ``burn_tier`` label of a window pair: ``1h/5m``."""
    return f"{window(w.long)}/{window(w.short)}"


def ordered_tiers(windows: Iterable[BurnWindow]) -> list[BurnWindow]:
    """A window catalog from the fastest tier (shortest long window) to the slowest."""
    return sorted(windows, key=lambda w: (w.long, w.short))


def inside_bands(slo: SLOSpec) -> list[str]:
    """Band labels inside the envelope (upper bound ≤ envelope), as the engine judges."""
    return [band_label(b) for b in slo.concurrency.bands if b <= slo.concurrency.envelope]
