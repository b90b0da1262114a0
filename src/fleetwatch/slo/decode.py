"""Snapshots → per-model intervals: what each model did between two scrapes.

A :class:`Decoder` reads the typed series of a
:class:`~fleetwatch.exporters.snapshot.Snapshot` — ``Normalized.families[i]`` maps a
series prefix to a value (a float, or number text), ``Normalized.key(prefix)`` gives its
``(sample name, label pairs)`` — and never parses exposition text. Each series is
compiled once into a *reader* (what it feeds: a bucket, a count, a gauge …); cumulative
series yield reset-aware deltas (after a reset the new value is the delta, never a
negative or lost count), gauges their value at the end of the interval.

Units: durations in seconds, counts in events, ratios 0–1, timestamps Unix seconds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fleetwatch.exporters.snapshot import SeriesKey, Snapshot
from fleetwatch.labels.schema import METRICS
from fleetwatch.slo.sli import LATENCY_METRICS, SUMMARY_METRICS
from fleetwatch.slo.spec import SLOFile
from fleetwatch.slo.state import ModelKey

if TYPE_CHECKING:
    from fleetwatch.exporters.normalize import Normalized

REQUESTS = "modelserver_requests_total"
ACTIVE = "modelserver_requests_active"
DURATION = "modelserver_request_duration_seconds"
QUEUE = "modelserver_queue_duration_seconds"
KV = "modelserver_kv_cache_usage_ratio"
GPU_USED = "modelserver_gpu_memory_used_bytes"
GPU_TOTAL = "modelserver_gpu_memory_total_bytes"

# How a normalized series feeds an interval (codes ≥ _COUNTERS are cumulative).
_SKIP, _RUNNING, _KV, _QUANTILE, _GPU_USED, _GPU_TOTAL, _WAITING = range(7)
_COUNTERS = 10
_BUCKET, _COUNT, _SUM, _REQ_GOOD, _REQ_BAD, _SUMMARY_COUNT = range(10, 16)

_NO_MODEL: ModelKey = ("", "", "")
#: ``(code, model, family, le, quantile)``: how one series feeds the interval.
Reader = tuple[int, ModelKey, str, float, str]
_SKIP_READER: Reader = (_SKIP, _NO_MODEL, "", 0.0, "")
#: Compiled readers kept before the cache is dropped (label churn).
MAX_READERS = 500_000


@dataclass
class Hist:
    """Deltas of one histogram of one model over one interval: ``count`` observations,
    ``sum`` of observed seconds, ``buckets`` upper bound ``le`` → observations ≤ it."""

    count: float = 0.0
    sum: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)


@dataclass
class Interval:
    """What one model did during one interval (deltas) and its gauges at the end.

    ``hists``: histogram family → :class:`Hist`; ``good_requests``/``total_requests``:
    finished requests (good = ``outcome="success"``); ``running_now``: the
    running-requests gauge (summed over series), None without one; ``waiting_now``: the
    waiting-requests gauge (vLLM ``num_requests_waiting``, Triton's pending count), None
    without one; ``quantiles``:
    ``(summary family, quantile label)`` → seconds; ``summary_counts``: summary family →
    Δcount; ``kv_usage``: the largest KV-cache usage ratio (0–1), None without one.
    """

    hists: dict[str, Hist] = field(default_factory=lambda: defaultdict(Hist))
    good_requests: float = 0.0
    total_requests: float = 0.0
    running_now: float | None = None
    waiting_now: float | None = None
    quantiles: dict[tuple[str, str], float] = field(default_factory=dict)
    summary_counts: dict[str, float] = field(default_factory=dict)
    kv_usage: float | None = None


@dataclass
class Decoded:
    """One snapshot decoded: ``intervals`` per model, and the fleet's GPU-memory usage
    ratio (Σ used ÷ Σ total over every target, 0–1; None without GPU series)."""

    intervals: dict[ModelKey, Interval]
    gpu_memory_ratio: float | None


def needed_families(slos: SLOFile) -> list[int]:
    """Indexes into :data:`~fleetwatch.labels.schema.METRICS` of the families the engine
    reads for these SLOs (requests, running, request/queue durations, KV cache, GPU
    memory, and each SLO's latency histogram or summary)."""
    names = {REQUESTS, ACTIVE, DURATION, QUEUE, KV, GPU_USED, GPU_TOTAL}
    for s in slos.slos:
        if s.sli.latency:
            names.add(LATENCY_METRICS[s.sli.latency.metric])
        if s.sli.timeslice:
            names.add(LATENCY_METRICS[s.sli.timeslice.metric])
            if s.sli.timeslice.quantile is not None:
                names.add(SUMMARY_METRICS[s.sli.timeslice.metric])
    return [i for i, m in enumerate(METRICS) if m.name in names]


class Decoder:
    """Turns successive snapshots into per-model :class:`Interval` deltas.

    ``CARRY_SECONDS``: how long a series' last cumulative value is kept when its target
    is down, so that the events of the gap are counted (over the longer interval) when it
    returns. ``bounds[(family, model)]`` collects the bucket bounds seen (seconds), which
    latency SLIs check their threshold against.
    """

    CARRY_SECONDS = 3600.0

    def __init__(self, families: list[int]) -> None:
        self.families = families
        self.bounds: dict[tuple[str, ModelKey], set[float]] = defaultdict(set)
        # series prefix → (last cumulative value, when seen)
        self._prev: dict[str, tuple[float, float]] = {}
        self._readers: dict[str, Reader] = {}

    def decode(self, snap: Snapshot) -> Decoded:
        """Deltas since the previous call (the first call only primes the counters:
        its deltas are zero). Call with increasing timestamps."""
        ts = snap.timestamp
        intervals: dict[ModelKey, Interval] = defaultdict(Interval)
        seen: dict[str, tuple[float, float]] = {}
        gpu_used = gpu_total = 0.0
        for normalized in snap.targets.values():
            if normalized is None:
                continue
            u, tot = self._read(normalized, intervals, seen, ts)
            gpu_used, gpu_total = gpu_used + u, gpu_total + tot
        for prefix, (value, when) in self._prev.items():
            if prefix not in seen and ts - when <= self.CARRY_SECONDS:
                seen[prefix] = (value, when)
        self._prev = seen
        return Decoded(intervals, gpu_used / gpu_total if gpu_total > 0 else None)

    def forget(self, models: set[ModelKey]) -> None:
        """Drop the bucket bounds seen for ``models`` (forgotten by the engine)."""
        for k in [k for k in self.bounds if k[1] in models]:
            del self.bounds[k]

    def _reader(self, fam_name: str, key: SeriesKey) -> Reader:
        """Compile how a normalized series feeds the interval (once per series)."""
        name, pairs = key
        labels = dict(pairs)
        if fam_name == GPU_USED:
            return (_GPU_USED, _NO_MODEL, "", 0.0, "")
        if fam_name == GPU_TOTAL:
            return (_GPU_TOTAL, _NO_MODEL, "", 0.0, "")
        if "model" not in labels:
            return _SKIP_READER
        mk = (labels["model"], labels.get("model_version", ""), labels["backend"])
        if fam_name == REQUESTS:
            code = _REQ_GOOD if labels.get("outcome") == "success" else _REQ_BAD
            return (code, mk, "", 0.0, "")
        if fam_name == ACTIVE:
            state = labels.get("state")
            code = _RUNNING if state == "running" else _WAITING if state == "waiting" else _SKIP
            return (code, mk, "", 0.0, "")
        if fam_name == KV:
            return (_KV, mk, "", 0.0, "")
        summary = fam_name.endswith("_summary_seconds")
        if name.endswith("_bucket"):
            le = float(labels["le"])
            self.bounds[(fam_name, mk)].add(le)
            return (_BUCKET, mk, fam_name, le, "")
        if name.endswith("_sum"):
            return (_SKIP if summary else _SUM, mk, fam_name, 0.0, "")
        if name.endswith("_count"):
            return (_SUMMARY_COUNT if summary else _COUNT, mk, fam_name, 0.0, "")
        if "quantile" in labels:
            return (_QUANTILE, mk, fam_name, 0.0, labels["quantile"])
        return _SKIP_READER

    def _read(self, n: Normalized, intervals: dict[ModelKey, Interval],
              seen: dict[str, tuple[float, float]], ts: float) -> tuple[float, float]:
        """The hot loop: every needed series of one target into ``intervals``; returns
        the target's (GPU memory used, total) in bytes."""
        gpu_used = gpu_total = 0.0
        readers = self._readers
        prev = self._prev
        families, key = n.families, n.key
        for idx in self.families:
            fam_name = METRICS[idx].name
            for prefix, raw in families[idx].items():
                r = readers.get(prefix)
                if r is None:
                    if len(readers) > MAX_READERS:
                        readers.clear()
                    r = readers[prefix] = self._reader(fam_name, key(prefix))
                code, mk, fam, le, quantile = r
                if code == _SKIP:
                    continue
                value = raw if raw.__class__ is float else float(raw)
                if value - value != 0.0 or (value < 0.0 and code >= _COUNTERS):
                    continue  # NaN/±Inf, a negative count: never a delta nor a gauge
                if code >= _COUNTERS:  # cumulative: take the reset-aware delta
                    seen[prefix] = (value, ts)
                    before = prev.get(prefix)
                    d = 0.0 if before is None else (
                        value - before[0] if value >= before[0] else value)
                    iv = intervals[mk]
                    if code == _BUCKET:
                        h = iv.hists[fam]
                        h.buckets[le] = h.buckets.get(le, 0.0) + d
                    elif code == _COUNT:
                        iv.hists[fam].count += d
                    elif code == _SUM:
                        iv.hists[fam].sum += d
                    elif code == _REQ_GOOD:
                        iv.total_requests += d
                        iv.good_requests += d
                    elif code == _REQ_BAD:
                        iv.total_requests += d
                    else:  # _SUMMARY_COUNT
                        iv.summary_counts[fam] = iv.summary_counts.get(fam, 0.0) + d
                elif code == _RUNNING:
                    iv = intervals[mk]
                    iv.running_now = (iv.running_now or 0.0) + value
                elif code == _WAITING:
                    iv = intervals[mk]
                    iv.waiting_now = (iv.waiting_now or 0.0) + value
                elif code == _KV:
                    iv = intervals[mk]
                    iv.kv_usage = max(iv.kv_usage or 0.0, value)
                elif code == _QUANTILE:
                    intervals[mk].quantiles[(fam, quantile)] = value
                elif code == _GPU_USED:
                    gpu_used += value
                elif code == _GPU_TOTAL:
                    gpu_total += value
        return gpu_used, gpu_total

