"""The clairvoyant and floor schedules of benchmarks/autoscale/bound.py: what they ask for,
and when."""

from __future__ import annotations

from benchmarks.autoscale import bound


def _ask(decide: bound.Controller, times: list[float]) -> list[int]:
    return [decide(t, [], 1, 1) for t in times]


def test_clairvoyant_asks_k_one_lead_ahead_of_an_arrival_and_holds_a_window() -> None:
    decide = bound.clairvoyant([50.0], k=3, lead_s=10.0, window_s=20.0)
    # 39: the arrival is 11 s ahead; 41: within the lead; 51: past it, held by the
    # window until 61 (the last ask of 3 was at 45); 66: released.
    assert _ask(decide, [39.0, 41.0, 45.0, 51.0, 60.0, 66.0]) == [1, 3, 3, 3, 3, 1]


def test_floor_holds_k_until_a_window_after_the_last_arrival() -> None:
    decide = bound.floor([5.0, 100.0], k=3, window_s=30.0)
    assert _ask(decide, [0.0, 50.0, 129.0, 131.0]) == [3, 3, 3, 1]
