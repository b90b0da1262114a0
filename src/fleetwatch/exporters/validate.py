"""Value validation at the boundary: what an upstream series may carry, and the bounds.

The normalizer (:mod:`.normalize`) refuses, per series, values no Prometheus counter,
histogram or summary can hold, so that they never reach ``/metrics`` nor the SLO engine:

* a cumulative sample (a counter, a histogram's ``_bucket``/``_count``/``_sum``, a
  summary's ``_count``/``_sum``) that is ``NaN``/``±Inf`` (:data:`NON_FINITE`) or
  negative (:data:`NEGATIVE`);
* a summary quantile value that is negative or ``±Inf`` (:data:`NEGATIVE`,
  :data:`NON_FINITE`; ``NaN`` is what a summary without observations writes, kept);
* a histogram whose buckets decrease with ``le`` (:data:`BUCKETS_DECREASE`) or that has
  no ``le="+Inf"`` bucket (:data:`NO_INF_BUCKET`);
* an ``le`` label that is not a number or ``NaN`` (:data:`BAD_LE`), a ``quantile`` label
  outside [0, 1] (:data:`BAD_QUANTILE`), a label value longer than
  :attr:`Limits.max_label_value_length` (:data:`LABEL_TOO_LONG`), a per-model family's
  series without a ``model`` label (:data:`NO_MODEL`);
* with pass-through on, an upstream line whose value is not a number
  (:data:`BAD_VALUE`) or whose sample name does not belong to its family's declared type
  (:data:`TYPE_MISMATCH`).

A refused series is **withdrawn** for that scrape (absent from ``/metrics`` and from the
snapshot), never replaced by its last good value: serving an old value as current would
hide the fault, while an absent series is what Prometheus' ``rate()`` and the SLO
engine's carry-over (a series absent keeps its last cumulative value for an hour) already
handle — the events of the bad scrapes are counted once the series is valid again.
A histogram or summary is withdrawn whole (buckets, ``_sum``, ``_count``): a part of it
would be a different distribution. A normalized series summed from several upstream
series is withdrawn when any of them is refused (the sum without it would look like a
counter reset).

Each refusal is counted by reason (``fleetwatch_upstream_invalid_samples_total{target,
reason}``) and logged once per change of the set of reasons (``target T: refused N
sample(s) …``). Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NON_FINITE = "non_finite"
NEGATIVE = "negative"
BUCKETS_DECREASE = "buckets_decrease"
NO_INF_BUCKET = "no_inf_bucket"
BAD_LE = "bad_le"
BAD_QUANTILE = "bad_quantile"
LABEL_TOO_LONG = "label_too_long"
NO_MODEL = "no_model_label"
BAD_VALUE = "bad_value"
TYPE_MISMATCH = "type_mismatch"

#: Every ``reason`` of ``fleetwatch_upstream_invalid_samples_total`` (each appears at 0).
REASONS = (NON_FINITE, NEGATIVE, BUCKETS_DECREASE, NO_INF_BUCKET, BAD_LE, BAD_QUANTILE,
           LABEL_TOO_LONG, NO_MODEL, BAD_VALUE, TYPE_MISMATCH)

#: Value checks of a compiled series (``Entry.check``).
NO_CHECK, CUMULATIVE, QUANTILE = 0, 1, 2

#: Scrape error reasons of a bound (``fleetwatch_upstream_scrape_errors_total{reason}``).
TOO_MANY_SERIES = "too_many_series"
NORMALIZE_TIMEOUT = "normalize_timeout"

INF = math.inf


@dataclass(frozen=True)
class Limits:
    """Bounds of one target's exposition, enforced while it is read.

    * ``max_series`` — sample lines per exposition (default 250,000: a 3,000-model Triton
      writes ~48 per model, 144,000); one more and the exposition is refused whole
      (target down, reason ``too_many_series``), checked line by line while parsing;
    * ``max_label_value_length`` — characters of one label value (default 4,096); a
      longer one refuses that series (``label_too_long``);
    * ``max_seconds`` — CPU-bound normalization time of one exposition (default 10 s,
      checked every 4,096 lines); past it the exposition is refused (target down,
      reason ``normalize_timeout``).
    """

    max_series: int = 250_000
    max_label_value_length: int = 4096
    max_seconds: float = 10.0


def check_value(check: int, value: float) -> str | None:
    """The refusal reason of a value under a compiled check (None: accepted). The hot
    loop inlines the accepting comparisons; this names the reason (slow path)."""
    if check == CUMULATIVE:
        if value != value or value in (INF, -INF):
            return NON_FINITE
        return NEGATIVE if value < 0 else None
    if check == QUANTILE:
        if value in (INF, -INF):
            return NON_FINITE
        return NEGATIVE if value < 0 else None
    return None


def check_buckets(buckets: list[tuple[float, float]]) -> str | None:
    """The refusal reason of one histogram's ``(le, cumulative count)`` buckets (any
    order), or None: the counts must not decrease with ``le`` and ``+Inf`` must be
    there."""
    buckets.sort()
    if buckets[-1][0] != INF:
        return NO_INF_BUCKET
    prev = -1.0
    for _le, v in buckets:
        if v < prev:
            return BUCKETS_DECREASE
        prev = v
    return None


#: Sample-name suffixes a passed-through family of each declared type may carry.
_PASSTHROUGH_SUFFIXES = {
    "counter": ("", "_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("", "_info"),
    "stateset": ("",),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
}


def fits_type(sample: str, family: str, typ: str | None,
              labels: tuple[tuple[str, str], ...] = ()) -> bool:
    """Whether sample name ``sample`` belongs to ``family`` of declared type ``typ``
    (None, untyped or unknown: only the family's own name), with the labels Prometheus'
    parser requires: in a summary, a ``quantile`` label (required on the quantile
    sample) is a number it reads; in a histogram, so is an ``le`` label (required on a
    bucket)."""
    suffixes = _PASSTHROUGH_SUFFIXES.get(typ or "", ("",))
    base = family[:-6] if typ == "counter" and family.endswith("_total") else family
    if not any(sample == base + s for s in suffixes):
        return False
    special, required = ("quantile", sample == family) if typ == "summary" else \
        ("le", sample == family + "_bucket") if typ in ("histogram", "gaugehistogram") \
        else (None, False)
    if special is None:
        return True
    value = dict(labels).get(special)
    if value is None:
        return not required
    return prometheus_float(value) is not None


def prometheus_float(tok: str) -> float | None:
    """``tok`` as a float when Prometheus' parser (Go's ParseFloat) reads it the same way,
    else None: Python's ``float`` also takes ``1_0``, non-ASCII digits (``١``) and reads
    ``1e400`` as ``inf`` where Go refuses it as out of range."""
    if "_" in tok or not tok.isascii():
        return None
    try:
        v = float(tok)
    except ValueError:
        return None
    if v - v != 0 and v == v and tok.lstrip("+-").lower() not in ("inf", "infinity"):
        return None
    return v


def help_is_valid(text: str) -> bool:
    """Whether a HELP text uses only the escapes the text format allows (``\\\\``,
    ``\\n``): anything else makes a Prometheus reject the whole scrape."""
    i = text.find("\\")
    while i >= 0:
        if i + 1 >= len(text) or text[i + 1] not in "\\n":
            return False
        i = text.find("\\", i + 2)
    return True
