"""Where an autoscaling policy loses requests in the advisory twin, burst by burst.

    python benchmarks/bench_autoscale_bursts.py [--hours 24] [--time-compression 10]
        [--policy fleetwatch] [--top 10]

Replays the bundled trace tiled to ``--hours`` (as ``bench_autoscale_replay.py`` does)
under one autoscaled policy and prints, per trace minute with TTFT misses, the arrivals, the misses,
the replicas ready at the minute's start and the most arrivals of any of the ten minutes
before it; then the misses by ready replicas at the minute's start, and how many of them
fall in minutes busier than any of the ten before (bursts the recent past did not show).
A cold start of the fitted replica model is one trace minute, so the replicas ready at a
minute's start are the ones that serve its burst.
"""

from __future__ import annotations

import argparse
import bisect
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_autoscale_replay import day  # noqa: E402

from fleetwatch.autoscale.policies import policy  # noqa: E402
from fleetwatch.autoscale.replay import _minutes, run_policy  # noqa: E402

LOOKBACK_MINUTES = 10


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--time-compression", type=float, default=10.0)
    ap.add_argument("--policy", default="fleetwatch",
                    choices=["fleetwatch", "production-stack", "wva", "hpa-utilization"])
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    d = day(args.hours, args.time_compression)
    reqs, model, cfg, mapping = d.requests, d.replica, d.config, d.config.mapping
    run = run_policy(reqs, model, cfg, policy(args.policy), 0)
    per_minute = _minutes(reqs, run, cfg)
    width = mapping.seconds(60.0)
    times = [p.time for p in run.timeline]
    rows = []
    for k, m in enumerate(per_minute):
        i = bisect.bisect_left(times, k * width)
        ready = run.timeline[i].ready if i < len(times) else -1
        before = max((per_minute[j].requests for j in range(max(0, k - LOOKBACK_MINUTES), k)),
                     default=0)
        rows.append((m.requests - m.good, k, m.requests, ready, before))
    total = sum(r[0] for r in rows)
    print(f"{args.policy}: {total} of {len(reqs)} requests missed TTFT "
          f"({1 - total / len(reqs):.2%} attainment), compression {args.time_compression:g}")
    print("missed  minute  arrivals  ready at start  most arrivals in the 10 minutes before")
    for miss, k, n, ready, before in sorted(rows, reverse=True)[:args.top]:
        print(f"{miss:6d}  {k:6d}  {n:8d}  {ready:14d}  {before:6d}")
    by_ready = Counter[int]()
    for miss, _, _, ready, _ in rows:
        by_ready[ready] += miss
    print("misses by ready replicas at the minute's start:",
          ", ".join(f"{r}: {n}" for r, n in sorted(by_ready.items()) if n))
    larger = sum(r[0] for r in rows if r[2] > r[4])
    print(f"misses in minutes busier than any of the {LOOKBACK_MINUTES} before: {larger} "
          f"({larger / total:.0%})" if total else "no misses")


if __name__ == "__main__":
    main()
