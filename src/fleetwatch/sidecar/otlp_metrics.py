"""Opt-in OTLP/HTTP metrics export of the trace-derived latencies (opentelemetry-sdk).

Every joined request is recorded in SDK histograms named and bucketed as
:mod:`fleetwatch.traces.semconv` says (GenAI names for LLM models, ``modelserver.*``
otherwise), exported every ``interval_seconds`` to ``endpoint`` with ``headers``
(``PeriodicExportingMetricReader`` + ``OTLPMetricExporter``, cumulative temporality).
Needs the ``otel`` extra (``pip install 'fleetwatch[otel]'``); the receiver itself does not.
"""

from __future__ import annotations

from typing import Any

from fleetwatch.sidecar.trace_config import MetricsExport
from fleetwatch.traces.facts import RequestFacts
from fleetwatch.traces.semconv import INSTRUMENTS, SEMCONV_VERSION, attributes, instruments_for

SCOPE = "fleetwatch.traces"


class MetricsExporter:
    """Records requests and exports them (see module docstring). ``exporter``: any SDK
    ``MetricExporter`` (default: OTLP/HTTP to ``cfg.endpoint``)."""

    def __init__(self, cfg: MetricsExport, exporter: Any = None) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
        from opentelemetry.sdk.resources import Resource

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            exporter = OTLPMetricExporter(endpoint=str(cfg.endpoint), headers=cfg.headers)
        self.cfg = cfg
        self.reader = PeriodicExportingMetricReader(
            exporter, export_interval_millis=cfg.interval_seconds * 1000)
        views = [View(instrument_name=i.name,
                      aggregation=ExplicitBucketHistogramAggregation(list(i.buckets)))
                 for i in INSTRUMENTS]
        self.provider = MeterProvider(
            metric_readers=[self.reader], views=views,
            resource=Resource.create({"service.name": "fleetwatch"}))
        meter = self.provider.get_meter(
            SCOPE, schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}")
        self._hist = {i.name: meter.create_histogram(i.name, unit="s",
                                                     description=i.description)
                      for i in INSTRUMENTS}

    def record(self, facts: list[RequestFacts]) -> None:
        """Record each request's values (LLM: vLLM requests)."""
        for f in facts:
            llm = f.source == "vllm"
            attrs = attributes(f.model, f.model_version, llm, self.cfg.provider_name)
            for inst in instruments_for(llm):
                v = f.metric(inst.fact)
                if v is not None:
                    self._hist[inst.name].record(v, attrs)

    def flush(self) -> None:
        """Export now (tests, shutdown)."""
        self.provider.force_flush()

    def shutdown(self) -> None:
        """Final export and stop the reader's thread."""
        self.provider.shutdown()
