"""Exact SLIs from traces: each finished request judged against every latency objective
of every ``sli.source: traces`` SLO that selects its model.

A request is **good** for an SLO when each of its objectives holds (``value ≤
threshold``; a latency SLI has one objective, a goodput SLI several — "TTFT ≤ 200 ms and
TPOT ≤ 50 ms", the DistServe definition), at any threshold. A request that lacks a value
an objective needs (a Triton classic model has no TTFT) gives that SLO no event, except
TPOT of a one-token vLLM answer, which counts as 0 s — what vLLM's own
``request_time_per_output_token`` histogram records for it. With ``sampling: N`` each
traced request is N events (N good when good).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fleetwatch.slo.spec import SLOFile, SLOSpec
from fleetwatch.slo.state import ModelKey, TraceEvent
from fleetwatch.traces.facts import RequestFacts

Selects = Callable[[SLOSpec, ModelKey], bool]


def model_key(f: RequestFacts) -> ModelKey:
    """``(model, model_version, backend)`` of a request, as the normalized schema labels
    it."""
    return ModelKey(f.model, f.model_version, f.backend)


def is_good(f: RequestFacts, slo: SLOSpec) -> bool | None:
    """Whether the request meets every objective of the SLO; None when it lacks a value
    one of them needs (see module docstring)."""
    for o in slo.sli.objectives():
        v = f.metric(o.metric)
        if v is None and o.metric == "tpot" and f.completion_tokens is not None \
                and f.completion_tokens <= 1:
            v = 0.0
        if v is None:
            return None
        if v > o.threshold_seconds:
            return False
    return True


def judge(facts: Iterable[RequestFacts], slos: SLOFile, selects: Selects,
          now: float) -> list[TraceEvent]:
    """The events of finished requests (their ``concurrency`` estimated; 0 when not) for
    every traces SLO selecting their model (``selects(slo, model key)``), each at ``now``
    (Unix seconds of the caller's clock: when the request was judged). An event never
    takes its time from the spans: a span dated ahead would move every SLO's windows."""
    traced = [s for s in slos.slos if s.sli.source == "traces"]
    out: list[TraceEvent] = []
    for f in facts:
        mk = model_key(f)
        for slo in traced:
            if not selects(slo, mk):
                continue
            good = is_good(f, slo)
            if good is None:
                continue
            n = float(slo.sli.sampling)
            out.append(TraceEvent(slo.name, mk, now, f.concurrency or 0.0,
                                  n if good else 0.0, n))
    return out
