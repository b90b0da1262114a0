"""Sidecar configuration (YAML), validated strictly.

Example::

    listen: {address: 0.0.0.0, port: 9810}
    scrape: {interval_seconds: 5, timeout_seconds: 2}
    registry: models.yaml             # relative to this file
    passthrough_unmapped: false
    targets:
      - name: triton
        kind: triton                  # triton | vllm | dcgm | auto
        url: http://127.0.0.1:8002/metrics
        api_url: http://127.0.0.1:8000    # Triton HTTP API: model config + readiness
        models: [ranker, streamer]        # readiness: these must report ready
        runtime: python                   # fallback runtime label
      - name: vllm
        kind: vllm
        url: http://127.0.0.1:8000/metrics
        health_url: http://127.0.0.1:8000/health
      - name: gpus
        kind: dcgm
        url: http://127.0.0.1:9400/metrics
        required: false

Errors raise :class:`ConfigError` naming the file and the field path
(``sidecar.yaml: targets[1].url: Field required``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError, model_validator


class ConfigError(ValueError):
    """An invalid configuration file; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Listen(_Strict):
    """Where the sidecar serves ``/metrics``, ``/healthz``, ``/readyz``, ``/autoscaling``."""

    address: str = "0.0.0.0"
    port: int = Field(9810, ge=0, le=65535)


class Scrape(_Strict):
    """Scrape cadence: every ``interval_seconds``, each target bounded by ``timeout_seconds``."""

    interval_seconds: float = Field(5.0, gt=0, le=3600)
    timeout_seconds: float = Field(2.0, gt=0, le=600)
    max_body_bytes: int = Field(64 * 1024 * 1024, gt=0)

    @model_validator(mode="after")
    def _timeout_fits(self) -> Scrape:
        if self.timeout_seconds > self.interval_seconds:
            raise ValueError("timeout_seconds must not exceed interval_seconds")
        return self


class Target(_Strict):
    """One upstream ``/metrics`` endpoint next to the sidecar."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    kind: Literal["auto", "triton", "vllm", "dcgm"] = "auto"
    url: HttpUrl
    required: bool = True
    api_url: HttpUrl | None = None
    health_url: HttpUrl | None = None
    models: list[str] = Field(default_factory=list)
    runtime: str | None = None
    model_version: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class SidecarConfig(_Strict):
    """The whole sidecar configuration (see module docstring)."""

    listen: Listen = Listen()
    scrape: Scrape = Scrape()
    registry: str | None = None
    passthrough_unmapped: bool = False
    targets: list[Target] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> SidecarConfig:
        names = [t.name for t in self.targets]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"target names must be unique; repeated: {', '.join(dupes)}")
        return self


def parse_config(data: object, source: str = "<memory>") -> SidecarConfig:
    """Validate parsed YAML; raise :class:`ConfigError` naming ``source`` and the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with a 'targets:' list")
    try:
        return SidecarConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def load_config(path: str | Path) -> SidecarConfig:
    """Read and validate a sidecar configuration file; a relative ``registry`` path is
    resolved against the file's folder. Raises :class:`ConfigError`."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read configuration: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    cfg = parse_config(data, str(p))
    if cfg.registry and not Path(cfg.registry).is_absolute():
        cfg = cfg.model_copy(update={"registry": str(p.parent / cfg.registry)})
    return cfg


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One line per error: ``SOURCE: a.b[2].c: message`` (``unknown field`` for extras)."""
    lines = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{source}: {path or '(top level)'}: {msg}")
    return "\n".join(lines)
