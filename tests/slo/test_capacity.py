"""Capacity at SLO (issue 10): the envelope is the prior, burn lowers it, good load above
raises it, the capacity model places it between good and burning load; concurrency is
time-averaged requests in the system.

Every expectation is derived in the test from the load it feeds (band edges, the
interpolation the module documents), not copied from a run.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.labels.registry import load_registry
from fleetwatch.slo.account.concurrency import Column, estimate_columns
from fleetwatch.slo.capacity.evidence import BandLatencyStore
from fleetwatch.slo.capacity.model import BandLatency, isotonic, predict
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import load_slo_file, parse_slo_file
from fleetwatch.slo.state import ModelKey

DEMO = Path(__file__).resolve().parents[2] / "src" / "fleetwatch" / "demo"
BOUNDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64)
THRESHOLD = 0.04
MODEL = ("llm", "", "vllm")


def slos(envelope: float = 8, sli: dict | None = None, hysteresis: int = 1,
         bands: list[float] | None = None) -> dict:
    return {
        "windows": [{"long": "60s", "short": "10s", "budget_consumed": 0.02}],
        "capacity": {"window": "60s", "min_events": 50, "hysteresis_updates": hysteresis},
        "slos": [{"name": "s", "sli": sli or {"latency": {"metric": "ttft",
                                                           "threshold_seconds": THRESHOLD}},
                  "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "1h"}],
                  "concurrency": {"envelope": envelope,
                                  "bands": bands or [1, 2, 4, 8, 16, 32]}}],
    }


class VLLM:
    """Cumulative vLLM counters; each :meth:`step` is one 1-second scrape interval."""

    def __init__(self, spec: dict) -> None:
        self.engine = SLOEngine(parse_slo_file(spec))
        self.norm = Normalizer(TABLES["vllm"])
        self.t = 1_000_000.0
        self.buckets = [0.0] * len(BOUNDS)
        self.count = self.e2e_sum = self.ttft_sum = 0.0
        self.snapshot(0, 0)

    def snapshot(self, running: float, waiting: float) -> None:
        lab = 'model_name="llm",engine="0"'
        lines = [f"vllm:num_requests_running{{{lab}}} {running}",
                 f"vllm:num_requests_waiting{{{lab}}} {waiting}"]
        for b, c in zip(BOUNDS, self.buckets, strict=True):
            lines.append(f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{b}"}} {c}')
        lines += [f'vllm:time_to_first_token_seconds_bucket{{{lab},le="+Inf"}} {self.count}',
                  f"vllm:time_to_first_token_seconds_count{{{lab}}} {self.count}",
                  f"vllm:time_to_first_token_seconds_sum{{{lab}}} {self.ttft_sum}",
                  f'vllm:e2e_request_latency_seconds_bucket{{{lab},le="+Inf"}} {self.count}',
                  f"vllm:e2e_request_latency_seconds_count{{{lab}}} {self.count}",
                  f"vllm:e2e_request_latency_seconds_sum{{{lab}}} {self.e2e_sum}",
                  f'vllm:request_success_total{{{lab},finished_reason="stop"}} {self.count}']
        self.engine.update(Snapshot(self.t, {"vllm": self.norm.normalize(
            "\n".join(lines) + "\n")}))

    def step(self, concurrency: float, ttfts: list[float], running: float | None = None,
             waiting: float = 0.0) -> None:
        """One second with ``concurrency`` requests in the system on average (e2e sum of
        the completed requests = concurrency × 1 s), completing requests with these TTFTs."""
        self.t += 1.0
        for x in ttfts:
            for i, b in enumerate(BOUNDS):
                if x <= b:
                    self.buckets[i] += 1
            self.ttft_sum += x
        self.count += len(ttfts)
        self.e2e_sum += concurrency * 1.0
        self.snapshot(concurrency if running is None else running, waiting)

    def status(self) -> dict:
        return self.engine.status()[0]


def fast(n: int = 60) -> list[float]:
    return [0.005] * n  # every TTFT in the first bucket: well under the threshold


def slow(n: int = 60) -> list[float]:
    return [0.3] * n  # all above the threshold


# -- capacity semantics ---------------------------------------------------------------

def test_traffic_only_in_band_1_without_burn_keeps_the_envelope():
    v = VLLM(slos(envelope=8))
    for _ in range(10):
        v.step(1.0, fast())
    st = v.status()
    assert st["events"]["1"] >= 50 and set(st["events"]) == {"1", "all"}
    assert st["state"] == "ok"
    assert st["capacity"] == 8 and st["capacity_evidence"] == "kept"
    assert v.engine.autoscaling()[0]["components"]["concurrency"] == pytest.approx(1 / 8)


def test_demo_ranker_with_band_1_traffic_only_has_capacity_at_its_envelope():
    """The issue's case: the demo's ``availability`` SLO on ``ranker`` (envelope 8) with
    events only in band 1 and nothing burning."""
    spec = load_slo_file(DEMO / "slos.yaml")
    engine = SLOEngine(spec, load_registry(DEMO / "registry.yaml"))
    norm = Normalizer(TABLES["triton"])
    body = ('nv_inference_request_success{{model="ranker",version="1"}} {n}\n'
            'nv_inference_request_failure{{model="ranker",version="1",reason="REJECTED"}} 0\n'
            'nv_inference_request_duration_us{{model="ranker",version="1"}} {us}\n')
    min_events = spec.capacity.min_events
    n = us = 0
    for i in range(2 * spec.capacity.hysteresis_updates + 2):
        engine.update(Snapshot(100.0 + 5 * i, {"t": norm.normalize(body.format(n=n, us=us))}))
        n += min_events  # per 5 s interval; each request 40 ms: L = 0.04 × n / 5 s < 1
        us += min_events * 40_000
    st = next(s for s in engine.status()
              if s["slo"] == "availability" and s["model"] == "ranker")
    assert st["concurrency"] == pytest.approx(min_events * 0.04 / 5)
    assert st["events"]["1"] > min_events and st["state"] == "ok"
    envelope = next(s.concurrency.envelope for s in spec.slos if s.name == "availability")
    assert st["capacity"] == envelope


def _burn_availability(v: VLLM, concurrency: float, good: int, bad: int) -> None:
    """One interval in which ``good`` requests succeed and ``bad`` abort."""
    v.t += 1.0
    v.count += good + bad
    v.e2e_sum += concurrency
    v.aborts = getattr(v, "aborts", 0) + bad
    lab = 'model_name="llm",engine="0"'
    body = (f"vllm:num_requests_running{{{lab}}} {concurrency}\n"
            f'vllm:e2e_request_latency_seconds_bucket{{{lab},le="+Inf"}} {v.count}\n'
            f"vllm:e2e_request_latency_seconds_count{{{lab}}} {v.count}\n"
            f"vllm:e2e_request_latency_seconds_sum{{{lab}}} {v.e2e_sum}\n"
            f'vllm:request_success_total{{{lab},finished_reason="stop"}} {v.count - v.aborts}\n'
            f'vllm:request_success_total{{{lab},finished_reason="abort"}} {v.aborts}\n')
    v.engine.update(Snapshot(v.t, {"vllm": v.norm.normalize(body)}))


def test_a_burning_band_lowers_capacity_to_its_lower_edge_with_hysteresis():
    # availability SLI: no latency model, the band rule alone
    v = VLLM(slos(envelope=8, sli={"availability": {}}, hysteresis=2))
    caps = []
    for _ in range(3):
        _burn_availability(v, 6.0, good=60, bad=0)  # band (4, 8]: all good
        caps.append(v.status()["capacity"])
    for _ in range(4):
        _burn_availability(v, 6.0, good=40, bad=20)  # a third fails, budget 10 %: burns
        caps.append(v.status()["capacity"])
    edge = 4.0  # the lower edge of the burning band (4, 8]
    first = next(i for i, c in enumerate(caps) if c != 8)
    assert caps[:first] == [8] * first and caps[first:] == [edge] * (len(caps) - first)
    assert first >= 4  # 3 good updates, then the estimate must hold for 2 updates
    st = v.status()
    assert st["capacity_evidence"] == "bands"
    assert st["state"] == "regression"  # band 8 burns and it is inside the envelope (8)


def test_good_bands_above_the_estimate_raise_it_and_no_evidence_keeps_it():
    v = VLLM(slos(envelope=4, sli={"availability": {}}))
    for _ in range(3):
        _burn_availability(v, 12.0, good=60, bad=0)  # band (8, 16], above the envelope
    # raised to the concurrency the good load was seen at (12), not the band's bound (16)
    assert v.status()["capacity"] == 12 and v.status()["capacity_evidence"] == "bands"
    # then traffic stops and the window (60 s) empties: no evidence, capacity stays
    for _ in range(80):
        _burn_availability(v, 0.0, good=0, bad=0)
    st = v.status()
    assert st["burn_rates"]["1m"]["16"] is None  # the window holds nothing any more
    assert st["capacity"] == 12


def test_the_lowest_band_burning_is_a_regression_not_a_capacity():
    v = VLLM(slos(envelope=8, sli={"availability": {}}))
    for _ in range(5):
        _burn_availability(v, 0.8, good=30, bad=30)
    st = v.status()
    assert st["state"] == "regression"
    assert st["capacity"] == 8 and st["capacity_evidence"] == "regression"


def test_the_model_places_capacity_between_the_good_and_the_burning_band():
    """Latency SLI, p90 ≤ 40 ms. Band (2, 4] at concurrency 3: p90 in (10, 20] ms; band
    (8, 16] at concurrency 12: p90 in (160, 320] ms. Linear interpolation of the quantile
    between the two points reaches 40 ms at 3 + (0.04 − q₃)·(12 − 3)/(q₁₂ − q₃)."""
    v = VLLM(slos(envelope=8))
    for _ in range(3):
        v.step(3.0, [0.008] * 50 + [0.015] * 10)
    for _ in range(3):
        v.step(12.0, [0.1] * 50 + [0.2] * 10)
    st = v.status()
    q3 = st["band_latency"]["4"]["latency_seconds"]
    q12 = st["band_latency"]["16"]["latency_seconds"]
    # histogram_quantile: rank 0.9·n falls in the (0.01, 0.02] bucket, resp. (0.16, 0.32]
    assert q3 == pytest.approx(0.01 + 0.01 * (0.9 * 60 - 50) / 10)
    assert q12 == pytest.approx(0.16 + 0.16 * (0.9 * 60 - 50) / 10)
    expected = 3 + (THRESHOLD - q3) * (12 - 3) / (q12 - q3)
    assert st["band_latency"]["16"]["concurrency"] == pytest.approx(12)
    assert st["capacity_predicted"] == pytest.approx(expected, rel=1e-2)
    assert st["capacity"] == pytest.approx(expected, rel=1e-2)
    assert 3 <= st["capacity"] < 12  # between the good and the burning load
    assert st["capacity_evidence"] == "model"
    assert st["state"] == "overload"  # band 16 is above the envelope


def test_queueing_form_uses_the_batch_limit():
    """Requests wait beyond 8 running (vLLM ``--max-num-seqs 8``): latency is flat up to
    the limit, so the crossing lies beyond it, not on the straight line between points."""
    v = VLLM(slos(envelope=8))
    for _ in range(3):
        v.step(2.0, [0.005] * 60)
    for _ in range(3):
        v.step(14.0, [0.3] * 60, running=8, waiting=6)
    st = v.status()
    assert st["batch_limit"] == 8
    q2 = st["band_latency"]["2"]["latency_seconds"]
    q14 = st["band_latency"]["16"]["latency_seconds"]
    expected = 8 + (THRESHOLD - q2) * (14 - 8) / (q14 - q2)
    assert st["capacity"] == pytest.approx(expected, rel=1e-2)
    assert 8 < st["capacity"] < 14



def test_the_batch_limit_is_the_most_seen_running_not_a_sample_between_two_requests():
    """A real-vLLM sweep at ``--max-num-seqs 8`` read 7 running, 8 waiting at both
    captures of its top step (each between a request's end and the next one's
    admission) after 8 running earlier: the limit is 8; while nothing waits it is not
    known at all."""
    v = VLLM(slos(envelope=8))
    v.step(8.0, [0.005] * 60, running=8, waiting=0)
    assert v.status()["batch_limit"] is None  # nothing waited: no limit seen
    for _ in range(2):
        v.step(15.0, [0.3] * 60, running=7, waiting=8)
    assert v.status()["batch_limit"] == 8
    # the model forgotten, its limit goes with it
    v.engine._forget_gone(1e12)
    assert MODEL not in v.engine.gauges.batch_limit
    assert MODEL not in v.engine.gauges.running_max
    assert MODEL not in v.engine.gauges.estimator

# -- concurrency: time-averaged requests in the system --------------------------------

def test_requests_waiting_beyond_the_batch_limit_land_above_it_overload_not_regression():
    """8 running + 6 waiting: Little's law (e2e sum) says 14 in the system; the running
    gauge alone would say 8 — band 8, inside the envelope: a false regression."""
    v = VLLM(slos(envelope=8))
    for _ in range(3):
        v.step(14.0, slow(), running=8, waiting=6)
    st = v.status()
    assert st["concurrency"] == pytest.approx(14.0)
    assert st["concurrency_estimator"] == "little"
    assert set(st["events"]) == {"16", "all"}
    assert st["state"] == "overload"


def test_gauges_cover_requests_longer_than_the_interval():
    v = VLLM(slos(envelope=8))
    for _ in range(3):  # 6 long requests in flight, none completes
        v.step(0.0, [], running=6, waiting=0)
    st = v.engine
    assert st.concurrency[MODEL] == pytest.approx(6.0)
    assert st.gauges.estimator[MODEL] == "gauges"


def estimate(running: float, waiting: float, duration: tuple[float, float],
             prev_in_system: float, dt: float,
             previous: float | None = None) -> tuple[float, str | None]:
    """One model's concurrency and estimator through the engine's estimate_columns."""
    def one(x: float | None) -> Column:
        return Column(np.asarray([math.nan if x is None else x]), np.asarray([x is not None]))

    count, total = duration
    conc, names = estimate_columns(one(running), one(waiting), (one(count), one(total)),
                                   one(prev_in_system), np.asarray([dt]), one(previous))
    return float(conc[0]), names[0]


def test_little_is_not_trusted_over_an_interval_shorter_than_the_latency():
    iv = (0.0, 0.0, (4, 0.17))  # running, waiting; mean latency 42.5 ms
    assert estimate(*iv, 0.0, 0.005) == (0.0, "gauges")  # a 5 ms interval: the gauges
    value, used = estimate(*iv, 0.0, 1.0)
    assert used == "little" and value == pytest.approx(0.17)


def test_a_drain_interval_too_short_for_little_takes_the_previous_concurrency():
    """A capture right after a load step drained (16 → 0 in the system within 0.18 s):
    its completions — and the TTFT events of requests that waited — lived mostly in the
    interval before; the gauges' mean (8) would put them in the band of half the load."""
    iv = (0.0, 0.0, (25, 25 * 0.4))  # mean latency 0.4 s > 0.18 s / 2
    assert estimate(*iv, 16.0, 0.18, previous=14.65) == (14.65, "previous")
    assert estimate(*iv, 16.0, 0.18) == (8.0, "gauges")  # no previous interval: the gauges
    assert estimate(*iv, 16.0, 0.18, previous=3.0) == (8.0, "gauges")  # the larger one
    assert estimate(*iv, 0.0, 10.0, previous=14.65) == (1.0, "little")  # long enough



def test_a_load_step_from_an_empty_system_takes_the_gauges_at_its_end():
    """A load step from an empty system: the capture after a drain reads 0 in the system,
    the next (2 s later) 8 running + 8 waiting, with 17 first tokens, many of requests
    that had waited for a slot; the mean of the gauges (8) put them in band 8 and made a
    false ``regression``. Every request at the end arrived during the interval."""
    iv = (8.0, 8.0, (3, 3 * 1.5))  # mean latency 1.5 s > 2 s / 2
    assert estimate(*iv, 0.0, 2.0, previous=7.4) == (16.0, "gauges")
    assert estimate(*iv, 2.0, 2.0, previous=7.4) == (9.0, "gauges")  # not empty: the mean
    # when Little's law can measure the interval, the rule of every interval holds: the
    # larger of it (4) and the gauges' mean (8)
    assert estimate(8.0, 8.0, (40, 40 * 0.2), 0.0, 2.0) == (8.0, "gauges")
    # a low load that happened to start empty
    assert estimate(1.0, 0.0, (40, 40 * 0.2), 0.0, 2.0) == (4.0, "little")

# -- the model's pieces -----------------------------------------------------------------

def test_isotonic_pools_adjacent_violators():
    assert isotonic([1.0, 3.0, 2.0, 4.0]) == [1.0, 2.5, 2.5, 4.0]
    assert isotonic([3.0, 2.0, 1.0]) == [2.0, 2.0, 2.0]


def test_predict_is_none_without_a_crossing_or_below_the_first_point():
    assert predict([(1, 0.01), (4, 0.02)], 0.04) is None
    assert predict([(1, 0.05), (4, 0.08)], 0.04) is None
    assert predict([(2, 0.02), (6, 0.06)], 0.04) == pytest.approx(4.0)


def test_band_latency_quantile_in_the_inf_bucket_is_the_highest_finite_bound():
    store = BandLatencyStore()
    store.reset(3, origin=0.0)
    store.add(1.0, 60.0, [3], [((0.1, 0.2, math.inf), (1.0, 1.0, 10.0))], [10.0], [5.0])
    bl = BandLatency(store, 3)
    assert bl.quantile(0.9) == 0.2
    assert bl.quantile(0.05) == pytest.approx(0.05)  # inside the first bucket
    assert bl.concurrency() == pytest.approx(5.0)


def test_band_latency_rows_are_independent_and_weighted_by_time():
    """Two bands in one add; a later interval weighs exp(Δt / τ) more; a bound a row never
    saw takes no part in its quantile."""
    store = BandLatencyStore(rows=1)  # grows
    for row in (0, 5):
        store.reset(row, origin=0.0)
    store.add(0.0, 60.0, [0, 5], [((0.1, 1.0), (4.0, 4.0)), ((0.5, 2.0), (0.0, 2.0))],
              [4.0, 2.0], [1.0, 8.0])
    store.add(60.0, 60.0, [0], [((0.1, 1.0), (0.0, 4.0))], [4.0], [3.0])
    w = math.exp(1.0)
    assert BandLatency(store, 0).concurrency() == pytest.approx((4 + 3 * 4 * w) / (4 + 4 * w))
    assert BandLatency(store, 0).buckets == pytest.approx({0.1: 4.0, 1.0: 4.0 + 4.0 * w})
    # row 5: rank 1 of 2 lies in (0.5, 2.0]; 0.1 and 1.0 are not its bounds
    assert BandLatency(store, 5).quantile(0.5) == pytest.approx(0.5 + 1.5 * 1.0 / 2.0)
    assert BandLatency(store, 1).quantile(0.5) is None  # never added
    assert BandLatency(store, 1).concurrency() is None
    # row 0 sees a new bound: it keeps its counts, the new bound joins them, row 5 and
    # its bounds are unchanged
    store.add(60.0, 60.0, [0], [((0.5,), (2.0,))], [2.0], [3.0])
    assert list(BandLatency(store, 0).buckets) == [0.1, 1.0, 0.5]
    assert BandLatency(store, 0).buckets == pytest.approx(
        {0.1: 4.0, 1.0: 4.0 + 4.0 * w, 0.5: 2.0 * w})
    assert BandLatency(store, 5).buckets == {0.5: 0.0, 2.0: 2.0}
    # rank 0.25 × 8.0 (no +Inf bucket: the count, 4 + 6w) lies in (0.1, 0.5] once sorted
    rank = 0.25 * (4.0 + 6.0 * w)
    assert BandLatency(store, 0).quantile(0.25) == pytest.approx(
        0.1 + 0.4 * (rank - 4.0) / (2.0 * w - 4.0))
    store.reset(0, origin=60.0)  # reused: empty
    assert BandLatency(store, 0).buckets == {} and BandLatency(store, 0).quantile(0.5) is None


def test_predict_queueing_form_holds_the_fit_until_the_batch_limit():
    # flat at 0.02 s up to the limit 8, then linear to 0.10 s at 16: 0.05 s at 11
    pts = [(2.0, 0.02), (4.0, 0.02), (16.0, 0.10)]
    assert predict(pts, 0.05, batch_limit=8.0) == pytest.approx(8.0 + 8.0 * 0.03 / 0.08)
    assert predict(pts, 0.05) == pytest.approx(4.0 + 12.0 * 0.03 / 0.08)  # no limit known
    # a point at the limit (within 1e-9): no inserted point
    assert predict([*pts, (8.0, 0.04)], 0.05, batch_limit=8.0) == pytest.approx(
        8.0 + 8.0 * 0.01 / 0.06)


def test_predict_rows_answers_each_row_as_predict_does():
    """The vectorized fit over rows of different lengths, orders, batch limits and NaN
    points gives each row the answer of the one-row fit."""
    import numpy as np

    from fleetwatch.slo.capacity.model import predict_rows

    cases = [
        ([(4.0, 0.3), (1.0, 0.1), (16.0, 0.9), (8.0, 0.2)], 0.5, None),  # unsorted, PAV
        ([(2.0, 0.02), (4.0, 0.02), (16.0, 0.10)], 0.05, 8.0),  # queueing form
        ([(1.0, 0.6), (2.0, 0.7)], 0.5, None),  # first point above: None
        ([(1.0, 0.1)], 0.5, 3.0),  # one point, no crossing
        ([(3.0, math.nan), (1.0, 0.1), (5.0, 0.8)], 0.5, None),  # a NaN point left out
        ([], 0.5, None),
    ]
    width = max(len(p) for p, _, _ in cases)
    xs = np.full((len(cases), width), np.nan)
    ys = np.full((len(cases), width), np.nan)
    valid = np.zeros((len(cases), width), dtype=bool)
    for i, (pts, _, _) in enumerate(cases):
        for k, (x, y) in enumerate(pts):
            xs[i, k], ys[i, k], valid[i, k] = x, y, True
    got = predict_rows(xs, ys, valid, np.asarray([t for _, t, _ in cases]),
                       np.asarray([math.nan if b is None else b for _, _, b in cases]))
    want = [predict(p, t, b) for p, t, b in cases]
    assert [None if g != g else g for g in got.tolist()] == want
    assert want[0] == pytest.approx(8.0 + 8.0 * 0.25 / 0.65)  # 0.3 and 0.2 pooled: 0.25
    assert want[2] is None and want[3] is None and want[5] is None


def test_update_leaves_the_garbage_collector_as_it_found_it():
    import gc

    engine = SLOEngine(parse_slo_file({"slos": [
        {"name": "avail", "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
         "timeWindow": [{"duration": "1d"}], "concurrency": {"envelope": 4, "bands": [1, 4]}},
    ]}))
    norm = Normalizer(TABLES["vllm"])
    body = 'vllm:request_success_total{model_name="m",finished_reason="stop"} %d\n'
    was = gc.isenabled()
    try:
        for i, enabled in enumerate((True, False, True)):
            (gc.enable if enabled else gc.disable)()
            engine.update(Snapshot(100.0 + i, {"vllm": norm.normalize(body % (10 * i))}))
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert engine.last_update == 102.0


def test_trace_events_booking_one_band_twice_at_one_time_both_count_in_its_evidence():
    """Two trace events of one model in one band at one time (and one at another time):
    the band's latency evidence counts every event, as booked one after the other."""
    engine = SLOEngine(parse_slo_file({"slos": [{
        "name": "e2e", "sli": {"source": "traces", "latency": {
            "metric": "request", "threshold_seconds": 1.0}},
        "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "1d"}],
        "concurrency": {"envelope": 4}}]}))
    mk = ModelKey("m", "", "python")
    engine.add_events([("e2e", mk, 1000.0, 1.0, 3.0, 4.0), ("e2e", mk, 1000.0, 1.0, 1.0, 2.0),
                       ("e2e", mk, 1000.0, 3.0, 5.0, 5.0)])
    st = engine.states[("e2e", mk)]
    assert st.events == {"1": 6.0, "all": 11.0, "4": 5.0}
    count = engine.band_latency.count
    assert count[st.rows["1"]] == pytest.approx(6.0)
    assert count[st.rows["4"]] == pytest.approx(5.0)
