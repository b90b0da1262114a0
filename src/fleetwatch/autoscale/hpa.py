"""Kubernetes' Horizontal Pod Autoscaler algorithm, as documented, for the HPA that KEDA
creates: the replica calculator, the tolerance, the behaviour (stabilization windows and
scaling policies) and the min/max bounds.

Source: "Horizontal Pod Autoscaling", *Algorithm details* and *Configurable scaling
behavior* (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/),
and KEDA's ``advanced.horizontalPodAutoscalerConfig.behavior``, which is passed to that
HPA unchanged (https://keda.sh/docs/latest/reference/scaledobject-spec/).

* **Replica calculator** (per sync period, 15 s by default): for a target of type
  ``AverageValue`` the ratio is ``M / (T · current)`` and the answer ``ceil(M / T)``;
  for ``Value`` the ratio is ``M / T`` and for ``Utilization`` ``mean utilization / T``,
  and the answer ``ceil(ratio · ready)``. A ratio within ``1 ± tolerance`` (0.1)
  keeps the current count.
* **Stabilization**: the recommendation is the current count raised to the *lowest*
  recommendation of the scale-up window and lowered to the *highest* of the scale-down
  window (defaults: scale-up 0 s, scale-down 300 s).
* **Policies**: within a policy's period, a scale-up may add at most ``value`` pods
  (``Pods``) or ``value`` % of the count at the period's start (``Percent``); with
  ``selectPolicy: Max`` the most permissive policy wins. Defaults: scale-up 100 % or 4
  pods per 15 s, scale-down 100 % per 15 s.
* **Bounds**: the answer is clamped to ``[min_replicas, max_replicas]``.

Every duration is in seconds of the clock the caller passes (``now``); a replay with a
time compression ``c`` uses :meth:`Behavior.compressed` and ``sync_period / c``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DEFAULT_BEHAVIOR", "HPA", "Behavior", "HPASpec", "MetricTarget", "ScalingPolicy",
           "ScalingRules", "calculate_replicas"]

TargetType = Literal["AverageValue", "Value", "Utilization"]


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """One HPA scaling policy: at most ``value`` pods (``Pods``) or ``value`` percent of
    the count at the period's start (``Percent``) per ``period_seconds``."""

    kind: Literal["Pods", "Percent"]
    value: int
    period_seconds: float


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """One direction's behaviour: the stabilization window (seconds), the policies and
    ``select_policy`` (``Max``: the policy allowing the largest change; ``Min``: the
    smallest; ``Disabled``: no scaling in this direction)."""

    stabilization_window_seconds: float
    policies: tuple[ScalingPolicy, ...]
    select_policy: Literal["Max", "Min", "Disabled"] = "Max"

    def compressed(self, factor: float) -> ScalingRules:
        """The same rules with every duration divided by ``factor``."""
        return ScalingRules(self.stabilization_window_seconds / factor,
                            tuple(ScalingPolicy(p.kind, p.value, p.period_seconds / factor)
                                  for p in self.policies), self.select_policy)


@dataclass(frozen=True, slots=True)
class Behavior:
    """The HPA's ``behavior``: Kubernetes' defaults unless given."""

    scale_up: ScalingRules = ScalingRules(
        0.0, (ScalingPolicy("Percent", 100, 15.0), ScalingPolicy("Pods", 4, 15.0)))
    scale_down: ScalingRules = ScalingRules(300.0, (ScalingPolicy("Percent", 100, 15.0),))

    def compressed(self, factor: float) -> Behavior:
        """The same behaviour with every duration divided by ``factor`` (≥ 1: the
        replay's time compression)."""
        return Behavior(self.scale_up.compressed(factor), self.scale_down.compressed(factor))


DEFAULT_BEHAVIOR = Behavior()


@dataclass(frozen=True, slots=True)
class MetricTarget:
    """The HPA metric target: ``type`` (``AverageValue``, ``Value``, ``Utilization``) and
    its ``value`` (the metric's unit; a ratio 0–1 for ``Utilization`` here, where
    Kubernetes writes percent)."""

    type: TargetType
    value: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"target value {self.value}: must be > 0")


@dataclass(frozen=True, slots=True)
class HPASpec:
    """One HPA: bounds, target, behaviour, tolerance and sync period (seconds)."""

    min_replicas: int
    max_replicas: int
    target: MetricTarget
    behavior: Behavior = DEFAULT_BEHAVIOR
    tolerance: float = 0.1
    sync_period_seconds: float = 15.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"need 1 ≤ min_replicas ({self.min_replicas}) ≤ max_replicas "
                             f"({self.max_replicas})")

    def compressed(self, factor: float) -> HPASpec:
        """The same HPA with every duration divided by ``factor``."""
        return HPASpec(self.min_replicas, self.max_replicas, self.target,
                       self.behavior.compressed(factor), self.tolerance,
                       self.sync_period_seconds / factor)


def calculate_replicas(target: MetricTarget, metric: float, current: int, ready: int,
                       tolerance: float = 0.1) -> int:
    """Kubernetes' replica calculator for one metric: ``metric`` is the value the HPA
    reads (the query's result for ``AverageValue``/``Value``, the ready pods' mean
    utilization for ``Utilization``); ``current`` the Deployment's replicas, ``ready``
    its ready pods. Returns the unbounded recommendation (the current count within the
    tolerance). A non-finite metric keeps the current count (the HPA skips the metric)."""
    if not math.isfinite(metric) or current <= 0:
        return current
    if target.type == "AverageValue":
        ratio = metric / (target.value * current)
        return current if abs(ratio - 1.0) <= tolerance else math.ceil(metric / target.value)
    ratio = metric / target.value
    if abs(ratio - 1.0) <= tolerance:
        return current
    return math.ceil(ratio * max(ready, 1))


@dataclass(slots=True)
class HPA:
    """One HPA's state across sync periods: past recommendations (for stabilization)
    and past scale events (for the policies). Call :meth:`step` once per sync period."""

    spec: HPASpec
    _recommendations: deque[tuple[float, int]] = field(default_factory=deque)
    _events: deque[tuple[float, int]] = field(default_factory=deque)

    def step(self, now: float, current: int, ready: int, metric: float) -> int:
        """The desired replicas at ``now`` (seconds) for a Deployment at ``current``
        replicas (``ready`` of them ready) and a metric value ``metric``: calculator,
        stabilization, policies, bounds. A change is recorded as a scale event."""
        raw = calculate_replicas(self.spec.target, metric, current, ready, self.spec.tolerance)
        stabilized = self._stabilize(now, current, raw)
        desired = self._limit(now, current, stabilized)
        if desired != current:
            self._events.append((now, desired - current))
        return desired

    def _stabilize(self, now: float, current: int, raw: int) -> int:
        up_w = self.spec.behavior.scale_up.stabilization_window_seconds
        down_w = self.spec.behavior.scale_down.stabilization_window_seconds
        keep = max(up_w, down_w)
        while self._recommendations and self._recommendations[0][0] < now - keep:
            self._recommendations.popleft()
        up = down = raw
        for t, rec in self._recommendations:
            if t >= now - up_w:
                up = min(up, rec)
            if t >= now - down_w:
                down = max(down, rec)
        self._recommendations.append((now, raw))
        return min(max(current, up), down)

    def _changed_in(self, now: float, period: float, sign: int) -> int:
        """Pods added (``sign`` 1) or removed (−1) within ``period`` seconds before ``now``."""
        return sum(sign * d for t, d in self._events if t > now - period and sign * d > 0)

    def _limit(self, now: float, current: int, desired: int) -> int:
        spec = self.spec
        longest = max((p.period_seconds for r in (spec.behavior.scale_up, spec.behavior.scale_down)
                       for p in r.policies), default=0.0)
        while self._events and self._events[0][0] <= now - longest:
            self._events.popleft()
        if desired > current:
            limit = self._up_limit(now, current)
            return max(min(desired, limit, spec.max_replicas), min(current, spec.max_replicas))
        if desired < current:
            limit = self._down_limit(now, current)
            return min(max(desired, limit, spec.min_replicas), max(current, spec.min_replicas))
        return min(max(desired, spec.min_replicas), spec.max_replicas)

    def _up_limit(self, now: float, current: int) -> int:
        rules = self.spec.behavior.scale_up
        if rules.select_policy == "Disabled" or not rules.policies:
            return current
        proposals = []
        for p in rules.policies:
            start = current - self._changed_in(now, p.period_seconds, 1)
            proposals.append(start + p.value if p.kind == "Pods"
                             else math.ceil(start * (1 + p.value / 100)))
        return max(proposals) if rules.select_policy == "Max" else min(proposals)

    def _down_limit(self, now: float, current: int) -> int:
        rules = self.spec.behavior.scale_down
        if rules.select_policy == "Disabled" or not rules.policies:
            return current
        proposals = []
        for p in rules.policies:
            start = current + self._changed_in(now, p.period_seconds, -1)
            proposals.append(start - p.value if p.kind == "Pods"
                             else int(start * (1 - p.value / 100)))
        return min(proposals) if rules.select_policy == "Max" else max(proposals)
