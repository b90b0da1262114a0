"""What a load run reports: `LoadResult` (one bounded run) and `StepResult` (one concurrency
step of `fleetwatch.demo.load.step_load`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MAX_ERRORS_KEPT", "LoadResult", "StepResult"]

#: How many error messages a result keeps.
MAX_ERRORS_KEPT = 20


@dataclass
class LoadResult:
    """What one load run did.

    Attributes:
        model: the model name.
        protocol: ``"http"``, ``"grpc"`` or ``"grpc-stream"``.
        model_version: the version asked for ("" = Triton's default policy).
        sent: requests sent.
        succeeded: requests that completed without error (streams: reached the final flag).
        failed: requests that ended with an error or a client timeout.
        latencies_s: end-to-end latency of each succeeded request, in seconds, in completion
            order (streams: until the final flag).
        first_response_s: streams only: time to the first non-empty response of each request
            that got one, in seconds.
        responses: streams only: non-empty responses received.
        errors: the first error messages (at most 20 kept).
        duration_s: wall-clock duration of the run, in seconds.
    """

    model: str
    protocol: str
    model_version: str = ""
    sent: int = 0
    succeeded: int = 0
    failed: int = 0
    latencies_s: list[float] = field(default_factory=list)
    first_response_s: list[float] = field(default_factory=list)
    responses: int = 0
    errors: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    def merge(self, other: LoadResult) -> LoadResult:
        """Add ``other``'s counts, latencies and duration into this result; return self."""
        self.sent += other.sent
        self.succeeded += other.succeeded
        self.failed += other.failed
        self.latencies_s.extend(other.latencies_s)
        self.first_response_s.extend(other.first_response_s)
        self.responses += other.responses
        room = MAX_ERRORS_KEPT - len(self.errors)
        self.errors.extend(other.errors[: max(room, 0)])
        self.duration_s += other.duration_s
        return self


@dataclass
class StepResult:
    """One concurrency step of `step_load`.

    Attributes:
        concurrency: the number of closed-loop clients held during the step.
        t_start: wall-clock time the step started, in seconds since the Unix epoch.
        t_end: wall-clock time the step ended (its last request completed), same clock.
        requests: requests that succeeded.
        failed: requests that ended with an error or a client timeout.
        latencies_s: client-side latency of each succeeded request, in seconds, in completion
            order.
        errors: the first error messages (at most 20 kept).
    """

    concurrency: int
    t_start: float
    t_end: float
    requests: int = 0
    failed: int = 0
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """``t_end - t_start``, in seconds."""
        return self.t_end - self.t_start

    @property
    def throughput_rps(self) -> float:
        """Succeeded requests per second of the step (0.0 for an empty step)."""
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of `latencies_s` (linear interpolation); NaN when there are none."""
        if not self.latencies_s:
            return math.nan
        return float(np.quantile(self.latencies_s, q))

    @property
    def mean_s(self) -> float:
        """Mean client latency, in seconds; NaN when no request succeeded."""
        return float(np.mean(self.latencies_s)) if self.latencies_s else math.nan

    @property
    def p50_s(self) -> float:
        """Median client latency, in seconds."""
        return self.quantile(0.5)

    @property
    def p99_s(self) -> float:
        """99th percentile of client latency, in seconds."""
        return self.quantile(0.99)
