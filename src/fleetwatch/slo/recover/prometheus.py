"""A recovery rebuilt from what the sidecar exported to Prometheus (pure: queries in,
answers in, a :class:`~.records.Recovered` out; the HTTP is
:mod:`fleetwatch.sidecar.recover`'s).

Per window length ``W`` of the engine (resolution ``r = W / buckets``, the current bucket
``c = ⌊now / r⌋``), a range query of the cumulative counters
``fleetwatch_slo_{good_,}events_total{slo, model, model_version, backend, band}`` at the
bucket edges ``k·r`` (``k = c − buckets + 1 … c``) and an instant query at ``now`` give
each bucket's events as the difference of its edges (a counter that went down was
restarted: the later value is the increase; an edge without a sample carries the one
before, and 0 before the first). The instant values are the cumulative counts, so the
restarted sidecar's counters go on from where they were. Resolution: an edge reads the
last scrape before it, so a bucket holds its events within one scrape interval.

The instant values are the last within :data:`LOOKBACK` (``last_over_time``): the stopped
sidecar's series are stale by the time it restarts. Capacity from
``fleetwatch_slo_capacity_concurrency`` (and
``fleetwatch_slo_capacity_predicted_concurrency``); its evidence string is not exported, so
it reads ``kept`` (``envelope`` for a capacity at the envelope) until the engine's next
update derives it again from the recovered windows. A band's latency
evidence is rebuilt from ``fleetwatch_slo_band_concurrency`` and
``fleetwatch_slo_band_latency_quantile_seconds``: the weighted observations are the
band's events over the capacity window, each bucket's weighted by ``exp(−age / τ)`` (τ the
capacity window), and the histogram is the one the quantile was read from reduced to
two buckets — the objective's share of observations at the quantile, the rest at
``+Inf`` — so the band answers the same quantile and mean concurrency.

The fleet capacity is :data:`FLEET_CAPACITY`, recorded by the generated rules
(:mod:`fleetwatch.alerts.recording`) over every replica. Every query of this sidecar's own
series carries ``match``: label matchers that select them (e.g. ``{pod: ranker-0}``).
Answers are not trusted: a sample that is not a finite, non-negative number, or without
the labels of a state, is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.promql import sel
from fleetwatch.slo.recover.names import (
    BAND_CONCURRENCY,
    BAND_QUANTILE,
    CAPACITY,
    EVENTS,
    FLEET_CAPACITY,
    GOOD,
    PREDICTED,
)
from fleetwatch.slo.recover.records import BandEvidence, BandRecord, Recovered, StateRecord
from fleetwatch.slo.state import ALL, ModelKey

__all__ = ["BAND_CONCURRENCY", "BAND_QUANTILE", "CAPACITY", "EVENTS", "FLEET_CAPACITY",
           "GOOD", "INSTANT", "PREDICTED", "Answers", "WindowQuery", "bucket_counts", "own",
           "own_last", "rebuild", "window_queries"]

#: The instant queries of a recovery (besides the ranges of :func:`window_queries`).
INSTANT = (EVENTS, GOOD, CAPACITY, PREDICTED, BAND_CONCURRENCY, BAND_QUANTILE)

#: How far back the last values of a stopped sidecar are looked for: one that stopped longer
#: ago starts from the fleet (and its windows start empty).
LOOKBACK = "1h"
#: ``(slo, model, band)`` of a series.
SeriesKey = tuple[str, ModelKey, str]


@dataclass(frozen=True, slots=True)
class WindowQuery:
    """The range query of one window length ``length`` (seconds): edges from ``start``
    to ``end`` every ``step`` (Unix seconds, seconds), ``first`` the absolute index of the
    first bucket."""

    length: float
    start: float
    end: float
    step: float
    first: int


@dataclass(slots=True)
class Answers:
    """Prometheus' answers (``data.result`` lists of the HTTP API) of a recovery as of
    ``now`` (Unix seconds): ``instant`` per metric of :data:`INSTANT`, ``ranges`` per
    (counter, window length) its matrix, ``fleet`` the :data:`FLEET_CAPACITY` vector."""

    now: float
    instant: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ranges: dict[tuple[str, float], list[dict[str, Any]]] = field(default_factory=dict)
    fleet: list[dict[str, Any]] = field(default_factory=list)


def own(metric: str, match: Mapping[str, str]) -> str:
    """The selector of this sidecar's own series of ``metric`` (range queries: at an edge
    after the sidecar stopped, Prometheus' staleness marker answers nothing, and the
    edge before is carried)."""
    return sel(metric, match)


def own_last(metric: str, match: Mapping[str, str]) -> str:
    """This sidecar's last value of ``metric`` within :data:`LOOKBACK` (instant queries:
    a plain selector answers nothing once the stopped sidecar's series were marked
    stale, which a range selection skips)."""
    return f"last_over_time({sel(metric, match)}[{LOOKBACK}])"


def window_queries(lengths: Sequence[float], buckets: int, now: float) -> list[WindowQuery]:
    """The range query of each window length (seconds) at ``now``: the edges of the
    buckets of its ring."""
    out = []
    for length in lengths:
        r = length / buckets
        c = math.floor(now / r)
        first = c - buckets + 1
        out.append(WindowQuery(float(length), first * r, c * r, r, first))
    return out


def _value(raw: object) -> float | None:
    """A sample value (Prometheus writes them as strings): finite and ≥ 0, else None."""
    try:
        v = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v >= 0 else None


def _model(metric: Mapping[str, Any]) -> tuple[str, ModelKey] | None:
    slo, model, backend = metric.get("slo"), metric.get("model"), metric.get("backend")
    version = metric.get("model_version", "")
    if not all(isinstance(x, str) and x for x in (slo, model, backend)) \
            or not isinstance(version, str):
        return None
    return str(slo), ModelKey(str(model), version, str(backend))


def _series(sample: Mapping[str, Any]) -> SeriesKey | None:
    metric = sample.get("metric")
    if not isinstance(metric, Mapping):
        return None
    at, band = _model(metric), metric.get("band")
    if at is None or not isinstance(band, str) or not band:
        return None
    return at[0], at[1], band


def _instant(vector: list[dict[str, Any]]) -> dict[SeriesKey, float]:
    out: dict[SeriesKey, float] = {}
    for s in vector:
        key, value = _series(s), s.get("value")
        if key is not None and isinstance(value, list) and len(value) == 2:
            v = _value(value[1])
            if v is not None:
                out[key] = v
    return out


def _per_state(vector: list[dict[str, Any]]) -> dict[tuple[str, ModelKey], float]:
    out: dict[tuple[str, ModelKey], float] = {}
    for s in vector:
        metric, value = s.get("metric"), s.get("value")
        at = _model(metric) if isinstance(metric, Mapping) else None
        if at is not None and isinstance(value, list) and len(value) == 2:
            v = _value(value[1])
            if v is not None and v > 0:
                out[at] = v
    return out


def bucket_counts(points: Mapping[int, float], now_value: float, q: WindowQuery,
                  buckets: int) -> list[tuple[int, float]]:
    """Each bucket's events of one counter: ``points`` the counter at bucket edges
    (absolute bucket index → value), ``now_value`` at ``now`` (see the module doc)."""
    out = []
    prev = 0.0
    value_at = [points.get(q.first + j) for j in range(buckets)] + [now_value]
    for j in range(buckets):
        start = value_at[j]
        prev = prev if start is None else start
        end = value_at[j + 1]
        end = prev if end is None else end
        delta = end - prev if end >= prev else end
        if delta > 0:
            out.append((q.first + j, delta))
    return out


def _edges(matrix: list[dict[str, Any]], step: float) -> dict[SeriesKey, dict[int, float]]:
    out: dict[SeriesKey, dict[int, float]] = {}
    for s in matrix:
        key, values = _series(s), s.get("values")
        if key is None or not isinstance(values, list):
            continue
        mine = out.setdefault(key, {})
        for p in values:
            if isinstance(p, list) and len(p) == 2 and isinstance(p[0], (int, float)):
                v = _value(p[1])
                if v is not None:
                    mine[round(p[0] / step)] = v
    return out


def rebuild(answers: Answers, lengths: Sequence[float], buckets: int,
            capacity_window: float) -> Recovered:
    """The recovery the answers give (``source`` ``prometheus``): ``lengths`` the
    engine's window lengths, ``buckets`` its sub-intervals per window, ``capacity_window``
    the SLO file's ``capacity.window`` (seconds)."""
    now = answers.now
    total_now = _instant(answers.instant.get(EVENTS, []))
    good_now = _instant(answers.instant.get(GOOD, []))
    rec = Recovered("prometheus", now, buckets, fleet=_per_state(answers.fleet))
    bands: dict[SeriesKey, BandRecord] = {
        key: BandRecord(min(good_now.get(key, 0.0), t), t) for key, t in total_now.items()}
    for q in window_queries(lengths, buckets, now):
        edges = {m: _edges(answers.ranges.get((m, q.length), []), q.step)
                 for m in (EVENTS, GOOD)}
        for key, br in bands.items():
            got: dict[int, list[float]] = {}
            for i, (m, cum) in enumerate(((GOOD, br.good), (EVENTS, br.total))):
                for k, d in bucket_counts(edges[m].get(key, {}), cum, q, buckets):
                    got.setdefault(k, [0.0, 0.0])[i] = d
            br.windows[q.length] = [(k, min(g, t), t) for k, (g, t) in sorted(got.items())]
    _evidence(bands, answers, capacity_window, buckets)
    capacity = _per_state(answers.instant.get(CAPACITY, []))
    predicted = _per_state(answers.instant.get(PREDICTED, []))
    # a state the sidecar exported (its capacity), with the bands it had events in
    for at, cap in capacity.items():
        rec.states[at] = StateRecord(cap, "", predicted.get(at))
    for (slo, mk, band), br in bands.items():
        st = rec.states.get((slo, mk))
        if st is not None:  # else not a state the sidecar exported whole
            st.bands[band] = br
    return rec


def _evidence(bands: dict[SeriesKey, BandRecord], answers: Answers,
              capacity_window: float, buckets: int) -> None:
    """Each band's latency evidence (see the module doc), from its capacity-window
    buckets (each weighted at its middle)."""
    now, tau, r = answers.now, capacity_window, capacity_window / buckets
    conc = _instant(answers.instant.get(BAND_CONCURRENCY, []))
    quantiles: dict[SeriesKey, tuple[float, float]] = {}
    for s in answers.instant.get(BAND_QUANTILE, []):
        key, value, metric = _series(s), s.get("value"), s.get("metric")
        if key is None or not isinstance(value, list) or len(value) != 2 \
                or not isinstance(metric, Mapping):
            continue
        v, q = _value(value[1]), _value(metric.get("objective_quantile"))
        if v is not None and q is not None and 0 < q < 1:
            quantiles[key] = (v, q)
    for key, br in bands.items():
        mean = conc.get(key)
        if key[2] == ALL or mean is None:
            continue
        count = sum(t * math.exp(min((k + 0.5) * r - now, 0.0) / tau)
                    for k, _g, t in br.windows.get(float(capacity_window), []))
        if count <= 0:
            continue
        hist: dict[float, float] = {}
        if key in quantiles:
            v, q = quantiles[key]
            hist = {v: q * count, math.inf: count}
        br.evidence = BandEvidence(now, count, mean * count, hist)
