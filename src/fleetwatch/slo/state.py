"""What the SLO engine keeps per SLO and model, and the names every stage shares.

Plain data (no numpy): :class:`SLOModelState` is filled by accounting
(:mod:`fleetwatch.slo.account.ledger`), judged (:mod:`fleetwatch.slo.judge.states`), given a
capacity (:mod:`fleetwatch.slo.capacity.rules`) and read back by
:mod:`fleetwatch.slo.outputs.status` and :mod:`fleetwatch.slo.outputs.autoscaling`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from fleetwatch.slo.bands import band_label
from fleetwatch.slo.spec import SLOSpec

if TYPE_CHECKING:
    from fleetwatch.slo.capacity.evidence import BandLatency



class ModelKey(NamedTuple):
    """The identity of a served model: its ``model``, ``model_version`` and ``backend``
    labels in the normalized schema (``model_version`` is "" when the server reports
    none). Equal to, and hashed as, the plain tuple of the three."""

    model: str
    model_version: str
    backend: str


class TraceEvent(NamedTuple):
    """One finished request's event for a traces SLO: ``slo`` (its name), ``model``,
    ``time`` (Unix seconds of the sidecar's clock when the request was judged — never a
    span's time), ``concurrency`` (requests in the system
    over its lifetime), ``good`` and ``total`` (events: the SLO's sampling weight, good 0
    when the request missed an objective). Made by :func:`fleetwatch.traces.judge.judge`,
    booked by :meth:`fleetwatch.slo.engine.SLOEngine.add_events`."""

    slo: str
    model: ModelKey
    time: float
    concurrency: float
    good: float
    total: float


#: Every value of the ``state`` label, in exposition order.
STATES = ("ok", "regression", "interference", "gpu_degraded", "overload", "no_data",
          "misconfigured")
#: The ``band`` label of the overall (all bands) counts.
ALL = "all"


class _ByRow(Protocol):
    def __getitem__(self, row: int, /) -> Any: ...


class CumulativeCounts(Protocol):
    """Where an engine keeps the cumulative counts of every window-store row
    (:class:`~fleetwatch.slo.account.ledger.Ledger`): ``good``/``total`` events since start,
    indexed by row."""

    @property
    def cum_good(self) -> _ByRow: ...

    @property
    def cum_total(self) -> _ByRow: ...


class RowCounts(Mapping[str, float]):
    """A state's cumulative events per band label (or :data:`ALL`), read from the
    engine's per-row counts (``source``'s ``cum_good`` or ``cum_total``, by ``kind``) for
    the bands in ``rows`` (the state's rows: a band has a row once it has been booked).
    A band never booked reads 0.0 and is not a key."""

    __slots__ = ("_kind", "_rows", "_source")

    def __init__(self, rows: dict[str, int], source: CumulativeCounts, kind: str) -> None:
        self._rows, self._source, self._kind = rows, source, kind

    def __getitem__(self, band: str) -> float:
        r = self._rows.get(band)
        return 0.0 if r is None else float(getattr(self._source, self._kind)[r])

    def __contains__(self, band: object) -> bool:
        return band in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass
class Neighbour:
    """Evidence that a co-located model interferes (:mod:`fleetwatch.slo.judge.interference`): its
    mean concurrency ``before`` the burn began and ``during`` it (requests, summed over its
    versions), and the Pearson correlation of this model's per-interval bad-event ratio
    (bands inside the envelope) with the neighbour's concurrency (None: too few intervals,
    or one of them constant)."""

    model: str
    before: float
    during: float
    correlation: float | None


@dataclass
class Attribution:
    """Why a burn inside the envelope is not the model's fault: ``kind`` is
    ``interference`` (``neighbours``, largest rise first) or ``gpu_degraded`` (``gpus``:
    GPU UUID → conditions, e.g. ``hw_thermal_slowdown``, ``xid``); ``since`` the Unix time
    the burn was first seen, ``long``/``short`` the window pair judged (seconds),
    ``burn`` band → window seconds → burn rate of the bands inside the envelope;
    ``devices`` the placement's device ids (``gpu_uuid``) the model shares with the blamed
    neighbours, sorted (an ``interference`` explanation names them)."""

    kind: str
    since: float
    long: float
    short: float
    burn: dict[str, dict[float, float]]
    neighbours: list[Neighbour] = field(default_factory=list)
    gpus: dict[str, list[str]] = field(default_factory=dict)
    devices: tuple[str, ...] = ()


@dataclass
class SLOModelState:
    """Everything the engine knows about one SLO on one model.

    ``state`` is one of :data:`STATES`; ``error`` says why it is ``misconfigured``;
    ``capacity`` is the adopted capacity at SLO (concurrent requests per replica, a
    continuous number) and ``capacity_evidence`` where it came from (see
    :class:`~fleetwatch.slo.capacity.rules.Evidence`), ``capacity_predicted`` the capacity
    model's last prediction (requests; None without one), ``pending_capacity`` and
    ``pending_count`` the estimate waiting out hysteresis; ``latency`` the per-band
    evidence (band label → :class:`~fleetwatch.slo.capacity.evidence.BandLatency`, a row of
    the engine's store: mean concurrency, and the latency distribution of a latency SLI);
    ``burning_bands`` the band labels burning on a window pair at the last update;
    ``rows`` maps a band label (or :data:`ALL`) to its row in the window store;
    ``events``/``good`` are the cumulative event counts per band label since start (an
    engine's state: a :class:`RowCounts` view of its ledger; a state made alone: dicts);
    ``attribution`` says whom an ``interference`` or ``gpu_degraded`` state blames;
    ``recovered_from`` where the state started from at a restart (``snapshot``,
    ``prometheus``, ``fleet``: :mod:`fleetwatch.slo.recover`; None: from nothing).
    """

    slo: SLOSpec
    model: ModelKey
    state: str = "no_data"
    error: str | None = None
    capacity: float = 0.0
    capacity_evidence: str = "envelope"
    capacity_predicted: float | None = None
    pending_capacity: float | None = None
    pending_count: int = 0
    burning_bands: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    bands: list[tuple[float, str]] = field(default_factory=list)
    events: Mapping[str, float] | MutableMapping[str, float] = field(
        default_factory=lambda: defaultdict(float))
    good: Mapping[str, float] | MutableMapping[str, float] = field(
        default_factory=lambda: defaultdict(float))
    latency: dict[str, BandLatency] = field(default_factory=dict)
    attribution: Attribution | None = None
    edges: list[tuple[float, float, str]] = field(default_factory=list)
    recovered_from: str | None = None

    def band_edges(self) -> list[tuple[float, float, str]]:
        """``(lower, upper, label)`` of every band (lower edge of the first: 0; computed
        once)."""
        if not self.edges:
            bounds = self.band_bounds()
            self.edges = [(bounds[i - 1][0] if i else 0.0, b, label)
                          for i, (b, label) in enumerate(bounds)]
        return self.edges

    def band_bounds(self) -> list[tuple[float, str]]:
        """``(bound, label)`` of every band of the SLO, ascending, ending with
        ``(inf, "+Inf")`` (computed once)."""
        if not self.bands:
            self.bands = [(b, band_label(b))
                          for b in [*self.slo.concurrency.bands, math.inf]]
        return self.bands


def band_sort(label: str) -> tuple[int, float]:
    """Sort key of band labels: finite bounds ascending, then ``+Inf``, then ``all``."""
    if label == ALL:
        return (2, 0.0)
    return (0 if label != "+Inf" else 1, float(label) if label != "+Inf" else 0.0)
