"""The mapping and the static pool of the live experiment, chosen before any policy runs:
the mapped trace replayed open-loop through the replica's own scheduler
(`llm_engine.Engine`, `CALIBRATED`) in virtual time, on N replicas behind a
least-connections balancer, with nothing else on the machine.

What it answers: at a time compression, how many replicas does a static pool need so that
every trace minute meets the TTFT objective (the static pool "sized for the peak", the
rule of ``fleetwatch autoscale replay``)? A mapping under which no pool of the
experiment's size meets it cannot be the experiment's: the static pool would miss its SLO
however idle the machine, and the run would compare nothing.

    python benchmarks/autoscale/sizing.py --segment 0:900 --compression 2 --compression 5

It prints, per compression and pool size, the TTFT attainment over the segment and in its
worst trace minute. Deterministic.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.autoscale.llm_engine import CALIBRATED, Engine, EngineConfig, Step
from benchmarks.autoscale.llm_engine import Request as EngineRequest

from fleetwatch.autoscale.trace import Request, TraceMapping

#: Trace seconds per attainment bucket of the static-pool rule.
MINUTE_S = 60.0
_ARRIVE, _QUEUE, _STEP_END = 0, 1, 2


def simulate_pool(config: EngineConfig, requests: Sequence[Request], replicas: int
                  ) -> list[float]:
    """Each request's time to first token (s, the same order as ``requests``) when the
    replay's arrivals (``Request.arrival``, replay seconds) reach ``replicas`` engines
    through a least-connections balancer (ties to the lowest index): the request goes to
    the engine with the fewest requests in flight, reaches its scheduler ``frontend_s``
    later, and its TTFT is counted as `simulate_closed_loop` counts it (the frontend
    and the first token's delivery, `first_token_delay_s`, included)."""
    if replicas < 1:
        raise ValueError(f"replicas {replicas}: must be ≥ 1")
    engines = [Engine(config) for _ in range(replicas)]
    in_flight = [0] * replicas
    current: list[Step | None] = [None] * replicas
    # events: (time, order, kind, index): ARRIVE and QUEUE carry a request's index (it
    # reaches the balancer, then its engine's scheduler after `frontend_s`), STEP_END
    # an engine's
    events = [(r.arrival, n, _ARRIVE, n) for n, r in enumerate(requests)]
    heapq.heapify(events)
    order = len(requests)
    owner = [0] * len(requests)
    ttft = [float("nan")] * len(requests)

    def push(at: float, kind: int, index: int) -> None:
        nonlocal order
        heapq.heappush(events, (at, order, kind, index))
        order += 1

    def start_step(k: int, now: float) -> None:
        current[k] = engines[k].step(now) if engines[k].busy else None
        step = current[k]
        if step is not None:
            push(now + step.duration_s, _STEP_END, k)

    while events:
        now, _, kind, index = heapq.heappop(events)
        if kind == _ARRIVE:
            k = owner[index] = min(range(replicas), key=in_flight.__getitem__)
            in_flight[k] += 1
            push(now + config.frontend_s, _QUEUE, index)
        elif kind == _QUEUE:
            k, r = owner[index], requests[index]
            engines[k].add(EngineRequest(index, r.input_tokens, r.output_tokens, now))
            if current[k] is None:
                start_step(k, now)
        else:
            step = current[index]
            assert step is not None
            for done in step.finished:
                in_flight[index] -= 1
                assert done.first_token_s is not None
                ttft[done.request_id] = (done.first_token_s - done.queued_s
                                         + config.first_token_delay_s(done.first_batch))
            start_step(index, now)
    return ttft


@dataclass(frozen=True, slots=True)
class PoolAttainment:
    """A static pool's TTFT attainment over the segment and in its worst trace minute."""

    replicas: int
    attainment: float
    worst_minute: float


def pool_attainment(config: EngineConfig, requests: Sequence[Request], mapping: TraceMapping,
                    replicas: int, ttft_slo_s: float) -> PoolAttainment:
    """`simulate_pool` scored against ``ttft_slo_s``, overall and per trace minute."""
    ttft = simulate_pool(config, requests, replicas)
    minutes: dict[int, list[bool]] = defaultdict(list)
    for r, t in zip(requests, ttft, strict=True):
        minutes[int(r.arrival * mapping.time_compression // MINUTE_S)].append(t <= ttft_slo_s)
    met = [t <= ttft_slo_s for t in ttft]
    return PoolAttainment(replicas, sum(met) / len(met) if met else 1.0,
                          min((sum(v) / len(v) for v in minutes.values()), default=1.0))


def static_size(config: EngineConfig, requests: Sequence[Request], mapping: TraceMapping,
                ttft_slo_s: float, objective: float, max_replicas: int) -> int | None:
    """The smallest pool whose every trace minute meets ``objective``; None when no pool
    up to ``max_replicas`` does."""
    for n in range(1, max_replicas + 1):
        if pool_attainment(config, requests, mapping, n, ttft_slo_s).worst_minute >= objective:
            return n
    return None


def main() -> None:
    """Print the pools' attainment per compression (see the module docstring)."""
    from benchmarks.autoscale.run import MAPPING, OBJECTIVE, TTFT_SLO_S, load_segment

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segment", default="0:900", help="START:DURATION, trace seconds")
    parser.add_argument("--compression", type=float, action="append")
    parser.add_argument("--max-replicas", type=int, default=8)
    args = parser.parse_args()
    start, duration = (float(x) for x in args.segment.split(":"))
    for c in args.compression or [MAPPING.time_compression]:
        mapping = replace(MAPPING, time_compression=c)
        requests = load_segment(start, duration, mapping)
        for n in range(1, args.max_replicas + 1):
            p = pool_attainment(CALIBRATED, requests, mapping, n, TTFT_SLO_S)
            print(f"compression {c:g} replicas {n}: attainment {p.attainment:.2%}, "
                  f"worst minute {p.worst_minute:.2%}")
        size = static_size(CALIBRATED, requests, mapping, TTFT_SLO_S, OBJECTIVE,
                           args.max_replicas)
        print(f"compression {c:g}: static pool sized for the peak = {size}")


if __name__ == "__main__":
    main()
