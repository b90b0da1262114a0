"""Tiny PromQL builders (matchers sorted and escaped, never string surgery on queries) and a
metric-name extractor used to check that every queried metric exists."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from fleetwatch.alerts.promql import string

#: Matchers of the model-detail variables: the selected model, version and backend.
MODEL_VARS = {"model": "$model", "model_version": "$version", "backend": "$backend"}
#: Labels of a model's identity (what recording rules keep).
MODEL_KEY = ("model", "model_version", "backend")


def _escape(value: str) -> str:
    """The inside of a PromQL string literal (newlines and control characters escaped)."""
    return string(value)[1:-1]


def sel(metric: str, eq: Mapping[str, str] | None = None,
        re_: Mapping[str, str] | None = None, ne: Mapping[str, str] | None = None) -> str:
    """``metric{a="x", b=~"y", c!="z"}``: equality, regex and inequality matchers, sorted by
    label name (regex values are used as given, so ``$model`` stays a Grafana variable)."""
    parts: list[tuple[str, str]] = []
    for op, given in (("=", eq), ("=~", re_), ("!=", ne)):
        for k, v in (given or {}).items():
            parts.append((k, f'{k}{op}"{_escape(v)}"'))
    if not parts:
        return metric
    return metric + "{" + ", ".join(p for _, p in sorted(parts)) + "}"


def by(labels: Iterable[str]) -> str:
    return "(" + ", ".join(labels) + ")"


def agg(op: str, labels: Iterable[str], expr: str) -> str:
    """``op by (labels) (expr)``."""
    return f"{op} by {by(labels)} ({expr})"


def rate(expr: str, window: str = "5m") -> str:
    return f"rate({expr}[{window}])"


def mean_of(metric: str, labels: Iterable[str], matchers: Mapping[str, str],
            window: str = "5m") -> str:
    """Mean of a histogram/summary over ``window``: Δsum / Δcount, aggregated by ``labels``."""
    labels = tuple(labels)
    num = agg("sum", labels, rate(sel(f"{metric}_sum", re_=matchers), window))
    den = agg("sum", labels, rate(sel(f"{metric}_count", re_=matchers), window))
    return f"{num} / {den}"


# -- metric names in a query ------------------------------------------------------------------

_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset", "inf", "nan", "atan2",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(\s*\()?")
_VARIABLE = re.compile(r"\$\{?\w+\}?")


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (functions, keywords, label names, strings
    and durations excluded). Grafana variables are dropped first."""
    text = _STRING.sub('""', expr)
    text = _VARIABLE.sub("1", text)
    text = _BRACES.sub("{}", text)
    text = _RANGE.sub("[]", text)
    text = _LABEL_LIST.sub(" ", text)
    names = set()
    for m in _IDENT.finditer(text):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in _KEYWORDS:
            continue
        names.add(name)
    return names
