"""``FleetwatchModelNotReady``: a model not ready longer than its latency tier's start-up
allowance. A model that is not ready has no metrics (hence no info series to join owners
from), so there is one rule per registry name glob, with the entry's owners and its tier's
``for:``, and one for unregistered models (default allowance, platform team); each rule
takes away (``unless``) the earlier entries that can match its names (first match wins) and
models whose engine is asleep.

Scenario: one not-ready model per registry entry and one unregistered model, each firing
after its own allowance, not before; a ready model never, nor a model whose engine is asleep
(``modelserver_engine_sleep_state{sleep_state="awake"} == 0``: vLLM sleep mode is
deliberate). An entry whose glob matches no name, or whose names an earlier entry takes,
cannot be tested and is reported.
"""

from __future__ import annotations

import fnmatch
import re

from fleetwatch.alerts.annotations import alert_annotations, label, literal
from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.family import PlatformFamily
from fleetwatch.alerts.rules import AlertRule, Labels
from fleetwatch.alerts.scenarios import (
    Suite,
    TestGroup,
    concrete,
    expected,
    linear,
    minutes,
    name_match,
)
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.promql import alternation, string
from fleetwatch.promql.glob import glob_regex

MODEL_NOT_READY = "FleetwatchModelNotReady"
#: The model name the scenario uses for an unregistered model.
UNREGISTERED = "unregistered-model-z9"
#: The model the scenario puts to sleep (never fires: asleep is not an outage).
SLEEPING = "sleeping-model-z9"
SLEEP_STATE = "modelserver_engine_sleep_state"

_GLOB_CHARS = re.compile(r"[*?\[]")


def _may_overlap(a: str, b: str) -> bool:
    """False when no model name can match both globs ``a`` and ``b`` (exact for a plain
    name; for two globs, when their literal prefixes or suffixes disagree), else True."""
    if not _GLOB_CHARS.search(a):
        return fnmatch.fnmatchcase(a, b)
    if not _GLOB_CHARS.search(b):
        return fnmatch.fnmatchcase(b, a)
    pa, pb = _GLOB_CHARS.split(a, 1)[0], _GLOB_CHARS.split(b, 1)[0]
    if not (pa.startswith(pb) or pb.startswith(pa)):
        return False
    # after the last *, ? or ], every character is literal (a later [ has no closing ])
    sa, sb = re.split(r"[*?\]]", a)[-1], re.split(r"[*?\]]", b)[-1]
    return sa.endswith(sb) or sb.endswith(sa)


def not_ready_entries(registry: Registry) -> list[tuple[ModelEntry, list[ModelEntry]]]:
    """Registry entries by distinct name glob, each with the earlier entries whose names
    take precedence over some of its names (readiness has no version, so an entry is
    identified by its name). Earlier entries that cannot match any of its names are left
    out: with every earlier entry, 1000 entries made a 10 MB rule file."""
    out: list[tuple[ModelEntry, list[ModelEntry]]] = []
    seen: list[ModelEntry] = []
    names: set[str] = set()
    for e in registry.entries:
        if e.name in names:
            continue
        out.append((e, [s for s in seen if _may_overlap(s.name, e.name)]))
        seen.append(e)
        names.add(e.name)
    return out


def model_not_ready_alerts(registry: Registry, cfg: AlertingConfig) -> tuple[AlertRule, ...]:
    """One rule per registry name (with its owners and its tier's start-up allowance) and
    one for unregistered models (the default allowance, the platform team)."""
    settings = cfg.platform.model_not_ready
    ready = "fleetwatch_upstream_model_ready"
    target_up = "and on (job, instance, target) fleetwatch_upstream_up == 1"
    # an engine in sleep mode is not ready on purpose (vLLM sleep mode), not an outage
    asleep = f"unless on (job, instance, model) {SLEEP_STATE}{{sleep_state=\"awake\"}} == 0"
    rules = []

    def rule(entry: str, match: str, earlier: list[str], tier: str, labels: Labels,
             who: str) -> AlertRule:
        expr = f"{ready}{{model=~{string(match)}}} == 0\n{target_up}\n{asleep}"
        if earlier:
            expr += (f"\nunless on (model) {ready}"
                     f"{{model=~{string(alternation(earlier))}}}")
        allowance = settings.allowance(tier)
        return AlertRule(
            MODEL_NOT_READY, expr,
            (("severity", settings.severity), *((k, literal(v)) for k, v in labels),
             ("latency_tier", literal(tier)),
             *((("registry_entry", literal(entry)),) if entry else ())),
            alert_annotations(
                cfg.urls, MODEL_NOT_READY,
                f"Model {label('model')} not ready for {allowance} on {label('target')}",
                f"Model {label('model')} has not been ready on target {label('target')} "
                f"(sidecar {label('instance')}) for {allowance}, the start-up allowance of "
                f"latency tier {literal(tier)}: it is failing to load or has become "
                f"unhealthy. {who}"),
            allowance)

    entries = not_ready_entries(registry)
    for e, earlier in entries:
        rules.append(rule(e.name, glob_regex(e.name), [glob_regex(x.name) for x in earlier],
                          e.latency_tier,
                          (("team", e.team), ("owner", e.owner), ("oncall", e.oncall)),
                          f"Owner {literal(e.owner)}, on-call {literal(e.oncall)}."))
    all_names = [glob_regex(e.name) for e, _ in entries]
    rules.append(rule("", ".+", all_names, "default", (("team", cfg.platform.team),),
                      "The model is not in the registry."))
    return tuple(rules)


def not_ready_scenarios(suite: Suite) -> list[TestGroup]:
    """One group (none when no case is testable): every testable entry and the
    unregistered model, checked a minute before and after each allowance."""
    registry, rules = suite.registry, suite.rules
    g = TestGroup("Model not ready: fires after its latency tier's start-up allowance, with "
                  "the registry entry's owners; unregistered models use the default allowance")
    cases: list[tuple[str, AlertRule, int]] = []
    for e, _earlier in not_ready_entries(registry):
        name = concrete(e.name, "")
        first = next((x for x in registry.entries if name_match(x, name)), None)
        what = f"{MODEL_NOT_READY} of registry entry {e.name!r}"
        if not name or first is None:
            suite.skip(what, "its name glob matches no model name")
            continue
        if first.name != e.name:
            suite.skip(what, f"the example name {name!r} is taken by the earlier entry "
                             f"{first.name!r}")
            continue
        rule = rules.find(MODEL_NOT_READY, registry_entry=e.name)
        cases.append((name, rule, minutes(rule.for_)))
    taken = next((x for x in registry.entries if name_match(x, UNREGISTERED)), None)
    if taken is None:
        rule = next(r for r in rules.rules if r.alert == MODEL_NOT_READY
                    and "registry_entry" not in dict(r.labels))
        cases.append((UNREGISTERED, rule, minutes(rule.for_)))
    else:
        suite.skip(f"{MODEL_NOT_READY} of unregistered models",
                   f"the example name {UNREGISTERED!r} is registered (entry {taken.name!r})")
    if not cases:
        return []
    side = suite.sidecar
    steps = max(m for _, _, m in cases) + 3
    g.add("fleetwatch_upstream_up", {**side, "target": "triton"}, linear(0, steps, 1))
    for name, _rule, _m in cases:
        g.add("fleetwatch_upstream_model_ready", {**side, "target": "triton", "model": name},
              linear(0, steps, 0))
    g.add("fleetwatch_upstream_model_ready", {**side, "target": "triton", "model": "ready-one"},
          linear(0, steps, 1))
    g.add("fleetwatch_upstream_model_ready", {**side, "target": "triton", "model": SLEEPING},
          linear(0, steps, 0))
    g.add(SLEEP_STATE, {**side, "model": SLEEPING, "backend": "vllm", "sleep_state": "awake"},
          linear(0, steps, 0))
    for minute in sorted({m + d for _, _, m in cases for d in (-1, 1)}):
        exp = [expected(rule, {**side, "target": "triton", "model": name}, 0)
               for name, rule, m in cases if m <= minute]
        g.expect(minute, MODEL_NOT_READY, exp)
    return [g]


FAMILY = PlatformFamily("not_ready", (MODEL_NOT_READY,), model_not_ready_alerts,
                        not_ready_scenarios)
