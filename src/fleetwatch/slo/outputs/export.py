"""Prometheus exposition of the SLO engine (``fleetwatch_slo_*``, ``fleetwatch_autoscaling_*``)
through a prometheus_client collector; names, help and label sets come from the schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetwatch.labels.schema import METRICS_BY_NAME

if TYPE_CHECKING:  # the engine imports the outputs: the collector only calls it
    from fleetwatch.slo.engine import SLOEngine

SLO_FAMILIES = tuple(n for n in METRICS_BY_NAME
                     if n.startswith(("fleetwatch_slo_", "fleetwatch_autoscaling_")))


class SLOCollector(Collector):
    """Collects the engine's current state at scrape time."""

    def __init__(self, engine: SLOEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        fams: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for name in SLO_FAMILIES:
            mdef = METRICS_BY_NAME[name]
            if mdef.type == "counter":
                fams[name] = CounterMetricFamily(name[:-6], mdef.help, labels=list(mdef.labels))
            else:
                fams[name] = GaugeMetricFamily(name, mdef.help, labels=list(mdef.labels))
        for name, labels, value in self.engine.iter_metrics():
            mdef = METRICS_BY_NAME[name]
            fams[name].add_metric([labels[k] for k in mdef.labels], value)
        yield from fams.values()


def slo_registry(engine: SLOEngine) -> CollectorRegistry:
    """A registry holding only the engine's collector."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(SLOCollector(engine))
    return reg
