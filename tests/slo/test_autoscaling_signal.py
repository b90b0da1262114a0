"""Issue 24 item 5: the autoscaling signal counts the requests in the system at the
interval's end as well as the interval's mean, and is held at its peak over one cold
start, so that a burst between two reads of the autoscaler still asks for its replicas
— on the engine's own output (:func:`signals`) with gauges set by hand."""

from __future__ import annotations

import pytest

from fleetwatch.slo.account.gauges import ModelGauges
from fleetwatch.slo.outputs.autoscaling import SignalHold, components, hold_seconds, signals
from fleetwatch.slo.spec import AutoscalingSettings
from fleetwatch.slo.state import ModelKey

MK = ModelKey("m", "1", "vllm")


def test_requests_queued_at_the_intervals_end_count_before_the_mean_sees_them() -> None:
    t = AutoscalingSettings()
    # a quiet interval, then twelve requests at its end on a replica of capacity 8
    assert components(t, 8.0, 2.0, 12.0, None, None, None) == {"concurrency": 1.5}
    # a busy interval that has drained: the mean still counts it
    assert components(t, 8.0, 6.0, 0.0, None, None, None) == {"concurrency": 0.75}
    assert components(t, 8.0, 2.0, None, 0.25, 0.45, None) == {
        "concurrency": 0.25, "queue_wait": 0.5, "kv_cache": 0.5}
    assert components(t, None, 2.0, 12.0, None, None, 0.45) == {"gpu_memory": 0.5}


def test_signals_report_the_mean_and_need_a_capacity_for_the_concurrency_component() -> None:
    (row,) = signals(AutoscalingSettings(), {}, ModelGauges(concurrency={MK: 2.0}),
                     in_system={MK: 12.0})
    assert "concurrency" not in row["components"]  # no SLO: no capacity to divide by
    assert row["concurrency"] == 2.0  # the interval's mean, as before


def test_the_hold_returns_the_windows_peak_then_lets_it_go() -> None:
    hold = SignalHold(60.0)
    assert hold.update(0.0, 3.0) == 3.0
    assert hold.update(5.0, 1.0) == 3.0  # a lower interval: the peak is held
    assert hold.update(55.0, 2.0) == 3.0
    assert hold.update(60.0, 0.5) == 2.0  # the peak left the window; the next one holds
    assert hold.update(120.0, 0.5) == 0.5
    assert hold.update(121.0, 4.0) == 4.0  # a higher one takes over at once


def test_an_update_at_the_same_time_replaces_and_memory_stays_bounded() -> None:
    hold = SignalHold(10.0)
    assert hold.update(0.0, 5.0) == 5.0
    assert hold.update(0.0, 1.0) == 1.0  # asked again for the same interval
    for k in range(10_000):  # a falling series keeps every value the window can need
        hold.update(1.0 + k, 1e6 - k)
    assert len(hold._peaks) <= 11


def test_the_window_is_one_measured_cold_start() -> None:
    assert hold_seconds(60.0) == 60.0
    assert hold_seconds(None) == hold_seconds(0.0) == 0.0  # none measured: no hold


def gauges(kv: float) -> ModelGauges:
    return ModelGauges(kv_usage={MK: kv})


@pytest.mark.parametrize("window", [30.0, 120.0])
def test_signals_hold_the_peak_for_one_cold_start(window: float) -> None:
    t = AutoscalingSettings()  # kv target 0.9
    holds: dict[ModelKey, SignalHold] = {}
    colds = {"m": window}

    def at(now: float, kv: float) -> tuple[float, int, float]:
        (row,) = signals(t, {}, gauges(kv), colds, holds=holds, now=now)
        return row["signal"], row["desired_replicas"], row["components"]["kv_cache"]

    assert at(0.0, 2.7) == pytest.approx((3.0, 3, 3.0))
    # the burst is over: the components say so, the signal holds its peak
    assert at(window - 5.0, 0.45) == pytest.approx((3.0, 3, 0.5))
    assert at(window + 5.0, 0.45) == pytest.approx((0.5, 1, 0.5))
    # without holds (a one-off report): the last interval's signal
    (row,) = signals(t, {}, gauges(0.45), colds)
    assert row["signal"] == pytest.approx(0.5)


def test_no_hold_until_a_cold_start_is_measured_then_one_cold_start() -> None:
    t = AutoscalingSettings()
    holds: dict[ModelKey, SignalHold] = {}
    colds: dict[str, float] = {}

    def at(now: float, kv: float) -> float:
        (row,) = signals(t, {}, gauges(kv), colds, holds=holds, now=now)
        return row["signal"]
    assert at(0.0, 2.7) == pytest.approx(3.0)
    assert at(5.0, 0.45) == pytest.approx(0.5)  # the cold start is not known yet
    colds["m"] = 60.0  # the sidecar measured one
    assert at(10.0, 2.7) == pytest.approx(3.0)
    assert at(65.0, 0.45) == pytest.approx(3.0)
    assert at(71.0, 0.45) == pytest.approx(0.5)
