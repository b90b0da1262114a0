"""Triton Inference Server core metrics (``nv_*`` on ``:8002/metrics``) → normalized schema.

Source: ``docs/sources.md`` § Triton Inference Server core (triton-inference-server/core
``src/metrics.cc``, ``metric_model_reporter.cc``; docs ``user_guide/metrics.md``).
Conversions:

* ``nv_inference_{request,queue,compute_input,compute_infer,compute_output}_duration_
  histogram_us`` (``--metrics-config histogram_latencies=true`` on a server with
  triton-inference-server/core PR 474) are real distributions: µs bounds and sums → s.
  Where a server exports them they win over the mean form below (rule priority), so the
  SLO engine reads real quantiles; without them nothing changes.
* ``*_duration_us`` counters are cumulative microseconds of **successful** requests →
  ``_sum`` (seconds) of a histogram whose ``_count`` and ``+Inf`` bucket are
  ``nv_inference_request_success``: a mean, never a distribution (no fake buckets). When
  a backend publishes a real latency histogram for the same model (the vLLM backend's
  e2e and TTFT histograms), that one is used instead (rule priority).
* ``*_summary_us`` summaries stay summaries (µs → s), one series per ``gpu_uuid``.
* per-model counters drop ``gpu_uuid`` and are summed over GPUs (Triton splits instance
  series by GPU but reports failures and pending requests without it).
* ``reason`` (r24.08+) → ``error_type``; absent before r24.08 → ``other``.
* ``namespace`` (r24.05+ model namespacing) → ``model_namespace``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from fleetwatch.exporters.source import IdentityProbe, ModelReadyProbe, RuntimeProbe, Source
from fleetwatch.exporters.sources import triton_trtllm, triton_vllm
from fleetwatch.exporters.table import Rule, SourceTable, ValueMap

US = 1e6  # microseconds per second
_INF = (("le", "+Inf"),)
_COUNT_PARTS = (("_count", ()), ("_bucket", _INF))


def _success(target: str, *const: tuple[str, str], priority: int = 0) -> Rule:
    """The success counter as the request count of a mean-only histogram."""
    return Rule("nv_inference_request_success", "counter", target, as_samples=_COUNT_PARTS,
                const=const, drop=("gpu_uuid",), priority=priority, since="all versions")


def _duration_sum(source: str, target: str, *const: tuple[str, str], since: str,
                  priority: int = 0) -> Rule:
    return Rule(source, "counter", target, as_samples=(("_sum", ()),), divide=US, const=const,
                drop=("gpu_uuid",), priority=priority, since=since)


def _histogram(phase: str, target: str, *const: tuple[str, str], priority: int) -> Rule:
    """Triton's ``nv_inference_<phase>_duration_histogram_us`` (µs bounds and sum → s)."""
    return Rule(f"nv_inference_{phase}_duration_histogram_us", "histogram", target,
                divide=US, le_divide=US, const=const, drop=("gpu_uuid",), priority=priority,
                since=_HISTOGRAM_SINCE)


_HISTOGRAM_SINCE = ("histogram_latencies=true, after triton-inference-server/core PR 474 "
                    "(not in a release yet)")


def _summary(source: str, target: str, *const: tuple[str, str], since: str) -> Rule:
    return Rule(source, "summary", target, divide=US, const=const, since=since)


_PHASES = ("compute_input", "compute_infer", "compute_output")

FAILURE_REASONS = ValueMap(
    source_label="reason",
    table=MappingProxyType({
        "REJECTED": {"error_type": "rejected"},
        "CANCELED": {"error_type": "cancelled"},
        "BACKEND": {"error_type": "backend"},
        "OTHER": {"error_type": "other"},
    }),
    missing=MappingProxyType({"error_type": "other"}),
    unknown=MappingProxyType({"error_type": "other"}),
)

RULES: tuple[Rule, ...] = (
    # requests
    Rule("nv_inference_request_success", "counter", "modelserver_requests_total",
         const=(("outcome", "success"),), drop=("gpu_uuid",), since="all versions"),
    Rule("nv_inference_request_failure", "counter", "modelserver_requests_total",
         const=(("outcome", "error"),), drop=("gpu_uuid",), value_map="triton_reason",
         since="all versions; reason label r24.08+"),
    Rule("nv_inference_count", "counter", "modelserver_batch_items_total", drop=("gpu_uuid",),
         since="all versions"),
    Rule("nv_inference_exec_count", "counter", "modelserver_batch_executions_total",
         drop=("gpu_uuid",), since="all versions"),
    Rule("nv_inference_pending_request_count", "gauge", "modelserver_requests_active",
         const=(("state", "waiting"),), drop=("gpu_uuid",), since="r23.09+"),
    Rule("nv_model_load_duration_secs", "gauge", "modelserver_model_load_duration_seconds",
         drop=("gpu_uuid",), since="r24.11+"),
    # latency: Triton's own histograms (µs buckets) where the server exports them
    # (priority 1 for the request: the vLLM backend's e2e histogram of the model wins)
    _histogram("request", "modelserver_request_duration_seconds", priority=1),
    _histogram("queue", "modelserver_queue_duration_seconds", priority=0),
    *(_histogram(p, "modelserver_phase_duration_seconds", ("phase", p), priority=0)
      for p in _PHASES),
    # latency: means from µs counters (count = successes), for servers without histograms
    # (each one priority above the histogram of its family: a distribution wins)
    _success("modelserver_request_duration_seconds", priority=2),
    _duration_sum("nv_inference_request_duration_us", "modelserver_request_duration_seconds",
                  since="all versions", priority=2),
    _success("modelserver_queue_duration_seconds", priority=1),
    _duration_sum("nv_inference_queue_duration_us", "modelserver_queue_duration_seconds",
                  since="all versions", priority=1),
    *(_success("modelserver_phase_duration_seconds", ("phase", p), priority=1)
      for p in _PHASES),
    *(_duration_sum(f"nv_inference_{p}_duration_us", "modelserver_phase_duration_seconds",
                    ("phase", p), since="all versions", priority=1) for p in _PHASES),
    # latency: summaries (opt-in summary_latencies=true, r23.05+)
    _summary("nv_inference_request_summary_us", "modelserver_request_duration_summary_seconds",
             since="r23.05+, --metrics-config summary_latencies=true"),
    _summary("nv_inference_queue_summary_us", "modelserver_queue_duration_summary_seconds",
             since="r23.05+, --metrics-config summary_latencies=true"),
    *(_summary(f"nv_inference_{p}_summary_us", "modelserver_phase_duration_summary_seconds",
               ("phase", p), since="r23.05+, --metrics-config summary_latencies=true")
      for p in _PHASES),
    # first-response histogram (ms) = TTFT for decoupled models
    Rule("nv_inference_first_response_histogram_ms", "histogram",
         "modelserver_time_to_first_token_seconds", divide=1e3, le_divide=1e3,
         drop=("gpu_uuid",), priority=1,
         since="r24.11+, histogram_latencies=true (a vLLM-backend TTFT of the model wins)"),
    # response cache, current names (r22.02+) and the older per-model names
    Rule("nv_cache_num_hits_per_model", "counter", "modelserver_response_cache_lookups_total",
         const=(("result", "hit"),), drop=("gpu_uuid",), since="r22.02+"),
    Rule("nv_cache_num_misses_per_model", "counter",
         "modelserver_response_cache_lookups_total", const=(("result", "miss"),),
         drop=("gpu_uuid",), since="r22.02+"),
    Rule("nv_cache_hit_duration_per_model", "counter",
         "modelserver_response_cache_lookup_duration_seconds_total", divide=US,
         const=(("result", "hit"),), drop=("gpu_uuid",), since="r23.03+"),
    Rule("nv_cache_miss_duration_per_model", "counter",
         "modelserver_response_cache_lookup_duration_seconds_total", divide=US,
         const=(("result", "miss"),), drop=("gpu_uuid",), since="r23.03+ (lookup + insert)"),
    Rule("nv_cache_hit_lookup_duration_per_model", "counter",
         "modelserver_response_cache_lookup_duration_seconds_total", divide=US,
         const=(("result", "hit"),), drop=("gpu_uuid",), priority=1,
         since="r22.02–r23.02 (old name)"),
    Rule("nv_cache_miss_lookup_duration_per_model", "counter",
         "modelserver_response_cache_lookup_duration_seconds_total", divide=US,
         const=(("result", "miss"),), drop=("gpu_uuid",), priority=1,
         since="r22.02–r23.02 (old name; summed with insertion)"),
    Rule("nv_cache_miss_insertion_duration_per_model", "counter",
         "modelserver_response_cache_lookup_duration_seconds_total", divide=US,
         const=(("result", "miss"),), drop=("gpu_uuid",), priority=1,
         since="r22.02–r23.02 (old name; summed with lookup)"),
    _summary("nv_cache_hit_summary_per_model",
             "modelserver_response_cache_lookup_duration_summary_seconds", ("result", "hit"),
             since="r23.05+, summaries and cache enabled"),
    _summary("nv_cache_miss_summary_per_model",
             "modelserver_response_cache_lookup_duration_summary_seconds", ("result", "miss"),
             since="r23.05+, summaries and cache enabled"),
    # GPU (DCGM inside Triton), per gpu_uuid
    Rule("nv_gpu_utilization", "gauge", "modelserver_gpu_utilization_ratio",
         since="all versions (ratio 0–1)"),
    Rule("nv_gpu_memory_total_bytes", "gauge", "modelserver_gpu_memory_total_bytes",
         since="all versions"),
    Rule("nv_gpu_memory_used_bytes", "gauge", "modelserver_gpu_memory_used_bytes",
         since="all versions"),
    Rule("nv_gpu_power_usage", "gauge", "modelserver_gpu_power_watts", since="all versions"),
    Rule("nv_gpu_power_limit", "gauge", "modelserver_gpu_power_limit_watts",
         since="all versions"),
    Rule("nv_energy_consumption", "counter", "modelserver_gpu_energy_joules_total",
         since="all versions (J since Triton start)"),
    # host
    Rule("nv_cpu_utilization", "gauge", "modelserver_cpu_utilization_ratio", since="r22.09+"),
    Rule("nv_cpu_memory_total_bytes", "gauge", "modelserver_cpu_memory_total_bytes",
         since="r22.09+"),
    Rule("nv_cpu_memory_used_bytes", "gauge", "modelserver_cpu_memory_used_bytes",
         since="r22.09+"),
    Rule("nv_pinned_memory_pool_total_bytes", "gauge",
         "modelserver_pinned_memory_pool_total_bytes", since="24.01+"),
    Rule("nv_pinned_memory_pool_used_bytes", "gauge",
         "modelserver_pinned_memory_pool_used_bytes", since="24.01+"),
)

LABEL_RENAMES = MappingProxyType({
    "model": "model",
    "version": "model_version",
    "namespace": "model_namespace",
})

TABLE = SourceTable(
    kind="triton_core",
    backend="triton",
    rules=RULES,
    label_renames=LABEL_RENAMES,
    value_maps=MappingProxyType({"triton_reason": FAILURE_REASONS}),
    description="Triton Inference Server core metrics (nv_*), r20.x–r26.x",
)

#: Triton model-config ``backend``/``platform`` values → ``runtime`` label values.
RUNTIME_BY_CONFIG = MappingProxyType({
    "python": "python",
    "onnxruntime": "onnxruntime",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch": "pytorch",
    "pytorch_libtorch": "pytorch",
    "tensorrt": "tensorrt",
    "tensorrt_plan": "tensorrt",
    "tensorflow": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "tensorflow_graphdef": "tensorflow",
    "openvino": "openvino",
    "fil": "fil",
    "vllm": "vllm",
    "tensorrtllm": "tensorrt_llm",
    "ensemble": "ensemble",
})


def runtime_from_model_config(config: dict[str, Any]) -> str:
    """``runtime`` label from a Triton model configuration (``/v2/models/<m>/config`` JSON).

    Uses ``backend`` (e.g. ``python``, ``onnxruntime``, ``vllm``, ``tensorrtllm``), else
    ``platform`` (e.g. ``onnxruntime_onnx``, ``ensemble``); ``unknown`` when neither is set.
    A Python-backend model whose ``parameters`` name a TensorRT-LLM or vLLM engine keeps
    ``python`` (the config does not say more).
    """
    for key in ("backend", "platform"):
        value = str(config.get(key) or "").strip().lower()
        if value:
            return RUNTIME_BY_CONFIG.get(value, value)
    return "unknown"


def interpret_model_config(doc: object) -> tuple[str | None, str | None]:
    """``(runtime, None)`` from a ``/v2/models/<m>/config`` JSON document, or
    ``(None, problem)`` when it is not a readable model configuration."""
    if not isinstance(doc, dict):
        return None, f"expected a JSON object, got {type(doc).__name__}"
    for key in ("backend", "platform"):
        value = doc.get(key)
        if value is not None and not isinstance(value, str):
            return None, f"{key!r} is a {type(value).__name__}, not a string"
    return runtime_from_model_config(doc), None


def server_metadata_identity(doc: object) -> dict[str, str]:
    """``{"engine_version": …}`` from Triton's server metadata, ``GET /v2`` (KServe v2
    protocol: ``{"name": "triton", "version": "2.51.0", "extensions": [...]}``)."""
    if isinstance(doc, dict) and isinstance(doc.get("version"), str) and doc["version"]:
        return {"engine_version": doc["version"]}
    return {}


def _claims(name: str, line: str) -> bool:
    """``nv_*`` families, and ``vllm:*`` samples labelled Triton-style (``model``,
    ``version``, no ``model_name``): the Triton vLLM backend."""
    if name.startswith("nv_"):
        return True
    return (name.startswith(("vllm:", "vllm_", "ray_vllm")) and 'version="' in line
            and 'model="' in line and "model_name=" not in line)


#: A Triton target carries core metrics plus whatever its LLM backends publish.
SOURCE = Source(
    kind="triton",
    table=TABLE.combine(triton_vllm.TABLE, triton_trtllm.TABLE, kind="triton"),
    description="NVIDIA Triton Inference Server (core, vLLM and TensorRT-LLM backends)",
    claims=_claims,
    default_port=8002,
    detect_priority=0,
    readiness=ModelReadyProbe("/v2/models/{model}/ready"),
    runtime_probe=RuntimeProbe("/v2/models/{model}/config", interpret_model_config),
    identity=IdentityProbe("/v2", server_metadata_identity),
    runtimes=(*sorted(set(RUNTIME_BY_CONFIG.values())), "unknown"),
    llm_runtimes=(RUNTIME_BY_CONFIG["vllm"], RUNTIME_BY_CONFIG["tensorrtllm"]),
    components=(TABLE, triton_vllm.TABLE, triton_trtllm.TABLE),
    component_names=(("triton_core", "Triton core"),
                     ("triton_vllm_backend", "Triton vLLM backend"),
                     ("triton_trtllm_backend", "Triton TensorRT-LLM backend")),
    not_mapped=triton_trtllm.NOT_MAPPED,
)
