"""The normalized families made from what the series of one read emitted.

A *family* is one normalized metric (``METRICS`` index) as the state serves it: a dict
(series prefix → value), its output lines (``prefix value``, in line order) and its
numbers (the values as floats, in the same order; None when a series was written twice,
so the dict is shorter, or when the lines are not the series' own). Per family the
normalizer's loop appends to one list of :class:`~.entry.Emitted` (the *emitted* lists
of :class:`EmittedFamilies`); a family is *built* from its list once the read is done,
and remembered as built so that the next exposition giving the same lines reuses the
same objects (*reused*). A family changed after it was built (sums appended, series
withdrawn, a mean-only histogram's count dropped without its sum) is *unshared*: copied
if it was reused, and no longer remembered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from fleetwatch.exporters.emit import LINE, NUMBER, PREFIX, VALUE, Appends
from fleetwatch.exporters.entry import Emitted, MeanOnly
from fleetwatch.exporters.parser import format_value
from fleetwatch.exporters.sharing import Sum
from fleetwatch.labels.schema import METRICS

__all__ = ["Built", "EmittedFamilies", "Families"]


class Built(NamedTuple):
    """A family as its series' emitted values made it: its dict, output lines and numbers
    (None when a series was written twice: then the dict is shorter)."""

    families: dict[str, float | str]
    lines: list[str]
    numbers: list[float] | None


@dataclass(slots=True)
class Families:
    """The families being made from one read: dicts, output lines and numbers per family
    (``reused``: the families whose objects are the last exposition's, copied before they
    change)."""

    dicts: list[dict[str, float | str]]
    lines: list[list[str]]
    numbers: list[list[float] | None]
    reused: set[int]


class EmittedFamilies:
    """Per family, the list the series read emit into (``emitted``, through ``appends``:
    :mod:`.emit`) and the family as it was last built (``built``; None: not its series'
    own lines, or none yet)."""

    __slots__ = ("appends", "built", "emitted")

    def __init__(self) -> None:
        self.emitted: list[list[Emitted]] = [[] for _ in METRICS]
        self.appends: Appends = [em_list.append for em_list in self.emitted]
        self.built: list[Built | None] = [None for _ in METRICS]

    def clear(self) -> None:
        """Empty every family's emitted list (a new read starts)."""
        for em_list in self.emitted:
            em_list.clear()

    def forget(self) -> None:
        """Forget every built family (nothing is reused by the next read)."""
        self.built = [None for _ in METRICS]

    def build(self) -> Families:
        """Each family's dict, lines and numbers from what its series emitted (C-level:
        one dict and one line list per family); a family whose lines are those of the
        last exposition gets the last exposition's objects (``reused``). Empties the
        emitted lists."""
        built = self.built
        fams = Families([{} for _ in METRICS], [[] for _ in METRICS],
                        [None for _ in METRICS], set())
        for i, em_list in enumerate(self.emitted):
            if not em_list:
                built[i] = None
                fams.numbers[i] = []
                continue
            made = list(map(LINE, em_list))
            last = built[i]
            # the same lines (a line is its prefix and value text, and the text decides
            # the value): the same dict
            if last is not None and last.lines == made:
                fams.dicts[i], fams.lines[i], fams.numbers[i] = last
                fams.reused.add(i)
            else:
                built[i] = last = None  # freed first: the new ones reuse the memory
                fam = dict(zip(map(PREFIX, em_list), map(VALUE, em_list), strict=True))
                nums = list(map(NUMBER, em_list))
                # a series written twice is one dict entry: then no numbers
                numbers = nums if len(nums) == len(fam) else None
                fams.dicts[i], fams.lines[i], fams.numbers[i] = fam, made, numbers
                built[i] = Built(fam, made, numbers)
            em_list.clear()
        return fams

    def unshare(self, i: int, fams: Families) -> None:
        """Before family ``i``'s dict or lines change after they were made: they are no
        longer what its series emitted (not reused next time), and not the last
        exposition's objects (copied when they were); its numbers are dropped."""
        self.built[i] = None
        fams.numbers[i] = None
        if i in fams.reused:
            fams.reused.discard(i)
            fams.dicts[i] = dict(fams.dicts[i])
            fams.lines[i] = list(fams.lines[i])

    def rebuilt(self, changed: Iterable[int], families: list[dict[str, float | str]],
                lines: list[list[str]], numbers: list[list[float] | None]) -> None:
        """Remember the ``changed`` families' new objects as built (those whose last
        objects were their series' own lines; a family with sums appended stays
        unremembered)."""
        built = self.built
        for fam in changed:
            if built[fam] is not None:  # None: not its series' own lines (sums appended)
                built[fam] = Built(families[fam], lines[fam], numbers[fam])

    def add_sums(self, fams: Families, sums: Mapping[str, Sum]) -> None:
        """Add the normalized series of shared slots (``sums``, by prefix: :mod:`.sharing`)
        to their families, after the series' own lines."""
        for prefix, total in sums.items():
            self.unshare(total.family, fams)
            fams.dicts[total.family][prefix] = total.value
            fams.lines[total.family].append(f"{prefix} {format_value(total.value)}")

    def drop_mean_only(self, fams: Families, mean_only: Mapping[str, MeanOnly]) -> bool:
        """Remove the ``_count`` and ``+Inf`` bucket of every mean-only histogram
        (``mean_only``: by count prefix) whose ``_sum`` is missing; whether any was."""
        dropped = False
        for count_prefix, mean in mean_only.items():
            fam = fams.dicts[mean.family]
            if count_prefix in fam and mean.sum_prefix not in fam:
                # Triton without the duration counter (counter_latencies=false, partial
                # expositions): a request count is no latency; emit nothing
                self.unshare(mean.family, fams)
                fam = fams.dicts[mean.family]
                del fam[count_prefix]
                fam.pop(mean.inf_prefix, None)
                dropped = True
        return dropped
