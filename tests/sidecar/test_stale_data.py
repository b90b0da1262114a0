"""A real ``fleetwatch serve`` in front of engines whose data goes missing or freezes: the
model's autoscaling signal never reads low — ``/autoscaling`` says ``stale`` with the
reason and since when, the signal is held, then reads ``autoscaling.stale_signal``, the
metric says the same, and fresh data makes the model fresh again.

A frozen engine core and a slow upstream cannot be produced by a real engine on demand:
they are test doubles (:mod:`tests.support.engine_doubles`) replaying a real vLLM capture
under load. A real Triton stopped is in ``tests/e2e/test_stale_triton.py``; the exact hold
on the engine's clock is in ``tests/slo/test_freshness.py``.
"""

from __future__ import annotations

from typing import Any

from tests.support.engine_doubles import FrozenEngineDouble, SlowUpstreamDouble
from tests.support.helpers import wait_until
from tests.support.hostile import Sidecar, strict_json

SATURATED = 1.75
HOLD = "4s"
MODEL = "tiny-llm"
SLOS = {"autoscaling": {"stale_hold": HOLD, "stale_signal": SATURATED,
                        "frozen_after_scrapes": 3},
        "slos": [{"name": "llm-ttft", "selector": {"models": [MODEL]},
                  "sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.1}},
                  "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
                  "concurrency": {"envelope": 8}}]}


def _config(url: str, interval: float, timeout: float) -> dict[str, Any]:
    return {"scrape": {"interval_seconds": interval, "timeout_seconds": timeout},
            "targets": [{"name": "vllm", "kind": "vllm", "url": url}]}


def _model(sc: Sidecar) -> dict[str, Any] | None:
    _status, body, _ = sc.get("/autoscaling")
    doc = strict_json(body)
    objs = [o for o in doc["models"] if o["model"] == MODEL]
    if not objs:
        return None
    return {**objs[0], "updated": doc["updated"]}


def _fails_closed(sc: Sidecar, reason: str) -> None:
    """Fresh, then stale for ``reason``: held (when seen within the hold), then
    saturated; the document's ``updated`` is the last fresh data; the metric agrees."""
    first = wait_until(lambda: (o := _model(sc)) and o["freshness"]["state"] == "stale" and o,
                       f"{MODEL} stale ({reason})", 60)
    fresh = first["freshness"]
    assert fresh["reason"] == reason
    assert fresh["updated"] < fresh["since"]
    assert first["updated"] == fresh["updated"]  # the last good data, not the current time
    assert fresh["signal"] in ("held", "saturated")
    if fresh["signal"] == "held":  # the signal it had: never low
        assert first["signal"] > 0
    last = wait_until(lambda: (o := _model(sc)) and o["freshness"]["signal"] == "saturated"
                      and o, f"{MODEL} saturated", 60)
    assert last["signal"] == SATURATED
    assert last["freshness"]["since"] == fresh["since"]
    assert last["updated"] == fresh["updated"]
    assert sc.metric("fleetwatch_autoscaling_signal_stale", model=MODEL, reason=reason) == 1
    assert sc.metric("fleetwatch_autoscaling_signal_ratio", model=MODEL) == SATURATED


def _recovers(sc: Sidecar) -> None:
    obj = wait_until(lambda: (o := _model(sc)) and o["freshness"]["state"] == "fresh" and o,
                     f"{MODEL} fresh again", 60)
    assert obj["freshness"]["reason"] is None and obj["freshness"]["signal"] == "measured"
    sc.wait_metric("fleetwatch_autoscaling_signal_stale", 0, model=MODEL, reason="frozen")


def test_a_frozen_engine_holds_then_saturates_and_recovers():
    # scrapes 2 s apart, each allowed 2 s: a starved machine slows the double's answers,
    # and a scrape past its timeout would be the other reason (scrape_timeout), not this one
    with FrozenEngineDouble() as up, Sidecar(_config(up.url, 2.0, 2.0), SLOS) as sc:
        wait_until(lambda: (o := _model(sc)) and o["freshness"]["state"] == "fresh",
                   f"{MODEL} fresh", 60)
        up.frozen = True
        _fails_closed(sc, "frozen")
        assert "engine frozen" in sc.log()
        up.frozen = False
        _recovers(sc)
        assert "data fresh again" in sc.log()


def test_a_scrape_timeout_holds_then_saturates_and_recovers():
    with SlowUpstreamDouble() as up, Sidecar(_config(up.url, 0.5, 0.5), SLOS) as sc:
        wait_until(lambda: (o := _model(sc)) and o["freshness"]["state"] == "fresh",
                   f"{MODEL} fresh", 60)
        up.delay = 3.0  # well past the 0.5 s scrape timeout
        _fails_closed(sc, "scrape_timeout")
        up.delay = 0.0
        _recovers(sc)
