"""The advisory twin's fleet: a discrete-event simulation of a least-connections balancer
over replicas of one :class:`~fleetwatch.autoscale.replica.ReplicaModel`, with a
controller asked for the desired replicas at every decision interval.

* **Balancer**: each arrival goes to the ready, not draining replica with the fewest
  requests in it (running + waiting; ties: the oldest replica), as HAProxy's
  ``leastconn`` or a Service behind a least-request router does. A replica whose queue
  holds ``max_waiting`` requests refuses the arrival: the request is *dropped*.
* **Scale-out**: a new replica takes traffic after the cold start. **Scale-in**: replicas
  still starting go first, then the ready ones with the fewest requests; a removed
  replica takes no new requests and finishes the ones it holds (Kubernetes' graceful
  termination), then is gone.
* **Metrics** per ready replica at each decision (the policies' inputs,
  :class:`~fleetwatch.autoscale.policies.ReplicaSample`): requests waiting and running
  and KV usage at that moment; fleetwatch's signal as the sidecar last computed it —
  every sidecar scrape interval, from the time-averaged requests in the replica over it
  (what the sidecar's Little's law reads), the mean queue wait of the requests admitted
  in it and the KV usage, held at its peak over the hold window and kept at least at
  the burst headroom of its concurrency component; the busy fraction (time
  with a request running), the peaks of waiting and KV usage over the WVA lookback. The
  signal goes through the sidecar's own code
  (:func:`fleetwatch.slo.outputs.autoscaling.components`,
  :class:`~fleetwatch.slo.outputs.autoscaling.SignalHold`); as in the sidecar, a replica
  that admitted no request in an interval keeps its last queue wait.

Time is seconds of the replay clock. Every request ends served or dropped.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from fleetwatch.autoscale.policies import ReplicaSample
from fleetwatch.autoscale.replica import ReplicaModel
from fleetwatch.autoscale.trace import Request
from fleetwatch.slo.outputs.autoscaling import SignalHold, components, signal_ratio
from fleetwatch.slo.outputs.headroom import BurstHeadroom
from fleetwatch.slo.spec import AutoscalingSettings

__all__ = ["Controller", "FleetConfig", "FleetRun", "ScaleEvent", "TimelinePoint", "simulate"]

#: ``(now, ready replicas' samples, current replicas, ready replicas)`` → desired replicas
Controller = Callable[[float, Sequence[ReplicaSample], int, int], int]


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """The simulation's settings (replay seconds): ``interval_seconds`` between
    decisions (the HPA's sync period), ``cold_start_seconds``, ``wva_lookback_seconds``
    (WVA's ``max_over_time`` range), ``capacity`` (fleetwatch's capacity at SLO,
    requests per replica), ``targets`` (the SLO file's ``autoscaling`` settings the
    signal's components divide by), ``scrape_seconds`` (the sidecar's scrape interval:
    each replica's signal is computed per such interval, and a decision reads the
    latest; None: no signal is computed, for policies that do not read it),
    ``hold_seconds`` (the signal's hold window,
    :func:`~fleetwatch.slo.outputs.autoscaling.hold_seconds`), ``headroom_seconds`` (the
    window of the signal's burst headroom,
    :func:`~fleetwatch.slo.outputs.headroom.headroom_seconds`), ``signal_floor`` (the
    sidecar's cold-start floor, ``min_replicas`` of the samples), ``max_waiting`` (a
    replica's queue bound), ``initial_replicas``."""

    interval_seconds: float
    cold_start_seconds: float
    wva_lookback_seconds: float
    capacity: float
    targets: AutoscalingSettings = field(default_factory=AutoscalingSettings)
    scrape_seconds: float | None = None
    hold_seconds: float = 0.0
    headroom_seconds: float = 0.0
    signal_floor: int = 1
    max_waiting: int = 1000
    initial_replicas: int = 1


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """A change of the replica count at ``time``: ``before`` → ``after``."""

    time: float
    before: int
    after: int


class TimelinePoint(NamedTuple):
    """The fleet at one decision: ``time`` (seconds), ``replicas`` desired (and created),
    ``ready`` of them taking traffic."""

    time: float
    replicas: int
    ready: int


@dataclass(frozen=True, slots=True)
class FleetRun:
    """One simulation: per request (trace order) ``ttft`` and ``itl`` (seconds; NaN for
    a dropped request), ``dropped``; ``timeline`` at each decision; ``events``;
    ``replica_seconds`` (every replica from creation until gone); ``end`` (the last
    completion, or the horizon); ``peak_replicas`` (the most replicas desired at once,
    the initial ones included: a trace shorter than one decision interval still ran on
    them)."""

    ttft: list[float]
    itl: list[float]
    dropped: list[bool]
    timeline: list[TimelinePoint]
    events: list[ScaleEvent]
    replica_seconds: float
    end: float
    peak_replicas: int


@dataclass(slots=True)
class _Replica:
    rid: int
    created: float
    ready: bool = False
    draining: bool = False
    gone: float | None = None
    running: int = 0
    in_system: int = 0  # running + waiting
    waiting: deque[int] = field(default_factory=deque)
    kv_used: float = 0.0
    last: float = 0.0
    area: float = 0.0
    busy: float = 0.0
    qwait_sum: float = 0.0
    qwait_n: int = 0
    qwait_last: float | None = None
    ready_at: float = 0.0
    scraped: float = 0.0
    signal: float = 0.0
    hold: SignalHold = field(default_factory=lambda: SignalHold(0.0))
    peaks: deque[tuple[float, float, float]] = field(default_factory=deque)

    def advance(self, t: float) -> None:
        dt = t - self.last
        if dt > 0:
            self.area += self.in_system * dt
            if self.running:
                self.busy += dt
            self.last = t


@dataclass(slots=True)
class _Sim:
    reqs: Sequence[Request]
    model: ReplicaModel
    cfg: FleetConfig
    reps: list[_Replica] = field(default_factory=list)  # not gone yet
    starting: dict[int, _Replica] = field(default_factory=dict)
    retired_seconds: float = 0.0
    heap: list[tuple[float, int, int, int]] = field(default_factory=list)
    seq: int = 0
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    dropped: list[bool] = field(default_factory=list)
    tokens: list[float] = field(default_factory=list)
    holder: list[_Replica | None] = field(default_factory=list)
    in_flight: int = 0

    def push(self, t: float, kind: int, a: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, a))

    def add_replica(self, t: float, ready: bool) -> None:
        self.seq += 1
        rep = _Replica(self.seq, created=t, ready=ready, last=t, ready_at=t, scraped=t,
                       hold=SignalHold(self.cfg.hold_seconds,
                                       BurstHeadroom(self.cfg.headroom_seconds)))
        self.reps.append(rep)
        if not ready:
            self.starting[rep.rid] = rep
            self.push(t + self.cfg.cold_start_seconds, _READY, rep.rid)

    def retire(self, rep: _Replica, t: float) -> None:
        """``rep`` is gone at ``t``: its replica-seconds are booked, the list forgets it."""
        rep.gone = t
        self.retired_seconds += t - rep.created
        self.reps.remove(rep)
        self.starting.pop(rep.rid, None)

    def arrive(self, t: float, i: int) -> None:
        best: _Replica | None = None
        low = 1 << 62
        for rep in self.reps:
            if rep.in_system < low and rep.ready and not rep.draining:
                best, low = rep, rep.in_system
        self.holder[i] = best
        if best is None or len(best.waiting) >= self.cfg.max_waiting:
            self.dropped[i] = True
            return
        best.advance(t)
        best.waiting.append(i)
        best.in_system += 1
        self.in_flight += 1
        self.admit(best, t)

    def admit(self, rep: _Replica, t: float) -> None:
        m = self.model
        while rep.waiting and rep.running < m.slots:
            i = rep.waiting[0]
            need = self.tokens[i]
            if rep.running and rep.kv_used + need > m.kv_capacity_tokens:
                return
            rep.waiting.popleft()
            r = self.reqs[i]
            n = rep.running + 1
            itl = m.itl.at(n)
            first = t + m.prefill_seconds(n, r.input_tokens)
            self.ttft[i] = first - r.arrival
            self.itl[i] = itl
            rep.running = n
            rep.kv_used += need
            rep.qwait_sum += t - r.arrival
            rep.qwait_n += 1
            self.push(first + max(0, r.output_tokens - 1) * itl, _DONE, i)

    def done(self, t: float, i: int) -> None:
        owner = self.holder[i]
        assert owner is not None
        self.holder[i] = None
        owner.advance(t)
        owner.running -= 1
        owner.in_system -= 1
        owner.kv_used -= self.tokens[i]
        self.in_flight -= 1
        self.admit(owner, t)
        if owner.draining and owner.in_system == 0 and owner.gone is None:
            self.retire(owner, t)

    def scrape(self, rep: _Replica, t: float) -> None:
        """The sidecar's interval ending at ``t`` for ``rep``: its signal from the mean
        requests in it and those in it at ``t``, the mean queue wait of the requests
        admitted in it (none: the last one) and the KV usage now, held by the sidecar's
        rule."""
        cfg = self.cfg
        rep.advance(t)
        span = t - max(rep.scraped, rep.ready_at)
        conc = rep.area / span if span > 0 else float(rep.in_system)
        if rep.qwait_n:
            rep.qwait_last = rep.qwait_sum / rep.qwait_n
        kv = rep.kv_used / self.model.kv_capacity_tokens
        comps = components(cfg.targets, cfg.capacity, conc, float(rep.in_system),
                           rep.qwait_last, kv, None)
        rep.signal = rep.hold.update(t, signal_ratio(comps), comps.get("concurrency", 0.0))
        rep.area = rep.qwait_sum = 0.0
        rep.qwait_n = 0
        rep.scraped = t

    def sample(self, rep: _Replica, t: float) -> ReplicaSample:
        cfg, iv = self.cfg, self.cfg.interval_seconds
        kv = rep.kv_used / self.model.kv_capacity_tokens
        rep.peaks.append((t, float(len(rep.waiting)), kv))
        while rep.peaks and rep.peaks[0][0] < t - cfg.wva_lookback_seconds:
            rep.peaks.popleft()
        s = ReplicaSample(waiting=float(len(rep.waiting)), running=float(rep.running),
                          kv_usage=kv, signal=rep.signal, utilization=min(1.0, rep.busy / iv),
                          waiting_peak=max(p[1] for p in rep.peaks),
                          kv_usage_peak=max(p[2] for p in rep.peaks),
                          min_replicas=cfg.signal_floor)
        rep.busy = 0.0
        return s


_DONE, _READY, _SCRAPE, _TICK = 0, 1, 2, 3


def _scale(sim: _Sim, t: float, desired: int) -> None:
    """Add or remove replicas to reach ``desired`` (see the module docstring)."""
    live = [r for r in sim.reps if not r.draining]
    for _ in range(desired - len(live)):
        sim.add_replica(t, ready=sim.cfg.cold_start_seconds <= 0)
    extra = len(live) - desired
    if extra <= 0:
        return
    starting = [r for r in reversed(live) if not r.ready]
    ready = sorted((r for r in live if r.ready), key=lambda r: r.in_system)
    for rep in (starting + ready)[:extra]:
        rep.advance(t)
        rep.draining = True
        if rep.in_system == 0:
            sim.retire(rep, t)


def simulate(requests: Sequence[Request], model: ReplicaModel, cfg: FleetConfig,
             controller: Controller, horizon: float = 0.0) -> FleetRun:
    """Replay ``requests`` (sorted by arrival, replay seconds) through the fleet, asking
    ``controller`` for the desired replicas every ``cfg.interval_seconds``; see the
    module docstring. Runs until ``horizon`` (seconds: the end of the traffic's period,
    quiet time included) and until every request is served or dropped."""
    n = len(requests)
    sim = _Sim(requests, model, cfg, ttft=[math.nan] * n, itl=[math.nan] * n,
               dropped=[False] * n,
               tokens=[float(r.input_tokens + r.output_tokens) for r in requests],
               holder=[None] * n)
    initial = max(1, cfg.initial_replicas)
    for _ in range(initial):
        sim.add_replica(0.0, ready=True)
    sim.push(cfg.interval_seconds, _TICK, 0)
    scrape = cfg.scrape_seconds or 0.0
    if scrape:
        sim.push(scrape, _SCRAPE, 0)
    timeline: list[TimelinePoint] = []
    events: list[ScaleEvent] = []
    nxt, end = 0, 0.0
    while sim.heap:
        t, kind, _, a = sim.heap[0]
        if nxt < n and requests[nxt].arrival < t:
            sim.arrive(requests[nxt].arrival, nxt)
            nxt += 1
            continue
        heapq.heappop(sim.heap)
        if kind == _DONE:
            sim.done(t, a)
            end = max(end, t)
        elif kind == _READY:
            rep = sim.starting.pop(a, None)
            if rep is not None and not rep.draining:
                rep.ready, rep.last, rep.ready_at = True, t, t
        elif kind == _SCRAPE:
            if nxt < n or sim.in_flight or t < horizon:
                for r in sim.reps:
                    if r.ready:
                        sim.scrape(r, t)
                sim.push(t + scrape, _SCRAPE, 0)
        elif nxt < n or sim.in_flight or t < horizon:
            live = [r for r in sim.reps if not r.draining]
            ready = [r for r in live if r.ready]
            for r in sim.reps:
                r.advance(t)
            samples = [sim.sample(r, t) for r in ready]
            desired = max(1, controller(t, samples, len(live), len(ready)))
            if desired != len(live):
                events.append(ScaleEvent(t, len(live), desired))
                _scale(sim, t, desired)
            timeline.append(TimelinePoint(t, desired, sum(1 for r in sim.reps
                                                          if r.ready and not r.draining)))
            sim.push(t + cfg.interval_seconds, _TICK, 0)
    end = max(end, horizon, requests[-1].arrival if n else 0.0)
    rs = sim.retired_seconds + sum(end - r.created for r in sim.reps)
    peak = max([initial, *(p.replicas for p in timeline)])
    return FleetRun(sim.ttft, sim.itl, sim.dropped, timeline, events, rs, end, peak)

