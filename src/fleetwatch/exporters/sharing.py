"""Series sharing: several upstream series feeding one normalized series.

A compiled series' *shared slot* (:class:`~.entry.Shared`) is a normalized series that
other upstream series may feed too. What one read of the normalizer's loop makes of the
series it read on one shared slot (a :class:`Sum`):

* same rule priority, different upstream series → **summed** (Triton per-GPU instance
  series with ``gpu_uuid`` dropped; dcgm FB free + used + reserved = total);
* different priority → the **lower priority number wins** (version aliases such as
  vLLM ``kv_cache_usage_perc`` over ``gpu_cache_usage_perc``);
* the same upstream series twice (a duplicated family) → the **last** sample wins.

Whether a series shares its slot is decided when it is compiled, from what the
expositions read so far showed (:class:`~.compile.SeriesCompiler`); a read that shows the
decision wrong — a series met by another after it was compiled as alone, or series
compiled as meeting others that only one of them fed — drops those series from the cache
(:func:`misjudged`), so that a normalizer that saw earlier expositions gives what a fresh
one gives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetwatch.exporters.entry import Entry
from fleetwatch.exporters.owners import Owners

__all__ = ["Sum", "misjudged", "summed"]


@dataclass(slots=True)
class Sum:
    """A normalized series that several upstream series may feed (shared slots): its value
    so far, the priority that gave it, the upstream series that alone gave it (None: a sum
    of several) and its family."""

    value: float
    priority: int
    canon: str | None
    family: int


def summed(entry: Entry, sums: dict[str, Sum], fed: list[Entry]) -> None:
    """Add an accepted value to the normalized series of its shared slots (``sums``, by
    series prefix): summed with the series of the same priority, replaced by one of a
    lower priority number (see the module); ``entry`` is counted as read (``fed``)."""
    fed.append(entry)
    value = entry.value
    for slot in entry.shared:
        v = value / slot.divide * slot.multiply
        if slot.negative_is_nan and v < 0:
            v = math.nan
        cur = sums.get(slot.prefix)
        if cur is None:
            sums[slot.prefix] = Sum(v, slot.priority, entry.canon, slot.family)
        elif slot.priority < cur.priority or cur.canon == entry.canon:
            cur.value, cur.priority, cur.canon = v, slot.priority, entry.canon
        elif slot.priority == cur.priority:
            cur.value += v
            cur.canon = None  # an aggregate of several upstream series


def misjudged(owners: Owners, cache: dict[str, Entry], fed: list[Entry]) -> bool:
    """Whether an exposition showed series compiled from what earlier ones said, then
    dropped from ``cache`` (raw key → compiled series; the next read compiles them as a
    first read of this exposition does): a series met by another on one normalized series
    after it was compiled as alone (:attr:`~.owners.Owners.stale`), else series
    compiled as meeting others on a normalized series that only one of them fed (``fed``:
    the series with shared slots the read took; the others gone:
    :meth:`~.owners.Owners.unshare`; ``owners``: the compiler's,
    :attr:`~.compile.SeriesCompiler.owners`)."""
    stale = owners.stale
    if stale:
        for key in [k for k, e in cache.items() if e.canon in stale]:
            del cache[key]
        owners.stale = set()
        return True
    if not owners.sharing:
        return False
    met: dict[str, set[str]] = {}
    for entry in fed:
        for slot in entry.shared:
            met.setdefault(slot.prefix, set()).add(entry.canon)
    alone = owners.unshare(met)
    if not alone:
        return False
    for key in [k for k, e in cache.items()
                if e.shared and any(slot.prefix in alone for slot in e.shared)]:
        del cache[key]
    return True
