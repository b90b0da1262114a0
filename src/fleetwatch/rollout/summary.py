"""The per-band SLI summary of one SLO on one model version: what a comparison compares
and what a baseline file stores.

A :class:`BandSLI` is one concurrency band (the SLO engine's ``band`` label, ``all`` for
every band together): its event counts (good and total, in SLI events: requests for a
latency or availability SLI, slices for a time-slice SLI), the latency quantile the
objective implies (seconds) with a distribution-free interval when the band's latency
distribution is known, and the band's mean concurrency (requests per replica).

Sources, all pure:

* :func:`from_engine` — an :class:`~fleetwatch.slo.engine.SLOEngine` (the sidecar's, or
  one fed by ``fleetwatch slo replay``'s reading of captures): cumulative counts since
  the engine started, the latency quantile and its interval from the band's latency
  histogram (:class:`~fleetwatch.slo.capacity.evidence.BandLatency`);
* :func:`from_samples` — the instant-query answers of a Prometheus that scrapes the
  sidecars (``fleetwatch_slo_events_total``, ``fleetwatch_slo_good_events_total``,
  ``fleetwatch_slo_band_latency_quantile_seconds``, ``fleetwatch_slo_band_concurrency``):
  summed over instances; the latency is a point value there (no interval: the band's
  histogram stays in the sidecar).

The quantile interval is the order-statistic one: with ``n`` events in the band, the
rank of the ``q`` quantile lies within ``q ± z·√(q(1−q)/n)`` (normal approximation of
the binomial), read off the same histogram (Prometheus ``histogram_quantile``
interpolation, :meth:`BandLatency.quantile`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.slo.capacity.model import BandLatency
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.outputs.report import Sample, sample_labels, sample_value
from fleetwatch.slo.state import ALL, SLOModelState, band_sort

#: z of a two-sided 95 % interval.
Z95 = 1.959964
#: The largest value a summary takes from outside (a Prometheus answer, a baseline file):
#: 2^53, the last integer a float64 counts exactly — a count beyond it no longer counts
#: events one by one, and is a broken exporter or store, not a fleet's traffic.
MAX_VALUE = 2.0**53


@dataclass(frozen=True)
class BandSLI:
    """One band of one SLO on one version (see the module doc; counts in SLI events,
    latency in seconds, concurrency in requests per replica; None: unknown)."""

    band: str
    good: float
    total: float
    latency_seconds: float | None = None
    latency_low_seconds: float | None = None
    latency_high_seconds: float | None = None
    concurrency: float | None = None

    @property
    def ratio(self) -> float | None:
        """good ÷ total (None without events)."""
        return self.good / self.total if self.total > 0 else None


@dataclass
class SLOSummary:
    """One SLO on one model version: ``bands`` by band label (``all`` included);
    ``objective`` is the SLO's target ratio (0–1), ``sli`` its kind."""

    slo: str
    model: str
    model_version: str
    backend: str
    sli: str = ""
    objective: float | None = None
    bands: dict[str, BandSLI] = field(default_factory=dict)

    def band_labels(self) -> list[str]:
        """The band labels, ascending, ``+Inf`` then ``all`` last."""
        return sorted(self.bands, key=band_sort)


def quantile_interval(bl: BandLatency, q: float, n: float,
                      z: float = Z95) -> tuple[float | None, float | None]:
    """``(low, high)`` seconds of the ``q`` quantile of ``bl`` from ``n`` events (the
    order-statistic interval of the module doc); ``(None, None)`` without a histogram
    or events."""
    if n <= 0 or not bl.buckets:
        return None, None
    half = z * math.sqrt(q * (1.0 - q) / n)
    return bl.quantile(max(0.0, q - half)), bl.quantile(min(1.0, q + half))


def from_engine(engine: SLOEngine, model: str, version: str,
                backend: str | None = None) -> list[SLOSummary]:
    """Every SLO the engine tracks on ``model`` at ``version`` (and ``backend`` when
    given), sorted by SLO name: counts since the engine started."""
    return from_states([st for (_, mk), st in sorted(engine.states.items())
                        if mk.model == model and mk.model_version == version
                        and (backend is None or mk.backend == backend)])


#: ``(state, band label) → (good, total)``: the counts a summary takes (default: the
#: state's cumulative counts since the engine started).
Counts = Callable[[SLOModelState, str], tuple[float, float]]


def since_start(st: SLOModelState, band: str) -> tuple[float, float]:
    """A state's cumulative ``(good, total)`` of a band since the engine started."""
    return st.good[band], st.events[band]


def from_states(states: Sequence[SLOModelState],
                counts: Counts = since_start) -> list[SLOSummary]:
    """The summary of each engine state (one SLO on one model version), in order, with
    the band counts ``counts`` gives (bands without events are left out)."""
    out: list[SLOSummary] = []
    for st in states:
        name, mk = st.slo.name, st.model
        q = st.slo.objective
        bands: dict[str, BandSLI] = {}
        for band in list(st.events):
            good, total = counts(st, band)
            if total <= 0:
                continue
            bl = st.latency.get(band)
            lat = low = high = conc = None
            if bl is not None:
                lat = bl.quantile(q) if bl.buckets else None
                low, high = quantile_interval(bl, q, total)
                conc = bl.concurrency()
            bands[band] = BandSLI(band, good, total, lat, low, high, conc)
        out.append(SLOSummary(name, mk.model, mk.model_version, mk.backend, st.slo.sli.kind,
                              q, bands))
    return out


def versions_in_engine(engine: SLOEngine, model: str) -> list[tuple[str, str]]:
    """``(model_version, backend)`` of every version of ``model`` the engine tracks."""
    return sorted({(mk.model_version, mk.backend) for _, mk in engine.states if mk.model == model})


#: The instant queries :func:`from_samples` reads, by field (``{model}`` filled in, a
#: PromQL string literal). Summed over instances and replicas.
QUERIES: Mapping[str, str] = {
    "total": "sum by (slo, model, model_version, backend, band) "
             "(fleetwatch_slo_events_total{{model={model}}})",
    "good": "sum by (slo, model, model_version, backend, band) "
            "(fleetwatch_slo_good_events_total{{model={model}}})",
    "latency": "max by (slo, model, model_version, backend, band) "
               "(fleetwatch_slo_band_latency_quantile_seconds{{model={model}}})",
    "concurrency": "avg by (slo, model, model_version, backend, band) "
                   "(fleetwatch_slo_band_concurrency{{model={model}}})",
}
#: The same counts over a range (``{range}``: a Prometheus duration): increases.
RANGE_QUERIES: Mapping[str, str] = {
    "total": "sum by (slo, model, model_version, backend, band) "
             "(increase(fleetwatch_slo_events_total{{model={model}}}[{range}]))",
    "good": "sum by (slo, model, model_version, backend, band) "
            "(increase(fleetwatch_slo_good_events_total{{model={model}}}[{range}]))",
}


class InconsistentCounts(ValueError):
    """An answer with more good events than events in a band, beyond what ``increase()``'s
    extrapolation can explain (:data:`GOOD_SLACK`); the message names the series."""


#: How far good events may exceed events before the answer is refused: one event and
#: 0.1 % (``increase()`` extrapolates each counter over its own samples); below that the
#: good count is capped at the total.
GOOD_SLACK = (1.0, 0.001)


def from_samples(answers: Mapping[str, Sequence[Sample]]) -> list[SLOSummary]:
    """Summaries per (SLO, model, version, backend), sorted, from the answers to
    :data:`QUERIES` by field (samples whose ``metric`` is a mapping; a sample without a
    ``band`` or ``slo`` label, or whose value is not a finite number, is skipped). Raises
    :class:`InconsistentCounts` for a band with more good events than events."""
    rows: dict[tuple[str, str, str, str], dict[str, dict[str, Any]]] = \
        defaultdict(lambda: defaultdict(dict))
    for fld in ("total", "good", "latency", "concurrency"):
        for s in answers.get(fld, ()):
            m = sample_labels(s)
            v = sample_value(s)
            if v is None or "band" not in m or "slo" not in m:
                continue
            key = (m["slo"], m.get("model", ""), m.get("model_version", ""),
                   m.get("backend", ""))
            rows[key][m["band"]][fld] = v
    out = []
    for key in sorted(rows):
        for band, f in rows[key].items():
            good, total = f.get("good", 0.0), f.get("total", 0.0)
            if good > total + max(GOOD_SLACK[0], GOOD_SLACK[1] * total):
                raise InconsistentCounts(
                    f"{{slo={key[0]!r}, model={key[1]!r}, model_version={key[2]!r}, "
                    f"backend={key[3]!r}, band={band!r}}}: {good:g} good events of "
                    f"{total:g} events")
        bands = {band: BandSLI(band, min(f.get("good", 0.0), f["total"]), f["total"],
                               f.get("latency"), None, None, f.get("concurrency"))
                 for band, f in rows[key].items() if "total" in f}
        if bands:
            out.append(SLOSummary(*key, bands=bands))
    return out


__all__ = [
    "ALL",
    "GOOD_SLACK",
    "MAX_VALUE",
    "QUERIES",
    "RANGE_QUERIES",
    "Z95",
    "BandSLI",
    "Counts",
    "InconsistentCounts",
    "SLOSummary",
    "from_engine",
    "from_samples",
    "from_states",
    "quantile_interval",
    "since_start",
    "versions_in_engine",
]
