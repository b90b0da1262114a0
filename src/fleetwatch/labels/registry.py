"""The model registry: who owns each model, who is on call, which latency tier it is in.

A YAML file::

    models:
      - name: ranker            # exact name or a glob (fnmatch), e.g. "ranker-*"
        version: "2"            # optional: exact version or glob; omitted = any version
        team: search
        owner: alice@example.com        # required
        oncall: search-oncall           # required (pager/Alertmanager receiver key)
        latency_tier: interactive       # optional, default "standard"
        quantization: fp8               # optional: weight quantization (lower case, e.g.
                                        # none, fp8, awq, gptq-int4); used when the server
                                        # does not report it (vLLM 0.32, Triton do not)
        description: Query ranking model
        gpu_memory_bytes: 2147483648    # optional: GPU memory the version takes on each GPU
                                        # it is placed on, bytes (when no server reports
                                        # it; quotas and the rollout plan, docs/gpus.md;
                                        # at most 2^60, labels.placement.MAX_MEMORY_BYTES)
        deployment:                     # optional: its Kubernetes Deployment (manifests)
          name: ranker                  # Deployment name (a DNS-1035 label, ≤ 52 chars)
          namespace: inference          # optional, a DNS-1123 label (default: fleetwatch
                                        # manifests --namespace)
          model: ranker                 # the model it serves; required when name is a glob
          sidecar: sidecar              # which --config (file stem); needed with several
          min_replicas: 2               # ≥ 1, default 1 (KEDA minReplicaCount)
          max_replicas: 8               # ≥ min_replicas, default 10
          startup_seconds: 600          # startup probe allowance (default by latency tier)
          polling_seconds: 15           # KEDA pollingInterval, default 15
          cooldown_seconds: 300         # KEDA cooldownPeriod, default 300
          scale_down_stabilization_seconds: 300   # HPA scale-down window, default 300
          role: both                    # prefill | decode | both (default): the pool's
                                        # role in disaggregated serving; one ScaledObject
                                        # per pool, on that pool's own signal
        pools: []                       # instead of deployment: a model served
                                        # disaggregated, one deployment block per pool
                                        # (role: prefill and role: decode)
        warmup:                         # optional: its warm-up set (fleetwatch.labels.warmup)
          gate: required                # /readyz waits until it ran (default optional)
          protocol: grpc                # openai | http | grpc
          count: 20
          inputs: [{name: INPUT0, datatype: FP32, shape: [16]}]
        declared:                       # optional: what must be running (drift,
          engine_version: "2.51.0"      # fleetwatch.labels.declared: engine_version,
          model_version: "2"            # quantization, model_version, instance_groups,
          instance_groups: [{kind: KIND_GPU, count: 1, gpus: [0]}]   # dynamic_batching)

The first matching entry wins, so list specific versions before catch-alls; two entries
with the same name and version are an error (the second could never match). Versions are
text: quote numbers (``version: "1"``). Validation is strict (unknown keys rejected); errors
raise :class:`RegistryError` naming the file, the entry (index and name) and the field.
The registry becomes the ``modelserver_model_info{model, model_version, backend, runtime,
team, owner, oncall, latency_tier, engine_version, quantization} 1`` series, which queries
join with ``* on (model, model_version) group_left(team, …)``; ``engine_version`` (and a
server-reported ``quantization``) come from the server itself (the source's identity probe),
so an upgrade or a re-quantized deployment shows as a new info series.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from fleetwatch.labels.declared import DeclaredSpec, check_quantization
from fleetwatch.labels.placement import MAX_MEMORY_BYTES
from fleetwatch.labels.text import render_labels
from fleetwatch.labels.warmup import WarmupSpec
from fleetwatch.specfile import error_message, read_yaml

log = logging.getLogger("fleetwatch.registry")


class RegistryError(ValueError):
    """An invalid registry file; the message names the file, the entry and the field."""


#: Kubernetes' name formats (apimachinery ``validation.IsDNS1035Label`` and
#: ``IsDNS1123Label``), matched whole (:func:`re.fullmatch`: ``$`` alone would accept a
#: trailing newline): a Service name is a DNS-1035 label, a namespace a DNS-1123 label.
_DNS_1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS_1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_GLOB_CHARS = frozenset("*?[")


#: A pool's part in disaggregated serving (prefill/decode, as vLLM's and Dynamo's
#: disaggregated deployments name them): ``both`` serves whole requests.
Role = Literal["prefill", "decode", "both"]


class DeploymentSpec(BaseModel):
    """Where a model runs on Kubernetes, for ``fleetwatch manifests`` (times in seconds).

    ``role`` is the pool's part in prefill/decode disaggregation (``both``: whole
    requests); a model served by a prefill and a decode pool has one entry per pool.

    ``name`` becomes the Deployment patched with the sidecar, the KEDA ``ScaledObject`` and
    the ``<name>-fleetwatch`` Service, so it is a DNS-1035 label short enough for that
    suffix (≤ 52 characters). ``min_replicas`` is at least 1: with no replica no sidecar
    measures the load, so the signal cannot wake a model from zero.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=52)
    namespace: str | None = Field(None, min_length=1, max_length=63)
    model: str | None = Field(None, min_length=1)
    sidecar: str | None = Field(None, min_length=1)
    min_replicas: int = Field(1, ge=1, le=10_000)
    max_replicas: int = Field(10, ge=1, le=10_000)
    startup_seconds: int | None = Field(None, ge=10, le=24 * 3600)
    polling_seconds: int = Field(15, ge=1, le=3600)
    cooldown_seconds: int = Field(300, ge=0, le=24 * 3600)
    scale_down_stabilization_seconds: int = Field(300, ge=0, le=3600)
    role: Role = "both"

    @field_validator("min_replicas", "max_replicas", "startup_seconds", "polling_seconds",
                     "cooldown_seconds", "scale_down_stabilization_seconds", mode="before")
    @classmethod
    def _whole_number(cls, v: object) -> object:
        if isinstance(v, bool) or (v is not None and not isinstance(v, int)):
            raise ValueError(f"{v!r} is not a whole number")
        return v

    @field_validator("name")
    @classmethod
    def _dns_1035_label(cls, v: str) -> str:
        if not re.fullmatch(_DNS_1035_LABEL, v):
            raise ValueError(f"{v!r} is not a DNS-1035 label (lower-case letters, digits and "
                             "'-', starting with a letter, not ending with '-'; no spaces or "
                             "line breaks)")
        return v

    @field_validator("namespace")
    @classmethod
    def _dns_1123_label(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(_DNS_1123_LABEL, v):
            raise ValueError(f"{v!r} is not a DNS-1123 label (lower-case letters, digits and "
                             "'-', starting and ending with a letter or digit; no spaces or "
                             "line breaks)")
        return v

    @field_validator("model")
    @classmethod
    def _exact_model(cls, v: str | None) -> str | None:
        if v is not None and _GLOB_CHARS & set(v):
            raise ValueError(f"{v!r} is a glob; the autoscaler needs one exact model name")
        return v

    @model_validator(mode="after")
    def _replicas_ordered(self) -> DeploymentSpec:
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas ({self.max_replicas}) is below min_replicas "
                             f"({self.min_replicas})")
        return self


class ModelEntry(BaseModel):
    """One registry entry (see module docstring for the fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    version: str | None = None
    team: str = Field(min_length=1)
    owner: str = Field(min_length=1)
    oncall: str = Field(min_length=1)
    latency_tier: str = Field("standard", min_length=1)
    quantization: str | None = None
    description: str = ""
    gpu_memory_bytes: Annotated[int, Strict()] | None = Field(None, gt=0,
                                                               le=MAX_MEMORY_BYTES)
    deployment: DeploymentSpec | None = None
    pools: list[DeploymentSpec] = Field(default_factory=list, max_length=2)
    warmup: WarmupSpec | None = None
    declared: DeclaredSpec | None = None

    @field_validator("quantization", mode="before")
    @classmethod
    def _quantization_name(cls, v: object) -> object:
        return check_quantization(v)

    @model_validator(mode="after")
    def _deployment_model_exact(self) -> ModelEntry:
        if self.deployment and self.pools:
            raise ValueError("give either deployment (one pool) or pools (a prefill and a "
                             "decode pool), not both")
        roles = [p.role for p in self.pools]
        if self.pools and sorted(roles) != ["decode", "prefill"]:
            raise ValueError(f"pools: roles {roles} given; pools are one prefill and one "
                             "decode Deployment (a whole-request pool is deployment:)")
        for d in self.deployment_specs:
            if d.model is None and _GLOB_CHARS & set(self.name):
                raise ValueError(f"deployment.model is required: the entry's name "
                                 f"{self.name!r} is a glob and the autoscaler needs one "
                                 "exact model name")
        if len({d.model or self.name for d in self.pools}) > 1:
            raise ValueError("pools: both pools serve the same model (their model fields "
                             "differ)")
        return self

    @property
    def deployment_specs(self) -> tuple[DeploymentSpec, ...]:
        """The entry's Deployments: its ``deployment``, or its ``pools`` (prefill, decode)."""
        return (self.deployment,) if self.deployment is not None else tuple(self.pools)

    @property
    def deployed_model(self) -> str | None:
        """The exact model name of :attr:`deployment_specs` (None without a deployment)."""
        specs = self.deployment_specs
        if not specs:
            return None
        return specs[0].model or self.name

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, v: object) -> object:
        if isinstance(v, bool):  # YAML reads yes/no/true/false as booleans
            raise ValueError(f"{str(v).lower()} is a boolean, not a version; quote it, "
                             'e.g. version: "1"')
        if isinstance(v, (int, float)):  # YAML 1.1 reads 010 as 8, 0x2 as 2, 1.10 as 1.1
            raise ValueError(f"read as the number {v!r}, not text; quote it, "
                             'e.g. version: "1"')
        return v

    def matches(self, model: str, version: str) -> bool:
        """True when this entry covers ``model`` at ``version`` (globs allowed)."""
        if not fnmatch.fnmatchcase(model, self.name):
            return False
        return self.version is None or fnmatch.fnmatchcase(version, self.version)


class _RegistryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: list[ModelEntry]


class Registry:
    """Validated registry entries with first-match lookup."""

    #: Lookups remembered at most (cleared when full, so churning model names stay bounded).
    CACHE_MAX = 10_000

    def __init__(self, entries: Iterable[ModelEntry] = (), source: str = "<memory>") -> None:
        self.entries = tuple(entries)
        self.source = source
        self._cache: dict[tuple[str, str], ModelEntry | None] = {}
        self._unregistered: set[tuple[str, str]] = set()  # logged once each (bounded)

    def lookup(self, model: str, version: str = "") -> ModelEntry | None:
        """The first entry matching ``model``/``version``, or None (unregistered)."""
        key = (model, version)
        try:
            return self._cache[key]
        except KeyError:
            pass
        if len(self._cache) >= self.CACHE_MAX:
            self._cache.clear()
        entry = next((e for e in self.entries if e.matches(model, version)), None)
        self._cache[key] = entry
        return entry

    def info_lines(self, models: Iterable[tuple[str, str, str, str]],
                   identity: Mapping[tuple[str, str, str, str], Mapping[str, str]]
                   | None = None) -> list[str]:
        """``modelserver_model_info`` series lines for observed models.

        ``models`` are ``(model, model_version, backend, runtime)``; unregistered models
        get empty team/owner/oncall and ``latency_tier=""`` so that they show up in
        "unowned model" queries instead of disappearing. ``identity`` maps a model to what
        its server reports about itself (``engine_version``, ``quantization``); a
        quantization the server does not report is the registry entry's, else ``""``. With
        a registry configured, each unregistered model is named once in a warning
        (``model M (version 'v') has no registry entry: …``).
        """
        lines = []
        for key in sorted(set(models)):
            model, version, backend, runtime = key
            e = self.lookup(model, version)
            ident = (identity or {}).get(key, {})
            quant = ident.get("quantization") or (e.quantization if e else None) or ""
            if e is None and self.entries and (model, version) not in self._unregistered:
                if len(self._unregistered) >= 10_000:  # churn: bounded, may log again
                    self._unregistered.clear()
                self._unregistered.add((model, version))
                log.warning("model %s (version %r) has no registry entry: its "
                            "modelserver_model_info has team=\"\", owner=\"\", "
                            "oncall=\"\" (add it to the registry)", model, version)
            labels = (("model", model), ("model_version", version), ("backend", backend),
                      ("runtime", runtime), ("team", e.team if e else ""),
                      ("owner", e.owner if e else ""), ("oncall", e.oncall if e else ""),
                      ("latency_tier", e.latency_tier if e else ""),
                      ("engine_version", ident.get("engine_version", "")),
                      ("quantization", quant))
            lines.append(f"modelserver_model_info{render_labels(labels)} 1")
        return lines


def parse_registry(data: object, source: str = "<memory>") -> Registry:
    """Validate parsed YAML ``data``; raise :class:`RegistryError` naming source/entry/field."""
    if data is None:
        raise RegistryError(f"{source}: empty registry (expected a 'models:' list)")
    if not isinstance(data, dict):
        raise RegistryError(f"{source}: expected a mapping with a 'models:' list, "
                            f"not {_yaml_kind(data)}")
    try:
        parsed = _RegistryFile.model_validate(data)
    except ValidationError as exc:
        raise RegistryError(_describe(exc, data, source)) from None
    first: dict[tuple[str, str | None], int] = {}
    for j, e in enumerate(parsed.models):
        i = first.setdefault((e.name, e.version), j)
        if i != j:
            version = "any version" if e.version is None else f"version {e.version!r}"
            raise RegistryError(
                f"{source}: models[{j}] (name {e.name!r}, {version}): duplicate of "
                f"models[{i}]; the first match wins, so models[{j}] would never be used")
    return Registry(parsed.models, source)


def _yaml_kind(data: object) -> str:
    kinds = {list: "a list", str: "text", bool: "a boolean", int: "a number", float: "a number"}
    return kinds.get(type(data), "a scalar")


def load_registry(path: str | Path) -> Registry:
    """Read and validate a registry YAML file.

    Raises :class:`RegistryError` when the file is missing, is not YAML, or an entry is
    invalid (message: ``FILE: models[3] (name 'ranker'): field 'owner': Field required``).
    """
    return parse_registry(read_yaml(path, RegistryError, "registry"), str(Path(path)))


def _describe(exc: ValidationError, data: object, source: str) -> str:
    msgs = []
    for err in exc.errors():
        loc = list(err["loc"])
        where = ""
        if len(loc) >= 2 and loc[0] == "models" and isinstance(loc[1], int):
            idx = loc[1]
            name = None
            if isinstance(data, dict) and isinstance(data.get("models"), list) \
                    and idx < len(data["models"]) and isinstance(data["models"][idx], dict):
                name = data["models"][idx].get("name")
            where = f"models[{idx}]" + (f" (name {name!r})" if name else "")
            loc = loc[2:]
        msg = error_message(err)
        if err["type"] in ("model_type", "dict_type"):  # (no internal class names)
            msg = "expected a mapping with name, team, owner and oncall"
        prefix = f"{source}: {where + ': ' if where else ''}"
        if loc:
            msgs.append(f"{prefix}field {'.'.join(str(x) for x in loc)!r}: {msg}")
        else:
            msgs.append(f"{prefix}{msg}")
    return "\n".join(msgs)
