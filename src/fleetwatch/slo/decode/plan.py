"""Compiled decoding of one target's series: what each feeds, as index arrays.

A :class:`Plan` is compiled by :class:`fleetwatch.slo.decode.decoder.Decoder` for one set of a
target's normalized series (the prefixes of each needed family, in order): per series
that feeds something its :class:`Reader`, the output *slot* (one scalar field of one
model: a bucket, a count, a gauge …) and its last cumulative value; per model its slots
(:class:`_ModelFields`, :class:`HistSlots`). The decoder sums the series into the slots
(:meth:`Plan.slot_sums`): a model's interval is its slots' values.

Units: durations in seconds, counts in events, ratios 0–1, timestamps Unix seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from fleetwatch.slo.arrays import BoolArray, FloatArray
from fleetwatch.slo.state import ModelKey

# How a normalized series feeds the slots (codes ≥ _COUNTERS are cumulative).
_SKIP, _RUNNING, _KV, _QUANTILE, _GPU_USED, _GPU_TOTAL, _WAITING = range(7)
_COUNTERS = 10
_BUCKET, _COUNT, _SUM, _REQ_GOOD, _REQ_BAD, _SUMMARY_COUNT = range(10, 16)

_NO_MODEL = ModelKey("", "", "")

#: The refusal group of a series with no histogram family, named by its normalized
#: metric: the requests counters (good and all), the in-system gauges (running,
#: waiting), the KV-cache gauge. A histogram's series (buckets, ``_count``, ``_sum``)
#: group by the family's name.
REQUESTS_GROUP = "modelserver_requests_total"
ACTIVE_GROUP = "modelserver_requests_active"
KV_GROUP = "modelserver_kv_cache_usage_ratio"
_GROUP_OF_CODE = {_REQ_GOOD: REQUESTS_GROUP, _REQ_BAD: REQUESTS_GROUP,
                  _RUNNING: ACTIVE_GROUP, _WAITING: ACTIVE_GROUP, _KV: KV_GROUP}


def refusal_group(r: Reader) -> tuple[ModelKey, str]:
    """The group a series' value is refused with (one model's histogram family, its
    requests counters, its running + waiting gauges …): a refused value masks its whole
    group for the interval, so a histogram never books from some of its series."""
    return r.model, _GROUP_OF_CODE.get(r.code, r.family)


class Reader(NamedTuple):
    """How one series feeds the per-slot results: its ``code`` (``_BUCKET``, ``_RUNNING``
    …), ``model``, histogram or summary ``family`` ("" for the others), bucket bound
    ``le`` (seconds; 0.0 for the others) and ``quantile`` label ("" for the others). A
    slot is one distinct reader: the series of one reader are summed into it."""

    code: int
    model: ModelKey
    family: str
    le: float
    quantile: str


_SKIP_READER = Reader(_SKIP, _NO_MODEL, "", 0.0, "")
#: Compiled readers kept before the cache is dropped (label churn), at least: the
#: decoder allows 3 × the series of its current plans.
MIN_READERS = 10_000


class Plan:
    """How one target's needed series feed the intervals, compiled for one set of series.

    ``keys[j]``: the series prefixes of the ``j``-th needed family, in
    ``Normalized.families`` order (the plan holds while they are unchanged). One entry per
    series that feeds something, as arrays: ``take`` (its position among the needed
    series' values), ``code``, ``slot`` (the output field it adds to), ``slot2`` (a second
    field, −1 if none: a successful request is also a request); ``prev``/``when`` the
    series' last valid cumulative value and when it was seen (NaN: never); ``group``
    its refusal group's position in ``groups`` (:func:`refusal_group`). ``fields``:
    per slot its :class:`Reader`; ``models``: per model (first
    appearance order) its :class:`_ModelFields`.
    """

    def __init__(self, keys: list[list[str]], readers: list[Reader]) -> None:
        self.keys = keys
        self.n_values = len(readers)
        self.readers = readers
        slots: dict[Reader, int] = {}
        take: list[int] = []
        groups: dict[tuple[ModelKey, str], int] = {}
        group: list[int] = []
        code: list[int] = []
        slot: list[int] = []
        slot2: list[int] = []

        def slot_of(kind: int, mk: ModelKey, fam: str = "", le: float = 0.0,
                    q: str = "") -> int:
            return slots.setdefault(Reader(kind, mk, fam, le, q), len(slots))

        self.models: dict[ModelKey, _ModelFields] = {}
        for i, (c, mk, fam, le, q) in enumerate(readers):
            if c == _SKIP:
                continue
            take.append(i)
            code.append(c)
            group.append(groups.setdefault(refusal_group(readers[i]), len(groups)))
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
        self.gpu_used = slots.get(Reader(_GPU_USED, _NO_MODEL, "", 0.0, ""), -1)
        self.gpu_total = slots.get(Reader(_GPU_TOTAL, _NO_MODEL, "", 0.0, ""), -1)
        self.take = np.asarray(take, dtype=np.int64)
        self.code = np.asarray(code, dtype=np.int64)
        #: per entry its refusal group (:func:`refusal_group`), and the groups in order
        self.group = np.asarray(group, dtype=np.int64)
        self.groups = list(groups)
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

    @classmethod
    def merged(cls, parts: Sequence[tuple[Plan, BoolArray]]) -> Plan:
        """One plan over several targets' plans, for one snapshot: per part a plan and
        which of its entries (``take`` order) hold a valid value; the invalid ones feed
        nothing. Its entries are the parts' entries in order (a model's slots summed over
        the targets that serve it, the first appearance deciding its order); its values
        are the parts' contributions concatenated (:meth:`slot_sums`)."""
        readers: list[Reader] = []
        for plan, valid in parts:
            own = plan.readers
            readers.extend(own[i] if ok else _SKIP_READER
                           for i, ok in zip(plan.take.tolist(), valid.tolist(), strict=True))
        return cls([], readers)

    def slot_sums(self, contrib: FloatArray) -> FloatArray:
        """Per slot its value from the entries' contributions (``take`` order): the sum
        of its entries, in order (a successful request also adds to the requests), the
        largest for a KV-cache gauge (at least 0), the last for a quantile."""
        nslots = len(self.fields)
        summed = self.summed
        out = np.bincount(self.slot[summed], weights=contrib[summed], minlength=nslots)
        has2 = self.has2
        if has2.any():
            out += np.bincount(self.slot2[has2], weights=contrib[has2], minlength=nslots)
        if self.kv.any():
            kv = self.kv
            peak = np.zeros(nslots)
            np.maximum.at(peak, self.slot[kv], contrib[kv])
            out[self.slot[kv]] = peak[self.slot[kv]]
        if self.quantile.any():
            q = self.quantile
            out[self.slot[q]] = contrib[q]  # the last series wins
        return out.astype(float, copy=False)


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


@dataclass(slots=True)
class _HistFields:
    """One histogram family's slots of one model while a plan is compiled (−1: none)."""

    count: int = -1
    sum: int = -1
    les: list[float] = field(default_factory=list)
    buckets: list[int] = field(default_factory=list)


class HistSlots(NamedTuple):
    """One histogram family of one model in a :class:`Plan`: its ``count_slot`` and
    ``sum_slot`` (−1: no such series), bucket bounds ``les`` (seconds, in slot order; the
    tuple shared by every model of that layout), ``position`` (bound → its position in
    ``les``),
    ``slots`` (the bucket slots, in ``les`` order) and ``get`` (per-slot results → the
    bucket values, in ``les`` order)."""

    family: str
    count_slot: int
    sum_slot: int
    les: tuple[float, ...]
    position: dict[float, int]
    slots: Sequence[int]
    get: Callable[[list[float]], Sequence[float]]


class _ModelFields:
    """The output slots of one model in a :class:`Plan` (−1: the model has no such
    series): requests (``good``, ``total``), gauges (``running``, ``waiting``, ``kv``),
    per summary family and quantile label its slot (``quantiles``), per summary family
    its count slot (``summary_counts``), per histogram family its :class:`HistSlots`
    (:meth:`hists`)."""

    def __init__(self) -> None:
        self._fields: dict[str, _HistFields] = {}
        self.good = self.total = self.running = self.waiting = self.kv = -1
        self.quantiles: dict[tuple[str, str], int] = {}
        self.summary_counts: dict[str, int] = {}
        self._hists: dict[str, HistSlots] | None = None

    def add(self, code: int, fam: str, le: float, q: str, j: int) -> None:
        if code in (_BUCKET, _COUNT, _SUM):
            h = self._fields.setdefault(fam, _HistFields())
            if code == _BUCKET:
                h.les.append(le)
                h.buckets.append(j)
            elif code == _COUNT:
                h.count = j
            else:
                h.sum = j
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
            self.quantiles[(fam, q)] = j  # one slot per (family, quantile)
        elif code == _SUMMARY_COUNT:
            self.summary_counts[fam] = j

    def hists(self) -> dict[str, HistSlots]:
        """Per histogram family its :class:`HistSlots` (compiled on first call, after
        the last :meth:`add`)."""
        got = self._hists
        if got is None:
            got = self._hists = {}
            for fam, h in self._fields.items():
                bs = h.buckets
                get: Callable[[list[float]], Sequence[float]] = (
                    itemgetter(*bs) if len(bs) > 1 else _picker(bs))
                les, index = _layout(h.les)
                got[fam] = HistSlots(fam, h.count, h.sum, les, index, bs, get)
        return got
