"""Dashboard 2 — model detail: one model (or a few) of a team, by version and backend."""

from __future__ import annotations

from grafanalib import core as g

from fleetwatch.dashboards import names as n
from fleetwatch.dashboards import panels as p
from fleetwatch.dashboards.common import (
    INFO,
    MODEL_KEY,
    MODEL_VARS,
    backend_variable,
    dashboard,
    datasource_variable,
    info_dedup,
    model_variable,
    slo_state_code,
    team_variable,
    version_variable,
)
from fleetwatch.dashboards.names import window
from fleetwatch.dashboards.panels import Q
from fleetwatch.promql import agg, mean_of, rate, sel
from fleetwatch.slo.spec import SLOFile

M = MODEL_VARS  # model=~"$model", model_version=~"$version", backend=~"$backend"
MB = {"model": "$model", "backend": "$backend"}  # every version: rollout comparison
V = "{{model}} v{{model_version}}"
REQ = "modelserver_request_duration_seconds"
QUEUE = "modelserver_queue_duration_seconds"
TRTLLM_COND = "TensorRT-LLM backend only (nv_trt_llm_kv_cache_block_metrics)."
CACHE_COND = ("Triton response cache only (--cache-config and response_cache enabled in the "
              "model configuration).")


def _quantiles(metric: str, matchers: dict[str, str], legend: str = V) -> list[Q]:
    return [Q(f"{sel(n.latency(metric, s), re_=matchers)} >= 0", f"{s} {legend}")
            for s in ("p50", "p90", "p99")]


def _summary_quantiles(summary: str, matchers: dict[str, str], legend: str = V) -> list[Q]:
    return [Q(agg("max", MODEL_KEY, sel(summary, eq={"quantile": q}, re_=matchers)) + " >= 0",
              f"{label} {legend} (summary)") for q, label in (("0.5", "p50"), ("0.99", "p99"))]


def _header(grid: p.Grid) -> None:
    grid.row("Model")
    grid.add(p.table(
        "Registry", "Who owns the selected models (modelserver_model_info, from the model "
        "registry): team, owner, on-call rotation, latency tier, and the runtime that executes "
        "each version.",
        [Q(info_dedup(M, ("team", "owner", "oncall", "latency_tier", "runtime")),
           instant=True, table=True)],
        transformations=[{"id": "organize", "options": {
            "excludeByName": {"Time": True, "Value": True},
            "renameByName": {"model_version": "version", "latency_tier": "latency tier"}}}],
        overrides=[]), 12, 6)
    grid.add(p.stat("Requests/s", "Finished requests per second over 5 minutes.",
                    [Q(f"sum({sel(n.REQUESTS_RATE, re_=M)})")], p.REQ_PER_S), 3, 6)
    grid.add(p.stat("Error ratio", "Failed ÷ all finished requests over 5 minutes.",
                    [Q(f'sum({sel(n.REQUESTS_RATE, eq={"outcome": "error"}, re_=M)}) / '
                       f"sum({sel(n.REQUESTS_RATE, re_=M)})")], p.RATIO,
                    thresholds=p.steps((p.GREEN, None), (p.ORANGE, 0.01), (p.RED, 0.05))),
             3, 6)
    grid.add(p.stat("Mean latency", "Mean end-to-end request latency over 5 minutes "
                    "(highest of the selected versions).",
                    [Q(f"max({sel(n.latency(REQ, 'mean'), re_=M)})")], p.SECONDS), 3, 6)
    grid.add(p.stat("SLO state", "Worst state over the model's SLOs and replicas: regression "
                    "(burn inside the concurrency envelope: page), overload (burn only above "
                    "it: scale out), misconfigured, ok, no data. Needs the sidecar's SLO "
                    "engine (--slos).",
                    [Q(f"max({slo_state_code(M)})", instant=True)], p.NONE,
                    mappings=p.value_map(p.STATE_CODES),
                    thresholds=p.steps((p.GREY, None), (p.GREEN, 1), (p.ORANGE, 2),
                                       (p.PURPLE, 3), (p.RED, 4))), 3, 6)


def _red(grid: p.Grid) -> None:
    grid.row("Rate, errors, duration")
    grid.add(p.timeseries("Requests/s by outcome", "Finished requests per second over 5 "
                          "minutes, by version and outcome.",
                          [Q(agg("sum", ("model", "model_version", "outcome"),
                                 sel(n.REQUESTS_RATE, re_=M)), V + " {{outcome}}")],
                          p.REQ_PER_S, stack=True), 8)
    grid.add(p.timeseries("Errors/s by type", "Failed requests per second over 5 minutes by "
                          "error type (Triton `reason`, vLLM finish reason): rejected, "
                          "cancelled, backend, internal, overload, other.",
                          [Q(agg("sum", ("model", "model_version", "error_type"),
                                 rate(sel("modelserver_requests_total", eq={"outcome": "error"},
                                          re_=M))), V + " {{error_type}}")],
                          p.REQ_PER_S, stack=True), 8)
    grid.add(p.timeseries("Error ratio", "Failed ÷ all finished requests over 5 minutes.",
                          [Q(sel(n.ERROR_RATIO, re_=M), V + " ({{backend}})")], p.RATIO,
                          thresholds=p.steps((p.GREEN, None), (p.RED, 0.01))), 8)
    grid.add(p.timeseries(
        "Request latency", "End-to-end latency over 5 minutes: the mean (every backend), "
        "p50/p90/p99 from histogram buckets where the source has them (vLLM, LLM backends), "
        "and Triton's summary quantiles (60 s sliding window, needs --metrics-config "
        "summary_latencies=true). Triton core metrics have no buckets: no histogram quantile "
        "is invented for them.",
        [Q(sel(n.latency(REQ, "mean"), re_=M), "mean " + V), *_quantiles(REQ, M),
         *_summary_quantiles("modelserver_request_duration_summary_seconds", M)],
        p.SECONDS), 24, 9)


def _breakdown(grid: p.Grid) -> None:
    grid.row("Latency breakdown")
    phase_mean = mean_of("modelserver_phase_duration_seconds",
                         ("model", "model_version", "phase"), M)
    grid.add(p.timeseries(
        "Where the time goes (means)", "Mean time per request in the queue and in each "
        "processing phase over 5 minutes, stacked: Triton's compute_input / compute_infer / "
        "compute_output, vLLM's prefill / decode. Phase sets differ between backends: "
        "compare within a backend.",
        [Q(sel(n.latency(QUEUE, "mean"), re_=M), "queue " + V),
         Q(phase_mean, "{{phase}} " + V)], p.SECONDS, stack=True), 12)
    grid.add(p.timeseries(
        "Queue wait", "Time waiting in the scheduler queue over 5 minutes: mean, p99 from "
        "buckets (vLLM) and Triton's p99 summary.",
        [Q(sel(n.latency(QUEUE, "mean"), re_=M), "mean " + V),
         Q(f"{sel(n.latency(QUEUE, 'p99'), re_=M)} >= 0", "p99 " + V),
         Q(agg("max", MODEL_KEY, sel("modelserver_queue_duration_summary_seconds",
                                     eq={"quantile": "0.99"}, re_=M)) + " >= 0",
           "p99 " + V + " (summary)")], p.SECONDS), 12)
    phase_labels = ("model", "model_version", "phase")
    grid.add(p.timeseries(
        "Phase p99", "p99 per processing phase: from histogram buckets (vLLM prefill/decode) "
        "and Triton's compute summaries (60 s window).",
        [Q("histogram_quantile(0.99, " + agg("sum", (*phase_labels, "le"), rate(sel(
            "modelserver_phase_duration_seconds_bucket", re_=M))) + ") >= 0",
           "{{phase}} " + V),
         Q(agg("max", phase_labels, sel("modelserver_phase_duration_summary_seconds",
                                        eq={"quantile": "0.99"}, re_=M)) + " >= 0",
           "{{phase}} " + V + " (summary)")], p.SECONDS), 8)
    per = ("model", "model_version")
    grid.add(p.timeseries(
        "Batch size", "Items per model execution over 5 minutes (Triton: inferences per "
        "batch; vLLM: tokens per engine step). Compare within a backend.",
        [Q(agg("sum", per, rate(sel("modelserver_batch_items_total", re_=M))) + " / "
           + agg("sum", per, rate(sel("modelserver_batch_executions_total", re_=M))), V)],
        "suffix: items"), 8)
    grid.add(p.timeseries(
        "Response cache hit ratio", "Triton response-cache hits ÷ lookups over 5 minutes.",
        [Q(agg("sum", per, rate(sel("modelserver_response_cache_lookups_total",
                                     eq={"result": "hit"}, re_=M))) + " / "
           + agg("sum", per, rate(sel("modelserver_response_cache_lookups_total", re_=M))),
           V)], p.RATIO, min_=0, max_=1, conditional=CACHE_COND), 8)


def _llm(grid: p.Grid) -> None:
    grid.row("LLM: tokens, TTFT, ITL, TPOT, KV cache (collapsed; empty for models without "
             "token signals)", collapsed=True,
             description="Only LLMs (vLLM, Triton's vLLM and TensorRT-LLM backends) have these "
                         "signals; the row stays collapsed so classic models query nothing.")
    for metric, title, what in (
            ("modelserver_time_to_first_token_seconds", "Time to first token",
             "from request arrival to the first output token"),
            ("modelserver_inter_token_latency_seconds", "Inter-token latency",
             "gap between consecutive output tokens (one observation per gap)"),
            ("modelserver_time_per_output_token_seconds", "Time per output token",
             "a request's mean time per token after the first (one observation per "
             "request)")):
        grid.add(p.timeseries(f"{title} p50 / p90 / p99",
                              f"{title} ({what}), quantiles from histogram buckets over 5 "
                              "minutes.", _quantiles(metric, M), p.SECONDS), 8)
    grid.add(p.timeseries("Tokens/s", "Input (prompt) and output (generated) tokens per "
                          "second over 5 minutes.",
                          [Q(sel(n.TOKENS_RATE, re_=M), V + " {{token_type}}")],
                          p.TOKENS_PER_S), 8)
    grid.add(p.timeseries("Running and waiting requests", "Requests inside the engine now, "
                          "summed over replicas: running (in the batch) and waiting (queued). "
                          "Triton's core reports only waiting (pending) requests.",
                          [Q(sel(n.REQUESTS_ACTIVE, re_=M), V + " {{state}}")], p.REQUESTS),
             8)
    grid.add(p.timeseries("KV-cache usage", "Fraction of KV-cache blocks in use (highest "
                          "replica). Near 1 the engine preempts or queues requests.",
                          [Q(sel(n.KV_CACHE_USAGE, re_=M), V)], p.RATIO, min_=0, max_=1,
                          thresholds=p.steps((p.GREEN, None), (p.RED, 0.9))), 8)
    v0_gauge = agg("max", MODEL_KEY, sel("modelserver_prefix_cache_hit_ratio", re_=M))
    grid.add(p.timeseries("Prefix-cache hit ratio", "Prompt tokens served from the prefix "
                          "cache ÷ prompt tokens looked up, over 5 minutes (vLLM V1 counters); "
                          "vLLM V0 reports a block hit-rate gauge instead, shown when the "
                          "counters are absent.",
                          [Q(f"{sel(n.PREFIX_CACHE_HIT_RATIO, re_=M)} or ({v0_gauge} >= 0)",
                             V)], p.RATIO, min_=0, max_=1), 8)
    grid.add(p.timeseries("Preemptions/s", "Requests the engine preempted per second over 5 "
                          "minutes (KV cache exhausted: recomputed or swapped later).",
                          [Q(agg("sum", ("model", "model_version"),
                                 rate(sel("modelserver_preemptions_total", re_=M))), V)],
                          p.PER_S), 8)
    _spec_decode(grid)
    grid.add(p.timeseries("KV-cache blocks (TensorRT-LLM)", "KV-cache blocks used, free, max "
                          "and reused as TensorRT-LLM reports them.",
                          [Q(agg("max", ("model", "model_version", "block_state"),
                                 sel("modelserver_kv_cache_blocks", re_=M)),
                             V + " {{block_state}}")], "suffix: blocks",
                          conditional=TRTLLM_COND), 8)


def _spec_decode(grid: p.Grid) -> None:
    """Speculative decoding: the acceptance rate, overall and by position in the draft."""
    per = ("model", "model_version")
    drafted = agg("sum", per, rate(sel("modelserver_spec_decode_draft_tokens_total", re_=M)))
    accepted = agg("sum", per, rate(sel("modelserver_spec_decode_accepted_tokens_total",
                                        re_=M)))
    drafts = agg("sum", per, rate(sel("modelserver_spec_decode_drafts_total", re_=M)))
    by_pos = agg("sum", (*per, "draft_position"), rate(sel(
        "modelserver_spec_decode_accepted_tokens_by_position_total", re_=M)))
    grid.add(p.timeseries("LoRA adapters with requests", "LoRA adapters of the base model "
                          "that have running or waiting requests now (1), from vLLM's latest "
                          "lora_requests_info, highest replica. vLLM names adapters, not how "
                          "many requests each has.",
                          [Q(agg("max", ("model", "adapter", "state"),
                                 sel("modelserver_adapter_requests_present", re_=M)),
                             "{{adapter}} {{state}}")], p.REQUESTS, min_=0, stack=True,
                          conditional="vLLM with --enable-lora only."), 8)
    grid.add(p.timeseries("Speculative decoding acceptance", "Drafted tokens the model "
                          "accepted ÷ drafted tokens over 5 minutes, summed over replicas, "
                          "and by position in the draft (accepted at that position ÷ drafts). "
                          "Speculation pays while the acceptance rate stays high; a fall at "
                          "the same traffic is a regression of the draft method or model.",
                          [Q(f"{accepted} / {drafted}", V + " all positions"),
                           Q(f"{by_pos} / ignoring (draft_position) group_left {drafts}",
                             V + " position {{draft_position}}")],
                          p.RATIO, min_=0, max_=1,
                          conditional="vLLM with --speculative-config only."), 8)


def _versions(grid: p.Grid, slos: SLOFile) -> None:
    grid.row("Version comparison (rollouts: canary vs current)")
    per = ("model", "model_version")
    rate_v = agg("sum", per, sel(n.REQUESTS_RATE, re_=MB))
    grid.add(p.timeseries("Traffic share by version", "Share of the model's requests each "
                          "version serves over 5 minutes (every version, whatever the "
                          "version selector).",
                          [Q(f"{rate_v} / on (model) group_left "
                             + agg("sum", ("model",), sel(n.REQUESTS_RATE, re_=MB)), V)],
                          p.RATIO, min_=0, max_=1, stack=True), 8)
    grid.add(p.timeseries("Error ratio by version", "Failed ÷ all finished requests of each "
                          "version over 5 minutes.",
                          [Q(agg("sum", per, sel(n.REQUESTS_RATE, eq={"outcome": "error"},
                                                 re_=MB)) + f" / {rate_v}", V)], p.RATIO,
                          thresholds=p.steps((p.GREEN, None), (p.RED, 0.01))), 8)
    grid.add(p.timeseries("Mean latency by version", "Mean end-to-end latency of each version "
                          "over 5 minutes.",
                          [Q(agg("max", per, sel(n.latency(REQ, "mean"), re_=MB)), V)],
                          p.SECONDS), 8)
    grid.add(p.timeseries("p99 latency by version", "p99 end-to-end latency of each version: "
                          "histogram buckets where they exist, else Triton's summary (60 s "
                          "window).",
                          [Q(agg("max", per, sel(n.latency(REQ, "p99"), re_=MB)) + " >= 0",
                             V + " buckets"),
                           Q(agg("max", per, sel("modelserver_request_duration_summary_seconds",
                                                 eq={"quantile": "0.99"}, re_=MB)) + " >= 0",
                             V + " summary")], p.SECONDS), 12)
    grid.add(p.state_timeline(
        "Configuration identity", "Engine version and quantization each version runs with "
        "(modelserver_model_info: engine_version from the server, quantization from the "
        "server or the registry), one row per identity: an engine upgrade or a re-quantized "
        "deployment ends one row and starts another.",
        [Q(agg("max", (*per, "backend", "engine_version", "quantization"), sel(INFO, re_=MB)),
           V + " {{backend}} {{engine_version}} {{quantization}}")],
        mappings=p.value_map({1: ("running", p.BLUE)})), 24, 6)
    fastest = min(w.long for w in slos.windows)
    grid.add(p.timeseries(f"SLO burn rate ({window(fastest)}) by version",
                          "Overall burn rate of each SLO per version over the fastest paging "
                          "window: a canary that burns while the current version does not is "
                          "a regression of the canary. 1 = the budget lasts exactly the "
                          "period.",
                          [Q(agg("max", ("slo", *per), sel(n.burn_rate(fastest),
                                                           eq={"band": "all"}, re_=MB)),
                             "{{slo}} " + V)], p.BURN,
                          thresholds=p.steps((p.GREEN, None), (p.ORANGE, 1))), 12)


def build_model_dashboard(slos: SLOFile) -> g.Dashboard:
    grid = p.Grid()
    _header(grid)
    _red(grid)
    _breakdown(grid)
    _llm(grid)
    _versions(grid, slos)
    return dashboard(
        "model", "One model's RED metrics, latency breakdown, LLM signals and version "
        "comparison, whatever engine serves it. Generated by `fleetwatch dashboards`; do "
        "not edit.", grid.panels(),
        [datasource_variable(), team_variable(), model_variable(), version_variable(),
         backend_variable()])
