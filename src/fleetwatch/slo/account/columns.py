"""The engine's accounting columns: one target's interval events for every SLO and model.

The engine reads the decoder's per-slot results (:class:`~fleetwatch.slo.decode.decoder.Decoded`
``columns``) directly: a :class:`PlanColumns`, compiled once per decoding
:class:`~fleetwatch.slo.decode.plan.Plan` (and per version of the bucket bounds seen), gives per SLO
the events of every model of the target as arrays (:meth:`PlanColumns.events`), and per
model the slots of its gauges and histograms.

Per SLI kind an interval yields Δgood and Δtotal events: *availability*, successful vs
all requests; *latency*, the histogram's bucket ``le = threshold`` vs its ``_count`` (a
threshold that is no bucket boundary seen makes the SLO ``misconfigured``); *time slice*,
one event, good when the interval's mean (histogram ``_sum ÷ _count``) or its summary
quantile is ≤ the threshold. An interval without evidence for an SLO (no such histogram,
no observation, a quantile that is NaN) books nothing.

Units: events in counts, durations in seconds, as :mod:`fleetwatch.slo.decode.decoder`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fleetwatch.slo.account.ledger import Bounds, threshold_error
from fleetwatch.slo.arrays import BoolArray, FloatArray, IntArray
from fleetwatch.slo.decode.decoder import DURATION, QUEUE
from fleetwatch.slo.decode.plan import HistSlots, Plan
from fleetwatch.slo.sli import LATENCY_METRICS, SUMMARY_METRICS, matching_bound
from fleetwatch.slo.spec import SLOSpec
from fleetwatch.slo.state import ModelKey

#: A latency SLI's outcome per model: no histogram (no events, error unchanged), a
#: threshold that is no bucket boundary (no events, the error set), events (cleared).
NO_HIST, NO_MATCH, MATCH = 0, 1, 2


class SLOEvents:
    """One SLO's events for every model of a target (arrays, the plan's model order):
    ``bookable[i]`` whether model ``i``'s interval has events that are accounted (some
    events, finite, good ≤ total after capping), ``goods``/``totals`` its events;
    for a latency SLI ``codes`` (:data:`NO_HIST`, :data:`NO_MATCH`, :data:`MATCH`) and
    ``errors`` (the ``misconfigured`` explanation of a :data:`NO_MATCH`), else None."""

    __slots__ = ("bookable", "codes", "errors", "goods", "totals")

    def __init__(self, bookable: BoolArray, goods: FloatArray, totals: FloatArray,
                 codes: list[int] | None = None,
                 errors: list[str | None] | None = None) -> None:
        self.bookable, self.goods, self.totals = bookable, goods, totals
        self.codes, self.errors = codes, errors


class _Kind:
    """How one SLO's events are read from the per-slot results (one compiled SLO):
    ``good``/``count`` per model the slots of its good and total events (for a time
    slice the slots of the mean's sum and count, or of the quantile and the summary's
    count), ``ok`` whether the model has the evidence, ``codes``/``errors`` a latency
    SLI's outcome per model (:data:`NO_HIST`, :data:`NO_MATCH`, :data:`MATCH`)."""

    def __init__(self, slo: SLOSpec, view: PlanColumns, bounds: Bounds) -> None:
        sli = slo.sli
        z = view.zero
        self.codes: list[int] = []
        self.errors: list[str | None] = []
        self.threshold = 0.0
        self.ok: BoolArray = np.ones(len(view.models), dtype=bool)
        self.good: IntArray = view.good
        self.count: IntArray = view.total
        if sli.latency is not None:
            self.kind = "latency"
            self._latency(LATENCY_METRICS[sli.latency.metric],
                          sli.latency.threshold_seconds, view, bounds)
        elif sli.timeslice is not None and sli.timeslice.quantile is not None:
            ts = sli.timeslice
            self.kind = "quantile"
            self.threshold = ts.threshold_seconds
            sfam, label = SUMMARY_METRICS[ts.metric], sli.timeslice.quantile
            qs = [f.quantiles.get((sfam, label), -1) for f in view.fields]
            cs = [f.summary_counts.get(sfam, -1) for f in view.fields]
            self.ok = np.asarray([q >= 0 for q in qs], dtype=bool)
            self.good = np.asarray([q if q >= 0 else z for q in qs], dtype=np.int64)
            self.count = np.asarray([c if c >= 0 else z for c in cs], dtype=np.int64)
        elif sli.timeslice is not None:
            ts = sli.timeslice
            self.kind = "timeslice"
            self.threshold = ts.threshold_seconds
            hists = view.hist_of(LATENCY_METRICS[ts.metric])
            self.ok = np.asarray([h is not None for h in hists], dtype=bool)
            self.count = np.asarray([z if h is None or h.count_slot < 0 else h.count_slot
                                     for h in hists], dtype=np.int64)
            self.good = np.asarray([z if h is None or h.sum_slot < 0 else h.sum_slot
                                    for h in hists], dtype=np.int64)  # the sum's slot
        else:
            self.kind = "availability"

    def _latency(self, fam: str, thr: float, view: PlanColumns, bounds: Bounds) -> None:
        """A latency SLI: per model the slots of its count and of the bucket at the
        threshold, and its outcome (a threshold that is no bound seen: the error)."""
        z = view.zero
        count, match = [], []
        for mk, hist in zip(view.models, view.hist_of(fam), strict=True):
            if hist is None:
                self.codes.append(NO_HIST)
                self.errors.append(None)
                count.append(z)
                match.append(z)
                continue
            count.append(hist.count_slot if hist.count_slot >= 0 else z)
            le = matching_bound(bounds.get((fam, mk), set()), thr)
            if le is None:
                self.codes.append(NO_MATCH)
                self.errors.append(threshold_error(fam, mk, thr, bounds))
                match.append(z)
            else:
                self.codes.append(MATCH)
                self.errors.append(None)
                k = hist.position.get(le)  # a bound seen before but not in this layout: 0
                match.append(z if k is None else hist.slots[k])
        self.count = np.asarray(count, dtype=np.int64)
        self.good = np.asarray(match, dtype=np.int64)
        self.ok = np.asarray(self.codes, dtype=np.int64) == MATCH

    def events(self, ext: FloatArray) -> SLOEvents:
        """The events of every model from ``ext`` (the per-slot results and a 0.0)."""
        total = ext[self.count]
        if self.kind == "timeslice":  # one event, good when the mean ≤ the threshold
            with np.errstate(divide="ignore", invalid="ignore"):
                ok = self.ok & ~(total <= 0)  # a NaN count is kept: only ≤ 0 has none
                mean = ext[self.good] / total
            good = np.where(mean <= self.threshold, 1.0, 0.0)
            total = np.ones(len(total))
        elif self.kind == "quantile":  # one event, good when the quantile ≤ the threshold
            q = ext[self.good]
            with np.errstate(invalid="ignore"):
                ok = self.ok & ~(total <= 0) & (q == q)
                good = np.where(q <= self.threshold, 1.0, 0.0)
            total = np.ones(len(total))
        else:
            good = ext[self.good]
            ok = self.ok
        with np.errstate(invalid="ignore"):
            bookable = ok & (total > 0.0) & (total < math.inf) & (good >= 0.0) \
                & (good < math.inf)
        good = np.where(total < good, total, good)  # min(good, total)
        if self.kind == "latency":
            return SLOEvents(bookable, good, total, self.codes, self.errors)
        return SLOEvents(bookable, good, total)


class PlanColumns:
    """The column view of one :class:`~fleetwatch.slo.decode.plan.Plan` for the engine's SLOs.

    ``models`` (the plan's order) and per model its slots (−1: none): ``running``,
    ``waiting``, ``kv``; ``duration``/``queue`` the request-duration and queue
    histograms' :class:`~fleetwatch.slo.decode.plan.HistSlots` (None: no such histogram); ``zero``
    the slot of the 0.0 appended to the results; ``kinds`` per SLO (the engine's order) its
    compiled events (None: a traces SLO). ``version``: the decoder's ``bounds_version``
    it was compiled for."""

    def __init__(self, plan: Plan, slos: Sequence[SLOSpec], bounds: Bounds,
                 version: int) -> None:
        self.plan, self.version = plan, version
        self.models: list[ModelKey] = list(plan.models)
        self.fields = fields = list(plan.models.values())
        self.zero = z = len(plan.fields)
        self.good: IntArray = np.asarray([f.good if f.good >= 0 else z for f in fields],
                                         dtype=np.int64)
        self.total: IntArray = np.asarray([f.total if f.total >= 0 else z for f in fields],
                                          dtype=np.int64)
        self.running = [f.running for f in fields]
        self.waiting = [f.waiting for f in fields]
        self.kv = [f.kv for f in fields]
        self._hists = [f.hists() for f in fields]
        self.duration = [h.get(DURATION) for h in self._hists]
        self.queue = [h.get(QUEUE) for h in self._hists]
        self.kinds: list[_Kind | None] = [
            _Kind(slo, self, bounds) if slo.sli.source != "traces" else None for slo in slos]

    def hist_of(self, fam: str) -> list[HistSlots | None]:
        """Per model its histogram ``fam``'s slots (None: no such histogram)."""
        return [h.get(fam) for h in self._hists]

    def events(self, out: FloatArray) -> list[SLOEvents | None]:
        """Per SLO (the engine's order; None: a traces SLO) its events for every model
        from the per-slot results ``out``."""
        ext = np.append(out, 0.0)
        return [None if k is None else k.events(ext) for k in self.kinds]
