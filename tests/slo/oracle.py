"""A test oracle: the SLO engine's accounting written model by model, SLO by SLO.

The engine accounts an update with array operations over every model of a target at
once (``fleetwatch.slo.account.columns``, ``column_book``, ``concurrency.estimate_columns``).
This module states the same rules one interval at a time, in plain Python, so that a
test can run both on the same snapshots and require equal outputs, floats exactly:

* :func:`intervals_of` reads a decoded snapshot's per-slot results back into one
  :class:`Interval` per model (its histograms as :class:`Hist`);
* :func:`interval_events` is an interval's ``(good, total)`` events for one SLO;
* :func:`estimate_of` is one interval's concurrency and estimator;
* :class:`ItemEngine` is the engine with its accounting replaced by a loop over the
  intervals that books each (SLO, model) with those functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from fleetwatch.slo.account.bookings import NO_BUCKETS, Bookings
from fleetwatch.slo.account.concurrency import (
    GAUGES,
    LITTLE,
    MIN_INTERVALS_PER_LATENCY,
    PREVIOUS,
    in_system_of,
)
from fleetwatch.slo.account.ledger import Bounds, threshold_error
from fleetwatch.slo.decode.decoder import DURATION, QUEUE, Decoded
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.sli import LATENCY_METRICS, SUMMARY_METRICS, matching_bound
from fleetwatch.slo.state import ModelKey, SLOModelState


@dataclass
class Hist:
    """Deltas of one histogram over one interval: ``count`` observations, ``sum`` of
    observed seconds, ``buckets`` upper bound ``le`` (seconds) → observations ≤ it."""

    count: float = 0.0
    sum: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)
    bounds: tuple[float, ...] = ()
    values: Sequence[float] = ()

    def bucket(self, le: float) -> float:
        """Observations ≤ ``le`` (0 when ``le`` is not a bound)."""
        return self.buckets.get(le, 0.0)


@dataclass
class Interval:
    """What one model did during one interval (deltas) and its gauges at the end (None:
    no such gauge)."""

    hists: dict[str, Hist] = field(default_factory=dict)
    good_requests: float = 0.0
    total_requests: float = 0.0
    running_now: float | None = None
    waiting_now: float | None = None
    quantiles: dict[tuple[str, str], float] = field(default_factory=dict)
    summary_counts: dict[str, float] = field(default_factory=dict)
    kv_usage: float | None = None


def intervals_of(decoded: Decoded) -> dict[ModelKey, Interval]:
    """Per model (in target, then plan order) its interval, read from the per-slot
    results."""
    got: dict[ModelKey, Interval] = {}
    for plan, _out, res in decoded.columns:
        def at(j: int, res: list[float] = res) -> float | None:
            return res[j] if j >= 0 else None

        for mk, f in plan.models.items():
            hists = {}
            for fam, h in f.hists().items():
                values = h.get(res)
                hists[fam] = Hist(at(h.count_slot) or 0.0, at(h.sum_slot) or 0.0,
                                  dict(zip(h.les, values, strict=True)), h.les, values)
            got[mk] = Interval(hists, at(f.good) or 0.0, at(f.total) or 0.0, at(f.running),
                               at(f.waiting), {k: res[j] for k, j in f.quantiles.items()},
                               {k: res[j] for k, j in f.summary_counts.items()}, at(f.kv))
    return got


def interval_events(st: SLOModelState, iv: Interval,
                    bounds: Bounds) -> tuple[float, float] | None:
    """``(good, total)`` events of an interval for one SLO and model, or None when the
    interval has no evidence for it; a latency threshold that is no bucket boundary
    sets ``st.error`` and yields None, a matching one clears it."""
    sli = st.slo.sli
    if sli.availability:
        return iv.good_requests, iv.total_requests
    if sli.latency:
        fam = LATENCY_METRICS[sli.latency.metric]
        h = iv.hists.get(fam)
        if h is None:
            return None
        thr = sli.latency.threshold_seconds
        match = matching_bound(bounds.get((fam, st.model), set()), thr)
        if match is None:
            st.error = threshold_error(fam, st.model, thr, bounds)
            return None
        st.error = None
        return h.bucket(match), h.count
    ts = sli.timeslice
    assert ts is not None
    if ts.quantile is None:
        h = iv.hists.get(LATENCY_METRICS[ts.metric])
        if h is None or h.count <= 0:
            return None
        return (1.0 if h.sum / h.count <= ts.threshold_seconds else 0.0), 1.0
    sfam = SUMMARY_METRICS[ts.metric]
    q = iv.quantiles.get((sfam, ts.quantile))
    if q is None or iv.summary_counts.get(sfam, 0.0) <= 0 or q != q:
        return None
    return (1.0 if q <= ts.threshold_seconds else 0.0), 1.0


def _little(count: float, total: float, dt: float) -> float | None:
    if count <= 0 or dt <= 0:
        return None
    mean_latency = total / count
    if dt < MIN_INTERVALS_PER_LATENCY * mean_latency:
        return None
    return max(total, 0.0) / dt


def estimate_of(running: float | None, waiting: float | None,
                duration: tuple[float, float] | None, prev_in_system: float | None,
                dt: float, previous: float | None = None) -> tuple[float, str] | None:
    """One interval's ``(concurrency, estimator)``: the running and waiting gauges at
    its end (None: absent), its request-duration histogram's ``(Δcount, Δsum)`` (None:
    none), running + waiting at its start, its length (seconds) and the model's
    previous concurrency; None without any usable measurement."""
    gauge_end = in_system_of(running, waiting)
    gauges = None
    if gauge_end is not None:
        start = gauge_end if prev_in_system is None else prev_in_system
        gauges = (start + gauge_end) / 2.0
    law = None if duration is None else _little(duration[0], duration[1], dt)
    if law is None and prev_in_system == 0.0 and gauge_end:
        gauges = gauge_end
    if law is not None and (gauges is None or law >= gauges):
        return law, LITTLE
    if (law is None and previous is not None and duration is not None
            and duration[0] > 0 and dt > 0 and (gauges is None or previous > gauges)):
        return previous, PREVIOUS
    if gauges is not None:
        return gauges, GAUGES
    if duration is not None and dt > 0 and duration[0] > 0:
        return max(duration[1], 0.0) / dt, LITTLE
    if duration is not None and dt > 0:
        return 0.0, LITTLE
    return None


def estimate(iv: Interval, prev_in_system: float | None, dt: float,
             previous: float | None = None) -> tuple[float, str] | None:
    """:func:`estimate_of` of an :class:`Interval`."""
    h = iv.hists.get(DURATION)
    return estimate_of(iv.running_now, iv.waiting_now,
                       None if h is None else (h.count, h.sum), prev_in_system, dt, previous)


class ItemEngine(SLOEngine):
    """The engine, accounting every update interval by interval and SLO by SLO."""

    def _account(self, ts: float, prev_ts: float | None, decoded: Decoded) -> None:
        intervals = intervals_of(decoded)
        if prev_ts is not None:
            booked = Bookings(one_run=True)
            bounds = self._decoder.bounds
            for mk, iv in intervals.items():
                dt = ts - self._tracked.seen.get(mk, prev_ts)
                if dt <= 0:
                    continue
                conc = self._gauges(mk, dt, iv)
                for entry in self._layout.entries(mk):
                    st = entry.state or self._accounts.state(entry, ts)
                    if st is None or entry.traces:
                        continue
                    err = st.error
                    ev = interval_events(st, iv, bounds)
                    if st.error != err:
                        self._marks.dirty.add(entry.key)
                    if ev is None or conc is None:
                        continue
                    h = iv.hists.get(entry.latency_family or "")
                    buckets = (h.bounds, h.values) if h is not None and h.count > 0 \
                        else NO_BUCKETS
                    self._traces.book_one(ts, st, (conc, ev[0], ev[1]), booked, self._new_row,
                                          self._marks.dirty, buckets)
            self._add_and_judge(ts, booked)
        for mk, iv in intervals.items():
            self._tracked.seen[mk] = ts
            now = in_system_of(iv.running_now, iv.waiting_now)
            if now is not None:
                self._tracked.in_system[mk] = now

    def _gauges(self, mk: ModelKey, dt: float, iv: Interval) -> float | None:
        """A model's interval into its gauges; its concurrency (None: not measured)."""
        g = self.gauges
        found = estimate(iv, self._tracked.in_system.get(mk), dt, g.concurrency.get(mk))
        conc = None
        if found is not None and math.isfinite(found[0]):
            conc, g.estimator[mk] = found
            g.concurrency[mk] = conc
        running, waiting = iv.running_now, iv.waiting_now
        if running:
            if running > g.running_max.get(mk, 0.0):
                g.running_max[mk] = running
            if waiting:
                g.batch_limit[mk] = g.running_max[mk]
        q = iv.hists.get(QUEUE)
        if q is not None and q.count > 0:
            g.queue_wait[mk] = q.sum / q.count
        if iv.kv_usage is not None:
            g.kv_usage[mk] = iv.kv_usage
        return conc
