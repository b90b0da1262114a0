"""Names of the Prometheus recording rules the dashboards query — the one place they live.

The names are a contract with the rules generator (:mod:`fleetwatch.alerts.recording`,
issue 4): ``level:metric:operation``, labels ``model, model_version, backend`` unless noted.
Until that module exists they are spelled out here; switching to it is a change of this
module only (import the names from there).

Per-model signals (5-minute windows):

* ``model:modelserver_requests:rate5m`` (+ ``outcome``),
  ``model:modelserver_request_errors:ratio_rate5m``;
* for each latency histogram: ``model:<metric>:mean5m`` and ``:p50_5m``, ``:p90_5m``,
  ``:p99_5m`` (quantiles are NaN where the source has no buckets, e.g. Triton);
* ``model:modelserver_tokens:rate5m`` (+ ``token_type``),
  ``model:modelserver_prefix_cache_hit:ratio_rate5m``,
  ``model:modelserver_requests_active:sum`` (+ ``state``),
  ``model:modelserver_kv_cache_usage:max``,
  ``gpu:modelserver_gpu_memory_usage:ratio`` (labels ``gpu_uuid, backend``);
* ``model:fleetwatch_slo_concurrency:sum``, ``model:fleetwatch_autoscaling_signal:sum``.

SLOs: ``slo_model_band:fleetwatch_slo_burn_rate:ratio_rate<W>`` (labels ``slo, model,
model_version, backend, band``; ``band="all"`` is the overall burn) for every window ``W``
of :func:`burn_windows`, and ``slo_model:fleetwatch_slo_error_budget_remaining:ratio``.
"""

from __future__ import annotations

from typing import Literal

from fleetwatch.slo.spec import SLOFile

LatencyStat = Literal["mean", "p50", "p90", "p99"]

#: Latency histograms with recorded means and quantiles.
LATENCY_HISTOGRAMS = (
    "modelserver_request_duration_seconds",
    "modelserver_queue_duration_seconds",
    "modelserver_time_to_first_token_seconds",
    "modelserver_inter_token_latency_seconds",
    "modelserver_time_per_output_token_seconds",
)
LATENCY_STATS: tuple[LatencyStat, ...] = ("mean", "p50", "p90", "p99")

REQUESTS_RATE = "model:modelserver_requests:rate5m"
ERROR_RATIO = "model:modelserver_request_errors:ratio_rate5m"
TOKENS_RATE = "model:modelserver_tokens:rate5m"
PREFIX_CACHE_HIT_RATIO = "model:modelserver_prefix_cache_hit:ratio_rate5m"
REQUESTS_ACTIVE = "model:modelserver_requests_active:sum"
KV_CACHE_USAGE = "model:modelserver_kv_cache_usage:max"
GPU_MEMORY_USAGE = "gpu:modelserver_gpu_memory_usage:ratio"
SLO_CONCURRENCY = "model:fleetwatch_slo_concurrency:sum"
AUTOSCALING_SIGNAL = "model:fleetwatch_autoscaling_signal:sum"
ERROR_BUDGET_REMAINING = "slo_model:fleetwatch_slo_error_budget_remaining:ratio"
_BURN_RATE_PREFIX = "slo_model_band:fleetwatch_slo_burn_rate:ratio_rate"


def latency(metric: str, stat: LatencyStat) -> str:
    """``model:<metric>:mean5m`` / ``:p99_5m`` for a histogram of :data:`LATENCY_HISTOGRAMS`."""
    if metric not in LATENCY_HISTOGRAMS:
        raise KeyError(f"no recorded latency for {metric!r}")
    if stat not in LATENCY_STATS:
        raise KeyError(f"no recorded statistic {stat!r}")
    return f"model:{metric}:{stat}5m" if stat == "mean" else f"model:{metric}:{stat}_5m"


def window(seconds: float) -> str:
    """A range in the largest exact unit among d/h/m/s: ``28d`` (never ``4w``), ``1h``."""
    n = round(seconds)
    if n <= 0 or n != seconds:
        raise ValueError(f"window {seconds!r} s is not a positive whole number of seconds")
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if n % size == 0:
            return f"{n // size}{unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def burn_rate(window_seconds: float) -> str:
    """``slo_model_band:fleetwatch_slo_burn_rate:ratio_rate<W>`` (W like 5m, 1h, 28d)."""
    return f"{_BURN_RATE_PREFIX}{window(window_seconds)}"


def burn_windows(slos: SLOFile) -> list[float]:
    """Windows (seconds, ascending) with a recorded burn rate: both windows of every alert
    pair, the capacity window and every SLO's period."""
    ws = {w.long for w in slos.windows} | {w.short for w in slos.windows}
    ws.add(slos.capacity.window)
    ws.update(s.period_seconds for s in slos.slos)
    return sorted(ws)


def recorded_names(slos: SLOFile) -> set[str]:
    """Every recording-rule name the dashboards may query for this SLO file."""
    names = {REQUESTS_RATE, ERROR_RATIO, TOKENS_RATE, PREFIX_CACHE_HIT_RATIO, REQUESTS_ACTIVE,
             KV_CACHE_USAGE, GPU_MEMORY_USAGE, SLO_CONCURRENCY, AUTOSCALING_SIGNAL,
             ERROR_BUDGET_REMAINING}
    names.update(latency(m, s) for m in LATENCY_HISTOGRAMS for s in LATENCY_STATS)
    names.update(burn_rate(w) for w in burn_windows(slos))
    return names
