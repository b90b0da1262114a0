"""What ``/metrics`` serves: every part merged by one assembler, no family twice.

Parts, in precedence order (:data:`fleetwatch.exporters.assemble.PRECEDENCE`): the
normalized families of the last scrape cycle, fleetwatch's own metrics (upstream health,
``process_*``), the SLO engine's families (a callable the SLO routes give, returning
text-format bytes), and the upstream families passed through. A family or series a part
of higher precedence served already is dropped and counted in
``fleetwatch_exposition_dropped_series_total{origin}`` (the count a body shows is that of
the assemblies before it), so ``/metrics`` never carries a second HELP/TYPE for a name nor
a series twice — what ``promtool check metrics`` and Prometheus' parser require.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from prometheus_client import generate_latest

from fleetwatch.exporters.assemble import SELF, SLO, Part, assemble, parse_families
from fleetwatch.sidecar.scraper import Scraper
from fleetwatch.sidecar.selfmetrics import self_registry


class MetricsAssembler:
    """Assembles the ``/metrics`` body of a running :class:`Scraper` (see module
    docstring); ``slo_metrics`` returns the SLO engine's exposition (bytes, UTF-8);
    ``closed`` counts the HTTP connections closed by a bound, by reason."""

    def __init__(self, scraper: Scraper,
                 slo_metrics: Callable[[], bytes] | None = None,
                 closed: Counter[str] | None = None,
                 normalized: Callable[[Part], Part] | None = None) -> None:
        self.scraper = scraper
        self.slo_metrics = slo_metrics
        #: Rewrites the normalized part (the trace receiver's real Triton buckets).
        self.normalized = normalized
        #: Series dropped so far, by origin (read by the self-metrics collector).
        self.dropped: Counter[str] = Counter()
        self.registry = self_registry(scraper, self.dropped, closed)

    def body(self) -> bytes:
        """The ``/metrics`` body (text format 0.0.4, UTF-8)."""
        norm = self.scraper.normalized_part
        parts = [self.normalized(norm) if self.normalized is not None else norm,
                 Part(SELF, parse_families(generate_latest(self.registry).decode()))]
        if self.slo_metrics is not None:
            parts.append(Part(SLO, parse_families(self.slo_metrics().decode())))
        parts.append(self.scraper.passthrough_part)
        result = assemble(parts)
        self.dropped.update(result.dropped)
        self.dropped.update(self.scraper.dropped)  # left out when the cycle's parts were built
        return result.text.encode()
