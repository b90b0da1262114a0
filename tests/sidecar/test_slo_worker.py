"""Issue 10 items 5 and 6 in the sidecar: cold starts from readiness transitions, the
cold-start replica floor, and the SLO engine updated off the event loop."""

from __future__ import annotations

import threading
import time

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.sidecar.coldstart import ColdStarts
from fleetwatch.sidecar.slo_routes import slo_routes
from fleetwatch.sidecar.slo_worker import EngineWorker
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file

SPEC = {
    "autoscaling": {"cold_start_bound_seconds": 60, "cold_start_min_replicas": 3},
    "slos": [{"name": "a", "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
              "timeWindow": [{"duration": "1h"}], "concurrency": {"envelope": 4}}],
}
BODY = ('nv_inference_request_success{{model="m",version="1"}} {n}\n'
        'nv_inference_request_duration_us{{model="m",version="1"}} {us}\n')


def test_cold_start_is_not_ready_to_ready_including_a_target_down():
    cs = ColdStarts()
    cs.observe("t", True, {"m": True}, [], 100.0)
    assert cs.seconds == {}  # ready from the first sight: nothing measured
    cs.observe("t", False, {"m": True}, [], 110.0)  # target down (a restart)
    cs.observe("t", True, {"m": False}, [], 115.0)  # up, model loading
    cs.observe("t", True, {"m": True}, [], 142.5)
    assert cs.seconds == {("t", "m"): pytest.approx(32.5)}
    # a configured model never seen ready counts from the first scrape
    cs.observe("u", False, {}, ["big"], 200.0)
    cs.observe("u", True, {"big": True}, ["big"], 500.0)
    assert cs.by_model() == {"m": pytest.approx(32.5), "big": pytest.approx(300.0)}


def test_cold_starts_forget_the_models_a_target_no_longer_has():
    """Bounded by what the targets serve: a churning upstream's names, each seen not ready
    once and then gone, leave nothing behind; a down target forgets nothing (its models
    are only unreachable)."""
    cs = ColdStarts()
    for i in range(1000):
        cs.observe("t", True, {f"churn{i}": False, f"done{i}": True}, ["m"], float(i))
        cs.observe("t", True, {f"done{i}": True, "m": True}, ["m"], i + 0.5)
    assert set(cs.not_ready_since) <= {("t", "churn999")}
    assert len(cs.seconds) <= 2  # m's start and at most the latest name's
    cs.observe("t", False, {}, ["m"], 2000.0)
    assert ("t", "m") in cs.seconds  # a down target forgets nothing


def _engine_with_traffic() -> SLOEngine:
    engine = SLOEngine(parse_slo_file(SPEC))
    norm = Normalizer(TABLES["triton"])
    engine.update(Snapshot(100.0, {"t": norm.normalize(BODY.format(n=0, us=0))}))
    engine.update(Snapshot(105.0, {"t": norm.normalize(BODY.format(n=50, us=1_000_000))}))
    return engine


@pytest.mark.parametrize("cold,floor", [(None, 1), (30.0, 1), (60.0, 1), (61.0, 3)])
def test_min_replicas_rises_when_the_cold_start_exceeds_the_bound(cold, floor):
    engine = _engine_with_traffic()
    if cold is not None:
        engine.cold_starts = {"m": cold}
    obj = engine.autoscaling()[0]
    assert obj["cold_start_seconds"] == cold and obj["min_replicas"] == floor
    samples = [(n, v) for n, labels, v in engine.iter_metrics()
               if n == "fleetwatch_autoscaling_min_replicas"]
    assert samples == [("fleetwatch_autoscaling_min_replicas", float(floor))]


def test_the_worker_serves_the_last_render_while_an_update_is_in_progress():
    engine = _engine_with_traffic()
    release, entered = threading.Event(), threading.Event()
    real = engine.update

    def slow_update(snap):
        entered.set()
        release.wait(10)
        real(snap)

    engine.update = slow_update  # type: ignore[method-assign]
    worker = EngineWorker(engine, lambda: {"m": 90.0})
    try:
        before = worker.metrics_body
        norm = Normalizer(TABLES["triton"])
        worker.submit(Snapshot(110.0, {"t": norm.normalize(BODY.format(n=100, us=2_000_000))}))
        assert entered.wait(5)
        # the update is blocked: the handlers' data is there, unchanged (had they waited
        # for the update, it would have run once `release.wait` gave up: 110.0)
        _, body = slo_routes(engine, worker)
        assert body() is before
        assert worker.slo_doc["updated"] == 105.0
        release.set()
        assert worker.wait(1)
        assert worker.slo_doc["updated"] == 110.0
        assert worker.autoscaling_doc["models"][0]["min_replicas"] == 3  # 90 s > 60 s
        assert b"fleetwatch_autoscaling_min_replicas" in worker.metrics_body
    finally:
        release.set()
        worker.stop()


def test_submit_keeps_only_the_latest_snapshot():
    engine = _engine_with_traffic()
    seen: list[float] = []
    gate = threading.Event()

    def update(snap):
        gate.wait(5)
        seen.append(snap.timestamp)

    engine.update = update  # type: ignore[method-assign]
    worker = EngineWorker(engine)
    try:
        worker.submit(Snapshot(1.0, {}))
        time.sleep(0.2)  # taken: the worker now waits in update(1.0)
        for ts in (2.0, 3.0, 4.0):
            worker.submit(Snapshot(ts, {}))
        gate.set()
        assert worker.wait(2)
        assert seen == [1.0, 4.0]
    finally:
        gate.set()
        worker.stop()
