"""The delta path: an exposition whose lines are the last one's but for some values.

A busy server's scrapes differ from the last one in a few values (the counters of the
models that served requests, a few gauges); every other line is byte-identical. After a
*clean* exposition (no refused sample, no malformed line, no series written twice,
nothing deferred: see :func:`is_clean`) the normalizer keeps, per line, its hash and the
compiled entry it was read with (:class:`LastExposition`). The next exposition with as
many lines is compared with it by hashes (C-level; Python's string hash is 64-bit
SipHash keyed at random per process, so an upstream cannot aim at a collision, and a
chance one — a changed line read as unchanged — has a probability of about 2⁻⁶⁴ per
line), and only the lines whose hash changed are read:

* a line of a sample no rule uses, or of an unmapped family with pass-through off: its
  value is never read, nothing to do;
* a mapped series (not part of a sum) whose key is the one compiled for
  that line: its new value is taken exactly as the full loop takes it (the normalizer's
  ``accept``: validation, unit scaling, the output lines) and, per slot, its family's
  dict, line and number at the series' position are replaced, in copies of the last
  state's (copy on write: the last state's objects are never changed).

Anything else — a different line count, a changed comment, a key not compiled for that
line, part of a sum of several upstream series, a refused or malformed value, more than a
third of the lines changed — falls back to the full loop; a histogram with a changed
bucket is checked whole (as the full loop would) and falls back when refused. The full
loop gives the same result by construction (the entries' remembered token and output are
what it would have made of the lines read here). Tests hold both paths to identical
results on random sequences of expositions (``tests/test_normalize_delta.py``).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress, count
from operator import ne

from fleetwatch.exporters.compile import Entry
from fleetwatch.exporters.normalized import Normalized
from fleetwatch.exporters.validate import check_buckets

#: More changed lines than this share of the exposition: the full loop (which reads
#: every line at about the cost of a changed line here) is as cheap.
MAX_CHANGED_SHARE = 1 / 3

#: One hash per line of an exposition (a list: an array of them costs more to make and
#: to compare than it saves; numpy's import alone would be a fifth of a 1000-model
#: target's memory).
Hashes = list[int]


def line_hashes(lines: list[str]) -> Hashes:
    """The hash of every line (≈ 40 bytes per line: what is kept between scrapes instead
    of the lines themselves)."""
    return list(map(hash, lines))


@dataclass(slots=True)
class LastExposition:
    """What the delta path keeps of the last clean exposition: per line its hash and the
    entry read from it (None: a comment, a blank line), and the result; ``places``
    (made on first use: :func:`places_of`) per line where its series are in their
    families' lines, dicts and numbers."""

    hashes: Hashes
    entries: list[Entry | None]
    result: Normalized
    places: Places | None = field(default=None)
    #: (made on first use) per histogram (``Entry.group``), its buckets' entries
    histograms: dict[str, list[Entry]] | None = field(default=None)


def is_clean(result: Normalized, deferred: bool) -> bool:
    """Whether the delta path may start from ``result``: every family's lines and dict
    align one to one (no series written twice, none withdrawn, no mean-only series
    removed; sums of several upstream series come after the series emitted alone), no
    sample refused, no line malformed, no series deferred."""
    return (result.lines is not None and result.numbers is not None and not deferred
            and not result.invalid_samples and not result.meta.invalid)


#: A slot's place, one int: ``family << PLACE_BITS | index in the family``.
PLACE_BITS = 32
_INDEX = (1 << PLACE_BITS) - 1


@dataclass(slots=True)
class Places:
    """Where each line's series are in their families' lines, dicts and numbers: the
    family and the index of the series in it (the full loop appends in line order, slot
    after slot — direct slots, then scaled ones, as ``Normalizer._emits`` — so the index
    is the count of earlier slots in the same family), one int per slot (see
    :data:`PLACE_BITS`). ``one[i]``: line ``i``'s place when its entry has one slot, else
    -1 and ``several[i]`` holds its places (8 bytes per line, the rare lines apart)."""

    one: array[int]
    several: dict[int, tuple[int, ...]]

    def of(self, line: int) -> tuple[int, ...]:
        """The places of line ``line``'s slots (meaningless for a line without an
        accepted entry)."""
        place = self.one[line]
        return (place,) if place >= 0 else self.several.get(line, ())


def places_of(entries: list[Entry | None], families: int) -> Places:
    """The :class:`Places` of every line of the exposition ``entries`` were read from."""
    seen = [0] * families
    one = array("q", bytes(8 * len(entries)))
    several: dict[int, tuple[int, ...]] = {}
    for i, entry in enumerate(entries):
        if entry is None or entry.skip:
            continue
        at = []
        for slot in entry.direct + entry.scaled:
            fam = slot[0]
            at.append(fam << PLACE_BITS | seen[fam])
            seen[fam] += 1
        if len(at) == 1:
            one[i] = at[0]
        else:
            one[i] = -1
            several[i] = tuple(at)
    return Places(one, several)


def histograms_of(entries: list[Entry | None]) -> dict[str, list[Entry]]:
    """The bucket entries of each histogram (``Entry.group``) among ``entries``."""
    out: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry is not None and entry.le is not None and not entry.skip:
            out.setdefault(entry.group, []).append(entry)
    return out


def apply_delta(last: LastExposition, lines: list[str], hashes: Hashes,
                cache_get: Callable[[str], Entry | None],
                accept: Callable[[Entry, str], object], passthrough: bool,
                built: list[tuple[dict[str, float | str], list[str], list[float] | None]
                           | None]) -> Normalized | None:
    """The state of the exposition ``lines`` (``hashes`` theirs) read against ``last``, or
    None: the full loop must read it (see the module). ``accept(entry, token)`` is the
    normalizer's value step (None: accepted, the entry's ``emitted`` updated); ``built``
    the normalizer's per-family memory of the last state, updated for the families
    changed here. ``last`` is updated to this exposition when a state is returned."""
    old = last.hashes
    if len(hashes) != len(old):
        return None
    prev = last.result
    families = list(prev.families)
    flines = list(prev.lines or ())
    numbers = list(prev.numbers or ())
    changed = [] if hashes == old else list(compress(count(), map(ne, hashes, old)))
    if changed:
        if len(changed) > MAX_CHANGED_SHARE * len(lines):
            return None
        entries = last.entries
        # first every changed line's series, before anything is computed or changed (a
        # churning exposition — new names at old lines — leaves at its first new name)
        values: list[tuple[int, Entry, str]] = []
        moved: set[str] = set()  # histograms with a changed bucket
        for i in changed:
            entry = entries[i]
            line = lines[i]
            sp = line.rfind(" ")
            if entry is None or cache_get(line[:sp]) is not entry:
                return None  # a comment, a blank line, another series at this line
            if entry.skip:
                if passthrough and entry.unmapped_family is not None:
                    return None  # its line is copied: the full loop checks and copies it
                continue  # a value nobody reads
            if entry.rare:
                if entry.shared or entry.le is None:
                    return None  # part of a sum: the full loop sums
                moved.add(entry.group)
            values.append((i, entry, line[sp + 1:]))
        places = last.places
        if places is None:
            places = last.places = places_of(entries, len(families))
        copied = [False] * len(families)  # copy on write, once per family
        for i, entry, tok in values:
            before = entry.emitted
            if accept(entry, tok) is not None:
                return None  # refused or malformed: the full loop records it
            after = entry.emitted
            at = places.of(i)
            if len(at) == 1:
                before, after = (before,), (after,)
            for place, was, now in zip(at, before, after, strict=True):
                fam = place >> PLACE_BITS
                pos = place & _INDEX
                if not copied[fam]:
                    copied[fam] = True
                    families[fam] = dict(families[fam])
                    flines[fam] = list(flines[fam])
                    nums = numbers[fam]
                    if nums is not None:  # None: a family with sums (read from the dict)
                        numbers[fam] = list(nums)
                fl = flines[fam]
                if fl[pos] is not was[2]:
                    return None  # not where it was (cannot happen; never patch blindly)
                fl[pos] = now[2]
                families[fam][now[0]] = now[1]
                nums = numbers[fam]
                if nums is not None:
                    nums[pos] = now[3]
        if moved:
            # a histogram with a changed bucket is checked whole, as the full loop would
            # (check_buckets is its verdict: the streaming check of an ascending run and
            # the whole check of any other agree); refused: the full loop refuses it
            hists = last.histograms
            if hists is None:
                hists = last.histograms = histograms_of(entries)
            for group in moved:
                if check_buckets([(b.le, b.value) for b in hists[group]  # type: ignore[misc]
                                  ]) is not None:
                    return None
        for fam in compress(count(), copied):
            if built[fam] is not None:  # None: not its series' own lines (sums appended)
                built[fam] = (families[fam], flines[fam], numbers[fam])
    result = Normalized(families, set(prev.models), set(prev.unmapped), prev.meta,
                        prev.passthrough, prev.keys, Counter(), {},
                        prev.passthrough_types, lines=flines, numbers=numbers)
    last.hashes = hashes
    last.result = result
    return result
