"""How ``./dev test`` shares the suite between two pytest-xdist workers.

Every test under ``tests/e2e/`` starts real engines or servers (one set per module) and
needs the machine's cores: two such modules side by side would each run on a machine
half as fast. So those tests form one work unit, run by one worker in file order, while
the other worker runs every other test (the unit set, which needs no engine and takes a
few minutes alone). The whole suite then takes about as long as its engine tests.

The worker of the unit tests lowers its CPU priority (`yield_to_engines`): the engine
tests' servers get the cores first, and the unit tests, whose verdicts do not depend on
time, take what is left. The engine tests marked ``latency`` judge latency a few
milliseconds from a threshold, which even a niced neighbour moves on two cores: they run
last among the engine tests (`latency_last`), and while they run the worker of the unit
tests waits before each test (`LatencyLock`), so that on an idle machine they run after
the unit tests are done and on a busy one they at least do not compete with them.

xdist's own ``loadgroup`` mode would do this from an ``xdist_group`` mark, but with
pytest 9 its group never reaches the scheduler (it renames the test's node id through an
attribute pytest 9 no longer reads), so the unit is chosen here, by place.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.support import unit_mode

#: Node ids of the engine tests start with this (relative to the repository's root).
E2E_PREFIX = "tests/e2e/"
#: The work unit of every engine test.
ENGINES = "engines"


class EnginesOnOneWorker(LoadScopeScheduling):
    """xdist's scope scheduling with two kinds of unit: all of ``tests/e2e/`` as one, and
    every other test as its own. xdist hands out the largest unit first, so the engine tests
    start at once on one worker."""

    def _split_scope(self, nodeid: str) -> str:
        return ENGINES if nodeid.startswith(E2E_PREFIX) else nodeid


#: Niceness the worker of the unit tests adds to its own (and its children's).
UNIT_NICENESS = 10
_yielded = False


def xdist_run(config: pytest.Config) -> str | None:
    """xdist's run id when ``config`` is one of its workers', else None. From xdist's
    ``config.workerinput``, not from the environment: a pytest that a test starts
    inherits its worker's ``PYTEST_XDIST_*`` variables but is no worker (it would wait
    for the lock its own parent holds)."""
    workerinput = getattr(config, "workerinput", None)
    run = workerinput.get("testrunuid") if isinstance(workerinput, dict) else None
    return str(run) if run else None


def yield_to_engines(item: pytest.Item) -> None:
    """Before a test outside ``tests/e2e/`` on an xdist worker: lower this worker's CPU
    priority, once (a process may always lower its own). The engines' worker keeps its
    priority until it has run every engine test, since xdist hands it the engines' unit
    first."""
    global _yielded
    if _yielded or xdist_run(item.config) is None or unit_mode.in_e2e(item.path):
        return
    os.nice(UNIT_NICENESS)
    _yielded = True


#: The marker of the engine tests that judge latency against a threshold.
LATENCY = "latency"


def latency_last(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the ``latency``-marked ones moved to the end, each part in its order
    (the same on every worker, as xdist requires)."""
    return ([i for i in items if i.get_closest_marker(LATENCY) is None]
            + [i for i in items if i.get_closest_marker(LATENCY) is not None])


class LatencyLock:
    """A file lock between the two workers of one run (its path holds xdist's run id):
    the engines' worker holds it exclusively from its first ``latency`` test to its end;
    the unit tests' worker takes and drops it, shared, before each test, so it waits
    while the other holds it. Outside xdist it does nothing."""

    def __init__(self, run: str | None) -> None:
        """``run``: xdist's run id on one of its workers, None elsewhere (see :meth:`of`)."""
        self.path = (Path(tempfile.gettempdir()) / f"fleetwatch-latency-{run}.lock"
                     if run else None)
        self._held: IO[bytes] | None = None

    @classmethod
    def of(cls, config: pytest.Config) -> LatencyLock:
        """The lock of the process ``config`` belongs to (`xdist_run`)."""
        return cls(xdist_run(config))

    def before(self, item: pytest.Item) -> None:
        """Hold the lock before a ``latency`` engine test, or wait for it before a unit
        test."""
        if self.path is None or self._held is not None:
            return
        if unit_mode.in_e2e(item.path):
            if item.get_closest_marker(LATENCY) is not None:
                self._held = self.path.open("ab")
                fcntl.flock(self._held, fcntl.LOCK_EX)
            return
        with self.path.open("ab") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)  # blocks while the engines' worker holds it
            fcntl.flock(lock, fcntl.LOCK_UN)

    def release(self) -> None:
        """Drop the lock (at the end of the worker's session) and remove its file."""
        if self._held is not None:
            self._held.close()
            self._held = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
