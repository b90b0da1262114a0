"""What a state needs to start where it was, taken from an engine and applied to one.

Units: events (cumulative counts and bucket counts), Unix seconds, requests (capacity and
concurrency), seconds (bucket bounds and window lengths). A bucket is the absolute index
``⌊t / (W / buckets)⌋`` of a window of length ``W`` (:mod:`fleetwatch.slo.account.windows`),
so a record taken at one time applies at a later one: the buckets that slid out of a
window meanwhile are skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fleetwatch.slo.account.ledger import Ledger
from fleetwatch.slo.capacity.evidence import BandLatencyStore
from fleetwatch.slo.capacity.rules import EVIDENCE
from fleetwatch.slo.state import ALL, ModelKey, SLOModelState

#: ``(bucket, good, total)``: one window bucket's events.
BucketCount = tuple[int, float, float]
#: ``(SLO name, model)``: the key of a state.
StateKey = tuple[str, ModelKey]
#: Where a recovery came from (``recovered_from`` of the states it starts).
SOURCES = ("snapshot", "prometheus")


@dataclass(slots=True)
class BandEvidence:
    """A band's latency evidence (:class:`~fleetwatch.slo.capacity.evidence.BandLatencyStore`
    row): weights relative to ``origin`` (Unix seconds), ``count`` weighted observations,
    ``conc`` weighted Σ concurrency × observations, ``buckets`` upper bound (seconds) →
    weighted cumulative count."""

    origin: float
    count: float
    conc: float
    buckets: dict[float, float] = field(default_factory=dict)


@dataclass(slots=True)
class BandRecord:
    """One band's (or ``all``'s) events: cumulative ``good``/``total`` since the state
    began, ``windows`` (window length in seconds → its non-empty buckets) and the band's
    latency ``evidence`` (None for ``all``, or unknown)."""

    good: float
    total: float
    windows: dict[float, list[BucketCount]] = field(default_factory=dict)
    evidence: BandEvidence | None = None


@dataclass(slots=True)
class StateRecord:
    """One (SLO, model) state: its capacity at SLO (requests), the evidence string
    (``capacity_evidence``; "" when unknown: then ``kept``, or ``envelope`` for a capacity
    at the envelope), the capacity model's prediction, the hysteresis' pending
    estimate and count, and its bands (label → :class:`BandRecord`)."""

    capacity: float
    capacity_evidence: str = ""
    capacity_predicted: float | None = None
    pending_capacity: float | None = None
    pending_count: int = 0
    bands: dict[str, BandRecord] = field(default_factory=dict)


@dataclass(slots=True)
class Recovered:
    """A recovery: ``source`` (one of :data:`SOURCES`), ``saved`` (Unix seconds the
    records are as of), ``buckets`` (sub-intervals per window of the engine that made
    them), the ``states``' records and the ``fleet`` capacities ((SLO, model) → requests)."""

    source: str
    saved: float
    buckets: int
    states: dict[StateKey, StateRecord] = field(default_factory=dict)
    fleet: dict[StateKey, float] = field(default_factory=dict)


def capture(states: Mapping[StateKey, SLOModelState], ledger: Ledger,
            latency: BandLatencyStore, saved: float) -> Recovered:
    """The records of an engine's ``states`` (its ``ledger`` and latency store) as of
    ``saved`` (Unix seconds): a ``snapshot`` recovery without fleet capacities."""
    windows = ledger.windows
    out = Recovered("snapshot", saved, windows.buckets)
    rows = [r for st in states.values() for r in st.rows.values()]
    counts = iter(windows.bucket_counts(rows))
    for key, st in states.items():
        bands: dict[str, BandRecord] = {}
        for band, r in st.rows.items():
            ev = None
            if band != ALL:
                ev = BandEvidence(float(latency.origin[r]), float(latency.count[r]),
                                  float(latency.conc[r]), latency.bucket_counts(r))
            bands[band] = BandRecord(float(ledger.cum_good[r]), float(ledger.cum_total[r]),
                                     next(counts), ev)
        out.states[key] = StateRecord(st.capacity, st.capacity_evidence,
                                      st.capacity_predicted, st.pending_capacity,
                                      st.pending_count, bands)
    return out


def apply(rec: Recovered, st: SLOModelState, ts: float,
          new_row: Callable[[SLOModelState, str, float], int], ledger: Ledger,
          latency: BandLatencyStore) -> None:
    """Start the new state ``st`` (made at ``ts``, Unix seconds) from its record in
    ``rec`` (taken out: a record applies once), else from its fleet capacity, else leave
    it as made. ``new_row`` makes a band's row (the engine's). A record's bands the SLO no
    longer has, windows the engine does not keep, and buckets out of a window as of
    ``ts`` are skipped; buckets of an engine with another ``buckets`` count are not
    loaded (their indices mean other times)."""
    key = (st.slo.name, st.model)
    record = rec.states.pop(key, None)
    if record is None:
        fleet = rec.fleet.pop(key, None)
        if fleet is not None and math.isfinite(fleet) and fleet > 0:
            st.capacity, st.capacity_evidence, st.recovered_from = fleet, "fleet", "fleet"
        return
    labels = {label for _, label in st.band_bounds()} | {ALL}
    same_buckets = rec.buckets == ledger.windows.buckets
    for band, br in record.bands.items():
        if band not in labels:
            continue
        r = new_row(st, band, ts)
        ledger.cum_good[r], ledger.cum_total[r] = br.good, br.total
        if same_buckets:
            for length, counts in br.windows.items():
                ledger.windows.load(r, length, counts, ts)
        ev = br.evidence
        if ev is not None and band != ALL:
            latency.load(r, ev.origin, ev.count, ev.conc, ev.buckets)
    if record.capacity_evidence in EVIDENCE:
        st.capacity_evidence = record.capacity_evidence
    elif record.capacity != st.capacity:  # unknown: kept, unless still the envelope
        st.capacity_evidence = "kept"
    st.capacity = record.capacity
    st.capacity_predicted = record.capacity_predicted
    st.pending_capacity, st.pending_count = record.pending_capacity, record.pending_count
    st.recovered_from = rec.source
