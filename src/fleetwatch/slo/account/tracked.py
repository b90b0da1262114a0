"""The (SLO, model) states the engine tracks, and when each model last had data.

A state is made the first time an SLO that selects a model needs it, unless the SLO
already tracks ``limits.max_models_per_slo`` models (:mod:`.limits`); its cumulative
``events``/``good`` are views of the ledger's per-row counts (:class:`~fleetwatch.slo.
state.RowCounts`). A model without data — metrics or trace events — for
``limits.forget_model_after`` seconds is *gone*, and so are the models seen least
recently past the engine's cap on models with data (label churn: :class:`~.limits.
ModelCap`): :meth:`TrackedStates.drop` removes their states and returns them, so that every
stage forgets what it keeps for them.

Units: times in Unix seconds, requests in the system in requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from fleetwatch.slo.account.columns import PlanColumns
from fleetwatch.slo.account.concurrency import in_system_of
from fleetwatch.slo.account.ledger import Ledger
from fleetwatch.slo.account.limits import ModelCap, ModelLimit
from fleetwatch.slo.arrays import FloatArray
from fleetwatch.slo.decode.plan import ACTIVE_GROUP
from fleetwatch.slo.spec import SLOSpec
from fleetwatch.slo.state import ModelKey, RowCounts, SLOModelState


class TrackedStates:
    """``states`` ((SLO name, model) → :class:`SLOModelState`), made against ``ledger``
    within ``limit`` (:class:`~.limits.ModelLimit`) and ``cap`` (:class:`~.limits.
    ModelCap`); ``seen`` (model → when it last had metrics, Unix seconds) and
    ``in_system`` (model → running + waiting requests at its last snapshot that had those
    gauges)."""

    __slots__ = ("cap", "in_system", "ledger", "limit", "seen", "states")

    def __init__(self, ledger: Ledger, limit: ModelLimit, cap: ModelCap) -> None:
        self.ledger = ledger
        self.limit = limit
        self.cap = cap
        self.states: dict[tuple[str, ModelKey], SLOModelState] = {}
        self.seen: dict[ModelKey, float] = {}
        self.in_system: dict[ModelKey, float] = {}

    def make(self, slo: SLOSpec, mk: ModelKey, ts: float) -> SLOModelState | None:
        """A new state of ``slo`` on ``mk`` (not tracked yet), its capacity the SLO's
        envelope; None when the limit refuses it at ``ts``."""
        if not self.limit.admit(slo.name, mk, ts):
            return None
        st = self.states[(slo.name, mk)] = SLOModelState(slo, mk,
                                                         capacity=slo.concurrency.envelope)
        st.events = RowCounts(st.rows, self.ledger, "cum_total")
        st.good = RowCounts(st.rows, self.ledger, "cum_good")
        return st

    def saw(self, ts: float, view: PlanColumns, res: list[float],
            refused: set[tuple[ModelKey, str]]) -> None:
        """A target's models had metrics at ``ts``: their ``seen`` time, and their
        requests in the system read from the per-slot results ``res`` — unknown for a
        model whose running/waiting gauges the decoder ``refused`` (its next snapshot
        stands for both)."""
        seen, in_system = self.seen, self.in_system
        for mk, r, w in zip(view.models, view.running, view.waiting, strict=True):
            seen[mk] = ts
            if refused and (mk, ACTIVE_GROUP) in refused:
                in_system.pop(mk, None)
                continue
            now = in_system_of(res[r] if r >= 0 else None, res[w] if w >= 0 else None)
            if now is not None:
                in_system[mk] = now

    def since_seen(self, models: Iterable[ModelKey], ts: float, since: float) -> FloatArray:
        """Per model, the seconds from its last metrics (``since`` for a model never seen:
        the previous snapshot's Unix seconds) to ``ts``; a model is live where > 0."""
        seen = self.seen
        return np.asarray([ts - seen.get(mk, since) for mk in models], dtype=float)

    def gone(self, ts: float, horizon: float, traced: Mapping[ModelKey, float]
             ) -> list[ModelKey]:
        """The models whose last metrics and last trace event (``traced``: model → Unix
        seconds) are both older than ``horizon``: metric models first, then trace-only
        ones; then those the cap evicts at ``ts`` (:meth:`~.limits.ModelCap.evict`)."""
        seen = self.seen
        gone = [mk for mk, t in seen.items() if t < horizon and traced.get(mk, t) < horizon]
        if traced:  # trace-only models: the same timer
            gone += [mk for mk, t in traced.items() if t < horizon and mk not in seen]
        return gone + self.cap.evict(seen, set(gone), ts)

    def drop(self, gone: set[ModelKey]) -> list[SLOModelState]:
        """Stop tracking the models ``gone``: their states (removed and returned, in the
        order they were made; the limit released for each), ``seen`` and ``in_system``."""
        dropped = [self.states.pop(key) for key in
                   [(name, mk) for name, mk in self.states if mk in gone]]
        for st in dropped:
            self.limit.release(st.slo.name)
        for mk in gone:
            self.seen.pop(mk, None)
            self.in_system.pop(mk, None)
        self.limit.forget(gone)
        return dropped
