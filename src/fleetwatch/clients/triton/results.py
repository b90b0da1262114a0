"""What a bounded run of Triton requests reports: `LoadResult`."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MAX_ERRORS_KEPT", "LoadResult"]

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
