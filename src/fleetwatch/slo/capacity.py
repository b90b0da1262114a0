"""Capacity at SLO: the per-replica concurrency a model keeps its SLO up to.

The declared envelope is the operator's prior; evidence of *burn* lowers it, evidence of
*good* load above it raises it, no evidence leaves it where it is. Per update, over the
capacity window (``capacity.window``), a band is *trusted* once it has at least
``capacity.min_events`` events; a trusted band *burns* when its burn rate is ≥ 1 and is
*good* below 1. Then:

1. **no trusted band**: capacity stays where it is (the envelope at start);
2. **no trusted band burns**: the highest concurrency a good band was *observed* at (its
   observation-weighted mean concurrency, not its upper bound: the knee may lie inside
   the band) raises capacity when it is at or above it (``bands``); otherwise it stays
   (``kept``);
3. **the lowest burning band** (lower edge ``e``, observed mean concurrency ``x``) bounds
   it: without a model prediction capacity becomes ``min(max(capacity, g), e)`` where
   ``g`` is the highest observed concurrency of a good band below ``e`` (``bands``: burn
   lowers it below the band, good load below raises it up to there); for a latency SLI
   the capacity model
   (:mod:`.latency`: per-band latency quantile at the objective, monotone / queueing fit)
   predicts where the quantile reaches the threshold and capacity becomes that
   prediction clamped to ``[g, x]`` — between the good band and the burning band's
   observed concurrency (``model``). The model never acts without a burning band, so it
   can only lower capacity from the envelope or place it between good and burning load.
4. **the lowest band itself burns** (lower edge 0): that is a regression, not a capacity
   (the model is slow even when alone); capacity stays where it is (``regression``) and
   the judge says ``regression``.

A new estimate is adopted only after it held (within :data:`SAME` relative) for
``capacity.hysteresis_updates`` consecutive updates. Capacity is a continuous number of
concurrent requests per replica, rounded to 3 significant digits
(:func:`~fleetwatch.slo.latency.round_capacity`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum

import numpy as np
import numpy.typing as npt

from fleetwatch.slo.judge import LEARNS_CAPACITY
from fleetwatch.slo.latency import predict, round_capacity
from fleetwatch.slo.spec import CapacitySettings
from fleetwatch.slo.state import SLOModelState

#: Two estimates within this relative difference are the same estimate (hysteresis).
SAME = 0.05


class Evidence(Enum):
    """Where the capacity came from (``capacity_evidence`` in ``/slo``)."""

    ENVELOPE = "envelope"  # no trusted band yet: the declared envelope
    KEPT = "kept"  # trusted bands, none moving it: the last capacity
    BANDS = "bands"  # a good band raised it, or a burning band lowered it to its edge
    MODEL = "model"  # the capacity model placed it between good and burning load
    REGRESSION = "regression"  # the lowest band burns: kept (not a capacity)


def _observed(st: SLOModelState, label: str, upper: float) -> float:
    """The concurrency a band's good evidence was seen at: its observation-weighted mean
    concurrency (requests), at most its upper bound (the bound when unknown)."""
    bl = st.latency.get(label)
    x = bl.concurrency() if bl is not None else None
    return upper if x is None else min(x, upper)


def _points(st: SLOModelState, trusted: list[str]) -> list[tuple[float, float]]:
    """``(mean concurrency, latency quantile)`` of the trusted bands (latency SLIs)."""
    out: list[tuple[float, float]] = []
    q = st.slo.objective
    for label in trusted:
        bl = st.latency.get(label)
        if bl is None:
            continue
        x, y = bl.concurrency(), bl.quantile(q)
        if x is not None and y is not None:
            out.append((x, y))
    return out


def estimate(st: SLOModelState, cfg: CapacitySettings, window_totals: list[float],
             window_burn: list[float],
             batch_limit: float | None = None) -> tuple[float, Evidence]:
    """This update's capacity estimate of one SLO and model and its evidence (see the
    module doc), from every window-store row's events and burn rate over the capacity
    window; ``batch_limit``: the model's observed concurrent-slot limit (requests)."""
    current = st.capacity
    trusted: list[tuple[float, float, str, bool]] = []  # lower, upper, label, burning
    for lower, upper, label in st.band_edges():
        row = st.rows.get(label)
        if row is None or window_totals[row] < cfg.min_events:
            continue
        trusted.append((lower, upper, label, window_burn[row] >= 1.0))
    if not trusted:
        return current, Evidence(st.capacity_evidence)
    burning = [t for t in trusted if t[3]]
    if not burning:
        st.capacity_predicted = None
        good = max((_observed(st, label, u) for _, u, label, _ in trusted
                    if math.isfinite(u)), default=0.0)
        if good >= current:
            return round_capacity(good), Evidence.BANDS
        return current, Evidence.KEPT
    edge, _, burn_label, _ = burning[0]
    if edge <= 0:
        return current, Evidence.REGRESSION
    g = max((_observed(st, label, u) for _, u, label, b in trusted if not b and u <= edge),
            default=0.0)
    pred = None
    if st.slo.sli.latency is not None:
        pred = predict(_points(st, [t[2] for t in trusted]),
                       st.slo.sli.latency.threshold_seconds, batch_limit)
    st.capacity_predicted = None if pred is None else round_capacity(pred)
    observed = st.latency[burn_label].concurrency() if burn_label in st.latency else None
    if st.capacity_predicted is not None and observed is not None:
        hi = max(observed, g)
        return round_capacity(min(max(st.capacity_predicted, g), hi)), Evidence.MODEL
    return min(max(current, g), edge), Evidence.BANDS


def _same(a: float | None, b: float) -> bool:
    return a is not None and abs(a - b) <= SAME * max(abs(a), abs(b))


def adopt(st: SLOModelState, value: float, cfg: CapacitySettings) -> bool:
    """Apply hysteresis: ``st.capacity`` becomes ``value`` once an estimate within
    :data:`SAME` of it held for ``cfg.hysteresis_updates`` consecutive updates (at once
    when that is 1). Returns whether ``value`` is (now) the capacity, within :data:`SAME`."""
    if _same(st.capacity, value):
        st.pending_capacity, st.pending_count = None, 0
        return True
    if _same(st.pending_capacity, value):
        st.pending_count += 1
        st.pending_capacity = value
    else:
        st.pending_capacity, st.pending_count = value, 1
    if st.pending_count >= cfg.hysteresis_updates:
        st.capacity, st.pending_capacity, st.pending_count = value, None, 0
        return True
    return False


def update_capacity(st: SLOModelState, cfg: CapacitySettings, window_totals: list[float],
                    window_burn: list[float], batch_limit: float | None = None) -> None:
    """One update of ``st.capacity``/``st.capacity_evidence`` (see the module doc)."""
    value, evidence = estimate(st, cfg, window_totals, window_burn, batch_limit)
    if adopt(st, value, cfg) or evidence is Evidence.REGRESSION:
        st.capacity_evidence = evidence.value


class BandRows:
    """The window-store rows of every state's bands as one padded matrix, for
    :func:`update_capacities` (rebuild with :meth:`build` when states or their rows
    change): ``rows[i, k]`` is the row of band ``k`` of ``states[i]`` (−1: none yet),
    ``upper[i, k]`` its upper bound (requests; ``inf`` for ``+Inf`` and padding)."""

    def __init__(self) -> None:
        self.states: list[SLOModelState] = []
        self.rows: npt.NDArray[np.int64] = np.zeros((0, 0), dtype=np.int64)
        self.upper: npt.NDArray[np.float64] = np.zeros((0, 0))
        self.lower: npt.NDArray[np.float64] = np.zeros((0, 0))
        self.model_based: list[bool] = []  # latency SLIs: the capacity model may act
        self._at: dict[int, int] = {}  # id(state) → its index

    def set(self, st: SLOModelState, label: str, row: int) -> bool:
        """Record a new row of a band of an indexed state; False when ``st`` is not
        indexed (then :meth:`build` again)."""
        i = self._at.get(id(st))
        if i is None or self.states[i] is not st:
            return False
        for k, (_lower, _upper, lab) in enumerate(st.band_edges()):
            if lab == label:
                self.rows[i, k] = row
        return True

    def build(self, states: Sequence[SLOModelState]) -> None:
        self.states = list(states)
        self._at = {id(st): i for i, st in enumerate(self.states)}
        width = max((len(st.band_edges()) for st in self.states), default=0)
        rows = np.full((len(self.states), width), -1, dtype=np.int64)
        upper = np.full((len(self.states), width), math.inf)
        lower = np.full((len(self.states), width), math.inf)
        for i, st in enumerate(self.states):
            for k, (low, u, label) in enumerate(st.band_edges()):
                rows[i, k] = st.rows.get(label, -1)
                upper[i, k] = u
                lower[i, k] = low
        self.rows, self.upper, self.lower = rows, upper, lower
        self.model_based = [st.slo.sli.latency is not None for st in self.states]


def update_capacities(index: BandRows, cfg: CapacitySettings,
                      window_totals: npt.NDArray[np.float64],
                      window_burn: npt.NDArray[np.float64],
                      observed: npt.NDArray[np.float64],
                      batch_limits: dict[tuple[str, str, str], float]) -> None:
    """:func:`update_capacity` for every state of ``index`` whose state learns capacity
    (:data:`~.judge.LEARNS_CAPACITY`), with the same result: which bands are trusted
    and burn, and the highest observed concurrency of a good band, are computed for all
    states at once
    (``window_totals``/``window_burn``: per window-store row over the capacity window;
    ``observed``: per row the band's observed concurrency, requests, NaN unknown); a
    state with a burning band goes through :func:`estimate`."""
    rows = index.rows
    if rows.size == 0:
        return
    valid = rows >= 0
    n = len(window_totals)
    at = np.where(valid, rows, n)  # padding reads an appended row of nothing
    totals = np.append(window_totals, 0.0)
    with np.errstate(invalid="ignore"):
        trusted = valid & (totals[at] >= cfg.min_events)
        burning = trusted & (np.append(window_burn, math.nan)[at] >= 1.0)
    any_trusted = trusted.any(axis=1).tolist()
    any_burning = burning.any(axis=1).tolist()
    lowest_burns = burning[:, 0].tolist()  # the lowest band (lower edge 0) burns
    obs = np.append(observed, math.nan)[at]
    upper = index.upper
    x = np.where(np.isnan(obs), upper, np.minimum(obs, upper))  # _observed
    good = np.where(trusted & np.isfinite(upper), x, -math.inf).max(axis=1, initial=0.0)
    goods = good.tolist()
    # the lowest burning band's lower edge, and the highest good observed concurrency
    # below it (the "bands" rule of a burning state without the capacity model)
    first = burning.argmax(axis=1)
    edge = np.take_along_axis(index.lower, first[:, None], axis=1)[:, 0]
    below = trusted & ~burning & (upper <= edge[:, None])
    g_below = np.where(below, x, -math.inf).max(axis=1, initial=0.0).tolist()
    edges = edge.tolist()
    model_based = index.model_based
    totals_list: list[float] | None = None
    burn_list: list[float] = []
    for i, st in enumerate(index.states):
        if st.state not in LEARNS_CAPACITY:
            continue
        if not any_trusted[i]:  # estimate: unchanged; adopt: nothing pending
            st.pending_capacity, st.pending_count = None, 0
            continue
        if any_burning[i]:
            if lowest_burns[i]:  # estimate: a regression, unchanged; adopt: nothing pending
                st.pending_capacity, st.pending_count = None, 0
                st.capacity_evidence = Evidence.REGRESSION.value
                continue
            if not model_based[i]:  # estimate without a prediction: the bands rule
                st.capacity_predicted = None
                value = min(max(st.capacity, g_below[i]), edges[i])
                if adopt(st, value, cfg):
                    st.capacity_evidence = Evidence.BANDS.value
                continue
            if totals_list is None:
                totals_list, burn_list = window_totals.tolist(), window_burn.tolist()
            update_capacity(st, cfg, totals_list, burn_list, batch_limits.get(st.model))
            continue
        st.capacity_predicted = None
        g = goods[i]
        if g >= st.capacity:
            value, evidence = round_capacity(g), Evidence.BANDS
        else:
            value, evidence = st.capacity, Evidence.KEPT
        if adopt(st, value, cfg):
            st.capacity_evidence = evidence.value
