"""How ``./dev test`` shares the suite between two pytest-xdist workers.

Every test under ``tests/e2e/`` starts real engines or servers (one set per module) and
needs the machine's cores: two such modules side by side would each run on a machine
half as fast. So those tests form one work unit, run by one worker in file order, while
the other worker runs every other test (the unit set, which needs no engine and takes a
few minutes alone). The whole suite then takes about as long as its engine tests.

The worker of the unit tests lowers its CPU priority (`yield_to_engines`): the engine
tests' servers, which judge latency, get the cores first, and the unit tests, whose
verdicts do not depend on time, take what is left.

xdist's own ``loadgroup`` mode would do this from an ``xdist_group`` mark, but with
pytest 9 its group never reaches the scheduler (it renames the test's node id through an
attribute pytest 9 no longer reads), so the unit is chosen here, by place.
"""

from __future__ import annotations

import os
from pathlib import Path

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


def yield_to_engines(path: Path) -> None:
    """Before a test outside ``tests/e2e/`` on an xdist worker: lower this worker's CPU
    priority, once (a process may always lower its own). The engines' worker keeps its
    priority until it has run every engine test, since xdist hands it the engines' unit
    first."""
    global _yielded
    if _yielded or "PYTEST_XDIST_WORKER" not in os.environ or unit_mode.in_e2e(path):
        return
    os.nice(UNIT_NICENESS)
    _yielded = True
