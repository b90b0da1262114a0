"""Declared vs running on a real vLLM (CPU build): its engine version, from ``/version``,
against the registry's declaration; the fields vLLM does not report are not compared. The
lint's LLM readiness check on the same engine: a startup allowance (900 s) above the
not-ready alert's default for the standard tier (10m), in the sidecar and in
``fleetwatch lint --config``."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fleetwatch.demo.vllm import VLLMServer
from tests.support.hostile import Sidecar, cli

pytestmark = pytest.mark.vllm

DECLARED_VERSION = "0.0.1"  # no vLLM release: the real engine's version differs


@pytest.fixture(scope="module")
def sidecar(vllm_server: VLLMServer) -> Iterator[Sidecar]:
    registry = {"models": [
        {"name": vllm_server.served_model_name, "team": "genai", "owner": "g@example.com",
         "oncall": "genai-oncall", "declared": {"engine_version": DECLARED_VERSION,
                                                "dynamic_batching": False},
         "deployment": {"name": "tiny-llm", "startup_seconds": 900}}]}
    cfg = {"scrape": {"interval_seconds": 1.0, "timeout_seconds": 1.0,
                      "config_interval_seconds": 1.0},
           "targets": [{"name": "vllm", "kind": "vllm", "url": vllm_server.metrics_url}]}
    with Sidecar(cfg, registry=registry) as s:
        yield s



def test_another_engine_version_drifts(sidecar: Sidecar, vllm_server: VLLMServer) -> None:
    with urllib.request.urlopen(vllm_server.url + "/version", timeout=30) as r:
        running = json.load(r)["version"]
    model = vllm_server.served_model_name
    sidecar.wait_metric("fleetwatch_config_drift", 1, timeout=120, model=model,
                        field="engine_version")
    assert sidecar.metric("fleetwatch_config_drift_info", model=model, field="engine_version",
                          declared=DECLARED_VERSION, running=running) == 1
    # vLLM has no dynamic batcher to report: not compared, no series
    assert sidecar.metric("fleetwatch_config_drift", model=model,
                          field="dynamic_batching") is None
    assert sidecar.metric("modelserver_model_config_changes_total", model=model,
                          backend="vllm") == 0


def test_llm_readiness_finding_in_the_sidecar_and_the_command(
        sidecar: Sidecar, vllm_server: VLLMServer, tmp_path: Path) -> None:
    model = vllm_server.served_model_name
    sidecar.wait_metric("fleetwatch_model_config_findings", 1, timeout=120, model=model,
                        check="llm_readiness_below_startup", severity="warning")
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump({"models": [
        {"name": model, "team": "genai", "owner": "g@example.com", "oncall": "genai-oncall",
         "deployment": {"name": "tiny-llm", "startup_seconds": 900}}]}))
    (tmp_path / "sidecar.yaml").write_text(yaml.safe_dump({
        "registry": "registry.yaml",
        "targets": [{"name": "vllm", "kind": "vllm", "url": vllm_server.metrics_url}]}))
    r = cli("lint", "--config", str(tmp_path / "sidecar.yaml"))
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        f"model {model}: [warning] llm_readiness_below_startup: the not-ready alert allows "
        "600 s for tier 'standard', below the registry's deployment.startup_seconds 900: "
        "raise model_not_ready.startup_allowance.standard to at least 900 s (or lower "
        "startup_seconds)"]
