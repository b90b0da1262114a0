"""The running configuration of one model, from what its server reports.

Read from Triton's HTTP/REST API (KServe v2 protocol plus Triton's extensions):

* ``GET /v2`` — server metadata, ``version``: the engine version (the scraper's identity
  probe already asks it);
* ``GET /v2/models/<m>/config`` — the model configuration as JSON
  (``model_config.proto`` ``ModelConfig`` in protobuf's JSON form): ``instance_group``
  (``kind``, ``count``, ``gpus``) and ``dynamic_batching``;
* ``POST /v2/repository/index`` — the repository index (``[{"name", "version",
  "state"}]``): the versions in state ``READY`` are the loaded ones;

and from vLLM's ``GET /version`` (the engine version). A field the server does not report
stays ``None`` and is not compared with the declaration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleetwatch.labels.declared import DeclaredSpec, InstanceGroupSpec


@dataclass(frozen=True, slots=True)
class InstanceGroup:
    """One instance group as the server runs it: Triton's ``kind``, ``count`` instances,
    ``gpus`` device indices (sorted; empty = every GPU or none for ``KIND_CPU``)."""

    kind: str
    count: int
    gpus: tuple[int, ...] = ()

    def text(self) -> str:
        """``KIND_GPU x2 gpus 0,1`` (the value shown in the info series)."""
        where = f" gpus {','.join(str(g) for g in self.gpus)}" if self.gpus else ""
        return f"{self.kind} x{self.count}{where}"


@dataclass(frozen=True, slots=True)
class RunningConfig:
    """What a server reports for one model (None: not reported, not compared).

    ``model_versions`` are the loaded versions, sorted as numbers where they are numbers.
    """

    engine_version: str | None = None
    quantization: str | None = None
    model_versions: tuple[str, ...] | None = None
    instance_groups: tuple[InstanceGroup, ...] | None = None
    dynamic_batching: bool | None = None


def instance_groups(config: Mapping[str, object]) -> tuple[InstanceGroup, ...] | None:
    """The instance groups of a Triton model configuration (JSON form), sorted; None when
    the configuration has no readable ``instance_group`` list."""
    raw = config.get("instance_group")
    if not isinstance(raw, list):
        return None
    groups = []
    for g in raw:
        if not isinstance(g, dict):
            return None
        gpus = g.get("gpus") or []
        count = g.get("count", 1)
        try:
            groups.append(InstanceGroup(str(g.get("kind", "KIND_AUTO")), int(str(count)),
                                        tuple(sorted(int(str(x)) for x in gpus))))
        except (TypeError, ValueError):
            return None
    return tuple(sorted(groups, key=lambda x: (x.kind, x.gpus, x.count)))


def declared_groups(specs: Iterable[InstanceGroupSpec]) -> tuple[InstanceGroup, ...]:
    """Declared instance groups in the running form, sorted the same way."""
    return tuple(sorted((InstanceGroup(s.kind, s.count, tuple(sorted(s.gpus)))
                         for s in specs), key=lambda x: (x.kind, x.gpus, x.count)))


def loaded_versions(index: object, model: str) -> tuple[str, ...] | None:
    """The versions of ``model`` in state ``READY`` in Triton's repository index (a JSON
    list of ``{"name", "version", "state"}``), sorted; None when the index is unreadable."""
    if not isinstance(index, list):
        return None
    versions = {str(e.get("version", "")) for e in index
                if isinstance(e, dict) and e.get("name") == model
                and e.get("state") == "READY" and e.get("version") not in (None, "")}
    return tuple(sorted(versions, key=_version_key))


def index_by_model(index: object) -> dict[str, list[object]] | None:
    """Triton's repository index grouped by model name (one pass, where
    :func:`loaded_versions` of every model would scan it once per model); None when it is
    not a list (then every model's versions are unknown)."""
    if not isinstance(index, list):
        return None
    out: dict[str, list[object]] = {}
    for e in index:
        if isinstance(e, dict) and isinstance(e.get("name"), str):
            out.setdefault(e["name"], []).append(e)
    return out


def triton_running(config: object, index: object, model: str,
                   identity: Mapping[str, str] | None) -> RunningConfig:
    """A Triton model's running configuration from its ``/v2/models/<m>/config`` document
    (``config``; anything but a JSON object leaves its fields unknown), the repository
    index (``index``) and the server identity (``engine_version``)."""
    ident = identity or {}
    doc = config if isinstance(config, dict) else None
    return RunningConfig(
        engine_version=ident.get("engine_version"),
        quantization=ident.get("quantization"),
        model_versions=loaded_versions(index, model),
        instance_groups=instance_groups(doc) if doc is not None else None,
        dynamic_batching=("dynamic_batching" in doc) if doc is not None else None)


def engine_running(identity: Mapping[str, str] | None,
                   versions: Iterable[str] = ()) -> RunningConfig:
    """A model of an engine without a model-configuration API (vLLM, SGLang): its
    identity (``engine_version``, ``quantization`` when reported) and the versions its
    exposition labels (none: not compared)."""
    ident = identity or {}
    vs = tuple(sorted({v for v in versions if v}, key=_version_key))
    return RunningConfig(engine_version=ident.get("engine_version"),
                         quantization=ident.get("quantization"),
                         model_versions=vs or None)


def declared_running(spec: DeclaredSpec) -> RunningConfig:
    """A declaration in the running form (what the server would report if it matched)."""
    return RunningConfig(
        engine_version=spec.engine_version, quantization=spec.quantization,
        model_versions=(spec.model_version,) if spec.model_version is not None else None,
        instance_groups=declared_groups(spec.instance_groups)
        if spec.instance_groups is not None else None,
        dynamic_batching=spec.dynamic_batching)


def _version_key(v: str) -> tuple[int, int, str]:
    return (0, int(v), "") if v.isdigit() else (1, 0, v)
