"""The generated rules and Alertmanager configuration, checked by the real tools (Debian's
prometheus and prometheus-alertmanager packages, installed by .ci/run):

* ``promtool check rules`` on every generated rule file and on the PrometheusRule's groups;
* ``promtool test rules`` on the generated behaviour tests (per alert kind: fires above its
  threshold and not below, regression vs overload, multiwindow, inhibition labels);
* ``amtool check-config`` and ``amtool config routes test``: a page of a team's model reaches
  that team's pager, a ticket its ticket receiver, unowned alerts the default receivers,
  interference and GPU-degraded tickets the platform team's ticket receiver (not the
  model team's pager).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from fleetwatch.alerts.generate import (
    ALERTMANAGER_FILE,
    OPERATOR_FILE,
    RULE_FILES,
    TESTS_FILE,
    build_alertmanager_file,
    build_rules,
    load_inputs,
)
from tests.support.helpers import GOLDEN, ROOT, tool

ALERTS = GOLDEN / "alerts"
EXAMPLES = ROOT / "examples"


def run(*cmd: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def examples_out(tmp_path_factory):
    """Everything generated from the examples (examples/models.yaml, slos.yaml,
    receivers.yaml), as a user would."""
    out = tmp_path_factory.mktemp("examples")
    registry, slos, cfg = load_inputs(EXAMPLES / "models.yaml", EXAMPLES / "slos.yaml",
                                      EXAMPLES / "receivers.yaml")
    files = build_rules(registry, slos, cfg, ["examples"], tests=True)
    files[ALERTMANAGER_FILE], _ = build_alertmanager_file(registry, cfg, slos, ["examples"])
    for name, text in files.items():
        (out / name).write_text(text)
    return out


@pytest.mark.parametrize("where", ["golden", "examples"])
def test_promtool_check_rules_on_every_rule_file(where, examples_out, tmp_path):
    d = ALERTS if where == "golden" else examples_out
    files = [str(d / f) for f in RULE_FILES]
    # the PrometheusRule's spec is a rule file too
    spec = yaml.safe_load((d / OPERATOR_FILE).read_text())["spec"]
    (tmp_path / "operator.rules.yml").write_text(yaml.safe_dump(spec))
    files.append(str(tmp_path / "operator.rules.yml"))
    res = run(tool("promtool"), "check", "rules", *files)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("SUCCESS") == len(files)


def test_promtool_behaviour_tests(examples_out):
    """The generated behaviour tests of the golden specs and of the examples (run side by
    side: each takes ~15 s)."""
    promtool = tool("promtool")
    procs = {d: subprocess.Popen([promtool, "test", "rules", TESTS_FILE], cwd=d,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for d in (ALERTS, examples_out)}
    for d, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{d}: {out}"
        assert "SUCCESS" in out


def test_behaviour_tests_catch_a_wrong_threshold(tmp_path):
    """The generated tests are not vacuous: a rule with another threshold fails them."""
    for name in RULE_FILES:
        shutil.copy(ALERTS / name, tmp_path / name)
    doc = yaml.safe_load((ALERTS / TESTS_FILE).read_text())
    group = "SLO llm-ttft, tier 1h/5m: burn just above and below 13.44x"
    doc["tests"] = [t for t in doc["tests"] if t["name"].startswith(group)]
    assert len(doc["tests"]) == 1
    (tmp_path / TESTS_FILE).write_text(yaml.safe_dump(doc))
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    slo = (tmp_path / "fleetwatch-slo.rules.yml").read_text()
    assert slo.count("> 13.44\n") == 12  # regression: 4 (2 windows, twice), overload: 8
    # the first regression rule's threshold, in both windows and both branches of the join
    (tmp_path / "fleetwatch-slo.rules.yml").write_text(slo.replace("> 13.44\n", "> 12\n", 4))
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=tmp_path)
    assert res.returncode != 0
    assert group in res.stdout + res.stderr


def _only_groups(src, tmp_path, prefix: str) -> None:
    """The rule files generated in ``src`` and its behaviour tests' groups named
    ``prefix…``."""
    for name in RULE_FILES:
        shutil.copy(src / name, tmp_path / name)
    doc = yaml.safe_load((src / TESTS_FILE).read_text())
    doc["tests"] = [t for t in doc["tests"] if t["name"].startswith(prefix)]
    assert len(doc["tests"]) == 1
    (tmp_path / TESTS_FILE).write_text(yaml.safe_dump(doc))


def test_engine_frozen_alert_fires_in_promtool(examples_out, tmp_path):
    """FleetwatchEngineFrozen fires for the sidecar whose model is frozen, naming model and
    instance; a rule that ignores the reason fires for a target down too and fails."""
    _only_groups(examples_out, tmp_path, "Engine frozen")
    group = yaml.safe_load((tmp_path / TESTS_FILE).read_text())["tests"][0]
    fired = [a for t in group["alert_rule_test"] for a in t["exp_alerts"]]
    assert [(a["exp_labels"]["model"], a["exp_labels"]["instance"]) for a in fired] \
        == [(fired[0]["exp_labels"]["model"], "sidecar-a:9810")]
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    platform = (tmp_path / "fleetwatch-platform.rules.yml").read_text()
    frozen = 'fleetwatch_autoscaling_signal_stale{reason="frozen"} == 1'
    assert platform.count(frozen) == 2  # both branches of the owner join
    (tmp_path / "fleetwatch-platform.rules.yml").write_text(
        platform.replace(frozen, "fleetwatch_autoscaling_signal_stale == 1"))
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=tmp_path)
    assert res.returncode != 0


def test_fleet_signal_sums_only_scraped_sidecars_in_promtool(examples_out, tmp_path):
    """model:fleetwatch_autoscaling_signal:sum leaves out a sidecar whose up is 0 (its
    last signal still stored); without the health filter the recording test fails."""
    _only_groups(examples_out, tmp_path, "Recording rules")
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    rec = (tmp_path / "fleetwatch-recording.rules.yml").read_text()
    health = " and on (job, instance) (up == 1)"
    assert rec.count(health) == 1
    (tmp_path / "fleetwatch-recording.rules.yml").write_text(rec.replace(health, ""))
    res = run(tool("promtool"), "test", "rules", TESTS_FILE, cwd=tmp_path)
    assert res.returncode != 0
    assert "model:fleetwatch_autoscaling_signal:sum" in res.stdout + res.stderr


@pytest.mark.parametrize("where", ["golden", "examples"])
def test_amtool_check_config(where, examples_out):
    d = ALERTS if where == "golden" else examples_out
    res = run(tool("amtool"), "check-config", str(d / ALERTMANAGER_FILE))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout and "4 inhibit rules" in res.stdout


ROUTES = [
    # labels of an alert → the receiver it must reach
    ({"alertname": "FleetwatchSLORegression", "team": "search", "severity": "page",
      "model": "ranker", "slo": "ranker-availability", "burn_tier": "1h/5m"}, "search-pager"),
    ({"alertname": "FleetwatchSLORegression", "team": "search", "severity": "ticket",
      "model": "ranker", "burn_tier": "1d/2h"}, "search-tickets"),
    ({"alertname": "FleetwatchSLOOverload", "team": "genai", "severity": "ticket",
      "model": "llama-3-8b"}, "genai-tickets"),
    ({"alertname": "FleetwatchModelNotReady", "team": "genai", "severity": "page",
      "model": "llama-3-8b"}, "genai-pager"),
    ({"alertname": "FleetwatchSidecarDown", "team": "platform", "severity": "page"},
     "platform-pager"),
    ({"alertname": "FleetwatchQueueWaitHigh", "team": "vision", "severity": "ticket"},
     "platform-tickets"),   # a team without receivers: the default ones
    ({"alertname": "FleetwatchSLORegression", "team": "vision", "severity": "page"},
     "platform-pager"),
    ({"alertname": "FleetwatchSLONoData", "severity": "ticket"}, "platform-tickets"),
    # shared GPUs: a quota ticket reaches the team over quota, policy tickets the platform
    ({"alertname": "FleetwatchQuotaExceeded", "team": "search", "severity": "ticket",
      "resource": "gpus"}, "search-tickets"),
    ({"alertname": "FleetwatchModelWithoutTeam", "team": "platform", "severity": "ticket",
      "model": "stray"}, "platform-tickets"),
    ({"alertname": "FleetwatchPlacementPolicyViolation", "team": "platform",
      "severity": "ticket", "model": "ranker"}, "platform-tickets"),
    # a burn the engine attributes to a co-located model or the GPU: the platform's ticket,
    # although the model's team (search) has receivers and its regression pages search
    ({"alertname": "FleetwatchSLOInterference", "team": "platform", "severity": "ticket",
      "model": "ranker", "model_team": "search", "neighbour": "llama-3-8b",
      "slo": "ranker-availability"}, "platform-tickets"),
    ({"alertname": "FleetwatchSLOGPUDegraded", "team": "platform", "severity": "ticket",
      "model": "ranker", "model_team": "search", "gpu_uuid": "GPU-0",
      "gpu_condition": "hw_thermal_slowdown"}, "platform-tickets"),
]


@pytest.mark.parametrize(("labels", "receiver"), ROUTES,
                         ids=[f"{lab.get('team', 'none')}-{lab['severity']}-{r}"
                              for lab, r in ROUTES])
def test_amtool_routes(labels, receiver):
    res = run(tool("amtool"), "config", "routes", "test",
              f"--config.file={ALERTS / ALERTMANAGER_FILE}", f"--verify.receivers={receiver}",
              *(f"{k}={v}" for k, v in labels.items()))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == receiver
