"""``FleetwatchRolloutCandidateWorse``: a candidate version of a model is worse than its
baseline version, compared concurrency band by band on the model's SLOs by the sidecars
(``fleetwatch_rollout_verdict{verdict="worse"}``, recorded fleet-wide as
``model_rollout:fleetwatch_rollout_verdict:max``: any replica's sidecar). Owners are the
candidate version's, joined from ``modelserver_model_info``: stop moving instances to it.

Scenario: a candidate two replicas judge (one worse, one same: any replica's ``worse``
counts) fires after the ``for:``, not before; a candidate judged ``same`` never.
"""

from __future__ import annotations

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.annotations import OWNER, alert_annotations, label
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import PlatformFamily
from fleetwatch.alerts.owners import with_owner
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import (
    Suite,
    TestGroup,
    concrete,
    expected,
    info_series,
    linear,
    minutes,
    owner_sample,
)
from fleetwatch.labels.registry import Registry

ROLLOUT_WORSE = "FleetwatchRolloutCandidateWorse"


def rollout_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The one rollout rule (owners of the candidate version)."""
    r = cfg.platform.rollout_worse
    worse = (f"label_replace(\n  {rec.ROLLOUT_VERDICT}{{verdict=\"worse\"}} == 1,\n"
             f"  \"model_version\", \"$1\", \"candidate\", \"(.*)\"\n)")
    return (AlertRule(
        ROLLOUT_WORSE, with_owner(worse, cfg.platform.team),
        (("severity", r.severity),),
        alert_annotations(
            cfg.urls, ROLLOUT_WORSE,
            f"Version {label('candidate')} of {label('model')} is worse than "
            f"version {label('baseline')}",
            f"Compared band by band (the same concurrency), version {label('candidate')} "
            f"of model {label('model')} meets its SLOs less often than version "
            f"{label('baseline')} for {r.for_}: stop the rollout and look at the bands "
            f"driving it (fleetwatch compare --model {label('model')} --baseline-version "
            f"{label('baseline')} --candidate-version {label('candidate')}). {OWNER}"),
        r.for_),)


def rollout_scenarios(suite: Suite) -> list[TestGroup]:
    """One group: a worse candidate (two replicas) and a same one."""
    registry, p = suite.registry, suite.cfg.platform
    entry = registry.entries[0] if registry.entries else None
    model = concrete(entry.name) if entry else "model-a"
    mins = minutes(p.rollout_worse.for_)
    steps = mins + 3
    g = TestGroup("Rollout: a candidate any replica judges worse fires after its for: "
                  "(owners of the candidate version), a same one does not")
    verdicts = {("2", "sidecar-a:9810"): "worse", ("2", "sidecar-b:9810"): "same",
                ("3", "sidecar-a:9810"): "same"}
    for (cand, inst), verdict in verdicts.items():
        for v in ("better", "same", "worse", "not_enough_data"):
            g.add("fleetwatch_rollout_verdict",
                  {"model": model, "baseline": "1", "candidate": cand, "verdict": v,
                   "instance": inst}, linear(0, steps, 1 if v == verdict else 0))
    for cand in ("2", "3"):
        info_series(g, model, cand, registry.lookup(model, cand), steps)
    rule = suite.rules.find(ROLLOUT_WORSE)
    g.expect(mins - 1, ROLLOUT_WORSE, [])
    g.expect(mins + 1, ROLLOUT_WORSE, [expected(
        rule, {"model": model, "model_version": "2", "baseline": "1", "candidate": "2",
               "verdict": "worse", **owner_sample(registry.lookup(model, "2"), p.team)}, 1)])
    return [g]


FAMILY = PlatformFamily("rollout", (ROLLOUT_WORSE,), rollout_alerts, rollout_scenarios)
