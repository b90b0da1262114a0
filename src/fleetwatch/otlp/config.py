"""The OTLP sections of the sidecar configuration: ``traces:`` (the trace receiver,
:mod:`fleetwatch.otlp.receiver`) and ``metrics_export:`` (the metrics export,
:mod:`fleetwatch.otlp.metrics_export`).

::

    traces:
      listen: {address: 127.0.0.1, port: 4318}    # OTLP/HTTP: POST /v1/traces
      max_body_bytes: 4194304                      # per body, on the wire and gunzipped
      max_spans_per_body: 8192
      buffer_traces: 10000                         # Triton traces waiting for their spans
      join_timeout_seconds: 10
      settle_seconds: 5                            # wait before a request's load is computed
      vllm_model: tiny-llm                         # vLLM's spans do not name the model
      vllm_model_version: ""
      forward: {url: http://collector:4318/v1/traces, timeout_seconds: 5, headers: {}}

    metrics_export:                               # needs the 'otel' extra
      endpoint: http://otel-collector:4318/v1/metrics
      interval_seconds: 30
      timeout_seconds: 10
      headers: {authorization: "Bearer …"}

Point Triton at the receiver with ``--trace-config=mode=opentelemetry
--trace-config=opentelemetry,url=HOST:4318/v1/traces --trace-config=rate=1
--trace-config=level=TIMESTAMPS``, vLLM with ``--otlp-traces-endpoint
http://HOST:4318/v1/traces`` and ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``.
The metrics export sends the normalized schema and the per-request trace histograms.
"""

from __future__ import annotations

import ipaddress
import re

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, field_validator

_HOST_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def listen_address(v: str) -> str:
    """``v`` when it is an IPv4/IPv6 address or a plausible host name (RFC 1123 labels);
    else ``ValueError`` saying so. The rule of every ``listen.address`` of the sidecar
    configuration (the sidecar's own, :class:`TraceListen`'s)."""
    try:
        ipaddress.ip_address(v)
        return v
    except ValueError:
        pass
    name = v[:-1] if v.endswith(".") else v
    labels = name.split(".")
    if (0 < len(name) <= 253 and all(_HOST_LABEL.match(lab) for lab in labels)
            and not labels[-1].isdigit()):  # 999.1.1.1 is a bad IP, not a name
        return v
    hint = "; IPv6 without brackets, e.g. ::1" if v.startswith("[") else ""
    raise ValueError(f"{v!r} is neither an IP address nor a host name{hint}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TraceListen(_Strict):
    """Where the receiver listens (its own port: OTLP/HTTP's default is 4318)."""

    address: str = "127.0.0.1"
    port: int = Field(4318, ge=0, le=65535)

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        """The same rule as the sidecar's ``listen.address`` (:func:`listen_address`)."""
        return listen_address(v)


class Forward(_Strict):
    """Re-post every accepted body, unchanged, to the platform's collector."""

    url: HttpUrl
    timeout_seconds: float = Field(5.0, gt=0, le=600)
    headers: dict[str, str] = Field(default_factory=dict)
    max_in_flight: int = Field(64, ge=1, le=10_000)


class TracesConfig(_Strict):
    """The trace receiver (see module docstring)."""

    listen: TraceListen = TraceListen()
    max_body_bytes: int = Field(4 * 1024 * 1024, gt=0, le=256 * 1024 * 1024)
    max_spans_per_body: int = Field(8192, ge=1, le=1_000_000)
    buffer_traces: int = Field(10_000, ge=1, le=10_000_000)
    join_timeout_seconds: float = Field(10.0, gt=0, le=3600)
    settle_seconds: float = Field(5.0, ge=0, le=3600)
    vllm_model: str = "vllm"
    vllm_model_version: str = ""
    forward: Forward | None = None


class MetricsExport(_Strict):
    """Where and how often the normalized families (and the per-request trace histograms)
    are exported: ``endpoint`` (OTLP/HTTP protobuf, usually ``…/v1/metrics``), every
    ``interval_seconds``, each export bounded by ``timeout_seconds``, with ``headers``."""

    endpoint: HttpUrl
    interval_seconds: float = Field(30.0, gt=0, le=3600)
    timeout_seconds: float = Field(10.0, gt=0, le=600)
    headers: dict[str, str] = Field(default_factory=dict)
