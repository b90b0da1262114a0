"""The load a request saw, from the spans themselves: the mean number of requests of its
model in the system during its lifetime.

For a request *i* with lifetime ``[s_i, e_i]`` (Unix seconds) and every request *j* of
the same model (itself included) with occupancy ``[a_j, b_j]``
(:attr:`~fleetwatch.traces.facts.RequestFacts.occupancy`)::

    L_i = Σ_j |[a_j, b_j] ∩ [s_i, e_i]| / (e_i − s_i)

— the time average of the in-system count over *i*'s lifetime. It is the quantity the
metric path estimates per interval (:func:`fleetwatch.slo.account.concurrency.estimate_columns`):
Little's law Σ request durations ÷ Δt over the scrape interval for Triton (occupancy =
REQUEST_START → REQUEST_END) and the mean of ``vllm:num_requests_running`` for vLLM
(occupancy = the running part, after the queue), here over the request's own lifetime
instead of the scrape interval, so trace-based and metric-based events of a model land in
the same concurrency bands. (A zero-length lifetime counts the occupancies containing
its instant.)

Requests *j* are known only once their spans arrive, so a request is **settled** — its
``L_i`` computed — ``settle_s`` seconds after it reached the estimator (default 5 s):
requests overlapping it that finish later than that are missed (undercount only for
requests overlapping a longer one). Memory: the occupancies of the last ``horizon_s``
seconds (engine clock, default 600 s; a request longer than that sees less), at most
``max_intervals`` per model (default 50 000; the oldest go first) and at most
``max_total_intervals`` over all models (default 200 000: each of *n* models keeps at
most that ÷ *n*), and at most ``max_waiting`` requests waiting to settle (default
100 000: beyond it the oldest settle at once).

Cost: ``L_i`` is computed in O(log n) from sorted ends and starts with their prefix sums
(rebuilt once per :meth:`LoadEstimator.add` for the models it touched), not by reading
every occupancy that overlaps *i*: a flood of one model's overlapping requests would make
that quadratic. With ``o`` the origin of a model's prefix sums (its earliest kept start,
so that sums of Unix times keep their precision)::

    Σ_j |[a_j, b_j] ∩ [s, e]| = Σ_{b_j > s} min(b_j, e) − Σ_{b_j > s} clamp(a_j, s, e)

and, since ``a_j ≤ b_j``, ``Σ_{b_j > s} clamp(a_j, s, e) = Σ_j clamp(a_j, s, e) −
s · #{b_j ≤ s}``; each sum over a sorted array is two bisections and a prefix-sum
difference.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from itertools import accumulate

from fleetwatch.slo.state import ModelKey
from fleetwatch.traces.facts import RequestFacts


def _key(f: RequestFacts) -> ModelKey:
    return ModelKey(f.model, f.model_version, f.backend)


@dataclass(slots=True)
class _Sums:
    """One model's occupancies as sorted arrays with prefix sums, relative to ``origin``
    (seconds): ``ends`` and ``starts`` sorted, ``end_sums[k]`` / ``start_sums[k]`` the sum
    of their first ``k`` values."""

    origin: float = 0.0
    ends: list[float] = field(default_factory=list)
    end_sums: list[float] = field(default_factory=lambda: [0.0])
    starts: list[float] = field(default_factory=list)
    start_sums: list[float] = field(default_factory=lambda: [0.0])

    @classmethod
    def of(cls, occ: list[tuple[float, float]]) -> _Sums:
        """The arrays of ``occ`` (``(end, start)`` pairs sorted by end)."""
        if not occ:
            return cls()
        origin = min(a for _b, a in occ)
        ends = [b - origin for b, _a in occ]
        starts = sorted(a - origin for _b, a in occ)
        return cls(origin, ends, list(accumulate(ends, initial=0.0)), starts,
                   list(accumulate(starts, initial=0.0)))

    def overlap(self, s: float, e: float) -> float:
        """Σ_j |[a_j, b_j] ∩ [s, e]| (seconds; ``s < e``, Unix seconds)."""
        s, e = s - self.origin, e - self.origin
        n = len(self.ends)
        lo, hi = bisect.bisect_right(self.ends, s), bisect.bisect_left(self.ends, e)
        ends_part = self.end_sums[hi] - self.end_sums[lo] + e * (n - hi)
        slo, shi = bisect.bisect_right(self.starts, s), bisect.bisect_left(self.starts, e)
        clamped = s * slo + self.start_sums[shi] - self.start_sums[slo] + e * (n - shi)
        return ends_part - (clamped - s * lo)

    def containing(self, t: float) -> int:
        """#{j: a_j ≤ t ≤ b_j} (``t`` Unix seconds)."""
        t -= self.origin
        return (len(self.ends) - bisect.bisect_left(self.ends, t)) - (
            len(self.starts) - bisect.bisect_right(self.starts, t))


class LoadEstimator:
    """Estimates :attr:`RequestFacts.concurrency` (see module docstring)."""

    def __init__(self, settle_s: float = 5.0, horizon_s: float = 600.0,
                 max_intervals: int = 50_000, max_total_intervals: int = 200_000,
                 max_waiting: int = 100_000) -> None:
        self.settle_s = settle_s
        self.horizon_s = horizon_s
        self.max_intervals = max_intervals
        self.max_total_intervals = max_total_intervals
        self.max_waiting = max_waiting
        # per model: occupancies sorted by end (ends, and (end, start) pairs)
        self._ends: dict[ModelKey, list[float]] = {}
        self._occ: dict[ModelKey, list[tuple[float, float]]] = {}
        self._waiting: deque[tuple[float, RequestFacts]] = deque()
        self._seen: dict[ModelKey, float] = {}  # per model: when its last request came
        self._total = 0  # occupancies kept, over all models
        self._sums: dict[ModelKey, _Sums] = {}  # per model, as of its occupancies now

    def add(self, facts: list[RequestFacts], now: float) -> list[RequestFacts]:
        """Record finished requests (``now``: the caller's Unix seconds); return the
        requests settled by ``now``, their ``concurrency`` set."""
        touched: set[ModelKey] = set()
        for f in facts:
            k = _key(f)
            touched.add(k)
            self._total += 1
            ends = self._ends.setdefault(k, [])
            occ = self._occ.setdefault(k, [])
            self._seen[k] = now
            a, b = f.occupancy
            i = bisect.bisect_right(ends, b)
            ends.insert(i, b)
            occ.insert(i, (b, a))
            self._waiting.append((now, f))
        for k in touched:
            self._sums.pop(k, None)  # rebuilt at the first settle that reads it
        out: list[RequestFacts] = []
        while self._waiting and (now - self._waiting[0][0] >= self.settle_s
                                 or len(self._waiting) > self.max_waiting):
            out.append(self._settle(self._waiting.popleft()[1]))
        self._prune(touched)
        return out

    def flush(self) -> list[RequestFacts]:
        """Settle every waiting request (offline reading: every request is known)."""
        out = [self._settle(f) for _, f in self._waiting]
        self._waiting.clear()
        return out

    def _settle(self, f: RequestFacts) -> RequestFacts:
        k = _key(f)
        sums = self._sums.get(k)
        if sums is None:
            sums = self._sums[k] = _Sums.of(self._occ.get(k, []))
        s, e = f.start_unix_s, f.end_unix_s
        if e > s:
            f.concurrency = max(0.0, sums.overlap(s, e)) / (e - s)
        else:
            f.concurrency = float(sums.containing(s))
        return f

    def _prune(self, touched: set[ModelKey]) -> None:
        """Cut the models just added to (all of them once the total is over its bound)
        to the horizon and the per-model bound."""
        per_model = min(self.max_intervals,
                        max(1, self.max_total_intervals // max(1, len(self._ends))))
        keys = list(self._ends) if self._total > self.max_total_intervals else touched
        for k in keys:
            ends = self._ends[k]
            if not ends:
                continue
            cut = bisect.bisect_left(ends, ends[-1] - self.horizon_s)
            cut = max(cut, len(ends) - per_model)
            if cut > 0:
                del ends[:cut]
                del self._occ[k][:cut]
                self._total -= cut
                self._sums.pop(k, None)

    def forget(self, horizon: float) -> None:
        """Drop the models whose last request came before ``horizon`` (the caller's Unix
        seconds, as ``add``'s ``now``) and that have no request waiting to settle."""
        waiting = {_key(f) for _, f in self._waiting}
        for k in [k for k, t in self._seen.items() if t < horizon and k not in waiting]:
            self._total -= len(self._ends[k])
            del self._ends[k], self._occ[k], self._seen[k]
            self._sums.pop(k, None)

    @property
    def intervals(self) -> int:
        """Occupancies kept, over all models (≤ ``max_total_intervals`` after an add)."""
        return self._total

    @property
    def models(self) -> int:
        """Models whose occupancies are kept."""
        return len(self._ends)
