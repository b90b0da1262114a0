"""A real Triton Inference Server stopped behind a real ``fleetwatch serve``: its models'
autoscaling signal never reads low — ``/autoscaling`` says ``stale`` (``target_down``),
``updated`` stays at the last good scrape, the signal is held, then reads
``autoscaling.stale_signal``; when Triton is back on the same ports, the models are fresh
again. The test runs its own tritonserver (it stops it), serving ``ranker``."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.load import ranker_inputs
from fleetwatch.demo.triton import TritonServer
from tests.support.helpers import wait_until
from tests.support.hostile import Sidecar, strict_json

pytestmark = pytest.mark.triton

SATURATED = 1.25
SLOS = {"autoscaling": {"stale_hold": "4s", "stale_signal": SATURATED},
        "slos": [{"name": "availability", "selector": {"models": ["ranker"]},
                  "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
                  "timeWindow": [{"duration": "1h"}], "concurrency": {"envelope": 8}}]}


def _ranker(sc: Sidecar) -> list[dict[str, Any]]:
    _status, body, _ = sc.get("/autoscaling")
    doc = strict_json(body)
    return [{**o, "updated": doc["updated"]} for o in doc["models"] if o["model"] == "ranker"]


def _all(sc: Sidecar, pred) -> list[dict[str, Any]] | None:  # type: ignore[no-untyped-def]
    objs = _ranker(sc)
    return objs if objs and all(pred(o) for o in objs) else None


def test_a_stopped_triton_holds_then_saturates_the_signal_and_recovers():
    with TritonServer(models=("ranker",)) as server:
        cfg = {"scrape": {"interval_seconds": 0.5, "timeout_seconds": 0.5},
               "targets": [{"name": "triton", "kind": "triton", "url": server.metrics_url,
                            "api_url": server.http_url, "models": ["ranker"]}]}
        with Sidecar(cfg, SLOS) as sc:
            send_requests(server.http_address, "ranker", inputs=ranker_inputs, requests=20,
                          concurrency=2)
            fresh = wait_until(lambda: _all(sc, lambda o: o["freshness"]["state"] == "fresh"),
                               "ranker fresh", 60)
            assert all(o["freshness"]["signal"] == "measured" for o in fresh)
            server.terminate()  # ports kept for the restart
            stale = wait_until(lambda: _all(sc, lambda o: o["freshness"]["state"] == "stale"),
                               "ranker stale", 60)
            for o in stale:
                f = o["freshness"]
                assert f["reason"] == "target_down", o
                assert f["updated"] < f["since"]
                assert o["updated"] <= f["updated"]  # the last good data, not now
                assert f["signal"] in ("held", "saturated")
            saturated = wait_until(
                lambda: _all(sc, lambda o: o["freshness"]["signal"] == "saturated"),
                "ranker saturated", 60)
            assert {o["signal"] for o in saturated} == {SATURATED}
            assert [o["freshness"]["updated"] for o in saturated] \
                == [o["freshness"]["updated"] for o in stale]
            assert sc.metric("fleetwatch_autoscaling_signal_stale", model="ranker",
                             reason="target_down") == 1
            assert "target triton is down" in sc.log()
            server.start()
            back = wait_until(lambda: _all(sc, lambda o: o["freshness"]["state"] == "fresh"),
                              "ranker fresh again", 120)
            assert all(o["freshness"]["updated"] > stale[0]["freshness"]["since"]
                       for o in back)
            sc.wait_metric("fleetwatch_autoscaling_signal_stale", 0, model="ranker",
                           reason="target_down")
