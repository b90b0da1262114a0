"""Attribution of a burn inside the envelope (fleetwatch.slo.judge.interference): the engine fed
Triton expositions of two co-located models and the captured dcgm-exporter exposition of a
T4, with the GPU-health series a throttling or erroring GPU adds.

The real-Triton acceptance (interference vs regression with a real shared lock) is
tests/e2e/test_slo_interference_triton.py; here each rule of the decision is pinned on its own.
"""

from __future__ import annotations

import pytest

from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.exporters.sources.dcgm import CLOCK_EVENT_REASONS, clock_event_reasons
from fleetwatch.labels.placement import GPUPlacement, PlacedModel, Placement
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from tests.support.helpers import ROOT, normalized_samples, pick

T4 = ROOT / "tests/fixtures/expositions/dcgm/dcgm-exporter-2026-ericsson-T4-loaded-no-help-type.prom"
UUID = "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a"  # the captured T4's UUID label
LABELS = (f'gpu="0",UUID="{UUID}",pci_bus_id="00000000:37:00.0",device="nvidia0",'
          f'modelName="Tesla T4",Hostname="host-d",DCGM_FI_DRIVER_VERSION="590.48.01"')
SLOS = {
    "windows": [{"long": "20s", "short": "4s", "budget_consumed": 0.05}],
    "slos": [{"name": "a-avail", "selector": {"models": ["a"]}, "sli": {"availability": {}},
              "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "10m"}],
              "concurrency": {"envelope": 4}}],
}
PLACEMENT = Placement([GPUPlacement(gpu_uuid=UUID, models=[PlacedModel(model="a"),
                                                           PlacedModel(model="b")])])


class Feed:
    """Cumulative Triton counters of models ``a`` and ``b`` (one 1 s step per call), and
    the captured T4 exposition with the health series given, into one engine."""

    def __init__(self, placement: Placement | None = PLACEMENT, a_concurrency: int = 1) -> None:
        self.a_concurrency = a_concurrency
        self.engine = SLOEngine(parse_slo_file(SLOS), placement=placement)
        self.triton = Normalizer(TABLES["triton"])
        self.dcgm = Normalizer(TABLES["dcgm"])
        self.t = 1000.0
        self.c = {"a_ok": 0, "a_bad": 0, "a_us": 0, "b_ok": 0, "b_us": 0}
        self.states: list[str] = []

    def step(self, a_bad: int = 0, b_busy: bool = False, reasons: int = 0,
             xid: int = 0) -> None:
        c = self.c
        c["a_ok"] += 10 - a_bad
        c["a_bad"] += a_bad
        # 10 requests of 0.1 s (× a_concurrency) per second: concurrency 1 (× …)
        c["a_us"] += 10 * 100_000 * self.a_concurrency
        pending = 6 if b_busy else 0
        if b_busy:
            c["b_ok"] += 10
            c["b_us"] += 10 * 500_000  # concurrency 5 by Little's law, 6 waiting
        triton = "".join(
            f'nv_inference_request_success{{model="{m}",version="1"}} {c[m + "_ok"]}\n'
            f'nv_inference_request_duration_us{{model="{m}",version="1"}} {c[m + "_us"]}\n'
            for m in ("a", "b"))
        triton += (f'nv_inference_request_failure{{model="a",version="1",reason="BACKEND"}} '
                   f'{c["a_bad"]}\n'
                   f'nv_inference_pending_request_count{{model="a",version="1"}} 0\n'
                   f'nv_inference_pending_request_count{{model="b",version="1"}} {pending}\n')
        dcgm = T4.read_text() + (f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{{{LABELS}}} {reasons}\n"
                                 f'DCGM_FI_DEV_XID_ERRORS{{{LABELS},err_code="{xid}",'
                                 f'err_msg=""}} {xid}\n')
        self.t += 1.0
        self.engine.update(Snapshot(self.t, {"triton": self.triton.normalize(triton),
                                             "dcgm": self.dcgm.normalize(dcgm)}))
        for st in self.engine.status():  # none before the second snapshot
            self.states.append(st["state"])

    def status(self):
        (st,) = self.engine.status()
        return st

    def metrics(self):
        return list(self.engine.iter_metrics())


def _baseline(f: Feed, steps: int = 20, **kw) -> None:
    for _ in range(steps):
        f.step(**kw)
    assert set(f.states) == {"ok"}, f.states


def test_clock_event_reasons_decode_as_data():
    assert [r.name for r in clock_event_reasons(0x48)] == ["hw_slowdown",
                                                            "hw_thermal_slowdown"]
    assert [r.slows for r in clock_event_reasons(0x1 | 0x2 | 0x10 | 0x100)] == [False] * 4
    assert clock_event_reasons(float("nan")) == () == clock_event_reasons(-1.0)
    bits = [r.bit for r in CLOCK_EVENT_REASONS]
    assert bits == [1 << i for i in range(9)]  # NVML's nine reasons, one bit each


def test_dcgm_health_series_from_the_captured_t4():
    text = T4.read_text() + (f"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{{{LABELS}}} 72\n"
                             f'DCGM_FI_DEV_XID_ERRORS{{{LABELS},err_code="79",'
                             f'err_msg="GPU has fallen off the bus"}} 79\n')
    s = normalized_samples(text, "dcgm")
    assert pick(s, "modelserver_gpu_sm_clock_hertz", gpu_uuid=UUID) == 660e6
    assert pick(s, "modelserver_gpu_memory_clock_hertz", gpu_uuid=UUID) == 5000e6
    assert pick(s, "modelserver_gpu_clock_event_reasons", gpu_uuid=UUID) == 72
    assert pick(s, "modelserver_gpu_last_xid_code", gpu_uuid=UUID) == 79
    xid = [lab for n, lab, _ in s if n == "modelserver_gpu_last_xid_code"]
    assert xid and "err_msg" not in xid[0] and "err_code" not in xid[0]


def test_neighbour_load_rising_with_the_burn_is_interference():
    f = Feed()
    _baseline(f)
    for _ in range(8):
        f.step(a_bad=5, b_busy=True)
    assert "regression" not in f.states and f.states[-1] == "interference", f.states
    att = f.status()["attribution"]
    (b,) = att["neighbours"]
    # before: [onset − 20 s, onset − 4 s), which holds b's first busy seconds (the long
    # window burns 7 s after the failures start): diluted, not zero
    assert b["model"] == "b" and b["concurrency_before"] < 1
    assert b["concurrency_during"] > 3 and b["correlation"] > 0.9, b
    assert att["burn_rates"]["1"]["4s"] == pytest.approx(5.0)  # 50 % bad / 10 % budget
    m = f.metrics()
    base = {"slo": "a-avail", "model": "a", "model_version": "1", "backend": "triton"}
    assert ("fleetwatch_slo_interference", {**base, "neighbour": "b"}, 1.0) in m
    assert ("fleetwatch_slo_state", {**base, "state": "interference"}, 1.0) in m
    during = [v for n, lab, v in m if n == "fleetwatch_slo_interference_neighbour_concurrency"
              and lab["period"] == "during"]
    assert during == [b["concurrency_during"]]


@pytest.mark.parametrize(("device", "named"), [
    (UUID, f"got busier on the shared GPU {UUID}:"),
    ("host-cpu", "got busier on the shared device host-cpu:"),
])
def test_the_interference_explanation_names_the_shared_device(device, named):
    """A GPU UUID is called a GPU; any other placement id (the demo's ``host-cpu``, where
    every model shares the CPU) a device, never "the shared GPU"."""
    f = Feed(placement=Placement([GPUPlacement(gpu_uuid=device, models=[
        PlacedModel(model="a"), PlacedModel(model="b")])]))
    _baseline(f)
    for _ in range(8):
        f.step(a_bad=5, b_busy=True)
    st = f.status()
    assert st["state"] == "interference", f.states
    assert named in st["explanation"], st["explanation"]
    if device == "host-cpu":
        assert "GPU" not in st["explanation"]


@pytest.mark.parametrize("b_busy", [False, True])
def test_capacity_is_learned_from_a_regression_not_from_interference(b_busy):
    """At concurrency 2 (band 2, not the lowest) a burn lowers capacity at SLO below the
    envelope when it is the model's own; blamed on the neighbour it leaves capacity alone."""
    f = Feed(a_concurrency=2)
    _baseline(f)
    for _ in range(10):
        f.step(a_bad=5, b_busy=b_busy)
    st = f.status()
    assert st["state"] == ("interference" if b_busy else "regression"), f.states
    assert (st["capacity"] == 4.0) is b_busy, st["capacity"]


def test_a_burn_that_lasts_while_the_neighbour_stays_busy_stays_interference():
    """A burn of 5 long windows (100 s, L = 20 s) with b busy every other second and a's
    bad ratio moving on its own (50–70 %): the evidence of the burn's beginning holds. It
    read ``regression`` again from ≈ 2 L on when the load samples before the onset aged
    out and r was computed over the later intervals alone (as the demo's ranker did
    beside vLLM)."""
    f = Feed()
    _baseline(f)
    for i in range(100):
        f.step(a_bad=5 + i % 3, b_busy=i % 2 == 0)
    assert f.states[-1] == "interference", f.states[-60:]
    assert f.states[-60:].count("regression") == 0, f.states[-60:]
    (b,) = f.status()["attribution"]["neighbours"]
    assert b["model"] == "b" and b["correlation"] > 0.3, b


def test_a_burn_with_the_neighbour_idle_is_a_regression():
    f = Feed()
    _baseline(f)
    for _ in range(8):
        f.step(a_bad=5)
    assert f.states[-1] == "regression" and "interference" not in f.states
    assert f.status()["attribution"] is None


def test_a_neighbour_busy_all_along_is_not_blamed():
    f = Feed()
    _baseline(f, b_busy=True)
    for _ in range(8):
        f.step(a_bad=5, b_busy=True)
    assert f.states[-1] == "regression" and "interference" not in f.states


def test_without_placement_a_burn_is_a_regression():
    f = Feed(placement=None)
    _baseline(f)
    for _ in range(8):
        f.step(a_bad=5, b_busy=True, reasons=0x40)
    assert f.states[-1] == "regression"


@pytest.mark.parametrize(("kw", "conditions"), [
    ({"reasons": 0x40}, ["hw_thermal_slowdown"]),
    ({"reasons": 0x4 | 0x1}, ["sw_power_cap"]),
    ({"xid": 79}, ["xid"]),
])
def test_a_burn_on_a_throttling_or_erroring_gpu_is_gpu_degraded(kw, conditions):
    f = Feed()
    _baseline(f)
    for _ in range(8):
        f.step(a_bad=5, b_busy=True, **kw)  # the GPU wins over the neighbour
    assert f.states[-1] == "gpu_degraded", f.states
    st = f.status()
    assert st["attribution"]["gpus"] == {UUID: conditions}
    assert UUID in st["explanation"] and "platform" in st["explanation"]
    m = f.metrics()
    assert ("fleetwatch_slo_gpu_degraded", {"slo": "a-avail", "model": "a",
            "model_version": "1", "backend": "triton", "gpu_uuid": UUID,
            "gpu_condition": conditions[0]}, 1.0) in m


def test_idle_or_clock_setting_reasons_do_not_degrade_a_gpu():
    f = Feed()
    _baseline(f, reasons=0x1 | 0x2)
    for _ in range(8):
        f.step(a_bad=5, reasons=0x1 | 0x2)
    assert f.states[-1] == "regression"


def test_gpu_health_values_that_are_not_numbers_are_no_evidence():
    f = Feed()
    _baseline(f)
    for _ in range(8):
        f.step(a_bad=5, reasons=float("nan"), xid=float("inf"))  # type: ignore[arg-type]
    assert f.states[-1] == "regression", f.states


def test_an_old_xid_seen_at_start_ages_out():
    """A non-zero last XID at the first snapshot is an error then; it no longer counts
    once it is older than the long window and unchanged."""
    f = Feed()
    for _ in range(45):  # > 2 × 20 s: the condition has expired
        f.step(xid=13)
    for _ in range(8):
        f.step(a_bad=5, xid=13)
    assert f.states[-1] == "regression", f.states


def test_a_discovered_placement_replaces_the_declared_one() -> None:
    """The sidecar hands the engine each new placement (gpu_facts.placement_listeners):
    neighbours follow it, and an empty placement keeps no attribution state."""
    from collections import deque

    from fleetwatch.labels.placement import GPUPlacement, Placement
    from fleetwatch.slo.judge.interference import Attributor

    att = Attributor(parse_slo_file(SLOS))
    assert not att.placement
    att.set_placement(Placement([GPUPlacement(gpu_uuid="G", models=[  # type: ignore[list-item]
        {"model": "a"}, {"model": "b"}])]))
    assert att.placement.neighbours("a") == {"b"}
    att._load["b"] = deque([(0.0, 1.0)])
    att.set_placement(Placement())
    assert not att.placement and att._load == {}
