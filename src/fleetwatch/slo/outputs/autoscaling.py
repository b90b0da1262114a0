"""Autoscaling signals per model (the KEDA metrics-api / HPA ``AverageValue`` input).

Components are ratios (observed ÷ target, 1 = at target): ``concurrency`` (requests in
the system — the interval's mean or the requests running + waiting at its end, the
larger — ÷ capacity at SLO), ``queue_wait`` (mean queue wait ÷
``autoscaling.queue_wait_seconds``), ``kv_cache`` (KV-cache usage ÷
``kv_cache_usage_ratio``), ``gpu_memory`` (fleet GPU-memory usage ÷
``gpu_memory_usage_ratio``). The signal is the largest component; with a target of 1,
desired replicas = ceil(Σ signal over replicas); the sidecar holds each signal at its
peak over one cold start and never lets it fall below the burst headroom of the
concurrency component over a longer window (:class:`SignalHold`,
:mod:`fleetwatch.slo.outputs.headroom`). ``min_replicas`` is the cold-start floor
(see :class:`~fleetwatch.slo.spec.AutoscalingSettings`).

Each model also says what the signal asks of the autoscaler (the decision explained, as
WVA's ``wva_desired_replicas`` and Dynamo's planner gauges do): ``desired_replicas``, the
replicas this replica's load needs at the ScaledObject's target of 1 —
``max(min_replicas, ceil(signal))`` — and ``driver``, the component that sets the signal
(the largest). Summed over the fleet's sidecars it bounds the fleet's answer from above;
the fleet's own is ``ceil(Σ signal)`` (docs/autoscaling.md).

A model whose data is missing or frozen (:mod:`fleetwatch.slo.judge.freshness`) publishes
its last fresh signal for ``autoscaling.stale_hold``, then ``autoscaling.stale_signal``;
its ``freshness`` object says which, why and since when.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TypedDict

from fleetwatch.slo.account.gauges import ModelGauges
from fleetwatch.slo.judge.freshness import Freshness, FreshnessStatus
from fleetwatch.slo.judge.states import worst_state
from fleetwatch.slo.outputs.headroom import BurstHeadroom, headroom_seconds
from fleetwatch.slo.spec import AutoscalingSettings
from fleetwatch.slo.state import ModelKey, SLOModelState

States = Mapping[tuple[str, ModelKey], SLOModelState]


class ModelSignal(TypedDict):
    """One model's autoscaling object (JSON-ready)."""

    model: str
    model_version: str
    backend: str
    signal: float  # ratio: the largest component (0.0 without components); when stale,
    # held, then autoscaling.stale_signal (freshness.signal says which)
    components: dict[str, float]  # ratios, see the module docstring
    capacity: float | None  # concurrent requests per replica; None without an SLO
    concurrency: float | None  # requests in the system per replica
    state: str  # the worst state over the model's SLOs
    cold_start_seconds: float | None  # last measured cold start (None: not seen)
    min_replicas: int  # recommended floor (cold start above the bound: a larger floor)
    desired_replicas: int  # max(min_replicas, ceil(signal)): what this replica's load needs
    driver: str | None  # the component that sets the signal (None without components)
    freshness: FreshnessStatus  # fresh or stale (why, since when), last fresh data


def model_capacity(states: States, mk: ModelKey) -> float | None:
    """Capacity at SLO of a model: the smallest over its SLOs (None without SLOs)."""
    caps = [st.capacity for (_, m), st in states.items() if m == mk]
    return min(caps) if caps else None


def model_state(states: States, mk: ModelKey) -> str:
    """Worst state over the model's SLOs (regression > overload > misconfigured > …)."""
    return worst_state({st.state for (_, m), st in states.items() if m == mk})


def min_replicas(targets: AutoscalingSettings, cold_start: float | None) -> int:
    """The recommended minimum replicas for a cold start of ``cold_start`` seconds."""
    if cold_start is not None and cold_start > targets.cold_start_bound_seconds:
        return targets.cold_start_min_replicas
    return 1


def desired_replicas(signal: float, floor: int) -> int:
    """Replicas one replica's load needs at a target of 1: ``max(floor, ceil(signal))``
    (a signal within 1e-9 of an integer counts as that integer; non-finite: ``floor``)."""
    if not math.isfinite(signal):
        return floor
    return max(floor, math.ceil(signal - 1e-9))


def driver(components: Mapping[str, float]) -> str | None:
    """The component with the largest ratio (ties: the first by name); None if none."""
    return max(sorted(components), key=lambda k: components[k]) if components else None


def keyed(objs: list[ModelSignal]) -> Iterator[tuple[ModelKey, float]]:
    """``(model key, signal)`` of each object (what :meth:`Freshness.hold` keeps)."""
    for o in objs:
        yield ModelKey(o["model"], o["model_version"], o["backend"]), o["signal"]


def components(targets: AutoscalingSettings, capacity: float | None,
               concurrency: float | None, in_system: float | None, queue_wait: float | None,
               kv_usage: float | None, gpu_memory_ratio: float | None) -> dict[str, float]:
    """One replica's components (ratios, see the module docstring) from its
    observations: ``capacity`` at SLO, ``concurrency`` (the interval's mean requests in
    the system) and ``in_system`` (requests running + waiting at its end), mean
    ``queue_wait`` (seconds), ``kv_usage`` and the fleet's ``gpu_memory_ratio`` (0–1);
    None (or a capacity of 0) leaves its component out. The concurrency component is
    the larger of the two request counts ÷ capacity: a burst at the interval's end, the
    requests queued for the next one, count before the mean sees them. The one rule the
    sidecar and the advisory twin (:mod:`fleetwatch.autoscale`) apply."""
    comps: dict[str, float] = {}
    if capacity and concurrency is not None:
        comps["concurrency"] = max(concurrency, in_system or 0.0) / capacity
    if queue_wait is not None:
        comps["queue_wait"] = queue_wait / targets.queue_wait_seconds
    if kv_usage is not None:
        comps["kv_cache"] = kv_usage / targets.kv_cache_usage_ratio
    if gpu_memory_ratio is not None:
        comps["gpu_memory"] = gpu_memory_ratio / targets.gpu_memory_usage_ratio
    return comps


def signal_ratio(comps: Mapping[str, float]) -> float:
    """The signal: the largest component (0.0 without components)."""
    return max(comps.values()) if comps else 0.0


@dataclass(slots=True)
class SignalHold:
    """The signal held at its peak over the last ``window`` seconds, and never below the
    burst headroom of the demand (:class:`~fleetwatch.slo.outputs.headroom.BurstHeadroom`,
    its own window): :meth:`update` with each interval's signal and concurrency
    component returns the larger of the window's peak and the headroom. Bounded: a
    monotone queue keeps only the values that can still be the peak, and an update at
    the time of the last one replaces it (the sidecar asks once per request for the
    signal, not once per interval)."""

    window: float
    headroom: BurstHeadroom = field(default_factory=lambda: BurstHeadroom(0.0))
    _peaks: deque[tuple[float, float]] = field(default_factory=deque)

    def update(self, now: float, signal: float, demand: float = 0.0) -> float:
        """Add ``signal`` and ``demand`` (the concurrency component: replicas' worth of
        requests in the system) at ``now`` (seconds, non-decreasing); the larger of the
        window's peak signal and the demand's headroom."""
        peaks = self._peaks
        while peaks and (peaks[-1][1] <= signal or peaks[-1][0] >= now):
            peaks.pop()
        peaks.append((now, signal))
        while peaks[0][0] <= now - self.window and len(peaks) > 1:
            peaks.popleft()
        return max(peaks[0][1], self.headroom.update(now, demand))


def hold_seconds(cold_start: float | None) -> float:
    """The signal's hold window (seconds): one measured cold start, so that a demand
    peak keeps the replicas it needed for as long as a removed replica would take to
    come back; 0 (no hold) until a cold start is measured."""
    return cold_start if cold_start is not None and cold_start > 0 else 0.0


def signals(targets: AutoscalingSettings, states: States, gauges: ModelGauges,
            cold_starts: Mapping[str, float] | None = None, *,
            freshness: Freshness | None = None,
            holds: MutableMapping[ModelKey, SignalHold] | None = None,
            now: float | None = None,
            in_system: Mapping[ModelKey, float] | None = None) -> list[ModelSignal]:
    """One :class:`ModelSignal` per model seen (with gauges or SLOs), sorted by model;
    ``cold_starts``: model name → last measured cold start (seconds, from the sidecar);
    ``freshness``: the stale models' signals are held or saturated (None: every model
    reads as measured and fresh). With ``holds`` (model → its :class:`SignalHold`, created
    here; the caller forgets a model's with its gauges) and ``now`` (the last interval's
    end, seconds), each model's measured signal is held at its peak over
    :func:`hold_seconds` of its cold start and kept at least at the burst headroom of
    its concurrency component (:func:`~fleetwatch.slo.outputs.headroom.headroom_seconds`);
    the components stay the last interval's.
    ``in_system``: model → requests running + waiting at the last snapshot (see
    :func:`components`). Linear in the states (grouped by model once)."""
    cold_starts = cold_starts or {}
    in_system = in_system or {}
    fresh = freshness or Freshness(targets)
    by_model: dict[ModelKey, list[SLOModelState]] = {}
    for (_, m), st in states.items():
        by_model.setdefault(m, []).append(st)
    models = set(gauges.concurrency) | set(gauges.kv_usage) | set(by_model)
    out: list[ModelSignal] = []
    for mk in sorted(models):
        own = by_model.get(mk, [])
        cap = min(st.capacity for st in own) if own else None
        conc = gauges.concurrency.get(mk)
        comps = components(targets, cap, conc, in_system.get(mk), gauges.queue_wait.get(mk),
                           gauges.kv_usage.get(mk), gauges.gpu_memory_ratio)
        signal = signal_ratio(comps)
        cold = cold_starts.get(mk.model)
        if holds is not None and now is not None:
            hold = holds.setdefault(mk, SignalHold(0.0))
            hold.window = hold_seconds(cold)  # a cold start measured since
            hold.headroom.window = headroom_seconds(targets.headroom_window, cold)
            signal = hold.update(now, signal, comps.get("concurrency", 0.0))
        signal, how = fresh.signal(mk, signal)
        floor = min_replicas(targets, cold)
        out.append({
            "model": mk.model, "model_version": mk.model_version, "backend": mk.backend,
            "signal": signal,
            "components": comps, "capacity": cap, "concurrency": conc,
            "state": worst_state({st.state for st in own}),
            "cold_start_seconds": cold_starts.get(mk.model),
            "min_replicas": floor,
            "desired_replicas": desired_replicas(signal, floor),
            # a held or saturated signal is set by missing data, not a component
            "driver": driver(comps) if how == "measured" else "stale",
            "freshness": fresh.status(mk, how),
        })
    return out
