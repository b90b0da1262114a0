"""Latency against concurrency, per band, as arrays: the evidence of the capacity model.

For a latency SLI the engine attributes each interval's histogram bucket deltas to the
interval's concurrency band (as it attributes the SLI's events), per (SLO, model, band):
an exponentially weighted histogram whose time constant is the capacity window
(``capacity.window``), with the events-weighted mean concurrency of those intervals.
Every SLI's bands keep the mean concurrency (their observation count and concurrency).

:class:`BandLatencyStore` holds them for every (SLO, model, band) as arrays, a row
per band (the engine uses the band's window-store row), the buckets in a block per set
of bucket bounds (``[rows, bounds]``: the rows of models with one histogram layout
together, so memory follows each band's own bounds): an update adds the intervals of
all bands in one vectorized pass (:meth:`BandLatencyStore.add`), and
:meth:`BandLatencyStore.quantiles` answers the quantile of every band at once —
interpolated linearly inside the bucket as Prometheus' ``histogram_quantile`` does; a
rank in the ``+Inf`` bucket answers the highest finite bound (a lower bound of the true
quantile, as Prometheus does). A :class:`BandLatency` is one row's view
(``SLOModelState.latency``).

The weights grow as ``exp((t − origin) / τ)`` per row instead of decaying (one multiply
per add), renormalized to a new origin when the exponent passes :data:`_RENORM`.

Units: seconds for latency and bucket bounds, requests (per replica) for concurrency,
observations for counts, Unix seconds for times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from fleetwatch.slo.account.bookings import Bookings, Buckets
from fleetwatch.slo.arrays import FloatArray, IntArray

#: The weights are renormalized when their exponent ``(t − origin) / τ`` passes this.
_RENORM = 50.0
#: Quantile answers kept (one per distinct ``q`` asked since the last add).
_MAX_CACHED = 16


class _Block:
    """The buckets of the rows whose histograms have one set of bounds (``les``, in the
    order first seen): ``cum[slot, c]`` per row's slot; ``rows[slot]`` (−1: free)."""

    def __init__(self, index: int, les: tuple[float, ...]) -> None:
        self.index = index
        self.les = les
        self.bounds = set(les)
        order = np.argsort(np.asarray(les, dtype=float), kind="stable")
        self.order: IntArray = order
        self.sorted_les: FloatArray = np.asarray(les, dtype=float)[order]
        self.cum: FloatArray = np.zeros((4, len(les)))
        self.rows: IntArray = np.full(4, -1, dtype=np.int64)
        self.free: list[int] = []
        self.used = 0  # slots allocated so far (used or free)
        self._cols: dict[tuple[float, ...], IntArray] = {}  # interval bounds → columns

    def slot(self, row: int) -> int:
        if self.free:
            k = self.free.pop()
        else:
            k = self.used
            self.used += 1
            if k >= len(self.rows):
                self.cum = np.concatenate([self.cum, np.zeros_like(self.cum)])
                self.rows = np.concatenate([self.rows, np.full(len(self.rows), -1)])
        self.rows[k] = row
        return k

    def release(self, k: int) -> None:
        self.cum[k] = 0.0
        self.rows[k] = -1
        self.free.append(k)

    def columns(self, les: tuple[float, ...]) -> IntArray:
        """The columns of bounds ``les`` (a subset of this block's)."""
        cols = self._cols.get(les)
        if cols is None:
            at = {le: c for c, le in enumerate(self.les)}
            cols = self._cols[les] = np.asarray([at[le] for le in les], dtype=np.int64)
        return cols


@dataclass(slots=True)
class _Group:
    """The bookings of one block and bucket layout ``les``: their ``rows``, positions
    ``at`` in the call's lists and bucket ``deltas`` (one per bound of ``les``)."""

    les: tuple[float, ...]
    rows: list[int] = field(default_factory=list)
    at: list[int] = field(default_factory=list)
    deltas: list[Sequence[float]] = field(default_factory=list)


class BandLatencyStore:
    """Exponentially weighted latency histograms and mean concurrencies of many bands.

    Per row: ``origin`` (Unix seconds), ``count`` (weighted observations), ``conc``
    (weighted Σ concurrency × observations, requests), and the weighted cumulative count
    per bucket bound (seconds) the row has seen, kept in the block of rows with the same
    bounds (memory: each row's own bounds; a row that sees a new bound moves to the
    block of its bounds and the new one); all scaled by ``exp((t − origin) / τ)``. Rows
    are allocated by the caller's index (:meth:`reset` on first use); storage grows ×2.
    """

    def __init__(self, rows: int = 64) -> None:
        self.origin: FloatArray = np.zeros(rows)
        self.count: FloatArray = np.zeros(rows)
        self.conc: FloatArray = np.zeros(rows)
        self.block: IntArray = np.full(rows, -1, dtype=np.int64)  # −1: no buckets
        self.slot: IntArray = np.zeros(rows, dtype=np.int64)
        self._blocks: list[_Block] = []
        self._by_bounds: dict[tuple[float, ...], _Block] = {}
        self._quantiles: dict[float, FloatArray] = {}

    def _grow(self, row: int) -> None:
        n = len(self.count)
        if row < n:
            return
        size = max(2 * n, row + 1)
        for name, fill in (("origin", 0), ("count", 0), ("conc", 0), ("block", -1),
                           ("slot", 0)):
            old = getattr(self, name)
            new = np.full(size, fill, dtype=old.dtype)
            new[:n] = old
            setattr(self, name, new)

    def reset(self, row: int, origin: float) -> None:
        """Start ``row`` empty with weights relative to ``origin`` (Unix seconds)."""
        self._grow(row)
        self.origin[row] = origin
        self.count[row] = self.conc[row] = 0.0
        b = int(self.block[row])
        if b >= 0:
            self._blocks[b].release(int(self.slot[row]))
            self.block[row] = -1
        self._quantiles.clear()

    def _block_of(self, les: tuple[float, ...]) -> _Block:
        blk = self._by_bounds.get(les)
        if blk is None:
            blk = self._by_bounds[les] = _Block(len(self._blocks), les)
            self._blocks.append(blk)
        return blk

    def _place(self, row: int, les: tuple[float, ...]) -> _Block:
        """The block ``row`` is in, moved first to one with ``les`` too if need be."""
        b = int(self.block[row])
        if b >= 0:
            old = self._blocks[b]
            if old.les is les or old.les == les or old.bounds.issuperset(les):
                return old
            blk = self._block_of(old.les + tuple(le for le in les if le not in old.bounds))
            k, was = blk.slot(row), int(self.slot[row])
            blk.cum[k, : len(old.les)] = old.cum[was]
            old.release(was)
        else:
            blk = self._block_of(les)
            k = blk.slot(row)
        self.block[row], self.slot[row] = blk.index, k
        return blk

    def bucket_counts(self, row: int) -> dict[float, float]:
        """Upper bound ``le`` (seconds) → weighted cumulative count of ``row``, the bounds
        it has seen (in the order first seen)."""
        b = int(self.block[row])
        if b < 0:
            return {}
        blk = self._blocks[b]
        return dict(zip(blk.les, blk.cum[int(self.slot[row])].tolist(), strict=True))

    def load(self, row: int, origin: float, count: float, conc: float,
             buckets: dict[float, float]) -> None:
        """Set ``row`` to recovered evidence: weights relative to ``origin`` (Unix
        seconds), ``count`` weighted observations, ``conc`` weighted Σ concurrency ×
        observations (requests) and ``buckets`` (upper bound ``le`` in seconds →
        weighted cumulative count; empty: none), as :meth:`bucket_counts` gives them."""
        self.reset(row, origin)
        self.count[row], self.conc[row] = count, conc
        if buckets:
            les = tuple(buckets)
            blk = self._place(row, les)
            blk.cum[int(self.slot[row]), blk.columns(les)] = list(buckets.values())

    def add_bookings(self, booked: Bookings, tau: float) -> None:
        """Add the bookings' latency evidence (``tau``: the capacity window, seconds): at
        once per run of bookings with one time and distinct rows (an interval books each
        (SLO, model) once; trace events may book a row several times, in order)."""
        for run in booked.runs():
            self.add(booked.times[run.start], tau, booked.bands[run], booked.buckets[run],
                     booked.counts[run], booked.conc[run])

    def add(self, ts: float, tau: float, rows: list[int], buckets: list[Buckets],
            counts: list[float], concurrency: list[float]) -> None:
        """Add one interval ending at ``ts`` (Unix seconds) to each of ``rows`` (distinct):
        its bucket deltas (``(bounds, counts)``: distinct upper bounds ``le`` in seconds
        and the observations ≤ each; both empty for an SLI without a histogram), its
        observation count and its concurrency (requests); ``tau`` is the time constant
        (seconds). Rows with a count ≤ 0 are left as they are."""
        keep = [i for i, c in enumerate(counts) if c > 0]
        if len(keep) != len(rows):
            rows, buckets = [rows[i] for i in keep], [buckets[i] for i in keep]
            counts, concurrency = [counts[i] for i in keep], [concurrency[i] for i in keep]
        if not rows:
            return
        self._quantiles.clear()
        with np.errstate(over="ignore", invalid="ignore"):  # as float arithmetic: ±inf, NaN
            self._add(ts, tau, rows, buckets, counts, concurrency)

    def _add(self, ts: float, tau: float, rows: list[int], buckets: list[Buckets],
             counts: list[float], concurrency: list[float]) -> None:
        r = np.asarray(rows, dtype=np.int64)
        x = (ts - self.origin[r]) / tau
        big = x > _RENORM
        if big.any():  # rescale those rows to a new origin
            at = r[big]
            f = np.asarray([math.exp(-v) for v in x[big].tolist()])
            for row, fi in zip(at.tolist(), f.tolist(), strict=True):
                bi = int(self.block[row])
                if bi >= 0:
                    self._blocks[bi].cum[int(self.slot[row])] *= fi
            self.count[at] *= f
            self.conc[at] *= f
            self.origin[at] = ts
            x[big] = 0.0
        w = np.asarray([math.exp(v) for v in x.tolist()])  # libm's exp, as math.exp
        cnt = np.asarray(counts)
        self.count[r] += cnt * w
        self.conc[r] += np.asarray(concurrency) * cnt * w
        # rows of one block with the same interval bounds (one tuple: the decoder hands
        # one on per histogram layout; equal ones of their own are grouped apart, as
        # correct: the rows are distinct) at once: [rows, bounds]
        groups: dict[tuple[int, int], _Group] = {}
        place, blocks = self._place, self._blocks
        keyed = [k for k, (key, _d) in enumerate(buckets) if key]
        # each row's block before placing (placing a row moves that row alone): a row
        # whose block has these very bounds stays there, as _place would keep it
        now = self.block[r[keyed]].tolist() if keyed else []
        for k, b in zip(keyed, now, strict=True):
            key, deltas = buckets[k]
            blk = blocks[b] if b >= 0 and blocks[b].les is key else place(rows[k], key)
            g = groups.get((blk.index, id(key)))
            if g is None:
                g = groups[(blk.index, id(key))] = _Group(key)
            g.rows.append(rows[k])  # its slot read below: placing others keeps it
            g.at.append(k)
            g.deltas.append(deltas)
        for (bi, _id), grp in groups.items():
            key, in_rows, ks, values = grp.les, grp.rows, grp.at, grp.deltas
            blk = self._blocks[bi]
            width = len(key)  # every row of a group: one value per bound of key
            deltas_of = np.fromiter(chain.from_iterable(values), float,
                                    len(values) * width).reshape(len(values), width)
            blk.cum[self.slot[np.asarray(in_rows, dtype=np.int64)][:, None],
                    blk.columns(key)] += deltas_of * w[ks][:, None]

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
        out = np.full(len(at), np.nan)
        blocks = self.block[at]
        for b in np.unique(blocks[blocks >= 0]).tolist():
            mine = (blocks == b).nonzero()[0]
            blk = self._blocks[b]
            rows = at[mine]
            out[mine] = _quantile(q, blk.cum[self.slot[rows][:, None], blk.order],
                                  blk.sorted_les, self.count[rows])
        return out


def _quantile(q: float, cum: FloatArray, les: FloatArray, count: FloatArray) -> FloatArray:
    """The ``q`` quantile of each row of ``cum`` (``[rows, bounds]``, cumulative counts
    at the ascending bounds ``les``, seconds) with ``count`` observations: the first
    bound whose count reaches ``q × total`` (total: the ``+Inf`` bucket's count, else
    ``count``), interpolated linearly from the bound below; in the ``+Inf`` bucket, or
    past every bound, the highest finite bound (NaN: none, or no observations)."""
    n = cum.shape[0]
    rows = np.arange(n)
    inf = np.isinf(les)
    finite = (~inf).nonzero()[0]
    top = float(les[finite[-1]]) if len(finite) else math.nan
    total = cum[:, int(np.argmax(inf))] if inf.any() else count
    rank = q * total
    hit = cum >= rank[:, None]
    found = hit.any(axis=1)
    j = hit.argmax(axis=1)
    prev = np.maximum(j - 1, 0)
    lower = np.where(j > 0, les[prev], 0.0)
    below = np.where(j > 0, cum[rows, prev], 0.0)
    le, cj = les[j], cum[rows, j]
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = lower + (le - lower) * (rank - below) / (cj - below)
    answer = np.where(np.isinf(le), top, np.where(cj <= below, le, inside))
    answer = np.where(found, answer, top)
    return np.where((count > 0) & (total > 0), answer, np.nan)


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
        return self.store.bucket_counts(self.row)

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
