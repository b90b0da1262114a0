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
  p99 for a sidecar without the page, with the page (its history subscriber, a snapshot
  every ``--history-step`` seconds as the sidecar's), and with the page loaded ``--rate``
  times a second while it scrapes (the page is rendered once per cycle, in a thread; the
  client runs in this process).

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
sys.path.insert(0, str(HERE.parent))  # tests.support.page_helpers: the upstream double, the wiring
sys.path.insert(0, str(HERE))

import aiohttp  # noqa: E402
from bench_slo import SLOS, Fleet  # noqa: E402
from tests.support.page_helpers import serve, upstream_app, wire  # noqa: E402

from fleetwatch.page.history import SignalHistory  # noqa: E402
from fleetwatch.sidecar.config import parse_config  # noqa: E402
from fleetwatch.sidecar.scraper import Scraper  # noqa: E402


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[max(0, int(len(xs) * 0.99) - 1)]
    return f"median {statistics.median(xs) * 1e3:6.2f} ms, p99 {p99 * 1e3:6.2f} ms"


def _scraper(url: str) -> Scraper:
    """A scraper of one vLLM target at ``url`` (enter it to start its sessions)."""
    return Scraper(parse_config({"listen": {"address": "127.0.0.1", "port": 0},
                                 "scrape": {"interval_seconds": 5, "timeout_seconds": 5},
                                 "targets": [{"name": "vllm", "kind": "vllm", "url": url}]}))


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


async def _page_latency(scraper: Scraper, s: aiohttp.ClientSession, url: str,
                        loads: int) -> None:
    """Print the latency of the first load after a scrape (it renders) and of a second."""
    fresh: list[float] = []
    cached: list[float] = []
    size = 0
    for _ in range(loads):
        await scraper.scrape_once()  # a new cycle: the next load renders
        for times in (fresh, cached):
            t0 = time.perf_counter()
            async with s.get(url) as resp:
                size = len(await resp.read())
            times.append(time.perf_counter() - t0)
    print(f"  GET / first load of a cycle (renders): {_stats(fresh)} (page {size / 1024:.0f} KiB)")
    print(f"  GET / again in the same cycle:         {_stats(cached)}")


async def bench(models: int, cycles: int, loads: int, rate: float,
                interval: float, history_step: float) -> None:
    """Print the figures of one fleet size (see the module docstring)."""
    fleet = Fleet(models)
    print(f"{models} models x 3 SLOs x 8 bands, {cycles} scrape cycles {interval:g} s apart "
          f"per case (loaded: {rate:g} page loads/s):")
    results: dict[str, list[float]] = {}
    async with serve(upstream_app(fleet.exposition)) as up:
        for case in ("without page", "with page", "with page, loaded"):
            async with _scraper(f"{up}/metrics") as scraper:
                app = wire(scraper, SLOS, SignalHistory(step_seconds=history_step),
                           page=case != "without page")
                async with serve(app) as base, aiohttp.ClientSession() as s:
                    await _cycles(scraper, 5)  # warm up: engine rows, label caches
                    if case == "with page":
                        await _page_latency(scraper, s, f"{base}/", loads)
                    stop = asyncio.Event()
                    loader = (asyncio.create_task(_load(s, f"{base}/", stop, rate))
                              if case.endswith("loaded") else None)
                    results[case] = await _cycles(scraper, cycles, interval)
                    stop.set()
                    if loader:
                        await loader
    for case, times in results.items():
        print(f"  scrape cycle {case + ':':19} {_stats(times)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, nargs="+", default=[5, 100])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between cycles")
    ap.add_argument("--loads", type=int, default=50)
    ap.add_argument("--rate", type=float, default=10.0, help="page loads per second")
    ap.add_argument("--history-step", type=float, default=10.0,
                    help="seconds between history snapshots (the sidecar's; 0: every update)")
    args = ap.parse_args()
    logging.getLogger("fleetwatch").setLevel(logging.ERROR)
    for n in args.models:
        asyncio.run(bench(n, args.cycles, args.loads, args.rate, args.interval,
                          args.history_step))


if __name__ == "__main__":
    main()
