"""Accounting: the events of an interval, attributed to the concurrency band it ran at,
into sliding windows; burn rates over every window.

Per SLO and model an interval yields Δgood and Δtotal events (:mod:`fleetwatch.slo.account.columns`:
latency, histogram bucket ``le = threshold`` vs ``_count``; availability, successful vs all
requests; time slice, one event, good when the interval's quantile or mean ≤
threshold). They are attributed to the **concurrency band**
of the interval (:mod:`fleetwatch.slo.account.concurrency`: time-averaged requests in the system,
Little's law cross-checked with the running + waiting gauges). :class:`Ledger` keeps them per (SLO,
model, band) and overall in
:class:`~fleetwatch.slo.account.windows.RollingWindows` (bounded memory) and computes, vectorized,
the **burn rate** (error rate ÷ error budget, SRE Workbook) of every row and window and
which rows burn faster than a window pair's threshold on both its windows.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence

import numpy as np

from fleetwatch.labels.registry import Registry
from fleetwatch.slo.account.bookings import Bookings
from fleetwatch.slo.account.windows import MAX_RESERVED_BYTES, RollingWindows
from fleetwatch.slo.arrays import BoolArray, FloatArray
from fleetwatch.slo.sli import nearest_bounds
from fleetwatch.slo.spec import SLOFile, SLOSpec
from fleetwatch.slo.state import ModelKey, SLOModelState


class Selection:
    """Which models an SLO covers (names as globs, registry teams and latency tiers),
    decided once per (SLO, model)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._cache: dict[tuple[str, ModelKey], bool] = {}

    def __call__(self, slo: SLOSpec, mk: ModelKey) -> bool:
        key = (slo.name, mk)
        hit = self._cache.get(key)
        if hit is None:
            sel = slo.selector
            entry = self.registry.lookup(mk.model, mk.model_version)
            hit = ((not sel.models or any(fnmatch.fnmatchcase(mk.model, g) for g in sel.models))
                   and (not sel.teams or (entry is not None and entry.team in sel.teams))
                   and (not sel.latency_tiers
                        or (entry is not None and entry.latency_tier in sel.latency_tiers)))
            self._cache[key] = hit
        return hit

    def forget(self, models: set[ModelKey]) -> None:
        """Drop the decisions about ``models`` (forgotten by the engine)."""
        self._cache = {(name, mk): v for (name, mk), v in self._cache.items()
                       if mk not in models}


#: Per (histogram family, model) the bucket bounds seen (seconds).
Bounds = dict[tuple[str, ModelKey], set[float]]


def threshold_error(fam: str, mk: ModelKey, thr: float, bounds: Bounds) -> str:
    """Why a latency threshold (seconds) that is no bucket boundary of the model's
    histogram family ``fam`` (``bounds``: seconds seen) makes the SLO misconfigured."""
    seen = bounds.get((fam, mk), set())
    near = ", ".join(format(b, "g") for b in nearest_bounds(seen, thr, 2)) \
        or "none (no buckets)"
    return (f"threshold {thr:g} s is not a bucket boundary of {fam} for model "
            f"{mk.model}; nearest boundaries: {near}")


class Ledger:
    """Events per (SLO, model, band label) over every window length, and their burn
    rates.

    ``window_lengths``: seconds, ascending (the catalog's windows, the capacity window and
    every SLO period). After :meth:`add`, :attr:`burn` is ``[rows, windows]`` burn rates
    (NaN without events) and :attr:`burning` ``[rows]`` whether a row burns faster than a
    window pair's threshold on both its windows.
    """

    def __init__(self, slos: SLOFile, buckets: int = 60) -> None:
        self.spec = slos
        self.window_lengths = sorted(set(slos.all_windows())
                                     | {s.period_seconds for s in slos.slos})
        # reserve the rows the limits allow (every SLO's models × its bands, ``all``),
        # within MAX_RESERVED_BYTES: then no update copies the rings to grow them
        rows = sum(slos.limits.max_models_per_slo * (len(s.concurrency.bands) + 2)
                   for s in slos.slos)
        row_bytes = len(self.window_lengths) * (buckets + 1) * 2 * 8
        self.windows = RollingWindows(self.window_lengths, buckets,
                                      max(64, min(rows, MAX_RESERVED_BYTES // row_bytes)))
        # per row its SLO's objective and period (seconds), and its cumulative good and
        # total events since start (the states' ``events``/``good``), grown ×2
        self._row_objective: FloatArray = np.zeros(64)
        self._row_period: FloatArray = np.zeros(64)
        self.cum_good: FloatArray = np.zeros(64)
        self.cum_total: FloatArray = np.zeros(64)
        self.burn: FloatArray = np.zeros((0, len(self.window_lengths)))
        self.burning: BoolArray = np.zeros(0, dtype=bool)

    def row(self, st: SLOModelState, band: str) -> int:
        """The window-store row of a band (or ``"all"``) of an SLO and model (a new row
        starts with no cumulative events)."""
        r = st.rows.get(band)
        if r is None:
            r = st.rows[band] = self.windows.row((st.slo.name, st.model, band))
            if r >= len(self._row_objective):
                size = max(2 * len(self._row_objective), r + 1)
                self._row_objective = np.resize(self._row_objective, size)
                self._row_period = np.resize(self._row_period, size)
                self.cum_good = np.resize(self.cum_good, size)
                self.cum_total = np.resize(self.cum_total, size)
            self._row_objective[r] = st.slo.objective
            self._row_period[r] = st.slo.period_seconds
            self.cum_good[r] = self.cum_total[r] = 0.0
        return r

    def add(self, ts: float, rows: list[int], goods: Sequence[float] | FloatArray,
            totals: Sequence[float] | FloatArray) -> None:
        """Add events at time ``ts`` (``goods[i]``/``totals[i]`` to ``rows[i]``, and to
        the rows' cumulative counts in order), expire old buckets, and recompute
        :attr:`burn` and :attr:`burning`."""
        at = np.asarray(rows, dtype=np.int64)
        good, total = np.asarray(goods, dtype=float), np.asarray(totals, dtype=float)
        self.windows.add(ts, at, good, total)
        np.add.at(self.cum_good, at, good)  # a row booked twice: added one after the other
        np.add.at(self.cum_total, at, total)
        self._compute_burn()

    def book(self, ts: float, booked: Bookings) -> None:
        """:meth:`add` an update's bookings at ``ts``: each booking's counts to its band's
        row and to its ``all`` row."""
        self.add(ts, booked.rows, np.repeat(np.asarray(booked.goods, dtype=float), 2),
                 np.repeat(np.asarray(booked.totals, dtype=float), 2))

    def release(self, st: SLOModelState) -> None:
        """Free the rows of a forgotten state (zeroed, then reused by new rows)."""
        for band in st.rows:
            self.windows.release((st.slo.name, st.model, band))

    def _compute_burn(self) -> None:
        """One vectorized pass for all SLOs, models and bands."""
        sums = self.windows.sums()
        n = sums.shape[0]
        objective = self._row_objective[:n]
        period = self._row_period[:n]
        with np.errstate(divide="ignore", invalid="ignore"):
            # (1 − good/total) / (1 − objective), in one new array (no temporaries: the
            # same operations, so the same floats; a new one per update, as callers may
            # keep the last)
            burn = np.divide(sums[:, :, 0], sums[:, :, 1])
            np.subtract(1.0, burn, out=burn)
            np.divide(burn, (1.0 - objective)[:, None], out=burn)
            self.burn = burn
        burning = np.zeros(n, dtype=bool)
        for w in self.spec.windows:
            factor = w.budget_consumed * period / w.long
            li, si = self.windows.index[float(w.long)], self.windows.index[float(w.short)]
            burning |= (self.burn[:, li] > factor) & (self.burn[:, si] > factor)
        self.burning = burning

    def window_totals(self, window: float) -> list[float]:
        """Total events of every row over a window length (seconds)."""
        totals: list[float] = self.windows.sums()[:, self.windows.index[float(window)], 1].tolist()
        return totals

    def window_burn(self, window: float) -> list[float]:
        """Burn rate of every row over a window length (as of the last :meth:`add`)."""
        burn: list[float] = self.burn[:, self.windows.index[float(window)]].tolist()
        return burn

    def window_sums(self, st: SLOModelState, band: str, window: float,
                    sums: FloatArray | None = None) -> tuple[float, float]:
        """``(good, total)`` of a band (or ``"all"``) over a window length (seconds);
        ``sums``: a :meth:`RollingWindows.sums` taken once for many calls."""
        row = self.windows.rows.get((st.slo.name, st.model, band))
        if row is None:
            return 0.0, 0.0
        s = self.windows.sums() if sums is None else sums
        g, t = s[row, self.windows.index[float(window)]]
        return float(g), float(t)

    def burn_rate(self, st: SLOModelState, band: str, window: float) -> float:
        """Burn rate of a band (or ``"all"``) over a window length, as of the last
        :meth:`add` (NaN without events)."""
        row = st.rows.get(band)
        if row is None or row >= self.burn.shape[0]:
            return math.nan
        return float(self.burn[row, self.windows.index[float(window)]])
