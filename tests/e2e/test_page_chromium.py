"""The status page in headless Chromium (Debian's ``chromium``): ``GET /`` of a sidecar
checked against ``/slo`` and ``/autoscaling`` of the same engine update, hostile names
rendered as text (the page's units are in ``tests/page/test_render.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from fleetwatch.labels.registry import parse_registry
from fleetwatch.page.history import SignalHistory
from fleetwatch.page.model import number
from fleetwatch.sidecar.scraper import Scraper
from tests.page.test_render import SECTIONS, _get, sidecar_cfg, upstream
from tests.support.page_helpers import (
    EVIL,
    REGISTRY,
    SLOS,
    VLLMSim,
    load_page,
    parse_dom,
    serve,
    wire,
)


def test_page_in_chromium_shows_what_slo_says(tmp_path: Path) -> None:
    sim = VLLMSim(["tiny-llm", EVIL])

    async def main() -> tuple[dict, dict, str, Path]:
        async with serve(upstream(sim)) as up:
            scraper = Scraper(sidecar_cfg(f"{up}/metrics"), parse_registry(REGISTRY))
            async with scraper:
                app = wire(scraper, SLOS, SignalHistory(step_seconds=0))
                for _ in range(25):
                    await scraper.scrape_once()
                    await asyncio.sleep(0.02)
                async with serve(app) as base:
                    async with aiohttp.ClientSession() as s:
                        slo, auto = await _get(s, f"{base}/slo"), await _get(s, f"{base}/autoscaling")
                    shot = tmp_path / "status-page.png"
                    dom = await asyncio.to_thread(load_page, f"{base}/", shot)
        return slo, auto, dom, shot

    slo, auto, dom_text, shot = asyncio.run(main())
    print(f"\nstatus page screenshot: {shot}")
    doc = parse_dom(dom_text)
    for sid in SECTIONS:
        assert doc.iter("section", id=sid), f"no section {sid}"
    assert float(doc.iter(id="updated")[0].attrs["data-value"]) == slo["updated"]
    assert slo["slos"], "the engine judged nothing"
    for row in slo["slos"]:
        cards = doc.iter("article", class_="slo", data_slo=row["slo"], data_model=row["model"])
        assert len(cards) == 1, row["slo"]
        card = cards[0]
        assert card.attrs["data-state"] == row["state"]
        assert row["state"] in card.text() and row["explanation"] in card.text()
        budget = card.iter(class_="budget")[0]
        assert float(budget.attrs["data-value"]) == row["error_budget_remaining"]
        assert budget.text() == number(row["error_budget_remaining"], pct=True)
        assert float(card.iter(class_="capacity")[0].attrs["data-value"]) == row["capacity"]
        # latency against concurrency from the engine's per-band quantiles, else burn
        has_latency = any(b.get("latency_seconds") is not None
                          for b in row.get("band_latency", {}).values())
        chart = card.iter("svg", class_="chart")[0]
        assert chart.attrs["data-mode"] == ("latency" if has_latency else "burn")
        for window, per_band in row["burn_rates"].items():
            for band, burn in per_band.items():
                cell = card.iter("g", data_band=band, data_window=window)
                assert len(cell) == 1, (window, band)
                assert cell[0].attrs["data-burn"] == ("" if burn is None else str(burn))
    states = {(r["slo"], r["model"]): r["state"] for r in slo["slos"]}
    assert states[("ttft", "tiny-llm")] == "overload", states  # slow above 4 requests
    ttft = doc.iter("article", class_="slo", data_slo="ttft", data_model="tiny-llm")[0]
    assert ttft.iter("svg", class_="chart")[0].attrs["data-mode"] == "latency"
    for obj in auto["models"]:
        sig = doc.iter("article", class_="signal", data_model=obj["model"])
        assert len(sig) == 1 and float(sig[0].attrs["data-signal"]) == obj["signal"]
        assert int(sig[0].iter("svg", class_="spark")[0].attrs["data-points"]) >= 2
    targets = doc.iter("section", id="targets")[0].text()
    assert "gone" in targets and "down" in targets
    models_section = doc.iter("section", id="models")[0]
    models = models_section.text()
    assert "genai-oncall" in models and "streaming" in models
    # hostile model and registry values are text, never markup
    assert not doc.iter("script") and not doc.iter("img") and not models_section.iter("b")
    assert EVIL in models and "<img src=x onerror=alert(2)>" in models
    assert "\"><b>x</b>" in models and "mallory\\u202e" in models
    assert shot.stat().st_size > 20_000
