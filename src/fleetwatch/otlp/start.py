"""Wiring of the OTLP parts into the sidecar: the trace receiver (``traces:``) and the
metrics export (``metrics_export:``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from fleetwatch.exporters.assemble import Part
from fleetwatch.otlp.auth import ListenGuard
from fleetwatch.otlp.config import MetricsExport, TracesConfig
from fleetwatch.otlp.receiver import TraceReceiver, receiver_metrics, run_receiver
from fleetwatch.slo.engine import SLOEngine
from fleetwatch.slo.state import TraceEvent
from fleetwatch.traces.facts import RequestFacts

if TYPE_CHECKING:
    from fleetwatch.otlp.metrics_export import MetricsExporter


class EngineWorker(Protocol):
    """What the receiver needs of the sidecar's engine worker
    (:class:`fleetwatch.sidecar.slo_worker.EngineWorker`): the engine whose SLOs judge the
    requests, and the call that hands it judged events on the worker's thread."""

    @property
    def engine(self) -> SLOEngine: ...

    def add_events(self, events: list[TraceEvent]) -> None: ...


class OTLPExtraMissing(RuntimeError):
    """``metrics_export:`` is configured but opentelemetry-sdk is not installed."""


#: Makes the connection guard of a listener from (max_connections, header_timeout_seconds).
GuardFactory = Callable[[int, float], ListenGuard]


def start_traces(cfg: TracesConfig, worker: EngineWorker | None,
                 extra: Callable[[], bytes] | None,
                 on_facts: Callable[[list[RequestFacts]], None] | None = None,
                 max_label_value_length: int = 4096,
                 ) -> tuple[TraceReceiver, Callable[[], bytes]]:
    """The receiver (its events to the engine ``worker`` runs, its joined requests to
    ``on_facts``: the metrics export's per-request histograms; model names bounded by
    ``max_label_value_length``) and the ``/metrics`` extra body: ``extra``'s families
    followed by ``fleetwatch_traces_*``. Raises
    :class:`~fleetwatch.otlp.auth.OTLPAuthError` for an unreadable token file."""
    receiver = TraceReceiver(cfg, worker.engine if worker is not None else None, on_facts,
                             worker.add_events if worker is not None else None,
                             max_label_value_length)
    own = receiver_metrics(receiver)
    return receiver, (lambda: (extra() if extra is not None else b"") + own())


def metrics_exporter(cfg: MetricsExport) -> MetricsExporter:
    """The OTLP metrics exporter; :class:`OTLPExtraMissing` without the ``otel`` extra."""
    try:
        from fleetwatch.otlp.metrics_export import MetricsExporter
    except ImportError as exc:
        raise OTLPExtraMissing(f"metrics_export needs opentelemetry-sdk and "
                               f"opentelemetry-exporter-otlp-proto-http: pip install "
                               f"'fleetwatch[otel]' ({exc})") from None
    return MetricsExporter(cfg)


def start_otlp(traces: TracesConfig | None, export: MetricsExport | None,
               normalized: Callable[[], Part], worker: EngineWorker | None,
               extra: Callable[[], bytes] | None, stop: asyncio.Event,
               guard: GuardFactory | None = None, max_label_value_length: int = 4096,
               ) -> tuple[TraceReceiver | None, Callable[[], bytes] | None,
                          list[asyncio.Task[None]]]:
    """Start what is configured, on the running loop, until ``stop``: ``(receiver, the
    /metrics extra body, the tasks to await)``. The export reads ``normalized()`` (the
    scraper's normalized part) with the receiver's Triton buckets overlaid, as ``/metrics``
    serves it. ``guard`` makes the receiver port's connection guard (the sidecar's, with
    ``traces.max_connections`` and ``traces.header_timeout_seconds``). Eight parameters:
    the sidecar's parts this wiring joins, each used once."""
    exporter = metrics_exporter(export) if export is not None else None
    receiver, tasks = None, []
    if traces is not None:
        receiver, extra = start_traces(traces, worker, extra,
                                       exporter.record if exporter is not None else None,
                                       max_label_value_length)
        g = guard(traces.max_connections, traces.header_timeout_seconds) \
            if guard is not None else None
        tasks.append(asyncio.create_task(run_receiver(receiver, stop, guard=g)))
    if exporter is not None:
        rec = receiver
        exporter.normalized = (normalized if rec is None
                               else (lambda: rec.normalized(normalized())))
        tasks.append(asyncio.create_task(exporter.run(stop)))
    return receiver, extra, tasks
