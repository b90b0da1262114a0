"""The normalizer: one source table applied to successive expositions of one target.

Parse → map → aggregate in one loop (:meth:`Normalizer._read`) over the lines it does not
know: on a first scrape every line, on a steady one only the lines that changed since the
last clean exposition (:mod:`.changed`, :mod:`.lastscrape`: lines compared by hash at the
same position). Per line read: one ``rfind``, one dict lookup (the compiled series of the
raw key: :mod:`.seriescache`, compiled by :mod:`.compile` from the table of
:mod:`.table`) and, when the value token is the one the series last accepted, no parsing
at all (:mod:`.emit`). What a read gathers is a :class:`~.reading.Read`; the families
are then built from what the series emitted (:mod:`.families`), with the sums of shared
slots (:mod:`.sharing`), the refused groups withdrawn (:mod:`.withdraw`) and the
unmapped families passed through when asked (:mod:`.passthrough`); rendering is
:mod:`.render`.

Counter values pass through unchanged (only unit-scaled), so counter resets reach
Prometheus, whose ``rate()`` handles them. Values are validated on the way
(:mod:`.validate`: non-finite or negative counters, broken histograms and summaries are
withdrawn and counted by reason in :attr:`Normalized.invalid_samples`); the
:class:`~.validate.Limits` are enforced while the exposition is read (an exposition past
one is refused whole: :attr:`Normalized.refused`).

A normalizer that saw earlier expositions gives what a fresh one gives: a read that shows
series compiled from what an earlier exposition said (a sum whose other parts are gone, a
series met by a new one, an unmapped sample under other TYPE lines) compiles them again
(:func:`~.sharing.misjudged`; :attr:`~.entry.Entry.types_seen`, checked in the loop).
Compiled series are evicted one by one when the exposition stops carrying them (churn),
and a model's series alone when its runtime is learned
(:meth:`Normalizer.invalidate_models`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from itertools import compress, count
from operator import ne

from fleetwatch.exporters.adapters import add_adapters
from fleetwatch.exporters.changed import Replaced, alone, explained, renewed, replaced, unchanged
from fleetwatch.exporters.compile import SeriesCompiler
from fleetwatch.exporters.emit import accept as accept_value
from fleetwatch.exporters.entry import Entry
from fleetwatch.exporters.families import EmittedFamilies
from fleetwatch.exporters.gcpause import collector_paused
from fleetwatch.exporters.lastscrape import MAX_CHANGED_SHARE, LastScrape
from fleetwatch.exporters.normalized import Normalized, value_of
from fleetwatch.exporters.parser import Metadata, read_comment, split_sample_line
from fleetwatch.exporters.reading import Found, Read, Run, past_bound
from fleetwatch.exporters.seriescache import ModelIndex, carried
from fleetwatch.exporters.sharing import misjudged, summed
from fleetwatch.exporters.table import SourceTable, TargetContext
from fleetwatch.exporters.validate import INF, Limits
from fleetwatch.exporters.withdraw import check_histograms, withdraw

__all__ = ["Normalized", "Normalizer", "value_of"]


class Normalizer:
    """Applies one :class:`~.table.SourceTable` to successive expositions of one target.

    Thread-compatible, not thread-safe: use one instance per target. ``passthrough=True``
    re-emits upstream families that no rule knows, unchanged (their lines re-validated:
    a line a Prometheus would reject is refused instead). ``limits`` bound each
    exposition (:class:`~.validate.Limits`). Raises ``ValueError`` when a rule of the
    table targets a family the schema lacks.
    """

    #: When the compiled-series cache holds more than this many entries per sample line
    #: of the last exposition (label or model-name churn; at least :attr:`CACHE_FLOOR`
    #: entries more), the series that exposition did not carry are evicted, one by one:
    #: the series still exposed stay compiled (no cold cycle).
    CACHE_SLACK = 1.2
    CACHE_FLOOR = 1000
    #: An exposition that compiled at least this many new series hands what it made to
    #: the collector's oldest generation directly (:mod:`.gcpause`).
    PROMOTE_AT = 5000
    #: Reads of one exposition after its first that may compile again what it showed was
    #: compiled wrong (see :func:`~.sharing.misjudged`): a stale owner, then a sum of one.
    MAX_REREADS = 3

    def __init__(self, table: SourceTable, ctx: TargetContext | None = None,
                 passthrough: bool = False, limits: Limits | None = None) -> None:
        self.table = table
        self.ctx = ctx or TargetContext()
        self.passthrough = passthrough
        self.limits = limits or Limits()
        self._cache: dict[str, Entry] = {}
        #: compiled series evicted so far (churn: series no longer exposed)
        self.evicted = 0
        #: per family, what the series emitted in this exposition (Entry.emitted) and
        #: the dict and lines it made in the last one (reused when the lines are the same)
        self._families = EmittedFamilies()
        self._models = ModelIndex()  # model → Entry.mi
        self._compiler = SeriesCompiler(table, self.ctx, self.limits.max_label_value_length)
        #: the last exposition when it was clean (:mod:`.lastscrape`)
        self._last: LastScrape | None = None

    @property
    def dropped_labels(self) -> set[str]:
        """Upstream label names dropped because the schema has no place for them."""
        return self._compiler.dropped_labels

    def invalidate(self) -> None:
        """Forget every compiled series (a context change that may touch any series)."""
        self._last = None
        self._cache.clear()
        self._compiler.reset()
        self._families.forget()
        self._models.clear()

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
        kept = carried(cache, text)
        evicted = len(cache) - len(kept)
        self._cache = kept
        self._compiler.prune(kept.values())
        self._models.clear()
        for entry in kept.values():
            if entry.model is not None:
                entry.mi = self._models.of(entry.model)
        return evicted

    # -- the loop -------------------------------------------------------------------
    def normalize(self, text: str) -> Normalized:
        """:meth:`_normalize`, and the LoRA adapters' family for a table that reads them."""
        result = self._normalize(text)
        if self.table.reads_lora_adapters and result.refused is None:
            add_adapters(result, text)
        return result

    def _normalize(self, text: str) -> Normalized:
        """Normalize one exposition body. Never raises on bad input (see ``meta.invalid``).

        When the last exposition was clean and has as many lines, only the lines that
        changed are read (:mod:`.lastscrape`; the same lines: the last state, in new
        objects); else, or when a changed line is not the series the last exposition had
        there, every line is read.

        The cyclic garbage collector is paused while lines are read, and what a read that
        compiled :attr:`PROMOTE_AT` series or more made is promoted to its oldest
        generation (:mod:`.gcpause`)."""
        if text.startswith("\ufeff"):
            text = text[1:]
        lines = text.split("\n")
        hashes = list(map(hash, lines))
        last, self._last = self._last, None
        changed: list[int] | None = None  # None: every line is new
        if last is not None and len(hashes) == len(last.hashes):
            if hashes == last.hashes:
                self._last = last  # every line known: the last state, in new objects
                return self._replaced(last, unchanged(last))
            changed = list(compress(count(), map(ne, hashes, last.hashes)))
        self._compiler.begin()
        with collector_paused(lambda: len(self._cache), self.PROMOTE_AT):
            if (last is not None and changed is not None
                    and len(changed) <= MAX_CHANGED_SHARE * len(lines)):
                result = self._read_changed(last, lines, changed)
                if result is not None:
                    if result.refused is None:
                        last.hashes = hashes
                        self._last = last
                    return result
            return self._read_all(text, lines, hashes)

    def _read_all(self, text: str, lines: list[str], hashes: list[int]) -> Normalized:
        """Read every line of ``text`` (``lines``, ``hashes`` theirs) and make the state;
        keep the exposition (:mod:`.lastscrape`) when the state is clean."""
        read = self._read(lines, range(len(lines)))
        for _ in range(self.MAX_REREADS):
            if read.refused is not None or not misjudged(self._compiler.owners, self._cache,
                                                         read.fed):
                break
            read = self._read(lines, range(len(lines)))  # the rest of the cache is warm
        result = self._assemble(read, text)
        sample_lines = result.meta.sample_lines
        if len(self._cache) > max(self.CACHE_SLACK * sample_lines,
                                  sample_lines + self.CACHE_FLOOR):
            self.evicted += self._evict(text)
        self._compiler.forget_compiling_caches()
        if (result.lines is not None and result.numbers is not None and not read.deferred
                and not result.invalid_samples and not result.meta.invalid):
            self._last = LastScrape(hashes, read.entries, result)
        return result

    def _read(self, lines: list[str], indices: Iterable[int], full: bool = True) -> Read:
        """The loop: read the lines ``indices`` of ``lines`` (every line, or the changed
        ones), compiling the series not cached, taking each series' value
        (:func:`~.emit.accept`) and appending what it emits to its families' lists
        (:class:`~.families.EmittedFamilies`); stops at ``# EOF`` and at a
        :class:`~.validate.Limits` bound (``Read.refused``).

        Why this function is long: it is the per-line loop, inlined (a call per line
        would cost more than the loop's body); its rare branches are methods. In a
        ``full`` read an entry is compiled again where the TYPEs before its line differ
        from its own (:attr:`~.entry.Entry.types_seen`; a changed-lines read keeps every
        comment)."""
        self._families.clear()
        read = Read(Metadata(), [None] * len(lines), bytearray(len(self._models) + 64))
        meta, entries, marks = read.meta, read.entries, read.marks
        types = meta.types  # grows as TYPE lines are read, never changes a TYPE
        ok_seen, ok_at = None, -1  # the TYPEs last found alike, and len(types) then
        cache_get = self._cache.get
        accept = accept_value
        passthrough = self.passthrough
        appends = self._families.appends
        max_series = self.limits.max_series
        deadline = time.perf_counter() + self.limits.max_seconds
        sample_lines = 0
        runs = read.runs
        run_group: str | None = None  # the histogram of the last bucket read, and its run
        run = Run(-INF, 0.0)
        for i in indices:
            line = lines[i]
            if not line:
                continue
            if line[0] == "#":
                if line.rstrip() == "# EOF":
                    break
                read_comment(line, meta, i + 1)
                continue
            if sample_lines & 4095 == 4095 and (sample_lines >= max_series
                                                or time.perf_counter() > deadline):
                read.refused = self._refuse(past_bound(self.limits, sample_lines, meta))
                return read
            # "key value" whose key is known: label sets repeat every scrape
            sp = line.rfind(" ")
            key = line[:sp]
            tok = line[sp + 1:]  # a CR ending it is cut by accept (never equals entry.tok)
            # (no value token: parser.split_sample_line says what the line is, as for a
            # series not cached yet)
            entry = cache_get(key) if tok else None
            if entry is None:
                if (sp > 0 and line[sp - 1] == "}" and tok and tok.isprintable() and "}" not in tok
                        and "{" in key and " # " not in line):  # 'name{labels} value'
                    entry = self._compiled(key, read)
                else:
                    found = self._odd_line(line, key, read, i + 1)
                    if found is None:
                        continue
                    entry, key, tok = found.entry, found.key, found.tok
                if entry is None:
                    continue
            sample_lines += 1
            entries[i] = entry
            if entry.skip:  # no slot: nothing to do unless malformed or unmapped
                seen = entry.types_seen
                if full and seen is not None and (seen is not ok_seen or len(types) != ok_at):
                    if tuple(map(types.get, seen[0])) == seen[1]:
                        ok_seen, ok_at = seen, len(types)
                    else:
                        entry = entries[i] = self._cache[key] = self._compiler.compile(key, meta)
                if entry.error is not None or entry.unmapped_family is not None:
                    read.skipped(entry, key, tok, i + 1, passthrough)
                continue
            if tok != entry.tok:  # else unchanged since the last scrape: accepted then
                wrong = accept(entry, tok, appends)
                if wrong is not None:
                    read.refused_value(entry, key, wrong, i + 1)
                    continue
            marks[entry.mi] = 1
            entry.emit(entry.emitted)
            if entry.rare:
                le = entry.le
                if le is not None:  # a bucket, checked against the last of its histogram
                    g = entry.group  # interned: one object per histogram
                    if g is not run_group:
                        run = runs.get(g) or runs.setdefault(g, Run(-INF, 0.0))
                        run_group = g
                    if le > run.le:
                        if entry.value < run.count:
                            read.decreasing.add(g)
                        run.le, run.count = le, entry.value
                    else:
                        read.unsure.add(g)
                if entry.shared:
                    summed(entry, read.sums, read.fed)
        read.sample_lines = sample_lines
        return read

    def _odd_line(self, line: str, key: str, read: Read, lineno: int) -> Found | None:
        """A sample line not read as ``name{labels} value`` (``key``: the text up to its
        last blank, not a cached key): parser.split_sample_line says what it is (a
        timestamp, an exemplar, a CR, …; None: a malformed line, recorded); its series,
        cached under its raw key or compiled (``entry`` None: deferred)."""
        split = split_sample_line(line)
        if isinstance(split, str):
            read.meta.bad(lineno, split, line)
            return None
        raw, tok = split
        entry = self._cache.get(raw) if raw != key else None  # key: known missing
        return Found(entry if entry is not None else self._compiled(raw, read), raw, tok)

    def _compiled(self, key: str, read: Read) -> Entry | None:
        """The series of a raw key not cached: compiled and cached, or None (a deferred
        model's series: not cached, the model recorded)."""
        entry = self._compiler.compile(key, read.meta)
        if entry.deferred is not None:
            read.deferred.add(entry.deferred)
            return None
        self._cache[key] = entry
        if entry.model is not None:
            entry.mi = mi = self._models.of(entry.model)
            if mi >= len(read.marks):
                read.marks.extend(bytes(mi + 64 - len(read.marks)))
        return entry

    # -- every line read: the state from what the series emitted --------------------
    def _assemble(self, read: Read, text: str) -> Normalized:
        """The state of an exposition whose every line ``read`` read (``text`` its body,
        for the slow whole-histogram check): the families from what the series emitted,
        then the refused histograms and groups withdrawn, the sums added and the
        mean-only series without their sum removed."""
        if read.refused is not None:
            return read.refused
        meta = read.meta
        fams = self._families.build()
        models = self._models.marked(read.marks)
        meta.sample_lines = read.sample_lines
        if read.sample_lines > self.limits.max_series:
            return self._refuse(past_bound(self.limits, read.sample_lines, meta))
        check_histograms(read, text, self._cache)
        self._families.add_sums(fams, read.sums)
        lines_ok = not read.withdraw
        if read.withdraw:
            for i in range(len(fams.dicts)):
                self._families.unshare(i, fams)
            withdraw(self._cache.values(), fams.dicts, read.withdraw)
        if self._families.drop_mean_only(fams, self._compiler.mean_only):
            lines_ok = False
        # the lines stand for the dicts unless a series was written twice (the last
        # value wins, at the first position), withdrawn or left out: render those
        if lines_ok and all(len(fl) == len(f) for fl, f in zip(fams.lines, fams.dicts,
                                                                strict=True)):
            lines: list[list[str]] | None = fams.lines
        else:
            lines = None
        return Normalized(families=fams.dicts, models=models, unmapped=read.unmapped,
                          meta=meta, passthrough=read.passthrough, keys=self._compiler.keys,
                          invalid_samples=read.refusals, invalid_examples=read.examples,
                          passthrough_types=read.ptypes, lines=lines,
                          deferred=read.deferred, numbers=fams.numbers)

    # -- the changed lines read: the last state with their values replaced ------------
    def _read_changed(self, last: LastScrape, lines: list[str],
                      changed: list[int]) -> Normalized | None:
        """The state of an exposition whose lines are ``last``'s but for ``changed``, read
        with the loop; None when the last exposition does not explain the changed lines
        (another series or a comment at a changed line, a refused or malformed value, a
        line passed through, part of a sum, a refused histogram): every line must be
        read."""
        if not alone(last.entries, changed, self.passthrough):
            return None
        read = self._read(lines, changed, False)
        if read.refused is not None:
            return read.refused
        if not explained(last, read, changed):
            return None
        new = replaced(last, read.entries, changed)
        self._families.clear()
        return self._replaced(last, new)

    def _replaced(self, last: LastScrape, new: Replaced) -> Normalized:
        """The last state with ``new``'s families (the changed ones remembered as built:
        :meth:`~.families.EmittedFamilies.rebuilt`), which ``last`` keeps from now on."""
        self._families.rebuilt(new.changed, new.families, new.lines, new.numbers)
        return renewed(last, new)

    # -- refused whole ----------------------------------------------------------------
    def _refuse(self, refusal: Normalized) -> Normalized:
        """``refusal`` (an exposition refused whole by a bound: :func:`~.reading.
        past_bound`), after forgetting the compiled series (a churning exposition must not
        grow the cache) and the last exposition."""
        self.invalidate()
        return refusal
