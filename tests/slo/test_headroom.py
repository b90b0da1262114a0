"""Issue 24 item 5: the signal keeps a burst headroom — mean + z · standard deviation of
the concurrency component over the last 300 s, capped by its peak — so a fleet that
shrank in a lull after a burst keeps room for the next one; on the engine's own output
(:func:`signals`) and on :class:`BurstHeadroom` directly."""

from __future__ import annotations

import math
import statistics

import pytest

from fleetwatch.slo.account.gauges import ModelGauges
from fleetwatch.slo.outputs.autoscaling import SignalHold, signals
from fleetwatch.slo.outputs.headroom import (
    HEADROOM_WINDOW_SECONDS,
    HEADROOM_Z,
    MAX_SAMPLES,
    BurstHeadroom,
    headroom_seconds,
)
from fleetwatch.slo.spec import AutoscalingSettings, SLOFile
from fleetwatch.slo.state import ModelKey, SLOModelState

MK = ModelKey("m", "1", "vllm")


def test_constant_load_gets_no_headroom_and_a_burst_is_capped_by_its_peak() -> None:
    h = BurstHeadroom(60.0)
    for k in range(12):
        assert h.update(5.0 * k, 2.0) == pytest.approx(2.0)
    # one burst among quiet intervals: mean + z·sd would exceed what the window saw
    h = BurstHeadroom(60.0)
    h.update(0.0, 0.0)
    assert h.update(5.0, 4.0) == pytest.approx(4.0)


def test_headroom_is_mean_plus_z_standard_deviations_of_the_window() -> None:
    h = BurstHeadroom(100.0)
    xs = [0.0] * 15 + [6.0, 0.0, 0.0, 5.0, 0.0]
    out = 0.0
    for k, x in enumerate(xs):
        out = h.update(5.0 * k, x)
    expected = statistics.fmean(xs) + HEADROOM_Z * statistics.pstdev(xs)
    assert expected < max(xs)
    assert out == pytest.approx(expected)
    assert pytest.approx(2.326, abs=1e-3) == HEADROOM_Z


def test_the_window_forgets_old_bursts_and_an_update_at_the_same_time_replaces() -> None:
    h = BurstHeadroom(30.0)
    h.update(0.0, 8.0)
    assert h.update(10.0, 0.0) > 0.0
    assert h.update(30.0, 0.0) == 0.0  # the burst left the window
    assert h.update(30.0, 3.0) == pytest.approx(3.0)  # asked again for the same interval
    assert len(h._samples) == 2


def test_a_clock_set_back_forgets_the_samples_it_has_not_reached_again() -> None:
    h = BurstHeadroom(300.0)
    for k in range(10):
        h.update(100.0 + 5.0 * k, 6.0 if k == 3 else 1.0)
    assert h.update(50.0, 1.0) == pytest.approx(1.0)  # every later sample, the burst too
    assert len(h._samples) == 1
    hold = SignalHold(60.0, BurstHeadroom(300.0))
    hold.update(100.0, 2.0, 2.0)
    assert hold.update(0.0, 0.5, 0.5) == pytest.approx(0.5)


def test_memory_is_bounded_and_sums_stay_exact_over_long_runs() -> None:
    h = BurstHeadroom(1e9)
    for k in range(5 * MAX_SAMPLES):
        h.update(float(k), 1e6 if k % 2 else 0.0)
    assert len(h._samples) <= MAX_SAMPLES and len(h._peaks) <= MAX_SAMPLES
    xs = [v for _, v in h._samples]
    assert h._sum == pytest.approx(math.fsum(xs))
    # a constant tail after wild values: no rounding residue becomes headroom
    h = BurstHeadroom(10.0)
    for k in range(MAX_SAMPLES + 7):
        h.update(float(k), 1e8 if k < 5 else 1.0)
    assert h.update(MAX_SAMPLES + 8.0, 1.0) == pytest.approx(1.0)


def test_bad_samples_are_not_kept_and_no_window_means_no_headroom() -> None:
    h = BurstHeadroom(60.0)
    h.update(0.0, 1.0)
    assert h.update(5.0, math.nan) == 0.0
    assert h.update(10.0, 1.0) == pytest.approx(1.0)
    assert BurstHeadroom(0.0).update(0.0, 5.0) == 0.0
    assert headroom_seconds(300.0, None) == headroom_seconds(300.0, 0.0) == 0.0
    assert headroom_seconds(300.0, 45.0) == 300.0
    assert AutoscalingSettings().headroom_window == HEADROOM_WINDOW_SECONDS == 300.0
    assert AutoscalingSettings.model_validate({"headroom_window": "2m"}).headroom_window == 120


def test_the_slo_files_window_sets_it_and_zero_turns_it_off() -> None:
    spec = _spec()
    states = {("ttft", MK): _state(spec)}
    lasts = []
    for window in (0.0, 60.0, 300.0):
        t = AutoscalingSettings(headroom_window=window)
        holds: dict[ModelKey, SignalHold] = {}
        for k, conc in enumerate([32.0] + [2.0] * 24):  # a burst, then 2 minutes of 2
            (row,) = signals(t, states, ModelGauges(concurrency={MK: conc}), {"m": 30.0},
                             holds=holds, now=5.0 * k)
        lasts.append(row["signal"])
    # off, or a window the burst has left: the lull's 0.25; 300 s: the burst's headroom
    assert lasts[0] == lasts[1] == pytest.approx(0.25)
    assert lasts[2] > 0.25


def test_the_hold_never_falls_below_the_headroom() -> None:
    hold = SignalHold(10.0, BurstHeadroom(100.0))
    assert hold.update(0.0, 3.0, 3.0) == pytest.approx(3.0)
    # past the cold start the peak is gone, but a burst of 3 among lulls is still in
    # the longer window: the signal stays above the lull's 0.1
    late = hold.update(20.0, 0.1, 0.1)
    assert 0.1 < late <= 3.0


def _state(spec: SLOFile) -> SLOModelState:
    return SLOModelState(spec.slos[0], MK, capacity=8.0)


def _spec() -> SLOFile:
    return SLOFile.model_validate({"slos": [{
        "name": "ttft", "selector": {"models": ["m"]},
        "sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.1}},
        "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
        "concurrency": {"envelope": 8}}]})


def test_signals_keep_room_for_the_last_minutes_bursts_once_a_cold_start_is_known() -> None:
    spec = _spec()
    states = {("ttft", MK): _state(spec)}
    t = AutoscalingSettings()

    def run(colds: dict[str, float]) -> list[float]:
        holds: dict[ModelKey, SignalHold] = {}
        out = []
        # a burst of 32 requests in the system (4 replicas' worth), then 2 minutes of 2
        for k, conc in enumerate([32.0] + [2.0] * 24):
            (row,) = signals(t, states, ModelGauges(concurrency={MK: conc}), colds,
                             holds=holds, now=5.0 * k)
            out.append(row["signal"])
        return out

    no_cold = run({})
    assert no_cold[-1] == pytest.approx(0.25)  # no cold start measured: no hold, no headroom
    with_cold = run({"m": 30.0})
    assert with_cold[1] == pytest.approx(4.0)  # within the cold start: the held peak
    # two minutes on, the held peak is gone; the headroom keeps more than the lull's 0.25
    assert 0.25 < with_cold[-1] < 4.0
