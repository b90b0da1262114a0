"""Bounds: series per target, label value length, normalization time, models per SLO.

A target past a bound is marked down with the bound as its reason while every other
target is served; the SLO engine forgets models gone for ``limits.forget_model_after``
and tracks at most ``limits.max_models_per_slo`` per SLO. Driven through ``fleetwatch
serve`` (``/metrics``, ``/slo``, ``/healthz``).
"""

from __future__ import annotations

import time

from tests.support.helpers import wait_until
from tests.support.hostile import Sidecar, Upstream, strict_json

SMALL = ('# TYPE nv_inference_count counter\n'
         'nv_inference_count{model="small",version="1"} 3\n')


def _many(n: int, tag: str = "") -> str:
    return "# TYPE nv_inference_count counter\n" + "".join(
        f'nv_inference_count{{model="m{tag}{i}",version="1"}} {i}\n' for i in range(n))


def test_too_many_series_and_a_long_label_value_leave_the_other_targets_served():
    long_label = ('nv_inference_count{model="' + "x" * 100_000 + '",version="1"} 1\n'
                  'nv_inference_count{model="fine",version="1"} 2\n')
    with Upstream(lambda _n: _many(5000)) as big, Upstream(lambda _n: SMALL) as small, \
            Upstream(lambda _n: long_label) as longv, Sidecar(
                {"scrape": {"interval_seconds": 0.3, "timeout_seconds": 0.3,
                            "max_series": 3000, "max_label_value_length": 1000},
                 "targets": [
                     {"name": "big", "kind": "triton", "url": big.url,
                      "labels": {"server": "big"}},
                     {"name": "small", "kind": "triton", "url": small.url,
                      "labels": {"server": "small"}},
                     {"name": "long", "kind": "triton", "url": longv.url,
                      "labels": {"server": "long"}}]}) as sc:
        # each target's first scrape done, however long a starved machine takes
        wait_until(lambda: all(sc.metric("fleetwatch_upstream_up", target=t) is not None
                               for t in ("big", "small", "long")), "every target scraped", 60)
        wait_until(lambda: sc.metric("fleetwatch_upstream_scrape_errors_total", target="big",
                                     reason="too_many_series"), "big refused", 60)
        assert sc.metric("fleetwatch_upstream_up", target="big") == 0
        assert sc.metric("fleetwatch_upstream_scrape_errors_total", target="big",
                         reason="too_many_series") >= 1
        assert sc.metric("fleetwatch_upstream_up", target="small") == 1
        assert sc.metric("fleetwatch_upstream_up", target="long") == 1
        _s, body, _ = sc.get("/metrics")
        assert 'model="small"' in body and 'model="fine"' in body
        assert "x" * 1001 not in body
        assert sc.metric("fleetwatch_upstream_invalid_samples_total", target="long",
                         reason="label_too_long") >= 1
        assert "too_many_series" in sc.log()


def test_normalization_time_is_bounded():
    with Upstream(lambda n: _many(20_000, tag=str(n))) as up, Sidecar(
            {"scrape": {"interval_seconds": 0.5, "timeout_seconds": 0.5,
                        "normalize_timeout_seconds": 0.001},
             "targets": [{"name": "t", "kind": "triton", "url": up.url}]}) as sc:
        wait_until(lambda: sc.metric("fleetwatch_upstream_scrape_errors_total", target="t",
                                     reason="normalize_timeout"), "a normalize timeout", 60)
        assert sc.metric("fleetwatch_upstream_up", target="t") == 0
        status, _body, _seconds = sc.get("/healthz")  # answers (within get's timeout)
        assert status == 200


def _churn(n: int) -> str:
    """30 models per scrape, new names every scrape (m<n>_<i>), each with traffic."""
    out = ["# TYPE nv_inference_request_success counter\n"]
    out += [f'nv_inference_request_success{{model="m{n}_{i}",version="1"}} {n * 10}\n'
            for i in range(30)]
    out.append("# TYPE nv_inference_request_duration_us counter\n")
    out += [f'nv_inference_request_duration_us{{model="m{n}_{i}",version="1"}} {n * 1000}\n'
            for i in range(30)]
    return "".join(out)


def test_slo_engine_state_is_bounded_under_model_churn():
    slos = {"windows": [{"long": "2s", "short": "1s", "budget_consumed": 0.05}],
            "capacity": {"window": "2s"},
            "limits": {"max_models_per_slo": 40, "forget_model_after": "1s"},
            "slos": [{"name": "avail", "sli": {"availability": {}},
                      "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "1h"}],
                      "concurrency": {"envelope": 8}}]}
    with Upstream(_churn) as up, Sidecar(
            {"scrape": {"interval_seconds": 0.1, "timeout_seconds": 0.1},
             "targets": [{"name": "t", "kind": "triton", "url": up.url}]}, slos=slos) as sc:
        counts = []
        # until ≥ 750 distinct models went by (25 scrapes), however slowly a starved
        # machine scrapes, and for at least 8 looks
        deadline = time.monotonic() + 120
        while up.requests < 25 or len(counts) < 8:
            assert time.monotonic() < deadline, f"{up.requests} scrapes in 120 s"
            time.sleep(0.5)
            _s, text, _ = sc.get("/slo")
            counts.append(len(strict_json(text)["slos"]))
            status, _b, _seconds = sc.get("/healthz")
            assert status == 200
        assert max(counts) <= 40, counts
        assert sc.metric("fleetwatch_slo_models_refused_total", slo="avail") > 0
        _s, body, _ = sc.get("/metrics")
        from fleetwatch.slo.state import STATES
        assert body.count("fleetwatch_slo_state{") <= 40 * len(STATES)  # one-hot per state
        assert "limits.max_models_per_slo" in sc.log()


def test_model_name_churn_keeps_healthz_answering_and_the_models_held_bounded():
    """1000 new model names every scrape (tests/support/churn_upstream.py) until more
    names went by than the SLO engine holds (``SLOEngine.MAX_MODELS``): ``/healthz``
    answers throughout, ``/autoscaling`` (every model the engine holds) stays within the
    cap, and the early evictions are counted and logged. Latencies are
    benchmarks/bench_churn.py's."""
    from fleetwatch.slo.engine import SLOEngine
    from tests.support.churn_upstream import churn_exposition

    names = 1000
    with Upstream(lambda n: churn_exposition(n, names)) as up, Sidecar(
            {"scrape": {"interval_seconds": 0.5, "timeout_seconds": 0.5},
             "targets": [{"name": "t", "kind": "triton", "url": up.url}]},
            slos={"slos": [{"name": "avail", "sli": {"availability": {}},
                            "objectives": [{"target": 0.99}],
                            "timeWindow": [{"duration": "1h"}],
                            "concurrency": {"envelope": 8}}]}) as sc:
        answers = held = 0
        deadline = time.monotonic() + 300
        while up.requests * names <= SLOEngine.MAX_MODELS + 2 * names:
            assert time.monotonic() < deadline, f"{up.requests} scrapes in 300 s"
            status, _b, _seconds = sc.get("/healthz", timeout=30)
            assert status == 200
            answers += 1
            _s, text, _ = sc.get("/autoscaling", timeout=30)
            held = max(held, len(strict_json(text)["models"]))
            time.sleep(0.2)
        assert answers >= 10
        deadline = time.monotonic() + 300
        while not (sc.metric("fleetwatch_slo_models_evicted_total") or 0) > 0:
            assert time.monotonic() < deadline, "no eviction counted within 300 s"
            time.sleep(0.2)
        _s, text, _ = sc.get("/autoscaling", timeout=30)
        held = max(held, len(strict_json(text)["models"]))
        assert 0 < held <= SLOEngine.MAX_MODELS
        assert "SLO engine holds" in sc.log()
