"""Booking already-judged trace events (``sli.source: traces`` SLOs), one at a time.

A trace event — ``(SLO name, model key, Unix seconds, concurrency, good, total)``, made
by :func:`fleetwatch.traces.judge.judge` — is booked into the band of its concurrency and
``all``, like an interval's metric events (:mod:`fleetwatch.slo.account.book`), with the
band's latency evidence (none: a trace event has no histogram). Events that are none or
not finite are never booked.

Units: events in counts, concurrency in requests, times in Unix seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from fleetwatch.slo.account.bookings import NO_BUCKETS, Bookings, Buckets
from fleetwatch.slo.account.layout import Layout
from fleetwatch.slo.spec import SLOSpec
from fleetwatch.slo.state import ALL, ModelKey, SLOModelState, TraceEvent

#: The state of an SLO on a model at a time, made if missing (None: refused).
StateOf = Callable[[SLOSpec, ModelKey, float], SLOModelState | None]
#: The window-store row of a state's band (or ``all``) booked for the first time.
NewRow = Callable[[SLOModelState, str, float], int]


class TraceBook:
    """Books trace events of the SLOs in ``layout`` that select their model; ``seen``:
    per model when its last trace event counted (Unix seconds), for forgetting."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._traced = {s.name: s for s in layout.slos if s.sli.source == "traces"}
        self.seen: dict[ModelKey, float] = {}

    def book(self, events: Iterable[TraceEvent], ts: float, state_of: StateOf,
             new_row: NewRow, dirty: set[tuple[str, ModelKey]]) -> tuple[Bookings, float]:
        """The bookings of ``events`` and the time they count at: the latest of ``ts``
        (the last accounted time: the windows do not go back) and the events' times. An
        unknown SLO, one not selecting the model or past its model limit (``state_of``
        gives None), and a time or concurrency that is not finite are skipped. A state's
        first booking marks it in ``dirty`` (no_data → judged)."""
        booked = Bookings(one_run=False)  # a row may be booked several times
        selects = self.layout.selects
        for name, mk, t, conc, good, total in events:
            slo = self._traced.get(name)
            if slo is None or not selects(slo, mk) \
                    or not math.isfinite(conc) or not math.isfinite(t):
                continue
            ts = max(ts, t)
            self.seen[mk] = ts
            st = state_of(slo, mk, ts)
            if st is not None:
                self.book_one(ts, st, (conc, good, total), booked, new_row, dirty)
        return booked, ts

    def book_one(self, ts: float, st: SLOModelState, event: tuple[float, float, float],
                 booked: Bookings, new_row: NewRow, dirty: set[tuple[str, ModelKey]],
                 buckets: Buckets = NO_BUCKETS) -> None:
        """Book ``event`` (concurrency, good, total) of ``st`` at ``ts`` into its band and
        ``all``, appended to ``booked`` with the band's latency evidence (``buckets``: a
        latency histogram's bounds and deltas, observed ``total`` times; a trace event has
        none). A new band row changes the layout (the column views compile again). The
        per-item test oracle (``tests/slo/oracle.py``) books an interval's events here."""
        conc, good, total = event
        if not (0.0 < total < math.inf and 0.0 <= good < math.inf):
            return
        good = min(good, total)
        if not st.rows:
            dirty.add((st.slo.name, st.model))  # no_data → judged
        band = self.layout.band(st.slo.name, conc)
        r, r_all = st.rows.get(band), st.rows.get(ALL)
        if r is None:
            r = new_row(st, band, ts)
            self.layout.changed()
        if r_all is None:
            r_all = new_row(st, ALL, ts)
        booked.rows.extend((r, r_all))
        booked.goods.append(good)
        booked.totals.append(total)
        booked.times.append(ts)
        booked.bands.append(r)
        booked.conc.append(conc)
        booked.buckets.append(buckets)
        booked.counts.append(total)

    def forget(self, models: set[ModelKey]) -> None:
        """Drop the trace times of ``models`` (forgotten by the engine)."""
        for mk in models:
            self.seen.pop(mk, None)
