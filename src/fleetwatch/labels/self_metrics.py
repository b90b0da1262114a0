"""The ``fleetwatch_*`` families: what fleetwatch computes and exposes itself (the
sidecar's scrapes, the SLO engine, autoscaling, rollouts, quotas, traces), rendered by
prometheus_client. Part of the schema (:mod:`fleetwatch.labels.schema`).
"""

from __future__ import annotations

from typing import Final

from fleetwatch.labels.defs import MetricDef

_C: Final = "counter"
_G: Final = "gauge"

_MODEL_KEY = ("model", "model_version", "backend")
_SLO_LABELS = ("slo", *_MODEL_KEY)

#: Families fleetwatch computes itself (rendered by prometheus_client).
SELF_METRICS: tuple[MetricDef, ...] = (
    MetricDef("fleetwatch_upstream_up", _G, "boolean",
              "1 when the last scrape of the target returned a usable exposition.",
              ("target",), "stable", per_model=False),
    MetricDef("fleetwatch_upstream_scrape_duration_seconds", _G, "seconds",
              "Duration of the last scrape of the target (fetch + normalize).", ("target",),
              "stable", per_model=False),
    MetricDef("fleetwatch_upstream_scrape_errors_total", _C, "errors",
              "Failed scrapes by reason.", ("target", "reason"), "stable", per_model=False),
    MetricDef("fleetwatch_upstream_last_success_timestamp_seconds", _G, "seconds",
              "Unix time of the last successful scrape.", ("target",), "stable",
              per_model=False),
    MetricDef("fleetwatch_upstream_series", _G, "series",
              "Normalized series produced from the target by the last scrape.", ("target",),
              "stable", per_model=False),
    MetricDef("fleetwatch_upstream_unmapped_families", _G, "families",
              "Upstream families no mapping knows, in the last scrape (dropped unless "
              "pass-through is on).", ("target",), "stable", per_model=False),
    MetricDef("fleetwatch_upstream_invalid_lines_total", _C, "lines",
              "Exposition lines that could not be parsed and were skipped.", ("target",),
              "stable", per_model=False),
    MetricDef("fleetwatch_upstream_invalid_samples_total", _C, "samples",
              "Upstream samples refused by value validation and withdrawn, by reason "
              "(non_finite, negative, buckets_decrease, no_inf_bucket, bad_le, bad_quantile, "
              "label_too_long, no_model_label, bad_value, type_mismatch; docs/reliability.md).",
              ("target", "reason"), "alpha", per_model=False),
    MetricDef("fleetwatch_http_connections_closed_total", _C, "connections",
              "Connections to the sidecar's HTTP server closed by a bound: max_connections "
              "(closed at accept), header_timeout (headers not sent in time).",
              ("reason",), "alpha", per_model=False),
    MetricDef("fleetwatch_upstream_model_ready", _G, "boolean",
              "1 when the model reports ready (Triton /v2/models/<m>/ready, vLLM /health).",
              ("target", "model"), "stable", per_model=False),
    MetricDef("fleetwatch_model_cold_start_seconds", _G, "seconds",
              "Last measured cold start: from the model (or its target) turning not ready "
              "to ready again, as the sidecar's readiness probes saw it.",
              ("target", "model"), "beta", per_model=False),
    MetricDef("fleetwatch_model_warm", _G, "boolean",
              "1 when the model version's warm-up ran on this server instance: at least "
              "the registry's warmup.count successful requests since the server (re)started "
              "(its request counter counts since process start, so a restart resets it); "
              "0 before. Only for models with a registry warmup spec; with warmup.gate "
              "required, /readyz is 503 while it is 0 (docs/rollouts.md).",
              ("target", "model", "model_version"), "alpha", per_model=False),
    MetricDef("fleetwatch_exposition_dropped_series_total", _C, "series",
              "Series left out of /metrics because a part with precedence (normalized > "
              "self > slo > passthrough) already served that family or series, by the "
              "origin of what was dropped; counted at every /metrics assembly.",
              ("origin",), "alpha", per_model=False),
    # -- shared GPUs: quotas and the placement policy (fleetwatch.gpu) ---------------
    MetricDef("fleetwatch_quota_usage", _G, "resource",
              "What a team holds on this sidecar's GPUs, by resource: gpus (a shared GPU "
              "split by memory footprint), gpu_memory_bytes (bytes), instances. Sum over "
              "sidecars for the fleet.", ("team", "resource"), "alpha", per_model=False),
    MetricDef("fleetwatch_quota_limit", _G, "resource",
              "A team's quota by resource (quota file): the same on every sidecar.",
              ("team", "resource"), "alpha", per_model=False),
    MetricDef("fleetwatch_quota_model_usage", _G, "resource",
              "What one model of a team holds, by resource, for the models the quota file "
              "caps.", ("team", "model", "resource"), "alpha", per_model=False),
    MetricDef("fleetwatch_quota_model_limit", _G, "resource",
              "A per-model cap of the quota file, by resource.", ("team", "model", "resource"),
              "alpha", per_model=False),
    MetricDef("fleetwatch_placement_violation", _G, "boolean",
              "1 for an interactive model version (registry latency_tier) that shares its "
              "GPU with another model: the placement policy gives them a GPU of their own.",
              ("model", "model_version", "gpu_uuid", "latency_tier"), "alpha",
              per_model=False),
    # -- governance: declared vs running, model-configuration lint --------------------
    MetricDef("fleetwatch_config_drift", _G, "boolean",
              "1 when the model's running configuration field differs from the registry's "
              "declaration (declared:), else 0; only fields both sides state.",
              ("model", "field"), "alpha", per_model=False),
    MetricDef("fleetwatch_config_drift_info", _G, "info",
              "The declared and running values of each compared configuration field: "
              "value 1.", ("model", "field", "declared", "running"), "alpha",
              per_model=False),
    MetricDef("fleetwatch_model_config_findings", _G, "items",
              "Model-configuration lint findings of the model by check and severity "
              "(fleetwatch lint; docs/governance.md).", ("model", "check", "severity"),
              "alpha", per_model=False),
    MetricDef("fleetwatch_config_reads_failed_total", _C, "errors",
              "Reads of a target's running model configuration (Triton /v2/models/<m>/config, "
              "the repository index) that failed or did not parse.", ("target",), "alpha",
              per_model=False),
    # -- the SLO engine ------------------------------------------------------------
    MetricDef("fleetwatch_slo_events_total", _C, "events",
              "SLI events (all), by the concurrency band of the interval they happened in "
              "(band=\"all\": every band). Sum over replicas for fleet-wide burn rates.",
              (*_SLO_LABELS, "band"), "beta", per_model=False),
    MetricDef("fleetwatch_slo_good_events_total", _C, "events",
              "Good SLI events, by concurrency band (see fleetwatch_slo_events_total).",
              (*_SLO_LABELS, "band"), "beta", per_model=False),
    MetricDef("fleetwatch_slo_burn_rate", _G, "ratio",
              "Error rate over the window ÷ error budget (1 = budget lasts the period), "
              "per band and overall (band=\"all\"); NaN without events.",
              (*_SLO_LABELS, "band", "window"), "beta", per_model=False),
    MetricDef("fleetwatch_slo_models_refused_total", _C, "models",
              "Models an SLO selects but does not track because it tracks "
              "limits.max_models_per_slo already (counted once per refused model).",
              ("slo",), "alpha", per_model=False),
    MetricDef("fleetwatch_slo_models_evicted_total", _C, "models",
              "Models the SLO engine forgot before limits.forget_model_after because it "
              "held its most models (label churn): the least recently seen first.",
              (), "alpha", per_model=False),
    MetricDef("fleetwatch_slo_carried_series_evicted_total", _C, "series",
              "Absent series whose last cumulative value the SLO engine stopped carrying "
              "early because a target's carried series reached their bound (label churn).",
              (), "alpha", per_model=False),
    MetricDef("fleetwatch_slo_intervals_refused_total", _C, "intervals",
              "Intervals of a model whose values of one normalized metric were refused "
              "(not finite, negative counts, withdrawn or back from a gap): that metric's "
              "events are not booked for the interval, nor the interval if its "
              "concurrency reads that metric.",
              ("metric",), "alpha", per_model=False),
    MetricDef("fleetwatch_slo_error_budget_remaining_ratio", _G, "ratio",
              "Share of the period's error budget left (negative when overspent).",
              _SLO_LABELS, "beta", per_model=False),
    MetricDef("fleetwatch_slo_capacity_concurrency", _G, "requests",
              "Capacity at SLO (per-replica concurrent requests, continuous): starts at the "
              "declared envelope; a trusted band that burns lowers it below that band, "
              "good bands above raise it, the capacity model places it between good and "
              "burning load (docs/autoscaling.md).",
              _SLO_LABELS, "beta", per_model=False),
    MetricDef("fleetwatch_slo_capacity_predicted_concurrency", _G, "requests",
              "Capacity model: the per-replica concurrency at which the objective's latency "
              "quantile reaches the threshold (absent without a burning band).",
              _SLO_LABELS, "beta", per_model=False),
    MetricDef("fleetwatch_slo_band_latency_quantile_seconds", _G, "seconds",
              "Latency quantile the objective implies (0.99 for 99 %) of a latency SLI in a "
              "band, weighted over the capacity window.",
              (*_SLO_LABELS, "band", "objective_quantile"),
              "beta", per_model=False),
    MetricDef("fleetwatch_slo_band_concurrency", _G, "requests",
              "Mean per-replica concurrency of the intervals attributed to a band (the "
              "capacity model's x).", (*_SLO_LABELS, "band"), "beta", per_model=False),
    MetricDef("fleetwatch_slo_state", _G, "boolean",
              "1 for the current state of the SLO on the model: ok, regression (burn inside "
              "the concurrency envelope: page), interference (such a burn while a co-located "
              "model's load rose: platform ticket), gpu_degraded (such a burn on a throttling "
              "or erroring GPU: platform ticket), overload (burn only above it: scale out), "
              "no_data, misconfigured.", (*_SLO_LABELS, "state"), "beta", per_model=False),
    MetricDef("fleetwatch_slo_interference", _G, "boolean",
              "1 per co-located model (sidecar placement) whose load rose while the SLO's "
              "state on the model is interference (docs/interference.md).",
              (*_SLO_LABELS, "neighbour"), "alpha", per_model=False),
    MetricDef("fleetwatch_slo_interference_neighbour_concurrency", _G, "requests",
              "The interfering neighbour's mean concurrency before the burn began and during "
              "it (the evidence of fleetwatch_slo_interference).",
              (*_SLO_LABELS, "neighbour", "period"), "alpha", per_model=False),
    MetricDef("fleetwatch_slo_gpu_degraded", _G, "boolean",
              "1 per GPU of the model (sidecar placement) and condition while the SLO's state "
              "on the model is gpu_degraded.", (*_SLO_LABELS, "gpu_uuid", "gpu_condition"),
              "alpha", per_model=False),
    MetricDef("fleetwatch_slo_concurrency", _G, "requests",
              "Observed per-replica concurrency of the last interval: time-averaged requests "
              "in the system (Little's law over request durations, cross-checked with "
              "running + waiting gauges).", _MODEL_KEY, "beta", per_model=False),
    MetricDef("fleetwatch_autoscaling_signal_ratio", _G, "ratio",
              "Autoscaling signal: the largest component, held at its peak over one cold "
              "start; with an HPA/KEDA AverageValue target of 1, desired replicas = "
              "ceil(sum over replicas).", _MODEL_KEY, "beta",
              per_model=False),
    MetricDef("fleetwatch_autoscaling_signal_stale", _G, "boolean",
              "1 for the reason the model's data is stale (target_down, scrape_timeout, "
              "frozen: counters still while requests run or wait), 0 for the others; while "
              "stale the signal is held for autoscaling.stale_hold, then reads "
              "autoscaling.stale_signal (docs/autoscaling.md).", (*_MODEL_KEY, "reason"),
              "beta", per_model=False),
    MetricDef("fleetwatch_autoscaling_min_replicas", _G, "replicas",
              "Recommended minimum replicas: autoscaling.cold_start_min_replicas when the "
              "model's cold start exceeds autoscaling.cold_start_bound_seconds, else 1.",
              _MODEL_KEY, "beta", per_model=False),
    MetricDef("fleetwatch_autoscaling_desired_replicas", _G, "replicas",
              "Replicas this replica's load needs at an autoscaling target of 1: "
              "max(min_replicas, ceil(signal)); /autoscaling names the component that "
              "drives it. The fleet's desired replicas are ceil(sum of the signal).",
              _MODEL_KEY, "beta", per_model=False),
    MetricDef("fleetwatch_autoscaling_component_ratio", _G, "ratio",
              "Autoscaling components: concurrency ÷ capacity at SLO, queue wait ÷ target, "
              "KV-cache usage ÷ target, GPU-memory usage ÷ target.",
              (*_MODEL_KEY, "component"), "beta", per_model=False),
    MetricDef("fleetwatch_rollout_verdict", _G, "boolean",
              "1 for the current verdict of a candidate version against the baseline "
              "version of the same model, compared concurrency band by band on every SLO's "
              "SLI over the SLO's period (two-proportion test per band; docs/rollouts.md): "
              "better, same, worse, not_enough_data. For models with two or more versions "
              "in the SLO engine; the baseline is the oldest.",
              ("model", "baseline", "candidate", "verdict"), "alpha", per_model=False),
    # -- the OTLP trace receiver (fleetwatch.otlp.receiver) ---------------------------
    MetricDef("fleetwatch_traces_spans_total", _C, "spans",
              "Spans received in accepted OTLP export bodies (/v1/traces), refused ones "
              "included.", (), "alpha",
              per_model=False),
    MetricDef("fleetwatch_traces_requests_total", _C, "requests",
              "Requests joined from spans (Triton: by trace id; vLLM: one llm_request span "
              "each) and judged against the traces SLOs.", (), "alpha", per_model=False),
    MetricDef("fleetwatch_traces_refused_bodies_total", _C, "bodies",
              "OTLP export bodies refused with an OTLP error response, by reason.",
              ("trace_reason",), "alpha", per_model=False),
    MetricDef("fleetwatch_traces_refused_spans_total", _C, "spans",
              "Spans refused before they touched state (bad times, durations or sizes), and "
              "requests of models beyond traces.max_models, by reason.",
              ("trace_reason",), "alpha", per_model=False),
    MetricDef("fleetwatch_traces_models", _G, "models",
              "Models the receiver keeps trace state for (at most traces.max_models).",
              (), "alpha", per_model=False),
    MetricDef("fleetwatch_traces_connections_closed_total", _C, "connections",
              "Connections to the OTLP receiver's port closed by a bound: max_connections "
              "(closed at accept), header_timeout (headers not sent in time).",
              ("reason",), "alpha", per_model=False),
    MetricDef("fleetwatch_traces_dropped_total", _C, "traces",
              "Traces (spans for late and span_overflow) dropped by the join buffer, by "
              "reason.", ("trace_reason",), "alpha", per_model=False),
    MetricDef("fleetwatch_traces_pending_traces", _G, "traces",
              "Triton traces waiting in the join buffer for their remaining spans (at most "
              "traces.buffer_traces).", (), "alpha", per_model=False),
    MetricDef("fleetwatch_traces_forwarded_bodies_total", _C, "bodies",
              "OTLP bodies re-posted unchanged to traces.forward.url, by result.",
              ("forward_result",), "alpha", per_model=False),
)
