"""The SLO engine's outputs, read from what its stages keep.

:class:`EngineReadout` is the read side of :class:`fleetwatch.slo.engine.SLOEngine`
(mixed into it): burn rates and window sums from the ledger, the ``/slo`` status
(:mod:`.status`), the ``/autoscaling`` signals (:mod:`.autoscaling`) and the exported
``fleetwatch_slo_*`` samples (:mod:`.export` serves them). It computes nothing itself.

Units: windows in seconds, capacity and concurrency in requests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from fleetwatch.slo.account.gauges import ModelGauges
from fleetwatch.slo.account.ledger import Ledger
from fleetwatch.slo.arrays import FloatArray
from fleetwatch.slo.judge import states as _judge
from fleetwatch.slo.outputs import autoscaling as _autoscaling
from fleetwatch.slo.outputs import status as _status
from fleetwatch.slo.outputs.autoscaling import ModelSignal
from fleetwatch.slo.outputs.status import Sample, SLOStatus
from fleetwatch.slo.spec import SLOFile
from fleetwatch.slo.state import ModelKey, SLOModelState


class EngineReadout:
    """The engine's outputs, from the attributes declared here (set by the engine)."""

    spec: SLOFile
    ledger: Ledger
    states: dict[tuple[str, ModelKey], SLOModelState]
    gauges: ModelGauges
    cold_starts: dict[str, float]
    models_refused: Counter[str]

    def window_sums(self, st: SLOModelState, band: str, window: float,
                    sums: FloatArray | None = None) -> tuple[float, float]:
        """``(good, total)`` of a band (or ``"all"``) over a window length (seconds)
        (:meth:`~fleetwatch.slo.account.ledger.Ledger.window_sums`)."""
        return self.ledger.window_sums(st, band, window, sums)

    def burn(self, st: SLOModelState, band: str, window: float) -> float:
        """Burn rate of a band (or ``"all"``) over a window length (seconds), as of the
        last update; NaN without events."""
        return self.ledger.burn_rate(st, band, window)

    def model_capacity(self, mk: ModelKey) -> float | None:
        """Capacity at SLO of a model: the smallest over its SLOs (None without SLOs)."""
        return _autoscaling.model_capacity(self.states, mk)

    def model_state(self, mk: ModelKey) -> str:
        """Worst state over the model's SLOs (regression > overload > misconfigured > …)."""
        return _autoscaling.model_state(self.states, mk)

    def autoscaling(self) -> list[ModelSignal]:
        """One signal per model (:class:`~fleetwatch.slo.outputs.autoscaling.ModelSignal`,
        KEDA metrics-api shape)."""
        return _autoscaling.signals(self.spec.autoscaling, self.states, self.gauges,
                                    self.cold_starts)

    def status(self) -> list[SLOStatus]:
        """Per SLO and model its status (:class:`~fleetwatch.slo.outputs.status.SLOStatus`,
        JSON-ready)."""
        return _status.status(self.ledger, self.states, self.gauges)

    def explain(self, st: SLOModelState) -> str:
        """A sentence saying why the state is what it is."""
        return _judge.explain(st)

    def iter_metrics(self) -> Iterator[Sample]:
        """``(family, labels, value)`` for every exported series
        (:mod:`fleetwatch.slo.outputs.export`), and
        ``fleetwatch_slo_models_refused_total`` per SLO."""
        yield from _status.iter_metrics(self.ledger, self.states, self.autoscaling())
        for slo in self.spec.slos:
            yield ("fleetwatch_slo_models_refused_total", {"slo": slo.name},
                   float(self.models_refused[slo.name]))
