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

A refused value masks its *refusal group* (:func:`~fleetwatch.slo.decode.plan.
refusal_group`: one model's histogram family, its requests counters, its running and
waiting gauges) for that interval only: the group feeds nothing, so a histogram never
books its buckets without its ``_count`` nor Little's law a ``_count`` without its
``_sum``, and :attr:`Decoded.refused` names it (the engine books no event of a refused
group and no interval whose concurrency it would have measured). A value is refused when
it is not finite or is a negative count; when its counter series was withdrawn while its
model stayed (the normalizer withdraws a whole histogram when one of its values is refused);
and when a counter returns from such a gap, since its delta then spans more than the
interval it would be booked in (a target that was down as a whole is not such a gap: its
models' intervals span the gap too). ``Decoder.refused`` counts the refused groups per
normalized metric.

Units: durations in seconds, counts in events, ratios 0–1, timestamps Unix seconds.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np

from fleetwatch.exporters.snapshot import SeriesKey, Snapshot
from fleetwatch.labels.schema import METRICS
from fleetwatch.slo.arrays import BoolArray, FloatArray
from fleetwatch.slo.decode.plan import (
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
    ACTIVE_GROUP,
    MIN_READERS,
    Plan,
    Reader,
    refusal_group,
)
from fleetwatch.slo.sli import LATENCY_METRICS, SUMMARY_METRICS
from fleetwatch.slo.spec import SLOFile
from fleetwatch.slo.state import ModelKey

__all__ = ["Decoded", "Decoder", "TargetColumns", "concurrency_refused", "needed_families"]

if TYPE_CHECKING:
    from fleetwatch.exporters.normalize import Normalized


REQUESTS = "modelserver_requests_total"
ACTIVE = "modelserver_requests_active"
DURATION = "modelserver_request_duration_seconds"
QUEUE = "modelserver_queue_duration_seconds"
KV = "modelserver_kv_cache_usage_ratio"
GPU_USED = "modelserver_gpu_memory_used_bytes"
GPU_TOTAL = "modelserver_gpu_memory_total_bytes"

class TargetColumns(NamedTuple):
    """One decoded target (or, see :class:`Decoded`, several merged): its :class:`Plan`
    and the per-slot results (``out``, an array; ``res``, the same as a list)."""

    plan: Plan
    out: FloatArray
    res: list[float]


@dataclass(slots=True)
class Decoded:
    """One snapshot decoded: ``columns`` per target its :class:`TargetColumns` (read by
    the engine, :mod:`fleetwatch.slo.account.columns`), the fleet's GPU-memory usage ratio
    (``gpu_memory_ratio``: Σ used ÷ Σ total over every target, 0–1; None without GPU
    series), and the refusal groups masked in this interval (``refused``: (model,
    normalized metric) pairs, see the module doc).

    While every value is valid and no model is served by two targets, a target's
    columns are its own plan's; otherwise the snapshot is one :class:`TargetColumns` of a
    plan merged over all its targets (:meth:`Plan.merged`), the invalid values feeding
    nothing and a model's slots summed over its targets."""

    columns: list[TargetColumns] = field(default_factory=list)
    gpu_memory_ratio: float | None = None
    refused: set[tuple[ModelKey, str]] = field(default_factory=set)


def concurrency_refused(models: Iterable[ModelKey],
                        refused: set[tuple[ModelKey, str]]) -> BoolArray:
    """Per model, whether this interval's ``refused`` groups (:attr:`Decoded.refused`)
    hold its concurrency inputs (its request durations or its running/waiting gauges):
    then it books nothing."""
    return np.asarray([bool(refused) and ((mk, DURATION) in refused
                                          or (mk, ACTIVE_GROUP) in refused)
                       for mk in models], dtype=bool)


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


#: Series carried while absent, per target: at least this many …
MIN_CARRIED = 10_000
#: … or this many times the target's current series.
CARRIED_PER_SERIES = 2


class Decoder:
    """Turns successive snapshots into per-model deltas, as per-slot columns
    (:class:`Decoded`).

    ``CARRY_SECONDS``: how long a series' last cumulative value is kept when its target
    is down (or the series absent or not finite), so that the events of the gap are
    counted (over the longer interval) when it returns. ``bounds[(family, model)]``
    collects the bucket bounds seen (seconds), which latency SLIs check their threshold
    against. Cumulative values are kept per target (a series is identified by its target
    and prefix). ``refused``: per normalized metric, the intervals of a model in which
    its values were refused (the module doc).

    Bounds under label churn (series that go and never return): the series carried
    while absent, per target, at most :data:`CARRIED_PER_SERIES` × the target's current
    series (at least :data:`MIN_CARRIED`), the oldest evicted first (``evicted`` counts
    them); the compiled readers, at most 3 × the series of the current plans (at least
    :data:`~fleetwatch.slo.decode.plan.MIN_READERS`), dropped and rebuilt past that.
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
        #: target → the refusal groups its new plan no longer has while their model
        #: stays (withdrawn series), read by the next :meth:`_read`
        self._withdrawn: dict[str, set[tuple[ModelKey, str]]] = {}
        self.refused: Counter[str] = Counter()
        #: carried series evicted past the per-target bound (label churn)
        self.evicted = 0

    def decode(self, snap: Snapshot) -> Decoded:
        """Deltas since the previous call (the first call only primes the counters:
        its deltas are zero). Call with increasing timestamps."""
        ts = snap.timestamp
        decoded = Decoded()
        gpu_used = gpu_total = 0.0
        parts: list[tuple[Plan, BoolArray, FloatArray]] = []
        merge = False
        for target, normalized in snap.targets.items():
            if normalized is None:
                continue
            got = self._read(target, normalized, ts)
            withdrawn = self._withdrawn.pop(target, None)
            if got is None:
                continue
            plan, valid, contrib, out, all_valid = got
            if not all_valid:
                bad = np.unique(plan.group[~valid]).tolist()
                decoded.refused.update(plan.groups[g] for g in bad)
            if withdrawn:
                decoded.refused |= withdrawn
            merge = merge or not all_valid or any(
                mk in p.models for p, _v, _c in parts for mk in plan.models)
            parts.append((plan, valid, contrib))
            decoded.columns.append(TargetColumns(plan, out, out.tolist()))
            res = decoded.columns[-1].res
            gpu_used += res[plan.gpu_used] if plan.gpu_used >= 0 else 0.0
            gpu_total += res[plan.gpu_total] if plan.gpu_total >= 0 else 0.0
        if merge:
            merged = Plan.merged([(p, v) for p, v, _c in parts])
            out = merged.slot_sums(np.concatenate([c for _p, _v, c in parts])[merged.take])
            decoded.columns = [TargetColumns(merged, out, out.tolist())]
        if self._last_ts is not None:
            self.refused.update(metric for _mk, metric in decoded.refused)
        self._last_ts = ts
        for target in [t for t, p in self._plans.items()
                       if ts - p.seen > self.CARRY_SECONDS]:
            del self._plans[target]  # a target gone for good: its values have expired
            self._orphans.pop(target, None)
        decoded.gpu_memory_ratio = gpu_used / gpu_total if gpu_total > 0 else None
        return decoded

    @property
    def carried(self) -> int:
        """Series carried while absent, over every target (bounded: the class doc)."""
        return sum(len(c) for c in self._orphans.values())

    def forget(self, models: set[ModelKey]) -> None:
        """Drop the bucket bounds seen for ``models`` (forgotten by the engine)."""
        for k in [(fam, mk) for fam, mk in self.bounds if mk in models]:
            del self.bounds[k]
        self.bounds_version += 1

    def _reader(self, fam_name: str, key: SeriesKey) -> Reader:
        """Compile how a normalized series feeds the interval (once per series)."""
        name, pairs = key
        labels = dict(pairs)
        if fam_name == GPU_USED:
            return Reader(_GPU_USED, _NO_MODEL, "", 0.0, "")
        if fam_name == GPU_TOTAL:
            return Reader(_GPU_TOTAL, _NO_MODEL, "", 0.0, "")
        if "model" not in labels:
            return _SKIP_READER
        mk = ModelKey(labels["model"], labels.get("model_version", ""), labels["backend"])
        if fam_name == REQUESTS:
            code = _REQ_GOOD if labels.get("outcome") == "success" else _REQ_BAD
            return Reader(code, mk, "", 0.0, "")
        if fam_name == ACTIVE:
            state = labels.get("state")
            code = _RUNNING if state == "running" else _WAITING if state == "waiting" else _SKIP
            return Reader(code, mk, "", 0.0, "")
        if fam_name == KV:
            return Reader(_KV, mk, "", 0.0, "")
        summary = fam_name.endswith("_summary_seconds")
        if name.endswith("_bucket"):
            return Reader(_BUCKET, mk, fam_name, float(labels["le"]), "")
        if name.endswith("_sum"):
            return Reader(_SKIP if summary else _SUM, mk, fam_name, 0.0, "")
        if name.endswith("_count"):
            return Reader(_SUMMARY_COUNT if summary else _COUNT, mk, fam_name, 0.0, "")
        if "quantile" in labels:
            return Reader(_QUANTILE, mk, fam_name, 0.0, labels["quantile"])
        return _SKIP_READER

    def _plan(self, target: str, n: Normalized, keys: list[list[str]]) -> Plan:
        """Compile the plan of a target's new set of series, carrying the last cumulative
        values over by series (from the old plan, and from series gone before)."""
        readers_cache = self._readers
        held = sum(len(k) for k in keys) + sum(p.n_values for p in self._plans.values())
        if len(readers_cache) > max(MIN_READERS, 3 * held):
            readers_cache.clear()
        readers: list[Reader] = []
        for idx, fam_keys in zip(self.families, keys, strict=True):
            fam_name = METRICS[idx].name
            for prefix in fam_keys:
                r = readers_cache.get(prefix)
                if r is None:
                    r = readers_cache[prefix] = self._reader(fam_name, n.key(prefix))
                if r.code == _BUCKET:
                    self.bounds[(fam_name, r.model)].add(r.le)
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
        excess = len(carried) - max(MIN_CARRIED, CARRIED_PER_SERIES * len(plan.prefixes))
        if excess > 0:  # label churn: the oldest gone first (insertion order)
            for prefix in list(itertools.islice(carried, excess)):
                del carried[prefix]
            self.evicted += excess
        if old is not None:
            plan.seen = old.seen  # when the target was last seen, read by _read
            if last is not None and old.seen == last:
                self._withdrawn[target] = _withdrawn(old, plan)
        self._plans[target] = plan
        return plan

    def _read(self, target: str, n: Normalized, ts: float
              ) -> tuple[Plan, BoolArray, FloatArray, FloatArray, bool] | None:
        """The hot path: every needed series of one target, as ``(plan, valid,
        contributions, per-slot results, whether all valid)`` (None: no needed series).
        A refused value (NaN/±Inf, a negative count, a counter back from a gap while
        the target stayed: the module doc) contributes 0.0 and so does every value of its
        refusal group, all marked not ``valid`` (a merged plan skips them:
        :class:`Decoded`); a finite counter's last value is kept all the same, so the
        refusal lasts one interval."""
        fams = [n.families[idx] for idx in self.families]
        keys = [list(f) for f in fams]  # the same prefix objects every scrape: fast ==
        plan = self._plans.get(target)
        last = self._last_ts
        if plan is None or keys != plan.keys:
            plan = self._plan(target, n, keys)
        stayed = last is not None and plan.seen == last  # in the previous snapshot too
        plan.seen = ts
        if not plan.n_values:
            return None
        values = np.fromiter(_numbers(n, self.families, fams), float, plan.n_values)
        v = values[plan.take]
        counter = plan.counter
        finite = np.isfinite(v) & ~(counter & (v < 0.0))  # never a delta nor a gauge
        valid = finite
        if stayed:  # a counter back from a gap its target did not have: a longer delta
            valid = finite & ~(counter & (plan.when < cast(float, last)))
        known = counter & valid & (plan.when >= (-np.inf if last is None else
                                                 last - self.CARRY_SECONDS))
        prev = plan.prev
        with np.errstate(invalid="ignore"):
            delta = np.where(v >= prev, v - prev, v)  # after a reset the value is the delta
        contrib = np.where(counter, np.where(known, delta, 0.0), v)
        update = counter & finite
        plan.prev = np.where(update, v, prev)
        plan.when = np.where(update, ts, plan.when)
        all_valid = bool(valid.all())
        if not all_valid:  # the whole refusal group of a refused value
            bad = np.zeros(len(plan.groups), dtype=bool)
            bad[plan.group[~valid]] = True
            valid = ~bad[plan.group]
            contrib = np.where(valid, contrib, 0.0)
        return plan, valid, contrib, plan.slot_sums(contrib), all_valid


def _withdrawn(old: Plan, new: Plan) -> set[tuple[ModelKey, str]]:
    """The refusal groups of ``old``'s cumulative series that ``new`` lacks while their
    model is still in ``new`` (a target's counters withdrawn between two snapshots; a
    gauge that goes is only absent: the estimators read the others)."""
    kept = set(new.prefixes)
    models = new.models
    prefixes, readers = old.prefixes, old.readers
    return {refusal_group(readers[k])
            for k, c in zip(old.take.tolist(), old.counter.tolist(), strict=True)
            if c and prefixes[k] not in kept and readers[k].model in models}
