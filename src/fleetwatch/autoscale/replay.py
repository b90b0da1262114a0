"""The advisory twin: replay one trace through the simulated fleet under each policy and
say what each autoscaler would have done and cost ("what would each autoscaler have done
with yesterday's traffic").

Every policy decides through the same code the live experiment uses: its metric
(:mod:`fleetwatch.autoscale.policies`) read by Kubernetes' HPA
(:mod:`fleetwatch.autoscale.hpa`) with its durations divided by the time compression.
The static pool is sized for the peak: the smallest fixed count whose TTFT attainment
meets the objective in every minute of the trace that has requests (found by bisection;
``static_replicas`` overrides it). The autoscaled policies start from the count the first
trace minute's offered load needs at the capacity (its requests' service times at the
batch limit ÷ the minute ÷ capacity, at least ``min_replicas``), as a fleet that has been
running would, rather than from one replica into the trace's first burst.

Per policy (:class:`PolicyResult`): TTFT SLO attainment (requests with TTFT ≤ threshold
÷ requests, dropped ones counted as missed), joint goodput (TTFT and mean ITL within
their thresholds), replica-seconds (replay clock) and their ratio to the static pool's,
scale events, *reversals* (a scale event in the opposite direction of the previous one
within the scale-down stabilization window), the time back under the SLO after the
largest burst (from the start of the trace minute with the most arrivals to the end of
the first minute from it whose attainment meets the objective; 0 when the burst minute
meets it, None when none does), dropped requests.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from fleetwatch.autoscale.fleet import FleetConfig, FleetRun, ScaleEvent, TimelinePoint, simulate
from fleetwatch.autoscale.hpa import DEFAULT_BEHAVIOR, HPA, Behavior, HPASpec
from fleetwatch.autoscale.policies import Policy, ReplicaSample
from fleetwatch.autoscale.replica import ReplicaModel
from fleetwatch.autoscale.trace import Request, TraceMapping
from fleetwatch.slo.outputs.autoscaling import hold_seconds, min_replicas
from fleetwatch.slo.outputs.headroom import headroom_seconds
from fleetwatch.slo.spec import AutoscalingSettings

__all__ = ["PolicyResult", "ReplayConfig", "ReplayResult", "replay_policies"]


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """The replay's settings. ``mapping``: the trace mapping (its time compression
    divides every production duration below); ``ttft_seconds``/``itl_seconds`` (None:
    goodput is TTFT only) and ``objective`` (0–1): the SLO; ``capacity``: fleetwatch's
    capacity at SLO (requests per replica); ``min_replicas``/``max_replicas``;
    ``behavior``, ``sync_period_seconds``, ``wva_lookback_seconds`` and
    ``scrape_interval_seconds`` (the sidecar's, its default) in production seconds (the
    cold start is the replica model's); ``targets``: the SLO file's ``autoscaling``
    settings (the signal's queue-wait and KV targets, the cold-start floor, as the
    sidecar applies them); ``static_replicas`` (None: sized for the peak);
    ``duration_seconds``: the traffic's period in trace seconds, quiet end included
    (None: until the last arrival) — replica-seconds count until then."""

    mapping: TraceMapping
    ttft_seconds: float
    itl_seconds: float | None
    objective: float
    capacity: float
    min_replicas: int = 1
    max_replicas: int = 64
    behavior: Behavior = DEFAULT_BEHAVIOR
    sync_period_seconds: float = 15.0
    wva_lookback_seconds: float = 60.0
    scrape_interval_seconds: float = 5.0
    static_replicas: int | None = None
    duration_seconds: float | None = None
    targets: AutoscalingSettings = field(default_factory=AutoscalingSettings)

    @property
    def horizon(self) -> float:
        """The replay's horizon in replay seconds (0: until the last request)."""
        d = self.duration_seconds
        return 0.0 if d is None else self.mapping.seconds(d)


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy's outcome (see the module docstring); seconds of the replay clock."""

    policy: str
    title: str
    requests: int
    ttft_attainment: float
    goodput: float
    replica_seconds: float
    cost_ratio: float
    scale_events: int
    reversals: int
    recovery_seconds: float | None
    dropped: int
    peak_replicas: int
    timeline: tuple[TimelinePoint, ...]


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The whole replay: the trace's request count and span (replay seconds), the
    mapping, the static pool's size and one :class:`PolicyResult` per policy."""

    requests: int
    span_seconds: float
    mapping: TraceMapping
    static_replicas: int
    results: tuple[PolicyResult, ...]


def fleet_config(cfg: ReplayConfig, model: ReplicaModel, initial: int,
                  signal: bool = False) -> FleetConfig:
    """The simulation's settings in replay seconds; the sidecar's signal is computed
    only with ``signal`` (a policy that reads it)."""
    sec = cfg.mapping.seconds
    return FleetConfig(interval_seconds=sec(cfg.sync_period_seconds),
                       cold_start_seconds=sec(model.cold_start_seconds),
                       wva_lookback_seconds=sec(cfg.wva_lookback_seconds),
                       capacity=cfg.capacity, initial_replicas=initial,
                       targets=cfg.targets,
                       scrape_seconds=sec(cfg.scrape_interval_seconds) if signal else None,
                       hold_seconds=sec(hold_seconds(model.cold_start_seconds)),
                       headroom_seconds=sec(headroom_seconds(cfg.targets.headroom_window,
                                                             model.cold_start_seconds)),
                       signal_floor=min_replicas(cfg.targets, model.cold_start_seconds))


def _hpa_controller(policy: Policy, cfg: ReplayConfig) -> HPA:
    assert policy.target is not None
    spec = HPASpec(cfg.min_replicas, cfg.max_replicas, policy.target, cfg.behavior,
                   sync_period_seconds=cfg.sync_period_seconds)
    return HPA(spec.compressed(cfg.mapping.time_compression))


def run_policy(requests: Sequence[Request], model: ReplicaModel, cfg: ReplayConfig,
               policy: Policy, static_replicas: int) -> FleetRun:
    """One simulation of ``policy`` (the static pool: ``static_replicas`` throughout)."""
    if policy.target is None:
        def fixed(now: float, samples: Sequence[ReplicaSample], current: int,
                  ready: int) -> int:
            return static_replicas
        return simulate(requests, model, fleet_config(cfg, model, static_replicas), fixed,
                        cfg.horizon)
    hpa = _hpa_controller(policy, cfg)

    def decide(now: float, samples: Sequence[ReplicaSample], current: int, ready: int) -> int:
        return hpa.step(now, current, ready, policy.metric(samples, current))
    start = initial_replicas(requests, model, cfg)
    return simulate(requests, model, fleet_config(cfg, model, start, policy.reads_signal),
                    decide, cfg.horizon)


def initial_replicas(requests: Sequence[Request], model: ReplicaModel, cfg: ReplayConfig,
                     ) -> int:
    """The autoscaled policies' starting count (see the module docstring)."""
    width = cfg.mapping.seconds(60.0)
    busy = sum(model.prefill_seconds(model.slots, r.input_tokens)
               + max(0, r.output_tokens - 1) * model.itl.at(model.slots)
               for r in requests if r.arrival < width)
    need = math.ceil(busy / width / cfg.capacity) if cfg.capacity > 0 else 1
    return min(cfg.max_replicas, max(cfg.min_replicas, need))


def _good(run: FleetRun, i: int, cfg: ReplayConfig) -> tuple[bool, bool]:
    """(TTFT within its threshold, TTFT and ITL within theirs) for request ``i``."""
    ok = not run.dropped[i] and run.ttft[i] <= cfg.ttft_seconds
    both = ok and (cfg.itl_seconds is None or run.itl[i] <= cfg.itl_seconds)
    return ok, both


class Minute(NamedTuple):
    """One trace minute of a run: ``requests`` arriving in it, ``good`` of them within
    the TTFT threshold."""

    requests: int
    good: int

    def meets(self, objective: float) -> bool:
        """The minute meets the objective (a minute without requests does)."""
        return self.requests == 0 or self.good >= objective * self.requests - 1e-9


def _minutes(requests: Sequence[Request], run: FleetRun, cfg: ReplayConfig) -> list[Minute]:
    """Per trace minute (replay seconds 60 ÷ compression), from the first."""
    width = cfg.mapping.seconds(60.0)
    counts: list[list[int]] = []
    for i, r in enumerate(requests):
        k = int(r.arrival // width)
        while len(counts) <= k:
            counts.append([0, 0])
        counts[k][0] += 1
        counts[k][1] += int(_good(run, i, cfg)[0])
    return [Minute(n, g) for n, g in counts]


def size_static(requests: Sequence[Request], model: ReplicaModel, cfg: ReplayConfig,
                static: Policy) -> int:
    """The smallest fixed replica count (1 … ``max_replicas``) whose TTFT attainment
    meets the objective in every trace minute (bisection; the maximum when none does)."""
    lo, hi = 1, cfg.max_replicas
    while lo < hi:
        mid = (lo + hi) // 2
        run = run_policy(requests, model, cfg, static, mid)
        if all(m.meets(cfg.objective) for m in _minutes(requests, run, cfg)):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _reversals(events: Sequence[ScaleEvent], window: float) -> int:
    count = 0
    for a, b in itertools.pairwise(events):
        if (a.after - a.before) * (b.after - b.before) < 0 and b.time - a.time < window:
            count += 1
    return count


def _recovery(minutes: Sequence[Minute], width: float, objective: float) -> float | None:
    if not minutes:
        return None
    burst = max(range(len(minutes)), key=lambda k: minutes[k].requests)
    for k in range(burst, len(minutes)):
        if minutes[k].meets(objective):
            return 0.0 if k == burst else (k + 1 - burst) * width
    return None


def summarize(requests: Sequence[Request], run: FleetRun, cfg: ReplayConfig, policy: Policy,
              static_seconds: float) -> PolicyResult:
    """The :class:`PolicyResult` of one simulation."""
    n = len(requests)
    ok = both = 0
    for i in range(n):
        a, b = _good(run, i, cfg)
        ok += a
        both += b
    window = cfg.mapping.seconds(cfg.behavior.scale_down.stabilization_window_seconds)
    return PolicyResult(
        policy=policy.name, title=policy.title, requests=n,
        ttft_attainment=ok / n if n else math.nan, goodput=both / n if n else math.nan,
        replica_seconds=run.replica_seconds,
        cost_ratio=run.replica_seconds / static_seconds if static_seconds > 0 else math.nan,
        scale_events=len(run.events), reversals=_reversals(run.events, window),
        recovery_seconds=_recovery(_minutes(requests, run, cfg), cfg.mapping.seconds(60.0),
                                   cfg.objective),
        dropped=sum(run.dropped), peak_replicas=run.peak_replicas,
        timeline=tuple(run.timeline))


def replay_policies(requests: Sequence[Request], model: ReplicaModel, cfg: ReplayConfig,
                    policies: Sequence[Policy], static: Policy) -> ReplayResult:
    """Replay ``requests`` (already mapped: replay seconds and tokens) under each of
    ``policies``; ``static`` is the static-pool policy the cost ratios are taken against
    (simulated even when not among ``policies``)."""
    size = cfg.static_replicas or size_static(requests, model, cfg, static)
    static_run = run_policy(requests, model, cfg, static, size)
    results = []
    for p in policies:
        run = static_run if p is static else run_policy(requests, model, cfg, p, size)
        results.append(summarize(requests, run, cfg, p, static_run.replica_seconds))
    span = max(cfg.horizon, requests[-1].arrival if requests else 0.0)
    return ReplayResult(len(requests), span, cfg.mapping, size, tuple(results))
