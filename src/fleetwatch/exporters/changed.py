"""The changed lines: an exposition read against the last clean one.

When an exposition has as many lines as the last clean one (:class:`~.lastscrape.
LastScrape`) and at most :data:`~.lastscrape.MAX_CHANGED_SHARE` of them changed, the
normalizer's loop reads only the *changed* lines, and their series replace their own
values in copies of the last state's families, at the *places* the last exposition gave
them (copy on write: a family is copied once, at its first changed value). The last
exposition *explains* the changed lines when each holds the series it held there, a
series that can change alone (not part of a sum, not a line passed through), and the read
refused nothing, deferred nothing and left every histogram with a changed bucket valid;
otherwise every line is read again.
"""

from __future__ import annotations

from itertools import compress, count
from operator import is_not
from typing import NamedTuple

from fleetwatch.exporters.entry import Entry
from fleetwatch.exporters.lastscrape import (
    PLACE_BITS,
    PLACE_INDEX,
    LastScrape,
    histograms_of,
    places_of,
)
from fleetwatch.exporters.normalized import Normalized
from fleetwatch.exporters.reading import Read
from fleetwatch.exporters.validate import check_buckets

__all__ = ["Replaced", "alone", "explained", "renewed", "replaced", "unchanged"]


class Replaced(NamedTuple):
    """The last state's families with the changed lines' values: dicts, output lines and
    numbers per family, and the indexes of the families that were copied (``changed``)."""

    families: list[dict[str, float | str]]
    lines: list[list[str]]
    numbers: list[list[float] | None]
    changed: list[int]


def alone(known: list[Entry | None], changed: list[int], passthrough: bool) -> bool:
    """Whether the last exposition (``known``: its series per line) had a series at each
    changed line that can change alone: not part of a sum, not a line passed through
    (``passthrough``: the normalizer's setting). Checked before anything is read."""
    for i in changed:
        entry = known[i]
        if entry is None or entry.shared or (passthrough
                                             and entry.unmapped_family is not None):
            return False
    return True


def explained(last: LastScrape, read: Read, changed: list[int]) -> bool:
    """Whether ``read`` (the changed lines read) holds at each changed line the series
    ``last`` had there, refused and deferred nothing, passed nothing through, summed
    nothing, and left every histogram with a changed bucket valid (checked whole, as
    reading every line would: :func:`~.validate.check_buckets` is its verdict, and the
    streaming check of an ascending run and the whole check of any other agree)."""
    known, got = last.entries, read.entries
    if any(map(is_not, map(got.__getitem__, changed), map(known.__getitem__, changed))):
        return False  # another series, or none, at a changed line
    if (read.meta.invalid or read.refusals or read.deferred or read.passthrough
            or read.sums):
        return False
    if read.runs:
        hists = last.histograms
        if hists is None:
            hists = last.histograms = histograms_of(known)
        for group in read.runs:
            if check_buckets([(b.le, b.value) for b in hists[group]
                              if b.le is not None]) is not None:
                return False
    return True


def replaced(last: LastScrape, got: list[Entry | None], changed: list[int]) -> Replaced:
    """The last state's families with the values the series of the ``changed`` lines
    (``got``: the series per line, as read) emit now, at their places."""
    prev = last.result
    families = list(prev.families)
    flines = list(prev.lines or ())
    numbers = list(prev.numbers or ())
    places = last.places
    if places is None:
        places = last.places = places_of(last.entries, len(families))
    copied = [False] * len(families)  # copy on write, once per family
    for i in changed:
        entry = got[i]
        assert entry is not None
        at = places.of(i)
        if entry.skip or not at:
            continue  # a value nobody reads
        emitted = (entry.emitted,) if len(at) == 1 else entry.emitted
        for place, now in zip(at, emitted, strict=True):
            fam = place >> PLACE_BITS
            pos = place & PLACE_INDEX
            if not copied[fam]:
                copied[fam] = True
                families[fam] = dict(families[fam])
                flines[fam] = list(flines[fam])
                nums = numbers[fam]
                if nums is not None:  # None: a family with sums (read from the dict)
                    numbers[fam] = list(nums)
            flines[fam][pos] = now.line
            families[fam][now.prefix] = now.value
            fam_numbers = numbers[fam]
            if fam_numbers is not None:
                fam_numbers[pos] = now.number
    return Replaced(families, flines, numbers, list(compress(count(), copied)))


def unchanged(last: LastScrape) -> Replaced:
    """The last state's families, in new lists (an exposition whose every line is the
    last one's: no family changed)."""
    prev = last.result
    return Replaced(list(prev.families), list(prev.lines or ()), list(prev.numbers or ()), [])


def renewed(last: LastScrape, new: Replaced) -> Normalized:
    """The last state with ``new``'s families, in a new :class:`~.normalized.Normalized`,
    which ``last`` keeps from now on."""
    prev = last.result
    result = Normalized(families=new.families, models=set(prev.models),
                        unmapped=set(prev.unmapped), meta=prev.meta,
                        passthrough=prev.passthrough, keys=prev.keys,
                        passthrough_types=prev.passthrough_types, lines=new.lines,
                        numbers=new.numbers)
    last.result = result
    return result
