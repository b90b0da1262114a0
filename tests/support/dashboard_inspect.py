"""Read generated dashboard JSON back: panels (rows and collapsed rows included), their
queries, the template variables they use, and queries with variables substituted — what the
structural and end-to-end tests check, and what a reviewer may want to list."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from fleetwatch.dashboards.panels import CONDITIONAL

#: Grafana's built-in variables (never defined in ``templating``).
BUILTIN_VARIABLES = frozenset({
    "__interval", "__interval_ms", "__rate_interval", "__range", "__range_s", "__range_ms",
    "__dashboard", "__from", "__to", "__all", "__name", "__org", "__user", "timeFilter",
})
_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")


@dataclass(frozen=True)
class PanelRef:
    """One panel with where it sits: its row title ("" before any row)."""

    panel: dict
    row: str

    @property
    def title(self) -> str:
        return str(self.panel.get("title", ""))

    @property
    def conditional(self) -> str | None:
        """The reason in the description's ``Conditional:`` line, or None."""
        for line in str(self.panel.get("description") or "").splitlines():
            if line.startswith(CONDITIONAL):
                return line[len(CONDITIONAL):].strip()
        return None


def iter_panels(dashboard: Mapping) -> Iterator[PanelRef]:
    """Every panel in layout order, rows included, descending into collapsed rows."""
    row = ""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            row = panel.get("title", "")
            yield PanelRef(panel, row)
            for child in panel.get("panels", []):
                yield PanelRef(child, row)
        else:
            yield PanelRef(panel, row)


def query_panels(dashboard: Mapping) -> Iterator[PanelRef]:
    """Panels that query the data source (not rows, not text)."""
    for ref in iter_panels(dashboard):
        if ref.panel.get("type") not in ("row", "text"):
            yield ref


def variables_in(text: str) -> set[str]:
    """Names of the variables ``$x``, ``${x}``, ``${x:fmt}``, ``[[x]]`` used in ``text``."""
    return {next(g for g in m.groups() if g) for m in _VAR.finditer(text)}


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """``expr`` with every variable replaced by ``values[name]`` (KeyError if missing)."""
    def repl(m: re.Match) -> str:
        return values[next(g for g in m.groups() if g)]
    return _VAR.sub(repl, expr)


def strings(obj: object) -> Iterator[str]:
    """Every string anywhere inside a JSON value."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)
