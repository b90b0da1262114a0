"""Concurrency bands and burn-rate arithmetic, shared by the SLO engine and the generators.

Pure functions on floats (no numpy), so importing the rule and dashboard generators stays
cheap. A band is the upper bound of per-replica concurrency (requests in the system);
``inf`` is the band above the highest declared bound.
"""

from __future__ import annotations

import math


def band_label(bound: float) -> str:
    """``4.0`` → ``"4"``, ``inf`` → ``"+Inf"``: the ``band`` label value of a bound."""
    return "+Inf" if math.isinf(bound) else format(bound, "g")


def band_of(concurrency: float, bands: list[float]) -> float:
    """The smallest band bound ≥ ``concurrency`` (``inf`` above the highest band)."""
    for b in bands:
        if concurrency <= b:
            return b
    return math.inf


def burn_rate(good: float, total: float, objective: float) -> float:
    """Error rate ÷ error budget: ``(1 - good/total) / (1 - objective)``; NaN when no
    events. 1 means the budget lasts exactly the period (SRE Workbook, ch. 5)."""
    if total <= 0:
        return math.nan
    return (1.0 - good / total) / (1.0 - objective)


def budget_remaining(good: float, total: float, objective: float) -> float:
    """Share of the period's error budget left: ``1 - bad / ((1 - objective) × total)``
    (1 with no events; negative when overspent)."""
    if total <= 0:
        return 1.0
    return 1.0 - (total - good) / ((1.0 - objective) * total)
