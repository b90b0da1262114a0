"""The engine's column path: one target's interval events for every SLO and model at once.

When every target of a snapshot decoded in one vectorized pass
(:class:`~fleetwatch.slo.decode.Decoded` ``columns``), the engine reads the decoder's
per-slot results directly instead of a :class:`~fleetwatch.slo.decode.Interval` per
model: a :class:`PlanColumns`, compiled once per decoding :class:`~.series_plan.Plan`
(and per version of the bucket bounds seen), gives per SLO the events of every model of
the target as arrays (:meth:`PlanColumns.events`, the same numbers as
:func:`fleetwatch.slo.account.interval_events`), and per model the slots of its gauges
and histograms, read by the engine's per-model loop.

Only the SLI kinds an interval of the vectorized pass can answer are compiled here:
availability, latency and time slices on a histogram's mean (:func:`supported`); a time
slice on a summary quantile takes the interval path.

Units: events in counts, durations in seconds, as :mod:`.decode`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from fleetwatch.slo.account import Bounds, threshold_error
from fleetwatch.slo.decode import DURATION, QUEUE
from fleetwatch.slo.series_plan import Plan
from fleetwatch.slo.sli import LATENCY_METRICS, matching_bound
from fleetwatch.slo.spec import SLOSpec
from fleetwatch.slo.state import ModelKey

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: A latency SLI's outcome per model: no histogram (no events, error unchanged), a
#: threshold that is no bucket boundary (no events, the error set), events (cleared).
NO_HIST, NO_MATCH, MATCH = 0, 1, 2


def supported(slo: SLOSpec) -> bool:
    """Whether :class:`PlanColumns` answers ``slo``'s events (not a time slice on a
    summary quantile)."""
    ts = slo.sli.timeslice
    return ts is None or ts.quantile is None


class SLOEvents:
    """One SLO's events for every model of a target (arrays, the plan's model order):
    ``bookable[i]`` whether model ``i``'s interval has events that are accounted (some
    events, finite, good ≤ total after capping), ``goods``/``totals`` its events;
    for a latency SLI ``codes`` (:data:`NO_HIST`, :data:`NO_MATCH`, :data:`MATCH`) and
    ``errors`` (the ``misconfigured`` explanation of a :data:`NO_MATCH`), else None."""

    __slots__ = ("bookable", "codes", "errors", "goods", "totals")

    def __init__(self, bookable: npt.NDArray[np.bool_], goods: FloatArray, totals: FloatArray,
                 codes: list[int] | None = None,
                 errors: list[str | None] | None = None) -> None:
        self.bookable, self.goods, self.totals = bookable, goods, totals
        self.codes, self.errors = codes, errors


class _Kind:
    """How one SLO's events are read from the per-slot results (one compiled SLO)."""

    def __init__(self, slo: SLOSpec, view: PlanColumns, bounds: Bounds) -> None:
        sli = slo.sli
        self.kind = "availability" if sli.availability else "latency" if sli.latency \
            else "timeslice"
        z = view.zero
        self.codes: list[int] = []
        self.errors: list[str | None] = []
        self.threshold = 0.0
        if sli.latency is not None:
            fam = LATENCY_METRICS[sli.latency.metric]
            thr = self.threshold = sli.latency.threshold_seconds
            count, match = [], []
            for mk, hist in zip(view.models, view.hist_of(fam), strict=True):
                if hist is None:
                    self.codes.append(NO_HIST)
                    self.errors.append(None)
                    count.append(z)
                    match.append(z)
                    continue
                c, _s, _les, index, slots = hist
                count.append(c if c >= 0 else z)
                le = matching_bound(bounds.get((fam, mk), set()), thr)
                if le is None:
                    self.codes.append(NO_MATCH)
                    self.errors.append(threshold_error(fam, mk, thr, bounds))
                    match.append(z)
                else:
                    self.codes.append(MATCH)
                    self.errors.append(None)
                    k = index.get(le)  # a bound seen before but not in this layout: 0
                    match.append(z if k is None else slots[k])
            self.count: IntArray = np.asarray(count, dtype=np.int64)
            self.good: IntArray = np.asarray(match, dtype=np.int64)
            self.ok = np.asarray(self.codes, dtype=np.int64) == MATCH
        elif sli.timeslice is not None:
            ts = sli.timeslice
            self.threshold = ts.threshold_seconds
            hists = view.hist_of(LATENCY_METRICS[ts.metric])
            self.ok = np.asarray([h is not None for h in hists], dtype=bool)
            self.count = np.asarray([z if h is None or h[0] < 0 else h[0] for h in hists],
                                    dtype=np.int64)
            self.good = np.asarray([z if h is None or h[1] < 0 else h[1] for h in hists],
                                   dtype=np.int64)  # the sum's slot
        else:
            self.good, self.count = view.good, view.total

    def events(self, ext: FloatArray) -> SLOEvents:
        """The events of every model from ``ext`` (the per-slot results and a 0.0)."""
        total = ext[self.count]
        if self.kind == "timeslice":  # one event, good when the mean ≤ the threshold
            with np.errstate(divide="ignore", invalid="ignore"):
                ok = self.ok & ~(total <= 0)  # a NaN count is kept, as h.count <= 0
                mean = ext[self.good] / total
            good = np.where(mean <= self.threshold, 1.0, 0.0)
            total = np.ones(len(total))
        else:
            good = ext[self.good]
            ok = self.ok if self.kind == "latency" else np.ones(len(total), dtype=bool)
        with np.errstate(invalid="ignore"):
            bookable = ok & (total > 0.0) & (total < math.inf) & (good >= 0.0) \
                & (good < math.inf)
        good = np.where(total < good, total, good)  # min(good, total)
        if self.kind == "latency":
            return SLOEvents(bookable, good, total, self.codes, self.errors)
        return SLOEvents(bookable, good, total)


#: Per model, one histogram family's ``(count slot, sum slot, bounds, bound → its
#: position, bucket slots)``, None without that histogram (slots −1: no such series).
HistSlots = tuple[int, int, tuple[float, ...], dict[float, int], Sequence[int]]


class PlanColumns:
    """The column view of one :class:`~.series_plan.Plan` for the engine's SLOs.

    ``models`` (the plan's order) and per model its slots (−1: none): ``running``,
    ``waiting``, ``kv``; ``duration``/``queue`` the request-duration and queue
    histograms' ``(count, sum)`` slots (None: no such histogram); ``buckets`` per
    histogram family the models' ``(bounds, bucket values from the results)`` (None:
    no such histogram); ``zero`` the slot of the 0.0 appended to the results.
    ``version``: the decoder's ``bounds_version`` it was compiled for."""

    def __init__(self, plan: Plan, slos: Sequence[SLOSpec], bounds: Bounds,
                 version: int) -> None:
        self.plan, self.version = plan, version
        self.models: list[ModelKey] = list(plan.models)
        fields = list(plan.models.values())
        self.zero = z = len(plan.fields)
        self.good: IntArray = np.asarray([f.good if f.good >= 0 else z for f in fields],
                                         dtype=np.int64)
        self.total: IntArray = np.asarray([f.total if f.total >= 0 else z for f in fields],
                                          dtype=np.int64)
        self.running = [f.running for f in fields]
        self.waiting = [f.waiting for f in fields]
        self.kv = [f.kv for f in fields]
        self._hists: list[dict[str, HistSlots]] = [
            {fam: (c, s, les, index, f.hists[fam][3]) for fam, c, s, les, index, _get
             in f.getters()} for f in fields]
        self._getters: list[dict[str, tuple[tuple[float, ...],
                                            Callable[[list[float]], Any]]]] = [
            {fam: (les, get) for fam, _c, _s, les, _index, get in f.getters()}
            for f in fields]
        self.duration = [_count_sum(h.get(DURATION)) for h in self._hists]
        self.queue = [_count_sum(h.get(QUEUE)) for h in self._hists]
        self.kinds: list[_Kind | None] = [
            _Kind(slo, self, bounds) if slo.sli.source != "traces" else None for slo in slos]

    def hist_of(self, fam: str) -> list[HistSlots | None]:
        """Per model its histogram ``fam``'s slots (None: no such histogram)."""
        return [h.get(fam) for h in self._hists]

    def buckets_of(self, fam: str) -> list[tuple[tuple[float, ...],
                                                 Callable[[list[float]], Any]] | None]:
        """Per model its histogram ``fam``'s bounds and the getter of its bucket values
        from the per-slot results (None: no such histogram)."""
        return [g.get(fam) for g in self._getters]

    def events(self, out: FloatArray) -> list[SLOEvents | None]:
        """Per SLO (the engine's order; None: a traces SLO) its events for every model
        from the per-slot results ``out``."""
        ext = np.append(out, 0.0)
        return [None if k is None else k.events(ext) for k in self.kinds]


def _count_sum(h: HistSlots | None) -> tuple[int, int] | None:
    return None if h is None else (h[0], h[1])
