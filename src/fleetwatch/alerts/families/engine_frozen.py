"""``FleetwatchEngineFrozen``: a sidecar reads its engine as frozen — the model's progress
counters did not move for ``autoscaling.frozen_after_scrapes`` scrapes while its gauges
say requests are running or waiting (``fleetwatch_autoscaling_signal_stale{reason="frozen"}
== 1``, :mod:`fleetwatch.slo.judge.freshness`): an engine core that hangs behind an API
server that still answers. One alert per model and sidecar (``instance``, and ``pod`` when
the scrape configuration adds it), to the model's owners (joined from
``modelserver_model_info``; the platform team for a model without a registry entry).

Scenario: a frozen model on one sidecar fires after the ``for:``, not before; the same
model fresh on another sidecar and a model stale for another reason (target down) never.
"""

from __future__ import annotations

from fleetwatch.alerts.annotations import MODEL, OWNER, alert_annotations, label
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import PlatformFamily
from fleetwatch.alerts.owners import with_owner
from fleetwatch.alerts.rules import AlertRule
from fleetwatch.alerts.scenarios import (
    BACKEND,
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

ENGINE_FROZEN = "FleetwatchEngineFrozen"
STALE = "fleetwatch_autoscaling_signal_stale"


def engine_frozen_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The one frozen-engine rule."""
    p = cfg.platform
    return (AlertRule(
        ENGINE_FROZEN, with_owner(f'{STALE}{{reason="frozen"}} == 1', p.team),
        (("severity", p.engine_frozen.severity),),
        alert_annotations(
            cfg.urls, ENGINE_FROZEN,
            f"Engine serving {label('model')} behind sidecar {label('instance')} is frozen",
            f"The engine serving model {MODEL} behind sidecar {label('instance')} "
            f"{{{{ with $labels.pod }}}}(pod {{{{ . }}}}) {{{{ end }}}}answers /metrics, but "
            f"its request and token counters have not moved for several scrapes while "
            f"requests are running or waiting: its engine core is hung. The sidecar holds "
            f"the model's autoscaling signal, then reads it as saturated; restart the "
            f"engine. {OWNER}", autoscaler=True),
        p.engine_frozen.for_),)


def engine_frozen_scenarios(suite: Suite) -> list[TestGroup]:
    """One group: a frozen model, the same model fresh elsewhere, a model whose target
    is down."""
    registry, p = suite.registry, suite.cfg.platform
    entry = registry.entries[0] if registry.entries else None
    model = concrete(entry.name) if entry else "model-a"
    mins = minutes(p.engine_frozen.for_)
    steps = mins + 3
    g = TestGroup("Engine frozen: fires for the frozen model's sidecar after its for: "
                  "(owners joined), not for a fresh replica nor a target down")
    mk = {"model": model, "model_version": "1", "backend": BACKEND}
    job = {"job": p.sidecar_job}
    stale = {("sidecar-a:9810", "frozen"): 1, ("sidecar-b:9810", "frozen"): 0}
    for (inst, reason), v in stale.items():
        for r in ("target_down", "scrape_timeout", "frozen"):
            g.add(STALE, {**mk, **job, "instance": inst, "reason": r},
                  linear(0, steps, v if r == reason else 0))
    other = {"model": "other-model-z9", "model_version": "1", "backend": BACKEND}
    for r in ("target_down", "scrape_timeout", "frozen"):
        g.add(STALE, {**other, **job, "instance": "sidecar-b:9810", "reason": r},
              linear(0, steps, 1 if r == "target_down" else 0))
    info_series(g, model, "1", registry.lookup(model, "1"), steps)
    rule = suite.rules.find(ENGINE_FROZEN)
    g.expect(mins - 1, ENGINE_FROZEN, [])
    g.expect(mins + 1, ENGINE_FROZEN, [expected(
        rule, {**mk, **job, "instance": "sidecar-a:9810", "reason": "frozen",
               **owner_sample(registry.lookup(model, "1"), p.team)}, 1)])
    return [g]


FAMILY = PlatformFamily("engine_frozen", (ENGINE_FROZEN,), engine_frozen_alerts,
                        engine_frozen_scenarios)
