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
waited — lived mostly before it, and the mean of a full and an empty gauge put them in
the band of half the load (replaying a live real-vLLM sweep: the drain capture after
the top step, 16 → 0 in system over 0.18 s, read 8 and made a false ``regression`` in
band 8). Its mirror, an interval that began with an empty system (a load step from
idle) and that Little's law cannot measure, takes the gauges at its end: every request in
it arrived during it, and its events are theirs (the same sweep on a slower machine: the
capture after the drain read 0, the next one 8 running + 8 waiting, the mean 8 put the
first tokens of requests that waited for a slot into band 8, and the replay said
``regression`` with capacity 4). :func:`estimate` also names the estimator used
(``"little"``, ``"gauges"`` or ``"previous"``), which ``/slo`` reports as
``concurrency_estimator``.

Sources: J. D. C. Little, "A proof for the queuing formula L = λW", Operations Research
9(3), 1961; vLLM's metrics (``vllm:e2e_request_latency_seconds``,
``vllm:num_requests_running``/``waiting``); Triton's ``nv_inference_request_duration_us``
and ``nv_inference_pending_request_count``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fleetwatch.slo.decode import DURATION, Interval

FloatArray = npt.NDArray[np.float64]
#: Per model a value and whether it is present (absent: None in :func:`estimate_of`).
Column = tuple[FloatArray, npt.NDArray[np.bool_]]

#: Little's law on completed requests is trusted only over an interval at least this
#: many mean latencies long (shorter: the durations of requests that started before the
#: interval dominate).
MIN_INTERVALS_PER_LATENCY = 2.0

LITTLE = "little"
GAUGES = "gauges"
PREVIOUS = "previous"


def in_system(iv: Interval) -> float | None:
    """Running + waiting requests at the end of the interval (None without gauges)."""
    return in_system_of(iv.running_now, iv.waiting_now)


def in_system_of(running: float | None, waiting: float | None) -> float | None:
    """Running + waiting requests from the two gauges (None: the gauge is absent)."""
    if running is None and waiting is None:
        return None
    return (running or 0.0) + (waiting or 0.0)


def little(iv: Interval, dt: float) -> float | None:
    """Little's law ``ΔΣ durations / Δt`` (requests), None when the interval has no
    completed request or is shorter than :data:`MIN_INTERVALS_PER_LATENCY` mean
    latencies."""
    h = iv.hists.get(DURATION)
    return None if h is None else _little(h.count, h.sum, dt)


def _little(count: float, total: float, dt: float) -> float | None:
    if count <= 0 or dt <= 0:
        return None
    mean_latency = total / count
    if dt < MIN_INTERVALS_PER_LATENCY * mean_latency:
        return None
    return max(total, 0.0) / dt


def estimate(iv: Interval, prev_in_system: float | None, dt: float,
             previous: float | None = None) -> tuple[float, str] | None:
    """``(concurrency, estimator)`` of an interval of ``dt`` seconds (see the module
    doc); ``prev_in_system`` is running + waiting at its start (None: unknown, the end
    value stands for both); ``previous`` the model's concurrency over its previous
    interval (requests; None: unknown). None without any usable measurement."""
    h = iv.hists.get(DURATION)
    return estimate_of(iv.running_now, iv.waiting_now,
                       None if h is None else (h.count, h.sum), prev_in_system, dt, previous)


def estimate_of(running: float | None, waiting: float | None,
                duration: tuple[float, float] | None, prev_in_system: float | None,
                dt: float, previous: float | None = None) -> tuple[float, str] | None:
    """:func:`estimate` from the interval's numbers: the running and waiting gauges at
    its end (None: absent) and its request-duration histogram's ``(Δcount, Δsum)``
    (observations, seconds; None: no such histogram)."""
    gauge_end = in_system_of(running, waiting)
    gauges = None
    if gauge_end is not None:
        start = gauge_end if prev_in_system is None else prev_in_system
        gauges = (start + gauge_end) / 2.0
    law = None if duration is None else _little(duration[0], duration[1], dt)
    if law is None and prev_in_system == 0.0 and gauge_end:
        # it began empty: every request at its end arrived during it, and the events it
        # counts (first tokens, completions) are those requests', at the end's load
        gauges = gauge_end
    if law is not None and (gauges is None or law >= gauges):
        return law, LITTLE
    if (law is None and previous is not None and duration is not None
            and duration[0] > 0 and dt > 0 and (gauges is None or previous > gauges)):
        # too short for Little's law: the requests it completed lived mostly before it
        return previous, PREVIOUS
    if gauges is not None:
        return gauges, GAUGES
    # no gauges and Little's law not trusted: a short interval with completions still
    # says something (the old behaviour); no completion at all says nothing
    if duration is not None and dt > 0 and duration[0] > 0:
        return max(duration[1], 0.0) / dt, LITTLE
    if duration is not None and dt > 0:
        return 0.0, LITTLE
    return None


def estimate_columns(running: Column, waiting: Column, duration: tuple[Column, Column],
                     prev_in_system: Column, dt: FloatArray,
                     previous: Column) -> tuple[FloatArray, list[str | None]]:
    """:func:`estimate_of` for many models at once (the engine's column path), the same
    floats: each input is ``(values, present)`` per model (a value where ``present`` is
    False is ignored: None in :func:`estimate_of`); ``duration`` the request-duration
    histogram's ``(Δcount, Δsum)`` columns, with one presence; ``dt`` seconds. Returns
    per model the concurrency (requests; NaN: None) and the estimator's name (None)."""
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
