"""The burn-rate family: ``FleetwatchSLORegression`` and ``FleetwatchSLOOverload``, one rule
each per SLO and window pair (*burn tier*) of the catalog, with their behaviour tests.

* ``FleetwatchSLORegression`` — a concurrency band **inside** the SLO's envelope burns
  faster than the tier's threshold over both its windows: the model got worse at a load it
  promises to handle. Severity is the tier's (``page``/``ticket``).
  A model the SLO engine judges ``interference`` or ``gpu_degraded`` is left out (those
  are platform tickets, :mod:`.attribution`).
* ``FleetwatchSLOOverload`` — only bands **above** the envelope burn: the model is asked
  more than it promises; a ``ticket`` whose annotations point at the autoscaler.

Every rule has ``burn_tier="<long>/<short>"`` so that Alertmanager inhibits slower tiers
while a faster one fires (:func:`fleetwatch.alerts.alertmanager.inhibit_rules`).

**Scenarios** (per SLO and tier): synthetic models burn at a constant rate just above
(×1.1) and just below (÷1.1) the tier's threshold, inside the envelope (regression), only
above it (overload), and in both (regression only); every tier whose threshold the burn
exceeds must fire, no other. A model without registry data fires with the platform team.
**Multiwindow** (per SLO, fastest tier, when its windows add up to at most 4 days): a
spike only in the short window, and a burn that stopped (only the long window) must not
fire; a sustained burn must.
A tier that cannot be tested is reported in :attr:`Suite.not_covered
<fleetwatch.alerts.scenarios.Suite.not_covered>`.
"""

from __future__ import annotations

from decimal import Decimal

from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.annotations import MODEL, OWNER, VALUE, alert_annotations, label
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.families.slo_context import (
    SLOContext,
    actual_burn,
    attributed_expr,
    bad_per_step,
    margin_ok,
    slo_context,
    slo_series,
)
from fleetwatch.alerts.family import SLOFamily
from fleetwatch.alerts.numbers import (
    approx,
    burn_factor,
    dec,
    error_budget,
    human_duration,
    num,
    percent,
    window,
)
from fleetwatch.alerts.owners import with_owner
from fleetwatch.alerts.rules import AlertRule, inside_bands, ordered_tiers, tier_name
from fleetwatch.alerts.scenarios import (
    BACKEND,
    STEP,
    Alert,
    BehaviourTestError,
    Suite,
    TestGroup,
    counter_at,
    expected,
    info_series,
    owner_sample,
)
from fleetwatch.labels.registry import Registry
from fleetwatch.promql import alternation, block, regex_escape, string
from fleetwatch.slo.spec import BurnWindow, SLOFile, SLOSpec

SLO_REGRESSION = "FleetwatchSLORegression"
SLO_OVERLOAD = "FleetwatchSLOOverload"
BURN_ALERTS = (SLO_REGRESSION, SLO_OVERLOAD)


# -- rules ----------------------------------------------------------------------------------
def _burning(slo: SLOSpec, w: BurnWindow, band_matcher: str) -> str:
    factor = num(burn_factor(w.budget_consumed, slo.period_seconds, w.long))
    sel = f'{{slo={string(slo.name)}, {band_matcher}}}'
    return (f"{rec.burn_rate(w.long)}{sel} > {factor}\n"
            f"and\n{rec.burn_rate(w.short)}{sel} > {factor}")


def _max_by_slo_model(expr: str) -> str:
    return f"max by ({', '.join(rec.SLO_MODEL)}) (\n{block(expr)}\n)"


def regression_expr(slo: SLOSpec, w: BurnWindow) -> str:
    """Bands inside the envelope burn over both windows (value: the long-window burn),
    unless the engine attributes the burn to a co-located model or the GPU
    (:mod:`.attribution`: a platform ticket instead)."""
    inside = string(alternation([regex_escape(b) for b in inside_bands(slo)]))
    return (f"{_max_by_slo_model(_burning(slo, w, f'band=~{inside}'))}\n"
            f"unless on ({', '.join(rec.SLO_MODEL)})\n(\n{block(attributed_expr(slo))}\n)")


def overload_expr(slo: SLOSpec, w: BurnWindow) -> str:
    """Only bands above the envelope burn over both windows."""
    inside = [regex_escape(b) for b in inside_bands(slo)]
    above = string(alternation([*inside, "all"]))
    inside_m = string(alternation(inside))
    return (f"{_max_by_slo_model(_burning(slo, w, f'band!~{above}'))}\n"
            f"unless on ({', '.join(rec.SLO_MODEL)})\n"
            f"(\n{block(_burning(slo, w, f'band=~{inside_m}'))}\n)")


def burn_alerts(slos: SLOFile, slo: SLOSpec, registry: Registry,
                cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """Regression then overload, for each tier from the fastest to the slowest."""
    urls, team = cfg.urls, cfg.platform.team
    objective = percent(slo.objective)
    period = window(slo.period_seconds)
    envelope = num(slo.concurrency.envelope)
    static = {"slo": slo.name}
    rules: list[AlertRule] = []
    for w in ordered_tiers(slos.windows):
        factor = burn_factor(w.budget_consumed, slo.period_seconds, w.long)
        f, long, short, tier = approx(factor), window(w.long), window(w.short), tier_name(w)
        exhaust = human_duration(dec(slo.period_seconds) / factor)
        spent = percent(w.budget_consumed)
        burn = (f"burns the error budget of SLO {slo.name} (objective {objective} over "
                f"{period}) {VALUE}x as fast as it can be afforded over the last {long}, and "
                f"faster than {f}x over the last {short} too")
        cost = (f"A {f}x burn spends {spent} of the budget in {long} and all of it in "
                f"{exhaust}.")
        impossible = (" Note: this tier can never fire, its threshold exceeds the largest "
                      "possible burn rate." if factor * error_budget(slo.objective) >= 1 else "")
        rules.append(AlertRule(
            SLO_REGRESSION, with_owner(regression_expr(slo, w), team),
            (("severity", w.severity), ("slo", slo.name), ("burn_tier", tier)),
            alert_annotations(
                urls, SLO_REGRESSION,
                f"SLO {slo.name} regression on {label('model')}: error budget burning {VALUE}x "
                f"within the concurrency envelope",
                f"Model {MODEL} {burn}, in concurrency bands up to {envelope} requests per "
                f"replica (inside the SLO's envelope): a regression, not load; scaling out "
                f"will not fix it. {cost}{impossible} {OWNER}",
                static)))
        rules.append(AlertRule(
            SLO_OVERLOAD, with_owner(overload_expr(slo, w), team),
            (("severity", "ticket"), ("slo", slo.name), ("burn_tier", tier)),
            alert_annotations(
                urls, SLO_OVERLOAD,
                f"SLO {slo.name} overload on {label('model')}: error budget burning {VALUE}x "
                f"only above the concurrency envelope",
                f"Model {MODEL} {burn}, but only in concurrency bands above {envelope} "
                f"requests per replica (the SLO's envelope): overloaded, not broken. Scale "
                f"out: check the autoscaler (signal {rec.AUTOSCALING_SIGNAL}, desired "
                f"replicas = ceil of it; the sidecar serves /autoscaling/{label('model')}), its "
                f"replica limits and the HPA/KEDA status. {cost}{impossible} {OWNER}",
                static, autoscaler=True)))
    return tuple(rules)


# -- scenarios ------------------------------------------------------------------------------
def expected_burn_alerts(ctx: SLOContext, kind: str, version: str, burns: dict[str, float],
                         tier_burns: dict[str, tuple[float, float]] | None = None
                         ) -> list[Alert]:
    """Expected ``kind`` alerts for a model whose bands burn at constant ``burns`` (or at
    ``tier_burns[tier] = (long, short)`` for the inside band)."""
    inside = set(inside_bands(ctx.slo))
    out = []
    for w in ctx.slos.windows:
        f = float(ctx.factor(w))
        tier = tier_name(w)

        def burning(b: float, tier: str = tier, f: float = f) -> bool:
            if tier_burns is not None:
                long, short = tier_burns[tier]
                return long > f and short > f
            return b > f

        ins = [b for band, b in burns.items() if band in inside and burning(b)]
        out_ = [b for band, b in burns.items() if band not in inside and burning(b)]
        if kind == SLO_REGRESSION and ins:
            value = max(tier_burns[tier][0] if tier_burns else b for b in ins)
        elif kind == SLO_OVERLOAD and out_ and not ins:
            value = max(out_)
        else:
            continue  # this tier does not fire for these burns
        rule = ctx.rules.find(kind, slo=ctx.slo.name, burn_tier=tier)
        sample = {"slo": ctx.slo.name, "model": ctx.model, "model_version": version,
                  "backend": BACKEND,
                  **(owner_sample(ctx.entry, ctx.cfg.platform.team)
                     if version != "unowned" else {"team": ctx.cfg.platform.team})}
        out.append(expected(rule, sample, value))
    return out


#: Multiples of a tier's threshold tried in turn for the burns just above and below it.
_THRESHOLD_MARGINS = ("1.1", "1.05", "1.15", "1.2")


def _threshold_group(suite: Suite, ctx: SLOContext, w: BurnWindow, unowned: bool
                     ) -> TestGroup | None:
    factors = [ctx.factor(x) for x in ctx.slos.windows]
    f = ctx.factor(w)
    chosen = None
    for mult in _THRESHOLD_MARGINS:
        m = Decimal(mult)
        above, below = bad_per_step(ctx, f * m), bad_per_step(ctx, f / m)
        if above is None or below is None:
            continue
        if margin_ok(actual_burn(ctx, above), factors) and \
                margin_ok(actual_burn(ctx, below), factors):
            chosen = (above, below)
            break
    if chosen is None:
        what = f"SLO {ctx.slo.name}, tier {tier_name(w)}: threshold test"
        if f * ctx.budget >= 1:
            suite.skip(what, f"its threshold {num(f)}x can never be reached (the largest "
                             f"possible burn is {approx(1 / ctx.budget)}x)")
        else:
            suite.skip(what, f"no burn {', '.join(_THRESHOLD_MARGINS)} times above and below "
                             f"{num(f)}x is clear of every tier's threshold and of the "
                             f"annotations' rounding")
        return None
    above, below = chosen
    steps, minute = 12, 10
    g = TestGroup(f"SLO {ctx.slo.name}, tier {tier_name(w)}: burn just above and below "
                  f"{float(f):.4g}x; regression inside the envelope, overload only above it")
    ins, out = ctx.inside(), ctx.above()
    scenarios: dict[str, dict[str, int]]  # version → band → bad per step
    if ins is None:  # no band inside the envelope: only overload can fire
        scenarios = {"ovl-above": {out: above}, "ovl-below": {out: below}}
    else:
        scenarios = {
            "reg-above": {ins: above}, "reg-below": {ins: below},
            "ovl-above": {ins: 0, out: above}, "ovl-below": {ins: 0, out: below},
            "both": {ins: above, out: above},
        }
    if unowned:
        scenarios["unowned"] = {ins if ins is not None else out: above}
    for version, bands in scenarios.items():
        slo_series(g, ctx, version, {b: [(r, steps)] for b, r in bands.items()}, steps)
        if version != "unowned":
            info_series(g, ctx.model, version, ctx.entry, steps)
    for kind in BURN_ALERTS:
        exp = []
        for version, bands in scenarios.items():
            burns = {b: actual_burn(ctx, r) for b, r in bands.items()}
            exp += expected_burn_alerts(ctx, kind, version, burns)
        g.expect(minute, kind, exp)
    return g


#: The multiwindow test runs promtool for long + short window of one-minute steps: up to
#: 4 days (a 3d/6h fastest tier takes about a minute); slower catalogs are not tested there.
MULTIWINDOW_MAX_STEPS = 4 * 24 * 60

#: Burns of the multiwindow scenarios as multiples of the fastest tier's threshold, tried
#: in turn until one is clear of every tier's threshold and of the annotations' %.3g
#: rounding edges (1.1 × 0.00125 = 0.001375 is on one).
_MULTIWINDOW_BURNS = {
    "spike": ("2", "2.1", "1.9", "2.2", "2.05", "1.95", "2.15", "2.3"),
    "stopped": ("1.5", "1.6", "1.4", "1.45", "1.55", "1.42", "1.52", "1.35"),
    "sustained": ("1.1", "1.15", "1.2", "1.05", "1.12", "1.17", "1.08", "1.13"),
}


def _window_burn(bad: list[tuple[int, int]], per_step: int, minute: int, w_steps: int,
                 budget: float) -> float:
    first = max(0, minute - w_steps)
    total = per_step * (minute - first)
    b = counter_at(bad, minute) - counter_at(bad, first)
    return b / total / budget


def multiwindow_group(suite: Suite, ctx: SLOContext) -> TestGroup | None:
    """The multiwindow scenarios of the SLO's fastest tier; None (and a
    :meth:`~Suite.skip`) when they cannot be tested. Raises :class:`BehaviourTestError`
    when the tier's windows are not whole minutes of at least 2m, or no burn of a scenario
    is clear of the thresholds."""
    w = ordered_tiers(ctx.slos.windows)[0]
    what = f"SLO {ctx.slo.name}, tier {tier_name(w)}: multiwindow test"
    inside = ctx.inside()
    if inside is None:
        suite.skip(what, "no concurrency band is inside the envelope, so no regression "
                         "alert tells the windows apart")
        return None
    if w.short < 2 * STEP or w.long % STEP or w.short % STEP:
        raise BehaviourTestError(
            f"behaviour tests need whole-minute windows of at least 2m; tier "
            f"{tier_name(w)} of SLO {ctx.slo.name} is shorter")
    long, short = int(w.long // STEP), int(w.short // STEP)
    minute = long + short
    if minute > MULTIWINDOW_MAX_STEPS:
        suite.skip(what, f"its windows add up to {minute} one-minute steps, more than the "
                         f"{MULTIWINDOW_MAX_STEPS} promtool is asked to evaluate")
        return None
    f = ctx.factor(w)
    budget = float(ctx.budget)
    top = (1 / ctx.budget) * Decimal("0.99")
    factors = {tier_name(x): float(ctx.factor(x)) for x in ctx.slos.windows}
    g = TestGroup(f"SLO {ctx.slo.name}, tier {tier_name(w)}: both windows must burn "
                  "(a short spike or a burn that stopped does not fire)")
    exp: list[Alert] = []
    for version, mults in _MULTIWINDOW_BURNS.items():
        problem = ""
        for m in mults:  # the first burn that is clear of every threshold and rounding edge
            burn = f * Decimal(m)
            per_step = bad_per_step(ctx, burn if version == "sustained" else min(burn, top))
            if per_step is None:
                suite.skip(what, f"a {version} burn of {m} times the threshold {num(f)}x is "
                                 f"under one bad event per step or over all events")
                return None
            bad = {"spike": [(0, minute - short), (per_step, short + 2)],
                   "stopped": [(per_step, minute - 2 * short), (0, 2 * short + 2)],
                   "sustained": [(per_step, minute + 2)]}[version]
            tier_burns = {}
            for x in ctx.slos.windows:
                lb = _window_burn(bad, ctx.per_step, minute, int(x.long // STEP), budget)
                sb = _window_burn(bad, ctx.per_step, minute, int(x.short // STEP), budget)
                fx = factors[tier_name(x)]
                decisive = [b for b in (lb, sb) if b <= fx] or [lb, sb]
                if not margin_ok(min(decisive), [Decimal(repr(fx))], 0.03):
                    problem = (f"multiwindow scenario {version} of SLO {ctx.slo.name} is too "
                               f"close to the threshold of tier {tier_name(x)}")
                    break
                tier_burns[tier_name(x)] = (lb, sb)
            else:
                break
        else:
            raise BehaviourTestError(problem)
        slo_series(g, ctx, version, {inside: bad}, minute + 1)
        info_series(g, ctx.model, version, ctx.entry, minute + 1)
        exp += expected_burn_alerts(ctx, SLO_REGRESSION, version, {inside: 0.0}, tier_burns)
    if not any(e["exp_labels"]["model_version"] == "sustained"
               and e["exp_labels"]["burn_tier"] == tier_name(w) for e in exp):
        raise BehaviourTestError("sustained scenario does not fire")
    g.expect(minute, SLO_REGRESSION, exp)
    return g


def burn_scenarios(suite: Suite) -> list[TestGroup]:
    """Per SLO: a threshold group per tier, then the multiwindow group of its fastest tier
    (the first SLO's fastest tier also checks a model without registry data)."""
    groups: list[TestGroup] = []
    for i, slo in enumerate(suite.slos.slos):
        ctx = slo_context(suite.slos, slo, suite.registry, suite.rules, suite.cfg)
        for j, w in enumerate(ordered_tiers(ctx.slos.windows)):
            g = _threshold_group(suite, ctx, w, unowned=i == 0 and j == 0)
            if g is not None:
                groups.append(g)
        mw = multiwindow_group(suite, ctx)
        if mw is not None:
            groups.append(mw)
    return groups


FAMILY = SLOFamily("burn", BURN_ALERTS, burn_alerts, burn_scenarios)
