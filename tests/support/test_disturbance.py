"""The disturbance check of the live SLO scenarios (tests/support/disturbance.py)."""

from __future__ import annotations

import pytest

from fleetwatch.demo.load import StepResult
from tests.support.disturbance import (
    ATTEMPTS,
    MIN_DELIVERED,
    SLOW_MIN_DELIVERED,
    Delivery,
    inconclusive_when_disturbed,
    service_time_s,
    shortfalls,
    slo_sim_step,
    until_undisturbed,
)


def test_the_service_times_are_read_from_the_models() -> None:
    assert (service_time_s("1"), service_time_s("2")) == (0.008, 0.050)


def test_a_step_short_of_its_share_of_the_capacity_is_a_shortfall() -> None:
    # version 1: 125 requests/s; 4 s at 0.8 × 125 = 100/s is the edge
    at_edge = StepResult(concurrency=2, t_start=10.0, t_end=14.0, requests=400)
    under = StepResult(concurrency=4, t_start=10.0, t_end=14.0, requests=399)
    steps = [slo_sim_step("1", at_edge, 0.04), slo_sim_step("1", under, 0.04)]
    assert [d.what for d in shortfalls(steps)] == ["version 1 at concurrency 4"]
    assert str(shortfalls(steps)[0]) == (
        "version 1 at concurrency 4: 100 requests/s of the model's 125")


def test_a_version_slower_than_the_threshold_only_needs_its_events() -> None:
    # version 2 (50 ms) misses a 40 ms threshold anyway: half its capacity is enough
    slow = StepResult(concurrency=1, t_start=0.0, t_end=4.0, requests=41)  # 10.25/s of 20
    delivery = slo_sim_step("2", slow, 0.04)
    assert delivery.min_share == SLOW_MIN_DELIVERED and not delivery.short
    assert slo_sim_step("2", slow, 0.08).min_share == MIN_DELIVERED
    assert slo_sim_step("2", slow, 0.08).short


def test_a_step_of_no_time_is_short() -> None:
    assert Delivery("x", 0, 0.0, 100.0).short


def test_the_first_undisturbed_run_is_kept() -> None:
    runs = iter([["stalled"], [], ["never reached"]])
    calls: list[int] = []

    def run() -> list[str]:
        calls.append(1)
        return next(runs)

    assert until_undisturbed(run, lambda problems: problems, "x") == []
    assert len(calls) == 2


def test_when_every_run_is_disturbed_the_last_is_judged(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    counter = iter(range(ATTEMPTS))
    assert until_undisturbed(lambda: next(counter), lambda n: [f"run {n}"], "x") == ATTEMPTS - 1
    assert capsys.readouterr().err.count("was disturbed") == ATTEMPTS


def test_an_assertion_on_a_disturbed_run_is_inconclusive_not_a_failure() -> None:
    first_hit = 27
    with pytest.raises(pytest.skip.Exception, match=r"x: inconclusive.*stalled.*27 < 25"), \
            inconclusive_when_disturbed(["stalled 2 s"], "x"):
        assert first_hit < 25
    # an undisturbed run fails as any test
    with pytest.raises(AssertionError), inconclusive_when_disturbed([], "x"):
        assert first_hit < 25
    with inconclusive_when_disturbed(["stalled 2 s"], "x"):  # a disturbed run that passes
        assert first_hit > 25
