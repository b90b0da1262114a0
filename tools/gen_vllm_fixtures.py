#!/usr/bin/env python3
"""Regenerate vLLM ``/metrics`` expositions from vLLM's own Prometheus stat logger.

Developer tool, part of the optional ``vllm-fixtures`` extra. CI never runs it.

The script imports the real stat logger of the vLLM release that is installed in
the current interpreter, builds it without a GPU and without an engine, feeds
it hand-built stats objects of that release and prints the text that
``prometheus_client.generate_latest`` produces (text format 0.0.4).

* V1 (vLLM >= 0.8): ``vllm.v1.metrics.loggers.PrometheusStatLogger``. It gets a
  real ``VllmConfig`` whose ``model_config`` is a stand-in object (a real
  ``ModelConfig`` would need the model's HF config from a hub). It is fed
  ``SchedulerStats``, ``IterationStats`` and ``FinishedRequestStats``.
* V0 (vLLM <= 0.11): ``vllm.engine.metrics`` (``StatLogger`` in 0.4.x,
  ``PrometheusStatLogger`` later). It is fed ``Stats`` objects. Use
  ``--engine v0`` to pick it on releases that ship both loggers.

The constructors and stats classes changed a lot between releases. The script
inspects signatures and dataclass fields and fills only what the installed
release has. A release whose shapes it does not know makes it exit with
status 2 and a message that says what was not understood.

The stats come from a small, fixed simulation of one engine (no randomness):
seven requests arrive over 1.5 s, at most three run at a time, so some queue.
Two finish with ``stop``, one with ``length`` and one is aborted; two are still
running and one is waiting at the end. One request hits the prefix cache.
TTFT, inter-token, end-to-end, queue, prefill, decode and inference times, KV
cache usage, and prefix-cache queries and hits all follow from that
simulation. Timestamps start at a fixed epoch, and ``time.time`` is frozen
while the logger is built, so the ``_created`` samples are stable too. The
``process_*`` and ``python_gc_*`` families of the default registry come from
the running process. ``--vllm-only`` drops them, and then the output is
byte-for-byte reproducible.

How to run it (one throwaway venv per vLLM release, outside the repository)::

    python3.11 -m venv /tmp/vllm-0.10.1.1
    V=/tmp/vllm-0.10.1.1/bin
    # Cheap route (a few hundred MB): the CPU torch wheel that lies on this
    # machine's disk, vLLM without its dependencies, then only what importing
    # the metrics modules needs.
    $V/pip install torch==2.13.0
    $V/pip install --no-deps vllm==0.10.1.1
    $V/pip install prometheus_client 'numpy<2.3' 'transformers==4.55.4' \\
        'tokenizers<0.22' pydantic regex cachetools psutil sentencepiece \\
        requests tqdm blake3 py-cpuinfo protobuf pyzmq msgspec cloudpickle \\
        pyyaml filelock einops aiohttp pillow safetensors 'fastapi<0.117' \\
        'openai<1.100' pybase64 cbor2
    $V/python tools/gen_vllm_fixtures.py \\
        --out tests/fixtures/expositions/vllm/v0.10.1.1-statlogger-cpu-generated.prom

    # The plain route also works but is large (about 9 GB, CUDA torch):
    #   pip install vllm==X ; python tools/gen_vllm_fixtures.py

If an import fails with ``No module named 'X'``, install X in the venv and run
again. ``tools/README.md`` lists the package sets that worked for each release.
For releases whose ``import vllm`` pulls in GPU-only packages, pass
``--skip-vllm-init``: the metrics modules are then loaded without running
``vllm/__init__.py`` (they are still vLLM's own code).

Options: ``--model-name``, ``--max-model-len``, ``--engine {auto,v0,v1}``,
``--vllm-only``, ``--skip-vllm-init``, ``--out FILE``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import math
import sys
import time
import traceback
import types
import typing
from dataclasses import dataclass, field

# --------------------------------------------------------------------------
# The scenario: a tiny deterministic engine simulation, independent of vLLM.
# All times are integer milliseconds so that steps line up exactly.
# --------------------------------------------------------------------------

BASE_EPOCH = 1_764_000_000.0  # 2025-11-24T16:00:00Z; every timestamp is relative to it
END_MS = 1500
MAX_NUM_SEQS = 3
BLOCK_SIZE = 16
NUM_GPU_BLOCKS = 512
FRONTEND_MS = 2  # arrival (tokenisation start) -> QUEUED in the engine


@dataclass
class Request:
    rid: str
    arrival_ms: int
    prompt_tokens: int
    target_tokens: int  # tokens after which it stops by itself
    finish: str  # "stop" or "length" when target_tokens is reached
    max_tokens: int
    cached_tokens: int = 0  # prefix-cache hit, in tokens
    abort_at_ms: int | None = None
    n: int = 1
    # filled by the simulation
    queued_ms: int = 0
    scheduled_ms: int | None = None
    token_ms: list[int] = field(default_factory=list)
    finished_ms: int | None = None
    finish_reason: str | None = None


def scenario_requests() -> list[Request]:
    return [
        Request("r0", 0, 24, 16, "stop", 64),
        Request("r1", 50, 200, 32, "length", 32),
        Request("r2", 300, 512, 10_000, "stop", 256, abort_at_ms=520),
        Request("r3", 400, 40, 8, "stop", 128, cached_tokens=32),
        Request("r4", 1000, 300, 10_000, "stop", 512),
        Request("r5", 1200, 80, 10_000, "stop", 200, n=2),
        Request("r6", 1460, 64, 10_000, "stop", 100),
    ]


@dataclass
class Step:
    """One engine step: what vLLM's engine would report after it."""

    end_ms: int
    prefilled: list[Request] = field(default_factory=list)  # first token this step
    ttfts: list[float] = field(default_factory=list)
    itls: list[float] = field(default_factory=list)
    generation_tokens: int = 0
    finished: list[Request] = field(default_factory=list)
    num_running: int = 0
    num_waiting: int = 0
    kv_usage: float = 0.0
    prefix_queries_tokens: int = 0
    prefix_hits_tokens: int = 0
    prefix_queries_blocks: int = 0
    prefix_hits_blocks: int = 0


def simulate() -> list[Step]:
    reqs = scenario_requests()
    waiting: list[Request] = []
    running: list[Request] = []
    pending = sorted(reqs, key=lambda r: r.arrival_ms)
    steps: list[Step] = []
    now = 0
    while now < END_MS:
        while pending and pending[0].arrival_ms + FRONTEND_MS <= now:
            r = pending.pop(0)
            r.queued_ms = r.arrival_ms + FRONTEND_MS
            waiting.append(r)
        step = Step(end_ms=now)
        # Client aborts are handled before scheduling.
        for r in list(running) + list(waiting):
            if r.abort_at_ms is not None and r.abort_at_ms <= now:
                r.finished_ms, r.finish_reason = now, "abort"
                step.finished.append(r)
                (running if r in running else waiting).remove(r)
        new: list[Request] = []
        while waiting and len(running) + len(new) < MAX_NUM_SEQS:
            r = waiting.pop(0)
            r.scheduled_ms = now
            new.append(r)
            step.prefix_queries_tokens += r.prompt_tokens
            step.prefix_hits_tokens += r.cached_tokens
            step.prefix_queries_blocks += r.prompt_tokens // BLOCK_SIZE
            step.prefix_hits_blocks += r.cached_tokens // BLOCK_SIZE
        computed = sum(r.prompt_tokens - r.cached_tokens for r in new)
        # Step duration: 15 ms plus 1 ms per 20 prefilled tokens.
        duration = 15 + computed // 20 if (new or running) else 5
        end = now + duration
        step.end_ms = end
        for r in running:
            step.itls.append((end - r.token_ms[-1]) / 1000)
            r.token_ms.append(end)
        for r in new:
            r.token_ms.append(end)
            step.prefilled.append(r)
            step.ttfts.append((end - r.arrival_ms) / 1000)
        running.extend(new)
        step.generation_tokens = len(running)
        for r in list(running):
            if len(r.token_ms) >= min(r.target_tokens, r.max_tokens):
                r.finished_ms = end
                r.finish_reason = r.finish if r.target_tokens <= r.max_tokens else "length"
                step.finished.append(r)
                running.remove(r)
        step.num_running = len(running)
        step.num_waiting = len(waiting)
        blocks = sum(math.ceil((r.prompt_tokens + len(r.token_ms)) / BLOCK_SIZE) for r in running)
        step.kv_usage = blocks / NUM_GPU_BLOCKS
        steps.append(step)
        now = end
    return steps


def req_times(r: Request) -> dict[str, float]:
    """Per-request intervals, as vLLM computes them (seconds)."""
    first = r.token_ms[0] if r.token_ms else r.finished_ms
    last = r.token_ms[-1] if r.token_ms else r.finished_ms
    scheduled = r.scheduled_ms if r.scheduled_ms is not None else r.finished_ms
    gen = len(r.token_ms)
    decode = (last - first) / 1000
    return {
        "e2e_latency": (r.finished_ms - r.arrival_ms) / 1000,
        "queued_time": (scheduled - r.queued_ms) / 1000,
        "prefill_time": (first - scheduled) / 1000,
        "decode_time": decode,
        "inference_time": (last - scheduled) / 1000,
        "mean_time_per_output_token": decode / (gen - 1) if gen > 1 else 0.0,
    }


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


class Unsupported(Exception):
    """The installed vLLM has shapes this script does not understand."""


class MissingDependency(Exception):
    """Importing vLLM's metrics modules needs a package the venv lacks."""


SKIP_VLLM_INIT = False


@contextlib.contextmanager
def frozen_time(at: float):
    real = time.time
    time.time = lambda: at  # type: ignore[assignment]
    try:
        yield
    finally:
        time.time = real  # type: ignore[assignment]


def vllm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError as exc:
        raise Unsupported("vllm is not installed in this interpreter") from exc


def version_tuple(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def import_vllm_module(name: str) -> types.ModuleType:
    """Import a vllm submodule.

    With ``--skip-vllm-init`` the ``vllm`` package is registered as a bare
    namespace first, so ``vllm/__init__.py`` (which imports the whole engine
    and, in old releases, GPU-only packages) never runs. The submodules are
    still vLLM's own code.
    """
    if SKIP_VLLM_INIT and "vllm" not in sys.modules:
        spec = importlib.util.find_spec("vllm")
        if spec is None or not spec.submodule_search_locations:
            raise Unsupported("vllm package not found")
        pkg = types.ModuleType("vllm")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__file__ = spec.origin
        sys.modules["vllm"] = pkg
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] != "vllm":
            raise MissingDependency(exc.name) from exc
        raise


def build_dataclass(cls: type, values: dict[str, object], what: str) -> object:
    """Instantiate a (data)class with the subset of ``values`` it accepts."""
    if dataclasses.is_dataclass(cls):
        names = {f.name: f for f in dataclasses.fields(cls)}
        required = {
            n
            for n, f in names.items()
            if f.init
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
        }
        hints = _type_hints(cls)
    else:
        params = inspect.signature(cls).parameters
        names = {n: p for n, p in params.items() if n != "self"}
        required = {n for n, p in names.items() if p.default is inspect.Parameter.empty}
        hints = {n: p.annotation for n, p in names.items()}
    kwargs = {k: v for k, v in values.items() if k in names}
    for n in required - kwargs.keys():
        kwargs[n] = _zero_for(hints.get(n), f"{what}.{n}")
    return cls(**kwargs)


def _type_hints(cls: type) -> dict[str, object]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # forward references to classes we did not import
        return {f.name: f.type for f in dataclasses.fields(cls)}


def _zero_for(annotation: object, where: str) -> object:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    if "Optional" in text or "None" in text:
        return None
    origin = typing.get_origin(annotation)
    if annotation is int or text == "int":
        return 0
    if annotation is float or text == "float":
        return 0.0
    if origin in (list, typing.List) or text.startswith(("List", "list")):  # noqa: UP006
        return []
    if origin in (dict, typing.Dict) or text.startswith(("Dict", "dict")):  # noqa: UP006
        return {}
    raise Unsupported(f"do not know what to put in required field {where} ({text})")


def set_if_has(obj: object, name: str, value: object) -> bool:
    if hasattr(obj, name):
        setattr(obj, name, value)
        return True
    return False


class StandInModelConfig:
    """Attributes of ``ModelConfig`` that the stat loggers read."""

    def __init__(self, served_model_name: str, max_model_len: int):
        self.served_model_name = served_model_name
        self.model = served_model_name
        self.max_model_len = max_model_len
        self.enforce_eager = False
        self.is_diffusion = False
        self.is_multimodal_model = False
        self.use_mla = False

    def __getattr__(self, name: str):  # only called for missing attributes
        raise Unsupported(
            f"the stat logger reads model_config.{name}, which the stand-in "
            "ModelConfig does not provide; add it to StandInModelConfig"
        )


def _find_collector(registry, name: str):
    for collector, names in list(registry._collector_to_names.items()):
        if name in names or any(n.startswith(name) for n in names):
            return collector
    return None


# --------------------------------------------------------------------------
# V1
# --------------------------------------------------------------------------


def build_vllm_config(config_mod, model_name: str, max_model_len: int):
    VllmConfig = config_mod.VllmConfig
    kwargs = {}
    DeviceConfig = getattr(config_mod, "DeviceConfig", None)
    if DeviceConfig is not None:
        with contextlib.suppress(Exception):
            kwargs["device_config"] = DeviceConfig(device="cpu")
    vc = VllmConfig(**kwargs)
    obs_cls = getattr(config_mod, "ObservabilityConfig", None)
    if getattr(vc, "observability_config", None) is None and obs_cls is not None:
        object.__setattr__(vc, "observability_config", obs_cls())
    mc = StandInModelConfig(model_name, max_model_len)
    object.__setattr__(vc, "model_config", mc)
    cc = getattr(vc, "cache_config", None)
    if cc is None:  # older VllmConfig() leaves it unset without a model
        cc = make_cache_config(config_mod)
        object.__setattr__(vc, "cache_config", cc)
    object.__setattr__(cc, "num_gpu_blocks", NUM_GPU_BLOCKS)
    with contextlib.suppress(Exception):
        object.__setattr__(cc, "block_size", BLOCK_SIZE)
    if getattr(cc, "enable_prefix_caching", False) is None:
        # EngineArgs resolves this to True for a V1 decoder model.
        object.__setattr__(cc, "enable_prefix_caching", True)
    comp = getattr(vc, "compilation_config", None)
    if comp is not None and not getattr(comp, "cudagraph_capture_sizes", None):
        # V1's _set_cudagraph_sizes() default (enforce_eager=False); it needs a
        # model config to run, so it did not run here.
        sizes = [1, 2, 4, *range(8, 513, 8)]
        with contextlib.suppress(Exception):
            object.__setattr__(comp, "cudagraph_capture_sizes", sorted(sizes, reverse=True))
    return vc


def run_v1(args) -> str:
    import prometheus_client

    loggers = import_vllm_module("vllm.v1.metrics.loggers")
    stats_mod = import_vllm_module("vllm.v1.metrics.stats")
    engine_mod = import_vllm_module("vllm.v1.engine")
    config_mod = import_vllm_module("vllm.config")
    FinishReason = engine_mod.FinishReason
    cls = getattr(loggers, "PrometheusStatLogger", None)
    if cls is None:
        raise Unsupported("vllm.v1.metrics.loggers has no PrometheusStatLogger")

    vc = build_vllm_config(config_mod, args.model_name, args.max_model_len)
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    with frozen_time(BASE_EPOCH):
        if params[:2] == ["vllm_config", "engine_indexes"]:
            logger = cls(vc, engine_indexes=[0])
        elif params[:2] == ["vllm_config", "engine_index"]:
            logger = cls(vc, engine_index=0)
        elif params == ["vllm_config"]:
            logger = cls(vc)
        else:
            raise Unsupported(f"PrometheusStatLogger.__init__{tuple(params)} not understood")
        if hasattr(logger, "log_engine_initialized"):
            # Versions that log cache_config_info in __init__ inherit a no-op here.
            logger.log_engine_initialized()

    record_params = list(inspect.signature(logger.record).parameters)
    prefix_in_blocks = False
    for name in ("vllm:gpu_prefix_cache_queries", "vllm:prefix_cache_queries"):
        col = _find_collector(prometheus_client.REGISTRY, name)
        if col is not None:
            prefix_in_blocks = "block" in getattr(col, "_documentation", "")
            break

    reasons = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}
    reasons["abort"] = FinishReason.ABORT
    for step in simulate():
        end_s = BASE_EPOCH + step.end_ms / 1000
        sched = build_dataclass(stats_mod.SchedulerStats, {}, "SchedulerStats")
        sched.num_running_reqs = step.num_running
        sched.num_waiting_reqs = step.num_waiting
        if not set_if_has(sched, "kv_cache_usage", step.kv_usage) and not set_if_has(
            sched, "gpu_cache_usage", step.kv_usage
        ):
            raise Unsupported("SchedulerStats has neither kv_cache_usage nor gpu_cache_usage")
        pcs = sched.prefix_cache_stats
        pcs.requests = len(step.prefilled)
        if prefix_in_blocks:
            pcs.queries, pcs.hits = step.prefix_queries_blocks, step.prefix_hits_blocks
        else:
            pcs.queries, pcs.hits = step.prefix_queries_tokens, step.prefix_hits_tokens

        with frozen_time(end_s):
            it = stats_mod.IterationStats()
        it.num_generation_tokens = step.generation_tokens
        prompt = sum(r.prompt_tokens for r in step.prefilled)
        cached = sum(r.cached_tokens for r in step.prefilled)
        if hasattr(it, "prompt_token_stats"):
            pts = it.prompt_token_stats
            pts.total = prompt
            pts.cached_tokens = cached
            pts.local_cache_hit = cached
            pts.computed = prompt - cached
        else:
            it.num_prompt_tokens = prompt
        it.num_preempted_reqs = 0
        it.time_to_first_tokens_iter = list(step.ttfts)
        if hasattr(it, "inter_token_latencies_iter"):
            it.inter_token_latencies_iter = list(step.itls)
        if hasattr(it, "time_per_output_tokens_iter"):
            it.time_per_output_tokens_iter = list(step.itls)
        it.max_num_generation_tokens_iter = []
        it.n_params_iter = []
        for r in step.finished:
            it.max_num_generation_tokens_iter.append(len(r.token_ms))
            it.n_params_iter.append(r.n)
            values: dict[str, object] = {
                "finish_reason": reasons[r.finish_reason],
                "request_id": r.rid,
                "num_prompt_tokens": r.prompt_tokens,
                "num_generation_tokens": len(r.token_ms),
                "max_tokens_param": r.max_tokens,
                "num_preemptions": 0,
                "num_cached_tokens": r.cached_tokens,
                "is_corrupted": False,
            }
            values.update(req_times(r))
            it.finished_requests.append(
                build_dataclass(stats_mod.FinishedRequestStats, values, "FinishedRequestStats")
            )
        with frozen_time(end_s):
            if "engine_idx" in record_params:
                logger.record(sched, it, engine_idx=0)
            else:
                logger.record(sched, it)
    return "V1 vllm.v1.metrics.loggers.PrometheusStatLogger"


# --------------------------------------------------------------------------
# V0
# --------------------------------------------------------------------------


def run_v0(args) -> str:
    metrics = import_vllm_module("vllm.engine.metrics")
    labels = {"model_name": args.model_name}
    cls = getattr(metrics, "PrometheusStatLogger", None) or getattr(metrics, "StatLogger", None)
    if cls is None:
        raise Unsupported("vllm.engine.metrics has neither PrometheusStatLogger nor StatLogger")
    stats_cls = getattr(metrics, "Stats", None)
    if stats_cls is None:
        types_mod = import_vllm_module("vllm.engine.metrics_types")
        stats_cls = types_mod.Stats
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    config_mod = None
    with frozen_time(BASE_EPOCH):
        if params == ["local_interval", "labels", "max_model_len"]:
            logger = cls(local_interval=5.0, labels=labels, max_model_len=args.max_model_len)
        elif params == ["local_interval", "labels", "vllm_config"]:
            config_mod = import_vllm_module("vllm.config")
            vc = build_vllm_config(config_mod, args.model_name, args.max_model_len)
            logger = cls(local_interval=5.0, labels=labels, vllm_config=vc)
        else:
            raise Unsupported(f"{cls.__name__}.__init__{tuple(params)} not understood")
        cache_config = _v0_cache_config(config_mod)
        if cache_config is not None and hasattr(logger, "info"):
            logger.info("cache_config", cache_config)
    if hasattr(logger, "last_local_log"):
        logger.last_local_log = BASE_EPOCH

    for step in simulate():
        end_s = BASE_EPOCH + step.end_ms / 1000
        fin = step.finished
        hit_rate = (
            step.prefix_hits_blocks / step.prefix_queries_blocks
            if step.prefix_queries_blocks
            else -1.0
        )
        values: dict[str, object] = {
            "now": end_s,
            "num_running_sys": step.num_running,
            "num_waiting_sys": step.num_waiting,
            "num_swapped_sys": 0,
            "gpu_cache_usage_sys": step.kv_usage,
            "cpu_cache_usage_sys": 0.0,
            "cpu_prefix_cache_hit_rate": -1.0,
            "gpu_prefix_cache_hit_rate": hit_rate,
            "num_prompt_tokens_iter": sum(r.prompt_tokens for r in step.prefilled),
            "num_generation_tokens_iter": step.generation_tokens,
            "num_tokens_iter": sum(r.prompt_tokens for r in step.prefilled)
            + step.generation_tokens,
            "time_to_first_tokens_iter": list(step.ttfts),
            "time_per_output_tokens_iter": list(step.itls),
            "inter_token_latencies_iter": list(step.itls),
            "num_preemption_iter": 0,
            "time_e2e_requests": [req_times(r)["e2e_latency"] for r in fin],
            "time_queue_requests": [req_times(r)["queued_time"] for r in fin],
            "time_in_queue_requests": [req_times(r)["queued_time"] for r in fin],
            "time_inference_requests": [req_times(r)["inference_time"] for r in fin],
            "time_prefill_requests": [req_times(r)["prefill_time"] for r in fin],
            "time_decode_requests": [req_times(r)["decode_time"] for r in fin],
            "model_forward_time_requests": [],
            "model_execute_time_requests": [],
            "num_prompt_tokens_requests": [r.prompt_tokens for r in fin],
            "num_generation_tokens_requests": [len(r.token_ms) for r in fin],
            "max_num_generation_tokens_requests": [len(r.token_ms) for r in fin],
            "best_of_requests": [1 for _ in fin],
            "n_requests": [r.n for r in fin],
            "max_tokens_requests": [r.max_tokens for r in fin],
            "finished_reason_requests": [r.finish_reason for r in fin],
            "waiting_lora_adapters": [],
            "running_lora_adapters": [],
            "max_lora": "0",
            "spec_decode_metrics": None,
        }
        stats = build_dataclass(stats_cls, values, "Stats")
        with frozen_time(end_s):
            logger.log(stats)
    # The API server also calls do_log_stats() every 10 s on its own, which
    # logs the idle engine and, past local_interval, the throughput gauges.
    idle = {k: v for k, v in values.items() if not isinstance(v, list)}
    idle.update(now=BASE_EPOCH + 10.0, num_prompt_tokens_iter=0, num_generation_tokens_iter=0)
    idle.update(num_tokens_iter=0, gpu_prefix_cache_hit_rate=-1.0)
    stats = build_dataclass(stats_cls, idle, "Stats")
    with frozen_time(BASE_EPOCH + 10.0):
        logger.log(stats)
    return f"V0 vllm.engine.metrics.{cls.__name__}"


def _v0_cache_config(config_mod):
    """A real CacheConfig for the cache_config_info metric, or None."""
    try:
        cc = make_cache_config(config_mod or import_vllm_module("vllm.config"))
    except (ImportError, MissingDependency) as exc:  # vllm.config needs torch
        print(f"note: no vllm:cache_config_info ({exc!r})", file=sys.stderr)
        return None
    cc.num_gpu_blocks = NUM_GPU_BLOCKS
    cc.num_cpu_blocks = 0
    return cc


def make_cache_config(config_mod):
    values = {
        "block_size": BLOCK_SIZE,
        "gpu_memory_utilization": 0.9,
        "swap_space": 4,
        "cache_dtype": "auto",
        "sliding_window": None,
        "enable_prefix_caching": True,
    }
    return build_dataclass(config_mod.CacheConfig, values, "CacheConfig")


# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write here instead of stdout")
    ap.add_argument("--model-name", default="facebook/opt-125m")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument(
        "--engine",
        choices=["auto", "v0", "v1"],
        default="auto",
        help="which stat logger; auto = V1 from 0.8.0 on, V0 before",
    )
    ap.add_argument(
        "--vllm-only",
        action="store_true",
        help="drop the process_*/python_* families of the default registry",
    )
    ap.add_argument(
        "--skip-vllm-init",
        action="store_true",
        help="load the metrics modules without running vllm/__init__.py",
    )
    args = ap.parse_args(argv)
    global SKIP_VLLM_INIT
    SKIP_VLLM_INIT = args.skip_vllm_init

    try:
        version = vllm_version()
        engine = args.engine
        if engine == "auto":
            engine = "v1" if version_tuple(version) >= (0, 8) else "v0"
        if engine == "v0" and version_tuple(version) >= (0, 11, 1):
            raise Unsupported(f"vLLM {version} no longer ships the V0 logger (gone after 0.11.0)")
        if engine == "v1" and version_tuple(version) < (0, 7, 3):
            raise Unsupported(f"vLLM {version} has no V1 Prometheus logger (first in 0.7.3)")
        import prometheus_client

        if args.vllm_only:
            for col in (
                prometheus_client.PROCESS_COLLECTOR,
                prometheus_client.PLATFORM_COLLECTOR,
                prometheus_client.GC_COLLECTOR,
            ):
                with contextlib.suppress(KeyError):
                    prometheus_client.REGISTRY.unregister(col)
        try:
            # vLLM's logger writes to stdout; keep stdout for the exposition.
            with contextlib.redirect_stdout(sys.stderr):
                what = run_v1(args) if engine == "v1" else run_v0(args)
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            # A stats class or constructor changed in a way the script does not know.
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{frame.filename}:{frame.lineno}"
            raise Unsupported(f"{type(exc).__name__}: {exc} (at {where})") from exc
        text = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
    except Unsupported as exc:
        print(f"gen_vllm_fixtures: unsupported vLLM version: {exc}", file=sys.stderr)
        return 2
    except MissingDependency as exc:
        print(
            f"gen_vllm_fixtures: importing vLLM's metrics modules needs the module "
            f"{exc}; install the package that provides it into this venv and rerun "
            "(or try --skip-vllm-init)",
            file=sys.stderr,
        )
        return 3
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    families = sum(1 for line in text.splitlines() if line.startswith("# TYPE vllm:"))
    print(
        f"gen_vllm_fixtures: vLLM {version}, {what}, prometheus_client "
        f"{_dist_version('prometheus_client')}: {families} '# TYPE vllm:' lines",
        file=sys.stderr,
    )
    return 0


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    sys.exit(main())
