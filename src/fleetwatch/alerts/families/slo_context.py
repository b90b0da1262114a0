"""What the SLO families' scenarios share: a concrete model an SLO selects, exact event
counts per step for a wanted burn rate, and the event series the sidecars would export."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.numbers import burn_factor, error_budget
from fleetwatch.alerts.owners import slo_team
from fleetwatch.alerts.recording import SLO_MODEL
from fleetwatch.alerts.rules import inside_bands
from fleetwatch.alerts.scenarios import (
    BACKEND,
    EVENTS,
    GOOD,
    RuleIndex,
    TestGroup,
    concrete,
    counter_at,
    linear,
    piecewise,
)
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.promql import string
from fleetwatch.slo.bands import band_label
from fleetwatch.slo.spec import BurnWindow, SLOFile, SLOSpec

#: The engine states that take a burn inside the envelope away from the model's owner
#: (:mod:`fleetwatch.slo.judge.interference`; alerts in :mod:`.attribution`).
ATTRIBUTED_STATES = ("interference", "gpu_degraded")


def attributed_expr(slo: SLOSpec) -> str:
    """The SLO's models whose burn the engine attributes to a neighbour or a GPU (the
    right-hand side of the regression rule's ``unless``)."""
    states = "|".join(ATTRIBUTED_STATES)
    return (f"max by ({', '.join(SLO_MODEL)}) (fleetwatch_slo_state"
            f"{{slo={string(slo.name)}, state=~\"{states}\"}}) == 1")


#: Events per step and band (at least; see :attr:`SLOContext.per_step`).
EVENTS_PER_STEP = 100_000


@dataclass
class SLOContext:
    """One SLO, the rules, and the model its scenarios use (``entry``: the registry entry
    the sidecar would give it, None when unregistered)."""

    slos: SLOFile
    slo: SLOSpec
    rules: RuleIndex
    cfg: AlertingConfig
    model: str
    entry: ModelEntry | None

    @property
    def budget(self) -> Decimal:
        return error_budget(self.slo.objective)

    def factor(self, w: BurnWindow) -> Decimal:
        """The burn-rate threshold of tier ``w``."""
        return burn_factor(w.budget_consumed, self.slo.period_seconds, w.long)

    @property
    def per_step(self) -> int:
        """Events per step and band: :data:`EVENTS_PER_STEP`, or more (powers of 10) so
        that a burn at the lowest threshold is at least 50 bad events per step — burns are
        then exact to 1 % even for a 99.999 % objective (with 100 000 events a 1x
        threshold is 1 bad event, and a burn 10 % above it would round onto it)."""
        low = min(self.factor(w) for w in self.slos.windows) * self.budget
        n = EVENTS_PER_STEP
        while low * n < 50 and n < 10**12:
            n *= 10
        return n

    def inside(self) -> str | None:
        """The highest band inside the envelope (the boundary is what tests tell apart), or
        None when the envelope is below the lowest band (every burn is overload)."""
        bands = inside_bands(self.slo)
        return bands[-1] if bands else None

    def above(self) -> str:
        """The lowest band above the envelope."""
        env = self.slo.concurrency.envelope
        above = [b for b in self.slo.concurrency.bands if b > env]
        return band_label(above[0]) if above else "+Inf"


def bad_per_step(ctx: SLOContext, burn: Decimal) -> int | None:
    """Bad events per step for a constant burn rate (None when impossible: under one bad
    event, or more bad events than events)."""
    bad = int((burn * ctx.budget * ctx.per_step).to_integral_value())
    return bad if 1 <= bad <= ctx.per_step else None


def actual_burn(ctx: SLOContext, bad: int) -> float:
    """The burn rate of ``bad`` bad events per step."""
    return bad / ctx.per_step / float(ctx.budget)


def margin_ok(burn: float, factors: list[Decimal], rel: float = 0.02) -> bool:
    """Clear of every threshold, and not on a rounding edge of the annotations' ``%.3g``
    (Prometheus' float arithmetic may land on either side of it)."""
    stable = "%.3g" % (burn * (1 - 1e-9)) == "%.3g" % (burn * (1 + 1e-9))
    return stable and all(abs(burn - float(f)) > rel * float(f) for f in factors)


def slo_series(g: TestGroup, ctx: SLOContext, version: str,
               bands: dict[str, list[tuple[int, int]]], steps: int) -> None:
    """Events (``ctx.per_step`` per step per band) and good events of ``bands``
    (band → piecewise bad events per step), plus band ``all``."""
    base = {"slo": ctx.slo.name, "model": ctx.model, "model_version": version,
            "backend": BACKEND}
    total_bad = [0] * (steps + 1)
    for band, bad_rates in bands.items():
        g.add(EVENTS, {**base, "band": band}, linear(ctx.per_step, steps))
        good = [(ctx.per_step - r, n) for r, n in bad_rates]
        g.add(GOOD, {**base, "band": band}, piecewise(good))
        for s in range(steps + 1):
            total_bad[s] += counter_at(bad_rates, s)
    n = len(bands)
    g.add(EVENTS, {**base, "band": "all"}, linear(ctx.per_step * n, steps))
    g.add(GOOD, {**base, "band": "all"},
          " ".join(str(s * ctx.per_step * n - total_bad[s]) for s in range(steps + 1)))


def slo_context(slos: SLOFile, slo: SLOSpec, registry: Registry, rules: RuleIndex,
                cfg: AlertingConfig) -> SLOContext:
    """A concrete model the SLO selects (its first model glob, else an entry of the team
    that owns the SLO) and the registry entry the sidecar would give it."""
    owner = slo_team(slo, registry, cfg.platform.team)
    if slo.selector.models:
        model = concrete(slo.selector.models[0])
    elif isinstance(owner, ModelEntry):
        model = concrete(owner.name)
    else:
        model = next((concrete(e.name) for e in registry.entries if e.team == owner),
                     "model-a")
    return SLOContext(slos, slo, rules, cfg, model, registry.lookup(model, ""))
