"""``fleetwatch autoscale trace``: one model's arrivals as Prometheus recorded them, as a
mooncake JSONL trace for ``fleetwatch autoscale replay``.

Per step of ``step`` seconds three range queries read the schema's counters
(``modelserver_requests_total`` and the input and output ``modelserver_tokens_total`` of
the model, ``increase`` over the step, summed over series); the counts become requests
in :mod:`fleetwatch.autoscale.arrivals` (what is kept and lost is said there). A query
that fails, or a count that is negative or not finite, is one ``fleetwatch: error:``
line naming the query and series, and exit 1.
"""

from __future__ import annotations

import math
import time

import click

from fleetwatch.autoscale.arrivals import StepCounts, requests_from_counts
from fleetwatch.autoscale.trace import write_mooncake_jsonl
from fleetwatch.commands.common import fail
from fleetwatch.commands.prometheus import Expected, PrometheusError, query_range
from fleetwatch.promql import sel

__all__ = ["counts_from_prometheus", "trace_command"]

#: The largest count of one step Prometheus may answer (requests or tokens).
_COUNT = Expected("a count of one step (requests or tokens)", high=2.0**53)


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


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(text: str, option: str) -> float:
    """A duration such as ``90s``, ``15m``, ``6h`` or ``1d`` in seconds; exit 2 otherwise."""
    unit = _DURATION_UNITS.get(text[-1:]) if text else None
    try:
        value = float(text[:-1]) * unit if unit else float("nan")
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        fail(f"{option} {text!r}: give a duration such as 90s, 15m, 6h or 1d")
    return value


@click.command("trace", epilog="""\b
Example: yesterday's traffic of one model, then the replay on it:
  fleetwatch autoscale trace --prometheus http://prometheus:9090 --model llama \\
      --since 1d --step 15s > llama.jsonl
  fleetwatch autoscale replay llama.jsonl --slos slos.yaml --captures sweep/ \\
      --time-compression 1
""")
@click.option("--prometheus", "base", required=True, metavar="URL",
              help="Prometheus that scraped the sidecars (its HTTP API).")
@click.option("--model", required=True, help="The model whose arrivals to read.")
@click.option("--since", "since_text", default="1d", show_default=True,
              help="How far back from --end: 90s, 15m, 6h, 1d.")
@click.option("--end", "end", type=click.FloatRange(0), default=None,
              help="End of the range, seconds since the epoch (default: now).")
@click.option("--step", "step_text", default="60s", show_default=True,
              help="Prometheus step; arrivals are spread evenly within one.")
@click.option("--timeout", type=click.FloatRange(0, 600, min_open=True), default=30.0,
              show_default=True, help="Seconds for each of the three queries.")
def trace_command(base: str, model: str, since_text: str, end: float | None,
                  step_text: str, timeout: float) -> None:
    """Write a mooncake JSONL trace of MODEL's arrivals as Prometheus recorded them
    (requests and input/output tokens per step from the schema's counters, spread evenly
    within a step: docs/autoscaling.md), for 'fleetwatch autoscale replay': what each
    autoscaler would have done with that traffic. A failed query, or counts that are not
    counts, is one error line and exit 1; no request in the range is exit 1."""
    step = _seconds(step_text, "--step")
    stop = time.time() if end is None else end
    start = stop - _seconds(since_text, "--since")
    try:
        steps = counts_from_prometheus(base, model, start, stop, step, timeout)
    except PrometheusError as exc:
        fail(str(exc), code=1)
    requests = requests_from_counts(steps, step)
    if not requests:
        fail(f"Prometheus at {base} has no finished request of model {model!r} "
             f"(modelserver_requests_total) in the {since_text} before {stop:.0f}", code=1)
    click.echo(write_mooncake_jsonl(requests), nl=False)
