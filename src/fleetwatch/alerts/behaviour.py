"""Behaviour tests for the generated rules, for ``promtool test rules`` — generated from the
same specs, one test group per alert kind.

* **SLO thresholds** (per SLO and burn tier): synthetic models burn at a constant rate just
  above (×1.1) and just below (÷1.1) the tier's threshold, inside the concurrency envelope
  (regression), only above it (overload), and in both (regression only). Every tier whose
  threshold the burn exceeds must fire, no other — so regression and overload are told
  apart and every threshold is checked from both sides. The ``burn_tier``, ``slo``,
  ``model``… labels the inhibitions need are part of the expected labels; a model without
  registry data fires with the platform team.
* **Multiwindow** (per SLO, fastest tier, when its windows add up to at most 4 days): a
  spike only in the short window, and a burn that stopped (only the long window) must not
  fire; a sustained burn must.
* **No data**, **misconfigured**, and every **platform** alert (sidecar down, upstream
  down per model, model not ready per tier allowance, queue wait, KV cache, GPU memory):
  fires after its ``for:`` above the threshold, not before and not below.
* **Recording rules**: every per-model name with its labels on exactly representable values
  (sums over replicas, ratios, means, a median), and burn rates / budget remaining (rounded,
  promtool compares floats exactly).

Expected annotations are rendered from the rules' own templates by :func:`render_template`
(the subset of Go templates the generator uses), so a template that Prometheus renders
differently fails the test.
"""

from __future__ import annotations

import fnmatch
import re
import urllib.parse
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from fleetwatch.alerts import alerting as al
from fleetwatch.alerts import recording as rec
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.numbers import burn_factor, error_budget, num
from fleetwatch.alerts.promql import string
from fleetwatch.alerts.render import dump, header
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.slo.bands import band_label
from fleetwatch.slo.spec import BurnWindow, SLOFile, SLOSpec, parse_duration

STEP = 60  # seconds: input interval and evaluation interval
_EVENTS = "fleetwatch_slo_events_total"
_GOOD = "fleetwatch_slo_good_events_total"
_BACKEND = "triton"


class BehaviourTestError(ValueError):
    """The specs do not allow an unambiguous behaviour test (message says why)."""


# -- Go templates (the subset the generator emits) -----------------------------------------
#: An action: ``{{`` … ``}}``, where a string literal may hold ``}}``.
_ACTION = re.compile(r'{{((?:[^"}]|"(?:[^"\\]|\\.)*"|}(?!}))*)}}', re.S)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    for m in _ACTION.finditer(text):
        if m.start() > pos:
            out.append(("text", text[pos:m.start()]))
        out.append(("action", m.group(1).strip()))
        pos = m.end()
    if pos < len(text):
        out.append(("text", text[pos:]))
    return out


def render_template(text: str, labels: dict[str, str], value: float) -> str:
    """Render an annotation as Prometheus would: ``{{ $labels.x }}``, ``{{ . }}``,
    ``{{ printf "%.3g" $value }}``, ``{{ $value | humanizePercentage }}``,
    ``{{ $labels.x | urlquery }}``, ``{{ "a string" }}`` and
    ``{{ with $labels.x }}…{{ else }}…{{ end }}``. Raises ``ValueError`` on anything else."""
    toks = _tokens(text)

    def run(i: int, dot: str, out: list[str], emit: bool) -> tuple[int, str]:
        while i < len(toks):
            kind, body = toks[i]
            i += 1
            if kind == "text":
                if emit:
                    out.append(body)
                continue
            if body in ("else", "end"):
                return i, body
            if body.startswith("with "):
                m = re.fullmatch(r"with \$labels\.(\w+)", body)
                if not m:
                    raise ValueError(f"unsupported template action {body!r}")
                val = labels.get(m.group(1), "")
                i, stop = run(i, val, out, emit and bool(val))
                if stop == "else":
                    i, stop = run(i, dot, out, emit and not val)
                if stop != "end":
                    raise ValueError("unterminated {{ with }}")
                continue
            if emit:
                out.append(_action(body, labels, value, dot))
        return i, ""

    out: list[str] = []
    run(0, "", out, True)
    return "".join(out)


_GO_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_GO_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"'}


def _go_string(literal: str) -> str:
    """The value of a Go interpreted string literal (the escapes :func:`~fleetwatch.alerts.
    promql.string` writes: ``\\\\ \\" \\n \\r \\t \\xHH``)."""
    out, i, body = [], 0, literal[1:-1]
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
        elif body[i + 1] == "x":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        else:
            out.append(_GO_ESCAPES[body[i + 1]])
            i += 2
    return "".join(out)


def _action(body: str, labels: dict[str, str], value: float, dot: str) -> str:
    if body == ".":
        return dot
    if _GO_STRING.fullmatch(body):
        return _go_string(body)
    m = re.fullmatch(r"\$labels\.(\w+)", body)
    if m:
        return labels.get(m.group(1), "")
    m = re.fullmatch(r"\$labels\.(\w+) \| urlquery", body)
    if m:  # Go's url.QueryEscape
        return urllib.parse.quote_plus(labels.get(m.group(1), ""))
    m = re.fullmatch(r'printf "(%[.0-9]*[gfe])" \$value', body)
    if m:
        return m.group(1) % value
    if body == "$value | humanizePercentage":
        return "%.4g%%" % (value * 100)
    raise ValueError(f"unsupported template action {body!r}")


# -- building blocks ------------------------------------------------------------------------
def _selector(name: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f"{k}={string(v)}" for k, v in labels.items())
    return f"{name}{{{inner}}}"


def _linear(rate_per_step: int | float, steps: int, start: float = 0) -> str:
    return f"{_n(start)}+{_n(rate_per_step)}x{steps}"


def _n(x: float) -> str:
    return num(x)  # exact: 120 × 0.15 is 18, not 18.000000000000004


def _piecewise(rates: list[tuple[int, int]]) -> str:
    """A counter from 0 whose increase per step is ``rate`` for ``steps`` steps, for each
    ``(rate, steps)`` in turn."""
    parts, value, first = [], 0, True
    for rate, steps in rates:
        if first:
            parts.append(f"0+{rate}x{steps}")
            value = rate * steps
            first = False
        else:
            value += rate
            parts.append(f"{value}+{rate}x{steps - 1}")
            value += rate * (steps - 1)
    return " ".join(parts)


def _counter_at(rates: list[tuple[int, int]], step: int) -> int:
    value, t = 0, 0
    for rate, steps in rates:
        take = max(0, min(steps, step - t))
        value += rate * take
        t += steps
    return value


@dataclass
class _Group:
    name: str
    series: list[dict[str, str]] = field(default_factory=list)
    alerts: dict[tuple[int, str], list[dict[str, Any]]] = field(default_factory=dict)
    exprs: list[dict[str, Any]] = field(default_factory=list)

    def add(self, name: str, labels: dict[str, str], values: str) -> None:
        self.series.append({"series": _selector(name, labels), "values": values})

    def expect(self, minute: int, alertname: str, alerts: list[dict[str, Any]]) -> None:
        self.alerts.setdefault((minute, alertname), []).extend(alerts)

    def to_dict(self) -> dict[str, Any]:
        tests = []
        for (minute, name), exp in sorted(self.alerts.items()):
            exp = sorted(exp, key=lambda a: sorted(a["exp_labels"].items()))
            tests.append({"eval_time": f"{minute}m", "alertname": name, "exp_alerts": exp})
        out: dict[str, Any] = {"name": self.name, "interval": f"{STEP // 60}m",
                               "input_series": self.series}
        if tests:
            out["alert_rule_test"] = tests
        if self.exprs:
            out["promql_expr_test"] = self.exprs
        return out


class _Rules:
    """Generated alert rules, looked up by name and static labels."""

    def __init__(self, groups: list[al.RuleGroup]) -> None:
        self.rules = [r for g in groups for r in g.rules if isinstance(r, al.AlertRule)]

    def find(self, alert: str, **static: str) -> al.AlertRule:
        hits = [r for r in self.rules if r.alert == alert
                and all(render_template(dict(r.labels).get(k, ""), {}, 0.0) == v
                        for k, v in static.items())]
        if len(hits) != 1:
            raise BehaviourTestError(f"expected one {alert} rule with {static}, got {len(hits)}")
        return hits[0]


def _expected(rule: al.AlertRule, sample: dict[str, str], value: float) -> dict[str, Any]:
    """The alert promtool should see: sample labels overridden by the rule's labels, and
    the annotations rendered with the sample's labels (as Prometheus does)."""
    labels = {**sample, **{k: render_template(v, sample, value) for k, v in rule.labels}}
    labels = {k: v for k, v in labels.items() if v != ""}
    return {"exp_labels": labels,
            "exp_annotations": {k: render_template(v, sample, value)
                                for k, v in rule.annotations}}


def _concrete(glob: str, default: str = "model-a") -> str:
    """A model name matching ``glob`` (``*`` → ``x``, ``?`` → ``x``, a class → one of its
    members), or ``default`` when ``glob`` matches no name (an empty range: ``[z-a]``)."""
    out, i, n = [], 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c in "*?":
            out.append("x")
            continue
        if c == "[":  # find the class as fnmatch does; an unclosed [ is itself
            j = i + (glob[i:i + 1] == "!")
            j += glob[j:j + 1] == "]"
            j = glob.find("]", j)
            if j >= 0:
                cls = glob[i - 1:j + 1]
                out.append(next((m for m in dict.fromkeys(glob[i:j] + "xa0-_!Z.~#")
                                 if fnmatch.fnmatchcase(m, cls)), ""))
                i = j + 1
                continue
        out.append(c)
    name = "".join(out)
    return name if fnmatch.fnmatchcase(name, glob) else default


def _info(g: _Group, model: str, version: str, entry: ModelEntry | None, steps: int) -> None:
    if entry is None:
        return
    g.add("modelserver_model_info",
          {"model": model, "model_version": version, "backend": _BACKEND, "runtime": "python",
           "team": entry.team, "owner": entry.owner, "oncall": entry.oncall,
           "latency_tier": entry.latency_tier}, _linear(0, steps, 1))


def _owner_sample(entry: ModelEntry | None, platform_team: str) -> dict[str, str]:
    if entry is None:
        return {"team": platform_team}
    return {"team": entry.team, "owner": entry.owner, "oncall": entry.oncall}


# -- SLO tests ------------------------------------------------------------------------------
@dataclass
class _SLOContext:
    slos: SLOFile
    slo: SLOSpec
    rules: _Rules
    cfg: AlertingConfig
    model: str
    entry: ModelEntry | None

    @property
    def budget(self) -> Decimal:
        return error_budget(self.slo.objective)

    def factor(self, w: BurnWindow) -> Decimal:
        return burn_factor(w.budget_consumed, self.slo.period_seconds, w.long)

    @property
    def per_step(self) -> int:
        """Events per step and band: :data:`_EVENTS_PER_STEP`, or more (powers of 10) so
        that a burn at the lowest threshold is at least 50 bad events per step — burns are
        then exact to 1 % even for a 99.999 % objective (with 100 000 events a 1x
        threshold was 1 bad event, and a burn 10 % above it rounded onto it)."""
        low = min(self.factor(w) for w in self.slos.windows) * self.budget
        n = _EVENTS_PER_STEP
        while low * n < 50 and n < 10**12:
            n *= 10
        return n

    def inside(self) -> str | None:
        """The highest band inside the envelope (the boundary is what tests tell apart), or
        None when the envelope is below the lowest band (every burn is overload)."""
        bands = al.inside_bands(self.slo)
        return bands[-1] if bands else None

    def above(self) -> str:
        env = self.slo.concurrency.envelope
        above = [b for b in self.slo.concurrency.bands if b > env]
        return band_label(above[0]) if above else "+Inf"


_EVENTS_PER_STEP = 100_000
#: The multiwindow test runs promtool for long + short window of one-minute steps: up to
#: 4 days (a 3d/6h fastest tier takes about a minute); slower catalogs are not tested there.
MULTIWINDOW_MAX_STEPS = 4 * 24 * 60


def _bad_per_step(ctx: _SLOContext, burn: Decimal) -> int | None:
    """Bad events per step for a constant burn rate (None when impossible)."""
    bad = int((burn * ctx.budget * ctx.per_step).to_integral_value())
    return bad if 1 <= bad <= ctx.per_step else None


def _actual_burn(ctx: _SLOContext, bad: int) -> float:
    return bad / ctx.per_step / float(ctx.budget)


def _margin_ok(burn: float, factors: list[Decimal], rel: float = 0.02) -> bool:
    """Clear of every threshold, and not on a rounding edge of the annotations' ``%.3g``
    (Prometheus' float arithmetic may land on either side of it)."""
    stable = "%.3g" % (burn * (1 - 1e-9)) == "%.3g" % (burn * (1 + 1e-9))
    return stable and all(abs(burn - float(f)) > rel * float(f) for f in factors)


def _slo_series(g: _Group, ctx: _SLOContext, version: str,
                bands: dict[str, list[tuple[int, int]]], steps: int) -> None:
    """Events (``ctx.per_step`` per step per band) and good events of ``bands``
    (band → piecewise bad events per step), plus band ``all``."""
    base = {"slo": ctx.slo.name, "model": ctx.model, "model_version": version,
            "backend": _BACKEND}
    total_bad = [0] * (steps + 1)
    for band, bad_rates in bands.items():
        g.add(_EVENTS, {**base, "band": band}, _linear(ctx.per_step, steps))
        good = [(ctx.per_step - r, n) for r, n in bad_rates]
        g.add(_GOOD, {**base, "band": band}, _piecewise(good))
        for s in range(steps + 1):
            total_bad[s] += _counter_at(bad_rates, s)
    n = len(bands)
    g.add(_EVENTS, {**base, "band": "all"}, _linear(ctx.per_step * n, steps))
    g.add(_GOOD, {**base, "band": "all"},
          " ".join(str(s * ctx.per_step * n - total_bad[s]) for s in range(steps + 1)))


def _burn_alerts(ctx: _SLOContext, kind: str, version: str, burns: dict[str, float],
                 tier_burns: dict[str, tuple[float, float]] | None = None
                 ) -> list[dict[str, Any]]:
    """Expected ``kind`` alerts for a model whose bands burn at constant ``burns`` (or at
    ``tier_burns[tier] = (long, short)`` for the inside band)."""
    inside = set(al.inside_bands(ctx.slo))
    out = []
    for w in ctx.slos.windows:
        f = float(ctx.factor(w))
        tier = al.tier_name(w)

        def burning(band: str, b: float, tier: str = tier, f: float = f) -> bool:
            if tier_burns is not None:
                long, short = tier_burns[tier]
                return long > f and short > f
            return b > f

        ins = [b for band, b in burns.items() if band in inside and burning(band, b)]
        out_ = [b for band, b in burns.items() if band not in inside and burning(band, b)]
        if kind == al.SLO_REGRESSION and ins:
            value = max(tier_burns[tier][0] if tier_burns else b for b in ins)
        elif kind == al.SLO_OVERLOAD and out_ and not ins:
            value = max(out_)
        else:
            continue
        rule = ctx.rules.find(kind, slo=ctx.slo.name, burn_tier=tier)
        sample = {"slo": ctx.slo.name, "model": ctx.model, "model_version": version,
                  "backend": _BACKEND,
                  **(_owner_sample(ctx.entry, ctx.cfg.platform.team)
                     if version != "unowned" else {"team": ctx.cfg.platform.team})}
        out.append(_expected(rule, sample, value))
    return out


def _slo_threshold_groups(ctx: _SLOContext, first: bool) -> list[_Group]:
    groups = []
    factors = [ctx.factor(w) for w in ctx.slos.windows]
    for i, w in enumerate(al.ordered_tiers(ctx.slos.windows)):
        f = ctx.factor(w)
        chosen = None
        for mult in ("1.1", "1.05", "1.15", "1.2"):
            m = Decimal(mult)
            above, below = _bad_per_step(ctx, f * m), _bad_per_step(ctx, f / m)
            if above is None or below is None:
                continue
            if _margin_ok(_actual_burn(ctx, above), factors) and \
                    _margin_ok(_actual_burn(ctx, below), factors):
                chosen = (above, below)
                break
        if chosen is None:
            continue  # an unreachable threshold (factor × budget ≥ 1): nothing to test
        above, below = chosen
        steps, minute = 12, 10
        g = _Group(f"SLO {ctx.slo.name}, tier {al.tier_name(w)}: burn just above and below "
                   f"{float(f):.4g}x; regression inside the envelope, overload only above it")
        ins, out = ctx.inside(), ctx.above()
        if ins is None:  # no band inside the envelope: only overload can fire
            scenarios = {"ovl-above": {out: above}, "ovl-below": {out: below}}
        else:
            scenarios = {  # version → band → bad per step
                "reg-above": {ins: above}, "reg-below": {ins: below},
                "ovl-above": {ins: 0, out: above}, "ovl-below": {ins: 0, out: below},
                "both": {ins: above, out: above},
            }
        if first and i == 0:
            scenarios["unowned"] = {ins if ins is not None else out: above}
        for version, bands in scenarios.items():
            _slo_series(g, ctx, version, {b: [(r, steps)] for b, r in bands.items()}, steps)
            if version != "unowned":
                _info(g, ctx.model, version, ctx.entry, steps)
        for kind in (al.SLO_REGRESSION, al.SLO_OVERLOAD):
            exp = []
            for version, bands in scenarios.items():
                burns = {b: _actual_burn(ctx, r) for b, r in bands.items()}
                exp += _burn_alerts(ctx, kind, version, burns)
            g.expect(minute, kind, exp)
        groups.append(g)
    return groups


def _window_burn(bad: list[tuple[int, int]], per_step: int, minute: int, w_steps: int,
                 budget: float) -> float:
    first = max(0, minute - w_steps)
    total = per_step * (minute - first)
    b = _counter_at(bad, minute) - _counter_at(bad, first)
    return b / total / budget


def _slo_multiwindow_group(ctx: _SLOContext) -> _Group | None:
    w = al.ordered_tiers(ctx.slos.windows)[0]
    inside = ctx.inside()
    if inside is None:
        return None  # no band inside the envelope: no regression to tell apart
    if w.short < 2 * STEP or w.long % STEP or w.short % STEP:
        raise BehaviourTestError(
            f"behaviour tests need whole-minute windows of at least 2m; tier "
            f"{al.tier_name(w)} of SLO {ctx.slo.name} is shorter")
    long, short = int(w.long // STEP), int(w.short // STEP)
    minute = long + short
    if minute > MULTIWINDOW_MAX_STEPS:
        return None  # promtool would evaluate every rule for months of minutes
    f = ctx.factor(w)
    budget = float(ctx.budget)
    top = (1 / ctx.budget) * Decimal("0.99")
    factors = {al.tier_name(x): float(ctx.factor(x)) for x in ctx.slos.windows}
    g = _Group(f"SLO {ctx.slo.name}, tier {al.tier_name(w)}: both windows must burn "
               "(a short spike or a burn that stopped does not fire)")
    exp: list[dict[str, Any]] = []
    for version, mults in _MULTIWINDOW_BURNS.items():
        problem = ""
        for m in mults:  # the first burn that is clear of every threshold and rounding edge
            burn = f * Decimal(m)
            bad_per_step = _bad_per_step(ctx, burn if version == "sustained" else min(burn, top))
            if bad_per_step is None:
                return None
            bad = {"spike": [(0, minute - short), (bad_per_step, short + 2)],
                   "stopped": [(bad_per_step, minute - 2 * short), (0, 2 * short + 2)],
                   "sustained": [(bad_per_step, minute + 2)]}[version]
            tier_burns = {}
            for x in ctx.slos.windows:
                lb = _window_burn(bad, ctx.per_step, minute, int(x.long // STEP), budget)
                sb = _window_burn(bad, ctx.per_step, minute, int(x.short // STEP), budget)
                fx = factors[al.tier_name(x)]
                decisive = [b for b in (lb, sb) if b <= fx] or [lb, sb]
                if not _margin_ok(min(decisive), [Decimal(repr(fx))], 0.03):
                    problem = (f"multiwindow scenario {version} of SLO {ctx.slo.name} is too "
                               f"close to the threshold of tier {al.tier_name(x)}")
                    break
                tier_burns[al.tier_name(x)] = (lb, sb)
            else:
                break
        else:
            raise BehaviourTestError(problem)
        _slo_series(g, ctx, version, {inside: bad}, minute + 1)
        _info(g, ctx.model, version, ctx.entry, minute + 1)
        exp += _burn_alerts(ctx, al.SLO_REGRESSION, version, {inside: 0.0}, tier_burns)
    if not any(e["exp_labels"]["model_version"] == "sustained"
               and e["exp_labels"]["burn_tier"] == al.tier_name(w) for e in exp):
        raise BehaviourTestError("sustained scenario does not fire")
    g.expect(minute, al.SLO_REGRESSION, exp)
    return g


#: Burns of the multiwindow scenarios as multiples of the fastest tier's threshold, tried
#: in turn until one is clear of every tier's threshold and of the annotations' %.3g
#: rounding edges (1.1 × 0.00125 = 0.001375 is on one).
_MULTIWINDOW_BURNS = {
    "spike": ("2", "2.1", "1.9", "2.2", "2.05", "1.95", "2.15", "2.3"),
    "stopped": ("1.5", "1.6", "1.4", "1.45", "1.55", "1.42", "1.52", "1.35"),
    "sustained": ("1.1", "1.15", "1.2", "1.05", "1.12", "1.17", "1.08", "1.13"),
}


def _slo_context(slos: SLOFile, slo: SLOSpec, registry: Registry, rules: _Rules,
                 cfg: AlertingConfig) -> _SLOContext:
    """A concrete model the SLO selects (its first model glob, else an entry of the team
    that owns the SLO) and the registry entry the sidecar would give it."""
    owner = al.slo_team(slo, registry, cfg.platform.team)
    if slo.selector.models:
        model = _concrete(slo.selector.models[0])
    elif isinstance(owner, ModelEntry):
        model = _concrete(owner.name)
    else:
        model = next((_concrete(e.name) for e in registry.entries if e.team == owner),
                     "model-a")
    return _SLOContext(slos, slo, rules, cfg, model, registry.lookup(model, ""))


def _no_data_group(slos: SLOFile, registry: Registry, rules: _Rules,
                   cfg: AlertingConfig) -> _Group:
    g = _Group("No SLO events at all: FleetwatchSLONoData after its for: (not before)")
    for_min = int(_seconds(cfg.slo_alerts.absent_for) // 60)
    g.add("up", {"job": cfg.platform.sidecar_job, "instance": "sidecar-a:9810"},
          _linear(0, for_min + 3, 1))
    g.expect(for_min - 1, al.SLO_NO_DATA, [])
    exp = []
    for slo in slos.slos:
        rule = rules.find(al.SLO_NO_DATA, slo=slo.name)
        exp.append(_expected(rule, {"slo": slo.name, "band": "all"}, 1.0))
    g.expect(for_min + 1, al.SLO_NO_DATA, exp)
    return g


def _misconfigured_group(slos: SLOFile, registry: Registry, rules: _Rules,
                         cfg: AlertingConfig) -> _Group:
    g = _Group("An SLO the engine cannot evaluate: FleetwatchSLOMisconfigured")
    for_min = int(_seconds(cfg.slo_alerts.misconfigured_for) // 60)
    steps = for_min + 3
    exp = []
    for slo in slos.slos:
        ctx = _slo_context(slos, slo, registry, rules, cfg)
        base = {"slo": slo.name, "model": ctx.model, "model_version": "1", "backend": _BACKEND}
        g.add("fleetwatch_slo_state", {**base, "state": "misconfigured"}, _linear(0, steps, 1))
        g.add("fleetwatch_slo_state", {**base, "state": "ok"}, _linear(0, steps, 0))
        _info(g, ctx.model, "1", ctx.entry, steps)
        rule = rules.find(al.SLO_MISCONFIGURED, slo=slo.name)
        exp.append(_expected(rule, {**base, **_owner_sample(ctx.entry, cfg.platform.team)}, 1))
    g.expect(for_min - 1, al.SLO_MISCONFIGURED, [])
    g.expect(for_min + 1, al.SLO_MISCONFIGURED, exp)
    return g


def _seconds(duration: str) -> float:
    return parse_duration(duration)


# -- platform tests -------------------------------------------------------------------------
def _platform_groups(registry: Registry, rules: _Rules, cfg: AlertingConfig) -> list[_Group]:
    p = cfg.platform
    groups = []

    # sidecar down
    g = _Group("Sidecar down: up == 0 for its for:, the healthy sidecar does not fire")
    mins = int(_seconds(p.sidecar_down.for_) // 60)
    g.add("up", {"job": p.sidecar_job, "instance": "sidecar-a:9810"}, _linear(0, mins + 3, 0))
    g.add("up", {"job": p.sidecar_job, "instance": "sidecar-b:9810"}, _linear(0, mins + 3, 1))
    rule = rules.find(al.SIDECAR_DOWN)
    g.expect(mins - 1, al.SIDECAR_DOWN, [])
    g.expect(mins + 1, al.SIDECAR_DOWN, [_expected(
        rule, {"job": p.sidecar_job, "instance": "sidecar-a:9810"}, 0)])
    groups.append(g)

    # upstream down: one alert per model the target served (they inhibit its SLO alerts)
    g = _Group("Upstream down: one alert per model of the target (model label for "
               "inhibition), one per target without models; an up target does not fire")
    mins = int(_seconds(p.upstream_down.for_) // 60)
    steps = mins + 3
    side = {"job": p.sidecar_job, "instance": "sidecar-a:9810"}
    g.add("fleetwatch_upstream_up", {**side, "target": "triton"}, _linear(0, steps, 0))
    g.add("fleetwatch_upstream_up", {**side, "target": "gpus"}, _linear(0, steps, 0))
    g.add("fleetwatch_upstream_up", {**side, "target": "vllm"}, _linear(0, steps, 1))
    for model in ("model-a", "model-b"):
        g.add("fleetwatch_upstream_model_ready", {**side, "target": "triton", "model": model},
              _linear(0, steps, 1))
    g.add("fleetwatch_upstream_model_ready", {**side, "target": "vllm", "model": "llm-a"},
          _linear(0, steps, 1))
    rule = rules.find(al.UPSTREAM_DOWN)
    g.expect(mins - 1, al.UPSTREAM_DOWN, [])
    g.expect(mins + 1, al.UPSTREAM_DOWN, [
        _expected(rule, {**side, "target": "triton", "model": "model-a"}, 1),
        _expected(rule, {**side, "target": "triton", "model": "model-b"}, 1),
        _expected(rule, {**side, "target": "gpus"}, 0)])
    groups.append(g)

    # model not ready: each registry name after its tier's allowance
    g = _Group("Model not ready: fires after its latency tier's start-up allowance, with the "
               "registry entry's owners; unregistered models use the default allowance")
    cases: list[tuple[str, al.AlertRule, int]] = []
    for e, _earlier in al._not_ready_entries(registry):
        name = _concrete(e.name, "")
        first = next((x for x in registry.entries if _name_match(x, name)), None)
        if not name or first is None or first.name != e.name:
            continue  # a glob that matches no name, or whose names an earlier entry takes
        rule = rules.find(al.MODEL_NOT_READY, registry_entry=e.name)
        cases.append((name, rule, int(_seconds(rule.for_ or "0s") // 60)))
    unregistered = "unregistered-model-z9"
    if not any(_name_match(x, unregistered) for x in registry.entries):
        rule = next(r for r in rules.rules if r.alert == al.MODEL_NOT_READY
                    and "registry_entry" not in dict(r.labels))
        cases.append((unregistered, rule, int(_seconds(rule.for_ or "0s") // 60)))
    steps = max(m for _, _, m in cases) + 3
    g.add("fleetwatch_upstream_up", {**side, "target": "triton"}, _linear(0, steps, 1))
    for name, _rule, _m in cases:
        g.add("fleetwatch_upstream_model_ready", {**side, "target": "triton", "model": name},
              _linear(0, steps, 0))
    g.add("fleetwatch_upstream_model_ready", {**side, "target": "triton", "model": "ready-one"},
          _linear(0, steps, 1))
    for minute in sorted({m + d for _, _, m in cases for d in (-1, 1)}):
        exp = [_expected(rule, {**side, "target": "triton", "model": name}, 0)
               for name, rule, m in cases if m <= minute]
        g.expect(minute, al.MODEL_NOT_READY, exp)
    groups.append(g)

    # queue wait, KV cache (owners joined), GPU memory
    entry = registry.entries[0] if registry.entries else None
    model = _concrete(entry.name) if entry else "model-a"
    g = _Group("Queue wait, KV cache and GPU memory: above the threshold for its for: "
               "fires (owners joined from modelserver_model_info), below does not")
    qw, kv, gpu = p.queue_wait, p.kv_cache, p.gpu_memory
    mins = max(int(_seconds(x.for_) // 60) for x in (qw, kv, gpu))
    steps = mins + 10
    for version, wait in (("slow", qw.seconds * 1.5), ("fast", qw.seconds / 2)):
        mk = {"model": model, "model_version": version, "backend": _BACKEND}
        for inst in ("sidecar-a:9810", "sidecar-b:9810"):  # two replicas: summed
            g.add("modelserver_queue_duration_seconds_count", {**mk, "instance": inst},
                  _linear(120, steps))
            g.add("modelserver_queue_duration_seconds_sum", {**mk, "instance": inst},
                  _linear(120 * wait, steps))
        _info(g, model, version, registry.lookup(model, version), steps)
    for version, usage in (("full", kv.usage_ratio + (1 - kv.usage_ratio) / 2),
                           ("roomy", kv.usage_ratio / 2)):
        mk = {"model": model, "model_version": version, "backend": "vllm"}
        g.add("modelserver_kv_cache_usage_ratio", {**mk, "instance": "sidecar-a:9810"},
              _linear(0, steps, usage))
        g.add("modelserver_kv_cache_usage_ratio", {**mk, "instance": "sidecar-b:9810"},
              _linear(0, steps, usage / 2))
    for uuid, ratio in (("GPU-full", gpu.usage_ratio + (1 - gpu.usage_ratio) / 2),
                        ("GPU-roomy", gpu.usage_ratio / 2)):
        lab = {"gpu_uuid": uuid, "backend": "dcgm", "instance": "sidecar-a:9810"}
        g.add("modelserver_gpu_memory_total_bytes", lab, _linear(0, steps, 2**34))
        g.add("modelserver_gpu_memory_used_bytes", lab, _linear(0, steps, ratio * 2**34))
    qmins, kmins, gmins = (int(_seconds(x.for_) // 60) for x in (qw, kv, gpu))
    # the 5-minute rate needs 1 step before the condition holds
    g.expect(qmins, al.QUEUE_WAIT_HIGH, [])
    g.expect(qmins + 2, al.QUEUE_WAIT_HIGH, [_expected(
        rules.find(al.QUEUE_WAIT_HIGH),
        {"model": model, "model_version": "slow", "backend": _BACKEND,
         **_owner_sample(registry.lookup(model, "slow"), p.team)}, qw.seconds * 1.5)])
    g.expect(kmins - 1, al.KV_CACHE_FULL, [])
    kv_model = {"model": model, "model_version": "full", "backend": "vllm"}
    g.expect(kmins + 1, al.KV_CACHE_FULL, [_expected(
        rules.find(al.KV_CACHE_FULL), {**kv_model, "team": p.team},
        kv.usage_ratio + (1 - kv.usage_ratio) / 2)])
    g.expect(gmins - 1, al.GPU_MEMORY_LOW, [])
    g.expect(gmins + 1, al.GPU_MEMORY_LOW, [_expected(
        rules.find(al.GPU_MEMORY_LOW), {"gpu_uuid": "GPU-full", "backend": "dcgm"},
        gpu.usage_ratio + (1 - gpu.usage_ratio) / 2)])
    groups.append(g)
    return groups


def _name_match(entry: ModelEntry, name: str) -> bool:
    return fnmatch.fnmatchcase(name, entry.name)


# -- recording rules ------------------------------------------------------------------------
def _recording_group(slos: SLOFile) -> _Group:
    g = _Group("Recording rules: names, labels and values (summed over two replicas)")
    steps = 10
    mk = {"model": "model-a", "model_version": "1", "backend": "vllm"}
    reps = ("sidecar-a:9810", "sidecar-b:9810")
    for inst in reps:  # per replica: 7.5 ok/s and 2.5 errors/s → 15 and 5 in total
        g.add("modelserver_requests_total", {**mk, "outcome": "success", "instance": inst},
              _linear(450, steps))
        g.add("modelserver_requests_total", {**mk, "outcome": "error", "instance": inst},
              _linear(150, steps))
        h = "modelserver_request_duration_seconds"
        g.add(f"{h}_count", {**mk, "instance": inst}, _linear(240, steps))
        g.add(f"{h}_sum", {**mk, "instance": inst}, _linear(120, steps))
        for le, per in (("0.25", 0), ("0.75", 240), ("+Inf", 240)):
            g.add(f"{h}_bucket", {**mk, "le": le, "instance": inst}, _linear(per, steps))
        g.add("modelserver_tokens_total", {**mk, "token_type": "output", "instance": inst},
              _linear(3000, steps))
        g.add("modelserver_prefix_cache_queries_total", {**mk, "instance": inst},
              _linear(600, steps))
        g.add("modelserver_prefix_cache_hits_total", {**mk, "instance": inst},
              _linear(150, steps))
        g.add("modelserver_requests_active", {**mk, "state": "running", "instance": inst},
              _linear(0, steps, 3))
        g.add("modelserver_kv_cache_usage_ratio", {**mk, "instance": inst},
              _linear(0, steps, 0.25 if inst.startswith("sidecar-a") else 0.5))
        g.add("fleetwatch_slo_concurrency", {**mk, "instance": inst}, _linear(0, steps, 1.5))
        g.add("fleetwatch_autoscaling_signal_ratio", {**mk, "instance": inst},
              _linear(0, steps, 0.75))
    g.add("modelserver_gpu_memory_used_bytes", {"gpu_uuid": "GPU-1", "backend": "dcgm"},
          _linear(0, steps, 2**33))
    g.add("modelserver_gpu_memory_total_bytes", {"gpu_uuid": "GPU-1", "backend": "dcgm"},
          _linear(0, steps, 2**34))

    def expect(name: str, labels: dict[str, str], value: float, match: str = "") -> None:
        # round(1000 × …): promtool compares floats exactly, Prometheus' rate() is not exact
        g.exprs.append({"expr": f"round(1000 * {name}{match})", "eval_time": f"{steps}m",
                        "exp_samples": [{"labels": _selector("", labels),
                                         "value": round(1000 * value)}]})

    h = "modelserver_request_duration_seconds"
    expect(rec.REQUESTS_RATE, {**mk, "outcome": "success"}, 15, '{outcome="success"}')
    expect(rec.REQUESTS_RATE, {**mk, "outcome": "error"}, 5, '{outcome="error"}')
    expect(rec.ERROR_RATIO, mk, 0.25)
    expect(rec.latency(h, "mean"), mk, 0.5)
    expect(rec.latency(h, "p50"), mk, 0.5)
    expect(rec.TOKENS_RATE, {**mk, "token_type": "output"}, 100)
    expect(rec.PREFIX_CACHE_HIT_RATIO, mk, 0.25)
    expect(rec.REQUESTS_ACTIVE, {**mk, "state": "running"}, 6)
    expect(rec.KV_CACHE_USAGE, mk, 0.5)
    expect(rec.GPU_MEMORY_USAGE, {"gpu_uuid": "GPU-1", "backend": "dcgm"}, 0.5)
    expect(rec.SLO_CONCURRENCY, mk, 3)
    expect(rec.AUTOSCALING_SIGNAL, mk, 1.5)

    # burn rates and budget: 2 % bad in band "1" (rounded to 1/1000 by the expression)
    slo = slos.slos[0]
    base = {"slo": slo.name, **mk}
    for band, bad in (("1", 2000), ("all", 2000)):  # 2 % bad
        g.add(_EVENTS, {**base, "band": band}, _linear(_EVENTS_PER_STEP, steps))
        g.add(_GOOD, {**base, "band": band}, _linear(_EVENTS_PER_STEP - bad, steps))
    burn = Decimal("0.02") / error_budget(slo.objective)

    def close_to(expr: str, labels: dict[str, str], value: Decimal) -> None:
        # to 1/1000: absolutely, or relatively for values too large for that (a budget of
        # 1e-13 burns at 2e11, where doubles have no thousandths)
        if abs(value) < 10**9:
            check, expected = f"round(1000 * {expr})", round(1000 * value)
        else:
            check, expected = f"round(1000 * {expr} / {num(value)})", 1000
        g.exprs.append({"expr": check, "eval_time": f"{steps}m",
                        "exp_samples": [{"labels": _selector("", labels),
                                         "value": int(expected)}]})

    # a range needs two samples: windows under two steps (a 1500ms period) are not checked
    for w in (w for w in rec.burn_windows(slos) if w >= 2 * STEP):
        for band in ("1", "all"):
            close_to(f"{rec.burn_rate(w)}{{slo={string(slo.name)}, band={string(band)}}}",
                     {**base, "band": band}, burn)
    if slo.period_seconds >= 2 * STEP:
        close_to(f"{rec.ERROR_BUDGET_REMAINING}{{slo={string(slo.name)}}}", base, 1 - burn)
    return g


# -- the file -------------------------------------------------------------------------------
def behaviour_tests(registry: Registry, slos: SLOFile, cfg: AlertingConfig,
                    rule_files: list[str], groups: list[al.RuleGroup]) -> dict[str, Any]:
    """The ``promtool test rules`` document for ``groups`` (generated from the same
    specs); ``rule_files`` are paths relative to the test file."""
    rules = _Rules(groups)
    tests: list[_Group] = [_recording_group(slos)]
    for i, slo in enumerate(slos.slos):
        ctx = _slo_context(slos, slo, registry, rules, cfg)
        tests += _slo_threshold_groups(ctx, first=i == 0)
        mw = _slo_multiwindow_group(ctx)
        if mw is not None:
            tests.append(mw)
    tests.append(_no_data_group(slos, registry, rules, cfg))
    tests.append(_misconfigured_group(slos, registry, rules, cfg))
    tests += _platform_groups(registry, rules, cfg)
    return {"rule_files": list(rule_files), "evaluation_interval": f"{STEP // 60}m",
            "tests": [t.to_dict() for t in tests]}


def render_behaviour_tests(doc: dict[str, Any], sources: list[str]) -> str:
    return header("fleetwatch rules --tests", sources) + dump(doc)

