"""The demo's background load: gentle traffic on the three demo models until an event is set."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from fleetwatch.clients.triton.bounds import check_bounds
from fleetwatch.clients.triton.results import LoadResult
from fleetwatch.clients.triton.stream import stream_requests
from fleetwatch.clients.triton.tensors import InputFactory
from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.load.inputs import faulty_inputs, ranker_inputs, streamer_inputs

if TYPE_CHECKING:
    from fleetwatch.demo.triton import TritonServer

__all__ = ["run_demo_load"]


def run_demo_load(
    server: TritonServer,
    stop_event: threading.Event,
    *,
    max_duration_s: float = 3600.0,
    faulty_fraction: float = 0.1,
    concurrency: int = 2,
    pause_s: float = 0.5,
) -> dict[str, LoadResult]:
    """Keep gentle traffic on the demo models until ``stop_event`` is set or time runs out.

    Each round sends, then pauses ``pause_s`` seconds: 8 ``ranker`` v1 requests over HTTP,
    4 ``ranker`` v2 requests over gRPC, 10 ``faulty`` requests over HTTP of which
    ``faulty_fraction`` fail (spread as in `faulty_inputs`, across rounds), and 2 ``streamer``
    streams of 4–16 responses over gRPC. Returns after at most about ``max_duration_s``
    seconds plus one request timeout. While the server is not running (it exited; the
    demo's supervisor restarts it) no round is sent: the load waits for it.

    Returns:
        The accumulated results, keyed ``"ranker/1 http"``, ``"ranker/2 grpc"``,
        ``"faulty http"``, ``"streamer grpc-stream"``.

    Raises:
        ValueError: a bound out of range (see `send_requests`).
    """
    check_bounds(0, concurrency, max_duration_s, 10.0)
    deadline = time.monotonic() + max_duration_s
    faulty = faulty_inputs(faulty_fraction)
    totals: dict[str, LoadResult] = {}
    round_number = 0

    def add(key: str, result: LoadResult) -> None:
        if key in totals:
            totals[key].merge(result)
        else:
            totals[key] = result

    while not stop_event.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if not server.running:
            stop_event.wait(min(1.0, remaining))
            continue
        common: dict[str, Any] = {
            "concurrency": concurrency,
            "max_duration_s": min(remaining, 30.0),
            "timeout_s": 10.0,
            "stop_event": stop_event,
        }
        for key, result in _round(server, round_number, faulty, common):
            add(key, result)
        round_number += 1
        stop_event.wait(pause_s)
    return totals


def _round(server: TritonServer, round_number: int, faulty: InputFactory,
           common: dict[str, Any]) -> list[tuple[str, LoadResult]]:
    """One round of the demo's load (see :func:`run_demo_load`), sent in order: each
    client's result under its key."""
    http, grpc = server.http_address, server.grpc_address
    ranker_1 = send_requests(http, "ranker", inputs=ranker_inputs, requests=8,
                             model_version="1", **common)
    ranker_2 = send_requests(grpc, "ranker", protocol="grpc", inputs=ranker_inputs,
                             requests=4, model_version="2", **common)
    failing = send_requests(http, "faulty", inputs=_shifted(faulty, round_number * 10),
                            requests=10, **common)
    streams = stream_requests(grpc, "streamer",
                              inputs=streamer_inputs(4 + 4 * (round_number % 4)),
                              requests=2, **common)
    return [("ranker/1 http", ranker_1), ("ranker/2 grpc", ranker_2),
            ("faulty http", failing), ("streamer grpc-stream", streams)]


def _shifted(factory: InputFactory, offset: int) -> InputFactory:
    """``factory`` with request numbers counted from ``offset`` (so the faulty fraction holds
    across rounds)."""
    return lambda index: factory(offset + index)
