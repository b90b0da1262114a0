"""fleetwatch's house style on top of grafanalib (as grafanalib's ``weave.py`` on ``core.py``):
every panel has a unit and a description, queries go to the ``$datasource`` variable, and a
:class:`Grid` places panels in rows of 24 columns.

A panel whose data exists only on some fleets (GPUs, TensorRT-LLM, Triton's response cache)
says so in its description with a line starting ``Conditional:`` — the end-to-end test reads
that line to know which panels may be empty on a CPU-only machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import attr
from grafanalib import core as g

#: Every panel and query reads the data source chosen in the ``datasource`` variable.
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
CONDITIONAL = "Conditional:"

# Grafana units
SECONDS = "s"
RATIO = "percentunit"
BYTES = "bytes"
REQ_PER_S = "reqps"
TOKENS_PER_S = "suffix: tokens/s"
REQUESTS = "suffix: requests"
REPLICAS = "suffix: replicas"
WATTS = "watt"
JOULES = "joule"
CELSIUS = "celsius"
BURN = "suffix:×"
PER_S = "suffix: /s"
NONE = "none"

GREEN, ORANGE, RED, GREY, PURPLE, BLUE = "green", "orange", "red", "text", "purple", "blue"
YELLOW = "yellow"


@dataclass(frozen=True)
class Q:
    """One query: PromQL, its legend, and whether it is instant (tables, stats)."""

    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False


def _targets(queries: Sequence[Q]) -> list[g.Target]:
    return [g.Target(expr=q.expr, legendFormat=q.legend, refId=chr(ord("A") + i),
                     instant=q.instant, format="table" if q.table else "time_series",
                     datasource=DATASOURCE, intervalFactor=1)
            for i, q in enumerate(queries)]


def _describe(description: str, conditional: str | None) -> str:
    if conditional:
        return f"{description}\n\n{CONDITIONAL} {conditional}"
    return description


def steps(*pairs: tuple[str, float | None]) -> list[dict[str, Any]]:
    """Threshold steps: ``steps((GREEN, None), (RED, 1))``."""
    return [{"color": c, "value": v} for c, v in pairs]


def value_map(mapping: dict[int, tuple[str, str]]) -> list[dict[str, Any]]:
    """Value → (text, color) mappings (Grafana 8+ format)."""
    return [{"type": "value", "options": {
        str(k): {"text": text, "color": color, "index": i}
        for i, (k, (text, color)) in enumerate(sorted(mapping.items()))}}]


#: SLO state as one number per model (highest priority wins across replicas); see
#: :func:`fleetwatch.dashboards.common.slo_state_code`.
STATE_CODES = {0: ("no data", GREY), 1: ("ok", GREEN), 2: ("overload", ORANGE),
               3: ("misconfigured", PURPLE), 4: ("interference", BLUE),
               5: ("gpu_degraded", YELLOW), 6: ("regression", RED)}


def timeseries(title: str, description: str, queries: Sequence[Q], unit: str, *,
               stack: bool = False, thresholds: list[dict[str, Any]] | None = None,
               min_: int | None = None, max_: int | None = None,
               conditional: str | None = None, legend_calcs: Sequence[str] = ("lastNotNull",
                                                                              "max")
               ) -> g.TimeSeries:
    """A time-series panel of ``queries`` in ``unit`` (stacked, with threshold lines,
    axis bounds, shown only under ``conditional``, legend calculations as given).

    Many parameters: grafanalib's panel options that the dashboards set, keyword-only
    with defaults; a panel names the few it changes."""
    return g.TimeSeries(
        title=title, description=_describe(description, conditional),
        dataSource=DATASOURCE, targets=_targets(queries), unit=unit, maxDataPoints=None,
        stacking={"mode": "normal", "group": "A"} if stack else {},
        fillOpacity=20 if stack else 0,
        thresholds=thresholds or steps((GREEN, None)),
        thresholdsStyleMode="line" if thresholds else "off",
        valueMin=min_, valueMax=max_, legendDisplayMode="table", legendPlacement="bottom",
        legendCalcs=list(legend_calcs), tooltipMode="multi", tooltipSort="desc",
        spanNulls=True,
    )


def stat(title: str, description: str, queries: Sequence[Q], unit: str, *,
         thresholds: list[dict[str, Any]] | None = None,
         mappings: list[dict[str, Any]] | None = None,
         conditional: str | None = None, decimals: int | None = None) -> g.Stat:
    return g.Stat(
        title=title, description=_describe(description, conditional), dataSource=DATASOURCE,
        targets=_targets(queries), format=unit, reduceCalc="lastNotNull", graphMode="area",
        maxDataPoints=None,
        colorMode="value", thresholds=thresholds or steps((BLUE, None)),
        mappings=mappings or [], decimals=decimals, noValue="no data",
    )


def table(title: str, description: str, queries: Sequence[Q], *,
          transformations: list[dict[str, Any]], overrides: list[dict[str, Any]], unit: str = NONE,
          conditional: str | None = None) -> g.Table:
    return g.Table(
        title=title, description=_describe(description, conditional), dataSource=DATASOURCE,
        targets=_targets(queries), transformations=transformations, overrides=overrides,
        unit=unit, filterable=True, thresholds=steps((GREY, None)), maxDataPoints=None,
    )


def state_timeline(title: str, description: str, queries: Sequence[Q], *,
                   mappings: list[dict[str, Any]], conditional: str | None = None) -> StateTimeline:
    return StateTimeline(
        title=title, description=_describe(description, conditional), dataSource=DATASOURCE,
        targets=_targets(queries), mappings=mappings, unit=NONE, maxDataPoints=None,
        thresholds=steps((GREY, None)),
    )


def bargauge(title: str, description: str, queries: Sequence[Q], unit: str, *,
             thresholds: list[dict[str, Any]], min_: float = 0, conditional: str | None = None
             ) -> BarGauge:
    return BarGauge(
        title=title, description=_describe(description, conditional), dataSource=DATASOURCE,
        targets=_targets(queries), unit=unit, thresholds=thresholds, min=min_,
        maxDataPoints=None,
    )


def text(title: str, content: str, description: str) -> g.Text:
    return g.Text(title=title, description=description, content=content,
                  mode=g.TEXT_MODE_MARKDOWN)


def override(field: str, **props: object) -> dict[str, Any]:
    """A field override by exact display name: ``override("Value #B", unit="reqps")``."""
    return {"matcher": {"id": "byName", "options": field},
            "properties": [{"id": k.replace("_", "."), "value": v}
                           for k, v in sorted(props.items())]}


# -- panels grafanalib 0.7.1 renders in a pre-Grafana-8 shape -----------------------------------


@attr.s
class StateTimeline(g.StateTimeline):
    """grafanalib's state timeline plus a unit and thresholds (Grafana 8+ fieldConfig)."""

    unit: str = attr.ib(default=NONE)

    def to_json_data(self) -> dict[str, Any]:
        data: dict[str, Any] = super().to_json_data()
        data["fieldConfig"]["defaults"]["unit"] = self.unit
        return data


@attr.s
class BarGauge(g.Panel):
    """A bar gauge in Grafana 8+ form (grafanalib 0.7.1 writes the Grafana 6 ``fieldOptions``)."""

    unit: str = attr.ib(default=NONE)
    min: float = attr.ib(default=0)
    max: float | None = attr.ib(default=None)

    def to_json_data(self) -> dict[str, Any]:
        data: dict[str, Any] = self.panel_json({
            "fieldConfig": {
                "defaults": {"unit": self.unit, "min": self.min, "max": self.max,
                             "color": {"mode": "thresholds"}},
                "overrides": [],
            },
            "options": {
                "displayMode": "gradient", "orientation": "horizontal",
                "showUnfilled": True, "minVizHeight": 10, "minVizWidth": 0,
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            },
            "type": g.BARGAUGE_TYPE,
        })
        return data


# -- layout ------------------------------------------------------------------------------------


class Grid:
    """Places panels left to right in rows of 24 columns, wrapping; ``row()`` starts a
    Grafana row (collapsed rows hold their panels, as Grafana expects)."""

    WIDTH = 24

    def __init__(self) -> None:
        self._top: list[g.Panel] = []
        self._row: g.RowPanel | None = None
        self._row_panels: list[g.Panel] = []
        self._y = 0
        self._x = 0
        self._line_h = 0

    def _newline(self) -> None:
        self._y += self._line_h
        self._x = 0
        self._line_h = 0

    def _close_row(self) -> None:
        if self._row is not None and self._row.collapsed:
            self._top.append(attr.evolve(self._row, panels=self._row_panels))
            # a collapsed row takes one grid line; its panels keep their expanded positions
            self._y, self._x, self._line_h = self._row.gridPos.y + 1, 0, 0
        self._row, self._row_panels = None, []

    def row(self, title: str, *, collapsed: bool = False, description: str = "") -> None:
        self._close_row()
        self._newline()
        row = g.RowPanel(title=title, collapsed=collapsed, description=description or None,
                         gridPos=g.GridPos(h=1, w=self.WIDTH, x=0, y=self._y))
        self._y += 1
        self._row = row
        if not collapsed:
            self._top.append(row)

    def add(self, panel: g.Panel, w: int, h: int = 8) -> None:
        if not 1 <= w <= self.WIDTH:
            raise ValueError(f"panel width {w} outside 1..{self.WIDTH}")
        if self._x + w > self.WIDTH:
            self._newline()
        panel = attr.evolve(panel, gridPos=g.GridPos(h=h, w=w, x=self._x, y=self._y))
        self._x += w
        self._line_h = max(self._line_h, h)
        if self._row is not None and self._row.collapsed:
            self._row_panels.append(panel)
        else:
            self._top.append(panel)

    def panels(self) -> list[g.Panel]:
        self._close_row()
        return list(self._top)
