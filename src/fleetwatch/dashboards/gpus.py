"""Dashboard 4 — GPUs and capacity: per-GPU utilization, memory, power and energy; shared
GPUs (models per GPU, memory per model, usage against quota by team, the rollout memory
plan, placement-policy violations); which models share a sidecar's GPUs; capacity and load
by team."""

from __future__ import annotations

from grafanalib import core as g

from fleetwatch.alerts.families.gpus import GPU_MEMORY_TOTAL, ROLLOUT_PEAK
from fleetwatch.dashboards import names as n
from fleetwatch.dashboards import panels as p
from fleetwatch.dashboards.common import (
    INFO,
    MODEL_KEY,
    dashboard,
    datasource_variable,
    of_team,
    team_variable,
    with_team,
)
from fleetwatch.dashboards.fleet import GPU_COND
from fleetwatch.dashboards.panels import Q
from fleetwatch.promql import agg, rate, sel

GPU = ("hostname", "gpu_uuid")
GL = "{{hostname}} {{gpu_uuid}}"
TEAM = {"team": "$team"}
V = "{{model}} v{{model_version}}"


def _gpu(metric: str) -> str:
    return agg("max", GPU, metric)


def _gpus(grid: p.Grid) -> None:
    grid.row("GPUs")
    grid.add(p.timeseries("Utilization", "Share of time each GPU was busy (dcgm-exporter "
                          "GPU_UTIL, or Triton's nv_gpu_utilization).",
                          [Q(_gpu("modelserver_gpu_utilization_ratio"), GL)], p.RATIO,
                          min_=0, max_=1, conditional=GPU_COND), 8)
    grid.add(p.timeseries("Memory used and total", "Framebuffer memory in use and in total "
                          "per GPU.",
                          [Q(_gpu("modelserver_gpu_memory_used_bytes"), "used " + GL),
                           Q(_gpu("modelserver_gpu_memory_total_bytes"), "total " + GL)],
                          p.BYTES, conditional=GPU_COND), 8)
    grid.add(p.timeseries("Memory headroom", "Free framebuffer memory per GPU (total − used): "
                          "what another model or a larger KV cache could still use.",
                          [Q(_gpu("modelserver_gpu_memory_total_bytes") + " - "
                             + _gpu("modelserver_gpu_memory_used_bytes"), GL)], p.BYTES,
                          conditional=GPU_COND), 8)
    grid.add(p.timeseries("Memory usage ratio", "Used ÷ total framebuffer memory per GPU (the "
                          "autoscaler's GPU-memory component compares it with its target).",
                          [Q(agg("max", ("gpu_uuid",), n.GPU_MEMORY_USAGE), "{{gpu_uuid}}")],
                          p.RATIO, min_=0, max_=1,
                          thresholds=p.steps((p.GREEN, None), (p.RED, 0.9)),
                          conditional=GPU_COND), 8)
    grid.add(p.timeseries("Power", "Power draw per GPU against its management limit.",
                          [Q(_gpu("modelserver_gpu_power_watts"), "draw " + GL),
                           Q(_gpu("modelserver_gpu_power_limit_watts"), "limit " + GL)],
                          p.WATTS, conditional=GPU_COND), 8)
    grid.add(p.timeseries("Energy per hour", "Energy each GPU consumed over the last hour "
                          "(increase of the energy counter; counter resets handled).",
                          [Q(agg("max", GPU, "increase(modelserver_gpu_energy_joules_total[1h])"),
                             GL)], p.JOULES, conditional=GPU_COND), 8)
    grid.add(p.timeseries("Temperature", "GPU temperature (dcgm-exporter).",
                          [Q(_gpu("modelserver_gpu_temperature_celsius"), GL)], p.CELSIUS,
                          conditional=GPU_COND), 8)


PLACEMENT_COND = ("needs a GPU placement: declared (the sidecar's placement:) or "
                  "discovered (Triton's per-model gpu_uuid and KIND_GPU instance groups, "
                  "dcgm-exporter's pod mapping).")
QUOTA_COND = "needs a quota file (the sidecar's quotas:) and a placement."
FOOTPRINT = "modelserver_model_memory_footprint_bytes"


def _shared(grid: p.Grid) -> None:
    grid.row("Shared GPUs: placement, quotas, rollout memory")
    grid.add(p.table(
        "Models per GPU", "Which model version runs on which GPU with how many instances "
        "(modelserver_model_placement; docs/gpus.md says where each placement comes from).",
        [Q(agg("max", ("gpu_uuid", "model", "model_version", "instances"),
               "modelserver_model_placement"), instant=True, table=True)],
        transformations=[{"id": "organize", "options": {
            "excludeByName": {"Time": True, "Value": True},
            "renameByName": {"model_version": "version", "gpu_uuid": "GPU"}}}],
        overrides=[], conditional=PLACEMENT_COND), 8, 8)
    grid.add(p.timeseries(
        "Memory per model", "GPU memory each placed model version takes, per GPU, stacked "
        "(its footprint: Triton statistics, vLLM's reservation, the load-time delta or the "
        "registry's gpu_memory_bytes).",
        [Q(agg("max", ("gpu_uuid", "model", "model_version"), FOOTPRINT),
           "{{gpu_uuid}} {{model}} v{{model_version}}")], p.BYTES, stack=True,
        conditional=PLACEMENT_COND), 8)
    grid.add(p.timeseries(
        "Quota usage ÷ limit by team", "Each team's fleet-wide usage of each resource (GPUs "
        "split by memory footprint, GPU memory, instances) ÷ its quota; above 1 the team is "
        "over quota (FleetwatchQuotaExceeded).",
        [Q(sel(n.QUOTA_USAGE, re_=TEAM) + " / on (team, resource) " + n.QUOTA_LIMIT,
           "{{team}} {{resource}}")], p.RATIO, min_=0,
        thresholds=p.steps((p.GREEN, None), (p.RED, 1)), conditional=QUOTA_COND), 8)
    grid.add(p.table(
        "Quota usage and limit", "Usage and quota per team and resource, over the fleet.",
        [Q(sel(n.QUOTA_USAGE, re_=TEAM), instant=True, table=True),
         Q(sel(n.QUOTA_LIMIT, re_=TEAM), instant=True, table=True)],
        transformations=[
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {
                "excludeByName": {"Time": True},
                "renameByName": {"Value #A": "usage", "Value #B": "limit"}}}],
        overrides=[], conditional=QUOTA_COND), 8, 8)
    grid.add(p.timeseries(
        "Rollout memory plan", "Per GPU and model: the predicted peak of loading a next "
        "version as large as the current one beside it (memory in use + the model's "
        "footprint) ÷ the GPU's memory; above 1 it would not fit (FleetwatchRolloutWouldNotFit"
        "; `fleetwatch rollout plan` shows the arithmetic for a given candidate).",
        [Q(f"{ROLLOUT_PEAK}\n/ on (gpu_uuid) group_left ()\n{GPU_MEMORY_TOTAL}",
           "{{gpu_uuid}} {{model}}")], p.RATIO, min_=0,
        thresholds=p.steps((p.GREEN, None), (p.RED, 1)),
        conditional=PLACEMENT_COND + " And the GPU's memory (dcgm-exporter or Triton)."), 8)
    grid.add(p.table(
        "Placement policy violations", "Interactive models sharing a GPU with another "
        "model (fleetwatch_placement_violation): they should get a GPU of their own.",
        [Q(agg("max", ("gpu_uuid", "model", "model_version", "latency_tier"),
               "fleetwatch_placement_violation") + " == 1", instant=True, table=True)],
        transformations=[{"id": "organize", "options": {
            "excludeByName": {"Time": True, "Value": True}}}],
        overrides=[], conditional="needs an interactive model sharing a GPU (none: the "
        "policy holds)."), 8, 8)


def _sharing(grid: p.Grid) -> None:
    grid.row("Models and GPUs")
    grid.add(p.table(
        "Models sharing a sidecar's GPUs", "One sidecar runs beside one inference server and "
        "sees that node's GPUs (Triton's nv_gpu_* or the dcgm-exporter target it scrapes), so "
        "the models and GPUs behind one sidecar instance share those GPUs. Per-model series "
        "carry no GPU label (Triton reports them summed over GPUs), so no finer attribution "
        "is invented.",
        [Q(agg("group", ("instance", "model", "model_version", "team"), sel(INFO, re_=TEAM)),
           instant=True, table=True),
         Q(agg("group", ("instance", "hostname", "gpu_uuid", "gpu_model"),
               "modelserver_gpu_memory_total_bytes"), instant=True, table=True)],
        transformations=[
            {"id": "joinByField", "options": {"byField": "instance", "mode": "outer"}},
            {"id": "organize", "options": {
                "excludeByName": {"Time": True, "Time 1": True, "Time 2": True,
                                  "Value #A": True, "Value #B": True},
                "renameByName": {"model_version": "version", "gpu_model": "GPU"}}}],
        overrides=[], conditional=GPU_COND + " Without GPUs the table lists models only."),
        12, 8)
    grid.add(p.timeseries(
        "Host CPU utilization", "CPU utilization of the hosts running Triton (0–1): "
        "pre/post-processing and Python backends run here.",
        [Q(agg("max", ("instance",), "modelserver_cpu_utilization_ratio"), "{{instance}}")],
        p.RATIO, min_=0, max_=1), 6)
    grid.add(p.timeseries(
        "Host memory", "Host memory used and total as Triton reports it.",
        [Q(agg("max", ("instance",), "modelserver_cpu_memory_used_bytes"),
           "used {{instance}}"),
         Q(agg("max", ("instance",), "modelserver_cpu_memory_total_bytes"),
           "total {{instance}}")], p.BYTES), 6)


def _capacity(grid: p.Grid) -> None:
    grid.row("Capacity")
    grid.add(p.timeseries(
        "Concurrency vs capacity at SLO", "Per replica: the concurrency observed (highest "
        "replica) against the lowest capacity at SLO over the model's SLOs. Above capacity "
        "the SLO burns: scale out.",
        [Q(of_team(agg("max", MODEL_KEY, "fleetwatch_slo_concurrency")), "observed " + V),
         Q(of_team(agg("min", MODEL_KEY, "fleetwatch_slo_capacity_concurrency")),
           "capacity " + V)], p.REQUESTS), 12)
    replicas = "count by (model) (" + agg("group", ("model", "instance"),
                                          sel(INFO, re_=TEAM)) + ")"
    grid.add(p.timeseries(
        "Desired vs current replicas", "ceil(Σ autoscaling signal over replicas) per model "
        "against the sidecar instances serving it now.",
        [Q("ceil(" + agg("sum", ("model",), of_team(n.AUTOSCALING_SIGNAL)) + ")",
           "desired {{model}}"),
         Q(replicas, "current {{model}}")], p.REPLICAS), 12)
    grid.add(p.timeseries(
        "KV-cache usage (LLMs)", "Fraction of KV-cache blocks in use, highest replica: the LLM "
        "memory headroom inside the GPU memory the engine reserved.",
        [Q(of_team(n.KV_CACHE_USAGE), V)], p.RATIO, min_=0, max_=1,
        thresholds=p.steps((p.GREEN, None), (p.RED, 0.9))), 12)
    grid.add(p.timeseries(
        "Queue wait (mean)", "Mean time requests wait in the queue over 5 minutes: waiting "
        "grows before latency SLOs break.",
        [Q(of_team(n.latency("modelserver_queue_duration_seconds", "mean")), V)],
        p.SECONDS), 12)


def _teams(grid: p.Grid) -> None:
    grid.row("Usage by team")
    grid.add(p.timeseries("Requests/s by team", "Finished requests per second over 5 "
                          "minutes, by owning team (modelserver_model_info).",
                          [Q(agg("sum", ("team",), with_team(n.REQUESTS_RATE)), "{{team}}")],
                          p.REQ_PER_S, stack=True), 8)
    grid.add(p.timeseries("Tokens/s by team", "LLM tokens per second over 5 minutes, by "
                          "owning team.",
                          [Q(agg("sum", ("team",), with_team(n.TOKENS_RATE)), "{{team}}")],
                          p.TOKENS_PER_S, stack=True), 8)
    grid.add(p.timeseries("Desired replicas by team", "Σ autoscaling signal by owning team: "
                          "the replicas each team's models need at their SLOs.",
                          [Q(agg("sum", ("team",), with_team(n.AUTOSCALING_SIGNAL)),
                             "{{team}}")], p.REPLICAS, stack=True), 8)
    busy = agg("sum", MODEL_KEY, rate(sel("modelserver_request_duration_seconds_sum")))
    grid.add(p.timeseries("Busy time by team", "Seconds of request processing per second by "
                          "owning team (Σ request durations ÷ time: the average number of "
                          "requests in flight, Little's law).",
                          [Q(agg("sum", ("team",), with_team(busy)), "{{team}}")],
                          p.REQUESTS, stack=True), 24)


def build_gpu_dashboard() -> g.Dashboard:
    grid = p.Grid()
    _gpus(grid)
    _shared(grid)
    _sharing(grid)
    _capacity(grid)
    _teams(grid)
    return dashboard(
        "gpus", "Per-GPU utilization, memory and headroom, power and energy; models per GPU, "
        "memory per model, quota usage by team, the rollout memory plan; which models "
        "share a sidecar's GPUs; capacity at SLO, replicas and load by team. Generated by "
        "`fleetwatch dashboards`; do not edit.", grid.panels(),
        [datasource_variable(), team_variable()])
