"""SLO engine on a real Triton: availability on the model that raises, time slices on
Triton's latency summaries, and the engine's HTTP endpoints."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.load import faulty_inputs, ranker_inputs
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.server import make_app, slo_routes
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file

pytestmark = pytest.mark.triton

SLOS = {
    "windows": [{"long": "2m", "short": "30s", "budget_consumed": 0.05}],
    "capacity": {"window": "2m", "min_events": 5, "hysteresis_updates": 1},
    "slos": [
        {"name": "faulty-availability", "selector": {"models": ["faulty"]},
         "sli": {"availability": {}}, "objectives": [{"target": "95%"}],
         "timeWindow": [{"duration": "10m"}], "concurrency": {"envelope": 4}},
        # 30 s: what no ranker request takes, even on a machine that stalls for seconds
        {"name": "ranker-p99-fast", "selector": {"models": ["ranker"]},
         "sli": {"timeslice": {"metric": "request", "statistic": "p99",
                               "threshold_seconds": 30.0}},
         "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "10m"}],
         "budgetingMethod": "Timeslices", "concurrency": {"envelope": 4}},
        {"name": "ranker-p99-impossible", "selector": {"models": ["ranker"]},
         "sli": {"timeslice": {"metric": "request", "statistic": "p99",
                               "threshold_seconds": 0.000001}},
         "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "10m"}],
         "budgetingMethod": "Timeslices", "concurrency": {"envelope": 4}},
        {"name": "ranker-mean", "selector": {"models": ["ranker"]},
         "sli": {"timeslice": {"metric": "request", "statistic": "mean",
                               "threshold_seconds": 30.0}},
         "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "10m"}],
         "budgetingMethod": "Timeslices", "concurrency": {"envelope": 4}},
    ],
}


def _status(engine, slo, version=None):
    rows = [s for s in engine.status() if s["slo"] == slo
            and (version is None or s["model_version"] == version)]
    assert rows, (slo, [s["slo"] for s in engine.status()])
    return rows


def test_availability_and_timeslice_slos_on_real_triton(triton_server):
    s = triton_server
    cfg = parse_config({"scrape": {"interval_seconds": 1, "timeout_seconds": 1},
                        "targets": [{"name": "triton", "kind": "triton",
                                     "url": s.metrics_url, "api_url": s.http_url}]})
    engine = SLOEngine(parse_slo_file(SLOS))

    async def scenario():
        async with Scraper(cfg) as scraper:
            scraper.subscribers.append(engine.update)
            await scraper.scrape_once()  # baseline
            for _ in range(3):
                await asyncio.to_thread(send_requests, s.http_address, "faulty",
                                        inputs=faulty_inputs(0.25), requests=20, concurrency=2)
                await asyncio.to_thread(send_requests, s.http_address, "ranker",
                                        inputs=ranker_inputs, requests=16, concurrency=4, model_version="1")
                await asyncio.sleep(1.1)  # Triton refreshes summaries/pending each second
                await scraper.scrape_once()
            app = make_app(scraper, *slo_routes(engine))
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            base = f"http://127.0.0.1:{runner.addresses[0][1]}"
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{base}/slo") as r:
                    slo_json = await r.json()
                async with http.get(f"{base}/autoscaling/ranker") as r:
                    ranker_auto = await r.json()
                async with http.get(f"{base}/autoscaling/nope") as r:
                    assert r.status == 404
                async with http.get(f"{base}/metrics") as r:
                    metrics = await r.text()
            await runner.cleanup()
            return slo_json, ranker_auto, metrics

    slo_json, ranker_auto, metrics = asyncio.run(scenario())

    # availability on the model that raises for 25 % of inputs: 60 events, 15 bad
    (faulty,) = _status(engine, "faulty-availability")
    assert faulty["events"]["all"] == 60
    assert faulty["burn_rates"]["2m"]["all"] == pytest.approx(0.25 / 0.05)
    assert faulty["state"] == "regression"          # concurrency ≤ 4: inside the envelope
    assert faulty["error_budget_remaining"] == pytest.approx(1 - 15 / (0.05 * 60))

    # time slices on Triton's p99 summary: one event per interval with requests
    (fast,) = _status(engine, "ranker-p99-fast", "1")
    (impossible,) = _status(engine, "ranker-p99-impossible", "1")
    assert fast["events"]["all"] == impossible["events"]["all"] == 3
    assert fast["burn_rates"]["2m"]["all"] == 0.0
    assert impossible["burn_rates"]["2m"]["all"] == pytest.approx(1 / 0.1)
    (mean,) = _status(engine, "ranker-mean", "1")
    assert mean["events"]["all"] == 3 and mean["state"] == "ok"

    # endpoints and exposition
    assert {r["slo"] for r in slo_json["slos"]} >= {"faulty-availability", "ranker-p99-fast"}
    assert ranker_auto["model"] == "ranker" and ranker_auto["signal"] > 0
    assert ('fleetwatch_slo_events_total{backend="triton",band="all",model="faulty",'
            'model_version="1",slo="faulty-availability"} 60.0') in metrics
    assert ('fleetwatch_slo_state{backend="triton",model="faulty",model_version="1",'
            'slo="faulty-availability",state="regression"} 1.0') in metrics
