"""The OTLP receiver's port under slowloris (issue 25): the whole sidecar (``run_sidecar``
with ``traces:``) on loopback; 300 connections that send half a request's headers and
then nothing are closed — at accept past ``traces.max_connections``, the others after
``traces.header_timeout_seconds`` — while ``/healthz`` and ``/readyz`` on the main port
keep answering, with the default bounds (256 connections, 10 s). The test waits for conditions with generous bounds and asserts none of
the times (the < 100 ms p99 figure is ``benchmarks/bench_hostile_otlp.py``'s)."""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
import urllib.error
import urllib.request

from fleetwatch.sidecar.config import parse_config
from fleetwatch.sidecar.server import run_sidecar
from tests.support.helpers import _free_port

SLOW = 300


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _closed(sock: socket.socket) -> bool:
    """True once the server closed or reset the connection (EOF or an error on read)."""
    # poll, not select: in a long test session the descriptors pass select()'s 1024
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
    if not poller.poll(0):
        return False
    try:
        return sock.recv(1024) == b""
    except OSError:
        return True


def test_slowloris_on_the_otlp_port_is_closed_and_healthz_keeps_answering() -> None:
    tport = _free_port()
    cfg = parse_config({
        "listen": {"address": "127.0.0.1", "port": 0},
        "scrape": {"interval_seconds": 0.5, "timeout_seconds": 0.5},
        "targets": [{"name": "t", "kind": "triton", "required": False,
                     "url": f"http://127.0.0.1:{_free_port()}/metrics"}],
        "traces": {"listen": {"address": "127.0.0.1", "port": tport}}})  # default bounds
    ports: list[int] = []
    state: dict = {}

    async def main() -> None:
        state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
        await run_sidecar(cfg, stop=state["stop"], on_ready=ports.append)

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    socks: list[socket.socket] = []
    try:
        deadline = time.time() + 30
        while not ports and time.time() < deadline:
            time.sleep(0.05)
        assert ports, "the sidecar did not start"
        base = f"http://127.0.0.1:{ports[0]}"
        for _ in range(SLOW):
            s = socket.create_connection(("127.0.0.1", tport), timeout=10)
            s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: applic")
            socks.append(s)
        assert _status(f"{base}/healthz") == 200
        assert _status(f"{base}/readyz") in (200, 503)  # answers (its target is down)
        deadline = time.time() + 120
        open_socks = list(socks)
        while open_socks and time.time() < deadline:
            open_socks = [s for s in open_socks if not _closed(s)]
            time.sleep(0.2)
        assert not open_socks, f"{len(open_socks)} slow connections still open"
        assert _status(f"{base}/healthz") == 200
        metrics = urllib.request.urlopen(f"{base}/metrics", timeout=30).read().decode()
    finally:
        for s in socks:
            s.close()
        if "loop" in state:
            state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(30)
    closed = {line.split('"')[1]: float(line.split()[-1]) for line in metrics.splitlines()
              if line.startswith("fleetwatch_traces_connections_closed_total{")}
    assert closed["header_timeout"] > 0 and closed["max_connections"] > 0
    assert closed["header_timeout"] + closed["max_connections"] == SLOW
