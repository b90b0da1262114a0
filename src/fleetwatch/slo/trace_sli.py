"""The rules of SLIs measured from traces (``sli.source: traces``, see
:mod:`fleetwatch.traces`).

``source: traces`` judges every traced request exactly: a latency threshold need not be a
bucket boundary, and ``goodput`` — a list of latency objectives a request must *all* meet
(``[{metric: ttft, threshold_seconds: 0.2}, {metric: tpot, threshold_seconds: 0.05}]``,
the DistServe definition) — needs it, since metrics only give marginals. ``sampling: N``
declares that one request in N is traced (Triton ``--trace-config=rate=N``): each traced
request then counts as N events. A trace carries ``ttft``, ``tpot``, ``request`` and
``queue`` per request; ``itl`` needs per-token times (metrics only); availability and
time slices stay metrics SLIs (vLLM exports no span for an aborted or rejected request).
"""

from __future__ import annotations

#: Latency metrics a trace gives per request.
TRACE_METRICS = ("ttft", "tpot", "request", "queue")


def check_source(kind: str, source: str, sampling: int, metrics: list[str]) -> None:
    """Raise ``ValueError`` when an SLI of ``kind`` (``latency``, ``goodput``, …) cannot be
    measured from ``source`` with that ``sampling`` and those objective ``metrics``."""
    if source == "metrics":
        if kind == "goodput":
            raise ValueError("goodput needs source: traces (metrics give marginals only)")
        if sampling != 1:
            raise ValueError("sampling applies to source: traces only")
        return
    if kind not in ("latency", "goodput"):
        raise ValueError(f"source: traces supports latency and goodput, not {kind}")
    for m in metrics:
        if m not in TRACE_METRICS:
            raise ValueError(f"metric {m!r} is not in traces; use one of "
                             f"{', '.join(TRACE_METRICS)}")
