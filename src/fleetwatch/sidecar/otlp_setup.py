"""Wiring of the trace receiver into the sidecar (``traces:`` in the configuration)."""

from __future__ import annotations

from collections.abc import Callable

from fleetwatch.sidecar.otlp import TraceReceiver, receiver_metrics
from fleetwatch.sidecar.slo_worker import EngineWorker
from fleetwatch.sidecar.trace_config import TracesConfig


def start_traces(cfg: TracesConfig, worker: EngineWorker | None,
                 extra: Callable[[], bytes] | None,
                 ) -> tuple[TraceReceiver, Callable[[], bytes]]:
    """The receiver (its events to the engine ``worker`` runs, and the OTLP metrics export
    when configured) and the ``/metrics`` extra body: ``extra``'s families followed by
    ``fleetwatch_traces_*``."""
    on_facts = None
    if cfg.metrics_export is not None:
        from fleetwatch.sidecar.otlp_metrics import MetricsExporter  # the 'otel' extra
        on_facts = MetricsExporter(cfg.metrics_export).record
    receiver = TraceReceiver(cfg, worker.engine if worker is not None else None, on_facts,
                             worker.add_events if worker is not None else None)
    own = receiver_metrics(receiver)
    return receiver, (lambda: (extra() if extra is not None else b"") + own())
