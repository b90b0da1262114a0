"""The cyclic garbage collector paused while an exposition is normalized.

Compiling a cold exposition creates ~10 long-lived objects per series, none of them
garbage, and the collections that allocation triggers (each older one scanning the whole
cache of compiled series) would take a large share of a cold cycle. So the collector is
paused while lines are read (if it was on; a read is bounded by ``limits.max_seconds``).
After a read that compiled *promote_at* series or more, the objects made meanwhile go to
the oldest generation at once (``gc.freeze()`` then ``gc.unfreeze()``, O(1)) instead of
being scanned by the first young collections; garbage among them waits for the next full
collection. Nothing is promoted when something else froze objects: they stay frozen.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused(size: Callable[[], int], promote_at: int) -> Iterator[None]:
    """The cyclic GC paused (if it was on) for the block, and what was made meanwhile
    promoted to its oldest generation when ``size()`` (the compiled series held) grew by
    ``promote_at`` or more (see the module)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    before = size()
    try:
        yield
    finally:
        if paused:
            if size() - before >= promote_at and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
