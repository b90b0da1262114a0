"""Requests to a decoupled model over gRPC bidirectional streams, with the time to the first
response; one stream per worker thread."""

from __future__ import annotations

import functools
import queue
import threading
import time
from typing import Any

from fleetwatch.clients.triton.bounds import Run, check_bounds, loopback_address, run_workers
from fleetwatch.clients.triton.results import LoadResult
from fleetwatch.clients.triton.tensors import InputFactory, infer_inputs

__all__ = ["stream_requests"]


def stream_requests(
    address: str,
    model: str,
    *,
    inputs: InputFactory,
    requests: int = 20,
    concurrency: int = 1,
    max_duration_s: float = 30.0,
    model_version: str = "",
    timeout_s: float = 10.0,
    stop_event: threading.Event | None = None,
) -> LoadResult:
    """Send up to ``requests`` requests to a decoupled model over gRPC streams.

    Many parameters: each bound of a run is its own keyword-only option with a default; a
    caller names the few it sets.

    Each of the ``concurrency`` workers opens one stream (``start_stream``) and sends one
    request at a time with ``async_stream_infer(..., enable_empty_final_response=True)``,
    reading responses until the final flag. A request succeeds when its final flag arrives
    without error within ``timeout_s`` seconds. Bounded like `send_requests`.

    Args:
        address: ``host:port`` of Triton's gRPC endpoint (loopback only).
        model: the decoupled model's name.
        inputs: builds request ``i``'s tensors (the demo models': `fleetwatch.demo.load`).
        requests, concurrency, max_duration_s, model_version, timeout_s, stop_event: as in
            `send_requests`.

    Returns:
        The `LoadResult` with ``protocol="grpc-stream"``, ``responses`` and
        ``first_response_s`` filled in.

    Raises:
        ValueError: a non-loopback address or a bound out of range.
    """
    target = loopback_address(address)
    check_bounds(requests, concurrency, max_duration_s, timeout_s)
    run = Run(
        LoadResult(model, "grpc-stream", model_version), requests, max_duration_s, stop_event
    )

    def worker(run: Run) -> None:
        import tritonclient.grpc as module

        client = module.InferenceServerClient(target)
        responses: queue.Queue[tuple[Any, Any]] = queue.Queue()
        client.start_stream(callback=functools.partial(_enqueue, responses))
        try:
            while (index := run.claim()) is not None:
                request_id = f"fleetwatch-{index}"
                tensors = infer_inputs(module, inputs(index))
                started = time.perf_counter()
                try:
                    client.async_stream_infer(
                        model,
                        tensors,
                        model_version=model_version,
                        request_id=request_id,
                        enable_empty_final_response=True,
                    )
                except Exception as send_error:  # the stream is closed or broken
                    error: str | None = f"{type(send_error).__name__}: {send_error}"
                    first_s, count = None, 0
                else:
                    error, first_s, count = _read_stream(responses, request_id, started, timeout_s)
                if error is None:
                    run.success(time.perf_counter() - started, first_s, count)
                    continue
                run.failure(error, first_s, count)
                # A broken or stuck stream: cancel what is in flight and open a new one. If the
                # server is gone this raises, which ends the worker (and the run) with the error.
                cancel_stream(client)
                responses = queue.Queue()
                client.start_stream(callback=functools.partial(_enqueue, responses))
        finally:
            cancel_stream(client)
            client.close()

    return run_workers(run, concurrency, worker)


def cancel_stream(client: Any) -> None:
    """Cancel the requests in flight on ``client``'s stream and stop it.

    ``tritonclient.grpc`` ends its request stream only on a graceful stop: after
    ``stop_stream(cancel_requests=True)`` gRPC's thread that feeds the stream waits for
    the next request for ever, one thread more per cancelled stream. Its end marker
    (``None`` on the stream's request queue, a private attribute of tritonclient 2.x)
    is put there as the graceful stop would; without that attribute, nothing is."""
    stream = getattr(client, "_stream", None)
    client.stop_stream(cancel_requests=True)
    requests = getattr(stream, "_request_queue", None)
    if requests is not None:
        requests.put(None)


def _enqueue(sink: queue.Queue[tuple[Any, Any]], result: Any, error: Any) -> None:
    sink.put((result, error))


def _read_stream(
    responses: queue.Queue[tuple[Any, Any]], request_id: str, started: float, timeout_s: float
) -> tuple[str | None, float | None, int]:
    """Read one request's responses until its final flag: (error or None, first_s, count)."""
    first_s: float | None = None
    count = 0
    while True:
        remaining = started + timeout_s - time.perf_counter()
        if remaining <= 0:
            return f"timeout: no final response within {timeout_s:g} s", first_s, count
        try:
            result, error = responses.get(timeout=remaining)
        except queue.Empty:
            continue
        if error is not None:
            return f"{type(error).__name__}: {error}", first_s, count
        response = result.get_response()
        if response.id != request_id:
            continue  # a late response of an earlier, timed-out request
        if response.outputs:
            count += 1
            if first_s is None:
                first_s = time.perf_counter() - started
        final = response.parameters.get("triton_final_response")
        if final is not None and final.bool_param:
            return None, first_s, count
