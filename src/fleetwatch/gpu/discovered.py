"""The discovered placement: the servers' facts (:mod:`fleetwatch.gpu.discover`) and the
GPUs' (:mod:`fleetwatch.gpu.facts`) as one :class:`~fleetwatch.labels.placement.Placement`,
laid over the declared one (:meth:`~fleetwatch.labels.placement.Placement.overlaid`).

* **Triton**: a ``(model, version)`` whose series carry ``gpu_uuid`` is on those GPUs;
  its instances per GPU are its configuration's ``KIND_GPU`` ``count`` for that GPU's
  index (dcgm-exporter's ``gpu`` label), else 1. Without ``gpu_uuid`` lines, a ``KIND_GPU``
  group with ``gpus: [i, …]`` places ``count`` instances of the model (every version) on
  the GPUs of those indices, one without ``gpus`` on every GPU the sidecar sees.
* **vLLM** (standalone): dcgm-exporter's pod mapping (``pod``/``namespace`` labels, with
  the kubelet pod-resources mapping on) names the pod using each GPU; the models of the
  sidecar's vLLM targets are on the GPUs of the sidecar's own pod (``pod``: the pod
  name, e.g. the ``HOSTNAME`` Kubernetes sets, and optionally its namespace), one
  instance each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from fleetwatch.exporters.sources import OPENAI_SERVER_KINDS
from fleetwatch.gpu.discover import ExpositionFacts, gpu_instances, instance_groups
from fleetwatch.gpu.facts import GPUFacts
from fleetwatch.labels.placement import GPUPlacement, PlacedModel, Placement


@dataclass
class TargetFacts:
    """One target's reports: its ``kind``, the ``(model, model_version)`` it serves, its
    raw exposition facts and (Triton) the model configuration documents by model name."""

    kind: str
    models: set[tuple[str, str]] = field(default_factory=set)
    exposition: ExpositionFacts = field(default_factory=ExpositionFacts)
    configs: Mapping[str, object] = field(default_factory=dict)


def discovered_placement(targets: Iterable[TargetFacts], gpus: GPUFacts,
                         pod: tuple[str, str] | None = None) -> Placement:
    """The placement the servers and GPUs report (see the module docstring); ``pod`` is
    the sidecar's ``(namespace, pod name)`` (namespace ``""``: any)."""
    on: dict[str, dict[tuple[str, str], int]] = {}

    def place(uuid: str, model: str, version: str, instances: int) -> None:
        models = on.setdefault(uuid, {})
        models[(model, version)] = models.get((model, version), 0) + instances

    for t in targets:
        if t.kind == "triton":
            _triton(t, gpus, place)
        elif t.kind in OPENAI_SERVER_KINDS and pod is not None:
            mine = [u for u, pods in gpus.pods.items()
                    if any(p == pod[1] and (not pod[0] or ns == pod[0]) for ns, p, _ in pods)]
            for uuid in mine:
                for model, version in sorted(t.models):
                    place(uuid, model, version, 1)
    return Placement(GPUPlacement(gpu_uuid=u, models=[PlacedModel(model=m, model_version=v,
                                                                  instances=n)
                                                      for (m, v), n in sorted(ms.items())])
                     for u, ms in sorted(on.items()))


def _triton(t: TargetFacts, gpus: GPUFacts, place: Callable[[str, str, str, int], None]) -> None:
    placed_by_metrics = set()
    for (model, version), uuids in sorted(t.exposition.triton_gpus.items()):
        counts = _counts(t.configs.get(model))
        for uuid in sorted(uuids):
            label = gpus.index.get(uuid)
            n = counts.get(int(label) if label and label.isdigit() else -1) \
                or counts.get(None) or 1
            place(uuid, model, version, n)
        placed_by_metrics.add(model)
    for model, doc in sorted(t.configs.items()):
        if model in placed_by_metrics:
            continue
        for index, n in _counts(doc).items():
            targets: Sequence[str] = sorted(gpus.total) if index is None else \
                [u for u in [gpus.uuid_of_index(str(index))] if u]
            for uuid in targets:
                place(uuid, model, "", n)


def _counts(doc: object) -> dict[int | None, int]:
    groups = instance_groups(doc) if doc is not None else None
    return gpu_instances(groups) if groups else {}

