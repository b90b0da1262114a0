"""Shared pytest fixtures, one section per component. Add new sections below; keep them small."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwatch.demo.triton import TritonServer

# -- Real Triton Inference Server (fleetwatch.demo.triton) -----------------------------------


@pytest.fixture(scope="module")
def triton_server() -> Iterator[TritonServer]:
    """A real tritonserver (nvidia-pytriton wheel) serving the demo models, one per test module.

    Models: ``ranker`` (versions 1 and 2), ``streamer`` (decoupled), ``faulty``. Loopback ports
    are free ones: use ``http_address``, ``grpc_address`` and ``metrics_url``. Counters are shared
    by the tests of a module, so compare before/after values. Mark tests ``@pytest.mark.triton``.
    """
    with TritonServer() as server:
        yield server
