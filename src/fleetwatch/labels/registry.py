"""The model registry: who owns each model, who is on call, which latency tier it is in.

A YAML file::

    models:
      - name: ranker            # exact name or a glob (fnmatch), e.g. "ranker-*"
        version: "2"            # optional: exact version or glob; omitted = any version
        team: search
        owner: alice@example.com        # required
        oncall: search-oncall           # required (pager/Alertmanager receiver key)
        latency_tier: interactive       # optional, default "standard"
        description: Query ranking model

The first matching entry wins, so list specific versions before catch-alls. Validation is
strict (unknown keys rejected); errors raise :class:`RegistryError` naming the file, the
entry (index and name) and the field. The registry becomes the
``modelserver_model_info{model, model_version, backend, runtime, team, owner, oncall,
latency_tier} 1`` series, which queries join with ``* on (model, model_version)
group_left(team, …)``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fleetwatch.exporters.parser import render_labels


class RegistryError(ValueError):
    """An invalid registry file; the message names the file, the entry and the field."""


class ModelEntry(BaseModel):
    """One registry entry (see module docstring for the fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    version: str | None = None
    team: str = Field(min_length=1)
    owner: str = Field(min_length=1)
    oncall: str = Field(min_length=1)
    latency_tier: str = "standard"
    description: str = ""

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, v: object) -> object:
        return str(v) if isinstance(v, int) else v

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

    def __init__(self, entries: Iterable[ModelEntry] = (), source: str = "<memory>") -> None:
        self.entries = tuple(entries)
        self.source = source
        self._cache: dict[tuple[str, str], ModelEntry | None] = {}

    def lookup(self, model: str, version: str = "") -> ModelEntry | None:
        """The first entry matching ``model``/``version``, or None (unregistered)."""
        key = (model, version)
        if key not in self._cache:
            self._cache[key] = next((e for e in self.entries if e.matches(model, version)),
                                    None)
        return self._cache[key]

    def info_lines(self, models: Iterable[tuple[str, str, str, str]]) -> list[str]:
        """``modelserver_model_info`` series lines for observed models.

        ``models`` are ``(model, model_version, backend, runtime)``; unregistered models
        get empty team/owner/oncall and ``latency_tier=""`` so that they show up in
        "unowned model" queries instead of disappearing.
        """
        lines = []
        for model, version, backend, runtime in sorted(set(models)):
            e = self.lookup(model, version)
            labels = (("model", model), ("model_version", version), ("backend", backend),
                      ("runtime", runtime), ("team", e.team if e else ""),
                      ("owner", e.owner if e else ""), ("oncall", e.oncall if e else ""),
                      ("latency_tier", e.latency_tier if e else ""))
            lines.append(f"modelserver_model_info{render_labels(labels)} 1")
        return lines


def parse_registry(data: object, source: str = "<memory>") -> Registry:
    """Validate parsed YAML ``data``; raise :class:`RegistryError` naming source/entry/field."""
    if data is None:
        raise RegistryError(f"{source}: empty registry (expected a 'models:' list)")
    try:
        parsed = _RegistryFile.model_validate(data)
    except ValidationError as exc:
        raise RegistryError(_describe(exc, data, source)) from None
    return Registry(parsed.models, source)


def load_registry(path: str | Path) -> Registry:
    """Read and validate a registry YAML file.

    Raises :class:`RegistryError` when the file is missing, is not YAML, or an entry is
    invalid (message: ``FILE: models[3] (name 'ranker'): field 'owner': Field required``).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"{p}: cannot read registry: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{p}: not valid YAML: {exc}") from None
    return parse_registry(data, str(p))


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
        field = ".".join(str(x) for x in loc) or "(entry)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        msgs.append(f"{source}: {where + ': ' if where else ''}field {field!r}: {msg}")
    return "\n".join(msgs)
