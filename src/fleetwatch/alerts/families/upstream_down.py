"""``FleetwatchUpstreamDown``: a sidecar cannot scrape its inference server. One alert per
model the target served (the ``model`` label lets it inhibit their SLO alerts), one per
target without models.

Scenario: two models of a down target, a down target without models, and an up target.
"""

from __future__ import annotations

from fleetwatch.alerts.annotations import alert_annotations, label
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import PlatformFamily
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import Suite, TestGroup, expected, linear, minutes
from fleetwatch.labels.registry import Registry

UPSTREAM_DOWN = "FleetwatchUpstreamDown"


def upstream_down_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The one upstream-down rule (platform team)."""
    p = cfg.platform
    return (AlertRule(
        UPSTREAM_DOWN,
        "group by (job, instance, target, model) (\n"
        "  fleetwatch_upstream_model_ready\n"
        "  and on (job, instance, target) fleetwatch_upstream_up == 0\n)\n"
        "or on (job, instance, target)\n(fleetwatch_upstream_up == 0)",
        (("severity", p.upstream_down.severity), ("team", p.team)),
        alert_annotations(
            cfg.urls, UPSTREAM_DOWN,
            f"Inference server {label('target')} behind sidecar {label('instance')} is down",
            f"The sidecar {label('instance')} cannot scrape its upstream {label('target')} "
            f"(model {label('model')}); its series are withdrawn and the SLO alerts of its "
            f"models are inhibited while this fires. fleetwatch_upstream_scrape_errors_total"
            f" says why."),
        p.upstream_down.for_),)


def upstream_down_scenarios(suite: Suite) -> list[TestGroup]:
    """One group: targets down with and without models, and an up target."""
    g = TestGroup("Upstream down: one alert per model of the target (model label for "
                  "inhibition), one per target without models; an up target does not fire")
    mins = minutes(suite.cfg.platform.upstream_down.for_)
    steps = mins + 3
    side = suite.sidecar
    g.add("fleetwatch_upstream_up", {**side, "target": "triton"}, linear(0, steps, 0))
    g.add("fleetwatch_upstream_up", {**side, "target": "gpus"}, linear(0, steps, 0))
    g.add("fleetwatch_upstream_up", {**side, "target": "vllm"}, linear(0, steps, 1))
    for model in ("model-a", "model-b"):
        g.add("fleetwatch_upstream_model_ready", {**side, "target": "triton", "model": model},
              linear(0, steps, 1))
    g.add("fleetwatch_upstream_model_ready", {**side, "target": "vllm", "model": "llm-a"},
          linear(0, steps, 1))
    rule = suite.rules.find(UPSTREAM_DOWN)
    g.expect(mins - 1, UPSTREAM_DOWN, [])
    g.expect(mins + 1, UPSTREAM_DOWN, [
        expected(rule, {**side, "target": "triton", "model": "model-a"}, 1),
        expected(rule, {**side, "target": "triton", "model": "model-b"}, 1),
        expected(rule, {**side, "target": "gpus"}, 0)])
    return [g]


FAMILY = PlatformFamily("upstream_down", (UPSTREAM_DOWN,), upstream_down_alerts,
                        upstream_down_scenarios)
