"""Benchmark of the state snapshot: what writing and restoring it costs for a big engine.

    python benchmarks/bench_recover.py [--models N] [--updates N]

The engine of ``benchmarks/bench_slo.py`` (``--models`` vLLM models × 3 SLOs × 8 bands,
the full window catalog) after ``--updates`` updates; then, as this thread's CPU time:
taking the records (:meth:`~fleetwatch.slo.engine.SLOEngine.snapshot`, in the engine's
thread), encoding them (the JSON the sidecar writes), decoding them, and the first update
of a new engine that makes (and restores) every state, against the same update of an
engine that starts cold. Prints the snapshot's size too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_slo import SLOS, Fleet  # noqa: E402

from fleetwatch.exporters.normalize import Normalizer  # noqa: E402
from fleetwatch.exporters.snapshot import Snapshot  # noqa: E402
from fleetwatch.exporters.sources import TABLES  # noqa: E402
from fleetwatch.slo.engine import SLOEngine  # noqa: E402
from fleetwatch.slo.recover.snapshot import decode, encode  # noqa: E402
from fleetwatch.slo.spec import parse_slo_file  # noqa: E402


def _cpu(fn):  # type: ignore[no-untyped-def]
    t0 = time.thread_time()
    out = fn()
    return out, time.thread_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--updates", type=int, default=60)
    args = ap.parse_args()
    fleet, norm = Fleet(args.models), Normalizer(TABLES["vllm"])
    slos = parse_slo_file(SLOS)
    engine = SLOEngine(slos)
    t = 1_700_000_000.0
    for i in range(args.updates + 1):
        engine.update(Snapshot(t + 5.0 * i, {"vllm": norm.normalize(fleet.exposition())}))
    rec, took = _cpu(engine.snapshot)
    body, enc = _cpu(lambda: encode(rec))
    back, dec = _cpu(lambda: decode(body))
    print(f"{args.models} models x 3 SLOs, {args.updates} updates: {len(rec.states)} states")
    print(f"  snapshot(): {took * 1e3:.0f} ms CPU; encode {enc * 1e3:.0f} ms, "
          f"{len(body) / 2**20:.1f} MiB; decode {dec * 1e3:.0f} ms")
    later = t + 5.0 * (args.updates + 1)
    first = [norm.normalize(fleet.exposition()) for _ in range(2)]
    for label, restore in (("cold", False), ("restored", True)):
        new = SLOEngine(slos)
        if restore:
            new.restore(back)
        new.update(Snapshot(later, {"vllm": first[0]}))  # primes the counters
        _none, cpu = _cpu(lambda n=new: n.update(Snapshot(later + 5.0, {"vllm": first[1]})))
        print(f"  first booking update, {label}: {cpu * 1e3:.0f} ms CPU")


if __name__ == "__main__":
    main()
