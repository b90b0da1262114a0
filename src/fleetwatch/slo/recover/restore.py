"""The engine's side of recovery: records applied to the states it makes, and captured.

:class:`Restores` is mixed into :class:`fleetwatch.slo.engine.SLOEngine`: a sidecar that
recovered a state hands it over with :meth:`Restores.restore` before the first update;
from then on every state the engine makes is started from its record (else from its
fleet capacity: :func:`~.records.apply`), and :meth:`Restores.snapshot` captures the
records of every state for the next restart (:func:`~.records.capture`).
"""

from __future__ import annotations

from fleetwatch.slo.account.ledger import Ledger
from fleetwatch.slo.capacity.evidence import BandLatencyStore
from fleetwatch.slo.recover import records as _records
from fleetwatch.slo.state import ModelKey, SLOModelState


class Restores:
    """Recovery for the engine, from the attributes declared here (set by the engine)."""

    states: dict[tuple[str, ModelKey], SLOModelState]
    ledger: Ledger
    band_latency: BandLatencyStore
    last_update: float | None
    #: what the sidecar recovered (None: nothing; states start cold)
    _recovered: _records.Recovered | None = None

    def restore(self, recovered: _records.Recovered) -> None:
        """Start each state the engine makes from now on from its record in
        ``recovered``, else from its fleet capacity (:mod:`fleetwatch.slo.recover`; call
        before the first update)."""
        self._recovered = recovered

    def snapshot(self) -> _records.Recovered:
        """The records of every state as of the last update (:mod:`fleetwatch.slo.recover`;
        call from the thread that updates the engine)."""
        return _records.capture(self.states, self.ledger, self.band_latency,
                                self.last_update or 0.0)

    def _restored(self, st: SLOModelState, ts: float) -> None:
        """Apply ``st``'s record, if one was recovered, to the state just made at ``ts``."""
        if self._recovered is not None:
            _records.apply(self._recovered, st, ts, self._new_row, self.ledger,
                           self.band_latency)

    def _new_row(self, st: SLOModelState, band: str, ts: float) -> int:
        """The window-store row of a band booked for the first time (the engine's)."""
        raise NotImplementedError
