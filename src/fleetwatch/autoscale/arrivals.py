"""A request trace from what Prometheus recorded: per-step request and token counts of
one model read back from the schema's counters, turned into arrivals that
``fleetwatch autoscale replay`` reads (written as mooncake JSONL).

Per step of ``step`` seconds ending at ``t``, three range queries give (schema metrics,
docs/metrics.md):

* requests: ``sum(increase(modelserver_requests_total{model=M}[step]))``;
* input and output tokens: ``sum(increase(modelserver_tokens_total{model=M,
  token_type="input"|"output"}[step]))``.

The counters count *finished* requests, so an arrival is dated by its completion; at a
step of a minute or more that shift (one request's latency) is small against the step.
A step's requests are spread evenly over it, each with the step's mean input and output
length: the trace keeps the per-step rate and token mix, not the burstiness inside a
step — pick a step no longer than the scrape interval's few multiples you care about
(Prometheus returns at most 11,000 points per series: a day at 15 s is 5,760). Step
counts are fractional (``increase`` extrapolates); the fractions are carried into the
next step, so the trace's total is the sum of the steps' counts, rounded.

The queries themselves are :mod:`fleetwatch.commands.autoscale_trace`'s (this module is
pure: counts in, requests out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fleetwatch.autoscale.trace import Request

__all__ = ["StepCounts", "requests_from_counts"]


@dataclass(frozen=True, slots=True)
class StepCounts:
    """What one model served in one step: ``start`` (seconds since the epoch; the step
    is ``[start, start + step)``), ``requests`` finished, ``input_tokens`` and
    ``output_tokens`` processed (counts; fractional as ``increase`` extrapolates)."""

    start: float
    requests: float
    input_tokens: float
    output_tokens: float


def requests_from_counts(steps: Sequence[StepCounts], step: float) -> list[Request]:
    """Requests spread evenly over each step (see the module docstring), arrivals in
    seconds from the first step's start, each with its step's mean input and output
    tokens (rounded, at least 1 output token). ``steps`` in time order; ``step`` in
    seconds (> 0, else ``ValueError``)."""
    if not step > 0:
        raise ValueError(f"step {step}: must be > 0 seconds")
    out: list[Request] = []
    carry = 0.0
    t0 = steps[0].start if steps else 0.0
    for s in steps:
        want = s.requests + carry
        n = max(0, math.floor(want + 0.5))
        carry = want - n
        if n == 0:
            continue
        per_in = round(s.input_tokens / s.requests) if s.requests > 0 else 0
        per_out = max(1, round(s.output_tokens / s.requests)) if s.requests > 0 else 1
        gap = step / n
        out.extend(Request(s.start - t0 + (i + 0.5) * gap, per_in, per_out)
                   for i in range(n))
    return out
