"""What the live scaler reads for each policy (benchmarks/autoscale/scaler.py `measure`),
against a test double of Prometheus that answers the sidecars' per-pod series."""

from __future__ import annotations

import math
from typing import Any

import pytest
from benchmarks.autoscale.scaler import measure

from fleetwatch.autoscale.policies import policy


class PrometheusDouble:
    """Test double: per-pod instant vectors for the sidecars' series, chosen by what the
    query selects; no series for anything else (a controller output nobody exports)."""

    def __init__(self, pods: list[str], waiting: float, kv: float) -> None:
        self.pods, self.waiting, self.kv = pods, waiting, kv
        self.queries: list[str] = []

    def query(self, expr: str) -> list[dict[str, Any]]:
        self.queries.append(expr)
        if expr.startswith("wva_desired_replicas"):
            return []
        if 'state="waiting"' in expr:
            value = self.waiting
        elif 'state="running"' in expr:
            value = 8.0
        elif "kv_cache_usage" in expr:
            value = self.kv
        elif "min_replicas" in expr or "signal_ratio" in expr:
            value = 1.0
        else:
            return []
        per_pod = [{"metric": {"pod": p}, "value": [0, str(value)]} for p in self.pods]
        return per_pod if "by (pod)" in expr else [
            {"metric": {}, "value": [0, str(value * len(self.pods))]}]


def test_wva_is_computed_from_the_pods_not_read_from_prometheus() -> None:
    """WVA's metric names its controller's output (with the model's selector): the
    scaler computes it from each ready pod's queue and KV peaks; one saturated replica
    (queue 6 ≥ 5) asks for one more."""
    prometheus = PrometheusDouble(["r0"], waiting=6.0, kv=0.2)
    assert measure(policy("wva"), prometheus, 1, ["r0"]) == 2.0  # type: ignore[arg-type]
    assert not any(q.startswith("wva_desired_replicas") for q in prometheus.queries)


@pytest.mark.parametrize(("waiting", "desired"), [(0.0, 1.0), (6.0, 3.0)])
def test_wva_scales_in_only_when_the_rest_stay_safe(waiting: float, desired: float) -> None:
    prometheus = PrometheusDouble(["r0", "r1"], waiting=waiting, kv=0.1)
    assert measure(policy("wva"), prometheus, 2, ["r0", "r1"]) == desired  # type: ignore[arg-type]


def test_a_query_without_series_reads_nan() -> None:
    """HPA on utilization here: no accelerator series, KEDA keeps the count."""
    prometheus = PrometheusDouble(["r0"], waiting=0.0, kv=0.0)
    assert math.isnan(measure(policy("hpa-utilization"), prometheus, 1, ["r0"]))  # type: ignore[arg-type]
