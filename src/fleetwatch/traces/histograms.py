"""Latency histograms from traces: real buckets where the metrics have none.

Triton 2.51 exports only µs counters for request and queue time, so the normalized
``modelserver_request_duration_seconds`` / ``modelserver_queue_duration_seconds`` of a
Triton model are mean-only (the ``+Inf`` bucket, sum and count). For every Triton model
seen in traces, :class:`TraceHistograms` accumulates each traced request's ``e2e`` and
``queue`` seconds (:mod:`.facts`) into :data:`BOUNDS`, and :func:`overlay` replaces the
mean-only series of that model in the normalized families by these buckets (same labels,
so dashboards and rules keep working; sum and count then come from traces too: traced
requests only, not scaled by sampling). vLLM models keep their native buckets: they are
not overlaid (``--metrics`` of ``fleetwatch traces`` still shows theirs from spans).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fleetwatch.exporters.assemble import Family, Part
from fleetwatch.exporters.parser import (
    ExpositionError,
    format_value,
    split_key,
    split_sample_line,
)
from fleetwatch.labels.text import LabelPairs, render_labels
from fleetwatch.slo.state import ModelKey
from fleetwatch.traces.facts import RequestFacts

#: The one boundary set of trace histograms, seconds (1-2-5 steps, 1 ms … 60 s).
BOUNDS: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
                             1.0, 2.0, 5.0, 10.0, 20.0, 60.0)
REQUEST = "modelserver_request_duration_seconds"
QUEUE = "modelserver_queue_duration_seconds"
TTFT = "modelserver_time_to_first_token_seconds"
TPOT = "modelserver_time_per_output_token_seconds"
#: Normalized family → the fact it is made of (``RequestFacts.metric`` short name).
FAMILIES = {REQUEST: "request", QUEUE: "queue", TTFT: "ttft", TPOT: "tpot"}


@dataclass
class Histogram:
    """Non-cumulative counts per bucket of ``bounds`` (+ overflow), sum and count."""

    bounds: Sequence[float] = BOUNDS
    counts: list[int] = field(default_factory=list)
    sum: float = 0.0
    count: int = 0

    def observe(self, v: float) -> None:
        """Add one observation (seconds)."""
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.sum += v
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """``(le, cumulative count)`` for every bound and ``+Inf``."""
        out, acc = [], 0
        counts = self.counts or [0] * (len(self.bounds) + 1)
        for le, c in zip([*self.bounds, math.inf], counts, strict=True):
            acc += c
            out.append((le, acc))
        return out


class TraceHistograms:
    """Per (family, model) histograms of traced requests. ``families``: which normalized
    families to keep (default request and queue time) and ``sources`` which request
    sources (default Triton only, see module docstring)."""

    def __init__(self, families: Iterable[str] = (REQUEST, QUEUE),
                 sources: Iterable[str] = ("triton",)) -> None:
        self.families = tuple(families)
        self.sources = frozenset(sources)
        self.hists: dict[tuple[str, ModelKey], Histogram] = {}
        #: model → when its last request was added (Unix seconds, :meth:`forget`)
        self.seen: dict[ModelKey, float] = {}

    def add(self, facts: Iterable[RequestFacts], now: float | None = None) -> None:
        """Observe every request's values (``now``: the caller's Unix seconds, when they
        arrived; default each request's end)."""
        for f in facts:
            if f.source not in self.sources:
                continue
            mk = ModelKey(f.model, f.model_version, f.backend)
            self.seen[mk] = f.end_unix_s if now is None else now
            for fam in self.families:
                v = f.metric(FAMILIES[fam])
                if v is not None:
                    self.hists.setdefault((fam, mk), Histogram()).observe(v)

    def forget(self, horizon: float) -> list[ModelKey]:
        """Drop the histograms of the models whose last request was added before
        ``horizon`` (Unix seconds; the engine's ``limits.forget_model_after`` timer);
        return them."""
        gone = [mk for mk, t in self.seen.items() if t < horizon]
        for mk in gone:
            del self.seen[mk]
            for fam in self.families:
                self.hists.pop((fam, mk), None)
        return gone

    def models(self, family: str) -> set[ModelKey]:
        """The models with a histogram of ``family``."""
        return {mk for fam, mk in self.hists if fam == family}

    def lines(self, family: str, mk: ModelKey, labels: LabelPairs) -> list[str]:
        """The sample lines of one model's histogram with the series' ``labels``."""
        h = self.hists[(family, mk)]
        out = []
        for le, c in h.cumulative():
            lab = render_labels((*labels, ("le", format_value(le))))
            out.append(f"{family}_bucket{lab} {c}")
        base = render_labels(labels)
        out += [f"{family}_sum{base} {format_value(h.sum)}", f"{family}_count{base} {h.count}"]
        return out

    def families_text(self) -> list[Family]:
        """Every histogram as its own families (labels model, model_version, backend)."""
        out: list[Family] = []
        for fam in self.families:
            lines: list[str] = []
            for mk in sorted(self.models(fam)):
                labels = (("model", mk.model), ("model_version", mk.model_version),
                          ("backend", mk.backend))
                lines += self.lines(fam, mk, labels)
            if lines:
                out.append(Family(fam, "histogram", f"{fam} from traces (seconds).", lines))
        return out


def _model_of(labels: LabelPairs) -> ModelKey:
    d = dict(labels)
    return ModelKey(d.get("model", ""), d.get("model_version", ""), d.get("backend", ""))


def overlay(part: Part, hists: TraceHistograms) -> Part:
    """``part`` (the normalized families) with the series of every model traced in
    ``hists`` replaced by the trace buckets (keeping the series' other labels); a traced
    model without a series gets one labelled model, model_version, backend."""
    families: list[Family] = []
    done: set[str] = set()
    for fam in part.families:
        if fam.name not in hists.families or not hists.models(fam.name):
            families.append(fam)
            continue
        done.add(fam.name)
        traced = hists.models(fam.name)
        kept: list[str] = []
        seen: dict[ModelKey, LabelPairs] = {}
        for line in fam.lines:
            split = split_sample_line(line)
            try:
                labels = split_key(split[0])[1] if isinstance(split, tuple) else ()
            except ExpositionError:
                labels = ()
            base = tuple(p for p in labels if p[0] != "le")
            mk = _model_of(base)
            if mk in traced:
                seen.setdefault(mk, base)
            else:
                kept.append(line)
        for mk in sorted(traced):
            labels = seen.get(mk) or (("model", mk.model), ("model_version", mk.model_version),
                                      ("backend", mk.backend))
            kept += hists.lines(fam.name, mk, labels)
        families.append(Family(fam.name, fam.type, fam.help, kept))
    families += [f for f in hists.families_text() if f.name not in done]
    return Part(part.origin, families, part.check_names, part.check_series)
