"""The sidecar's configuration watch against a Triton API that fails: the failure is
counted and logged once, the last known configuration kept, /metrics still served, and a
running change counted once; a drift needs both sides (a missing answer claims none).

The upstream is ``FlakyTritonAPI``, a test double: a real Triton cannot be made to answer
HTTP 500 or garbage on ``/v2/models/<m>/config`` on demand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from fleetwatch.labels.registry import parse_registry
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.config_watch import ConfigWatch
from fleetwatch.sidecar.scraper import Scraper
from tests.support.page_helpers import serve

BODY = ('# TYPE nv_inference_request_success counter\n'
        'nv_inference_request_success{model="ranker",version="1"} 3\n'
        'nv_inference_request_success{model="ranker",version="2"} 4\n')
CONFIG = {"name": "ranker", "backend": "python", "dynamic_batching": {},
          "instance_group": [{"kind": "KIND_CPU", "count": 1, "gpus": []}]}
REGISTRY = parse_registry({"models": [
    {"name": "ranker", "team": "t", "owner": "o", "oncall": "c",
     "declared": {"model_version": "2", "dynamic_batching": True}}]})


class FlakyTritonAPI:
    """Test double: Triton's /metrics, /v2, readiness, repository index and model
    configuration, whose configuration answer the test sets (a document, or a status)."""

    def __init__(self) -> None:
        self.config: object = CONFIG
        self.status = 200
        self.index = [{"name": "ranker", "version": "1", "state": "READY"},
                      {"name": "ranker", "version": "2", "state": "READY"}]

    def app(self) -> web.Application:
        async def metrics(_r: web.Request) -> web.Response:
            return web.Response(text=BODY)

        async def meta(_r: web.Request) -> web.Response:
            return web.json_response({"name": "triton", "version": "2.51.0"})

        async def ready(_r: web.Request) -> web.Response:
            return web.Response(text="")

        async def index(_r: web.Request) -> web.Response:
            return web.json_response(self.index)

        async def config(_r: web.Request) -> web.Response:
            if self.status != 200:
                return web.Response(status=self.status, text="boom")
            return web.json_response(self.config)

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/v2", meta)
        app.router.add_get("/v2/models/{m}/ready", ready)
        app.router.add_post("/v2/repository/index", index)
        app.router.add_get("/v2/models/{m}/config", config)
        return app


def _families(watch: ConfigWatch) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(watch.metrics().decode())}


def _value(fams, name, **labels) -> float | None:
    """One sample's value (a counter's family is named without ``_total``)."""
    samples = fams.get(name.removesuffix("_total"), [])
    hits = [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]
    assert len(hits) <= 1
    return hits[0] if hits else None


@asynccontextmanager
async def _watching(
        api: FlakyTritonAPI) -> AsyncIterator[tuple[ConfigWatch, aiohttp.ClientSession]]:
    """A scraper and a configuration watch on ``api`` (one Triton target), after one
    scrape and one read and evaluation of the running configuration."""
    async with serve(api.app()) as base:
        cfg = parse_config({"scrape": {"interval_seconds": 1, "timeout_seconds": 1},
                            "targets": [{"name": "triton", "kind": "triton",
                                         "url": base + "/metrics", "api_url": base}]})
        async with Scraper(cfg, REGISTRY) as scraper, aiohttp.ClientSession() as session:
            watch = ConfigWatch(cfg, REGISTRY, scraper.states)
            await scraper.scrape_once()
            await watch.refresh(session)
            watch.evaluate()
            yield watch, session


def test_failures_counted_logged_once_last_config_kept(caplog):
    api = FlakyTritonAPI()

    async def scenario() -> None:
        async with _watching(api) as (watch, session):
            fams = _families(watch)
            assert _value(fams, "fleetwatch_config_drift", field="model_version") == 1
            assert _value(fams, "fleetwatch_config_drift", field="dynamic_batching") == 0
            api.status = 500  # the configuration cannot be read: keep the last one
            with caplog.at_level(logging.WARNING, "fleetwatch.governance"):
                for _ in range(3):
                    await watch.refresh(session)
                    watch.evaluate()
            warned = [r for r in caplog.records if "cannot read the running" in r.message]
            assert len(warned) == 1 and "HTTP 500" in warned[0].message
            fams = _families(watch)
            assert _value(fams, "fleetwatch_config_reads_failed_total",
                          target="triton") == 3
            assert _value(fams, "fleetwatch_config_drift", field="dynamic_batching") == 0
            assert _value(fams, "modelserver_model_config_changes_total",
                          model="ranker") == 0
            api.status, api.config = 200, {**CONFIG}
            del api.config["dynamic_batching"]  # a running change: counted once
            api.index = api.index[1:]  # only version 2 loaded: no more version drift
            for _ in range(2):
                await watch.refresh(session)
                watch.evaluate()
            fams = _families(watch)
            assert _value(fams, "modelserver_model_config_changes_total",
                          model="ranker") == 1
            assert _value(fams, "fleetwatch_config_drift", field="dynamic_batching") == 1
            assert _value(fams, "fleetwatch_config_drift", field="model_version") == 0

    asyncio.run(scenario())


def test_garbage_configuration_claims_no_drift():
    api = FlakyTritonAPI()
    api.config = ["not", "an", "object"]

    async def scenario() -> None:
        async with _watching(api) as (watch, _session):
            fams = _families(watch)
            assert _value(fams, "fleetwatch_config_drift", field="dynamic_batching") is None
            assert _value(fams, "fleetwatch_config_reads_failed_total",
                          target="triton") == 1

    asyncio.run(scenario())
