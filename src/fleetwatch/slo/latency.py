"""Latency against concurrency, per band: the evidence of the capacity model.

For a latency SLI the engine attributes each interval's histogram bucket deltas to the
interval's concurrency band (as it attributes the SLI's events), into a
:class:`BandLatency` per (SLO, model, band): an exponentially weighted histogram whose
time constant is the capacity window (``capacity.window``), with the events-weighted
mean concurrency of those intervals. From it:

* :meth:`BandLatency.quantile` — the latency quantile the objective implies (p99 for
  99 %), interpolated linearly inside the bucket as Prometheus' ``histogram_quantile``
  does; a rank in the ``+Inf`` bucket answers the highest finite bound (a lower bound of
  the true quantile, as Prometheus does);
* :func:`predict` — the concurrency at which that quantile reaches the SLI's threshold:
  a monotone (isotonic, pool-adjacent-violators) fit of quantile against concurrency,
  with a queueing form when the engine's batch limit is known (latency stays at its
  service time while requests find a free slot, then grows with the requests waiting
  beyond the limit: a flat segment up to the batch limit, then linear), and linear
  interpolation between the last point below the threshold and the first above it.

Units: seconds for latency, requests (per replica) for concurrency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: The weights grow as exp(t / τ) instead of decaying (one multiply per add); they are
#: renormalized when the exponent passes this.
_RENORM = 50.0


@dataclass
class BandLatency:
    """Exponentially weighted latency histogram of one (SLO, model, band).

    ``buckets``: upper bound ``le`` (seconds) → weighted cumulative count; ``count``:
    weighted observations; ``conc``: weighted Σ concurrency × observations (requests);
    all scaled by ``exp((t − origin) / τ)`` (see :meth:`weight`).
    """

    origin: float
    buckets: dict[float, float] = field(default_factory=dict)
    count: float = 0.0
    conc: float = 0.0
    last: float = 0.0
    # the bucket bounds ascending and the highest finite one (None: recompute)
    _sorted: tuple[list[float], float | None] | None = field(default=None, repr=False,
                                                            compare=False)
    # the last quantile asked for and its answer (cleared by add)
    _quantile: tuple[float, float | None] | None = field(default=None, repr=False,
                                                         compare=False)

    def add(self, ts: float, tau: float, buckets: dict[float, float], count: float,
            concurrency: float) -> None:
        """Add one interval ending at ``ts`` (Unix seconds): its bucket deltas, its
        observation count and its concurrency; ``tau`` is the time constant (seconds)."""
        if count <= 0:
            return
        x = (ts - self.origin) / tau
        if x > _RENORM:  # rescale everything to a new origin
            f = math.exp(-x)
            self.buckets = {le: c * f for le, c in self.buckets.items()}
            self.count *= f
            self.conc *= f
            self.origin, x = ts, 0.0
        w = math.exp(x)
        self._quantile = None
        b = self.buckets
        n = len(b)
        for le, c in buckets.items():
            b[le] = b.get(le, 0.0) + c * w
        if len(b) != n:
            self._sorted = None
        self.count += count * w
        self.conc += concurrency * count * w
        self.last = ts

    def concurrency(self) -> float | None:
        """Observation-weighted mean concurrency of the band's intervals (requests)."""
        return self.conc / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0–1) in seconds, ``histogram_quantile``-style; None without
        observations."""
        cached = self._quantile
        if cached is not None and cached[0] == q:
            return cached[1]
        answer = self._quantile_of(q)
        self._quantile = (q, answer)
        return answer

    def _quantile_of(self, q: float) -> float | None:
        if self.count <= 0 or not self.buckets:
            return None
        if self._sorted is None:
            ordered = sorted(self.buckets)
            finite = [b for b in ordered if not math.isinf(b)]
            self._sorted = (ordered, finite[-1] if finite else None)
        bounds, top = self._sorted
        total = self.buckets.get(math.inf, self.count)
        if total <= 0:
            return None
        rank = q * total
        lower, below = 0.0, 0.0
        for le in bounds:
            cum = self.buckets[le]
            if cum >= rank:
                if math.isinf(le):
                    return top
                if cum <= below:
                    return le
                return lower + (le - lower) * (rank - below) / (cum - below)
            lower, below = le, cum
        return top


def isotonic(ys: list[float]) -> list[float]:
    """Non-decreasing least-squares fit of ``ys`` (pool adjacent violators, equal
    weights)."""
    blocks: list[list[float]] = []  # [sum, n]
    for y in ys:
        blocks.append([y, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
    out: list[float] = []
    for s, n in blocks:
        out.extend([s / n] * int(n))
    return out


def predict(points: list[tuple[float, float]], threshold: float,
            batch_limit: float | None = None) -> float | None:
    """The concurrency (requests) at which the latency quantile reaches ``threshold``
    (seconds), from ``(concurrency, quantile)`` points of trusted bands; None when the
    fit does not cross the threshold above its first point (no crossing, or the lowest
    point already above it: that is a regression, not a capacity).

    With ``batch_limit`` (the engine's concurrent-slot limit, e.g. vLLM's
    ``--max-num-seqs`` observed as the running gauge while requests wait) and points on
    both sides of it, the fit is the queueing form: the quantile of the points up to the
    limit holds until the limit, then grows linearly to the points beyond it.
    """
    pts = sorted((x, y) for x, y in points if x == x and y == y)
    if not pts:
        return None
    xs = [x for x, _ in pts]
    ys = isotonic([y for _, y in pts])
    if (batch_limit is not None and xs[0] < batch_limit < xs[-1]
            and not any(math.isclose(x, batch_limit) for x in xs)):
        k = next(i for i, x in enumerate(xs) if x > batch_limit)
        xs.insert(k, batch_limit)
        ys.insert(k, ys[k - 1])
    if ys[0] > threshold:
        return None
    for i in range(1, len(xs)):
        if ys[i] > threshold:
            x0, y0, x1, y1 = xs[i - 1], ys[i - 1], xs[i], ys[i]
            return x0 + (threshold - y0) * (x1 - x0) / (y1 - y0)
    return None


def round_capacity(x: float) -> float:
    """Capacity is continuous, rounded to 3 significant digits (so that an estimate
    that only jitters in its noise does not read as a new one)."""
    if x <= 0 or not math.isfinite(x):
        return x
    return float(f"{x:.3g}")
