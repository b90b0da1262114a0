"""Comparing a candidate with a baseline, SLO by SLO and concurrency band by band.

A naive comparison of two versions' overall good ratios is wrong whenever they see
different load: a version that ran at low concurrency looks better than one that ran at
high concurrency, whatever their code. The SLO engine knows the concurrency band of every
event, so this compares *like with like*: in each band both versions ran in, their good
ratios (the SLO's SLI: requests under the latency threshold, successful requests, good
time slices).

Per band (never the ``all`` band, which is reported as the naive comparison):

* ``not enough data`` when either side has fewer than ``min_events`` events there;
* otherwise a **two-proportion z-test** (pooled; Newcombe 1998, Agresti & Caffo 2000)
  of the candidate's good ratio against the baseline's, with a Wilson score interval
  for each ratio (95 %) and the event counts; the band is ``worse`` (``better``) when
  the test rejects equality at ``alpha`` divided by the number of bands compared
  (Bonferroni: many bands must not make a chance difference likely) **and** the
  difference is at least ``margin`` (default: half the SLO's error budget, ``(1 −
  objective) / 2``: a difference the SLO cannot feel is ``same``); else ``same``.

An SLO's verdict is ``worse`` when any band is worse (a rollout must not hide a bad band
behind good ones), else ``better`` when any band is better, else ``same`` when any band
could be compared, else ``not enough data``; the *driving bands* are the bands with that
verdict. The model's verdict is the worst over its SLOs in the same order, and its
driving bands are those of the SLOs with that verdict.

The latency quantile of each band (and its interval, when known) is shown beside the
ratios; the verdict is the SLI's, as the SLO's is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from fleetwatch.rollout.summary import Z95, BandSLI, SLOSummary
from fleetwatch.slo.state import ALL, band_sort

WORSE, SAME, BETTER, NO_DATA = "worse", "same", "better", "not enough data"
#: Every verdict, in exposition order (the ``verdict`` label's values).
VERDICTS = (BETTER, SAME, WORSE, NO_DATA)

#: Events per band and side below which a band is ``not enough data``.
MIN_EVENTS = 30
#: Family-wise significance level of a comparison (shared by its bands).
ALPHA = 0.05


@dataclass(frozen=True)
class Settings:
    """``min_events`` per band and side (events), ``alpha`` (0–1, family-wise over the
    bands compared), ``margin`` (ratio 0–1; None: half the SLO's error budget, 0.01
    without an objective)."""

    min_events: float = MIN_EVENTS
    alpha: float = ALPHA
    margin: float | None = None

    def margin_for(self, objective: float | None) -> float:
        """The margin of an SLO with ``objective`` (ratio)."""
        if self.margin is not None:
            return self.margin
        return (1.0 - objective) / 2.0 if objective is not None else 0.01


#: The default settings.
DEFAULT = Settings()


@dataclass(frozen=True)
class BandComparison:
    """One band: both sides (None: no events there), the candidate's ratio minus the
    baseline's (``difference``), the test's z and two-sided p-value, the Wilson
    intervals (``[low, high]``) of each ratio, and the band's verdict."""

    band: str
    verdict: str
    baseline: BandSLI | None
    candidate: BandSLI | None
    difference: float | None = None
    z: float | None = None
    p_value: float | None = None
    baseline_interval: tuple[float, float] | None = None
    candidate_interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class SLOComparison:
    """One SLO: its verdict, the bands driving it, every band's comparison, and the
    naive overall comparison (band ``all``, same test, never the verdict)."""

    slo: str
    verdict: str
    driving_bands: tuple[str, ...]
    bands: tuple[BandComparison, ...]
    overall: BandComparison | None
    threshold: float  # the per-band significance level (alpha ÷ bands compared)
    margin: float


@dataclass(frozen=True)
class Comparison:
    """A model's comparison: ``baseline``/``candidate`` name each side (a version, or a
    baseline file's version and engine), the verdict, the ``(SLO, band)`` pairs driving
    it, and every SLO's comparison."""

    model: str
    baseline: str
    candidate: str
    verdict: str
    driving: tuple[tuple[str, str], ...]
    slos: tuple[SLOComparison, ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        """JSON-ready (tuples as lists; numbers may be None, never NaN)."""
        return asdict(self)


def wilson(good: float, total: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval ``(low, high)`` of a ratio good ÷ total (total > 0)."""
    p = good / total
    z2 = z * z
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def two_proportion(g1: float, n1: float, g2: float, n2: float) -> tuple[float, float]:
    """Pooled two-proportion z-test of ratio 2 against ratio 1: ``(z, two-sided
    p-value)``; ``(0, 1)`` when both ratios are 0 or both 1 (no variance)."""
    p1, p2 = g1 / n1, g2 / n2
    pooled = (g1 + g2) / (n1 + n2)
    var = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if var <= 0:
        return 0.0, 1.0
    z = (p2 - p1) / math.sqrt(var)
    return z, math.erfc(abs(z) / math.sqrt(2))


def compare_band(band: str, base: BandSLI | None, cand: BandSLI | None,
                 settings: Settings, threshold: float, margin: float) -> BandComparison:
    """One band's comparison (see the module doc)."""
    if base is None or cand is None or base.total < settings.min_events \
            or cand.total < settings.min_events:
        return BandComparison(band, NO_DATA, base, cand)
    z, p = two_proportion(base.good, base.total, cand.good, cand.total)
    diff = cand.good / cand.total - base.good / base.total
    verdict = SAME
    if p < threshold and abs(diff) >= margin:
        verdict = BETTER if diff > 0 else WORSE
    return BandComparison(band, verdict, base, cand, diff, z, p,
                          wilson(base.good, base.total), wilson(cand.good, cand.total))


def combine(verdicts: Sequence[str]) -> str:
    """The verdict of several (bands or SLOs): worse > better > same > not enough data."""
    if WORSE in verdicts:
        return WORSE
    if BETTER in verdicts:
        return BETTER
    if SAME in verdicts:
        return SAME
    return NO_DATA


def compare_slo(base: SLOSummary, cand: SLOSummary,
                settings: Settings | None = None) -> SLOComparison:
    """Compare one SLO's summaries band by band (see the module doc)."""
    settings = settings or DEFAULT
    labels = sorted((set(base.bands) | set(cand.bands)) - {ALL}, key=band_sort)
    comparable = [b for b in labels if b in base.bands and b in cand.bands
                  and min(base.bands[b].total, cand.bands[b].total) >= settings.min_events]
    threshold = settings.alpha / max(1, len(comparable))
    margin = settings.margin_for(base.objective if base.objective is not None
                                 else cand.objective)
    bands = tuple(compare_band(b, base.bands.get(b), cand.bands.get(b), settings, threshold,
                               margin) for b in labels)
    verdict = combine([b.verdict for b in bands])
    overall = None
    if ALL in base.bands or ALL in cand.bands:
        overall = compare_band(ALL, base.bands.get(ALL), cand.bands.get(ALL), settings,
                               settings.alpha, margin)
    driving = tuple(b.band for b in bands if b.verdict == verdict and verdict != NO_DATA)
    return SLOComparison(base.slo, verdict, driving, bands, overall, threshold, margin)


def compare(model: str, baseline_name: str, candidate_name: str,
            baseline: Sequence[SLOSummary], candidate: Sequence[SLOSummary],
            settings: Settings | None = None) -> Comparison:
    """Compare every SLO both sides have (by SLO name); an SLO only one side has is
    ``not enough data``. Raises ``ValueError`` when the sides share no SLO."""
    settings = settings or DEFAULT
    by_base = {s.slo: s for s in baseline}
    by_cand = {s.slo: s for s in candidate}
    names = sorted(set(by_base) | set(by_cand))
    if not set(by_base) & set(by_cand):
        raise ValueError(f"model {model}: {baseline_name} has SLOs "
                         f"[{', '.join(sorted(by_base)) or 'none'}] and {candidate_name} "
                         f"[{', '.join(sorted(by_cand)) or 'none'}]: none in common")
    slos = []
    for n in names:
        if n in by_base and n in by_cand:
            slos.append(compare_slo(by_base[n], by_cand[n], settings))
        else:
            slos.append(SLOComparison(n, NO_DATA, (), (), None, settings.alpha,
                                      settings.margin_for(None)))
    verdict = combine([s.verdict for s in slos])
    driving = tuple((s.slo, b) for s in slos if s.verdict == verdict for b in s.driving_bands)
    return Comparison(model, baseline_name, candidate_name, verdict, driving, tuple(slos))


__all__ = [
    "ALPHA",
    "BETTER",
    "DEFAULT",
    "MIN_EVENTS",
    "NO_DATA",
    "SAME",
    "VERDICTS",
    "WORSE",
    "BandComparison",
    "Comparison",
    "SLOComparison",
    "Settings",
    "combine",
    "compare",
    "compare_band",
    "compare_slo",
    "two_proportion",
    "wilson",
]
