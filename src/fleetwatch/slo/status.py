"""The engine's outputs: the ``/slo`` status objects and the exported series.

:func:`status` gives one JSON-ready :class:`SLOStatus` per SLO and model;
:func:`iter_metrics` the ``(family, labels, value)`` of every ``fleetwatch_slo_*`` and
``fleetwatch_autoscaling_*`` series (names and label sets as in
:mod:`fleetwatch.labels.schema`; :mod:`.export` turns them into a collector). Windows are
written as :func:`~fleetwatch.slo.durations.format_duration` labels (``5m``, ``28d``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypedDict

from fleetwatch.slo.account import Ledger, ModelGauges
from fleetwatch.slo.autoscaling import ModelSignal
from fleetwatch.slo.bands import budget_remaining
from fleetwatch.slo.durations import format_duration
from fleetwatch.slo.judge import explain
from fleetwatch.slo.state import ALL, STATES, ModelKey, SLOModelState, band_sort

States = Mapping[tuple[str, ModelKey], SLOModelState]
#: ``(family name, labels, value)`` of one exported sample.
Sample = tuple[str, dict[str, str], float]


class SLOStatus(TypedDict):
    """One SLO on one model (JSON-ready)."""

    slo: str
    model: str
    model_version: str
    backend: str
    objective: float  # ratio 0–1
    sli: str  # latency | availability | timeslice
    state: str  # one of fleetwatch.slo.state.STATES
    explanation: str
    error_budget_remaining: float  # ratio of the period's budget (negative: overspent)
    capacity: float  # concurrent requests per replica
    envelope: float
    concurrency: float | None
    burn_rates: dict[str, dict[str, float | None]]  # window label → band → burn (None: no data)
    events: dict[str, float]  # band → events since start


def _num(v: float) -> float | None:
    return None if v != v else v


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
            "slo": name, "model": mk[0], "model_version": mk[1], "backend": mk[2],
            "objective": slo.objective, "sli": slo.sli.kind,
            "state": st.state, "explanation": explain(st),
            "error_budget_remaining": budget_remaining(g, t, slo.objective),
            "capacity": st.capacity, "envelope": slo.concurrency.envelope,
            "concurrency": gauges.concurrency.get(mk), "burn_rates": burn,
            "events": dict(st.events),
        })
    return out


def iter_metrics(ledger: Ledger, states: States,
                 signals: list[ModelSignal]) -> Iterator[Sample]:
    """Every exported sample: per SLO, model and band the event counters and burn rates
    by window; per SLO and model the budget remaining, capacity and one-hot state; per
    model the concurrency, autoscaling signal and components."""
    sums = ledger.windows.sums()
    for (name, mk), st in sorted(states.items()):
        base = {"slo": name, "model": mk[0], "model_version": mk[1], "backend": mk[2]}
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
        for s in STATES:
            yield "fleetwatch_slo_state", {**base, "state": s}, 1.0 if st.state == s else 0.0
    for obj in signals:
        base = {"model": obj["model"], "model_version": obj["model_version"],
                "backend": obj["backend"]}
        if obj["concurrency"] is not None:
            yield "fleetwatch_slo_concurrency", base, obj["concurrency"]
        yield "fleetwatch_autoscaling_signal_ratio", base, obj["signal"]
        for comp, v in sorted(obj["components"].items()):
            yield "fleetwatch_autoscaling_component_ratio", {**base, "component": comp}, v
