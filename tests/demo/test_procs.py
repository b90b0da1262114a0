"""The harness's check that a server answering on a chosen port is the server itself
(fleetwatch.demo.procs.group_listens): once another process's server took a port chosen
for vLLM and answered its /health, and the harness took it for the engine."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from fleetwatch.demo.procs import free_ports, group_listens, http_request


def test_group_listens_only_for_the_group_that_bound_the_port() -> None:
    port, other = free_ports(2)
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while http_request("GET", f"http://127.0.0.1:{port}/", 1.0)[0] != 200:
            assert time.monotonic() < deadline, "http.server did not answer"
            time.sleep(0.1)
        assert group_listens(server.pid, (port,)) is True
        assert group_listens(os.getpgid(0), (port,)) is False  # answers, but not ours
        assert group_listens(server.pid, (port, other)) is False  # one port not bound
    finally:
        server.kill()
        server.wait()
