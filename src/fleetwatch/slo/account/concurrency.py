"""Concurrency of an interval: the time-averaged number of requests in the system.

The band an interval's events are attributed to, the autoscaling signal's concurrency
component and the capacity model all read this one number (requests per replica). Two
measurements are combined:

* **Little's law** (``L = λ W``) over the end-to-end latency sum: ``L = ΔΣ(request
  durations) / Δt`` — the request-duration histogram's ``_sum`` delta (vLLM's
  ``e2e_request_latency_seconds``, Triton's ``nv_inference_request_duration_us``, both
  normalized to ``modelserver_request_duration_seconds``) divided by the interval's
  length. It counts every request the server held, waiting ones included (a request
  beyond vLLM's ``--max-num-seqs`` waits *inside* the e2e time), and it is a time
  average, so a level change between two scrapes is not misattributed to a whole
  interval. It sees only *completed* requests: a request that started before the
  interval contributes its whole duration, so it is only trusted when the interval is at
  least :data:`MIN_INTERVALS_PER_LATENCY` × the interval's mean latency ``W = ΔΣ /
  Δcount`` long, and it lags when requests last longer than the interval.
* **Gauges**: the mean of running + waiting (``modelserver_requests_active{state}``) at
  both ends of the interval. They cover requests still in flight (longer than the
  interval, where Little's law on completed requests lags) but are two point samples.

The estimate is the larger of the two when both are usable (each one is a lower bound
of the time average in the situation where the other fails), Little's law alone
without gauges, the gauges alone when Little's law has no completed request. An
interval too short for Little's law that completed requests (a capture right after a
load step drained) takes the larger of the gauges and the model's concurrency over its
previous interval: the requests it completed — and the TTFT events of requests that
waited — lived mostly before it, and the mean of a full and an empty gauge would put
them in the band of half the load (e.g. a drain from 16 to 0 in the system within a
fraction of a second reads 8, a band where they did not run). Its mirror, an interval
that began with an empty system (a load step from idle) and that Little's law cannot
measure, takes the gauges at its end: every request in it arrived during it, and its
events are theirs (from 0 to 8 running + 8 waiting, the mean 8 would put the first
tokens of requests that waited for a slot into band 8). :func:`estimate_columns` also
names the estimator used
(``"little"``, ``"gauges"`` or ``"previous"``), which ``/slo`` reports as
``concurrency_estimator``.

Sources: J. D. C. Little, "A proof for the queuing formula L = λW", Operations Research
9(3), 1961; vLLM's metrics (``vllm:e2e_request_latency_seconds``,
``vllm:num_requests_running``/``waiting``); Triton's ``nv_inference_request_duration_us``
and ``nv_inference_pending_request_count``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fleetwatch.slo.arrays import BoolArray, FloatArray


class Column(NamedTuple):
    """Per model a value and whether it is present (an absent value is ignored)."""

    values: FloatArray
    present: BoolArray


#: Little's law on completed requests is trusted only over an interval at least this
#: many mean latencies long (shorter: the durations of requests that started before the
#: interval dominate).
MIN_INTERVALS_PER_LATENCY = 2.0

LITTLE = "little"
GAUGES = "gauges"
PREVIOUS = "previous"


def in_system_of(running: float | None, waiting: float | None) -> float | None:
    """Running + waiting requests from the two gauges (None: the gauge is absent)."""
    if running is None and waiting is None:
        return None
    return (running or 0.0) + (waiting or 0.0)


def estimate_columns(running: Column, waiting: Column, duration: tuple[Column, Column],
                     prev_in_system: Column, dt: FloatArray,
                     previous: Column) -> tuple[FloatArray, list[str | None]]:
    """The concurrency of every model's interval (see the module doc): ``running`` and
    ``waiting`` the gauges at its end (requests), ``duration`` the request-duration
    histogram's ``(Δcount, Δsum)`` columns (observations, seconds; one presence: the
    histogram's), ``prev_in_system`` running + waiting at its start (absent: the end
    value stands for both), ``dt`` its length (seconds), ``previous`` the model's
    concurrency over its previous interval (requests). Returns per model the
    concurrency (requests; NaN: no usable measurement) and the estimator's name
    (``"little"``, ``"gauges"``, ``"previous"``; None: no measurement)."""
    (r, r_has), (w, w_has) = running, waiting
    (dc, d_has), (ds, _) = duration
    (p, p_has), (prev, prev_has) = prev_in_system, previous
    with np.errstate(invalid="ignore", divide="ignore"):
        gauge_has = r_has | w_has
        # (running or 0.0) + (waiting or 0.0): a zero (or absent) gauge adds 0.0
        gauge_end = (np.where(r_has & (r != 0.0), r, 0.0)
                     + np.where(w_has & (w != 0.0), w, 0.0))
        gauges = (np.where(p_has, p, gauge_end) + gauge_end) / 2.0
        law_has = d_has & ~(dc <= 0) & ~(dt <= 0) \
            & ~(dt < MIN_INTERVALS_PER_LATENCY * (ds / dc))
        completed = np.where(ds < 0.0, 0.0, ds) / dt  # max(Σ, 0.0) / dt
        began_empty = ~law_has & p_has & (p == 0.0) & gauge_has & (gauge_end != 0.0)
        gauges = np.where(began_empty, gauge_end, gauges)
        by_law = law_has & (~gauge_has | (completed >= gauges))
        by_previous = ~by_law & ~law_has & prev_has & d_has & (dc > 0) & (dt > 0) \
            & (~gauge_has | (prev > gauges))
        by_gauges = ~by_law & ~by_previous & gauge_has
        rest = ~(by_law | by_previous | by_gauges) & d_has & (dt > 0)
        by_completed = rest & (dc > 0)
    conc = np.full(len(dt), np.nan)
    conc[by_law | by_completed] = completed[by_law | by_completed]
    conc[rest & ~by_completed] = 0.0
    conc[by_previous] = prev[by_previous]
    conc[by_gauges] = gauges[by_gauges]
    names: list[str | None] = [None] * len(dt)
    for mask, name in ((by_law | rest, LITTLE), (by_previous, PREVIOUS),
                       (by_gauges, GAUGES)):
        for i in mask.nonzero()[0].tolist():
            names[i] = name
    return conc, names
