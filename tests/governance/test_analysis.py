"""The rollout gate as analysis templates: golden files, the real CRD schemas of Argo
Rollouts' AnalysisTemplate and Flagger's MetricTemplate, and the query's values evaluated
by promtool on sidecars' ``fleetwatch_rollout_verdict`` series."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleetwatch.governance.analysis import FAIL, PASS, WAIT, GateSettings, gate_query, yaml_files
from tests.support.helpers import tool
from tests.support.k8s_schemas import errors

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from regen_governance_golden import GOLDEN, golden_files


def test_output_equals_golden_files() -> None:
    files = golden_files()
    on_disk = {p.name: p.read_text() for p in GOLDEN.iterdir()}
    assert files == on_disk, "run ./dev golden and review the diff"


@pytest.mark.parametrize("settings", [GateSettings(),
                                      GateSettings(namespace="inference", name="gate")])
def test_templates_validate_against_the_real_crds(settings: GateSettings) -> None:
    docs = {f: yaml.safe_load(t) for f, t in yaml_files(settings).items()}
    assert {(d["apiVersion"], d["kind"]) for d in docs.values()} == {
        ("argoproj.io/v1alpha1", "AnalysisTemplate"), ("flagger.app/v1beta1", "MetricTemplate")}
    for name, doc in docs.items():
        assert errors(doc) == [], name


def test_a_misspelt_field_is_refused_by_the_schema() -> None:
    doc = yaml.safe_load(yaml_files(GateSettings())["argo-analysistemplate.yaml"])
    doc["spec"]["metrics"][0]["sucessCondition"] = doc["spec"]["metrics"][0].pop(
        "successCondition")
    assert errors(doc)


def _series(replica: str, candidate: str, verdict: str) -> list[dict[str, str]]:
    """One replica's one-hot verdict set for model m, baseline 1."""
    return [{"series": f'fleetwatch_rollout_verdict{{instance="{replica}", model="m", '
                       f'baseline="1", candidate="{candidate}", verdict="{v}"}}',
             "values": f"{1 if v == verdict else 0}x5"}
            for v in ("better", "same", "worse", "not_enough_data")]


def test_the_query_encodes_the_verdict(tmp_path: Path) -> None:
    """Candidate 2: same on one replica, worse on the other → 2 (any replica's worse
    fails); candidate 3: same and not enough data → 1; candidate 4: same on both → 0;
    candidate 5: no sidecar compares it → 1."""
    series = (_series("a", "2", "same") + _series("b", "2", "worse")
              + _series("a", "3", "same") + _series("b", "3", "not_enough_data")
              + _series("a", "4", "same") + _series("b", "4", "better"))
    expected = {"2": FAIL, "3": WAIT, "4": PASS, "5": WAIT}
    rules = {"groups": [{"name": "gate", "rules": [
        {"record": f"gate_{c}", "expr": gate_query("m", c)} for c in expected]}]}
    (tmp_path / "gate.rules.yml").write_text(yaml.safe_dump(rules))
    tests = {"rule_files": ["gate.rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [{"expr": f"gate_{c}", "eval_time": "2m",
                              "exp_samples": [{"labels": f"gate_{c}", "value": v}]}
                             for c, v in expected.items()]}]}
    (tmp_path / "gate.test.yml").write_text(yaml.safe_dump(tests))
    res = subprocess.run([tool("promtool"), "test", "rules", "gate.test.yml"], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def _argo_outcome(metric: dict[str, object], values: list[int]) -> str:
    """Argo Rollouts' assessment of one metric after these query values, as its analysis
    docs state it (docs/sources.md): failed measurements above ``failureLimit`` fail,
    inconclusive ones above ``inconclusiveLimit`` pause, reaching ``count`` succeeds,
    and a metric without ``count`` keeps running."""
    failed = inconclusive = 0
    for taken, v in enumerate(values, 1):
        failed += v == FAIL
        inconclusive += v == WAIT
        if failed > int(str(metric["failureLimit"])):
            return "Failed"
        if inconclusive > int(str(metric["inconclusiveLimit"])):
            return "Inconclusive"
        if "count" in metric and taken >= int(str(metric["count"])):
            return "Successful"
    return "Running"


@pytest.mark.parametrize(("count", "values", "outcome"), [
    (5, [PASS] * 5, "Successful"),
    (5, [WAIT] * 4 + [PASS], "Successful"),
    (5, [WAIT] * 5, "Inconclusive"),
    (5, [PASS, FAIL], "Failed"),
    (1, [PASS], "Successful"),
    (1, [WAIT], "Inconclusive"),
])
def test_an_inline_analysis_step_completes(count: int, values: list[int],
                                           outcome: str) -> None:
    # an inline `- analysis:` step waits for its AnalysisRun to complete: without `count`
    # a passing candidate never advanced; all-"wait" must pause rather than pass
    doc = yaml.safe_load(yaml_files(GateSettings(count=count))["argo-analysistemplate.yaml"])
    assert errors(doc) == []
    assert _argo_outcome(doc["spec"]["metrics"][0], values) == outcome
