"""What the live experiment's segment allows: the twin's simulator on schedules that know
the arrivals ahead, beside the autoscaled policies and static pools of every size.

    python benchmarks/autoscale/bound.py [--segment 0:900] [--cold-start 21]

Everything is the twin's (`benchmarks.autoscale.twin`): the same mapped requests, SLO,
HPA behaviour, windows and replica model fitted from the real-vLLM sweep; ``--cold-start``
is a replica's cold start in production seconds (the live run's measured median by
default). A **clairvoyant** schedule asks for ``k`` replicas whenever a request arrives
within the next ``cold start + 10 s`` of replay, else one, and scales in only after the
HPA's scale-down stabilization window, as every autoscaled policy must: it starts each
replica exactly in time for the traffic, which no causal policy can. A **floor** keeps
``k`` replicas from the first request until the segment ends, then scales in after the
window. Replica-seconds count over the live run's length (the segment, the scale-down
window, the headroom window and 10 s), as in `run.Experiment.run_s`.

The point: the issue's target (≥ 99 % TTFT attainment at ≤ 0.65 of the static pool's
replica-seconds) against what prescience would reach on the same segment.
"""

from __future__ import annotations

import argparse
import bisect
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.autoscale import run, twin

from fleetwatch.autoscale.fleet import FleetRun, simulate
from fleetwatch.autoscale.policies import ReplicaSample
from fleetwatch.autoscale.policies import policy as get_policy
from fleetwatch.autoscale.replay import ReplayConfig, fleet_config, run_policy, summarize
from fleetwatch.autoscale.replica import ReplicaModel
from fleetwatch.autoscale.trace import Request
from fleetwatch.slo.spec import AutoscalingSettings

Controller = Callable[[float, Sequence[ReplicaSample], int, int], int]


def clairvoyant(arrivals: Sequence[float], k: int, lead_s: float, window_s: float
                ) -> Controller:
    """``k`` replicas while a request arrives within ``lead_s`` (replay seconds), else
    one; scale-in after ``window_s`` (the stabilization window's rule: the highest
    count asked within it)."""
    asked: list[tuple[float, int]] = []

    def decide(now: float, samples: Sequence[ReplicaSample], current: int,
               ready: int) -> int:
        i = bisect.bisect_left(arrivals, now)
        want = k if i < len(arrivals) and arrivals[i] < now + lead_s else 1
        asked.append((now, want))
        return max(n for t, n in asked if t > now - window_s)
    return decide


def floor(arrivals: Sequence[float], k: int, window_s: float) -> Controller:
    """``k`` replicas until ``window_s`` after the last arrival, then one."""
    last = arrivals[-1] if arrivals else 0.0

    def decide(now: float, samples: Sequence[ReplicaSample], current: int,
               ready: int) -> int:
        return k if now < last + window_s else 1
    return decide


def main() -> None:
    """Print the table (markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segment", default="0:900", help="START:DURATION, trace seconds")
    parser.add_argument("--cold-start", type=float, default=21.0,
                        help="a replica's cold start, production seconds")
    parser.add_argument("--max-replicas", type=int, default=4)
    args = parser.parse_args()
    start, duration = (float(x) for x in args.segment.split(":"))
    mapping = run.MAPPING
    requests: tuple[Request, ...] = tuple(run.load_segment(start, duration, mapping))
    exp = run.Experiment(requests, mapping, duration, args.max_replicas, args.max_replicas)
    fitted, capacity = twin.fitted_replica()
    model: ReplicaModel = replace(fitted, cold_start_seconds=args.cold_start)
    cfg = ReplayConfig(mapping=mapping, ttft_seconds=run.TTFT_SLO_S,
                       itl_seconds=run.ITL_SLO_S, objective=run.OBJECTIVE, capacity=capacity,
                       max_replicas=args.max_replicas, behavior=exp.behavior,
                       static_replicas=args.max_replicas,
                       duration_seconds=exp.run_s * mapping.time_compression,
                       targets=AutoscalingSettings(headroom_window=exp.headroom_window_s))
    arrivals = [r.arrival for r in requests]
    window = mapping.seconds(exp.scale_down_window_s)
    lead = mapping.seconds(args.cold_start) + 10.0
    reference = get_policy("fleetwatch")

    def schedule(k: int, decide: Controller) -> FleetRun:
        return simulate(requests, model, fleet_config(cfg, model, k), decide, cfg.horizon)

    rows: list[tuple[str, FleetRun]] = [
        (f"static {k}", schedule(k, lambda *_, k=k: k)) for k in range(1, args.max_replicas + 1)]
    static_rs = rows[-1][1].replica_seconds
    rows += [(name, run_policy(requests, model, cfg, get_policy(name), args.max_replicas))
             for name in ("fleetwatch", "production-stack", "wva")]
    rows += [(f"clairvoyant {k}", schedule(1, clairvoyant(arrivals, k, lead, window)))
             for k in range(2, args.max_replicas + 1)]
    rows += [(f"floor {k}", schedule(k, floor(arrivals, k, window)))
             for k in range(2, args.max_replicas + 1)]
    print(f"segment {args.segment} ({len(requests)} requests), {mapping.time_compression:g}× "
          f"arrivals, cold start {args.cold_start:g} s, run {exp.run_s:.0f} s of replay\n")
    print("| schedule | TTFT attainment | replica-s | ÷ static |\n|---|---|---|---|")
    for name, fleet in rows:
        s = summarize(requests, fleet, cfg, reference, static_rs)
        print(f"| {name} | {s.ttft_attainment:.1%} | {fleet.replica_seconds:.0f} | "
              f"{fleet.replica_seconds / static_rs:.2f} |")


if __name__ == "__main__":
    main()
