"""The advisory twin on the live experiment's own segment, for the live-vs-twin check.

``fleetwatch autoscale replay`` (`fleetwatch.autoscale.replay`) is run on exactly what one
live policy run had: the same mapped requests (replay seconds and tokens), the same
SLO (`run.TTFT_SLO_S`, `run.ITL_SLO_S`, `run.OBJECTIVE`), fleet bounds, HPA behaviour
(the experiment's scale-down stabilization window), sidecar headroom window and static
pool size, the live replicas' mean cold start (from a replica's start to its joining
HAProxy), and replica-seconds counted over the live run's length. The replica model is
the one the twin's CLI fits from the committed real-vLLM sweep (`tests/data/vllm-sweep`),
which ``llm_sim`` is calibrated to; its capacity at SLO is the one the SLO engine learns
from that sweep.

The issue's bounds for "the twin agrees with the live run" (`AGREEMENT`): per policy, TTFT
attainment within ±2 points and replica-seconds within ±10 %. The twin is deterministic;
the live replicas run on a real machine, which a busy machine slows.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from fleetwatch.autoscale.policies import policy as get_policy
from fleetwatch.autoscale.replay import PolicyResult, ReplayConfig, replay_policies
from fleetwatch.autoscale.replica import ReplicaModel
from fleetwatch.commands.autoscale import capture_paths, fit
from fleetwatch.slo.spec import AutoscalingSettings, load_slo_file

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "tests" / "data" / "vllm-sweep" / "captures"
SLOS = ROOT / "src" / "fleetwatch" / "demo" / "slos.yaml"

if TYPE_CHECKING:  # run imports this module
    from benchmarks.autoscale.run import Experiment


class Bounds(NamedTuple):
    """How far the twin may be from the live run: attainment in points (0–100) and
    replica-seconds as a relative difference (0.1 = ±10 %)."""

    attainment_points: float
    replica_seconds_rel: float


#: The issue's validation bounds for the twin against the live run.
AGREEMENT = Bounds(attainment_points=2.0, replica_seconds_rel=0.10)


@dataclass(frozen=True, slots=True)
class LiveRun:
    """What the twin needs of one live policy run: the policy, the run's length and its
    replicas' mean cold start (replay seconds), its attainment (0–1) and
    replica-seconds."""

    policy: str
    duration_s: float
    cold_start_s: float
    ttft_attainment: float
    replica_seconds: float


@dataclass(frozen=True, slots=True)
class Comparison:
    """One policy, live beside twin: TTFT attainment (0–1) and replica-seconds (replay
    seconds) of each."""

    policy: str
    live_attainment: float
    twin_attainment: float
    live_replica_seconds: float
    twin_replica_seconds: float

    @property
    def attainment_points(self) -> float:
        """Twin minus live attainment, in points."""
        return 100.0 * (self.twin_attainment - self.live_attainment)

    @property
    def replica_seconds_rel(self) -> float:
        """Twin ÷ live replica-seconds − 1."""
        return self.twin_replica_seconds / self.live_replica_seconds - 1.0

    def within(self, bounds: Bounds) -> bool:
        """Whether the twin is within ``bounds`` of the live run."""
        return (abs(self.attainment_points) <= bounds.attainment_points
                and abs(self.replica_seconds_rel) <= bounds.replica_seconds_rel)


@functools.cache
def fitted_replica() -> tuple[ReplicaModel, float]:
    """The replica model fitted from the real-vLLM sweep (cold start 0: each comparison
    sets the live one) and the capacity at SLO the SLO engine learns from it."""
    model, _, capacity, _ = fit(load_slo_file(SLOS), None, capture_paths([str(SWEEP)]),
                                None, 0.0)
    return model, capacity


class SLO(NamedTuple):
    """The SLO both are scored on: TTFT and mean-ITL thresholds (seconds), objective (0–1)."""

    ttft_s: float
    itl_s: float
    objective: float


def compare(exp: Experiment, live: LiveRun, slo: SLO) -> Comparison:
    """The twin of ``live`` on ``exp`` (see the module docstring)."""
    fitted, capacity = fitted_replica()
    c = exp.mapping.time_compression
    model = replace(fitted, cold_start_seconds=live.cold_start_s * c)
    cfg = ReplayConfig(mapping=exp.mapping, ttft_seconds=slo.ttft_s, itl_seconds=slo.itl_s,
                       objective=slo.objective, capacity=capacity, min_replicas=1,
                       max_replicas=exp.max_replicas, behavior=exp.behavior,
                       static_replicas=exp.static_replicas, duration_seconds=live.duration_s * c,
                       targets=AutoscalingSettings(headroom_window=exp.headroom_window_s))
    result: PolicyResult = replay_policies(
        exp.requests, model, cfg, [get_policy(live.policy)], get_policy("static")).results[0]
    return Comparison(live.policy, live.ttft_attainment, result.ttft_attainment,
                      live.replica_seconds, result.replica_seconds)


def row(c: Comparison) -> dict[str, Any]:
    """One comparison as the result document holds it (its fields, the differences and
    whether they are within `AGREEMENT`)."""
    return {**asdict(c), "attainment_points": c.attainment_points,
            "replica_seconds_rel": c.replica_seconds_rel, "within": c.within(AGREEMENT)}


def table(rows: list[dict[str, Any]]) -> str:
    """`row`s as a Markdown table."""
    head = ("| policy | live attainment | twin attainment | Δ points | live replica-s | "
            "twin replica-s | Δ | within bounds |\n|---|---|---|---|---|---|---|---|\n")
    return head + "\n".join(
        f"| {t['policy']} | {t['live_attainment']:.1%} | {t['twin_attainment']:.1%} | "
        f"{t['attainment_points']:+.1f} | {t['live_replica_seconds']:.0f} | "
        f"{t['twin_replica_seconds']:.0f} | {t['replica_seconds_rel']:+.0%} | "
        f"{'yes' if t['within'] else 'no'} |" for t in rows) + "\n"
