"""Opt-in OTLP/HTTP metrics export of the normalized schema (``metrics_export:``), through
opentelemetry-sdk (the ``otel`` extra: ``pip install 'fleetwatch[otel]'``).

Every ``interval_seconds`` (:meth:`MetricsExporter.run`, on the sidecar's event loop) one
export request is built and handed to the SDK's ``OTLPMetricExporter`` (protobuf to
``endpoint`` with ``headers``, bounded by ``timeout_seconds``, in a worker thread; while
one is in flight the next is skipped). Under the resource ``service.name=fleetwatch`` and
the schema URL of the conventions followed (:data:`~fleetwatch.otlp.semconv.SCHEMA_URL`):

* scope ``fleetwatch.normalized`` — every normalized ``modelserver_*`` family as
  ``/metrics`` serves it (Triton's trace buckets overlaid): counters as cumulative
  monotonic sums, gauges as gauges, histograms with their buckets as cumulative
  explicit-bucket histograms (no min/max: the sources do not give them). Names, units,
  attributes and buckets follow :mod:`fleetwatch.otlp.semconv` (GenAI names for LLM
  models only). Summaries (Triton's 60 s sliding quantiles) are not exported: the SDK's
  data model has no summary, and such quantiles do not aggregate anyway. A series' start
  time is the export that first saw it, renewed when its value (a histogram's count)
  decreases — an upstream restart — as OTLP's cumulative temporality requires;
* scope ``fleetwatch.traces`` — per-request histograms of the joined trace requests (SDK
  histogram instruments, :data:`~fleetwatch.otlp.semconv.INSTRUMENTS`), when traces are
  received.

A failed export is logged (at most once a minute) and never stops the sidecar.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    InMemoryMetricReader,
    Metric,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from fleetwatch.exporters.assemble import Family, Part
from fleetwatch.exporters.parser import ExpositionError, parse_value, split_key, split_sample_line
from fleetwatch.labels.schema import METRICS_BY_NAME, MetricDef
from fleetwatch.otlp.config import MetricsExport
from fleetwatch.otlp.semconv import (
    INSTRUMENT_BUCKETS,
    RECOMMENDED_BUCKETS,
    SCHEMA_URL,
    attributes,
    instruments_for,
    is_llm,
    metric_name,
    unit,
)
from fleetwatch.traces.facts import RequestFacts

log = logging.getLogger(__name__)

NORMALIZED_SCOPE = "fleetwatch.normalized"
TRACES_SCOPE = "fleetwatch.traces"
CUMULATIVE = AggregationTemporality.CUMULATIVE
FAIL_LOG_SECONDS = 60.0
Labels = dict[str, str]


def _samples(fam: Family) -> Iterator[tuple[str, Labels, float]]:
    """``(sample name, labels, value)`` of a family's lines (a malformed one skipped)."""
    for line in fam.lines:
        split = split_sample_line(line)
        if isinstance(split, str):
            continue
        try:
            name, labels = split_key(split[0])
            yield name, dict(labels), parse_value(split[1])
        except ExpositionError:
            continue


def _buckets(les: list[tuple[float, float]], count: float,
             name: str) -> tuple[list[float], list[int]]:
    """Explicit bounds and per-bucket counts from cumulative ``(le, count)`` pairs: the
    recommended GenAI bounds of ``name`` when all are among the source's (exact), else
    the source's own finite bounds."""
    cum = {le: c for le, c in les if math.isfinite(le)}
    rec = RECOMMENDED_BUCKETS.get(name)
    bounds = list(rec) if rec is not None and set(rec) <= set(cum) else sorted(cum)
    cumulative = [cum[b] for b in bounds] + [count]
    counts, prev = [], 0.0
    for c in cumulative:
        counts.append(max(0, round(c - prev)))
        prev = max(prev, c)
    return bounds, counts


class NormalizedConverter:
    """Normalized families → SDK ``Metric`` objects (module docstring), remembering each
    series' start time."""

    def __init__(self) -> None:
        #: (OTLP name, attributes) → (start ns, last value or count)
        self._starts: dict[tuple[str, frozenset[tuple[str, str]]], tuple[int, float]] = {}

    def _start(self, name: str, attrs: Labels, value: float, now_ns: int,
               seen: set[tuple[str, frozenset[tuple[str, str]]]]) -> int:
        key = (name, frozenset(attrs.items()))
        seen.add(key)
        old = self._starts.get(key)
        start = now_ns if old is None or value < old[1] else old[0]
        self._starts[key] = (start, value)
        return start

    def metrics(self, families: Iterable[Family], now_ns: int) -> list[Metric]:
        """The metrics of every normalized ``modelserver_*`` family but summaries."""
        seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
        by_name: dict[str, tuple[MetricDef, list[Any]]] = {}
        for fam in families:
            mdef = METRICS_BY_NAME.get(fam.name)
            if mdef is None or not mdef.name.startswith("modelserver_") \
                    or mdef.type == "summary":
                continue
            points = (self._histogram(mdef, fam, now_ns, seen) if mdef.type == "histogram"
                      else self._numbers(mdef, fam, now_ns, seen))
            for name, pts in points.items():
                by_name.setdefault(name, (mdef, []))[1].extend(pts)
        out: list[Metric] = []
        for name, (mdef, pts) in by_name.items():
            data: Any
            if mdef.type == "histogram":
                data = Histogram(pts, CUMULATIVE)
            elif mdef.type == "counter":
                data = Sum(pts, CUMULATIVE, is_monotonic=True)
            else:
                data = Gauge(pts)
            out.append(Metric(name, mdef.help, unit(mdef), data))
        self._starts = {k: v for k, v in self._starts.items() if k in seen}
        return out

    def _numbers(self, mdef: MetricDef, fam: Family, now_ns: int,
                 seen: set[tuple[str, frozenset[tuple[str, str]]]],
                 ) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for _sample, labels, v in _samples(fam):
            llm = is_llm(labels.get("runtime", ""))
            name = metric_name(mdef, llm)
            attrs = attributes(labels, name, llm)
            start = self._start(name, attrs, v, now_ns, seen) if mdef.type == "counter" \
                else now_ns
            out.setdefault(name, []).append(NumberDataPoint(attrs, start, now_ns, v))
        return out

    def _histogram(self, mdef: MetricDef, fam: Family, now_ns: int,
                   seen: set[tuple[str, frozenset[tuple[str, str]]]],
                   ) -> dict[str, list[Any]]:
        groups: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
        for sample, labels, v in _samples(fam):
            le = labels.pop("le", None)
            g = groups.setdefault(tuple(labels.items()), {"les": [], "sum": 0.0, "count": None})
            if sample.endswith("_bucket") and le is not None:
                try:
                    g["les"].append((parse_value(le), v))
                except ExpositionError:
                    continue
            elif sample.endswith("_sum"):
                g["sum"] = v
            elif sample.endswith("_count"):
                g["count"] = v
        out: dict[str, list[Any]] = {}
        for key, g in groups.items():
            labels = dict(key)
            inf = [c for le, c in g["les"] if le == math.inf]
            count = g["count"] if g["count"] is not None else (inf[0] if inf else None)
            if count is None or not math.isfinite(count):
                continue
            llm = is_llm(labels.get("runtime", ""))
            name = metric_name(mdef, llm)
            attrs = attributes(labels, name, llm)
            bounds, counts = _buckets(g["les"], count, name)
            start = self._start(name, attrs, count, now_ns, seen)
            out.setdefault(name, []).append(HistogramDataPoint(  # min, max: unknown (unset)
                attrs, start, now_ns, round(count), g["sum"], counts, bounds,
                cast(float, None), cast(float, None)))
        return out


class MetricsExporter:
    """The export (module docstring). ``normalized``: the normalized part as ``/metrics``
    serves it, read at each export (None: only the trace histograms); ``exporter``: any
    SDK ``MetricExporter`` (default: OTLP/HTTP to ``cfg.endpoint``)."""

    def __init__(self, cfg: MetricsExport, normalized: Callable[[], Part] | None = None,
                 exporter: MetricExporter | None = None) -> None:
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            exporter = OTLPMetricExporter(endpoint=str(cfg.endpoint), headers=cfg.headers,
                                          timeout=cfg.timeout_seconds)
        self.cfg = cfg
        self.exporter = exporter
        self.normalized = normalized
        self.converter = NormalizedConverter()
        self.resource = Resource.create({"service.name": "fleetwatch"})
        self.reader = InMemoryMetricReader()
        views = [View(instrument_name=name,
                      aggregation=ExplicitBucketHistogramAggregation(list(buckets)))
                 for name, buckets in INSTRUMENT_BUCKETS.items()]
        self.provider = MeterProvider(metric_readers=[self.reader], views=views,
                                      resource=self.resource)
        meter = self.provider.get_meter(TRACES_SCOPE, schema_url=SCHEMA_URL)
        self._hist = {name: meter.create_histogram(name, unit="s")
                      for name in INSTRUMENT_BUCKETS}
        self.results: dict[str, int] = {"ok": 0, "error": 0, "skipped": 0}
        self._in_flight = False
        self._failed_logged = -math.inf

    def record(self, facts: list[RequestFacts]) -> None:
        """Record each joined request's values (LLM: vLLM requests)."""
        for f in facts:
            llm = f.source == "vllm"
            for inst in instruments_for(llm):
                v = f.metric(inst.fact)
                if v is not None:
                    labels = {"model": f.model, "model_version": f.model_version,
                              "backend": f.backend}
                    self._hist[inst.name].record(v, attributes(labels, inst.name, llm))

    def collect(self, now_ns: int | None = None) -> MetricsData:
        """One export request's data: the normalized scope, then the traces scope."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        scopes = []
        if self.normalized is not None:
            metrics = self.converter.metrics(self.normalized().families, now_ns)
            scopes.append(ScopeMetrics(InstrumentationScope(NORMALIZED_SCOPE,
                                                            schema_url=SCHEMA_URL),
                                       metrics, SCHEMA_URL))
        traced = self.reader.get_metrics_data()
        if traced is not None:
            scopes += [s for rm in traced.resource_metrics for s in rm.scope_metrics]
        return MetricsData([ResourceMetrics(self.resource, scopes, SCHEMA_URL)])

    def _export(self, data: MetricsData) -> bool:
        try:
            ok = self.exporter.export(data, timeout_millis=self.cfg.timeout_seconds * 1000) \
                == MetricExportResult.SUCCESS
        except Exception as exc:  # an exporter bug must not stop the sidecar
            log.debug("OTLP metrics export raised: %r", exc)
            ok = False
        self.results["ok" if ok else "error"] += 1
        now = time.monotonic()
        if not ok and now - self._failed_logged >= FAIL_LOG_SECONDS:
            self._failed_logged = now
            log.warning("OTLP metrics export to %s failed (%d failures so far)",
                        self.cfg.endpoint, self.results["error"])
        return ok

    def export(self) -> bool:
        """Collect and export now, in this thread (tests, shutdown); True on success."""
        return self._export(self.collect())

    async def run(self, stop: asyncio.Event) -> None:
        """Export every ``interval_seconds`` until ``stop``, then once more, and shut
        down."""
        tasks: set[asyncio.Task[bool]] = set()
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.cfg.interval_seconds)
            if self._in_flight:
                self.results["skipped"] += 1
                continue
            data = self.collect()  # on the loop: the receiver's state is not shared
            self._in_flight = True
            task = asyncio.create_task(asyncio.to_thread(self._export, data))
            tasks.add(task)
            task.add_done_callback(self._done)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(self.shutdown)

    def _done(self, _task: asyncio.Task[bool]) -> None:
        self._in_flight = False

    def shutdown(self) -> None:
        """Stop the SDK parts (the exporter's session, the meter provider)."""
        self.provider.shutdown()
        self.exporter.shutdown()
