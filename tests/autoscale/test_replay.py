"""The advisory twin on the real trace with the replica model of the real-vLLM sweep:
every request accounted for, the static pool never scales, fleetwatch's signal scales
out during a burst and in after it."""

from __future__ import annotations

import dataclasses

import pytest

from fleetwatch.autoscale.policies import POLICIES, policy
from fleetwatch.autoscale.replay import ReplayConfig, ReplayResult, replay_policies, run_policy
from fleetwatch.autoscale.replica import ReplicaModel
from fleetwatch.autoscale.trace import Request, TraceMapping, map_trace, segment
from fleetwatch.slo.spec import SLOSpec

MAPPING = TraceMapping(time_compression=10.0, token_scale=0.025, output_token_scale=1.0,
                       max_input_tokens=512, max_output_tokens=256)
#: trace minutes 41–50: 28, 205, 245, 99, 0, 0, 32, 0, 0, 0 arrivals — a burst, then quiet
BURST = (2460.0, 600.0)


def config(spec: SLOSpec, capacity: float, **kw: object) -> ReplayConfig:
    assert spec.sli.latency is not None
    return ReplayConfig(mapping=MAPPING, ttft_seconds=spec.sli.latency.threshold_seconds,
                        itl_seconds=0.05, objective=spec.objective, capacity=capacity,
                        duration_seconds=BURST[1], **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def burst(azure: list[Request]) -> list[Request]:
    return map_trace(segment(azure, *BURST), MAPPING)


@pytest.fixture(scope="module")
def result(burst: list[Request], sweep_fit: tuple[ReplicaModel, SLOSpec, float],
           ) -> ReplayResult:
    model, spec, capacity = sweep_fit
    return replay_policies(burst, model, config(spec, capacity), POLICIES, policy("static"))


def test_every_policy_accounts_for_every_request(burst: list[Request],
                                                 result: ReplayResult) -> None:
    assert result.requests == len(burst) > 500
    assert result.span_seconds == MAPPING.seconds(BURST[1])
    assert [r.policy for r in result.results] == [p.name for p in POLICIES]
    for r in result.results:
        assert r.requests == len(burst)
        assert 0.0 <= r.goodput <= r.ttft_attainment <= 1.0
        assert r.replica_seconds > 0 and r.dropped >= 0


def test_static_pool_never_scales_and_meets_the_objective_every_minute(
        result: ReplayResult) -> None:
    static = next(r for r in result.results if r.policy == "static")
    assert static.scale_events == 0 and static.cost_ratio == 1.0
    assert {p.replicas for p in static.timeline} == {result.static_replicas}
    assert static.ttft_attainment >= 0.99 and static.recovery_seconds == 0.0


def test_static_pool_is_the_smallest_that_meets_every_minute(
        burst: list[Request], sweep_fit: tuple[ReplicaModel, SLOSpec, float],
        result: ReplayResult) -> None:
    model, spec, capacity = sweep_fit
    smaller = result.static_replicas - 1
    assert smaller >= 1
    cfg = config(spec, capacity)
    run = run_policy(burst, model, cfg, policy("static"), smaller)
    width = MAPPING.seconds(60.0)
    minutes: dict[int, list[bool]] = {}
    for i, r in enumerate(burst):
        minutes.setdefault(int(r.arrival // width), []).append(
            not run.dropped[i] and run.ttft[i] <= cfg.ttft_seconds)
    assert any(sum(ok) < 0.99 * len(ok) for ok in minutes.values())


def test_fleetwatch_scales_out_in_the_burst_and_in_after_it(result: ReplayResult) -> None:
    fw = next(r for r in result.results if r.policy == "fleetwatch")
    width = MAPPING.seconds(60.0)
    start = [p.replicas for p in fw.timeline if p.time < width]
    during = [p.replicas for p in fw.timeline if width <= p.time < 3 * width]
    after = [p.replicas for p in fw.timeline if p.time >= 9 * width]
    assert max(during) > max(start)
    assert after and after[-1] < max(during)
    assert fw.scale_events >= 2


def test_a_slow_cold_start_keeps_the_sidecars_floor(
        burst: list[Request], sweep_fit: tuple[ReplicaModel, SLOSpec, float]) -> None:
    """A cold start above autoscaling.cold_start_bound_seconds (120 s): the sidecars
    recommend cold_start_min_replicas (2), and fleetwatch's query never goes below it."""
    model, spec, capacity = sweep_fit
    cfg = config(spec, capacity)
    quick = run_policy(burst, model, cfg, policy("fleetwatch"), 1)
    slow = run_policy(burst, dataclasses.replace(model, cold_start_seconds=200.0), cfg,
                      policy("fleetwatch"), 1)
    assert min(p.replicas for p in quick.timeline) == 1
    assert min(p.replicas for p in slow.timeline) == cfg.targets.cold_start_min_replicas == 2
