"""/metrics content coding: gzip members cached per cycle, Accept-Encoding negotiation.

The gzip body is several gzip members (normalized and passed-through families compressed
once per cycle, fleetwatch's own metrics per request, the SLO families once per engine
body); it must decompress to exactly the plain body, the plain body must be what
``assemble`` gives for the whole exposition, and a real Prometheus (Debian ``prometheus``,
Go's multistream gzip reader) must read all of it.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from fleetwatch.exporters.assemble import SELF, SLO, Part, assemble, parse_families
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.encoding import wants_gzip
from fleetwatch.sidecar.metrics import MetricsAssembler
from fleetwatch.sidecar.scraper import Scraper
from tests.support.helpers import FIXTURES

VLLM_BODY = (FIXTURES / "vllm" / "v0.33.0-statlogger-cpu-generated.prom").read_text()


@pytest.mark.parametrize("header,gzipped", [
    ("gzip", True), ("GZIP", True), ("x-gzip", True), ("gzip, deflate, br", True),
    ("deflate;q=1, gzip;q=0.5", True), ("*", True), ("*;q=0.1", True),
    ("gzip;q=0.001", True), ("gzip ; q=1.0", True), ("gzip;Q=0.5", True),
    ("identity;q=0.5, gzip", True), ("identity;q=0, gzip;q=0.2", True),
    ("", False), ("identity", False), ("deflate", False), ("br, deflate", False),
    ("gzip;q=0", False), ("gzip;q=0.000", False), ("*;q=0", False),
    ("gzip;q=0, *", False),  # the specific entry wins over '*'
    ("gzip;q=0.5, identity", False), ("gzip;q=0.5, *;q=1", False),
    ("gzip;q=2", False), ("gzip;q=abc", False), ("gzip;q=", False),
    ("gzip;q=0.5555", False),  # malformed q-values: the element is ignored
    ("identity;q=0, gzip;q=0", False), (",,;q=1", False),
])
def test_accept_encoding_negotiation(header, gzipped):
    assert wants_gzip(header) is gzipped


class Upstream:
    """Test double: a vLLM /metrics (the real 0.33 fixture) whose counter moves each GET."""

    def __init__(self) -> None:
        self.n = 0
        self.runner: web.AppRunner | None = None

    async def handle(self, _request: web.Request) -> web.Response:
        self.n += 1
        body = VLLM_BODY + f"# TYPE my_unmapped_total counter\nmy_unmapped_total {self.n}\n"
        return web.Response(text=body, content_type="text/plain")

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/metrics", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{self.runner.addresses[0][1]}/metrics"

    async def stop(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def _config(url: str, port: int = 0):
    return parse_config({"listen": {"address": "127.0.0.1", "port": port},
                         "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
                         "passthrough_unmapped": True,
                         "targets": [{"name": "v", "kind": "vllm", "url": url}]})


def _slo_body(value: float) -> bytes:
    """Test double of the SLO engine's exposition: one family of its own, one whose name
    the normalized part serves already (dropped), one a passed-through family has."""
    reg = CollectorRegistry()
    Gauge("fleetwatch_slo_test_ratio", "test", ["slo"], registry=reg).labels("a").set(value)
    Gauge("modelserver_requests_active", "clashes with a normalized family",
          registry=reg).set(1)
    Counter("my_unmapped", "clashes with a passed-through family", registry=reg).inc()
    return generate_latest(reg)


def test_gzip_members_decompress_to_the_plain_body_and_the_whole_assembly():
    async def scenario():
        up = Upstream()
        url = await up.start()
        slo = [_slo_body(0.5)]
        async with Scraper(_config(url)) as scraper:
            assembler = MetricsAssembler(scraper, lambda: slo[0])
            fixed = CollectorRegistry()  # deterministic self-metrics for the comparison
            Gauge("fleetwatch_upstream_up", "up", ["target"], registry=fixed).labels("v").set(1)
            Gauge("process_open_fds", "clashes with vLLM's, passed through",
                  registry=fixed).set(7)
            assembler.registry = fixed
            for cycle in range(3):
                await scraper.scrape_once()
                if cycle == 2:
                    slo[0] = _slo_body(0.25)  # a new engine body
                for _request in range(2):
                    plain = assembler.encode(False)
                    gz = assembler.encode(True)
                    assert gzip.decompress(gz) == plain
                    whole = assemble([
                        scraper.normalized_part,
                        Part(SELF, parse_families(generate_latest(fixed).decode())),
                        Part(SLO, parse_families(slo[0].decode())),
                        scraper.passthrough_part]).text.encode()
                    assert plain == whole
                    assert b"my_unmapped_total " in plain and b"fleetwatch_slo_test_ratio" in plain
                    assert plain.count(b"# TYPE modelserver_requests_active ") == 1
                    assert plain.count(b"# TYPE process_open_fds ") == 1
                    assert _members(gz) > 3  # one per cached family and per segment
            # the same request twice costs nothing new: the cached members are reused
            assert assembler.encode(True) == assembler.encode(True)
            assert assembler.dropped["slo"] > 0 and assembler.dropped["passthrough"] > 0
        await up.stop()

    asyncio.run(scenario())


def _members(data: bytes) -> int:
    """How many gzip members ``data`` holds (each one read to its end)."""
    count = 0
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        d.decompress(data)
        assert d.eof
        data = d.unused_data
        count += 1
    return count
