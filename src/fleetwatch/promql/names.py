"""The metric names a PromQL expression selects (a lexical scan, not a parser): what the
dashboard tests use to check that every queried metric is in the schema or recorded."""

from __future__ import annotations

import re

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
