"""Benchmark of the SLO engine: update time and memory for 1000 models × 3 SLOs × 8 bands.

    python benchmarks/bench_slo.py [--updates N]   (also run by ``./dev bench``)

Each update is one sidecar snapshot of ``--models`` (default 1000) vLLM models (TTFT
histogram, requests by
finish reason, running gauge, queue histogram, KV usage), normalized by the real mapping;
three SLOs (TTFT latency, availability, request-time mean time slice) with 8 concurrency
bands each, over the full default window catalog (5m … 3d, 28-day period). Concurrency
walks through all bands so every (SLO, model, band) row is live, and every model has
events in every update (every state changes). Prints the median, p99 and max update
time as this thread's CPU time (the figure that does not depend on what else the shared
machine runs) and wall-clock, the steady state after the row store has grown, the
cyclic garbage collector's time inside the updates and outside them (building the
snapshots: a collection the update's allocations would trigger may run there instead),
and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from fleetwatch.exporters.normalize import Normalizer  # noqa: E402
from fleetwatch.exporters.snapshot import Snapshot  # noqa: E402
from fleetwatch.exporters.sources import TABLES  # noqa: E402
from fleetwatch.slo.engine import SLOEngine  # noqa: E402
from fleetwatch.slo.spec import parse_slo_file  # noqa: E402

TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
        7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
BANDS = [1, 2, 4, 8, 16, 32, 64, 128]
SLOS = {"slos": [
    {"name": "ttft", "sli": {"latency": {"metric": "ttft", "threshold_seconds": 0.5}},
     "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "28d"}],
     "concurrency": {"envelope": 32, "bands": BANDS}},
    {"name": "availability", "sli": {"availability": {}}, "objectives": [{"target": 0.999}],
     "timeWindow": [{"duration": "28d"}], "concurrency": {"envelope": 32, "bands": BANDS}},
    {"name": "request-mean", "sli": {"timeslice": {"metric": "request", "statistic": "mean",
                                                    "threshold_seconds": 2.0}},
     "objectives": [{"target": 0.99}], "timeWindow": [{"duration": "28d"}],
     "budgetingMethod": "Timeslices", "concurrency": {"envelope": 32, "bands": BANDS}},
]}


class Fleet:
    """Cumulative counters of ``models`` simulated vLLM models (random TTFT; with
    ``knee_every`` = k, every k-th model's TTFT grows with its concurrency instead, so its
    p99 crosses the TTFT SLO's 0.5 s between bands 8 and 16)."""

    def __init__(self, models: int = 100, knee_every: int = 0) -> None:
        self.rng = random.Random(7)
        self.knee_every = knee_every
        self.models = [f"llm-{i:03d}" for i in range(models)]
        self.cum = {m: [0.0] * (len(TTFT) + 6) for m in self.models}
        self.step_no = 0

    def exposition(self) -> str:
        self.step_no += 1
        lines = []
        for i, m in enumerate(self.models):
            c = self.cum[m]
            n = self.rng.randint(5, 50)
            band = (self.step_no + i) % len(BANDS)
            running = BANDS[band] * 0.9
            cum_b = 0
            knee = 0.05 * 2.0 ** band if self.knee_every and i % self.knee_every == 0 else 0.0
            for k in range(len(TTFT)):
                if knee:  # a share ≤ le growing to all requests at le = knee
                    c[k] += n if TTFT[k] >= knee else round(n * 0.98 * TTFT[k] / knee)
                    continue
                cum_b += self.rng.randint(0, n // 4)
                c[k] += min(cum_b, n)
            c[-6] += n
            c[-5] += n * 0.3
            c[-4] += n - 1
            c[-3] += 1
            c[-2] += n * 1.5
            lab = f'model_name="{m}",engine="0"'
            lines.append(f"vllm:num_requests_running{{{lab}}} {running}")
            lines.append(f"vllm:kv_cache_usage_perc{{{lab}}} {self.rng.random()}")
            for k, b in enumerate(TTFT):
                lines.append(f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{b}"}} {c[k]}')
            lines.append(f'vllm:time_to_first_token_seconds_bucket{{{lab},le="+Inf"}} {c[-6]}')
            lines.append(f"vllm:time_to_first_token_seconds_count{{{lab}}} {c[-6]}")
            lines.append(f"vllm:time_to_first_token_seconds_sum{{{lab}}} {c[-5]}")
            lines.append(f'vllm:request_success_total{{{lab},finished_reason="stop"}} {c[-4]}')
            lines.append(f'vllm:request_success_total{{{lab},finished_reason="abort"}} {c[-3]}')
            lines.append(f"vllm:e2e_request_latency_seconds_count{{{lab}}} {c[-6]}")
            lines.append(f"vllm:e2e_request_latency_seconds_sum{{{lab}}} {c[-2]}")
            lines.append(f'vllm:e2e_request_latency_seconds_bucket{{{lab},le="+Inf"}} {c[-6]}')
        return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--updates", type=int, default=300)
    ap.add_argument("--models", type=int, default=1000)
    args = ap.parse_args()
    fleet = Fleet(args.models)
    norm = Normalizer(TABLES["vllm"])
    engine = SLOEngine(parse_slo_file(SLOS))
    times: list[float] = []  # wall-clock seconds
    cpu: list[float] = []  # CPU seconds of this thread
    gc_cpu = {True: 0.0, False: 0.0}  # in an update → CPU seconds of cyclic GC
    gc_runs = {True: 0, False: 0}
    inside = [False]
    started = [0.0]

    def on_gc(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
        else:
            gc_cpu[inside[0]] += time.thread_time() - started[0]
            gc_runs[inside[0]] += 1

    gc.callbacks.append(on_gc)
    for i in range(args.updates + 1):  # snapshots are built one at a time, not timed
        snap = Snapshot(1_700_000_000.0 + 5.0 * i, {"vllm": norm.normalize(
            fleet.exposition())})
        inside[0] = True
        t0, c0 = time.perf_counter(), time.thread_time()
        engine.update(snap)
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        inside[0] = False
    gc.callbacks.remove(on_gc)
    times, cpu = times[1:], cpu[1:]
    rows = len(engine.windows.rows)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"SLO engine: {args.models} models x 3 SLOs x {len(BANDS)} bands (+ overall), "
          f"{len(engine.window_lengths)} windows "
          f"({', '.join(f'{w:g}s' for w in engine.window_lengths)}), {args.updates} updates")
    print(f"  live (SLO, model, band) rows: {rows}; window counts: "
          f"{engine.windows.nbytes() / 1e6:.1f} MB")
    for what, xs in (("CPU time", cpu), ("wall-clock", times)):
        print(f"  update {what}: median {statistics.median(xs) * 1e3:.1f} ms, "
              f"p99 {sorted(xs)[int(len(xs) * 0.99) - 1] * 1e3:.1f} ms, "
              f"max {max(xs) * 1e3:.1f} ms")
    steady = cpu[len(BANDS) * 4:]  # after every band has its rows (the store has grown)
    print(f"  steady state (updates {len(BANDS) * 4 + 1}…): CPU median "
          f"{statistics.median(steady) * 1e3:.1f} ms, p99 "
          f"{sorted(steady)[int(len(steady) * 0.99) - 1] * 1e3:.1f} ms")
    n = args.updates + 1
    print(f"  cyclic GC per update: {gc_cpu[True] / n * 1e3:.1f} ms inside the update "
          f"({gc_runs[True]} collections), {gc_cpu[False] / n * 1e3:.1f} ms outside it "
          f"({gc_runs[False]} collections, while building the snapshots)")
    print(f"  peak RSS of the whole process (engine, mapping, one snapshot): {rss:.0f} MB")
    serve_while_updating(engine, fleet, norm, args.updates // 3)


def serve_while_updating(engine: SLOEngine, fleet: Fleet, norm: Normalizer,
                         updates: int) -> None:
    """What a ``/metrics`` request costs while updates run in the sidecar's worker thread
    (:class:`fleetwatch.sidecar.slo_worker.EngineWorker`): the handler's read of the
    rendered body, timed every 10 ms on this (the event loop's) thread. The GIL is shared,
    so the figure includes waiting for the worker to yield it (switch interval 5 ms)."""
    import threading

    from fleetwatch.sidecar.slo_worker import EngineWorker

    snaps = [Snapshot(1_800_000_000.0 + 5.0 * i, {"vllm": norm.normalize(fleet.exposition())})
             for i in range(updates)]
    worker = EngineWorker(engine)
    done = threading.Event()
    lat: list[float] = []

    def feed() -> None:
        for i, snap in enumerate(snaps):
            worker.submit(snap)
            worker.wait(i + 1, timeout=30)
        done.set()

    t = threading.Thread(target=feed)
    t.start()
    while not done.is_set():
        t0 = time.perf_counter()
        body = worker.metrics_body  # what the /metrics handler reads
        lat.append(time.perf_counter() - t0)
        assert body
        time.sleep(0.01)
    t.join()
    worker.stop()
    lat.sort()
    print(f"  /metrics read during {updates} worker updates ({len(lat)} reads): median "
          f"{statistics.median(lat) * 1e3:.3f} ms, p99 {lat[int(len(lat) * 0.99) - 1] * 1e3:.3f}"
          f" ms, max {lat[-1] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
