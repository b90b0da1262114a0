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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwatch.exporters.compile import Entry, SeriesCompiler
from fleetwatch.exporters.parser import Metadata, iter_lines, split_sample_line
from fleetwatch.exporters.snapshot import SeriesKey
from fleetwatch.exporters.table import SourceTable, TargetContext
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
    lines of unmapped families by family (only with pass-through on).
    """

    families: list[dict[str, float | str]]
    models: set[tuple[str, str, str, str]]
    unmapped: set[str]
    meta: Metadata
    passthrough: dict[str, list[str]] = field(default_factory=dict)
    keys: Mapping[str, SeriesKey] = field(default_factory=dict)

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
    re-emits upstream families that no rule knows, unchanged. Raises ``ValueError`` when
    a rule of the table targets a family the schema lacks.
    """

    #: The compiled-series cache is cleared when it grows past this many entries per
    #: sample line of the last exposition (label churn, e.g. timestamps in label values).
    CACHE_SLACK = 3

    def __init__(self, table: SourceTable, ctx: TargetContext | None = None,
                 passthrough: bool = False) -> None:
        self.table = table
        self.ctx = ctx or TargetContext()
        self.passthrough = passthrough
        self._cache: dict[str, Entry] = {}
        self._compiler = SeriesCompiler(table, self.ctx)

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
        agg: dict[str, list[Any]] = {}  # prefix → [value, priority, canon | None, family]
        cache = self._cache
        compile_entry = self._compiler.compile
        add_model = models.add
        bad = meta.bad
        sample_lines = 0
        cache_get = cache.get
        for line, lineno in iter_lines(text, meta):
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
                if entry.error is not None:
                    bad(lineno, entry.error, key)
                elif entry.unmapped_family is not None:
                    unmapped.add(entry.unmapped_family)
                    if self.passthrough:
                        passthrough.setdefault(entry.unmapped_family, []).append(
                            f"{key} {tok}")
                continue
            if "_" in tok:
                bad(lineno, f"invalid sample value {tok!r}", key)
                continue
            try:
                value = float(tok)
            except ValueError:
                bad(lineno, f"invalid sample value {tok!r}", key)
                continue
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
        for prefix, (v, _prio, _key, fam_idx) in agg.items():
            families[fam_idx][prefix] = v
        for count_prefix, (fam_idx, sum_prefix, inf_prefix) in \
                self._compiler.mean_only.items():
            fam = families[fam_idx]
            if count_prefix in fam and sum_prefix not in fam:
                # Triton without the duration counter (counter_latencies=false, partial
                # expositions): a request count is no latency; emit nothing
                del fam[count_prefix]
                fam.pop(inf_prefix, None)
        return Normalized(families, models, unmapped, meta, passthrough,
                          self._compiler.keys)
