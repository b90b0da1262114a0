"""The sidecar in front of a real Triton Inference Server (nvidia-pytriton's tritonserver).

Load goes over HTTP and gRPC (tritonclient); the normalized values must equal Triton's own
after conversion, registry labels must appear, a second target being down must not stop
the sidecar, and /readyz must follow model readiness.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections import defaultdict

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.clients.triton.stream import stream_requests
from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.load import faulty_inputs, ranker_inputs, streamer_inputs
from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.labels.registry import load_registry
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.server import make_app
from tests.support.helpers import ROOT

pytestmark = pytest.mark.triton

REGISTRY = load_registry(ROOT / "tests" / "data" / "registry.yaml")


def _config(server, extra_targets=()):
    return parse_config({
        "scrape": {"interval_seconds": 1.0, "timeout_seconds": 1.0},
        "targets": [{"name": "triton", "kind": "triton", "url": server.metrics_url,
                     "api_url": server.http_url, "models": list(server.models)},
                    *extra_targets],
    })


def _upstream(text: str) -> dict[str, dict[tuple, float]]:
    """Triton's own values, summed over gpu_uuid, keyed by family then (model, version, …)."""
    out: dict[str, dict[tuple, float]] = defaultdict(lambda: defaultdict(float))
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if "model" not in s.labels:
                continue
            key = (s.labels["model"], s.labels["version"], s.labels.get("reason", ""),
                   s.labels.get("quantile", ""))
            name = s.name  # prometheus_client adds _total to counter samples: undo it
            if fam.type == "counter" and name == fam.name + "_total":
                name = fam.name
            out[name][key] += s.value
    return out


def _normalized(body: str) -> dict[str, dict[tuple, float]]:
    samples, meta = parse_exposition(body)
    assert not meta.invalid
    out: dict[str, dict[tuple, float]] = defaultdict(dict)
    for name, labels, value in samples:
        lab = dict(labels)
        out[name][tuple(sorted(lab.items()))] = value
    return out


def _labels(body: str, name: str) -> list[dict[str, str]]:
    samples, _meta = parse_exposition(body)
    return [dict(labels) for n, labels, _v in samples if n == name]


def _find(fam: dict[tuple, float], **want) -> float:
    hits = [v for k, v in fam.items() if all((a, b) in k for a, b in want.items())]
    assert len(hits) == 1, (want, fam)
    return hits[0]


async def _scrape(cfg):
    async with Scraper(cfg, REGISTRY) as scraper:
        await scraper.scrape_once()
        return scraper.body.decode(), scraper


def _settled_metrics(server, want: dict[tuple[str, str, str], int], timeout_s: float = 5.0) -> str:
    """Triton's exposition once it counts ``want`` (model, version, failure reason or "" for
    successes). Triton bumps a counter just after the client has its answer (a stream's
    just after its final response), so a scrape at once can miss the last requests."""
    deadline = time.monotonic() + timeout_s
    while True:
        raw = server.metrics_text()
        up = _upstream(raw)
        counts = {key: up["nv_inference_request_failure" if key[2] else
                          "nv_inference_request_success"][(*key, "")] for key in want}
        if counts == want or time.monotonic() >= deadline:
            return raw
        time.sleep(0.1)


def test_normalized_values_equal_triton_after_conversion(triton_server):
    s = triton_server
    r1 = send_requests(s.http_address, "ranker", inputs=ranker_inputs, requests=24, concurrency=4,
                       model_version="1")
    r2 = send_requests(s.grpc_address, "ranker", protocol="grpc", inputs=ranker_inputs,
                       requests=12, concurrency=3,
                       model_version="2")
    rf = send_requests(s.http_address, "faulty", inputs=faulty_inputs(0.25), requests=20,
                       concurrency=2)
    rs = stream_requests(s.grpc_address, "streamer", inputs=streamer_inputs(4), requests=3)
    assert r1.succeeded == 24 and r2.succeeded == 12 and rs.succeeded == 3
    assert rf.failed == 5 and rf.succeeded == 15

    raw = _settled_metrics(s, {("ranker", "1", ""): 24, ("ranker", "2", ""): 12,
                               ("faulty", "1", ""): 15, ("streamer", "1", ""): 3,
                               ("faulty", "1", "BACKEND"): 5})
    body, scraper = asyncio.run(_scrape(_config(s)))
    up, norm = _upstream(raw), _normalized(body)

    for model, version in [("ranker", "1"), ("ranker", "2"), ("faulty", "1"), ("streamer", "1")]:
        labels = {"model": model, "model_version": version, "backend": "triton",
                  "runtime": "python"}
        success = up["nv_inference_request_success"][(model, version, "", "")]
        assert _find(norm["modelserver_requests_total"], outcome="success", **labels) == success
        for reason in ("BACKEND", "REJECTED", "CANCELED", "OTHER"):
            assert _find(norm["modelserver_requests_total"], outcome="error",
                         error_type={"CANCELED": "cancelled"}.get(reason, reason.lower()),
                         **labels) == up["nv_inference_request_failure"][(model, version,
                                                                           reason, "")]
        # mean latency in seconds: Δduration_us / Δsuccess / 1e6
        dur = up["nv_inference_request_duration_us"][(model, version, "", "")]
        n_sum = _find(norm["modelserver_request_duration_seconds_sum"], **labels)
        n_count = _find(norm["modelserver_request_duration_seconds_count"], **labels)
        assert n_sum == pytest.approx(dur / 1e6, rel=1e-12)
        assert n_count == success
        queue = up["nv_inference_queue_duration_us"][(model, version, "", "")]
        assert _find(norm["modelserver_queue_duration_seconds_sum"], **labels) == \
            pytest.approx(queue / 1e6, rel=1e-12)
        pending = up["nv_inference_pending_request_count"][(model, version, "", "")]
        assert _find(norm["modelserver_requests_active"], state="waiting", **labels) == pending
        q99 = up["nv_inference_request_summary_us"].get((model, version, "", "0.99"))
        if q99 is not None and q99 == q99:
            assert _find(norm["modelserver_request_duration_summary_seconds"], quantile="0.99",
                         **labels) == pytest.approx(q99 / 1e6)
        info = _find(norm["modelserver_model_info"], model=model, model_version=version,
                     runtime="python")
        assert info == 1

    assert _find(norm["modelserver_requests_total"], model="faulty", error_type="backend") == 5
    assert _find(norm["modelserver_requests_total"], model="ranker", model_version="1",
                 outcome="success") == 24
    # registry labels
    assert _find(norm["modelserver_model_info"], model="ranker", model_version="2",
                 team="search", oncall="search-oncall", latency_tier="interactive") == 1
    assert _find(norm["modelserver_model_info"], model="faulty", owner="carol@example.com") == 1
    # the decoupled model's custom vLLM-backend-format families are normalized too
    assert _find(norm["modelserver_time_to_first_token_seconds_count"], model="streamer") == \
        up["vllm:time_to_first_token_seconds_count"][("streamer", "1", "", "")]
    assert scraper.states["triton"].runtimes == {"ranker": "python", "faulty": "python",
                                                 "streamer": "python"}
    # configuration identity: Triton's own version (server metadata, GET /v2) on every model
    with urllib.request.urlopen(s.http_url + "/v2", timeout=5) as r:
        meta = json.load(r)
    assert meta["version"] == "2.51.0"  # the pinned nvidia-pytriton wheel's tritonserver
    versions = {lab["engine_version"] for lab in _labels(body, "modelserver_model_info")}
    assert versions == {"2.51.0"}
    assert {lab["quantization"] for lab in _labels(body, "modelserver_model_info")} == {""}


def test_keeps_serving_while_second_target_is_down_and_readyz_follows_models(triton_server):
    s = triton_server
    cfg = _config(s, [{"name": "dead", "url": "http://127.0.0.1:9/metrics",
                       "labels": {"server": "dead"}}])

    async def scenario():
        async with Scraper(cfg, REGISTRY) as scraper:
            runner = web.AppRunner(make_app(scraper))
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            base = f"http://127.0.0.1:{runner.addresses[0][1]}"
            async with aiohttp.ClientSession() as http:
                await scraper.scrape_once()
                async with http.get(f"{base}/metrics") as r:
                    text = await r.text()
                assert 'fleetwatch_upstream_up{target="dead"} 0.0' in text
                assert 'fleetwatch_upstream_up{target="triton"} 1.0' in text
                assert 'modelserver_requests_total{model="ranker"' in text
                async with http.get(f"{base}/readyz") as r:
                    assert r.status == 503  # the dead target is required
                    assert (await r.json())["targets"]["triton"]["ready"] is True

                # only Triton now: ready, until a model unloads
                scraper.states.pop("dead")
                await scraper.scrape_once()
                async with http.get(f"{base}/readyz") as r:
                    assert r.status == 200
                # not 'faulty': the wheel's Triton can hang unloading a Python-backend model
                # whose stub raised (the module's other test makes it fail 5 requests):
                # 'faulty' stayed UNLOADING for 90 s in a fresh-clone run
                await asyncio.to_thread(s.unload_model, "streamer")
                await scraper.scrape_once()
                async with http.get(f"{base}/readyz") as r:
                    detail = await r.json()
                    assert r.status == 503
                    assert detail["targets"]["triton"]["models_not_ready"] == ["streamer"]
                async with http.get(f"{base}/metrics") as r:
                    text = await r.text()
                assert ('fleetwatch_upstream_model_ready{model="streamer",target="triton"} 0.0'
                        in text)
                await asyncio.to_thread(s.load_model, "streamer")
                await scraper.scrape_once()
                async with http.get(f"{base}/readyz") as r:
                    assert r.status == 200
            await runner.cleanup()

    asyncio.run(scenario())
