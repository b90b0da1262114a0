"""Burst headroom of the autoscaling signal: demand's recent variability, kept through lulls.

The held signal (:class:`~fleetwatch.slo.outputs.autoscaling.SignalHold`) keeps the peak
of the last cold start: what the last burst needed. A replica that was removed in the
lull after it takes one cold start to return, so a burst that arrives after a lull
longer than one cold start meets the fleet sized for the lull. Bursty traffic repeats
such bursts within minutes; the demand's *variability* over a longer window says how
large the next one is likely to be, even while the last cold start was quiet.

The headroom is a safety-stock rule on the concurrency component ``x`` (requests in the
system ÷ capacity at SLO, in replicas' worth of load) sampled once per signal update
over the last ``window`` seconds:

    headroom = min(max(x), mean(x) + z · stddev(x))

with ``z`` the one-sided standard normal quantile of 99 % (2.326,
``statistics.NormalDist().inv_cdf(0.99)``). It is the square-root staffing rule of
queueing theory in its general form — servers = offered load + β · its standard
deviation, where for Poisson arrivals the standard deviation is √(offered load)
(Halfin and Whitt, "Heavy-traffic limits for queues with many exponential servers",
Operations Research 29(3), 1981; Whitt, "Understanding the efficiency of multi-server
service systems", Management Science 38(5), 1992) — with the standard deviation measured
rather than assumed Poisson, because production LLM traffic is far burstier than
Poisson. The peak of the window caps it: the rule never asks for more than the window
saw. With constant load the standard deviation is 0 and the headroom is the load itself.

Why the concurrency component only: requests in the system add up over the replicas
(Σ over the sidecars is the fleet's demand), so the replicas' headrooms add up to the
fleet's, where a queue-wait or KV ratio does not. Per replica the standard deviations
add up to the fleet's as long as the balancer spreads the load evenly (correlated
replicas), which least-connections does.

The window (the SLO file's ``autoscaling.headroom_window``, by default
:data:`HEADROOM_WINDOW_SECONDS`, 300 s) is Kubernetes' default scale-down stabilization
window: the HPA already keeps the largest recommendation of that window
before it scales in, so the headroom only asks it to remember the demand's spread over
the same time, not a longer one. Bounded: at most :data:`MAX_SAMPLES` samples (an update
at the time of the last one replaces it).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from statistics import NormalDist

__all__ = ["HEADROOM_WINDOW_SECONDS", "HEADROOM_Z", "MAX_SAMPLES", "BurstHeadroom",
           "headroom_seconds"]

#: The headroom's default window (seconds): Kubernetes' default scale-down stabilization
#: window (the default of ``autoscaling.headroom_window``).
HEADROOM_WINDOW_SECONDS = 300.0
#: One-sided standard normal quantile of 99 %: the share of intervals the headroom covers.
HEADROOM_Z = NormalDist().inv_cdf(0.99)
#: Samples kept at most per model (the window at the sidecar's 5 s interval holds 60; a scrape
#: interval under 1.25 s shortens the window to its last 240 samples).
MAX_SAMPLES = 240


def headroom_seconds(window: float, cold_start: float | None) -> float:
    """The headroom's window (seconds): ``window`` (``autoscaling.headroom_window``) once
    a cold start is measured, 0 (no headroom) before — as for the hold, a replica that
    comes up at once needs no demand kept for it."""
    return window if cold_start is not None and cold_start > 0 else 0.0


@dataclass(slots=True)
class BurstHeadroom:
    """Mean + z · standard deviation of the samples of the last ``window`` seconds,
    capped by their peak (see the module docstring). ``window`` 0: no headroom (0.0)."""

    window: float
    z: float = HEADROOM_Z
    _samples: deque[tuple[float, float]] = field(default_factory=deque)
    _peaks: deque[tuple[float, float]] = field(default_factory=deque)
    _sum: float = 0.0
    _sumsq: float = 0.0
    _drops: int = 0

    def update(self, now: float, x: float) -> float:
        """Add sample ``x`` (replicas' worth of load, finite, ≥ 0) at ``now`` (seconds;
        samples at or after ``now`` are replaced, so a clock set back forgets the samples
        it has not reached again); the headroom of the window (0.0 with a window of 0 or
        a non-finite sample, which is not kept)."""
        if self.window <= 0 or not math.isfinite(x):
            return 0.0
        samples, peaks = self._samples, self._peaks
        while samples and samples[-1][0] >= now:  # the same interval again, or a clock
            self._drop(samples.pop()[1])           # set back: the later samples go
        samples.append((now, x))
        self._sum += x
        self._sumsq += x * x
        while len(samples) > MAX_SAMPLES or samples[0][0] <= now - self.window:
            self._drop(samples.popleft()[1])
        while peaks and (peaks[-1][1] <= x or peaks[-1][0] >= now):
            peaks.pop()
        peaks.append((now, x))
        while peaks[0][0] < samples[0][0]:
            peaks.popleft()
        n = len(samples)
        mean = self._sum / n
        sd = math.sqrt(max(0.0, self._sumsq / n - mean * mean))
        return min(peaks[0][1], mean + self.z * sd)

    def _drop(self, x: float) -> None:
        """Take ``x`` out of the running sums; re-sum them exactly every
        :data:`MAX_SAMPLES` drops, so rounding never accumulates."""
        self._sum -= x
        self._sumsq -= x * x
        self._drops += 1
        if self._drops >= MAX_SAMPLES:
            self._drops = 0
            self._sum = sum(v for _, v in self._samples)
            self._sumsq = sum(v * v for _, v in self._samples)
