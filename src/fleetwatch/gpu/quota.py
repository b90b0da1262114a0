"""The quota file: per team, how many GPUs, how much GPU memory and how many model
instances it may hold, with optional caps per model.

A YAML file::

    teams:
      search:
        gpus: 2                        # GPUs (fractions allowed: a shared GPU is split)
        gpu_memory_bytes: 34359738368  # bytes of GPU memory (whole number)
        instances: 8                   # model instances (Triton instance_group count; a
                                       # vLLM server is one)
        models:                        # optional: caps per model (any of the three)
          ranker: {instances: 4, gpu_memory_bytes: 8589934592}

Every team states all three resources (a quota in GPUs alone lets a team fill the memory
of the GPUs it has). Validation is strict like the registry's: unknown keys, booleans for
numbers, negative or non-finite values and values above the bounds of
:mod:`fleetwatch.labels.placement` (2^60 bytes, a million GPUs or instances) are refused,
and each error is one line
``FILE: team 'search': field 'models.ranker.instances': message``
(:class:`QuotaError`). The resources are :data:`RESOURCES`, the ``resource`` label of
``fleetwatch_quota_usage`` and ``fleetwatch_quota_limit``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from fleetwatch.labels.placement import MAX_GPUS, MAX_INSTANCES, MAX_MEMORY_BYTES
from fleetwatch.specfile import error_message, read_yaml

#: The ``resource`` label values, in output order.
GPUS, GPU_MEMORY, INSTANCES = "gpus", "gpu_memory_bytes", "instances"
RESOURCES = (GPUS, GPU_MEMORY, INSTANCES)


class QuotaError(ValueError):
    """An invalid quota file; the message names the file, the team and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_GPUs = Annotated[float, Strict()] | Annotated[int, Strict()]
_Whole = Annotated[int, Strict()]


class ModelCap(_Strict):
    """Caps for one model of a team (each optional, at least one)."""

    gpus: _GPUs | None = Field(None, ge=0, le=MAX_GPUS, allow_inf_nan=False)
    gpu_memory_bytes: _Whole | None = Field(None, ge=0, le=MAX_MEMORY_BYTES)
    instances: _Whole | None = Field(None, ge=0, le=MAX_INSTANCES)

    def limits(self) -> dict[str, float]:
        """``{resource: limit}`` of the caps that are set."""
        return {r: float(v) for r in RESOURCES if (v := getattr(self, r)) is not None}


class TeamQuota(_Strict):
    """One team's quota: all three resources, plus per-model caps."""

    gpus: _GPUs = Field(ge=0, le=MAX_GPUS, allow_inf_nan=False)
    gpu_memory_bytes: _Whole = Field(ge=0, le=MAX_MEMORY_BYTES)
    instances: _Whole = Field(ge=0, le=MAX_INSTANCES)
    models: dict[str, ModelCap] = Field(default_factory=dict)

    def limits(self) -> dict[str, float]:
        """``{resource: limit}`` for every resource of :data:`RESOURCES`."""
        return {r: float(getattr(self, r)) for r in RESOURCES}


class _QuotaFile(_Strict):
    teams: dict[Annotated[str, Field(min_length=1)], TeamQuota] = Field(min_length=1)


class Quotas:
    """Validated quotas: :attr:`teams` by name, :attr:`source` the file."""

    def __init__(self, teams: dict[str, TeamQuota], source: str = "<memory>") -> None:
        self.teams = dict(teams)
        self.source = source


def parse_quotas(data: object, source: str = "<memory>") -> Quotas:
    """Validate parsed YAML; raise :class:`QuotaError` naming ``source``, team and field."""
    if not isinstance(data, dict):
        raise QuotaError(f"{source}: expected a mapping with a 'teams:' mapping of team "
                         "quotas")
    try:
        parsed = _QuotaFile.model_validate(data)
    except ValidationError as exc:
        raise QuotaError(_describe(exc, source)) from None
    for team, q in parsed.teams.items():
        for model, cap in q.models.items():
            if not cap.limits():
                raise QuotaError(f"{source}: team {team!r}: field 'models.{model}': no cap "
                                 f"(give gpus, gpu_memory_bytes or instances)")
    return Quotas(parsed.teams, source)


def load_quotas(path: str | Path) -> Quotas:
    """Read and validate a quota file (:func:`parse_quotas`); a file that cannot be read or
    is not YAML is a :class:`QuotaError` naming it."""
    return parse_quotas(read_yaml(path, QuotaError, "quota file"), str(Path(path)))


def _describe(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        loc = [str(x) for x in err["loc"]]
        msg = error_message(err)
        if err["type"] in ("model_type", "dict_type"):
            msg = "expected a mapping"
        # a union of float and int reports each branch: say it once
        if loc and loc[-1] in ("float", "int") and err["type"].endswith("_type"):
            loc, msg = loc[:-1], "expected a number (not a boolean or text)"
        if len(loc) >= 2 and loc[0] == "teams":
            field = ".".join(loc[2:])
            where = f"team {loc[1]!r}: " + (f"field {field!r}: " if field else "")
        else:
            where = f"field {'.'.join(loc)!r}: " if loc else ""
        line = f"{source}: {where}{msg}"
        if line not in lines:
            lines.append(line)
    return "\n".join(lines)
