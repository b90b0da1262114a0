"""Placement: which model (version) runs on which GPU, and which models share one.

The declared form lives in the sidecar configuration (``placement:``)::

    placement:
      - gpu_uuid: GPU-5f3c…            # dcgm-exporter's UUID label, Triton's gpu_uuid
        memory_bytes: 85899345920      # optional: the GPU's total memory (bytes)
        models:
          - {model: ranker, model_version: "1", instances: 2}
          - {model: llama-chat}

It is the fallback when the servers do not say it (Triton's per-model GPU labels and
``instance_group``, dcgm-exporter's pod/container labels); discovered placements are
merged into the same :class:`Placement` object (:meth:`Placement.merged`).

:class:`Placement` is what the SLO engine (co-location interference), the quota
accounting and the rollout memory plan read: :meth:`~Placement.gpus_of`,
:meth:`~Placement.neighbours`, :meth:`~Placement.models_on`, :meth:`~Placement.rows`.
Validation errors are pydantic ``ValidationError`` s, which the configuration loader turns
into a ``ConfigError`` naming the file and the field (``placement[0].models[1].model``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, model_validator

__all__ = [
    "MAX_GPUS",
    "MAX_INSTANCES",
    "MAX_MEMORY_BYTES",
    "GPUPlacement",
    "PlacedModel",
    "Placement",
    "PlacementList",
]

#: The largest GPU memory a spec may state, bytes (2^60, 1 EiB): far above any GPU's or
#: fleet's, and a float holds it exactly, so sums of thousands of them stay finite and
#: exact enough. A larger number (``10**400``) is a typo, refused where it is read.
MAX_MEMORY_BYTES = 2**60
#: The largest count of model instances (or of GPUs) a spec may state.
MAX_INSTANCES = 1_000_000
MAX_GPUS = 1_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlacedModel(_Strict):
    """One model version's instances on one GPU. ``model_version`` ``""`` means every
    version of the model (the schema's ``model_version`` label, e.g. Triton's ``"1"``)."""

    model: str = Field(min_length=1)
    model_version: str = ""
    instances: Annotated[int, Strict()] = Field(1, ge=1, le=MAX_INSTANCES)


class GPUPlacement(_Strict):
    """The models on one GPU, named by its UUID (dcgm-exporter's ``UUID`` label, which the
    schema calls ``gpu_uuid``). ``memory_bytes``: the GPU's total memory, bytes
    (optional; dcgm-exporter's ``DCGM_FI_DEV_FB_FREE + _USED`` give it when scraped)."""

    gpu_uuid: str = Field(min_length=1)
    memory_bytes: Annotated[int, Strict()] | None = Field(None, gt=0, le=MAX_MEMORY_BYTES)
    models: list[PlacedModel] = Field(min_length=1)

    @model_validator(mode="after")
    def _each_model_once(self) -> GPUPlacement:
        seen: set[tuple[str, str]] = set()
        for i, m in enumerate(self.models):
            key = (m.model, m.model_version)
            if key in seen:
                raise ValueError(f"models[{i}]: {m.model!r} version {m.model_version!r} "
                                 f"is listed twice on GPU {self.gpu_uuid!r}")
            seen.add(key)
        return self


def unique_gpus(gpus: Sequence[GPUPlacement]) -> Sequence[GPUPlacement]:
    """Raise ``ValueError`` naming the index of a GPU UUID listed twice (for validators)."""
    seen: dict[str, int] = {}
    for i, g in enumerate(gpus):
        if g.gpu_uuid in seen:
            raise ValueError(f"[{i}].gpu_uuid: {g.gpu_uuid!r} is already placement"
                             f"[{seen[g.gpu_uuid]}]")
        seen[g.gpu_uuid] = i
    return gpus


#: A ``placement:`` list as every reader validates it (the sidecar configuration, ``registry
#: diff --placement``): each GPU valid and listed once.
PlacementList = Annotated[list[GPUPlacement], AfterValidator(unique_gpus)]


class Placement:
    """An immutable index of GPU placements; cheap lookups by model and by GPU.

    Built from declared :class:`GPUPlacement` entries (or discovered ones); a model may
    sit on several GPUs (tensor parallelism, several instance groups)."""

    def __init__(self, gpus: Iterable[GPUPlacement] = ()) -> None:
        self._gpus: dict[str, GPUPlacement] = {}
        for g in gpus:
            self._gpus[g.gpu_uuid] = g
        self._by_model: dict[str, set[str]] = {}
        for g in self._gpus.values():
            for m in g.models:
                self._by_model.setdefault(m.model, set()).add(g.gpu_uuid)

    def __bool__(self) -> bool:
        return bool(self._gpus)

    @property
    def gpus(self) -> tuple[GPUPlacement, ...]:
        """Every GPU with its models, in declaration order."""
        return tuple(self._gpus.values())

    def gpu(self, gpu_uuid: str) -> GPUPlacement | None:
        """The placement of one GPU, or ``None``."""
        return self._gpus.get(gpu_uuid)

    def gpus_of(self, model: str) -> frozenset[str]:
        """The UUIDs of the GPUs a model (any version) runs on; empty when unknown."""
        return frozenset(self._by_model.get(model, ()))

    def models_on(self, gpu_uuid: str) -> tuple[PlacedModel, ...]:
        """The model versions placed on one GPU (empty for an unknown UUID)."""
        g = self._gpus.get(gpu_uuid)
        return tuple(g.models) if g else ()

    def neighbours(self, model: str) -> frozenset[str]:
        """The other models sharing at least one GPU with ``model`` (names, any
        version); empty when it is alone or unknown."""
        return frozenset(m.model for u in self.gpus_of(model)
                         for m in self._gpus[u].models if m.model != model)

    def rows(self) -> Iterator[tuple[str, str, str, int]]:
        """``(model, model_version, gpu_uuid, instances)`` per placed model version: the
        rows of ``modelserver_model_placement``."""
        for g in self._gpus.values():
            for m in g.models:
                yield m.model, m.model_version, g.gpu_uuid, m.instances

    def merged(self, other: Placement) -> Placement:
        """This placement with ``other``'s GPUs added; a GPU in both takes ``other``'s
        entry (pass discovered facts as ``other`` so they win over declarations)."""
        return Placement([*self._gpus.values(), *other._gpus.values()])

    def overlaid(self, found: Placement) -> Placement:
        """This (declared) placement with ``found`` (discovered) facts laid over it, model
        by model: on each GPU, a model ``found`` places there replaces every declared
        version of that model there; the other declared models stay (a neighbour on
        another server is still a neighbour); a GPU's ``memory_bytes`` is ``found``'s,
        else the declared one. GPUs only in ``found`` come after the declared ones."""
        gpus: list[GPUPlacement] = []
        for g in self._gpus.values():
            f = found._gpus.get(g.gpu_uuid)
            if f is None:
                gpus.append(g)
                continue
            names = {m.model for m in f.models}
            models = [m for m in g.models if m.model not in names] + list(f.models)
            gpus.append(GPUPlacement(gpu_uuid=g.gpu_uuid, models=models,
                                     memory_bytes=f.memory_bytes or g.memory_bytes))
        gpus += [f for u, f in found._gpus.items() if u not in self._gpus]
        return Placement(gpus)
