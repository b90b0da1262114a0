"""The latency SLIs, derived once from the schema: what an SLO, a recording rule or a
dashboard may measure latency on.

* :data:`LATENCY_HISTOGRAMS` — every per-model histogram family of
  :data:`fleetwatch.labels.schema.METRICS` in seconds with no label beyond the model's
  (``phase`` splits one, so it is not one latency), in schema order; the gateway
  families (``modelserver_gateway_*``) are a gateway's view of the pool, predictions
  among them, and are no SLI of a model's engines;
* :data:`LATENCY_METRICS` — the SLO file's short names (``ttft``, ``itl``, ``tpot``,
  ``request``, ``queue``) → those families;
* :data:`SUMMARY_METRICS` — the short names whose family has a companion summary
  (``<name>_summary_seconds``, Triton's quantiles) → that summary family.

Pure data over the schema (no numpy, no engine): the rule and dashboard generators import
it. A latency histogram added to the schema without a short name here fails at import.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from fleetwatch.labels.schema import METRICS, METRICS_BY_NAME

#: Per-model latency histograms (seconds, no extra labels), schema order.
LATENCY_HISTOGRAMS: tuple[str, ...] = tuple(
    m.name for m in METRICS
    if m.type == "histogram" and m.unit == "seconds" and m.per_model and not m.labels
    and not m.name.startswith("modelserver_gateway_"))

# The SLO file's vocabulary for them (the only hand-written part: user-facing names).
_SHORT_NAMES = {
    "modelserver_time_to_first_token_seconds": "ttft",
    "modelserver_inter_token_latency_seconds": "itl",
    "modelserver_time_per_output_token_seconds": "tpot",
    "modelserver_request_duration_seconds": "request",
    "modelserver_queue_duration_seconds": "queue",
}
if set(_SHORT_NAMES) != set(LATENCY_HISTOGRAMS):  # pragma: no cover - a schema edit
    raise RuntimeError("fleetwatch.slo.sli: latency histograms of the schema "
                       f"{sorted(LATENCY_HISTOGRAMS)} and their SLO short names "
                       f"{sorted(_SHORT_NAMES)} differ: name the new ones")

#: Short name (``ttft``) → normalized histogram family (the SLO file's order).
LATENCY_METRICS: dict[str, str] = {short: fam for fam, short in _SHORT_NAMES.items()}


def _summary_of(family: str) -> str | None:
    name = family.removesuffix("_seconds") + "_summary_seconds"
    m = METRICS_BY_NAME.get(name)
    return name if m is not None and m.type == "summary" else None


#: Short name → the companion summary family (quantiles), where the schema has one.
SUMMARY_METRICS: dict[str, str] = {
    short: s for short, fam in LATENCY_METRICS.items() if (s := _summary_of(fam)) is not None}


def matching_bound(bounds: Iterable[float], threshold: float) -> float | None:
    """The bucket boundary (seconds) equal to ``threshold`` within 1e-9 relative, or None."""
    return next((b for b in bounds if math.isclose(b, threshold, rel_tol=1e-9)), None)


def nearest_bounds(bounds: Iterable[float], threshold: float, n: int) -> list[float]:
    """Up to ``n`` finite boundaries below ``threshold`` and ``n`` above it, in order."""
    finite = sorted(b for b in bounds if not math.isinf(b))
    return [b for b in finite if b < threshold][-n:] + [b for b in finite if b > threshold][:n]
