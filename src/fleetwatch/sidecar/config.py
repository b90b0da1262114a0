"""Sidecar configuration (YAML), validated strictly.

Example::

    listen: {address: 0.0.0.0, port: 9810}
    scrape: {interval_seconds: 5, timeout_seconds: 2}
    registry: models.yaml             # relative to this file
    passthrough_unmapped: false
    targets:
      - name: triton
        kind: triton                  # auto or a source kind (fleetwatch.exporters.sources)
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
    quotas: quotas.yaml               # optional: team quotas (fleetwatch.gpu.quota)
    placement:                        # optional: declared GPU placement
      - gpu_uuid: GPU-0               # (fleetwatch.labels.placement)
        models: [{model: ranker, instances: 2}, {model: streamer}]
    traces: {listen: {port: 4318}}    # optional OTLP trace receiver (docs/traces.md)
    slo:                              # optional: the SLO engine's state across restarts
      recover:                        # (fleetwatch.slo.recover, docs/sidecar.md)
        prometheus: http://prometheus:9090
        match: {pod: "${POD_NAME}"}   # selects this sidecar's own series
        timeout_seconds: 10
      snapshot_interval_seconds: 60
    state_dir: /var/lib/fleetwatch    # optional: state snapshots (a volume)
    shutdown: {drain_seconds: 15}     # SIGTERM: /readyz 503, /metrics served 15 s more
    metrics_export: {endpoint: http://collector:4318/v1/metrics}   # optional OTLP metrics

Two targets that could export the same series (the same ``kind``, or either ``auto``,
with identical ``labels``) are rejected: give each a distinct ``labels:`` mapping, e.g.
``labels: {server: a}``.

Errors raise :class:`ConfigError` naming the file and the field path
(``sidecar.yaml: targets[1].url: Field required``).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    Strict,
    field_validator,
    model_validator,
)

from fleetwatch.exporters.sources import KINDS
from fleetwatch.labels.placement import Placement, PlacementList
from fleetwatch.otlp.config import MetricsExport, TracesConfig, listen_address
from fleetwatch.specfile import read_yaml, validate

#: Numbers in the configuration are numbers: ``port: true`` is an error, not port 1.
StrictInt = Annotated[int, Strict()]
StrictFloat = Annotated[float, Strict()]



#: A Prometheus label name.
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class ConfigError(ValueError):
    """An invalid configuration file; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Listen(_Strict):
    """Where the sidecar serves ``/metrics``, ``/healthz``, ``/readyz``, ``/autoscaling``."""

    address: str = "0.0.0.0"
    port: StrictInt = Field(9810, ge=0, le=65535)
    #: Open HTTP connections served at once; more are closed at accept (counted in
    #: fleetwatch_http_connections_refused_total).
    max_connections: StrictInt = Field(256, ge=1, le=100_000)
    #: Seconds a client has to send a request's headers (from connect, or from the end
    #: of the previous answer on a kept-alive connection); then the connection is closed.
    header_timeout_seconds: StrictFloat = Field(10.0, gt=0, le=3600)

    @field_validator("address")
    @classmethod
    def _ip_or_host_name(cls, v: str) -> str:
        """An IPv4/IPv6 address or a plausible host name (:func:`listen_address`)."""
        return listen_address(v)


class Scrape(_Strict):
    """Scrape cadence: every ``interval_seconds``, each target bounded by ``timeout_seconds``."""

    interval_seconds: StrictFloat = Field(5.0, gt=0, le=3600)
    timeout_seconds: StrictFloat = Field(2.0, gt=0, le=600)
    max_body_bytes: StrictInt = Field(64 * 1024 * 1024, gt=0, le=2**40)
    #: Sample lines per exposition (a 3,000-model Triton writes ~144,000); beyond, the
    #: target is down with reason too_many_series.
    max_series: StrictInt = Field(250_000, gt=0, le=100_000_000)
    #: Characters of one label value; a longer one refuses its series (label_too_long).
    max_label_value_length: StrictInt = Field(4096, gt=0, le=1_048_576)
    #: CPU seconds to normalize one exposition; beyond, the target is down with reason
    #: normalize_timeout.
    normalize_timeout_seconds: StrictFloat = Field(10.0, gt=0, le=600)
    #: How often the readiness of a model found in the exposition (not listed in the
    #: target's ``models``) is asked again once it answered ready; unset: 6 scrape
    #: intervals. Listed models, models not probed yet and models not ready are asked
    #: every scrape.
    readiness_interval_seconds: StrictFloat | None = Field(None, gt=0, le=86_400)
    #: Probes (readiness, model configuration) in flight at once, per target.
    probe_concurrency: StrictInt = Field(16, gt=0, le=1024)
    #: How often the running model configuration (Triton's model configurations and
    #: repository index) is read for drift and lint (:mod:`.config_watch`), seconds.
    config_interval_seconds: StrictFloat = Field(60.0, gt=0, le=86_400)

    @property
    def readiness_every(self) -> float:
        """The readiness cadence in seconds (``readiness_interval_seconds`` or 6
        intervals)."""
        if self.readiness_interval_seconds is not None:
            return self.readiness_interval_seconds
        return 6 * self.interval_seconds

    @model_validator(mode="after")
    def _timeout_fits(self) -> Scrape:
        if self.timeout_seconds > self.interval_seconds:
            raise ValueError("timeout_seconds must not exceed interval_seconds")
        return self


class Target(_Strict):
    """One upstream ``/metrics`` endpoint next to the sidecar."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    kind: str = "auto"
    url: HttpUrl
    required: bool = True
    api_url: HttpUrl | None = None
    health_url: HttpUrl | None = None
    models: list[str] = Field(default_factory=list)
    runtime: str | None = None
    model_version: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    #: The engine's part in prefill/decode disaggregation (``both``: whole requests).
    role: Literal["prefill", "decode", "both"] = "both"

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        """``auto`` or a registered source kind (:data:`fleetwatch.exporters.sources.KINDS`)."""
        if v not in KINDS:
            raise ValueError(f"unknown kind {v!r}; expected one of {', '.join(KINDS)}")
        return v


class Recover(_Strict):
    """Where the SLO engine's state is recovered from at start (:mod:`fleetwatch.slo.recover`):
    a snapshot in ``state_dir`` saved less than ``snapshot_max_age_seconds`` ago, else
    ``prometheus`` (the sidecar's own series, selected by ``match``; ``${VAR}`` in a value
    is the environment variable's value at start), within ``timeout_seconds`` in all."""

    prometheus: HttpUrl | None = None
    #: Label matchers (name → value) that select this sidecar's own series in Prometheus.
    match: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: StrictFloat = Field(10.0, gt=0, le=600)
    snapshot_max_age_seconds: StrictFloat = Field(900.0, gt=0)

    @field_validator("match")
    @classmethod
    def _label_names(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k in v if not _LABEL_NAME.fullmatch(k)]
        if bad:
            raise ValueError(f"not a Prometheus label name: {bad[0]!r}")
        return v

    @model_validator(mode="after")
    def _match_with_prometheus(self) -> Recover:
        if self.prometheus is not None and not self.match:
            raise ValueError("match is required with prometheus: label matchers that select "
                             "this sidecar's own series, e.g. match: {pod: \"${POD_NAME}\"}")
        return self


class SLOSettings(_Strict):
    """The SLO engine's state across restarts: ``recover`` (at start) and how often a
    snapshot is written to ``state_dir`` (``snapshot_interval_seconds``; and at shutdown)."""

    recover: Recover = Recover()
    snapshot_interval_seconds: StrictFloat = Field(60.0, gt=0, le=86_400)


class Shutdown(_Strict):
    """SIGTERM: ``/readyz`` answers 503 at once, ``/metrics`` is served ``drain_seconds``
    more (Prometheus' final scrape), then the state snapshot is written and the process
    exits 0 (0: at once)."""

    drain_seconds: StrictFloat = Field(0.0, ge=0, le=3600)


class SidecarConfig(_Strict):
    """The whole sidecar configuration (see module docstring)."""

    listen: Listen = Listen()
    scrape: Scrape = Scrape()
    registry: str | None = None
    passthrough_unmapped: bool = False
    targets: list[Target] = Field(min_length=1)
    traces: TracesConfig | None = None  # the OTLP trace receiver (fleetwatch.otlp.config)
    #: Declared GPU placement (fleetwatch.labels.placement), the fallback for what the
    #: servers do not report.
    placement: PlacementList = Field(default_factory=list)
    #: A quota file (fleetwatch.gpu.quota): fleetwatch_quota_limit and the usage against it.
    quotas: str | None = Field(None, min_length=1)

    @property
    def role(self) -> str:
        """The pool's role: its targets' one ``prefill`` or ``decode``, else ``both``."""
        roles = {t.role for t in self.targets} - {"both"}
        return roles.pop() if roles else "both"

    @field_validator("targets")
    @classmethod
    def _one_role(cls, targets: list[Target]) -> list[Target]:
        """A pod belongs to one pool: prefill and decode engines do not share a sidecar."""
        roles = sorted({t.role for t in targets} - {"both"})
        if len(roles) > 1:
            raise ValueError(f"targets of roles {' and '.join(roles)} in one sidecar; a "
                             "sidecar serves one pool (one prefill or decode Deployment)")
        return targets

    def declared_placement(self) -> Placement:
        """The ``placement:`` section as a :class:`~fleetwatch.labels.placement.Placement`."""
        return Placement(self.placement)
    metrics_export: MetricsExport | None = None  # OTLP metrics export (fleetwatch.otlp.config)
    slo: SLOSettings = SLOSettings()
    #: A folder for the SLO engine's state snapshots (fleetwatch.slo.recover.snapshot).
    state_dir: str | None = Field(None, min_length=1)
    shutdown: Shutdown = Shutdown()

    @model_validator(mode="after")
    def _unique_names(self) -> SidecarConfig:
        counts = Counter(t.name for t in self.targets)
        dupes = sorted(n for n, c in counts.items() if c > 1)
        if dupes:
            raise ValueError(f"target names must be unique; repeated: {', '.join(dupes)}")
        return self

    @field_validator("targets")
    @classmethod
    def _distinct_series(cls, targets: list[Target]) -> list[Target]:
        """Two targets of the same kind (or either ``auto``) with the same ``labels`` would
        export the same series (e.g. two Triton servers both serving ``ranker``). Linear
        in the number of targets: targets are grouped by labels first."""
        by_labels: dict[tuple[tuple[str, str], ...], list[tuple[int, Target]]] = {}
        for j, b in enumerate(targets):
            group = by_labels.setdefault(tuple(sorted(b.labels.items())), [])
            repeated = False
            for i, a in group:  # at most one per kind and name before a clash is raised
                if a.name == b.name:
                    repeated = True
                    continue  # reported as a repeated name
                if a.kind == b.kind or "auto" in (a.kind, b.kind):
                    kinds = a.kind if a.kind == b.kind else f"{a.kind} and {b.kind}"
                    labels = "{" + ", ".join(f"{k}: {v}" for k, v in
                                             sorted(a.labels.items())) + "}"
                    raise ValueError(
                        f"targets[{j}].labels: targets '{a.name}' (targets[{i}]) and "
                        f"'{b.name}' (targets[{j}]) have kind {kinds} and the same labels "
                        f"{labels}, so their series could collide; give each a distinct "
                        f"labels: mapping, e.g. labels: {{server: {b.name}}}")
            if not repeated:
                group.append((j, b))
        return targets


def parse_config(data: object, source: str = "<memory>") -> SidecarConfig:
    """Validate parsed YAML; raise :class:`ConfigError` naming ``source`` and the field."""
    return validate(SidecarConfig, data, source, ConfigError,
                    "a mapping with a 'targets:' list")


def load_config(path: str | Path) -> SidecarConfig:
    """Read and validate a sidecar configuration file; a relative ``registry``,
    ``quotas`` or ``state_dir`` path is resolved against the file's folder. Raises
    :class:`ConfigError`."""
    p = Path(path)
    cfg = parse_config(read_yaml(p, ConfigError, "configuration"), str(p))
    for key in ("registry", "quotas", "state_dir"):
        value = getattr(cfg, key)
        if value and not Path(value).is_absolute():
            cfg = cfg.model_copy(update={key: str(p.parent / value)})
    return cfg
