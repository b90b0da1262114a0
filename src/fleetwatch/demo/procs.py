"""Process and loopback helpers of the demo harnesses: free ports, which process group
listens on them, one HTTP request, killing a process group and waiting until it is gone."""

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


#: ``/proc/net/tcp`` state code of a listening socket.
_TCP_LISTEN = "0A"


def _listening_inodes(ports: set[int]) -> dict[str, int] | None:
    """Socket inode → port of the TCP sockets listening on ``ports`` (Linux ``/proc``);
    None when ``/proc/net/tcp`` cannot be read."""
    inodes: dict[str, int] = {}
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(FileNotFoundError), open(table) as f:
                for line in f.read().splitlines()[1:]:
                    cols = line.split()
                    if len(cols) > 9 and cols[3] == _TCP_LISTEN:
                        port = int(cols[1].rsplit(":", 1)[1], 16)
                        if port in ports:
                            inodes[cols[9]] = port
    except (OSError, ValueError):
        return None
    return inodes if os.path.exists("/proc/net/tcp") else None


def group_listens(pgid: int, ports: tuple[int, ...]) -> bool | None:
    """Whether processes of group ``pgid`` hold a listening TCP socket on every port in
    ``ports``: a server answering on a port it did not bind is another process that took
    the port between :func:`free_ports` and the spawn. None when ``/proc`` cannot say
    (not Linux): the caller then trusts the answer."""
    wanted = set(ports)
    inodes = _listening_inodes(wanted)
    if inodes is None:
        return None
    found: set[int] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    found.add(inodes[link[8:-1]])
        except OSError:  # the process ended, or is not ours to read
            continue
    return found >= wanted


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
