"""Dashboard 1 — fleet overview: every model of the selected teams side by side."""

from __future__ import annotations

from grafanalib import core as g

from fleetwatch.dashboards import names as n
from fleetwatch.dashboards import panels as p
from fleetwatch.dashboards.common import (
    INFO,
    MODEL_KEY,
    dashboard,
    datasource_variable,
    info_dedup,
    of_team,
    slo_state_code,
    team_variable,
)
from fleetwatch.dashboards.panels import Q
from fleetwatch.labels.registry import Registry
from fleetwatch.promql import agg, sel

TEAM = {"team": "$team"}
MVB = "{{model}} {{model_version}} ({{backend}})"
GPU_COND = ("needs GPU metrics — Triton's nv_gpu_* (with --allow-gpu-metrics) or a "
            "dcgm-exporter target; empty on CPU-only hosts.")


def p99_queries(metric: str, summary: str | None, team_filter: bool = True) -> list[Q]:
    """p99 where the source has it: from histogram buckets (recorded quantile; NaN where a
    source has no buckets is dropped) and from Triton's summaries (60 s sliding window)."""
    hist = f"{n.latency(metric, 'p99')} >= 0"
    qs = [Q(of_team(hist) if team_filter else hist, MVB + " buckets")]
    if summary:
        summ = agg("max", MODEL_KEY, sel(summary, eq={"quantile": "0.99"})) + " >= 0"
        qs.append(Q(of_team(summ) if team_filter else summ, MVB + " summary"))
    return qs


def _models_table() -> g.Table:
    rate_by_model = agg("sum", MODEL_KEY, n.REQUESTS_RATE)
    queries = [
        Q(info_dedup({"team": "$team"}, ("team", "owner", "oncall", "latency_tier",
                                         "runtime")), instant=True, table=True),
        Q(of_team(rate_by_model), instant=True, table=True),
        Q(of_team(n.ERROR_RATIO), instant=True, table=True),
        Q(of_team(n.latency("modelserver_request_duration_seconds", "mean")), instant=True,
          table=True),
        Q(of_team(slo_state_code({})), instant=True, table=True),
    ]
    transformations = [
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {
            "excludeByName": {"Time": True, "Value #A": True},
            "indexByName": {"model": 0, "model_version": 1, "backend": 2, "runtime": 3,
                            "team": 4, "owner": 5, "oncall": 6, "latency_tier": 7,
                            "Value #B": 8, "Value #C": 9, "Value #D": 10, "Value #E": 11},
            "renameByName": {"model_version": "version", "latency_tier": "latency tier",
                             "Value #B": "requests/s", "Value #C": "error ratio",
                             "Value #D": "mean latency", "Value #E": "SLO state"},
        }},
    ]
    overrides = [
        p.override("requests/s", unit=p.REQ_PER_S),
        p.override("error ratio", unit=p.RATIO),
        p.override("mean latency", unit=p.SECONDS),
        p.override("SLO state", mappings=p.value_map(p.STATE_CODES),
                   custom_displayMode="color-background"),
    ]
    return p.table(
        "Models", "Every observed model of the selected teams with its registry metadata "
        "(team, owner, on-call, latency tier from modelserver_model_info), request rate, "
        "error ratio and mean latency over 5 minutes, and its worst SLO state: regression "
        "(burn inside the concurrency envelope: page), overload (burn only above it: scale "
        "out), ok. Models without an owner are not in the registry.",
        queries, transformations=transformations, overrides=overrides)


def build_fleet_dashboard(registry: Registry) -> g.Dashboard:
    """The fleet overview; ``registry`` only documents the registered teams."""
    teams = sorted({e.team for e in registry.entries})
    grid = p.Grid()

    grid.row("Fleet")
    grid.add(p.stat("Models serving", "Distinct models (all versions and backends) that a "
                    "sidecar observes now.",
                    [Q(f"count(count by (model) ({sel(INFO, re_=TEAM)}))", instant=True)],
                    p.NONE), 4, 4)
    grid.add(p.stat("Requests/s", "Finished requests per second over 5 minutes, all "
                    "outcomes.", [Q(f"sum({of_team(n.REQUESTS_RATE)})")], p.REQ_PER_S), 4, 4)
    grid.add(p.stat("Error ratio", "Failed ÷ all finished requests over 5 minutes, fleet "
                    "wide.", [Q(f'sum({of_team(sel(n.REQUESTS_RATE, eq={"outcome": "error"}))})'
                               f" / sum({of_team(n.REQUESTS_RATE)})")], p.RATIO,
                    thresholds=p.steps((p.GREEN, None), (p.ORANGE, 0.01), (p.RED, 0.05))),
             4, 4)
    grid.add(p.stat("Tokens/s", "Input plus output tokens per second of the LLMs over 5 "
                    "minutes.", [Q(f"sum({of_team(n.TOKENS_RATE)})")], p.TOKENS_PER_S), 4, 4)
    for state, color in (("regression", p.RED), ("overload", p.ORANGE)):
        grid.add(p.stat(
            f"SLOs in {state}",
            f"(SLO, model) pairs whose state is {state} now"
            + (" — a burn inside the concurrency envelope: the owner is paged."
               if state == "regression" else
               " — a burn only above the envelope: scale out, nobody is paged."),
            [Q(f'count({of_team(sel("fleetwatch_slo_state", eq={"state": state}))} == 1) '
               "or vector(0)", instant=True)], p.NONE,
            thresholds=p.steps((p.GREEN, None), (color, 1))), 4, 4)
    grid.add(_models_table(), 24, 9)

    grid.row("Traffic and latency")
    grid.add(p.timeseries("Request rate by model", "Finished requests per second over 5 "
                          "minutes, by model (all versions, outcomes and backends).",
                          [Q(agg("sum", ("model",), of_team(n.REQUESTS_RATE)), "{{model}}")],
                          p.REQ_PER_S, stack=True), 12)
    grid.add(p.timeseries("Error ratio", "Failed ÷ all finished requests over 5 minutes. "
                          "Triton counts only exceptions raised by the model as failures; "
                          "vLLM counts aborts as errors.",
                          [Q(of_team(n.ERROR_RATIO), MVB)], p.RATIO,
                          thresholds=p.steps((p.GREEN, None), (p.RED, 0.01))), 12)
    grid.add(p.timeseries("Mean request latency", "Mean end-to-end latency over 5 minutes "
                          "(Δsum ÷ Δcount): available from every backend.",
                          [Q(of_team(n.latency("modelserver_request_duration_seconds",
                                               "mean")), MVB)], p.SECONDS), 8)
    grid.add(p.timeseries("p99 request latency (where available)", "p99 end-to-end latency: "
                          "from histogram buckets over 5 minutes (vLLM and LLM backends), or "
                          "from Triton's latency summary (60 s sliding window, needs "
                          "--metrics-config summary_latencies=true). Triton's core metrics "
                          "have no buckets, so no histogram quantile is shown for them.",
                          p99_queries("modelserver_request_duration_seconds",
                                      "modelserver_request_duration_summary_seconds"),
                          p.SECONDS), 8)
    grid.add(p.timeseries("Mean queue wait", "Mean time requests wait in the server's "
                          "scheduler queue over 5 minutes.",
                          [Q(of_team(n.latency("modelserver_queue_duration_seconds", "mean")),
                             MVB)], p.SECONDS), 8)
    grid.add(p.timeseries("Concurrency", "Requests in flight summed over replicas, as the "
                          "SLO engine observes them each interval (running requests, or "
                          "Little's law from request durations). Needs the sidecar's SLO "
                          "engine (--slos).",
                          [Q(of_team(n.SLO_CONCURRENCY), MVB)], p.REQUESTS), 12)
    grid.add(p.timeseries("Tokens/s (LLMs)", "Tokens per second over 5 minutes by model and "
                          "type (input = prompt, output = generated).",
                          [Q(agg("sum", ("model", "token_type"), of_team(n.TOKENS_RATE)),
                             "{{model}} {{token_type}}")], p.TOKENS_PER_S, stack=True), 12)

    grid.row("GPUs")
    grid.add(p.timeseries("GPU utilization by GPU", "Share of time the GPU was busy, per GPU.",
                          [Q("max by (hostname, gpu_uuid) (modelserver_gpu_utilization_ratio)",
                             "{{hostname}} {{gpu_uuid}}")], p.RATIO, min_=0, max_=1,
                          conditional=GPU_COND), 12)
    grid.add(p.timeseries("GPU memory by GPU", "Framebuffer memory in use and in total, per "
                          "GPU.",
                          [Q("max by (hostname, gpu_uuid) (modelserver_gpu_memory_used_bytes)",
                             "used {{hostname}} {{gpu_uuid}}"),
                           Q("max by (hostname, gpu_uuid) (modelserver_gpu_memory_total_bytes)",
                             "total {{hostname}} {{gpu_uuid}}")], p.BYTES,
                          conditional=GPU_COND), 12)

    description = ("Every model of the selected teams, whatever its engine: traffic, errors, "
                   "latency, concurrency, tokens, GPUs and SLO state. Generated by "
                   "`fleetwatch dashboards`; do not edit. Registered teams: "
                   + (", ".join(teams) or "none") + ".")
    return dashboard("fleet", description, grid.panels(),
                     [datasource_variable(), team_variable()])
