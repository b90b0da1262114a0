"""Rollouts on a real Triton: warm-up gating, ``fleetwatch compare`` by band (against a real
Prometheus and offline on the captures), baselines and the sidecar's verdict.

One tritonserver serves ``slo_sim`` versions 1 (8 ms service time), 2 (50 ms: the slow
version the SLO scenario uses) and 3 (a copy of version 1: an identical version), with
one instance each and no batching, so latency ≈ concurrency × service time; its latency
histogram (``vllm:e2e_request_latency_seconds`` through the Python backend's metrics
API: Triton 2.51 has none of its own) feeds a latency SLI at 40 ms. The real sidecar (with
the SLO engine) scrapes it every second, a real Prometheus scrapes the sidecar, and the
test captures Triton's ``/metrics`` every second for the offline comparison.

Before any load, version 3's registry warm-up is required: ``/readyz`` is 503 until
``fleetwatch warmup`` ran, then 200. Load, one phase after the other: versions 1 and 3
side by side at concurrency 1 each (a canary's split of the traffic), version 2 at 1, then
version 1 again at concurrency 8 (so versions 1 and 3 see *different* load). Expected:

* version 2 against 1: ``worse``, driven by band ``1`` (both ran there);
* version 3 against 1: ``same`` band by band, while the naive overall comparison says
  ``better`` (version 1's overall ratio includes its concurrency-8 phase, which misses the
  threshold: a comparison that ignores load blames or credits the code for it).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleetwatch.cli import main
from fleetwatch.commands.warmup import Plan, triton_latencies
from fleetwatch.demo.load import StepResult, step_load
from fleetwatch.demo.triton import DEFAULT_MODEL_REPOSITORY, TritonServer
from fleetwatch.labels.registry import parse_registry
from fleetwatch.labels.warmup import WarmupSpec
from fleetwatch.sidecar.config import parse_config
from fleetwatch.slo.spec import parse_slo_file
from tests.e2e.test_dashboards_prometheus import SidecarThread
from tests.support.disturbance import shortfalls, slo_sim_step, until_undisturbed
from tests.support.helpers import PrometheusProcess, wait_until

pytestmark = [pytest.mark.triton, pytest.mark.latency]

THRESHOLD = 0.04  # seconds: a bucket boundary of slo_sim's histogram
SLOS = {
    "windows": [{"long": "30s", "short": "6s", "budget_consumed": 0.05}],
    "capacity": {"window": "2m", "min_events": 100, "hysteresis_updates": 2},
    "slos": [{
        "name": "sim-latency", "selector": {"models": ["slo_sim"]},
        "sli": {"latency": {"metric": "request", "threshold_seconds": THRESHOLD}},
        "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "10m"}],
        "concurrency": {"envelope": 4, "bands": [1, 2, 4, 8, 16]},
    }],
}
WARMUP = {"gate": "required", "protocol": "http", "count": 12,
          "inputs": [{"name": "X", "datatype": "FP32", "shape": [4]}]}
REGISTRY = {"models": [
    {"name": "slo_sim", "version": "3", "team": "ml", "owner": "a@example.com",
     "oncall": "ml-oncall", "warmup": WARMUP},
    {"name": "slo_sim", "team": "ml", "owner": "a@example.com", "oncall": "ml-oncall",
     "warmup": {**WARMUP, "gate": "optional", "count": 2}},
]}
#: (version, concurrency) of the load, phase by phase; the versions of one phase run side
#: by side. Versions 1 and 3 share a phase as a canary shares the traffic: the same machine
#: at the same moment, so a busy machine slows both alike (in phases of their own, a
#: machine busier in one phase than in the other made identical versions differ).
PHASES = ((("1", 1), ("3", 1)), (("2", 1),), (("1", 8),))
SECONDS_PER_PHASE = 4.0


def _repository(tmp: Path) -> Path:
    """slo_sim with versions 1, 2 and 3 (3 = a copy of 1)."""
    repo = tmp / "models"
    shutil.copytree(DEFAULT_MODEL_REPOSITORY / "slo_sim", repo / "slo_sim")
    shutil.copytree(repo / "slo_sim" / "1", repo / "slo_sim" / "3")
    return repo


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _prom_has(base: str, selector: str) -> bool:
    """Whether Prometheus's instant query ``selector`` returns a series."""
    status, body = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": selector}))
    return status == 200 and bool(json.loads(body)["data"]["result"])




class Capturer:
    """Triton's /metrics every second into ``NNNN-<unix_ms>.prom`` files."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.folder = url, folder
        folder.mkdir()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            status, body = _get(self.url)
            if status == 200:
                (self.folder / f"{i:04d}-{int(time.time() * 1000)}.prom").write_text(body)
                i += 1
            self.stop.wait(1.0)


@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    """What the tests check, from a run the machine did not disturb
    (tests/support/disturbance.py), each on a new Triton, sidecar and Prometheus."""
    return until_undisturbed(
        lambda: _rollout_once(tmp_path_factory.mktemp("rollout")),
        lambda out: shortfalls(slo_sim_step(version, step, THRESHOLD,
                                            out["tmp"] / "models" / "slo_sim")
                               for version, step in out["steps"]),
        "the rollout scenario")


def _rollout_once(tmp: Path) -> dict:
    (tmp / "slos.yaml").write_text(yaml.safe_dump(SLOS))
    (tmp / "registry.yaml").write_text(yaml.safe_dump(REGISTRY))
    out: dict = {"tmp": tmp, "steps": []}
    with TritonServer(models=["slo_sim"], model_repository=_repository(tmp)) as triton:
        cfg = {"listen": {"address": "127.0.0.1", "port": 0},
               "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
               "registry": "registry.yaml",
               "targets": [{"name": "triton", "kind": "triton", "url": triton.metrics_url,
                            "api_url": triton.http_url, "models": ["slo_sim"]}]}
        (tmp / "sidecar.yaml").write_text(yaml.safe_dump(cfg))
        sidecar = SidecarThread(parse_config(cfg), parse_registry(REGISTRY),
                                parse_slo_file(SLOS)).start()
        base = f"http://127.0.0.1:{sidecar.port}"
        capturer = Capturer(triton.metrics_url, tmp / "captures")
        try:
            with PrometheusProcess([f"127.0.0.1:{sidecar.port}"]) as prom:
                # warm-up gating: not ready until version 3's warm-up ran
                status, body = wait_until(lambda: (s := _get(f"{base}/readyz"))[1].count("slo_sim")
                                     and s, "the sidecar's first readiness answer")
                out["before"] = (status, json.loads(body))
                res = CliRunner().invoke(main, ["warmup", "--config", str(tmp / "sidecar.yaml")])
                out["warmup"] = res
                print(res.output)
                out["after"] = wait_until(lambda: (s := _get(f"{base}/readyz"))[0] == 200 and s,
                                     "/readyz 200 after the warm-up")
                # the gRPC client path (tritonclient.grpc), on version 1
                spec = WarmupSpec.model_validate({**WARMUP, "protocol": "grpc", "count": 5})
                out["grpc"] = triton_latencies(
                    Plan("slo_sim", "1", spec, f"127.0.0.1:{triton.grpc_port}"))
                # the range test's increase() loses a series' first sample: let Prometheus
                # see version 1's band-1 series (the gRPC warm-up made it) before phase 1
                wait_until(lambda: _prom_has(prom.url, 'fleetwatch_slo_events_total{model='
                                        '"slo_sim",model_version="1",band="1"}'),
                      "Prometheus has version 1's band-1 events")
                capturer.thread.start()
                for phase in PHASES:
                    out["steps"] += _side_by_side(triton.http_address, phase)
                time.sleep(2.5)  # the last interval reaches the sidecar, then Prometheus
                capturer.stop.set()
                capturer.thread.join(5)
                out["metrics"] = _get(f"{base}/metrics")[1]
                out["prometheus"] = prom.url
                out["cli"] = _cli_results(tmp, prom.url)
        finally:
            capturer.stop.set()
            sidecar.stop()
    return out


def _side_by_side(address: str,
                  phase: tuple[tuple[str, int], ...]) -> list[tuple[str, StepResult]]:
    """One phase: a closed loop per (version, concurrency), all for `SECONDS_PER_PHASE`;
    each version's step."""
    results: list[tuple[str, StepResult]] = []

    def load(version: str, concurrency: int) -> None:
        steps = step_load(address, "slo_sim", steps=(concurrency,),
                          seconds_per_step=SECONDS_PER_PHASE, model_version=version)
        results.extend((version, step) for step in steps)

    threads = [threading.Thread(target=load, args=pair) for pair in phase]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def _cli_results(tmp: Path, prom: str) -> dict:
    """Every command the tests check, run while Prometheus is up."""
    model = ("--model", "slo_sim")
    live = ("--prometheus", prom, "--slos", str(tmp / "slos.yaml"), *model)
    offline = ("--slos", str(tmp / "slos.yaml"), "--captures", str(tmp / "captures"), *model)
    r = {}
    for name, src in (("prom", live), ("offline", offline)):
        for cand in ("2", "3"):
            r[(name, cand)] = _cli("compare", *src, "--baseline-version", "1",
                                   "--candidate-version", cand, "--json")
        r[(name, "table")] = _cli("compare", *src, "--baseline-version", "1",
                                  "--candidate-version", "2")
        r[(name, "unknown-version")] = _cli("compare", *src, "--baseline-version", "1",
                                            "--candidate-version", "9")
    r[("prom", "range")] = _cli("compare", *live, "--range", "2m", "--min-events", "10",
                                "--baseline-version", "1", "--candidate-version", "2",
                                "--json")
    r["warmup-unknown-version"] = _cli("warmup", "--config", str(tmp / "sidecar.yaml"),
                                       "--model", "slo_sim", "--version", "9")
    r["unknown-model"] = _cli("compare", "--prometheus", prom, "--model", "nope",
                              "--baseline-version", "1", "--candidate-version", "2")
    r["record"] = _cli("baseline", "record", *live, "--version", "1",
                       "--out", str(tmp / "baseline-v1.yaml"))
    r["record-unknown"] = _cli("baseline", "record", *live, "--version", "7",
                               "--out", str(tmp / "nope.yaml"))
    r["vs-baseline"] = _cli("compare", *offline, "--baseline", str(tmp / "baseline-v1.yaml"),
                            "--candidate-version", "2", "--json")
    return r


def _verdict(res) -> dict:
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_readiness_waits_for_the_required_warm_up(rollout):
    status, before = rollout["before"]
    print("before:", status, before["targets"]["triton"])
    assert status == 503
    assert before["targets"]["triton"]["models_not_warm"] == ["slo_sim"]
    assert before["targets"]["triton"]["models_not_ready"] == []  # Triton says ready
    res = rollout["warmup"]
    assert res.exit_code == 0, res.output
    assert "warm-up of 12 requests" in res.output and "first latencies ms" in res.output
    status, after = rollout["after"]
    assert status == 200 and json.loads(after)["targets"]["triton"]["models_not_warm"] == []
    assert 'fleetwatch_model_warm{model="slo_sim",model_version="3",target="triton"} 1.0' \
        in rollout["metrics"]
    grpc = rollout["grpc"]
    print("gRPC warm-up of version 1, ms:", [round(1000 * x, 1) for x in grpc])
    assert len(grpc) == 5 and all(x > 0.008 for x in grpc)  # ≥ the 8 ms service time


@pytest.mark.parametrize("source", ["prom", "offline"])
def test_slower_version_is_worse_in_the_band_that_shows_it(rollout, source):
    c = _verdict(rollout["cli"][(source, "2")])
    print(rollout["cli"][(source, "table")].output)
    assert c["verdict"] == "worse", c
    assert ["sim-latency", "1"] in c["driving"]
    (slo,) = c["slos"]
    band1 = next(b for b in slo["bands"] if b["band"] == "1")
    assert band1["baseline"]["total"] >= 30 and band1["candidate"]["total"] >= 30
    assert band1["p_value"] < slo["threshold"]


@pytest.mark.parametrize("source", ["prom", "offline"])
def test_identical_version_is_same_by_band_where_the_naive_comparison_is_wrong(rollout,
                                                                              source):
    c = _verdict(rollout["cli"][(source, "3")])
    (slo,) = c["slos"]
    print({b["band"]: (b["verdict"], b["baseline"] and b["baseline"]["total"],
                       b["candidate"] and b["candidate"]["total"]) for b in slo["bands"]},
          "naive:", slo["overall"]["verdict"], slo["overall"]["difference"])
    assert c["verdict"] == "same", c
    assert "1" in slo["driving_bands"]
    # version 1 also ran at concurrency 8 (band 8: over the threshold), version 3 did not:
    # overall, version 3 looks better although it is the same code
    assert slo["overall"]["verdict"] == "better"
    assert any(b["verdict"] == "not enough data" and b["baseline"] and
               b["baseline"]["total"] >= 30 and b["candidate"] is None for b in slo["bands"])


def test_sidecar_exports_the_verdict_of_each_live_candidate(rollout):
    m = rollout["metrics"]
    assert ('fleetwatch_rollout_verdict{baseline="1",candidate="2",model="slo_sim",'
            'verdict="worse"} 1.0') in m
    assert ('fleetwatch_rollout_verdict{baseline="1",candidate="3",model="slo_sim",'
            'verdict="same"} 1.0') in m


def test_baseline_recorded_from_prometheus_compares_offline(rollout):
    rec = rollout["cli"]["record"]
    assert rec.exit_code == 0, rec.output
    data = yaml.safe_load((rollout["tmp"] / "baseline-v1.yaml").read_text())
    assert data["format"] == "fleetwatch-baseline/v1" and data["model_version"] == "1"
    c = _verdict(rollout["cli"]["vs-baseline"])
    assert c["verdict"] == "worse" and c["baseline"] == "baseline 1 (triton)"
    assert ["sim-latency", "1"] in c["driving"]


def test_unknown_model_or_version_is_a_clear_error(rollout):
    cli = rollout["cli"]
    for key in (("prom", "unknown-version"), ("offline", "unknown-version")):
        res = cli[key]
        assert res.exit_code == 2, res.output
        assert "no version '9'" in res.output and "'1', '2', '3'" in res.output
    assert cli["unknown-model"].exit_code == 2
    assert "model nope: not in Prometheus" in cli["unknown-model"].output
    assert cli["record-unknown"].exit_code == 2
    assert "no version '7'" in cli["record-unknown"].output
    res = cli["warmup-unknown-version"]  # asked of Triton before any request
    assert res.exit_code == 2, res.output
    assert "model slo_sim version '9': not ready or not known" in res.output


def test_compare_over_a_prometheus_range(rollout):
    """increase() over the range: a series born inside it loses its first sample's events
    (Prometheus counter semantics), hence fewer events than since-start counts."""
    c = _verdict(rollout["cli"][("prom", "range")])
    print({b["band"]: (b["verdict"], b["baseline"] and b["baseline"]["total"],
                       b["candidate"] and b["candidate"]["total"])
           for b in c["slos"][0]["bands"]})
    assert c["verdict"] == "worse" and ["sim-latency", "1"] in c["driving"]
