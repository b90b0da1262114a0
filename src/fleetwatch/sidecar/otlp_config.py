"""The ``metrics_export:`` section of the sidecar configuration: the opt-in OTLP/HTTP
metrics export of the normalized schema (:mod:`fleetwatch.sidecar.otlp_metrics`).

::

    metrics_export:                               # needs the 'otel' extra
      endpoint: http://otel-collector:4318/v1/metrics
      interval_seconds: 30
      timeout_seconds: 10
      headers: {authorization: "Bearer …"}
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, HttpUrl


class MetricsExport(BaseModel):
    """Where and how often the normalized families (and the per-request trace histograms)
    are exported: ``endpoint`` (OTLP/HTTP protobuf, usually ``…/v1/metrics``), every
    ``interval_seconds``, each export bounded by ``timeout_seconds``, with ``headers``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: HttpUrl
    interval_seconds: float = Field(30.0, gt=0, le=3600)
    timeout_seconds: float = Field(10.0, gt=0, le=600)
    headers: dict[str, str] = Field(default_factory=dict)
