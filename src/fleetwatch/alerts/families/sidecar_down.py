"""``FleetwatchSidecarDown``: Prometheus cannot scrape a fleetwatch sidecar
(``up{job=<sidecar_job>} == 0``) or finds none at all.

Scenario: a down sidecar fires after the ``for:``, not before; a healthy one never.
"""

from __future__ import annotations

from fleetwatch.alerts.annotations import alert_annotations, label, literal
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import PlatformFamily
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import Suite, TestGroup, expected, linear, minutes
from fleetwatch.labels.registry import Registry
from fleetwatch.promql import string

SIDECAR_DOWN = "FleetwatchSidecarDown"


def sidecar_down_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The one sidecar-down rule (platform team)."""
    p = cfg.platform
    job = string(p.sidecar_job)
    return (AlertRule(
        SIDECAR_DOWN, f"up{{job={job}}} == 0\nor\nabsent(up{{job={job}}})",
        (("severity", p.sidecar_down.severity), ("team", p.team)),
        alert_annotations(
            cfg.urls, SIDECAR_DOWN, f"fleetwatch sidecar {label('instance')} is down",
            f"Prometheus cannot scrape the fleetwatch sidecar {label('instance')} (job "
            f"{literal(p.sidecar_job)}), or finds no sidecar at all: the models behind it "
            f"have no metrics, SLO events or autoscaling signal."),
        p.sidecar_down.for_),)


def sidecar_down_scenarios(suite: Suite) -> list[TestGroup]:
    """One group: a down and a healthy sidecar."""
    p = suite.cfg.platform
    g = TestGroup("Sidecar down: up == 0 for its for:, the healthy sidecar does not fire")
    mins = minutes(p.sidecar_down.for_)
    g.add("up", {"job": p.sidecar_job, "instance": "sidecar-a:9810"}, linear(0, mins + 3, 0))
    g.add("up", {"job": p.sidecar_job, "instance": "sidecar-b:9810"}, linear(0, mins + 3, 1))
    rule = suite.rules.find(SIDECAR_DOWN)
    g.expect(mins - 1, SIDECAR_DOWN, [])
    g.expect(mins + 1, SIDECAR_DOWN, [expected(
        rule, {"job": p.sidecar_job, "instance": "sidecar-a:9810"}, 0)])
    return [g]


FAMILY = PlatformFamily("sidecar_down", (SIDECAR_DOWN,), sidecar_down_alerts,
                        sidecar_down_scenarios)
