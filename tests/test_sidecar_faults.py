"""The sidecar under upstream faults: it keeps serving, marks the bad target, never crashes.

Upstream faults that a real server cannot be made to produce on demand (an HTML page, a
hang, a truncated body, HTTP 500) come from ``FaultServer``, a small aiohttp test double
named as such; healthy upstreams serve real captured expositions.
"""

from __future__ import annotations

import asyncio
import gzip
import logging

import aiohttp
import pytest
from aiohttp import web
from tests.helpers import FIXTURES

from fleetwatch.config import parse_config
from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.exporters.scraper import Scraper
from fleetwatch.exporters.server import make_app, readiness

VLLM_BODY = (FIXTURES / "vllm" / "v0.33.0-statlogger-cpu-generated.prom").read_text()
TRITON_BODY = (FIXTURES / "triton" /
               "triton-2.51.0-pytriton-cpu-two-models-summaries.prom").read_text()


class FaultServer:
    """Test double: an upstream whose /metrics misbehaves in a chosen way (fault injection)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.body = TRITON_BODY
        self.requests = 0
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        mode = self.mode
        if mode == "ok":
            return web.Response(text=self.body, content_type="text/plain")
        if mode == "gzip":
            return web.Response(body=gzip.compress(self.body.encode()),
                                headers={"Content-Encoding": "gzip",
                                         "Content-Type": "text/plain; version=0.0.4"})
        if mode == "http500":
            return web.Response(status=500, text="internal error")
        if mode == "html":
            return web.Response(text="<html><body>login</body></html>", content_type="text/html")
        if mode == "empty":
            return web.Response(text="", content_type="text/plain")
        if mode == "garbage":
            return web.Response(text="{{{{ not metrics\n\x01\x02 at all\n",
                                content_type="text/plain")
        if mode == "truncated":
            return web.Response(text=self.body[: len(self.body) // 2] + 'nv_inference_count{mod',
                                content_type="text/plain")
        if mode == "binary":
            return web.Response(body=b"\xff\xfe\xfd" * 50, content_type="text/plain")
        if mode == "slow":
            await asyncio.sleep(5)
            return web.Response(text=self.body, content_type="text/plain")
        raise AssertionError(mode)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/metrics", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        return f"http://127.0.0.1:{self.port}/metrics"

    async def stop(self) -> None:
        if self.runner:
            await self.runner.cleanup()


def _config(urls: dict[str, str], **scrape):
    return parse_config({
        "scrape": {"interval_seconds": 1.0, "timeout_seconds": 0.5, **scrape},
        "targets": [{"name": n, "url": u} for n, u in urls.items()],
    })


@pytest.mark.parametrize("mode,reason", [
    ("http500", "http_status"), ("html", "not_metrics"), ("empty", "empty"),
    ("garbage", "parse"), ("binary", "decode"), ("slow", "timeout"), ("down", "connection"),
])
def test_bad_target_is_marked_and_the_good_one_keeps_serving(mode, reason, caplog):
    async def scenario():
        bad, good = FaultServer(), FaultServer()
        good.body = VLLM_BODY
        bad_url, good_url = await bad.start(), await good.start()
        if mode == "down":
            await bad.stop()
        bad.mode = mode
        cfg = _config({"bad": bad_url, "good": good_url})
        async with Scraper(cfg) as scraper:
            with caplog.at_level(logging.WARNING, logger="fleetwatch.scraper"):
                await scraper.scrape_once()
                await scraper.scrape_once()
            states = scraper.states
            assert not states["bad"].up
            assert states["bad"].errors[reason] == 2
            assert states["good"].up
            body = scraper.body.decode()
            samples, meta = parse_exposition(body)
            assert not meta.invalid
            assert {dict(lab).get("backend") for _, lab, _ in samples} == {"vllm"}
            ready, detail = readiness(scraper)
            assert not ready and detail["targets"]["bad"]["up"] is False
            # one clear log line per state change, not one per scrape
            lines = [r.getMessage() for r in caplog.records if "target bad" in r.getMessage()]
            assert len(lines) == 1 and reason in lines[0]
            # it recovers when the upstream does
            if mode != "down":
                bad.mode = "ok"
                await scraper.scrape_once()
                assert states["bad"].up
                assert 'backend="triton"' in scraper.body.decode()
        await good.stop()
        if mode != "down":
            await bad.stop()

    asyncio.run(scenario())


def test_truncated_body_keeps_good_lines_and_counts_the_bad_one():
    async def scenario():
        srv = FaultServer()
        url = await srv.start()
        srv.mode = "truncated"
        async with Scraper(_config({"t": url})) as scraper:
            await scraper.scrape_once()
            st = scraper.states["t"]
            assert st.up
            assert st.invalid_lines_total == 1
            assert b"modelserver_requests_total" in scraper.body
        await srv.stop()

    asyncio.run(scenario())


def test_gzip_and_the_http_endpoints():
    async def scenario():
        srv = FaultServer()
        url = await srv.start()
        srv.mode = "gzip"
        async with Scraper(_config({"t": url})) as scraper:
            await scraper.scrape_once()
            assert scraper.states["t"].up
            app = make_app(scraper)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            async with aiohttp.ClientSession() as s:
                async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
                    text = await r.text()
                    assert r.status == 200
                    assert 'fleetwatch_upstream_up{target="t"} 1.0' in text
                    assert 'fleetwatch_upstream_scrape_errors_total{reason="timeout",target="t"} 0.0' in text
                    assert "modelserver_requests_total{" in text
                async with s.get(f"http://127.0.0.1:{port}/healthz") as r:
                    assert r.status == 200
                async with s.get(f"http://127.0.0.1:{port}/readyz") as r:
                    assert r.status == 200  # a fixture body, kind triton, no api_url: no model checks
                srv.mode = "http500"
                await scraper.scrape_once()
                async with s.get(f"http://127.0.0.1:{port}/readyz") as r:
                    assert r.status == 503
                    assert (await r.json())["targets"]["t"]["error"].startswith("HTTP 500")
                async with s.get(f"http://127.0.0.1:{port}/healthz") as r:
                    assert r.status == 200  # liveness never depends on upstreams
            await runner.cleanup()
        await srv.stop()

    asyncio.run(scenario())


def test_optional_target_down_does_not_block_readiness():
    async def scenario():
        srv = FaultServer()
        url = await srv.start()
        cfg = parse_config({"targets": [
            {"name": "t", "url": url},
            {"name": "gpus", "url": "http://127.0.0.1:9/metrics", "required": False},
        ]})
        async with Scraper(cfg) as scraper:
            await scraper.scrape_once()
            assert readiness(scraper)[0]
        await srv.stop()

    asyncio.run(scenario())
