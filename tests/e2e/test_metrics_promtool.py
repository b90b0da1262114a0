"""The live /metrics of a sidecar in front of a real Triton passes ``promtool check metrics``
(no parse error, no duplicate; lint findings only where docs/metrics.md lists them), with
and without pass-through — also when a passed-through vLLM server exports its own
``process_*`` families, the sidecar's own win and are served once."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from fleetwatch.labels.registry import load_registry
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.server import make_app, slo_routes
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from tests.support.helpers import FIXTURES, ROOT
from tests.support.promtool_check import check_metrics

pytestmark = pytest.mark.triton

REGISTRY = load_registry(ROOT / "tests" / "data" / "registry.yaml")
VLLM_BODY = (FIXTURES / "vllm" / "v0.33.0-statlogger-cpu-generated.prom").read_text()
SLOS = {
    "windows": [{"long": "2m", "short": "30s", "budget_consumed": 0.05}],
    "slos": [{"name": "ranker-availability", "selector": {"models": ["ranker"]},
              "sli": {"availability": {}}, "objectives": [{"target": "95%"}],
              "timeWindow": [{"duration": "10m"}], "concurrency": {"envelope": 4}}],
}


async def _live_metrics(targets: list[dict], passthrough: bool, slos: bool) -> str:
    """Two /metrics bodies of a sidecar over ``targets`` after two scrape cycles; the
    second (clash counters have run once)."""
    vllm = web.Application()

    async def vllm_metrics(_request: web.Request) -> web.Response:
        return web.Response(text=VLLM_BODY, content_type="text/plain")

    vllm.router.add_get("/metrics", vllm_metrics)
    vllm_runner = web.AppRunner(vllm)
    await vllm_runner.setup()
    await web.TCPSite(vllm_runner, "127.0.0.1", 0).start()
    vllm_url = f"http://127.0.0.1:{vllm_runner.addresses[0][1]}/metrics"
    cfg = parse_config({
        "scrape": {"interval_seconds": 1.0, "timeout_seconds": 1.0},
        "passthrough_unmapped": passthrough,
        "targets": [{**t, "url": t["url"] or vllm_url} for t in targets]})
    try:
        async with Scraper(cfg, REGISTRY) as scraper:
            routes, extra = None, None
            if slos:
                engine = SLOEngine(parse_slo_file(SLOS), REGISTRY)
                scraper.subscribers.append(engine.update)
                routes, extra = slo_routes(engine)
            runner = web.AppRunner(make_app(scraper, routes, extra))
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            base = f"http://127.0.0.1:{runner.addresses[0][1]}"
            try:
                async with aiohttp.ClientSession() as http:
                    body = ""
                    for _cycle in range(2):
                        await scraper.scrape_once()
                        async with http.get(f"{base}/metrics") as r:
                            assert r.status == 200
                            body = await r.text()
                    return body
            finally:
                await runner.cleanup()
    finally:
        await vllm_runner.cleanup()


def _triton(server) -> dict:
    return {"name": "triton", "kind": "triton", "url": server.metrics_url,
            "api_url": server.http_url, "models": list(server.models)}


VLLM = {"name": "vllm", "kind": "vllm", "url": None, "required": False}


@pytest.mark.parametrize("passthrough", [False, True], ids=["plain", "passthrough"])
def test_triton_sidecar_metrics_pass_promtool(triton_server, passthrough):
    body = asyncio.run(_live_metrics([_triton(triton_server)], passthrough, slos=True))
    assert "modelserver_requests_total" in body and "fleetwatch_slo_" in body
    assert check_metrics(body) == []


def test_passed_through_process_families_are_served_once(triton_server):
    body = asyncio.run(_live_metrics([_triton(triton_server), VLLM], True, slos=False))
    assert check_metrics(body) == []
    assert body.count("# HELP process_virtual_memory_bytes ") == 1
    assert body.count("# TYPE process_virtual_memory_bytes ") == 1
    # vLLM's unmapped families pass through under their own names
    assert "\n# TYPE vllm:request_params_n histogram\n" in body
    dropped = [line for line in body.splitlines()
               if line.startswith('fleetwatch_exposition_dropped_series_total{origin="passthrough"}')]
    assert len(dropped) == 1 and float(dropped[0].split()[-1]) > 0, dropped


def test_without_passthrough_nothing_is_dropped(triton_server):
    body = asyncio.run(_live_metrics([_triton(triton_server), VLLM], False, slos=False))
    assert check_metrics(body) == []
    assert body.count("# HELP process_virtual_memory_bytes ") == 1
    for origin in ("normalized", "self", "slo", "passthrough"):
        assert f'fleetwatch_exposition_dropped_series_total{{origin="{origin}"}} 0.0' in body
