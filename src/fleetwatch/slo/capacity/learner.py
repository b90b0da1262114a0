"""Learning capacity at SLO for every state of the engine at once.

:class:`CapacityLearner` keeps what the capacity rules read between updates: per
window-store row of a band its latency evidence (:class:`~.evidence.BandLatencyStore`),
and the band rows of every state as one matrix (:class:`~.rules.BandRows`, rebuilt only
when a state or a band row is made or forgotten). After each update's bookings are in
the ledger, :meth:`CapacityLearner.update` runs the rules (:func:`~.rules.
update_capacities`) over the capacity window (``capacity.window`` of the SLO file).

Units: times in Unix seconds, concurrency in requests.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleetwatch.slo.account.bookings import Bookings
from fleetwatch.slo.account.ledger import Ledger
from fleetwatch.slo.capacity.evidence import BandLatency, BandLatencyStore
from fleetwatch.slo.capacity.rules import BandRows, update_capacities
from fleetwatch.slo.spec import CapacitySettings
from fleetwatch.slo.state import ALL, ModelKey, SLOModelState


class CapacityLearner:
    """The capacity stage's state across updates: ``store`` (every band row's latency
    evidence), the states' band rows, and whether they must be rebuilt."""

    __slots__ = ("_band_rows", "_stale", "cfg", "store")

    def __init__(self, cfg: CapacitySettings) -> None:
        self.cfg = cfg
        self.store = BandLatencyStore()
        self._band_rows = BandRows()
        self._stale = True

    def changed(self) -> None:
        """A state was made: rebuild the band rows before the next update."""
        self._stale = True

    def new_row(self, st: SLOModelState, band: str, row: int, ts: float) -> None:
        """``row`` is the new window-store row of ``st``'s band (or ``all``): its latency
        evidence starts empty at ``ts``, and a band's becomes ``st.latency[band]``."""
        self.store.reset(row, ts)
        if band != ALL:
            st.latency[band] = BandLatency(self.store, row)
            if not self._band_rows.set(st, band, row):
                self._stale = True

    def forget(self, st: SLOModelState) -> None:
        """``st`` is forgotten: its rows' evidence is emptied (the rows are reused)."""
        for row in st.rows.values():
            self.store.reset(row, 0.0)
        self._stale = True

    def add(self, booked: Bookings) -> None:
        """Add an update's bookings to their rows' evidence."""
        self.store.add_bookings(booked, self.cfg.window)

    def update(self, states: Iterable[SLOModelState], ledger: Ledger,
               batch_limits: dict[ModelKey, float]) -> None:
        """One update of every state's capacity from the ledger's events and burn rates
        over the capacity window (``batch_limits``: model → its concurrent-slot limit,
        requests)."""
        if self._stale:
            self._band_rows.build(list(states))
            self._stale = False
        index = ledger.windows.index[float(self.cfg.window)]
        update_capacities(self._band_rows, self.cfg, ledger.windows.sums()[:, index, 1],
                          ledger.burn[:, index], self.store, batch_limits)
