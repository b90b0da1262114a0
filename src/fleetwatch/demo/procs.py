"""Process and loopback helpers of the demo harnesses: free ports, one HTTP request,
killing a process group and waiting until it is gone."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import urllib.error
import urllib.request

#: The only address the servers bind to.
LOOPBACK = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that were free on the loopback interface just now."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def http_request(
    method: str, url: str, timeout_s: float, *, json_body: bytes | None = None
) -> tuple[int, bytes]:
    """Send one request: (HTTP status, body); (0, b"") when nothing answered."""
    request = urllib.request.Request(url, method=method)
    if json_body is not None:
        request.data = json_body
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as error:
        return int(error.code), bytes(error.read())
    except (urllib.error.URLError, OSError):
        return 0, b""


def kill_group(pgid: int) -> None:
    """SIGKILL process group ``pgid`` (nothing when it is gone already)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Wait at most ``timeout_s`` until no process of group ``pgid`` is left (they can hold
    shared memory, the KV cache or a port)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.1)
