"""The fast unit mode (``pytest --unit``, ``./dev test --unit``): only the tests that need no
engine or server, and a guard that fails any test which starts one anyway.

The selection is by place: ``tests/e2e/`` holds every test that runs a real engine or
server (Triton, vLLM, Prometheus, Alertmanager, VictoriaMetrics, chromium, the soak) and is
not collected. The guard makes the selection fail-safe, so that a new test which starts an
engine outside ``tests/e2e/`` fails in the unit run instead of slowing it down or needing
what the unit run does not install:

* a test marked ``triton``, ``vllm`` or ``soak`` outside ``tests/e2e/`` fails at setup;
* ``subprocess.Popen`` (which ``subprocess.run``, asyncio's subprocesses and
  ``fleetwatch.demo.process`` all go through) refuses to start one of `SERVER_PROGRAMS`
  or vLLM's API server from another interpreter than the tests' own, raising
  `EngineInUnitMode` (an ``AssertionError``: the test fails with its message). vLLM
  cannot share the tests' venv (it pins another numpy), so the API server started with
  the tests' interpreter exits at once: that is how the harness's error path is tested.
  Command-line tools such as ``promtool`` and ``amtool`` are allowed: they check files
  and exit.

The unit run also runs each hypothesis property with fewer examples (`examples`, and the
``unit`` profile for a property without its own count): the whole suite (``./dev test``)
runs every property with its full count, so the unit run is a quicker subset of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

#: Programs that run an engine or a server (basename of the command's first argument).
SERVER_PROGRAMS = frozenset({
    "tritonserver", "prometheus", "alertmanager", "victoria-metrics", "vmalert", "vmagent",
    "chromium", "chromium-browser", "google-chrome", "nginx",
})
#: An argument that starts vLLM's OpenAI API server (``python -m vllm.entrypoints...``).
VLLM_ENTRYPOINT = "vllm.entrypoints"
#: Markers of tests that need an engine: they belong in tests/e2e/.
ENGINE_MARKERS = ("triton", "vllm", "soak")

E2E = Path(__file__).resolve().parents[1] / "e2e"

#: The unit run's hypothesis examples: the whole suite's count divided by this, and at
#: least `UNIT_MIN_EXAMPLES` (the ``unit`` profile's count).
UNIT_EXAMPLES_DIVISOR = 5
UNIT_MIN_EXAMPLES = 20

_unit_run = False


class EngineInUnitMode(AssertionError):
    """A test of the unit set started an engine or a server: move it to tests/e2e/."""


def _argv(args: Any) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        return [os.fsdecode(args)]
    return [os.fsdecode(a) for a in args]


def _this_interpreter(program: str) -> bool:
    return os.path.realpath(program) == os.path.realpath(sys.executable)


def refused(args: Any) -> str | None:
    """Why the command ``args`` may not run in the unit mode, or None when it may."""
    argv = _argv(args)
    if not argv:
        return None
    program = os.path.basename(argv[0].split()[0]) if argv[0].strip() else ""
    if program in SERVER_PROGRAMS:
        return f"{program} is a server"
    if any(VLLM_ENTRYPOINT in a for a in argv) and not _this_interpreter(argv[0]):
        return "vLLM's API server is an engine"
    return None


def activate() -> None:
    """Enter the unit mode for the rest of the process (from ``pytest_configure``, before
    the test modules are imported): the `install_guard` guard, fewer hypothesis examples
    (`examples`; the ``unit`` profile for a property without its own count)."""
    global _unit_run
    _unit_run = True
    install_guard()
    settings.register_profile("unit", max_examples=UNIT_MIN_EXAMPLES)
    settings.load_profile("unit")


def examples(full: int) -> int:
    """The ``max_examples`` of a hypothesis property that the whole suite runs with
    ``full`` examples: ``full`` there, ``full // UNIT_EXAMPLES_DIVISOR`` (at least
    `UNIT_MIN_EXAMPLES`, at most ``full``) in the unit run. Evaluated when a test module
    is imported, which is after ``pytest_configure``."""
    if not _unit_run:
        return full
    return min(full, max(UNIT_MIN_EXAMPLES, full // UNIT_EXAMPLES_DIVISOR))


def install_guard() -> None:
    """Wrap ``subprocess.Popen.__init__`` so that `refused` commands raise, for the rest of
    the process (from ``pytest_configure``: before any fixture, session-scoped ones too)."""
    real_init = subprocess.Popen.__init__

    def guarded_init(self: subprocess.Popen[Any], args: Sequence[Any] | str,
                     *rest: Any, **kwargs: Any) -> None:
        why = refused(args)
        if why is not None:
            raise EngineInUnitMode(
                f"unit mode: {why} ({_argv(args)[:3]}); a test that starts an engine or a "
                f"server belongs in tests/e2e/")
        real_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded_init  # type: ignore[method-assign]


def in_e2e(path: Path) -> bool:
    """Whether ``path`` lies under tests/e2e/."""
    return path.resolve().is_relative_to(E2E)


def check_markers(item: pytest.Item) -> None:
    """Fail ``item`` when it carries an engine marker (it is outside tests/e2e/)."""
    marks = [m for m in ENGINE_MARKERS if item.get_closest_marker(m) is not None]
    if marks:
        pytest.fail(f"unit mode: {item.nodeid} is marked {', '.join(marks)}: a test that "
                    f"needs an engine belongs in tests/e2e/", pytrace=False)
