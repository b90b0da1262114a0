"""Latency against concurrency, per band, as arrays: the evidence of the capacity model.

For a latency SLI the engine attributes each interval's histogram bucket deltas to the
interval's concurrency band (as it attributes the SLI's events), per (SLO, model, band):
an exponentially weighted histogram whose time constant is the capacity window
(``capacity.window``), with the events-weighted mean concurrency of those intervals.
Every SLI's bands keep the mean concurrency (their observation count and concurrency).

:class:`BandLatencyStore` holds them for every (SLO, model, band) as one block of
arrays, a row per band (the engine uses the band's window-store row), a column per
histogram bucket bound seen: an update adds the intervals of all bands in one
vectorized pass (:meth:`BandLatencyStore.add`), and :meth:`BandLatencyStore.quantiles`
answers the quantile of every band at once — interpolated linearly inside the bucket as
Prometheus' ``histogram_quantile`` does; a rank in the ``+Inf`` bucket answers the
highest finite bound (a lower bound of the true quantile, as Prometheus does). A
:class:`BandLatency` is one row's view (``SLOModelState.latency``).

The weights grow as ``exp((t − origin) / τ)`` per row instead of decaying (one multiply
per add), renormalized to a new origin when the exponent passes :data:`_RENORM`.

Units: seconds for latency and bucket bounds, requests (per replica) for concurrency,
observations for counts, Unix seconds for times.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The weights are renormalized when their exponent ``(t − origin) / τ`` passes this.
_RENORM = 50.0
#: Quantile answers kept (one per distinct ``q`` asked since the last add).
_MAX_CACHED = 16


class BandLatencyStore:
    """Exponentially weighted latency histograms and mean concurrencies of many bands.

    Per row: ``origin`` (Unix seconds), ``count`` (weighted observations), ``conc``
    (weighted Σ concurrency × observations, requests) and per bucket bound ``les[c]``
    (seconds) the weighted cumulative count ``cum[row, c]`` and whether the row has seen
    that bound (``present``: a bound the row never saw takes no part in its quantile);
    all scaled by ``exp((t − origin) / τ)``. Rows are allocated by the caller's index
    (:meth:`reset` on first use); storage grows ×2.
    """

    def __init__(self, rows: int = 64) -> None:
        self.les: list[float] = []
        self._col: dict[float, int] = {}
        self._cols_of: dict[tuple[float, ...], list[int]] = {}  # bucket key set → columns
        self.origin: FloatArray = np.zeros(rows)
        self.count: FloatArray = np.zeros(rows)
        self.conc: FloatArray = np.zeros(rows)
        self.cum: FloatArray = np.zeros((rows, 0))
        self.present: npt.NDArray[np.bool_] = np.zeros((rows, 0), dtype=bool)
        self._quantiles: dict[float, FloatArray] = {}
        self._sorted: tuple[IntArray, FloatArray] | None = None  # column order, bounds

    def _grow(self, row: int) -> None:
        n = len(self.count)
        if row < n:
            return
        size = max(2 * n, row + 1)
        for name in ("origin", "count", "conc"):
            old = getattr(self, name)
            new = np.zeros(size)
            new[:n] = old
            setattr(self, name, new)
        cum = np.zeros((size, len(self.les)))
        cum[:n] = self.cum
        present = np.zeros((size, len(self.les)), dtype=bool)
        present[:n] = self.present
        self.cum, self.present = cum, present

    def reset(self, row: int, origin: float) -> None:
        """Start ``row`` empty with weights relative to ``origin`` (Unix seconds)."""
        self._grow(row)
        self.origin[row] = origin
        self.count[row] = self.conc[row] = 0.0
        self.cum[row] = 0.0
        self.present[row] = False
        self._quantiles.clear()

    def _columns(self, les: tuple[float, ...]) -> list[int]:
        cols = self._cols_of.get(les)
        if cols is None:
            new = [le for le in les if le not in self._col]
            if new:
                for le in new:
                    self._col[le] = len(self.les)
                    self.les.append(le)
                n = len(self.count)
                self.cum = np.concatenate([self.cum, np.zeros((n, len(new)))], axis=1)
                self.present = np.concatenate(
                    [self.present, np.zeros((n, len(new)), dtype=bool)], axis=1)
                self._sorted = None
            cols = self._cols_of[les] = [self._col[le] for le in les]
        return cols

    def add(self, ts: float, tau: float, rows: list[int], buckets: list[dict[float, float]],
            counts: list[float], concurrency: list[float]) -> None:
        """Add one interval ending at ``ts`` (Unix seconds) to each of ``rows`` (distinct):
        its bucket deltas (``le`` → observations ≤ it; empty for an SLI without a
        histogram), its observation count and its concurrency (requests); ``tau`` is the
        time constant (seconds). Rows with a count ≤ 0 are left as they are."""
        keep = [i for i, c in enumerate(counts) if c > 0]
        if len(keep) != len(rows):
            rows, buckets = [rows[i] for i in keep], [buckets[i] for i in keep]
            counts, concurrency = [counts[i] for i in keep], [concurrency[i] for i in keep]
        if not rows:
            return
        self._quantiles.clear()
        with np.errstate(over="ignore", invalid="ignore"):  # as float arithmetic: ±inf, NaN
            self._add(ts, tau, rows, buckets, counts, concurrency)

    def _add(self, ts: float, tau: float, rows: list[int], buckets: list[dict[float, float]],
             counts: list[float], concurrency: list[float]) -> None:
        r = np.asarray(rows, dtype=np.int64)
        x = (ts - self.origin[r]) / tau
        big = x > _RENORM
        if big.any():  # rescale those rows to a new origin
            at = r[big]
            f = np.asarray([math.exp(-v) for v in x[big].tolist()])
            self.cum[at] *= f[:, None]
            self.count[at] *= f
            self.conc[at] *= f
            self.origin[at] = ts
            x[big] = 0.0
        w = np.asarray([math.exp(v) for v in x.tolist()])  # libm's exp, as math.exp
        cnt = np.asarray(counts)
        self.count[r] += cnt * w
        self.conc[r] += np.asarray(concurrency) * cnt * w
        # rows with the same bucket bounds (one histogram layout) at once: [rows, bounds]
        groups: dict[tuple[float, ...], tuple[list[int], list[int], list[list[float]]]] = {}
        for k, b in enumerate(buckets):
            if b:
                key = tuple(b)
                g = groups.get(key)
                if g is None:
                    g = groups[key] = ([], [], [])
                g[0].append(rows[k])
                g[1].append(k)
                g[2].append(list(b.values()))
        for key, (to, ks, values) in groups.items():
            cols = np.asarray(self._columns(key), dtype=np.int64)
            ri = np.asarray(to, dtype=np.int64)[:, None]
            self.cum[ri, cols] += np.asarray(values) * w[ks][:, None]
            self.present[ri, cols] = True

    def concurrency(self, n: int) -> FloatArray:
        """Observation-weighted mean concurrency of rows ``0 … n−1`` (requests; NaN for
        a row without observations)."""
        count = self.count[:n]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(count > 0, self.conc[:n] / count, np.nan)

    def quantiles(self, q: float, rows: IntArray | None = None) -> FloatArray:
        """The ``q`` quantile (0–1) in seconds, ``histogram_quantile``-style, of every row
        (cached until the next add), or of ``rows`` (not cached); NaN: no observations
        or no buckets."""
        if rows is not None:
            return self._quantiles_of(q, rows)
        got = self._quantiles.get(q)
        if got is None:
            if len(self._quantiles) >= _MAX_CACHED:
                self._quantiles.clear()
            got = self._quantiles[q] = self._quantiles_of(q, np.arange(len(self.count)))
        return got

    def _quantiles_of(self, q: float, at: IntArray) -> FloatArray:
        n = len(at)
        if not self.les:
            return np.full(n, np.nan)
        if self._sorted is None:
            order = np.argsort(np.asarray(self.les), kind="stable")
            self._sorted = (order, np.asarray(self.les)[order])
        order, les = self._sorted
        cum, present = self.cum[at[:, None], order], self.present[at[:, None], order]
        count = self.count[at]
        c = len(les)
        rows = np.arange(n)
        inf = np.isinf(les)
        total = count.copy()
        if inf.any():
            k = int(np.argmax(inf))
            total = np.where(present[:, k], cum[:, k], count)
        idx = np.arange(c)
        last_present = np.maximum.accumulate(np.where(present, idx, -1), axis=1)
        # the highest finite bound a row has (−1: none)
        top_at = np.maximum.accumulate(np.where(present & ~inf, idx, -1), axis=1)[:, -1]
        top = np.where(top_at >= 0, les[np.maximum(top_at, 0)], np.nan)
        rank = q * total
        hit = present & (cum >= rank[:, None])
        found = hit.any(axis=1)
        j = hit.argmax(axis=1)
        prev = np.where(j > 0, last_present[rows, np.maximum(j - 1, 0)], -1)
        lower = np.where(prev >= 0, les[np.maximum(prev, 0)], 0.0)
        below = np.where(prev >= 0, cum[rows, np.maximum(prev, 0)], 0.0)
        le, cj = les[j], cum[rows, j]
        with np.errstate(divide="ignore", invalid="ignore"):
            inside = lower + (le - lower) * (rank - below) / (cj - below)
        answer = np.where(np.isinf(le), top, np.where(cj <= below, le, inside))
        answer = np.where(found, answer, top)
        valid = (count > 0) & present.any(axis=1) & (total > 0)
        return np.where(valid, answer, np.nan)


class BandLatency:
    """One row of a :class:`BandLatencyStore`: one (SLO, model, band)'s evidence."""

    __slots__ = ("row", "store")

    def __init__(self, store: BandLatencyStore, row: int) -> None:
        self.store, self.row = store, row

    @property
    def count(self) -> float:
        """Weighted observations (0: none)."""
        return float(self.store.count[self.row])

    @property
    def buckets(self) -> dict[float, float]:
        """Upper bound ``le`` (seconds) → weighted cumulative count, the bounds seen."""
        s, r = self.store, self.row
        return {le: float(s.cum[r, c]) for c, le in enumerate(s.les) if s.present[r, c]}

    def concurrency(self) -> float | None:
        """Observation-weighted mean concurrency of the band's intervals (requests)."""
        s, r = self.store, self.row
        count = float(s.count[r])
        return float(s.conc[r]) / count if count > 0 else None

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0–1) in seconds, ``histogram_quantile``-style; None without
        observations or buckets."""
        x = float(self.store.quantiles(q)[self.row])
        return None if x != x else x
