"""The autoscaling policies compared: each with its PromQL (what KEDA's Prometheus
scaler, or the policy's controller, runs against the sidecars), the HPA target it feeds
and its decision rule, registered once in :data:`POLICIES`.

The queries read the sidecar's normalized names, so one query serves every engine behind
a sidecar: ``modelserver_requests_active{state="waiting"}`` is vLLM's
``vllm:num_requests_waiting`` and ``modelserver_kv_cache_usage_ratio`` its
``vllm:kv_cache_usage_perc`` (``gpu_cache_usage_perc`` before 0.10), re-exposed one to one
(docs/metrics.md); the upstream projects write the raw names. Each policy's rule:

* ``fleetwatch``: Σ ``fleetwatch_autoscaling_signal_ratio`` over the replicas, with the
  sidecars' cold-start floor, ``AverageValue`` 1 — desired = ceil(Σ signal)
  (docs/autoscaling.md).
* ``production-stack``: vLLM production-stack's KEDA tutorial, Σ waiting requests,
  ``AverageValue`` 5 (KEDA's Prometheus scaler's default metric type) — desired =
  ceil(Σ waiting / 5) (https://docs.vllm.ai/projects/production-stack/en/latest/use_cases/autoscaling-keda.html).
* ``wva``: llm-d Workload Variant Autoscaler's saturation analyzer with its defaults
  (https://github.com/llm-d/llm-d-workload-variant-autoscaler, ``docs/saturation-analyzer.md``):
  per replica the peak over 1 min of KV-cache usage and of waiting requests; a replica
  is saturated at KV ≥ 0.80 or queue ≥ 5; over the non-saturated ones, spare KV = 0.80 −
  KV and spare queue = 5 − queue; one more replica when the average spare KV < 0.10 or
  spare queue < 3 (or every replica is saturated); one fewer only when the total load
  spread over N − 1 replicas keeps both spares at or above their triggers. WVA publishes
  the count as ``wva_desired_replicas``, which its HPA reads with ``AverageValue`` 1.
* ``hpa-utilization``: the HPA on a resource's utilization, target 70 % (the
  Kubernetes docs' example) — the accelerator's busy fraction (DCGM's
  ``DCGM_FI_DEV_GPU_UTIL`` → ``modelserver_gpu_utilization_ratio``; on a CPU replica its
  CPU's, ``modelserver_cpu_utilization_ratio``).
* ``static``: no autoscaler; a pool sized for the peak.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fleetwatch.autoscale.hpa import MetricTarget
from fleetwatch.promql import agg, sel

__all__ = ["POLICIES", "Policy", "ReplicaSample", "WVAThresholds", "policy", "wva_desired"]


@dataclass(frozen=True, slots=True)
class ReplicaSample:
    """One ready replica's metrics at a decision, as the policies' queries return them:
    ``waiting``/``running`` requests, ``kv_usage`` (0–1), ``signal`` (fleetwatch's
    ratio), ``utilization`` (busy fraction 0–1 over the last scrape interval),
    ``waiting_peak``/``kv_usage_peak`` (their maxima over WVA's 1-minute lookback),
    ``min_replicas`` (the sidecar's cold-start floor)."""

    waiting: float
    running: float
    kv_usage: float
    signal: float
    utilization: float
    waiting_peak: float
    kv_usage_peak: float
    min_replicas: int = 1


@dataclass(frozen=True, slots=True)
class WVAThresholds:
    """WVA's saturation-analyzer configuration (its ConfigMap's defaults)."""

    kv_cache_threshold: float = 0.80
    queue_length_threshold: float = 5.0
    kv_spare_trigger: float = 0.10
    queue_spare_trigger: float = 3.0


def wva_desired(samples: Sequence[ReplicaSample], current: int,
                t: WVAThresholds = WVAThresholds()) -> int:
    """WVA's saturation analyzer: ``current`` + 1, − 1 or unchanged from the ready
    replicas' peak KV usage and queue (see the module docstring). No samples: unchanged."""
    if not samples:
        return current
    free = [s for s in samples if s.kv_usage_peak < t.kv_cache_threshold
            and s.waiting_peak < t.queue_length_threshold]
    if not free:
        return current + 1
    n = len(free)
    spare_kv = sum(t.kv_cache_threshold - s.kv_usage_peak for s in free) / n
    spare_q = sum(t.queue_length_threshold - s.waiting_peak for s in free) / n
    if spare_kv < t.kv_spare_trigger or spare_q < t.queue_spare_trigger:
        return current + 1
    if n > 1 and len(free) == len(samples):
        kv_after = sum(s.kv_usage_peak for s in free) / (n - 1)
        q_after = sum(s.waiting_peak for s in free) / (n - 1)
        if (t.kv_cache_threshold - kv_after >= t.kv_spare_trigger
                and t.queue_length_threshold - q_after >= t.queue_spare_trigger):
            return max(1, current - 1)
    return current


MetricFn = Callable[[Sequence[ReplicaSample], int], float]
QueryFn = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Policy:
    """One policy: ``name`` (CLI and JSON), ``title``, ``source`` (its documentation),
    ``target`` (the HPA target it feeds; None for the static pool), ``queries``
    (model name → named PromQL texts; ``metric`` is the one KEDA reads, others are
    per-replica inputs of a controller) and ``metric`` (the ready replicas' samples and
    the current count → the value the HPA reads, computed as the queries would);
    ``reads_signal``: the metric reads fleetwatch's signal (the twin computes it only
    then)."""

    name: str
    title: str
    source: str
    target: MetricTarget | None
    queries: QueryFn
    metric: MetricFn
    reads_signal: bool = False


def _model(model: str, **more: str) -> dict[str, str]:
    return {"model": model, **more}


def _fleetwatch_queries(model: str) -> Mapping[str, str]:
    signal = sel("fleetwatch_autoscaling_signal_ratio", _model(model))
    floor = sel("fleetwatch_autoscaling_min_replicas", _model(model))
    # PromQL's max() takes one vector: the two parts become one vector of two series
    parts = (f'label_replace(sum({signal}) or vector(0), "part", "signal", "", "")'
             f' or label_replace(max({floor}) or vector(1), "part", "floor", "", "")')
    return {"metric": f"max({parts})"}


def _fleetwatch_metric(samples: Sequence[ReplicaSample], current: int) -> float:
    floor = max((s.min_replicas for s in samples), default=1)
    return max(sum(s.signal for s in samples), float(floor))


def _waiting_queries(model: str) -> Mapping[str, str]:
    return {"metric": f"sum({sel('modelserver_requests_active', _model(model, state='waiting'))})"}


def _waiting_metric(samples: Sequence[ReplicaSample], current: int) -> float:
    return sum(s.waiting for s in samples)


def _wva_queries(model: str) -> Mapping[str, str]:
    kv = sel("modelserver_kv_cache_usage_ratio", _model(model))
    waiting = sel("modelserver_requests_active", _model(model, state="waiting"))
    return {"kv_usage_peak": agg("max", ["pod"], f"max_over_time({kv}[1m])"),
            "waiting_peak": agg("max", ["pod"], f"max_over_time({waiting}[1m])"),
            "metric": sel("wva_desired_replicas", _model(model))}


def _wva_metric(samples: Sequence[ReplicaSample], current: int) -> float:
    return float(wva_desired(samples, current))


def _util_queries(model: str) -> Mapping[str, str]:
    return {"metric": f"avg({sel('modelserver_gpu_utilization_ratio', _model(model))})"}


def _util_metric(samples: Sequence[ReplicaSample], current: int) -> float:
    if not samples:
        return math.nan
    return sum(s.utilization for s in samples) / len(samples)


def _no_queries(model: str) -> Mapping[str, str]:
    return {}


def _no_metric(samples: Sequence[ReplicaSample], current: int) -> float:
    return math.nan


POLICIES: tuple[Policy, ...] = (
    Policy("fleetwatch", "fleetwatch signal (Σ signal, AverageValue 1)",
           "docs/autoscaling.md", MetricTarget("AverageValue", 1.0),
           _fleetwatch_queries, _fleetwatch_metric, reads_signal=True),
    Policy("production-stack", "vLLM production-stack KEDA (Σ waiting, AverageValue 5)",
           "https://docs.vllm.ai/projects/production-stack/en/latest/use_cases/autoscaling-keda.html",
           MetricTarget("AverageValue", 5.0), _waiting_queries, _waiting_metric),
    Policy("wva", "llm-d WVA saturation analyzer (KV 0.80, queue 5)",
           "https://github.com/llm-d/llm-d-workload-variant-autoscaler/blob/main/docs/saturation-analyzer.md",
           MetricTarget("AverageValue", 1.0), _wva_queries, _wva_metric),
    Policy("hpa-utilization", "HPA on utilization (70 %)",
           "https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/",
           MetricTarget("Utilization", 0.70), _util_queries, _util_metric),
    Policy("static", "static pool sized for the peak", "", None, _no_queries, _no_metric),
)

_BY_NAME = {p.name: p for p in POLICIES}


def policy(name: str) -> Policy:
    """The registered policy called ``name``; ``KeyError`` naming the choices."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; choose from {', '.join(_BY_NAME)}") from None
