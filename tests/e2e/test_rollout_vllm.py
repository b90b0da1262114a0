"""Warm-up gating on the real vLLM (the session server): after a restart, the sidecar's
``/readyz`` stays 503 for ``tiny-llm`` — although vLLM's ``/health`` answers 200 — until
``fleetwatch warmup`` sent the registry's warm-up set (prompt lengths 24–96 words, one
request at a time), then 200; ``fleetwatch_model_warm`` goes 0 → 1. The warm-up's first
and last latencies are printed (on the CPU with ``--enforce-eager`` the first requests
need not be slower: the gating is asserted, the latencies reported).

The session server has served other tests' requests (its counters count since its start,
so it *is* warm), hence the restart: a new process is a cold instance. The server is
restarted on the same port and left running for the next module.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
import yaml
from click.testing import CliRunner

from fleetwatch.cli import main
from fleetwatch.commands.warmup import Plan, draw_lengths, llm_latencies
from fleetwatch.labels.registry import parse_registry
from fleetwatch.labels.warmup import WarmupSpec
from fleetwatch.sidecar.config import parse_config
from tests.e2e.test_dashboards_prometheus import SidecarThread
from tests.support.helpers import wait_until

pytestmark = pytest.mark.vllm

COUNT = 8
REGISTRY = {"models": [{
    "name": "tiny-llm", "team": "ml", "owner": "a@example.com", "oncall": "ml-oncall",
    "warmup": {"gate": "required", "protocol": "openai", "count": COUNT,
               "llm": {"unit": "words", "lengths": [24, 48, 96], "weights": [2, 1, 1],
                       "max_tokens": 8}}},
    {"name": "other-llm", "team": "ml", "owner": "a@example.com", "oncall": "ml-oncall",
     "warmup": {"protocol": "openai", "count": 1, "llm": {"lengths": [24]}}}]}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""




def _prompt_tokens(s) -> float:
    """vLLM's own count of prompt tokens (``vllm:prompt_tokens_total``)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for fam in text_string_to_metric_families(_get(s.metrics_url)[1]):
        if fam.name == "vllm:prompt_tokens":
            total += sum(x.value for x in fam.samples if x.name.endswith("_total"))
    return total


WARM = 'fleetwatch_model_warm{model="tiny-llm",model_version="",target="vllm"}'


def test_readiness_flips_only_after_the_warm_up(vllm_server, tmp_path):
    s = vllm_server
    cfg = {"listen": {"address": "127.0.0.1", "port": 0},
           "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
           "registry": "registry.yaml",
           "targets": [{"name": "vllm", "kind": "vllm", "url": s.metrics_url,
                        "health_url": s.health_url}]}
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(REGISTRY))
    (tmp_path / "sidecar.yaml").write_text(yaml.safe_dump(cfg))
    sidecar = SidecarThread(parse_config(cfg), parse_registry(REGISTRY), None).start()
    base = f"http://127.0.0.1:{sidecar.port}"

    def readyz() -> tuple[int, dict]:
        status, body = _get(f"{base}/readyz")
        return status, json.loads(body) if body else {}

    try:
        s.terminate()
        wait_until(lambda: readyz()[0] == 503, "not ready after the stop")
        # start() returns once vLLM's /health answers 200, within its own bound; a shorter
        # one here left a start running into the next module's tests on a busy machine
        s.start()
        assert s.running, s.log_tail()
        # vLLM says ready; the sidecar reads the reset counter and stays not ready
        def cold() -> tuple[int, dict] | None:
            r = readyz()
            t = r[1].get("targets", {}).get("vllm", {})
            return r if r[0] == 503 and t.get("up") and t.get("models_not_ready") == [] \
                and t.get("models_not_warm") else None

        status, doc = wait_until(cold, "vLLM ready, the sidecar not (cold)")
        print("after the restart:", status, doc["targets"]["vllm"])
        assert doc["targets"]["vllm"]["models_not_warm"] == ["tiny-llm"]
        wait_until(lambda: f"{WARM} 0.0" in _get(f"{base}/metrics")[1], "fleetwatch_model_warm 0")
        for _ in range(3):  # a few more scrapes: still not ready without the warm-up
            time.sleep(1.0)
            assert readyz()[0] == 503

        res = CliRunner().invoke(main, ["warmup", "--config", str(tmp_path / "sidecar.yaml"),
                                        "--model", "other-llm"])  # not served: asked first
        assert res.exit_code == 2, res.output
        assert "model other-llm: not served by" in res.output and "tiny-llm" in res.output
        assert readyz()[0] == 503
        res = CliRunner().invoke(main, ["warmup", "--config", str(tmp_path / "sidecar.yaml"),
                                        "--model", "tiny-llm"])
        print(res.output)
        assert res.exit_code == 0, res.output
        assert f"warm-up of {COUNT} requests" in res.output
        wait_until(lambda: readyz()[0] == 200, "ready after the warm-up")
        assert f"{WARM} 1.0" in _get(f"{base}/metrics")[1]
        assert readyz()[1]["targets"]["vllm"]["models_not_warm"] == []

        # unit tokens: token-id prompts of exactly the drawn lengths (vLLM counts them)
        spec = WarmupSpec.model_validate({**REGISTRY["models"][0]["warmup"], "count": 4,
                                          "llm": {"unit": "tokens", "lengths": [20, 33],
                                                  "max_tokens": 4}})
        before = _prompt_tokens(s)
        lat = llm_latencies(Plan("tiny-llm", "", spec, s.url))
        assert len(lat) == 4
        assert _prompt_tokens(s) - before == sum(draw_lengths(spec))
    finally:
        sidecar.stop()
        if not s.running:
            s.start()  # leave a server for the next module


def test_warm_up_errors(tmp_path):
    """An unknown model: exit 2; a server that does not answer: exit 1, naming it."""
    cfg = {"registry": "registry.yaml",
           "targets": [{"name": "vllm", "kind": "vllm", "url": "http://127.0.0.1:9/metrics"}]}
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(REGISTRY))
    (tmp_path / "sidecar.yaml").write_text(yaml.safe_dump(cfg))
    run = CliRunner().invoke
    res = run(main, ["warmup", "--config", str(tmp_path / "sidecar.yaml"), "--model", "nope"])
    assert res.exit_code == 2 and "model nope: not in the registry" in res.output, res.output
    res = run(main, ["warmup", "--config", str(tmp_path / "sidecar.yaml")])
    assert res.exit_code == 1, res.output
    assert "warm-up request 1 of 8 to http://127.0.0.1:9 failed" in res.output
