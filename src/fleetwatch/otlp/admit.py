"""Judging every decoded span before it can touch state (the join buffer, the trace
histograms, the load estimate, the SLO engine).

A span is **refused** — dropped and counted in
``fleetwatch_traces_refused_spans_total{trace_reason}`` — for the first of these reasons
(:data:`SPAN_REASONS`):

* ``future`` / ``past``: one of its times (start, end, every event; for a vLLM
  ``llm_request`` span also start + ``gen_ai.latency.e2e``) is more than
  ``max_future_skew_seconds`` ahead of the sidecar's clock or more than
  ``max_past_skew_seconds`` behind it. A span dated a day ahead would otherwise move the
  load estimate's horizon (every older occupancy pruned);
* ``bad_duration``: its end before its start, a duration or any ``gen_ai.latency.*``
  attribute that is negative, not finite or longer than ``max_duration_seconds`` (an
  infinite e2e makes the request's occupancy infinite, and every later request of the
  model would read an enormous or empty load);
* ``attribute_too_long``: a string attribute, the span's name or an event name longer
  than ``max_attribute_length`` characters;
* ``label_too_long``: the model name it carries (``triton.model_name``,
  ``gen_ai.response.model``, ``gen_ai.request.model``) is longer than the label-value
  bound of the scraped series (``scrape.max_label_value_length``): a model name becomes a
  label value of ``/metrics`` and of the engine's series.

Times are compared with the sidecar's clock only; nothing downstream takes its time from
a span (the SLO engine books a trace event at the sidecar's time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetwatch.traces.facts import MODEL_ATTRIBUTES, NS, VLLM_SPAN
from fleetwatch.traces.spans import Span

#: Why a span was refused: the ``trace_reason`` label of the refused-spans counter
#: (``too_many_models`` counts requests of a model past ``traces.max_models``).
SPAN_REASONS = ("future", "past", "bad_duration", "attribute_too_long", "label_too_long",
                "too_many_models")
#: The prefix of vLLM's per-request latency attributes (seconds).
LATENCY_PREFIX = "gen_ai.latency."


@dataclass(frozen=True, slots=True)
class SpanBounds:
    """What a span must satisfy (module docstring); seconds and characters."""

    max_future_skew_seconds: float = 300.0
    max_past_skew_seconds: float = 900.0
    max_duration_seconds: float = 3600.0
    max_attribute_length: int = 1024
    max_label_value_length: int = 4096


def _time_refusal(t_s: float, now: float, b: SpanBounds) -> str | None:
    if t_s > now + b.max_future_skew_seconds:
        return "future"
    if t_s < now - b.max_past_skew_seconds:
        return "past"
    return None


def _latency_refusal(span: Span, b: SpanBounds, now: float) -> str | None:
    """vLLM's latency attributes: finite, non-negative, bounded; start + e2e in skew."""
    for key, v in span.attributes.items():
        if not key.startswith(LATENCY_PREFIX) or isinstance(v, bool | str):
            continue
        if not math.isfinite(v) or v < 0 or v > b.max_duration_seconds:
            return "bad_duration"
    e2e = span.attributes.get(LATENCY_PREFIX + "e2e")
    if isinstance(e2e, int | float) and not isinstance(e2e, bool):
        return _time_refusal(span.start_ns * NS + e2e, now, b)
    return None


def _text_refusal(span: Span, b: SpanBounds) -> str | None:
    limit = b.max_attribute_length
    if len(span.name) > limit or any(len(name) > limit for name, _ in span.events):
        return "attribute_too_long"
    for key, v in span.attributes.items():
        if len(key) > limit or (isinstance(v, str) and len(v) > limit):
            return "attribute_too_long"
    for key in MODEL_ATTRIBUTES:
        name = span.attributes.get(key)
        if name is not None and len(str(name)) > b.max_label_value_length:
            return "label_too_long"
    return None


def refusal(span: Span, now: float, bounds: SpanBounds) -> str | None:
    """Why ``span`` is refused (one of :data:`SPAN_REASONS`), or None when it may be
    used; ``now`` is the sidecar's clock (Unix seconds)."""
    for t_ns in (span.start_ns, span.end_ns, *(t for _, t in span.events)):
        why = _time_refusal(t_ns * NS, now, bounds)
        if why is not None:
            return why
    if span.end_ns < span.start_ns \
            or (span.end_ns - span.start_ns) * NS > bounds.max_duration_seconds:
        return "bad_duration"
    if span.name == VLLM_SPAN:
        why = _latency_refusal(span, bounds, now)
        if why is not None:
            return why
    return _text_refusal(span, bounds)
