"""How every call of the Triton clients is bounded, and the worker threads that keep to
the bounds.

A run is bounded twice, by a request count and by a duration (and can be stopped by an
event); it only targets loopback addresses. `Run` hands out request indices and collects
outcomes; `run_workers` runs one worker per client thread and re-raises a worker's crash.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable

from fleetwatch.clients.triton.results import MAX_ERRORS_KEPT, LoadResult

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_DURATION_S",
    "MAX_REQUESTS",
    "Run",
    "check_bounds",
    "loopback_address",
    "run_workers",
]

#: Hard upper bounds of one call.
MAX_REQUESTS = 100_000
MAX_CONCURRENCY = 64
MAX_DURATION_S = 24 * 3600.0


def loopback_address(address: str) -> str:
    """Return ``host:port`` from ``address`` (``[http://]host:port``) if the host is loopback.

    Raises:
        ValueError: no port, or the host is not a loopback address.
    """
    target = address.split("://", 1)[1] if "://" in address else address
    target = target.rstrip("/")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected host:port, got {address!r}")
    bare = host.strip("[]")
    try:
        loopback = bare == "localhost" or ipaddress.ip_address(bare).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"load is only sent to loopback addresses, not {host!r}")
    return target


def check_bounds(requests: int, concurrency: int, max_duration_s: float, timeout_s: float) -> None:
    if not 0 <= requests <= MAX_REQUESTS:
        raise ValueError(f"requests must be in [0, {MAX_REQUESTS}], got {requests}")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be in [1, {MAX_CONCURRENCY}], got {concurrency}")
    if not 0 < max_duration_s <= MAX_DURATION_S:
        raise ValueError(f"max_duration_s must be in (0, {MAX_DURATION_S:g}], got {max_duration_s}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")


class Run:
    """Shared state of one load run: hands out request indices and collects outcomes."""

    def __init__(
        self,
        result: LoadResult,
        requests: int,
        max_duration_s: float,
        stop_event: threading.Event | None,
    ) -> None:
        self.result = result
        self.requests = requests
        self.deadline = time.monotonic() + max_duration_s
        self.stop_event = stop_event
        self._next = 0
        self._lock = threading.Lock()

    def claim(self) -> int | None:
        """The next request index, or None when the count, the deadline or the event says stop."""
        with self._lock:
            if self._next >= self.requests or time.monotonic() >= self.deadline:
                return None
            if self.stop_event is not None and self.stop_event.is_set():
                return None
            index = self._next
            self._next += 1
            self.result.sent += 1
            return index

    def success(self, latency_s: float, first_s: float | None = None, responses: int = 0) -> None:
        with self._lock:
            self.result.succeeded += 1
            self.result.latencies_s.append(latency_s)
            if first_s is not None:
                self.result.first_response_s.append(first_s)
            self.result.responses += responses

    def failure(self, message: str, first_s: float | None = None, responses: int = 0) -> None:
        with self._lock:
            self.result.failed += 1
            if first_s is not None:
                self.result.first_response_s.append(first_s)
            self.result.responses += responses
            if len(self.result.errors) < MAX_ERRORS_KEPT:
                self.result.errors.append(message)


def run_workers(run: Run, concurrency: int, worker: Callable[[Run], None]) -> LoadResult:
    started = time.monotonic()
    crashes: list[BaseException] = []

    def guarded() -> None:
        try:
            worker(run)
        except BaseException as error:  # re-raised below, in the caller's thread
            crashes.append(error)

    threads = [
        threading.Thread(target=guarded, name=f"fleetwatch-load-{i}", daemon=True)
        for i in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.result.duration_s = time.monotonic() - started
    if crashes:
        raise crashes[0]
    return run.result
