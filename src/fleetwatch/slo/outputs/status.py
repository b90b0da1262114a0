"""The engine's outputs: the ``/slo`` status objects and the exported series.

:func:`status` gives one JSON-ready :class:`SLOStatus` per SLO and model;
:func:`iter_metrics` the ``(family, labels, value)`` of every ``fleetwatch_slo_*`` and
``fleetwatch_autoscaling_*`` series (names and label sets as in
:mod:`fleetwatch.labels.schema`; :mod:`fleetwatch.slo.outputs.export` turns them into a collector).
Windows are written as :func:`~fleetwatch.slo.durations.format_duration` labels (``5m``, ``28d``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Protocol, TypedDict

from fleetwatch.slo.account.gauges import ModelGauges
from fleetwatch.slo.account.ledger import Ledger
from fleetwatch.slo.bands import budget_remaining
from fleetwatch.slo.durations import format_duration
from fleetwatch.slo.judge.freshness import REASONS
from fleetwatch.slo.judge.states import explain
from fleetwatch.slo.outputs.autoscaling import ModelSignal
from fleetwatch.slo.state import ALL, STATES, ModelKey, SLOModelState, band_sort


class Engine(Protocol):
    """What the documents read of an :class:`~fleetwatch.slo.engine.SLOEngine`."""

    last_update: float | None

    def status(self) -> list[SLOStatus]: ...

    def autoscaling(self) -> list[ModelSignal]: ...

States = Mapping[tuple[str, ModelKey], SLOModelState]
#: ``(family name, labels, value)`` of one exported sample.
Sample = tuple[str, dict[str, str], float]


class BandLatencyStatus(TypedDict):
    """One band's latency evidence: the objective's quantile and the mean concurrency."""

    quantile: float  # ratio: the objective (0.99 → p99)
    latency_seconds: float | None  # that quantile of the band's latency
    concurrency: float | None  # observation-weighted mean concurrency (requests)


class NeighbourStatus(TypedDict):
    """A co-located model blamed for interference, with its load before and during."""

    model: str
    concurrency_before: float  # requests (mean before the burn began)
    concurrency_during: float  # requests (mean over the last short window)
    correlation: float | None  # Pearson r of the bad ratio and this load (None: not computed)


class AttributionStatus(TypedDict):
    """Whom an ``interference`` or ``gpu_degraded`` state blames, and the evidence."""

    kind: str  # interference | gpu_degraded
    since: float  # Unix seconds: the burn first seen
    windows: dict[str, str]  # {"long": "5m", "short": "30s"}: the pair judged
    burn_rates: dict[str, dict[str, float | None]]  # band inside the envelope → window → burn
    neighbours: list[NeighbourStatus]
    gpus: dict[str, list[str]]  # gpu_uuid → conditions (hw_thermal_slowdown, xid, …)


class SLOStatus(TypedDict):
    """One SLO on one model (JSON-ready)."""

    slo: str
    model: str
    model_version: str
    backend: str
    objective: float  # ratio 0–1
    sli: str  # latency | availability | timeslice | goodput
    sli_source: str  # metrics | traces (judged per traced request)
    sampling: int  # traces: each traced request counts as this many events
    state: str  # one of fleetwatch.slo.state.STATES
    explanation: str
    error_budget_remaining: float  # ratio of the period's budget (negative: overspent)
    capacity: float  # concurrent requests per replica (continuous, 3 significant digits)
    capacity_evidence: str  # envelope | kept | bands | model | regression | fleet
    #: where the state started from at a restart: snapshot | prometheus | fleet (None:
    #: from nothing; slo.recover)
    recovered_from: str | None
    capacity_predicted: float | None  # the capacity model's prediction (requests)
    envelope: float
    concurrency: float | None
    concurrency_estimator: str | None  # little | gauges | previous (slo.concurrency)
    batch_limit: float | None  # most running requests seen, once requests waited (requests)
    band_latency: dict[str, BandLatencyStatus]  # band → evidence (latency: latency SLIs)
    burn_rates: dict[str, dict[str, float | None]]  # window label → band → burn (None: no data)
    events: dict[str, float]  # band → events since start
    attribution: AttributionStatus | None  # interference / gpu_degraded evidence


def _num(v: float | None) -> float | None:
    return None if v is None or v != v or v in (math.inf, -math.inf) else v


def _band_latency(st: SLOModelState) -> dict[str, BandLatencyStatus]:
    q = st.slo.objective
    return {label: {"quantile": q, "latency_seconds": _num(bl.quantile(q)),
                    "concurrency": _num(bl.concurrency())}
            for label, bl in sorted(st.latency.items(), key=lambda kv: band_sort(kv[0]))}


def _attribution(st: SLOModelState) -> AttributionStatus | None:
    a = st.attribution
    if a is None:
        return None
    return {"kind": a.kind, "since": a.since,
            "windows": {"long": format_duration(a.long), "short": format_duration(a.short)},
            "burn_rates": {b: {format_duration(w): _num(v) for w, v in ws.items()}
                           for b, ws in a.burn.items()},
            "neighbours": [{"model": n.model, "concurrency_before": n.before,
                            "concurrency_during": n.during, "correlation": n.correlation}
                           for n in a.neighbours],
            "gpus": {u: list(c) for u, c in a.gpus.items()}}


def _attribution_samples(base: dict[str, str], st: SLOModelState) -> Iterator[Sample]:
    a = st.attribution
    if a is None:
        return
    for n in a.neighbours:
        lab = {**base, "neighbour": n.model}
        yield "fleetwatch_slo_interference", lab, 1.0
        for period, v in (("before", n.before), ("during", n.during)):
            yield ("fleetwatch_slo_interference_neighbour_concurrency",
                   {**lab, "period": period}, v)
    for u, conds in a.gpus.items():
        for c in conds:
            yield "fleetwatch_slo_gpu_degraded", {**base, "gpu_uuid": u, "gpu_condition": c}, 1.0


def status(ledger: Ledger, states: States, gauges: ModelGauges) -> list[SLOStatus]:
    """Per SLO and model, sorted: state and its explanation, budget remaining, burn rates
    by window and band, capacity, concurrency, events."""
    out: list[SLOStatus] = []
    sums = ledger.windows.sums()
    for (name, mk), st in sorted(states.items()):
        slo = st.slo
        bands = [label for _, label in st.band_bounds()] + [ALL]
        burn = {format_duration(w): {b: _num(ledger.burn_rate(st, b, w)) for b in bands}
                for w in ledger.window_lengths}
        g, t = ledger.window_sums(st, ALL, slo.period_seconds, sums)
        out.append({
            "slo": name, "model": mk.model, "model_version": mk.model_version,
            "backend": mk.backend,
            "objective": slo.objective, "sli": slo.sli.kind,
            "sli_source": slo.sli.source, "sampling": slo.sli.sampling,
            "state": st.state, "explanation": explain(st),
            "error_budget_remaining": budget_remaining(g, t, slo.objective),
            "capacity": st.capacity, "capacity_evidence": st.capacity_evidence,
            "capacity_predicted": _num(st.capacity_predicted),
            "envelope": slo.concurrency.envelope,
            "concurrency": _num(gauges.concurrency.get(mk)),
            "concurrency_estimator": gauges.estimator.get(mk),
            "batch_limit": gauges.batch_limit.get(mk),
            "band_latency": _band_latency(st), "burn_rates": burn,
            "events": dict(st.events),
            "attribution": _attribution(st),
            "recovered_from": st.recovered_from,
        })
    return out


def iter_metrics(ledger: Ledger, states: States,
                 signals: list[ModelSignal]) -> Iterator[Sample]:
    """Every exported sample: per SLO, model and band the event counters and burn rates
    by window; per SLO and model the budget remaining, capacity and one-hot state; per
    model the concurrency, autoscaling signal and components."""
    sums = ledger.windows.sums()
    for (name, mk), st in sorted(states.items()):
        base = {"slo": name, "model": mk.model, "model_version": mk.model_version,
                "backend": mk.backend}
        for band in sorted(st.events, key=band_sort):
            lab = {**base, "band": band}
            yield "fleetwatch_slo_events_total", lab, st.events[band]
            yield "fleetwatch_slo_good_events_total", lab, st.good[band]
            for w in ledger.window_lengths:
                yield ("fleetwatch_slo_burn_rate",
                       {**lab, "window": format_duration(w)}, ledger.burn_rate(st, band, w))
        g, t = ledger.window_sums(st, ALL, st.slo.period_seconds, sums)
        yield ("fleetwatch_slo_error_budget_remaining_ratio", base,
               budget_remaining(g, t, st.slo.objective))
        yield "fleetwatch_slo_capacity_concurrency", base, st.capacity
        if st.capacity_predicted is not None:
            yield "fleetwatch_slo_capacity_predicted_concurrency", base, st.capacity_predicted
        q = st.slo.objective
        for band, bl in sorted(st.latency.items(), key=lambda kv: band_sort(kv[0])):
            lat, conc = bl.quantile(q), bl.concurrency()
            lab = {**base, "band": band}
            if lat is not None:
                yield ("fleetwatch_slo_band_latency_quantile_seconds",
                       {**lab, "objective_quantile": format(q, "g")}, lat)
            if conc is not None:
                yield "fleetwatch_slo_band_concurrency", lab, conc
        for s in STATES:
            yield "fleetwatch_slo_state", {**base, "state": s}, 1.0 if st.state == s else 0.0
        yield from _attribution_samples(base, st)
    for obj in signals:
        base = {"model": obj["model"], "model_version": obj["model_version"],
                "backend": obj["backend"]}
        if obj["concurrency"] is not None:
            yield "fleetwatch_slo_concurrency", base, obj["concurrency"]
        yield "fleetwatch_autoscaling_signal_ratio", base, obj["signal"]
        yield "fleetwatch_autoscaling_min_replicas", base, float(obj["min_replicas"])
        yield "fleetwatch_autoscaling_desired_replicas", base, float(obj["desired_replicas"])
        why = obj["freshness"]["reason"]
        for reason in REASONS:
            yield ("fleetwatch_autoscaling_signal_stale", {**base, "reason": reason},
                   1.0 if why == reason else 0.0)
        for comp, v in sorted(obj["components"].items()):
            yield "fleetwatch_autoscaling_component_ratio", {**base, "component": comp}, v


def strict_json(obj: object) -> object:
    """``obj`` with every non-finite float replaced by None (JSON has no NaN or
    Infinity: ``json.dumps(..., allow_nan=False)`` then never fails)."""
    if isinstance(obj, float):
        return None if obj != obj or obj in (math.inf, -math.inf) else obj
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    return obj


def slo_document(engine: Engine) -> dict[str, object]:
    """The ``/slo`` body: ``{"updated": Unix seconds of the last snapshot, "slos":
    [SLOStatus…]}``."""
    return {"updated": engine.last_update, "slos": engine.status()}


def autoscaling_document(engine: Engine) -> dict[str, object]:
    """The ``/autoscaling`` body: ``{"updated": …, "models": [ModelSignal…]}``;
    ``updated`` is the oldest of the models' last fresh data (Unix seconds: every signal
    of the document rests on data at least that recent), the last snapshot without
    models."""
    models = engine.autoscaling()
    times = [t for m in models if (t := m["freshness"]["updated"]) is not None]
    return {"updated": min(times) if times else engine.last_update, "models": models}
