"""``FleetwatchSLOMisconfigured``: the SLO engine cannot evaluate an SLO on a model (e.g.
its latency threshold is not a bucket boundary of the source), so its burn-rate alerts
cannot fire. Owners are joined from ``modelserver_model_info``.

Scenario: a model in state ``misconfigured`` fires after the ``for:``, not before.
"""

from __future__ import annotations

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.annotations import MODEL, OWNER, alert_annotations, label
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.families.slo_context import slo_context
from fleetwatch.alerts.family import SLOFamily
from fleetwatch.alerts.owners import with_owner
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import (
    BACKEND,
    Suite,
    TestGroup,
    expected,
    info_series,
    linear,
    minutes,
    owner_sample,
)
from fleetwatch.labels.registry import Registry
from fleetwatch.promql import string
from fleetwatch.slo.spec import SLOFile, SLOSpec

SLO_MISCONFIGURED = "FleetwatchSLOMisconfigured"


def misconfigured_alerts(slos: SLOFile, slo: SLOSpec, registry: Registry,
                         cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The one misconfigured rule of ``slo``."""
    return (AlertRule(
        SLO_MISCONFIGURED,
        with_owner(f"max by ({', '.join(rec.SLO_MODEL)}) (fleetwatch_slo_state"
                   f"{{slo={string(slo.name)}, state=\"misconfigured\"}}) == 1",
                   cfg.platform.team),
        (("severity", "ticket"), ("slo", slo.name)),
        alert_annotations(
            cfg.urls, SLO_MISCONFIGURED,
            f"SLO {slo.name} cannot be evaluated on {label('model')}",
            f"The SLO engine cannot evaluate SLO {slo.name} on model {MODEL} (e.g. its "
            f"latency threshold is not a bucket boundary of the source); its burn-rate alerts "
            f"cannot fire. The sidecar's /slo endpoint explains why. {OWNER}",
            {"slo": slo.name}),
        cfg.slo_alerts.misconfigured_for),)


def misconfigured_scenarios(suite: Suite) -> list[TestGroup]:
    """One group: a misconfigured model of every SLO."""
    cfg = suite.cfg
    g = TestGroup("An SLO the engine cannot evaluate: FleetwatchSLOMisconfigured")
    for_min = minutes(cfg.slo_alerts.misconfigured_for)
    steps = for_min + 3
    exp = []
    for slo in suite.slos.slos:
        ctx = slo_context(suite.slos, slo, suite.registry, suite.rules, cfg)
        base = {"slo": slo.name, "model": ctx.model, "model_version": "1", "backend": BACKEND}
        g.add("fleetwatch_slo_state", {**base, "state": "misconfigured"}, linear(0, steps, 1))
        g.add("fleetwatch_slo_state", {**base, "state": "ok"}, linear(0, steps, 0))
        info_series(g, ctx.model, "1", ctx.entry, steps)
        rule = suite.rules.find(SLO_MISCONFIGURED, slo=slo.name)
        exp.append(expected(rule, {**base, **owner_sample(ctx.entry, cfg.platform.team)}, 1))
    g.expect(for_min - 1, SLO_MISCONFIGURED, [])
    g.expect(for_min + 1, SLO_MISCONFIGURED, exp)
    return [g]


FAMILY = SLOFamily("misconfigured", (SLO_MISCONFIGURED,), misconfigured_alerts,
                   misconfigured_scenarios)
