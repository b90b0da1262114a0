"""The replica model of the advisory twin, fitted from a real engine's captures.

Fitted from what ``fleetwatch slo replay`` says about captures of one real replica under
a concurrency sweep (``/slo``'s ``band_latency``: per concurrency band its mean
concurrency and a latency quantile, and ``batch_limit``, the most requests the engine
ran at once): the engine's own per-band latency model, as the capacity model reads it.

* **Slots**: at most ``batch_limit`` requests run at once (vLLM's ``--max-num-seqs``);
  the others wait in the replica's queue, first come first served.
* **TTFT once admitted** (seconds): the bands' TTFT quantile against the requests
  running, fitted monotonically (isotonic) over the bands up to the batch limit and
  interpolated linearly, times ``max(1, input tokens ÷ ref_input_tokens)`` (prefill
  grows with the prompt; ``ref_input_tokens`` is the captures' mean prompt). Time spent
  waiting for a slot comes on top: the bands above the batch limit are left out, the
  simulation makes their queueing itself.
* **ITL** (seconds per output token): the same fit of the ITL bands.
* **KV cache**: a request holds ``input + output`` tokens of ``kv_capacity_tokens``
  while it runs (vLLM's ``kv_cache_size_tokens``); a request waits while they do not fit,
  unless the replica is empty.
* **Cold start**: ``cold_start_seconds`` from scale-out to ready (seconds of the
  production system: the twin divides it by the time compression).

Bands are read with the fit SLOs' quantile (the twin fits medians: each simulated request
gets the typical latency at its load).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fleetwatch.slo.capacity.model import isotonic

__all__ = ["FitError", "LatencyCurve", "ReplicaModel", "curve_from_bands"]


class FitError(ValueError):
    """The captures do not give a replica model: the message says what is missing."""


@dataclass(frozen=True, slots=True)
class LatencyCurve:
    """A non-decreasing latency (seconds) against requests running, linear between
    ``points`` ``(running, seconds)`` (sorted by running), flat beyond both ends."""

    points: tuple[tuple[float, float], ...]

    xs: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.points:
            raise FitError("a latency curve needs at least one band")
        object.__setattr__(self, "xs", tuple(p[0] for p in self.points))

    def at(self, running: float) -> float:
        """The latency (seconds) at ``running`` requests."""
        xs = self.xs
        i = bisect.bisect_left(xs, running)
        if i == 0:
            return self.points[0][1]
        if i >= len(xs):
            return self.points[-1][1]
        (x0, y0), (x1, y1) = self.points[i - 1], self.points[i]
        return y0 if x1 == x0 else y0 + (running - x0) * (y1 - y0) / (x1 - x0)


def curve_from_bands(bands: Mapping[str, Mapping[str, object]], batch_limit: float,
                     what: str) -> LatencyCurve:
    """The curve of a ``band_latency`` object of ``/slo`` (band → ``{"concurrency",
    "latency_seconds"}``) over the bands whose concurrency is at most the batch limit
    (+5 %), isotonic. Raises :class:`FitError` when no such band has both numbers."""
    pts: list[tuple[float, float]] = []
    for row in bands.values():
        c, lat = row.get("concurrency"), row.get("latency_seconds")
        if not isinstance(c, (int, float)) or not isinstance(lat, (int, float)):
            continue
        if math.isfinite(c) and math.isfinite(lat) and c <= batch_limit * 1.05:
            pts.append((float(c), float(lat)))
    if not pts:
        raise FitError(f"no {what} band at or below the batch limit {batch_limit:g} "
                       "with a concurrency and a latency (a sweep from 1 request up)")
    pts.sort()
    fitted = isotonic([y for _, y in pts])
    return LatencyCurve(tuple((x, y) for (x, _), y in zip(pts, fitted, strict=True)))


@dataclass(frozen=True, slots=True)
class ReplicaModel:
    """One replica as the twin simulates it (see the module docstring): ``slots``
    (requests), ``ttft``/``itl`` (seconds against requests running),
    ``ref_input_tokens``, ``kv_capacity_tokens`` (tokens), ``cold_start_seconds``."""

    slots: int
    ttft: LatencyCurve
    itl: LatencyCurve
    ref_input_tokens: float
    kv_capacity_tokens: float
    cold_start_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise FitError(f"slots {self.slots}: must be ≥ 1")
        if not (self.ref_input_tokens > 0 and self.kv_capacity_tokens > 0):
            raise FitError("ref_input_tokens and kv_capacity_tokens must be > 0")
        if not (math.isfinite(self.cold_start_seconds) and self.cold_start_seconds >= 0):
            raise FitError(f"cold_start_seconds {self.cold_start_seconds}: must be ≥ 0")

    def prefill_seconds(self, running: int, input_tokens: int) -> float:
        """TTFT once admitted, at ``running`` requests (this one included)."""
        return self.ttft.at(running) * max(1.0, input_tokens / self.ref_input_tokens)

    @classmethod
    def from_slo_document(cls, slo_doc: Mapping[str, object], ttft_slo: str, itl_slo: str,
                          model: str, *, ref_input_tokens: float, kv_capacity_tokens: float,
                          cold_start_seconds: float = 60.0) -> ReplicaModel:
        """Fit from a ``/slo`` document of a replay with a TTFT and an ITL latency SLO
        (named ``ttft_slo``, ``itl_slo``) selecting ``model``. Raises :class:`FitError`
        naming what is missing (the SLO, its bands, the batch limit)."""
        rows = slo_doc.get("slos")
        found: dict[str, Mapping[str, object]] = {}
        for row in rows if isinstance(rows, Sequence) else []:
            if isinstance(row, Mapping) and row.get("model") == model \
                    and row.get("slo") in (ttft_slo, itl_slo):
                found[str(row["slo"])] = row
        for name in (ttft_slo, itl_slo):
            if name not in found:
                raise FitError(f"the captures gave no SLO {name} for model {model!r} "
                               "(is the model in the captures?)")
        limit = found[ttft_slo].get("batch_limit")
        if not isinstance(limit, (int, float)) or not limit >= 1:
            raise FitError("the captures show no batch limit (no request ever waited): "
                           "capture a sweep past the engine's --max-num-seqs")
        curves = []
        for name, what in ((ttft_slo, "TTFT"), (itl_slo, "ITL")):
            bands = found[name].get("band_latency")
            if not isinstance(bands, Mapping):
                raise FitError(f"SLO {name}: no band_latency in the replay")
            curves.append(curve_from_bands(bands, float(limit), what))
        return cls(int(limit), curves[0], curves[1], ref_input_tokens, kv_capacity_tokens,
                   cold_start_seconds)
