"""fleetwatch's own health metrics (``fleetwatch_upstream_*``), exposed with prometheus_client.

A custom collector reads the scraper's target states at collection time, so the values are
always current; names, help and labels come from :data:`fleetwatch.labels.schema.SELF_METRICS`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetwatch.exporters.assemble import PRECEDENCE
from fleetwatch.exporters.validate import NORMALIZE_TIMEOUT, REASONS, TOO_MANY_SERIES
from fleetwatch.labels.schema import METRICS_BY_NAME
from fleetwatch.sidecar.scraper import Scraper

#: Every scrape error reason, so each appears at 0 before it first happens.
ERROR_REASONS = ("timeout", "connection", "http_status", "not_metrics", "empty", "decode",
                 "parse", "too_large", "truncated", TOO_MANY_SERIES, NORMALIZE_TIMEOUT,
                 "internal")
#: Why the HTTP server closed a connection (fleetwatch_http_connections_closed_total).
CLOSE_REASONS = ("max_connections", "header_timeout")


def _family(name: str) -> CounterMetricFamily | GaugeMetricFamily:
    mdef = METRICS_BY_NAME[name]
    base = name[:-6] if mdef.type == "counter" else name
    cls = CounterMetricFamily if mdef.type == "counter" else GaugeMetricFamily
    return cls(base, mdef.exposition_help, labels=list(mdef.labels))


class UpstreamCollector(Collector):
    """Collects ``fleetwatch_upstream_*`` from a :class:`Scraper`,
    ``fleetwatch_exposition_dropped_series_total`` from ``dropped`` (series by origin, kept
    by the /metrics assembler) and ``fleetwatch_http_connections_closed_total`` from
    ``closed`` (connections by reason, kept by the HTTP server's guard)."""

    def __init__(self, scraper: Scraper, dropped: Counter[str] | None = None,
                 closed: Counter[str] | None = None) -> None:
        self.scraper = scraper
        self.dropped = dropped if dropped is not None else Counter()
        self.closed = closed if closed is not None else Counter()

    def collect(self) -> Iterator[Metric]:
        up = _family("fleetwatch_upstream_up")
        dur = _family("fleetwatch_upstream_scrape_duration_seconds")
        errs = _family("fleetwatch_upstream_scrape_errors_total")
        last = _family("fleetwatch_upstream_last_success_timestamp_seconds")
        series = _family("fleetwatch_upstream_series")
        unmapped = _family("fleetwatch_upstream_unmapped_families")
        invalid = _family("fleetwatch_upstream_invalid_lines_total")
        refused = _family("fleetwatch_upstream_invalid_samples_total")
        ready = _family("fleetwatch_upstream_model_ready")
        cold = _family("fleetwatch_model_cold_start_seconds")
        for name, st in self.scraper.states.items():
            up.add_metric([name], 1.0 if st.up else 0.0)
            dur.add_metric([name], st.duration)
            for reason in ERROR_REASONS:
                errs.add_metric([name, reason], float(st.errors.get(reason, 0)))
            if st.last_success is not None:
                last.add_metric([name], st.last_success)
            n = st.normalized if st.up else None
            series.add_metric([name], float(n.series_count if n else 0))
            unmapped.add_metric([name], float(len(n.unmapped) if n else 0))
            invalid.add_metric([name], float(st.invalid_lines_total))
            for reason in REASONS:
                refused.add_metric([name, reason], float(st.invalid_samples.get(reason, 0)))
            for model, ok in sorted(st.models_ready.items()):
                ready.add_metric([name, model], 1.0 if ok else 0.0)
        for (name, model), seconds in sorted(self.scraper.cold_starts.seconds.items()):
            cold.add_metric([name, model], seconds)
        dropped = _family("fleetwatch_exposition_dropped_series_total")
        for origin in PRECEDENCE:
            dropped.add_metric([origin], float(self.dropped.get(origin, 0)))
        closed = _family("fleetwatch_http_connections_closed_total")
        for reason in CLOSE_REASONS:
            closed.add_metric([reason], float(self.closed.get(reason, 0)))
        yield from (up, dur, errs, last, series, unmapped, invalid, refused, ready, cold,
                    dropped, closed)
        if self.scraper.warmup is not None:  # fleetwatch_model_warm
            yield from self.scraper.warmup.collect()


def self_registry(scraper: Scraper, dropped: Counter[str] | None = None,
                  closed: Counter[str] | None = None) -> CollectorRegistry:
    """A registry with the upstream collector (``dropped``, ``closed``: see
    :class:`UpstreamCollector`) and the sidecar's own process metrics (prometheus_client's
    ``process_*``)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(UpstreamCollector(scraper, dropped, closed))
    ProcessCollector(registry=reg)
    return reg
