"""How ``./dev test`` orders and separates the latency-judging engine tests
(tests/support/scheduling.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import scheduling

ROOT = Path(__file__).resolve().parents[2]


def _item(path: str, latency: bool) -> SimpleNamespace:
    """A test double of a `pytest.Item`: the two members the scheduling reads."""
    mark = pytest.mark.latency.mark if latency else None
    return SimpleNamespace(path=ROOT / path, name=path,
                           get_closest_marker=lambda name: mark if name == "latency" else None)


def test_latency_tests_go_last_each_part_in_its_order() -> None:
    items = [_item("tests/e2e/test_a.py", True), _item("tests/e2e/test_b.py", False),
             _item("tests/e2e/test_c.py", True), _item("tests/slo/test_d.py", False)]
    ordered = scheduling.latency_last(items)  # type: ignore[arg-type]
    assert [i.name for i in ordered] == ["tests/e2e/test_b.py", "tests/slo/test_d.py",
                                         "tests/e2e/test_a.py", "tests/e2e/test_c.py"]


def test_the_unit_worker_waits_while_the_engines_worker_judges_latency(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(scheduling.tempfile, "gettempdir", lambda: str(tmp_path))
    run = f"test-{time.monotonic_ns()}"
    worker = SimpleNamespace(workerinput={"testrunuid": run, "workerid": "gw0"})
    engines = scheduling.LatencyLock.of(worker)  # type: ignore[arg-type]
    units = scheduling.LatencyLock(run)
    engines.before(_item("tests/e2e/test_plain.py", False))  # type: ignore[arg-type]
    units.before(_item("tests/slo/test_x.py", False))  # not held yet: no wait
    engines.before(_item("tests/e2e/test_slo.py", True))  # type: ignore[arg-type]
    passed = threading.Event()
    waiter = threading.Thread(target=lambda: (
        units.before(_item("tests/slo/test_y.py", False)),  # type: ignore[arg-type]
        passed.set()))
    waiter.start()
    assert not passed.wait(0.5)  # blocked while the engines' worker holds the lock
    engines.release()
    assert passed.wait(10)
    waiter.join()
    units.release()
    assert not list(tmp_path.iterdir())  # the lock file is gone


def test_outside_xdist_nothing_is_locked(monkeypatch: pytest.MonkeyPatch) -> None:
    # a pytest started by a test on a worker inherits the worker's environment, but its
    # configuration has no workerinput: it is no worker and must not wait for the lock
    # its parent holds
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "a-run")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    lock = scheduling.LatencyLock.of(SimpleNamespace())  # type: ignore[arg-type]
    assert lock.path is None
    lock.before(_item("tests/e2e/test_slo.py", True))  # type: ignore[arg-type]
    lock.release()
