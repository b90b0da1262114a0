"""Alerting rules as pure functions of the specs: the rule groups of the generated files,
assembled from the alert families (:mod:`fleetwatch.alerts.families`, one module per
family with its rules and its behaviour tests).

**SLO alerts** (one set per SLO): ``FleetwatchSLORegression`` and ``FleetwatchSLOOverload``
per burn tier (:mod:`~fleetwatch.alerts.families.burn`), ``FleetwatchSLONoData``
(:mod:`~fleetwatch.alerts.families.no_data`), ``FleetwatchSLOMisconfigured``
(:mod:`~fleetwatch.alerts.families.misconfigured`), and ``FleetwatchSLOInterference`` /
``FleetwatchSLOGPUDegraded`` — a burn inside the envelope the engine attributes to a
co-located model or the GPU: platform tickets, never a regression page
(:mod:`~fleetwatch.alerts.families.attribution`).

**Platform alerts**: sidecar down, upstream down (per model the target serves, so it can
inhibit their SLO alerts), a model not ready longer than its latency tier's start-up
allowance, mean queue wait high, KV cache near exhaustion, GPU memory headroom low; shared
GPUs (:mod:`~fleetwatch.alerts.families.gpus`): a team above its quota, a model without a
team, an interactive model sharing a GPU, a rollout that would not fit.

**Owners**: ``team``, ``owner``, ``oncall`` are joined *at query time* from the sidecars'
``modelserver_model_info`` (:func:`fleetwatch.alerts.owners.with_owner`): a registry edit
takes effect without regenerating rules, globs cover models deployed later, and the labels
are those the sidecar actually applied. Series without registry data keep firing with
``team=<platform team>``. Two alerts cannot join: a model that is not ready has no metrics
(hence no info series) yet, so ``FleetwatchModelNotReady`` is generated per registry entry
with the entry's owners and its tier's ``for:``; ``FleetwatchSLONoData`` has no model at
all, so it takes the team the SLO's selector implies (else the platform team).

The alert names and the rule types are re-exported here for the Alertmanager generator
and for callers of the earlier single module.
"""

from __future__ import annotations

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.families import PLATFORM_FAMILIES, SLO_FAMILIES
from fleetwatch.alerts.families.attribution import SLO_GPU_DEGRADED, SLO_INTERFERENCE
from fleetwatch.alerts.families.burn import (
    BURN_ALERTS,
    SLO_OVERLOAD,
    SLO_REGRESSION,
    overload_expr,
    regression_expr,
)
from fleetwatch.alerts.families.misconfigured import SLO_MISCONFIGURED
from fleetwatch.alerts.families.no_data import SLO_NO_DATA
from fleetwatch.alerts.families.not_ready import MODEL_NOT_READY, not_ready_entries
from fleetwatch.alerts.families.saturation import GPU_MEMORY_LOW, KV_CACHE_FULL, QUEUE_WAIT_HIGH
from fleetwatch.alerts.families.sidecar_down import SIDECAR_DOWN
from fleetwatch.alerts.families.upstream_down import UPSTREAM_DOWN
from fleetwatch.alerts.rules import (
    AlertRule,
    Labels,
    RuleGroup,
    inside_bands,
    ordered_tiers,
    tier_name,
)
from fleetwatch.labels.registry import Registry
from fleetwatch.slo.spec import SLOFile, SLOSpec

__all__ = [
    "BURN_ALERTS", "GPU_MEMORY_LOW", "KV_CACHE_FULL", "MODEL_NOT_READY", "MODEL_RECORDING_GROUP",
    "PLATFORM_GROUP", "QUEUE_WAIT_HIGH", "SIDECAR_DOWN", "SLO_ALERTS", "SLO_GPU_DEGRADED",
    "SLO_INTERFERENCE", "SLO_MISCONFIGURED", "SLO_NO_DATA", "SLO_OVERLOAD", "SLO_REGRESSION",
    "UPSTREAM_DOWN", "AlertRule", "Labels", "RuleGroup", "inside_bands",
    "model_recording_groups", "not_ready_entries", "ordered_tiers", "overload_expr",
    "platform_alerts", "platform_groups", "regression_expr", "slo_alerts", "slo_groups",
    "tier_name",
]

#: Alerts about SLOs (upstream-down inhibits these for the same model).
SLO_ALERTS = (SLO_REGRESSION, SLO_OVERLOAD, SLO_INTERFERENCE, SLO_GPU_DEGRADED,
              SLO_MISCONFIGURED)

MODEL_RECORDING_GROUP = "fleetwatch-model-recording"
PLATFORM_GROUP = "fleetwatch-platform-alerts"


def slo_alerts(slos: SLOFile, slo: SLOSpec, registry: Registry,
               cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """Every alert of one SLO: regression and overload per tier, no-data, misconfigured."""
    return tuple(r for f in SLO_FAMILIES for r in f.rules(slos, slo, registry, cfg))


def platform_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """Sidecar and upstream health, readiness, queue wait, KV cache and GPU memory."""
    return tuple(r for f in PLATFORM_FAMILIES for r in f.rules(registry, cfg))


def model_recording_groups() -> list[RuleGroup]:
    """The per-model recording rules, in one group."""
    return [RuleGroup(MODEL_RECORDING_GROUP, rec.MODEL_RULES)]


def slo_groups(slos: SLOFile, registry: Registry, cfg: AlertingConfig) -> list[RuleGroup]:
    """One group per SLO: its burn-rate recording rules, then its alerts. Rules of a group
    run in order, so the alerts see the burn rates of the same evaluation (in separate
    groups they would lag by up to one evaluation interval)."""
    windows = rec.burn_windows(slos)
    return [RuleGroup(f"fleetwatch-slo-{slo.name}",
                      (*rec.slo_rules(slo, windows), *slo_alerts(slos, slo, registry, cfg)))
            for slo in slos.slos]


def platform_groups(registry: Registry, cfg: AlertingConfig) -> list[RuleGroup]:
    """The platform alerts, in one group."""
    return [RuleGroup(PLATFORM_GROUP, platform_alerts(registry, cfg))]
