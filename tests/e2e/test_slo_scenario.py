"""The SLO engine's scenario on a real Triton: latency grows with concurrency.

``slo_sim`` has one instance whose service time (8 ms) makes latency ≈ concurrency × 8 ms
and exports an end-to-end latency histogram through Triton's custom-metrics API, named
as Triton's vLLM backend names it. A bounded closed-loop load steps concurrency 1, 2, 4,
8 on version 1; then version 2 (50 ms service time: slow even at concurrency 1) runs at
concurrency 1. Windows are shortened by configuration. The test shows low burn in low
bands and high burn in high ones, capacity at SLO within one band of the knee computed
from the measured latencies — learned from the bands' evidence, not the envelope fallback:
a second SLO on the same SLI has its envelope (16) above the knee, so only a learned
capacity lands near the knee — ``overload`` above the envelope, ``regression`` for the slow
version at low concurrency.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from fleetwatch.demo.load import step_load
from fleetwatch.demo.triton import TritonServer
from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from tests.support.disturbance import Delivery, shortfalls, slo_sim_step, until_undisturbed

pytestmark = [pytest.mark.triton, pytest.mark.latency]

THRESHOLD = 0.04  # seconds: a bucket boundary of slo_sim's histogram
OBJECTIVE = 0.9
BANDS = [1, 2, 4, 8, 16]
SLOS = {
    # period 10m, long 30s → burn threshold 0.05 × 600 / 30 = 1
    "windows": [{"long": "30s", "short": "6s", "budget_consumed": 0.05, "severity": "page"}],
    "capacity": {"window": "2m", "min_events": 100, "hysteresis_updates": 2},
    "slos": [{
        "name": "sim-latency", "selector": {"models": ["slo_sim"]},
        "sli": {"latency": {"metric": "request", "threshold_seconds": THRESHOLD}},
        "objectives": [{"target": OBJECTIVE}], "timeWindow": [{"duration": "10m"}],
        "concurrency": {"envelope": 4, "bands": BANDS},
    }, {
        # the same SLI with the envelope above the knee: capacity can only come from data
        "name": "sim-latency-wide", "selector": {"models": ["slo_sim"]},
        "sli": {"latency": {"metric": "request", "threshold_seconds": THRESHOLD}},
        "objectives": [{"target": OBJECTIVE}], "timeWindow": [{"duration": "10m"}],
        "concurrency": {"envelope": 16, "bands": BANDS},
    }],
}
SLO = "sim-latency"
WIDE = "sim-latency-wide"
STEPS = (1, 2, 4, 8)
SECONDS_PER_STEP = 4.0


def _run(server: TritonServer):
    cfg = parse_config({"scrape": {"interval_seconds": 1, "timeout_seconds": 1},
                        "targets": [{"name": "triton", "kind": "triton",
                                     "url": server.metrics_url, "api_url": server.http_url}]})
    engine = SLOEngine(parse_slo_file(SLOS))
    done = threading.Event()
    results = {}
    history: list[tuple[float, dict[str, str]]] = []  # (time, state per version) per scrape

    def record(snap):
        history.append((snap.timestamp, {s["model_version"]: s["state"]
                                         for s in engine.status() if s["slo"] == SLO}))

    def load():
        try:
            results["v1"] = step_load(server.http_address, "slo_sim", steps=STEPS,
                                      seconds_per_step=SECONDS_PER_STEP, model_version="1")
            results["v2"] = step_load(server.http_address, "slo_sim", steps=(1,),
                                      seconds_per_step=SECONDS_PER_STEP, model_version="2")
        finally:
            done.set()

    async def scrape():
        async with Scraper(cfg) as scraper:
            scraper.subscribers.append(engine.update)
            scraper.subscribers.append(record)
            await scraper.scrape_once()
            thread = threading.Thread(target=load, daemon=True)
            thread.start()
            while not done.is_set():
                await asyncio.sleep(1.0)
                await scraper.scrape_once()
            await asyncio.sleep(1.2)
            await scraper.scrape_once()
            for _ in range(3):  # let capacity's hysteresis settle on the final data
                await asyncio.sleep(0.3)
                await scraper.scrape_once()
            thread.join(timeout=5)

    asyncio.run(scrape())
    results["history"] = history
    return engine, results


def _run_on_a_new_server():
    with TritonServer(models=["slo_sim"]) as server:
        engine, results = _run(server)
        # Mostly failed requests mean Triton stopped serving (e.g. its Python-backend stub
        # died): say so with its log instead of asserting on an empty step.
        failed = [r for key in ("v1", "v2") for r in results.get(key, ())
                  if r.failed > r.requests]
        if failed:
            pytest.fail(f"Triton failed requests during the scenario "
                        f"({[(r.concurrency, r.failed, r.errors[:2]) for r in failed]}); "
                        f"Triton log:\n{server.log_tail()}")
    return engine, results


def _disturbed(run) -> list[Delivery]:
    _, results = run
    return shortfalls(slo_sim_step(version, r, THRESHOLD)
                      for version in ("1", "2") for r in results[f"v{version}"])


@pytest.fixture(scope="module")
def scenario():
    """The scenario's engine and client results, from a run the machine did not disturb
    (tests/support/disturbance.py), each on a new Triton."""
    return until_undisturbed(_run_on_a_new_server, _disturbed, "the SLO scenario")


def _st(engine, version, slo=SLO):
    return next(s for s in engine.status()
                if s["model_version"] == version and s["slo"] == slo)


def _evidence(engine, version, slo=SLO):
    """Where the adopted capacity came from: "bands" (learned), "envelope", "kept"."""
    return next(st.capacity_evidence for (name, mk), st in engine.states.items()
                if name == slo and mk.model_version == version)


#: A step's requests count as meeting the objective from the client's side when this
#: much above it (the client's latency bounds Triton's own from above, so the engine's
#: burn in that band is then < (1 − OBJECTIVE − MARGIN) / (1 − OBJECTIVE) < 1).
MARGIN = 0.03


def _met(results, concurrency: int) -> float:
    """The share of a version-1 step's requests the client saw within THRESHOLD."""
    r = next(r for r in results["v1"] if r.concurrency == concurrency)
    return sum(lat <= THRESHOLD for lat in r.latencies_s) / len(r.latencies_s)


def test_burn_is_low_in_low_bands_and_high_in_high_ones(scenario):
    """Low burn (< 1) in every band whose step the client saw meet the objective with a
    margin (the client's latency bounds Triton's own from above, so the converse does not
    follow: a client-side miss may be the client's own delay), high burn in band 8. The
    service time sets which bands those are: band 1 (8 ms against 40 ms) meets on any
    machine less than five times slower than an idle one; bands 2 and 4 meet on an idle
    machine and may miss on a starved one, where they rightly burn; band 8 (≈ 64 ms)
    misses on every machine (the model's waits are sleeps, which never shorten)."""
    engine, results = scenario
    v1 = _st(engine, "1")
    burn = v1["burn_rates"]["2m"]
    print({b: burn[b] for b in ("1", "2", "4", "8", "all")}, v1["events"],
          {c: round(_met(results, c), 3) for c in STEPS})
    assert _met(results, 1) >= OBJECTIVE + MARGIN  # a machine the scenario can run on
    for band in ("1", "2", "4", "8"):
        assert v1["events"].get(band, 0) > 50, (band, v1["events"])
        met = _met(results, int(band))
        if met >= OBJECTIVE + MARGIN:
            assert burn[band] < 1, (band, met, burn)
    assert burn["8"] > 5, burn


def test_capacity_within_one_band_of_the_measured_knee(scenario):
    """The knee is where the client's steps stop meeting the objective. A step whose
    share is within MARGIN of the objective may fall on either side of it for Triton
    (the client's latency bounds Triton's from above) and may have too few events for
    the engine to trust on a starved machine, so the knee lies between the highest step
    the client saw meet with the margin and the lowest it saw miss by it: capacity is
    within one band below the first and not above the second. On an idle machine those
    are steps 4 and 8, the bounds [2, 8] of "within one band of the knee (4)"."""
    engine, results = scenario
    met = {c: _met(results, c) for c in STEPS}
    good = [c for c in STEPS if met[c] >= OBJECTIVE + MARGIN]
    bad = [c for c in STEPS if met[c] < OBJECTIVE - MARGIN]
    assert good and bad, f"no clear step on each side of the objective: {met}"
    low, high = max(good) / 2, min(bad)
    capacity = _st(engine, "1")["capacity"]
    wide = _st(engine, "1", WIDE)["capacity"]
    print("met", met, "capacity", capacity, _evidence(engine, "1"),
          "wide", wide, _evidence(engine, "1", WIDE))
    # capacity is continuous (issue 10), learned from burn (band edge or the capacity
    # model), not the envelope: 16 is two bands above the idle knee (4), and never
    # learning would leave 16 here
    for slo, value in ((SLO, capacity), (WIDE, wide)):
        assert low <= value <= high, (slo, value, met)
        assert _evidence(engine, "1", slo) in ("bands", "model")
    assert high < 16


def test_overload_above_the_envelope_and_autoscaling_follows(scenario):
    engine, results = scenario
    v1 = [(t, h["1"]) for t, h in results["history"] if "1" in h]
    print([state for _, state in v1])
    c8 = next(r for r in results["v1"] if r.concurrency == 8)
    # ok while concurrency stays within the envelope, overload once it goes above it
    # (not before the concurrency-8 step started), never a page for version 1 — unless
    # the client saw the envelope's own step (4) miss the objective (a starved machine:
    # see test_burn_is_low_in_low_bands_and_high_in_high_ones), when a regression inside
    # the envelope is the right verdict
    t_overload = next(t for t, state in v1 if state == "overload")
    assert t_overload >= c8.t_start
    allowed = {"ok", "no_data"}
    if _met(results, 4) < OBJECTIVE + MARGIN:
        allowed.add("regression")
    assert {state for t, state in v1 if t < c8.t_start} <= allowed
    assert "regression" not in {state for _, state in v1} - allowed
    auto = next(a for a in engine.autoscaling() if a["model_version"] == "1")
    # the model's capacity is the smallest over its SLOs
    assert auto["capacity"] == min(_st(engine, "1")["capacity"],
                                   _st(engine, "1", WIDE)["capacity"])
    assert auto["components"]["concurrency"] == pytest.approx(
        auto["concurrency"] / auto["capacity"])


def test_regression_for_the_slow_version_at_low_concurrency(scenario):
    engine, _ = scenario
    v2 = _st(engine, "2")
    assert v2["events"]["1"] > 20
    assert v2["state"] == "regression", v2["explanation"]
    assert "page the owner" in v2["explanation"]
