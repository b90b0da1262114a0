"""Which (SLO, model) states the judge runs for: those whose judged inputs changed.

A state is marked when it is made, gets its first events, has its error set or cleared
(the accounting marks these in :attr:`Marks.dirty`), or when one of its window-store
rows' burning flag flipped since the last update (:meth:`Marks.flipped`, through the
rows' owners).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from fleetwatch.slo.arrays import BoolArray
from fleetwatch.slo.state import ModelKey

#: ``(SLO name, model)`` — the key of a state.
StateKey = tuple[str, ModelKey]


class Marks:
    """The states to judge at the next update (``dirty``), each window-store row's owner
    state (``owner``) and the rows' burning flags at the last update."""

    __slots__ = ("_prev", "dirty", "owner")

    def __init__(self) -> None:
        self.dirty: set[StateKey] = set()
        self.owner: dict[int, StateKey] = {}
        self._prev: BoolArray = np.zeros(0, dtype=bool)

    def flipped(self, now: BoolArray) -> None:
        """Mark the owners of the rows whose burning flag (``now``, per row) differs from
        the last call's (a row new since then was not burning)."""
        prev = self._prev
        if len(prev) < len(now):
            prev = np.concatenate([prev, np.zeros(len(now) - len(prev), dtype=bool)])
        dirty, owner = self.dirty, self.owner
        for r in (now != prev[:len(now)]).nonzero()[0].tolist():
            key = owner.get(r)
            if key is not None:
                dirty.add(key)
        self._prev = now

    def forget(self, key: StateKey, rows: Iterable[int]) -> None:
        """The state ``key`` and its window-store ``rows`` are forgotten."""
        self.dirty.discard(key)
        for r in rows:
            self.owner.pop(r, None)
