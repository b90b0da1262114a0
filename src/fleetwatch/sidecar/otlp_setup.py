"""Wiring of the trace receiver into the sidecar (``traces:`` in the configuration)."""

from __future__ import annotations

from collections.abc import Callable

from fleetwatch.sidecar.otlp import TraceReceiver, receiver_metrics
from fleetwatch.sidecar.trace_config import TracesConfig
from fleetwatch.slo.engine import SLOEngine


def start_traces(cfg: TracesConfig, engine: SLOEngine | None,
                 extra: Callable[[], bytes] | None,
                 ) -> tuple[TraceReceiver, Callable[[], bytes]]:
    """The receiver (feeding ``engine``, and the OTLP metrics export when configured) and
    the ``/metrics`` extra body: ``extra``'s families followed by ``fleetwatch_traces_*``."""
    on_facts = None
    if cfg.metrics_export is not None:
        from fleetwatch.sidecar.otlp_metrics import MetricsExporter  # the 'otel' extra
        on_facts = MetricsExporter(cfg.metrics_export).record
    receiver = TraceReceiver(cfg, engine, on_facts)
    own = receiver_metrics(receiver)
    return receiver, (lambda: (extra() if extra is not None else b"") + own())
