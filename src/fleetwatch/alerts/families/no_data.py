"""``FleetwatchSLONoData``: no sidecar exports the SLO's events at all (``absent``). It has
no model, so it takes the owners the SLO's selector implies
(:func:`~fleetwatch.alerts.owners.slo_team`), else the platform team.

Scenario: with no events at all, it fires after its ``for:``, not before.
"""

from __future__ import annotations

from fleetwatch.alerts.annotations import alert_annotations, literal
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import SLOFamily
from fleetwatch.alerts.owners import slo_team
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import Suite, TestGroup, expected, linear, minutes
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.promql import string
from fleetwatch.slo.spec import SLOFile, SLOSpec

SLO_NO_DATA = "FleetwatchSLONoData"


def no_data_alerts(slos: SLOFile, slo: SLOSpec, registry: Registry,
                   cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The one no-data rule of ``slo``."""
    owner = slo_team(slo, registry, cfg.platform.team)
    owner_labels = ((("team", literal(owner.team)), ("owner", literal(owner.owner)),
                     ("oncall", literal(owner.oncall)))
                    if isinstance(owner, ModelEntry) else (("team", literal(owner)),))
    return (AlertRule(
        SLO_NO_DATA,
        f"absent(fleetwatch_slo_events_total{{slo={string(slo.name)}, band=\"all\"}})",
        (("severity", cfg.slo_alerts.absent_severity), ("slo", slo.name), *owner_labels),
        alert_annotations(
            cfg.urls, SLO_NO_DATA, f"SLO {slo.name} has no data",
            f"No sidecar exports fleetwatch_slo_events_total{{slo=\"{slo.name}\"}}: the "
            f"sidecars do not run the SLO engine with this SLO file, its selector matches no "
            f"registered model, or no selected model has had traffic. Without events the "
            f"burn-rate alerts of SLO {slo.name} cannot fire.", {"slo": slo.name}),
        cfg.slo_alerts.absent_for),)


def no_data_scenarios(suite: Suite) -> list[TestGroup]:
    """One group for every SLO: only a healthy sidecar, no events."""
    cfg = suite.cfg
    g = TestGroup("No SLO events at all: FleetwatchSLONoData after its for: (not before)")
    for_min = minutes(cfg.slo_alerts.absent_for)
    g.add("up", suite.sidecar, linear(0, for_min + 3, 1))
    g.expect(for_min - 1, SLO_NO_DATA, [])
    exp = []
    for slo in suite.slos.slos:
        rule = suite.rules.find(SLO_NO_DATA, slo=slo.name)
        exp.append(expected(rule, {"slo": slo.name, "band": "all"}, 1.0))
    g.expect(for_min + 1, SLO_NO_DATA, exp)
    return [g]


FAMILY = SLOFamily("no_data", (SLO_NO_DATA,), no_data_alerts, no_data_scenarios)
