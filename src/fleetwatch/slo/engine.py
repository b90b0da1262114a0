"""The SLO engine: concurrency-conditioned events, burn rates, state, capacity, signals.

Fed every sidecar snapshot (typed, timestamped: see
:class:`~fleetwatch.exporters.snapshot.Snapshot`), per SLO and model it:

1. **decodes** the interval since the last snapshot into per-model deltas
   (:mod:`.decode`: reset-aware, a target down keeps its counters for
   :attr:`CARRY_SECONDS`);
2. **accounts** the interval's events by the concurrency band it ran at into sliding
   windows and computes burn rates (:mod:`.account`);
3. **judges** ok / regression / overload / no_data / misconfigured (:mod:`.judge`);
4. learns **capacity at SLO** with hysteresis (:mod:`.capacity`);
5. derives **autoscaling signals** per model (:mod:`.autoscaling`);
6. answers :meth:`status` (``/slo``), :meth:`autoscaling` (``/autoscaling``) and
   :meth:`iter_metrics` (``fleetwatch_slo_*``) (:mod:`.status`).

This module only wires those stages together.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.labels.registry import Registry
from fleetwatch.slo import autoscaling as _autoscaling
from fleetwatch.slo import judge as _judge
from fleetwatch.slo import status as _status
from fleetwatch.slo.account import (
    Ledger,
    ModelGauges,
    Selection,
    interval_concurrency,
    interval_events,
)
from fleetwatch.slo.autoscaling import ModelSignal
from fleetwatch.slo.bands import band_label, band_of
from fleetwatch.slo.capacity import update_capacity
from fleetwatch.slo.decode import QUEUE, Decoder, Interval, needed_families
from fleetwatch.slo.spec import SLOFile, SLOSpec
from fleetwatch.slo.state import ALL, STATES, ModelKey, SLOModelState
from fleetwatch.slo.status import Sample, SLOStatus
from fleetwatch.slo.windows import FloatArray

__all__ = ["ALL", "STATES", "ModelKey", "SLOEngine", "SLOModelState"]


class SLOEngine:
    """Runs the SLOs of an :class:`~fleetwatch.slo.spec.SLOFile` over successive
    snapshots.

    Subscribe :meth:`update` to the scraper; read :meth:`status` and :meth:`autoscaling`
    (JSON-ready), or expose :meth:`iter_metrics` through
    :class:`fleetwatch.slo.export.SLOCollector`. ``buckets``: sub-intervals per sliding
    window (memory and resolution, see :mod:`.windows`).

    Attributes read by callers: ``states`` ((SLO name, model) → :class:`SLOModelState`),
    ``concurrency``/``queue_wait``/``kv_usage`` (model → requests / seconds / ratio),
    ``gpu_memory_ratio``, ``last_update`` (Unix seconds of the last accounted snapshot),
    ``update_seconds`` (how long it took), ``windows``, ``window_lengths`` (seconds).
    """

    CARRY_SECONDS = Decoder.CARRY_SECONDS

    def __init__(self, slos: SLOFile, registry: Registry | None = None,
                 buckets: int = 60) -> None:
        self.spec = slos
        self.registry = registry or Registry()
        self.ledger = Ledger(slos, buckets)
        self.window_lengths = self.ledger.window_lengths
        self.windows = self.ledger.windows
        self.states: dict[tuple[str, ModelKey], SLOModelState] = {}
        self.gauges = ModelGauges()
        self.concurrency = self.gauges.concurrency
        self.queue_wait = self.gauges.queue_wait
        self.kv_usage = self.gauges.kv_usage
        self.last_update: float | None = None
        self.update_seconds = 0.0
        self._decoder = Decoder(needed_families(slos))
        self._decoder.CARRY_SECONDS = self.CARRY_SECONDS
        self._selects = Selection(self.registry)
        self._prev_ts: float | None = None
        self._model_seen: dict[ModelKey, float] = {}  # when each model last had data
        self._prev_running: dict[ModelKey, float] = {}

    @property
    def gpu_memory_ratio(self) -> float | None:
        """The fleet's GPU memory used ÷ total at the last snapshot (0–1; None without
        GPU series)."""
        return self.gauges.gpu_memory_ratio

    def update(self, snap: Snapshot) -> None:
        """Account one snapshot (call for every scrape, in order; a snapshot not newer
        than the last one is ignored)."""
        t0 = time.perf_counter()
        ts = snap.timestamp
        if self._prev_ts is not None and ts <= self._prev_ts:
            return
        decoded = self._decoder.decode(snap)
        self.gauges.gpu_memory_ratio = decoded.gpu_memory_ratio
        prev_ts, self._prev_ts = self._prev_ts, ts
        if prev_ts is not None:
            self._account(ts, prev_ts, decoded.intervals)
        for mk, iv in decoded.intervals.items():
            self._model_seen[mk] = ts
            if iv.running_now is not None:
                self._prev_running[mk] = iv.running_now
        self.last_update = ts
        self.update_seconds = time.perf_counter() - t0

    def _account(self, ts: float, prev_ts: float,
                 intervals: dict[ModelKey, Interval]) -> None:
        rows: list[int] = []
        goods: list[float] = []
        totals: list[float] = []
        gauges, bounds = self.gauges, self._decoder.bounds
        for mk, iv in intervals.items():
            # the model's own interval: since it last had data (a target down stretches it)
            dt = ts - self._model_seen.get(mk, prev_ts)
            if dt <= 0:
                continue
            conc = interval_concurrency(iv, self._prev_running.get(mk), dt)
            if conc is not None:
                gauges.concurrency[mk] = conc
            q = iv.hists.get(QUEUE)
            if q is not None and q.count > 0:
                gauges.queue_wait[mk] = q.sum / q.count
            if iv.kv_usage is not None:
                gauges.kv_usage[mk] = iv.kv_usage
            for slo in self.spec.slos:
                if not self._selects(slo, mk):
                    continue
                st = self._state(slo, mk)
                if slo.sli.source == "traces":
                    continue  # judged per request: add_events
                ev = interval_events(st, iv, bounds)
                if ev is None or conc is None:
                    continue
                self._book(st, conc, ev[0], ev[1], rows, goods, totals)
        self._add_and_judge(ts, rows, goods, totals)

    def _state(self, slo: SLOSpec, mk: ModelKey) -> SLOModelState:
        st = self.states.get((slo.name, mk))
        if st is None:
            st = self.states[(slo.name, mk)] = SLOModelState(
                slo, mk, capacity=slo.concurrency.envelope)
        return st

    def _book(self, st: SLOModelState, conc: float, good: float, total: float,
              rows: list[int], goods: list[float], totals: list[float]) -> None:
        """Events of one SLO and model into the band of ``conc`` and ``all``."""
        if total <= 0:
            return
        good = min(good, total)
        band = band_label(band_of(conc, st.slo.concurrency.bands))
        st.last_band = band
        for b in (band, ALL):
            st.events[b] += total
            st.good[b] += good
            rows.append(self.ledger.row(st, b))
            goods.append(good)
            totals.append(total)

    def add_events(self, events: Iterable[tuple[str, ModelKey, float, float, float, float]],
                   ) -> None:
        """Account already-judged events of ``sli.source: traces`` SLOs — ``(SLO name,
        model key, Unix seconds, concurrency, good, total)`` — each into the band of its
        concurrency like an interval's metric events, then judge. An unknown SLO name or
        one not selecting the model is skipped; times before the last accounted one
        count at it (the windows do not go back)."""
        by_name = {s.name: s for s in self.spec.slos}
        rows: list[int] = []
        goods: list[float] = []
        totals: list[float] = []
        ts = self.last_update or 0.0
        for name, mk, t, conc, good, total in events:
            slo = by_name.get(name)
            if slo is None or slo.sli.source != "traces" or not self._selects(slo, mk):
                continue
            self._book(self._state(slo, mk), conc, good, total, rows, goods, totals)
            ts = max(ts, t)
        if rows:
            self._add_and_judge(ts, rows, goods, totals)

    def _add_and_judge(self, ts: float, rows: list[int], goods: list[float],
                       totals: list[float]) -> None:
        ledger = self.ledger
        ledger.add(ts, rows, goods, totals)
        burning = ledger.burning.tolist()
        cap_cfg = self.spec.capacity
        cap_total = ledger.window_totals(cap_cfg.window)
        cap_burn = ledger.window_burn(cap_cfg.window)
        for st in self.states.values():
            _judge.judge(st, burning)
            if st.state != "misconfigured" and st.state != "no_data":
                update_capacity(st, cap_cfg, cap_total, cap_burn)

    # -- outputs (see the modules named) -------------------------------------------
    def window_sums(self, st: SLOModelState, band: str, window: float,
                    sums: FloatArray | None = None) -> tuple[float, float]:
        """``(good, total)`` of a band (or ``"all"``) over a window length (seconds)."""
        return self.ledger.window_sums(st, band, window, sums)

    def burn(self, st: SLOModelState, band: str, window: float,
             sums: FloatArray | None = None) -> float:
        """Burn rate of a band (or ``"all"``) over a window length (seconds), as of the
        last update; NaN without events. ``sums`` is accepted for compatibility."""
        return self.ledger.burn_rate(st, band, window)

    def model_capacity(self, mk: ModelKey) -> float | None:
        """Capacity at SLO of a model: the smallest over its SLOs (None without SLOs)."""
        return _autoscaling.model_capacity(self.states, mk)

    def model_state(self, mk: ModelKey) -> str:
        """Worst state over the model's SLOs (regression > overload > misconfigured > …)."""
        return _autoscaling.model_state(self.states, mk)

    def autoscaling(self) -> list[ModelSignal]:
        """One object per model (KEDA metrics-api shape, see
        :class:`~fleetwatch.slo.autoscaling.ModelSignal`): ``signal`` (the largest
        component), ``components`` (ratios), ``capacity``, ``concurrency``, ``state``."""
        return _autoscaling.signals(self.spec.autoscaling, self.states, self.gauges)

    def status(self) -> list[SLOStatus]:
        """Per SLO and model (see :class:`~fleetwatch.slo.status.SLOStatus`): state,
        budget remaining, burn rates by window and band, capacity, the explanation of
        the state (JSON-ready)."""
        return _status.status(self.ledger, self.states, self.gauges)

    def explain(self, st: SLOModelState) -> str:
        """A sentence saying why the state is what it is."""
        return _judge.explain(st)

    def iter_metrics(self) -> Iterator[Sample]:
        """``(family, labels, value)`` for every exported series (see :mod:`.export`)."""
        return _status.iter_metrics(self.ledger, self.states, self.autoscaling())
