"""The capacity model's fit: the concurrency at which a latency quantile reaches the
threshold, for many (SLO, model) at once.

Input per (SLO, model): ``(concurrency, latency quantile)`` points of its trusted bands
(:mod:`fleetwatch.slo.capacity.evidence`: the band's mean concurrency and the quantile its objective
implies, e.g. p99 for 99 %). :func:`predict_rows` fits quantile against concurrency with
a monotone (isotonic, pool-adjacent-violators) fit and, when the engine's batch limit is
known, a queueing form (latency stays at its service time while requests find a free
slot, then grows with the requests waiting beyond the limit: a flat segment up to the
batch limit, then linear), and interpolates linearly between the last point below the
threshold and the first above it — one vectorized pass over every row, a loop only over
point positions (≤ the number of bands). :func:`isotonic` and :func:`predict` are the
same for one list of points. (:class:`~fleetwatch.slo.capacity.evidence.BandLatency`, the per-band
evidence, is importable from here as before.)

Units: seconds for latency, requests (per replica) for concurrency.
"""

from __future__ import annotations

import math

import numpy as np

from fleetwatch.slo.arrays import BoolArray, FloatArray, IntArray
from fleetwatch.slo.capacity.evidence import BandLatency

__all__ = ["BandLatency", "isotonic", "isotonic_rows", "predict", "predict_rows",
           "round_capacity"]



def isotonic_rows(ys: FloatArray, m: IntArray) -> FloatArray:
    """Non-decreasing least-squares fit (pool adjacent violators, equal weights) of the
    first ``m[i]`` values of each row ``ys[i]`` (``[rows, points]``); the other entries
    of the answer are 0. The blocks pool in the order a left-to-right stack pools them
    (the same floating-point sums as :func:`isotonic`)."""
    s, k = ys.shape
    sums = np.zeros((s, k))
    counts = np.zeros((s, k))
    depth = np.zeros(s, dtype=np.int64)
    for j in range(k):
        act = (j < m).nonzero()[0]
        if not len(act):
            break
        sums[act, depth[act]] = ys[act, j]
        counts[act, depth[act]] = 1.0
        depth[act] += 1
        while True:
            r = act[depth[act] > 1]
            if not len(r):
                break
            d = depth[r]
            a, b = d - 2, d - 1
            merge = sums[r, a] / counts[r, a] > sums[r, b] / counts[r, b]
            if not merge.any():
                break
            r, a, b = r[merge], a[merge], b[merge]
            sums[r, a] += sums[r, b]
            counts[r, a] += counts[r, b]
            sums[r, b] = counts[r, b] = 0.0
            depth[r] -= 1
            act = r
    ends = np.cumsum(counts, axis=1)  # block b covers positions ends[b-1] … ends[b]-1
    pos = np.arange(k, dtype=float)
    block = (ends[:, None, :] <= pos[None, :, None]).sum(axis=2)  # [rows, positions]
    block = np.minimum(block, k - 1)
    rows = np.arange(s)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        fitted = sums[rows, block] / counts[rows, block]
    return np.where(pos[None, :] < m[:, None], fitted, 0.0)


def predict_rows(xs: FloatArray, ys: FloatArray, valid: BoolArray,
                 threshold: FloatArray, batch_limit: FloatArray) -> FloatArray:
    """Per row the concurrency (requests) at which the latency quantile reaches
    ``threshold[i]`` (seconds), from the points ``(xs[i, k], ys[i, k])`` where
    ``valid[i, k]`` (``[rows, points]``, any order; NaN coordinates are left out);
    NaN when the fit does not cross the threshold above its first point (no crossing,
    or the lowest point already above it: that is a regression, not a capacity).

    ``batch_limit[i]`` (NaN: unknown) is the engine's concurrent-slot limit (e.g.
    vLLM's ``--max-num-seqs`` observed as the running gauge while requests wait); with
    points on both sides of it (none within 1e-9 relative of it) the fit is the
    queueing form: the fitted quantile of the points up to the limit holds until the
    limit, then grows linearly to the points beyond it."""
    s, k = xs.shape
    if s == 0 or k == 0:
        return np.full(s, np.nan)
    ok = valid & (xs == xs) & (ys == ys)
    inf = math.inf
    order = np.lexsort((np.where(ok, ys, inf), np.where(ok, xs, inf), ~ok), axis=-1)
    rows = np.arange(s)[:, None]
    x, m = np.where(ok, xs, inf)[rows, order], ok.sum(axis=1)
    y = isotonic_rows(np.where(ok, ys, 0.0)[rows, order], m)
    # the queueing form: the batch limit inserted at the first point beyond it
    last_x = x[np.arange(s), np.maximum(m - 1, 0)]
    pos = np.arange(k)[None, :]
    live = pos < m[:, None]
    bl = batch_limit[:, None]
    diff = np.abs(x - bl)
    close = live & ((diff <= np.abs(1e-9 * bl)) | (diff <= np.abs(1e-9 * x)) | (x == bl))
    with np.errstate(invalid="ignore"):
        ins = (m > 0) & (x[:, 0] < batch_limit) & (batch_limit < last_x) & ~close.any(axis=1)
    at = np.where(ins, (live & (x > bl)).argmax(axis=1), k + 1)  # inserted position
    src = np.arange(k + 1)[None, :] - (np.arange(k + 1)[None, :] > at[:, None])
    src = np.clip(src, 0, k - 1)
    x2, y2 = x[rows, src], y[rows, src]
    here = np.arange(k + 1)[None, :] == at[:, None]
    x2 = np.where(here, bl, x2)
    y2 = np.where(here, y[rows, np.clip(at - 1, 0, k - 1)[:, None]], y2)
    m2 = m + ins
    thr = threshold[:, None]
    live2 = np.arange(k + 1)[None, :] < m2[:, None]
    above = live2 & (y2 > thr) & (np.arange(k + 1)[None, :] >= 1)
    found = above.any(axis=1) & (m2 > 0) & ~(y2[:, 0] > threshold)
    i = above.argmax(axis=1)
    r = np.arange(s)
    x0, y0 = x2[r, np.maximum(i - 1, 0)], y2[r, np.maximum(i - 1, 0)]
    x1, y1 = x2[r, i], y2[r, i]
    with np.errstate(divide="ignore", invalid="ignore"):
        pred = x0 + (threshold - y0) * (x1 - x0) / (y1 - y0)
    return np.where(found, pred, np.nan)


def isotonic(ys: list[float]) -> list[float]:
    """Non-decreasing least-squares fit of ``ys`` (pool adjacent violators, equal
    weights): :func:`isotonic_rows` of one row."""
    if not ys:
        return []
    fitted: list[float] = isotonic_rows(np.asarray([ys], dtype=float),
                                        np.asarray([len(ys)]))[0].tolist()
    return fitted


def predict(points: list[tuple[float, float]], threshold: float,
            batch_limit: float | None = None) -> float | None:
    """:func:`predict_rows` of one list of ``(concurrency, quantile)`` points (requests,
    seconds); None where it answers NaN."""
    if not points:
        return None
    xs = np.asarray([[float(x) for x, _ in points]])
    ys = np.asarray([[float(y) for _, y in points]])
    got = float(predict_rows(xs, ys, np.ones(xs.shape, dtype=bool), np.asarray([threshold]),
                             np.asarray([math.nan if batch_limit is None else batch_limit]))[0])
    return None if got != got else got


def round_capacity(x: float) -> float:
    """Capacity is continuous, rounded to 3 significant digits (so that an estimate
    that only jitters in its noise does not read as a new one)."""
    if x <= 0 or not math.isfinite(x):
        return x
    return float(f"{x:.3g}")
