"""The OTLP sections of the sidecar configuration: ``traces:`` (the trace receiver,
:mod:`fleetwatch.otlp.receiver`) and ``metrics_export:`` (the metrics export,
:mod:`fleetwatch.otlp.metrics_export`).

::

    traces:
      listen: {address: 127.0.0.1, port: 4318}    # OTLP/HTTP: POST /v1/traces (loopback)
      auth: {bearer_token_file: /etc/fleetwatch-otlp/token}   # required off loopback
      # auth: {tls: {cert_file: …, key_file: …, client_ca_file: …}}   # or mTLS
      max_connections: 256                         # open at once; more closed at accept
      header_timeout_seconds: 10                   # to send a request's headers
      read_timeout_seconds: 30                     # to send a request's body
      max_body_bytes: 4194304                      # per body, on the wire and gunzipped
      max_spans_per_body: 8192
      buffer_traces: 10000                         # traces waiting for their spans
      join_timeout_seconds: 10
      settle_seconds: 5                            # wait before a request's load is computed
      max_future_skew_seconds: 300                 # span times vs the sidecar's clock
      max_past_skew_seconds: 900
      max_duration_seconds: 3600                   # any duration or latency of a span
      max_attribute_length: 1024                   # characters of one string attribute
      max_models: 1000                             # distinct models from spans
      buffer_spans: 40000                          # spans held by the join buffer
      vllm_model: tiny-llm                         # vLLM's spans do not name the model
      vllm_model_version: ""
      caller_wait_seconds: 6                       # a vLLM span waits for its caller's
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

The receiver listens on loopback by default: the engines of the pod reach it there. Any
other address needs ``auth`` — a bearer token (``Authorization: Bearer <token>``, the
token read from ``bearer_token_file`` at start, e.g. a mounted Secret) or mutual TLS
(``tls``: the server's certificate and key, and the CA that signs the clients'
certificates) — else the configuration is refused naming ``traces.listen.address``.
What every span must satisfy before it touches state is
:mod:`fleetwatch.otlp.admit`'s (the ``*_skew_seconds``, ``max_duration_seconds`` and
``max_attribute_length`` bounds).
"""

from __future__ import annotations

import ipaddress
import re

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, field_validator, model_validator

_HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


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
    if (0 < len(name) <= 253 and all(_HOST_LABEL.fullmatch(lab) for lab in labels)
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


def is_loopback(address: str) -> bool:
    """True for an address only the host itself reaches: 127.0.0.0/8, ``::1`` or the
    name ``localhost``."""
    if address.rstrip(".").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class TraceTLS(_Strict):
    """Mutual TLS of the receiver: its certificate chain and key (PEM files) and the CA
    bundle that must have signed every client's certificate (a client without one is
    refused in the TLS handshake)."""

    cert_file: str = Field(min_length=1)
    key_file: str = Field(min_length=1)
    client_ca_file: str = Field(min_length=1)


class TraceAuth(_Strict):
    """How a client off loopback proves who it is: ``bearer_token_file`` (the token, one
    line, read at start) and/or ``tls`` (mutual TLS)."""

    bearer_token_file: str | None = Field(None, min_length=1)
    tls: TraceTLS | None = None

    @model_validator(mode="after")
    def _one_at_least(self) -> TraceAuth:
        if self.bearer_token_file is None and self.tls is None:
            raise ValueError("give bearer_token_file or tls (or both)")
        return self

    def files(self) -> list[str]:
        """Every file the authentication reads (token, certificate, key, CA)."""
        out = [self.bearer_token_file] if self.bearer_token_file else []
        if self.tls is not None:
            out += [self.tls.cert_file, self.tls.key_file, self.tls.client_ca_file]
        return out


class Forward(_Strict):
    """Re-post every accepted body, unchanged, to the platform's collector."""

    url: HttpUrl
    timeout_seconds: float = Field(5.0, gt=0, le=600)
    headers: dict[str, str] = Field(default_factory=dict)
    max_in_flight: int = Field(64, ge=1, le=10_000)


class TracesConfig(_Strict):
    """The trace receiver (see module docstring)."""

    listen: TraceListen = TraceListen()
    auth: TraceAuth | None = None
    max_connections: int = Field(256, ge=1, le=100_000)
    header_timeout_seconds: float = Field(10.0, gt=0, le=3600)
    read_timeout_seconds: float = Field(30.0, gt=0, le=3600)
    max_future_skew_seconds: float = Field(300.0, ge=0, le=86_400)
    max_past_skew_seconds: float = Field(900.0, gt=0, le=7 * 86_400)
    max_duration_seconds: float = Field(3600.0, gt=0, le=7 * 86_400)
    max_attribute_length: int = Field(1024, ge=16, le=1 << 20)
    max_models: int = Field(1000, ge=1, le=1_000_000)
    buffer_spans: int = Field(40_000, ge=1, le=100_000_000)
    max_body_bytes: int = Field(4 * 1024 * 1024, gt=0, le=256 * 1024 * 1024)
    max_spans_per_body: int = Field(8192, ge=1, le=1_000_000)
    buffer_traces: int = Field(10_000, ge=1, le=10_000_000)
    join_timeout_seconds: float = Field(10.0, gt=0, le=3600)
    settle_seconds: float = Field(5.0, ge=0, le=3600)
    vllm_model: str = "vllm"
    vllm_model_version: str = ""
    #: how long a vLLM span with a parent waits for the span of its trace naming its
    #: model (:mod:`fleetwatch.traces.callers`) before it is taken as ``vllm_model``'s
    caller_wait_seconds: float = Field(6.0, ge=0, le=600)
    forward: Forward | None = None

    @model_validator(mode="after")
    def _exposed_only_with_auth(self) -> TracesConfig:
        """A receiver reachable beyond the host must authenticate its clients."""
        if self.auth is None and not is_loopback(self.listen.address):
            raise ValueError(
                f"traces.listen.address {self.listen.address!r} is not loopback and traces.auth "
                "is not set: anyone who reaches that address could write SLO state; listen "
                "on 127.0.0.1 (the engines of the pod reach it there) or set "
                "traces.auth.bearer_token_file or traces.auth.tls")
        return self


class MetricsExport(_Strict):
    """Where and how often the normalized families (and the per-request trace histograms)
    are exported: ``endpoint`` (OTLP/HTTP protobuf, usually ``…/v1/metrics``), every
    ``interval_seconds``, each export bounded by ``timeout_seconds``, with ``headers``."""

    endpoint: HttpUrl
    interval_seconds: float = Field(30.0, gt=0, le=3600)
    timeout_seconds: float = Field(10.0, gt=0, le=600)
    headers: dict[str, str] = Field(default_factory=dict)
