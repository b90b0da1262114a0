"""Whether a latency scenario on the ``slo_sim`` model ran on an undisturbed machine, and
running it again when it did not.

The SLO tests on ``slo_sim`` judge latency against a threshold a few milliseconds above
what the model needs at their concurrency steps. A neighbour that takes both cores for a
second or more (another job's engine, a compile) stalls Triton's Python-backend stub and
the client alike, and the requests of that second all miss the threshold: the step then
says nothing about the SLO engine, only about the neighbour. The scenario measures this
itself, independently of the engine under test, from the client's side:

* **every step delivered its load**: ``slo_sim`` has one instance that serves one request
  at a time in ``SERVICE_TIME_S`` (its ``model.py``), so a closed loop at any concurrency
  completes about ``1 / SERVICE_TIME_S`` requests a second (a little less: the transport).
  A step that completed fewer than :data:`MIN_DELIVERED` of that lost time to something
  other than the model and Triton's queue. A version slower than the SLO's threshold
  misses it however the machine does, so a stall cannot change its verdict, only starve
  it of events: its steps must deliver :data:`SLOW_MIN_DELIVERED`.

:func:`until_undisturbed` runs a scenario up to :data:`ATTEMPTS` times and returns the
first run that passes that check, so that the verdicts are taken from a run the machine
did not disturb; when every run was disturbed it returns the last one and the test's
assertions decide (a disturbed run often still meets them), with the reasons printed.
A test whose verdict is timing itself (how many snapshots a loop takes to converge)
judges inside :func:`inconclusive_when_disturbed`: an assertion that fails on a disturbed
run skips the test as inconclusive, naming the disturbance and the assertion, instead of
failing it for the machine's sake; on an undisturbed run it fails as any assertion.
This is the live counterpart of the gate the committed vLLM sweeps pass
(``tests/support/sweep_checks.py``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from fleetwatch.demo.load import StepResult
from fleetwatch.demo.triton import DEFAULT_MODEL_REPOSITORY

#: The share of ``1 / SERVICE_TIME_S`` requests a second a step must complete to count as
#: undisturbed. On an idle 2-core machine the steps of version 1 complete 0.90–0.94 of it
#: (the rest is the HTTP exchange and the stub's hand-over between requests).
MIN_DELIVERED = 0.8

#: The share a step of a version slower than the threshold must deliver.
SLOW_MIN_DELIVERED = 0.5

#: How many times a scenario is run at most before its last run is judged anyway.
ATTEMPTS = 3

T = TypeVar("T")


def service_time_s(version: str, model_dir: Path | None = None) -> float:
    """``SERVICE_TIME_S`` (seconds) of ``slo_sim``'s ``version`` (``"1"``, ``"2"``), read from
    its ``model.py`` in ``model_dir`` (default: the bundled repository's ``slo_sim``).

    Raises:
        ValueError: the file has no ``SERVICE_TIME_S = <float>`` line.
    """
    path = (model_dir or DEFAULT_MODEL_REPOSITORY / "slo_sim") / version / "model.py"
    found = re.search(r"^SERVICE_TIME_S = ([0-9.]+)", path.read_text(), re.MULTILINE)
    if found is None:
        raise ValueError(f"{path}: no 'SERVICE_TIME_S = <seconds>' line")
    return float(found.group(1))


@dataclass(frozen=True, slots=True)
class Delivery:
    """What one closed loop delivered: ``requests`` completed in ``seconds`` by a model
    instance that serves at most ``capacity_rps`` requests a second, of which it must
    deliver ``min_share`` (0–1) to count as undisturbed."""

    what: str
    requests: int
    seconds: float
    capacity_rps: float
    min_share: float = MIN_DELIVERED

    @property
    def rate(self) -> float:
        """Requests completed a second (0 for a loop of no time)."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def short(self) -> bool:
        """Fewer than ``min_share`` of the capacity."""
        return self.rate < self.min_share * self.capacity_rps

    def __str__(self) -> str:
        return f"{self.what}: {self.rate:.0f} requests/s of the model's {self.capacity_rps:.0f}"


def min_share(service_s: float, threshold_s: float) -> float:
    """The share of its capacity a loop on a model of ``service_s`` seconds per request must
    deliver under an SLO at ``threshold_s`` seconds: :data:`MIN_DELIVERED`, or
    :data:`SLOW_MIN_DELIVERED` for a model slower than the threshold."""
    return MIN_DELIVERED if service_s < threshold_s else SLOW_MIN_DELIVERED


def slo_sim_step(version: str, step: StepResult, threshold_s: float,
                 model_dir: Path | None = None) -> Delivery:
    """The `Delivery` of a `step_load` step on ``slo_sim``'s ``version``, judged by an SLO
    at ``threshold_s`` seconds."""
    service_s = service_time_s(version, model_dir)
    return Delivery(f"version {version} at concurrency {step.concurrency}", step.requests,
                    step.t_end - step.t_start, 1.0 / service_s,
                    min_share(service_s, threshold_s))


def shortfalls(deliveries: Iterable[Delivery]) -> list[Delivery]:
    """The deliveries short of their capacity (empty: the machine did not disturb them)."""
    return [d for d in deliveries if d.short]


def until_undisturbed(run: Callable[[], T], problems: Callable[[T], Sequence[object]],
                      what: str, attempts: int = ATTEMPTS) -> T:
    """``run()`` up to ``attempts`` times; the first result whose ``problems`` (the ways
    the machine disturbed it, each printable) are none, else the last result. Each
    disturbed run is reported on stderr with its problems."""
    for attempt in range(1, attempts + 1):
        result = run()
        found = problems(result)
        if not found:
            return result
        print(f"\n{what}: run {attempt} of {attempts} was disturbed (the machine was busy): "
              + "; ".join(map(str, found)), file=sys.stderr)
    return result


@contextmanager
def inconclusive_when_disturbed(problems: Sequence[object], what: str) -> Iterator[None]:
    """Judge a run inside this block: with ``problems`` (the judged run's disturbances, as
    :func:`until_undisturbed`'s ``problems`` gives them) an :class:`AssertionError` skips
    the test as inconclusive (``pytest.skip``, its reason naming the disturbances and the
    assertion); without, the error propagates (the test fails)."""
    try:
        yield
    except AssertionError as exc:
        if not problems:
            raise
        pytest.skip(f"{what}: inconclusive, every run was disturbed (the machine was busy: "
                    f"{'; '.join(map(str, problems))}); on that run: {exc!r}"[:2000])
