"""Burns inside the envelope that are not the model's fault: ``FleetwatchSLOInterference``
(a co-located model's load rose) and ``FleetwatchSLOGPUDegraded`` (its GPU throttles or
reported an XID error), judged by the sidecar's SLO engine (:mod:`fleetwatch.slo.
interference`, state ``interference``/``gpu_degraded``).

Both are **tickets to the platform team** (``team=<platform team>``, so Alertmanager routes
them to its ticket receiver), not pages to the model's owner: the model's own team, owner
and on-call stay on the alert as ``model_team``, ``owner``, ``oncall`` for context.
``FleetwatchSLORegression`` leaves such a model out (:func:`fleetwatch.alerts.families.burn.
regression_expr`), so the owner is not paged for the neighbour's load or the GPU.

Scenario (per SLO, the fastest tier whose threshold can be reached): two versions of one
model burn inside the envelope just above the tier's threshold — the burn family's
regression scenario, which fires
``FleetwatchSLORegression`` — one the engine calls ``interference`` naming a neighbour,
one ``gpu_degraded`` on a GPU: each fires its own alert with ``team=<platform team>``, and
regression does not fire.
"""

from __future__ import annotations

from decimal import Decimal

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.annotations import MODEL, alert_annotations, label, literal
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.families.burn import SLO_REGRESSION
from fleetwatch.alerts.families.slo_context import (
    actual_burn,
    bad_per_step,
    margin_ok,
    slo_context,
    slo_series,
)
from fleetwatch.alerts.family import SLOFamily
from fleetwatch.alerts.owners import with_owner
from fleetwatch.alerts.rules import AlertRule, ordered_tiers
from fleetwatch.alerts.scenarios import (
    BACKEND,
    Suite,
    TestGroup,
    expected,
    info_series,
    linear,
    owner_sample,
)
from fleetwatch.labels.registry import Registry
from fleetwatch.promql import string
from fleetwatch.slo.spec import SLOFile, SLOSpec

SLO_INTERFERENCE = "FleetwatchSLOInterference"
SLO_GPU_DEGRADED = "FleetwatchSLOGPUDegraded"
ATTRIBUTION_ALERTS = (SLO_INTERFERENCE, SLO_GPU_DEGRADED)

#: Labels the alerts keep beyond the SLO and model: the neighbour, or the GPU and condition.
_INTERFERENCE_BY = (*rec.SLO_MODEL, "neighbour")
_GPU_BY = (*rec.SLO_MODEL, "gpu_uuid", "gpu_condition")


def _platform_ticket(expr: str, team: str) -> str:
    """``expr`` with the model's owners joined and its team kept as ``model_team`` (the
    rule's ``team`` label then names the platform team)."""
    return (f"label_replace(\n{with_owner(expr, team)},\n"
            f"  \"model_team\", \"$1\", \"team\", \"(.*)\"\n)")


def attribution_alerts(slos: SLOFile, slo: SLOSpec, registry: Registry,
                       cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """The interference and GPU-degraded rules of ``slo``."""
    team = cfg.platform.team
    static = {"slo": slo.name}
    labels = (("severity", "ticket"), ("team", literal(team)), ("slo", slo.name))
    sel = f"{{slo={string(slo.name)}}}"
    owner = (f"The model's owner ({label('model_team')}{{{{ with $labels.owner }}}}, "
             f"{{{{ . }}}}{{{{ end }}}}) is not paged.")
    return (
        AlertRule(
            SLO_INTERFERENCE,
            _platform_ticket(f"max by ({', '.join(_INTERFERENCE_BY)}) "
                             f"(fleetwatch_slo_interference{sel}) == 1", team),
            labels,
            alert_annotations(
                cfg.urls, SLO_INTERFERENCE,
                f"SLO {slo.name} on {label('model')} burns because of co-located "
                f"{label('neighbour')}",
                f"Model {MODEL} burns the error budget of SLO {slo.name} inside its "
                f"concurrency envelope while {label('neighbour')}, placed on the same GPU, "
                f"got busier in the same windows: interference, not a regression of the "
                f"model. Separate or throttle the neighbour, or revisit the placement; the "
                f"sidecar's /slo shows the evidence (burn by band, the neighbour's "
                f"concurrency before and during, the correlation). {owner}",
                static)),
        AlertRule(
            SLO_GPU_DEGRADED,
            _platform_ticket(f"max by ({', '.join(_GPU_BY)}) "
                             f"(fleetwatch_slo_gpu_degraded{sel}) == 1", team),
            labels,
            alert_annotations(
                cfg.urls, SLO_GPU_DEGRADED,
                f"SLO {slo.name} on {label('model')} burns on degraded GPU "
                f"{label('gpu_uuid')} ({label('gpu_condition')})",
                f"Model {MODEL} burns the error budget of SLO {slo.name} inside its "
                f"concurrency envelope on GPU {label('gpu_uuid')}, which is "
                f"{label('gpu_condition')} (dcgm clocks-event reasons or a new XID error "
                f"in the same windows): the GPU, not the model nor its neighbours. Check "
                f"cooling, power and the driver's XID log; drain the GPU if it persists. "
                f"{owner}",
                static)),
    )


def _group(suite: Suite, slo: SLOSpec) -> TestGroup | None:
    ctx = slo_context(suite.slos, slo, suite.registry, suite.rules, suite.cfg)
    what = f"SLO {slo.name}: interference and GPU-degraded test"
    inside = ctx.inside()
    if inside is None:
        suite.skip(what, "no concurrency band is inside the envelope, so the engine never "
                         "judges a burn as interference or a degraded GPU")
        return None
    factors = [ctx.factor(x) for x in ctx.slos.windows]
    # a burn just above the fastest tier whose threshold can be reached
    bad = next((b for w in ordered_tiers(ctx.slos.windows) for m in ("1.1", "1.05", "1.15", "1.2")
                if (b := bad_per_step(ctx, ctx.factor(w) * Decimal(m))) is not None
                and margin_ok(actual_burn(ctx, b), factors)), None)
    if bad is None:
        suite.skip(what, "no burn just above a tier's threshold is clear of every tier's "
                         "threshold and of the annotations' rounding")
        return None
    steps, minute = 12, 10
    g = TestGroup(f"SLO {slo.name}: a burn inside the envelope the engine attributes to a "
                  f"neighbour or a GPU is a platform ticket, not a regression page")
    base = {"slo": slo.name, "model": ctx.model, "backend": BACKEND}
    team = suite.cfg.platform.team
    exp_int, exp_gpu = [], []
    for version in ("interf", "gpu"):
        slo_series(g, ctx, version, {inside: [(bad, steps)]}, steps)
        info_series(g, ctx.model, version, ctx.entry, steps)
        lab = {**base, "model_version": version}
        owners = owner_sample(ctx.entry, team)
        joined = {**owners, "model_team": owners["team"]}
        state = "interference" if version == "interf" else "gpu_degraded"
        g.add("fleetwatch_slo_state", {**lab, "state": state}, linear(0, steps, 1))
        g.add("fleetwatch_slo_state", {**lab, "state": "regression"}, linear(0, steps, 0))
        if version == "interf":
            extra = {"neighbour": "neighbour-b"}
            g.add("fleetwatch_slo_interference", {**lab, **extra}, linear(0, steps, 1))
            rule = suite.rules.find(SLO_INTERFERENCE, slo=slo.name)
            exp_int.append(expected(rule, {**lab, **extra, **joined}, 1))
        else:
            extra = {"gpu_uuid": "GPU-0", "gpu_condition": "hw_thermal_slowdown"}
            g.add("fleetwatch_slo_gpu_degraded", {**lab, **extra}, linear(0, steps, 1))
            rule = suite.rules.find(SLO_GPU_DEGRADED, slo=slo.name)
            exp_gpu.append(expected(rule, {**lab, **extra, **joined}, 1))
    g.expect(minute, SLO_REGRESSION, [])  # the burn fires regression without the state
    g.expect(minute, SLO_INTERFERENCE, exp_int)
    g.expect(minute, SLO_GPU_DEGRADED, exp_gpu)
    return g


def attribution_scenarios(suite: Suite) -> list[TestGroup]:
    """One group per SLO (see the module doc)."""
    return [g for slo in suite.slos.slos if (g := _group(suite, slo)) is not None]


FAMILY = SLOFamily("attribution", ATTRIBUTION_ALERTS, attribution_alerts,
                   attribution_scenarios)
