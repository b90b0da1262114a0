"""Compiled decoding of one target's series: what each feeds, as index arrays.

A :class:`Plan` is compiled by :class:`fleetwatch.slo.decode.Decoder` for one set of a
target's normalized series (the prefixes of each needed family, in order): per series
that feeds an interval its *reader* code, the output *slot* (one scalar field of one
model: a bucket, a count, a gauge …) and its last cumulative value; :class:`Hist` and
:class:`Interval` are what the decoder yields per model.

Units: durations in seconds, counts in events, ratios 0–1, timestamps Unix seconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from fleetwatch.slo.state import ModelKey

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


class Hist:
    """Deltas of one histogram of one model over one interval: ``count`` observations,
    ``sum`` of observed seconds, ``buckets`` upper bound ``le`` (seconds) → observations
    ≤ it.

    The decoder gives the bounds and their counts as two sequences (:meth:`of`); the
    ``buckets`` dict is built from them on first read (the engine reads them with
    :meth:`bucket` and :meth:`pairs`, without it)."""

    __slots__ = ("_buckets", "_index", "_les", "_values", "count", "sum")

    def __init__(self, count: float = 0.0, sum: float = 0.0,
                 buckets: dict[float, float] | None = None) -> None:
        self.count, self.sum = count, sum
        self._buckets: dict[float, float] | None = {} if buckets is None else buckets
        self._les: tuple[float, ...] = ()
        self._values: Sequence[float] = ()
        self._index: dict[float, int] = {}

    @classmethod
    def of(cls, count: float, sum: float,
           les: tuple[float, ...], values: Sequence[float],
           index: dict[float, int]) -> Hist:
        """A histogram of bounds ``les`` (distinct) with counts ``values``; ``index``
        maps each bound to its position (shared, not copied)."""
        h = cls.__new__(cls)
        h.count, h.sum, h._buckets = count, sum, None
        h._les, h._values, h._index = les, values, index
        return h

    @property
    def buckets(self) -> dict[float, float]:
        b = self._buckets
        if b is None:
            b = self._buckets = dict(zip(self._les, self._values, strict=True))
        return b

    def bucket(self, le: float) -> float:
        """Observations ≤ ``le`` (0 when ``le`` is not a bound)."""
        if self._buckets is not None:
            return self._buckets.get(le, 0.0)
        k = self._index.get(le)
        return 0.0 if k is None else self._values[k]

    def pairs(self) -> tuple[tuple[float, ...], Sequence[float]]:
        """``(bounds, counts)``, in the order of :attr:`buckets`."""
        b = self._buckets
        if b is None:
            return self._les, self._values
        return tuple(b), list(b.values())


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


class Plan:
    """How one target's needed series feed the intervals, compiled for one set of series.

    ``keys[j]``: the series prefixes of the ``j``-th needed family, in
    ``Normalized.families`` order (the plan holds while they are unchanged). One entry per
    series that feeds something, as arrays: ``take`` (its position among the needed
    series' values), ``code``, ``slot`` (the output field it adds to), ``slot2`` (a second
    field, −1 if none: a successful request is also a request); ``prev``/``when`` the
    series' last valid cumulative value and when it was seen (NaN: never). ``fields``:
    per slot ``(kind, model, family, le, quantile)``; ``models``: per model (first
    appearance order) its :class:`_ModelFields`.
    """

    def __init__(self, keys: list[list[str]], readers: list[Reader]) -> None:
        self.keys = keys
        self.n_values = len(readers)
        slots: dict[tuple[int, ModelKey, str, float, str], int] = {}
        take: list[int] = []
        code: list[int] = []
        slot: list[int] = []
        slot2: list[int] = []

        def slot_of(kind: int, mk: ModelKey, fam: str = "", le: float = 0.0,
                    q: str = "") -> int:
            return slots.setdefault((kind, mk, fam, le, q), len(slots))

        self.models: dict[ModelKey, _ModelFields] = {}
        for i, (c, mk, fam, le, q) in enumerate(readers):
            if c == _SKIP:
                continue
            take.append(i)
            code.append(c)
            if c == _REQ_GOOD:
                slot.append(slot_of(_REQ_GOOD, mk))
                slot2.append(slot_of(_REQ_BAD, mk))  # the total
            else:
                slot.append(slot_of(c, mk, fam, le, q))
                slot2.append(-1)
            if c != _GPU_USED and c != _GPU_TOTAL and mk not in self.models:
                self.models[mk] = _ModelFields()
        self.fields = list(slots)
        for j, (c, mk, fam, le, q) in enumerate(self.fields):
            if c not in (_GPU_USED, _GPU_TOTAL):
                self.models[mk].add(c, fam, le, q, j)
        self.gpu_used = slots.get((_GPU_USED, _NO_MODEL, "", 0.0, ""), -1)
        self.gpu_total = slots.get((_GPU_TOTAL, _NO_MODEL, "", 0.0, ""), -1)
        self.take = np.asarray(take, dtype=np.int64)
        self.code = np.asarray(code, dtype=np.int64)
        self.slot = np.asarray(slot, dtype=np.int64)
        self.slot2 = np.asarray(slot2, dtype=np.int64)
        self.counter = self.code >= _COUNTERS
        self.kv = self.code == _KV
        self.quantile = self.code == _QUANTILE
        self.summed = ~(self.kv | self.quantile)
        self.has2 = self.slot2 >= 0
        self.prev = np.full(len(take), np.nan)
        self.when = np.full(len(take), np.nan)
        self.prefixes = [p for fam in keys for p in fam]  # per value, for carrying over
        self.seen = 0.0  # Unix seconds the plan was last used


#: Histogram layouts (bounds in order) → the shared bounds tuple and bound → position:
#: every model with one layout hands the same tuple on (the band latency store groups
#: by it); dropped past :data:`MAX_LAYOUTS` (label churn).
_LAYOUTS: dict[tuple[float, ...], tuple[tuple[float, ...], dict[float, int]]] = {}
MAX_LAYOUTS = 10_000


def _layout(les: list[float]) -> tuple[tuple[float, ...], dict[float, int]]:
    key = tuple(les)
    got = _LAYOUTS.get(key)
    if got is None:
        if len(_LAYOUTS) >= MAX_LAYOUTS:
            _LAYOUTS.clear()
        got = _LAYOUTS[key] = (key, {le: k for k, le in enumerate(key)})
    return got


def _picker(slots: list[int]) -> Callable[[list[float]], list[float]]:
    """``out → [out[j] for j in slots]`` (``itemgetter`` of one slot is not a tuple)."""
    return lambda out: [out[j] for j in slots]


class _ModelFields:
    """The output slots of one model in a :class:`Plan` (−1: the model has no such
    series): per histogram family its count, sum and bucket slots."""

    def __init__(self) -> None:
        self.hists: dict[str, list[Any]] = {}  # family → [count, sum, les, bucket slots]
        self.good = self.total = self.running = self.waiting = self.kv = -1
        self.quantiles: list[tuple[tuple[str, str], int]] = []
        self.summary_counts: list[tuple[str, int]] = []
        #: per histogram family (family, count slot, sum slot, bounds, bound → its
        #: position, getter of the bucket values from the results), compiled on the
        #: first interval
        self._getters: list[tuple[str, int, int, tuple[float, ...], dict[float, int],
                                  Callable[[list[float]], Any]]] | None = None

    def add(self, code: int, fam: str, le: float, q: str, j: int) -> None:
        if code in (_BUCKET, _COUNT, _SUM):
            h = self.hists.setdefault(fam, [-1, -1, [], []])
            if code == _BUCKET:
                h[2].append(le)
                h[3].append(j)
            else:
                h[0 if code == _COUNT else 1] = j
        elif code == _REQ_GOOD:
            self.good = j
        elif code == _REQ_BAD:
            self.total = j
        elif code == _RUNNING:
            self.running = j
        elif code == _WAITING:
            self.waiting = j
        elif code == _KV:
            self.kv = j
        elif code == _QUANTILE:
            self.quantiles.append(((fam, q), j))
        elif code == _SUMMARY_COUNT:
            self.summary_counts.append((fam, j))

    def getters(self) -> list[tuple[str, int, int, tuple[float, ...], dict[float, int],
                                    Callable[[list[float]], Any]]]:
        """Per histogram family ``(family, count slot, sum slot, bounds, bound → its
        position, bucket values from the per-slot results)`` (slots −1: none)."""
        getters = self._getters
        if getters is None:  # after the last add
            getters = self._getters = []
            for fam, (c, s, les, bs) in self.hists.items():
                get: Callable[[list[float]], Any] = (
                    itemgetter(*bs) if len(bs) > 1 else _picker(bs))
                getters.append((fam, c, s, *_layout(les), get))
        return getters

    def interval(self, out: list[float]) -> Interval:
        """The model's interval from the per-slot results ``out`` (every slot present)."""
        getters = self._getters or self.getters()
        hists: defaultdict[str, Hist] = defaultdict(Hist)
        of = Hist.of
        for fam, c, s, les_t, index, get in getters:
            hists[fam] = of(out[c] if c >= 0 else 0.0, out[s] if s >= 0 else 0.0, les_t,
                            get(out), index)
        quantiles, summary_counts = self.quantiles, self.summary_counts
        return Interval(hists,
                        out[self.good] if self.good >= 0 else 0.0,
                        out[self.total] if self.total >= 0 else 0.0,
                        out[self.running] if self.running >= 0 else None,
                        out[self.waiting] if self.waiting >= 0 else None,
                        # a new dict each (an interval's own); no comprehension when empty
                        {qk: out[j] for qk, j in quantiles} if quantiles else {},
                        {fam: out[j] for fam, j in summary_counts} if summary_counts else {},
                        out[self.kv] if self.kv >= 0 else None)


