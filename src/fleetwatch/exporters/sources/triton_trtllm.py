"""Triton's TensorRT-LLM backend (``nv_trt_llm_*``, ``nv_llm_*``) → normalized schema.

Source: ``docs/sources.md`` § Triton's TensorRT-LLM backend (tensorrtllm_backend
``custom_metrics_reporter.cc`` v0.18.0, now in NVIDIA/TensorRT-LLM ``triton_backend``).
Each family is a gauge of the **latest iteration** with one category label, consumed by
``match``:

* ``nv_trt_llm_request_metrics{request_type}``: scheduled → running (the Gateway API
  Inference Extension's choice), waiting (v0.18+) → waiting, max → limit.
* ``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type}``: fraction → KV usage ratio;
  used/free/max/reused → blocks.
* ``*_statistics`` names (v0.6.x, Triton 23.11) are aliases of ``*_metrics`` (v0.7.0+).
* ``nv_llm_{input,output}_token_len`` histograms (v0.16+): per-request tokens, and their
  ``_sum`` is the cumulative token count (tokens/s = rate of it).
* ``nv_trt_llm_general_metrics{general_type="timestamp"}`` is µs since the epoch.
* ``nv_trt_llm_disaggregated_serving_metrics`` is a counter; ``kv_cache_transfer_ms`` → s.

Left unmapped, on purpose (:data:`NOT_MAPPED`, listed in ``docs/metrics.md``): the
``nv_trt_llm_v1_metrics`` (``nv_trt_llm_v1_statistics`` before v0.7) and
``nv_trt_llm_inflight_batcher_metrics`` families. They are gauges of the **latest
iteration** (``total_context_tokens``, ``total_generation_tokens``,
``empty_generation_slots``, ``micro_batch_id``, …): mapping their token figures to the
``modelserver_tokens_total`` counter would turn per-iteration snapshots into a fake
cumulative count, and the schema has no per-iteration token gauge worth adding for a
static-batching mode TensorRT-LLM has deprecated.
"""

from __future__ import annotations

from typing import Any

from fleetwatch.exporters.table import Rule, SourceTable

# The runtime label comes from the model's Triton configuration (backend "tensorrtllm"),
# like every other series of the model, so the rules set none.
_RT = None
_REQ = "request_type"
_KV = "kv_cache_block_type"


def _both(family: str, label: str, value: str, target: str, *const: tuple[str, str],
          since: str, **kw: Any) -> tuple[Rule, Rule]:
    """The ``*_metrics`` rule and its v0.6 ``*_statistics`` alias (lower precedence)."""
    return (
        Rule(f"nv_trt_llm_{family}_metrics", "gauge", target, match=((label, value),),
             const=const, runtime=_RT, since=since, **kw),
        Rule(f"nv_trt_llm_{family}_statistics", "gauge", target, match=((label, value),),
             const=const, runtime=_RT, priority=1, since="v0.6.x (Triton 23.11) old name",
             **kw),
    )


RULES: tuple[Rule, ...] = (
    *_both("request", _REQ, "scheduled", "modelserver_requests_active", ("state", "running"),
           since="v0.7.0+"),
    *_both("request", _REQ, "waiting", "modelserver_requests_active", ("state", "waiting"),
           since="v0.18.0+"),
    *_both("request", _REQ, "max", "modelserver_requests_limit", since="v0.7.0+"),
    *_both("kv_cache_block", _KV, "fraction", "modelserver_kv_cache_usage_ratio",
           since="v0.7.0+"),
    *(r for state in ("used", "free", "max", "reused")
      for r in _both("kv_cache_block", _KV, state, "modelserver_kv_cache_blocks",
                     ("block_state", state), since="v0.7.0+ (reused v0.13.0+)")),
    *(r for pool in ("cpu", "gpu", "pinned")
      for r in _both("runtime_memory", "memory_type", pool,
                     "modelserver_runtime_memory_used_bytes", ("memory_type", pool),
                     since="v0.7.0+")),
    *_both("general", "general_type", "timestamp",
           "modelserver_engine_iteration_timestamp_seconds", divide=1e6, since="v0.7.0+"),
    Rule("nv_trt_llm_disaggregated_serving_metrics", "counter",
         "modelserver_kv_transfer_duration_seconds_total",
         match=(("disaggregated_serving_type", "kv_cache_transfer_ms"),), divide=1e3,
         runtime=_RT, since="v0.15.0+"),
    Rule("nv_trt_llm_disaggregated_serving_metrics", "counter", "modelserver_kv_transfers_total",
         match=(("disaggregated_serving_type", "request_count"),), runtime=_RT,
         since="v0.15.0+"),
    Rule("nv_llm_input_token_len", "histogram", "modelserver_request_tokens",
         match=(("response_metric_type", "total_input_tokens"),),
         const=(("token_type", "input"),), runtime=_RT, since="v0.16.0+"),
    Rule("nv_llm_output_token_len", "histogram", "modelserver_request_tokens",
         match=(("response_metric_type", "total_output_tokens"),),
         const=(("token_type", "output"),), runtime=_RT, since="v0.16.0+"),
    Rule("nv_llm_input_token_len", "histogram", "modelserver_tokens_total", part="_sum",
         match=(("response_metric_type", "total_input_tokens"),),
         const=(("token_type", "input"),), runtime=_RT, since="v0.16.0+ (histogram _sum)"),
    Rule("nv_llm_output_token_len", "histogram", "modelserver_tokens_total", part="_sum",
         match=(("response_metric_type", "total_output_tokens"),),
         const=(("token_type", "output"),), runtime=_RT, since="v0.16.0+ (histogram _sum)"),
)

TABLE = SourceTable(
    kind="triton_trtllm_backend",
    backend="triton",
    rules=RULES,
    description="Triton TensorRT-LLM backend (nv_trt_llm_*, nv_llm_*), v0.6–v0.21+",
)

_LATEST_ITERATION = ("a gauge of the latest iteration (TensorRT-LLM V1 / static batching); its "
                     "token figures are per-iteration snapshots, not cumulative counts, and "
                     "the schema has no per-iteration gauge for them")

#: Upstream families deliberately left unmapped, with the reason (docs/metrics.md).
NOT_MAPPED: tuple[tuple[str, str], ...] = (
    ("nv_trt_llm_v1_metrics", _LATEST_ITERATION),
    ("nv_trt_llm_v1_statistics", _LATEST_ITERATION + " (the pre-v0.7 name)"),
    ("nv_trt_llm_inflight_batcher_metrics",
     "latest-iteration gauges of in-flight batching (context tokens, generation requests, "
     "micro-batch id, paused requests): scheduler internals, no schema family"),
    ("nv_trt_llm_inflight_batcher_statistics", "the pre-v0.7 name of the family above"),
)
