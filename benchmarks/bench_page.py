"""Benchmark of the status page ``GET /``: its latency, and the scrape cycle's cost
with and without it.

    ./dev bench            (or: python benchmarks/bench_page.py [--models N ...])

A sidecar in-process (the real scraper, SLO engine, ``/slo``, ``/autoscaling`` and ``/``
routes) scrapes a simulated vLLM upstream (``bench_slo.Fleet``: TTFT histogram, requests,
running gauge, KV usage; 3 SLOs × 8 bands). Per fleet size it prints:

* ``GET /`` over loopback HTTP: the first load after a scrape (it renders) and a second
  one in the same cycle (the cached page), median and p99, page size;
* one scrape cycle (``scrape_once``: fetch, normalize, render, engine update,
  subscribers; ``--interval`` apart, 0.5 s: faster than any real sidecar): median and
  p99 for a sidecar without the page, with the page (its history subscriber, recording
  every update), and with the page loaded ``--rate`` times a second while it scrapes
  (the page is rendered once per cycle, in a thread; the client runs in this process).

The demo serves 5 models and 4 SLOs: the 5-model case is its size (with more SLO rows).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402
from bench_slo import SLOS, Fleet  # noqa: E402

from fleetwatch.page.history import SignalHistory  # noqa: E402
from fleetwatch.sidecar.config import parse_config  # noqa: E402
from fleetwatch.sidecar.page_route import page_routes  # noqa: E402
from fleetwatch.sidecar.scraper import Scraper  # noqa: E402
from fleetwatch.sidecar.server import make_app, slo_routes  # noqa: E402
from fleetwatch.slo.engine import SLOEngine  # noqa: E402
from fleetwatch.slo.spec import parse_slo_file  # noqa: E402


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[max(0, int(len(xs) * 0.99) - 1)]
    return f"median {statistics.median(xs) * 1e3:6.2f} ms, p99 {p99 * 1e3:6.2f} ms"


async def _site(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def _sidecar(url: str, page: bool) -> tuple[Scraper, web.Application]:
    cfg = parse_config({"listen": {"address": "127.0.0.1", "port": 0},
                        "scrape": {"interval_seconds": 5, "timeout_seconds": 5},
                        "targets": [{"name": "vllm", "kind": "vllm", "url": url}]})
    scraper = Scraper(cfg)
    await scraper.__aenter__()
    engine = SLOEngine(parse_slo_file(SLOS))
    scraper.subscribers.append(engine.update)
    routes, extra = slo_routes(engine)
    if page:  # a history step of 0: every update is recorded (the worst case)
        routes = {**routes, **page_routes(scraper, engine, routes, SignalHistory(step_seconds=0))}
    return scraper, make_app(scraper, routes, extra)


async def _cycles(scraper: Scraper, n: int, pause: float = 0.0) -> list[float]:
    """Durations of ``n`` scrape cycles, ``pause`` seconds apart."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await scraper.scrape_once()
        times.append(time.perf_counter() - t0)
        await asyncio.sleep(pause)
    return times


async def _load(s: aiohttp.ClientSession, url: str, stop: asyncio.Event,
                rate: float) -> None:
    """Load ``url`` ``rate`` times a second until ``stop`` (the client runs in this
    process and loop: its cost counts against the scrape, an upper bound)."""
    while not stop.is_set():
        async with s.get(url) as resp:
            await resp.read()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 1 / rate)


async def bench(models: int, cycles: int, loads: int, rate: float,
                interval: float) -> None:
    fleet = Fleet(models)

    async def metrics(_r: web.Request) -> web.Response:
        return web.Response(text=fleet.exposition(), content_type="text/plain")

    async def health(_r: web.Request) -> web.Response:
        return web.Response(text="")

    up_app = web.Application()
    up_app.router.add_get("/metrics", metrics)
    up_app.router.add_get("/health", health)
    up_runner, up = await _site(up_app)
    print(f"{models} models x 3 SLOs x 8 bands, {cycles} scrape cycles {interval:g} s apart "
          f"per case (loaded: {rate:g} page loads/s):")
    results: dict[str, list[float]] = {}
    for case in ("without page", "with page", "with page, loaded"):
        scraper, app = await _sidecar(f"{up}/metrics", page=case != "without page")
        runner, base = await _site(app)
        await _cycles(scraper, 5)  # warm up: engine rows, label caches
        async with aiohttp.ClientSession() as s:
            if case == "with page":
                fresh, cached, size = [], [], 0
                for _ in range(loads):
                    await scraper.scrape_once()  # a new cycle: the next load renders
                    for times in (fresh, cached):
                        t0 = time.perf_counter()
                        async with s.get(f"{base}/") as resp:
                            size = len(await resp.read())
                        times.append(time.perf_counter() - t0)
                print(f"  GET / first load of a cycle (renders): {_stats(fresh)} "
                      f"(page {size / 1024:.0f} KiB)")
                print(f"  GET / again in the same cycle:         {_stats(cached)}")
            stop = asyncio.Event()
            loader = (asyncio.create_task(_load(s, f"{base}/", stop, rate))
                      if case.endswith("loaded") else None)
            results[case] = await _cycles(scraper, cycles, interval)
            stop.set()
            if loader:
                await loader
        await runner.cleanup()
        await scraper.__aexit__()
    for case, times in results.items():
        print(f"  scrape cycle {case + ':':19} {_stats(times)}")
    await up_runner.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, nargs="+", default=[5, 100])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between cycles")
    ap.add_argument("--loads", type=int, default=50)
    ap.add_argument("--rate", type=float, default=10.0, help="page loads per second")
    args = ap.parse_args()
    logging.getLogger("fleetwatch").setLevel(logging.ERROR)
    for n in args.models:
        asyncio.run(bench(n, args.cycles, args.loads, args.rate, args.interval))


if __name__ == "__main__":
    main()
