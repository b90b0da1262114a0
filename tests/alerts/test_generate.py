"""Rules generator units: exact numbers, the recording-rule contract, strict alerting
configuration, determinism, the template renderer behind the behaviour tests, the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from fleetwatch.alerts import alerting as al
from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.alertmanager import build_alertmanager
from fleetwatch.alerts.config import AlertingConfigError, parse_alerting_config
from fleetwatch.alerts.generate import (
    OPERATOR_FILE,
    PLATFORM_FILE,
    RULE_FILES,
    SLO_FILE,
    build_rules,
    rule_groups,
)
from fleetwatch.alerts.gotemplate import render_template
from fleetwatch.alerts.numbers import burn_factor, error_budget, num, percent, window
from fleetwatch.labels.registry import load_registry, parse_registry
from fleetwatch.promql.glob import glob_regex
from fleetwatch.slo.spec import parse_slo_file
from tests.support.helpers import ROOT

INPUT = ROOT / "tests" / "golden" / "alerts" / "input"
REGISTRY = load_registry(INPUT / "registry.yaml")
SLOS = parse_slo_file(yaml.safe_load((INPUT / "slos.yaml").read_text()))
CFG = parse_alerting_config(yaml.safe_load((ROOT / "examples" / "receivers.yaml").read_text()))


# -- numbers --------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "text"), [
    (0.999, "0.999"), (1 - 0.999, "0.001"), (0.1 + 0.2, "0.3"), (14.4, "14.4"), (2.0, "2"),
    (1e-6, "0.000001"), (100.0, "100"), (0.02 * 720, "14.4"), (0, "0"),
])
def test_numbers_are_written_exactly(value, text):
    assert num(value) == text


def test_slo_arithmetic_is_exact():
    assert num(error_budget(0.999)) == "0.001"
    assert num(error_budget(0.95)) == "0.05"
    assert num(burn_factor(0.02, 30 * 86400, 3600)) == "14.4"
    assert num(burn_factor(0.02, 28 * 86400, 3600)) == "13.44"
    assert num(burn_factor(0.1, 30 * 86400, 3 * 86400)) == "1"
    assert percent(0.999) == "99.9%"


@pytest.mark.parametrize(("seconds", "text"), [
    (300, "5m"), (1800, "30m"), (3600, "1h"), (21600, "6h"), (86400, "1d"), (259200, "3d"),
    (28 * 86400, "28d"), (7 * 86400, "7d"), (90, "90s"), (15, "15s"),
])
def test_windows_use_d_h_m_s_never_weeks(seconds, text):
    assert window(seconds) == text


def test_generated_files_never_contain_float_noise():
    files = build_rules(REGISTRY, SLOS, CFG, ["x"], tests=True)
    for name, text in files.items():
        assert "0000000" not in text and "9999999" not in text, name


# -- the recording-rule contract ------------------------------------------------------------
CONTRACT = {
    "model:modelserver_requests:rate5m", "model:modelserver_request_errors:ratio_rate5m",
    "model:modelserver_tokens:rate5m", "model:modelserver_prefix_cache_hit:ratio_rate5m",
    "model:modelserver_requests_active:sum", "model:modelserver_kv_cache_usage:max",
    "gpu:modelserver_gpu_memory_usage:ratio", "model:fleetwatch_slo_concurrency:sum",
    "model:fleetwatch_autoscaling_signal:sum",
    "team:fleetwatch_quota_usage:sum", "team:fleetwatch_quota_limit:max",
    "team_model:fleetwatch_quota_model_usage:sum", "team_model:fleetwatch_quota_model_limit:max",
    "model_rollout:fleetwatch_rollout_verdict:max",
    "slo_model:fleetwatch_slo_error_budget_remaining:ratio",
    "slo_model:fleetwatch_slo_capacity_concurrency:min",  # the fleet capacity (slo.recover)
    *(f"model:{m}:{s}" for m in (
        "modelserver_request_duration_seconds", "modelserver_queue_duration_seconds",
        "modelserver_time_to_first_token_seconds", "modelserver_inter_token_latency_seconds",
        "modelserver_time_per_output_token_seconds")
      for s in ("mean5m", "p50_5m", "p90_5m", "p99_5m")),
    *(f"slo_model_band:fleetwatch_slo_burn_rate:ratio_rate{w}"
      for w in ("5m", "30m", "1h", "2h", "6h", "1d", "3d", "28d", "30d", "7d")),
}


def test_recorded_names_are_the_contract():
    assert rec.recorded_names(SLOS) == CONTRACT
    generated = {r.record for gs in rule_groups(REGISTRY, SLOS, CFG).values() for g in gs
                 for r in g.rules if isinstance(r, rec.RecordingRule)}
    assert generated == CONTRACT


def test_model_rules_aggregate_with_sum_by_model_labels():
    for r in rec.MODEL_RULES:
        if r.record.startswith("model:"):
            assert r.labels[:3] == ("model", "model_version", "backend"), r.record
            assert "by (model, model_version, backend" in r.expr, r.record
    assert rec.latency("modelserver_queue_duration_seconds", "p99") == \
        "model:modelserver_queue_duration_seconds:p99_5m"
    assert rec.burn_rate(28 * 86400) == "slo_model_band:fleetwatch_slo_burn_rate:ratio_rate28d"


def test_burn_rate_rule_is_fleet_wide_and_exact():
    slo = next(s for s in SLOS.slos if s.name == "ranker-availability")
    expr = rec.burn_rate_expr(slo, 3600)
    assert 'sum by (slo, model, model_version, backend, band) (rate(fleetwatch_slo_good_events' \
           '_total{slo="ranker-availability"}[1h]))' in expr
    assert expr.endswith("/ 0.001")


# -- SLO alert logic ------------------------------------------------------------------------
def test_regression_and_overload_split_bands_at_the_envelope():
    slo = next(s for s in SLOS.slos if s.name == "llm-ttft")  # envelope 16
    w = SLOS.windows[0]
    assert al.inside_bands(slo) == ["1", "2", "4", "8", "16"]
    assert 'band=~"1|2|4|8|16"' in al.regression_expr(slo, w)
    ovl = al.overload_expr(slo, w)
    assert 'band!~"1|2|4|8|16|all"' in ovl and "unless on (slo, model, model_version, backend)" in ovl
    p99 = next(s for s in SLOS.slos if s.name == "ranker-p99")  # bands 0.25, 0.5 inside
    assert 'band=~"0\\\\.25|0\\\\.5"' in al.regression_expr(p99, w)


def test_attributed_burns_are_platform_tickets_not_regression_pages():
    """A model the engine judges interference or gpu_degraded is left out of the
    regression rule; its own alerts are tickets labelled with the platform team, the
    model's team kept as model_team."""
    slo = next(s for s in SLOS.slos if s.name == "llm-ttft")
    reg = al.regression_expr(slo, SLOS.windows[0])
    assert reg.endswith('unless on (slo, model, model_version, backend)\n(\n  max by (slo, '
                        'model, model_version, backend) (fleetwatch_slo_state{slo="llm-ttft", '
                        'state=~"interference|gpu_degraded"}) == 1\n)')
    rules = {r.alert: r for r in al.slo_alerts(SLOS, slo, REGISTRY, CFG)}
    for name, series, kept in (
            (al.SLO_INTERFERENCE, "fleetwatch_slo_interference", "neighbour"),
            (al.SLO_GPU_DEGRADED, "fleetwatch_slo_gpu_degraded", "gpu_condition")):
        r = rules[name]
        assert dict(r.labels) == {"severity": "ticket", "team": CFG.platform.team,
                                  "slo": "llm-ttft"}
        assert f'{series}{{slo="llm-ttft"}}) == 1' in r.expr and kept in r.expr
        assert '"model_team", "$1", "team", "(.*)"' in r.expr
    assert al.SLO_INTERFERENCE in al.SLO_ALERTS  # an upstream down mutes them too


def test_every_alert_has_severity_and_burn_alerts_have_tier_labels():
    for gs in rule_groups(REGISTRY, SLOS, CFG).values():
        for g in gs:
            for r in g.rules:
                if not isinstance(r, al.AlertRule):
                    continue
                labels = dict(r.labels)
                assert labels["severity"] in ("page", "ticket")
                assert {"summary", "description", "runbook_url", "dashboard_url"} <= \
                    dict(r.annotations).keys()
                if r.alert in al.BURN_ALERTS:
                    assert labels["burn_tier"] in {al.tier_name(w) for w in SLOS.windows}
                    assert "team" in r.expr and "modelserver_model_info" in r.expr
                if r.alert == al.SLO_OVERLOAD:
                    assert labels["severity"] == "ticket"
                    assert "autoscaler_url" in dict(r.annotations)


def test_tier_severity_comes_from_the_catalog():
    rules = [r for g in rule_groups(REGISTRY, SLOS, CFG)[SLO_FILE] for r in g.rules
             if isinstance(r, al.AlertRule) and r.alert == al.SLO_REGRESSION]
    sev = {dict(r.labels)["burn_tier"]: dict(r.labels)["severity"] for r in rules}
    assert sev == {"1h/5m": "page", "6h/30m": "page", "1d/2h": "ticket", "3d/6h": "ticket"}


def test_model_not_ready_uses_tier_allowance_and_registry_precedence():
    rules = [r for g in rule_groups(REGISTRY, SLOS, CFG)[PLATFORM_FILE] for r in g.rules
             if isinstance(r, al.AlertRule) and r.alert == al.MODEL_NOT_READY]
    by_entry = {dict(r.labels).get("registry_entry", ""): r for r in rules}
    assert by_entry["ranker"].for_ == "5m"            # interactive
    assert by_entry["llama-*"].for_ == "30m"          # streaming: LLMs load slowly
    assert by_entry["faulty"].for_ == "15m"           # batch
    assert by_entry[""].for_ == "10m" and dict(by_entry[""].labels)["team"] == "platform"
    assert dict(by_entry["llama-*"].labels)["owner"] == "bob@example.com"
    assert 'model=~"(?s:llama-.*)"' in by_entry["llama-*"].expr
    # no earlier entry (ranker, streamer) can match a llama-* name: nothing to take away
    assert "unless on (model) " not in by_entry["llama-*"].expr
    # an engine asleep (vLLM sleep mode) is not ready on purpose: no rule pages for it
    assert all('unless on (job, instance, model) modelserver_engine_sleep_state'
               '{sleep_state="awake"} == 0' in r.expr for r in rules)
    assert len([r for r in rules if dict(r.labels).get("registry_entry") == "ranker"]) == 1


def test_sidecar_job_is_configurable():
    cfg = parse_alerting_config({"platform": {"sidecar_job": "fw-sidecars"}})
    rules = rule_groups(REGISTRY, SLOS, cfg)[PLATFORM_FILE][0].rules
    down = next(r for r in rules if r.alert == al.SIDECAR_DOWN)
    assert 'up{job="fw-sidecars"} == 0' in down.expr


def test_no_data_alert_names_the_selected_team():
    rules = [r for g in rule_groups(REGISTRY, SLOS, CFG)[SLO_FILE] for r in g.rules
             if isinstance(r, al.AlertRule) and r.alert == al.SLO_NO_DATA]
    teams = {dict(r.labels)["slo"]: dict(r.labels)["team"] for r in rules}
    assert teams == {"llm-ttft": "genai", "ranker-availability": "search", "ranker-p99": "search",
                     "support-lora-ttft": "support"}  # a LoRA adapter: its own team


@pytest.mark.parametrize("glob", ["ranker", "llama-*", "*llm*", "a.b?", "x[!0-9]y", "m+1"])
@pytest.mark.parametrize("name", ["ranker", "llama-3", "my-llm-x", "a.bc", "axby", "x5y", "m+1",
                                  "aXbc"])
def test_glob_regex_matches_like_fnmatch(glob, name):
    import fnmatch
    import re

    assert bool(re.fullmatch(glob_regex(glob), name)) == fnmatch.fnmatchcase(name, glob)


# -- alerting configuration -----------------------------------------------------------------
@pytest.mark.parametrize(("data", "message"), [
    ({"teams": {"a": {"page": "nope", "ticket": "nope"}}},
     "teams.a.page: no receiver named 'nope'"),
    ({"receivers": {"x": {"webhook": [{"url": "http://h"}]}}}, "unknown integration 'webhook'"),
    ({"urls": {"runbook": "https://r/{modle}"}}, "unknown placeholder {modle}"),
    ({"urls": {"runbook": "https://r/{{ $labels.model }}"}}, "not Go templates"),
    ({"platform": {"model_not_ready": {"startup_allowance": {"llm": "30m"}}}},
     "needs a 'default' allowance"),
    ({"platform": {"queue_wait": {"for": "soon"}}}, "invalid duration"),
    ({"platform": {"kv_cache": {"usage_ratio": 1.5}}}, "platform.kv_cache.usage_ratio"),
    ({"routing": {"group_by": ["team", "bad-label"]}}, "not a label name"),
    ({"pager": {}}, "pager: unknown field"),
])
def test_alerting_config_is_strict(data, message):
    with pytest.raises(AlertingConfigError) as exc:
        parse_alerting_config(data, "receivers.yaml")
    assert message in str(exc.value) and str(exc.value).startswith("receivers.yaml: ")


def test_alertmanager_warns_about_teams_without_receivers():
    reg = parse_registry({"models": [{"name": "m", "team": "newteam", "owner": "o",
                                      "oncall": "c"}]})
    am = build_alertmanager(reg, CFG, SLOS)
    assert any("'newteam' has no receivers" in w for w in am.warnings)


def test_alertmanager_needs_default_receivers():
    from fleetwatch.alerts.alertmanager import AlertmanagerConfigError

    with pytest.raises(AlertmanagerConfigError, match="default"):
        build_alertmanager(REGISTRY, parse_alerting_config({}), SLOS)


def test_inhibition_orders_tiers_fastest_first():
    rules = build_alertmanager(REGISTRY, CFG, SLOS).config["inhibit_rules"]
    assert rules[0]["source_matchers"][1] == 'burn_tier="1h/5m"'
    assert rules[0]["target_matchers"][1] == 'burn_tier=~"6h/30m|1d/2h|3d/6h"'
    assert rules[0]["equal"] == ["slo", "model", "model_version", "backend"]
    assert rules[-1]["source_matchers"] == ['alertname="FleetwatchUpstreamDown"']
    assert rules[-1]["equal"] == ["model"]


# -- determinism and formats ----------------------------------------------------------------
def test_output_is_deterministic_and_marked_generated(tmp_path):
    """``fleetwatch rules`` in another process (another hash seed) writes what this process
    generates."""
    import os
    import subprocess
    import sys

    a = build_rules(REGISTRY, SLOS, CFG, ["registry.yaml", "slos.yaml", "receivers.yaml"],
                    tests=True)
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    res = subprocess.run(
        [sys.executable, "-m", "fleetwatch.cli", "rules", "--registry",
         str(INPUT / "registry.yaml"), "--slos", str(INPUT / "slos.yaml"), "--receivers",
         str(ROOT / "examples" / "receivers.yaml"), "--out", str(tmp_path), "--tests"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONHASHSEED": seed})
    assert res.returncode == 0, res.stderr
    assert {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()} == a
    for text in a.values():
        assert text.startswith("# Generated by fleetwatch") and "DO NOT EDIT" in text


def test_prometheus_rule_holds_the_plain_groups():
    files = build_rules(REGISTRY, SLOS, CFG, ["x"])
    cr = yaml.safe_load(files[OPERATOR_FILE])
    assert cr["apiVersion"] == "monitoring.coreos.com/v1" and cr["kind"] == "PrometheusRule"
    assert cr["metadata"] == {"name": "fleetwatch", "namespace": "monitoring", "labels": {
        "app.kubernetes.io/managed-by": "fleetwatch", "release": "kube-prometheus-stack"}}
    plain = [g for f in RULE_FILES for g in yaml.safe_load(files[f])["groups"]]
    assert cr["spec"]["groups"] == plain


# -- template renderer (expected annotations of the behaviour tests) -------------------------
def test_render_template_subset():
    t = ('{{ $labels.model }} {{ printf "%.3g" $value }} {{ $value | humanizePercentage }} '
         '{{ with $labels.owner }}Owner {{ . }}.{{ else }}No owner.{{ end }}')
    assert render_template(t, {"model": "m", "owner": "o"}, 15.84) == "m 15.8 1584% Owner o."
    assert render_template(t, {"model": "m"}, 0.97) == "m 0.97 97% No owner."
    with pytest.raises(ValueError, match="unsupported"):
        render_template("{{ $value | humanize }}", {}, 1)


# -- CLI ------------------------------------------------------------------------------------
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "fleetwatch.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


def test_cli_rules_and_alertmanager(tmp_path):
    res = _cli("rules", "--registry", str(INPUT / "registry.yaml"), "--slos",
               str(INPUT / "slos.yaml"), "--receivers", "examples/receivers.yaml",
               "--out", str(tmp_path), "--tests")
    assert res.returncode == 0, res.stderr
    golden = ROOT / "tests" / "golden" / "alerts"
    for name in (*RULE_FILES, OPERATOR_FILE, "fleetwatch.rules.test.yml"):
        assert (tmp_path / name).read_text() == (golden / name).read_text(), name
    res = _cli("alertmanager", "--registry", str(INPUT / "registry.yaml"), "--receivers",
               "examples/receivers.yaml", "--slos", str(INPUT / "slos.yaml"))
    assert res.returncode == 0, res.stderr
    assert res.stdout == (golden / "alertmanager.yml").read_text()
    assert "team 'vision' has no receivers" in res.stderr


def test_cli_bad_input_exits_2_naming_file_and_field(tmp_path):
    bad = tmp_path / "receivers.yaml"
    bad.write_text("teams: {a: {page: p}}\n")
    res = _cli("rules", "--registry", str(INPUT / "registry.yaml"), "--slos",
               str(INPUT / "slos.yaml"), "--receivers", str(bad), "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    assert f"{bad}: teams.a.ticket: Field required" in res.stderr
    res = _cli("alertmanager", "--registry", str(tmp_path / "missing.yaml"), "--receivers",
               "examples/receivers.yaml")
    assert res.returncode == 2 and "cannot read registry" in res.stderr


# -- alert families -------------------------------------------------------------------------
def test_every_alert_of_every_family_is_generated_and_exercised():
    """Each family's rules are only of the alerts it declares, every declared alert has
    rules, and its own scenarios expect every one of them to fire at some time (for the
    golden specs, which leave nothing uncovered)."""
    from fleetwatch.alerts.alerting import model_recording_groups, platform_groups, slo_groups
    from fleetwatch.alerts.families import PLATFORM_FAMILIES, SLO_FAMILIES
    from fleetwatch.alerts.scenarios import RuleIndex, Suite

    groups = [*model_recording_groups(), *slo_groups(SLOS, REGISTRY, CFG),
              *platform_groups(REGISTRY, CFG)]
    families = [*SLO_FAMILIES, *PLATFORM_FAMILIES]
    declared = [a for f in families for a in f.alerts]
    assert len(declared) == len(set(declared))
    generated = {r.alert for g in groups for r in g.rules if isinstance(r, al.AlertRule)}
    assert generated == set(declared)
    for f in families:
        rules = ([r for slo in SLOS.slos for r in f.rules(SLOS, slo, REGISTRY, CFG)]
                 if f in SLO_FAMILIES else list(f.rules(REGISTRY, CFG)))
        assert {r.alert for r in rules} == set(f.alerts), f.name
        suite = Suite(REGISTRY, SLOS, CFG, RuleIndex(groups))
        fired = {t["alertname"] for g in f.scenarios(suite)
                 for t in g.to_dict().get("alert_rule_test", []) if t["exp_alerts"]}
        assert fired == set(f.alerts), f.name
        assert suite.not_covered == [], f.name
