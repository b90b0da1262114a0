"""Shared machinery of the behaviour tests (``promtool test rules``): input series, test
groups, expected alerts rendered from the rules' own templates, and the record of what a
generated test document does not cover.

Every alert family (:mod:`fleetwatch.alerts.families`) writes its scenarios with these
pieces; :mod:`fleetwatch.alerts.behaviour` assembles the document. Times are minutes of
:data:`STEP` (60 s) input and evaluation interval; values are exact decimal text
(:func:`~fleetwatch.alerts.numbers.num`), since promtool compares floats exactly.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.alerts.gotemplate import render_template
from fleetwatch.alerts.numbers import num
from fleetwatch.alerts.rules import AlertRule, RuleGroup
from fleetwatch.labels.registry import ModelEntry, Registry
from fleetwatch.promql import selector
from fleetwatch.slo.durations import parse_duration
from fleetwatch.slo.spec import SLOFile

STEP = 60  # seconds: input interval and evaluation interval
EVENTS = "fleetwatch_slo_events_total"
GOOD = "fleetwatch_slo_good_events_total"
#: The backend label of the scenarios' models.
BACKEND = "triton"
#: The sidecar the platform scenarios' series come from.
SIDECAR_INSTANCE = "sidecar-a:9810"

#: An expected alert of ``alert_rule_test``: ``{"exp_labels": …, "exp_annotations": …}``.
Alert = dict[str, Any]


class BehaviourTestError(ValueError):
    """The specs do not allow an unambiguous behaviour test (message says why)."""


def linear(rate_per_step: float, steps: int, start: float = 0) -> str:
    """promtool series notation ``start+rate x steps`` (exact decimals)."""
    return f"{num(start)}+{num(rate_per_step)}x{steps}"


def piecewise(rates: list[tuple[int, int]]) -> str:
    """A counter from 0 whose increase per step is ``rate`` for ``steps`` steps, for each
    ``(rate, steps)`` in turn."""
    parts: list[str] = []
    value, first = 0, True
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


def counter_at(rates: list[tuple[int, int]], step: int) -> int:
    """The value at ``step`` of the :func:`piecewise` counter of ``rates``."""
    value, t = 0, 0
    for rate, steps in rates:
        take = max(0, min(steps, step - t))
        value += rate * take
        t += steps
    return value


def minutes(duration: str | None) -> int:
    """Whole minutes of a Prometheus duration (``None`` is 0). Raises ``ValueError`` on
    an invalid duration."""
    return int(parse_duration(duration or "0s") // 60)


@dataclass
class TestGroup:
    """One ``tests:`` entry of the document: input series, expected alerts by
    ``(minute, alertname)`` and ``promql_expr_test`` entries."""

    __test__ = False  # not a pytest class

    name: str
    series: list[dict[str, str]] = field(default_factory=list)
    alerts: dict[tuple[int, str], list[Alert]] = field(default_factory=dict)
    exprs: list[dict[str, Any]] = field(default_factory=list)

    def add(self, name: str, labels: dict[str, str], values: str) -> None:
        """An input series ``name{labels}`` with promtool ``values`` notation."""
        self.series.append({"series": selector(name, labels), "values": values})

    def expect(self, minute: int, alertname: str, alerts: list[Alert]) -> None:
        """At ``minute``, ``alertname`` fires exactly ``alerts`` (none: it must not fire)."""
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


class RuleIndex:
    """Generated alert rules, looked up by name and static labels."""

    def __init__(self, groups: list[RuleGroup]) -> None:
        self.rules = [r for g in groups for r in g.rules if isinstance(r, AlertRule)]

    def find(self, alert: str, **static: str) -> AlertRule:
        """The one ``alert`` rule whose labels render to ``static``. Raises
        :class:`BehaviourTestError` when there is none or more than one."""
        hits = [r for r in self.rules if r.alert == alert
                and all(render_template(dict(r.labels).get(k, ""), {}, 0.0) == v
                        for k, v in static.items())]
        if len(hits) != 1:
            raise BehaviourTestError(f"expected one {alert} rule with {static}, got {len(hits)}")
        return hits[0]


def expected(rule: AlertRule, sample: dict[str, str], value: float) -> Alert:
    """The alert promtool should see: sample labels overridden by the rule's labels, and
    the annotations rendered with the sample's labels (as Prometheus does)."""
    labels = {**sample, **{k: render_template(v, sample, value) for k, v in rule.labels}}
    labels = {k: v for k, v in labels.items() if v != ""}
    return {"exp_labels": labels,
            "exp_annotations": {k: render_template(v, sample, value)
                                for k, v in rule.annotations}}


def concrete(glob: str, default: str = "model-a") -> str:
    """A model name matching ``glob`` (``*`` → ``x``, ``?`` → ``x``, a class → one of its
    members), or ``default`` when ``glob`` matches no name (an empty range: ``[z-a]``)."""
    out: list[str] = []
    i, n = 0, len(glob)
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


def name_match(entry: ModelEntry, name: str) -> bool:
    """Whether the registry entry's name glob matches the model name ``name``."""
    return fnmatch.fnmatchcase(name, entry.name)


def info_series(g: TestGroup, model: str, version: str, entry: ModelEntry | None,
                steps: int) -> None:
    """The sidecar's ``modelserver_model_info`` of a registered model (none without
    ``entry``)."""
    if entry is None:
        return
    g.add("modelserver_model_info",
          {"model": model, "model_version": version, "backend": BACKEND, "runtime": "python",
           "team": entry.team, "owner": entry.owner, "oncall": entry.oncall,
           "latency_tier": entry.latency_tier}, linear(0, steps, 1))


def owner_sample(entry: ModelEntry | None, platform_team: str) -> dict[str, str]:
    """The owner labels the join gives a model: the entry's, else the platform team."""
    if entry is None:
        return {"team": platform_team}
    return {"team": entry.team, "owner": entry.owner, "oncall": entry.oncall}


@dataclass
class Suite:
    """What every family's scenarios read: the specs, the generated rules, and
    :attr:`not_covered`, where a family notes each case it generates no test for (with
    the reason) instead of dropping it silently."""

    registry: Registry
    slos: SLOFile
    cfg: AlertingConfig
    rules: RuleIndex
    not_covered: list[str] = field(default_factory=list)

    def skip(self, what: str, why: str) -> None:
        """Record that ``what`` is not tested, because ``why``."""
        self.not_covered.append(f"{what}: {why}")

    @property
    def sidecar(self) -> dict[str, str]:
        """``job`` and ``instance`` labels of the sidecar the platform series come from."""
        return {"job": self.cfg.platform.sidecar_job, "instance": SIDECAR_INSTANCE}
