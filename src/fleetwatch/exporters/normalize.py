"""The normalizer: one source table applied to successive expositions of one target.

Parse → map → aggregate, caching the compiled mapping of every raw series key (label sets
repeat on every scrape, so steady-state cost is one dict lookup per line); compiling is
:mod:`fleetwatch.exporters.compile`, the table model :mod:`fleetwatch.exporters.table`,
rendering :mod:`fleetwatch.exporters.render`.

Aggregation when two upstream series land on one normalized series:

* same rule priority, different upstream series → **summed** (Triton per-GPU instance
  series with ``gpu_uuid`` dropped; dcgm FB free + used + reserved = total);
* different priority → the **lower priority number wins** (version aliases such as
  vLLM ``kv_cache_usage_perc`` over ``gpu_cache_usage_perc``);
* the same upstream series twice (a duplicated family) → the **last** sample wins.

Counter values pass through unchanged (only unit-scaled), so counter resets reach
Prometheus, whose ``rate()`` handles them.

Values are validated on the way (:mod:`.validate`: non-finite or negative counters, broken
histograms and summaries are withdrawn and counted by reason in
:attr:`Normalized.invalid_samples`); the :class:`~.validate.Limits` are enforced while the
exposition is read (an exposition past one is refused whole: :attr:`Normalized.refused`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.exporters.compile import Entry, SeriesCompiler
from fleetwatch.exporters.parser import Metadata, format_value, iter_lines, split_sample_line
from fleetwatch.exporters.snapshot import SeriesKey
from fleetwatch.exporters.table import SourceTable, TargetContext
from fleetwatch.exporters.validate import (
    BAD_VALUE,
    BUCKETS_DECREASE,
    INF,
    NORMALIZE_TIMEOUT,
    TOO_MANY_SERIES,
    TYPE_MISMATCH,
    Limits,
    check_buckets,
    check_value,
    prometheus_float,
)
from fleetwatch.labels.schema import METRICS


def value_of(v: float | str) -> float:
    """A normalized sample value as a float (values copied unscaled stay upstream text)."""
    return v if isinstance(v, float) else float(v)


@dataclass
class Normalized:
    """The normalized state of one upstream exposition.

    ``families[i]`` maps a rendered series prefix (``name{labels}``) to its value for
    family ``METRICS[i]``: a float, or the upstream's own number text when the value was
    copied unscaled (use :func:`value_of`). ``models`` are the
    ``(model, model_version, backend, runtime)`` seen; ``unmapped`` the upstream family
    names no rule knows; ``meta.invalid`` the skipped lines; ``passthrough`` the sample
    lines of unmapped families by family (only with pass-through on);
    ``invalid_samples`` the samples refused by reason (:mod:`.validate`), with
    ``invalid_examples`` one ``series: why`` per reason; ``refused`` ``(reason, message)``
    when a :class:`~.validate.Limits` bound refused the whole exposition (``families``
    are then empty); ``passthrough_types`` the TYPE each passed-through family is served
    with (the one declared before its first line: a TYPE after samples is not served).
    """

    families: list[dict[str, float | str]]
    models: set[tuple[str, str, str, str]]
    unmapped: set[str]
    meta: Metadata
    passthrough: dict[str, list[str]] = field(default_factory=dict)
    keys: Mapping[str, SeriesKey] = field(default_factory=dict)
    invalid_samples: Counter[str] = field(default_factory=Counter)
    invalid_examples: dict[str, str] = field(default_factory=dict)
    passthrough_types: dict[str, str | None] = field(default_factory=dict)
    refused: tuple[str, str] | None = None

    @property
    def series_count(self) -> int:
        return sum(len(f) for f in self.families)

    def key(self, prefix: str) -> SeriesKey:
        """The typed :data:`~fleetwatch.exporters.snapshot.SeriesKey` of a series prefix of
        :attr:`families` (sample name and label pairs, values unescaped), as the
        normalizer compiled it (no parsing). Raises ``KeyError`` for a prefix that is not
        a series of this state."""
        return self.keys[prefix]

    def samples(self) -> Iterable[tuple[str, float]]:
        """Yield ``(series_prefix, value)`` for every normalized sample, schema order."""
        for fam in self.families:
            for prefix, v in fam.items():
                yield prefix, value_of(v)


class Normalizer:
    """Applies one :class:`~.table.SourceTable` to successive expositions of one target.

    Thread-compatible, not thread-safe: use one instance per target. ``passthrough=True``
    re-emits upstream families that no rule knows, unchanged (their lines re-validated:
    a line a Prometheus would reject is refused instead). ``limits`` bound each
    exposition (:class:`~.validate.Limits`). Raises ``ValueError`` when a rule of the
    table targets a family the schema lacks.
    """

    #: The compiled-series cache is cleared when it grows past this many entries per
    #: sample line of the last exposition (label churn, e.g. timestamps in label values).
    CACHE_SLACK = 3

    def __init__(self, table: SourceTable, ctx: TargetContext | None = None,
                 passthrough: bool = False, limits: Limits | None = None) -> None:
        self.table = table
        self.ctx = ctx or TargetContext()
        self.passthrough = passthrough
        self.limits = limits or Limits()
        self._cache: dict[str, Entry] = {}
        self._compiler = SeriesCompiler(table, self.ctx, self.limits.max_label_value_length)

    @property
    def dropped_labels(self) -> set[str]:
        """Upstream label names dropped because the schema has no place for them."""
        return self._compiler.dropped_labels

    def invalidate(self) -> None:
        """Forget compiled series (call when the context, e.g. a model's runtime, changes)."""
        self._cache.clear()
        self._compiler.reset()

    # -- hot path -------------------------------------------------------------------
    def normalize(self, text: str) -> Normalized:
        """Normalize one exposition body. Never raises on bad input (see ``meta.invalid``)."""
        result = self._normalize(text)
        stale = self._compiler.stale
        if stale:
            # A series met another on one normalized series after the first had been
            # compiled as alone: compile that one again, now knowing, and redo this
            # exposition (the rest of the cache is warm, so this costs a steady cycle).
            for key in [k for k, e in self._cache.items() if e.canon in stale]:
                del self._cache[key]
            self._compiler.stale = set()
            result = self._normalize(text)
        if len(self._cache) > self.CACHE_SLACK * max(result.meta.sample_lines, 1000):
            self.invalidate()
        return result

    def _normalize(self, text: str) -> Normalized:
        meta = Metadata()
        families: list[dict[str, float | str]] = [{} for _ in METRICS]
        models: set[tuple[str, str, str, str]] = set()
        unmapped: set[str] = set()
        passthrough: dict[str, list[str]] = {}
        ptypes: dict[str, str | None] = {}  # passed-through family → TYPE at its first line
        agg: dict[str, list[Any]] = {}  # prefix → [value, priority, canon | None, family]
        cache = self._cache
        compile_entry = self._compiler.compile
        add_model = models.add
        bad = meta.bad
        sample_lines = 0
        cache_get = cache.get
        refusals: Counter[str] = Counter()
        examples: dict[str, str] = {}
        withdraw: set[str] = set()  # groups of a refused sample (histograms, shared sums)
        # Buckets are checked as they stream by: per histogram, the last bound and count
        # (le ascending is how upstreams write them); a histogram written otherwise, or
        # whose last bucket is not +Inf, is checked whole afterwards (slow path).
        hist_state: dict[str, list[float]] = {}  # histogram → [last le, last count]
        run_g: str | None = None  # the histogram of the last bucket line
        run_st: list[float] = []
        unsure: set[str] = set()  # histograms to check whole
        decreasing: set[str] = set()
        max_series = self.limits.max_series
        deadline = time.perf_counter() + self.limits.max_seconds
        for line, lineno in iter_lines(text, meta):
            if sample_lines & 4095 == 4095:
                if sample_lines >= max_series:
                    return self._refuse(meta, TOO_MANY_SERIES, f"more than {max_series} "
                                        "series in one exposition (scrape.max_series)")
                if time.perf_counter() > deadline:
                    return self._refuse(meta, NORMALIZE_TIMEOUT, "normalizing took more "
                                        f"than {self.limits.max_seconds} s "
                                        "(scrape.normalize_timeout_seconds)")
            # Fast path: "key value" whose key is known (label sets repeat every scrape).
            sp = line.rfind(" ")
            key = line[:sp]
            entry = cache_get(key)
            if entry is not None and line[-1] != "\r":
                tok = line[sp + 1:]
            else:
                split = split_sample_line(line)
                if isinstance(split, str):
                    bad(lineno, split, line)
                    continue
                key, tok = split
                entry = cache_get(key)
                if entry is None:
                    entry = compile_entry(key, meta)
                    cache[key] = entry
            sample_lines += 1
            if entry.skip:
                reason = entry.reason
                if reason is not None and (reason != TYPE_MISMATCH or self.passthrough):
                    refusals[reason] += 1
                    examples.setdefault(reason, f"{key[:200]}: {entry.error}")
                elif entry.error is not None and reason is None:
                    bad(lineno, entry.error, key)
                elif entry.unmapped_family is not None:
                    unmapped.add(entry.unmapped_family)
                    if self.passthrough:
                        problem = self._pass_through(entry, key, tok, meta, passthrough,
                                                     ptypes)
                        if problem is not None:
                            refusals[problem] += 1
                            examples.setdefault(problem, f"{key[:200]}: value {tok[:40]!r}")
                continue
            if "_" in tok or not tok.isascii():  # Python's float takes "1_0", "١"
                bad(lineno, f"invalid sample value {tok!r}", key)
                continue
            try:
                value = float(tok)
            except ValueError:
                bad(lineno, f"invalid sample value {tok!r}", key)
                continue
            check = entry.check
            # refused: a cumulative value (check 1) outside [0, inf), a quantile (check 2)
            # negative or infinite (NaN is an empty summary's quantile)
            if check and not (0.0 <= value < INF) and (check == 1 or value == value):
                reason = check_value(check, value) or BAD_VALUE
                refusals[reason] += 1
                examples.setdefault(reason, f"{key[:200]}: {format_value(value)}")
                if entry.group:
                    withdraw.add(entry.group)
                continue
            le = entry.le
            if le is not None:
                g = entry.group  # interned: one object per histogram
                if g is not run_g:
                    st = hist_state.get(g)
                    if st is None:
                        st = hist_state[g] = [-INF, 0.0]
                    run_g, run_st = g, st
                if le > run_st[0]:
                    if value < run_st[1]:
                        decreasing.add(g)
                    run_st[0] = le
                    run_st[1] = value
                else:
                    unsure.add(g)
            if entry.model is not None:
                add_model(entry.model)
            direct = entry.direct
            if direct:
                # finite values keep the upstream's text; NaN/±Inf get canonical spelling
                out: float | str = tok if value - value == 0 else value
                for fam_idx, prefix in direct:
                    families[fam_idx][prefix] = out
            if not entry.more:
                continue
            for fam_idx, prefix, div, mul, neg_nan in entry.scaled:
                v = value / div * mul
                families[fam_idx][prefix] = math.nan if neg_nan and v < 0 else v
            for fam_idx, prefix, div, mul, neg_nan, prio in entry.shared:
                v = value / div * mul
                if neg_nan and v < 0:
                    v = math.nan
                cur = agg.get(prefix)
                if cur is None:
                    agg[prefix] = [v, prio, entry.canon, fam_idx]
                elif prio < cur[1] or cur[2] == entry.canon:
                    cur[0], cur[1], cur[2] = v, prio, entry.canon
                elif prio == cur[1]:
                    cur[0] += v
                    cur[2] = None  # an aggregate of several upstream series
        meta.sample_lines = sample_lines
        if sample_lines > max_series:
            return self._refuse(meta, TOO_MANY_SERIES, f"more than {max_series} series in "
                                "one exposition (scrape.max_series)")
        unsure.update(g for g, (last, _v) in hist_state.items() if last != INF)
        broken = {g: BUCKETS_DECREASE for g in decreasing - unsure}
        if unsure:
            for g, hb in self._buckets_of(text, unsure).items():
                reason = check_buckets(hb)
                if reason is not None:
                    broken[g] = reason
        for group, reason in broken.items():
            refusals[reason] += 1
            examples.setdefault(reason, group[:200])
            withdraw.add(group)
        for prefix, (v, _prio, _key, fam_idx) in agg.items():
            families[fam_idx][prefix] = v
        if withdraw:
            self._withdraw(families, withdraw)
        for count_prefix, (fam_idx, sum_prefix, inf_prefix) in \
                self._compiler.mean_only.items():
            fam = families[fam_idx]
            if count_prefix in fam and sum_prefix not in fam:
                # Triton without the duration counter (counter_latencies=false, partial
                # expositions): a request count is no latency; emit nothing
                del fam[count_prefix]
                fam.pop(inf_prefix, None)
        return Normalized(families, models, unmapped, meta, passthrough,
                          self._compiler.keys, refusals, examples, ptypes)

    @staticmethod
    def _pass_through(entry: Entry, key: str, tok: str, meta: Metadata,
                      passthrough: dict[str, list[str]],
                      ptypes: dict[str, str | None]) -> str | None:
        """Copy one line of an unmapped family (pass-through on), or say why not: a value
        Prometheus reads otherwise (:data:`~.validate.BAD_VALUE`), or a line checked under
        another TYPE than the family is served with (:data:`~.validate.TYPE_MISMATCH`:
        the family is served with the TYPE declared before its first line)."""
        if prometheus_float(tok) is None:
            return BAD_VALUE
        fam = entry.unmapped_family
        assert fam is not None
        lines = passthrough.get(fam)
        if lines is None:
            lines = passthrough[fam] = []
            ptypes[fam] = meta.types.get(fam)
        if entry.ptype != ptypes[fam]:
            return TYPE_MISMATCH
        lines.append(f"{key} {tok}")
        return None

    def _buckets_of(self, text: str, groups: set[str]) -> dict[str, list[tuple[float, float]]]:
        """``(le, value)`` of every valid bucket of the histograms ``groups`` in ``text``
        (slow path: a second pass, only for histograms not written one ascending run
        each)."""
        out: dict[str, list[tuple[float, float]]] = {g: [] for g in groups}
        for line, _lineno in iter_lines(text, Metadata()):
            split = split_sample_line(line)
            if isinstance(split, str):
                continue
            entry = self._cache.get(split[0])
            if entry is None or entry.le is None or entry.group not in out:
                continue
            value = prometheus_float(split[1])
            if value is not None and 0.0 <= value < INF:
                out[entry.group].append((entry.le, value))
        return {g: hb for g, hb in out.items() if hb}

    def _withdraw(self, families: list[dict[str, float | str]], groups: set[str]) -> None:
        """Remove every normalized series fed by an upstream series of ``groups`` (a
        refused histogram or summary whole, a sum one of whose parts was refused). Slow
        path: scans the compiled series, only in a scrape that refused a sample."""
        for entry in self._cache.values():
            if entry.group in groups:
                for fam_idx, prefix in entry.direct:
                    families[fam_idx].pop(prefix, None)
                for slot in entry.scaled:
                    families[slot[0]].pop(slot[1], None)
                for shared in entry.shared:
                    families[shared[0]].pop(shared[1], None)

    def _refuse(self, meta: Metadata, reason: str, message: str) -> Normalized:
        """The state of an exposition refused whole by a bound (no series); the compiled
        series are forgotten (a churning exposition must not grow the cache)."""
        self.invalidate()
        return Normalized([{} for _ in METRICS], set(), set(), meta,
                          refused=(reason, message))
