"""The layout of the accounting: which SLOs each model has, and the compiled columns.

A model's :class:`~fleetwatch.slo.account.book.ModelSLO` entries (one per SLO that
selects it, in the SLO file's order) are made on first use and kept until the model is
forgotten. Each current decoding plan has a compiled column view
(:class:`~fleetwatch.slo.account.columns.PlanColumns`, compiled again when the plan or the
bucket bounds seen change) and per view its SLO columns
(:class:`~fleetwatch.slo.account.book.TargetSLOs`), valid for one layout
:attr:`Layout.version`: the engine bumps it (:meth:`Layout.changed`) whenever a state or a
row is made or forgotten; listing a model's SLOs bumps it too.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable

from fleetwatch.slo.account.book import BandTable, ModelSLO, TargetSLOs
from fleetwatch.slo.account.columns import PlanColumns
from fleetwatch.slo.account.ledger import Selection
from fleetwatch.slo.bands import band_label
from fleetwatch.slo.decode.decoder import Decoder
from fleetwatch.slo.decode.plan import Plan
from fleetwatch.slo.sli import LATENCY_METRICS
from fleetwatch.slo.spec import SLOSpec
from fleetwatch.slo.state import ModelKey


class Layout:
    """The per-model SLO entries and the column views of an engine's SLOs (``slos``, in
    the SLO file's order), the models an SLO selects decided by ``selects``."""

    def __init__(self, slos: list[SLOSpec], selects: Selection) -> None:
        self.slos = slos
        self.selects = selects
        # SLO name → (band bounds ascending, their labels + "+Inf"): SLOs with the same
        # bands share one table (an interval's band is found once per model and table)
        tables: dict[tuple[float, ...], BandTable] = {}
        self.band_tables: dict[str, BandTable] = {
            s.name: tables.setdefault(tuple(s.concurrency.bands), BandTable(
                list(s.concurrency.bands),
                [band_label(b) for b in [*s.concurrency.bands, math.inf]]))
            for s in slos}
        self._slo_index = {s.name: j for j, s in enumerate(slos)}
        # model → its SLO entries (their states filled in once made); dropped with the
        # model (forget), so a kept state is the one the engine keeps
        self.model_slos: dict[ModelKey, list[ModelSLO]] = {}
        self._views: dict[int, PlanColumns] = {}  # by id of the plan
        self._targets: dict[int, TargetSLOs] = {}  # by id of the view
        self.version = 0

    def changed(self) -> None:
        """A state or a row was made or forgotten: every view's SLO columns compile again."""
        self.version += 1

    def band(self, slo: str, conc: float) -> str:
        """The band label of ``conc`` (requests) in SLO ``slo``: the smallest bound ≥ it,
        or ``+Inf``."""
        table = self.band_tables[slo]
        return table.labels[bisect_left(table.bounds, conc)]

    def entries(self, mk: ModelKey) -> list[ModelSLO]:
        """The model's SLO entries (made on first use)."""
        slos = self.model_slos.get(mk)
        if slos is None:
            self.version += 1
            slos = self.model_slos[mk] = [
                ModelSLO(slo, (slo.name, mk), slo.sli.source == "traces",
                         LATENCY_METRICS[slo.sli.latency.metric] if slo.sli.latency else None,
                         self.band_tables[slo.name], self._slo_index[slo.name])
                for slo in self.slos if self.selects(slo, mk)]
        return slos

    def view(self, plan: Plan, decoder: Decoder) -> PlanColumns:
        """The column view of a decoding plan (compiled again when the plan or the bucket
        bounds ``decoder`` has seen changed)."""
        view = self._views.get(id(plan))
        version = decoder.bounds_version
        if view is None or view.plan is not plan or view.version != version:
            view = PlanColumns(plan, self.slos, decoder.bounds, version)
        return view

    def keep(self, views: dict[int, PlanColumns]) -> None:
        """Keep only ``views`` (by id of their plan: the current snapshot's) and their SLO
        columns."""
        self._views = views
        current = {id(v) for v in views.values()}
        self._targets = {k: t for k, t in self._targets.items() if k in current}

    def target(self, view: PlanColumns, live: list[bool],
               make_state: Callable[[ModelSLO], object]) -> TargetSLOs:
        """The view's SLO columns for the current layout: the live models' missing states
        made by ``make_state`` (or refused: then tried again every update) in model order,
        then compiled again if that changed the layout."""
        target = self._targets.get(id(view))
        if target is None or target.view is not view or target.version != self.version:
            target = TargetSLOs(view, self.entries, len(self.slos), self.version)
        if not target.complete:
            for mk, alive in zip(view.models, live, strict=True):
                if alive:
                    for entry in self.model_slos.get(mk) or self.entries(mk):
                        if entry.state is None:
                            make_state(entry)
            if target.version != self.version:
                target = TargetSLOs(view, self.entries, len(self.slos), self.version)
        self._targets[id(view)] = target
        return target

    def forget(self, models: set[ModelKey]) -> None:
        """Drop the SLO entries of ``models`` (forgotten by the engine)."""
        self.version += 1
        for mk in models:
            self.model_slos.pop(mk, None)
