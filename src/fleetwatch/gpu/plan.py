"""The rollout memory plan: will a model's candidate version fit on its GPUs while the
current version is still loaded?

On every GPU the model is placed on, the predicted peak is

    in use now  +  the candidate version's footprint  =  peak   (≤ the GPU's memory?)

* **in use now**: the GPU's measured memory in use (dcgm-exporter ``DCGM_FI_DEV_FB_USED``
  or Triton ``nv_gpu_memory_used_bytes``: everything loaded, the current version
  included), or the sum of the footprints of the models placed there (each line with its
  source) when that is larger or nothing was measured — the larger of the two is the safe
  prediction; without either, an error;
* **the candidate's footprint**: the registry's ``gpu_memory_bytes`` for the candidate
  version, else a server's report of that version (:mod:`fleetwatch.gpu.footprint`);
* **the GPU's memory**: measured (dcgm-exporter, Triton) or the declared ``memory_bytes``.

The headroom is memory − peak; the plan fits when it is ≥ 0 on every GPU. Every figure is
printed with its source (:func:`render_plan`). A model that is not placed, a candidate
version without a footprint or already loaded, a GPU whose memory is unknown raise
:class:`PlanError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwatch.gpu.facts import Figure, GPUFacts
from fleetwatch.gpu.footprint import Key, registry_footprint
from fleetwatch.labels.placement import PlacedModel, Placement
from fleetwatch.labels.registry import Registry


class PlanError(ValueError):
    """The plan cannot be computed (the message says which model, version or GPU)."""


@dataclass(frozen=True)
class Term:
    """One line of the arithmetic: ``op`` (``""``, ``+``), what it is, the figure."""

    op: str
    what: str
    figure: Figure


@dataclass
class GPUPlan:
    """One GPU's arithmetic: the terms of the peak, the GPU's memory, peak and headroom
    (bytes)."""

    gpu_uuid: str
    terms: list[Term]
    memory: Figure
    peak: int = 0
    headroom: int = 0

    @property
    def fits(self) -> bool:
        return self.headroom >= 0


@dataclass
class RolloutPlan:
    """The plan of ``model``'s ``candidate`` version on each of its GPUs."""

    model: str
    candidate: str
    gpus: list[GPUPlan] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return all(g.fits for g in self.gpus)


def rollout_plan(model: str, candidate: str, placement: Placement, feet: dict[Key, Figure],
                 facts: GPUFacts, registry: Registry) -> RolloutPlan:
    """The :class:`RolloutPlan` (see the module docstring); raises :class:`PlanError`."""
    uuids = [g.gpu_uuid for g in placement.gpus if g.gpu_uuid in placement.gpus_of(model)]
    if not uuids:
        placed = sorted({m for g in placement.gpus for m in (x.model for x in g.models)})
        raise PlanError(f"model {model!r} is placed on no GPU (placed models: "
                        f"{', '.join(placed) or 'none'}; declare it under placement: in the "
                        "sidecar configuration, or give captures that show it)")
    plan = RolloutPlan(model, candidate)
    for uuid in uuids:
        on_gpu = placement.models_on(uuid)
        if any(m.model == model and m.model_version == candidate for m in on_gpu):
            raise PlanError(f"model {model!r} version {candidate!r} is already loaded on GPU "
                            f"{uuid}: nothing to plan")
        cand = _candidate(model, candidate, uuid, feet, registry)
        memory = facts.total_of(uuid, placement)
        if memory is None:
            raise PlanError(f"GPU {uuid}: its memory is unknown (no dcgm-exporter or Triton "
                            "GPU series in the captures, no memory_bytes declared in its "
                            "placement)")
        terms = _in_use(uuid, on_gpu, feet, facts)
        terms.append(Term("+", f"candidate {model} version {candidate}", cand))
        peak = sum(t.figure.bytes for t in terms)
        plan.gpus.append(GPUPlan(uuid, terms, memory, peak, memory.bytes - peak))
    return plan


def _in_use(uuid: str, on_gpu: tuple[PlacedModel, ...], feet: dict[Key, Figure],
            facts: GPUFacts) -> list[Term]:
    """The terms of what the GPU holds now: the measured memory in use, or the footprints
    of the models placed there when they add up to more (a measurement taken before a
    model loaded, or memory the measurement does not see: the larger is the safe one)."""
    measured = facts.used.get(uuid)
    placed = [(m, feet.get((m.model, m.model_version, uuid))) for m in on_gpu]
    known = all(f is not None for _m, f in placed)
    total = sum(f.bytes for _m, f in placed if f is not None)
    if measured is not None and (not known or measured.bytes >= total):
        return [Term("", "in use now (measured: every model loaded, the current version "
                         "included)", measured)]
    if not known:
        m = next(m for m, f in placed if f is None)
        raise PlanError(f"GPU {uuid}: neither its memory in use nor the footprint of model "
                        f"{m.model!r} version {m.model_version!r} is known (declare "
                        "gpu_memory_bytes in the registry, or give dcgm-exporter captures)")
    more = f" (more than the {measured.bytes:,} B measured in use)" if measured else ""
    return [Term("+" if i else "", f"{m.model} version {m.model_version or '(any)'} loaded"
                 + (more if i == 0 else ""), f) for i, (m, f) in enumerate(placed)
            if f is not None]


def _candidate(model: str, candidate: str, uuid: str, feet: dict[Key, Figure],
               registry: Registry) -> Figure:
    declared = registry_footprint(model, candidate, registry)
    if declared is not None:
        return declared
    reported = feet.get((model, candidate, uuid)) or next(
        (f for (m, v, _u), f in sorted(feet.items()) if m == model and v == candidate), None)
    if reported is not None:
        return reported
    known = sorted({v for (m, v, _u) in feet if m == model})
    raise PlanError(f"model {model!r} version {candidate!r}: no footprint known (no registry "
                    f"entry for that version with gpu_memory_bytes in {registry.source}, and "
                    f"no server reports it; versions with a footprint: "
                    f"{', '.join(repr(v) for v in known) or 'none'})")


def _b(n: int) -> str:
    return f"{n:,} B ({n / 2**30:.2f} GiB)"


def render_plan(plan: RolloutPlan) -> str:
    """The plan as text, the arithmetic line by line with each figure's source, then the
    verdict (``fits`` / ``does NOT fit``)."""
    out = [f"rollout plan: model {plan.model}, candidate version {plan.candidate}, "
           f"both versions loaded at the peak ({len(plan.gpus)} GPU"
           f"{'s' if len(plan.gpus) != 1 else ''})"]
    for g in plan.gpus:
        out.append(f"GPU {g.gpu_uuid}:")
        for t in g.terms:
            out.append(f"  {t.op or ' '} {_b(t.figure.bytes):>32}  {t.what}  "
                       f"[{t.figure.source}]")
        out.append(f"  = {_b(g.peak):>32}  predicted peak")
        out.append(f"    {_b(g.memory.bytes):>32}  GPU memory  [{g.memory.source}]")
        share = g.headroom / g.memory.bytes if g.memory.bytes else 0.0
        verdict = "fits" if g.fits else "does NOT fit"
        out.append(f"  headroom after: {g.memory.bytes:,} − {g.peak:,} = {g.headroom:,} B "
                   f"({share:.1%} of the GPU): {verdict}")
    out.append("verdict: " + ("fits on every GPU" if plan.fits else
                              "does NOT fit on " + ", ".join(g.gpu_uuid for g in plan.gpus
                                                             if not g.fits)))
    return "\n".join(out) + "\n"
