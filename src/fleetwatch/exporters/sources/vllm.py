"""Standalone vLLM (V0 and V1 engines) ``/metrics`` → normalized schema.

Source: ``docs/sources.md`` § vLLM, with its renames table (vLLM wheels 0.6.3 → 0.33.0; V0
``vllm/engine/metrics.py``, V1 ``vllm/v1/metrics/loggers.py``). Every known spelling of a
metric maps to one normalized name; when two spellings of one metric appear in the same
exposition (deprecated names shown beside new ones, 0.9.2–0.11), the newer wins (lower
``priority``).

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

from fleetwatch.exporters.source import HealthProbe, IdentityProbe, Source
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

PROMPT_TOKEN_SOURCE = ValueMap(
    source_label="source",
    table=MappingProxyType({
        "local_compute": {"token_source": "computed"},
        "local_cache_hit": {"token_source": "local_cache"},
        "external_kv_transfer": {"token_source": "external_transfer"},
    }),
    unknown=MappingProxyType({"token_source": "{value}"}),
)

WAIT_REASON = ValueMap(
    source_label="reason",
    keep_as="wait_reason",
    table=MappingProxyType({"capacity": {}, "deferred": {}}),
)

DRAFT_POSITION = ValueMap(
    source_label="position",
    table=MappingProxyType({}),
    unknown=MappingProxyType({"draft_position": "{value}"}),
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
    _rule("request_num_preemptions", _H, "modelserver_request_preemptions", since="0.30+"),
    _rule("request_inference_time_seconds", _H, _PHASE, ("phase", "inference"),
          since="0.7.3+ (RUNNING phase: spans prefill and decode)"),
    _rule("prompt_tokens_cached_total", _C, "modelserver_cached_input_tokens_total",
          since="0.16+ (local + external cache hits)"),
    _rule("prompt_tokens_by_source_total", _C, "modelserver_input_tokens_by_source_total",
          value_map="vllm_prompt_token_source",
          since="0.16+ (source: local_compute → computed, local_cache_hit → local_cache, "
                "external_kv_transfer → external_transfer)"),
    _rule("nixl_xfer_time_seconds", _H, "modelserver_kv_transfer_duration_seconds_total",
          part="_sum", since="0.11+ (NIXL KV connector, P/D disaggregation; histogram: _sum "
          "= seconds spent in KV transfers)"),
    _rule("num_requests_waiting_by_reason", _G, "modelserver_requests_waiting_by_reason",
          value_map="vllm_wait_reason", since="0.20.2+ (reason → wait_reason)"),
    _rule("engine_sleep_state", _G, "modelserver_engine_sleep_state", since="0.11.2+"),
    _rule("cache_config_info", _G, "modelserver_kv_cache_capacity_tokens",
          value_labels=("num_gpu_blocks", "block_size"),
          since="0.8.0+ (info labels num_gpu_blocks × block_size; per engine, no model_name)"),
    _rule("mm_cache_queries_total", _C, "modelserver_multimodal_cache_queries_total",
          since="0.11.2+"),
    _rule("mm_cache_hits_total", _C, "modelserver_multimodal_cache_hits_total",
          since="0.11.2+"),
    _rule("spec_decode_num_drafts_total", _C, "modelserver_spec_decode_drafts_total",
          since="0.9+ (V1, with --speculative-config)"),
    _rule("spec_decode_num_draft_tokens_total", _C, "modelserver_spec_decode_draft_tokens_total",
          since="0.9+ (V1, with --speculative-config)"),
    _rule("spec_decode_num_accepted_tokens_total", _C,
          "modelserver_spec_decode_accepted_tokens_total",
          since="0.9+ (V1, with --speculative-config)"),
    _rule("spec_decode_num_accepted_tokens_per_pos_total", _C,
          "modelserver_spec_decode_accepted_tokens_by_position_total",
          value_map="vllm_draft_position",
          since="0.9+ (V1, with --speculative-config; position → draft_position)"),
    _rule("estimated_flops_per_gpu_total", _C, "modelserver_estimated_gpu_flop_total",
          since="0.17.1+ (with --enable-mfu-metrics)"),
    _rule("estimated_read_bytes_per_gpu_total", _C, "modelserver_estimated_gpu_read_bytes_total",
          since="0.17.1+ (with --enable-mfu-metrics)"),
    _rule("estimated_write_bytes_per_gpu_total", _C,
          "modelserver_estimated_gpu_written_bytes_total",
          since="0.17.1+ (with --enable-mfu-metrics)"),
)

#: vLLM families left unmapped on purpose (upstream family, why); docs/metrics.md lists them.
NOT_MAPPED: tuple[tuple[str, str], ...] = (
    ("vllm:prompt_tokens_cached_by_source_total",
     "0.32+: cache hits by tier (device/host/disk/p2p); they add up to the prefix-cache hits "
     "already mapped (modelserver_prefix_cache_hits_total, cache_tier local + external); the "
     "schema has no tier-of-origin label yet"),
    ("vllm:request_prefill_kv_computed_tokens",
     "0.13+: per-request prompt tokens minus cache hits; its total is "
     "modelserver_input_tokens_by_source_total{token_source=\"computed\"}, and a per-request "
     "distribution of it has no consumer in the schema"),
    ("vllm:request_max_num_generation_tokens",
     "what clients asked for (max generation tokens), not what the server did"),
    ("vllm:request_params_n", "a client request parameter (n), not server behaviour"),
    ("vllm:request_params_max_tokens",
     "a client request parameter (max_tokens), not server behaviour"),
    ("vllm:cache_config_info (other labels)",
     "only num_gpu_blocks × block_size is read (modelserver_kv_cache_capacity_tokens); the "
     "other ~35 CacheConfig fields are configuration, not measurements; `cache_dtype` is the "
     "KV-cache dtype, not the model's quantization"),
    ("vllm:*_created",
     "prometheus_client's creation timestamps of counters/histograms (0.32 serves them as "
     "separate gauge families): not data"),
    ("vllm:lora_requests_info (max_lora, older series)",
     "read into modelserver_adapter_requests_present (adapter, state) from the series with "
     "the latest value only: the others are past states vLLM never removes; `max_lora` is "
     "configuration (--max-loras)"),
    ("vllm:num_requests_kv_fetch_by_stage",
     "0.32+, P/D-disaggregated KV consumers only; no schema meaning yet"),
    ("vllm:kv_block_*_seconds",
     "--kv-cache-metrics, sampled KV-block residency: not in the schema yet"),
    ("vllm:corrupted_requests_total, vllm:watermark_requests_total",
     "debug (VLLM_COMPUTE_NANS_IN_LOGITS) and watermarking features only"),
    ("vllm:prompt_tokens_recomputed_total",
     "prompt tokens found in the prefix cache that the engine computed again for the "
     "forward pass: a correction of the prefix-cache hits with no consumer in the schema"),
    ("vllm:nixl_xfer_time_seconds (buckets, count)",
     "only its _sum is read (modelserver_kv_transfer_duration_seconds_total); its count is "
     "of NIXL transfers, not of requests (modelserver_kv_transfers_total counts requests)"),
    ("vllm:nixl_*, vllm:mooncake_*, vllm:hf3fs_*, vllm:umbp_*, vllm:simple_kv_offload_*",
     "KV-connector internals, created only when that connector is configured"),
    ("http_*", "prometheus-fastapi-instrumentator's HTTP metrics: no model label; the "
     "engine's own request and latency families are mapped instead"),
    ("process_*, python_*", "the API server process's own collector (one of vLLM's processes)"),
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
        "vllm_prompt_token_source": PROMPT_TOKEN_SOURCE,
        "vllm_wait_reason": WAIT_REASON,
        "vllm_draft_position": DRAFT_POSITION,
    }),
    name_prefix_aliases=(("vllm_", "vllm:"), ("ray_vllm:", "vllm:"), ("ray_vllm_", "vllm:")),
    description="standalone vLLM, V0 (≤0.11) and V1 (0.7.3–0.33) engines",
    reads_lora_adapters=True,
)


def version_identity(doc: object) -> dict[str, str]:
    """``{"engine_version": …}`` from vLLM's ``GET /version`` (``{"version": "0.32.0"}``,
    ``vllm/entrypoints/serve/instrumentator/basic.py``; every release with the OpenAI
    server). vLLM 0.32 reports no weight quantization outside its dev-mode
    ``/server_info``, so ``quantization`` comes from the registry."""
    if isinstance(doc, dict) and isinstance(doc.get("version"), str) and doc["version"]:
        return {"engine_version": doc["version"]}
    return {}


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
    identity=IdentityProbe("/version", version_identity, same_port=True),
    runtimes=("vllm",),
    llm_runtimes=("vllm",),
    openai_server=True,
    component_names=(("vllm", "vLLM"),),
    not_mapped=NOT_MAPPED,
)
