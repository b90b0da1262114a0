"""The live experiment's mapping and static pool (benchmarks/autoscale/sizing.py): the
replica's scheduler on a pool in virtual time, and the benchmark's own mapping checked
against it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from benchmarks.autoscale import run
from benchmarks.autoscale.llm_engine import CALIBRATED, Shape, simulate_closed_loop
from benchmarks.autoscale.sizing import pool_attainment, simulate_pool, static_size

from fleetwatch.autoscale.trace import Request


def test_a_request_alone_gets_the_closed_loop_ttft_of_one_client() -> None:
    ttft = simulate_pool(CALIBRATED, [Request(0.0, 35, 16)], 3)
    alone = simulate_closed_loop(CALIBRATED, [Shape(35, 16)], 1, 1).mean_ttft_s
    assert ttft == [pytest.approx(alone)]


def test_least_connections_spreads_simultaneous_requests() -> None:
    """Eight requests at once: on eight replicas each is alone; on one, all but the first
    (whose step starts as it arrives) wait for it and share the next, longer step."""
    burst = [Request(0.0, 35, 16) for _ in range(8)]
    spread, packed = simulate_pool(CALIBRATED, burst, 8), simulate_pool(CALIBRATED, burst, 1)
    assert max(spread) == pytest.approx(min(spread))
    assert packed[0] == pytest.approx(spread[0])
    assert min(packed[1:]) > 2 * max(spread)


def test_static_size_is_the_smallest_pool_meeting_every_minute() -> None:
    mapping = replace(run.MAPPING, time_compression=4.0)
    requests = run.load_segment(0, 900, mapping)
    size = static_size(CALIBRATED, requests, mapping, run.TTFT_SLO_S, run.OBJECTIVE, 8)
    assert size is not None and size > 1
    at = pool_attainment(CALIBRATED, requests, mapping, size, run.TTFT_SLO_S)
    below = pool_attainment(CALIBRATED, requests, mapping, size - 1, run.TTFT_SLO_S)
    assert at.worst_minute >= run.OBJECTIVE > below.worst_minute
    assert static_size(CALIBRATED, requests, mapping, run.TTFT_SLO_S, run.OBJECTIVE,
                       size - 1) is None


def test_the_benchmarks_static_pool_can_meet_the_objective_under_its_mapping() -> None:
    """The experiment's default pool, sized for the peak, meets the TTFT objective in
    every trace minute of the acceptance segment when nothing else slows it: otherwise
    the static pool would miss its SLO on any machine and the run would compare nothing."""
    requests = run.load_segment(0, 900, run.MAPPING)
    experiment = run.Experiment(tuple(requests), run.MAPPING, 900)
    size = static_size(CALIBRATED, requests, run.MAPPING, run.TTFT_SLO_S, run.OBJECTIVE,
                       experiment.max_replicas)
    assert size == experiment.static_replicas
