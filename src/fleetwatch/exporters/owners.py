"""Who feeds a normalized series where upstream series may meet on it.

Series *may meet* on one normalized series when their rule drops labels (a lossy label
mapping: Triton's per-GPU series with ``gpu_uuid`` dropped) or when two rules feed one
target sample (version aliases). For each such normalized series (its *prefix*: name and
rendered labels) :class:`Owners` keeps its *owner*, the canonical identity of the first
upstream series compiled onto it (``name`` and its labels sorted), and whether it is
*shared*: met by a second upstream series, so that its value is the sum of its series
(:mod:`.sharing`). The owner was compiled as alone (its value written straight to the
prefix); when the prefix becomes shared the owner is *stale* and must be compiled again;
when a read shows one series alone on a shared prefix, the prefix is owned by that
series again (:meth:`Owners.unshare`). The compiler (:class:`~.compile.SeriesCompiler`)
tracks, the normalizer acts on what it shows (:func:`~.sharing.misjudged`).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["Owners"]


class Owners:
    """The owners of the normalized series where series may meet (see the module
    docstring). ``shared``: the prefixes fed by several upstream series; ``stale``: the
    canonical identities of upstream series to compile again (the caller empties it)."""

    def __init__(self) -> None:
        self.stale: set[str] = set()  # upstream series (canonical) to compile again
        self._owner: dict[str, str] = {}  # normalized series → first upstream key seen
        self.shared: set[str] = set()  # normalized series fed by several upstream series

    @property
    def sharing(self) -> bool:
        """Whether any normalized series is compiled as shared (fed by several)."""
        return bool(self.shared)

    def clear(self) -> None:
        """Forget every owner and shared prefix (``stale`` is kept for the caller)."""
        self._owner.clear()
        self.shared.clear()

    def keep(self, prefixes: set[str]) -> None:
        """Forget the owners and shared prefixes not in ``prefixes``."""
        self._owner = {p: o for p, o in self._owner.items() if p in prefixes}
        self.shared &= prefixes

    def track(self, prefix: str, canon: str) -> None:
        """Upstream series ``canon`` lands on normalized series ``prefix`` through a
        mapping where series may meet (lossy, or a target sample two rules feed): the
        first is the prefix's owner; when another meets it, the prefix is shared and the
        owner, compiled as alone, goes to :attr:`stale`. Idempotent."""
        owner = self._owner.setdefault(prefix, canon)
        if owner != canon and prefix not in self.shared:
            self.shared.add(prefix)
            self.stale.add(owner)

    def unshare(self, met: Mapping[str, set[str]]) -> set[str]:
        """The shared normalized series that one upstream series alone fed in the last
        exposition read (``met``: shared prefix → the canonical identities of the series
        read on it), no longer shared and owned by that series: their series must be
        compiled again, as alone (the other series are gone: a sum of one is that series,
        as a first scrape of this exposition compiles it)."""
        alone = {p for p, canons in met.items() if len(canons) == 1}
        for prefix in alone:
            self.shared.discard(prefix)
            self._owner[prefix] = next(iter(met[prefix]))
        return alone
