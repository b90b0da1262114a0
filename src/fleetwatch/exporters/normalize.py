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

The steady loop does per line one ``rfind``, one dict lookup and, when the value token is
the one of the last scrape, no parsing at all: each series remembers its last accepted
token and what it emitted (prefix, value, output line, appended to its family's list), so
an unchanged series costs one append per normalized series and the render reuses the
lines (:attr:`Normalized.lines`); a family whose lines are those of the last exposition
reuses the last state's dict and lines (copied before a sum or a withdrawal changes
them). Compiled series are evicted one by one when the
exposition stops carrying them (churn), and a model's series alone when its runtime is
learned (:meth:`Normalizer.invalidate_models`).

Why this module is long: the hot loop and what it keeps between scrapes (the emitted
slots, the model indexes, eviction and targeted invalidation of the same cache) are one
data structure; split, each half would reach into the other's state.
"""

from __future__ import annotations

import gc
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from operator import itemgetter
from typing import Any

from fleetwatch.exporters.compile import Emitted, Entry, SeriesCompiler
from fleetwatch.exporters.delta import (
    Hashes,
    LastExposition,
    apply_delta,
    is_clean,
    line_hashes,
)
from fleetwatch.exporters.normalized import Normalized, value_of
from fleetwatch.exporters.parser import (
    Metadata,
    format_value,
    iter_lines,
    read_comment,
    split_sample_line,
)
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

__all__ = ["Normalized", "Normalizer", "value_of"]

_PREFIX, _VALUE, _LINE, _NUMBER = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3)


#: What may end a sample line after its value (``str.rstrip`` set; never empty).
_TRAILING = frozenset(" \t\r")


class Normalizer:
    """Applies one :class:`~.table.SourceTable` to successive expositions of one target.

    Thread-compatible, not thread-safe: use one instance per target. ``passthrough=True``
    re-emits upstream families that no rule knows, unchanged (their lines re-validated:
    a line a Prometheus would reject is refused instead). ``limits`` bound each
    exposition (:class:`~.validate.Limits`). ``delta=False`` turns the delta path off
    (:mod:`.delta`; the same results, every line read: for benchmarks and the
    differential tests). Raises ``ValueError`` when a rule of the table targets a family
    the schema lacks.
    """

    #: When the compiled-series cache holds more than this many entries per sample line
    #: of the last exposition (label or model-name churn; at least :attr:`CACHE_FLOOR`
    #: entries more), the series that exposition did not carry are evicted, one by one:
    #: the series still exposed stay compiled (no cold cycle).
    CACHE_SLACK = 1.2
    CACHE_FLOOR = 1000
    #: An exposition that compiled at least this many new series hands what it made to
    #: the collector's oldest generation directly (see :meth:`normalize`).
    PROMOTE_AT = 5000

    def __init__(self, table: SourceTable, ctx: TargetContext | None = None,
                 passthrough: bool = False, limits: Limits | None = None,
                 delta: bool = True) -> None:
        self.table = table
        self.ctx = ctx or TargetContext()
        self.passthrough = passthrough
        self.limits = limits or Limits()
        self._cache: dict[str, Entry] = {}
        #: compiled series evicted so far (churn: series no longer exposed)
        self.evicted = 0
        #: per family, what the series emitted in this exposition (Entry.emits)
        self._emitted: list[list[Emitted]] = [[] for _ in METRICS]
        self._appends = [em_list.append for em_list in self._emitted]
        #: per family, the dict and lines its series made in the last exposition, unless
        #: they changed after (see _normalize): reused when the family's lines are the
        #: same again
        self._built: list[tuple[dict[str, float | str], list[str], list[float] | None]
                          | None] = [None for _ in METRICS]
        self._models: dict[tuple[str, str, str, str], int] = {}  # model → Entry.mi
        self._model_table: list[tuple[str, str, str, str]] = [("", "", "", "")]
        self._compiler = SeriesCompiler(table, self.ctx, self.limits.max_label_value_length)
        #: the last exposition, kept for the delta path (:mod:`.delta`) when it was clean
        self._last: LastExposition | None = None
        #: the delta path on (off: every exposition takes the full loop; same results)
        self.delta = delta
        #: expositions read by the delta path so far
        self.delta_reads = 0

    @property
    def dropped_labels(self) -> set[str]:
        """Upstream label names dropped because the schema has no place for them."""
        return self._compiler.dropped_labels

    def invalidate(self) -> None:
        """Forget every compiled series (a context change that may touch any series)."""
        self._last = None
        self._cache.clear()
        self._compiler.reset()
        self._built = [None for _ in METRICS]
        self._models.clear()
        del self._model_table[1:]

    def invalidate_models(self, models: Iterable[str]) -> int:
        """Forget the compiled series of these models only (their runtime became known:
        their labels change, no other series' do); how many were forgotten. The next
        exposition compiles them again, the other series stay as they are."""
        gone = set(models)
        if not gone:
            return 0
        self._last = None
        keys = [k for k, e in self._cache.items() if e.model is not None and e.model[0] in gone]
        for key in keys:
            del self._cache[key]
        return len(keys)

    def _evict(self, text: str) -> int:
        """Evict the compiled series ``text`` (the last exposition) does not carry, and
        what only they used (normalized series keys, label-block and mapping caches,
        model indexes); how many were evicted. Cost: one pass over the text."""
        cache = self._cache
        kept: dict[str, Entry] = {}
        for line, _lineno in iter_lines(text, Metadata()):
            sp = line.rfind(" ")
            key = line[:sp]
            entry = cache.get(key)
            if entry is None:
                split = split_sample_line(line)
                if isinstance(split, str):
                    continue
                key = split[0]
                entry = cache.get(key)
                if entry is None:
                    continue
            kept[key] = entry
        evicted = len(cache) - len(kept)
        self._cache = kept
        self._compiler.prune(kept.values())
        self._models.clear()
        del self._model_table[1:]
        for entry in kept.values():
            if entry.model is not None:
                entry.mi = self._model_index(entry.model)
        return evicted

    # -- hot path -------------------------------------------------------------------
    def normalize(self, text: str) -> Normalized:
        """Normalize one exposition body. Never raises on bad input (see ``meta.invalid``).

        The cyclic garbage collector is paused meanwhile (if it was on; bounded by
        ``limits.max_seconds``): compiling a cold exposition creates ~10 long-lived
        objects per series, none of them garbage, and the collections that allocation
        triggers (each older one scanning the whole cache) cost a third of a cold cycle.
        After an exposition that compiled :attr:`PROMOTE_AT` series or more, the objects
        made meanwhile go to the oldest generation at once (``gc.freeze()`` then
        ``gc.unfreeze()``, O(1)) instead of being scanned by the first young collections
        (70 ms after a 1000-model Triton cold cycle); garbage among them waits for the
        next full collection.

        An exposition with the last one's lines but for some values takes the delta path
        (:mod:`.delta`): only the changed lines are read, with the same result."""
        if text.startswith("\ufeff"):
            text = text[1:]
        lines = text.split("\n")
        hashes = line_hashes(lines) if self.delta else []  # off: nothing to compare
        last = self._last
        if last is not None:
            result = apply_delta(last, lines, hashes, self._cache.get, self._accept,
                                 self.passthrough, self._built)
            if result is not None:
                self.delta_reads += 1
                return result
            self._last = None
        self._compiler.begin()
        with self._collector_paused():
            return self._normalize_all(text, lines, hashes)

    @contextmanager
    def _collector_paused(self) -> Iterator[None]:
        """The cyclic GC paused (if it was on), and what was compiled meanwhile promoted
        to its oldest generation when that is :attr:`PROMOTE_AT` series or more (see
        :meth:`normalize`; not when something else froze objects: they stay frozen)."""
        paused = gc.isenabled()
        if paused:
            gc.disable()
        before = len(self._cache)
        try:
            yield
        finally:
            if paused:
                if len(self._cache) - before >= self.PROMOTE_AT and not gc.get_freeze_count():
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()

    def discover(self, text: str) -> set[str]:
        """The models whose runtime the series of ``text`` wait for
        (``TargetContext.defer``), found with one lookup per line: series not compiled
        yet are compiled on the way (unless deferred), values are not read. Call
        :meth:`normalize` after (its result is the exposition's state). Never raises on
        bad input (bad lines are left to :meth:`normalize`). The collector as in
        :meth:`normalize`."""
        self._compiler.begin()
        with self._collector_paused():
            meta = Metadata()
            deferred: set[str] = set()
            cache = self._cache
            deadline = time.perf_counter() + self.limits.max_seconds
            for count, (line, _lineno) in enumerate(iter_lines(text, meta)):
                if count & 4095 == 4095 and (count >= self.limits.max_series
                                             or time.perf_counter() > deadline):
                    break  # normalize refuses it
                if line[:line.rfind(" ")] in cache:
                    continue
                split = split_sample_line(line)
                if isinstance(split, str) or split[0] in cache:
                    continue
                entry = self._compiler.compile(split[0], meta)
                if entry.deferred is not None:
                    deferred.add(entry.deferred)
                    continue
                cache[split[0]] = entry
                if entry.model is not None:
                    entry.mi = self._model_index(entry.model)
            return deferred

    def _normalize_all(self, text: str, lines: list[str], hashes: Hashes) -> Normalized:
        result = self._normalize(text, lines, hashes)
        stale = self._compiler.stale
        if stale:
            # A series met another on one normalized series after the first had been
            # compiled as alone: compile that one again, now knowing, and redo this
            # exposition (the rest of the cache is warm, so this costs a steady cycle).
            for key in [k for k, e in self._cache.items() if e.canon in stale]:
                del self._cache[key]
            self._compiler.stale = set()
            result = self._normalize(text, lines, hashes)
        sample_lines = result.meta.sample_lines
        if len(self._cache) > max(self.CACHE_SLACK * sample_lines,
                                  sample_lines + self.CACHE_FLOOR):
            self.evicted += self._evict(text)
        self._compiler.forget_compiling_caches()
        return result

    def _normalize(self, text: str, text_lines: list[str], hashes: Hashes) -> Normalized:
        """The full loop over every line of ``text`` (``text_lines`` its lines, ``hashes``
        theirs); keeps what the delta path needs when the result is clean."""
        self._last = None
        meta = Metadata()
        families: list[dict[str, float | str]] = [{} for _ in METRICS]
        flines: list[list[str]] = [[] for _ in METRICS]  # families' lines, dict order
        numbers: list[list[float] | None] = [None for _ in METRICS]  # values, dict order
        for em_list in self._emitted:
            em_list.clear()
        unmapped: set[str] = set()
        deferred: set[str] = set()
        passthrough: dict[str, list[str]] = {}
        ptypes: dict[str, str | None] = {}  # passed-through family → TYPE at its first line
        agg: dict[str, list[Any]] = {}  # prefix → [value, priority, canon | None, family]
        cache = self._cache
        compile_entry = self._compiler.compile
        bad = meta.bad
        sample_lines = 0
        cache_get = cache.get
        models_get = self._models.get
        marks = bytearray(len(self._models) + 64)  # model index → seen in this exposition
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
        accept = self._accept
        per_line: list[Entry | None] = [None] * len(text_lines)  # the entry of each line
        # parser.iter_lines, inlined: a generator step per line costs on the hot path
        lineno = 0
        for line in text_lines:
            lineno += 1
            if not line:
                continue
            if line[0] == "#":
                if line.rstrip() == "# EOF":
                    break
                read_comment(line, meta, lineno)
                continue
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
            if entry is not None:
                tok = line[sp + 1:]  # a CR ending it is cut below (never equals entry.tok)
            else:
                tok = line[sp + 1:]
                if not (sp > 0 and line[sp - 1] == "}" and tok and tok.isprintable()
                        and "}" not in tok and "{" in key and " # " not in line):
                    # not 'name{labels} value' (a timestamp, an exemplar, a CR, …):
                    # parser.split_sample_line says what it is (the plain case is the
                    # same split: key up to the label set's brace, one value token)
                    split = split_sample_line(line)
                    if isinstance(split, str):
                        bad(lineno, split, line)
                        continue
                    raw, tok = split
                    # the same key is known missing already
                    entry = cache_get(raw) if raw != key else None
                    key = raw
                if entry is None:
                    entry = compile_entry(key, meta)
                    if entry.deferred is not None:
                        deferred.add(entry.deferred)
                        continue
                    cache[key] = entry
                    if entry.model is not None:
                        mi = models_get(entry.model)
                        entry.mi = mi = self._model_index(entry.model) if mi is None else mi
                        if mi >= len(marks):
                            marks.extend(bytes(mi + 64 - len(marks)))
            sample_lines += 1
            per_line[lineno - 1] = entry
            if entry.skip:
                if tok[-1:] in _TRAILING:
                    tok = tok.rstrip(" \t\r")
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
            if tok != entry.tok:  # else unchanged since the last scrape: accepted then
                wrong = accept(entry, tok)
                if wrong is not None:
                    if isinstance(wrong, str):
                        bad(lineno, wrong, key)
                        continue
                    reason = check_value(entry.check, wrong) or BAD_VALUE
                    refusals[reason] += 1
                    examples.setdefault(reason, f"{key[:200]}: {format_value(wrong)}")
                    if entry.group:
                        withdraw.add(entry.group)
                    continue
            marks[entry.mi] = 1
            entry.emit(entry.emitted)
            if not entry.rare:
                continue
            value = entry.value
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
        built = self._built
        reused: set[int] = set()  # families whose dict and lines are the last exposition's
        for i, em_list in enumerate(self._emitted):
            if em_list:  # C-level: one dict and one line list per family
                made = list(map(_LINE, em_list))
                last = built[i]
                # the same lines (C-level; a line is its prefix and value text, and the
                # text decides the value): the same dict
                if last is not None and last[1] == made:
                    families[i], flines[i], numbers[i] = last
                    reused.add(i)
                else:
                    built[i] = last = None  # freed first: the new ones reuse the memory
                    families[i] = dict(zip(map(_PREFIX, em_list), map(_VALUE, em_list),
                                           strict=True))
                    flines[i] = made
                    nums = list(map(_NUMBER, em_list))
                    # a series written twice is one dict entry: then no numbers
                    numbers[i] = nums if len(nums) == len(families[i]) else None
                    built[i] = (families[i], made, numbers[i])
                em_list.clear()
            else:
                built[i] = None
                numbers[i] = []
        table = self._model_table
        models = {table[i] for i in range(1, len(table)) if marks[i]}
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
            self._unshare(fam_idx, families, flines, reused, numbers)
            families[fam_idx][prefix] = v
            flines[fam_idx].append(f"{prefix} {format_value(v)}")
        lines_ok = not withdraw
        if withdraw:
            for i in range(len(families)):
                self._unshare(i, families, flines, reused, numbers)
            self._withdraw(families, withdraw)
        for count_prefix, (fam_idx, sum_prefix, inf_prefix) in \
                self._compiler.mean_only.items():
            fam = families[fam_idx]
            if count_prefix in fam and sum_prefix not in fam:
                # Triton without the duration counter (counter_latencies=false, partial
                # expositions): a request count is no latency; emit nothing
                self._unshare(fam_idx, families, flines, reused, numbers)
                fam = families[fam_idx]
                del fam[count_prefix]
                fam.pop(inf_prefix, None)
                lines_ok = False
        # the lines stand for the dicts unless a series was written twice (the last
        # value wins, at the first position), withdrawn or left out: render those
        if lines_ok and all(len(fl) == len(f) for fl, f in zip(flines, families,
                                                                strict=True)):
            lines: list[list[str]] | None = flines
        else:
            lines = None
        result = Normalized(families, models, unmapped, meta, passthrough,
                            self._compiler.keys, refusals, examples, ptypes, lines=lines,
                            deferred=deferred, numbers=numbers)
        if self.delta and is_clean(result, bool(deferred)):
            self._last = LastExposition(hashes, per_line, result)
        return result

    def _accept(self, entry: Entry, tok: str) -> str | float | None:
        """Take a series' new value token (one that is not its last accepted one): None
        when accepted — ``entry.tok``, ``.value``, ``.emit`` and ``.emitted`` are what the
        series emits from now on —, else what is wrong: a ``str`` (the token is not a
        number: the malformed-line message), or the ``float`` refused by the entry's value
        check (:func:`~.validate.check_value` gives the reason). The entry is unchanged
        when the value is not accepted. The full loop and the delta path both take
        values here."""
        if tok[-1:] in _TRAILING:  # a CR, or blanks after the value
            tok = tok.rstrip(" \t\r")
        if "_" in tok or not tok.isascii():  # Python's float takes "1_0", "١"
            return f"invalid sample value {tok!r}"
        try:
            value = float(tok)
        except ValueError:
            return f"invalid sample value {tok!r}"
        check = entry.check
        # refused: a cumulative value (check 1) outside [0, inf), a quantile
        # (check 2) negative or infinite (NaN is an empty summary's quantile)
        if check and not (0.0 <= value < INF) and (check == 1 or value == value):
            return value
        # what the series emits from now on (the two common cases here, no call)
        direct, scaled = entry.direct, entry.scaled
        if len(direct) == 1 and not scaled and value - value == 0:
            fam_idx, prefix = direct[0]  # the upstream text, unscaled
            entry.emit = self._appends[fam_idx]
            entry.emitted = (prefix, tok, f"{prefix} {tok}", value)
        elif len(scaled) == 1 and not direct:
            fam_idx, prefix, div, mul, neg_nan = scaled[0]  # unit-converted
            v = value / div * mul
            if neg_nan and v < 0:
                v = math.nan
            entry.emit = self._appends[fam_idx]
            entry.emitted = (prefix, v, f"{prefix} {v!r}" if v - v == 0  # finite
                             else f"{prefix} {format_value(v)}", v)
        else:
            entry.emit, entry.emitted = self._emits(entry, tok, value)
        entry.tok = tok
        entry.value = value
        return None

    def _unshare(self, i: int, families: list[dict[str, float | str]],
                 flines: list[list[str]], reused: set[int],
                 numbers: list[list[float] | None]) -> None:
        """Before family ``i``'s dict or lines change after they were made: they are no
        longer what its series emitted (not reused next time), and not the last
        exposition's objects (copied when they were); its numbers are dropped."""
        self._built[i] = None
        numbers[i] = None
        if i in reused:
            reused.discard(i)
            families[i] = dict(families[i])
            flines[i] = list(flines[i])

    def _model_index(self, model: tuple[str, str, str, str]) -> int:
        """The index of a model in this normalizer's table (Entry.mi; 0 is no model)."""
        i = self._models.get(model)
        if i is None:
            i = self._models[model] = len(self._model_table)
            self._model_table.append(model)
        return i

    def _emits(self, entry: Entry, tok: str, value: float
               ) -> tuple[Callable[[Any], object], Any]:
        """What an accepted value of a series emits (``Entry.emit(Entry.emitted)``): per
        direct and scaled slot, (series prefix, value, output line) appended to its
        family's list. Direct slots keep the upstream's text when finite (NaN and ±Inf
        get the canonical spelling); scaled ones are floats. One slot: that list's
        ``append`` and its tuple; several: :func:`_emit_all` and the tuple of the slots'
        tuples, in slot order (direct, then scaled); none (shared slots only): ``bool``,
        a no-op. (The two common cases, one direct slot with a finite value and one scaled
        slot alone, are made in the loop itself and never come here.)"""
        lists = self._appends  # one bound method per family, shared by the series
        out: list[tuple[Callable[[Emitted], None], Emitted]] = []
        if entry.direct:
            finite = value - value == 0
            text = tok if finite else format_value(value)
            val: float | str = tok if finite else value
            for fam_idx, prefix in entry.direct:
                out.append((lists[fam_idx], (prefix, val, f"{prefix} {text}", value)))
        for fam_idx, prefix, div, mul, neg_nan in entry.scaled:
            v = value / div * mul
            if neg_nan and v < 0:
                v = math.nan
            out.append((lists[fam_idx], (prefix, v, f"{prefix} {format_value(v)}", v)))
        if len(out) == 1:
            return out[0]
        if not out:
            return bool, None
        return (partial(_emit_all, tuple(emit for emit, _ in out)),
                tuple(emitted for _, emitted in out))

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
        self.invalidate()  # and the delta path's memory
        return Normalized([{} for _ in METRICS], set(), set(), meta,
                          refused=(reason, message))


def _emit_all(emits: tuple[Callable[[Emitted], None], ...],
              emitted: tuple[Emitted, ...]) -> None:
    """Emit every slot of a series with several (see ``Normalizer._emits``): its
    ``emitted`` is then the tuple of what each slot emits, in slot order."""
    for emit, one in zip(emits, emitted, strict=True):
        emit(one)
