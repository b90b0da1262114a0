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

A range query that fails, or a count that is negative or not finite, raises
:class:`~fleetwatch.commands.prometheus.PrometheusError` naming the query and series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fleetwatch.autoscale.trace import Request
from fleetwatch.commands.prometheus import Expected, query_range
from fleetwatch.promql import sel

__all__ = ["StepCounts", "counts_from_prometheus", "requests_from_counts"]

#: The largest count of one step Prometheus may answer (requests or tokens).
_COUNT = Expected("a count of one step (requests or tokens)", high=2.0**53)


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


def _per_step(base: str, promql: str, start: float, end: float, step: float,
              timeout: float) -> dict[float, float]:
    """The sum over series of ``promql``'s values, by the step's *start* time."""
    out: dict[float, float] = {}
    for series in query_range(base, promql, start + step, end, step, _COUNT, timeout):
        for t, v in series["values"]:
            out[float(t) - step] = out.get(float(t) - step, 0.0) + float(v)
    return out


def counts_from_prometheus(base: str, model: str, start: float, end: float, step: float,
                           timeout: float = 30.0) -> list[StepCounts]:
    """The steps of ``[start, end)`` (seconds since the epoch) in which ``model`` finished
    requests, read from the Prometheus at ``base`` (three range queries, see the module
    docstring); steps without requests are left out. Raises
    :class:`~fleetwatch.commands.prometheus.PrometheusError`."""
    window = f"{max(1, round(step * 1000))}ms"

    def count(metric: str, **eq: str) -> str:
        return f"sum(increase({sel(metric, {'model': model, **eq})}[{window}]))"

    reqs = _per_step(base, count("modelserver_requests_total"), start, end, step, timeout)
    tin = _per_step(base, count("modelserver_tokens_total", token_type="input"),
                    start, end, step, timeout)
    tout = _per_step(base, count("modelserver_tokens_total", token_type="output"),
                     start, end, step, timeout)
    return [StepCounts(t, reqs[t], tin.get(t, 0.0), tout.get(t, 0.0))
            for t in sorted(reqs) if reqs[t] > 0]
