"""Pass-through never copies what a Prometheus would reject: a real Prometheus (Debian's
``prometheus``) keeps the scrape of a sidecar passing through the garbage of
``tests/exporters/test_passthrough.py`` — and every other series of it."""

from __future__ import annotations

import time

from tests.exporters.test_passthrough import GARBAGE
from tests.support.helpers import PrometheusProcess
from tests.support.hostile import Sidecar, Upstream, promtool_errors


def test_a_real_prometheus_keeps_the_scrape_with_passthrough_on():
    with Upstream(lambda _n: GARBAGE) as up, Sidecar(
            {"scrape": {"interval_seconds": 0.5, "timeout_seconds": 0.4},
             "passthrough_unmapped": True,
             "targets": [{"name": "t", "kind": "triton", "url": up.url}]}) as sc:
        up.wait_requests(2)
        time.sleep(0.6)
        _status, body, _ = sc.get("/metrics")
        assert promtool_errors(body) == []
        assert sc.metric("fleetwatch_upstream_invalid_samples_total", target="t",
                         reason="bad_value") > 0
        with PrometheusProcess([f"127.0.0.1:{sc.port}"], scrape_interval="1s") as prom:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                up_ = prom.query('up{job="fleetwatch"}')
                if up_ and prom.query("modelserver_batch_items_total"):
                    break
                time.sleep(0.5)
            assert up_ and up_[0]["value"][1] == "1", up_
            assert prom.query('custom_gauge{a="b"}')
