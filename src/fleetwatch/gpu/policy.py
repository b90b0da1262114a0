"""The placement policy: a latency-SLA model gets a GPU of its own.

A model version whose registry ``latency_tier`` is ``interactive`` placed on a GPU with
any other model (another model name; two versions of one model during a rollout are not
a violation) violates the policy. Batch and standard models may share.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwatch.labels.placement import Placement
from fleetwatch.labels.registry import Registry

#: The latency tier that needs a dedicated GPU.
DEDICATED_TIER = "interactive"


@dataclass(frozen=True)
class Violation:
    """``model`` (``model_version``) of tier ``latency_tier`` shares ``gpu_uuid`` with
    ``neighbours`` (model names, sorted)."""

    model: str
    model_version: str
    gpu_uuid: str
    latency_tier: str
    neighbours: tuple[str, ...]

    def sentence(self) -> str:
        """``model ranker (version '1', latency tier interactive) shares GPU G with llm``."""
        return (f"model {self.model} (version {self.model_version!r}, latency tier "
                f"{self.latency_tier}) shares GPU {self.gpu_uuid} with "
                f"{', '.join(self.neighbours)}: {self.latency_tier} models need a GPU of "
                "their own")


def violations(placement: Placement, registry: Registry) -> list[Violation]:
    """Every policy violation of ``placement``, in placement order."""
    out = []
    for g in placement.gpus:
        names = {m.model for m in g.models}
        for m in g.models:
            e = registry.lookup(m.model, m.model_version)
            if e is None or e.latency_tier != DEDICATED_TIER or len(names) < 2:
                continue
            out.append(Violation(m.model, m.model_version, g.gpu_uuid, e.latency_tier,
                                 tuple(sorted(names - {m.model}))))
    return out
