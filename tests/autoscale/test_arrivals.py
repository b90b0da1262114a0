"""Arrivals from per-step counts (:func:`fleetwatch.autoscale.arrivals.requests_from_counts`)."""

from __future__ import annotations

import pytest

from fleetwatch.autoscale.arrivals import StepCounts, requests_from_counts


def test_requests_are_spread_evenly_with_their_steps_mean_lengths() -> None:
    steps = [StepCounts(1000.0, 4.0, 400.0, 40.0), StepCounts(1060.0, 2.0, 100.0, 1.0)]
    got = requests_from_counts(steps, 60.0)
    assert [r.arrival for r in got] == [7.5, 22.5, 37.5, 52.5, 75.0, 105.0]
    assert [(r.input_tokens, r.output_tokens) for r in got] == [(100, 10)] * 4 + [(50, 1)] * 2


def test_fractions_carry_so_the_total_is_the_rounded_sum() -> None:
    steps = [StepCounts(60.0 * i, 0.4, 40.0, 4.0) for i in range(10)]
    got = requests_from_counts(steps, 60.0)
    assert len(got) == 4  # 10 × 0.4, not 10 × round(0.4) = 0
    assert all(r.output_tokens >= 1 for r in got)


def test_no_steps_no_requests_and_a_bad_step_raises() -> None:
    assert requests_from_counts([], 60.0) == []
    with pytest.raises(ValueError, match="step 0"):
        requests_from_counts([StepCounts(0.0, 1.0, 1.0, 1.0)], 0.0)
