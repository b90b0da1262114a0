"""Names of the Prometheus recording rules the dashboards query — imported from the rules
generator (:mod:`fleetwatch.alerts.recording`), whose names are a contract: dashboards never
spell a recorded name out, they use these.

Per-model signals (labels ``model, model_version, backend`` plus the one noted; 5-minute
windows): :data:`REQUESTS_RATE` (+ ``outcome``), :data:`ERROR_RATIO`, :func:`latency`
(``model:<histogram>:mean5m`` / ``:p50_5m`` / ``:p90_5m`` / ``:p99_5m``; quantiles are NaN
where the source has no buckets, e.g. Triton), :data:`TOKENS_RATE` (+ ``token_type``),
:data:`PREFIX_CACHE_HIT_RATIO`, :data:`REQUESTS_ACTIVE` (+ ``state``),
:data:`KV_CACHE_USAGE`, :data:`GPU_MEMORY_USAGE` (``gpu_uuid, backend``),
:data:`SLO_CONCURRENCY`, :data:`AUTOSCALING_SIGNAL`; rollouts: :data:`ROLLOUT_VERDICT`
(``model, baseline, candidate, verdict``). Quotas (``team, resource``, plus
``model`` for the caps): :data:`QUOTA_USAGE`, :data:`QUOTA_LIMIT`, :data:`QUOTA_MODEL_USAGE`,
:data:`QUOTA_MODEL_LIMIT`. SLOs: :func:`burn_rate` for every
window of :func:`burn_windows` (labels ``slo, model, model_version, backend, band``;
``band="all"`` is the overall burn) and :data:`ERROR_BUDGET_REMAINING`.
"""

from __future__ import annotations

from fleetwatch.alerts.numbers import window
from fleetwatch.alerts.recording import (
    AUTOSCALING_SIGNAL,
    ERROR_BUDGET_REMAINING,
    ERROR_RATIO,
    GPU_MEMORY_USAGE,
    KV_CACHE_USAGE,
    LATENCY_STATS,
    PREFIX_CACHE_HIT_RATIO,
    QUOTA_LIMIT,
    QUOTA_MODEL_LIMIT,
    QUOTA_MODEL_USAGE,
    QUOTA_USAGE,
    REQUESTS_ACTIVE,
    REQUESTS_RATE,
    ROLLOUT_VERDICT,
    SLO_CONCURRENCY,
    TOKENS_RATE,
    LatencyStat,
    burn_rate,
    burn_windows,
    latency,
    recorded_names,
)
from fleetwatch.slo.sli import LATENCY_HISTOGRAMS

__all__ = [
    "AUTOSCALING_SIGNAL", "ERROR_BUDGET_REMAINING", "ERROR_RATIO", "GPU_MEMORY_USAGE",
    "KV_CACHE_USAGE", "LATENCY_HISTOGRAMS", "LATENCY_STATS", "PREFIX_CACHE_HIT_RATIO",
    "QUOTA_LIMIT", "QUOTA_MODEL_LIMIT", "QUOTA_MODEL_USAGE", "QUOTA_USAGE",
    "REQUESTS_ACTIVE", "REQUESTS_RATE", "ROLLOUT_VERDICT", "SLO_CONCURRENCY", "TOKENS_RATE",
    "LatencyStat",
    "burn_rate", "burn_windows", "latency", "recorded_names", "window",
]
