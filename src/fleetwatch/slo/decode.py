"""Snapshots → per-model intervals: what each model did between two scrapes.

A :class:`Decoder` reads the typed series of a
:class:`~fleetwatch.exporters.snapshot.Snapshot` — ``Normalized.families[i]`` maps a
series prefix to a value (a float, or number text; ``Normalized.numbers`` has them as
floats, parsed once by the normalizer), ``Normalized.key(prefix)`` gives its
``(sample name, label pairs)`` — and never parses exposition text. Per target it compiles
a :class:`Plan` once for the target's set of series (what each series feeds: a bucket, a
count, a gauge …, as index arrays); while the set is unchanged (label sets repeat every
scrape) an update is one pass converting the values to a float array and vectorized
arithmetic over it (numpy): reset-aware deltas of the cumulative series (after a reset
the new value is the delta, never a negative or lost count), gauges at the end of the
interval, summed per model and field with ``bincount``. A changed series set compiles a
new plan, carrying the last cumulative values over by series.

Units: durations in seconds, counts in events, ratios 0–1, timestamps Unix seconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import chain
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt

from fleetwatch.exporters.snapshot import SeriesKey, Snapshot
from fleetwatch.labels.schema import METRICS
from fleetwatch.slo.series_plan import (
    _BUCKET,
    _COUNT,
    _GPU_TOTAL,
    _GPU_USED,
    _KV,
    _NO_MODEL,
    _QUANTILE,
    _REQ_BAD,
    _REQ_GOOD,
    _RUNNING,
    _SKIP,
    _SKIP_READER,
    _SUM,
    _SUMMARY_COUNT,
    _WAITING,
    MAX_READERS,
    Hist,
    Interval,
    Plan,
    Reader,
)
from fleetwatch.slo.sli import LATENCY_METRICS, SUMMARY_METRICS
from fleetwatch.slo.spec import SLOFile
from fleetwatch.slo.state import ModelKey

__all__ = ["Decoded", "Decoder", "Hist", "Interval", "needed_families"]

if TYPE_CHECKING:
    from fleetwatch.exporters.normalize import Normalized

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

REQUESTS = "modelserver_requests_total"
ACTIVE = "modelserver_requests_active"
DURATION = "modelserver_request_duration_seconds"
QUEUE = "modelserver_queue_duration_seconds"
KV = "modelserver_kv_cache_usage_ratio"
GPU_USED = "modelserver_gpu_memory_used_bytes"
GPU_TOTAL = "modelserver_gpu_memory_total_bytes"

class Decoded:
    """One snapshot decoded: per model its :class:`Interval` (:attr:`intervals`), and
    the fleet's GPU-memory usage ratio (``gpu_memory_ratio``: Σ used ÷ Σ total over
    every target, 0–1; None without GPU series).

    ``columns``: while every target decoded in one vectorized pass, no interval object
    is made: per target its :class:`Plan` and its per-slot results (``out``, an array,
    and the same as a list), read by the engine's column path
    (:mod:`fleetwatch.slo.columns`); :attr:`intervals` makes them on first read."""

    def __init__(self) -> None:
        self.columns: list[tuple[Plan, FloatArray, list[float]]] = []
        self._intervals: dict[ModelKey, Interval] = {}
        self.gpu_memory_ratio: float | None = None

    @property
    def intervals(self) -> dict[ModelKey, Interval]:
        """Model → its interval (in target, then plan order)."""
        if self.columns:
            made = self._intervals
            for plan, _out, res in self.columns:
                for mk, fields in plan.models.items():
                    made[mk] = fields.interval(res)
            self.columns = []
        return self._intervals

    @property
    def made(self) -> bool:
        """Whether an interval was made (by the slow pass, or on reading
        :attr:`intervals`)."""
        return bool(self._intervals)

    def has(self, mk: ModelKey) -> bool:
        """Whether ``mk`` has an interval (made or not yet)."""
        return mk in self._intervals or any(mk in p.models for p, _o, _r in self.columns)


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


def _numbers(n: Normalized, families: list[int],
             fams: list[dict[str, float | str]]) -> Iterable[float]:
    """The values of the needed families as floats, in order: the numbers the normalizer
    parsed already (:attr:`~fleetwatch.exporters.normalize.Normalized.numbers`) where it
    kept them, else the dicts' values parsed (the same floats: a value's text decides
    it)."""
    numbers = n.numbers
    if numbers is not None:
        got = [numbers[idx] for idx in families]
        if all(x is not None and len(x) == len(f) for x, f in zip(got, fams, strict=True)):
            return chain.from_iterable(cast("list[list[float]]", got))
    return map(float, chain.from_iterable(f.values() for f in fams))


class Decoder:
    """Turns successive snapshots into per-model :class:`Interval` deltas.

    ``CARRY_SECONDS``: how long a series' last cumulative value is kept when its target
    is down (or the series absent or not finite), so that the events of the gap are
    counted (over the longer interval) when it returns. ``bounds[(family, model)]``
    collects the bucket bounds seen (seconds), which latency SLIs check their threshold
    against. Cumulative values are kept per target (a series is identified by its target
    and prefix).
    """

    CARRY_SECONDS = 3600.0

    def __init__(self, families: list[int]) -> None:
        self.families = families
        self.bounds: dict[tuple[str, ModelKey], set[float]] = defaultdict(set)
        #: incremented whenever ``bounds`` may have changed (cached matches are stale)
        self.bounds_version = 0
        self._readers: dict[str, Reader] = {}
        self._plans: dict[str, Plan] = {}
        #: target → series prefix → (last cumulative value, when seen) of series that
        #: are not in the target's current plan (carried for CARRY_SECONDS)
        self._orphans: dict[str, dict[str, tuple[float, float]]] = {}
        self._last_ts: float | None = None

    def decode(self, snap: Snapshot) -> Decoded:
        """Deltas since the previous call (the first call only primes the counters:
        its deltas are zero). Call with increasing timestamps."""
        ts = snap.timestamp
        decoded = Decoded()
        gpu_used = gpu_total = 0.0
        for target, normalized in snap.targets.items():
            if normalized is None:
                continue
            u, tot = self._read(target, normalized, decoded, ts)
            gpu_used, gpu_total = gpu_used + u, gpu_total + tot
        self._last_ts = ts
        for target in [t for t, p in self._plans.items()
                       if ts - p.seen > self.CARRY_SECONDS]:
            del self._plans[target]  # a target gone for good: its values have expired
            self._orphans.pop(target, None)
        decoded.gpu_memory_ratio = gpu_used / gpu_total if gpu_total > 0 else None
        return decoded

    def forget(self, models: set[ModelKey]) -> None:
        """Drop the bucket bounds seen for ``models`` (forgotten by the engine)."""
        for k in [k for k in self.bounds if k[1] in models]:
            del self.bounds[k]
        self.bounds_version += 1

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
            return (_BUCKET, mk, fam_name, float(labels["le"]), "")
        if name.endswith("_sum"):
            return (_SKIP if summary else _SUM, mk, fam_name, 0.0, "")
        if name.endswith("_count"):
            return (_SUMMARY_COUNT if summary else _COUNT, mk, fam_name, 0.0, "")
        if "quantile" in labels:
            return (_QUANTILE, mk, fam_name, 0.0, labels["quantile"])
        return _SKIP_READER

    def _plan(self, target: str, n: Normalized, keys: list[list[str]]) -> Plan:
        """Compile the plan of a target's new set of series, carrying the last cumulative
        values over by series (from the old plan, and from series gone before)."""
        readers_cache = self._readers
        if len(readers_cache) > MAX_READERS:
            readers_cache.clear()
        readers: list[Reader] = []
        for idx, fam_keys in zip(self.families, keys, strict=True):
            fam_name = METRICS[idx].name
            for prefix in fam_keys:
                r = readers_cache.get(prefix)
                if r is None:
                    r = readers_cache[prefix] = self._reader(fam_name, n.key(prefix))
                if r[0] == _BUCKET:
                    self.bounds[(fam_name, r[1])].add(r[3])
                readers.append(r)
        plan = Plan(keys, readers)
        self.bounds_version += 1
        carried = self._orphans.setdefault(target, {})
        old = self._plans.get(target)
        if old is not None:
            prefixes = old.prefixes
            for k, prev, when in zip(old.take.tolist(), old.prev.tolist(),
                                     old.when.tolist(), strict=True):
                if when == when:
                    carried[prefixes[k]] = (prev, when)
        last = self._last_ts
        for e, k in enumerate(plan.take.tolist()):
            got = carried.pop(plan.prefixes[k], None)
            if got is not None:
                plan.prev[e], plan.when[e] = got
        if last is not None:
            for prefix in [p for p, (_v, w) in carried.items()
                           if last - w > self.CARRY_SECONDS]:
                del carried[prefix]
        self._plans[target] = plan
        return plan

    def _read(self, target: str, n: Normalized, decoded: Decoded,
              ts: float) -> tuple[float, float]:
        """The hot path: every needed series of one target into ``decoded`` (its
        columns while every target so far took the vectorized pass); returns the
        target's (GPU memory used, total) in bytes."""
        fams = [n.families[idx] for idx in self.families]
        keys = [list(f) for f in fams]  # the same prefix objects every scrape: fast ==
        plan = self._plans.get(target)
        if plan is None or keys != plan.keys:
            plan = self._plan(target, n, keys)
        plan.seen = ts
        if not plan.n_values:
            return 0.0, 0.0
        values = np.fromiter(_numbers(n, self.families, fams), float, plan.n_values)
        v = values[plan.take]
        counter = plan.counter
        valid = np.isfinite(v) & ~(counter & (v < 0.0))  # never a delta nor a gauge
        last = self._last_ts
        known = counter & valid & (plan.when >= (-np.inf if last is None else
                                                 last - self.CARRY_SECONDS))
        prev = plan.prev
        with np.errstate(invalid="ignore"):
            delta = np.where(v >= prev, v - prev, v)  # after a reset the value is the delta
        contrib = np.where(counter, np.where(known, delta, 0.0), v)
        update = counter & valid
        plan.prev = np.where(update, v, prev)
        plan.when = np.where(update, ts, plan.when)
        all_valid = bool(valid.all())
        if not all_valid or ((decoded.columns or decoded.made)
                             and any(decoded.has(mk) for mk in plan.models)):
            return self._read_slow(plan, contrib, valid, decoded.intervals)
        nslots = len(plan.fields)
        summed = plan.summed
        out = np.bincount(plan.slot[summed], weights=contrib[summed], minlength=nslots)
        has2 = plan.has2
        if has2.any():
            out += np.bincount(plan.slot2[has2], weights=contrib[has2], minlength=nslots)
        if plan.kv.any():
            kv = plan.kv
            peak = np.zeros(nslots)
            np.maximum.at(peak, plan.slot[kv], contrib[kv])
            out[plan.slot[kv]] = peak[plan.slot[kv]]
        if plan.quantile.any():
            q = plan.quantile
            out[plan.slot[q]] = contrib[q]  # the last series wins
        res = out.tolist()
        if not decoded.made:  # columns while no target needed the slow pass
            decoded.columns.append((plan, out.astype(float, copy=False), res))
        else:
            intervals = decoded.intervals
            for mk, fields in plan.models.items():
                intervals[mk] = fields.interval(res)
        return (res[plan.gpu_used] if plan.gpu_used >= 0 else 0.0,
                res[plan.gpu_total] if plan.gpu_total >= 0 else 0.0)

    @staticmethod
    def _read_slow(plan: Plan, contrib: FloatArray, valid: BoolArray,
                   intervals: dict[ModelKey, Interval]) -> tuple[float, float]:
        """Series by series, skipping the values that are not valid (NaN/±Inf, a negative
        count), and adding into intervals other targets already started."""
        gpu_used = gpu_total = 0.0
        fields = plan.fields
        for code, j, x, ok in zip(plan.code.tolist(), plan.slot.tolist(), contrib.tolist(),
                                  valid.tolist(), strict=True):
            if not ok:
                continue
            _c, mk, fam, le, quantile = fields[j]
            if code == _GPU_USED:
                gpu_used += x
                continue
            if code == _GPU_TOTAL:
                gpu_total += x
                continue
            iv = intervals.get(mk)
            if iv is None:
                iv = intervals[mk] = Interval()
            if code == _BUCKET:
                h = iv.hists[fam]
                h.buckets[le] = h.buckets.get(le, 0.0) + x
            elif code == _COUNT:
                iv.hists[fam].count += x
            elif code == _SUM:
                iv.hists[fam].sum += x
            elif code == _REQ_GOOD:
                iv.total_requests += x
                iv.good_requests += x
            elif code == _REQ_BAD:
                iv.total_requests += x
            elif code == _SUMMARY_COUNT:
                iv.summary_counts[fam] = iv.summary_counts.get(fam, 0.0) + x
            elif code == _RUNNING:
                iv.running_now = (iv.running_now or 0.0) + x
            elif code == _WAITING:
                iv.waiting_now = (iv.waiting_now or 0.0) + x
            elif code == _KV:
                iv.kv_usage = max(iv.kv_usage or 0.0, x)
            elif code == _QUANTILE:
                iv.quantiles[(fam, quantile)] = x
        return gpu_used, gpu_total
