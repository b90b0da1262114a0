"""fleetwatch.clients.triton.unary: what a load run holds after it returns (the real
``tritonclient.http`` and gevent, against a loopback port nothing listens on)."""

from __future__ import annotations

import numpy as np

from fleetwatch.clients.triton.unary import send_requests
from fleetwatch.demo.procs import free_ports
from tests.support.helpers import held_at_rest, settles_back


def _inputs(index: int) -> dict[str, np.ndarray]:
    return {"INPUT": np.zeros((1, 4), dtype=np.float32)}


def test_rounds_of_http_workers_hold_no_more_descriptors_or_threads() -> None:
    """Each round's workers are new threads; tritonclient.http gives each a gevent hub
    (an epoll, an eventfd and a thread) that would outlive it unless released (5 rounds
    of 4 workers held 20 more of each without it)."""
    (port,) = free_ports(1)
    address = f"127.0.0.1:{port}"

    def round_() -> None:
        result = send_requests(address, "m", protocol="http", inputs=_inputs, requests=4,
                               concurrency=4, timeout_s=1.0)
        assert result.failed == 4  # nothing listens: each request fails, none hangs

    round_()  # imports, the resolver's first use
    before = held_at_rest()
    for _ in range(5):
        round_()
    settles_back(before, "5 rounds of HTTP workers")
