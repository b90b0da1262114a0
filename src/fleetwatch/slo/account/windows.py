"""Sliding-window event counts for many series in bounded memory.

Each window of length ``W`` is a ring of ``buckets`` sub-intervals of ``W / buckets``
seconds (multi-resolution: a 5-minute window has 5-second buckets, a 30-day one 12-hour
buckets), with a running sum, so an update costs O(series × windows) vectorized and
memory is ``series × windows × buckets × 2`` floats whatever the window lengths. A
window's sum covers between ``W (1 - 1/buckets)`` and ``W`` seconds of the past.

Storage for ``capacity`` rows is reserved up front (``np.zeros``: the operating system
maps zero pages on first touch, so a row not yet used costs address space, not memory)
and grows ×2 beyond it, copying every window's rings: a caller that knows its bound
(the engine: :data:`MAX_RESERVED_BYTES` at most) reserves it so that no update pays for
a copy.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from fleetwatch.slo.arrays import FloatArray, IntArray

#: The most address space a caller should reserve for the rings (bytes): 512 MiB.
MAX_RESERVED_BYTES = 512 * 2**20
_GOOD_TOTAL = np.arange(2)  # the last axis of the counts


class RollingWindows:
    """Good/total event counts per series over several sliding windows.

    ``windows`` are lengths in seconds. Series are any hashable keys, allocated on first
    use and freed with :meth:`release` (a freed row is reused). Times are Unix seconds and
    must not go backwards (a smaller time is treated as the last one). ``capacity``:
    rows reserved (see the module doc).
    """

    def __init__(self, windows: Sequence[float], buckets: int = 60, capacity: int = 64) -> None:
        self.windows = np.asarray(sorted(set(float(w) for w in windows)))
        self.index = {float(w): i for i, w in enumerate(self.windows)}
        self.buckets = buckets
        self.resolution = self.windows / buckets
        n_w = len(self.windows)
        # [window, bucket, row, good/total]: a bucket of all rows is contiguous, so
        # expiring it (every rotation) is one pass over contiguous memory
        self._data = np.zeros((n_w, buckets, capacity, 2))
        self._sums = np.zeros((capacity, n_w, 2))
        self._last = np.full(n_w, -1, dtype=np.int64)
        self.rows: dict[Hashable, int] = {}
        self._free: list[int] = []  # released rows, zeroed, reused first
        self._high = 0  # rows allocated so far (used or free)

    def row(self, key: Hashable) -> int:
        """The row of ``key`` (allocating it: a released row, else a new one, growing
        storage ×2 when full)."""
        r = self.rows.get(key)
        if r is None:
            if self._free:
                r = self._free.pop()
                self.rows[key] = r
                return r
            r = self._high
            self._high += 1
            if r >= self._sums.shape[0]:
                grow = self._sums.shape[0]
                self._data = np.concatenate([self._data, np.zeros_like(self._data)], axis=2)
                self._sums = np.concatenate([self._sums, np.zeros_like(self._sums[:grow])])
            self.rows[key] = r
        return r

    def release(self, key: Hashable) -> None:
        """Free the row of ``key`` (its counts are zeroed; the row is reused)."""
        r = self.rows.pop(key, None)
        if r is not None:
            self._data[:, :, r] = 0.0
            self._sums[r] = 0.0
            self._free.append(r)

    def advance(self, t: float) -> None:
        """Move every window's current bucket to time ``t``, expiring old buckets."""
        idx = np.floor(t / self.resolution).astype(np.int64)
        for w in range(len(self.windows)):
            last = self._last[w]
            cur = idx[w]
            if last < 0:
                self._last[w] = cur
                continue
            if cur <= last:
                continue
            steps = min(cur - last, self.buckets)
            n = self._high
            for k in range(1, steps + 1):
                b = (last + k) % self.buckets
                expired = self._data[w, b, :n]
                # only the rows with counts in the bucket: x - 0.0 is x (a sum is never
                # -0.0), and the sums are [row, window] (a row's windows together)
                live = np.flatnonzero(expired.any(axis=1))
                if len(live):
                    self._sums[live, w, :] -= expired[live]
                    expired[live] = 0.0
            self._last[w] = cur

    def add(self, t: float, rows: IntArray, good: FloatArray, total: FloatArray) -> None:
        """Add events at time ``t``: ``good[i]``/``total[i]`` to row ``rows[i]``."""
        self.advance(t)
        if len(rows) == 0:
            return
        touched, inverse = np.unique(rows, return_inverse=True)
        acc = np.empty((len(touched), 2))
        acc[:, 0] = np.bincount(inverse, weights=good, minlength=len(touched))
        acc[:, 1] = np.bincount(inverse, weights=total, minlength=len(touched))
        n_w = len(self.windows)
        current = self._last % self.buckets  # each window's current bucket
        # every window at once, as flat positions of the C-ordered [window, bucket, row,
        # good/total] counts (one 1-D gather/scatter; each position once: rows distinct)
        base = (np.arange(n_w) * self.buckets + current) * self._data.shape[2]
        at = ((base[:, None] + touched[None, :]) * 2)[:, :, None] + _GOOD_TOTAL
        flat = self._data.reshape(-1)  # a view: zeros and concatenate give C order
        assert flat.base is self._data
        flat[at.ravel()] += np.broadcast_to(acc, (n_w, *acc.shape)).ravel()
        self._sums[touched] += acc[:, None, :]

    def bucket_counts(self, rows: Sequence[int]
                      ) -> list[dict[float, list[tuple[int, float, float]]]]:
        """Per row of ``rows``, per window length (seconds), its non-empty buckets in its
        ring: ``(bucket, good, total)``, ``bucket`` the absolute bucket index ``⌊t / (W /
        buckets)⌋`` of the events' time ``t`` (what :meth:`load` takes back). One pass per
        window over every row; Python work only per non-empty bucket."""
        out: list[dict[float, list[tuple[int, float, float]]]] = [{} for _ in rows]
        at = np.asarray(rows, dtype=np.int64)
        for w, length in enumerate(self.windows.tolist()):
            last = int(self._last[w])
            if last < 0:
                continue
            ks = np.arange(last - self.buckets + 1, last + 1)
            ring = self._data[w][ks % self.buckets][:, at]  # [bucket, row, good/total]
            for got in out:
                got[length] = []
            b, i = np.nonzero(ring.any(axis=2))
            order = np.lexsort((b, i))  # by row, then bucket (ascending time)
            b, i = b[order], i[order]
            vals = ring[b, i].tolist()
            for k, r, (g, t) in zip(ks[b].tolist(), i.tolist(), vals, strict=True):
                out[r][length].append((k, g, t))
        return out

    def load(self, row: int, length: float, counts: Sequence[tuple[int, float, float]],
             t: float) -> int:
        """Add recovered ``(bucket, good, total)`` counts (absolute bucket indices, see
        :meth:`bucket_counts`) to ``row``'s ring of the window ``length`` (seconds), after
        moving every window to time ``t``; buckets outside the ring as of ``t``, or in a
        window this store does not keep, are skipped. Returns the buckets loaded."""
        w = self.index.get(float(length))
        if w is None:
            return 0
        self.advance(t)
        last = int(self._last[w])
        loaded = 0
        for k, g, tot in counts:
            if last - self.buckets < k <= last:
                self._data[w, k % self.buckets, row] += (g, tot)
                self._sums[row, w] += (g, tot)
                loaded += 1
        return loaded

    def sums(self) -> FloatArray:
        """``[rows, windows, 2]`` good/total sums (a view: copy before keeping it; a
        released row reads 0)."""
        return self._sums[: self._high]

    def row_bytes(self) -> int:
        """Bytes of one row's counts (every window's ring and sums)."""
        return int(self._data[:, :, :1].nbytes + self._sums[:1].nbytes)

    def nbytes(self) -> int:
        """Memory held by the counts of the rows allocated so far, in bytes (reserved
        rows never used are not counted: see the module doc)."""
        return self._high * self.row_bytes()
