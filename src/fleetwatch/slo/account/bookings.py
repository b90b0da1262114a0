"""What one update of the SLO engine books, column by column.

The engine collects an update's bookings — per (SLO, model) whose interval has events:
its state, concurrency, band, good and total events and the latency evidence
(:func:`fleetwatch.slo.account.book.bookings`, and one trace event at a time) — into a
:class:`Bookings`: the window-store rows and counts for the ledger, and per booking the
band's evidence for the capacity model.

Units: events in counts, concurrency in requests, times in Unix seconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

#: The latency evidence of one booking: a histogram's bucket bounds (seconds, the tuple
#: shared by every model of that layout) and their deltas (observations).
Buckets = tuple[tuple[float, ...], Sequence[float]]

#: The latency evidence of a booking without a histogram (bounds, counts).
NO_BUCKETS: Buckets = ((), ())


class Bookings:
    """What one update (or one :meth:`SLOEngine.add_events` call) booked, column by
    column: ``rows`` a band's row and its ``all`` row per booking, ``goods``/``totals``
    its counts (once for both); and per booking the band's latency evidence for
    capacity: ``times`` (Unix seconds), ``bands`` (the band's row), ``buckets``
    (bounds, deltas), ``counts`` (observations), ``conc`` (requests). ``one_run``: every
    booking has one time and a distinct band row (an interval's bookings), so the
    evidence is added at once."""

    __slots__ = ("bands", "buckets", "conc", "counts", "goods", "one_run", "rows", "times",
                 "totals")

    def __init__(self, one_run: bool) -> None:
        self.one_run = one_run
        self.rows: list[int] = []
        self.goods: list[float] = []
        self.totals: list[float] = []
        self.times: list[float] = []
        self.bands: list[int] = []
        self.buckets: list[Buckets] = []
        self.counts: list[float] = []
        self.conc: list[float] = []

    def runs(self) -> Iterator[slice]:
        """The bookings cut into runs of one time and distinct band rows, in order."""
        n = len(self.bands)
        if n == 0:
            return
        if self.one_run or (len(set(self.times)) <= 1 and len(set(self.bands)) == n):
            yield slice(0, n)
            return
        start = 0
        while start < n:
            t0, seen, end = self.times[start], set(), start
            while end < n and self.times[end] == t0 and self.bands[end] not in seen:
                seen.add(self.bands[end])
                end += 1
            yield slice(start, end)
            start = end

