"""One assessment of the shared GPUs from everything known at one moment: the placement
(declared, with the discovered facts laid over it), the GPUs' memory, every placed
version's footprint, the quota usage, the placement-policy violations — and its
exposition (``modelserver_model_placement``, ``modelserver_model_memory_footprint_bytes``,
``fleetwatch_quota_*``, ``fleetwatch_placement_violation``).

The sidecar (:mod:`fleetwatch.sidecar.gpu_facts`) and the commands (``fleetwatch quota
usage``, ``fleetwatch rollout plan``, on captured expositions) both call :func:`assess`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from fleetwatch.exporters.normalize import Normalized
from fleetwatch.exporters.sources import SOURCES_BY_KIND
from fleetwatch.gpu.discovered import TargetFacts, discovered_placement
from fleetwatch.gpu.facts import Figure, GPUFacts, gpu_facts
from fleetwatch.gpu.footprint import Key, ServerReports, footprints
from fleetwatch.gpu.policy import Violation, violations
from fleetwatch.gpu.quota import RESOURCES, Quotas
from fleetwatch.gpu.usage import Usage, quota_usage
from fleetwatch.labels.placement import Placement
from fleetwatch.labels.registry import Registry
from fleetwatch.labels.schema import metric
from fleetwatch.labels.text import render_labels


@dataclass
class Assessment:
    """The shared GPUs at one moment (see the module docstring)."""

    placement: Placement
    gpus: GPUFacts
    feet: dict[Key, Figure]
    usage: Usage
    violations: list[Violation]
    registry: Registry
    quotas: Quotas | None = None
    #: The ``backend`` label of each model a target serves (``triton``, ``vllm``, …).
    backends: dict[str, str] = field(default_factory=dict)


def assess(declared: Placement, states: Iterable[Normalized], targets: Iterable[TargetFacts],
           registry: Registry, quotas: Quotas | None = None,
           triton_stats: Mapping[str, object] | None = None,
           pod: tuple[str, str] | None = None,
           served: Collection[str] | None = None,
           load_deltas: Mapping[Key, int] | None = None,
           gpus: GPUFacts | None = None) -> Assessment:
    """Assess normalized ``states`` (every live target, dcgm-exporter's included) and the
    ``targets``' raw facts against ``declared``; ``triton_stats`` are the Triton statistics
    documents by model, ``served`` the model names whose usage counts (``None``: all),
    ``load_deltas`` footprints measured at load time (:mod:`fleetwatch.gpu.loads`);
    ``gpus`` the GPU facts of ``states`` when the caller has them already.

    Many parameters: each an independent source of facts the sidecar may or may not
    have (optional ones keyword-defaulted to None: that fact is not assessed)."""
    targets = list(targets)
    states = list(states)
    gpus = gpus if gpus is not None else gpu_facts(states)
    placement = declared.overlaid(discovered_placement(targets, gpus, pod))
    reports = ServerReports(triton_stats=dict(triton_stats or {}),
                            load_deltas=dict(load_deltas or {}))
    for t in targets:
        if t.exposition.vllm_cache:
            for model, _version in t.models:
                reports.vllm_cache[model] = t.exposition.vllm_cache
    feet = footprints(placement, gpus, reports, registry)
    usage = quota_usage(placement, feet, registry, served)
    backends = {m: SOURCES_BY_KIND[t.kind].backend for t in targets
                if t.kind in SOURCES_BY_KIND for m, _v in t.models}
    return Assessment(placement, gpus, feet, usage, violations(placement, registry), registry,
                      quotas, backends)


def _family(name: str, lines: list[str]) -> list[str]:
    m = metric(name)
    return [f"# HELP {name} {m.exposition_help}", f"# TYPE {name} {m.type}", *lines] \
        if lines else []


def _model(a: Assessment, model: str, version: str) -> tuple[tuple[str, str], ...]:
    """``model``, ``model_version`` and the ``backend`` serving it (left out when no target
    of this assessment serves it: a declared neighbour)."""
    b = a.backends.get(model)
    return (("model", model), ("model_version", version)) + ((("backend", b),) if b else ())


def _line(name: str, labels: tuple[tuple[str, str], ...], value: float) -> str:
    return f"{name}{render_labels(labels)} {_num(value)}"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def exposition(a: Assessment) -> str:
    """The assessment's families in the text format 0.0.4 (empty families left out)."""
    out: list[str] = []
    out += _family("modelserver_model_placement", [
        _line("modelserver_model_placement", (*_model(a, m, v), ("gpu_uuid", u),
                                              ("instances", str(n))), 1)
        for m, v, u, n in a.placement.rows()])
    out += _family("modelserver_model_memory_footprint_bytes", [
        _line("modelserver_model_memory_footprint_bytes",
              (*_model(a, m, v), ("gpu_uuid", u), ("footprint_source", f.code)), f.bytes)
        for (m, v, u), f in sorted(a.feet.items())])
    out += _family("fleetwatch_placement_violation", [
        _line("fleetwatch_placement_violation",
              (("model", x.model), ("model_version", x.model_version),
               ("gpu_uuid", x.gpu_uuid), ("latency_tier", x.latency_tier)), 1)
        for x in a.violations])
    usage, limits, m_usage, m_limits = [], [], [], []
    teams = sorted(set(a.usage.teams) | set(a.quotas.teams if a.quotas else ()))
    for team in teams:
        used = a.usage.teams.get(team, dict.fromkeys(RESOURCES, 0.0))
        q = a.quotas.teams.get(team) if a.quotas else None
        for r in RESOURCES:
            lab = (("team", team), ("resource", r))
            usage.append(_line("fleetwatch_quota_usage", lab, used[r]))
            if q is not None:
                limits.append(_line("fleetwatch_quota_limit", lab, q.limits()[r]))
        for model, cap in sorted(q.models.items()) if q is not None else ():
            mu = a.usage.models.get((team, model), dict.fromkeys(RESOURCES, 0.0))
            for r, limit in cap.limits().items():
                mlab = (("team", team), ("model", model), ("resource", r))
                m_usage.append(_line("fleetwatch_quota_model_usage", mlab, mu[r]))
                m_limits.append(_line("fleetwatch_quota_model_limit", mlab, limit))
    out += _family("fleetwatch_quota_usage", usage)
    out += _family("fleetwatch_quota_limit", limits)
    out += _family("fleetwatch_quota_model_usage", m_usage)
    out += _family("fleetwatch_quota_model_limit", m_limits)
    return "\n".join(out) + "\n" if out else ""
