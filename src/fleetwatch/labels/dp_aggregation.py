"""How each normalized family aggregates across data-parallel ranks (``dp_rank``), as data.

vLLM runs one engine core per data-parallel rank behind one API server
(``--data-parallel-size N``) and labels each engine's series ``engine="0"…"N-1"``
(0.8.3+); fleetwatch keeps them apart as ``dp_rank`` and never sums them itself: a query
over a model aggregates the ranks by the family's meaning. Counters add up, histograms add
up bucket by bucket (``sum by (le)``), summaries' quantiles never aggregate; a gauge
depends on what it measures, and every per-model gauge and summary of the schema has its
row here (``tests/labels/test_dp_aggregation.py`` checks it). ``docs/metrics.md`` prints
the table (:func:`dp_aggregation`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from fleetwatch.labels.defs import MetricDef


class Aggregation(NamedTuple):
    """How to combine a family's series across ``dp_rank`` (``how``: a PromQL aggregation
    or ``none``), and why."""

    how: str
    why: str


_SUM = "sum"
_MAX = "max"

#: The gauges and summaries, by family (counters and histograms follow their type).
BY_FAMILY: Mapping[str, Aggregation] = MappingProxyType({
    "modelserver_requests_active": Aggregation(
        _SUM, "each request runs or waits in exactly one engine"),
    "modelserver_requests_waiting_by_reason": Aggregation(_SUM, "as requests_active"),
    "modelserver_requests_limit": Aggregation(_SUM, "each engine schedules its own batch"),
    "modelserver_gateway_requests_running": Aggregation(
        _SUM, "a gateway has no data-parallel ranks (the label is empty); gateway replicas' "
        "requests add up"),
    "modelserver_kv_cache_usage_ratio": Aggregation(
        _MAX, "each engine has its own KV cache and the fullest one preempts first; for "
        "the fleet's share use Σ(ratio × capacity) ÷ Σ capacity with "
        "modelserver_kv_cache_capacity_tokens"),
    "modelserver_kv_cache_blocks": Aggregation(_SUM, "blocks of separate caches add up"),
    "modelserver_kv_cache_capacity_tokens": Aggregation(
        _SUM, "separate caches add up (a request's KV lives in one of them)"),
    "modelserver_prefix_cache_hit_ratio": Aggregation(
        "none", "a ratio: recompute it from the summed hits and queries counters"),
    "modelserver_adapter_requests_present": Aggregation(
        _MAX, "an adapter is present when any engine runs or queues it"),
    "modelserver_engine_sleep_state": Aggregation(
        _MAX, "a state set: a state holds for the server when any engine is in it"),
    "modelserver_model_load_duration_seconds": Aggregation(
        _MAX, "the engines load in parallel: the slowest decides readiness"),
    "modelserver_engine_iteration_timestamp_seconds": Aggregation(
        "min", "the stalest engine says how old the last-iteration gauges are"),
    "modelserver_model_info": Aggregation(
        _MAX, "value 1 per identity; the ranks serve the same model"),
    "modelserver_runtime_memory_used_bytes": Aggregation(_SUM, "each engine holds its own"),
    "modelserver_request_duration_summary_seconds": Aggregation(
        "none", "quantiles never aggregate: use the histogram"),
    "modelserver_queue_duration_summary_seconds": Aggregation(
        "none", "quantiles never aggregate: use the histogram"),
    "modelserver_phase_duration_summary_seconds": Aggregation(
        "none", "quantiles never aggregate: use the histogram"),
    "modelserver_response_cache_lookup_duration_summary_seconds": Aggregation(
        "none", "quantiles never aggregate"),
})

_BY_TYPE: Mapping[str, Aggregation] = MappingProxyType({
    "counter": Aggregation(_SUM, "events of separate engines add up"),
    "histogram": Aggregation("sum by (le)", "observations of separate engines add up, "
                             "bucket by bucket (_sum and _count too)"),
})


def dp_aggregation(metric: MetricDef) -> Aggregation | None:
    """How ``metric`` aggregates across ``dp_rank``: its row of :data:`BY_FAMILY`, else its
    type's rule (counters, histograms), else None (a gauge or summary without a row)."""
    return BY_FAMILY.get(metric.name) or _BY_TYPE.get(metric.type)
