"""Model-configuration lint: Triton model configurations checked for serving pitfalls.

Each check reads a model's configuration in Triton's JSON form (``model_config.proto``
``ModelConfig`` as ``GET /v2/models/<m>/config`` answers it, or a ``config.pbtxt`` read
by :mod:`fleetwatch.governance.pbtxt`) and its registry entry, and returns
:class:`Finding` records that say what to change:

* ``dynamic_batching_llm_backend`` (error) — ``dynamic_batching`` on a vLLM or
  TensorRT-LLM backend model (``backend: vllm``/``tensorrtllm``): Triton's batcher holds
  requests in front of an engine that batches continuously itself;
* ``latency_no_queue_timeout`` (warning) — a latency-tier model (registry
  ``latency_tier`` in :data:`LATENCY_TIERS`) without a queue timeout
  (``dynamic_batching.default_queue_policy.default_timeout_microseconds``): under
  overload its requests wait without bound; ``max_queue_delay_microseconds`` only bounds
  the wait for a fuller batch, not the queue. Not for LLM runtimes: their engine queues
  requests in its own scheduler, and the check above removes the batcher that would hold
  the policy;
* ``latency_gpu_shared`` (error) — a latency-tier model with a ``KIND_GPU`` instance group
  on a GPU where a throughput-tier model (:data:`THROUGHPUT_TIERS`) also has one (a group
  without ``gpus`` takes every GPU);
* ``llm_readiness_below_startup`` (warning) — an LLM (vLLM or TensorRT-LLM backend, or a
  standalone vLLM or SGLang) whose not-ready alert allowance (alerting
  ``model_not_ready.startup_allowance`` of its tier) is below the registry's
  ``deployment.startup_seconds``: the alert pages while the pod is still allowed to start;
* ``config_without_backend`` (warning) — a configuration that names neither ``backend``
  nor ``platform`` (an empty ``config.pbtxt``, say): Triton completes it from the model
  files when it loads the model (auto-complete), so what the other checks read
  (batching, instance groups, the backend) is not in the file to check; not for an engine
  without a model configuration (a standalone vLLM or SGLang);
* ``decoupled_no_first_response_histogram`` (warning) — a decoupled model
  (``model_transaction_policy.decoupled``) on a server that does not export
  ``nv_inference_first_response_histogram_ms``: no time-to-first-response SLI; start
  Triton with ``--metrics-config histogram_latencies=true``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from fleetwatch.alerts.config import AlertingConfig
from fleetwatch.exporters.sources import LLM_RUNTIMES
from fleetwatch.exporters.sources.triton import runtime_from_model_config
from fleetwatch.governance.running import InstanceGroup, instance_groups
from fleetwatch.labels.registry import ModelEntry
from fleetwatch.labels.schema import metric
from fleetwatch.labels.text import render_labels
from fleetwatch.slo.durations import parse_duration

Severity = Literal["error", "warning"]

#: Registry latency tiers whose models are latency-bound (the placement policy's own).
LATENCY_TIERS = frozenset({"interactive"})
#: Registry latency tiers whose models are throughput-bound.
THROUGHPUT_TIERS = frozenset({"batch"})
#: The check names, in report order.
CHECKS = ("config_without_backend", "dynamic_batching_llm_backend", "latency_no_queue_timeout",
          "latency_gpu_shared", "llm_readiness_below_startup",
          "decoupled_no_first_response_histogram")


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """One model to lint: its ``config`` (Triton JSON form; ``{}`` for an engine without
    one), registry ``entry`` (None when unregistered), whether its server exports
    first-response histograms (``histogram_latencies``; None when not known: that check is
    skipped) and its ``runtime`` label when the server says it without a configuration (a
    standalone vLLM or SGLang: ``vllm``, ``sglang``; None: the configuration's backend)."""

    model: str
    config: Mapping[str, object]
    entry: ModelEntry | None
    histogram_latencies: bool | None = None
    runtime: str | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """One lint finding: ``model``, ``check`` (:data:`CHECKS`), ``severity`` and
    ``message`` (what is wrong and what to change)."""

    model: str
    check: str
    severity: Severity
    message: str

    def line(self) -> str:
        """``model ranker: [error] dynamic_batching_llm_backend: …`` (one line)."""
        return f"model {self.model}: [{self.severity}] {self.check}: {self.message}"


def lint(models: Sequence[ModelFacts],
         not_ready_allowance: Callable[[str], float] | None = None) -> list[Finding]:
    """Every finding of every check for ``models``, by model then :data:`CHECKS` order.

    ``not_ready_allowance(tier)`` gives the not-ready alert's allowance in seconds (None:
    the LLM readiness check is skipped)."""
    out: list[Finding] = []
    gpu_use = _throughput_gpus(models)
    for m in models:
        out += _without_backend(m)
        out += _batching(m)
        out += _queue_timeout(m)
        out += _gpu_shared(m, gpu_use)
        if not_ready_allowance is not None:
            out += _readiness(m, not_ready_allowance)
        out += _first_response(m)
    return sorted(out, key=lambda f: (f.model, CHECKS.index(f.check)))


def not_ready_allowance(alerting: AlertingConfig) -> Callable[[str], float]:
    """``tier → seconds``: the not-ready alert's start-up allowance of an alerting
    configuration (``model_not_ready.startup_allowance``)."""
    settings = alerting.platform.model_not_ready

    def allowance(tier: str) -> float:
        return parse_duration(settings.allowance(tier))
    return allowance


def default_not_ready_allowance(tier: str) -> float:
    """The allowance of the default alerting configuration (the sidecar's lint: it does
    not read the alerting file the rules were generated with)."""
    return not_ready_allowance(AlertingConfig())(tier)


def _tier(m: ModelFacts) -> str:
    return m.entry.latency_tier if m.entry is not None else ""


def _runtime(m: ModelFacts) -> str:
    return m.runtime or runtime_from_model_config(dict(m.config))


def _without_backend(m: ModelFacts) -> list[Finding]:
    if m.runtime is not None or m.config.get("backend") or m.config.get("platform"):
        return []
    return [Finding(m.model, "config_without_backend", "warning",
                    "the configuration names neither backend nor platform: Triton completes "
                    "it from the model files at load, so its batching and instance groups "
                    "cannot be checked here: declare backend (and max_batch_size, "
                    "instance_group) in config.pbtxt, or lint the loaded configuration with "
                    "--config")]


def _batching(m: ModelFacts) -> list[Finding]:
    rt = _runtime(m)
    if rt not in LLM_RUNTIMES or "dynamic_batching" not in m.config:
        return []
    return [Finding(m.model, "dynamic_batching_llm_backend", "error",
                    f"dynamic_batching is configured on a {rt} backend model, whose engine "
                    "batches continuously itself: remove the dynamic_batching block from "
                    "its config.pbtxt")]


def _queue_timeout(m: ModelFacts) -> list[Finding]:
    if _tier(m) not in LATENCY_TIERS or _runtime(m) in LLM_RUNTIMES:
        return []  # an LLM engine queues in its own scheduler, not in Triton's batcher
    db = m.config.get("dynamic_batching")
    policy = db.get("default_queue_policy") if isinstance(db, dict) else None
    timeout = policy.get("default_timeout_microseconds") if isinstance(policy, dict) else None
    if _positive(timeout):
        return []
    return [Finding(m.model, "latency_no_queue_timeout", "warning",
                    f"latency tier {_tier(m)!r} but no queue timeout: add dynamic_batching "
                    "{ default_queue_policy { timeout_action: REJECT "
                    "default_timeout_microseconds: N } } so that overload is rejected "
                    "instead of queued without bound")]


def _positive(v: object) -> bool:
    try:
        return int(str(v)) > 0
    except ValueError:
        return False


#: A GPU a model's instances may use: its index, or ``None`` for "every GPU".
_GPU = int | None


def _gpus(config: Mapping[str, object]) -> set[_GPU]:
    """The GPUs of a configuration's ``KIND_GPU`` groups (``None``: a group on every GPU)."""
    groups: Iterable[InstanceGroup] = instance_groups(config) or ()
    out: set[_GPU] = set()
    for g in groups:
        if g.kind == "KIND_GPU":
            out.update(g.gpus or (None,))
    return out


def _throughput_gpus(models: Sequence[ModelFacts]) -> dict[_GPU, list[str]]:
    use: dict[_GPU, list[str]] = {}
    for m in models:
        if _tier(m) in THROUGHPUT_TIERS:
            for gpu in _gpus(m.config):
                use.setdefault(gpu, []).append(m.model)
    return use


def _gpu_shared(m: ModelFacts, use: Mapping[_GPU, list[str]]) -> list[Finding]:
    if _tier(m) not in LATENCY_TIERS:
        return []
    mine = _gpus(m.config)
    shared = sorted({n for gpu, names in use.items() for n in names
                     if gpu in mine or (gpu is None and mine) or (None in mine)})
    if not shared:
        return []
    where = ",".join("all" if g is None else str(g) for g in sorted(
        mine, key=lambda g: -1 if g is None else g))
    return [Finding(m.model, "latency_gpu_shared", "error",
                    f"latency tier {_tier(m)!r} with instance groups on GPUs {where}, shared "
                    f"with throughput-tier model(s) {', '.join(shared)}: give it GPUs of its "
                    "own (instance_group gpus: [...]) or move the others")]


def _readiness(m: ModelFacts, allowance: Callable[[str], float]) -> list[Finding]:
    e = m.entry
    if _runtime(m) not in LLM_RUNTIMES or e is None or e.deployment is None \
            or e.deployment.startup_seconds is None:
        return []
    tier = e.latency_tier
    seconds = allowance(tier)
    if seconds >= e.deployment.startup_seconds:
        return []
    return [Finding(m.model, "llm_readiness_below_startup", "warning",
                    f"the not-ready alert allows {seconds:g} s for tier {tier!r}, below the "
                    f"registry's deployment.startup_seconds {e.deployment.startup_seconds}: "
                    f"raise model_not_ready.startup_allowance.{tier} to at least "
                    f"{e.deployment.startup_seconds} s (or lower startup_seconds)")]


def _first_response(m: ModelFacts) -> list[Finding]:
    policy = m.config.get("model_transaction_policy")
    decoupled = isinstance(policy, dict) and policy.get("decoupled") is True
    if not decoupled or m.histogram_latencies is not False:
        return []
    return [Finding(m.model, "decoupled_no_first_response_histogram", "warning",
                    "decoupled model, but the server exports no "
                    "nv_inference_first_response_histogram_ms: start tritonserver with "
                    "--metrics-config histogram_latencies=true")]


def exposition(findings: Iterable[Finding]) -> str:
    """``fleetwatch_model_config_findings{model, check, severity}``: the number of
    findings (text format 0.0.4)."""
    counts: dict[tuple[str, str, str], int] = {}
    for f in findings:
        key = (f.model, f.check, f.severity)
        counts[key] = counts.get(key, 0) + 1
    name = "fleetwatch_model_config_findings"
    out = [f"# HELP {name} {metric(name).exposition_help}", f"# TYPE {name} gauge"]
    out += [f"{name}{render_labels((('model', m), ('check', c), ('severity', s)))} {n}"
            for (m, c, s), n in sorted(counts.items())]
    return "\n".join(out) + "\n"
