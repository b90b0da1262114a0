"""/metrics content coding against a real Prometheus (Debian ``prometheus``, Go's
multistream gzip reader): it reads every member of the sidecar's gzip body (the body is
built as in ``tests/sidecar/test_encoding.py``)."""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp
from aiohttp import web

from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.server import make_app
from tests.sidecar.test_encoding import Upstream, _config
from tests.support.helpers import PrometheusProcess


def test_a_real_prometheus_reads_the_multi_member_gzip_body():
    """Debian's prometheus scrapes the sidecar (Accept-Encoding: gzip) every second: every
    sample of every member arrives (normalized, self, passed through)."""
    seen: list[tuple[str, str]] = []  # (Accept-Encoding asked, Content-Encoding served)
    started = threading.Event()
    stop_flag = threading.Event()
    ports: list[int] = []
    loop_box: list[asyncio.AbstractEventLoop] = []

    async def serve():
        up = Upstream()
        url = await up.start()
        async with Scraper(_config(url)) as scraper:
            await scraper.scrape_once()
            app = make_app(scraper)

            async def record(request: web.Request, response: web.StreamResponse) -> None:
                if request.path == "/metrics":
                    seen.append((request.headers.get("Accept-Encoding", ""),
                                 response.headers.get("Content-Encoding", "")))
            app.on_response_prepare.append(record)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            ports.append(runner.addresses[0][1])
            started.set()
            while not stop_flag.is_set():
                await scraper.scrape_once()
                await asyncio.sleep(0.5)
            async with aiohttp.ClientSession() as s, \
                    s.get(f"http://127.0.0.1:{ports[0]}/metrics") as r:
                plain = await r.text()
            await runner.cleanup()
        await up.stop()
        return plain

    result: list[str] = []

    def thread_main():
        loop = asyncio.new_event_loop()
        loop_box.append(loop)
        result.append(loop.run_until_complete(serve()))

    t = threading.Thread(target=thread_main, daemon=True)
    t.start()
    assert started.wait(30)
    try:
        with PrometheusProcess([f"127.0.0.1:{ports[0]}"]) as prom:
            deadline = time.monotonic() + 60
            ok = []
            while time.monotonic() < deadline:
                ok = prom.query('up{job="fleetwatch"} == 1')
                last = prom.query('my_unmapped_total{job="fleetwatch"}')
                if ok and last and any(enc == "gzip" for _a, enc in seen):
                    break
                time.sleep(0.5)
            assert ok, "prometheus did not scrape the sidecar"
            samples = prom.query('scrape_samples_scraped{job="fleetwatch"}')
            assert samples and int(samples[0]["value"][1]) > 300
            # a series of each segment: normalized, self, passed through (the last member)
            for expr in ('modelserver_requests_total{job="fleetwatch"}',
                         'fleetwatch_upstream_up{job="fleetwatch",target="v"}',
                         'my_unmapped_total{job="fleetwatch"}'):
                assert prom.query(expr), expr
    finally:
        stop_flag.set()
        t.join(30)
    assert any("gzip" in asked and enc == "gzip" for asked, enc in seen), seen
    plain = result[0]
    # every sample line of the body was stored: Prometheus counted as many as it holds
    lines = [ln for ln in plain.splitlines() if ln and not ln.startswith("#")]
    assert int(samples[0]["value"][1]) == len(lines)
