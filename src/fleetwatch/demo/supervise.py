"""Restart the demo's servers when they exit, as a kubelet restarts a crashed container.

The pytriton wheel's Python backend aborts now and then on the project's 2-core machines
(``boost::interprocess::lock_exception`` in ``TRITONBACKEND_ModelInstanceExecute``, exit
code −6, after a ``triton_python_backend_stub`` segfault), which ended the demo's Triton
for good 30–85 s in. In a cluster the kubelet restarts such a container
(``restartPolicy: Always``, with a growing back-off) and the sidecar reads the counter
reset as a restart. `Supervisor` does the same for the demo: it polls each
`~fleetwatch.demo.process.ServerProcess` every ``poll_s`` seconds and, when one has exited,
records an `Exit` (its exit code, when, the last lines of its log), waits
``backoff_s × 2^(n−1)`` seconds before the n-th restart of that server (the kubelet's
doubling back-off, scaled to a demo of minutes) and restarts it on the same ports, at
most ``max_restarts`` times in a row. As the kubelet resets its back-off after a container
ran 10 minutes without a problem, a server that stayed up ``reset_after_s`` seconds since
its last restart starts a new row: a demo that runs for hours survives one crash an hour.
It never raises: a restart that fails is recorded with its error and that server is given
up on.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fleetwatch.demo.process import ServerProcess

__all__ = ["Exit", "Supervisor", "crash_excerpt", "has_crash_report"]

log = logging.getLogger("fleetwatch.demo")

#: Lines of a dead server's log kept in its `Exit`.
LOG_LINES = 12

#: Lines that start a crash report in a server's log (Triton's signal handler and stack
#: dump, a C++ abort, a Python traceback).
_CRASH = re.compile(r"Signal \(\d+\) received|terminate called|what\(\):|Segmentation fault"
                    r"|Aborted|Traceback \(most recent call last\)|Fatal Python error")


def has_crash_report(text: str) -> bool:
    """Whether a server's log holds a crash report (a signal, an abort, a traceback), as
    opposed to a clean exit."""
    return _CRASH.search(text) is not None


def crash_excerpt(text: str, lines: int = LOG_LINES) -> str:
    """The part of a dead server's log that says why: from the first line of its last
    crash report (`_CRASH`, with the crash lines just before it) for ``lines`` lines, then
    ``…`` and its last line; without a crash report, its last ``lines`` lines. Blank
    lines are left out. (A fixed tail showed a Triton crash as a run of earlier request
    errors and its stack frames 14–18, not the signal and the frames that crashed.)"""
    rows = [line for line in text.splitlines() if line.strip()]
    marks = [i for i, line in enumerate(rows) if _CRASH.search(line)]
    if not marks:
        return "\n".join(rows[-lines:])
    start = marks[-1]
    for i in reversed(marks[:-1]):  # the lines of the same report just before it
        if start - i > 3:
            break
        start = i
    part = rows[start:start + lines]
    if start + lines < len(rows):
        part += ["…", rows[-1]]
    return "\n".join(part)


@dataclass(frozen=True)
class Exit:
    """A server that exited under the supervisor.

    Attributes:
        server: its name (the key of the supervisor's ``servers``).
        at_s: when it was seen exited, seconds since the supervisor started.
        returncode: its exit code (negative: the signal that ended it; None: unknown).
        log_tail: the part of its log that says why (`crash_excerpt`), as it was before
            the restart.
        restarted: the restart succeeded (the server answered ready again).
        error: why it was not restarted (restart budget spent, the supervisor was
            stopping, or the restart's own error); None when it was.
    """

    server: str
    at_s: float
    returncode: int | None
    log_tail: str
    restarted: bool
    error: str | None = None


class Supervisor:
    """Watch ``servers`` (name → started server) and restart one that exited (see the
    module doc). Use as a context manager or call `start` and `stop`; `poll` is one
    round (tests call it directly).

    Args:
        servers: the servers to watch, by the name used in messages.
        max_restarts: restarts in a row per server before giving up on it (≥ 0).
        backoff_s: seconds before a server's first restart; doubled for each next one.
        reset_after_s: seconds a server must stay up after a restart for its next exit
            to count as the first of a new row (the back-off starts over).
        poll_s: seconds between checks.
        on_exit: called with each `Exit` (from the supervisor's thread) once it is known
            whether the restart worked.

    Raises:
        ValueError: a negative ``max_restarts`` or ``backoff_s``, or a ``poll_s`` or
            ``reset_after_s`` ≤ 0.
    """

    def __init__(self, servers: Mapping[str, ServerProcess], *, max_restarts: int = 3,
                 backoff_s: float = 2.0, poll_s: float = 1.0, reset_after_s: float = 600.0,
                 on_exit: Callable[[Exit], None] | None = None) -> None:
        if max_restarts < 0 or backoff_s < 0 or poll_s <= 0 or reset_after_s <= 0:
            raise ValueError("max_restarts and backoff_s must be ≥ 0, poll_s and "
                             f"reset_after_s > 0, not {max_restarts}, {backoff_s}, {poll_s}, "
                             f"{reset_after_s}")
        self.servers = dict(servers)
        self.max_restarts = max_restarts
        self.backoff_s = backoff_s
        self.poll_s = poll_s
        self.reset_after_s = reset_after_s
        self.on_exit = on_exit
        self._row: dict[str, tuple[int, float]] = {}  # name → (exits in a row, last back at)
        self.exits: list[Exit] = []
        self._given_up: set[str] = set()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()

    def restarts(self, name: str) -> int:
        """How many times ``name`` was restarted successfully."""
        return sum(1 for e in self.exits if e.server == name and e.restarted)

    def given_up(self) -> list[str]:
        """The servers the supervisor stopped restarting (budget spent or restart failed)."""
        return sorted(self._given_up)

    def poll(self) -> list[Exit]:
        """One round: restart every watched server that has exited (blocking for the
        back-off and for its start). Returns the round's `Exit` records."""
        found: list[Exit] = []
        for name, server in self.servers.items():
            if server.running or name in self._given_up or self._stopping.is_set():
                continue
            found.append(self._handle(name, server))
        return found

    def _handle(self, name: str, server: ServerProcess) -> Exit:
        at = time.monotonic() - self._t0
        code, tail = server.returncode, crash_excerpt(server.log_text())
        row, back_at = self._row.get(name, (0, -self.reset_after_s))
        n = 1 if at - back_at >= self.reset_after_s else row + 1
        error: str | None = None
        if n > self.max_restarts:
            error = f"restarted {n - 1} times already (the limit)"
        else:
            log.warning("fleetwatch demo: %s exited (code %s) %.0f s in; restarting it "
                        "(%d of %d) in %.0f s; its log ends:\n%s", name, code, at, n,
                        self.max_restarts, self.backoff_s * 2 ** (n - 1), tail)
            if self._stopping.wait(self.backoff_s * 2 ** (n - 1)):
                error = "the demo was stopping"
            else:
                try:
                    server.restart()
                except Exception as exc:  # a failed start is reported, never raised
                    error = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        if error is not None:
            self._given_up.add(name)
            log.warning("fleetwatch demo: %s is not restarted: %s", name, error)
        else:
            log.warning("fleetwatch demo: %s is back (restart %d)", name, n)
            self._row[name] = (n, time.monotonic() - self._t0)
        record = Exit(name, round(at, 1), code, tail, error is None, error)
        self.exits.append(record)
        if self.on_exit is not None:
            self.on_exit(record)
        return record

    def _run(self) -> None:
        while not self._stopping.wait(self.poll_s):
            self.poll()

    def start(self) -> Supervisor:
        """Start watching in a daemon thread."""
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="fleetwatch-supervisor",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop watching; waits up to ``timeout_s`` seconds for a restart in progress."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def __enter__(self) -> Supervisor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
