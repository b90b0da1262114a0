"""Per-model gauges: what the last interval with data said about each model.

:func:`update_gauges` reads a target's interval for every model at once: its
concurrency (:mod:`fleetwatch.slo.account.concurrency`), the largest running gauge and the
concurrent-slot limit, the mean queue wait and the KV-cache usage, into :class:`ModelGauges` (read
by the capacity model and the outputs).

Units: concurrency in requests, waits in seconds, ratios 0–1.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from fleetwatch.slo.account.book import GaugeSlots
from fleetwatch.slo.account.concurrency import Column, estimate_columns
from fleetwatch.slo.arrays import BoolArray, FloatArray
from fleetwatch.slo.state import ModelKey


@dataclass(slots=True)
class ModelGauges:
    """Per-model observations of the last interval that had them: ``concurrency``
    (requests in the system per replica), ``queue_wait`` (mean seconds), ``kv_usage``
    (ratio 0–1), ``estimator`` (which measured the concurrency: ``"little"``,
    ``"gauges"`` or ``"previous"``, see :mod:`fleetwatch.slo.account.concurrency`), ``running_max``
    (the largest running gauge seen, requests), ``batch_limit`` (the engine's concurrent-slot
    limit, requests: ``running_max`` once requests have been seen waiting — running
    never exceeds the limit, and a sample taken between one request's end and the next
    one's admission reads a slot less: e.g. 7 running and 8 waiting at vLLM's
    ``--max-num-seqs 8``, hence the largest seen); and the fleet's
    ``gpu_memory_ratio`` (0–1, None without GPU series)."""

    concurrency: dict[ModelKey, float] = field(default_factory=dict)
    estimator: dict[ModelKey, str] = field(default_factory=dict)
    batch_limit: dict[ModelKey, float] = field(default_factory=dict)
    running_max: dict[ModelKey, float] = field(default_factory=dict)
    queue_wait: dict[ModelKey, float] = field(default_factory=dict)
    kv_usage: dict[ModelKey, float] = field(default_factory=dict)
    gpu_memory_ratio: float | None = None

    def forget(self, models: Collection[ModelKey]) -> None:
        """Drop every gauge of ``models`` (forgotten by the engine)."""
        for d in (self.concurrency, self.estimator, self.batch_limit, self.running_max,
                  self.queue_wait, self.kv_usage):
            for mk in models:
                d.pop(mk, None)



def update_gauges(g: ModelGauges, prev_in_system: dict[ModelKey, float],
                  models: list[ModelKey], slots: GaugeSlots, out: FloatArray,
                  dt: FloatArray, live: BoolArray, refused: BoolArray) -> FloatArray:
    """Every live model of a target's interval into its gauges ``g`` (dicts filled in
    model order): ``models`` and their gauge ``slots`` in the per-slot results
    ``out``, ``dt`` each model's interval (seconds), ``live`` whether it is accounted
    (its interval is longer than 0), ``prev_in_system`` running + waiting at each
    model's previous snapshot, ``refused`` whether a value the concurrency is measured
    from was refused in the interval (the request-duration histogram, the running and
    waiting gauges: :mod:`fleetwatch.slo.decode.decoder`). Returns the concurrencies
    (requests; NaN: none, not live, or refused — the interval is then not booked, rather
    than booked at what the remaining values would say)."""
    ext = np.append(out, 0.0)
    nan = math.nan
    before = prev_in_system
    prev_in = [before.get(mk) for mk in models]
    previous = [g.concurrency.get(mk) for mk in models]

    def column(values: list[float | None]) -> Column:
        has = np.asarray([v is not None for v in values], dtype=bool)
        return Column(np.asarray([nan if v is None else v for v in values],
                                 dtype=float), has)

    running = ext[slots.running]
    waiting = ext[slots.waiting]
    conc, names = estimate_columns(
        Column(running, slots.running_has), Column(waiting, slots.waiting_has),
        (Column(ext[slots.d_count], slots.d_has), Column(ext[slots.d_sum], slots.d_has)),
        column(prev_in), dt, column(previous))
    with np.errstate(invalid="ignore"):
        found = live & np.isfinite(conc) & ~refused
    at = found.nonzero()[0].tolist()
    g.estimator.update((models[i], names[i]) for i in at)
    g.concurrency.update(zip([models[i] for i in at], conc[at].tolist(), strict=True))
    # the largest running gauge seen, and the slot limit once requests wait
    busy = (live & slots.running_has & (running != 0.0)).nonzero()[0].tolist()
    running_max, batch_limit = g.running_max, g.batch_limit
    waits = (slots.waiting_has & (waiting != 0.0)).tolist()
    for i, r in zip(busy, running[busy].tolist(), strict=True):
        mk = models[i]
        if r > running_max.get(mk, 0.0):
            running_max[mk] = r
        if waits[i]:
            batch_limit[mk] = running_max[mk]
    qc, qs = ext[slots.q_count], ext[slots.q_sum]
    with np.errstate(invalid="ignore", divide="ignore"):
        queued = (live & slots.q_has & (qc > 0)).nonzero()[0]
        mean_wait = qs[queued] / qc[queued]
    g.queue_wait.update(zip([models[i] for i in queued.tolist()], mean_wait.tolist(),
                            strict=True))
    kv_at = (live & slots.kv_has).nonzero()[0]
    g.kv_usage.update(zip([models[i] for i in kv_at.tolist()],
                          ext[slots.kv][kv_at].tolist(), strict=True))
    return np.where(found, conc, nan)
