"""Generated Grafana dashboards: golden files, structure, queried metrics, PromQL syntax.

Regenerate the golden files (review the diff) with
    .venv/bin/fleetwatch dashboards --registry src/fleetwatch/demo/registry.yaml \
        --slos tests/golden/dashboards/slos.yaml --out tests/golden/dashboards/out
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleetwatch.cli import main
from fleetwatch.dashboards import FILES, build_dashboards, dashboard_dict, generate
from fleetwatch.dashboards import names as n
from fleetwatch.labels.registry import load_registry
from fleetwatch.labels.schema import LABELS_BY_NAME, METRICS_BY_NAME
from fleetwatch.promql import sel
from fleetwatch.promql.names import metric_names
from fleetwatch.slo.spec import load_slo_file
from tests.support.dashboard_inspect import (
    BUILTIN_VARIABLES,
    iter_panels,
    query_panels,
    strings,
    substitute,
    variables_in,
)
from tests.support.helpers import GOLDEN

GOLDEN_DIR = GOLDEN / "dashboards"
OUT = GOLDEN_DIR / "out"
REGEN = ("fleetwatch dashboards --registry src/fleetwatch/demo/registry.yaml "
         "--slos tests/golden/dashboards/slos.yaml --out tests/golden/dashboards/out")
REGISTRY = load_registry(resources.files("fleetwatch.demo") / "registry.yaml")
SLOS = load_slo_file(GOLDEN_DIR / "slos.yaml")
#: Dashboard keys (a constant: test ids must not need the generator at collection time).
KEYS = sorted(FILES)


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict]:
    """The generated dashboards as JSON data (built in a fixture: a generator crash is a
    test failure, not a collection error)."""
    return {k: dashboard_dict(d) for k, d in build_dashboards(REGISTRY, SLOS).items()}
WIDTH = 24


def _all_queries(dashboards):
    for key, dash in dashboards.items():
        for ref in query_panels(dash):
            for t in ref.panel["targets"]:
                yield key, ref, t


# -- golden files --------------------------------------------------------------------------------


def test_output_equals_golden_files():
    files = generate(REGISTRY, SLOS)
    on_disk = {str(p.relative_to(OUT)): p.read_text(encoding="utf-8")
               for p in sorted(OUT.rglob("*")) if p.is_file()}
    assert sorted(files) == sorted(on_disk), f"file set changed; regenerate: {REGEN}"
    for rel, text in files.items():
        assert text == on_disk[rel], f"{rel} differs from the golden file; regenerate: {REGEN}"


def test_generation_is_deterministic_and_leaves_its_inputs_alone(tmp_path):
    """Another process (another hash seed: set and dict order of strings differ) writes
    the same files as this one; generating does not modify its inputs."""
    import os
    import sys

    slos, registry = copy.deepcopy(SLOS), copy.deepcopy(REGISTRY)
    files = generate(REGISTRY, SLOS)
    assert slos == SLOS and REGISTRY.entries == registry.entries
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    res = subprocess.run(
        [sys.executable, "-m", "fleetwatch.cli", "dashboards", "--registry",
         str(resources.files("fleetwatch.demo") / "registry.yaml"), "--slos",
         str(GOLDEN_DIR / "slos.yaml"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONHASHSEED": seed})
    assert res.returncode == 0, res.stderr
    written = {str(p.relative_to(tmp_path)): p.read_text(encoding="utf-8")
               for p in tmp_path.rglob("*") if p.is_file()}
    assert written == files


def test_cli_writes_the_same_files(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["dashboards", "--registry", str(resources.files(
        "fleetwatch.demo") / "registry.yaml"), "--slos", str(GOLDEN_DIR / "slos.yaml"),
        "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for rel, text in generate(REGISTRY, SLOS).items():
        assert (tmp_path / rel).read_text(encoding="utf-8") == text


def test_cli_rejects_a_bad_slo_file_with_exit_2(tmp_path):
    bad = tmp_path / "slos.yaml"
    bad.write_text("slos: [{name: x, sli: {availability: {}}, objectives: [{target: 2}], "
                   "timeWindow: [{duration: 28d}], concurrency: {envelope: 4}}]\n")
    res = CliRunner().invoke(main, ["dashboards", "--registry", str(resources.files(
        "fleetwatch.demo") / "registry.yaml"), "--slos", str(bad), "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "slos[0] (name 'x')" in res.output and "target" in res.output


# -- structure -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", KEYS)
def test_panel_ids_are_unique(key, dashboards):
    ids = [ref.panel["id"] for ref in iter_panels(dashboards[key])]
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(ids) == len(set(ids))


def _overlaps(panels):
    cells: dict[tuple[int, int], str] = {}
    clashes = []
    for p in panels:
        gp = p["gridPos"]
        for x in range(gp["x"], gp["x"] + gp["w"]):
            for y in range(gp["y"], gp["y"] + gp["h"]):
                if (x, y) in cells:
                    clashes.append((cells[(x, y)], p["title"]))
                cells[(x, y)] = p["title"]
    return clashes


@pytest.mark.parametrize("key", KEYS)
def test_grid_fits_24_columns_without_overlaps(key, dashboards):
    dash = dashboards[key]
    for ref in iter_panels(dash):
        gp = ref.panel["gridPos"]
        assert gp["x"] >= 0 and gp["y"] >= 0 and gp["w"] >= 1 and gp["h"] >= 1, ref.title
        assert gp["x"] + gp["w"] <= WIDTH, (ref.title, gp)
        if ref.panel["type"] == "row":
            assert (gp["x"], gp["w"], gp["h"]) == (0, WIDTH, 1)
    top = dash["panels"]
    assert not _overlaps(top)
    for row in top:  # a collapsed row keeps its panels below it, as Grafana expects
        if row["type"] == "row" and row["collapsed"]:
            assert row["panels"] and not _overlaps(row["panels"])
            assert min(p["gridPos"]["y"] for p in row["panels"]) == row["gridPos"]["y"] + 1
        elif row["type"] == "row":
            assert row["panels"] == []


@pytest.mark.parametrize("key", KEYS)
def test_every_variable_used_exists(key, dashboards):
    dash = dashboards[key]
    defined = {v["name"] for v in dash["templating"]["list"]}
    used = set()
    for s in strings({"panels": dash["panels"], "templating": dash["templating"]}):
        used |= variables_in(s)
    assert used - defined - BUILTIN_VARIABLES == set()
    # and the model-detail dashboard has the variables the spec asks for
    if key == "model":
        assert [v["name"] for v in dash["templating"]["list"]] == [
            "datasource", "team", "model", "version", "backend"]


@pytest.mark.parametrize("key", KEYS)
def test_every_datasource_reference_resolves(key, dashboards):
    dash = dashboards[key]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    refs = []
    for ref in iter_panels(dash):
        refs.append((ref.title, ref.panel.get("datasource")))
        refs += [(ref.title, t.get("datasource")) for t in ref.panel.get("targets", [])]
    refs += [(v["name"], v["datasource"]) for v in variables.values() if v["type"] == "query"]
    for where, ds in refs:
        if ds is None:  # rows and text panels query nothing
            continue
        assert ds["type"] == "prometheus", where
        (name,) = variables_in(ds["uid"])  # never a hard-coded uid
        var = variables[name]
        assert var["type"] == "datasource" and var["query"] == ds["type"], where
    for ref in query_panels(dash):
        assert ref.panel["datasource"] is not None, ref.title


@pytest.mark.parametrize("key", KEYS)
def test_panels_have_units_descriptions_and_queries(key, dashboards):
    for ref in iter_panels(dashboards[key]):
        p = ref.panel
        if p["type"] == "row":
            continue
        assert (p.get("description") or "").strip(), ref.title
        if p["type"] == "text":
            continue
        assert p["targets"], ref.title
        refids = [t["refId"] for t in p["targets"]]
        assert len(refids) == len(set(refids)) and all(t["expr"] for t in p["targets"])
        if p["type"] == "table":  # units per column; a registry table has none
            continue
        assert p["fieldConfig"]["defaults"].get("unit"), ref.title


def test_dashboards_have_distinct_uids_and_the_generated_tag(dashboards):
    uids = [d["uid"] for d in dashboards.values()]
    assert len(set(uids)) == len(FILES) and all(u.startswith("fleetwatch-") for u in uids)
    assert all("generated" in d["tags"] for d in dashboards.values())


def test_llm_row_is_collapsed_and_holds_every_llm_panel(dashboards):
    rows = [p for p in dashboards["model"]["panels"] if p["type"] == "row"]
    (llm,) = [r for r in rows if r["title"].startswith("LLM")]
    assert llm["collapsed"]
    titles = {p["title"] for p in llm["panels"]}
    for want in ("Time to first token p50 / p90 / p99", "Inter-token latency p50 / p90 / p99",
                 "Time per output token p50 / p90 / p99", "Tokens/s",
                 "Running and waiting requests", "KV-cache usage", "Prefix-cache hit ratio",
                 "Preemptions/s"):
        assert want in titles
    exprs = " ".join(t["expr"] for p in llm["panels"] for t in p["targets"])
    for metric in ("time_to_first_token", "inter_token_latency", "time_per_output_token"):
        assert metric in exprs
    # and no LLM-only signal outside that row and the comparisons
    others = [p for p in dashboards["model"]["panels"] if p["type"] != "row"]
    assert not any("kv_cache" in t["expr"] or "tokens" in t["expr"]
                   for p in others for t in p["targets"])


def test_slo_dashboard_has_one_row_per_slo_with_burn_by_band_and_capacity(dashboards):
    dash = dashboards["slos"]
    rows = [r["title"] for r in dash["panels"] if r["type"] == "row"]
    assert rows == ["SLOs",
                    "availability: successful requests — 99.5% over 28d",
                    "ranker-p99: intervals whose p99 request latency ≤ 250 ms — 99% over 28d",
                    "llm-ttft: time to first token ≤ 500 ms — 99% over 28d",
                    "Co-location interference and GPU health", "Autoscaling"]
    per_row: dict[str, set[str]] = {}
    for ref in iter_panels(dash):
        per_row.setdefault(ref.row, set()).add(ref.title)
    for row in rows[1:4]:
        assert {"State", "Error budget remaining", "SLI", "Burn rate by window",
                "Burn by concurrency band", "Burn by band now",
                "Capacity at SLO vs observed concurrency"} <= per_row[row]
    capacity = [ref.panel for ref in iter_panels(dash)
                if ref.title == "Capacity at SLO vs observed concurrency"]
    # the declared envelope is drawn as a threshold line
    assert [p["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] for p in capacity
            ] == [8, 8, 16]
    burn = next(ref.panel for ref in iter_panels(dash) if ref.title == "Burn rate by window")
    assert burn["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == pytest.approx(
        0.02 * 28 * 24)  # the 1h/5m page threshold for a 28-day period: 13.44
    # interference events: who is blamed (neighbour, GPU and condition) and the evidence
    row = "Co-location interference and GPU health"
    exprs = {ref.title: [t["expr"] for t in ref.panel.get("targets", [])]
             for ref in iter_panels(dash) if ref.row == row and ref.title != row}
    assert set(exprs) == {"Interference events", "GPU-degraded burns",
                          "Neighbour load before and during",
                          "GPU clocks-event reasons and last XID"}
    assert "neighbour) (fleetwatch_slo_interference{" in exprs["Interference events"][0]
    assert "gpu_condition) (fleetwatch_slo_gpu_degraded{" in exprs["GPU-degraded burns"][0]


def test_conditional_panels_say_why(dashboards):
    conditional = {(k, ref.title): ref.conditional for k, d in dashboards.items()
                   for ref in query_panels(d) if ref.conditional}
    gpu_panels = [t for t in conditional if "GPU" in t[1] or (t[0] == "gpus" and t[1] in (
        "Utilization", "Power", "Energy per hour", "Temperature", "Memory headroom",
        "Memory used and total", "Memory usage ratio"))]
    assert len(gpu_panels) >= 9
    assert ("model", "KV-cache blocks (TensorRT-LLM)") in conditional
    assert all(reason for reason in conditional.values())
    # every panel reading a GPU family is documented as conditional
    for key, ref, t in _all_queries(dashboards):
        if "modelserver_gpu_" in t["expr"] or n.GPU_MEMORY_USAGE in t["expr"]:
            assert ref.conditional, (key, ref.title)


def test_provisioning_files():
    files = generate(REGISTRY, SLOS)
    provider = yaml.safe_load(files["provisioning/dashboards/fleetwatch.yaml"])
    (prov,) = provider["providers"]
    assert provider["apiVersion"] == 1 and prov["type"] == "file" and prov["options"]["path"]
    maps = list(yaml.safe_load_all(files["kubernetes/grafana-dashboards-configmaps.yaml"]))
    assert len(maps) == len(FILES)
    for cm in maps:
        assert cm["kind"] == "ConfigMap"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((name, body),) = cm["data"].items()
        assert json.loads(body) == json.loads(files[f"dashboards/{name}"])
        assert len(yaml.safe_dump(cm).encode()) < 256 * 1024  # kubectl apply annotation limit


# -- queried metrics -------------------------------------------------------------------------------


def _schema_series_names() -> set[str]:
    names = set()
    for m in METRICS_BY_NAME.values():
        names.add(m.name)
        if m.type in ("histogram", "summary"):
            names |= {f"{m.name}_sum", f"{m.name}_count"}
        if m.type == "histogram":
            names.add(f"{m.name}_bucket")
    return names


def test_every_queried_metric_is_in_the_schema_or_the_recording_rules(dashboards):
    known = _schema_series_names() | n.recorded_names(SLOS)
    unknown = {}
    for key, ref, t in _all_queries(dashboards):
        missing = metric_names(t["expr"]) - known
        if missing:
            unknown[(key, ref.title, t["refId"])] = sorted(missing)
    assert unknown == {}


def test_every_variable_query_reads_a_schema_metric(dashboards):
    known = _schema_series_names()
    for dash in dashboards.values():
        for v in dash["templating"]["list"]:
            if v["type"] == "query":
                selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)",
                                               v["query"]).groups()
                assert metric_names(selector) <= known, v
                assert label in LABELS_BY_NAME, v


@pytest.mark.parametrize("expr, names", [
    ('sum by (model, le) (rate(a_bucket{le="0.5", x=~"$m"}[5m]))', {"a_bucket"}),
    ("a / on (model) group_left(team) max by (model, team) (b)", {"a", "b"}),
    ('histogram_quantile(0.99, x:y:z) >= 0 or vector(0)', {"x:y:z"}),
    ('count(c{state="ok"} == 1) or d offset 5m', {"c", "d"}),
    ("1 - sum without (band) (e) * 1e3", {"e"}),
])
def test_metric_names_parses_promql(expr, names):
    assert metric_names(expr) == names


def test_selector_sorts_and_escapes_matchers():
    assert sel("m", eq={"b": 'x"y'}, re_={"a": "$v"}, ne={"c": ""}) == \
        'm{a=~"$v", b="x\\"y", c!=""}'


# -- PromQL syntax (promtool) --------------------------------------------------------------------

VALUES = {"team": ".*", "model": ".*", "version": ".*", "backend": ".*", "datasource": "x"}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_every_query_is_valid_promql(tmp_path: Path, dashboards):
    exprs = sorted({substitute(t["expr"], VALUES) for _, _, t in _all_queries(dashboards)})
    rules = {"groups": [{"name": "dashboard-queries", "rules": [
        {"record": f"fleetwatch:dashboard_query_{i}:check", "expr": e}
        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump(rules))
    res = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout
