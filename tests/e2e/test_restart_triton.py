"""Restarts of the real sidecar in front of real Triton replicas, with a real Prometheus.

One server set for the module: two ``tritonserver`` processes serving ``slo_sim`` (replicas
A and B), Debian's ``prometheus`` scraping the sidecars every second and evaluating the
generated fleet-capacity rule, and ``fleetwatch serve`` processes (the real sidecar) in
front of each replica. Sidecar A runs under closed-loop load until every SLO learned a
capacity (evidence other than ``envelope``); the load then stops and, once its ``/slo``
is still and Prometheus holds its final counters, ``/slo`` is recorded. The tests then
``kill -9`` the sidecar, restart it and compare the recovered ``/slo`` with the record:
from Prometheus (no snapshot), from the snapshot, with a corrupt snapshot (ignored, one
log line), and start sidecar B, which has no evidence of its own, from the fleet's
capacity; finally SIGTERM drains sidecar A (``/readyz`` 503, ``/metrics`` served) and it
exits 0 after saving its state.

No assertion depends on the machine's speed: the SLOs' windows (1 h and more) outlast the
module, so the record and the recovered state hold the same events, and the comparison is
of states, not timings. The load is stopped before the record, so "within one scrape
interval's events" is exactly equal here.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from fleetwatch.alerts.recording import slo_rules
from fleetwatch.demo.triton import TritonServer
from fleetwatch.sidecar.recover import SNAPSHOT_FILE
from fleetwatch.slo.recover.prometheus import FLEET_CAPACITY
from fleetwatch.slo.spec import parse_slo_file
from tests.support.helpers import tool

pytestmark = [pytest.mark.triton, pytest.mark.latency]

FLEETWATCH = str(Path(sys.executable).parent / "fleetwatch")
ENVELOPE = 0.5  # below any load the replica serves: good load raises the capacity
SLOS = {
    "windows": [{"long": "6h", "short": "1h", "budget_consumed": 0.05}],
    "capacity": {"window": "1h", "min_events": 40, "hysteresis_updates": 2},
    "slos": [
        {"name": "sim-availability", "selector": {"models": ["slo_sim"]},
         "sli": {"availability": {}}, "objectives": [{"target": 0.99}],
         "timeWindow": [{"duration": "7d"}],
         "concurrency": {"envelope": ENVELOPE, "bands": [1, 2, 4, 8]}},
        # 20 ms, a bucket boundary of slo_sim's histogram: about its latency at 3
        # concurrent requests (8 ms each), so a share of the events is bad
        {"name": "sim-latency", "selector": {"models": ["slo_sim"]},
         "sli": {"latency": {"metric": "request", "threshold_seconds": 0.02}},
         "objectives": [{"target": 0.9}], "timeWindow": [{"duration": "7d"}],
         "concurrency": {"envelope": ENVELOPE, "bands": [1, 2, 4, 8]}},
    ],
}
CONCURRENCY = 3  # closed-loop clients
#: What a recovered /slo must equal (per SLO state), besides the events
COMPARED = ("error_budget_remaining", "burn_rates", "capacity", "capacity_evidence",
            "capacity_predicted", "band_latency", "events", "state")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _until(pred, what: str, seconds: float = 120.0, detail=None):  # type: ignore[no-untyped-def]
    """Poll ``pred`` until it returns something true; fail naming ``what`` (and
    ``detail()``'s text, the state the wait ended in) after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            got = pred()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {seconds:g} s"
                + (f"; last: {detail()}" if detail is not None else ""))


@dataclass
class Sidecar:
    """One ``fleetwatch serve`` process in front of a replica."""

    name: str
    server: TritonServer
    work: Path
    prom_url: str
    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state_dir(self) -> Path:
        return self.work / f"{self.name}-state"

    @property
    def log(self) -> Path:
        return self.work / f"{self.name}-{self.starts}.log"

    def config(self) -> dict:
        return {"listen": {"address": "127.0.0.1", "port": self.port},
                "scrape": {"interval_seconds": 1, "timeout_seconds": 1},
                "targets": [{"name": "triton", "kind": "triton",
                             "url": self.server.metrics_url, "api_url": self.server.http_url}],
                "slo": {"recover": {"prometheus": self.prom_url,
                                    "match": {"instance": f"127.0.0.1:{self.port}"},
                                    "timeout_seconds": 20},
                        "snapshot_interval_seconds": 1},
                "state_dir": str(self.state_dir),
                "shutdown": {"drain_seconds": 4}}

    def start(self) -> None:
        self.starts += 1
        cfg = self.work / f"{self.name}.yaml"
        cfg.write_text(yaml.safe_dump(self.config()))
        self.proc = subprocess.Popen(
            [FLEETWATCH, "serve", "--config", str(cfg), "--slos", str(self.work / "slos.yaml"),
             "--log-level", "info"],
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _until(lambda: self._alive() and _get(f"{self.url}/healthz")[0] == 200,
               f"sidecar {self.name} serving", 60)

    def _alive(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"sidecar {self.name} exited {self.proc.returncode}: "
                        f"{self.log.read_text()[-2000:]}")
        return True

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def slo(self) -> dict:
        status, body = _get(f"{self.url}/slo")
        assert status == 200, body
        doc: dict = json.loads(body)
        return doc

    def states(self) -> dict[tuple[str, str], dict]:
        """(SLO, model version) → state (``slo_sim`` has versions 1 and 2: the load goes
        to 1, version 2's states have no events)."""
        return {(s["slo"], s["model_version"]): s for s in self.slo()["slos"]}


def _load(server: TritonServer, stop: threading.Event) -> None:
    host, port = server.http_address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = ('{"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [1.0]}]}')
    try:
        while not stop.is_set():
            conn.request("POST", "/v2/models/slo_sim/versions/1/infer", body,
                         {"Content-Type": "application/json"})
            conn.getresponse().read()
    finally:
        conn.close()


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expr: str) -> list[dict]:
        status, body = _get(f"{self.url}/api/v1/query?"
                            f"{urllib.parse.urlencode({'query': expr})}")
        assert status == 200, body
        result: list[dict] = json.loads(body)["data"]["result"]
        return result


@dataclass
class Module:
    a: Sidecar
    b: Sidecar
    prom: Prometheus
    before: dict[tuple[str, str], dict]  # sidecar A's /slo states, recorded once still


#: The states of the module: both SLOs on both versions of slo_sim.
STATES = 4


def _learned(states: dict[tuple[str, str], dict]) -> bool:
    """Both SLOs of the loaded version have evidence of their own, and good load raised
    the availability SLO's capacity above the envelope.

    Evidence alone is not enough: on a busy machine the first trusted band can be the
    lowest one, filled while the clients were starved (mean concurrency under the
    envelope), and its evidence ``kept`` leaves the capacity at the envelope. An
    availability SLI has no bad events here, so once raised that capacity only rises.
    """
    loaded = {slo: s for (slo, version), s in states.items() if version == "1"}
    return (len(loaded) == 2
            and all(s["capacity_evidence"] not in ("envelope", "fleet")
                    for s in loaded.values())
            and loaded["sim-availability"]["capacity"] > ENVELOPE)


def _still(side: Sidecar, prom: Prometheus) -> dict[tuple[str, str], dict]:
    """Wait until A's events stop changing and Prometheus holds its final counters."""
    last: list[dict] = [{}]

    def settled() -> dict[tuple[str, str], dict] | None:
        now = side.states()
        events = {k: v["events"] for k, v in now.items()}
        same = events == last[0]
        last[0] = events
        if not same:
            return None
        scraped = {(r["metric"]["slo"], r["metric"].get("model_version", "")):
                   float(r["value"][1]) for r in prom.query(
            f'fleetwatch_slo_events_total{{instance="127.0.0.1:{side.port}", band="all"}}')}
        ok = scraped == {k: v["events"]["all"] for k, v in now.items() if v["events"]}
        return now if ok else None

    _until(settled, "sidecar A's events still and scraped", 60)
    time.sleep(3)  # a few more updates: capacity and evidence settle on the still windows
    return side.states()


@pytest.fixture(scope="module")
def module(tmp_path_factory) -> Iterator[Module]:
    tool("promtool")  # Debian's prometheus package (prometheus itself is beside it)
    work = tmp_path_factory.mktemp("restart")
    (work / "slos.yaml").write_text(yaml.safe_dump(SLOS))
    rules = [{"record": r.record, "expr": r.expr}  # the generated fleet-capacity rule
             for s in parse_slo_file(SLOS).slos for r in slo_rules(s, [])
             if r.record == FLEET_CAPACITY]
    (work / "rules.yml").write_text(yaml.safe_dump(
        {"groups": [{"name": "fleet", "interval": "1s", "rules": rules}]}))
    pport = _free_port()
    prom_url = f"http://127.0.0.1:{pport}"
    stop = threading.Event()
    with TritonServer(models=["slo_sim"]) as ta, TritonServer(models=["slo_sim"]) as tb:
        a = Sidecar("a", ta, work, prom_url)
        b = Sidecar("b", tb, work, prom_url)
        (work / "targets.json").write_text(json.dumps(
            [{"targets": [f"127.0.0.1:{s.port}" for s in (a, b)]}]))
        (work / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(work / "rules.yml")],
            "scrape_configs": [{"job_name": "fleetwatch", "file_sd_configs": [
                {"files": [str(work / "targets.json")], "refresh_interval": "1s"}]}]}))
        prom_proc = subprocess.Popen(
            ["prometheus", f"--config.file={work / 'prometheus.yml'}",
             f"--storage.tsdb.path={work / 'prom-data'}",
             f"--web.listen-address=127.0.0.1:{pport}"],
            stdout=(work / "prom.log").open("wb"), stderr=subprocess.STDOUT)
        loads: list[threading.Thread] = []
        try:
            _until(lambda: _get(f"{prom_url}/-/ready")[0] == 200, "prometheus ready", 60)
            prom = Prometheus(prom_url)
            a.start()
            loads = [threading.Thread(target=_load, args=(ta, stop), daemon=True)
                     for _ in range(CONCURRENCY)]
            for t in loads:
                t.start()
            _until(lambda: _learned(a.states()), "sidecar A learned its capacities", 300,
                   detail=lambda: {k: (s["capacity"], s["capacity_evidence"], s["events"])
                                   for k, s in a.states().items()})
            stop.set()
            for t in loads:
                t.join(60)
            yield Module(a, b, prom, _still(a, prom))
        finally:
            stop.set()
            for side in (a, b):
                if side.proc is not None and side.proc.poll() is None:
                    side.proc.kill()
                    side.proc.wait(30)
            prom_proc.terminate()
            prom_proc.wait(30)


def _recovered(side: Sidecar, source: str) -> dict[tuple[str, str], dict]:
    """The restarted sidecar's states once recovered from ``source`` and updated a few
    times (the evidence string is derived again by the first updates)."""
    def ready() -> dict[tuple[str, str], dict] | None:
        states = side.states()
        if len(states) == STATES and all(s["recovered_from"] == source
                                         for s in states.values()):
            return states
        return None

    _until(ready, f"sidecar {side.name} recovered from {source}", 60)
    time.sleep(3)
    return side.states()


def _same(after: dict[tuple[str, str], dict], before: dict[tuple[str, str], dict]) -> None:
    assert after.keys() == before.keys()
    for name, b in before.items():
        a = after[name]
        for key in COMPARED:
            assert _close(a[key], b[key]), (name, key, a[key], b[key])


def _close(x: object, y: object) -> bool:
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_close(x[k], y[k]) for k in x)
    if isinstance(x, float | int) and isinstance(y, float | int):
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return x == y


def test_a_sidecar_killed_and_restarted_recovers_its_state_from_prometheus(module):
    a, before = module.a, module.before
    assert all(s["recovered_from"] is None for s in before.values())  # the first start
    a.kill9()
    (a.state_dir / SNAPSHOT_FILE).unlink()  # no snapshot: Prometheus is the store
    a.start()
    after = _recovered(a, "prometheus")
    _same(after, before)
    assert "SLO state recovered from Prometheus" in a.log.read_text()


def test_a_sidecar_killed_and_restarted_recovers_its_state_from_its_snapshot(module):
    a, before = module.a, module.before
    path = a.state_dir / SNAPSHOT_FILE
    t0 = time.time()
    _until(lambda: path.exists() and path.stat().st_mtime > t0 + 1, "a snapshot written", 30)
    a.kill9()
    a.start()
    after = _recovered(a, "snapshot")
    _same(after, before)
    assert "SLO state recovered from snapshot" in a.log.read_text()


def test_a_corrupt_snapshot_is_ignored_with_a_log_line(module):
    a, before = module.a, module.before
    a.kill9()
    path = a.state_dir / SNAPSHOT_FILE
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # cut short, as by a full disk
    a.start()
    after = _recovered(a, "prometheus")  # never the snapshot's half state
    _same(after, before)
    lines = [ln for ln in a.log.read_text().splitlines() if "ignored" in ln]
    assert len(lines) == 1 and f"snapshot {path} ignored: not JSON" in lines[0], lines


def test_a_new_replica_starts_from_the_capacity_the_fleet_learned(module):
    a, b, prom = module.a, module.b, module.prom
    learned = {key: s["capacity"] for key, s in a.states().items()}
    assert learned[("sim-availability", "1")] != ENVELOPE, learned  # raised by good load

    def recorded() -> dict[tuple[str, str], float] | None:
        got = {(r["metric"]["slo"], r["metric"].get("model_version", "")): float(r["value"][1])
               for r in prom.query(FLEET_CAPACITY)}
        return got if got == learned else None

    _until(recorded, "the fleet capacity recorded by Prometheus", 30)
    b.start()
    states = _recovered(b, "fleet")
    assert {n: (s["capacity"], s["capacity_evidence"]) for n, s in states.items()} == \
        {n: (c, "fleet") for n, c in learned.items()}
    assert all(sum(s["events"].values()) == 0 for s in states.values())  # no load of its own
    assert "fleet capacities from Prometheus" in b.log.read_text()


def test_sigterm_drains_then_saves_the_state_and_exits_0(module):
    a = module.a
    path = a.state_dir / SNAPSHOT_FILE
    assert a.proc is not None
    a.proc.send_signal(signal.SIGTERM)
    t0 = time.time()
    _status, body = _until(lambda: (lambda r: r if r[0] == 503 else None)(
        _get(f"{a.url}/readyz")), "/readyz 503 after SIGTERM", 10)
    assert json.loads(body)["shutting_down"] is True
    assert _get(f"{a.url}/metrics")[0] == 200  # still served for the final scrape
    assert a.proc.wait(60) == 0
    assert path.stat().st_mtime >= t0  # the snapshot written at shutdown
    assert os.path.getsize(path) > 0
    assert f"SLO state saved to {a.state_dir}" in a.log.read_text()
