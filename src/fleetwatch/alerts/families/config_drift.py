"""``FleetwatchConfigDrift``: a model's running configuration differs from what the
registry declares for it (``fleetwatch_config_drift{model, field} == 1`` from any sidecar:
another model version loaded, another engine version or quantization, other instance
groups, dynamic batching on or off). Owners are joined by model name from
``modelserver_model_info`` (the drift series has no version): the owner either fixes the
deployment or changes the declaration through review.

Scenario: a model whose loaded version differs from the declared one fires after the
``for:`` (one alert per drifting field), not before; a field that matches never.
"""

from __future__ import annotations

from fleetwatch.alerts.annotations import OWNER, alert_annotations, label
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import PlatformFamily
from fleetwatch.alerts.owners import with_model_owner
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

CONFIG_DRIFT = "FleetwatchConfigDrift"


def config_drift_alerts(_registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The one drift rule (owners of the model)."""
    p = cfg.platform.config_drift
    drifting = "max by (model, field) (fleetwatch_config_drift) == 1"
    return (AlertRule(
        CONFIG_DRIFT, with_model_owner(drifting, cfg.platform.team),
        (("severity", p.severity),),
        alert_annotations(
            cfg.urls, CONFIG_DRIFT,
            f"{label('model')} runs another {label('field')} than its registry declaration",
            f"The running {label('field')} of model {label('model')} has differed from the "
            f"registry's declared: block for {p.for_} (fleetwatch_config_drift_info has "
            "both values): deploy what is declared, or change the declaration through "
            f"review. {OWNER}"),
        p.for_),)


def config_drift_scenarios(suite: Suite) -> list[TestGroup]:
    """One group: a model whose model_version drifts, while its engine_version matches."""
    registry, p = suite.registry, suite.cfg.platform
    entry = registry.entries[0] if registry.entries else None
    model = concrete(entry.name) if entry else "model-a"
    mins = minutes(p.config_drift.for_)
    steps = mins + 3
    g = TestGroup("Declared vs running: a drifting field fires after its for: (owners of "
                  "the model), a matching field does not")
    for inst in ("sidecar-a:9810", "sidecar-b:9810"):
        g.add("fleetwatch_config_drift",
              {"model": model, "field": "model_version", "instance": inst},
              linear(0, steps, 1 if inst == "sidecar-a:9810" else 0))
        g.add("fleetwatch_config_drift",
              {"model": model, "field": "engine_version", "instance": inst},
              linear(0, steps, 0))
    info_series(g, model, "1", registry.lookup(model, "1"), steps)
    rule = suite.rules.find(CONFIG_DRIFT)
    g.expect(mins - 1, CONFIG_DRIFT, [])
    g.expect(mins + 1, CONFIG_DRIFT, [expected(
        rule, {"model": model, "field": "model_version",
               **owner_sample(registry.lookup(model, "1"), p.team)}, 1)])
    return [g]


FAMILY = PlatformFamily("config_drift", (CONFIG_DRIFT,), config_drift_alerts,
                        config_drift_scenarios)
