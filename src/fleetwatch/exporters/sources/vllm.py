"""Standalone vLLM (V0 and V1 engines) ``/metrics`` → normalized schema.

Source: METRIC_CATALOG §2 and the alias rules of §2.5/§8.7 (vLLM wheels 0.6.3 → 0.33.0;
V0 ``vllm/engine/metrics.py``, V1 ``vllm/v1/metrics/loggers.py``). Every known spelling
of a metric maps to one normalized name; when two spellings of one metric appear in the
same exposition (deprecated names shown beside new ones, 0.9.2–0.11), the newer wins
(lower ``priority``).

* ``model_name`` → ``model``; ``engine`` (DP index, 0.8.3+) → ``dp_rank``, ``"0"`` when
  absent; vLLM has no model version (``model_version`` comes from the registry/config).
* ``finished_reason``: stop/length/repetition → outcome=success; abort →
  error/cancelled; error (0.13+) → error/internal; kept as ``finish_reason``.
* The OpenMetrics colon bug (client_python #1177): ``vllm_…`` sample names are read as
  ``vllm:…``; Ray Serve's ``ray_vllm:`` prefix too.
* ``vllm:iteration_tokens_total`` is a histogram: its ``_count`` (engine steps) and
  ``_sum`` (tokens) feed batch executions/items.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from fleetwatch.exporters.source import HealthProbe, Source
from fleetwatch.exporters.table import Rule, SourceTable, SourceType, ValueMap

_H: SourceType = "histogram"
_C: SourceType = "counter"
_G: SourceType = "gauge"


def _rule(source: str, typ: SourceType, target: str, *const: tuple[str, str], priority: int = 0,
          since: str, **kw: Any) -> Rule:
    return Rule(f"vllm:{source}", typ, target, const=const, priority=priority, since=since,
                runtime="vllm", **kw)


FINISHED_REASON = ValueMap(
    source_label="finished_reason",
    keep_as="finish_reason",
    table=MappingProxyType({
        "stop": {"outcome": "success"},
        "length": {"outcome": "success"},
        "repetition": {"outcome": "success"},
        "abort": {"outcome": "error", "error_type": "cancelled"},
        "error": {"outcome": "error", "error_type": "internal"},
    }),
    missing=MappingProxyType({"outcome": "success"}),
    unknown=MappingProxyType({"outcome": "error", "error_type": "other"}),
)

ADMISSION_REASON = ValueMap(
    source_label="reason",
    table=MappingProxyType({}),
    missing=MappingProxyType({"outcome": "error", "error_type": "overload"}),
    unknown=MappingProxyType({"outcome": "error", "error_type": "overload"}),
)

_RQ = "modelserver_requests_total"
_ACTIVE = "modelserver_requests_active"
_PHASE = "modelserver_phase_duration_seconds"

#: Rules shared by standalone vLLM and Triton's vLLM backend (same family names).
SHARED_RULES: tuple[Rule, ...] = (
    _rule("prompt_tokens_total", _C, "modelserver_tokens_total", ("token_type", "input"),
          since="V0 ≤0.6.3 →; V1 0.7.3 →; Triton vllm_backend r24.08+"),
    _rule("generation_tokens_total", _C, "modelserver_tokens_total", ("token_type", "output"),
          since="V0 ≤0.6.3 →; V1 0.7.3 →; Triton vllm_backend r24.08+"),
    _rule("time_to_first_token_seconds", _H, "modelserver_time_to_first_token_seconds",
          since="V0/V1 all; Triton vllm_backend r24.08+"),
    _rule("inter_token_latency_seconds", _H, "modelserver_inter_token_latency_seconds",
          since="0.10.2+"),
    _rule("time_per_output_token_seconds", _H, "modelserver_inter_token_latency_seconds",
          priority=1, since="≤0.11 (hidden 0.12–0.14, removed 0.15); vllm_backend: ITL data"),
    _rule("e2e_request_latency_seconds", _H, "modelserver_request_duration_seconds",
          since="V0/V1 all; Triton vllm_backend r24.09+"),
    _rule("request_prompt_tokens", _H, "modelserver_request_tokens", ("token_type", "input"),
          since="V0/V1 all; Triton vllm_backend r24.09+"),
    _rule("request_generation_tokens", _H, "modelserver_request_tokens",
          ("token_type", "output"), since="V0/V1 all; Triton vllm_backend r24.09+"),
)

RULES: tuple[Rule, ...] = (
    *SHARED_RULES,
    _rule("request_success_total", _C, _RQ, value_map="vllm_finished_reason",
          since="all (counts aborted and errored requests too)"),
    _rule("admission_rejections_total", _C, _RQ, value_map="vllm_admission_reason",
          since="0.32+"),
    _rule("request_time_per_output_token_seconds", _H,
          "modelserver_time_per_output_token_seconds", since="0.11+"),
    _rule("request_queue_time_seconds", _H, "modelserver_queue_duration_seconds",
          since="0.7.3+"),
    _rule("time_in_queue_requests", _H, "modelserver_queue_duration_seconds", priority=1,
          since="V0 0.7.3–0.9.0 (duplicate of request_queue_time_seconds)"),
    _rule("request_prefill_time_seconds", _H, _PHASE, ("phase", "prefill"), since="0.7.3+"),
    _rule("request_decode_time_seconds", _H, _PHASE, ("phase", "decode"), since="0.7.3+"),
    _rule("num_requests_running", _G, _ACTIVE, ("state", "running"), since="all"),
    _rule("num_requests_waiting", _G, _ACTIVE, ("state", "waiting"), since="all"),
    _rule("kv_cache_usage_perc", _G, "modelserver_kv_cache_usage_ratio", since="0.9.2+"),
    _rule("gpu_cache_usage_perc", _G, "modelserver_kv_cache_usage_ratio", priority=1,
          since="V0 all; V1 ≤0.11 (renamed 0.9.2)"),
    _rule("prefix_cache_queries_total", _C, "modelserver_prefix_cache_queries_total",
          ("cache_tier", "local"), since="0.9.2+"),
    _rule("prefix_cache_hits_total", _C, "modelserver_prefix_cache_hits_total",
          ("cache_tier", "local"), since="0.9.2+"),
    _rule("gpu_prefix_cache_queries_total", _C, "modelserver_prefix_cache_queries_total",
          ("cache_tier", "local"), priority=1, since="V1 0.7.3–0.11 (renamed 0.9.2)"),
    _rule("gpu_prefix_cache_hits_total", _C, "modelserver_prefix_cache_hits_total",
          ("cache_tier", "local"), priority=1, since="V1 0.7.3–0.11 (renamed 0.9.2)"),
    _rule("external_prefix_cache_queries_total", _C, "modelserver_prefix_cache_queries_total",
          ("cache_tier", "external"), since="0.11.2+"),
    _rule("external_prefix_cache_hits_total", _C, "modelserver_prefix_cache_hits_total",
          ("cache_tier", "external"), since="0.11.2+"),
    _rule("gpu_prefix_cache_hit_rate", _G, "modelserver_prefix_cache_hit_ratio",
          negative_is_nan=True, since="V0 ≤0.9.0 (gauge; -1 = no data)"),
    _rule("num_preemptions_total", _C, "modelserver_preemptions_total", since="all"),
    _rule("iteration_tokens_total", _H, "modelserver_batch_executions_total", part="_count",
          since="0.7.3+ (histogram; _count = engine steps)"),
    _rule("iteration_tokens_total", _H, "modelserver_batch_items_total", part="_sum",
          since="0.7.3+ (histogram; _sum = tokens)"),
)

LABEL_RENAMES = MappingProxyType({"model_name": "model", "engine": "dp_rank"})

TABLE = SourceTable(
    kind="vllm",
    backend="vllm",
    rules=RULES,
    label_renames=LABEL_RENAMES,
    label_defaults=MappingProxyType({"dp_rank": "0"}),
    value_maps=MappingProxyType({
        "vllm_finished_reason": FINISHED_REASON,
        "vllm_admission_reason": ADMISSION_REASON,
    }),
    name_prefix_aliases=(("vllm_", "vllm:"), ("ray_vllm:", "vllm:"), ("ray_vllm_", "vllm:")),
    description="standalone vLLM, V0 (≤0.11) and V1 (0.7.3–0.33) engines",
)


def _claims(name: str, _line: str) -> bool:
    return name.startswith(("vllm:", "vllm_", "ray_vllm"))


SOURCE = Source(
    kind="vllm",
    table=TABLE,
    description="vLLM OpenAI-compatible server (V0 and V1 engines, Ray Serve's ray_vllm_*)",
    claims=_claims,
    default_port=8000,
    detect_priority=10,
    readiness=HealthProbe("/health"),
    runtimes=("vllm",),
    component_names=(("vllm", "vLLM"),),
)
