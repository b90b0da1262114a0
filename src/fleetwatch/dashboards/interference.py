"""The interference-events row: burns inside the envelope the SLO engine attributes to a
co-located model (``interference``) or to the GPU (``gpu_degraded``), with the evidence the
engine exports (:mod:`fleetwatch.slo.judge.interference`) and the GPU-health series beside them.

One function, :func:`interference_row`, adds the row to a grid; the SLO dashboard calls it
(it reads only fleetwatch_slo_* and modelserver_gpu_* series, so it can move to the GPU
dashboard's row as it is).
"""

from __future__ import annotations

from grafanalib import core as g

from fleetwatch.dashboards import panels as p
from fleetwatch.dashboards.common import MODEL_KEY
from fleetwatch.dashboards.panels import Q
from fleetwatch.promql import agg, sel

_SLO_MODEL = ("slo", *MODEL_KEY)
_V = "{{model}} v{{model_version}}"
_NEEDS_PLACEMENT = ("needs the sidecar's placement: (models sharing a GPU) and a burn inside "
                    "the envelope the engine attributes; empty while none is")



def _events_table(title: str, description: str, metric: str, labels: tuple[str, ...],
                  model: dict[str, str]) -> g.Table:
    """A table of the (SLO, model) pairs whose ``metric`` is 1 now, with ``labels``."""
    return p.table(
        title, description,
        [Q(agg("max", (*_SLO_MODEL, *labels), sel(metric, re_=model)) + " == 1",
           instant=True, table=True)],
        transformations=[{"id": "organize", "options": {
            "excludeByName": {"Time": True, "Value": True},
            "renameByName": {"model_version": "version"}}}], overrides=[],
        conditional=_NEEDS_PLACEMENT)

def interference_row(grid: p.Grid, model: dict[str, str]) -> None:
    """Interference events, the neighbour's load before and during, GPU-degraded burns and
    the GPU's clocks-event reasons and XID code (``model``: regex matchers of the
    dashboard's model variable)."""
    grid.row("Co-location interference and GPU health")
    grid.add(_events_table(
        "Interference events", "(SLO, model) pairs burning their budget inside the "
        "concurrency envelope while a co-located model (sidecar placement) got busier: "
        "a ticket to the platform team, not a page to the model's owner. `neighbour` is the "
        "model blamed; the sidecar's /slo has the evidence (burn by band, correlation).",
        "fleetwatch_slo_interference", ("neighbour",), model), 12, 7)
    grid.add(_events_table(
        "GPU-degraded burns", "(SLO, model) pairs burning inside the envelope on a GPU "
        "that throttled (a slowing clocks-event reason) or reported a new XID error in the "
        "same windows: the GPU is blamed, not the model nor its neighbours.",
        "fleetwatch_slo_gpu_degraded", ("gpu_uuid", "gpu_condition"), model), 12, 7)
    grid.add(p.timeseries(
        "Neighbour load before and during", "Mean concurrency (requests) of each blamed "
        "neighbour before the burn began and during it: the rise the engine attributes the "
        "burn to (during ≥ 1.5 × before and 0.5 requests more).",
        [Q(agg("max", (*_SLO_MODEL, "neighbour", "period"),
               sel("fleetwatch_slo_interference_neighbour_concurrency", re_=model)),
           _V + " ← {{neighbour}} {{period}}")], p.REQUESTS,
        conditional=_NEEDS_PLACEMENT), 12)
    grid.add(p.timeseries(
        "GPU clocks-event reasons and last XID", "dcgm-exporter's clocks-event (throttle) "
        "reasons bitmask per GPU (0x4 power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW "
        "thermal, 0x80 power brake slow the GPU; 0x1 idle does not) and the last XID error "
        "code (a change is a new error).",
        [Q(agg("max", ("gpu_uuid",), sel("modelserver_gpu_clock_event_reasons")),
           "{{gpu_uuid}} reasons"),
         Q(agg("max", ("gpu_uuid",), sel("modelserver_gpu_last_xid_code")),
           "{{gpu_uuid}} XID")], p.NONE,
        conditional="needs dcgm-exporter with DCGM_FI_DEV_CLOCKS_EVENT_REASONS (not in its "
                    "default CSV) for the bitmask; the XID is a default counter."), 12)
