"""The one PromQL text builder of fleetwatch: the rules generator (:mod:`fleetwatch.alerts`)
and the dashboards (:mod:`fleetwatch.dashboards`) both build their queries with it.

Pure functions from strings to strings, no fleetwatch imports (a leaf of the import graph).
Values are always escaped (:func:`string`), never pasted into a query; label lists keep the
order they are given. Submodules: :mod:`fleetwatch.promql.glob` (model-name globs as RE2
regexes) and :mod:`fleetwatch.promql.names` (metric names a query selects).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from textwrap import indent

__all__ = [
    "NEVER",
    "agg",
    "alternation",
    "block",
    "by",
    "by_clause",
    "mean_of",
    "rate",
    "ratio_of_rates",
    "regex_escape",
    "sel",
    "selector",
    "string",
]

_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_RE_SPECIAL = set(".^$*+?()[]{}|\\")

#: A character class that matches nothing (an empty ``fnmatch`` range such as ``[z-a]``).
NEVER = "[^\\x00-\\x{10FFFF}]"


def string(text: str) -> str:
    """A PromQL double-quoted string literal of ``text`` (Go escapes: a raw newline would end
    the literal — ``unterminated quoted string`` — and other control characters are
    written as ``\\xHH``, so the rule file stays printable)."""
    out = []
    for c in text:
        esc = _STRING_ESCAPES.get(c)
        if esc is None and (ord(c) < 0x20 or ord(c) == 0x7F):
            esc = f"\\x{ord(c):02x}"
        out.append(c if esc is None else esc)
    return '"' + "".join(out) + '"'


def regex_escape(text: str) -> str:
    """Escape RE2 metacharacters (``+Inf`` → ``\\+Inf``, ``0.5`` → ``0\\.5``)."""
    return "".join("\\" + c if c in _RE_SPECIAL else c for c in text)


def alternation(regexes: Iterable[str]) -> str:
    """``a|b|c`` of distinct regexes, in order of first appearance."""
    return "|".join(dict.fromkeys(regexes))


def block(expr: str, prefix: str = "  ") -> str:
    """Indent every line of ``expr`` by ``prefix``."""
    return indent(expr, prefix)


def selector(metric: str, labels: Mapping[str, str]) -> str:
    """``metric{a="x", b="y"}``: equality matchers in the order given (``metric{}`` with
    none: promtool's ``input_series`` need the braces)."""
    inner = ", ".join(f"{k}={string(v)}" for k, v in labels.items())
    return f"{metric}{{{inner}}}"


def sel(metric: str, eq: Mapping[str, str] | None = None,
        re_: Mapping[str, str] | None = None, ne: Mapping[str, str] | None = None) -> str:
    """``metric{a="x", b=~"y", c!="z"}``: equality, regex and inequality matchers, sorted by
    label name; ``metric`` alone without matchers. Every value is escaped as a string
    literal (regex values are used as given, so ``$model`` stays a Grafana variable)."""
    parts: list[tuple[str, str]] = []
    for op, given in (("=", eq), ("=~", re_), ("!=", ne)):
        for k, v in (given or {}).items():
            parts.append((k, f"{k}{op}{string(v)}"))
    if not parts:
        return metric
    return metric + "{" + ", ".join(p for _, p in sorted(parts)) + "}"


def by(labels: Iterable[str]) -> str:
    """``(a, b)``: a label list."""
    return "(" + ", ".join(labels) + ")"


def by_clause(labels: Iterable[str]) -> str:
    """``by (a, b)``."""
    return f"by {by(labels)}"


def agg(op: str, labels: Iterable[str], expr: str) -> str:
    """``op by (labels) (expr)``."""
    return f"{op} {by_clause(labels)} ({expr})"


def rate(expr: str, window: str = "5m") -> str:
    """``rate(expr[window])`` (``window`` a PromQL duration such as ``5m``)."""
    return f"rate({expr}[{window}])"


def ratio_of_rates(num: str, den: str, labels: Iterable[str], window: str = "5m",
                   sep: str = "\n/\n") -> str:
    """``sum by (labels) (rate(num[w])) / sum by (labels) (rate(den[w]))``; ``num`` and
    ``den`` are selectors, ``sep`` the division operator with its layout."""
    labels = tuple(labels)
    return f"{agg('sum', labels, rate(num, window))}{sep}{agg('sum', labels, rate(den, window))}"


def mean_of(metric: str, labels: Iterable[str], matchers: Mapping[str, str],
            window: str = "5m") -> str:
    """Mean of a histogram/summary ``metric`` over ``window``: Δ``_sum`` ÷ Δ``_count``,
    aggregated by ``labels``, on one line; ``matchers`` are regex matchers."""
    return ratio_of_rates(sel(f"{metric}_sum", re_=matchers),
                          sel(f"{metric}_count", re_=matchers), labels, window, " / ")
