"""A closed loop held at a sequence of concurrency levels (latency-vs-concurrency tests with the
``slo_sim`` model)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fleetwatch.clients.triton.bounds import (
    MAX_DURATION_S,
    MAX_REQUESTS,
    check_bounds,
    loopback_address,
)
from fleetwatch.clients.triton.tensors import InputFactory
from fleetwatch.clients.triton.unary import Protocol, send_requests
from fleetwatch.demo.load.inputs import default_inputs

__all__ = ["MAX_STEPS", "StepResult", "step_load"]

#: Most concurrency steps in one `step_load` call.
MAX_STEPS = 64


@dataclass
class StepResult:
    """One concurrency step of `step_load`.

    Attributes:
        concurrency: the number of closed-loop clients held during the step.
        t_start: wall-clock time the step started, in seconds since the Unix epoch.
        t_end: wall-clock time the step ended (its last request completed), same clock.
        requests: requests that succeeded.
        failed: requests that ended with an error or a client timeout.
        latencies_s: client-side latency of each succeeded request, in seconds, in completion
            order.
        errors: the first error messages (at most 20 kept).
    """

    concurrency: int
    t_start: float
    t_end: float
    requests: int = 0
    failed: int = 0
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """``t_end - t_start``, in seconds."""
        return self.t_end - self.t_start

    @property
    def throughput_rps(self) -> float:
        """Succeeded requests per second of the step (0.0 for an empty step)."""
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of `latencies_s` (linear interpolation); NaN when there are none."""
        if not self.latencies_s:
            return math.nan
        return float(np.quantile(self.latencies_s, q))

    @property
    def mean_s(self) -> float:
        """Mean client latency, in seconds; NaN when no request succeeded."""
        return float(np.mean(self.latencies_s)) if self.latencies_s else math.nan

    @property
    def p50_s(self) -> float:
        """Median client latency, in seconds."""
        return self.quantile(0.5)

    @property
    def p99_s(self) -> float:
        """99th percentile of client latency, in seconds."""
        return self.quantile(0.99)


def step_load(
    address: str,
    model: str,
    *,
    steps: Sequence[int] = (1, 2, 4, 8, 16),
    seconds_per_step: float = 5.0,
    model_version: str = "",
    protocol: Protocol = "http",
    inputs: InputFactory | None = None,
    timeout_s: float = 10.0,
    stop_event: threading.Event | None = None,
    on_step: Callable[[int, float, float], None] | None = None,
) -> list[StepResult]:
    """Hold a closed loop at each concurrency level of ``steps`` for ``seconds_per_step``.

    Many parameters: `send_requests`'s keyword-only options plus the steps; each has a
    default and a caller names the few it sets.

    Step ``c`` runs `send_requests` with ``c`` clients, each sending its next request as soon as
    the previous one completes, for ``seconds_per_step`` seconds (or until `MAX_REQUESTS`
    requests); the steps run one after the other. After each step,
    ``on_step(c, t_start, t_end)`` is called (wall-clock seconds since the epoch, as in
    `StepResult`) before the next step starts, so it can scrape metrics without disturbing the
    load. When ``stop_event`` is set the current step ends early (it is still reported) and no
    further step starts. The call returns within about
    ``len(steps) * (seconds_per_step + timeout_s)`` seconds plus the time spent in ``on_step``.

    Args:
        address: ``host:port`` of Triton's HTTP or gRPC endpoint (loopback only).
        model: the model name.
        steps: the concurrency levels, in order (1 … `MAX_STEPS` of them, each 1 …
            `MAX_CONCURRENCY`).
        seconds_per_step: how long each level is held, in seconds.
        model_version: the version to ask for ("" = Triton's version policy).
        protocol: ``"http"`` or ``"grpc"``.
        inputs: builds request ``i``'s tensors; default `default_inputs` of ``model``
            (`slo_sim_inputs` for ``slo_sim``, which stamps the send time).
        timeout_s: per-request client timeout, in seconds.
        stop_event: stop when set.
        on_step: called as ``on_step(concurrency, t_start, t_end)`` after each step.

    Returns:
        One `StepResult` per step that ran, in order.

    Raises:
        ValueError: a non-loopback address, an unknown protocol, no steps, too many steps, a
            non-integer step, a concurrency or duration out of range (the total, ``len(steps) *
            seconds_per_step``, must not exceed `MAX_DURATION_S` either).
    """
    loopback_address(address)
    steps = list(steps)
    _check_steps(steps, seconds_per_step, timeout_s)
    make_inputs = inputs if inputs is not None else default_inputs(model)
    results: list[StepResult] = []
    for concurrency in steps:
        if stop_event is not None and stop_event.is_set():
            break
        t_start = time.time()
        load = send_requests(address, model, protocol=protocol, inputs=make_inputs,
                             requests=MAX_REQUESTS, concurrency=concurrency,
                             max_duration_s=seconds_per_step, model_version=model_version,
                             timeout_s=timeout_s, stop_event=stop_event)
        t_end = time.time()
        results.append(StepResult(concurrency=concurrency, t_start=t_start, t_end=t_end,
                                  requests=load.succeeded, failed=load.failed,
                                  latencies_s=load.latencies_s, errors=load.errors))
        if on_step is not None:
            on_step(concurrency, t_start, t_end)
    return results


def _check_steps(steps: list[int], seconds_per_step: float, timeout_s: float) -> None:
    """Raise ``ValueError`` for the out-of-range `step_load` arguments its docstring lists."""
    if any(isinstance(c, bool) or not isinstance(c, int) for c in steps):
        raise ValueError(f"steps must be integers, got {steps!r}")
    if not 1 <= len(steps) <= MAX_STEPS:
        raise ValueError(f"steps must have 1 … {MAX_STEPS} levels, got {len(steps)}")
    if not 0 < seconds_per_step <= MAX_DURATION_S:
        raise ValueError(
            f"seconds_per_step must be in (0, {MAX_DURATION_S:g}], got {seconds_per_step}"
        )
    for concurrency in steps:
        check_bounds(MAX_REQUESTS, concurrency, seconds_per_step, timeout_s)
    if len(steps) * seconds_per_step > MAX_DURATION_S:
        raise ValueError(
            f"len(steps) * seconds_per_step must be <= {MAX_DURATION_S:g} s, "
            f"got {len(steps) * seconds_per_step:g}"
        )
