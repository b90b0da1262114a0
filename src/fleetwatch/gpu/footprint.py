"""Memory footprints: how many bytes of a GPU each placed model version takes, with the
source of each figure named.

Per ``(model, model_version, gpu_uuid)`` of a :class:`~fleetwatch.labels.placement.Placement`,
the first source that knows wins (dcgm-exporter has no per-process memory, so a server
report or a declaration is needed):

1. **Triton model statistics** ``memory_usage`` (``/v2/models/<m>/stats``, GPU entries by
   device index, mapped to the UUID by dcgm-exporter's ``gpu`` label, or to the model's one
   GPU) — only where the backend fills it;
2. **vLLM's reservation**: ``cache_config_info`` ``gpu_memory_utilization`` × the GPU's
   memory (vLLM ≥ 0.4.3 pre-allocates that share of every GPU it runs on for weights,
   activations and KV cache: its real footprint);
3. **GPU memory delta at load time** (used after − used before the model appeared:
   :mod:`fleetwatch.gpu.loads`, which the sidecar runs);
4. **the registry's** ``gpu_memory_bytes`` (per GPU the entry's models are placed on);
5. **vLLM's KV cache alone**: ``kv_cache_memory_bytes`` (vLLM 0.32+), a lower bound (the
   weights are not in any vLLM metric) — used only when nothing else knows.

Figures are whole bytes (``int``); :data:`SOURCE_CODES` are the short names of the
sources (the ``footprint_source`` label of ``modelserver_model_memory_footprint_bytes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fleetwatch.gpu.discover import label_number, memory_usage
from fleetwatch.gpu.facts import Figure, GPUFacts, bounded_bytes
from fleetwatch.labels.placement import Placement
from fleetwatch.labels.registry import Registry

#: ``(model, model_version, gpu_uuid)``.
Key = tuple[str, str, str]

TRITON_STATS = "Triton model statistics memory_usage (GET /v2/models/{model}/stats)"
VLLM_RESERVATION = ("vLLM cache_config_info gpu_memory_utilization {util:g} × GPU memory "
                    "{total} bytes ({total_source})")
LOAD_DELTA = "GPU memory in use after − before the model loaded"
REGISTRY = "registry gpu_memory_bytes ({source}: name {name!r})"
VLLM_KV_ONLY = ("vLLM cache_config_info kv_cache_memory_bytes (KV cache only: a lower "
                "bound, weights not reported)")

#: The ``footprint_source`` label values, in the order of precedence.
SOURCE_CODES = ("triton_statistics", "vllm_reservation", "load_delta", "registry",
                "vllm_kv_cache")


@dataclass
class ServerReports:
    """What the servers said, by model name: Triton statistics documents
    (``triton_stats``), vLLM ``cache_config_info`` label sets (``vllm_cache``, the engines
    of the vLLM server that serves the model) and load-time deltas (``load_deltas``,
    bytes by :data:`Key`)."""

    triton_stats: dict[str, object] = field(default_factory=dict)
    vllm_cache: dict[str, Sequence[Mapping[str, str]]] = field(default_factory=dict)
    load_deltas: dict[Key, int] = field(default_factory=dict)


def footprints(placement: Placement, facts: GPUFacts, reports: ServerReports,
               registry: Registry) -> dict[Key, Figure]:
    """The footprint of every placed model version on every GPU it is placed on (see the
    module docstring for the order of sources); a placed version no source knows is
    absent."""
    out: dict[Key, Figure] = {}
    triton = {m: memory_usage(doc) for m, doc in reports.triton_stats.items()}
    for model, version, uuid, _instances in placement.rows():
        key = (model, version, uuid)
        fig = (_triton(model, version, uuid, triton.get(model, {}), placement, facts)
               or _vllm(reports.vllm_cache.get(model, ()), uuid, placement, facts)
               or _delta(reports.load_deltas.get(key))
               or registry_footprint(model, version, registry)
               or _kv_only(reports.vllm_cache.get(model, ())))
        if fig is not None:
            out[key] = fig
    return out


def _triton(model: str, version: str, uuid: str, usage: dict[tuple[str, int], int],
            placement: Placement, facts: GPUFacts) -> Figure | None:
    if not usage:
        return None
    only = len(placement.gpus_of(model)) == 1
    total = 0
    for (v, index), size in usage.items():
        if version and v != version:
            continue
        mapped = facts.uuid_of_index(str(index))
        if mapped == uuid or (mapped is None and only):
            total += size
    return Figure(total, TRITON_STATS.format(model=model), SOURCE_CODES[0]) if total else None


def _vllm(engines: Sequence[Mapping[str, str]], uuid: str, placement: Placement,
          facts: GPUFacts) -> Figure | None:
    utils = [u for e in engines if (u := label_number(e, "gpu_memory_utilization"))]
    total = facts.total_of(uuid, placement)
    if not utils or total is None:
        return None
    util = max(utils)  # data-parallel engines on one server report the same setting
    size = bounded_bytes(util * total.bytes) if util <= 1 else None  # a fraction of the GPU
    if size is None:
        return None
    return Figure(size, VLLM_RESERVATION.format(util=util, total=total.bytes,
                                                total_source=total.source), SOURCE_CODES[1])


def _delta(size: int | None) -> Figure | None:
    return Figure(size, LOAD_DELTA, SOURCE_CODES[2]) if size is not None and size > 0 else None


def registry_footprint(model: str, version: str, registry: Registry) -> Figure | None:
    """The registry entry's ``gpu_memory_bytes`` for ``model`` at ``version`` (``None``
    without a matching entry or without the field)."""
    e = registry.lookup(model, version)
    if e is None or e.gpu_memory_bytes is None:
        return None
    return Figure(e.gpu_memory_bytes, REGISTRY.format(source=registry.source, name=e.name),
                  SOURCE_CODES[3])


def _kv_only(engines: Sequence[Mapping[str, str]]) -> Figure | None:
    sizes = [s for e in engines if (s := label_number(e, "kv_cache_memory_bytes"))]
    size = bounded_bytes(sum(sizes)) if sizes else None
    return Figure(size, VLLM_KV_ONLY, SOURCE_CODES[4]) if size else None
