"""Shared-GPU governance alerts (:mod:`fleetwatch.gpu`), all tickets by default:

* ``FleetwatchQuotaExceeded`` — a team's fleet-wide usage of a resource (GPUs, GPU memory,
  instances; ``team:fleetwatch_quota_usage:sum``) above its quota, or a capped model's
  usage above its cap: routed to **that team** (its ``team`` label);
* ``FleetwatchModelWithoutTeam`` — policy: a served model whose
  ``modelserver_model_info`` has no team (no registry entry): the platform team;
* ``FleetwatchPlacementPolicyViolation`` — policy: an interactive model sharing its GPU
  (``fleetwatch_placement_violation``): the platform team, which places models;
* ``FleetwatchRolloutWouldNotFit`` — the fleet form of ``fleetwatch rollout plan``: on a
  GPU, the memory in use (measured, else the sum of the footprints) plus the largest
  footprint of a model there — a next version as large as the current one, loaded beside
  it — exceeds the GPU's memory: the platform team, before anyone starts the rollout.

Scenario (one group): a team over each of its three resources (usage summed over two
sidecars), a model over its cap, a team within its quota; an unregistered and a registered
model; a violating and a compliant placement; a full and a roomy GPU.
"""

from __future__ import annotations

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.annotations import VALUE, alert_annotations, label
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import PlatformFamily
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import (
    SIDECAR_INSTANCE,
    Suite,
    TestGroup,
    expected,
    linear,
    minutes,
)
from fleetwatch.labels.registry import Registry

QUOTA_EXCEEDED = "FleetwatchQuotaExceeded"
MODEL_WITHOUT_TEAM = "FleetwatchModelWithoutTeam"
PLACEMENT_VIOLATION = "FleetwatchPlacementPolicyViolation"
ROLLOUT_WOULD_NOT_FIT = "FleetwatchRolloutWouldNotFit"

_FOOTPRINT = "modelserver_model_memory_footprint_bytes"
#: Per GPU and model: the memory in use (measured, else Σ footprints) + the model's largest
#: footprint there — the peak of a rollout of a next version as large as the current one.
ROLLOUT_PEAK = (
    "(\n"
    f"  max by (gpu_uuid, model) ({_FOOTPRINT})\n"
    "  + on (gpu_uuid) group_left ()\n"
    "  (\n"
    "    max by (gpu_uuid) (modelserver_gpu_memory_used_bytes)\n"
    "    or\n"
    f"    sum by (gpu_uuid) (max by (gpu_uuid, model, model_version) ({_FOOTPRINT}))\n"
    "  )\n"
    ")")
GPU_MEMORY_TOTAL = "max by (gpu_uuid) (modelserver_gpu_memory_total_bytes)"
ROLLOUT_EXPR = f"{ROLLOUT_PEAK}\n> on (gpu_uuid) group_left ()\n{GPU_MEMORY_TOTAL}"

def gpu_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The quota, ownership, placement-policy and rollout-memory rules, in that order."""
    p, urls = cfg.platform, cfg.urls
    return (
        AlertRule(
            QUOTA_EXCEEDED,
            f"(\n  {rec.QUOTA_USAGE}\n  > on (team, resource)\n  {rec.QUOTA_LIMIT}\n)\nor\n"
            f"(\n  {rec.QUOTA_MODEL_USAGE}\n  > on (team, model, resource)\n"
            f"  {rec.QUOTA_MODEL_LIMIT}\n)",
            (("severity", p.quota.severity),),
            alert_annotations(
                urls, QUOTA_EXCEEDED,
                f"Team {label('team')} is above its {label('resource')} quota"
                f"{{{{ with $labels.model }}}} for model {{{{ . }}}}{{{{ end }}}}",
                f"Team {label('team')} holds {VALUE} {label('resource')}"
                f"{{{{ with $labels.model }}}} with model {{{{ . }}}}{{{{ end }}}} over the "
                f"fleet, above its quota for {p.quota.for_} (a shared GPU counts by memory "
                "footprint; docs/gpus.md). Free some, or raise the quota."),
            p.quota.for_),
        AlertRule(
            MODEL_WITHOUT_TEAM,
            'group by (model, model_version, backend) (modelserver_model_info{team=""})',
            (("severity", p.unowned_model.severity), ("team", p.team)),
            alert_annotations(
                urls, MODEL_WITHOUT_TEAM,
                f"Model {label('model')} has no team",
                f"Model {label('model')} (version {label('model_version')}, "
                f"{label('backend')}) is served with no registry entry for "
                f"{p.unowned_model.for_}: its GPUs count against no quota and its alerts "
                "reach no owner. Add it to the registry."),
            p.unowned_model.for_),
        AlertRule(
            PLACEMENT_VIOLATION,
            "max by (model, model_version, gpu_uuid, latency_tier) "
            "(fleetwatch_placement_violation) == 1",
            (("severity", p.placement_policy.severity), ("team", p.team)),
            alert_annotations(
                urls, PLACEMENT_VIOLATION,
                f"Interactive model {label('model')} shares GPU {label('gpu_uuid')}",
                f"Model {label('model')} (version {label('model_version')}, latency tier "
                f"{label('latency_tier')}) shares GPU {label('gpu_uuid')} with another "
                f"model for {p.placement_policy.for_}: latency-SLA models get a GPU of "
                "their own, batch models share."),
            p.placement_policy.for_),
        AlertRule(
            ROLLOUT_WOULD_NOT_FIT, ROLLOUT_EXPR,
            (("severity", p.rollout_memory.severity), ("team", p.team)),
            alert_annotations(
                urls, ROLLOUT_WOULD_NOT_FIT,
                f"A new version of {label('model')} would not fit on GPU {label('gpu_uuid')}",
                f"Loading a second version of model {label('model')} as large as its "
                f"current one on GPU {label('gpu_uuid')} would peak at {VALUE} bytes, "
                f"more than the GPU's memory ({p.rollout_memory.for_}); run fleetwatch "
                "rollout plan before the rollout, or move a neighbour."),
            p.rollout_memory.for_),
    )


def gpu_scenarios(suite: Suite) -> list[TestGroup]:
    """One group for the four alerts (see the module docstring)."""
    p, rules = suite.cfg.platform, suite.rules
    g = TestGroup("Shared GPUs: a team over each of its three quota resources and a model "
                  "over its cap fire (summed over two sidecars), a team within does not; a "
                  "model without a team; an interactive model sharing a GPU; a rollout that "
                  "would not fit")
    fors = [minutes(x.for_) for x in (p.quota, p.unowned_model, p.placement_policy,
                                      p.rollout_memory)]
    steps = max(fors) + 5
    reps = (SIDECAR_INSTANCE, "sidecar-b:9810")
    over = {("search", "gpus"): (0.75, 1), ("llm", "gpu_memory_bytes"): (2**34, 2**35 - 1),
            ("vision", "instances"): (3, 5)}  # per sidecar, limit
    for team in ("search", "llm", "vision", "ok"):
        for resource, per, limit in (("gpus", 0.25, 4), ("gpu_memory_bytes", 2**30, 2**35),
                                     ("instances", 1, 4)):
            per, limit = over.get((team, resource), (per, limit))
            for inst in reps:
                lab = {"team": team, "resource": resource, "instance": inst}
                g.add("fleetwatch_quota_usage", lab, linear(0, steps, per))
                g.add("fleetwatch_quota_limit", lab, linear(0, steps, limit))
    for model, used, cap in (("ranker", 2, 3), ("reranker", 1, 3)):
        for inst in reps:
            lab = {"team": "ok", "model": model, "resource": "instances", "instance": inst}
            g.add("fleetwatch_quota_model_usage", lab, linear(0, steps, used))
            g.add("fleetwatch_quota_model_limit", lab, linear(0, steps, cap))
    info = {"backend": "triton", "runtime": "python", "instance": SIDECAR_INSTANCE}
    g.add("modelserver_model_info", {**info, "model": "stray", "model_version": "1",
                                     "team": "", "owner": "", "oncall": ""},
          linear(0, steps, 1))
    g.add("modelserver_model_info", {**info, "model": "owned", "model_version": "1",
                                     "team": "search", "owner": "a", "oncall": "b"},
          linear(0, steps, 1))
    for model, value in (("chat", 1), ("batch", 0)):
        g.add("fleetwatch_placement_violation",
              {"model": model, "model_version": "1", "gpu_uuid": "GPU-shared",
               "latency_tier": "interactive", "instance": SIDECAR_INSTANCE},
              linear(0, steps, value))
    gib = 2**30
    for uuid, used, feet in (("GPU-full", 14 * gib, (4 * gib, 2 * gib)),
                             ("GPU-roomy", 4 * gib, (2 * gib, 1 * gib))):
        lab = {"gpu_uuid": uuid, "backend": "dcgm", "instance": SIDECAR_INSTANCE}
        g.add("modelserver_gpu_memory_total_bytes", lab, linear(0, steps, 16 * gib))
        g.add("modelserver_gpu_memory_used_bytes", lab, linear(0, steps, used))
        for model, size in zip(("llm", "ranker"), feet, strict=True):
            g.add(_FOOTPRINT, {"gpu_uuid": uuid, "model": model, "model_version": "1",
                               "footprint_source": "registry", "instance": SIDECAR_INSTANCE},
                  linear(0, steps, size))
    qmins, umins, pmins, rmins = fors
    g.expect(qmins - 1, QUOTA_EXCEEDED, [])
    rule = rules.find(QUOTA_EXCEEDED)
    g.expect(qmins + 1, QUOTA_EXCEEDED, [
        expected(rule, {"team": "search", "resource": "gpus"}, 1.5),
        expected(rule, {"team": "llm", "resource": "gpu_memory_bytes"}, 2**35),
        expected(rule, {"team": "vision", "resource": "instances"}, 6),
        expected(rule, {"team": "ok", "model": "ranker", "resource": "instances"}, 4)])
    g.expect(umins - 1, MODEL_WITHOUT_TEAM, [])
    g.expect(umins + 1, MODEL_WITHOUT_TEAM, [expected(
        rules.find(MODEL_WITHOUT_TEAM),
        {"model": "stray", "model_version": "1", "backend": "triton"}, 1)])
    g.expect(pmins - 1, PLACEMENT_VIOLATION, [])
    g.expect(pmins + 1, PLACEMENT_VIOLATION, [expected(
        rules.find(PLACEMENT_VIOLATION),
        {"model": "chat", "model_version": "1", "gpu_uuid": "GPU-shared",
         "latency_tier": "interactive"}, 1)])
    g.expect(rmins - 1, ROLLOUT_WOULD_NOT_FIT, [])
    g.expect(rmins + 1, ROLLOUT_WOULD_NOT_FIT, [expected(
        rules.find(ROLLOUT_WOULD_NOT_FIT), {"gpu_uuid": "GPU-full", "model": "llm"},
        18 * gib)])
    return [g]


FAMILY = PlatformFamily("gpus", (QUOTA_EXCEEDED, MODEL_WITHOUT_TEAM, PLACEMENT_VIOLATION,
                                 ROLLOUT_WOULD_NOT_FIT), gpu_alerts, gpu_scenarios)
