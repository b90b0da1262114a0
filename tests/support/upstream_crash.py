"""A scenario on a real server, run once more when the server crashed under it.

The pytriton wheel's Python backend aborts now and then on a busy machine
(``terminate called after throwing an instance of 'boost::interprocess::lock_exception'``,
then "Non-graceful termination detected" from each stub), seconds after the server said it
was ready. A module whose subject is fleetwatch, not Triton's stability, then sees a target
that refuses connections and fails for a reason that is not its own. In a cluster the
kubelet restarts such a container; here:

* `on_a_server_that_stays_up` runs a whole scenario on a fresh server and runs it again on
  another fresh server when the first one exited during it with a crash report in its
  log — for scenarios timed in phases, which a restart in the middle would spoil;
* `kept_up` restarts a server that exits during a long load (the demo's
  `~fleetwatch.demo.supervise.Supervisor`), for modules that only need data to keep coming.

Either way the crash is printed with its log excerpt and raised as a pytest warning: a
crash is never hidden, and a server that exits without a crash report (or crashes on
every attempt) fails the test with its log.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

import pytest

from fleetwatch.demo.process import ServerProcess
from fleetwatch.demo.supervise import Supervisor, crash_excerpt, has_crash_report

__all__ = ["UpstreamCrashWarning", "kept_up", "on_a_server_that_stays_up"]

S = TypeVar("S", bound=ServerProcess)
R = TypeVar("R")


class UpstreamCrashWarning(UserWarning):
    """A real server crashed under a test and the test went on without it (see module)."""


def _report(what: str, server: ServerProcess, code: int | None, excerpt: str) -> None:
    message = f"{type(server).__name__} crashed (exit code {code}) {what}; its log:\n{excerpt}"
    print(message)
    warnings.warn(message, UpstreamCrashWarning, stacklevel=3)


def on_a_server_that_stays_up(start: Callable[[], AbstractContextManager[S]],
                              scenario: Callable[[S], R], *, attempts: int = 2) -> R:
    """``scenario(server)`` on a server from ``start()``; again on a fresh one (at most
    ``attempts`` runs in all) when the server exited during it with a crash report in its
    log. Returns the result of the run whose server stayed up.

    Raises:
        pytest.fail.Exception: the server exited without a crash report (a clean exit is
            not the upstream's crash), or crashed on every attempt.
    """
    for attempt in range(1, attempts + 1):
        with start() as server:
            result = scenario(server)
            if server.running:
                return result
            code, text = server.returncode, server.log_text()
            excerpt = crash_excerpt(text)
        if not has_crash_report(text):
            pytest.fail(f"{type(server).__name__} exited (code {code}) during the scenario "
                        f"without a crash report; its log ends:\n{excerpt}")
        _report(f"during attempt {attempt} of {attempts}", server, code, excerpt)
    pytest.fail(f"{type(server).__name__} crashed on each of {attempts} attempts; the last "
                f"log:\n{excerpt}")


@contextmanager
def kept_up(server: S, name: str = "triton", max_restarts: int = 3) -> Iterator[Supervisor]:
    """Restart ``server`` (on its ports) whenever it exits while the block runs, at most
    ``max_restarts`` times, with a one-second back-off; each exit is reported as above.
    Yields the `Supervisor` (its ``exits`` say what happened)."""
    supervisor = Supervisor({name: server}, max_restarts=max_restarts, backoff_s=1.0,
                            poll_s=0.5)
    with supervisor:
        yield supervisor
    for record in supervisor.exits:
        _report(f"{record.at_s:.0f} s into the load (restarted: {record.restarted})",
                server, record.returncode, record.log_tail)
