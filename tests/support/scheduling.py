"""How ``./dev test`` shares the suite between two pytest-xdist workers.

Every test under ``tests/e2e/`` starts real engines or servers (one set per module) and
needs the machine's cores: two such modules side by side would each run on a machine
half as fast. So those tests form one work unit, run by one worker in file order, while
the other worker runs every other test (the unit set, which needs no engine and takes a
few minutes alone). The whole suite then takes about as long as its engine tests.

xdist's own ``loadgroup`` mode would do this from an ``xdist_group`` mark, but with
pytest 9 its group never reaches the scheduler (it renames the test's node id through an
attribute pytest 9 no longer reads), so the unit is chosen here, by place.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

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
