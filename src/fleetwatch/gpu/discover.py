"""Placement and footprint facts the servers report, read from what the schema drops.

* **Triton exposition**: per-model series of GPU model instances carry ``gpu_uuid``
  (``nv_inference_count{gpu_uuid=…, model=…, version=…}``; ``docs/sources.md`` § Triton: only
  reporters of ``KIND_GPU`` instances, the model-level reporter has none). The normalizer
  sums them over ``gpu_uuid``, so :func:`scan_exposition` reads the lines of two such
  families from the raw body (found by substring search: no second full parse).
* **vLLM exposition**: ``vllm:cache_config_info`` (vLLM 0.4.3+, one series per engine,
  no ``model_name``): ``gpu_memory_utilization`` (every version: the share of each GPU's
  memory vLLM reserves for weights, activations and KV cache), ``num_gpu_blocks`` ×
  ``block_size`` and ``kv_cache_memory_bytes`` (0.32+; ``None`` when vLLM computed it).
* **Triton model configuration** (``GET /v2/models/<m>/config``): ``instance_group``
  entries ``{kind, count, gpus}``: ``KIND_GPU`` with ``gpus: [0, 1]`` puts ``count``
  instances on each listed GPU (all GPUs when empty); other kinds are not on a GPU.
* **Triton model statistics** (``GET /v2/models/<m>/stats``, 23.x+): each version's
  ``memory_usage: [{type: GPU, id: <index>, byte_size: N}]`` where the backend reports it
  (TensorRT, ONNX Runtime do; the Python backend leaves it empty, as Triton 2.51 here does).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from fleetwatch.exporters.parser import ExpositionError, split_key
from fleetwatch.labels.placement import MAX_MEMORY_BYTES

_CACHE_CONFIG = ("vllm:cache_config_info{", "vllm_cache_config_info{")


@dataclass
class ExpositionFacts:
    """What one raw body says: Triton ``(model, version) → {gpu_uuid}`` and the label sets
    of vLLM's ``cache_config_info`` series (one per engine)."""

    triton_gpus: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    vllm_cache: list[dict[str, str]] = field(default_factory=list)


#: Triton families whose per-GPU-instance series say where a model version runs (one line
#: per model version and GPU each; ``nv_inference_count`` since 20.x,
#: ``nv_inference_request_success`` in every version).
_TRITON_PLACED = ("nv_inference_count{", "nv_inference_request_success{")


def scan_exposition(text: str, max_lines: int = 10_000,
                    cache: dict[str, dict[str, str] | None] | None = None) -> ExpositionFacts:
    """The :class:`ExpositionFacts` of a raw exposition body (Triton or vLLM). Only the
    lines of :data:`_TRITON_PLACED` (``nv_inference_count``, else, when it carries no
    ``gpu_uuid``, ``nv_inference_request_success``) and ``cache_config_info`` are read
    (found by substring search), at most ``max_lines`` of them (bounded for a hostile
    body); a line that does not parse is skipped. ``cache`` (the caller's, one per target)
    remembers the labels of each series key: label sets repeat every scrape, so a steady
    scrape parses nothing; it is cleared past 4 × ``max_lines`` keys."""
    facts = ExpositionFacts()
    seen = 0
    memo: dict[str, dict[str, str] | None] = {} if cache is None else cache
    if len(memo) > 4 * max_lines:
        memo.clear()
    for head in _TRITON_PLACED:
        for line in _lines(text, head, max_lines - seen):
            seen += 1
            if 'gpu_uuid="' not in line:
                continue
            labels = _memo_labels(line, memo)
            if labels and labels.get("model") and labels.get("gpu_uuid"):
                key = (labels["model"], labels.get("version", ""))
                facts.triton_gpus.setdefault(key, set()).add(labels["gpu_uuid"])
        if facts.triton_gpus:  # one family says it all
            break
    for head in _CACHE_CONFIG:
        for line in _lines(text, head, max_lines - seen):
            seen += 1
            labels = _memo_labels(line, memo)
            if labels is not None:
                facts.vllm_cache.append(labels)
    return facts


def _memo_labels(line: str, memo: dict[str, dict[str, str] | None]) -> dict[str, str] | None:
    key = line[:line.rfind("}") + 1]
    if key not in memo:
        memo[key] = _labels(key)
    return memo[key]


def _lines(text: str, head: str, limit: int) -> list[str]:
    """The lines of ``text`` starting with ``head``, at most ``limit``."""
    out: list[str] = []
    pos = text.find(head)
    while pos >= 0 and len(out) < limit:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        if pos == 0 or text[pos - 1] == "\n":
            out.append(text[pos:end])
        pos = text.find(head, end)
    return out


def _labels(line: str) -> dict[str, str] | None:
    close = line.rfind("}")
    if close < 0:
        return None
    try:
        return dict(split_key(line[:close + 1])[1])
    except ExpositionError:
        return None


@dataclass(frozen=True)
class InstanceGroup:
    """One ``instance_group`` entry of a Triton model configuration: ``kind``
    (``KIND_GPU``, ``KIND_CPU``, ``KIND_MODEL``, ``KIND_AUTO``), ``count`` instances on each
    of ``gpus`` (GPU indices; empty: every GPU for ``KIND_GPU``)."""

    kind: str
    count: int
    gpus: tuple[int, ...]

    @property
    def on_gpu(self) -> bool:
        return self.kind == "KIND_GPU"


def instance_groups(config: object) -> list[InstanceGroup] | None:
    """The instance groups of a ``/v2/models/<m>/config`` JSON document, or ``None`` when
    the document has none readable (not a mapping, no list, malformed entries skipped)."""
    if not isinstance(config, Mapping) or not isinstance(config.get("instance_group"), list):
        return None
    groups = []
    for g in config["instance_group"]:
        if not isinstance(g, Mapping):
            continue
        count = g.get("count", 1)
        gpus = g.get("gpus", [])
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            continue
        if not isinstance(gpus, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                 for i in gpus):
            continue
        groups.append(InstanceGroup(str(g.get("kind", "KIND_AUTO")), count, tuple(gpus)))
    return groups


def gpu_instances(groups: list[InstanceGroup]) -> dict[int | None, int]:
    """Instances per GPU index of ``KIND_GPU`` groups; key ``None`` means "on every GPU"
    (a group without ``gpus``). Empty when no group is on a GPU."""
    out: dict[int | None, int] = {}
    for g in groups:
        if not g.on_gpu:
            continue
        for i in g.gpus or (None,):
            out[i] = out.get(i, 0) + g.count
    return out


def memory_usage(stats: object) -> dict[tuple[str, int], int]:
    """``(version, GPU index) → bytes`` from a ``/v2/models/<m>/stats`` JSON document
    (``model_stats[].memory_usage[]`` entries of ``type`` ``GPU``; other types, malformed,
    zero or larger than :data:`~fleetwatch.labels.placement.MAX_MEMORY_BYTES` entries are
    skipped, and a sum stops there). Empty when the backend reports none."""
    out: dict[tuple[str, int], int] = {}
    if not isinstance(stats, Mapping) or not isinstance(stats.get("model_stats"), list):
        return out
    for ms in stats["model_stats"]:
        if not isinstance(ms, Mapping) or not isinstance(ms.get("memory_usage"), list):
            continue
        version = str(ms.get("version", ""))
        for mu in ms["memory_usage"]:
            if not isinstance(mu, Mapping) or mu.get("type") != "GPU":
                continue
            gid, size = mu.get("id"), mu.get("byte_size")
            if isinstance(gid, int) and isinstance(size, int) and \
                    0 < size <= MAX_MEMORY_BYTES and not isinstance(size, bool):
                out[(version, gid)] = min(out.get((version, gid), 0) + size, MAX_MEMORY_BYTES)
    return out


def label_number(labels: Mapping[str, str], name: str) -> float | None:
    """A numeric label of ``cache_config_info`` (``None`` for ``"None"``, missing,
    non-finite or negative values)."""
    try:
        v = float(labels.get(name, ""))
    except ValueError:
        return None
    return v if math.isfinite(v) and v >= 0 else None
