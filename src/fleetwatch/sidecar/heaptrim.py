"""Giving the C heap's free memory back to the system after scrape cycles (glibc only).

The sidecar remakes large objects at every update (expositions, the SLO engine's
``/metrics`` body and segment, the ``/slo`` and ``/autoscaling`` documents) in several
threads. Python frees them, but glibc's ``malloc`` keeps the freed pages inside its heaps
(one per thread that allocated) rather than returning them, so under model-name churn
RSS goes on rising long after the Python objects have levelled off. glibc's
``malloc_trim(0)`` returns every whole free page of every heap to the system
(``madvise(MADV_DONTNEED)``; glibc manual, "Memory Allocation Tunables" and
``malloc_trim(3)``).

:class:`HeapTrimmer` calls it after a scrape cycle, at most once every
:data:`MIN_INTERVAL_SECONDS`, and only when glibc's ``mallinfo2()`` says at least
:data:`MIN_FREE_BYTES` are free inside the heaps (an idle sidecar never trims). Elsewhere
(not Linux, or a C library other than glibc, such as musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import sys
import time
from dataclasses import dataclass, field

#: Seconds between two trims at least: a trim locks each heap while it walks its free
#: chunks, so it is kept rare next to the scrape interval.
MIN_INTERVAL_SECONDS = 10.0
#: Bytes free inside glibc's heaps (``mallinfo2().fordblks``) below which a due trim is
#: skipped: too little to be worth the walk.
MIN_FREE_BYTES = 32 * 2**20


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (``<malloc.h>``, glibc 2.33 and later): every field a
    ``size_t`` byte or chunk count."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def glibc() -> ctypes.CDLL | None:
    """The process's C library if it is glibc on Linux and has ``malloc_trim``; else
    None."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


@dataclass(slots=True)
class HeapTrimmer:
    """Rate-limited ``malloc_trim(0)`` (see module docstring).

    ``libc``: :func:`glibc`'s answer (None: every call is a no-op). ``interval``: seconds
    between trims at least; ``min_free_bytes``: free bytes in the heaps a trim needs.
    ``trims`` and ``trim_seconds`` count the trims made and the wall-clock seconds they
    took (their cost: the call holds no Python lock).
    """

    libc: ctypes.CDLL | None
    interval: float = MIN_INTERVAL_SECONDS
    min_free_bytes: int = MIN_FREE_BYTES
    trims: int = 0
    trim_seconds: float = 0.0
    _last: float | None = field(default=None, repr=False)

    @classmethod
    def load(cls) -> HeapTrimmer:
        """A trimmer of this process's C library (a no-op one off glibc)."""
        libc = glibc()
        if libc is not None:
            libc.malloc_trim.argtypes = [ctypes.c_size_t]
            libc.malloc_trim.restype = ctypes.c_int
            if hasattr(libc, "mallinfo2"):
                libc.mallinfo2.argtypes = []
                libc.mallinfo2.restype = _MallInfo2
        return cls(libc)

    def due(self, now: float) -> bool:
        """Whether a trim may run at ``now`` (monotonic seconds); True takes the slot, so
        the next is due ``interval`` seconds later. Always False without glibc."""
        if self.libc is None or (self._last is not None and now - self._last < self.interval):
            return False
        self._last = now
        return True

    def free_bytes(self) -> int | None:
        """Bytes free inside glibc's heaps (``mallinfo2().fordblks``), or None where
        ``mallinfo2`` is missing (glibc before 2.33, or not glibc)."""
        if self.libc is None or not hasattr(self.libc, "mallinfo2"):
            return None
        return int(self.libc.mallinfo2().fordblks)

    def trim(self) -> bool:
        """``malloc_trim(0)`` if at least ``min_free_bytes`` are free in the heaps (always,
        where that cannot be read); True if it ran. Blocking: call it off the event loop."""
        if self.libc is None:
            return False
        free = self.free_bytes()
        if free is not None and free < self.min_free_bytes:
            return False
        t0 = time.perf_counter()
        self.libc.malloc_trim(0)
        self.trim_seconds += time.perf_counter() - t0
        self.trims += 1
        return True
