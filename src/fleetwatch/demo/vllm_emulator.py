"""vLLM-format emulator for the fleetwatch demo.

Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

A vLLM engine cannot run on the CPU-only demo machine, so this module serves an HTTP
``/metrics`` endpoint whose exposition has the same metric families, types, label names and
histogram buckets as vLLM 0.33.0's ``PrometheusStatLogger``
(``vllm/v1/metrics/loggers.py``; real reference exposition:
``tests/fixtures/expositions/vllm/v0.33.0-statlogger-cpu-generated.prom``). The values come
from a small, deterministic, discrete-event model of one vLLM V1 engine (continuous batching,
chunked prefill, a KV cache measured in tokens, recompute-style preemption, prefix-cache hits,
client aborts). Nothing here loads a model or generates text.

The request-level intervals are recorded the way ``vllm/v1/metrics/stats.py`` records them:

* TTFT = first-token time - arrival time (one observation per request that produced a token);
* ITL = one observation per token gap after the first token (token-weighted);
* request TPOT = decode time / (generated tokens - 1), one observation per finished request
  that generated more than one token;
* e2e = finish time - arrival time (every finished request, aborts included);
* queue = first SCHEDULED - QUEUED; prefill = first token - first SCHEDULED;
  decode = last token - first token; inference = last token - first SCHEDULED
  (preemptions after the first SCHEDULED fall inside prefill/decode/inference).

Units: simulated time is in seconds, token quantities in tokens, rates in requests/second,
KV-cache usage is a 0-1 ratio (despite the vLLM name ``..._perc``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace

from aiohttp import web
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder

__all__ = [
    "DISCLAIMER",
    "E2E_REQUEST_LATENCY_BUCKETS",
    "EMULATED_FAMILIES",
    "EMULATED_VLLM_VERSION",
    "FINISHED_REASONS",
    "INTER_TOKEN_LATENCY_BUCKETS",
    "ITERATION_TOKENS_BUCKETS",
    "REQUEST_NUM_PREEMPTIONS_BUCKETS",
    "REQUEST_PARAMS_N_BUCKETS",
    "TIME_TO_FIRST_TOKEN_BUCKETS",
    "EmulatorConfig",
    "EmulatorServerHandle",
    "EmulatorStats",
    "VllmEmulator",
    "build_1_2_5_buckets",
    "main",
    "make_app",
    "run_in_thread",
    "serve",
]

log = logging.getLogger(__name__)

DISCLAIMER = "Test double: emulates vLLM 0.33's /metrics format; it is not vLLM."
EMULATED_VLLM_VERSION = "0.33.0"

# --- Histogram bucket families (vllm/v1/metrics/buckets.py in 0.33.0; catalog §2.2) -----------
#: ``time_to_first_token`` family, seconds.
TIME_TO_FIRST_TOKEN_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
#: ``inter_token_latency`` family (ITL and per-request TPOT), seconds.
INTER_TOKEN_LATENCY_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
#: ``request_latency`` family (e2e, queue, prefill, decode, inference), seconds.
E2E_REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
#: ``iteration_tokens`` family, tokens per engine step.
ITERATION_TOKENS_BUCKETS: tuple[int, ...] = (
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
)  # fmt: skip
#: ``request_params_n`` family (the ``n`` sampling parameter).
REQUEST_PARAMS_N_BUCKETS: tuple[int, ...] = (1, 2, 5, 10, 20)
#: ``request_num_preemptions`` family (preemptions per request).
REQUEST_NUM_PREEMPTIONS_BUCKETS: tuple[int, ...] = (1, 2, 3, 4, 5, 10, 20)

#: ``finished_reason`` values of ``vllm:request_success`` (vllm/v1/engine FINISH_REASON_STRINGS).
FINISHED_REASONS: tuple[str, ...] = ("stop", "length", "abort", "error", "repetition")
_PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
_CACHED_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
_WAITING_REASONS = ("capacity", "deferred")
_SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")
_ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")

#: Every vLLM family this emulator exposes: registered (= parsed) name -> Prometheus type.
#: Counters appear on the wire with a ``_total`` suffix (prometheus_client adds it), and every
#: counter/histogram also gets a ``<name>_created`` gauge in the text format, exactly as in vLLM.
#: ``tests/test_vllm_emulator.py`` checks each entry against the real vLLM 0.33.0 fixture.
EMULATED_FAMILIES: dict[str, str] = {
    "vllm:estimated_flops_per_gpu": "counter",
    "vllm:estimated_read_bytes_per_gpu": "counter",
    "vllm:estimated_write_bytes_per_gpu": "counter",
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:num_requests_waiting_by_reason": "gauge",
    "vllm:engine_sleep_state": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:external_prefix_cache_queries": "counter",
    "vllm:external_prefix_cache_hits": "counter",
    "vllm:mm_cache_queries": "counter",
    "vllm:mm_cache_hits": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:prompt_tokens_by_source": "counter",
    "vllm:prompt_tokens_cached": "counter",
    "vllm:prompt_tokens_cached_by_source": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:admission_rejections": "counter",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
    "vllm:iteration_tokens_total": "histogram",
    "vllm:request_max_num_generation_tokens": "histogram",
    "vllm:request_params_n": "histogram",
    "vllm:request_params_max_tokens": "histogram",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_num_preemptions": "histogram",
    "vllm:request_prefill_kv_computed_tokens": "histogram",
    "vllm:cache_config_info": "gauge",
}


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """Return the 1-2-5 series up to ``max_value`` (tokens), like vLLM's ``build_1_2_5_buckets``.

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
    Example: ``build_1_2_5_buckets(4096) == [1, 2, 5, 10, ..., 1000, 2000]``.
    """
    buckets: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return buckets
            buckets.append(value)
        exponent += 1


@dataclass(frozen=True)
class EmulatorConfig:
    """Workload, engine and timing parameters of the simulated engine.

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

    Units are in the field names: ``*_s`` seconds, ``*_rps`` requests/second,
    ``*_tokens`` tokens, ``*_bytes`` bytes. One engine step (a forward pass over the batch)
    takes ``step_base_s + step_per_seq_s * scheduled_requests
    + prefill_per_token_s * prefill_tokens + kv_read_per_token_s * kv_tokens_held`` seconds, so
    the per-token decode time (ITL) grows with the number of running requests.
    """

    # identity (label values)
    model_name: str = "emulated-llm"
    engine_index: int = 0  # data-parallel engine index -> label engine="0"
    seed: int = 0
    # workload
    arrival_rate_rps: float = 2.0  # Poisson arrivals, requests/s
    prompt_tokens_mean: float = 400.0  # log-normal, tokens
    prompt_tokens_sigma: float = 0.6  # log-normal shape (dimensionless)
    output_tokens_mean: float = 160.0  # natural (EOS) output length, log-normal, tokens
    output_tokens_sigma: float = 0.8
    max_tokens_choices: tuple[int, ...] = (256, 512, 1024)  # request max_tokens parameter
    abort_fraction: float = 0.03  # share of requests the client aborts while streaming
    client_timeout_s: float | None = 120.0  # a waiting request older than this is aborted
    prefix_hit_ratio: float = 0.3  # mean share of prompt tokens served by the prefix cache
    # engine (vLLM engine arguments of the same names)
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    max_model_len: int = 4096
    block_size: int = 16
    kv_cache_capacity_tokens: int = 32768  # num_gpu_blocks = capacity // block_size
    max_num_queued_reqs: int | None = None  # admission limit; None = unlimited
    gpu_memory_utilization: float = 0.9
    # step-time model, seconds
    step_base_s: float = 0.012
    step_per_seq_s: float = 0.0006
    prefill_per_token_s: float = 0.0001
    kv_read_per_token_s: float = 2e-7
    # --enable-mfu-metrics style estimates (vllm:estimated_*_per_gpu)
    model_params: float = 8e9
    weight_bytes_per_param: float = 2.0
    kv_bytes_per_token: int = 131072

    def __post_init__(self) -> None:
        positive = (
            "prompt_tokens_mean", "output_tokens_mean", "max_num_seqs", "max_num_batched_tokens",
            "max_model_len", "block_size", "kv_cache_capacity_tokens", "step_base_s",
        )  # fmt: skip
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        if self.arrival_rate_rps < 0:
            raise ValueError("arrival_rate_rps must be >= 0")
        if not 0.0 <= self.abort_fraction <= 1.0:
            raise ValueError("abort_fraction must be within [0, 1]")
        if not 0.0 <= self.prefix_hit_ratio <= 1.0:
            raise ValueError("prefix_hit_ratio must be within [0, 1]")
        if self.kv_cache_capacity_tokens < self.max_model_len:
            raise ValueError(
                "kv_cache_capacity_tokens must hold at least one max_model_len request"
            )
        if not self.max_tokens_choices or min(self.max_tokens_choices) < 1:
            raise ValueError("max_tokens_choices must be non-empty positive token counts")
        if self.max_model_len < 2:
            raise ValueError("max_model_len must be >= 2")


@dataclass
class EmulatorStats:
    """Plain-Python tallies of the simulation, for tests and the demo (not exported).

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
    Counts are requests unless the name says tokens; ``sim_time_s`` is simulated seconds.
    """

    sim_time_s: float = 0.0
    arrived: int = 0
    rejected: int = 0
    first_scheduled: int = 0
    first_tokens: int = 0
    finished: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISHED_REASONS, 0))
    preemptions: int = 0
    engine_steps: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    max_running_seen: int = 0
    max_kv_usage_seen: float = 0.0


@dataclass(eq=False)
class _Request:
    rid: int
    arrival_ts: float
    prompt_len: int
    max_tokens: int
    target_len: int  # generated tokens at which the request finishes
    finish_reason: str  # reason when target_len is reached ("stop" or "length")
    abort_after: int | None  # client aborts after this many generated tokens
    cached_prompt_tokens: int  # prefix-cache hit (full blocks, < prompt_len)
    num_generated: int = 0
    num_computed: int = 0  # tokens whose KV is computed (or allocated for the running step)
    kv_tokens: int = 0  # KV-cache tokens held
    scheduled_ts: float = 0.0  # first SCHEDULED (0 = never), vLLM "ignore preemptions"
    first_token_ts: float = 0.0
    last_token_ts: float = 0.0
    num_preemptions: int = 0
    seen_by_scheduler: bool = False
    finished: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_len + self.num_generated


@dataclass
class _Step:
    start_ts: float
    end_ts: float
    scheduled: list[tuple[_Request, int]]
    tokens: int


def _lognormal_int(rng: random.Random, mean: float, sigma: float, lo: int, hi: int) -> int:
    mu = math.log(mean) - sigma * sigma / 2.0
    return max(lo, min(hi, round(rng.lognormvariate(mu, sigma))))


class VllmEmulator:
    """Simulated vLLM V1 engine that exports vLLM 0.33.0-shaped Prometheus metrics.

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

    Uses its own :class:`prometheus_client.CollectorRegistry` (never the global one). Metric
    names, types, label names (``model_name``, ``engine``; plus ``finished_reason``, ``source``,
    ``reason``, ``sleep_state`` where vLLM has them), HELP strings and bucket boundaries match
    vLLM 0.33.0; see :data:`EMULATED_FAMILIES`. Call :meth:`step` to advance simulated time
    (seconds); it is deterministic for a given :class:`EmulatorConfig` (seeded
    :class:`random.Random`) and thread-safe with respect to :meth:`exposition`.
    """

    def __init__(
        self,
        config: EmulatorConfig | None = None,
        *,
        registry: CollectorRegistry | None = None,
        include_process_metrics: bool = True,
        **overrides: object,
    ) -> None:
        """Build the engine model and register the vLLM families.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

        ``overrides`` replace fields of ``config`` (e.g. ``arrival_rate_rps=8.0``).
        ``include_process_metrics`` adds the ``process_*``/``python_*`` collectors that a
        single-process vLLM server also exposes (they describe *this* Python process).
        """
        cfg = config or EmulatorConfig()
        if overrides:
            known = {f.name for f in fields(EmulatorConfig)}
            unknown = sorted(set(overrides) - known)
            if unknown:
                raise TypeError(f"unknown EmulatorConfig field(s): {', '.join(unknown)}")
            cfg = replace(cfg, **overrides)  # type: ignore[arg-type]
        self._cfg = cfg
        self._rng = random.Random(cfg.seed)
        self._lock = threading.RLock()
        self._registry = registry if registry is not None else CollectorRegistry()
        if include_process_metrics:
            GCCollector(registry=self._registry)
            PlatformCollector(registry=self._registry)
            ProcessCollector(registry=self._registry)

        self._now = 0.0  # simulated time, s
        self._engine_ts = 0.0  # time the engine becomes free, s
        self._arrival_rate = cfg.arrival_rate_rps
        self._next_arrival_ts = self._draw_next_arrival(0.0)
        self._next_rid = 0
        self._waiting: deque[_Request] = deque()
        self._running: list[_Request] = []
        self._kv_used = 0  # tokens
        self._inflight: _Step | None = None
        self._stats = EmulatorStats()
        self._request_token_buckets = build_1_2_5_buckets(cfg.max_model_len)
        self._define_metrics()

    # ------------------------------------------------------------------ metric definitions
    def _define_metrics(self) -> None:
        cfg = self._cfg
        reg = self._registry
        labels = ["model_name", "engine"]
        lv = (cfg.model_name, str(cfg.engine_index))

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=reg)

        def gauge(name: str, doc: str, extra: list[str] | None = None) -> Gauge:
            return Gauge(name, doc, labels + (extra or []), registry=reg)

        def hist(name: str, doc: str, buckets: Iterable[float]) -> Histogram:
            return Histogram(name, doc, labels, buckets=list(buckets), registry=reg)

        mfu = "(for Model Flops Utilization calculations)."
        self._c_flops = counter(
            "vllm:estimated_flops_per_gpu",
            f"Estimated number of floating point operations per GPU {mfu}",
        ).labels(*lv)
        self._c_read_bytes = counter(
            "vllm:estimated_read_bytes_per_gpu",
            f"Estimated number of bytes read from memory per GPU {mfu}",
        ).labels(*lv)
        self._c_write_bytes = counter(
            "vllm:estimated_write_bytes_per_gpu",
            f"Estimated number of bytes written to memory per GPU {mfu}",
        ).labels(*lv)
        self._g_running = gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        ).labels(*lv)
        self._g_waiting = gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        ).labels(*lv)
        waiting_by_reason = gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
            "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
            "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
            ["reason"],
        )
        self._g_waiting_reason = {r: waiting_by_reason.labels(*lv, r) for r in _WAITING_REASONS}
        sleep = gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
            "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
            "level 2.",
            ["sleep_state"],
        )
        for state in _SLEEP_STATES:
            sleep.labels(*lv, state).set(1 if state == "awake" else 0)
        self._g_kv_usage = gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        ).labels(*lv)
        self._c_prefix_queries = counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        ).labels(*lv)
        self._c_prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        ).labels(*lv)
        xfer = "from KV connector cross-instance cache sharing"
        counter(
            "vllm:external_prefix_cache_queries",
            f"External prefix cache queries {xfer}, in terms of number of queried tokens.",
        ).labels(*lv)
        counter(
            "vllm:external_prefix_cache_hits",
            f"External prefix cache hits {xfer}, in terms of number of cached tokens.",
        ).labels(*lv)
        counter(
            "vllm:mm_cache_queries",
            "Multi-modal cache queries, in terms of number of queried items.",
        ).labels(*lv)
        counter(
            "vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items."
        ).labels(*lv)
        self._c_preemptions = counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        ).labels(*lv)
        self._c_prompt_tokens = counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed."
        ).labels(*lv)
        by_source = Counter(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            [*labels, "source"],
            registry=reg,
        )
        self._c_prompt_by_source = {s: by_source.labels(*lv, s) for s in _PROMPT_SOURCES}
        self._c_prompt_cached = counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external)."
        ).labels(*lv)
        cached_by_source = Counter(
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), "
            "host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
            "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
            "vllm:external_prefix_cache_hits.",
            [*labels, "source"],
            registry=reg,
        )
        self._c_cached_by_source = {s: cached_by_source.labels(*lv, s) for s in _CACHED_SOURCES}
        self._c_generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        ).labels(*lv)
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*labels, "finished_reason"],
            registry=reg,
        )
        self._c_success = {r: success.labels(*lv, r) for r in FINISHED_REASONS}
        rejections = Counter(  # frontend metric: no engine label in vLLM 0.33
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            ["model_name", "reason"],
            registry=reg,
        )
        self._c_rejections = {r: rejections.labels(cfg.model_name, r) for r in _ADMISSION_REASONS}

        tok = self._request_token_buckets
        self._h_prompt_tokens = hist(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok
        ).labels(*lv)
        self._h_generation_tokens = hist(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", tok
        ).labels(*lv)
        self._h_iteration_tokens = hist(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            ITERATION_TOKENS_BUCKETS,
        ).labels(*lv)
        self._h_max_num_generation_tokens = hist(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            tok,
        ).labels(*lv)
        self._h_params_n = hist(
            "vllm:request_params_n",
            "Histogram of the n request parameter.",
            REQUEST_PARAMS_N_BUCKETS,
        ).labels(*lv)
        self._h_params_max_tokens = hist(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            tok,
        ).labels(*lv)
        self._h_ttft = hist(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TIME_TO_FIRST_TOKEN_BUCKETS,
        ).labels(*lv)
        self._h_itl = hist(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            INTER_TOKEN_LATENCY_BUCKETS,
        ).labels(*lv)
        self._h_tpot = hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            INTER_TOKEN_LATENCY_BUCKETS,
        ).labels(*lv)
        lat = E2E_REQUEST_LATENCY_BUCKETS
        self._h_e2e = hist(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", lat
        ).labels(*lv)
        self._h_queue = hist(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            lat,
        ).labels(*lv)
        self._h_inference = hist(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            lat,
        ).labels(*lv)
        self._h_prefill = hist(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            lat,
        ).labels(*lv)
        self._h_decode = hist(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            lat,
        ).labels(*lv)
        self._h_num_preemptions = hist(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            REQUEST_NUM_PREEMPTIONS_BUCKETS,
        ).labels(*lv)
        self._h_prefill_kv_computed = hist(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            tok,
        ).labels(*lv)

        info = self._cache_config_labels()
        Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            list(info),
            registry=reg,
        ).labels(**info).set(1)
        self._update_gauges()

    def _cache_config_labels(self) -> dict[str, str]:
        """CacheConfig.metrics_info() of vLLM 0.33.0 (+ engine), with this emulator's values."""
        cfg = self._cfg
        return {
            "_block_size_resolved": "True",
            "block_size": str(cfg.block_size),
            "cache_dtype": "auto",
            "cache_hit_alignment_tokens": "None",
            "effective_attention_block_size": "None",
            "enable_mamba_shared_prefix_checkpoint": "False",
            "enable_prefix_caching": str(cfg.prefix_hit_ratio > 0),
            "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
            "hash_block_size": "None",
            "is_attention_free": "False",
            "kv_cache_dtype_skip_layers": "[]",
            "kv_cache_layout": "None",
            "kv_cache_max_concurrency": "None",
            "kv_cache_memory_bytes": "None",
            "kv_cache_size_tokens": "None",
            "kv_offloading_backend": "native",
            "kv_offloading_size": "None",
            "kv_sharing_fast_prefill": "False",
            "mamba_block_size": "None",
            "mamba_cache_dtype": "auto",
            "mamba_cache_mode": "none",
            "mamba_page_size_padded": "None",
            "mamba_ssm_cache_dtype": "auto",
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(cfg.kv_cache_capacity_tokens // cfg.block_size),
            "num_gpu_blocks_override": "None",
            "prefix_cache_retention_interval": "0",
            "prefix_caching_hash_algo": "sha256",
            "prefix_match_unit": "None",
            "replayssm_buffer_len": "16",
            "simple_cpu_offload_num_blocks": "None",
            "skip_page_size_padded": "None",
            "sliding_window": "None",
            "swa_bounded_replay": "True",
            "use_kda_recoverssm": "False",
            "use_replayssm": "False",
            "user_specified_block_size": "False",
            "engine": str(cfg.engine_index),
        }

    # ------------------------------------------------------------------ public API
    @property
    def config(self) -> EmulatorConfig:
        """The effective configuration.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        return self._cfg

    @property
    def registry(self) -> CollectorRegistry:
        """This emulator's own Prometheus registry.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        return self._registry

    @property
    def now(self) -> float:
        """Simulated time in seconds since the emulator was created.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        return self._now

    @property
    def arrival_rate_rps(self) -> float:
        """Current Poisson arrival rate, requests/second.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        return self._arrival_rate

    @property
    def num_running(self) -> int:
        """Requests currently in the running batch (vllm:num_requests_running).

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        """Requests currently waiting (vllm:num_requests_waiting).

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        return len(self._waiting)

    @property
    def kv_cache_usage(self) -> float:
        """KV-cache tokens held / capacity, a 0-1 ratio (vllm:kv_cache_usage_perc).

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        return self._kv_used / self._cfg.kv_cache_capacity_tokens

    @property
    def stats(self) -> EmulatorStats:
        """A copy of the plain-Python simulation tallies.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        with self._lock:
            return replace(self._stats, finished=dict(self._stats.finished))

    def set_arrival_rate(self, rps: float) -> None:
        """Change the Poisson arrival rate (requests/second) from the current simulated time on.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        if rps < 0:
            raise ValueError("arrival rate must be >= 0")
        with self._lock:
            self._arrival_rate = float(rps)
            self._next_arrival_ts = self._draw_next_arrival(self._now)

    def step(self, dt_seconds: float) -> None:
        """Advance simulated time by ``dt_seconds`` seconds and record metrics as vLLM does.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

        Runs every engine step that completes within the interval; a step that would end
        after it stays in flight until a later call. Cost is O(engine steps x batch size).
        """
        if dt_seconds < 0:
            raise ValueError("dt_seconds must be >= 0")
        with self._lock:
            target = self._now + dt_seconds
            self._advance(target)
            self._now = target
            self._enqueue_arrivals(target)
            self._expire_waiting(target)
            self._update_gauges()
            self._stats.sim_time_s = target

    def run(self, duration_s: float, dt_s: float = 0.1) -> None:
        """Call :meth:`step` repeatedly for ``duration_s`` simulated seconds (``dt_s`` each).

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        if dt_s <= 0:
            raise ValueError("dt_s must be > 0")
        n = max(0, round(duration_s / dt_s))
        for _ in range(n):
            self.step(dt_s)

    def exposition(self, accept: str = "", names: Iterable[str] | None = None) -> tuple[bytes, str]:
        """Render ``/metrics``: ``(body, content_type)`` negotiated from an ``Accept`` header.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

        Uses ``prometheus_client.exposition.choose_encoder`` like vLLM's ``make_asgi_app``:
        text format 0.0.4 by default, OpenMetrics 1.0.0 when asked (whose sample lines spell
        ``vllm_...`` while HELP/TYPE keep ``vllm:...``, client_python issue 1177).
        ``names`` restricts the output like ``?name[]=`` does.
        """
        encoder, content_type = choose_encoder(accept)
        with self._lock:
            registry = self._registry
            wanted = list(names or [])
            if wanted:
                registry = registry.restricted_registry(wanted)
            return encoder(registry), content_type

    # ------------------------------------------------------------------ simulation internals
    def _draw_next_arrival(self, from_ts: float) -> float:
        if self._arrival_rate <= 0:
            return math.inf
        return from_ts + self._rng.expovariate(self._arrival_rate)

    def _advance(self, target: float) -> None:
        while True:
            if self._inflight is not None:
                if self._inflight.end_ts > target:
                    return
                self._complete_step(self._inflight)
                self._inflight = None
            t = self._engine_ts
            self._enqueue_arrivals(t)
            self._expire_waiting(t)
            if not self._running and not self._waiting:
                nxt = self._next_arrival_ts
                if nxt > target:
                    self._engine_ts = max(self._engine_ts, target)
                    return
                self._engine_ts = nxt
                continue
            step = self._schedule(t)
            if step is None:  # nothing schedulable (defensive; see _schedule): idle one step
                self._engine_ts = t + self._cfg.step_base_s
                if self._engine_ts > target:
                    return
                continue
            self._inflight = step
            self._engine_ts = step.end_ts

    def _enqueue_arrivals(self, t: float) -> None:
        cfg = self._cfg
        rng = self._rng
        while self._next_arrival_ts <= t:
            arrival = self._next_arrival_ts
            self._next_arrival_ts = self._draw_next_arrival(arrival)
            self._stats.arrived += 1
            prompt_len = _lognormal_int(
                rng, cfg.prompt_tokens_mean, cfg.prompt_tokens_sigma, 1, cfg.max_model_len - 1
            )
            max_tokens = min(rng.choice(cfg.max_tokens_choices), cfg.max_model_len - prompt_len)
            natural = _lognormal_int(
                rng, cfg.output_tokens_mean, cfg.output_tokens_sigma, 1, cfg.max_model_len
            )
            if natural >= max_tokens:
                target_len, reason = max_tokens, "length"
            else:
                target_len, reason = natural, "stop"
            abort_after = None
            if target_len > 1 and rng.random() < cfg.abort_fraction:
                abort_after = rng.randint(1, target_len - 1)
            hit_frac = min(1.0, rng.random() * 2.0 * cfg.prefix_hit_ratio)
            cached = int(prompt_len * hit_frac) // cfg.block_size * cfg.block_size
            cached = min(cached, prompt_len - 1)  # vLLM always recomputes >= 1 prompt token
            if (
                cfg.max_num_queued_reqs is not None
                and len(self._waiting) >= cfg.max_num_queued_reqs
            ):
                self._c_rejections["max_num_queued_reqs"].inc()
                self._stats.rejected += 1
                continue
            self._waiting.append(
                _Request(
                    rid=self._next_rid,
                    arrival_ts=arrival,
                    prompt_len=prompt_len,
                    max_tokens=max_tokens,
                    target_len=target_len,
                    finish_reason=reason,
                    abort_after=abort_after,
                    cached_prompt_tokens=cached,
                )
            )
            self._next_rid += 1

    def _expire_waiting(self, t: float) -> None:
        timeout = self._cfg.client_timeout_s
        if timeout is None:
            return
        waiting = self._waiting
        while waiting and t - waiting[0].arrival_ts >= timeout:
            req = waiting.popleft()
            self._finish(req, "abort", req.arrival_ts + timeout)  # the client's own deadline

    def _preempt(self, req: _Request) -> None:
        # vLLM V1 recompute preemption: free the KV cache, reset progress, requeue at the front.
        self._kv_used -= req.kv_tokens
        req.kv_tokens = 0
        req.num_computed = 0
        req.num_preemptions += 1
        self._waiting.appendleft(req)
        self._c_preemptions.inc()
        self._stats.preemptions += 1

    def _schedule(self, t: float) -> _Step | None:
        cfg = self._cfg
        budget = cfg.max_num_batched_tokens
        kv_free = cfg.kv_cache_capacity_tokens - self._kv_used
        running = self._running
        scheduled: list[tuple[_Request, int]] = []
        prefill_tokens = 0
        preempted = False

        # 1) RUNNING requests first (decode = 1 token; unfinished prefill = next chunk).
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            n = min(req.total_tokens - req.num_computed, budget)
            while n > kv_free:  # no free KV: preempt the lowest-priority (last) request
                victim = running.pop()
                kv_free += victim.kv_tokens
                self._preempt(victim)
                preempted = True
                if victim is req:
                    n = 0
                    break
            if n == 0:
                break
            kv_free -= n
            req.kv_tokens += n
            self._kv_used += n
            if req.num_generated == 0 or req.total_tokens - req.num_computed > 1:
                prefill_tokens += n
            scheduled.append((req, n))
            budget -= n
            i += 1

        # 2) WAITING requests (FCFS), only if nothing was preempted in this step (vLLM V1).
        waiting = self._waiting
        while not preempted and waiting and budget > 0 and len(running) < cfg.max_num_seqs:
            req = waiting[0]
            start = min(req.cached_prompt_tokens, req.total_tokens - 1)
            n = min(req.total_tokens - start, budget)
            if start + n > kv_free:
                break
            waiting.popleft()
            if not req.seen_by_scheduler:  # prefix-cache stats count new requests only
                req.seen_by_scheduler = True
                self._c_prefix_queries.inc(req.prompt_len)
                self._c_prefix_hits.inc(req.cached_prompt_tokens)
                self._c_cached_by_source["device"].inc(req.cached_prompt_tokens)
                self._stats.first_scheduled += 1
            if req.scheduled_ts == 0.0:  # first SCHEDULED event (t > 0: arrivals are > 0)
                req.scheduled_ts = t
            req.num_computed = start
            req.kv_tokens = start + n
            kv_free -= start + n
            self._kv_used += start + n
            prefill_tokens += n
            running.append(req)
            scheduled.append((req, n))
            budget -= n

        if not scheduled:
            return None
        tokens = sum(n for _, n in scheduled)
        duration = (
            cfg.step_base_s
            + cfg.step_per_seq_s * len(scheduled)
            + cfg.prefill_per_token_s * prefill_tokens
            + cfg.kv_read_per_token_s * self._kv_used
        )
        # --enable-mfu-metrics style estimates: 2*params FLOPs per token, weights + KV reads.
        self._c_flops.inc(2.0 * cfg.model_params * tokens)
        self._c_read_bytes.inc(
            cfg.model_params * cfg.weight_bytes_per_param + cfg.kv_bytes_per_token * self._kv_used
        )
        self._c_write_bytes.inc(cfg.kv_bytes_per_token * tokens)
        n_running = len(running)
        if n_running > self._stats.max_running_seen:
            self._stats.max_running_seen = n_running
        usage = self._kv_used / cfg.kv_cache_capacity_tokens
        if usage > self._stats.max_kv_usage_seen:
            self._stats.max_kv_usage_seen = usage
        return _Step(start_ts=t, end_ts=t + duration, scheduled=scheduled, tokens=tokens)

    def _complete_step(self, step: _Step) -> None:
        ts = step.end_ts
        prompt_tokens = 0
        gen_tokens = 0
        any_finished = False
        itl_obs = self._h_itl.observe
        for req, n in step.scheduled:
            req.num_computed += n
            if req.num_computed < req.total_tokens:
                continue  # partial (chunked) prefill: no token sampled yet
            req.num_generated += 1
            gen_tokens += 1
            if req.first_token_ts == 0.0:  # is_prefilling in the output processor
                prompt_tokens += req.prompt_len
                self._record_prompt(req)
                self._h_ttft.observe(ts - req.arrival_ts)
                req.first_token_ts = ts
                self._stats.first_tokens += 1
            else:
                itl_obs(ts - req.last_token_ts)
            req.last_token_ts = ts
            if req.num_generated >= req.target_len:
                self._finish(req, req.finish_reason, ts)
                any_finished = True
            elif req.abort_after is not None and req.num_generated >= req.abort_after:
                self._finish(req, "abort", ts)
                any_finished = True
        if any_finished:
            self._running = [r for r in self._running if not r.finished]
        self._c_prompt_tokens.inc(prompt_tokens)
        self._c_generation_tokens.inc(gen_tokens)
        self._h_iteration_tokens.observe(prompt_tokens + gen_tokens)
        self._stats.engine_steps += 1
        self._stats.prompt_tokens += prompt_tokens
        self._stats.generation_tokens += gen_tokens

    def _record_prompt(self, req: _Request) -> None:
        # PromptTokenStats.update_from_output (vllm/v1/metrics/stats.py)
        cached = req.cached_prompt_tokens
        recomputed = 1 if cached + 1 == req.prompt_len else 0
        self._c_prompt_by_source["local_compute"].inc(req.prompt_len - cached)
        self._c_prompt_by_source["local_cache_hit"].inc(cached + recomputed)
        self._c_prompt_cached.inc(cached)

    def _finish(self, req: _Request, reason: str, ts: float) -> None:
        req.finished = True
        self._kv_used -= req.kv_tokens
        req.kv_tokens = 0
        self._stats.finished[reason] += 1
        # PrometheusStatLogger.record() for one FinishedRequestStats
        self._c_success[reason].inc()
        self._h_e2e.observe(ts - req.arrival_ts)
        if req.scheduled_ts > 0.0:
            self._h_queue.observe(req.scheduled_ts - req.arrival_ts)  # QUEUED == arrival here
            if req.first_token_ts > 0.0:
                self._h_prefill.observe(req.first_token_ts - req.scheduled_ts)
                decode = req.last_token_ts - req.first_token_ts
                self._h_decode.observe(decode)
                self._h_inference.observe(req.last_token_ts - req.scheduled_ts)
                if req.num_generated > 1:
                    self._h_tpot.observe(decode / (req.num_generated - 1))
        self._h_prefill_kv_computed.observe(req.prompt_len - req.cached_prompt_tokens)
        self._h_prompt_tokens.observe(req.prompt_len)
        self._h_generation_tokens.observe(req.num_generated)
        self._h_params_max_tokens.observe(req.max_tokens)
        self._h_max_num_generation_tokens.observe(req.num_generated)  # n == 1
        self._h_params_n.observe(1)
        self._h_num_preemptions.observe(req.num_preemptions)

    def _update_gauges(self) -> None:
        self._g_running.set(len(self._running))
        self._g_waiting.set(len(self._waiting))
        self._g_waiting_reason["capacity"].set(len(self._waiting))
        self._g_waiting_reason["deferred"].set(0)
        self._g_kv_usage.set(self._kv_used / self._cfg.kv_cache_capacity_tokens)


# ---------------------------------------------------------------------- HTTP server
_TICKER_KEY: web.AppKey[asyncio.Task[None]] = web.AppKey("vllm_emulator_ticker", asyncio.Task)
_EMULATOR_KEY: web.AppKey[VllmEmulator] = web.AppKey("vllm_emulator", VllmEmulator)


async def _tick_forever(
    emulator: VllmEmulator, tick_s: float, time_scale: float, max_catch_up_s: float
) -> None:
    last = time.monotonic()
    while True:
        await asyncio.sleep(tick_s)
        now = time.monotonic()
        elapsed = min(now - last, max_catch_up_s)
        last = now
        try:
            emulator.step(elapsed * time_scale)
        except Exception:  # keep serving /metrics even if the model misbehaves
            log.exception("vLLM emulator step failed")


def make_app(
    emulator: VllmEmulator,
    *,
    tick_s: float | None = 0.1,
    time_scale: float = 1.0,
    max_catch_up_s: float = 1.0,
) -> web.Application:
    """aiohttp app serving ``GET /metrics`` and ``GET /health`` for ``emulator``.

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

    While the app runs, a background task advances the simulation every ``tick_s`` seconds of
    wall-clock time by the elapsed time (capped at ``max_catch_up_s`` s) x ``time_scale``.
    ``tick_s=None`` disables the ticker (the caller drives :meth:`VllmEmulator.step`).
    ``/metrics`` negotiates text 0.0.4 / OpenMetrics from ``Accept``, honours
    ``Accept-Encoding: gzip`` and ``?name[]=``; ``/health`` returns 200 with an empty body.
    """
    if tick_s is not None and tick_s <= 0:
        raise ValueError("tick_s must be > 0 or None")

    async def metrics(request: web.Request) -> web.Response:
        emu = request.app[_EMULATOR_KEY]
        body, content_type = emu.exposition(
            request.headers.get("Accept", ""), request.query.getall("name[]", [])
        )
        headers = {"Content-Type": content_type}
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    async def health(_request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def ticker_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        if tick_s is not None:
            app[_TICKER_KEY] = asyncio.create_task(
                _tick_forever(app[_EMULATOR_KEY], tick_s, time_scale, max_catch_up_s)
            )
        yield
        if tick_s is not None:
            task = app[_TICKER_KEY]
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = web.Application()
    app[_EMULATOR_KEY] = emulator
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    app.cleanup_ctx.append(ticker_ctx)
    return app


async def _serve(
    host: str,
    port: int,
    emulator: VllmEmulator,
    *,
    tick_s: float | None,
    time_scale: float,
    lifetime_s: float | None,
    stop_event: asyncio.Event | None,
    on_ready: Callable[[int], None] | None,
) -> None:
    runner = web.AppRunner(make_app(emulator, tick_s=tick_s, time_scale=time_scale))
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_port = port
        for addr in runner.addresses:
            if isinstance(addr, tuple) and len(addr) >= 2:
                bound_port = int(addr[1])
                break
        log.info("vLLM emulator (%s) listening on http://%s:%d", DISCLAIMER, host, bound_port)
        if on_ready is not None:
            on_ready(bound_port)
        stop = stop_event or asyncio.Event()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=lifetime_s)
    finally:
        await runner.cleanup()


async def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    emulator: VllmEmulator | None = None,
    tick_s: float | None = 0.1,
    time_scale: float = 1.0,
    lifetime_s: float | None = None,
    stop_event: asyncio.Event | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve the emulator over HTTP until ``lifetime_s`` seconds pass or ``stop_event`` is set.

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

    ``port=0`` picks a free port; ``on_ready(port)`` is called once listening. With neither
    ``lifetime_s`` nor ``stop_event`` it runs until cancelled. ``tick_s`` (s) and
    ``time_scale`` (simulated s per wall-clock s) drive the simulation, see :func:`make_app`.
    """
    await _serve(
        host,
        port,
        emulator if emulator is not None else VllmEmulator(),
        tick_s=tick_s,
        time_scale=time_scale,
        lifetime_s=lifetime_s,
        stop_event=stop_event,
        on_ready=on_ready,
    )


class EmulatorServerHandle:
    """Handle of an emulator server running in a background thread (see :func:`run_in_thread`).

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

    Attributes: ``url`` (``http://host:port``), ``metrics_url``, ``health_url``, ``port``,
    ``emulator``. Use :meth:`stop` or a ``with`` block to shut it down.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        emulator: VllmEmulator,
        thread: threading.Thread,
        loop: asyncio.AbstractEventLoop,
        stop_event: asyncio.Event,
    ) -> None:
        self.host = host
        self.port = port
        self.emulator = emulator
        self.url = f"http://{host}:{port}"
        self.metrics_url = f"{self.url}/metrics"
        self.health_url = f"{self.url}/health"
        self._thread = thread
        self._loop = loop
        self._stop_event = stop_event

    @property
    def running(self) -> bool:
        """True while the server thread is alive.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server and join its thread (waits up to ``timeout`` seconds). Idempotent.

        Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
        """
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # loop already closed
                self._loop.call_soon_threadsafe(self._stop_event.set)
            self._thread.join(timeout)

    def __enter__(self) -> EmulatorServerHandle:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def run_in_thread(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    emulator: VllmEmulator | None = None,
    tick_s: float | None = 0.1,
    time_scale: float = 1.0,
    lifetime_s: float | None = None,
    startup_timeout_s: float = 10.0,
) -> EmulatorServerHandle:
    """Start :func:`serve` in a daemon thread with its own event loop; return once listening.

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.

    ``port=0`` (default) binds a free port, reported in ``handle.port`` / ``handle.url``.
    Raises ``RuntimeError`` if the server does not start within ``startup_timeout_s`` seconds.
    """
    emu = emulator if emulator is not None else VllmEmulator()
    ready = threading.Event()
    box: dict[str, object] = {}

    async def main_coro() -> None:
        stop_event = asyncio.Event()
        box["loop"] = asyncio.get_running_loop()
        box["stop_event"] = stop_event

        def on_ready(bound_port: int) -> None:
            box["port"] = bound_port
            ready.set()

        await _serve(
            host,
            port,
            emu,
            tick_s=tick_s,
            time_scale=time_scale,
            lifetime_s=lifetime_s,
            stop_event=stop_event,
            on_ready=on_ready,
        )

    def target() -> None:
        try:
            asyncio.run(main_coro())
        except BaseException as exc:  # surface startup failures to the caller
            box["error"] = exc
            ready.set()

    thread = threading.Thread(target=target, name=f"vllm-emulator-{host}:{port}", daemon=True)
    thread.start()
    if not ready.wait(startup_timeout_s):
        raise RuntimeError("vLLM emulator did not start in time")
    if "error" in box:
        raise RuntimeError(f"vLLM emulator failed to start: {box['error']!r}") from (
            box["error"]  # type: ignore[misc]
        )
    return EmulatorServerHandle(
        host=host,
        port=int(box["port"]),  # type: ignore[call-overload]
        emulator=emu,
        thread=thread,
        loop=box["loop"],  # type: ignore[arg-type]
        stop_event=box["stop_event"],  # type: ignore[arg-type]
    )


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m fleetwatch.demo.vllm_emulator --port 8001 --rate 2``.

    Test double: emulates vLLM 0.33's /metrics format; it is not vLLM.
    """
    parser = argparse.ArgumentParser(description=DISCLAIMER)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model-name", default=EmulatorConfig.model_name)
    parser.add_argument("--engine-index", type=int, default=0)
    parser.add_argument("--rate", type=float, default=EmulatorConfig.arrival_rate_rps,
                        help="arrival rate, requests/s")  # fmt: skip
    parser.add_argument("--max-num-seqs", type=int, default=EmulatorConfig.max_num_seqs)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tick", type=float, default=0.1, help="simulation tick, s")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="simulated seconds per wall-clock second")  # fmt: skip
    parser.add_argument("--lifetime", type=float, default=None, help="stop after N s")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    emu = VllmEmulator(
        EmulatorConfig(
            model_name=args.model_name,
            engine_index=args.engine_index,
            arrival_rate_rps=args.rate,
            max_num_seqs=args.max_num_seqs,
            seed=args.seed,
        )
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            serve(
                args.host,
                args.port,
                emulator=emu,
                tick_s=args.tick,
                time_scale=args.time_scale,
                lifetime_s=args.lifetime,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
