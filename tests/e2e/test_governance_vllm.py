"""Declared vs running on a real vLLM (CPU build): its engine version, from ``/version``,
against the registry's declaration; the fields vLLM does not report are not compared."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from fleetwatch.demo.vllm import VLLMServer
from tests.support.hostile import Sidecar

pytestmark = pytest.mark.vllm

DECLARED_VERSION = "0.0.1"  # no vLLM release: the real engine's version differs


@pytest.fixture(scope="module")
def sidecar(vllm_server: VLLMServer) -> Iterator[Sidecar]:
    registry = {"models": [
        {"name": vllm_server.served_model_name, "team": "genai", "owner": "g@example.com",
         "oncall": "genai-oncall", "declared": {"engine_version": DECLARED_VERSION,
                                                "dynamic_batching": False}}]}
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
