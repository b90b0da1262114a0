"""Spec files: one safe YAML loader with bounded alias expansion for every file, linear
validation, numbers that are numbers. Driven through the CLI."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.support.hostile import cli

BOMB = "".join(
    f"{a}: &{a} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for a, p in zip("abcdefghi", ["", *"abcdefgh"], strict=True)) + "slos: [*i]\n"
def _dump(data: object) -> str:
    """Block-style YAML, with libyaml when PyYAML has it (fast)."""
    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))


REGISTRY = {"models": [{"name": "m", "team": "t", "owner": "o@example.com", "oncall": "x"}]}


@pytest.fixture
def files(tmp_path):
    (tmp_path / "bomb.yaml").write_text(BOMB)
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(REGISTRY))
    (tmp_path / "sidecar.yaml").write_text(yaml.safe_dump(
        {"listen": {"address": "127.0.0.1", "port": 0},
         "targets": [{"name": "t", "kind": "triton", "url": "http://127.0.0.1:9/metrics"}]}))
    return tmp_path


@pytest.mark.parametrize("args", [
    ["slo", "validate", "{d}/bomb.yaml"],
    ["serve", "--config", "{d}/sidecar.yaml", "--slos", "{d}/bomb.yaml"],
    ["rules", "--registry", "{d}/registry.yaml", "--slos", "{d}/bomb.yaml", "--out", "{d}/o"],
    ["dashboards", "--registry", "{d}/registry.yaml", "--slos", "{d}/bomb.yaml",
     "--out", "{d}/o"],
], ids=["slo validate", "serve", "rules", "dashboards"])
def test_alias_bomb_in_the_slo_file_is_refused_at_once(files, args):
    # refused by the alias check (its message), not expanded: an expanding bomb would run
    # into the subprocess timeout (a wall-clock bound would depend on the machine's load)
    res = cli(*[a.format(d=files) for a in args], timeout=60)
    assert res.returncode == 2, res.stderr
    assert "alias" in res.stderr and "bomb.yaml" in res.stderr
    assert "Traceback" not in res.stderr


def test_alias_bomb_in_the_sidecar_config_and_registry(files):
    (files / "cfg.yaml").write_text(BOMB.replace("slos:", "targets:"))
    res = cli("validate", "--config", str(files / "cfg.yaml"), timeout=20)
    assert res.returncode == 2 and "cfg.yaml" in res.stderr
    (files / "reg.yaml").write_text(BOMB.replace("slos:", "models:"))
    res = cli("normalize", "--registry", str(files / "reg.yaml"), str(files / "bomb.yaml"),
              timeout=20)
    assert res.returncode == 2 and "reg.yaml" in res.stderr


@pytest.mark.parametrize("text", ["models: &a [*a]\n", "models: &a [{name: x, more: *a}]\n",
                                  "a: &a {b: *a}\nmodels: []\n"],
                         ids=["list", "nested", "mapping"])
def test_an_anchor_that_contains_itself_is_refused_not_expanded_forever(files, text):
    # a recursive alias has infinitely many nodes once expanded: the size check walked it
    # forever (every loader hung); refused by name, exit 2 naming the file
    (files / "rec.yaml").write_text(text)
    res = cli("normalize", "--registry", str(files / "rec.yaml"), str(files / "bomb.yaml"),
              timeout=60)
    assert res.returncode == 2, res.stderr
    assert "rec.yaml" in res.stderr and "an anchor that contains itself" in res.stderr
    assert "Traceback" not in res.stderr


def _targets(n: int) -> list[dict]:
    return [{"name": f"t{i}", "kind": "triton", "url": f"http://127.0.0.1:{8000 + i % 1000}"
             f"/metrics", "labels": {"server": f"s{i}"}} for i in range(n)]


def _validation_cpu_seconds(n: int) -> float:
    """The least CPU time of this process (not wall-clock: other processes' load does not
    count) of five validations of a configuration of ``n`` targets, with the garbage
    collector off (its passes over every live object grow faster than linearly)."""
    import gc

    from fleetwatch.sidecar.config import parse_config

    best = float("inf")
    for _ in range(5):
        targets = _targets(n)
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            parse_config({"targets": targets})
            best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
    return best


def test_validating_16000_targets_is_linear(tmp_path):
    (tmp_path / "big.yaml").write_text(_dump({"targets": _targets(16_000)}))
    res = cli("validate", "--config", str(tmp_path / "big.yaml"), timeout=120)
    assert res.returncode == 0, res.stderr
    # 8× the targets: ≈ 8× the work when linear, 64× when quadratic (the clash check
    # compares every pair); 24× lies between them on a log scale
    small, big = _validation_cpu_seconds(2_000), _validation_cpu_seconds(16_000)
    assert big < 24 * small, (small, big)
    # a clash is still found, and named
    targets = _targets(100)
    targets[99]["labels"] = {"server": "s3"}
    (tmp_path / "small.yaml").write_text(_dump({"targets": targets}))
    res = cli("validate", "--config", str(tmp_path / "small.yaml"), timeout=60)
    assert res.returncode == 2
    assert "targets 't3' (targets[3]) and 't99' (targets[99])" in res.stderr


@pytest.mark.parametrize("field,value", [
    ("listen.port", True), ("scrape.interval_seconds", True), ("scrape.max_body_bytes", "1e3"),
])
def test_numbers_in_the_config_are_numbers(tmp_path, field, value):
    section, key = field.split(".")
    cfg = {section: {key: value},
           "targets": [{"name": "t", "kind": "triton", "url": "http://127.0.0.1:9/metrics"}]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    res = cli("validate", "--config", str(tmp_path / "c.yaml"))
    assert res.returncode == 2, res.stdout
    assert field in res.stderr


def test_dates_are_text_and_an_impossible_one_is_a_field_error(files, tmp_path):
    # YAML 1.2 has no timestamps: PyYAML's 1.1 reading built a date and raised ValueError
    # (a traceback, exit 1) on 2026-13-45; now the field that reads it says what is wrong
    reg = tmp_path / "reg.yaml"
    reg.write_text("models:\n  - {name: m, version: 2025-01-16, team: t, owner: o@example.com,"
                   " oncall: x}\n")
    res = cli("normalize", "--registry", str(reg), str(files / "bomb.yaml"), timeout=60)
    assert "version" not in res.stderr and "Traceback" not in res.stderr, res.stderr
    (tmp_path / "changes.yaml").write_text(
        "changes:\n  - {ticket: T-1, change: 'quota:search', approver: platform, "
        "date: 2026-13-45}\n")
    res = cli("registry", "log", "--changes", str(tmp_path / "changes.yaml"), timeout=60)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "changes.yaml" in res.stderr and "date" in res.stderr
    assert "Traceback" not in res.stderr
