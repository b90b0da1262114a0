"""Kubernetes' HPA algorithm against the documented behaviour: the replica calculator
and its tolerance, scale-up policies, scale-down stabilization, bounds, compression."""

from __future__ import annotations

from fleetwatch.autoscale.hpa import (
    HPA,
    Behavior,
    HPASpec,
    MetricTarget,
    ScalingPolicy,
    ScalingRules,
    calculate_replicas,
)


def test_calculator_doubles_and_halves_as_documented() -> None:
    # the docs: current 200m for a desired 100m doubles the replicas, 50m halves them
    v = MetricTarget("Value", 0.1)
    assert calculate_replicas(v, 0.2, current=3, ready=3) == 6
    assert calculate_replicas(v, 0.05, current=4, ready=4) == 2
    u = MetricTarget("Utilization", 0.7)
    assert calculate_replicas(u, 0.9, current=2, ready=2) == 3  # ceil(2 · 0.9 / 0.7)


def test_average_value_divides_the_total_by_the_target() -> None:
    a = MetricTarget("AverageValue", 1.0)
    assert calculate_replicas(a, 7.3, current=2, ready=2) == 8
    assert calculate_replicas(a, 0.4, current=5, ready=5) == 1


def test_tolerance_keeps_the_count_within_ten_percent() -> None:
    a = MetricTarget("AverageValue", 1.0)
    assert calculate_replicas(a, 10.9, current=10, ready=10) == 10  # ratio 1.09
    assert calculate_replicas(a, 11.2, current=10, ready=10) == 12  # ratio 1.12
    assert calculate_replicas(a, 9.1, current=10, ready=10) == 10
    assert calculate_replicas(a, float("nan"), current=4, ready=4) == 4


def test_default_scale_up_is_max_of_100_percent_and_4_pods_per_15_s() -> None:
    hpa = HPA(HPASpec(1, 100, MetricTarget("AverageValue", 1.0)))
    assert hpa.step(0.0, 1, 1, 40.0) == 5  # max(2 · 1, 1 + 4)
    assert hpa.step(15.0, 5, 5, 40.0) == 10  # max(2 · 5, 5 + 4)
    assert hpa.step(30.0, 10, 10, 40.0) == 20
    assert hpa.step(45.0, 20, 20, 40.0) == 40


def test_scale_up_within_one_period_counts_pods_already_added() -> None:
    hpa = HPA(HPASpec(1, 100, MetricTarget("AverageValue", 1.0), sync_period_seconds=5.0))
    assert hpa.step(0.0, 1, 1, 40.0) == 5
    # 5 s later, same 15 s period: the period started at 1 replica, so at most 5 still
    assert hpa.step(5.0, 5, 5, 40.0) == 5
    assert hpa.step(15.5, 5, 5, 40.0) == 10


def test_scale_down_waits_for_the_300_s_stabilization_window() -> None:
    hpa = HPA(HPASpec(1, 100, MetricTarget("AverageValue", 1.0)))
    assert hpa.step(0.0, 8, 8, 8.0) == 8
    for t in range(15, 301, 15):
        assert hpa.step(float(t), 8, 8, 2.0) == 8, t  # the 8 at t=0 is in the window
    assert hpa.step(315.0, 8, 8, 2.0) == 2  # 100 % per 15 s: straight to the answer


def test_bounds_clamp_the_answer() -> None:
    hpa = HPA(HPASpec(2, 6, MetricTarget("AverageValue", 1.0)))
    assert hpa.step(0.0, 2, 2, 50.0) == 6
    hpa = HPA(HPASpec(2, 6, MetricTarget("AverageValue", 1.0),
                      behavior=Behavior(scale_down=ScalingRules(0.0, (ScalingPolicy("Percent", 100, 15.0),)))))
    assert hpa.step(0.0, 4, 4, 0.1) == 2


def test_scale_down_policy_in_pods_limits_each_period() -> None:
    rules = ScalingRules(0.0, (ScalingPolicy("Pods", 1, 60.0),))
    hpa = HPA(HPASpec(1, 10, MetricTarget("AverageValue", 1.0), behavior=Behavior(scale_down=rules)))
    assert hpa.step(0.0, 6, 6, 1.0) == 5
    assert hpa.step(15.0, 5, 5, 1.0) == 5  # one pod per 60 s
    assert hpa.step(61.0, 5, 5, 1.0) == 4


def test_compression_divides_every_duration() -> None:
    spec = HPASpec(1, 10, MetricTarget("AverageValue", 1.0)).compressed(10.0)
    assert spec.sync_period_seconds == 1.5
    assert spec.behavior.scale_down.stabilization_window_seconds == 30.0
    assert spec.behavior.scale_up.policies[1].period_seconds == 1.5
    hpa = HPA(spec)
    assert hpa.step(0.0, 6, 6, 6.0) == 6
    assert hpa.step(29.0, 6, 6, 1.0) == 6
    assert hpa.step(31.0, 6, 6, 1.0) == 1
