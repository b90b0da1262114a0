"""Each policy's rule against its documented thresholds, through the same HPA code."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from fleetwatch.autoscale.hpa import calculate_replicas
from fleetwatch.autoscale.policies import POLICIES, ReplicaSample, policy, wva_desired
from fleetwatch.promql.names import metric_names
from tests.support.helpers import tool


def sample(waiting: float = 0.0, kv: float = 0.0, signal: float = 0.0,
           util: float = 0.0, floor: int = 1) -> ReplicaSample:
    return ReplicaSample(waiting=waiting, running=0.0, kv_usage=kv, signal=signal,
                         utilization=util, waiting_peak=waiting, kv_usage_peak=kv,
                         min_replicas=floor)


def desired(name: str, samples: list[ReplicaSample]) -> int:
    p = policy(name)
    assert p.target is not None
    n = len(samples)
    return calculate_replicas(p.target, p.metric(samples, n), n, n)


def test_fleetwatch_asks_for_ceil_of_the_summed_signal_with_the_floor() -> None:
    assert desired("fleetwatch", [sample(signal=1.4), sample(signal=1.3)]) == 3
    assert desired("fleetwatch", [sample(signal=0.1), sample(signal=0.1)]) == 1
    assert desired("fleetwatch", [sample(signal=0.1, floor=2), sample(signal=0.1)]) == 2
    q = policy("fleetwatch").queries("tiny-llm")["metric"]
    assert 'fleetwatch_autoscaling_signal_ratio{model="tiny-llm"}' in q


def test_production_stack_scales_on_five_waiting_requests_per_replica() -> None:
    assert desired("production-stack", [sample(waiting=12), sample(waiting=0)]) == 3
    assert desired("production-stack", [sample(waiting=5), sample(waiting=5)]) == 2
    assert desired("production-stack", [sample(waiting=0)] * 3) == 0  # min_replicas bounds it
    assert "state=\"waiting\"" in policy("production-stack").queries("m")["metric"]


def test_wva_saturation_thresholds() -> None:
    # a replica at KV ≥ 0.80 or queue ≥ 5 is saturated; all saturated: +1
    assert wva_desired([sample(kv=0.80), sample(waiting=5)], 2) == 3
    # average spare queue 5 − 2.5 = 2.5 < 3: +1
    assert wva_desired([sample(waiting=2.5), sample(waiting=2.5)], 2) == 3
    # average spare KV 0.80 − 0.75 = 0.05 < 0.10: +1
    assert wva_desired([sample(kv=0.75), sample(kv=0.75)], 2) == 3
    # spare queue exactly 3 and spare KV 0.30: hold, and N−1 would not be safe
    assert wva_desired([sample(waiting=2, kv=0.5), sample(waiting=2, kv=0.5)], 2) == 2


def test_wva_removes_one_only_when_n_minus_1_stay_safe() -> None:
    # 3 × KV 0.45 → 2 replicas at 0.675: spare 0.125 ≥ 0.10: −1
    assert wva_desired([sample(kv=0.45)] * 3, 3) == 2
    # 3 × KV 0.50 → 0.75: spare 0.05 < 0.10: hold
    assert wva_desired([sample(kv=0.50)] * 3, 3) == 3
    # the queue side: 3 × 1 waiting → 1.5 each: spare 3.5 ≥ 3: −1; 3 × 1.5 → 2.25: spare 2.75: hold
    assert wva_desired([sample(waiting=1)] * 3, 3) == 2
    assert wva_desired([sample(waiting=1.5)] * 3, 3) == 3
    assert wva_desired([sample()], 1) == 1


def test_utilization_targets_seventy_percent() -> None:
    assert desired("hpa-utilization", [sample(util=0.9), sample(util=0.9)]) == 3
    assert desired("hpa-utilization", [sample(util=0.72), sample(util=0.68)]) == 2
    assert desired("hpa-utilization", [sample(util=0.2)] * 4) == 2


def test_registry_names_are_unique_and_documented() -> None:
    names = [p.name for p in POLICIES]
    assert len(set(names)) == len(names)
    assert {"fleetwatch", "production-stack", "wva", "hpa-utilization", "static"} == set(names)
    assert policy("static").target is None
    for p in POLICIES:
        if p.target is not None:
            assert p.source and "metric" in p.queries("m"), p.name
    with pytest.raises(KeyError, match="choose from"):
        policy("cpu")


def test_every_query_is_valid_promql_for_a_hostile_model_name(tmp_path: Path) -> None:
    rules = [{"record": f"fleetwatch_test:{p.name.replace('-', '_')}:{key}", "expr": q}
             for p in POLICIES for key, q in p.queries('we"ird\\model\n').items()]
    assert len(rules) >= 6
    path = tmp_path / "queries.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "policies", "rules": rules}]}),
                    encoding="utf-8")
    res = subprocess.run([tool("promtool"), "check", "rules", str(path)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    names = metric_names(policy("production-stack").queries("m")["metric"])
    assert names == {"modelserver_requests_active"}


def test_fleetwatch_query_takes_the_larger_of_signal_sum_and_floor(tmp_path: Path) -> None:
    """promtool evaluates the query on series of two sidecars: Σ signal 1.4 + 1.3 = 2.7
    against a floor of 2; then Σ 0.3 + 0.4 against the floor 2; then no series at all."""
    q = policy("fleetwatch").queries("m")["metric"]
    (tmp_path / "q.rules.yml").write_text(yaml.safe_dump(
        {"groups": [{"name": "q", "rules": [{"record": "fleetwatch_test:q", "expr": q}]}]}),
        encoding="utf-8")
    series = [
        {"series": 'fleetwatch_autoscaling_signal_ratio{model="m",instance="a"}',
         "values": "1.4 0.3 stale"},
        {"series": 'fleetwatch_autoscaling_signal_ratio{model="m",instance="b"}',
         "values": "1.3 0.4 stale"},
        {"series": 'fleetwatch_autoscaling_min_replicas{model="m",instance="a"}',
         "values": "2 2 stale"},
    ]
    cases = [("0m", 2.7), ("1m", 2.0), ("2m", 1.0)]
    tests = {"rule_files": ["q.rules.yml"], "evaluation_interval": "1m", "tests": [
        {"interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": "fleetwatch_test:q", "eval_time": t,
             "exp_samples": [{"labels": "fleetwatch_test:q", "value": v}]}
            for t, v in cases]}]}
    (tmp_path / "q.test.yml").write_text(yaml.safe_dump(tests), encoding="utf-8")
    res = subprocess.run([tool("promtool"), "test", "rules", "q.test.yml"], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
