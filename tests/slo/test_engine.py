"""SLO mathematics with exact expected values (table-driven)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.slo.account.windows import RollingWindows
from fleetwatch.slo.bands import band_of, budget_remaining, burn_rate
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import (
    DEFAULT_WINDOWS,
    SLOSpecError,
    format_duration,
    parse_duration,
    parse_slo_file,
)

DAY = 86400.0


@pytest.mark.parametrize("window,period,factor", [
    (DEFAULT_WINDOWS[0], 30 * DAY, 14.4),
    (DEFAULT_WINDOWS[1], 30 * DAY, 6.0),
    (DEFAULT_WINDOWS[2], 30 * DAY, 3.0),
    (DEFAULT_WINDOWS[3], 30 * DAY, 1.0),
    (DEFAULT_WINDOWS[0], 28 * DAY, 13.44),
])
def test_workbook_burn_rate_factors(window, period, factor):
    assert window.factor(period) == pytest.approx(factor, rel=1e-12)


@pytest.mark.parametrize("good,total,objective,burn,remaining", [
    (990, 1000, 0.99, 1.0, 0.0),        # exactly on budget
    (1000, 1000, 0.99, 0.0, 1.0),       # perfect
    (995, 1000, 0.99, 0.5, 0.5),        # half the budget
    (856, 1000, 0.99, 14.4, -13.4),     # the fast-burn page threshold
    (0, 0, 0.999, math.nan, 1.0),       # no events: no burn, budget untouched
])
def test_burn_rate_and_budget(good, total, objective, burn, remaining):
    b = burn_rate(good, total, objective)
    assert (math.isnan(b) and math.isnan(burn)) or b == pytest.approx(burn, rel=1e-9)
    assert budget_remaining(good, total, objective) == pytest.approx(remaining, rel=1e-9)


@pytest.mark.parametrize("concurrency,band", [
    (0.0, 1), (0.4, 1), (1.0, 1), (1.01, 2), (3.9, 4), (8.0, 8), (8.5, 16), (33, math.inf),
])
def test_band_attribution(concurrency, band):
    assert band_of(concurrency, [1, 2, 4, 8, 16, 32]) == band


@pytest.mark.parametrize("text,seconds", [
    ("5m", 300), ("1h30m", 5400), ("28d", 28 * DAY), ("250ms", 0.25), (42, 42.0)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_duration_round_trip_and_errors():
    assert [format_duration(s) for s in (300, 3600, 3 * DAY, 45, 0.5)] == \
        ["5m", "1h", "3d", "45s", "500ms"]
    for bad in ("5 minutes", "", "-1h", "1h-", 0):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_rolling_windows_sum_and_expire():
    rw = RollingWindows([10.0, 60.0], buckets=10)
    r = rw.row("a")
    for t in range(0, 30):  # one event per second, 1 bad in 4
        rw.add(float(t), np.array([r]), np.array([0.0 if t % 4 == 0 else 1.0]),
               np.array([1.0]))
    s = rw.sums()[r]
    assert s[0].tolist() == [7.0, 10.0]      # last 10 s: t=20..29, bad at 20, 24, 28
    assert s[1].tolist() == [22.0, 30.0]     # 60 s window still holds everything
    rw.add(200.0, np.array([], dtype=np.int64), np.array([]), np.array([]))
    assert rw.sums()[r].tolist() == [[0.0, 0.0], [0.0, 0.0]]  # all expired



def test_an_expiring_bucket_removes_only_the_counts_it_holds():
    rw = RollingWindows([10.0, 60.0], buckets=10)  # 1 s and 6 s buckets
    a, b, c = rw.row("a"), rw.row("b"), rw.row("c")
    rw.add(0.0, np.array([a]), np.array([1.0]), np.array([2.0]))
    rw.add(5.0, np.array([b]), np.array([3.0]), np.array([3.0]))
    rw.add(10.5, np.array([], dtype=np.int64), np.array([]), np.array([]))
    assert rw.sums()[[a, b, c], 0].tolist() == [[0.0, 0.0], [3.0, 3.0], [0.0, 0.0]]
    assert rw.sums()[[a, b], 1].tolist() == [[1.0, 2.0], [3.0, 3.0]]  # 60 s: both kept
    rw.add(20.0, np.array([a]), np.array([0.5]), np.array([4.0]))  # buckets reused, empty
    assert rw.sums()[[a, b, c], 0].tolist() == [[0.5, 4.0], [0.0, 0.0], [0.0, 0.0]]
    rw.add(100.0, np.array([], dtype=np.int64), np.array([]), np.array([]))
    assert rw.sums().tolist() == [[[0.0, 0.0], [0.0, 0.0]]] * 3  # a gap: all expired

# -- the engine on synthetic vLLM expositions ---------------------------------------------

TTFT_BOUNDS = (0.1, 0.25, 0.5, 1.0)


def vllm_text(running: float, good: float, total: float, dur_sum: float = 0.0,
              success: float | None = None, abort: float = 0.0) -> str:
    """A minimal vLLM exposition: ``good`` of ``total`` TTFT observations ≤ 0.5 s."""
    lab = 'model_name="llm",engine="0"'
    lines = [f"vllm:num_requests_running{{{lab}}} {running}"]
    for b in TTFT_BOUNDS:
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{b}"}} '
                     f"{good if b >= 0.5 else 0}")
    lines += [f'vllm:time_to_first_token_seconds_bucket{{{lab},le="+Inf"}} {total}',
              f"vllm:time_to_first_token_seconds_count{{{lab}}} {total}",
              f"vllm:time_to_first_token_seconds_sum{{{lab}}} {dur_sum}",
              f'vllm:request_success_total{{{lab},finished_reason="stop"}} '
              f"{total if success is None else success}",
              f'vllm:request_success_total{{{lab},finished_reason="abort"}} {abort}']
    return "\n".join(lines) + "\n"


SLOS = {
    "windows": [{"long": "60s", "short": "10s", "budget_consumed": 0.02, "severity": "page"}],
    "capacity": {"window": "60s", "min_events": 50, "hysteresis_updates": 2},
    "slos": [
        {"name": "ttft", "sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.5}},
         "objectives": [{"target": "99%"}], "timeWindow": [{"duration": "1h"}],
         "concurrency": {"envelope": 4, "bands": [1, 2, 4, 8]}},
        {"name": "avail", "sli": {"availability": {}}, "objectives": [{"target": 0.9}],
         "timeWindow": [{"duration": "1h"}], "concurrency": {"envelope": 4}},
    ],
}


class Feed:
    """Drives an engine with cumulative synthetic expositions, one per second."""

    def __init__(self, slos=SLOS):
        self.engine = SLOEngine(parse_slo_file(slos))
        self.norm = Normalizer(TABLES["vllm"])
        self.t = 1_000_000.0
        self.good = self.total = 0.0

    def step(self, running: float, good: int, total: int, **kw) -> None:
        self.good += good
        self.total += total
        self.t += 1.0
        n = self.norm.normalize(vllm_text(running, self.good, self.total, **kw))
        self.engine.update(Snapshot(self.t, {"vllm": n}))

    def state(self, slo="ttft"):
        return next(s for s in self.engine.status() if s["slo"] == slo)


def test_events_go_to_the_band_of_the_interval_concurrency():
    f = Feed()
    f.step(1, 0, 0)          # first snapshot: baseline only
    f.step(1, 10, 10)        # running 1 → 1: band 1
    f.step(3, 9, 10)         # running 1 → 3, average 2: band 2
    f.step(7, 5, 10)         # average 5: band 8
    st = f.state()
    assert st["events"] == {"1": 10.0, "2": 10.0, "8": 10.0, "all": 30.0}
    assert st["burn_rates"]["1m"]["2"] == pytest.approx(10.0)   # 1 bad of 10 / 1 %
    assert st["burn_rates"]["1m"]["8"] == pytest.approx(50.0)
    assert st["burn_rates"]["1m"]["all"] == pytest.approx(6 / 30 / 0.01)


def test_counter_reset_never_gives_negative_or_lost_events():
    f = Feed()
    f.step(1, 0, 0)
    f.step(1, 100, 100)
    # the engine restarts: cumulative values drop to the new, small counts
    f.good, f.total = 0.0, 0.0
    f.step(1, 7, 8)
    st = f.state()
    assert st["events"]["all"] == 108.0          # 100 before + 8 after the reset
    assert st["burn_rates"]["1m"]["all"] == pytest.approx(1 / 108 / 0.01)


def test_overload_when_only_bands_above_the_envelope_burn():
    f = Feed()
    f.step(2, 0, 0)
    for _ in range(20):
        f.step(2, 20, 20)            # band 2: all good
    for _ in range(10):
        f.step(8, 10, 20)            # band 8, above the envelope of 4: half bad
    st = f.state()
    assert st["state"] == "overload", st["explanation"]
    assert "scale out" in st["explanation"]
    # one band burning is "band 8", not "bands 8"
    assert st["explanation"].startswith("budget burning only in band 8, above"), \
        st["explanation"]


def test_regression_when_a_band_inside_the_envelope_burns():
    f = Feed()
    f.step(1, 0, 0)
    for _ in range(10):
        f.step(1, 15, 20)            # band 1 burns: 25 % bad vs 1 % budget
    st = f.state()
    assert st["state"] == "regression"
    assert "page the owner" in st["explanation"]


def test_capacity_lowered_by_a_burning_band_with_hysteresis():
    """(The capacity semantics are tested in test_slo_capacity.py.) Band 8 burns: the
    envelope (4) is not above its lower edge (4), so nothing lowers it; the signal reads
    concurrency ÷ capacity."""
    f = Feed()  # min_events 50, hysteresis 2 updates, envelope 4
    f.step(1, 0, 0)
    caps = []
    for running, good, total in [(1, 20, 20)] * 5 + [(2, 20, 20)] * 5 + [(8, 10, 20)] * 3:
        f.step(running, good, total)
        caps.append(f.state()["capacity"])
    assert caps == [4] * 13
    auto = f.engine.autoscaling()[0]
    assert auto["concurrency"] == 8
    assert auto["components"]["concurrency"] == pytest.approx(8 / 4)


def test_availability_counts_aborts_as_bad():
    f = Feed()
    f.step(1, 0, 0, abort=0)
    f.step(1, 10, 10, success=f.total + 9, abort=1)
    st = f.state("avail")
    assert st["events"]["all"] == 10.0
    assert st["burn_rates"]["1m"]["all"] == pytest.approx(0.1 / 0.1)


def test_threshold_not_on_a_bucket_boundary_is_explained():
    slos = {**SLOS, "slos": [{**SLOS["slos"][0], "sli": {"latency": {
        "metric": "ttft", "threshold_seconds": 0.3}}}]}
    f = Feed(slos)
    f.step(1, 0, 0)
    f.step(1, 5, 5)
    st = f.state()
    assert st["state"] == "misconfigured"
    assert "nearest boundaries: 0.1, 0.25, 0.5, 1" in st["explanation"]


def test_littles_law_concurrency_without_a_running_gauge():
    engine = SLOEngine(parse_slo_file({"slos": [
        {"name": "a", "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
         "timeWindow": [{"duration": "1h"}], "concurrency": {"envelope": 4}}]}))
    norm = Normalizer(TABLES["triton"])
    body = ('nv_inference_request_success{{model="m",version="1"}} {n}\n'
            'nv_inference_request_duration_us{{model="m",version="1"}} {us}\n')
    engine.update(Snapshot(100.0, {"t": norm.normalize(body.format(n=0, us=0))}))
    # 40 requests of 0.3 s each completed within 4 s: L = 12 s / 4 s = 3
    engine.update(Snapshot(104.0, {"t": norm.normalize(body.format(n=40, us=12_000_000))}))
    assert engine.concurrency[("m", "1", "triton")] == pytest.approx(3.0)
    assert engine.status()[0]["events"] == {"4": 40.0, "all": 40.0}


@pytest.mark.parametrize("patch,message", [
    ({"objectives": [{"target": 1.5}]}, "slos[0] (name 'x').objectives[0].target"),
    ({"sli": {}}, "give exactly one of latency, availability, timeslice"),
    ({"sli": {"latency": {"metric": "p99", "threshold_seconds": 1}}}, "sli.latency.metric"),
    ({"budgetingMethod": "Timeslices"}, "budgetingMethod must be Timeslices"),
    ({"concurrency": {"envelope": 64, "bands": [1, 2]}}, "envelope must not exceed"),
    ({"colour": "red"}, "slos[0] (name 'x').colour: unknown field"),
    ({"timeWindow": [{"duration": "soon"}]}, "invalid duration"),
])
def test_spec_errors_name_slo_and_field(patch, message):
    base = {"name": "x", "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
            "timeWindow": [{"duration": "28d"}], "concurrency": {"envelope": 4}}
    with pytest.raises(SLOSpecError) as err:
        parse_slo_file({"slos": [{**base, **patch}]}, "slos.yaml")
    assert str(err.value).startswith("slos.yaml: ")
    assert message in str(err.value)


def test_default_bands_double_up_to_twice_the_envelope():
    f = parse_slo_file({"slos": [{"name": "x", "sli": {"availability": {}},
                                  "objectives": [{"target": 0.99}],
                                  "timeWindow": [{"duration": "28d"}],
                                  "concurrency": {"envelope": 6}}]})
    assert f.slos[0].concurrency.bands == [1, 2, 4, 8, 16]


def test_a_scrape_gap_loses_no_events_and_stretches_the_interval():
    f = Feed()
    f.step(2, 0, 0)
    f.step(2, 10, 10)
    # the target is down for two scrapes while 30 requests finish
    for _ in range(2):
        f.t += 1.0
        f.engine.update(Snapshot(f.t, {"vllm": None}))
    f.good += 20
    f.total += 30
    f.step(2, 0, 0)  # back: cumulative values include the gap
    st = f.state()
    assert st["events"]["all"] == 40.0
    assert st["events"]["2"] == 40.0


def test_littles_law_uses_the_models_own_interval_after_a_gap():
    engine = SLOEngine(parse_slo_file({"slos": [
        {"name": "a", "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
         "timeWindow": [{"duration": "1h"}], "concurrency": {"envelope": 4}}]}))
    norm = Normalizer(TABLES["triton"])
    body = ('nv_inference_request_success{{model="m",version="1"}} {n}\n'
            'nv_inference_request_duration_us{{model="m",version="1"}} {us}\n')
    engine.update(Snapshot(100.0, {"t": norm.normalize(body.format(n=0, us=0))}))
    engine.update(Snapshot(102.0, {"t": None}))
    # 12 s of request time over the 4 s since the model was last seen: L = 3, not 6
    engine.update(Snapshot(104.0, {"t": norm.normalize(body.format(n=40, us=12_000_000))}))
    assert engine.concurrency[("m", "1", "triton")] == pytest.approx(3.0)


