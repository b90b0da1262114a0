"""A test double of an upstream whose model names churn: every scrape a new set.

No real engine renames hundreds of models a second; an upstream that puts a request id,
a user or a LoRA adapter into the model label does, and the sidecar must stay bounded and
responsive against it. :func:`churn_exposition` is the ``n``-th answer of such an
upstream, a Triton-format exposition of ``names`` models none of which was in an earlier
answer: request counts, request and queue durations (cumulative microseconds) and the
pending requests gauge, so that each model is decoded, accounted and given a concurrency.
Served over HTTP by the model-server double ``tests.support.hostile.Upstream``.
"""

from __future__ import annotations

from collections.abc import Callable

#: The families of a churn answer: (name, type, value of the i-th model).
FAMILIES: tuple[tuple[str, str, Callable[[int], int]], ...] = (
    ("nv_inference_request_success", "counter", lambda i: 10 + i),
    ("nv_inference_count", "counter", lambda i: 10 + i),
    ("nv_inference_request_duration_us", "counter", lambda i: 5000 * (i + 1)),
    ("nv_inference_queue_duration_us", "counter", lambda i: 100 * (i + 1)),
    ("nv_inference_pending_request_count", "gauge", lambda i: i % 4),
)


def churn_exposition(n: int, names: int) -> str:
    """The ``n``-th answer: ``names`` models ``churn{n}_{i}``, every value derived from
    ``n`` and ``i``."""
    models = [f"churn{n}_{i}" for i in range(names)]
    out: list[str] = []
    for family, kind, value in FAMILIES:
        out.append(f"# TYPE {family} {kind}\n")
        out += [f'{family}{{model="{m}",version="1"}} {value(i)}\n'
                for i, m in enumerate(models)]
    return "".join(out)

