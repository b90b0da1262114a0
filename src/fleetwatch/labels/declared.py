"""What the registry declares must be running for a model: the ``declared:`` block of an
entry (:class:`DeclaredSpec`), compared with what the server reports by
:mod:`fleetwatch.governance.drift`.

::

    declared:
      engine_version: "2.51.0"     # Triton's /v2 "version", vLLM's /version "version"
      quantization: fp8            # vLLM --quantization spelling, or none
      model_version: "2"           # the one version the server must have loaded
      instance_groups:             # Triton's model-configuration instance_group
        - {kind: KIND_GPU, count: 2, gpus: [0, 1]}
      dynamic_batching: false      # whether Triton's dynamic batcher is configured

Every key is optional: a key not declared is not compared. Instance groups use Triton's
words (``model_config.proto`` ``ModelInstanceGroup``: ``kind`` ``KIND_GPU``, ``KIND_CPU``
or ``KIND_AUTO``; ``count`` instances; ``gpus`` device indices, empty = every GPU).
Validation is strict (unknown keys, booleans for numbers, numbers for versions refused);
the registry names the file, the entry and the field of an error.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator

#: A quantization name: lower case, as vLLM spells its ``--quantization`` choices
#: (``fp8``, ``awq``, ``gptq``, ``compressed-tensors``, ``bitsandbytes``), or ``none``.
QUANTIZATION_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"

#: Triton's instance-group kinds a declaration may name (``KIND_MODEL`` is the backend's
#: own placement: nothing to declare).
InstanceKind = Literal["KIND_GPU", "KIND_CPU", "KIND_AUTO"]


def check_quantization(v: object) -> object:
    """``v`` when it is None or a quantization name, else :class:`ValueError` saying how
    to write one (shared by the entry's ``quantization`` and ``declared.quantization``)."""
    if v is None:
        return v
    if not isinstance(v, str):
        raise ValueError(f"{v!r} is not text; write a quantization name, e.g. "
                         "quantization: fp8 (or none)")
    if not re.fullmatch(QUANTIZATION_PATTERN, v):
        raise ValueError(f"{v!r} is not a quantization name (lower-case letters, digits, "
                         "'.', '_' and '-', at most 64, e.g. fp8, awq, gptq-int4, none)")
    return v


def check_text(v: object, field: str, example: str) -> object:
    """``v`` unless YAML read it as a boolean or a number (``1.10`` is 1.1): then a
    :class:`ValueError` asking to quote it, e.g. ``field: "example"``."""
    if isinstance(v, bool):
        raise ValueError(f"{str(v).lower()} is a boolean, not text; quote it, "
                         f'e.g. {field}: "{example}"')
    if isinstance(v, (int, float)):
        raise ValueError(f"read as the number {v!r}, not text; quote it, "
                         f'e.g. {field}: "{example}"')
    return v


class InstanceGroupSpec(BaseModel):
    """One declared Triton instance group: ``kind``, ``count`` instances (≥ 1) on ``gpus``
    (device indices; empty = every GPU the server sees, as in Triton)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: InstanceKind
    count: Annotated[int, Strict()] = Field(1, ge=1, le=1024)
    gpus: tuple[Annotated[int, Strict(), Field(ge=0, le=1023)], ...] = ()


class DeclaredSpec(BaseModel):
    """The ``declared:`` block of a registry entry (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine_version: str | None = Field(None, min_length=1, max_length=128)
    quantization: str | None = None
    model_version: str | None = Field(None, min_length=1, max_length=128)
    instance_groups: tuple[InstanceGroupSpec, ...] | None = Field(None, min_length=1,
                                                                  max_length=64)
    dynamic_batching: Annotated[bool, Strict()] | None = None

    @field_validator("quantization", mode="before")
    @classmethod
    def _quantization_name(cls, v: object) -> object:
        return check_quantization(v)

    @field_validator("engine_version", mode="before")
    @classmethod
    def _engine_version_text(cls, v: object) -> object:
        return check_text(v, "engine_version", "2.51.0")

    @field_validator("model_version", mode="before")
    @classmethod
    def _model_version_text(cls, v: object) -> object:
        return check_text(v, "model_version", "2")
