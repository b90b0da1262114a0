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
from fleetwatch.slo.account.limits import Held, ModelCap
from fleetwatch.slo.account.tracked import TrackedStates
from fleetwatch.slo.account.windows import RollingWindows
from fleetwatch.slo.arrays import FloatArray
from fleetwatch.slo.decode.decoder import Decoder
from fleetwatch.slo.judge import states as _judge
from fleetwatch.slo.judge.freshness import Freshness
from fleetwatch.slo.outputs import autoscaling as _autoscaling
from fleetwatch.slo.outputs import status as _status
from fleetwatch.slo.outputs.autoscaling import ModelSignal, SignalHold
from fleetwatch.slo.outputs.status import Sample, SLOStatus
from fleetwatch.slo.spec import SLOFile
from fleetwatch.slo.state import ModelKey, SLOModelState


class EngineReadout:
    """The engine's outputs, from the attributes declared here (set by the engine).

    The attributes read by callers: ``states`` ((SLO name, model) → :class:`SLOModelState`),
    ``concurrency``/``queue_wait``/``kv_usage`` (model → requests / seconds / ratio),
    ``gpu_memory_ratio``, ``last_update`` (Unix seconds of the last accounted snapshot),
    ``update_seconds`` (how long it took), ``windows``, ``window_lengths`` (seconds),
    ``band_latency`` (every band's latency evidence:
    :class:`~fleetwatch.slo.capacity.evidence.BandLatencyStore`, a row per band's window
    row), ``models_refused`` (SLO name → models refused by its limit), ``cold_starts``
    (model name → its last measured cold start, seconds; set by the sidecar).
    """

    spec: SLOFile
    ledger: Ledger
    states: dict[tuple[str, ModelKey], SLOModelState]
    gauges: ModelGauges
    cold_starts: dict[str, float]
    freshness: Freshness
    signal_holds: dict[ModelKey, SignalHold]
    in_system: dict[ModelKey, float]
    last_update: float | None
    _cap: ModelCap
    _decoder: Decoder
    _tracked: TrackedStates

    @property
    def window_lengths(self) -> list[float]:
        """Every window length of the SLO file (its window catalog and capacity window)
        and every SLO's period, ascending (seconds; the ledger's)."""
        return self.ledger.window_lengths

    @property
    def windows(self) -> RollingWindows:
        """The sliding windows of every row (the ledger's)."""
        return self.ledger.windows

    @property
    def models_refused(self) -> Counter[str]:
        """SLO name → models refused by ``limits.max_models_per_slo``."""
        return self._tracked.limit.refused

    @property
    def concurrency(self) -> dict[ModelKey, float]:
        """Model → requests in the system per replica at its last measured interval."""
        return self.gauges.concurrency

    @property
    def queue_wait(self) -> dict[ModelKey, float]:
        """Model → mean queue wait of its last interval that had one (seconds)."""
        return self.gauges.queue_wait

    @property
    def kv_usage(self) -> dict[ModelKey, float]:
        """Model → KV cache usage at its last snapshot that had it (ratio 0–1)."""
        return self.gauges.kv_usage

    @property
    def gpu_memory_ratio(self) -> float | None:
        """The fleet's GPU memory used ÷ total at the last snapshot (0–1; None without
        GPU series)."""
        return self.gauges.gpu_memory_ratio

    def held(self) -> Held:
        """What the engine holds per model and per series (the bounds of
        :mod:`fleetwatch.slo.account.limits` and of
        :class:`~fleetwatch.slo.decode.decoder.Decoder`)."""
        return Held(len(self._tracked.seen), len(self.states), self._decoder.carried)

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
        KEDA metrics-api shape): held at its peak for one cold start; held, then
        saturated, when the model's data is missing or frozen (``freshness``)."""
        return self._signals(self.freshness)

    def _signals(self, freshness: Freshness | None) -> list[ModelSignal]:
        """:meth:`autoscaling` with ``freshness`` (None: every model read as fresh, the
        measured signals that a stale model's hold keeps)."""
        return _autoscaling.signals(self.spec.autoscaling, self.states, self.gauges,
                                    self.cold_starts, freshness=freshness,
                                    holds=self.signal_holds, now=self.last_update,
                                    in_system=self.in_system)

    def status(self) -> list[SLOStatus]:
        """Per SLO and model its status (:class:`~fleetwatch.slo.outputs.status.SLOStatus`,
        JSON-ready)."""
        return _status.status(self.ledger, self.states, self.gauges)

    def explain(self, st: SLOModelState) -> str:
        """A sentence saying why the state is what it is."""
        return _judge.explain(st)

    def iter_metrics(self) -> Iterator[Sample]:
        """``(family, labels, value)`` for every exported series
        (:mod:`fleetwatch.slo.outputs.export`), ``fleetwatch_slo_models_refused_total`` per
        SLO, the models and carried series evicted past their caps, and
        ``fleetwatch_slo_intervals_refused_total`` per normalized metric (the decoder's
        refused values: :mod:`fleetwatch.slo.decode.decoder`)."""
        yield from _status.iter_metrics(self.ledger, self.states, self.autoscaling())
        for slo in self.spec.slos:
            yield ("fleetwatch_slo_models_refused_total", {"slo": slo.name},
                   float(self.models_refused[slo.name]))
        yield ("fleetwatch_slo_models_evicted_total", {}, float(self._cap.evicted))
        yield ("fleetwatch_slo_carried_series_evicted_total", {},
               float(self._decoder.evicted))
        for metric, n in sorted(self._decoder.refused.items()):
            yield ("fleetwatch_slo_intervals_refused_total", {"metric": metric}, float(n))
