"""Issue 24 item 4: ``/autoscaling``, the engine's metrics and the status page say, per
model, the desired replicas at the target of 1 and the component that drives them — on
the real-vLLM sweep replayed through the engine, and on components set by hand."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from fleetwatch.commands.slo_replay import replay
from fleetwatch.page.render import autoscaling_section
from fleetwatch.slo.outputs.autoscaling import desired_replicas, driver
from fleetwatch.slo.outputs.export import slo_registry
from fleetwatch.slo.outputs.status import autoscaling_document
from fleetwatch.slo.spec import load_slo_file
from tests.support.helpers import ROOT

SWEEP = sorted((ROOT / "tests" / "data" / "vllm-sweep" / "captures").glob("*.prom"))
SLOS = ROOT / "src" / "fleetwatch" / "demo" / "slos.yaml"


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    last = None
    for _path, _ts, eng in replay(load_slo_file(SLOS), None, SWEEP):
        last = eng
    assert last is not None
    return last


def test_the_sweeps_overload_asks_for_replicas_driven_by_concurrency(engine) -> None:  # type: ignore[no-untyped-def]
    (row,) = autoscaling_document(engine)["models"]  # type: ignore[index]
    comps = row["components"]
    # the top step: 16 requests in the system against a capacity of 8 — about 2
    assert row["driver"] == max(comps, key=comps.get) == "concurrency"
    assert row["desired_replicas"] == max(row["min_replicas"], -(-row["signal"] // 1)) == 2
    # the sidecar's exposition of the engine (names and labels from the schema)
    text = generate_latest(slo_registry(engine)).decode()
    (line,) = [ln for ln in text.splitlines()
               if ln.startswith("fleetwatch_autoscaling_desired_replicas{")]
    assert 'model="tiny-llm"' in line and line.endswith(" 2.0")


def test_the_status_page_shows_desired_replicas_and_driver(engine) -> None:  # type: ignore[no-untyped-def]
    html = autoscaling_section(autoscaling_document(engine)["models"], {})  # type: ignore[arg-type]
    assert 'desired <b class="desired">2</b> replicas' in html
    assert '(driven by <span class="driver">concurrency</span>)' in html
    # rows without the fields (the fleet page's, from Prometheus) show neither
    assert "class=\"desired\"" not in autoscaling_section([{"model": "m", "signal": 0.5}], {})


def test_desired_replicas_and_driver_rules() -> None:
    assert desired_replicas(0.0, 1) == 1
    assert desired_replicas(1.0, 1) == 1
    assert desired_replicas(1.0000000001, 1) == 1  # float noise of an exact 1
    assert desired_replicas(1.2, 1) == 2
    assert desired_replicas(0.4, 2) == 2  # the cold-start floor
    assert desired_replicas(float("nan"), 2) == 2
    assert driver({"queue_wait": 1.4, "concurrency": 0.9, "kv_cache": 1.4}) == "kv_cache"
    assert driver({}) is None
