"""Declared vs running configuration and the model-configuration lint on a real Triton.

The server runs the demo's ``ranker`` (versions 1 and 2 loaded), ``streamer`` (decoupled;
Triton started without first-response histograms) and ``llm``, a model whose configuration
says ``backend: "vllm"`` with Triton's dynamic batcher on
(:mod:`tests.support.vllm_named_backend`). The registry declares version 2 alone for the
ranker and no dynamic batching for ``llm``: the sidecar shows the drift and the findings on
``/metrics`` and on its status page, and ``fleetwatch lint`` reports them with exit 1.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fleetwatch.alerts.config import parse_alerting_config
from fleetwatch.alerts.generate import RULE_FILES, build_rules
from fleetwatch.demo.triton import DEFAULT_MODEL_REPOSITORY
from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.labels.registry import parse_registry
from fleetwatch.slo.spec import load_slo_file
from tests.support.helpers import ROOT, tool
from tests.support.hostile import Sidecar, cli
from tests.support.promtool_check import check_metrics
from tests.support.vllm_named_backend import TritonWithVLLMNamedBackend, write_model

pytestmark = pytest.mark.triton

REGISTRY = {"models": [
    {"name": "ranker", "team": "search", "owner": "alice@example.com",
     "oncall": "search-oncall", "latency_tier": "interactive",
     "declared": {"engine_version": "2.51.0", "model_version": "2",
                  "dynamic_batching": True,
                  "instance_groups": [{"kind": "KIND_CPU", "count": 1}]}},
    {"name": "llm", "team": "chat", "owner": "bob@example.com", "oncall": "chat-oncall",
     "latency_tier": "streaming", "declared": {"dynamic_batching": False}},
    {"name": "streamer", "team": "chat", "owner": "bob@example.com",
     "oncall": "chat-oncall"},
]}


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repository")
    for model in ("ranker", "streamer"):
        shutil.copytree(DEFAULT_MODEL_REPOSITORY / model, root / model)
    write_model(root, "llm")
    return root


@pytest.fixture(scope="module")
def server(repository: Path) -> Iterator[TritonWithVLLMNamedBackend]:
    with TritonWithVLLMNamedBackend(models=("ranker", "streamer", "llm"),
                                    model_repository=repository) as s:
        yield s


@pytest.fixture(scope="module")
def sidecar(server: TritonWithVLLMNamedBackend) -> Iterator[Sidecar]:
    cfg = {"scrape": {"interval_seconds": 1.0, "timeout_seconds": 1.0,
                      "config_interval_seconds": 1.0},
           "targets": [{"name": "triton", "kind": "triton", "url": server.metrics_url,
                        "api_url": server.http_url}]}
    with Sidecar(cfg, registry=REGISTRY) as s:
        yield s


def test_drift_and_findings_on_metrics(sidecar: Sidecar) -> None:
    sidecar.wait_metric("fleetwatch_config_drift", 1, timeout=120, model="ranker",
                        field="model_version")
    assert sidecar.metric("fleetwatch_config_drift_info", model="ranker",
                          field="model_version", declared="2", running="1,2") == 1
    assert sidecar.metric("fleetwatch_config_drift", model="ranker",
                          field="engine_version") == 0
    assert sidecar.metric("fleetwatch_config_drift", model="ranker",
                          field="dynamic_batching") == 0
    assert sidecar.metric("fleetwatch_config_drift", model="ranker",
                          field="instance_groups") == 0
    sidecar.wait_metric("fleetwatch_config_drift", 1, timeout=60, model="llm",
                        field="dynamic_batching")
    assert sidecar.metric("fleetwatch_model_config_findings", model="llm",
                          check="dynamic_batching_llm_backend", severity="error") == 1
    assert sidecar.metric("fleetwatch_model_config_findings", model="ranker",
                          check="latency_no_queue_timeout", severity="warning") == 1
    assert sidecar.metric("fleetwatch_model_config_findings", model="streamer",
                          check="decoupled_no_first_response_histogram",
                          severity="warning") == 1
    assert sidecar.metric("modelserver_model_config_changes_total", model="ranker") == 0
    assert sidecar.metric("fleetwatch_config_reads_failed_total", target="triton") == 0
    _status, body, _ = sidecar.get("/metrics", timeout=120)
    assert check_metrics(body) == []


def test_status_page_shows_them(sidecar: Sidecar) -> None:
    sidecar.wait_metric("fleetwatch_config_drift", 1, timeout=120, model="llm",
                        field="dynamic_batching")
    deadline = time.monotonic() + 60
    while True:  # the page of the next cycle carries the watch's result
        status, html, _ = sidecar.get("/")
        assert status == 200
        if 'id="configuration"' in html or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    section = html.split('<section id="configuration">', 1)[1].split("</section>", 1)[0]
    assert "model_version" in section and "declared &#x27;2&#x27;" in section
    assert "dynamic_batching_llm_backend" in section
    assert "decoupled_no_first_response_histogram" in section


def test_running_change_is_counted(sidecar: Sidecar, server: TritonWithVLLMNamedBackend
                                   ) -> None:
    sidecar.wait_metric("fleetwatch_config_drift", 1, timeout=120, model="llm",
                        field="dynamic_batching")
    server.unload_model("llm")  # the index says UNAVAILABLE: no loaded version
    try:
        sidecar.wait_metric("modelserver_model_config_changes_total", 1, timeout=120,
                            model="llm")
    finally:
        server.load_model("llm")


def test_lint_command_on_the_server(server: TritonWithVLLMNamedBackend,
                                    tmp_path: Path) -> None:
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(REGISTRY))
    (tmp_path / "sidecar.yaml").write_text(yaml.safe_dump({
        "registry": "registry.yaml",
        "targets": [{"name": "triton", "kind": "triton", "url": server.metrics_url,
                     "api_url": server.http_url}]}))
    r = cli("lint", "--config", str(tmp_path / "sidecar.yaml"))
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert any(ln.startswith("model llm: [error] dynamic_batching_llm_backend: ")
               and "remove the dynamic_batching block" in ln for ln in lines), lines
    assert any(ln.startswith("model streamer: [warning] decoupled_no_first_response_histogram")
               and "histogram_latencies=true" in ln for ln in lines), lines
    assert any(ln.startswith("model ranker: [warning] latency_no_queue_timeout")
               for ln in lines), lines
    assert len(lines) == 3, lines


def test_the_alert_fires_in_promtool_on_the_sidecars_series(sidecar: Sidecar,
                                                           tmp_path: Path) -> None:
    """The ranker's drift and info series exactly as this sidecar serves them, held for
    20 minutes, through the rules generated from the same registry: FleetwatchConfigDrift
    fires for the drifting field only, routed to the ranker's owner."""
    sidecar.wait_metric("fleetwatch_config_drift", 1, timeout=120, model="ranker",
                        field="model_version")
    _status, body, _ = sidecar.get("/metrics", timeout=120)
    samples, _meta = parse_exposition(body)
    series = []
    for name, labels, value in samples:
        lab = dict(labels)
        if lab.get("model") != "ranker" or name not in ("fleetwatch_config_drift",
                                                         "modelserver_model_info"):
            continue
        sel = ", ".join(f'{k}="{v}"' for k, v in sorted({**lab, "instance": "s:9810"}.items()))
        series.append({"series": f"{name}{{{sel}}}", "values": f"{value:g}x20"})
    assert any("model_version" in x["series"] for x in series), series
    files = build_rules(parse_registry(REGISTRY), load_slo_file(ROOT / "examples" / "slos.yaml"),
                        parse_alerting_config({}), ["test"], formats=("plain",))
    for name in RULE_FILES:
        (tmp_path / name).write_text(files[name])
    (tmp_path / "t.yml").write_text(yaml.safe_dump({
        "rule_files": list(RULE_FILES), "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "14m", "alertname": "FleetwatchConfigDrift", "exp_alerts": []},
            {"eval_time": "16m", "alertname": "FleetwatchConfigDrift", "exp_alerts": [{
                "exp_labels": {"model": "ranker", "field": "model_version",
                               "severity": "ticket", "team": "search",
                               "owner": "alice@example.com", "oncall": "search-oncall"},
                "exp_annotations": {
                    "summary": "ranker runs another model_version than its registry "
                               "declaration",
                    "description": "The running model_version of model ranker has differed "
                                   "from the registry's declared: block for 15m "
                                   "(fleetwatch_config_drift_info has both values): deploy "
                                   "what is declared, or change the declaration through "
                                   "review. Owner alice@example.com, on-call "
                                   "search-oncall."}}]},
        ]}]}))
    res = subprocess.run([tool("promtool"), "test", "rules", "t.yml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
