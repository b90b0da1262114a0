"""The SLO engine: concurrency-conditioned events, burn rates, state, capacity, signals.

Fed every sidecar snapshot (typed, timestamped: see
:class:`~fleetwatch.exporters.snapshot.Snapshot`), per SLO and model it runs the stages
of :mod:`fleetwatch.slo` (each subpackage's doc defines its terms):

1. **decodes** the interval since the last snapshot into per-slot deltas
   (:mod:`fleetwatch.slo.decode`: reset-aware, a target down keeps its counters for
   :attr:`SLOEngine.CARRY_SECONDS`);
2. **accounts** the interval's events of every (SLO, model) of a target at once, by the
   concurrency band it ran at, into sliding windows, and computes burn rates
   (:mod:`fleetwatch.slo.account`);
3. **judges** ok / regression / overload / no_data / misconfigured, and with a
   placement re-judges a regression as interference or gpu_degraded
   (:mod:`fleetwatch.slo.judge`);
4. learns **capacity at SLO** with hysteresis (:mod:`fleetwatch.slo.capacity`);
5. answers :meth:`~SLOEngine.status` (``/slo``), :meth:`~SLOEngine.autoscaling`
   (``/autoscaling``) and :meth:`~SLOEngine.iter_metrics` (``fleetwatch_slo_*``)
   (:mod:`fleetwatch.slo.outputs`).

This module wires the stages together and keeps the states they share across updates
(the per-model SLO entries and column views: :mod:`fleetwatch.slo.account.layout`; the
states to judge: :mod:`fleetwatch.slo.judge.marks`). It bounds the state (the SLO file's
``limits``): a model without data for ``forget_model_after`` seconds is forgotten
(states, window rows, gauges), an SLO tracks at most ``max_models_per_slo`` models (a
further one is counted in ``fleetwatch_slo_models_refused_total{slo}`` and logged, at
most once a minute per SLO:
``SLO S tracks N models (limits.max_models_per_slo): not tracking model M …``). Past
:attr:`SLOEngine.MAX_MODELS` models with data (label churn: names that come once and
never again), the models seen least recently are forgotten at once rather than after
``forget_model_after``, counted in ``fleetwatch_slo_models_evicted_total`` and logged at
most once a minute (``SLO engine holds N models: forgot K seen least recently …``).
Events that are none or not finite are never booked.

Only what changed is recomputed: the judge runs for the states whose judged inputs
changed (new, first events, an error set or cleared, a row whose burning flag flipped;
:meth:`SLOEngine.mark_changed` adds one), capacity for all states at once; a target's
columns are compiled again only when a state or a row is made or forgotten, and the
cumulative events per band are the ledger's per-row counts (a state's ``events``/``good``
read them: :class:`~.state.RowCounts`).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterable, Iterator

import numpy as np

from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.labels.placement import Placement
from fleetwatch.labels.registry import Registry
from fleetwatch.slo.account.book import Gathered, ModelSLO, bookings
from fleetwatch.slo.account.bookings import Bookings
from fleetwatch.slo.account.columns import PlanColumns
from fleetwatch.slo.account.concurrency import in_system_of
from fleetwatch.slo.account.gauges import ModelGauges, update_gauges
from fleetwatch.slo.account.layout import Layout
from fleetwatch.slo.account.ledger import Ledger, Selection
from fleetwatch.slo.account.limits import Held, ModelCap, ModelLimit
from fleetwatch.slo.account.trace_book import TraceBook
from fleetwatch.slo.arrays import FloatArray
from fleetwatch.slo.capacity.evidence import BandLatency, BandLatencyStore
from fleetwatch.slo.capacity.rules import BandRows, update_capacities
from fleetwatch.slo.decode.decoder import DURATION, Decoded, Decoder, needed_families
from fleetwatch.slo.decode.plan import ACTIVE_GROUP
from fleetwatch.slo.judge import states as _judge
from fleetwatch.slo.judge.freshness import Freshness
from fleetwatch.slo.judge.interference import Attributor
from fleetwatch.slo.judge.marks import Marks
from fleetwatch.slo.judge.states import judge_marked
from fleetwatch.slo.outputs import autoscaling as _autoscaling
from fleetwatch.slo.outputs import status as _status
from fleetwatch.slo.outputs.autoscaling import ModelSignal
from fleetwatch.slo.outputs.status import Sample, SLOStatus
from fleetwatch.slo.recover import records as _recover
from fleetwatch.slo.spec import SLOFile, SLOSpec
from fleetwatch.slo.state import ALL, STATES, ModelKey, RowCounts, SLOModelState, TraceEvent

__all__ = ["ALL", "STATES", "ModelKey", "SLOEngine", "SLOModelState"]



class SLOEngine:
    """Runs the SLOs of an :class:`~fleetwatch.slo.spec.SLOFile` over successive
    snapshots.

    Subscribe :meth:`update` to the scraper; read :meth:`status` and :meth:`autoscaling`
    (JSON-ready), or expose :meth:`iter_metrics` through
    :class:`fleetwatch.slo.outputs.export.SLOCollector`. ``buckets``: sub-intervals per sliding
    window (memory and resolution, see :mod:`fleetwatch.slo.account.windows`). ``placement``: which
    models share which GPU (the sidecar's ``placement:``), for co-location interference and GPU
    health (:mod:`fleetwatch.slo.judge.interference`; without it a burn inside the envelope is a
    regression).

    Attributes read by callers: ``states`` ((SLO name, model) → :class:`SLOModelState`),
    ``concurrency``/``queue_wait``/``kv_usage`` (model → requests / seconds / ratio),
    ``gpu_memory_ratio``, ``last_update`` (Unix seconds of the last accounted snapshot),
    ``update_seconds`` (how long it took), ``windows``, ``window_lengths`` (seconds),
    ``band_latency`` (every band's latency evidence:
    :class:`~fleetwatch.slo.capacity.evidence.BandLatencyStore`, a row per band's window row).
    """

    CARRY_SECONDS = Decoder.CARRY_SECONDS
    #: Models with data the engine holds at most (its per-model gauges, entries, SLO
    #: states); never fewer than one snapshot's models.
    MAX_MODELS = 10_000

    def __init__(self, slos: SLOFile, registry: Registry | None = None,
                 buckets: int = 60, placement: Placement | None = None) -> None:
        self.spec = slos
        self.attribution = Attributor(slos, placement)
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
        self._layout = Layout(slos.slos, self._selects)
        self._traces = TraceBook(self._layout)
        self._marks = Marks()
        self._prev_ts: float | None = None
        self._model_seen: dict[ModelKey, float] = {}  # when each model last had data
        self._prev_in_system: dict[ModelKey, float] = {}
        #: model name → last measured cold start (seconds), set by the sidecar
        self.cold_starts: dict[str, float] = {}
        self._signal_holds: dict[ModelKey, _autoscaling.SignalHold] = {}
        self._limit = ModelLimit(slos.limits.max_models_per_slo)
        self._cap = ModelCap(self.MAX_MODELS)  # the models_evicted counter
        #: SLO name → models refused by limits.max_models_per_slo (exported counter).
        self.models_refused = self._limit.refused
        # capacity for all states at once: their band rows (rebuilt when states or rows
        # change); per window-store row of a band its latency evidence (the bands booked
        # in an update are added at once)
        self._band_rows = BandRows()
        self._layout_changed = True
        self.band_latency = BandLatencyStore()
        self._recovered: _recover.Recovered | None = None
        #: missing or frozen data per model (signal held, then saturated)
        self.freshness = Freshness(slos.autoscaling)

    @property
    def gpu_memory_ratio(self) -> float | None:
        """The fleet's GPU memory used ÷ total at the last snapshot (0–1; None without
        GPU series)."""
        return self.gauges.gpu_memory_ratio

    def update(self, snap: Snapshot) -> None:
        """Account one snapshot (call for every scrape, in order; a snapshot not newer
        than the last one is ignored).

        The cyclic garbage collector is paused meanwhile (if it was on), as
        :meth:`~fleetwatch.exporters.normalize.Normalizer.normalize` does: an update
        allocates short-lived containers per model (lists, tuples, small arrays), all
        freed by reference counting before it returns, and the collections their
        allocation would trigger scan the engine's long-lived states and windows, work
        that frees nothing (``benchmarks/bench_slo.py`` reports the collector's time
        inside and outside the updates)."""
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            self._update(snap)
        finally:
            if paused:
                gc.enable()

    def _update(self, snap: Snapshot) -> None:
        t0 = time.perf_counter()
        ts = snap.timestamp
        if self._prev_ts is not None and ts <= self._prev_ts:
            return
        if self.freshness.observe(snap):  # hold the signals of before this snapshot
            self.freshness.hold(_autoscaling.keyed(self._signals(None)))
        decoded = self._decoder.decode(snap)
        self.attribution.observe(snap)
        self.gauges.gpu_memory_ratio = decoded.gpu_memory_ratio
        prev_ts, self._prev_ts = self._prev_ts, ts
        self._account(ts, prev_ts, decoded)
        self._forget_gone(ts)
        self.last_update = ts
        self.autoscaling()  # every interval's signal into its hold, read or not
        self.update_seconds = time.perf_counter() - t0

    def _forget_gone(self, ts: float) -> None:
        """Forget the models without data (metrics or trace events) for
        ``limits.forget_model_after`` seconds: their states, window rows, gauges and what
        every stage keeps per model."""
        horizon = ts - self.spec.limits.forget_model_after
        traced = self._traces.seen
        gone = [mk for mk, seen in self._model_seen.items()
                if seen < horizon and traced.get(mk, seen) < horizon]
        if traced:  # trace-only models: the same timer
            gone += [mk for mk, t in traced.items() if t < horizon and mk not in self._model_seen]
        gone += self._cap.evict(self._model_seen, set(gone), ts)
        if not gone:
            return
        gone_set = set(gone)
        marks, windows = self._marks, self.ledger.windows
        for key in [(name, mk) for name, mk in self.states if mk in gone_set]:
            st = self.states.pop(key)
            self._limit.release(st.slo.name)
            marks.dirty.discard(key)
            self._layout_changed = True
            for band, row in st.rows.items():
                windows.release((st.slo.name, st.model, band))
                marks.owner.pop(row, None)
                self.band_latency.reset(row, 0.0)
        g = self.gauges
        for d in (self._model_seen, self._prev_in_system, g.concurrency, g.estimator,
                  g.batch_limit, g.running_max, g.queue_wait, g.kv_usage,
                  self._signal_holds):
            for mk in gone:
                d.pop(mk, None)
        self._traces.forget(gone_set)
        self.freshness.forget(gone_set)
        self._selects.forget(gone_set)
        self._layout.forget(gone_set)
        self._decoder.forget(gone_set)
        self._limit.forget(gone_set)

    def _new_state(self, slo: SLOSpec, mk: ModelKey, ts: float) -> SLOModelState | None:
        """The state of a model the SLO selects, made if missing (None past
        limits.max_models_per_slo: :mod:`fleetwatch.slo.account.limits`)."""
        st = self.states.get((slo.name, mk))
        if st is not None:
            return st
        if not self._limit.admit(slo.name, mk, ts):
            return None
        st = self.states[(slo.name, mk)] = SLOModelState(slo, mk,
                                                         capacity=slo.concurrency.envelope)
        st.events = RowCounts(st.rows, self.ledger, "cum_total")  # counted by the ledger
        st.good = RowCounts(st.rows, self.ledger, "cum_good")
        self._marks.dirty.add((slo.name, mk))
        self._layout_changed = True
        self._layout.changed()
        if self._recovered is not None:
            _recover.apply(self._recovered, st, ts, self._new_row, self.ledger,
                           self.band_latency)
        return st

    def restore(self, recovered: _recover.Recovered) -> None:
        """Start each state the engine makes from now on from its record in
        ``recovered``, else from its fleet capacity (:mod:`fleetwatch.slo.recover`; call
        before the first :meth:`update`)."""
        self._recovered = recovered

    def snapshot(self) -> _recover.Recovered:
        """The records of every state as of the last update (:mod:`fleetwatch.slo.recover`;
        call from the thread that updates the engine)."""
        return _recover.capture(self.states, self.ledger, self.band_latency,
                                self.last_update or 0.0)

    def held(self) -> Held:
        """What the engine holds per model and per series (the bounds of the module doc
        and of :class:`~fleetwatch.slo.decode.decoder.Decoder`)."""
        return Held(len(self._model_seen), len(self.states), self._decoder.carried)

    def mark_changed(self, st: SLOModelState) -> None:
        """Have the next update judge ``st`` again (the engine judges only the states
        whose judged inputs changed: call this when a stage changes another)."""
        self._marks.dirty.add((st.slo.name, st.model))

    def _state(self, entry: ModelSLO, ts: float) -> SLOModelState | None:
        """The state of a model's SLO entry, made and kept there on first use (None:
        refused by the limits; forgotten with the model)."""
        _name, mk = entry.key
        st = entry.state = self._new_state(entry.slo, mk, ts)
        return st

    def _account(self, ts: float, prev_ts: float | None, decoded: Decoded) -> None:
        """Account one decoded snapshot (:mod:`fleetwatch.slo.account.columns`): per target its
        models' gauges and concurrency, the states they need made, and the bookable (SLO,
        model) pairs, booked at once (:mod:`fleetwatch.slo.account.book`; nothing to book on the
        first snapshot, which only primes the counters); then judged."""
        views: dict[int, PlanColumns] = {}
        gathered: list[Gathered] = []
        for plan, out, res in decoded.columns:
            view = views[id(plan)] = self._layout.view(plan, self._decoder)
            if prev_ts is not None:
                gathered.append(self._columns_todo(ts, prev_ts, view, out, res,
                                                   decoded.refused))
        self._layout.keep(views)
        if prev_ts is not None:
            self._add_and_judge(ts, bookings(ts, gathered, self._new_row, self._marks.dirty))
        seen, prev_in_system = self._model_seen, self._prev_in_system
        refused = decoded.refused
        for plan, _out, res in decoded.columns:
            view = views[id(plan)]
            for mk, r, w in zip(view.models, view.running, view.waiting, strict=True):
                seen[mk] = ts
                if refused and (mk, ACTIVE_GROUP) in refused:
                    prev_in_system.pop(mk, None)  # unknown: the next end stands for both
                    continue
                now = in_system_of(res[r] if r >= 0 else None, res[w] if w >= 0 else None)
                if now is not None:
                    prev_in_system[mk] = now

    def _columns_todo(self, ts: float, prev_ts: float, view: PlanColumns, out: FloatArray,
                      res: list[float], refused: set[tuple[ModelKey, str]]) -> Gathered:
        """One target's models into their gauges, and its bookable (SLO, model) pairs
        (see :func:`fleetwatch.slo.account.book.bookings`); ``refused`` the decoder's
        refused groups (a model whose concurrency inputs are among them books nothing)."""
        seen = self._model_seen
        live_dt = np.asarray([ts - seen.get(mk, prev_ts) for mk in view.models], dtype=float)
        live = live_dt > 0
        target = self._layout.target(view, live.tolist(), lambda e: self._state(e, ts))
        no_conc = np.asarray([bool(refused) and ((mk, DURATION) in refused
                                                 or (mk, ACTIVE_GROUP) in refused)
                              for mk in view.models], dtype=bool)
        concs = update_gauges(self.gauges, self._prev_in_system, view.models, target.gauges,
                              out, live_dt, live, no_conc)
        return target.gather(live, concs, view.events(out), res, self._marks.dirty)

    def _new_row(self, st: SLOModelState, band: str, ts: float) -> int:
        """The window-store row of a band (or ``all``) booked for the first time, and
        its (empty) latency evidence from ``ts`` on."""
        r = self.ledger.row(st, band)
        self._marks.owner[r] = (st.slo.name, st.model)
        self.band_latency.reset(r, ts)
        if band != ALL:
            st.latency[band] = BandLatency(self.band_latency, r)
            if not self._band_rows.set(st, band, r):
                self._layout_changed = True
        return r

    def add_events(self, events: Iterable[TraceEvent]) -> None:
        """Account already-judged events of ``sli.source: traces`` SLOs — ``(SLO name,
        model key, Unix seconds, concurrency, good, total)`` (:func:`fleetwatch.traces.judge.
        judge`) — each into the band of its concurrency like an interval's metric events,
        then judge (:class:`~fleetwatch.slo.account.trace_book.TraceBook` says what is
        skipped; times before the last accounted one count at it)."""
        booked, ts = self._traces.book(events, self.last_update or 0.0, self._new_state,
                                       self._new_row, self._marks.dirty)
        if booked.rows:
            self._add_and_judge(ts, booked)

    def _add_and_judge(self, ts: float, booked: Bookings) -> None:
        """Add the bookings, then judge and update capacity."""
        self.band_latency.add_bookings(booked, self.spec.capacity.window)
        ledger, gauges, states = self.ledger, self.gauges, self.states
        ledger.add(ts, booked.rows, np.repeat(np.asarray(booked.goods, dtype=float), 2),
                   np.repeat(np.asarray(booked.totals, dtype=float), 2))
        now = ledger.burning
        self._marks.flipped(now)
        self.attribution.record(ts, states, gauges.concurrency)
        judge_marked(ts, states, self._marks.dirty, now.tolist(), self.attribution, ledger)
        self._marks.dirty.clear()
        if self._layout_changed:
            self._band_rows.build(list(states.values()))
            self._layout_changed = False
        cap_cfg = self.spec.capacity
        index = ledger.windows.index[float(cap_cfg.window)]
        update_capacities(self._band_rows, cap_cfg, ledger.windows.sums()[:, index, 1],
                          ledger.burn[:, index], self.band_latency, gauges.batch_limit)

    # -- outputs (see the modules named) -------------------------------------------
    def window_sums(self, st: SLOModelState, band: str, window: float,
                    sums: FloatArray | None = None) -> tuple[float, float]:
        """``(good, total)`` of a band (or ``"all"``) over a window length (seconds);
        ``sums``: a :meth:`~fleetwatch.slo.account.windows.RollingWindows.sums` taken once for many
        calls."""
        return self.ledger.window_sums(st, band, window, sums)

    def burn(self, st: SLOModelState, band: str, window: float) -> float:
        """Burn rate of a band (or ``"all"``) over a window length (seconds), as of the
        last update; NaN without events."""
        return self.ledger.burn_rate(st, band, window)

    def model_capacity(self, mk: ModelKey) -> float | None:
        """Capacity at SLO of a model: the smallest over its SLOs (None without SLOs)."""
        return _autoscaling.model_capacity(self.states, mk)

    def model_state(self, mk: ModelKey) -> str:
        """Worst state over the model's SLOs (regression > overload > misconfigured > …)."""
        return _autoscaling.model_state(self.states, mk)

    def autoscaling(self) -> list[ModelSignal]:
        """One object per model (KEDA metrics-api shape, see
        :class:`~fleetwatch.slo.outputs.autoscaling.ModelSignal`): ``signal`` (the largest
        component; held, then saturated, when the model's data is missing or frozen),
        ``components`` (ratios), ``capacity``, ``concurrency``, ``state``, ``freshness``."""
        return self._signals(self.freshness)

    def _signals(self, freshness: Freshness | None) -> list[ModelSignal]:
        return _autoscaling.signals(self.spec.autoscaling, self.states, self.gauges,
                                    self.cold_starts, freshness=freshness,
                                    holds=self._signal_holds, now=self.last_update,
                                    in_system=self._prev_in_system)

    def status(self) -> list[SLOStatus]:
        """Per SLO and model (see :class:`~fleetwatch.slo.outputs.status.SLOStatus`): state,
        budget remaining, burn rates by window and band, capacity, the explanation of
        the state (JSON-ready)."""
        return _status.status(self.ledger, self.states, self.gauges)

    def explain(self, st: SLOModelState) -> str:
        """A sentence saying why the state is what it is."""
        return _judge.explain(st)

    def iter_metrics(self) -> Iterator[Sample]:
        """``(family, labels, value)`` for every exported series (see
        :mod:`fleetwatch.slo.outputs.export`), ``fleetwatch_slo_models_refused_total`` per
        SLO and ``fleetwatch_slo_intervals_refused_total`` per normalized metric (the
        decoder's refused values: :mod:`fleetwatch.slo.decode.decoder`)."""
        yield from _status.iter_metrics(self.ledger, self.states, self.autoscaling())
        for slo in self.spec.slos:
            yield ("fleetwatch_slo_models_refused_total", {"slo": slo.name},
                   float(self.models_refused[slo.name]))
        yield ("fleetwatch_slo_models_evicted_total", {}, float(self._cap.evicted))
        yield ("fleetwatch_slo_carried_series_evicted_total", {},
               float(self._decoder.evicted))
        for metric, n in sorted(self._decoder.refused.items()):
            yield ("fleetwatch_slo_intervals_refused_total", {"metric": metric}, float(n))
