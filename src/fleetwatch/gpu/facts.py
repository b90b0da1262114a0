"""What the GPUs themselves say: memory total and in use, index and pod, per GPU UUID.

Read from normalized states (:class:`~fleetwatch.exporters.normalize.Normalized`) of
dcgm-exporter targets (``DCGM_FI_DEV_FB_*`` → ``modelserver_gpu_memory_*_bytes``, its
``gpu`` index and ``pod``/``namespace``/``container`` → ``pod_name``/… labels) and of
Triton (``nv_gpu_memory_*_bytes``, per ``gpu_uuid``). dcgm-exporter's figures win over
Triton's for one GPU (dcgm counts reserved memory in the total). Every figure carries the
name of its source, so the plans and reports can say where each number came from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from fleetwatch.exporters.normalize import Normalized, value_of
from fleetwatch.labels.placement import MAX_MEMORY_BYTES, Placement
from fleetwatch.labels.schema import METRICS

TOTAL = "modelserver_gpu_memory_total_bytes"
USED = "modelserver_gpu_memory_used_bytes"

#: Source names of the GPU memory figures, by the backend label of the series.
TOTAL_SOURCES = {
    "dcgm": "dcgm-exporter DCGM_FI_DEV_FB_FREE + FB_USED + FB_RESERVED (or FB_TOTAL)",
    "triton": "Triton nv_gpu_memory_total_bytes",
}
USED_SOURCES = {"dcgm": "dcgm-exporter DCGM_FI_DEV_FB_USED",
                "triton": "Triton nv_gpu_memory_used_bytes"}
DECLARED_TOTAL = "declared placement memory_bytes (sidecar configuration)"
#: Backends in order of trust (the first one seen for a GPU wins).
_RANK = {"dcgm": 0, "triton": 1}


@dataclass(frozen=True)
class Figure:
    """A number of bytes and where it came from (a sentence naming the upstream series,
    document or declaration); ``code`` is the short name of the source kind (the
    ``footprint_source`` label of footprints, ``""`` for GPU figures)."""

    bytes: int
    source: str
    code: str = ""


def bounded_bytes(v: float) -> int | None:
    """``v`` bytes as a whole number, or ``None`` when it is not finite, negative or above
    :data:`~fleetwatch.labels.placement.MAX_MEMORY_BYTES` — the bound a spec's memory has,
    applied to what the servers report too (a sum of two ``1e308`` is infinite: no figure
    rather than an ``OverflowError`` in ``quota usage`` or every scrape of ``serve``)."""
    if not (math.isfinite(v) and 0 <= v <= MAX_MEMORY_BYTES):
        return None
    return int(v)


@dataclass
class GPUFacts:
    """Per GPU UUID: ``total`` and ``used`` memory (:class:`Figure`), its dcgm ``index``
    (the ``gpu`` label: Triton's ``instance_group.gpus`` numbers), and the pods dcgm-exporter
    maps to it (``(namespace, pod, container)``)."""

    total: dict[str, Figure] = field(default_factory=dict)
    used: dict[str, Figure] = field(default_factory=dict)
    index: dict[str, str] = field(default_factory=dict)
    pods: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)

    def uuid_of_index(self, index: str) -> str | None:
        """The UUID of GPU number ``index`` (dcgm's ``gpu`` label), or ``None``."""
        return next((u for u, i in self.index.items() if i == index), None)

    def total_of(self, gpu_uuid: str, placement: Placement | None = None) -> Figure | None:
        """The GPU's memory: measured, else the declared ``memory_bytes``, else ``None``."""
        if gpu_uuid in self.total:
            return self.total[gpu_uuid]
        g = placement.gpu(gpu_uuid) if placement is not None else None
        if g is not None and g.memory_bytes is not None:
            return Figure(g.memory_bytes, DECLARED_TOTAL)
        return None


def gpu_facts(states: Iterable[Normalized]) -> GPUFacts:
    """The :class:`GPUFacts` of normalized states (dcgm-exporter and Triton targets; other
    states contribute nothing). Memory is summed over the series of one GPU and backend
    (MIG instances), the most trusted backend wins."""
    facts = GPUFacts()
    sums: dict[tuple[str, str, str], float] = {}
    for n in states:
        for prefix, value in _gpu_samples(n):
            name, labels = n.key(prefix)
            lab = dict(labels)
            uuid = lab.get("gpu_uuid", "")
            if not uuid:
                continue
            backend = lab.get("backend", "")
            sums[(name, uuid, backend)] = sums.get((name, uuid, backend), 0.0) + value
            if lab.get("gpu"):
                facts.index.setdefault(uuid, lab["gpu"])
            if lab.get("pod_name"):
                facts.pods.setdefault(uuid, set()).add(
                    (lab.get("pod_namespace", ""), lab["pod_name"], lab.get("container_name", "")))
    for (name, uuid, backend), v in sorted(sums.items(), key=lambda kv: _RANK.get(kv[0][2], 9)):
        target, sources = (facts.total, TOTAL_SOURCES) if name == TOTAL else (facts.used,
                                                                           USED_SOURCES)
        if (size := bounded_bytes(v)) is not None:
            target.setdefault(uuid, Figure(size, sources.get(backend, f"{backend} {name}")))
    return facts


#: Indices of the two families in :attr:`Normalized.families` (schema order).
_INDICES = tuple(i for i, m in enumerate(METRICS) if m.name in (TOTAL, USED))


def _gpu_samples(n: Normalized) -> Iterable[tuple[str, float]]:
    for i in _INDICES:
        for prefix, v in n.families[i].items():
            yield prefix, value_of(v)
