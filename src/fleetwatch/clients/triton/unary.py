"""Unary inference requests over HTTP (``tritonclient.http``) or gRPC (``tritonclient.grpc``),
one client per worker thread."""

from __future__ import annotations

import threading
import time
from typing import Any, Literal

from fleetwatch.clients.triton.bounds import Run, check_bounds, loopback_address, run_workers
from fleetwatch.clients.triton.results import LoadResult
from fleetwatch.clients.triton.tensors import InputFactory, infer_inputs

__all__ = ["Protocol", "send_requests"]

Protocol = Literal["http", "grpc"]


def send_requests(
    address: str,
    model: str,
    *,
    protocol: Protocol = "http",
    inputs: InputFactory,
    requests: int = 100,
    concurrency: int = 1,
    max_duration_s: float = 30.0,
    model_version: str = "",
    timeout_s: float = 10.0,
    stop_event: threading.Event | None = None,
) -> LoadResult:
    """Send up to ``requests`` unary inference requests with ``concurrency`` parallel clients.

    Many parameters: each bound of a run is its own keyword-only option with a default; a
    caller names the few it sets.

    Stops early when ``max_duration_s`` seconds have passed or ``stop_event`` is set; a request
    in flight then still gets up to ``timeout_s`` seconds. So the call returns within about
    ``max_duration_s + timeout_s`` seconds.

    Args:
        address: ``host:port`` of Triton's HTTP or gRPC endpoint (an ``http://`` prefix is
            accepted); the host must be loopback.
        model: the model name.
        protocol: ``"http"`` (tritonclient.http) or ``"grpc"`` (tritonclient.grpc).
        inputs: builds request ``i``'s tensors (the demo models': `fleetwatch.demo.load`).
        requests: how many requests at most (0 … `MAX_REQUESTS`).
        concurrency: parallel clients, each with one request in flight (1 … `MAX_CONCURRENCY`).
        max_duration_s: stop sending after this many seconds.
        model_version: the version to ask for ("" = Triton's version policy, i.e. the latest).
        timeout_s: per-request client timeout, in seconds.
        stop_event: stop sending when set.

    Returns:
        The `LoadResult`; requests that errored (including server-side exceptions and client
        timeouts) count as ``failed``.

    Raises:
        ValueError: a non-loopback address, an unknown protocol or a bound out of range.
    """
    target = loopback_address(address)
    check_bounds(requests, concurrency, max_duration_s, timeout_s)
    if protocol not in ("http", "grpc"):
        raise ValueError(f"protocol must be 'http' or 'grpc', got {protocol!r}")
    run = Run(LoadResult(model, protocol, model_version), requests, max_duration_s, stop_event)

    def worker(run: Run) -> None:
        if protocol == "http":
            import tritonclient.http as module

            client: Any = module.InferenceServerClient(
                target, connection_timeout=timeout_s, network_timeout=timeout_s
            )
            timeout_kwargs: dict[str, Any] = {}
        else:
            import tritonclient.grpc as module

            client = module.InferenceServerClient(target)
            timeout_kwargs = {"client_timeout": timeout_s}
        try:
            while (index := run.claim()) is not None:
                tensors = infer_inputs(module, inputs(index))
                started = time.perf_counter()
                try:
                    client.infer(model, tensors, model_version=model_version, **timeout_kwargs)
                except Exception as error:  # server errors, timeouts, connection errors
                    run.failure(f"{type(error).__name__}: {error}")
                else:
                    run.success(time.perf_counter() - started)
        finally:
            client.close()
            if protocol == "http":
                release_thread_hub()

    return run_workers(run, concurrency, worker)


def release_thread_hub() -> None:
    """Destroy the calling thread's gevent hub (call when the thread is done with
    ``tritonclient.http``).

    ``tritonclient.http`` runs on gevent (``geventhttpclient``), which gives each thread
    that uses it a hub — a libev loop holding an epoll and an eventfd descriptor, and a
    resolver thread — that outlives the thread. A load that starts its workers anew each
    round (the demo's, for hours) would otherwise hold two more descriptors and one more
    thread per worker and round, without bound."""
    import gevent

    gevent.get_hub().destroy(destroy_loop=True)
