"""Hostile but legal registries and SLO files through ``fleetwatch dashboards``: strict JSON,
ConfigMaps that read back to the same dashboards, numbers exactly as the SLO file writes
them, and SLO text that renders as written in the catalog's markdown table — never as table
syntax, markdown or a Grafana variable."""

from __future__ import annotations

import json
import re

import yaml

from fleetwatch.dashboards import generate
from fleetwatch.labels.registry import parse_registry
from fleetwatch.slo.spec import parse_slo_file

HOSTILE = ['we"ird', "back\\slash", "new\nline", "}{=~'", "{{ $value }}", "- yaml: [list]",
           "&anchor *alias !tag", "key: value # comment", "null", "✓ ünïcode", "x" * 5000,
           "$model", "${__user.login}", "[[team]]", "a|b", "*bold* _it_ `code`", "<b>x</b>"]
REGISTRY = parse_registry({"models": [
    {"name": v, "team": v, "owner": v, "oncall": v, "latency_tier": v} for v in HOSTILE]})


def avail(**fields: object) -> dict:
    return {"name": "a", "sli": {"availability": {}}, "objectives": [{"target": 0.999}],
            "timeWindow": [{"duration": "30d"}], "concurrency": {"envelope": 1}, **fields}


def _strict(text: str) -> dict:
    def refuse(c: str) -> None:
        raise ValueError(f"not JSON: {c}")

    return json.loads(text, parse_constant=refuse)


def test_hostile_registry_and_slo_text_give_strict_json_and_round_tripping_configmaps():
    slos = parse_slo_file({"slos": [avail(description=v, selector={"models": [v]})
                                    for v in HOSTILE[:1]] + [
        avail(name=f"s{i}", description=v, selector={"models": [v], "teams": [v]})
        for i, v in enumerate(HOSTILE)]})
    files = generate(REGISTRY, slos)
    dashboards = {p: _strict(t) for p, t in files.items() if p.endswith(".json")}
    maps = list(yaml.safe_load_all(files["kubernetes/grafana-dashboards-configmaps.yaml"]))
    # every dashboard (fleet, models, SLOs, GPUs, rollouts) is strict JSON and provisioned
    assert set(dashboards) == {f"dashboards/{n}" for cm in maps for n in cm["data"]}
    assert len(dashboards) == 5 and "dashboards/rollouts.json" in dashboards
    for cm in maps:
        for name, text in cm["data"].items():
            assert text == files[f"dashboards/{name}"]


def _catalog(files: dict[str, str]) -> str:
    panels = _strict(files["dashboards/slos.json"])["panels"]
    return next(p["options"]["content"] for p in panels if p.get("title") == "SLO catalog")


def _cells(row: str) -> list[str]:
    """The cells of a markdown table row (``\\|`` is not a separator)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_slo_text_renders_as_written_in_the_catalog_table():
    """A description or selector with ``|`` or a newline once broke the catalog's table
    (cells shifted, the row ended early); ``$model``, ``${__user.login}`` or ``[[team]]``
    were Grafana variables (the text panel interpolates its content) and ``*x*`` markdown."""
    slos = parse_slo_file({"slos": [
        avail(name=f"s{i}", description=v, selector={"models": [v, "llama-*"], "teams": [v]})
        for i, v in enumerate(HOSTILE)]})
    content = _catalog(generate(REGISTRY, slos))
    rows = [line for line in content.splitlines() if line.startswith("| **s")]
    assert len(rows) == len(HOSTILE)
    for row in rows:
        assert len(_cells(row)) == 8, row
    assert not re.search(r"\$\{?\w|\[\[", content)   # nothing Grafana would interpolate
    assert "\\|" in content and "\\*bold\\*" in content and "&#36;model" in content


def test_numbers_are_written_exactly():
    """An objective of 0.99999999 was shown as "100%" (``%.6g``), a 0.1234567 s threshold as
    "123.457 ms", burn thresholds 2102.4 and 525600 as "2102" and "5.256e+05", an envelope
    of 1234567 as "1.23457e+06"."""
    slos = parse_slo_file({
        "windows": [{"long": "5m", "short": "1m", "budget_consumed": 0.02},
                    {"long": "1m", "short": "30s", "budget_consumed": 1}],
        "slos": [avail(objectives=[{"target": 0.99999999}], timeWindow=[{"duration": "365d"}],
                       sli={"latency": {"metric": "ttft", "threshold_seconds": 0.1234567}},
                       concurrency={"envelope": 1234567, "bands": [1, 1234570]})]})
    files = generate(REGISTRY, slos)
    text = json.dumps(_strict(files["dashboards/slos.json"]), ensure_ascii=False)
    for exact in ("— 99.999999% over 365d", "123.4567 ms", "2102.4×", "525600×", "(1234567)"):
        assert exact in text, exact
    for rounded in ("— 100% over", "123.457 ms", "2102×", "e+05", "e+06"):
        assert rounded not in text, rounded
