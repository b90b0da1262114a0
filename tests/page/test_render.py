"""The status page: ``GET /`` of a sidecar in headless Chromium, checked against ``/slo``
and ``/autoscaling`` of the same engine update; hostile names render as text; the
latency chart's two modes; the history's bound.

The upstream is a simulated vLLM (:class:`tests.support.page_helpers.VLLMSim`, a test double
serving generated expositions); the sidecar is the real scraper, engine and routes,
scraped by the test (``scrape_once``) so that nothing races the page.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from fleetwatch.labels.registry import parse_registry
from fleetwatch.page.history import SignalHistory
from fleetwatch.page.model import number
from fleetwatch.page.render import render_page, slos_section
from fleetwatch.page.svg import concurrency_chart, nice_ceiling
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.server import run_sidecar
from fleetwatch.slo.spec import parse_slo_file
from tests.support.page_helpers import (
    REGISTRY,
    SLOS,
    VLLMSim,
    parse_dom,
    serve,
    upstream_app,
    wire,
)

SECTIONS = ("targets", "models", "slos", "autoscaling", "links")


def upstream(sim: VLLMSim) -> web.Application:
    """Test double: a vLLM serving the next step of ``sim`` per /metrics request."""
    return upstream_app(sim.exposition)


def sidecar_cfg(url: str, port: int = 0, interval: float = 1.0) -> Any:
    return parse_config({"listen": {"address": "127.0.0.1", "port": port},
                         "scrape": {"interval_seconds": interval,
                                    "timeout_seconds": min(interval, 1.0)},
                         "targets": [{"name": "vllm", "kind": "vllm", "url": url},
                                     {"name": "gone", "kind": "triton", "required": False,
                                      "url": "http://127.0.0.1:9/metrics"}]})


async def _get(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as resp:
        assert resp.status == 200, (url, resp.status)
        return await resp.json()


def test_chart_uses_band_latency_when_present() -> None:
    row = {"capacity": 4.0, "concurrency": 3.0,
           "burn_rates": {"1m": {"1": 0.0, "2": 0.5, "4": 0.8, "8": 40.0, "+Inf": None,
                                 "all": 9.0}}}
    burn = parse_dom(concurrency_chart(row, 0.1)).iter("svg")[0]
    assert burn.attrs["data-mode"] == "burn"
    assert [p.attrs["data-y"] for p in burn.iter("circle")] == ["0.0", "0.5", "0.8", "40.0"]
    assert "budget-neutral burn 1" in burn.text() and "capacity 4" in burn.text()
    row["band_latency"] = {b: {"quantile": 0.99, "latency_seconds": v, "concurrency": c}
                           for b, v, c in (("1", 0.02, 0.9), ("2", 0.05, 1.8),
                                           ("4", None, None), ("8", 0.3, 7.0))}
    row["capacity_predicted"] = 5.5
    lat = parse_dom(concurrency_chart(row, 0.1)).iter("svg")[0]
    assert lat.attrs["data-mode"] == "latency"
    assert [p.attrs["data-y"] for p in lat.iter("circle")] == ["0.02", "0.05", "0.3"]
    assert "p99 latency (s)" in lat.text() and "threshold (s) 0.1" in lat.text()
    assert "predicted 5.5" in lat.text()


def test_history_is_bounded_and_stepped() -> None:
    h = SignalHistory(maxlen=5, step_seconds=10)
    rows = [{"model": "m", "model_version": "1", "backend": "vllm", "signal": 0.5,
             "components": {"kv_cache": 0.5, "bad": float("nan")}}]
    recorded = [h.record(t, rows) for t in (0, 4, 10, 15, 20, 30, 40, 50, 60)]
    assert recorded == [True, False, True, False, True, True, True, True, True]
    points = h.series()["m v1 (vllm)"]
    assert len(h) == 5 and [p["t"] for p in points] == [20, 30, 40, 50, 60]
    assert points[0]["components"] == {"kv_cache": 0.5}
    assert not h.record(None, rows)


def test_history_stays_bounded_under_model_name_churn() -> None:
    """Every snapshot names 1,000 new models (label churn): the history keeps the newest
    snapshots that fit its points bound, never an hour of every name seen."""
    h = SignalHistory(step_seconds=10)  # the sidecar's: 360 steps
    per_snapshot = 1000
    for step in range(360):
        rows = [{"model": f"churn{step}_{i}", "model_version": "1", "backend": "triton",
                 "signal": 0.5, "components": {"concurrency": 0.5}}
                for i in range(per_snapshot)]
        assert h.record(10.0 * step, rows)
        assert h.points <= h.max_points
    series = h.series()
    assert sum(len(p) for p in series.values()) == h.points
    kept = h.max_points // per_snapshot
    assert len(h) == kept and len(series) == kept * per_snapshot  # the newest snapshots
    assert "churn359_999 v1 (triton)" in series and "churn0_0 v1 (triton)" not in series
    one = SignalHistory(step_seconds=10, max_points=10)
    one.record(0.0, rows)
    assert len(one) == 1 and one.points == per_snapshot  # the newest is always kept


def test_run_sidecar_serves_the_page() -> None:
    """``serve`` wires ``/`` (with and without SLOs), as HTML linking the endpoints."""
    sim = VLLMSim(["tiny-llm"])

    async def fetch(slos: Any) -> tuple[int, str, str]:
        async with serve(upstream(sim)) as up:
            stop, ports = asyncio.Event(), []
            task = asyncio.create_task(run_sidecar(
                sidecar_cfg(f"{up}/metrics", interval=0.2), parse_registry(REGISTRY),
                stop=stop, on_ready=ports.append, slos=slos))
            while not ports:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.6)
            async with aiohttp.ClientSession() as s, \
                    s.get(f"http://127.0.0.1:{ports[0]}/") as resp:
                out = resp.status, resp.content_type, await resp.text()
            stop.set()
            await task
            return out

    for slos in (parse_slo_file(SLOS), None):
        status, ctype, body = asyncio.run(fetch(slos))
        doc = parse_dom(body)
        assert status == 200 and ctype == "text/html"
        assert {s.attrs["id"] for s in doc.iter("section")} == set(SECTIONS)
        hrefs = {a.attrs["href"] for a in doc.iter("a")}
        assert {"/metrics", "/readyz"} <= hrefs
        assert ("/slo" in hrefs) == (slos is not None)
        assert bool(doc.iter("article", class_="slo")) == (slos is not None)


@pytest.mark.parametrize("value", [None, "x", float("nan"), float("inf"), True])
def test_numbers_that_are_not_numbers_show_a_dash(value: object) -> None:
    assert number(value) == "-"


@pytest.mark.parametrize(("v", "top"), [(0.9, 1.0), (1.1, 1.2), (1.15, 1.2), (2.1, 2.5),
                                        (0.033, 0.04), (44.0, 50.0), (8.0, 8.0)])
def test_axis_tops_are_short_numbers(v: float, top: float) -> None:
    assert nice_ceiling(v) == pytest.approx(top)


def test_page_is_rendered_once_per_scrape_cycle() -> None:
    """Loads between two scrapes get the same bytes (one render); a scrape renders anew."""
    sim = VLLMSim(["tiny-llm"])

    async def main() -> list[str]:
        async with serve(upstream(sim)) as up:
            scraper = Scraper(sidecar_cfg(f"{up}/metrics"), parse_registry(REGISTRY))
            async with scraper:
                app = wire(scraper, SLOS)
                bodies = []
                async with serve(app) as base, aiohttp.ClientSession() as s:
                    for scrapes in (2, 0, 1):
                        for _ in range(scrapes):
                            await scraper.scrape_once()
                            await asyncio.sleep(0.01)
                        async with s.get(f"{base}/") as resp:
                            bodies.append(await resp.text())
                return bodies

    first, same, next_cycle = asyncio.run(main())
    assert first == same
    assert next_cycle != first


def test_a_large_fleet_gets_cards_for_its_worst_rows_only() -> None:
    rows = [{"slo": f"s{i}", "model": "m", "state": state, "burn_rates": {}}
            for i, state in enumerate(["ok", "regression", "no_data", "overload"])]
    doc = parse_dom(slos_section(rows, {}, max_cards=2))
    assert [c.attrs["data-state"] for c in doc.iter("article")] == ["regression", "overload"]
    assert len(doc.iter("tr")) == 5  # the table lists every row (and its header)
    assert "2 more SLO rows" in doc.text()


def test_a_watched_page_is_rendered_after_each_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nobody loaded the page: scrapes render nothing. Once loaded, each cycle's page is
    rendered right after the cycle, so the next load finds it ready (no render of its own)."""
    import fleetwatch.sidecar.page_route as route

    renders: list[float] = []

    def counting(page: Any) -> str:
        renders.append(page["generated"])
        return render_page(page)

    monkeypatch.setattr(route, "render_page", counting)
    sim = VLLMSim(["tiny-llm"])

    async def main() -> list[int]:
        counts = []
        async with serve(upstream(sim)) as up:
            scraper = Scraper(sidecar_cfg(f"{up}/metrics"), parse_registry(REGISTRY))
            async with scraper:
                app = wire(scraper, SLOS)
                async with serve(app) as base, aiohttp.ClientSession() as s:
                    for _ in range(2):
                        await scraper.scrape_once()
                    await asyncio.sleep(0.2)
                    counts.append(len(renders))  # not watched: 0
                    async with s.get(f"{base}/") as resp:
                        assert resp.status == 200
                    counts.append(len(renders))  # the load rendered: 1
                    await scraper.scrape_once()
                    await asyncio.sleep(0.3)
                    counts.append(len(renders))  # rendered after the cycle: 2
                    async with s.get(f"{base}/") as resp:
                        assert resp.status == 200
                    counts.append(len(renders))  # served the ready page: 2
        return counts

    assert asyncio.run(main()) == [0, 1, 2, 2]
