"""Capacity at SLO: the per-replica concurrency a model keeps its SLO up to.

The declared envelope is the operator's prior; evidence of *burn* lowers it, evidence of
*good* load above it raises it, no evidence leaves it where it is. Per update, over the
capacity window (``capacity.window``), a band is *trusted* once it has at least
``capacity.min_events`` events; a trusted band *burns* when its burn rate is ≥ 1 and is
*good* below 1. Then:

1. **no trusted band**: capacity stays where it is (the envelope at start, or the fleet's
   learned capacity for a new replica: :mod:`fleetwatch.slo.recover`);
2. **no trusted band burns**: the highest concurrency a good band was *observed* at (its
   observation-weighted mean concurrency, not its upper bound: the knee may lie inside
   the band) raises capacity when it is at or above it (``bands``); otherwise it stays
   (``kept``);
3. **the lowest burning band** (lower edge ``e``, observed mean concurrency ``x``) bounds
   it: without a model prediction capacity becomes ``min(max(capacity, g), e)`` where
   ``g`` is the highest observed concurrency of a good band below ``e`` (``bands``: burn
   lowers it below the band, good load below raises it up to there); for a latency SLI
   the capacity model (:mod:`fleetwatch.slo.capacity.evidence`: per-band latency quantile at the
   objective; :mod:`fleetwatch.slo.capacity.model`: monotone / queueing fit) predicts where the
   quantile reaches the threshold and capacity becomes that prediction clamped to ``[g, x]`` —
   between the good band and the burning band's observed concurrency (``model``). The
   model never acts without a burning band, so it can only lower capacity from the
   envelope or place it between good and burning load.
4. **the lowest band itself burns** (lower edge 0): that is a regression, not a capacity
   (the model is slow even when alone); capacity stays where it is (``regression``) and
   the judge says ``regression``.

A new estimate is adopted only after it held (within :data:`SAME` relative) for
``capacity.hysteresis_updates`` consecutive updates. Capacity is a continuous number of
concurrent requests per replica, rounded to 3 significant digits
(:func:`~fleetwatch.slo.capacity.model.round_capacity`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

from fleetwatch.slo.arrays import BoolArray, FloatArray, IntArray
from fleetwatch.slo.capacity.evidence import BandLatencyStore
from fleetwatch.slo.capacity.model import predict_rows, round_capacity
from fleetwatch.slo.judge.states import LEARNS_CAPACITY
from fleetwatch.slo.spec import CapacitySettings
from fleetwatch.slo.state import ModelKey, SLOModelState

#: Two estimates within this relative difference are the same estimate (hysteresis).
SAME = 0.05


class Evidence(Enum):
    """Where the capacity came from (``capacity_evidence`` in ``/slo``)."""

    ENVELOPE = "envelope"  # no trusted band yet: the declared envelope
    KEPT = "kept"  # trusted bands, none moving it: the last capacity
    BANDS = "bands"  # a good band raised it, or a burning band lowered it to its edge
    MODEL = "model"  # the capacity model placed it between good and burning load
    REGRESSION = "regression"  # the lowest band burns: kept (not a capacity)
    FLEET = "fleet"  # no trusted band yet: the fleet's learned capacity (slo.recover)


#: The evidence strings in a fixed order (the rules' arrays hold their indices).
EVIDENCE = tuple(e.value for e in Evidence)
_KEPT, _BANDS, _MODEL, _REGRESSION = (EVIDENCE.index(e.value) for e in (
    Evidence.KEPT, Evidence.BANDS, Evidence.MODEL, Evidence.REGRESSION))


class BandRows:
    """The window-store rows of every state's bands as one padded matrix, for
    :func:`update_capacities` (rebuild with :meth:`build` when states or their rows
    change): ``rows[i, k]`` is the row of band ``k`` of ``states[i]`` (−1: none yet),
    ``upper[i, k]`` its upper bound (requests; ``inf`` for ``+Inf`` and padding)."""

    def __init__(self) -> None:
        self.states: list[SLOModelState] = []
        self.rows: IntArray = np.zeros((0, 0), dtype=np.int64)
        self.upper: FloatArray = np.zeros((0, 0))
        self.lower: FloatArray = np.zeros((0, 0))
        self.model_based: list[bool] = []  # latency SLIs: the capacity model may act
        self.objective: FloatArray = np.zeros(0)  # per state (ratio)
        self.threshold: FloatArray = np.zeros(0)  # latency SLI's (s), NaN
        self._at: dict[int, int] = {}  # id(state) → its index
        # per state what the rules read and write (None as NaN, the evidence as its
        # index in EVIDENCE): written back to the states that changed, and only the rules
        # write them, so these stay the states' values between two builds
        self.capacity: FloatArray = np.zeros(0)
        self.pending: FloatArray = np.zeros(0)
        self.count: IntArray = np.zeros(0, dtype=np.int64)
        self.evidence: IntArray = np.zeros(0, dtype=np.int64)
        self.predicted: FloatArray = np.zeros(0)

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
        nan = math.nan
        self.capacity = np.asarray([st.capacity for st in self.states], dtype=float)
        self.pending = np.asarray([nan if st.pending_capacity is None else st.pending_capacity
                                   for st in self.states], dtype=float)
        self.count = np.asarray([st.pending_count for st in self.states], dtype=np.int64)
        self.evidence = np.asarray([EVIDENCE.index(st.capacity_evidence)
                                    for st in self.states], dtype=np.int64)
        self.predicted = np.asarray(
            [nan if st.capacity_predicted is None else st.capacity_predicted
             for st in self.states], dtype=float)


def update_capacities(index: BandRows, cfg: CapacitySettings,
                      window_totals: FloatArray,
                      window_burn: FloatArray,
                      latency: BandLatencyStore,
                      batch_limits: dict[ModelKey, float]) -> None:
    """One update of ``capacity``/``capacity_evidence``/``capacity_predicted`` (and the
    hysteresis) of every state of ``index`` that learns capacity
    (:data:`~fleetwatch.slo.judge.states.LEARNS_CAPACITY`; see the module doc), for all states at
    once: which bands are trusted and burn, the highest observed concurrency of a good band,
    and the capacity model's fit (:func:`~fleetwatch.slo.capacity.model.predict_rows`) are computed
    vectorized, then the rules and hysteresis on the states' arrays in ``index``
    (:func:`_apply_rules`), written back to the states that changed.

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
    any_trusted = trusted.any(axis=1)
    any_burning = burning.any(axis=1)
    lowest_burns = burning[:, 0]  # the lowest band (lower edge 0) burns
    obs = np.append(latency.concurrency(n), math.nan)[at]  # NaN: unknown
    upper = index.upper
    x = np.where(np.isnan(obs), upper, np.minimum(obs, upper))  # observed, ≤ the bound
    good = np.where(trusted & np.isfinite(upper), x, -math.inf).max(axis=1, initial=0.0)
    # the lowest burning band's lower edge, and the highest good observed concurrency
    # below it
    first = burning.argmax(axis=1)
    edge = np.take_along_axis(index.lower, first[:, None], axis=1)[:, 0]
    below = trusted & ~burning & (upper <= edge[:, None])
    g_below = np.where(below, x, -math.inf).max(axis=1, initial=0.0)
    model_based = index.model_based
    # the capacity model: states whose latency SLI has a trusted burning band above the
    # lowest one
    fit = (any_burning & ~lowest_burns & np.asarray(model_based, dtype=bool)).nonzero()[0]
    predicted: list[float] = []
    observed_burning: list[float] = []
    g_fit: list[float] = []
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
    _apply_rules(index, cfg, _Evidence(any_trusted, any_burning, lowest_burns, good, g_below,
                                       edge, fit, predicted, g_fit, observed_burning))


@dataclass(slots=True)
class _Evidence:
    """What one update measured per learning state (arrays in ``BandRows`` order):
    whether any band is ``trusted`` (enough events), any ``burning``, the ``lowest``
    band burns; ``good`` the highest observed concurrency of a trusted good band,
    ``g_below`` that below the lowest burning band, ``edge`` that band's lower edge
    (requests); for the states the capacity model fits (``fit``: their positions) its
    ``predicted`` capacity, ``g_fit`` (as ``g_below``, 0 only without such a band) and
    the lowest burning band's ``observed_burning`` concurrency (requests)."""

    any_trusted: BoolArray
    any_burning: BoolArray
    lowest: BoolArray
    good: FloatArray
    g_below: FloatArray
    edge: FloatArray
    fit: IntArray
    predicted: list[float]
    g_fit: list[float]
    observed_burning: list[float]


def _adopt_all(index: BandRows, act: BoolArray, value: FloatArray,
               cfg: CapacitySettings) -> BoolArray:
    """Hysteresis for the states ``act`` at once (their estimates ``value``): a state's
    capacity becomes its estimate once an estimate within :data:`SAME` of it held for
    ``cfg.hysteresis_updates`` consecutive updates (at once when that is 1). Updates
    ``index``'s capacity, pending estimate and count; returns per state whether its
    estimate is (now) the capacity, within :data:`SAME`."""
    cap, pending, count = index.capacity, index.pending, index.count
    with np.errstate(invalid="ignore"):  # NaN: no pending estimate, never the same
        same_cap = np.abs(cap - value) <= SAME * np.maximum(np.abs(cap), np.abs(value))
        same_pending = np.abs(pending - value) <= SAME * np.maximum(np.abs(pending),
                                                                    np.abs(value))
    held = act & same_cap
    moving = act & ~same_cap
    count[moving] = np.where(same_pending[moving], count[moving] + 1, 1)
    pending[moving] = value[moving]
    reached = moving & (count >= cfg.hysteresis_updates)
    cap[reached] = value[reached]
    done: BoolArray = held | reached
    pending[done] = math.nan
    count[done] = 0
    return done


def _apply_rules(index: BandRows, cfg: CapacitySettings, ev: _Evidence) -> None:
    """The rules of the module doc for every learning state at once, on ``index``'s
    arrays and the update's evidence ``ev``, then written back to the states whose
    capacity, pending estimate, evidence or prediction changed. The roundings are
    :func:`round_capacity`'s (per state that needs one)."""
    any_trusted, any_burning, lowest = ev.any_trusted, ev.any_burning, ev.lowest
    good, g_below, edge, fit = ev.good, ev.g_below, ev.edge, ev.fit
    predicted, g_fit, observed_burning = ev.predicted, ev.g_fit, ev.observed_burning
    states = index.states
    n = len(states)
    learning = np.fromiter((st.state in LEARNS_CAPACITY for st in states), bool, n)
    before = (index.capacity.copy(), index.pending.copy(), index.count.copy(),
              index.evidence.copy(), index.predicted.copy())
    cap = index.capacity
    nan = math.nan
    # 1. no trusted band, 4. the lowest band burns: unchanged, nothing pending
    quiet = learning & (~any_trusted | (any_burning & lowest))
    index.pending[quiet] = nan
    index.count[quiet] = 0
    index.evidence[learning & any_trusted & any_burning & lowest] = _REGRESSION
    value = np.full(n, nan)
    evidence = np.full(n, _BANDS, dtype=np.int64)
    # 3. a burning band above the lowest: the bands rule, or the capacity model's value
    banded = learning & any_trusted & any_burning & ~lowest
    value[banded] = np.minimum(np.maximum(cap[banded], g_below[banded]), edge[banded])
    model_based = np.zeros(n, dtype=bool)
    model_based[fit] = True
    index.predicted[banded & ~model_based] = nan
    fits = [(i, k) for k, i in enumerate(fit.tolist()) if banded[i]]
    for i, k in fits:
        pred, g, seen = predicted[k], g_fit[k], observed_burning[k]
        cp = None if pred != pred else round_capacity(pred)
        index.predicted[i] = nan if cp is None else cp
        if cp is not None and seen == seen:
            value[i] = round_capacity(min(max(cp, g), max(seen, g)))
            evidence[i] = _MODEL
        else:
            value[i] = min(max(cap[i], g), edge[i])
    # 2. no band burns: the highest good observed concurrency raises it, else kept
    calm = learning & any_trusted & ~any_burning
    index.predicted[calm] = nan
    rises = calm & (good >= cap)
    value[rises] = [round_capacity(g) for g in good[rises].tolist()]
    keeps = calm & ~rises
    value[keeps] = cap[keeps]
    evidence[keeps] = _KEPT
    act = banded | calm
    adopted = act & _adopt_all(index, act, value, cfg)
    index.evidence[adopted] = evidence[adopted]
    _write_back(index, before)


def _write_back(index: BandRows, before: tuple[npt.NDArray[Any], ...]) -> None:
    """Copy the rules' arrays to the states where they differ from ``before``."""
    now = (index.capacity, index.pending, index.count, index.evidence, index.predicted)
    changed = np.zeros(len(index.states), dtype=bool)
    for old, new in zip(before, now, strict=True):
        if old.dtype.kind == "f":
            changed |= ~((old == new) | (np.isnan(old) & np.isnan(new)))
        else:
            changed |= old != new
    at = changed.nonzero()[0]
    if not len(at):
        return
    states = index.states
    caps, pend, cnt, ev, pred = (a[at].tolist() for a in now)
    for i, c, p, k, e, q in zip(at.tolist(), caps, pend, cnt, ev, pred, strict=True):
        st = states[i]
        st.capacity = c
        st.pending_capacity = None if p != p else p
        st.pending_count = k
        st.capacity_evidence = EVIDENCE[e]
        st.capacity_predicted = None if q != q else q
