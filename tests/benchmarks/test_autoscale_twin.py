"""The live experiment's twin comparison (benchmarks/autoscale/twin.py): the twin replays
what the live run had, and the agreement is the issue's bounds."""

from __future__ import annotations

from dataclasses import replace

import pytest
from benchmarks.autoscale import run, twin

SLO = twin.SLO(run.TTFT_SLO_S, run.ITL_SLO_S, run.OBJECTIVE)
#: The CI short version's mapping (5× arrivals: the burst's 150 trace seconds in 30 s of
#: replay), which the run lengths below are chosen for.
MAPPING = replace(run.MAPPING, time_compression=5.0)


def _exp(**windows: float) -> run.Experiment:
    return run.Experiment(tuple(run.load_segment(150.0, 150.0, MAPPING)), MAPPING,
                          150.0, max_replicas=4, static_replicas=4, **windows)


def test_the_twin_counts_the_static_pool_over_the_live_runs_length() -> None:
    exp = _exp()
    for duration in (40.0, 90.0):
        c = twin.compare(exp, twin.LiveRun("static", duration, 5.0, 0.5, 100.0), SLO)
        assert c.twin_replica_seconds == pytest.approx(4 * duration)
        assert (c.live_attainment, c.live_replica_seconds) == (0.5, 100.0)


def test_the_twin_takes_the_live_cold_start_and_windows() -> None:
    """A longer cold start or stabilization window changes what the twin's fleetwatch
    policy does on the burst: both reach the simulation."""
    exp, short = _exp(), _exp(scale_down_window_s=60.0, headroom_window_s=60.0)
    live = twin.LiveRun("fleetwatch", 80.0, 2.0, 0.5, 100.0)
    slow = twin.LiveRun("fleetwatch", 80.0, 20.0, 0.5, 100.0)
    base = twin.compare(exp, live, SLO)
    assert twin.compare(exp, slow, SLO).twin_attainment < base.twin_attainment
    assert twin.compare(short, live, SLO).twin_replica_seconds < base.twin_replica_seconds


@pytest.mark.parametrize(("twin_attainment", "twin_rs", "within"), [
    (0.819, 109.0, True), (0.781, 91.0, True), (0.8205, 100.0, False), (0.80, 110.5, False),
    (0.80, 89.5, False)])
def test_agreement_is_two_points_and_ten_percent(twin_attainment: float, twin_rs: float,
                                                 within: bool) -> None:
    c = twin.Comparison("fleetwatch", 0.80, twin_attainment, 100.0, twin_rs)
    assert c.within(twin.AGREEMENT) is within
    assert twin.row(c)["within"] is within


def test_the_table_has_a_row_per_policy() -> None:
    rows = [twin.row(twin.Comparison(p, 0.5, 0.6, 100.0, 80.0)) for p in ("a", "b")]
    lines = twin.table(rows).splitlines()
    assert len(lines) == 4
    assert lines[2] == "| a | 50.0% | 60.0% | +10.0 | 100 | 80 | -20% | no |"
