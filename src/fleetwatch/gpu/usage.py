"""Quota usage: what each team holds on the GPUs of a placement.

Per team (the registry entry of each placed model version; a version without an entry
belongs to no team and is listed in :attr:`Usage.unowned`):

* ``instances`` — the sum of its placed instances;
* ``gpu_memory_bytes`` — the sum of its model versions' footprints
  (:mod:`fleetwatch.gpu.footprint`); a version without a known footprint adds nothing and
  is listed in :attr:`Usage.unknown_footprint`;
* ``gpus`` — each GPU split between the teams on it **by memory footprint**: a team's
  share of a GPU is the sum of its footprints there ÷ the sum of all footprints there.
  When a model on the GPU has no known footprint the GPU is split by instance count
  instead (so an unknown footprint neither gives the GPU away nor hides it). A GPU with
  one team counts 1 for it.

``served`` restricts the counted model names (a sidecar counts only the models its own
targets serve, so two sidecars declaring the same shared GPU do not count a model twice;
the split still sees every model of the GPU). Per-model usage is kept for the caps of the
quota file (:attr:`Usage.models`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from fleetwatch.gpu.facts import Figure
from fleetwatch.gpu.footprint import Key
from fleetwatch.gpu.quota import GPU_MEMORY, GPUS, INSTANCES, RESOURCES
from fleetwatch.labels.placement import Placement
from fleetwatch.labels.registry import Registry


@dataclass
class Usage:
    """``teams[team][resource]`` and ``models[(team, model)][resource]`` (floats; bytes for
    ``gpu_memory_bytes``); the ``(model, model_version)`` without a registry team
    (``unowned``) and the placed ``(model, model_version, gpu_uuid)`` without a known
    footprint (``unknown_footprint``), sorted; ``split_by`` says per GPU how it was split
    (``"footprint"`` or ``"instances"``)."""

    teams: dict[str, dict[str, float]] = field(default_factory=dict)
    models: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    unowned: list[tuple[str, str]] = field(default_factory=list)
    unknown_footprint: list[Key] = field(default_factory=list)
    split_by: dict[str, str] = field(default_factory=dict)


def quota_usage(placement: Placement, feet: dict[Key, Figure], registry: Registry,
                served: Collection[str] | None = None) -> Usage:
    """The :class:`Usage` of ``placement`` with the footprints ``feet`` (see the module
    docstring for the method)."""
    usage = Usage()
    unowned: set[tuple[str, str]] = set()
    unknown: set[Key] = set()

    def add(team: str, model: str, resource: str, amount: float) -> None:
        t = usage.teams.setdefault(team, dict.fromkeys(RESOURCES, 0.0))
        t[resource] += amount
        m = usage.models.setdefault((team, model), dict.fromkeys(RESOURCES, 0.0))
        m[resource] += amount

    for g in placement.gpus:
        rows = []
        for pm in g.models:
            e = registry.lookup(pm.model, pm.model_version)
            fig = feet.get((pm.model, pm.model_version, g.gpu_uuid))
            if fig is None:
                unknown.add((pm.model, pm.model_version, g.gpu_uuid))
            rows.append((pm, e.team if e else None, fig))
        by_footprint = all(fig is not None for _, _, fig in rows) and \
            sum(fig.bytes for _, _, fig in rows if fig) > 0
        usage.split_by[g.gpu_uuid] = "footprint" if by_footprint else "instances"
        whole = sum((fig.bytes if fig else 0) if by_footprint else pm.instances
                    for pm, _, fig in rows)
        for pm, team, fig in rows:
            if served is not None and pm.model not in served:
                continue
            if team is None:
                unowned.add((pm.model, pm.model_version))
                continue
            share = ((fig.bytes if fig else 0) if by_footprint else pm.instances) / whole
            add(team, pm.model, GPUS, share)
            add(team, pm.model, INSTANCES, pm.instances)
            add(team, pm.model, GPU_MEMORY, fig.bytes if fig else 0)
    usage.unowned = sorted(unowned)
    usage.unknown_footprint = sorted(unknown)
    return usage
