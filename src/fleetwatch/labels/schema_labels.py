"""Every normalized label, defined once: its name, meaning, values and OpenTelemetry
name (:class:`~fleetwatch.labels.defs.LabelDef`), and the label orders series are
rendered in. Part of the schema (:mod:`fleetwatch.labels.schema`).
"""

from __future__ import annotations

from fleetwatch.labels.defs import LabelDef

#: Label order in rendered series: core identity labels first, then the rest.
CORE_LABEL_ORDER = (
    "model",
    "model_version",
    "model_namespace",
    "backend",
    "runtime",
    "dp_rank",
    "gpu_uuid",
)



LABELS: tuple[LabelDef, ...] = (
    LabelDef("model", "Served model name (Triton `model`, vLLM `model_name`).",
             otel="gen_ai.request.model"),
    LabelDef("model_version", "Model version (Triton `version`; empty for vLLM).",
             otel="modelserver.model.version"),
    LabelDef("model_namespace", "Triton model namespace (Triton's `namespace`, renamed so it "
             "cannot clash with the Kubernetes `namespace` target label).",
             otel="modelserver.model.namespace"),
    # backend and runtime values are those of the registered sources
    # (fleetwatch.exporters.sources.SOURCES): docs/metrics.md lists them.
    LabelDef("backend", "Server that emitted the series (the source kind's backend).",
             otel="gen_ai.provider.name"),
    LabelDef("runtime", "What executes the model (Triton model config `backend`/`platform`, "
             "or the engine).", otel="modelserver.runtime"),
    LabelDef("dp_rank", "Data-parallel engine index (vLLM `engine` label; `0` before vLLM "
             "0.8.3).", otel="modelserver.dp_rank"),
    LabelDef("gpu_uuid", "GPU UUID (Triton `gpu_uuid`, dcgm-exporter `UUID`/`uuid`).",
             otel="hw.id"),
    LabelDef("outcome", "Whether the request succeeded.", ("success", "error")),
    LabelDef("error_type", "Why a request failed (Triton `reason`, vLLM `finished_reason`).",
             ("rejected", "cancelled", "backend", "internal", "overload", "other"),
             otel="error.type"),
    LabelDef("finish_reason", "vLLM's finish reason of a finished request.",
             ("stop", "length", "abort", "error", "repetition")),
    LabelDef("token_type", "Input (prompt) or output (generated) tokens.", ("input", "output"),
             otel="gen_ai.token.type"),
    LabelDef("state", "Request state inside the server (modelserver_requests_active); SLO "
             "state (fleetwatch_slo_state).", ("running", "waiting", "ok", "regression",
                                               "interference", "gpu_degraded", "overload",
                                               "no_data", "misconfigured"),
             otel="modelserver.request.state"),
    LabelDef("phase", "Processing phase; different backends have different phase sets, "
             "compare within a backend. vLLM's `inference` (its RUNNING phase: from the most "
             "recent scheduling to the last token) spans its `prefill` and `decode`: never "
             "sum vLLM's phases.",
             ("prefill", "decode", "inference", "compute_input", "compute_infer",
              "compute_output"),
             otel="modelserver.phase"),
    LabelDef("cache_tier", "Prefix-cache tier.", ("local", "external"),
             otel="modelserver.cache.tier"),
    LabelDef("adapter", "LoRA adapter a request was served with, by the name it was loaded "
             "under (vLLM `--lora-modules NAME=PATH`, the `model` of API requests for it); "
             "empty for the base model.", otel="modelserver.lora.adapter"),
    LabelDef("draft_position", "Position of a speculated token within its draft, from 0 "
             "(vLLM `spec_decode_num_accepted_tokens_per_pos` `position`)."),
    LabelDef("token_source", "Where the input tokens of a prefill came from: computed by "
             "the engine, read from its local prefix cache, or transferred from an external "
             "KV cache (vLLM `prompt_tokens_by_source` `source`).",
             ("computed", "local_cache", "external_transfer")),
    LabelDef("wait_reason", "Why a waiting request waits (vLLM `num_requests_waiting_by_reason` "
             "`reason`): `capacity` = for scheduling capacity (batch slots, KV cache); "
             "`deferred` = deferred by a transient constraint (LoRA budget, KV transfer).",
             ("capacity", "deferred")),
    LabelDef("sleep_state", "Engine sleep state, a state set: exactly one is 1 (vLLM "
             "`engine_sleep_state`): `awake`; `weights_offloaded` (sleep level 1, weights in "
             "host memory); `discard_all` (sleep level 2, weights discarded).",
             ("awake", "weights_offloaded", "discard_all")),
    LabelDef("engine_version", "Version of the serving engine (vLLM `GET /version`, Triton "
             "server metadata `GET /v2`); empty when the server does not say."),
    LabelDef("quantization", "Weight quantization of the served model (e.g. `fp8`, `awq`, "
             "`none`): what the server reports, else the model registry's `quantization`; "
             "empty when neither says."),
    LabelDef("result", "Response-cache lookup result.", ("hit", "miss")),
    LabelDef("block_state", "KV-cache block accounting (TensorRT-LLM).",
             ("used", "free", "max", "reused")),
    LabelDef("memory_type", "Runtime memory pool (TensorRT-LLM).", ("cpu", "gpu", "pinned")),
    LabelDef("quantile", "Summary quantile (Triton summaries; a 60 s sliding window, never "
             "aggregatable across series)."),
    LabelDef("le", "Histogram bucket upper bound, in the metric's base unit."),
    LabelDef("objective_quantile", "The latency quantile an SLO's objective implies (0.99 "
             "for 99 %) on fleetwatch_slo_band_latency_quantile_seconds (not `quantile`: "
             "Prometheus reserves that label for summaries)."),
    LabelDef("gpu", "GPU index (dcgm-exporter `gpu`)."),
    LabelDef("gpu_model", "GPU product name (dcgm-exporter `modelName`).", otel="hw.model"),
    LabelDef("hostname", "Host name (dcgm-exporter `Hostname`, `hostname` after 4.8.2)."),
    LabelDef("pci_bus_id", "PCI bus id of the GPU (dcgm-exporter)."),
    LabelDef("device", "Device node name, e.g. nvidia0 (dcgm-exporter)."),
    LabelDef("mig_profile", "MIG GPU-instance profile (dcgm-exporter `GPU_I_PROFILE`)."),
    LabelDef("mig_instance", "MIG GPU-instance id (dcgm-exporter `GPU_I_ID`)."),
    LabelDef("pod_name", "Pod using the GPU (dcgm-exporter `pod`; renamed to avoid the "
             "Kubernetes target label)."),
    LabelDef("pod_namespace", "Namespace of that pod (dcgm-exporter `namespace`)."),
    LabelDef("container_name", "Container using the GPU (dcgm-exporter `container`)."),
    LabelDef("team", "Owning team (model registry)."),
    LabelDef("owner", "Owner (model registry)."),
    LabelDef("oncall", "On-call rotation or pager target (model registry)."),
    LabelDef("latency_tier", "Latency tier (model registry), e.g. interactive, batch."),
    LabelDef("target", "Upstream target name from the sidecar configuration."),
    LabelDef("role", "A pool's part in prefill/decode disaggregation: the registry's "
             "deployment role, copied by Prometheus from the pool's pods "
             "(fleetwatch.io/role); absent for a pool serving whole requests.",
             ("prefill", "decode")),
    LabelDef("pool", "Gateway pool the series describes (llm-d EPP `name`: the InferencePool; "
             "the production-stack router has one pool, the empty value)."),
    LabelDef("endpoint", "Engine endpoint behind a gateway (production-stack router `server`, "
             "the engine's URL; llm-d EPP `model_server_endpoint`, formerly "
             "`model_server_pod`)."),
    LabelDef("instances", "Model instances of a model version on one GPU (Triton "
             "`instance_group` count; 1 for a vLLM server), as text."),
    LabelDef("footprint_source", "Where a memory footprint came from (docs/gpus.md): "
             "Triton model statistics `memory_usage`, vLLM `gpu_memory_utilization` × the "
             "GPU's memory, the GPU memory delta at load time, the registry's "
             "`gpu_memory_bytes`, vLLM's KV cache alone (`kv_cache_memory_bytes`, a lower "
             "bound).", ("triton_statistics", "vllm_reservation", "load_delta", "registry",
                         "vllm_kv_cache")),
    LabelDef("resource", "A quota resource (quota file).", ("gpus", "gpu_memory_bytes",
                                                           "instances")),
    LabelDef("slo", "SLO name (SLO file)."),
    LabelDef("metric", "A normalized metric's name (modelserver_*) whose values the SLO "
             "engine refused for an interval."),
    LabelDef("band", "Per-replica concurrency band: its upper bound (\"1\", \"2\", \"4\", …, "
             "\"+Inf\"), or \"all\"."),
    LabelDef("window", "Burn-rate window, e.g. 5m, 1h, 3d."),
    LabelDef("baseline", "Rollout baseline: the model version compared with (the oldest "
             "version the sidecar's SLO engine tracks)."),
    LabelDef("candidate", "Rollout candidate: the model version compared with the baseline."),
    LabelDef("verdict", "Rollout comparison by concurrency band (fleetwatch.rollout).",
             ("better", "same", "worse", "not_enough_data")),
    LabelDef("component", "Autoscaling component.", ("concurrency", "queue_wait", "kv_cache",
                                                     "gpu_memory")),
    LabelDef("reason", "Why a scrape failed.", ("timeout", "connection", "http_status",
                                                 "not_metrics", "empty", "decode", "parse",
                                                 "too_large", "truncated", "internal")),
    LabelDef("origin", "Part of the sidecar's /metrics a dropped family or series came from.",
             ("normalized", "self", "slo", "passthrough")),
    LabelDef("trace_reason", "Why the OTLP trace receiver refused a body (too_large … "
             "unsupported_media_type; unauthorized: no or a wrong bearer token; read_timeout: "
             "the body was not sent in time), refused a span before it touched state "
             "(future, past: a time beyond the allowed skew of the sidecar's clock; "
             "bad_duration: negative, infinite or too long; attribute_too_long; "
             "label_too_long: a model name beyond the label-value bound; too_many_models: a "
             "request of a model beyond traces.max_models) or dropped a trace or span "
             "(evicted: the join buffer was full; expired: no model span within the "
             "timeout; late: a span of a trace already joined; span_overflow: too many "
             "spans in one trace).",
             ("too_large", "too_many_spans", "bad_gzip", "bad_protobuf", "bad_json",
              "unsupported_media_type", "unauthorized", "read_timeout", "future", "past",
              "bad_duration", "attribute_too_long", "label_too_long", "too_many_models",
              "evicted", "expired", "late", "span_overflow")),
    LabelDef("neighbour", "A model co-located on the same GPU (sidecar `placement:`) whose "
             "load rose while this model burned its budget inside its envelope "
             "(fleetwatch_slo_interference)."),
    LabelDef("period", "Before the burn began or during it (interference evidence).",
             ("before", "during")),
    LabelDef("gpu_condition", "Why a GPU is degraded: a slowing NVML clocks-event reason "
             "of dcgm's clock-throttle bitmask, or a new XID error "
             "(fleetwatch.exporters.sources.dcgm.CLOCK_EVENT_REASONS).",
             ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
              "hw_power_brake_slowdown", "xid")),
    LabelDef("field", "A declared configuration field (registry declared:).",
             ("engine_version", "quantization", "model_version", "instance_groups",
              "dynamic_batching")),
    LabelDef("declared", "The declared value of a configuration field, as text."),
    LabelDef("running", "The running value of a configuration field, as text."),
    LabelDef("check", "A model-configuration lint check (fleetwatch lint).",
             ("config_without_backend", "dynamic_batching_llm_backend",
              "latency_no_queue_timeout",
              "latency_gpu_shared", "llm_readiness_below_startup",
              "decoupled_no_first_response_histogram")),
    LabelDef("severity", "How bad a lint finding is.", ("error", "warning")),
    LabelDef("forward_result", "What became of an OTLP body forwarded downstream.",
             ("ok", "error", "dropped")),
)

#: Labels a GPU series may carry (dcgm-exporter's GPU identity and pod mapping).
GPU_LABELS = ("gpu_uuid", "gpu", "gpu_model", "hostname", "pci_bus_id", "device",
              "mig_profile", "mig_instance", "pod_name", "pod_namespace", "container_name")
