"""Spec files with values a person types by mistake: a key written twice, a name with a
line break, a number too large to mean anything, an exponent without a dot. Each is one
``fleetwatch: error: FILE: …`` line and exit 2 (bad input), never a traceback, never the
last of two values silently winning. Driven through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.hostile import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GPU = ROOT / "tests" / "data" / "gpu"
TARGETS = "targets:\n  - {name: t, kind: triton, url: \"http://127.0.0.1:9/metrics\"}\n"


def _error(res, *needles: str) -> str:
    """The one error line of a refused spec (exit 2), after checking it names ``needles``."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetwatch: error: "), res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# --- duplicate keys -------------------------------------------------------------------

def test_a_team_listed_twice_in_the_quota_file_is_refused(tmp_path):
    """The second ``search`` would have replaced the first (an over-quota team passing)."""
    q = tmp_path / "quotas.yaml"
    q.write_text("teams:\n"
                 "  search: {gpus: 0, gpu_memory_bytes: 0, instances: 0}\n"
                 "  search: {gpus: 100, gpu_memory_bytes: 1000000000000, instances: 100}\n")
    _error(cli("quota", "check", str(q)),
           str(q), "line 3", "duplicate key 'search'", "first at line 2")


def test_a_repeated_registry_owner_and_listen_port_are_refused(tmp_path):
    reg = tmp_path / "models.yaml"
    reg.write_text("models:\n  - name: m\n    team: t\n    owner: a@example.com\n"
                   "    oncall: x\n    owner: b@example.com\n")
    cfg = tmp_path / "sidecar.yaml"
    cfg.write_text(f"registry: {reg.name}\n" + TARGETS)
    _error(cli("validate", "--config", str(cfg)), "models.yaml", "line 6",
           "duplicate key 'owner'", "first at line 4")
    cfg.write_text("listen:\n  port: 9810\n  address: 127.0.0.1\n  port: 9811\n" + TARGETS)
    _error(cli("validate", "--config", str(cfg)), "sidecar.yaml", "line 4",
           "duplicate key 'port'")


def test_duplicate_keys_are_refused_in_the_slo_file_and_the_alerting_config(tmp_path):
    bad = tmp_path / "slos.yaml"
    bad.write_text((EXAMPLES / "slos.yaml").read_text().replace(
        "objectives: [{target: 0.999}]", "objectives: [{target: 0.999, target: 0.9}]", 1))
    _error(cli("slo", "validate", str(bad)), "slos.yaml", "duplicate key 'target'")
    receivers = tmp_path / "receivers.yaml"
    receivers.write_text((EXAMPLES / "receivers.yaml").read_text().replace(
        "  team: platform ", "  team: platform\n  team: search ", 1))
    _error(cli("alertmanager", "--registry", str(EXAMPLES / "models.yaml"), "--receivers",
               str(receivers), "--out", str(tmp_path / "am.yml")),
           "receivers.yaml", "duplicate key 'team'")


def test_a_merge_key_may_still_be_overridden(tmp_path):
    """``<<: *anchor`` then a key of the anchor is YAML's merge, not a repeated key."""
    cfg = tmp_path / "sidecar.yaml"
    cfg.write_text("x-scrape: &s {interval_seconds: 5, timeout_seconds: 2}\n"
                   "scrape:\n  <<: *s\n  timeout_seconds: 1\n" + TARGETS)
    res = cli("validate", "--config", str(cfg))
    # the only complaint is the unknown x-scrape key: the merged mapping itself is valid
    assert "duplicate" not in res.stderr and "x-scrape" in res.stderr, res.stderr


# --- names ---------------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("name", "ranker-canary\n"), ("namespace", "search\n"), ("name", "ranker canary"),
    ("namespace", "search\t"), ("namespace", "-search"),
])
def test_a_deployment_name_or_namespace_with_a_line_break_is_refused(tmp_path, field, value):
    """Kubernetes names are DNS labels matched whole: no ``patches/…\\n.yaml``."""
    reg = yaml.safe_load((EXAMPLES / "models.yaml").read_text())
    reg["models"][0]["deployment"][field] = value
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    for name in ("sidecar.yaml", "sidecar-vllm.yaml", "slos.yaml", "receivers.yaml"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    line = _error(cli("validate", "--config", str(tmp_path / "sidecar.yaml")),
                  "models.yaml", f"deployment.{field}")
    assert "DNS-1" in line
    out = tmp_path / "deploy"
    _error(cli("manifests", "--config", str(tmp_path / "sidecar.yaml"), "--config",
               str(tmp_path / "sidecar-vllm.yaml"), "--registry", str(tmp_path / "models.yaml"),
               "--slos", str(tmp_path / "slos.yaml"), "--out", str(out)),
           f"deployment.{field}")
    assert not out.exists() or not any("\n" in p.name for p in out.rglob("*"))


def test_a_namespace_may_start_with_a_digit(tmp_path):
    """A namespace is a DNS-1123 label (Kubernetes' rule), which may start with a digit."""
    reg = yaml.safe_load((EXAMPLES / "models.yaml").read_text())
    reg["models"][0]["deployment"]["namespace"] = "0search"
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    (tmp_path / "sidecar.yaml").write_text((EXAMPLES / "sidecar.yaml").read_text())
    (tmp_path / "quotas.yaml").write_text((EXAMPLES / "quotas.yaml").read_text())
    res = cli("validate", "--config", str(tmp_path / "sidecar.yaml"))
    assert res.returncode == 0, res.stderr


# --- numbers -------------------------------------------------------------------------

HUGE = "1" + "0" * 400


def test_a_huge_gpu_memory_is_refused_by_quota_check_validate_and_quota_usage(tmp_path):
    """10^400 bytes passed validation and then ended ``quota usage`` in an OverflowError
    (and ``serve`` logged one every scrape)."""
    q = tmp_path / "quotas.yaml"
    q.write_text((GPU / "quotas.yaml").read_text().replace(
        "gpu_memory_bytes: 25769803776", f"gpu_memory_bytes: {HUGE}", 1))
    _error(cli("quota", "check", str(q)), "quotas.yaml", "gpu_memory_bytes",
           str(2**60))
    for name in ("sidecar.yaml", "quotas.yaml"):
        (tmp_path / name).write_text((GPU / name).read_text())
    (tmp_path / "registry.yaml").write_text((GPU / "registry.yaml").read_text().replace(
        "gpu_memory_bytes: 3221225472", f"gpu_memory_bytes: {HUGE}"))
    _error(cli("validate", "--config", str(tmp_path / "sidecar.yaml")), "registry.yaml",
           "gpu_memory_bytes", str(2**60))
    _error(cli("quota", "usage", "--config", str(tmp_path / "sidecar.yaml")),
           "registry.yaml", "gpu_memory_bytes")
    # serve refuses to start (it logged an OverflowError every scrape): a sidecar that
    # starts would run until the subprocess timeout, which fails the test too
    _error(cli("serve", "--config", str(tmp_path / "sidecar.yaml"), timeout=30),
           "registry.yaml", "gpu_memory_bytes")


@pytest.mark.parametrize("section,key", [
    ("placement", "memory_bytes"), ("scrape", "max_body_bytes"), ("scrape", "max_series"),
])
def test_a_huge_number_in_the_sidecar_config_is_refused(tmp_path, section, key):
    cfg = tmp_path / "sidecar.yaml"
    if section == "placement":
        cfg.write_text(TARGETS + f"placement:\n  - gpu_uuid: GPU-1\n    {key}: {HUGE}\n"
                       "    models: [{model: m}]\n")
    else:
        cfg.write_text(f"{section}:\n  {key}: {HUGE}\n" + TARGETS)
    _error(cli("validate", "--config", str(cfg)), "sidecar.yaml", key, "less than or equal")


@pytest.mark.parametrize("text,ok", [
    ("1e308", False), ("1.0e+308", False), ("1e400", False), ("2.5e0", True), ("2e0", True),
    ("25e-1", True), ("2.5", True),
])
def test_exponent_floats_read_as_numbers_yaml_1_1_and_1_2_forms(tmp_path, text, ok):
    """YAML 1.1 (PyYAML) reads ``1e308`` and ``2e0`` as text; fleetwatch reads the YAML 1.2
    forms too, so the user gets the number — or, out of range, its bound — never a
    complaint that a number is text."""
    q = tmp_path / "quotas.yaml"
    q.write_text(f"teams:\n  search: {{gpus: {text}, gpu_memory_bytes: 0, instances: 0}}\n")
    res = cli("quota", "check", str(q))
    if ok:
        assert res.returncode == 0, res.stderr
        return
    line = _error(res, "quotas.yaml", "team 'search'", "field 'gpus'")
    assert "text" not in line and ("1000000" in line or "finite" in line), line


def test_slo_objective_with_an_exponent_is_a_number(tmp_path):
    """The same reading in the SLO file: ``target: 999e-3`` is 0.999."""
    slos = (EXAMPLES / "slos.yaml").read_text()
    assert "{target: 0.999}" in slos
    (tmp_path / "slos.yaml").write_text(slos.replace("{target: 0.999}", "{target: 999e-3}"))
    res = cli("slo", "validate", str(tmp_path / "slos.yaml"))
    assert res.returncode == 0, res.stderr


def test_slo_validate_counts_one_slo_in_the_singular(tmp_path):
    """``ok (1 SLOs)`` read as a typo."""
    data = yaml.safe_load((EXAMPLES / "slos.yaml").read_text())
    data["slos"] = data["slos"][:1]
    (tmp_path / "slos.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    res = cli("slo", "validate", str(tmp_path / "slos.yaml"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().endswith("slos.yaml: ok (1 SLO)"), res.stdout
