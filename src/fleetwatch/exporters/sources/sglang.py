"""SGLang (``sglang:*`` on the server's ``/metrics`` with ``--enable-metrics``) → normalized schema.

Source: ``docs/sources.md`` § SGLang (sgl-project/sglang ``sglang/srt/observability/
metrics_collector.py``, wheel 0.5.23) and the fixtures under
``tests/fixtures/expositions/sglang/`` (v0.5.10.post1; ~0.4.4 with ``engine_type``).
prometheus_client writes the names (counters with ``_total``).

* TTFT, ITL, TPOT, end-to-end and queue-time histograms are in seconds already;
  ``prompt_tokens_histogram``/``generation_tokens_histogram`` are per-request tokens.
* ``prompt_tokens_total``/``generation_tokens_total`` → tokens by type;
  ``cached_tokens_total`` (prompt tokens served from the radix cache) → prefix-cache hits,
  and the prompt tokens → prefix-cache queries (every prompt token is looked up).
* ``num_running_reqs``/``num_queue_reqs`` → running/waiting requests;
  ``token_usage`` (KV-pool tokens in use ÷ pool size, 0–1) → KV-cache usage ratio;
  ``cache_hit_rate`` is a **rate** SGLang computes itself (no hit/query counters behind
  it) → the prefix-cache hit-ratio **gauge**, never fake counters.
* Labels: ``model_name`` → ``model``; ``dp_rank`` kept; ``tp_rank``, ``pp_rank``,
  ``engine_type``, ``is_streaming``, ``cache_source`` dropped (series that differ only by
  them are summed; SGLang reports scheduler gauges from the first rank of a TP group
  [verify on multi-GPU]).

Left unmapped (:data:`SOURCE` ``not_mapped``): throughput and utilization gauges, startup
times, speculative-decoding and HTTP families.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from fleetwatch.exporters.source import HealthProbe, Source
from fleetwatch.exporters.table import Rule, SourceTable

_V = "0.4+ (catalog: 0.5.23)"


def _h(source: str, target: str, *const: tuple[str, str]) -> Rule:
    return Rule(f"sglang:{source}", "histogram", target, const=const, since=_V)


_RULES: tuple[Rule, ...] = (
    _h("time_to_first_token_seconds", "modelserver_time_to_first_token_seconds"),
    _h("inter_token_latency_seconds", "modelserver_inter_token_latency_seconds"),
    _h("request_time_per_output_token_seconds", "modelserver_time_per_output_token_seconds"),
    _h("e2e_request_latency_seconds", "modelserver_request_duration_seconds"),
    _h("queue_time_seconds", "modelserver_queue_duration_seconds"),
    _h("prompt_tokens_histogram", "modelserver_request_tokens", ("token_type", "input")),
    _h("generation_tokens_histogram", "modelserver_request_tokens", ("token_type", "output")),
    Rule("sglang:prompt_tokens_total", "counter", "modelserver_tokens_total",
         const=(("token_type", "input"),), since=_V),
    Rule("sglang:generation_tokens_total", "counter", "modelserver_tokens_total",
         const=(("token_type", "output"),), since=_V),
    Rule("sglang:prompt_tokens_total", "counter", "modelserver_prefix_cache_queries_total",
         const=(("cache_tier", "local"),), since=_V + " (prompt tokens are the lookups)"),
    Rule("sglang:cached_tokens_total", "counter", "modelserver_prefix_cache_hits_total",
         const=(("cache_tier", "local"),), since=_V),
    Rule("sglang:num_running_reqs", "gauge", "modelserver_requests_active",
         const=(("state", "running"),), since=_V),
    Rule("sglang:num_queue_reqs", "gauge", "modelserver_requests_active",
         const=(("state", "waiting"),), since=_V),
    Rule("sglang:token_usage", "gauge", "modelserver_kv_cache_usage_ratio", since=_V),
    Rule("sglang:cache_hit_rate", "gauge", "modelserver_prefix_cache_hit_ratio", since=_V),
)

#: Every series is executed by SGLang itself: runtime="sglang".
RULES: tuple[Rule, ...] = tuple(replace(r, runtime="sglang") for r in _RULES)

TABLE = SourceTable(
    kind="sglang",
    backend="sglang",
    rules=RULES,
    label_renames=MappingProxyType({"model_name": "model"}),
    description="SGLang server (--enable-metrics), 0.4–0.5",
)


def _claims(name: str, _line: str) -> bool:
    return name.startswith("sglang:")


_NOT_MAPPED = (
    ("sglang:gen_throughput", "a tokens/s gauge SGLang averages itself; rate() of "
     "modelserver_tokens_total is the schema's throughput"),
    ("sglang:num_requests_total", "counts requests without an outcome (aborts are a separate "
     "family); modelserver_requests_total needs one"),
    ("sglang:utilization", "engine-internal, no schema family"),
    ("sglang:num_used_tokens", "KV-pool tokens in use; the usage ratio is mapped"),
    ("sglang:max_total_num_tokens", "KV-pool size in tokens; the usage ratio is mapped"),
    ("sglang:http_requests_active", "HTTP-layer gauge without a model label"),
)

SOURCE = Source(
    kind="sglang",
    table=TABLE,
    description="SGLang server (sglang:*, --enable-metrics)",
    claims=_claims,
    default_port=30000,
    detect_priority=20,
    readiness=HealthProbe("/health"),
    runtimes=("sglang",),
    llm_runtimes=("sglang",),
    openai_server=True,
    component_names=(("sglang", "SGLang"),),
    not_mapped=_NOT_MAPPED,
)
