"""Closed autoscaling loop on real Triton replicas: signal → replicas → load per replica →
signal.

Up to 4 ``tritonserver`` processes (:class:`fleetwatch.demo.triton.TritonServer`), each
serving ``slo_sim`` (one instance, 8 ms service time: latency ≈ concurrency × 8 ms),
started lazily when the controller first asks for them and reused across the two load
levels. One sidecar per replica, driven in-process for determinism: every snapshot
scrapes each live replica's ``/metrics``, normalizes it with its own normalizer and
feeds its own :class:`~fleetwatch.slo.engine.SLOEngine` (no ``fleetwatch serve``
processes, so snapshots — not wall-clock time — are the unit the assertions count). A
load generator holds a total concurrency C of closed-loop clients spread round-robin
over the live replicas. The controller applies KEDA's rule for an ``AverageValue``
target of 1: desired = ceil(Σ signal), HPA's 10 % tolerance (no change while
|Σ signal / replicas − 1| ≤ 0.1), clamped to [1, 4], scale-up at once, scale-down to the
highest recommendation of the last ``STABILISATION`` snapshots.

The knee is measured from the client side: the highest per-replica concurrency whose
client latencies meet the objective (p90 ≤ 40 ms), interpolated between the observed
levels. Asserted: from 1 replica the loop converges to ceil(C / knee) within
``CONVERGE`` snapshots at C = 7 and after a step to C = 13; it does not flap (after
converging the replica count never changes); a load step shows in Σ signal within 2
snapshots; after C drops to 3 it scales in. The log prints the replica count per
snapshot (``pytest -s``).

With the old capacity rule (capacity = the highest trusted band burning below 1) the
loop fails (checked once, 2026-12-01, by swapping the engine's ``update_capacity`` for the
old walk; knee 4.05): at C = 13 it settles at 3 replicas, under-provisioned (4.3 per
replica, above the knee: the new replicas' capacity is the band they have seen, 6, so
Σ signal reads 2.8), and after C drops to 3 it stays at 3 replicas, over-provisioned
(each replica's capacity is its own band 1, so Σ signal stays 2.1). Measured with the
new rule: 2 replicas at C = 7 from snapshot 1, 4 at C = 13 by snapshot 35 (after one
4 → 3 → 4 while the new replicas learned their burn), 1 at C = 3 after the 5-snapshot
stabilisation; about 80 s in all with 4 replicas started lazily.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from contextlib import ExitStack

import numpy as np
import pytest

from fleetwatch.demo.triton import TritonServer
from fleetwatch.exporters.normalize import Normalizer
from fleetwatch.exporters.snapshot import Snapshot
from fleetwatch.exporters.sources import TABLES
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.spec import parse_slo_file

pytestmark = pytest.mark.triton

THRESHOLD = 0.04  # seconds: a bucket boundary of slo_sim's histogram
OBJECTIVE = 0.9
ENVELOPE = 6
BANDS = [1, 2, 3, 6, 12]
SLOS = parse_slo_file({
    # period 10m, long 30s: burn threshold 0.05 × 600 / 30 = 1
    "windows": [{"long": "30s", "short": "5s", "budget_consumed": 0.05}],
    "capacity": {"window": "1m", "min_events": 60, "hysteresis_updates": 2},
    "slos": [{"name": "sim", "selector": {"models": ["slo_sim"]},
              "sli": {"latency": {"metric": "request", "threshold_seconds": THRESHOLD}},
              "objectives": [{"target": OBJECTIVE}], "timeWindow": [{"duration": "10m"}],
              "concurrency": {"envelope": ENVELOPE, "bands": BANDS}}],
})
VERSION = "1"  # slo_sim version 1: 8 ms service time (2 is the slow "regression")
MIN_REPLICAS, MAX_REPLICAS = 1, 4
TOLERANCE = 0.1
STABILISATION = 5  # snapshots
INTERVAL_S = 1.0
CONVERGE = 20  # snapshots allowed to converge
HOLD = 6  # snapshots that must follow without a change


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


class Load:
    """C closed-loop clients over the live replicas; records (per-replica concurrency,
    latency) for the client-side knee."""

    def __init__(self) -> None:
        self.concurrency = 0
        self.live: list[Replica] = []
        self.stop = threading.Event()
        self.samples: list[tuple[float, float]] = []
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
        import tritonclient.http as http
        from tritonclient.utils import np_to_triton_dtype

        clients: dict[str, object] = {}
        n = 0
        while not self.stop.is_set():
            with self.lock:
                active, live = i < self.concurrency, self.live
            if not active or not live:
                time.sleep(0.05)
                continue
            replica = live[i % len(live)]
            addr = replica.server.http_address
            client = clients.get(addr)
            if client is None:
                client = clients[addr] = http.InferenceServerClient(addr, network_timeout=10)
            inputs = []
            for name, arr in (("X", np.array([n % 7, 1.0], dtype=np.float32)),
                              ("T0", np.array([time.time_ns()], dtype=np.int64))):
                x = http.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
                x.set_data_from_numpy(arr)
                inputs.append(x)
            n += 1
            t0 = time.perf_counter()
            try:
                client.infer("slo_sim", inputs,  # type: ignore[attr-defined]
                             model_version=VERSION)
            except Exception:  # a replica going away mid-request
                continue
            per_replica = self.concurrency / len(live)
            with self.lock:
                self.samples.append((per_replica, time.perf_counter() - t0))

    def knee(self) -> float:
        """Client-side knee: where the p90 latency per per-replica level crosses
        THRESHOLD (linear between the levels either side)."""
        by: dict[float, list[float]] = {}
        for c, lat in self.samples:
            by.setdefault(round(c, 3), []).append(lat)
        pts = sorted((c, float(np.quantile(v, OBJECTIVE))) for c, v in by.items()
                     if len(v) >= 50)
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


def test_closed_loop_converges_without_flapping_and_scales_in():
    servers: list[Replica] = []
    load, ctl = Load(), Controller()
    trace: list[tuple[int, int, float, int]] = []  # (snapshot, C, Σ signal, replicas)
    with ExitStack() as stack:
        def live(n: int) -> list[Replica]:
            while len(servers) < n:  # lazily: a replica is started the first time asked
                s = stack.enter_context(TritonServer(models=["slo_sim"]))
                servers.append(Replica(s))
            return servers[:n]

        def run(c: int, snapshots: int) -> list[tuple[int, int, float, int]]:
            out = []
            load.set(c, live(ctl.replicas))
            for _ in range(snapshots):
                time.sleep(INTERVAL_S)
                ts = time.time()
                total = sum(r.snapshot(ts) for r in live(ctl.replicas))
                replicas = ctl.step(total)
                row = (len(trace), c, total, replicas)
                trace.append(row)
                out.append(row)
                print(f"snapshot {row[0]:3d}  C={c:2d}  Σsignal={total:5.2f}  "
                      f"replicas={replicas}", flush=True)
                load.set(c, live(replicas))
            return out

        try:
            for r in live(1):
                r.snapshot(time.time())  # prime the counters
            first = run(7, CONVERGE + HOLD)
            step = run(13, CONVERGE + HOLD)
            low = run(3, STABILISATION + 8)
        finally:
            load.stop.set()
            for t in load.threads:
                t.join(timeout=15)
    knee = load.knee()
    print(f"client-side knee: {knee:.2f} concurrent requests per replica")
    for c, phase in ((7, first), (13, step)):
        target = math.ceil(c / knee)
        counts = [r[3] for r in phase]
        tail = counts[-HOLD:]
        assert tail == [target] * HOLD, (c, knee, counts)  # converged, and holds (no flap)
        assert counts.index(target) < CONVERGE, (c, counts)
    # the step 7 → 13 shows in Σ signal within 2 snapshots
    before = first[-1][2]
    assert max(r[2] for r in step[:2]) > before * 1.3, (before, step[:2])
    # scales in after C drops
    assert low[-1][3] < step[-1][3], [r[3] for r in low]
