"""Dashboard 5 — Rollouts: per model, each candidate version's verdict against its
baseline version (compared concurrency band by band by the sidecars,
:mod:`fleetwatch.rollout`), and per SLO a bands × versions heat map of the good ratio —
the like-with-like view of "check the metrics" during a rollout.

The heat map is a table with one row per (model, version) and one column per band, each
cell the good ratio (good ÷ all SLI events, summed over replicas) over the last hour,
coloured against the SLO's objective. The two-version memory plan (will the candidate
fit beside the baseline on the GPU) is a panel of the GPUs and capacity dashboard; this
dashboard's verdict row links to it.
"""

from __future__ import annotations

from decimal import Decimal

import attr
from grafanalib import core as g

from fleetwatch.alerts.numbers import percent
from fleetwatch.dashboards import names as n
from fleetwatch.dashboards import panels as p
from fleetwatch.dashboards.common import (
    MODEL_KEY,
    UIDS,
    dashboard,
    datasource_variable,
    model_variable,
    team_variable,
)
from fleetwatch.dashboards.panels import Q
from fleetwatch.dashboards.slos import md, sli_text
from fleetwatch.promql import agg, sel
from fleetwatch.slo.spec import SLOFile, SLOSpec

MODEL = {"model": "$model"}
#: Verdict → (text, colour) of the verdict table, in the order of the time line's codes.
VERDICTS = {"not_enough_data": ("not enough data", p.GREY), "better": ("better", p.BLUE),
            "same": ("same", p.GREEN), "worse": ("worse", p.RED)}
#: The verdict as one number per pair (the highest wins across replicas: worse).
VERDICT_CODES = {i: v for i, v in enumerate(VERDICTS.values())}
#: The heat map's range: the last hour of a rollout step.
RANGE = "1h"
NEEDS_TWO = ("needs a model with two or more versions in a sidecar's SLO engine (a "
             "rollout in progress).")


def verdict_code() -> str:
    """The verdict per (model, baseline, candidate) as a number: 3 worse, 2 same, 1 better,
    0 not enough data (see :data:`VERDICT_CODES`)."""
    parts = [f"({sel(n.ROLLOUT_VERDICT, eq={'verdict': v}, re_=MODEL)} == 1) * {i}"
             for i, v in enumerate(VERDICTS)]
    return agg("max", ("model", "baseline", "candidate"),
               "\n  or\n  ".join(f"({x})" for x in parts))


def _verdicts(grid: p.Grid) -> None:
    grid.row("Rollout verdicts")
    grid.add(p.table(
        "Verdict", "Each candidate version against its baseline (the oldest version the "
        "sidecar's SLO engine tracks), compared band by band on every SLO: better, same, "
        "worse (any replica), not enough data. `fleetwatch compare` shows the bands "
        "driving it.",
        [Q(f"{sel(n.ROLLOUT_VERDICT, re_=MODEL)} == 1", instant=True, table=True)],
        transformations=[{"id": "organize", "options": {
            "excludeByName": {"Time": True, "Value": True, "__name__": True}}}],
        overrides=[p.override("verdict", custom_displayMode="color-text", mappings=[
            {"type": "value", "options": {k: {"text": t, "color": c, "index": i}
                                          for i, (k, (t, c)) in enumerate(VERDICTS.items())}}
        ])], conditional=NEEDS_TWO), 8, 8)
    grid.add(p.state_timeline(
        "Verdict over time", "The verdict of each candidate over time (worst over "
        "replicas).", [Q(verdict_code(), "{{model}} v{{candidate}} vs v{{baseline}}")],
        mappings=p.value_map(VERDICT_CODES), conditional=NEEDS_TWO), 10, 8)
    grid.add(p.text(
        "Two-version memory plan", "While both versions are loaded the GPU memory peaks.",
        f"The predicted peak with both versions loaded, against each GPU's memory, is on "
        f"the [GPUs and capacity](/d/{UIDS['gpus']}) dashboard (`fleetwatch rollout "
        f"plan`)."), 6, 8)


def good_ratio_by_band(s: SLOSpec) -> str:
    """Good ÷ all events of ``s`` per (model, version, backend, band) over :data:`RANGE`,
    summed over replicas (band ``all`` left out: it is the naive comparison), with a
    ``version`` label ``<model> v<version>`` (the heat map's rows)."""
    def total(family: str) -> str:
        return agg("sum", (*MODEL_KEY, "band"),
                   f"increase({sel(family, eq={'slo': s.name}, re_=MODEL, ne={'band': 'all'})}"
                   f"[{RANGE}])")
    ratio = f"{total('fleetwatch_slo_good_events_total')}\n/\n" \
            f"{total('fleetwatch_slo_events_total')}"
    return f'label_join(\n{ratio},\n"version", " v", "model", "model_version")'


def _heat_map(grid: p.Grid, s: SLOSpec) -> None:
    grid.row(f"{s.name}: {sli_text(s)} — {percent(s.objective)}", description=md(s.description))
    # twice the error rate the objective allows, in decimal (no 0.99998000000000001)
    low = float(2 * Decimal(repr(s.objective)) - 1)
    heat = p.table(
        "Good ratio by band and version", "Rows: model and version; columns: concurrency "
        f"band (upper bound). Each cell: good ÷ all events of {s.name} over the last {RANGE}, "
        "summed over replicas — compare versions within a column (the same load), never "
        f"across. Green from the objective ({percent(s.objective)}), red below twice its "
        "error rate.",
        [Q(good_ratio_by_band(s), instant=True, table=True)],
        transformations=[
            {"id": "groupingToMatrix", "options": {"columnField": "band",
                                                   "rowField": "version",
                                                   "valueField": "Value"}}],
        overrides=[p.override("version", custom_displayMode="auto", unit="none")],
        unit=p.RATIO)
    grid.add(attr.evolve(heat, displayMode="color-background", thresholds=p.steps(
        (p.RED, None), (p.ORANGE, low), (p.GREEN, s.objective))), 24, 8)


def build_rollout_dashboard(slos: SLOFile) -> g.Dashboard:
    """The rollouts dashboard: verdicts, then one heat-map row per SLO."""
    grid = p.Grid()
    _verdicts(grid)
    for s in slos.slos:
        _heat_map(grid, s)
    return dashboard(
        "rollout", "Rollouts: each candidate version's verdict against its baseline "
        "(band by band) and per SLO the good ratio by concurrency band and version. "
        "Generated from the SLO file by `fleetwatch dashboards`; do not edit.",
        grid.panels(), [datasource_variable(), team_variable(), model_variable()])
