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
   the capacity model (:mod:`.band_latency`: per-band latency quantile at the
   objective; :mod:`.latency`: monotone / queueing fit) predicts where the quantile
   reaches the threshold and capacity becomes that prediction clamped to ``[g, x]`` —
   between the good band and the burning band's observed concurrency (``model``). The
   model never acts without a burning band, so it can only lower capacity from the
   envelope or place it between good and burning load.
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

from fleetwatch.slo.band_latency import BandLatencyStore
from fleetwatch.slo.judge import LEARNS_CAPACITY
from fleetwatch.slo.latency import predict_rows, round_capacity
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


# the evidence strings, read once (an Enum member's .value is a descriptor call)
_KEPT, _BANDS, _MODEL, _REGRESSION = (Evidence.KEPT.value, Evidence.BANDS.value,
                                      Evidence.MODEL.value, Evidence.REGRESSION.value)


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
        self.objective: npt.NDArray[np.float64] = np.zeros(0)  # per state (ratio)
        self.threshold: npt.NDArray[np.float64] = np.zeros(0)  # latency SLI's (s), NaN
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
        self.objective = np.asarray([st.slo.objective for st in self.states], dtype=float)
        self.threshold = np.asarray(
            [st.slo.sli.latency.threshold_seconds if st.slo.sli.latency else math.nan
             for st in self.states], dtype=float)


def update_capacities(index: BandRows, cfg: CapacitySettings,
                      window_totals: npt.NDArray[np.float64],
                      window_burn: npt.NDArray[np.float64],
                      latency: BandLatencyStore,
                      batch_limits: dict[tuple[str, str, str], float]) -> None:
    """One update of ``capacity``/``capacity_evidence``/``capacity_predicted`` (and the
    hysteresis) of every state of ``index`` that learns capacity
    (:data:`~.judge.LEARNS_CAPACITY`; see the module doc), for all states at once:
    which bands are trusted and burn, the highest observed concurrency of a good band,
    and the capacity model's fit (:func:`~.latency.predict_rows`) are computed
    vectorized, then a loop applies the rules and hysteresis per state.

    ``window_totals``/``window_burn``: per window-store row over the capacity window;
    ``latency``: per row the band's evidence (mean concurrency, latency quantiles);
    ``batch_limits``: model → its observed concurrent-slot limit (requests)."""
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
    any_burning = burning.any(axis=1)
    lowest_burns = burning[:, 0]  # the lowest band (lower edge 0) burns
    obs = np.append(latency.concurrency(n), math.nan)[at]  # NaN: unknown
    upper = index.upper
    x = np.where(np.isnan(obs), upper, np.minimum(obs, upper))  # observed, ≤ the bound
    good = np.where(trusted & np.isfinite(upper), x, -math.inf).max(axis=1, initial=0.0)
    goods = good.tolist()
    # the lowest burning band's lower edge, and the highest good observed concurrency
    # below it
    first = burning.argmax(axis=1)
    edge = np.take_along_axis(index.lower, first[:, None], axis=1)[:, 0]
    below = trusted & ~burning & (upper <= edge[:, None])
    g_below = np.where(below, x, -math.inf).max(axis=1, initial=0.0).tolist()
    edges = edge.tolist()
    model_based = index.model_based
    # the capacity model: states whose latency SLI has a trusted burning band above the
    # lowest one
    fit = (any_burning & ~lowest_burns & np.asarray(model_based, dtype=bool)).nonzero()[0]
    predicted: list[float] = []
    observed_burning: list[float] = []
    g_fit: list[float] = []
    at_fit: dict[int, int] = {}
    if len(fit):
        sel = at[fit]
        ys = np.full(sel.shape, np.nan)
        objective = index.objective[fit]
        use = trusted[fit]  # the quantiles the fit reads
        for q in set(objective.tolist()):
            mine = (objective == q)[:, None] & use
            ys[mine] = latency.quantiles(q, sel[mine])
        states = index.states
        limit = np.asarray([batch_limits.get(states[i].model, math.nan) for i in fit.tolist()])
        predicted = predict_rows(obs[fit], ys, trusted[fit], index.threshold[fit],
                                 limit).tolist()
        observed_burning = obs[fit, first[fit]].tolist()
        # as g_below, but 0 only without such a band
        g_fit = np.where(below[fit].any(axis=1),
                         np.where(below[fit], x[fit], -math.inf).max(axis=1), 0.0).tolist()
        at_fit = {i: k for k, i in enumerate(fit.tolist())}
    any_burning_list = any_burning.tolist()
    lowest_list = lowest_burns.tolist()
    for i, st in enumerate(index.states):
        if st.state not in LEARNS_CAPACITY:
            continue
        if not any_trusted[i]:  # unchanged; adopt: nothing pending
            st.pending_capacity, st.pending_count = None, 0
            continue
        if any_burning_list[i]:
            if lowest_list[i]:  # a regression: unchanged; adopt: nothing pending
                st.pending_capacity, st.pending_count = None, 0
                st.capacity_evidence = _REGRESSION
                continue
            k = at_fit.get(i)
            evidence = _BANDS
            if k is None:  # no capacity model: the bands rule
                st.capacity_predicted = None
                value = min(max(st.capacity, g_below[i]), edges[i])
            else:
                pred, g, seen = predicted[k], g_fit[k], observed_burning[k]
                st.capacity_predicted = None if pred != pred else round_capacity(pred)
                if st.capacity_predicted is not None and seen == seen:
                    hi = max(seen, g)
                    value = round_capacity(min(max(st.capacity_predicted, g), hi))
                    evidence = _MODEL
                else:
                    value = min(max(st.capacity, g), edges[i])
            if adopt(st, value, cfg):
                st.capacity_evidence = evidence
            continue
        st.capacity_predicted = None
        g = goods[i]
        if g >= st.capacity:
            value, evidence = round_capacity(g), _BANDS
        else:
            value, evidence = st.capacity, _KEPT
        if adopt(st, value, cfg):
            st.capacity_evidence = evidence
