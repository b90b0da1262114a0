"""The book: every (SLO, model) of one target booked at once, with array operations.

A :class:`TargetSLOs`, compiled once per column view (:mod:`fleetwatch.slo.account.columns`) and
layout of the engine's states and rows (:attr:`TargetSLOs.version`), holds per SLO the positions of
the target's models it selects, their states, the window-store row of every band of
each state and of its ``all`` row; per update :meth:`TargetSLOs.gather` picks the
bookable (SLO, model) pairs and their rows, model by model and each model's SLOs in the
SLO file's order, and :func:`bookings` makes the rows a first booking needs (through the
engine's callback, in that order) and the :class:`~fleetwatch.slo.account.bookings.Bookings`. Per
model and SLO the rules are those of ``tests/slo/oracle.py``, which states them one interval at a
time (a test requires equal outputs).

Units: events in counts, concurrency in requests, times in Unix seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from fleetwatch.slo.account.bookings import NO_BUCKETS, Bookings, Buckets
from fleetwatch.slo.account.columns import PlanColumns, SLOEvents
from fleetwatch.slo.arrays import BoolArray, FloatArray, IntArray
from fleetwatch.slo.decode.plan import HistSlots
from fleetwatch.slo.spec import SLOSpec
from fleetwatch.slo.state import ALL, ModelKey, SLOModelState


class BandTable(NamedTuple):
    """An SLO's concurrency bands: ``bounds`` ascending (requests) and ``labels`` (the
    bounds' ``band`` label values, then ``+Inf``). A concurrency's band is the smallest
    bound ≥ it (``labels[bisect_left(bounds, c)]``). SLOs with the same bands share one
    table (a model's band is found once per table)."""

    bounds: list[float]
    labels: list[str]


@dataclass(slots=True)
class ModelSLO:
    """One SLO that selects one model: ``slo``, ``key`` (SLO name, model), ``traces``
    (a ``sli.source: traces`` SLO, accounted per request by ``add_events``, not from the
    decoder), ``latency_family`` (a latency SLI's histogram family, else None), its
    ``bands``, ``index`` (its position in the SLO file) and ``state`` (None until made,
    or while refused by ``limits.max_models_per_slo``)."""

    slo: SLOSpec
    key: tuple[str, ModelKey]
    traces: bool
    latency_family: str | None
    bands: BandTable
    index: int
    state: SLOModelState | None = None


class _SLOColumn:
    """One SLO's (model, state) pairs of a target: ``pos`` the models' positions in the
    view, ``states`` their states (None: not made, or refused by the limits), ``has``
    whether made, ``rows[k, b]`` the row of band ``b`` of ``states[k]`` (−1: none yet),
    ``all_rows[k]`` its ``all`` row (−1: never booked), ``labels`` the band labels,
    ``table`` the band table (shared by SLOs with the same bands), ``buckets`` per pair
    its latency histogram's bounds and bucket getter (None: not a latency SLI), and the
    pairs whose ``misconfigured`` explanation the view decides (``err_at``, ``errors``)."""

    __slots__ = ("all_rows", "buckets", "err_at", "errors", "has", "labels", "pos", "rows",
                 "states", "table")

    def __init__(self, view: PlanColumns, j: int, entries: list[ModelSLO],
                 pos: list[int]) -> None:
        self.pos: IntArray = np.asarray(pos, dtype=np.int64)
        self.states: list[SLOModelState | None] = [e.state for e in entries]
        self.has: BoolArray = np.asarray([s is not None for s in self.states], dtype=bool)
        self.table: BandTable = entries[0].bands
        self.labels = self.table.labels
        rows = np.full((len(entries), len(self.labels)), -1, dtype=np.int64)
        all_rows = np.full(len(entries), -1, dtype=np.int64)
        for k, st in enumerate(self.states):
            if st is not None and st.rows:
                got = st.rows.get
                rows[k] = [got(label, -1) for label in self.labels]
                all_rows[k] = got(ALL, -1)
        self.rows, self.all_rows = rows, all_rows
        lat_fam = entries[0].latency_family
        self.buckets: list[HistSlots | None] | None = None
        if lat_fam is not None:
            per_model = view.hist_of(lat_fam)
            self.buckets = [per_model[i] for i in pos]
        kind = view.kinds[j]
        self.err_at: list[int] = []
        self.errors: list[str | None] = []
        if kind is not None and kind.kind == "latency":
            for k, i in enumerate(pos):
                if kind.codes[i]:  # a histogram: the view says whether the threshold matches
                    self.err_at.append(k)
                    self.errors.append(kind.errors[i])


class GaugeSlots:
    """Per model of a view the slots of its gauges in the per-slot results extended by a
    0.0 (``−1``: that 0.0): ``running``/``waiting``/``kv`` with their presence, the
    request-duration and queue histograms' count and sum slots with theirs."""

    __slots__ = ("d_count", "d_has", "d_sum", "kv", "kv_has", "q_count", "q_has", "q_sum",
                 "running", "running_has", "waiting", "waiting_has")

    def __init__(self, view: PlanColumns) -> None:
        def slots(xs: list[int]) -> tuple[IntArray, BoolArray]:
            a = np.asarray(xs, dtype=np.int64)
            return a, a >= 0

        self.running, self.running_has = slots(view.running)
        self.waiting, self.waiting_has = slots(view.waiting)
        self.kv, self.kv_has = slots(view.kv)
        self.d_count, self.d_sum, self.d_has = self._pairs(view.duration)
        self.q_count, self.q_sum, self.q_has = self._pairs(view.queue)

    @staticmethod
    def _pairs(hists: list[HistSlots | None]) -> tuple[IntArray, IntArray, BoolArray]:
        """Per model a histogram's count and sum slots, and whether it has one."""
        return (np.asarray([-1 if h is None else h.count_slot for h in hists], dtype=np.int64),
                np.asarray([-1 if h is None else h.sum_slot for h in hists], dtype=np.int64),
                np.asarray([h is not None for h in hists], dtype=bool))


@dataclass(slots=True)
class Gathered:
    """One target's bookable (SLO, model) pairs, in booking order: per pair its SLO's
    column ``cols[c[k]]`` and position ``at[k]`` in it, band index ``band[k]``, rows
    (``row``, ``all_row``; −1: to make), events and concurrency, latency evidence."""

    cols: list[_SLOColumn]
    c: IntArray
    at: IntArray
    band: IntArray
    row: IntArray
    all_row: IntArray
    goods: FloatArray
    totals: FloatArray
    conc: FloatArray
    buckets: list[Buckets]


class TargetSLOs:
    """The per-SLO columns of one target's view for the engine's SLOs (``nslo``; each
    model's :class:`ModelSLO` entries from ``entries``), compiled for the engine's layout
    ``version``. ``complete``: every entry of every model has a state (else the engine
    makes or refuses the missing ones before :meth:`gather`, every update)."""

    def __init__(self, view: PlanColumns, entries: Callable[[ModelKey], list[ModelSLO]],
                 nslo: int, version: int) -> None:
        self.view, self.version = view, version
        pos: list[list[int]] = [[] for _ in range(nslo)]
        ents: list[list[ModelSLO]] = [[] for _ in range(nslo)]
        self.complete = True
        for i, mk in enumerate(view.models):
            for entry in entries(mk):
                if entry.state is None:
                    self.complete = False
                if entry.traces:
                    continue  # a traces SLI: judged per request
                pos[entry.index].append(i)
                ents[entry.index].append(entry)
        self.columns: list[_SLOColumn | None] = [
            _SLOColumn(view, j, ents[j], pos[j]) if ents[j] else None for j in range(nslo)]
        self.gauges = GaugeSlots(view)

    def gather(self, live: BoolArray, conc: FloatArray, evs: list[SLOEvents | None],
               res: list[float], dirty: set[tuple[str, ModelKey]]) -> Gathered:
        """The bookable pairs of this update: a model ``live`` (its interval longer than
        0) with a finite concurrency ``conc`` (requests, per model of the view), its
        SLO's events bookable in ``evs``; ``res`` the decoder's per-slot results (the
        latency evidence). A latency SLI's ``misconfigured`` explanation is set or
        cleared on the live states first (``dirty``: the changed ones)."""
        nslo = len(self.columns)
        finite = live & (conc == conc)
        bands: dict[int, IntArray] = {}
        keys: list[IntArray] = []
        parts: list[tuple[int, IntArray, IntArray]] = []  # (column, at, model positions)
        for j, col in enumerate(self.columns):
            ev = evs[j]
            if col is None or ev is None:
                continue
            if col.err_at:
                states, pos = col.states, col.pos
                for k, err in zip(col.err_at, col.errors, strict=True):
                    st = states[k]
                    if st is not None and st.error != err and live[pos[k]]:
                        st.error = err
                        dirty.add((st.slo.name, st.model))
            at = (col.has & finite[col.pos] & ev.bookable[col.pos]).nonzero()[0]
            if not len(at):
                continue
            models = col.pos[at]
            keys.append(models * nslo + j)
            parts.append((j, at, models))
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return Gathered([], empty, empty, empty, empty, empty, np.zeros(0), np.zeros(0),
                            np.zeros(0), [])
        order = np.argsort(np.concatenate(keys), kind="stable")  # model by model
        cols: list[_SLOColumn] = []
        c, at_l, band_l, row_l, all_l, goods_l, totals_l, conc_l = ([] for _ in range(8))
        buckets: list[Buckets] = []
        for n, (j, at, models) in enumerate(parts):
            col = self.columns[j]
            assert col is not None
            ev = evs[j]
            assert ev is not None
            table = col.table
            band_of = bands.get(id(table))
            if band_of is None:  # the smallest bound ≥ conc, or +Inf
                band_of = bands[id(table)] = np.searchsorted(
                    np.asarray(table.bounds, dtype=float), conc, side="left")
            b = band_of[models]
            cols.append(col)
            c.append(np.full(len(at), n, dtype=np.int64))
            at_l.append(at)
            band_l.append(b)
            row_l.append(col.rows[at, b])
            all_l.append(col.all_rows[at])
            goods_l.append(ev.goods[models])
            totals_l.append(ev.totals[models])
            conc_l.append(conc[models])
            if col.buckets is None:
                buckets.extend([NO_BUCKETS] * len(at))
            else:
                for h in (col.buckets[k] for k in at.tolist()):
                    assert h is not None  # a booked latency SLI has its histogram
                    buckets.append((h.les, h.get(res)))
        return Gathered(
            cols, np.concatenate(c)[order], np.concatenate(at_l)[order],
            np.concatenate(band_l)[order], np.concatenate(row_l)[order],
            np.concatenate(all_l)[order], np.concatenate(goods_l)[order],
            np.concatenate(totals_l)[order], np.concatenate(conc_l)[order],
            [buckets[k] for k in order.tolist()])


def bookings(ts: float, targets: Iterable[Gathered],
             new_row: Callable[[SLOModelState, str, float], int],
             dirty: set[tuple[str, ModelKey]]) -> Bookings:
    """The :class:`~fleetwatch.slo.account.bookings.Bookings` of one update from each target's
    :meth:`TargetSLOs.gather` (in the targets' order): the rows a first booking of a band
    needs are made with ``new_row`` (band, then ``all``; a state's first booking marks it
    ``dirty``: no_data → judged), in booking order, and kept in the target's columns (a
    model is in one target's columns only: a model served by two targets is decoded
    into one plan merged over them)."""
    booked = Bookings(one_run=True)
    rows, alls, buckets_l, goods, totals, conc = [], [], [], [], [], []
    for g in targets:
        if not len(g.at):
            continue
        row, all_row = g.row, g.all_row
        missing = ((row < 0) | (all_row < 0)).nonzero()[0].tolist()
        if missing:
            row, all_row = row.copy(), all_row.copy()
            c, at, band = g.c.tolist(), g.at.tolist(), g.band.tolist()
            for k in missing:
                col = g.cols[c[k]]
                st = col.states[at[k]]
                assert st is not None
                st_rows = st.rows
                if not st_rows:
                    dirty.add((st.slo.name, st.model))  # no_data → judged
                label = col.labels[band[k]]
                r = st_rows.get(label)
                row[k] = col.rows[at[k], band[k]] = new_row(st, label, ts) if r is None else r
                r_all = st_rows.get(ALL)
                all_row[k] = col.all_rows[at[k]] = \
                    new_row(st, ALL, ts) if r_all is None else r_all
        rows.append(row)
        alls.append(all_row)
        goods.append(g.goods)
        totals.append(g.totals)
        conc.append(g.conc)
        buckets_l.append(g.buckets)
    if not rows:
        return booked
    row = np.concatenate(rows)
    booked.rows = np.column_stack((row, np.concatenate(alls))).ravel().tolist()
    booked.goods = np.concatenate(goods).tolist()
    booked.totals = np.concatenate(totals).tolist()
    booked.times = [ts] * len(row)
    booked.bands = row.tolist()
    booked.buckets = [b for part in buckets_l for b in part]
    booked.counts = list(booked.totals)
    booked.conc = np.concatenate(conc).tolist()
    return booked
