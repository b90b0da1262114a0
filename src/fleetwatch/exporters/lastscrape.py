"""What the normalizer keeps of the last clean exposition, so that it reads only the lines
that changed since.

A busy server's scrapes differ from the last one in a few values (the counters of the
models that served requests, a few gauges); every other line is byte-identical. After a
*clean* exposition (no refused sample, no malformed line, no series written twice, no
sum of several upstream series, nothing deferred) the
normalizer keeps, per line, its hash and the compiled entry it was read with, and the
result (:class:`LastScrape`). The next exposition with as many lines is compared with it
by hashes (C-level; Python's string hash is 64-bit SipHash keyed at random per process,
so an upstream cannot aim at a collision, and a chance one — a changed line read as
unchanged — has a probability of about 2⁻⁶⁴ per line). Lines whose hash is the same are
known: their series emit what they emitted. :class:`Places` says where each line's
series are in the families' lines, dicts and numbers, so that a line read again replaces
its own values there.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from fleetwatch.exporters.entry import Entry
from fleetwatch.exporters.normalized import Normalized

#: When more than this share of the lines changed, every line is read as new: reading a
#: line costs about as much as replacing its values, and the copies of the families that
#: replacing needs are then no longer cheaper.
MAX_CHANGED_SHARE = 1 / 3

#: A slot's place, one int: ``family << PLACE_BITS | index in the family``.
PLACE_BITS = 32
PLACE_INDEX = (1 << PLACE_BITS) - 1


@dataclass(slots=True)
class Places:
    """Where each line's series are in their families' lines, dicts and numbers: the
    family and the index of the series in it (the loop appends in line order, slot after
    slot — direct slots, then scaled ones — so the index is the count of earlier slots in
    the same family), one int per slot (see :data:`PLACE_BITS`). ``one[i]``: line ``i``'s
    place when its entry has one slot, else -1 and ``several[i]`` holds its places (8
    bytes per line, the rare lines apart)."""

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
        for fam in [*(slot.family for slot in entry.direct),
                    *(slot.family for slot in entry.scaled)]:
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


@dataclass(slots=True)
class LastScrape:
    """The last clean exposition: per line its hash and the entry read from it (None: a
    comment, a blank line), and the result; ``places`` (:func:`places_of`) and
    ``histograms`` (:func:`histograms_of`) are made on first use."""

    hashes: list[int]
    entries: list[Entry | None]
    result: Normalized
    places: Places | None = field(default=None)
    histograms: dict[str, list[Entry]] | None = field(default=None)
