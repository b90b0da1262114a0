"""The sidecar under upstream faults: it keeps serving, marks the bad target, never crashes.

Upstream faults that a real server cannot be made to produce on demand (an HTML page, a
hang, a truncated body, HTTP 500, a body trickling in small chunks, a connection closed
mid-body, a redirect loop) come from ``FaultServer``, a small aiohttp test double named as
such; healthy upstreams serve real captured expositions.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import re

import aiohttp
import pytest
from aiohttp import web

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.parser import parse_exposition
from fleetwatch.exporters.sources import TABLES
from fleetwatch.exporters.table import TargetContext
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.server import make_app, readiness
from tests.support.helpers import FIXTURES

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
        self.chunk_size = 4096  # "chunked": bytes per write
        self.chunk_delay = 0.001  # "chunked": seconds between writes

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
        if mode == "bom":
            return web.Response(body=b"\xef\xbb\xbf" + self.body.encode(),
                                content_type="text/plain")
        if mode == "gzip_corrupt":
            return web.Response(body=b"\x1f\x8b\x08\x00" + b"not really gzip" * 20,
                                headers={"Content-Encoding": "gzip",
                                         "Content-Type": "text/plain"})
        if mode == "gzip_cut":  # a complete HTTP body holding half a gzip stream
            z = gzip.compress(self.body.encode())
            return web.Response(body=z[: len(z) // 2],
                                headers={"Content-Encoding": "gzip",
                                         "Content-Type": "text/plain"})
        if mode == "redirect_loop":
            raise web.HTTPFound(request.path)
        return await self._stream(request, mode)

    async def _stream(self, request: web.Request, mode: str) -> web.StreamResponse:
        data = self.body.encode()
        if mode == "short":  # Content-Length says more than is sent, then the connection closes
            resp = web.StreamResponse(headers={"Content-Type": "text/plain",
                                               "Content-Length": str(len(data) + 1000)})
            await resp.prepare(request)
            await resp.write(data)
            request.transport.close()
            return resp
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            if mode == "chunked":  # the whole body, in small chunks, with pauses
                for i in range(0, len(data), self.chunk_size):
                    await resp.write(data[i:i + self.chunk_size])
                    await asyncio.sleep(self.chunk_delay)
            elif mode == "trickle":  # a line every 0.1 s: never done within the timeout
                for line in data.splitlines(keepends=True)[:100]:
                    await resp.write(line)
                    await asyncio.sleep(0.1)
            else:
                raise AssertionError(mode)
            await resp.write_eof()
        except ConnectionResetError:  # the scraper gave up: expected in "trickle"
            pass
        return resp

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
    # a 2 s timeout: a scrape of a good local body must not time out on a busy machine (a
    # 0.5 s one did, with the unit tests' worker niced beside the engine tests); the
    # "slow" upstream answers after 5 s
    return parse_config({
        "scrape": {"interval_seconds": 3.0, "timeout_seconds": 2.0, **scrape},
        "targets": [{"name": n, "url": u, "labels": {"server": n}} for n, u in urls.items()],
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
            {"name": "gpus", "kind": "dcgm", "url": "http://127.0.0.1:9/metrics",
             "required": False, "labels": {"server": "gpus"}},
        ]})
        async with Scraper(cfg) as scraper:
            await scraper.scrape_once()
            assert readiness(scraper)[0]
        await srv.stop()

    asyncio.run(scenario())


def many_models_body(n: int = 2000) -> str:
    """A Triton exposition of ``n`` models: the per-model families of a captured Triton body,
    one copy per model (``m0000``…), plus its model-less lines."""
    keep = ("nv_inference_request_success", "nv_inference_request_failure",
            "nv_inference_count", "nv_inference_exec_count", "nv_inference_request_duration_us",
            "nv_inference_queue_duration_us", "nv_inference_pending_request_count")
    out = []
    for line in TRITON_BODY.splitlines():
        if line.startswith("#"):
            if line.split()[2] in keep:
                out.append(line)
        elif 'model="' not in line:
            continue
        elif line.split("{", 1)[0] in keep and 'model="add"' in line:
            out.extend(line.replace('model="add"', f'model="m{i:04d}"') for i in range(n))
    return "\n".join(out) + "\n"


def test_body_in_small_chunks_with_pauses_is_read_whole():
    body = many_models_body(2000)
    expected = Normalizer(TABLES["triton"], TargetContext()).normalize(body)
    assert len(expected.models) == 2000

    async def scenario():
        srv = FaultServer()
        srv.body, srv.mode = body, "chunked"
        url = await srv.start()
        cfg = parse_config({"scrape": {"interval_seconds": 10, "timeout_seconds": 8},
                            "targets": [{"name": "t", "kind": "triton", "url": url}]})
        async with Scraper(cfg) as scraper:
            await scraper.scrape_once()
            st = scraper.states["t"]
            assert st.up, st.last_error
            assert st.invalid_lines_total == 0
            assert st.normalized.series_count == expected.series_count
            assert len(st.normalized.models) == 2000
        await srv.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("mode,reason,message", [
    ("short", "truncated", "body cut short (Not enough data to satisfy content length"),
    ("gzip_cut", "truncated", "compressed stream ends before its end"),
    ("gzip_corrupt", "decode", "corrupt compressed body"),
    ("trickle", "timeout", "no complete answer"),
    ("redirect_loop", "connection", "TooManyRedirects: gave up after 10 redirects"),
])
def test_incomplete_bodies_are_errors_not_data(mode, reason, message, caplog):
    async def scenario():
        srv = FaultServer()
        url = await srv.start()
        srv.mode = mode
        async with Scraper(_config({"t": url})) as scraper:
            with caplog.at_level(logging.WARNING, logger="fleetwatch.scraper"):
                await scraper.scrape_once()
            st = scraper.states["t"]
            assert not st.up
            assert st.errors == {reason: 1}
            assert message in st.last_error
            assert b"modelserver_" not in scraper.body  # nothing of the partial body served
            lines = [r.getMessage() for r in caplog.records if "target t" in r.getMessage()]
            assert len(lines) == 1 and "Traceback" not in lines[0]
            assert "\n" not in lines[0]
        await srv.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("mode", ["ok", "gzip", "chunked"])
def test_body_larger_than_max_body_bytes_is_too_large(mode):
    async def scenario():
        srv = FaultServer()
        url = await srv.start()
        srv.mode = mode
        limit = len(TRITON_BODY.encode()) - 1  # decompressed size counts, not the wire size
        async with Scraper(_config({"t": url}, max_body_bytes=limit)) as scraper:
            await scraper.scrape_once()
            st = scraper.states["t"]
            assert not st.up and st.errors == {"too_large": 1}
            assert f"larger than {limit} bytes" in st.last_error
        async with Scraper(_config({"t": url}, max_body_bytes=limit + 1)) as scraper:
            await scraper.scrape_once()
            assert scraper.states["t"].up
        await srv.stop()

    asyncio.run(scenario())


def test_bom_is_tolerated_and_truncated_reason_is_exported():
    async def scenario():
        srv = FaultServer()
        url = await srv.start()
        srv.mode = "bom"
        async with Scraper(_config({"t": url})) as scraper:
            await scraper.scrape_once()
            st = scraper.states["t"]
            assert st.up and st.invalid_lines_total == 0
            plain = Normalizer(TABLES["triton"], TargetContext()).normalize(TRITON_BODY)
            assert st.normalized.series_count == plain.series_count
            srv.mode = "short"
            await scraper.scrape_once()
            from prometheus_client import generate_latest

            from fleetwatch.sidecar.selfmetrics import self_registry

            text = generate_latest(self_registry(scraper)).decode()
            assert re.search(r'fleetwatch_upstream_scrape_errors_total\{reason="truncated",'
                             r'target="t"\} 1\.0', text)
        await srv.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("header,gzipped", [
    ("gzip", True), ("gzip, deflate, br", True), ("deflate;q=1, gzip;q=0.5", True),
    ("*", True), ("identity", False), ("deflate", False), ("gzip;q=0", False),
])
def test_metrics_content_type_and_gzip(header, gzipped):
    async def scenario():
        srv = FaultServer()
        url = await srv.start()
        async with Scraper(_config({"t": url})) as scraper:
            await scraper.scrape_once()
            runner = web.AppRunner(make_app(scraper))
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            async with aiohttp.ClientSession(auto_decompress=False) as s, \
                    s.get(f"http://127.0.0.1:{port}/metrics",
                          headers={"Accept-Encoding": header}) as r:
                assert r.status == 200
                assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
                raw = await r.read()
                assert (r.headers.get("Content-Encoding") == "gzip") is gzipped
            text = (gzip.decompress(raw) if gzipped else raw).decode()
            assert 'fleetwatch_upstream_up{target="t"} 1.0' in text
            assert "modelserver_requests_total{" in text
            await runner.cleanup()
        await srv.stop()

    asyncio.run(scenario())
