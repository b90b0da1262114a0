"""Benchmark of ``fleetwatch autoscale replay``: how long the advisory twin takes on a
day of trace (the issue's bound: under a minute), per policy and in total.

    python benchmarks/bench_autoscale_replay.py [--hours 24] [--time-compression 10]

The bundled Azure code trace (57 minutes) is tiled end to end until it covers
``--hours`` (each copy shifted by the trace's span plus one second), mapped as the
command's defaults do, and replayed under every policy with the replica model fitted from
the committed real-vLLM sweep. Prints the fit's time, the static pool's sizing (its
bisection runs several simulations), each policy's simulation time, the total, and each
policy's result row. Wall-clock figures on a shared machine: compare trees in the same
run and report ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fleetwatch.autoscale.policies import POLICIES, policy  # noqa: E402
from fleetwatch.autoscale.replay import (  # noqa: E402
    ReplayConfig,
    run_policy,
    size_static,
    summarize,
)
from fleetwatch.autoscale.replica import ReplicaModel  # noqa: E402
from fleetwatch.autoscale.trace import (  # noqa: E402
    Request,
    TraceMapping,
    map_trace,
    read_azure_csv,
)
from fleetwatch.commands.autoscale import capture_paths, fit  # noqa: E402
from fleetwatch.slo.spec import load_slo_file  # noqa: E402

TRACE = ROOT / "tests" / "data" / "workloads" / "AzureLLMInferenceTrace_code.csv"
SWEEP = ROOT / "tests" / "data" / "vllm-sweep" / "captures"
SLOS = ROOT / "src" / "fleetwatch" / "demo" / "slos.yaml"


def tiled(hours: float) -> list[Request]:
    """The trace repeated until it covers ``hours``."""
    with TRACE.open(encoding="utf-8") as f:
        base = read_azure_csv(f)
    span = base[-1].arrival + 1.0
    out: list[Request] = []
    k = 0
    while k * span < hours * 3600:
        out.extend(Request(r.arrival + k * span, r.input_tokens, r.output_tokens)
                   for r in base if r.arrival + k * span < hours * 3600)
        k += 1
    return out


class Day(NamedTuple):
    """What both autoscale benchmarks replay: the mapped requests, the fitted replica model
    and the replay's configuration."""

    requests: list[Request]
    replica: ReplicaModel
    config: ReplayConfig


def day(hours: float, compression: float) -> Day:
    """``hours`` of the tiled trace mapped at ``compression`` (the CLI's default token
    mapping), the replica model fitted from the real-vLLM sweep and the replay's
    configuration (the demo's TTFT SLO, ITL 50 ms): what both autoscale benchmarks replay."""
    model, spec, capacity, _ = fit(load_slo_file(SLOS), None, capture_paths([str(SWEEP)]),
                                   None, 60.0)
    mapping = TraceMapping(time_compression=compression, token_scale=0.025,
                           output_token_scale=1.0, max_input_tokens=512,
                           max_output_tokens=256)
    assert spec.sli.latency is not None
    cfg = ReplayConfig(mapping=mapping, ttft_seconds=spec.sli.latency.threshold_seconds,
                       itl_seconds=0.05, objective=spec.objective, capacity=capacity,
                       duration_seconds=hours * 3600)
    return Day(map_trace(tiled(hours), mapping), model, cfg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--time-compression", type=float, default=10.0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    d = day(args.hours, args.time_compression)
    reqs, model, cfg = d.requests, d.replica, d.config
    t_fit = time.perf_counter() - t0
    print(f"{len(reqs)} requests over {args.hours:g} h of trace, compression "
          f"{args.time_compression:g}; fit {t_fit:.2f} s")
    t1 = time.perf_counter()
    static = policy("static")
    size = size_static(reqs, model, cfg, static)
    print(f"static pool sized for the peak: {size} replicas in {time.perf_counter() - t1:.2f} s")
    total = time.perf_counter() - t0
    static_seconds = run_policy(reqs, model, cfg, static, size).replica_seconds
    for p in POLICIES:
        t = time.perf_counter()
        run = run_policy(reqs, model, cfg, p, size)
        dt = time.perf_counter() - t
        total += dt
        r = summarize(reqs, run, cfg, p, static_seconds)
        print(f"{p.name:17} {dt:6.2f} s  attainment {r.ttft_attainment:.4f}  goodput "
              f"{r.goodput:.4f}  replica-s {r.replica_seconds:9.0f}  vs static "
              f"{r.cost_ratio:.2f}  events {r.scale_events:4d}  reversals {r.reversals:3d}  "
              f"dropped {r.dropped}  peak {r.peak_replicas}")
    print(f"total (fit, sizing, every policy): {total:.2f} s")


if __name__ == "__main__":
    main()
