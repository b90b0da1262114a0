"""Closed autoscaling loop on real Triton replicas: signal → replicas → load per replica →
signal.

Up to 4 ``tritonserver`` processes (:class:`fleetwatch.demo.triton.TritonServer`), each
serving ``slo_sim`` (one instance, 8 ms service time: latency ≈ concurrency × 8 ms),
started lazily when the controller first asks for them and reused across the load
levels. One sidecar per replica, driven in-process for determinism: every snapshot
scrapes each live replica's ``/metrics``, normalizes it with its own normalizer and
feeds its own :class:`~fleetwatch.slo.engine.SLOEngine` (no ``fleetwatch serve``
processes, so snapshots — not wall-clock time — are the unit the assertions count). A
load generator holds a total concurrency C of closed-loop clients spread round-robin
over the live replicas. The controller applies KEDA's rule for an ``AverageValue``
target of 1 to Σ signal, the sum of the replicas' own autoscaling signals (what the
Prometheus trigger of ``docs/autoscaling.md`` reads): desired = ceil(Σ signal), HPA's
10 % tolerance (no change while |Σ signal / replicas − 1| ≤ 0.1), clamped to [1, 4],
scale-up at once, scale-down to the highest recommendation of the last
``STABILISATION`` snapshots (longer than the capacity window, as KEDA's 300 s default is
longer than a capacity window in practice). Each replica is warmed up (30 requests)
before it takes load, as a readiness gate after model warm-up would: a fresh
Python-backend instance's first slow requests otherwise read as burn.

The envelope (3) is the operator's prior *below* the knee (≈ 4): a replica that has
seen good load above it raises its capacity to that load, burn beyond the knee lowers
it. An envelope above the knee is a declared regression by the engine's own rule (burn
inside the envelope is ``regression``), and it makes Σ signal under-read on every
replica added at load below the knee (its capacity is still the envelope), so the loop
would scale in under a steady load.

The knee is measured from the client side: the highest per-replica concurrency whose
client latencies meet the objective (p90 ≤ 40 ms), interpolated between the observed
levels. Asserted: from 1 replica the loop converges to ceil(C / knee) within
``CONVERGE`` snapshots at C = 6 and after a step to C = 14 and holds it for the last
``HOLD`` snapshots; it does not flap (after first reaching the count, at most one
excursion); a load step shows in Σ signal within 2 snapshots; after C drops to 3 it
scales in. The log prints the replica count per snapshot with each
replica's concurrency and capacity (``pytest -s``). A run the machine disturbed (a request
that stalled over ``STALL_S``, or the lowest level already over the threshold) is run once
more before the assertions judge it (tests/support/disturbance.py); when both runs were
disturbed, an assertion that fails makes the test inconclusive (skipped with the
disturbance and the assertion named), since convergence in snapshots is timing.

``CONVERGE`` is longer than the stabilisation window: a replica whose capacity falls on a
burn in a low band (a loaded machine lowers the knee) can overshoot by one replica, which
comes back only once the window has passed. The capacity rule matters for the scale-in:
were capacity the highest trusted band burning below 1, each replica's capacity would
fall to its own low band once the capacity window expired the high-load evidence, and
after C drops the loop would stay over-provisioned.
"""

from __future__ import annotations

import http.client
import itertools
import math
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np
import pytest

from fleetwatch.demo.supervise import crash_excerpt
from fleetwatch.demo.triton import TritonServer, TritonStartError
from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file
from tests.support.disturbance import inconclusive_when_disturbed, until_undisturbed

pytestmark = [pytest.mark.triton, pytest.mark.latency]

THRESHOLD = 0.04  # seconds: a bucket boundary of slo_sim's histogram
OBJECTIVE = 0.9
ENVELOPE = 3
BANDS = [1, 2, 3, 6, 12]
SLOS = parse_slo_file({
    # period 10m, long 30s: burn threshold 0.05 × 600 / 30 = 1
    "windows": [{"long": "30s", "short": "5s", "budget_consumed": 0.05}],
    "capacity": {"window": "10s", "min_events": 60, "hysteresis_updates": 2},
    "slos": [{"name": "sim", "selector": {"models": ["slo_sim"]},
              "sli": {"latency": {"metric": "request", "threshold_seconds": THRESHOLD}},
              "objectives": [{"target": OBJECTIVE}], "timeWindow": [{"duration": "10m"}],
              "concurrency": {"envelope": ENVELOPE, "bands": BANDS}}],
})
VERSION = "1"  # slo_sim version 1: 8 ms service time (2 is the slow "regression")
MIN_REPLICAS, MAX_REPLICAS = 1, 4
TOLERANCE = 0.1
STABILISATION = 15  # snapshots: longer than the capacity window (10 s)
INTERVAL_S = 1.0
CONVERGE = STABILISATION + 10  # snapshots allowed to converge (a scale-in waits out the window)
C_LOW, C_HIGH = 6, 14  # ceil(C / knee) = 2 and 4 for a knee of 3–4.6 (4 = max below)
HOLD = 6  # snapshots that must follow without a change
STALL_S = 0.5  # seconds: a request this slow waited for the machine, not for the model


def _start_triton(attempts: int = 2) -> TritonServer:
    """A started slo_sim Triton; one retry when the Python backend dies while starting
    (seen once on the shared machine: boost::interprocess::lock_exception, exit -6)."""
    for i in range(attempts):
        server = TritonServer(models=["slo_sim"])
        try:
            server.start()
        except TritonStartError:
            if i == attempts - 1:
                raise
            continue
        _warm_up(server)
        return server
    raise AssertionError("unreachable")


def _warm_up(server: TritonServer, requests: int = 30) -> None:
    """Requests before the replica takes load (as a readiness gate after model warm-up
    would): a fresh Python-backend instance answers its first requests slowly, which
    would otherwise read as burn in the band of the first, partial interval."""
    host, port = server.http_address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        for _ in range(requests):
            conn.request("POST", f"/v2/models/slo_sim/versions/{VERSION}/infer",
                         '{"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", '
                         '"data": [1.0]}]}', {"Content-Type": "application/json"})
            conn.getresponse().read()
    finally:
        conn.close()


def _targets(c: int, knee: float) -> set[int]:
    """ceil(C / knee), or both neighbours when C / knee is within the client-side knee's
    ±10 % measurement error of an integer (the knee moves with the machine's load),
    clamped to [min, max]."""
    return {min(MAX_REPLICAS, max(MIN_REPLICAS, math.ceil(c / (knee * f))))
            for f in (0.9, 1.0, 1.1)}


class Replica:
    """One Triton and its sidecar (normalizer + engine)."""

    def __init__(self, server: TritonServer) -> None:
        self.server = server
        self.norm = Normalizer(TABLES["triton"])
        self.engine = SLOEngine(SLOS)

    def snapshot(self, ts: float) -> float:
        """Scrape, normalize, update; the replica's signal."""
        try:
            n = self.norm.normalize(self.server.metrics_text())
        except OSError:  # metrics endpoint not (yet) answering: the target is down
            n = None
        self.engine.update(Snapshot(ts, {"triton": n}))
        sig = [o for o in self.engine.autoscaling()
               if o["model"] == "slo_sim" and o["model_version"] == VERSION]
        return sig[0]["signal"] if sig else 0.0

    def concurrency(self) -> float:
        """The replica's observed concurrency (requests; 0 before it has one)."""
        return self.engine.concurrency.get(("slo_sim", VERSION, "triton"), 0.0)

    def capacity(self) -> float:
        """The replica's capacity at SLO (requests; 0 before it has one)."""
        return next((st.capacity for (_, mk), st in self.engine.states.items()
                     if mk.model_version == VERSION), 0.0)


class Load:
    """C closed-loop clients over the live replicas; records (per-replica concurrency,
    latency) for the client-side knee."""

    def __init__(self) -> None:
        self.concurrency = 0
        self.live: list[Replica] = []
        self.stop = threading.Event()
        self.samples: list[tuple[float, float]] = []
        self.stalls: list[float] = []  # recorded latencies over STALL_S (seconds)
        self.record = True  # whether latencies count for the knee
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def set(self, concurrency: int, live: list[Replica]) -> None:
        with self.lock:
            self.live = list(live)
            self.concurrency = concurrency
        while len(self.threads) < concurrency:
            t = threading.Thread(target=self._client, args=(len(self.threads),), daemon=True)
            self.threads.append(t)
            t.start()

    def _client(self, i: int) -> None:
        """One closed-loop client: KServe v2 JSON over a kept-alive HTTP connection per
        replica (light on the shared CPU: no tritonclient tensor objects per request)."""
        conns: dict[str, http.client.HTTPConnection] = {}
        path = f"/v2/models/slo_sim/versions/{VERSION}/infer"
        body = ('{{"inputs": [{{"name": "X", "shape": [2], "datatype": "FP32", '
                '"data": [1.0, 2.0]}}, {{"name": "T0", "shape": [1], "datatype": "INT64", '
                '"data": [{t0}]}}]}}')
        while not self.stop.is_set():
            with self.lock:
                active, live = i < self.concurrency, self.live
            if not active or not live:
                time.sleep(0.05)
                continue
            addr = live[i % len(live)].server.http_address
            conn = conns.get(addr)
            if conn is None:
                host, port = addr.rsplit(":", 1)
                conn = conns[addr] = http.client.HTTPConnection(host, int(port), timeout=10)
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body.format(t0=time.time_ns()),
                             {"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except (OSError, http.client.HTTPException):  # a replica going away
                conns.pop(addr, None)
                continue
            latency = time.perf_counter() - t0
            if ok and self.record:
                per_replica = self.concurrency / len(live)
                with self.lock:
                    self.samples.append((per_replica, latency))
                    if latency > STALL_S:
                        self.stalls.append(latency)

    def levels(self) -> list[tuple[float, float]]:
        """(per-replica concurrency, client p90 latency in seconds) of each level with
        at least 50 recorded requests, by concurrency."""
        by: dict[float, list[float]] = {}
        for c, lat in self.samples:
            by.setdefault(round(c, 3), []).append(lat)
        return sorted((c, float(np.quantile(v, OBJECTIVE))) for c, v in by.items()
                      if len(v) >= 50)

    def knee(self) -> float:
        """Client-side knee: where the p90 latency per per-replica level crosses
        THRESHOLD (linear between the levels either side)."""
        pts = self.levels()
        for (c0, q0), (c1, q1) in itertools.pairwise(pts):
            if q0 <= THRESHOLD < q1:
                return c0 + (THRESHOLD - q0) * (c1 - c0) / (q1 - q0)
        raise AssertionError(f"no crossing of {THRESHOLD} s in {pts}")


class Controller:
    """KEDA/HPA AverageValue target 1 with tolerance, clamp and scale-down stabilisation."""

    def __init__(self) -> None:
        self.replicas = MIN_REPLICAS
        self.recommendations: list[int] = []

    def step(self, total_signal: float) -> int:
        ratio = total_signal / self.replicas
        want = self.replicas if abs(ratio - 1) <= TOLERANCE else math.ceil(total_signal)
        want = max(MIN_REPLICAS, min(MAX_REPLICAS, want))
        self.recommendations = [*self.recommendations, want][-STABILISATION:]
        self.replicas = want if want > self.replicas else max(self.recommendations)
        return self.replicas


@dataclass(frozen=True, slots=True)
class LoopRun:
    """One run of the loop: the (snapshot, C, Σ signal, replicas) rows of its three load
    phases, the load (its client-side samples), and the replicas whose Triton stopped
    (index → exit code and log excerpt)."""

    first: list[tuple[int, int, float, int]]
    step: list[tuple[int, int, float, int]]
    low: list[tuple[int, int, float, int]]
    load: Load
    gone: dict[int, tuple[int | None, str]]


def _disturbed(loop: LoopRun) -> list[str]:
    """How the machine disturbed the run (tests/support/disturbance.py): requests that
    stalled (no level of this loop keeps a request STALL_S: at most 14 clients on one
    replica wait 14 × 8 ms), or a machine too slow for the SLO at the lowest level."""
    problems = []
    if loop.load.stalls:
        problems.append(f"{len(loop.load.stalls)} requests took over {STALL_S:g} s "
                        f"(the longest {max(loop.load.stalls):.2f} s)")
    levels = loop.load.levels()
    if levels and levels[0][1] > THRESHOLD:
        problems.append(f"p90 {levels[0][1] * 1000:.0f} ms at the lowest level "
                        f"({levels[0][0]:g} per replica) is over the {THRESHOLD:g} s threshold")
    return problems


def _run_loop() -> LoopRun:
    servers: list[Replica] = []
    load, ctl = Load(), Controller()
    trace: list[tuple[int, int, float, int]] = []  # (snapshot, C, Σ signal, replicas)
    with ExitStack() as stack:
        def live(n: int) -> list[Replica]:
            while len(servers) < n:  # lazily: a replica is started the first time asked
                s = _start_triton()
                stack.callback(s.stop)
                servers.append(Replica(s))
            return servers[:n]

        def run(c: int, snapshots: int) -> list[tuple[int, int, float, int]]:
            out = []
            load.set(c, live(ctl.replicas))
            for _ in range(snapshots):
                time.sleep(INTERVAL_S)
                ts = time.time()
                reps = live(ctl.replicas)
                total = sum(r.snapshot(ts) for r in reps)  # KEDA's trigger: Σ signal
                replicas = ctl.step(total)
                row = (len(trace), c, total, replicas)
                trace.append(row)
                out.append(row)
                per = " ".join(f"{r.concurrency():.2f}/{r.capacity():.2f}" for r in reps)
                print(f"snapshot {row[0]:3d}  C={c:2d}  Σsignal={total:5.2f}  "
                      f"concurrency/capacity=[{per}]  replicas={replicas}", flush=True)
                load.set(c, live(replicas))
            return out

        try:
            for r in live(1):
                r.snapshot(time.time())  # prime the counters
            first = run(C_LOW, CONVERGE + HOLD)
            step = run(C_HIGH, CONVERGE + HOLD)
            load.record = False  # the knee is measured at the two load levels only
            low = run(3, STABILISATION + 8)
            # which replicas' Tritons stopped during the run (a readout frozen at one
            # value from some snapshot on is a replica that stopped answering)
            gone = {i: (r.server.returncode, crash_excerpt(r.server.log_text()))
                    for i, r in enumerate(servers) if not r.server.running}
        finally:
            load.stop.set()
            for t in load.threads:
                t.join(timeout=15)
    return LoopRun(first, step, low, load, gone)


def test_closed_loop_converges_without_flapping_and_scales_in():
    loop = until_undisturbed(_run_loop, _disturbed, "the closed loop", attempts=2)
    # how many snapshots the loop takes is timing: on a run the machine disturbed in every
    # attempt a failed assertion is inconclusive (a skip naming both), not a failure
    with inconclusive_when_disturbed(_disturbed(loop), "the closed loop"):
        _judge(loop)


def _judge(loop: LoopRun) -> None:
    first, step, low, gone = loop.first, loop.step, loop.low, loop.gone
    knee = loop.load.knee()
    print(f"client-side knee: {knee:.2f} concurrent requests per replica")
    for c, phase in ((C_LOW, first), (C_HIGH, step)):
        targets = _targets(c, knee)
        counts = [r[3] for r in phase]
        target = counts[-1]
        assert target in targets, (c, knee, targets, counts)
        first_hit = counts.index(target)
        assert first_hit < CONVERGE, (c, knee, counts)  # converges in bounded snapshots
        assert counts[-HOLD:] == [target] * HOLD, (c, knee, counts)  # and holds
        # no flapping: after first reaching it, at most one excursion (leave, come back)
        changes = sum(a != b for a, b in itertools.pairwise(counts[first_hit:]))
        assert changes <= 2, (c, knee, counts)
    # the step C_LOW → C_HIGH shows in Σ signal within 2 snapshots
    before = first[-1][2]
    assert max(r[2] for r in step[:2]) > before * 1.3, (before, step[:2])
    # scales in after C drops (the old capacity rule stayed over-provisioned here). Where
    # it settles follows the knee of the moment: on a starved machine a replica left alone
    # burns even at low concurrency, its capacity falls and the loop scales out again —
    # the right answer for that machine, so the count is printed above, not asserted.
    assert min(r[3] for r in low) < step[-1][3], ([r[3] for r in low], gone)
