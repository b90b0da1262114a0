"""The twin's fleet: every request accounted for, the balancer, scale-out after the cold
start, drops at the queue bound."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from fleetwatch.autoscale.fleet import FleetConfig, simulate
from fleetwatch.autoscale.policies import ReplicaSample
from fleetwatch.autoscale.replica import LatencyCurve, ReplicaModel
from fleetwatch.autoscale.trace import Request

MODEL = ReplicaModel(slots=2, ttft=LatencyCurve(((1.0, 0.01), (2.0, 0.02))),
                     itl=LatencyCurve(((1.0, 0.01),)), ref_input_tokens=10,
                     kv_capacity_tokens=1000, cold_start_seconds=0.0)


def cfg(**kw: float) -> FleetConfig:
    base = {"interval_seconds": 1.0, "cold_start_seconds": 2.0, "wva_lookback_seconds": 4.0,
            "capacity": 2.0}
    base.update(kw)
    return FleetConfig(**base)  # type: ignore[arg-type]


def fixed(n: int):  # type: ignore[no-untyped-def]
    def decide(now: float, samples: Sequence[ReplicaSample], current: int, ready: int) -> int:
        return n
    return decide


def test_one_replica_serves_in_order_with_its_slots() -> None:
    reqs = [Request(0.0, 10, 11), Request(0.0, 10, 11), Request(0.0, 10, 11)]
    run = simulate(reqs, MODEL, cfg(), fixed(1))
    # two slots: the first two run at once (TTFT at 1 and 2 running), the third waits
    # for the first to finish: 0.01 + 10 · 0.01 = 0.11 s, then its own 0.02 s prefill
    assert run.ttft[0] == 0.01 and run.ttft[1] == 0.02
    assert math.isclose(run.ttft[2], 0.11 + 0.02)
    assert run.dropped == [False] * 3 and not run.events


def test_every_request_is_served_or_dropped_at_the_queue_bound() -> None:
    reqs = [Request(i * 0.001, 10, 50) for i in range(40)]
    run = simulate(reqs, MODEL, cfg(max_waiting=5), fixed(1))
    served = [not d for d in run.dropped]
    # each request holds a slot ≈ 0.5 s; within the 40 ms of arrivals two run, five wait
    assert sum(run.dropped) == 40 - 2 - 5
    assert all(math.isfinite(t) for t, s in zip(run.ttft, served, strict=True) if s)
    assert all(math.isnan(t) for t, s in zip(run.ttft, served, strict=True) if not s)
    assert sum(served) + sum(run.dropped) == 40


def test_new_replicas_take_traffic_only_after_the_cold_start() -> None:
    reqs = [Request(0.1 * i, 10, 2) for i in range(100)]
    asks = {"n": 1}

    def decide(now: float, samples: Sequence[ReplicaSample], current: int, ready: int) -> int:
        asks["n"] = 3 if now >= 1.0 else 1
        return asks["n"]
    run = simulate(reqs, MODEL, cfg(cold_start_seconds=2.5), decide)
    assert run.events[0].time == 1.0 and (run.events[0].before, run.events[0].after) == (1, 3)
    ready = {p.time: p.ready for p in run.timeline}
    assert ready[2.0] == 1 and ready[3.0] == 1 and ready[4.0] == 3
    # three replicas from 1 s (two of them starting), one before: replica-seconds
    assert math.isclose(run.replica_seconds, run.end + 2 * (run.end - 1.0))


def test_least_connections_spreads_a_burst() -> None:
    reqs = [Request(0.0, 10, 100) for _ in range(6)]
    run = simulate(reqs, MODEL, cfg(initial_replicas=3), fixed(3))
    # six requests on three replicas of two slots: nobody waits for a slot
    assert max(run.ttft) <= 0.02 + 1e-12


def test_the_signal_is_the_sidecars_held_at_its_peak_at_the_sidecars_cadence() -> None:
    """A burst within the first sidecar interval: a decision reads the signal the
    sidecar's code computed for each scrape interval (requests in the replica over it ÷
    capacity, queue wait ÷ its target), held at its peak for ``hold_seconds``."""
    reqs = [Request(0.0, 10, 21) for _ in range(4)]  # 2 slots: two run, two wait
    ttft = 0.01 + 20 * 0.01  # a request holds its slot ≈ 0.21 s

    def signals(**kw: float) -> dict[float, float]:
        seen: dict[float, float] = {}

        def record(now: float, samples: Sequence[ReplicaSample], current: int,
                   ready: int) -> int:
            seen[now] = samples[0].signal
            return 1
        run = simulate(reqs, MODEL, cfg(interval_seconds=2.0, scrape_seconds=0.5,
                                        capacity=4.0, **kw), record, horizon=10.0)
        assert max(run.ttft) < 0.25  # all four served within the first sidecar interval
        return seen
    held, unheld = signals(hold_seconds=3.0), signals()
    # [0, 0.5): four requests in the replica for ≈ 0.21 s, two for ≈ 0.22 s more
    peak = (4 * ttft + 2 * ttft) / 0.5 / 4.0
    assert held[2.0] == pytest.approx(peak, rel=0.05)
    # later intervals are empty: only the last queue wait (≈ 0.21 s ÷ 2 of 0.5 s) is left
    assert unheld[2.0] == pytest.approx(0.21 / 0.5 / 2, rel=0.05)
    assert unheld[2.0] < peak
    assert held[4.0] == unheld[4.0] == unheld[2.0]  # more than hold_seconds after it
