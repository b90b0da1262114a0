"""The SLO file's ``limits.max_models_per_slo``: how many models each SLO tracks.

A model past an SLO's limit gets no state for it: it is counted once in
``fleetwatch_slo_models_refused_total{slo}`` (:attr:`ModelLimit.refused`) and logged, at
most once a minute per SLO (``SLO S tracks N models (limits.max_models_per_slo): not
tracking model M …``); it is tried again at every update, and tracked once a tracked
model is forgotten.

:class:`ModelCap` bounds the models the engine holds at all (with data, tracked by an
SLO or not): past its cap the models seen least recently are forgotten at once, counted
(``fleetwatch_slo_models_evicted_total``) and logged at most once a minute (``SLO engine
holds N models (at most C): forgot K seen least recently, e.g. M …``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import NamedTuple

from fleetwatch.slo.state import ModelKey

log = logging.getLogger("fleetwatch.slo")

#: Seconds between two log lines about models an SLO refuses (the counter counts all).
REFUSED_LOG_SECONDS = 60.0


class ModelLimit:
    """Models tracked per SLO, at most ``limit`` each."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._tracked: Counter[str] = Counter()  # SLO name → models tracked
        #: SLO name → models refused (the exported counter).
        self.refused: Counter[str] = Counter()
        self._counted: set[tuple[str, ModelKey]] = set()  # counted once each (bounded)
        self._logged: dict[str, float] = {}  # SLO name → when last logged

    def admit(self, slo: str, mk: ModelKey, ts: float) -> bool:
        """Whether SLO ``slo`` may track model ``mk`` (then it counts as tracked); a
        refusal at ``ts`` (Unix seconds) is counted and logged as the module doc says."""
        if self._tracked[slo] < self.limit:
            self._tracked[slo] += 1
            return True
        key = (slo, mk)
        if key not in self._counted:
            if len(self._counted) > 10 * self.limit:
                self._counted.clear()  # bounded: a model may be counted again
            self._counted.add(key)
            self.refused[slo] += 1
        last = self._logged.get(slo)
        if last is None or ts - last >= REFUSED_LOG_SECONDS:
            self._logged[slo] = ts
            log.warning("SLO %s tracks %d models (limits.max_models_per_slo): not "
                        "tracking model %s (%d refused so far)", slo, self.limit, mk.model,
                        self.refused[slo])
        return False

    def release(self, slo: str) -> None:
        """One model of SLO ``slo`` is no longer tracked (forgotten)."""
        self._tracked[slo] -= 1

    def forget(self, models: set[ModelKey]) -> None:
        """Forget the refusals of ``models`` (counted again if refused again)."""
        self._counted = {(slo, mk) for slo, mk in self._counted if mk not in models}


class ModelCap:
    """The models the engine holds, at most ``limit`` (never fewer than one snapshot's);
    ``evicted`` counts the models forgotten early (the exported counter)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.evicted = 0
        self._logged: float | None = None

    def evict(self, seen: dict[ModelKey, float], gone: set[ModelKey], ts: float
              ) -> list[ModelKey]:
        """The models to forget beyond the cap: of ``seen`` (model → Unix seconds it last
        had data) less those already ``gone``, the least recently seen, never one seen at
        ``ts`` (the current snapshot); counted and logged as the module doc says."""
        excess = len(seen) - len(gone & seen.keys()) - self.limit
        if excess <= 0:
            return []
        oldest = sorted((t, i, mk) for i, (mk, t) in enumerate(seen.items())
                        if t < ts and mk not in gone)[:excess]
        out = [mk for _t, _i, mk in oldest]
        self.evicted += len(out)
        if out and (self._logged is None or ts - self._logged >= REFUSED_LOG_SECONDS):
            self._logged = ts
            log.warning("SLO engine holds %d models (at most %d): forgot %d seen least "
                        "recently, e.g. %s (%d so far; label churn?)", len(seen), self.limit,
                        len(out), out[0].model, self.evicted)
        return out


class Held(NamedTuple):
    """What an SLO engine holds: ``models`` with data (at most its ``MAX_MODELS`` beyond
    one snapshot's: :class:`ModelCap`), (SLO, model) ``states`` (at most
    ``limits.max_models_per_slo`` per SLO) and ``carried_series`` (absent series whose
    last value is kept: :class:`~fleetwatch.slo.decode.decoder.Decoder`)."""

    models: int
    states: int
    carried_series: int
