"""Gateways in front of the engines → the schema's ``modelserver_gateway_*`` families.

A gateway routes requests to engine endpoints and publishes its own view of them: the
vLLM **production-stack router** (``vllm_router``; its series reuse the engine's ``vllm:``
prefix and even some engine names, e.g. ``vllm:num_requests_running``, but carry a
``server`` label naming the engine URL) and the llm-d / Gateway API Inference Extension
**endpoint picker** (EPP: ``llm_d_epp_*``, formerly ``inference_pool_*`` and
``inference_objective_*``). Read as engine series they would count every request twice
(once at the engine, once at the gateway), so this source feeds only gateway families,
never ``modelserver_requests_active`` or the engine latency histograms.

Source: ``docs/sources.md`` § Gateways: production-stack
``src/vllm_router/services/metrics_service/__init__.py`` (names, types, labels); the llm-d
observability guide's EPP metric tables (names; labels as in the Inference Extension's
tests: ``name`` is the InferencePool, ``model_server_endpoint`` — formerly
``model_server_pod`` — the endpoint, ``model_name``/``target_model_name`` the requested and
the rewritten model).

* Router: ``num_incoming_requests`` (per ``model``) → gateway requests;
  ``num_requests_running``/``num_requests_waiting`` (per ``server``) → requests per endpoint
  by state; ``healthy_pods_total`` → ready endpoints; ``request_latency_seconds`` →
  gateway request latency (``status`` dropped).
* EPP: request count and latency histograms (observed and predicted TTFT/TPOT) per
  ``model_name``; pool means of queue, running requests and KV-cache usage; per-endpoint
  queue; ready endpoints; the flow-control queue (size, wait). A renamed family maps from
  both names; the new name wins where both are present (rule priority).
* Labels: ``model_name`` → ``model`` (the name the client asked for: an objective's SLO is
  the client's), ``target_model_name`` dropped; ``name``/``inference_pool`` → ``pool``;
  ``server``/``model_server_endpoint``/``model_server_pod`` → ``endpoint``.

Left unmapped (:data:`SOURCE` ``not_mapped``): the router's own averages (QPS, ITL,
latency, decoding length: means over its window, not counters) and its prefix-cache gauges,
EPP plugin and scheduler timings, sizes in bytes.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from fleetwatch.exporters.source import Source
from fleetwatch.exporters.table import Rule, SourceTable, SourceType

_ROUTER = "production-stack router (vllm_router)"
_EPP = "llm-d EPP (llm_d_epp_*)"
_GIE = "Inference Extension EPP before the llm_d_epp_ rename"


def _r(source: str, typ: SourceType, target: str, *const: tuple[str, str], since: str,
       priority: int = 0, drop: tuple[str, ...] = ()) -> Rule:
    return Rule(source, typ, target, const=const, since=since, priority=priority, drop=drop)


def _epp(suffix: str, legacy: str | None, typ: SourceType, target: str,
         *const: tuple[str, str]) -> tuple[Rule, ...]:
    """The ``llm_d_epp_`` family and, when it was renamed, its former name (priority 1)."""
    rules: tuple[Rule, ...] = (_r(f"llm_d_epp_{suffix}", typ, target, *const, since=_EPP),)
    if legacy is not None:
        rules += (_r(legacy, typ, target, *const, since=_GIE, priority=1),)
    return rules


_G = "modelserver_gateway_"
_RULES: tuple[Rule, ...] = (
    # production-stack router
    _r("vllm:num_incoming_requests", "counter", _G + "requests_total", since=_ROUTER),
    _r("vllm:num_requests_running", "gauge", _G + "endpoint_requests", ("state", "running"),
       since=_ROUTER + " (label server)"),
    _r("vllm:num_requests_waiting", "gauge", _G + "endpoint_requests", ("state", "waiting"),
       since=_ROUTER + " (label server)"),
    _r("vllm:healthy_pods_total", "gauge", _G + "pool_ready_endpoints", since=_ROUTER,
       drop=("endpoint",)),
    _r("vllm:request_latency_seconds", "histogram", _G + "request_duration_seconds",
       since=_ROUTER, drop=("endpoint",)),
    # llm-d endpoint picker (and its Inference Extension names)
    *_epp("request_total", "inference_objective_request_total", "counter",
          _G + "requests_total"),
    *_epp("request_running", "inference_objective_running_requests", "gauge",
          _G + "requests_running"),
    *_epp("request_duration_seconds", "inference_objective_request_duration_seconds",
          "histogram", _G + "request_duration_seconds"),
    *_epp("request_ttft_seconds", None, "histogram", _G + "time_to_first_token_seconds"),
    *_epp("request_streaming_tpot_seconds", None, "histogram",
          _G + "time_per_output_token_seconds"),
    *_epp("request_predicted_ttft_seconds", None, "histogram",
          _G + "predicted_time_to_first_token_seconds"),
    *_epp("request_predicted_tpot_seconds", None, "histogram",
          _G + "predicted_time_per_output_token_seconds"),
    *_epp("average_queue_size", "inference_pool_average_queue_size", "gauge",
          _G + "pool_mean_requests", ("state", "waiting")),
    *_epp("average_running_requests", "inference_pool_average_running_requests", "gauge",
          _G + "pool_mean_requests", ("state", "running")),
    *_epp("average_kv_cache_utilization", "inference_pool_average_kv_cache_utilization",
          "gauge", _G + "pool_mean_kv_cache_usage_ratio"),
    *_epp("ready_endpoints", "inference_pool_ready_pods", "gauge",
          _G + "pool_ready_endpoints"),
    *_epp("per_endpoint_queue_size", "inference_pool_per_pod_queue_size", "gauge",
          _G + "endpoint_requests", ("state", "waiting")),
    *_epp("flow_control_queue_size", None, "gauge", _G + "queued_requests"),
    *_epp("flow_control_request_queue_duration_seconds", None, "histogram",
          _G + "queue_duration_seconds"),
)

#: Gateways execute no model: runtime="gateway".
RULES: tuple[Rule, ...] = tuple(replace(r, runtime="gateway") for r in _RULES)

TABLE = SourceTable(
    kind="gateway",
    backend="gateway",
    rules=RULES,
    label_renames=MappingProxyType({
        "model_name": "model", "name": "pool", "inference_pool": "pool",
        "server": "endpoint", "model_server_endpoint": "endpoint",
        "model_server_pod": "endpoint",
    }),
    description="gateways: vLLM production-stack router, llm-d / Inference Extension EPP",
)

#: Router families whose names are not an engine's (vLLM never exports them).
ROUTER_ONLY = frozenset({
    "vllm:current_qps", "vllm:avg_decoding_length", "vllm:num_prefill_requests",
    "vllm:num_decoding_requests", "vllm:num_incoming_requests",
    "vllm:num_incoming_requests_total", "vllm:routing_decisions_total",
    "vllm:healthy_pods_total", "vllm:avg_latency", "vllm:avg_itl",
    "vllm:input_tokens_total", "vllm:output_tokens_total", "vllm:request_errors_total",
    "vllm:request_latency_seconds", "vllm:request_latency_seconds_bucket",
    "vllm:request_latency_seconds_sum", "vllm:request_latency_seconds_count",
    "vllm:deployment_replicas",  # AIBrix's autoscaler
})

_EPP_PREFIXES = ("llm_d_epp_", "inference_pool_", "inference_objective_",
                 "inference_extension_")


def _claims(name: str, line: str) -> bool:
    """A gateway's line: an EPP prefix, a router-only ``vllm:`` name, or a ``vllm:``
    sample labelled ``server=`` (the router's per-endpoint copy of an engine gauge)."""
    if name.startswith(_EPP_PREFIXES) or name in ROUTER_ONLY:
        return True
    return name.startswith("vllm:") and ('{server="' in line or ',server="' in line)


_NOT_MAPPED = (
    ("vllm:current_qps", "the router's own per-server rate; rate() of "
     "modelserver_gateway_requests_total is the schema's"),
    ("vllm:avg_latency", "a mean over the router's window; modelserver_gateway_request_"
     "duration_seconds has the distribution"),
    ("vllm:avg_itl", "a mean over the router's window, of the engines' ITL; the engines' "
     "own histograms are modelserver_inter_token_latency_seconds"),
    ("vllm:avg_decoding_length", "a mean over the router's window"),
    ("vllm:num_prefill_requests", "the router's count of requests in prefill per server; "
     "no schema family splits the gateway's view by phase"),
    ("vllm:num_decoding_requests", "as num_prefill_requests"),
    ("vllm:num_requests_swapped", "a V0 engine state the router copies; V1 has none"),
    ("vllm:gpu_prefix_cache_hit_rate", "the router's copy of an engine ratio; the engines' "
     "counters are mapped from the engines"),
    ("vllm:gpu_prefix_cache_hits_total", "a gauge copy of an engine counter"),
    ("vllm:gpu_prefix_cache_queries_total", "a gauge copy of an engine counter"),
    ("vllm:input_tokens_total", "tokens are counted by the engines "
     "(modelserver_tokens_total); the router's copy would double them"),
    ("vllm:output_tokens_total", "as input_tokens_total"),
    ("vllm:request_errors_total", "its error_type values are the router's own, not the "
     "schema's"),
    ("vllm:routing_decisions_total", "routing internals (algorithm, decision, reason)"),
    ("llm_d_epp_request_error_total", "error codes are the EPP's own, not the schema's"),
    ("llm_d_epp_request_ntpot_seconds", "normalized TPOT (latency ÷ output tokens), not a "
     "schema quantity"),
    ("llm_d_epp_request_streaming_itl_seconds", "gaps between response body chunks, not "
     "tokens"),
    ("llm_d_epp_request_input_tokens", "per-request token counts are the engines'"),
    ("llm_d_epp_request_output_tokens", "per-request token counts are the engines'"),
    ("llm_d_epp_request_cached_tokens", "cached prompt tokens are the engines'"),
    ("llm_d_epp_request_size_bytes", "payload sizes, no schema family"),
    ("llm_d_epp_response_size_bytes", "payload sizes, no schema family"),
    ("llm_d_epp_std_dev_queue_size", "a spread across endpoints; the per-endpoint queue "
     "is mapped"),
    ("llm_d_epp_std_dev_running_requests", "a spread across endpoints"),
    ("llm_d_epp_std_dev_kv_cache_utilization", "a spread across endpoints"),
    ("llm_d_epp_scheduler_*", "EPP scheduling internals"),
    ("llm_d_epp_plugin_*", "EPP plugin internals"),
    ("llm_d_epp_flow_control_dispatch_cycle_duration_seconds", "EPP internals"),
    ("llm_d_epp_flow_control_pool_saturation", "the EPP's own saturation estimate; the "
     "autoscaling signal is fleetwatch's"),
    ("llm_d_epp_info", "build information"),
)

SOURCE = Source(
    kind="gateway",
    table=TABLE,
    description="gateway: vLLM production-stack router, llm-d / Inference Extension EPP",
    claims=_claims,
    default_port=9090,
    detect_priority=5,
    runtimes=("gateway",),
    component_names=(("gateway", "Gateways"),),
    not_mapped=_NOT_MAPPED,
)
