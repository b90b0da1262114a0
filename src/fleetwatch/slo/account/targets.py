"""One decoded snapshot accounted target by target, every model of a target at once.

For each target's decoded columns (:class:`~fleetwatch.slo.decode.decoder.TargetColumns`)
:class:`TargetAccounts` takes its compiled column view from the layout (:mod:`.layout`),
the *live* models (those whose interval since they were last seen is longer than 0),
their gauges (:func:`~.gauges.update_gauges`: concurrency, queue wait, KV cache) and the
bookable (SLO, model) pairs (:meth:`~.book.TargetSLOs.gather`; a model whose concurrency
inputs were refused in the interval books nothing), then the update's
:class:`~.bookings.Bookings` (:func:`~.book.bookings`). After the engine has booked and
judged them, :meth:`TargetAccounts.saw` records when each model was seen and its
requests in the system (:class:`~.tracked.TrackedStates`).

The first snapshot only primes the counters: nothing is booked. States and rows a booking
needs are made through the engine's callbacks (it tells the other stages about them).

Units: times in Unix seconds, concurrency in requests.
"""

from __future__ import annotations

from collections.abc import Callable

from fleetwatch.slo.account.book import Gathered, ModelSLO, bookings
from fleetwatch.slo.account.bookings import Bookings
from fleetwatch.slo.account.columns import PlanColumns
from fleetwatch.slo.account.gauges import ModelGauges, update_gauges
from fleetwatch.slo.account.layout import Layout
from fleetwatch.slo.account.tracked import TrackedStates
from fleetwatch.slo.arrays import FloatArray
from fleetwatch.slo.decode.decoder import Decoded, Decoder, concurrency_refused
from fleetwatch.slo.spec import SLOSpec
from fleetwatch.slo.state import ModelKey, SLOModelState

__all__ = ["TargetAccounts"]

#: The state of a model an SLO selects at a time, made if missing (None: refused; the
#: engine's, which tells the other stages about a state it makes).
StateOf = Callable[[SLOSpec, ModelKey, float], SLOModelState | None]
#: Makes the window-store row of a state's band booked for the first time (the engine's).
NewRow = Callable[[SLOModelState, str, float], int]


class TargetAccounts:
    """Accounts decoded snapshots against ``layout``, ``tracked`` and ``gauges``, marking
    in ``dirty`` the states to judge and making the states the books need with
    ``state_of`` (see the module docstring)."""

    def __init__(self, layout: Layout, tracked: TrackedStates, gauges: ModelGauges,
                 dirty: set[tuple[str, ModelKey]], state_of: StateOf) -> None:
        self._layout = layout
        self._tracked = tracked
        self._gauges = gauges
        self._dirty = dirty
        self._state_of = state_of

    def state(self, entry: ModelSLO, ts: float) -> SLOModelState | None:
        """The state of a model's SLO entry (made by ``state_of`` if missing; None:
        refused), kept on the entry."""
        entry.state = self._state_of(entry.slo, entry.key[1], ts)
        return entry.state

    def book(self, ts: float, prev_ts: float | None, decoded: Decoded, decoder: Decoder,
             new_row: NewRow) -> tuple[dict[int, PlanColumns], Bookings | None]:
        """The column view of each target of ``decoded`` (by id of its plan; the layout
        keeps only these) and the bookings of the interval since ``prev_ts`` (None on the
        first snapshot: nothing to book)."""
        views: dict[int, PlanColumns] = {}
        gathered: list[Gathered] = []
        for plan, out, res in decoded.columns:
            view = views[id(plan)] = self._layout.view(plan, decoder)
            if prev_ts is not None:
                gathered.append(self._gather(ts, prev_ts, view, out, res, decoded.refused))
        self._layout.keep(views)
        if prev_ts is None:
            return views, None
        return views, bookings(ts, gathered, new_row, self._dirty)

    def saw(self, ts: float, views: dict[int, PlanColumns], decoded: Decoded) -> None:
        """Record, per target of ``decoded``, when its models were seen and their
        requests in the system (after booking: the next interval starts here)."""
        for plan, _out, res in decoded.columns:
            self._tracked.saw(ts, views[id(plan)], res, decoded.refused)

    def _gather(self, ts: float, prev_ts: float, view: PlanColumns, out: FloatArray,
                res: list[float], refused: set[tuple[ModelKey, str]]) -> Gathered:
        """One target's live models into their gauges, and its bookable (SLO, model)
        pairs (:meth:`~fleetwatch.slo.account.book.TargetSLOs.gather`); ``refused`` the
        decoder's refused groups (a model whose concurrency inputs are among them books
        nothing)."""
        live_dt = self._tracked.since_seen(view.models, ts, prev_ts)
        live = live_dt > 0
        target = self._layout.target(view, live.tolist(), lambda e: self.state(e, ts))
        no_conc = concurrency_refused(view.models, refused)
        concs = update_gauges(self._gauges, self._tracked.in_system, view.models,
                              target.gauges, out, live_dt, live, no_conc)
        return target.gather(live, concs, view.events(out), res, self._dirty)
