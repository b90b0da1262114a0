"""Recording rules, as data: the names are a contract (dashboards and alerts query them).

Names follow ``level:metric:operation``. Per-model rules carry ``model, model_version,
backend`` (plus the label noted) and aggregate over replicas and instances with
``sum by (…)``; SLO rules carry ``slo, model, model_version, backend, band`` and are
computed **fleet-wide** from the sidecars' event counters (``fleetwatch_slo_events_total``,
``fleetwatch_slo_good_events_total``, summed over replicas), so they agree with each
sidecar's in-process burn rates when one sidecar serves the model.

Per-model signals (5-minute windows):

* ``model:modelserver_requests:rate5m`` (+ ``outcome``),
  ``model:modelserver_request_errors:ratio_rate5m``;
* for each latency histogram of :data:`LATENCY_HISTOGRAMS`: ``model:<metric>:mean5m``
  (rate of ``_sum`` ÷ rate of ``_count``) and ``:p50_5m``, ``:p90_5m``, ``:p99_5m``
  (``histogram_quantile`` over the buckets summed by ``le``; NaN where the source has only
  the ``+Inf`` bucket, as Triton's mean-only histograms — honest, not invented);
* ``model:modelserver_tokens:rate5m`` (+ ``token_type``),
  ``model:modelserver_prefix_cache_hit:ratio_rate5m`` (hits ÷ queries),
  ``model:modelserver_requests_active:sum`` (+ ``state``),
  ``model:modelserver_kv_cache_usage:max``,
  ``gpu:modelserver_gpu_memory_usage:ratio`` (labels ``gpu_uuid, backend``: used ÷ total);
* quotas (labels ``team, resource``, and ``model`` for the per-model caps):
  ``team:fleetwatch_quota_usage:sum`` (summed over the sidecars, each of which counts the
  models it serves), ``team:fleetwatch_quota_limit:max`` (every sidecar exports the same
  limit), ``team_model:fleetwatch_quota_model_usage:sum``,
  ``team_model:fleetwatch_quota_model_limit:max``;
* ``model:fleetwatch_slo_concurrency:sum``, ``model:fleetwatch_autoscaling_signal:sum`` (the
  latter only over sidecars whose own scrape succeeds: ``and on (job, instance) up == 1``);
* ``model_rollout:fleetwatch_rollout_verdict:max`` (labels ``model, baseline, candidate,
  verdict``): a verdict any replica's sidecar gives (:mod:`fleetwatch.rollout`).

SLOs: ``slo_model_band:fleetwatch_slo_burn_rate:ratio_rate<W>`` for every window ``W`` of
:func:`burn_windows` (``band="all"`` is the overall burn):
``(1 − Σrate(good) ÷ Σrate(all)) ÷ (1 − objective)``, and
``slo_model:fleetwatch_slo_error_budget_remaining:ratio`` = 1 − the burn rate over the
SLO period (band ``all``); ``slo_model:fleetwatch_slo_capacity_concurrency:min`` the
smallest capacity at SLO any replica learned, which a new replica starts from
(:mod:`fleetwatch.slo.recover`).

Import the names from here (:data:`MODEL_RULES`, :func:`slo_rules`, :func:`latency`,
:func:`burn_rate`, :func:`recorded_names`) rather than spelling them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fleetwatch.alerts.numbers import error_budget, num, window
from fleetwatch.promql import agg, rate, ratio_of_rates, sel, string
from fleetwatch.slo.recover.names import FLEET_CAPACITY  # read by new replicas
from fleetwatch.slo.sli import LATENCY_HISTOGRAMS  # latency histograms with recorded stats
from fleetwatch.slo.spec import SLOFile, SLOSpec

LatencyStat = Literal["mean", "p50", "p90", "p99"]

MODEL = ("model", "model_version", "backend")
#: A model's pool: its key and the role Prometheus copies from a disaggregated pool's pods.
POOL = (*MODEL, "role")
SLO_BAND = ("slo", "model", "model_version", "backend", "band")
SLO_MODEL = ("slo", "model", "model_version", "backend")

LATENCY_STATS: tuple[LatencyStat, ...] = ("mean", "p50", "p90", "p99")
_QUANTILES = {"p50": "0.5", "p90": "0.9", "p99": "0.99"}

REQUESTS_RATE = "model:modelserver_requests:rate5m"
ERROR_RATIO = "model:modelserver_request_errors:ratio_rate5m"
TOKENS_RATE = "model:modelserver_tokens:rate5m"
PREFIX_CACHE_HIT_RATIO = "model:modelserver_prefix_cache_hit:ratio_rate5m"
REQUESTS_ACTIVE = "model:modelserver_requests_active:sum"
KV_CACHE_USAGE = "model:modelserver_kv_cache_usage:max"
GPU_MEMORY_USAGE = "gpu:modelserver_gpu_memory_usage:ratio"
SLO_CONCURRENCY = "model:fleetwatch_slo_concurrency:sum"
QUOTA_USAGE = "team:fleetwatch_quota_usage:sum"
QUOTA_LIMIT = "team:fleetwatch_quota_limit:max"
QUOTA_MODEL_USAGE = "team_model:fleetwatch_quota_model_usage:sum"
QUOTA_MODEL_LIMIT = "team_model:fleetwatch_quota_model_limit:max"
AUTOSCALING_SIGNAL = "model:fleetwatch_autoscaling_signal:sum"
ROLLOUT_VERDICT = "model_rollout:fleetwatch_rollout_verdict:max"
ROLLOUT = ("model", "baseline", "candidate", "verdict")
ERROR_BUDGET_REMAINING = "slo_model:fleetwatch_slo_error_budget_remaining:ratio"
BURN_RATE_PREFIX = "slo_model_band:fleetwatch_slo_burn_rate:ratio_rate"


@dataclass(frozen=True)
class RecordingRule:
    """One recording rule: the recorded name, its PromQL, the labels of the series it
    records and what it means."""

    record: str
    expr: str
    labels: tuple[str, ...]
    help: str
    static: tuple[tuple[str, str], ...] = ()  # labels the rule sets (``slo`` on SLO rules)


def latency(metric: str, stat: LatencyStat) -> str:
    """``model:<metric>:mean5m`` / ``:p99_5m`` for a histogram of :data:`LATENCY_HISTOGRAMS`."""
    if metric not in LATENCY_HISTOGRAMS:
        raise KeyError(f"no recorded latency for {metric!r}")
    if stat not in LATENCY_STATS:
        raise KeyError(f"no recorded statistic {stat!r}")
    return f"model:{metric}:{stat}5m" if stat == "mean" else f"model:{metric}:{stat}_5m"


def burn_rate(window_seconds: float) -> str:
    """``slo_model_band:fleetwatch_slo_burn_rate:ratio_rate<W>`` (W like 5m, 1h, 1d, 28d)."""
    return f"{BURN_RATE_PREFIX}{window(window_seconds)}"


def burn_windows(slos: SLOFile) -> list[float]:
    """Windows (seconds, ascending) with a recorded burn rate: both windows of every pair
    of the catalog, the capacity window and every SLO's period."""
    ws = {w.long for w in slos.windows} | {w.short for w in slos.windows}
    ws.add(slos.capacity.window)
    ws.update(s.period_seconds for s in slos.slos)
    return sorted(ws)


#: The health filter of per-sidecar values: the sidecar's own scrape succeeded (the
#: series of a failed scrape linger in a remote store or a federation, not in ``up``).
SIDECAR_HEALTHY = "up == 1"
_REQUESTS_ERROR = sel("modelserver_requests_total", {"outcome": "error"})
_REQUESTS_ALL = agg("sum", MODEL, rate("modelserver_requests_total"))
_EVENTS = "fleetwatch_slo_events_total"
_GOOD = "fleetwatch_slo_good_events_total"


def _model_rules() -> tuple[RecordingRule, ...]:
    rules = [
        RecordingRule(REQUESTS_RATE,
                      agg("sum", (*MODEL, "outcome"), rate("modelserver_requests_total")),
                      (*MODEL, "outcome"), "Finished requests per second by outcome."),
        RecordingRule(
            ERROR_RATIO,
            f"(\n  {agg('sum', MODEL, rate(_REQUESTS_ERROR))}\n  or\n  0 * {_REQUESTS_ALL}\n)\n"
            f"/\n{_REQUESTS_ALL}",
            MODEL, "Share of finished requests that failed (0 when none failed; NaN "
                   "without requests)."),
    ]
    for metric in LATENCY_HISTOGRAMS:
        rules.append(RecordingRule(
            latency(metric, "mean"), ratio_of_rates(f"{metric}_sum", f"{metric}_count", MODEL),
            MODEL, f"Mean of {metric} over 5 minutes (every source)."))
        for stat in LATENCY_STATS[1:]:
            rules.append(RecordingRule(
                latency(metric, stat),
                f"histogram_quantile({_QUANTILES[stat]}, "
                f"{agg('sum', (*MODEL, 'le'), rate(f'{metric}_bucket'))})",
                MODEL, f"{stat} of {metric} over 5 minutes from the buckets (NaN for "
                       "mean-only sources such as Triton)."))
    rules += [
        RecordingRule(TOKENS_RATE,
                      agg("sum", (*MODEL, "token_type"), rate("modelserver_tokens_total")),
                      (*MODEL, "token_type"), "Tokens per second by token type."),
        RecordingRule(PREFIX_CACHE_HIT_RATIO,
                      ratio_of_rates("modelserver_prefix_cache_hits_total",
                                     "modelserver_prefix_cache_queries_total", MODEL),
                      MODEL, "Prefix-cache hit ratio (hit tokens ÷ queried tokens)."),
        RecordingRule(REQUESTS_ACTIVE,
                      agg("sum", (*MODEL, "state"), "modelserver_requests_active"),
                      (*MODEL, "state"), "Requests running or waiting, over all replicas."),
        RecordingRule(KV_CACHE_USAGE, agg("max", MODEL, "modelserver_kv_cache_usage_ratio"),
                      MODEL, "Highest KV-cache usage of any replica."),
        RecordingRule(GPU_MEMORY_USAGE,
                      "max by (gpu_uuid, backend) (modelserver_gpu_memory_used_bytes)\n/\n"
                      "max by (gpu_uuid, backend) (modelserver_gpu_memory_total_bytes)",
                      ("gpu_uuid", "backend"),
                      "GPU memory used ÷ total per GPU (max: a GPU seen by several sidecars "
                      "counts once)."),
        RecordingRule(QUOTA_USAGE, agg("sum", ("team", "resource"), "fleetwatch_quota_usage"),
                      ("team", "resource"), "Quota usage per team and resource, over the "
                      "fleet (each sidecar counts the models it serves)."),
        RecordingRule(QUOTA_LIMIT, agg("max", ("team", "resource"), "fleetwatch_quota_limit"),
                      ("team", "resource"), "Quota per team and resource (the same on every "
                      "sidecar: max)."),
        RecordingRule(QUOTA_MODEL_USAGE,
                      agg("sum", ("team", "model", "resource"), "fleetwatch_quota_model_usage"),
                      ("team", "model", "resource"), "Usage of the models with a per-model "
                      "cap, over the fleet."),
        RecordingRule(QUOTA_MODEL_LIMIT,
                      agg("max", ("team", "model", "resource"), "fleetwatch_quota_model_limit"),
                      ("team", "model", "resource"), "Per-model caps of the quota file."),
        RecordingRule(SLO_CONCURRENCY, agg("sum", MODEL, "fleetwatch_slo_concurrency"), MODEL,
                      "Observed concurrency summed over replicas."),
        RecordingRule(AUTOSCALING_SIGNAL,
                      agg("sum", POOL, "fleetwatch_autoscaling_signal_ratio and on "
                                        f"(job, instance) ({SIDECAR_HEALTHY})"), POOL,
                      "Autoscaling signal summed over the replicas whose sidecar Prometheus "
                      "scrapes (up == 1): desired replicas = ceil(this). A sidecar serves a "
                      "stale model's signal held, then saturated (docs/autoscaling.md). A "
                      "prefill or decode pool's replicas carry role: one sum per pool."),
        RecordingRule(ROLLOUT_VERDICT, agg("max", ROLLOUT, "fleetwatch_rollout_verdict"),
                      ROLLOUT, "Rollout verdict of each candidate version over the replicas "
                               "(1 when any replica's sidecar gives that verdict)."),
    ]
    return tuple(rules)


#: The per-model recording rules (they do not depend on any spec).
MODEL_RULES: tuple[RecordingRule, ...] = _model_rules()


def burn_rate_expr(slo: SLOSpec, window_seconds: float) -> str:
    """Fleet-wide burn rate of one SLO over one window, per model and band."""
    rng = window(window_seconds)
    good = agg("sum", SLO_BAND, rate(sel(_GOOD, {"slo": slo.name}), rng))
    every = agg("sum", SLO_BAND, rate(sel(_EVENTS, {"slo": slo.name}), rng))
    return f"(\n  1\n  -\n  {good}\n  /\n  {every}\n)\n/ {num(error_budget(slo.objective))}"


def slo_rules(slo: SLOSpec, windows: list[float]) -> tuple[RecordingRule, ...]:
    """Burn rates of ``slo`` over ``windows`` (seconds) and its error budget remaining."""
    out = [RecordingRule(burn_rate(w), burn_rate_expr(slo, w), SLO_BAND,
                         f"Burn rate of SLO {slo.name} over {window(w)}, per band and overall "
                         "(band=\"all\"), summed over replicas.", (("slo", slo.name),))
           for w in windows]
    period = burn_rate(slo.period_seconds)
    out.append(RecordingRule(
        ERROR_BUDGET_REMAINING,
        f"1 - sum without (band) ({period}{{slo={string(slo.name)}, band=\"all\"}})",
        SLO_MODEL, f"Share of SLO {slo.name}'s error budget left over its "
                   f"{window(slo.period_seconds)} period (negative when overspent).",
        (("slo", slo.name),)))
    out.append(RecordingRule(
        FLEET_CAPACITY,
        agg("min", SLO_MODEL, sel("fleetwatch_slo_capacity_concurrency", {"slo": slo.name})),
        SLO_MODEL, f"Capacity at SLO {slo.name} of the model: the smallest any replica "
                   "learned (requests per replica); a new replica starts from it.",
        (("slo", slo.name),)))
    return tuple(out)


def recorded_names(slos: SLOFile) -> set[str]:
    """Every recording-rule name generated for this SLO file."""
    names = {r.record for r in MODEL_RULES}
    names.update(burn_rate(w) for w in burn_windows(slos))
    names.update((ERROR_BUDGET_REMAINING, FLEET_CAPACITY))
    return names
